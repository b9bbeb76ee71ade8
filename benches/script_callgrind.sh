#!/usr/bin/env bash
# Instructions per EVALSHA (`return redis.call('SET', KEYS[1], ARGV[1])`), Strata beside
# redis-server, counted by valgrind's callgrind: stable where timings on a loaded machine are
# not. Each server runs under callgrind with counting off; after a warm-up, counting is on for
# exactly REQUESTS EVALSHA calls from one redis-benchmark client, then dumped. Prints each
# server's instructions per call (server user-space only; the kernel's share is not counted)
# and the ratio.
#
# Environment (all optional):
#   REQUESTS (default 20000)   PIPELINE (default 1)   PORT_BASE (default 17510)
#   STRATA_BIN  strata binary (default <repo>/target/release/strata; SKIP_BUILD=1 skips the build)
#   SERVERS     which to measure (default "redis strata")
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQUESTS="${REQUESTS:-20000}"
PIPELINE="${PIPELINE:-1}"
PORT_BASE="${PORT_BASE:-17510}"
read -r -a SERVERS <<<"${SERVERS:-redis strata}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    (cd "$ROOT" && cargo build --release --bin strata >&2)
fi
for tool in valgrind callgrind_control callgrind_annotate redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$WORK"' EXIT
SCRIPT="return redis.call('SET', KEYS[1], ARGV[1])"

declare -A IR
measure() {
    local name=$1 port=$2
    shift 2
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/$name.%p" \
        "$@" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 600); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
    local sha
    sha=$(redis-cli -p "$port" script load "$SCRIPT")
    local cmd=(evalsha "$sha" 1 key:__rand_int__ v)
    local bench=(redis-benchmark -p "$port" -c 1 -P "$PIPELINE" -r 100000 -q)
    "${bench[@]}" -n 2000 "${cmd[@]}" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
    callgrind_control -i on "$pid" >/dev/null 2>&1
    "${bench[@]}" -n "$REQUESTS" "${cmd[@]}" >/dev/null 2>&1
    callgrind_control -i off "$pid" >/dev/null 2>&1
    callgrind_control -d "$name" "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    # The dump taken on request (file name ends in .1, per thread .1-NN): every thread's total.
    local total=0 f ir
    for f in "$WORK/$name".*.1 "$WORK/$name".*.1-*; do
        [[ -e "$f" ]] || continue
        ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ && !t { gsub(",", "", $1); t = $1 } END { print t }')
        total=$((total + ${ir:-0}))
    done
    IR[$name]=$(awk -v t="$total" -v n="$REQUESTS" 'BEGIN { printf "%.0f", t / n }')
    echo "$name: ${IR[$name]} instructions per EVALSHA ($total over $REQUESTS calls, pipeline $PIPELINE)"
}

for s in "${SERVERS[@]}"; do
    case $s in
    redis) measure redis "$PORT_BASE" redis-server --port "$PORT_BASE" --save '' --appendonly no ;;
    strata) measure strata "$((PORT_BASE + 1))" "$STRATA_BIN" --port "$((PORT_BASE + 1))" \
        --proactor_threads 1 --dbfilename '' ;;
    *) echo "unknown server $s" >&2; exit 1 ;;
    esac
done
if [[ -n "${IR[redis]:-}" && -n "${IR[strata]:-}" ]]; then
    awk -v r="${IR[redis]}" -v s="${IR[strata]}" 'BEGIN { printf "strata / redis: %.2fx instructions per EVALSHA\n", s / r }'
fi
