#!/usr/bin/python3
"""policy_server.py FRT T LIBERO_PORT DROID_PORT LIBERO_AUTO_PORT CRITIC_PORT VSTOP_PORT CFG_PORT - a client of frt's policy
server written against docs/policy-server.md (not against openpi's code),
with Debian's python3-websockets 10.4 (asyncio API) and python3-msgpack.

LIBERO_PORT: `frt serve --policy T/pi05 --robot libero --discrete-state on
--api-key sekrit --max-body-mb 1 --conn-timeout-s 5`; DROID_PORT: `frt serve
--policy T/pi0 --delta-actions on --max-conns 1` (the robot from
T/pi0/assets/droid); LIBERO_AUTO_PORT: `frt serve --policy T/pi05 --robot
libero` (pi05_libero's Pi0 prompt: the state not in the prompt); CRITIC_PORT:
the LIBERO pi05 server with `--critic T/critic.safetensors --max-chunks 3
--record T/rec`; VSTOP_PORT: the same critic with `--value-threshold 1e30
--record T/rec_v`; CFG_PORT: `--cfg-beta 1.5 --advantage negative`. Prints ok
/ FAIL lines; exits 1 on any failure.
"""
import asyncio
import base64
import http.client as httpc
import json
import subprocess
import sys
import urllib.error
import urllib.request

import msgpack
import numpy as np
import websockets
from PIL import Image

FRT, T = sys.argv[1], sys.argv[2]
LPORT, DPORT, APORT, CPORT, VPORT, GPORT = (int(x) for x in sys.argv[3:9])
KEY = {"Authorization": "Api-Key sekrit"}
failures = []


def check(what, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {detail}"))
    if not cond:
        failures.append(what)


# ---- the document's msgpack_numpy encoding -------------------------------------------
def pack_array(o):
    if isinstance(o, np.ndarray):
        return {b"__ndarray__": True, b"data": o.tobytes(), b"dtype": o.dtype.str, b"shape": o.shape}
    if isinstance(o, np.generic):
        return {b"__npgeneric__": True, b"data": o.item(), b"dtype": o.dtype.str}
    return o


def unpack_array(o):
    if b"__ndarray__" in o:
        return np.ndarray(buffer=o[b"data"], dtype=np.dtype(o[b"dtype"]), shape=o[b"shape"])
    return o


def packb(o):
    return msgpack.packb(o, default=pack_array)


def unpackb(b):
    return msgpack.unpackb(b, object_hook=unpack_array)


# ---- observations -------------------------------------------------------------------
rng = np.random.default_rng(5)
IMG0 = rng.integers(0, 256, (180, 240, 3), dtype=np.uint8)   # resized with padding by the server
IMG1 = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
STATE = rng.uniform(-1, 1, 8).astype(np.float32)
PROMPT = "pick up the red cup"
Image.fromarray(IMG0).save(f"{T}/img0.png")
Image.fromarray(IMG1).save(f"{T}/img1.png")


def libero_obs():
    # the wrist camera as CHW: the server transposes an image whose first dimension is 3
    return {"observation/image": IMG0, "observation/wrist_image": np.ascontiguousarray(IMG1.transpose(2, 0, 1)),
            "observation/state": STATE, "prompt": PROMPT}


def droid_obs():
    return {"observation/exterior_image_1_left": IMG0, "observation/wrist_image_left": IMG1,
            "observation/joint_position": STATE[:7].astype(np.float64),
            "observation/gripper_position": np.float32(STATE[7]), "prompt": PROMPT}


def policy_run(model, state, seed, extra=()):
    out = subprocess.run([FRT, "policy", "run", "-m", model, "--backend", "cpu", *extra, "--image",
                          f"base_0_rgb={T}/img0.png", "--image", f"left_wrist_0_rgb={T}/img1.png", "-p", PROMPT,
                          "--state", ",".join("%.9g" % x for x in state), "--noise-seed", str(seed), "--json"],
                         capture_output=True, text=True, check=True)
    return np.array(json.loads(out.stdout)["actions"], np.float32)


# ---- websocket helpers ------------------------------------------------------------------
def uri(port):
    return f"ws://127.0.0.1:{port}/"


async def connect(port, headers=KEY, **kw):
    ws = await websockets.connect(uri(port), extra_headers=headers, compression=None, max_size=None, **kw)
    meta = unpackb(await ws.recv())
    return ws, meta


async def ask(ws, msg):
    await ws.send(packb(msg) if not isinstance(msg, bytes) else msg)
    r = await ws.recv()
    return r if isinstance(r, str) else unpackb(r)


async def expect_error(port, msg, needle, what, headers=KEY):
    """A bad request: a text frame naming the problem, then close 1011."""
    ws, _ = await connect(port, headers)
    await ws.send(msg)
    r = await ws.recv()
    check(what + ": a text frame", isinstance(r, str) and needle in r, repr(r)[:300])
    try:
        await asyncio.wait_for(ws.recv(), 10)
        check(what + ": then closed", False, "another frame came")
    except websockets.ConnectionClosed as e:
        check(what + ": then close 1011", e.code == 1011, f"code {e.code}")


async def refused_status(port, headers, status, what):
    try:
        ws = await websockets.connect(uri(port), extra_headers=headers, compression=None)
        await ws.close()
        check(what, False, "the upgrade was accepted")
    except websockets.InvalidStatusCode as e:
        check(what, e.status_code == status, f"status {e.status_code}")


# ---- the LIBERO server (pi05, API key) -------------------------------------------------------
async def libero():
    ws, meta = await connect(LPORT)
    check("metadata on connect", meta.get("server") == "frt" and meta.get("robot") == "libero"
          and meta.get("model_type") == "pi05" and meta.get("action_horizon") == 10 and meta.get("action_dim") == 7
          and meta.get("cameras") == ["base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb"]
          and meta.get("norm_stats") is True and meta.get("delta_actions") is False
          and meta.get("discrete_state") is True, meta)
    r = await ask(ws, {"__ctrl__": "episode_start", "seed": 9})
    check("ctrl episode_start", r == {"__ctrl__": "episode_start", "ok": True, "seed": 9}, r)
    r1 = await ask(ws, libero_obs())
    a1 = r1.get("actions") if isinstance(r1, dict) else None
    check("infer: actions [10, 7] <f4", isinstance(a1, np.ndarray) and a1.shape == (10, 7) and a1.dtype == "<f4",
          repr(r1)[:300])
    check("infer: server_timing.infer_ms >= policy_timing.infer_ms > 0, prev_total_ms (of the ctrl message)",
          isinstance(r1, dict) and set(r1["server_timing"]) == {"infer_ms", "prev_total_ms"}
          and r1["server_timing"]["infer_ms"] >= r1["policy_timing"]["infer_ms"] > 0, repr({k: v for k, v in r1.items() if k != "actions"}))
    want = policy_run(f"{T}/pi05", STATE, 9)
    check("infer == frt policy run on the same images, prompt, state and noise seed (bit for bit)",
          a1 is not None and want.shape == a1.shape and np.array_equal(want, a1),
          f"max |d| {np.abs(want - a1).max() if a1 is not None and want.shape == a1.shape else 'shape'}")
    r2 = await ask(ws, libero_obs())
    check("second infer: prev_total_ms >= the first's server infer_ms",
          r2["server_timing"].get("prev_total_ms", 0) >= r1["server_timing"]["infer_ms"], r2.get("server_timing"))
    check("second infer: the episode's next noise (a different chunk)", not np.array_equal(r2["actions"], a1))
    r = await ask(ws, {"__ctrl__": "episode_end"})
    check("ctrl episode_end: 2 steps, stopped by the client, no record", r == {"__ctrl__": "episode_end", "ok": True,
          "seed": 9, "steps": 2, "stop_reason": "client"}, r)
    await ws.close()

    obs = libero_obs()
    del obs["observation/state"]
    await expect_error(LPORT, packb(obs), "observation/state", "missing key")
    obs = libero_obs()
    obs["observation/image"] = IMG0.astype(np.int16)
    await expect_error(LPORT, packb(obs), "observation/image", "wrong dtype (int16 image)")
    obs = libero_obs()
    obs["observation/image"] = np.zeros((20, 20, 4), np.uint8)
    await expect_error(LPORT, packb(obs), "3 channels", "wrong shape (4 channels)")
    obs = libero_obs()
    obs["observation/image"] = {b"__ndarray__": True, b"data": b"\0" * 10, b"dtype": "|u1", b"shape": [4, 4, 3]}
    await expect_error(LPORT, packb(obs), "data bytes", "data size != shape")
    obs = libero_obs()
    obs["observation/image"] = np.zeros((1024, 1024, 3), np.uint8)   # 3 MiB > --max-body-mb 1
    await expect_error(LPORT, packb(obs), "larger than the limit", "oversized message")
    # a key LIBERO does not read is refused, naming it (openpi's transforms would drop it unread)
    obs = libero_obs()
    obs["noise"] = np.zeros((10, 32), np.float32)
    await expect_error(LPORT, packb(obs), "'noise': not an observation key of robot libero", "unknown key (noise)")
    obs = libero_obs()
    obs["observation/wrist_img"] = obs.pop("observation/wrist_image")
    await expect_error(LPORT, packb(obs), "'observation/wrist_img': not an observation key", "misspelt camera key")
    await expect_error(LPORT, b"\xc1\x00", "msgpack", "malformed msgpack")
    await expect_error(LPORT, packb({"__ctrl__": "reboot"}), "reboot", "unknown control message")
    await expect_error(LPORT, packb({"__ctrl__": "episode_start", "seed": -1}), "seed", "negative seed")
    await expect_error(LPORT, packb({"__ctrl__": "cfg", "beta": 0.5}), "beta", "cfg beta below 1")
    await expect_error(LPORT, packb({"__ctrl__": "cfg", "beta": 2.0, "advantage": "maybe"}), "advantage",
                       "cfg advantage neither positive nor negative")
    await expect_error(LPORT, packb({"__ctrl__": "cfg"}), "beta", "cfg without beta")

    # still serving: the same episode again gives the same chunk
    ws, _ = await connect(LPORT)
    await ask(ws, {"__ctrl__": "episode_start", "seed": 9})
    r = await ask(ws, libero_obs())
    check("after the errors: served, the same chunk for the same episode", np.array_equal(r["actions"], a1))
    await ws.close()

    await refused_status(LPORT, None, 401, "no API key: 401")
    await refused_status(LPORT, {"Authorization": "Api-Key wrong"}, 401, "a wrong API key: 401")
    await refused_status(LPORT, {**KEY, "Origin": "http://evil.example"}, 403, "a foreign Origin: 403")
    try:  # a query string on the upgrade: no parameter is read, so it is refused
        ws = await websockets.connect(uri(LPORT) + "?robot=droid", extra_headers=KEY, compression=None)
        await ws.close()
        check("an upgrade with a query parameter: 400", False, "the upgrade was accepted")
    except websockets.InvalidStatusCode as e:
        check("an upgrade with a query parameter: 400", e.status_code == 400, f"status {e.status_code}")
    ws, _ = await connect(LPORT, {"Authorization": "Bearer sekrit"})
    await ws.close()
    check("Bearer KEY accepted too", True)

    # an idle session is kept past --conn-timeout-s; a message started and not finished is not
    ws, _ = await connect(LPORT)
    await asyncio.sleep(6)
    r = await ask(ws, {"__ctrl__": "episode_end"})
    check("an idle session outlives --conn-timeout-s 5", r.get("ok") is True, r)
    await measure(ws)
    await ws.close()
    check("a message not finished within --conn-timeout-s 5: the connection is closed", await slow_sender())
    return a1


async def measure(ws, n=10):
    """What the server adds to an inference: its own (parse + transforms + encode) and the client's round trip,
    with one camera resized by the server (180 x 240) and with both already 224 x 224 (openpi's clients resize)."""
    await measure_one(ws, libero_obs(), n, "180x240 + 224x224")
    o = libero_obs()
    o["observation/image"] = IMG1
    await measure_one(ws, o, n, "224x224 + 224x224")


async def measure_one(ws, o, n, what):
    srv, rtt = [], []
    obs = packb(o)
    for _ in range(n):
        t0 = asyncio.get_running_loop().time()
        await ws.send(obs)
        r = unpackb(await ws.recv())
        rtt.append((asyncio.get_running_loop().time() - t0) * 1e3 - r["policy_timing"]["infer_ms"])
        srv.append(r["server_timing"]["infer_ms"] - r["policy_timing"]["infer_ms"])
    print(f"measured: {n} inferences (2 cameras {what} u8, {len(obs)} bytes): server overhead "
          f"(parse, transforms, encode) median {np.median(srv):.3f} ms, client round trip minus infer median "
          f"{np.median(rtt):.3f} ms")


async def slow_sender():
    """A raw websocket that starts a 1000-byte message, sends 10 bytes and stalls."""
    reader, writer = await asyncio.open_connection("127.0.0.1", LPORT)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                 b"Authorization: Api-Key sekrit\r\n\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 101 " not in head:
        return False
    await reader.read(65536)                                     # the metadata frame
    writer.write(bytes([0x82, 0xFE, 0x03, 0xE8, 1, 2, 3, 4]) + bytes(10))  # binary, masked, 1000 bytes: 10 sent
    await writer.drain()
    t0 = asyncio.get_running_loop().time()
    try:
        rest = await asyncio.wait_for(reader.read(65536), 12)   # closed by the deadline (5 s), not by us
        waited = asyncio.get_running_loop().time() - t0
        closed = (rest == b"" or rest[:1] == b"\x88") and 4.0 <= waited
    except (asyncio.TimeoutError, ConnectionError):
        closed = False
    writer.close()
    return closed


# ---- HTTP -------------------------------------------------------------------------------
def http(port, path, body=None, headers=None, method=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def jarr(x):
    return {"dtype": x.dtype.str, "shape": list(x.shape), "data": base64.b64encode(x.tobytes()).decode()}


def http_checks(a1):
    st, body = http(LPORT, "/healthz")
    check("GET /healthz: 200 OK without a key", st == 200 and body == b"OK\n", (st, body))
    JS = {**KEY, "Content-Type": "application/json"}
    st, body = http(LPORT, "/v1/policy/infer", json.dumps({"__ctrl__": "episode_start", "seed": 9}).encode(), JS)
    check("JSON ctrl episode_start", st == 200 and json.loads(body)["seed"] == 9, (st, body[:200]))
    obs = {k: (v if isinstance(v, str) else jarr(v)) for k, v in libero_obs().items()}
    st, body = http(LPORT, "/v1/policy/infer", json.dumps(obs).encode(), JS)
    ok = st == 200
    if ok:
        a = json.loads(body)["actions"]
        got = np.frombuffer(base64.b64decode(a["data"]), np.dtype(a["dtype"])).reshape(a["shape"])
    check("POST /v1/policy/infer: the websocket's chunk, bit for bit", ok and np.array_equal(got, a1), (st, body[:300]))
    st, body = http(LPORT, "/v1/policy/infer", json.dumps(obs).encode(), {"Content-Type": "application/json"})
    check("POST without the key: 401", st == 401, st)
    st, body = http(LPORT, "/v1/policy/infer", json.dumps(obs).encode(), {**KEY, "Content-Type": "text/plain"})
    check("POST not JSON: 415", st == 415, st)
    bad = dict(obs)
    del bad["prompt"]
    st, body = http(LPORT, "/v1/policy/infer", json.dumps(bad).encode(), JS)
    check("POST without a prompt: 400 naming it", st == 400 and b"prompt" in body, (st, body[:200]))
    bad = dict(obs, seed=9)
    st, body = http(LPORT, "/v1/policy/infer", json.dumps(bad).encode(), JS)
    check("POST with a key LIBERO does not read (seed): 400 naming it", st == 400
          and b"'seed': not an observation key of robot libero" in body, (st, body[:200]))
    st, body = http(LPORT, "/v1/policy/infer", b"{\"x\": ", JS)
    check("POST malformed JSON: 400", st == 400, st)
    st, body = http(LPORT, "/v1/policy/infer", b"{\"x\": \"" + b"a" * (2 << 20) + b"\"}", JS)
    check("POST over --max-body-mb: 413", st == 413, st)
    hc = httpc.HTTPConnection("127.0.0.1", LPORT, timeout=60)   # two transactions on one kept-alive connection
    hc.request("GET", "/healthz")
    r1 = hc.getresponse()
    b1 = r1.read()
    hc.request("POST", "/v1/policy/infer", body=json.dumps({"__ctrl__": "episode_end"}), headers=JS)
    r2 = hc.getresponse()
    b2 = json.loads(r2.read())
    hc.close()
    check("keep-alive: /healthz then a POST on one connection", r1.status == 200 and b1 == b"OK\n" and r2.status == 200
          and b2.get("ok") is True, (r1.status, r2.status))
    st, body = http(LPORT, "/nope", None, KEY)
    check("another path: 404", st == 404, st)
    st, body = http(LPORT, "/healthz?verbose=1")
    check("GET /healthz with a query parameter: 400 (none is read)", st == 400 and b"query" in body, (st, body[:200]))
    st, body = http(LPORT, "/v1/policy/infer?robot=droid", json.dumps(obs).encode(), JS)
    check("POST with a query parameter: 400 (none is read)", st == 400 and b"query" in body, (st, body[:200]))
    st, body = http(LPORT, "/healthz")
    check("/healthz still 200 after the refusals", st == 200, st)


# ---- the DROID server (pi0, robot from assets/droid, delta actions on) -----------------
async def droid():
    ws, meta = await connect(DPORT, None)
    check("droid metadata: robot from the asset folder, delta actions on",
          meta.get("robot") == "droid" and meta.get("action_dim") == 8 and meta.get("delta_actions") is True, meta)
    await refused_status(DPORT, None, 503, "a session past --max-conns 1: 503")
    await ask(ws, {"__ctrl__": "episode_start", "seed": 3})
    r = await ask(ws, droid_obs())
    await ws.close()
    a = r["actions"]
    u = policy_run(f"{T}/pi0", STATE, 3, ("--norm-stats", f"{T}/pi0/assets/droid/norm_stats.json"))  # [10, 8]
    mask = np.array([1, 1, 1, 1, 1, 1, 1, 0], bool)  # DROID's joint-position delta mask make_bool_mask(7, -1)
    want = (u.astype(np.float64) + np.where(mask, STATE.astype(np.float64), 0)).astype(np.float32)
    check("droid: joints + 0-d gripper, AbsoluteActions over frt policy run's chunk (bit for bit)",
          a.shape == (10, 8) and np.array_equal(a, want), f"max |d| {np.abs(a - want).max()}")


# ---- LIBERO with pi05_libero's setting: no discrete state (the Pi0 prompt) -------------
async def libero_auto():
    ws, meta = await connect(APORT, None)
    check("libero auto: discrete_state off (pi05_libero)", meta.get("discrete_state") is False, meta)
    await ask(ws, {"__ctrl__": "episode_start", "seed": 4})
    a = (await ask(ws, libero_obs()))["actions"]
    await ws.close()
    # the same by hand: the Pi0 prompt (policy prepare --variant pi0), the model's raw chunk (policy run --inputs),
    # openpi's quantile Unnormalize in numpy, the slice to LIBERO's 7
    subprocess.run([FRT, "policy", "prepare", "--image", f"base_0_rgb={T}/img0.png", "--image",
                    f"left_wrist_0_rgb={T}/img1.png", "-p", PROMPT, "--state", ",".join("%.9g" % x for x in STATE),
                    "--tokenizer", f"{T}/pi05/tokenizer.model", "--variant", "pi0", "--max-tokens", "200",
                    "--max-state-dim", "8", "-o", f"{T}/auto.st", "-q"], check=True)
    out = subprocess.run([FRT, "policy", "run", "-m", f"{T}/pi05", "--backend", "cpu", "--inputs", f"{T}/auto.st",
                          "--noise-seed", "4", "--json"], capture_output=True, text=True, check=True)
    raw = np.array(json.loads(out.stdout)["actions"], np.float64)
    st = json.load(open(f"{T}/norm_stats.json"))["norm_stats"]["actions"]
    q01, q99 = np.array(st["q01"]), np.array(st["q99"])
    want = ((raw[:, :7] + 1.0) / 2.0 * (q99 - q01 + 1e-6) + q01).astype(np.float32)
    # the model's chunk is the same bits; numpy's un-normalisation may round the last bit differently
    d = np.abs(a.astype(np.float64) - want).max() if a.shape == want.shape else np.inf
    print(f"libero auto vs prepare + run --inputs + numpy's Unnormalize: max |d| {d:.3g}")
    check("libero auto: the Pi0 prompt + Pi0.5's quantile Unnormalize (prepare + run --inputs + numpy), within f32 "
          "rounding", d <= 1e-6 * max(1.0, np.abs(want).max()), f"max |d| {d}")


# ---- the rollout host behind the server ------------------------------------------------
def cli_rollout(seed, chunks, out, extra=()):
    """frt policy rollout on the observation the client sends (built as frt policy run --image builds it)."""
    subprocess.run([FRT, "policy", "rollout", "-m", f"{T}/pi05", "--backend", "cpu", "--image",
                    f"base_0_rgb={T}/img0.png", "--image", f"left_wrist_0_rgb={T}/img1.png", "-p", PROMPT,
                    "--state", ",".join("%.9g" % x for x in STATE), "--seed", str(seed), "--max-chunks", str(chunks),
                    "--critic", f"{T}/critic.safetensors", "--record", out, "--json", *extra], capture_output=True,
                   text=True, check=True)
    return np.load(f"{out}/episode_000.npz")


async def rollout_host():
    ws, _ = await connect(CPORT, None)
    r = await ask(ws, {"__ctrl__": "episode_start", "seed": 5})
    rs = [await ask(ws, libero_obs()) for _ in range(3)]
    vals = [x.get("values") for x in rs]
    check("critic: every reply carries values, a [1] <f4 array", all(isinstance(v, np.ndarray) and v.shape == (1,)
          and v.dtype == "<f4" for v in vals), [repr(x)[:200] for x in rs])
    check("max-chunks 3: the third reply reports episode_stopped max_chunks, the first two none",
          [x.get("episode_stopped") for x in rs] == [None, None, "max_chunks"], [x.get("episode_stopped") for x in rs])
    r4 = await ask(ws, libero_obs())
    check("a stopped episode runs nothing: no actions, episode_stopped max_chunks", "actions" not in r4
          and r4.get("episode_stopped") == "max_chunks", repr(r4)[:300])
    e = await ask(ws, {"__ctrl__": "episode_end"})
    check("episode_end: 3 steps, stop_reason max_chunks, the record's path", e.get("steps") == 3
          and e.get("stop_reason") == "max_chunks" and str(e.get("record", "")).endswith("episode_000.npz"), e)
    z = np.load(e["record"])
    got = np.array([v[0] for v in vals], np.float32)
    check("the record: numpy reads it; values == the replies' values, stop max_chunks, 3 chunks",
          np.array_equal(z["values"], got) and int(z["stop_reason"]) == 3 and z["actions"].shape[0] == 3, z["values"])
    cli = cli_rollout(5, 3, f"{T}/rec_cli")
    check("values == frt policy rollout's on the same observations (bit for bit)", np.array_equal(cli["values"], got),
          f"server {got}, rollout {cli['values']}")
    check("model actions == frt policy rollout's (bit for bit)", np.array_equal(cli["actions"], z["actions"]))
    # episode_start with the same seed: a reset, the same first chunk; episode_end mid-episode: client
    await ask(ws, {"__ctrl__": "episode_start", "seed": 5})
    again = await ask(ws, libero_obs())
    check("after episode_start (a restore): the first chunk and value again",
          np.array_equal(again["actions"], rs[0]["actions"]) and np.array_equal(again["values"], vals[0]))
    e = await ask(ws, {"__ctrl__": "episode_end"})
    z = np.load(e["record"])
    check("episode_end mid-episode: stop_reason client in the reply and the record (episode_001.npz)",
          e.get("stop_reason") == "client" and e["record"].endswith("episode_001.npz")
          and z["stop_reason_name"][()] == b"client" and z["values"].shape == (1,), e)
    await ws.close()
    obs = {k: (v if isinstance(v, str) else jarr(v)) for k, v in libero_obs().items()}
    st, body = http(CPORT, "/v1/policy/infer", json.dumps(obs).encode(), {"Content-Type": "application/json"})
    j = json.loads(body) if st == 200 else {}
    v = j.get("values", {})
    check("POST /v1/policy/infer: values as a JSON array", st == 200 and v.get("dtype") == "<f4"
          and v.get("shape") == [1] and "actions" in j, (st, body[:300]))


async def value_stop():
    ws, _ = await connect(VPORT, None)
    await ask(ws, {"__ctrl__": "episode_start", "seed": 2})
    r1 = await ask(ws, libero_obs())
    check("value threshold: the first chunk runs and reports episode_stopped value",
          isinstance(r1.get("actions"), np.ndarray) and r1.get("episode_stopped") == "value", repr(r1)[:300])
    r2 = await ask(ws, libero_obs())
    check("value threshold: the next request runs nothing", "actions" not in r2 and r2.get("episode_stopped") == "value",
          repr(r2)[:300])
    e = await ask(ws, {"__ctrl__": "episode_end"})
    z = np.load(e["record"])
    check("value threshold: episode_end stop_reason value, recorded (numpy: 1 chunk, stop_reason 2)",
          e.get("stop_reason") == "value" and e.get("steps") == 1 and int(z["stop_reason"]) == 2
          and np.array_equal(z["values"], r1["values"]), e)
    await ask(ws, {"__ctrl__": "episode_start", "seed": 2})
    r3 = await ask(ws, libero_obs())
    check("value threshold: a new episode runs again", isinstance(r3.get("actions"), np.ndarray)
          and np.array_equal(r3["actions"], r1["actions"]))
    await ws.close()


def run_cfg(seed, advantage):
    return policy_run(f"{T}/pi05", STATE, seed, ("--cfg-beta", "1.5", "--advantage", advantage))


async def cfg():
    ws, _ = await connect(GPORT, None)
    await ask(ws, {"__ctrl__": "episode_start", "seed": 6})
    a = (await ask(ws, libero_obs()))["actions"]
    await ws.close()
    neg = run_cfg(6, "negative")
    check("--cfg-beta 1.5 --advantage negative == frt policy run --cfg-beta 1.5 --advantage negative (bit for bit)",
          np.array_equal(a, neg), f"max |d| {np.abs(a - neg).max()}")
    ws, _ = await connect(LPORT)
    r = await ask(ws, {"__ctrl__": "cfg", "beta": 1.5})
    check("ctrl cfg beta 1.5: on, advantage positive", r.get("cfg") is True and r.get("beta") == 1.5
          and r.get("advantage") == "positive", r)
    await ask(ws, {"__ctrl__": "episode_start", "seed": 6})
    pos = (await ask(ws, libero_obs()))["actions"]
    want = run_cfg(6, "positive")
    check("ctrl cfg: guided == frt policy run --cfg-beta 1.5 (bit for bit)", np.array_equal(pos, want))
    r = await ask(ws, {"__ctrl__": "cfg", "beta": 1.5, "advantage": "negative"})
    await ask(ws, {"__ctrl__": "episode_start", "seed": 6})
    a = (await ask(ws, libero_obs()))["actions"]
    check("ctrl cfg advantage negative == the --advantage negative server", r.get("advantage") == "negative"
          and np.array_equal(a, neg))
    r = await ask(ws, {"__ctrl__": "cfg", "beta": 0})
    await ask(ws, {"__ctrl__": "episode_start", "seed": 6})
    a = (await ask(ws, libero_obs()))["actions"]
    check("ctrl cfg beta 0: off again, the unguided chunk", r.get("cfg") is False
          and np.array_equal(a, policy_run(f"{T}/pi05", STATE, 6)), r)
    await ws.close()


async def main():
    a1 = await libero()
    http_checks(a1)
    await droid()
    await libero_auto()
    await rollout_host()
    await value_stop()
    await cfg()


asyncio.run(main())
print(f"policy_server.py: {len(failures)} failures")
sys.exit(1 if failures else 0)
