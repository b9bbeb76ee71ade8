#!/usr/bin/env bash
# MULTI/EXEC of two SETs: Strata against redis-server, each alone on one pinned core.
#
# For each server a fresh process runs on SERVER_CPU (strata with --proactor_threads 1) and
# benches/multi_load.py drives it from CLIENT_CPU: CONNS connections, each keeping PIPELINE
# transactions (MULTI, SET a v, SET b v, EXEC on random keys) in flight for SECONDS. Reported:
# transactions/s and the server's CPU time per transaction (utime+stime from /proc), then the
# strata/redis ratios. The loader checks every reply byte for byte.
#
# Environment (all optional):
#   SECONDS_PER_RUN  run length (default 10)    CONNS (default 8)   PIPELINE (default 16)
#   KEYSPACE (default 100000)   VALUE_SIZE (default 64)
#   STRATA_BIN   strata binary (default <target>/release/strata; SKIP_BUILD=1 skips the build)
#   SERVER_CPU / CLIENT_CPU  (default: 1st / 2nd allowed CPU)   PORT (default 17379)
# Smoke run: SECONDS_PER_RUN=3 SKIP_BUILD=1 STRATA_BIN=target/debug/strata benches/multi_compare.sh
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
STRATA_BIN="${STRATA_BIN:-$TARGET/release/strata}"
RUN_S="${SECONDS_PER_RUN:-10}"
CONNS="${CONNS:-8}"
PIPELINE="${PIPELINE:-16}"
KEYSPACE="${KEYSPACE:-100000}"
VALUE_SIZE="${VALUE_SIZE:-64}"
CLK_TCK="$(getconf CLK_TCK)"
PIN=1
SERVER_PID=""
WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/multi-bench.XXXXXX")"
trap 'stop_pid "$SERVER_PID" 5 || true; rm -rf "$WORKDIR"' EXIT

command -v redis-server >/dev/null || die "redis-server not found"
command -v python3 >/dev/null || die "python3 not found"
build_strata
choose_cpus

declare -A RATE CPU
for name in redis strata; do
    port="$(find_free_port "${PORT:-17379}")"
    start_pinned_server "$name" "$port" || die "$name did not start on port $port"
    c0="$(server_cpu_ticks)"
    pin_prefix "$CLIENT_CPU"
    read -r done elapsed rate < <("${PIN_CMD[@]}" python3 "$SCRIPT_DIR/multi_load.py" "$port" \
        "$RUN_S" "$CONNS" "$PIPELINE" "$KEYSPACE" "$VALUE_SIZE")
    c1="$(server_cpu_ticks)"
    kill -0 "$SERVER_PID" 2>/dev/null || die "$name died during the run"
    stop_pid "$SERVER_PID" 5 || true
    SERVER_PID=""
    RATE[$name]="$rate"
    CPU[$name]="$(awk -v k="$((c1 - c0))" -v hz="$CLK_TCK" -v n="$done" \
        'BEGIN { printf "%.2f", k / hz * 1e6 / (n > 0 ? n : 1) }')"
    printf '%-7s %10.0f tx/s  %8s us CPU/tx  (%d tx in %ss)\n' \
        "$name" "$rate" "${CPU[$name]}" "$done" "$elapsed"
done
awk -v sr="${RATE[strata]}" -v rr="${RATE[redis]}" -v sc="${CPU[strata]}" -v rc="${CPU[redis]}" \
    'BEGIN { printf "strata/redis: tx/s %.2f, CPU per tx %.2f\n", sr / rr, sc / rc }'
