/*
 * kernels/cuda/gemv_fp8.cu - the decode GEMV over E4M3 weights with one
 * scale per output channel: y[n, out] (+)= (x[n, in] . decode(w[out, in])^T)
 * * scale[out], n <= FRT_CUDA_GEMV_MAX_N (gemv_fp8.h; docs/fp8.md "FP8
 * weights"). CPU twin: frt_cpu_matmul_fp8 (kernels/cpu/gemv_fp8.c). Tested
 * in tests/test_cuda_gemv_fp8.c (label gpu).
 *
 * The structure of gemv.cu's GEMV (read its header comment), with a weight
 * chunk of 16 codes instead of 8 bf16:
 *   - x [n, in] bf16 is staged in shared memory; warps form groups of kw
 *     warps, a group owns 8 consecutive output rows (the mma's N), its kw
 *     warps split the row's Kc = in / 16 chunks of 16 bytes into kw slices
 *     (multiples of FP8_SLICE chunks);
 *   - lane (g = lane / 4, q = lane % 4) streams row g; k-block j of a slice
 *     is its chunks 4 j .. 4 j + 3, lane q taking chunk 4 j + q, 8 k-blocks
 *     in flight per lane (16-byte ld.global.nc.L1::no_allocate loads);
 *   - chunk c holds elements 16 c .. 16 c + 15. They are widened to bf16
 *     (cvt e4m3x2 -> f16x2, f16 -> f32, f32 -> bf16: each step exact, every
 *     E4M3 value is a bf16 value) into 8 words W0..W7, word i = elements
 *     16 c + 2 i, 16 c + 2 i + 1; x's chunks 2 c, 2 c + 1 (the same
 *     elements) give X0..X7; four mma m16n8k16 (bf16, fp32 accumulators)
 *     take A = {X[2p], 0, X[2p+1], 0} (token g; rows g + 8 and tokens >= n
 *     zero) and B = W[2p], W[2p+1]: A's k and B's k pair the same elements,
 *     so each mma adds a dot product over 16 elements of the row;
 *   - the mmas of a slice accumulate in order; the kw slices' sums are
 *     added in ascending slice order through shared memory; the epilogue
 *     multiplies the row's sum by scale[row] (__fmul_rn) and stores (adding
 *     y first when accumulating).
 * An mma's A rows never mix, so token t's sums are the same bits whatever
 * the other tokens hold and whatever n is (batch invariance). The
 * configuration (warps per block, kw) is a function of (n's x size, in,
 * out) chosen as for n = 1, so the order of every sum depends on (in, out)
 * only. Weight bytes are half gemv.cu's for the same shape: at the same
 * 32 KiB in flight per block a block covers twice the elements.
 */
#include "kernels/cuda/gemv_fp8.h"

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/gemv_util.h"
#include "kernels/cuda/mma_util.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#define FP8_ROWS 8      /* output rows per warp group: the mma's N */
#define FP8_U 8         /* k-blocks (16-byte loads) in flight per lane */
#define FP8_SLICE 32    /* a warp's slice of a row: a multiple of this many chunks */
#define FP8_BIG_SMEM (96u << 10) /* x above this: blocks of 16 warps */
#define FP8_SMEM_MAX (227u << 10) /* H100 / H200 opt-in shared memory per block */
#define FP8_RED_SMEM(WARPS) ((size_t)(WARPS) * 32 * 2 * sizeof(float))

__device__ __forceinline__ uint4 fp8_ld_w(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* Two adjacent codes (low byte: the lower element) as bf16x2 bits, exact. */
__device__ __forceinline__ uint32_t fp8x2_to_bf16x2(uint32_t two)
{
    const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two, __NV_E4M3));
    const float2 f = __half22float2(h);
    return frt_pack_bf16(f.x, f.y);
}

/* The 16 codes of one chunk as 8 bf16x2 words, word i = elements 2 i, 2 i + 1. */
__device__ __forceinline__ void fp8_widen(uint32_t (&wb)[8], const uint4 v)
{
    const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        wb[2 * i] = fp8x2_to_bf16x2(w4[i] & 0xFFFFu);
        wb[2 * i + 1] = fp8x2_to_bf16x2(w4[i] >> 16);
    }
}

/* Loads k-blocks u < FP8_U of row wr: chunk c + 4 u (TAIL: zero past end). */
template <bool TAIL>
__device__ __forceinline__ void fp8_load(uint4 (&wv)[FP8_U], const uint4 *wr, int c, int end)
{
#pragma unroll
    for (int u = 0; u < FP8_U; u++)
        wv[u] = (!TAIL || c + 4 * u < end) ? fp8_ld_w(wr + c + 4 * u) : make_uint4(0, 0, 0, 0);
}

/* The mmas of one batch into acc: weight chunk c + 4 u of row g against
 * x's bf16 chunks 2 (c + 4 u) and 2 (c + 4 u) + 1 of token g (xs: [N, 2 kc]
 * chunks of 8 bf16). c0: the batch's first chunk of lane q = 0
 * (warp-uniform: every lane runs every mma). */
template <int N, bool TAIL>
__device__ __forceinline__ void fp8_mma(float (&acc)[4], const uint4 (&wv)[FP8_U], const uint4 *xs,
                                        int kc, int c, int c0, int end, int g)
{
#pragma unroll
    for (int u = 0; u < FP8_U; u++) {
        if (TAIL && c0 + 4 * u >= end) break; /* warp-uniform */
        const bool ok = g < N && (!TAIL || c + 4 * u < end);
        const size_t xi = (size_t)g * 2 * kc + 2 * (size_t)(c + 4 * u);
        const uint4 x0 = ok ? xs[xi] : make_uint4(0, 0, 0, 0), x1 = ok ? xs[xi + 1] : make_uint4(0, 0, 0, 0);
        const uint32_t xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        uint32_t wb[8];
        fp8_widen(wb, wv[u]);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const uint32_t a[4] = {xw[2 * p], 0u, xw[2 * p + 1], 0u};
            frt_mma_bf16(acc, a, wb[2 * p], wb[2 * p + 1]);
        }
    }
}

/* y[i] = fl(sum * s) (+ y[i]), in y's dtype. */
__device__ __forceinline__ void fp8_store(void *y, int y_bf16, int accumulate, size_t i, float v)
{
    if (accumulate) v += y_bf16 ? __bfloat162float(((const __nv_bfloat16 *)y)[i]) : ((const float *)y)[i];
    if (y_bf16)
        ((__nv_bfloat16 *)y)[i] = __float2bfloat16_rn(v);
    else
        ((float *)y)[i] = v;
}

/* One block: WARPS / kw groups of 8 rows (block blockIdx.x). Dynamic shared
 * memory: max(N * in * 2, FP8_RED_SMEM(WARPS)) bytes. kc = in / 16. */
template <int N, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, WARPS == 8 ? 2 : 1)
    gemv_fp8_kernel(void *__restrict__ y, int y_bf16, int accumulate, const uint4 *__restrict__ x,
                    const uint4 *__restrict__ w, const float *__restrict__ scale, int kc, int out_dim,
                    int kw)
{
    extern __shared__ uint4 fp8_smem[];
    uint4 *xs = fp8_smem; /* [N, 2 kc] chunks of 8 bf16 */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int groups = WARPS / kw, grp = warp / kw, kp = warp - grp * kw;
    const int per = ((kc + kw - 1) / kw + FP8_SLICE - 1) / FP8_SLICE * FP8_SLICE;
    const int kb = min(kc, kp * per), ke = min(kc, kb + per);
    const int nfull = (ke - kb) / (4 * FP8_U);
    const bool tail = (ke - kb) % (4 * FP8_U) != 0;
    const int row0 = (blockIdx.x * groups + grp) * FP8_ROWS;
    /* a row past out_dim reads row out_dim - 1 and is never stored */
    const uint4 *wr = w + (size_t)min(row0 + g, out_dim - 1) * kc;

    uint4 wv[FP8_U];
    if (nfull > 0)
        fp8_load<false>(wv, wr, kb + q, ke);
    else if (tail)
        fp8_load<true>(wv, wr, kb + q, ke);
    frt_pdl_trigger();
    frt_pdl_wait();
    for (int i = threadIdx.x; i < N * 2 * kc; i += WARPS * 32) xs[i] = __ldg(x + i);
    __syncthreads();

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int b = 0; b < nfull; b++) {
        const int c0 = kb + b * 4 * FP8_U;
        if (b > 0) fp8_load<false>(wv, wr, c0 + q, ke);
        fp8_mma<N, false>(acc, wv, xs, kc, c0 + q, c0, ke, g);
    }
    if (tail) {
        const int c0 = kb + nfull * 4 * FP8_U;
        if (nfull > 0) fp8_load<true>(wv, wr, c0 + q, ke);
        fp8_mma<N, true>(acc, wv, xs, kc, c0 + q, c0, ke, g);
    }
    if (kw > 1) { /* the kw slices' sums, in ascending slice order */
        float *red = (float *)fp8_smem;
        __syncthreads();
        red[(warp * 32 + lane) * 2] = acc[0];
        red[(warp * 32 + lane) * 2 + 1] = acc[1];
        __syncthreads();
        if (kp != 0) return;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float s = acc[i];
            for (int k = 1; k < kw; k++) s += red[((warp + k) * 32 + lane) * 2 + i];
            acc[i] = s;
        }
    }
    if (g >= N) return; /* accumulators 2, 3: the zero tokens g + 8 */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = row0 + 2 * q + i;
        if (row >= out_dim) continue;
        fp8_store(y, y_bf16, accumulate, (size_t)g * out_dim + row, __fmul_rn(acc[i], __ldg(scale + row)));
    }
}

typedef void (*gemv_fp8_fn)(void *, int, int, const uint4 *, const uint4 *, const float *, int, int, int);

template <int WARPS> static gemv_fp8_fn fp8_pick_n(int n)
{
    switch (n) {
    case 1: return gemv_fp8_kernel<1, WARPS>;
    case 2: return gemv_fp8_kernel<2, WARPS>;
    case 3: return gemv_fp8_kernel<3, WARPS>;
    case 4: return gemv_fp8_kernel<4, WARPS>;
    case 5: return gemv_fp8_kernel<5, WARPS>;
    case 6: return gemv_fp8_kernel<6, WARPS>;
    case 7: return gemv_fp8_kernel<7, WARPS>;
    case 8: return gemv_fp8_kernel<8, WARPS>;
    default: return NULL;
    }
}

/* kw: the split whose warps (as for n = 1) fill the last wave of 132 SMs x
 * 16 warps best, each warp keeping >= 32 chunks (512 codes) of a row; a
 * function of (in, out) only (gemv.cu's rule, in 16-code chunks). */
static int fp8_kw(int in_dim, int out_dim)
{
    const int kc = in_dim / 16, warps1 = (size_t)in_dim * 2 > FP8_BIG_SMEM ? 16 : 8;
    const long wave = 132 * 16, groups = (out_dim + FP8_ROWS - 1) / FP8_ROWS;
    double best = -1.0;
    int pick = 1;
    for (int kw = 1; kw <= warps1 && (kw == 1 || kc / kw >= 32); kw *= 2) {
        const long warps = groups * kw;
        const double fill = (double)warps / (double)(((warps + wave - 1) / wave) * wave);
        if (fill > best + 0.02) best = fill, pick = kw;
    }
    return pick;
}

static bool overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const char *pa = (const char *)a, *pb = (const char *)b;
    return pa < pb + nb && pb < pa + na;
}

static int fp8_check(void *y, frt_cuda_dtype y_dtype, const uint16_t *x, const uint8_t *w, const float *scale, int n,
                     int in_dim, int out_dim)
{
    FRT_ARG(y && x && w && scale, "cuda gemv_fp8: NULL pointer");
    FRT_ARG(frt_dtype_ok(y_dtype), "cuda gemv_fp8: bad dtype");
    FRT_ARG(n >= 1 && n <= FRT_CUDA_GEMV_MAX_N, "cuda gemv_fp8: n %d not in [1, %d]", n, FRT_CUDA_GEMV_MAX_N);
    FRT_ARG(in_dim > 0 && in_dim % 16 == 0, "cuda gemv_fp8: in %d must be a positive multiple of 16", in_dim);
    FRT_ARG(out_dim > 0, "cuda gemv_fp8: out %d", out_dim);
    FRT_ARG((((uintptr_t)x | (uintptr_t)w) & (GEMM_ALIGN - 1)) == 0, "cuda gemv_fp8: x and w must be %d-byte aligned",
            GEMM_ALIGN);
    FRT_ARG(((uintptr_t)scale & 3) == 0, "cuda gemv_fp8: scale must be 4-byte aligned");
    FRT_ARG(((uintptr_t)y & (frt_dtype_bytes(y_dtype) - 1)) == 0, "cuda gemv_fp8: y misaligned for its dtype");
    const size_t ny = (size_t)n * out_dim * frt_dtype_bytes(y_dtype);
    FRT_ARG(!overlaps(y, ny, x, (size_t)n * in_dim * 2) && !overlaps(y, ny, w, (size_t)out_dim * in_dim) &&
                !overlaps(y, ny, scale, (size_t)out_dim * 4),
            "cuda gemv_fp8: y overlaps an input");
    return 0;
}

extern "C" int frt_cuda_gemv_fp8(void *stream, void *y, frt_cuda_dtype y_dtype, int accumulate, const uint16_t *x,
                                 const uint8_t *w, const float *scale, int n, int in_dim, int out_dim)
{
    FRT_TRY(fp8_check(y, y_dtype, x, w, scale, n, in_dim, out_dim));
    const size_t xs = (size_t)n * in_dim * 2;
    const int warps = xs > FP8_BIG_SMEM ? 16 : 8, kw = fp8_kw(in_dim, out_dim);
    const size_t smem = xs > FP8_RED_SMEM(warps) ? xs : FP8_RED_SMEM(warps);
    FRT_ARG(smem <= FP8_SMEM_MAX, "cuda gemv_fp8: x needs %zu bytes of shared memory (n x in too large)", smem);
    const gemv_fp8_fn fn = warps == 8 ? fp8_pick_n<8>(n) : fp8_pick_n<16>(n);
    if (smem > (48u << 10)) {
        int dev = 0, optin = 0;
        FRT_CUDA_TRY(cudaGetDevice(&dev));
        FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        FRT_ARG(smem <= (size_t)optin, "cuda gemv_fp8: x needs %zu bytes of shared memory, the device has %d", smem,
                optin);
        FRT_CUDA_TRY(cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    }
    const int rows = warps / kw * FP8_ROWS;
    const unsigned blocks = (unsigned)((out_dim + rows - 1) / rows);
    FRT_CUDA_TRY(frt_pdl_launch(fn, blocks, warps * 32, smem, stream, y, (int)(y_dtype == FRT_CUDA_BF16), accumulate,
                             (const uint4 *)x, (const uint4 *)w, scale, in_dim / 16, out_dim, kw));
    return 0;
}

extern "C" int frt_cuda_gemv_fp8_max_n(int in_dim)
{
    int dev = 0, optin = 0;
    if (in_dim < 1 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        return 0;
    }
    const size_t limit = (size_t)optin < FP8_SMEM_MAX ? (size_t)optin : FP8_SMEM_MAX;
    const size_t n = limit / ((size_t)in_dim * 2);
    return n > FRT_CUDA_GEMV_MAX_N ? FRT_CUDA_GEMV_MAX_N : (int)n;
}
