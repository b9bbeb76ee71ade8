#!/usr/bin/env bash
# Compare Strata's memcached port against memcached (`memcached -t 1`), one core each.
#
# Each server runs alone, pinned to one CPU (taskset); the load generator (strata-bench, closed
# loop, or memtier_benchmark) runs on another. With ROUNDS > 1 the two servers take turns
# (memcached, strata, memcached, ...), so load from elsewhere on the machine falls on both, and
# the table shows each figure's median over the rounds. For each protocol (memcache = text, memcache-binary), pipeline depth (1, 30) and
# workload (SET only, then GET only over the keys just set) it reports the achieved ops/s and
# the server's CPU time per op (utime+stime from /proc/PID/stat), and the ratios
# strata/memcached of both.
#
# Environment (all optional):
#   DURATION     seconds per run                      (default 5)
#   CONNECTIONS  client connections                   (default 50)
#   VALUE_SIZE   value bytes                          (default 256)
#   KEYS         key space                            (default 100000)
#   PROTOCOLS    default "memcache memcache-binary"
#   PIPELINES    default "1 30"
#   ROUNDS       turns of each server                 (default 1)
#   LOADGEN      strata-bench or memtier              (default strata-bench; memtier runs
#                memtier_benchmark -t 1 with --distinct-client-seed, random keys)
#   MEMTIER_BIN  default memtier_benchmark
#   PORT         first port tried                     (default 21311)
#   SERVER_CPU / CLIENT_CPU   CPUs (default: the first two allowed)
#   STRATA_BIN   strata binary   (default: <repo>/target/release/strata)
#   BENCH_BIN    strata-bench    (default: <repo>/target/release/strata-bench)
#   SKIP_BUILD=1 do not run cargo build
#
# Exit status: 0 when the benchmark ran, 1 when a server could not be built or started.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

DURATION="${DURATION:-5}"
CONNECTIONS="${CONNECTIONS:-50}"
VALUE_SIZE="${VALUE_SIZE:-256}"
KEYS="${KEYS:-100000}"
read -r -a PROTOCOLS <<<"${PROTOCOLS:-memcache memcache-binary}"
read -r -a PIPES <<<"${PIPELINES:-1 30}"
ROUNDS="${ROUNDS:-1}"
LOADGEN="${LOADGEN:-strata-bench}"
MEMTIER_BIN="${MEMTIER_BIN:-memtier_benchmark}"
FIRST_PORT="${PORT:-21311}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
BENCH_BIN="${BENCH_BIN:-$ROOT/target/release/strata-bench}"

command -v memcached >/dev/null || die "memcached not found (apt-get install memcached)"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "Building strata and strata-bench (release)..."
    (cd "$ROOT" && cargo build --release --bin strata --bin strata-bench) || die "cargo build failed"
fi
[[ -x "$STRATA_BIN" ]] || die "strata binary not found at $STRATA_BIN"
case "$LOADGEN" in
    strata-bench) [[ -x "$BENCH_BIN" ]] || die "strata-bench not found at $BENCH_BIN" ;;
    memtier) command -v "$MEMTIER_BIN" >/dev/null || die "$MEMTIER_BIN not found" ;;
    *) die "LOADGEN must be strata-bench or memtier, not '$LOADGEN'" ;;
esac

PIN=1
choose_cpus
WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/mc-bench.XXXXXX")"
SERVER_PID=""
trap 'stop_pid "$SERVER_PID" 5 || true; rm -rf "$WORKDIR"' EXIT

# Starts server $1 (strata|memcached) on a free port; sets SERVER_PID and PORT.
start_server() {
    PORT="$(find_free_port "$FIRST_PORT")"
    pin_prefix "$SERVER_CPU"
    if [[ "$1" == strata ]]; then
        local resp
        resp="$(find_free_port $((PORT + 1)))"
        "${PIN_CMD[@]}" "$STRATA_BIN" --port "$resp" --memcached_port "$PORT" \
            --proactor_threads 1 --dbfilename "" --log_level warn &
    else
        local user=()
        [[ "$(id -u)" == 0 ]] && user=(-u root)
        "${PIN_CMD[@]}" memcached -p "$PORT" -U 0 -t 1 -l 127.0.0.1 -m 1024 "${user[@]}" &
    fi
    SERVER_PID=$!
    local i
    for ((i = 0; i < 100; i++)); do
        port_in_use "$PORT" && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || die "$1 exited at start"
        sleep 0.1
    done
    die "$1 did not listen on $PORT"
}

# One run: prints "ops_per_s us_cpu_per_op".
run_one() {
    local proto="$1" pipe="$2" ratio="$3" json="$WORKDIR/run.json" t0 t1 hz
    hz="$(getconf CLK_TCK)"
    t0="$(server_cpu_ticks)"
    pin_prefix "$CLIENT_CPU"
    if [[ "$LOADGEN" == memtier ]]; then
        local mproto=memcache_text
        [[ "$proto" == memcache-binary ]] && mproto=memcache_binary
        "${PIN_CMD[@]}" "$MEMTIER_BIN" -s 127.0.0.1 -p "$PORT" --protocol="$mproto" -t 1 \
            -c "$CONNECTIONS" --pipeline="$pipe" --ratio="$ratio" --key-minimum=1 \
            --key-maximum="$KEYS" --key-pattern=R:R --distinct-client-seed \
            --data-size="$VALUE_SIZE" --test-time="$DURATION" --hide-histogram \
            --json-out-file="$json" >/dev/null 2>&1
    else
        "${PIN_CMD[@]}" "$BENCH_BIN" run --port "$PORT" --protocol "$proto" -c "$CONNECTIONS" \
            -P "$pipe" --ratio "$ratio" --keys "$KEYS" --value-size "$VALUE_SIZE" \
            -d "$DURATION" -q --json "$json" >/dev/null
    fi
    t1="$(server_cpu_ticks)"
    python3 - "$json" "$t0" "$t1" "$hz" "$LOADGEN" "$DURATION" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ticks = int(sys.argv[3]) - int(sys.argv[2])
if sys.argv[5] == "memtier":
    t = r["ALL STATS"]["Totals"]
    rate = t["Ops/sec"]
    ops = rate * float(sys.argv[6])
else:
    ops = r["requests"]
    rate = r["achieved_rate"]
us = ticks / int(sys.argv[4]) * 1e6 / ops if ops else 0
print(f"{rate:.0f} {us:.3f}")
PY
}

RESULTS="$WORKDIR/results"
for ((round = 1; round <= ROUNDS; round++)); do
for server in memcached strata; do
    start_server "$server"
    for proto in "${PROTOCOLS[@]}"; do
        for pipe in "${PIPES[@]}"; do
            for op in SET GET; do
                ratio="1:0"
                [[ "$op" == GET ]] && ratio="0:1"
                read -r rate us < <(run_one "$proto" "$pipe" "$ratio")
                echo "$server $proto $pipe $op $rate $us" >>"$RESULTS"
                log "round $round: $server $proto P$pipe $op: $rate ops/s, $us us CPU/op"
            done
        done
    done
    stop_pid "$SERVER_PID" 5 || true
    SERVER_PID=""
done
done

echo
(( ROUNDS == 1 )) || log "medians over $ROUNDS rounds, load from $LOADGEN"
printf '%-16s %4s %4s %12s %12s %8s %10s %10s %8s\n' protocol P op memcached strata "ops x" "mc us/op" "st us/op" "cpu x"
awk '
    # The median of a list of numbers, given as "a b c".
    function median(list,    v, m, i, j, t) {
        m = split(list, v, " ")
        for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    { key = $2 " " $3 " " $4; rates[$1, key] = rates[$1, key] " " $5; uss[$1, key] = uss[$1, key] " " $6; if (!(key in seen)) { seen[key] = 1; order[n++] = key } }
    END {
        for (k in rates) rate[k] = median(rates[k])
        for (k in uss) us[k] = median(uss[k])
        for (i = 0; i < n; i++) {
            k = order[i]; split(k, f, " ")
            mr = rate["memcached", k]; sr = rate["strata", k]; mu = us["memcached", k]; su = us["strata", k]
            printf "%-16s %4s %4s %12d %12d %8.2f %10.3f %10.3f %8.2f\n", f[1], f[2], f[3], mr, sr, (mr ? sr / mr : 0), mu, su, (mu ? su / mu : 0)
        }
    }' "$RESULTS"
