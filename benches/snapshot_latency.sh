#!/usr/bin/env bash
# Client latency while a snapshot is being saved, against the same server idle.
#
# One Strata core holds KEYS keys of VALUE bytes (DEBUG POPULATE). redis-benchmark (20
# clients, pipeline 1, random keys over the whole keyspace) runs GET then SET, each REQUESTS
# requests: once idle, once right after BGSAVE, for ROUNDS rounds. Printed: p50/p99 per phase
# (medians over the rounds) and the p99 ratio save/idle per command. Target (issue 5): the
# p99 during a save within 2x of idle.
#
# Environment: KEYS (1000000), VALUE (1024), REQUESTS (150000), ROUNDS (3), THROTTLE_MB
# (0 = none; e.g. 200 stretches the save over the whole measurement), COMPRESSION (none),
# STRATA_BIN (default: target/release/strata, built), SERVER_CPU / CLIENT_CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh

KEYS="${KEYS:-1000000}"
VALUE="${VALUE:-1024}"
REQUESTS="${REQUESTS:-150000}"
ROUNDS="${ROUNDS:-3}"
THROTTLE_MB="${THROTTLE_MB:-0}"
COMPRESSION="${COMPRESSION:-none}"
PIN=1
choose_cpus

if [[ -z "${STRATA_BIN:-}" ]]; then
    cargo build --release --bin strata >&2
    STRATA_BIN=target/release/strata
fi
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (apt-get install redis-tools)"

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    stop_pid "$SERVER_PID" 5 || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

PORT="$(find_free_port 17390)"
pin_prefix "$SERVER_CPU"
"${PIN_CMD[@]}" "$STRATA_BIN" --port "$PORT" --proactor_threads 1 --dir "$WORK" \
    --dbfilename bench --snapshot_compression "$COMPRESSION" \
    --snapshot_throttle_mb "$THROTTLE_MB" --log_level warn &
SERVER_PID=$!
wait_for_ping "$PORT" "$SERVER_PID" 30 || die "strata did not start"
redis-cli -p "$PORT" debug populate "$KEYS" key "$VALUE" >/dev/null

saving() { redis-cli -p "$PORT" info persistence | tr -d '\r' | awk -F: '/^rdb_bgsave_in_progress/ {print $2}'; }

# "p50 p99" of one redis-benchmark run of command $1.
measure() {
    pin_prefix "$CLIENT_CPU"
    "${PIN_CMD[@]}" redis-benchmark -p "$PORT" -t "$1" -d "$VALUE" -r "$KEYS" -n "$REQUESTS" \
        -c 20 -P 1 2>/dev/null |
        awk '/latency summary/ {getline; getline; print $3, $5; exit}'
}

declare -A P50 P99
for ((r = 1; r <= ROUNDS; r++)); do
    for phase in idle save; do
        if [[ $phase == save ]]; then
            [[ "$(redis-cli -p "$PORT" bgsave)" == "Background saving started" ]] || die "BGSAVE refused"
        fi
        for cmd in get set; do
            read -r p50 p99 < <(measure "$cmd")
            P50[$phase.$cmd]+="$p50 "
            P99[$phase.$cmd]+="$p99 "
        done
        if [[ $phase == save && "$(saving)" != 1 ]]; then
            warn "round $r: the save ended before the measurement did (raise THROTTLE_MB or REQUESTS)"
        fi
        while [[ "$(saving)" == 1 ]]; do sleep 0.2; done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "Strata, 1 core: $KEYS keys x $VALUE B; redis-benchmark 20 clients, P1, $REQUESTS requests;"
echo "throttle ${THROTTLE_MB} MB/s, compression $COMPRESSION; medians of $ROUNDS rounds (ms)"
printf '%-5s | %9s %9s | %9s %9s | %s\n' cmd "idle p50" "idle p99" "save p50" "save p99" "p99 save/idle"
for cmd in get set; do
    ip50=$(median <<<"${P50[idle.$cmd]}"); ip99=$(median <<<"${P99[idle.$cmd]}")
    sp50=$(median <<<"${P50[save.$cmd]}"); sp99=$(median <<<"${P99[save.$cmd]}")
    ratio=$(awk -v a="$sp99" -v b="$ip99" 'BEGIN {printf "%.2f", a / b}')
    verdict=$(awk -v r="$ratio" 'BEGIN {print (r <= 2.0) ? "MET" : "NOT MET"}')
    printf '%-5s | %9s %9s | %9s %9s | %s (target <= 2: %s)\n' "$cmd" "$ip50" "$ip99" "$sp50" "$sp99" "$ratio" "$verdict"
done
