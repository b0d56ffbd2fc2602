/*
 * test_model_sampling.c - the sampling fields of frt/sampling.h through the
 * model API, on random-weight tiny checkpoints of both families (hybrid and
 * dense), C = 64:
 *  1. the penalty counts: a prefill marks its tokens seen and zeroes the
 *     generated counts; every decode step counts the token it commits;
 *     the pending token is not counted; reset zeroes both;
 *  2. every sampled token (frt_model_sample and frt_model_decode, with
 *     bias, penalties, min_p, top-k, top-p and logprobs on) equals the CPU
 *     reference (frt_cpu_logits_adjust + frt_cpu_sample_minp with the same
 *     u from the boundary's RNG), and the reported logprobs equal
 *     frt_cpu_logprobs of the same adjusted logits (|d| <= 1e-5); a +100
 *     bias forces its token; min_p = 1 at temperature 5 is the greedy token
 *     of the adjusted logits; with everything off a sampled step draws from
 *     the raw logits;
 *  3. out-of-range fields are refused (the message names the field) and
 *     nothing changes; frt_model_logprobs without a step that asked is
 *     FRT_ERR_STATE;
 *  the allowed-token mask (frt_model_set_token_mask, step 3b):
 *  4. a random half mask: every token (greedy, sampled with top-k / top-p /
 *     min_p, with bias and penalties) equals the CPU reference (adjust,
 *     mask, then the draw with the boundary's u), no masked token is drawn
 *     over 16 seeds, the logprobs are those of the masked logits; with 5
 *     tokens allowed the top 20 logprobs are those 5, summing to
 *     probability 1, then -inf;
 *  5. a one-token mask forces its token at temperatures 0 .. 50 (logprob
 *     0); turning the mask off gives back the plain reference, and the
 *     graphs keep their one variant each (no recapture);
 *  6. bad calls (wrong word count, a mask with no token, a mask whose only
 *     bits lie past the vocabulary, NULL model) fail with
 *     FRT_ERR_INVALID_ARGUMENT and leave the mask in force unchanged; the
 *     `token_mask` port is listed and refuses frt_model_input_write;
 *  7. with branch_slots = 3 a fork decodes every branch under the mask (on
 *     a backend that has branch slots).
 * Runs on both backends (FRT_TEST_BACKENDS): argv[1] is "cpu" or "cuda"; on
 * cuda the token may differ from the reference only when u falls within
 * ~1e-16 of a boundary of the cumulative sum (kernels_cuda.h), which these
 * draws never hit.
 */
#include "frt_test.h"

#include "frt/branch.h"
#include "frt/capsule.h"
#include "frt_test_sampling.h"
#include "gen_model.h"
#include "model/model_internal.h"

#include <sys/stat.h>
#include <unistd.h>

enum { C = 64, STEPS = 12 };

static frt_backend backend = FRT_BACKEND_CPU;
static int V;
static float *logits, *adjusted, *scratch;
static int32_t *counts;
static uint8_t *seen;

static frt_model *load(const char *d)
{
    frt_model_params p = frt_model_default_params();
    p.backend = backend;
    p.prefill_chunk = C;
    p.max_seq = 512;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(d, &p, &m));
    return m;
}

static void read_counts(frt_model *m)
{
    CHECK_OK(frt_buffer_read(m->counts, 0, counts, (size_t)V * sizeof(int32_t), m->stream));
    CHECK_OK(frt_buffer_read(m->seen, 0, seen, (size_t)V, m->stream));
    CHECK_OK(frt_stream_sync(m->stream));
}

/* 1. */
static void test_counts(frt_model *m)
{
    int32_t prompt[70], gen[STEPS];
    for (int i = 0; i < 70; i++) prompt[i] = (int32_t)(frt_test_u64() % 40); /* repeats */
    CHECK_OK(frt_model_reset(m));
    read_counts(m);
    int zero = 1;
    for (int i = 0; i < V; i++) zero &= counts[i] == 0 && seen[i] == 0;
    CHECK(zero);
    CHECK_OK(frt_model_prefill(m, prompt, 70));
    frt_sampling s = frt_test_sampling(0.9f);
    CHECK_OK(frt_model_sample(m, &s, &gen[0]));
    for (int i = 1; i < STEPS; i++) CHECK_OK(frt_model_decode(m, &s, &gen[i]));
    read_counts(m);
    int *want = calloc((size_t)V, sizeof(int));
    uint8_t *want_seen = calloc((size_t)V, 1);
    for (int i = 0; i < 70; i++) want_seen[prompt[i]] = 1;
    for (int i = 0; i < STEPS - 1; i++) { /* the last one is pending */
        want[gen[i]]++;
        want_seen[gen[i]] = 1;
    }
    CHECK(memcmp(want, counts, (size_t)V * sizeof(int)) == 0);
    CHECK(memcmp(want_seen, seen, (size_t)V) == 0);
    /* an append is a new request: counts zeroed, seen kept and extended */
    int32_t more[3] = {V - 1, V - 2, V - 1};
    CHECK_OK(frt_model_prefill(m, more, 3));
    read_counts(m);
    want_seen[V - 1] = want_seen[V - 2] = 1;
    zero = 1;
    for (int i = 0; i < V; i++) zero &= counts[i] == 0;
    CHECK(zero && memcmp(want_seen, seen, (size_t)V) == 0);
    CHECK_OK(frt_model_reset(m));
    read_counts(m);
    zero = 1;
    for (int i = 0; i < V; i++) zero &= counts[i] == 0 && seen[i] == 0;
    CHECK(zero);
    free(want);
    free(want_seen);
}

/* Equal within 1e-5, or the same infinity (a masked token's -inf). */
static int near(float a, float b) { return a == b || fabsf(a - b) <= 1e-5f; }

static void check_logprobs(frt_model *m, const frt_sampling *s, const float *l, int token)
{
    frt_logprobs got, want;
    CHECK_OK(frt_model_logprobs(m, &got));
    CHECK_OK(frt_cpu_logprobs(&want, l, V, token, s->top_logprobs));
    int ok = got.token == want.token && got.n_top == want.n_top && near(got.logprob, want.logprob);
    for (int k = 0; k < want.n_top; k++)
        ok &= got.top_token[k] == want.top_token[k] && near(got.top_logprob[k], want.top_logprob[k]);
    CHECK_MSG(ok, "logprobs of token %d differ from the reference", token);
}

/* Runs STEPS steps with s under mask (NULL = none, as set with
 * frt_model_set_token_mask) from a fresh prefill of prompt [n] seeded with
 * seed, each checked against the reference; returns the number of
 * mismatching tokens. */
static int run_checked_mask(frt_model *m, const frt_sampling *s, const uint32_t *mask, uint64_t seed,
                            const int32_t *prompt, int n, int32_t *toks)
{
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_seed(m, seed));
    CHECK_OK(frt_model_prefill(m, prompt, n));
    int bad = 0;
    for (int i = 0; i < STEPS; i++) {
        frt_boundary b;
        CHECK_OK(frt_model_boundary_read(m, &b));
        uint64_t rng = b.rng[0];
        int32_t t = -1;
        if (i == 0) {
            read_counts(m);
            CHECK_OK(frt_model_logits(m, logits));
            CHECK_OK(frt_model_sample(m, s, &t));
        } else {
            CHECK_OK(frt_model_decode(m, s, &t));
            read_counts(m);
            CHECK_OK(frt_model_logits(m, logits));
        }
        const float *l = NULL;
        int want = frt_test_sample_ref_mask(logits, V, counts, seen, s, mask, &rng, adjusted, scratch, &l);
        CHECK_OK(frt_model_boundary_read(m, &b));
        bad += t != want || b.rng[0] != rng;
        if (s->logprobs) check_logprobs(m, s, l, t);
        toks[i] = t;
    }
    return bad;
}

static int run_checked(frt_model *m, const frt_sampling *s, const int32_t *prompt, int n, int32_t *toks)
{
    return run_checked_mask(m, s, NULL, 77, prompt, n, toks);
}

/* Every field on: top-k, top-p, min_p, the three penalties, three biases
 * (one on token `biased`), logprobs with 5 top entries; temperature 0.8. */
static frt_sampling penalised(int32_t biased)
{
    frt_sampling s = frt_test_sampling(0.8f);
    s.top_k = 40;
    s.top_p = 0.95f;
    s.min_p = 0.02f;
    s.presence_penalty = 1.5f;
    s.frequency_penalty = 0.5f;
    s.repetition_penalty = 1.2f;
    s.logprobs = 1;
    s.top_logprobs = 5;
    s.n_logit_bias = 3;
    s.logit_bias[0] = (frt_logit_bias){biased, 3.0f};
    s.logit_bias[1] = (frt_logit_bias){5, -2.0f};
    s.logit_bias[2] = (frt_logit_bias){V - 1, 1.5f};
    return s;
}

/* 2. */
static void test_reference(frt_model *m)
{
    int32_t prompt[80], toks[STEPS];
    for (int i = 0; i < 80; i++) prompt[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
    frt_sampling s = penalised(prompt[0]);
    CHECK_MSG(run_checked(m, &s, prompt, 80, toks) == 0, "penalised sampling differs from the reference");
    frt_sampling g = s; /* greedy with penalties */
    g.temperature = 0.0f;
    g.top_logprobs = 20;
    CHECK_MSG(run_checked(m, &g, prompt, 80, toks) == 0, "penalised greedy differs from the reference");
    frt_sampling r = frt_test_sampling(1.0f); /* everything off, logprobs of the raw logits */
    r.logprobs = 1;
    CHECK_MSG(run_checked(m, &r, prompt, 80, toks) == 0, "plain sampling differs from the reference");
    /* +100 forces its token at temperature 1.5 */
    frt_sampling f = frt_test_sampling(1.5f);
    f.n_logit_bias = 1;
    f.logit_bias[0] = (frt_logit_bias){V / 3, 100.0f};
    CHECK(run_checked(m, &f, prompt, 80, toks) == 0);
    int all = 1;
    for (int i = 0; i < STEPS; i++) all &= toks[i] == V / 3;
    CHECK(all);
    /* min_p = 1 at temperature 5 is greedy on the adjusted logits */
    frt_sampling mp = s, gr = s;
    mp.temperature = 5.0f;
    mp.min_p = 1.0f;
    gr.temperature = 0.0f;
    int32_t a[STEPS], b[STEPS];
    CHECK(run_checked(m, &mp, prompt, 80, a) == 0);
    CHECK(run_checked(m, &gr, prompt, 80, b) == 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

/* 3. */
static void test_refused(frt_model *m)
{
    int32_t prompt[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, t;
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, prompt, 10));
    CHECK_STATUS(frt_model_logprobs(m, &(frt_logprobs){0}), FRT_ERR_STATE);
    frt_sampling ok = frt_test_sampling(1.0f);
    CHECK_OK(frt_model_sample(m, &ok, &t));
    CHECK_STATUS(frt_model_logprobs(m, &(frt_logprobs){0}), FRT_ERR_STATE);
    struct {
        const char *field;
        frt_sampling s;
    } bad[14];
    int n = 0;
    for (int i = 0; i < 14; i++) bad[i].s = frt_test_sampling(1.0f);
    bad[n].field = "min_p", bad[n++].s.min_p = 1.5f;
    bad[n].field = "min_p", bad[n++].s.min_p = -0.1f;
    bad[n].field = "presence_penalty", bad[n++].s.presence_penalty = 2.5f;
    bad[n].field = "frequency_penalty", bad[n++].s.frequency_penalty = -3.0f;
    bad[n].field = "repetition_penalty", bad[n++].s.repetition_penalty = -1.0f;
    bad[n].field = "repetition_penalty", bad[n++].s.repetition_penalty = INFINITY;
    bad[n].field = "top_logprobs", bad[n++].s.top_logprobs = 3; /* without logprobs */
    bad[n].field = "top_logprobs", bad[n].s.logprobs = 1, bad[n++].s.top_logprobs = 21;
    bad[n].field = "logprobs", bad[n++].s.logprobs = 2;
    bad[n].field = "logit_bias", bad[n].s.n_logit_bias = 1, bad[n++].s.logit_bias[0] = (frt_logit_bias){V, 1.0f};
    bad[n].field = "logit_bias", bad[n].s.n_logit_bias = 1, bad[n++].s.logit_bias[0] = (frt_logit_bias){3, 101.0f};
    bad[n].field = "logit_bias", bad[n].s.n_logit_bias = FRT_SAMPLING_MAX_BIAS + 1, n++;
    bad[n].field = "logit_bias", bad[n].s.n_logit_bias = 2, bad[n].s.logit_bias[0] = (frt_logit_bias){3, 1.0f},
    bad[n++].s.logit_bias[1] = (frt_logit_bias){3, 2.0f};
    bad[n].field = "temperature", bad[n++].s.temperature = NAN;
    int pending = frt_model_pending(m), pos = frt_model_position(m);
    for (int i = 0; i < n; i++) {
        CHECK_STATUS(frt_model_sample(m, &bad[i].s, &t), FRT_ERR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(frt_last_error(), bad[i].field) != NULL, "case %d: '%s' does not name %s", i,
                  frt_last_error(), bad[i].field);
        CHECK_STATUS(frt_model_decode(m, &bad[i].s, &t), FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_sampling_check(&bad[i].s, V), FRT_ERR_INVALID_ARGUMENT);
    }
    CHECK(frt_model_pending(m) == pending && frt_model_position(m) == pos);
    CHECK_STATUS(frt_sampling_check(NULL, V), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_sampling_check(&ok, V));
}

/* ---- the allowed-token mask (frt_model_set_token_mask) ---------------------- */

enum { PROMPT = 70 };
static int W;                  /* mask words */
static int32_t mprompt[PROMPT];

static int allowed(const uint32_t *mask, int t) { return t >= 0 && t < V && ((mask[t >> 5] >> (t & 31)) & 1u); }

/* 4. the allowed-token mask */
static void test_half_mask(frt_model *m, uint32_t *mask)
{
    frt_test_random_mask(mask, V, 8);
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    frt_sampling sets[4] = {frt_test_sampling(0.0f), frt_test_sampling(1.0f), penalised(mprompt[0]),
                            frt_test_sampling(1.5f)};
    sets[0].logprobs = sets[1].logprobs = 1;
    sets[0].top_logprobs = 20;
    sets[3].min_p = 0.02f;
    int32_t toks[STEPS];
    for (int k = 0; k < 4; k++)
        CHECK_MSG(run_checked_mask(m, &sets[k], mask, 40 + (uint64_t)k, mprompt, PROMPT, toks) == 0,
                  "set %d: masked step differs from the reference", k);
    int drawn_masked = 0;
    for (uint64_t seed = 1; seed <= 16; seed++) {
        run_checked_mask(m, &sets[3], mask, seed, mprompt, PROMPT, toks);
        for (int i = 0; i < STEPS; i++) drawn_masked += !allowed(mask, toks[i]);
    }
    CHECK_MSG(drawn_masked == 0, "%d masked tokens drawn over 16 seeds", drawn_masked);
    /* the logprobs renormalise over the allowed set: with 5 tokens allowed
     * the top 20 are those 5 with probabilities summing to 1, then -inf */
    memset(mask, 0, (size_t)W * sizeof *mask);
    const int five[5] = {1, 40, 41, V / 2, V - 1};
    for (int k = 0; k < 5; k++) mask[five[k] >> 5] |= 1u << (five[k] & 31);
    CHECK_OK(frt_model_set_token_mask(m, mask, W));
    CHECK(run_checked_mask(m, &sets[0], mask, 1, mprompt, PROMPT, toks) == 0);
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

/* 5. */
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
        CHECK(run_checked_mask(m, &s, mask, 9 + (uint64_t)i, mprompt, PROMPT, toks) == 0);
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
    CHECK(run_checked_mask(m, &s, NULL, 5, mprompt, PROMPT, toks) == 0);
    CHECK(frt_graph_count(m->g_decode) + frt_graph_count(m->g_sample) == variants && variants == 2);
}

/* 6. */
static void test_mask_refused(frt_model *m, uint32_t *mask)
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
    CHECK(run_checked_mask(m, &s, mask, 3, mprompt, PROMPT, toks) == 0 && toks[0] == only &&
          toks[STEPS - 1] == only);
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

/* 7. */
static void test_branches(const char *dir, uint32_t *mask)
{
    frt_model_params p = frt_model_default_params();
    p.backend = backend;
    p.prefill_chunk = C;
    p.max_seq = 512;
    p.branch_slots = 3;
    frt_model *m = NULL;
    int rc = frt_model_load(dir, &p, &m);
    if (rc == FRT_ERR_UNSUPPORTED) { /* a backend without branch slots: nothing to check */
        printf("   branch slots: not supported by this backend (%s)\n", frt_last_error());
        return;
    }
    CHECK_OK(rc);
    if (!m) return;
    CHECK_OK(frt_model_prefill(m, mprompt, PROMPT));
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

static void test_mask(frt_model *m, const char *dir)
{
    W = (V + 31) / 32;
    for (int i = 0; i < PROMPT; i++) mprompt[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
    uint32_t *mask = calloc((size_t)W, sizeof *mask);
    test_half_mask(m, mask);
    test_one_token(m, mask);
    test_mask_refused(m, mask);
    test_branches(dir, mask);
    free(mask);
}

int main(int argc, char **argv)
{
    if (argc > 1 && frt_backend_parse(argv[1], &backend) < 0) {
        fprintf(stderr, "usage: test_model_sampling [cpu|cuda]\n");
        return 2;
    }
    if (backend == FRT_BACKEND_CUDA) {
        int n = 0;
        frt_device_count(FRT_BACKEND_CUDA, &n);
        if (n == 0) TEST_SKIP("no CUDA device");
    }
    char tmp[256], dir[300];
    snprintf(tmp, sizeof tmp, "/tmp/frt-test-model-sampling-%d", (int)getpid());
    mkdir(tmp, 0755);
    static const char *const families[] = {"tiny", "tiny-dense"};
    for (int f = 0; f < 2; f++) {
        printf("== %s\n", families[f]);
        frt_test_seed(26 + (uint64_t)f);
        snprintf(dir, sizeof dir, "%s/%s", tmp, families[f]);
        CHECK_OK(frt_gen_model_write(families[f], 21, dir));
        frt_model *m = load(dir);
        if (!m) continue;
        frt_model_info info;
        frt_model_info_get(m, &info);
        V = info.vocab_size;
        logits = malloc((size_t)V * sizeof(float));
        adjusted = malloc((size_t)V * sizeof(float));
        scratch = malloc(FRT_CPU_SAMPLE_SCRATCH(V) * sizeof(float));
        counts = malloc((size_t)V * sizeof(int32_t));
        seen = malloc((size_t)V);
        test_counts(m);
        test_reference(m);
        test_refused(m);
        test_mask(m, dir);
        free(logits);
        free(adjusted);
        free(scratch);
        free(counts);
        free(seen);
        frt_model_free(m);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return frt_test_report();
}
