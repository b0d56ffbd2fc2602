/*
 * rollout.c - the rollout host of frt/rollout.h: the episode state machine
 * (RESET by capsule restore, RUNNING one policy replay per chunk with the
 * critic as one exec plan, STOPPED by a predicate, RECORD to .npz) and the
 * planner -> actor hand-off through the policy's input_ids port.
 */
#include "frt/capsule.h"
#include "frt/rollout.h"
#include "robot/robot_internal.h"

#include "util/error.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define BAD(...) frt_error(FRT_ERR_INVALID_ARGUMENT, "rollout: " __VA_ARGS__)

struct frt_rollout {
    frt_model *policy;
    frt_critic *critic;
    frt_rollout_params p;
    char *record_dir;
    frt_policy_info pi;
    frt_capsule *initial;     /* the episode-initial capsule */
    frt_plan *plan;           /* policy (node 0, default stream) -> critic (node 1, critic stream) */
    frt_shape_key plan_key;   /* the policy key the plan was built for */
    int episode, chunks, started;
    double t0;                /* monotonic seconds of the episode's first tick */
    double reset_ms;          /* the restore before the current episode */
    frt_stop_reason stop;
    atomic_int stop_req;
    int n_prompt;             /* tokens in the hand-off buffer (0: none bound) */
    int32_t *instruction;     /* [max_tokens] the last frt_rollout_set_prompt ids (the planner's input) */
    int n_instruction;
    frt_planner_params planner;
    int planner_base;         /* the chunk count at which the planner's cycle started */
    int planner_skip;         /* 1: the cycle started with an interrupt, whose tick keeps its ids */
    int planner_runs;
    uint64_t host_writes;     /* host writes of ids into the hand-off buffer (frt_rollout_set_prompt) */
    uint64_t device_copies;   /* planner ids copied into it on the stream, device to device */
    frt_episode_record rec;
};

const char *frt_stop_reason_str(frt_stop_reason r)
{
    switch (r) {
    case FRT_STOP_NONE: return "none";
    case FRT_STOP_CLIENT: return "client";
    case FRT_STOP_VALUE: return "value";
    case FRT_STOP_MAX_CHUNKS: return "max_chunks";
    case FRT_STOP_TIMEOUT: return "timeout";
    }
    return "?";
}

frt_rollout_params frt_rollout_default_params(void)
{
    frt_rollout_params p;
    memset(&p, 0, sizeof p);
    p.max_chunks = 100;
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int check_params(const frt_rollout_params *p, const frt_critic *critic, const frt_model *policy)
{
    if (p->max_chunks < 1) return BAD("max_chunks = %d (>= 1)", p->max_chunks);
    if (!(p->timeout_s >= 0)) return BAD("timeout_s = %g (>= 0; 0 = none)", p->timeout_s);
    if (p->value_stop != 0 && p->value_stop != 1) return BAD("value_stop = %d (0 or 1)", p->value_stop);
    if (p->value_stop && !critic) return BAD("value_stop needs a critic");
    if (isnan(p->value_threshold)) return BAD("value_threshold is NaN");
    if (!p->value_stop && p->value_threshold != 0)
        return BAD("value_threshold = %g without value_stop (it would be ignored: set value_stop 1, or leave it 0)",
                   (double)p->value_threshold);
    if (p->serial != 0 && p->serial != 1) return BAD("serial = %d (0 or 1)", p->serial);
    if (p->serial && !critic)
        return BAD("serial = 1 without a critic (it orders the policy and the critic: with the policy alone there is "
                   "nothing to order)");
    if (critic && frt_critic_policy(critic) != policy) return BAD("the critic was loaded for another policy");
    return 0;
}

/* The plan policy -> critic for the policy's current key (rebuilt when
 * the key changed, e.g. after frt_policy_set_cfg). */
static int ensure_plan(frt_rollout *r)
{
    frt_graph *gp, *gc;
    frt_shape_key kp, kc;
    frt_stream *sc;
    FRT_TRY(frt_policy_graph(r->policy, &gp, &kp));
    if (r->plan && r->plan_key == kp) return 0;
    FRT_TRY(frt_critic_graph(r->critic, &gc, &kc, &sc));
    frt_plan_destroy(r->plan);
    r->plan = NULL;
    frt_context *ctx = frt_model_context(r->policy);
    FRT_TRY(frt_plan_create(ctx, &r->plan));
    int policy_node;
    FRT_TRY(frt_plan_add(r->plan, gp, kp, frt_context_stream(ctx), NULL, 0, &policy_node));
    FRT_TRY(frt_plan_add(r->plan, gc, kc, sc, &policy_node, 1, NULL)); /* reads vision_tokens */
    r->plan_key = kp;
    return 0;
}

static int rollout_init(frt_rollout *r, frt_model *policy, frt_critic *critic, const frt_rollout_params *p)
{
    r->policy = policy;
    r->critic = critic;
    r->p = *p;
    if (p->record_dir && !(r->record_dir = strdup(p->record_dir)))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: out of memory");
    r->p.record_dir = r->record_dir;
    FRT_TRY(frt_policy_info_get(policy, &r->pi));
    if (!(r->instruction = calloc((size_t)r->pi.max_tokens, sizeof *r->instruction)))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: out of memory");
    r->rec.chunk = r->pi.chunk;
    r->rec.action_dim = r->pi.action_dim;
    r->rec.chunk_floats = r->pi.chunk * r->pi.action_dim;
    FRT_TRY(frt_policy_episode_start(policy, p->seed));
    FRT_TRY(frt_capsule_snapshot(policy, FRT_TIER_DEVICE, NULL, NULL, 0, &r->initial));
    if (critic && !p->serial) FRT_TRY(ensure_plan(r));
    return 0;
}

int frt_rollout_create(frt_model *policy, frt_critic *critic, const frt_rollout_params *params, frt_rollout **out)
{
    if (!policy || !params || !out) return BAD("NULL argument");
    *out = NULL;
    if (!frt_model_is_policy(policy)) return frt_error(FRT_ERR_UNSUPPORTED, "rollout: the model is not a policy");
    FRT_TRY(check_params(params, critic, policy));
    frt_rollout *r = calloc(1, sizeof *r);
    if (!r) return frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: out of memory");
    atomic_init(&r->stop_req, 0);
    int rc = rollout_init(r, policy, critic, params);
    if (rc < 0) {
        frt_rollout_destroy(r);
        return rc;
    }
    *out = r;
    return 0;
}

void frt_rollout_destroy(frt_rollout *r)
{
    if (!r) return;
    frt_plan_destroy(r->plan);
    frt_capsule_free(r->initial);
    frt_episode_free(&r->rec);
    free(r->instruction);
    free(r->record_dir);
    free(r);
}

int frt_rollout_request_stop(frt_rollout *r)
{
    if (!r) return BAD("NULL argument");
    atomic_store(&r->stop_req, 1);
    return 0;
}

/* The predicates that need no chunk: a stop request, the timeout,
 * max_chunks. */
static frt_stop_reason stop_before(const frt_rollout *r)
{
    if (atomic_load(&((frt_rollout *)r)->stop_req)) return FRT_STOP_CLIENT;
    if (r->chunks >= r->p.max_chunks) return FRT_STOP_MAX_CHUNKS;
    if (r->started && r->p.timeout_s > 0 && now_s() - r->t0 >= r->p.timeout_s) return FRT_STOP_TIMEOUT;
    return FRT_STOP_NONE;
}

/* After a chunk: the value first (it belongs to this chunk), then the rest. */
static frt_stop_reason stop_after(const frt_rollout *r, float value)
{
    if (r->p.value_stop && value < r->p.value_threshold) return FRT_STOP_VALUE;
    return stop_before(r);
}

/* ---- the hand-off ---------------------------------------------------------- */

static int check_ids(const frt_rollout *r, const int32_t *ids, int n)
{
    if (!ids) return BAD("NULL ids");
    if (n < 1 || n > r->pi.max_tokens) return BAD("prompt of %d tokens (1 to %d)", n, r->pi.max_tokens);
    frt_model_info li;
    int lv = r->planner.llm && frt_model_info_get(r->planner.llm, &li) == 0 ? li.vocab_size : r->pi.vocab_size;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= r->pi.vocab_size)
            return BAD("id %d at %d is outside the policy's vocabulary [0, %d)", ids[i], i, r->pi.vocab_size);
        if (ids[i] >= lv) return BAD("id %d at %d is outside the planner's vocabulary [0, %d)", ids[i], i, lv);
    }
    return 0;
}

/* The hand-off buffer (the policy's input_ids port) and its
 * attention_mask port. */
static int handoff_ports(frt_rollout *r, frt_buffer **ids, frt_buffer **mask)
{
    *ids = frt_policy_port_buffer(r->policy, "input_ids");
    *mask = frt_policy_port_buffer(r->policy, "attention_mask");
    if (!*ids || !*mask) return frt_error(FRT_ERR_UNSUPPORTED, "rollout: the policy has no input_ids / attention_mask port");
    return 0;
}

/* n ones into the attention_mask port after ids [n] were enqueued into the
 * hand-off buffer on s; waits for both. */
static int handoff_finish(frt_rollout *r, frt_buffer *mask, int n, frt_stream *s)
{
    FRT_TRY(frt_buffer_fill(mask, 0, (size_t)n, 1, s));
    FRT_TRY(frt_stream_sync(s));
    r->n_prompt = n;
    return 0;
}

/* Writes host ids [n] into the hand-off buffer (the interrupt). */
static int handoff_write(frt_rollout *r, const int32_t *ids, int n)
{
    frt_stream *s = frt_context_stream(frt_model_context(r->policy));
    frt_buffer *b, *am;
    FRT_TRY(handoff_ports(r, &b, &am));
    FRT_TRY(frt_buffer_write(b, 0, ids, (size_t)n * sizeof *ids, s));
    r->host_writes++;
    return handoff_finish(r, am, n, s);
}

int frt_rollout_set_prompt(frt_rollout *r, const int32_t *ids, int n)
{
    if (!r) return BAD("NULL argument");
    FRT_TRY(check_ids(r, ids, n));
    FRT_TRY(handoff_write(r, ids, n));
    memcpy(r->instruction, ids, (size_t)n * sizeof *ids);
    r->n_instruction = n;
    /* Mid-episode (an interrupt) the next tick runs on these ids and the
     * planner's cycle restarts from here; before the first tick the planner
     * turns the instruction into the first subtask at tick 0. */
    r->planner_base = r->started ? r->chunks : 0;
    r->planner_skip = r->started;
    return 0;
}

/* A planner whose vocabulary is larger than the actor's samples only the
 * actor's ids [0, actor_vocab) (its token mask). */
static int mask_to_actor(frt_model *llm, int actor_vocab)
{
    frt_model_info li;
    FRT_TRY(frt_model_info_get(llm, &li));
    if (li.vocab_size <= actor_vocab) return 0;
    const int64_t words = (li.vocab_size + 31) / 32;
    uint32_t *bits = calloc((size_t)words, sizeof *bits);
    if (!bits) return frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: out of memory");
    for (int i = 0; i < actor_vocab; i++) bits[i / 32] |= 1u << (i % 32);
    int rc = frt_model_set_token_mask(llm, bits, words);
    free(bits);
    return rc;
}

int frt_rollout_set_planner(frt_rollout *r, const frt_planner_params *p)
{
    if (!r || !p) return BAD("NULL argument");
    if (!p->llm) {
        memset(&r->planner, 0, sizeof r->planner);
        return 0;
    }
    if (frt_model_is_policy(p->llm)) return BAD("the planner must be a token model, not a policy");
    if (frt_model_context(p->llm) != frt_model_context(r->policy))
        return BAD("the planner must run in the policy's context (frt_model_params.context): its sampled ids are "
                   "copied into the actor's port on the device");
    if (p->every < 1) return BAD("planner every = %d (>= 1)", p->every);
    if (p->subtask_tokens < 1 || p->subtask_tokens > r->pi.max_tokens)
        return BAD("planner subtask_tokens = %d (1 to %d)", p->subtask_tokens, r->pi.max_tokens);
    FRT_TRY(mask_to_actor(p->llm, r->pi.vocab_size));
    r->planner = *p;
    return 0;
}

int frt_rollout_prompt_get(frt_rollout *r, int32_t *ids, int cap, int *n)
{
    if (!r || !ids || !n) return BAD("NULL argument");
    if (!r->n_prompt) return frt_error(FRT_ERR_STATE, "rollout: no prompt bound yet (frt_rollout_set_prompt)");
    if (cap < r->n_prompt) return frt_error(FRT_ERR_OUT_OF_RANGE, "rollout: room for %d ids, %d bound", cap, r->n_prompt);
    frt_stream *s = frt_context_stream(frt_model_context(r->policy));
    FRT_TRY(frt_buffer_read(frt_policy_port_buffer(r->policy, "input_ids"), 0, ids, (size_t)r->n_prompt * sizeof *ids,
                            s));
    FRT_TRY(frt_stream_sync(s));
    *n = r->n_prompt;
    return 0;
}

/* One planner run: reset, prefill the instruction, then subtask_tokens
 * greedy steps; after each, the sampled id is copied on the stream from the
 * LLM's boundary record (frt_model_sampled_token) into port[i] of the
 * hand-off buffer: device to device, no host write of the ids (the ids the
 * steps return to the host are not used). The LLM shares the policy's
 * context, so its stream is the policy's. */
static int planner_run(frt_rollout *r)
{
    if (!r->n_instruction) return BAD("the planner needs an instruction (frt_rollout_set_prompt) first");
    frt_model *llm = r->planner.llm;
    frt_stream *s = frt_context_stream(frt_model_context(r->policy));
    frt_buffer *port, *am, *tok;
    size_t off;
    int32_t id;
    FRT_TRY(handoff_ports(r, &port, &am));
    FRT_TRY(frt_model_sampled_token(llm, &tok, &off));
    FRT_TRY(frt_model_reset(llm));
    FRT_TRY(frt_model_prefill(llm, r->instruction, r->n_instruction));
    for (int i = 0; i < r->planner.subtask_tokens; i++) {
        int rc = i ? frt_model_decode(llm, NULL, &id) : frt_model_sample(llm, NULL, &id); /* greedy */
        if (rc == 0) rc = frt_buffer_copy(port, (size_t)i * sizeof(int32_t), tok, off, sizeof(int32_t), s);
        if (rc < 0) {
            r->n_prompt = 0; /* the port may hold a part of this subtask: unbound until set_prompt */
            return rc;
        }
        r->device_copies++;
    }
    FRT_TRY(handoff_finish(r, am, r->planner.subtask_tokens, s));
    r->planner_runs++;
    return 0;
}

static int planner_due(const frt_rollout *r)
{
    if (!r->planner.llm || r->chunks < r->planner_base) return 0;
    if (r->planner_skip && r->chunks == r->planner_base) return 0;
    return (r->chunks - r->planner_base) % r->planner.every == 0;
}

/* ---- one tick ---------------------------------------------------------------- */

/* The policy (and the critic) replay once: as the plan, or one after the
 * other on the policy's stream. */
static int replay(frt_rollout *r)
{
    frt_context *ctx = frt_model_context(r->policy);
    frt_stream *s = frt_context_stream(ctx);
    if (r->critic && !r->p.serial) {
        FRT_TRY(ensure_plan(r));
        FRT_TRY(frt_plan_execute(r->plan));
        return frt_plan_sync(r->plan);
    }
    frt_graph *g;
    frt_shape_key k;
    FRT_TRY(frt_policy_graph(r->policy, &g, &k));
    FRT_TRY(frt_graph_replay(g, k, s));
    if (r->critic) {
        frt_graph *gc;
        frt_shape_key kc;
        frt_stream *sc;
        FRT_TRY(frt_critic_graph(r->critic, &gc, &kc, &sc));
        FRT_TRY(frt_graph_replay(gc, kc, s));
    }
    return frt_stream_sync(s);
}

/* Stages obs (its prompt, or the hand-off buffer's) and the critic's state. */
static int stage(frt_rollout *r, const frt_policy_inputs *obs, uint64_t *prompt_digest)
{
    frt_policy_inputs in = *obs;
    if (!obs->input_ids) {
        if (!r->n_prompt) return BAD("no prompt in the hand-off buffer (frt_rollout_set_prompt) and none given");
        if (obs->n_tokens && obs->n_tokens != r->n_prompt)
            return BAD("n_tokens = %d with input_ids NULL: the hand-off buffer holds %d ids (leave n_tokens 0)",
                       obs->n_tokens, r->n_prompt);
        in.n_tokens = r->n_prompt;
    }
    if (r->critic) {
        frt_critic_info ci;
        FRT_TRY(frt_critic_info_get(r->critic, &ci));
        if (obs->n_state > ci.state_dim) return BAD("state of %d values (the critic takes %d)", obs->n_state, ci.state_dim);
    }
    FRT_TRY(frt_policy_stage(r->policy, &in));
    if (r->critic) FRT_TRY(frt_critic_set_state(r->critic, obs->state, obs->state ? obs->n_state : 0));
    if (obs->input_ids) {
        *prompt_digest = XXH64(obs->input_ids, (size_t)obs->n_tokens * sizeof(int32_t), 0);
        return 0;
    }
    int32_t *ids = malloc((size_t)r->n_prompt * sizeof *ids);
    int n = 0;
    int rc = ids ? frt_rollout_prompt_get(r, ids, r->n_prompt, &n) : frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: oom");
    if (rc == 0) *prompt_digest = XXH64(ids, (size_t)n * sizeof *ids, 0);
    free(ids);
    return rc;
}

static int run_chunk(frt_rollout *r, const frt_policy_inputs *obs, float *actions, size_t cap, float *value)
{
    uint64_t pd = 0;
    const double t = now_s();
    if (!r->started) {
        r->started = 1;
        r->t0 = t;
    }
    if (planner_due(r)) FRT_TRY(planner_run(r));
    FRT_TRY(stage(r, obs, &pd));
    FRT_TRY(replay(r));
    FRT_TRY(frt_policy_finish(r->policy, actions, cap));
    *value = NAN;
    if (r->critic) FRT_TRY(frt_critic_value(r->critic, value));
    const double ms = 1e3 * (now_s() - t);
    /* the record is kept only to be written: without a record_dir a long episode holds no memory */
    if (r->record_dir) FRT_TRY(frt_episode_append(&r->rec, actions, *value, frt_obs_digest(obs), pd, ms));
    r->chunks++;
    return 0;
}

int frt_rollout_tick(frt_rollout *r, const frt_policy_inputs *obs, float *actions, size_t cap,
                     frt_rollout_tick_out *out)
{
    if (!r || !obs || !actions || !out) return BAD("NULL argument");
    memset(out, 0, sizeof *out);
    out->value = NAN;
    if (r->stop) return frt_error(FRT_ERR_STATE, "rollout: the episode stopped (%s): call frt_rollout_end",
                                  frt_stop_reason_str(r->stop));
    if (cap < (size_t)r->rec.chunk_floats) return BAD("room for %zu action values, the chunk has %d", cap, r->rec.chunk_floats);
    if ((r->stop = stop_before(r)) != FRT_STOP_NONE) {
        out->stop = r->stop;
        return 0;
    }
    const double t = now_s();
    FRT_TRY(run_chunk(r, obs, actions, cap, &out->value));
    out->ran = 1;
    out->ms = 1e3 * (now_s() - t);
    out->stop = r->stop = stop_after(r, out->value);
    return 0;
}

static int record(frt_rollout *r, char **path)
{
    if (path) *path = NULL;
    if (!r->record_dir) return 0;
    size_t n = strlen(r->record_dir) + 32;
    char *file = malloc(n);
    if (!file) return frt_error(FRT_ERR_OUT_OF_MEMORY, "rollout: out of memory");
    snprintf(file, n, "%s/episode_%03d.npz", r->record_dir, r->episode);
    /* an episode ended while a stop request was pending was stopped by the client */
    const frt_stop_reason why = r->stop != FRT_STOP_NONE ? r->stop
                                : atomic_load(&r->stop_req) ? FRT_STOP_CLIENT : FRT_STOP_NONE;
    frt_episode_meta meta = {r->episode, r->p.seed, why, r->reset_ms};
    int rc = frt_episode_write(&r->rec, &meta, file);
    if (rc == 0 && path) *path = file;
    else free(file);
    return rc;
}

int frt_rollout_end(frt_rollout *r, char **path, double *reset_ms)
{
    if (path) *path = NULL;
    if (!r) return BAD("NULL argument");
    char *file = NULL;
    FRT_TRY(record(r, &file));
    const double t = now_s();
    int rc = frt_capsule_restore(r->policy, r->initial);
    if (rc < 0) {
        free(file);
        return rc;
    }
    r->reset_ms = 1e3 * (now_s() - t);
    if (reset_ms) *reset_ms = r->reset_ms;
    if (path) *path = file;
    else free(file);
    r->episode++;
    r->chunks = r->started = r->planner_runs = r->planner_base = r->planner_skip = 0;
    r->stop = FRT_STOP_NONE;
    atomic_store(&r->stop_req, 0);
    frt_episode_clear(&r->rec);
    return 0;
}

int frt_rollout_status_get(const frt_rollout *r, frt_rollout_status *out)
{
    if (!r || !out) return BAD("NULL argument");
    out->episode = r->episode;
    out->chunks = r->chunks;
    out->stop = r->stop;
    out->planner_runs = r->planner_runs;
    out->handoff_host_writes = r->host_writes;
    out->handoff_device_copies = r->device_copies;
    out->captures = frt_context_capture_count(frt_model_context(r->policy));
    return 0;
}

int frt_rollout_reseed(frt_rollout *r, uint64_t seed)
{
    if (!r) return BAD("NULL argument");
    if (r->chunks || r->stop != FRT_STOP_NONE)
        return frt_error(FRT_ERR_STATE, "rollout: a new seed needs a fresh episode (frt_rollout_end first)");
    frt_capsule *c = NULL;
    FRT_TRY(frt_policy_episode_start(r->policy, seed));
    int rc = frt_capsule_snapshot(r->policy, FRT_TIER_DEVICE, NULL, NULL, 0, &c);
    if (rc < 0) {
        frt_capsule_restore(r->policy, r->initial); /* the live state back to the old episode start */
        return rc;
    }
    frt_capsule_free(r->initial);
    r->initial = c;
    r->p.seed = seed;
    return 0;
}

uint64_t frt_rollout_seed(const frt_rollout *r) { return r ? r->p.seed : 0; }
