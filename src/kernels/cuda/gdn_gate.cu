/*
 * kernels/cuda/gdn_gate.cu - the Gated DeltaNet gates:
 *   g = -exp(A_log) * softplus(a + dt_bias),  beta = sigmoid(b)
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5GatedDeltaNet.forward,
 * as the CPU twin frt_cpu_gdn_gate (torch softplus, threshold 20). One thread
 * per (token, head); tokens t >= *d_n exit. The strided form reads a and b
 * in place from rows of a wider matrix (the prefill's fused in_proj output).
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

__global__ void gdn_gate_kernel(float *g, float *beta, const void *a, const void *b, int ab_dt,
                                int ab_stride, const float *A_log, const float *dt_bias,
                                const int32_t *d_n, int max_n, int n_heads)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * n_heads;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int h = (int)(i % n_heads);
        const size_t src = (i / n_heads) * (size_t)ab_stride + h;
        g[i] = -expf(A_log[h]) * frt_softplus(frt_ld(a, ab_dt, src) + dt_bias[h]);
        beta[i] = frt_sigmoid(frt_ld(b, ab_dt, src));
    }
}

extern "C" int frt_cuda_gdn_gate_strided(void *stream, float *g, float *beta, const void *a,
                                         const void *b, frt_cuda_dtype ab_dtype, int ab_stride,
                                         const float *A_log, const float *dt_bias,
                                         const int32_t *d_n, int max_n, int n_heads)
{
    FRT_ARG(g && beta && a && b && A_log && dt_bias, "cuda gdn_gate: NULL pointer");
    FRT_ARG(frt_dtype_ok(ab_dtype), "cuda gdn_gate: bad dtype");
    FRT_ARG(max_n >= 0 && n_heads > 0, "cuda gdn_gate: max_n %d n_heads %d", max_n, n_heads);
    FRT_ARG(ab_stride >= n_heads, "cuda gdn_gate: row stride %d < n_heads %d", ab_stride, n_heads);
    if (max_n == 0) return 0;
    gdn_gate_kernel<<<frt_grid_blocks((size_t)max_n * n_heads, 256, 4096), 256, 0,
                      (cudaStream_t)stream>>>(g, beta, a, b, ab_dtype, ab_stride, A_log, dt_bias,
                                              d_n, max_n, n_heads);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_gdn_gate(void *stream, float *g, float *beta, const void *a,
                                 const void *b, frt_cuda_dtype ab_dtype, const float *A_log,
                                 const float *dt_bias, const int32_t *d_n, int max_n, int n_heads)
{
    return frt_cuda_gdn_gate_strided(stream, g, beta, a, b, ab_dtype, n_heads, A_log, dt_bias, d_n,
                                     max_n, n_heads);
}
