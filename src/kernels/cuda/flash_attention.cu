/*
 * kernels/cuda/flash_attention.cu - causal GQA attention of a prefill block
 * over the bf16 KV cache on tensor cores: FlashAttention-2 with bf16
 * mma.sync, fp32 accumulation and an fp32 online softmax, cut into key
 * splits (flash-decoding) when the query block alone cannot fill the GPU.
 * Math: the CPU twin frt_cpu_attention (transformers 5.x modeling_qwen3_5.py,
 * eager_attention_forward with the causal mask); the algorithm of
 * FlashAttention-2 (Dao, 2023, arXiv:2307.08691): per key tile
 *   S = Q K^T;  m' = max(m, rowmax S);  P = exp(S - m');
 *   l = l exp(m - m') + rowsum P;  O = O exp(m - m') + P V
 * and out = O / l at the end. Scores are scaled by scale * log2(e) so exp is
 * exp2f. Q is rounded to bf16 when it is staged (RNE), P is rounded to bf16
 * for the P V product; everything else is fp32.
 *
 * Layout of the work. The query rows of KV head kvh are the (token, head)
 * pairs r = t * group + g (head h = kvh * group + g), so the heads of a GQA
 * group share every K/V tile. A block (4 warps) takes 64 consecutive rows
 * (blockIdx.x) of one KV head (blockIdx.y) and one key split (blockIdx.z);
 * warp w owns rows 16w .. 16w + 15 (the m16 of the mma). Key tiles of BC
 * keys (64; 32 for head_dim 256, to fit two blocks per SM) are staged with
 * cp.async into a double buffer, in smem rows of head_dim bf16 whose 16-byte
 * chunks are XOR-swizzled (chunk c of row r at c ^ (r & 7)), so every
 * ldmatrix (8 rows x 16 bytes) and every 16-byte store hits 32 distinct
 * banks. Per tile and warp: S (16 x BC) = Q K^T from ldmatrix fragments (Q
 * held in registers for head_dim <= 128, re-read from smem for 256), the
 * causal mask (key j visible to token t iff j <= start + t), the online
 * softmax on the accumulator fragments (row max and sums over the 4 lanes of
 * a quad, fixed xor order), P converted in registers to the A fragments of
 * P V, and V fragments from ldmatrix.trans. Tiles past a block's last key
 * are not loaded; tiles past a warp's last key are skipped by that warp
 * (for the rows of that warp, a masked tile is a no-op, bit for bit).
 *
 * Splits. The keys are cut into splits of split_len keys (fa_split_len: a
 * function of max_n, n_heads and max_seq only, never of the dynamic n or
 * start, so one captured launch serves every position). With one split the
 * block writes out = O / l. Otherwise block (x, kvh, s) writes, for each row
 * whose keys reach into split s (s * split_len < kend), the unnormalised O
 * and (m, l) to the workspace; blocks without such a row exit at once. The
 * combine kernel then merges, per row, exactly the splits 0 .. ns - 1 that
 * hold its keys (ns = ceil(kend / split_len)), in ascending order:
 *   M = max m_s;  L = sum l_s 2^(m_s - M);  out = (sum O_s 2^(m_s - M)) / L
 * A (row, split) partial depends on that row's keys only, so the result does
 * not depend on n or on how many splits are empty.
 *
 * Pieces (frt_cuda_attention_prefill_pieces): a launch over several prefill
 * pieces takes the split length of one piece's launch, so each row gets
 * its piece's bits; with that many rows the GPU is full without splitting
 * the keys across blocks, so the launch is fused: block (x, kvh) runs the
 * splits of its rows one after another (the same code per split, its
 * partials written as above) and then merges them itself with the combine
 * kernel's arithmetic (fa_merge), the heaviest row blocks first.
 *
 * head_dim 128 over a bf16 cache, in launches that fill whole blocks of 128
 * rows, runs on Hopper's warpgroup MMA with tensor-copy staging instead
 * (fa_split_wg below, the same partials and merge).
 *
 * Deterministic: no atomics; fixed mma, reduction and merge orders.
 * Tested in tests/test_cuda_flash_attention.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/mma_util.h"
#include "kernels/cuda/tma_util.h"
#include "kernels/cuda/wgmma_util.h"

#include <math.h>

#define FA_WARPS 4
#define FA_THREADS (32 * FA_WARPS)
#define FA_ROWS (16 * FA_WARPS) /* query rows per block */

/* The split rule (see fa_split_len). */
#define FA_SPLIT_MIN 512
#define FA_SPLIT_MAX 4096

/* Q fragments are held in registers for head_dim <= FA_QREG_MAX_HD, else
 * re-read from shared memory for each key tile. Held for head_dim 256 too:
 * 20 % fewer shared-memory reads per tile (the bound of this kernel) at 255
 * registers (no spills with CUDA 13); measured on the H200 (test timing
 * rows, hd 256, 16 / 4 heads): a 256-row chunk at 8k 156.2 -> 151.7 us, a
 * 64-row append at 32k 225.5 -> 222.9 us. -DFA_QREG_MAX_HD=128 restores the
 * shared-memory form. */
#ifndef FA_QREG_MAX_HD
#define FA_QREG_MAX_HD 256
#endif

/* Per head_dim and cache type (F8: E4M3 codes): keys per tile, Q in
 * registers or not, blocks per SM, shared memory. A bf16 cache is staged
 * by cp.async straight into double-buffered bf16 tiles; an E4M3 cache into
 * double-buffered tiles of codes (rows of HD bytes, plain: CT_OFF), each
 * widened into one (K, V) pair of bf16 tiles before it is used, so the
 * same bytes of shared memory in both forms. */
template <int HD, bool F8> struct fa_cfg {
    static constexpr int BC = HD == 256 ? 32 : 64;
    static constexpr bool QREG = HD <= FA_QREG_MAX_HD;
    static constexpr int MINB = HD == 64 ? 3 : 2;
    static constexpr int CH = HD / 8;      /* 16-byte chunks per smem row */
    static constexpr int ROWB = HD * 2;    /* bytes per smem row */
    static constexpr int TBYTES = BC * ROWB; /* one K or V tile */
    static constexpr int QBYTES = FA_ROWS * ROWB;
    static constexpr int CTBYTES = BC * HD; /* one K or V tile of codes */
    static constexpr int CT_OFF = QBYTES + 2 * TBYTES; /* F8: the code tiles, K x 2 then V x 2 */
    static constexpr int SMEM = F8 ? CT_OFF + 4 * CTBYTES : QBYTES + 4 * TBYTES; /* Q, K x 2, V x 2 */
    static constexpr int CCH = HD / 16; /* F8: 16-byte chunks (of codes) per row */
    static constexpr int CRSTEP = FA_THREADS / CCH; /* F8: code rows per cp.async pass */
    static_assert(BC % CRSTEP == 0, "head_dim 64, 128 or 256");
};

/* A restore source (frt_cuda_attention_prefill_src): the cache rows below
 * `rows` of this layer as 2-D tensor maps of another buffer (a device-tier
 * capsule's K and V entries, [rows, n_kv * 128] bf16), in global memory so
 * a captured launch takes each replay's; rows 0: none. */
struct fa_kv_src { /* 128-byte aligned (CUtensorMap) */
    CUtensorMap k, v;
    int rows;
};
static_assert(sizeof(fa_kv_src) == FRT_CUDA_KV_SRC_BYTES, "FRT_CUDA_KV_SRC_BYTES");

struct fa_args {
    void *out;
    int out_dt;
    const void *q;
    int q_dt;
    const void *kc, *vc; /* bf16, or E4M3 codes (fa_kernel<HD, true, .>) */
    const float *ksc, *vsc; /* E4M3: the per-KV-head scales [n_kv] (device) */
    const int32_t *d_start, *d_n;
    float *po;   /* split partials O [n_splits, max_n, n_heads, hd], or NULL (one split) */
    float2 *pml; /* split partials (m, l) [n_splits, max_n, n_heads] */
    int max_n, max_seq, n_heads, n_kv, group, split_len;
    int fuse;  /* 1: one block takes every split of its rows and merges them (fa_merge); grid z 1, no combine */
    float sl2; /* scale * log2(e) */
    CUtensorMap tmk, tmv; /* fa_split_wg: the bf16 caches as 2-D tensors [max_seq, n_kv * 128] */
    const fa_kv_src *src; /* fa_split_wg outside the fused form: a restore source, or NULL */
};

/* ---- the pieces both kernels share -------------------------------------- */

/* The 16 bytes of chunk c (8 bf16) of query row `row` of KV head kvh: q's
 * row (token row / G, head kvh G + row % G) rounded to bf16 (RNE) from f32
 * or read as bf16; zeros for a token >= n. */
template <int HD>
__device__ __forceinline__ uint4 fa_q_chunk(const fa_args &a, int kvh, int row, int c, int n)
{
    const int G = a.group, t = row / G;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (t >= n) return v;
    const size_t off = ((size_t)t * a.n_heads + (size_t)kvh * G + (row - t * G)) * HD + c * 8;
    if (a.q_dt == FRT_CUDA_BF16)
        return __ldg(reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(a.q) + off));
    const float4 *p = reinterpret_cast<const float4 *>(static_cast<const float *>(a.q) + off);
    const float4 x = __ldg(p), y = __ldg(p + 1);
    v.x = frt_pack_bf16(x.x, x.y);
    v.y = frt_pack_bf16(x.z, x.w);
    v.z = frt_pack_bf16(y.x, y.y);
    v.w = frt_pack_bf16(y.z, y.w);
    return v;
}

/* One key tile of a warp's rows a (gid) and b (gid + 8): S(j, e) is the
 * accumulator of key n-tile j (keys j0 + 8 j + 2 tig + (e & 1), row a for
 * e < 2, else b), O(j, e) the output accumulator of head-dim n-tile j.
 * Scales S to the log2 domain, masks keys >= lim_a / lim_b when `mask`,
 * runs the online softmax (row max over the quad in a fixed xor order; a
 * row with no visible key keeps m = -inf and subtracts 0, so exp2 gives 0,
 * never NaN), leaves P = exp2(S - m) in S and rescales O and l. */
template <int NT, int DT, typename SF, typename OF>
__device__ __forceinline__ void fa_softmax_tile(SF S, OF O, bool mask, int j0, int tig, int lim_a, int lim_b,
                                                float sl2, float &m_a, float &m_b, float &l_a, float &l_b)
{
    float mx_a = m_a, mx_b = m_b;
#pragma unroll
    for (int j = 0; j < NT; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float v = S(j, e) * sl2;
            if (mask) {
                const int key = j0 + 8 * j + 2 * tig + (e & 1);
                if (key >= (e < 2 ? lim_a : lim_b)) v = -INFINITY;
            }
            S(j, e) = v;
        }
        mx_a = fmaxf(mx_a, fmaxf(S(j, 0), S(j, 1)));
        mx_b = fmaxf(mx_b, fmaxf(S(j, 2), S(j, 3)));
    }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
    const float mu_a = mx_a == -INFINITY ? 0.0f : mx_a;
    const float mu_b = mx_b == -INFINITY ? 0.0f : mx_b;
    const float c_a = exp2f(m_a - mu_a), c_b = exp2f(m_b - mu_b);
    m_a = mx_a;
    m_b = mx_b;
    float rs_a = 0.0f, rs_b = 0.0f;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        S(j, 0) = exp2f(S(j, 0) - mu_a);
        S(j, 1) = exp2f(S(j, 1) - mu_a);
        S(j, 2) = exp2f(S(j, 2) - mu_b);
        S(j, 3) = exp2f(S(j, 3) - mu_b);
        rs_a += S(j, 0) + S(j, 1);
        rs_b += S(j, 2) + S(j, 3);
    }
    l_a = l_a * c_a + rs_a;
    l_b = l_b * c_b + rs_b;
#pragma unroll
    for (int j = 0; j < DT; j++) {
        O(j, 0) *= c_a;
        O(j, 1) *= c_a;
        O(j, 2) *= c_b;
        O(j, 3) *= c_b;
    }
}

/* A warp's rows ra, rb (tokens ta, tb, key ends kend_a, kend_b) after the
 * last tile of split z: l summed over the quad (fixed xor order: the same
 * bits on all 4 lanes); one split (a.po NULL): out = O / l * vsc, else the
 * partials O * vsc and (m, l) of split z for the rows whose keys reach it.
 * O(j, e) as in fa_softmax_tile. */
template <int HD, typename OF>
__device__ __forceinline__ void fa_write_rows(const fa_args &a, OF O, int kvh, int z, int s_lo, int tig, int ra,
                                              int rb, int kend_a, int kend_b, float m_a, float m_b, float l_a,
                                              float l_b, float vsc)
{
    constexpr int DT = HD / 8;
    const int G = a.group;
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int row = half ? rb : ra, t = row / G;
        const int kend = half ? kend_b : kend_a;
        if (kend <= s_lo) continue; /* past n, or no key in this split */
        const size_t pr = (size_t)t * a.n_heads + (size_t)kvh * G + (row - t * G);
        const float m = half ? m_b : m_a, l = half ? l_b : l_a;
        if (!a.po) {
            const float inv = vsc / l;
            if (a.out_dt == FRT_CUDA_BF16) {
                __nv_bfloat16 *ob = static_cast<__nv_bfloat16 *>(a.out) + pr * HD + 2 * tig;
#pragma unroll
                for (int j = 0; j < DT; j++)
                    *reinterpret_cast<__nv_bfloat162 *>(ob + 8 * j) =
                        __floats2bfloat162_rn(O(j, 2 * half) * inv, O(j, 2 * half + 1) * inv);
            } else {
                float *of = static_cast<float *>(a.out) + pr * HD + 2 * tig;
#pragma unroll
                for (int j = 0; j < DT; j++)
                    *reinterpret_cast<float2 *>(of + 8 * j) =
                        make_float2(O(j, 2 * half) * inv, O(j, 2 * half + 1) * inv);
            }
        } else {
            const size_t pi = (size_t)z * a.max_n * a.n_heads + pr;
            float *pp = a.po + pi * HD + 2 * tig;
#pragma unroll
            for (int j = 0; j < DT; j++)
                *reinterpret_cast<float2 *>(pp + 8 * j) = make_float2(O(j, 2 * half) * vsc, O(j, 2 * half + 1) * vsc);
            if (tig == 0) a.pml[pi] = make_float2(m, l);
        }
    }
}

/* ---- the attention kernel ---------------------------------------------- */

/* Fragment coordinates (lane = 4 * gid + tig): the accumulator of an m16n8
 * mma holds rows gid and gid + 8, columns 2 tig and 2 tig + 1. */
extern __shared__ __align__(128) unsigned char fa_smem[];

/* Row block xb, KV head kvh, key split z of the launch: the partials of
 * split z (several splits), or the output (one split). Every thread of the
 * block calls it (it has barriers); returns early for the whole block when
 * the block has no row or no key in split z. */
template <int HD, bool F8>
__device__ __forceinline__ void fa_split(const fa_args &a, int xb, int kvh, int z)
{
    using C = fa_cfg<HD, F8>;
    constexpr int BC = C::BC, CH = C::CH, ROWB = C::ROWB, TBYTES = C::TBYTES;
    constexpr int NT = BC / 8; /* key n-tiles of S */
    constexpr int DT = HD / 8; /* head-dim n-tiles of O */
    constexpr int KS = HD / 16; /* k-steps of Q K^T */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int G = a.group;
    const int r0 = xb * FA_ROWS;
    if (r0 / G >= n) return; /* uniform: no valid row in this block */
    const int t_last = min((r0 + FA_ROWS - 1) / G, n - 1);
    const int s_lo = z * a.split_len;
    const int s_hi = s_lo + a.split_len;
    const int b_hi = min(min(start + t_last + 1, a.max_seq), s_hi); /* block's keys end */
    if (b_hi <= s_lo) return; /* uniform: no key of this block in this split */
    const int ntiles = (b_hi - s_lo + BC - 1) / BC;

    const uint32_t qs = frt_smem_addr(fa_smem);
    /* bf16 tiles: K x 2 then V x 2 (F8: one K, one V, the code tiles after) */
    const uint32_t ks0 = qs + C::QBYTES, vs0 = ks0 + (F8 ? 1 : 2) * TBYTES;

    /* K/V tile it -> stage it & 1; rows past b_hi are zero-filled (finite V
     * under the masked, zero P). Thread i copies chunk i % CH of rows
     * i / CH + RSTEP k: one cache pointer per tile, smem offsets fixed. */
    constexpr int RSTEP = FA_THREADS / CH; /* 4, 8 or 16 rows per pass */
    const int lr = threadIdx.x / CH, lc = threadIdx.x % CH;
    const size_t crow = (size_t)a.n_kv * HD; /* elements per cache row */
    const size_t gofs = (size_t)kvh * HD + lc * 8;
    /* passes whose row & 7 is lr & 7, and (lr + 4) & 7 (RSTEP 4 only) */
    const uint32_t so_a = (uint32_t)(lr * ROWB + ((lc ^ (lr & 7)) << 4));
    const uint32_t so_b = (uint32_t)(lr * ROWB + ((lc ^ ((lr + 4) & 7)) << 4));
    auto issue = [&](int it) {
        const int j0 = s_lo + it * BC + lr;
        const size_t g0 = (size_t)j0 * crow + gofs;
        const uint32_t st = (uint32_t)(it & 1) * TBYTES;
#pragma unroll
        for (int k = 0; k < BC / RSTEP; k++) {
            const bool ok = j0 + k * RSTEP < b_hi;
            const size_t g = ok ? g0 + (size_t)(k * RSTEP) * crow : 0;
            const uint32_t off = st + (((k * RSTEP) & 4) ? so_b : so_a) + k * RSTEP * ROWB;
            frt_cp_async16(ks0 + off, (const __nv_bfloat16 *)a.kc + g, ok ? 16 : 0);
            frt_cp_async16(vs0 + off, (const __nv_bfloat16 *)a.vc + g, ok ? 16 : 0);
        }
    };
    /* E4M3: code tile it -> code stage it & 1, plain rows of HD bytes; thread
     * i copies 16 codes, chunk i % CCH of rows i / CCH + CRSTEP k; rows past
     * b_hi are zero codes (zeros). */
    const int cr = threadIdx.x / C::CCH, cc = threadIdx.x % C::CCH;
    const size_t cofs = (size_t)kvh * HD + cc * 16;
    auto issue8 = [&](int it) {
        const int j0 = s_lo + it * BC + cr;
        const uint32_t st = qs + C::CT_OFF + (uint32_t)(it & 1) * C::CTBYTES + cr * HD + cc * 16;
#pragma unroll
        for (int k = 0; k < BC / C::CRSTEP; k++) {
            const bool ok = j0 + k * C::CRSTEP < b_hi;
            const size_t g = ok ? (size_t)(j0 + k * C::CRSTEP) * crow + cofs : 0;
            const uint32_t off = st + k * C::CRSTEP * HD;
            frt_cp_async16(off, (const uint8_t *)a.kc + g, ok ? 16 : 0);
            frt_cp_async16(off + 2 * C::CTBYTES, (const uint8_t *)a.vc + g, ok ? 16 : 0);
        }
    };
    /* E4M3: code stage it & 1 widened (exact) into the bf16 tiles of stage
     * 0 (K, then V), swizzled as the bf16 loads write them; thread i converts 8 codes,
     * bf16 chunk lc of rows lr + RSTEP k. */
    auto widen = [&](int it) {
        const unsigned char *src = fa_smem + C::CT_OFF + (it & 1) * C::CTBYTES + lc * 8;
#pragma unroll
        for (int k = 0; k < BC / RSTEP; k++) {
            const int r = lr + k * RSTEP;
            const uint32_t off = (uint32_t)(r * ROWB + ((lc ^ (r & 7)) << 4));
#pragma unroll
            for (int kv = 0; kv < 2; kv++)
                *reinterpret_cast<uint4 *>(fa_smem + C::QBYTES + kv * TBYTES + off) =
                    frt_fp8x8_to_bf16x8(*reinterpret_cast<const uint2 *>(src + kv * 2 * C::CTBYTES + r * HD));
        }
    };
    auto stage = [&](int it) {
        if constexpr (F8)
            issue8(it);
        else
            issue(it);
    };
    stage(0);
    frt_cp_async_commit();

    /* Q rows of the block -> bf16, swizzled; rows of tokens >= n are zeros
     * (never read). */
#pragma unroll 2
    for (int k = 0; k < FA_ROWS * CH / FA_THREADS; k++) {
        const int i = threadIdx.x + k * FA_THREADS;
        const int r = i / CH, c = i % CH;
        const uint4 v = fa_q_chunk<HD>(a, kvh, r0 + r, c, n);
        *reinterpret_cast<uint4 *>(fa_smem + r * ROWB + ((c ^ (r & 7)) << 4)) = v;
    }
    __syncthreads();

    /* Per-lane ldmatrix row addresses (lanes 8m .. 8m + 7 address matrix
     * m). Index i selects the k-step (or d pair) modulo 4, the rest is an
     * immediate offset: chunk 2i + hi of a row with row & 7 = lane & 7.
     *   Q (A, 16x16): rows lane & 15,            chunk hi = lane >> 4
     *   K (B, keys x d): keys (lane & 7) + 8 (lane >> 4), chunk hi = (lane >> 3) & 1
     *   V (B, .trans): keys (lane & 7) + 8 ((lane >> 3) & 1), chunk hi = lane >> 4 */
    const int sw = lane & 7;
    const int q_row = warp * 16 + (lane & 15), q_hi = lane >> 4;
    const int k_row = sw + ((lane >> 4) << 3), k_hi = (lane >> 3) & 1;
    const int v_row = sw + (((lane >> 3) & 1) << 3), v_hi = lane >> 4;
    uint32_t qa[4], ka[4], va[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        qa[i] = qs + (uint32_t)(q_row * ROWB + (((2 * i + q_hi) ^ sw) << 4));
        ka[i] = (uint32_t)(k_row * ROWB + (((2 * i + k_hi) ^ sw) << 4));
        va[i] = (uint32_t)(v_row * ROWB + (((2 * i + v_hi) ^ sw) << 4));
    }

    uint32_t qf[C::QREG ? KS : 1][4];
    if constexpr (C::QREG) {
#pragma unroll
        for (int kk = 0; kk < KS; kk++) frt_ldsm_x4(qf[kk], qa[kk & 3] + (kk >> 2) * 128);
    }

    /* The warp's rows and their key ends (kend 0: a row past n, all masked). */
    const int gid = lane >> 2, tig = lane & 3;
    const int wr0 = r0 + warp * 16;
    const bool w_active = wr0 / G < n;
    const int w_klo = min(start + wr0 / G + 1, a.max_seq); /* first row: fewest keys */
    const int w_khi = min(start + min((wr0 + 15) / G, n - 1) + 1, a.max_seq);
    const int ra = wr0 + gid, rb = ra + 8;
    const int ta = ra / G, tb = rb / G;
    const int kend_a = ta < n ? min(start + ta + 1, a.max_seq) : 0;
    const int kend_b = tb < n ? min(start + tb + 1, a.max_seq) : 0;

    /* E4M3: scores (q . k_code) * (scale log2(e) * s_k), outputs
     * (P . v_code) * s_v */
    const float sl2 = F8 ? a.sl2 * a.ksc[kvh] : a.sl2;
    const float vsc = F8 ? a.vsc[kvh] : 1.0f;

    float o[DT][4];
#pragma unroll
    for (int j = 0; j < DT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f; /* l: this lane's columns */

    for (int it = 0; it < ntiles; it++) {
        if (it + 1 < ntiles) stage(it + 1);
        frt_cp_async_commit();
        frt_cp_async_wait<1>(); /* tile it has landed (this thread's part) */
        __syncthreads();       /* ... and every thread's */
        if constexpr (F8) {
            widen(it); /* the bf16 tiles of tile it - 1 are consumed (the loop's last barrier) */
            __syncthreads();
        }
        const int j0 = s_lo + it * BC;
        if (w_active && j0 < w_khi) { /* warp-uniform */
            const uint32_t ks = ks0 + (F8 ? 0u : (uint32_t)(it & 1) * TBYTES);
            const uint32_t vs = vs0 + (F8 ? 0u : (uint32_t)(it & 1) * TBYTES);

            float s[NT][4];
#pragma unroll
            for (int j = 0; j < NT; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t af[4];
                if constexpr (C::QREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++) af[e] = qf[kk][e];
                } else {
                    frt_ldsm_x4(af, qa[kk & 3] + (kk >> 2) * 128);
                }
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t b[4];
                    frt_ldsm_x4(b, ks + ka[kk & 3] + (kk >> 2) * 128 + np * 16 * ROWB);
                    frt_mma_bf16(s[2 * np], af, b[0], b[1]);
                    frt_mma_bf16(s[2 * np + 1], af, b[2], b[3]);
                }
            }

            /* scale (log2 domain), causal mask, online softmax */
            fa_softmax_tile<NT, DT>([&](int j, int e) -> float & { return s[j][e]; },
                                    [&](int j, int e) -> float & { return o[j][e]; }, j0 + BC > w_klo, j0, tig,
                                    kend_a, kend_b, sl2, m_a, m_b, l_a, l_b);

            /* O += P V: the accumulators of key n-tiles 2kk, 2kk+1 are the A
             * fragment of key k-step kk */
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                uint32_t pf[4];
                pf[0] = frt_pack_bf16(s[2 * kk][0], s[2 * kk][1]);
                pf[1] = frt_pack_bf16(s[2 * kk][2], s[2 * kk][3]);
                pf[2] = frt_pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                pf[3] = frt_pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
                for (int dp = 0; dp < HD / 16; dp++) {
                    uint32_t b[4];
                    frt_ldsm_x4_trans(b, vs + va[dp & 3] + (dp >> 2) * 128 + kk * 16 * ROWB);
                    frt_mma_bf16(o[2 * dp], pf, b[0], b[1]);
                    frt_mma_bf16(o[2 * dp + 1], pf, b[2], b[3]);
                }
            }
        }
        __syncthreads(); /* stage it & 1 is consumed before tile it + 2 lands in it */
    }
    if (!w_active) return;
    fa_write_rows<HD>(a, [&](int j, int e) -> float & { return o[j][e]; }, kvh, z, s_lo, tig, ra, rb, kend_a, kend_b,
                      m_a, m_b, l_a, l_b, vsc);
}

/* The fused form's merge, after every split of the block ran (fa_split
 * wrote each split's partials): each lane merges, for its rows gid and gid
 * + 8 of its warp and its columns 2 tig + 8 j (+ 1), the splits 0 .. ns - 1
 * that hold the row's keys with fa_combine_kernel's arithmetic, in its
 * order (M = the max of m_s in ascending s; L and each column's sum by
 * fused multiply-adds in ascending s; out = sum * (1 / L)), so a row gets
 * the bits the combine kernel gives it. The partials are read back through
 * L2 (__ldcg): the (m, l) of a row were written by another lane of the
 * quad. */
template <int HD, int ROWS>
__device__ __forceinline__ void fa_merge(const fa_args &a, int xb, int kvh)
{
    constexpr int DT = HD / 8;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int G = a.group, gid = lane >> 2, tig = lane & 3;
    const int wr0 = xb * ROWS + warp * 16;
    __syncwarp();
    __threadfence_block();
    const size_t stride = (size_t)a.max_n * a.n_heads;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int row = wr0 + gid + 8 * half, t = row / G;
        if (t >= n) continue;
        const int kend = min(start + t + 1, a.max_seq);
        const int ns = (kend + a.split_len - 1) / a.split_len;
        const size_t pr = (size_t)t * a.n_heads + (size_t)kvh * G + (row - t * G);
        float M = -INFINITY;
        for (int s = 0; s < ns; s++) M = fmaxf(M, __ldcg(&a.pml[s * stride + pr]).x);
        float L = 0.0f, acc[DT][2];
#pragma unroll
        for (int j = 0; j < DT; j++) acc[j][0] = acc[j][1] = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float2 v = __ldcg(&a.pml[s * stride + pr]);
            const float w = exp2f(v.x - M);
            L = __fmaf_rn(v.y, w, L);
            const float *po = a.po + (s * stride + pr) * HD + 2 * tig;
#pragma unroll
            for (int j = 0; j < DT; j++) {
                const float2 o = __ldcg(reinterpret_cast<const float2 *>(po + 8 * j));
                acc[j][0] = __fmaf_rn(o.x, w, acc[j][0]);
                acc[j][1] = __fmaf_rn(o.y, w, acc[j][1]);
            }
        }
        const float inv = 1.0f / L;
#pragma unroll
        for (int j = 0; j < DT; j++) {
            const size_t e = pr * HD + 2 * tig + 8 * j;
            frt_st(a.out, a.out_dt, e, acc[j][0] * inv);
            frt_st(a.out, a.out_dt, e + 1, acc[j][1] * inv);
        }
    }
}

/* The fused form of a launch (both kernels): block x runs every split of
 * row block gridDim.x - 1 - x (the rows with the most keys first) through
 * split(xb, z), one after another, then merges them itself (fa_merge). */
template <int HD, int ROWS, typename SPLIT>
__device__ __forceinline__ void fa_fused(const fa_args &a, int kvh, SPLIT split)
{
    const int xb = gridDim.x - 1 - blockIdx.x;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    if (xb * ROWS / a.group >= n) { /* uniform: no valid row in this block */
        frt_pdl_wait();
        return;
    }
    const int t_last = min((xb * ROWS + ROWS - 1) / a.group, n - 1);
    const int nz = (min(start + t_last + 1, a.max_seq) + a.split_len - 1) / a.split_len;
    for (int z = 0; z < nz; z++) {
        split(xb, z);
        __syncthreads(); /* the next split stages Q and its tiles into the same shared memory */
    }
    fa_merge<HD, ROWS>(a, xb, kvh);
}

/* The launch: block (x, kvh, z) runs split z of row block x; FUSE (a.fuse,
 * its own instantiation so the split form's registers do not change):
 * block (x, kvh) runs every split of row block gridDim.x - 1 - x (the rows
 * with the most keys first) and merges them (fa_merge). */
template <int HD, bool F8, bool FUSE>
__global__ void __launch_bounds__(FA_THREADS, fa_cfg<HD, F8>::MINB) fa_kernel(const fa_args a)
{
    frt_pdl_wait();    /* launched with PDL: q and the cache rows come from the kernels before */
    frt_pdl_trigger(); /* after the wait: see fa_split_wg */
    const int kvh = blockIdx.y;
    if constexpr (!FUSE) {
        fa_split<HD, F8>(a, blockIdx.x, kvh, blockIdx.z);
        return;
    }
    fa_fused<HD, FA_ROWS>(a, kvh, [&](int xb, int z) { fa_split<HD, F8>(a, xb, kvh, z); });
}

/* ---- head_dim 128, bf16 cache: warpgroup MMA (wgmma) ---------------------
 *
 * The same work, partials and merge as fa_split (splits of
 * fa_wg_split_len), computed on Hopper's warpgroup MMA: a block of two
 * warpgroups (8 warps) takes 128 rows; key tiles of 128 keys. Per tile and
 * warpgroup (64 rows): S (64 x 128) = Q K^T as 8 wgmma m64n128k16 from
 * shared memory (Q and K K-major), the causal mask and the online softmax
 * on the accumulator fragments (the layout of 16 mma.sync m16n8
 * accumulators a warp, so fa_split's arithmetic line for line), P rounded
 * to bf16 in registers, and O += P V as 8 wgmma with P from registers and
 * V (keys x head_dim, MN-major) from shared memory. Q, K and V sit in
 * shared memory in 128-byte-swizzled regions of 64 columns
 * (wgmma_util.h). K / V tiles come by the tensor copy engine (boxes of a
 * tensor map of the cache, fa_tensor_map) into 3 stages, each with a full
 * and an empty mbarrier; thread 0 refills a stage once all 8 warps released
 * it. A warpgroup skips the tiles past its rows' last key. Row r's bits
 * depend on r's position in its 128-row block, its keys and the split: the
 * same in a launch of one prefill piece and in a launch over several when
 * a piece fills whole blocks (fa_wg_ok), as fa_split's. */
#define FA_WG_ROWS 128
#define FA_WG_THREADS 256
#define FA_WG_BC 128
#define FA_WG_STAGES 3
#define FA_WG_REG 16384 /* one region: 128 rows x 128 bytes */
#define FA_WG_TILE (4 * FA_WG_REG) /* a stage: K (2 regions), V (2 regions) */
#define FA_WG_MBAR (2 * FA_WG_REG + FA_WG_STAGES * FA_WG_TILE) /* the stages' mbarriers, after Q and the stages */
#define FA_WG_SMEM (1024 + FA_WG_MBAR + 16 * FA_WG_STAGES) /* align slack, Q, stages, full / empty mbarriers */

__device__ __forceinline__ void fa_split_wg(const fa_args &a, int xb, int kvh, int z, int &seq)
{
    constexpr int HD = 128, BC = FA_WG_BC, NT = BC / 8, DT = HD / 8;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wg = warp >> 2;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int G = a.group;
    const int r0 = xb * FA_WG_ROWS;
    if (r0 / G >= n) { /* uniform */
        frt_pdl_wait();
        return;
    }
    const int t_last = min((r0 + FA_WG_ROWS - 1) / G, n - 1);
    const int s_lo = z * a.split_len;
    const int s_hi = s_lo + a.split_len;
    const int b_hi = min(min(start + t_last + 1, a.max_seq), s_hi);
    if (b_hi <= s_lo) { /* uniform */
        frt_pdl_wait();
        return;
    }
    const int ntiles = (b_hi - s_lo + BC - 1) / BC;
    /* A restore source: tiles wholly below its rows come from it, and are
     * stored from shared memory into the cache as they land, K by the first
     * block of rows, V by the second (both by the first when it is the only
     * one with rows): every block of rows reads every key below the
     * position, so each tile of the source is stored once. */
    const int src_rows = a.src ? a.src->rows : 0;
    const int xlive = (n * G + FA_WG_ROWS - 1) / FA_WG_ROWS;
    const bool st_k = src_rows > 0 && xb == 0, st_v = src_rows > 0 && (xb == 1 || (xb == 0 && xlive == 1));
    if (threadIdx.x == 0 && src_rows > 0) {
        frt_tensormap_acquire(&a.src->k);
        frt_tensormap_acquire(&a.src->v);
    }

    const uint32_t base = (frt_smem_addr(fa_smem) + 1023u) & ~1023u;
    const uint32_t qs = base, kv0 = base + 2 * FA_WG_REG, mb = base + FA_WG_MBAR;

    /* tile it: the block's tile number q = seq + it (tiles of earlier
     * splits of the fused form included) in stage q % 3; its full barrier
     * (the copies landed) and its empty barrier (the 8 warps are done with
     * it) complete phase q / 3 for it. Thread 0 fills a stage with four
     * boxes of 128 rows x 64 columns (K and V, head_dim 0..63 and 64..127)
     * once the tile 3 before it is consumed. The warpgroups meet only at
     * these barriers, so one may run up to a tile ahead of the other. */
    auto stage_of = [&](int it) { return kv0 + (uint32_t)((seq + it) % FA_WG_STAGES) * FA_WG_TILE; };
    auto bar_of = [&](int it) { return mb + 8u * (uint32_t)((seq + it) % FA_WG_STAGES); };
    auto empty_of = [&](int it) { return mb + 8u * (uint32_t)(FA_WG_STAGES + (seq + it) % FA_WG_STAGES); };
    auto issue = [&](int it) {
        const uint32_t st = stage_of(it), bar = bar_of(it);
        const int row = s_lo + it * BC;
        const bool from_src = row + BC <= src_rows;
        const CUtensorMap *mk = from_src ? &a.src->k : &a.tmk, *mv = from_src ? &a.src->v : &a.tmv;
        frt_mbar_expect(bar, FA_WG_TILE);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            frt_tma_2d(st + h * FA_WG_REG, mk, kvh * HD + 64 * h, row, bar);
            frt_tma_2d(st + (2 + h) * FA_WG_REG, mv, kvh * HD + 64 * h, row, bar);
        }
    };
    /* The first two tiles; those wholly below the position before the wait
     * for the kernels before (programmatic dependent launch: they write the
     * cache rows start .. only, docs/kernels-cuda.md), the rest after it. */
    const int first = min(ntiles, 2);
    int early = 0;
    if (seq == 0)
        while (early < first && s_lo + (early + 1) * BC <= start) early++;
    if (threadIdx.x == 0)
        for (int it = 0; it < early; it++) issue(it);
    frt_pdl_wait();
    /* Only now (the kernels before have completed): a launch after this
     * one may stage rows this one's predecessors wrote (a group's second
     * pieces launch reads, below its start, rows of the first pieces,
     * which the prep before the first launch wrote). */
    frt_pdl_trigger();
    if (threadIdx.x == 0)
        for (int it = early; it < first; it++) issue(it);

    /* Q rows of the block -> bf16, swizzled; rows of tokens >= n are zeros.
     * Unrolled: all 8 chunks' loads in flight at once (the accumulators are
     * not live yet), one round trip instead of 4. */
#pragma unroll
    for (int k = 0; k < FA_WG_ROWS * 16 / FA_WG_THREADS; k++) {
        const int i = threadIdx.x + k * FA_WG_THREADS;
        const int r = i >> 4, c = i & 15;
        const uint4 v = fa_q_chunk<HD>(a, kvh, r0 + r, c, n);
        const uint32_t d = qs + (uint32_t)((c >> 3) * FA_WG_REG + r * 128 + (((c & 7) ^ (r & 7)) << 4));
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(d), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                     : "memory");
    }

    frt_fence_proxy_async(); /* Q's stores, visible to wgmma */
    __syncthreads();

    /* The warp's rows (16 warp + gid, + 8) and the warpgroup's key range. */
    const int gid = lane >> 2, tig = lane & 3;
    const int wr0 = r0 + warp * 16, gr0 = r0 + wg * 64;
    const bool w_active = wr0 / G < n;
    const bool g_active = gr0 / G < n;
    const int g_klo = min(min(start + gr0 / G + 1, a.max_seq), s_hi); /* first row: fewest keys */
    const int g_khi = min(start + min((gr0 + 63) / G, n - 1) + 1, a.max_seq);
    const int ra = wr0 + gid, rb = ra + 8;
    const int ta = ra / G, tb = rb / G;
    const int kend_a = ta < n ? min(start + ta + 1, a.max_seq) : 0;
    const int kend_b = tb < n ? min(start + tb + 1, a.max_seq) : 0;
    const int lim_a = min(kend_a, s_hi), lim_b = min(kend_b, s_hi); /* keys of this split */
    const float sl2 = a.sl2;

    float o[DT * 4];
#pragma unroll
    for (int j = 0; j < DT * 4; j++) o[j] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

    for (int it = 0; it < ntiles; it++) {
        const int j0 = s_lo + it * BC;
        const uint32_t ks = stage_of(it), vs = ks + 2 * FA_WG_REG;
        /* every warp waits for the tile, computing it or not: a warp's arrival
         * on the empty barrier must come after the tile's copies were
         * issued (so after the tile 3 before was released), or it would
         * count toward that earlier phase */
        frt_mbar_wait(bar_of(it), ((seq + it) / FA_WG_STAGES) & 1);
        if (threadIdx.x == 0 && (st_k || st_v)) { /* a source tile into the cache (one bulk group a tile) */
            if (j0 + BC <= src_rows)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (st_k) frt_tma_store_2d(&a.tmk, ks + h * FA_WG_REG, kvh * HD + 64 * h, j0);
                    if (st_v) frt_tma_store_2d(&a.tmv, vs + h * FA_WG_REG, kvh * HD + 64 * h, j0);
                }
            frt_bulk_commit();
        }
        if (g_active && j0 < g_khi) { /* warpgroup-uniform */
            if (j0 + BC > b_hi) { /* V rows past the block's keys: zeros (a cache row may hold non-finite
                                   * bits where P is 0); each warpgroup writes them for itself */
                for (int i = threadIdx.x & 127; i < (j0 + BC - b_hi) * 16; i += 128) {
                    const int r = b_hi - j0 + (i >> 4), c = i & 15;
                    const uint32_t d =
                        vs + (uint32_t)((c >> 3) * FA_WG_REG + r * 128 + (((c & 7) ^ (r & 7)) << 4));
                    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(d), "r"(0u) : "memory");
                }
                frt_fence_proxy_async();
                asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
            }
            float s[NT * 4];
            frt_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                const uint32_t off = (uint32_t)((kk >> 2) * FA_WG_REG + (kk & 3) * 32);
                frt_wgmma_m64n128k16_ss(s, frt_wgmma_desc(qs + wg * 64 * 128 + off, 16, 1024),
                                        frt_wgmma_desc(ks + off, 16, 1024), kk > 0);
            }
            frt_wgmma_commit();
            frt_wgmma_wait<0>();
            frt_wgmma_hold(s);

            /* scale (log2 domain), causal mask, online softmax */
            fa_softmax_tile<NT, DT>([&](int j, int e) -> float & { return s[4 * j + e]; },
                                    [&](int j, int e) -> float & { return o[4 * j + e]; }, j0 + BC > g_klo, j0,
                                    tig, lim_a, lim_b, sl2, m_a, m_b, l_a, l_b);
            /* O += P V: the accumulators of key n-tiles 2 kk, 2 kk + 1 are
             * the A fragment of key k-step kk */
            uint32_t pf[BC / 16][4];
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                pf[kk][0] = frt_pack_bf16(s[8 * kk], s[8 * kk + 1]);
                pf[kk][1] = frt_pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
                pf[kk][2] = frt_pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
                pf[kk][3] = frt_pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
            }
            frt_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++)
                frt_wgmma_m64n128k16_rs(o, pf[kk], frt_wgmma_desc(vs + kk * 16 * 128, FA_WG_REG, 1024));
            frt_wgmma_commit();
            frt_wgmma_wait<0>();
            frt_wgmma_hold(o);
            frt_wgmma_hold(pf);
        }
        if (lane == 0) frt_mbar_arrive(empty_of(it)); /* this warp is done with tile it */
        if (threadIdx.x == 0 && it + 2 < ntiles) { /* tile it + 2 into tile it - 1's stage */
            const int q = seq + it - 1;
            if (q >= 0) frt_mbar_wait(mb + 8u * (uint32_t)(FA_WG_STAGES + q % FA_WG_STAGES), (q / FA_WG_STAGES) & 1);
            if (st_k || st_v) frt_bulk_wait_read<1>(); /* tile it - 1's stores have read its stage */
            issue(it + 2);
        }
        __syncwarp();
    }
    if (threadIdx.x == 0 && (st_k || st_v)) frt_bulk_wait<0>(); /* the stores are done */
    __syncthreads(); /* every stage is consumed: the next split may fill them */
    seq += ntiles;
    if (!w_active) return;
    fa_write_rows<HD>(a, [&](int j, int e) -> float & { return o[4 * j + e]; }, kvh, z, s_lo, tig, ra, rb, kend_a,
                      kend_b, m_a, m_b, l_a, l_b, 1.0f);
}

/* fa_kernel's two forms on fa_split_wg (blocks of FA_WG_ROWS rows). */
template <bool FUSE>
__global__ void __launch_bounds__(FA_WG_THREADS, 1) fa_wg_kernel(const __grid_constant__ fa_args a)
{
    const int kvh = blockIdx.y;
    if (threadIdx.x == 0) {
        const uint32_t mb = ((frt_smem_addr(fa_smem) + 1023u) & ~1023u) + FA_WG_MBAR;
        for (int i = 0; i < FA_WG_STAGES; i++) {
            frt_mbar_init(mb + 8u * i, 1);                         /* full: thread 0's arrive + the bytes */
            frt_mbar_init(mb + 8u * (FA_WG_STAGES + i), FA_WG_THREADS / 32); /* empty: a warp each */
        }
        frt_mbar_init_fence();
    }
    __syncthreads();
    int seq = 0;
    if constexpr (!FUSE) {
        fa_split_wg(a, blockIdx.x, kvh, blockIdx.z, seq);
        return;
    }
    fa_fused<128, FA_WG_ROWS>(a, kvh, [&](int xb, int z) { fa_split_wg(a, xb, kvh, z, seq); });
}

/* One block of HD threads per (token, head) row, thread d the output dim d:
 * merges the splits that hold keys of the token, in ascending order. Every
 * thread computes the row's M and L itself (the same operations, so the
 * same values); a 64-token append at 32k merges 65 splits per row, and a
 * block per row keeps ~60 warps per SM loading (a warp per row, 8 dims per
 * lane, was 47.6 us per layer there). */
template <int HD> __global__ void __launch_bounds__(HD) fa_combine_kernel(const fa_args a)
{
    frt_pdl_wait(); /* launched with PDL: the partials of the attention before */
    const long long pr = blockIdx.x;
    const int d = threadIdx.x;
    const int t = (int)(pr / a.n_heads);
    if (t >= frt_dyn_n(a.d_n, a.max_n)) return;
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kend = min(start + t + 1, a.max_seq);
    const int ns = (kend + a.split_len - 1) / a.split_len;
    const size_t stride = (size_t)a.max_n * a.n_heads;
    const float2 *ml = a.pml + pr;
    float M = -INFINITY;
#pragma unroll 4
    for (int s = 0; s < ns; s++) M = fmaxf(M, ml[s * stride].x);
    float L = 0.0f, acc = 0.0f;
    const float *po = a.po + (size_t)pr * HD + d;
#pragma unroll 4
    for (int s = 0; s < ns; s++) {
        const float2 v = ml[s * stride];
        const float w = exp2f(v.x - M);
        L = __fmaf_rn(v.y, w, L); /* explicit: fa_merge computes the same */
        acc = __fmaf_rn(po[s * stride * HD], w, acc);
    }
    const float inv = 1.0f / L;
    frt_st(a.out, a.out_dt, (size_t)pr * HD + d, acc * inv);
}

/* ---- host side ----------------------------------------------------------- */

/* The split length: about half of the launch's query rows,
 * max_n * n_heads / 2 keys, rounded up to a multiple of 64 (so tiles of 32
 * or 64 never straddle a split) and clamped to [FA_SPLIT_MIN, FA_SPLIT_MAX].
 * A function of the launch arguments only. The busy grid is then
 *   (max_n * n_heads / 64 row blocks) x (context / split_len) ~ context / 32
 * blocks whatever the bucket, more where the floor applies. For the 9B
 * (16 heads): a 256-token chunk (split 2048) has 128 blocks (~1 per SM on
 * 132 SMs) from a 4k context; a 64-token append (split 512) 64 at 2k, 256 at
 * 8k, 1024 at 32k. The floor bounds the split overhead (Q reload, partial
 * write and read: ~3 x head_dim x 4 bytes per row and split) against the
 * split's 4 x split_len x head_dim flops to >= ~170 flop/byte (the H200's
 * balance is ~60 at 300 TFLOP/s); the ceiling keeps some splitting for
 * large buckets and many heads. Until the fourteenth session / 4: on the
 * H100 / 2 took a 256-token chunk at 7936 (head_dim 256, 16 / 4 heads) from
 * 157.9 to 138.2 us and qwen3.5-9b's cold 8k prefill from 279.6 to 276.5 ms
 * (docs/PERF.md). */
static int fa_split_len(int max_n, int n_heads)
{
    long long l = ((long long)max_n * n_heads / 2 + 63) / 64 * 64;
    if (l < FA_SPLIT_MIN) l = FA_SPLIT_MIN;
    if (l > FA_SPLIT_MAX) l = FA_SPLIT_MAX;
    return (int)l;
}

/* The wgmma kernel's split length: max_n * n_heads / 2 keys rounded up to
 * a multiple of 128 (its key tile), in [1024, 8192]; never more splits
 * than fa_split_len gives (the workspace is sized by that). Its blocks are
 * twice as wide as the mma.sync kernel's and each split costs a Q load, a
 * pipeline start and a partial. Measured on the H100 (llama3.1-8b's
 * heads, docs/PERF.md) against / 4 and / 1: a group's pieces launch at
 * 6144 583.0 us against 669.8 and 543.0, a 256-row piece at 7936 88.5
 * against 97.2 and 150.8, a 64-row append at 8192 42.1 against 48.3 and
 * 47.3. */
#define FA_WG_SPLIT_DIV 2
static int fa_n_splits(int max_seq, int split_len)
{
    return (int)(((long long)max_seq + split_len - 1) / split_len);
}

/* A launch of at most 2 blocks of rows a KV head (an append of up to 64
 * tokens with a GQA group of 4) whose blocks at max_seq would need a
 * second wave on the device's sms multiprocessors takes longer splits, so
 * that they all run in one: ceil(max_seq / floor(sms / blocks of a split))
 * keys rounded up to 128 (llama3.1-8b's 64-token append at max_seq 8448:
 * 8 splits of 1152 keys, 128 blocks, instead of 9 of 1024, 144 blocks, of
 * which 12 waited for a free multiprocessor). A function of the launch's
 * sizes and the device only, never of the position. */
static int fa_wg_split_len(int max_n, int n_heads, int n_kv, int max_seq, int sms)
{
    long long l = ((long long)max_n * n_heads / FA_WG_SPLIT_DIV + 127) / 128 * 128;
    if (l < 1024) l = 1024;
    if (l > 8192) l = 8192;
    const int s = fa_split_len(max_n, n_heads);
    if (l < s) l = s;
    const long long xblocks = ((long long)max_n * (n_heads / n_kv) + FA_WG_ROWS - 1) / FA_WG_ROWS;
    const long long blocks = xblocks * n_kv;
    if (xblocks <= 2 && blocks <= sms && blocks * fa_n_splits(max_seq, (int)l) > sms) {
        const long long fit = sms / blocks;
        const long long l1 = ((max_seq + fit - 1) / fit + 127) / 128 * 128;
        if (l1 > l) l = l1;
    }
    return (int)l;
}

/* Workspace of one launch with exactly these sizes, its splits those of a
 * launch of split_rows rows (0: none; split_rows = max_n for a plain
 * launch). */
static size_t fa_need_bytes(int max_n, int split_rows, int max_seq, int n_heads, int head_dim)
{
    const int ns = fa_n_splits(max_seq, fa_split_len(split_rows, n_heads));
    if (ns <= 1) return 0;
    return (size_t)ns * max_n * n_heads * (head_dim + 2) * sizeof(float);
}

extern "C" size_t frt_cuda_attention_prefill_workspace_bytes(int max_n, int max_seq, int n_heads,
                                                             int head_dim)
{
    if (max_n <= 0 || max_seq <= 0 || n_heads <= 0 || head_dim <= 0) return 0;
    if ((long long)max_n * n_heads >= (1ll << 30) || max_seq >= (1 << 30)) return 0;
    /* The largest need over max_n' <= max_n: above the rows where the split
     * length reaches FA_SPLIT_MAX the need grows with max_n'. */
    size_t best = fa_need_bytes(max_n, max_n, max_seq, n_heads, head_dim);
    const int lim = (int)(4ll * FA_SPLIT_MAX / n_heads + 1);
    for (int m = 1; m <= max_n && m <= lim; m++) {
        const size_t b = fa_need_bytes(m, m, max_seq, n_heads, head_dim);
        if (b > best) best = b;
    }
    return best;
}

extern "C" size_t frt_cuda_attention_prefill_pieces_workspace_bytes(int max_n, int piece_rows, int max_seq,
                                                                    int n_heads, int head_dim)
{
    if (max_n <= 0 || piece_rows <= 0 || max_n % piece_rows || max_seq <= 0 || n_heads <= 0 || head_dim <= 0)
        return 0;
    if ((long long)max_n * n_heads >= (1ll << 30) || max_seq >= (1 << 30)) return 0;
    return fa_need_bytes(max_n, piece_rows, max_seq, n_heads, head_dim);
}

/* The attention kernel (blocks of rows_per_block rows) and, for split
 * partials outside the fused form, the combine. */
template <int HD>
static int fa_launch_with(void (*kernel)(const fa_args), int rows_per_block, int threads, int smem, const fa_args &a,
                          int n_splits, cudaStream_t s)
{
    FRT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const long long rows = (long long)a.max_n * a.group;
    dim3 grid((unsigned int)((rows + rows_per_block - 1) / rows_per_block), (unsigned int)a.n_kv,
              (unsigned int)(a.fuse ? 1 : n_splits));
    FRT_CUDA_TRY(frt_pdl_launch(kernel, grid, dim3(threads), smem, s, a));
    if (a.po && !a.fuse) {
        const long long pairs = (long long)a.max_n * a.n_heads;
        FRT_CUDA_TRY(frt_pdl_launch(fa_combine_kernel<HD>, dim3((unsigned int)pairs), dim3(HD), 0, s, a));
    }
    return 0;
}

template <int HD, bool F8> static int fa_launch(const fa_args &a, int n_splits, cudaStream_t s)
{
    return fa_launch_with<HD>(a.fuse ? fa_kernel<HD, F8, true> : fa_kernel<HD, F8, false>, FA_ROWS, FA_THREADS,
                              fa_cfg<HD, F8>::SMEM, a, n_splits, s);
}

/* head_dim 128 on a bf16 cache runs on wgmma (fa_split_wg) when a launch of
 * split_rows tokens fills whole 128-row blocks: then a piece's rows sit in
 * the same places of their blocks whether it runs alone or in a launch of
 * several pieces (the same rule for both, so the pieces launch of a group
 * and the launch of one of its pieces pick the same kernel). */
static bool fa_wg_ok(int head_dim, bool f8, int split_rows, int group)
{
    return head_dim == 128 && !f8 && (long long)split_rows * group % FA_WG_ROWS == 0;
}

/* The bf16 cache [max_seq, n_kv, 128] as a 2-D tensor map for the tensor
 * copies of fa_split_wg: rows of n_kv * 128 elements, boxes of 128 rows x
 * 64 columns, 128-byte swizzle, rows past max_seq read as zeros. The
 * driver's cuTensorMapEncodeTiled is looked up through the runtime once. */
static int fa_tensor_map(CUtensorMap *map, const void *cache, int max_seq, int n_kv)
{
    return frt_tensor_map_bf16(map, cache, max_seq, (long long)n_kv * 128, (long long)n_kv * 128 * 2, FA_WG_BC, 64,
                               "cuda attention_prefill");
}

static bool fa_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

extern "C" int frt_cuda_attention_prefill_head_ok(int head_dim)
{
    return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

/* frt_cuda_attention_prefill{,_pieces}{,_fp8}: the checks, the arguments,
 * the launch. k_scale / v_scale: NULL for bf16 caches, else E4M3 caches
 * (F8). split_rows: the key splits of a launch of that many rows (max_n for
 * a plain launch). */
template <bool F8>
static int fa_run(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q, frt_cuda_dtype q_dtype,
                  const void *k_cache, const void *v_cache, const float *k_scale, const float *v_scale,
                  const int32_t *d_start, const int32_t *d_n, int max_n, int split_rows, int max_seq, int n_heads,
                  int n_kv_heads, int head_dim, float scale, void *workspace, size_t workspace_bytes,
                  const void *src = NULL)
{
    FRT_ARG(out && q && k_cache && v_cache && d_start, "cuda attention_prefill: NULL pointer");
    FRT_ARG(!src || fa_aligned(src, 128), "cuda attention_prefill: the source must be 128-byte aligned");
    FRT_ARG(!F8 || (k_scale && v_scale), "cuda attention_prefill: NULL scales");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(q_dtype), "cuda attention_prefill: bad dtype");
    FRT_ARG(max_n >= 0 && max_seq > 0 && n_heads > 0 && n_kv_heads > 0 && n_kv_heads <= 65535 &&
                n_heads % n_kv_heads == 0,
            "cuda attention_prefill: max_n %d max_seq %d n_heads %d n_kv_heads %d", max_n,
            max_seq, n_heads, n_kv_heads);
    FRT_ARG((long long)max_seq + max_n < (1ll << 30) && (long long)max_n * n_heads < (1ll << 30),
            "cuda attention_prefill: sizes too large");
    FRT_ARG(isfinite(scale), "cuda attention_prefill: scale not finite");
    FRT_ARG(out != q, "cuda attention_prefill: out aliases q");
    if (!frt_cuda_attention_prefill_head_ok(head_dim))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda attention_prefill: head_dim %d (64, 128 or 256)", head_dim);
    if (!fa_aligned(q, 16) || !fa_aligned(out, 16) || !fa_aligned(k_cache, 16) ||
        !fa_aligned(v_cache, 16))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda attention_prefill: q, out and the caches must be 16-byte aligned");
    const bool wg = fa_wg_ok(head_dim, F8, split_rows, n_heads / n_kv_heads);
    int sms = 0;
    if (wg) {
        int dev = 0;
        FRT_CUDA_TRY(cudaGetDevice(&dev));
        FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    const int split_len =
        wg ? fa_wg_split_len(split_rows, n_heads, n_kv_heads, max_seq, sms) : fa_split_len(split_rows, n_heads);
    const int n_splits = fa_n_splits(max_seq, split_len);
    FRT_ARG(n_splits <= 65535, "cuda attention_prefill: more than 65535 splits");
    if (n_splits > 1) {
        const size_t need = fa_need_bytes(max_n, split_rows, max_seq, n_heads, head_dim);
        FRT_ARG(workspace && workspace_bytes >= need && fa_aligned(workspace, 16),
                "cuda attention_prefill: workspace of %zu bytes, %zu needed (16-byte aligned)",
                workspace_bytes, need);
    }
    if (src && !(wg && split_rows == max_n))
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda attention_prefill: a restore source needs the wgmma form "
                                              "(frt_cuda_attention_prefill_src_ok)");
    if (max_n == 0) return 0;

    fa_args a;
    a.out = out;
    a.out_dt = out_dtype;
    a.q = q;
    a.q_dt = q_dtype;
    a.kc = k_cache;
    a.vc = v_cache;
    a.ksc = k_scale;
    a.vsc = v_scale;
    a.d_start = d_start;
    a.d_n = d_n;
    a.max_n = max_n;
    a.max_seq = max_seq;
    a.n_heads = n_heads;
    a.n_kv = n_kv_heads;
    a.group = n_heads / n_kv_heads;
    a.split_len = split_len;
    a.fuse = n_splits > 1 && split_rows != max_n; /* the pieces launch: blocks enough without z splits */
    a.sl2 = (float)((double)scale * 1.4426950408889634);
    a.src = (const fa_kv_src *)src;
    if (n_splits > 1) {
        a.po = (float *)workspace;
        a.pml = (float2 *)((char *)workspace +
                           (size_t)n_splits * max_n * n_heads * head_dim * sizeof(float));
    } else {
        a.po = NULL;
        a.pml = NULL;
    }
    cudaStream_t s = (cudaStream_t)stream;
    if (wg) {
        FRT_TRY(fa_tensor_map(&a.tmk, k_cache, max_seq, n_kv_heads));
        FRT_TRY(fa_tensor_map(&a.tmv, v_cache, max_seq, n_kv_heads));
        return fa_launch_with<128>(a.fuse ? fa_wg_kernel<true> : fa_wg_kernel<false>, FA_WG_ROWS, FA_WG_THREADS,
                                   FA_WG_SMEM, a, n_splits, s);
    }
    switch (head_dim) {
    case 64: return fa_launch<64, F8>(a, n_splits, s);
    case 128: return fa_launch<128, F8>(a, n_splits, s);
    default: return fa_launch<256, F8>(a, n_splits, s);
    }
}

extern "C" int frt_cuda_attention_prefill(void *stream, void *out, frt_cuda_dtype out_dtype,
                                          const void *q, frt_cuda_dtype q_dtype,
                                          const uint16_t *k_cache, const uint16_t *v_cache,
                                          const int32_t *d_start, const int32_t *d_n, int max_n,
                                          int max_seq, int n_heads, int n_kv_heads, int head_dim,
                                          float scale, void *workspace, size_t workspace_bytes)
{
    return fa_run<false>(stream, out, out_dtype, q, q_dtype, k_cache, v_cache, NULL, NULL, d_start, d_n, max_n,
                         max_n, max_seq, n_heads, n_kv_heads, head_dim, scale, workspace, workspace_bytes);
}

extern "C" int frt_cuda_attention_prefill_src_ok(int max_n, int n_heads, int n_kv_heads, int head_dim)
{
    return max_n > 0 && n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 &&
           fa_wg_ok(head_dim, false, max_n, n_heads / n_kv_heads);
}

extern "C" int frt_cuda_attention_prefill_src(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                              frt_cuda_dtype q_dtype, const uint16_t *k_cache,
                                              const uint16_t *v_cache, const int32_t *d_start, const int32_t *d_n,
                                              int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                                              float scale, void *workspace, size_t workspace_bytes,
                                              const void *d_src)
{
    FRT_ARG(d_src, "cuda attention_prefill_src: NULL source");
    return fa_run<false>(stream, out, out_dtype, q, q_dtype, k_cache, v_cache, NULL, NULL, d_start, d_n, max_n,
                         max_n, max_seq, n_heads, n_kv_heads, head_dim, scale, workspace, workspace_bytes, d_src);
}

extern "C" int frt_cuda_kv_src_encode(void *desc, const void *k_rows, const void *v_rows, int rows, int n_kv_heads,
                                      int head_dim)
{
    FRT_ARG(desc && rows >= 0 && n_kv_heads > 0, "cuda kv_src_encode: bad arguments");
    fa_kv_src *d = (fa_kv_src *)desc;
    memset(d, 0, sizeof *d);
    if (rows == 0) return 0;
    FRT_ARG(k_rows && v_rows, "cuda kv_src_encode: NULL rows");
    if (head_dim != 128 || rows % FA_WG_BC != 0 || !fa_aligned(k_rows, 16) || !fa_aligned(v_rows, 16))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda kv_src_encode: head_dim %d (128), %d rows (a multiple of %d), 16-byte aligned rows",
                         head_dim, rows, FA_WG_BC);
    FRT_TRY(fa_tensor_map(&d->k, k_rows, rows, n_kv_heads));
    FRT_TRY(fa_tensor_map(&d->v, v_rows, rows, n_kv_heads));
    d->rows = rows;
    return 0;
}

extern "C" int frt_cuda_attention_prefill_pieces(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                                 frt_cuda_dtype q_dtype, const uint16_t *k_cache,
                                                 const uint16_t *v_cache, const int32_t *d_start, const int32_t *d_n,
                                                 int max_n, int piece_rows, int max_seq, int n_heads, int n_kv_heads,
                                                 int head_dim, float scale, void *workspace, size_t workspace_bytes)
{
    FRT_ARG(piece_rows > 0 && max_n % piece_rows == 0, "cuda attention_prefill_pieces: %d rows in pieces of %d",
            max_n, piece_rows);
    return fa_run<false>(stream, out, out_dtype, q, q_dtype, k_cache, v_cache, NULL, NULL, d_start, d_n, max_n,
                         piece_rows, max_seq, n_heads, n_kv_heads, head_dim, scale, workspace, workspace_bytes);
}

extern "C" int frt_cuda_attention_prefill_pieces_fp8(void *stream, void *out, frt_cuda_dtype out_dtype,
                                                     const void *q, frt_cuda_dtype q_dtype, const uint8_t *k_cache,
                                                     const uint8_t *v_cache, const float *k_scale,
                                                     const float *v_scale, const int32_t *d_start, const int32_t *d_n,
                                                     int max_n, int piece_rows, int max_seq, int n_heads,
                                                     int n_kv_heads, int head_dim, float scale, void *workspace,
                                                     size_t workspace_bytes)
{
    FRT_ARG(piece_rows > 0 && max_n % piece_rows == 0, "cuda attention_prefill_pieces: %d rows in pieces of %d",
            max_n, piece_rows);
    return fa_run<true>(stream, out, out_dtype, q, q_dtype, k_cache, v_cache, k_scale, v_scale, d_start, d_n, max_n,
                        piece_rows, max_seq, n_heads, n_kv_heads, head_dim, scale, workspace, workspace_bytes);
}

extern "C" int frt_cuda_attention_prefill_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                              frt_cuda_dtype q_dtype, const uint8_t *k_cache,
                                              const uint8_t *v_cache, const float *k_scale, const float *v_scale,
                                              const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                                              int n_heads, int n_kv_heads, int head_dim, float scale,
                                              void *workspace, size_t workspace_bytes)
{
    return fa_run<true>(stream, out, out_dtype, q, q_dtype, k_cache, v_cache, k_scale, v_scale, d_start, d_n,
                        max_n, max_n, max_seq, n_heads, n_kv_heads, head_dim, scale, workspace, workspace_bytes);
}
