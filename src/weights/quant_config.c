/*
 * quant_config.c - quantization_config -> frt_quant_config (quant_config.h).
 *
 * The two FP8 layouts as their readers define them:
 *   - compressed-tensors (vLLM compressed_tensors.py, compressed-tensors
 *     QuantizationScheme / QuantizationArgs): quant_method
 *     "compressed-tensors", format "float-quantized", config_groups with
 *     one group whose "weights" are {type "float", num_bits 8, symmetric
 *     true, dynamic false, strategy "tensor" | "channel"};
 *     "input_activations" absent / null or dynamic (per-token scales
 *     computed at run time); no output_activations. kv_cache_scheme
 *     (vLLM compressed_tensors_kv.py validate_kv_cache_scheme): {type
 *     "float", num_bits 8, symmetric true, dynamic false, strategy
 *     "tensor" | "attn_head"}: one static k_scale and v_scale per attention
 *     layer, or per KV head of it (vLLM docs, "Quantized KV Cache":
 *     k/v_scale [1] or [num_kv_heads]). With a
 *     kv_cache_scheme, config_groups may be empty or absent (a kv-only
 *     config: the weights are stored unquantized, format "dense").
 *   - transformers FineGrainedFP8Config (quantizer_finegrained_fp8.py):
 *     quant_method "fp8", fmt "e4m3", activation_scheme "dynamic",
 *     weight_block_size [out, in] (default [128, 128]).
 */
#include "weights/quant_config.h"

#include "util/error.h"
#include "util/json.h"

#include <stdio.h>
#include <string.h>

/* A string field that must equal `want` when present (required: must be
 * present); UNSUPPORTED naming the field otherwise. */
static int expect_str(const json_t *o, const char *key, int required, const char *want, const char *what)
{
    char v[64] = "";
    int rc = frt_json_string(o, key, required, v, sizeof v, what);
    if (rc <= 0) return rc;
    if (strcmp(v, want))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: %s '%s' is not supported (supported: '%s', docs/fp8.md)", what, key,
                         v, want);
    return 0;
}

/* A boolean field that must equal `want` when present. */
static int expect_bool(const json_t *o, const char *key, int want, const char *what)
{
    int v = want;
    FRT_TRY(frt_json_bool(o, key, 0, &v, what));
    if (v != want)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: %s %s is not supported (docs/fp8.md)", what, key,
                         v ? "true" : "false");
    return 0;
}

/* Arguments of FP8 E4M3 values: type "float", num_bits 8, symmetric. */
static int check_fp8_args(const json_t *a, const char *what)
{
    long long bits = 0;
    FRT_TRY(expect_str(a, "type", 1, "float", what));
    FRT_TRY(frt_json_int(a, "num_bits", 1, 0, 1024, &bits, what));
    if (bits != 8) return frt_error(FRT_ERR_UNSUPPORTED, "%s: num_bits %lld (only 8: FP8 E4M3)", what, bits);
    FRT_TRY(expect_bool(a, "symmetric", 1, what));
    json_t *gs = json_object_get(a, "group_size");
    if (gs && !json_is_null(gs))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: group_size (group quantization) is not supported", what);
    return 0;
}

/* Arguments of static FP8 E4M3 scales (check_fp8_args, dynamic false):
 * their required "strategy" into strategy [size]. */
static int static_fp8_strategy(const json_t *a, char *strategy, size_t size, const char *what)
{
    FRT_TRY(check_fp8_args(a, what));
    FRT_TRY(expect_bool(a, "dynamic", 0, what));
    return frt_json_string(a, "strategy", 1, strategy, size, what);
}

static int parse_weights(const json_t *w, frt_quant_config *out, const char *what)
{
    char strategy[32] = "";
    FRT_TRY(static_fp8_strategy(w, strategy, sizeof strategy, what));
    if (!strcmp(strategy, "tensor"))
        out->method = FRT_QUANT_FP8_TENSOR;
    else if (!strcmp(strategy, "channel"))
        out->method = FRT_QUANT_FP8_CHANNEL;
    else
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: strategy '%s' is not supported (tensor or channel)", what, strategy);
    return 0;
}

static int parse_input_acts(const json_t *g, const char *what)
{
    json_t *a = NULL;
    FRT_TRY(frt_json_child(g, "input_activations", 0, JSON_OBJECT, &a, what));
    if (!a) return 0;
    char w[512];
    snprintf(w, sizeof w, "%.480s.input_activations", what);
    FRT_TRY(check_fp8_args(a, w));
    int dyn = 0;
    FRT_TRY(frt_json_bool(a, "dynamic", 1, &dyn, w));
    if (!dyn)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "%s: static activation scales (dynamic false, input_scale tensors) are not supported", w);
    return 0;
}

/* kv_cache_scheme: E4M3 K and V with one static scale per layer's K and V. */
static int parse_kv_scheme(const json_t *kv, frt_quant_config *out, const char *what)
{
    char w[512], strategy[32] = "";
    snprintf(w, sizeof w, "%.480s.kv_cache_scheme", what);
    if (!json_is_object(kv)) return frt_error(FRT_ERR_FORMAT, "%s: not an object", w);
    /* static: scales from the live prefix would break capsule exactness */
    FRT_TRY(static_fp8_strategy(kv, strategy, sizeof strategy, w));
    if (!strcmp(strategy, "tensor"))
        out->kv = FRT_QUANT_KV_TENSOR;
    else if (!strcmp(strategy, "attn_head"))
        out->kv = FRT_QUANT_KV_HEAD;
    else
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "%s: strategy '%s' is not supported (tensor: one k_scale and one v_scale per attention "
                         "layer; attn_head: one per KV head; docs/fp8.md)",
                         w, strategy);
    return 0;
}

/* A kv-only config's format: "dense" (weights stored as they are) or
 * "float-quantized" (with no group, nothing is quantized either way). */
static int check_kv_only_format(const json_t *qc, const char *what)
{
    char v[64] = "";
    FRT_TRY(frt_json_string(qc, "format", 0, v, sizeof v, what));
    if (v[0] && strcmp(v, "dense") && strcmp(v, "float-quantized"))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "%s: format '%s' is not supported for a kv_cache_scheme without config_groups (supported: "
                         "'dense', 'float-quantized', docs/fp8.md)",
                         what, v);
    return 0;
}

/* The one group of FP8 weights of config_groups. */
static int parse_group(json_t *groups, frt_quant_config *out, const char *what)
{
    if (json_object_size(groups) != 1)
        return frt_error(json_object_size(groups) ? FRT_ERR_UNSUPPORTED : FRT_ERR_FORMAT,
                         "%s: config_groups holds %zu groups (exactly one is supported)", what,
                         json_object_size(groups));
    const char *gname = json_object_iter_key(json_object_iter(groups));
    const json_t *g = json_object_iter_value(json_object_iter(groups));
    char w[512];
    snprintf(w, sizeof w, "%.400s.config_groups.%.64s", what, gname);
    if (!json_is_object(g)) return frt_error(FRT_ERR_FORMAT, "%s: not an object", w);
    json_t *oa = json_object_get(g, "output_activations");
    if (oa && !json_is_null(oa)) return frt_error(FRT_ERR_UNSUPPORTED, "%s: output_activations are not supported", w);
    FRT_TRY(parse_input_acts(g, w));
    json_t *wt = NULL;
    FRT_TRY(frt_json_child(g, "weights", 1, JSON_OBJECT, &wt, w));
    snprintf(w + strlen(w), sizeof w - strlen(w), ".weights");
    return parse_weights(wt, out, w);
}

static int parse_compressed_tensors(const json_t *qc, frt_quant_config *out, const char *what)
{
    FRT_TRY(expect_str(qc, "quantization_status", 0, "compressed", what));
    json_t *kv = json_object_get(qc, "kv_cache_scheme");
    if (kv && !json_is_null(kv)) FRT_TRY(parse_kv_scheme(kv, out, what));
    json_t *groups = NULL;
    FRT_TRY(frt_json_child(qc, "config_groups", out->kv == FRT_QUANT_KV_NONE, JSON_OBJECT, &groups, what));
    if (out->kv != FRT_QUANT_KV_NONE && json_object_size(groups) == 0) return check_kv_only_format(qc, what);
    FRT_TRY(expect_str(qc, "format", 1, "float-quantized", what));
    return parse_group(groups, out, what);
}

static int parse_block_size(const json_t *qc, frt_quant_config *out, const char *what)
{
    out->block_out = out->block_in = 128; /* FineGrainedFP8Config's default */
    json_t *bs = json_object_get(qc, "weight_block_size");
    if (!bs) return 0;
    if (json_is_null(bs))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: weight_block_size null (per-tensor fp8) is not supported", what);
    if (!json_is_array(bs) || json_array_size(bs) != 2 || !json_is_integer(json_array_get(bs, 0)) ||
        !json_is_integer(json_array_get(bs, 1)))
        return frt_error(FRT_ERR_FORMAT, "%s: weight_block_size must be a list of two integers", what);
    json_int_t bo = json_integer_value(json_array_get(bs, 0)), bi = json_integer_value(json_array_get(bs, 1));
    if (bo < 1 || bo > 65536 || bi < 1 || bi > 65536)
        return frt_error(FRT_ERR_FORMAT, "%s: weight_block_size [%lld, %lld] outside 1..65536", what, (long long)bo,
                         (long long)bi);
    out->block_out = (int)bo;
    out->block_in = (int)bi;
    return 0;
}

static int parse_fp8(const json_t *qc, frt_quant_config *out, const char *what)
{
    FRT_TRY(expect_str(qc, "fmt", 0, "e4m3", what));
    FRT_TRY(expect_str(qc, "activation_scheme", 0, "dynamic", what));
    json_t *kv = json_object_get(qc, "kv_cache_scheme");
    if (kv && !json_is_null(kv)) /* not transformers' field: never ignored */
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "%s: kv_cache_scheme with quant_method 'fp8' is not supported (compressed-tensors only)",
                         what);
    out->method = FRT_QUANT_FP8_BLOCK;
    return parse_block_size(qc, out, what);
}

int frt_quant_config_parse(const json_t *qc, frt_quant_config *out, const char *what)
{
    memset(out, 0, sizeof *out);
    if (!qc) return 0;
    char w[512], method[48] = "";
    snprintf(w, sizeof w, "%.480s: quantization_config", what ? what : "config.json");
    if (!json_is_object(qc)) return frt_error(FRT_ERR_FORMAT, "%s: not an object", w);
    FRT_TRY(frt_json_string(qc, "quant_method", 1, method, sizeof method, w));
    int rc;
    if (!strcmp(method, "compressed-tensors"))
        rc = parse_compressed_tensors(qc, out, w);
    else if (!strcmp(method, "fp8"))
        rc = parse_fp8(qc, out, w);
    else
        rc = frt_error(FRT_ERR_UNSUPPORTED,
                       "%s: quant_method '%s' is not supported (compressed-tensors float-quantized, fp8; docs/fp8.md)",
                       w, method);
    if (rc < 0) memset(out, 0, sizeof *out);
    return rc < 0 ? rc : 0;
}
