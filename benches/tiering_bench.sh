#!/usr/bin/env bash
# SSD tiering benchmark: how close GETs of offloaded values come to the disk's own limit,
# what an offloaded key costs in RAM, and what tiering costs a hot/cold workload.
#
#   (a) disk limit: 4 KiB random O_DIRECT reads at queue depth 32 from a glommio DmaFile
#       on the same filesystem as the tier files (benches/disk_read.rs), pinned to SERVER_CPU.
#   (b) strata --tiered_prefix, one shard on SERVER_CPU, --maxmemory MAXMEM, filled with
#       KEY_FACTOR x MAXMEM worth of VALUE_SIZE values; once the offloader has settled,
#       GETs over the whole keyspace, uniformly at random (nearly all misses in RAM),
#       from benches/zipf_get.rs on CLIENT_CPU. Every value read is checked.
#   Then the 90/10 hot/cold workload on the same tiered server and on a server without
#   tiering or maxmemory, started beside it, holding the same keyspace all in RAM: by default
#   (HOT_DIST=zipf) GETs drawn from a Zipf distribution whose exponent makes the hottest 10%
#   of the keys draw 90% of them (1.08 for 512Ki keys); HOT_DIST=hot is the harsher variant,
#   90% uniform over every 10th key and 10% uniform over all keys, so the cold tenth of the
#   GETs all go to disk. The two servers take turns for HOT_ROUNDS rounds and each ratio
#   reported is the median of the rounds' ratios.
#
# Reported: (b)/(a) (target >= 0.7), p99 of (b), RAM bytes per offloaded key (target <=
# 24 + key length), hot tiered / hot all-RAM ops/s (target >= 0.8) for two client shapes
# (CONNS x PIPELINE and WIDE_CONNS x WIDE_PIPELINE: with deep pipelines the all-in-RAM server
# spends least per GET, one recv and one send per PIPELINE GETs, so the kernel's fixed cost
# of each disk read weighs most there), max owned RSS (RssAnon + RssShmem: what maxmemory
# bounds) / maxmemory over the tiered server's fill and loads (target <= 1.05), and every
# wrong value, missing key or tier read error seen. Beside the hot ratios: each server's CPU
# per GET, the tiered run's disk reads per GET and what one costs the core, and (with the
# disk's p50 at queue depths 1, 8 and 32) the state of the disk: the hot ratio is the
# CPU-per-GET ratio times the ratio of the cores' busy shares, and on a virtual disk both move
# with the hour.
#
# Environment (all optional):
#   MAXMEM         --maxmemory of the tiered server               (default 128mb)
#   DURATION       seconds of each measured GET run               (default 15)
#   WARMUP         seconds of unmeasured hot GETs before the first hot run on each server
#                  (default DURATION x 2/3: hot values read from disk must come back first)
#   HOT_ROUNDS     rounds of hot runs; each round measures the tiered and the all-in-RAM
#                  server back to back in both shapes, and the ratios reported are the
#                  medians of the rounds' ratios (default 5: one round's ratio ranged 0.65-0.78
#                  within one run on 2026-12-01)
#   HOT_SECONDS    seconds of each measured hot run                (default 10)
#   HOT_DIST       zipf (default) or hot: the hot/cold workload (see above)
#   DISK_SECONDS   seconds of the disk_read run                   (default DURATION)
#   DISK_FILE_MB   size of the disk_read file in MiB              (default 1024)
#   DISK_LAT_SECONDS  seconds of each of two more disk_read runs, at queue depths 1 and 8,
#                  whose p50 latencies and stalls (reads of 3 ms or more) show the state of
#                  the disk (a virtual disk's vary by hour; 0 skips them)  (default 3)
#   KEY_FACTOR     keyspace = KEY_FACTOR x MAXMEM / VALUE_SIZE     (default 4)
#   VALUE_SIZE     value bytes                                    (default 1024)
#   CONNS, PIPELINE  load generator connections / pipeline depth  (default 8 / 16)
#   WIDE_CONNS, WIDE_PIPELINE  the second shape of the hot runs: many connections, shallow
#                  pipelines, as many clients each sending a few commands (default 32 / 4)
#   VERIFY=0       skip the pass that GETs every key once after the tiered runs
#   SETTLE_TIMEOUT seconds to wait for the offloader after the fill (default 120)
#   TIERED_FLAGS   extra flags for the tiered server (e.g. "--tiered_offload_threshold 0.3")
#   PORT           first port tried                               (default 17379)
#   SERVER_CPU / CLIENT_CPU  CPUs for server and load generator   (default 1st / 2nd allowed)
#   TMPDIR         where the work directory (disk_read file, tier files) goes (default /tmp)
#   SKIP_BUILD=1   use existing binaries: STRATA_BIN, DISK_READ_BIN, ZIPF_GET_BIN (defaults:
#                  target/release/strata and the newest target/release/deps/{disk_read,zipf_get}-*)
#   STARTUP_TIMEOUT  seconds a server may take to answer PING     (default 20)
#
# Quick run (about 2 minutes): MAXMEM=64mb DURATION=5 HOT_SECONDS=3 HOT_ROUNDS=2 benches/tiering_bench.sh
#
# Exit status: 0 when the benchmark ran (targets are informational), 1 when something could
# not be built, a server failed to start or died, or a load run could not talk to it.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

MAXMEM="${MAXMEM:-128mb}"
DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-$(( DURATION * 2 / 3 > 1 ? DURATION * 2 / 3 : 1 ))}"
HOT_ROUNDS="${HOT_ROUNDS:-5}"
HOT_SECONDS="${HOT_SECONDS:-10}"
DISK_SECONDS="${DISK_SECONDS:-$DURATION}"
DISK_FILE_MB="${DISK_FILE_MB:-1024}"
DISK_LAT_SECONDS="${DISK_LAT_SECONDS:-3}"
KEY_FACTOR="${KEY_FACTOR:-4}"
VALUE_SIZE="${VALUE_SIZE:-1024}"
CONNS="${CONNS:-8}"
PIPELINE="${PIPELINE:-16}"
WIDE_CONNS="${WIDE_CONNS:-32}"
WIDE_PIPELINE="${WIDE_PIPELINE:-4}"
VERIFY="${VERIFY:-1}"
SETTLE_TIMEOUT="${SETTLE_TIMEOUT:-120}"
TIERED_FLAGS="${TIERED_FLAGS:-}"
PORT="${PORT:-17379}"
SKIP_BUILD="${SKIP_BUILD:-0}"
HOT_DIST="${HOT_DIST:-zipf}"
case "$HOT_DIST" in
    zipf) HOT_LABEL="Zipf 90/10" ;;
    hot) HOT_LABEL="hot 90/10 (uniform tail)" ;;
    *) echo "HOT_DIST must be zipf or hot, not '$HOT_DIST'" >&2; exit 1 ;;
esac
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-20}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
DISK_READ_BIN="${DISK_READ_BIN:-}"
ZIPF_GET_BIN="${ZIPF_GET_BIN:-}"
PREFIX="key:"

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-tiering.XXXXXX")"
SERVER_PID=""
SERVER_NAME=""
SPORT=""
# Both servers run side by side during the hot runs: pid and port by name; SERVER_PID,
# SERVER_NAME and SPORT are the one the load goes to (see use_server).
declare -A PIDS PORTS
SAMPLER_PID=""
CHILD_PID=""
PIN=1
declare -A R   # results, printed in the final table

# --- cleanup ---------------------------------------------------------------

stop_sampler() {
    [[ -n "$SAMPLER_PID" ]] || return 0
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
}

# TERM first (the server removes its tier files on a clean exit), KILL after 15 s.
stop_server() {
    local pid="$SERVER_PID" i
    [[ "$SERVER_NAME" == tiered ]] && stop_sampler
    [[ -n "$pid" ]] || return 0
    SERVER_PID=""
    PIDS[$SERVER_NAME]=""
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 150; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            warn "$SERVER_NAME did not exit within 15 s of SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    if [[ -n "$CHILD_PID" ]]; then
        kill -TERM "$CHILD_PID" 2>/dev/null || true
        wait "$CHILD_PID" 2>/dev/null || true
    fi
    local name
    for name in "${!PIDS[@]}"; do
        use_server "$name"
        stop_server
    done
    rm -rf "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- setup -----------------------------------------------------------------

need_redis_cli() {
    command -v redis-cli >/dev/null && return 0
    log "Installing redis-tools (for redis-cli)..."
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools
    command -v redis-cli >/dev/null || die "redis-cli still missing after install"
}

build() {
    if [[ "$SKIP_BUILD" != 1 ]]; then
        command -v cargo >/dev/null || die "cargo not found"
        log "Building (cargo build --release --bin strata --bench disk_read --bench zipf_get)..."
        local json="$WORKDIR/build.json"
        (cd "$ROOT" && cargo build --release --bin strata --bench disk_read --bench zipf_get \
            --message-format=json-render-diagnostics >"$json") || die "cargo build failed"
        local exe
        while read -r exe; do
            case "$(basename "$exe")" in
                disk_read-*) DISK_READ_BIN="$exe" ;;
                zipf_get-*) ZIPF_GET_BIN="$exe" ;;
            esac
        done < <(grep -o '"executable":"[^"]*"' "$json" | sed 's/^"executable":"//; s/"$//')
    fi
    [[ -n "$DISK_READ_BIN" ]] || DISK_READ_BIN="$(newest_bench "$ROOT/target" disk_read)"
    [[ -n "$ZIPF_GET_BIN" ]] || ZIPF_GET_BIN="$(newest_bench "$ROOT/target" zipf_get)"
    [[ -x "$STRATA_BIN" ]] || die "strata binary not found at $STRATA_BIN"
    [[ -x "$DISK_READ_BIN" ]] || die "disk_read bench binary not found (build it: cargo bench --no-run)"
    [[ -x "$ZIPF_GET_BIN" ]] || die "zipf_get bench binary not found (build it: cargo bench --no-run)"
}

# Bytes from a --maxmemory style size (same units as strata: k=1000, kb=1024, ...).
to_bytes() {
    local s="${1,,}" n unit
    n="${s%%[!0-9]*}"; unit="${s#"$n"}"
    [[ -n "$n" ]] || die "bad size '$1'"
    case "$unit" in
        "" | b) echo "$n" ;;
        k) echo $((n * 1000)) ;;     kb) echo $((n * 1024)) ;;
        m) echo $((n * 1000000)) ;;  mb) echo $((n * 1048576)) ;;
        g) echo $((n * 1000000000)) ;; gb) echo $((n * 1073741824)) ;;
        *) die "bad size '$1'" ;;
    esac
}

# --- servers ---------------------------------------------------------------

server_failed() {
    printf 'ERROR: %s\n' "$1" >&2
    if [[ -s "$WORKDIR/$SERVER_NAME.log" ]]; then
        printf -- '--- last lines of %s log ---\n' "$SERVER_NAME" >&2
        tail -n 30 "$WORKDIR/$SERVER_NAME.log" >&2
    fi
    exit 1
}

check_alive() {
    kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$SERVER_NAME died during $1"
}

# Sends what follows (load, INFO, stop) to server `name`. The other one is stopped
# (SIGSTOP) meanwhile, so that its timers do not take turns on the measured server's core.
use_server() {
    local other
    for other in "${!PIDS[@]}"; do
        [[ -n "${PIDS[$other]}" ]] || continue
        if [[ "$other" == "$1" ]]; then
            kill -CONT "${PIDS[$other]}" 2>/dev/null || true
        else
            kill -STOP "${PIDS[$other]}" 2>/dev/null || true
        fi
    done
    SERVER_NAME="$1"
    SERVER_PID="${PIDS[$1]:-}"
    SPORT="${PORTS[$1]}"
}

start_server() {  # name, then strata flags; the port is PORTS[name]
    local name="$1"; shift
    use_server "$name"
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "$STRATA_BIN" --proactor_threads 1 --port "$SPORT" --dbfilename "" "$@" \
        >"$WORKDIR/$name.log" 2>&1 &
    SERVER_PID=$!
    PIDS[$name]=$SERVER_PID
    local deadline=$((SECONDS + STARTUP_TIMEOUT))
    until [[ "$(timeout 2 redis-cli -p "$SPORT" ping 2>/dev/null)" == PONG ]]; do
        kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$name exited during startup"
        (( SECONDS < deadline )) || server_failed "$name did not answer PING within ${STARTUP_TIMEOUT}s"
        sleep 0.1
    done
    [[ "$name" == tiered ]] && start_sampler
    return 0
}

# Max owned RSS (kB: RssAnon + RssShmem, what maxmemory bounds; not the binary's file pages)
# of the server, sampled every 100 ms into $WORKDIR/rss.max.
start_sampler() {
    echo 0 >"$WORKDIR/rss.max"
    (
        max=0
        while kill -0 "$SERVER_PID" 2>/dev/null; do
            v=0
            while read -r k val _; do
                if [[ "$k" == RssAnon: || "$k" == RssShmem: ]]; then v=$((v + val)); fi
            done <"/proc/$SERVER_PID/status" 2>/dev/null || true
            if (( v > max )); then max="$v"; echo "$max" >"$WORKDIR/rss.max"; fi
            sleep 0.1
        done
    ) &
    SAMPLER_PID=$!
}

rss_max_bytes() { echo $(( $(cat "$WORKDIR/rss.max") * 1024 )); }

# INFO field (from INFO all) of the running server; "" when missing.
INFO_TEXT=""
info_refresh() {
    INFO_TEXT="$(timeout 10 redis-cli -p "$SPORT" info all 2>/dev/null | tr -d '\r')" || true
}
info() { awk -F: -v k="$1" '$1 == k {print $2; exit}' <<<"$INFO_TEXT"; }
dbsize() { timeout 10 redis-cli -p "$SPORT" dbsize 2>/dev/null | tr -d '\r'; }

# --- load ------------------------------------------------------------------

# Runs zipf_get pinned to CLIENT_CPU; its output line lands in $LAST, its stderr is shown.
# Every run draws its own sequence of keys (--seed), so that no measured run replays the
# warm-up's GETs in the order in which the warm-up brought their values back to RAM.
LAST=""
RUN_SEED=0
zipf() {
    pin_prefix "$CLIENT_CPU"
    local rc=0
    RUN_SEED=$((RUN_SEED + 1))
    "${PIN_CMD[@]}" "$ZIPF_GET_BIN" "$@" --port "$SPORT" --keys "$KEYS" --prefix "$PREFIX" \
        --value-size "$VALUE_SIZE" --conns "$CONNS" --pipeline "$PIPELINE" --seed "$RUN_SEED" \
        >"$WORKDIR/zipf.out" 2>"$WORKDIR/zipf.err" &
    CHILD_PID=$!
    wait "$CHILD_PID" || rc=$?
    CHILD_PID=""
    LAST="$(grep -E '^(FILL|LOAD) ' "$WORKDIR/zipf.out" | tail -n 1 || true)"
    if [[ -s "$WORKDIR/zipf.err" ]]; then sed 's/^/    /' "$WORKDIR/zipf.err" >&2; fi
    check_alive "zipf_get $1"
    if (( rc != 0 )) || [[ -z "$LAST" ]]; then
        server_failed "zipf_get $* failed (rc=$rc) against $SERVER_NAME"
    fi
    log "    $LAST"
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# Waits until the offloader is done: used_memory under 0.6 x maxmemory, no writes pending
# and tiered_disk_keys unchanged for a second; warns at SETTLE_TIMEOUT.
wait_settled() {
    local deadline=$((SECONDS + SETTLE_TIMEOUT)) prev=-1 stable=0 used disk pend ram
    while :; do
        check_alive "settling"
        info_refresh
        used="$(info used_memory)"; disk="$(info tiered_disk_keys)"
        pend="$(info tiered_pending_writes)"; ram="$(info tiered_ram_keys)"
        if [[ -n "$used" && -n "$disk" ]] && (( used * 10 < MAXMEM_BYTES * 6 )) \
            && [[ "${pend:-0}" == 0 && "$disk" == "$prev" ]]; then
            stable=$((stable + 1))
            (( stable >= 2 )) && break
        else
            stable=0
        fi
        prev="$disk"
        if (( SECONDS >= deadline )); then
            warn "offloader not settled after ${SETTLE_TIMEOUT}s (used_memory=$used disk_keys=$disk ram_keys=$ram); measuring anyway"
            break
        fi
        sleep 0.5
    done
    log "    settled: used_memory=$used tiered_disk_keys=$disk tiered_ram_keys=$ram"
}

# Runs a measured GET load with INFO snapshots around it; $1 = result name, $2 = dist.
# Runs a command with the load generator's second shape (WIDE_CONNS x WIDE_PIPELINE).
wide() {
    local conns="$CONNS" pipeline="$PIPELINE"
    CONNS="$WIDE_CONNS"; PIPELINE="$WIDE_PIPELINE"
    "$@"
    CONNS="$conns"; PIPELINE="$pipeline"
}

measured_get() {
    local name="$1" dist="$2" r0 r1 e0 e1 c0 c1 k0 k1 t0 t1
    info_refresh
    r0="$(info tiered_reads)"; e0="$(info tiered_read_errors)"; c0="$(info tiered_coalesced_reads)"
    k0="$(server_cpu_ticks)"; t0="$(date +%s%N)"
    zipf get --dist "$dist" --seconds "$DURATION"
    k1="$(server_cpu_ticks)"; t1="$(date +%s%N)"
    R[$name.cpu]="$(awk -v k=$((k1 - k0)) -v hz="$(getconf CLK_TCK)" -v ns=$((t1 - t0)) \
        'BEGIN { printf "%.0f", (k / hz) / (ns / 1e9) * 100 }')"
    log "    server CPU ${R[$name.cpu]}% of one core"
    info_refresh
    r1="$(info tiered_reads)"; e1="$(info tiered_read_errors)"; c1="$(info tiered_coalesced_reads)"
    R[$name.ops]="$(field ops_per_sec "$LAST")"
    R[$name.p50]="$(field p50_us "$LAST")"
    R[$name.p99]="$(field p99_us "$LAST")"
    R[$name.n]="$(field ops "$LAST")"
    R[$name.misses]="$(field misses "$LAST")"
    R[$name.wrong]="$(field wrong "$LAST")"
    R[$name.errors]="$(field errors "$LAST")"
    if [[ -n "$r0" && -n "$r1" ]]; then
        R[$name.disk_reads]=$((r1 - r0))
        R[$name.read_errors]=$((${e1:-0} - ${e0:-0}))
        R[$name.coalesced]=$((${c1:-0} - ${c0:-0}))
        log "    server: tiered_reads +$((r1 - r0)) ($(awk -v a=$((r1 - r0)) -v b="${R[$name.n]}" \
            'BEGIN { printf "%.2f", b ? a / b : 0 }') per GET), coalesced +${R[$name.coalesced]}, read errors +${R[$name.read_errors]}, server read latency since start p50/p99 $(info tiered_read_latency_p50_us)/$(info tiered_read_latency_p99_us) us"
    fi
}

# One disk_read run on SERVER_CPU at queue depth $1 for $2 seconds (over a fresh file, removed
# after): its DISK line, logged, in DISK_LINE (empty when it failed).
disk_run() {
    local qd="$1" seconds="$2" rc=0 line
    DISK_LINE=""
    pin_prefix "$SERVER_CPU"
    "${PIN_CMD[@]}" "$DISK_READ_BIN" "$WORKDIR/disk_read.dat" --size-mb "$DISK_FILE_MB" \
        --seconds "$seconds" --qd "$qd" --bs 4096 >"$WORKDIR/disk.out" 2>"$WORKDIR/disk.err" &
    CHILD_PID=$!
    wait "$CHILD_PID" || rc=$?
    CHILD_PID=""
    sed 's/^/    /' "$WORKDIR/disk.err" >&2
    rm -f "$WORKDIR/disk_read.dat"
    line="$(grep '^DISK ' "$WORKDIR/disk.out" || true)"
    if (( rc != 0 )) || [[ -z "$line" ]]; then
        warn "disk_read at queue depth $qd failed (rc=$rc)"
        return 0
    fi
    log "    $line"
    DISK_LINE="$line"
}

# --- report helpers --------------------------------------------------------

# The median of the numbers given ("n/a" when there are none).
median() {
    printf '%s\n' "$@" | { grep -E '^[0-9.]+$' || true; } | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.10g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# Per shape: the median over the rounds of ops/s, p99 and CPU of each server and of the
# tiered/all-in-RAM ratio (R[thot.*], R[rhot.*], R[hot.ratio], R[hot.ratios] for the deep
# shape, the same with "hotw" for the wide one); error counts are summed over the rounds.
# Also per shape, medians over the rounds of each server's CPU per GET (us; R[$shape.t_us],
# R[$shape.r_us]), the tiered run's disk reads per GET (R[$shape.rpg]) and what a disk read
# costs the core (R[$shape.per_read]: the difference of the two servers' CPU per GET over the
# reads per GET), which shows how much of a shortfall is the kernel's and the disk's.
summarize_rounds() {
    local shape side f round list ratios
    for shape in hot hotw; do
        for side in t r; do
            for f in ops p99 cpu; do
                list=()
                for ((round = 1; round <= HOT_ROUNDS; round++)); do
                    list+=("${R[$side$shape$round.$f]:-}")
                done
                R[$side$shape.$f]="$(median "${list[@]}")"
            done
            for f in wrong misses errors; do
                R[$side$shape.$f]=0
                for ((round = 1; round <= HOT_ROUNDS; round++)); do
                    R[$side$shape.$f]=$(( ${R[$side$shape.$f]} + ${R[$side$shape$round.$f]:-0} ))
                done
            done
        done
        list=()
        for ((round = 1; round <= HOT_ROUNDS; round++)); do
            list+=("$(ratio "${R[t$shape$round.ops]:-}" "${R[r$shape$round.ops]:-}")")
        done
        R[$shape.ratio]="$(median "${list[@]}")"
        R[$shape.ratios]="${list[*]}"
        local t_us=() r_us=() rpg=() per_read=() t r n
        for ((round = 1; round <= HOT_ROUNDS; round++)); do
            t="$(cpu_us_per_op "${R[t$shape$round.cpu]:-}" "${R[t$shape$round.ops]:-}")"
            r="$(cpu_us_per_op "${R[r$shape$round.cpu]:-}" "${R[r$shape$round.ops]:-}")"
            n="$(awk -v a="${R[t$shape$round.disk_reads]:-}" -v b="${R[t$shape$round.n]:-}" \
                'BEGIN { if (a == "" || b + 0 == 0) print "n/a"; else printf "%.4f", a / b }')"
            t_us+=("$t"); r_us+=("$r"); rpg+=("$n")
            per_read+=("$(awk -v t="$t" -v r="$r" -v n="$n" \
                'BEGIN { if (t == "n/a" || r == "n/a" || n == "n/a" || n + 0 == 0) print "n/a"; else printf "%.1f", (t - r) / n }')")
        done
        R[$shape.t_us]="$(median "${t_us[@]}")"
        R[$shape.r_us]="$(median "${r_us[@]}")"
        R[$shape.rpg]="$(median "${rpg[@]}")"
        R[$shape.per_read]="$(median "${per_read[@]}")"
    done
}

# Microseconds of the server's core per operation: $1 = CPU % of one core, $2 = ops/s.
cpu_us_per_op() {
    awk -v c="$1" -v o="$2" 'BEGIN { if (c == "" || o + 0 == 0) print "n/a"; else printf "%.2f", c * 1e4 / o }'
}

calc() { awk "BEGIN { v = $1; if (v != v) print \"n/a\"; else printf \"%.${2:-2}f\", v }" 2>/dev/null || echo n/a; }
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'
}
verdict() {  # value op target
    local v="$1" op="$2" t="$3"
    if [[ -z "$v" || "$v" == n/a ]]; then echo "n/a"; return; fi
    if awk -v v="$v" -v t="$t" -v op="$op" 'BEGIN { exit !((op == ">=") ? v >= t : v <= t) }'; then
        echo MET
    else
        echo "NOT MET"
    fi
}

# Mean length of PREFIX<i> for i in 0..KEYS-1.
mean_key_len() {
    awk -v k="$KEYS" -v p="${#PREFIX}" 'BEGIN {
        total = 0; lo = 0; d = 1; hi = 10
        while (lo < k) { n = (hi < k ? hi : k) - lo; total += n * (p + d); lo = hi; hi *= 10; d++ }
        printf "%.1f", total / k }'
}

# --- main ------------------------------------------------------------------

main() {
    need_redis_cli
    build
    choose_cpus
    MAXMEM_BYTES="$(to_bytes "$MAXMEM")"
    KEYS=$(( KEY_FACTOR * MAXMEM_BYTES / VALUE_SIZE ))
    (( KEYS > 0 )) || die "empty keyspace (MAXMEM=$MAXMEM KEY_FACTOR=$KEY_FACTOR VALUE_SIZE=$VALUE_SIZE)"
    KEY_LEN="$(mean_key_len)"
    PORTS[tiered]="$(find_free_port "$PORT")"
    PORTS[ram]="$(find_free_port "$((PORTS[tiered] + 1))")"
    log "Work dir $WORKDIR ($(df -h --output=source,fstype "$WORKDIR" 2>/dev/null | tail -n 1 | tr -s ' '))"
    log "maxmemory $MAXMEM ($MAXMEM_BYTES B), keyspace $KEYS x $VALUE_SIZE B (${KEY_FACTOR}x maxmemory), mean key length $KEY_LEN"
    log "load: $CONNS connections x pipeline $PIPELINE, $DURATION s per measured run, hot warm-up $WARMUP s"
    [[ $PIN -eq 1 ]] && log "server and disk_read on CPU $SERVER_CPU, load generator on CPU $CLIENT_CPU"

    # (a) the disk.
    log ""
    log "[1/4] disk: 4 KiB random reads, queue depth 32, ${DISK_FILE_MB} MiB file, ${DISK_SECONDS} s"
    local disk_line
    disk_run 32 "$DISK_SECONDS"
    disk_line="$DISK_LINE"
    if [[ -z "$disk_line" ]]; then
        warn "without the disk's rate, (b)/(a) will be n/a"
    fi
    R[disk.ops]="$(field reads_per_sec "$disk_line")"
    R[disk.p50]="$(field p50_us "$disk_line")"
    R[disk.p99]="$(field p99_us "$disk_line")"
    if (( DISK_LAT_SECONDS > 0 )); then
        local qd
        for qd in 1 8; do
            log "    queue depth $qd, ${DISK_LAT_SECONDS} s"
            disk_run "$qd" "$DISK_LAT_SECONDS"
            R[disk$qd.p50]="$(field p50_us "$DISK_LINE")"
            R[disk$qd.slow]="$(field slow_pct "$DISK_LINE")"
        done
    fi

    # (b) tiered server.
    log ""
    log "[2/4] tiered server: fill, settle, uniform GETs"
    # shellcheck disable=SC2086  # TIERED_FLAGS is a list of flags
    start_server tiered --maxmemory "$MAXMEM" --tiered_prefix "$WORKDIR/strata" $TIERED_FLAGS
    info_refresh
    local base_used
    base_used="$(info used_memory)"
    log "    empty server: used_memory=$base_used used_memory_rss=$(info used_memory_rss)"
    zipf fill
    R[fill.ops]="$(field ops_per_sec "$LAST")"
    R[fill.oom]="$(field oom_replies "$LAST")"
    R[fill.errors]="$(field errors "$LAST")"
    wait_settled
    local used dbs disk_keys ram_keys
    used="$(info used_memory)"; disk_keys="$(info tiered_disk_keys)"; ram_keys="$(info tiered_ram_keys)"
    dbs="$(dbsize)"
    R[t.used]="$used"; R[t.dbsize]="$dbs"; R[t.disk_keys]="$disk_keys"; R[t.ram_keys]="$ram_keys"
    R[t.base]="$base_used"
    R[t.rss_settled]="$(info used_memory_rss)"
    (( ${dbs:-0} == KEYS )) || warn "DBSIZE is $dbs after filling $KEYS keys"
    measured_get uni uniform

    log ""
    log "[3/4] all-in-RAM server (no tiering, no maxmemory) beside it: fill"
    start_server ram
    info_refresh
    local ram_base
    ram_base="$(info used_memory)"
    zipf fill
    info_refresh
    R[r.used]="$(info used_memory)"; R[r.base]="$ram_base"; R[r.dbsize]="$(dbsize)"

    # The two servers take turns, so that a drift of the machine's speed over minutes does
    # not land on one side of the ratio.
    log ""
    log "[4/4] $HOT_LABEL GETs: $HOT_ROUNDS rounds of tiered, then all-in-RAM, ${HOT_SECONDS} s each, in two shapes"
    local s round
    for s in tiered ram; do
        use_server "$s"
        log "    $s: warm-up ${WARMUP} s"
        zipf get --dist "$HOT_DIST" --seconds "$WARMUP"
    done
    for ((round = 1; round <= HOT_ROUNDS; round++)); do
        for s in tiered ram; do
            use_server "$s"
            log "    round $round, $s, $CONNS connections x pipeline $PIPELINE"
            DURATION="$HOT_SECONDS" measured_get "${s:0:1}hot$round" "$HOT_DIST"
        done
        for s in tiered ram; do
            use_server "$s"
            log "    round $round, $s, $WIDE_CONNS connections x pipeline $WIDE_PIPELINE"
            DURATION="$HOT_SECONDS" wide measured_get "${s:0:1}hotw$round" "$HOT_DIST"
        done
    done
    summarize_rounds

    use_server tiered
    if [[ "$VERIFY" == 1 ]]; then
        log "    verify: GET every key once"
        zipf get --dist seq --seconds 1
        R[verify.misses]="$(field misses "$LAST")"
        R[verify.wrong]="$(field wrong "$LAST")"
        R[verify.errors]="$(field errors "$LAST")"
    fi
    info_refresh
    R[t.read_errors]="$(info tiered_read_errors)"
    R[t.write_errors]="$(info tiered_write_errors)"
    R[t.dropped]="$(info tiered_unreadable_keys_dropped)"
    R[t.uploaded]="$(info tiered_uploaded)"
    R[t.compacted]="$(info tiered_compacted)"
    R[t.dbsize_end]="$(dbsize)"
    R[t.warnlines]="$(grep -cE ' (WARN|ERROR) ' "$WORKDIR/tiered.log" || true)"
    R[t.rss_max]="$(rss_max_bytes)"
    if (( ${R[t.warnlines]:-0} > 0 )); then
        log "    server log: ${R[t.warnlines]} WARN/ERROR line(s); first ones:"
        awk '/ (WARN|ERROR) / && n++ < 4 { print "      " substr($0, 1, 200) }' "$WORKDIR/tiered.log"
    fi
    stop_server
    use_server ram
    stop_server

    report
}

report() {
    # RAM per offloaded key, three ways: used/dbsize; (used - empty)/disk keys (an upper
    # bound: it also charges the keys still in RAM); and that minus the keys still in RAM at
    # the all-in-RAM server's cost per key (the estimate the target is judged on).
    local per_db per_disk ram_cost per_est target_bytes
    per_db="$(ratio "${R[t.used]}" "${R[t.dbsize]}")"
    per_disk="$(ratio "$(( ${R[t.used]:-0} - ${R[t.base]:-0} ))" "${R[t.disk_keys]}")"
    ram_cost="$(ratio "$(( ${R[r.used]:-0} - ${R[r.base]:-0} ))" "${R[r.dbsize]}")"
    per_est="$(awk -v u="${R[t.used]}" -v b="${R[t.base]}" -v r="${R[t.ram_keys]}" -v c="$ram_cost" \
        -v d="${R[t.disk_keys]}" 'BEGIN { if (c == "n/a" || d + 0 == 0) print "n/a"; else printf "%.1f", (u - b - r * c) / d }')"
    target_bytes="$(calc "24 + $KEY_LEN" 1)"
    local ab hot_ratio wide_ratio rss_ratio
    ab="$(ratio "${R[uni.ops]}" "${R[disk.ops]}")"
    hot_ratio="${R[hot.ratio]:-n/a}"
    wide_ratio="${R[hotw.ratio]:-n/a}"
    rss_ratio="$(ratio "${R[t.rss_max]}" "$MAXMEM_BYTES")"

    log ""
    log "Tiering benchmark: maxmemory $MAXMEM, $KEYS keys x $VALUE_SIZE B, $CONNS conns x pipeline $PIPELINE, ${DURATION} s runs"
    log "(latencies are per pipelined round trip of $PIPELINE GETs, client side)"
    log ""
    printf '%-48s %14s   %-14s %s\n' metric value target verdict
    printf -- '-%.0s' {1..92}; echo
    row() { printf '%-48s %14s   %-14s %s\n' "$1" "$2" "$3" "$4"; }
    row "(a) disk 4 KiB random reads/s, QD 32" "${R[disk.ops]:-n/a}" "" ""
    row "    disk read p50 / p99 (us)" "${R[disk.p50]:-n/a} / ${R[disk.p99]:-n/a}" "" ""
    if (( DISK_LAT_SECONDS > 0 )); then
        row "    disk read p50 at QD 1 / QD 8 (us)" "${R[disk1.p50]:-n/a} / ${R[disk8.p50]:-n/a}" "" ""
        row "    % of read time in stalls >= 3 ms, QD 1 / 8" "${R[disk1.slow]:-n/a} / ${R[disk8.slow]:-n/a}" "" ""
    fi
    row "(b) tiered uniform GET ops/s" "${R[uni.ops]:-n/a}" "" ""
    row "(b)/(a)" "$ab" ">= 0.7" "$(verdict "$ab" ">=" 0.7)"
    row "    server CPU during (b) (% of one core)" "${R[uni.cpu]:-n/a}" "" ""
    row "    p50 / p99 of (b) (us)" "${R[uni.p50]:-n/a} / ${R[uni.p99]:-n/a}" "" ""
    row "    disk reads per GET in (b)" "$(ratio "${R[uni.disk_reads]:-}" "${R[uni.n]:-}")" "" ""
    row "RAM B/offloaded key: used/dbsize" "$per_db" "" ""
    row "RAM B/offloaded key: (used-empty)/disk_keys" "$per_disk" "(upper bound)" ""
    row "RAM B/offloaded key: estimate" "$per_est" "<= $target_bytes" "$(verdict "$per_est" "<=" "$target_bytes")"
    row "    (used_memory / disk keys / RAM keys)" "${R[t.used]}/${R[t.disk_keys]}/${R[t.ram_keys]}" "" ""
    row "    all-in-RAM cost per key (B)" "$ram_cost" "" ""
    row "$HOT_LABEL tiered GET ops/s, ${CONNS}x${PIPELINE}" "${R[thot.ops]:-n/a}" "" ""
    row "    p99 (us) / server CPU %" "${R[thot.p99]:-n/a} / ${R[thot.cpu]:-n/a}" "" ""
    row "$HOT_LABEL all-in-RAM GET ops/s, ${CONNS}x${PIPELINE}" "${R[rhot.ops]:-n/a}" "" ""
    row "    p99 (us) / server CPU %" "${R[rhot.p99]:-n/a} / ${R[rhot.cpu]:-n/a}" "" ""
    row "hot tiered / all-in-RAM, ${CONNS}x${PIPELINE} (median)" "$hot_ratio" ">= 0.8" "$(verdict "$hot_ratio" ">=" 0.8)"
    row "    per round" "${R[hot.ratios]:-n/a}" "" ""
    row "    server CPU per GET (us), tiered / all-in-RAM" "${R[hot.t_us]:-n/a} / ${R[hot.r_us]:-n/a}" "" ""
    row "    disk reads per GET / CPU per disk read (us)" "${R[hot.rpg]:-n/a} / ${R[hot.per_read]:-n/a}" "" ""
    row "$HOT_LABEL tiered GET ops/s, ${WIDE_CONNS}x${WIDE_PIPELINE}" "${R[thotw.ops]:-n/a}" "" ""
    row "    server CPU %" "${R[thotw.cpu]:-n/a}" "" ""
    row "$HOT_LABEL all-in-RAM GET ops/s, ${WIDE_CONNS}x${WIDE_PIPELINE}" "${R[rhotw.ops]:-n/a}" "" ""
    row "    server CPU %" "${R[rhotw.cpu]:-n/a}" "" ""
    row "hot tiered / all-in-RAM, ${WIDE_CONNS}x${WIDE_PIPELINE} (median)" "$wide_ratio" ">= 0.8" "$(verdict "$wide_ratio" ">=" 0.8)"
    row "    per round" "${R[hotw.ratios]:-n/a}" "" ""
    row "    server CPU per GET (us), tiered / all-in-RAM" "${R[hotw.t_us]:-n/a} / ${R[hotw.r_us]:-n/a}" "" ""
    row "    disk reads per GET / CPU per disk read (us)" "${R[hotw.rpg]:-n/a} / ${R[hotw.per_read]:-n/a}" "" ""
    row "max RSS / maxmemory (tiered, fill + loads)" "$rss_ratio" "<= 1.05" "$(verdict "$rss_ratio" "<=" 1.05)"
    row "    max RSS (MiB)" "$(calc "${R[t.rss_max]} / 1048576" 1)" "" ""
    row "    used_memory_rss after settling (MiB)" "$(calc "${R[t.rss_settled]:-0} / 1048576" 1)" "" ""
    log ""
    log "Correctness (tiered server; all should be 0):"
    local bad=0 k v
    for k in "fill.errors:fill errors" "uni.wrong:wrong values, uniform" "thot.wrong:wrong values, hot" \
        "thotw.wrong:wrong values, hot (wide)" "thotw.misses:missing keys, hot (wide)" \
        "verify.wrong:wrong values, verify pass" "uni.misses:missing keys, uniform (GETs)" \
        "thot.misses:missing keys, hot (GETs)" "verify.misses:missing keys, verify pass" \
        "uni.errors:error replies, uniform" "thot.errors:error replies, hot" \
        "thotw.errors:error replies, hot (wide)" \
        "t.read_errors:tiered_read_errors" "t.write_errors:tiered_write_errors" \
        "t.dropped:tiered_unreadable_keys_dropped" "t.warnlines:WARN/ERROR lines in server log"; do
        v="${R[${k%%:*}]:-n/a}"
        printf '  %-42s %s\n' "${k#*:}" "$v"
        if [[ "$v" != n/a && "$v" != 0 ]]; then bad=1; fi
    done
    printf '  %-42s %s of %s\n' "DBSIZE at the end" "${R[t.dbsize_end]:-n/a}" "$KEYS"
    log "  (fill -OOM replies retried: ${R[fill.oom]:-n/a}; tiered_uploaded ${R[t.uploaded]:-n/a}, tiered_compacted ${R[t.compacted]:-n/a})"
    if (( bad )); then
        log "  => the tiered server LOST OR CORRUPTED DATA or reported errors; see above."
    fi
}

main "$@"
