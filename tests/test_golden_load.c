/*
 * test_golden_load.c - the golden Qwen3.5 models of
 * scripts/ref/make_golden_models.py (tests/data/golden/<model>/, added by
 * the lead after a GPU run) load with the right names, shapes and dtypes in
 * both layouts (qwen3_5_text under "model.", composite qwen3_5 under
 * "model.language_model." with a vision tower that is ignored), their
 * configs read back what the script gave transformers, and the reference
 * tensors are consistent with the weights: hidden.layer0 is the embedding
 * of hidden.ids, and HF's last hidden state is the final zero-centred
 * RMSNorm of the last layer's output. Skipped (77) without
 * tests/data/golden/.
 */
#include "frt_test.h"
#include "frt/checkpoint.h"
#include "frt/config.h"
#include "gen_model.h"
#include "frt/safetensors.h"

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>

static const frt_tensor *need(const frt_safetensors *g, const char *name, frt_dtype dt, int ndim, int64_t d0,
                              int64_t d1)
{
    const frt_tensor *t = frt_safetensors_find(g, name);
    CHECK_MSG(t != NULL, "golden.safetensors lacks %s", name);
    if (!t) return NULL;
    int ok = t->dtype == dt && t->ndim == ndim && (ndim < 1 || t->shape[0] == d0) && (ndim < 2 || t->shape[1] == d1);
    CHECK_MSG(ok, "%s: %s ndim %d [%lld, %lld], want %s [%lld, %lld]", name, frt_dtype_name(t->dtype), t->ndim,
              (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 0), frt_dtype_name(dt), (long long)d0,
              (long long)d1);
    return ok ? t : NULL;
}

static float *to_f32(const frt_tensor *t)
{
    float *f = malloc(sizeof(float) * (size_t)frt_tensor_numel(t));
    if (f && frt_tensor_to_f32(t, f) < 0) {
        free(f);
        return NULL;
    }
    return f;
}

static int32_t *ids_of(const frt_tensor *t)
{
    int32_t *v = malloc(t->nbytes ? t->nbytes : 1);
    memcpy(v, t->data, t->nbytes);
    return v;
}

static void check_model(const char *dir, const char *name)
{
    printf("golden model %s\n", name);
    char path[4096];
    frt_model_config c;
    CHECK_OK(frt_config_load(dir, &c));
    snprintf(path, sizeof path, "%.3000s/golden.json", dir);
    json_error_t err;
    json_t *meta = json_load_file(path, 0, &err);
    CHECK_MSG(meta != NULL, "%s: %s", path, err.text);
    if (!meta) return;

    /* The config reads back what the script gave transformers. */
    const char *layout = json_string_value(json_object_get(meta, "layout"));
    const char *prefix = json_string_value(json_object_get(meta, "weight_prefix"));
    CHECK(layout && !strcmp(layout, c.model_type) && c.hybrid);
    CHECK(prefix && !strcmp(prefix, c.weight_prefix));
    json_t *tc = json_object_get(meta, "text_config");
    CHECK(json_integer_value(json_object_get(tc, "hidden_size")) == c.hidden_size);
    CHECK(json_integer_value(json_object_get(tc, "num_hidden_layers")) == c.n_layers);
    CHECK(json_integer_value(json_object_get(tc, "linear_num_value_heads")) == c.lin_n_v_heads);
    CHECK(json_integer_value(json_object_get(tc, "linear_key_head_dim")) == c.lin_k_head_dim);
    CHECK(json_integer_value(json_object_get(tc, "linear_value_head_dim")) == c.lin_v_head_dim);
    CHECK(json_is_true(json_object_get(tc, "tie_word_embeddings")) == c.tie_word_embeddings);
    json_t *lt = json_object_get(tc, "layer_types");
    for (int i = 0; i < c.n_layers; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        CHECK(s && (c.layer_types[i] == FRT_LAYER_FULL_ATTENTION) == !strcmp(s, "full_attention"));
    }
    CHECK(c.rotary_dim == 8 && c.vocab_size == json_integer_value(json_object_get(meta, "vocab_size")));
    frt_generation_config g;
    CHECK_OK(frt_generation_config_load(dir, &c, &g));
    json_t *eos = json_object_get(meta, "eos_token_id");
    CHECK((size_t)g.n_eos == json_array_size(eos));
    for (int i = 0; i < g.n_eos; i++) CHECK(g.eos_ids[i] == json_integer_value(json_array_get(eos, (size_t)i)));

    /* Weights: every expected name, bf16, with its shape; nothing else
     * outside the vision tower. */
    frt_checkpoint *ck;
    CHECK_OK(frt_checkpoint_open(dir, &ck));
    if (!ck) goto out_meta;
    frt_weight_spec *w;
    int n;
    CHECK_OK(frt_model_weight_specs(&c, &w, &n));
    for (int i = 0; i < n; i++) {
        const frt_tensor *t = frt_checkpoint_find(ck, w[i].name);
        CHECK_MSG(t && t->dtype == FRT_DT_BF16 && t->ndim == w[i].ndim, "%s: %s", name, w[i].name);
        for (int d = 0; t && d < t->ndim && d < w[i].ndim; d++) CHECK(t->shape[d] == w[i].shape[d]);
    }
    int visual = 0, other = 0;
    for (int i = 0; i < frt_checkpoint_count(ck); i++) {
        const char *tn = frt_checkpoint_at(ck, i)->name;
        int known = 0;
        for (int k = 0; k < n && !known; k++) known = !strcmp(tn, w[k].name);
        if (!strncmp(tn, "model.visual.", 13))
            visual++;
        else if (!known && !(c.tie_word_embeddings && !strcmp(tn, "lm_head.weight")))
            CHECK_MSG(++other == 0, "%s: unexpected tensor %s", name, tn);
    }
    CHECK(!strcmp(c.model_type, "qwen3_5") ? visual > 0 : visual == 0);
    free(w);

    /* Reference tensors. */
    snprintf(path, sizeof path, "%.3000s/golden.safetensors", dir);
    frt_safetensors *gs;
    CHECK_OK(frt_safetensors_open(path, &gs));
    if (!gs) goto out_ck;
    json_t *prompts = json_object_get(meta, "prompts");
    CHECK(json_array_size(prompts) == 3);
    int long_prompt = 0;
    for (size_t k = 0; k < json_array_size(prompts); k++) {
        json_t *p = json_array_get(prompts, k);
        int64_t len = json_integer_value(json_object_get(p, "length"));
        long_prompt |= len > 1000;
        char nm[64];
        snprintf(nm, sizeof nm, "prompt%zu.ids", k);
        const frt_tensor *ids = need(gs, nm, FRT_DT_I32, 1, len, 0);
        snprintf(nm, sizeof nm, "prompt%zu.logits_last", k);
        const frt_tensor *lg = need(gs, nm, FRT_DT_F32, 1, c.vocab_size, 0);
        if (ids) {
            int32_t *v = ids_of(ids);
            int bad = 0;
            for (int64_t i = 0; i < len; i++) bad += v[i] < 0 || v[i] >= c.vocab_size;
            CHECK(bad == 0);
            free(v);
        }
        if (lg) {
            float *l = to_f32(lg);
            int am = 0, finite = 1;
            for (int i = 0; i < c.vocab_size; i++) {
                finite &= isfinite(l[i]);
                if (l[i] > l[am]) am = i;
            }
            CHECK(finite && am == json_integer_value(json_object_get(p, "argmax")));
            free(l);
        }
    }
    CHECK(long_prompt);

    /* Hidden states: n_layers + 1 of them, HF's convention (golden.json). */
    json_t *hid = json_object_get(meta, "hidden");
    int64_t T = json_integer_value(json_object_get(hid, "ids_length"));
    CHECK(json_integer_value(json_object_get(hid, "count")) == c.n_layers + 1);
    /* transformers 5 replaces hidden_states[-1] by the normed last_hidden_state;
     * the script records which convention the run had. */
    int normed = json_is_true(json_object_get(hid, "last_is_normed"));
    CHECK(normed || json_is_true(json_object_get(hid, "last_is_raw")));
    const frt_tensor *hids = need(gs, "hidden.ids", FRT_DT_I32, 1, T, 0);
    const frt_tensor *layer[FRT_MAX_LAYERS + 1] = {0};
    for (int i = 0; i <= c.n_layers; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "hidden.layer%d", i);
        layer[i] = need(gs, nm, FRT_DT_F32, 2, T, c.hidden_size);
    }
    char nm[64];
    snprintf(nm, sizeof nm, "hidden.layer%d", c.n_layers + 1);
    CHECK(frt_safetensors_find(gs, nm) == NULL);
    const frt_tensor *pre = need(gs, "hidden.final_prenorm", FRT_DT_F32, 2, T, c.hidden_size);
    char wn[128];
    snprintf(wn, sizeof wn, "%sembed_tokens.weight", c.weight_prefix);
    const frt_tensor *emb = frt_checkpoint_find(ck, wn);
    snprintf(wn, sizeof wn, "%snorm.weight", c.weight_prefix);
    const frt_tensor *fnorm = frt_checkpoint_find(ck, wn);
    if (hids && layer[0] && emb && pre && layer[c.n_layers] && fnorm) {
        int32_t *ids = ids_of(hids);
        float *h0 = to_f32(layer[0]), *E = to_f32(emb), *x = to_f32(pre), *y = to_f32(layer[c.n_layers]),
              *nw = to_f32(fnorm);
        int H = c.hidden_size, bad = 0;
        for (int64_t t = 0; t < T; t++)
            for (int j = 0; j < H; j++) bad += h0[t * H + j] != E[(int64_t)ids[t] * H + j];
        CHECK_MSG(bad == 0, "%s: hidden.layer0 is not the embedding of hidden.ids (%d differ)", name, bad);
        /* y = x / sqrt(mean(x^2) + eps) * (1 + w)   (Qwen3_5RMSNorm), or y = x */
        float *ref = malloc(sizeof(float) * (size_t)(T * H));
        for (int64_t t = 0; t < T; t++) {
            double ss = 0;
            for (int j = 0; j < H; j++) ss += (double)x[t * H + j] * x[t * H + j];
            double r = normed ? 1.0 / sqrt(ss / H + (double)c.rms_norm_eps) : 1.0;
            for (int j = 0; j < H; j++) ref[t * H + j] = (float)(x[t * H + j] * r * (normed ? 1.0 + nw[j] : 1.0));
        }
        CHECK_ERR_NEAR(y, ref, (size_t)(T * H), 1e-5);
        free(ref);
        free(ids);
        free(h0);
        free(E);
        free(x);
        free(y);
        free(nw);
    }

    /* Greedy tokens and margins. */
    json_t *gr = json_object_get(meta, "greedy");
    int64_t steps = json_integer_value(json_object_get(gr, "steps"));
    need(gs, "greedy.prompt", FRT_DT_I32, 1, json_integer_value(json_object_get(gr, "prompt_length")), 0);
    const frt_tensor *toks = need(gs, "greedy.tokens", FRT_DT_I32, 1, steps, 0);
    const frt_tensor *mar = need(gs, "greedy.margins", FRT_DT_F32, 1, steps, 0);
    if (toks && mar) {
        int32_t *v = ids_of(toks);
        float *m = to_f32(mar);
        int bad = 0, distinct = 0;
        for (int64_t i = 0; i < steps; i++) {
            bad += v[i] < 0 || v[i] >= c.vocab_size || !(m[i] >= 1e-3f);
            int seen = 0;
            for (int64_t k = 0; k < i; k++) seen |= v[k] == v[i];
            distinct += !seen;
        }
        CHECK(bad == 0 && distinct >= 8 && steps == 32);
        free(v);
        free(m);
    }
    double e = json_real_value(json_object_get(meta, "bf16_logits_rel_err"));
    CHECK_MSG(e > 0 && e < 0.3, "%s: bf16_logits_rel_err %g", name, e);
    printf("  %s: %d tensors, %d visual; bf16 rel err %.3g\n", c.model_type, frt_checkpoint_count(ck), visual, e);
    frt_safetensors_close(gs);
out_ck:
    frt_checkpoint_close(ck);
out_meta:
    json_decref(meta);
}

int main(void)
{
    const char *root = FRT_TEST_DATA "/golden";
    DIR *d = opendir(root);
    if (!d) TEST_SKIP("tests/data/golden/ is absent (made by scripts/ref/make_golden_models.py on the GPU machine)");
    int models = 0, layouts = 0;
    struct dirent *e;
    char names[16][256];
    while ((e = readdir(d)) && models < 16) {
        if (e->d_name[0] == '.') continue;
        char cfg[2048];
        struct stat st;
        snprintf(cfg, sizeof cfg, "%s/%.255s/config.json", root, e->d_name);
        if (stat(cfg, &st) != 0) continue;
        snprintf(names[models++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < models; i++) {
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/%.255s", root, names[i]);
        check_model(dir, names[i]);
        frt_model_config c;
        if (frt_config_load(dir, &c) == 0) layouts |= !strcmp(c.model_type, "qwen3_5") ? 2 : 1;
    }
    CHECK_MSG(models >= 3 && layouts == 3, "%d golden models, layouts mask %d (want both)", models, layouts);
    return frt_test_report();
}
