/*
 * arch/qwen35/qwen35.h - the Qwen3.5 / 3.6 hybrid text model (model_type
 * qwen3_5_text, and qwen3_5 with its text tower under
 * model.language_model.): Gated DeltaNet linear attention + gated full
 * attention, zero-centred RMSNorm, partial RoPE, SwiGLU MLP. The math:
 * transformers 5.x models/qwen3_5/modeling_qwen3_5.py (docs/model.md).
 *
 * Files: qwen35.c (the architecture table: config check, state
 * declaration), qwen35_cpu.c (the f32 reference forward pass),
 * qwen35_cuda.c + qwen35_glue.cu (the bf16 CUDA forward pass).
 *
 * The state it declares, per layer in order (max_seq = S):
 *   full attention:  kv.L.k, kv.L.v  [S, n_kv_heads, head_dim]  rows   (f32 cpu, bf16 cuda;
 *                    F8_E4M3 codes on both with params.kv_dtype FRT_KV_FP8: docs/fp8.md)
 *   linear:          gdn.L.state     [n_v_heads, d_k, d_v] f32  whole, recurrent
 *                    gdn.L.conv      [conv_channels, kernel-1] f32  whole, recurrent
 * then the runtime's tokens, boundary and logits.
 */
#ifndef FRT_MODEL_ARCH_QWEN35_H
#define FRT_MODEL_ARCH_QWEN35_H

#include "model/kv_fp8_cpu.h"
#include "model/model_internal.h"

/* Weights of one layer, f32, HF Linear layout [out, in] (cpu backend). NULL
 * where the layer type has no such tensor. With FP8 weights the Linear
 * ones hold their dequantized E4M3 values (model/fp8_weights.h). */
typedef struct qwen35_layer_weights {
    const float *input_ln;      /* [hidden] zero-centred */
    const float *post_ln;       /* [hidden] zero-centred */
    /* full attention */
    const float *q_proj;        /* [n_heads * head_dim * (1 + gate), hidden] */
    const float *k_proj;        /* [n_kv_heads * head_dim, hidden] */
    const float *v_proj;        /* [n_kv_heads * head_dim, hidden] */
    const float *o_proj;        /* [hidden, n_heads * head_dim] */
    const float *q_norm;        /* [head_dim] zero-centred */
    const float *k_norm;        /* [head_dim] zero-centred */
    /* Gated DeltaNet */
    const float *in_proj_qkv;   /* [2 * nk * dk + nv * dv, hidden] */
    const float *in_proj_z;     /* [nv * dv, hidden] */
    const float *in_proj_b;     /* [nv, hidden] */
    const float *in_proj_a;     /* [nv, hidden] */
    const float *conv1d;        /* [conv_channels, kernel] */
    const float *dt_bias;       /* [nv] */
    const float *A_log;         /* [nv] */
    const float *gdn_norm;      /* [dv] plain weight */
    const float *out_proj;      /* [hidden, nv * dv] */
    /* MLP */
    const float *gate_proj;     /* [intermediate, hidden] */
    const float *up_proj;       /* [intermediate, hidden] */
    const float *down_proj;     /* [hidden, intermediate] */
} qwen35_layer_weights;

typedef struct qwen35_weights {
    const float *embed;           /* [vocab, hidden] */
    const float *final_norm;      /* [hidden] zero-centred */
    const float *lm_head;         /* [vocab, hidden] (== embed when tied) */
    qwen35_layer_weights *layers; /* [n_layers] */
    void *arena;                  /* one allocation holding every f32 tensor */
    size_t bytes;
} qwen35_weights;

/* Scratch activations for a prefill piece of up to C rows (cpu backend). */
typedef struct qwen35_scratch {
    float *x;        /* [C, hidden] residual stream */
    float *h;        /* [C, hidden] normed input */
    float *t0, *t1;  /* [C, max_proj] projection outputs */
    float *t2, *t3;  /* [C, max_proj] */
    float *q, *k, *v, *z, *g, *beta, *o; /* per-block temporaries */
    int32_t *pos;          /* [C] positions of the step's rows */
    frt_kv_fp8_cpu kv8;    /* fp8 KV: the step's K / V rows, the dequantized cache, the scales */
    float *act;            /* FP8 weights: [C, max_proj] a prefill Linear input quantized per token and
                              dequantized (frt_fp8w_activations) */
    uint8_t *act8;         /* FP8 weights: the same shape, its E4M3 codes */
    float *act_scale;      /* FP8 weights: [C] its per-token scales */
    float *debug_hidden;   /* [(n_layers + 1), C, hidden] when params.debug_hidden */
    int debug_rows;        /* rows recorded by the last prefill piece */
} qwen35_scratch;

/* Per-model data of the architecture (m->arch_data). */
typedef struct qwen35 {
    int conv_channels;      /* 2 * nk * dk + nv * dv */
    /* Views of the runtime's state table, [n_layers] each; NULL where the
     * layer type has no such buffer. */
    frt_buffer **kv_k, **kv_v;
    frt_buffer **gdn_state, **gdn_conv;
    qwen35_weights w;       /* cpu backend */
    qwen35_scratch s;       /* cpu backend */
} qwen35;

static inline qwen35 *qwen35_of(const frt_model *m) { return (qwen35 *)m->arch_data; }

extern const frt_arch_backend frt_qwen35_cpu_backend; /* qwen35_cpu.c */
#if FRT_HAVE_CUDA
extern const frt_arch_backend frt_qwen35_cuda_backend; /* qwen35_cuda.c */
#endif

#endif /* FRT_MODEL_ARCH_QWEN35_H */
