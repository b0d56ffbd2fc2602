/*
 * policy_robot.c - openpi's LIBERO / DROID / ALOHA policy transforms for
 * the policy server (policy_robot.h; the formulas in docs/policy-server.md).
 */
#include "serving/policy_robot.h"

#include "frt/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"libero", "droid", "aloha"};

int frt_robot_parse(const char *name, frt_robot *out)
{
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, NAMES[i])) return *out = (frt_robot)i, 0;
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "robot '%s': not one of libero, droid, aloha", name ? name : "(null)");
}

const char *frt_robot_name(frt_robot r) { return (unsigned)r < 3 ? NAMES[r] : "?"; }

int frt_robot_dof(frt_robot r) { return r == FRT_ROBOT_LIBERO ? 7 : r == FRT_ROBOT_DROID ? 8 : 14; }

/* make_bool_mask(a, -b, c, -d): a ones, b zeros, c ones, d zeros. */
static size_t bool_mask(uint8_t *m, int a, int b, int c, int d)
{
    size_t n = 0;
    const int runs[4] = {a, b, c, d};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < runs[k]; i++) m[n++] = (uint8_t)(k % 2 == 0);
    return n;
}

size_t frt_robot_delta_mask(frt_robot r, frt_policy_variant v, int on, uint8_t *mask)
{
    if (on == 0) return 0;
    switch (r) {
    case FRT_ROBOT_LIBERO: return on < 0 && v == FRT_POLICY_PI05 ? 0 : bool_mask(mask, 6, 1, 0, 0);
    case FRT_ROBOT_DROID: return on < 0 ? 0 : bool_mask(mask, 7, 1, 0, 0);
    case FRT_ROBOT_ALOHA: return bool_mask(mask, 6, 1, 6, 1);
    }
    return 0;
}

/* ---- images ---------------------------------------------------------------- */

/* Element (c, y, x) of the image as u8: (255 * x) cast for floats. */
static int pixel(const frt_pobs_value *v, size_t at, uint8_t *out)
{
    if (v->dtype == FRT_POBS_U8) return *out = ((const uint8_t *)v->data)[at], 0;
    double x = v->dtype == FRT_POBS_F32 ? ((const float *)v->data)[at] : ((const double *)v->data)[at];
    if (!(x >= 0.0 && x <= 1.0)) return -1; /* NaN fails too */
    /* numpy multiplies in the array's own precision, then truncates */
    *out = v->dtype == FRT_POBS_F32 ? (uint8_t)(255.0f * (float)x) : (uint8_t)(255.0 * x);
    return 0;
}

int frt_robot_image(const frt_pobs_value *v, int force_chw, uint8_t **rgb, int *h, int *w)
{
    if (v->kind != FRT_POBS_ARRAY || (v->dtype != FRT_POBS_U8 && v->dtype != FRT_POBS_F32 && v->dtype != FRT_POBS_F64))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': an image must be a |u1, <f4 or <f8 array", v->key);
    if (v->ndim != 3)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': an image has 3 dimensions (HWC or CHW), not %d", v->key,
                         v->ndim);
    int chw = force_chw || v->shape[0] == 3;
    int64_t H = chw ? v->shape[1] : v->shape[0], W = chw ? v->shape[2] : v->shape[1], C = chw ? v->shape[0]
                                                                                            : v->shape[2];
    if (C != 3 || H < 1 || W < 1 || H > FRT_ROBOT_MAX_SIDE || W > FRT_ROBOT_MAX_SIDE)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "'%s': image [%lld, %lld, %lld] as %s: needs 3 channels and 1..%d pixels a side", v->key,
                         (long long)v->shape[0], (long long)v->shape[1], (long long)v->shape[2], chw ? "CHW" : "HWC",
                         FRT_ROBOT_MAX_SIDE);
    uint8_t *o = malloc((size_t)(H * W * 3));
    if (!o) return frt_error(FRT_ERR_OUT_OF_MEMORY, "'%s': out of memory", v->key);
    if (v->dtype == FRT_POBS_U8 && !chw) { /* already u8 HWC: the bytes as they are */
        memcpy(o, v->data, (size_t)(H * W * 3));
        *rgb = o, *h = (int)H, *w = (int)W;
        return 0;
    }
    for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++)
            for (int64_t c = 0; c < 3; c++) {
                size_t src = (size_t)(chw ? (c * H + y) * W + x : (y * W + x) * 3 + c);
                if (pixel(v, src, &o[(y * W + x) * 3 + c]) < 0) {
                    free(o);
                    return frt_error(FRT_ERR_INVALID_ARGUMENT,
                                     "'%s': float image value at %zu outside [0, 1] (openpi casts 255 x to uint8)",
                                     v->key, src);
                }
            }
    *rgb = o;
    *h = (int)H;
    *w = (int)W;
    return 0;
}

/* ---- the observation ------------------------------------------------------- */

static const frt_pobs_value *need(const frt_pobs *o, frt_robot r, const char *key)
{
    const frt_pobs_value *v = frt_pobs_get(o, key);
    if (!v)
        frt_error(FRT_ERR_INVALID_ARGUMENT, "missing key '%s' (robot %s; docs/policy-server.md lists its keys)", key,
                  frt_robot_name(r));
    return v;
}

/* Appends the values of a numeric array (0-d or 1-d) to ro->state. */
static int state_append(frt_robot_obs *ro, const frt_pobs_value *v)
{
    if (v->kind != FRT_POBS_ARRAY || v->ndim > 1 || v->dtype == FRT_POBS_BOOL)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': the state must be a 1-d numeric array", v->key);
    if (ro->n_state + v->n > FRT_ROBOT_MAX_STATE)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': more than %d state values", v->key, FRT_ROBOT_MAX_STATE);
    frt_pobs_to_f64(v, ro->state + ro->n_state);
    for (size_t i = 0; i < v->n; i++)
        if (!isfinite(ro->state[ro->n_state + i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': value %zu is not finite", v->key, i);
    ro->n_state += v->n;
    return 0;
}

/* Image KEY into camera SLOT; absent and optional: the slot stays masked. */
static int take_image(frt_robot_obs *ro, const frt_pobs *o, frt_robot r, const char *key, int slot, int optional)
{
    const frt_pobs_value *v = optional ? frt_pobs_get(o, key) : need(o, r, key);
    if (!v) return optional ? 0 : FRT_ERR_INVALID_ARGUMENT;
    return frt_robot_image(v, r == FRT_ROBOT_ALOHA, &ro->rgb[slot], &ro->height[slot], &ro->width[slot]);
}

/* aloha_policy._gripper_to_angular (the gripper's linear position -> the
 * angle the Pi models were trained on, normalised). */
static double gripper_to_angular(double x)
{
    double v = x * (0.05800 - 0.01844) + 0.01844;
    double c = (0.022 * 0.022 + v * v - 0.036 * 0.036) / (2 * 0.022 * v);
    if (!isnan(c)) c = c < -1.0 ? -1.0 : c > 1.0 ? 1.0 : c; /* np.clip keeps NaN */
    return (asin(c) - 0.5476) / (1.6296 - 0.5476);
}

/* _joint_flip_mask: Aloha's and the Pi models' joint sign conventions. */
static const double FLIP[14] = {1, -1, -1, 1, 1, 1, 1, 1, -1, -1, 1, 1, 1, 1};

static int aloha_obs(frt_robot_obs *ro, const frt_pobs *o)
{
    FRT_TRY(take_image(ro, o, FRT_ROBOT_ALOHA, "images/cam_high", 0, 0));
    FRT_TRY(take_image(ro, o, FRT_ROBOT_ALOHA, "images/cam_left_wrist", 1, 1));
    FRT_TRY(take_image(ro, o, FRT_ROBOT_ALOHA, "images/cam_right_wrist", 2, 1));
    const frt_pobs_value *low = frt_pobs_get(o, "images/cam_low"), *st = need(o, FRT_ROBOT_ALOHA, "state");
    uint8_t *unused = NULL;
    int h, w;
    if (low) FRT_TRY(frt_robot_image(low, 1, &unused, &h, &w)); /* decoded as openpi does, then not used */
    free(unused);
    if (!st) return FRT_ERR_INVALID_ARGUMENT;
    if (st->kind != FRT_POBS_ARRAY || st->ndim != 1 || st->n != 14)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'state': ALOHA's state is a [14] array");
    FRT_TRY(state_append(ro, st));
    for (int i = 0; i < 14; i++) ro->state[i] *= FLIP[i];
    ro->state[6] = gripper_to_angular(ro->state[6]);
    ro->state[13] = gripper_to_angular(ro->state[13]);
    return 0;
}

/* The keys an observation of each robot may carry (docs/policy-server.md's
 * table), NULL-terminated: those openpi's LiberoInputs / DroidInputs /
 * AlohaInputs read, and the prompt. */
static const char *const KEYS[3][7] = {
    [FRT_ROBOT_LIBERO] = {"observation/image", "observation/wrist_image", "observation/state", "prompt", NULL},
    [FRT_ROBOT_DROID] = {"observation/exterior_image_1_left", "observation/wrist_image_left",
                         "observation/joint_position", "observation/gripper_position", "prompt", NULL},
    [FRT_ROBOT_ALOHA] = {"images/cam_high", "images/cam_low", "images/cam_left_wrist", "images/cam_right_wrist",
                         "state", "prompt", NULL},
};

/* Refuses a key robot R does not read (openpi's transforms would drop it
 * unread: a misspelt camera, a noise or seed field, training's actions),
 * naming it and the robot's keys. */
static int check_keys(frt_robot r, const frt_pobs *o)
{
    for (size_t i = 0; i < o->n; i++) {
        int ok = 0;
        for (int k = 0; KEYS[r][k]; k++) ok |= !strcmp(o->v[i].key, KEYS[r][k]);
        if (ok) continue;
        char list[512] = "";
        for (int k = 0; KEYS[r][k]; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", KEYS[r][k]);
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "'%.256s': not an observation key of robot %s (its keys: %s; docs/policy-server.md)",
                         o->v[i].key, frt_robot_name(r), list);
    }
    return 0;
}

static int robot_obs(frt_robot r, frt_robot_obs *ro, const frt_pobs *o)
{
    if ((unsigned)r < 3) FRT_TRY(check_keys(r, o));
    const frt_pobs_value *v;
    switch (r) {
    case FRT_ROBOT_LIBERO:
        FRT_TRY(take_image(ro, o, r, "observation/image", 0, 0));
        FRT_TRY(take_image(ro, o, r, "observation/wrist_image", 1, 0));
        if (!(v = need(o, r, "observation/state"))) return FRT_ERR_INVALID_ARGUMENT;
        return state_append(ro, v);
    case FRT_ROBOT_DROID:
        FRT_TRY(take_image(ro, o, r, "observation/exterior_image_1_left", 0, 0));
        FRT_TRY(take_image(ro, o, r, "observation/wrist_image_left", 1, 0));
        if (!(v = need(o, r, "observation/joint_position"))) return FRT_ERR_INVALID_ARGUMENT;
        FRT_TRY(state_append(ro, v));
        if (!(v = need(o, r, "observation/gripper_position"))) return FRT_ERR_INVALID_ARGUMENT;
        return state_append(ro, v);
    case FRT_ROBOT_ALOHA: return aloha_obs(ro, o);
    }
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "unknown robot");
}

void frt_robot_obs_free(frt_robot_obs *ro)
{
    if (!ro) return;
    for (int i = 0; i < FRT_ROBOT_CAMERAS; i++) free(ro->rgb[i]), ro->rgb[i] = NULL;
}

int frt_robot_obs_from(frt_robot r, const frt_pobs *o, const char *default_prompt, frt_robot_obs *out)
{
    frt_robot_obs ro;
    memset(&ro, 0, sizeof ro);
    int rc = robot_obs(r, &ro, o);
    if (rc == 0 && ro.n_state == 0) rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "the state is empty");
    const frt_pobs_value *p = frt_pobs_get(o, "prompt");
    if (rc == 0 && p && p->kind != FRT_POBS_STRING)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "'prompt': must be a string");
    ro.prompt = p ? (const char *)p->data : default_prompt;
    if (rc == 0 && !ro.prompt)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "missing key 'prompt' (and the server has no --default-prompt)");
    if (rc < 0) {
        frt_robot_obs_free(&ro);
        return rc;
    }
    *out = ro;
    return 0;
}

/* ---- the actions ----------------------------------------------------------- */

int frt_robot_actions(frt_robot r, const uint8_t *mask, size_t n_mask, const double *state, size_t n_state,
                      const float *actions, size_t chunk, size_t action_dim, float *out)
{
    size_t dof = (size_t)frt_robot_dof(r);
    if (action_dim < dof || action_dim < n_mask)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "the model's %zu action values are fewer than robot %s's %zu",
                         action_dim, frt_robot_name(r), dof > n_mask ? dof : n_mask);
    for (size_t t = 0; t < chunk; t++)
        for (size_t j = 0; j < dof; j++) {
            double x = actions[t * action_dim + j];
            if (j < n_mask && mask[j] && j < n_state) x += state[j]; /* AbsoluteActions */
            if (r == FRT_ROBOT_ALOHA) {                              /* _encode_actions */
                x *= FLIP[j];
                if (j == 6 || j == 13) x = (x + 0.5476 - -0.6213) / (1.4910 - -0.6213);
            }
            out[t * dof + j] = (float)x;
        }
    return 0;
}
