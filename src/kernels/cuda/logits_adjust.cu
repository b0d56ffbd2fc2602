/*
 * kernels/cuda/logits_adjust.cu - steps 1-3 of the sampling step
 * (frt/sampling.h): logit bias, repetition penalty, frequency and presence
 * penalties, from the parameters and the state's counts in device memory.
 * The per-token arithmetic is kernels/cpu/sample_rule.h, the CPU twin's very
 * code with every f32 operation rounded on its own: bit-identical to
 * frt_cpu_logits_adjust. One launch: a block takes a contiguous slice,
 * writes the penalised logits, then (after a block barrier) rewrites the
 * biased tokens of its slice from the raw logit (bias first, then the
 * penalties), each through the allowed-token mask (step 3b: -inf where the
 * mask's bit is clear) when the step record's flag is on. With no bias, no
 * penalty and no mask the kernel returns after reading the parameters. Tested in tests/test_cuda_sample_fields.c.
 */
#include "kernels/cpu/sample_rule.h"
#include "kernels/cuda/cuda_util.h"

#define ADJ_THREADS 256
#define ADJ_PER_BLOCK 4096

__global__ __launch_bounds__(ADJ_THREADS) void logits_adjust_kernel(float *out, const float *logits, int n,
                                                                     const frt_sampling *prm,
                                                                     const int32_t *counts,
                                                                     const uint8_t *seen, const int32_t *mask_on,
                                                                     const uint32_t *mask)
{
    const int on = mask_on && *mask_on;
    const int adj = frt_sample_adjusts(prm);
    if (!adj && !on) return;
    const int lo = blockIdx.x * ADJ_PER_BLOCK, hi = min(lo + ADJ_PER_BLOCK, n);
    for (int i = lo + threadIdx.x; i < hi; i += ADJ_THREADS) {
        const float l = adj ? frt_sample_penalize(logits[i], counts[i], seen[i], prm) : logits[i];
        out[i] = on ? frt_sample_mask(l, mask, i) : l;
    }
    __syncthreads(); /* the block's writes land before the biased tokens are rewritten */
    const int nb = min(prm->n_logit_bias, FRT_SAMPLING_MAX_BIAS);
    for (int j = threadIdx.x; j < nb; j += ADJ_THREADS) {
        const int t = prm->logit_bias[j].token;
        if (t >= lo && t < hi) {
            const float l = frt_sample_bias_penalize(logits[t], prm->logit_bias[j].bias, counts[t], seen[t], prm);
            out[t] = on ? frt_sample_mask(l, mask, t) : l;
        }
    }
}

extern "C" int frt_cuda_logits_adjust(void *stream, float *out, const float *logits, int n,
                                      const frt_cuda_sampler_params *d_params, const int32_t *d_counts,
                                      const uint8_t *d_seen, const int32_t *d_mask_on, const uint32_t *d_mask)
{
    FRT_ARG(out && logits && d_params && d_counts && d_seen, "cuda logits adjust: NULL pointer");
    FRT_ARG(!d_mask_on || d_mask, "cuda logits adjust: a mask flag without a mask");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda logits adjust: n %d (1..2^24)", n);
    const unsigned int blocks = (unsigned int)((n + ADJ_PER_BLOCK - 1) / ADJ_PER_BLOCK);
    logits_adjust_kernel<<<blocks, ADJ_THREADS, 0, (cudaStream_t)stream>>>(out, logits, n, d_params, d_counts,
                                                                          d_seen, d_mask_on, d_mask);
    FRT_LAUNCH_CHECK();
    return 0;
}
