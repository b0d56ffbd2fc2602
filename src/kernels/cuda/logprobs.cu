/*
 * kernels/cuda/logprobs.cu - the logprobs a sampling step reports
 * (frt/sampling.h; twin frt_cpu_logprobs): the log-softmax of the logits the
 * step sampled from (the adjusted ones when a bias or penalty is on), the
 * sampled token's value and the top_logprobs largest in the order (logit
 * desc, id asc). One block of 1024 threads, launched after the sampler on
 * the same stream, returns at once when the step asks for no logprobs:
 *   - each thread walks a strided slice in index order: its maximum, its
 *     fp64 sum of exp(l - l_max) (after the block maximum), and its own top
 *     list (insertion, ties keep the lower index);
 *   - fixed-order reductions (warp butterflies, then the 32 warp values in
 *     order): deterministic, associated differently from the twin's running
 *     sum (a relative difference near 1e-16 in the log-sum-exp, invisible
 *     after the rounding to f32 but for rare last-bit differences);
 *   - top_logprobs rounds of a block argmax over the threads' list heads.
 * Tested in tests/test_cuda_sample_fields.c.
 */
#include "kernels/cpu/sample_rule.h"
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define LP_THREADS 1024
#define LP_K FRT_SAMPLING_MAX_TOP_LOGPROBS

__device__ __forceinline__ float lp_key(float l) { return isnan(l) ? -INFINITY : l; }

/* Block-wide max (every thread gets it). */
__device__ float lp_block_max(float v, float *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = sh[0];
    for (int k = 1; k < LP_THREADS / 32; k++) r = fmaxf(r, sh[k]);
    return r;
}

/* Block-wide fp64 sum in a fixed order (every thread gets it). */
__device__ double lp_block_sum(double v, double *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double r = 0.0;
    for (int k = 0; k < LP_THREADS / 32; k++) r += sh[k];
    return r;
}

/* Inserts (x, i) into the thread's list (desc, lower index first on ties;
 * indices arrive ascending) of at most k. */
__device__ __forceinline__ void lp_insert(float *tv, int *ti, int &len, int k, float x, int i)
{
    if (len == k && !(x > tv[len - 1])) return;
    int at = len < k ? len : k - 1;
    while (at > 0 && x > tv[at - 1]) {
        tv[at] = tv[at - 1];
        ti[at] = ti[at - 1];
        at--;
    }
    tv[at] = x;
    ti[at] = i;
    if (len < k) len++;
}

__global__ __launch_bounds__(LP_THREADS) void logprobs_kernel(frt_logprobs *out, const float *logits,
                                                              const float *adj, int n, const int32_t *d_token,
                                                              const frt_sampling *prm, const int32_t *mask_on)
{
    __shared__ float shf[LP_THREADS / 32];
    __shared__ double shd[LP_THREADS / 32];
    if (!prm->logprobs) return;
    const float *L = frt_sample_reads_adjusted(prm, mask_on ? *mask_on : 0) && adj ? adj : logits;
    const int tid = threadIdx.x;
    const int k = min(max(prm->top_logprobs, 0), LP_K);
    float tv[LP_K];
    int ti[LP_K];
    int len = 0;
    float v = -INFINITY;
    for (int i = tid; i < n; i += LP_THREADS) {
        const float x = lp_key(L[i]);
        v = fmaxf(v, x);
        if (k > 0) lp_insert(tv, ti, len, k, x, i);
    }
    const double lmax = (double)lp_block_max(v, shf);
    double s = 0.0;
    if (isfinite(lmax))
        for (int i = tid; i < n; i += LP_THREADS) s += exp((double)lp_key(L[i]) - lmax);
    const double sum = lp_block_sum(s, shd);
    const double lse = isfinite(lmax) ? lmax + log(sum) : (double)NAN;
    const int token = *d_token;
    if (tid == 0) {
        out->token = token;
        out->logprob = token >= 0 && token < n ? (float)((double)lp_key(L[token]) - lse) : NAN;
        out->n_top = min(k, n);
        out->reserved = 0;
    }
    int head = 0;
    for (int r = 0; r < min(k, n); r++) {
        float cv = head < len ? tv[head] : 0.0f;
        int ci = head < len ? ti[head] : -1;
        frt_block_argmax(cv, ci);
        if (head < len && ti[head] == ci) head++;
        if (tid == 0) {
            out->top_token[r] = ci;
            out->top_logprob[r] = (float)((double)cv - lse);
        }
    }
}

extern "C" int frt_cuda_logprobs(void *stream, frt_logprobs *d_out, const float *logits, const float *adj, int n,
                                 const int32_t *d_token, const frt_cuda_sampler_params *d_params,
                                 const int32_t *d_mask_on)
{
    FRT_ARG(d_out && logits && d_token && d_params, "cuda logprobs: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda logprobs: n %d (1..2^24)", n);
    logprobs_kernel<<<1, LP_THREADS, 0, (cudaStream_t)stream>>>(d_out, logits, adj, n, d_token, d_params,
                                                                d_mask_on);
    FRT_LAUNCH_CHECK();
    return 0;
}
