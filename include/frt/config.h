/*
 * frt/config.h - the model hyperparameters, read from a Hugging Face
 * checkpoint directory's config.json and generation_config.json.
 *
 * Read the way transformers 5.x reads them (configuration_qwen3_5.py,
 * configuration_utils.py, modeling_rope_utils.py):
 *
 *   - model_type "qwen3_5_text" (Qwen3_5TextConfig, weights under "model."),
 *     "qwen3_5" (Qwen3_5Config: the text fields sit under "text_config",
 *     weights under "model.language_model.", lm_head.weight at the top),
 *     and the dense all-full-attention special cases "llama", "qwen2",
 *     "qwen3", "mistral" (weights under "model."; mistral only without a
 *     sliding window: a non-null sliding_window is FRT_ERR_UNSUPPORTED).
 *   - RoPE: rope_parameters {rope_type, rope_theta, partial_rotary_factor}
 *     wins; the legacy top-level rope_theta / partial_rotary_factor (and
 *     rope_scaling) fill what it lacks; then the defaults (theta 10000,
 *     partial factor 0.25 for qwen3_5, 1.0 otherwise). Only rope_type
 *     "default" is accepted for every model type (mrope_section /
 *     mrope_interleaved are ignored: text-only positions are equal on every
 *     M-RoPE axis, which makes M-RoPE plain RoPE); "llama3" for the dense
 *     types, with its four parameters required (factor, low_freq_factor,
 *     high_freq_factor, original_max_position_embeddings: FRT_ERR_FORMAT when
 *     one is missing); other scaled variants (linear, dynamic, yarn,
 *     longrope, ...) fail with FRT_ERR_UNSUPPORTED rather than run wrong.
 *   - layer_types: "linear_attention" / "full_attention" (and the legacy
 *     "mamba" / "attention"); when absent, the Qwen3_5TextConfig rule:
 *     layer i is full attention iff (i + 1) % full_attention_interval == 0
 *     (interval default 4). Dense models: all full attention.
 *   - composite qwen3_5: tie_word_embeddings is read at the top level (that
 *     is the config the ForConditionalGeneration model ties with), falling
 *     back to text_config's, then false; eos/bos come from text_config,
 *     falling back to the top level.
 *
 *   - quantization_config (FP8 checkpoints, docs/fp8.md "FP8 weights"; the
 *     dense family and the qwen3_5 hybrid alike): quant_method "compressed-tensors" with format "float-quantized" (one
 *     config group: weights type "float", num_bits 8, symmetric, static,
 *     strategy "tensor" or "channel"; input_activations absent or dynamic;
 *     tensors X.weight F8_E4M3 + X.weight_scale), or quant_method "fp8"
 *     (transformers FineGrainedFP8Config: fmt "e4m3", activation_scheme
 *     "dynamic", weight_block_size [bo, bi]; tensors X.weight F8_E4M3 +
 *     X.weight_scale_inv [ceil(out / bo), ceil(in / bi)], the value is
 *     code * scale_inv of its block). Anything else is FRT_ERR_UNSUPPORTED
 *     (static activation scales, int types, other bit widths, several
 *     groups) or FRT_ERR_FORMAT (wrong JSON
 *     types, missing fields). Which modules stay unquantized is read from
 *     each tensor's dtype, so the ignore / modules_to_not_convert lists
 *     need not be interpreted.
 *
 * Required fields (FRT_ERR_FORMAT when missing): vocab_size, hidden_size,
 * intermediate_size, num_hidden_layers, num_attention_heads; for qwen3_5
 * also num_key_value_heads, head_dim, linear_num_key_heads,
 * linear_num_value_heads, linear_key_head_dim, linear_value_head_dim.
 * Everything else takes the transformers default.
 */
#ifndef FRT_CONFIG_H
#define FRT_CONFIG_H

#include "frt/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FRT_LAYER_FULL_ATTENTION = 0, FRT_LAYER_LINEAR_ATTENTION = 1 } frt_layer_type;

#define FRT_MAX_LAYERS 256

/* How a checkpoint's FP8 Linear weights are scaled (quantization_config). */
typedef enum frt_quant_method {
    FRT_QUANT_NONE = 0,        /* no quantization_config: float weights */
    FRT_QUANT_FP8_TENSOR = 1,  /* compressed-tensors strategy "tensor": weight_scale [1] (or []) */
    FRT_QUANT_FP8_CHANNEL = 2, /* compressed-tensors strategy "channel": weight_scale [out, 1] (or [out]) */
    FRT_QUANT_FP8_BLOCK = 3,   /* quant_method "fp8": weight_scale_inv [ceil(out / bo), ceil(in / bi)] */
} frt_quant_method;

/* Which FP8 KV-cache scales a checkpoint holds (compressed-tensors
 * kv_cache_scheme; docs/fp8.md "Scales from the checkpoint"). */
typedef enum frt_quant_kv {
    FRT_QUANT_KV_NONE = 0,   /* no kv_cache_scheme (or null) */
    FRT_QUANT_KV_TENSOR = 1, /* {type "float", num_bits 8, symmetric true, dynamic false, strategy "tensor"}: one
                                <prefix>layers.L.self_attn.k_scale and .v_scale (F32 or BF16, [] or [1]) per
                                attention layer L, or per layer the older names vLLM reads (one naming a
                                layer): .k_proj.output_scale / .v_proj.output_scale, or one .kv_scale for K
                                and V; a stored K row is e4m3(k / k_scale) (vLLM's k_scale) */
    FRT_QUANT_KV_HEAD = 2,   /* the same with strategy "attn_head": k_scale / v_scale F32 or BF16 [n_kv_heads], one
                                scale per KV head (vLLM's per-attention-head scales) */
} frt_quant_kv;

typedef struct frt_quant_config {
    frt_quant_method method; /* FRT_QUANT_NONE with kv != NONE: a kv-only config (weights as stored) */
    int block_out, block_in; /* FRT_QUANT_FP8_BLOCK: weight_block_size (bo, bi), 1..65536; else 0 */
    frt_quant_kv kv;         /* the checkpoint's KV-cache scales */
} frt_quant_config;

typedef struct frt_model_config {
    char model_type[32];    /* as in config.json: "qwen3_5_text", "qwen3_5", "llama", "qwen2", "qwen3", "mistral" */
    int hybrid;             /* 1 for qwen3_5 / qwen3_5_text (Gated DeltaNet + gated attention) */
    char weight_prefix[64]; /* "model." or "model.language_model." (composite qwen3_5) */
    int vocab_size, hidden_size, intermediate_size, n_layers;
    int n_heads, n_kv_heads, head_dim; /* full attention */
    int attn_output_gate;              /* qwen3_5: q_proj has 2*head_dim rows per head (query then gate) */
    int lin_n_k_heads, lin_n_v_heads, lin_k_head_dim, lin_v_head_dim, lin_conv_kernel; /* Gated DeltaNet */
    float rms_norm_eps, rope_theta, partial_rotary_factor;
    int rotary_dim; /* (int)(head_dim * partial_rotary_factor), even, <= head_dim */
    int max_position_embeddings;
    int tie_word_embeddings;
    char dtype[16]; /* "bfloat16" etc. from dtype / torch_dtype; "" when absent */
    frt_layer_type layer_types[FRT_MAX_LAYERS];
    int bos_token_id, eos_token_id; /* -1 when absent; the first id when config.json holds a list */

    /* Beyond the shared interface: facts the architecture code must not
     * guess from model_type. */
    char architecture[64];  /* architectures[0] ("Qwen3_5ForCausalLM"); "" when absent */
    char rope_type[16];     /* "default", or "llama3" (dense models only) */
    /* rope_type "llama3" (transformers modeling_rope_utils._compute_llama3_parameters):
     * inv_freq scaled per band by factor, low_freq_factor, high_freq_factor and
     * original_max_position_embeddings; all 0 for "default". */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    int norm_unit_offset;   /* 1: RMSNorm computes x * (1 + w) (zero-centred w: qwen3_5); 0: x * w */
    int qk_norm;            /* 1: per-head RMSNorm on q and k (qwen3, qwen3_5) */
    int attention_bias;     /* 1: q/k/v projections have biases (qwen2; llama/qwen3 attention_bias) */
    int o_proj_bias;        /* 1: o_proj has a bias (llama attention_bias) */
    int n_full_layers, n_linear_layers;
    frt_quant_config quant; /* quantization_config; method FRT_QUANT_NONE when absent */
} frt_model_config;

typedef struct frt_generation_config {
    int eos_ids[16];
    int n_eos;
    float temperature, top_p;
    int top_k;
    int do_sample; /* defaults when absent: 1.0, 1.0, 0 (off), 0 */
} frt_generation_config;

/* Reads MODEL_DIR/config.json (at most 16 MiB) into *out. On failure *out
 * is unspecified and the message names the file and the field.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_NOT_FOUND (no
 * config.json), FRT_ERR_IO, FRT_ERR_FORMAT (bad JSON, missing or invalid
 * field), FRT_ERR_UNSUPPORTED (model_type, rope_type, activation, sliding
 * window, layer type or size outside what frt runs; the message lists the
 * supported model types). */
FRT_API int frt_config_load(const char *model_dir, frt_model_config *out);

/* Parses config.json text (len bytes, need not be NUL-terminated). `what`
 * names the source in messages (a path; NULL reads "config.json"). Same
 * errors as frt_config_load, without the file ones. */
FRT_API int frt_config_parse_json(const char *json_text, size_t len, const char *what, frt_model_config *out);

/* Reads MODEL_DIR/generation_config.json. A missing file is not an error:
 * *out gets the defaults and eos from cfg (config.json's eos_token_id, none
 * when that is -1). eos_token_id may be an int or a list (at most 16 ids).
 * Fields absent from the file take the defaults in frt_generation_config;
 * an absent eos_token_id falls back to cfg's.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_IO, FRT_ERR_FORMAT (bad JSON or
 * a field of the wrong type or range, e.g. an eos id outside the
 * vocabulary). */
FRT_API int frt_generation_config_load(const char *model_dir, const frt_model_config *cfg, frt_generation_config *out);

/* Parses generation_config.json text; cfg as above (may be NULL: no
 * fallback eos and no vocabulary check). */
FRT_API int frt_generation_config_parse_json(const char *json_text, size_t len, const char *what,
                                     const frt_model_config *cfg, frt_generation_config *out);

/* The names frt_config_parse_json accepts, comma-separated, for messages:
 * "qwen3_5_text, qwen3_5, llama, qwen2, qwen3, mistral". Static storage. */
FRT_API const char *frt_config_supported_types(void);

/* Writes the layer pattern as "L L L F ..." (L linear, F full) into buf
 * (NUL-terminated, truncated to size). Returns buf. */
FRT_API char *frt_config_layer_pattern(const frt_model_config *cfg, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* FRT_CONFIG_H */
