#!/usr/bin/env python3
"""Loads HASHES hashes of FIELDS fields and LISTS lists of ELEMS elements into a tiered Strata,
waits for the offloader, then reads every element back and checks it, sampling the server's
owned RSS (RssAnon + RssShmem, what maxmemory bounds) all along. Prints one `key=value` line
per figure (see tiering_collections.sh).

Usage: tiering_collections.py PORT PID HASHES FIELDS LISTS ELEMS"""
import socket
import sys
import threading
import time

PORT, PID = int(sys.argv[1]), int(sys.argv[2])
HASHES, FIELDS, LISTS, ELEMS = (int(a) for a in sys.argv[3:7])
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
    load_s = time.time() - t0
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
    print("rss_end=%d" % rss())


main()
