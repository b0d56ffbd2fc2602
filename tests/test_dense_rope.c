/*
 * test_dense_rope.c - the RoPE kernel from a frequency table
 * (kernels/cpu/rope_freqs.h) on random data:
 *  - with the default table it gives the same bits as frt_cpu_rope (the
 *    hybrid's kernel, which computes that table inline);
 *  - it matches a naive fp64 rotation within 1e-6 norm-wise, at positions up
 *    to 100k, for odd head counts and head_dim not a power of two;
 *  - the llama3 table matches the band formula evaluated in fp64 (1e-6
 *    relative per frequency), keeps the high frequencies, divides the low
 *    ones by factor and leaves the medium band strictly between.
 */
#include "frt_test.h"

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rope_freqs.h"

#include <math.h>

static void test_default_same_bits(void)
{
    int n_tok = 9, nh = 3, hd = 20;
    size_t n = (size_t)n_tok * nh * hd;
    float *a = xmalloc(n * sizeof(float)), *b = xmalloc(n * sizeof(float)), inv[10];
    int32_t pos[9];
    for (int t = 0; t < n_tok; t++) pos[t] = (int32_t)(frt_test_u64() % 50000);
    frt_test_fill(a, n, -2.0f, 2.0f);
    memcpy(b, a, n * sizeof(float));
    frt_rope_inv_freq_default(inv, hd, 1e6f);
    frt_cpu_rope(a, n_tok, nh, hd, hd, pos, 1e6f);
    frt_cpu_rope_freqs(b, n_tok, nh, hd, hd, pos, inv);
    CHECK(memcmp(a, b, n * sizeof(float)) == 0);
    free(a);
    free(b);
}

static void test_vs_fp64(void)
{
    int n_tok = 7, nh = 5, hd = 18, half = hd / 2;
    size_t n = (size_t)n_tok * nh * hd;
    float *x = xmalloc(n * sizeof(float)), inv[9];
    double *ref = xmalloc(n * sizeof(double));
    int32_t pos[7] = {0, 1, 63, 64, 1000, 8191, 100000};
    frt_test_fill(x, n, -1.0f, 1.0f);
    frt_rope_inv_freq_llama3(inv, hd, 500000.0f, 32.0f, 1.0f, 4.0f, 8192);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < half; i++) {
                size_t o = ((size_t)t * nh + h) * hd;
                double a = (double)(float)((float)pos[t] * inv[i]); /* the fp32 angle, as HF */
                double x1 = x[o + i], x2 = x[o + i + half];
                ref[o + i] = x1 * cos(a) - x2 * sin(a);
                ref[o + i + half] = x2 * cos(a) + x1 * sin(a);
            }
    frt_cpu_rope_freqs(x, n_tok, nh, hd, hd, pos, inv);
    double e = rel_err_d(x, ref, n);
    printf("rope_freqs vs fp64: rel err %.3e\n", e);
    CHECK(e < 1e-6);
    free(x);
    free(ref);
}

static void test_llama3_table(void)
{
    /* Llama 3.1's parameters at head_dim 128, and a small original context. */
    struct { int hd; float theta, factor, lo, hi; int orig; } cases[] = {
        {128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192},
        {12, 10000.0f, 8.0f, 1.0f, 4.0f, 64},
        {64, 500000.0f, 32.0f, 1.0f, 4.0f, 8192},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int hd = cases[k].hd, half = hd / 2, kept = 0, divided = 0, medium = 0;
        float base[64], inv[64];
        frt_rope_inv_freq_default(base, hd, cases[k].theta);
        frt_rope_inv_freq_llama3(inv, hd, cases[k].theta, cases[k].factor, cases[k].lo, cases[k].hi, cases[k].orig);
        double worst = 0;
        for (int i = 0; i < half; i++) {
            double f = base[i], wl = 2.0 * M_PI / f, want;
            double low_wl = cases[k].orig / cases[k].lo, high_wl = cases[k].orig / cases[k].hi;
            if (wl < high_wl) {
                want = f;
                kept++;
                CHECK(inv[i] == base[i]);
            } else if (wl > low_wl) {
                want = f / cases[k].factor;
                divided++;
            } else {
                double s = (cases[k].orig / wl - cases[k].lo) / (cases[k].hi - cases[k].lo);
                want = (1 - s) * f / cases[k].factor + s * f;
                medium++;
                CHECK(inv[i] < base[i] && inv[i] > base[i] / cases[k].factor);
            }
            double r = fabs(inv[i] - want) / want;
            if (r > worst) worst = r;
        }
        printf("llama3 table hd %d: kept %d, medium %d, divided %d; max rel err vs fp64 %.3e\n", hd, kept, medium,
               divided, worst);
        CHECK(worst < 1e-6);
        CHECK(kept > 0 && divided > 0 && medium > 0);
    }
}

int main(void)
{
    frt_test_seed(3);
    test_default_same_bits();
    test_vs_fp64();
    test_llama3_table();
    return frt_test_report();
}
