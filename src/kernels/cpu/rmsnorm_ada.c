/*
 * rmsnorm_ada.c - adaptive RMSNorm (adaRMSNorm) of Pi0.5's action expert.
 * Math: openpi models_pytorch/transformers_replace/models/gemma/
 * modeling_gemma.py, GemmaRMSNorm.forward with cond: the mean of squares
 * in fp32, x * rsqrt(var + eps), then * (1 + scale) + shift, where scale and
 * shift (and the residual gate, applied by the caller) are the three
 * chunks of dense(cond). Tested in tests/test_kernel_policy_ops.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

void frt_cpu_rmsnorm_ada(float *out, const float *x, const float *scale, const float *shift, int rows, int dim,
                         float eps)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        float var = (float)(frt_sumsq_f64(xr, dim) / dim);
        float inv = 1.0f / sqrtf(var + eps);
        for (int i = 0; i < dim; i++) o[i] = (xr[i] * inv) * (1.0f + scale[i]) + shift[i];
    }
}
