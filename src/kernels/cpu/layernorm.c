/*
 * layernorm.c - LayerNorm with weight and bias over the last dimension.
 * Math: torch.nn.functional.layer_norm as transformers 5.x
 * modeling_siglip.py uses it (SiglipEncoderLayer layer_norm1/2,
 * post_layernorm): biased variance, eps inside the square root. Tested in
 * tests/test_kernel_policy_ops.c.
 */
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

void frt_cpu_layernorm(float *out, const float *x, const float *w, const float *b, int rows, int dim, float eps)
{
#pragma omp parallel for schedule(static) if (rows > 4)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        double s = 0, ss = 0;
        for (int i = 0; i < dim; i++) s += xr[i];
        double mean = s / dim;
        for (int i = 0; i < dim; i++) ss += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        float rstd = (float)(1.0 / sqrt(ss / dim + (double)eps));
        float mu = (float)mean;
        for (int i = 0; i < dim; i++) o[i] = (xr[i] - mu) * rstd * w[i] + b[i];
    }
}
