#!/usr/bin/env bash
# What one request costs the server in syscalls, context switches and CPU time, from one client
# connection: Strata (one or more builds) beside redis-server (RESP) and memcached -t 1
# (memcached text protocol), each alone and pinned to one CPU, memtier_benchmark pinned to
# another. Counted natively by `perf stat` on the server's process (tracepoints and software
# events: this VM has no hardware counters, so instructions come from callgrind instead, see
# mc_instructions.sh and types_callgrind.sh).
#
# Cases (CASES): PROTO:OP:PIPELINE[:RATE[:CONNS]], PROTO resp or mc, OP get or set. With RATE
# each connection sends RATE requests a second (memtier --rate-limiting), so the server is
# idle between requests, as under a light load; with RATE empty or 0 the client sends the
# next request as soon as the reply came (closed loop). CONNS connections (default 1). `glommio_enters` (io_uring_enter) and `membarriers`
# show how often Strata parked in glommio: each park costs one membarrier and a few enters.
#
# For every round, server and case: REQUESTS requests (x PIPELINE at pipeline > 1) after a
# preload of KEYS keys; printed at the end per server and case, the median over ROUNDS of each
# figure per request, and the idle server's CPU and wake-ups over IDLE_SECS seconds.
#
# Environment (all optional):
#   STRATAS      space-separated NAME=BINARY pairs (default "strata=<target>/release/strata")
#   PEERS        default "redis memcached"
#   CASES        default "resp:get:1 resp:set:1 resp:get:1:2000 resp:get:30 resp:set:30
#                resp:get:30:0:50 mc:get:1 mc:set:1 mc:get:1:2000 mc:get:30 mc:set:30"
#   REQUESTS     requests per connection at pipeline 1 (default 20000; x10 at pipeline > 1,
#                /10 with more than one connection)
#   RATE_REQUESTS requests per rate-limited case (default 4000)
#   KEYS         default 1000;  VALUE_SIZE default 256;  ROUNDS default 3;  IDLE_SECS default 3
#   PORT         first port tried (default 30100)
#   SERVER_CPU / CLIENT_CPU (default the first two allowed CPUs)
#
# Exit status: 0 when every case ran, 1 when a server did not start or a case failed.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
STRATAS="${STRATAS:-strata=$TARGET_DIR/release/strata}"
PEERS="${PEERS:-redis memcached}"
CASES="${CASES:-resp:get:1 resp:set:1 resp:get:1:2000 resp:get:30 resp:set:30 resp:get:30:0:50 mc:get:1 mc:set:1 mc:get:1:2000 mc:get:30 mc:set:30}"
REQUESTS="${REQUESTS:-20000}"
RATE_REQUESTS="${RATE_REQUESTS:-4000}"
KEYS="${KEYS:-1000}"
VALUE_SIZE="${VALUE_SIZE:-256}"
ROUNDS="${ROUNDS:-3}"
IDLE_SECS="${IDLE_SECS:-3}"
PORT="${PORT:-30100}"
PIN=1

command -v perf >/dev/null || die "perf not found"
command -v memtier_benchmark >/dev/null || die "memtier_benchmark not found"
choose_cpus

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/wake-cost.XXXXXX")"
SERVER_PID=""
RESULTS="$WORKDIR/results"
: >"$RESULTS"
trap 'stop_pid "$SERVER_PID" 10 || true; rm -rf "$WORKDIR"' EXIT

SYSCALLS=(epoll_wait epoll_pwait epoll_pwait2 io_uring_enter membarrier recvfrom sendto read
    write sendmsg recvmsg readv writev fcntl close)
EVENTS="task-clock,context-switches,raw_syscalls:sys_enter"
for s in "${SYSCALLS[@]}"; do EVENTS+=",syscalls:sys_enter_$s"; done

# Starts server $1 (a STRATAS name, redis or memcached); sets SERVER_PID, RPORT (RESP) and
# MPORT (memcached text; empty when it has none).
start_server() {
    local name="$1" bin
    RPORT="$(find_free_port "$PORT")"
    MPORT="$(find_free_port $((RPORT + 1)))"
    pin_prefix "$SERVER_CPU"
    case "$name" in
        redis)
            MPORT=""
            "${PIN_CMD[@]}" redis-server --port "$RPORT" --save '' --appendonly no \
                --daemonize no >"$WORKDIR/$name.log" 2>&1 &
            ;;
        memcached)
            local user=()
            [[ "$(id -u)" == 0 ]] && user=(-u root)
            MPORT="$RPORT"
            RPORT=""
            "${PIN_CMD[@]}" memcached -p "$MPORT" -U 0 -t 1 -c 64 -l 127.0.0.1 -m 1024 \
                "${user[@]}" >"$WORKDIR/$name.log" 2>&1 &
            ;;
        *)
            bin="$(strata_bin "$name")"
            "${PIN_CMD[@]}" "$bin" --proactor_threads 1 --port "$RPORT" \
                --memcached_port "$MPORT" --dbfilename "" --log_level warn \
                >"$WORKDIR/$name.log" 2>&1 &
            ;;
    esac
    SERVER_PID=$!
    local i p="${RPORT:-$MPORT}"
    for ((i = 0; i < 200; i++)); do
        port_in_use "$p" && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$WORKDIR/$name.log" >&2; return 1; }
        sleep 0.1
    done
    return 1
}

strata_bin() {
    local pair
    for pair in $STRATAS; do
        [[ "${pair%%=*}" == "$1" ]] && { printf '%s' "${pair#*=}"; return; }
    done
}

# memtier against port $1, protocol $2 (redis|memcache_text), then its own arguments.
memtier() {
    local port="$1" proto="$2"
    shift 2
    pin_prefix "$CLIENT_CPU"
    "${PIN_CMD[@]}" memtier_benchmark -s 127.0.0.1 -p "$port" --protocol="$proto" -t 1 \
        --data-size="$VALUE_SIZE" --key-maximum="$KEYS" --key-prefix=key: \
        --hide-histogram "$@" >"$WORKDIR/memtier.out" 2>&1
}

# Runs the perf counters on SERVER_PID around "$@"; leaves them in $WORKDIR/perf.csv.
counted() {
    perf stat -x, -e "$EVENTS" -p "$SERVER_PID" -o "$WORKDIR/perf.csv" &
    local perf=$!
    sleep 0.3
    local rc=0
    "$@" || rc=$?
    kill -INT "$perf" 2>/dev/null || true
    wait "$perf" 2>/dev/null || true
    return "$rc"
}

# Appends "server case figure value-per-request" lines for the counters in perf.csv.
record() {
    local server="$1" case="$2" n="$3"
    awk -F, -v s="$server" -v c="$case" -v n="$n" '
        /^#/ || NF < 3 { next }
        {
            v = $1; ev = $3
            if (v ~ /not/) next
            sub(/^syscalls:sys_enter_/, "", ev); sub(/^raw_syscalls:sys_enter$/, "syscalls", ev)
            if (ev == "task-clock") { ev = "cpu_us"; v = v * 1000 }  # msec -> us
            if (ev == "context-switches") ev = "cswitches"
            if (ev == "io_uring_enter") ev = "glommio_enters"
            if (ev == "membarrier") ev = "membarriers"
            printf "%s %s %s %.4f\n", s, c, ev, v / n
        }' "$WORKDIR/perf.csv" >>"$RESULTS"
}

FAILED=0
SERVERS=""
for pair in $STRATAS; do SERVERS+=" ${pair%%=*}"; done
SERVERS+=" $PEERS"
for ((round = 1; round <= ROUNDS; round++)); do
    for server in $SERVERS; do
        if ! start_server "$server"; then
            warn "$server did not start"
            FAILED=1
            continue
        fi
        log "round $round: $server (pid $SERVER_PID)"
        # Idle: what a server with one idle connection costs.
        exec 9<>"/dev/tcp/127.0.0.1/${RPORT:-$MPORT}"
        sleep 0.5
        counted sleep "$IDLE_SECS"
        record "$server" "idle(per_s)" "$IDLE_SECS"
        exec 9>&-
        for c in $CASES; do
            IFS=: read -r proto op pipe rate conns <<<"$c"
            conns="${conns:-1}"
            if [[ "$proto" == resp ]]; then
                port="$RPORT"
                mproto=redis
            else
                port="$MPORT"
                mproto=memcache_text
            fi
            [[ -n "$port" ]] || continue
            memtier "$port" "$mproto" -c 1 --ratio=1:0 --key-pattern=P:P --pipeline=30 \
                --requests="$KEYS" || true
            ratio="0:1"
            [[ "$op" == set ]] && ratio="1:0"
            n=$((REQUESTS * (pipe > 1 ? 10 : 1) / (conns > 1 ? 10 : 1)))
            args=(-c "$conns" --ratio="$ratio" --key-pattern=R:R --pipeline="$pipe")
            if [[ -n "$rate" && "$rate" != 0 ]]; then
                n="$RATE_REQUESTS"
                args+=(--rate-limiting="$rate")
            fi
            if ! counted memtier "$port" "$mproto" "${args[@]}" --requests="$n"; then
                warn "$server $c failed: $(tail -n 3 "$WORKDIR/memtier.out")"
                FAILED=1
                continue
            fi
            record "$server" "$c" $((n * conns))
        done
        stop_pid "$SERVER_PID" 10 || true
        SERVER_PID=""
    done
done

# Medians over the rounds: one row per server and case.
echo
python3 - "$RESULTS" <<'EOF'
import sys, statistics, collections
vals = collections.defaultdict(list)
cases, servers = [], []
figs = ["cpu_us", "syscalls", "cswitches", "glommio_enters", "membarriers", "epoll_wait",
        "epoll_pwait", "epoll_pwait2", "recvfrom", "sendto", "read", "write", "sendmsg",
        "recvmsg", "fcntl", "close"]
for line in open(sys.argv[1]):
    s, c, f, v = line.split()
    vals[s, c, f].append(float(v))
    if c not in cases: cases.append(c)
    if s not in servers: servers.append(s)
shown = [f for f in figs if any(vals.get((s, c, f)) and max(vals[s, c, f]) > 0
                                for s in servers for c in cases)]
print("medians per request (idle: per second), %d round(s)" % max(len(v) for v in vals.values()))
short = {"glommio_enters": "uring_ent", "membarriers": "membarr", "epoll_wait": "ep_wait",
         "epoll_pwait": "ep_pwait", "epoll_pwait2": "ep_pwait2", "cswitches": "cswitch"}
print("%-16s %-12s " % ("case", "server") + " ".join("%9s" % short.get(f, f)[:9] for f in shown))
for c in cases:
    for s in servers:
        if not vals.get((s, c, "cpu_us")):
            continue
        row = []
        for f in shown:
            v = vals.get((s, c, f))
            row.append("%9.3f" % statistics.median(v) if v else "%9s" % "-")
        print("%-16s %-12s " % (c, s) + " ".join(row))
EOF
exit "$FAILED"
