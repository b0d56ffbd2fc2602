/*
 * kernels/cpu/gemv_fp8.c - frt_cpu_matmul_fp8 and frt_cpu_matmul_fp8_b128
 * (gemv_fp8.h): the references of the E4M3-weight GEMVs (per-row and
 * 128 x 128 block scales), with the codec of kernels/cpu/fp8.h.
 */
#include "kernels/cpu/gemv_fp8.h"

#include "kernels/cpu/fp8.h"

void frt_cpu_matmul_fp8(float *y, const float *x, const uint8_t *w, const float *scale, int n, int in, int out,
                        int accumulate)
{
    for (int t = 0; t < n; t++)
        for (int r = 0; r < out; r++) {
            const float *xt = x + (size_t)t * in;
            const uint8_t *wr = w + (size_t)r * in;
            double s = 0;
            for (int k = 0; k < in; k++) s += (double)xt[k] * (double)frt_fp8_e4m3_decode(wr[k]);
            float v = (float)s * scale[r];
            float *yt = y + (size_t)t * out + r;
            *yt = accumulate ? v + *yt : v;
        }
}

void frt_cpu_matmul_fp8_b128(float *y, const float *x, const uint8_t *w, const float *scale, int n, int in, int out,
                             int accumulate)
{
    const int nb = (in + 127) / 128;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < out; r++) {
            const float *xt = x + (size_t)t * in, *sr = scale + (size_t)(r / 128) * nb;
            const uint8_t *wr = w + (size_t)r * in;
            double s = 0;
            for (int b = 0; b < nb; b++) {
                double p = 0;
                for (int k = 128 * b; k < in && k < 128 * b + 128; k++)
                    p += (double)xt[k] * (double)frt_fp8_e4m3_decode(wr[k]);
                s += p * (double)sr[b];
            }
            float *yt = y + (size_t)t * out + r;
            *yt = accumulate ? (float)s + *yt : (float)s;
        }
}
