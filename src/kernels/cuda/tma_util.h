/*
 * kernels/cuda/tma_util.h - Hopper's tensor copy (TMA) and the mbarriers
 * that complete it, shared by the kernels that stage tiles with it
 * (flash_attention.cu's wgmma form). PTX ISA 8.x,
 * "Parallel Synchronization and Communication Instructions: mbarrier" and
 * "Data Movement: cp.async.bulk.tensor"; the host side is the driver's
 * cuTensorMapEncodeTiled (CUDA Driver API "Tensor Map Object Management"),
 * looked up through the runtime so that nothing links libcuda.
 *
 * The pattern: one thread arms a stage's "full" barrier with the bytes it
 * expects (frt_mbar_expect), issues the copies (frt_tma_2d), whose
 * completion counts those bytes; the consumers wait for the phase
 * (frt_mbar_wait) and release the stage on its "empty" barrier
 * (frt_mbar_arrive) before it is refilled. Internal; CUDA C++ only.
 */
#ifndef FRT_KERNELS_CUDA_TMA_UTIL_H
#define FRT_KERNELS_CUDA_TMA_UTIL_H

#include "kernels/cuda/cuda_util.h"

#include <cuda.h> /* CUtensorMap (the driver call itself is looked up at run time) */
#include <cudaTypedefs.h>
#include <stdint.h>

__device__ __forceinline__ void frt_mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* Makes the barriers initialised above visible to the async proxy (the
 * copies) and to the cluster; a __syncthreads after it covers the block. */
__device__ __forceinline__ void frt_mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void frt_mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* This thread's arrival, and `bytes` more expected from copies. */
__device__ __forceinline__ void frt_mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* Returns once the phase of parity `parity` has completed. */
__device__ __forceinline__ void frt_mbar_wait(uint32_t bar, int parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
/* A box of the 2-D tensor map (inner coordinate c0 in elements, row c1)
 * into shared memory at dst (1024-aligned for the 128-byte swizzle),
 * counted on the barrier bar; box elements outside the tensor read as
 * zeros (and count as bytes). */
__device__ __forceinline__ void frt_tma_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* The box of the 2-D tensor map at (c0, c1) from shared memory at src
 * (the layout frt_tma_2d stages), into global memory (rows and columns
 * outside the tensor are not written); a bulk async-group op: commit with
 * frt_bulk_commit, and before src is written again frt_bulk_wait_read. */
__device__ __forceinline__ void frt_tma_store_2d(const CUtensorMap *map, uint32_t src, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     (uint64_t)map),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void frt_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* Until all but the n most recent bulk groups of this thread have read their shared memory. */
template <int N> __device__ __forceinline__ void frt_bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* Until all but the n most recent bulk groups of this thread have completed (their writes done). */
template <int N> __device__ __forceinline__ void frt_bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
/* Brings a tensor map (a kernel parameter or global memory) into the
 * descriptor cache before its first copy. */
__device__ __forceinline__ void frt_tensormap_prefetch(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

/* A tensor map in global memory that was written before this kernel (by a
 * copy from the host: system scope): acquired for the tensor-copy proxy
 * before its first use, and prefetched. */
__device__ __forceinline__ void frt_tensormap_acquire(const CUtensorMap *map)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" ::"l"((uint64_t)map) : "memory");
    frt_tensormap_prefetch(map);
}

/* A 2-D bf16 tensor of `rows` rows of `cols` elements, row_bytes apart
 * (a multiple of 16; base 16-byte aligned), as a tensor map of boxes of
 * box_rows x box_cols (box_cols * 2 = 128 bytes for the 128-byte swizzle),
 * rows and columns outside the tensor reading as zeros. `what` names the
 * caller in errors. Errors: FRT_ERR_UNSUPPORTED (the driver has no
 * cuTensorMapEncodeTiled); FRT_ERR_BACKEND (the encode refused). */
static inline int frt_tensor_map_bf16(CUtensorMap *map, const void *base, long long rows, long long cols,
                                      long long row_bytes, int box_rows, int box_cols, const char *what)
{
    static PFN_cuTensorMapEncodeTiled_v12000 encode;
    if (!encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !fn)
            return frt_error(FRT_ERR_UNSUPPORTED, "%s: the driver has no cuTensorMapEncodeTiled", what);
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    const cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t stride[1] = {(cuuint64_t)row_bytes};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, estride[2] = {1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)(uintptr_t)base, dim, stride, box,
                              estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return frt_error(FRT_ERR_BACKEND, "%s: cuTensorMapEncodeTiled failed (%d)", what, (int)r);
    return 0;
}

#endif /* FRT_KERNELS_CUDA_TMA_UTIL_H */
