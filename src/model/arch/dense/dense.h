/*
 * arch/dense/dense.h - the dense decoder-only transformers: Llama 2 / 3 /
 * 3.1 / 3.2 (model_type llama), Mistral without a sliding window (mistral),
 * Qwen2 / 2.5 (qwen2) and Qwen3 (qwen3). One folder for the family: they
 * are the same arithmetic, switched per config by facts the config parser
 * reads (weights/config.h), never by model_type:
 *   - q/k/v biases (qwen2; llama attention_bias) and an o_proj bias (llama
 *     attention_bias): cfg.attention_bias, cfg.o_proj_bias;
 *   - per-head q/k RMSNorm before RoPE (qwen3): cfg.qk_norm;
 *   - RoPE inverse frequencies "default" or "llama3"-scaled: cfg.rope_type;
 *   - tied embeddings: cfg.tie_word_embeddings.
 * The math: transformers 5.x models/llama/modeling_llama.py,
 * models/qwen2/modeling_qwen2.py, models/qwen3/modeling_qwen3.py,
 * models/mistral/modeling_mistral.py, modeling_rope_utils.py (docs/model.md).
 *
 * Files: dense.c (the architecture table: config check, the RoPE table,
 * state declaration), dense_cpu.c (the f32 reference forward pass),
 * dense_cuda.c + dense_glue.cu (the bf16 CUDA forward pass: compiled here,
 * checked on the GPU by tests/test_cuda_dense.c).
 *
 * The state it declares, per layer l in order (max_seq = S):
 *   kv.l.k, kv.l.v  [S, n_kv_heads, head_dim]  rows  (f32 on the cpu backend;
 *                   F8_E4M3 codes with params.kv_dtype FRT_KV_FP8: docs/fp8.md)
 * then the runtime's tokens, boundary and logits. No recurrent state: a
 * capsule at any position is exact.
 */
#ifndef FRT_MODEL_ARCH_DENSE_H
#define FRT_MODEL_ARCH_DENSE_H

#include "model/fp8_weights.h"
#include "model/kv_fp8_cpu.h"
#include "model/model_internal.h"

/* Weights of one layer, f32, HF Linear layout [out, in] (cpu backend). Biases
 * and norms are NULL where the config has none. */
typedef struct dense_layer_weights {
    const float *input_ln;  /* [hidden] plain RMSNorm weight (x * w) */
    const float *post_ln;   /* [hidden] */
    const float *q_proj;    /* [n_heads * head_dim, hidden] */
    const float *k_proj;    /* [n_kv_heads * head_dim, hidden] */
    const float *v_proj;    /* [n_kv_heads * head_dim, hidden] */
    const float *o_proj;    /* [hidden, n_heads * head_dim] */
    const float *q_bias;    /* [n_heads * head_dim]    attention_bias */
    const float *k_bias;    /* [n_kv_heads * head_dim] */
    const float *v_bias;    /* [n_kv_heads * head_dim] */
    const float *o_bias;    /* [hidden]                o_proj_bias */
    const float *q_norm;    /* [head_dim]              qk_norm */
    const float *k_norm;    /* [head_dim] */
    const float *gate_proj; /* [intermediate, hidden] */
    const float *up_proj;   /* [intermediate, hidden] */
    const float *down_proj; /* [hidden, intermediate] */
    unsigned fp8;           /* DENSE_FP8_* bits: which Linear weights are FP8 (their prefill inputs are
                               quantized per token: frt_fp8w_activations) */
} dense_layer_weights;

/* The bits of dense_layer_weights.fp8, one per Linear weight. */
enum {
    DENSE_FP8_Q = 1u << 0,
    DENSE_FP8_K = 1u << 1,
    DENSE_FP8_V = 1u << 2,
    DENSE_FP8_O = 1u << 3,
    DENSE_FP8_GATE = 1u << 4,
    DENSE_FP8_UP = 1u << 5,
    DENSE_FP8_DOWN = 1u << 6
};

typedef struct dense_weights {
    const float *embed;          /* [vocab, hidden] */
    const float *final_norm;     /* [hidden] */
    const float *lm_head;        /* [vocab, hidden] (== embed when tied) */
    dense_layer_weights *layers; /* [n_layers] */
    void *arena;                 /* one allocation holding every f32 tensor */
    size_t bytes;
} dense_weights;

/* Scratch activations for a prefill piece of up to C rows (cpu backend). */
typedef struct dense_scratch {
    float *x;              /* [C, hidden] residual stream */
    float *h;              /* [C, hidden] normed input */
    float *t0, *t1, *t2;   /* [C, max(hidden, intermediate, n_heads * head_dim)] */
    float *q, *o;          /* [C, n_heads * head_dim] */
    int32_t *pos;          /* [C] positions of the step's rows */
    frt_kv_fp8_cpu kv8;    /* fp8 KV: the step's rows, the dequantized cache, the scales (kv_fp8_cpu.h) */
    float *act;            /* FP8 weights: [C, max(hidden, intermediate, n_heads * head_dim)] a prefill
                              Linear input quantized per token and dequantized (frt_fp8w_activations) */
    uint8_t *act8;         /* FP8 weights: the same shape, its E4M3 codes */
    float *act_scale;      /* FP8 weights: [C] its per-token scales */
    float *debug_hidden;   /* [(n_layers + 2), C, hidden] when params.debug_hidden */
    int debug_rows;
} dense_scratch;

/* Per-model data of the architecture (m->arch_data). */
typedef struct dense {
    float *inv_freq;          /* [head_dim / 2] the RoPE table of cfg.rope_type */
    frt_buffer **kv_k, **kv_v; /* views of the state table, [n_layers] each */
    dense_weights w;          /* cpu backend */
    dense_scratch s;          /* cpu backend */
} dense;

static inline dense *dense_of(const frt_model *m) { return (dense *)m->arch_data; }


extern const frt_arch_backend frt_dense_cpu_backend; /* dense_cpu.c */
#if FRT_HAVE_CUDA
extern const frt_arch_backend frt_dense_cuda_backend; /* dense_cuda.c + dense_glue.cu */
#endif

#endif /* FRT_MODEL_ARCH_DENSE_H */
