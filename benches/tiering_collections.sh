#!/usr/bin/env bash
# Collections on SSD at scale (the data-types issue's tiering check): HASHES hashes of FIELDS
# fields plus LISTS lists of ELEMS elements, several times --maxmemory, loaded into a tiered
# Strata (one shard), then every element read back and compared. Reported: the data's size
# against maxmemory, keys on disk once loaded, wrong or missing collections, unreadable keys
# dropped, and the peak RSS over the load and the read-back against maxmemory (goal: within
# 1.05). The loader and checker is tiering_collections.py (a plain RESP client).
#
# Environment (all optional):
#   MAXMEM        --maxmemory of the server                    (default 80mb)
#   HASHES FIELDS hashes and fields per hash                   (default 200000 / 20)
#   LISTS ELEMS   lists and elements per list                  (default 200000 / 50)
#   BIG BIG_FIELDS  big hashes of 100-byte fields, read back last while another connection
#                 PINGs (40000 fields: a 4 MiB blob, one extent)  (default 0 / 40000)
#   STRATA_BIN    strata binary  (default <repo>/target/release/strata)
#   SKIP_BUILD=1  do not run cargo build
#   PORT          first port tried                             (default 17390)
#   TMPDIR        where the tier file goes                     (default /tmp)
#   TIERED_FLAGS  extra flags for the server
#
# Exit status: 0 when every element read back exactly and RSS stayed within 1.05 x maxmemory,
# 1 otherwise.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"
ROOT="$(dirname "$SCRIPT_DIR")"

MAXMEM="${MAXMEM:-80mb}"
HASHES="${HASHES:-200000}"
FIELDS="${FIELDS:-20}"
LISTS="${LISTS:-200000}"
ELEMS="${ELEMS:-50}"
BIG="${BIG:-0}"
BIG_FIELDS="${BIG_FIELDS:-40000}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
PORT="$(find_free_port "${PORT:-17390}")"
read -r -a EXTRA <<<"${TIERED_FLAGS:-}"

build_strata
WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-tiercoll.XXXXXX")"
SERVER_PID=""
cleanup() {
    [[ -n "$SERVER_PID" ]] && stop_pid "$SERVER_PID"
    rm -rf "$WORKDIR"
}
trap cleanup EXIT

max_bytes() {
    local v="${1,,}"
    case "$v" in
        *gb) echo $(( ${v%gb} << 30 )) ;;
        *mb) echo $(( ${v%mb} << 20 )) ;;
        *kb) echo $(( ${v%kb} << 10 )) ;;
        *) echo "$v" ;;
    esac
}
MAX="$(max_bytes "$MAXMEM")"

"$STRATA_BIN" --proactor_threads 1 --port "$PORT" --dbfilename "" --maxmemory "$MAXMEM" \
    --tiered_prefix "$WORKDIR/strata" "${EXTRA[@]}" >"$WORKDIR/strata.log" 2>&1 &
SERVER_PID=$!
wait_for_ping "$PORT" "$SERVER_PID" 20 || { tail -n 20 "$WORKDIR/strata.log" >&2; exit 1; }

log "Loading $HASHES hashes x $FIELDS fields + $LISTS lists x $ELEMS elements, maxmemory $MAXMEM..."
OUT="$(python3 "$SCRIPT_DIR/tiering_collections.py" "$PORT" "$SERVER_PID" \
    "$HASHES" "$FIELDS" "$LISTS" "$ELEMS" "$BIG" "$BIG_FIELDS")"
printf '%s\n' "$OUT"
get() { sed -n "s/^$1=//p" <<<"$OUT"; }
PEAK="$(get peak_rss)"
DATA="$(get tiered_bytes)"
awk -v p="$PEAK" -v m="$MAX" -v d="$DATA" 'BEGIN {
    printf "peak RSS / maxmemory: %.3f (goal <= 1.05); tier bytes at the end / maxmemory: %.2f\n", p / m, d / m }'
ok=1
[[ "$(get wrong)" == 0 && "$(get missing)" == 0 && "$(get load_errors)" == 0 ]] || ok=0
awk -v p="$PEAK" -v m="$MAX" 'BEGIN { exit !(p <= 1.05 * m) }' || ok=0
[[ $ok == 1 ]] && log "PASS" || { log "FAIL"; exit 1; }
