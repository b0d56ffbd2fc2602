/*
 * model/cuda/qwen35_cuda.c - the Qwen3.5 hybrid forward pass on the cuda
 * backend: the same function, step for step, as qwen35_cpu.c (whose header
 * names the math source, transformers' modeling_qwen3_5.py), launched as
 * kernels/cuda kernels on the model's stream and captured into CUDA graphs
 * once at load (one prefill variant per length bucket, decode, sample).
 *
 * Storage and precision:
 *   weights      bf16 on the device, one allocation (the "cuda.weights"
 *                buffer); other float checkpoint dtypes are widened to f32 and
 *                rounded to nearest even (util/bf16.h). The small per-channel
 *                tensors (every norm weight, conv1d, A_log, dt_bias) are f32,
 *                as the kernels take them. in_proj_b and in_proj_a are fused
 *                into one [round_up(2 nv, 8), hidden] matrix (rows b, then a,
 *                then zeros) so the GEMM's out dim is a multiple of 8. A tied
 *                lm_head is the embedding.
 *   activations  residual stream f32; GEMM inputs bf16 (the normed hidden,
 *                the attention / Gated DeltaNet / SwiGLU outputs); GEMM
 *                outputs f32 (cuBLASLt, fp32 accumulation); the mixers'
 *                internals f32.
 *   state        KV cache bf16 (kv_elem_bytes 2), recurrent and conv state
 *                f32, as model.c allocates them.
 *
 * Graphs: every value that changes between replays is read from device
 * memory by the kernels: the start position (boundary.pos), the valid rows
 * of a prefill piece (step.n_valid), the token to feed (boundary.pending,
 * decode), the sampling parameters (step.temperature/top_k/top_p) and the
 * RNG (boundary.rng[0]). A prefill variant is sized for its bucket: GEMMs
 * run on all bucket rows (the padding rows compute values nothing reads),
 * every other kernel touches only the first n_valid rows, so the KV cache,
 * conv state, recurrent state and token journal see exactly the valid rows.
 * The end of a step updates the boundary on the device (qwen35_glue.cu):
 * pos += n, has_logits = 1, pending = -1; decode then samples into pending.
 * No host synchronisation inside a step. GEMM algorithms are chosen at load
 * (alloc_scratch), never on the request path.
 */
#include "model/model_internal.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/cuda/qwen35_glue.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <xxhash.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 FRT_CUDA_F32
#define BF16 FRT_CUDA_BF16

/* The sampler reads its parameters straight out of the step record. */
_Static_assert(offsetof(frt_step_args, top_k) - offsetof(frt_step_args, temperature) ==
                   offsetof(frt_cuda_sampler_params, top_k),
               "step args and sampler params disagree (top_k)");
_Static_assert(offsetof(frt_step_args, top_p) - offsetof(frt_step_args, temperature) ==
                   offsetof(frt_cuda_sampler_params, top_p),
               "step args and sampler params disagree (top_p)");
_Static_assert(offsetof(frt_step_args, reserved2) - offsetof(frt_step_args, temperature) ==
                   offsetof(frt_cuda_sampler_params, reserved),
               "step args and sampler params disagree (reserved)");
_Static_assert(sizeof(frt_step_args) - offsetof(frt_step_args, temperature) >= sizeof(frt_cuda_sampler_params),
               "step args too short for the sampler params");

#define ALIGN 256 /* every tensor and scratch array starts 256-byte aligned */
#define GDR_CHUNK 64        /* the chunk of the chunked gated delta rule (as the cpu backend) */
#define DECODE_SPLIT 128    /* flash-decoding split length of the decode attention (256 blocks at 8k) */
#define GEMM_WORKSPACE (32u << 20)

/* Device pointers of one layer's weights (into the weight arena); NULL where
 * the layer type has no such tensor. bf16 matrices are HF Linear [out, in]. */
typedef struct cu_layer {
    const float *input_ln, *post_ln;        /* [H] f32, zero-centred */
    const uint16_t *q_proj;                 /* [qw, H] */
    const uint16_t *k_proj, *v_proj;        /* [kvw, H] */
    const uint16_t *o_proj;                 /* [H, ad] */
    const float *q_norm, *k_norm;           /* [hd] f32, zero-centred */
    const uint16_t *in_proj_qkv;            /* [ch, H] */
    const uint16_t *in_proj_z;              /* [vd, H] */
    const uint16_t *in_proj_ba;             /* [ba_w, H]: in_proj_b rows, in_proj_a rows, zeros */
    const float *conv1d;                    /* [ch, K] f32 */
    const float *dt_bias, *A_log;           /* [nv] f32 */
    const float *gdn_norm;                  /* [dv] f32, plain weight */
    const uint16_t *out_proj;               /* [H, vd] */
    const uint16_t *gate_proj, *up_proj;    /* [I, H] */
    const uint16_t *down_proj;              /* [H, I] */
} cu_layer;

/* The backend's private data (m->bk_data). */
typedef struct cu_model {
    /* sizes */
    int H, I, V, L, nh, nkv, hd, qw, ad, kvw, gated;
    int nk, nv, dk, dv, kd, vd, ch, ba_w, K;
    int dn_w;     /* ch + vd + ba_w: columns of the fused in_proj_qkv | z | b | a */
    int dn_fused; /* every DeltaNet layer's in_proj_qkv, _z, _ba lie end to end (prefill: one GEMM) */
    int at_w;     /* qw + 2 kvw: columns of the fused q_proj | k_proj | v_proj */
    int at_fused; /* every attention layer's q_proj, k_proj, v_proj lie end to end (prefill: one GEMM) */
    float eps, theta, scale;
    int rot;

    /* weights */
    frt_buffer *wbuf;
    const uint16_t *embed, *lm_head; /* [V, H] */
    const float *final_norm;         /* [H] f32 */
    cu_layer *layers;                /* [L] */

    frt_cuda_gemm *gemm;

    /* scratch: one device buffer, rows sized for the largest bucket C */
    frt_buffer *sbuf;
    float *x;        /* [C, H] residual stream */
    uint16_t *h;     /* [C, H] bf16 normed input of the next GEMMs */
    float *hf;       /* [C, H] final-normed hidden (f32) */
    uint16_t *last;  /* [H] bf16 the last valid row of hf (the lm_head input) */
    float *t0, *t1;  /* [C, wide] projection outputs */
    float *q, *k, *v;/* [C, ...] split projections */
    float *zg;       /* [C, max(ad, vd)] attention gate or Gated DeltaNet z */
    float *o;        /* [C, max(ad, vd)] mixer output before its projection */
    uint16_t *ob;    /* [C, max(ad, vd, I)] bf16 input of o_proj / out_proj / down_proj */
    float *delta;    /* [C, H] block output, added to x */
    float *ba, *a, *b, *g, *beta; /* [C, ba_w], [C, nv] x 4 */
    void *gdr_ws;    /* chunked gated delta rule (prefill): U, W, decays per chunk */
    size_t gdr_ws_bytes;
    void *attn_ws;   /* decode attention split partials */
    size_t attn_ws_bytes;
    void *prefill_attn_ws; /* prefill attention split partials (every bucket) */
    size_t prefill_attn_ws_bytes;
    void *sample_ws;
    size_t sample_ws_bytes;
    int32_t *debug_rows;              /* [1] rows of the last debug record */
    float *debug;                     /* [(L + 2), C, H] when params.debug_hidden */
    size_t debug_off, debug_rows_off; /* byte offsets of debug, debug_rows in sbuf */
} cu_model;

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
static int max_i(int a, int b) { return a > b ? a : b; }
static int round8(int x) { return (x + 7) / 8 * 8; }

/* ---- sizes ------------------------------------------------------------- */

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
    c->ch = m->conv_channels;
    c->ba_w = round8(2 * c->nv);
    c->K = cfg->lin_conv_kernel;
    c->eps = cfg->rms_norm_eps;
    c->theta = cfg->rope_theta;
    c->rot = cfg->rotary_dim;
    c->scale = 1.0f / sqrtf((float)c->hd);

    int has_full = 0, has_lin = 0;
    for (int l = 0; l < c->L; l++) {
        if (cfg->layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            has_full = 1;
        else
            has_lin = 1;
    }
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

static int load_all(wload *wl)
{
    frt_model *m = wl->m;
    cu_model *c = wl->c;
    const frt_model_config *cfg = &m->cfg;
    int64_t H = c->H, I = c->I, V = c->V, hd = c->hd;
    wl->used = 0;
    PUT_M(c->embed, "embed_tokens.weight", V * H);
    PUT_V(c->final_norm, "norm.weight", H);
    if (cfg->tie_word_embeddings)
        c->lm_head = c->embed;
    else
        PUT_M(c->lm_head, "lm_head.weight", V * H);
    for (int l = 0; l < c->L; l++) {
        cu_layer *lw = &c->layers[l];
        char n[160];
#define NAME(suffix) (snprintf(n, sizeof n, "layers.%d.%s", l, suffix), n)
        PUT_V(lw->input_ln, NAME("input_layernorm.weight"), H);
        PUT_V(lw->post_ln, NAME("post_attention_layernorm.weight"), H);
        PUT_M(lw->gate_proj, NAME("mlp.gate_proj.weight"), I * H);
        PUT_M(lw->up_proj, NAME("mlp.up_proj.weight"), I * H);
        PUT_M(lw->down_proj, NAME("mlp.down_proj.weight"), H * I);
        if (cfg->layer_types[l] == FRT_LAYER_FULL_ATTENTION) {
            PUT_M(lw->q_proj, NAME("self_attn.q_proj.weight"), (int64_t)c->qw * H);
            PUT_M(lw->k_proj, NAME("self_attn.k_proj.weight"), (int64_t)c->kvw * H);
            PUT_M(lw->v_proj, NAME("self_attn.v_proj.weight"), (int64_t)c->kvw * H);
            PUT_M(lw->o_proj, NAME("self_attn.o_proj.weight"), H * c->ad);
            PUT_V(lw->q_norm, NAME("self_attn.q_norm.weight"), hd);
            PUT_V(lw->k_norm, NAME("self_attn.k_norm.weight"), hd);
        } else {
            int64_t nv = c->nv;
            PUT_M(lw->in_proj_qkv, NAME("linear_attn.in_proj_qkv.weight"), (int64_t)c->ch * H);
            PUT_M(lw->in_proj_z, NAME("linear_attn.in_proj_z.weight"), (int64_t)c->vd * H);
            /* b and a fused into one padded matrix: rows [0, nv) b, [nv, 2 nv) a */
            const frt_tensor *tb = NULL, *ta = NULL;
            FRT_TRY(find_tensor(wl, NAME("linear_attn.in_proj_b.weight"), nv * H, &tb));
            FRT_TRY(find_tensor(wl, NAME("linear_attn.in_proj_a.weight"), nv * H, &ta));
            size_t off = reserve(wl, (size_t)c->ba_w * (size_t)H * 2);
            if (wl->pass == 1) {
                FRT_TRY(upload(wl, tb, off, 1));
                FRT_TRY(upload(wl, ta, off + (size_t)nv * (size_t)H * 2, 1));
                lw->in_proj_ba = (const uint16_t *)(const void *)(wl->base + off);
            }
            PUT_V(lw->conv1d, NAME("linear_attn.conv1d.weight"), (int64_t)c->ch * c->K);
            PUT_V(lw->dt_bias, NAME("linear_attn.dt_bias"), nv);
            PUT_V(lw->A_log, NAME("linear_attn.A_log"), nv);
            PUT_V(lw->gdn_norm, NAME("linear_attn.norm.weight"), c->dv);
            PUT_M(lw->out_proj, NAME("linear_attn.out_proj.weight"), H * c->vd);
        }
#undef NAME
    }
    return 0;
}

static int cu_load_weights(frt_model *m)
{
    cu_model *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory");
    m->bk_data = c;
    FRT_TRY(set_sizes(m, c));
    c->layers = calloc((size_t)c->L, sizeof *c->layers);
    if (!c->layers) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory for the layer table");
    wload wl = {.m = m, .c = c, .pass = 0};
    FRT_TRY(load_all(&wl));
    size_t bytes = wl.used;
    FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.weights", FRT_SPACE_DEVICE, bytes, &c->wbuf));
    /* zeros first: the padding rows of the fused in_proj_ba stay zero */
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
        if (lw->in_proj_qkv && (lw->in_proj_z != lw->in_proj_qkv + (size_t)c->ch * (size_t)c->H ||
                                lw->in_proj_ba != lw->in_proj_z + (size_t)c->vd * (size_t)c->H))
            c->dn_fused = 0;
        if (lw->q_proj && (lw->k_proj != lw->q_proj + (size_t)c->qw * (size_t)c->H ||
                           lw->v_proj != lw->k_proj + (size_t)c->kvw * (size_t)c->H))
            c->at_fused = 0;
    }
    m->w.bytes = bytes;
    return 0;
}

/* ---- scratch ----------------------------------------------------------- */

/* Whether a prefill piece of `rows` rows runs one GEMM over matrices lying
 * end to end (fused: the layout check at load); the GEMV buckets (rows <=
 * FRT_CUDA_GEMV_MAX_N) keep their per-matrix plans. */
static int one_gemm(int fused, int rows) { return fused && rows > FRT_CUDA_GEMV_MAX_N; }

static int plan_all(frt_model *m, cu_model *c, int n)
{
    const frt_model_config *cfg = &m->cfg;
    int has_full = 0, has_lin = 0;
    for (int l = 0; l < c->L; l++) {
        if (cfg->layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            has_full = 1;
        else
            has_lin = 1;
    }
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->I, F32, 0));  /* gate, up */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->I, c->H, F32, 0));  /* down */
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
    return 0;
}

/* Decode's output projections accumulate into the residual (gemm_out): their
 * n = 1 accumulate plans. */
static int plan_decode_out(frt_model *m, cu_model *c)
{
    int has_full = 0, has_lin = 0;
    for (int l = 0; l < c->L; l++) {
        if (m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            has_full = 1;
        else
            has_lin = 1;
    }
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, 1, c->I, c->H, F32, 1));                /* down */
    if (has_full) FRT_TRY(frt_cuda_gemm_plan(c->gemm, 1, c->ad, c->H, F32, 1)); /* o_proj */
    if (has_lin) FRT_TRY(frt_cuda_gemm_plan(c->gemm, 1, c->vd, c->H, F32, 1));  /* out_proj */
    return 0;
}

static int cu_alloc_scratch(frt_model *m)
{
    cu_model *c = m->bk_data;
    if (!c) return frt_error(FRT_ERR_STATE, "cuda model: scratch before weights");
    size_t R = (size_t)m->C, f = sizeof(float), h2 = sizeof(uint16_t);
    size_t H = (size_t)c->H;
    size_t nv = (size_t)max_i(c->nv, 1);
    size_t wide = (size_t)max_i(max_i(max_i(max_i(c->qw, c->ch), c->I), c->dn_fused ? c->dn_w : 0),
                                c->at_fused ? c->at_w : 0);
    size_t wide1 = (size_t)max_i(c->ch, c->I);
    size_t qwid = (size_t)max_i(c->ad, c->kd), kwid = (size_t)max_i(c->kvw, c->kd);
    size_t vwid = (size_t)max_i(c->kvw, c->vd), owid = (size_t)max_i(c->ad, c->vd);
    size_t obwid = (size_t)max_i(max_i(c->ad, c->vd), c->I);

    c->gdr_ws_bytes = frt_cuda_gdr_chunked_workspace_bytes(m->C, c->nk, c->nv, c->dk, c->dv, GDR_CHUNK);
    c->attn_ws_bytes = frt_cuda_attention_workspace_bytes(1, m->max_seq, c->nh, c->hd, DECODE_SPLIT);
    c->prefill_attn_ws_bytes = frt_cuda_attention_prefill_workspace_bytes(m->C, m->max_seq, c->nh, c->hd);
    FRT_TRY(frt_cuda_sample_workspace_bytes(c->V, &c->sample_ws_bytes));

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
        CARVE(c->ba, float, R * (size_t)c->ba_w * f);
        CARVE(c->a, float, R * nv * f);
        CARVE(c->b, float, R * nv * f);
        CARVE(c->g, float, R * nv * f);
        CARVE(c->beta, float, R * nv * f);
        CARVE(c->gdr_ws, char, c->gdr_ws_bytes);
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
            total = off;
            FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.scratch", FRT_SPACE_DEVICE, total, &c->sbuf));
            FRT_TRY(frt_buffer_fill(c->sbuf, 0, total, 0, m->stream));
        }
    }

    /* cuBLASLt: the handle, the stream's workspace, and every plan the
     * captured graphs use (each bucket, and n = 1 for decode and lm_head). */
    FRT_TRY(frt_cuda_gemm_create(GEMM_WORKSPACE, &c->gemm));
    FRT_TRY(frt_cuda_gemm_add_stream(c->gemm, frt_stream_native(m->stream)));
    FRT_TRY(plan_all(m, c, 1));
    FRT_TRY(plan_decode_out(m, c));
    for (int i = 0; i < m->n_buckets; i++) FRT_TRY(plan_all(m, c, m->buckets[i]));
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, 1, c->H, c->V, F32, 0)); /* lm_head */
    return frt_stream_sync(m->stream);
}

static void cu_free(frt_model *m)
{
    cu_model *c = m->bk_data;
    if (!c) return;
    frt_cuda_gemm_destroy(c->gemm);
    frt_buffer_free(c->sbuf);
    frt_buffer_free(c->wbuf);
    free(c->layers);
    free(c);
    m->bk_data = NULL;
}

/* ---- the forward pass --------------------------------------------------- */

/* What one recorded step works on. */
typedef struct fwd {
    frt_model *m;
    cu_model *c;
    void *st;             /* cudaStream_t */
    int R;                /* rows of the variant: the bucket, or 1 for decode */
    int decode;
    const int32_t *d_n;   /* valid rows (step.n_valid), NULL for decode (= 1) */
    const int32_t *d_no_logits; /* step.no_logits (prefill: skip the LM head), NULL for decode */
    int at_one, dn_one;   /* prefill: one GEMM for q | k | v, for in_proj_qkv | z | b | a (one_gemm) */
    int32_t *d_pos;       /* boundary.pos */
    int32_t *d_pending;   /* boundary.pending */
    int32_t *d_has_logits;
    uint64_t *d_rng;      /* boundary.rng[0] */
    const float *d_temperature; /* step.temperature */
    const frt_cuda_sampler_params *d_params;
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
    f.at_one = !decode && one_gemm(f.c->at_fused, R);
    f.dn_one = !decode && one_gemm(f.c->dn_fused, R);
    f.d_pos = (int32_t *)(void *)(bd + offsetof(frt_boundary, pos));
    f.d_pending = (int32_t *)(void *)(bd + offsetof(frt_boundary, pending));
    f.d_has_logits = (int32_t *)(void *)(bd + offsetof(frt_boundary, has_logits));
    f.d_rng = (uint64_t *)(void *)(bd + offsetof(frt_boundary, rng));
    f.d_temperature = (const float *)(const void *)(sp + offsetof(frt_step_args, temperature));
    f.d_params = (const frt_cuda_sampler_params *)(const void *)(sp + offsetof(frt_step_args, temperature));
    return f;
}

/* y [R, out] f32 = x [R, in] bf16 . w [out, in]^T */
static int gemm(const fwd *f, float *y, const uint16_t *x, const uint16_t *w, int in, int out)
{
    return frt_cuda_gemm_run(f->c->gemm, f->st, y, F32, x, w, f->R, in, out, 0);
}

/* A block's output projection x [R, in] bf16 . w [H, in]^T: decode adds it
 * straight into the residual stream c->x (the GEMV's accumulating store is
 * fl(sum + x), the bits of storing delta and adding it in f32); prefill
 * writes c->delta, which the next add_rmsnorm adds. */
static int gemm_out(const fwd *f, const uint16_t *x, const uint16_t *w, int in)
{
    cu_model *c = f->c;
    if (f->decode) return frt_cuda_gemm_run(c->gemm, f->st, c->x, F32, x, w, f->R, in, c->H, 1);
    return gemm(f, c->delta, x, w, in, c->H);
}

/* Decode: the RMSNorm of the residual c->x with weight w (zero-centred), as
 * the prologue of the GEMV that consumes it. */
static frt_cuda_gemv_norm resid_norm(const fwd *f, const float *w)
{
    frt_cuda_gemv_norm nm = {f->c->x, w, f->c->eps, 1};
    return nm;
}

/* Copies the rows of a hidden state [R, H] f32 into debug slot idx. */
static int debug_copy(const fwd *f, int idx, const float *src)
{
    cu_model *c = f->c;
    if (!c->debug) return 0;
    size_t H = (size_t)c->H;
    float *dst = c->debug + (size_t)idx * (size_t)f->m->C * H;
    FRT_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)f->R * H * sizeof(float), cudaMemcpyDeviceToDevice,
                                 (cudaStream_t)f->st));
    return 0;
}

/* Full attention (Qwen3_5Attention) of the normed input c->h into c->delta;
 * decode: of rmsnorm(c->x, input_ln), added into c->x. */
static int attention_block(const fwd *f, int l)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R, nh = c->nh, nkv = c->nkv, hd = c->hd;
    int per_head = c->gated ? 2 * hd : hd;
    uint16_t *kc = frt_buffer_ptr(m->kv_k[l]), *vc = frt_buffer_ptr(m->kv_v[l]);

    if (f->decode) { /* input_ln + q | gate, k, v in one GEMV launch (the same bits as 1 + 3) */
        const frt_cuda_gemv_entry e[3] = {{c->t0, F32, lw->q_proj, c->qw},
                                          {c->k, F32, lw->k_proj, c->kvw},
                                          {c->v, F32, lw->v_proj, c->kvw}};
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->input_ln);
        FRT_TRY(frt_cuda_gemv_multi_norm(st, e, 3, &nm, R, c->H));
    } else if (f->at_one) {
        /* one GEMM over the weights lying end to end: t0 [R, q | gate per head, k, v], which the
         * prep below reads in place */
        FRT_TRY(gemm(f, c->t0, c->h, lw->q_proj, c->H, c->at_w));
    } else {
        FRT_TRY(gemm(f, c->t0, c->h, lw->q_proj, c->H, c->qw)); /* [R, nh, (q | gate)] */
        FRT_TRY(gemm(f, c->k, c->h, lw->k_proj, c->H, c->kvw));
        FRT_TRY(gemm(f, c->v, c->h, lw->v_proj, c->H, c->kvw));
    }
    if (f->decode) { /* split, q/k norms, RoPE and the KV append in one launch (q within 1e-8 of the unfused path) */
        FRT_TRY(frt_cuda_attn_decode_prep(st, c->q, c->gated ? c->zg : NULL, kc, vc, c->t0, c->k, c->v, lw->q_norm,
                                          lw->k_norm, f->d_pos, f->d_n, m->max_seq, nh, nkv, hd, c->rot, c->theta,
                                          c->eps, 1, c->gated));
    } else if (f->at_one) {
        /* split, q/k norms, RoPE and the KV append of every row in one launch (the same bits as
         * the sequence below) */
        const int W = c->at_w;
        FRT_TRY(frt_cuda_attn_prep(st, c->q, c->gated ? c->zg : NULL, kc, vc, c->t0, W, c->t0 + c->qw, W,
                                   c->t0 + c->qw + c->kvw, W, lw->q_norm, lw->k_norm, f->d_pos, f->d_n, R,
                                   m->max_seq, nh, nkv, hd, c->rot, c->theta, c->eps, 1, c->gated));
    } else {
        FRT_TRY(frt_cuda_copy_rows(st, c->q, F32, c->t0, F32, f->d_n, R, nh, hd, per_head));
        if (c->gated) FRT_TRY(frt_cuda_copy_rows(st, c->zg, F32, c->t0 + hd, F32, f->d_n, R, nh, hd, per_head));
        FRT_TRY(frt_cuda_rmsnorm(st, c->q, F32, c->q, F32, lw->q_norm, f->d_n, R, nh, hd, c->eps, 1));
        FRT_TRY(frt_cuda_rmsnorm(st, c->k, F32, c->k, F32, lw->k_norm, f->d_n, R, nkv, hd, c->eps, 1));
        FRT_TRY(frt_cuda_rope(st, c->q, F32, f->d_pos, f->d_n, R, nh, hd, c->rot, c->theta));
        FRT_TRY(frt_cuda_rope(st, c->k, F32, f->d_pos, f->d_n, R, nkv, hd, c->rot, c->theta));
        FRT_TRY(frt_cuda_kv_append(st, kc, vc, c->k, c->v, F32, f->d_pos, f->d_n, R, m->max_seq, nkv, hd));
    }
    if (f->decode)
        FRT_TRY(frt_cuda_attention(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, nh, nkv, hd,
                                   c->scale, DECODE_SPLIT, c->attn_ws, c->attn_ws_bytes));
    else {
        /* tensor cores for head_dim 64/128/256; otherwise the scalar prefill form */
        int rc = frt_cuda_attention_prefill(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, nh,
                                            nkv, hd, c->scale, c->prefill_attn_ws, c->prefill_attn_ws_bytes);
        if (rc == FRT_ERR_UNSUPPORTED)
            rc = frt_cuda_attention(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, nh, nkv, hd,
                                    c->scale, 0, NULL, 0);
        FRT_TRY(rc);
    }
    if (c->gated) FRT_TRY(frt_cuda_sigmoid_mul(st, c->o, F32, c->zg, F32, f->d_n, R, nh * hd));
    FRT_TRY(frt_cuda_convert(st, c->ob, BF16, c->o, F32, f->d_n, R, nh * hd));
    return gemm_out(f, c->ob, lw->o_proj, c->ad);
}

/* Gated DeltaNet (Qwen3_5GatedDeltaNet) of c->h into c->delta; decode: of
 * rmsnorm(c->x, input_ln), added into c->x. */
static int deltanet_block(const fwd *f, int l)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R, nk = c->nk, nv = c->nv, dk = c->dk, dv = c->dv, ch = c->ch, kd = c->kd, vd = c->vd;
    float *state = frt_buffer_ptr(m->gdn_state[l]), *conv = frt_buffer_ptr(m->gdn_conv[l]);

    if (f->decode) { /* input_ln + qkv, z, b, a in one GEMV launch; b and a straight into their buffers */
        const frt_cuda_gemv_entry e[4] = {{c->t0, F32, lw->in_proj_qkv, ch},
                                          {c->zg, F32, lw->in_proj_z, vd},
                                          {c->b, F32, lw->in_proj_ba, nv},
                                          {c->a, F32, lw->in_proj_ba + (size_t)nv * (size_t)c->H, nv}};
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->input_ln);
        FRT_TRY(frt_cuda_gemv_multi_norm(st, e, 4, &nm, R, c->H));
    } else if (f->dn_one) {
        /* one GEMM over the weights lying end to end: t0 [R, ch | vd | ba_w];
         * the conv and the gated norm read their columns in place (below) */
        const int W = c->dn_w;
        FRT_TRY(gemm(f, c->t0, c->h, lw->in_proj_qkv, c->H, W));
    } else {
        FRT_TRY(gemm(f, c->t0, c->h, lw->in_proj_qkv, c->H, ch));
        FRT_TRY(gemm(f, c->zg, c->h, lw->in_proj_z, c->H, vd));
        FRT_TRY(gemm(f, c->ba, c->h, lw->in_proj_ba, c->H, c->ba_w));
    }
    if (f->decode && (dk == 64 || dk == 128) && (dv == 64 || dv == 128) && nv / nk <= 8 && c->K <= 4) {
        /* conv + L2 norms + gates + the recurrent rule + the gated norm: one launch (gdn_decode.cu) */
        FRT_TRY(frt_cuda_gdn_decode(st, c->ob, BF16, state, conv, NULL, c->t0, F32, lw->conv1d, c->zg, c->a, c->b,
                                    lw->A_log, lw->dt_bias, lw->gdn_norm, f->d_n, nk, nv, dk, dv, c->K, c->eps));
        return gemm_out(f, c->ob, lw->out_proj, vd);
    }
    /* the conv reads its ch columns in place and writes q, k, v apart */
    const int x_stride = f->dn_one ? c->dn_w : ch;
    void *const qkv[3] = {c->q, c->k, c->v};
    const int widths[3] = {kd, kd, vd};
    /* ... and L2-normalises the q and k heads on the way when their layout allows (blocks of 256
     * channels, dk a multiple of 32 dividing 256), else frt_cuda_l2norm after it */
    int rc = frt_cuda_conv1d_causal_split(st, qkv, widths, 3, F32, c->t0, F32, x_stride, conv, lw->conv1d, f->d_n,
                                          R, ch, c->K, 2 * kd, dk, 1e-6f);
    const int l2_fused = rc != FRT_ERR_UNSUPPORTED;
    if (!l2_fused)
        rc = frt_cuda_conv1d_causal_split(st, qkv, widths, 3, F32, c->t0, F32, x_stride, conv, lw->conv1d, f->d_n,
                                          R, ch, c->K, 0, 0, 0.0f);
    FRT_TRY(rc);
    if (!l2_fused) {
        FRT_TRY(frt_cuda_l2norm(st, c->q, F32, f->d_n, R, nk, dk, 1e-6f));
        FRT_TRY(frt_cuda_l2norm(st, c->k, F32, f->d_n, R, nk, dk, 1e-6f));
    }
    if (f->decode) /* the GEMV wrote b and a to their buffers */
        FRT_TRY(frt_cuda_gdn_gate(st, c->g, c->beta, c->a, c->b, F32, lw->A_log, lw->dt_bias, f->d_n, R, nv));
    else if (f->dn_one) /* b, a read in place: columns ch + vd .. of the fused output */
        FRT_TRY(frt_cuda_gdn_gate_strided(st, c->g, c->beta, c->t0 + ch + vd + nv, c->t0 + ch + vd, F32, c->dn_w,
                                          lw->A_log, lw->dt_bias, f->d_n, R, nv));
    else /* b, a read in place from ba [R, ba_w] */
        FRT_TRY(frt_cuda_gdn_gate_strided(st, c->g, c->beta, c->ba + nv, c->ba, F32, c->ba_w, lw->A_log,
                                          lw->dt_bias, f->d_n, R, nv));
    if (f->decode)
        FRT_TRY(frt_cuda_gdr_recurrent(st, c->o, F32, state, c->q, c->k, c->v, F32, c->g, c->beta, f->d_n, R, nk,
                                       nv, dk, dv));
    else
        FRT_TRY(frt_cuda_gdr_chunked(st, c->o, F32, state, c->q, c->k, c->v, F32, c->g, c->beta, f->d_n, R, nk,
                                     nv, dk, dv, GDR_CHUNK, c->gdr_ws, c->gdr_ws_bytes));
    if (f->dn_one) /* z read in place from the fused output */
        FRT_TRY(frt_cuda_rmsnorm_gated_strided(st, c->ob, BF16, c->o, F32, c->t0 + ch, F32, c->dn_w, lw->gdn_norm,
                                               f->d_n, R, nv, dv, c->eps));
    else
        FRT_TRY(frt_cuda_rmsnorm_gated(st, c->ob, BF16, c->o, F32, c->zg, F32, lw->gdn_norm, f->d_n, R, nv, dv,
                                       c->eps));
    return gemm_out(f, c->ob, lw->out_proj, vd);
}

/* SwiGLU MLP (Qwen3_5MLP) of c->h into c->delta; decode: of rmsnorm(c->x,
 * post_ln), added into c->x. */
static int mlp_block(const fwd *f, int l)
{
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    if (f->decode) { /* post_ln, gate, up and SwiGLU in one GEMV launch */
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->post_ln);
        FRT_TRY(frt_cuda_gemv_swiglu_norm(f->st, c->ob, BF16, &nm, lw->gate_proj, lw->up_proj, f->R, c->H, c->I));
    } else {
        FRT_TRY(gemm(f, c->t0, c->h, lw->gate_proj, c->H, c->I));
        FRT_TRY(gemm(f, c->t1, c->h, lw->up_proj, c->H, c->I));
        FRT_TRY(frt_cuda_swiglu(f->st, c->ob, BF16, c->t0, c->t1, F32, f->d_n, f->R, c->I));
    }
    return gemm_out(f, c->ob, lw->down_proj, c->I);
}

/* One forward step (task_embed, task_layer x L, task_final of the cpu
 * backend): the journal, the embedding, the layers, the final norm, the
 * logits of the last valid row, and the boundary advance. Prefill: each norm
 * is a launch of its own (the first rmsnorm, then add_rmsnorm fusing the
 * residual add of delta with the next norm). Decode: no norm launch inside
 * the layers (the mixer and MLP GEMVs normalise c->x in their prologue, the
 * output projections accumulate into c->x: the same residual bits), one
 * rmsnorm for the final norm. */
static int record_forward(const fwd *f)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const frt_model_config *cfg = &m->cfg;
    void *st = f->st;
    int R = f->R, H = c->H;
    const int32_t *ids = f->decode ? f->d_pending : (const int32_t *)frt_buffer_ptr(m->in_ids);

    FRT_TRY(frt_qwen35_journal(st, frt_buffer_ptr(m->tokens), ids, f->d_pos, f->d_n, R, m->max_seq));
    FRT_TRY(frt_cuda_embedding(st, c->x, F32, c->embed, c->V, H, ids, f->d_n, R));
    FRT_TRY(debug_copy(f, 0, c->x));
    if (!f->decode)
        FRT_TRY(frt_cuda_rmsnorm(st, c->h, BF16, c->x, F32, c->layers[0].input_ln, f->d_n, R, 1, H, c->eps, 1));
    for (int l = 0; l < c->L; l++) {
        const cu_layer *lw = &c->layers[l];
        if (cfg->layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            FRT_TRY(attention_block(f, l));
        else
            FRT_TRY(deltanet_block(f, l));
        if (!f->decode)
            FRT_TRY(frt_cuda_add_rmsnorm(st, c->x, c->delta, F32, c->h, BF16, lw->post_ln, f->d_n, R, H, c->eps,
                                         1));
        FRT_TRY(mlp_block(f, l)); /* decode: down_proj added into c->x */
        if (!f->decode && l + 1 < c->L)
            FRT_TRY(frt_cuda_add_rmsnorm(st, c->x, c->delta, F32, c->h, BF16, c->layers[l + 1].input_ln, f->d_n, R,
                                         H, c->eps, 1));
        else if (!f->decode) /* the last layer's residual add fused with the final norm */
            FRT_TRY(frt_cuda_add_rmsnorm(st, c->x, c->delta, F32, c->hf, F32, c->final_norm, f->d_n, R, H, c->eps,
                                         1));
        FRT_TRY(debug_copy(f, l + 1, c->x));
    }
    if (f->decode) /* the final norm of the residual: the LM head's input */
        FRT_TRY(frt_cuda_rmsnorm(st, c->hf, F32, c->x, F32, c->final_norm, f->d_n, R, 1, H, c->eps, 1));
    FRT_TRY(debug_copy(f, c->L + 1, c->hf));
    FRT_TRY(frt_cuda_last_row(st, c->last, BF16, c->hf, F32, f->d_n, R, H));
    if (f->d_no_logits) { /* prefill: only the last piece of a call computes the logits */
        int rc = frt_cuda_gemm_run_unless(c->gemm, st, f->d_no_logits, frt_buffer_ptr(m->logits), F32, c->last,
                                          c->lm_head, 1, H, c->V, 0);
        if (rc != FRT_ERR_UNSUPPORTED) FRT_TRY(rc);
        else FRT_TRY(frt_cuda_gemm_run(c->gemm, st, frt_buffer_ptr(m->logits), F32, c->last, c->lm_head, 1, H,
                                       c->V, 0)); /* a cuBLASLt plan: always (has_logits still follows the flag) */
    } else {
        FRT_TRY(frt_cuda_gemm_run(c->gemm, st, frt_buffer_ptr(m->logits), F32, c->last, c->lm_head, 1, H, c->V,
                                  0));
    }
    return frt_qwen35_advance(st, f->d_pos, f->d_pending, f->d_has_logits, c->debug ? c->debug_rows : NULL,
                              f->d_n, f->d_no_logits, R);
}

/* Samples pending from the logits (task_sample): argmax when the step's
 * temperature is <= 0 (the RNG untouched), frt_cuda_sample otherwise. One
 * cooperative launch (frt_cuda_sample_token): a greedy step is one pass over
 * the logits, no sort. */
static int record_sample_work(const fwd *f)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const float *logits = frt_buffer_ptr(m->logits);
    return frt_cuda_sample_token(f->st, f->d_pending, logits, c->V, f->d_params, f->d_rng, c->sample_ws,
                                 c->sample_ws_bytes);
}

static int cu_record_prefill(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    if (rc->bucket < 1 || rc->bucket > rc->m->C)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda model: bucket %d outside [1, %d]", rc->bucket, rc->m->C);
    fwd f = fwd_make(s, rc->m, rc->bucket, 0);
    return record_forward(&f);
}

static int cu_record_decode(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 1);
    FRT_TRY(record_forward(&f));
    return record_sample_work(&f);
}

static int cu_record_sample(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 0);
    return record_sample_work(&f);
}

static int cu_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    cu_model *c = m->bk_data;
    if (!c || !c->debug) return frt_error(FRT_ERR_STATE, "debug_hidden: not enabled (params.debug_hidden)");
    int32_t rows = 0;
    FRT_TRY(frt_buffer_read(c->sbuf, c->debug_rows_off, &rows, sizeof rows, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    if (idx < 0 || idx > c->L + 1 || n < 1 || n > rows)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "debug_hidden: index %d rows %d out of range (%d rows recorded)", idx,
                         n, rows);
    size_t H = (size_t)c->H;
    size_t off = c->debug_off + (size_t)idx * (size_t)m->C * H * sizeof(float);
    FRT_TRY(frt_buffer_read(c->sbuf, off, out, (size_t)n * H * sizeof(float), m->stream));
    return frt_stream_sync(m->stream);
}

/* The GEMM plans chosen at load (algorithm, tile, stages, split-k, ... for
 * every shape), hashed into the model fingerprint: another choice is other
 * arithmetic, so a capsule made under it must not restore here. */
static uint64_t cu_fingerprint_extra(const frt_model *m)
{
    const cu_model *c = m->bk_data;
    if (!c || !c->gemm) return 0;
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0);
    int n = frt_cuda_gemm_plan_count(c->gemm);
    for (int i = 0; i < n; i++) {
        frt_cuda_gemm_plan_info pi;
        if (frt_cuda_gemm_plan_get(c->gemm, i, &pi) < 0) continue;
        int f[] = {pi.n, pi.in_dim, pi.out_dim, (int)pi.out_dtype, pi.accumulate, pi.algo_id, pi.tile_id,
                   pi.stages_id, pi.splitk_num, pi.reduction_scheme, pi.cta_swizzling, pi.custom_option};
        XXH64_update(h, f, sizeof f);
    }
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

const frt_model_backend frt_qwen35_cuda_backend = {
    .name = "cuda",
    .kv_elem_bytes = sizeof(uint16_t),
    .state_dtypes = "weights=bf16,norms=f32,kv=bf16,gdn=f32,conv=f32,resid=f32,gemm=cublaslt-bf16-f32acc,decode=gemv-fused-3",
    .load_weights = cu_load_weights,
    .alloc_scratch = cu_alloc_scratch,
    .free = cu_free,
    .record_prefill = cu_record_prefill,
    .record_decode = cu_record_decode,
    .record_sample = cu_record_sample,
    .debug_hidden = cu_debug_hidden,
    .fingerprint_extra = cu_fingerprint_extra,
};
