/*
 * test_kernel_gemm.c - frt_cpu_matmul / frt_cpu_matmul_add (y = x w^T, HF
 * Linear layout, OpenBLAS) against a naive fp64 matmul: decode (n_tok 1),
 * odd sizes, y pre-filled with NaN (matmul must overwrite, not accumulate),
 * the accumulate variant, repeated calls give the same bits.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

static void run_case(int m, int k, int n)
{
    size_t nx = (size_t)m * k, nw = (size_t)n * k, ny = (size_t)m * n;
    float *x = xmalloc(nx * 4), *w = xmalloc(nw * 4), *y = xmalloc(ny * 4), *y2 = xmalloc(ny * 4);
    float *y0 = xmalloc(ny * 4);
    double *ref = xmalloc(ny * sizeof(double));
    frt_test_fill(x, nx, -1, 1);
    frt_test_fill(w, nw, -1, 1);
    for (int i = 0; i < m; i++)
        for (int o = 0; o < n; o++) {
            double s = 0;
            for (int j = 0; j < k; j++) s += (double)x[(size_t)i * k + j] * w[(size_t)o * k + j];
            ref[(size_t)i * n + o] = s;
        }
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    frt_cpu_matmul(y, x, w, m, k, n);
    double e = rel_err_d(y, ref, ny);
    CHECK_MSG(e <= 2e-6, "matmul %dx%dx%d: rel err %.3e", m, k, n, e);
    frt_cpu_matmul(y2, x, w, m, k, n);
    CHECK(memcmp(y, y2, ny * 4) == 0);

    frt_test_fill(y0, ny, -5, 5);
    memcpy(y, y0, ny * 4);
    for (size_t i = 0; i < ny; i++) ref[i] += y0[i];
    frt_cpu_matmul_add(y, x, w, m, k, n);
    e = rel_err_d(y, ref, ny);
    CHECK_MSG(e <= 2e-6, "matmul_add %dx%dx%d: rel err %.3e", m, k, n, e);
    free(x);
    free(w);
    free(y);
    free(y2);
    free(y0);
    free(ref);
}

int main(void)
{
    frt_test_seed(81);
    /* n_tok, in_dim, out_dim */
    run_case(1, 300, 129);
    run_case(3, 257, 65);
    run_case(64, 128, 200);
    run_case(65, 1024, 33);
    run_case(2, 1, 7);
    /* in_dim 0: y = 0 for matmul, unchanged for matmul_add; n_tok 0: no-op */
    float y[6] = {1, 2, 3, 4, 5, 6}, x[1] = {1}, w[1] = {1};
    frt_cpu_matmul_add(y, x, w, 2, 0, 3);
    CHECK(y[0] == 1 && y[5] == 6);
    frt_cpu_matmul(y, x, w, 2, 0, 3);
    CHECK(y[0] == 0 && y[5] == 0);
    frt_cpu_matmul(NULL, NULL, NULL, 0, 4, 4);
    CHECK(1);
    return frt_test_report();
}
