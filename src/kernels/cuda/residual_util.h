/*
 * kernels/cuda/residual_util.h - the one expression of a policy's residual
 * add, x + (y + b) * g, shared by pi0_cuda_residual (arch/pi0/pi0_glue.cu)
 * and frt_cuda_add_norm (layernorm.cu) so that both write the same bits by
 * construction. The roundings are spelled out with intrinsics (no
 * contraction left to the compiler, which otherwise fuses or not depending
 * on the surrounding code): o = y + b rounded, then x + o * g as one fused
 * multiply-add, or x + o rounded without a gate. Device code, included by
 * .cu files only.
 */
#ifndef FRT_KERNELS_CUDA_RESIDUAL_UTIL_H
#define FRT_KERNELS_CUDA_RESIDUAL_UTIL_H

#include "kernels/cuda/cuda_util.h"

/* x + (y + b) * g, with b only when has_b and g only when has_g. */
__device__ __forceinline__ float frt_residual_add(float x, float y, bool has_b, float b, bool has_g, float g)
{
    const float o = has_b ? __fadd_rn(y, b) : y;
    return has_g ? __fmaf_rn(o, g, x) : __fadd_rn(x, o);
}

#endif
