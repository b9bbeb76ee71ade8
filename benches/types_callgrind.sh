#!/usr/bin/env bash
# Instructions per command of the collection commands, Strata against redis-server, counted by
# valgrind's callgrind: stable on a noisy machine where CPU time per operation is not.
#
# Each server runs under `valgrind --tool=callgrind` (Strata with one shard). For every test,
# the keys are first filled by one redis-benchmark run (not counted), the counters are zeroed,
# then N requests of the test run at pipeline 1 from one connection, and the instructions the
# server executed meanwhile, divided by N, are reported beside redis-server's with the ratio.
# Both servers pay the same socket work per request; the ratio is of everything they do.
#
# Environment (all optional):
#   TESTS        redis-benchmark tests   (default "hset lpush lpop sadd spop zadd zpopmin lrange_100")
#   N            counted requests per test (default 20000)
#   P            pipeline depth of the counted requests (default 1). At pipeline 1 the server
#                idles between requests, and how often it parks (a few thousand instructions)
#                depends on timing: read differences under about 5k instructions as noise
#                there; P=16 spreads that over 16 requests and leaves the command's own cost.
#   ONLY         "redis" or "strata"      (default both)
#   STRATA_BIN   strata binary            (default: <repo>/target/release/strata)
#   STRATA_PORT / REDIS_PORT              (default 16379 / 16380)
#
# Exit status: 0 when the counts ran, 1 when a server could not be started.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

read -r -a TESTS <<<"${TESTS:-hset lpush lpop sadd spop zadd zpopmin lrange_100}"
N="${N:-20000}"
P="${P:-1}"
ONLY="${ONLY:-}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
STRATA_PORT="${STRATA_PORT:-16379}"
REDIS_PORT="${REDIS_PORT:-16380}"
WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-cg.XXXXXX")"
RESULTS="$WORKDIR/results"
SERVER_PID=""
: >"$RESULTS"

command -v valgrind >/dev/null || die "valgrind is not installed"
command -v callgrind_control >/dev/null || die "callgrind_control is not installed"

cleanup() {
    stop_pid "$SERVER_PID" 30 || true
    rm -rf "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The instruction total of the last dump callgrind wrote for the server.
dumped_total() {
    local f
    f="$(ls -t "$WORKDIR"/cg.out.* 2>/dev/null | grep -v '\.log$' | head -n 1)"
    [[ -n "$f" ]] || die "no callgrind dump"
    awk '/^(summary|totals):/ {print $2; exit}' "$f"
}

run_server() {
    local name="$1" port="$2" test="$3" cmd total
    case "$name" in
        strata) cmd=("$STRATA_BIN" --proactor_threads 1 --port "$port" --dbfilename "") ;;
        redis) cmd=(redis-server --port "$port" --save '' --appendonly no --daemonize no) ;;
    esac
    rm -f "$WORKDIR"/cg.out.*
    valgrind --tool=callgrind --dump-instr=no --collect-atstart=yes \
        --callgrind-out-file="$WORKDIR/cg.out.%p" "${cmd[@]}" >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!
    wait_for_ping "$port" "$SERVER_PID" 120 || die "$name did not start under valgrind"
    # Fill: the pops need something to pop, LRANGE a list to read, GET strings.
    local fill="$test"
    case "$test" in
        lpop | lrange_100) fill=lpush ;;
        spop) fill=sadd ;;
        zpopmin) fill=zadd ;;
        get) fill=set ;;
    esac
    redis-benchmark -p "$port" -t "$fill" -n $((N * 2)) -r 100000 -c 1 -P 16 -q >/dev/null 2>&1
    callgrind_control -z "$SERVER_PID" >/dev/null 2>&1
    redis-benchmark -p "$port" -t "$test" -n "$N" -r 100000 -c 1 -P "$P" -q >/dev/null 2>&1
    callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
    sleep 1
    total="$(dumped_total)"
    echo "$test $name $((total / N))" >>"$RESULTS"
    printf '  %-6s %-11s %9d instructions per request\n' "$name" "$test" "$((total / N))"
    stop_pid "$SERVER_PID" 30 || warn "$name needed SIGKILL to stop"
    SERVER_PID=""
}

main() {
    local servers=(strata redis) t s
    case "$ONLY" in
        "" | both) ;;
        strata | redis) servers=("$ONLY") ;;
        *) die "ONLY must be 'redis', 'strata' or empty" ;;
    esac
    [[ " ${servers[*]} " != *" strata "* || -x "$STRATA_BIN" ]] || die "no strata binary at $STRATA_BIN"
    for t in "${TESTS[@]}"; do
        for s in "${servers[@]}"; do
            case "$s" in
                strata) run_server strata "$STRATA_PORT" "$t" ;;
                redis) run_server redis "$REDIS_PORT" "$t" ;;
            esac
        done
    done
    echo
    echo "Instructions per request at pipeline $P, one connection (callgrind; lower is better)"
    printf '%-11s | %10s %10s  %s\n' test strata redis ratio
    for t in "${TESTS[@]}"; do
        awk -v t="$t" '$1 == t { v[$2] = $3 }
            END {
                s = ("strata" in v) ? v["strata"] : "n/a"; r = ("redis" in v) ? v["redis"] : "n/a"
                ratio = (s != "n/a" && r != "n/a" && r > 0) ? sprintf("%.2f", s / r) : "n/a"
                printf "%-11s | %10s %10s  %s\n", t, s, r, ratio
            }' "$RESULTS"
    done
}

main "$@"
