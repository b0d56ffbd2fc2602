/*
 * test_model_mask.c - the allowed-token mask (frt_model_set_token_mask, step
 * 3b of frt/sampling.h) through the model API, on random-weight tiny
 * checkpoints of both families (hybrid and dense), C = 64:
 *  1. a random half mask: every token of frt_model_sample / frt_model_decode
 *     (greedy, sampled with top-k / top-p / min_p, with bias and penalties)
 *     equals the CPU reference (adjust, mask, then frt_cpu_sample_minp with
 *     the boundary's u), no masked token is ever drawn over 16 seeds, and
 *     the logprobs are those of the masked distribution (frt_cpu_logprobs
 *     of the masked logits); with 5 tokens allowed the top 20 logprobs are
 *     those 5, summing to probability 1, then -inf;
 *  2. a one-token mask forces its token at temperatures 0 .. 50 (logprob 0);
 *     turning the mask off gives back the plain reference (no recapture:
 *     the graphs keep their one variant);
 *  3. bad calls (wrong word count, a mask with no token, a mask whose only
 *     bits lie past the vocabulary, NULL model) fail with
 *     FRT_ERR_INVALID_ARGUMENT and leave the mask in force unchanged; the
 *     `token_mask` port is listed and refuses frt_model_input_write;
 *  4. with branch_slots = 3 a fork decodes every branch under the mask
 *     (on a backend that has branch slots).
 * Runs on both backends (FRT_TEST_BACKENDS): argv[1] is "cpu" or "cuda".
 */
#include "frt_test.h"

#include "frt/branch.h"
#include "frt/capsule.h"
#include "frt_test_sampling.h"
#include "gen_model.h"
#include "model/model_internal.h"

#include <sys/stat.h>
#include <unistd.h>

enum { C = 64, STEPS = 10, PROMPT = 70 };

static frt_backend backend = FRT_BACKEND_CPU;
static int V, W; /* vocabulary, mask words */
static float *logits, *adjusted, *scratch;
static int32_t *counts;
static uint8_t *seen;
static int32_t prompt[PROMPT];

static frt_model *load(const char *d)
{
    frt_model_params p = frt_model_default_params();
    p.backend = backend;
    p.prefill_chunk = C;
    p.max_seq = 256;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(d, &p, &m));
    return m;
}

static int allowed(const uint32_t *mask, int t) { return t >= 0 && t < V && ((mask[t >> 5] >> (t & 31)) & 1u); }

static void read_step_inputs(frt_model *m)
{
    CHECK_OK(frt_buffer_read(m->counts, 0, counts, (size_t)V * sizeof(int32_t), m->stream));
    CHECK_OK(frt_buffer_read(m->seen, 0, seen, (size_t)V, m->stream));
    CHECK_OK(frt_stream_sync(m->stream));
    CHECK_OK(frt_model_logits(m, logits));
}

/* STEPS steps with s under mask (NULL = none) from a fresh prefill seeded
 * with seed, each checked against the reference; returns the mismatches
 * (token, RNG or logprobs); toks gets the tokens. */
static int run_checked(frt_model *m, const frt_sampling *s, const uint32_t *mask, uint64_t seed, int32_t *toks)
{
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_seed(m, seed));
    CHECK_OK(frt_model_prefill(m, prompt, PROMPT));
    int bad = 0;
    for (int i = 0; i < STEPS; i++) {
        frt_boundary b;
        CHECK_OK(frt_model_boundary_read(m, &b));
        uint64_t rng = b.rng[0];
        int32_t t = -1;
        if (i == 0) {
            read_step_inputs(m);
            CHECK_OK(frt_model_sample(m, s, &t));
        } else {
            CHECK_OK(frt_model_decode(m, s, &t));
            read_step_inputs(m);
        }
        const float *l = NULL;
        int want = frt_test_sample_ref_mask(logits, V, counts, seen, s, mask, &rng, adjusted, scratch, &l);
        CHECK_OK(frt_model_boundary_read(m, &b));
        bad += t != want || b.rng[0] != rng;
        if (s->logprobs) {
            frt_logprobs got, ref;
            CHECK_OK(frt_model_logprobs(m, &got));
            CHECK_OK(frt_cpu_logprobs(&ref, l, V, t, s->top_logprobs));
            int ok = got.token == ref.token && got.n_top == ref.n_top &&
                     (got.logprob == ref.logprob || fabsf(got.logprob - ref.logprob) <= 1e-5f);
            for (int k = 0; k < ref.n_top; k++)
                ok &= got.top_token[k] == ref.top_token[k] &&
                      (got.top_logprob[k] == ref.top_logprob[k] || fabsf(got.top_logprob[k] - ref.top_logprob[k]) <= 1e-5f);
            bad += !ok;
        }
        toks[i] = t;
    }
    return bad;
}

static frt_sampling penalised(void)
{
    frt_sampling s = frt_test_sampling(0.9f);
    s.top_k = 30;
    s.top_p = 0.95f;
    s.presence_penalty = 1.0f;
    s.repetition_penalty = 1.2f;
    s.n_logit_bias = 2;
    s.logit_bias[0] = (frt_logit_bias){prompt[0], 2.0f};
    s.logit_bias[1] = (frt_logit_bias){7, -3.0f};
    s.logprobs = 1;
    s.top_logprobs = 5;
    return s;
}

/* 1. */
static void test_half_mask(frt_model *m, uint32_t *mask)
{
    frt_test_random_mask(mask, V, 8);
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    frt_sampling sets[4] = {frt_test_sampling(0.0f), frt_test_sampling(1.0f), penalised(), frt_test_sampling(1.5f)};
    sets[0].logprobs = sets[1].logprobs = 1;
    sets[0].top_logprobs = 20;
    sets[3].min_p = 0.02f;
    int32_t toks[STEPS];
    for (int k = 0; k < 4; k++)
        CHECK_MSG(run_checked(m, &sets[k], mask, 40 + (uint64_t)k, toks) == 0, "set %d: masked step differs from the reference", k);
    int drawn_masked = 0;
    for (uint64_t seed = 1; seed <= 16; seed++) {
        run_checked(m, &sets[3], mask, seed, toks);
        for (int i = 0; i < STEPS; i++) drawn_masked += !allowed(mask, toks[i]);
    }
    CHECK_MSG(drawn_masked == 0, "%d masked tokens drawn over 16 seeds", drawn_masked);
    /* the logprobs renormalise over the allowed set: with 5 tokens allowed
     * the top 20 are those 5 with probabilities summing to 1, then -inf */
    memset(mask, 0, (size_t)W * sizeof *mask);
    const int five[5] = {1, 40, 41, V / 2, V - 1};
    for (int k = 0; k < 5; k++) mask[five[k] >> 5] |= 1u << (five[k] & 31);
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    CHECK(run_checked(m, &sets[0], mask, 1, toks) == 0);
    frt_logprobs lp;
    CHECK_OK(frt_model_logprobs(m, &lp));
    double psum = 0;
    int ok = lp.n_top == 20 && allowed(mask, lp.token);
    for (int k = 0; k < 5; k++) {
        ok &= allowed(mask, lp.top_token[k]);
        psum += exp((double)lp.top_logprob[k]);
    }
    for (int k = 5; k < 20; k++) ok &= isinf(lp.top_logprob[k]) && lp.top_logprob[k] < 0;
    CHECK_MSG(ok && fabs(psum - 1.0) <= 1e-5, "5-token mask: top entries, sum of p %.7f", psum);
    CHECK_OK(frt_model_set_token_mask(m, NULL, 0));
}

/* 2. */
static void test_one_token(frt_model *m, uint32_t *mask)
{
    memset(mask, 0, (size_t)W * sizeof *mask);
    const int only = V - 3;
    mask[only >> 5] = 1u << (only & 31);
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    const float temps[4] = {0.0f, 0.7f, 1.0f, 50.0f};
    int forced = 1;
    for (int i = 0; i < 4; i++) {
        frt_sampling s = frt_test_sampling(temps[i]);
        s.logprobs = 1;
        int32_t toks[STEPS];
        CHECK(run_checked(m, &s, mask, 9 + (uint64_t)i, toks) == 0);
        frt_logprobs lp;
        CHECK_OK(frt_model_logprobs(m, &lp));
        forced &= lp.logprob == 0.0f;
        for (int k = 0; k < STEPS; k++) forced &= toks[k] == only;
    }
    CHECK_MSG(forced, "a one-token mask does not force its token");
    /* off again: the plain reference, with the graphs captured at load */
    const int variants = frt_graph_count(m->g_decode) + frt_graph_count(m->g_sample);
    CHECK_OK(frt_model_set_token_mask(m, NULL, 0));
    frt_sampling s = frt_test_sampling(1.0f);
    s.logprobs = 1;
    int32_t toks[STEPS];
    CHECK(run_checked(m, &s, NULL, 5, toks) == 0);
    CHECK(frt_graph_count(m->g_decode) + frt_graph_count(m->g_sample) == variants && variants == 2);
}

/* 3. */
static void test_refused(frt_model *m, uint32_t *mask)
{
    memset(mask, 0, (size_t)W * sizeof *mask);
    const int only = 11;
    mask[0] = 1u << only;
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    uint32_t *bad = calloc((size_t)W + 1, sizeof *bad);
    CHECK_STATUS(frt_model_set_token_mask(m, bad, W), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "mask allows no token") != NULL);
    if (V % 32) { /* bits past the vocabulary only */
        bad[W - 1] = ~((1u << (V % 32)) - 1u);
        CHECK_STATUS(frt_model_set_token_mask(m, bad, W), FRT_ERR_INVALID_ARGUMENT);
    }
    bad[0] = 1;
    CHECK_STATUS(frt_model_set_token_mask(m, bad, W - 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_set_token_mask(m, bad, W + 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_set_token_mask(m, bad, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_set_token_mask(NULL, bad, W), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_input_write(m, "token_mask", bad, (size_t)W * 4), FRT_ERR_INVALID_ARGUMENT);
    /* the mask in force is still the one-token mask */
    frt_sampling s = frt_test_sampling(2.0f);
    int32_t toks[STEPS];
    CHECK(run_checked(m, &s, mask, 3, toks) == 0 && toks[0] == only && toks[STEPS - 1] == only);
    frt_model_info info;
    CHECK_OK(frt_model_info_get(m, &info));
    frt_io_info io;
    int found = 0;
    for (int i = 0; i < info.n_io; i++) {
        CHECK_OK(frt_model_io_info(m, i, &io));
        if (!strcmp(io.name, "token_mask"))
            found = io.dir == FRT_IO_INPUT && !strcmp(io.dtype, "U32") && io.shape[0] == W &&
                    io.bytes == (size_t)W * 4 && !io.in_state;
    }
    CHECK_MSG(found, "no token_mask input port [%d] U32", W);
    CHECK_OK(frt_model_set_token_mask(m, NULL, 12345)); /* NULL: off, n_words ignored */
    free(bad);
}

/* 4. */
static void test_branches(const char *dir, uint32_t *mask)
{
    frt_model_params p = frt_model_default_params();
    p.backend = backend;
    p.prefill_chunk = C;
    p.max_seq = 256;
    p.branch_slots = 3;
    frt_model *m = NULL;
    int rc = frt_model_load(dir, &p, &m);
    if (rc == FRT_ERR_UNSUPPORTED) { /* a backend without branch slots: nothing to check */
        printf("   branch slots: not supported by this backend (%s)\n", frt_last_error());
        return;
    }
    CHECK_OK(rc);
    if (!m) return;
    CHECK_OK(frt_model_prefill(m, prompt, PROMPT));
    frt_capsule *c = NULL;
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_HOST, NULL, NULL, 0, &c));
    frt_test_random_mask(mask, V, 2);
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    CHECK_OK(frt_model_fork(m, c, 3, 77));
    frt_sampling s = frt_test_sampling(1.3f);
    int32_t t[3];
    int ok = 1;
    CHECK_OK(frt_model_branch_sample(m, &s, t));
    for (int i = 0; i < 3; i++) ok &= allowed(mask, t[i]);
    for (int k = 0; k < 6; k++) {
        CHECK_OK(frt_model_branch_decode(m, &s, t));
        for (int i = 0; i < 3; i++) ok &= allowed(mask, t[i]);
    }
    CHECK_MSG(ok, "a branch drew a masked token");
    frt_capsule_free(c);
    frt_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc > 1 && frt_backend_parse(argv[1], &backend) < 0) {
        fprintf(stderr, "usage: test_model_mask [cpu|cuda]\n");
        return 2;
    }
    if (backend == FRT_BACKEND_CUDA) {
        int n = 0;
        frt_device_count(FRT_BACKEND_CUDA, &n);
        if (n == 0) TEST_SKIP("no CUDA device");
    }
    char tmp[256], dir[300];
    snprintf(tmp, sizeof tmp, "/tmp/frt-test-model-mask-%d", (int)getpid());
    mkdir(tmp, 0755);
    static const char *const families[] = {"tiny", "tiny-dense"};
    for (int f = 0; f < 2; f++) {
        printf("== %s\n", families[f]);
        frt_test_seed(2626 + (uint64_t)f);
        snprintf(dir, sizeof dir, "%s/%s", tmp, families[f]);
        CHECK_OK(frt_gen_model_write(families[f], 21, dir));
        frt_model *m = load(dir);
        if (!m) continue;
        frt_model_info info;
        frt_model_info_get(m, &info);
        V = info.vocab_size;
        W = (V + 31) / 32;
        for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
        logits = malloc((size_t)V * sizeof(float));
        adjusted = malloc((size_t)V * sizeof(float));
        scratch = malloc(FRT_CPU_SAMPLE_SCRATCH(V) * sizeof(float));
        counts = malloc((size_t)V * sizeof(int32_t));
        seen = malloc((size_t)V);
        uint32_t *mask = calloc((size_t)W, sizeof *mask);
        test_half_mask(m, mask);
        test_one_token(m, mask);
        test_refused(m, mask);
        frt_model_free(m);
        test_branches(dir, mask);
        free(mask);
        free(logits);
        free(adjusted);
        free(scratch);
        free(counts);
        free(seen);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return frt_test_report();
}
