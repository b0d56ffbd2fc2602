/*
 * test_policy_gen.c - Pi0 / Pi0.5 policies written by frt gen-model's code
 * (tools/gen_policy.c, the layout of the real pi0 / pi05 shapes at small
 * dimensions) load and run on the cpu backend, and the inference has the
 * properties its masks promise, on random inputs:
 *   - the same inputs and noise give the same bytes (two runs, and a fresh
 *     model);
 *   - a masked-out camera's pixels and the padded prompt slots' ids do not
 *     change the chunk (bit for bit); an unmasked camera's pixels and the
 *     state (Pi0) do;
 *   - the episode stream: the same seed gives the same chunk, the step
 *     counter advances, another seed gives another chunk;
 *   - warm re-entry (frt_policy_denoise): refused without a prefix, then
 *     bit-identical to the full inference on the prefix it left.
 * Needs no goldens (test_policy.c holds the parity against transformers).
 */
#include "frt_test.h"

#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "gen_model.h"
#include "model/arch/pi0/pi0.h"

#include <unistd.h>

static const frt_gen_policy_dims DIMS = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 28, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 8, .vocab = 61,
    .e_width = 16, .e_inter = 24, .chunk = 4, .action_dim = 5, .state_dim = 6, .steps = 10,
};

static int write_policy(const char *dir, int pi05, uint64_t seed)
{
    frt_weight_spec *w = NULL;
    int n = 0;
    frt_checkpoint *ck = NULL;
    int rc = frt_gen_policy_specs_dims(&DIMS, pi05, &w, &n);
    if (rc == 0) rc = frt_gen_model_build_specs(w, n, seed, &ck);
    if (rc == 0) rc = frt_mkdir_p(dir);
    if (rc == 0) rc = frt_checkpoint_write(ck, dir, 0, FRT_CKPT_WRITE_NO_FSYNC);
    if (rc == 0) rc = frt_gen_policy_write_config_dims(&DIMS, pi05, dir);
    frt_checkpoint_close(ck);
    free(w);
    return rc;
}

enum { CAMS = 3, PX = CAMS * 3 * 28 * 28, TOK = 9, NA = 4 * 5 };

typedef struct obs {
    float px[PX], state[6], noise[NA];
    uint8_t cam[CAMS], am[TOK];
    int32_t ids[TOK];
} obs;

static void random_obs(obs *o)
{
    frt_test_fill(o->px, PX, -1, 1);
    frt_test_fill(o->state, 6, -1, 1);
    frt_test_fill(o->noise, NA, -2, 2);
    o->cam[0] = 1, o->cam[1] = 0, o->cam[2] = 1; /* the middle camera is absent */
    for (int i = 0; i < TOK; i++) {
        o->ids[i] = 1 + (int32_t)(frt_test_u64() % 60);
        o->am[i] = i < TOK - 3; /* three right pads */
    }
}

static frt_policy_inputs inputs(obs *o, int pi05)
{
    frt_policy_inputs in = {o->px, CAMS, 3, 28, 28, o->cam, o->ids, o->am, TOK,
                            pi05 ? NULL : o->state, pi05 ? 0 : 6, o->noise, NULL, NULL, 0};
    return in;
}

static void run(frt_model *m, obs *o, int pi05, float *out)
{
    frt_policy_inputs in = inputs(o, pi05);
    CHECK_OK(frt_policy_run(m, &in, out, NA));
}

static void test_one(const char *root, int pi05)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, pi05 ? "pi05" : "pi0");
    CHECK_OK(write_policy(dir, pi05, 5));
    frt_model_params p = frt_model_default_params();
    frt_model *m = NULL, *m2 = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    CHECK_OK(frt_model_load(dir, &p, &m2));
    if (!m || !m2) return;
    frt_policy_info pi;
    CHECK_OK(frt_policy_info_get(m, &pi));
    frt_policy_cost cost;
    CHECK_OK(frt_policy_cost_get(m, 2, 9, &cost));
    CHECK(cost.flops_vision > 0 && cost.flops_prefix > 0 && cost.flops_expert > 0 && cost.expert_params > 0);
    CHECK_STATUS(frt_policy_cost_get(m, 4, 9, &cost), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_cost_get(m, 1, 0, &cost), FRT_ERR_INVALID_ARGUMENT);
    CHECK(pi.chunk == 4 && pi.action_dim == 5 && pi.max_cameras == 3 && pi.image_height == 28);
    CHECK(pi.state_in_prompt == pi05 && pi.max_tokens == (pi05 ? 200 : 48));
    static obs o, o2;
    random_obs(&o);
    float a[NA], b[NA], c[NA];
    /* No prefix yet: the denoise-only graph refuses, nothing changes. */
    uint64_t seed, step;
    CHECK_STATUS(frt_policy_denoise(m, pi05 ? NULL : o.state, pi05 ? 0 : 6, o.noise, a, NA), FRT_ERR_STATE);
    CHECK_OK(frt_policy_episode_get(m, &seed, &step));
    CHECK(step == 0);
    run(m, &o, pi05, a);
    int finite = 1;
    for (int i = 0; i < NA; i++) finite &= isfinite(a[i]) && a[i] != 0.0f;
    CHECK(finite);
    run(m, &o, pi05, b);
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "a second run differs");
    run(m2, &o, pi05, b);
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "a fresh model differs");
    /* Warm re-entry: the steps alone on the prefix the state holds. */
    CHECK_OK(frt_policy_denoise(m, pi05 ? NULL : o.state, pi05 ? 0 : 6, o.noise, b, NA));
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "denoise-only differs from the full inference");
    if (!pi05) {
        float st[6];
        memcpy(st, o.state, sizeof st);
        st[0] += 0.25f;
        CHECK_OK(frt_policy_denoise(m, st, 6, o.noise, b, NA));
        CHECK(memcmp(a, b, sizeof a) != 0);
        st[0] = NAN;
        CHECK_STATUS(frt_policy_denoise(m, st, 6, o.noise, b, NA), FRT_ERR_INVALID_ARGUMENT);
    } else {
        CHECK_STATUS(frt_policy_denoise(m, o.state, 6, o.noise, b, NA), FRT_ERR_INVALID_ARGUMENT);
    }

    o2 = o;
    for (int i = 3 * 28 * 28; i < 2 * 3 * 28 * 28; i++) o2.px[i] = -o2.px[i] * 0.5f; /* the masked camera */
    for (int i = TOK - 3; i < TOK; i++) o2.ids[i] = 60 - o2.ids[i];                   /* the padded slots */
    run(m, &o2, pi05, c);
    CHECK_MSG(memcmp(a, c, sizeof a) == 0, "a masked camera or a padded token changed the chunk");
    o2 = o;
    o2.px[5] += 0.5f; /* the first camera */
    run(m, &o2, pi05, c);
    CHECK_MSG(memcmp(a, c, sizeof a) != 0, "a present camera's pixel did not change the chunk");
    if (!pi05) {
        o2 = o;
        o2.state[2] += 0.5f;
        run(m, &o2, pi05, c);
        CHECK_MSG(memcmp(a, c, sizeof a) != 0, "the state did not change the chunk");
    }

    /* The episode stream. */
    frt_policy_inputs in = inputs(&o, pi05);
    in.noise = NULL;
    CHECK_OK(frt_policy_episode_start(m, 11));
    CHECK_OK(frt_policy_run(m, &in, a, NA));
    CHECK_OK(frt_policy_run(m, &in, c, NA));
    CHECK_OK(frt_policy_episode_get(m, &seed, &step));
    CHECK(seed == 11 && step == 2);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK_OK(frt_policy_episode_start(m2, 11));
    CHECK_OK(frt_policy_run(m2, &in, b, NA));
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "the same seed gave another chunk");
    CHECK_OK(frt_policy_episode_start(m2, 12));
    CHECK_OK(frt_policy_run(m2, &in, b, NA));
    CHECK(memcmp(a, b, sizeof a) != 0);
    frt_model_free(m);
    frt_model_free(m2);
}

/* The real shapes' config.json (frt gen-model --shape pi0 / pi05) parses
 * to PI0Config's shapes. */
static void test_real_config(const char *root)
{
    static const char *const shapes[] = {"pi0", "pi05"};
    for (int i = 0; i < 2; i++) {
        char dir[600], path[700], *text = NULL, mt[32];
        size_t len = 0;
        snprintf(dir, sizeof dir, "%s/real_%s", root, shapes[i]);
        CHECK_OK(frt_mkdir_p(dir));
        CHECK_OK(frt_gen_policy_write_config(shapes[i], dir));
        snprintf(path, sizeof path, "%s/config.json", dir);
        CHECK_OK(frt_file_read_all(path, 1 << 20, &text, &len));
        pi0_config c;
        CHECK_OK(pi0_config_parse_json(text, len, path, 0, mt, sizeof mt, &c));
        free(text);
        CHECK(!strcmp(mt, shapes[i]) && c.pi05 == i);
        CHECK(c.v_width == 1152 && c.v_layers == 27 && c.n_patch == 256 && c.t.width == 2048 && c.t.layers == 18);
        CHECK(c.t.heads == 8 && c.t.kv_heads == 1 && c.t.head_dim == 256 && c.e.width == 1024 && c.e.inter == 4096);
        CHECK(c.vocab == 257152 && c.chunk == 50 && c.action_dim == 32 && c.n_steps == 10);
        CHECK(c.max_prefix == 3 * 256 + (i ? 200 : 48));
        frt_weight_spec *w = NULL;
        int n = 0;
        CHECK_OK(frt_gen_policy_specs(shapes[i], &w, &n));
        unsigned long long params = 0;
        for (int k = 0; k < n; k++) {
            unsigned long long e = 1;
            for (int d = 0; d < w[k].ndim; d++) e *= (unsigned long long)w[k].shape[d];
            params += e;
        }
        printf("%s: %d tensors, %llu parameters\n", shapes[i], n, params);
        /* The floor's arithmetic at the real shape, 2 cameras, 48 tokens:
         * vision 2 x 256 patches through 27 blocks of width 1152 (~0.44
         * TFLOP), the prefix 560 rows through 18 layers of the 2B (~2.2
         * TFLOP), the expert 10 steps over 50-51 rows (~0.35 TFLOP). */
        double f[3];
        pi0_flops(&c, 2, 48, f);
        printf("%s: vision %.1f, prefix %.1f, expert %.1f GFLOP\n", shapes[i], f[0] / 1e9, f[1] / 1e9, f[2] / 1e9);
        CHECK(f[0] > 4.0e11 && f[0] < 4.8e11 && f[1] > 2.0e12 && f[1] < 2.5e12 && f[2] > 2.5e11 && f[2] < 4.5e11);
        CHECK(params > 3000000000ull && params < 4000000000ull);
        free(w);
    }
    CHECK_STATUS(frt_gen_policy_write_config("pi1", root), FRT_ERR_NOT_FOUND);
}

int main(void)
{
    char root[] = "/tmp/frt_test_policy_gen_XXXXXX";
    if (!mkdtemp(root)) TEST_SKIP("no temporary directory");
    frt_test_seed(21);
    test_one(root, 0);
    test_one(root, 1);
    test_real_config(root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return frt_test_report();
}
