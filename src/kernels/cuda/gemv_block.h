/*
 * kernels/cuda/gemv_block.h - what the bf16 decode GEMV (gemv.cu) and the
 * E4M3 one (gemv_fp8.cu) share: the work of one block (gemv_block: the
 * weight loads in flight, x staged in shared memory, the tensor-core sums
 * of a weight format, the cross-warp sums, the plain / accumulating /
 * SwiGLU stores; read gemv.cu's header comment), the RMSNorm prologue of
 * the _norm launchers (gemv_norm_stage: x = bf16(rmsnorm(resid)) staged in
 * shared memory, frt_cuda_rmsnorm's bits), the table of a multi-product
 * launch (the entries' grids laid end to end) and the host checks of the
 * fused launchers (defined in gemv.cu). Internal; CUDA C++ only, included
 * by those two .cu files (and by gemma_mlp.cu, for gemv_ld_w).
 */
#ifndef FRT_KERNELS_CUDA_GEMV_BLOCK_H
#define FRT_KERNELS_CUDA_GEMV_BLOCK_H

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/gemv_util.h"
#include "kernels/cuda/mma_util.h"
#include "kernels/cuda/norm_util.h"

/* The RMSNorm prologue of the _norm launchers (bf16 and E4M3 weights):
 *
 * x[t, :] = bf16(rmsnorm(resid[t, :])) for t < N, computed by every block
 * into its shared x instead of copying a bf16 x from global memory, with the
 * arithmetic of rmsnorm.cu (frt_cuda_rmsnorm / frt_cuda_add_rmsnorm):
 *   ss  = the fp64 sum of squares of the row
 *   var = (float)(ss / dim),  inv = 1.0f / sqrtf(var + eps)
 *   y   = (x * inv) * (1.0f + w)   (zero-centred; (x * inv) * w otherwise)
 * rounded to bf16 (RNE). The fp64 sum is added in the order of rmsnorm.cu's
 * launch for this dim (norm_shape_of: T threads owning groups of G elements
 * i, i + T, ...; dim > 16384: the strided loop of 1024 threads, G = 1): the
 * block plays those T "virtual threads" (virtual thread v is thread v mod
 * (WARPS * 32), virtual warp v / 32 is a whole warp of the block), each sums
 * its groups in order, a xor butterfly per virtual warp, then one butterfly
 * over the T / 32 warp sums (zeros past them): frt_block_sum's order. Every
 * operation is the one rmsnorm.cu performs on the same operands, so the
 * bf16 x is the same bits as frt_cuda_rmsnorm's bf16 output. */
struct gemv_norm_args {
    const float *x; /* [N, dim] f32 residual rows (device; 16-byte aligned) */
    const float *w; /* [dim] f32 norm weight (16-byte aligned) */
    float eps;
    int zc;      /* zero-centred: (1 + w) */
    int threads; /* T: rmsnorm.cu's threads for dim (a multiple of 32, <= 1024) */
    int g;       /* G: elements per group, 4 or 1 */
};

/* Stages xs [N, kc] (chunks of 8 bf16) from nm; part: N * 32 doubles of
 * shared memory. Ends with the chunks stored (the caller syncs). */
template <int N, int WARPS>
__device__ __forceinline__ void gemv_norm_stage(uint4 *xs, double *part, const gemv_norm_args &nm,
                                                int kc)
{
    const int lane = threadIdx.x & 31, dim = kc * 8, T = nm.threads, G = nm.g;
    const int groups = dim / G;
    /* pass 1: each virtual thread's fp64 sum of its groups, in order (4 loads
     * in flight per batch), then the virtual warp's butterfly */
#pragma unroll
    for (int t = 0; t < N; t++) {
        const float *xr = nm.x + (size_t)t * dim;
        for (int vt = threadIdx.x; vt < T; vt += WARPS * 32) { /* warp-uniform (T % 32 == 0) */
            double ss = 0;
            for (int g0 = vt; g0 < groups; g0 += 4 * T) {
                float v[4][4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int gi = g0 + k * T;
                    if (gi < groups) {
                        if (G == 4) {
                            const float4 f = __ldg((const float4 *)xr + gi);
                            v[k][0] = f.x, v[k][1] = f.y, v[k][2] = f.z, v[k][3] = f.w;
                        } else {
                            v[k][0] = __ldg(xr + gi);
                            v[k][1] = v[k][2] = v[k][3] = 0.0f;
                        }
                    }
                }
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    if (g0 + k * T < groups) {
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            if (e < G) ss += (double)v[k][e] * (double)v[k][e];
                    }
                }
            }
            ss = frt_warp_sum(ss);
            if (lane == 0) part[t * 32 + (vt >> 5)] = ss;
        }
    }
    __syncthreads();
    /* every warp: the sum over the T / 32 virtual warps, then rstd */
    float inv[N];
#pragma unroll
    for (int t = 0; t < N; t++) {
        double s = lane < (T >> 5) ? part[t * 32 + lane] : 0.0;
        s = frt_warp_sum(s);
        inv[t] = norm_inv_rms(s, dim, nm.eps);
    }
    /* pass 2: chunk i = 8 elements of row i / kc (the row mostly in L1 now) */
    for (int i = threadIdx.x; i < N * kc; i += WARPS * 32) {
        const int t = i / kc, c = i - t * kc;
        float iv = inv[0];
#pragma unroll
        for (int u = 1; u < N; u++)
            if (t == u) iv = inv[u]; /* static indices: inv stays in registers */
        const float4 *xp = (const float4 *)nm.x + 2 * (size_t)i;
        const float4 *wp = (const float4 *)nm.w + 2 * c;
        const float4 a0 = __ldg(xp), a1 = __ldg(xp + 1), w0 = __ldg(wp), w1 = __ldg(wp + 1);
        const float xv[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        uint32_t u32[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float y[2];
#pragma unroll
            for (int h = 0; h < 2; h++) y[h] = norm_weigh(xv[2 * j + h], iv, wv[2 * j + h], nm.zc);
            const __nv_bfloat162 b = __floats2bfloat162_rn(y[0], y[1]); /* .x: the lower index */
            u32[j] = (uint32_t)__bfloat16_as_ushort(b.x) |
                     ((uint32_t)__bfloat16_as_ushort(b.y) << 16);
        }
        xs[i] = make_uint4(u32[0], u32[1], u32[2], u32[3]);
    }
}

__device__ __forceinline__ uint4 gemv_ld_w(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* Programmatic dependent launch (frt_pdl_attr, cuda_util.h): each GEMV
 * block first puts its first batch of weight loads in flight (weights never
 * depend on earlier kernels), lets the kernel after it launch, then waits
 * for the kernel before it to complete before it reads x, the residual or
 * y, or writes anything (gemv_block; gemv_kernel waits before it reads
 * d_skip). */

#define GEMV_ROWS 8   /* output rows per warp group: the N of an m16n8k16 mma */
#define GEMV_X_LOADS 4 /* x chunks a thread loads at once when it stages x */
#define GEMV_SLICE 32 /* a warp's slice of a row is a multiple of this many chunks */

/* One batch: k-blocks u < U of the NM rows wr[] (one per matrix streamed),
 * chunk c + 4 u (TAIL: zero past `end`, for the weights and x alike). */
template <int NM, int U, bool TAIL>
__device__ __forceinline__ void gemv_load(uint4 (&wv)[NM][U], const uint4 *const (&wr)[NM], int c,
                                          int end)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const bool ok = !TAIL || c + 4 * u < end;
#pragma unroll
        for (int r = 0; r < NM; r++)
            wv[r][u] = ok ? gemv_ld_w(wr[r] + c + 4 * u) : make_uint4(0, 0, 0, 0);
    }
}

/* ---- the weight ring (8-warp blocks) --------------------------------------
 *
 * The loads above hold a batch in registers: a warp issues it, waits for
 * all of it, runs its mmas, then issues the next, so between batches
 * nothing of the warp is in flight. In an 8-warp block each warp instead
 * streams its slice through a ring of GEMV_RING_STAGES stages in shared
 * memory at n <= 4 (cp.async, 16 bytes a lane, GEMV_RING_LOADS k-blocks
 * of every matrix a stage): the copies of the next stages are in flight while a
 * stage's mmas run, and they hold no registers. A lane reads back only the
 * chunks it copied (cp.async.wait_group orders its own copies; no barrier).
 * Chunks past the slice are zero-filled by the copy (src-size 0), the
 * register path's zeros. The k-blocks are summed in the same order as in
 * the register path, whatever the stage size: the same bits. 16-warp blocks
 * (x over GEMV_BIG_SMEM: one block an SM) and n > 4 keep the register path. */
#define GEMV_RING_LOADS 4  /* 16-byte copies a lane a stage (k-blocks x matrices) */
#define GEMV_RING_STAGES 3 /* stages of a warp's ring at n <= 2 (one fewer at n 3..4) */

/* Stages of the ring for a block of `warps` warps at n tokens (0: the
 * register path). Fewer at larger n, where x takes the shared memory that
 * two blocks an SM need; none past n 4, where a ring of one stage was
 * slower than the registers on the H100 (n 8: 9B gate 37.2 against 35.3
 * us, 27B gate 72.7 against 67.4). */
__host__ __device__ constexpr int gemv_ring_stages(int n, int warps)
{
    return warps != 8 || n > 4 ? 0 : n <= 2 ? GEMV_RING_STAGES : GEMV_RING_STAGES - 1;
}

/* Shared memory of the rings of a block (bytes; after x and the norm's
 * sums). */
__host__ __device__ constexpr size_t gemv_ring_smem(int n, int warps)
{
    return (size_t)warps * gemv_ring_stages(n, warps) * GEMV_RING_LOADS * 32 * 16;
}

/* Stage st of a lane's ring (rs: the warp's ring, [S][NM][UR][32] chunks):
 * k-blocks u < UR of the NM rows wr[] from chunk c (zero at or past end:
 * src-size 0), then one commit group. */
template <int NM, int UR>
__device__ __forceinline__ void gemv_ring_issue(uint4 *rs, int st, const uint4 *const (&wr)[NM], int c, int end,
                                                int lane)
{
#pragma unroll
    for (int m = 0; m < NM; m++)
#pragma unroll
        for (int u = 0; u < UR; u++) {
            const bool ok = c + 4 * u < end;
            frt_cp_async16_l2pf(frt_smem_addr(rs + ((st * NM + m) * UR + u) * 32 + lane),
                                ok ? wr[m] + c + 4 * u : wr[m], ok ? 16 : 0);
        }
    frt_cp_async_commit();
}

/* The formats that stream through the ring (gemv.cu's bf16 specialises
 * this to true). The E4M3 formats keep the register path: on the H100 the
 * ring made the 8B's E4M3 decode 0.2-1% slower with 2 KiB stages and 4%
 * slower with four of them, where bf16 gained 1-2%. */
template <class Fmt> struct gemv_ring_on {
    static constexpr bool value = false;
};

/* Weight formats with one scale per 128 x 128 block of the matrix
 * (gemv_fp8.cu's gemv_e4m3_b128) specialise this to true: their k-blocks
 * sum into a partial accumulator that gemv_fold multiplies by the block's
 * scale and adds to the row's sum once the 128-element block (two
 * k-blocks of 64) is complete. Every other format sums straight into acc
 * (the code of those formats is unchanged by this hook). */
template <class Fmt> struct gemv_blocked {
    static constexpr bool value = false;
};

/* acc[m][i] = fmaf(bacc[m][i], sb[m][b], acc[m][i]) for the lane's two
 * sums (i < 2; 2, 3 are the zero tokens g + 8), then bacc = 0: 128-element
 * block b of the row group's scale row sb[m] (warp-uniform). */
template <int NM>
__device__ __forceinline__ void gemv_fold(float (&acc)[NM][4], float (&bacc)[NM][4], const float *const (&sb)[NM],
                                          int b)
{
#pragma unroll
    for (int m = 0; m < NM; m++) {
        const float sc = __ldg(sb[m] + b);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (i < 2) acc[m][i] = __fmaf_rn(bacc[m][i], sc, acc[m][i]);
            bacc[m][i] = 0.0f;
        }
    }
}

/* The mmas of one batch, k-blocks u < U in order: Fmt::kblock of chunk
 * c + 4 u of each matrix's row g (zero past `end` when TAIL, and for
 * tokens g >= N). c0: the batch's first chunk of lane q = 0 (warp-uniform:
 * every lane runs every mma). The k-blocks are taken in the same order
 * whatever U is, so a row's sum does not depend on NM (the SwiGLU's two
 * matrices share a batch's loads). x's chunks are loaded here, indexed as
 * xs[(g kc + c + 4 u) XC + j] in the loop, as the bf16 GEMV did before the
 * weight formats shared this code: the compiler then keeps one address
 * and steps it; an address computed inside kblock was recomputed for
 * every k-block, 2.5-13% slower at 4 rows (H100). */
template <class Fmt, int N, int NM, int U, bool TAIL>
__device__ __forceinline__ void gemv_mma(float (&acc)[NM][4], float (&part)[NM][4], const float *const (&sb)[NM],
                                         const uint4 (&wv)[NM][U], const uint4 *xs, int kc, int c, int c0, int end,
                                         int g)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (TAIL && c0 + 4 * u >= end) break; /* warp-uniform */
        const bool ok = g < N && (!TAIL || c + 4 * u < end);
        uint4 xv[Fmt::XC];
#pragma unroll
        for (int j = 0; j < Fmt::XC; j++)
            xv[j] = ok ? xs[(g * kc + c + 4 * u) * Fmt::XC + j] : make_uint4(0, 0, 0, 0);
        if constexpr (gemv_blocked<Fmt>::value) { /* chunk c0 + 4 u: k-block (c0 + 4 u) / 4 */
            Fmt::template kblock<NM, U>(part, wv, u, xv);
            if ((c0 + 4 * u) & 4) gemv_fold<NM>(acc, part, sb, (c0 + 4 * u) >> 3); /* a block's 2nd half */
        } else {
            Fmt::template kblock<NM, U>(acc, wv, u, xv);
        }
    }
}

/* y[i] widened to f32: the addend of an accumulating store, loaded by the
 * thread that stores y[i] before its weight loop (so the load is off the
 * block's tail; nothing else in the launch writes y[i]). */
__device__ __forceinline__ float gemv_ld_y(const void *y, int y_bf16, size_t i)
{
    return y_bf16 ? __bfloat162float(((const __nv_bfloat16 *)y)[i]) : ((const float *)y)[i];
}

/* y[i] = v (+ prev, the value gemv_ld_y read: y += x.W^T is fl(sum + y),
 * the same bits as storing the sum and adding it to y in f32 afterwards). */
__device__ __forceinline__ void gemv_store(void *y, int y_bf16, int accumulate, size_t i, float v,
                                           float prev)
{
    if (accumulate) v += prev;
    if (y_bf16)
        ((__nv_bfloat16 *)y)[i] = __float2bfloat16_rn(v);
    else
        ((float *)y)[i] = v;
}

/* After a block's first weights are in flight: lets the kernel after this
 * one launch, waits for the one before, stages x [N, xc chunks] (NORM:
 * bf16(rmsnorm(nm.x)), gemv_norm_stage) into xs, syncs the block; then
 * the zeroed accumulators. */
template <int N, int WARPS, bool NORM>
__device__ __forceinline__ void gemv_stage_x(uint4 *xs, double *part, const gemv_norm_args &nm, const uint4 *x, int xc)
{
    frt_pdl_trigger();
    frt_pdl_wait();
    if constexpr (NORM) {
        gemv_norm_stage<N, WARPS>(xs, part, nm, xc);
    } else {
        /* every load of GEMV_X_LOADS chunks is issued before any of their
         * stores, so a thread waits one round trip to L2 per GEMV_X_LOADS
         * chunks, not one per chunk (an input of 14336 is 7 chunks a thread) */
        constexpr int T = WARPS * 32;
        for (int i0 = threadIdx.x; i0 < N * xc; i0 += GEMV_X_LOADS * T) {
            uint4 v[GEMV_X_LOADS];
#pragma unroll
            for (int k = 0; k < GEMV_X_LOADS; k++)
                if (i0 + k * T < N * xc) v[k] = __ldg(x + i0 + k * T);
#pragma unroll
            for (int k = 0; k < GEMV_X_LOADS; k++)
                if (i0 + k * T < N * xc) xs[i0 + k * T] = v[k];
        }
    }
    __syncthreads();
}

template <int NM> __device__ __forceinline__ void gemv_zero(float (&acc)[NM][4])
{
#pragma unroll
    for (int m = 0; m < NM; m++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[m][i] = 0.0f;
}

/* What a block's warp groups compute and where the sums go. */
enum gemv_epi {
    GEMV_EPI_STORE = 0,  /* y[t, row] (+)= x[t] . w[row] */
    GEMV_EPI_SWIGLU = 1, /* y[t, row] = silu(x[t] . w[row]) * (x[t] . w2[row]) */
};

/* The end of a block's work (both paths): the blocked formats' last fold,
 * the kw slices' sums through shared memory (over x and the rings, once
 * every warp is done with them), the stores. */
template <class Fmt, int N, int WARPS, int EPI, int NM>
__device__ __forceinline__ void gemv_block_end(float *red, void *y, int y_bf16, int accumulate, const float *s,
                                               const float *s2, int out_dim, int kw, float (&acc)[NM][4],
                                               float (&bacc)[NM][4], const float *const (&sb)[NM], int kb, int ke,
                                               int row0, int warp, int lane, int kp, int g, int q)
{
    /* blocked: a slice ending in a block's first half (the row's last,
     * partial block: kc % 8 in 1..4) folds it here */
    if constexpr (gemv_blocked<Fmt>::value)
        if (ke > kb && !(((ke - 1) >> 2) & 1)) gemv_fold<NM>(acc, bacc, sb, (ke - 1) >> 3);
    if (kw > 1) { /* the kw slices' sums, in ascending slice order */
        /* red [WARPS][32][NM * 2]: over x, or its own space in a persistent
         * launch; written once every warp is done with it (x, or the sums
         * of the block before) */
        __syncthreads();
#pragma unroll
        for (int m = 0; m < NM; m++)
#pragma unroll
            for (int i = 0; i < 2; i++) red[(warp * 32 + lane) * NM * 2 + m * 2 + i] = acc[m][i];
        __syncthreads();
        if (kp != 0) return;
#pragma unroll
        for (int m = 0; m < NM; m++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float sum = acc[m][i];
                for (int k = 1; k < kw; k++) sum += red[((warp + k) * 32 + lane) * NM * 2 + m * 2 + i];
                acc[m][i] = sum;
            }
    }
    /* accumulator i < 2: token g, row 2 q + i (accumulators 2, 3: the zero
     * tokens g + 8) */
    if (g >= N) return;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = row0 + 2 * q + i;
        if (row >= out_dim) continue;
        const size_t at = (size_t)g * out_dim + row;
        const float v = Fmt::value(acc[0][i], s, row);
        if constexpr (EPI == GEMV_EPI_SWIGLU)
            gemv_store(y, y_bf16, 0, at, frt_silu(v) * Fmt::value(acc[NM - 1][i], s2, row), 0.0f);
        else
            gemv_store(y, y_bf16, accumulate, at, v, accumulate ? gemv_ld_y(y, y_bf16, at) : 0.0f);
    }
}

/* Shared memory of the RMSNorm prologue (the N x 32 virtual-warp sums). */
#define GEMV_NORM_SMEM(N) ((size_t)(N) * 32 * sizeof(double))

/* Shared memory of the cross-warp sums: every lane's accumulators. */
#define GEMV_RED_SMEM(WARPS, EPI) ((size_t)(WARPS) * 32 * 2 * ((EPI) == GEMV_EPI_SWIGLU ? 2 : 1) * sizeof(float))

/* A warp's share of one block's work: its slice [kb, ke) of the row
 * group's chunks (kp: its index among the kw warps of the group), the
 * batches with every k-block in range (nfull) and whether a partial one
 * follows (tail), the group's first row, the rows it streams (wr: a row
 * past out_dim reads row out_dim - 1 and is never stored) and, for the
 * blocked formats, the group's scale rows (sb). A function of (kc,
 * out_dim, kw, blk) and the warp only: the same for every EPI and N. */
template <int NM> struct gemv_work {
    int kp, kb, ke, nfull, row0;
    bool tail;
    const uint4 *wr[NM];
    const float *sb[NM];
};

template <class Fmt, int WARPS, int NM, int U>
__device__ __forceinline__ gemv_work<NM> gemv_work_of(const uint4 *w, const uint4 *w2, const float *s,
                                                      const float *s2, int kc, int out_dim, int kw, int blk,
                                                      int warp, int g)
{
    gemv_work<NM> k;
    const int groups = WARPS / kw, grp = warp / kw;
    k.kp = warp - grp * kw;
    const int per = ((kc + kw - 1) / kw + GEMV_SLICE - 1) / GEMV_SLICE * GEMV_SLICE;
    k.kb = min(kc, k.kp * per), k.ke = min(kc, k.kb + per);
    k.nfull = (k.ke - k.kb) / (4 * U);
    k.tail = (k.ke - k.kb) % (4 * U) != 0;
    k.row0 = (blk * groups + grp) * GEMV_ROWS;
#pragma unroll
    for (int m = 0; m < NM; m++) k.wr[m] = (m ? w2 : w) + (size_t)min(k.row0 + g, out_dim - 1) * kc;
    if constexpr (gemv_blocked<Fmt>::value) { /* the group's 128-row block (its 8 rows share it) */
        const size_t srow = (size_t)(min(k.row0, out_dim - 1) >> 7) * (size_t)((kc + 7) >> 3);
#pragma unroll
        for (int m = 0; m < NM; m++) k.sb[m] = (m ? s2 : s) + srow;
    }
    return k;
}

/* The first batch of k's slice into wv (a full one, or the tail). */
template <int NM, int U>
__device__ __forceinline__ void gemv_first_batch(uint4 (&wv)[NM][U], const gemv_work<NM> &k, int q)
{
    if (k.nfull > 0)
        gemv_load<NM, U, false>(wv, k.wr, k.kb + q, k.ke);
    else if (k.tail)
        gemv_load<NM, U, true>(wv, k.wr, k.kb + q, k.ke);
}

/* The register path's sums of k's slice into acc (zeroed here), its first
 * batch already in wv: each later batch is loaded when the one before is
 * summed. */
template <class Fmt, int N, int NM, int U>
__device__ __forceinline__ void gemv_stream(float (&acc)[NM][4], float (&bacc)[NM][4], uint4 (&wv)[NM][U],
                                            const gemv_work<NM> &k, const uint4 *xs, int kc, int g, int q)
{
    gemv_zero<NM>(acc);
    if constexpr (gemv_blocked<Fmt>::value) gemv_zero<NM>(bacc);
    for (int b = 0; b < k.nfull; b++) {
        const int c0 = k.kb + b * 4 * U;
        if (b > 0) gemv_load<NM, U, false>(wv, k.wr, c0 + q, k.ke);
        gemv_mma<Fmt, N, NM, U, false>(acc, bacc, k.sb, wv, xs, kc, c0 + q, c0, k.ke, g);
    }
    if (k.tail) {
        const int c0 = k.kb + k.nfull * 4 * U;
        if (k.nfull > 0) gemv_load<NM, U, true>(wv, k.wr, c0 + q, k.ke);
        gemv_mma<Fmt, N, NM, U, true>(acc, bacc, k.sb, wv, xs, kc, c0 + q, c0, k.ke, g);
    }
}

/* The work of one block, blk its index among the blocks of its product;
 * smem: the dynamic shared memory, max(N * kc * 16 (+ GEMV_NORM_SMEM(N)
 * when NORM), GEMV_RED_SMEM(WARPS, EPI)) bytes (the cross-warp sums reuse
 * x's space once every warp is done with it). Shared by the plain, multi
 * and SwiGLU kernels, so a row's sum is the same sequence of operations in
 * all three (the bits depend on in_dim and kw only). NORM: x is staged from
 * rmsnorm(nm.x) by gemv_norm_stage (x unused). kw is block-uniform: every
 * thread takes the same branches. EPI_STORE: group g owns rows (blk *
 * groups + g) * 8 + 0..7 of w, y[t, row] (+)= sum; EPI_SWIGLU: the same
 * rows of w (gate) and w2 (up), y[t, row] = silu(gate) * up.
 * Fmt, the weight format (gemv.cu's gemv_bf16, gemv_fp8.cu's gemv_e4m3):
 *   XC     x chunks (8 bf16) per 16-byte weight chunk; kc counts weight
 *          chunks, x [N, kc * XC] chunks;
 *   kblock the mmas of one k-block of every matrix into acc[m] (its order
 *          of sums);
 *   value  a row's sum as stored: the sum (bf16), or sum * s[row] (E4M3:
 *          s, s2 the scales of w, w2; NULL for bf16), or the sum (E4M3
 *          with 128 x 128 block scales, gemv_blocked: s, s2 the block
 *          tables [ceil(out_dim / 128), ceil(kc / 8)] f32, applied by
 *          gemv_fold as each 128-element block completes). */
template <class Fmt, int N, int WARPS, int EPI, bool NORM>
__device__ __forceinline__ void gemv_block(uint4 *smem, void *y, int y_bf16, int accumulate,
                                           const uint4 *x, const uint4 *w, const uint4 *w2,
                                           const float *s, const float *s2, int kc, int out_dim,
                                           int kw, int blk, const gemv_norm_args &nm)
{
    constexpr int NM = EPI == GEMV_EPI_SWIGLU ? 2 : 1; /* matrices streamed */
    constexpr int U = GEMV_LOADS / NM;                 /* k-blocks a batch */
    static_assert(GEMV_SLICE % (4 * U) == 0, "a slice is whole batches");
    constexpr int XC = Fmt::XC;                    /* x chunks (8 bf16) per weight chunk */
    uint4 *xs = smem;                              /* [N, kc * XC] chunks of x */
    double *part = (double *)(smem + N * kc * XC); /* NORM: [N, 32] virtual-warp sums */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const gemv_work<NM> k = gemv_work_of<Fmt, WARPS, NM, U>(w, w2, s, s2, kc, out_dim, kw, blk, warp, g);
    float bacc[NM][4]; /* blocked: the current 128-element block's sums */

    constexpr int S = gemv_ring_on<Fmt>::value ? gemv_ring_stages(N, WARPS) : 0; /* 0: the register path */
    constexpr int UR = GEMV_RING_LOADS / NM;      /* the ring's k-blocks a stage */
    static_assert(S == 0 || (UR >= 1 && GEMV_SLICE % (4 * UR) == 0), "a slice is whole stages");
    if constexpr (S > 0) {
        static_assert(!gemv_blocked<Fmt>::value, "the ring takes the formats without block scales");
        uint4 *rs = (uint4 *)(part + (NORM ? N * 32 : 0)) + warp * S * NM * UR * 32; /* after x and part */
        const int kb = k.kb, ke = k.ke;
        const int nb = (ke - kb + 4 * UR - 1) / (4 * UR); /* stages of the slice */
        /* the first S stages are in flight while the kernel before finishes
         * and x is staged; a commit group a stage, empty past the slice */
#pragma unroll
        for (int b = 0; b < S; b++) {
            if (b < nb)
                gemv_ring_issue<NM, UR>(rs, b, k.wr, kb + b * 4 * UR + q, ke, lane);
            else
                frt_cp_async_commit();
        }
        gemv_stage_x<N, WARPS, NORM>(xs, part, nm, x, kc * XC);
        float acc[NM][4];
        gemv_zero<NM>(acc);
        int st = 0;
        for (int b = 0; b < nb; b++) {
            frt_cp_async_wait<S - 1>(); /* stage b landed (S - 1 later groups may pend) */
            uint4 wv[NM][UR];
#pragma unroll
            for (int m = 0; m < NM; m++)
#pragma unroll
                for (int u = 0; u < UR; u++) wv[m][u] = rs[((st * NM + m) * UR + u) * 32 + lane];
            if (b + S < nb)
                gemv_ring_issue<NM, UR>(rs, st, k.wr, kb + (b + S) * 4 * UR + q, ke, lane);
            else
                frt_cp_async_commit();
            const int c0 = kb + b * 4 * UR;
            if (c0 + 4 * UR <= ke)
                gemv_mma<Fmt, N, NM, UR, false>(acc, bacc, k.sb, wv, xs, kc, c0 + q, c0, ke, g);
            else
                gemv_mma<Fmt, N, NM, UR, true>(acc, bacc, k.sb, wv, xs, kc, c0 + q, c0, ke, g);
            st = st + 1 == S ? 0 : st + 1;
        }
        gemv_block_end<Fmt, N, WARPS, EPI, NM>((float *)smem, y, y_bf16, accumulate, s, s2, out_dim, kw, acc, bacc,
                                              k.sb, kb, ke, k.row0, warp, lane, k.kp, g, q);
        return;
    }

    uint4 wv[NM][U];
    /* the first batch is in flight while the kernel before finishes and x
     * is staged */
    gemv_first_batch<NM, U>(wv, k, q);
    gemv_stage_x<N, WARPS, NORM>(xs, part, nm, x, kc * XC);
    float acc[NM][4];
    gemv_stream<Fmt, N, NM, U>(acc, bacc, wv, k, xs, kc, g, q);
    gemv_block_end<Fmt, N, WARPS, EPI, NM>((float *)smem, y, y_bf16, accumulate, s, s2, out_dim, kw, acc, bacc,
                                          k.sb, k.kb, k.ke, k.row0, warp, lane, k.kp, g, q);
}

/* One block's work in a persistent launch (gemv_block_loop): its product's
 * output, matrices, scales, shape and kw, and its index among that
 * product's blocks. */
struct gemv_job {
    void *y;
    const uint4 *w, *w2;
    const float *s, *s2;
    int y_bf16, accumulate, out_dim, kw, blk;
};

/* The register path as a persistent launch: this block does the blocks
 * blockIdx.x, blockIdx.x + gridDim.x, ... below nvb of the launch (job(v):
 * block v's gemv_job, block-uniform), each exactly as gemv_block does it
 * (the same loads, mmas and cross-warp sums: the same bits whatever the
 * grid), with x staged once for all of them and the next block's first
 * batch in flight while the cross-warp sums and the stores of the one
 * before run. smem: x, the norm's sums and the cross-warp sums side by
 * side (gemv_layout's loop_smem); or, red_on_x set, gemv_block's
 * (the cross-warp sums over x), which only a grid of nvb blocks (one
 * block of work each) may take: the host's choice when x leaves no room
 * for the sums beside it. */
template <class Fmt, int N, int WARPS, int EPI, bool NORM, class Job>
__device__ __forceinline__ void gemv_block_loop(uint4 *smem, const uint4 *x, int kc, int nvb, int red_on_x,
                                                const gemv_norm_args &nm, Job job)
{
    constexpr int NM = EPI == GEMV_EPI_SWIGLU ? 2 : 1;
    constexpr int U = GEMV_LOADS / NM;
    static_assert(GEMV_SLICE % (4 * U) == 0, "a slice is whole batches");
    constexpr int XC = Fmt::XC;
    uint4 *xs = smem;
    double *part = (double *)(smem + N * kc * XC);
    float *red = red_on_x ? (float *)smem : (float *)(part + (NORM ? N * 32 : 0));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    int v = blockIdx.x;
    if (v >= nvb) return;
    gemv_job j = job(v);
    gemv_work<NM> k = gemv_work_of<Fmt, WARPS, NM, U>(j.w, j.w2, j.s, j.s2, kc, j.out_dim, j.kw, j.blk, warp, g);
    uint4 wv[NM][U];
    gemv_first_batch<NM, U>(wv, k, q);
    gemv_stage_x<N, WARPS, NORM>(xs, part, nm, x, kc * XC);
    for (;;) {
        float acc[NM][4], bacc[NM][4];
        gemv_stream<Fmt, N, NM, U>(acc, bacc, wv, k, xs, kc, g, q);
        const int vn = v + (int)gridDim.x;
        gemv_job jn = j;
        gemv_work<NM> kn = k;
        if (vn < nvb) { /* block-uniform */
            jn = job(vn);
            kn = gemv_work_of<Fmt, WARPS, NM, U>(jn.w, jn.w2, jn.s, jn.s2, kc, jn.out_dim, jn.kw, jn.blk, warp, g);
            gemv_first_batch<NM, U>(wv, kn, q);
        }
        gemv_block_end<Fmt, N, WARPS, EPI, NM>(red, j.y, j.y_bf16, j.accumulate, j.s, j.s2, j.out_dim, j.kw, acc,
                                              bacc, k.sb, k.kb, k.ke, k.row0, warp, lane, k.kp, g, q);
        if (vn >= nvb) return;
        v = vn, j = jn, k = kn;
    }
}

/* One product of a multi-product launch. */
struct gemv_multi_entry {
    void *y;
    const uint4 *w;     /* [out_dim, in] bf16, or E4M3 codes (gemv_fp8.cu) */
    const float *s;     /* E4M3: [out_dim] per-row scales; NULL for bf16 */
    int out_dim, y_bf16, kw;
    int rows;           /* output rows per block (host: the grid and the order) */
};

struct gemv_multi_table {
    gemv_multi_entry e[FRT_CUDA_GEMV_MULTI_MAX];
    int begin[FRT_CUDA_GEMV_MULTI_MAX]; /* first block of each entry; begin[0] = 0 */
    int count;
};

/* Block v's entry of the table and its index among that entry's blocks
 * (block-uniform; static indices only: a dynamic one would copy the table
 * to local memory). */
__device__ __forceinline__ gemv_multi_entry gemv_multi_find(const gemv_multi_table &tab, int v, int *blk)
{
    gemv_multi_entry m = tab.e[0];
    int b0 = 0;
#pragma unroll
    for (int i = 1; i < FRT_CUDA_GEMV_MULTI_MAX; i++)
        if (i < tab.count && v >= tab.begin[i]) {
            m = tab.e[i];
            b0 = tab.begin[i];
        }
    *blk = v - b0;
    return m;
}

/* The input of a fused launcher: norm NULL: x [n, in_dim] bf16 read (NULL,
 * n outside [1, FRT_CUDA_GEMV_MAX_N], in_dim not a positive multiple of 8,
 * x not 16-byte aligned: FRT_ERR_INVALID_ARGUMENT); else x =
 * bf16(rmsnorm(norm->x, norm->w)), *na its kernel arguments (the launch
 * shape of rmsnorm.cu for in_dim), norm->x / norm->w NULL or misaligned:
 * FRT_ERR_INVALID_ARGUMENT. */
int gemv_input_check(const char *what, const uint16_t *x, const frt_cuda_gemv_norm *norm, int n, int in_dim,
                     gemv_norm_args *na);

/* Entry i of a multi-product launch: y and w non-NULL, y_dtype valid,
 * out_dim >= 1, w 16-byte aligned, y aligned for its dtype, y not aliasing
 * w, x or the norm's inputs; else FRT_ERR_INVALID_ARGUMENT. */
int gemv_entry_check(const char *what, int i, const void *y, frt_cuda_dtype y_dtype, const void *w, int out_dim,
                     const void *x, const frt_cuda_gemv_norm *norm);

/* The table of n_entries entries (each with its kw and rows set): ordered
 * by rows per block, largest first (stable: the long blocks start first,
 * the short ones fill the tail), begin[] their prefix sums; *total the
 * grid. FRT_ERR_INVALID_ARGUMENT for a grid past 2^31 - 1 blocks. */
int gemv_multi_layout(const char *what, const gemv_multi_entry *ent, int n_entries, gemv_multi_table *tab,
                      long *total);

/* Makes smem bytes of dynamic shared memory available to fn (beyond 48 KiB:
 * up to the device's opt-in limit, at most 227 KiB; FRT_ERR_INVALID_ARGUMENT
 * past it, FRT_ERR_BACKEND when the device cannot be queried). */
int gemv_smem_ready(const char *what, const void *fn, size_t smem);

/* How a launch of fn over nvb blocks of work runs (gemv_layout): */
struct gemv_launch {
    unsigned grid; /* blocks: the resident blocks (at most nvb) when persistent, else nvb */
    size_t smem;   /* dynamic shared memory */
    int red_on_x;  /* 1: one block of work a block, the cross-warp sums over x (gemv_block_loop) */
};

/* The launch of a persistent kernel fn (threads a block; gemv_block_loop)
 * over nvb blocks of work: persistent when loop_smem (x, the norm's sums
 * and the cross-warp sums side by side) fits the device's opt-in limit,
 * the grid then SMs x the blocks of fn an SM holds at loop_smem, at most
 * nvb and the cap of frt_cuda_gemv_set_max_grid; else one block of work a
 * block at block_smem (the sums over x). fn's shared-memory limit is
 * raised by gemv_smem_ready (its errors; block_smem past 227 KiB is
 * FRT_ERR_INVALID_ARGUMENT before the device is queried). The bits do not
 * depend on the grid (gemv.cu). */
int gemv_layout(const char *what, const void *fn, int threads, size_t loop_smem, size_t block_smem, long nvb,
                gemv_launch *l);

#endif /* FRT_KERNELS_CUDA_GEMV_BLOCK_H */
