#!/usr/bin/env bash
# Hit-ratio benchmark: Strata against redis-server and memcached, same traces, same memory.
#
# For every trace (Zipf 0.9 and 0.99 over KEYS keys, each also with 20% one-off scans mixed
# in; see benches/hit_ratio.rs) a fresh server is started, alone on SERVER_CPU, and the
# cache-aside driver (GET; on a miss SET a VALUE_SIZE value) replays the trace from
# CLIENT_CPU. Servers, one after another:
#   redis-lru       redis-server --maxmemory M --maxmemory-policy allkeys-lru
#   redis-lfu       redis-server --maxmemory M --maxmemory-policy allkeys-lfu
#   strata-ram      strata --proactor_threads 1 --cache_mode --maxmemory M
#   strata-ram+ssd  the same with --tiered_prefix WORKDIR/tier/hr --tiered_max_file_size S
#                   --tiered_offload_threshold OFFLOAD_AT (0.85: a cache keeps RAM full of hot
#                   values and offloads only past that; the store default is 0.5)
#   memcached       memcached -t 1 -m M/MiB, driven over the memcached text protocol
#   strata-mc       strata --proactor_threads 1 --cache_mode --maxmemory M, driven over its
#                   --memcached_port (get; on a miss set), as memcached is
# M = CACHE_PCT% (10%) of the data (KEYS x VALUE_SIZE bytes) rounded down to whole MiB (what
# memcached's -m takes), S = SSD_PCT% (50%) of the data.
#
# Same memory, Strata against memcached: both are given the same M, which is the stricter
# budget for Strata. memcached's -m counts only its slab pages (items with their ~50 B
# headers, rounded up to the slab class's chunk size); its hash table, connection buffers and
# the process itself come on top. Strata's --maxmemory counts every byte its allocator hands
# out (index, keys, values, buffers), and in cache mode it evicts so that the RSS it owns
# (anonymous memory: not its binary's file pages) stays within a few percent of M. So memcached
# ends the run holding more memory than Strata; the report prints both RSS figures (VmRSS, file
# pages included) and the items each held, so the gap can be seen.
# The hit ratio is hits / GETs over the requests after the warm-up (the first WARMUP
# requests: half the trace by default). Printed at the end: one row per trace, the
# strata-ram / max(redis) ratio, and the targets (strata-ram >= the best Redis policy on
# every trace; strata-ram+ssd >= 0.95 on zipf0.99). Error replies (e.g. -OOM to a SET) are
# counted per run and shown next to the table. For each Strata run, the same trace is also
# replayed offline (hit_ratio trace) into caches holding as many keys as Strata held at the
# end: an exact LRU, an online LFU with perfect memory and an oracle; they show how much of a
# gap is the policy and how much the number of keys that fit.
#
# Environment (all optional):
#   SCALE          KEYS = 1000000 x SCALE; SCALE=0.1 is the quick run  (default 1)
#   KEYS           distinct Zipf keys                                   (default 1000000 x SCALE)
#   REQUESTS       requests per trace                                   (default 20 x KEYS)
#   WARMUP         requests not counted at the start of each trace      (default REQUESTS / 2)
#   VALUE_SIZE     bytes SET on a miss                                  (default 1024)
#   CACHE_PCT      maxmemory, percent of KEYS x VALUE_SIZE              (default 10)
#   SSD_PCT        --tiered_max_file_size, percent of KEYS x VALUE_SIZE (default 50)
#   OFFLOAD_AT     --tiered_offload_threshold of strata-ram+ssd         (default 0.85)
#   TIER_COMPRESSION  --tiered_compression of strata-ram+ssd: none, lz4, zstd (default zstd;
#                  the trace's values are random lowercase letters, which zstd's entropy
#                  coding takes to ~0.65 of their size, lz4 not at all)
#   TRACES         traces to run       (default "zipf0.9 zipf0.99 zipf0.9+scan zipf0.99+scan")
#   SERVERS        servers to run      (default "redis-lru redis-lfu strata-ram strata-ram+ssd
#                                       memcached strata-mc")
#   SCAN_FRAC, SCAN_RUN  "+scan" traces: share of requests in sweeps, keys per sweep (0.2 / 4096)
#   CONNS, PIPELINE  driver connections and pipeline depth             (default 4 / 32)
#   RATE           cap on trace requests per second, 0 = none           (default 0)
#   SEED           trace seed                                           (default 1)
#   CACHE_MODE     auto = pass --cache_mode when `strata --help` lists it; 1 = always; 0 = never
#   STRATA_FLAGS, REDIS_FLAGS  extra server flags
#   PORT           first port tried                                     (default 18379)
#   SERVER_CPU / CLIENT_CPU  CPUs of the server / driver      (default 1st / 2nd allowed CPU)
#   TMPDIR         where the work directory (logs, tier files) goes     (default /tmp)
#   REDIS_BIN      redis-server binary                                  (default redis-server)
#   MEMCACHED_BIN  memcached binary (1.6)                               (default memcached)
#   INFO_DIR       when set, the server's INFO ALL after each replay is kept there as
#                  TRACE.SERVER.info (where memory and the tier file went)
#   SKIP_BUILD=1   use existing binaries: STRATA_BIN (default <target>/release/strata) and
#                  HIT_RATIO_BIN (default the newest <target>/release/deps/hit_ratio-*),
#                  <target> being $CARGO_TARGET_DIR or <repo>/target
#   STARTUP_TIMEOUT  seconds a server may take to answer PING           (default 20)
#   RUN_TIMEOUT    seconds one replay may take                          (default 3600)
#
# Quick run (about 5 minutes, most of it Strata with SSD): SCALE=0.1 benches/hit_ratio.sh
# Full run: about an hour here (the 8 Redis runs take 10 minutes, Strata with SSD the most).
#
# Exit status: 0 when every run completed (targets are informational), 1 when something
# could not be built, or a server failed to start, died, or a replay failed (the other runs
# still go ahead and the table shows "failed").
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

SCALE="${SCALE:-1}"
KEYS="${KEYS:-$(awk -v s="$SCALE" 'BEGIN { printf "%d", 1000000 * s }')}"
REQUESTS="${REQUESTS:-$((20 * KEYS))}"
WARMUP="${WARMUP:-$((REQUESTS / 2))}"
VALUE_SIZE="${VALUE_SIZE:-1024}"
CACHE_PCT="${CACHE_PCT:-10}"
SSD_PCT="${SSD_PCT:-50}"
OFFLOAD_AT="${OFFLOAD_AT:-0.85}"
TRACES="${TRACES:-zipf0.9 zipf0.99 zipf0.9+scan zipf0.99+scan}"
SERVERS="${SERVERS:-redis-lru redis-lfu strata-ram strata-ram+ssd memcached strata-mc}"
SCAN_FRAC="${SCAN_FRAC:-0.2}"
SCAN_RUN="${SCAN_RUN:-4096}"
CONNS="${CONNS:-4}"
PIPELINE="${PIPELINE:-32}"
RATE="${RATE:-0}"
SEED="${SEED:-1}"
CACHE_MODE="${CACHE_MODE:-auto}"
STRATA_FLAGS="${STRATA_FLAGS:-}"
REDIS_FLAGS="${REDIS_FLAGS:-}"
PORT="${PORT:-18379}"
REDIS_BIN="${REDIS_BIN:-redis-server}"
MEMCACHED_BIN="${MEMCACHED_BIN:-memcached}"
SKIP_BUILD="${SKIP_BUILD:-0}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"
RUN_TIMEOUT="${RUN_TIMEOUT:-3600}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
STRATA_BIN="${STRATA_BIN:-$TARGET_DIR/release/strata}"
HIT_RATIO_BIN="${HIT_RATIO_BIN:-}"

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-hit-ratio.XXXXXX")"
SERVER_PID=""
SERVER_NAME=""
DRIVER_PID=""
PIN=1
FAILED=0
CACHE_MODE_ARGS=()
TIER_COMPRESSION="${TIER_COMPRESSION:-zstd}"
TIER_ARGS=()          # --tiered_compression, when this strata has it
NO_SNAPSHOT_ARGS=()   # strata flags that keep it from saving/loading snapshots, when it has them
declare -A R       # R[trace,server] = hit ratio, R[trace,server.err] = "errors/warmup_errors"
declare -A MAXHR   # MAXHR[trace] = hit ratio of an infinite cache

# --- cleanup ---------------------------------------------------------------

stop_server() {
    local pid="$SERVER_PID"
    SERVER_PID=""
    stop_pid "$pid" 15 || warn "$SERVER_NAME did not exit within 15 s of SIGTERM; killed it"
    rm -rf "$WORKDIR/tier"
}

cleanup() {
    if [[ -n "$DRIVER_PID" ]]; then stop_pid "$DRIVER_PID" 5 || true; fi
    stop_server
    rm -rf "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- setup -----------------------------------------------------------------

need_redis() {
    command -v "$REDIS_BIN" >/dev/null && command -v redis-cli >/dev/null && return 0
    log "Installing redis-server and redis-tools..."
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools
    command -v "$REDIS_BIN" >/dev/null && command -v redis-cli >/dev/null \
        || die "redis-server/redis-cli still missing after install"
}

need_memcached() {
    [[ " $SERVERS " == *" memcached "* ]] || return 0
    command -v "$MEMCACHED_BIN" >/dev/null && return 0
    log "Installing memcached..."
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached
    command -v "$MEMCACHED_BIN" >/dev/null || die "memcached still missing after install"
}

build() {
    if [[ "$SKIP_BUILD" != 1 ]]; then
        command -v cargo >/dev/null || die "cargo not found"
        log "Building (cargo build --release --bin strata --bench hit_ratio)..."
        local json="$WORKDIR/build.json"
        (cd "$ROOT" && cargo build --release --bin strata --bench hit_ratio \
            --message-format=json-render-diagnostics >"$json") || die "cargo build failed"
        HIT_RATIO_BIN="$(grep -o '"executable":"[^"]*hit_ratio-[^"]*"' "$json" \
            | sed 's/^"executable":"//; s/"$//' | tail -n 1)"
    fi
    [[ -n "$HIT_RATIO_BIN" ]] || HIT_RATIO_BIN="$(newest_bench "$TARGET_DIR" hit_ratio)"
    [[ -x "$HIT_RATIO_BIN" ]] || die "hit_ratio bench binary not found (build it: cargo bench --no-run)"
    if [[ " $SERVERS " == *" strata-"* ]]; then
        [[ -x "$STRATA_BIN" ]] || die "strata binary not found at $STRATA_BIN"
    fi
}

# --cache_mode is new: pass it only when this strata knows it (or when told to). A strata
# with snapshots saves one on SIGTERM and loads it at start: turn that off, so every run
# starts empty and nothing is written outside the work directory.
probe_strata_flags() {
    local help
    [[ " $SERVERS " == *" strata-"* ]] || return 0
    help="$("$STRATA_BIN" --help 2>&1 || true)"
    if grep -q -- '--dbfilename' <<<"$help"; then NO_SNAPSHOT_ARGS+=(--dbfilename ""); fi
    if grep -q -- '--dir ' <<<"$help"; then NO_SNAPSHOT_ARGS+=(--dir "$WORKDIR"); fi
    if grep -q -- '--tiered_compression' <<<"$help"; then
        TIER_ARGS+=(--tiered_compression "$TIER_COMPRESSION")
    fi
    case "$CACHE_MODE" in
        0) return 0 ;;
        1 | auto)
            if grep -q -- '--cache_mode <' <<<"$help"; then
                CACHE_MODE_ARGS=(--cache_mode=true)
            elif grep -q -- '--cache_mode' <<<"$help" || [[ "$CACHE_MODE" == 1 ]]; then
                CACHE_MODE_ARGS=(--cache_mode)
            else
                warn "$STRATA_BIN has no --cache_mode yet: running strata without it, so it answers -OOM once full (see errors)"
            fi
            ;;
        *) die "CACHE_MODE must be auto, 1 or 0, not '$CACHE_MODE'" ;;
    esac
}

# --- one run ---------------------------------------------------------------

server_failed() {
    printf 'ERROR: %s\n' "$1" >&2
    if [[ -s "$WORKDIR/$SERVER_NAME.log" ]]; then
        printf -- '--- last lines of %s log ---\n' "$SERVER_NAME" >&2
        tail -n 20 "$WORKDIR/$SERVER_NAME.log" >&2
    fi
    FAILED=1
}

# Starts server $1 on $SPORT, pinned to SERVER_CPU; returns 1 (after saying why) on failure.
start_server() {
    local name="$1" cmd
    SERVER_NAME="$name"
    SPORT="$(find_free_port "$PORT")"
    MPORT=""
    case "$name" in
        redis-lru | redis-lfu)
            # shellcheck disable=SC2206  # REDIS_FLAGS is a list of flags
            cmd=("$REDIS_BIN" --port "$SPORT" --bind 127.0.0.1 --save '' --appendonly no
                --dir "$WORKDIR" --daemonize no --maxmemory "$MAXMEM" --maxmemory-policy "allkeys-${name#redis-}"
                $REDIS_FLAGS) ;;
        strata-ram)
            # shellcheck disable=SC2206  # STRATA_FLAGS is a list of flags
            cmd=("$STRATA_BIN" --port "$SPORT" --proactor_threads 1 "${CACHE_MODE_ARGS[@]}"
                "${NO_SNAPSHOT_ARGS[@]}" --maxmemory "$MAXMEM" $STRATA_FLAGS) ;;
        strata-ram+ssd)
            mkdir -p "$WORKDIR/tier"
            # shellcheck disable=SC2206
            cmd=("$STRATA_BIN" --port "$SPORT" --proactor_threads 1 "${CACHE_MODE_ARGS[@]}"
                "${NO_SNAPSHOT_ARGS[@]}" --maxmemory "$MAXMEM" --tiered_prefix "$WORKDIR/tier/hr"
                --tiered_max_file_size "$SSD_BYTES" --tiered_offload_threshold "$OFFLOAD_AT"
                "${TIER_ARGS[@]}" $STRATA_FLAGS) ;;
        strata-mc)
            MPORT="$(find_free_port $((SPORT + 1)))"
            # shellcheck disable=SC2206
            cmd=("$STRATA_BIN" --port "$SPORT" --memcached_port "$MPORT" --proactor_threads 1
                "${CACHE_MODE_ARGS[@]}" "${NO_SNAPSHOT_ARGS[@]}" --maxmemory "$MAXMEM" $STRATA_FLAGS) ;;
        memcached)
            MPORT="$SPORT"
            local user=()
            [[ "$(id -u)" == 0 ]] && user=(-u root)
            cmd=("$MEMCACHED_BIN" -p "$MPORT" -U 0 -t 1 -l 127.0.0.1 -m "$((MAXMEM >> 20))"
                "${user[@]}") ;;
        *) die "unknown server '$name' in SERVERS" ;;
    esac
    log "    ${cmd[*]}"
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "${cmd[@]}" >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!
    local rc=0
    if [[ "$name" == memcached ]]; then
        wait_for_port "$MPORT" "$SERVER_PID" "$STARTUP_TIMEOUT" || rc=$?
    else
        wait_for_ping "$SPORT" "$SERVER_PID" "$STARTUP_TIMEOUT" || rc=$?
        if (( rc == 0 )) && [[ -n "$MPORT" ]]; then
            wait_for_port "$MPORT" "$SERVER_PID" "$STARTUP_TIMEOUT" || rc=$?
        fi
    fi
    case "$rc" in
        0) ;;
        1) server_failed "$name exited during startup"; stop_server; return 1 ;;
        *) server_failed "$name did not answer PING within ${STARTUP_TIMEOUT}s"; stop_server; return 1 ;;
    esac
    # A fresh process is empty; FLUSHALL anyway so that nothing carried over could count.
    if [[ "$name" != memcached ]]; then
        timeout 30 redis-cli -p "$SPORT" flushall >/dev/null 2>&1 || warn "$name: FLUSHALL failed"
    fi
}

# Wait until PID $2 listens on port $1; 0 when it does, 1 when it exited, 2 after $3 seconds.
wait_for_port() {
    local port="$1" pid="$2" deadline=$((SECONDS + $3))
    until port_in_use "$port"; do
        kill -0 "$pid" 2>/dev/null || return 1
        (( SECONDS < deadline )) || return 2
        sleep 0.1
    done
}

# memcached's `stats` on port $1, as "name value" lines.
mc_stats() {
    timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "stats\r\nquit\r\n" >&3 && cat <&3' \
        _ "$1" 2>/dev/null | tr -d '\r' | awk '$1 == "STAT" { print $2, $3 }'
}

rss_of() { awk '$1 == "VmRSS:" { print $2 * 1024 }' "/proc/$1/status" 2>/dev/null; }

info_field() { awk -F: -v k="$1" '$1 == k { print $2; exit }' <<<"$2"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# Replays trace $1 against server $2; fills R[$1,$2].
run_one() {
    local trace="$1" name="$2" rc=0 line info extra=""
    R[$trace,$name]=failed
    log ""
    log "[$trace] $name"
    start_server "$name" || return 0
    local proto=(--protocol resp) dport="$SPORT"
    if [[ -n "$MPORT" ]]; then proto=(--protocol memcache); dport="$MPORT"; fi
    pin_prefix "$CLIENT_CPU"
    "${PIN_CMD[@]}" timeout "$RUN_TIMEOUT" "$HIT_RATIO_BIN" run --trace "$trace" "${proto[@]}" \
        --port "$dport" --server "$name" --keys "$KEYS" --requests "$REQUESTS" \
        --warmup "$WARMUP" --value-size "$VALUE_SIZE" --conns "$CONNS" --pipeline "$PIPELINE" \
        --rate "$RATE" --seed "$SEED" --scan-frac "$SCAN_FRAC" --scan-run "$SCAN_RUN" \
        >"$WORKDIR/run.out" 2>"$WORKDIR/run.err" &
    DRIVER_PID=$!
    wait "$DRIVER_PID" || rc=$?
    DRIVER_PID=""
    if [[ -s "$WORKDIR/run.err" ]]; then sed 's/^/    /' "$WORKDIR/run.err" >&2; fi
    line="$(grep '^RESULT ' "$WORKDIR/run.out" | tail -n 1 || true)"
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        server_failed "$name died during the $trace replay"
        stop_server
        return 0
    fi
    if [[ "$name" == memcached ]]; then
        info="$(mc_stats "$MPORT" | tr ' ' ':')"
        extra="dbsize=$(info_field curr_items "$info") bytes=$(info_field bytes "$info")"
        extra+=" limit_maxbytes=$(info_field limit_maxbytes "$info") evictions=$(info_field evictions "$info")"
    else
        info="$(timeout 10 redis-cli -p "$SPORT" info all 2>/dev/null | tr -d '\r' || true)"
        extra="dbsize=$(timeout 10 redis-cli -p "$SPORT" dbsize 2>/dev/null | tr -d '\r' || true)"
        extra+=" used_memory=$(info_field used_memory "$info") evicted_keys=$(info_field evicted_keys "$info")"
    fi
    if [[ -n "${INFO_DIR:-}" ]]; then
        mkdir -p "$INFO_DIR" && printf '%s\n' "$info" >"$INFO_DIR/$trace.$name.info"
    fi
    extra+=" rss=$(rss_of "$SERVER_PID")"
    R[$trace,$name.rss]="$(field rss "$extra")"
    if [[ "$name" == *ssd ]]; then
        extra+=" tiered_disk_keys=$(info_field tiered_disk_keys "$info")"
        extra+=" tiered_read_errors=$(info_field tiered_read_errors "$info")"
    fi
    if [[ "$name" == strata-* ]]; then
        extra+=" log_warnings=$(grep -cE ' (WARN|ERROR) ' "$WORKDIR/$name.log" || true)"
    fi
    stop_server
    if (( rc != 0 )) || [[ -z "$line" ]]; then
        (( rc == 124 )) && warn "replay hit RUN_TIMEOUT (${RUN_TIMEOUT}s)"
        server_failed "hit_ratio run failed (rc=$rc) against $name"
        return 0
    fi
    log "    $line"
    log "    server after the run: $extra"
    R[$trace,$name]="$(field hit_ratio "$line")"
    R[$trace,$name.err]="$(field errors "$line")/$(field warmup_errors "$line")"
    R[$trace,$name.wrong]="$(field wrong "$line")"
    R[$trace,$name.items]="$(field dbsize "$extra")"
    if [[ "$name" == strata-* || "$name" == memcached ]]; then
        references "$trace" "$name" "$(field dbsize "$extra")"
    fi
}

# What policies could do holding as many keys as server $2 held at the end of trace $1 ($3):
# an online LFU with perfect memory, and an oracle holding the most popular keys.
references() {
    local trace="$1" name="$2" keys="$3" out
    [[ "$keys" =~ ^[0-9]+$ ]] && (( keys > 0 )) || return 0
    out="$("$HIT_RATIO_BIN" trace --trace "$trace" --keys "$KEYS" --requests "$REQUESTS" \
        --warmup "$WARMUP" --seed "$SEED" --scan-frac "$SCAN_FRAC" --scan-run "$SCAN_RUN" \
        --capacity "$keys" 2>/dev/null || true)"
    R[$trace,$name.keys]="$keys"
    R[$trace,$name.lru]="$(field lru_hit_ratio "$out")"
    R[$trace,$name.lfu]="$(field lfu_hit_ratio "$out")"
    R[$trace,$name.top]="$(field top_hit_ratio "$out")"
    log "    at $keys keys: exact LRU ${R[$trace,$name.lru]:-n/a}, perfect-memory LFU ${R[$trace,$name.lfu]:-n/a}, most-popular oracle ${R[$trace,$name.top]:-n/a}"
}

# --- report ----------------------------------------------------------------

is_num() { [[ "$1" =~ ^[0-9.]+$ ]]; }

report() {
    local trace name v best ratio ram ssd cell verdict_ram="MET" verdict_ssd="n/a" notes=()
    log ""
    log "Hit ratio = hits / GETs after the warm-up; $KEYS keys x $VALUE_SIZE B, maxmemory $MAXMEM B ($CACHE_PCT% of the data),"
    log "SSD $SSD_BYTES B ($SSD_PCT%, tier values stored with ${TIER_ARGS[*]:---tiered_compression n/a}), $REQUESTS requests per trace of which the first $WARMUP are warm-up,"
    local cap=""
    [[ "$RATE" == 0 ]] || cap=", at most $RATE requests/s"
    log "driver $CONNS conns x pipeline $PIPELINE$cap; max = an infinite cache (only the first request of a key misses)"
    log ""
    printf '%-15s %9s %9s %10s %14s %7s %15s\n' trace redis-lru redis-lfu strata-ram strata-ram+ssd max "ram/max(redis)"
    printf -- '-%.0s' {1..85}; echo
    for trace in $TRACES; do
        best=""
        for name in redis-lru redis-lfu; do
            v="${R[$trace,$name]:-}"
            if is_num "$v" && { [[ -z "$best" ]] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; }; then
                best="$v"
            fi
        done
        ram="${R[$trace,strata-ram]:-}"
        ratio="n/a"
        if is_num "$ram" && [[ -n "$best" ]]; then
            ratio="$(awk -v a="$ram" -v b="$best" 'BEGIN { if (b == 0) print "n/a"; else printf "%.3f", a / b }')"
        fi
        if [[ " $SERVERS " == *" strata-ram "* && -n "$best" ]]; then
            if ! is_num "$ram" || awk -v a="$ram" -v b="$best" 'BEGIN { exit !(a < b) }'; then
                verdict_ram="NOT MET"
                notes+=("$trace: strata-ram ${ram:-n/a} < redis $best")
            fi
        fi
        printf '%-15s' "$trace"
        for name in redis-lru redis-lfu strata-ram strata-ram+ssd; do
            cell="${R[$trace,$name]:--}"
            # A star marks runs with error replies: their hit ratio is not a policy's.
            if [[ "${R[$trace,$name.err]:-0/0}" != 0/0 ]]; then cell+="*"; fi
            case "$name" in
                redis-*) printf ' %9s' "$cell" ;;
                strata-ram) printf ' %10s' "$cell" ;;
                *) printf ' %14s' "$cell" ;;
            esac
        done
        printf ' %7s %15s\n' "${MAXHR[$trace]:-n/a}" "$ratio"
    done
    log ""
    if [[ " $SERVERS " != *" strata-ram "* || " $SERVERS " != *" redis-l"* ]]; then
        verdict_ram="n/a"
    fi
    log "Target strata-ram >= max(redis-lru, redis-lfu) on every trace: $verdict_ram"
    for v in "${notes[@]}"; do log "    $v"; done
    if [[ " $TRACES " == *" zipf0.99 "* && " $SERVERS " == *" strata-ram+ssd "* ]]; then
        ssd="${R[zipf0.99,strata-ram+ssd]:-}"
        if is_num "$ssd" && awk -v a="$ssd" 'BEGIN { exit !(a >= 0.95) }'; then
            verdict_ssd="MET"
        else
            verdict_ssd="NOT MET"
        fi
    fi
    log "Target strata-ram+ssd >= 0.95 on zipf0.99: $verdict_ssd (${ssd:-n/a})"
    report_memcached
    log ""
    log "References at the number of keys each Strata run held at its end (same trace): an exact"
    log "LRU, an online LFU that remembers every key's count since the start (the best a frequency"
    log "policy can do without knowing the future) and an oracle keeping the most popular keys:"
    for trace in $TRACES; do
        for name in strata-ram strata-ram+ssd memcached strata-mc; do
            [[ -n "${R[$trace,$name.keys]:-}" ]] || continue
            printf '  %-15s %-15s keys=%-8s hit=%-7s lru=%-7s lfu=%-7s oracle=%s\n' "$trace" "$name" \
                "${R[$trace,$name.keys]}" "${R[$trace,$name]:-n/a}" "${R[$trace,$name.lru]:-n/a}" \
                "${R[$trace,$name.lfu]:-n/a}" "${R[$trace,$name.top]:-n/a}"
        done
    done
    log ""
    log "Error replies, after / during the warm-up (all should be 0/0; * in the table):"
    for trace in $TRACES; do
        printf '  %-15s' "$trace"
        for name in $SERVERS; do
            printf ' %s=%s' "$name" "${R[$trace,$name.err]:-n/a}"
            if [[ "${R[$trace,$name.wrong]:-0}" != 0 ]]; then
                printf ' (%s WRONG VALUES)' "${R[$trace,$name.wrong]}"
            fi
        done
        echo
    done
}

# Strata over its memcached port against memcached, same M (see the header).
report_memcached() {
    local trace mc st ratio verdict="MET"
    [[ " $SERVERS " == *" memcached "* && " $SERVERS " == *" strata-mc "* ]] || return 0
    log ""
    log "Over the memcached protocol, memcached -m $((MAXMEM >> 20)) against strata --maxmemory $MAXMEM (items held and RSS at the end):"
    printf '%-15s %10s %10s %9s %10s %10s %12s %12s\n' trace memcached strata-mc "mc ratio" \
        "mc items" "st items" "mc rss" "st rss"
    for trace in $TRACES; do
        mc="${R[$trace,memcached]:-}"
        st="${R[$trace,strata-mc]:-}"
        ratio="n/a"
        if is_num "$mc" && is_num "$st"; then
            ratio="$(awk -v a="$st" -v b="$mc" 'BEGIN { if (b == 0) print "n/a"; else printf "%.3f", a / b }')"
        fi
        if ! is_num "$st" || ! is_num "$mc" || awk -v a="$st" -v b="$mc" 'BEGIN { exit !(a <= b) }'; then
            verdict="NOT MET"
        fi
        printf '%-15s %10s %10s %9s %10s %10s %12s %12s\n' "$trace" "${mc:--}" "${st:--}" "$ratio" \
            "${R[$trace,memcached.items]:--}" "${R[$trace,strata-mc.items]:--}" \
            "${R[$trace,memcached.rss]:--}" "${R[$trace,strata-mc.rss]:--}"
    done
    log "Target strata-mc > memcached on every trace: $verdict"
}

# --- main ------------------------------------------------------------------

main() {
    (( KEYS > 0 && REQUESTS > WARMUP )) || die "need KEYS > 0 and REQUESTS > WARMUP"
    need_redis
    need_memcached
    build
    choose_cpus
    probe_strata_flags
    local data=$((KEYS * VALUE_SIZE))
    # Whole MiB: memcached's -m takes nothing finer, and every server gets the same M.
    MAXMEM=$((data * CACHE_PCT / 100 >> 20 << 20))
    (( MAXMEM > 0 )) || die "maxmemory below 1 MiB: raise KEYS, VALUE_SIZE or CACHE_PCT"
    SSD_BYTES=$((data * SSD_PCT / 100))
    log "Work dir $WORKDIR"
    log "$KEYS keys x $VALUE_SIZE B = $data B of data; maxmemory $MAXMEM B, SSD $SSD_BYTES B"
    log "$REQUESTS requests per trace, first $WARMUP not counted; traces: $TRACES"
    log "servers: $SERVERS"
    [[ $PIN -eq 1 ]] && log "servers on CPU $SERVER_CPU, driver on CPU $CLIENT_CPU"

    local trace name
    for trace in $TRACES; do
        MAXHR[$trace]="$(field max_hit_ratio "$("$HIT_RATIO_BIN" trace --trace "$trace" \
            --keys "$KEYS" --requests "$REQUESTS" --warmup "$WARMUP" --seed "$SEED" \
            --scan-frac "$SCAN_FRAC" --scan-run "$SCAN_RUN" --capacity 0 2>/dev/null || true)")"
        for name in $SERVERS; do
            run_one "$trace" "$name"
        done
    done
    report
    return "$FAILED"
}

main "$@"
