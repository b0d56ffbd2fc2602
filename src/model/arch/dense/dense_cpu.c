/*
 * arch/dense/dense_cpu.c - the dense family's forward pass on the cpu
 * backend, f32 (the reference the CUDA backend and the goldens are checked
 * against).
 *
 * With an FP8 KV cache (m->kv_dtype F8_E4M3, docs/fp8.md) the step's K and
 * V rows are computed in f32 as above, quantized into the cache with the
 * static per-head scales, and attention reads every cache row it uses
 * dequantized (the step's own rows too), so a row's value never depends on
 * whether it came from this step or the cache (model/kv_fp8_cpu.h, shared
 * with the hybrid).
 *
 * The math follows transformers 5.x modeling_llama.py (LlamaDecoderLayer,
 * LlamaAttention, LlamaMLP, LlamaRMSNorm), with the switches of dense.h:
 *   layer:  x += o_proj(attn(rmsnorm(x))) [+ o_bias]; x += mlp(rmsnorm(x))
 *   rmsnorm(x) = w * (x * rsqrt(mean(x^2) + eps))   (plain weight)
 *   attention: q = q_proj h [+ q_bias], k, v likewise (qwen2 / llama
 *     attention_bias); qwen3: q_norm / k_norm, RMSNorm over head_dim per
 *     head, before RoPE (Qwen3Attention); RoPE rotate-half on the whole head
 *     from the inv_freq table of dense.c (default or llama3); causal GQA
 *     softmax(q k^T / sqrt(head_dim)) v (eager_attention_forward, repeat_kv).
 *   MLP: down(silu(gate(h)) * up(h)).
 *   logits = lm_head(rmsnorm(x_last)) (lm_head = embed_tokens when tied).
 *
 * Every function here runs as a host task recorded into a graph variant: its
 * arguments (the model, a layer index) are baked at capture; everything that
 * changes between replays (start position, valid rows, the token to feed,
 * sampling parameters) is read from the boundary and step buffers.
 */
#include "model/arch/dense/dense.h"

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rope_freqs.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- weights ----------------------------------------------------------- */

typedef struct weight_loader {
    frt_model *m;
    unsigned *fp8; /* the current layer's dense_layer_weights.fp8 */
    float *arena;
    size_t used; /* in floats */
    int pass;    /* 0: size and check, 1: fill */
} weight_loader;

/* Finds prefix+name (lm_head also at the top level), checks its shape
 * against [d0] (d1 == 0) or [d0, d1], and in pass 1 converts it to f32. A
 * decoder-layer Linear weight (linear: its DENSE_FP8_* bit, 0 for other
 * tensors) may be FP8 with its scales, or is quantized at load with
 * params.weight_dtype FRT_WEIGHT_FP8 (model/fp8_weights.c); the bit is set in
 * *wl->fp8 when it is held in FP8. */
static int load_tensor(weight_loader *wl, const float **dst, const char *name, int64_t d0, int64_t d1, unsigned linear)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", wl->m->cfg.weight_prefix, name);
    const frt_tensor *t = frt_checkpoint_find(wl->m->ckpt, full);
    if (!t && !strncmp(name, "lm_head", 7)) t = frt_checkpoint_find(wl->m->ckpt, name);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", full);
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char have[96] = "[", want[64];
        for (int i = 0; i < t->ndim && i < 4; i++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        snprintf(have + strlen(have), sizeof have - strlen(have), "]");
        if (ndim == 2)
            snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
        else
            snprintf(want, sizeof want, "[%lld]", (long long)d0);
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has shape %s, expected %s", full, have, want);
    }
    if (linear && wl->pass == 0) FRT_TRY(frt_fp8w_linear_check(wl->m, t, full, d0, d1));
    if (!linear) FRT_TRY(frt_fp8w_check_dtype(t, full));
    int64_t n = d0 * (d1 ? d1 : 1);
    if (wl->pass == 1) {
        float *p = wl->arena + wl->used;
        FRT_TRY(linear ? frt_fp8w_linear_to_f32(wl->m, t, full, d0, d1, p) : frt_tensor_to_f32(t, p));
        *dst = p;
        if (linear && frt_fp8w_is_fp8(wl->m, t)) *wl->fp8 |= linear;
    }
    wl->used += (size_t)n;
    return 0;
}

static int load_all(weight_loader *wl)
{
    frt_model *m = wl->m;
    const frt_model_config *c = &m->cfg;
    dense_weights *w = &dense_of(m)->w;
    int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    wl->used = 0;
    FRT_TRY(load_tensor(wl, &w->embed, "embed_tokens.weight", V, H, 0));
    FRT_TRY(load_tensor(wl, &w->final_norm, "norm.weight", H, 0, 0));
    const int lm8 = m->params.lm_head_dtype == FRT_WEIGHT_FP8; /* docs/fp8.md "An FP8 LM head" */
    if (c->tie_word_embeddings && !lm8)
        w->lm_head = w->embed;
    else /* an FP8 head of a tied model: its own copy of the embedding, the lookup keeps f32 */
        FRT_TRY(load_tensor(wl, &w->lm_head, c->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight", V,
                            H, 0));
    if (lm8 && wl->pass == 1) /* the values the cuda backend's E4M3 GEMV multiplies by */
        FRT_TRY(frt_fp8w_round_trip((float *)w->lm_head, V, H, "lm_head"));
    for (int l = 0; l < c->n_layers; l++) {
        dense_layer_weights *lw = &w->layers[l];
        char n[160];
        lw->fp8 = 0;
        wl->fp8 = &lw->fp8;
#define LOAD(field, suffix, d0, d1, bit)                                                            \
    do {                                                                                            \
        snprintf(n, sizeof n, "layers.%d.%s", l, suffix);                                           \
        FRT_TRY(load_tensor(wl, &lw->field, n, (d0), (d1), (bit)));                                 \
    } while (0)
        LOAD(input_ln, "input_layernorm.weight", H, 0, 0);
        LOAD(post_ln, "post_attention_layernorm.weight", H, 0, 0);
        LOAD(q_proj, "self_attn.q_proj.weight", qd, H, DENSE_FP8_Q);
        LOAD(k_proj, "self_attn.k_proj.weight", kvd, H, DENSE_FP8_K);
        LOAD(v_proj, "self_attn.v_proj.weight", kvd, H, DENSE_FP8_V);
        LOAD(o_proj, "self_attn.o_proj.weight", H, qd, DENSE_FP8_O);
        if (c->attention_bias) {
            LOAD(q_bias, "self_attn.q_proj.bias", qd, 0, 0);
            LOAD(k_bias, "self_attn.k_proj.bias", kvd, 0, 0);
            LOAD(v_bias, "self_attn.v_proj.bias", kvd, 0, 0);
        }
        if (c->o_proj_bias) LOAD(o_bias, "self_attn.o_proj.bias", H, 0, 0);
        if (c->qk_norm) {
            LOAD(q_norm, "self_attn.q_norm.weight", c->head_dim, 0, 0);
            LOAD(k_norm, "self_attn.k_norm.weight", c->head_dim, 0, 0);
        }
        LOAD(gate_proj, "mlp.gate_proj.weight", I, H, DENSE_FP8_GATE);
        LOAD(up_proj, "mlp.up_proj.weight", I, H, DENSE_FP8_UP);
        LOAD(down_proj, "mlp.down_proj.weight", H, I, DENSE_FP8_DOWN);
#undef LOAD
    }
    return 0;
}

static int cpu_load_weights(frt_model *m)
{
    dense *d = dense_of(m);
    d->w.layers = calloc((size_t)m->cfg.n_layers, sizeof *d->w.layers);
    if (!d->w.layers) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for the layer table");
    weight_loader wl = {.m = m, .pass = 0};
    FRT_TRY(load_all(&wl)); /* every name and shape checked before anything is allocated */
    size_t bytes = wl.used * sizeof(float);
    wl.arena = malloc(bytes ? bytes : 1);
    if (!wl.arena) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: cannot allocate %zu bytes of f32 weights", bytes);
    d->w.arena = wl.arena;
    d->w.bytes = bytes;
    m->weight_bytes = bytes;
    wl.pass = 1;
    FRT_TRY(load_all(&wl));
    m->weights_desc = frt_fp8w_desc(m);
    return 0;
}

/* ---- scratch ----------------------------------------------------------- */

static int max_i(int a, int b) { return a > b ? a : b; }

static int cpu_alloc_scratch(frt_model *m)
{
    const frt_model_config *c = &m->cfg;
    dense_scratch *s = &dense_of(m)->s;
    size_t rows = (size_t)m->C, H = (size_t)c->hidden_size;
    size_t W = (size_t)max_i(max_i(c->hidden_size, c->intermediate_size), c->n_heads * c->head_dim);
    size_t Q = (size_t)c->n_heads * c->head_dim;
    if (!(s->x = malloc(rows * H * sizeof(float))) || !(s->h = malloc(rows * H * sizeof(float))) ||
        !(s->t0 = malloc(rows * W * sizeof(float))) || !(s->t1 = malloc(rows * W * sizeof(float))) ||
        !(s->t2 = malloc(rows * W * sizeof(float))) || !(s->q = malloc(rows * Q * sizeof(float))) ||
        !(s->o = malloc(rows * Q * sizeof(float))) ||
        !(s->pos = malloc(rows * sizeof(int32_t))))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for scratch");
    if (m->kv_dtype == FRT_DT_F8_E4M3) FRT_TRY(frt_kv_fp8_cpu_alloc(m, &s->kv8));
    if (m->weights_desc && (!(s->act = malloc(rows * W * sizeof(float))) || !(s->act8 = malloc(rows * W)) ||
                            !(s->act_scale = malloc(rows * sizeof(float)))))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for the FP8 activation scratch");
    if (m->params.debug_hidden) {
        s->debug_hidden = malloc((size_t)(c->n_layers + 2) * rows * H * sizeof(float));
        if (!s->debug_hidden) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for debug hidden");
    }
    return 0;
}

static void cpu_free(frt_model *m)
{
    dense *d = dense_of(m);
    if (!d) return;
    dense_scratch *s = &d->s;
    float *all[] = {s->x, s->h, s->t0, s->t1, s->t2, s->q, s->o, s->debug_hidden, s->act, s->act_scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(s->pos);
    free(s->act8);
    frt_kv_fp8_cpu_free(&s->kv8);
    memset(s, 0, sizeof *s);
    free(d->w.arena);
    free(d->w.layers);
    memset(&d->w, 0, sizeof d->w);
}

/* ---- the blocks -------------------------------------------------------- */

/* y[r, :] += b for each of n rows of width dim (a Linear's bias). */
static void add_bias(float *y, const float *b, int n, int dim)
{
    if (!b) return;
    for (int r = 0; r < n; r++) frt_cpu_add(y + (size_t)r * dim, b, dim);
}

/* y [n, out] = x [n, in] . w^T for a decoder-layer Linear weight; fp8
 * (the weight is FP8 and the step a prefill piece): x's rows quantized per
 * token first (frt_fp8w_activations, docs/fp8.md "FP8 activations"). */
static void linear(dense_scratch *s, float *y, const float *x, const float *w, int n, int in, int out, unsigned fp8)
{
    if (fp8) {
        frt_fp8w_activations(s->act, s->act8, s->act_scale, x, n, in);
        x = s->act;
    }
    frt_cpu_matmul(y, x, w, n, in, out);
}

/* Attention block for rows at positions p0..p0+n-1; h is the normed input,
 * the block output (o_proj, with its bias) goes to out [n, hidden]. K and V
 * are written straight into the cache rows p0..p0+n-1. f8: the DENSE_FP8_*
 * bits of the products whose inputs are quantized (a prefill piece's FP8
 * weights; 0 in decode). */
static void attention_block(frt_model *m, int l, const float *h, float *out, int n, int p0, unsigned f8)
{
    const frt_model_config *c = &m->cfg;
    dense *d = dense_of(m);
    const dense_layer_weights *lw = &d->w.layers[l];
    dense_scratch *s = &d->s;
    int H = c->hidden_size, nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
    int qd = nh * hd, kvd = nkv * hd;

    const int fp8 = m->kv_dtype == FRT_DT_F8_E4M3;
    float *kc = frt_buffer_ptr(d->kv_k[l]), *vc = frt_buffer_ptr(d->kv_v[l]);
    float *krow = fp8 ? s->kv8.k : kc + (size_t)p0 * kvd, *vrow = fp8 ? s->kv8.v : vc + (size_t)p0 * kvd;
    linear(s, s->q, h, lw->q_proj, n, H, qd, f8 & DENSE_FP8_Q);
    linear(s, krow, h, lw->k_proj, n, H, kvd, f8 & DENSE_FP8_K);
    linear(s, vrow, h, lw->v_proj, n, H, kvd, f8 & DENSE_FP8_V);
    add_bias(s->q, lw->q_bias, n, qd);
    add_bias(krow, lw->k_bias, n, kvd);
    add_bias(vrow, lw->v_bias, n, kvd);
    if (lw->q_norm) {
        frt_cpu_rmsnorm(s->q, s->q, lw->q_norm, n * nh, hd, c->rms_norm_eps, 0);
        frt_cpu_rmsnorm(krow, krow, lw->k_norm, n * nkv, hd, c->rms_norm_eps, 0);
    }
    for (int t = 0; t < n; t++) s->pos[t] = p0 + t;
    frt_cpu_rope_freqs(s->q, n, nh, hd, hd, s->pos, d->inv_freq);
    frt_cpu_rope_freqs(krow, n, nkv, hd, hd, s->pos, d->inv_freq);
    if (fp8) { /* quantize the step's rows into the cache, read the cache back dequantized */
        frt_kv_fp8_cpu_step(&s->kv8, l, frt_buffer_ptr(d->kv_k[l]), frt_buffer_ptr(d->kv_v[l]), p0, n);
        kc = s->kv8.kdq;
        vc = s->kv8.vdq;
    }
    frt_cpu_attention(s->o, s->q, kc, vc, n, p0, nh, nkv, hd, 1.0f / sqrtf((float)hd));
    linear(s, out, s->o, lw->o_proj, n, qd, H, f8 & DENSE_FP8_O);
    add_bias(out, lw->o_bias, n, H);
}

static void mlp_block(frt_model *m, int l, const float *h, float *out, int n, unsigned f8)
{
    const frt_model_config *c = &m->cfg;
    const dense_layer_weights *lw = &dense_of(m)->w.layers[l];
    dense_scratch *s = &dense_of(m)->s;
    int H = c->hidden_size, I = c->intermediate_size;
    linear(s, s->t0, h, lw->gate_proj, n, H, I, f8 & DENSE_FP8_GATE);
    linear(s, s->t1, h, lw->up_proj, n, H, I, f8 & DENSE_FP8_UP);
    frt_cpu_swiglu(s->t0, s->t0, s->t1, n * I);
    linear(s, out, s->t0, lw->down_proj, n, I, H, f8 & DENSE_FP8_DOWN);
}

/* ---- host tasks -------------------------------------------------------- */

static void debug_record(frt_model *m, int idx, const float *src, int n)
{
    dense_scratch *s = &dense_of(m)->s;
    if (!s->debug_hidden) return;
    size_t H = (size_t)m->cfg.hidden_size;
    memcpy(s->debug_hidden + (size_t)idx * m->C * H, src, (size_t)n * H * sizeof(float));
    s->debug_rows = n;
}

/* Embedding of the step's tokens into the residual stream; the ids are
 * appended to the token journal (frt_cpu_journal). */
static void task_embed(void *p)
{
    const frt_cpu_task *a = p;
    frt_model *m = a->m;
    frt_boundary *b = frt_buffer_ptr(m->boundary);
    int n = frt_cpu_step_rows(m, a->decode);
    const int32_t *ids = a->decode ? &b->pending : frt_buffer_ptr(m->in_ids);
    frt_cpu_journal(m, ids, n, a->decode);
    frt_cpu_embedding(dense_of(m)->s.x, dense_of(m)->w.embed, ids, n, m->cfg.hidden_size);
    debug_record(m, 0, dense_of(m)->s.x, n);
}

static void task_layer(void *p)
{
    const frt_cpu_task *a = p;
    frt_model *m = a->m;
    const frt_model_config *c = &m->cfg;
    const dense_layer_weights *lw = &dense_of(m)->w.layers[a->layer];
    const frt_boundary *b = frt_buffer_ptr(m->boundary);
    dense_scratch *s = &dense_of(m)->s;
    int n = frt_cpu_step_rows(m, a->decode), H = c->hidden_size;
    /* FP8 activations in prefill only, never with block-wise weights (docs/fp8.md) */
    const unsigned f8 = a->decode || !frt_fp8w_act_per_token(m) ? 0 : lw->fp8;

    frt_cpu_rmsnorm(s->h, s->x, lw->input_ln, n, H, c->rms_norm_eps, 0);
    attention_block(m, a->layer, s->h, s->t2, n, b->pos, f8);
    frt_cpu_add(s->x, s->t2, n * H);
    frt_cpu_rmsnorm(s->h, s->x, lw->post_ln, n, H, c->rms_norm_eps, 0);
    mlp_block(m, a->layer, s->h, s->t2, n, f8);
    frt_cpu_add(s->x, s->t2, n * H);
    debug_record(m, a->layer + 1, s->x, n);
}

/* Final norm and lm_head on the last valid row (skipped for a prefill
 * piece that is not its call's last: step.no_logits); advances the
 * position. */
static void task_final(void *p)
{
    const frt_cpu_task *a = p;
    frt_model *m = a->m;
    const frt_model_config *c = &m->cfg;
    frt_boundary *b = frt_buffer_ptr(m->boundary);
    const frt_step_args *st = frt_buffer_ptr(m->step);
    dense *d = dense_of(m);
    dense_scratch *s = &d->s;
    int n = frt_cpu_step_rows(m, a->decode), H = c->hidden_size;
    if (s->debug_hidden) {
        frt_cpu_rmsnorm(s->h, s->x, d->w.final_norm, n, H, c->rms_norm_eps, 0);
        debug_record(m, c->n_layers + 1, s->h, n);
    }
    const int logits = a->decode || !st->no_logits;
    if (logits) {
        const float *last = s->x + (size_t)(n - 1) * H;
        frt_cpu_rmsnorm(s->h, last, d->w.final_norm, 1, H, c->rms_norm_eps, 0);
        frt_cpu_matmul(frt_buffer_ptr(m->logits), s->h, d->w.lm_head, 1, H, c->vocab_size);
    }
    b->pos += n;
    b->has_logits = logits;
    b->pending = -1;
}

static const frt_cpu_forward cpu_forward = {task_embed, task_layer, task_final};

static int cpu_record_prefill(frt_stream *s, void *user) { return frt_cpu_record_prefill(s, user, &cpu_forward); }
static int cpu_record_decode(frt_stream *s, void *user) { return frt_cpu_record_decode(s, user, &cpu_forward); }

/* idx 0: the embedding output; 1..n_layers: the output of layer idx-1
 * (idx n_layers: the last layer's raw output); n_layers + 1: the final
 * RMSNorm of it. Rows of the last prefill piece. */
static int cpu_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    dense_scratch *s = &dense_of(m)->s;
    if (!s->debug_hidden) return frt_error(FRT_ERR_STATE, "debug_hidden: not enabled (params.debug_hidden)");
    if (idx < 0 || idx > m->cfg.n_layers + 1 || n < 1 || n > s->debug_rows)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "debug_hidden: index %d rows %d out of range", idx, n);
    size_t H = (size_t)m->cfg.hidden_size;
    memcpy(out, s->debug_hidden + (size_t)idx * m->C * H, (size_t)n * H * sizeof(float));
    return 0;
}

const frt_arch_backend frt_dense_cpu_backend = {
    .name = "cpu",
    .kv_dtype = FRT_DT_F32,
    .state_dtypes = "weights=f32,kv=f32",
    .state_dtypes_kv_fp8 = "weights=f32,kv=f8_e4m3-satfinite,kv_scale=per-head-static",
    .weights_fp8 = 1,
    .lm_head_fp8 = 1, /* the lm_head quantized and dequantized at load (frt_fp8w_round_trip) */
    .load_weights = cpu_load_weights,
    .alloc_scratch = cpu_alloc_scratch,
    .free = cpu_free,
    .record_prefill = cpu_record_prefill,
    .record_decode = cpu_record_decode,
    .record_sample = frt_cpu_record_sample,
    .debug_hidden = cpu_debug_hidden,
    .binds_slots = 1,
    .layer_waits = 1, /* frt_cpu_record_prefill */
};
