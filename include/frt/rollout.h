/*
 * frt/rollout.h - the robot side of a policy: an RL rollout host whose
 * episode reset is a capsule restore, a value critic replayed beside the
 * policy as one exec plan on a second stream, and a planner -> actor
 * hand-off through the actor's prompt port (docs/robot.md).
 *
 * The episode state machine (frt_rollout):
 *
 *   RESET    frt_rollout_create / frt_rollout_end restore the
 *            episode-initial capsule (taken once at create, after
 *            frt_policy_episode_start(seed)): the noise seed, the step
 *            counter and the whole policy state (its prefix KV included).
 *            A copy, never a capture: frt_context_capture_count stays the
 *            same across episodes.
 *   RUNNING  frt_rollout_tick: one replay of the policy graph per action
 *            chunk (with the critic, as one plan); between chunks the host
 *            checks the stop predicates.
 *   STOPPED  on the first of: frt_rollout_request_stop (the client),
 *            the critic's value below params.value_threshold, params.
 *            max_chunks chunks run, params.timeout_s seconds since the
 *            episode's first tick. No tick runs until frt_rollout_end.
 *   RECORD   frt_rollout_end writes DIR/episode_NNN.npz (params.record_dir;
 *            NNN the episode index, from 000) through libzip: actions,
 *            values, observation digests (xxh64), the stop reason, timings
 *            (the arrays: docs/robot.md), then RESET.
 *
 * Determinism: an episode replayed from the initial capsule with the same
 * observations gives byte-identical actions (the noise is the seeded
 * episode stream of frt/policy.h).
 *
 * Threads: one thread drives a rollout (create, tick, end, destroy);
 * frt_rollout_request_stop may be called from any thread.
 *
 * Backends: the critic's graph is a host task over the policy's port
 * buffers on the cpu backend, and the kernels of
 * kernels/cuda/critic_mlp.cu (f32, reading the ports on the device) on the
 * cuda backend; the rollout host itself is backend-neutral.
 */
#ifndef FRT_ROLLOUT_H
#define FRT_ROLLOUT_H

#include "frt/exec.h"
#include "frt/export.h"
#include "frt/model.h"
#include "frt/policy.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the value critic ------------------------------------------------------
 * An MLP over the normalized robot state and the policy's pooled vision
 * features (docs/robot.md has the safetensors layout):
 *   pooled[j] = mean over present cameras c (pixel_attention_mask[c] = 1) and
 *               their n_patch rows p of vision_tokens[c, p, j]   [width] f32
 *   x_0       = [state (zero-padded to state_dim); pooled]        [state_dim + width]
 *   x_{i+1}   = silu(W_i x_i + b_i) for i < L - 1,  value = W_{L-1} x_{L-1} + b_{L-1}   (scalar)
 * with W_i = critic.layers.i.weight [out_i, in_i], b_i = critic.layers.i.bias
 * [out_i] (any float dtype, converted to f32), out_{L-1} = 1. Sums are f32
 * in a fixed order (the same bits on every run). The value of a tick is the
 * value of that tick's observation: the critic reads the vision_tokens the
 * policy's replay just wrote (a data dependency). */
typedef struct frt_critic frt_critic;

typedef struct frt_critic_info {
    int state_dim; /* state values the critic takes (in_0 - width) */
    int width;     /* pooled feature width (the policy's prefix width) */
    int n_layers;  /* L >= 1 */
    int hidden;    /* out_0 (1 when L == 1) */
} frt_critic_info;

/* Loads the critic in `path` (a .safetensors file) for `policy`: its
 * buffers and its graph live in the policy's context, its graph binds the
 * policy's vision_tokens and pixel_attention_mask ports (zero copy) and is
 * captured once here on the critic's own stream (a second stream of that
 * context). Free with frt_critic_free (before the policy).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL); FRT_ERR_UNSUPPORTED (not a
 * policy, or a backend other than cpu and cuda); FRT_ERR_NOT_FOUND (no such file);
 * FRT_ERR_IO / FRT_ERR_FORMAT (unreadable file, not safetensors, no critic.layers.0.weight, a missing bias, a
 * layer whose input is not the previous output, in_0 <= width, a last
 * layer with more than one output, a non-float tensor: named in the
 * message); FRT_ERR_OUT_OF_MEMORY. *out is NULL on failure. */
FRT_API int frt_critic_load(frt_model *policy, const char *path, frt_critic **out);

/* Frees the critic (its stream is synchronised first). NULL is a no-op. */
FRT_API void frt_critic_free(frt_critic *c);

/* Fills *out. Errors: FRT_ERR_INVALID_ARGUMENT (NULL). */
FRT_API int frt_critic_info_get(const frt_critic *c, frt_critic_info *out);

/* Writes the state the next replay reads ([n] f32, n <= state_dim, zero-
 * padded; on the critic's stream, synchronised before return).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL with n > 0, n < 0 or > state_dim,
 * a NaN or infinite value; nothing written). */
FRT_API int frt_critic_set_state(frt_critic *c, const float *state, int n);

/* Replays the critic alone on its stream and waits: *value is the value of
 * the policy's last inference (the vision_tokens it left) and the state of
 * frt_critic_set_state. Errors: FRT_ERR_INVALID_ARGUMENT (NULL); those of
 * frt_graph_replay / frt_stream_sync. */
FRT_API int frt_critic_run(frt_critic *c, float *value);

/* The critic's graph (key 1) and stream, to add it to a plan; owned by the
 * critic. After the plan has run, frt_critic_value reads the result.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL). */
FRT_API int frt_critic_graph(frt_critic *c, frt_graph **graph, frt_shape_key *key, frt_stream **stream);

/* The value the last replay wrote (reads the output buffer on the critic's
 * stream and waits). Errors: FRT_ERR_INVALID_ARGUMENT (NULL). */
FRT_API int frt_critic_value(frt_critic *c, float *value);

/* CPU reference of the formula above in double, from host arrays
 * (vision_tokens [n_cameras, n_patch, width] f32, camera_mask [n_cameras]
 * 0/1 or NULL = all present, state [n] f32), for tests. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, n outside [0, state_dim], no camera
 * present, n_cameras or n_patch < 1). */
FRT_API int frt_critic_reference(const frt_critic *c, const float *vision_tokens, int n_cameras, int n_patch,
                                 const uint8_t *camera_mask, const float *state, int n, double *value);

/* ---- the rollout host ------------------------------------------------------ */

typedef enum frt_stop_reason {
    FRT_STOP_NONE = 0,       /* still running */
    FRT_STOP_CLIENT = 1,     /* frt_rollout_request_stop */
    FRT_STOP_VALUE = 2,      /* the critic's value below value_threshold */
    FRT_STOP_MAX_CHUNKS = 3, /* max_chunks chunks ran */
    FRT_STOP_TIMEOUT = 4,    /* timeout_s seconds since the episode's first tick */
} frt_stop_reason;

/* "none", "client", "value", "max_chunks", "timeout"; "?" otherwise. */
FRT_API const char *frt_stop_reason_str(frt_stop_reason r);

typedef struct frt_rollout_params {
    uint64_t seed;         /* the episode noise seed (frt_policy_episode_start); every episode starts from it */
    int max_chunks;        /* >= 1: stop after this many chunks */
    double timeout_s;      /* > 0: stop once this many seconds passed since the first tick; 0 = none */
    int value_stop;        /* 1: stop when a value < value_threshold (needs a critic) */
    float value_threshold; /* read only with value_stop 1; must stay 0 otherwise */
    int serial;            /* 1: replay the policy, then the critic, one after the other on the policy's
                              stream (needs a critic); 0 (default): one exec plan (policy stream + critic
                              stream), or the policy alone without a critic */
    const char *record_dir; /* where frt_rollout_end writes episode_NNN.npz (copied); NULL = no recording
                               (nothing of the episode is kept then; with it the record grows by one chunk a
                               tick until frt_rollout_end) */
} frt_rollout_params;

/* seed 0, max_chunks 100, timeout_s 0, value_stop 0, value_threshold 0, serial 0, record_dir NULL. */
FRT_API frt_rollout_params frt_rollout_default_params(void);

typedef struct frt_rollout frt_rollout;

/* Creates a host over `policy` (and `critic`, may be NULL; made for this
 * policy): starts the episode stream of params->seed, snapshots the
 * episode-initial capsule (device tier) and is then ready for the first
 * tick. The policy and critic must outlive the host, which drives them
 * alone while it exists. Free with frt_rollout_destroy.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL policy / params / out,
 * max_chunks < 1, timeout_s < 0 or NaN, value_stop not 0/1 or without a
 * critic, a NaN threshold, a nonzero threshold with value_stop 0, serial
 * not 0/1, serial 1 without a critic, a critic of another policy);
 * FRT_ERR_UNSUPPORTED (not a policy); FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_rollout_create(frt_model *policy, frt_critic *critic, const frt_rollout_params *params,
                               frt_rollout **out);

/* Frees the host (the initial capsule, the plan, the episode record).
 * NULL is a no-op. */
FRT_API void frt_rollout_destroy(frt_rollout *r);

/* What one tick did. */
typedef struct frt_rollout_tick_out {
    int ran;                /* 1: a chunk ran (actions and value are set); 0: the episode had stopped */
    float value;            /* the critic's value of this tick (NaN without a critic) */
    frt_stop_reason stop;   /* FRT_STOP_NONE, or why the episode is now stopped */
    double ms;              /* wall time of the chunk (staging, replay(s), reading back) */
} frt_rollout_tick_out;

/* One RUNNING step. First the predicates that need no chunk (a stop
 * request, the timeout, max_chunks): if one holds the episode stops and no
 * chunk runs (ran 0). Otherwise obs is staged (frt_policy_stage; with
 * obs->input_ids NULL the prompt is the hand-off buffer's, n_tokens taken
 * from the last frt_rollout_set_prompt or planner write: obs->n_tokens is
 * then 0 or that length), the planner runs
 * first when due, the policy (and the critic) replay, the chunk is copied
 * into actions[0 .. chunk * action_dim) and recorded, and the predicates
 * are checked again (value, max_chunks, timeout, stop request).
 * Errors (nothing recorded, the episode state unchanged except as said):
 * FRT_ERR_INVALID_ARGUMENT (NULL, cap too small, the input checks of
 * frt_policy_run; obs->input_ids NULL before any prompt was bound, or with
 * an obs->n_tokens other than 0 and the bound prompt's length; a state
 * longer than the critic's); FRT_ERR_STATE (the episode is stopped: call
 * frt_rollout_end); a failure inside the forward pass or of the planner
 * (the episode should be ended: the policy state may hold a partial
 * prefix, frt_rollout_end restores it; a planner that failed between its
 * first and last id leaves the hand-off buffer unbound, as before any
 * frt_rollout_set_prompt, which binds it again). */
FRT_API int frt_rollout_tick(frt_rollout *r, const frt_policy_inputs *obs, float *actions, size_t cap,
                             frt_rollout_tick_out *out);

/* Asks the running episode to stop before its next chunk (the client's
 * stop message). Any thread. Errors: FRT_ERR_INVALID_ARGUMENT (NULL). */
FRT_API int frt_rollout_request_stop(frt_rollout *r);

/* RECORD then RESET: when record_dir is set, writes
 * record_dir/episode_NNN.npz of the episode so far (also of one not
 * stopped yet: stop reason "client" when a stop request is pending, else
 * "none"; an episode of 0 chunks writes empty
 * arrays), restores the initial capsule and clears the stop request and the
 * episode record. path (may be NULL) receives the file's path (malloc'd,
 * free()) or NULL without recording; reset_ms (may be NULL) the restore's
 * wall time. Errors: FRT_ERR_INVALID_ARGUMENT (NULL r); FRT_ERR_IO (the file
 * could not be written: the episode is kept, nothing reset); those of
 * frt_capsule_restore. */
FRT_API int frt_rollout_end(frt_rollout *r, char **path, double *reset_ms);

/* Starts the following episodes from noise seed `seed` instead: the
 * episode stream of seed (frt_policy_episode_start) and a new
 * episode-initial capsule snapshot (a copy, no capture). Only between
 * episodes (no chunk run since create / frt_rollout_end). Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL); FRT_ERR_STATE (the episode has run a
 * chunk or is stopped: nothing changed); those of frt_capsule_snapshot
 * (the old seed and capsule kept, the live state restored from it). */
FRT_API int frt_rollout_reseed(frt_rollout *r, uint64_t seed);

/* The seed episodes start from (params.seed or the last reseed); 0 for NULL. */
FRT_API uint64_t frt_rollout_seed(const frt_rollout *r);

typedef struct frt_rollout_status {
    int episode;            /* index of the current episode (0 first) */
    int chunks;             /* chunks run in it */
    frt_stop_reason stop;   /* FRT_STOP_NONE while running */
    int planner_runs;       /* planner runs in this episode */
    uint64_t captures;      /* frt_context_capture_count of the policy's context */
    uint64_t handoff_host_writes;   /* since creation: frt_buffer_write calls of ids into the hand-off buffer
                                       (one per frt_rollout_set_prompt; the planner makes none) */
    uint64_t handoff_device_copies; /* since creation: planner ids copied device to device into it (one per
                                       subtask token) */
} frt_rollout_status;

/* Fills *out. Errors: FRT_ERR_INVALID_ARGUMENT (NULL). */
FRT_API int frt_rollout_status_get(const frt_rollout *r, frt_rollout_status *out);

/* ---- planner -> actor hand-off ----------------------------------------------
 * The hand-off buffer IS the policy's input_ids port buffer
 * (frt_policy_port_buffer(policy, "input_ids")): whoever writes a subtask
 * writes it there, and the next tick (obs->input_ids NULL) recomputes the
 * prefix from it with no recapture and no further copy. */

/* The interrupt (a new instruction from the client), also the way to bind
 * the first prompt: writes ids [n] i32 (actor vocabulary) into the hand-off
 * buffer and n ones into the attention_mask port; the next tick uses it.
 * With a planner attached, ids also become the planner's instruction and
 * its next run is due `every` ticks after this call.
 * Errors (nothing written): FRT_ERR_INVALID_ARGUMENT (NULL, n outside
 * [1, max_tokens], an id outside the policy's vocabulary, or, with a
 * planner, outside the planner's). */
FRT_API int frt_rollout_set_prompt(frt_rollout *r, const int32_t *ids, int n);

typedef struct frt_planner_params {
    frt_model *llm;        /* a token model (an frt LLM) sharing the actor's tokenizer ids; owned by the
                              caller, outlives the host */
    int every;             /* k >= 1: the planner runs on ticks 0, k, 2k, ... of the episode */
    int subtask_tokens;    /* tokens a subtask has, in [1, max_tokens of the policy] */
} frt_planner_params;

/* Attaches (or, with p->llm NULL, detaches) the planner. Each run: reset
 * the LLM, prefill the instruction (the last frt_rollout_set_prompt ids),
 * subtask_tokens greedy sampling steps (end-of-sequence ids ignored), each
 * sampled id copied on the shared stream from the LLM's device-side
 * sampled token (frt_model_sampled_token) into its slot of the hand-off
 * buffer (the actor's input_ids port): no host write of the ids; then n
 * ones in attention_mask. Needs a bound prompt first (the instruction).
 * When the LLM's vocabulary is larger than the policy's, its sampling is
 * restricted to the policy's ids [0, vocab_size) with
 * frt_model_set_token_mask (replacing any mask the caller had set), so
 * every subtask id is an actor id.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL r / p, every < 1, subtask_tokens
 * outside [1, max_tokens], a policy as llm, an llm in another context than
 * the policy's: load it with frt_model_params.context); those of
 * frt_model_set_token_mask. */
FRT_API int frt_rollout_set_planner(frt_rollout *r, const frt_planner_params *p);

/* Copies the ids the hand-off buffer holds now (its first n, the length of
 * the last write) into ids[0 .. cap) and *n: what the actor's next tick
 * reads. Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_STATE (no prompt
 * bound yet), FRT_ERR_OUT_OF_RANGE (cap < n). */
FRT_API int frt_rollout_prompt_get(frt_rollout *r, int32_t *ids, int cap, int *n);

/* ---- test and benchmark helpers ---------------------------------------------- */

/* Writes a random critic in the layout of frt_critic_load to path:
 * n_layers >= 1 layers state_dim + width -> hidden -> ... -> 1, weights
 * uniform in +-1/sqrt(in), biases in +-0.1, F32, drawn from splitmix64 of
 * seed (the same file for the same arguments).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL path, a size < 1, n_layers
 * outside [1, 16]); FRT_ERR_IO; FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_critic_write_random(const char *path, int state_dim, int width, int hidden, int n_layers,
                                    uint64_t seed);

/* A deterministic fake robot: a scripted observation stream for a policy.
 * Observation t (t >= 0) of seed: n_cameras cameras (all present) whose
 * pixels are uniform in [-1, 1], and (Pi0) a state of max_state_dim values
 * uniform in [-1, 1], all drawn from splitmix64 of (seed, t): the same
 * (seed, t) gives the same bytes. The prompt is not part of it (input_ids
 * NULL: the rollout's hand-off buffer). */
typedef struct frt_fake_robot frt_fake_robot;

/* Errors: FRT_ERR_INVALID_ARGUMENT (NULL, n_cameras outside [1,
 * max_cameras]); FRT_ERR_UNSUPPORTED (not a policy);
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_fake_robot_create(const frt_model *policy, uint64_t seed, int n_cameras, frt_fake_robot **out);

/* Fills *obs with observation t; its arrays belong to the robot and hold
 * until the next call. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, t < 0). */
FRT_API int frt_fake_robot_observe(frt_fake_robot *f, int64_t t, frt_policy_inputs *obs);

/* NULL is a no-op. */
FRT_API void frt_fake_robot_free(frt_fake_robot *f);

#ifdef __cplusplus
}
#endif
#endif /* FRT_ROLLOUT_H */
