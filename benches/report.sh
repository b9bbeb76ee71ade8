#!/usr/bin/env bash
# Writes docs/benchmarks.md: Strata beside redis-server and memcached, measured by strata-bench
# and cross-checked with redis-benchmark (and memtier_benchmark where it is installed), with
# the SVG charts in docs/benchmarks/. One command; about 30 minutes on a 2-core machine.
#
# Each server runs alone, pinned to one CPU (taskset), persistence off; the load runs pinned to
# another CPU. Rows measured:
#   1. GET and SET at pipeline 1 and 30 (256 B values, 1M keys, preloaded), closed loop:
#      ops/s and server CPU per op, Strata against redis-server, and redis-benchmark's figure
#      for the same load (a difference over 10% is called out);
#   2. the fixed-rate sweep (48 connections, 1:10 SET:GET, open loop): achieved rate, p50/p99
#      per level, NS (achieved < 97% of requested) marked, a latency-vs-rate chart per server;
#   3. the seeds' shapes on one core: the 1:1 SET:GET mix at pipeline 75 with 100 B values over
#      3M sequential keys, and SET with an expiry range (SET EX) at pipeline 30;
#   4. the memcached protocols (text and binary): GET and SET at pipeline 1 and 30, Strata's
#      --memcached_port against memcached -t 1;
#   5. memory per key: RSS after SETting 1M x 1 KiB and 1M x 32 B values less the empty
#      server's RSS, Strata against redis-server and memcached;
#   6. the other scripts of benches/, run with their own defaults unless noted, their summary
#      copied into the report: types_memory.sh (collection types' memory), snapshot_bench.sh
#      (BGSAVE memory and time, no compression), tiering_bench.sh (tiered GET against the
#      disk's own 4 KiB random-read rate), hit_ratio.sh (Zipf 0.99 over 150k keys with 20%
#      of the data in RAM, against Redis LRU/LFU and memcached) and
#      pubsub_compare.sh (publish-to-delivery latency).
# No figure is ever filled in by hand. Each regeneration adds a line to the report's history
# table (newest first).
#
# Environment (all optional):
#   QUICK=1         a smoke run: 2 s runs, 100k keys, three 2 s sweep levels (about 2 minutes)
#   DURATION        seconds per closed-loop run                (default 20)
#   KEYS            key space                                  (default 1000000)
#   VALUE_SIZE      bytes per value                            (default 256)
#   CONNECTIONS     closed-loop connections                    (default 50)
#   SWEEP_RATES     the sweep's levels, ops/s, comma-separated (default 10000,...,175000)
#   SWEEP_DURATION  seconds per sweep level                    (default 10)
#   MIX_KEYS        sequential keys of the 1:1 pipeline-75 mix (default 3000000)
#   EXPIRY          seconds range of the expiring SETs         (default 60-3600)
#   OUT             the report                                 (default <repo>/docs/benchmarks.md)
#   STRATA_BIN      strata binary        (default: <target>/release/strata)
#   BENCH_BIN       strata-bench binary  (default: <target>/release/strata-bench)
#   SKIP_BUILD=1    do not run cargo build
#   SERVER_CPU / CLIENT_CPU   CPUs for the server and the load (default: the first two allowed)
#   ROWS            rows to run (default "throughput shapes sweep memcached memory types
#                   snapshot tiering hitratio pubsub"); rows left out say "not measured"
#   MEMORY_KEYS     keys of the memory-per-key row             (default 1000000)
#   STARTUP_TIMEOUT seconds a server may take to start         (default 20)
#   BUSY_POLL=1     the closed-loop GET/SET rows run strata-bench --busy-poll: the client
#                   never sleeps, so the server is not charged for waking it (Strata's cost
#                   per request depends on that, redis-server's hardly; memtier and
#                   redis-benchmark sleep between replies, and then read differently)
#
# Needs: redis-server, redis-cli and redis-benchmark (installed with apt-get when missing),
# memcached (its row is skipped with a warning when missing), python3 (writes the report).
# Exit status: 0 when the report was written, 1 when a build, a server or a run failed.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

if [[ "${QUICK:-0}" == 1 ]]; then
    DURATION="${DURATION:-2}"
    KEYS="${KEYS:-100000}"
    SWEEP_RATES="${SWEEP_RATES:-10000,40000,400000}"
    SWEEP_DURATION="${SWEEP_DURATION:-2}"
    MIX_KEYS="${MIX_KEYS:-300000}"
    MEMORY_KEYS="${MEMORY_KEYS:-100000}"
fi
DURATION="${DURATION:-20}"
KEYS="${KEYS:-1000000}"
VALUE_SIZE="${VALUE_SIZE:-256}"
CONNECTIONS="${CONNECTIONS:-50}"
SWEEP_RATES="${SWEEP_RATES:-10000,25000,50000,75000,100000,125000,150000,175000}"
SWEEP_DURATION="${SWEEP_DURATION:-10}"
SWEEP_CONNECTIONS=48
MIX_KEYS="${MIX_KEYS:-3000000}"
EXPIRY="${EXPIRY:-60-3600}"
MEMORY_KEYS="${MEMORY_KEYS:-1000000}"
ROWS=" ${ROWS:-throughput shapes sweep memcached memory types snapshot tiering hitratio pubsub} "
PIPELINES=(1 30)
OUT="${OUT:-$ROOT/docs/benchmarks.md}"
CHART_DIR="$(dirname "$OUT")/benchmarks"
STRATA_BIN="${STRATA_BIN:-$TARGET_DIR/release/strata}"
BENCH_BIN="${BENCH_BIN:-$TARGET_DIR/release/strata-bench}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"
CLK_TCK="$(getconf CLK_TCK)"
PIN=1

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-report.XXXXXX")"
RESULTS="$WORKDIR/results"   # one JSON per measurement, read by the report writer
mkdir -p "$RESULTS"
SERVER_PID=""
SERVER_NAME=""
SERVER_PORT=""
SERVER_MC_PORT=""   # Strata's --memcached_port

cleanup() {
    stop_pid "$SERVER_PID" 5 || true
    rm -rf "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- setup -----------------------------------------------------------------

command -v python3 >/dev/null || die "python3 is needed to write the report"
install_redis_if_missing
choose_cpus
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    command -v cargo >/dev/null || die "cargo not found"
    log "Building strata and strata-bench (release)..."
    (cd "$ROOT" && cargo build --release --bin strata --bench disk_read --bench zipf_get \
        --bench hit_ratio --message-format=json-render-diagnostics >"$WORKDIR/build.json" && \
        cargo build --release -p strata-tools --bin strata-bench) || die "cargo build failed"
    while read -r exe; do
        case "$(basename "$exe")" in
            disk_read-*) DISK_READ_BIN="$exe" ;;
            zipf_get-*) ZIPF_GET_BIN="$exe" ;;
            hit_ratio-*) HIT_RATIO_BIN="$exe" ;;
        esac
    done < <(grep -o '"executable":"[^"]*"' "$WORKDIR/build.json" | sed 's/^"executable":"//; s/"$//')
fi
# The bench binaries of tiering_bench.sh and hit_ratio.sh: the newest built, unless named.
DISK_READ_BIN="${DISK_READ_BIN:-$(newest_bench "$TARGET_DIR" disk_read)}"
ZIPF_GET_BIN="${ZIPF_GET_BIN:-$(newest_bench "$TARGET_DIR" zipf_get)}"
HIT_RATIO_BIN="${HIT_RATIO_BIN:-$(newest_bench "$TARGET_DIR" hit_ratio)}"
[[ -x "$STRATA_BIN" ]] || die "strata binary not found at $STRATA_BIN"
[[ -x "$BENCH_BIN" ]] || die "strata-bench binary not found at $BENCH_BIN"
HAVE_MEMCACHED=1
command -v memcached >/dev/null || { warn "memcached not found: its row is skipped (apt-get install memcached)"; HAVE_MEMCACHED=0; }
HAVE_MEMTIER=1
command -v memtier_benchmark >/dev/null || HAVE_MEMTIER=0

# --- servers ---------------------------------------------------------------

# Starts server $1 (strata, redis or memcached) pinned to SERVER_CPU; sets SERVER_PID/PORT.
start_server() {
    local name="$1" port cmd
    case "$name" in
        strata)
            port="$(find_free_port 16379)"
            SERVER_MC_PORT="$(find_free_port 16679)"
            cmd=("$STRATA_BIN" --port "$port" --memcached_port "$SERVER_MC_PORT"
                 --proactor_threads 1 --dbfilename "" --dir "$WORKDIR") ;;
        redis)
            port="$(find_free_port 16479)"
            cmd=(redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no
                 --daemonize no --protected-mode no --dir "$WORKDIR") ;;
        memcached)
            port="$(find_free_port 16579)"
            cmd=(memcached -p "$port" -U 0 -t 1 -m 4096 -l 127.0.0.1)
            [[ $EUID -ne 0 ]] || cmd+=(-u root) ;;
        *) die "unknown server $name" ;;
    esac
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "${cmd[@]}" >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!
    SERVER_NAME="$name"
    SERVER_PORT="$port"
    local deadline=$((SECONDS + STARTUP_TIMEOUT))
    until port_in_use "$port"; do
        kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$name exited during startup"
        (( SECONDS < deadline )) || server_failed "$name did not listen on $port within ${STARTUP_TIMEOUT}s"
        sleep 0.1
    done
    if [[ "$name" != memcached ]]; then
        wait_for_ping "$port" "$SERVER_PID" "$STARTUP_TIMEOUT" || server_failed "$name did not answer PING"
    fi
    log "  $name on port $port (CPU $SERVER_CPU), load on CPU $CLIENT_CPU"
}

stop_server() {
    stop_pid "$SERVER_PID" 5 || warn "$SERVER_NAME had to be killed"
    SERVER_PID=""
}

server_failed() {
    printf 'ERROR: %s\n' "$1" >&2
    [[ -s "$WORKDIR/$SERVER_NAME.log" ]] && tail -n 20 "$WORKDIR/$SERVER_NAME.log" >&2
    exit 1
}

# --- measurements ----------------------------------------------------------

# Runs strata-bench (subcommand and flags in "$@") pinned to CLIENT_CPU against the running
# server; its JSON goes to $RESULTS/$1.json beside the server's CPU ticks and the command.
bench() {
    local id="$1"; shift
    local json="$RESULTS/$id.json" c0 c1 t0 t1
    pin_prefix "$CLIENT_CPU"
    c0="$(server_cpu_ticks)"; t0="$(date +%s%N)"
    "${PIN_CMD[@]}" "$BENCH_BIN" "$@" --host 127.0.0.1 --port "$SERVER_PORT" --quiet \
        --json "$json" >"$WORKDIR/bench.out" 2>"$WORKDIR/bench.err" || {
        cat "$WORKDIR/bench.err" >&2
        kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$SERVER_NAME died during $id"
        die "strata-bench failed: $id"
    }
    c1="$(server_cpu_ticks)"; t1="$(date +%s%N)"
    kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$SERVER_NAME died during $id"
    python3 - "$json" "$SERVER_NAME" "$((c1 - c0))" "$CLK_TCK" "$((t1 - t0))" "strata-bench $*" "$ROOT" <<'EOF'
import json, sys
path, server, ticks, hz, wall_ns, command, root = sys.argv[1:]
with open(path) as f:
    r = json.load(f)
r["server_name"] = server
r["server_cpu_s"] = int(ticks) / int(hz)
r["wall_s"] = int(wall_ns) / 1e9
r["command_line"] = (command + " --port $PORT").replace(root + "/", "")
with open(path, "w") as f:
    json.dump(r, f)
EOF
    python3 - "$json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
p = r.get("latency_ms") or {}
if "levels" in r:
    print(f"    sweep: {len(r['levels'])} levels")
else:
    print(f"    {r['achieved_rate']:>12.0f} ops/s  p50 {p.get('p50', 0):.3f} ms  p99 {p.get('p99', 0):.3f} ms"
          f"  server CPU {r['server_cpu_s']:.1f} s  client CPU {r['client_cpu_percent']:.0f}%"
          f"  errors {r['errors']}")
EOF
}

# redis-benchmark on the same load; its ops/s goes to $RESULTS/$1.rb.
redis_benchmark() {
    local id="$1" test="$2" pipe="$3" n="$4" out
    pin_prefix "$CLIENT_CPU"
    out="$("${PIN_CMD[@]}" redis-benchmark -h 127.0.0.1 -p "$SERVER_PORT" -t "$test" \
        -c "$CONNECTIONS" -n "$n" -P "$pipe" -d "$VALUE_SIZE" -r "$KEYS" --csv 2>/dev/null || true)"
    local rps
    rps="$(awk -F',' -v t="\"${test^^}\"" '$1 == t {gsub(/"/, "", $2); print $2}' <<<"$out")"
    if [[ -z "$rps" ]]; then
        warn "redis-benchmark $test -P $pipe against $SERVER_NAME gave no figure"
        return 0
    fi
    printf '%s\t%s\n' "$rps" \
        "redis-benchmark -t $test -c $CONNECTIONS -n $n -P $pipe -d $VALUE_SIZE -r $KEYS -p \$PORT" \
        >"$RESULTS/$id.rb"
    log "    redis-benchmark: $rps ops/s"
}

# memtier_benchmark on the same load, where it is installed; ops/s to $RESULTS/$1.memtier.
# --distinct-client-seed: by default every memtier connection draws the same key sequence, so
# all of them hit the same keys at once and the server works from a hot CPU cache; strata-bench
# gives each connection its own sequence, and so must memtier for the two to measure one load.
# Keys: memtier cannot zero-pad its numbers, so it asks for strata-bench's own names (key:
# and 12 digits) through a prefix of zeros, over the keys that have all their digits: with
# 1M keys, key:000000100000 .. key:000000999999, 90% of the preloaded space. Its unpadded
# key:N names (10 bytes) would be a different load: Strata keeps keys up to 11 bytes in the
# table and longer ones in a heap block, one more memory access per request.
memtier() {
    [[ $HAVE_MEMTIER == 1 ]] || return 0
    local id="$1" ratio="$2" pipe="$3" out rps digits prefix low
    digits=${#KEYS}
    (( KEYS > 10 ** (digits - 1) )) || digits=$((digits - 1))   # digits of KEYS-1
    (( digits >= 1 && digits <= 12 )) || { warn "memtier: no key range for $KEYS keys"; return 0; }
    prefix="key:$(printf '%0*d' $((12 - digits)) 0)"
    [[ $digits == 12 ]] && prefix="key:"
    low=$((10 ** (digits - 1)))
    pin_prefix "$CLIENT_CPU"
    out="$("${PIN_CMD[@]}" memtier_benchmark -s 127.0.0.1 -p "$SERVER_PORT" --protocol=redis \
        -t 1 -c "$CONNECTIONS" --pipeline "$pipe" --ratio "$ratio" -d "$VALUE_SIZE" \
        --key-prefix "$prefix" --key-minimum "$low" --key-maximum "$((KEYS - 1))" \
        --distinct-client-seed --test-time "$DURATION" --hide-histogram 2>/dev/null || true)"
    rps="$(awk '/^Totals/ {print $2}' <<<"$out")"
    [[ -n "$rps" ]] || { warn "memtier_benchmark gave no figure for $id"; return 0; }
    printf '%s\t%s\n' "$rps" \
        "memtier_benchmark -t 1 -c $CONNECTIONS --pipeline $pipe --ratio $ratio -d $VALUE_SIZE --key-prefix $prefix --key-minimum $low --key-maximum $((KEYS - 1)) --distinct-client-seed --test-time $DURATION -p \$PORT" \
        >"$RESULTS/$id.memtier"
    log "    memtier_benchmark: $rps ops/s"
}

LOAD=(--connections "$CONNECTIONS" --keys "$KEYS" --value-size "$VALUE_SIZE" --key-width 12)
POLL=()
[[ "${BUSY_POLL:-0}" == 1 ]] && POLL=(--busy-poll)

# Row 1: GET and SET, pipeline 1 and 30, closed loop, on a preloaded key space.
throughput_row() {
    local name="$1" pipe n
    log "GET/SET throughput: $name"
    start_server "$name"
    log "  preload ($KEYS keys)"
    bench "preload-$name" run "${LOAD[@]}" --preload --ratio 0:1 --duration 0.1
    for pipe in "${PIPELINES[@]}"; do
        log "  GET, pipeline $pipe"
        bench "get-p$pipe-$name" run "${LOAD[@]}" "${POLL[@]}" --ratio 0:1 --pipeline "$pipe" \
            --duration "$DURATION"
        n="$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["requests"]))' "$RESULTS/get-p$pipe-$name.json")"
        redis_benchmark "get-p$pipe-$name" get "$pipe" "$n"
        memtier "get-p$pipe-$name" 0:1 "$pipe"
        log "  SET, pipeline $pipe"
        bench "set-p$pipe-$name" run "${LOAD[@]}" "${POLL[@]}" --ratio 1:0 --pipeline "$pipe" \
            --duration "$DURATION"
        n="$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["requests"]))' "$RESULTS/set-p$pipe-$name.json")"
        redis_benchmark "set-p$pipe-$name" set "$pipe" "$n"
        memtier "set-p$pipe-$name" 1:0 "$pipe"
    done
    stop_server
}

# Row 3: the seeds' shapes, on a fresh server each.
shapes_row() {
    local name="$1"
    log "The seeds' shapes: $name"
    start_server "$name"
    log "  1:1 SET:GET, pipeline 75, 100 B values, $MIX_KEYS sequential keys"
    bench "mix-p75-$name" run --connections "$CONNECTIONS" --keys "$MIX_KEYS" \
        --key-dist sequential --value-size 100 --ratio 1:1 --pipeline 75 --duration "$DURATION"
    log "  SET EX $EXPIRY s, pipeline 30"
    bench "setex-p30-$name" run "${LOAD[@]}" --ratio 1:0 --expiry "$EXPIRY" --pipeline 30 \
        --duration "$DURATION"
    stop_server
}

# Row 2: the fixed-rate sweep, 48 connections, 1:10 SET:GET.
sweep_row() {
    local name="$1"
    log "Fixed-rate sweep: $name ($SWEEP_RATES /s, ${SWEEP_DURATION}s each)"
    start_server "$name"
    mkdir -p "$CHART_DIR"
    bench "sweep-$name" sweep --connections "$SWEEP_CONNECTIONS" --keys "$KEYS" \
        --value-size "$VALUE_SIZE" --ratio 1:10 --preload --rates "$SWEEP_RATES" \
        --duration "$SWEEP_DURATION"
    stop_server
}

# Both servers' sweeps on one latency-vs-rate chart.
sweep_chart() {
    local args=()
    [[ -f "$RESULTS/sweep-strata.json" ]] && args+=("Strata=$RESULTS/sweep-strata.json")
    [[ -f "$RESULTS/sweep-redis.json" ]] && args+=("redis-server=$RESULTS/sweep-redis.json")
    (( ${#args[@]} )) || return 0
    "$BENCH_BIN" chart --svg "$CHART_DIR/sweep.svg" \
        --title "$SWEEP_CONNECTIONS connections, 1:10 SET:GET, $VALUE_SIZE B values, $KEYS keys, ${SWEEP_DURATION} s per level, open loop" \
        "${args[@]}" >/dev/null || die "strata-bench chart failed"
}

# Row 4: the memcached protocols, Strata's memcached port against memcached.
memcached_row() {
    local name="$1" proto pipe test
    log "memcached protocols: $name"
    start_server "$name"
    [[ "$name" == strata ]] && SERVER_PORT="$SERVER_MC_PORT"
    for proto in memcache memcache-binary; do
        log "  $proto: preload ($KEYS keys)"
        bench "mc-preload-$proto-$name" run --protocol "$proto" "${LOAD[@]}" --preload \
            --ratio 0:1 --duration 0.1
        for pipe in "${PIPELINES[@]}"; do
            for test in get set; do
                log "  $proto $test, pipeline $pipe"
                local ratio=0:1
                [[ $test == set ]] && ratio=1:0
                bench "mc-$proto-$test-p$pipe-$name" run --protocol "$proto" "${LOAD[@]}" \
                    --ratio "$ratio" --pipeline "$pipe" --duration "$DURATION"
            done
        done
    done
    stop_server
}

# Resident set size of the running server, KiB.
server_rss_kb() {
    awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0
}

# Row 5: memory per key, 1M x 1 KiB and 1M x 32 B values, a fresh server for each.
memory_row() {
    local name="$1" size proto before after
    for size in 1024 32; do
        log "Memory per key: $name, $MEMORY_KEYS x $size B"
        start_server "$name"
        proto=resp
        if [[ "$name" == memcached ]]; then proto=memcache; fi
        sleep 1
        before="$(server_rss_kb)"
        bench "mem-$size-$name" run --protocol "$proto" --connections "$CONNECTIONS" \
            --keys "$MEMORY_KEYS" --value-size "$size" --key-width 12 --preload --ratio 0:1 \
            --duration 0.1
        sleep 1
        after="$(server_rss_kb)"
        printf '%s\t%s\n' "$before" "$after" >"$RESULTS/mem-$size-$name.rss"
        log "    RSS $before KiB empty, $after KiB loaded"
        stop_server
    done
}

# The VAR=value words of a command line, shell-quoted, each followed by a space.
env_words() {
    (($#)) || return 0
    printf '%q ' "$@"
}

# Row 6: another script of benches/, its output kept for the report with the command line.
script_row() {
    local id="$1" script="$2"; shift 2
    log "$script $*"
    local env_args=(SKIP_BUILD=1 STRATA_BIN="$STRATA_BIN" BENCH_BIN="$BENCH_BIN"
                    DISK_READ_BIN="$DISK_READ_BIN" ZIPF_GET_BIN="$ZIPF_GET_BIN"
                    HIT_RATIO_BIN="$HIT_RATIO_BIN" SERVER_CPU="$SERVER_CPU"
                    CLIENT_CPU="$CLIENT_CPU" "$@")
    if env "${env_args[@]}" bash "$SCRIPT_DIR/$script" >"$RESULTS/$id.out" 2>"$RESULTS/$id.err"; then
        printf '%sbenches/%s\n' "$(env_words "$@")" "$script" >"$RESULTS/$id.cmd"
        tail -n 3 "$RESULTS/$id.out"
    else
        warn "benches/$script failed; its row says so (last lines: $(tail -n 2 "$RESULTS/$id.err" | tr '\n' ' '))"
        printf '%sbenches/%s (failed)\n' "$(env_words "$@")" "$script" >"$RESULTS/$id.cmd"
    fi
}

row() { [[ "$ROWS" == *" $1 "* ]]; }

LOADAVG="$(cut -d' ' -f1-3 /proc/loadavg)"
STARTED="$(date -u '+%Y-%m-%d %H:%M UTC')"
MC_SERVERS=(strata)
[[ $HAVE_MEMCACHED == 1 ]] && MC_SERVERS+=(memcached)
if row throughput; then for name in strata redis; do throughput_row "$name"; done; fi
if row shapes; then for name in strata redis; do shapes_row "$name"; done; fi
if row sweep; then for name in strata redis; do sweep_row "$name"; done; sweep_chart; fi
if row memcached; then for name in "${MC_SERVERS[@]}"; do memcached_row "$name"; done; fi
if row memory; then for name in strata redis "${MC_SERVERS[@]:1}"; do memory_row "$name"; done; fi
if [[ "${QUICK:-0}" == 1 ]]; then
    row types && script_row types types_memory.sh SCALE=20
    row snapshot && script_row snapshot snapshot_bench.sh SNAPSHOT_COMPRESSIONS=none KEYS=50000
    row tiering && script_row tiering tiering_bench.sh MAXMEM=32mb DURATION=3 HOT_ROUNDS=1 HOT_SECONDS=2
    row hitratio && script_row hitratio hit_ratio.sh SCALE=0.05 CACHE_PCT=40 TRACES=zipf0.99 \
        "SERVERS=redis-lru strata-ram"
    row pubsub && script_row pubsub pubsub_compare.sh DURATION=2 "RATES=1000 10000"
else
    row types && script_row types types_memory.sh
    row snapshot && script_row snapshot snapshot_bench.sh SNAPSHOT_COMPRESSIONS=none
    row tiering && script_row tiering tiering_bench.sh DURATION=10 HOT_ROUNDS=2
    row hitratio && script_row hitratio hit_ratio.sh SCALE=0.15 CACHE_PCT=20 TRACES=zipf0.99 \
        "SERVERS=redis-lru redis-lfu strata-ram strata-ram+ssd memcached strata-mc"
    row pubsub && script_row pubsub pubsub_compare.sh
fi
true


# --- the report ------------------------------------------------------------

root_dev="$(findmnt -no SOURCE / 2>/dev/null || true)"
DISK="$(lsblk -ndo NAME,MODEL,SIZE,ROTA "$root_dev" 2>/dev/null | awk '{rota=$NF; $NF=""; print $0 (rota==1 ? "(rotational, per lsblk)" : "(non-rotational)")}' || true)"
export REPORT_OUT="$OUT" REPORT_RESULTS="$RESULTS" REPORT_CHARTS="$CHART_DIR"
export REPORT_DATE="$STARTED" REPORT_LOADAVG="$LOADAVG" REPORT_DISK="${DISK:-unknown}"
export REPORT_CORES="$(nproc)" REPORT_CPU="$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
export REPORT_KERNEL="$(uname -r)" REPORT_MEM="$(awk '/^MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
export REPORT_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty')"
export REPORT_REDIS="$(redis-server --version | awk '{print $3}' | sed 's/v=//')"
export REPORT_MEMCACHED="$(memcached -V 2>/dev/null | awk '{print $2}' || true)"
export REPORT_PIN="$PIN" REPORT_SERVER_CPU="$SERVER_CPU" REPORT_CLIENT_CPU="$CLIENT_CPU"
export REPORT_ROWS="$ROWS"
export REPORT_SETTINGS="DURATION=$DURATION MEMORY_KEYS=$MEMORY_KEYS KEYS=$KEYS VALUE_SIZE=$VALUE_SIZE CONNECTIONS=$CONNECTIONS SWEEP_RATES=$SWEEP_RATES SWEEP_DURATION=$SWEEP_DURATION MIX_KEYS=$MIX_KEYS EXPIRY=$EXPIRY"
python3 "$SCRIPT_DIR/report_md.py"
log "Wrote $OUT (charts in $CHART_DIR)"
