/*
 * exec/cuda/exec_kernels.cu - the batched copy kernel and the tiny axpb
 * kernel of the exec layer (see exec_kernels.h).
 *
 * Batched copy, two forms, chosen per launch on the host:
 *
 * 1. Even split (every entry's pointers 16-byte aligned): the entries' 16-byte
 *    words, laid end to end (word_end[i] = running word count through entry
 *    i), are cut into gridDim.x equal contiguous ranges, one per block; a
 *    block finds the entry of its first word by binary search over word_end
 *    and walks forward, copying each overlap with four 16-byte loads in
 *    flight per thread. The grid is one full wave (SMs x resident blocks, at
 *    most one block per 4 KiB of data), so no block waits for a second wave
 *    and the blocks differ by at most one word: a capsule restore of 121 MB
 *    (qwen3.5-9b at 2k) ends within ~1% of its slowest block. The bytes past
 *    an entry's last whole word (< 16 per entry) are copied by the block that
 *    owns that last word (or block 0 for an entry of fewer than 16 bytes).
 * 2. Tiles (some pointer unaligned): the entries are cut into 64 KiB tiles;
 *    tile_end[i] is the running tile count through entry i. Each block takes
 *    tiles in a grid-stride loop, finds the entry of its tile by binary
 *    search over tile_end, and copies the tile with 16-byte loads when both
 *    pointers are 16-byte aligned, bytes otherwise.
 *
 * The whole table travels as one by-value kernel parameter (< 4 KiB), which a
 * stream capture bakes into the graph's kernel node.
 *
 * Build: part of libfrt when nvcc is found (sm_90a for the H200).
 */
#include "exec/cuda/cuda_check.h"
#include "exec/cuda/exec_kernels.h"

#include <cuda_runtime.h>
#include <stdint.h>

#define COPY_TILE (64u * 1024u)
#define COPY_THREADS 512
#define COPY_MAX_BLOCKS 2048
#define COPY_MIN_BLOCK_BYTES 4096 /* even split: at least this much per block */

struct copy_entry {
    const char *src;
    char *dst;
    unsigned long long bytes;
};

struct copy_params {
    int n;
    unsigned int end[FRT_CUDA_COPY_BATCH_MAX]; /* running words (form 1) or tiles (form 2) */
    copy_entry e[FRT_CUDA_COPY_BATCH_MAX];
};

static_assert(sizeof(copy_params) <= 4096, "copy_params must fit the classic 4 KiB parameter space");

/* First entry i with end[i] > t (uniform across the block). */
__device__ __forceinline__ int copy_find(const copy_params &p, unsigned long long t)
{
    int lo = 0, hi = p.n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (p.end[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Copies words [a, b) of one entry's 16-byte words, four loads in flight. */
__device__ __forceinline__ void copy_words(const uint4 *s4, uint4 *d4, unsigned long long a,
                                           unsigned long long b)
{
    const unsigned long long B = blockDim.x;
    unsigned long long k = a + threadIdx.x;
    for (; k + 3 * B < b; k += 4 * B) {
        uint4 w0 = s4[k], w1 = s4[k + B], w2 = s4[k + 2 * B], w3 = s4[k + 3 * B];
        d4[k] = w0;
        d4[k + B] = w1;
        d4[k + 2 * B] = w2;
        d4[k + 3 * B] = w3;
    }
    for (; k < b; k += B) d4[k] = s4[k];
}

__global__ void __launch_bounds__(COPY_THREADS) copy_even_kernel(const copy_params p)
{
    const unsigned long long total = p.end[p.n - 1];
    const unsigned long long lo = total * blockIdx.x / gridDim.x, hi = total * (blockIdx.x + 1) / gridDim.x;
    if (blockIdx.x == 0) /* entries shorter than one word */
        for (int i = 0; i < p.n; i++)
            if (p.e[i].bytes < 16)
                for (unsigned int k = threadIdx.x; k < p.e[i].bytes; k += blockDim.x) p.e[i].dst[k] = p.e[i].src[k];
    if (lo >= hi) return;
    for (int i = copy_find(p, lo); i < p.n; i++) {
        const unsigned long long first = i ? p.end[i - 1] : 0, last = p.end[i];
        if (first >= hi) break;
        const unsigned long long a = (lo > first ? lo : first) - first, b = (hi < last ? hi : last) - first;
        copy_words((const uint4 *)p.e[i].src, (uint4 *)p.e[i].dst, a, b);
        const unsigned long long words = last - first, rest = p.e[i].bytes - words * 16;
        if (rest && words && hi >= last) /* this block owns the entry's last word: it copies the tail bytes */
            for (unsigned int k = threadIdx.x; k < rest; k += blockDim.x)
                p.e[i].dst[words * 16 + k] = p.e[i].src[words * 16 + k];
    }
}

__global__ void copy_tile_kernel(const copy_params p)
{
    const unsigned long long total = p.end[p.n - 1];
    for (unsigned long long t = blockIdx.x; t < total; t += gridDim.x) {
        const int lo = copy_find(p, t);
        const unsigned long long first = lo ? p.end[lo - 1] : 0;
        const unsigned long long off = (t - first) * COPY_TILE;
        const unsigned long long rest = p.e[lo].bytes - off;
        const size_t len = rest < COPY_TILE ? (size_t)rest : COPY_TILE;
        const char *s = p.e[lo].src + off;
        char *d = p.e[lo].dst + off;
        size_t done = 0;
        if ((((uintptr_t)s | (uintptr_t)d) & 15) == 0) {
            copy_words((const uint4 *)s, (uint4 *)d, 0, len / 16);
            done = len / 16 * 16;
        }
        for (size_t k = done + threadIdx.x; k < len; k += blockDim.x) d[k] = s[k];
    }
}

/* Blocks of one full wave of copy_even_kernel on the current device (queried
 * once per device; 0 when the query fails: the tile form is used). */
static unsigned int copy_wave_blocks(void)
{
    static int cached_dev = -1;
    static unsigned int cached = 0;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    if (dev == cached_dev) return cached;
    int sms = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_even_kernel, COPY_THREADS, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cached = (unsigned int)(sms * per_sm);
    cached_dev = dev;
    return cached;
}

extern "C" int frt_cuda_copy_batch(const frt_cuda_copy_desc *d, int n, void *stream)
{
    const unsigned int wave = copy_wave_blocks();
    for (int base = 0; base < n; base += FRT_CUDA_COPY_BATCH_MAX) {
        copy_params p;
        p.n = n - base < FRT_CUDA_COPY_BATCH_MAX ? n - base : FRT_CUDA_COPY_BATCH_MAX;
        int aligned = wave > 0;
        unsigned long long bytes = 0;
        for (int i = 0; i < p.n; i++) {
            const frt_cuda_copy_desc *c = &d[base + i];
            p.e[i].src = (const char *)c->src;
            p.e[i].dst = (char *)c->dst;
            p.e[i].bytes = c->bytes;
            bytes += c->bytes;
            if (((uintptr_t)c->src | (uintptr_t)c->dst) & 15) aligned = 0;
        }
        if (!bytes) continue;
        if (bytes / 16 > 0xFFFFFFFFull) aligned = 0; /* more words than end[] counts: tiles */
        unsigned long long units = 0;
        for (int i = 0; i < p.n; i++) {
            units += aligned ? p.e[i].bytes / 16 : (p.e[i].bytes + COPY_TILE - 1) / COPY_TILE;
            if (units > 0xFFFFFFFFull)
                return frt_cuda_fail(cudaErrorInvalidValue, "copy batch: more than 2^32 tiles", __FILE__, __LINE__);
            p.end[i] = (unsigned int)units;
        }
        if (aligned) {
            unsigned long long blocks = bytes / COPY_MIN_BLOCK_BYTES;
            if (blocks > wave) blocks = wave;
            if (blocks < 1) blocks = 1;
            copy_even_kernel<<<(unsigned int)blocks, COPY_THREADS, 0, (cudaStream_t)stream>>>(p);
        } else {
            unsigned int blocks = units < COPY_MAX_BLOCKS ? (unsigned int)units : COPY_MAX_BLOCKS;
            copy_tile_kernel<<<blocks, COPY_THREADS, 0, (cudaStream_t)stream>>>(p);
        }
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
