/*
 * gen_policy.c - random-weight Pi0 / Pi0.5 checkpoints at the real shapes
 * (gen_model.h, "policies"): PI0Config's defaults (transformers 5.x
 * configuration_pi0.py; openpi pi0_config.py gemma_2b + gemma_300m), in the
 * transformers pi0 layout that src/model/arch/pi0/ reads.
 */
#include "gen_model.h"

#include "frt/fs.h"
#include "model/arch/pi0/pi0.h"
#include "util/error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The real shapes (both policies share them). */
static const frt_gen_policy_dims REAL = {
    .v_width = 1152, .v_inter = 4304, .v_layers = 27, .v_heads = 16, .image_size = 224, .patch = 14,
    .t_width = 2048, .t_inter = 16384, .layers = 18, .heads = 8, .kv_heads = 1, .head_dim = 256, .vocab = 257152,
    .e_width = 1024, .e_inter = 4096, .chunk = 50, .action_dim = 32, .state_dim = 32, .steps = 10,
};

/* Small policies with the real camera input (224 x 224, patch 14: 256
 * tokens a camera) and a 1024-id vocabulary, for trying the command line
 * without 6.5 GB of weights (tests/sh/policy_run_image.sh). */
static const frt_gen_policy_dims TINY = {
    .v_width = 32, .v_inter = 64, .v_layers = 2, .v_heads = 2, .image_size = 224, .patch = 14,
    .t_width = 64, .t_inter = 128, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 32, .vocab = 1024,
    .e_width = 32, .e_inter = 64, .chunk = 10, .action_dim = 8, .state_dim = 8, .steps = 10,
};

static const struct {
    const char *name;
    const frt_gen_policy_dims *dims;
    int pi05;
} POLICY_SHAPES[] = {{"pi0", &REAL, 0}, {"pi05", &REAL, 1}, {"pi0-tiny", &TINY, 0}, {"pi05-tiny", &TINY, 1}};

static int shape_index(const char *shape)
{
    for (int i = 0; shape && i < (int)(sizeof POLICY_SHAPES / sizeof POLICY_SHAPES[0]); i++)
        if (!strcmp(shape, POLICY_SHAPES[i].name)) return i;
    return -1;
}

int frt_gen_policy_is_shape(const char *shape) { return shape_index(shape) >= 0; }

static int find(const char *shape, int *pi05, const frt_gen_policy_dims **dims)
{
    int i = shape_index(shape);
    if (i < 0)
        return frt_error(FRT_ERR_NOT_FOUND, "gen-model: '%s' is not a policy shape (pi0, pi05, pi0-tiny, pi05-tiny)",
                         shape ? shape : "");
    *pi05 = POLICY_SHAPES[i].pi05;
    *dims = POLICY_SHAPES[i].dims;
    return 0;
}

typedef struct specs {
    frt_weight_spec *w;
    int n, cap, oom;
} specs;

static void add(specs *s, frt_init_kind init, float a, float b, int ndim, int64_t d0, int64_t d1, int64_t d2,
                int64_t d3, const char *fmt, ...) __attribute__((format(printf, 10, 11)));
static void add(specs *s, frt_init_kind init, float a, float b, int ndim, int64_t d0, int64_t d1, int64_t d2,
                int64_t d3, const char *fmt, ...)
{
    if (s->oom) return;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 512;
        frt_weight_spec *w = realloc(s->w, (size_t)cap * sizeof *w);
        if (!w) {
            s->oom = 1;
            return;
        }
        s->w = w;
        s->cap = cap;
    }
    frt_weight_spec *w = &s->w[s->n++];
    memset(w, 0, sizeof *w);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->name, sizeof w->name, fmt, ap);
    va_end(ap);
    w->dtype = FRT_DT_BF16;
    w->ndim = ndim;
    w->shape[0] = d0, w->shape[1] = d1, w->shape[2] = d2, w->shape[3] = d3;
    w->init = init;
    w->a = a;
    w->b = b;
}

#define MAT(s, o, i, ...) add((s), FRT_INIT_NORMAL, 0.0f, 0.02f, 2, (o), (i), 0, 0, __VA_ARGS__)
#define VEC(s, n, a, b, ...) add((s), FRT_INIT_NORMAL, (a), (b), 1, (n), 0, 0, 0, __VA_ARGS__)

/* Linear with bias. */
static void linear(specs *s, int64_t o, int64_t i, const char *p)
{
    MAT(s, o, i, "%s.weight", p);
    VEC(s, o, 0.0f, 0.02f, "%s.bias", p);
}

static void vision(specs *s, const frt_gen_policy_dims *d)
{
    const int64_t V_W = d->v_width, V_I = d->v_inter, PATCH = d->patch, IMG = d->image_size, T_W = d->t_width;
    const char *v = PI0_VISION;
    char p[200];
    add(s, FRT_INIT_NORMAL, 0.0f, 0.02f, 4, V_W, 3, PATCH, PATCH, "%sembeddings.patch_embedding.weight", v);
    VEC(s, V_W, 0.0f, 0.02f, "%sembeddings.patch_embedding.bias", v);
    MAT(s, (IMG / PATCH) * (IMG / PATCH), V_W, "%sembeddings.position_embedding.weight", v);
    for (int l = 0; l < d->v_layers; l++) {
        for (int k = 1; k <= 2; k++) {
            VEC(s, V_W, 1.0f, 0.1f, "%sencoder.layers.%d.layer_norm%d.weight", v, l, k);
            VEC(s, V_W, 0.0f, 0.02f, "%sencoder.layers.%d.layer_norm%d.bias", v, l, k);
        }
        static const char *const proj[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
        for (int k = 0; k < 4; k++) {
            snprintf(p, sizeof p, "%sencoder.layers.%d.self_attn.%s", v, l, proj[k]);
            linear(s, V_W, V_W, p);
        }
        snprintf(p, sizeof p, "%sencoder.layers.%d.mlp.fc1", v, l);
        linear(s, V_I, V_W, p);
        snprintf(p, sizeof p, "%sencoder.layers.%d.mlp.fc2", v, l);
        linear(s, V_W, V_I, p);
    }
    VEC(s, V_W, 1.0f, 0.1f, "%spost_layernorm.weight", v);
    VEC(s, V_W, 0.0f, 0.02f, "%spost_layernorm.bias", v);
    linear(s, T_W, V_W, PI0_PROJECTOR);
}

/* A Gemma RMSNorm (x * (1 + w)) or an adaRMSNorm's dense layer. */
static void norm(specs *s, int ada, int64_t w, const char *p)
{
    if (!ada) {
        VEC(s, w, 0.0f, 0.1f, "%s.weight", p);
        return;
    }
    MAT(s, 3 * w, w, "%s.dense.weight", p);
    VEC(s, 3 * w, 0.0f, 0.02f, "%s.dense.bias", p);
}

static void gemma(specs *s, const frt_gen_policy_dims *d, const char *prefix, int64_t W, int64_t I, int ada)
{
    const int64_t HEADS = d->heads, KV = d->kv_heads, HD = d->head_dim;
    char p[200];
    for (int l = 0; l < d->layers; l++) {
        snprintf(p, sizeof p, "%slayers.%d.input_layernorm", prefix, l);
        norm(s, ada, W, p);
        snprintf(p, sizeof p, "%slayers.%d.post_attention_layernorm", prefix, l);
        norm(s, ada, W, p);
        MAT(s, HEADS * HD, W, "%slayers.%d.self_attn.q_proj.weight", prefix, l);
        MAT(s, KV * HD, W, "%slayers.%d.self_attn.k_proj.weight", prefix, l);
        MAT(s, KV * HD, W, "%slayers.%d.self_attn.v_proj.weight", prefix, l);
        MAT(s, W, HEADS * HD, "%slayers.%d.self_attn.o_proj.weight", prefix, l);
        MAT(s, I, W, "%slayers.%d.mlp.gate_proj.weight", prefix, l);
        MAT(s, I, W, "%slayers.%d.mlp.up_proj.weight", prefix, l);
        MAT(s, W, I, "%slayers.%d.mlp.down_proj.weight", prefix, l);
    }
    snprintf(p, sizeof p, "%snorm", prefix);
    norm(s, ada, W, p);
}

int frt_gen_policy_specs_dims(const frt_gen_policy_dims *d, int pi05, frt_weight_spec **out, int *n)
{
    if (!d || !out || !n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL argument");
    const int64_t E_W = d->e_width, ACT = d->action_dim;
    specs s = {0};
    vision(&s, d);
    MAT(&s, d->vocab, d->t_width, "%sembed_tokens.weight", PI0_PREFIX);
    gemma(&s, d, PI0_PREFIX, d->t_width, d->t_inter, 0);
    gemma(&s, d, PI0_EXPERT, E_W, d->e_inter, pi05);
    linear(&s, E_W, ACT, "action_in_proj");
    linear(&s, ACT, E_W, "action_out_proj");
    if (pi05) {
        linear(&s, E_W, E_W, "time_mlp_in");
        linear(&s, E_W, E_W, "time_mlp_out");
    } else {
        linear(&s, E_W, d->state_dim, "state_proj");
        linear(&s, E_W, 2 * E_W, "action_time_mlp_in");
        linear(&s, E_W, E_W, "action_time_mlp_out");
    }
    if (s.oom) {
        free(s.w);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "gen-model: out of memory");
    }
    *out = s.w;
    *n = s.n;
    return 0;
}

int frt_gen_policy_specs(const char *shape, frt_weight_spec **out, int *n)
{
    int pi05 = 0;
    const frt_gen_policy_dims *d = NULL;
    FRT_TRY(find(shape, &pi05, &d));
    return frt_gen_policy_specs_dims(d, pi05, out, n);
}

static json_t *gemma_json(const frt_gen_policy_dims *d, int w, int inter)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f}", "model_type", "gemma", "hidden_size", w,
                     "intermediate_size", inter, "num_hidden_layers", d->layers, "num_attention_heads", d->heads,
                     "num_key_value_heads", d->kv_heads, "head_dim", d->head_dim, "vocab_size", d->vocab,
                     "hidden_activation", "gelu_pytorch_tanh", "rms_norm_eps", 1e-6);
}

int frt_gen_policy_write_config_dims(const frt_gen_policy_dims *d, int pi05, const char *dir)
{
    if (!d || !dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL argument");
    json_t *vision = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:s, s:f}", "model_type",
                               "siglip_vision_model", "hidden_size", d->v_width, "intermediate_size", d->v_inter,
                               "num_hidden_layers", d->v_layers, "num_attention_heads", d->v_heads, "patch_size",
                               d->patch, "image_size", d->image_size, "vision_use_head", 0, "hidden_act",
                               "gelu_pytorch_tanh", "layer_norm_eps", 1e-6);
    json_t *vlm = json_pack("{s:s, s:o, s:o, s:i, s:i}", "model_type", "paligemma", "text_config",
                            gemma_json(d, d->t_width, d->t_inter), "vision_config", vision, "projection_dim",
                            d->t_width, "image_token_id", d->vocab);
    json_t *root = json_pack("{s:s, s:[s], s:o, s:o, s:i, s:i, s:i, s:i, s:f, s:f, s:s}", "model_type",
                             pi05 ? "pi05" : "pi0", "architectures",
                             pi05 ? "PI05ForConditionalGeneration" : "PI0ForConditionalGeneration", "vlm_config", vlm,
                             "dit_config", gemma_json(d, d->e_width, d->e_inter), "chunk_size", d->chunk,
                             "max_state_dim", d->state_dim, "max_action_dim", d->action_dim, "num_inference_steps",
                             d->steps, "min_period", 4e-3, "max_period", 4.0, "dtype", "bfloat16");
    char *text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    json_decref(root);
    if (!text) return frt_error(FRT_ERR_OUT_OF_MEMORY, "gen-model: out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = frt_file_write_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

int frt_gen_policy_write_config(const char *shape, const char *dir)
{
    int pi05 = 0;
    const frt_gen_policy_dims *d = NULL;
    FRT_TRY(find(shape, &pi05, &d));
    return frt_gen_policy_write_config_dims(d, pi05, dir);
}
