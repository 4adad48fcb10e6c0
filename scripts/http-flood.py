#!/usr/bin/env python3
"""Floods a running `leasehold run` with HTTP connections and prints its RSS and open files
before, during and after, with the leader's token and the answer times of /healthz and /readyz
during the flood. Half the connections ask for /leader's event stream and never read; the
other half send half a request head and never finish it. The figures of docs/BENCHMARKS.md
("The HTTP port under a flood") come from it; raise `ulimit -n` first (each connection is a file
of this process too).

    python3 scripts/http-flood.py --addr 127.0.0.1:PORT --pid PID [--connections 10000]
"""

import argparse
import socket
import time


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def sample(pid):
    s = status(pid)
    rss_kib = int(s["VmRSS"].split()[0])
    files = len(__import__("os").listdir(f"/proc/{pid}/fd"))
    return rss_kib / 1024, files


def get(addr, path, timeout=2.0):
    """Status code and seconds taken, or (None, seconds) without an answer in time."""
    start = time.monotonic()
    try:
        with socket.create_connection(addr, timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        code = int(data.split(b" ", 2)[1])
        return code, data.split(b"\r\n\r\n", 1)[-1], time.monotonic() - start
    except (OSError, ValueError, IndexError):
        return None, b"", time.monotonic() - start


def token(addr):
    import json

    code, body, _ = get(addr, "/leader")
    if code != 200:
        return None
    view = json.loads(body)
    return view.get("is_leader"), view.get("token")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", required=True)
    p.add_argument("--pid", required=True, type=int)
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--hold", type=float, default=10.0, help="seconds to hold the flood")
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    addr = (host, int(port))

    rss, files = sample(a.pid)
    print(f"before: RSS {rss:.1f} MiB, open files {files}, leader {token(addr)}")
    held, failed = [], 0
    start = time.monotonic()
    for i in range(a.connections):
        try:
            s = socket.create_connection(addr, timeout=2)
            if i % 2 == 0:
                s.sendall(b"GET /leader HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            else:
                s.sendall(b"GET /leader HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        except OSError:
            failed += 1
    opened = time.monotonic() - start
    print(f"opened {len(held)} connections in {opened:.1f} s ({failed} failed to connect)")
    peak_rss, peak_files, probes = 0.0, 0, []
    until = time.monotonic() + a.hold
    while time.monotonic() < until:
        rss, files = sample(a.pid)
        peak_rss, peak_files = max(peak_rss, rss), max(peak_files, files)
        for path in ("/healthz", "/readyz"):
            code, _, took = get(addr, path)
            probes.append((code, took))
        time.sleep(0.2)
    answered = sorted(t for c, t in probes if c == 200)
    print(
        f"during ({a.hold:.0f} s): peak RSS {peak_rss:.1f} MiB, peak open files {peak_files}, "
        f"probes answered 200: {len(answered)}/{len(probes)}, "
        f"p50 {answered[len(answered) // 2] * 1000:.1f} ms, max {answered[-1] * 1000:.1f} ms"
        if answered
        else f"during: peak RSS {peak_rss:.1f} MiB, peak open files {peak_files}, no probe answered"
    )
    print(f"leader during the flood: {token(addr)}")
    for s in held:
        s.close()
    time.sleep(3)
    rss, files = sample(a.pid)
    print(f"after (3 s): RSS {rss:.1f} MiB, open files {files}, leader {token(addr)}")


if __name__ == "__main__":
    main()
