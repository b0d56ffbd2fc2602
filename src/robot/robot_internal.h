/*
 * robot_internal.h - what the files of src/robot share: the critic's
 * policy, the .npz writer (npz.c) and the episode record (episode.c) of the
 * rollout host (frt/rollout.h).
 */
#ifndef FRT_ROBOT_INTERNAL_H
#define FRT_ROBOT_INTERNAL_H

#include "frt/rollout.h"

#include <stddef.h>
#include <stdint.h>

/* The policy a critic was loaded for (NULL for NULL). */
frt_model *frt_critic_policy(const frt_critic *c);

/* The checks of frt_critic_load on a file image in memory, for a policy of
 * prefix width `width`, without a policy (the fuzz target): *out gets the
 * critic's sizes. Errors: those of frt_critic_load's file checks. */
int frt_critic_parse_memory(const void *data, size_t size, int width, frt_critic_info *out);

/* ---- the critic on the cuda backend (critic_cuda.c; CUDA builds only) ----- */

#define FRT_CRITIC_MAX_LAYERS 16

/* One layer's host weights: w [out, in] f32, b [out] f32 (borrowed). */
typedef struct frt_critic_layer_view {
    int in, out;
    const float *w, *b;
} frt_critic_layer_view;

/* What one replay reads and writes, all device pointers (the graph's
 * ports): state [state_dim] f32, tokens [n_cameras, n_patch, width] f32,
 * cam_mask [n_cameras] u8, value [1] f32. */
typedef struct frt_critic_io {
    const float *state, *tokens;
    const uint8_t *cam_mask;
    float *value;
    int state_dim, n_cameras, n_patch, width;
} frt_critic_io;

/* The critic's weights in device buffers of ctx (copied on stream s, which
 * is synchronised) and its scratch. Free with frt_critic_dev_free. Errors:
 * those of frt_buffer_alloc / frt_buffer_write; *out NULL on failure. */
typedef struct frt_critic_dev frt_critic_dev;
int frt_critic_dev_create(frt_context *ctx, frt_stream *s, const frt_critic_layer_view *layers, int n_layers,
                          frt_critic_dev **out);

/* NULL is a no-op; no work may still use it. */
void frt_critic_dev_free(frt_critic_dev *d);

/* Enqueues the critic on s (inside the graph's capture): the input kernel,
 * then one dense kernel per layer (SiLU on all but the last), the last
 * writing io->value. Errors: those of the kernel launchers. */
int frt_critic_dev_record(const frt_critic_dev *d, frt_stream *s, const frt_critic_io *io);

/* ---- .npz (numpy's zip of .npy files) through libzip ---------------------- */

typedef struct frt_npz frt_npz;

/* Starts the archive at path (replaced when it exists; nothing is written
 * until frt_npz_close). Errors: FRT_ERR_IO (libzip's message),
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_npz_open(const char *path, frt_npz **out);

/* Adds NAME.npy: a version 1.0 .npy header (descr, C order, shape; ndim 0
 * is a scalar) and the bytes of data (product of shape elements of the
 * descr's size; copied). descr: numpy's dtype string ("<f4", "<f8",
 * "<u8", "<i4", "|S16"). Stored uncompressed. Errors: FRT_ERR_INVALID_
 * ARGUMENT (ndim outside 0..4), FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY. */
int frt_npz_add(frt_npz *z, const char *name, const char *descr, int ndim, const int64_t *shape, const void *data,
                size_t bytes);

/* Writes the archive and frees z. Errors: FRT_ERR_IO (nothing usable
 * written). */
int frt_npz_close(frt_npz *z);

/* Frees z without writing anything. NULL is a no-op. */
void frt_npz_discard(frt_npz *z);

/* ---- the episode record --------------------------------------------------- */

typedef struct frt_episode_record {
    int n, cap;             /* chunks recorded, room */
    int chunk_floats;       /* chunk * action_dim */
    int chunk, action_dim;
    float *actions;         /* [n, chunk, action_dim] */
    float *values;          /* [n] (NaN without a critic) */
    uint64_t *obs_digest;   /* [n] xxh64 of the observation */
    uint64_t *prompt_digest; /* [n] xxh64 of the prompt ids the tick used */
    double *tick_ms;        /* [n] */
} frt_episode_record;

/* Appends one chunk. Errors: FRT_ERR_OUT_OF_MEMORY (nothing appended). */
int frt_episode_append(frt_episode_record *e, const float *actions, float value, uint64_t obs_digest,
                       uint64_t prompt_digest, double ms);

/* Empties the record (keeps its room). */
void frt_episode_clear(frt_episode_record *e);

void frt_episode_free(frt_episode_record *e);

/* What frt_rollout_end writes besides the arrays. */
typedef struct frt_episode_meta {
    int episode;
    uint64_t seed;
    frt_stop_reason stop;
    double reset_ms;        /* the restore before this episode (0 for the first) */
} frt_episode_meta;

/* Writes the record as path (.npz: docs/robot.md lists the arrays).
 * Errors: FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY. */
int frt_episode_write(const frt_episode_record *e, const frt_episode_meta *meta, const char *path);

/* xxh64 of one observation: the pixels [n_cameras, channels, height, width]
 * f32, then the camera mask (n_cameras bytes, ones when NULL), then the
 * state [n_state] f32, chained (each digest seeds the next). */
uint64_t frt_obs_digest(const frt_policy_inputs *obs);

#endif
