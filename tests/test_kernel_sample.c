/*
 * test_kernel_sample.c - frt_cpu_argmax, frt_cpu_sample and the SplitMix64
 * generator of kernels/cpu/rng.h.
 *  - argmax: lowest index on ties, NaN skipped;
 *  - sample: temperature 0 is argmax; over a fine grid of u the frequency
 *    of every token equals its probability computed in fp64 from the HF
 *    semantics (temperature, top-k, top-p on the renormalised set; vLLM's
 *    min_p before top-k); the
 *    order is (logit desc, index asc) so the mapping u -> token is fixed;
 *    a hand-computed top-p case; ties; NaN / -inf / +inf logits; a large
 *    vocabulary with and without top-k; every bad argument fails cleanly;
 *  - rng: the published SplitMix64 outputs for seed 0, uniform in [0, 1).
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"

static float scratch[FRT_CPU_SAMPLE_SCRATCH(200000)];

static void test_argmax(void)
{
    float a[6] = {1, 3, -2, 3, 0.5f, 3};
    CHECK(frt_cpu_argmax(a, 6) == 1);
    a[0] = NAN;
    CHECK(frt_cpu_argmax(a, 6) == 1);
    a[4] = INFINITY;
    CHECK(frt_cpu_argmax(a, 6) == 4);
    float nan2[2] = {NAN, NAN};
    CHECK(frt_cpu_argmax(nan2, 2) == 0);
    float one = -7;
    CHECK(frt_cpu_argmax(&one, 1) == 0);
    CHECK_STATUS(frt_cpu_argmax(a, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cpu_argmax(NULL, 3), FRT_ERR_INVALID_ARGUMENT);
}

/* Expected probability of each token under (T, top_k, top_p), fp64: the
 * reference of the semantics, from a rank table (the test's own sort). */
static const float *rank_logits;
static int by_rank(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    float la = isnan(rank_logits[a]) ? -INFINITY : rank_logits[a];
    float lb = isnan(rank_logits[b]) ? -INFINITY : rank_logits[b];
    if (la != lb) return la > lb ? -1 : 1;
    return (a > b) - (a < b);
}

static void ref_probs_minp(double *p, const float *l, int n, double T, int top_k, double top_p, double min_p)
{
    int *order = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) order[i] = i;
    rank_logits = l;
    qsort(order, (size_t)n, sizeof(int), by_rank);
    int kept = top_k > 0 && top_k < n ? top_k : n;
    double lmax = l[order[0]], total = 0;
    for (int r = 1; r < kept; r++) /* min_p: the prefix with p >= min_p, before top-k */
        if (exp((l[order[r]] - lmax) / T) < min_p) kept = r;
    for (int i = 0; i < n; i++) p[i] = 0;
    for (int r = 0; r < kept; r++) total += p[order[r]] = exp((l[order[r]] - lmax) / T);
    if (top_p < 1) {
        /* keep ranks 0..r where the cumulative sum first reaches top_p */
        double cum = 0;
        int r = 0;
        for (; r < kept; r++) {
            cum += p[order[r]];
            if (cum >= top_p * total) break;
        }
        for (int q = r + 1; q < kept; q++) p[order[q]] = 0;
        total = cum;
    }
    for (int i = 0; i < n; i++) p[i] /= total;
    free(order);
}

static void ref_probs(double *p, const float *l, int n, double T, int top_k, double top_p)
{
    ref_probs_minp(p, l, n, T, top_k, top_p, 0.0);
}

/* Frequencies over u = (i + 0.5) / G match the probabilities within 1/G. */
static void check_distribution_minp(const float *l, int n, float T, int top_k, float top_p, float min_p)
{
    enum { G = 20000 };
    int *count = calloc((size_t)n, sizeof(int));
    double *p = calloc((size_t)n, sizeof(double));
    ref_probs_minp(p, l, n, T, top_k, top_p, min_p);
    int bad_rc = 0;
    for (int i = 0; i < G; i++) {
        int tok = frt_cpu_sample_minp(l, n, T, top_k, top_p, min_p, (float)((i + 0.5) / G), scratch);
        if (tok < 0 || tok >= n) bad_rc++;
        else count[tok]++;
    }
    CHECK(bad_rc == 0);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)count[i] / G - p[i]);
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst <= 1.5 / G, "T %g top_k %d top_p %g min_p %g: frequency off by %.3e", (double)T, top_k,
              (double)top_p, (double)min_p, worst);
    free(count);
    free(p);
}

static void check_distribution(const float *l, int n, float T, int top_k, float top_p)
{
    check_distribution_minp(l, n, T, top_k, top_p, 0.0f);
}

static void test_distributions(void)
{
    float l[12];
    frt_test_fill(l, 12, -3, 3);
    l[5] = l[2]; /* a tie */
    check_distribution(l, 12, 1.0f, 0, 1.0f);
    check_distribution(l, 12, 0.6f, 0, 1.0f);
    check_distribution(l, 12, 1.7f, 4, 1.0f);
    check_distribution(l, 12, 0.7f, 0, 0.8f);
    check_distribution(l, 12, 0.7f, 5, 0.9f);
    check_distribution(l, 12, 1.0f, 1, 1.0f); /* top_k 1 = argmax */
    check_distribution(l, 12, 1.0f, 12, 1.0f);
    check_distribution(l, 12, 1.0f, 50, 0.3f);
    /* min_p (vLLM: after temperature, before top-k / top-p) */
    check_distribution_minp(l, 12, 1.0f, 0, 1.0f, 0.1f);
    check_distribution_minp(l, 12, 0.5f, 0, 1.0f, 0.05f);
    check_distribution_minp(l, 12, 2.0f, 5, 1.0f, 0.3f);
    check_distribution_minp(l, 12, 1.0f, 0, 0.7f, 0.2f);
    check_distribution_minp(l, 12, 1.5f, 8, 0.9f, 0.01f);
    check_distribution_minp(l, 12, 0.7f, 0, 1.0f, 1.0f); /* the argmax only */
}

/* Probabilities 0.5, 0.3, 0.15, 0.05 (in scrambled index order). */
static void test_top_p_by_hand(void)
{
    float l[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    /* top_p 0.85: 0.5 + 0.3 < 0.85, + 0.15 reaches it: tokens 1, 3, 0 kept */
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 0.85f, 0.0f, scratch) == 1);
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 0.85f, 0.6f, scratch) == 3);  /* 0.6*0.95 = 0.57 */
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 0.85f, 0.99f, scratch) == 0); /* never token 2 */
    /* no cut: the draw walks the ids in order (cum 0.15, 0.65, 0.70, 1.0) */
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 1.0f, 0.99f, scratch) == 3);
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 1.0f, 0.66f, scratch) == 2);
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 1.0f, 0.10f, scratch) == 0);
    CHECK(frt_cpu_sample(l, 4, 1.0f, 4, 1.0f, 0.66f, scratch) == 2); /* top_k n: no cut */
    CHECK(frt_cpu_sample(l, 4, 1.0f, 3, 1.0f, 0.66f, scratch) == 3); /* a cut: the sorted order */
    /* min_p 0.2 (p relative to 0.5: 0.3, 1, 0.1, 0.6) keeps ids 0, 1, 3: cum 0.15, 0.65, 0.95 */
    CHECK(frt_cpu_sample_minp(l, 4, 1.0f, 0, 1.0f, 0.2f, 0.70f, scratch) == 3);
    CHECK(frt_cpu_sample_minp(l, 4, 1.0f, 0, 1.0f, 0.2f, 0.10f, scratch) == 0);
    CHECK(frt_cpu_sample(l, 4, 1.0f, 0, 0.4f, 0.99f, scratch) == 1); /* only the top one */
    CHECK(frt_cpu_sample(l, 4, 1.0f, 2, 1.0f, 0.99f, scratch) == 3);
    CHECK(frt_cpu_sample(l, 4, 0.0f, 0, 1.0f, 0.99f, scratch) == 1); /* greedy */
}

static void test_special_values(void)
{
    float tie[3] = {2, 2, -1};
    CHECK(frt_cpu_sample(tie, 3, 1.0f, 0, 1.0f, 0.1f, scratch) == 0);
    CHECK(frt_cpu_sample(tie, 3, 1.0f, 0, 1.0f, 0.6f, scratch) == 1);
    float withnan[4] = {NAN, 1, NAN, 0};
    int ok = 1;
    for (int i = 0; i < 100; i++) {
        int t = frt_cpu_sample(withnan, 4, 1.0f, 0, 1.0f, i / 100.0f, scratch);
        ok &= t == 1 || t == 3;
    }
    CHECK(ok);
    float neg[3] = {-INFINITY, 0.5f, -INFINITY};
    CHECK(frt_cpu_sample(neg, 3, 1.0f, 0, 1.0f, 0.999f, scratch) == 1);
    float allneg[3] = {-INFINITY, -INFINITY, NAN};
    CHECK(frt_cpu_sample(allneg, 3, 1.0f, 0, 1.0f, 0.5f, scratch) == 0);
    float pinf[3] = {1, INFINITY, INFINITY};
    CHECK(frt_cpu_sample(pinf, 3, 1.0f, 0, 1.0f, 0.9f, scratch) == 1);
    float tiny_t[3] = {1, 1.001f, 0.9f};
    CHECK(frt_cpu_sample(tiny_t, 3, 1e-30f, 0, 1.0f, 0.99f, scratch) == 1);
}

/* A Qwen-sized vocabulary: top-k (heap) and full-sort paths agree with the
 * reference probabilities at a few u. */
static void test_large_vocab(void)
{
    int n = 151936;
    float *l = malloc((size_t)n * 4);
    double *p = malloc((size_t)n * sizeof(double));
    frt_test_fill(l, (size_t)n, -8, 8);
    l[777] = 12;
    l[150000] = 11.5f;
    /* top_k 20, top_p 0.95, T 0.7 (Qwen's generation_config) */
    ref_probs(p, l, n, 0.7, 20, 0.95);
    int ok = 1;
    double cum_check[3] = {0.05, 0.5, 0.97};
    for (int c = 0; c < 3; c++) {
        int tok = frt_cpu_sample(l, n, 0.7f, 20, 0.95f, (float)cum_check[c], scratch);
        ok &= tok >= 0 && p[tok] > 0;
    }
    CHECK(ok);
    CHECK(frt_cpu_sample(l, n, 0.7f, 20, 0.95f, 0.0f, scratch) == 777);
    /* no cut: the walk in id order; u = 0 is the first id with p > 0 */
    CHECK(frt_cpu_sample(l, n, 1.0f, 0, 1.0f, 0.0f, scratch) == 0);
    /* top-p alone: the full sort; u = 0 is the top token, large u a kept one */
    CHECK(frt_cpu_sample(l, n, 1.0f, 0, 0.9f, 0.0f, scratch) == 777);
    int tok = frt_cpu_sample(l, n, 1.0f, 0, 0.9f, 0.999f, scratch);
    ref_probs(p, l, n, 1.0, 0, 0.9);
    CHECK(tok >= 0 && p[tok] > 0);
    free(l);
    free(p);
}

static void test_bad_args(void)
{
    float l[3] = {1, 2, 3};
    int bad = FRT_ERR_INVALID_ARGUMENT;
    CHECK_STATUS(frt_cpu_sample(l, 0, 1.0f, 0, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, (1 << 24) + 1, 1.0f, 0, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(NULL, 3, 1.0f, 0, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, 1.0f, 0.5f, NULL), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, -1.0f, 0, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, NAN, 0, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, INFINITY, 0, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, -1, 1.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, 0.0f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, 1.5f, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, NAN, 0.5f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, 1.0f, 1.0f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, 1.0f, -0.1f, scratch), bad);
    CHECK_STATUS(frt_cpu_sample(l, 3, 1.0f, 0, 1.0f, NAN, scratch), bad);
    CHECK(strstr(frt_last_error(), "sample") != NULL);
}

static void test_rng(void)
{
    uint64_t s = 0;
    CHECK(frt_rng_next(&s) == 0xE220A8397B1DCDAFull);
    CHECK(frt_rng_next(&s) == 0x6E789E6AA1B965F4ull);
    CHECK(frt_rng_next(&s) == 0x06C45D188009454Full);
    /* same state, same stream (the state is all there is) */
    uint64_t a = 12345, b = 12345;
    int same = 1;
    for (int i = 0; i < 100; i++) same &= frt_rng_uniform(&a) == frt_rng_uniform(&b);
    CHECK(same && a == b);
    double sum = 0;
    int in_range = 1;
    enum { M = 100000 };
    for (int i = 0; i < M; i++) {
        float u = frt_rng_uniform(&a);
        in_range &= u >= 0.0f && u < 1.0f;
        sum += u;
    }
    CHECK(in_range);
    CHECK_MSG(fabs(sum / M - 0.5) < 0.005, "mean %g", sum / M);
    /* the largest value the conversion can give is below 1 */
    CHECK((float)(UINT64_MAX >> 40) * (1.0f / 16777216.0f) < 1.0f);
}

int main(void)
{
    frt_test_seed(101);
    test_argmax();
    test_distributions();
    test_top_p_by_hand();
    test_special_values();
    test_large_vocab();
    test_bad_args();
    test_rng();
    return frt_test_report();
}
