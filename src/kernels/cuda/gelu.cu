/*
 * kernels/cuda/gelu.cu - a Linear's bias with its activation (none, tanh
 * GELU, SiLU) and GemmaMLP's GeGLU on f32 rows (kernels_policy_cuda.h).
 * Elementwise, one thread per output element in a grid-stride loop: the
 * bits do not depend on the launch shape. tanhf / expf are CUDA's accurate
 * functions (within 2 ulp of the twins' libm). Twins: frt_cpu_add_bias,
 * frt_cpu_gelu_tanh, frt_cpu_silu, frt_cpu_geglu_tanh.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

static __device__ __forceinline__ float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi), as the twin */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__global__ void bias_act_kernel(void *out, int out_dt, const float *x, const float *b, long long total, int cols,
                                int act)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        float v = x[i];
        if (b) v += b[i % cols];
        if (act == FRT_CUDA_ACT_GELU_TANH) v = gelu_tanh(v);
        else if (act == FRT_CUDA_ACT_SILU) v = v / (1.0f + expf(-v));
        frt_st(out, out_dt, (size_t)i, v);
    }
}

__global__ void geglu_kernel(void *out, int out_dt, const float *gu, long long total, int inter)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / inter;
        const int c = (int)(i % inter);
        const float *row = gu + r * 2 * inter;
        frt_st(out, out_dt, (size_t)i, gelu_tanh(row[c]) * row[inter + c]);
    }
}

extern "C" int frt_cuda_bias_act(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x, const float *b,
                                 int rows, int cols, frt_cuda_act act)
{
    FRT_ARG(out && x && frt_dtype_ok(out_dtype), "bias_act: NULL pointer or bad dtype");
    FRT_ARG(rows >= 1 && cols >= 1 && act >= FRT_CUDA_ACT_NONE && act <= FRT_CUDA_ACT_SILU,
            "bias_act: rows %d cols %d act %d", rows, cols, (int)act);
    FRT_ARG(out != (const void *)x || out_dtype == FRT_CUDA_F32, "bias_act: in place needs an f32 output");
    const long long total = (long long)rows * cols;
    bias_act_kernel<<<frt_grid_blocks((size_t)total, 256, 4096), 256, 0, (cudaStream_t)stream>>>(
        out, out_dtype, x, b, total, cols, act);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_geglu_tanh(void *stream, void *out, frt_cuda_dtype out_dtype, const float *gu, int rows,
                                   int inter)
{
    FRT_ARG(out && gu && frt_dtype_ok(out_dtype) && out != (const void *)gu, "geglu: NULL pointer, bad dtype or "
                                                                            "aliasing");
    FRT_ARG(rows >= 1 && inter >= 1, "geglu: rows %d inter %d", rows, inter);
    const long long total = (long long)rows * inter;
    geglu_kernel<<<frt_grid_blocks((size_t)total, 256, 4096), 256, 0, (cudaStream_t)stream>>>(out, out_dtype, gu,
                                                                                                total, inter);
    FRT_LAUNCH_CHECK();
    return 0;
}
