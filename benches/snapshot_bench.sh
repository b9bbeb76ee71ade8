#!/usr/bin/env bash
# Snapshot benchmark: Strata's forkless BGSAVE against redis-server's fork-based BGSAVE,
# under a continuous SET load, in one run.
#
# For each server (Strata once per SNAPSHOT_COMPRESSIONS entry, then redis-server), one at
# a time, pinned alone to SERVER_CPU:
#   1. start it with an empty temp --dir, fill it with KEYS keys of VALUE bytes
#      ("key:%012d", the names redis-benchmark's __rand_int__ produces, so the load below
#      overwrites existing keys instead of adding new ones; values are random base64),
#      and check DBSIZE;
#   2. start redis-benchmark on CLIENT_CPU: SET key:__rand_int__ over the same keyspace,
#      CLIENTS connections, pipeline PIPELINE, until the save is over;
#   3. after WARMUP seconds of load, BGSAVE, and poll INFO persistence every 100 ms until
#      rdb_bgsave_in_progress is 0 again (and rdb_saves has gone up);
#   4. stop the load, check DBSIZE again, stop the server (SHUTDOWN NOSAVE).
# A sampler reads /proc/PID/smaps_rollup every 100 ms for the server and all its children
# (redis-server's BGSAVE child) and sums Pss (pages shared by parent and fork are counted
# once) and Rss (shared pages counted in each process; shown for reference).
#
# Reported per server: idle MB (Pss sum in the last sample before BGSAVE), peak MB (largest
# Pss sum from BGSAVE to completion), peak/idle, save s (BGSAVE to completion as seen by
# the 100 ms poll), file MB (Strata: rdb_last_save_size, all files of the save; Redis: size
# of dump.rdb) and MB/s = file MB / save s. Target: Strata peak/idle <= 1.05.
#
# Environment (all optional):
#   KEYS            keys filled                                  (default 1000000)
#   VALUE           value bytes                                  (default 1024)
#   SNAPSHOT_COMPRESSIONS  one Strata run per --snapshot_compression listed (default "none lz4")
#   ONLY            "strata" or "redis" to run just one server   (default both)
#   CLIENTS         redis-benchmark connections; 0 = no load (the save's own cost) (default 20)
#   PIPELINE        redis-benchmark pipeline depth               (default 1)
#   WARMUP          seconds of SET load before BGSAVE            (default 3)
#   SAVE_TIMEOUT    seconds a BGSAVE may take                    (default 600)
#   STRATA_FLAGS    extra strata flags (e.g. "--snapshot_throttle_mb 200")
#   REDIS_FLAGS     extra redis-server flags (e.g. "--rdbcompression no")
#   STRATA_PORT / REDIS_PORT  first port tried                   (default 16479 / 16480)
#   SERVER_CPU / CLIENT_CPU   CPUs of the servers / of the load   (default 1st / 2nd allowed)
#   STRATA_BIN      strata binary to use; when set nothing is built (default: cargo build
#                   --release --bin strata, then ${CARGO_TARGET_DIR:-target}/release/strata)
#   SKIP_BUILD=1    do not build even when STRATA_BIN is not set
#   SAMPLES_DIR     copy each run's raw samples there (mem: t_us pss_kb rss_kb procs;
#                   poll: t_us in_progress saves backlog_bytes)
#   TMPDIR          where the temp dir (both servers' --dir) goes (default /tmp)
#   STARTUP_TIMEOUT seconds a server may take to answer PING      (default 20)
#
# Quick check: KEYS=200000 benches/snapshot_bench.sh
#
# Exit status: 0 when the benchmark ran (the target is informational), 1 when strata did
# not build, a server failed to start, died, or a fill / save / load failed.
set -euo pipefail
export LC_ALL=C   # "." decimals for awk/printf whatever the locale

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

KEYS="${KEYS:-1000000}"
VALUE="${VALUE:-1024}"
SNAPSHOT_COMPRESSIONS="${SNAPSHOT_COMPRESSIONS:-none lz4}"
ONLY="${ONLY:-}"
CLIENTS="${CLIENTS:-20}"
PIPELINE="${PIPELINE:-1}"
WARMUP="${WARMUP:-3}"
SAVE_TIMEOUT="${SAVE_TIMEOUT:-600}"
STRATA_FLAGS="${STRATA_FLAGS:-}"
REDIS_FLAGS="${REDIS_FLAGS:-}"
STRATA_PORT="${STRATA_PORT:-16479}"
REDIS_PORT="${REDIS_PORT:-16480}"
SKIP_BUILD="${SKIP_BUILD:-0}"
SAMPLES_DIR="${SAMPLES_DIR:-}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"
if [[ -n "${STRATA_BIN:-}" ]]; then
    SKIP_BUILD=1
else
    STRATA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/strata"
fi

TARGET_PEAK_IDLE=1.05
LOAD_REQUESTS=2000000000   # redis-benchmark -n: far more than any save lasts; it is stopped

WORKDIR=""
SERVER_PID=""; SERVER_NAME=""; SERVER_PORT=""
LOAD_PID=""; SAMPLER_PID=""
PIN=1
RESULTS=()   # one line per run, fields as in run_one

# --- cleanup ---------------------------------------------------------------

stop_bg() {  # stop a background helper of ours by PID and reap it
    local pid="$1"
    [[ -n "$pid" ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# SHUTDOWN NOSAVE (SIGTERM would make Strata save first), then KILL if it lingers; the
# BGSAVE child of a redis-server killed mid-save is killed too.
stop_server() {
    local pid="$SERVER_PID" i kids
    [[ -n "$pid" ]] || return 0
    SERVER_PID=""
    if kill -0 "$pid" 2>/dev/null; then
        timeout 5 redis-cli -p "$SERVER_PORT" shutdown nosave >/dev/null 2>&1 || true
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            kids="$(pgrep -P "$pid" || true)"
            kill -KILL "$pid" 2>/dev/null || true
            for i in $kids; do kill -KILL "$i" 2>/dev/null || true; done
        fi
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    stop_bg "$LOAD_PID"; LOAD_PID=""
    stop_bg "$SAMPLER_PID"; SAMPLER_PID=""
    stop_server
    if [[ -n "$WORKDIR" ]]; then rm -rf "$WORKDIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- setup -----------------------------------------------------------------

# Random base64 values (up to 1024 of them, at most 64 MiB together) that the fill cycles
# through: incompressible for lz4/LZF, so file sizes and MB/s mean something.
make_value_pool() {
    local n=$(( (64 << 20) / VALUE ))
    (( n > 1024 )) && n=1024
    (( n < 1 )) && n=1
    (( n > KEYS )) && n=$KEYS
    head -c $(( n * VALUE * 3 / 4 + 3 * VALUE )) /dev/urandom | base64 -w "$VALUE" \
        | head -n "$n" >"$WORKDIR/values"
    # The load sets every key to one more value of the same kind.
    LOAD_VALUE="$(head -c $(( VALUE * 3 / 4 + 3 )) /dev/urandom | base64 -w 0 | head -c "$VALUE")"
}

# --- servers ---------------------------------------------------------------

rcli() { timeout 10 redis-cli -p "$SERVER_PORT" "$@"; }

server_failed() {
    printf 'ERROR: %s\n' "$1" >&2
    if [[ -s "$WORKDIR/$SERVER_NAME.log" ]]; then
        printf -- '--- last lines of %s log ---\n' "$SERVER_NAME" >&2
        tail -n 20 "$WORKDIR/$SERVER_NAME.log" >&2
    fi
    exit 1
}

# start_server NAME (strata-<compression> or redis) PORT
start_server() {
    local name="$1" port="$2" dir="$WORKDIR/$1" cmd extra
    mkdir -p "$dir"
    case "$name" in
        strata-*)
            read -ra extra <<<"$STRATA_FLAGS"
            cmd=("$STRATA_BIN" --port "$port" --proactor_threads 1 --dir "$dir"
                 --dbfilename dump --snapshot_compression "${name#strata-}" "${extra[@]}") ;;
        redis)
            read -ra extra <<<"$REDIS_FLAGS"
            cmd=(redis-server --port "$port" --save '' --appendonly no --daemonize no
                 --dir "$dir" --dbfilename dump.rdb "${extra[@]}") ;;
    esac
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "${cmd[@]}" >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!; SERVER_NAME="$name"; SERVER_PORT="$port"
    local deadline=$((SECONDS + STARTUP_TIMEOUT))
    until [[ "$(rcli ping 2>/dev/null)" == PONG ]]; do
        kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$name exited during startup"
        (( SECONDS < deadline )) || server_failed "$name did not answer PING within ${STARTUP_TIMEOUT}s"
        sleep 0.1
    done
}

# Fill KEYS keys key:%012d with the value pool through redis-cli --pipe.
fill() {
    local out t0=$SECONDS n
    out="$(awk -v n="$KEYS" -v vlen="$VALUE" '
        { pool[c++] = $0 }
        END {
            for (i = 0; i < n; i++)
                printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$%d\r\n%s\r\n", i, vlen, pool[i % c]
        }' "$WORKDIR/values" | redis-cli -p "$SERVER_PORT" --pipe 2>&1)" \
        || server_failed "$SERVER_NAME: fill failed: $(tail -n 3 <<<"$out")"
    [[ "$out" == *"errors: 0, replies: $KEYS"* ]] \
        || server_failed "$SERVER_NAME: fill replied: $(tail -n 3 <<<"$out")"
    n="$(rcli dbsize)"
    [[ "$n" == "$KEYS" ]] || server_failed "$SERVER_NAME: DBSIZE $n after the fill, expected $KEYS"
    log "  filled $KEYS keys x $VALUE B in $((SECONDS - t0)) s, DBSIZE $n"
}

# Fill the global INFO array with the fields of INFO <section> (one fork: redis-cli);
# returns 1, leaving INFO empty, when the server does not answer.
declare -A INFO=()
read_info() {
    local raw f v
    INFO=()
    raw="$(rcli info "$1")" || return 1
    while IFS=: read -r f v; do
        [[ -n "$v" ]] && INFO[$f]="${v%$'\r'}"
    done <<<"$raw"
    return 0
}

commands_done() { read_info stats || true; echo "${INFO[total_commands_processed]:-0}"; }

# Sleep until the next multiple of 100 ms after the tick in the caller's variable `next`
# (microseconds since the epoch) and advance it; a late caller starts a new cadence.
next_tick() {
    local now d
    next=$((next + 100000))
    now=${EPOCHREALTIME/./}
    d=$((next - now))
    if (( d > 0 )); then sleep "0.$(printf '%06d' "$d")"; else next=$now; fi
}

# --- sampling --------------------------------------------------------------

# Every 100 ms append "t_us pss_kb rss_kb procs" for PID $1 and its children to $2.
# Reads /proc only (no fork but pgrep and sleep), so a busy server cannot delay it. t_us is
# taken once the sample is read: a sample stamped before BGSAVE was read wholly before it
# (one read across the fork would see the parent's Pss already halved).
sampler() {
    local pid="$1" out="$2" next now p r n c buf kids
    # Rss and Pss are adjacent lines of smaps_rollup (anchored: SwapPss would match too).
    local re=$'\nRss: +([0-9]+) kB\nPss: +([0-9]+) kB'
    next=${EPOCHREALTIME/./}
    while kill -0 "$pid" 2>/dev/null; do
        p=0 r=0 n=0
        kids="$(pgrep -P "$pid" || true)"
        for c in "$pid" $kids; do
            buf=""
            { IFS= read -r -d '' buf <"/proc/$c/smaps_rollup"; } 2>/dev/null || true
            if [[ "$buf" =~ $re ]]; then
                r=$((r + BASH_REMATCH[1])); p=$((p + BASH_REMATCH[2])); n=$((n + 1))
            fi
        done
        now=${EPOCHREALTIME/./}
        echo "$now $p $r $n" >>"$out"
        next_tick
    done
}

# --- one run ---------------------------------------------------------------

run_one() {
    local name="$1" port="$2"
    local mem="$WORKDIR/$name.mem" poll="$WORKDIR/$name.poll"
    local saves0 t_w c_w t_b c_b t_e c_e reply now next in_prog saves status backlog
    local file_bytes keys_saved="" cow="" n
    : >"$mem"; : >"$poll"
    log ""
    log "== $name (port $port)"
    start_server "$name" "$port"
    fill

    sampler "$SERVER_PID" "$mem" &
    SAMPLER_PID=$!
    if (( CLIENTS > 0 )); then
        pin_prefix "$CLIENT_CPU"
        "${PIN_CMD[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -r "$KEYS" -n "$LOAD_REQUESTS" \
            -c "$CLIENTS" -P "$PIPELINE" -q SET 'key:__rand_int__' "$LOAD_VALUE" \
            >"$WORKDIR/load.out" 2>&1 &
        LOAD_PID=$!
    fi
    sleep 0.5
    t_w=${EPOCHREALTIME/./}; c_w="$(commands_done)"
    sleep "$WARMUP"
    if [[ -n "$LOAD_PID" ]] && ! kill -0 "$LOAD_PID" 2>/dev/null; then
        server_failed "$name: redis-benchmark exited: $(tail -c 300 "$WORKDIR/load.out" | tr '\r\n' '  ')"
    fi
    read_info persistence || server_failed "$name: INFO persistence got no reply"
    saves0="${INFO[rdb_saves]:-}"
    c_b="$(commands_done)"
    t_b=${EPOCHREALTIME/./}
    reply="$(rcli bgsave)" || server_failed "$name: BGSAVE got no reply"
    [[ "$reply" == "Background saving started" ]] || server_failed "$name: BGSAVE replied '$reply'"
    next=$t_b
    while :; do
        next_tick
        kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$name died during BGSAVE"
        read_info persistence || true
        now=${EPOCHREALTIME/./}
        in_prog="${INFO[rdb_bgsave_in_progress]:-1}"
        saves="${INFO[rdb_saves]:-}"
        backlog="${INFO[rdb_save_backlog_bytes]:-0}"
        echo "$now $in_prog ${saves:--} $backlog" >>"$poll"
        if [[ "$in_prog" == 0 ]] && { [[ -z "$saves0" || -z "$saves" ]] || (( saves > saves0 )); }; then
            t_e=$now
            break
        fi
        (( now - t_b < SAVE_TIMEOUT * 1000000 )) || server_failed "$name: BGSAVE still running after ${SAVE_TIMEOUT}s"
    done
    status="${INFO[rdb_last_bgsave_status]:-?}"
    if [[ "$name" == redis ]]; then
        cow="${INFO[rdb_last_cow_size]:-}"
    else
        file_bytes="${INFO[rdb_last_save_size]:-0}"
        keys_saved="${INFO[rdb_last_save_keys]:-}"
    fi
    c_e="$(commands_done)"
    # One more second of load and samples: does memory go back to idle after the save?
    sleep 1
    stop_bg "$LOAD_PID"; LOAD_PID=""
    stop_bg "$SAMPLER_PID"; SAMPLER_PID=""
    [[ "$status" == ok ]] || server_failed "$name: rdb_last_bgsave_status:$status"

    if [[ "$name" == redis ]]; then
        file_bytes="$(stat -c %s "$WORKDIR/$name/dump.rdb")"
    else
        local on_disk
        on_disk="$(du -sb "$WORKDIR/$name" | awk '{ print $1 }')"
        log "  rdb_last_save_size $file_bytes B, files in --dir $on_disk B"
        [[ -z "$keys_saved" || "$keys_saved" == "$KEYS" ]] \
            || warn "$name saved $keys_saved keys, expected $KEYS"
    fi
    n="$(rcli dbsize)"
    [[ "$n" == "$KEYS" ]] || warn "$name: DBSIZE $n after the load, expected $KEYS (the load should only overwrite)"
    stop_server
    rm -rf "${WORKDIR:?}/$name"   # free the disk for the next run

    if [[ -n "$SAMPLES_DIR" ]]; then
        mkdir -p "$SAMPLES_DIR"
        cp "$mem" "$poll" "$SAMPLES_DIR/"
        echo "warmup_start $t_w bgsave $t_b done $t_e" >"$SAMPLES_DIR/$name.marks"
    fi

    # idle = last sample before BGSAVE; peak = largest sample from BGSAVE to completion
    # (the first sample after BGSAVE when the save was shorter than one interval).
    local r
    r="$(awk -v tb="$t_b" -v te="$t_e" '
        $1 < tb { ip = $2; ir = $3 }
        $1 >= tb && first == "" { first = $0 }
        $1 >= tb && $1 <= te {
            if (ns == 0 || $2 > pp) { pp = $2; pat = $1 }
            if ($3 > pr) pr = $3
            if ($4 > np) np = $4
            ns++
        }
        END {
            if (ns == 0 && first != "") { split(first, f, " "); pp = f[2]; pr = f[3]; np = f[4]; pat = f[1]; ns = 1 }
            if (ip == "" || ns == 0) { print "n/a n/a n/a n/a n/a n/a 0"; exit }
            printf "%.1f %.1f %.1f %.1f %d %.2f %d\n", ip / 1024, pp / 1024, ir / 1024, pr / 1024, np,
                (pat - tb) / 1e6, ns
        }' "$mem")"
    local backlog_max after
    after="$(awk 'END { if (NR) printf "%.1f", $2 / 1024; else print "n/a" }' "$mem")"
    backlog_max="$(awk '$4 > m { m = $4 } END { printf "%.1f", m / 1048576 }' "$poll")"
    # Fields: 1 name, 2 idle, 3 peak, 4 rss_idle, 5 rss_peak, 6 procs, 7 peak_at, 8 samples,
    # 9 save_s, 10 file_mb, 11 set_before, 12 set_during, 13 backlog, 14 cow, 15 after.
    local line
    line="$(awk -v r="$r" -v n="$name" -v tw="$t_w" -v tb="$t_b" -v te="$t_e" -v cw="$c_w" -v cb="$c_b" \
        -v ce="$c_e" -v fb="$file_bytes" -v bl="$backlog_max" -v cow="$cow" -v after="$after" 'BEGIN {
            printf "%s %s %.2f %.1f %.0f %.0f %s %s %s\n", n, r, (te - tb) / 1e6, fb / 1048576,
                (cb - cw) / ((tb - tw) / 1e6), (ce - cb) / ((te - tb) / 1e6), bl,
                (cow == "" ? "-" : sprintf("%.1f", cow / 1048576)), after }')"
    RESULTS+=("$line")
    # shellcheck disable=SC2086
    set -- $line
    log "  BGSAVE $9 s, ${10} MB on disk; Pss idle $2 MB, peak $3 MB (${7} s after BGSAVE;" \
        "${8} samples, up to $6 processes), 1 s after the save ${15} MB; SET/s before ${11}, during ${12}"
}

# --- report ----------------------------------------------------------------

div() {  # a/b with $3 decimals, n/a when either is missing or b is 0
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
        if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.*f", d, a / b }'
}

print_report() {
    local l
    log ""
    if (( CLIENTS > 0 )); then
        log "Snapshot of $KEYS keys x $VALUE B under continuous SETs ($CLIENTS clients, pipeline $PIPELINE);"
    else
        log "Snapshot of $KEYS keys x $VALUE B with no load (CLIENTS=0);"
    fi
    log "memory = Pss of the server and its children (BGSAVE fork) summed, sampled every 100 ms;"
    log "idle = sample before BGSAVE (after ${WARMUP}s$( (( CLIENTS > 0 )) && echo " of load")), peak = max from BGSAVE to completion;"
    log "save s = BGSAVE to rdb_bgsave_in_progress:0 (100 ms poll); MB/s = file MB / save s (MB = MiB)."
    log ""
    printf '%-12s | %8s | %8s | %9s | %7s | %8s | %7s\n' server "idle MB" "peak MB" "peak/idle" "save s" "file MB" "MB/s"
    printf -- '-%.0s' {1..78}; echo
    for l in "${RESULTS[@]}"; do
        # shellcheck disable=SC2086
        set -- $l
        printf '%-12s | %8s | %8s | %9s | %7s | %8s | %7s\n' "$1" "$2" "$3" "$(div "$3" "$2" 3)" \
            "$9" "${10}" "$(div "${10}" "$9" 1)"
    done
    log ""
    log "Details (RSS sums count pages shared by redis and its fork twice; for reference):"
    printf '%-12s | %8s | %8s | %9s | %5s | %8s | %8s | %9s | %9s | %10s | %7s\n' server "RSS idle" \
        "RSS peak" "peak/idle" procs "peak at" "after MB" "SET/s pre" "SET/s dur" "backlog MB" "CoW MB"
    printf -- '-%.0s' {1..123}; echo
    for l in "${RESULTS[@]}"; do
        # shellcheck disable=SC2086
        set -- $l
        printf '%-12s | %8s | %8s | %9s | %5s | %7ss | %8s | %9s | %9s | %10s | %7s\n' "$1" "$4" "$5" \
            "$(div "$5" "$4" 3)" "$6" "$7" "${15}" "${11}" "${12}" "${13}" "${14}"
    done
    log "  peak at = seconds after BGSAVE of the peak sample; after MB = Pss sum 1 s after the save"
    log "  (load still on); SET/s pre / dur = SETs per second before / during the save; backlog MB ="
    log "  max rdb_save_backlog_bytes seen (Strata's captured-but-unwritten copies); CoW MB = redis'"
    log "  rdb_last_cow_size."

    # Ratio lines against redis, and the target for each Strata run.
    local redis_line="" s r_pi s_pi verdict
    for l in "${RESULTS[@]}"; do [[ "$l" == redis\ * ]] && redis_line="$l"; done
    log ""
    for l in "${RESULTS[@]}"; do
        [[ "$l" == strata-* ]] || continue
        # shellcheck disable=SC2086
        set -- $l
        s="$1"; s_pi="$(div "$3" "$2" 3)"
        if [[ -n "$redis_line" ]]; then
            local rl
            read -ra rl <<<"$redis_line"
            r_pi="$(div "${rl[2]}" "${rl[1]}" 3)"
            log "$s vs redis: peak MB $3 / ${rl[2]} = $(div "$3" "${rl[2]}" 2);" \
                "peak/idle $s_pi vs $r_pi; save time $9 / ${rl[8]} s = $(div "$9" "${rl[8]}" 2);" \
                "SET/s during save ${12} / ${rl[11]} = $(div "${12}" "${rl[11]}" 2)"
        fi
        if [[ "$s_pi" == n/a ]]; then verdict="n/a"
        elif awk -v r="$s_pi" -v t="$TARGET_PEAK_IDLE" 'BEGIN { exit !(r <= t) }'; then verdict="MET"
        else verdict="NOT MET (+$(awk -v r="$s_pi" -v t="$TARGET_PEAK_IDLE" 'BEGIN { printf "%.1f", (r - t) * 100 }') points)"
        fi
        log "Target $s peak/idle <= $TARGET_PEAK_IDLE: $s_pi $verdict"
    done
}

# --- main ------------------------------------------------------------------

main() {
    (( BASH_VERSINFO[0] >= 5 )) || die "needs bash 5 (EPOCHREALTIME)"
    [[ "$KEYS" =~ ^[1-9][0-9]*$ ]] || die "KEYS must be a positive integer"
    [[ "$VALUE" =~ ^[1-9][0-9]*$ ]] || die "VALUE must be a positive integer"
    [[ "$CLIENTS" =~ ^[0-9]+$ ]] || die "CLIENTS must be a number (0 = no load)"
    [[ "$WARMUP" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "WARMUP must be a number of seconds"
    local runs=() c
    case "$ONLY" in
        "" | both | strata | redis) ;;
        *) die "ONLY must be 'strata', 'redis' or empty (got '$ONLY')" ;;
    esac
    if [[ "$ONLY" != redis ]]; then
        for c in $SNAPSHOT_COMPRESSIONS; do runs+=("strata-$c"); done
    fi
    if [[ "$ONLY" != strata ]]; then runs+=(redis); fi
    (( ${#runs[@]} > 0 )) || die "nothing to run (SNAPSHOT_COMPRESSIONS is empty)"

    install_redis_if_missing
    if [[ "$ONLY" != redis ]]; then build_strata; fi
    choose_cpus
    WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-snapbench.XXXXXX")"
    make_value_pool
    # Everything this script runs itself (sampler, INFO polls, fill) goes on the client's
    # CPU, so the server has its CPU to itself (the servers are pinned explicitly).
    if [[ $PIN -eq 1 ]]; then taskset -pc "$CLIENT_CPU" $$ >/dev/null; fi

    local -A port
    port[strata]="$(find_free_port "$STRATA_PORT")"
    port[redis]="$(find_free_port "$REDIS_PORT")"
    [[ "${port[strata]}" != "${port[redis]}" ]] || port[redis]="$(find_free_port $((port[strata] + 1)))"

    log "Runs: ${runs[*]}; $KEYS keys x $VALUE B; load: $CLIENTS clients, pipeline $PIPELINE; warmup ${WARMUP}s"
    if [[ $PIN -eq 1 ]]; then
        log "Servers (and redis' BGSAVE child) on CPU $SERVER_CPU, load and sampling on CPU $CLIENT_CPU"
    fi
    log "Temp dir: $WORKDIR"
    local load1
    read -r load1 _ </proc/loadavg
    if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
        warn "load average is $load1: something else is running, results will be noisy"
    fi
    local r
    for r in "${runs[@]}"; do
        if [[ "$r" == redis ]]; then run_one "$r" "${port[redis]}"; else run_one "$r" "${port[strata]}"; fi
    done
    print_report
}

main "$@"
