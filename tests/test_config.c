/*
 * test_config.c - config.json / generation_config.json parsing: the
 * published Qwen3.5 layouts (text-only and composite), the transformers
 * rules for RoPE (rope_parameters wins, legacy keys fill in, defaults),
 * layer types (explicit, legacy names, full_attention_interval), tying in
 * the composite, dense llama / qwen2 / qwen3, and every error: bad JSON,
 * unknown model_type, missing or mistyped fields, unsupported rope types,
 * inconsistent sizes; generation config fallbacks and errors.
 */
#include "frt_test.h"
#include "frt/config.h"
#include "gen_model.h"

#include <sys/stat.h>
#include <unistd.h>

static int contains(const char *s, const char *sub) { return s && sub && strstr(s, sub) != NULL; }

static int parse(const char *json, frt_model_config *c) { return frt_config_parse_json(json, strlen(json), "t.json", c); }

/* A published-style composite qwen3_5 config.json (Qwen3.5-27B). */
static const char *COMPOSITE_27B =
    "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"model_type\": \"qwen3_5\","
    " \"image_token_id\": 248056, \"video_token_id\": 248057, \"tie_word_embeddings\": false,"
    " \"eos_token_id\": 248046,"
    " \"text_config\": {\"model_type\": \"qwen3_5_text\", \"attention_bias\": false, \"attn_output_gate\": true,"
    "  \"dtype\": \"bfloat16\", \"eos_token_id\": 248044, \"full_attention_interval\": 4, \"head_dim\": 256,"
    "  \"hidden_act\": \"silu\", \"hidden_size\": 5120, \"intermediate_size\": 17408,"
    "  \"linear_conv_kernel_dim\": 4, \"linear_key_head_dim\": 128, \"linear_num_key_heads\": 16,"
    "  \"linear_num_value_heads\": 48, \"linear_value_head_dim\": 128, \"max_position_embeddings\": 262144,"
    "  \"mtp_num_hidden_layers\": 1, \"num_attention_heads\": 24, \"num_hidden_layers\": 64,"
    "  \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, \"partial_rotary_factor\": 0.25,"
    "  \"rope_parameters\": {\"mrope_interleaved\": true, \"mrope_section\": [11, 11, 10],"
    "   \"rope_type\": \"default\", \"rope_theta\": 10000000, \"partial_rotary_factor\": 0.25},"
    "  \"tie_word_embeddings\": true, \"use_cache\": true, \"vocab_size\": 248320},"
    " \"vision_config\": {\"depth\": 27, \"hidden_size\": 1152, \"model_type\": \"qwen3_5\"}}";

static void test_composite(void)
{
    frt_model_config c;
    CHECK_OK(parse(COMPOSITE_27B, &c));
    CHECK(!strcmp(c.model_type, "qwen3_5") && c.hybrid == 1);
    CHECK(!strcmp(c.weight_prefix, "model.language_model."));
    CHECK(!strcmp(c.architecture, "Qwen3_5ForConditionalGeneration"));
    CHECK(c.vocab_size == 248320 && c.hidden_size == 5120 && c.intermediate_size == 17408 && c.n_layers == 64);
    CHECK(c.n_heads == 24 && c.n_kv_heads == 4 && c.head_dim == 256 && c.attn_output_gate == 1);
    CHECK(c.lin_n_k_heads == 16 && c.lin_n_v_heads == 48 && c.lin_k_head_dim == 128 && c.lin_v_head_dim == 128);
    CHECK(c.lin_conv_kernel == 4);
    CHECK(c.rope_theta == 1e7f && c.partial_rotary_factor == 0.25f && c.rotary_dim == 64);
    CHECK(fabsf(c.rms_norm_eps - 1e-6f) < 1e-12f);
    CHECK(c.max_position_embeddings == 262144);
    CHECK(c.tie_word_embeddings == 0); /* top level wins over text_config's true */
    CHECK(!strcmp(c.dtype, "bfloat16"));
    CHECK(c.eos_token_id == 248044 && c.bos_token_id == -1); /* text_config first */
    CHECK(c.norm_unit_offset == 1 && c.qk_norm == 1 && c.attention_bias == 0);
    CHECK(c.n_full_layers == 16 && c.n_linear_layers == 48);
    for (int i = 0; i < 64; i++)
        CHECK(c.layer_types[i] == ((i + 1) % 4 ? FRT_LAYER_LINEAR_ATTENTION : FRT_LAYER_FULL_ATTENTION));
    char pat[200];
    frt_config_layer_pattern(&c, pat, sizeof pat);
    CHECK(!strncmp(pat, "L L L F L L L F", 15));
    CHECK(strlen(pat) == 2 * 64 - 1);
    frt_config_layer_pattern(&c, pat, 8); /* truncation stays terminated */
    CHECK(strlen(pat) < 8);

    /* Without a top-level tie_word_embeddings, text_config's applies. */
    const char *p = strstr(COMPOSITE_27B, " \"tie_word_embeddings\": false,");
    char buf[4096];
    size_t k = (size_t)(p - COMPOSITE_27B);
    memcpy(buf, COMPOSITE_27B, k);
    strcpy(buf + k, p + strlen(" \"tie_word_embeddings\": false,"));
    CHECK_OK(parse(buf, &c));
    CHECK(c.tie_word_embeddings == 1);

    /* Composite without text_config. */
    CHECK_STATUS(parse("{\"model_type\": \"qwen3_5\", \"vision_config\": {}}", &c), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "text_config"));
}

/* A text-only config with one field replaced / removed. */
#define TEXT_HEAD "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 4096, \"hidden_size\": 64, "
#define TEXT_DIMS                                                                                                  \
    "\"intermediate_size\": 128, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, "                        \
    "\"num_key_value_heads\": 2, \"head_dim\": 32, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, " \
    "\"linear_key_head_dim\": 16, \"linear_value_head_dim\": 24"

static void test_text_rules(void)
{
    frt_model_config c;
    /* Defaults: no rope keys at all -> theta 10000, partial 0.25; every 4th full. */
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS "}", &c));
    CHECK(!strcmp(c.weight_prefix, "model.") && c.hybrid && c.attn_output_gate == 1);
    CHECK(c.rope_theta == 10000.0f && c.partial_rotary_factor == 0.25f && c.rotary_dim == 8);
    CHECK(c.lin_conv_kernel == 4 && c.max_position_embeddings == 32768 && c.tie_word_embeddings == 0);
    CHECK(c.eos_token_id == -1 && c.dtype[0] == '\0' && !strcmp(c.rope_type, "default"));
    CHECK(c.layer_types[3] == FRT_LAYER_FULL_ATTENTION && c.layer_types[4] == FRT_LAYER_LINEAR_ATTENTION);
    CHECK(c.n_full_layers == 1 && c.n_linear_layers == 4);
    CHECK(c.lin_v_head_dim == 24 && c.lin_k_head_dim == 16);

    /* full_attention_interval without layer_types. */
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"full_attention_interval\": 2}", &c));
    CHECK(c.layer_types[0] == FRT_LAYER_LINEAR_ATTENTION && c.layer_types[1] == FRT_LAYER_FULL_ATTENTION &&
          c.layer_types[3] == FRT_LAYER_FULL_ATTENTION && c.n_full_layers == 2);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"full_attention_interval\": 0}", &c), FRT_ERR_FORMAT);

    /* Explicit layer types win; not the every-4th pattern; legacy names. */
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"full_attention_interval\": 4, \"layer_types\": [\"full_attention\", "
                                       "\"linear_attention\", \"mamba\", \"attention\", \"linear_attention\"]}",
                   &c));
    CHECK(c.layer_types[0] == FRT_LAYER_FULL_ATTENTION && c.layer_types[1] == FRT_LAYER_LINEAR_ATTENTION &&
          c.layer_types[2] == FRT_LAYER_LINEAR_ATTENTION && c.layer_types[3] == FRT_LAYER_FULL_ATTENTION &&
          c.layer_types[4] == FRT_LAYER_LINEAR_ATTENTION);
    char pat[32];
    CHECK(!strcmp(frt_config_layer_pattern(&c, pat, sizeof pat), "F L L F L"));
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"layer_types\": [\"full_attention\"]}", &c), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "layer_types has 1 entries"));
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"layer_types\": [\"full_attention\", \"sliding_attention\", "
                                           "\"full_attention\", \"full_attention\", \"full_attention\"]}",
                       &c),
                 FRT_ERR_UNSUPPORTED);
    CHECK(contains(frt_last_error(), "sliding_attention"));
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"layer_types\": [1, 2, 3, 4, 5]}", &c), FRT_ERR_FORMAT);

    /* RoPE: rope_parameters wins over the legacy top-level keys, which fill
     * what it lacks. */
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"rope_theta\": 5000, \"partial_rotary_factor\": 0.5}", &c));
    CHECK(c.rope_theta == 5000.0f && c.partial_rotary_factor == 0.5f && c.rotary_dim == 16);
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"rope_theta\": 5000, \"partial_rotary_factor\": 0.5, "
                                       "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}",
                   &c));
    CHECK(c.rope_theta == 1e6f && c.partial_rotary_factor == 0.5f);
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"partial_rotary_factor\": 0.5, \"rope_parameters\": {\"rope_theta\": "
                                       "1e6, \"partial_rotary_factor\": 1.0}}",
                   &c));
    CHECK(c.partial_rotary_factor == 1.0f && c.rotary_dim == 32);
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"rope_parameters\": {\"type\": \"default\"}}", &c));
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}", &c),
                 FRT_ERR_UNSUPPORTED);
    CHECK(contains(frt_last_error(), "'yarn'") && contains(frt_last_error(), "supported: default"));
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}}", &c),
                 FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"partial_rotary_factor\": 0.03}", &c), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"rope_parameters\": {\"rope_theta\": -1}}", &c), FRT_ERR_FORMAT);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"rope_parameters\": 3}", &c), FRT_ERR_FORMAT);

    /* dtype beats torch_dtype; torch_dtype alone is read; eos lists. */
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"torch_dtype\": \"float16\", \"dtype\": \"bfloat16\"}", &c));
    CHECK(!strcmp(c.dtype, "bfloat16"));
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"torch_dtype\": \"float16\", \"eos_token_id\": [7, 9]}", &c));
    CHECK(!strcmp(c.dtype, "float16") && c.eos_token_id == 7);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"eos_token_id\": 5000}", &c), FRT_ERR_FORMAT);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"eos_token_id\": \"x\"}", &c), FRT_ERR_FORMAT);
    CHECK_OK(parse(TEXT_HEAD TEXT_DIMS ", \"attn_output_gate\": false, \"tie_word_embeddings\": true}", &c));
    CHECK(c.attn_output_gate == 0 && c.tie_word_embeddings == 1);
}

static void test_errors(void)
{
    frt_model_config c;
    CHECK_STATUS(parse("{\"model_type\": \"qwen3_5_text\",", &c), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "t.json") && contains(frt_last_error(), "invalid JSON"));
    CHECK_STATUS(parse("[]", &c), FRT_ERR_FORMAT);
    CHECK_STATUS(parse("{}", &c), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "model_type"));
    CHECK_STATUS(parse("{\"model_type\": \"gemma\", \"hidden_size\": 8}", &c), FRT_ERR_UNSUPPORTED);
    CHECK(contains(frt_last_error(), "'gemma'") && contains(frt_last_error(), "qwen3_5_text, qwen3_5, llama"));
    CHECK(!strcmp(frt_config_supported_types(), "qwen3_5_text, qwen3_5, llama, qwen2, qwen3, mistral"));
    /* Each required field, removed in turn. */
    static const char *required[] = {"vocab_size",           "hidden_size",          "intermediate_size",
                                     "num_hidden_layers",    "num_attention_heads",  "num_key_value_heads",
                                     "head_dim",             "linear_num_key_heads", "linear_num_value_heads",
                                     "linear_key_head_dim",  "linear_value_head_dim"};
    const char *full = TEXT_HEAD TEXT_DIMS "}";
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char key[64], buf[2048];
        snprintf(key, sizeof key, "\"%s\":", required[i]);
        const char *p = strstr(full, key);
        CHECK(p != NULL);
        if (!p) continue;
        /* Rename the key so the field is absent. */
        size_t k = (size_t)(p - full);
        memcpy(buf, full, k);
        snprintf(buf + k, sizeof buf - k, "\"x_%s", p + 1);
        CHECK_STATUS(parse(buf, &c), FRT_ERR_FORMAT);
        CHECK_MSG(contains(frt_last_error(), required[i]) && contains(frt_last_error(), "missing"),
                  "message for %s: %s", required[i], frt_last_error());
    }
    /* Wrong types and ranges. */
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"rms_norm_eps\": \"small\"}", &c), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "rms_norm_eps"));
    CHECK_STATUS(parse("{\"model_type\": \"qwen3_5_text\", \"vocab_size\": \"4096\", \"hidden_size\": 64}", &c),
                 FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "vocab_size") && contains(frt_last_error(), "integer"));
    CHECK_STATUS(parse("{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 4096.5, \"hidden_size\": 64}", &c),
                 FRT_ERR_FORMAT);
    CHECK_STATUS(parse("{\"model_type\": \"qwen3_5_text\", \"vocab_size\": -3, \"hidden_size\": 64}", &c),
                 FRT_ERR_FORMAT);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"tie_word_embeddings\": \"yes\"}", &c), FRT_ERR_FORMAT);
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"hidden_act\": \"gelu\"}", &c), FRT_ERR_UNSUPPORTED);
    CHECK(contains(frt_last_error(), "gelu"));
    CHECK_STATUS(parse("{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 4096, \"hidden_size\": 64, "
                       "\"intermediate_size\": 128, \"num_hidden_layers\": 300, \"num_attention_heads\": 4}",
                       &c),
                 FRT_ERR_UNSUPPORTED);
    /* Inconsistent sizes. */
    CHECK_STATUS(parse(TEXT_HEAD "\"intermediate_size\": 128, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 3, \"head_dim\": 32, \"linear_num_key_heads\": 2, "
                                 "\"linear_num_value_heads\": 4, \"linear_key_head_dim\": 16, "
                                 "\"linear_value_head_dim\": 24}",
                       &c),
                 FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "num_key_value_heads"));
    CHECK_STATUS(parse(TEXT_HEAD "\"intermediate_size\": 128, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 2, \"head_dim\": 32, \"linear_num_key_heads\": 3, "
                                 "\"linear_num_value_heads\": 4, \"linear_key_head_dim\": 16, "
                                 "\"linear_value_head_dim\": 24}",
                       &c),
                 FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "linear_num_value_heads"));
    CHECK_STATUS(frt_config_parse_json(NULL, 3, NULL, &c), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_config_parse_json("{}", 2, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
}

static void test_dense(void)
{
    frt_model_config c;
    /* Llama 3.2 style, without rope scaling. */
    CHECK_OK(parse("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 3072, "
                   "\"intermediate_size\": 8192, \"num_attention_heads\": 24, \"num_hidden_layers\": 28, "
                   "\"num_key_value_heads\": 8, \"head_dim\": 128, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0, "
                   "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"vocab_size\": 128256, "
                   "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], "
                   "\"max_position_embeddings\": 131072}",
                   &c));
    CHECK(c.hybrid == 0 && !strcmp(c.weight_prefix, "model.") && c.n_full_layers == 28 && c.n_linear_layers == 0);
    CHECK(c.head_dim == 128 && c.rotary_dim == 128 && c.rope_theta == 500000.0f && c.partial_rotary_factor == 1.0f);
    CHECK(c.attn_output_gate == 0 && c.qk_norm == 0 && c.norm_unit_offset == 0 && c.attention_bias == 0);
    CHECK(c.bos_token_id == 128000 && c.eos_token_id == 128001 && c.tie_word_embeddings == 1);
    /* Llama 3.1 rope scaling (legacy rope_scaling beside a top-level rope_theta, as published): parsed with its
     * four parameters; one missing is a format error naming it; the hybrid refuses llama3. */
    CHECK_OK(parse("{\"model_type\": \"llama\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                   "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"vocab_size\": 128256, "
                   "\"num_key_value_heads\": 8, \"rope_theta\": 500000.0, "
                   "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                   "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}}",
                   &c));
    CHECK(!strcmp(c.rope_type, "llama3") && c.rope_factor == 8.0f && c.rope_low_freq_factor == 1.0f);
    CHECK(c.rope_high_freq_factor == 4.0f && c.rope_original_max_pos == 8192 && c.rope_theta == 500000.0f);
    CHECK_STATUS(parse("{\"model_type\": \"llama\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                       "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"vocab_size\": 128256, "
                       "\"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"llama3\"}}",
                       &c),
                 FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "low_freq_factor"));
    CHECK_STATUS(parse("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 64, "
                       "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 10, "
                       "\"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, "
                       "\"high_freq_factor\": 1.0, \"original_max_position_embeddings\": 64}}",
                       &c),
                 FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "high_freq_factor"));
    CHECK_STATUS(parse(TEXT_HEAD TEXT_DIMS ", \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                       "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}}",
                       &c),
                 FRT_ERR_UNSUPPORTED);
    CHECK(contains(frt_last_error(), "llama3"));
    /* mistral: the llama arithmetic without a sliding window; a window is refused. */
    CHECK_OK(parse("{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                   "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, "
                   "\"vocab_size\": 32768, \"rope_theta\": 1000000.0, \"sliding_window\": null}",
                   &c));
    CHECK(c.head_dim == 128 && c.qk_norm == 0 && c.attention_bias == 0 && !strcmp(c.rope_type, "default"));
    CHECK_STATUS(parse("{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                       "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"vocab_size\": 32000, "
                       "\"sliding_window\": 4096}",
                       &c),
                 FRT_ERR_UNSUPPORTED);
    CHECK(contains(frt_last_error(), "sliding_window"));
    /* qwen2: head_dim from hidden / heads, q/k/v biases; sliding window refused. */
    CHECK_OK(parse("{\"model_type\": \"qwen2\", \"hidden_size\": 896, \"intermediate_size\": 4864, "
                   "\"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, "
                   "\"rope_theta\": 1000000.0, \"vocab_size\": 151936, \"use_sliding_window\": false}",
                   &c));
    CHECK(c.head_dim == 64 && c.attention_bias == 1 && c.o_proj_bias == 0 && c.qk_norm == 0 && c.n_kv_heads == 2);
    CHECK(c.max_position_embeddings == 32768);
    CHECK_STATUS(parse("{\"model_type\": \"qwen2\", \"hidden_size\": 896, \"intermediate_size\": 4864, "
                       "\"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"vocab_size\": 151936, "
                       "\"use_sliding_window\": true}",
                       &c),
                 FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(parse("{\"model_type\": \"qwen2\", \"hidden_size\": 900, \"intermediate_size\": 4864, "
                       "\"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"vocab_size\": 151936}",
                       &c),
                 FRT_ERR_FORMAT);
    /* qwen3: head_dim defaults to 128, q/k norm; num_key_value_heads defaults to the heads. */
    CHECK_OK(parse("{\"model_type\": \"qwen3\", \"hidden_size\": 1024, \"intermediate_size\": 3072, "
                   "\"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"vocab_size\": 151936, "
                   "\"rope_theta\": 1000000}",
                   &c));
    CHECK(c.head_dim == 128 && c.qk_norm == 1 && c.n_kv_heads == 16 && c.rope_theta == 1e6f);
    CHECK_STATUS(parse("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 64, "
                       "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 10, "
                       "\"mlp_bias\": true}",
                       &c),
                 FRT_ERR_UNSUPPORTED);
}

static void test_gen_shapes(void)
{
    frt_model_config c;
    int n = 0;
    int n_dense = 0;
    for (const char *const *s = frt_gen_model_shapes(); *s; s++, n++) {
        CHECK_OK(frt_gen_model_config(*s, &c));
        CHECK(!strcmp(c.dtype, "bfloat16"));
        if (c.hybrid) {
            CHECK(c.rotary_dim == c.head_dim / 4);
        } else {
            CHECK(c.rotary_dim == c.head_dim && c.n_full_layers == c.n_layers && !c.norm_unit_offset);
            n_dense++;
        }
    }
    CHECK(n == 14 && n_dense == 8); /* tiny-dense-128 and tiny-qwen3 included */
    /* The dense shapes against the published parameter counts (weights only, lm_head included when untied). */
    static const struct { const char *shape; long long params; } dense_params[] = {
        {"llama3.2-1b", 1235814400LL}, {"llama3.2-3b", 3212749824LL}, {"llama3.1-8b", 8030261248LL},
        {"qwen2.5-7b", 7615616512LL},  {"qwen3-8b", 8190735360LL}};
    for (size_t i = 0; i < sizeof dense_params / sizeof dense_params[0]; i++) {
        CHECK_OK(frt_gen_model_config(dense_params[i].shape, &c));
        frt_weight_spec *w = NULL;
        int nw = 0;
        CHECK_OK(frt_model_weight_specs(&c, &w, &nw));
        long long p = 0;
        for (int k = 0; k < nw; k++) {
            long long e = 1;
            for (int d = 0; d < w[k].ndim; d++) e *= w[k].shape[d];
            p += e;
        }
        free(w);
        CHECK_MSG(p == dense_params[i].params, "%s: %lld parameters, published %lld", dense_params[i].shape, p,
                  dense_params[i].params);
    }
    /* tiny-qwen3: qwen3-8b's vocabulary and special ids, so the real Qwen3 tokenizer runs on it */
    frt_model_config q8;
    CHECK_OK(frt_gen_model_config("qwen3-8b", &q8));
    CHECK_OK(frt_gen_model_config("tiny-qwen3", &c));
    CHECK(!strcmp(c.model_type, "qwen3") && c.vocab_size == q8.vocab_size && c.bos_token_id == q8.bos_token_id &&
          c.eos_token_id == q8.eos_token_id && c.n_layers == 2 && c.tie_word_embeddings == 1);
    CHECK_OK(frt_gen_model_config("llama3.1-8b", &c));
    CHECK(!strcmp(c.rope_type, "llama3") && c.rope_factor == 8.0f && c.rope_original_max_pos == 8192);
    CHECK(c.tie_word_embeddings == 0 && c.n_kv_heads == 8 && c.rope_theta == 500000.0f);
    CHECK_OK(frt_gen_model_config("qwen2.5-7b", &c));
    CHECK(c.attention_bias == 1 && c.o_proj_bias == 0 && c.qk_norm == 0 && !strcmp(c.rope_type, "default"));
    CHECK_OK(frt_gen_model_config("qwen3-8b", &c));
    CHECK(c.qk_norm == 1 && c.attention_bias == 0 && c.head_dim == 128);
    CHECK_OK(frt_gen_model_config("qwen3.5-9b", &c));
    CHECK(c.hidden_size == 4096 && c.n_layers == 32 && c.intermediate_size == 12288 && c.lin_n_v_heads == 32);
    CHECK(c.tie_word_embeddings == 0 && c.n_full_layers == 8 && c.eos_token_id == 248044);
    CHECK_OK(frt_gen_model_config("qwen3.5-0.8b", &c));
    CHECK(c.hidden_size == 1024 && c.tie_word_embeddings == 1 && c.lin_n_v_heads == 16 && c.n_kv_heads == 2);
    CHECK_OK(frt_gen_model_config("tiny", &c));
    char pat[32];
    CHECK(!strcmp(frt_config_layer_pattern(&c, pat, sizeof pat), "L F L L F"));
    CHECK(c.lin_k_head_dim != c.lin_v_head_dim);
    CHECK_STATUS(frt_gen_model_config("qwen3.5-1000b", &c), FRT_ERR_NOT_FOUND);
    CHECK(contains(frt_last_error(), "tiny"));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_files_and_generation(void)
{
    char dir[] = "/tmp/frt_test_cfg_XXXXXX";
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");
    char p[256], g[256];
    snprintf(p, sizeof p, "%s/config.json", dir);
    snprintf(g, sizeof g, "%s/generation_config.json", dir);
    frt_model_config c;
    frt_generation_config gc;
    CHECK_STATUS(frt_config_load(dir, &c), FRT_ERR_NOT_FOUND);
    CHECK(contains(frt_last_error(), p));
    write_file(p, TEXT_HEAD TEXT_DIMS ", \"eos_token_id\": 4095}");
    CHECK_OK(frt_config_load(dir, &c));
    CHECK(c.eos_token_id == 4095);

    /* No generation_config.json: defaults, eos from config.json. */
    CHECK_OK(frt_generation_config_load(dir, &c, &gc));
    CHECK(gc.n_eos == 1 && gc.eos_ids[0] == 4095 && gc.temperature == 1.0f && gc.top_p == 1.0f && gc.top_k == 0 &&
          gc.do_sample == 0);
    write_file(g, "{\"eos_token_id\": [4094, 4095, 7], \"temperature\": 0.6, \"top_p\": 0.95, \"top_k\": 20, "
                  "\"do_sample\": true, \"pad_token_id\": 1}");
    CHECK_OK(frt_generation_config_load(dir, &c, &gc));
    CHECK(gc.n_eos == 3 && gc.eos_ids[0] == 4094 && gc.eos_ids[2] == 7);
    CHECK(fabsf(gc.temperature - 0.6f) < 1e-7f && fabsf(gc.top_p - 0.95f) < 1e-7f && gc.top_k == 20 &&
          gc.do_sample == 1);
    /* eos absent from the file: config.json's; a single int. */
    write_file(g, "{\"top_k\": null}");
    CHECK_OK(frt_generation_config_load(dir, &c, &gc));
    CHECK(gc.n_eos == 1 && gc.eos_ids[0] == 4095 && gc.top_k == 0);
    write_file(g, "{\"eos_token_id\": 3}");
    CHECK_OK(frt_generation_config_load(dir, &c, &gc));
    CHECK(gc.n_eos == 1 && gc.eos_ids[0] == 3);
    /* Errors. */
    write_file(g, "{\"eos_token_id\": 4096}");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), g) && contains(frt_last_error(), "eos_token_id"));
    write_file(g, "{\"eos_token_id\": [1, \"x\"]}");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    write_file(g, "{\"eos_token_id\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    write_file(g, "{\"top_p\": 1.5}");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    write_file(g, "{\"do_sample\": \"yes\"}");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    write_file(g, "{\"temperature\": ");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    write_file(g, "[]");
    CHECK_STATUS(frt_generation_config_load(dir, &c, &gc), FRT_ERR_FORMAT);
    /* Without a model config: no fallback eos, no vocabulary bound. */
    CHECK_OK(frt_generation_config_parse_json("{\"eos_token_id\": 999999}", 24, NULL, NULL, &gc));
    CHECK(gc.n_eos == 1 && gc.eos_ids[0] == 999999);
    CHECK_OK(frt_generation_config_parse_json("{}", 2, NULL, NULL, &gc));
    CHECK(gc.n_eos == 0);
    /* config.json present but broken. */
    write_file(p, "{\"model_type\": ");
    CHECK_STATUS(frt_config_load(dir, &c), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), p));
    unlink(p);
    unlink(g);
    rmdir(dir);
    CHECK_STATUS(frt_config_load(NULL, &c), FRT_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    test_composite();
    test_text_rules();
    test_errors();
    test_dense();
    test_gen_shapes();
    test_files_and_generation();
    return frt_test_report();
}
