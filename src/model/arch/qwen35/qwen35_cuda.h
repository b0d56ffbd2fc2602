/*
 * arch/qwen35/qwen35_cuda.h - the private data of the Qwen3.5 CUDA backend,
 * shared by qwen35_cuda_load.c (sizes, weights, GEMM plans, scratch) and
 * qwen35_cuda.c (the forward pass recorded into graphs; its header says
 * how storage, precision and graphs work).
 */
#ifndef FRT_MODEL_ARCH_QWEN35_CUDA_H
#define FRT_MODEL_ARCH_QWEN35_CUDA_H

#include "model/arch/qwen35/qwen35.h"

#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/arch/batch_cuda.h"
#include "model/arch/lm_head_cuda.h"

#include <stddef.h>
#include <stdint.h>

#define F32 FRT_CUDA_F32
#define BF16 FRT_CUDA_BF16

#define ALIGN 256 /* every tensor and scratch array starts 256-byte aligned */
#define GDR_CHUNK 64        /* the chunk of the chunked gated delta rule (as the cpu backend) */
#define DECODE_SPLIT 128    /* flash-decoding split length of the decode attention (256 blocks at 8k) */
#define BATCH_MAX 32        /* the most branch slots one batched decode graph takes */
#define GEMM_WORKSPACE (32u << 20)

/* A Linear weight [out, in] (HF layout), device pointers into the weight
 * arena: bf16 w, or with FP8 weights (cu_model.wfp8; docs/fp8.md "FP8
 * weights") E4M3 codes q [out, in] and one f32 scale per output row s
 * [out] (frt_fp8w_linear_codes), w NULL then. */
typedef struct cu_lin {
    const uint16_t *w;
    const uint8_t *q;
    const float *s;
} cu_lin;

/* Rows r0.. of a Linear weight with in columns (whichever form it holds). */
static inline cu_lin lin_rows(cu_lin l, size_t r0, size_t in)
{
    cu_lin r = {l.w ? l.w + r0 * in : NULL, l.q ? l.q + r0 * in : NULL, l.s ? l.s + r0 : NULL};
    return r;
}

/* Device pointers of one layer's weights (into the weight arena); NULL where
 * the layer type has no such tensor. Matrices are HF Linear [out, in]. */
typedef struct cu_layer {
    const float *input_ln, *post_ln;        /* [H] f32, zero-centred */
    cu_lin q_proj;                          /* [qw, H] */
    cu_lin k_proj, v_proj;                  /* [kvw, H] */
    cu_lin o_proj;                          /* [H, ad] */
    const float *q_norm, *k_norm;           /* [hd] f32, zero-centred */
    cu_lin in_proj_qkv;                     /* [ch, H] */
    cu_lin in_proj_z;                       /* [vd, H] */
    cu_lin in_proj_ba;                      /* [ba_w, H]: in_proj_b rows, in_proj_a rows, zeros */
    const float *conv1d;                    /* [ch, K] f32 */
    const float *dt_bias, *A_log;           /* [nv] f32 */
    const float *gdn_norm;                  /* [dv] f32, plain weight */
    cu_lin out_proj;                        /* [H, vd] */
    cu_lin gate_proj, up_proj;              /* [I, H] */
    cu_lin down_proj;                       /* [H, I] */
} cu_layer;

/* The backend's private data (m->bk_data). */
typedef struct cu_model {
    /* sizes */
    int H, I, V, L, nh, nkv, hd, qw, ad, kvw, gated;
    int nk, nv, dk, dv, kd, vd, ch, ba_w, K;
    int wfp8;     /* the Linear weights are E4M3 + per-row scales (params.weight_dtype FRT_WEIGHT_FP8) */
    int dn_w;     /* ch + vd + ba_w: columns of the fused in_proj_qkv | z | b | a */
    int dn_fused; /* every DeltaNet layer's in_proj_qkv, _z, _ba lie end to end (prefill: one GEMM) */
    int at_w;     /* qw + 2 kvw: columns of the fused q_proj | k_proj | v_proj */
    int at_fused; /* every attention layer's q_proj, k_proj, v_proj lie end to end (prefill: one GEMM) */
    float eps, theta, scale;
    int rot;

    /* weights */
    frt_buffer *wbuf;
    const uint16_t *embed;  /* [V, H] */
    frt_lm_head_cuda head;  /* bf16 (a tied one: embed), or with params.lm_head_dtype FRT_WEIGHT_FP8 E4M3 codes
                               and per-row scales (frt_fp8w_lm_head_put) */
    const float *final_norm;         /* [H] f32 */
    cu_layer *layers;                /* [L] */

    frt_cuda_gemm *gemm;
    int tuned; /* params.gemm_autotune ran (or loaded its file) on the append plans */
    frt_cuda_gemm_fp8 *gemm8; /* wfp8: the FP8 prefill GEMM plans (on top of gemm) */
    char wdesc[256];          /* wfp8: m->weights_desc: frt_fp8w_desc + the prefill GEMM */

    /* scratch: one device buffer, rows sized for the largest prefill replay (a
     * bucket of up to C rows, or a group of m->G pieces: C x G rows) */
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
    uint8_t *xq;     /* wfp8: [C, max(H, ad, vd, I)] a prefill product's input quantized per token (E4M3) */
    float *xs;       /* wfp8: [C] its per-token scales */
    int mlp_acc;     /* wfp8: gate, up and down run as unscaled FP8 accumulators (frt_cuda_gemm_fp8_mlp: gate /
                        up bf16, down f32) whose consumers apply the scales (frt_cuda_swiglu_fp8acc_quantize,
                        frt_cuda_add_rmsnorm_fp8acc) */
    float *ba, *a, *b, *g, *beta; /* [C, ba_w], [C, nv] x 4 */
    void *gdr_ws;    /* chunked gated delta rule (prefill): U, W, decays per chunk */
    size_t gdr_ws_bytes;
    void *attn_ws;   /* decode attention split partials */
    size_t attn_ws_bytes;
    void *prefill_attn_ws; /* prefill attention split partials (every bucket, a group's launches) */
    size_t prefill_attn_ws_bytes;
    int32_t *gpos;   /* m->G > 1: [G + 2] a group replay's piece starts, C and attn_pieces * C (frt_group_pos) */
    int attn_pieces; /* m->G > 1: pieces a group replay's attention launch takes (frt_group_attn_pieces) */
    void *sample_ws;
    size_t sample_ws_bytes;
    int fp8;         /* the KV cache is FP8 E4M3 (m->kv_dtype; docs/fp8.md): attention_fp8 */
    float *kv_scale; /* fp8: [L, 2, nkv] f32 the static per-head K and V scales (frt_model_kv_scales_table) */
    float *blogits;  /* [batch_slots, V]: the batched decode's logits rows */
    frt_batch_ends ends; /* the batched decode's per-slot starts and ends (batch_cuda.h) */
    void *ends_ws;
    size_t ends_ws_bytes;
    int batch_slots; /* the most branch slots one batched decode graph takes; 0: none */
    int batch_g;     /* rows per GEMV group of the batched decode (2 .. FRT_CUDA_GEMV_MAX_N) */
    int32_t *debug_rows;              /* [1] rows of the last debug record */
    float *debug;                     /* [(L + 2), C, H] when params.debug_hidden */
    size_t debug_off, debug_rows_off; /* byte offsets of debug, debug_rows in sbuf */
} cu_model;

static inline size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
static inline int max_i(int a, int b) { return a > b ? a : b; }
static inline int round8(int x) { return (x + 7) / 8 * 8; }
static inline int round16(int x) { return (x + 15) / 16 * 16; }

/* Whether a prefill piece of `rows` rows runs one GEMM over matrices lying
 * end to end (fused: the layout check at load); the GEMV buckets (rows <=
 * FRT_CUDA_GEMV_MAX_N) keep their per-matrix plans. */
static inline int one_gemm(int fused, int rows) { return fused && rows > FRT_CUDA_GEMV_MAX_N; }

/* Whether a prefill replay of `rows` rows (a bucket, or C for a group of
 * whole pieces: a group takes its pieces' decision, so its columns land
 * where theirs do) runs q | k | v as one GEMM (not with the FP8 KV cache,
 * whose prep reads q | gate, k and v apart), in_proj_qkv | z | b | a as
 * one. */
static inline int at_one(const cu_model *c, int rows) { return !c->fp8 && one_gemm(c->at_fused, rows); }
static inline int dn_one(const cu_model *c, int rows) { return one_gemm(c->dn_fused, rows); }

/* qwen35_cuda_load.c */
int frt_qwen35_cu_load_weights(frt_model *m);
int frt_qwen35_cu_alloc_scratch(frt_model *m);
/* frt_arch_backend.prefill_group: the group plans checked on the device
 * (group_cuda.h, frt_group_check); FRT_ERR_UNSUPPORTED for want > 1 with
 * debug_hidden or when a product's check fails; the check's errors. */
int frt_qwen35_cu_prefill_group(frt_model *m, int want, int *got);
void frt_qwen35_cu_free(frt_model *m);
uint64_t frt_qwen35_cu_fingerprint_extra(const frt_model *m);

#endif /* FRT_MODEL_ARCH_QWEN35_CUDA_H */
