/*
 * test_kernel_l2norm.c - frt_cpu_l2norm (in place, x * rsqrt(sum x^2 + eps),
 * HF l2norm) against fp64: Gated DeltaNet q/k shapes, dim 1, rows of tiny
 * values where eps dominates (so 1 / (norm + eps) would be caught), large
 * values; unit norm of the result for ordinary rows.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

static void run_case(int rows, int dim, float amp, int check_unit)
{
    size_t n = (size_t)rows * dim;
    float *x = xmalloc(n * 4);
    double *ref = xmalloc(n * sizeof(double));
    frt_test_fill(x, n, -amp, amp);
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
        for (int i = 0; i < dim; i++) ref[r * dim + i] = x[r * dim + i] / sqrt(ss + 1e-6);
    }
    frt_cpu_l2norm(x, rows, dim, 1e-6f);
    double e = rel_err_d(x, ref, n);
    CHECK_MSG(e <= 1e-6, "rows %d dim %d amp %g: rel err %.3e", rows, dim, (double)amp, e);
    if (check_unit) {
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            double ss = 0;
            for (int i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
            if (fabs(sqrt(ss) - 1) > worst) worst = fabs(sqrt(ss) - 1);
        }
        CHECK_MSG(worst < 1e-5, "norm off by %.3e", worst);
    }
    free(x);
    free(ref);
}

int main(void)
{
    frt_test_seed(61);
    run_case(16 * 3, 128, 1, 1); /* q or k of 3 tokens, 16 key heads */
    run_case(5, 1, 2, 0);
    run_case(9, 7, 1, 1);
    run_case(4, 16, 1e-4f, 0); /* sum x^2 ~ 5e-8 << eps */
    run_case(4, 64, 1e4f, 1);
    frt_cpu_l2norm(NULL, 0, 128, 1e-6f);
    CHECK(1);
    return frt_test_report();
}
