/*
 * sample.c - argmax and temperature / top-k / top-p sampling from a uniform
 * u supplied by the caller (kernels/cpu/rng.h), deterministic: with a top-k
 * or top-p cut the tokens are ordered by (logit desc, index asc), a total
 * order, so the result does not depend on the sort algorithm; without one
 * the draw walks the tokens in index order (no sort). Probabilities in
 * double.
 * Semantics follow the HF logits processors (temperature, top-k, top-p on the
 * renormalised top-k set), with vLLM's min_p (after temperature, before
 * top-k / top-p: frt/sampling.h). Tested in tests/test_kernel_sample.c.
 */
#include "kernels/cpu/kernels_cpu.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>

/* A candidate is two floats in the scratch: [logit key, index]. Indices up
 * to 2^24 are exact in a float. */
typedef struct cand {
    float key;
    float idx;
} cand;

/* a before b in the sampling order: larger key first, then lower index. */
static int cand_before(const cand *a, const cand *b)
{
    if (a->key != b->key) return a->key > b->key;
    return a->idx < b->idx;
}

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (cand_before(a, b)) return -1;
    if (cand_before(b, a)) return 1;
    return 0;
}

static float sort_key(float l) { return isnan(l) ? -INFINITY : l; }

/* p of logit l (NaN as -inf), 0 when min_p cuts it. */
static double sample_prob_kept(float l, double lmax, double inv_t, float min_p)
{
    const double p = exp(((double)sort_key(l) - lmax) * inv_t);
    return p >= (double)min_p ? p : 0.0;
}

/* Min-heap (root = the candidate that comes last in the order) of k. */
static void heap_sift_down(cand *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cand_before(&h[m], &h[l])) m = l;
        if (r < n && cand_before(&h[m], &h[r])) m = r;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

int frt_cpu_argmax(const float *logits, int n)
{
    if (!logits || n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "argmax: n %d", n);
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (isnan(logits[i])) continue;
        if (best < 0 || logits[i] > logits[best]) best = i;
    }
    return best < 0 ? 0 : best;
}

/* No top-k and no top-p cut: the draw over the tokens in index order (no
 * sort). min_p keeps the same set as its prefix of the sorted order. The
 * distribution is the sorted draw's; only which u maps to which token
 * differs. Rounding past the end (u * total reached by no token) returns
 * the argmax. */
static int sample_index_order(const float *logits, int n, float temperature, float min_p, float u)
{
    const int imax = frt_cpu_argmax(logits, n);
    const double lmax = sort_key(logits[imax]);
    if (isinf(lmax)) return imax; /* +inf: the first; all -inf / NaN: 0 */
    const double inv_t = 1.0 / (double)temperature;
#define PROB(i) sample_prob_kept(logits[i], lmax, inv_t, min_p)
    double total = 0;
    for (int i = 0; i < n; i++) total += PROB(i);
    double target = (double)u * total, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += PROB(i);
        if (cum > target) return i;
    }
#undef PROB
    return imax;
}

int frt_cpu_sample(const float *logits, int n, float temperature, int top_k, float top_p, float u,
                   float *scratch)
{
    return frt_cpu_sample_minp(logits, n, temperature, top_k, top_p, 0.0f, u, scratch);
}

int frt_cpu_sample_minp(const float *logits, int n, float temperature, int top_k, float top_p, float min_p,
                        float u, float *scratch)
{
    if (!logits || !scratch || n < 1 || n > (1 << 24))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: n %d (1..2^24) or NULL buffer", n);
    if (!(temperature >= 0.0f) || isinf(temperature))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: temperature %g", (double)temperature);
    if (top_k < 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: top_k %d < 0", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: top_p %g not in (0, 1]", (double)top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: min_p %g not in [0, 1]", (double)min_p);
    if (!(u >= 0.0f && u < 1.0f))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "sample: u %g not in [0, 1)", (double)u);
    if (temperature == 0.0f) return frt_cpu_argmax(logits, n);
    if ((top_k == 0 || top_k >= n) && top_p >= 1.0f)
        return sample_index_order(logits, n, temperature, min_p, u);

    cand *c = (cand *)scratch;
    int m; /* kept candidates, sorted */
    if (top_k > 0 && top_k < n) {
        m = top_k;
        for (int i = 0; i < m; i++) c[i] = (cand){sort_key(logits[i]), (float)i};
        for (int i = m / 2 - 1; i >= 0; i--) heap_sift_down(c, m, i);
        for (int i = m; i < n; i++) {
            cand x = {sort_key(logits[i]), (float)i};
            if (cand_before(&x, &c[0])) {
                c[0] = x;
                heap_sift_down(c, m, 0);
            }
        }
    } else {
        m = n;
        for (int i = 0; i < n; i++) c[i] = (cand){sort_key(logits[i]), (float)i};
    }
    qsort(c, (size_t)m, sizeof *c, cand_cmp);

    double lmax = c[0].key;
    if (isinf(lmax)) return (int)c[0].idx; /* +inf wins; all -inf: first in order */
    double inv_t = 1.0 / (double)temperature;
#define PROB(i) exp(((double)c[i].key - lmax) * inv_t)
    if (min_p > 0.0f) /* a prefix: p falls along the order; PROB(0) = 1 >= min_p */
        for (int i = 1; i < m; i++)
            if (PROB(i) < (double)min_p) {
                m = i;
                break;
            }
    double total = 0;
    for (int i = 0; i < m; i++) total += PROB(i);
    if (top_p < 1.0f) {
        double want = (double)top_p * total, cum = 0;
        int keep = m;
        for (int i = 0; i < m; i++) {
            cum += PROB(i);
            if (cum >= want) {
                keep = i + 1;
                break;
            }
        }
        m = keep;
        total = cum;
    }
    double target = (double)u * total, cum = 0;
    for (int i = 0; i < m; i++) {
        cum += PROB(i);
        if (cum > target) return (int)c[i].idx;
    }
#undef PROB
    return (int)c[m - 1].idx; /* rounding: u * total reached the end */
}
