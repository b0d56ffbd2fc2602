/*
 * kernels/cuda/cuda_util.h - small device helpers shared by the CUDA kernels
 * (internal; CUDA C++ only): dtype loads and stores, the dynamic count,
 * deterministic warp and block reductions, argument checks.
 *
 * Determinism: the reductions use a fixed butterfly (xor shuffles) inside a
 * warp and a fixed order over the warps of a block, so for a given block size
 * the same inputs give the same bits. Every lane of a butterfly ends with the
 * same value (each step adds the same two numbers, commutatively).
 */
#ifndef FRT_KERNELS_CUDA_UTIL_H
#define FRT_KERNELS_CUDA_UTIL_H

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels_cuda.h"

extern "C" {
#include "util/error.h"
}

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

/* After each launch: a launch error becomes FRT_ERR_BACKEND. */
#define FRT_LAUNCH_CHECK() FRT_CUDA_TRY(cudaGetLastError())

/* Argument check: returns FRT_ERR_INVALID_ARGUMENT with a message. */
#define FRT_ARG(cond, ...)                                                     \
    do {                                                                       \
        if (!(cond)) return frt_error(FRT_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
    } while (0)

static inline bool frt_dtype_ok(frt_cuda_dtype dt)
{
    return dt == FRT_CUDA_F32 || dt == FRT_CUDA_BF16;
}

static inline size_t frt_dtype_bytes(frt_cuda_dtype dt) { return dt == FRT_CUDA_BF16 ? 2 : 4; }

/* Threads per block of the row-wise norms (one block per row): fixed for a
 * given dim, so the reduction order and the bits are too. */
static inline int frt_norm_threads(int dim) { return dim <= 128 ? 64 : (dim < 1024 ? 128 : 256); }

/* Programmatic dependent launch (Hopper; PTX ISA "griddepcontrol"). A kernel
 * launched with the attribute frt_pdl_attr fills may start while the kernel
 * before it in the stream is still running, once every block of that kernel
 * has executed frt_pdl_trigger (or exited). frt_pdl_wait returns when the
 * kernels before have completed and their writes are visible: such a kernel
 * must call it before it reads anything they may have written, before it
 * writes anything, and before it exits (so its completion still implies
 * theirs). Both are no-ops in a launch without the attribute. */
__device__ __forceinline__ void frt_pdl_trigger()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void frt_pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/* Fills *at with programmatic stream serialization and returns 1 (the
 * number of attributes to add to a cudaLaunchConfig_t), or returns 0 when
 * the environment sets FRT_PDL=0 (read once per translation unit). */
static inline int frt_pdl_attr(cudaLaunchAttribute *at)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("FRT_PDL");
        on = !(e && e[0] == '0' && e[1] == 0);
    }
    at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at->val.programmaticStreamSerializationAllowed = 1;
    return on;
}

/* Launches fn<<<grid, block, smem, stream>>>(args...) with programmatic
 * dependent launch (frt_pdl_attr): fn may start as the kernel before it in
 * the stream triggers or exits, so fn calls frt_pdl_wait before it reads
 * what earlier kernels wrote (a plain launch under FRT_PDL=0). */
template <typename... K, typename... A>
static inline cudaError_t frt_pdl_launch(void (*fn)(K...), dim3 grid, dim3 block, size_t smem, void *stream,
                                         A &&...args)
{
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = at;
    cfg.numAttrs = frt_pdl_attr(&at[0]);
    return cudaLaunchKernelEx(&cfg, fn, static_cast<A &&>(args)...);
}

/* Blocks for a grid-stride loop over `total` items of `threads` each. */
static inline unsigned int frt_grid_blocks(size_t total, int threads, unsigned int cap)
{
    size_t b = (total + (size_t)threads - 1) / (size_t)threads;
    if (b < 1) b = 1;
    return b > cap ? cap : (unsigned int)b;
}

__device__ __forceinline__ float frt_ld(const void *p, int dt, size_t i)
{
    if (dt == FRT_CUDA_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ void frt_st(void *p, int dt, size_t i, float v)
{
    if (dt == FRT_CUDA_BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

/* The valid token count: *d_n clamped to [0, max_n], or max_n for NULL. */
__device__ __forceinline__ int frt_dyn_n(const int32_t *d_n, int max_n)
{
    if (!d_n) return max_n;
    int n = *d_n;
    return n < 0 ? 0 : (n > max_n ? max_n : n);
}

/* A position read from device memory, negative clamped to 0. */
__device__ __forceinline__ int frt_dyn_pos(const int32_t *d_pos)
{
    int p = *d_pos;
    return p < 0 ? 0 : p;
}

__device__ __forceinline__ float frt_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float frt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float frt_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

template <typename T> __device__ __forceinline__ T frt_warp_sum(T v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float frt_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The reduction op of frt_block_reduce: sum, or max (fmaxf: a NaN operand
 * is skipped). */
struct frt_op_sum {
    template <typename T> __device__ static T warp(T v) { return frt_warp_sum(v); }
};
struct frt_op_max {
    __device__ static float warp(float v) { return frt_warp_max(v); }
};

/* Op over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result; idle: the op's identity for the warps past the
 * block's (0 for the sum, and for the max of values >= 0). Starts and ends
 * with a barrier, so it may be called several times in a row. Must be
 * reached by all threads. */
template <class Op, typename T> __device__ T frt_block_reduce(T v, T idle)
{
    __shared__ T part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = Op::warp(v);
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    return Op::warp(lane < nw ? part[lane] : idle);
}

/* Sum over the block (frt_block_reduce). */
template <typename T> __device__ T frt_block_sum(T v) { return frt_block_reduce<frt_op_sum, T>(v, (T)0); }

/* Maximum over the block of values >= 0 (frt_block_reduce). */
__device__ __forceinline__ float frt_block_max(float v) { return frt_block_reduce<frt_op_max, float>(v, 0.0f); }

/* Argmax order: (v1, i1) beats (v2, i2) when it is valid (i >= 0) and the
 * other is not, or v1 > v2, or v1 == v2 and i1 < i2 (the lowest index on
 * ties; -0 == +0). Callers never enter NaN values (they skip them), so this is
 * a strict total order and the winner of any reduction order is the same. */
__device__ __forceinline__ bool frt_argmax_better(float v1, int i1, float v2, int i2)
{
    if (i1 < 0) return false;
    if (i2 < 0) return true;
    return v1 > v2 || (v1 == v2 && i1 < i2);
}

__device__ __forceinline__ void frt_warp_argmax(float &v, int &i)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (frt_argmax_better(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
}

/* Argmax over the block (blockDim.x a multiple of 32); every thread gets the
 * winner (i = -1 when no thread had a candidate). All threads must reach it. */
static __device__ void frt_block_argmax(float &v, int &i)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    frt_warp_argmax(v, i);
    __syncthreads();
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    v = lane < nw ? sv[lane] : 0.0f;
    i = lane < nw ? si[lane] : -1;
    frt_warp_argmax(v, i);
}

#endif /* FRT_KERNELS_CUDA_UTIL_H */
