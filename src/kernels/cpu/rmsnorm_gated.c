/*
 * rmsnorm_gated.c - the Gated DeltaNet output norm: rmsnorm(x) * w * silu(z).
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5RMSNormGated (norm
 * before gate, plain weight). Tested in tests/test_kernel_rmsnorm.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

void frt_cpu_rmsnorm_gated(float *out, const float *x, const float *z, const float *w, int rows,
                           int dim, float eps)
{
#pragma omp parallel for schedule(static) if (rows > 1)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        const float *zr = z + (size_t)r * dim;
        float *yr = out + (size_t)r * dim;
        float var = (float)(frt_sumsq_f64(xr, dim) / dim);
        float inv = 1.0f / sqrtf(var + eps);
        /* element i reads x[i], z[i] before writing out[i]: safe in place */
        for (int i = 0; i < dim; i++) yr[i] = (w[i] * (xr[i] * inv)) * frt_silu_f32(zr[i]);
    }
}
