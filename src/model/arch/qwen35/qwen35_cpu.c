/*
 * arch/qwen35/qwen35_cpu.c - the Qwen3.5 hybrid forward pass on the cpu backend, f32.
 *
 * The math follows transformers 5.x models/qwen3_5/modeling_qwen3_5.py:
 *   layer:  x += mixer(rmsnorm_zc(x)); x += mlp(rmsnorm_zc(x))
 *   full attention (Qwen3_5Attention): q_proj gives per head [query | gate];
 *     q_norm / k_norm (zero-centred RMSNorm over head_dim); partial RoPE on the
 *     first rotary_dim dims (rotate-half); causal GQA softmax(q k^T / sqrt(hd)) v;
 *     out * sigmoid(gate); o_proj.
 *   Gated DeltaNet (Qwen3_5GatedDeltaNet): in_proj_qkv -> causal depthwise
 *     conv1d + SiLU -> split [q | k | v]; l2norm(q), l2norm(k) (eps 1e-6);
 *     beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias); the gated
 *     delta rule (chunked for prefill, recurrent for decode) on a state
 *     [nv, dk, dv]; RMSNormGated(o, z) = rmsnorm(o) * w * silu(z); out_proj.
 *   MLP: down(silu(gate(x)) * up(x)).
 *
 * With an FP8 KV cache (m->kv_dtype F8_E4M3, docs/fp8.md) the full-attention
 * layers compute their K and V rows in f32 as above (after k_norm and the
 * partial RoPE), quantize them into the cache with the static per-head
 * scales, and attend over the cache read back dequantized, the step's own
 * rows included (model/kv_fp8_cpu.h, shared with the dense family). The
 * Gated DeltaNet recurrent and conv states stay f32.
 *
 * With FP8 weights (params.weight_dtype FRT_WEIGHT_FP8, docs/fp8.md "FP8
 * weights") every Linear weight of the decoder layers (q, k, v, o_proj;
 * in_proj_qkv, _z, _b, _a, out_proj; gate, up, down_proj) is quantized at
 * load per output channel and held dequantized in f32, and a prefill
 * piece quantizes the inputs of those products per token
 * (model/fp8_weights.h, shared with the dense family); decode steps keep
 * their activations. The embedding, lm_head, norms, conv1d, A_log and
 * dt_bias stay f32.
 *
 * Every function here runs as a host task recorded into a graph variant: its
 * arguments (the model, a layer index) are baked at capture; everything that
 * changes between replays (start position, valid rows, the token to feed,
 * sampling parameters) is read from the boundary and step buffers.
 */
#include "model/arch/qwen35/qwen35.h"

#include "kernels/cpu/kernels_cpu.h"
#include "model/fp8_weights.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- weights ----------------------------------------------------------- */

typedef struct weight_loader {
    frt_model *m;
    float *arena;
    size_t used, cap; /* in floats */
    int pass;         /* 0: size, 1: fill */
} weight_loader;

/* Tensor `name` [d0, d1] (d1 1 for a vector) into the arena. linear: a
 * decoder-layer Linear weight, which may be held in FP8
 * (frt_fp8w_linear_to_f32: quantized at load with params.weight_dtype
 * FRT_WEIGHT_FP8); any other tensor must be of a float dtype. */
static int load_tensor(weight_loader *wl, const float **dst, const char *name, int64_t d0, int64_t d1, int linear)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", wl->m->cfg.weight_prefix, name);
    const frt_tensor *t = frt_checkpoint_find(wl->m->ckpt, full);
    if (!t && !strncmp(name, "lm_head", 7)) /* lm_head sits at the top level */
        t = frt_checkpoint_find(wl->m->ckpt, name);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", full);
    int64_t n = 1, n_expect = d0 * d1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    if (n != n_expect)
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has %lld elements, expected %lld", full,
                         (long long)n, (long long)n_expect);
    if (wl->pass == 0) FRT_TRY(linear ? frt_fp8w_linear_check(wl->m, t, full, d0, d1) : frt_fp8w_check_dtype(t, full));
    if (wl->pass == 1) {
        float *p = wl->arena + wl->used;
        FRT_TRY(linear ? frt_fp8w_linear_to_f32(wl->m, t, full, d0, d1, p) : frt_tensor_to_f32(t, p));
        *dst = p;
        frt_model_progress_weights(wl->m, t->nbytes);
    }
    wl->used += (size_t)n;
    return 0;
}

static int load_all(weight_loader *wl)
{
    frt_model *m = wl->m;
    const frt_model_config *c = &m->cfg;
    qwen35_weights *w = &qwen35_of(m)->w;
    int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int64_t hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int64_t nk = c->lin_n_k_heads, nv = c->lin_n_v_heads, dk = c->lin_k_head_dim, dv = c->lin_v_head_dim;
    wl->used = 0;
    FRT_TRY(load_tensor(wl, &w->embed, "embed_tokens.weight", V, H, 0));
    FRT_TRY(load_tensor(wl, &w->final_norm, "norm.weight", H, 1, 0));
    const int lm8 = m->params.lm_head_dtype == FRT_WEIGHT_FP8; /* docs/fp8.md "An FP8 LM head" */
    if (c->tie_word_embeddings && !lm8)
        w->lm_head = w->embed;
    else /* an FP8 head of a tied model: its own copy of the embedding, the lookup keeps f32 */
        FRT_TRY(load_tensor(wl, &w->lm_head, c->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight", V,
                            H, 0));
    if (lm8 && wl->pass == 1) /* the values the cuda backend's E4M3 GEMV multiplies by */
        FRT_TRY(frt_fp8w_round_trip((float *)w->lm_head, V, H, "lm_head"));
    for (int l = 0; l < c->n_layers; l++) {
        qwen35_layer_weights *lw = &w->layers[l];
        char n[160];
#define LOADX(field, suffix, d0, d1, linear)                                                        \
    do {                                                                                            \
        snprintf(n, sizeof n, "layers.%d.%s", l, suffix);                                           \
        FRT_TRY(load_tensor(wl, &lw->field, n, (d0), (d1), (linear)));                              \
    } while (0)
#define LOAD(field, suffix, count) LOADX(field, suffix, count, 1, 0) /* a vector or a non-Linear tensor */
#define LINEAR(field, suffix, d0, d1) LOADX(field, suffix, d0, d1, 1)
        LOAD(input_ln, "input_layernorm.weight", H);
        LOAD(post_ln, "post_attention_layernorm.weight", H);
        LINEAR(gate_proj, "mlp.gate_proj.weight", I, H);
        LINEAR(up_proj, "mlp.up_proj.weight", I, H);
        LINEAR(down_proj, "mlp.down_proj.weight", H, I);
        if (c->layer_types[l] == FRT_LAYER_FULL_ATTENTION) {
            int64_t qrows = nh * hd * (c->attn_output_gate ? 2 : 1);
            LINEAR(q_proj, "self_attn.q_proj.weight", qrows, H);
            LINEAR(k_proj, "self_attn.k_proj.weight", nkv * hd, H);
            LINEAR(v_proj, "self_attn.v_proj.weight", nkv * hd, H);
            LINEAR(o_proj, "self_attn.o_proj.weight", H, nh * hd);
            LOAD(q_norm, "self_attn.q_norm.weight", hd);
            LOAD(k_norm, "self_attn.k_norm.weight", hd);
        } else {
            int64_t ch = 2 * nk * dk + nv * dv;
            LINEAR(in_proj_qkv, "linear_attn.in_proj_qkv.weight", ch, H);
            LINEAR(in_proj_z, "linear_attn.in_proj_z.weight", nv * dv, H);
            LINEAR(in_proj_b, "linear_attn.in_proj_b.weight", nv, H);
            LINEAR(in_proj_a, "linear_attn.in_proj_a.weight", nv, H);
            LOAD(conv1d, "linear_attn.conv1d.weight", ch * c->lin_conv_kernel);
            LOAD(dt_bias, "linear_attn.dt_bias", nv);
            LOAD(A_log, "linear_attn.A_log", nv);
            LOAD(gdn_norm, "linear_attn.norm.weight", dv);
            LINEAR(out_proj, "linear_attn.out_proj.weight", H, nv * dv);
        }
#undef LINEAR
#undef LOAD
#undef LOADX
    }
    return 0;
}

static int cpu_load_weights(frt_model *m)
{
    qwen35_of(m)->w.layers = calloc((size_t)m->cfg.n_layers, sizeof *qwen35_of(m)->w.layers);
    if (!qwen35_of(m)->w.layers) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for the layer table");
    weight_loader wl = {.m = m, .pass = 0};
    FRT_TRY(load_all(&wl));
    size_t bytes = wl.used * sizeof(float);
    wl.arena = malloc(bytes ? bytes : 1);
    if (!wl.arena)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: cannot allocate %zu bytes of f32 weights", bytes);
    qwen35_of(m)->w.arena = wl.arena;
    qwen35_of(m)->w.bytes = bytes;
    m->weight_bytes = bytes;
    wl.pass = 1;
    FRT_TRY(load_all(&wl));
    m->weights_desc = frt_fp8w_desc(m); /* NULL for float weights */
    return 0;
}

/* ---- scratch ----------------------------------------------------------- */

static int max_i(int a, int b) { return a > b ? a : b; }

static int cpu_alloc_scratch(frt_model *m)
{
    const frt_model_config *c = &m->cfg;
    qwen35_scratch *s = &qwen35_of(m)->s;
    size_t rows = (size_t)m->C;
    int width = c->hidden_size;
    width = max_i(width, c->intermediate_size);
    width = max_i(width, c->n_heads * c->head_dim * 2);
    width = max_i(width, qwen35_of(m)->conv_channels);
    width = max_i(width, c->lin_n_v_heads * c->lin_v_head_dim);
    size_t H = (size_t)c->hidden_size, W = (size_t)width;
    float **all[] = {&s->t0, &s->t1, &s->t2, &s->t3, &s->q, &s->k, &s->v, &s->z, &s->o};
    if (!(s->x = malloc(rows * H * sizeof(float))) || !(s->h = malloc(rows * H * sizeof(float))))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for scratch");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!(*all[i] = malloc(rows * W * sizeof(float))))
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for scratch");
    size_t nv = (size_t)max_i(c->lin_n_v_heads, 1);
    if (!(s->g = malloc(rows * nv * sizeof(float))) || !(s->beta = malloc(rows * nv * sizeof(float))) ||
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
    if (!qwen35_of(m)) return;
    qwen35_scratch *s = &qwen35_of(m)->s;
    float *all[] = {s->x, s->h, s->t0, s->t1, s->t2, s->t3, s->q, s->k, s->v,
                    s->z, s->o, s->g, s->beta, s->debug_hidden, s->act, s->act_scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(s->pos);
    free(s->act8);
    frt_kv_fp8_cpu_free(&s->kv8);
    memset(s, 0, sizeof *s);
    free(qwen35_of(m)->w.arena);
    free(qwen35_of(m)->w.layers);
    memset(&qwen35_of(m)->w, 0, sizeof qwen35_of(m)->w);
}

/* ---- the blocks -------------------------------------------------------- */

/* The input x [n, dim] of products with FP8 weights in a prefill piece (f8:
 * docs/fp8.md "FP8 activations"): quantized per token and dequantized into
 * s->act, which the next call overwrites; x itself otherwise. */
static const float *fp8_input(const qwen35_scratch *s, const float *x, int n, int dim, int f8)
{
    if (!f8) return x;
    frt_fp8w_activations(s->act, s->act8, s->act_scale, x, n, dim);
    return s->act;
}

/* Full attention block for rows at positions p0..p0+n-1; h is the normed
 * input, the block output goes to out [n, hidden]. f8: the products'
 * inputs are quantized per token (fp8_input). */
static void attention_block(frt_model *m, int l, const float *h, float *out, int n, int p0, int f8)
{
    const frt_model_config *c = &m->cfg;
    const qwen35_layer_weights *lw = &qwen35_of(m)->w.layers[l];
    qwen35_scratch *s = &qwen35_of(m)->s;
    int H = c->hidden_size, nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
    int gated = c->attn_output_gate;
    int qw = nh * hd * (gated ? 2 : 1);

    h = fp8_input(s, h, n, H, f8);
    frt_cpu_matmul(s->t0, h, lw->q_proj, n, H, qw);              /* [n, nh, (q|gate)] */
    float *q = s->q, *gate = s->z;
    for (int t = 0; t < n; t++)
        for (int hh = 0; hh < nh; hh++) {
            const float *src = s->t0 + (size_t)t * qw + (size_t)hh * hd * (gated ? 2 : 1);
            memcpy(q + ((size_t)t * nh + hh) * hd, src, (size_t)hd * sizeof(float));
            if (gated) memcpy(gate + ((size_t)t * nh + hh) * hd, src + hd, (size_t)hd * sizeof(float));
        }
    const int fp8 = m->kv_dtype == FRT_DT_F8_E4M3;
    float *kc = frt_buffer_ptr(qwen35_of(m)->kv_k[l]), *vc = frt_buffer_ptr(qwen35_of(m)->kv_v[l]);
    size_t row = (size_t)nkv * hd;
    float *krow = fp8 ? s->kv8.k : kc + (size_t)p0 * row, *vrow = fp8 ? s->kv8.v : vc + (size_t)p0 * row;
    frt_cpu_matmul(krow, h, lw->k_proj, n, H, nkv * hd);         /* K straight into the cache (fp8: staged) */
    frt_cpu_matmul(vrow, h, lw->v_proj, n, H, nkv * hd);
    frt_cpu_rmsnorm(q, q, lw->q_norm, n * nh, hd, c->rms_norm_eps, 1);
    frt_cpu_rmsnorm(krow, krow, lw->k_norm, n * nkv, hd, c->rms_norm_eps, 1);
    int32_t *pos = s->pos;
    for (int t = 0; t < n; t++) pos[t] = p0 + t;
    frt_cpu_rope(q, n, nh, hd, c->rotary_dim, pos, c->rope_theta);
    frt_cpu_rope(krow, n, nkv, hd, c->rotary_dim, pos, c->rope_theta);
    if (fp8) { /* K after RoPE: the rows quantized into the cache, the cache read back dequantized */
        frt_kv_fp8_cpu_step(&s->kv8, l, frt_buffer_ptr(qwen35_of(m)->kv_k[l]), frt_buffer_ptr(qwen35_of(m)->kv_v[l]),
                            p0, n);
        kc = s->kv8.kdq;
        vc = s->kv8.vdq;
    }
    frt_cpu_attention(s->o, q, kc, vc, n, p0, nh, nkv, hd, 1.0f / sqrtf((float)hd));
    if (gated) frt_cpu_sigmoid_mul(s->o, gate, n * nh * hd);
    frt_cpu_matmul(out, fp8_input(s, s->o, n, nh * hd, f8), lw->o_proj, n, nh * hd, H);
}

/* Gated DeltaNet block. */
static void deltanet_block(frt_model *m, int l, const float *h, float *out, int n, int decode, int f8)
{
    const frt_model_config *c = &m->cfg;
    const qwen35_layer_weights *lw = &qwen35_of(m)->w.layers[l];
    qwen35_scratch *s = &qwen35_of(m)->s;
    int H = c->hidden_size, nk = c->lin_n_k_heads, nv = c->lin_n_v_heads;
    int dk = c->lin_k_head_dim, dv = c->lin_v_head_dim, ch = qwen35_of(m)->conv_channels;
    int kd = nk * dk, vd = nv * dv;

    h = fp8_input(s, h, n, H, f8);
    frt_cpu_matmul(s->t0, h, lw->in_proj_qkv, n, H, ch);
    frt_cpu_matmul(s->z, h, lw->in_proj_z, n, H, vd);
    frt_cpu_matmul(s->t2, h, lw->in_proj_b, n, H, nv);
    frt_cpu_matmul(s->t3, h, lw->in_proj_a, n, H, nv);
    frt_cpu_conv1d_causal(s->t1, s->t0, frt_buffer_ptr(qwen35_of(m)->gdn_conv[l]), lw->conv1d, n, ch, c->lin_conv_kernel);
    for (int t = 0; t < n; t++) {
        const float *r = s->t1 + (size_t)t * ch;
        memcpy(s->q + (size_t)t * kd, r, (size_t)kd * sizeof(float));
        memcpy(s->k + (size_t)t * kd, r + kd, (size_t)kd * sizeof(float));
        memcpy(s->v + (size_t)t * vd, r + 2 * kd, (size_t)vd * sizeof(float));
    }
    frt_cpu_l2norm(s->q, n * nk, dk, 1e-6f);
    frt_cpu_l2norm(s->k, n * nk, dk, 1e-6f);
    frt_cpu_gdn_gate(s->g, s->beta, s->t3, s->t2, lw->A_log, lw->dt_bias, n, nv);
    float *state = frt_buffer_ptr(qwen35_of(m)->gdn_state[l]);
    if (decode) {
        frt_cpu_gdr_recurrent(s->o, state, s->q, s->k, s->v, s->g, s->beta, n, nk, nv, dk, dv);
    } else {
        int rc = frt_cpu_gdr_chunked(s->o, state, s->q, s->k, s->v, s->g, s->beta, n, nk, nv, dk, dv, 64);
        if (rc < 0 && m->task_status == 0) m->task_status = rc; /* checked by the API after the step */
    }
    frt_cpu_rmsnorm_gated(s->o, s->o, s->z, lw->gdn_norm, n * nv, dv, c->rms_norm_eps);
    frt_cpu_matmul(out, fp8_input(s, s->o, n, vd, f8), lw->out_proj, n, vd, H);
}

static void mlp_block(frt_model *m, int l, const float *h, float *out, int n, int f8)
{
    const frt_model_config *c = &m->cfg;
    const qwen35_layer_weights *lw = &qwen35_of(m)->w.layers[l];
    qwen35_scratch *s = &qwen35_of(m)->s;
    int H = c->hidden_size, I = c->intermediate_size;
    h = fp8_input(s, h, n, H, f8);
    frt_cpu_matmul(s->t0, h, lw->gate_proj, n, H, I);
    frt_cpu_matmul(s->t1, h, lw->up_proj, n, H, I);
    frt_cpu_swiglu(s->t0, s->t0, s->t1, n * I);
    frt_cpu_matmul(out, fp8_input(s, s->t0, n, I, f8), lw->down_proj, n, I, H);
}

/* ---- host tasks -------------------------------------------------------- */

static void debug_record(frt_model *m, int idx, int n)
{
    qwen35_scratch *s = &qwen35_of(m)->s;
    if (!s->debug_hidden) return;
    size_t H = (size_t)m->cfg.hidden_size;
    memcpy(s->debug_hidden + (size_t)idx * m->C * H, s->x, (size_t)n * H * sizeof(float));
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
    frt_cpu_embedding(qwen35_of(m)->s.x, qwen35_of(m)->w.embed, ids, n, m->cfg.hidden_size);
    debug_record(m, 0, n);
}

static void task_layer(void *p)
{
    const frt_cpu_task *a = p;
    frt_model *m = a->m;
    const frt_model_config *c = &m->cfg;
    const qwen35_layer_weights *lw = &qwen35_of(m)->w.layers[a->layer];
    const frt_boundary *b = frt_buffer_ptr(m->boundary);
    qwen35_scratch *s = &qwen35_of(m)->s;
    int n = frt_cpu_step_rows(m, a->decode), H = c->hidden_size;
    /* FP8 activations in prefill only, never with block-wise weights (docs/fp8.md) */
    const int f8 = !a->decode && m->weights_desc && frt_fp8w_act_per_token(m);

    /* The mixers use t0..t3 and the temporaries internally and write their
     * output last, so t2 is free to receive it. */
    frt_cpu_rmsnorm(s->h, s->x, lw->input_ln, n, H, c->rms_norm_eps, 1);
    if (c->layer_types[a->layer] == FRT_LAYER_FULL_ATTENTION)
        attention_block(m, a->layer, s->h, s->t2, n, b->pos, f8);
    else
        deltanet_block(m, a->layer, s->h, s->t2, n, a->decode, f8);
    frt_cpu_add(s->x, s->t2, n * H);
    frt_cpu_rmsnorm(s->h, s->x, lw->post_ln, n, H, c->rms_norm_eps, 1);
    mlp_block(m, a->layer, s->h, s->t2, n, f8);
    frt_cpu_add(s->x, s->t2, n * H);
    debug_record(m, a->layer + 1, n);
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
    qwen35_scratch *s = &qwen35_of(m)->s;
    int n = frt_cpu_step_rows(m, a->decode), H = c->hidden_size;
    if (s->debug_hidden) {
        frt_cpu_rmsnorm(s->h, s->x, qwen35_of(m)->w.final_norm, n, H, c->rms_norm_eps, 1);
        memcpy(s->debug_hidden + (size_t)(c->n_layers + 1) * m->C * H, s->h, (size_t)n * H * sizeof(float));
    }
    const int logits = a->decode || !st->no_logits;
    if (logits) {
        const float *last = s->x + (size_t)(n - 1) * H;
        frt_cpu_rmsnorm(s->h, last, qwen35_of(m)->w.final_norm, 1, H, c->rms_norm_eps, 1);
        frt_cpu_matmul(frt_buffer_ptr(m->logits), s->h, qwen35_of(m)->w.lm_head, 1, H, c->vocab_size);
    }
    b->pos += n;
    b->has_logits = logits;
    b->pending = -1;
}

static const frt_cpu_forward cpu_forward = {task_embed, task_layer, task_final};

static int cpu_record_prefill(frt_stream *s, void *user) { return frt_cpu_record_prefill(s, user, &cpu_forward); }
static int cpu_record_decode(frt_stream *s, void *user) { return frt_cpu_record_decode(s, user, &cpu_forward); }

static int cpu_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    if (!qwen35_of(m)->s.debug_hidden) return frt_error(FRT_ERR_STATE, "debug_hidden: not enabled (params.debug_hidden)");
    if (idx < 0 || idx > m->cfg.n_layers + 1 || n < 1 || n > qwen35_of(m)->s.debug_rows)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "debug_hidden: index %d rows %d out of range", idx, n);
    size_t H = (size_t)m->cfg.hidden_size;
    memcpy(out, qwen35_of(m)->s.debug_hidden + (size_t)idx * m->C * H, (size_t)n * H * sizeof(float));
    return 0;
}

const frt_arch_backend frt_qwen35_cpu_backend = {
    .name = "cpu",
    .kv_dtype = FRT_DT_F32,
    .state_dtypes = "weights=f32,kv=f32,gdn=f32,conv=f32",
    .state_dtypes_kv_fp8 = "weights=f32,kv=f8_e4m3-satfinite,kv_scale=per-head-static,gdn=f32,conv=f32",
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
