/*
 * test_policy_inputs.c - norm_stats.json and the whole input set
 * (frt/policy_io.h): z-score and quantile normalisation of the state and
 * un-normalisation of the action chunk against numpy goldens (openpi's
 * transforms.py formulas, scripts/ref/policy_io_goldens.py), the strict
 * parser's refusals, frt_policy_inputs_build for Pi0 and Pi0.5 with a
 * missing camera, its safetensors file read back, and every bad input.
 */
#include "frt/safetensors.h"
#include "policy_test_util.h"

static frt_policy_norm_stats *stats_from(const json_t *g)
{
    char *text = json_dumps(json_object_get(g, "stats"), JSON_COMPACT);
    frt_policy_norm_stats *st = NULL;
    CHECK_OK(frt_policy_norm_stats_parse(text, strlen(text), &st));
    free(text);
    return st;
}

static void check_close(const float *got, const json_t *want_json, const char *what)
{
    size_t n;
    double *want = ptu_doubles(want_json, &n);
    double e = rel_err_d(got, want, n);
    CHECK_MSG(e <= 1e-7, "%s: rel err %.3e", what, e);
    printf("%s: %zu values, norm-wise rel err %.2e vs numpy float64\n", what, n, e);
    free(want);
}

static void test_norm_goldens(const json_t *m)
{
    const json_t *g = json_object_get(m, "norm");
    frt_policy_norm_stats *st = stats_from(g);
    if (!st) return;
    int q = 0;
    CHECK(frt_policy_norm_stats_dim(st, "state", &q) == 7 && q == 1);
    CHECK(frt_policy_norm_stats_dim(st, "actions", NULL) == 6 && frt_policy_norm_stats_dim(st, "x", &q) == 0 && !q);
    size_t ns, na;
    float *state = ptu_floats(json_object_get(g, "state"), &ns), out[8];
    CHECK_OK(frt_policy_normalize_state(st, FRT_POLICY_PI0, state, ns, out));
    check_close(out, json_object_get(g, "state_z"), "state z-score");
    CHECK_OK(frt_policy_normalize_state(st, FRT_POLICY_PI05, state, ns, out));
    check_close(out, json_object_get(g, "state_q"), "state quantile");
    float *act = ptu_floats(json_object_get(g, "actions"), &na);
    size_t chunk = (size_t)json_integer_value(json_object_get(g, "chunk"));
    size_t ad = (size_t)json_integer_value(json_object_get(g, "model_action_dim"));
    size_t od = (size_t)json_integer_value(json_object_get(g, "out_dim"));
    float *aout = xmalloc(chunk * od * sizeof *aout);
    CHECK_OK(frt_policy_unnormalize_actions(st, FRT_POLICY_PI0, act, chunk, ad, od, aout));
    check_close(aout, json_object_get(g, "actions_z"), "actions z-score");
    CHECK_OK(frt_policy_unnormalize_actions(st, FRT_POLICY_PI05, act, chunk, ad, od, aout));
    check_close(aout, json_object_get(g, "actions_q"), "actions quantile");
    /* refusals */
    CHECK_STATUS(frt_policy_normalize_state(st, FRT_POLICY_PI0, state, 8, out), FRT_ERR_MISMATCH);
    state[1] = INFINITY;
    CHECK_STATUS(frt_policy_normalize_state(st, FRT_POLICY_PI0, state, ns, out), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_unnormalize_actions(st, FRT_POLICY_PI0, act, chunk, 5, 4, aout), FRT_ERR_MISMATCH);
    CHECK_STATUS(frt_policy_unnormalize_actions(st, FRT_POLICY_PI0, act, chunk, ad, ad + 1, aout),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_unnormalize_actions(st, FRT_POLICY_PI0, act, chunk, ad, 0, aout), FRT_ERR_INVALID_ARGUMENT);
    free(state), free(act), free(aout);
    frt_policy_norm_stats_free(st);
}

static void test_norm_refusals(void)
{
    static const struct {
        const char *json;
        int status;
    } bad[] = {
        {"", FRT_ERR_FORMAT},
        {"[]", FRT_ERR_FORMAT},
        {"{}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {}, \"extra\": 1}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"std\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1], \"std\": [1], \"min\": [0]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1, 2], \"std\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [], \"std\": []}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [\"1\"], \"std\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [[1]], \"std\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1], \"std\": [-1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1], \"std\": [1], \"q01\": [2], \"q99\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1], \"std\": [1], \"q01\": [0]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1], \"mean\": [1], \"std\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1e999], \"std\": [1]}}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": 3}}", FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [0], \"std\": [1], \"q01\": [-1.7e308], \"q99\": [1.7e308]}}}",
         FRT_ERR_FORMAT},
        {"{\"norm_stats\": {\"state\": {\"mean\": [1], \"std\": [1]}}", FRT_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        frt_policy_norm_stats *st = (frt_policy_norm_stats *)1;
        int rc = frt_policy_norm_stats_parse(bad[i].json, strlen(bad[i].json), &st);
        CHECK_MSG(rc == bad[i].status && st == NULL, "case %zu: %s (%s)", i, frt_status_name(rc), frt_last_error());
    }
    /* null quantiles (pydantic's None) are absent: Pi0 works, Pi0.5 refuses */
    const char *ok =
        "{\"norm_stats\": {\"state\": {\"mean\": [1, 2], \"std\": [0.5, 0], \"q01\": null, \"q99\": null}}}";
    frt_policy_norm_stats *st = NULL;
    CHECK_OK(frt_policy_norm_stats_parse(ok, strlen(ok), &st));
    float x[2] = {2.0f, 2.0f}, y[2];
    CHECK_OK(frt_policy_normalize_state(st, FRT_POLICY_PI0, x, 2, y));
    CHECK(y[0] == (float)(1.0 / (0.5 + 1e-6)) && y[1] == 0.0f);
    CHECK_STATUS(frt_policy_normalize_state(st, FRT_POLICY_PI05, x, 2, y), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_policy_unnormalize_actions(st, FRT_POLICY_PI0, x, 1, 2, 2, y), FRT_ERR_NOT_FOUND);
    frt_policy_norm_stats_free(st);
    CHECK_STATUS(frt_policy_norm_stats_load(ptu_path("none.json"), &st), FRT_ERR_NOT_FOUND);
    frt_policy_norm_stats_free(NULL);
}

/* A random [h, w, 3] u8 image. */
static uint8_t *random_image(int h, int w)
{
    uint8_t *p = xmalloc((size_t)h * w * 3);
    for (size_t i = 0; i < (size_t)h * w * 3; i++) p[i] = (uint8_t)(frt_test_u64() >> 56);
    return p;
}

static const char *const cams[] = {"base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb"};

static void check_file(const frt_policy_input_set *in, const char *path)
{
    frt_safetensors *f = NULL;
    CHECK_OK(frt_safetensors_open(path, &f));
    if (!f) return;
    const frt_tensor *pv = frt_safetensors_find(f, "pixel_values"), *ids = frt_safetensors_find(f, "input_ids");
    const frt_tensor *pm = frt_safetensors_find(f, "pixel_attention_mask");
    const frt_tensor *am = frt_safetensors_find(f, "attention_mask");
    const frt_tensor *s = frt_safetensors_find(f, "state");
    CHECK(pv && ids && pm && am && s && frt_safetensors_count(f) == 5);
    if (pv && ids && pm && am && s) {
        CHECK(pv->dtype == FRT_DT_F32 && pv->ndim == 4 && pv->shape[0] == 3 && pv->shape[1] == 3 &&
              pv->shape[2] == 224 && pv->shape[3] == 224);
        CHECK(!memcmp(pv->data, in->pixel_values, 3 * 3 * 224 * 224 * sizeof(float)));
        CHECK(pm->dtype == FRT_DT_U8 && !memcmp(pm->data, in->pixel_attention_mask, 3));
        CHECK(am->dtype == FRT_DT_U8 && am->shape[0] == (int64_t)in->n_tokens &&
              !memcmp(am->data, in->attention_mask, in->n_tokens));
        CHECK(s->dtype == FRT_DT_F32 && s->shape[0] == 32 && !memcmp(s->data, in->state, 32 * sizeof(float)));
        int ids_ok = ids->dtype == FRT_DT_I64 && ids->shape[0] == (int64_t)in->n_tokens;
        for (size_t i = 0; ids_ok && i < in->n_tokens; i++) {
            int64_t v;
            memcpy(&v, (const char *)ids->data + i * 8, 8);
            ids_ok = v == in->input_ids[i];
        }
        CHECK(ids_ok);
        const char *meta = frt_safetensors_metadata(f, "frt.policy.state_normalized");
        CHECK(meta && !strcmp(meta, in->state_normalized ? "1" : "0"));
    }
    frt_safetensors_close(f);
}

static void test_build(frt_policy_tokenizer *tok, const json_t *m, frt_policy_variant v)
{
    frt_policy_norm_stats *st = stats_from(json_object_get(m, "norm"));
    frt_policy_input_params p = frt_policy_input_default_params();
    p.variant = v;
    p.cameras = cams;
    p.n_cameras = 3;
    p.tokenizer = tok;
    p.norm_stats = st;
    uint8_t *a = random_image(131, 257), *b = random_image(90, 60);
    frt_policy_view views[2] = {{.camera = "right_wrist_0_rgb", .height = 131, .width = 257, .rgb = a},
                                {.camera = "base_0_rgb", .height = 90, .width = 60, .rgb = b}};
    float state[5] = {0.3f, -1.2f, 2.5f, 0.0f, 0.7f};
    frt_policy_input_set *in = NULL;
    CHECK_OK(frt_policy_inputs_build(&p, views, 2, "pick_up the cup", state, 5, &in));
    if (!in) return;
    CHECK(in->n_cameras == 3 && in->n_tokens == frt_policy_default_max_tokens(v) && in->state_dim == 32);
    CHECK(in->pixel_attention_mask[0] == 1 && in->pixel_attention_mask[1] == 0 && in->pixel_attention_mask[2] == 1);
    float *pix = xmalloc(3 * 224 * 224 * sizeof *pix);
    CHECK_OK(frt_policy_pixels_from_u8(b, 90, 60, 3, pix));
    CHECK(!memcmp(pix, in->pixel_values, 3 * 224 * 224 * sizeof *pix));
    CHECK_OK(frt_policy_pixels_from_u8(a, 131, 257, 3, pix));
    CHECK(!memcmp(pix, in->pixel_values + 2 * 3 * 224 * 224, 3 * 224 * 224 * sizeof *pix));
    int black = 1;
    for (size_t i = 0; i < 3 * 224 * 224; i++) black &= in->pixel_values[3 * 224 * 224 + i] == -1.0f;
    CHECK(black);
    float want[5];
    CHECK_OK(frt_policy_normalize_state(st, v, state, 5, want));
    CHECK(in->state_normalized == 1 && !memcmp(in->state, want, sizeof want));
    CHECK(in->state[5] == 0 && in->state[31] == 0);
    int32_t ids[256];
    uint8_t mask[256];
    size_t nv, nu;
    CHECK_OK(frt_policy_tokenize(tok, v, "pick_up the cup", want, 5, in->n_tokens, ids, mask, &nv, &nu));
    CHECK(nv == in->n_prompt_tokens && !memcmp(ids, in->input_ids, in->n_tokens * sizeof *ids) &&
          !memcmp(mask, in->attention_mask, in->n_tokens));
    CHECK_OK(frt_policy_inputs_write(in, v, ptu_path("inputs.safetensors")));
    check_file(in, ptu_path("inputs.safetensors"));
    frt_policy_inputs_free(in);
    /* without statistics: raw state, reported */
    p.norm_stats = NULL;
    CHECK_OK(frt_policy_inputs_build(&p, views, 2, "pick up", state, 5, &in));
    CHECK(in && in->state_normalized == 0 && !memcmp(in->state, state, sizeof state));
    frt_policy_inputs_free(in);
    free(pix), free(a), free(b);
    frt_policy_norm_stats_free(st);
}

static void test_build_refusals(frt_policy_tokenizer *tok)
{
    frt_policy_input_params p = frt_policy_input_default_params();
    p.cameras = cams;
    p.n_cameras = 2;
    p.tokenizer = tok;
    uint8_t *a = random_image(40, 50);
    float *f = xmalloc(224 * 224 * 3 * sizeof *f);
    frt_test_fill(f, 224 * 224 * 3, -1, 1);
    float state[33];
    frt_test_fill(state, 33, -1, 1);
    frt_policy_view v1 = {.camera = "base_0_rgb", .height = 40, .width = 50, .rgb = a};
    frt_policy_view v2 = {.camera = "left_wrist_0_rgb", .height = 224, .width = 224, .pixels = f};
    frt_policy_view ok2[2] = {v1, v2}, dup[2] = {v1, v1}, three[3] = {v1, v2, v2};
    frt_policy_view unknown = v1, both = v1, neither = v1, gray = v1;
    unknown.camera = "top";
    both.pixels = f;
    neither.rgb = NULL;
    gray.height = 0;
    frt_policy_input_set *in = (frt_policy_input_set *)1;
    CHECK_OK(frt_policy_inputs_build(&p, ok2, 2, "go", state, 3, &in)); /* u8 and f32 views together */
    CHECK(in && in->pixel_attention_mask[0] && in->pixel_attention_mask[1] && in->pixel_values[3 * 224 * 224] == f[0]);
    frt_policy_inputs_free(in);
    CHECK_STATUS(frt_policy_inputs_build(&p, dup, 2, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK(in == NULL);
    CHECK_STATUS(frt_policy_inputs_build(&p, three, 3, "go", state, 3, &in), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_policy_inputs_build(&p, &unknown, 1, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "'top'") != NULL);
    CHECK_STATUS(frt_policy_inputs_build(&p, &both, 1, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_inputs_build(&p, &neither, 1, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_inputs_build(&p, &gray, 1, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "base_0_rgb") != NULL);
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 0, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 1, "  ", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 1, "go", state, 33, &in), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 1, "go", state, 0, &in), FRT_ERR_INVALID_ARGUMENT);
    state[2] = NAN;
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 1, "go", state, 3, &in), FRT_ERR_INVALID_ARGUMENT);
    p.tokenizer = NULL;
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 1, "go", state, 2, &in), FRT_ERR_INVALID_ARGUMENT);
    p.tokenizer = tok;
    p.n_cameras = 0;
    CHECK_STATUS(frt_policy_inputs_build(&p, &v1, 1, "go", state, 2, &in), FRT_ERR_OUT_OF_RANGE);
    CHECK(in == NULL);
    frt_policy_inputs_free(NULL);
    free(a), free(f);
}

int main(void)
{
    json_t *m = ptu_setup(1);
    frt_test_seed(20);
    test_norm_goldens(m);
    test_norm_refusals();
    frt_policy_tokenizer *tok = NULL;
    CHECK_OK(frt_policy_tokenizer_load(ptu_path("spm.model"), &tok));
    if (tok) {
        test_build(tok, m, FRT_POLICY_PI0);
        test_build(tok, m, FRT_POLICY_PI05);
        test_build_refusals(tok);
    }
    frt_policy_tokenizer_free(tok);
    json_decref(m);
    return frt_test_report();
}
