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
 *     bit-identical to the full inference on the prefix it left;
 *   - classifier-free guidance (frt_policy_set_cfg), both variants: off is
 *     bit for bit the unguided path (a hash of the chunk before and after
 *     enabling and disabling); C2 beta = 1 against the conditioned prompt
 *     alone (norm-wise rel <= 1e-6); C3 the same prompt in both slots of the
 *     fused graph gives byte-identical slots and the unguided chunk; C4
 *     fused against serial, bit for bit, for beta 1, 1.5, 2, 2.5;
 *     denoise-only under CFG (and after a capsule restore) equals the full
 *     guided inference; every bad input refused with the state unchanged.
 * Needs no goldens (test_policy.c holds the parity against transformers).
 */
#include "frt_test.h"

#include "frt/capsule.h"
#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "gen_model.h"
#include "model/arch/pi0/pi0.h"
#include "policy_gen_util.h"

#include <unistd.h>

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

/* ---- FP8 weights (emulated on the cpu backend) -------------------------- */

/* params.weight_dtype FRT_WEIGHT_FP8: the prefix's MLP through E4M3 (its
 * weights at load, its inputs per row; docs/policies.md "FP8 weights"):
 * the chunk within FP8's bar of the f32 one (norm-wise rel <= 3e-2, cosine
 * >= 0.999) and not equal to it, the same bytes on a second run, another
 * fingerprint (an f32 capsule refused, the live state kept: the next run
 * gives the same chunk), an FP8 capsule restored byte-identically. */
static void test_fp8(const char *root, int pi05)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, pi05 ? "pi05" : "pi0");
    frt_model_params p = frt_model_default_params(), p8 = p;
    p8.weight_dtype = FRT_WEIGHT_FP8;
    frt_model *m = NULL, *f = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    CHECK_OK(frt_model_load(dir, &p8, &f));
    if (!m || !f) {
        frt_model_free(m), frt_model_free(f);
        return;
    }
    static obs o;
    random_obs(&o);
    float a[NA], b[NA], c[NA];
    run(m, &o, pi05, a);
    run(f, &o, pi05, b);
    double num = 0, den = 0, ab = 0, bb = 0;
    for (int i = 0; i < NA; i++)
        num += ((double)b[i] - a[i]) * ((double)b[i] - a[i]), den += (double)a[i] * a[i], ab += (double)a[i] * b[i],
            bb += (double)b[i] * b[i];
    const double rel = sqrt(num / den), cs = ab / sqrt(den * bb);
    printf("  %s fp8 (cpu, emulated) against f32: actions rel %.3e (<= 3e-2), cos %.6f (>= 0.999)\n",
           pi05 ? "pi05" : "pi0", rel, cs);
    CHECK(rel <= 3e-2 && cs >= 0.999);
    CHECK_MSG(memcmp(a, b, sizeof a) != 0, "fp8 weights gave the f32 chunk");
    float va[NA], vb[NA]; /* the first step's velocity: FP8's error before the steps damp it */
    CHECK_OK(frt_model_output_read(m, "velocity0", va, sizeof va));
    CHECK_OK(frt_model_output_read(f, "velocity0", vb, sizeof vb));
    num = den = 0;
    for (int i = 0; i < NA; i++) num += ((double)vb[i] - va[i]) * ((double)vb[i] - va[i]), den += (double)va[i] * va[i];
    printf("  %s fp8 (cpu, emulated) against f32: velocity0 rel %.3e (<= 0.1)\n", pi05 ? "pi05" : "pi0",
           sqrt(num / den));
    CHECK(num > 0 && sqrt(num / den) <= 0.1);
    run(f, &o, pi05, c);
    CHECK_MSG(memcmp(b, c, sizeof b) == 0, "fp8: a second run differs");
    CHECK(frt_model_fingerprint(f) != frt_model_fingerprint(m));
    frt_policy_inputs in = inputs(&o, pi05);
    in.noise = NULL;
    CHECK_MSG(policy_precision_capsules(f, m, &in, 7, b, c, NA),
              "fp8: the capsule restore does not give the same chunk");
    frt_model_free(m), frt_model_free(f);
}

/* ---- classifier-free guidance ------------------------------------------ */

static void run_cfg(frt_model *m, frt_policy_inputs *in, float beta, frt_policy_cfg_mode mode, float *out)
{
    CHECK_OK(frt_policy_set_cfg(m, 1, beta, 1));
    CHECK_OK(frt_policy_set_cfg_mode(m, mode));
    CHECK_OK(frt_policy_run(m, in, out, NA));
}

/* Off = the unguided path, bit for bit, before and after a guided run. */
static void cfg_off_unchanged(frt_model *m, obs *o, cond_prompt *c, int pi05)
{
    float a[NA], b[NA];
    run(m, o, pi05, a);
    const uint64_t before = XXH64(a, sizeof a, 0);
    frt_policy_inputs in = guided(o, c, pi05);
    run_cfg(m, &in, 2.0f, FRT_POLICY_CFG_FUSED, b);
    CHECK_MSG(memcmp(a, b, sizeof a) != 0, "guidance did not change the chunk");
    CHECK_OK(frt_policy_set_cfg(m, 0, 2.0f, 1));
    run(m, o, pi05, b);
    CHECK_MSG(XXH64(b, sizeof b, 0) == before, "CFG off after a guided run is not the unguided chunk");
    int en = -1, adv = -1;
    float beta = 0;
    CHECK_OK(frt_policy_cfg_get(m, &en, &beta, &adv));
    CHECK(en == 0 && beta == 2.0f && adv == 1);
}

/* C2: beta 1 against the conditioned prompt alone; C4: fused against
 * serial. */
static void cfg_c2_c4(frt_model *m, obs *o, cond_prompt *c, int pi05)
{
    float cond[NA], g[NA], f[NA], s[NA], prev[NA];
    obs oc = *o;
    frt_policy_inputs in = inputs(&oc, pi05);
    in.input_ids = c->ids, in.attention_mask = c->am, in.n_tokens = TOK + 2;
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.0f, 1));
    CHECK_OK(frt_policy_run(m, &in, cond, NA));
    in = guided(o, c, pi05);
    run_cfg(m, &in, 1.0f, FRT_POLICY_CFG_SERIAL, g);
    double rel = frt_test_rel_err(g, cond, NA);
    CHECK_MSG(rel <= 1e-6, "C2 beta 1 vs the conditioned prompt alone: rel %.3e", rel);
    printf("C2 (%s): beta 1 vs cond-only rel %.3e\n", pi05 ? "pi05" : "pi0", rel);
    const float betas[] = {1.0f, 1.5f, 2.0f, 2.5f};
    for (int i = 0; i < 4; i++) {
        run_cfg(m, &in, betas[i], FRT_POLICY_CFG_FUSED, f);
        run_cfg(m, &in, betas[i], FRT_POLICY_CFG_SERIAL, s);
        CHECK_MSG(memcmp(f, s, sizeof f) == 0, "C4 fused vs serial differ at beta %g", (double)betas[i]);
        if (i) CHECK_MSG(memcmp(f, prev, sizeof f) != 0, "beta %g gave beta %g's chunk", (double)betas[i],
                         (double)betas[i - 1]);
        memcpy(prev, f, sizeof f);
        /* Warm re-entry under CFG: the steps alone on both prefixes. */
        CHECK_OK(frt_policy_denoise(m, in.state, in.n_state, in.noise, s, NA));
        CHECK_MSG(memcmp(f, s, sizeof f) == 0, "guided denoise-only differs at beta %g", (double)betas[i]);
    }
}

/* C3: the same prompt in both slots: byte-identical slots, and the
 * unguided chunk (v_c == v_u makes the combine return v_u exactly). */
static void cfg_c3(frt_model *m, obs *o, int pi05)
{
    float plain[NA], f[NA], vs[2 * NA];
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.0f, 1));
    run(m, o, pi05, plain);
    frt_policy_inputs in = inputs(o, pi05);
    in.input_ids_cond = o->ids, in.attention_mask_cond = o->am, in.n_tokens_cond = TOK;
    run_cfg(m, &in, 2.5f, FRT_POLICY_CFG_FUSED, f);
    CHECK_OK(frt_model_output_read(m, "velocity_slots", vs, sizeof vs));
    CHECK_MSG(memcmp(vs, vs + NA, NA * sizeof(float)) == 0, "C3: the two slots differ");
    CHECK_MSG(memcmp(f, plain, sizeof f) == 0, "C3: the same prompt twice is not the unguided chunk");
}

/* A capsule of a guided inference carries both prefixes: restored after an
 * unguided run (which empties the conditioned one), denoise-only gives the
 * guided chunk again; with CFG on and no conditioned prefix it is refused. */
static void cfg_capsule(frt_model *m, obs *o, cond_prompt *c, int pi05)
{
    float g[NA], b[NA];
    frt_policy_inputs in = guided(o, c, pi05);
    run_cfg(m, &in, 1.5f, FRT_POLICY_CFG_FUSED, g);
    frt_capsule *cap = NULL;
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_HOST, NULL, NULL, 0, &cap));
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.5f, 1));
    run(m, o, pi05, b);
    CHECK_OK(frt_policy_set_cfg(m, 1, 1.5f, 1));
    uint64_t h = state_hash(m);
    CHECK_STATUS(frt_policy_denoise(m, in.state, in.n_state, in.noise, b, NA), FRT_ERR_STATE);
    CHECK(state_hash(m) == h);
    if (cap) CHECK_OK(frt_capsule_restore(m, cap));
    CHECK_OK(frt_policy_denoise(m, in.state, in.n_state, in.noise, b, NA));
    CHECK_MSG(memcmp(g, b, sizeof g) == 0, "denoise-only after restoring a guided capsule differs");
    frt_capsule_free(cap);
}

/* Every refusal leaves the settings and the state as they were. */
static void cfg_bad(frt_model *m, obs *o, cond_prompt *c, int pi05)
{
    float out[NA];
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.5f, 0));
    const uint64_t h = state_hash(m);
    const float bad_beta[] = {0.999f, 0.0f, -2.0f, NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 6; i++) CHECK_STATUS(frt_policy_set_cfg(m, 1, bad_beta[i], 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "[1, inf)") != NULL);
    CHECK_STATUS(frt_policy_set_cfg(m, 2, 1.5f, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_set_cfg(m, 1, 1.5f, 2), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_set_cfg(NULL, 1, 1.5f, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_set_cfg_mode(m, (frt_policy_cfg_mode)7), FRT_ERR_INVALID_ARGUMENT);
    int en = -1, adv = -1;
    float beta = 0;
    CHECK_OK(frt_policy_cfg_get(m, &en, &beta, &adv));
    CHECK(en == 0 && beta == 1.5f && adv == 0);
    frt_policy_inputs in = guided(o, c, pi05); /* CFG off: a conditioned prompt is refused */
    CHECK_STATUS(frt_policy_run(m, &in, out, NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_policy_set_cfg(m, 1, 1.5f, 0));
    in = inputs(o, pi05); /* CFG on: the conditioned prompt is required */
    CHECK_STATUS(frt_policy_run(m, &in, out, NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "input_ids_cond") != NULL);
    cond_prompt bad = *c;
    in = guided(o, &bad, pi05);
    bad.ids[1] = 61; /* outside the vocabulary */
    CHECK_STATUS(frt_policy_run(m, &in, out, NA), FRT_ERR_INVALID_ARGUMENT);
    bad = *c, bad.am[0] = 2;
    CHECK_STATUS(frt_policy_run(m, &in, out, NA), FRT_ERR_INVALID_ARGUMENT);
    memset(bad.am, 0, sizeof bad.am);
    CHECK_STATUS(frt_policy_run(m, &in, out, NA), FRT_ERR_INVALID_ARGUMENT);
    in.n_tokens_cond = 201;
    CHECK_STATUS(frt_policy_run(m, &in, out, NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK_MSG(state_hash(m) == h, "a refused CFG input changed the state");
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.0f, 1));
}

static void test_cfg(const char *root, int pi05)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, pi05 ? "pi05" : "pi0");
    frt_model_params p = frt_model_default_params();
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    if (!m) return;
    static obs o;
    cond_prompt c;
    random_obs(&o);
    make_cond(&o, &c);
    cfg_off_unchanged(m, &o, &c, pi05);
    cfg_c2_c4(m, &o, &c, pi05);
    cfg_c3(m, &o, pi05);
    cfg_capsule(m, &o, &c, pi05);
    cfg_bad(m, &o, &c, pi05);
    frt_model_free(m);
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
    test_fp8(root, 0);
    test_fp8(root, 1);
    test_cfg(root, 0);
    test_cfg(root, 1);
    test_real_config(root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return frt_test_report();
}
