#!/usr/bin/env python3
"""Short requests behind a long one: the latency table of docs/RELIABILITY.md.

For each server setting, starts `frt serve --engine fake` (the deterministic
toy engine, --fake-delay-us per step, so one step costs a known time), sends
one long completion (--long-tokens, ignore_eos) and, from its start on for
--window seconds, short completions (4 tokens) one after the other from one
client (the first ones wait behind the long one); records each
short request's wall time and status and prints p50 / p99 / max per setting.
The settings: no limits; --request-timeout-s 2 (the long request is cut at
2 s of wall time); --queue-timeout-s 1 (a request queued for 1 s gets 503
with Retry-After). Everything listens on 127.0.0.1; stdlib only.

Usage: python3 scripts/latency-behind-long.py [--frt build/frt] [--long-tokens 3000]
           [--delay-us 2000] [--window 15] [--out FILE.md]
Exit status 0 ok, 1 when a server did not start or the long request failed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SETTINGS = [
    ("no limits", ["--request-timeout-s", "0", "--queue-timeout-s", "0"]),
    ("`--request-timeout-s 2`", ["--request-timeout-s", "2", "--queue-timeout-s", "0"]),
    ("`--queue-timeout-s 1`", ["--request-timeout-s", "0", "--queue-timeout-s", "1"]),
]


def post(port, body, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            status, retry = r.status, None
    except urllib.error.HTTPError as e:
        status, retry = e.code, e.headers.get("Retry-After")
        e.read()
    return status, time.monotonic() - t0, retry


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_setting(frt, extra, long_tokens, delay_us, window):
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        cmd = [frt, "serve", "--engine", "fake", "--fake-delay-us", str(delay_us), "--port", "0",
               "--port-file", port_file, "--max-tokens", "0", "-q"] + extra
        srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            for _ in range(200):
                if os.path.exists(port_file) and open(port_file).read().strip():
                    break
                if srv.poll() is not None:
                    raise RuntimeError(f"server exited: {srv.stderr.read().decode()[-300:]}")
                time.sleep(0.05)
            port = int(open(port_file).read())
            result = {}

            def long_req():
                result["long"] = post(port, {"prompt": "long", "max_tokens": long_tokens, "ignore_eos": True},
                                      timeout=600)

            t = threading.Thread(target=long_req)
            t.start()
            time.sleep(0.2)  # the long request is running
            shorts = []
            t_end = time.monotonic() + window
            while time.monotonic() < t_end:
                shorts.append(post(port, {"prompt": "short", "max_tokens": 4}))
            t.join()
            if result["long"][0] != 200:
                raise RuntimeError(f"the long request got {result['long'][0]}")
            return shorts, result["long"]
        finally:
            srv.terminate()
            srv.wait(timeout=10)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frt", default="build/frt")
    ap.add_argument("--long-tokens", type=int, default=3000)
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--window", type=float, default=15.0, help="seconds of short requests")
    ap.add_argument("--out", help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    lines = ["| setting | short requests | p50 | p99 | max | statuses | long request |", "|---|---|---|---|---|---|---|"]
    for name, extra in SETTINGS:
        shorts, lng = run_setting(args.frt, extra, args.long_tokens, args.delay_us, args.window)
        lat = [s[1] for s in shorts]
        codes = {}
        for s in shorts:
            key = f"{s[0]}" + (" + Retry-After" if s[2] else "")
            codes[key] = codes.get(key, 0) + 1
        statuses = ", ".join(f"{n} x {k}" for k, n in sorted(codes.items()))
        lines.append(f"| {name} | {len(shorts)} | {quantile(lat, 0.5):.3f} s | {quantile(lat, 0.99):.3f} s | "
                     f"{max(lat):.3f} s | {statuses} | {lng[1]:.2f} s |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"latency-behind-long: {e}", file=sys.stderr)
        sys.exit(1)
