/*
 * kernels/cuda/gemv.cu - frt's own decode GEMV: y[n, out] = x[n, in] .
 * w[out, in]^T (+ y) for n <= FRT_CUDA_GEMV_MAX_N, bf16 inputs, fp32
 * accumulation, f32 or bf16 output (the HF Linear layout, as the CPU twins
 * frt_cpu_matmul / frt_cpu_matmul_add).
 *
 * frt_cuda_gemm_run takes it for decode (gemm.cu: a plan of kernel
 * FRT_CUDA_GEMM_GEMV, configured by gemv_choose): cuBLASLt's n = 1 kernels
 * reach ~70% of the HBM rate on the model's shapes and add split-K reduce
 * launches, while y = W x only has to stream W once. frt_cuda_gemv_multi and
 * frt_cuda_gemv_swiglu run the same GEMV for several products of one x in
 * one launch (no plan; same bits); their _norm forms compute x =
 * bf16(rmsnorm(resid)) in each block instead of reading it (the RMSNorm of
 * rmsnorm.cu, same bits).
 * Tested in tests/test_cuda_kernels.c, tests/test_cuda_gemv.c,
 * tests/test_cuda_gemv_fused.c and tests/test_cuda_gemv_norm.c.
 */
#include "kernels/cuda/gemv_block.h"
#include "kernels/cuda/gemv_util.h"
#include "kernels/cuda/mma_util.h"

#include <string.h>

/* ---- GEMV: y[n, out] = x[n, in] . w[out, in]^T for n <= 8 ----------------
 *
 * On the tensor cores: one mma.sync m16n8k16 (bf16 in, fp32 accumulators)
 * multiplies the token rows of x (M: tokens 0..7, zero past n; rows 8..15
 * zero) by 8 weight rows (N). The rows of an mma's A never mix, so token
 * t's sums are the same bits whatever the other tokens hold and whatever n
 * is (batch invariance: a branch decoded in a batch gets the bits of its
 * decode alone), and the CUDA cores only issue loads: at n 8 the fp32 FMA
 * GEMV this replaces was compute-bound at ~60% of the HBM rate.
 *
 * A weight row of in_dim bf16 is Kc = in_dim / 8 chunks of 16 bytes. A block
 * of WARPS warps first issues its first weight loads, then copies x [n, in]
 * (bf16, as it lies in global memory) into shared memory, and syncs. The
 * warps form groups of kw warps; a group owns 8 consecutive output rows and
 * its kw warps split the chunks of those rows into kw slices (multiples of
 * GEMV_SLICE chunks). Lane (g = lane / 4, q = lane % 4) loads row g of the
 * 8; k-block j of a slice is its chunks 4 j .. 4 j + 3, lane q taking chunk
 * 4 j + q (16-byte loads; a batch of 8 k-blocks in flight per lane, 4 of
 * each matrix for the SwiGLU's two). Chunk 4 j + q holds the mma's k = 2q,
 * 2q + 1 (word 0) and 2q + 8, 2q + 9 (word 1) of one mma and the same of
 * words 2, 3 for a second: a permutation of k, the same for the weights
 * and x, so each mma is a dot product over 16 of the slice's elements.
 * x's fragment is chunk 4 j + q of token g. Each k-block's two mmas sum
 * into a zeroed fragment, added (fp32, in k-block order) into the slice's
 * accumulators; then, when kw > 1, the kw
 * slices' sums are added in ascending slice order through shared memory.
 * Every order depends on (in, out) only: the bits are the same run to run,
 * for every n, and for the plain, multi and SwiGLU launchers.
 *
 * In 8-warp blocks each warp streams its weights through a ring of
 * cp.async stages in shared memory (gemv_block.h "the weight ring": the
 * next stages in flight while a stage's mmas run, L2 only, a 256-byte L2
 * prefetch hint); 16-warp blocks read them with ld.global.nc.L1::no_allocate
 * into registers, 8 loads a lane a batch. Both take the chunks and sum
 * the k-blocks in the same order: the same bits.
 *
 * Launch configuration (gemv_choose, a function of n, in, out only):
 *   - 8 warps per block; 16 when x (n * in * 2 bytes) exceeds 96 KiB, where
 *     shared memory leaves one block per SM;
 *   - 8 output rows per warp group (the mma's N);
 *   - kw (warps per row group) doubles from 1 while the grid has fewer
 *     warps than 132 x 12 and each warp keeps >= 64 chunks of a row,
 *     computed as for n = 1 at every n, so a row's sum does not depend on n.
 */
#define GEMV_BIG_SMEM (96u << 10) /* x above this: blocks of 16 warps (one block per SM) */

/* The bf16 format of gemv_block (gemv_block.h): a 16-byte weight chunk is
 * 8 bf16, x's chunk the same 8 elements (XC 1).
 * kblock: A = x's chunk c + 4 u of token g (zero when !ok; rows g + 8 of
 * A are zero), B = that chunk of weight row g of matrix m (wv[m][u]); per
 * matrix two mmas into a zeroed fragment, added into acc[m]. value: the
 * sum itself (no scale). */
struct gemv_bf16 {
    static constexpr int XC = 1;
    template <int NM, int U>
    static __device__ __forceinline__ void kblock(float (&acc)[NM][4], const uint4 (&wv)[NM][U], int u,
                                                  const uint4 (&xc)[XC])
    {
        const uint4 xv = xc[0];
        const uint32_t a0[4] = {xv.x, 0u, xv.y, 0u}, a1[4] = {xv.z, 0u, xv.w, 0u};
#pragma unroll
        for (int m = 0; m < NM; m++) {
            /* the k-block's 32 products in the tensor core, then one IEEE
             * fp32 add into the running sum: the mma's own accumulation
             * keeps fewer bits, which over a 17408-long row reached 1.8e-4
             * relative error where the CUDA-core sum stays near 1e-6 */
            float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            frt_mma_bf16(t, a0, wv[m][u].x, wv[m][u].y);
            frt_mma_bf16(t, a1, wv[m][u].z, wv[m][u].w);
#pragma unroll
            for (int i = 0; i < 4; i++) acc[m][i] += t[i];
        }
    }
    static __device__ __forceinline__ float value(float acc, const float *, int) { return acc; }
};

template <> struct gemv_ring_on<gemv_bf16> {
    static constexpr bool value = true;
};

/* 2 blocks of 8 warps per SM (<= 128 registers), one of 16. */
#define GEMV_BOUNDS(N, WARPS) __launch_bounds__((WARPS) * 32, (WARPS) == 8 ? 2 : 1)

/* Grid: ceil(out_dim / (WARPS / kw * 16)) blocks of WARPS * 32 threads;
 * dynamic shared memory N * kc * 16 + GEMV_RED_SMEM(WARPS, EPI_STORE)
 * bytes. Every block returns at once when d_skip is set and *d_skip != 0
 * (frt_cuda_gemm_run_unless). */
template <int N, int WARPS>
__global__ void GEMV_BOUNDS(N, WARPS)
    gemv_kernel(void *__restrict__ y, int y_bf16, int accumulate, const uint4 *__restrict__ x,
                const uint4 *__restrict__ w, int kc, int out_dim, int kw, const int32_t *d_skip)
{
    if (d_skip) { /* written by an earlier kernel: wait first */
        frt_pdl_wait();
        if (*d_skip) return;
    }
    extern __shared__ uint4 gemv_smem[];
    const gemv_norm_args none = {};
    gemv_block<gemv_bf16, N, WARPS, GEMV_EPI_STORE, false>(gemv_smem, y, y_bf16, accumulate, x, w, NULL, NULL,
                                                           NULL, kc, out_dim, kw, blockIdx.x, none);
}

/* ---- fused decode GEMVs ---------------------------------------------------
 *
 * frt_cuda_gemv_multi: up to FRT_CUDA_GEMV_MULTI_MAX products of one x in one
 * launch. Each entry keeps the kw gemv_choose gives it alone (so its
 * bits equal frt_cuda_gemm_run's GEMV), all share the block size (a function
 * of n and in_dim only). The host lays the entries' grids end to end
 * (begin[e] = sum of the block counts before e, the entries ordered by weight
 * bytes per block, largest first: the long blocks start first and the short
 * ones fill the tail) and passes the table by value; a block finds its entry
 * by comparing blockIdx.x with begin[] (block-uniform, no divergence).
 *
 * frt_cuda_gemv_swiglu: a warp group owns output rows i .. i + 15 and
 * streams those rows of Wg and of Wu (x read once from shared memory for
 * both), with the kw of gemv_choose(n, in_dim, inter): gate and up are
 * summed exactly as frt_cuda_gemm_run sums them, then silu(g) * u (frt_silu,
 * the expression of frt_cuda_swiglu) is rounded once to y's dtype.
 */
/* Grid: the sum of the entries' blocks, WARPS * 32 threads; dynamic shared
 * memory N * kc * 16 (+ GEMV_NORM_SMEM(N) when NORM) + GEMV_RED_SMEM(WARPS,
 * EPI_STORE) bytes. NORM: x is rmsnorm(nm.x) (x unused). */
template <int N, int WARPS, bool NORM>
__global__ void GEMV_BOUNDS(N, WARPS)
    gemv_multi_kernel(const gemv_multi_table tab, const uint4 *__restrict__ x, int kc,
                      const gemv_norm_args nm)
{
    extern __shared__ uint4 gemv_smem[];
    int blk = 0;
    const gemv_multi_entry m = gemv_multi_find(tab, (int)blockIdx.x, &blk);
    gemv_block<gemv_bf16, N, WARPS, GEMV_EPI_STORE, NORM>(gemv_smem, m.y, m.y_bf16, 0, x, m.w, NULL, NULL, NULL,
                                                          kc, m.out_dim, m.kw, blk, nm);
}

/* Grid: ceil(inter / (WARPS / kw * 16)) blocks of WARPS * 32 threads;
 * dynamic shared memory N * kc * 16 (+ GEMV_NORM_SMEM(N) when NORM) +
 * GEMV_RED_SMEM(WARPS, EPI_SWIGLU) bytes. NORM: x is rmsnorm(nm.x) (x
 * unused). */
template <int N, int WARPS, bool NORM>
__global__ void GEMV_BOUNDS(N, WARPS)
    gemv_swiglu_kernel(void *__restrict__ y, int y_bf16, const uint4 *__restrict__ x,
                       const uint4 *__restrict__ wg, const uint4 *__restrict__ wu, int kc,
                       int inter, int kw, const gemv_norm_args nm)
{
    extern __shared__ uint4 gemv_smem[];
    gemv_block<gemv_bf16, N, WARPS, GEMV_EPI_SWIGLU, NORM>(gemv_smem, y, y_bf16, 0, x, wg, wu, NULL, NULL, kc,
                                                           inter, kw, blockIdx.x, nm);
}

template <int WARPS> static gemv_fn gemv_pick_n(int n)
{
    switch (n) {
    case 1: return gemv_kernel<1, WARPS>;
    case 2: return gemv_kernel<2, WARPS>;
    case 3: return gemv_kernel<3, WARPS>;
    case 4: return gemv_kernel<4, WARPS>;
    case 5: return gemv_kernel<5, WARPS>;
    case 6: return gemv_kernel<6, WARPS>;
    case 7: return gemv_kernel<7, WARPS>;
    case 8: return gemv_kernel<8, WARPS>;
    default: return NULL;
    }
}

/* The launch configuration of a shape: a function of (n, in, out) only, so
 * the arithmetic order (and the fingerprint) is too. */
void gemv_choose(int n, int in_dim, int out_dim, gemv_cfg *c)
{
    const int kc = in_dim / 8;
    const size_t xs = (size_t)n * in_dim * 2;
    c->warps = xs > GEMV_BIG_SMEM ? 16 : 8;
    c->nr = GEMV_ROWS;
    /* kw (warps per row group): the split, from 1 up to the warps of a
     * block, whose warps at n = 1 fill their last wave best (132 SMs x 16
     * warps: 2 blocks of 8 or 1 of 16 per SM; a larger kw must fill it by 2
     * points more), each warp keeping >= 64 chunks of a row. Under one
     * wave that is the largest split; above, wave quantization is what
     * costs: 5120 -> 17408 at kw 1 is 272 blocks, 2.06 waves (kw 8: 2176
     * blocks, 8.2 waves). Constants, not the device's SM count: the plan
     * (and its order of sums) must not depend on the machine beyond its
     * shared-memory limit. kw is chosen as for n = 1 (its warps per block)
     * at every n: a row's slices, and so its sum, do not depend on the rows
     * beside it (batch invariance). */
    const int warps1 = (size_t)in_dim * 2 > GEMV_BIG_SMEM ? 16 : 8;
    const long wave = 132 * 16, groups = (out_dim + GEMV_ROWS - 1) / GEMV_ROWS;
    double best = -1.0;
    c->kw = 1;
    for (int kw = 1; kw <= warps1 && (kw == 1 || kc / kw >= 64); kw *= 2) {
        const long warps = groups * kw;
        const double fill = (double)warps / (double)(((warps + wave - 1) / wave) * wave);
        if (fill > best + 0.02) best = fill, c->kw = kw;
    }
    const int rows = c->warps / c->kw * GEMV_ROWS;
    c->blocks = (out_dim + rows - 1) / rows;
    c->smem = (xs > GEMV_RED_SMEM(c->warps, GEMV_EPI_STORE) ? xs : GEMV_RED_SMEM(c->warps, GEMV_EPI_STORE)) +
              gemv_ring_smem(n, c->warps);
    c->fn = c->warps == 8 ? gemv_pick_n<8>(n) : gemv_pick_n<16>(n);
}

/* ---- the fused launchers (no plan: the configuration is computed per call
 * from the shapes, a few integer operations) ------------------------------ */

/* The largest dynamic shared memory per block of the GPUs frt targets
 * (H100/H200 opt-in: 227 KiB): x beyond it fails without a device query. */
#define GEMV_SMEM_MAX (227u << 10)

typedef void (*gemv_multi_fn)(const gemv_multi_table, const uint4 *, int, const gemv_norm_args);
typedef void (*gemv_swiglu_fn)(void *, int, const uint4 *, const uint4 *, const uint4 *, int, int,
                               int, const gemv_norm_args);

template <int WARPS, bool NORM> static gemv_multi_fn gemv_multi_pick_n(int n)
{
    switch (n) {
    case 1: return gemv_multi_kernel<1, WARPS, NORM>;
    case 2: return gemv_multi_kernel<2, WARPS, NORM>;
    case 3: return gemv_multi_kernel<3, WARPS, NORM>;
    case 4: return gemv_multi_kernel<4, WARPS, NORM>;
    case 5: return gemv_multi_kernel<5, WARPS, NORM>;
    case 6: return gemv_multi_kernel<6, WARPS, NORM>;
    case 7: return gemv_multi_kernel<7, WARPS, NORM>;
    case 8: return gemv_multi_kernel<8, WARPS, NORM>;
    default: return NULL;
    }
}

template <int WARPS, bool NORM> static gemv_swiglu_fn gemv_swiglu_pick_n(int n)
{
    switch (n) {
    case 1: return gemv_swiglu_kernel<1, WARPS, NORM>;
    case 2: return gemv_swiglu_kernel<2, WARPS, NORM>;
    case 3: return gemv_swiglu_kernel<3, WARPS, NORM>;
    case 4: return gemv_swiglu_kernel<4, WARPS, NORM>;
    case 5: return gemv_swiglu_kernel<5, WARPS, NORM>;
    case 6: return gemv_swiglu_kernel<6, WARPS, NORM>;
    case 7: return gemv_swiglu_kernel<7, WARPS, NORM>;
    case 8: return gemv_swiglu_kernel<8, WARPS, NORM>;
    default: return NULL;
    }
}

/* The checks on n and in_dim shared by every launcher. */
static int gemv_n_check(const char *what, int n, int in_dim)
{
    FRT_ARG(n >= 1 && n <= FRT_CUDA_GEMV_MAX_N, "cuda gemv %s: n %d not in [1, %d]", what, n,
            FRT_CUDA_GEMV_MAX_N);
    FRT_ARG(in_dim > 0 && in_dim % 8 == 0, "cuda gemv %s: in %d must be a positive multiple of 8",
            what, in_dim);
    return 0;
}

/* The checks on x shared by both plain launchers. */
static int gemv_x_check(const char *what, const uint16_t *x, int n, int in_dim)
{
    FRT_ARG(x, "cuda gemv %s: NULL x", what);
    FRT_TRY(gemv_n_check(what, n, in_dim));
    FRT_ARG(((uintptr_t)x & (GEMM_ALIGN - 1)) == 0, "cuda gemv %s: x must be %d-byte aligned", what,
            GEMM_ALIGN);
    return 0;
}

/* The checks of the _norm launchers' norm, and its kernel arguments: the
 * launch shape rmsnorm.cu uses for a row of in_dim (norm_shape_of; the
 * strided loop of 1024 threads, groups of 1, when it has none). */
static int gemv_norm_check(const char *what, const frt_cuda_gemv_norm *norm, int n, int in_dim,
                           gemv_norm_args *a)
{
    FRT_ARG(norm, "cuda gemv %s: NULL norm", what);
    FRT_ARG(norm->x && norm->w, "cuda gemv %s: NULL norm x or w", what);
    FRT_TRY(gemv_n_check(what, n, in_dim));
    FRT_ARG(norm_aligned(norm->x, FRT_CUDA_F32) && norm_aligned(norm->w, FRT_CUDA_F32),
            "cuda gemv %s: norm x and w must be 16-byte aligned", what);
    const norm_shape sh = norm_shape_of(in_dim);
    a->x = norm->x;
    a->w = norm->w;
    a->eps = norm->eps;
    a->zc = norm->zero_centered ? 1 : 0;
    a->threads = sh.nv ? sh.threads : 1024; /* rmsnorm_loop_kernel's block */
    a->g = sh.nv ? sh.g : 1;
    return 0;
}

/* The input of a fused launcher: norm NULL, x read (gemv_x_check); else x
 * staged from rmsnorm(norm->x), *na its kernel arguments (gemv_norm_check). */
int gemv_input_check(const char *what, const uint16_t *x, const frt_cuda_gemv_norm *norm,
                            int n, int in_dim, gemv_norm_args *na)
{
    memset(na, 0, sizeof *na);
    return norm ? gemv_norm_check(what, norm, n, in_dim, na) : gemv_x_check(what, x, n, in_dim);
}

/* Makes smem bytes of dynamic shared memory available to fn. Nothing to do
 * up to 48 KiB (E4M3 decode shapes: x is n * hidden * 2 <= 40 KiB at the
 * 27B; bf16 adds its weight ring, 48 KiB at n 1); beyond, x and the ring
 * must fit the current device's opt-in limit, and the kernel's
 * limit is raised to it (legal inside a stream capture: cudaFuncSetAttribute
 * is no stream operation and does not synchronise). */
int gemv_smem_ready(const char *what, const void *fn, size_t smem)
{
    if (smem <= (48u << 10)) return 0;
    FRT_ARG(smem <= GEMV_SMEM_MAX,
            "cuda gemv %s: x needs %zu bytes of shared memory (n x in_dim too large)", what, smem);
    int dev = 0, optin = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    FRT_ARG(smem <= (size_t)optin,
            "cuda gemv %s: x needs %zu bytes of shared memory, the device has %d per block", what,
            smem, optin);
    FRT_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    return 0;
}

/* The grid cap of frt_cuda_gemv_set_max_grid (0: none). */
static int gemv_max_grid;

extern "C" void frt_cuda_gemv_set_max_grid(int blocks) { gemv_max_grid = blocks > 0 ? blocks : 0; }

int gemv_layout(const char *what, const void *fn, int threads, size_t loop_smem, size_t block_smem, long nvb,
                gemv_launch *l)
{
    /* an x too large for any block is a bad argument, refused before the
     * device is queried (as gemv_smem_ready does) */
    FRT_ARG(block_smem <= GEMV_SMEM_MAX, "cuda gemv %s: x needs %zu bytes of shared memory (n x in_dim too large)",
            what, block_smem);
    int dev = 0, optin = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    l->red_on_x = loop_smem > (size_t)optin || loop_smem > GEMV_SMEM_MAX;
    l->smem = l->red_on_x ? block_smem : loop_smem;
    FRT_TRY(gemv_smem_ready(what, fn, l->smem));
    if (l->red_on_x) {
        l->grid = (unsigned)nvb;
        return 0;
    }
    int sms = 0, per = 0;
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn, threads, loop_smem));
    long g = (long)sms * (per > 0 ? per : 1);
    if (gemv_max_grid > 0 && g > gemv_max_grid) g = gemv_max_grid;
    l->grid = (unsigned)(g < nvb ? g : nvb);
    return 0;
}

int gemv_entry_check(const char *what, int i, const void *y, frt_cuda_dtype y_dtype, const void *w, int out_dim,
                     const void *x, const frt_cuda_gemv_norm *norm)
{
    FRT_ARG(y && w, "cuda gemv %s: entry %d: NULL pointer", what, i);
    FRT_ARG(frt_dtype_ok(y_dtype), "cuda gemv %s: entry %d: bad dtype", what, i);
    FRT_ARG(out_dim > 0, "cuda gemv %s: entry %d: out %d", what, i, out_dim);
    FRT_ARG(((uintptr_t)w & (GEMM_ALIGN - 1)) == 0, "cuda gemv %s: entry %d: w must be %d-byte aligned", what, i,
            GEMM_ALIGN);
    FRT_ARG(((uintptr_t)y & (frt_dtype_bytes(y_dtype) - 1)) == 0, "cuda gemv %s: entry %d: y misaligned for its dtype",
            what, i);
    FRT_ARG(y != w && (norm ? y != (const void *)norm->x && y != (const void *)norm->w : y != x),
            "cuda gemv %s: entry %d: y aliases an input", what, i);
    return 0;
}

int gemv_multi_layout(const char *what, const gemv_multi_entry *ent, int n_entries, gemv_multi_table *tab,
                      long *total)
{
    /* the table: entries by rows per block, largest first (stable) */
    int order[FRT_CUDA_GEMV_MULTI_MAX];
    for (int i = 0; i < n_entries; i++) {
        int j = i;
        for (; j > 0 && ent[order[j - 1]].rows < ent[i].rows; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    memset(tab, 0, sizeof *tab);
    tab->count = n_entries;
    *total = 0;
    for (int k = 0; k < n_entries; k++) {
        const gemv_multi_entry *e = &ent[order[k]];
        tab->e[k] = *e;
        tab->begin[k] = (int)*total;
        *total += (e->out_dim + e->rows - 1) / e->rows;
        FRT_ARG(*total <= 0x7fffffffL, "cuda gemv %s: grid of %ld blocks", what, *total);
    }
    return 0;
}

/* frt_cuda_gemv_multi (norm NULL: x read) and frt_cuda_gemv_multi_norm (x
 * NULL: staged from rmsnorm(norm->x)). */
static int gemv_multi_launch(const char *what, void *stream, const frt_cuda_gemv_entry *entries,
                             int n_entries, const uint16_t *x, const frt_cuda_gemv_norm *norm,
                             int n, int in_dim)
{
    FRT_ARG(entries, "cuda gemv %s: NULL entries", what);
    FRT_ARG(n_entries >= 1 && n_entries <= FRT_CUDA_GEMV_MULTI_MAX,
            "cuda gemv %s: %d entries not in [1, %d]", what, n_entries, FRT_CUDA_GEMV_MULTI_MAX);
    gemv_norm_args na;
    FRT_TRY(gemv_input_check(what, x, norm, n, in_dim, &na));
    gemv_multi_entry ent[FRT_CUDA_GEMV_MULTI_MAX];
    int warps = 0;
    size_t smem = 0;
    for (int i = 0; i < n_entries; i++) {
        const frt_cuda_gemv_entry *e = &entries[i];
        FRT_TRY(gemv_entry_check(what, i, e->y, e->y_dtype, e->w, e->out_dim, x, norm));
        for (int j = 0; j < i; j++)
            FRT_ARG(entries[j].y != e->y, "cuda gemv %s: entries %d and %d share y", what, j, i);
        gemv_cfg c;
        gemv_choose(n, in_dim, e->out_dim, &c);
        ent[i].y = e->y;
        ent[i].w = (const uint4 *)e->w;
        ent[i].s = NULL;
        ent[i].out_dim = e->out_dim;
        ent[i].y_bf16 = e->y_dtype == FRT_CUDA_BF16;
        ent[i].kw = c.kw;
        ent[i].rows = (c.warps / c.kw) * c.nr;
        warps = c.warps; /* a function of (n, in_dim): the same for every entry */
        if (c.smem > smem) smem = c.smem;
    }
    if (norm) smem += GEMV_NORM_SMEM(n);
    gemv_multi_table tab;
    long total = 0;
    FRT_TRY(gemv_multi_layout(what, ent, n_entries, &tab, &total));
    const gemv_multi_fn fn =
        norm ? (warps == 8 ? gemv_multi_pick_n<8, true>(n) : gemv_multi_pick_n<16, true>(n))
             : (warps == 8 ? gemv_multi_pick_n<8, false>(n) : gemv_multi_pick_n<16, false>(n));
    FRT_TRY(gemv_smem_ready(what, (const void *)fn, smem));
    FRT_CUDA_TRY(frt_pdl_launch(fn, (unsigned)total, warps * 32, smem, stream, tab, (const uint4 *)x,
                             in_dim / 8, na));
    return 0;
}

extern "C" int frt_cuda_gemv_multi(void *stream, const frt_cuda_gemv_entry *entries,
                                   int n_entries, const uint16_t *x, int n, int in_dim)
{
    return gemv_multi_launch("multi", stream, entries, n_entries, x, NULL, n, in_dim);
}

extern "C" int frt_cuda_gemv_multi_norm(void *stream, const frt_cuda_gemv_entry *entries,
                                        int n_entries, const frt_cuda_gemv_norm *norm, int n,
                                        int in_dim)
{
    return gemv_multi_launch("multi_norm", stream, entries, n_entries, NULL, norm, n, in_dim);
}

/* frt_cuda_gemv_swiglu (norm NULL) and frt_cuda_gemv_swiglu_norm (x NULL). */
static int gemv_swiglu_launch(const char *what, void *stream, void *y, frt_cuda_dtype y_dtype,
                              const uint16_t *x, const frt_cuda_gemv_norm *norm,
                              const uint16_t *w_gate, const uint16_t *w_up, int n, int in_dim,
                              int inter)
{
    FRT_ARG(y && w_gate && w_up, "cuda gemv %s: NULL pointer", what);
    FRT_ARG(frt_dtype_ok(y_dtype), "cuda gemv %s: bad dtype", what);
    gemv_norm_args na;
    FRT_TRY(gemv_input_check(what, x, norm, n, in_dim, &na));
    FRT_ARG(inter > 0, "cuda gemv %s: inter %d", what, inter);
    FRT_ARG((((uintptr_t)w_gate | (uintptr_t)w_up) & (GEMM_ALIGN - 1)) == 0,
            "cuda gemv %s: weights must be %d-byte aligned", what, GEMM_ALIGN);
    FRT_ARG(((uintptr_t)y & (frt_dtype_bytes(y_dtype) - 1)) == 0,
            "cuda gemv %s: y misaligned for its dtype", what);
    FRT_ARG(y != (const void *)w_gate && y != (const void *)w_up &&
                (norm ? y != (const void *)norm->x && y != (const void *)norm->w
                      : y != (const void *)x),
            "cuda gemv %s: y aliases an input", what);
    gemv_cfg c;
    gemv_choose(n, in_dim, inter, &c); /* the gate's configuration alone: the same sums */
    const size_t xs = (size_t)n * in_dim * 2, red = GEMV_RED_SMEM(c.warps, GEMV_EPI_SWIGLU);
    const size_t smem = (xs > red ? xs : red) + (norm ? GEMV_NORM_SMEM(n) : 0) + gemv_ring_smem(n, c.warps);
    const gemv_swiglu_fn fn =
        norm ? (c.warps == 8 ? gemv_swiglu_pick_n<8, true>(n) : gemv_swiglu_pick_n<16, true>(n))
             : (c.warps == 8 ? gemv_swiglu_pick_n<8, false>(n) : gemv_swiglu_pick_n<16, false>(n));
    FRT_TRY(gemv_smem_ready(what, (const void *)fn, smem));
    FRT_CUDA_TRY(frt_pdl_launch(fn, c.blocks, c.warps * 32, smem, stream, y, (int)(y_dtype == FRT_CUDA_BF16),
                             (const uint4 *)x, (const uint4 *)w_gate, (const uint4 *)w_up, in_dim / 8,
                             inter, c.kw, na));
    return 0;
}

extern "C" int frt_cuda_gemv_swiglu(void *stream, void *y, frt_cuda_dtype y_dtype,
                                    const uint16_t *x, const uint16_t *w_gate,
                                    const uint16_t *w_up, int n, int in_dim, int inter)
{
    return gemv_swiglu_launch("swiglu", stream, y, y_dtype, x, NULL, w_gate, w_up, n, in_dim,
                              inter);
}

extern "C" int frt_cuda_gemv_swiglu_norm(void *stream, void *y, frt_cuda_dtype y_dtype,
                                         const frt_cuda_gemv_norm *norm, const uint16_t *w_gate,
                                         const uint16_t *w_up, int n, int in_dim, int inter)
{
    return gemv_swiglu_launch("swiglu_norm", stream, y, y_dtype, NULL, norm, w_gate, w_up, n,
                              in_dim, inter);
}
