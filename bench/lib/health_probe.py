#!/usr/bin/env python3
"""GET /api/v1/health every 10 ms on one keep-alive connection until SIGTERM or SIGINT; then prints
how many answers, their p50 / p99 / max latency in ms, and how many were not 200. The loop's stalls while
something else runs (bench/pass_scale.sh).

    health_probe.py PORT
"""
import http.client
import signal
import sys
import time

port = int(sys.argv[1])
stop = False


def halt(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, halt)
signal.signal(signal.SIGINT, halt)
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
lat, bad = [], 0
while not stop:
    t0 = time.monotonic()
    try:
        conn.request("GET", "/api/v1/health")
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            bad += 1
    except (OSError, http.client.HTTPException):
        bad += 1
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    lat.append((time.monotonic() - t0) * 1000)
    time.sleep(max(0.0, 0.010 - (time.monotonic() - t0)))
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * (len(lat) - 1)))] if lat else 0.0
print(f"health: {len(lat)} answers, p50 {q(0.5):.1f} ms, p99 {q(0.99):.1f} ms, max {q(1.0):.1f} ms, {bad} not 200")
