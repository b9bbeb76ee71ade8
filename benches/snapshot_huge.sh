#!/usr/bin/env bash
# SAVE of one huge collection: the memory a save adds and how long a client waits meanwhile.
#
# Usage: benches/snapshot_huge.sh OLD_BIN NEW_BIN   (two strata binaries, release builds)
#
# For each binary and each type (hash, list, set, zset) a fresh one-core server gets one
# collection of N elements (short members; a hash's values are short too), then SAVE runs on
# one connection while this script samples the server's RSS every 5 ms and a second
# connection sends PING after PING. Printed per type and binary: the RSS the save added
# (peak during the save minus RSS just before it), the longest PING wait, the save's
# duration, and INFO's rdb_last_save_peak_buffered_bytes where the binary has it.
#
# Environment: N (1000000), PORT (32100), COMPRESSION (none), SERVER_CPU (pin the server).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_BIN NEW_BIN" >&2; exit 2; }
OLD="$1" NEW="$2"
N="${N:-1000000}"
PORT="${PORT:-32100}"
COMPRESSION="${COMPRESSION:-none}"
WORK="$(mktemp -d)"
PID=""
cleanup() {
    [[ -n "$PID" ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

run_one() { # bin label type
    local bin="$1" label="$2" ty="$3"
    rm -rf "$WORK/d" && mkdir -p "$WORK/d"
    local pin=()
    [[ -n "${SERVER_CPU:-}" ]] && pin=(taskset -c "$SERVER_CPU")
    "${pin[@]}" "$bin" --port "$PORT" --proactor_threads 1 --dir "$WORK/d" --dbfilename huge \
        --snapshot_compression "$COMPRESSION" --log_level warn >"$WORK/log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    python3 - "$PORT" "$PID" "$ty" "$N" "$label" <<'EOF'
import socket, sys, threading, time
port, pid, ty, n, label = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]

def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

def read_reply(f):
    line = f.readline()
    t = line[:1]
    if t == b"$":
        n = int(line[1:])
        return None if n < 0 else f.read(n + 2)[:-2]
    if t == b"*":
        return [read_reply(f) for _ in range(int(line[1:]))]
    return line[1:].strip()

def rss_kb():
    with open(f"/proc/{pid}/status") as st:
        for l in st:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    return 0

s = conn(); f = s.makefile("rb")
verb = {"hash": "HSET", "list": "RPUSH", "set": "SADD", "zset": "ZADD"}[ty]
batch, sent = 1000, 0
for start in range(0, n, batch):
    args = [verb, "huge"]
    for i in range(start, min(n, start + batch)):
        m = f"member:{i:07d}"
        if ty == "hash":
            args += [m, f"v{i}"]
        elif ty == "zset":
            args += [i % 10007, m]
        else:
            args.append(m)
    s.sendall(cmd(*args)); sent += 1
    if sent >= 32:
        for _ in range(sent): read_reply(f)
        sent = 0
for _ in range(sent): read_reply(f)
time.sleep(0.5)
base = rss_kb()
done = threading.Event(); took = [0.0]
def saver():
    c = conn(); cf = c.makefile("rb")
    t = time.perf_counter(); c.sendall(cmd("SAVE")); r = read_reply(cf)
    took[0] = time.perf_counter() - t
    if r != b"OK": print("SAVE answered", r, file=sys.stderr)
    done.set()
p = conn(); pf = p.makefile("rb")
peak, worst = base, 0.0
th = threading.Thread(target=saver); th.start()
last_rss = 0.0
while not done.is_set():
    t = time.perf_counter(); p.sendall(cmd("PING")); read_reply(pf)
    worst = max(worst, time.perf_counter() - t)
    if time.perf_counter() - last_rss > 0.005:
        peak = max(peak, rss_kb()); last_rss = time.perf_counter()
th.join()
peak = max(peak, rss_kb())
p.sendall(cmd("INFO", "persistence")); info = read_reply(pf).decode()
buffered = next((l.split(":")[1].strip() for l in info.splitlines()
                 if l.startswith("rdb_last_save_peak_buffered_bytes:")), "-")
print(f"{ty:5} {label:4} base_rss_mb {base/1024:7.1f}  extra_rss_mb {(peak-base)/1024:6.1f}  "
      f"ping_max_ms {worst*1000:7.1f}  save_s {took[0]:5.2f}  peak_buffered {buffered}")
EOF
    kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; PID=""
}

echo "N=$N elements per collection, 1 core, compression $COMPRESSION"
for ty in hash list set zset; do
    run_one "$OLD" old "$ty"
    run_one "$NEW" new "$ty"
done
