#!/usr/bin/env bash
# Instructions per memcached request: Strata against memcached (`memcached -t 1`), each run
# under callgrind, the same fixed requests sent to both (benches/mc_load.py, one connection).
# Instruction counts do not move with the load of a shared machine as CPU time does, so a
# change to the request path shows even on a noisy VM. They count user-space instructions
# only: the kernel's share of a read or write (the same for both at one syscall per batch)
# is not in them.
#
# For each protocol (text, binary; meta when CASES names it), op (GET over keys set before,
# SET) and pipeline depth (1, 30): the counters are zeroed, REQUESTS requests are sent, the
# counters are dumped, and the total is divided by REQUESTS. Printed at the end: Ir per
# request of both and the ratio strata / memcached.
#
# Environment (all optional):
#   REQUESTS     requests per case                    (default 3000)
#   KEYS         keys (GETs cycle over them)          (default 1000)
#   VALUE_SIZE   value bytes                          (default 256)
#   CASES        default "text:get:1 text:get:30 text:set:1 text:set:30 binary:get:1
#                binary:get:30 binary:set:1 binary:set:30"; meta:get:P and meta:set:P send
#                meta commands (`mg <key> v f t`, `ms <key> <len> T0`)
#   SERVERS      default "memcached strata"
#   STRATA_BIN   default <target>/release/strata, <target> = $CARGO_TARGET_DIR or <repo>/target
#   PORT         first port tried (default 21411)
#   SKIP_BUILD=1 do not run cargo build
#
# Exit status: 0 when every case ran, 1 when a server could not be started or a case failed.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

REQUESTS="${REQUESTS:-3000}"
KEYS="${KEYS:-1000}"
VALUE_SIZE="${VALUE_SIZE:-256}"
CASES="${CASES:-text:get:1 text:get:30 text:set:1 text:set:30 binary:get:1 binary:get:30 binary:set:1 binary:set:30}"
SERVERS="${SERVERS:-memcached strata}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
STRATA_BIN="${STRATA_BIN:-$TARGET_DIR/release/strata}"
PORT="${PORT:-21411}"

command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
command -v callgrind_control >/dev/null || die "callgrind_control not found"
if [[ " $SERVERS " == *" memcached "* ]]; then
    command -v memcached >/dev/null || die "memcached not found (apt-get install memcached)"
fi
if [[ "${SKIP_BUILD:-0}" != 1 && " $SERVERS " == *" strata "* ]]; then
    log "Building strata (release)..."
    (cd "$ROOT" && cargo build --release --bin strata) || die "cargo build failed"
fi

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/mc-instr.XXXXXX")"
SERVER_PID=""
trap 'stop_pid "$SERVER_PID" 10 || true; rm -rf "$WORKDIR"' EXIT

# memcached sets RLIMIT_NOFILE's hard limit at start, which valgrind refuses; this shim lets
# the call succeed (the limit valgrind keeps is plenty for one connection).
PRELOAD=""
if [[ " $SERVERS " == *" memcached "* ]]; then
    printf '%s\n' '#include <sys/resource.h>' \
        'int setrlimit(__rlimit_resource_t r, const struct rlimit *l) { (void)r; (void)l; return 0; }' \
        >"$WORKDIR/noset.c"
    cc -shared -fPIC -O2 -o "$WORKDIR/noset.so" "$WORKDIR/noset.c" || die "cc failed"
    PRELOAD="$WORKDIR/noset.so"
fi

# Starts server $1 under callgrind; sets SERVER_PID and MPORT.
start_server() {
    MPORT="$(find_free_port "$PORT")"
    local cg=(valgrind --tool=callgrind --callgrind-out-file="$WORKDIR/cg.$1.%p")
    if [[ "$1" == strata ]]; then
        local resp
        resp="$(find_free_port $((MPORT + 1)))"
        "${cg[@]}" "$STRATA_BIN" --port "$resp" --memcached_port "$MPORT" --proactor_threads 1 \
            --dbfilename "" --log_level warn >"$WORKDIR/$1.log" 2>&1 &
    else
        local user=()
        [[ "$(id -u)" == 0 ]] && user=(-u root)
        LD_PRELOAD="$PRELOAD" "${cg[@]}" memcached -p "$MPORT" -U 0 -t 1 -c 64 -l 127.0.0.1 \
            -m 1024 "${user[@]}" >"$WORKDIR/$1.log" 2>&1 &
    fi
    SERVER_PID=$!
    local i
    for ((i = 0; i < 600; i++)); do
        port_in_use "$MPORT" && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$WORKDIR/$1.log" >&2; die "$1 exited at start"; }
        sleep 0.1
    done
    die "$1 did not listen on $MPORT under valgrind within 60 s"
}

# Total Ir of the newest dump of SERVER_PID.
dump_total() {
    local before="$1" f
    callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
        f="$(find "$WORKDIR" -name "cg.*.$SERVER_PID.*" -newer "$before" 2>/dev/null | sort -V | tail -n 1)"
        [[ -n "$f" ]] && grep -q '^totals:' "$f" 2>/dev/null && break
        sleep 0.1
    done
    [[ -n "$f" ]] || die "no callgrind dump from $SERVER_PID"
    awk '$1 == "totals:" { print $2 }' "$f"
}

RESULTS="$WORKDIR/results"
FAILED=0
for server in $SERVERS; do
    start_server "$server"
    python3 "$SCRIPT_DIR/mc_load.py" "$MPORT" text fill 1 0 "$KEYS" "$VALUE_SIZE"
    for c in $CASES; do
        IFS=: read -r proto op pipe <<<"$c"
        callgrind_control -z "$SERVER_PID" >/dev/null 2>&1
        touch "$WORKDIR/mark"
        sleep 0.2
        if ! python3 "$SCRIPT_DIR/mc_load.py" "$MPORT" "$proto" "$op" "$pipe" "$REQUESTS" \
            "$KEYS" "$VALUE_SIZE"; then
            warn "$server $c failed"
            FAILED=1
            continue
        fi
        total="$(dump_total "$WORKDIR/mark")"
        per="$(awk -v t="$total" -v n="$REQUESTS" 'BEGIN { printf "%.0f", t / n }')"
        echo "$server $c $per" >>"$RESULTS"
        log "$server $c: $per Ir/request"
    done
    stop_pid "$SERVER_PID" 10 || true
    SERVER_PID=""
done

echo
printf '%-16s %12s %12s %8s\n' case memcached strata "ratio"
awk '
    { ir[$1, $2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
    END {
        for (i = 0; i < n; i++) {
            k = order[i]; m = ir["memcached", k]; s = ir["strata", k]
            printf "%-16s %12s %12s %8s\n", k, m, s, (m && s) ? sprintf("%.2f", s / m) : "n/a"
        }
    }' "$RESULTS"
exit "$FAILED"
