#!/usr/bin/env bash
# RSS after loading 100k hashes of 20 short fields into Strata and into redis-server, each
# pinned to its own core (taskset), loaded the same way (redis-cli --pipe); prints both and
# the ratio (issue 21's goal: Strata <= 0.8x Redis).
#
# Usage: benches/hash_memory.sh [path/to/strata] [hashes] [fields]
set -euo pipefail
STRATA=${1:-target/release/strata}
HASHES=${2:-100000}
FIELDS=${3:-20}
SP=7811 RP=7812
work=$(mktemp -d)
trap 'redis-cli -p $SP shutdown nosave >/dev/null 2>&1 || true; redis-cli -p $RP shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

python3 - "$HASHES" "$FIELDS" > "$work/load.resp" <<'PY'
import sys
hashes, fields = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
for h in range(hashes):
    args = [b"HSET", b"user:%d" % h]
    for f in range(fields):
        args += [b"field%d" % f, b"v%d" % (h * fields + f)]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY

(cd "$work" && taskset -c 0 "$STRATA" --port $SP --proactor_threads 1 --dir "$work" >"$work/strata.log" 2>&1 &)
(cd "$work" && taskset -c 1 redis-server --port $RP --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &)
for p in $SP $RP; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
done
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
spid=$(pgrep -f -- "--port $SP" | head -1)
rpid=$(pgrep -f -- "redis-server .*:$RP|--port $RP" | head -1)
s0=$(rss "$spid") r0=$(rss "$rpid")
redis-cli -p $SP --pipe < "$work/load.resp" >/dev/null
redis-cli -p $RP --pipe < "$work/load.resp" >/dev/null
sleep 1
s1=$(rss "$spid") r1=$(rss "$rpid")
echo "strata: encoding $(redis-cli -p $SP object encoding user:1), keys $(redis-cli -p $SP dbsize), RSS ${s1} kB (start ${s0} kB)"
echo "redis:  encoding $(redis-cli -p $RP object encoding user:1), keys $(redis-cli -p $RP dbsize), RSS ${r1} kB (start ${r0} kB)"
awk -v s="$s1" -v r="$r1" -v s0="$s0" -v r0="$r0" 'BEGIN {
  printf "RSS ratio strata/redis: %.2f (growth only: %.2f)\n", s / r, (s - s0) / (r - r0) }'
