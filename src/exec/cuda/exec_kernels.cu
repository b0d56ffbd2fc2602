/*
 * exec/cuda/exec_kernels.cu - the batched copy kernel and the tiny axpb
 * kernel of the exec layer (see exec_kernels.h).
 *
 * Batched copy: the entries are cut into 64 KiB tiles; tile_end[i] is the
 * running tile count through entry i. Each block takes tiles in a grid-stride
 * loop, finds the entry of its tile by binary search over tile_end (uniform
 * across the block), and copies the tile with 16-byte loads (four in flight
 * per thread) when both pointers are 16-byte aligned, bytes otherwise. The
 * whole table travels as one by-value kernel parameter (< 4 KiB), which a
 * stream capture bakes into the graph's kernel node.
 *
 * Build: part of libfrt when nvcc is found (sm_90a for the H200).
 */
#include "exec/cuda/exec_kernels.h"
#include "kernels/cuda/cuda_check.h"

#include <cuda_runtime.h>
#include <stdint.h>

#define COPY_TILE (64u * 1024u)
#define COPY_THREADS 512
#define COPY_MAX_BLOCKS 2048

struct copy_entry {
    const char *src;
    char *dst;
    unsigned long long bytes;
};

struct copy_params {
    int n;
    unsigned int tile_end[FRT_CUDA_COPY_BATCH_MAX];
    copy_entry e[FRT_CUDA_COPY_BATCH_MAX];
};

static_assert(sizeof(copy_params) <= 4096, "copy_params must fit the classic 4 KiB parameter space");

__global__ void copy_batch_kernel(const copy_params p)
{
    const unsigned int total = p.tile_end[p.n - 1];
    for (unsigned int t = blockIdx.x; t < total; t += gridDim.x) {
        int lo = 0, hi = p.n - 1; /* first i with tile_end[i] > t */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (p.tile_end[mid] > t)
                hi = mid;
            else
                lo = mid + 1;
        }
        const unsigned int first = lo ? p.tile_end[lo - 1] : 0;
        const unsigned long long off = (unsigned long long)(t - first) * COPY_TILE;
        const unsigned long long rest = p.e[lo].bytes - off;
        const size_t len = rest < COPY_TILE ? (size_t)rest : COPY_TILE;
        const char *s = p.e[lo].src + off;
        char *d = p.e[lo].dst + off;
        size_t done = 0;
        if ((((uintptr_t)s | (uintptr_t)d) & 15) == 0) {
            const uint4 *s4 = (const uint4 *)s;
            uint4 *d4 = (uint4 *)d;
            const size_t n16 = len / 16, B = blockDim.x;
            size_t k = threadIdx.x;
            for (; k + 3 * B < n16; k += 4 * B) {
                uint4 a = s4[k], b = s4[k + B], c = s4[k + 2 * B], e = s4[k + 3 * B];
                d4[k] = a;
                d4[k + B] = b;
                d4[k + 2 * B] = c;
                d4[k + 3 * B] = e;
            }
            for (; k < n16; k += B) d4[k] = s4[k];
            done = n16 * 16;
        }
        for (size_t k = done + threadIdx.x; k < len; k += blockDim.x) d[k] = s[k];
    }
}

extern "C" int frt_cuda_copy_batch(const frt_cuda_copy_desc *d, int n, void *stream)
{
    for (int base = 0; base < n; base += FRT_CUDA_COPY_BATCH_MAX) {
        copy_params p;
        p.n = n - base < FRT_CUDA_COPY_BATCH_MAX ? n - base : FRT_CUDA_COPY_BATCH_MAX;
        unsigned long long tiles = 0;
        for (int i = 0; i < p.n; i++) {
            const frt_cuda_copy_desc *c = &d[base + i];
            tiles += (c->bytes + COPY_TILE - 1) / COPY_TILE; /* 0 for an empty entry */
            if (tiles > 0xFFFFFFFFull)
                return frt_cuda_fail(cudaErrorInvalidValue, "copy batch: more than 2^32 tiles",
                                     __FILE__, __LINE__);
            p.e[i].src = (const char *)c->src;
            p.e[i].dst = (char *)c->dst;
            p.e[i].bytes = c->bytes;
            p.tile_end[i] = (unsigned int)tiles;
        }
        if (!tiles) continue;
        unsigned int blocks = tiles < COPY_MAX_BLOCKS ? (unsigned int)tiles : COPY_MAX_BLOCKS;
        copy_batch_kernel<<<blocks, COPY_THREADS, 0, (cudaStream_t)stream>>>(p);
        FRT_CUDA_TRY(cudaGetLastError());
    }
    return 0;
}

__global__ void axpb_kernel(float *x, size_t n, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = a * x[i] + b;
}

extern "C" int frt_cuda_axpb(void *stream, float *x, size_t n, float a, float b)
{
    if (!n) return 0;
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    axpb_kernel<<<(unsigned int)blocks, 256, 0, (cudaStream_t)stream>>>(x, n, a, b);
    FRT_CUDA_TRY(cudaGetLastError());
    return 0;
}
