/*
 * model.c - the model layer's public API (include/frt/model.h): load a
 * checkpoint directory, allocate the live state once, capture the prefill
 * (one variant per length bucket), decode and sample graphs, and drive them.
 */
#include "model/model_internal.h"
#include "model/kv_scales.h"

#include "kernels/cpu/kernels_cpu.h"

#include "text/chat.h"
#include "util/error.h"
#include "util/json.h"
#include "frt/fs.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

frt_model_params frt_model_default_params(void)
{
    frt_model_params p;
    memset(&p, 0, sizeof p);
    p.backend = FRT_BACKEND_CPU;
    return p;
}

/* ---- boundary and step records ----------------------------------------- */

int frt_model_boundary_read(frt_model *m, frt_boundary *b)
{
    /* Between a pipelined restore and the prefill that takes it, a read of
     * the boundary (which that restore copies on m->stream) leaves the
     * layers' copies running. */
    const int hold = m->restore_pending;
    if (hold) FRT_TRY(frt_stream_defer_hold(m->stream, 1));
    int rc = frt_buffer_read(m->boundary, 0, b, sizeof *b, m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream);
    if (hold) frt_stream_defer_hold(m->stream, 0);
    return rc;
}

static int boundary_write(frt_model *m, const frt_boundary *b)
{
    FRT_TRY(frt_buffer_write(m->boundary, 0, b, sizeof *b, m->stream));
    return frt_stream_sync(m->stream);
}

#define CHECK_FIELD(ok, ...) \
    do { \
        if (!(ok)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "sampling: " __VA_ARGS__); \
    } while (0)

static int check_bias(const frt_sampling *s, int vocab)
{
    CHECK_FIELD(s->n_logit_bias >= 0 && s->n_logit_bias <= FRT_SAMPLING_MAX_BIAS,
                "logit_bias has %d entries (at most %d)", s->n_logit_bias, FRT_SAMPLING_MAX_BIAS);
    for (int j = 0; j < s->n_logit_bias; j++) {
        const frt_logit_bias *e = &s->logit_bias[j];
        CHECK_FIELD(e->token >= 0 && e->token < vocab, "logit_bias token %d is outside the vocabulary [0, %d)",
                    e->token, vocab);
        CHECK_FIELD(e->bias >= -100.0f && e->bias <= 100.0f, "logit_bias of token %d is %g, not in [-100, 100]",
                    e->token, (double)e->bias);
        for (int k = 0; k < j; k++)
            CHECK_FIELD(s->logit_bias[k].token != e->token, "logit_bias names token %d twice", e->token);
    }
    return 0;
}

int frt_sampling_check(const frt_sampling *s, int vocab)
{
    CHECK_FIELD(s != NULL && vocab >= 1, "NULL parameters or vocabulary %d", vocab);
    CHECK_FIELD(s->temperature >= 0.0f && !isinf(s->temperature), "temperature %g is not a finite number >= 0",
                (double)s->temperature);
    CHECK_FIELD(s->top_k >= 0, "top_k %d < 0", s->top_k);
    CHECK_FIELD(s->top_p > 0.0f && s->top_p <= 1.0f, "top_p %g not in (0, 1]", (double)s->top_p);
    CHECK_FIELD(s->min_p >= 0.0f && s->min_p <= 1.0f, "min_p %g not in [0, 1]", (double)s->min_p);
    CHECK_FIELD(s->presence_penalty >= -2.0f && s->presence_penalty <= 2.0f, "presence_penalty %g not in [-2, 2]",
                (double)s->presence_penalty);
    CHECK_FIELD(s->frequency_penalty >= -2.0f && s->frequency_penalty <= 2.0f,
                "frequency_penalty %g not in [-2, 2]", (double)s->frequency_penalty);
    CHECK_FIELD(s->repetition_penalty >= 0.0f && !isinf(s->repetition_penalty),
                "repetition_penalty %g is not a finite number > 0 (0 = off)", (double)s->repetition_penalty);
    CHECK_FIELD(s->logprobs == 0 || s->logprobs == 1, "logprobs %d is not 0 or 1", s->logprobs);
    CHECK_FIELD(s->top_logprobs >= 0 && s->top_logprobs <= FRT_SAMPLING_MAX_TOP_LOGPROBS,
                "top_logprobs %d not in [0, %d]", s->top_logprobs, FRT_SAMPLING_MAX_TOP_LOGPROBS);
    CHECK_FIELD(s->logprobs || !s->top_logprobs, "top_logprobs %d needs logprobs", s->top_logprobs);
    return check_bias(s, vocab);
}

/* The step record's sampling: *s with the unused bias entries zeroed (so
 * equal requests write equal bytes), or greedy for NULL. Not checked. */
static void step_sampling(const frt_sampling *s, frt_sampling *out)
{
    memset(out, 0, sizeof *out);
    out->top_p = 1.0f;
    if (!s) return;
    memcpy(out, s, offsetof(frt_sampling, logit_bias));
    int nb = s->n_logit_bias < 0 ? 0 : s->n_logit_bias > FRT_SAMPLING_MAX_BIAS ? FRT_SAMPLING_MAX_BIAS
                                                                                : s->n_logit_bias;
    memcpy(out->logit_bias, s->logit_bias, (size_t)nb * sizeof s->logit_bias[0]);
}

/* Writes the step record (checking *s unless it equals the record already
 * there, which was checked). On error nothing is written. */
static int step_write(frt_model *m, int n_valid, const frt_sampling *s, int no_logits)
{
    frt_step_args a;
    memset(&a, 0, sizeof a);
    a.n_valid = n_valid;
    a.no_logits = no_logits;
    a.mask_on = m->mask_on;
    step_sampling(s, &a.sampling);
    /* Decode steps of one request write the same record: skip the copy. */
    if (m->step_cached && !memcmp(&a, &m->step_last, sizeof a)) return 0;
    if (s) FRT_TRY(frt_sampling_check(s, m->cfg.vocab_size));
    m->step_cached = 0;
    FRT_TRY(frt_buffer_write(m->step, 0, &a, sizeof a, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    m->step_last = a;
    m->step_cached = 1;
    return 0;
}

/* ---- load ---------------------------------------------------------------- */

static int file_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The state table and ports (state.c), the step record, and the boundary
 * of an empty state. */
static int alloc_state(frt_model *m)
{
    FRT_TRY(frt_model_state_alloc(m));
    if (m->params.backend == FRT_BACKEND_CPU && m->arch->kind == FRT_ARCH_TOKEN) {
        m->cpu_sample_scratch = malloc(FRT_CPU_SAMPLE_SCRATCH(m->cfg.vocab_size) * sizeof(float) + 64);
        m->cpu_adjusted = malloc((size_t)m->cfg.vocab_size * sizeof(float));
        if (!m->cpu_sample_scratch || !m->cpu_adjusted)
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for sampling scratch");
    }
    FRT_TRY(frt_buffer_alloc(m->ctx, "step", FRT_SPACE_DEVICE, sizeof(frt_step_args), &m->step));
    FRT_TRY(frt_buffer_fill(m->step, 0, sizeof(frt_step_args), 0, m->stream));
    if (m->arch->bind_state) FRT_TRY(m->arch->bind_state(m));
    frt_boundary b;
    memset(&b, 0, sizeof b);
    b.pending = -1;
    b.rng[0] = b.rng[1] = 0x853c49e6748fea9bull;
    return boundary_write(m, &b);
}

static void progress(frt_model *m, const char *phase, uint64_t done, uint64_t total)
{
    if (m->params.progress) m->params.progress(m->params.progress_user, phase, done, total);
}

void frt_model_progress_weights(frt_model *m, uint64_t bytes)
{
    m->progress_done += bytes;
    if (m->progress_done > m->progress_total) m->progress_done = m->progress_total;
    progress(m, "weights", m->progress_done, m->progress_total);
}

/* The batched policy graph (params.policy_batch slots): one variant per
 * rollout count n = 1..slots, key FRT_POLICY_KEY_BATCH | n (a backend with
 * policy_batch_on_use: nothing captured here, frt_policy_run_batch
 * captures each on its first use). */
static int capture_policy_batch(frt_model *m)
{
    const int slots = m->params.policy_batch;
    if (slots == 0) return 0;
    frt_record_ctx rc = {.m = m, .bucket = 0};
    FRT_TRY(frt_graph_create(m->ctx, "policy_batch", slots, &m->g_batch));
    if (m->bk->policy_batch_on_use) return 0;
    for (rc.bucket = 1; rc.bucket <= slots; rc.bucket++)
        FRT_TRY(frt_graph_capture(m->g_batch, FRT_POLICY_KEY_BATCH | (frt_shape_key)rc.bucket, m->stream,
                                  m->bk->record_policy_batch, &rc));
    return 0;
}

/* A policy: one graph, the whole inference (key 1). */
static int capture_policy(frt_model *m)
{
    frt_record_ctx rc = {.m = m, .bucket = 0};
    m->policy_cfg.beta = 1.0f; /* CFG off; the defaults frt_policy_cfg_get reports */
    m->policy_cfg.advantage_positive = 1;
    m->policy_cfg.fused = m->bk->policy_cfg_fused; /* FRT_POLICY_CFG_FUSED where the backend records it */
    progress(m, "capture", 0, 1);
    FRT_TRY(frt_graph_create(m->ctx, "policy", 0, &m->g_policy));
    FRT_TRY(frt_graph_capture(m->g_policy, FRT_POLICY_KEY_SERIAL, m->stream, m->bk->record_policy, &rc));
    if (m->bk->record_policy_denoise) {
        FRT_TRY(frt_graph_create(m->ctx, "policy_denoise", 0, &m->g_denoise));
        FRT_TRY(frt_graph_capture(m->g_denoise, FRT_POLICY_KEY_SERIAL, m->stream, m->bk->record_policy_denoise, &rc));
    }
    if (m->bk->policy_cfg_fused && !m->bk->policy_variant) { /* the fused batch-2 CFG variants (a backend with
                                                                  per-shape variants captures its own on use) */
        rc.bucket = 2;
        FRT_TRY(frt_graph_capture(m->g_policy, FRT_POLICY_KEY_FUSED, m->stream, m->bk->record_policy, &rc));
        if (m->g_denoise)
            FRT_TRY(frt_graph_capture(m->g_denoise, FRT_POLICY_KEY_FUSED, m->stream, m->bk->record_policy_denoise,
                                      &rc));
    }
    progress(m, "capture", 1, 1);
    return capture_policy_batch(m);
}

frt_shape_key frt_model_slot_key(const frt_model *m)
{
    return m->bk->binds_slots ? 0 : (frt_shape_key)m->bound_slot << 32;
}

/* Captures every graph kind on the bound slot (keys | frt_model_slot_key). */
static int capture_slot(frt_model *m, uint64_t *done, uint64_t total)
{
    frt_record_ctx rc = {.m = m, .bucket = 0};
    frt_shape_key sk = frt_model_slot_key(m);
    for (int i = 0; i < m->n_buckets; i++) {
        rc.bucket = m->buckets[i];
        FRT_TRY(frt_graph_capture(m->g_prefill, sk | (frt_shape_key)m->buckets[i], m->stream, m->bk->record_prefill,
                                  &rc));
        progress(m, "capture", ++*done, total);
    }
    for (int j = 2; j <= m->G; j *= 2) { /* the prefill groups, key j * C (> every bucket) */
        rc.bucket = j * m->C;
        FRT_TRY(frt_graph_capture(m->g_prefill, sk | (frt_shape_key)rc.bucket, m->stream, m->bk->record_prefill, &rc));
        progress(m, "capture", ++*done, total);
    }
    FRT_TRY(frt_graph_capture(m->g_decode, sk | 1, m->stream, m->bk->record_decode, &rc));
    progress(m, "capture", ++*done, total);
    FRT_TRY(frt_graph_capture(m->g_sample, sk | 1, m->stream, m->bk->record_sample, &rc));
    progress(m, "capture", ++*done, total);
    return 0;
}

/* The batched decode graphs of branch slots 0..n-1, n = 2..n_slots, when the
 * backend records them (frt_arch_backend.record_decode_batch); a backend
 * that cannot for this load (FRT_ERR_UNSUPPORTED) leaves m->batch_max 0 and
 * branches decode one after another. */
static int capture_batches(frt_model *m)
{
    m->batch_max = 0;
    if (m->n_slots < 2 || !m->bk->record_decode_batch) return 0;
    frt_record_ctx rc = {.m = m, .bucket = 0};
    for (int n = 2; n <= m->n_slots; n++) {
        rc.bucket = n;
        int err = frt_graph_capture(m->g_decode, FRT_BATCH_KEY | (frt_shape_key)n, m->stream,
                                    m->bk->record_decode_batch, &rc);
        /* the recorder binds each slot in turn: slot 0 again, as after the other captures */
        int brc = frt_model_bind_slot(m, 0);
        if (err == 0) err = brc;
        if (err == FRT_ERR_UNSUPPORTED || err == FRT_ERR_INVALID_ARGUMENT) break; /* n beyond what it takes */
        FRT_TRY(err);
        m->batch_max = n;
    }
    return 0;
}

/* One set of graphs, or one per branch slot when the backend's graphs hold
 * the state's addresses (binds_slots 0: cuda). */
static int capture_graphs(frt_model *m)
{
    if (m->arch->kind == FRT_ARCH_POLICY) return capture_policy(m);
    int sets = m->bk->binds_slots ? 1 : m->n_slots;
    int groups = 0; /* capture_slot's group variants: j = 2, 4, .. G */
    for (int j = 2; j <= m->G; j *= 2) groups++;
    uint64_t done = 0, total = (uint64_t)sets * ((uint64_t)m->n_buckets + (uint64_t)groups + 2);
    progress(m, "capture", 0, total);
    FRT_TRY(frt_graph_create(m->ctx, "prefill", 0, &m->g_prefill));
    FRT_TRY(frt_graph_create(m->ctx, "decode", 0, &m->g_decode));
    FRT_TRY(frt_graph_create(m->ctx, "sample", 0, &m->g_sample));
    int rc = 0;
    for (int s = 0; s < sets && rc == 0; s++) {
        rc = frt_model_bind_slot(m, s);
        if (rc == 0) rc = capture_slot(m, &done, total);
    }
    int brc = frt_model_bind_slot(m, 0);
    FRT_TRY(rc);
    FRT_TRY(brc);
    return capture_batches(m);
}

/* Hash of the weights: xxh64 over every tensor's name, dtype, shape and bytes
 * in checkpoint order, but the KV-cache scales (frt_kv_scales_ckpt_name):
 * those enter the fingerprint as values through kv_scales_hash when an FP8
 * KV cache reads them, and change nothing otherwise, so equal scales under
 * any of their names (or from a file) give one fingerprint. */
static uint64_t hash_weights(const frt_checkpoint *ck, const char *prefix)
{
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0);
    int n = frt_checkpoint_count(ck);
    for (int i = 0; i < n; i++) {
        const frt_tensor *t = frt_checkpoint_at(ck, i);
        if (frt_kv_scales_ckpt_name(prefix, t->name)) continue;
        XXH64_update(h, t->name, strlen(t->name) + 1);
        XXH64_update(h, &t->dtype, sizeof t->dtype);
        XXH64_update(h, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
        XXH64_update(h, t->data, t->nbytes);
    }
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

/* The fingerprint: the format version, the architecture and the
 * hyperparameters it names, the backend and its dtypes, the state table
 * (names, dtypes, shapes, validity), C, the buckets, the weights hash and
 * the backend's load-time choices. */
static uint64_t compute_fingerprint(const frt_model *m)
{
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0);
    char s[1024];
    int n = snprintf(s, sizeof s, "frt-capsule-v%u|%s|%s|backend=%s|%s|C=%d max_seq=%d|weights=%016llx|",
                     FRT_CAPSULE_FORMAT_VERSION, m->arch->name, m->cfg.model_type, m->bk->name,
                     m->kv_dtype == FRT_DT_F8_E4M3 ? m->bk->state_dtypes_kv_fp8 : m->bk->state_dtypes,
                     m->C, m->max_seq, (unsigned long long)m->weights_hash);
    XXH64_update(h, s, (size_t)n);
    n = m->arch->describe(&m->cfg, s, sizeof s);
    XXH64_update(h, s, (size_t)(n < (int)sizeof s ? n : (int)sizeof s - 1));
    XXH64_update(h, m->buckets, (size_t)m->n_buckets * sizeof m->buckets[0]);
    if (m->weights_desc) { /* FP8 weights: quantized at load or read with their scales */
        n = snprintf(s, sizeof s, "wdesc=%s|", m->weights_desc);
        XXH64_update(h, s, (size_t)(n < (int)sizeof s ? n : (int)sizeof s - 1));
    }
    if (m->params.lm_head_dtype == FRT_WEIGHT_FP8) { /* other logits: another model */
        n = snprintf(s, sizeof s, "lm_head=e4m3,row-amax/448|");
        XXH64_update(h, s, (size_t)n);
    }
    if (m->kv_scales_hash) { /* FP8 KV scales from a file: other scales are other codes */
        n = snprintf(s, sizeof s, "kv_scales=%016llx|", (unsigned long long)m->kv_scales_hash);
        XXH64_update(h, s, (size_t)n);
    }
    for (int i = 0; i < m->n_state; i++) {
        const frt_state_decl *d = &m->state[i].decl;
        XXH64_update(h, d->name, strlen(d->name) + 1);
        int32_t meta[3] = {(int32_t)d->dtype, d->ndim, (int32_t)d->validity};
        XXH64_update(h, meta, sizeof meta);
        XXH64_update(h, d->shape, (size_t)d->ndim * sizeof d->shape[0]);
    }
    if (m->bk->fingerprint_extra) {
        uint64_t x = m->bk->fingerprint_extra(m);
        XXH64_update(h, &x, sizeof x);
    }
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

/* The architecture of MODEL_DIR/config.json, found before its config is
 * parsed (a policy parses its own): by model_type, or without one by a key
 * of an architecture's own layout (frt_arch.layout_keys). *a NULL: neither
 * (the shared parser says why). */
static int peek_arch(const char *dir, const frt_arch **a)
{
    char path[4096], *text = NULL, mt[32];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FRT_TRY(frt_file_read_all(path, 16u << 20, &text, &len));
    json_t *root = NULL;
    int rc = frt_json_parse(text, len, 0, &root, path);
    free(text);
    FRT_TRY(rc);
    *a = frt_arch_find_layout(root);
    rc = *a ? 0
            : json_is_object(root) ? frt_json_string(root, "model_type", 1, mt, sizeof mt, path)
                                   : frt_error(FRT_ERR_FORMAT, "%s: not a JSON object", path);
    if (rc > 0) *a = frt_arch_find(mt);
    json_decref(root);
    return rc < 0 ? rc : 0;
}

/* The config and the architecture: a policy's own parser, or the shared
 * one (frt/config.h) and the architecture of its model_type. */
static int load_config(frt_model *m, const char *dir)
{
    if (dir) {
        const frt_arch *a = NULL;
        FRT_TRY(peek_arch(dir, &a));
        if (a && a->kind == FRT_ARCH_POLICY) {
            m->arch = a;
            return a->load_config(m, dir);
        }
        FRT_TRY(frt_config_load(dir, &m->cfg));
        FRT_TRY(frt_generation_config_load(dir, &m->cfg, &m->gen));
    }
    const frt_model_config *c = &m->cfg;
    m->arch = frt_arch_find(c->model_type);
    if (!m->arch)
        return frt_error(FRT_ERR_UNSUPPORTED, "model: no architecture runs model_type '%s' (docs/architectures.md)",
                         c->model_type);
    if (m->arch->kind == FRT_ARCH_POLICY)
        return frt_error(FRT_ERR_UNSUPPORTED, "model: a policy ('%s') loads from its checkpoint directory only",
                         c->model_type);
    return m->arch->check_config(c);
}

/* m->kv_dtype from params.kv_dtype and what the backend supports. */
static int pick_kv_dtype(frt_model *m)
{
    m->kv_dtype = m->bk->kv_dtype;
    if (m->params.kv_dtype == FRT_KV_DEFAULT) return 0;
    if (m->params.kv_dtype != FRT_KV_FP8)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: kv_dtype %d is not an frt_kv_dtype", (int)m->params.kv_dtype);
    if (!m->bk->state_dtypes_kv_fp8)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "model: an fp8 KV cache is not supported by the %s backend of architecture '%s' yet "
                         "(docs/fp8.md)",
                         m->bk->name, m->arch->name);
    m->kv_dtype = FRT_DT_F8_E4M3;
    return 0;
}

/* A weight precision field (params.weight_dtype, params.lm_head_dtype:
 * `field`) against what the backend supports (ok: its flag; what: the
 * feature's name in the message). */
static int check_weight_dtype(const frt_model *m, frt_weight_dtype w, int ok, const char *field, const char *what)
{
    if (w == FRT_WEIGHT_DEFAULT) return 0;
    if (w != FRT_WEIGHT_FP8)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: %s %d is not an frt_weight_dtype", field, (int)w);
    if (!ok)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "model: %s is not supported by the %s backend of architecture '%s' (docs/fp8.md)", what,
                         m->bk->name, m->arch->name);
    return 0;
}

/* params.policy_batch: 0, or batch slots of a policy on a backend that
 * records the batched graph (frt/policy.h, frt_policy_run_batch). */
static int check_policy_batch(const frt_model *m)
{
    const int b = m->params.policy_batch;
    if (b == 0) return 0;
    if (b < 0 || b > FRT_POLICY_BATCH_MAX)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: policy_batch %d (0 to %d)", b, FRT_POLICY_BATCH_MAX);
    if (m->arch->kind != FRT_ARCH_POLICY)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: policy_batch %d given for '%s', which is not a policy", b,
                         m->cfg.model_type);
    if (!m->bk->record_policy_batch)
        return frt_error(FRT_ERR_UNSUPPORTED, "model: the %s backend of architecture '%s' has no batched policy graph "
                         "(policy_batch %d)", m->bk->name, m->arch->name, b);
    return 0;
}

/* params.gemm_autotune: 0, or 1..64 on a backend that honours it. */
static int check_gemm_autotune(const frt_model *m)
{
    const int n = m->params.gemm_autotune;
    if (n == 0 && !m->params.gemm_tune_file) return 0;
    if (n < 0 || n > 64)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: gemm_autotune %d (0 to 64)", n);
    if (n == 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: gemm_tune_file given with gemm_autotune 0");
    if (!m->bk->gemm_autotune)
        return frt_error(FRT_ERR_UNSUPPORTED, "model: the %s backend of architecture '%s' has no GEMM autotune "
                         "(gemm_autotune %d)", m->bk->name, m->arch->name, n);
    return 0;
}

/* params.prefill_group: 0, 1, or a power of two 2..64 on a backend that
 * groups prefill pieces. */
static int check_prefill_group(const frt_model *m)
{
    const int g = m->params.prefill_group;
    if (g == 0 || g == 1) return 0;
    if (g < 0 || g > 64 || (g & (g - 1)))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: prefill_group %d (0, 1 or a power of two up to 64)", g);
    if (!m->bk->prefill_group)
        return frt_error(FRT_ERR_UNSUPPORTED, "model: the %s backend of architecture '%s' runs every prefill piece on "
                         "its own (prefill_group %d; docs/architectures.md \"Prefill groups\")",
                         m->bk->name, m->arch->name, g);
    return 0;
}

/* params.prefill_chunk, branch_slots and debug_hidden where the model has
 * no use for them: a policy (frt/policy.h) runs no prefill pieces (its
 * prompt capacity is max_seq) and has no token branches to fork
 * (frt/branch.h: its graphs run on slot 0 alone); debug_hidden needs a
 * backend that records the hidden states (frt/debug.h). */
static int check_token_params(const frt_model *m)
{
    const frt_model_params *p = &m->params;
    if (m->arch->kind == FRT_ARCH_POLICY && p->prefill_chunk)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "model: prefill_chunk %d given for '%s', a policy, which runs no prefill pieces (its prompt "
                         "capacity is max_seq)",
                         p->prefill_chunk, m->cfg.model_type);
    if (m->arch->kind == FRT_ARCH_POLICY && p->branch_slots > 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "model: branch_slots %d given for '%s', a policy, which has no token branches to fork "
                         "(frt/branch.h)",
                         p->branch_slots, m->cfg.model_type);
    if (p->debug_hidden && !m->bk->debug_hidden)
        return frt_error(FRT_ERR_UNSUPPORTED, "model: the %s backend of architecture '%s' records no hidden states "
                         "(debug_hidden %d)", m->bk->name, m->arch->name, p->debug_hidden);
    return 0;
}

/* params.n_threads: the host's OpenMP and OpenBLAS thread counts, set
 * before the weights load (the cpu backend's products; on the cuda backend,
 * the host-side work of the load, e.g. the policy's per-step time tables).
 * Process-wide: the last model opened with n_threads > 0 sets them. 0 leaves
 * them as they are (every core, or OMP_NUM_THREADS / OPENBLAS_NUM_THREADS);
 * < 0 or > 4096: FRT_ERR_INVALID_ARGUMENT. OpenBLAS promises the same bits
 * for one thread count only, so a capsule restores bit-exactly into a model
 * run with the thread count it was made with (the cpu backend's contract,
 * kernels_cpu.h "frt_cpu_matmul"). */
static int apply_threads(const frt_model *m)
{
    const int n = m->params.n_threads;
    if (n < 0 || n > 4096) return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: n_threads %d not in [0, 4096]", n);
    if (n == 0) return 0;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    return 0;
}

/* m->G: the backend's answer to params.prefill_group, at most the largest
 * power of two <= max_seq / C. */
static int pick_prefill_group(frt_model *m)
{
    int limit = 1;
    while (limit * 2 <= 64 && (long)limit * 2 * m->C <= m->max_seq) limit *= 2;
    m->G = 1;
    if (!m->bk->prefill_group || m->params.prefill_group == 1) return 0;
    if (limit == 1) return 0;
    int want = m->params.prefill_group, got = 1;
    if (want > limit) want = limit;
    m->G = limit; /* the cap, for the backend's default */
    FRT_TRY(m->bk->prefill_group(m, want, &got));
    m->G = got < 1 ? 1 : got > limit ? limit : got;
    return 0;
}

/* The model's context: params.context (shared, borrowed) or its own. */
static int open_context(frt_model *m)
{
    const frt_model_params *p = &m->params;
    if (!p->context) return frt_context_create(p->backend, p->device, &m->ctx);
    if (frt_context_device(p->context) < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: params.context is not a valid context");
    if (frt_context_backend(p->context) != p->backend || frt_context_device(p->context) != p->device)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "model: params.context is device %d of the %s backend, the model asks for device %d of %s",
                         frt_context_device(p->context),
                         frt_context_backend(p->context) == FRT_BACKEND_CUDA ? "cuda" : "cpu", p->device,
                         p->backend == FRT_BACKEND_CUDA ? "cuda" : "cpu");
    m->ctx = p->context;
    m->ctx_borrowed = 1;
    return 0;
}

/* Loads from a directory, or (dir NULL) from the checkpoint and config that
 * m->ckpt, m->cfg and m->gen already hold. */
static int load_model(frt_model *m, const char *dir)
{
    const frt_model_params *p = &m->params;
    if (p->backend != FRT_BACKEND_CPU && p->backend != FRT_BACKEND_CUDA)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: backend %d is not an frt_backend", (int)p->backend);
    FRT_TRY(load_config(m, dir));
    const frt_model_config *c = &m->cfg;
    m->bk = p->backend == FRT_BACKEND_CPU ? m->arch->cpu : p->backend == FRT_BACKEND_CUDA ? m->arch->cuda : NULL;
    if (!m->bk) {
        if (p->backend == FRT_BACKEND_CUDA && !FRT_HAVE_CUDA)
            return frt_error(FRT_ERR_UNSUPPORTED, "model: this build has no CUDA backend (built without nvcc)");
        return frt_error(FRT_ERR_UNSUPPORTED, "model: architecture '%s' has no %s backend", m->arch->name,
                         p->backend == FRT_BACKEND_CUDA ? "cuda" : "cpu");
    }
    FRT_TRY(pick_kv_dtype(m));
    FRT_TRY(check_weight_dtype(m, m->params.weight_dtype, m->bk->weights_fp8, "weight_dtype", "fp8 weights"));
    FRT_TRY(check_weight_dtype(m, m->params.lm_head_dtype, m->bk->lm_head_fp8, "lm_head_dtype", "an fp8 lm_head"));
    FRT_TRY(check_policy_batch(m));
    FRT_TRY(check_gemm_autotune(m));
    FRT_TRY(check_prefill_group(m));
    FRT_TRY(check_token_params(m));
    FRT_TRY(apply_threads(m));
    m->C = p->prefill_chunk ? p->prefill_chunk : FRT_DEFAULT_PREFILL_CHUNK;
    if (m->C < 64 || m->C % 64 || m->C > 1 << 16)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: prefill chunk %d is not a positive multiple of 64", m->C);
    int max_seq = p->max_seq;
    if (max_seq < 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: max_seq %d < 0", max_seq);
    if (max_seq == 0) max_seq = c->max_position_embeddings > 0 && c->max_position_embeddings < 8192
                                    ? c->max_position_embeddings
                                    : 8192;
    m->max_seq = (max_seq + m->C - 1) / m->C * m->C;
    for (int b = 16; b < m->C && m->n_buckets < 15; b *= 2) m->buckets[m->n_buckets++] = b;
    m->buckets[m->n_buckets++] = m->C;
    if (m->arch->init) FRT_TRY(m->arch->init(m));

    if (dir) {
        FRT_TRY(frt_checkpoint_open(dir, &m->ckpt));
        if (m->arch->kind == FRT_ARCH_TOKEN && file_exists(dir, "tokenizer.json")) FRT_TRY(frt_tokenizer_load(dir, &m->tok));
    }
    FRT_TRY(open_context(m));
    m->stream = frt_context_stream(m->ctx);
    m->progress_done = 0;
    m->progress_total = frt_checkpoint_bytes(m->ckpt);
    progress(m, "weights", 0, m->progress_total);
    FRT_TRY(m->bk->load_weights(m));
    if (m->progress_done < m->progress_total) { /* tensors the architecture does not read */
        m->progress_done = m->progress_total;
        progress(m, "weights", m->progress_total, m->progress_total);
    }
    m->weights_hash = hash_weights(m->ckpt, m->cfg.weight_prefix);
    FRT_TRY(pick_prefill_group(m));
    FRT_TRY(alloc_state(m));
    FRT_TRY(frt_model_kv_scales_load(m)); /* before the scratch: the backends copy the scales there */
    FRT_TRY(m->bk->alloc_scratch(m));
    FRT_TRY(frt_model_restore_pipe_alloc(m)); /* before the captures: the append graphs wait on its events */
    FRT_TRY(frt_model_branches_alloc(m));
    if (m->bk->slots_ready) FRT_TRY(m->bk->slots_ready(m));
    FRT_TRY(capture_graphs(m));
    m->fingerprint = compute_fingerprint(m);
    return 0;
}

int frt_model_load(const char *model_dir, const frt_model_params *params, frt_model **out)
{
    if (!model_dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: NULL argument");
    *out = NULL;
    frt_model *m = calloc(1, sizeof *m);
    if (!m) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->params = params ? *params : frt_model_default_params();
    int rc = load_model(m, model_dir);
    if (rc < 0) {
        frt_error_prefix("%s", model_dir);
        frt_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int frt_model_load_checkpoint(frt_checkpoint *ck, const frt_model_config *cfg, const frt_generation_config *gen,
                              const frt_model_params *params, frt_model **out)
{
    if (!ck || !cfg || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: NULL argument");
    *out = NULL;
    frt_model *m = calloc(1, sizeof *m);
    if (!m) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->params = params ? *params : frt_model_default_params();
    m->ckpt = ck;
    m->ckpt_borrowed = 1;
    m->cfg = *cfg;
    if (gen) {
        m->gen = *gen;
    } else {
        m->gen.temperature = 1.0f;
        m->gen.top_p = 1.0f;
        if (cfg->eos_token_id >= 0) m->gen.eos_ids[m->gen.n_eos++] = cfg->eos_token_id;
    }
    int rc = load_model(m, NULL);
    if (rc < 0) {
        frt_error_prefix("in-memory checkpoint");
        frt_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void frt_model_free(frt_model *m)
{
    if (!m) return;
    if (m->stream) frt_stream_sync(m->stream);
    frt_graph_destroy(m->g_prefill);
    frt_graph_destroy(m->g_decode);
    frt_graph_destroy(m->g_sample);
    frt_graph_destroy(m->g_policy);
    frt_graph_destroy(m->g_denoise);
    frt_graph_destroy(m->g_batch);
    frt_model_restore_pipe_free(m);
    frt_model_branches_free(m);
    frt_model_state_free(m);
    frt_buffer_free(m->step);
    free(m->cpu_sample_scratch);
    free(m->cpu_adjusted);
    free(m->kv_scales);
    free(m->kv_scales_data);
    if (m->bk) m->bk->free(m);
    if (m->arch && m->arch->fini) m->arch->fini(m);
    if (!m->ctx_borrowed) frt_context_destroy(m->ctx); /* a shared context stays with its owner */
    frt_tokenizer_free(m->tok);
    if (!m->ckpt_borrowed) frt_checkpoint_close(m->ckpt);
    free(m);
}

int frt_model_info_get(const frt_model *m, frt_model_info *info)
{
    if (!m || !info) return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: NULL argument");
    memset(info, 0, sizeof *info);
    const frt_model_config *c = &m->cfg;
    snprintf(info->model_type, sizeof info->model_type, "%s", c->model_type);
    snprintf(info->arch, sizeof info->arch, "%s", m->arch->name);
    info->vocab_size = c->vocab_size;
    info->hidden_size = c->hidden_size;
    info->n_layers = c->n_layers;
    if (m->arch->info) m->arch->info(m, info);
    info->n_state = m->n_state;
    info->n_io = m->n_io;
    info->max_seq = m->max_seq;
    info->prefill_chunk = m->C;
    info->prefill_group = m->G;
    info->n_buckets = m->n_buckets;
    memcpy(info->buckets, m->buckets, sizeof info->buckets);
    info->n_eos = m->gen.n_eos;
    memcpy(info->eos_ids, m->gen.eos_ids, sizeof info->eos_ids);
    info->weight_bytes = m->weight_bytes;
    for (int i = 0; i < m->n_state; i++) info->state_bytes += m->state[i].bytes;
    info->branch_slots = m->n_slots;
    info->branch_state_bytes = info->state_bytes * (size_t)m->n_slots;
    info->branch_batched = m->batch_max;
    info->backend = m->params.backend;
    info->has_tokenizer = m->tok != NULL;
    info->restore_pipelined = m->layer_ready != NULL;
    return 0;
}

frt_context *frt_model_context(frt_model *m) { return m ? m->ctx : NULL; }


/* ---- tokens ---------------------------------------------------------------- */

int frt_model_tokenize(const frt_model *m, const char *text, size_t len, int32_t **ids, size_t *n_ids)
{
    if (!m || !text || !ids || !n_ids) return frt_error(FRT_ERR_INVALID_ARGUMENT, "tokenize: NULL argument");
    if (!m->tok) return frt_error(FRT_ERR_STATE, "tokenize: the checkpoint has no tokenizer.json");
    return frt_tokenizer_encode(m->tok, text, len, ids, n_ids);
}

int frt_model_detokenize(const frt_model *m, const int32_t *ids, size_t n_ids, char **text, size_t *len)
{
    if (!m || (!ids && n_ids) || !text || !len)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "detokenize: NULL argument");
    if (!m->tok) return frt_error(FRT_ERR_STATE, "detokenize: the checkpoint has no tokenizer.json");
    return frt_tokenizer_decode(m->tok, ids, n_ids, text, len);
}

const frt_tokenizer *frt_model_tokenizer(const frt_model *m) { return m ? m->tok : NULL; }

int frt_model_chat_format(const frt_model *m, const frt_chat_turn *msgs, int n, int add_generation_prompt,
                          char **text)
{
    if (!m || !msgs || !text) return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: NULL argument");
    if (n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: no messages");
    if (!m->tok) return frt_error(FRT_ERR_UNSUPPORTED, "chat: the checkpoint has no tokenizer.json");
    frt_chat_message *cm = malloc((size_t)n * sizeof *cm);
    if (!cm) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat: out of memory");
    for (int i = 0; i < n; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content;
    }
    int rc = frt_chat_format(m->tok, cm, n, add_generation_prompt, text);
    free(cm);
    return rc;
}

/* ---- prefill, sample, decode ---------------------------------------------- */

/* The token verbs refuse a policy (frt/policy.h). */
static int token_model(const frt_model *m, const char *verb)
{
    if (m->arch->kind != FRT_ARCH_TOKEN)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: model_type '%s' is a policy (frt/policy.h), not a token model",
                         verb, m->cfg.model_type);
    return 0;
}

/* A host task that failed (out of memory for kernel scratch) records its
 * status in the model; the step that ran it reports it. The state may then
 * hold a partial step: the caller should reset or restore a capsule. */
static int take_task_status(frt_model *m)
{
    int rc = m->task_status;
    m->task_status = 0;
    if (rc < 0) return frt_error(rc, "model: a step failed inside the forward pass (%s); reset or restore",
                                 frt_status_str(rc));
    return 0;
}

static int bucket_for(const frt_model *m, int n)
{
    for (int i = 0; i < m->n_buckets; i++)
        if (n <= m->buckets[i]) return m->buckets[i];
    return m->C;
}

int frt_model_prefill_bucket(const frt_model *m, int n) { return bucket_for(m, n); }

static int prefill_pieces(frt_model *m, const int32_t *ids, int n);

int frt_model_prefill(frt_model *m, const int32_t *ids, int n)
{
    if (!m || (!ids && n > 0)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "prefill: NULL argument");
    FRT_TRY(token_model(m, "prefill"));
    if (n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "prefill: %d tokens (need at least 1)", n);
    /* After a pipelined restore the layers' state may still be landing
     * (capsule.c): m->stream holds back its deferred wait for those copies
     * until the first piece is launched, if that piece's graph waits at each
     * layer itself (frt_model_layer_waits), else until just before it. The
     * steps before touch only the entries the restore copied on m->stream. */
    const int beside = m->restore_pending;
    m->restore_pending = 0;
    if (beside) FRT_TRY(frt_stream_defer_hold(m->stream, 1));
    int rc = prefill_pieces(m, ids, n);
    if (beside) frt_stream_defer_hold(m->stream, 0);
    return rc;
}

static int prefill_pieces(frt_model *m, const int32_t *ids, int n)
{
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    if ((long)b.pos + n > m->max_seq)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "prefill: %d tokens at position %d exceed max_seq %d", n, b.pos,
                         m->max_seq);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return frt_error(FRT_ERR_OUT_OF_RANGE, "prefill: token %d at index %d is outside the vocabulary [0, %d)",
                             ids[i], i, m->cfg.vocab_size);
    /* A new request: no token generated yet (frt/sampling.h). */
    m->logprobs_valid = 0;
    FRT_TRY(frt_buffer_fill(m->counts, 0, (size_t)m->cfg.vocab_size * sizeof(int32_t), 0, m->stream));
    int pos = b.pos, done = 0;
    while (done < n) {
        int piece = (pos / m->C + 1) * m->C - pos; /* up to the next multiple of C */
        if (piece > n - done) piece = n - done;
        int key = bucket_for(m, piece);
        if (m->G > 1 && pos % m->C == 0) { /* whole pieces from here: a group of j of them (docs/architectures.md) */
            int j = m->G;
            while (j > 1 && j * m->C > n - done) j /= 2;
            if (j > 1) key = piece = j * m->C;
        }
        FRT_TRY(frt_model_input_write(m, "ids", ids + done, (size_t)piece * sizeof(int32_t)));
        /* Only the call's last piece computes the logits: no one can see the
         * boundaries inside one call (a failed call leaves has_logits 0). */
        FRT_TRY(step_write(m, piece, NULL, done + piece < n));
        if (!frt_model_layer_waits(m, key)) FRT_TRY(frt_stream_defer_hold(m->stream, 0));
        FRT_TRY(frt_graph_replay(m->g_prefill, frt_model_slot_key(m) | (frt_shape_key)key, m->stream));
        FRT_TRY(frt_stream_defer_hold(m->stream, 0)); /* the sync below waits for the copies too */
        FRT_TRY(frt_stream_sync(m->stream));
        FRT_TRY(take_task_status(m));
        pos += piece;
        done += piece;
    }
    return 0;
}

int frt_model_sample(frt_model *m, const frt_sampling *s, int32_t *token)
{
    if (!m || !token) return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: NULL argument");
    FRT_TRY(token_model(m, "sample"));
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    if (!b.has_logits) return frt_error(FRT_ERR_STATE, "sample: no logits (prefill first)");
    FRT_TRY(step_write(m, 0, s, 0));
    m->logprobs_valid = 0;
    FRT_TRY(frt_graph_replay(m->g_sample, frt_model_slot_key(m) | 1, m->stream));
    FRT_TRY(frt_model_boundary_read(m, &b));
    *token = b.pending;
    m->logprobs_valid = s && s->logprobs;
    return 0;
}

int frt_model_decode_batch(frt_model *m, const frt_sampling *s, int n, int32_t *tokens)
{
    if (n < 2 || n > m->batch_max)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "decode: batch of %d slots outside [2, %d]", n, m->batch_max);
    FRT_TRY(step_write(m, 1, s, 0));
    m->logprobs_valid = 0;
    FRT_TRY(frt_graph_replay(m->g_decode, FRT_BATCH_KEY | (frt_shape_key)n, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    FRT_TRY(take_task_status(m));
    FRT_TRY(frt_model_boundaries_read(m, n, m->bd_host));
    for (int b = 0; b < n; b++) tokens[b] = m->bd_host[b].pending;
    /* The logprobs port holds the last slot's step, as after stepping the
     * slots one after another. */
    m->logprobs_valid = s && s->logprobs;
    return 0;
}

int frt_model_decode(frt_model *m, const frt_sampling *s, int32_t *token)
{
    if (!m || !token) return frt_error(FRT_ERR_INVALID_ARGUMENT, "decode: NULL argument");
    FRT_TRY(token_model(m, "decode"));
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    if (b.pending < 0) return frt_error(FRT_ERR_STATE, "decode: no pending token (prefill and sample first)");
    if (b.pos >= m->max_seq) return frt_error(FRT_ERR_OUT_OF_RANGE, "decode: the state is full (%d tokens)", b.pos);
    FRT_TRY(step_write(m, 1, s, 0));
    m->logprobs_valid = 0;
    FRT_TRY(frt_graph_replay(m->g_decode, frt_model_slot_key(m) | 1, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    FRT_TRY(take_task_status(m));
    FRT_TRY(frt_model_boundary_read(m, &b));
    *token = b.pending;
    m->logprobs_valid = s && s->logprobs;
    return 0;
}

int frt_model_sampled_token(frt_model *m, frt_buffer **buf, size_t *offset)
{
    if (!m || !buf || !offset) return frt_error(FRT_ERR_INVALID_ARGUMENT, "sampled token: NULL argument");
    FRT_TRY(token_model(m, "sampled token"));
    *buf = m->boundary;
    *offset = offsetof(frt_boundary, pending);
    return 0;
}

/* 1 when allowed [n_words] sets a bit of a token below vocab. */
static int mask_allows_any(const uint32_t *allowed, int64_t n_words, int vocab)
{
    for (int64_t w = 0; w < n_words; w++) {
        uint32_t bits = allowed[w];
        const int64_t left = (int64_t)vocab - w * 32;
        if (left < 32) bits &= (1u << left) - 1u;
        if (bits) return 1;
    }
    return 0;
}

int frt_model_set_token_mask(frt_model *m, const uint32_t *allowed, int64_t n_words)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "token mask: NULL model");
    if (!allowed) {
        m->mask_on = 0;
        return 0;
    }
    const int64_t want = ((int64_t)m->cfg.vocab_size + 31) / 32;
    if (n_words != want)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "token mask: %lld words, the vocabulary of %d needs %lld",
                         (long long)n_words, m->cfg.vocab_size, (long long)want);
    if (!mask_allows_any(allowed, n_words, m->cfg.vocab_size))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "token mask: mask allows no token");
    FRT_TRY(frt_buffer_write(m->in_mask, 0, allowed, (size_t)n_words * sizeof(uint32_t), m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    m->mask_on = 1;
    return 0;
}

int frt_model_logprobs(frt_model *m, frt_logprobs *out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "logprobs: NULL argument");
    if (!m->logprobs_valid)
        return frt_error(FRT_ERR_STATE, "logprobs: the last sampling step did not ask for logprobs");
    return frt_model_output_read(m, "logprobs", out, sizeof *out);
}

static int is_eos(const frt_model *m, int32_t t)
{
    for (int i = 0; i < m->gen.n_eos; i++)
        if (m->gen.eos_ids[i] == t) return 1;
    return 0;
}

int frt_model_generate(frt_model *m, const frt_generate_params *p, frt_token_cb cb, void *user, int *n_out)
{
    if (!m || !p) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generate: NULL argument");
    if (p->max_tokens < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generate: max_tokens %d < 1", p->max_tokens);
    if (n_out) *n_out = 0;
    int32_t t;
    int pos = frt_model_position(m);
    FRT_TRY(pos);
    FRT_TRY(frt_model_sample(m, &p->sampling, &t));
    for (int i = 0;; i++, pos++) {
        if (n_out) *n_out = i + 1;
        int stop = cb ? cb(t, user) : 0;
        if (stop || i + 1 >= p->max_tokens || (!p->ignore_eos && is_eos(m, t))) return 0;
        if (pos >= m->max_seq) return 0; /* full: the token stays pending */
        FRT_TRY(frt_model_decode(m, &p->sampling, &t));
    }
}

int frt_model_reset(frt_model *m)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "reset: NULL model");
    FRT_TRY(token_model(m, "reset"));
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    b.pos = 0;
    b.pending = -1;
    b.has_logits = 0;
    FRT_TRY(frt_model_rows_rewritten(m));
    m->live_capsule = 0; /* the next steps rewrite the KV rows from 0 */
    m->logprobs_valid = 0;
    /* The recurrent entries start from zero; rows past the position are
     * never read. */
    FRT_TRY(frt_model_state_zero_recurrent(m));
    FRT_TRY(frt_buffer_fill(m->counts, 0, (size_t)m->cfg.vocab_size * sizeof(int32_t), 0, m->stream));
    FRT_TRY(frt_buffer_fill(m->seen, 0, (size_t)m->cfg.vocab_size, 0, m->stream));
    return boundary_write(m, &b);
}

int frt_model_seed(frt_model *m, uint64_t seed)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "seed: NULL model");
    FRT_TRY(token_model(m, "seed"));
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    b.rng[1] = seed;
    b.rng[0] = XXH64(&seed, sizeof seed, 0x5eed) | 1; /* a nonzero xorshift state */
    return boundary_write(m, &b);
}

int frt_model_position(const frt_model *m)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "position: NULL model");
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read((frt_model *)m, &b));
    return b.pos;
}

int frt_model_pending(const frt_model *m)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "pending: NULL model");
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read((frt_model *)m, &b));
    return b.pending;
}

int frt_model_tokens(const frt_model *m, int32_t *ids, int cap)
{
    if (!m || (!ids && cap)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "tokens: NULL argument");
    FRT_TRY(token_model(m, "tokens"));
    frt_model *mm = (frt_model *)m;
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(mm, &b));
    if (cap < b.pos) return frt_error(FRT_ERR_OUT_OF_RANGE, "tokens: room for %d, position is %d", cap, b.pos);
    if (b.pos) FRT_TRY(frt_buffer_read(mm->tokens, 0, ids, (size_t)b.pos * sizeof(int32_t), mm->stream));
    FRT_TRY(frt_stream_sync(mm->stream));
    return b.pos;
}

int frt_model_logits(frt_model *m, float *out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "logits: NULL argument");
    FRT_TRY(token_model(m, "logits"));
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    if (!b.has_logits) return frt_error(FRT_ERR_STATE, "logits: none (prefill first)");
    return frt_model_output_read(m, "logits", out, (size_t)m->cfg.vocab_size * sizeof(float));
}

int frt_model_aligned_len(const frt_model *m, int pos)
{
    if (!m || pos < 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "aligned_len: bad argument");
    return pos / m->C * m->C;
}

int frt_model_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "debug_hidden: NULL argument");
    if (!m->bk->debug_hidden) return frt_error(FRT_ERR_UNSUPPORTED, "debug_hidden: not supported by this backend");
    return m->bk->debug_hidden(m, idx, out, n);
}
