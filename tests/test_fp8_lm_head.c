/*
 * test_fp8_lm_head.c - the FP8 LM head on the cpu backend
 * (params.lm_head_dtype FRT_WEIGHT_FP8, docs/fp8.md "An FP8 LM head"), on
 * the dense goldens (tests/data/golden_dense: three untied, two tied) and the
 * hybrid ones (tests/data/golden: untied and tied):
 *   - the held lm_head is, element by element, the per-row E4M3 round
 *     trip decode(encode(w / s)) * s, s = max|row| / 448, of the
 *     checkpoint's lm_head (a tied model's embedding), recomputed here; the
 *     embedding the lookup reads stays the checkpoint's values (a tied
 *     model's head is a copy, not the embedding); every layer weight
 *     unchanged, so the hidden states equal the default load's bit for bit;
 *   - accuracy: the last logits of each golden prompt against the default
 *     load within FP8_LM_BOUND norm-wise (docs/fp8.md), and above 0 (the
 *     head is quantized); a 32-token greedy decode's logits within it too,
 *     the first divergence and the top-2 margin there reported;
 *   - the fingerprint records it: a capsule of the default load is refused
 *     by the FP8-head load (FRT_ERR_MISMATCH) and the other way round;
 *     within the FP8-head load snapshot -> decode -> restore -> decode
 *     gives the same tokens and logits bits;
 *   - cartridges (KV prefixes) are not bound to the head: one made by the
 *     default-head load injects into the FP8-head load, and the logits
 *     after a prompt equal a cold prefill's bit for bit;
 *   - with weight_dtype FRT_WEIGHT_FP8 too: the layers' FP8 model with the
 *     FP8 head differs from the layers' FP8 model by the head alone (the
 *     hidden states bit for bit);
 *   - refusals: an lm_head_dtype outside the enum (FRT_ERR_INVALID_ARGUMENT),
 *     a policy (FRT_ERR_UNSUPPORTED), the cuda backend in a build without
 *     one; in a cuda build, the cuda loaders' rule for hidden_size (a
 *     multiple of 16, frt_lm_head_cuda_fp8_ok).
 */
#include "frt_test.h"
#include "frt_test_fp8.h"

#include "frt/capsule.h"
#include "frt/cartridge.h"
#include "frt/checkpoint.h"
#include "frt/config.h"
#include "frt/fs.h"
#include "frt/debug.h"
#include "frt/model.h"
#include "frt/safetensors.h"
#include "gen_model.h"
#include "kernels/cpu/fp8.h"
#include "model/arch/dense/dense.h"
#if FRT_HAVE_CUDA
#include "model/arch/lm_head_cuda.h"
#endif
#include "model/arch/qwen35/qwen35.h"
#include "model/model_internal.h"

#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN_DIR FRT_TEST_DATA "/golden_dense"
#define HYBRID_DIR FRT_TEST_DATA "/golden"
#define FP8_LM_BOUND 0.0625 /* 2^-4: docs/fp8.md "An FP8 LM head", accuracy */
#define GREEDY 32

static frt_model *load(const char *dir, frt_weight_dtype wd, frt_weight_dtype lm, frt_backend be, int expect)
{
    frt_model_params p = frt_model_default_params();
    p.backend = be;
    p.prefill_chunk = 64;
    p.max_seq = 2048; /* the hybrid goldens' longest prompt has 1100 tokens */
    p.weight_dtype = wd;
    p.lm_head_dtype = lm;
    p.debug_hidden = 1;
    frt_model *m = NULL;
    CHECK_STATUS(frt_model_load(dir, &p, &m), expect);
    if (expect) CHECK(m == NULL);
    return m;
}

/* Elements of got [d0, d1] that differ from the per-row E4M3 round trip
 * (fp8) or the values (!fp8) of checkpoint tensor `name`. */
static long check_tensor(const frt_model *m, const char *name, const float *got, int fp8)
{
    const frt_tensor *t = frt_checkpoint_find(m->ckpt, name);
    CHECK_MSG(t != NULL, "%s", name);
    return t ? frt_test_round_trip_diff(t, got, fp8) : 1;
}

/* The held embedding (unchanged) and lm_head (the round trip of its
 * source) of m; the head a buffer of its own. */
static void check_held(const frt_model *m)
{
    const float *embed, *lm;
    if (m->cfg.hybrid)
        embed = qwen35_of(m)->w.embed, lm = qwen35_of(m)->w.lm_head;
    else
        embed = dense_of(m)->w.embed, lm = dense_of(m)->w.lm_head;
    char full[256];
    snprintf(full, sizeof full, "%sembed_tokens.weight", m->cfg.weight_prefix);
    long bad_e = check_tensor(m, full, embed, 0);
    long bad_h = check_tensor(m, m->cfg.tie_word_embeddings ? full : "lm_head.weight", lm, 1);
    printf("  held: embedding %ld and lm_head %ld elements off (tied %d)\n", bad_e, bad_h, m->cfg.tie_word_embeddings);
    CHECK(bad_e == 0 && bad_h == 0);
    CHECK(lm != embed);
}

typedef struct hidden_run {
    double max; /* out: the largest per-layer error */
} hidden_run;

static void hidden_hook(frt_model *a, frt_model *b, const int32_t *ids, int n, void *user)
{
    hidden_run *h = user;
    (void)ids;
    h->max = frt_test_hidden("hidden", a, b, NULL, n % 64 ? n % 64 : 64, a->cfg.hidden_size, a->cfg.n_layers, 0.0,
                             NULL);
}

/* The FP8 head (on top of weight precision wd) against the head of the
 * backend's precision, on every golden prompt and a greedy decode. */
static void compare(const char *dir, const char *name, frt_weight_dtype wd)
{
    printf("golden model %s%s\n", name, wd == FRT_WEIGHT_FP8 ? " (FP8 layers)" : "");
    frt_model *a = load(dir, wd, FRT_WEIGHT_DEFAULT, FRT_BACKEND_CPU, 0);
    frt_model *b = load(dir, wd, FRT_WEIGHT_FP8, FRT_BACKEND_CPU, 0);
    frt_safetensors *g = frt_test_open_golden(dir);
    if (!a || !b || !g) goto out;
    if (wd == FRT_WEIGHT_DEFAULT) check_held(b);
    CHECK(frt_model_fingerprint(a) != frt_model_fingerprint(b));
    hidden_run hr = {0};
    double worst = frt_test_golden_prompts(a, b, g, "fp8 vs default lm_head", hidden_hook, &hr);
    CHECK_MSG(hr.max == 0.0, "the hidden states differ (rel %g): the layers must not change", hr.max);
    const frt_test_greedy_stats gs = frt_test_golden_greedy(a, b, g, GREEDY, "prompts max", worst);
    CHECK_MSG(worst > 0 && worst <= FP8_LM_BOUND, "prompt logits rel err %g (bound %g)", worst, FP8_LM_BOUND);
    CHECK_MSG(gs.max_err <= FP8_LM_BOUND && !isnan(gs.max_err), "greedy logits rel err %g", gs.max_err);
out:
    frt_safetensors_close(g);
    frt_model_free(a);
    frt_model_free(b);
}

static void golden_model(const char *dir, const char *name) { compare(dir, name, FRT_WEIGHT_DEFAULT); }

/* Capsules: refused across head precisions; restore == cold within one. */
static void test_capsules(const char *dir)
{
    frt_model *a = load(dir, FRT_WEIGHT_DEFAULT, FRT_WEIGHT_DEFAULT, FRT_BACKEND_CPU, 0);
    frt_model *b = load(dir, FRT_WEIGHT_DEFAULT, FRT_WEIGHT_FP8, FRT_BACKEND_CPU, 0);
    frt_capsule *ca = NULL, *cb = NULL;
    if (!a || !b) goto out;
    const int V = b->cfg.vocab_size;
    int32_t t1[8], t2[8];
    float *l1 = xmalloc((size_t)V * 4), *l2 = xmalloc((size_t)V * 4);
    frt_test_capsules_cross(a, b, &ca, &cb);
    for (int run = 0; run < 2; run++) {
        if (run) CHECK_OK(frt_capsule_restore(b, cb));
        int32_t *t = run ? t2 : t1;
        for (int i = 0; i < 8; i++) CHECK_OK(i ? frt_model_decode(b, NULL, &t[i]) : frt_model_sample(b, NULL, &t[i]));
        CHECK_OK(frt_model_logits(b, run ? l2 : l1));
    }
    CHECK_MSG(!memcmp(t1, t2, sizeof t1) && !memcmp(l1, l2, (size_t)V * 4),
              "FP8 head: restore -> decode differs from the first decode");
    free(l1);
    free(l2);
out:
    frt_capsule_free(ca);
    frt_capsule_free(cb);
    frt_model_free(a);
    frt_model_free(b);
}

/* A cartridge of the default-head load injected into the FP8-head load:
 * the KV does not depend on the head, so the cartridge's binding ignores it
 * and the injected prefix gives a cold prefill's logits bit for bit. */
static void test_cartridge(const char *dir)
{
    frt_model *a = load(dir, FRT_WEIGHT_DEFAULT, FRT_WEIGHT_DEFAULT, FRT_BACKEND_CPU, 0);
    frt_model *b = load(dir, FRT_WEIGHT_DEFAULT, FRT_WEIGHT_FP8, FRT_BACKEND_CPU, 0);
    frt_cartridge *c = NULL;
    if (!a || !b) goto out;
    const int V = b->cfg.vocab_size;
    int32_t doc[70], prompt[9], other[30];
    for (int i = 0; i < 70; i++) doc[i] = (5 + 11 * i) % V;
    for (int i = 0; i < 9; i++) prompt[i] = (7 + 13 * i) % V;
    for (int i = 0; i < 30; i++) other[i] = (2 + 3 * i) % V;
    float *l_cold = xmalloc((size_t)V * 4), *l_inj = xmalloc((size_t)V * 4);
    CHECK_OK(frt_model_prefill(a, doc, 70));
    CHECK_OK(frt_cartridge_from_model(a, &c));
    CHECK_OK(frt_model_prefill(b, doc, 70));
    CHECK_OK(frt_model_prefill(b, prompt, 9));
    CHECK_OK(frt_model_logits(b, l_cold));
    CHECK_OK(frt_model_reset(b));
    CHECK_OK(frt_model_prefill(b, other, 30));
    if (c) CHECK_OK(frt_cartridge_inject(b, c));
    CHECK_OK(frt_model_prefill(b, prompt, 9));
    CHECK_OK(frt_model_logits(b, l_inj));
    CHECK_MSG(!memcmp(l_cold, l_inj, (size_t)V * 4), "FP8 head: the injected cartridge's logits differ (rel %.3e)",
              frt_test_rel_err(l_inj, l_cold, (size_t)V));
    printf("a cartridge of the default-head load into the FP8-head load: the cold prefill's logits bit for bit\n");
    free(l_cold);
    free(l_inj);
out:
    frt_cartridge_free(c);
    frt_model_free(a);
    frt_model_free(b);
}

static void test_refusals(const char *dense_dir)
{
    CHECK(load(dense_dir, FRT_WEIGHT_DEFAULT, (frt_weight_dtype)7, FRT_BACKEND_CPU, FRT_ERR_INVALID_ARGUMENT) == NULL);
    CHECK(strstr(frt_last_error(), "lm_head_dtype") != NULL);
#if !FRT_HAVE_CUDA
    CHECK(load(dense_dir, FRT_WEIGHT_DEFAULT, FRT_WEIGHT_FP8, FRT_BACKEND_CUDA, FRT_ERR_UNSUPPORTED) == NULL);
#else
    /* the cuda loaders' rule (no device needed): the E4M3 GEMV's rows are whole 16-byte chunks */
    CHECK_STATUS(frt_lm_head_cuda_fp8_ok(50), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "hidden_size 50") != NULL);
    CHECK_OK(frt_lm_head_cuda_fp8_ok(4096));
#endif
    /* a policy (a small Pi0.5 written here) has no LM head to quantize */
    static const frt_gen_policy_dims D = {
        .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
        .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 16, .vocab = 61,
        .e_width = 16, .e_inter = 24, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
    };
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-fp8lm-%d", (int)getpid());
    frt_weight_spec *w = NULL;
    int n = 0;
    frt_checkpoint *ck = NULL;
    CHECK_OK(frt_gen_policy_specs_dims(&D, 1, &w, &n));
    CHECK_OK(frt_gen_model_build_specs(w, n, 3, &ck));
    CHECK_OK(frt_mkdir_p(dir));
    CHECK_OK(frt_checkpoint_write(ck, dir, 0, FRT_CKPT_WRITE_NO_FSYNC));
    CHECK_OK(frt_gen_policy_write_config_dims(&D, 1, dir));
    frt_checkpoint_close(ck);
    free(w);
    frt_model_params p = frt_model_default_params();
    p.lm_head_dtype = FRT_WEIGHT_FP8;
    frt_model *m = NULL;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(m == NULL);
    CHECK(strstr(frt_last_error(), "lm_head") != NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

int main(void)
{
    CHECK(frt_test_each_subdir(GOLDEN_DIR, golden_model) >= 5);
    CHECK(frt_test_each_subdir(HYBRID_DIR, golden_model) >= 3);
    compare(GOLDEN_DIR "/dense_llama_mqa_tied", "dense_llama_mqa_tied", FRT_WEIGHT_FP8);
    compare(HYBRID_DIR "/hybrid_v2k_untied", "hybrid_v2k_untied", FRT_WEIGHT_FP8);
    test_capsules(GOLDEN_DIR "/dense_qwen3_qknorm");
    test_capsules(HYBRID_DIR "/hybrid_v3k_tied");
    test_cartridge(GOLDEN_DIR "/dense_llama3_gqa");
    test_refusals(GOLDEN_DIR "/dense_llama3_gqa");
    return frt_test_report();
}
