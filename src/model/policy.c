/*
 * policy.c - the runtime of the policy kind (frt/policy.h): check one
 * observation against the shapes the architecture reports, write it into
 * the graph's input ports, replay the policy graph, read the action chunk.
 * Nothing here names an architecture; the ports are the policy contract's
 * (model/arch.h, frt_arch.declare_io).
 */
#include "model/model_internal.h"

#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int frt_model_is_policy(const frt_model *m) { return m && m->arch && m->arch->kind == FRT_ARCH_POLICY; }

static int policy_model(const frt_model *m, const char *verb)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "%s: NULL model", verb);
    if (!frt_model_is_policy(m))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: model_type '%s' is not a policy", verb, m->cfg.model_type);
    return 0;
}

int frt_policy_info_get(const frt_model *m, frt_policy_info *out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy"));
    memset(out, 0, sizeof *out);
    m->arch->policy_info(m, out);
    out->batch_slots = m->g_batch ? m->params.policy_batch : 0;
    return 0;
}

int frt_policy_cost_get(const frt_model *m, int cameras, int tokens, frt_policy_cost *out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(m, &pi));
    if (cameras < 1 || cameras > pi.max_cameras || tokens < 1 || tokens > pi.max_tokens)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: %d cameras, %d tokens (1..%d, 1..%d)", cameras, tokens,
                         pi.max_cameras, pi.max_tokens);
    memset(out, 0, sizeof *out);
    m->arch->policy_cost(m, cameras, tokens, out);
    return 0;
}

int frt_policy_graph_nodes(const frt_model *m, const frt_policy_inputs *in, int *nodes)
{
    if (!in || !nodes) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy"));
    if (!m->bk->policy_graph_nodes)
        return frt_error(FRT_ERR_UNSUPPORTED, "policy: the %s backend does not count graph nodes", m->bk->name);
    const int n = m->bk->policy_graph_nodes(m, in, m->policy_cfg.enable);
    if (n < 0) return n;
    *nodes = n;
    return 0;
}

#define BAD(...) frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: " __VA_ARGS__)

static int all_finite(const float *x, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            *at = i;
            return 0;
        }
    return 1;
}

static int check_flags(const uint8_t *x, int n, const char *what, int *n_set)
{
    *n_set = 0;
    for (int i = 0; i < n; i++) {
        if (x && x[i] > 1) return BAD("%s[%d] = %d (0 or 1)", what, i, x[i]);
        *n_set += x ? x[i] : 1;
    }
    return 0;
}

static int check_images(const frt_policy_info *pi, const frt_policy_inputs *in)
{
    if (!in->pixel_values) return BAD("no pixel_values");
    if (in->n_cameras < 1 || in->n_cameras > pi->max_cameras)
        return BAD("%d cameras (the model takes 1 to %d)", in->n_cameras, pi->max_cameras);
    if (in->channels != pi->image_channels)
        return BAD("images have %d channels (the model takes %d)", in->channels, pi->image_channels);
    if (in->height != pi->image_height || in->width != pi->image_width)
        return BAD("images are %d x %d (the model takes %d x %d: resize with padding first)", in->height, in->width,
                   pi->image_height, pi->image_width);
    int present;
    FRT_TRY(check_flags(in->camera_mask, in->n_cameras, "camera_mask", &present));
    if (!present) return BAD("every camera is masked out");
    size_t at, n = (size_t)in->n_cameras * in->channels * in->height * in->width;
    if (!all_finite(in->pixel_values, n, &at)) return BAD("pixel_values[%zu] is not finite", at);
    return 0;
}

/* One prompt's ids and mask; sfx names the ports ("" or "_cond"). */
static int check_ids(const frt_policy_info *pi, const int32_t *ids, const uint8_t *am, int n, const char *sfx)
{
    if (!ids) return BAD("no input_ids%s", sfx);
    if (n < 1) return BAD("empty prompt%s (0 tokens)", sfx);
    if (n > pi->max_tokens) return BAD("%d prompt%s tokens (the model takes at most %d)", n, sfx, pi->max_tokens);
    int valid;
    char what[32];
    snprintf(what, sizeof what, "attention_mask%s", sfx);
    FRT_TRY(check_flags(am, n, what, &valid));
    if (!valid) return BAD("empty prompt%s (no token with %s 1)", sfx, what);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= pi->vocab_size)
            return BAD("input_ids%s[%d] = %d is outside the vocabulary [0, %d)", sfx, i, ids[i], pi->vocab_size);
    return 0;
}

/* The prompt, and under CFG the conditioned prompt (required then, refused
 * otherwise). */
static int check_prompt(const frt_model *m, const frt_policy_info *pi, const frt_policy_inputs *in)
{
    FRT_TRY(check_ids(pi, in->input_ids, in->attention_mask, in->n_tokens, ""));
    if (!m->policy_cfg.enable) {
        if (in->input_ids_cond || in->attention_mask_cond || in->n_tokens_cond)
            return BAD("input_ids_cond given but CFG is off (frt_policy_set_cfg)");
        return 0;
    }
    if (!in->input_ids_cond)
        return BAD("CFG is on: input_ids_cond (the prompt with the advantage indicator, frt_policy_cfg_prompt) "
                   "is required");
    return check_ids(pi, in->input_ids_cond, in->attention_mask_cond, in->n_tokens_cond, "_cond");
}

static int check_state_noise(const frt_policy_info *pi, const frt_policy_inputs *in)
{
    size_t at;
    if (pi->state_in_prompt) {
        if (in->state || in->n_state)
            return BAD("model_type '%s' takes the state in the prompt (discretised), not as an input",
                       pi->model_type);
    } else {
        if (!in->state || in->n_state < 1) return BAD("no state (model_type '%s' needs one)", pi->model_type);
        if (in->n_state > pi->max_state_dim)
            return BAD("state of %d values (max_state_dim is %d)", in->n_state, pi->max_state_dim);
        if (!all_finite(in->state, (size_t)in->n_state, &at)) return BAD("state[%zu] is not finite", at);
    }
    if (in->noise && !all_finite(in->noise, (size_t)pi->chunk * pi->action_dim, &at))
        return BAD("noise[%zu] is not finite", at);
    return 0;
}

/* Where one inference's inputs go: the single ports (row -1), or row `row`
 * of the batch_* ports (frt_policy_run_batch). */
typedef struct port_row {
    const char *prefix; /* "" or "batch_" */
    int row;
} port_row;

static const port_row SINGLE = {"", -1};

/* Every check of frt_policy_run on one observation. */
static int check_inputs(const frt_model *m, const frt_policy_info *pi, const frt_policy_inputs *in)
{
    FRT_TRY(check_images(pi, in));
    FRT_TRY(check_prompt(m, pi, in));
    return check_state_noise(pi, in);
}

/* Writes one input port (its row r of a batch port): n bytes of data, the
 * rest of the port (of the row) zero. */
static int write_port(frt_model *m, port_row r, const char *name, const void *data, size_t n)
{
    char full[FRT_STATE_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", r.prefix, name);
    frt_io_entry *e = frt_model_io_find(m, full, FRT_IO_INPUT);
    if (!e) return frt_error(FRT_ERR_STATE, "policy: the architecture declares no input port '%s'", full);
    const size_t bytes = r.row < 0 ? e->bytes : e->bytes / (size_t)e->decl.shape[0];
    const size_t off = r.row < 0 ? 0 : bytes * (size_t)r.row;
    if (n > bytes) return frt_error(FRT_ERR_STATE, "policy: %zu bytes for port '%s' of %zu", n, full, bytes);
    if (n) FRT_TRY(frt_buffer_write(e->buf, off, data, n, m->stream));
    if (n < bytes) FRT_TRY(frt_buffer_fill(e->buf, off + n, bytes - n, 0, m->stream));
    return 0;
}

/* A 0/1 mask port: the caller's flags, or n ones. */
static int write_mask(frt_model *m, port_row r, const char *name, const uint8_t *flags, int n)
{
    uint8_t *ones = NULL;
    if (!flags) {
        if (!(ones = malloc((size_t)n))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "policy: out of memory");
        memset(ones, 1, (size_t)n);
    }
    int rc = write_port(m, r, name, flags ? flags : ones, (size_t)n);
    if (rc == 0 && ones) rc = frt_stream_sync(m->stream); /* the write reads `ones` when it runs */
    free(ones);
    return rc;
}

/* The `cfg` port's contents from frt_policy_set_cfg's settings (the caller
 * keeps it alive until the stream is synchronised: the write is queued). */
static frt_policy_cfg_options cfg_of(const frt_model *m, int n_tokens_cond)
{
    frt_policy_cfg_options g = {m->policy_cfg.enable, m->policy_cfg.enable ? n_tokens_cond : 0,
                                m->policy_cfg.beta, 0};
    return g;
}

/* The graph variant of the next replay. */
static frt_shape_key policy_key(const frt_model *m)
{
    return m->policy_cfg.enable && m->policy_cfg.fused ? FRT_POLICY_KEY_FUSED : FRT_POLICY_KEY_SERIAL;
}

/* bound 1: the prompt is already in the input_ids / attention_mask ports
 * (frt_policy_stage), and stays there untouched. */
static int write_inputs(frt_model *m, port_row r, const frt_policy_info *pi, const frt_policy_inputs *in, int bound)
{
    size_t px = (size_t)in->n_cameras * in->channels * in->height * in->width;
    FRT_TRY(write_port(m, r, "pixel_values", in->pixel_values, px * sizeof(float)));
    FRT_TRY(write_mask(m, r, "pixel_attention_mask", in->camera_mask, in->n_cameras));
    if (!bound) {
        FRT_TRY(write_port(m, r, "input_ids", in->input_ids, (size_t)in->n_tokens * sizeof(int32_t)));
        FRT_TRY(write_mask(m, r, "attention_mask", in->attention_mask, in->n_tokens));
    }
    if (!pi->state_in_prompt) FRT_TRY(write_port(m, r, "state", in->state, (size_t)in->n_state * sizeof(float)));
    if (in->noise)
        FRT_TRY(write_port(m, r, "noise", in->noise, (size_t)pi->chunk * pi->action_dim * sizeof(float)));
    if (m->policy_cfg.enable) {
        FRT_TRY(write_port(m, r, "input_ids_cond", in->input_ids_cond, (size_t)in->n_tokens_cond * sizeof(int32_t)));
        FRT_TRY(write_mask(m, r, "attention_mask_cond", in->attention_mask_cond, in->n_tokens_cond));
    }
    const frt_policy_cfg_options g = cfg_of(m, in->n_tokens_cond);
    FRT_TRY(write_port(m, r, "cfg", &g, sizeof g));
    frt_policy_options o = {in->n_cameras, in->n_tokens, in->noise != NULL, 0};
    FRT_TRY(write_port(m, r, "options", &o, sizeof o));
    return frt_stream_sync(m->stream);
}

/* The key of graph g (recorded by rec) for an inference on `in` (NULL:
 * denoise-only): the backend's variant (captured on first use), else
 * policy_key. Nothing runs. */
static int variant_key(frt_model *m, frt_graph *g, frt_record_fn rec, const frt_policy_inputs *in,
                       frt_shape_key *key)
{
    *key = policy_key(m);
    if (!m->bk->policy_variant) return 0;
    const int code = m->bk->policy_variant(m, in, m->policy_cfg.enable);
    if (code <= 0) return 0;
    *key = FRT_POLICY_KEY_VARIANT | (frt_shape_key)code;
    if (frt_graph_has(g, *key)) return 0;
    frt_record_ctx rc = {.m = m, .bucket = code};
    return frt_graph_capture(g, *key, m->stream, rec, &rc);
}

/* After a replay has run: a task failure as its status, else n_out floats
 * of the output port `out`. */
static int finish(frt_model *m, const char *out, float *actions, size_t n_out)
{
    int rc = m->task_status;
    m->task_status = 0;
    if (rc == FRT_ERR_STATE)
        return frt_error(rc, "policy: the state holds no prefix (run frt_policy_run or restore a capsule first)");
    if (rc < 0) return frt_error(rc, "policy: the inference failed inside the forward pass (%s)", frt_status_str(rc));
    return frt_model_output_read(m, out, actions, n_out * sizeof(float));
}

/* Replays g at key and reads n_out floats of the output port `out`; a task
 * failure is returned as its status. */
static int replay(frt_model *m, frt_graph *g, frt_shape_key key, const char *out, float *actions, size_t n_out)
{
    FRT_TRY(frt_graph_replay(g, key, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    return finish(m, out, actions, n_out);
}

/* The chunk's length in floats, checked against cap. */
static int chunk_room(const frt_model *m, size_t cap, size_t *n_out)
{
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(m, &pi));
    *n_out = (size_t)pi.chunk * pi.action_dim;
    if (cap < *n_out) return BAD("room for %zu action values, the chunk has %zu", cap, *n_out);
    return 0;
}

/* Reads the first n ids and flags of the bound prompt ports into malloc'd
 * copies (for the checks of frt_policy_run). */
static int read_bound_prompt(frt_model *m, const frt_policy_info *pi, int n, int32_t **ids, uint8_t **am)
{
    if (n < 1 || n > pi->max_tokens)
        return BAD("bound prompt of %d tokens (the model takes 1 to %d)", n, pi->max_tokens);
    *ids = malloc((size_t)n * sizeof **ids);
    *am = malloc((size_t)n);
    if (!*ids || !*am) return frt_error(FRT_ERR_OUT_OF_MEMORY, "policy: out of memory");
    FRT_TRY(frt_buffer_read(frt_model_io_find(m, "input_ids", FRT_IO_INPUT)->buf, 0, *ids, (size_t)n * sizeof **ids,
                            m->stream));
    FRT_TRY(frt_buffer_read(frt_model_io_find(m, "attention_mask", FRT_IO_INPUT)->buf, 0, *am, (size_t)n, m->stream));
    return frt_stream_sync(m->stream);
}

int frt_policy_stage(frt_model *m, const frt_policy_inputs *in)
{
    if (!in) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy stage"));
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(m, &pi));
    const int bound = in->input_ids == NULL;
    if (bound && in->attention_mask) return BAD("attention_mask given without input_ids");
    frt_policy_inputs v = *in;
    int32_t *ids = NULL;
    uint8_t *am = NULL;
    int rc = check_images(&pi, in);
    if (rc == 0 && bound) rc = read_bound_prompt(m, &pi, in->n_tokens, &ids, &am);
    v.input_ids = bound ? ids : in->input_ids;
    v.attention_mask = bound ? am : in->attention_mask;
    if (rc == 0) rc = check_prompt(m, &pi, &v);
    if (rc == 0) rc = check_state_noise(&pi, &v);
    /* the graph variant of this observation (captured on its first use) */
    if (rc == 0) rc = variant_key(m, m->g_policy, m->bk->record_policy, &v, &m->policy_staged_key);
    if (rc == 0) rc = write_inputs(m, SINGLE, &pi, &v, bound);
    free(ids);
    free(am);
    return rc;
}

int frt_policy_graph(frt_model *m, frt_graph **graph, frt_shape_key *key)
{
    if (!graph || !key) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy graph"));
    *graph = m->g_policy;
    *key = m->policy_staged_key ? m->policy_staged_key : policy_key(m);
    return 0;
}

int frt_policy_finish(frt_model *m, float *actions, size_t cap)
{
    if (!actions) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy finish"));
    size_t n_out;
    FRT_TRY(chunk_room(m, cap, &n_out));
    return finish(m, "actions", actions, n_out);
}

frt_buffer *frt_policy_port_buffer(frt_model *m, const char *name)
{
    if (!name || !frt_model_is_policy(m)) return NULL;
    frt_io_entry *e = frt_model_io_find(m, name, FRT_IO_INPUT);
    if (!e) e = frt_model_io_find(m, name, FRT_IO_OUTPUT);
    return e ? e->buf : NULL;
}

int frt_policy_run(frt_model *m, const frt_policy_inputs *in, float *actions, size_t cap)
{
    if (!in || !actions) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy run"));
    if (!in->input_ids) return BAD("no input_ids");
    size_t n_out;
    FRT_TRY(chunk_room(m, cap, &n_out));
    FRT_TRY(frt_policy_stage(m, in));
    return replay(m, m->g_policy, m->policy_staged_key, "actions", actions, n_out);
}

/* The checks of frt_policy_run on in[r], for rollout r of a batch; the
 * message then names the rollout. */
static int check_rollout(const frt_model *m, const frt_policy_info *pi, const frt_policy_inputs *in, int r)
{
    int rc = check_inputs(m, pi, in);
    if (rc == 0) return 0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", frt_last_error());
    return frt_error(rc, "policy batch: rollout %d: %s", r, msg);
}

/* The largest observation of a batch: in[0] with the most cameras and the
 * longest prompts of in[0..n). */
static frt_policy_inputs batch_largest(const frt_policy_inputs *in, int n)
{
    frt_policy_inputs big = in[0];
    for (int r = 1; r < n; r++) {
        if (in[r].n_cameras > big.n_cameras) big.n_cameras = in[r].n_cameras;
        if (in[r].n_tokens > big.n_tokens) big.n_tokens = in[r].n_tokens;
        if (in[r].n_tokens_cond > big.n_tokens_cond) big.n_tokens_cond = in[r].n_tokens_cond;
    }
    return big;
}

/* The key of the batch graph of n rollouts on in[0..n); on a backend with
 * policy_batch_on_use, the CFG setting (and with policy_variant, the
 * variant of the largest observation) is in the key and the graph is
 * captured on its first use (a failed capture changes nothing). */
static int batch_key(frt_model *m, const frt_policy_inputs *in, int n, frt_shape_key *key)
{
    *key = FRT_POLICY_KEY_BATCH | (frt_shape_key)n;
    if (!m->bk->policy_batch_on_use) return 0;
    frt_record_ctx rc = {.m = m, .bucket = n, .variant = 0};
    if (m->policy_cfg.enable) *key |= FRT_POLICY_KEY_BATCH_CFG, rc.bucket |= FRT_POLICY_KEY_BATCH_CFG;
    if (m->bk->policy_variant) {
        const frt_policy_inputs big = batch_largest(in, n);
        rc.variant = m->bk->policy_variant(m, &big, m->policy_cfg.enable);
        *key |= (frt_shape_key)(uint32_t)rc.variant << 16;
    }
    if (frt_graph_has(m->g_batch, *key)) return 0;
    return frt_graph_capture(m->g_batch, *key, m->stream, m->bk->record_policy_batch, &rc);
}

int frt_policy_run_batch(frt_model *m, const frt_policy_inputs *in, int n, float *actions, size_t cap)
{
    if (!in || !actions) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy batch: NULL argument");
    FRT_TRY(policy_model(m, "policy batch"));
    if (!m->bk->record_policy_batch)
        return frt_error(FRT_ERR_UNSUPPORTED, "policy batch: the %s backend has no batched policy graph", m->bk->name);
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(m, &pi));
    const int per = m->policy_cfg.enable ? 2 : 1;
    if (n < 1) return BAD("batch of %d rollouts (at least 1)", n);
    if ((long)n * per > pi.batch_slots)
        return BAD("batch of %d rollouts needs %d slots%s; the model has %d (frt_model_params.policy_batch)", n,
                   n * per, per == 2 ? " (2 a rollout under CFG)" : "", pi.batch_slots);
    size_t n_out = (size_t)pi.chunk * pi.action_dim;
    if (cap < n_out * (size_t)n) return BAD("room for %zu action values, %d chunks have %zu", cap, n, n_out * n);
    for (int r = 0; r < n; r++) FRT_TRY(check_rollout(m, &pi, &in[r], r));
    frt_shape_key key;
    FRT_TRY(batch_key(m, in, n, &key));
    for (int r = 0; r < n; r++) {
        port_row row = {"batch_", r};
        FRT_TRY(write_inputs(m, row, &pi, &in[r], 0));
    }
    return replay(m, m->g_batch, key, "batch_actions", actions, n_out * n);
}

int frt_policy_denoise(frt_model *m, const float *state, int n_state, const float *noise, float *actions, size_t cap)
{
    if (!actions) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL argument");
    FRT_TRY(policy_model(m, "policy denoise"));
    if (!m->g_denoise)
        return frt_error(FRT_ERR_UNSUPPORTED, "policy denoise: the %s backend has no denoise-only graph", m->bk->name);
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(m, &pi));
    size_t n_out = (size_t)pi.chunk * pi.action_dim;
    if (cap < n_out) return BAD("room for %zu action values, the chunk has %zu", cap, n_out);
    frt_policy_inputs in;
    memset(&in, 0, sizeof in);
    in.state = state;
    in.n_state = n_state;
    in.noise = noise;
    FRT_TRY(check_state_noise(&pi, &in));
    frt_shape_key key;
    FRT_TRY(variant_key(m, m->g_denoise, m->bk->record_policy_denoise, NULL, &key));
    if (!pi.state_in_prompt) FRT_TRY(write_port(m, SINGLE, "state", state, (size_t)n_state * sizeof(float)));
    if (noise) FRT_TRY(write_port(m, SINGLE, "noise", noise, n_out * sizeof(float)));
    const frt_policy_cfg_options g = cfg_of(m, 0);
    FRT_TRY(write_port(m, SINGLE, "cfg", &g, sizeof g));
    frt_policy_options o = {0, 0, noise != NULL, 0};
    FRT_TRY(write_port(m, SINGLE, "options", &o, sizeof o));
    FRT_TRY(frt_stream_sync(m->stream));
    return replay(m, m->g_denoise, key, "actions", actions, n_out);
}

int frt_policy_set_cfg(frt_model *m, int enable, float beta, int advantage_positive)
{
    FRT_TRY(policy_model(m, "policy cfg"));
    if (enable != 0 && enable != 1) return BAD("cfg: enable = %d (0 or 1)", enable);
    if (advantage_positive != 0 && advantage_positive != 1)
        return BAD("cfg: advantage_positive = %d (0 or 1)", advantage_positive);
    if (!(beta >= 1.0f) || isinf(beta)) return BAD("cfg: beta = %g: beta must be in [1, inf)", (double)beta);
    m->policy_cfg.enable = enable;
    m->policy_cfg.beta = beta;
    m->policy_cfg.advantage_positive = advantage_positive;
    return 0;
}

int frt_policy_cfg_get(const frt_model *m, int *enable, float *beta, int *advantage_positive)
{
    FRT_TRY(policy_model(m, "policy cfg"));
    if (enable) *enable = m->policy_cfg.enable;
    if (beta) *beta = m->policy_cfg.beta;
    if (advantage_positive) *advantage_positive = m->policy_cfg.advantage_positive;
    return 0;
}

int frt_policy_set_cfg_mode(frt_model *m, frt_policy_cfg_mode mode)
{
    FRT_TRY(policy_model(m, "policy cfg mode"));
    if (mode != FRT_POLICY_CFG_FUSED && mode != FRT_POLICY_CFG_SERIAL) return BAD("cfg mode %d unknown", (int)mode);
    if (mode == FRT_POLICY_CFG_FUSED && !m->bk->policy_cfg_fused)
        return frt_error(FRT_ERR_UNSUPPORTED, "policy cfg: the %s backend has no fused CFG graph", m->bk->name);
    m->policy_cfg.fused = mode == FRT_POLICY_CFG_FUSED;
    return 0;
}

int frt_policy_episode_start(frt_model *m, uint64_t seed)
{
    FRT_TRY(policy_model(m, "policy episode"));
    frt_episode e = {seed, 0};
    FRT_TRY(frt_buffer_write(m->episode, 0, &e, sizeof e, m->stream));
    return frt_stream_sync(m->stream);
}

int frt_policy_episode_get(const frt_model *m, uint64_t *seed, uint64_t *step)
{
    if (!seed || !step) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy episode: NULL argument");
    FRT_TRY(policy_model(m, "policy episode"));
    frt_episode e;
    frt_model *mm = (frt_model *)m;
    FRT_TRY(frt_buffer_read(mm->episode, 0, &e, sizeof e, mm->stream));
    FRT_TRY(frt_stream_sync(mm->stream));
    *seed = e.seed;
    *step = e.step;
    return 0;
}
