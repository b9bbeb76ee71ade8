#!/usr/bin/env python3
"""MULTI/EXEC load for benches/multi_compare.sh: CONNS connections, each keeping PIPELINE
transactions (MULTI, SET a v, SET b v, EXEC; random keys out of KEYSPACE) in flight, for
SECONDS seconds. Prints the transactions completed per second. Every reply is checked to be
exactly what the transaction must answer.

usage: multi_load.py PORT [SECONDS] [CONNS] [PIPELINE] [KEYSPACE] [VALUE_SIZE]"""
import random
import selectors
import socket
import sys
import time


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def tx(a, b, value):
    return (b"*1\r\n$5\r\nMULTI\r\n"
            + b"*3\r\n$3\r\nSET\r\n" + bulk(a) + bulk(value)
            + b"*3\r\n$3\r\nSET\r\n" + bulk(b) + bulk(value)
            + b"*1\r\n$4\r\nEXEC\r\n")


REPLY = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n"


def main():
    port = int(sys.argv[1])
    seconds, conns, pipeline, keyspace, size = (
        [float(a) for a in sys.argv[2:3]] or [5.0])[0], *(
        int(a) for a in (sys.argv[3:7] + ["8", "16", "100000", "64"][len(sys.argv[3:7]):]))
    value = b"x" * size
    rnd = random.Random(1)
    # A pool of requests built ahead, so the loader spends its time on the wire.
    pool = [tx(b"key:%d" % rnd.randrange(keyspace), b"key:%d" % rnd.randrange(keyspace), value)
            for _ in range(4096)]
    sel = selectors.DefaultSelector()
    socks = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        state = {"sock": s, "buf": b"", "pending": 0, "next": i * 97}
        sel.register(s, selectors.EVENT_READ, state)
        socks.append(state)
    done = 0
    want = len(REPLY)

    def refill(st):
        n = pipeline - st["pending"]
        if n <= 0:
            return
        i = st["next"]
        req = b"".join(pool[(i + k) % len(pool)] for k in range(n))
        st["next"] = i + n
        st["sock"].setblocking(True)
        st["sock"].sendall(req)
        st["sock"].setblocking(False)
        st["pending"] += n

    for st in socks:
        refill(st)
    start = time.time()
    end = start + seconds
    while time.time() < end:
        for key, _ in sel.select(timeout=1):
            st = key.data
            data = st["sock"].recv(1 << 20)
            if not data:
                sys.exit("server closed the connection")
            st["buf"] += data
            n = len(st["buf"]) // want
            if n:
                chunk, st["buf"] = st["buf"][:n * want], st["buf"][n * want:]
                if chunk != REPLY * n:
                    sys.exit("unexpected reply: %r" % chunk[:200])
                st["pending"] -= n
                done += n
                refill(st)
    elapsed = time.time() - start
    print("%d %.3f %.0f" % (done, elapsed, done / elapsed))


if __name__ == "__main__":
    main()
