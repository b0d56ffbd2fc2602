/*
 * test_policy.c - the Pi0 / Pi0.5 policy architecture (src/model/arch/pi0/,
 * frt/policy.h) on the cpu backend, f32:
 *
 *  1. parity with the goldens of scripts/ref/pi0_golden.py (tests/data/pi0/
 *     {pi0,pi05}/: random weights at small odd shapes, two cameras with the
 *     second masked out, a right-padded prompt, fixed noise): the action
 *     chunk against transformers' PI0ForConditionalGeneration.sample_actions
 *     (`actions`, Pi0) and the script's float64 reference of openpi's
 *     semantics (`ref_actions`, both), norm-wise rel <= 1e-4; the first
 *     step's velocity, the projected vision tokens of both cameras and the
 *     layer-0 and last-layer prefix K / V (valid rows) likewise.
 *  2. capsules: snapshot at an episode start, run, dirty every live buffer
 *     with another episode and other inputs, restore: the next chunk is
 *     byte-identical to the first; without the restore it is not. A prefix
 *     restore followed by only the denoising steps (frt_policy_denoise)
 *     equals the full inference bit for bit.
 *  3. bad input: wrong image size / channels, too many or zero cameras, no
 *     camera present, a state longer than max_state_dim, NaN in the state,
 *     an empty prompt, an id outside the vocabulary, a state given to pi05:
 *     a clear FRT_ERR_INVALID_ARGUMENT and the state table unchanged, byte
 *     for byte.
 *  4. load: an unknown tensor and a missing tensor are refused with their
 *     names, so are an F8_E4M3 tensor and config.json's quantization_config
 *     (FP8 policy checkpoints, FRT_ERR_UNSUPPORTED); the token verbs refuse a
 *     policy, so does frt_model_fork (before restoring anything); the cuda
 *     backend is refused.
 * The golden directory is FRT_TEST_DATA/pi0 (or $FRT_PI0_GOLDEN); without it
 * the test is skipped.
 */
#include "frt_test.h"

#include "frt/branch.h"
#include "frt/capsule.h"
#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "frt/safetensors.h"
#include "model/model_internal.h"
#include "util/error.h"

#include <sys/stat.h>
#include <unistd.h>

static char root[512];

typedef struct golden {
    frt_safetensors *st;
    float *px, *state, *noise;
    uint8_t *cam, *am;
    int32_t *ids;
    int n_cam, H, n_tok, n_state;
} golden;

static float *f32(frt_safetensors *st, const char *name, size_t *n)
{
    const frt_tensor *t = frt_safetensors_find(st, name);
    if (!t) return NULL;
    size_t k = (size_t)frt_tensor_numel(t);
    float *x = xmalloc(k * sizeof(float));
    if (frt_tensor_to_f32(t, x) < 0) {
        free(x);
        return NULL;
    }
    if (n) *n = k;
    return x;
}

static void *raw(frt_safetensors *st, const char *name, int64_t *n)
{
    const frt_tensor *t = frt_safetensors_find(st, name);
    if (!t) return NULL;
    void *x = xmalloc(t->nbytes);
    memcpy(x, t->data, t->nbytes);
    *n = t->shape[0];
    return x;
}

static int golden_open(const char *dir, golden *g)
{
    char path[800];
    memset(g, 0, sizeof *g);
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    if (frt_safetensors_open(path, &g->st) < 0) return -1;
    const frt_tensor *pv = frt_safetensors_find(g->st, "pixel_values");
    g->n_cam = (int)pv->shape[0];
    g->H = (int)pv->shape[2];
    g->px = f32(g->st, "pixel_values", NULL);
    int64_t n;
    g->cam = raw(g->st, "pixel_attention_mask", &n);
    g->ids = raw(g->st, "input_ids", &n);
    g->n_tok = (int)n;
    g->am = raw(g->st, "attention_mask", &n);
    size_t ns = 0;
    g->state = f32(g->st, "state", &ns);
    g->n_state = (int)ns;
    g->noise = f32(g->st, "noise", NULL);
    return 0;
}

static void golden_close(golden *g)
{
    frt_safetensors_close(g->st);
    free(g->px);
    free(g->state);
    free(g->noise);
    free(g->cam);
    free(g->am);
    free(g->ids);
}

static frt_policy_inputs inputs_of(const golden *g)
{
    frt_policy_inputs in = {g->px, g->n_cam, 3, g->H, g->H, g->cam, g->ids, g->am, g->n_tok,
                            g->state, g->n_state, g->noise, NULL, NULL, 0};
    return in;
}

static frt_model *load(const char *dir)
{
    frt_model_params p = frt_model_default_params();
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    return m;
}

/* Norm-wise error of `name` against the first `n` floats of out. */
static void check_near(frt_safetensors *st, const char *name, const float *out, size_t n, double tol)
{
    size_t k = 0;
    float *ref = f32(st, name, &k);
    if (!ref) return; /* an output the golden does not hold */
    CHECK(k >= n);
    double e = frt_test_rel_err(out, ref, n);
    printf("  %-16s rel %.3e\n", name, e);
    CHECK_MSG(e <= tol && !isnan(e), "%s rel err %.3e > %.1e", name, e, tol);
    free(ref);
}

/* The valid rows of prefix K / V of `layer` against the golden's. */
static void check_prefix(frt_model *m, frt_safetensors *st, const char *name, int entry, int n_rows, int row)
{
    size_t k = 0;
    float *ref = f32(st, name, &k);
    if (!ref) return;
    const uint8_t *mask = NULL;
    for (int i = 0; i < m->n_state; i++)
        if (!strcmp(m->state[i].decl.name, "prefix.mask")) mask = frt_buffer_ptr(m->state[i].buf);
    const float *live = frt_buffer_ptr(m->state[entry].buf);
    float *a = xmalloc(k * sizeof(float)), *b = xmalloc(k * sizeof(float));
    size_t n = 0;
    for (int r = 0; r < n_rows; r++)
        if (mask[r]) {
            memcpy(a + n, live + (size_t)r * row, (size_t)row * sizeof(float));
            memcpy(b + n, ref + (size_t)r * row, (size_t)row * sizeof(float));
            n += (size_t)row;
        }
    double e = frt_test_rel_err(a, b, n);
    printf("  %-16s rel %.3e (%zu valid values)\n", name, e, n);
    CHECK_MSG(e <= 1e-5, "%s rel err %.3e", name, e);
    free(a);
    free(b);
    free(ref);
}

static int entry_of(const frt_model *m, const char *name)
{
    for (int i = 0; i < m->n_state; i++)
        if (!strcmp(m->state[i].decl.name, name)) return i;
    return -1;
}

/* Opens the golden of `which` and loads its model; NULL when either fails
 * (recorded). */
static frt_model *open_policy(const char *which, golden *g, frt_policy_info *pi)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", root, which);
    if (golden_open(dir, g) < 0) {
        CHECK_MSG(0, "no golden in %s", dir);
        return NULL;
    }
    frt_model *m = load(dir);
    if (m) CHECK_OK(frt_policy_info_get(m, pi));
    return m;
}

static void test_parity(const char *which)
{
    printf("parity %s\n", which);
    golden g;
    frt_policy_info pi;
    frt_model *m = open_policy(which, &g, &pi);
    if (!m) return;
    size_t n = (size_t)pi.chunk * pi.action_dim;
    float *act = xmalloc(n * sizeof(float)), *vel = xmalloc(n * sizeof(float));
    frt_policy_inputs in = inputs_of(&g);
    CHECK_OK(frt_policy_run(m, &in, act, n));
    CHECK_OK(frt_model_output_read(m, "velocity0", vel, n * sizeof(float)));
    check_near(g.st, "actions", act, n, 1e-4);
    check_near(g.st, "ref_actions", act, n, 1e-4);
    check_near(g.st, "velocity0", vel, n, 1e-4);
    const frt_tensor *vtt = frt_safetensors_find(g.st, "vision_tokens");
    const int n_patch = vtt ? (int)vtt->shape[1] : 0;
    size_t nv = (size_t)g.n_cam * n_patch * m->cfg.hidden_size;
    float *vt = xmalloc(nv * sizeof(float) + 4);
    CHECK_OK(frt_model_output_read(m, "vision_tokens", vt, nv * sizeof(float)));
    check_near(g.st, "vision_tokens", vt, nv, 1e-5);
    const int rows = g.n_cam * n_patch + g.n_tok, row = m->cfg.n_kv_heads * m->cfg.head_dim;
    const int L = m->cfg.n_layers;
    check_prefix(m, g.st, "prefix_k0", entry_of(m, "prefix.0.k"), rows, row);
    check_prefix(m, g.st, "prefix_v0", entry_of(m, "prefix.0.v"), rows, row);
    char kl[32], vl[32];
    snprintf(kl, sizeof kl, "prefix.%d.k", L - 1);
    snprintf(vl, sizeof vl, "prefix.%d.v", L - 1);
    check_prefix(m, g.st, "prefix_k_last", entry_of(m, kl), rows, row);
    check_prefix(m, g.st, "prefix_v_last", entry_of(m, vl), rows, row);
    free(vt);
    free(act);
    free(vel);
    frt_model_free(m);
    golden_close(&g);
}

/* C5: classifier-free guidance against scripts/ref/pi0_cfg_golden.py's
 * float64 reference (the per-step combine over the reference above) for
 * beta 1, 1.5, 2, 2.5, fused and serial, norm-wise rel <= 1e-4. */
static void test_cfg_parity(const char *which)
{
    golden g;
    frt_policy_info pi;
    frt_model *m = open_policy(which, &g, &pi);
    if (!m) return;
    char path[800];
    frt_safetensors *cg = NULL;
    snprintf(path, sizeof path, "%s/%s/cfg_golden.safetensors", root, which);
    CHECK_OK(frt_safetensors_open(path, &cg));
    size_t n = (size_t)pi.chunk * pi.action_dim;
    float *act = xmalloc(n * sizeof(float));
    int64_t nc = 0, nm = 0;
    int32_t *ids = cg ? raw(cg, "input_ids_cond", &nc) : NULL;
    uint8_t *am = cg ? raw(cg, "attention_mask_cond", &nm) : NULL;
    frt_policy_inputs in = inputs_of(&g);
    in.input_ids_cond = ids, in.attention_mask_cond = am, in.n_tokens_cond = (int)nc;
    static const char *const names[] = {"cfg_actions_1_0", "cfg_actions_1_5", "cfg_actions_2_0", "cfg_actions_2_5"};
    const float betas[] = {1.0f, 1.5f, 2.0f, 2.5f};
    for (int i = 0; ids && am && nm == nc && i < 4; i++)
        for (int mode = 0; mode < 2; mode++) {
            CHECK_OK(frt_policy_set_cfg(m, 1, betas[i], 1));
            CHECK_OK(frt_policy_set_cfg_mode(m, mode ? FRT_POLICY_CFG_SERIAL : FRT_POLICY_CFG_FUSED));
            CHECK_OK(frt_policy_run(m, &in, act, n));
            printf("C5 %s beta %.1f %s: ", which, (double)betas[i], mode ? "serial" : "fused");
            check_near(cg, names[i], act, n, 1e-4);
        }
    free(ids);
    free(am);
    free(act);
    frt_safetensors_close(cg);
    frt_model_free(m);
    golden_close(&g);
}

/* xxh-free digest of the whole state table: a byte copy. */
static unsigned char *state_copy(frt_model *m, size_t *len)
{
    size_t n = 0;
    for (int i = 0; i < m->n_state; i++) n += m->state[i].bytes;
    unsigned char *c = xmalloc(n), *p = c;
    for (int i = 0; i < m->n_state; i++) {
        memcpy(p, frt_buffer_ptr(m->state[i].buf), m->state[i].bytes);
        p += m->state[i].bytes;
    }
    *len = n;
    return c;
}

static void test_capsule(void)
{
    golden g;
    frt_policy_info pi;
    frt_model *m = open_policy("pi0", &g, &pi);
    if (!m) return;
    size_t n = (size_t)pi.chunk * pi.action_dim;
    float *a1 = xmalloc(n * 4), *a2 = xmalloc(n * 4), *a3 = xmalloc(n * 4), *dirty = xmalloc(n * 4);
    frt_policy_inputs in = inputs_of(&g);
    in.noise = NULL; /* the episode's stream */
    CHECK_OK(frt_policy_episode_start(m, 1234));
    frt_capsule *cap = NULL;
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_HOST, NULL, NULL, 0, &cap));
    CHECK_OK(frt_policy_run(m, &in, a1, n));
    uint64_t seed = 0, step = 0;
    CHECK_OK(frt_policy_episode_get(m, &seed, &step));
    CHECK(seed == 1234 && step == 1);
    /* The next chunk of the same episode draws other noise. */
    CHECK_OK(frt_policy_run(m, &in, a3, n));
    CHECK(memcmp(a1, a3, n * 4) != 0);
    /* Dirty every live buffer: another episode, another observation. */
    frt_policy_inputs other = in;
    float *px2 = xmalloc((size_t)g.n_cam * 3 * g.H * g.H * 4);
    for (size_t i = 0; i < (size_t)g.n_cam * 3 * g.H * g.H; i++) px2[i] = -g.px[i];
    uint8_t cams[2] = {1, 1};
    other.pixel_values = px2;
    other.camera_mask = cams;
    other.attention_mask = NULL;
    CHECK_OK(frt_policy_episode_start(m, 99));
    CHECK_OK(frt_policy_run(m, &other, dirty, n));
    CHECK(memcmp(a1, dirty, n * 4) != 0);
    CHECK_OK(frt_capsule_restore(m, cap));
    CHECK_OK(frt_policy_episode_get(m, &seed, &step));
    CHECK(seed == 1234 && step == 0);
    CHECK_OK(frt_policy_run(m, &in, a2, n));
    CHECK_MSG(memcmp(a1, a2, n * 4) == 0, "actions after the episode restore differ");
    frt_capsule_free(cap);

    /* Warm re-entry: a capsule holding the prefix of this observation; after
     * another observation overwrote it, restore and run only the steps: the
     * chunk of the full inference, bit for bit. */
    frt_policy_inputs fixed = inputs_of(&g);
    CHECK_OK(frt_policy_run(m, &fixed, a1, n));
    char path[64];
    snprintf(path, sizeof path, "/tmp/frt_test_policy_%d.capsule", (int)getpid());
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_DISK, path, NULL, 0, &cap)); /* the disk tier this time */
    CHECK_OK(frt_policy_run(m, &other, dirty, n));
    CHECK_OK(frt_capsule_restore(m, cap));
    CHECK_OK(frt_policy_denoise(m, g.state, g.n_state, g.noise, a2, n));
    CHECK_MSG(memcmp(a1, a2, n * 4) == 0, "denoise-only after a prefix restore differs from the full inference");
    frt_capsule_free(cap);
    unlink(path);
    free(px2);
    free(a1);
    free(a2);
    free(a3);
    free(dirty);
    frt_model_free(m);
    golden_close(&g);
}

/* A bad input fails with FRT_ERR_INVALID_ARGUMENT and leaves the state
 * table as it was. */
static void expect_bad(frt_model *m, const frt_policy_inputs *in, float *act, size_t n, const char *what)
{
    size_t l0, l1;
    unsigned char *before = state_copy(m, &l0);
    int rc = frt_policy_run(m, in, act, n);
    CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT, "%s: got %s", what, frt_status_name(rc));
    printf("  %-22s -> %s\n", what, frt_last_error());
    unsigned char *after = state_copy(m, &l1);
    CHECK_MSG(l0 == l1 && memcmp(before, after, l0) == 0, "%s: the state changed", what);
    free(before);
    free(after);
}

static void test_bad_input(void)
{
    golden g;
    frt_policy_info pi;
    frt_model *m = open_policy("pi0", &g, &pi);
    if (!m) return;
    size_t n = (size_t)pi.chunk * pi.action_dim;
    float *act = xmalloc(n * 4);
    const frt_policy_inputs good = inputs_of(&g);
    CHECK_OK(frt_policy_run(m, &good, act, n));
    frt_policy_inputs in = good;
    in.height = g.H - 14;
    expect_bad(m, &in, act, n, "image size");
    in = good;
    in.channels = 4;
    expect_bad(m, &in, act, n, "channels");
    in = good;
    in.n_cameras = pi.max_cameras + 1;
    expect_bad(m, &in, act, n, "too many cameras");
    in = good;
    in.n_cameras = 0;
    expect_bad(m, &in, act, n, "no camera");
    uint8_t none[2] = {0, 0};
    in = good;
    in.camera_mask = none;
    expect_bad(m, &in, act, n, "every camera masked");
    float longer[64];
    frt_test_fill(longer, 64, -1, 1);
    in = good;
    in.state = longer;
    in.n_state = pi.max_state_dim + 1;
    expect_bad(m, &in, act, n, "state too long");
    float nan_state[64];
    memcpy(nan_state, g.state, (size_t)g.n_state * 4);
    nan_state[1] = NAN;
    in = good;
    in.state = nan_state;
    expect_bad(m, &in, act, n, "NaN state");
    uint8_t pad[64] = {0};
    in = good;
    in.attention_mask = pad;
    expect_bad(m, &in, act, n, "empty prompt");
    in = good;
    in.n_tokens = 0;
    expect_bad(m, &in, act, n, "no tokens");
    int32_t ids[64];
    memcpy(ids, g.ids, (size_t)g.n_tok * 4);
    ids[2] = pi.vocab_size;
    in = good;
    in.input_ids = ids;
    expect_bad(m, &in, act, n, "id outside vocabulary");
    in = good;
    expect_bad(m, &in, act, n - 1, "short output");
    /* The token verbs refuse a policy. */
    int32_t t = 1;
    CHECK_STATUS(frt_model_prefill(m, &t, 1), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_model_reset(m), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_model_seed(m, 5), FRT_ERR_UNSUPPORTED); /* a policy seeds its episode */
    CHECK_STATUS(frt_model_decode(m, NULL, &t), FRT_ERR_UNSUPPORTED);
    /* A fork (its seed has no sampler to go to) is refused before the restore: the live state stays. */
    frt_capsule *fc = NULL;
    uint64_t seed0 = 0, step0 = 0, seed1 = 0, step1 = 0;
    CHECK_OK(frt_policy_episode_start(m, 98));
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_HOST, NULL, NULL, 0, &fc));
    CHECK_OK(frt_policy_episode_start(m, 99));
    CHECK_OK(frt_policy_episode_get(m, &seed0, &step0));
    CHECK_STATUS(frt_model_fork(m, fc, 1, 5), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "policy") != NULL);
    CHECK_OK(frt_policy_episode_get(m, &seed1, &step1));
    CHECK(seed1 == 99 && seed1 == seed0 && step1 == step0);
    frt_capsule_free(fc);
    free(act);
    frt_model_free(m);
    golden_close(&g);

    if (!(m = open_policy("pi05", &g, &pi))) return;
    CHECK(pi.state_in_prompt == 1);
    n = (size_t)pi.chunk * pi.action_dim;
    act = xmalloc(n * 4);
    in = inputs_of(&g);
    in.state = longer;
    in.n_state = 3;
    expect_bad(m, &in, act, n, "pi05 given a state");
    free(act);
    frt_model_free(m);
    golden_close(&g);
}

/* A copy of the pi0 golden checkpoint with one tensor added or left out,
 * or (fp8) stored as F8_E4M3 codes. */
static int write_variant_fp8(const char *src, const char *dst, const char *drop, const char *add, const char *fp8);
static int write_variant(const char *src, const char *dst, const char *drop, const char *add)
{
    return write_variant_fp8(src, dst, drop, add, NULL);
}
static int write_variant_fp8(const char *src, const char *dst, const char *drop, const char *add, const char *fp8)
{
    char path[900];
    mkdir(dst, 0755);
    snprintf(path, sizeof path, "cp %s/config.json %s/", src, dst);
    if (system(path) != 0) return -1;
    frt_checkpoint *ck = NULL;
    if (frt_checkpoint_open(src, &ck) < 0) return -1;
    frt_st_writer *w = NULL;
    frt_st_writer_create(&w);
    for (int i = 0; i < frt_checkpoint_count(ck); i++) {
        const frt_tensor *t = frt_checkpoint_at(ck, i);
        if (drop && !strcmp(t->name, drop)) continue;
        if (fp8 && !strcmp(t->name, fp8)) { /* codes 0x38 (1.0): a value the refusal never reads */
            static unsigned char codes[1 << 20];
            if ((size_t)frt_tensor_numel(t) > sizeof codes) return -1;
            memset(codes, 0x38, sizeof codes);
            frt_st_writer_add(w, t->name, FRT_DT_F8_E4M3, t->ndim, t->shape, codes);
            continue;
        }
        frt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    static const float extra[4] = {1, 2, 3, 4};
    const int64_t shape[1] = {4};
    if (add) frt_st_writer_add(w, add, FRT_DT_F32, 1, shape, extra);
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    int rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    frt_checkpoint_close(ck);
    return rc;
}

static void test_load_errors(void)
{
    char src[700], tmp[256], dst[300];
    snprintf(src, sizeof src, "%s/pi0", root);
    snprintf(tmp, sizeof tmp, "/tmp/frt_test_policy_XXXXXX");
    if (!mkdtemp(tmp)) return;
    frt_model_params p = frt_model_default_params();
    frt_model *m = NULL;
    snprintf(dst, sizeof dst, "%s/unknown", tmp);
    CHECK_OK(write_variant(src, dst, NULL, "paligemma_with_expert.bogus.weight"));
    CHECK_STATUS(frt_model_load(dst, &p, &m), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "paligemma_with_expert.bogus.weight") != NULL);
    snprintf(dst, sizeof dst, "%s/missing", tmp);
    CHECK_OK(write_variant(src, dst, "paligemma_with_expert.gemma_expert.model.layers.1.mlp.up_proj.weight", NULL));
    CHECK_STATUS(frt_model_load(dst, &p, &m), FRT_ERR_NOT_FOUND);
    CHECK(strstr(frt_last_error(), "paligemma_with_expert.gemma_expert.model.layers.1.mlp.up_proj.weight") != NULL);
    /* FP8 policy checkpoints: an F8_E4M3 tensor, or config.json's quantization_config, refused by name */
    const char *f8 = "paligemma_with_expert.gemma_expert.model.layers.0.mlp.down_proj.weight";
    snprintf(dst, sizeof dst, "%s/fp8", tmp);
    CHECK_OK(write_variant_fp8(src, dst, NULL, NULL, f8));
    CHECK_STATUS(frt_model_load(dst, &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), f8) != NULL && strstr(frt_last_error(), "F8_E4M3") != NULL);
    printf("  fp8 tensor -> %s\n", frt_last_error());
    snprintf(dst, sizeof dst, "%s/quant", tmp);
    CHECK_OK(write_variant(src, dst, NULL, NULL));
    {
        char cfg[400], *text = NULL;
        size_t len = 0;
        snprintf(cfg, sizeof cfg, "%s/config.json", dst);
        CHECK_OK(frt_file_read_all(cfg, 1u << 20, &text, &len));
        FILE *f = text ? fopen(cfg, "w") : NULL;
        const char *brace = text ? strchr(text, '{') : NULL;
        CHECK(f && brace);
        if (f && brace) {
            fprintf(f, "{\"quantization_config\": {\"quant_method\": \"fp8\"}, %s", brace + 1);
            fclose(f);
        }
        free(text);
    }
    CHECK_STATUS(frt_model_load(dst, &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "quantization_config") != NULL);
    /* cuda: no backend in a CPU build, no device on a machine without a GPU;
     * with one, action_dim 7 is not a multiple of 8 */
    p.backend = FRT_BACKEND_CUDA;
    int n_dev = 0;
    frt_device_count(FRT_BACKEND_CUDA, &n_dev);
    int rc = frt_model_load(src, &p, &m);
    CHECK_MSG(rc == FRT_ERR_UNSUPPORTED || (n_dev == 0 && rc == FRT_ERR_NO_DEVICE), "cuda load: %s", frt_status_str(rc));
    printf("  cuda -> %s\n", frt_last_error());
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    const char *env = getenv("FRT_PI0_GOLDEN");
    snprintf(root, sizeof root, "%s", env ? env : FRT_TEST_DATA "/pi0");
    char probe[600];
    snprintf(probe, sizeof probe, "%s/pi0/golden.safetensors", root);
    if (access(probe, R_OK) != 0) TEST_SKIP("no Pi0 goldens (run scripts/ref/pi0_golden.py, docs/policies.md)");
    frt_test_seed(20);
    test_parity("pi0");
    test_parity("pi05");
    test_cfg_parity("pi0");
    test_cfg_parity("pi05");
    test_capsule();
    test_bad_input();
    test_load_errors();
    return frt_test_report();
}
