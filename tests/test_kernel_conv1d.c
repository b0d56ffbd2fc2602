/*
 * test_kernel_conv1d.c - frt_cpu_conv1d_causal (depthwise causal conv + SiLU
 * with a carried state) against an fp64 reference over xpad = [state, x]:
 * out[t, c] = silu(sum_j w[c, j] xpad[t + j, c]). Kernel 4 (Qwen3.5), 2 and
 * 1; channel counts not a multiple of the 64-channel work block; a block
 * shorter than the state (state update from the old state); one call ==
 * several calls with the state carried, bit for bit (prefill in pieces, then
 * token-by-token decode); thread-count independence.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

#include <omp.h>

/* out and the new state (as double) from x, state, w. */
static void ref_conv(double *out, double *new_state, const float *x, const float *state,
                     const float *w, int n_tok, int ch, int K)
{
    int ks = K - 1;
    for (int c = 0; c < ch; c++) {
        /* xpad column of channel c */
        for (int t = 0; t < n_tok; t++) {
            double acc = 0;
            for (int j = 0; j < K; j++) {
                int i = t + j;
                double xv = i < ks ? state[c * ks + i] : x[(size_t)(i - ks) * ch + c];
                acc += (double)w[c * K + j] * xv;
            }
            out[(size_t)t * ch + c] = acc / (1.0 + exp(-acc));
        }
        for (int i = 0; i < ks; i++) {
            int src = n_tok + i;
            new_state[c * ks + i] = src < ks ? state[c * ks + src] : x[(size_t)(src - ks) * ch + c];
        }
    }
}

static void run_case(int n_tok, int ch, int K)
{
    int ks = K - 1;
    size_t nx = (size_t)n_tok * ch, ns = (size_t)ch * ks;
    float *x = xmalloc(nx * 4), *w = xmalloc((size_t)ch * K * 4), *st = xmalloc(ns * 4);
    float *st0 = xmalloc(ns * 4), *out = xmalloc(nx * 4);
    double *ref = xmalloc(nx * sizeof(double)), *ref_st = xmalloc(ns * sizeof(double));
    frt_test_fill(x, nx, -3, 3);
    frt_test_fill(w, (size_t)ch * K, -1, 1);
    frt_test_fill(st0, ns, -3, 3);
    memcpy(st, st0, ns * 4);
    ref_conv(ref, ref_st, x, st0, w, n_tok, ch, K);
    frt_cpu_conv1d_causal(out, x, st, w, n_tok, ch, K);
    double e = rel_err_d(out, ref, nx);
    CHECK_MSG(e <= 1e-6, "n_tok %d ch %d K %d: out rel err %.3e", n_tok, ch, K, e);
    /* the state holds copies of inputs: exact */
    int exact = 1;
    for (size_t i = 0; i < ns; i++) exact &= (double)st[i] == ref_st[i];
    CHECK_MSG(exact, "n_tok %d ch %d K %d: state", n_tok, ch, K);
    free(x);
    free(w);
    free(st);
    free(st0);
    free(out);
    free(ref);
    free(ref_st);
}

/* 50 tokens in one call == calls of 1, 2, 30, 1, 16 tokens with the state
 * carried (bit for bit, out and state); 1 and 3 threads alike. */
static void test_split(void)
{
    int n_tok = 50, ch = 200, K = 4, ks = 3;
    int pieces[5] = {1, 2, 30, 1, 16};
    size_t nx = (size_t)n_tok * ch, ns = (size_t)ch * ks;
    float *x = xmalloc(nx * 4), *w = xmalloc((size_t)ch * K * 4), *st0 = xmalloc(ns * 4);
    float *s1 = xmalloc(ns * 4), *s2 = xmalloc(ns * 4), *s3 = xmalloc(ns * 4);
    float *o1 = xmalloc(nx * 4), *o2 = xmalloc(nx * 4), *o3 = xmalloc(nx * 4);
    frt_test_fill(x, nx, -3, 3);
    frt_test_fill(w, (size_t)ch * K, -1, 1);
    frt_test_fill(st0, ns, -3, 3);
    memcpy(s1, st0, ns * 4);
    memcpy(s2, st0, ns * 4);
    memcpy(s3, st0, ns * 4);
    int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    frt_cpu_conv1d_causal(o1, x, s1, w, n_tok, ch, K);
    omp_set_num_threads(1);
    frt_cpu_conv1d_causal(o3, x, s3, w, n_tok, ch, K);
    omp_set_num_threads(saved);
    for (int p = 0, t0 = 0; p < 5; t0 += pieces[p], p++)
        frt_cpu_conv1d_causal(o2 + (size_t)t0 * ch, x + (size_t)t0 * ch, s2, w, pieces[p], ch, K);
    CHECK(memcmp(o1, o2, nx * 4) == 0);
    CHECK(memcmp(s1, s2, ns * 4) == 0);
    CHECK(memcmp(o1, o3, nx * 4) == 0);
    CHECK(memcmp(s1, s3, ns * 4) == 0);
    free(x);
    free(w);
    free(st0);
    free(s1);
    free(s2);
    free(s3);
    free(o1);
    free(o2);
    free(o3);
}

int main(void)
{
    frt_test_seed(41);
    /* n_tok, channels, kernel */
    run_case(50, 100, 4);
    run_case(1, 70, 4); /* decode: shorter than the state */
    run_case(2, 130, 4);
    run_case(3, 5, 4);
    run_case(17, 64, 2);
    run_case(9, 33, 1); /* no state */
    test_split();
    frt_cpu_conv1d_causal(NULL, NULL, NULL, NULL, 0, 0, 4); /* empty: no-op */
    CHECK(1);
    return frt_test_report();
}
