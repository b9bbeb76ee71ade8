#!/usr/bin/env bash
# Pub/sub publish-to-delivery latency, Strata against redis-server, one core each.
#
# Each server runs alone on one CPU (taskset; Strata with --proactor_threads 1) and
# `strata-bench pubsub` runs on another: SUBSCRIBERS connections subscribed to one channel, one
# publisher on an open-loop timetable at each rate in RATES, MSG_SIZE-byte messages. Every
# message carries its scheduled publish time, so the latency includes a publisher that falls
# behind. For every (server, rate) we print delivery p50/p99 and the achieved rate, then the
# Strata/Redis ratio of each percentile (below 1 = Strata faster).
#
# Environment (all optional):
#   RATES        publish rates in messages/s, space-separated   (default "1000 10000 50000")
#   SUBSCRIBERS  subscriber connections                          (default 10)
#   MSG_SIZE     message bytes                                   (default 128)
#   DURATION     seconds per run                                 (default 10)
#   ONLY         "redis" or "strata" to bench just one server    (default both)
#   STRATA_PORT / REDIS_PORT  first ports tried                  (default 16479 / 16480)
#   SERVER_CPU / CLIENT_CPU   CPUs of the server and the bench   (default: 1st / 2nd allowed)
#   STRATA_BIN   strata binary        (default: <repo>/target/release/strata)
#   BENCH_BIN    strata-bench binary  (default: <repo>/target/release/strata-bench)
#   SKIP_BUILD=1 do not run cargo build --release
#   STARTUP_TIMEOUT seconds a server may take to answer PING    (default 20)
#
# Exit status: 0 when every run completed, 1 when a server or the bench failed.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

read -r -a RATES <<<"${RATES:-1000 10000 50000}"
SUBSCRIBERS="${SUBSCRIBERS:-10}"
MSG_SIZE="${MSG_SIZE:-128}"
DURATION="${DURATION:-10}"
ONLY="${ONLY:-}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
BENCH_BIN="${BENCH_BIN:-$ROOT/target/release/strata-bench}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"
PIN=1
SERVER_PID=""

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-pubsub.XXXXXX")"
RESULTS="$WORKDIR/results" # server rate achieved p50 p99 lost
: >"$RESULTS"

stop_server() {
    [[ -n "$SERVER_PID" ]] || return 0
    stop_pid "$SERVER_PID" 5 || true
    SERVER_PID=""
}
cleanup() {
    stop_server
    rm -rf "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    (cd "$ROOT" && cargo build --release --bin strata --bin strata-bench) || die "build failed"
fi
[[ -x "$STRATA_BIN" ]] || die "no strata binary at $STRATA_BIN"
[[ -x "$BENCH_BIN" ]] || die "no strata-bench binary at $BENCH_BIN"
command -v redis-server >/dev/null || [[ "$ONLY" == strata ]] || die "redis-server not found"
choose_cpus

start_server() {
    local name="$1" port="$2"
    local cmd
    case "$name" in
        strata) cmd=("$STRATA_BIN" --proactor_threads 1 --port "$port" --dir "$WORKDIR" --dbfilename "") ;;
        redis) cmd=(redis-server --port "$port" --save '' --appendonly no --daemonize no) ;;
    esac
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "${cmd[@]}" >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!
    if ! wait_for_ping "$port" "$SERVER_PID" "$STARTUP_TIMEOUT"; then
        tail -n 20 "$WORKDIR/$name.log" >&2
        die "$name did not start on port $port"
    fi
}

# One run: strata-bench pubsub against port $2 at rate $3; appends a line to RESULTS.
run_one() {
    local name="$1" port="$2" rate="$3" json="$WORKDIR/$1-$3.json"
    pin_prefix "$CLIENT_CPU"
    if ! "${PIN_CMD[@]}" "$BENCH_BIN" pubsub -p "$port" --subscribers "$SUBSCRIBERS" \
        --message-size "$MSG_SIZE" --rate "$rate" --duration "$DURATION" --quiet \
        --json "$json" >"$WORKDIR/$name-$rate.out" 2>&1; then
        cat "$WORKDIR/$name-$rate.out" >&2
        die "strata-bench pubsub failed against $name at $rate/s"
    fi
    python3 - "$json" "$name" "$rate" >>"$RESULTS" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
d = j.get("delivery_latency_ms") or {}
print(sys.argv[2], sys.argv[3], "%.0f" % j["achieved_rate"], d.get("p50", "nan"), d.get("p99", "nan"), j["lost"])
EOF
}

for name in strata redis; do
    [[ -z "$ONLY" || "$ONLY" == "$name" ]] || continue
    base="${STRATA_PORT:-16479}"
    [[ $name == redis ]] && base="${REDIS_PORT:-16480}"
    port="$(find_free_port "$base")"
    start_server "$name" "$port"
    for rate in "${RATES[@]}"; do
        run_one "$name" "$port" "$rate"
    done
    stop_server
done

log "pub/sub delivery latency: $SUBSCRIBERS subscribers, $MSG_SIZE B messages, ${DURATION}s per rate, server on CPU $SERVER_CPU, bench on CPU $CLIENT_CPU"
printf '%-7s %9s %9s %10s %10s %6s\n' server rate achieved p50_ms p99_ms lost
while read -r server rate achieved p50 p99 lost; do
    printf '%-7s %9s %9s %10s %10s %6s\n' "$server" "$rate" "$achieved" "$p50" "$p99" "$lost"
done <"$RESULTS"
if [[ -z "$ONLY" ]]; then
    log ""
    log "Strata / Redis (below 1 = Strata faster):"
    printf '%9s %8s %8s\n' rate p50 p99
    for rate in "${RATES[@]}"; do
        awk -v r="$rate" '
            $2 == r && $1 == "strata" { s50 = $4; s99 = $5 }
            $2 == r && $1 == "redis"  { r50 = $4; r99 = $5 }
            END {
                f = "%9s %8s %8s\n"
                p50 = (r50 > 0) ? sprintf("%.2f", s50 / r50) : "n/a"
                p99 = (r99 > 0) ? sprintf("%.2f", s99 / r99) : "n/a"
                printf f, r, p50, p99
            }' "$RESULTS"
    done
fi
