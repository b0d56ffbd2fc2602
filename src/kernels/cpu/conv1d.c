/*
 * conv1d.c - depthwise causal conv1d + SiLU with a carried state (the Gated
 * DeltaNet short convolution over q, k, v).
 * Math: transformers 5.x modeling_qwen3_5.py, causal_conv1d_update /
 * causal_conv1d_fn (torch fallbacks: F.conv1d cross-correlation over
 * [state, x], groups = channels, then SiLU). The kernel window sum runs
 * j = 0..kernel-1 in that order, so a block split into several calls gives
 * the same bits as one call. Tested in tests/test_kernel_conv1d.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

/* Channels per OpenMP work item: columns of x are read row by row. */
#define CONV_CBLOCK 64

void frt_cpu_conv1d_causal(float *out, const float *x, float *conv_state, const float *w,
                           int n_tok, int channels, int kernel)
{
    int ks = kernel - 1; /* state columns */
    int n_blocks = (channels + CONV_CBLOCK - 1) / CONV_CBLOCK;
#pragma omp parallel for schedule(static) if (n_blocks > 1 && n_tok > 1)
    for (int cb = 0; cb < n_blocks; cb++) {
        int c0 = cb * CONV_CBLOCK;
        int c1 = c0 + CONV_CBLOCK < channels ? c0 + CONV_CBLOCK : channels;
        for (int t = 0; t < n_tok; t++) {
            for (int c = c0; c < c1; c++) {
                const float *wc = w + (size_t)c * kernel;
                const float *st = conv_state + (size_t)c * ks;
                float acc = 0.0f;
                /* xpad[t + j] = state[t + j] while t + j < ks, else x[t + j - ks] */
                for (int j = 0; j < kernel; j++) {
                    int i = t + j;
                    float xv = i < ks ? st[i] : x[(size_t)(i - ks) * channels + c];
                    acc += wc[j] * xv;
                }
                out[(size_t)t * channels + c] = frt_silu_f32(acc);
            }
        }
        /* New state: xpad[n_tok + i], i < ks. Ascending i reads state index
         * n_tok + i > i before it is overwritten: safe in place. */
        for (int c = c0; c < c1; c++) {
            float *st = conv_state + (size_t)c * ks;
            for (int i = 0; i < ks; i++) {
                int src = n_tok + i;
                st[i] = src < ks ? st[src] : x[(size_t)(src - ks) * channels + c];
            }
        }
    }
}
