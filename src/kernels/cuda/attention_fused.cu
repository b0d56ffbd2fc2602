/*
 * kernels/cuda/attention_fused.cu - the masked attention of a policy with
 * one KV head in ONE launch (kernels_policy_cuda.h: frt_cuda_attention_fused):
 * the expert's action-token queries over the prefix KV (key mask) and the
 * suffix KV (block-causal), what frt_cuda_attention_masked does in three
 * launches (S = scale Q K^T, the masked softmax, O = P V).
 *
 * Math: the twin frt_cpu_attention_masked under the mask of
 * frt_cuda_attn_mask (openpi pi0_pytorch.py make_att_2d_masks); the
 * algorithm is FlashAttention-2's online softmax (Dao, 2023,
 * arXiv:2307.08691), per key tile
 *   S = Q K^T;  m' = max(m, rowmax S);  P = exp(S - m');
 *   l = l exp(m - m') + rowsum P;  O = O exp(m - m') + P V
 * with scores scaled by scale * log2(e) (exp2f). Q, K, V are bf16 as
 * stored; P is rounded to bf16 for the P V product (unnormalised, in
 * [0, 1]); everything else is fp32 (bf16 mma.sync m16n8k16, fp32
 * accumulators, mma_util.h).
 *
 * Layout of the work. With one KV head the query rows are the (token, head)
 * pairs r = t * n_heads + h, contiguous rows of head_dim in q and out, and
 * every row reads the same keys. A thread block cluster of AF_SPLITS blocks
 * takes 64 consecutive rows (blockIdx.y) of one attention of the batch
 * (blockIdx.z); block s of the cluster (blockIdx.x) takes the keys of split
 * s, [s split_len, (s + 1) split_len), split_len = n_kv / AF_SPLITS rounded
 * up to the key tile, so the cluster reads each key once and the grid has
 * AF_SPLITS x the row blocks. In a block, warp w owns rows 16 w .. 16 w + 15
 * (the m16 of the mma); key tiles of AF_BC keys are staged with cp.async
 * into a double buffer of swizzled rows (16-byte chunk c of row r at
 * c ^ (r & 7), fewer bits below 8 chunks a row), so every ldmatrix hits
 * distinct banks. Keys past the split are zero-filled and masked. The
 * partials (unnormalised O, and m, l per row) go to the block's own shared
 * memory; after a cluster barrier block s merges rows 8 s .. 8 s + 7 of the
 * 64 over the AF_SPLITS blocks (distributed shared memory) in ascending
 * split order:
 *   M = max m_s;  L = sum l_s 2^(m_s - M);  out = (sum O_s 2^(m_s - M)) / L
 * and writes them in bf16; a row without an allowed key (every m_s = -inf)
 * gets zeros, as the softmax's masked rows do. A second barrier keeps every
 * block's shared memory alive until the merges have read it.
 *
 * Deterministic: no atomics; fixed mma, quad and merge orders, a function
 * of the sizes only. Tested against frt_cpu_attention_masked in
 * tests/test_cuda_policy_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/mma_util.h"
#include "kernels/cuda/policy_util.h"

#include <cooperative_groups.h>
#include <math.h>
#include <string.h>

namespace cg = cooperative_groups;

#define AF_WARPS 4
#define AF_THREADS (32 * AF_WARPS)
#define AF_ROWS (16 * AF_WARPS) /* query rows per block */
#define AF_BC 32                /* keys per tile */
#define AF_SPLITS 8             /* blocks per cluster: key splits (the portable cluster limit) */
#define AF_MERGE_ROWS (AF_ROWS / AF_SPLITS)

template <int HD> struct af_cfg {
    static constexpr int CH = HD / 8;                    /* 16-byte chunks a row */
    static constexpr int SWM = CH >= 8 ? 7 : CH - 1;     /* swizzle bits */
    static constexpr int ROWB = HD * 2;                  /* bytes a staged row */
    static constexpr int TBYTES = AF_BC * ROWB;          /* one K or V tile */
    static constexpr int QBYTES = AF_ROWS * ROWB;
    static constexpr int STAGE = QBYTES + 4 * TBYTES;    /* Q, (K, V) x 2 */
    static constexpr int MERGE = AF_ROWS * HD * 4 + AF_ROWS * 8; /* O f32, (m, l) */
    static constexpr int SMEM = STAGE > MERGE ? STAGE : MERGE;
};

struct af_args {
    __nv_bfloat16 *out;
    const __nv_bfloat16 *q, *k, *v;
    long long ldkv, sq, skv, sout;
    int rows, heads, n_kv, split_len;
    float sl2; /* scale * log2(e) */
    frt_cuda_attn_mask mask;
    /* RoPE on load (frt_cuda_attn_rope; qkv NULL: q, k, v as stored) */
    const float *qkv, *cs;
    long long s_cs;
    int n_q;
};

/* Byte offset of chunk c of staged row r. */
template <int HD> __device__ __forceinline__ uint32_t af_swz(int r, int c)
{
    using C = af_cfg<HD>;
    return (uint32_t)(r * C::ROWB + ((c ^ (r & C::SWM)) << 4));
}

/* Key j is allowed to token t (frt_cuda_attn_mask; km: this batch's key
 * mask; j below the split's end). */
__device__ __forceinline__ bool af_allowed(const frt_cuda_attn_mask &m, const uint8_t *km, int t, int j)
{
    if (j < m.kmask_len) return !km || __ldg(km + j);
    return frt_attn_suffix_allowed(m, t, j);
}

/* The per-warp running state of 16 rows: lane (gid, tig) holds rows gid
 * (a) and gid + 8 (b), O columns 8 j + 2 tig, + 1. */
template <int HD> struct af_rows {
    float o[HD / 8][4];
    float m_a, m_b, l_a, l_b;
};

/* The mask and scale of one S tile, then the online-softmax update of st:
 * s becomes P (fp32), st.o rescaled. key0: the tile's first key; on_a /
 * on_b: the rows are real and not row-masked; hi: the split's end. */
template <int HD>
__device__ __forceinline__ void af_softmax(float (&s)[AF_BC / 8][4], af_rows<HD> &st, const af_args &a,
                                           const uint8_t *km, int key0, int hi, int ta, int tb, bool on_a,
                                           bool on_b)
{
    const int tig = threadIdx.x & 3;
    float mx_a = st.m_a, mx_b = st.m_b;
#pragma unroll
    for (int j = 0; j < AF_BC / 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = key0 + 8 * j + 2 * tig + (e & 1);
            const bool on = (e < 2 ? on_a : on_b) && key < hi && af_allowed(a.mask, km, e < 2 ? ta : tb, key);
            s[j][e] = on ? s[j][e] * a.sl2 : -INFINITY;
        }
        mx_a = fmaxf(mx_a, fmaxf(s[j][0], s[j][1]));
        mx_b = fmaxf(mx_b, fmaxf(s[j][2], s[j][3]));
    }
    mx_a = frt_quad_max(mx_a), mx_b = frt_quad_max(mx_b);
    /* no allowed key so far: m stays -inf, subtract 0 (exp2 gives 0, not NaN) */
    const float mu_a = mx_a == -INFINITY ? 0.0f : mx_a, mu_b = mx_b == -INFINITY ? 0.0f : mx_b;
    const float c_a = exp2f(st.m_a - mu_a), c_b = exp2f(st.m_b - mu_b);
    st.m_a = mx_a, st.m_b = mx_b;
    float rs_a = 0.0f, rs_b = 0.0f;
#pragma unroll
    for (int j = 0; j < AF_BC / 8; j++) {
        s[j][0] = exp2f(s[j][0] - mu_a), s[j][1] = exp2f(s[j][1] - mu_a);
        s[j][2] = exp2f(s[j][2] - mu_b), s[j][3] = exp2f(s[j][3] - mu_b);
        rs_a += s[j][0] + s[j][1];
        rs_b += s[j][2] + s[j][3];
    }
    st.l_a = st.l_a * c_a + rs_a;
    st.l_b = st.l_b * c_b + rs_b;
#pragma unroll
    for (int j = 0; j < HD / 8; j++) st.o[j][0] *= c_a, st.o[j][1] *= c_a, st.o[j][2] *= c_b, st.o[j][3] *= c_b;
}

/* S (16 x AF_BC) = Q K^T of the warp's rows over one staged K tile. */
template <int HD>
__device__ __forceinline__ void af_scores(float (&s)[AF_BC / 8][4], uint32_t qs, uint32_t ks, int warp, int lane)
{
    const int q_row = warp * 16 + (lane & 15), q_hi = lane >> 4;
    const int k_row = (lane & 7) + ((lane >> 4) << 3), k_hi = (lane >> 3) & 1;
#pragma unroll
    for (int j = 0; j < AF_BC / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t af[4];
        frt_ldsm_x4(af, qs + af_swz<HD>(q_row, 2 * kk + q_hi));
#pragma unroll
        for (int np = 0; np < AF_BC / 16; np++) {
            uint32_t b[4];
            frt_ldsm_x4(b, ks + af_swz<HD>(k_row + 16 * np, 2 * kk + k_hi));
            frt_mma_bf16(s[2 * np], af, b[0], b[1]);
            frt_mma_bf16(s[2 * np + 1], af, b[2], b[3]);
        }
    }
}

/* O += P V over one staged V tile: the accumulators of key n-tiles 2 kk,
 * 2 kk + 1 are the A fragment of key step kk. */
template <int HD>
__device__ __forceinline__ void af_pv(af_rows<HD> &st, const float (&s)[AF_BC / 8][4], uint32_t vs, int lane)
{
    const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3), v_hi = lane >> 4;
#pragma unroll
    for (int kk = 0; kk < AF_BC / 16; kk++) {
        uint32_t pf[4];
        frt_acc_to_a(pf, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
        for (int dp = 0; dp < HD / 16; dp++) {
            uint32_t b[4];
            frt_ldsm_x4_trans(b, vs + af_swz<HD>(v_row + 16 * kk, 2 * dp + v_hi));
            frt_mma_bf16(st.o[2 * dp], pf, b[0], b[1]);
            frt_mma_bf16(st.o[2 * dp + 1], pf, b[2], b[3]);
        }
    }
}

/* n floats (a multiple of 4) from 16-byte aligned src into dst. */
template <int N> __device__ __forceinline__ void af_ld(float (&dst)[N], const float *src)
{
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4 v = __ldg(reinterpret_cast<const float4 *>(src + i));
        dst[i] = v.x, dst[i + 1] = v.y, dst[i + 2] = v.z, dst[i + 3] = v.w;
    }
}

/* 8 floats as bf16 (RNE), in order. */
__device__ __forceinline__ uint4 af_pack8(const float (&o)[8])
{
    return make_uint4(frt_pack_bf16(o[0], o[1]), frt_pack_bf16(o[2], o[3]), frt_pack_bf16(o[4], o[5]),
                      frt_pack_bf16(o[6], o[7]));
}

/* Chunks c and c + CH / 2 (c < CH / 2: the 8 rotated pairs p = 8 c ..
 * 8 c + 7) of one head of the f32 projection src (HD floats, 16-byte
 * aligned), RoPE'd at cs [HD / 2][2] (cos, sin), as bf16 into the staged
 * row r at byte offset base:
 *   lo[p] = x1 cos - x2 sin,  hi[p] = x2 cos + x1 sin   (x1 = src[p], x2 = src[p + HD / 2])
 * the expression and rounding steps of pi0_cuda_qkv_rope: the same bits. */
template <int HD>
__device__ __forceinline__ void af_rope_pair(unsigned char *smem, uint32_t base, int r, int c, const float *src,
                                             const float *cs)
{
    constexpr int half = HD / 2;
    float x1[8], x2[8], t[16], lo[8], hi[8];
    af_ld<8>(x1, src + 8 * c);
    af_ld<8>(x2, src + 8 * c + half);
    af_ld<16>(t, cs + 16 * c);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const float co = t[2 * e], si = t[2 * e + 1];
        frt_rope_rotate(x1[e], x2[e], co, si, &lo[e], &hi[e]);
    }
    *reinterpret_cast<uint4 *>(smem + base + af_swz<HD>(r, c)) = af_pack8(lo);
    *reinterpret_cast<uint4 *>(smem + base + af_swz<HD>(r, c + af_cfg<HD>::CH / 2)) = af_pack8(hi);
}

/* Chunks c and c + CH / 2 of one head of src converted to bf16 (V). */
template <int HD>
__device__ __forceinline__ void af_convert_pair(unsigned char *smem, uint32_t base, int r, int c, const float *src)
{
    constexpr int CH = af_cfg<HD>::CH;
    float x[8];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        af_ld<8>(x, src + 8 * (c + k * CH / 2));
        *reinterpret_cast<uint4 *>(smem + base + af_swz<HD>(r, c + k * CH / 2)) = af_pack8(x);
    }
}

/* Rows [r0, r0 + AF_ROWS) of q (zeros past rows) into the staged Q: from
 * q as stored, or (RoPE on load) query row `row` (token t = row / heads,
 * head row % heads) of attention b from the projection, RoPE'd at token
 * t, a rotated pair of chunks per item. */
template <int HD>
__device__ __forceinline__ void af_load_q(unsigned char *smem, const af_args &a, const __nv_bfloat16 *q, int b,
                                          int r0)
{
    constexpr int CH = af_cfg<HD>::CH;
    const uint32_t qs = frt_smem_addr(smem);
    const int per = a.qkv ? CH / 2 : CH; /* items a row */
    for (int i = threadIdx.x; i < AF_ROWS * per; i += AF_THREADS) {
        const int r = i / per, c = i % per, row = r0 + r;
        if (row >= a.rows) {
            *reinterpret_cast<uint4 *>(smem + af_swz<HD>(r, c)) = make_uint4(0u, 0u, 0u, 0u);
            if (a.qkv) *reinterpret_cast<uint4 *>(smem + af_swz<HD>(r, c + CH / 2)) = make_uint4(0u, 0u, 0u, 0u);
        } else if (a.qkv) {
            const int t = row / a.heads, h = row - t * a.heads;
            const float *src = a.qkv + ((size_t)b * a.n_q + t) * (size_t)(a.heads + 2) * HD + (size_t)h * HD;
            af_rope_pair<HD>(smem, 0, r, c, src, a.cs + b * a.s_cs + (size_t)t * HD);
        } else {
            frt_cp_async16(qs + af_swz<HD>(r, c), q + (size_t)row * HD + c * 8, 16);
        }
    }
}

/* With RoPE on load: suffix key j (token s = j - sfx_start) of attention
 * b from the projection, its K RoPE'd at token s and its V converted:
 * chunks c and c + CH / 2 of staged row r (smem offsets ko, vo). */
template <int HD>
__device__ __forceinline__ void af_rope_kv(unsigned char *smem, uint32_t ko, uint32_t vo, const af_args &a, int b,
                                           int s, int r, int c)
{
    const float *src = a.qkv + ((size_t)b * a.n_q + s) * (size_t)(a.heads + 2) * HD + (size_t)a.heads * HD;
    af_rope_pair<HD>(smem, ko, r, c, src, a.cs + b * a.s_cs + (size_t)s * HD);
    af_convert_pair<HD>(smem, vo, r, c, src + HD);
}

/* Keys [j0, j0 + AF_BC) of K and V (zeros from hi on) into the stage at
 * byte offsets ko, vo of the dynamic area: from the cache, or (RoPE on
 * load) the suffix keys from the projection. */
template <int HD>
__device__ __forceinline__ void af_load_kv(unsigned char *smem, uint32_t ko, uint32_t vo, const af_args &a,
                                           const __nv_bfloat16 *k, const __nv_bfloat16 *v, int b, int j0, int hi)
{
    constexpr int CH = af_cfg<HD>::CH;
    const uint32_t base = frt_smem_addr(smem);
    for (int i = threadIdx.x; i < AF_BC * CH; i += AF_THREADS) {
        const int r = i / CH, c = i % CH, j = j0 + r, s = j - a.mask.sfx_start;
        const bool ok = j < hi;
        if (a.qkv && ok && s >= 0 && s < a.mask.sfx_n) { /* item (r, c < CH / 2) stages both chunks */
            if (c < CH / 2) af_rope_kv<HD>(smem, ko, vo, a, b, s, r, c);
            continue;
        }
        const size_t g = ok ? (size_t)j * a.ldkv + c * 8 : 0;
        frt_cp_async16(base + ko + af_swz<HD>(r, c), k + g, ok ? 16 : 0);
        frt_cp_async16(base + vo + af_swz<HD>(r, c), v + g, ok ? 16 : 0);
    }
}

/* The warp's partials into this block's shared memory: O [AF_ROWS, HD] f32
 * (row-major), then (m, l) [AF_ROWS] (l summed over the quad). */
template <int HD> __device__ __forceinline__ void af_put_partial(unsigned char *smem, af_rows<HD> &st, int warp, int lane)
{
    float *po = reinterpret_cast<float *>(smem);
    float2 *pml = reinterpret_cast<float2 *>(po + AF_ROWS * HD);
    const int gid = lane >> 2, tig = lane & 3, ra = warp * 16 + gid;
    st.l_a = frt_quad_sum(st.l_a), st.l_b = frt_quad_sum(st.l_b);
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
        *reinterpret_cast<float2 *>(po + ra * HD + 8 * j + 2 * tig) = make_float2(st.o[j][0], st.o[j][1]);
        *reinterpret_cast<float2 *>(po + (ra + 8) * HD + 8 * j + 2 * tig) = make_float2(st.o[j][2], st.o[j][3]);
    }
    if (tig == 0) pml[ra] = make_float2(st.m_a, st.l_a), pml[ra + 8] = make_float2(st.m_b, st.l_b);
}

/* Block `rank` merges rows AF_MERGE_ROWS rank .. + AF_MERGE_ROWS - 1 of the
 * cluster's row block over every split, in split order, into out: a thread
 * takes 4 columns of a row at a time, with the 2 x AF_SPLITS remote loads
 * of that item (m, l and 4 values of O from each split) all in flight. */
template <int HD>
__device__ __forceinline__ void af_merge(cg::cluster_group &cluster, unsigned char *smem, __nv_bfloat16 *out, int r0,
                                         int rows, int rank)
{
    constexpr int V4 = HD / 4; /* float4 columns a row */
    const float *po = reinterpret_cast<const float *>(smem);
    const float2 *pml = reinterpret_cast<const float2 *>(po + AF_ROWS * HD);
    for (int idx = threadIdx.x; idx < AF_MERGE_ROWS * V4; idx += AF_THREADS) {
        const int lr = rank * AF_MERGE_ROWS + idx / V4, c4 = idx % V4;
        if (r0 + lr >= rows) continue;
        float2 ml[AF_SPLITS];
        float4 o[AF_SPLITS];
#pragma unroll
        for (int s = 0; s < AF_SPLITS; s++) {
            ml[s] = *cluster.map_shared_rank(pml + lr, s);
            o[s] = *cluster.map_shared_rank(reinterpret_cast<const float4 *>(po + lr * HD) + c4, s);
        }
        float M = -INFINITY, L = 0.0f;
#pragma unroll
        for (int s = 0; s < AF_SPLITS; s++) M = fmaxf(M, ml[s].x);
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int s = 0; s < AF_SPLITS; s++) {
            const float w = M == -INFINITY ? 0.0f : exp2f(ml[s].x - M);
            L += ml[s].y * w;
            acc.x += o[s].x * w, acc.y += o[s].y * w, acc.z += o[s].z * w, acc.w += o[s].w * w;
        }
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        const uint2 pk = make_uint2(frt_pack_bf16(acc.x * inv, acc.y * inv), frt_pack_bf16(acc.z * inv, acc.w * inv));
        *reinterpret_cast<uint2 *>(out + (size_t)(r0 + lr) * HD + 4 * c4) = pk;
    }
}

template <int HD> __global__ void __launch_bounds__(AF_THREADS) af_kernel(const af_args a)
{
    using C = af_cfg<HD>;
    extern __shared__ __align__(128) unsigned char af_smem[];
    cg::cluster_group cluster = cg::this_cluster();
    frt_pdl_wait(); /* q / k / v come from the kernels before (a no-op without the attribute) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2;
    const int rank = (int)cluster.block_rank(), b = blockIdx.z, r0 = blockIdx.y * AF_ROWS;
    const __nv_bfloat16 *q = a.q + b * a.sq, *k = a.k + b * a.skv, *v = a.v + b * a.skv;
    const uint8_t *km = a.mask.d_kmask ? a.mask.d_kmask + b * a.mask.kmask_stride : NULL;
    const int lo = rank * a.split_len, hi = min(lo + a.split_len, a.n_kv);
    const int ntiles = hi > lo ? (hi - lo + AF_BC - 1) / AF_BC : 0;
    const uint32_t qs = frt_smem_addr(af_smem), kv0 = qs + C::QBYTES, ko0 = C::QBYTES;

    af_load_q<HD>(af_smem, a, q, b, r0);
    if (ntiles > 0) af_load_kv<HD>(af_smem, ko0, ko0 + C::TBYTES, a, k, v, b, lo, hi);
    frt_cp_async_commit();

    const int ra = r0 + warp * 16 + gid, rb = ra + 8, ta = ra / a.heads, tb = rb / a.heads;
    const bool w_on = r0 + warp * 16 < a.rows; /* warp-uniform */
    const uint8_t *rm = a.mask.d_rmask ? a.mask.d_rmask + b * a.mask.kmask_stride : NULL;
    const bool on_a = ra < a.rows && (!rm || rm[ta]);
    const bool on_b = rb < a.rows && (!rm || rm[tb]);
    af_rows<HD> st;
#pragma unroll
    for (int j = 0; j < HD / 8; j++) st.o[j][0] = st.o[j][1] = st.o[j][2] = st.o[j][3] = 0.0f;
    st.m_a = st.m_b = -INFINITY, st.l_a = st.l_b = 0.0f;

    for (int it = 0; it < ntiles; it++) {
        const uint32_t nxt = ko0 + (uint32_t)((it + 1) & 1) * 2 * C::TBYTES;
        if (it + 1 < ntiles) af_load_kv<HD>(af_smem, nxt, nxt + C::TBYTES, a, k, v, b, lo + (it + 1) * AF_BC, hi);
        frt_cp_async_commit();
        frt_cp_async_wait<1>(); /* tile it (and Q) landed: this thread's copies */
        __syncthreads();        /* ... and every thread's */
        if (w_on) {
            const uint32_t ks = kv0 + (uint32_t)(it & 1) * 2 * C::TBYTES;
            float s[AF_BC / 8][4];
            af_scores<HD>(s, qs, ks, warp, lane);
            af_softmax<HD>(s, st, a, km, lo + it * AF_BC, hi, ta, tb, on_a, on_b);
            af_pv<HD>(st, s, ks + C::TBYTES, lane);
        }
        __syncthreads(); /* this stage is consumed before tile it + 2 lands in it */
    }
    frt_cp_async_wait<0>(); /* Q's copies too when the split has no key */
    __syncthreads();        /* the partials overwrite the staging area */
    af_put_partial<HD>(af_smem, st, warp, lane);
    cluster.sync(); /* every split's partials are in place */
    af_merge<HD>(cluster, af_smem, a.out + b * a.sout, r0, a.rows, rank);
    cluster.sync(); /* no block leaves while another reads its partials */
}

/* ---- host side ----------------------------------------------------------- */

static bool af_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The checks of the RoPE-on-load form (rope not NULL). */
static int af_check_rope(const frt_cuda_attn_args *a, const frt_cuda_attn_rope *rope)
{
    FRT_ARG(rope->qkv && rope->cs, "attention_fused: NULL rope.qkv or rope.cs");
    FRT_ARG(rope->s_cs >= 0 && a->mask.sfx_n <= a->n_q,
            "attention_fused: rope.s_cs %lld, or %d suffix keys from %d query tokens", rope->s_cs, a->mask.sfx_n,
            a->n_q);
    if (!af_aligned16(rope->qkv) || !af_aligned16(rope->cs) || rope->s_cs % 4)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_fused: rope.qkv, rope.cs and rope.s_cs must be 16-byte aligned");
    return 0;
}

extern "C" int frt_cuda_attention_fused_check(const frt_cuda_attn_args *a, const frt_cuda_attn_rope *rope)
{
    FRT_ARG(a && a->out && (a->q || rope) && a->k && a->v, "attention_fused: NULL pointer");
    FRT_ARG(a->n_q >= 1 && a->n_kv >= 1 && a->n_heads >= 1 && a->n_kv_heads >= 1 && a->head_dim >= 1,
            "attention_fused: sizes n_q %d n_kv %d heads %d/%d head_dim %d", a->n_q, a->n_kv, a->n_heads,
            a->n_kv_heads, a->head_dim);
    FRT_ARG(a->batch >= 0 && a->batch <= 65535 && a->sq >= 0 && a->skv >= 0 && a->sout >= 0,
            "attention_fused: batch %d or a negative stride", a->batch);
    const frt_cuda_attn_mask *m = &a->mask;
    FRT_ARG(m->kmask_len >= 0 && m->sfx_start >= m->kmask_len && m->sfx_n >= 0, "attention_fused: bad mask");
    FRT_ARG((long long)a->n_q * a->n_heads < (1ll << 30) && a->n_kv < (1 << 30), "attention_fused: sizes too large");
    FRT_ARG(a->ldkv >= a->head_dim, "attention_fused: ldkv %d < head_dim %d", a->ldkv, a->head_dim);
    FRT_ARG((const void *)a->out != (const void *)a->q, "attention_fused: out aliases q");
    if (a->n_kv_heads != 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_fused: %d KV heads (one KV head only)", a->n_kv_heads);
    const int hd = a->head_dim;
    if (hd != 16 && hd != 32 && hd != 64 && hd != 128 && hd != 256)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_fused: head_dim %d (16, 32, 64, 128 or 256)", hd);
    if (a->ldq != a->n_heads * hd)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_fused: query rows must be contiguous (ldq %d)", a->ldq);
    const int nb = a->batch > 1 ? a->batch : 1;
    if (!af_aligned16(a->out) || (!rope && !af_aligned16(a->q)) || !af_aligned16(a->k) || !af_aligned16(a->v) ||
        a->ldkv % 8 || (nb > 1 && (a->sq % 8 || a->skv % 8 || a->sout % 8)))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "attention_fused: q, k, v, out, ldkv and the batch strides must be 16-byte aligned");
    return rope ? af_check_rope(a, rope) : 0;
}

template <int HD> static int af_launch(const af_args &a, int row_blocks, int batch, cudaStream_t stream)
{
    using C = af_cfg<HD>;
    FRT_CUDA_TRY(cudaFuncSetAttribute(af_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = AF_SPLITS;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(AF_SPLITS, (unsigned int)row_blocks, (unsigned int)batch);
    cfg.blockDim = dim3(AF_THREADS);
    cfg.dynamicSmemBytes = C::SMEM;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1 + frt_pdl_attr(&attr[1]);
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, af_kernel<HD>, a));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_attention_fused(void *stream, const frt_cuda_attn_args *a, const frt_cuda_attn_rope *rope)
{
    FRT_TRY(frt_cuda_attention_fused_check(a, rope));
    af_args p;
    memset(&p, 0, sizeof p);
    p.out = (__nv_bfloat16 *)a->out;
    p.q = (const __nv_bfloat16 *)a->q, p.k = (const __nv_bfloat16 *)a->k, p.v = (const __nv_bfloat16 *)a->v;
    p.ldkv = a->ldkv, p.sq = a->sq, p.skv = a->skv, p.sout = a->sout;
    p.rows = a->n_q * a->n_heads, p.heads = a->n_heads, p.n_kv = a->n_kv;
    const int per = (a->n_kv + AF_SPLITS - 1) / AF_SPLITS;
    p.split_len = (per + AF_BC - 1) / AF_BC * AF_BC;
    p.sl2 = (float)((double)a->scale * 1.4426950408889634);
    p.mask = a->mask;
    if (a->batch <= 1) p.mask.kmask_stride = 0;
    if (rope) p.qkv = rope->qkv, p.cs = rope->cs, p.s_cs = a->batch > 1 ? rope->s_cs : 0, p.n_q = a->n_q;
    const int row_blocks = (p.rows + AF_ROWS - 1) / AF_ROWS, batch = a->batch > 1 ? a->batch : 1;
    FRT_ARG(row_blocks <= 65535, "attention_fused: %d row blocks (65535 at most)", row_blocks);
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->head_dim) {
    case 16: return af_launch<16>(p, row_blocks, batch, s);
    case 32: return af_launch<32>(p, row_blocks, batch, s);
    case 64: return af_launch<64>(p, row_blocks, batch, s);
    case 128: return af_launch<128>(p, row_blocks, batch, s);
    default: return af_launch<256>(p, row_blocks, batch, s);
    }
}
