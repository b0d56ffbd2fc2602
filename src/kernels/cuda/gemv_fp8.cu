/*
 * kernels/cuda/gemv_fp8.cu - the decode GEMV over E4M3 weights with one
 * scale per output channel: y[n, out] (+)= (x[n, in] . decode(w[out, in])^T)
 * * scale[out], n <= FRT_CUDA_GEMV_MAX_N (gemv_fp8.h; docs/fp8.md "FP8
 * weights"), and its fused forms: q | k | v in one launch, gate | up |
 * SwiGLU in one, each with the RMSNorm prologue; the same four with one
 * scale per 128 x 128 block of w (the _b128 launchers, format
 * gemv_e4m3_b128: each 128-element block's partial sums are multiplied by
 * its scale and added to the row's sum, gemv_block.h's gemv_fold). CPU
 * twins: frt_cpu_matmul_fp8, frt_cpu_matmul_fp8_b128
 * (kernels/cpu/gemv_fp8.c). Tested in tests/test_cuda_gemv_fp8.c (label
 * gpu).
 *
 * gemv.cu's GEMV (read its header comment): the same block
 * (gemv_block.h's gemv_block, its multi-product table and RMSNorm
 * prologue) with the E4M3 format gemv_e4m3, a weight chunk of 16 codes
 * instead of 8 bf16:
 *   - x [n, in] bf16 is staged in shared memory; warps form groups of kw
 *     warps, a group owns 8 consecutive output rows (the mma's N), its kw
 *     warps split the row's Kc = in / 16 chunks of 16 bytes into kw slices
 *     (multiples of GEMV_SLICE chunks);
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
 * only, the same in the plain, multi and SwiGLU kernels (so the fused
 * forms give the bits of the separate launches). Weight bytes are half
 * gemv.cu's for the same shape: at the same 32 KiB in flight per block a
 * block covers twice the elements.
 *
 * Persistent launches (gemv_block.h's gemv_block_loop): the configuration's
 * blocks of work (on the 8B's gate | up, 1792 blocks of 64 KiB of codes)
 * are taken by as many blocks as the device holds at once (2 an SM), each
 * doing every grid-th one: x (and the RMSNorm prologue) is staged once per
 * block instead of once per block of work, and the next block of work's
 * first batch of weights is in flight while the cross-warp sums and the
 * stores of the one before run. Each block of work is summed exactly as
 * before (the same bits, whatever the grid: tested at grids of 1, 2 and 3
 * blocks). H100, llama3.1-8b `--dtype fp8` decode: 4.11 -> 3.84 ms at 2k,
 * 4.25 -> 3.99 at 8k (docs/PERF.md, twenty-second session). A launch whose
 * x leaves no room beside it for the cross-warp sums (n 8 at in 14336)
 * takes one block of work a block, the sums over x, as before.
 */
#include "kernels/cuda/gemv_fp8.h"

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/gemv_block.h"
#include "kernels/cuda/gemv_util.h"
#include "kernels/cuda/mma_util.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#define FP8_BIG_SMEM (96u << 10) /* x above this: blocks of 16 warps */
#define FP8_SMEM_MAX (227u << 10) /* H100 / H200 opt-in shared memory per block */

/* The 16 codes of one chunk as 8 bf16x2 words, word i = elements 2 i, 2 i + 1. */
__device__ __forceinline__ void fp8_widen(uint32_t (&wb)[8], const uint4 v)
{
    const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        wb[2 * i] = frt_fp8x2_to_bf16x2(w4[i] & 0xFFFFu);
        wb[2 * i + 1] = frt_fp8x2_to_bf16x2(w4[i] >> 16);
    }
}

/* The E4M3 format of gemv_block (gemv_block.h): a 16-byte weight chunk is
 * 16 codes, x's the same elements in two chunks of 8 bf16 (XC 2).
 * kblock: weight chunk c + 4 u of row g of matrix m (wv[m][u], widened to
 * bf16) against x's bf16 chunks 2 (c + 4 u) and 2 (c + 4 u) + 1 of token g (zero
 * when !ok), four mmas accumulating into acc[m] in order. value: sum *
 * s[row] (__fmul_rn). */
struct gemv_e4m3 {
    static constexpr int XC = 2;
    template <int NM, int U>
    static __device__ __forceinline__ void kblock(float (&acc)[NM][4], const uint4 (&wv)[NM][U], int u,
                                                  const uint4 (&xc)[XC])
    {
        const uint4 x0 = xc[0], x1 = xc[1];
        const uint32_t xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int m = 0; m < NM; m++) {
            uint32_t wb[8];
            fp8_widen(wb, wv[m][u]);
#pragma unroll
            for (int p = 0; p < 4; p++) {
                const uint32_t a[4] = {xw[2 * p], 0u, xw[2 * p + 1], 0u};
                frt_mma_bf16(acc[m], a, wb[2 * p], wb[2 * p + 1]);
            }
        }
    }
    static __device__ __forceinline__ float value(float acc, const float *s, int row)
    {
        return __fmul_rn(acc, __ldg(s + row));
    }
};

/* gemv_e4m3 with one scale per 128 x 128 block (the transformers `fp8`
 * checkpoints' weight_scale_inv): the same widening and mmas into the
 * partial sums of a 128-element block, which gemv_block's gemv_fold
 * multiplies by s[row / 128][block] (fmaf into the row's sum) when the
 * block's two k-blocks are done; value: the sum as it stands. */
struct gemv_e4m3_b128 {
    static constexpr int XC = 2;
    template <int NM, int U>
    static __device__ __forceinline__ void kblock(float (&acc)[NM][4], const uint4 (&wv)[NM][U], int u,
                                                  const uint4 (&xc)[XC])
    {
        gemv_e4m3::kblock<NM, U>(acc, wv, u, xc);
    }
    static __device__ __forceinline__ float value(float acc, const float *s, int row) { return acc; }
};

template <> struct gemv_blocked<gemv_e4m3_b128> {
    static constexpr bool value = true;
};

#define FP8_BOUNDS(WARPS) __launch_bounds__((WARPS) * 32, (WARPS) == 8 ? 2 : 1)

/* The kernels are persistent (gemv_block_loop): nvb is the launch's
 * blocks of work, gridDim.x <= nvb blocks (gemv_layout) each take every
 * gridDim.x-th one, with x staged once; red_on_x: the cross-warp sums over
 * x, one block of work a block (gridDim.x == nvb). The bits do not depend
 * on the grid. */

/* frt_cuda_gemv_fp8: nvb = ceil(out_dim / (WARPS / kw * 8)) blocks.
 * Every block returns at once when d_skip is set and *d_skip != 0
 * (frt_cuda_gemv_fp8_unless). */
template <int N, int WARPS, class F>
__global__ void FP8_BOUNDS(WARPS)
    gemv_fp8_kernel(void *__restrict__ y, int y_bf16, int accumulate, const uint4 *__restrict__ x,
                    const uint4 *__restrict__ w, const float *__restrict__ scale, int kc, int out_dim, int kw, int nvb,
                    int red_on_x, const int32_t *d_skip)
{
    if (d_skip) { /* written by an earlier kernel: wait first */
        frt_pdl_wait();
        if (*d_skip) return;
    }
    extern __shared__ uint4 fp8_smem[];
    const gemv_norm_args none = {};
    gemv_block_loop<F, N, WARPS, GEMV_EPI_STORE, false>(fp8_smem, x, kc, nvb, red_on_x, none, [&](int v) {
        return gemv_job{y, w, NULL, scale, NULL, y_bf16, accumulate, out_dim, kw, v};
    });
}

/* frt_cuda_gemv_fp8_multi(_norm): the entries' blocks end to end
 * (gemv_multi_table, gemv_block.h; entry.s the scales), nvb in all. */
template <int N, int WARPS, bool NORM, class F>
__global__ void FP8_BOUNDS(WARPS)
    gemv_fp8_multi_kernel(const gemv_multi_table tab, const uint4 *__restrict__ x, int kc, const gemv_norm_args nm,
                          int nvb, int red_on_x)
{
    extern __shared__ uint4 fp8_smem[];
    gemv_block_loop<F, N, WARPS, GEMV_EPI_STORE, NORM>(fp8_smem, x, kc, nvb, red_on_x, nm, [&](int v) {
        int blk = 0;
        const gemv_multi_entry m = gemv_multi_find(tab, v, &blk);
        return gemv_job{m.y, m.w, NULL, m.s, NULL, m.y_bf16, 0, m.out_dim, m.kw, blk};
    });
}

/* frt_cuda_gemv_fp8_swiglu(_norm): nvb = ceil(inter / (WARPS / kw * 8)) blocks. */
template <int N, int WARPS, bool NORM, class F>
__global__ void FP8_BOUNDS(WARPS)
    gemv_fp8_swiglu_kernel(void *__restrict__ y, int y_bf16, const uint4 *__restrict__ x,
                           const uint4 *__restrict__ wg, const float *__restrict__ sg, const uint4 *__restrict__ wu,
                           const float *__restrict__ su, int kc, int inter, int kw, const gemv_norm_args nm, int nvb,
                           int red_on_x)
{
    extern __shared__ uint4 fp8_smem[];
    gemv_block_loop<F, N, WARPS, GEMV_EPI_SWIGLU, NORM>(fp8_smem, x, kc, nvb, red_on_x, nm, [&](int v) {
        return gemv_job{y, wg, wu, sg, su, y_bf16, 0, inter, kw, v};
    });
}

typedef void (*gemv_fp8_fn)(void *, int, int, const uint4 *, const uint4 *, const float *, int, int, int, int, int,
                            const int32_t *);
typedef void (*fp8_multi_fn)(const gemv_multi_table, const uint4 *, int, const gemv_norm_args, int, int);
typedef void (*fp8_swiglu_fn)(void *, int, const uint4 *, const uint4 *, const float *, const uint4 *,
                              const float *, int, int, int, const gemv_norm_args, int, int);

/* The instance of kernel K for n = 1..8 (NULL otherwise). */
#define FP8_PICK_N(K, n, ...)                                                                          \
    do {                                                                                                \
        static const decltype(&K<1, __VA_ARGS__>) t_[8] = {                                             \
            K<1, __VA_ARGS__>, K<2, __VA_ARGS__>, K<3, __VA_ARGS__>, K<4, __VA_ARGS__>,                 \
            K<5, __VA_ARGS__>, K<6, __VA_ARGS__>, K<7, __VA_ARGS__>, K<8, __VA_ARGS__>};                \
        return (n) >= 1 && (n) <= 8 ? t_[(n) - 1] : NULL;                                               \
    } while (0)

template <int WARPS, class F> static gemv_fp8_fn fp8_pick_n(int n) { FP8_PICK_N(gemv_fp8_kernel, n, WARPS, F); }
template <int WARPS, bool NORM, class F> static fp8_multi_fn fp8_multi_pick_n(int n)
{
    FP8_PICK_N(gemv_fp8_multi_kernel, n, WARPS, NORM, F);
}
template <int WARPS, bool NORM, class F> static fp8_swiglu_fn fp8_swiglu_pick_n(int n)
{
    FP8_PICK_N(gemv_fp8_swiglu_kernel, n, WARPS, NORM, F);
}

/* The instance of PICK (fp8_multi_pick_n or fp8_swiglu_pick_n) for warps
 * 8 / 16, norm, the format (b128: gemv_e4m3_b128, else gemv_e4m3) and n. */
#define FP8_PICK_FMT(PICK, warps, norm, b128, n)                                                        \
    ((b128) ? ((norm) ? FP8_PICK_W(PICK, warps, true, gemv_e4m3_b128, n)                                 \
                      : FP8_PICK_W(PICK, warps, false, gemv_e4m3_b128, n))                               \
            : ((norm) ? FP8_PICK_W(PICK, warps, true, gemv_e4m3, n) : FP8_PICK_W(PICK, warps, false, gemv_e4m3, n)))
#define FP8_PICK_W(PICK, warps, NORM, F, n) ((warps) == 8 ? PICK<8, NORM, F>(n) : PICK<16, NORM, F>(n))

static gemv_fp8_fn fp8_plain_fn(int warps, int b128, int n)
{
    if (b128) return warps == 8 ? fp8_pick_n<8, gemv_e4m3_b128>(n) : fp8_pick_n<16, gemv_e4m3_b128>(n);
    return warps == 8 ? fp8_pick_n<8, gemv_e4m3>(n) : fp8_pick_n<16, gemv_e4m3>(n);
}

/* kw: the split whose warps (as for n = 1) fill the last wave of 132 SMs x
 * 16 warps best, each warp keeping >= 32 chunks (512 codes) of a row; a
 * function of (in, out) only (gemv.cu's rule, in 16-code chunks). */
static int fp8_kw(int in_dim, int out_dim)
{
    const int kc = in_dim / 16, warps1 = (size_t)in_dim * 2 > FP8_BIG_SMEM ? 16 : 8;
    const long wave = 132 * 16, groups = (out_dim + GEMV_ROWS - 1) / GEMV_ROWS;
    double best = -1.0;
    int pick = 1;
    for (int kw = 1; kw <= warps1 && (kw == 1 || kc / kw >= 32); kw *= 2) {
        const long warps = groups * kw;
        const double fill = (double)warps / (double)(((warps + wave - 1) / wave) * wave);
        if (fill > best + 0.02) best = fill, pick = kw;
    }
    return pick;
}

/* A launch's shape: warps per block (a function of n * in), kw (of in,
 * out), rows per block, blocks. */
struct fp8_cfg {
    int warps, kw, rows, blocks;
};

static fp8_cfg fp8_choose(int n, int in_dim, int out_dim)
{
    fp8_cfg c;
    c.warps = (size_t)n * in_dim * 2 > FP8_BIG_SMEM ? 16 : 8;
    c.kw = fp8_kw(in_dim, out_dim);
    c.rows = c.warps / c.kw * GEMV_ROWS;
    c.blocks = (out_dim + c.rows - 1) / c.rows;
    return c;
}

/* The launch of fn over nvb blocks of work (gemv_layout): persistent where
 * x [n, in] bf16, the norm's sums and the cross-warp sums of NM matrices
 * fit side by side, else one block of work a block, the sums over x. */
static int fp8_layout(const char *what, const void *fn, int n, int in_dim, int warps, int nm, int norm, long nvb,
                      gemv_launch *l)
{
    const size_t xs = (size_t)n * in_dim * 2, nsum = norm ? GEMV_NORM_SMEM(n) : 0;
    const size_t red = GEMV_RED_SMEM(warps, nm == 2 ? GEMV_EPI_SWIGLU : GEMV_EPI_STORE);
    return gemv_layout(what, fn, warps * 32, xs + nsum + red, (xs > red ? xs : red) + nsum, nvb, l);
}

static bool overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const char *pa = (const char *)a, *pb = (const char *)b;
    return pa < pb + nb && pb < pa + na;
}

/* Bytes of an E4M3 matrix's scales: [out] f32, or with b128 the block
 * table [ceil(out / 128), ceil(in / 128)] f32. */
static size_t fp8_scale_bytes(int b128, int in_dim, int out_dim)
{
    return b128 ? (size_t)((out_dim + 127) / 128) * (size_t)((in_dim + 127) / 128) * 4 : (size_t)out_dim * 4;
}

static int fp8_check(void *y, frt_cuda_dtype y_dtype, const uint16_t *x, const uint8_t *w, const float *scale, int n,
                     int in_dim, int out_dim, int b128)
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
                !overlaps(y, ny, scale, fp8_scale_bytes(b128, in_dim, out_dim)),
            "cuda gemv_fp8: y overlaps an input");
    return 0;
}

static int fp8_plain_launch(void *stream, void *y, frt_cuda_dtype y_dtype, int accumulate, const uint16_t *x,
                            const uint8_t *w, const float *scale, int n, int in_dim, int out_dim, int b128,
                            const int32_t *d_skip)
{
    FRT_TRY(fp8_check(y, y_dtype, x, w, scale, n, in_dim, out_dim, b128));
    const fp8_cfg c = fp8_choose(n, in_dim, out_dim);
    const gemv_fp8_fn fn = fp8_plain_fn(c.warps, b128, n);
    gemv_launch l;
    FRT_TRY(fp8_layout("fp8", (const void *)fn, n, in_dim, c.warps, 1, 0, c.blocks, &l));
    FRT_CUDA_TRY(frt_pdl_launch(fn, l.grid, c.warps * 32, l.smem, stream, y, (int)(y_dtype == FRT_CUDA_BF16),
                                accumulate, (const uint4 *)x, (const uint4 *)w, scale, in_dim / 16, out_dim, c.kw,
                                c.blocks, l.red_on_x, d_skip));
    return 0;
}

extern "C" int frt_cuda_gemv_fp8(void *stream, void *y, frt_cuda_dtype y_dtype, int accumulate, const uint16_t *x,
                                 const uint8_t *w, const float *scale, int n, int in_dim, int out_dim)
{
    return fp8_plain_launch(stream, y, y_dtype, accumulate, x, w, scale, n, in_dim, out_dim, 0, NULL);
}

extern "C" int frt_cuda_gemv_fp8_unless(void *stream, const int32_t *d_skip, void *y, frt_cuda_dtype y_dtype,
                                        const uint16_t *x, const uint8_t *w, const float *scale, int n, int in_dim,
                                        int out_dim)
{
    FRT_ARG(d_skip, "cuda gemv_fp8_unless: NULL d_skip");
    return fp8_plain_launch(stream, y, y_dtype, 0, x, w, scale, n, in_dim, out_dim, 0, d_skip);
}

extern "C" int frt_cuda_gemv_fp8_b128(void *stream, void *y, frt_cuda_dtype y_dtype, int accumulate,
                                      const uint16_t *x, const uint8_t *w, const float *scale, int n, int in_dim,
                                      int out_dim)
{
    return fp8_plain_launch(stream, y, y_dtype, accumulate, x, w, scale, n, in_dim, out_dim, 1, NULL);
}

/* The checks of the fused launchers beyond gemv_input_check: in_dim a
 * multiple of 16 (the E4M3 rows' 16-byte chunks). */
static int fp8_fused_input(const char *what, const uint16_t *x, const frt_cuda_gemv_norm *norm, int n, int in_dim,
                           gemv_norm_args *na)
{
    FRT_TRY(gemv_input_check(what, x, norm, n, in_dim, na));
    FRT_ARG(in_dim % 16 == 0, "cuda gemv %s: in %d must be a multiple of 16", what, in_dim);
    return 0;
}

/* An E4M3 matrix's per-row scales: non-NULL, 4-byte aligned, not y. */
static int fp8_scale_check(const char *what, int i, const float *scale, const void *y)
{
    FRT_ARG(scale && ((uintptr_t)scale & 3) == 0 && (const void *)scale != y,
            "cuda gemv %s: matrix %d: scale NULL, misaligned or equal to y", what, i);
    return 0;
}

/* frt_cuda_gemv_fp8_multi (norm NULL: x read) and _multi_norm (x NULL). */
static int fp8_multi_launch(const char *what, void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                            const uint16_t *x, const frt_cuda_gemv_norm *norm, int n, int in_dim, int b128)
{
    FRT_ARG(entries, "cuda gemv %s: NULL entries", what);
    FRT_ARG(n_entries >= 1 && n_entries <= FRT_CUDA_GEMV_MULTI_MAX, "cuda gemv %s: %d entries not in [1, %d]", what,
            n_entries, FRT_CUDA_GEMV_MULTI_MAX);
    gemv_norm_args na;
    FRT_TRY(fp8_fused_input(what, x, norm, n, in_dim, &na));
    gemv_multi_entry ent[FRT_CUDA_GEMV_MULTI_MAX];
    int warps = 8;
    for (int i = 0; i < n_entries; i++) {
        const frt_cuda_gemv_fp8_entry *e = &entries[i];
        FRT_TRY(gemv_entry_check(what, i, e->y, e->y_dtype, e->w, e->out_dim, x, norm));
        FRT_TRY(fp8_scale_check(what, i, e->scale, e->y));
        for (int j = 0; j < i; j++)
            FRT_ARG(entries[j].y != e->y, "cuda gemv %s: entries %d and %d share y", what, j, i);
        const fp8_cfg c = fp8_choose(n, in_dim, e->out_dim);
        ent[i].y = e->y;
        ent[i].w = (const uint4 *)e->w;
        ent[i].s = e->scale;
        ent[i].out_dim = e->out_dim;
        ent[i].y_bf16 = e->y_dtype == FRT_CUDA_BF16;
        ent[i].kw = c.kw;
        ent[i].rows = c.rows;
        warps = c.warps; /* a function of (n, in_dim): the same for every entry */
    }
    gemv_multi_table tab;
    long total = 0;
    FRT_TRY(gemv_multi_layout(what, ent, n_entries, &tab, &total));
    const fp8_multi_fn fn = FP8_PICK_FMT(fp8_multi_pick_n, warps, norm != NULL, b128, n);
    gemv_launch l;
    FRT_TRY(fp8_layout(what, (const void *)fn, n, in_dim, warps, 1, norm != NULL, total, &l));
    FRT_CUDA_TRY(frt_pdl_launch(fn, l.grid, warps * 32, l.smem, stream, tab, (const uint4 *)x, in_dim / 16, na,
                                (int)total, l.red_on_x));
    return 0;
}

extern "C" int frt_cuda_gemv_fp8_multi(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                                       const uint16_t *x, int n, int in_dim)
{
    return fp8_multi_launch("fp8_multi", stream, entries, n_entries, x, NULL, n, in_dim, 0);
}

extern "C" int frt_cuda_gemv_fp8_multi_norm(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                                            const frt_cuda_gemv_norm *norm, int n, int in_dim)
{
    return fp8_multi_launch("fp8_multi_norm", stream, entries, n_entries, NULL, norm, n, in_dim, 0);
}

extern "C" int frt_cuda_gemv_fp8_b128_multi(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                                            const uint16_t *x, int n, int in_dim)
{
    return fp8_multi_launch("fp8_b128_multi", stream, entries, n_entries, x, NULL, n, in_dim, 1);
}

extern "C" int frt_cuda_gemv_fp8_b128_multi_norm(void *stream, const frt_cuda_gemv_fp8_entry *entries,
                                                 int n_entries, const frt_cuda_gemv_norm *norm, int n, int in_dim)
{
    return fp8_multi_launch("fp8_b128_multi_norm", stream, entries, n_entries, NULL, norm, n, in_dim, 1);
}

/* frt_cuda_gemv_fp8_swiglu (norm NULL) and _swiglu_norm (x NULL). */
static int fp8_swiglu_launch(const char *what, void *stream, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                             const frt_cuda_gemv_norm *norm, const frt_cuda_gemv_fp8_mat *gate,
                             const frt_cuda_gemv_fp8_mat *up, int n, int in_dim, int inter, int b128)
{
    FRT_ARG(gate && up, "cuda gemv %s: NULL matrix", what);
    gemv_norm_args na;
    FRT_TRY(fp8_fused_input(what, x, norm, n, in_dim, &na));
    FRT_TRY(gemv_entry_check(what, 0, y, y_dtype, gate->w, inter, x, norm));
    FRT_TRY(gemv_entry_check(what, 1, y, y_dtype, up->w, inter, x, norm));
    FRT_TRY(fp8_scale_check(what, 0, gate->scale, y));
    FRT_TRY(fp8_scale_check(what, 1, up->scale, y));
    const fp8_cfg c = fp8_choose(n, in_dim, inter); /* the gate's configuration alone: the same sums */
    const fp8_swiglu_fn fn = FP8_PICK_FMT(fp8_swiglu_pick_n, c.warps, norm != NULL, b128, n);
    gemv_launch l;
    FRT_TRY(fp8_layout(what, (const void *)fn, n, in_dim, c.warps, 2, norm != NULL, c.blocks, &l));
    FRT_CUDA_TRY(frt_pdl_launch(fn, l.grid, c.warps * 32, l.smem, stream, y, (int)(y_dtype == FRT_CUDA_BF16),
                                (const uint4 *)x, (const uint4 *)gate->w, gate->scale, (const uint4 *)up->w,
                                up->scale, in_dim / 16, inter, c.kw, na, c.blocks, l.red_on_x));
    return 0;
}

extern "C" int frt_cuda_gemv_fp8_swiglu(void *stream, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                                        const frt_cuda_gemv_fp8_mat *gate, const frt_cuda_gemv_fp8_mat *up, int n,
                                        int in_dim, int inter)
{
    return fp8_swiglu_launch("fp8_swiglu", stream, y, y_dtype, x, NULL, gate, up, n, in_dim, inter, 0);
}

extern "C" int frt_cuda_gemv_fp8_swiglu_norm(void *stream, void *y, frt_cuda_dtype y_dtype,
                                             const frt_cuda_gemv_norm *norm, const frt_cuda_gemv_fp8_mat *gate,
                                             const frt_cuda_gemv_fp8_mat *up, int n, int in_dim, int inter)
{
    return fp8_swiglu_launch("fp8_swiglu_norm", stream, y, y_dtype, NULL, norm, gate, up, n, in_dim, inter, 0);
}

extern "C" int frt_cuda_gemv_fp8_b128_swiglu(void *stream, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                                             const frt_cuda_gemv_fp8_mat *gate, const frt_cuda_gemv_fp8_mat *up,
                                             int n, int in_dim, int inter)
{
    return fp8_swiglu_launch("fp8_b128_swiglu", stream, y, y_dtype, x, NULL, gate, up, n, in_dim, inter, 1);
}

extern "C" int frt_cuda_gemv_fp8_b128_swiglu_norm(void *stream, void *y, frt_cuda_dtype y_dtype,
                                                  const frt_cuda_gemv_norm *norm, const frt_cuda_gemv_fp8_mat *gate,
                                                  const frt_cuda_gemv_fp8_mat *up, int n, int in_dim, int inter)
{
    return fp8_swiglu_launch("fp8_b128_swiglu_norm", stream, y, y_dtype, NULL, norm, gate, up, n, in_dim, inter, 1);
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
