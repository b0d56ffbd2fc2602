/*
 * gen_model.c - random-weight Qwen3.5 checkpoints at the published shapes
 * (gen_model.h). The shape table renders config.json text and the config
 * comes from parsing that text, so what frt_gen_model_config returns is by
 * construction what a reader of the written directory sees.
 */
#include "gen_model.h"

#include "frt/status.h"
#include "frt/fs.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>

/* ---- shapes ------------------------------------------------------------- */

typedef struct gen_shape {
    const char *name;
    int vocab, hidden, inter, layers, heads, kv_heads, head_dim;
    int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv;
    double theta, prf;
    int max_pos, tie;
    const char *pattern; /* "LFLLF" (L linear, F full); NULL = every 4th full (full_attention_interval 4) */
    int eos_cfg;         /* config.json eos_token_id; -1 = vocab - 1 */
    int eos_gen[2], n_eos_gen; /* generation_config.json; n 0 = [vocab - 1] */
    /* Dense shapes (the dense architecture, src/model/arch/dense/): model_type
     * "llama" / "qwen2" / "qwen3"; NULL = the hybrid "qwen3_5_text". */
    const char *type;
    double eps;             /* rms_norm_eps; 0 = 1e-6 */
    double rope_factor;     /* > 0: rope_scaling llama3 (factor, low 1, high 4, original rope_orig) */
    int rope_orig;
    int bos;                /* config.json bos_token_id (dense); 0 = none */
} gen_shape;

/* Sources: docs/checkpoints.md (HF config.json / model cards of Qwen/Qwen3.5-*). */
static const gen_shape shapes[] = {
    {"qwen3.5-0.8b", 248320, 1024, 3584, 24, 8, 2, 256, 16, 16, 128, 128, 4, 1e7, 0.25, 262144, 1, NULL, 248044,
     {248046, 248044}, 2, NULL, 0, 0, 0, 0},
    {"qwen3.5-2b", 248320, 2048, 6144, 24, 8, 2, 256, 16, 16, 128, 128, 4, 1e7, 0.25, 262144, 1, NULL, 248044,
     {248046, 248044}, 2, NULL, 0, 0, 0, 0},
    {"qwen3.5-4b", 248320, 2560, 9216, 32, 16, 4, 256, 16, 32, 128, 128, 4, 1e7, 0.25, 262144, 1, NULL, 248044,
     {248046, 248044}, 2, NULL, 0, 0, 0, 0},
    {"qwen3.5-9b", 248320, 4096, 12288, 32, 16, 4, 256, 16, 32, 128, 128, 4, 1e7, 0.25, 262144, 0, NULL, 248044,
     {248046, 248044}, 2, NULL, 0, 0, 0, 0},
    {"qwen3.5-27b", 248320, 5120, 17408, 64, 24, 4, 256, 16, 48, 128, 128, 4, 1e7, 0.25, 262144, 0, NULL, 248044,
     {248046, 248044}, 2, NULL, 0, 0, 0, 0},
    {"tiny", 2048, 128, 384, 5, 4, 2, 32, 2, 4, 32, 48, 4, 1e7, 0.25, 4096, 0, "LFLLF", -1, {0, 0}, 0, NULL, 0, 0, 0, 0},
    /* Dense: the published config.json of meta-llama/Llama-3.2-1B-Instruct, Llama-3.2-3B-Instruct,
     * Llama-3.1-8B-Instruct, Qwen/Qwen2.5-7B-Instruct, Qwen/Qwen3-8B (docs/checkpoints.md). */
    {"llama3.2-1b", 128256, 2048, 8192, 16, 32, 8, 64, 0, 0, 0, 0, 0, 500000.0, 1.0, 131072, 1, NULL, 128009,
     {128001, 128009}, 2, "llama", 1e-5, 32.0, 8192, 128000},
    {"llama3.2-3b", 128256, 3072, 8192, 28, 24, 8, 128, 0, 0, 0, 0, 0, 500000.0, 1.0, 131072, 1, NULL, 128009,
     {128001, 128009}, 2, "llama", 1e-5, 32.0, 8192, 128000},
    {"llama3.1-8b", 128256, 4096, 14336, 32, 32, 8, 128, 0, 0, 0, 0, 0, 500000.0, 1.0, 131072, 0, NULL, 128009,
     {128001, 128009}, 2, "llama", 1e-5, 8.0, 8192, 128000},
    {"qwen2.5-7b", 152064, 3584, 18944, 28, 28, 4, 128, 0, 0, 0, 0, 0, 1e6, 1.0, 32768, 0, NULL, 151645,
     {151645, 151643}, 2, "qwen2", 1e-6, 0, 0, 151643},
    {"qwen3-8b", 151936, 4096, 12288, 36, 32, 8, 128, 0, 0, 0, 0, 0, 1e6, 1.0, 40960, 0, NULL, 151645,
     {151645, 151643}, 2, "qwen3", 1e-6, 0, 0, 151643},
    /* A small dense llama with llama3 scaling that matters (original context 64) for tests. */
    {"tiny-dense", 2048, 128, 384, 4, 4, 2, 32, 0, 0, 0, 0, 0, 10000.0, 1.0, 4096, 0, NULL, -1, {0, 0}, 0,
     "llama", 1e-5, 8.0, 64, 0},
    /* A small dense llama with llama3.1-8b's head layout (head_dim 128, 4 query heads a KV head), the
     * shape the append's attention runs on wgmma for (the one-call restore + append, docs/model.md). */
    {"tiny-dense-128", 2048, 256, 384, 2, 8, 2, 128, 0, 0, 0, 0, 0, 10000.0, 1.0, 4096, 0, NULL, -1, {0, 0}, 0,
     "llama", 1e-5, 0, 0, 0},
    /* A small qwen3 with Qwen3's vocabulary and special ids (qwen3-8b's), so the real Qwen3 tokenizer
     * and chat template run on it (the agent loop test, tests/sh/serve_agent.sh). */
    {"tiny-qwen3", 151936, 64, 128, 2, 2, 1, 32, 0, 0, 0, 0, 0, 1e6, 1.0, 40960, 1, NULL, 151645,
     {151645, 151643}, 2, "qwen3", 1e-6, 0, 0, 151643},
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

static const char *const shape_names[] = {"qwen3.5-0.8b", "qwen3.5-2b",  "qwen3.5-4b",  "qwen3.5-9b",
                                          "qwen3.5-27b",  "tiny",        "llama3.2-1b", "llama3.2-3b",
                                          "llama3.1-8b",  "qwen2.5-7b",  "qwen3-8b",    "tiny-dense",
                                          "tiny-dense-128", "tiny-qwen3", NULL};

const char *const *frt_gen_model_shapes(void) { return shape_names; }

static int find_shape(const char *name, const gen_shape **out)
{
    if (!name) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL shape");
    for (int i = 0; i < N_SHAPES; i++)
        if (!strcmp(shapes[i].name, name)) {
            *out = &shapes[i];
            return 0;
        }
    return frt_error(FRT_ERR_NOT_FOUND,
                     "gen-model: unknown shape '%s' (shapes: qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-9b, "
                     "qwen3.5-27b, tiny, llama3.2-1b, llama3.2-3b, llama3.1-8b, qwen2.5-7b, qwen3-8b, tiny-dense, "
                     "tiny-dense-128, tiny-qwen3; policies: pi0, pi05)",
                     name);
}

static int set(json_t *o, const char *k, json_t *v) { return v ? json_object_set_new(o, k, v) : -1; }

/* Appends '\n' to a malloc'd string (files end with a newline). */
static char *with_newline(char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    char *p = realloc(s, n + 2);
    if (!p) {
        free(s);
        return NULL;
    }
    p[n] = '\n';
    p[n + 1] = '\0';
    return p;
}

/* config.json of a dense shape, with the fields of the published files that
 * matter (Llama 3.x keep the legacy rope_scaling + top-level rope_theta). */
static char *render_dense_config(const gen_shape *s)
{
    static const struct { const char *type, *arch; } archs[] = {
        {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};
    const char *arch_name = "LlamaForCausalLM";
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i].type, s->type)) arch_name = archs[i].arch;
    json_t *o = json_object(), *arch = json_array();
    int bad = !o || !arch;
    bad |= json_array_append_new(arch, json_string(arch_name));
    bad |= set(o, "architectures", arch);
    bad |= set(o, "model_type", json_string(s->type));
    bad |= set(o, "vocab_size", json_integer(s->vocab));
    bad |= set(o, "hidden_size", json_integer(s->hidden));
    bad |= set(o, "intermediate_size", json_integer(s->inter));
    bad |= set(o, "num_hidden_layers", json_integer(s->layers));
    bad |= set(o, "num_attention_heads", json_integer(s->heads));
    bad |= set(o, "num_key_value_heads", json_integer(s->kv_heads));
    bad |= set(o, "head_dim", json_integer(s->head_dim));
    bad |= set(o, "hidden_act", json_string("silu"));
    bad |= set(o, "rms_norm_eps", json_real(s->eps > 0 ? s->eps : 1e-6));
    bad |= set(o, "max_position_embeddings", json_integer(s->max_pos));
    bad |= set(o, "tie_word_embeddings", json_boolean(s->tie));
    bad |= set(o, "attention_bias", json_false());
    bad |= set(o, "rope_theta", json_real(s->theta));
    if (s->rope_factor > 0) {
        json_t *rs = json_object();
        bad |= !rs;
        bad |= set(rs, "factor", json_real(s->rope_factor));
        bad |= set(rs, "low_freq_factor", json_real(1.0));
        bad |= set(rs, "high_freq_factor", json_real(4.0));
        bad |= set(rs, "original_max_position_embeddings", json_integer(s->rope_orig));
        bad |= set(rs, "rope_type", json_string("llama3"));
        bad |= set(o, "rope_scaling", rs);
    }
    if (strcmp(s->type, "llama") != 0) bad |= set(o, "use_sliding_window", json_false());
    if (s->bos > 0) bad |= set(o, "bos_token_id", json_integer(s->bos));
    bad |= set(o, "eos_token_id", json_integer(s->eos_cfg >= 0 ? s->eos_cfg : s->vocab - 1));
    bad |= set(o, "use_cache", json_true());
    bad |= set(o, "dtype", json_string("bfloat16"));
    char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    return with_newline(text);
}

/* config.json of a shape, as transformers' Qwen3_5TextConfig.save_pretrained
 * would write the fields that matter. */
static char *render_config(const gen_shape *s)
{
    if (s->type) return render_dense_config(s);
    json_t *o = json_object(), *arch = json_array(), *lt = json_array(), *rp = json_object();
    int bad = !o || !arch || !lt || !rp;
    bad |= json_array_append_new(arch, json_string("Qwen3_5ForCausalLM"));
    bad |= set(o, "architectures", arch);
    bad |= set(o, "model_type", json_string("qwen3_5_text"));
    bad |= set(o, "vocab_size", json_integer(s->vocab));
    bad |= set(o, "hidden_size", json_integer(s->hidden));
    bad |= set(o, "intermediate_size", json_integer(s->inter));
    bad |= set(o, "num_hidden_layers", json_integer(s->layers));
    bad |= set(o, "num_attention_heads", json_integer(s->heads));
    bad |= set(o, "num_key_value_heads", json_integer(s->kv_heads));
    bad |= set(o, "head_dim", json_integer(s->head_dim));
    bad |= set(o, "hidden_act", json_string("silu"));
    bad |= set(o, "rms_norm_eps", json_real(1e-6));
    bad |= set(o, "max_position_embeddings", json_integer(s->max_pos));
    bad |= set(o, "tie_word_embeddings", json_boolean(s->tie));
    bad |= set(o, "attention_bias", json_false());
    bad |= set(o, "attention_dropout", json_real(0.0));
    bad |= set(o, "attn_output_gate", json_true());
    bad |= set(o, "linear_conv_kernel_dim", json_integer(s->conv));
    bad |= set(o, "linear_key_head_dim", json_integer(s->lin_k_dim));
    bad |= set(o, "linear_value_head_dim", json_integer(s->lin_v_dim));
    bad |= set(o, "linear_num_key_heads", json_integer(s->lin_k_heads));
    bad |= set(o, "linear_num_value_heads", json_integer(s->lin_v_heads));
    for (int i = 0; i < s->layers; i++) {
        int full = s->pattern ? s->pattern[i] == 'F' : (i + 1) % 4 == 0;
        bad |= json_array_append_new(lt, json_string(full ? "full_attention" : "linear_attention"));
    }
    bad |= set(o, "layer_types", lt);
    if (!s->pattern) bad |= set(o, "full_attention_interval", json_integer(4));
    bad |= set(rp, "rope_type", json_string("default"));
    bad |= set(rp, "rope_theta", json_real(s->theta));
    bad |= set(rp, "partial_rotary_factor", json_real(s->prf));
    if ((int)(s->head_dim * s->prf) == 64) { /* the published M-RoPE split of 32 rotary pairs */
        json_t *ms = json_pack("[i, i, i]", 11, 11, 10);
        bad |= set(rp, "mrope_section", ms);
        bad |= set(rp, "mrope_interleaved", json_true());
    }
    bad |= set(o, "rope_parameters", rp);
    bad |= set(o, "initializer_range", json_real(0.02));
    bad |= set(o, "use_cache", json_true());
    bad |= set(o, "eos_token_id", json_integer(s->eos_cfg >= 0 ? s->eos_cfg : s->vocab - 1));
    bad |= set(o, "dtype", json_string("bfloat16"));
    char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    return with_newline(text);
}

static char *render_generation_config(const gen_shape *s)
{
    json_t *o = json_object(), *eos = json_array();
    int bad = !o || !eos;
    if (s->n_eos_gen)
        for (int i = 0; i < s->n_eos_gen; i++) bad |= json_array_append_new(eos, json_integer(s->eos_gen[i]));
    else
        bad |= json_array_append_new(eos, json_integer(s->vocab - 1));
    bad |= set(o, "eos_token_id", eos);
    bad |= set(o, "do_sample", json_true());
    bad |= set(o, "temperature", json_real(0.7));
    bad |= set(o, "top_p", json_real(0.8));
    bad |= set(o, "top_k", json_integer(20));
    char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    return with_newline(text);
}

int frt_gen_model_config(const char *shape, frt_model_config *out)
{
    const gen_shape *s = NULL;
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL argument");
    FRT_TRY(find_shape(shape, &s));
    char *text = render_config(s);
    if (!text) return frt_error(FRT_ERR_OUT_OF_MEMORY, "gen-model: cannot render config.json");
    char what[96];
    snprintf(what, sizeof what, "gen-model %s config.json", s->name);
    int rc = frt_config_parse_json(text, strlen(text), what, out);
    free(text);
    return rc;
}

int frt_gen_model_write_configs(const char *shape, const char *dir)
{
    const gen_shape *s = NULL;
    if (!dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL argument");
    FRT_TRY(find_shape(shape, &s));
    char *cfg = render_config(s), *gen = render_generation_config(s);
    int rc = 0;
    if (!cfg || !gen) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "gen-model: cannot render the configs");
    char path[PATH_MAX];
    if (rc == 0 && snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: path too long: %s", dir);
    if (rc == 0) rc = frt_file_write_atomic(path, cfg, strlen(cfg));
    if (rc == 0 && snprintf(path, sizeof path, "%s/generation_config.json", dir) >= (int)sizeof path)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: path too long: %s", dir);
    if (rc == 0) rc = frt_file_write_atomic(path, gen, strlen(gen));
    free(cfg);
    free(gen);
    return rc;
}

/* ---- weight list -------------------------------------------------------- */

typedef struct spec_list {
    frt_weight_spec *v;
    int n, cap;
    int oom;
} spec_list;

static void push(spec_list *l, const char *prefix, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                 frt_init_kind init, float a, float b)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 128;
        frt_weight_spec *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            l->oom = 1;
            return;
        }
        l->v = nv;
        l->cap = nc;
    }
    frt_weight_spec *w = &l->v[l->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s%s", prefix, name);
    w->dtype = FRT_DT_BF16;
    w->ndim = ndim;
    w->shape[0] = d0;
    w->shape[1] = d1;
    w->shape[2] = d2;
    w->init = init;
    w->a = a;
    w->b = b;
}

int frt_model_weight_specs(const frt_model_config *c, frt_weight_spec **out, int *n)
{
    if (!c || !out || !n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "weight specs: NULL argument");
    spec_list l = {0};
    const char *P = c->weight_prefix;
    int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, hd = c->head_dim;
    const float STD = 0.02f;
    /* Norm weights: zero-centred around 0 when the norm adds 1, else around 1. */
    float norm_mean = c->norm_unit_offset ? 0.0f : 1.0f;
    push(&l, P, "embed_tokens.weight", 2, V, H, 0, FRT_INIT_NORMAL, 0, STD);
    for (int i = 0; i < c->n_layers; i++) {
        char pre[96];
        snprintf(pre, sizeof pre, "%slayers.%d.", P, i);
        push(&l, pre, "input_layernorm.weight", 1, H, 0, 0, FRT_INIT_NORMAL, norm_mean, 0.1f);
        if (c->layer_types[i] == FRT_LAYER_LINEAR_ATTENTION) {
            int64_t nk = c->lin_n_k_heads, nv = c->lin_n_v_heads, dk = c->lin_k_head_dim, dv = c->lin_v_head_dim;
            int64_t conv_dim = 2 * nk * dk + nv * dv, K = c->lin_conv_kernel;
            float cb = 1.0f / sqrtf((float)K);
            push(&l, pre, "linear_attn.in_proj_qkv.weight", 2, conv_dim, H, 0, FRT_INIT_NORMAL, 0, STD);
            push(&l, pre, "linear_attn.in_proj_z.weight", 2, nv * dv, H, 0, FRT_INIT_NORMAL, 0, STD);
            push(&l, pre, "linear_attn.in_proj_b.weight", 2, nv, H, 0, FRT_INIT_NORMAL, 0, STD);
            push(&l, pre, "linear_attn.in_proj_a.weight", 2, nv, H, 0, FRT_INIT_NORMAL, 0, STD);
            push(&l, pre, "linear_attn.conv1d.weight", 3, conv_dim, 1, K, FRT_INIT_UNIFORM, -cb, cb);
            push(&l, pre, "linear_attn.dt_bias", 1, nv, 0, 0, FRT_INIT_DT_BIAS, 1e-3f, 1e-1f);
            push(&l, pre, "linear_attn.A_log", 1, nv, 0, 0, FRT_INIT_LOG_UNIFORM, 1.0f, 16.0f);
            push(&l, pre, "linear_attn.norm.weight", 1, dv, 0, 0, FRT_INIT_NORMAL, 1.0f, 0.1f);
            push(&l, pre, "linear_attn.out_proj.weight", 2, H, nv * dv, 0, FRT_INIT_NORMAL, 0, STD);
        } else {
            int64_t nh = c->n_heads, nkv = c->n_kv_heads;
            int64_t qrows = nh * hd * (c->attn_output_gate ? 2 : 1);
            push(&l, pre, "self_attn.q_proj.weight", 2, qrows, H, 0, FRT_INIT_NORMAL, 0, STD);
            push(&l, pre, "self_attn.k_proj.weight", 2, nkv * hd, H, 0, FRT_INIT_NORMAL, 0, STD);
            push(&l, pre, "self_attn.v_proj.weight", 2, nkv * hd, H, 0, FRT_INIT_NORMAL, 0, STD);
            if (c->attention_bias) {
                push(&l, pre, "self_attn.q_proj.bias", 1, qrows, 0, 0, FRT_INIT_NORMAL, 0, STD);
                push(&l, pre, "self_attn.k_proj.bias", 1, nkv * hd, 0, 0, FRT_INIT_NORMAL, 0, STD);
                push(&l, pre, "self_attn.v_proj.bias", 1, nkv * hd, 0, 0, FRT_INIT_NORMAL, 0, STD);
            }
            push(&l, pre, "self_attn.o_proj.weight", 2, H, nh * hd, 0, FRT_INIT_NORMAL, 0, STD);
            if (c->o_proj_bias) push(&l, pre, "self_attn.o_proj.bias", 1, H, 0, 0, FRT_INIT_NORMAL, 0, STD);
            if (c->qk_norm) {
                push(&l, pre, "self_attn.q_norm.weight", 1, hd, 0, 0, FRT_INIT_NORMAL, norm_mean, 0.1f);
                push(&l, pre, "self_attn.k_norm.weight", 1, hd, 0, 0, FRT_INIT_NORMAL, norm_mean, 0.1f);
            }
        }
        push(&l, pre, "post_attention_layernorm.weight", 1, H, 0, 0, FRT_INIT_NORMAL, norm_mean, 0.1f);
        push(&l, pre, "mlp.gate_proj.weight", 2, I, H, 0, FRT_INIT_NORMAL, 0, STD);
        push(&l, pre, "mlp.up_proj.weight", 2, I, H, 0, FRT_INIT_NORMAL, 0, STD);
        push(&l, pre, "mlp.down_proj.weight", 2, H, I, 0, FRT_INIT_NORMAL, 0, STD);
    }
    push(&l, P, "norm.weight", 1, H, 0, 0, FRT_INIT_NORMAL, norm_mean, 0.1f);
    if (!c->tie_word_embeddings) push(&l, "", "lm_head.weight", 2, V, H, 0, FRT_INIT_NORMAL, 0, STD);
    if (l.oom) {
        free(l.v);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "weight specs: out of memory");
    }
    *out = l.v;
    *n = l.n;
    return 0;
}

/* ---- random values ------------------------------------------------------ */

/* malloc, with transparent huge pages asked for on large blocks: first-touch
 * page faults otherwise dominate the time of filling gigabytes. */
static void *big_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    const uintptr_t HP = 2u << 20;
    if (p && bytes >= 4 * HP) {
        uintptr_t a = ((uintptr_t)p + HP - 1) & ~(HP - 1), e = ((uintptr_t)p + bytes) & ~(HP - 1);
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
    return p;
}

#define GAMMA 0x9E3779B97F4A7C15ull
#define BLOCK (1 << 14) /* elements per work item (even: normal pairs stay in one block) */

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1) from the 24 high bits. */
static inline float unit_open(uint64_t x) { return ((float)(x >> 40) + 0.5f) * (1.0f / 16777216.0f); }

static void fill_block(const frt_weight_spec *w, uint64_t key, void *dst, int64_t i0, int64_t i1)
{
    float buf[BLOCK];
    int64_t n = i1 - i0;
    if (w->init == FRT_INIT_NORMAL) { /* Box-Muller: pair p gives elements 2p (cos) and 2p+1 (sin) */
        for (int64_t i = i0; i < i1; i += 2) {
            uint64_t x = mix64(key + (uint64_t)(i / 2 + 1) * GAMMA);
            float u1 = ((float)(x >> 40) + 1.0f) * (1.0f / 16777216.0f); /* (0, 1] */
            float u2 = (float)(x & 0xFFFFFFu) * (1.0f / 16777216.0f);    /* [0, 1) */
            float r = sqrtf(-2.0f * logf(u1)), sn, cs;
            sincosf(6.28318530717958647692f * u2, &sn, &cs);
            buf[i - i0] = w->a + w->b * r * cs;
            if (i + 1 < i1) buf[i + 1 - i0] = w->a + w->b * r * sn;
        }
    } else {
        for (int64_t i = i0; i < i1; i++) {
            float u = unit_open(mix64(key + (uint64_t)(i + 1) * GAMMA));
            float v;
            if (w->init == FRT_INIT_UNIFORM) {
                v = w->a + (w->b - w->a) * u;
            } else if (w->init == FRT_INIT_LOG_UNIFORM) {
                v = logf(w->a + (w->b - w->a) * u);
            } else { /* DT_BIAS */
                float dt = expf(logf(w->a) + (logf(w->b) - logf(w->a)) * u);
                v = dt + logf(-expm1f(-dt)); /* softplus^-1 */
            }
            buf[i - i0] = v;
        }
    }
    /* bf16 / f16 / f32 only (the specs' dtypes): the conversion cannot fail */
    (void)frt_f32_convert((unsigned char *)dst + frt_dtype_size(w->dtype) * (size_t)i0, w->dtype, buf, (size_t)n);
}

int frt_gen_model_build_specs(const frt_weight_spec *specs, int n, uint64_t seed, frt_checkpoint **out)
{
    if (!specs || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL argument");
    void **data = calloc((size_t)n, sizeof *data);
    int64_t *first_block = calloc((size_t)n + 1, sizeof *first_block);
    uint64_t *keys = calloc((size_t)n, sizeof *keys);
    int rc = 0;
    if (!data || !first_block || !keys) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "gen-model: out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        const frt_weight_spec *w = &specs[i];
        int64_t numel = 1;
        for (int d = 0; d < w->ndim; d++) numel *= w->shape[d];
        size_t bytes = (size_t)numel * frt_dtype_size(w->dtype);
        data[i] = big_alloc(bytes);
        if (!data[i]) {
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "gen-model: cannot allocate %zu bytes for %s", bytes, w->name);
            break;
        }
        first_block[i + 1] = first_block[i] + (numel + BLOCK - 1) / BLOCK;
        keys[i] = mix64(mix64(seed ^ 0xD1B54A32D192ED03ull) ^ XXH3_64bits(w->name, strlen(w->name)));
    }
    if (rc == 0) {
        int64_t total = first_block[n];
#pragma omp parallel for schedule(dynamic, 8)
        for (int64_t b = 0; b < total; b++) {
            int lo = 0, hi = n - 1; /* the spec whose block range holds b */
            while (lo < hi) {
                int mid = (lo + hi + 1) / 2;
                if (first_block[mid] <= b)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            const frt_weight_spec *w = &specs[lo];
            int64_t numel = 1;
            for (int d = 0; d < w->ndim; d++) numel *= w->shape[d];
            int64_t i0 = (b - first_block[lo]) * BLOCK, i1 = i0 + BLOCK < numel ? i0 + BLOCK : numel;
            fill_block(w, keys[lo], data[lo], i0, i1);
        }
    }
    frt_checkpoint *ck = NULL;
    if (rc == 0) rc = frt_checkpoint_create(&ck);
    for (int i = 0; i < n; i++) {
        if (rc == 0) {
            rc = frt_checkpoint_add(ck, specs[i].name, specs[i].dtype, specs[i].ndim, specs[i].shape, data[i]);
        } else if (data) {
            free(data[i]);
        }
    }
    free(data);
    free(first_block);
    free(keys);
    if (rc < 0) {
        frt_checkpoint_close(ck);
        return rc;
    }
    *out = ck;
    return 0;
}

int frt_gen_model_build_config(const frt_model_config *cfg, uint64_t seed, frt_checkpoint **out)
{
    if (!cfg || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL argument");
    frt_weight_spec *specs;
    int n;
    FRT_TRY(frt_model_weight_specs(cfg, &specs, &n));
    int rc = frt_gen_model_build_specs(specs, n, seed, out);
    free(specs);
    return rc;
}

int frt_gen_model_build(const char *shape, uint64_t seed, frt_model_config *cfg, frt_checkpoint **out)
{
    frt_model_config c;
    FRT_TRY(frt_gen_model_config(shape, &c));
    FRT_TRY(frt_gen_model_build_config(&c, seed, out));
    if (cfg) *cfg = c;
    return 0;
}

int frt_gen_model_write(const char *shape, uint64_t seed, const char *out_dir)
{
    if (!out_dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gen-model: NULL directory");
    frt_checkpoint *ck;
    FRT_TRY(frt_gen_model_build(shape, seed, NULL, &ck));
    int rc = frt_mkdir_p(out_dir);
    if (rc == 0) rc = frt_checkpoint_write(ck, out_dir, FRT_GEN_MODEL_SHARD_BYTES, 0);
    if (rc == 0) rc = frt_gen_model_write_configs(shape, out_dir);
    frt_checkpoint_close(ck);
    return rc;
}
