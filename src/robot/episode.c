/*
 * episode.c - the record of one rollout episode (robot_internal.h) and its
 * .npz file (docs/robot.md lists the arrays).
 */
#include "robot/robot_internal.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static int grow(void **p, size_t elem, int cap)
{
    void *q = realloc(*p, elem * (size_t)cap);
    if (!q) return frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: out of memory (episode record)");
    *p = q;
    return 0;
}

static int reserve(frt_episode_record *e)
{
    if (e->n < e->cap) return 0;
    int cap = e->cap ? 2 * e->cap : 16;
    FRT_TRY(grow((void **)&e->actions, (size_t)e->chunk_floats * sizeof(float), cap));
    FRT_TRY(grow((void **)&e->values, sizeof(float), cap));
    FRT_TRY(grow((void **)&e->obs_digest, sizeof(uint64_t), cap));
    FRT_TRY(grow((void **)&e->prompt_digest, sizeof(uint64_t), cap));
    FRT_TRY(grow((void **)&e->tick_ms, sizeof(double), cap));
    e->cap = cap;
    return 0;
}

int frt_episode_append(frt_episode_record *e, const float *actions, float value, uint64_t obs_digest,
                       uint64_t prompt_digest, double ms)
{
    FRT_TRY(reserve(e));
    memcpy(e->actions + (size_t)e->n * e->chunk_floats, actions, (size_t)e->chunk_floats * sizeof(float));
    e->values[e->n] = value;
    e->obs_digest[e->n] = obs_digest;
    e->prompt_digest[e->n] = prompt_digest;
    e->tick_ms[e->n] = ms;
    e->n++;
    return 0;
}

void frt_episode_clear(frt_episode_record *e) { e->n = 0; }

void frt_episode_free(frt_episode_record *e)
{
    free(e->actions);
    free(e->values);
    free(e->obs_digest);
    free(e->prompt_digest);
    free(e->tick_ms);
    memset(e, 0, sizeof *e);
}

static int add_arrays(frt_npz *z, const frt_episode_record *e)
{
    const int64_t a[3] = {e->n, e->chunk, e->action_dim}, n[1] = {e->n};
    FRT_TRY(frt_npz_add(z, "actions", "<f4", 3, a, e->actions, (size_t)e->n * e->chunk_floats * sizeof(float)));
    FRT_TRY(frt_npz_add(z, "values", "<f4", 1, n, e->values, (size_t)e->n * sizeof(float)));
    FRT_TRY(frt_npz_add(z, "obs_digest", "<u8", 1, n, e->obs_digest, (size_t)e->n * sizeof(uint64_t)));
    FRT_TRY(frt_npz_add(z, "prompt_digest", "<u8", 1, n, e->prompt_digest, (size_t)e->n * sizeof(uint64_t)));
    return frt_npz_add(z, "tick_ms", "<f8", 1, n, e->tick_ms, (size_t)e->n * sizeof(double));
}

static int add_meta(frt_npz *z, const frt_episode_meta *m)
{
    const int32_t ep = m->episode, stop = (int32_t)m->stop;
    char name[16] = {0};
    strncpy(name, frt_stop_reason_str(m->stop), sizeof name - 1);
    FRT_TRY(frt_npz_add(z, "episode", "<i4", 0, NULL, &ep, sizeof ep));
    FRT_TRY(frt_npz_add(z, "seed", "<u8", 0, NULL, &m->seed, sizeof m->seed));
    FRT_TRY(frt_npz_add(z, "stop_reason", "<i4", 0, NULL, &stop, sizeof stop));
    FRT_TRY(frt_npz_add(z, "stop_reason_name", "|S16", 0, NULL, name, sizeof name));
    return frt_npz_add(z, "reset_ms", "<f8", 0, NULL, &m->reset_ms, sizeof m->reset_ms);
}

int frt_episode_write(const frt_episode_record *e, const frt_episode_meta *meta, const char *path)
{
    frt_npz *z = NULL;
    FRT_TRY(frt_npz_open(path, &z));
    int rc = add_arrays(z, e);
    if (rc == 0) rc = add_meta(z, meta);
    if (rc < 0) {
        frt_npz_discard(z);
        return rc;
    }
    return frt_npz_close(z);
}

uint64_t frt_obs_digest(const frt_policy_inputs *obs)
{
    size_t px = (size_t)obs->n_cameras * obs->channels * obs->height * obs->width;
    uint64_t h = XXH64(obs->pixel_values, px * sizeof(float), 0);
    for (int c = 0; c < obs->n_cameras; c++) {
        uint8_t f = obs->camera_mask ? obs->camera_mask[c] : 1;
        h = XXH64(&f, 1, h);
    }
    return XXH64(obs->state, obs->state ? (size_t)obs->n_state * sizeof(float) : 0, h);
}
