/*
 * kernels/cuda/attention.cu - causal GQA attention over the bf16 (or FP8
 * E4M3) KV cache:
 * the prefill form (one pass over the keys) and flash-decoding (the keys cut
 * into splits, per-split partials, then a combine kernel).
 * Math: transformers 5.x modeling_qwen3_5.py, eager_attention_forward with
 * the causal mask, softmax in fp32; computed as the CPU twin
 * frt_cpu_attention does, with an online softmax (running max m, running sum
 * l, the partial output rescaled by exp(m_old - m_new)), over tiles of 32 keys
 * instead of 128.
 *
 * Prefill form (attn_kernel, split_len == 0; also the split form of head_dim
 * other than 64, 128, 256 or of caches not 16-byte aligned). A block has 4
 * warps; warp w takes the (token, head) pair p = 4 * blockIdx.x + w,
 * enumerated as p = t * group + g over the heads h = kvh * group + g that
 * share KV head kvh = blockIdx.y, so a block's warps share every K/V tile it
 * stages in shared memory. blockIdx.z is the split. For a tile of 32 keys,
 * lane j scores key j0 + j against the warp's query (K rows padded by one
 * word: conflict-free), the warp max and sum come from butterflies, and each
 * lane accumulates head_dim / 32 output dims (V read row by row). The valid
 * token count n and the start position are read from device memory: token t
 * sees cache rows 0 .. min(start + t, max_seq - 1); warps past n and tiles
 * past the last key do nothing, so one captured launch serves every position.
 *
 * Flash-decoding (attn_decode_tc_kernel, split_len > 0, head_dim 64/128/256,
 * 16-byte aligned caches) on tensor cores: bf16 mma.sync m16n8k16 with fp32
 * accumulation, the fragment layout, ldmatrix addressing and XOR swizzle of
 * flash_attention.cu (FlashAttention-2, Dao 2023), at fp32 accuracy:
 *   - The query pairs (token, head) of one KV head are cut into chunks of
 *     qb <= 4 (blockIdx.x; qb = the pairs, spread evenly over
 *     ceil(pairs / 4) chunks: the 9B's group of 4 is one chunk, the 27B's 6
 *     two of 3). Each fp32 query is split into three bf16 terms,
 *     q = hi + mid + lo exactly (hi = bf16(q), mid = bf16(q - hi),
 *     lo = q - hi - mid, which has at most 8 significant bits), stored as
 *     rows qi, qi + 4 and qi + 8 of the 16-row A operand (rows 12-15 zero).
 *     bf16 x bf16 products are exact in fp32, so the three partial scores,
 *     summed (hi + lo) + mid, are the fp32 dot product up to the fp32
 *     rounding of the accumulation: the rows the group of 4 leaves unused in
 *     the m16 tile carry the extra precision at no extra mma. The softmax
 *     weights p (fp32) enter P.V the same way (rows hi / mid / lo, summed
 *     when the partial is written), so nothing is rounded to bf16 except
 *     exactly. The accumulator layout puts hi and lo of a pair in one lane
 *     (rows gid, gid + 8) and mid in lane ^ 16: one shuffle per score.
 *   - Keys: tiles of 32 keys (K and V, rows of head_dim bf16, 16-byte chunks
 *     XOR-swizzled) stream through a cp.async pipeline of 5 stages (3 at
 *     head_dim 256, where 5 leave no room for two blocks an SM). Per tile,
 *     warp w computes the scores of keys 8w .. 8w + 7 (16 k-steps at
 *     head_dim 256, two accumulator chains) and writes them, scaled by
 *     scale * log2(e) and masked, to shared memory; after a barrier every
 *     warp reads all 32 scores of its pairs and runs the same online softmax
 *     (m, l identical in the 4 warps), then P.V for its quarter of the
 *     output dims (V fragments by ldmatrix.trans). Two barriers per tile.
 *   - Splits: the keys are cut into splits of split_len keys (the launch
 *     argument: the partition, hence the bits, never depends on the grid or
 *     on the position). blockIdx.z = b of B (B from the SM count: one wave
 *     of resident blocks) takes the contiguous range of splits
 *     [b ns / B, (b + 1) ns / B) of the ns splits that hold keys of its
 *     chunk (ns from the dynamic position), streaming its tiles through one
 *     pipeline; at the last tile of each split it writes the split's partial
 *     and starts the next from m = -inf, l = 0, o = 0. A split's partial is
 *     computed the same way whichever block takes it, so the result depends
 *     on split_len only, and blocks past the busy ones exit at once (the
 *     grid no longer grows with max_seq).
 *
 * Split partials: the (t, h) of split s is written to the workspace
 * [n_splits, max_n, n_heads, hd + 2] (o unnormalised, m, l; m in the log2
 * domain for the tensor-core kernel, natural for attn_kernel) iff split s
 * holds a key of t (s * split_len < kend(t)); the combine kernel (one block
 * per (token, head, 32 dims), 8 warps) reads exactly those splits:
 *   M = max m_s, L = sum l_s w_s, out = sum o_s w_s / L, w_s = exp(m_s - M)
 * (exp2 for log2-domain partials), L as a block sum in a fixed tree, each
 * output dim as 8 partial sums over the splits s mod 8 (one per warp) added
 * in warp order.
 * FP8 E4M3 caches (frt_cuda_attention_fp8, frt_cuda_attention_batch_fp8,
 * docs/fp8.md): the flash-decoding form takes the same tensor-core kernel
 * instantiated for kv_fp8 (attn_decode_tc_kernel<HD, kv_fp8>): cp.async
 * stages the tiles as codes (one byte an element, half the bytes), and
 * after each tile lands the block widens it to bf16 (exact: every E4M3
 * value is a bf16 value) into one swizzled (K, V) pair of bf16 tiles that
 * the unchanged mma code reads (one more barrier a tile). The per-KV-head
 * scales enter where they are exact algebra: the scores are
 * (q . k_code) * (scale log2(e) s_k) and a split's partial output
 * (P . v_code) * s_v. The prefill form and other head sizes take
 * attn_kernel<DPL, kv_fp8>: each key and value dequantized when it is
 * used, decode(code) * scale[KV head] in f32.
 *
 * Deterministic: no atomics, fixed orders. Tested in tests/test_cuda_kernels.c,
 * tests/test_cuda_decode.c, tests/test_cuda_attn_decode.c and (FP8)
 * tests/test_cuda_fp8_kv.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/mma_util.h"

#include <math.h>
#include <string.h>

#define ATT_WARPS 4
#define ATT_TILE 32

struct attn_args {
    void *out;
    int out_dt;
    const void *q;
    int q_dt;
    const void *kc, *vc; /* the caches: bf16, or E4M3 codes (ksc != NULL) */
    const int32_t *d_start, *d_n;
    float *part; /* split partials [n_splits, max_n, n_heads, hd + 2], or NULL (one pass) */
    int max_n, max_seq, n_heads, n_kv, group, split_len;
    float scale;
    int qb;    /* tensor-core decode: query pairs per chunk (1..4) */
    float sl2; /* tensor-core decode: scale * log2(e) */
    int hd;    /* head_dim */
    /* frt_cuda_attention_batch: nb > 0 branches of one query token each,
     * each with its own cache and position (device tables [nb]); q, out and
     * part of branch b lie b * (one branch's size) further. nb = 0: one
     * sequence, the fields above. */
    int nb;
    const void *const *kcs, *const *vcs;
    const int32_t *const *starts;
    /* The shared prefix of a fork (NULL: none): branch b reads its cache
     * rows below shared[b] from branch 0's caches, which hold the same bytes
     * there (the caller's contract). attn_branch sets kc0 / vc0 and n_shared
     * for the branch (n_shared 0: every row from its own cache). */
    const int32_t *shared;
    const void *kc0, *vc0;
    int n_shared;
    /* An E4M3 cache (frt_cuda_attention_fp8, frt_cuda_attention_batch_fp8):
     * the per-KV-head scales [n_kv] (device); NULL for a bf16 cache. */
    const float *ksc, *vsc;
};

/* How attn_kernel reads a cache element type (T; T2 two adjacent elements):
 * the cache pointers, the K row padding in shared memory (one 32-bit word:
 * conflict-free score reads), and the element value in f32. bf16 values are
 * exact; an E4M3 code is decoded and multiplied by its KV head's scale
 * (fp8_util.h: the bits of frt_fp8_dequantize_rows), so the attention sees
 * exactly the CPU's dequantized cache. */
struct kv_bf16 {
    typedef __nv_bfloat16 T;
    typedef __nv_bfloat162 T2;
    static constexpr int PAD = 2;
    static constexpr bool FP8 = false;
    static __device__ __forceinline__ const T *kc(const attn_args &a) { return (const T *)a.kc; }
    static __device__ __forceinline__ const T *vc(const attn_args &a) { return (const T *)a.vc; }
    static __device__ __forceinline__ float kscale(const attn_args &, int) { return 1.0f; }
    static __device__ __forceinline__ float vscale(const attn_args &, int) { return 1.0f; }
    static __device__ __forceinline__ T2 zero2() { return __floats2bfloat162_rn(0.0f, 0.0f); }
    static __device__ __forceinline__ float2 f2(T2 x, float) { return __bfloat1622float2(x); }
    static __device__ __forceinline__ float f1(T x, float) { return __bfloat162float(x); }
};

struct kv_fp8 {
    typedef uint8_t T;
    typedef uint16_t T2;
    static constexpr int PAD = 4;
    static constexpr bool FP8 = true;
    static __device__ __forceinline__ const T *kc(const attn_args &a) { return (const T *)a.kc; }
    static __device__ __forceinline__ const T *vc(const attn_args &a) { return (const T *)a.vc; }
    static __device__ __forceinline__ float kscale(const attn_args &a, int kvh) { return a.ksc[kvh]; }
    static __device__ __forceinline__ float vscale(const attn_args &a, int kvh) { return a.vsc[kvh]; }
    static __device__ __forceinline__ T2 zero2() { return 0; }
    static __device__ __forceinline__ float2 f2(T2 x, float s) { return frt_fp8x2_decode_scaled(x, s); }
    static __device__ __forceinline__ float f1(T x, float s) { return frt_fp8_decode_scaled(x, s); }
};

static __host__ __device__ __forceinline__ int n_splits_of(int max_seq, int split_len)
{
    return (int)(((long long)max_seq + split_len - 1) / split_len);
}

/* The arguments of branch b of a batched launch: its cache, position,
 * query, output and split partials (a0 itself when a0.nb == 0). */
__device__ __forceinline__ attn_args attn_branch(const attn_args &a0, int b)
{
    attn_args a = a0;
    if (a0.nb == 0) return a;
    const size_t row = (size_t)a0.n_heads * a0.hd; /* one branch's query token */
    a.kc = a0.kcs[b];
    a.vc = a0.vcs[b];
    a.kc0 = a0.kcs[0];
    a.vc0 = a0.vcs[0];
    a.n_shared = a0.shared ? a0.shared[b] : 0;
    a.d_start = a0.starts[b];
    a.q = (const char *)a0.q + (size_t)b * row * (a0.q_dt == FRT_CUDA_F32 ? 4 : 2);
    a.out = (char *)a0.out + (size_t)b * row * (a0.out_dt == FRT_CUDA_F32 ? 4 : 2);
    a.part = a0.part + (size_t)b * n_splits_of(a0.max_seq, a0.split_len) * a0.n_heads * (a0.hd + 2);
    return a;
}

template <int DPL, typename KV> __global__ __launch_bounds__(ATT_WARPS * 32) void attn_kernel(const attn_args a)
{
    typedef typename KV::T T;
    typedef typename KV::T2 T2;
    constexpr int HD = 32 * DPL;
    constexpr int KST = HD + KV::PAD; /* padded K row, in cache elements (one extra word) */
    __shared__ __align__(16) T Ks[ATT_TILE * KST];
    __shared__ __align__(16) T Vs[ATT_TILE * HD];
    __shared__ float Qs[ATT_WARPS][HD];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kvh = blockIdx.y;
    const int p0 = blockIdx.x * ATT_WARPS;
    if (p0 / a.group >= n) return; /* uniform: no valid pair in this block */
    const int t_last = min((p0 + ATT_WARPS - 1) / a.group, n - 1);
    const int s_lo = blockIdx.z * a.split_len;
    const int s_hi = s_lo + a.split_len;
    const int b_hi = min(min(start + t_last + 1, a.max_seq), s_hi); /* block's keys end */
    if (b_hi <= s_lo) return; /* uniform: no key of this block in this split */

    const int pair = p0 + warp;
    const int t = pair / a.group;
    const int h = kvh * a.group + pair % a.group;
    const bool active = t < n;
    const int kend = active ? min(start + t + 1, a.max_seq) : 0;
    const int w_hi = min(kend, s_hi); /* this warp's keys: [s_lo, w_hi) */

    if (active)
        for (int d = lane; d < HD; d += 32)
            Qs[warp][d] = frt_ld(a.q, a.q_dt, ((size_t)t * a.n_heads + h) * HD + d);
    const float ks = KV::kscale(a, kvh), vs = KV::vscale(a, kvh); /* 1 for bf16 (unused) */

    float o[DPL];
#pragma unroll
    for (int mm = 0; mm < DPL; mm++) o[mm] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int j0 = s_lo; j0 < b_hi; j0 += ATT_TILE) {
        __syncthreads(); /* the previous tile is consumed; Qs is written */
        const int rows = min(ATT_TILE, b_hi - j0);
        for (int idx = threadIdx.x; idx < ATT_TILE * (HD / 2); idx += blockDim.x) {
            const int r = idx / (HD / 2), c2 = idx % (HD / 2);
            T2 k2 = KV::zero2(), v2 = k2;
            if (r < rows) {
                const size_t g = ((size_t)(j0 + r) * a.n_kv + kvh) * HD + 2 * c2;
                k2 = *(const T2 *)(KV::kc(a) + g);
                v2 = *(const T2 *)(KV::vc(a) + g);
            }
            *(T2 *)(Ks + r * KST + 2 * c2) = k2;
            *(T2 *)(Vs + r * HD + 2 * c2) = v2;
        }
        __syncthreads();
        if (j0 < w_hi) { /* warp-uniform */
            const int j = j0 + lane;
            float s = -INFINITY;
            if (j < w_hi) {
                const T *kr = Ks + lane * KST;
                const float *qw = Qs[warp];
                float acc = 0.0f;
#pragma unroll 8
                for (int d = 0; d < HD; d += 2) {
                    const float2 kf = KV::f2(*(const T2 *)(kr + d), ks);
                    acc += qw[d] * kf.x;
                    acc += qw[d + 1] * kf.y;
                }
                s = acc * a.scale;
            }
            const float mt = frt_warp_max(s); /* finite: key j0 < w_hi is lane 0's */
            const float mn = fmaxf(m, mt);
            const float corr = expf(m - mn); /* 0 on the first tile (m = -inf) */
            const float p = j < w_hi ? expf(s - mn) : 0.0f;
            l = l * corr + frt_warp_sum(p);
#pragma unroll
            for (int mm = 0; mm < DPL; mm++) o[mm] *= corr;
            const int cnt = min(ATT_TILE, w_hi - j0);
            for (int jj = 0; jj < cnt; jj++) {
                const float pj = __shfl_sync(0xffffffffu, p, jj);
                const T *vr = Vs + jj * HD;
#pragma unroll
                for (int mm = 0; mm < DPL; mm++) o[mm] += pj * KV::f1(vr[lane + 32 * mm], vs);
            }
            m = mn;
        }
    }
    if (!active || w_hi <= s_lo) return;
    if (!a.part) {
        const float inv = 1.0f / l;
        const size_t ob = ((size_t)t * a.n_heads + h) * HD;
#pragma unroll
        for (int mm = 0; mm < DPL; mm++) frt_st(a.out, a.out_dt, ob + lane + 32 * mm, o[mm] * inv);
    } else {
        float *pp = a.part + (((size_t)blockIdx.z * a.max_n + t) * a.n_heads + h) * (HD + 2);
#pragma unroll
        for (int mm = 0; mm < DPL; mm++) pp[lane + 32 * mm] = o[mm];
        if (lane == 0) {
            pp[HD] = m;
            pp[HD + 1] = l;
        }
    }
}

/* ---- flash-decoding on tensor cores ------------------------------------- */

#define TC_WARPS 4
#define TC_THREADS (32 * TC_WARPS)
#define TC_TILE 32             /* keys per pipeline stage: 8 per warp in Q K^T */
#define TC_STAGES 3            /* the pipeline's stages where 5 leave no room for 2 blocks an SM */
#define TC_QROWS 16            /* A rows: hi 0-3, mid 4-7, lo 8-11 of 4 pairs, 12-15 zero */
#define TC_SROW (TC_TILE + 8)  /* floats per score row in shared memory (padded) */

/* Shared memory of attn_decode_tc_kernel<HD, KV, NST>: NST x (K tile, V
 * tile) as the cache holds them (bf16 rows, swizzled; or E4M3 rows of
 * codes, plain), for an E4M3 cache one (K, V) pair of bf16 tiles the codes
 * are widened into (W_OFF), the 16 query rows (bf16), the scores of a tile
 * [4 pairs][TC_SROW] f32. */
template <int HD, typename KV, int NST = TC_STAGES> struct tc_cfg {
    static constexpr int CH = HD / 8;                /* 16-byte bf16 chunks per row */
    static constexpr int ROWB = HD * 2;              /* bytes per bf16 smem row */
    static constexpr int TBYTES = TC_TILE * ROWB;    /* one bf16 K or V tile */
    static constexpr int LROWB = KV::FP8 ? HD : ROWB; /* bytes per staged cache row */
    static constexpr int LCH = LROWB / 16;           /* 16-byte cp.async chunks per staged row */
    static constexpr int STAGE = 2 * TC_TILE * LROWB;
    static constexpr int W_OFF = NST * STAGE;        /* the widened pair (E4M3 only) */
    static constexpr int Q_OFF = W_OFF + (KV::FP8 ? 2 * TBYTES : 0);
    static constexpr int S_OFF = Q_OFF + TC_QROWS * ROWB;
    static constexpr int SMEM = S_OFF + 4 * TC_SROW * 4;
    static constexpr int KS = HD / 16;               /* k-steps of Q K^T */
    static constexpr int DN = HD / 32;               /* 8-dim n-tiles of a warp's HD / 4 dims */
    static constexpr int RSTEP = TC_THREADS / CH;    /* bf16 tile rows per pass (widening) */
    static constexpr int LRSTEP = TC_THREADS / LCH;  /* staged rows per cp.async pass */
    static_assert(KS % 2 == 0 && DN % 2 == 0 && TC_TILE % RSTEP == 0 && TC_TILE % LRSTEP == 0,
                  "head_dim 64, 128 or 256");
};

/* x = h + m + l exactly for finite x (l has at most 8 significant bits, so
 * bf16(l) == l; subnormal tails may round): the three bf16 terms as floats. */
__device__ __forceinline__ void tc_split3(float x, float &h, float &m, float &l)
{
    h = __bfloat162float(__float2bfloat16_rn(x));
    const float r = x - h; /* exact */
    m = __bfloat162float(__float2bfloat16_rn(r));
    l = r - m; /* exact */
}

/* The A fragment registers of one pair of columns (c, c + 1) of P: rows
 * gid (hi on lanes gid < 4, mid on gid >= 4) and gid + 8 (lo, or zero). */
__device__ __forceinline__ void tc_p_regs(float p0, float p1, bool upper, uint32_t &top,
                                          uint32_t &bot)
{
    float h0, m0, l0, h1, m1, l1;
    tc_split3(p0, h0, m0, l0);
    tc_split3(p1, h1, m1, l1);
    top = upper ? frt_pack_bf16(m0, m1) : frt_pack_bf16(h0, h1);
    bot = upper ? 0u : frt_pack_bf16(l0, l1);
}

/* Fragment coordinates (lane = 4 * gid + tig): the accumulator of an m16n8
 * mma holds rows gid and gid + 8, columns 2 tig and 2 tig + 1. Lane gid < 4
 * holds the hi (row gid) and lo (row gid + 8) terms of pair gid, lane
 * gid + 4 its mid term (row gid + 4; row gid + 12 is zero). */
template <int HD, typename KV, int NST = TC_STAGES>
__global__ void __launch_bounds__(TC_THREADS, 2) attn_decode_tc_kernel(const attn_args a0)
{
    /* Launched with PDL: q and the cache rows at and past the position come
     * from the kernels before (the prep), so the block waits for them before
     * it reads q or stages a tile holding such a row. The position, the
     * counts, the branch tables and the cache rows below the position are
     * final before the step's first kernel (written by the host or by the
     * launches of earlier steps, which complete in stream order): the tiles
     * below the position are put in flight before the wait. */
    /* batched: blockIdx.y = branch * n_kv + KV head */
    const attn_args a = attn_branch(a0, a0.nb ? (int)blockIdx.y / a0.n_kv : 0);
    using C = tc_cfg<HD, KV, NST>;
    constexpr int ROWB = C::ROWB, CH = C::CH, KS = C::KS, DN = C::DN, RSTEP = C::RSTEP;
    constexpr int LROWB = C::LROWB, LRSTEP = C::LRSTEP;
    extern __shared__ __align__(128) unsigned char tsm[];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int G = a.group, kvh = a0.nb ? (int)blockIdx.y % a0.n_kv : (int)blockIdx.y;
    const int p0 = blockIdx.x * a.qb;
    const int npairs = n * G;
    if (p0 >= npairs) { /* uniform: no valid pair in this chunk */
        frt_pdl_wait();  /* every block waits before it exits (docs/kernels-cuda.md) */
        return;
    }
    const int t_last = min((p0 + a.qb - 1) / G, n - 1);
    const int b_hi = min(start + t_last + 1, a.max_seq); /* the chunk's keys end (>= 1) */
    const int L = a.split_len;
    const int ns = (b_hi + L - 1) / L; /* splits holding keys of the chunk */
    const int s_begin = (int)((long long)blockIdx.z * ns / gridDim.z);
    const int s_end = (int)((long long)(blockIdx.z + 1) * ns / gridDim.z);
    if (s_begin >= s_end) { /* uniform: no split for this block */
        frt_pdl_wait();
        return;
    }
    const int tps = (L + TC_TILE - 1) / TC_TILE; /* tiles per full split */
    const int ntiles = (s_end - 1 - s_begin) * tps +
                       (min(L, b_hi - (s_end - 1) * L) + TC_TILE - 1) / TC_TILE;

    const uint32_t sb = frt_smem_addr(tsm);
    float *const S = reinterpret_cast<float *>(tsm + C::S_OFF); /* [4][TC_SROW] */

    /* K/V tile k (of the block's sequence) -> stage k % NST (bf16
     * rows swizzled, E4M3 rows plain); rows past the split's or the chunk's
     * last key are zero-filled (finite, never read from the cache). Thread i
     * copies 16-byte chunk i % LCH of rows i / LCH + LRSTEP r. */
    const int lr = threadIdx.x / C::LCH, lc = threadIdx.x % C::LCH;
    const size_t crow = (size_t)a.n_kv * LROWB; /* bytes per cache row */
    const size_t hofs = (size_t)kvh * LROWB + lc * 16;
    const char *kb = (const char *)a.kc + hofs, *vb = (const char *)a.vc + hofs;
    /* Rows below n_shared from branch 0's caches: the same bytes, read once
     * from HBM for every branch of the fork (the blocks of the branches run
     * in one wave, so the other branches' reads of a row hit L2). */
    const int n_sh = a0.nb ? a.n_shared : 0;
    const char *kb0 = n_sh > 0 ? (const char *)a.kc0 + hofs : kb;
    const char *vb0 = n_sh > 0 ? (const char *)a.vc0 + hofs : vb;
    /* tile k's first key and its key count (the split's or the chunk's end) */
    auto tile_keys = [&](int k, int &j0, int &rows) {
        const int sq = k / tps, i = k - sq * tps;
        const int s = s_begin + sq;
        j0 = s * L + i * TC_TILE;
        rows = min(TC_TILE, min(s * L + L, b_hi) - j0);
    };
    auto load_tile = [&](int k) {
        int j0, rows;
        tile_keys(k, j0, rows);
        const uint32_t st = sb + (uint32_t)(k % NST) * C::STAGE;
#pragma unroll
        for (int r = 0; r < TC_TILE / LRSTEP; r++) {
            const int row = lr + r * LRSTEP;
            const bool ok = row < rows;
            const bool sh = j0 + row < n_sh;
            const size_t g = ok ? (size_t)(j0 + row) * crow : 0;
            const uint32_t off = KV::FP8 ? (uint32_t)(row * LROWB + lc * 16)
                                         : (uint32_t)(row * ROWB + ((lc ^ (row & 7)) << 4));
            frt_cp_async16(st + off, (sh ? kb0 : kb) + g, ok ? 16 : 0);
            frt_cp_async16(st + TC_TILE * LROWB + off, (sh ? vb0 : vb) + g, ok ? 16 : 0);
        }
    };
    /* E4M3: the codes of stage k % NST widened to bf16 (exact) into
     * the swizzled (K, V) pair at W_OFF; thread i converts bf16 chunk
     * i % CH (8 codes) of rows i / CH + RSTEP r. Zero codes stay zeros. */
    auto widen_tile = [&](int k) {
        const unsigned char *src = tsm + (k % NST) * C::STAGE;
        const int wr = threadIdx.x / CH, wc = threadIdx.x % CH;
#pragma unroll
        for (int r = 0; r < TC_TILE / RSTEP; r++) {
            const int row = wr + r * RSTEP;
#pragma unroll
            for (int kv = 0; kv < 2; kv++) {
                const uint2 q = *reinterpret_cast<const uint2 *>(src + kv * TC_TILE * LROWB + row * LROWB + wc * 8);
                *reinterpret_cast<uint4 *>(tsm + C::W_OFF + kv * C::TBYTES + row * ROWB + ((wc ^ (row & 7)) << 4)) =
                    frt_fp8x8_to_bf16x8(q);
            }
        }
    };
    /* tile k's keys end below the position: its rows are final before the
     * wait */
    auto tile_final = [&](int k) {
        int j0, rows;
        tile_keys(k, j0, rows);
        return j0 + rows <= start;
    };
    int pre = 0; /* the prologue's tiles staged before the wait (a prefix) */
#pragma unroll
    for (int st = 0; st < NST - 1; st++) {
        if (st < ntiles && st == pre && tile_final(st)) {
            load_tile(st);
            frt_cp_async_commit();
            pre++;
        }
    }
    frt_pdl_wait();
#pragma unroll
    for (int st = 0; st < NST - 1; st++) {
        if (st < pre) continue;
        if (st < ntiles) load_tile(st);
        frt_cp_async_commit();
    }

    /* The queries, while the first tiles are in flight: pair qi of the chunk
     * as rows qi (hi), qi + 4 (mid), qi + 8 (lo); row qi + 12 and the rows
     * of pairs past the chunk or past n are zeros. */
    for (int idx = threadIdx.x; idx < 4 * CH; idx += TC_THREADS) {
        const int qi = idx / CH, c = idx % CH;
        const int p = p0 + qi;
        float x[8];
        if (qi < a.qb && p < npairs) {
            const size_t off = ((size_t)(p / G) * a.n_heads + (size_t)kvh * G + p % G) * HD + c * 8;
#pragma unroll
            for (int e = 0; e < 8; e++) x[e] = frt_ld(a.q, a.q_dt, off + e);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) x[e] = 0.0f;
        }
        uint32_t hw[4], mw[4], lw[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float h0, m0, l0, h1, m1, l1;
            tc_split3(x[2 * e], h0, m0, l0);
            tc_split3(x[2 * e + 1], h1, m1, l1);
            hw[e] = frt_pack_bf16(h0, h1);
            mw[e] = frt_pack_bf16(m0, m1);
            lw[e] = frt_pack_bf16(l0, l1);
        }
        unsigned char *qs = tsm + C::Q_OFF;
        *reinterpret_cast<uint4 *>(qs + qi * ROWB + ((c ^ qi) << 4)) =
            make_uint4(hw[0], hw[1], hw[2], hw[3]);
        *reinterpret_cast<uint4 *>(qs + (qi + 4) * ROWB + ((c ^ (qi + 4)) << 4)) =
            make_uint4(mw[0], mw[1], mw[2], mw[3]);
        *reinterpret_cast<uint4 *>(qs + (qi + 8) * ROWB + ((c ^ qi) << 4)) =
            make_uint4(lw[0], lw[1], lw[2], lw[3]);
        *reinterpret_cast<uint4 *>(qs + (qi + 12) * ROWB + ((c ^ (qi + 4)) << 4)) =
            make_uint4(0u, 0u, 0u, 0u);
    }
    __syncthreads();

    /* Q A fragments in registers (rows lane & 15, chunk 2 kk + lane / 16). */
    const int sw = lane & 7; /* row & 7 of every ldmatrix row this lane addresses */
    uint32_t qf[KS][4];
    {
        const uint32_t qrow = sb + C::Q_OFF + (uint32_t)((lane & 15) * ROWB);
        const int hi = lane >> 4;
#pragma unroll
        for (int kk = 0; kk < KS; kk++)
            frt_ldsm_x4(qf[kk], qrow + (uint32_t)(((2 * kk + hi) ^ sw) << 4));
    }

    /* ldmatrix offsets within a stage.
     *   K (B of Q K^T, x4 = 8 keys x 32 dims: k-steps 2i, 2i + 1): key
     *     8 warp + sw, chunk 4i + lane / 8 (i & 1 here, i >> 1 as 128 bytes).
     *   V (B of P V, .trans x4 = 16 keys x 16 dims: n-tiles 2dp, 2dp + 1):
     *     key sw + 8 ((lane / 8) & 1), chunk DN warp + 2dp + lane / 16. */
    uint32_t koff[2], voff[DN / 2];
#pragma unroll
    for (int e = 0; e < 2; e++)
        koff[e] = (uint32_t)((warp * 8 + sw) * ROWB + (((4 * e + (lane >> 3)) ^ sw) << 4));
#pragma unroll
    for (int dp = 0; dp < DN / 2; dp++)
        voff[dp] = (uint32_t)(C::TBYTES + (sw + 8 * ((lane >> 3) & 1)) * ROWB +
                              (((DN * warp + 2 * dp + (lane >> 4)) ^ sw) << 4));

    /* This lane's pair (both halves of the warp hold the same pair gid & 3). */
    const int gid = lane >> 2, tig = lane & 3, pr = gid & 3;
    const bool upper = gid >= 4;
    const int pq = p0 + pr;
    const bool pvalid = pr < a.qb && pq < npairs;
    const int tq = pvalid ? pq / G : 0;
    const int kend = pvalid ? min(start + tq + 1, a.max_seq) : 0; /* keys [0, kend) */
    const size_t prow = (size_t)tq * a.n_heads + (size_t)kvh * G + (pvalid ? pq % G : 0);
    float *const srow = S + pr * TC_SROW;
    /* E4M3: scores (q . k_code) * (scale log2(e) * s_k), outputs
     * (P . v_code) * s_v (1 and 1 for bf16). */
    const float sl2 = a.sl2 * KV::kscale(a, kvh), vsc = KV::vscale(a, kvh);

    float o[DN][4];
#pragma unroll
    for (int j = 0; j < DN; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m = -INFINITY, l = 0.0f; /* log2 domain; equal in the 4 warps */

    for (int k = 0; k < ntiles; k++) {
        frt_cp_async_wait<NST - 2>();
        __syncthreads(); /* tile k landed for all; tile k - 1 and its scores are consumed */
        if (k + NST - 1 < ntiles) load_tile(k + NST - 1);
        frt_cp_async_commit();
        if constexpr (KV::FP8) {
            widen_tile(k); /* the pair's previous tile is consumed (the barrier above) */
            __syncthreads();
        }

        const int sq = k / tps, i = k - sq * tps;
        const int s = s_begin + sq;
        const int j0 = s * L + i * TC_TILE;
        const int lim = min(kend, s * L + L); /* this pair's keys in split s end */
        const uint32_t kst = sb + (KV::FP8 ? (uint32_t)C::W_OFF : (uint32_t)(k % NST) * C::STAGE);

        /* scores of keys 8 warp .. 8 warp + 7: two chains (even, odd k-steps) */
        {
            float acc[2][4];
#pragma unroll
            for (int e = 0; e < 4; e++) acc[0][e] = acc[1][e] = 0.0f;
#pragma unroll
            for (int ii = 0; ii < KS / 2; ii++) {
                uint32_t b[4];
                frt_ldsm_x4(b, kst + koff[ii & 1] + (uint32_t)((ii >> 1) * 128));
                frt_mma_bf16(acc[0], qf[2 * ii], b[0], b[1]);
                frt_mma_bf16(acc[1], qf[2 * ii + 1], b[2], b[3]);
            }
            /* (hi + lo) here, + mid from lane ^ 16: the same sum on both lanes */
            const float a0 = (acc[0][0] + acc[1][0]) + (acc[0][2] + acc[1][2]);
            const float a1 = (acc[0][1] + acc[1][1]) + (acc[0][3] + acc[1][3]);
            const float s0 = a0 + __shfl_xor_sync(0xffffffffu, a0, 16);
            const float s1 = a1 + __shfl_xor_sync(0xffffffffu, a1, 16);
            if (!upper) {
                const int jl = warp * 8 + 2 * tig;
                float2 v;
                v.x = j0 + jl < lim ? s0 * sl2 : -INFINITY;
                v.y = j0 + jl + 1 < lim ? s1 * sl2 : -INFINITY;
                *reinterpret_cast<float2 *>(srow + jl) = v;
            }
        }
        __syncthreads(); /* the tile's scores are complete */

        /* online softmax over the 32 scores of the pair (columns
         * 16 kk + 2 tig + {0, 1, 8, 9} in this lane), the same in every warp */
        float x[2][4];
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            const float2 u = *reinterpret_cast<const float2 *>(srow + 16 * kk + 2 * tig);
            const float2 w = *reinterpret_cast<const float2 *>(srow + 16 * kk + 8 + 2 * tig);
            x[kk][0] = u.x;
            x[kk][1] = u.y;
            x[kk][2] = w.x;
            x[kk][3] = w.y;
        }
        float mt = fmaxf(fmaxf(fmaxf(x[0][0], x[0][1]), fmaxf(x[0][2], x[0][3])),
                         fmaxf(fmaxf(x[1][0], x[1][1]), fmaxf(x[1][2], x[1][3])));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float mn = fmaxf(m, mt);
        /* no key seen yet (mn = -inf): subtract 0, so every exp2 gives 0, never NaN */
        const float mu = mn == -INFINITY ? 0.0f : mn;
        const float corr = exp2f(m - mu);
        float ps = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 2; kk++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                x[kk][e] = exp2f(x[kk][e] - mu);
                ps += x[kk][e];
            }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        ps += __shfl_xor_sync(0xffffffffu, ps, 2);
        l = l * corr + ps;
        m = mn;
#pragma unroll
        for (int j = 0; j < DN; j++) {
            o[j][0] *= corr;
            o[j][1] *= corr;
            o[j][2] *= corr;
            o[j][3] *= corr;
        }

        /* O += P V over the warp's dims: key k-steps kk = 0, 1 */
        const uint32_t vst = kst;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint32_t pf[4];
            tc_p_regs(x[kk][0], x[kk][1], upper, pf[0], pf[1]);
            tc_p_regs(x[kk][2], x[kk][3], upper, pf[2], pf[3]);
#pragma unroll
            for (int dp = 0; dp < DN / 2; dp++) {
                uint32_t b[4];
                frt_ldsm_x4_trans(b, vst + voff[dp] + (uint32_t)(kk * 16 * ROWB));
                frt_mma_bf16(o[2 * dp], pf, b[0], b[1]);
                frt_mma_bf16(o[2 * dp + 1], pf, b[2], b[3]);
            }
        }

        if (i == tps - 1 || k == ntiles - 1) { /* uniform: split s is done */
            const bool wr = !upper && pvalid && kend > s * L;
            float *pp = a.part + ((size_t)s * a.max_n * a.n_heads + prow) * (HD + 2);
#pragma unroll
            for (int j = 0; j < DN; j++) {
                float v0 = o[j][0] + o[j][2], v1 = o[j][1] + o[j][3]; /* hi + lo, or mid */
                v0 += __shfl_xor_sync(0xffffffffu, v0, 16);
                v1 += __shfl_xor_sync(0xffffffffu, v1, 16);
                if (wr) {
                    const int d = warp * (HD / 4) + 8 * j + 2 * tig;
                    pp[d] = v0 * vsc;
                    pp[d + 1] = v1 * vsc;
                }
                o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
            }
            if (wr && warp == 0 && tig == 0) {
                pp[HD] = m;
                pp[HD + 1] = l;
            }
            m = -INFINITY;
            l = 0.0f;
        }
    }
}

/* Merges the splits that hold keys of token t, head h, for 32 output dims
 * (blockIdx.y) with 8 warps: lane = dim, warp w sums the splits s = w mod 8;
 * M is a block max, L a block sum (fixed tree), the 8 warp sums are added in
 * warp order. exp2dom: the partials' m is in the log2 domain (tensor-core
 * kernel), else natural (attn_kernel). */
#define COMB_WARPS 8
#define COMB_THREADS (32 * COMB_WARPS)
#define COMB_CHUNK 1024 /* split weights staged in shared memory per round */

__global__ __launch_bounds__(COMB_THREADS) void attn_combine_kernel(const attn_args a0, int hd,
                                                                    int exp2dom)
{
    __shared__ float wsh[COMB_CHUNK];
    __shared__ float red[COMB_WARPS][32];
    __shared__ float smax[COMB_WARPS];
    /* the o_proj GEMV after it (launched with PDL) may start streaming its
     * weights now; it waits for this kernel before it reads the output */
    frt_pdl_trigger();
    frt_pdl_wait(); /* launched with PDL: the partials come from the kernel before */
    /* batched: blockIdx.x = (branch * max_n + t) * n_heads + h */
    const int per = a0.max_n * a0.n_heads;
    const attn_args a = attn_branch(a0, a0.nb ? (int)blockIdx.x / per : 0);
    const int th = a0.nb ? (int)blockIdx.x % per : (int)blockIdx.x;
    const int t = th / a.n_heads, h = th % a.n_heads;
    if (t >= frt_dyn_n(a.d_n, a.max_n)) return; /* uniform */
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kend = min(start + t + 1, a.max_seq);
    const int ns = (kend + a.split_len - 1) / a.split_len;
    const size_t stride = (size_t)a.max_n * a.n_heads * (hd + 2);
    const float *p0 = a.part + ((size_t)t * a.n_heads + h) * (hd + 2);
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;

    float M = -INFINITY;
    for (int s = tid; s < ns; s += COMB_THREADS) M = fmaxf(M, p0[(size_t)s * stride + hd]);
    M = frt_warp_max(M);
    if (lane == 0) smax[wid] = M;
    __syncthreads();
    M = smax[0];
#pragma unroll
    for (int w = 1; w < COMB_WARPS; w++) M = fmaxf(M, smax[w]);

    const int d = blockIdx.y * 32 + lane;
    float Lp = 0.0f, acc = 0.0f;
    for (int s0 = 0; s0 < ns; s0 += COMB_CHUNK) {
        const int cnt = min(COMB_CHUNK, ns - s0);
        __syncthreads(); /* the previous round's weights are consumed */
        for (int i = tid; i < cnt; i += COMB_THREADS) {
            const float *ps = p0 + (size_t)(s0 + i) * stride;
            const float w = exp2dom ? exp2f(ps[hd] - M) : expf(ps[hd] - M);
            wsh[i] = w;
            Lp += ps[hd + 1] * w;
        }
        __syncthreads();
        if (d < hd) {
#pragma unroll 8
            for (int i = wid; i < cnt; i += COMB_WARPS)
                acc += p0[(size_t)(s0 + i) * stride + d] * wsh[i];
        }
    }
    const float L = frt_block_sum(Lp);
    red[wid][lane] = acc;
    __syncthreads();
    if (wid == 0 && d < hd) {
        float O = red[0][lane];
#pragma unroll
        for (int w = 1; w < COMB_WARPS; w++) O += red[w][lane];
        frt_st(a.out, a.out_dt, ((size_t)t * a.n_heads + h) * hd + d, O / L);
    }
}

extern "C" size_t frt_cuda_attention_workspace_bytes(int max_n, int max_seq, int n_heads,
                                                     int head_dim, int split_len)
{
    if (split_len <= 0 || max_n <= 0 || max_seq <= 0 || n_heads <= 0 || head_dim <= 0) return 0;
    return (size_t)n_splits_of(max_seq, split_len) * max_n * n_heads * (head_dim + 2) *
           sizeof(float);
}

/* Launches attn_decode_tc_kernel<HD, KV>: grid (chunks, KV heads, B) with B
 * the blocks per (chunk, KV head) column that one wave of resident blocks
 * holds (SMs x blocks per SM / columns, at least 1, at most n_splits). */
template <int HD, typename KV, int NST>
static int decode_tc_launch_s(const attn_args &a, long long nchunks, int n_splits, cudaStream_t s)
{
    using C = tc_cfg<HD, KV, NST>;
    FRT_CUDA_TRY(cudaFuncSetAttribute(attn_decode_tc_kernel<HD, KV, NST>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    int dev = 0, sms = 0, per_sm = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attn_decode_tc_kernel<HD, KV, NST>,
                                                               TC_THREADS, C::SMEM));
    if (per_sm < 1)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda attention: the decode kernel (%d bytes of shared memory) does not "
                         "fit this device",
                         C::SMEM);
    const int branches = a.nb ? a.nb : 1;
    long long nb = (long long)sms * per_sm / (nchunks * a.n_kv * branches);
    if (nb < 1) nb = 1;
    if (nb > n_splits) nb = n_splits;
    dim3 grid((unsigned int)nchunks, (unsigned int)(a.n_kv * branches), (unsigned int)nb);
    FRT_CUDA_TRY(frt_pdl_launch((attn_decode_tc_kernel<HD, KV, NST>), grid, dim3(TC_THREADS), C::SMEM, s, a));
    FRT_LAUNCH_CHECK();
    return 0;
}

/* attn_decode_tc_kernel<HD, KV, 5> where two of its blocks fit an SM's
 * shared memory (head_dim 64 and 128; 256 keeps 3 stages): a block of the
 * 2k decode, one split of 128 keys (4 tiles), then has the whole split in
 * flight after its prologue instead of two tiles. The stage count does not
 * change the arithmetic (the same bits). H100, llama3.1-8b decode at 2k:
 * 3.845 / 3.839 -> 3.762 / 3.752 ms (E4M3 cache), 5.776 -> 5.687 (bf16),
 * 8k and 32k unchanged (docs/PERF.md, thirtieth session). */
template <int HD, typename KV>
static int decode_tc_launch(const attn_args &a, long long nchunks, int n_splits, cudaStream_t s)
{
    using C5 = tc_cfg<HD, KV, 5>;
    int dev = 0, per_sm = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    if ((size_t)per_sm >= 2 * ((size_t)C5::SMEM + 1024)) /* 1 KiB a block the runtime reserves */
        return decode_tc_launch_s<HD, KV, 5>(a, nchunks, n_splits, s);
    return decode_tc_launch_s<HD, KV, TC_STAGES>(a, nchunks, n_splits, s);
}

/* The tensor-core decode kernel over max_n * group pairs a KV head (a.hd 64,
 * 128 or 256), in chunks of at most 4 pairs of a KV head, the pairs spread
 * evenly (a.qb set here). */
template <typename KV> static int decode_tc(attn_args &a, cudaStream_t s)
{
    const long long pairs = (long long)a.max_n * a.group;
    const long long nchunks = (pairs + 3) / 4;
    const int n_splits = n_splits_of(a.max_seq, a.split_len);
    a.qb = (int)((pairs + nchunks - 1) / nchunks);
    switch (a.hd) {
    case 64: return decode_tc_launch<64, KV>(a, nchunks, n_splits, s);
    case 128: return decode_tc_launch<128, KV>(a, nchunks, n_splits, s);
    default: return decode_tc_launch<256, KV>(a, nchunks, n_splits, s);
    }
}

/* Whether the split form takes the tensor-core decode kernel: head_dim 64,
 * 128 or 256 and 16-byte aligned caches. */
static bool decode_tc_ok(const attn_args &a, const void *kc, const void *vc)
{
    return a.part && (a.hd == 64 || a.hd == 128 || a.hd == 256) && (uintptr_t)kc % 16 == 0 &&
           (uintptr_t)vc % 16 == 0;
}

/* The argument checks shared by frt_cuda_attention and
 * frt_cuda_attention_fp8 (the caches are checked by the caller). */
static int attn_check(const void *out, frt_cuda_dtype out_dtype, const void *q, frt_cuda_dtype q_dtype,
                      const int32_t *d_start, int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                      int split_len, const void *workspace, size_t workspace_bytes)
{
    FRT_ARG(out && q && d_start, "cuda attention: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(q_dtype), "cuda attention: bad dtype");
    FRT_ARG(max_n >= 0 && max_seq > 0 && n_heads > 0 && n_kv_heads > 0 && n_kv_heads <= 65535 &&
                n_heads % n_kv_heads == 0,
            "cuda attention: max_n %d max_seq %d n_heads %d n_kv_heads %d", max_n, max_seq,
            n_heads, n_kv_heads);
    FRT_ARG(head_dim >= 32 && head_dim <= 256 && head_dim % 32 == 0,
            "cuda attention: head_dim %d (a multiple of 32, at most 256)", head_dim);
    FRT_ARG((long long)max_seq + max_n < (1ll << 30) && (long long)max_n * n_heads < (1ll << 30),
            "cuda attention: sizes too large");
    FRT_ARG(split_len >= 0 && split_len < (1 << 30), "cuda attention: split_len %d", split_len);
    FRT_ARG(out != q, "cuda attention: out aliases q");
    if (split_len > 0) {
        size_t need =
            frt_cuda_attention_workspace_bytes(max_n, max_seq, n_heads, head_dim, split_len);
        FRT_ARG(workspace && workspace_bytes >= need,
                "cuda attention: workspace of %zu bytes, %zu needed", workspace_bytes, need);
        FRT_ARG(n_splits_of(max_seq, split_len) <= 65535, "cuda attention: more than 65535 splits");
    }
    return 0;
}

/* The launch arguments of one sequence (no cache pointers yet). */
static attn_args attn_make(void *out, frt_cuda_dtype out_dtype, const void *q, frt_cuda_dtype q_dtype,
                           const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq, int n_heads,
                           int n_kv_heads, int head_dim, float scale, int split_len, void *workspace)
{
    attn_args a;
    memset(&a, 0, sizeof a);
    a.out = out;
    a.out_dt = out_dtype;
    a.q = q;
    a.q_dt = q_dtype;
    a.d_start = d_start;
    a.d_n = d_n;
    a.max_n = max_n;
    a.max_seq = max_seq;
    a.n_heads = n_heads;
    a.n_kv = n_kv_heads;
    a.group = n_heads / n_kv_heads;
    a.scale = scale;
    a.sl2 = (float)((double)scale * 1.4426950408889634);
    a.hd = head_dim;
    a.split_len = split_len > 0 ? split_len : max_seq;
    a.part = split_len > 0 ? (float *)workspace : NULL;
    return a;
}

/* attn_kernel<head_dim / 32, KV> over every (token, head) pair and split. */
template <typename KV> static int attn_simple_launch(const attn_args &a, cudaStream_t s)
{
    const long long pairs = (long long)a.max_n * a.group;
    dim3 grid((unsigned int)((pairs + ATT_WARPS - 1) / ATT_WARPS), (unsigned int)a.n_kv,
              (unsigned int)n_splits_of(a.max_seq, a.split_len));
    switch (a.hd / 32) {
    case 1: attn_kernel<1, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 2: attn_kernel<2, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 3: attn_kernel<3, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 4: attn_kernel<4, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 5: attn_kernel<5, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 6: attn_kernel<6, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 7: attn_kernel<7, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    default: attn_kernel<8, KV><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    }
    FRT_LAUNCH_CHECK();
    return 0;
}

/* The combine of the split partials (nothing in the one-pass form). */
static int attn_combine_launch(const attn_args &a, int exp2dom, cudaStream_t s)
{
    if (!a.part) return 0;
    dim3 cgrid((unsigned int)(a.max_n * a.n_heads), (unsigned int)(a.hd / 32));
    FRT_CUDA_TRY(frt_pdl_launch(attn_combine_kernel, cgrid, dim3(COMB_THREADS), 0, s, a, a.hd, exp2dom));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_attention(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                  frt_cuda_dtype q_dtype, const uint16_t *k_cache,
                                  const uint16_t *v_cache, const int32_t *d_start,
                                  const int32_t *d_n, int max_n, int max_seq, int n_heads,
                                  int n_kv_heads, int head_dim, float scale, int split_len,
                                  void *workspace, size_t workspace_bytes)
{
    FRT_ARG(k_cache && v_cache, "cuda attention: NULL pointer");
    FRT_TRY(attn_check(out, out_dtype, q, q_dtype, d_start, max_n, max_seq, n_heads, n_kv_heads, head_dim,
                       split_len, workspace, workspace_bytes));
    if (max_n == 0) return 0;
    attn_args a = attn_make(out, out_dtype, q, q_dtype, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads,
                            head_dim, scale, split_len, workspace);
    a.kc = k_cache;
    a.vc = v_cache;
    cudaStream_t s = (cudaStream_t)stream;
    const bool tc = decode_tc_ok(a, k_cache, v_cache);
    FRT_TRY(tc ? decode_tc<kv_bf16>(a, s) : attn_simple_launch<kv_bf16>(a, s));
    return attn_combine_launch(a, tc ? 1 : 0, s);
}

extern "C" int frt_cuda_attention_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                      frt_cuda_dtype q_dtype, const uint8_t *k_cache, const uint8_t *v_cache,
                                      const float *k_scale, const float *v_scale, const int32_t *d_start,
                                      const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv_heads,
                                      int head_dim, float scale, int split_len, void *workspace,
                                      size_t workspace_bytes)
{
    FRT_ARG(k_cache && v_cache && k_scale && v_scale, "cuda attention fp8: NULL pointer");
    FRT_TRY(attn_check(out, out_dtype, q, q_dtype, d_start, max_n, max_seq, n_heads, n_kv_heads, head_dim,
                       split_len, workspace, workspace_bytes));
    if (max_n == 0) return 0;
    attn_args a = attn_make(out, out_dtype, q, q_dtype, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads,
                            head_dim, scale, split_len, workspace);
    a.kc = k_cache;
    a.vc = v_cache;
    a.ksc = k_scale;
    a.vsc = v_scale;
    cudaStream_t s = (cudaStream_t)stream;
    const bool tc = decode_tc_ok(a, k_cache, v_cache);
    FRT_TRY(tc ? decode_tc<kv_fp8>(a, s) : attn_simple_launch<kv_fp8>(a, s));
    return attn_combine_launch(a, tc ? 1 : 0, s);
}

/* frt_cuda_attention_batch{,_fp8}: the checks, then the tensor-core decode
 * kernel over every branch and the combine. k_scale / v_scale: NULL for
 * bf16 caches, else the E4M3 caches' per-KV-head scales. */
template <typename KV>
static int attn_batch(void *stream, void *out, frt_cuda_dtype out_dtype, const float *q, const void *const *kcs,
                      const void *const *vcs, const float *k_scale, const float *v_scale,
                      const int32_t *const *d_starts, const int32_t *d_shared, int n_branches, int max_seq,
                      int n_heads, int n_kv_heads, int head_dim, float scale, int split_len, void *workspace,
                      size_t workspace_bytes)
{
    FRT_ARG(out && q && kcs && vcs && d_starts, "cuda attention batch: NULL pointer");
    FRT_ARG(!KV::FP8 || (k_scale && v_scale), "cuda attention batch: NULL scales");
    FRT_ARG(n_branches >= 1 && n_branches <= 4096 && max_seq > 0 && n_heads > 0 && n_kv_heads > 0 &&
                n_heads % n_kv_heads == 0 && (long long)n_kv_heads * n_branches <= 65535,
            "cuda attention batch: branches %d max_seq %d n_heads %d n_kv_heads %d", n_branches, max_seq,
            n_heads, n_kv_heads);
    FRT_ARG(split_len > 0 && split_len < (1 << 30) && n_splits_of(max_seq, split_len) <= 65535,
            "cuda attention batch: split_len %d", split_len);
    FRT_ARG(out != q, "cuda attention batch: out aliases q");
    FRT_ARG(out_dtype == FRT_CUDA_F32 || out_dtype == FRT_CUDA_BF16, "cuda attention batch: out dtype %d",
            (int)out_dtype);
    if (head_dim != 64 && head_dim != 128 && head_dim != 256)
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda attention batch: head_dim %d (64, 128 or 256: the tensor-core "
                                              "decode kernel)", head_dim);
    size_t need = frt_cuda_attention_workspace_bytes(1, max_seq, n_heads, head_dim, split_len) * n_branches;
    FRT_ARG(workspace && workspace_bytes >= need, "cuda attention batch: workspace of %zu bytes, %zu needed",
            workspace_bytes, need);
    attn_args a = attn_make(out, out_dtype, q, FRT_CUDA_F32, NULL, NULL, 1, max_seq, n_heads, n_kv_heads, head_dim,
                            scale, split_len, workspace);
    a.nb = n_branches;
    a.kcs = kcs;
    a.vcs = vcs;
    a.ksc = k_scale;
    a.vsc = v_scale;
    a.starts = d_starts;
    a.shared = d_shared;
    cudaStream_t s = (cudaStream_t)stream;
    FRT_TRY(decode_tc<KV>(a, s)); /* the chunks of frt_cuda_attention at max_n 1 */
    dim3 cgrid((unsigned int)(n_branches * n_heads), (unsigned int)(head_dim / 32));
    FRT_CUDA_TRY(frt_pdl_launch(attn_combine_kernel, cgrid, dim3(COMB_THREADS), 0, s, a, head_dim, 1));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_attention_batch(void *stream, void *out, frt_cuda_dtype out_dtype, const float *q,
                                        const uint16_t *const *d_k_caches,
                                        const uint16_t *const *d_v_caches,
                                        const int32_t *const *d_starts, const int32_t *d_shared,
                                        int n_branches, int max_seq,
                                        int n_heads, int n_kv_heads, int head_dim, float scale,
                                        int split_len, void *workspace, size_t workspace_bytes)
{
    return attn_batch<kv_bf16>(stream, out, out_dtype, q, (const void *const *)d_k_caches,
                               (const void *const *)d_v_caches, NULL, NULL, d_starts, d_shared, n_branches, max_seq,
                               n_heads, n_kv_heads, head_dim, scale, split_len, workspace, workspace_bytes);
}

extern "C" int frt_cuda_attention_batch_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const float *q,
                                            const uint8_t *const *d_k_caches, const uint8_t *const *d_v_caches,
                                            const float *k_scale, const float *v_scale,
                                            const int32_t *const *d_starts, const int32_t *d_shared,
                                            int n_branches, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                                            float scale, int split_len, void *workspace, size_t workspace_bytes)
{
    return attn_batch<kv_fp8>(stream, out, out_dtype, q, (const void *const *)d_k_caches,
                              (const void *const *)d_v_caches, k_scale, v_scale, d_starts, d_shared, n_branches,
                              max_seq, n_heads, n_kv_heads, head_dim, scale, split_len, workspace, workspace_bytes);
}
