#!/usr/bin/python3
"""policy_robot_ref.py CASES.json - numpy re-implementation of openpi's
LIBERO / DROID / ALOHA policy transforms (written from the math of openpi's
src/openpi/policies/{libero,droid,aloha}_policy.py and transforms.py
AbsoluteActions), checking the cases tests/test_policy_robot.c wrote:

  obs  -> the images per model camera (base_0_rgb, left_wrist_0_rgb,
          right_wrist_0_rgb; None = masked) and the state
  actions_in [chunk, action_dim] + mask -> the robot's actions

Images must match exactly, the state to 1e-12 (relative), the actions to
the f32 rounding of the C code. Exits 1 on any mismatch. Standard library +
numpy only (run with /usr/bin/python3).
"""
import base64
import json
import sys

import numpy as np


def arr(j):
    return np.frombuffer(base64.b64decode(j["data"]), dtype=np.dtype(j["dtype"])).reshape(j["shape"])


def parse_image(img, chw=False):
    # libero_policy._parse_image / aloha_policy._decode_aloha's convert_image
    if np.issubdtype(img.dtype, np.floating):
        img = (255 * img).astype(np.uint8)
    if chw or img.shape[0] == 3:
        img = np.transpose(img, (1, 2, 0))
    return img


FLIP = np.array([1, -1, -1, 1, 1, 1, 1, 1, -1, -1, 1, 1, 1, 1])


def gripper_to_angular(value):
    value = value * (0.05800 - 0.01844) + 0.01844
    value = np.arcsin(np.clip((0.022**2 + value**2 - 0.036**2) / (2 * 0.022 * value), -1.0, 1.0))
    return (value - 0.5476) / (1.6296 - 0.5476)


def gripper_from_angular(value):
    value = value + 0.5476
    return (value - -0.6213) / (1.4910 - -0.6213)


def inputs(robot, obs):
    if robot == "libero":
        images = [parse_image(obs["observation/image"]), parse_image(obs["observation/wrist_image"]), None]
        state = np.asarray(obs["observation/state"], np.float64)
    elif robot == "droid":
        g = np.asarray(obs["observation/gripper_position"])
        if g.ndim == 0:
            g = g[np.newaxis]
        state = np.concatenate([obs["observation/joint_position"], g]).astype(np.float64)
        images = [parse_image(obs["observation/exterior_image_1_left"]),
                  parse_image(obs["observation/wrist_image_left"]), None]
    else:
        ims = {k.split("/", 1)[1]: parse_image(v, chw=True) for k, v in obs.items() if k.startswith("images/")}
        images = [ims["cam_high"], ims.get("cam_left_wrist"), ims.get("cam_right_wrist")]
        state = FLIP * np.asarray(obs["state"], np.float64)
        state[[6, 13]] = gripper_to_angular(state[[6, 13]])
    return images, state


def outputs(robot, mask, state, actions):
    actions = actions.astype(np.float64)
    if mask:
        m = np.asarray(mask)
        st = np.zeros(actions.shape[-1])
        st[: len(state)] = state
        actions[..., : len(m)] += np.expand_dims(np.where(m, st[: len(m)], 0), axis=-2)
    dof = {"libero": 7, "droid": 8, "aloha": 14}[robot]
    actions = actions[:, :dof]
    if robot == "aloha":
        actions = FLIP * actions
        actions[:, [6, 13]] = gripper_from_angular(actions[:, [6, 13]])
    return actions


def main():
    cases = json.load(open(sys.argv[1]))
    errs = []
    worst = 0.0
    for i, c in enumerate(cases):
        obs = {k: (v if isinstance(v, str) else arr(v)) for k, v in c["obs"].items()}
        images, state = inputs(c["robot"], obs)
        got = c["out"]
        for s, (want, g) in enumerate(zip(images, got["images"])):
            if (want is None) != (g is None) or (want is not None and not np.array_equal(want, arr(g))):
                errs.append(f"case {i} ({c['robot']}): camera slot {s} differs")
        gs = arr(got["state"])
        if gs.shape != state.shape or np.abs(gs - state).max() > 1e-12 * max(1.0, np.abs(state).max()):
            errs.append(f"case {i} ({c['robot']}): state {gs} != {state}")
        want = outputs(c["robot"], c["mask"], state, arr(got["actions_in"]))
        ga = arr(got["actions"]).astype(np.float64)
        if ga.shape != want.shape:
            errs.append(f"case {i}: actions shape {ga.shape} != {want.shape}")
            continue
        d = np.abs(ga - want).max() / max(1.0, np.abs(want).max())
        worst = max(worst, d)
        if d > 2e-7:
            errs.append(f"case {i} ({c['robot']}): actions differ by {d}")
    print(f"policy_robot_ref: {len(cases)} cases, actions max rel |d| {worst:.2e}")
    for e in errs:
        print("FAIL", e)
    sys.exit(1 if errs else 0)


main()
