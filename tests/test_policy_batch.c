/*
 * test_policy_batch.c - batched rollouts (frt_policy_run_batch) of a tiny
 * generated Pi0 / Pi0.5 on the cpu backend, on random observations:
 *   - B = 4 rollouts with four different observations (cameras, prompts,
 *     states, noise) equal four frt_policy_run calls, bit for bit, with CFG
 *     off and on (two slots a rollout; fused and serial single runs);
 *   - rollouts without caller noise draw the episode stream in rollout
 *     order: the chunks of four successive single runs, step counter + 4;
 *   - the default path is unchanged: a model loaded with batch slots gives
 *     the single inference of a model loaded without them (hash of the
 *     chunk), before and after a batch, and a batch leaves prefix.* alone;
 *   - the batch slots are state entries: a capsule taken after a batch
 *     restores them byte for byte after another batch; a model with slots
 *     has another fingerprint, and a capsule of a model without them is
 *     refused (FRT_ERR_MISMATCH, nothing changed);
 *   - refusals with nothing changed: more rollouts than slots (with and
 *     without CFG), n < 1, a short output, a bad input in one rollout (the
 *     message names it), no slots at all, policy_batch out of range at load
 *     or given to a token model (whose batch verb is FRT_ERR_UNSUPPORTED).
 */
#include "frt_test.h"

#include "frt/capsule.h"
#include "policy_gen_util.h"

#include <unistd.h>

enum { SLOTS = 8, N = 4 };

static frt_model *load(const char *dir, int slots)
{
    frt_model_params p = frt_model_default_params();
    p.policy_batch = slots;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    return m;
}

/* Four different observations; rollout r's cameras and prompt lengths vary
 * too (r = 1: one camera; r = 2: no right pads). */
static void make_batch(obs *o, cond_prompt *c, frt_policy_inputs *in, int pi05, int cfg)
{
    for (int r = 0; r < N; r++) {
        random_obs(&o[r]);
        make_cond(&o[r], &c[r]);
        in[r] = cfg ? guided(&o[r], &c[r], pi05) : inputs(&o[r], pi05);
    }
    in[1].n_cameras = 1;
    for (int i = 0; i < TOK; i++) o[2].am[i] = 1;
}

static void singles(frt_model *m, const frt_policy_inputs *in, float *out)
{
    for (int r = 0; r < N; r++) CHECK_OK(frt_policy_run(m, &in[r], out + r * NA, NA));
}

/* Batch == four single runs, unguided and guided (both arrangements). */
static void batch_equals_singles(frt_model *m, int pi05)
{
    static obs o[N];
    cond_prompt c[N];
    frt_policy_inputs in[N];
    float one[N * NA], all[N * NA];
    for (int cfg = 0; cfg < 2; cfg++) {
        make_batch(o, c, in, pi05, cfg);
        CHECK_OK(frt_policy_set_cfg(m, cfg, 2.0f, 1));
        for (int mode = 0; mode < 1 + cfg; mode++) {
            CHECK_OK(frt_policy_set_cfg_mode(m, mode ? FRT_POLICY_CFG_SERIAL : FRT_POLICY_CFG_FUSED));
            singles(m, in, one);
            memset(all, 0, sizeof all);
            CHECK_OK(frt_policy_run_batch(m, in, N, all, N * NA));
            for (int r = 0; r < N; r++)
                CHECK_MSG(memcmp(one + r * NA, all + r * NA, NA * sizeof(float)) == 0,
                          "%s cfg %d mode %d: rollout %d differs from its single run", pi05 ? "pi05" : "pi0", cfg,
                          mode, r);
            for (int r = 1; r < N; r++) CHECK(memcmp(all, all + r * NA, NA * sizeof(float)) != 0);
        }
    }
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.0f, 1));
    CHECK_OK(frt_policy_set_cfg_mode(m, FRT_POLICY_CFG_FUSED));
}

/* No caller noise: rollout r draws step start + r of the episode. */
static void batch_episode(frt_model *m, int pi05)
{
    static obs o[N];
    cond_prompt c[N];
    frt_policy_inputs in[N];
    float one[N * NA], all[N * NA];
    make_batch(o, c, in, pi05, 0);
    for (int r = 0; r < N; r++) in[r].noise = NULL;
    CHECK_OK(frt_policy_episode_start(m, 31));
    singles(m, in, one);
    CHECK_OK(frt_policy_episode_start(m, 31));
    CHECK_OK(frt_policy_run_batch(m, in, N, all, N * NA));
    CHECK_MSG(memcmp(one, all, sizeof one) == 0, "episode noise: the batch is not four successive runs");
    uint64_t seed, step;
    CHECK_OK(frt_policy_episode_get(m, &seed, &step));
    CHECK(seed == 31 && step == N);
}

/* The single inference of a model with slots is the one of a model without
 * them, before and after a batch; a batch leaves prefix.* unchanged. */
static void default_unchanged(frt_model *plain, frt_model *m, int pi05)
{
    static obs o[N];
    cond_prompt c[N];
    frt_policy_inputs in[N];
    float a[NA], b[NA], all[N * NA];
    make_batch(o, c, in, pi05, 0);
    CHECK_OK(frt_policy_run(plain, &in[0], a, NA));
    const uint64_t want = XXH64(a, sizeof a, 0);
    CHECK_OK(frt_policy_run(m, &in[0], b, NA));
    CHECK_MSG(XXH64(b, sizeof b, 0) == want, "batch slots changed the single inference");
    const int L = DIMS.layers;
    const frt_state_entry *pre = &m->state[0];
    const uint64_t before = XXH64(frt_buffer_ptr(pre->buf), pre->bytes, 0);
    CHECK_OK(frt_policy_run_batch(m, &in[1], N - 1, all, N * NA));
    CHECK_MSG(XXH64(frt_buffer_ptr(pre->buf), pre->bytes, 0) == before, "a batch changed prefix.0.k");
    CHECK(!strcmp(m->state[0].decl.name, "prefix.0.k") && !strcmp(m->state[2 * (2 * L + 2)].decl.name, "batch.0.k"));
    CHECK(m->state[2 * (2 * L + 2)].decl.ndim == 4 && m->state[2 * (2 * L + 2)].decl.shape[0] == SLOTS);
    /* Each rollout's prefix in its own slot: rows and valid rows of in[1]
     * (one camera of 4 patches, 6 of 9 tokens valid), in[2] (2 of 3
     * cameras, 9 valid tokens), in[3] (2 of 3 cameras, 6 valid). */
    const int32_t *meta = frt_buffer_ptr(m->state[2 * (2 * L + 2) + 2 * L].buf);
    CHECK(meta[0] == 13 && meta[1] == 10 && meta[4] == 21 && meta[5] == 17 && meta[8] == 21 && meta[9] == 14);
    CHECK_OK(frt_policy_run(m, &in[0], b, NA));
    CHECK_MSG(XXH64(b, sizeof b, 0) == want, "the single inference after a batch differs");
}

/* A capsule carries the batch slots. */
static void batch_capsule(frt_model *m, int pi05)
{
    static obs o[N];
    cond_prompt c[N];
    frt_policy_inputs in[N];
    float all[N * NA];
    make_batch(o, c, in, pi05, 0);
    CHECK_OK(frt_policy_run_batch(m, in, N, all, N * NA));
    const uint64_t h = state_hash(m);
    frt_capsule *cap = NULL;
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_HOST, NULL, NULL, 0, &cap));
    make_batch(o, c, in, pi05, 0);
    CHECK_OK(frt_policy_run_batch(m, in, N, all, N * NA));
    CHECK(state_hash(m) != h);
    if (cap) CHECK_OK(frt_capsule_restore(m, cap));
    CHECK_MSG(state_hash(m) == h, "the restored batch slots differ");
    frt_capsule_free(cap);
}

/* Another slot count is another state table: another fingerprint, and a
 * capsule does not cross (refused, nothing changed). */
static void batch_fingerprint(frt_model *m, frt_model *plain)
{
    CHECK(frt_model_fingerprint(m) != frt_model_fingerprint(plain));
    frt_capsule *cap = NULL;
    CHECK_OK(frt_capsule_snapshot(plain, FRT_TIER_HOST, NULL, NULL, 0, &cap));
    const uint64_t h = state_hash(m);
    if (cap) CHECK_STATUS(frt_capsule_restore(m, cap), FRT_ERR_MISMATCH);
    CHECK(state_hash(m) == h);
    frt_capsule_free(cap);
}

/* Refusals leave the state (and the episode) as they were. */
static void batch_bad(frt_model *m, frt_model *plain, int pi05)
{
    static obs o[N];
    cond_prompt c[N];
    frt_policy_inputs in[SLOTS + 1];
    float all[(SLOTS + 1) * NA];
    make_batch(o, c, in, pi05, 0);
    for (int r = N; r <= SLOTS; r++) in[r] = in[r % N];
    const uint64_t h = state_hash(m);
    CHECK_STATUS(frt_policy_run_batch(m, in, SLOTS + 1, all, (SLOTS + 1) * NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "slots") != NULL);
    CHECK_STATUS(frt_policy_run_batch(m, in, 0, all, NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_run_batch(m, in, N, all, N * NA - 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_run_batch(m, NULL, N, all, N * NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_run_batch(NULL, in, N, all, N * NA), FRT_ERR_INVALID_ARGUMENT);
    o[2].px[7] = NAN;
    CHECK_STATUS(frt_policy_run_batch(m, in, N, all, N * NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "rollout 2") != NULL && strstr(frt_last_error(), "pixel_values") != NULL);
    o[2].px[7] = 0.5f;
    /* Under CFG a rollout takes two slots: 5 rollouts need 10 of 8. */
    for (int r = 0; r <= SLOTS; r++) in[r] = guided(&o[r % N], &c[r % N], pi05);
    CHECK_OK(frt_policy_set_cfg(m, 1, 1.5f, 1));
    CHECK_STATUS(frt_policy_run_batch(m, in, SLOTS / 2 + 1, all, (SLOTS + 1) * NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "CFG") != NULL);
    in[1].input_ids_cond = NULL; /* CFG on: every rollout needs its conditioned prompt */
    CHECK_STATUS(frt_policy_run_batch(m, in, N, all, N * NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "rollout 1") != NULL);
    CHECK_OK(frt_policy_set_cfg(m, 0, 1.0f, 1));
    CHECK_MSG(state_hash(m) == h, "a refused batch changed the state");
    frt_policy_info pi;
    CHECK_OK(frt_policy_info_get(plain, &pi));
    CHECK(pi.batch_slots == 0);
    in[0] = inputs(&o[0], pi05);
    CHECK_STATUS(frt_policy_run_batch(plain, in, 1, all, NA), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_policy_info_get(m, &pi));
    CHECK(pi.batch_slots == SLOTS);
}

static void test_one(const char *root, int pi05)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, pi05 ? "pi05" : "pi0");
    CHECK_OK(write_policy(dir, pi05, 9));
    frt_model *m = load(dir, SLOTS), *plain = load(dir, 0);
    if (!m || !plain) return;
    batch_equals_singles(m, pi05);
    batch_episode(m, pi05);
    default_unchanged(plain, m, pi05);
    batch_capsule(m, pi05);
    batch_fingerprint(m, plain);
    batch_bad(m, plain, pi05);
    frt_model_params p = frt_model_default_params();
    frt_model *bad = NULL;
    p.policy_batch = -1;
    CHECK_STATUS(frt_model_load(dir, &p, &bad), FRT_ERR_INVALID_ARGUMENT);
    p.policy_batch = FRT_POLICY_BATCH_MAX + 1;
    CHECK_STATUS(frt_model_load(dir, &p, &bad), FRT_ERR_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    frt_model_free(m);
    frt_model_free(plain);
}

/* A token model refuses policy_batch at load; the batch verb refuses it. */
static void test_token_model(const char *root)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tiny", root);
    CHECK_OK(frt_gen_model_write("tiny", 3, dir));
    frt_model_params p = frt_model_default_params();
    frt_model *m = NULL;
    p.policy_batch = 2;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL && strstr(frt_last_error(), "not a policy") != NULL);
    p.policy_batch = 0;
    CHECK_OK(frt_model_load(dir, &p, &m));
    static obs o;
    random_obs(&o);
    frt_policy_inputs in = inputs(&o, 0);
    float out[NA];
    if (m) CHECK_STATUS(frt_policy_run_batch(m, &in, 1, out, NA), FRT_ERR_UNSUPPORTED);
    frt_model_free(m);
}

int main(void)
{
    char root[] = "/tmp/frt_test_policy_batch_XXXXXX";
    if (!mkdtemp(root)) TEST_SKIP("no temporary directory");
    frt_test_seed(2121);
    test_one(root, 0);
    test_one(root, 1);
    test_token_model(root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return frt_test_report();
}
