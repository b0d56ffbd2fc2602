/*
 * config.c - config.json / generation_config.json -> frt_model_config /
 * frt_generation_config, following transformers 5.x (see config.h for the
 * rules and their sources).
 */
#include "frt/config.h"

#include "util/error.h"
#include "frt/fs.h"
#include "util/json.h"
#include "weights/quant_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_BYTES (16u << 20)

static const char *SUPPORTED = "qwen3_5_text, qwen3_5, llama, qwen2, qwen3, mistral";

const char *frt_config_supported_types(void) { return SUPPORTED; }

char *frt_config_layer_pattern(const frt_model_config *cfg, char *buf, size_t size)
{
    if (!buf || !size) return buf;
    buf[0] = '\0';
    size_t o = 0;
    for (int i = 0; cfg && i < cfg->n_layers && o + 2 < size; i++) {
        buf[o++] = cfg->layer_types[i] == FRT_LAYER_LINEAR_ATTENTION ? 'L' : 'F';
        if (i + 1 < cfg->n_layers && o + 2 < size) buf[o++] = ' ';
    }
    buf[o] = '\0';
    return buf;
}

/* An int field into *dst; keeps *dst when absent and not required. */
static int get_int(const json_t *o, const char *key, int required, long long lo, long long hi, int *dst,
                   const char *what)
{
    long long v;
    int rc = frt_json_int(o, key, required, lo, hi, &v, what);
    if (rc == 1) *dst = (int)v;
    return rc;
}

/* A token id: an integer, or a list of integers (the first is taken; an
 * empty list counts as absent). Returns 1 when found. */
static int get_token_id(const json_t *o, const char *key, int *dst, const char *what)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (json_is_array(v)) {
        if (json_array_size(v) == 0) return 0;
        v = json_array_get(v, 0);
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
        return frt_error(FRT_ERR_FORMAT, "%s: field '%s' must be a non-negative integer or a list of them", what,
                         key);
    *dst = (int)json_integer_value(v);
    return 1;
}

/* The rope fields: rope_parameters (or a legacy rope_scaling, which wins
 * when non-empty, as in RotaryEmbeddingConfigMixin.convert_rope_params_to_dict),
 * then the legacy top-level keys, then the defaults. */
static int parse_rope(const json_t *tc, frt_model_config *c, const char *what)
{
    json_t *rp = NULL, *rs = NULL;
    FRT_TRY(frt_json_child(tc, "rope_parameters", 0, JSON_OBJECT, &rp, what));
    FRT_TRY(frt_json_child(tc, "rope_scaling", 0, JSON_OBJECT, &rs, what));
    if (rs && json_object_size(rs) > 0) rp = rs;
    if (rp) { /* parameters nested by layer type: the full-attention ones apply */
        json_t *nested = json_object_get(rp, "full_attention");
        if (json_is_object(nested)) rp = nested;
    }
    char what2[512];
    snprintf(what2, sizeof what2, "%.480s: rope_parameters", what);

    char type[32] = "default";
    if (rp) {
        int rc = frt_json_string(rp, "rope_type", 0, type, sizeof type, what2);
        if (rc < 0) return rc;
        if (rc == 0) FRT_TRY(frt_json_string(rp, "type", 0, type, sizeof type, what2));
    }
    if (!strcmp(type, "llama3") && !c->hybrid) {
        /* _compute_llama3_parameters: every parameter is required. */
        double f, lo, hi;
        long long orig;
        FRT_TRY(frt_json_number(rp, "factor", 1, 1e-9, 1e9, &f, what2));
        FRT_TRY(frt_json_number(rp, "low_freq_factor", 1, 1e-9, 1e9, &lo, what2));
        FRT_TRY(frt_json_number(rp, "high_freq_factor", 1, 1e-9, 1e9, &hi, what2));
        FRT_TRY(frt_json_int(rp, "original_max_position_embeddings", 1, 1, INT_MAX, &orig, what2));
        if (hi <= lo)
            return frt_error(FRT_ERR_FORMAT, "%s: high_freq_factor %g must exceed low_freq_factor %g", what2, hi, lo);
        c->rope_factor = (float)f;
        c->rope_low_freq_factor = (float)lo;
        c->rope_high_freq_factor = (float)hi;
        c->rope_original_max_pos = (int)orig;
        memcpy(c->rope_type, "llama3", sizeof "llama3");
    } else if (strcmp(type, "default") != 0) {
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: rope_type '%s' is not supported (supported: default%s)", what,
                         type, c->hybrid ? "" : ", llama3");
    } else {
        memcpy(c->rope_type, "default", sizeof "default");
    }

    double theta = 10000.0, prf = c->hybrid ? 0.25 : 1.0;
    int rc = rp ? frt_json_number(rp, "rope_theta", 0, 1e-6, 1e30, &theta, what2) : 0;
    if (rc < 0) return rc;
    if (rc == 0) FRT_TRY(frt_json_number(tc, "rope_theta", 0, 1e-6, 1e30, &theta, what));
    rc = rp ? frt_json_number(rp, "partial_rotary_factor", 0, 1e-9, 1.0, &prf, what2) : 0;
    if (rc < 0) return rc;
    if (rc == 0) FRT_TRY(frt_json_number(tc, "partial_rotary_factor", 0, 1e-9, 1.0, &prf, what));
    c->rope_theta = (float)theta;
    c->partial_rotary_factor = (float)prf;
    c->rotary_dim = (int)((double)c->head_dim * prf); /* int(head_dim * partial_rotary_factor) */
    if (c->rotary_dim < 2 || c->rotary_dim % 2)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: rotary dimension %d (head_dim %d x partial_rotary_factor %g) "
                                              "must be even and at least 2",
                         what, c->rotary_dim, c->head_dim, prf);
    return 0;
}

static int parse_layer_types(const json_t *tc, frt_model_config *c, const char *what)
{
    json_t *lt = NULL;
    FRT_TRY(frt_json_child(tc, "layer_types", 0, JSON_ARRAY, &lt, what));
    if (lt) {
        if ((int)json_array_size(lt) != c->n_layers)
            return frt_error(FRT_ERR_FORMAT, "%s: layer_types has %zu entries but num_hidden_layers is %d", what,
                             json_array_size(lt), c->n_layers);
        for (int i = 0; i < c->n_layers; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (!s) return frt_error(FRT_ERR_FORMAT, "%s: layer_types[%d] is not a string", what, i);
            int full = !strcmp(s, "full_attention") || !strcmp(s, "attention");
            int lin = !strcmp(s, "linear_attention") || !strcmp(s, "mamba");
            if (!full && !(lin && c->hybrid))
                return frt_error(FRT_ERR_UNSUPPORTED,
                                 "%s: layer_types[%d] = '%s' is not supported for model_type '%s' (supported: %s)",
                                 what, i, s, c->model_type,
                                 c->hybrid ? "linear_attention, full_attention" : "full_attention");
            c->layer_types[i] = full ? FRT_LAYER_FULL_ATTENTION : FRT_LAYER_LINEAR_ATTENTION;
        }
    } else if (c->hybrid) {
        int interval = 4;
        FRT_TRY(get_int(tc, "full_attention_interval", 0, 1, FRT_MAX_LAYERS, &interval, what));
        for (int i = 0; i < c->n_layers; i++)
            c->layer_types[i] = (i + 1) % interval ? FRT_LAYER_LINEAR_ATTENTION : FRT_LAYER_FULL_ATTENTION;
    } else {
        for (int i = 0; i < c->n_layers; i++) c->layer_types[i] = FRT_LAYER_FULL_ATTENTION;
    }
    c->n_full_layers = c->n_linear_layers = 0;
    for (int i = 0; i < c->n_layers; i++) {
        if (c->layer_types[i] == FRT_LAYER_FULL_ATTENTION)
            c->n_full_layers++;
        else
            c->n_linear_layers++;
    }
    return 0;
}

/* quantization_config (quant_config.h): FP8 weights and / or KV-cache
 * scales, for the dense family and the Qwen3.5 hybrid alike (their loaders
 * read the Linear weights through model/fp8_weights.h). */
static int parse_quant(const json_t *root, frt_model_config *c, const char *what)
{
    const json_t *qc = json_object_get(root, "quantization_config");
    if (qc && json_is_null(qc)) qc = NULL;
    return frt_quant_config_parse(qc, &c->quant, what);
}

static int parse_root(const json_t *root, const char *what, frt_model_config *c)
{
    memset(c, 0, sizeof *c);
    c->bos_token_id = c->eos_token_id = -1;
    if (!json_is_object(root)) return frt_error(FRT_ERR_FORMAT, "%s: the top level is not a JSON object", what);
    FRT_TRY(frt_json_string(root, "model_type", 1, c->model_type, sizeof c->model_type, what));

    const json_t *tc = root; /* where the text fields live */
    enum { QWEN35, LLAMA, QWEN2, QWEN3, MISTRAL } kind;
    if (!strcmp(c->model_type, "qwen3_5_text") || !strcmp(c->model_type, "qwen3_5")) {
        kind = QWEN35;
        c->hybrid = 1;
        snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.");
        if (!strcmp(c->model_type, "qwen3_5")) {
            json_t *t;
            FRT_TRY(frt_json_child(root, "text_config", 1, JSON_OBJECT, &t, what));
            tc = t;
            snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.language_model.");
        }
    } else if (!strcmp(c->model_type, "llama")) {
        kind = LLAMA;
    } else if (!strcmp(c->model_type, "qwen2")) {
        kind = QWEN2;
    } else if (!strcmp(c->model_type, "qwen3")) {
        kind = QWEN3;
    } else if (!strcmp(c->model_type, "mistral")) {
        kind = MISTRAL;
    } else {
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (supported: %s)", what,
                         c->model_type, SUPPORTED);
    }
    if (!c->hybrid) snprintf(c->weight_prefix, sizeof c->weight_prefix, "model.");
    char wtext[512];
    snprintf(wtext, sizeof wtext, "%.480s%s", what, tc != root ? ": text_config" : "");
    const char *W = wtext;

    json_t *arch = json_object_get(root, "architectures");
    if (json_is_array(arch) && json_is_string(json_array_get(arch, 0)))
        snprintf(c->architecture, sizeof c->architecture, "%s", json_string_value(json_array_get(arch, 0)));

    /* Sizes. */
    FRT_TRY(get_int(tc, "vocab_size", 1, 1, 1 << 26, &c->vocab_size, W));
    FRT_TRY(get_int(tc, "hidden_size", 1, 1, 1 << 17, &c->hidden_size, W));
    FRT_TRY(get_int(tc, "intermediate_size", 1, 1, 1 << 20, &c->intermediate_size, W));
    long long nl;
    FRT_TRY(frt_json_int(tc, "num_hidden_layers", 1, 1, 1 << 20, &nl, W));
    if (nl > FRT_MAX_LAYERS)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: num_hidden_layers %lld exceeds the supported %d", W, nl,
                         FRT_MAX_LAYERS);
    c->n_layers = (int)nl;
    FRT_TRY(get_int(tc, "num_attention_heads", 1, 1, 1 << 12, &c->n_heads, W));
    c->n_kv_heads = c->n_heads;
    FRT_TRY(get_int(tc, "num_key_value_heads", kind == QWEN35, 1, 1 << 12, &c->n_kv_heads, W));
    if (c->n_heads % c->n_kv_heads)
        return frt_error(FRT_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", W,
                         c->n_heads, c->n_kv_heads);
    if (kind == QWEN3) {
        c->head_dim = 128;
    } else if (kind != QWEN35) {
        if (c->hidden_size % c->n_heads)
            return frt_error(FRT_ERR_FORMAT, "%s: hidden_size %d is not a multiple of num_attention_heads %d", W,
                             c->hidden_size, c->n_heads);
        c->head_dim = c->hidden_size / c->n_heads;
    }
    FRT_TRY(get_int(tc, "head_dim", kind == QWEN35, 1, 1 << 12, &c->head_dim, W));

    char act[32] = "silu";
    FRT_TRY(frt_json_string(tc, "hidden_act", 0, act, sizeof act, W));
    if (strcmp(act, "silu") != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported (supported: silu)", W, act);

    double eps = 1e-6;
    FRT_TRY(frt_json_number(tc, "rms_norm_eps", 0, 0.0, 1.0, &eps, W));
    c->rms_norm_eps = (float)eps;
    c->max_position_embeddings = kind == LLAMA ? 2048 : 32768;
    FRT_TRY(get_int(tc, "max_position_embeddings", 0, 1, INT_MAX, &c->max_position_embeddings, W));

    /* Tying: the config the model class ties with (config.h). */
    int rc = 0;
    if (tc != root) FRT_TRY(rc = frt_json_bool(root, "tie_word_embeddings", 0, &c->tie_word_embeddings, what));
    if (rc == 0) FRT_TRY(frt_json_bool(tc, "tie_word_embeddings", 0, &c->tie_word_embeddings, W));

    rc = frt_json_string(tc, "dtype", 0, c->dtype, sizeof c->dtype, W);
    if (rc == 0) rc = frt_json_string(tc, "torch_dtype", 0, c->dtype, sizeof c->dtype, W);
    if (rc == 0 && tc != root) rc = frt_json_string(root, "dtype", 0, c->dtype, sizeof c->dtype, what);
    if (rc == 0 && tc != root) rc = frt_json_string(root, "torch_dtype", 0, c->dtype, sizeof c->dtype, what);
    FRT_TRY(rc);

    FRT_TRY(rc = get_token_id(tc, "bos_token_id", &c->bos_token_id, W));
    if (rc == 0 && tc != root) FRT_TRY(get_token_id(root, "bos_token_id", &c->bos_token_id, what));
    FRT_TRY(rc = get_token_id(tc, "eos_token_id", &c->eos_token_id, W));
    if (rc == 0 && tc != root) FRT_TRY(get_token_id(root, "eos_token_id", &c->eos_token_id, what));

    /* Architecture facts. */
    int attn_bias = 0, mlp_bias = 0;
    FRT_TRY(frt_json_bool(tc, "attention_bias", 0, &attn_bias, W));
    FRT_TRY(frt_json_bool(tc, "mlp_bias", 0, &mlp_bias, W));
    if (mlp_bias) return frt_error(FRT_ERR_UNSUPPORTED, "%s: mlp_bias is not supported", W);
    c->attention_bias = kind == QWEN2 ? 1 : attn_bias;
    c->o_proj_bias = kind == QWEN2 ? 0 : attn_bias;
    c->qk_norm = kind == QWEN3 || kind == QWEN35;
    c->norm_unit_offset = kind == QWEN35;
    if (kind == QWEN2 || kind == QWEN3) {
        int sliding = 0;
        FRT_TRY(frt_json_bool(tc, "use_sliding_window", 0, &sliding, W));
        if (sliding) return frt_error(FRT_ERR_UNSUPPORTED, "%s: use_sliding_window is not supported", W);
    }
    if (kind == MISTRAL) { /* MistralConfig: sliding_window null means full attention */
        json_t *sw = json_object_get(tc, "sliding_window");
        if (sw && !json_is_null(sw))
            return frt_error(FRT_ERR_UNSUPPORTED,
                             "%s: mistral sliding_window is not supported (only sliding_window null runs)", W);
    }

    if (kind == QWEN35) {
        c->attn_output_gate = 1;
        FRT_TRY(frt_json_bool(tc, "attn_output_gate", 0, &c->attn_output_gate, W));
        FRT_TRY(get_int(tc, "linear_num_key_heads", 1, 1, 1 << 12, &c->lin_n_k_heads, W));
        FRT_TRY(get_int(tc, "linear_num_value_heads", 1, 1, 1 << 12, &c->lin_n_v_heads, W));
        FRT_TRY(get_int(tc, "linear_key_head_dim", 1, 1, 1 << 12, &c->lin_k_head_dim, W));
        FRT_TRY(get_int(tc, "linear_value_head_dim", 1, 1, 1 << 12, &c->lin_v_head_dim, W));
        c->lin_conv_kernel = 4;
        FRT_TRY(get_int(tc, "linear_conv_kernel_dim", 0, 1, 64, &c->lin_conv_kernel, W));
        if (c->lin_n_v_heads % c->lin_n_k_heads)
            return frt_error(FRT_ERR_FORMAT,
                             "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", W,
                             c->lin_n_v_heads, c->lin_n_k_heads);
    }
    FRT_TRY(parse_layer_types(tc, c, W));
    FRT_TRY(parse_rope(tc, c, W));
    FRT_TRY(parse_quant(root, c, what));

    if (c->bos_token_id >= c->vocab_size) c->bos_token_id = -1; /* ids outside the table are unusable */
    if (c->eos_token_id >= c->vocab_size)
        return frt_error(FRT_ERR_FORMAT, "%s: eos_token_id %d is outside the vocabulary (%d)", W, c->eos_token_id,
                         c->vocab_size);
    return 0;
}

int frt_config_parse_json(const char *json_text, size_t len, const char *what, frt_model_config *out)
{
    if (!out || (!json_text && len)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "config: NULL argument");
    const char *W = what ? what : "config.json";
    json_t *root;
    FRT_TRY(frt_json_parse(json_text, len, 0, &root, W));
    int rc = parse_root(root, W, out);
    json_decref(root);
    return rc;
}

static int join_path(char *buf, size_t size, const char *dir, const char *file)
{
    int n = snprintf(buf, size, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= size) return frt_error(FRT_ERR_INVALID_ARGUMENT, "config: path too long: %s", dir);
    return 0;
}

int frt_config_load(const char *model_dir, frt_model_config *out)
{
    if (!model_dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "config: NULL argument");
    char path[PATH_MAX];
    FRT_TRY(join_path(path, sizeof path, model_dir, "config.json"));
    char *text;
    size_t len;
    FRT_TRY(frt_file_read_all(path, CONFIG_MAX_BYTES, &text, &len));
    int rc = frt_config_parse_json(text, len, path, out);
    free(text);
    return rc;
}

static void gen_defaults(const frt_model_config *cfg, frt_generation_config *g)
{
    memset(g, 0, sizeof *g);
    g->temperature = 1.0f;
    g->top_p = 1.0f;
    if (cfg && cfg->eos_token_id >= 0) g->eos_ids[g->n_eos++] = cfg->eos_token_id;
}

int frt_generation_config_parse_json(const char *json_text, size_t len, const char *what,
                                     const frt_model_config *cfg, frt_generation_config *out)
{
    if (!out || (!json_text && len)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generation config: NULL argument");
    const char *W = what ? what : "generation_config.json";
    json_t *root;
    FRT_TRY(frt_json_parse(json_text, len, 0, &root, W));
    frt_generation_config g;
    gen_defaults(cfg, &g);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = frt_error(FRT_ERR_FORMAT, "%s: the top level is not a JSON object", W);
        goto out;
    }
    json_t *e = json_object_get(root, "eos_token_id");
    if (e && !json_is_null(e)) {
        g.n_eos = 0;
        size_t n = json_is_array(e) ? json_array_size(e) : 1;
        if (n > 16) {
            rc = frt_error(FRT_ERR_FORMAT, "%s: eos_token_id lists %zu ids, at most 16 supported", W, n);
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_is_array(e) ? json_array_get(e, i) : e;
            long long id = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
            long long hi = cfg ? cfg->vocab_size - 1 : INT_MAX;
            if (id < 0 || id > hi) {
                rc = frt_error(FRT_ERR_FORMAT, "%s: eos_token_id entry %zu is not a token id in [0, %lld]", W, i,
                               hi);
                goto out;
            }
            g.eos_ids[g.n_eos++] = (int)id;
        }
    }
    double d;
    if ((rc = frt_json_number(root, "temperature", 0, 0.0, 1e6, &d, W)) < 0) goto out;
    if (rc == 1) g.temperature = (float)d;
    if ((rc = frt_json_number(root, "top_p", 0, 0.0, 1.0, &d, W)) < 0) goto out;
    if (rc == 1) g.top_p = (float)d;
    if ((rc = get_int(root, "top_k", 0, 0, INT_MAX, &g.top_k, W)) < 0) goto out;
    if ((rc = frt_json_bool(root, "do_sample", 0, &g.do_sample, W)) < 0) goto out;
    rc = 0;
    *out = g;
out:
    json_decref(root);
    return rc;
}

int frt_generation_config_load(const char *model_dir, const frt_model_config *cfg, frt_generation_config *out)
{
    if (!model_dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generation config: NULL argument");
    char path[PATH_MAX];
    FRT_TRY(join_path(path, sizeof path, model_dir, "generation_config.json"));
    char *text;
    size_t len;
    int rc = frt_file_read_all(path, CONFIG_MAX_BYTES, &text, &len);
    if (rc == FRT_ERR_NOT_FOUND) {
        gen_defaults(cfg, out);
        return 0;
    }
    FRT_TRY(rc);
    rc = frt_generation_config_parse_json(text, len, path, cfg, out);
    free(text);
    return rc;
}
