/*
 * kernels/cuda/argmax.cu - greedy decoding: the index of the largest logit,
 * the lowest index on ties, NaN skipped (0 when all are NaN), as the CPU twin
 * frt_cpu_argmax. Two launches: blocks reduce grid-strided slices to
 * per-block winners in the workspace, then one block reduces those. The
 * order (value desc, index asc) is a strict total order, so the winner is the
 * same whatever the reduction order: deterministic, no atomics.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#define AM_THREADS 256
#define AM_MAX_BLOCKS 1024

static int am_blocks(int n)
{
    long long b = ((long long)n + 2047) / 2048;
    return (int)(b < 1 ? 1 : (b > AM_MAX_BLOCKS ? AM_MAX_BLOCKS : b));
}

__global__ __launch_bounds__(AM_THREADS) void argmax_partial_kernel(const float *logits, int n,
                                                                    float *pv, int *pi)
{
    float v = 0.0f;
    int i = -1;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += gridDim.x * blockDim.x) {
        const float x = logits[idx];
        if (!isnan(x) && frt_argmax_better(x, idx, v, i)) {
            v = x;
            i = idx;
        }
    }
    frt_block_argmax(v, i);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = v;
        pi[blockIdx.x] = i;
    }
}

__global__ __launch_bounds__(AM_THREADS) void argmax_final_kernel(const float *pv, const int *pi,
                                                                  int nb, int32_t *token)
{
    float v = 0.0f;
    int i = -1;
    for (int b = threadIdx.x; b < nb; b += blockDim.x)
        if (frt_argmax_better(pv[b], pi[b], v, i)) {
            v = pv[b];
            i = pi[b];
        }
    frt_block_argmax(v, i);
    if (threadIdx.x == 0) *token = i < 0 ? 0 : i;
}

extern "C" size_t frt_cuda_argmax_workspace_bytes(int n)
{
    if (n < 1) return 0;
    return (size_t)am_blocks(n) * (sizeof(float) + sizeof(int));
}

extern "C" int frt_cuda_argmax(void *stream, int32_t *d_token, const float *logits, int n,
                               void *workspace, size_t workspace_bytes)
{
    FRT_ARG(d_token && logits && workspace, "cuda argmax: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 30), "cuda argmax: n %d", n);
    const int nb = am_blocks(n);
    FRT_ARG(workspace_bytes >= frt_cuda_argmax_workspace_bytes(n),
            "cuda argmax: workspace of %zu bytes, %zu needed", workspace_bytes,
            frt_cuda_argmax_workspace_bytes(n));
    float *pv = (float *)workspace;
    int *pi = (int *)(pv + nb);
    cudaStream_t s = (cudaStream_t)stream;
    argmax_partial_kernel<<<nb, AM_THREADS, 0, s>>>(logits, n, pv, pi);
    FRT_LAUNCH_CHECK();
    argmax_final_kernel<<<1, AM_THREADS, 0, s>>>(pv, pi, nb, d_token);
    FRT_LAUNCH_CHECK();
    return 0;
}
