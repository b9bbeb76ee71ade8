#!/usr/bin/env bash
# Redis' own test units (a Redis source tree, tag 7.0.15) against Strata as an external
# server: one fresh Strata per unit, the counts of passed / failed / ignored tests per unit.
#
# Tests that need what an external server cannot give (DEBUG, replication, a maxmemory
# config) are left out by tag; tests/redis_units/<unit>.skip (the unit's last path part, if
# present) names tests Strata deliberately does not support, each with its reason above it.
#
# A failed test is listed in the log as `[err]`; an `[exception]` (an unknown command, say)
# ends the unit there, so its counts cover only what ran before it.
#
# Environment (all optional):
#   REDIS_SRC   Redis source tree (default /tmp/redis-src)
#   UNITS       units to run (default: the coordination units)
#   THREADS     strata --proactor_threads (default 2)   PORT (default 33100)
#   STRATA_BIN  strata binary (default <target>/release/strata)
#   LOGS        where each unit's output goes (default /tmp/strata-units)
# Example: THREADS=1 UNITS="unit/multi" benches/redis_units.sh
set -uo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$SCRIPT_DIR")"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
STRATA_BIN="${STRATA_BIN:-$TARGET/release/strata}"
REDIS_SRC="${REDIS_SRC:-/tmp/redis-src}"
UNITS="${UNITS:-unit/multi unit/pubsub unit/pubsubshard unit/scripting unit/functions unit/tracking unit/type/list unit/type/zset}"
THREADS="${THREADS:-2}"
PORT="${PORT:-33100}"
LOGS="${LOGS:-/tmp/strata-units}"
TAGS="-needs:repl -needs:debug -needs:config-maxmemory"
mkdir -p "$LOGS"

printf '%-18s %6s %6s %7s\n' unit passed failed ignored
for unit in $UNITS; do
    dir="$(mktemp -d)"
    "$STRATA_BIN" --port "$PORT" --proactor_threads "$THREADS" --dir "$dir" \
        --log_level error >"$LOGS/strata.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    name="${unit##*/}"
    skip=()
    if [[ -f "$ROOT/tests/redis_units/$name.skip" ]]; then
        skip=(--skipfile "$ROOT/tests/redis_units/$name.skip")
    fi
    log="$LOGS/${unit//\//_}.t$THREADS.log"
    (cd "$REDIS_SRC" && tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$PORT" \
        --single "$unit" --tags "$TAGS" "${skip[@]}" --timeout 600) >"$log" 2>&1
    plain="$(sed 's/\x1b\[[0-9;]*m//g' "$log")"
    ok=$(grep -c '^\[ok\]' <<<"$plain")
    bad=$(grep -cE '^\[(err|exception)\]' <<<"$plain")
    ign=$(grep -cE '^\[(ignore|skip)\]' <<<"$plain")
    printf '%-18s %6s %6s %7s\n' "$unit" "$ok" "$bad" "$ign"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rm -rf "$dir"
done
