# Shell helpers shared by the benchmark scripts (sourced, not run).
# They expect `set -euo pipefail`, and use PIN (1 = pin with taskset), SERVER_PID and the
# optional SERVER_CPU / CLIENT_CPU from the caller.

log()  { printf '%s\n' "$*"; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die()  { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# Use sudo for apt-get only when we are not root and it exists.
as_root() {
    if [[ $EUID -eq 0 ]]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "need root (or sudo) to run: $*"
    fi
}

# Expand a cpulist like "0-3,6" into one CPU id per line.
expand_cpulist() {
    local part
    IFS=',' read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        if [[ "$part" == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
    done
}

# Choose the server and client CPUs from those this process may use (a
# container's cpuset need not start at 0). With one CPU, pinning is pointless.
choose_cpus() {
    local allowed
    allowed="$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
    mapfile -t cpus < <(expand_cpulist "${allowed:-0}")
    if ! command -v taskset >/dev/null; then
        warn "taskset not found; running without CPU pinning (results less fair)"
        PIN=0
    elif [[ "$(nproc)" -lt 2 || ${#cpus[@]} -lt 2 ]]; then
        warn "only one CPU available; running without CPU pinning (server and client share it)"
        PIN=0
    fi
    SERVER_CPU="${SERVER_CPU:-${cpus[0]}}"
    CLIENT_CPU="${CLIENT_CPU:-${cpus[1]:-${cpus[0]}}}"
}

# Prefix that pins a command to CPU $1 (empty when pinning is off). Used as an
# array prefix rather than a wrapper function so that a backgrounded server is
# our direct child and $! is its PID (a backgrounded function would be a subshell).
pin_prefix() {
    PIN_CMD=()
    if [[ $PIN -eq 1 ]]; then PIN_CMD=(taskset -c "$1"); fi
}

# A successful connect means something already listens there.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# First free port at or above $1, so a stray server is never benchmarked by mistake.
find_free_port() {
    local p="$1" limit=$(( $1 + 100 ))
    while port_in_use "$p"; do
        p=$((p + 1))
        (( p < limit )) || die "no free port in $1..$limit"
    done
    echo "$p"
}

# utime + stime of SERVER_PID in clock ticks (0 once it is gone).
server_cpu_ticks() {
    local stat
    stat="$(cat "/proc/$SERVER_PID/stat" 2>/dev/null)" || { echo 0; return; }
    # After "(comm) " the fields start at 3 (state); utime is 14, stime 15.
    awk '{print $12 + $13}' <<<"${stat##*) }"
}

# Wait until the server PID $2 answers PING on port $1 (needs redis-cli); give up after $3
# seconds. Returns 0 on PONG, 1 when the process exited, 2 on timeout.
wait_for_ping() {
    local port="$1" pid="$2" deadline=$((SECONDS + $3))
    until [[ "$(timeout 2 redis-cli -p "$port" ping 2>/dev/null)" == PONG ]]; do
        kill -0 "$pid" 2>/dev/null || return 1
        (( SECONDS < deadline )) || return 2
        sleep 0.1
    done
}

# Start server $1 (strata: STRATA_BIN with one thread; redis: redis-server), no persistence,
# on port $2, pinned to SERVER_CPU, its log in $WORKDIR/$1.log; sets SERVER_PID. Returns 1
# (after printing the log's tail) when it does not answer PING within 20 s.
start_pinned_server() {
    local name="$1" port="$2" cmd
    case "$name" in
        strata) cmd=("$STRATA_BIN" --proactor_threads 1 --port "$port" --dbfilename "") ;;
        redis) cmd=(redis-server --port "$port" --save '' --appendonly no --daemonize no) ;;
    esac
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "${cmd[@]}" >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!
    if ! wait_for_ping "$port" "$SERVER_PID" 20; then
        tail -n 20 "$WORKDIR/$name.log" >&2
        return 1
    fi
}

# Stop a child process: SIGTERM, then SIGKILL if it is still there after $2 seconds
# (default 5); then reap it so no zombie is left. Returns 1 when it had to be killed.
stop_pid() {
    local pid="$1" grace="${2:-5}" i rc=0
    [[ -n "$pid" ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < grace * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            rc=1
        fi
    fi
    wait "$pid" 2>/dev/null || true
    return "$rc"
}

# Install redis-server and redis-tools from Debian when redis-server, redis-benchmark or
# redis-cli is missing. (The package may try to start a system redis on 6379; we never use it.)
install_redis_if_missing() {
    if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
        && command -v redis-cli >/dev/null; then
        return 0
    fi
    log "Installing redis-server and redis-tools..."
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools
    command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
        || die "redis-server/redis-benchmark still missing after install"
}

# Newest bench executable $2-<hash> (no extension) under the target directory $1.
newest_bench() {
    local f best=""
    for f in "$1"/release/deps/"$2"-*; do
        [[ -x "$f" && "$f" != *.* ]] || continue
        if [[ -z "$best" || "$f" -nt "$best" ]]; then best="$f"; fi
    done
    printf '%s' "$best"
}

# Builds target/release/strata under $ROOT unless SKIP_BUILD=1, then checks that $STRATA_BIN
# exists; $1 is added to the error when the build fails.
build_strata() {
    if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
        command -v cargo >/dev/null || die "cargo not found; cannot build strata"
        log "Building strata (cargo build --release --bin strata)..."
        (cd "$ROOT" && cargo build --release --bin strata) || die "cargo build failed${1:+; $1}"
    fi
    [[ -x "$STRATA_BIN" ]] || die "strata binary not found at $STRATA_BIN"
}

