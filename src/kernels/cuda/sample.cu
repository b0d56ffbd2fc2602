/*
 * kernels/cuda/sample.cu - temperature / top-k / top-p sampling on the
 * device, from a uniform u drawn from the SplitMix64 state in device memory
 * (kernels/cpu/rng.h, the very same code), with the parameters in device
 * memory. Semantics of the CPU twin frt_cpu_sample (HF order: temperature,
 * top-k, top-p on the renormalised top-k set):
 *   1. keys: NaN -> -inf, -0 -> +0, mapped to uint32 so that an ascending
 *      unsigned order is the (logit desc) order; values = indices;
 *   2. a stable CUB radix sort of (key, index): ties keep the index order,
 *      so the result is the twin's total order (logit desc, index asc);
 *   3. one block of 1024 threads: draws u (one RNG step, always), applies
 *      top-k (a prefix), p_i = exp((l_i - l_max) / T) in fp64, per-thread
 *      contiguous segments summed sequentially, an exclusive scan of the
 *      segment sums by one thread, then top-p (the first i whose cumulative
 *      sum reaches top_p * total) and the draw (the first i whose cumulative
 *      sum exceeds u * kept total), each found by the one thread whose
 *      segment holds the crossing. cum_i = excl[segment] + (sum of the
 *      segment up to i) is monotone and ends each segment at exactly the next
 *      excl value, so the crossing is always found where the scan says.
 * temperature 0 takes the argmax of the raw logits (NaN skipped), as the
 * twin. Deterministic: a radix sort and fixed-order sums, no atomics.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cpu/rng.h"
#include "kernels/cuda/cuda_util.h"

#include <cub/device/device_radix_sort.cuh>
#include <math.h>

#define SAMPLE_THREADS 1024
#define SAMPLE_ALIGN 256

static size_t align_up(size_t x) { return (x + SAMPLE_ALIGN - 1) / SAMPLE_ALIGN * SAMPLE_ALIGN; }

/* uint32 whose ascending order is the descending order of the sort key. */
__device__ __forceinline__ uint32_t sample_key(float f)
{
    if (isnan(f)) f = -INFINITY;
    if (f == 0.0f) f = 0.0f; /* -0 sorts as +0 (the twin compares them equal) */
    const uint32_t u = __float_as_uint(f);
    const uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending with f */
    return ~ord;
}

__device__ __forceinline__ float sample_key_value(uint32_t key)
{
    const uint32_t ord = ~key;
    return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7FFFFFFFu) : ~ord);
}

__global__ void sample_prep_kernel(const float *logits, int n, uint32_t *keys, int32_t *vals)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        keys[i] = sample_key(logits[i]);
        vals[i] = i;
    }
}

__global__ __launch_bounds__(SAMPLE_THREADS) void sample_select_kernel(
    int32_t *d_token, const float *logits, int n, const frt_cuda_sampler_params *prm,
    uint64_t *rng, const uint32_t *skeys, const int32_t *svals)
{
    __shared__ double ssum[SAMPLE_THREADS];
    __shared__ double excl[SAMPLE_THREADS + 1];
    __shared__ float s_u;
    __shared__ int s_keep, s_tok;
    __shared__ double s_ktot;
    const int tid = threadIdx.x;

    if (tid == 0) {
        uint64_t st = *rng;
        s_u = frt_rng_uniform(&st);
        *rng = st;
    }
    const float T = prm->temperature, top_p = prm->top_p;
    const int top_k = prm->top_k;
    if (!(T >= 0.0f) || isinf(T) || top_k < 0 || !(top_p > 0.0f && top_p <= 1.0f)) {
        if (tid == 0) *d_token = -1; /* every thread took this branch */
        return;
    }
    if (T == 0.0f) { /* greedy: frt_cpu_argmax */
        float v = 0.0f;
        int i = -1;
        for (int idx = tid; idx < n; idx += blockDim.x) {
            const float x = logits[idx];
            if (!isnan(x) && frt_argmax_better(x, idx, v, i)) {
                v = x;
                i = idx;
            }
        }
        frt_block_argmax(v, i);
        if (tid == 0) *d_token = i < 0 ? 0 : i;
        return;
    }

    const int m = (top_k > 0 && top_k < n) ? top_k : n;
    const double lmax = (double)sample_key_value(skeys[0]);
    if (isinf(lmax)) { /* +inf wins outright; all -inf / NaN: the first in the order */
        if (tid == 0) *d_token = svals[0];
        return;
    }
    const double inv_t = 1.0 / (double)T;
    const int seg = (m + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int a0 = min(tid * seg, m), a1 = min(a0 + seg, m);
#define PROB(i) exp(((double)sample_key_value(skeys[i]) - lmax) * inv_t)

    double part = 0.0;
    for (int i = a0; i < a1; i++) part += PROB(i);
    ssum[tid] = part;
    __syncthreads();
    if (tid == 0) {
        excl[0] = 0.0;
        for (int t = 0; t < SAMPLE_THREADS; t++) excl[t + 1] = excl[t] + ssum[t];
        s_keep = m;
        s_ktot = excl[SAMPLE_THREADS];
        s_tok = -2; /* set below */
    }
    __syncthreads();

    if (top_p < 1.0f) {
        const double want = (double)top_p * excl[SAMPLE_THREADS];
        if (a0 < a1 && excl[tid] < want && excl[tid + 1] >= want) {
            double p2 = 0.0;
            for (int i = a0; i < a1; i++) {
                p2 += PROB(i);
                const double cum = excl[tid] + p2;
                if (cum >= want) {
                    s_keep = i + 1;
                    s_ktot = cum;
                    break;
                }
            }
        }
        __syncthreads();
    }
    const int keep = s_keep;
    const double target = (double)s_u * s_ktot;
    if (tid == 0) s_tok = svals[keep - 1]; /* the twin's fallback (rounding) */
    __syncthreads();
    if (a0 < a1 && a0 < keep && excl[tid] <= target && excl[tid + 1] > target) {
        double p2 = 0.0;
        const int end = min(a1, keep);
        for (int i = a0; i < end; i++) {
            p2 += PROB(i);
            if (excl[tid] + p2 > target) {
                s_tok = svals[i];
                break;
            }
        }
    }
#undef PROB
    __syncthreads();
    if (tid == 0) *d_token = s_tok;
}

static cudaError_t sort_temp_bytes(int n, size_t *bytes)
{
    *bytes = 0;
    return cub::DeviceRadixSort::SortPairs((void *)NULL, *bytes, (const uint32_t *)NULL,
                                           (uint32_t *)NULL, (const int32_t *)NULL,
                                           (int32_t *)NULL, n, 0, 32);
}

extern "C" int frt_cuda_sample_workspace_bytes(int n, size_t *bytes)
{
    FRT_ARG(bytes, "cuda sample: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda sample: n %d (1..2^24)", n);
    size_t temp = 0;
    FRT_CUDA_TRY(sort_temp_bytes(n, &temp));
    *bytes = 4 * align_up((size_t)n * 4) + align_up(temp);
    return 0;
}

extern "C" int frt_cuda_sample(void *stream, int32_t *d_token, const float *logits, int n,
                               const frt_cuda_sampler_params *d_params, uint64_t *d_rng,
                               void *workspace, size_t workspace_bytes)
{
    FRT_ARG(d_token && logits && d_params && d_rng && workspace, "cuda sample: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda sample: n %d (1..2^24)", n);
    size_t temp = 0;
    FRT_CUDA_TRY(sort_temp_bytes(n, &temp));
    const size_t arr = align_up((size_t)n * 4);
    FRT_ARG(workspace_bytes >= 4 * arr + align_up(temp),
            "cuda sample: workspace of %zu bytes, %zu needed", workspace_bytes,
            4 * arr + align_up(temp));
    char *ws = (char *)workspace;
    uint32_t *keys_in = (uint32_t *)ws, *keys_out = (uint32_t *)(ws + arr);
    int32_t *vals_in = (int32_t *)(ws + 2 * arr), *vals_out = (int32_t *)(ws + 3 * arr);
    void *cub_temp = ws + 4 * arr;
    cudaStream_t s = (cudaStream_t)stream;

    sample_prep_kernel<<<frt_grid_blocks((size_t)n, 256, 1024), 256, 0, s>>>(logits, n, keys_in,
                                                                             vals_in);
    FRT_LAUNCH_CHECK();
    FRT_CUDA_TRY(cub::DeviceRadixSort::SortPairs(cub_temp, temp, keys_in, keys_out, vals_in,
                                                 vals_out, n, 0, 32, s));
    FRT_LAUNCH_CHECK();
    sample_select_kernel<<<1, SAMPLE_THREADS, 0, s>>>(d_token, logits, n, d_params, d_rng,
                                                      keys_out, vals_out);
    FRT_LAUNCH_CHECK();
    return 0;
}
