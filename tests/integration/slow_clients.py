#!/usr/bin/env python3
"""Slow and idle HTTP clients for slow_clients.sh, each from a source
address of its own on 127/8 (every 127.x.y.z is loopback on Linux), so
the per-client limit of weftd's API sees them apart from the probes.

  drip PORT SRC N SECONDS    N connections sending one header byte per
                             second (reopened when closed); prints how
                             many the server closed
  hold PORT SRC N READY SECONDS
                             N connections that send nothing; touches
                             READY once all are open, then holds them
  closes PORT SRC MAX        one connection sending a byte per second;
                             prints the seconds until the server closed
                             it, or "open" after MAX seconds
"""
import os
import select
import socket
import sys
import time


def connect(port, src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    return s


def closed(s):
    """True when the server closed or reset the connection."""
    try:
        r, _, _ = select.select([s], [], [], 0)
        if not r:
            return False
        return s.recv(4096) == b""
    except OSError:
        return True


def drip(port, src, n, seconds):
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096
    socks, pos, closes, fails = [], [], 0, 0
    end = time.time() + seconds
    while time.time() < end:
        while len(socks) < n and time.time() < end:
            try:
                socks.append(connect(port, src))
                pos.append(0)
            except OSError:
                fails += 1
                break
        keep_s, keep_p = [], []
        for s, p in zip(socks, pos):
            try:
                if closed(s):
                    raise OSError
                s.send(head[p % len(head):p % len(head) + 1])
                keep_s.append(s)
                keep_p.append(p + 1)
            except OSError:
                closes += 1
                s.close()
        socks, pos = keep_s, keep_p
        time.sleep(1)
    for s in socks:
        s.close()
    print("closed=%d connect_failures=%d" % (closes, fails))


def hold(port, src, n, ready, seconds):
    socks = [connect(port, src) for _ in range(n)]
    open(ready, "w").close()
    time.sleep(seconds)
    print("closed=%d" % sum(closed(s) for s in socks))


def closes(port, src, most):
    s = connect(port, src)
    t0 = time.time()
    while time.time() - t0 < most:
        try:
            if closed(s):
                break
            s.send(b"G")
        except OSError:
            break
        time.sleep(0.5)
    else:
        print("open")
        return
    print("%.1f" % (time.time() - t0))


if __name__ == "__main__":
    mode, port, src = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "drip":
        drip(port, src, int(sys.argv[4]), float(sys.argv[5]))
    elif mode == "hold":
        hold(port, src, int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
    elif mode == "closes":
        closes(port, src, float(sys.argv[4]))
    else:
        sys.exit("unknown mode " + mode)
