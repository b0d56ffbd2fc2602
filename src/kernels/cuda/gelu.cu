/*
 * kernels/cuda/gelu.cu - a Linear's bias with its activation (none, tanh
 * GELU, SiLU) and GemmaMLP's GeGLU on f32 rows (kernels_policy_cuda.h).
 * Elementwise in a grid-stride loop, one thread per group of 4 outputs of
 * a row (16-byte loads of x / the bias / the two halves, 16-byte f32 or
 * 8-byte bf16 stores, when cols (inter) % 4 == 0 and the pointers are
 * aligned; scalar loads of the same groups when not aligned; groups of 1
 * when cols % 4 != 0): the bits do not depend on the launch shape or path.
 * GeGLU reads f32 or bf16 halves (a bf16 gate | up product).
 * tanhf / expf are CUDA's accurate functions (within 2 ulp of the twins'
 * libm). Twins: frt_cpu_add_bias, frt_cpu_gelu_tanh, frt_cpu_silu,
 * frt_cpu_geglu_tanh; tested in tests/test_cuda_policy_kernels.c.
 */
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/norm_util.h"
#include "kernels/cuda/policy_util.h"

static __device__ __forceinline__ float act_of(float v, int act)
{
    if (act == FRT_CUDA_ACT_GELU_TANH) return frt_gelu_tanh(v);
    if (act == FRT_CUDA_ACT_SILU) return v / (1.0f + expf(-v));
    return v;
}

/* Group g: elements [G g, G g + G) of one row (G == 4 needs cols % 4 == 0). */
template <int G>
__global__ void bias_act_kernel(void *out, int out_dt, const float *x, const float *b, long long groups, int cols,
                                int act, bool vec)
{
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (long long)gridDim.x * blockDim.x) {
        const size_t i = (size_t)g * G;
        float v[G], bv[G];
        norm_ld<G>(x, FRT_CUDA_F32, i, vec, v);
        if (b) norm_ld<G>(b, FRT_CUDA_F32, i % cols, vec, bv);
#pragma unroll
        for (int e = 0; e < G; e++) v[e] = act_of(b ? v[e] + bv[e] : v[e], act);
        norm_st<G>(out, out_dt, i, vec, v);
    }
}

/* Group g: outputs [G g, G g + G) of one row (G == 4 needs inter % 4 == 0). */
template <int G>
__global__ void geglu_kernel(void *out, int out_dt, const void *gu, int gu_dt, long long groups, int inter, bool vec)
{
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (long long)gridDim.x * blockDim.x) {
        const size_t i = (size_t)g * G, r = i / inter, c = i % inter;
        const size_t row = r * 2 * inter;
        float a[G], u[G];
        norm_ld<G>(gu, gu_dt, row + c, vec, a);
        norm_ld<G>(gu, gu_dt, row + inter + c, vec, u);
#pragma unroll
        for (int e = 0; e < G; e++) a[e] = frt_gelu_tanh(a[e]) * u[e];
        norm_st<G>(out, out_dt, i, vec, a);
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
    const bool vec =
        norm_aligned(out, out_dtype) && norm_aligned(x, FRT_CUDA_F32) && (!b || norm_aligned(b, FRT_CUDA_F32));
    if (cols % 4 == 0)
        bias_act_kernel<4><<<frt_grid_blocks((size_t)total / 4, 256, 4096), 256, 0, (cudaStream_t)stream>>>(
            out, out_dtype, x, b, total / 4, cols, act, vec);
    else
        bias_act_kernel<1><<<frt_grid_blocks((size_t)total, 256, 4096), 256, 0, (cudaStream_t)stream>>>(
            out, out_dtype, x, b, total, cols, act, false);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_geglu_tanh(void *stream, void *out, frt_cuda_dtype out_dtype, const void *gu,
                                   frt_cuda_dtype gu_dtype, int rows, int inter)
{
    FRT_ARG(out && gu && frt_dtype_ok(out_dtype) && frt_dtype_ok(gu_dtype) && out != gu,
            "geglu: NULL pointer, bad dtype or aliasing");
    FRT_ARG(rows >= 1 && inter >= 1, "geglu: rows %d inter %d", rows, inter);
    const long long total = (long long)rows * inter;
    const bool vec = norm_aligned(out, out_dtype) && norm_aligned(gu, gu_dtype);
    if (inter % 4 == 0)
        geglu_kernel<4><<<frt_grid_blocks((size_t)total / 4, 256, 4096), 256, 0, (cudaStream_t)stream>>>(
            out, out_dtype, gu, gu_dtype, total / 4, inter, vec);
    else
        geglu_kernel<1><<<frt_grid_blocks((size_t)total, 256, 4096), 256, 0, (cudaStream_t)stream>>>(
            out, out_dtype, gu, gu_dtype, total, inter, false);
    FRT_LAUNCH_CHECK();
    return 0;
}
