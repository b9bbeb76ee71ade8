#!/usr/bin/env bash
# EVALSHA of a small script (`return redis.call('SET', KEYS[1], ARGV[1])`): Strata against
# redis-server, each alone on SERVER_CPU, redis-benchmark on CLIENT_CPU, at pipeline 1 and 16.
# Prints ops/s and the server's CPU time per op (utime+stime from /proc), then the ratios.
#
# Environment (all optional):
#   REQUESTS (default 300000)   CLIENTS (default 50)   PIPELINES (default "1 16")
#   STRATA_BIN  strata binary (default <repo>/target/release/strata; SKIP_BUILD=1 skips the build)
#   SERVER_CPU / CLIENT_CPU (default 0 / 1)
#   PORT_BASE   redis-server's port; Strata's is the next one (default 17501)
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQUESTS="${REQUESTS:-300000}"
CLIENTS="${CLIENTS:-50}"
read -r -a PIPES <<<"${PIPELINES:-1 16}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
PORT_BASE="${PORT_BASE:-17501}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    (cd "$ROOT" && cargo build --release --bin strata >&2)
fi
command -v redis-server >/dev/null || { echo "redis-server not found" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

declare -A OPS CPU
bench() {
    local name=$1 port=$2
    shift 2
    taskset -c "$SERVER_CPU" "$@" >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    local sha
    sha=$(redis-cli -p "$port" script load "return redis.call('SET', KEYS[1], ARGV[1])")
    local hz
    hz=$(getconf CLK_TCK)
    for p in "${PIPES[@]}"; do
        local t0 t1 rps
        t0=$(cpu_ticks "$pid")
        rps=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" \
            -P "$p" -r 100000 -q evalsha "$sha" 1 key:__rand_int__ v 2>/dev/null |
            tr '\r' '\n' | grep -oE '[0-9.]+ requests per second' | tail -1 | awk '{print $1}')
        t1=$(cpu_ticks "$pid")
        OPS[$name,$p]=$rps
        CPU[$name,$p]=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$REQUESTS" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')
        echo "$name P$p: ${OPS[$name,$p]} ops/s, ${CPU[$name,$p]} us CPU/op"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

bench redis "$PORT_BASE" redis-server --port "$PORT_BASE" --save '' --appendonly no
bench strata "$((PORT_BASE + 1))" "$STRATA_BIN" --port "$((PORT_BASE + 1))" --proactor_threads 1 --dbfilename ''
echo
printf '%-9s %12s %12s %8s %8s\n' pipeline redis_ops strata_ops "ops x" "cpu x"
for p in "${PIPES[@]}"; do
    awk -v p="$p" -v ro="${OPS[redis,$p]}" -v so="${OPS[strata,$p]}" -v rc="${CPU[redis,$p]}" -v sc="${CPU[strata,$p]}" \
        'BEGIN { printf "%-9s %12.0f %12.0f %8.2f %8.2f\n", p, ro, so, so / ro, sc / rc }'
done
