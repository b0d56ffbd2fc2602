/*
 * tools/gen_model.h - random-weight checkpoints at real Qwen3.5 shapes, in
 * memory (benchmarks that cannot afford the disk) or as a checkpoint
 * directory transformers loads (config.json, generation_config.json,
 * model.safetensors or shards + index).
 *
 * Shapes (text model of the published Qwen/Qwen3.5-* checkpoints; the
 * table and its sources are in docs/checkpoints.md): "qwen3.5-0.8b",
 * "qwen3.5-2b", "qwen3.5-4b", "qwen3.5-9b", "qwen3.5-27b", and "tiny" (a
 * 5-layer L F L L F model for tests), written as model_type
 * "qwen3_5_text" / Qwen3_5ForCausalLM (weights under "model."); and the
 * dense shapes "llama3.2-1b", "llama3.2-3b", "llama3.1-8b" (model_type
 * llama, rope_scaling llama3), "qwen2.5-7b" (qwen2, q/k/v biases),
 * "qwen3-8b" (qwen3, q/k norms) from the published config.json files, and
 * "tiny-dense" (a 4-layer llama with llama3 scaling for tests). Dense
 * norm weights are plain (x * w): N(1, 0.1); biases N(0, 0.02).
 *
 * Weights are bf16 with HF's names and shapes (modeling_qwen3_5.py) and a
 * realistic scale, never zeros: projections and embeddings N(0, 0.02);
 * zero-centred RMSNorm weights (the norm computes x * (1 + w)) N(0, 0.1);
 * the gated norm of the Gated DeltaNet (plain x * w) N(1, 0.1); A_log =
 * log(U(1, 16)); dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]
 * (the Mamba-2 initialisation); conv1d U(-1/sqrt(K), 1/sqrt(K)) (PyTorch's
 * Conv1d default). Every value is a function of (seed, tensor name,
 * element index) only: the same seed gives the same bytes whatever the
 * thread count. Generation runs on OpenMP threads.
 */
#ifndef FRT_TOOLS_GEN_MODEL_H
#define FRT_TOOLS_GEN_MODEL_H

#include "frt/checkpoint.h"
#include "frt/config.h"

#include <stdint.h>

/* The shape names, NULL-terminated (static storage). */
const char *const *frt_gen_model_shapes(void);

/* The config of a shape, exactly as frt_config_load reads the config.json
 * that frt_gen_model_write_configs writes. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL), FRT_ERR_NOT_FOUND (unknown shape; the message lists the shapes). */
int frt_gen_model_config(const char *shape, frt_model_config *out);

/* How a weight is initialised (see the header comment). */
typedef enum {
    FRT_INIT_NORMAL,      /* N(a, b) */
    FRT_INIT_UNIFORM,     /* U(a, b) */
    FRT_INIT_LOG_UNIFORM, /* log(U(a, b)) */
    FRT_INIT_DT_BIAS      /* softplus^-1(exp(U(log a, log b))) */
} frt_init_kind;

/* One weight the architecture expects: HF name, dtype, shape, init. */
typedef struct frt_weight_spec {
    char name[160];
    frt_dtype dtype;
    int ndim;
    int64_t shape[4];
    frt_init_kind init;
    float a, b;
} frt_weight_spec;

/* Every weight cfg's architecture reads from a checkpoint, in HF names
 * under cfg->weight_prefix (lm_head.weight at the top level, absent when
 * tied), with dtype BF16: hybrid qwen3_5 (per layer either linear_attn.* or
 * self_attn.* with q_norm / k_norm and the 2x gated q_proj) and the dense
 * llama / qwen2 / qwen3 layouts (biases and q/k norms as the config says).
 * *out is malloc'd (free it), *n its length.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
int frt_model_weight_specs(const frt_model_config *cfg, frt_weight_spec **out, int *n);

/* Random weights for cfg (frt_model_weight_specs) in a new in-memory
 * checkpoint (*out; frt_checkpoint_close frees it).
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
int frt_gen_model_build_config(const frt_model_config *cfg, uint64_t seed, frt_checkpoint **out);

/* Random weights for an explicit list of specs (n of them; not freed), the
 * same values frt_gen_model_build_config gives a spec of the same name.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
int frt_gen_model_build_specs(const frt_weight_spec *specs, int n, uint64_t seed, frt_checkpoint **out);

/* ---- policies (gen_policy.c) ---------------------------------------------- */

/* 1 when shape names a policy shape: "pi0" (PI0Config's defaults: PaliGemma
 * 3B's Gemma 2B prefix and SigLIP So400m/14 at 224, the Gemma 300M expert,
 * chunk 50, 32-dim actions and state) or "pi05" (the same shapes, Pi0.5's
 * adaRMSNorm expert and time MLP); "pi0-tiny" / "pi05-tiny": 224 x 224
 * cameras (patch 14), widths 32 / 64 / 32, a 1024-id vocabulary, chunk 10,
 * 8-dim actions and state (a few MB: the command line without the real
 * weights). */
int frt_gen_policy_is_shape(const char *shape);

/* The weights of a policy shape, in the transformers pi0 layout
 * (src/model/arch/pi0/pi0.h), bf16: matrices N(0, 0.02), biases N(0,
 * 0.02), RMSNorm weights (x * (1 + w)) N(0, 0.1), LayerNorm weights N(1,
 * 0.1), adaRMSNorm dense layers N(0, 0.02). *out malloc'd.
 * Errors: FRT_ERR_NOT_FOUND (not a policy shape), FRT_ERR_OUT_OF_MEMORY. */
int frt_gen_policy_specs(const char *shape, frt_weight_spec **out, int *n);

/* Writes DIR/config.json of a policy shape (the transformers pi0 layout,
 * model_type "pi0" or "pi05"). Errors: FRT_ERR_NOT_FOUND, FRT_ERR_IO,
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_gen_policy_write_config(const char *shape, const char *dir);

/* The dimensions of a policy checkpoint: the shapes above use the real
 * ones; tests make small policies through the same two functions below
 * (the same names and config layout as the real shapes). */
typedef struct frt_gen_policy_dims {
    int v_width, v_inter, v_layers, v_heads, image_size, patch;      /* SigLIP */
    int t_width, t_inter, layers, heads, kv_heads, head_dim, vocab;  /* the prefix (and the expert's layout) */
    int e_width, e_inter;                                            /* the action expert */
    int chunk, action_dim, state_dim, steps;
} frt_gen_policy_dims;

/* frt_gen_policy_specs / _write_config for explicit dimensions (pi05 0 or
 * 1). Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_OUT_OF_MEMORY,
 * FRT_ERR_IO. */
int frt_gen_policy_specs_dims(const frt_gen_policy_dims *d, int pi05, frt_weight_spec **out, int *n);
int frt_gen_policy_write_config_dims(const frt_gen_policy_dims *d, int pi05, const char *dir);

/* The same for a named shape; *cfg receives its config (may be NULL).
 * Errors: those of frt_gen_model_config and _build_config. */
int frt_gen_model_build(const char *shape, uint64_t seed, frt_model_config *cfg, frt_checkpoint **out);

/* Writes DIR/config.json and DIR/generation_config.json of a shape
 * (atomically). generation_config.json: eos_token_id [248046, 248044] at
 * the real shapes ([vocab - 1] for tiny), do_sample true, temperature 0.7,
 * top_p 0.8, top_k 20. Errors: FRT_ERR_NOT_FOUND (shape), FRT_ERR_IO,
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_gen_model_write_configs(const char *shape, const char *dir);

/* Default shard limit of frt_gen_model_write: 5 GB, as transformers. */
#define FRT_GEN_MODEL_SHARD_BYTES 5000000000ull

/* build + frt_checkpoint_write(DIR, FRT_GEN_MODEL_SHARD_BYTES) +
 * write_configs. DIR is created (with its parents) when missing.
 * Errors: those of the parts; FRT_ERR_IO when DIR cannot be created. */
int frt_gen_model_write(const char *shape, uint64_t seed, const char *out_dir);

#endif /* FRT_TOOLS_GEN_MODEL_H */
