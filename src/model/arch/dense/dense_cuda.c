/*
 * arch/dense/dense_cuda.c - the dense family's forward pass on the cuda
 * backend, bf16: the same function, step for step, as dense_cpu.c (whose
 * header names the math source), launched as kernels/cuda kernels (and the
 * two of dense_glue.cu: bias, RoPE from the llama3 / default table) on the
 * model's stream and captured into CUDA graphs once at load: one prefill
 * variant per length bucket, one decode graph for every position, sample.
 *
 * Storage and precision (as the hybrid's qwen35_cuda.c):
 *   weights      bf16 matrices in one device allocation ("cuda.weights");
 *                norm weights, biases and the RoPE table f32. A tied lm_head
 *                is the embedding.
 *   activations  residual stream f32; GEMM inputs bf16 (normed hidden,
 *                attention output, SwiGLU output); GEMM outputs f32
 *                (cuBLASLt or the GEMV, fp32 accumulation).
 *   state        KV cache bf16 (kv_dtype), declared by dense.c.
 *
 * Graphs: every value that changes between replays is read from device
 * memory (boundary.pos, step.n_valid, boundary.pending, step.sampling,
 * boundary.rng); GEMMs run on all rows of a bucket, every other kernel on
 * the first n_valid rows only. The boundary record is advanced on the device
 * by the hybrid's end-of-step kernels (qwen35_glue.h: the journal and the
 * advance are architecture-neutral). GEMM plans are made at load.
 *
 * This first version runs every op as its own launch (no fused decode GEMVs,
 * no fused q | k | v GEMM): correctness first; the speed targets of issue 17
 * are not claimed (docs/PERF.md).
 *
 * Limits (FRT_ERR_UNSUPPORTED at load, with the reason): hidden_size,
 * intermediate_size, vocab_size, n_heads * head_dim and n_kv_heads *
 * head_dim multiples of 8 (cuBLASLt rows 16-byte aligned); head_dim a
 * multiple of 32 up to 256 (the CUDA attention).
 */
#include "model/arch/dense/dense.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/arch/dense/dense_glue.h"
#include "model/arch/qwen35/qwen35_glue.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 FRT_CUDA_F32
#define BF16 FRT_CUDA_BF16
#define ALIGN 256
#define DECODE_SPLIT 128
#define GEMM_WORKSPACE (32u << 20)

/* Device pointers of one layer (into the weight arena); NULL where absent. */
typedef struct cd_layer {
    const float *input_ln, *post_ln;            /* [H] */
    const uint16_t *q_proj, *k_proj, *v_proj;   /* [qd, H], [kvd, H] x 2 */
    const uint16_t *o_proj;                     /* [H, qd] */
    const float *q_bias, *k_bias, *v_bias;      /* [qd], [kvd] x 2 */
    const float *o_bias;                        /* [H] */
    const float *q_norm, *k_norm;               /* [hd] */
    const uint16_t *gate_proj, *up_proj;        /* [I, H] */
    const uint16_t *down_proj;                  /* [H, I] */
} cd_layer;

typedef struct cd_model {
    int H, I, V, L, nh, nkv, hd, qd, kvd;
    float eps, scale;
    frt_buffer *wbuf;
    const uint16_t *embed, *lm_head;
    const float *final_norm, *inv_freq;
    cd_layer *layers;
    frt_cuda_gemm *gemm;
    frt_buffer *sbuf;
    float *x, *hf, *q, *k, *v, *o, *t0, *t1, *delta;
    uint16_t *h, *last, *ob;
    void *attn_ws, *prefill_attn_ws, *sample_ws;
    size_t attn_ws_bytes, prefill_attn_ws_bytes, sample_ws_bytes;
    int32_t *debug_rows;
    float *debug;
    size_t debug_off, debug_rows_off;
} cd_model;

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
static int max_i(int a, int b) { return a > b ? a : b; }

/* ---- load --------------------------------------------------------------- */

static int set_sizes(frt_model *m, cd_model *c)
{
    const frt_model_config *cfg = &m->cfg;
    c->H = cfg->hidden_size;
    c->I = cfg->intermediate_size;
    c->V = cfg->vocab_size;
    c->L = cfg->n_layers;
    c->nh = cfg->n_heads;
    c->nkv = cfg->n_kv_heads;
    c->hd = cfg->head_dim;
    c->qd = c->nh * c->hd;
    c->kvd = c->nkv * c->hd;
    c->eps = cfg->rms_norm_eps;
    c->scale = 1.0f / sqrtf((float)c->hd);
    struct { const char *what; int v; } dims[] = {{"hidden_size", c->H},
                                                 {"intermediate_size", c->I},
                                                 {"vocab_size", c->V},
                                                 {"n_heads * head_dim", c->qd},
                                                 {"n_kv_heads * head_dim", c->kvd}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v < 8 || dims[i].v % 8)
            return frt_error(FRT_ERR_UNSUPPORTED,
                             "dense cuda: %s = %d is not a positive multiple of 8 (cuBLASLt rows must be 16-byte "
                             "aligned)",
                             dims[i].what, dims[i].v);
    if (c->hd % 32 || c->hd < 32 || c->hd > 256)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense cuda: head_dim %d (the CUDA attention takes multiples of 32 up "
                                              "to 256)", c->hd);
    return 0;
}

typedef struct wload {
    frt_model *m;
    cd_model *c;
    int pass;    /* 0: check and size, 1: upload */
    size_t used; /* bytes reserved */
    char *base;
} wload;

/* Finds prefix+name (lm_head also at the top level), checks its shape
 * ([d0] when d1 == 0, else [d0, d1]), reserves it, and in pass 1 uploads it
 * as bf16 (to_bf16) or f32; *dst gets its device address. */
static int put(wload *wl, const char *name, int64_t d0, int64_t d1, int to_bf16, const void **dst)
{
    frt_model *m = wl->m;
    char full[256];
    snprintf(full, sizeof full, "%s%s", m->cfg.weight_prefix, name);
    const frt_tensor *t = frt_checkpoint_find(m->ckpt, full);
    if (!t && !strncmp(name, "lm_head", 7)) t = frt_checkpoint_find(m->ckpt, name);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", full);
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1))
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has %d dims [%lld, ...], expected [%lld%s%lld]",
                         full, t->ndim, (long long)t->shape[0], (long long)d0, ndim == 2 ? ", " : "",
                         ndim == 2 ? (long long)d1 : 0LL);
    if (!frt_dtype_is_float(t->dtype))
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' is %s, not a float dtype", full,
                         frt_dtype_name(t->dtype));
    size_t n = (size_t)(d0 * (d1 ? d1 : 1));
    size_t off = wl->used;
    wl->used += align_up(n * (to_bf16 ? 2 : 4));
    if (wl->pass == 0) return 0;
    frt_dtype want = to_bf16 ? FRT_DT_BF16 : FRT_DT_F32;
    if (t->dtype == want) {
        FRT_TRY(frt_buffer_write(wl->c->wbuf, off, t->data, t->nbytes, m->stream));
    } else {
        float *f = malloc(n * sizeof(float) + 1);
        uint16_t *h = to_bf16 ? malloc(n * sizeof(uint16_t) + 1) : NULL;
        int rc = !f || (to_bf16 && !h) ? frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory converting '%s'", full)
                                      : frt_tensor_to_f32(t, f);
        if (rc == 0 && to_bf16) frt_f32_array_to_bf16(f, h, n);
        if (rc == 0) rc = frt_buffer_write(wl->c->wbuf, off, to_bf16 ? (void *)h : (void *)f, n * (to_bf16 ? 2 : 4),
                                           m->stream);
        if (rc == 0) rc = frt_stream_sync(m->stream); /* the host copy must outlive the transfer */
        free(f);
        free(h);
        FRT_TRY(rc);
    }
    *dst = wl->base + off;
    return 0;
}

#define PUT_M(field, name, d0, d1)                                                                  \
    do {                                                                                            \
        const void *p_ = NULL;                                                                      \
        FRT_TRY(put(wl, (name), (d0), (d1), 1, &p_));                                               \
        (field) = (const uint16_t *)p_;                                                             \
    } while (0)
#define PUT_V(field, name, d0)                                                                      \
    do {                                                                                            \
        const void *p_ = NULL;                                                                      \
        FRT_TRY(put(wl, (name), (d0), 0, 0, &p_));                                                  \
        (field) = (const float *)p_;                                                                \
    } while (0)

static int load_all(wload *wl)
{
    frt_model *m = wl->m;
    cd_model *c = wl->c;
    const frt_model_config *cfg = &m->cfg;
    int64_t H = c->H, I = c->I, V = c->V;
    wl->used = 0;
    /* the RoPE table of dense.c, first in the arena */
    size_t rope_off = wl->used;
    wl->used += align_up((size_t)(c->hd / 2) * sizeof(float));
    if (wl->pass == 1) {
        FRT_TRY(frt_buffer_write(c->wbuf, rope_off, dense_of(m)->inv_freq, (size_t)(c->hd / 2) * sizeof(float),
                                 m->stream));
        c->inv_freq = (const float *)(const void *)(wl->base + rope_off);
    }
    PUT_M(c->embed, "embed_tokens.weight", V, H);
    PUT_V(c->final_norm, "norm.weight", H);
    if (cfg->tie_word_embeddings)
        c->lm_head = c->embed;
    else
        PUT_M(c->lm_head, "lm_head.weight", V, H);
    for (int l = 0; l < c->L; l++) {
        cd_layer *lw = &c->layers[l];
        char n[160];
#define NAME(suffix) (snprintf(n, sizeof n, "layers.%d.%s", l, suffix), n)
        PUT_V(lw->input_ln, NAME("input_layernorm.weight"), H);
        PUT_V(lw->post_ln, NAME("post_attention_layernorm.weight"), H);
        PUT_M(lw->q_proj, NAME("self_attn.q_proj.weight"), c->qd, H);
        PUT_M(lw->k_proj, NAME("self_attn.k_proj.weight"), c->kvd, H);
        PUT_M(lw->v_proj, NAME("self_attn.v_proj.weight"), c->kvd, H);
        PUT_M(lw->o_proj, NAME("self_attn.o_proj.weight"), H, c->qd);
        if (cfg->attention_bias) {
            PUT_V(lw->q_bias, NAME("self_attn.q_proj.bias"), c->qd);
            PUT_V(lw->k_bias, NAME("self_attn.k_proj.bias"), c->kvd);
            PUT_V(lw->v_bias, NAME("self_attn.v_proj.bias"), c->kvd);
        }
        if (cfg->o_proj_bias) PUT_V(lw->o_bias, NAME("self_attn.o_proj.bias"), H);
        if (cfg->qk_norm) {
            PUT_V(lw->q_norm, NAME("self_attn.q_norm.weight"), c->hd);
            PUT_V(lw->k_norm, NAME("self_attn.k_norm.weight"), c->hd);
        }
        PUT_M(lw->gate_proj, NAME("mlp.gate_proj.weight"), I, H);
        PUT_M(lw->up_proj, NAME("mlp.up_proj.weight"), I, H);
        PUT_M(lw->down_proj, NAME("mlp.down_proj.weight"), H, I);
#undef NAME
    }
    return 0;
}

static int cd_load_weights(frt_model *m)
{
    cd_model *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory");
    m->bk_data = c;
    FRT_TRY(set_sizes(m, c));
    c->layers = calloc((size_t)c->L, sizeof *c->layers);
    if (!c->layers) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory for the layer table");
    wload wl = {.m = m, .c = c, .pass = 0};
    FRT_TRY(load_all(&wl)); /* every name and shape checked before the device allocation */
    size_t bytes = wl.used;
    FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.weights", FRT_SPACE_DEVICE, bytes, &c->wbuf));
    FRT_TRY(frt_buffer_fill(c->wbuf, 0, bytes, 0, m->stream));
    wl.base = frt_buffer_ptr(c->wbuf);
    wl.pass = 1;
    FRT_TRY(load_all(&wl));
    FRT_TRY(frt_stream_sync(m->stream));
    if (wl.used != bytes) return frt_error(FRT_ERR_STATE, "dense cuda: weight layout changed between passes");
    m->weight_bytes = bytes;
    return 0;
}

/* ---- scratch and GEMM plans --------------------------------------------- */

static int plan_all(cd_model *c, int n)
{
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->qd, F32, 0));  /* q_proj */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->kvd, F32, 0)); /* k_proj, v_proj */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->qd, c->H, F32, 0));  /* o_proj */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->I, F32, 0));   /* gate, up */
    return frt_cuda_gemm_plan(c->gemm, n, c->I, c->H, F32, 0);     /* down */
}

static int cd_alloc_scratch(frt_model *m)
{
    cd_model *c = m->bk_data;
    if (!c) return frt_error(FRT_ERR_STATE, "dense cuda: scratch before weights");
    size_t R = (size_t)m->C, f = sizeof(float), h2 = sizeof(uint16_t), H = (size_t)c->H;
    size_t wide = (size_t)max_i(max_i(c->qd, c->I), c->H);
    c->attn_ws_bytes = frt_cuda_attention_workspace_bytes(1, m->max_seq, c->nh, c->hd, DECODE_SPLIT);
    c->prefill_attn_ws_bytes = frt_cuda_attention_prefill_workspace_bytes(m->C, m->max_seq, c->nh, c->hd);
    FRT_TRY(frt_cuda_sample_workspace_bytes(c->V, &c->sample_ws_bytes));
    for (int pass = 0; pass < 2; pass++) {
        char *base = pass ? frt_buffer_ptr(c->sbuf) : NULL;
        size_t off = 0;
#define CARVE(field, type, bytes)                                                                   \
    do {                                                                                            \
        if (base) (field) = (type *)(void *)(base + off);                                           \
        off += align_up(bytes) + ALIGN;                                                             \
    } while (0)
        CARVE(c->x, float, R * H * f);
        CARVE(c->h, uint16_t, R * H * h2);
        CARVE(c->hf, float, R * H * f);
        CARVE(c->last, uint16_t, H * h2);
        CARVE(c->q, float, R * (size_t)c->qd * f);
        CARVE(c->k, float, R * (size_t)c->kvd * f);
        CARVE(c->v, float, R * (size_t)c->kvd * f);
        CARVE(c->o, float, R * (size_t)c->qd * f);
        CARVE(c->t0, float, R * wide * f);
        CARVE(c->t1, float, R * wide * f);
        CARVE(c->delta, float, R * H * f);
        CARVE(c->ob, uint16_t, R * wide * h2);
        CARVE(c->attn_ws, char, c->attn_ws_bytes);
        CARVE(c->prefill_attn_ws, char, c->prefill_attn_ws_bytes);
        CARVE(c->sample_ws, char, c->sample_ws_bytes);
        c->debug_rows_off = off;
        CARVE(c->debug_rows, int32_t, sizeof(int32_t));
        if (m->params.debug_hidden) {
            c->debug_off = off;
            CARVE(c->debug, float, (size_t)(c->L + 2) * R * H * f);
        }
#undef CARVE
        if (!pass) {
            FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.scratch", FRT_SPACE_DEVICE, off, &c->sbuf));
            FRT_TRY(frt_buffer_fill(c->sbuf, 0, off, 0, m->stream));
        }
    }
    FRT_TRY(frt_cuda_gemm_create(GEMM_WORKSPACE, &c->gemm));
    FRT_TRY(frt_cuda_gemm_add_stream(c->gemm, frt_stream_native(m->stream)));
    FRT_TRY(plan_all(c, 1));
    for (int i = 0; i < m->n_buckets; i++) FRT_TRY(plan_all(c, m->buckets[i]));
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, 1, c->H, c->V, F32, 0)); /* lm_head */
    return frt_stream_sync(m->stream);
}

static void cd_free(frt_model *m)
{
    cd_model *c = m->bk_data;
    if (!c) return;
    frt_cuda_gemm_destroy(c->gemm);
    frt_buffer_free(c->sbuf);
    frt_buffer_free(c->wbuf);
    free(c->layers);
    free(c);
    m->bk_data = NULL;
}

/* The GEMM plans chosen at load, hashed into the fingerprint (another plan
 * is other arithmetic: a capsule made under it must not restore here). */
static uint64_t cd_fingerprint_extra(const frt_model *m)
{
    const cd_model *c = m->bk_data;
    return c ? frt_cuda_gemm_fingerprint(c->gemm) : 0;
}

/* ---- the forward pass --------------------------------------------------- */

typedef struct fwd {
    frt_model *m;
    cd_model *c;
    void *st;
    int R, decode;
    const int32_t *d_n, *d_no_logits; /* NULL for decode */
    int32_t *d_pos, *d_pending, *d_has_logits;
    uint64_t *d_rng;
    const frt_cuda_sampler_params *d_params;
    const int32_t *d_mask_on; /* step.mask_on: apply the token_mask port */
} fwd;

static fwd fwd_make(frt_stream *s, frt_model *m, int R, int decode)
{
    fwd f;
    memset(&f, 0, sizeof f);
    f.m = m;
    f.c = m->bk_data;
    f.st = frt_stream_native(s);
    f.R = R;
    f.decode = decode;
    char *bd = frt_buffer_ptr(m->boundary), *sp = frt_buffer_ptr(m->step);
    f.d_n = decode ? NULL : (const int32_t *)(const void *)(sp + offsetof(frt_step_args, n_valid));
    f.d_no_logits = decode ? NULL : (const int32_t *)(const void *)(sp + offsetof(frt_step_args, no_logits));
    f.d_pos = (int32_t *)(void *)(bd + offsetof(frt_boundary, pos));
    f.d_pending = (int32_t *)(void *)(bd + offsetof(frt_boundary, pending));
    f.d_has_logits = (int32_t *)(void *)(bd + offsetof(frt_boundary, has_logits));
    f.d_rng = (uint64_t *)(void *)(bd + offsetof(frt_boundary, rng));
    f.d_params = (const frt_cuda_sampler_params *)(const void *)(sp + offsetof(frt_step_args, sampling));
    f.d_mask_on = (const int32_t *)(const void *)(sp + offsetof(frt_step_args, mask_on));
    return f;
}

static int gemm(const fwd *f, float *y, const uint16_t *x, const uint16_t *w, int in, int out)
{
    return frt_cuda_gemm_run(f->c->gemm, f->st, y, F32, x, w, f->R, in, out, 0);
}

static int debug_copy(const fwd *f, int idx, const float *src)
{
    cd_model *c = f->c;
    if (!c->debug) return 0;
    size_t H = (size_t)c->H;
    float *dst = c->debug + (size_t)idx * (size_t)f->m->C * H;
    FRT_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)f->R * H * sizeof(float), cudaMemcpyDeviceToDevice,
                                 (cudaStream_t)f->st));
    return 0;
}

/* Attention of the normed input c->h; its o_proj output (+ bias) goes to c->delta. */
static int attention_block(const fwd *f, int l)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R;
    uint16_t *kc = frt_buffer_ptr(dense_of(m)->kv_k[l]), *vc = frt_buffer_ptr(dense_of(m)->kv_v[l]);
    FRT_TRY(gemm(f, c->q, c->h, lw->q_proj, c->H, c->qd));
    FRT_TRY(gemm(f, c->k, c->h, lw->k_proj, c->H, c->kvd));
    FRT_TRY(gemm(f, c->v, c->h, lw->v_proj, c->H, c->kvd));
    if (lw->q_bias) {
        FRT_TRY(frt_dense_bias_add(st, c->q, lw->q_bias, f->d_n, R, c->qd));
        FRT_TRY(frt_dense_bias_add(st, c->k, lw->k_bias, f->d_n, R, c->kvd));
        FRT_TRY(frt_dense_bias_add(st, c->v, lw->v_bias, f->d_n, R, c->kvd));
    }
    if (lw->q_norm) {
        FRT_TRY(frt_cuda_rmsnorm(st, c->q, F32, c->q, F32, lw->q_norm, f->d_n, R, c->nh, c->hd, c->eps, 0));
        FRT_TRY(frt_cuda_rmsnorm(st, c->k, F32, c->k, F32, lw->k_norm, f->d_n, R, c->nkv, c->hd, c->eps, 0));
    }
    FRT_TRY(frt_dense_rope_table(st, c->q, c->inv_freq, f->d_pos, f->d_n, R, c->nh, c->hd));
    FRT_TRY(frt_dense_rope_table(st, c->k, c->inv_freq, f->d_pos, f->d_n, R, c->nkv, c->hd));
    FRT_TRY(frt_cuda_kv_append(st, kc, vc, c->k, c->v, F32, f->d_pos, f->d_n, R, m->max_seq, c->nkv, c->hd));
    if (f->decode) {
        FRT_TRY(frt_cuda_attention(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, c->nh, c->nkv,
                                   c->hd, c->scale, DECODE_SPLIT, c->attn_ws, c->attn_ws_bytes));
    } else {
        int rc = frt_cuda_attention_prefill(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, c->nh,
                                            c->nkv, c->hd, c->scale, c->prefill_attn_ws, c->prefill_attn_ws_bytes);
        if (rc == FRT_ERR_UNSUPPORTED)
            rc = frt_cuda_attention(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, c->nh, c->nkv,
                                    c->hd, c->scale, 0, NULL, 0);
        FRT_TRY(rc);
    }
    FRT_TRY(frt_cuda_convert(st, c->ob, BF16, c->o, F32, f->d_n, R, c->qd));
    FRT_TRY(gemm(f, c->delta, c->ob, lw->o_proj, c->qd, c->H));
    if (lw->o_bias) FRT_TRY(frt_dense_bias_add(st, c->delta, lw->o_bias, f->d_n, R, c->H));
    return 0;
}

/* One forward step: journal, embedding, the layers, final norm, the logits
 * of the last valid row, the boundary advance. */
static int record_forward(const fwd *f)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    void *st = f->st;
    int R = f->R, H = c->H;
    const int32_t *ids = f->decode ? f->d_pending : (const int32_t *)frt_buffer_ptr(m->in_ids);

    FRT_TRY(frt_qwen35_journal(st, frt_buffer_ptr(m->tokens), ids, f->d_pos, f->d_n, R, m->max_seq,
                               frt_buffer_ptr(m->seen), f->decode ? frt_buffer_ptr(m->counts) : NULL));
    FRT_TRY(frt_cuda_embedding(st, c->x, F32, c->embed, c->V, H, ids, f->d_n, R));
    FRT_TRY(debug_copy(f, 0, c->x));
    FRT_TRY(frt_cuda_rmsnorm(st, c->h, BF16, c->x, F32, c->layers[0].input_ln, f->d_n, R, 1, H, c->eps, 0));
    for (int l = 0; l < c->L; l++) {
        const cd_layer *lw = &c->layers[l];
        FRT_TRY(attention_block(f, l));
        FRT_TRY(frt_cuda_add_rmsnorm(st, c->x, c->delta, F32, c->h, BF16, lw->post_ln, f->d_n, R, H, c->eps, 0));
        FRT_TRY(gemm(f, c->t0, c->h, lw->gate_proj, H, c->I));
        FRT_TRY(gemm(f, c->t1, c->h, lw->up_proj, H, c->I));
        FRT_TRY(frt_cuda_swiglu(st, c->ob, BF16, c->t0, c->t1, F32, f->d_n, R, c->I));
        FRT_TRY(gemm(f, c->delta, c->ob, lw->down_proj, c->I, H));
        if (l + 1 < c->L)
            FRT_TRY(frt_cuda_add_rmsnorm(st, c->x, c->delta, F32, c->h, BF16, c->layers[l + 1].input_ln, f->d_n, R, H,
                                         c->eps, 0));
        else /* the last residual add fused with the final norm */
            FRT_TRY(frt_cuda_add_rmsnorm(st, c->x, c->delta, F32, c->hf, F32, c->final_norm, f->d_n, R, H, c->eps, 0));
        FRT_TRY(debug_copy(f, l + 1, c->x));
    }
    FRT_TRY(debug_copy(f, c->L + 1, c->hf));
    FRT_TRY(frt_cuda_last_row(st, c->last, BF16, c->hf, F32, f->d_n, R, H));
    float *logits = frt_buffer_ptr(m->logits);
    if (f->d_no_logits) { /* prefill: only the last piece of a call computes the logits */
        int rc = frt_cuda_gemm_run_unless(c->gemm, st, f->d_no_logits, logits, F32, c->last, c->lm_head, 1, H, c->V, 0);
        if (rc != FRT_ERR_UNSUPPORTED)
            FRT_TRY(rc);
        else
            FRT_TRY(frt_cuda_gemm_run(c->gemm, st, logits, F32, c->last, c->lm_head, 1, H, c->V, 0));
    } else {
        FRT_TRY(frt_cuda_gemm_run(c->gemm, st, logits, F32, c->last, c->lm_head, 1, H, c->V, 0));
    }
    return frt_qwen35_advance(st, f->d_pos, f->d_pending, f->d_has_logits, c->debug ? c->debug_rows : NULL, f->d_n,
                              f->d_no_logits, R);
}

/* The sampling step of frt/sampling.h (frt_cuda_sample_step). */
static int record_sample_work(const fwd *f)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    return frt_cuda_sample_step(f->st, f->d_pending, frt_buffer_ptr(m->logits), c->V, f->d_params,
                                frt_buffer_ptr(m->counts), frt_buffer_ptr(m->seen), f->d_mask_on,
                                frt_buffer_ptr(m->in_mask), f->d_rng, frt_buffer_ptr(m->out_logprobs), c->sample_ws,
                                c->sample_ws_bytes);
}

static int cd_record_prefill(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    if (rc->bucket < 1 || rc->bucket > rc->m->C)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "dense cuda: bucket %d outside [1, %d]", rc->bucket, rc->m->C);
    fwd f = fwd_make(s, rc->m, rc->bucket, 0);
    return record_forward(&f);
}

static int cd_record_decode(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 1);
    FRT_TRY(record_forward(&f));
    return record_sample_work(&f);
}

static int cd_record_sample(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 0);
    return record_sample_work(&f);
}

static int cd_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    cd_model *c = m->bk_data;
    if (!c || !c->debug) return frt_error(FRT_ERR_STATE, "debug_hidden: not enabled (params.debug_hidden)");
    int32_t rows = 0;
    FRT_TRY(frt_buffer_read(c->sbuf, c->debug_rows_off, &rows, sizeof rows, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    if (idx < 0 || idx > c->L + 1 || n < 1 || n > rows)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "debug_hidden: index %d rows %d out of range (%d rows recorded)", idx,
                         n, rows);
    size_t H = (size_t)c->H;
    FRT_TRY(frt_buffer_read(c->sbuf, c->debug_off + (size_t)idx * (size_t)m->C * H * sizeof(float), out,
                            (size_t)n * H * sizeof(float), m->stream));
    return frt_stream_sync(m->stream);
}

const frt_arch_backend frt_dense_cuda_backend = {
    .name = "cuda",
    .kv_dtype = FRT_DT_BF16,
    .state_dtypes = "weights=bf16,norms=f32,kv=bf16,resid=f32,gemm=cublaslt-bf16-f32acc,unfused-1",
    .load_weights = cd_load_weights,
    .alloc_scratch = cd_alloc_scratch,
    .free = cd_free,
    .record_prefill = cd_record_prefill,
    .record_decode = cd_record_decode,
    .record_sample = cd_record_sample,
    .debug_hidden = cd_debug_hidden,
    .fingerprint_extra = cd_fingerprint_extra,
};
