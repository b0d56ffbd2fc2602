/*
 * policy_service.h - one Pi0 / Pi0.5 policy behind the policy server
 * (docs/policy-server.md): a robot observation in, the robot's action chunk
 * out, through openpi's transforms (policy_robot.h) and the policy's input
 * side (frt/policy_io.h); the control messages (episode start / end); the
 * metadata the server sends on connect; the replies encoded as msgpack
 * (openpi's msgpack_numpy) or JSON. One inference at a time (a mutex): the
 * websocket and the JSON endpoint share the model.
 */
#ifndef FRT_SERVING_POLICY_SERVICE_H
#define FRT_SERVING_POLICY_SERVICE_H

#include "serving/policy_obs.h"
#include "serving/policy_robot.h"

#include "frt/model.h"

#include <stddef.h>

typedef struct frt_policy_service frt_policy_service;

typedef struct frt_policy_service_params {
    const char *dir;            /* the checkpoint (for the defaults below) */
    const char *robot;          /* "libero" | "droid" | "aloha"; NULL: from DIR/assets/<asset>/ */
    const char *tokenizer;      /* NULL: DIR/tokenizer.model */
    const char *norm_stats;     /* NULL: DIR/norm_stats.json, else DIR/assets/<asset>/norm_stats.json, else none */
    const char *default_prompt; /* NULL: a request must carry a prompt */
    int delta_actions;          /* -1 auto (openpi's configs), 0 off, 1 on */
    int discrete_state;         /* Pi0.5: the state in the prompt (openpi's discrete_state_input); -1 auto (on but
                                   for LIBERO, as pi05_libero), 0 off (the Pi0 prompt; the state is not used),
                                   1 on; Pi0 takes only off / auto */
    /* the rollout host every inference is a tick of (frt/rollout.h, docs/robot.md); zero = off */
    const char *critic;         /* the value critic (.safetensors); NULL: none (no values in the replies) */
    int value_stop;             /* 1: stop the episode when a value < value_threshold (needs critic) */
    float value_threshold;
    int max_chunks;             /* > 0: stop after this many chunks; 0: no limit */
    double episode_timeout_s;   /* > 0: stop this many seconds after the episode's first tick; 0: none */
    const char *record_dir;     /* NULL: no recording; else DIR/episode_NNN.npz at each episode's end */
    /* classifier-free guidance (frt_policy_set_cfg; RECAP) from the start */
    int cfg;                    /* 1: on with cfg_beta and advantage_positive */
    float cfg_beta;             /* >= 1 */
    int advantage_positive;     /* 1: "Advantage: positive" in the conditioned prompt, 0: negative */
    /* the model's context shared with an LLM served from another thread (serving/policy_share.h) */
    struct frt_turn_lock *device_lock; /* NULL: none; else held (borrowed, outlives the service) around each
                                          tick of the rollout host and each control message */
} frt_policy_service_params;

/* Opens the service over M (a loaded policy; borrowed, must outlive the
 * service) and its rollout host (a critic loaded from p->critic, the stop
 * predicates, the recording, CFG). Checks what can be checked before a
 * request: the robot (named or found), the tokenizer, the statistics, 224 x
 * 224 cameras, the model's action dimension against the robot's DoF and the
 * delta mask, the discrete-state setting (on with Pi0: FRT_ERR_UNSUPPORTED),
 * the critic file (frt_critic_load's errors), the host's parameters
 * (value_stop without a critic, a NaN threshold, max_chunks or the timeout
 * negative: FRT_ERR_INVALID_ARGUMENT), CFG (beta < 1:
 * FRT_ERR_INVALID_ARGUMENT). *note (may be NULL) gets a line for the log when there are no
 * statistics (static storage). *out on success only (frt_policy_service_free).
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_UNSUPPORTED (not a policy),
 * FRT_ERR_NOT_FOUND (no robot found, no tokenizer), and those of
 * frt_policy_tokenizer_load / frt_policy_norm_stats_load. */
int frt_policy_service_create(frt_model *m, const frt_policy_service_params *p, const char **note,
                              frt_policy_service **out);

/* Frees (not the model); NULL is a no-op. */
void frt_policy_service_free(frt_policy_service *s);

/* The robot's action chunk [chunk, dof] f32 (robot units) of one request,
 * with the model's time and the whole time in milliseconds, the critic's
 * value and the episode's stop. */
typedef struct frt_policy_reply {
    float *actions; /* malloc'd [chunk * dof]; NULL when no chunk ran (the episode had stopped) */
    int chunk, dof;
    double infer_ms; /* the host's tick (staging, policy + critic replays, read-back) */
    double total_ms; /* transforms + inference */
    int has_value;   /* a critic is loaded: value is this chunk's */
    float value;
    const char *stopped; /* NULL while the episode runs; else the stop reason (frt_stop_reason_str): this
                            tick stopped it, or (actions NULL) it had stopped before */
} frt_policy_reply;

/* One tick of the rollout host on observation O. A stopped episode runs
 * nothing: the reply has no actions and says why (stopped). Errors (the
 * model and the service as they were): FRT_ERR_INVALID_ARGUMENT (a bad
 * observation: the message names the key), the model's refusals,
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_policy_service_infer(frt_policy_service *s, const frt_pobs *o, frt_policy_reply *r);

/* 1 when O is a control message (it has "__ctrl__"). */
int frt_policy_service_is_ctrl(const frt_pobs *o);

/* What a control message did. */
typedef struct frt_policy_ctrl_reply {
    const char *name;        /* "episode_start" | "episode_end" | "cfg" (static storage) */
    uint64_t seed;           /* the episodes' noise seed */
    uint64_t steps;          /* episode_end: chunks the ended episode ran */
    const char *stop_reason; /* episode_end: why it ended (frt_stop_reason_str; "client" when running) */
    char *record;            /* episode_end with a record directory: the episode's file (malloc'd) */
    int cfg, advantage_positive; /* cfg: the settings now */
    float beta;
} frt_policy_ctrl_reply;

/* Frees r->record; NULL is a no-op. */
void frt_policy_ctrl_reply_clear(frt_policy_ctrl_reply *r);

/* Runs a control message (docs/policy-server.md):
 *   "episode_start" [seed]: ends a begun episode (RECORD), RESETs (capsule
 *     restore) and, for another seed, makes that seed's initial capsule;
 *   "episode_end": STOP (reason client unless a predicate stopped it),
 *     RECORD, RESET;
 *   "cfg" beta [advantage]: guidance on (beta >= 1) or off (beta 0), from
 *     the next tick.
 * Errors (nothing changed): FRT_ERR_INVALID_ARGUMENT (another name, a bad
 * seed / beta / advantage, another key); FRT_ERR_IO (the record could not
 * be written: the episode is kept); the model's. */
int frt_policy_service_ctrl(frt_policy_service *s, const frt_pobs *o, frt_policy_ctrl_reply *r);

/* The metadata map sent on connect, msgpack-encoded into a malloc'd
 * buffer. NULL when memory ran out. */
char *frt_policy_service_metadata(const frt_policy_service *s, size_t *len);

/* The reply of an inference as msgpack ({"actions": ndarray <f4,
 * "values": ndarray <f4 [1] (with a critic), "episode_stopped": reason
 * (when stopped), "policy_timing": {...}, "server_timing": {...}}; no
 * actions when none ran) or JSON (arrays as {"dtype", "shape", "data"
 * base64}). PREV_TOTAL_MS < 0: not included. malloc'd; NULL when memory
 * ran out. */
char *frt_policy_reply_msgpack(const frt_policy_reply *r, double server_ms, double prev_total_ms, size_t *len);
char *frt_policy_reply_json(const frt_policy_reply *r, double server_ms, size_t *len);

/* The reply of a control message, msgpack or JSON. */
char *frt_policy_ctrl_msgpack(const frt_policy_ctrl_reply *r, size_t *len);
char *frt_policy_ctrl_json(const frt_policy_ctrl_reply *r, size_t *len);

/* Parses "auto" / "on" / "off" into -1 / 1 / 0 (--delta-actions,
 * --discrete-state). Errors: FRT_ERR_INVALID_ARGUMENT. */
int frt_policy_delta_parse(const char *s, int *out);

#endif
