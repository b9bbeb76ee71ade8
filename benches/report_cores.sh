#!/usr/bin/env bash
# The multi-core section of the benchmark report, for machines with more cores than the 2 that
# benches/report.sh is sized for: Strata on N cores (--proactor_threads N) against N redis-server
# processes, one per core, with strata-bench spreading the keys over the redis-servers by hash
# slot as a cluster client does (--servers). Writes docs/benchmarks-cores.md.
#
#   benches/report_cores.sh --cores 4        # needs at least 5 CPUs: 4 for servers, the rest load
#
# Rows: GET and SET at pipeline 1 and 30 (256 B values, 1M preloaded keys, 50 connections per
# server core, closed loop), ops/s and server CPU per op (all N redis-servers' CPU together).
# The servers get CPUs 0..N-1 of those this process may use; strata-bench gets the others, one
# thread per CPU.
#
# Environment (all optional): DURATION (default 20), KEYS (1000000), VALUE_SIZE (256),
# CONNECTIONS (50 per server core), OUT (<repo>/docs/benchmarks-cores.md), STRATA_BIN,
# BENCH_BIN, SKIP_BUILD=1, STARTUP_TIMEOUT (20).
# Exit status: 0 when the page was written, 1 when a build, a server or a run failed, 2 for
# bad arguments.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

CORES=""
while (($#)); do
    case "$1" in
        --cores) CORES="${2:-}"; shift 2 || true ;;
        --cores=*) CORES="${1#--cores=}"; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) printf 'ERROR: unknown argument %s (usage: %s --cores N)\n' "$1" "$0" >&2; exit 2 ;;
    esac
done
[[ "$CORES" =~ ^[1-9][0-9]*$ ]] || { printf 'ERROR: --cores N is required (N >= 1)\n' >&2; exit 2; }

DURATION="${DURATION:-20}"
KEYS="${KEYS:-1000000}"
VALUE_SIZE="${VALUE_SIZE:-256}"
CONNECTIONS="${CONNECTIONS:-$((50 * CORES))}"
OUT="${OUT:-$ROOT/docs/benchmarks-cores.md}"
STRATA_BIN="${STRATA_BIN:-$TARGET_DIR/release/strata}"
BENCH_BIN="${BENCH_BIN:-$TARGET_DIR/release/strata-bench}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"
CLK_TCK="$(getconf CLK_TCK)"

mapfile -t CPUS < <(expand_cpulist "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)")
(( ${#CPUS[@]} > CORES )) || die "--cores $CORES needs at least $((CORES + 1)) CPUs (this process may use ${#CPUS[@]}): the load needs one of its own"
command -v taskset >/dev/null || die "taskset is needed to pin the servers"
command -v python3 >/dev/null || die "python3 is needed to write the page"
SERVER_CPUS=("${CPUS[@]:0:CORES}")
CLIENT_CPUS=("${CPUS[@]:CORES}")
SERVER_LIST="$(IFS=,; echo "${SERVER_CPUS[*]}")"
CLIENT_LIST="$(IFS=,; echo "${CLIENT_CPUS[*]}")"
THREADS="${#CLIENT_CPUS[@]}"
(( THREADS <= CONNECTIONS )) || THREADS="$CONNECTIONS"

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-cores.XXXXXX")"
RESULTS="$WORKDIR/results"
mkdir -p "$RESULTS"
PIDS=()      # the server processes now running
PORTS=()

stop_servers() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid" 5 || true; done
    PIDS=(); PORTS=()
}
cleanup() { stop_servers; rm -rf "$WORKDIR"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

install_redis_if_missing
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "Building strata and strata-bench (release)..."
    (cd "$ROOT" && cargo build --release --bin strata && \
        cargo build --release -p strata-tools --bin strata-bench) || die "cargo build failed"
fi
[[ -x "$STRATA_BIN" ]] || die "strata binary not found at $STRATA_BIN"
[[ -x "$BENCH_BIN" ]] || die "strata-bench binary not found at $BENCH_BIN"

# Starts Strata on all server CPUs, or one redis-server per server CPU.
start_servers() {
    local name="$1" port i
    if [[ "$name" == strata ]]; then
        port="$(find_free_port 17379)"
        taskset -c "$SERVER_LIST" "$STRATA_BIN" --port "$port" --proactor_threads "$CORES" \
            --dbfilename "" --dir "$WORKDIR" >"$WORKDIR/strata.log" 2>&1 &
        PIDS+=($!); PORTS+=("$port")
    else
        port=17479
        for ((i = 0; i < CORES; i++)); do
            port="$(find_free_port "$port")"
            taskset -c "${SERVER_CPUS[$i]}" redis-server --port "$port" --bind 127.0.0.1 \
                --save "" --appendonly no --daemonize no --protected-mode no --dir "$WORKDIR" \
                >"$WORKDIR/redis-$i.log" 2>&1 &
            PIDS+=($!); PORTS+=("$port")
            port=$((port + 1))
        done
    fi
    for i in "${!PORTS[@]}"; do
        wait_for_ping "${PORTS[$i]}" "${PIDS[$i]}" "$STARTUP_TIMEOUT" \
            || die "$name on port ${PORTS[$i]} did not start: $(tail -n 5 "$WORKDIR"/*.log)"
    done
    log "  $name: ${#PIDS[@]} process(es) on CPUs $SERVER_LIST, load on CPUs $CLIENT_LIST ($THREADS threads)"
}

# CPU ticks (utime + stime) of all running servers together.
servers_ticks() {
    local pid stat total=0
    for pid in "${PIDS[@]}"; do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        total=$((total + $(awk '{print $12 + $13}' <<<"${stat##*) }")))
    done
    echo "$total"
}

# strata-bench against the running servers; JSON to $RESULTS/$1.json with the servers' CPU.
bench() {
    local id="$1"; shift
    local json="$RESULTS/$id.json" c0 c1 target=()
    if (( ${#PORTS[@]} == 1 )); then
        target=(--port "${PORTS[0]}")
    else
        target=(--servers "$(printf '127.0.0.1:%s,' "${PORTS[@]}" | sed 's/,$//')")
    fi
    c0="$(servers_ticks)"
    taskset -c "$CLIENT_LIST" "$BENCH_BIN" run "${target[@]}" --threads "$THREADS" --quiet \
        --json "$json" "$@" >"$WORKDIR/bench.out" 2>&1 \
        || { cat "$WORKDIR/bench.out" >&2; die "strata-bench failed: $id"; }
    c1="$(servers_ticks)"
    python3 - "$json" "$((c1 - c0))" "$CLK_TCK" "strata-bench run $*" <<'EOF'
import json, sys
path, ticks, hz, command = sys.argv[1:]
r = json.load(open(path))
r["server_cpu_s"] = int(ticks) / int(hz)
r["command_line"] = command
json.dump(r, open(path, "w"))
print(f"    {r['achieved_rate']:>12.0f} ops/s  server CPU {r['server_cpu_s']:.1f} s"
      f"  client CPU {r['client_cpu_percent']:.0f}%  errors {r['errors']}  misses {r['misses']}")
EOF
}

LOAD=(--connections "$CONNECTIONS" --keys "$KEYS" --value-size "$VALUE_SIZE")
for name in strata redis; do
    log "$name on $CORES core(s)"
    start_servers "$name"
    log "  preload ($KEYS keys)"
    bench "preload-$name" "${LOAD[@]}" --preload --ratio 0:1 --duration 0.1
    for pipe in 1 30; do
        for test in get set; do
            log "  ${test^^}, pipeline $pipe"
            ratio=0:1; [[ $test == set ]] && ratio=1:0
            bench "$test-p$pipe-$name" "${LOAD[@]}" --ratio "$ratio" --pipeline "$pipe" \
                --duration "$DURATION"
        done
    done
    stop_servers
done

export REPORT_RESULTS="$RESULTS" REPORT_OUT="$OUT" REPORT_CORES="$CORES"
export REPORT_MACHINE="$(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
export REPORT_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export REPORT_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
export REPORT_PLACEMENT="servers on CPUs $SERVER_LIST, strata-bench on CPUs $CLIENT_LIST ($THREADS threads)"
python3 - <<'EOF'
import json, os
env = os.environ
res, n = env["REPORT_RESULTS"], int(env["REPORT_CORES"])

def load(name):
    p = os.path.join(res, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None

def per_op(r):
    return r["server_cpu_s"] * 1e6 / r["requests"] if r and r["requests"] else None

def f(x, d=0):
    return "-" if x is None else f"{x:,.{d}f}"

def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"

lines = [
    f"# Benchmarks on {n} core(s)",
    "",
    "Written by `benches/report_cores.sh --cores N`; rerun it to regenerate this page. Strata "
    f"on {n} core(s) (`--proactor_threads {n}`) against {n} redis-server process(es), one per "
    "core, with strata-bench splitting the keys over them by hash slot as a cluster client does "
    "(`--servers`). Single-core figures: [benchmarks.md](benchmarks.md).",
    "",
    f"- **Date:** {env['REPORT_DATE']}, Strata commit `{env['REPORT_COMMIT']}`.",
    f"- **Machine:** {env['REPORT_MACHINE']}.",
    f"- **Placement:** {env['REPORT_PLACEMENT']}.",
    "",
    "| test | pipeline | Strata ops/s | redis-servers ops/s | Strata / redis | Strata µs CPU/op "
    "| redis µs CPU/op | redis / Strata CPU per op |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
]
commands = []
for test in ("get", "set"):
    for pipe in (1, 30):
        s, r = load(f"{test}-p{pipe}-strata"), load(f"{test}-p{pipe}-redis")
        sa, ra = s and s["achieved_rate"], r and r["achieved_rate"]
        sc, rc = per_op(s), per_op(r)
        lines.append(f"| {test.upper()} | {pipe} | {f(sa)} | {f(ra)} | {ratio(sa, ra)} | "
                     f"{f(sc, 3)} | {f(rc, 3)} | {ratio(rc, sc)} |")
        commands += [x["command_line"] for x in (s, r) if x]
lines += ["", "Commands (`--servers` lists the redis-servers; `--port` for Strata):", ""]
lines += [f"- `{c}`" for c in dict.fromkeys(commands)]
os.makedirs(os.path.dirname(env["REPORT_OUT"]), exist_ok=True)
open(env["REPORT_OUT"], "w").write("\n".join(lines) + "\n")
EOF
log "Wrote $OUT"
