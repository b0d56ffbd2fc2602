/*
 * arch/qwen35/qwen35_cuda_load.c - the Qwen3.5 CUDA backend at load: sizes,
 * the weight arena (bf16, or the Linear weights as E4M3 codes + per-row
 * scales with FP8 weights), the cuBLASLt GEMM plans of every shape (and
 * the FP8 prefill GEMM's), the prefill groups' plans checked on the device
 * (frt_qwen35_cu_prefill_group), scratch, and the fingerprint of the plans
 * chosen (qwen35_cuda.h).
 */
#include "model/arch/qwen35/qwen35_cuda.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemv_fp8.h"
#include "model/arch/group_cuda.h"
#include "model/arch/qwen35/qwen35_glue.h"
#include "model/fp8_weights.h"
#include "model/kv_scales.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sizes ------------------------------------------------------------- */

/* Whether the model has full-attention layers, Gated DeltaNet layers. */
static void layer_kinds(const frt_model *m, int *has_full, int *has_lin)
{
    *has_full = *has_lin = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        if (m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            *has_full = 1;
        else
            *has_lin = 1;
    }
}

static int set_sizes(frt_model *m, cu_model *c)
{
    const frt_model_config *cfg = &m->cfg;
    c->H = cfg->hidden_size;
    c->I = cfg->intermediate_size;
    c->V = cfg->vocab_size;
    c->L = cfg->n_layers;
    c->nh = cfg->n_heads;
    c->nkv = cfg->n_kv_heads;
    c->hd = cfg->head_dim;
    c->gated = cfg->attn_output_gate ? 1 : 0;
    c->ad = c->nh * c->hd;
    c->qw = c->ad * (c->gated ? 2 : 1);
    c->kvw = c->nkv * c->hd;
    c->nk = cfg->lin_n_k_heads;
    c->nv = cfg->lin_n_v_heads;
    c->dk = cfg->lin_k_head_dim;
    c->dv = cfg->lin_v_head_dim;
    c->kd = c->nk * c->dk;
    c->vd = c->nv * c->dv;
    c->ch = qwen35_of(m)->conv_channels;
    c->ba_w = c->wfp8 ? round16(2 * c->nv) : round8(2 * c->nv); /* FP8: the E4M3 GEMM's 16-row multiple */
    c->K = cfg->lin_conv_kernel;
    c->eps = cfg->rms_norm_eps;
    c->theta = cfg->rope_theta;
    c->rot = cfg->rotary_dim;
    c->scale = 1.0f / sqrtf((float)c->hd);

    int has_full, has_lin;
    layer_kinds(m, &has_full, &has_lin);
    if (c->L < 1 || c->H < 1 || c->I < 1 || c->V < 1)
        return frt_error(FRT_ERR_FORMAT, "cuda model: empty model (layers %d hidden %d)", c->L, c->H);
    /* cuBLASLt rows must be 16-byte aligned: every GEMM dim a multiple of 8. */
    struct {
        const char *what;
        int v;
        int needed;
    } dims[] = {
        {"hidden_size", c->H, 1},
        {"intermediate_size", c->I, 1},
        {"vocab_size", c->V, 1},
        {"n_heads * head_dim * (1 + gate)", c->qw, has_full},
        {"n_heads * head_dim", c->ad, has_full},
        {"n_kv_heads * head_dim", c->kvw, has_full},
        {"conv channels", c->ch, has_lin},
        {"n_v_heads * v_head_dim", c->vd, has_lin},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].needed && (dims[i].v < 1 || dims[i].v % 8))
            return frt_error(FRT_ERR_UNSUPPORTED,
                             "cuda model: %s = %d is not a positive multiple of 8 (cuBLASLt rows must be "
                             "16-byte aligned)",
                             dims[i].what, dims[i].v);
    for (size_t i = 0; c->wfp8 && i < sizeof dims / sizeof dims[0]; i++) /* the Linear layers' dims */
        if (dims[i].needed && i != 2 && dims[i].v % 16) /* i 2: vocab_size, the bf16 lm_head's */
            return frt_error(FRT_ERR_UNSUPPORTED,
                             "cuda model: FP8 weights need %s = %d a multiple of 16 (the E4M3 GEMV's and cuBLASLt "
                             "FP8's 16-byte rows)",
                             dims[i].what, dims[i].v);
    if (has_full && (c->hd % 32 || c->hd > 256 || c->hd < 32))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda model: head_dim %d (the CUDA attention takes multiples of 32 up to 256)", c->hd);
    if (has_full && (c->rot < 2 || c->rot % 2 || c->rot > c->hd || c->rot > FRT_CUDA_ROPE_MAX_ROT))
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda model: rotary dim %d (even, 2..min(head_dim, %d))", c->rot,
                         FRT_CUDA_ROPE_MAX_ROT);
    if (has_lin && (c->nk < 1 || c->nv < 1 || c->nv % c->nk || c->dk < 1 || c->dv < 1 || c->K < 1))
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda model: Gated DeltaNet heads %d/%d dims %d/%d kernel %d", c->nk,
                         c->nv, c->dk, c->dv, c->K);
    return 0;
}

/* ---- weights ----------------------------------------------------------- */

typedef struct wload {
    frt_model *m;
    cu_model *c;
    int pass;      /* 0: size, 1: upload */
    size_t used;   /* bytes reserved so far */
    char *base;    /* device base of the arena (pass 1) */
} wload;

static size_t reserve(wload *wl, size_t bytes)
{
    size_t off = wl->used;
    wl->used += align_up(bytes ? bytes : 1);
    return off;
}

static int find_tensor(wload *wl, const char *name, int64_t n_expect, const frt_tensor **out)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", wl->m->cfg.weight_prefix, name);
    const frt_tensor *t = frt_checkpoint_find(wl->m->ckpt, full);
    if (!t && !strncmp(name, "lm_head", 7)) /* lm_head sits at the top level */
        t = frt_checkpoint_find(wl->m->ckpt, name);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", full);
    int64_t n = frt_tensor_numel(t);
    if (n != n_expect)
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has %lld elements, expected %lld", full,
                         (long long)n, (long long)n_expect);
    if (!frt_dtype_is_float(t->dtype))
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' is %s, not a float dtype", full,
                         frt_dtype_name(t->dtype));
    FRT_TRY(frt_fp8w_check_dtype(t, full)); /* FP8 codes only through put_lin_fp8 */
    *out = t;
    return 0;
}

/* Uploads tensor t at byte offset off of the arena, as bf16 (to_bf16) or
 * f32. A tensor already in the target dtype is copied as is; any other float
 * dtype goes through f32 (and round-to-nearest-even to bf16). */
static int upload(wload *wl, const frt_tensor *t, size_t off, int to_bf16)
{
    frt_model *m = wl->m;
    size_t n = (size_t)frt_tensor_numel(t);
    frt_dtype want = to_bf16 ? FRT_DT_BF16 : FRT_DT_F32;
    if (t->dtype == want) {
        FRT_TRY(frt_buffer_write(wl->c->wbuf, off, t->data, t->nbytes, m->stream));
        return 0;
    }
    float *f = malloc(n * sizeof(float) + 1);
    if (!f) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory converting '%s'", t->name);
    int rc = frt_tensor_to_f32(t, f);
    if (rc == 0 && to_bf16) {
        uint16_t *h = malloc(n * sizeof(uint16_t) + 1);
        if (!h) {
            free(f);
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory converting '%s'", t->name);
        }
        frt_f32_array_to_bf16(f, h, n);
        rc = frt_buffer_write(wl->c->wbuf, off, h, n * sizeof(uint16_t), m->stream);
        if (rc == 0) rc = frt_stream_sync(m->stream); /* h must outlive the copy */
        free(h);
    } else if (rc == 0) {
        rc = frt_buffer_write(wl->c->wbuf, off, f, n * sizeof(float), m->stream);
        if (rc == 0) rc = frt_stream_sync(m->stream);
    }
    free(f);
    return rc;
}

/* Reserves and (pass 1) uploads one tensor; *dst receives its device address
 * in pass 1. */
static int put(wload *wl, const char *name, int64_t n, int to_bf16, const void **dst)
{
    const frt_tensor *t = NULL;
    FRT_TRY(find_tensor(wl, name, n, &t));
    size_t off = reserve(wl, (size_t)n * (to_bf16 ? 2 : 4));
    if (wl->pass == 1) {
        FRT_TRY(upload(wl, t, off, to_bf16));
        *dst = wl->base + off;
        frt_model_progress_weights(wl->m, t->nbytes);
    }
    return 0;
}

#define PUT_M(field, name, n)                                                                        \
    do {                                                                                             \
        const void *p_ = NULL;                                                                       \
        FRT_TRY(put(wl, (name), (n), 1, &p_));                                                       \
        (field) = (const uint16_t *)p_;                                                              \
    } while (0)
#define PUT_V(field, name, n)                                                                        \
    do {                                                                                             \
        const void *p_ = NULL;                                                                       \
        FRT_TRY(put(wl, (name), (n), 0, &p_));                                                       \
        (field) = (const float *)p_;                                                                 \
    } while (0)

/* A Linear weight of layer l as held: [d0, d1]; name under "layers.L.";
 * name_a non-NULL: the fused in_proj_b | a (name in_proj_b's, name_a
 * in_proj_a's, nv rows each, then zero rows up to d0 = ba_w). */
typedef struct lin_spec {
    const char *name, *name_a;
    int64_t d0, d1;
    cu_lin *dst;
} lin_spec;

/* One Linear weight as bf16 (put; the fused b | a: b's rows, a's rows, the
 * arena's zeros). */
static int put_lin_bf16(wload *wl, int l, const lin_spec *sp)
{
    char n[160];
    snprintf(n, sizeof n, "layers.%d.%s", l, sp->name);
    const void *p = NULL;
    if (!sp->name_a) {
        FRT_TRY(put(wl, n, sp->d0 * sp->d1, 1, &p));
        sp->dst->w = (const uint16_t *)p;
        return 0;
    }
    const int64_t nv = wl->c->nv, H = sp->d1;
    const frt_tensor *tb = NULL, *ta = NULL;
    FRT_TRY(find_tensor(wl, n, nv * H, &tb));
    snprintf(n, sizeof n, "layers.%d.%s", l, sp->name_a);
    FRT_TRY(find_tensor(wl, n, nv * H, &ta));
    size_t off = reserve(wl, (size_t)sp->d0 * (size_t)H * 2);
    if (wl->pass == 1) {
        FRT_TRY(upload(wl, tb, off, 1));
        FRT_TRY(upload(wl, ta, off + (size_t)nv * (size_t)H * 2, 1));
        sp->dst->w = (const uint16_t *)(const void *)(wl->base + off);
        frt_model_progress_weights(wl->m, tb->nbytes + ta->nbytes);
    }
    return 0;
}

/* Tensor name (under layers.L.) as d0 rows of E4M3 codes at byte woff and
 * scales at soff of the arena (frt_fp8w_arena_put). */
static int put_fp8(wload *wl, int l, const char *name, int64_t d0, int64_t d1, size_t woff, size_t soff)
{
    frt_model *m = wl->m;
    char full[256];
    snprintf(full, sizeof full, "%slayers.%d.%s", m->cfg.weight_prefix, l, name);
    FRT_TRY(frt_fp8w_arena_put(m, wl->c->wbuf, wl->pass, full, d0, d1, woff, soff));
    if (wl->pass == 1) frt_model_progress_weights(m, frt_checkpoint_find(m->ckpt, full)->nbytes);
    return 0;
}

/* With FP8 weights: the n Linear weights of g as E4M3 codes lying end to
 * end, then their per-row scales end to end (d0, d1 multiples of 16: every
 * piece stays 16-byte aligned), so q | k | v and in_proj_qkv | z | b | a
 * are one matrix for the fused prefill GEMM (the check at load). The fused
 * b | a's padding rows keep the arena's zeros: code 0, scale 0 (their
 * outputs are never read). */
static int put_lin_fp8(wload *wl, int l, const lin_spec *g, int n)
{
    size_t codes = 0, scales = 0;
    for (int i = 0; i < n; i++) {
        codes += (size_t)(g[i].d0 * g[i].d1);
        scales += (size_t)g[i].d0 * sizeof(float);
    }
    size_t woff = reserve(wl, codes), soff = reserve(wl, scales);
    for (int i = 0; i < n; i++) {
        const int64_t d1 = g[i].d1, rows = g[i].name_a ? wl->c->nv : g[i].d0;
        FRT_TRY(put_fp8(wl, l, g[i].name, rows, d1, woff, soff));
        if (g[i].name_a)
            FRT_TRY(put_fp8(wl, l, g[i].name_a, rows, d1, woff + (size_t)(rows * d1), soff + (size_t)rows * 4));
        if (wl->pass == 1) {
            g[i].dst->q = (const uint8_t *)(wl->base + woff);
            g[i].dst->s = (const float *)(const void *)(wl->base + soff);
        }
        woff += (size_t)(g[i].d0 * d1);
        soff += (size_t)g[i].d0 * sizeof(float);
    }
    return 0;
}

/* The n Linear weights of g (of layer l), bf16 or FP8 (c->wfp8). */
static int put_lin(wload *wl, int l, const lin_spec *g, int n)
{
    if (wl->c->wfp8) return put_lin_fp8(wl, l, g, n);
    for (int i = 0; i < n; i++) FRT_TRY(put_lin_bf16(wl, l, &g[i]));
    return 0;
}

/* The LM head with params.lm_head_dtype FRT_WEIGHT_FP8 (docs/fp8.md "An
 * FP8 LM head"): tensor `name` (lm_head.weight, or a tied model's
 * embedding) as E4M3 codes [V, H] and per-row scales [V] into c->head. */
static int put_lm_head8(wload *wl, const char *name, int64_t V, int64_t H)
{
    const frt_tensor *t = NULL;
    FRT_TRY(find_tensor(wl, name, V * H, &t));
    char full[256];
    snprintf(full, sizeof full, "%s%s", wl->m->cfg.weight_prefix, name);
    FRT_TRY(frt_lm_head_cuda_fp8_ok(H));
    const size_t woff = reserve(wl, (size_t)(V * H)), soff = reserve(wl, (size_t)V * sizeof(float));
    FRT_TRY(frt_fp8w_lm_head_put(wl->m, wl->c->wbuf, wl->pass, t, full, V, H, woff, soff));
    if (wl->pass == 0) return 0;
    wl->c->head.q = (const uint8_t *)(wl->base + woff);
    wl->c->head.s = (const float *)(const void *)(wl->base + soff);
    return 0;
}

static int load_all(wload *wl)
{
    frt_model *m = wl->m;
    cu_model *c = wl->c;
    const frt_model_config *cfg = &m->cfg;
    int64_t H = c->H, I = c->I, V = c->V, hd = c->hd;
    wl->used = 0;
    PUT_M(c->embed, "embed_tokens.weight", V * H);
    PUT_V(c->final_norm, "norm.weight", H);
    if (m->params.lm_head_dtype == FRT_WEIGHT_FP8)
        FRT_TRY(put_lm_head8(wl, cfg->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight", V, H));
    else if (cfg->tie_word_embeddings)
        c->head.w = c->embed;
    else
        PUT_M(c->head.w, "lm_head.weight", V * H);
    for (int l = 0; l < c->L; l++) {
        cu_layer *lw = &c->layers[l];
        char n[160];
#define NAME(suffix) (snprintf(n, sizeof n, "layers.%d.%s", l, suffix), n)
        PUT_V(lw->input_ln, NAME("input_layernorm.weight"), H);
        PUT_V(lw->post_ln, NAME("post_attention_layernorm.weight"), H);
        const lin_spec mlp[3] = {{"mlp.gate_proj.weight", NULL, I, H, &lw->gate_proj},
                                 {"mlp.up_proj.weight", NULL, I, H, &lw->up_proj},
                                 {"mlp.down_proj.weight", NULL, H, I, &lw->down_proj}};
        FRT_TRY(put_lin(wl, l, mlp, 2));
        FRT_TRY(put_lin(wl, l, mlp + 2, 1));
        if (cfg->layer_types[l] == FRT_LAYER_FULL_ATTENTION) {
            const lin_spec at[4] = {{"self_attn.q_proj.weight", NULL, c->qw, H, &lw->q_proj},
                                    {"self_attn.k_proj.weight", NULL, c->kvw, H, &lw->k_proj},
                                    {"self_attn.v_proj.weight", NULL, c->kvw, H, &lw->v_proj},
                                    {"self_attn.o_proj.weight", NULL, H, c->ad, &lw->o_proj}};
            FRT_TRY(put_lin(wl, l, at, 3)); /* q | k | v end to end */
            FRT_TRY(put_lin(wl, l, at + 3, 1));
            PUT_V(lw->q_norm, NAME("self_attn.q_norm.weight"), hd);
            PUT_V(lw->k_norm, NAME("self_attn.k_norm.weight"), hd);
        } else {
            int64_t nv = c->nv;
            /* b and a fused into one padded matrix: rows [0, nv) b, [nv, 2 nv) a */
            const lin_spec dn[4] = {{"linear_attn.in_proj_qkv.weight", NULL, c->ch, H, &lw->in_proj_qkv},
                                    {"linear_attn.in_proj_z.weight", NULL, c->vd, H, &lw->in_proj_z},
                                    {"linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight", c->ba_w, H,
                                     &lw->in_proj_ba},
                                    {"linear_attn.out_proj.weight", NULL, H, c->vd, &lw->out_proj}};
            FRT_TRY(put_lin(wl, l, dn, 3)); /* in_proj_qkv | z | b | a end to end */
            PUT_V(lw->conv1d, NAME("linear_attn.conv1d.weight"), (int64_t)c->ch * c->K);
            PUT_V(lw->dt_bias, NAME("linear_attn.dt_bias"), nv);
            PUT_V(lw->A_log, NAME("linear_attn.A_log"), nv);
            PUT_V(lw->gdn_norm, NAME("linear_attn.norm.weight"), c->dv);
            FRT_TRY(put_lin(wl, l, dn + 3, 1));
        }
#undef NAME
    }
    return 0;
}

/* Whether Linear weight b lies right after a's `rows` rows of H columns
 * (codes and scales both, with FP8 weights). */
static int lies_after(const cu_lin *a, int rows, const cu_lin *b, int H)
{
    size_t n = (size_t)rows * (size_t)H;
    if (a->q) return b->q == a->q + n && b->s == a->s + rows;
    return b->w == a->w + n;
}

int frt_qwen35_cu_load_weights(frt_model *m)
{
    cu_model *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory");
    m->bk_data = c;
    c->wfp8 = m->params.weight_dtype == FRT_WEIGHT_FP8 || m->cfg.quant.method != FRT_QUANT_NONE;
    c->fp8 = m->kv_dtype == FRT_DT_F8_E4M3; /* before prefill_group: at_one reads it */
    if (frt_fp8w_blocked(m)) /* before anything is allocated or read */
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda model: block-wise FP8 checkpoints (weight_scale_inv) of the hybrid are read by the cpu "
                         "backend only; the dense family reads them on cuda (docs/fp8.md)");
    FRT_TRY(set_sizes(m, c));
    c->layers = calloc((size_t)c->L, sizeof *c->layers);
    if (!c->layers) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory for the layer table");
    wload wl = {.m = m, .c = c, .pass = 0};
    FRT_TRY(load_all(&wl));
    size_t bytes = wl.used;
    FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.weights", FRT_SPACE_DEVICE, bytes, &c->wbuf));
    /* zeros first: the padding rows of the fused in_proj_ba stay zero (FP8: codes and scales) */
    FRT_TRY(frt_buffer_fill(c->wbuf, 0, bytes, 0, m->stream));
    wl.base = frt_buffer_ptr(c->wbuf);
    wl.pass = 1;
    FRT_TRY(load_all(&wl));
    FRT_TRY(frt_stream_sync(m->stream));
    if (wl.used != bytes) return frt_error(FRT_ERR_STATE, "cuda model: weight layout changed between passes");
    c->dn_w = c->ch + c->vd + c->ba_w;
    c->at_w = c->qw + 2 * c->kvw;
    c->dn_fused = c->at_fused = 1;
    for (int l = 0; l < c->L; l++) {
        const cu_layer *lw = &c->layers[l];
        if (m->cfg.layer_types[l] != FRT_LAYER_FULL_ATTENTION &&
            (!lies_after(&lw->in_proj_qkv, c->ch, &lw->in_proj_z, c->H) ||
             !lies_after(&lw->in_proj_z, c->vd, &lw->in_proj_ba, c->H)))
            c->dn_fused = 0;
        if (m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION &&
            (!lies_after(&lw->q_proj, c->qw, &lw->k_proj, c->H) || !lies_after(&lw->k_proj, c->kvw, &lw->v_proj, c->H)))
            c->at_fused = 0;
    }
    qwen35_of(m)->w.bytes = bytes;
    m->weight_bytes = bytes;
    if (c->wfp8) { /* the cpu rule's description plus this backend's prefill GEMM (as dense_cuda.c) */
        snprintf(c->wdesc, sizeof c->wdesc, "%s,prefill_gemm=cublaslt-e4m3-tn-f32acc", frt_fp8w_desc(m));
        m->weights_desc = c->wdesc;
    }
    return 0;
}

/* ---- scratch ----------------------------------------------------------- */

static int plan_all(frt_model *m, cu_model *c, int n)
{
    int has_full, has_lin;
    layer_kinds(m, &has_full, &has_lin);
    /* an append bucket's gate / up (and with mode 2 every product) on the
     * skinny GEMM: the MLP's gate, up and SwiGLU in one launch */
    const int skinny = n < m->C ? frt_gemm_skinny_mode(m) : 0;
    FRT_TRY(frt_cuda_gemm_set_skinny(c->gemm, skinny >= 1));
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->I, F32, 0)); /* gate, up */
    FRT_TRY(frt_cuda_gemm_set_skinny(c->gemm, skinny == 2));
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->I, c->H, F32, 0)); /* down */
    if (has_full) {
        if (one_gemm(c->at_fused, n))
            FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->at_w, F32, 0)); /* q_proj | k_proj | v_proj */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->qw, F32, 0));  /* q_proj */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->kvw, F32, 0)); /* k_proj, v_proj */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->ad, c->H, F32, 0));  /* o_proj */
    }
    if (has_lin) {
        if (one_gemm(c->dn_fused, n))
            FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->dn_w, F32, 0)); /* in_proj_qkv | z | b | a */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->ch, F32, 0));   /* in_proj_qkv */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->vd, F32, 0));   /* in_proj_z */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->ba_w, F32, 0)); /* in_proj_b | a */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->vd, c->H, F32, 0));   /* out_proj */
    }
    return frt_cuda_gemm_set_skinny(c->gemm, 0);
}

/* FP8 weights: the FP8 GEMM of every prefill product for n rows (a
 * bucket), the fused q | k | v and in_proj_qkv | z | b | a where one_gemm
 * runs them (docs/fp8.md). */
static int plan_fp8(frt_model *m, cu_model *c, int n)
{
    int has_full, has_lin;
    layer_kinds(m, &has_full, &has_lin);
    const int shapes[][3] = {{c->H, c->I, 1},
                             {c->I, c->H, 1},
                             {c->H, c->at_w, has_full && one_gemm(c->at_fused, n)},
                             {c->H, c->qw, has_full},
                             {c->H, c->kvw, has_full},
                             {c->ad, c->H, has_full},
                             {c->H, c->dn_w, has_lin && one_gemm(c->dn_fused, n)},
                             {c->H, c->ch, has_lin},
                             {c->H, c->vd, has_lin},
                             {c->H, c->ba_w, has_lin},
                             {c->vd, c->H, has_lin}};
    /* gate | up (row 0: bf16 accumulators) and down (row 1: f32) with unit
     * scales, applied by their consumers (c->mlp_acc): cuBLASLt's
     * outer-vector kernels run these shapes ~20 % slower than its
     * unit-scale ones (docs/PERF.md). Only where down's (in, out) key is
     * its alone (a plan is one scaling; gate / up's bf16 plans are keyed
     * apart from the f32 ones). */
    c->mlp_acc = 1;
    for (size_t k = 2; k < sizeof shapes / sizeof shapes[0]; k++)
        if (shapes[k][2] && shapes[k][0] == shapes[1][0] && shapes[k][1] == shapes[1][1]) c->mlp_acc = 0;
    /* the append buckets (below C) take their own algorithms: only their
     * own pieces run them, the same in a cold prefill and after a restore
     * (docs/fp8.md "The append's FP8 GEMMs"); C and the groups keep the
     * shape's */
    FRT_TRY(frt_cuda_gemm_fp8_set_own_algo(c->gemm8, n < m->C));
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        if (!shapes[k][2]) continue;
        /* gate | up: bf16 accumulators, no scales; down: f32, the epilogue's scales by its consumer */
        const frt_cuda_gemm_fp8_scaling sc = !c->mlp_acc || k >= 2 ? FRT_CUDA_GEMM_FP8_SCALES_AUTO
                                             : k == 0              ? FRT_CUDA_GEMM_FP8_SCALES_NONE
                                                                   : FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE;
        FRT_TRY(frt_cuda_gemm_fp8_set_scaling(c->gemm8, sc));
        FRT_TRY(frt_cuda_gemm_fp8_plan(c->gemm8, n, shapes[k][0], shapes[k][1],
                                       sc == FRT_CUDA_GEMM_FP8_SCALES_NONE ? BF16 : F32));
    }
    FRT_TRY(frt_cuda_gemm_fp8_set_own_algo(c->gemm8, 0));
    return frt_cuda_gemm_fp8_set_scaling(c->gemm8, FRT_CUDA_GEMM_FP8_SCALES_AUTO);
}

/* Whether the batched decode can run (qwen35_cuda.c): groups of at least 2
 * rows whose plans are all the GEMV (batch-invariant: c->batch_g), and the
 * Gated DeltaNet layers take the fused decode step. */
static int batch_ok(const frt_model *m, cu_model *c)
{
    c->batch_g = frt_cuda_gemm_gemv_rows(c->gemm);
    if (c->wfp8) { /* and the E4M3 GEMV's rows: x [g, in] in one block's shared memory */
        int g8 = frt_cuda_gemv_fp8_max_n(max_i(max_i(c->H, c->I), max_i(c->ad, c->vd)));
        if (g8 < c->batch_g) c->batch_g = g8;
    }
    if (c->batch_g < 2) return 0;
    int lin = m->cfg.n_linear_layers > 0;
    return !lin || ((c->dk == 64 || c->dk == 128) && (c->dv == 64 || c->dv == 128) && c->nv / c->nk <= 8 && c->K <= 4);
}

/* Decode's output projections accumulate into the residual (gemm_out): their
 * accumulate plans for n rows (1: decode; 2..FRT_CUDA_GEMV_MAX_N: groups of
 * the batched decode). */
static int plan_decode_out(frt_model *m, cu_model *c, int n)
{
    int has_full, has_lin;
    layer_kinds(m, &has_full, &has_lin);
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->I, c->H, F32, 1));                /* down */
    if (has_full) FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->ad, c->H, F32, 1)); /* o_proj */
    if (has_lin) FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->vd, c->H, F32, 1));  /* out_proj */
    return 0;
}

/* Every GEMM plan of the load, in one order whatever params.prefill_group
 * (the plan order is hashed into the fingerprint; the group plans of
 * frt_qwen35_cu_prefill_group are left out of it): decode (1 row), each
 * bucket, FP8's, decode's accumulating output projections and the
 * batched decode's (groups of up to FRT_CUDA_GEMV_MAX_N rows, made whatever
 * the slot count, so the fingerprint does not depend on it). Creates the
 * handles on first use; later calls find every plan made. */
static int make_plans(frt_model *m, cu_model *c)
{
    if (!c->gemm) {
        FRT_TRY(frt_cuda_gemm_create(GEMM_WORKSPACE, &c->gemm));
        FRT_TRY(frt_cuda_gemm_add_stream(c->gemm, frt_stream_native(m->stream)));
    }
    FRT_TRY(plan_all(m, c, 1));
    for (int i = 0; i < m->n_buckets; i++) {
        if (m->buckets[i] == m->C && !c->tuned) { /* before the piece's plans, which groups are made like */
            c->tuned = 1;
            FRT_TRY(frt_gemm_tune_appends(m, c->gemm));
        }
        FRT_TRY(plan_all(m, c, m->buckets[i]));
    }
    if (c->wfp8 && !c->gemm8) {
        FRT_TRY(frt_cuda_gemm_fp8_create(c->gemm, &c->gemm8));
        for (int i = 0; i < m->n_buckets; i++) FRT_TRY(plan_fp8(m, c, m->buckets[i]));
    }
    for (int g = 1; g <= FRT_CUDA_GEMV_MAX_N; g++) {
        FRT_TRY(plan_decode_out(m, c, g));
        if (c->head.w) FRT_TRY(frt_cuda_gemm_plan(c->gemm, g, c->H, c->V, F32, 0)); /* lm_head (bf16) */
    }
    return 0;
}

/* The first layer of each kind: lf full attention, ll Gated DeltaNet (-1:
 * none). */
static void first_layers(const frt_model *m, int *lf, int *ll)
{
    *lf = *ll = -1;
    for (int l = m->cfg.n_layers - 1; l >= 0; l--) {
        if (m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            *lf = l;
        else
            *ll = l;
    }
}

/* One product for frt_group_check: x [rows, in] . w^T into f32, whichever
 * form w holds. */
static frt_group_product product(int in, int out, cu_lin w)
{
    frt_group_product p = {in, out, F32, w.w, w.q, w.s, 0};
    return p;
}

/* The products a prefill piece of C rows runs (the forward pass's fused /
 * unfused choice for C rows: at_one, dn_one), with the first layer of each
 * kind's weights as the check's data, into p[0 ..]; returns their count
 * (at most 8). */
static int group_products(const frt_model *m, const cu_model *c, frt_group_product *p)
{
    int lf, ll, n = 0;
    first_layers(m, &lf, &ll);
    const cu_layer *l0 = &c->layers[0];
    p[n++] = product(c->H, c->I, l0->gate_proj); /* gate, up */
    if (c->wfp8 && c->mlp_acc) p[n - 1].y_dtype = BF16; /* the FP8 accumulators' plan */
    p[n++] = product(c->I, c->H, l0->down_proj);
    if (lf >= 0) {
        const cu_layer *a = &c->layers[lf];
        if (at_one(c, m->C)) {
            p[n++] = product(c->H, c->at_w, a->q_proj); /* q | k | v: the weights lie end to end */
        } else {
            p[n++] = product(c->H, c->qw, a->q_proj);
            p[n++] = product(c->H, c->kvw, a->k_proj); /* k, v */
        }
        p[n++] = product(c->ad, c->H, a->o_proj);
    }
    if (ll >= 0) {
        const cu_layer *d = &c->layers[ll];
        if (dn_one(c, m->C)) {
            p[n++] = product(c->H, c->dn_w, d->in_proj_qkv); /* in_proj_qkv | z | b | a */
        } else {
            p[n++] = product(c->H, c->ch, d->in_proj_qkv);
            p[n++] = product(c->H, c->vd, d->in_proj_z);
            p[n++] = product(c->H, c->ba_w, d->in_proj_ba);
        }
        p[n++] = product(c->vd, c->H, d->out_proj);
    }
    return n;
}

/* frt_arch_backend.prefill_group (docs/architectures.md "Prefill groups"):
 * the group plans of the products a piece runs (group_products), checked on
 * the device over the first layer of each kind's weights
 * (frt_group_check); bf16 and FP8 weights, either KV cache. debug_hidden
 * runs one piece a replay (block-wise FP8 checkpoints do not load on this
 * backend). */
int frt_qwen35_cu_prefill_group(frt_model *m, int want, int *got)
{
    cu_model *c = m->bk_data;
    if (m->params.debug_hidden)
        return frt_group_refuse("qwen35 cuda", "debug_hidden records one piece a replay", want, got);
    FRT_TRY(make_plans(m, c));
    frt_group_product p[8];
    const int n = group_products(m, c, p);
    return frt_group_check(m, "qwen35 cuda", c->gemm, c->wfp8 ? c->gemm8 : NULL, p, n, want, got);
}

int frt_qwen35_cu_alloc_scratch(frt_model *m)
{
    cu_model *c = m->bk_data;
    if (!c) return frt_error(FRT_ERR_STATE, "cuda model: scratch before weights");
    /* rows of the prefill scratch: a group of G pieces (m->G 1: one piece) */
    size_t R = (size_t)m->C * (size_t)(m->G > 1 ? m->G : 1), f = sizeof(float), h2 = sizeof(uint16_t);
    size_t H = (size_t)c->H;
    size_t nv = (size_t)max_i(c->nv, 1);
    size_t wide = (size_t)max_i(max_i(max_i(max_i(c->qw, c->ch), c->I), c->dn_fused ? c->dn_w : 0),
                                c->at_fused ? c->at_w : 0);
    size_t wide1 = (size_t)max_i(c->ch, c->I);
    size_t qwid = (size_t)max_i(c->ad, c->kd), kwid = (size_t)max_i(c->kvw, c->kd);
    size_t vwid = (size_t)max_i(c->kvw, c->vd), owid = (size_t)max_i(c->ad, c->vd);
    size_t obwid = (size_t)max_i(max_i(c->ad, c->vd), c->I);
    /* the batched decode of branch slots: up to BATCH_MAX rows, at most C (its rows live in this scratch) */
    int slots = m->params.branch_slots > 1 ? m->params.branch_slots : 1;
    if (slots > BATCH_MAX) slots = BATCH_MAX;
    if (slots > m->C) slots = m->C;

    /* the chunked gated delta rule of a group: one call over its R rows (chunks per row count) */
    c->gdr_ws_bytes = frt_cuda_gdr_chunked_workspace_bytes((int)R, c->nk, c->nv, c->dk, c->dv, GDR_CHUNK);
    c->attn_ws_bytes = frt_cuda_attention_workspace_bytes(1, m->max_seq, c->nh, c->hd, DECODE_SPLIT);
    c->prefill_attn_ws_bytes = frt_cuda_attention_prefill_workspace_bytes(m->C, m->max_seq, c->nh, c->hd);
    /* a group replay's attention: c->attn_pieces pieces a launch */
    c->attn_pieces = frt_group_attn_pieces(m->G, m->C, m->max_seq, c->nh, c->hd, &c->prefill_attn_ws_bytes);
    FRT_TRY(frt_cuda_sample_workspace_bytes(c->V, &c->sample_ws_bytes));
    if (slots > 1) FRT_TRY(frt_batch_ends_bytes(slots, c->V, &c->ends_ws_bytes));

    /* Two passes over one layout: sizes (base NULL), then pointers. */
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        char *base = pass ? frt_buffer_ptr(c->sbuf) : NULL;
        size_t off = 0;
#define CARVE(field, type, bytes)                                                                   \
    do {                                                                                            \
        if (base) (field) = (type *)(void *)(base + off);                                           \
        off += align_up(bytes) + ALIGN; /* + a spare line: no slot is empty */                      \
    } while (0)
        CARVE(c->x, float, R * H * f);
        CARVE(c->h, uint16_t, R * H * h2);
        CARVE(c->hf, float, R * H * f);
        CARVE(c->last, uint16_t, H * h2);
        CARVE(c->t0, float, R * wide * f);
        CARVE(c->t1, float, R * wide1 * f);
        CARVE(c->q, float, R * qwid * f);
        CARVE(c->k, float, R * kwid * f);
        CARVE(c->v, float, R * vwid * f);
        CARVE(c->zg, float, R * owid * f);
        CARVE(c->o, float, R * owid * f);
        CARVE(c->ob, uint16_t, R * obwid * h2);
        CARVE(c->delta, float, R * H * f);
        if (c->wfp8) {
            CARVE(c->xq, uint8_t, R * (size_t)max_i(max_i(c->H, c->I), max_i(c->ad, c->vd)));
            CARVE(c->xs, float, R * f);
        }
        CARVE(c->ba, float, R * (size_t)c->ba_w * f);
        CARVE(c->a, float, R * nv * f);
        CARVE(c->b, float, R * nv * f);
        CARVE(c->g, float, R * nv * f);
        CARVE(c->beta, float, R * nv * f);
        CARVE(c->gdr_ws, char, c->gdr_ws_bytes);
        CARVE(c->attn_ws, char, c->attn_ws_bytes * (size_t)slots); /* the batched decode: one a slot */
        CARVE(c->prefill_attn_ws, char, c->prefill_attn_ws_bytes);
        if (m->G > 1) CARVE(c->gpos, int32_t, (size_t)(m->G + 2) * sizeof(int32_t));
        CARVE(c->sample_ws, char, c->sample_ws_bytes);
        if (c->fp8) CARVE(c->kv_scale, float, (size_t)2 * c->L * c->nkv * f);
        if (slots > 1) {
            CARVE(c->blogits, float, (size_t)slots * (size_t)c->V * f);
            CARVE(c->ends_ws, char, c->ends_ws_bytes);
        }
        c->debug_rows_off = off;
        CARVE(c->debug_rows, int32_t, sizeof(int32_t));
        if (m->params.debug_hidden) {
            c->debug_off = off;
            CARVE(c->debug, float, (size_t)(c->L + 2) * R * H * f);
        }
#undef CARVE
        if (!pass) {
            total = off;
            FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.scratch", FRT_SPACE_DEVICE, total, &c->sbuf));
            FRT_TRY(frt_buffer_fill(c->sbuf, 0, total, 0, m->stream));
        }
    }

    if (c->fp8) /* the FP8 KV cache's static per-head scales, [L, 2, nkv] (layer l's K and V: entries 2l, 2l + 1) */
        FRT_TRY(frt_model_kv_scales_upload(m, 2 * c->L, c->nkv, c->sbuf,
                                           (size_t)((char *)c->kv_scale - (char *)frt_buffer_ptr(c->sbuf))));

    /* cuBLASLt: every plan the captured graphs use (made here, or before by
     * frt_qwen35_cu_prefill_group with the groups' plans on top) */
    FRT_TRY(make_plans(m, c));
    c->batch_slots = slots > 1 && batch_ok(m, c) ? slots : 0;
    if (c->batch_slots) FRT_TRY(frt_batch_ends_init(&c->ends, c->batch_slots, c->V, c->ends_ws, c->blogits));
    return frt_stream_sync(m->stream);
}

void frt_qwen35_cu_free(frt_model *m)
{
    cu_model *c = m->bk_data;
    if (!c) return;
    frt_batch_ends_free(&c->ends);
    frt_cuda_gemm_fp8_destroy(c->gemm8); /* before the base handle it uses */
    if (m->weights_desc == c->wdesc) m->weights_desc = NULL; /* c's storage */
    frt_cuda_gemm_destroy(c->gemm);
    frt_buffer_free(c->sbuf);
    frt_buffer_free(c->wbuf);
    free(c->layers);
    free(c);
    m->bk_data = NULL;
}

/* The GEMM plans chosen at load (algorithm, tile, stages, split-k, ... for
 * every shape), hashed into the model fingerprint: another choice is other
 * arithmetic, so a capsule made under it must not restore here. */
uint64_t frt_qwen35_cu_fingerprint_extra(const frt_model *m)
{
    const cu_model *c = m->bk_data;
    if (!c) return 0;
    const uint64_t f8 = frt_cuda_gemm_fp8_fingerprint(c->gemm8); /* 0 without FP8 weights */
    return frt_cuda_gemm_fingerprint(c->gemm) ^ (f8 * 0x9E3779B97F4A7C15ull);
}
