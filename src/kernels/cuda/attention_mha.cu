/*
 * kernels/cuda/attention_mha.cu - unmasked multi-head attention over at
 * most 256 keys in ONE launch (kernels_policy_cuda.h: frt_cuda_attention_mha):
 * SigLIP's self-attention within each camera (every patch sees every
 * patch), which frt_cuda_attention_masked_many did as 2 n + 1 launches
 * for n cameras (S = scale Q K^T per camera, one softmax, P V per camera).
 *
 * Math: the twin frt_cpu_attention_masked with every key allowed
 * (SiglipAttention, transformers modeling_siglip.py); the algorithm is
 * FlashAttention-2's online softmax (Dao, 2023, arXiv:2307.08691), per
 * tile of 64 keys
 *   S = Q K^T;  m' = max(m, rowmax S);  P = exp(S - m');
 *   l = l exp(m - m') + rowsum P;  O = O exp(m - m') + P V
 * with the scores scaled by scale * log2(e) (exp2f). Q, K, V are bf16 as
 * stored; P is rounded to bf16 for P V (unnormalised, in [0, 1]) and l
 * sums the rounded values; everything else is fp32 (bf16 mma.sync
 * m16n8k16, fp32 accumulators, mma_util.h).
 *
 * Layout of the work: a block of 4 warps takes 64 query rows (blockIdx.x)
 * of one head (blockIdx.y) of one attention of the batch (blockIdx.z); it
 * stages its Q rows and the head's every K and V row in shared memory
 * (rows of head_dim padded with zeros to HDP, a multiple of 16, and 8 more
 * elements so that ldmatrix's 8 rows hit distinct banks; keys past n are
 * zeros and masked). Warp w owns rows 16 w .. 16 w + 15: S of a key tile in
 * registers, P turned into the A fragments of P V in registers (the
 * accumulators of two m16n8 tiles are an m16k16 A tile), V's B fragments
 * by ldmatrix.trans. With qkv_f32 the rows are staged from the f32 output
 * of the q | k | v projection plus its bias, rounded to bf16 on the way
 * (what frt_cuda_bias_act would have stored), so the projection's bias
 * launch goes.
 *
 * Deterministic: no atomics; fixed mma and quad orders, a function of the
 * sizes only. Tested against frt_cpu_attention_masked in
 * tests/test_cuda_policy_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/mma_util.h"

#include <math.h>
#include <string.h>

#define MH_WARPS 4
#define MH_THREADS (32 * MH_WARPS)
#define MH_ROWS (16 * MH_WARPS) /* query rows a block */
#define MH_BC 64                /* keys a tile */
#define MH_KEYS 256             /* keys at most (all staged at once) */

/* Shared-memory row pitch in bf16 elements for a padded head of HDP. */
template <int HDP> struct mh_cfg {
    static constexpr int P = HDP + 8;
    static constexpr size_t bytes(int keys) { return (size_t)(MH_ROWS + 2 * keys) * P * 2; }
};

/* Loads in flight a thread in the staging loops: each batch's loads are
 * issued before its first store (a load then its store an iteration would
 * wait out a memory latency per 16 or 32 bytes). */
#define MH_BATCH 8

/* Rows [0, rows) of a head into shared memory dst (pitch P), zeros past
 * `valid` rows and past hd columns. src rows ld elements apart. (Measured
 * against cp.async copies all in flight at once: 11.64 against 11.22 us
 * at SigLIP's shape, docs/PERF.md.) */
template <int HDP>
__device__ __forceinline__ void mh_stage(uint16_t *dst, const uint16_t *src, long long ld, int rows, int valid, int hd)
{
    constexpr int PC = HDP / 8, P = mh_cfg<HDP>::P;
    const int total = rows * PC;
    for (int i0 = threadIdx.x; i0 < total; i0 += MH_BATCH * MH_THREADS) {
        uint4 v[MH_BATCH];
#pragma unroll
        for (int u = 0; u < MH_BATCH; u++) {
            const int i = i0 + u * MH_THREADS, r = i / PC, c = 8 * (i % PC);
            v[u] = make_uint4(0, 0, 0, 0);
            if (i < total && r < valid && c < hd) v[u] = *(const uint4 *)(src + (long long)r * ld + c);
        }
#pragma unroll
        for (int u = 0; u < MH_BATCH; u++) {
            const int i = i0 + u * MH_THREADS, r = i / PC, c = 8 * (i % PC);
            if (i < total) *(uint4 *)(dst + (size_t)r * P + c) = v[u];
        }
    }
}

/* mh_stage from f32 rows plus a bias (NULL: none), each value rounded to
 * bf16 (frt_cuda_bias_act's f32 add, then the same rounding). */
template <int HDP>
__device__ __forceinline__ void mh_stage_f32(uint16_t *dst, const float *src, const float *bias, long long ld, int rows,
                                             int valid, int hd)
{
    constexpr int PC = HDP / 8, P = mh_cfg<HDP>::P;
    const int total = rows * PC;
    for (int i0 = threadIdx.x; i0 < total; i0 += MH_BATCH * MH_THREADS) {
        float4 x0[MH_BATCH], x1[MH_BATCH];
#pragma unroll
        for (int u = 0; u < MH_BATCH; u++) {
            const int i = i0 + u * MH_THREADS, r = i / PC, c = 8 * (i % PC);
            x0[u] = x1[u] = make_float4(0, 0, 0, 0);
            if (i < total && r < valid && c < hd) {
                const float4 *s = (const float4 *)(src + (long long)r * ld + c);
                x0[u] = s[0], x1[u] = s[1];
            }
        }
#pragma unroll
        for (int u = 0; u < MH_BATCH; u++) {
            const int i = i0 + u * MH_THREADS, r = i / PC, c = 8 * (i % PC);
            if (i >= total) break;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (r < valid && c < hd) {
                float4 a0 = x0[u], a1 = x1[u];
                if (bias) {
                    const float4 b0 = *(const float4 *)(bias + c), b1 = *(const float4 *)(bias + c + 4);
                    a0.x += b0.x, a0.y += b0.y, a0.z += b0.z, a0.w += b0.w;
                    a1.x += b1.x, a1.y += b1.y, a1.z += b1.z, a1.w += b1.w;
                }
                v = make_uint4(frt_pack_bf16(a0.x, a0.y), frt_pack_bf16(a0.z, a0.w), frt_pack_bf16(a1.x, a1.y),
                               frt_pack_bf16(a1.z, a1.w));
            }
            *(uint4 *)(dst + (size_t)r * P + c) = v;
        }
    }
}

template <int HDP>
__global__ void __launch_bounds__(MH_THREADS) mh_kernel(frt_cuda_mha_args a)
{
    using C = mh_cfg<HDP>;
    constexpr int P = C::P, NT = HDP / 8;
    extern __shared__ uint4 mh_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const int b = blockIdx.z, h = blockIdx.y, r0 = blockIdx.x * MH_ROWS, n = a.n, hd = a.head_dim;
    const int nk = (n + MH_BC - 1) / MH_BC * MH_BC;
    uint16_t *qs = (uint16_t *)mh_smem, *ks = qs + (size_t)MH_ROWS * P, *vs = ks + (size_t)nk * P;
    frt_pdl_wait(); /* q, k, v come from the kernel before */
    if (a.qkv_f32) {
        const int D = a.n_heads * hd;
        const float *f = a.qkv_f32 + b * a.s_f32 + (size_t)h * hd, *bq = a.bias ? a.bias + (size_t)h * hd : NULL;
        mh_stage_f32<HDP>(qs, f + (size_t)r0 * a.ld_f32, bq, a.ld_f32, MH_ROWS, n - r0, hd);
        mh_stage_f32<HDP>(ks, f + D, bq ? bq + D : NULL, a.ld_f32, nk, n, hd);
        mh_stage_f32<HDP>(vs, f + 2 * D, bq ? bq + 2 * D : NULL, a.ld_f32, nk, n, hd);
    } else {
        const uint16_t *q = a.q + b * a.sq + (size_t)h * hd + (size_t)r0 * a.ldq;
        const uint16_t *k = a.k + b * a.skv + (size_t)h * hd, *v = a.v + b * a.skv + (size_t)h * hd;
        mh_stage<HDP>(qs, q, a.ldq, MH_ROWS, n - r0, hd);
        mh_stage<HDP>(ks, k, a.ldkv, nk, n, hd);
        mh_stage<HDP>(vs, v, a.ldkv, nk, n, hd);
    }
    __syncthreads();
    const float sl2 = a.scale * 1.4426950408889634f;
    float o[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
    const uint32_t qa = frt_smem_addr(qs + (size_t)(warp * 16 + (lane & 15)) * P + (lane >> 4) * 8);
    for (int k0 = 0; k0 < nk; k0 += MH_BC) {
        float sc[MH_BC / 8][4];
#pragma unroll
        for (int j = 0; j < MH_BC / 8; j++) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
        const int kr = k0 + (lane & 7) + ((lane >> 4) << 3); /* the lane's key row of ldmatrix */
        const uint32_t kb = frt_smem_addr(ks + (size_t)kr * P + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int kk = 0; kk < HDP / 16; kk++) {
            uint32_t af[4];
            frt_ldsm_x4(af, qa + kk * 32);
#pragma unroll
            for (int j = 0; j < MH_BC / 16; j++) {
                uint32_t bf[4];
                frt_ldsm_x4(bf, kb + (uint32_t)(j * 16 * P) * 2 + kk * 32);
                frt_mma_bf16(sc[2 * j], af, bf[0], bf[1]);
                frt_mma_bf16(sc[2 * j + 1], af, bf[2], bf[3]);
            }
        }
        /* the online softmax of rows g (0, 1) and g + 8 (2, 3) */
        float xa = -INFINITY, xb = -INFINITY;
#pragma unroll
        for (int j = 0; j < MH_BC / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + j * 8 + 2 * tq + (e & 1);
                sc[j][e] = key < n ? sc[j][e] * sl2 : -INFINITY;
                if (e < 2) xa = fmaxf(xa, sc[j][e]);
                else xb = fmaxf(xb, sc[j][e]);
            }
        const float na = fmaxf(m_a, frt_quad_max(xa)), nb = fmaxf(m_b, frt_quad_max(xb));
        const float ca = exp2f(m_a - na), cb = exp2f(m_b - nb); /* 0 on the first tile (m -inf) */
        m_a = na, m_b = nb;
        l_a *= ca, l_b *= cb;
#pragma unroll
        for (int j = 0; j < NT; j++) o[j][0] *= ca, o[j][1] *= ca, o[j][2] *= cb, o[j][3] *= cb;
#pragma unroll
        for (int j = 0; j < MH_BC / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = __bfloat162float(__float2bfloat16_rn(exp2f(sc[j][e] - (e < 2 ? na : nb))));
                sc[j][e] = p;
                if (e < 2) l_a += p;
                else l_b += p;
            }
        /* O += P V: P's A fragments from two accumulator tiles, V by ldmatrix.trans */
        const uint32_t vb = frt_smem_addr(vs + (size_t)(k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * P + (lane >> 4) * 8);
#pragma unroll
        for (int kk = 0; kk < MH_BC / 16; kk++) {
            uint32_t af[4];
            frt_acc_to_a(af, sc[2 * kk], sc[2 * kk + 1]);
#pragma unroll
            for (int j = 0; j < NT / 2; j++) {
                uint32_t bf[4];
                frt_ldsm_x4_trans(bf, vb + (uint32_t)(kk * 16 * P + j * 16) * 2);
                frt_mma_bf16(o[2 * j], af, bf[0], bf[1]);
                frt_mma_bf16(o[2 * j + 1], af, bf[2], bf[3]);
            }
        }
    }
    l_a = frt_quad_sum(l_a), l_b = frt_quad_sum(l_b);
    const float ia = 1.0f / l_a, ib = 1.0f / l_b; /* l >= 1: the row's max key gives p = 1 */
    const int ra = r0 + warp * 16 + g, rb = ra + 8;
    uint16_t *out = a.out + b * a.so + (size_t)h * hd;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int c = j * 8 + 2 * tq;
        if (c >= hd) continue; /* hd is a multiple of 8: a pair is whole */
        if (ra < n) *(uint32_t *)(out + (size_t)ra * a.ldo + c) = frt_pack_bf16(o[j][0] * ia, o[j][1] * ia);
        if (rb < n) *(uint32_t *)(out + (size_t)rb * a.ldo + c) = frt_pack_bf16(o[j][2] * ib, o[j][3] * ib);
    }
}

typedef void (*mh_fn)(frt_cuda_mha_args);

static mh_fn mh_fn_of(int hdp, size_t *per_key, size_t *fixed)
{
#define MH_CASE(H)                                                                                                     \
    case H:                                                                                                            \
        *per_key = (size_t)2 * mh_cfg<H>::P * 2, *fixed = (size_t)MH_ROWS * mh_cfg<H>::P * 2;                          \
        return mh_kernel<H>;
    switch (hdp) {
        MH_CASE(16)
        MH_CASE(32)
        MH_CASE(48)
        MH_CASE(64)
        MH_CASE(80)
        MH_CASE(96)
        MH_CASE(112)
        MH_CASE(128)
    default: return NULL;
    }
#undef MH_CASE
}

extern "C" int frt_cuda_attention_mha_check(const frt_cuda_mha_args *a)
{
    FRT_ARG(a && a->out, "attention_mha: NULL pointer");
    const int bf = a->q || a->k || a->v, f32 = a->qkv_f32 != NULL;
    FRT_ARG(f32 != bf && (f32 || (a->q && a->k && a->v)),
            "attention_mha: give q, k and v (bf16) or qkv_f32, not both, not neither");
    FRT_ARG(a->n >= 1 && a->n_heads >= 1 && a->head_dim >= 1 && a->batch >= 1 && a->batch <= 65535 &&
                a->n_heads <= 65535 && a->scale > 0.0f,
            "attention_mha: n %d, %d heads of %d, batch %d, scale %g", a->n, a->n_heads, a->head_dim, a->batch,
            (double)a->scale);
    const long long row = (long long)a->n_heads * a->head_dim;
    FRT_ARG(a->ldo >= row && a->so >= 0 &&
                (f32 ? a->ld_f32 >= 3 * row && a->s_f32 >= 0
                     : a->ldq >= row && a->ldkv >= row && a->sq >= 0 && a->skv >= 0),
            "attention_mha: row strides (q %d, kv %d, f32 %d, out %d) under %lld a head set, or negative batch strides",
            a->ldq, a->ldkv, a->ld_f32, a->ldo, row);
    if (a->n > MH_KEYS || a->head_dim % 8 != 0 || a->head_dim > 128)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_mha: %d keys (at most %d), head_dim %d (a multiple of 8 "
                                              "up to 128)", a->n, MH_KEYS, a->head_dim);
    const uintptr_t al = (uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->out |
                         (uintptr_t)a->qkv_f32 | (uintptr_t)a->bias;
    const int bad_bf = !f32 && (a->ldq % 8 || a->ldkv % 8 || a->sq % 8 || a->skv % 8);
    const int bad_f32 = f32 && (a->ld_f32 % 4 || a->s_f32 % 4);
    if (al % 16 != 0 || bad_bf || bad_f32 || a->ldo % 2 || a->so % 2)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_mha: pointers or strides not 16-byte aligned");
    return 0;
}

extern "C" int frt_cuda_attention_mha(void *stream, const frt_cuda_mha_args *a)
{
    FRT_TRY(frt_cuda_attention_mha_check(a));
    const int hdp = (a->head_dim + 15) / 16 * 16, nk = (a->n + MH_BC - 1) / MH_BC * MH_BC;
    size_t per_key = 0, fixed = 0;
    const mh_fn fn = mh_fn_of(hdp, &per_key, &fixed);
    const size_t smem = fixed + (size_t)nk * per_key;
    FRT_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const dim3 grid((unsigned)((a->n + MH_ROWS - 1) / MH_ROWS), (unsigned)a->n_heads, (unsigned)a->batch);
    FRT_CUDA_TRY(frt_pdl_launch(fn, grid, dim3(MH_THREADS), smem, stream, *a));
    FRT_LAUNCH_CHECK();
    return 0;
}
