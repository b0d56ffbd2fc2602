#!/usr/bin/env python3
"""bench-robot-ws.py PORT [N] - the websocket round trip of frt's policy server on loopback
(docs/policy-server.md), for scripts/bench-robot.sh: N (default 50) LIBERO inferences after 3 warm-up ones, two
224 x 224 u8 cameras (no resize on the server), a state and a prompt, each timed by this client from the send to
the reply. Prints p50 / p99 of:
  tick       policy_timing.infer_ms: the rollout host's tick (policy + critic replays, staging, read-back)
  server     server_timing.infer_ms - tick: the server's own work (parse, transforms, encode)
  round trip the client's send -> reply time - tick: what the server and the loopback add to an inference
next to the target (server overhead over infer <= 1 ms per tick). Needs python3-websockets (asyncio API, >= 10)
and python3-msgpack, numpy."""
import asyncio
import sys
import time

import msgpack
import numpy as np
import websockets


def pack_array(o):
    if isinstance(o, np.ndarray):
        return {b"__ndarray__": True, b"data": o.tobytes(), b"dtype": o.dtype.str, b"shape": o.shape}
    return o


def unpack_array(o):
    if b"__ndarray__" in o:
        return np.ndarray(buffer=o[b"data"], dtype=np.dtype(o[b"dtype"]), shape=o[b"shape"])
    return o


def pct(x, q):
    return float(np.percentile(np.array(x), q))


async def main():
    port, n = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 50
    rng = np.random.default_rng(1)
    obs = {"observation/image": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
           "observation/wrist_image": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
           "observation/state": rng.uniform(-1, 1, 8).astype(np.float32), "prompt": "pick up the red cup"}
    msg = msgpack.packb(obs, default=pack_array)
    ws = await websockets.connect(f"ws://127.0.0.1:{port}/", compression=None, max_size=None)
    msgpack.unpackb(await ws.recv())  # the metadata
    await ws.send(msgpack.packb({"__ctrl__": "episode_start", "seed": 1}))
    await ws.recv()
    tick, server, rtt = [], [], []
    for i in range(n + 3):
        t0 = time.perf_counter()
        await ws.send(msg)
        r = msgpack.unpackb(await ws.recv(), object_hook=unpack_array)
        dt = (time.perf_counter() - t0) * 1e3
        if "actions" not in r:
            print(f"bench-robot-ws: no actions in reply {i}: {r.get('episode_stopped')}")
            return 1
        if i < 3:
            continue
        t = r["policy_timing"]["infer_ms"]
        tick.append(t)
        server.append(r["server_timing"]["infer_ms"] - t)
        rtt.append(dt - t)
    await ws.close()
    print(f"websocket round trip on loopback ({n} inferences, {len(msg)} bytes each, values {'values' in r}):")
    print(f"  tick (policy + critic)   p50 {pct(tick, 50):9.3f} ms  p99 {pct(tick, 99):9.3f} ms")
    print(f"  server overhead          p50 {pct(server, 50):9.3f} ms  p99 {pct(server, 99):9.3f} ms  "
          f"(parse + transforms + encode; target <= 1 ms)")
    print(f"  round trip - tick        p50 {pct(rtt, 50):9.3f} ms  p99 {pct(rtt, 99):9.3f} ms  "
          f"(server + loopback + client; target <= 1 ms)")
    return 0


sys.exit(asyncio.run(main()))
