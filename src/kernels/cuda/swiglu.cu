/*
 * kernels/cuda/swiglu.cu - SwiGLU: out = silu(gate) * up.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5MLP, as the CPU twin
 * frt_cpu_swiglu (silu(x) = x / (1 + exp(-x))). Grid-stride over the first
 * n * per_tok elements, n read from device memory; f32 or bf16 in, bf16 out
 * (the prefill MLP) takes 4 (f32) or 8 (bf16) elements per thread with
 * vector loads.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"

__global__ void swiglu_kernel(void *out, int out_dt, const void *gate, const void *up, int in_dt,
                              const int32_t *d_n, int max_n, int per_tok)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        frt_st(out, out_dt, i, frt_silu(frt_ld(gate, in_dt, i)) * frt_ld(up, in_dt, i));
}

/* The prefill form, f32 gate and up to bf16: 4 elements per thread (16-byte
 * loads, an 8-byte store), the same per-element arithmetic. per_tok % 4 == 0
 * and 16-byte aligned inputs, 8-byte aligned out (checked by the launcher). */
__global__ void swiglu_f32_bf16_kernel(uint2 *out, const float4 *gate, const float4 *up,
                                       const int32_t *d_n, int max_n, int per_tok4)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok4;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const float4 g = gate[i], u = up[i];
        const __nv_bfloat162 lo = __floats2bfloat162_rn(frt_silu(g.x) * u.x, frt_silu(g.y) * u.y);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(frt_silu(g.z) * u.z, frt_silu(g.w) * u.w);
        uint2 o;
        o.x = *reinterpret_cast<const uint32_t *>(&lo);
        o.y = *reinterpret_cast<const uint32_t *>(&hi);
        out[i] = o;
    }
}

/* The prefill form from bf16 gate and up (the dense family's bf16 GEMM
 * outputs): 8 elements per thread (16-byte loads and store), each widened
 * exactly to f32, the same per-element arithmetic. per_tok % 8 == 0 and
 * 16-byte aligned buffers (checked by the launcher). */
__global__ void swiglu_bf16_bf16_kernel(uint4 *out, const uint4 *gate, const uint4 *up, const int32_t *d_n,
                                        int max_n, int per_tok8)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 g = gate[i], u = up[i];
        const uint32_t gw[4] = {g.x, g.y, g.z, g.w}, uw[4] = {u.x, u.y, u.z, u.w};
        uint32_t ow[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 gf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&gw[k]));
            const float2 uf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&uw[k]));
            const __nv_bfloat162 o = __floats2bfloat162_rn(frt_silu(gf.x) * uf.x, frt_silu(gf.y) * uf.y);
            ow[k] = *reinterpret_cast<const uint32_t *>(&o);
        }
        out[i] = make_uint4(ow[0], ow[1], ow[2], ow[3]);
    }
}

/* The FP8 prefill's form (frt_cuda_swiglu_fp8acc): gate and up are FP8
 * GEMM accumulators (f32, or bf16 with B16), scaled as that GEMM's
 * epilogue does, (acc * s_x[t]) * s_w[o] (two __fmul_rn), then the f32 ->
 * bf16 form's arithmetic; 4 elements per thread. */
template <bool B16>
__global__ void swiglu_fp8acc_kernel(uint2 *out, const void *gate, const void *up, const float *sx,
                                     const float4 *swg, const float4 *swu, const int32_t *d_n, int max_n,
                                     int per_tok4)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok4;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i % (size_t)per_tok4;
        out[i] = frt_fp8acc_swiglu4(frt_fp8acc_ld4<B16>(gate, i), frt_fp8acc_ld4<B16>(up, i),
                                    sx[i / (size_t)per_tok4], swg[c], swu[c]);
    }
}

extern "C" int frt_cuda_swiglu_fp8acc(void *stream, uint16_t *out, const void *gate, const void *up,
                                      frt_cuda_dtype acc_dtype, const float *x_scale, const float *gate_scale,
                                      const float *up_scale, const int32_t *d_n, int max_n, int per_tok)
{
    FRT_ARG(out && gate && up && x_scale && gate_scale && up_scale, "cuda swiglu_fp8acc: NULL pointer");
    FRT_ARG(acc_dtype == FRT_CUDA_F32 || acc_dtype == FRT_CUDA_BF16, "cuda swiglu_fp8acc: bad dtype");
    FRT_ARG(max_n >= 0 && per_tok > 0 && per_tok % 4 == 0, "cuda swiglu_fp8acc: max_n %d per_tok %d (a multiple of 4)",
            max_n, per_tok);
    FRT_ARG((((uintptr_t)gate | (uintptr_t)up) & (acc_dtype == FRT_CUDA_BF16 ? 7 : 15)) == 0 &&
                (((uintptr_t)gate_scale | (uintptr_t)up_scale) & 15) == 0 && ((uintptr_t)out & 7) == 0,
            "cuda swiglu_fp8acc: gate and up must be 16-byte aligned (8 for bf16), the scales 16, out 8");
    if (max_n == 0) return 0;
    const unsigned int blocks = frt_grid_blocks((size_t)max_n * (per_tok / 4), 256, 8192);
    if (acc_dtype == FRT_CUDA_BF16)
        swiglu_fp8acc_kernel<true><<<blocks, 256, 0, (cudaStream_t)stream>>>(
            (uint2 *)out, gate, up, x_scale, (const float4 *)gate_scale, (const float4 *)up_scale, d_n, max_n,
            per_tok / 4);
    else
        swiglu_fp8acc_kernel<false><<<blocks, 256, 0, (cudaStream_t)stream>>>(
            (uint2 *)out, gate, up, x_scale, (const float4 *)gate_scale, (const float4 *)up_scale, d_n, max_n,
            per_tok / 4);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_swiglu(void *stream, void *out, frt_cuda_dtype out_dtype,
                               const void *gate, const void *up, frt_cuda_dtype in_dtype,
                               const int32_t *d_n, int max_n, int per_tok)
{
    FRT_ARG(out && gate && up, "cuda swiglu: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(in_dtype), "cuda swiglu: bad dtype");
    FRT_ARG(max_n >= 0 && per_tok > 0, "cuda swiglu: max_n %d per_tok %d", max_n, per_tok);
    FRT_ARG((out != gate && out != up) || out_dtype == in_dtype,
            "cuda swiglu: in place needs equal dtypes");
    if (max_n == 0) return 0;
    if (in_dtype == FRT_CUDA_F32 && out_dtype == FRT_CUDA_BF16 && per_tok % 4 == 0 &&
        (((uintptr_t)gate | (uintptr_t)up) & 15) == 0 && ((uintptr_t)out & 7) == 0) {
        swiglu_f32_bf16_kernel<<<frt_grid_blocks((size_t)max_n * (per_tok / 4), 256, 8192), 256, 0,
                                 (cudaStream_t)stream>>>((uint2 *)out, (const float4 *)gate,
                                                         (const float4 *)up, d_n, max_n, per_tok / 4);
        FRT_LAUNCH_CHECK();
        return 0;
    }
    if (in_dtype == FRT_CUDA_BF16 && out_dtype == FRT_CUDA_BF16 && per_tok % 8 == 0 &&
        (((uintptr_t)gate | (uintptr_t)up | (uintptr_t)out) & 15) == 0) {
        swiglu_bf16_bf16_kernel<<<frt_grid_blocks((size_t)max_n * (per_tok / 8), 256, 8192), 256, 0,
                                  (cudaStream_t)stream>>>((uint4 *)out, (const uint4 *)gate, (const uint4 *)up,
                                                          d_n, max_n, per_tok / 8);
        FRT_LAUNCH_CHECK();
        return 0;
    }
    swiglu_kernel<<<frt_grid_blocks((size_t)max_n * per_tok, 256, 8192), 256, 0,
                    (cudaStream_t)stream>>>(out, out_dtype, gate, up, in_dtype, d_n, max_n,
                                            per_tok);
    FRT_LAUNCH_CHECK();
    return 0;
}
