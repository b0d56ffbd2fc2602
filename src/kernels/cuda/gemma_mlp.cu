/*
 * kernels/cuda/gemma_mlp.cu - the tail of a Gemma layer over a few rows
 * (the policy expert's action tokens) as ONE cooperative launch
 * (frt_cuda_gemma_mlp, kernels_policy_cuda.h): optionally the layer's
 * attention (one KV head of 256), optionally o_proj with its
 * gated residual and the norm before the MLP, then gate | up with GeGLU,
 * down, the gated residual and the next layer's norm, optionally then the
 * next layer's q | k | v with RoPE. At 50 rows these products are bound by
 * the latency of their launches, not by their 34 MB of weights: cuBLASLt's
 * o_proj, the add + norm, gate | up, the GeGLU, down and its split-k reduce,
 * the add + norm, q | k | v and the RoPE kernel were nine launches of 3-10
 * us each (the attention's S = Q K^T, masked softmax and P V three more).
 * Here they are phases of one grid (one block of 8 warps an SM, every
 * block resident: a cooperative launch) separated by grid barriers:
 *
 *  A. (with the attention) a unit is 64 query rows (the heads of 8 tokens)
 *     over a split of 64 keys: Q, K and V rows loaded at once by every
 *     thread into shared memory, S = Q K^T on mma.sync, the masked softmax
 *     of the split in registers (its (max, sum) and the unnormalised P V to
 *     the work buffer). ~112 units at the Pi0.5 expert's 3-camera shape:
 *     about one a block.
 *  C. the splits of each query row merged in split order (two warps a row,
 *     a batch of splits' loads in flight at once),
 *     attn = sum O_s 2^(m_s - M) / sum l_s 2^(m_s - M), bf16.
 *  O. (with o_proj) partial products of attn . o^T: a unit is 128 output
 *     columns (one m16 tile a warp) over a chunk of 128 of attn's columns,
 *     staged in shared memory; each warp stores its f32 partial sums, one
 *     slab a chunk, to the work buffer.
 *  R1. the rows: block r sums row r's slabs in chunk order 0, 1, ..., adds
 *     the residual x += y * o_gate and writes the MLP's norm of the new row
 *     to hb.
 *  1. gate | up + GeGLU. A unit of work is 8 columns of h: an m16n8k16
 *     mma's A tile is 8 rows of gate_proj over 8 rows of up_proj (so one
 *     lane's accumulators hold gate and up of the same column and x row), B
 *     an 8-row tile of hb (rows padded with zeros to NT x 8, NT <= 8). The
 *     block's 8 warps split the unit's k range (128 each); a warp's range is
 *     the same for every unit, so its fragments of hb stay in registers for
 *     the whole phase. The warps' partial sums meet in shared memory and are
 *     added in warp order 0..7; h = bf16(gelu_tanh(gate) * up) (f32
 *     arithmetic, as frt_cuda_geglu_tanh) goes to the work buffer. Blocks
 *     take units blockIdx.x, + grid, ...; each warp's weights come through a
 *     ring of two units in shared memory (cp.async), issued from the start
 *     of the launch (weights never depend on the phases before).
 *  2. down: partial products of h . down^T as in O, chunks of 256.
 *  R2. the rows as in R1: x += y * gate, then the next layer's norm to out.
 *  Q. (with qkv) a pairs phase as 1 over out: a unit's A tile is 8 columns
 *     p of a head over the 8 columns p + head_dim / 2, so one lane holds
 *     both halves of RoPE's pair and rotates them (pi0_cuda_qkv_rope_slots'
 *     expression) before the bf16 stores to q and the KV rows; its first
 *     two units enter the ring during 2.
 *
 * The first unit's weights of O and of 2 are loaded before the barrier in
 * front of their phase. The k order inside an mma is permuted the same way
 * for A and B (each lane loads 16 contiguous bytes of a weight row and of an
 * x row: the k-permuted fragments of the decode GEMV, gemv.cu), so a
 * product's sum is over the same terms as the plain one; every sum runs in a
 * fixed order, so the bits depend on the shape alone. The residual is
 * frt_residual_add (pi0_cuda_residual's bits for a given y); the norms sum
 * their squares in fp64 and take norm_inv_rms and the formulas of
 * frt_cuda_add_norm. Twins: the products, GeGLU (frt_cpu_geglu_tanh), the
 * residual and frt_cpu_rmsnorm_ada / frt_cpu_rmsnorm; tested in
 * tests/test_cuda_gemma_mlp.c.
 */
#include <cooperative_groups.h>

#include "kernels/cuda/gemv_block.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/policy_util.h"
#include "kernels/cuda/residual_util.h"

namespace cg = cooperative_groups;

#define GM_WARPS 8
#define GM_THREADS (GM_WARPS * 32)
#define GM_W 1024  /* the width: GM_THREADS float4 columns in the rows phases; 128 k a warp in phase 1 */
#define GM_PAD 32  /* bf16 elements after each staged row: rows 64 bytes apart mod 128 (no bank conflicts) */
#define GM_KB 4    /* phase 1: k-blocks of 32 a warp (GM_W / GM_WARPS / 32) */
#define GM_KC_O 128  /* phase O: attn's columns a unit */
#define GM_KC 256  /* phase 2: h's columns a unit */
#define GM_MC 128  /* phases O and 2: output columns a unit (16 a warp) */
#define GM_NT_MAX 8
#define GA_HD 256    /* phase A: head_dim (one KV head) */
#define GA_ROWS 64   /* phase A: query rows a unit */
#define GA_KEYS 64   /* phase A: keys a unit (a key split) */
#define GA_QP 264    /* bf16 elements from one staged Q / K / V row to the next (528 bytes: no bank conflicts) */
#define GA_PP 72     /* bf16 elements from one staged P row to the next */
#define GA_OFF_K (GA_ROWS * GA_QP * 2)
#define GA_OFF_V (GA_OFF_K + GA_KEYS * GA_QP * 2)
#define GA_OFF_ML (GA_OFF_V + GA_KEYS * GA_QP * 2)
#define GA_OFF_P (GA_OFF_ML + 4 * GA_ROWS * 4)
#define GA_OFF_M (GA_OFF_P + GA_ROWS * GA_PP * 2)
#define GA_SMEM (GA_OFF_M + GA_KEYS) /* phase A's shared memory: Q, K, V, the row maxima and sums, P, the keys' mask */

/* One product of partial sums (phases O and 2): part[k / KC][r][c] = the
 * sum over k in chunk k / KC of x[r, k] w[c, k]. */
struct gm_prod {
    const uint16_t *x, *w;
    int in;
    float *part;
};

/* One rows phase: x += (sum of the nk slabs of part) * gate (NULL: plain),
 * then out = norm(x) (kind < 0: none). */
struct gm_rowsp {
    const float *part, *gate, *w, *b;
    int nk, kind;
    float eps;
    void *out;
    int out_dt;
};

/* A pairs phase (1 and Q): unit u's A tile is rows ra + g and ra + off + g
 * of w, ra = (u / per) span + (u % per) 8; x bf16 [rows, GM_W] its input. */
struct gm_pairs {
    const uint16_t *w, *x;
    int per, span, off, units;
};

/* Phase Q's outputs: q | k | v with RoPE at pos (v copied), bf16. */
struct gm_qkv {
    uint16_t *q, *k, *v;
    int heads, kv_heads, hd, ld_kv;
    const int32_t *pos;
    const float *inv_freq;
};

/* Phases A and C: the layer's attention (one KV head of GA_HD; query row
 * qr = token qr / heads, head qr % heads, rows GA_HD apart), nrt row tiles
 * of GA_ROWS over nks key splits of GA_KEYS; po / ml the splits' partials
 * (unnormalised O f32 [nks][nrt GA_ROWS][GA_HD], (max, sum) [nks][nrt
 * GA_ROWS]), out the combined attn (bf16 [nq, GA_HD]). */
struct gm_att {
    const uint16_t *q, *k, *v;
    uint16_t *out;
    int ldkv, nq, heads, nkv, nrt, nks;
    float scale_log2;
    frt_cuda_attn_mask mask;
    float *po;
    float2 *ml;
};

struct gm_args {
    float *x;
    gm_att at;    /* at.q NULL: attn is given */
    int ring_off; /* bytes of shared memory before the ring */
    uint16_t *h;  /* [NT 8, I] */
    int rows, I;
    gm_pairs p1, pq; /* pq.w NULL: no phase Q */
    gm_qkv qk;
    gm_prod o, down; /* o.x NULL: no o_proj */
    gm_rowsp r1, r2;
    int phases; /* 3; fewer only under the timing hook frt_cuda_gemma_mlp_set_phases */
};

__device__ __forceinline__ uint32_t gm_word(const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* The A operand of step s of a k-block: rows g (wa) and g + 8 (wb). */
__device__ __forceinline__ void gm_afrag(uint32_t (&a)[4], const uint4 &wa, const uint4 &wb, int s)
{
    a[0] = gm_word(wa, 2 * s), a[1] = gm_word(wb, 2 * s), a[2] = gm_word(wa, 2 * s + 1), a[3] = gm_word(wb, 2 * s + 1);
}

/* acc[nt] += A . x tile nt over one k-block of 32: the A tile's rows g and
 * g + 8 are wa and wb (16 bytes of each row), x's fragments xv[nt] (the
 * lane's 16 bytes of row nt 8 + g). */
template <int NT>
__device__ __forceinline__ void gm_mma_kb(float (&acc)[NT][4], const uint4 &wa, const uint4 &wb, const uint4 (&xv)[NT])
{
#pragma unroll
    for (int s = 0; s < 2; s++) {
        uint32_t a[4];
        gm_afrag(a, wa, wb, s);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) frt_mma_bf16(acc[nt], a, gm_word(xv[nt], 2 * s), gm_word(xv[nt], 2 * s + 1));
    }
}

/* gm_mma_kb over NKB k-blocks, x's rows nt 8 + g at xk (the lane's first
 * k, row stride xs elements) in shared memory. */
template <int NT, int NKB>
__device__ __forceinline__ void gm_mma(float (&acc)[NT][4], const uint4 (&wa)[NKB], const uint4 (&wb)[NKB],
                                       const uint16_t *xk, int xs)
{
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int kb = 0; kb < NKB; kb++) {
        uint4 xv[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) xv[nt] = *(const uint4 *)(xk + (size_t)(nt * 8 + g) * xs + kb * 32);
        gm_mma_kb<NT>(acc, wa[kb], wb[kb], xv);
    }
}

/* gm_mma_kb over GM_KB k-blocks, x's fragments in registers (xr[nt][kb]). */
template <int NT>
__device__ __forceinline__ void gm_mma_r(float (&acc)[NT][4], const uint4 (&wa)[GM_KB], const uint4 (&wb)[GM_KB],
                                         const uint4 (&xr)[NT][GM_KB])
{
#pragma unroll
    for (int kb = 0; kb < GM_KB; kb++) {
        uint4 xv[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) xv[nt] = xr[nt][kb];
        gm_mma_kb<NT>(acc, wa[kb], wb[kb], xv);
    }
}

template <int NT> __device__ __forceinline__ void gm_zero(float (&acc)[NT][4])
{
#pragma unroll
    for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
}

/* ---- partial products (phases O and 2) ---------------------------------- */

/* Unit u of p (chunks of NKB 32): the lane's rows of w (output columns c
 * and c + 8) into wa, wb. */
template <int NKB>
__device__ __forceinline__ void gm_prod_load(const gm_prod &p, int u, uint4 (&wa)[NKB], uint4 (&wb)[NKB])
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, mg = GM_W / GM_MC;
    const int kc = u / mg, c = (u % mg) * GM_MC + wp * 16 + (lane >> 2);
    const uint16_t *r0 = p.w + (size_t)c * p.in + (size_t)kc * NKB * 32 + 8 * (lane & 3);
#pragma unroll
    for (int kb = 0; kb < NKB; kb++) {
        wa[kb] = gemv_ld_w((const uint4 *)(r0 + kb * 32));
        wb[kb] = gemv_ld_w((const uint4 *)(r0 + (size_t)8 * p.in + kb * 32));
    }
}

/* The units of p: (GM_W / GM_MC) column groups times in / (NKB 32) chunks;
 * wa, wb hold the block's first unit's weights. smem: x[:, chunk] [NT 8]
 * [NKB 32 + GM_PAD] bf16. */
template <int NT, int NKB>
__device__ void gm_partials(const gm_prod &p, int rows, uint16_t *xs, uint4 (&wa)[NKB], uint4 (&wb)[NKB])
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int KC = NKB * 32, mg = GM_W / GM_MC, units = mg * (p.in / KC), XS = KC + GM_PAD, R = NT * 8;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int kc = u / mg, c = (u % mg) * GM_MC + wp * 16 + g;
        /* x[:, chunk] staged with plain loads, all of a thread's (at most 8:
         * 7 for down's 56 rows of 256) in flight at once (cp.async would
         * also wait for the weight ring's groups before) */
        constexpr int XN = NT * 8 * NKB * 4, XL0 = (XN + GM_THREADS - 1) / GM_THREADS, XL = XL0 < 8 ? XL0 : 8;
        __syncthreads(); /* the previous unit's reads of xs are done */
        for (int j0 = 0; j0 * GM_THREADS < XN; j0 += XL) {
            uint4 v[XL];
#pragma unroll
            for (int j = 0; j < XL; j++) {
                const int i = threadIdx.x + (j0 + j) * GM_THREADS, r = i / (KC / 8), q = i % (KC / 8);
                v[j] = i < XN && r < rows ? *(const uint4 *)(p.x + (size_t)r * p.in + (size_t)kc * KC + 8 * q)
                                          : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int j = 0; j < XL; j++) {
                const int i = threadIdx.x + (j0 + j) * GM_THREADS, r = i / (KC / 8), q = i % (KC / 8);
                if (i < XN) *(uint4 *)(xs + (size_t)r * XS + 8 * q) = v[j];
            }
        }
        __syncthreads();
        float acc[NT][4];
        gm_zero(acc);
        gm_mma<NT, NKB>(acc, wa, wb, xs + 8 * t, XS);
        if (u + (int)gridDim.x < units) gm_prod_load(p, u + gridDim.x, wa, wb);
        float *q = p.part + (size_t)kc * R * GM_W;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int row = nt * 8 + 2 * t;
            if (row < rows) q[(size_t)row * GM_W + c] = acc[nt][0], q[(size_t)row * GM_W + c + 8] = acc[nt][2];
            if (row + 1 < rows)
                q[(size_t)(row + 1) * GM_W + c] = acc[nt][1], q[(size_t)(row + 1) * GM_W + c + 8] = acc[nt][3];
        }
    }
}

/* ---- the rows (phases R1 and R2) ------------------------------------------ */

/* Thread t owns float4 column 4 t of the row; every load of a row is in
 * flight before the first sum. */
template <int NT>
__device__ void gm_rows(const gm_rowsp &p, float *xg, int rows)
{
    const int c = threadIdx.x * 4, R = NT * 8;
    const bool hg = p.gate != NULL, norm = p.kind >= 0, ada = p.kind == FRT_CUDA_NORM_RMS_ADA;
    const float4 zero = make_float4(0, 0, 0, 0);
    const float4 gv = hg ? *(const float4 *)(p.gate + c) : zero;
    const float4 wv = norm ? *(const float4 *)(p.w + c) : zero, bv = ada ? *(const float4 *)(p.b + c) : zero;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float4 x = *(const float4 *)(xg + (size_t)r * GM_W + c), y = zero;
        for (int k0 = 0; k0 < p.nk; k0 += 16) { /* 16 loads in flight, then the sums in chunk order */
            float4 v[16];
#pragma unroll
            for (int j = 0; j < 16; j++)
                if (k0 + j < p.nk) v[j] = *(const float4 *)(p.part + ((size_t)(k0 + j) * R + r) * GM_W + c);
#pragma unroll
            for (int j = 0; j < 16; j++)
                if (k0 + j < p.nk) {
                    if (k0 + j == 0) y = v[j];
                    else y.x += v[j].x, y.y += v[j].y, y.z += v[j].z, y.w += v[j].w;
                }
        }
        x.x = frt_residual_add(x.x, y.x, false, 0.0f, hg, gv.x);
        x.y = frt_residual_add(x.y, y.y, false, 0.0f, hg, gv.y);
        x.z = frt_residual_add(x.z, y.z, false, 0.0f, hg, gv.z);
        x.w = frt_residual_add(x.w, y.w, false, 0.0f, hg, gv.w);
        *(float4 *)(xg + (size_t)r * GM_W + c) = x;
        if (!norm) continue; /* uniform across the block */
        const double ss = frt_block_sum((double)x.x * x.x + (double)x.y * x.y + (double)x.z * x.z + (double)x.w * x.w);
        const float inv = norm_inv_rms(ss, GM_W, p.eps);
        const size_t o = (size_t)r * GM_W + c;
        frt_st(p.out, p.out_dt, o, (x.x * inv) * (1.0f + wv.x) + bv.x);
        frt_st(p.out, p.out_dt, o + 1, (x.y * inv) * (1.0f + wv.y) + bv.y);
        frt_st(p.out, p.out_dt, o + 2, (x.z * inv) * (1.0f + wv.z) + bv.z);
        frt_st(p.out, p.out_dt, o + 3, (x.w * inv) * (1.0f + wv.w) + bv.w);
    }
}

/* ---- gate | up + GeGLU (phase 1) -------------------------------------------- */

/* The block's i-th unit of pairs phase p (blockIdx.x + i grid) into ring
 * stage i & 1: the lane's 16 bytes of its two rows for each k-block (k at
 * its warp's range), cp.async'ed to the lane's own slots (read back by the
 * same lane: no barrier needed). One commit group a unit (empty past the
 * last). */
__device__ __forceinline__ void gm_issue(const gm_pairs &p, uint4 *ring, int i)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int u = blockIdx.x + i * gridDim.x;
    if (u < p.units) {
        const int ra = (u / p.per) * p.span + (u % p.per) * 8 + (lane >> 2);
        const uint16_t *r0 = p.w + (size_t)ra * GM_W + wp * (GM_KB * 32) + 8 * (lane & 3);
        const uint16_t *r1 = r0 + (size_t)p.off * GM_W;
        uint4 *slot = ring + ((size_t)((i & 1) * GM_WARPS + wp) * 2 * GM_KB) * 32 + lane;
#pragma unroll
        for (int kb = 0; kb < GM_KB; kb++) {
            frt_cp_async16(frt_smem_addr(slot + (2 * kb) * 32), r0 + kb * 32, 16);
            frt_cp_async16(frt_smem_addr(slot + (2 * kb + 1) * 32), r1 + kb * 32, 16);
        }
    }
    frt_cp_async_commit();
}

/* Phase Q's stores for unit u: rows r0, r0 + 1 (below rows) of the pair
 * (p, p + hd / 2) of head u / per: s.x, s.y the first element, s.z, s.w
 * the second. q and k rotated as pi0_cuda_qkv_rope_slots does (the angle
 * pos * inv_freq[p], cosf / sinf, no contraction), v copied. */
__device__ __forceinline__ void gm_rope_store(const gm_args &a, int u, int r0, float4 s, int g)
{
    const gm_qkv &q = a.qk;
    const int half = q.hd / 2, hh = u / a.pq.per, p = (u % a.pq.per) * 8 + g;
    const bool is_v = hh >= q.heads + q.kv_heads;
    const float f = is_v ? 0.0f : q.inv_freq[p];
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int r = r0 + e;
        if (r >= a.rows) break;
        const float x1 = e ? s.y : s.x, x2 = e ? s.w : s.z;
        float y1 = x1, y2 = x2;
        if (!is_v) {
            const float an = (float)q.pos[r] * f, c = cosf(an), sn = sinf(an);
            frt_rope_rotate(x1, x2, c, sn, &y1, &y2);
        }
        uint16_t *dst = hh < q.heads ? q.q + ((size_t)r * q.heads + hh) * q.hd
                        : is_v       ? q.v + (size_t)r * q.ld_kv + (size_t)(hh - q.heads - q.kv_heads) * q.hd
                                     : q.k + (size_t)r * q.ld_kv + (size_t)(hh - q.heads) * q.hd;
        dst[p] = __bfloat16_as_ushort(__float2bfloat16_rn(y1));
        dst[p + half] = __bfloat16_as_ushort(__float2bfloat16_rn(y2));
    }
}

/* A pairs phase (1 and Q of the header); the ring's first two units were
 * issued before. A warp's k range is the same for every unit, so its
 * fragments of x stay in registers for the whole phase (zeros past
 * a.rows). smem: the warps' partial sums, two buffers [2][8][NT][32]
 * float4 (a unit's sums are added while the next unit's are written), the
 * ring [2 stages][8 warps][2 GM_KB][32 lanes] uint4. ROPE 0: GeGLU into h;
 * 1: q | k | v with RoPE (gm_rope_store). */
template <int NT, int ROPE>
__device__ void gm_pairs_run(const gm_args &a, const gm_pairs &p, float4 *red, uint4 *ring)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    uint4 xr[NT][GM_KB];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int r = nt * 8 + g;
#pragma unroll
        for (int kb = 0; kb < GM_KB; kb++)
            xr[nt][kb] = r < a.rows ? *(const uint4 *)(p.x + (size_t)r * GM_W + wp * (GM_KB * 32) + kb * 32 + 8 * t)
                                    : make_uint4(0, 0, 0, 0);
    }
    for (int i = 0;; i++) {
        const int u = blockIdx.x + i * gridDim.x;
        if (u >= p.units) break;
        frt_cp_async_wait<1>(); /* unit i has landed (i + 1 may be in flight) */
        const uint4 *slot = ring + ((size_t)((i & 1) * GM_WARPS + wp) * 2 * GM_KB) * 32 + lane;
        uint4 w0[GM_KB], w1[GM_KB];
#pragma unroll
        for (int kb = 0; kb < GM_KB; kb++) w0[kb] = slot[(2 * kb) * 32], w1[kb] = slot[(2 * kb + 1) * 32];
        gm_issue(p, ring, i + 2); /* into the stage just read */
        float acc[NT][4];
        gm_zero(acc);
        gm_mma_r<NT>(acc, w0, w1, xr);
        float4 *rb = red + (size_t)(i & 1) * GM_WARPS * NT * 32;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            rb[(wp * NT + nt) * 32 + lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
        __syncthreads();
        if (wp < NT) {
            float4 s = rb[wp * 32 + lane];
            for (int w = 1; w < GM_WARPS; w++) {
                const float4 v = rb[(w * NT + wp) * 32 + lane];
                s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
            }
            /* s: the first row's (x, y) and the second's (z, w) at x rows 2t, 2t + 1 of tile wp */
            const int r0 = wp * 8 + 2 * t;
            if (ROPE) {
                gm_rope_store(a, u, r0, s, g);
            } else {
                const size_t col = (size_t)8 * u + g;
                a.h[(size_t)r0 * a.I + col] = __bfloat16_as_ushort(__float2bfloat16_rn(frt_gelu_tanh(s.x) * s.z));
                a.h[(size_t)(r0 + 1) * a.I + col] =
                    __bfloat16_as_ushort(__float2bfloat16_rn(frt_gelu_tanh(s.y) * s.w));
            }
        }
    }
    frt_cp_async_wait<0>();
    __syncthreads(); /* the ring and the sums are free */
}

/* ---- the attention (phases A and C) ----------------------------------------- */

/* Key j is allowed to token t (frt_cuda_attn_mask; batch 1); km: the
 * key mask's byte of j (when j < kmask_len). */
__device__ __forceinline__ bool ga_allowed(const frt_cuda_attn_mask &m, uint8_t km, int t, int j)
{
    if (j < m.kmask_len) return km != 0;
    return frt_attn_suffix_allowed(m, t, j);
}

/* Phase A: unit u = (row tile u % nrt, key split u / nrt), blocks taking
 * units blockIdx.x, + grid, ... Every thread loads its 16-byte pieces of
 * the tile's Q rows and the split's K / V rows at once (zeros past the rows
 * and keys), into rows GA_QP apart. Then warp w takes the 16 rows (w & 3):
 *   S = Q K^T over the 32 keys (w >> 2) (fp32 accumulators, k in steps of
 *      16); the softmax of the split in registers: the scores of allowed
 *      keys times scale log2(e), m the row's max (the two warps of a row
 *      meet in shared memory), p = bf16(2^(s - m)), l the sum of the
 *      rounded p (quad butterflies, then half 0 + half 1: a fixed order);
 *      P to shared memory, (m, l) to ml (m -inf, l 0 for a row without an
 *      allowed key in the split);
 *   O = P V over the 128 columns (w >> 2), to po (unnormalised).
 * Registers: the 16 x 128 accumulators of P V (64 a lane). */
__device__ void gm_attention(const gm_att &t, unsigned char *smem)
{
    constexpr int V8 = GA_HD / 8, PER = GA_ROWS * V8 / GM_THREADS; /* 16-byte pieces of a row; a thread's a tile */
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const int mt = wp & 3, kh = wp >> 2;
    const uint32_t s0 = frt_smem_addr(smem);
    const int nqp = t.nrt * GA_ROWS, units = t.nrt * t.nks;
    float *xm = (float *)(smem + GA_OFF_ML), *xl = xm + 2 * GA_ROWS; /* [2 halves][GA_ROWS] */
    uint16_t *P = (uint16_t *)(smem + GA_OFF_P);
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int rt = u % t.nrt, ks = u / t.nrt, r0 = rt * GA_ROWS, k0 = ks * GA_KEYS;
        const int nr = min(GA_ROWS, t.nq - r0), nk = min(GA_KEYS, t.nkv - k0);
        uint4 vq[PER], vk[PER], vv[PER];
        const int jm = k0 + (int)threadIdx.x;
        const uint8_t kmb = threadIdx.x < GA_KEYS && jm < t.mask.kmask_len && t.mask.d_kmask ? t.mask.d_kmask[jm] : 1;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int e = threadIdx.x + i * GM_THREADS, r = e / V8, c = 8 * (e % V8);
            const uint4 z = make_uint4(0, 0, 0, 0);
            vq[i] = r < nr ? *(const uint4 *)(t.q + (size_t)(r0 + r) * GA_HD + c) : z;
            vk[i] = r < nk ? *(const uint4 *)(t.k + (size_t)(k0 + r) * t.ldkv + c) : z;
            vv[i] = r < nk ? *(const uint4 *)(t.v + (size_t)(k0 + r) * t.ldkv + c) : z;
        }
        __syncthreads(); /* the previous unit's reads of shared memory are done */
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int e = threadIdx.x + i * GM_THREADS, r = e / V8, c = 8 * (e % V8);
            *(uint4 *)(smem + ((size_t)r * GA_QP + c) * 2) = vq[i];
            *(uint4 *)(smem + GA_OFF_K + ((size_t)r * GA_QP + c) * 2) = vk[i];
            *(uint4 *)(smem + GA_OFF_V + ((size_t)r * GA_QP + c) * 2) = vv[i];
        }
        if (threadIdx.x < GA_KEYS) smem[GA_OFF_M + threadIdx.x] = kmb;
        __syncthreads();
        /* S = Q K^T: rows mt 16 + g (acc 0, 1) and + 8 (acc 2, 3), keys kh 32 + n 8 + 2 tq (+ 1) */
        float acc[4][4];
#pragma unroll
        for (int n = 0; n < 4; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
        {
            const uint32_t qa = s0 + (uint32_t)((mt * 16 + (lane & 15)) * GA_QP + (lane >> 4) * 8) * 2;
            const int kr = kh * 32 + (lane & 7) + ((lane >> 4) << 3); /* the lane's key row of ldmatrix */
            const uint32_t kb = s0 + GA_OFF_K + (uint32_t)(kr * GA_QP + ((lane >> 3) & 1) * 8) * 2;
#pragma unroll 4
            for (int kk = 0; kk < GA_HD / 16; kk++) {
                uint32_t a[4], b0[4], b1[4];
                frt_ldsm_x4(a, qa + kk * 32);
                frt_ldsm_x4(b0, kb + kk * 32);
                frt_ldsm_x4(b1, kb + 16 * GA_QP * 2 + kk * 32);
                frt_mma_bf16(acc[0], a, b0[0], b0[1]);
                frt_mma_bf16(acc[1], a, b0[2], b0[3]);
                frt_mma_bf16(acc[2], a, b1[0], b1[1]);
                frt_mma_bf16(acc[3], a, b1[2], b1[3]);
            }
        }
        /* the softmax of the split's keys */
        const int ra = mt * 16 + g, rb = ra + 8, qa_ = r0 + ra, qb_ = r0 + rb;
        const int ta = qa_ / t.heads, tb = qb_ / t.heads;
        const bool on_a = qa_ < t.nq && (!t.mask.d_rmask || t.mask.d_rmask[ta]);
        const bool on_b = qb_ < t.nq && (!t.mask.d_rmask || t.mask.d_rmask[tb]);
        float mxa = -INFINITY, mxb = -INFINITY;
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = kh * 32 + n * 8 + 2 * tq + (e & 1), j = k0 + c;
                const bool on =
                    (e < 2 ? on_a : on_b) && c < nk && ga_allowed(t.mask, smem[GA_OFF_M + c], e < 2 ? ta : tb, j);
                acc[n][e] = on ? acc[n][e] * t.scale_log2 : -INFINITY;
                if (e < 2) mxa = fmaxf(mxa, acc[n][e]);
                else mxb = fmaxf(mxb, acc[n][e]);
            }
        mxa = frt_quad_max(mxa), mxb = frt_quad_max(mxb);
        if (tq == 0) xm[kh * GA_ROWS + ra] = mxa, xm[kh * GA_ROWS + rb] = mxb;
        __syncthreads();
        const float ma = fmaxf(xm[ra], xm[GA_ROWS + ra]), mb = fmaxf(xm[rb], xm[GA_ROWS + rb]);
        float la = 0.0f, lb = 0.0f;
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int c = kh * 32 + n * 8 + 2 * tq;
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float m = e < 2 ? ma : mb;
                p[e] = __bfloat162float(__float2bfloat16_rn(m == -INFINITY ? 0.0f : exp2f(acc[n][e] - m)));
            }
            la += p[0] + p[1], lb += p[2] + p[3];
            *(uint32_t *)(P + (size_t)ra * GA_PP + c) = frt_pack_bf16(p[0], p[1]);
            *(uint32_t *)(P + (size_t)rb * GA_PP + c) = frt_pack_bf16(p[2], p[3]);
        }
        la = frt_quad_sum(la), lb = frt_quad_sum(lb);
        if (tq == 0) xl[kh * GA_ROWS + ra] = la, xl[kh * GA_ROWS + rb] = lb;
        __syncthreads();
        if (kh == 0 && tq == 0) {
            t.ml[(size_t)ks * nqp + qa_] = make_float2(ma, xl[ra] + xl[GA_ROWS + ra]);
            t.ml[(size_t)ks * nqp + qb_] = make_float2(mb, xl[rb] + xl[GA_ROWS + rb]);
        }
        /* O = P V */
        {
            float o[16][4];
#pragma unroll
            for (int n = 0; n < 16; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
            const uint32_t pa = s0 + GA_OFF_P + (uint32_t)((mt * 16 + (lane & 15)) * GA_PP + (lane >> 4) * 8) * 2;
            const int vr = (lane & 7) + ((lane >> 3) & 1) * 8; /* the lane's key row of ldmatrix.trans */
            const uint32_t vb = s0 + GA_OFF_V + (uint32_t)(vr * GA_QP + kh * 128 + (lane >> 4) * 8) * 2;
#pragma unroll
            for (int kk = 0; kk < GA_KEYS / 16; kk++) {
                uint32_t a[4];
                frt_ldsm_x4(a, pa + kk * 32);
#pragma unroll
                for (int nb = 0; nb < 8; nb++) {
                    uint32_t b[4];
                    frt_ldsm_x4_trans(b, vb + (uint32_t)(kk * 16 * GA_QP + nb * 16) * 2);
                    frt_mma_bf16(o[2 * nb], a, b[0], b[1]);
                    frt_mma_bf16(o[2 * nb + 1], a, b[2], b[3]);
                }
            }
            float *po = t.po + ((size_t)ks * nqp + r0 + ra) * GA_HD + kh * 128 + 2 * tq;
#pragma unroll
            for (int n = 0; n < 16; n++) {
                *(float2 *)(po + n * 8) = make_float2(o[n][0], o[n][1]);
                *(float2 *)(po + 8 * GA_HD + n * 8) = make_float2(o[n][2], o[n][3]);
            }
        }
    }
}

/* Phase C: the splits' partials of every query row merged in split order
 * into out, two warps a row (warp w & 1 the row's columns 128 (w & 1) ..
 * + 127, a lane 4 of them): M = max m_s, L = sum l_s 2^(m_s - M) (a warp
 * butterfly; both warps of the row compute the same L), out = sum over s in
 * order of O_s 2^(m_s - M), over L (zeros for a row without an allowed
 * key). The first GC_BATCH splits' loads of O are issued before M is
 * known, each later batch's all at once: the merge waits on about two L2
 * round trips, not one a split. The sums are those of one warp a row (the
 * same expression per column, in split order). */
#define GC_BATCH 16
__device__ void gm_combine(const gm_att &t)
{
    const int lane = threadIdx.x & 31, nqp = t.nrt * GA_ROWS, half = (threadIdx.x >> 5) & 1;
    const int rows_step = gridDim.x * (GM_WARPS / 2);
    for (int r = blockIdx.x * (GM_WARPS / 2) + (threadIdx.x >> 6); r < t.nq; r += rows_step) {
        const float *po = t.po + (size_t)r * GA_HD + 128 * half + 4 * lane;
        const size_t ss = (size_t)nqp * GA_HD; /* floats from one split's partials to the next */
        float4 x[GC_BATCH];
#pragma unroll
        for (int i = 0; i < GC_BATCH; i++)
            if (i < t.nks) x[i] = *(const float4 *)(po + (size_t)i * ss);
        float M = -INFINITY;
        for (int s = lane; s < t.nks; s += 32) M = fmaxf(M, t.ml[(size_t)s * nqp + r].x);
        M = frt_warp_max(M);
        float L = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s0 = 0; s0 < t.nks; s0 += 32) {
            const int s = s0 + lane;
            const float2 ml = s < t.nks ? t.ml[(size_t)s * nqp + r] : make_float2(-INFINITY, 0.0f);
            const float w = M == -INFINITY || ml.x == -INFINITY ? 0.0f : exp2f(ml.x - M);
            L += ml.y * w;
            const int n = min(32, t.nks - s0);
            for (int b0 = 0; b0 < n; b0 += GC_BATCH) {
                if (s0 + b0 > 0) { /* the batch's loads (the first was issued above) */
#pragma unroll
                    for (int i = 0; i < GC_BATCH; i++)
                        if (b0 + i < n) x[i] = *(const float4 *)(po + (size_t)(s0 + b0 + i) * ss);
                }
#pragma unroll
                for (int i = 0; i < GC_BATCH; i++) {
                    const float ws = __shfl_sync(0xffffffffu, w, (b0 + i) & 31);
                    if (b0 + i < n) {
                        acc[0] += x[i].x * ws, acc[1] += x[i].y * ws, acc[2] += x[i].z * ws, acc[3] += x[i].w * ws;
                    }
                }
            }
        }
        L = frt_warp_sum(L);
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        *(uint2 *)(t.out + (size_t)r * GA_HD + 128 * half + 4 * lane) =
            make_uint2(frt_pack_bf16(acc[0] * inv, acc[1] * inv), frt_pack_bf16(acc[2] * inv, acc[3] * inv));
    }
}

/* ---- the launch -------------------------------------------------------------- */

template <int NT>
__global__ void __launch_bounds__(GM_THREADS, 1) gemma_mlp_kernel(gm_args a)
{
    extern __shared__ uint4 gm_smem[];
    cg::grid_group grid = cg::this_grid();
    float4 *red = (float4 *)gm_smem;
    uint4 *ring = (uint4 *)((unsigned char *)gm_smem + a.ring_off);
    const int mg = GM_W / GM_MC;
    /* every weight load that may start before the kernels before end */
    gm_issue(a.p1, ring, 0);
    gm_issue(a.p1, ring, 1);
    if (a.o.x) {
        uint4 wo[GM_KC_O / 32], wo8[GM_KC_O / 32];
        const bool o_unit = (int)blockIdx.x < mg * (a.o.in / GM_KC_O);
        if (a.at.q) { /* phases A and C; the ring's copies (cp.async) run on */
            frt_pdl_wait(); /* q, k, v and x come from the kernels before */
            gm_attention(a.at, (unsigned char *)gm_smem);
            if (a.phases == 4) return;
            grid.sync();
            gm_combine(a.at);
            if (a.phases == 5) return;
            if (o_unit) gm_prod_load(a.o, blockIdx.x, wo, wo8); /* in flight across the barrier */
            grid.sync();
        } else {
            if (o_unit) gm_prod_load(a.o, blockIdx.x, wo, wo8);
            frt_pdl_wait(); /* attn and x come from the kernels before */
        }
        gm_partials<NT, GM_KC_O / 32>(a.o, a.rows, (uint16_t *)red, wo, wo8); /* red is free until phase 1 */
        grid.sync();
        gm_rows<NT>(a.r1, a.x, a.rows);
        grid.sync();
    } else {
        frt_pdl_wait(); /* hb and x come from the kernels before */
    }
    gm_pairs_run<NT, 0>(a, a.p1, red, ring);
    if (a.pq.w) { /* phase Q's weights stream during 2 and R2 */
        gm_issue(a.pq, ring, 0);
        gm_issue(a.pq, ring, 1);
    }
    uint4 wd[GM_KC / 32], wd8[GM_KC / 32];
    if ((int)blockIdx.x < mg * (a.I / GM_KC)) gm_prod_load(a.down, blockIdx.x, wd, wd8);
    if (a.phases < 2) return;
    grid.sync();
    gm_partials<NT, GM_KC / 32>(a.down, a.rows, (uint16_t *)red, wd, wd8); /* the ring holds phase Q's units */
    if (a.phases < 3) return;
    grid.sync();
    gm_rows<NT>(a.r2, a.x, a.rows);
    if (!a.pq.w) return;
    grid.sync();
    gm_pairs_run<NT, 1>(a, a.pq, red, ring);
}

static int g_phases = 3;

extern "C" void frt_cuda_gemma_mlp_set_phases(int n) { g_phases = n < 1 ? 1 : n > 5 ? 3 : n; }

/* Shared memory of a launch: the pairs phases' two buffers of partial sums
 * (phases O and 2 stage their chunk of x there: NT 8 rows of at most
 * GM_KC + GM_PAD bf16, less than a buffer) and the weight ring. */
static size_t gm_red_bytes(int nt) { return (size_t)2 * GM_WARPS * nt * 32 * 16; }
static size_t gm_ring_off(int nt, int att) { return att && GA_SMEM > gm_red_bytes(nt) ? GA_SMEM : gm_red_bytes(nt); }
static size_t gm_smem_bytes(int nt, int att)
{
    return gm_ring_off(nt, att) + (size_t)2 * GM_WARPS * 2 * GM_KB * 32 * 16;
}

typedef void (*gm_fn)(gm_args);

static gm_fn gm_fn_of(int nt)
{
    switch (nt) {
    case 1: return gemma_mlp_kernel<1>;
    case 2: return gemma_mlp_kernel<2>;
    case 3: return gemma_mlp_kernel<3>;
    case 4: return gemma_mlp_kernel<4>;
    case 5: return gemma_mlp_kernel<5>;
    case 6: return gemma_mlp_kernel<6>;
    case 7: return gemma_mlp_kernel<7>;
    default: return gemma_mlp_kernel<8>;
    }
}

/* Bytes of h [R, inter] bf16, 256-byte aligned (the partial sums follow). */
static size_t gm_h_bytes(int rows, int inter)
{
    const size_t R = (size_t)(rows + 7) / 8 * 8;
    return (R * inter * 2 + 255) / 256 * 256;
}

extern "C" int frt_cuda_gemma_mlp_work_bytes(int rows, int width, int inter, int q_dim, size_t *bytes)
{
    FRT_ARG(bytes && rows >= 1 && width >= 1 && inter >= 1 && q_dim >= 0, "gemma_mlp: bad sizes");
    const size_t R = (size_t)(rows + 7) / 8 * 8;
    size_t nk = (size_t)inter / GM_KC;
    if ((size_t)q_dim / GM_KC_O > nk) nk = (size_t)q_dim / GM_KC_O;
    *bytes = gm_h_bytes(rows, inter) + nk * R * width * 4;
    return 0;
}

/* The attention's row tiles and key splits. */
static void ga_tiles(int n_q, int heads, int n_kv, int *nrt, int *nks)
{
    *nrt = (n_q * heads + GA_ROWS - 1) / GA_ROWS;
    *nks = (n_kv + GA_KEYS - 1) / GA_KEYS;
}

extern "C" int frt_cuda_gemma_mlp_att_work_bytes(int n_q, int n_heads, int n_kv, size_t *bytes)
{
    FRT_ARG(bytes && n_q >= 1 && n_heads >= 1 && n_kv >= 1, "gemma_mlp: bad attention sizes");
    int nrt = 0, nks = 0;
    ga_tiles(n_q, n_heads, n_kv, &nrt, &nks);
    *bytes = (size_t)nks * nrt * GA_ROWS * (GA_HD * 4 + 8);
    return 0;
}

/* The device's grid for a launch of nt tiles: one block an SM when that
 * many fit at once, else 0. Sets the function's shared-memory limit the
 * first time (cached per device and nt: at setup, by
 * frt_cuda_gemma_mlp_check, outside any capture). */
static int gm_grid(int nt, int *grid)
{
    static int cache[8][GM_NT_MAX + 1]; /* grid + 1 */
    int dev = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    if (dev < 8 && cache[dev][nt] > 0) {
        *grid = cache[dev][nt] - 1;
        return 0;
    }
    const gm_fn fn = gm_fn_of(nt);
    const size_t smem = gm_smem_bytes(nt, 1); /* the most a launch asks for */
    int sms = 0, coop = 0, optin = 0, occ = 0;
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    *grid = 0;
    if (coop && smem <= (size_t)optin) {
        FRT_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        FRT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, GM_THREADS, smem));
        if (occ >= 1) *grid = sms;
    }
    if (dev < 8) cache[dev][nt] = *grid + 1;
    return 0;
}

static int gm_norm_ok(int on, void *out, frt_cuda_dtype dt, frt_cuda_norm_kind kind, const float *b)
{
    FRT_ARG(!on || (out && frt_dtype_ok(dt)), "gemma_mlp: a norm needs its output and dtype");
    FRT_ARG(!on || kind == FRT_CUDA_NORM_RMS_ADA || kind == FRT_CUDA_NORM_RMS_ONE || kind == FRT_CUDA_NORM_LAYER,
            "gemma_mlp: unknown norm kind %d", (int)kind);
    FRT_ARG(!on || kind != FRT_CUDA_NORM_RMS_ADA || b, "gemma_mlp: adaRMSNorm needs its shift b");
    if (on && kind == FRT_CUDA_NORM_LAYER)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: LayerNorm is not supported");
    return 0;
}

/* The checks that need no device (frt_cuda_gemma_mlp's header). */
static int gm_check(const frt_cuda_gemma_mlp_args *p)
{
    FRT_ARG(p && p->x && p->hb && p->gu && p->down && p->work, "gemma_mlp: NULL pointer");
    FRT_ARG(p->rows >= 1 && p->width >= 1 && p->inter >= 1, "gemma_mlp: rows %d width %d inter %d", p->rows,
            p->width, p->inter);
    const int o = p->attn != NULL;
    FRT_ARG(!o || (p->o && p->q_dim >= 1 && p->mlp_w), "gemma_mlp: attn needs o, q_dim and the MLP's norm");
    FRT_TRY(gm_norm_ok(o, (void *)p->hb, FRT_CUDA_BF16, p->mlp_kind, p->mlp_b));
    FRT_TRY(gm_norm_ok(p->w != NULL, p->out, p->out_dtype, p->kind, p->b));
    FRT_ARG(!p->w || ((void *)p->x != p->out), "gemma_mlp: out must not alias x");
    const int q = p->qkv != NULL;
    FRT_ARG(!q || (p->w && p->out_dtype == FRT_CUDA_BF16 && p->q_out && p->k_out && p->v_out && p->pos &&
                   p->inv_freq),
            "gemma_mlp: the next q | k | v needs the norm into a bf16 out, its outputs, positions and frequencies");
    FRT_ARG(!q || (p->heads >= 1 && p->kv_heads >= 1 && p->head_dim >= 2 && p->ld_kv >= p->kv_heads * p->head_dim),
            "gemma_mlp: heads %d kv_heads %d head_dim %d ld_kv %d", p->heads, p->kv_heads, p->head_dim, p->ld_kv);
    size_t need = 0;
    FRT_TRY(frt_cuda_gemma_mlp_work_bytes(p->rows, p->width, p->inter, o ? p->q_dim : 0, &need));
    FRT_ARG(p->work_bytes >= need, "gemma_mlp: work of %zu bytes, %zu needed", p->work_bytes, need);
    const frt_cuda_attn_args *t = p->att;
    if (t) {
        FRT_ARG(o && t->q && t->k && t->v && t->out == p->attn && p->att_work,
                "gemma_mlp: the attention needs o_proj, q, k, v, its work and out == attn");
        FRT_ARG(t->n_q == p->rows && t->n_kv >= 1 && t->n_heads >= 1 && t->n_kv_heads >= 1 && t->head_dim >= 1 &&
                    t->n_heads * t->head_dim == p->q_dim && t->batch <= 1 && t->scale > 0.0f,
                "gemma_mlp: attention of %d queries (rows %d), %d keys, %d x %d heads of %d (q_dim %d), batch %d",
                t->n_q, p->rows, t->n_kv, t->n_heads, t->n_kv_heads, t->head_dim, p->q_dim, t->batch);
        const frt_cuda_attn_mask *m = &t->mask;
        FRT_ARG(m->kmask_len >= 0 && m->sfx_start >= m->kmask_len && m->sfx_n >= 0, "gemma_mlp: bad attention mask");
        size_t aw = 0;
        FRT_TRY(frt_cuda_gemma_mlp_att_work_bytes(t->n_q, t->n_heads, t->n_kv, &aw));
        FRT_ARG(p->att_work_bytes >= aw, "gemma_mlp: attention work of %zu bytes, %zu needed", p->att_work_bytes, aw);
    }
    if (p->rows > GM_NT_MAX * 8)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: %d rows (at most %d)", p->rows, GM_NT_MAX * 8);
    if (q && p->head_dim % 16 != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: head_dim %d (a multiple of 16)", p->head_dim);
    if (t && (t->n_kv_heads != 1 || t->head_dim != GA_HD || t->ldq != p->q_dim || t->ldkv < GA_HD ||
              t->ldkv % 8 != 0 || ((uintptr_t)t->q | (uintptr_t)t->k | (uintptr_t)t->v | (uintptr_t)p->att_work) % 16))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "gemma_mlp: attention of %d KV heads of %d (only one of %d), ldq %d, ldkv %d, or misaligned",
                         t->n_kv_heads, t->head_dim, GA_HD, t->ldq, t->ldkv);
    if (p->width != GM_W || p->inter % GM_KC != 0 || (o && p->q_dim % GM_KC_O != 0))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "gemma_mlp: width %d (only %d), inter %d (a multiple of %d), q_dim %d (of %d)", p->width, GM_W,
                         p->inter, GM_KC, p->q_dim, GM_KC_O);
    const uintptr_t al = (uintptr_t)p->x | (uintptr_t)p->hb | (uintptr_t)p->gu | (uintptr_t)p->down |
                         (uintptr_t)p->gate | (uintptr_t)p->w | (uintptr_t)p->b | (uintptr_t)p->work |
                         (uintptr_t)p->attn | (uintptr_t)p->o | (uintptr_t)p->o_gate | (uintptr_t)p->mlp_w |
                         (uintptr_t)p->mlp_b | (uintptr_t)p->qkv;
    if (al % 16 != 0) return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: pointers not 16-byte aligned");
    return 0;
}

extern "C" int frt_cuda_gemma_mlp_check(const frt_cuda_gemma_mlp_args *p)
{
    FRT_TRY(gm_check(p));
    int grid = 0;
    FRT_TRY(gm_grid((p->rows + 7) / 8, &grid));
    if (grid < 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: %zu bytes of shared memory or no cooperative launch",
                         gm_smem_bytes((p->rows + 7) / 8, 1));
    return 0;
}

extern "C" int frt_cuda_gemma_mlp(void *stream, const frt_cuda_gemma_mlp_args *p)
{
    FRT_TRY(gm_check(p));
    const int nt = (p->rows + 7) / 8;
    int grid = 0;
    FRT_TRY(gm_grid(nt, &grid));
    if (grid < 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: %zu bytes of shared memory or no cooperative launch",
                         gm_smem_bytes(nt, 1));
    float *part = (float *)((char *)p->work + gm_h_bytes(p->rows, p->inter));
    gm_args a;
    memset(&a, 0, sizeof a);
    a.x = p->x, a.h = (uint16_t *)p->work;
    a.rows = p->rows, a.I = p->inter;
    a.p1 = {p->gu, p->hb, p->inter / 8, 0, p->inter, p->inter / 8};
    if (p->qkv) {
        const int per = p->head_dim / 16;
        a.pq = {p->qkv, (const uint16_t *)p->out, per, p->head_dim, p->head_dim / 2,
                (p->heads + 2 * p->kv_heads) * per};
        a.qk = {p->q_out, p->k_out, p->v_out, p->heads, p->kv_heads, p->head_dim, p->ld_kv, p->pos, p->inv_freq};
    }
    if (p->attn) {
        a.o = {p->attn, p->o, p->q_dim, part};
        a.r1 = {part, p->o_gate, p->mlp_w, p->mlp_b, p->q_dim / GM_KC_O, (int)p->mlp_kind, p->eps, (void *)p->hb,
                (int)FRT_CUDA_BF16};
    }
    a.down = {a.h, p->down, p->inter, part};
    a.r2 = {part, p->gate, p->w, p->b, p->inter / GM_KC, p->w ? (int)p->kind : -1, p->eps, p->out, (int)p->out_dtype};
    a.phases = g_phases;
    a.ring_off = (int)gm_ring_off(nt, p->att != NULL);
    if (p->att) {
        const frt_cuda_attn_args *t = p->att;
        int nrt = 0, nks = 0;
        ga_tiles(t->n_q, t->n_heads, t->n_kv, &nrt, &nks);
        a.at.q = t->q, a.at.k = t->k, a.at.v = t->v, a.at.out = (uint16_t *)p->attn;
        a.at.ldkv = t->ldkv, a.at.nq = t->n_q * t->n_heads, a.at.heads = t->n_heads, a.at.nkv = t->n_kv;
        a.at.nrt = nrt, a.at.nks = nks;
        a.at.scale_log2 = t->scale * 1.4426950408889634f;
        a.at.mask = t->mask;
        a.at.po = (float *)p->att_work;
        a.at.ml = (float2 *)((char *)p->att_work + (size_t)nks * nrt * GA_ROWS * GA_HD * 4);
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    const int pdl = frt_pdl_attr(&attr[1]); /* the weight loads before frt_pdl_wait overlap the kernel before */
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3(GM_THREADS);
    cfg.dynamicSmemBytes = gm_smem_bytes(nt, a.at.q != NULL);
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1 + pdl;
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, gm_fn_of(nt), a));
    FRT_LAUNCH_CHECK();
    return 0;
}
