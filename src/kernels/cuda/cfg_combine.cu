/*
 * kernels/cuda/cfg_combine.cu - classifier-free guidance's combine
 * (kernels_policy_cuda.h: frt_cuda_cfg_combine): out = fmaf(beta, v_c - v_u,
 * v_u) in fp32, the difference rounded once and one rounding for the
 * multiply-add, as the twin frt_cpu_cfg_combine (so the bits are equal).
 * Four elements per thread with 16-byte loads and stores when the three
 * pointers are 16-byte aligned, scalar otherwise (the same bits).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

static __device__ __forceinline__ float cfg1(float beta, float c, float u)
{
    return __fmaf_rn(beta, __fsub_rn(c, u), u);
}

__global__ void cfg_combine_vec_kernel(float4 *out, const float4 *vc, const float4 *vu, float beta_arg,
                                       const float *d_beta, int n4)
{
    const float beta = d_beta ? *d_beta : beta_arg;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        const float4 c = vc[i], u = vu[i];
        out[i] = make_float4(cfg1(beta, c.x, u.x), cfg1(beta, c.y, u.y), cfg1(beta, c.z, u.z), cfg1(beta, c.w, u.w));
    }
}

__global__ void cfg_combine_kernel(float *out, const float *vc, const float *vu, float beta_arg,
                                   const float *d_beta, int from, int n)
{
    const float beta = d_beta ? *d_beta : beta_arg;
    for (int i = from + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = cfg1(beta, vc[i], vu[i]);
}

extern "C" int frt_cuda_cfg_combine(void *stream, float *out, const float *v_cond, const float *v_uncond, float beta,
                                    const float *d_beta, int n)
{
    FRT_ARG(out && v_cond && v_uncond && n >= 1, "cfg_combine: NULL pointer or n %d", n);
    cudaStream_t s = (cudaStream_t)stream;
    const bool vec = ((uintptr_t)out | (uintptr_t)v_cond | (uintptr_t)v_uncond) % 16 == 0;
    const int n4 = vec ? n / 4 : 0;
    if (n4) {
        cfg_combine_vec_kernel<<<frt_grid_blocks((size_t)n4, 256, 1024), 256, 0, s>>>(
            (float4 *)out, (const float4 *)v_cond, (const float4 *)v_uncond, beta, d_beta, n4);
        FRT_LAUNCH_CHECK();
    }
    if (4 * n4 < n) {
        cfg_combine_kernel<<<frt_grid_blocks((size_t)(n - 4 * n4), 256, 1024), 256, 0, s>>>(out, v_cond, v_uncond,
                                                                                          beta, d_beta, 4 * n4, n);
        FRT_LAUNCH_CHECK();
    }
    return 0;
}
