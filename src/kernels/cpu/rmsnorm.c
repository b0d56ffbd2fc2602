/*
 * rmsnorm.c - RMSNorm over the last dimension (plain and zero-centred).
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5RMSNorm. See
 * kernels_cpu.h for the contract; tested in tests/test_kernel_rmsnorm.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

void frt_cpu_rmsnorm(float *out, const float *x, const float *w, int rows, int dim, float eps,
                     int zero_centered)
{
#pragma omp parallel for schedule(static) if (rows > 1)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = out + (size_t)r * dim;
        float var = (float)(frt_sumsq_f64(xr, dim) / dim);
        float inv = 1.0f / sqrtf(var + eps);
        if (zero_centered) {
            for (int i = 0; i < dim; i++) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
        } else {
            for (int i = 0; i < dim; i++) yr[i] = (xr[i] * inv) * w[i];
        }
    }
}
