/*
 * l2norm.c - in-place L2 normalisation of rows, x * rsqrt(sum x^2 + eps).
 * Math: transformers 5.x modeling_qwen3_5.py, l2norm(). Tested in
 * tests/test_kernel_l2norm.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

void frt_cpu_l2norm(float *x, int rows, int dim, float eps)
{
#pragma omp parallel for schedule(static) if (rows > 1)
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * dim;
        float ss = (float)frt_sumsq_f64(xr, dim);
        float inv = 1.0f / sqrtf(ss + eps);
        for (int i = 0; i < dim; i++) xr[i] *= inv;
    }
}
