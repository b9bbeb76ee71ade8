#!/usr/bin/env python3
"""Loads HASHES hashes of FIELDS fields and LISTS lists of ELEMS elements into a tiered Strata,
waits for the offloader, then reads every element back and checks it, sampling the server's
owned RSS (RssAnon + RssShmem, what maxmemory bounds) all along. Prints one `key=value` line
per figure (see tiering_collections.sh).

With BIG BIG_FIELDS (optional), also BIG hashes of BIG_FIELDS 100-byte fields (40,000 make a
4 MiB blob: offloaded as one extent), read back after the others while another connection
PINGs: the longest PING wait tells how long a big collection's load held the shard.

Usage: tiering_collections.py PORT PID HASHES FIELDS LISTS ELEMS [BIG BIG_FIELDS]"""
import multiprocessing
import socket
import sys
import threading
import time

PORT, PID = int(sys.argv[1]), int(sys.argv[2])
HASHES, FIELDS, LISTS, ELEMS = (int(a) for a in sys.argv[3:7])
BIG, BIG_FIELDS = (int(a) for a in (sys.argv[7:9] if len(sys.argv) > 8 else (0, 0)))
BATCH = 200


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb", buffering=1 << 20)

    def send(self, cmds):
        out = bytearray()
        for c in cmds:
            out += b"*%d\r\n" % len(c)
            for a in c:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def reply(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            return Exception(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def run(self, cmds):
        self.send(cmds)
        return [self.reply() for _ in cmds]


def rss():
    """The server's owned RSS (RssAnon + RssShmem: what maxmemory bounds, not the binary's
    file pages)."""
    total = 0
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssShmem:")):
                total += int(line.split()[1]) * 1024
    return total


peak = [0]
stop = [False]


def sampler():
    while not stop[0]:
        try:
            peak[0] = max(peak[0], rss())
        except OSError:
            return
        time.sleep(0.05)


def hval(i, j):
    return b"v%07d-%02d-%06x" % (i, j, (i * 131 + j) & 0xFFFFFF)


def lval(i, j):
    return b"e%07d-%02d-%06x" % (i, j, (i * 7 + j * 13) & 0xFFFFFF)


def bval(i, j):
    # Pseudo-random hex: the RDB codec's LZF would shrink repeated text.
    x = ((i + 1) * 1000003 + j) * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF
    out = b"b%d-%d-" % (i, j)
    while len(out) < 100:
        x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 7
        x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
        out += b"%016x" % x
    return out[:100]


def load_big(c):
    errors = 0
    for i in range(BIG):
        for start in range(0, BIG_FIELDS, 1000):
            cmd = ["HSET", b"big:%d" % i]
            for j in range(start, min(BIG_FIELDS, start + 1000)):
                cmd += [b"f%d" % j, bval(i, j)]
            errors += sum(isinstance(r, Exception) for r in c.run([cmd]))
    return errors


class Pinger:
    """PINGs on a connection of its own, from a process of its own (a thread would wait for
    the GIL while the main thread parses a big reply), until stopped; the longest wait, ms."""

    def __init__(self):
        self.worst = multiprocessing.Value("d", 0.0)
        self.done = multiprocessing.Value("b", 0)
        self.proc = multiprocessing.Process(target=self.run, daemon=True)
        self.proc.start()

    def run(self):
        p = Conn(PORT)
        while not self.done.value:
            t = time.time()
            p.run([["PING"]])
            self.worst.value = max(self.worst.value, time.time() - t)
            time.sleep(0.001)

    def stop(self):
        self.done.value = 1
        self.proc.join()
        return self.worst.value * 1000


def check_big(c):
    """HLEN of each big hash (a load from SSD and an O(1) command), then HGETALL of each,
    checked, each phase with a Pinger: (wrong, missing, HLEN ms, longest PING wait during the
    HLENs, HGETALL ms, longest PING wait during the HGETALLs)."""
    ping = Pinger()
    hlen_ms = []
    for i in range(BIG):
        t = time.time()
        c.run([["HLEN", b"big:%d" % i]])
        hlen_ms.append((time.time() - t) * 1000)
    hlen_ping = ping.stop()
    ping = Pinger()
    wrong = missing = 0
    all_ms = []
    for i in range(BIG):
        t = time.time()
        r = c.run([["HGETALL", b"big:%d" % i]])[0]
        all_ms.append((time.time() - t) * 1000)
        if not r:
            missing += 1
        elif dict(zip(r[::2], r[1::2])) != {b"f%d" % j: bval(i, j) for j in range(BIG_FIELDS)}:
            wrong += 1
    return wrong, missing, sorted(hlen_ms), hlen_ping, sorted(all_ms), ping.stop()


def info(c, field):
    text = c.run([["INFO", "tiered"]])[0].decode()
    for line in text.split("\r\n"):
        if line.startswith(field + ":"):
            return int(float(line.split(":")[1]))
    return 0


def main():
    threading.Thread(target=sampler, daemon=True).start()
    c = Conn(PORT)
    t0 = time.time()
    errors = 0
    for start in range(0, HASHES, BATCH):
        cmds = []
        for i in range(start, min(HASHES, start + BATCH)):
            cmd = ["HSET", b"h:%d" % i]
            for j in range(FIELDS):
                cmd += [b"f%d" % j, hval(i, j)]
            cmds.append(cmd)
        errors += sum(isinstance(r, Exception) for r in c.run(cmds))
    for start in range(0, LISTS, BATCH):
        cmds = []
        for i in range(start, min(LISTS, start + BATCH)):
            cmds.append(["RPUSH", b"l:%d" % i] + [lval(i, j) for j in range(ELEMS)])
        errors += sum(isinstance(r, Exception) for r in c.run(cmds))
    phases = [("load", peak[0])]
    errors += load_big(c)
    load_s = time.time() - t0
    if BIG:
        phases.append(("big_load", peak[0]))
    # The offloader settles.
    time.sleep(5)
    disk = info(c, "tiered_disk_keys")
    t1 = time.time()
    wrong = missing = 0
    for start in range(0, HASHES, BATCH):
        ids = range(start, min(HASHES, start + BATCH))
        for i, r in zip(ids, c.run([["HGETALL", b"h:%d" % i] for i in ids])):
            if not r:
                missing += 1
                continue
            got = dict(zip(r[::2], r[1::2]))
            if got != {b"f%d" % j: hval(i, j) for j in range(FIELDS)}:
                wrong += 1
    for start in range(0, LISTS, BATCH):
        ids = range(start, min(LISTS, start + BATCH))
        for i, r in zip(ids, c.run([["LRANGE", b"l:%d" % i, 0, -1] for i in ids])):
            if not r:
                missing += 1
            elif r != [lval(i, j) for j in range(ELEMS)]:
                wrong += 1
    verify_s = time.time() - t1
    phases.append(("settle_and_read_back", peak[0]))
    if BIG:
        loads = info(c, "tiered_collection_loads")
        bw, bm, hlen_ms, hlen_ping, all_ms, all_ping = check_big(c)
        phases.append(("big_read_back", peak[0]))
        # The big hashes read from SSD (each counts a load).
        big_loaded = info(c, "tiered_collection_loads") - loads
        wrong += bw
        missing += bm
        print("big_hashes=%d big_fields=%d" % (BIG, BIG_FIELDS))
        print("big_loads_from_ssd=%d" % big_loaded)
        print("big_wrong=%d big_missing=%d" % (bw, bm))
        print("big_hlen_ms_median=%.1f big_hlen_ms_max=%.1f ping_max_ms_during_hlens=%.1f"
              % (hlen_ms[len(hlen_ms) // 2], hlen_ms[-1], hlen_ping))
        print("big_hgetall_ms_median=%.1f big_hgetall_ms_max=%.1f ping_max_ms_during_hgetalls=%.1f"
              % (all_ms[len(all_ms) // 2], all_ms[-1], all_ping))
    stop[0] = True
    time.sleep(0.1)
    print("load_errors=%d" % errors)
    print("load_seconds=%.1f" % load_s)
    print("verify_seconds=%.1f" % verify_s)
    print("disk_keys_after_load=%d" % disk)
    print("wrong=%d" % wrong)
    print("missing=%d" % missing)
    print("collection_offloads=%d" % info(c, "tiered_collection_offloads"))
    print("collection_loads=%d" % info(c, "tiered_collection_loads"))
    print("unreadable_dropped=%d" % info(c, "tiered_unreadable_keys_dropped"))
    print("tiered_bytes=%d" % info(c, "tiered_bytes"))
    print("peak_rss=%d" % peak[0])
    # The running peak at the end of each phase: where it was reached.
    print("peak_rss_by_phase=%s" % " ".join("%s:%d" % p for p in phases))
    print("rss_end=%d" % rss())


main()
