/*
 * arch/pi0/pi0.c - the Pi0 / Pi0.5 architecture table (pi0.h): its config
 * (transformers 5.x configuration_pi0.py PI0Config: vlm_config, a
 * PaliGemmaConfig with a Gemma text_config and a SigLIP vision_config, and
 * dit_config, a GemmaConfig; absent fields take those classes' defaults;
 * or openpi's PyTorch config, examples/convert_jax_model_to_pytorch.py:
 * action_dim, action_horizon, the Gemma variants of models/gemma.py
 * get_config, precision), the state it declares, its ports and the shapes
 * of frt/policy.h.
 */
#include "model/arch/pi0/pi0.h"

#include "frt/fs.h"
#include "frt/safetensors.h"
#include "util/error.h"
#include "util/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CAMERAS 3

static int get_i(const json_t *o, const char *key, int *dst, const char *what)
{
    long long v;
    int rc = frt_json_int(o, key, 0, 1, 1 << 20, &v, what);
    if (rc == 1) *dst = (int)v;
    return rc < 0 ? rc : 0;
}

static int get_f(const json_t *o, const char *key, double lo, double hi, double *dst, const char *what)
{
    double v;
    int rc = frt_json_number(o, key, 0, lo, hi, &v, what);
    if (rc == 1) *dst = v;
    return rc < 0 ? rc : 0;
}

/* An activation field, when present, must be the tanh GELU. */
static int check_act(const json_t *o, const char *key, const char *what)
{
    char act[32];
    int rc = frt_json_string(o, key, 0, act, sizeof act, what);
    if (rc < 0) return rc;
    if (rc == 1 && strcmp(act, "gelu_pytorch_tanh") != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: %s '%s' (only gelu_pytorch_tanh is supported)", what, key, act);
    return 0;
}

/* RoPE: rope_parameters {rope_type "default", rope_theta} or a top-level
 * rope_theta; absent, *theta stays (10000 by default). A legacy
 * rope_scaling is refused. */
static int parse_rope(const json_t *o, float *theta, const char *what)
{
    double t = *theta;
    json_t *rp = NULL, *rs = json_object_get(o, "rope_scaling");
    if (rs && !json_is_null(rs))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: rope_scaling (a scaled RoPE) is not supported", what);
    FRT_TRY(frt_json_child(o, "rope_parameters", 0, JSON_OBJECT, &rp, what));
    FRT_TRY(get_f(o, "rope_theta", 1, 1e12, &t, what));
    if (rp) {
        char type[32] = "default";
        FRT_TRY(frt_json_string(rp, "rope_type", 0, type, sizeof type, what));
        if (strcmp(type, "default") != 0)
            return frt_error(FRT_ERR_UNSUPPORTED, "%s: rope_type '%s' (only default is supported)", what, type);
        FRT_TRY(get_f(rp, "rope_theta", 1, 1e12, &t, what));
    }
    *theta = (float)t;
    return 0;
}

/* A GemmaConfig; absent fields keep what *g holds. */
static int parse_gemma(const json_t *o, pi0_gemma_config *g, int *vocab, const char *what)
{
    double eps = g->eps;
    FRT_TRY(get_i(o, "hidden_size", &g->width, what));
    FRT_TRY(get_i(o, "intermediate_size", &g->inter, what));
    FRT_TRY(get_i(o, "num_hidden_layers", &g->layers, what));
    FRT_TRY(get_i(o, "num_attention_heads", &g->heads, what));
    FRT_TRY(get_i(o, "num_key_value_heads", &g->kv_heads, what));
    FRT_TRY(get_i(o, "head_dim", &g->head_dim, what));
    FRT_TRY(get_f(o, "rms_norm_eps", 0, 1, &eps, what));
    g->eps = (float)eps;
    if (vocab) FRT_TRY(get_i(o, "vocab_size", vocab, what));
    FRT_TRY(check_act(o, "hidden_activation", what));
    FRT_TRY(check_act(o, "hidden_act", what));
    return parse_rope(o, &g->rope_theta, what);
}

/* GemmaConfig's class defaults. */
static const pi0_gemma_config GEMMA_DEFAULTS = {3072, 24576, 28, 16, 16, 256, 1e-6f, 10000.0f};

static int parse_vision(const json_t *o, pi0_config *c, const char *what)
{
    double eps = c->v_eps;
    int channels = 3, head = 0;
    FRT_TRY(get_i(o, "hidden_size", &c->v_width, what));
    FRT_TRY(get_i(o, "intermediate_size", &c->v_inter, what));
    FRT_TRY(get_i(o, "num_hidden_layers", &c->v_layers, what));
    FRT_TRY(get_i(o, "num_attention_heads", &c->v_heads, what));
    FRT_TRY(get_i(o, "image_size", &c->image_size, what));
    FRT_TRY(get_i(o, "patch_size", &c->patch, what));
    FRT_TRY(get_i(o, "num_channels", &channels, what));
    FRT_TRY(get_f(o, "layer_norm_eps", 0, 1, &eps, what));
    c->v_eps = (float)eps;
    FRT_TRY(check_act(o, "hidden_act", what));
    if (frt_json_bool(o, "vision_use_head", 0, &head, what) < 0) return FRT_ERR_FORMAT;
    if (head) return frt_error(FRT_ERR_UNSUPPORTED, "%s: vision_use_head (a pooling head) is not supported", what);
    if (channels != 3) return frt_error(FRT_ERR_UNSUPPORTED, "%s: %d image channels (3 supported)", what, channels);
    return 0;
}

/* PI0Config's defaults: PaliGemma 3B's Gemma 2B and SigLIP So400m/14, the
 * Gemma 300M expert. */
static void set_defaults(pi0_config *c)
{
    c->t = (pi0_gemma_config){2048, 16384, 18, 8, 1, 256, 1e-6f, 10000.0f};
    c->e = (pi0_gemma_config){1024, 4096, 18, 8, 1, 256, 1e-6f, 10000.0f};
    c->vocab = 257152;
    c->v_width = 1152, c->v_inter = 4304, c->v_layers = 27, c->v_heads = 16;
    c->image_size = 224, c->patch = 14, c->v_eps = 1e-6f;
    c->chunk = 50, c->action_dim = 32, c->state_dim = 32, c->n_steps = 10;
    c->min_period = 4e-3, c->max_period = 4.0;
}

static int parse_vlm(const json_t *vlm, pi0_config *c, const char *what)
{
    json_t *t = NULL, *v = NULL;
    char wt[600];
    FRT_TRY(frt_json_child(vlm, "text_config", 0, JSON_OBJECT, &t, what));
    FRT_TRY(frt_json_child(vlm, "vision_config", 0, JSON_OBJECT, &v, what));
    if (t) {
        c->t = GEMMA_DEFAULTS;
        c->vocab = 256000;
        snprintf(wt, sizeof wt, "%.480s: vlm_config.text_config", what);
        FRT_TRY(parse_gemma(t, &c->t, &c->vocab, wt));
    }
    if (v) {
        c->v_width = 768, c->v_inter = 3072, c->v_layers = 12, c->v_heads = 12, c->image_size = 224;
        c->patch = 16;
        snprintf(wt, sizeof wt, "%.480s: vlm_config.vision_config", what);
        FRT_TRY(parse_vision(v, c, wt));
    }
    int proj = c->t.width;
    FRT_TRY(get_i(vlm, "projection_dim", &proj, what));
    if (proj != c->t.width)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: projection_dim %d differs from the text width %d", what, proj,
                         c->t.width);
    return 0;
}

/* Refuses a key of o outside keys (NULL-terminated); `where` names o. */
static int only_keys(const json_t *o, const char *const *keys, const char *what, const char *where)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        int known = 0;
        for (int i = 0; keys[i] && !known; i++) known = !strcmp(keys[i], k);
        if (!known)
            return frt_error(FRT_ERR_UNSUPPORTED, "%s: %s field '%s' is not one frt reads (docs/policies.md)", what,
                             where, k);
    }
    return 0;
}

/* openpi models/gemma.py get_config: the _lora forms have the base shapes
 * (their adapters are not in a PyTorch checkpoint: PI0Pytorch has none). */
static const struct {
    const char *name;
    pi0_gemma_config g;
} VARIANTS[] = {
    {"gemma_2b", {2048, 16384, 18, 8, 1, 256, 1e-6f, 10000.0f}},
    {"gemma_2b_lora", {2048, 16384, 18, 8, 1, 256, 1e-6f, 10000.0f}},
    {"gemma_300m", {1024, 4096, 18, 8, 1, 256, 1e-6f, 10000.0f}},
    {"gemma_300m_lora", {1024, 4096, 18, 8, 1, 256, 1e-6f, 10000.0f}},
    {"dummy", {64, 128, 4, 8, 1, 16, 1e-6f, 10000.0f}},
};

/* The required variant field `key` into *g and name[cap]. */
static int parse_variant(const json_t *root, const char *key, char *name, size_t cap, pi0_gemma_config *g,
                         const char *what)
{
    char v[64];
    FRT_TRY(frt_json_string(root, key, 1, v, sizeof v, what));
    for (size_t i = 0; i < sizeof VARIANTS / sizeof *VARIANTS; i++)
        if (!strcmp(v, VARIANTS[i].name)) {
            *g = VARIANTS[i].g;
            snprintf(name, cap, "%s", VARIANTS[i].name);
            return 0;
        }
    return frt_error(FRT_ERR_UNSUPPORTED,
                     "%s: %s '%s' is not a Gemma variant frt knows (gemma_2b, gemma_2b_lora, gemma_300m, "
                     "gemma_300m_lora, dummy: openpi models/gemma.py)",
                     what, key, v);
}

/* The fields each frt_shapes object may hold (transformers' names). */
static const char *const SHAPE_VISION[] = {"hidden_size", "intermediate_size", "num_hidden_layers",
                                           "num_attention_heads", "image_size", "patch_size", "num_channels",
                                           "layer_norm_eps", "hidden_act", "vision_use_head", NULL};
static const char *const SHAPE_TEXT[] = {"hidden_size", "intermediate_size", "num_hidden_layers",
                                         "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
                                         "vocab_size", "hidden_activation", "hidden_act", "rope_theta", NULL};
static const char *const SHAPE_KEYS[] = {"vision_config", "text_config", "expert_config", NULL};

/* One frt_shapes object `key` (absent: nothing changes) checked against
 * keys; its prefixed name into wt. */
static int shapes_child(const json_t *s, const char *key, const char *const *keys, json_t **o, char *wt,
                        size_t cap, const char *what)
{
    FRT_TRY(frt_json_child(s, key, 0, JSON_OBJECT, o, what));
    snprintf(wt, cap, "%.480s: frt_shapes.%s", what, key);
    return *o ? only_keys(*o, keys, wt, "the") : 0;
}

/* frt's own extension of the openpi config (openpi never writes it):
 * "frt_shapes" {vision_config, text_config, expert_config}, each with
 * SiglipVisionConfig / GemmaConfig field names, overrides So400m's and the
 * variants' shapes field by field (small openpi-layout checkpoints for
 * tests; docs/policies.md). The expert's vocabulary is not a field. */
static int parse_shapes(const json_t *root, pi0_config *c, const char *what)
{
    json_t *s = NULL, *o = NULL;
    char wt[600];
    FRT_TRY(frt_json_child(root, "frt_shapes", 0, JSON_OBJECT, &s, what));
    if (!s) return 0;
    FRT_TRY(only_keys(s, SHAPE_KEYS, what, "frt_shapes"));
    FRT_TRY(shapes_child(s, "vision_config", SHAPE_VISION, &o, wt, sizeof wt, what));
    if (o) FRT_TRY(parse_vision(o, c, wt));
    FRT_TRY(shapes_child(s, "text_config", SHAPE_TEXT, &o, wt, sizeof wt, what));
    if (o) FRT_TRY(parse_gemma(o, &c->t, &c->vocab, wt));
    FRT_TRY(shapes_child(s, "expert_config", SHAPE_TEXT, &o, wt, sizeof wt, what));
    if (o && json_object_get(o, "vocab_size"))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: vocab_size (the expert has no vocabulary)", wt);
    if (o) FRT_TRY(parse_gemma(o, &c->e, NULL, wt));
    return 0;
}

/* The config.json keys that mark the openpi layout (frt_arch.layout_keys). */
static const char *const OPENPI_MARKS[] = {"paligemma_variant", "action_expert_variant", NULL};
static const char *const OPENPI_FIELDS[] = {"action_dim",  "action_horizon", "paligemma_variant",
                                            "action_expert_variant", "precision", "frt_shapes", NULL};

/* openpi's config: every field required; Pi0Config's vision tower and
 * flow-matching constants (set_defaults); the state as wide as the action. */
static int parse_openpi(const json_t *root, pi0_config *c, const char *what)
{
    long long ad = 0, ah = 0;
    FRT_TRY(only_keys(root, OPENPI_FIELDS, what, "openpi config"));
    FRT_TRY(parse_variant(root, "paligemma_variant", c->t_variant, sizeof c->t_variant, &c->t, what));
    FRT_TRY(parse_variant(root, "action_expert_variant", c->e_variant, sizeof c->e_variant, &c->e, what));
    FRT_TRY(frt_json_int(root, "action_dim", 1, 1, 4096, &ad, what));
    FRT_TRY(frt_json_int(root, "action_horizon", 1, 1, 4096, &ah, what));
    c->action_dim = c->state_dim = (int)ad;
    c->chunk = (int)ah;
    FRT_TRY(frt_json_string(root, "precision", 1, c->precision, sizeof c->precision, what));
    if (strcmp(c->precision, "float32") && strcmp(c->precision, "bfloat16"))
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: precision '%s' (float32 or bfloat16, what openpi's converter writes)",
                         what, c->precision);
    return parse_shapes(root, c, what);
}

static int parse_top(const json_t *root, pi0_config *c, const char *what)
{
    json_t *vlm = NULL, *dit = NULL;
    char wt[600];
    FRT_TRY(frt_json_child(root, "vlm_config", 0, JSON_OBJECT, &vlm, what));
    FRT_TRY(frt_json_child(root, "dit_config", 0, JSON_OBJECT, &dit, what));
    if (vlm) FRT_TRY(parse_vlm(vlm, c, what));
    if (dit) {
        c->e = GEMMA_DEFAULTS;
        snprintf(wt, sizeof wt, "%.480s: dit_config", what);
        FRT_TRY(parse_gemma(dit, &c->e, NULL, wt));
    }
    FRT_TRY(get_i(root, "chunk_size", &c->chunk, what));
    FRT_TRY(get_i(root, "max_action_dim", &c->action_dim, what));
    FRT_TRY(get_i(root, "max_state_dim", &c->state_dim, what));
    FRT_TRY(get_i(root, "num_inference_steps", &c->n_steps, what));
    FRT_TRY(get_f(root, "min_period", 1e-9, 1e9, &c->min_period, what));
    FRT_TRY(get_f(root, "max_period", 1e-9, 1e9, &c->max_period, what));
    return 0;
}

#define REFUSE(cond, ...) \
    do { \
        if (cond) return frt_error(FRT_ERR_UNSUPPORTED, __VA_ARGS__); \
    } while (0)

/* Sizes frt runs (the products of the forward pass stay far from int
 * overflow). */
static int check_sizes(const pi0_config *c, const char *what)
{
    const pi0_gemma_config *g[2] = {&c->t, &c->e};
    for (int i = 0; i < 2; i++)
        REFUSE(g[i]->width > 65536 || g[i]->inter > 262144 || g[i]->layers > 256 || g[i]->heads > 256 ||
                   g[i]->kv_heads > g[i]->heads,
               "%s: a Gemma stack of width %d, MLP %d, %d layers, %d/%d heads is outside what frt runs", what,
               g[i]->width, g[i]->inter, g[i]->layers, g[i]->heads, g[i]->kv_heads);
    REFUSE(c->v_width > 65536 || c->v_inter > 262144 || c->v_layers > 256 || c->v_heads > 256,
           "%s: a vision tower of width %d, MLP %d, %d layers, %d heads is outside what frt runs", what, c->v_width,
           c->v_inter, c->v_layers, c->v_heads);
    REFUSE(c->image_size > 4096 || c->patch > c->image_size, "%s: image_size %d, patch %d", what, c->image_size,
           c->patch);
    REFUSE(c->chunk > 4096 || c->action_dim > 4096 || c->state_dim > 4096 || c->vocab > (1 << 22),
           "%s: chunk %d, action_dim %d, state_dim %d or vocabulary %d too large", what, c->chunk, c->action_dim,
           c->state_dim, c->vocab);
    return 0;
}

static int check(const pi0_config *c, const char *what)
{
    FRT_TRY(check_sizes(c, what));
    REFUSE(c->e.layers != c->t.layers, "%s: the expert has %d layers, the prefix %d (they must match)", what,
           c->e.layers, c->t.layers);
    REFUSE(c->e.head_dim != c->t.head_dim || c->e.kv_heads != c->t.kv_heads,
           "%s: the expert's KV layout (%d x %d) differs from the prefix's (%d x %d)", what, c->e.kv_heads,
           c->e.head_dim, c->t.kv_heads, c->t.head_dim);
    REFUSE(c->t.heads % c->t.kv_heads || c->e.heads % c->e.kv_heads, "%s: heads not a multiple of KV heads", what);
    REFUSE(c->t.head_dim % 2 || c->t.head_dim > 1024, "%s: head_dim %d (even, at most 1024)", what, c->t.head_dim);
    REFUSE(c->v_width % c->v_heads, "%s: vision width %d not a multiple of %d heads", what, c->v_width, c->v_heads);
    REFUSE(c->image_size % c->patch, "%s: image_size %d not a multiple of patch %d", what, c->image_size, c->patch);
    REFUSE(c->e.width % 2, "%s: expert width %d is odd (the sincos time embedding needs it even)", what, c->e.width);
    REFUSE(c->n_steps < 1 || c->n_steps > 1000, "%s: num_inference_steps %d", what, c->n_steps);
    return 0;
}

/* 1 for openpi's layout: no model_type, one of OPENPI_MARKS. */
static int is_openpi(const json_t *root)
{
    if (json_object_get(root, "model_type")) return 0;
    for (int i = 0; OPENPI_MARKS[i]; i++)
        if (json_object_get(root, OPENPI_MARKS[i])) return 1;
    return 0;
}

/* The layout, then its fields; model_type for the transformers layout. */
static int parse_root(const json_t *root, pi0_config *c, char *model_type, size_t mt_size, const char *what)
{
    if (json_object_get(root, "quantization_config"))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "%s: quantization_config: quantized (FP8) policy checkpoints are not supported; load the "
                         "bf16 checkpoint (--dtype fp8 quantizes the prefix's MLP at load, docs/policies.md)",
                         what);
    if (is_openpi(root)) {
        c->layout = PI0_LAYOUT_OPENPI;
        return parse_openpi(root, c, what);
    }
    FRT_TRY(frt_json_string(root, "model_type", 1, model_type, mt_size, what));
    if (strcmp(model_type, "pi0") != 0 && strcmp(model_type, "pi05") != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "%s: model_type '%s' is not a policy (pi0, pi05)", what, model_type);
    return parse_top(root, c, what);
}

/* The prompt capacity (c->max_tokens: 0 or the caller's) once pi05 is known. */
static int finish(pi0_config *c, const char *what)
{
    c->max_tokens = c->max_tokens ? c->max_tokens : c->pi05 ? 200 : 48;
    REFUSE(c->max_tokens < 1 || c->max_tokens > 4096, "%s: %d prompt tokens (1 to 4096)", what, c->max_tokens);
    c->max_prefix = c->max_cameras * c->n_patch + c->max_tokens;
    return 0;
}

int pi0_config_parse_json(const char *text, size_t len, const char *what, int max_tokens, char *model_type,
                          size_t mt_size, pi0_config *c)
{
    json_t *root = NULL;
    memset(c, 0, sizeof *c);
    if (mt_size) model_type[0] = 0;
    FRT_TRY(frt_json_parse(text, len, 0, &root, what));
    set_defaults(c);
    int rc = json_is_object(root) ? parse_root(root, c, model_type, mt_size, what)
                                  : frt_error(FRT_ERR_FORMAT, "%s: not a JSON object", what);
    json_decref(root);
    FRT_TRY(rc);
    FRT_TRY(check(c, what));
    c->v_head_dim = c->v_width / c->v_heads;
    c->n_patch = (c->image_size / c->patch) * (c->image_size / c->patch);
    c->max_cameras = MAX_CAMERAS;
    c->max_tokens = max_tokens;
    REFUSE(c->n_patch > 4096, "%s: %d patches a camera (at most 4096)", what, c->n_patch);
    if (c->layout == PI0_LAYOUT_OPENPI) {
        c->pi05 = -1;
        return 0;
    }
    c->pi05 = !strcmp(model_type, "pi05");
    return finish(c, what);
}

/* openpi's precision against the tensors' dtypes (pi0.h). */
static int check_precision(const pi0_config *c, const frt_checkpoint *ck, const char *what)
{
    const int f32_only = !strcmp(c->precision, "float32");
    for (int i = 0; i < frt_checkpoint_count(ck); i++) {
        const frt_tensor *t = frt_checkpoint_at(ck, i);
        if (t->dtype == FRT_DT_F32 || (!f32_only && t->dtype == FRT_DT_BF16)) continue;
        return frt_error(FRT_ERR_FORMAT, "%s: precision '%s', but tensor '%s' is %s", what, c->precision, t->name,
                         frt_dtype_name(t->dtype));
    }
    return 0;
}

int pi0_config_from_checkpoint(pi0_config *c, const frt_checkpoint *ck, char *model_type, size_t mt_size,
                               const char *what)
{
    if (c->layout != PI0_LAYOUT_OPENPI) return 0;
    const int time = frt_checkpoint_find(ck, "time_mlp_in.weight") != NULL;
    const int state = frt_checkpoint_find(ck, "state_proj.weight") != NULL;
    if (time == state)
        return frt_error(FRT_ERR_FORMAT,
                         "%s: the checkpoint has %s time_mlp_in.weight (Pi0.5) and state_proj.weight (Pi0): not an "
                         "openpi Pi0 / Pi0.5",
                         what, time ? "both" : "neither");
    FRT_TRY(check_precision(c, ck, what));
    c->pi05 = time;
    snprintf(model_type, mt_size, "%s", time ? "pi05" : "pi0");
    return finish(c, what);
}

/* The openpi layout: Pi0 or Pi0.5 from MODEL_DIR's tensors. */
static int openpi_from_tensors(frt_model *m, const char *dir, const char *what)
{
    frt_checkpoint *ck = NULL;
    FRT_TRY(frt_checkpoint_open(dir, &ck));
    int rc = pi0_config_from_checkpoint(&pi0_of(m)->c, ck, m->cfg.model_type, sizeof m->cfg.model_type, what);
    frt_checkpoint_close(ck);
    return rc;
}

/* Reads the config and fills the shared fields of m->cfg. */
static int p_load_config(frt_model *m, const char *dir)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FRT_TRY(frt_file_read_all(path, 16u << 20, &text, &len));
    pi0 *p = calloc(1, sizeof *p);
    if (!p) {
        free(text);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory");
    }
    m->arch_data = p;
    pi0_config *c = &p->c;
    int rc = pi0_config_parse_json(text, len, path, m->params.max_seq, m->cfg.model_type,
                                   sizeof m->cfg.model_type, c);
    free(text);
    FRT_TRY(rc);
    if (c->layout == PI0_LAYOUT_OPENPI) FRT_TRY(openpi_from_tensors(m, dir, path));
    frt_model_config *mc = &m->cfg;
    mc->vocab_size = c->vocab;
    mc->hidden_size = c->t.width;
    mc->intermediate_size = c->t.inter;
    mc->n_layers = c->t.layers;
    mc->n_heads = c->t.heads;
    mc->n_kv_heads = c->t.kv_heads;
    mc->head_dim = c->t.head_dim;
    mc->rms_norm_eps = c->t.eps;
    mc->rope_theta = c->t.rope_theta;
    mc->bos_token_id = mc->eos_token_id = -1;
    snprintf(mc->rope_type, sizeof mc->rope_type, "default");
    return 0;
}

double pi0_gemma_layer_params(const pi0_gemma_config *g)
{
    double W = g->width, Q = (double)g->heads * g->head_dim, KV = (double)g->kv_heads * g->head_dim;
    return W * Q * 2 + W * KV * 2 + 3.0 * W * g->inter;
}

void pi0_flops(const pi0_config *c, int cameras, int tokens, double out[3])
{
    const double np = c->n_patch, D = c->v_width, K = 3.0 * c->patch * c->patch;
    const double vit = 4.0 * D * D + 2.0 * D * c->v_inter;
    out[0] = cameras * (2.0 * np * (K * D + c->v_layers * vit + D * c->t.width) + 4.0 * np * np * D * c->v_layers);
    const double n = (double)cameras * np + tokens;
    const double qd = (double)c->t.heads * c->t.head_dim;
    out[1] = 2.0 * n * c->t.layers * pi0_gemma_layer_params(&c->t) + 4.0 * n * n * qd * c->t.layers;
    const double E = c->e.width, ns = c->chunk + (c->pi05 ? 0 : 1), eq = (double)c->e.heads * c->e.head_dim;
    double heads = 2.0 * (c->chunk * (c->action_dim * E + E * c->action_dim));
    if (c->pi05)
        heads += 2.0 * (2.0 * E * E + (2.0 * c->e.layers + 1) * 3.0 * E * E);
    else
        heads += 2.0 * (c->state_dim * E + c->chunk * (2.0 * E * E + E * E));
    out[2] = c->n_steps * (2.0 * ns * c->e.layers * pi0_gemma_layer_params(&c->e) +
                           4.0 * ns * (n + ns) * eq * c->e.layers + heads);
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void pi0_episode_noise(float *out, int n, uint64_t seed, uint64_t step)
{
    uint64_t x = seed ^ (step * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < n; i += 2) {
        double u1 = ((double)(splitmix64(&x) >> 11) + 1.0) * 0x1p-53;
        double u2 = (double)(splitmix64(&x) >> 11) * 0x1p-53;
        double r = sqrt(-2.0 * log(u1)), a = 2.0 * M_PI * u2;
        out[i] = (float)(r * cos(a));
        if (i + 1 < n) out[i + 1] = (float)(r * sin(a));
    }
}

void pi0_time_sincos(float *out, int width, double t, double min_p, double max_p)
{
    const int half = width / 2;
    for (int i = 0; i < half; i++) {
        double frac = half > 1 ? (double)i / (half - 1) : 0.0;
        double a = 2.0 * M_PI / (min_p * pow(max_p / min_p, frac)) * t;
        out[i] = (float)sin(a);
        out[half + i] = (float)cos(a);
    }
}

static int p_check_config(const frt_model_config *c)
{
    (void)c;
    return 0;
}

/* The prefix's hyperparameters (the shared fields); the rest of the shapes
 * are in the fingerprint through the state table and the weights. */
static int p_describe(const frt_model_config *c, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s V=%d H=%d I=%d L=%d attn %d/%d/%d eps=%.9g theta=%.9g|", c->model_type,
                     c->vocab_size, c->hidden_size, c->intermediate_size, c->n_layers, c->n_heads, c->n_kv_heads,
                     c->head_dim, (double)c->rms_norm_eps, (double)c->rope_theta);
    return n < (int)size ? n : (int)size - 1;
}

static void p_fini(frt_model *m)
{
    pi0 *p = pi0_of(m);
    if (!p) return;
    for (int i = 0; i < 3; i++) {
        free(p->pre[i].k);
        free(p->pre[i].v);
    }
    free(p);
    m->arch_data = NULL;
}

static void decl(frt_state_decl *d, const char *name, frt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->dtype = dt;
    d->validity = FRT_STATE_WHOLE;
    d->ndim = ndim;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->shape[2] = d2;
}

/* Prepends a slot axis of `slots` rows to d's shape. */
static void lead(frt_state_decl *d, int slots)
{
    memmove(d->shape + 1, d->shape, 3 * sizeof d->shape[0]);
    d->shape[0] = slots;
    d->ndim++;
}

/* One prefix set's entries (2 L + 2 of them) named BASE.L.k / .v,
 * BASE.meta, BASE.mask; slots > 0: each with a leading axis of that many
 * slots (the batch). */
static void declare_prefix(const frt_model *m, const char *base, int slots, frt_state_decl *out)
{
    const pi0_config *c = &pi0_of(m)->c;
    const int L = c->t.layers;
    char name[FRT_STATE_NAME_MAX];
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "%s.%d.k", base, l);
        decl(&out[2 * l], name, m->bk->kv_dtype, 3, c->max_prefix, c->t.kv_heads, c->t.head_dim);
        snprintf(name, sizeof name, "%s.%d.v", base, l);
        decl(&out[2 * l + 1], name, m->bk->kv_dtype, 3, c->max_prefix, c->t.kv_heads, c->t.head_dim);
    }
    snprintf(name, sizeof name, "%s.meta", base);
    decl(&out[2 * L], name, FRT_DT_I32, 1, 4, 0, 0);
    snprintf(name, sizeof name, "%s.mask", base);
    decl(&out[2 * L + 1], name, FRT_DT_U8, 1, c->max_prefix, 0, 0);
    for (int i = 0; slots && i < 2 * L + 2; i++) lead(&out[i], slots);
}

/* The prefix sets in the state: 2, or 3 with batch slots. */
static int n_sets(const frt_model *m) { return m->params.policy_batch > 0 ? 3 : 2; }

/* prefix.* (the unconditioned prompt, the only one without CFG), then
 * prefix_cond.* (CFG's conditioned prompt), then batch.* (params.policy_batch
 * slots, when set). */
static int p_declare_state(const frt_model *m, frt_state_decl *out, int cap)
{
    const int L = pi0_of(m)->c.t.layers, per = 2 * L + 2;
    if (cap < n_sets(m) * per) return frt_error(FRT_ERR_UNSUPPORTED, "pi0: %d layers: the state table is full", L);
    declare_prefix(m, "prefix", 0, out);
    declare_prefix(m, "prefix_cond", 0, out + per);
    if (n_sets(m) == 3) declare_prefix(m, "batch", m->params.policy_batch, out + 2 * per);
    return n_sets(m) * per;
}

static int p_bind_state(frt_model *m)
{
    pi0 *p = pi0_of(m);
    const int L = p->c.t.layers, per = 2 * L + 2;
    for (int i = 0; i < n_sets(m); i++) {
        pi0_prefix_set *s = &p->pre[i];
        const frt_state_entry *e = m->state + i * per;
        s->k = calloc((size_t)L, sizeof *s->k);
        s->v = calloc((size_t)L, sizeof *s->v);
        if (!s->k || !s->v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory");
        for (int l = 0; l < L; l++) {
            s->k[l] = e[2 * l].buf;
            s->v[l] = e[2 * l + 1].buf;
        }
        s->meta = e[2 * L].buf;
        s->mask = e[2 * L + 1].buf;
    }
    return 0;
}

static void io(frt_io_decl *d, const char *name, frt_io_dir dir, frt_dtype dt, int ndim, int64_t d0, int64_t d1,
               int64_t d2, int64_t d3)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->dir = dir;
    d->dtype = dt;
    d->ndim = ndim;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->shape[3] = d3;
}

/* The batch_* ports of params.policy_batch = S slots (pi0.h). */
static int declare_batch_io(const frt_model *m, frt_io_decl *out)
{
    const pi0_config *c = &pi0_of(m)->c;
    const int S = m->params.policy_batch, T = c->max_tokens;
    const frt_io_dir I = FRT_IO_INPUT;
    io(&out[0], "batch_pixel_values", I, FRT_DT_F32, 4, S, c->max_cameras * 3, c->image_size, c->image_size);
    io(&out[1], "batch_pixel_attention_mask", I, FRT_DT_U8, 2, S, c->max_cameras, 0, 0);
    io(&out[2], "batch_input_ids", I, FRT_DT_I32, 2, S, T, 0, 0);
    io(&out[3], "batch_attention_mask", I, FRT_DT_U8, 2, S, T, 0, 0);
    io(&out[4], "batch_state", I, FRT_DT_F32, 2, S, c->state_dim, 0, 0);
    io(&out[5], "batch_noise", I, FRT_DT_F32, 3, S, c->chunk, c->action_dim, 0);
    io(&out[6], "batch_options", I, FRT_DT_I32, 2, S, 4, 0, 0);
    io(&out[7], "batch_input_ids_cond", I, FRT_DT_I32, 2, S, T, 0, 0);
    io(&out[8], "batch_attention_mask_cond", I, FRT_DT_U8, 2, S, T, 0, 0);
    io(&out[9], "batch_cfg", I, FRT_DT_I32, 2, S, 4, 0, 0);
    io(&out[10], "batch_actions", FRT_IO_OUTPUT, FRT_DT_F32, 3, S, c->chunk, c->action_dim, 0);
    return 11;
}

static int p_declare_io(const frt_model *m, frt_io_decl *out, int cap)
{
    const pi0_config *c = &pi0_of(m)->c;
    if (cap < 14 + (m->params.policy_batch > 0 ? 11 : 0))
        return frt_error(FRT_ERR_UNSUPPORTED, "pi0: the port table is full");
    const frt_io_dir I = FRT_IO_INPUT, O = FRT_IO_OUTPUT;
    io(&out[0], "pixel_values", I, FRT_DT_F32, 4, c->max_cameras, 3, c->image_size, c->image_size);
    io(&out[1], "pixel_attention_mask", I, FRT_DT_U8, 1, c->max_cameras, 0, 0, 0);
    io(&out[2], "input_ids", I, FRT_DT_I32, 1, c->max_tokens, 0, 0, 0);
    io(&out[3], "attention_mask", I, FRT_DT_U8, 1, c->max_tokens, 0, 0, 0);
    io(&out[4], "state", I, FRT_DT_F32, 1, c->state_dim, 0, 0, 0);
    io(&out[5], "noise", I, FRT_DT_F32, 2, c->chunk, c->action_dim, 0, 0);
    io(&out[6], "options", I, FRT_DT_I32, 1, 4, 0, 0, 0);
    io(&out[7], "actions", O, FRT_DT_F32, 2, c->chunk, c->action_dim, 0, 0);
    io(&out[8], "velocity0", O, FRT_DT_F32, 2, c->chunk, c->action_dim, 0, 0);
    io(&out[9], "vision_tokens", O, FRT_DT_F32, 3, c->max_cameras, c->n_patch, c->t.width, 0);
    io(&out[10], "input_ids_cond", I, FRT_DT_I32, 1, c->max_tokens, 0, 0, 0);
    io(&out[11], "attention_mask_cond", I, FRT_DT_U8, 1, c->max_tokens, 0, 0, 0);
    io(&out[12], "cfg", I, FRT_DT_I32, 1, 4, 0, 0, 0);
    io(&out[13], "velocity_slots", O, FRT_DT_F32, 3, 2, c->chunk, c->action_dim, 0);
    return m->params.policy_batch > 0 ? 14 + declare_batch_io(m, out + 14) : 14;
}

static void p_policy_info(const frt_model *m, frt_policy_info *info)
{
    const pi0_config *c = &pi0_of(m)->c;
    snprintf(info->model_type, sizeof info->model_type, "%s", m->cfg.model_type);
    info->max_cameras = c->max_cameras;
    info->image_channels = 3;
    info->image_height = info->image_width = c->image_size;
    info->max_tokens = c->max_tokens;
    info->vocab_size = c->vocab;
    info->max_state_dim = c->state_dim;
    info->state_in_prompt = c->pi05;
    info->chunk = c->chunk;
    info->action_dim = c->action_dim;
    info->n_steps = c->n_steps;
}

static void p_policy_cost(const frt_model *m, int cameras, int tokens, frt_policy_cost *out)
{
    const pi0_config *c = &pi0_of(m)->c;
    double f[3];
    pi0_flops(c, cameras, tokens, f);
    out->flops_vision = f[0];
    out->flops_prefix = f[1];
    out->flops_expert = f[2];
    out->expert_params = c->e.layers * pi0_gemma_layer_params(&c->e);
}

static void p_info(const frt_model *m, frt_model_info *info)
{
    info->n_full_layers = m->cfg.n_layers;
    info->n_linear_layers = 0;
}

static const char *const p_model_types[] = {"pi0", "pi05", NULL};

const frt_arch frt_arch_pi0 = {
    .name = "pi0",
    .model_types = p_model_types,
    .layout_keys = OPENPI_MARKS,
    .check_config = p_check_config,
    .describe = p_describe,
    .declare_state = p_declare_state,
    .bind_state = p_bind_state,
    .fini = p_fini,
    .info = p_info,
    .cpu = &frt_pi0_cpu_backend,
#if FRT_HAVE_CUDA
    .cuda = &frt_pi0_cuda_backend,
#else
    .cuda = NULL, /* built without CUDA: frt_model_load says "architecture 'pi0' has no cuda backend" */
#endif
    .kind = FRT_ARCH_POLICY,
    .load_config = p_load_config,
    .declare_io = p_declare_io,
    .policy_info = p_policy_info,
    .policy_cost = p_policy_cost,
};
