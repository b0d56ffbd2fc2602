/*
 * test_cuda_policy_batch.c - batched rollouts (frt_policy_run_batch) of a
 * small generated Pi0 / Pi0.5 on the cuda backend (pi0_cuda.c
 * record_batch), on random observations:
 *   - B = 4 rollouts with four different observations (camera counts, an
 *     absent camera, prompt lengths and pads, states, noise) against four
 *     single cuda runs of frt_policy_run, per rollout cosine >= 0.999 and
 *     norm-wise rel <= 3e-2 (not bit for bit: the batch stacks the slots'
 *     rows in the expert's GEMMs and runs the largest observation's camera
 *     slots and prompt bucket, other shapes than a single run's), and
 *     against the cpu backend's
 *     batch on the same weights within the same bar; with CFG off and on
 *     (beta 2, two slots a rollout, against fused single runs);
 *   - what is exact: the batch graph replayed again on the same inputs gives
 *     byte-identical actions; a single run after a batch gives the bits it
 *     gave before (the batch leaves prefix.* alone);
 *   - rollouts without caller noise draw the episode stream in rollout
 *     order (within the bar of four successive single runs), the step
 *     counter advances by 4;
 *   - one graph a (rollout count, CFG, shape of the largest observation)
 *     used, captured on first use: four one-camera observations run a
 *     graph of one camera slot, within the same bar;
 *   - unguided rollouts' prefixes run two at a time: after a batch,
 *     vision_tokens holds the last rollout's; an odd count (3: a pair,
 *     then one alone) within the bar of three single runs;
 *   - refusals with nothing changed (the state read back byte for byte, the
 *     output untouched): more rollouts than slots with CFG on (5 x 2 > 8)
 *     and off (9 > 8), the message naming the slots.
 * Prints rel and cosine per rollout.
 */
#include "frt_test.h"

#include "policy_gen_util.h"

#include <math.h>
#include <unistd.h>

#if FRT_HAVE_CUDA

static const frt_gen_policy_dims SMALL = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 16, .vocab = 61,
    .e_width = 16, .e_inter = 24, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
};

enum { SLOTS = 8, N = 4, BMAXTOK = 20, BNPX = 3 * 3 * 42 * 42, BNA = 7 * 8 };

/* One rollout's observation (the prompt and the conditioned prompt of CFG). */
typedef struct bobs {
    float px[BNPX], state[8], noise[BNA];
    uint8_t cam[3], am[BMAXTOK], amc[BMAXTOK];
    int32_t ids[BMAXTOK], idsc[BMAXTOK];
} bobs;

static const int R_CAMS[N] = {3, 1, 2, 3}, R_TOKS[N] = {11, 5, 13, 8};

static void bobs_make(bobs *o, int r)
{
    frt_test_fill(o->px, BNPX, -1, 1);
    frt_test_fill(o->state, 8, -1, 1);
    frt_test_fill(o->noise, BNA, -2, 2);
    for (int c = 0; c < 3; c++) o->cam[c] = !(r == 0 && c == 1); /* rollout 0: the middle camera absent */
    for (int i = 0; i < BMAXTOK; i++) {
        o->ids[i] = 1 + (int32_t)(frt_test_u64() % 60);
        o->idsc[i] = 1 + (int32_t)(frt_test_u64() % 60);
        o->am[i] = i < R_TOKS[r] - (r == 2 ? 0 : 2); /* two right pads, none for rollout 2 */
        o->amc[i] = i < BMAXTOK - 1;
    }
}

static frt_policy_inputs b_inputs(bobs *o, int r, int pi05, int cfg, int noise)
{
    frt_policy_inputs in;
    memset(&in, 0, sizeof in);
    in.pixel_values = o->px, in.n_cameras = R_CAMS[r], in.channels = 3, in.height = in.width = 42;
    in.camera_mask = o->cam, in.input_ids = o->ids, in.attention_mask = o->am, in.n_tokens = R_TOKS[r];
    in.state = pi05 ? NULL : o->state, in.n_state = pi05 ? 0 : 8;
    in.noise = noise ? o->noise : NULL;
    if (cfg) in.input_ids_cond = o->idsc, in.attention_mask_cond = o->amc, in.n_tokens_cond = BMAXTOK;
    return in;
}

static frt_model *load(const char *dir, frt_backend b, int slots)
{
    frt_model_params p = frt_model_default_params();
    p.backend = b;
    p.max_seq = BMAXTOK;
    p.policy_batch = slots;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    return m;
}

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

/* Each of the n rollouts of the batch `got` against `ref` within the
 * issue's bar. */
static void per_rollout_n(const char *what, const float *got, const float *ref, int n)
{
    for (int r = 0; r < n; r++) {
        const float *a = got + r * BNA, *b = ref + r * BNA;
        const double rel = frt_test_rel_err(a, b, BNA), cs = cosine(a, b, BNA);
        const int ok = rel <= 3e-2 && cs >= 0.999;
        printf("  %-40s rollout %d  rel %.3e (<= 3e-2)  cos %.6f (>= 0.999)  %s\n", what, r, rel, cs,
               ok ? "ok" : "FAIL");
        CHECK_MSG(ok, "%s rollout %d: rel %.3e cos %.6f", what, r, rel, cs);
    }
}
static void per_rollout(const char *what, const float *got, const float *ref) { per_rollout_n(what, got, ref, N); }

/* The whole live state read back to the host, hashed. */
static uint64_t state_hash_dev(frt_model *m)
{
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (int i = 0; i < m->n_state; i++) {
        void *buf = malloc(m->state[i].bytes);
        CHECK_OK(frt_buffer_read(m->state[i].buf, 0, buf, m->state[i].bytes, m->stream));
        CHECK_OK(frt_stream_sync(m->stream));
        XXH64_update(h, buf, m->state[i].bytes);
        free(buf);
    }
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

/* Batch vs singles vs the cpu batch, then the batch replayed again. */
static void batch_vs(const char *name, frt_model *g, frt_model *c, bobs *o, int pi05, int cfg)
{
    frt_policy_inputs in[N];
    float single[N * BNA], batch[N * BNA], again[N * BNA], cpu[N * BNA];
    char what[96];
    for (int r = 0; r < N; r++) in[r] = b_inputs(&o[r], r, pi05, cfg, 1);
    for (frt_model *m = g; m; m = m == g ? c : NULL) {
        CHECK_OK(frt_policy_set_cfg(m, cfg, cfg ? 2.0f : 1.0f, 1));
        if (cfg) CHECK_OK(frt_policy_set_cfg_mode(m, FRT_POLICY_CFG_FUSED));
    }
    for (int r = 0; r < N; r++) CHECK_OK(frt_policy_run(g, &in[r], single + r * BNA, BNA));
    CHECK_OK(frt_policy_run_batch(g, in, N, batch, N * BNA));
    CHECK_OK(frt_policy_run_batch(c, in, N, cpu, N * BNA));
    snprintf(what, sizeof what, "%s%s batch vs single", name, cfg ? " cfg" : "");
    per_rollout(what, batch, single);
    snprintf(what, sizeof what, "%s%s batch vs cpu batch", name, cfg ? " cfg" : "");
    per_rollout(what, batch, cpu);
    CHECK_OK(frt_policy_run_batch(g, in, N, again, N * BNA));
    CHECK_MSG(memcmp(batch, again, sizeof batch) == 0, "%s: the batch replayed again differs", name);
    printf("  %-40s replayed again: %s\n", what, memcmp(batch, again, sizeof batch) ? "DIFFERS" : "byte-identical");
}

/* The four observations with one camera each: a smaller graph variant
 * (1 camera slot) than the mixed batch's (3), within the same bar. */
static void batch_one_camera(const char *name, frt_model *g, bobs *o, int pi05)
{
    frt_policy_inputs in[N];
    float single[N * BNA], batch[N * BNA];
    for (int r = 0; r < N; r++) in[r] = b_inputs(&o[r], r, pi05, 0, 1), in[r].n_cameras = 1;
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    for (int r = 0; r < N; r++) CHECK_OK(frt_policy_run(g, &in[r], single + r * BNA, BNA));
    CHECK_OK(frt_policy_run_batch(g, in, N, batch, N * BNA));
    char what[96];
    snprintf(what, sizeof what, "%s one camera each, batch vs single", name);
    per_rollout(what, batch, single);
}

/* Episode noise in rollout order: four successive single runs. */
static void batch_episode(const char *name, frt_model *g, bobs *o, int pi05)
{
    frt_policy_inputs in[N];
    float single[N * BNA], batch[N * BNA];
    uint64_t seed, step;
    for (int r = 0; r < N; r++) in[r] = b_inputs(&o[r], r, pi05, 0, 0);
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    CHECK_OK(frt_policy_episode_start(g, 99));
    for (int r = 0; r < N; r++) CHECK_OK(frt_policy_run(g, &in[r], single + r * BNA, BNA));
    CHECK_OK(frt_policy_episode_start(g, 99));
    CHECK_OK(frt_policy_run_batch(g, in, N, batch, N * BNA));
    CHECK_OK(frt_policy_episode_get(g, &seed, &step));
    CHECK(seed == 99 && step == N);
    char what[96];
    snprintf(what, sizeof what, "%s episode noise, batch vs singles", name);
    per_rollout(what, batch, single);
}

/* Unguided rollouts run their prefixes two at a time (rollout r + 1's
 * vision last): after a batch of 4, vision_tokens holds the last
 * rollout's (its single run's within 1e-2; the rollout before's differs by
 * more than 0.1, so the comparison can fail); a batch of 3 (a pair, then
 * one alone) against three single runs. */
static void batch_vision_odd(const char *name, frt_model *g, bobs *o, int pi05)
{
    enum { NVT = 3 * 9 * 32 }; /* vision_tokens: 3 camera slots x 9 patches x the prefix width */
    frt_policy_inputs in[N];
    float single[N * BNA], batch[N * BNA], vb[NVT], vl[NVT], vp[NVT];
    for (int r = 0; r < N; r++) in[r] = b_inputs(&o[r], r, pi05, 0, 1);
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    CHECK_OK(frt_policy_run_batch(g, in, N, batch, N * BNA));
    CHECK_OK(frt_model_output_read(g, "vision_tokens", vb, sizeof vb));
    CHECK_OK(frt_policy_run(g, &in[N - 2], single, BNA));
    CHECK_OK(frt_model_output_read(g, "vision_tokens", vp, sizeof vp));
    CHECK_OK(frt_policy_run(g, &in[N - 1], single, BNA));
    CHECK_OK(frt_model_output_read(g, "vision_tokens", vl, sizeof vl));
    const double last = frt_test_rel_err(vb, vl, NVT);
    const double prev = frt_test_rel_err(vb, vp, (size_t)R_CAMS[N - 2] * 9 * 32); /* its given cameras */
    printf("  %-40s vision_tokens after a batch: rel %.3e to the last rollout's (<= 1e-2), %.3e to the one "
           "before (> 0.1)\n",
           name, last, prev);
    CHECK_MSG(last <= 1e-2 && prev > 0.1, "%s: vision_tokens after a batch: rel %.3e to the last, %.3e before", name,
              last, prev);
    for (int r = 0; r < 3; r++) CHECK_OK(frt_policy_run(g, &in[r], single + r * BNA, BNA));
    CHECK_OK(frt_policy_run_batch(g, in, 3, batch, 3 * BNA));
    char what[96];
    snprintf(what, sizeof what, "%s 3 rollouts, batch vs single", name);
    per_rollout_n(what, batch, single, 3);
}

/* More rollouts than slots: refused, the state and the output unchanged. */
static void batch_refusals(frt_model *g, bobs *o, int pi05)
{
    frt_policy_inputs in[SLOTS + 1];
    static float out[(SLOTS + 1) * BNA], keep[(SLOTS + 1) * BNA];
    for (int r = 0; r <= SLOTS; r++) in[r] = b_inputs(&o[r % N], r % N, pi05, 1, 1);
    frt_test_fill(out, (SLOTS + 1) * BNA, -1, 1);
    memcpy(keep, out, sizeof out);
    const uint64_t h = state_hash_dev(g);
    CHECK_OK(frt_policy_set_cfg(g, 1, 2.0f, 1));
    CHECK_STATUS(frt_policy_run_batch(g, in, SLOTS / 2 + 1, out, sizeof out / sizeof out[0]),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "slots") != NULL);
    printf("  refused (cfg, %d rollouts): %s\n", SLOTS / 2 + 1, frt_last_error());
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    for (int r = 0; r <= SLOTS; r++) in[r] = b_inputs(&o[r % N], r % N, pi05, 0, 1);
    CHECK_STATUS(frt_policy_run_batch(g, in, SLOTS + 1, out, sizeof out / sizeof out[0]), FRT_ERR_INVALID_ARGUMENT);
    printf("  refused (%d rollouts): %s\n", SLOTS + 1, frt_last_error());
    CHECK(state_hash_dev(g) == h);
    CHECK(memcmp(out, keep, sizeof out) == 0);
}

static void run_arch(const char *name, int pi05)
{
    char dir[] = "/tmp/frt_test_cuda_policy_batch_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_OK(write_policy_dims(dir, &SMALL, pi05, 0xba7c4 + (uint64_t)pi05));
    frt_model *g = load(dir, FRT_BACKEND_CUDA, SLOTS), *c = load(dir, FRT_BACKEND_CPU, SLOTS);
    static bobs o[N];
    for (int r = 0; r < N; r++) bobs_make(&o[r], r);
    frt_policy_inputs in0 = b_inputs(&o[0], 0, pi05, 0, 1);
    float before[BNA], after[BNA];
    CHECK_OK(frt_policy_run(g, &in0, before, BNA));
    batch_vs(name, g, c, o, pi05, 0);
    batch_vs(name, g, c, o, pi05, 1);
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    CHECK_OK(frt_policy_run(g, &in0, after, BNA));
    CHECK_MSG(memcmp(before, after, sizeof before) == 0, "%s: the single run changed after a batch", name);
    CHECK_MSG(frt_graph_count(g->g_batch) == 2, "%s: %d batch graphs (one for 4 rollouts, one guided)", name,
              frt_graph_count(g->g_batch));
    batch_one_camera(name, g, o, pi05);
    CHECK_MSG(frt_graph_count(g->g_batch) == 3, "%s: %d batch graphs (and one for one camera)", name,
              frt_graph_count(g->g_batch));
    batch_episode(name, g, o, pi05);
    batch_vision_odd(name, g, o, pi05);
    batch_refusals(g, o, pi05);
    frt_model_free(g);
    frt_model_free(c);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Exits 77 (skipped) on a machine without a CUDA device. */
static void need_device(void)
{
    int n_dev = 0;
    CHECK_OK(frt_device_count(FRT_BACKEND_CUDA, &n_dev));
    if (n_dev == 0) TEST_SKIP("no CUDA device");
}

#endif

int main(void)
{
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    need_device();
    frt_test_seed(43);
    run_arch("pi0", 0);
    run_arch("pi05", 1);
    return frt_test_report();
#endif
}
