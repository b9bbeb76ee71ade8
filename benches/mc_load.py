#!/usr/bin/env python3
"""A fixed number of memcached requests, for instruction counts (benches/mc_instructions.sh).

mc_load.py PORT PROTO OP PIPELINE REQUESTS [KEYS] [VALUE_SIZE]
  PROTO text|binary|meta, OP get|set|fill (meta: `mg <key> v f t` and `ms <key> <len> T0`). Sends REQUESTS requests in batches of PIPELINE (each
  batch written at once, then all its replies read) over one connection, keys key:<i % KEYS>
  (zero-padded to 8 digits), values VALUE_SIZE bytes of 'x'. `fill` sets every key once
  (text). Exits 1 when a reply is not the expected one (a GET miss included).
"""

import socket
import struct
import sys


def main():
    port, proto, op, pipe, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    keys = int(sys.argv[6]) if len(sys.argv) > 6 else 1000
    vsize = int(sys.argv[7]) if len(sys.argv) > 7 else 256
    if op == "fill":
        op, n, pipe, proto = "set", keys, 100, "text"
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    value = b"x" * vsize
    buf = bytearray()

    def need(k):
        nonlocal buf
        while len(buf) < k:
            chunk = s.recv(1 << 20)
            if not chunk:
                sys.exit("connection closed")
            buf += chunk

    def take_line():
        nonlocal buf
        while True:
            i = buf.find(b"\r\n")
            if i >= 0:
                line = bytes(buf[:i])
                del buf[: i + 2]
                return line
            chunk = s.recv(1 << 20)
            if not chunk:
                sys.exit("connection closed")
            buf += chunk

    def key(i):
        return b"key:%08d" % (i % keys)

    def request(i):
        k = key(i)
        if proto == "meta":
            if op == "get":
                return b"mg " + k + b" v f t\r\n"
            return b"ms " + k + b" %d T0\r\n" % vsize + value + b"\r\n"
        if proto == "text":
            if op == "get":
                return b"get " + k + b"\r\n"
            return b"set " + k + b" 0 0 %d\r\n" % vsize + value + b"\r\n"
        if op == "get":
            return struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(k), 0, 0, 0, len(k), i, 0) + k
        extras = struct.pack(">II", 0, 0)
        body = len(extras) + len(k) + vsize
        return struct.pack(">BBHBBHIIQ", 0x80, 0x01, len(k), 8, 0, 0, body, i, 0) + extras + k + value

    def reply():
        nonlocal buf
        if proto == "meta":
            line = take_line()
            if op == "get":
                if not line.startswith(b"VA %d " % vsize):
                    sys.exit("unexpected reply %r" % line)
                need(vsize + 2)
                del buf[: vsize + 2]
            elif line != b"HD":
                sys.exit("unexpected reply %r" % line)
            return
        if proto == "text":
            line = take_line()
            if op == "get":
                if not line.startswith(b"VALUE "):
                    sys.exit("unexpected reply %r" % line)
                need(vsize + 2)
                del buf[: vsize + 2]
                line = take_line()
                if line != b"END":
                    sys.exit("unexpected reply %r" % line)
            elif line != b"STORED":
                sys.exit("unexpected reply %r" % line)
            return
        need(24)
        magic, opcode, klen, elen, _, status, body = struct.unpack(">BBHBBHI", bytes(buf[:12]))
        need(24 + body)
        del buf[: 24 + body]
        if magic != 0x81 or status != 0:
            sys.exit("unexpected binary reply status %d" % status)

    i = 0
    while i < n:
        batch = min(pipe, n - i)
        s.sendall(b"".join(request(i + j) for j in range(batch)))
        for _ in range(batch):
            reply()
        i += batch


if __name__ == "__main__":
    main()
