/*
 * fake_robot.c - the test and benchmark helpers of frt/rollout.h: a random
 * critic file and a deterministic scripted observation stream.
 */
#include "frt/rollout.h"
#include "frt/safetensors.h"

#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi) from 24 random bits. */
static void fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *st)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((splitmix64(st) >> 40) * (1.0 / 16777216.0));
}

static int add_layer(frt_st_writer *w, int i, int in, int out, float **bufs, uint64_t *st)
{
    float *wt = malloc((size_t)in * out * sizeof(float)), *b = malloc((size_t)out * sizeof(float));
    bufs[2 * i] = wt;
    bufs[2 * i + 1] = b;
    if (!wt || !b) return frt_error(FRT_ERR_OUT_OF_MEMORY, "critic: out of memory");
    const float a = 1.0f / sqrtf((float)in);
    fill_uniform(wt, (size_t)in * out, -a, a, st);
    fill_uniform(b, (size_t)out, -0.1f, 0.1f, st);
    char name[64];
    const int64_t ws[2] = {out, in}, bs[1] = {out};
    snprintf(name, sizeof name, "critic.layers.%d.weight", i);
    FRT_TRY(frt_st_writer_add(w, name, FRT_DT_F32, 2, ws, wt));
    snprintf(name, sizeof name, "critic.layers.%d.bias", i);
    return frt_st_writer_add(w, name, FRT_DT_F32, 1, bs, b);
}

int frt_critic_write_random(const char *path, int state_dim, int width, int hidden, int n_layers, uint64_t seed)
{
    if (!path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL path");
    if (state_dim < 1 || width < 1 || hidden < 1 || n_layers < 1 || n_layers > 16)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: state_dim %d, width %d, hidden %d, %d layers", state_dim,
                         width, hidden, n_layers);
    float *bufs[32] = {0};
    frt_st_writer *w = NULL;
    uint64_t st = seed;
    int rc = frt_st_writer_create(&w);
    for (int i = 0; rc == 0 && i < n_layers; i++)
        rc = add_layer(w, i, i == 0 ? state_dim + width : hidden, i == n_layers - 1 ? 1 : hidden, bufs, &st);
    if (rc == 0) frt_st_writer_set_sync(w, 0);
    if (rc == 0) rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    for (int i = 0; i < 32; i++) free(bufs[i]);
    return rc;
}

struct frt_fake_robot {
    frt_policy_info pi;
    uint64_t seed;
    int n_cameras;
    float *pixels; /* [n_cameras, 3, H, W] */
    float *state;  /* [max_state_dim] */
};

int frt_fake_robot_create(const frt_model *policy, uint64_t seed, int n_cameras, frt_fake_robot **out)
{
    if (!policy || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake robot: NULL argument");
    *out = NULL;
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(policy, &pi));
    if (n_cameras < 1 || n_cameras > pi.max_cameras)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake robot: %d cameras (1 to %d)", n_cameras, pi.max_cameras);
    frt_fake_robot *f = calloc(1, sizeof *f);
    if (!f) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake robot: out of memory");
    f->pi = pi;
    f->seed = seed;
    f->n_cameras = n_cameras;
    f->pixels = malloc((size_t)n_cameras * pi.image_channels * pi.image_height * pi.image_width * sizeof(float));
    f->state = malloc((size_t)(pi.max_state_dim > 0 ? pi.max_state_dim : 1) * sizeof(float));
    if (!f->pixels || !f->state) {
        frt_fake_robot_free(f);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake robot: out of memory");
    }
    *out = f;
    return 0;
}

int frt_fake_robot_observe(frt_fake_robot *f, int64_t t, frt_policy_inputs *obs)
{
    if (!f || !obs || t < 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake robot: NULL argument or t < 0");
    const frt_policy_info *pi = &f->pi;
    uint64_t st = f->seed ^ ((uint64_t)t * 0xD1B54A32D192ED03ull);
    size_t px = (size_t)f->n_cameras * pi->image_channels * pi->image_height * pi->image_width;
    fill_uniform(f->pixels, px, -1.0f, 1.0f, &st);
    fill_uniform(f->state, (size_t)pi->max_state_dim, -1.0f, 1.0f, &st);
    memset(obs, 0, sizeof *obs);
    obs->pixel_values = f->pixels;
    obs->n_cameras = f->n_cameras;
    obs->channels = pi->image_channels;
    obs->height = pi->image_height;
    obs->width = pi->image_width;
    if (!pi->state_in_prompt) {
        obs->state = f->state;
        obs->n_state = pi->max_state_dim;
    }
    return 0;
}

void frt_fake_robot_free(frt_fake_robot *f)
{
    if (!f) return;
    free(f->pixels);
    free(f->state);
    free(f);
}
