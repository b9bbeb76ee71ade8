#!/usr/bin/env bash
# Compare Strata against redis-server with redis-benchmark, one core each.
#
# Each server runs alone on one CPU (taskset), redis-benchmark runs on another,
# and the servers are benchmarked one after another so neither competes with
# the other for its core. For every (server, test, pipeline) we report the
# median requests/s over ROUNDS rounds and the median server CPU time per
# operation (utime+stime from /proc/PID/stat), since on a 2-core machine CPU
# per op is the fairer measure of efficiency when the client saturates first.
#
# Environment (all optional):
#   TESTS        redis-benchmark tests, space-separated    (default "SET GET"; the
#                collection types: TESTS="HSET LPUSH LPOP SADD SPOP ZADD ZPOPMIN LRANGE_100")
#   N            requests per redis-benchmark run          (default 200000)
#   N_P1, N_P16  override N for pipeline 1 / pipeline 16   (default N; N_P16 defaults
#                to 10*N so a pipelined run lasts long enough for CPU ticks to count)
#   ROUNDS       rounds per configuration, median reported (default 3)
#   ONLY         "redis" or "strata" to bench just one server (default both)
#   STRATA_PORT  first port tried for strata               (default 16379)
#   REDIS_PORT   first port tried for redis-server         (default 16380)
#   SERVER_CPU   CPU the server is pinned to   (default: 1st allowed CPU)
#   CLIENT_CPU   CPU redis-benchmark runs on   (default: 2nd allowed CPU)
#   STRATA_BIN   strata binary   (default: <repo>/target/release/strata)
#   SKIP_BUILD=1 do not run cargo build
#   BENCH_TIMEOUT   seconds one redis-benchmark run may take  (default 600)
#   STARTUP_TIMEOUT seconds a server may take to answer PING  (default 20)
#
# Exit status: 0 when the benchmark ran (targets are informational), 1 when a
# server could not be built, started, or died during a run.
set -euo pipefail
export LC_ALL=C   # "." decimals for awk/printf whatever the locale

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

N="${N:-200000}"
N_P1="${N_P1:-$N}"
N_P16="${N_P16:-$((N * 10))}"
ROUNDS="${ROUNDS:-3}"
ONLY="${ONLY:-}"
STRATA_PORT="${STRATA_PORT:-16379}"
REDIS_PORT="${REDIS_PORT:-16380}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
SKIP_BUILD="${SKIP_BUILD:-0}"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-600}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"

# Run in this order: a write before the reads and pops that need its keys.
read -r -a TESTS <<<"${TESTS:-SET GET}"
PIPELINES=(1 16)
CLIENTS=50
DATA_SIZE=256
KEYSPACE=100000
# Targets: strata/redis ops/s ratio per pipeline depth (informational only).
declare -A TARGET=([1]=1.0 [16]=1.2)

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-bench.XXXXXX")"
SAMPLES="$WORKDIR/samples"   # one line per run: server test pipeline rps us_per_op cpu_pct
: >"$SAMPLES"
SERVER_PID=""                # the one server running now (they never overlap)
SERVER_NAME=""
BENCH_PID=""                 # redis-benchmark while one runs
CLK_TCK="$(getconf CLK_TCK)"
PIN=1

# --- cleanup ---------------------------------------------------------------

# Stop the running server: TERM first so it exits cleanly, KILL if it hangs.
stop_server() {
    local pid="$SERVER_PID"
    [[ -n "$pid" ]] || return 0
    SERVER_PID=""
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        local i
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true   # reap it so no zombie is left
}

cleanup() {
    if [[ -n "$BENCH_PID" ]]; then
        kill -TERM "$BENCH_PID" 2>/dev/null || true   # timeout passes TERM on to redis-benchmark
        wait "$BENCH_PID" 2>/dev/null || true
    fi
    stop_server
    rm -rf "$WORKDIR"
}
# EXIT covers normal ends and `die`; INT/TERM turn into an exit so EXIT runs.
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- setup -----------------------------------------------------------------

# --- servers ---------------------------------------------------------------

# Start a server pinned to SERVER_CPU and wait until it answers PING.
start_server() {
    local name="$1" port="$2" logf="$WORKDIR/$1.log"
    local cmd
    case "$name" in
        strata) cmd=("$STRATA_BIN" --proactor_threads 1 --port "$port" --dbfilename "") ;;
        redis)  cmd=(redis-server --port "$port" --save '' --appendonly no --daemonize no) ;;
    esac
    pin_prefix "$SERVER_CPU"
    # taskset execs the server, so $! is the server's own PID (needed for /proc stats).
    "${PIN_CMD[@]}" "${cmd[@]}" >"$logf" 2>&1 &
    SERVER_PID=$!
    SERVER_NAME="$name"
    local deadline=$((SECONDS + STARTUP_TIMEOUT))
    until [[ "$(timeout 2 redis-cli -p "$port" ping 2>/dev/null)" == PONG ]]; do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            server_failed "$name exited during startup"
        fi
        (( SECONDS < deadline )) || server_failed "$name did not answer PING on port $port within ${STARTUP_TIMEOUT}s"
        sleep 0.1
    done
    check_pinning "$name"
}

# Print the server's log tail and exit 1: results without a live server are meaningless.
server_failed() {
    printf 'ERROR: %s\n' "$1" >&2
    if [[ -s "$WORKDIR/$SERVER_NAME.log" ]]; then
        printf -- '--- last lines of %s log ---\n' "$SERVER_NAME" >&2
        tail -n 20 "$WORKDIR/$SERVER_NAME.log" >&2
    fi
    exit 1
}

# A server may re-pin its own threads (e.g. one executor per core); warn if
# any thread escaped SERVER_CPU, because then the comparison is not one core each.
check_pinning() {
    [[ $PIN -eq 1 ]] || return 0
    local st list
    for st in /proc/"$SERVER_PID"/task/*/status; do
        list="$(awk '/^Cpus_allowed_list/ {print $2}' "$st" 2>/dev/null || true)"
        if [[ -n "$list" && "$list" != "$SERVER_CPU" ]]; then
            warn "$1 thread ${st#/proc/*/task/} may run on CPUs $list, not only $SERVER_CPU"
            return 0
        fi
    done
}

# --- benchmark -------------------------------------------------------------

# One redis-benchmark run of one test; appends a line to $SAMPLES.
bench_one() {
    local name="$1" port="$2" test="$3" pipe="$4" n="$5"
    local lc_test="${test,,}" out rc t0 t1 c0 c1 rps sample
    pin_prefix "$CLIENT_CPU"
    c0="$(server_cpu_ticks)"; t0="$(date +%s%N)"
    # Run the client as a background child and `wait` for it: bash runs INT/TERM
    # traps during `wait` at once, whereas it defers them until a foreground
    # command ends (a long run would delay cleanup).
    rc=0
    "${PIN_CMD[@]}" timeout "$BENCH_TIMEOUT" redis-benchmark \
        -h 127.0.0.1 -p "$port" -t "$lc_test" -c "$CLIENTS" -d "$DATA_SIZE" \
        -r "$KEYSPACE" -n "$n" -P "$pipe" --csv >"$WORKDIR/bench.out" 2>"$WORKDIR/bench.err" &
    BENCH_PID=$!
    wait "$BENCH_PID" || rc=$?
    BENCH_PID=""
    t1="$(date +%s%N)"
    out="$(cat "$WORKDIR/bench.out")"
    (( rc != 124 )) || warn "$name $test -P $pipe: redis-benchmark hit BENCH_TIMEOUT (${BENCH_TIMEOUT}s)"
    kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$name died during $test -P $pipe"
    c1="$(server_cpu_ticks)"
    # CSV line: "SET","123456.78",... or "LRANGE_100 (first 100 elements)","...",...
    # (redis-benchmark exits at the first server error)
    rps="$(awk -F',' -v t="$test" '{n = $1; gsub(/"/, "", n); sub(/ .*/, "", n)}
        n == t {gsub(/"/, "", $2); print $2}' <<<"$out")"
    if [[ $rc -ne 0 || -z "$rps" ]]; then
        warn "$name $test -P $pipe: redis-benchmark failed (rc=$rc): $(head -c 300 "$WORKDIR/bench.err" | tr '\n' ' ')"
        return 0
    fi
    local ticks=$((c1 - c0))
    if (( ticks < 50 )); then
        warn "$name $test -P $pipe used only $ticks CPU ticks (1 tick = $((1000 / CLK_TCK)) ms); CPU/op is coarse, raise N (or N_P$pipe)"
    fi
    # us/op = ticks / CLK_TCK s * 1e6 / n; cpu% = server CPU time / wall time.
    sample="$(awk -v k="$ticks" -v hz="$CLK_TCK" -v n="$n" -v ns="$((t1 - t0))" \
        'BEGIN { printf "%.4f %.1f", k / hz * 1e6 / n, (k / hz) / (ns / 1e9) * 100 }')"
    echo "$name $test $pipe $rps $sample" >>"$SAMPLES"
    printf '  %-6s %-10s P=%-2s %12.0f ops/s  %7.3f us CPU/op  server CPU %5.1f%%\n' \
        "$name" "$test" "$pipe" "$rps" ${sample}
}

# Start a fresh server, run every test at every pipeline depth, stop it.
bench_server() {
    local name="$1" port="$2" pipe test n
    start_server "$name" "$port"
    for pipe in "${PIPELINES[@]}"; do
        if [[ $pipe -eq 1 ]]; then n="$N_P1"; else n="$N_P16"; fi
        for test in "${TESTS[@]}"; do
            bench_one "$name" "$port" "$test" "$pipe" "$n"
        done
    done
    stop_server
}

# --- report ----------------------------------------------------------------

# Median of column $4 (rps), $5 (us/op) or $6 (cpu%) for one server/test/pipeline; "n/a" if no sample.
median() {
    local server="$1" test="$2" pipe="$3" col="$4"
    awk -v s="$server" -v t="$test" -v p="$pipe" -v c="$col" \
        '$1 == s && $2 == t && $3 == p {print $c}' "$SAMPLES" | sort -g |
        awk '{v[NR] = $1} END {
            if (NR == 0) { print "n/a"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# a/b with 2 decimals, or n/a when either side is missing.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'
}

fmt() {  # number with given decimals, n/a passes through
    awk -v v="$1" -v d="$2" 'BEGIN { if (v == "n/a") print v; else printf "%.*f", d, v }'
}

print_report() {
    local test pipe sr rr so ro sc rc
    log ""
    log "Median of $ROUNDS round(s); $CLIENTS clients, ${DATA_SIZE}-byte values, keyspace $KEYSPACE."
    log "us/op = server CPU (user+sys) microseconds per request; cpu% = server CPU / wall time."
    log "ops ratio = strata/redis (higher is better); CPU ratio = strata/redis (lower is better)."
    log ""
    printf '%-10s %3s | %12s %12s %6s | %8s %8s %6s | %7s %7s\n' \
        test P "strata ops/s" "redis ops/s" ratio "strata" "redis" ratio "strata" "redis"
    printf '%-10s %3s | %12s %12s %6s | %8s %8s %6s | %7s %7s\n' \
        "" "" "" "" "" "us/op" "us/op" "" "cpu%" "cpu%"
    printf -- '-%.0s' {1..92}; echo
    for pipe in "${PIPELINES[@]}"; do
        for test in "${TESTS[@]}"; do
            sr="$(median strata "$test" "$pipe" 4)"; rr="$(median redis "$test" "$pipe" 4)"
            so="$(median strata "$test" "$pipe" 5)"; ro="$(median redis "$test" "$pipe" 5)"
            sc="$(median strata "$test" "$pipe" 6)"; rc="$(median redis "$test" "$pipe" 6)"
            printf '%-10s %3s | %12s %12s %6s | %8s %8s %6s | %7s %7s\n' "$test" "$pipe" \
                "$(fmt "$sr" 0)" "$(fmt "$rr" 0)" "$(ratio "$sr" "$rr")" \
                "$(fmt "$so" 3)" "$(fmt "$ro" 3)" "$(ratio "$so" "$ro")" \
                "$(fmt "$sc" 1)" "$(fmt "$rc" 1)"
        done
    done
    log ""
    log "Targets (informational, ops/s ratio strata/redis):"
    local r verdict
    for pipe in "${PIPELINES[@]}"; do
        for test in "${TESTS[@]}"; do
            r="$(ratio "$(median strata "$test" "$pipe" 4)" "$(median redis "$test" "$pipe" 4)")"
            if [[ "$r" == n/a ]]; then verdict="n/a (needs both servers)"
            elif awk -v r="$r" -v t="${TARGET[$pipe]}" 'BEGIN { exit !(r >= t) }'; then verdict="MET"
            else verdict="NOT MET"
            fi
            printf '  %-10s P=%-2s ratio %-5s >= %.1f : %s\n' "$test" "$pipe" "$r" "${TARGET[$pipe]}" "$verdict"
        done
    done
    log ""
    log "If a server's cpu% is well under 100, the single-core client was the bottleneck:"
    log "compare us/op rather than ops/s for that row."
}

# --- main ------------------------------------------------------------------

main() {
    local servers=()
    case "$ONLY" in
        "" | both) servers=(strata redis) ;;
        strata | redis) servers=("$ONLY") ;;
        *) die "ONLY must be 'redis', 'strata' or empty (got '$ONLY')" ;;
    esac
    [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"

    install_redis_if_missing
    if [[ " ${servers[*]} " == *" strata "* ]]; then build_strata "strata cannot be benchmarked (try ONLY=redis)"; fi
    choose_cpus

    local -A port
    port[strata]="$(find_free_port "$STRATA_PORT")"
    port[redis]="$(find_free_port "$REDIS_PORT")"
    [[ "${port[strata]}" != "${port[redis]}" ]] || port[redis]="$(find_free_port $((port[strata] + 1)))"

    log "Servers: ${servers[*]}  rounds: $ROUNDS  requests: P1=$N_P1 P16=$N_P16"
    if [[ $PIN -eq 1 ]]; then
        log "Server on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU (of $(nproc))"
    fi
    for s in "${servers[@]}"; do log "  $s port ${port[$s]}"; done

    local round s order
    for ((round = 1; round <= ROUNDS; round++)); do
        # Alternate which server goes first so drift (heat, noisy neighbours)
        # does not always favour the same one.
        order=("${servers[@]}")
        if (( round % 2 == 0 && ${#servers[@]} == 2 )); then order=("${servers[1]}" "${servers[0]}"); fi
        log ""
        log "Round $round/$ROUNDS"
        for s in "${order[@]}"; do
            bench_server "$s" "${port[$s]}"
        done
    done

    print_report
}

main "$@"
