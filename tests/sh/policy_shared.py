#!/usr/bin/python3
"""policy_shared.py LLM_ALONE POLICY_ALONE SHARED_LLM SHARED_POLICY - an LLM and
a policy served from one process and one execution context
(docs/policy-server.md "Beside an LLM"), against each served alone.

LLM_ALONE: `frt serve -m LLM`; POLICY_ALONE: `frt serve --policy P --robot
libero`; SHARED_LLM / SHARED_POLICY: the two ports of `frt serve -m LLM
--policy P --robot libero --policy-port 0`. Greedy completions (the OpenAI
endpoint) and policy inferences (POST /v1/policy/infer, docs/policy-server.md)
are fired at the shared process at the same time, from two threads; every
completion must equal the same request served alone (text, finish reason,
token count) and the i-th policy chunk the alone server's i-th chunk, byte for
byte (the rollout host's noise stream advances per chunk in both). Prints the
policy's round trip alone and while a completion decodes. Exits 1 on a
failure.
"""
import base64
import json
import statistics
import sys
import threading
import time
import urllib.request

import numpy as np

LLM_ALONE, POL_ALONE, LLM_SHARED, POL_SHARED = (int(x) for x in sys.argv[1:5])
N_POLICY = 6
PROMPTS = ["The robot picks up the", "Once upon a time", "def add(a, b):"]
failures = []


def check(what, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {detail}"))
    if not cond:
        failures.append(what)


def post(port, path, obj, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(obj).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def complete(port, prompt):
    r = post(port, "/v1/completions", {"prompt": prompt, "max_tokens": 48, "temperature": 0})
    c = r["choices"][0]
    return c["text"], c["finish_reason"], r["usage"]["completion_tokens"]


rng = np.random.default_rng(11)
IMG = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
WRIST = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
STATE = rng.uniform(-1, 1, 8).astype(np.float32)


def jarr(x):
    return {"dtype": x.dtype.str, "shape": list(x.shape), "data": base64.b64encode(x.tobytes()).decode()}


OBS = {"observation/image": jarr(IMG), "observation/wrist_image": jarr(WRIST), "observation/state": jarr(STATE),
       "prompt": "pick up the red cup"}


def infer(port):
    """One chunk: its bytes, the client's round trip, the server's time (transforms, the wait for the context, the
    tick) and the tick's (ms), and the request's window."""
    t0 = time.monotonic()
    r = post(port, "/v1/policy/infer", OBS)
    ms = 1e3 * (time.monotonic() - t0)
    a = r["actions"]
    return (base64.b64decode(a["data"]), ms, r["server_timing"]["infer_ms"], r["policy_timing"]["infer_ms"],
            (t0, time.monotonic()))


# ---- alone ------------------------------------------------------------------------------
want = {p: complete(LLM_ALONE, p) for p in PROMPTS}
check("alone: the LLM generates", all(w[2] > 0 for w in want.values()), want)
alone = [infer(POL_ALONE) for _ in range(N_POLICY)]
check("alone: successive chunks differ (the noise stream moves)", alone[0][0] != alone[1][0])
# the shared process's policy with no completion running (its latency baseline), then back to the episode's start
quiet = [infer(POL_SHARED) for _ in range(N_POLICY)]
for i in range(N_POLICY):
    check(f"shared process, no LLM traffic: policy chunk {i} byte-equal to the alone server's", quiet[i][0] == alone[i][0])
post(POL_SHARED, "/v1/policy/infer", {"__ctrl__": "episode_start"})

# ---- together, one process and one context ----------------------------------------------
llm_windows, llm_got, stop = [], [], threading.Event()


def llm_loop():
    while not stop.is_set() or not llm_got:
        for p in PROMPTS:
            t0 = time.monotonic()
            got = complete(LLM_SHARED, p)
            llm_windows.append((t0, time.monotonic()))
            llm_got.append((p, got))


th = threading.Thread(target=llm_loop)
th.start()
time.sleep(0.05)  # a completion in flight first
shared = []
try:
    shared = [infer(POL_SHARED) for _ in range(N_POLICY)]
finally:
    stop.set()
    th.join()

for i in range(N_POLICY):
    check(f"together: policy chunk {i} byte-equal to the alone server's", shared[i][0] == alone[i][0])
bad = [(p, g, want[p]) for p, g in llm_got if g != want[p]]
check(f"together: {len(llm_got)} completions equal to the alone server's (text, finish, tokens)", not bad, bad[:2])


def inside(w):
    return any(a <= w[0] and w[1] <= b for a, b in llm_windows)


def overlaps(w):
    return any(a < w[1] and w[0] < b for a, b in llm_windows)


busy = [s for s in shared if inside(s[4])]
check("together: the policy ran while completions were decoding", any(overlaps(s[4]) for s in shared))


def line(what, xs):
    m = lambda i: statistics.median([x[i] for x in xs]) if xs else float("nan")
    return f"{what} ({len(xs)}): round trip {m(1):.1f}, server {m(2):.1f}, tick {m(3):.1f}, server - tick {m(2) - m(3):.2f}"


print("policy medians, ms: " + "; ".join([line("alone", alone), line("shared process, no LLM traffic", quiet),
                                          line("inside a decoding completion", busy)]))
print(f"completions: {len(llm_got)}, median {statistics.median([1e3 * (b - a) for a, b in llm_windows]):.1f} ms each")
sys.exit(1 if failures else 0)
