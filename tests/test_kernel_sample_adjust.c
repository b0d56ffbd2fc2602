/*
 * test_kernel_sample_adjust.c - the sampling fields of frt/sampling.h on the
 * CPU reference kernels, on random logits:
 *  - frt_cpu_logits_adjust against an fp64 reference written from the
 *    definitions (vLLM's apply_penalties, OpenAI's penalties, logit bias
 *    first), and penalties change only what they should: an untouched token
 *    keeps its bits, a token only seen moves by the repetition penalty only,
 *    a generated one by frequency * count + presence, each in its direction;
 *  - a +100 logit_bias forces its token at any temperature, top-k, top-p;
 *    -100 removes a token;
 *  - min_p = 1 is greedy at any temperature (min_p's frequencies over a u
 *    grid: tests/test_kernel_sample.c);
 *  - logprobs: over a vocabulary of 20 the top-20 probabilities sum to 1,
 *    the order is (logprob desc, id asc), the values match an fp64
 *    log-softmax, the sampled token's value is its entry; a large
 *    vocabulary's top 20 equal a full sort's;
 *  - the allowed-token mask (frt_cpu_logits_mask): allowed logits keep
 *    their bits, the others become -inf (bits past n ignored); masked
 *    tokens are never drawn; logprobs renormalise over the allowed set; a
 *    one-token mask forces its token at any temperature, top-k, top-p,
 *    min_p, with logprob 0;
 *  - every bad argument fails cleanly.
 */
#include "frt_test.h"
#include "frt_test_sampling.h"

enum { N = 1000, BIG = 151936 };

static float scratch[FRT_CPU_SAMPLE_SCRATCH(BIG)];

/* fp64 reference of steps 1-3, straight from the definitions. */
static double ref_adjust(float l, int biased, float bias, int32_t c, int seen, const frt_sampling *s)
{
    double x = (double)l + (biased ? (double)bias : 0.0);
    double r = s->repetition_penalty == 0.0f ? 1.0 : (double)s->repetition_penalty;
    if (seen) x = x > 0 ? x / r : x * r;
    x -= (double)s->frequency_penalty * c;
    x -= (double)s->presence_penalty * (c > 0);
    return x;
}

static void random_state(int32_t *counts, uint8_t *seen, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t r = frt_test_u64();
        counts[i] = (r & 3) == 0 ? (int32_t)((r >> 8) % 6) : 0; /* a quarter generated */
        seen[i] = counts[i] > 0 || ((r >> 4) & 3) == 0;
    }
}

static void test_adjust_reference(void)
{
    float l[N], out[N];
    double want[N];
    float outd[N];
    int32_t counts[N];
    uint8_t seen[N], biased[N] = {0};
    frt_test_fill(l, N, -8, 8);
    random_state(counts, seen, N);
    frt_sampling s = frt_test_sampling(1.0f);
    s.presence_penalty = 0.7f;
    s.frequency_penalty = 0.3f;
    s.repetition_penalty = 1.3f;
    s.n_logit_bias = 40;
    float bias_of[N] = {0};
    for (int j = 0; j < s.n_logit_bias; j++) {
        int t = j * 23 + 5;
        s.logit_bias[j].token = t;
        s.logit_bias[j].bias = frt_test_rand(-100, 100);
        biased[t] = 1;
        bias_of[t] = s.logit_bias[j].bias;
    }
    CHECK_OK(frt_cpu_logits_adjust(out, l, N, &s, counts, seen));
    for (int i = 0; i < N; i++) {
        want[i] = ref_adjust(l[i], biased[i], bias_of[i], counts[i], seen[i], &s);
        outd[i] = (float)want[i];
    }
    CHECK_ERR_NEAR(out, outd, N, 1e-6);
    /* only what should change changes, in the right direction */
    int untouched_same = 1, rep_only = 1, gen_lower = 1;
    for (int i = 0; i < N; i++) {
        if (biased[i]) continue;
        if (!seen[i]) untouched_same &= memcmp(&out[i], &l[i], 4) == 0;
        else if (counts[i] == 0) rep_only &= out[i] == (l[i] > 0 ? l[i] / 1.3f : l[i] * 1.3f);
        else gen_lower &= out[i] < (l[i] > 0 ? l[i] / 1.3f : l[i] * 1.3f);
    }
    CHECK(untouched_same && rep_only && gen_lower);
    /* frequency and presence alone touch only the generated tokens */
    frt_sampling fp = frt_test_sampling(1.0f);
    fp.frequency_penalty = -0.5f; /* negative: encourages */
    fp.presence_penalty = 0.25f;
    CHECK(frt_sample_adjusts(&fp));
    CHECK_OK(frt_cpu_logits_adjust(out, l, N, &fp, counts, seen));
    int only_gen = 1;
    for (int i = 0; i < N; i++) {
        float w = counts[i] ? (l[i] - (-0.5f) * (float)counts[i]) - 0.25f : l[i];
        only_gen &= memcmp(&out[i], &w, 4) == 0;
    }
    CHECK(only_gen);
    /* off: nothing to adjust */
    frt_sampling off = frt_test_sampling(0.7f);
    CHECK(!frt_sample_adjusts(&off));
    off.repetition_penalty = 1.0f;
    CHECK(!frt_sample_adjusts(&off));
}

static int argmax_of(const float *l, int n) { return frt_cpu_argmax(l, n); }

static void test_bias_forces(void)
{
    float l[N], out[N];
    int32_t counts[N] = {0};
    uint8_t seen[N] = {0};
    frt_test_fill(l, N, -8, 8);
    const float temps[4] = {0.0f, 0.5f, 1.0f, 2.0f};
    int forced = 1, never = 1;
    for (int k = 0; k < 20; k++) {
        frt_sampling s = frt_test_sampling(temps[k % 4]);
        int t = (int)(frt_test_u64() % N);
        s.n_logit_bias = 2;
        s.logit_bias[0] = (frt_logit_bias){t, 100.0f};
        int best = argmax_of(l, N);
        s.logit_bias[1] = (frt_logit_bias){best == t ? (t + 1) % N : best, -100.0f};
        s.top_k = k % 3 == 0 ? 40 : 0;
        s.top_p = k % 2 ? 0.9f : 1.0f;
        CHECK_OK(frt_cpu_logits_adjust(out, l, N, &s, counts, seen));
        for (int i = 0; i < 50; i++) {
            float u = (float)((i + 0.5) / 50);
            int tok = s.temperature == 0.0f ? frt_cpu_argmax(out, N)
                                            : frt_cpu_sample(out, N, s.temperature, s.top_k, s.top_p, u, scratch);
            forced &= tok == t;
        }
        /* -100 alone: the model's favourite is never drawn */
        frt_sampling d = frt_test_sampling(1.0f);
        d.n_logit_bias = 1;
        d.logit_bias[0] = (frt_logit_bias){best, -100.0f};
        CHECK_OK(frt_cpu_logits_adjust(out, l, N, &d, counts, seen));
        for (int i = 0; i < 50; i++) never &= frt_cpu_sample(out, N, 1.0f, 0, 1.0f, (float)((i + 0.5) / 50), scratch) != best;
    }
    CHECK(forced);
    CHECK(never);
}

static void test_min_p_greedy(void)
{
    float l[N];
    const float temps[6] = {0.05f, 0.7f, 1.0f, 2.0f, 10.0f, 100.0f};
    int same = 1;
    for (int rep = 0; rep < 10; rep++) {
        frt_test_fill(l, N, -4, 4);
        int want = frt_cpu_argmax(l, N);
        for (int t = 0; t < 6; t++)
            for (int i = 0; i < 40; i++) {
                int tok = frt_cpu_sample_minp(l, N, temps[t], rep % 2 ? 30 : 0, rep % 3 ? 0.8f : 1.0f, 1.0f,
                                              (float)((i + 0.5) / 40), scratch);
                same &= tok == want;
            }
    }
    CHECK(same);
}

static void test_logprobs_small(void)
{
    enum { V = 20 };
    float l[V];
    frt_test_fill(l, V, -5, 5);
    l[7] = l[3]; /* a tie: 3 before 7 */
    frt_logprobs lp;
    CHECK_OK(frt_cpu_logprobs(&lp, l, V, 11, V));
    CHECK(lp.n_top == V && lp.token == 11);
    double sum = 0, lmax = -INFINITY, s2 = 0;
    for (int i = 0; i < V; i++) lmax = fmax(lmax, l[i]);
    for (int i = 0; i < V; i++) s2 += exp((double)l[i] - lmax);
    double lse = lmax + log(s2);
    int ordered = 1, near = 1, pos3 = -1, pos7 = -1;
    for (int k = 0; k < V; k++) {
        sum += exp((double)lp.top_logprob[k]);
        if (k) ordered &= lp.top_logprob[k] <= lp.top_logprob[k - 1];
        near &= fabs(lp.top_logprob[k] - ((double)l[lp.top_token[k]] - lse)) <= 1e-6;
        if (lp.top_token[k] == 11) CHECK(lp.top_logprob[k] == lp.logprob);
        if (lp.top_token[k] == 3) pos3 = k;
        if (lp.top_token[k] == 7) pos7 = k;
    }
    CHECK_MSG(fabs(sum - 1.0) < 1e-5, "sum of probabilities %.9f", sum);
    CHECK(ordered && near && pos3 >= 0 && pos3 + 1 == pos7);
    CHECK(fabs(lp.logprob - ((double)l[11] - lse)) <= 1e-6);
    /* top_n 0: only the sampled token */
    CHECK_OK(frt_cpu_logprobs(&lp, l, V, 2, 0));
    CHECK(lp.n_top == 0 && lp.token == 2 && fabs(lp.logprob - ((double)l[2] - lse)) <= 1e-6);
}

static int by_logit_desc(const void *a, const void *b, void *ctx)
{
    const float *l = ctx;
    int i = *(const int *)a, j = *(const int *)b;
    if (l[i] != l[j]) return l[i] > l[j] ? -1 : 1;
    return (i > j) - (i < j);
}

static void test_logprobs_large(void)
{
    float *l = malloc((size_t)BIG * 4);
    int *idx = malloc((size_t)BIG * sizeof(int));
    frt_test_fill(l, BIG, -10, 10);
    for (int i = 0; i < BIG; i++) idx[i] = i;
    qsort_r(idx, BIG, sizeof(int), by_logit_desc, l);
    frt_logprobs lp;
    CHECK_OK(frt_cpu_logprobs(&lp, l, BIG, 4242, 20));
    int same = lp.n_top == 20;
    for (int k = 0; k < 20; k++) same &= lp.top_token[k] == idx[k];
    CHECK(same);
    double sum = 0;
    for (int i = 0; i < BIG; i++) sum += exp((double)l[i] - 10.0);
    double lse = 10.0 + log(sum);
    CHECK(fabs(lp.logprob - ((double)l[4242] - lse)) <= 1e-5);
    free(l);
    free(idx);
}

/* Step 3b, the allowed-token mask, on N = 1000 random logits (N % 32 = 8:
 * the last word's bits past N are set and must not matter). */
static void test_mask(void)
{
    float *l = malloc(N * sizeof(float)), *m = malloc(N * sizeof(float));
    frt_test_fill(l, N, -6, 6);
    uint32_t mask[(N + 31) / 32];
    frt_test_random_mask(mask, N, 8);
    mask[N / 32] |= ~((1u << (N % 32)) - 1u); /* bits past N */
    memcpy(m, l, N * sizeof(float));
    CHECK_OK(frt_cpu_logits_mask(m, N, mask));
    int exact = 1, n_allowed = 0;
    for (int j = 0; j < N; j++) {
        const int ok = (mask[j / 32] >> (j % 32)) & 1u;
        n_allowed += ok;
        exact &= ok ? memcmp(&m[j], &l[j], sizeof(float)) == 0 : isinf(m[j]) && m[j] < 0;
    }
    CHECK_MSG(exact, "mask: allowed logits keep their bits, the others are -inf");
    /* masked tokens are never drawn (2000 draws at T 1.5, 1.0 with top-k) */
    int drawn_masked = 0;
    for (int r = 0; r < 2000; r++) {
        float u = (float)((frt_test_u64() >> 40) * (1.0 / 16777216.0));
        int t = frt_cpu_sample_minp(m, N, r % 2 ? 1.5f : 1.0f, r % 3 ? 0 : 50, r % 5 ? 1.0f : 0.9f, 0.0f, u, scratch);
        drawn_masked += t < 0 || !((mask[t / 32] >> (t % 32)) & 1u);
    }
    CHECK_MSG(drawn_masked == 0, "mask: %d masked tokens drawn", drawn_masked);
    /* logprobs renormalise over the allowed set: fp64 log-softmax of the
     * allowed logits, probabilities summing to 1 */
    double lmax = -INFINITY, sum = 0, psum = 0, err = 0;
    for (int j = 0; j < N; j++)
        if (isfinite(m[j]) && m[j] > lmax) lmax = m[j];
    for (int j = 0; j < N; j++)
        if (isfinite(m[j])) sum += exp((double)m[j] - lmax);
    const double lse = lmax + log(sum);
    for (int j = 0; j < N; j++) {
        frt_logprobs lp;
        CHECK_OK(frt_cpu_logprobs(&lp, m, N, j, 0));
        if (isfinite(m[j])) {
            psum += exp((double)lp.logprob);
            double d = fabs((double)lp.logprob - ((double)m[j] - lse));
            if (d > err) err = d;
        } else {
            err += !(isinf(lp.logprob) && lp.logprob < 0);
        }
    }
    CHECK_MSG(err <= 1e-5 && fabs(psum - 1.0) <= 1e-4, "mask logprobs: max |d| %g, sum of p %.7f over %d allowed",
              err, psum, n_allowed);
    /* one allowed token wins at any temperature, top-k, top-p */
    const int only = 777;
    memset(mask, 0, sizeof mask);
    mask[only / 32] = 1u << (only % 32);
    memcpy(m, l, N * sizeof(float));
    CHECK_OK(frt_cpu_logits_mask(m, N, mask));
    const float temps[5] = {0.0f, 0.3f, 1.0f, 10.0f, 100.0f};
    int forced = 1;
    for (int i = 0; i < 5; i++)
        for (int r = 0; r < 50; r++) {
            float u = (float)((frt_test_u64() >> 40) * (1.0 / 16777216.0));
            int t = temps[i] == 0.0f ? frt_cpu_argmax(m, N)
                                     : frt_cpu_sample_minp(m, N, temps[i], r % 2 ? 5 : 0, r % 3 ? 1.0f : 0.5f,
                                                           r % 4 ? 0.0f : 0.5f, u, scratch);
            forced &= t == only;
        }
    frt_logprobs lp;
    CHECK_OK(frt_cpu_logprobs(&lp, m, N, only, 3));
    CHECK_MSG(forced && lp.logprob == 0.0f && lp.top_token[0] == only && isinf(lp.top_logprob[1]),
              "one-token mask: forced %d, logprob %g", forced, (double)lp.logprob);
    CHECK_STATUS(frt_cpu_logits_mask(NULL, N, mask), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cpu_logits_mask(m, 0, mask), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cpu_logits_mask(m, N, NULL), FRT_ERR_INVALID_ARGUMENT);
    free(l);
    free(m);
}

static void test_bad_args(void)
{
    float l[4] = {1, 2, 3, 4}, out[4];
    int32_t c[4] = {0};
    uint8_t sn[4] = {0};
    frt_sampling s = frt_test_sampling(1.0f);
    int bad = FRT_ERR_INVALID_ARGUMENT;
    CHECK_STATUS(frt_cpu_logits_adjust(NULL, l, 4, &s, c, sn), bad);
    CHECK_STATUS(frt_cpu_logits_adjust(out, l, 0, &s, c, sn), bad);
    CHECK_STATUS(frt_cpu_logits_adjust(out, l, 4, &s, NULL, sn), bad);
    s.n_logit_bias = 1;
    s.logit_bias[0] = (frt_logit_bias){4, 1.0f};
    CHECK_STATUS(frt_cpu_logits_adjust(out, l, 4, &s, c, sn), bad);
    s.n_logit_bias = FRT_SAMPLING_MAX_BIAS + 1;
    CHECK_STATUS(frt_cpu_logits_adjust(out, l, 4, &s, c, sn), bad);
    CHECK_STATUS(frt_cpu_sample_minp(l, 4, 1.0f, 0, 1.0f, -0.1f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample_minp(l, 4, 1.0f, 0, 1.0f, 1.5f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample_minp(l, 4, 1.0f, 0, 1.0f, NAN, 0.5f, scratch), bad);
    frt_logprobs lp;
    CHECK_STATUS(frt_cpu_logprobs(NULL, l, 4, 0, 1), bad);
    CHECK_STATUS(frt_cpu_logprobs(&lp, l, 4, 4, 1), bad);
    CHECK_STATUS(frt_cpu_logprobs(&lp, l, 4, -1, 1), bad);
    CHECK_STATUS(frt_cpu_logprobs(&lp, l, 4, 0, 21), bad);
    CHECK_STATUS(frt_cpu_logprobs(&lp, l, 0, 0, 1), bad);
}

int main(void)
{
    frt_test_seed(2626);
    test_adjust_reference();
    test_bias_forces();
    test_min_p_greedy();
    test_logprobs_small();
    test_logprobs_large();
    test_mask();
    test_bad_args();
    return frt_test_report();
}
