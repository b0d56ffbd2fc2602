/*
 * test_kernel_rmsnorm.c - frt_cpu_rmsnorm (plain and zero-centred) and
 * frt_cpu_rmsnorm_gated against fp64 references of the HF formulas
 * (Qwen3_5RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w); Qwen3_5RMSNormGated:
 * w * (x * rsqrt(mean(x^2) + eps)) * silu(z)): dims 1, 7, 256, 2048; rows of
 * tiny values where eps dominates; large values; in place == out of place.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

#define TOL 1e-6

/* gate == NULL: rmsnorm (zc selects 1 + w); else the gated form. */
static void ref_norm(double *out, const float *x, const float *z, const float *w, int rows,
                     int dim, double eps, int zc)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double ss = 0;
        for (int i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        double inv = 1.0 / sqrt(ss / dim + eps);
        for (int i = 0; i < dim; i++) {
            double y = xr[i] * inv;
            if (z) {
                double zv = z[(size_t)r * dim + i];
                y = w[i] * y * (zv / (1.0 + exp(-zv)));
            } else {
                y *= zc ? 1.0 + w[i] : (double)w[i];
            }
            out[(size_t)r * dim + i] = y;
        }
    }
}

/* amp: input amplitude (1e-4 makes mean(x^2) << eps = 1e-6). */
static void run_case(int rows, int dim, float amp)
{
    float eps = 1e-6f;
    size_t n = (size_t)rows * dim;
    float *x = xmalloc(n * 4), *z = xmalloc(n * 4), *w = xmalloc((size_t)dim * 4);
    float *y = xmalloc(n * 4), *y2 = xmalloc(n * 4);
    double *ref = xmalloc(n * sizeof(double));
    frt_test_fill(x, n, -amp, amp);
    frt_test_fill(z, n, -6, 6);
    for (int zc = 0; zc < 2; zc++) {
        /* zero-centred weights sit near 0, plain ones near 1 */
        frt_test_fill(w, (size_t)dim, zc ? -0.5f : 0.5f, zc ? 0.5f : 1.5f);
        ref_norm(ref, x, NULL, w, rows, dim, eps, zc);
        frt_cpu_rmsnorm(y, x, w, rows, dim, eps, zc);
        double e = rel_err_d(y, ref, n);
        CHECK_MSG(e <= TOL, "rmsnorm rows %d dim %d amp %g zc %d: rel err %.3e", rows, dim,
                  (double)amp, zc, e);
        memcpy(y2, x, n * 4);
        frt_cpu_rmsnorm(y2, y2, w, rows, dim, eps, zc);
        CHECK(memcmp(y, y2, n * 4) == 0);
    }
    frt_test_fill(w, (size_t)dim, 0.5f, 1.5f);
    ref_norm(ref, x, z, w, rows, dim, eps, 0);
    frt_cpu_rmsnorm_gated(y, x, z, w, rows, dim, eps);
    double e = rel_err_d(y, ref, n);
    CHECK_MSG(e <= TOL, "rmsnorm_gated rows %d dim %d amp %g: rel err %.3e", rows, dim,
              (double)amp, e);
    memcpy(y2, x, n * 4);
    frt_cpu_rmsnorm_gated(y2, y2, z, w, rows, dim, eps);
    CHECK(memcmp(y, y2, n * 4) == 0);
    memcpy(y2, z, n * 4);
    frt_cpu_rmsnorm_gated(y2, x, y2, w, rows, dim, eps);
    CHECK(memcmp(y, y2, n * 4) == 0);
    free(x);
    free(z);
    free(w);
    free(y);
    free(y2);
    free(ref);
}

int main(void)
{
    frt_test_seed(51);
    run_case(5, 1, 1);
    run_case(7, 7, 1);
    run_case(33, 256, 2);
    run_case(4, 2048, 1);
    run_case(6, 128, 1e-4f); /* eps dominates */
    run_case(3, 512, 3e4f);  /* large activations */
    frt_cpu_rmsnorm(NULL, NULL, NULL, 0, 16, 1e-6f, 1);
    frt_cpu_rmsnorm_gated(NULL, NULL, NULL, NULL, 0, 16, 1e-6f);
    CHECK(1);
    return frt_test_report();
}
