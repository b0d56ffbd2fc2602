/*
 * kernels/cuda/wgmma_util.h - Hopper warpgroup matrix multiply-accumulate
 * (wgmma, sm_90a) for the attention kernels: shared-memory matrix
 * descriptors of 128-byte-swizzled tiles, the fences and the two bf16 forms
 * m64n128k16 that FlashAttention needs (S = Q K^T from shared memory, O +=
 * P V with P from registers). PTX ISA 8.x, "Asynchronous Warpgroup Level
 * Matrix Multiply-Accumulate Instructions: wgmma"; the canonical layouts of
 * the descriptors are those of CUTLASS's GmmaDescriptor comments.
 *
 * The tile layout (both operand kinds): a region of R rows of 128 bytes (64
 * bf16), based at a multiple of 1024 bytes; row r at r * 128, its 16-byte
 * chunk c stored at chunk position c ^ (r & 7) (the 128-byte swizzle). A
 * row of 128 bf16 (head_dim 128) is two regions: elements 0..63 in the
 * first, 64..127 in the second.
 *
 * The accumulator fragments of m64nN (f32): warp w of the warpgroup holds
 * rows 16 w + gid and 16 w + gid + 8 (lane = 4 gid + tig); d[4 j + e] is row
 * 16 w + gid + 8 (e >> 1), column 8 j + 2 tig + (e & 1): per warp, the
 * layout of N / 8 mma.sync m16n8 accumulators. The A fragments of the
 * register form are mma.sync m16n8k16's.
 */
#ifndef FRT_KERNELS_CUDA_WGMMA_UTIL_H
#define FRT_KERNELS_CUDA_WGMMA_UTIL_H

#include <stdint.h>

/* A descriptor of a 128-byte-swizzled operand at shared address addr
 * (state space .shared, 16-byte aligned; the region's base 1024-aligned):
 * lbo / sbo the leading / stride byte offsets (multiples of 16). K-major
 * (rows along M or N, k within a row): sbo = 1024 (8 rows), lbo unused;
 * the k-step's 16 elements at addr + 32 k bytes within the row. MN-major
 * (rows along k, M or N within a row): sbo = 1024 (8 rows of k), lbo = the
 * bytes from one 64-element block of M or N to the next. */
__device__ __forceinline__ uint64_t frt_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

/* Orders this thread's register and shared-memory accesses before the
 * wgmma that follow (needed before the first wgmma, and whenever an
 * accumulator or an A register was written by other instructions). */
__device__ __forceinline__ void frt_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

/* Closes the group of wgmma issued since the last commit. */
__device__ __forceinline__ void frt_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

/* Waits until at most N committed groups are pending: their accumulators
 * may then be read. */
template <int N> __device__ __forceinline__ void frt_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Makes this thread's ordinary (generic-proxy) writes to shared memory,
 * cp.async's included, visible to the async proxy that wgmma reads
 * through; a barrier after it covers the other threads' writes. */
__device__ __forceinline__ void frt_fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* Ties registers to this point of the program: a wgmma reads its A
 * registers and writes its accumulators after it issues, until the
 * wait_group that covers it, which the compiler does not know; holding
 * them right after the wait keeps the compiler from moving their other
 * uses above the wait, or their registers to other values before it
 * (CUTLASS's warpgroup_fence_operand). */
template <int N> __device__ __forceinline__ void frt_wgmma_hold(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N> __device__ __forceinline__ void frt_wgmma_hold(uint32_t (&r)[N][4])
{
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(r[i][j])::"memory");
}

/* The 64 f32 accumulators of an m64n128 wgmma as asm operands %0 .. %63
 * (the register list, and the in-out constraints on d[0 .. 63]). */
#define FRT_WGMMA_D64_LIST \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FRT_WGMMA_D8(d, i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
        "+f"(d[i + 7])
#define FRT_WGMMA_D64(d) \
    FRT_WGMMA_D8(d, 0), FRT_WGMMA_D8(d, 8), FRT_WGMMA_D8(d, 16), FRT_WGMMA_D8(d, 24), FRT_WGMMA_D8(d, 32), \
        FRT_WGMMA_D8(d, 40), FRT_WGMMA_D8(d, 48), FRT_WGMMA_D8(d, 56)

/* d (64 x 128 f32) = (scale_d ? d : 0) + A . B^T: A (64 x 16 bf16) and B
 * (128 x 16 bf16), both K-major, from shared memory through descriptors. */
__device__ __forceinline__ void frt_wgmma_m64n128k16_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 FRT_WGMMA_D64_LIST
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 :
                 FRT_WGMMA_D64(d)
                 : "l"(da), "l"(db), "r"(scale_d));
}

/* d (64 x 128 f32) += A . B: A (64 x 16 bf16) from registers (mma.sync
 * m16n8k16's A fragments, warp w rows 16 w ..), B (16 x 128 bf16) MN-major
 * from shared memory (rows of k, n along the row: a V tile of keys x
 * head_dim), imm-trans-b 1. */
__device__ __forceinline__ void frt_wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 FRT_WGMMA_D64_LIST
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 :
                 FRT_WGMMA_D64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

#endif
