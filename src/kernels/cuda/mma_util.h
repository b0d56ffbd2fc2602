/*
 * kernels/cuda/mma_util.h - the PTX wrappers the tensor-core kernels share
 * (flash_attention.cu: prefill; attention.cu: flash-decoding; the decode
 * GEMVs, gemv_block.h):
 * cp.async 16-byte copies into shared memory, ldmatrix, and the bf16
 * mma.sync m16n8k16 with fp32 accumulators (sm_80 and later; frt builds
 * sm_90a). PTX ISA: "Parallel Synchronization and Communication
 * Instructions: cp.async", "Warp Level Matrix Multiply-Accumulate
 * Instructions: ldmatrix, mma".
 */
#ifndef FRT_KERNELS_CUDA_MMA_UTIL_H
#define FRT_KERNELS_CUDA_MMA_UTIL_H

#include <cuda_bf16.h>
#include <stdint.h>

/* The shared-state-space address of a generic pointer into shared memory. */
__device__ __forceinline__ uint32_t frt_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared (cache global only); src_bytes 0 fills zeros
 * and reads nothing. */
__device__ __forceinline__ void frt_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/* frt_cp_async16 with a 256-byte L2 prefetch hint (the decode GEMV's
 * weight ring, gemv_block.h: a lane's next chunks of a row follow). */
__device__ __forceinline__ void frt_cp_async16_l2pf(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/* Closes this thread's group of cp.async copies issued since the last one. */
__device__ __forceinline__ void frt_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's groups are pending. */
template <int N> __device__ __forceinline__ void frt_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Four 8x8 b16 matrices from shared memory (lane l gives the address of row
 * l % 8 of matrix l / 8), into the A / B fragment registers of an mma. */
__device__ __forceinline__ void frt_ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* frt_ldsm_x4 with each matrix transposed. */
__device__ __forceinline__ void frt_ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* d += a (16x16 bf16, row) . b (16x8 bf16, col), fp32 accumulators. */
__device__ __forceinline__ void frt_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats as bf16x2 (RNE), lo in the low half (the lower column). */
__device__ __forceinline__ uint32_t frt_pack_bf16(float lo, float hi)
{
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}

/* The max and the sum of v over the 4 lanes of a quad (the lanes that hold
 * one accumulator row), in a fixed xor order: every lane of the quad gets
 * the same bits. */
__device__ __forceinline__ float frt_quad_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float frt_quad_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* The A fragment (16 x 16, row) of an mma from the fp32 accumulators of
 * two m16n8 tiles side by side (columns 0-7: lo, 8-15: hi), rounded to bf16:
 * FlashAttention's P as the A operand of P V. */
__device__ __forceinline__ void frt_acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4])
{
    a[0] = frt_pack_bf16(lo[0], lo[1]);
    a[1] = frt_pack_bf16(lo[2], lo[3]);
    a[2] = frt_pack_bf16(hi[0], hi[1]);
    a[3] = frt_pack_bf16(hi[2], hi[3]);
}

#endif
