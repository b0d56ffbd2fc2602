/*
 * kernels/cuda/attention.cu - causal GQA attention over the bf16 KV cache:
 * the prefill form (one pass over the keys) and flash-decoding (the keys cut
 * into splits, per-split partials, then a combine kernel).
 * Math: transformers 5.x modeling_qwen3_5.py, eager_attention_forward with
 * the causal mask, softmax in fp32; computed as the CPU twin
 * frt_cpu_attention does, with an online softmax (running max m, running sum
 * l, the partial output rescaled by exp(m_old - m_new)), over tiles of 32 keys
 * instead of 128.
 *
 * Prefill form (attn_kernel, split_len == 0; also the split form of head_dim
 * other than 64, 128, 256). A block has 4 warps; warp w takes the (token,
 * head) pair p = 4 * blockIdx.x + w, enumerated as p = t * group + g over the
 * heads h = kvh * group + g that share KV head kvh = blockIdx.y, so a block's
 * warps share every K/V tile it stages in shared memory. blockIdx.z is the
 * split. For a tile of 32 keys, lane j scores key j0 + j against the warp's
 * query (K rows padded by one word: conflict-free), the warp max and sum come
 * from butterflies, and each lane accumulates head_dim / 32 output dims (V
 * read row by row). The valid token count n and the start position are read
 * from device memory: token t sees cache rows 0 .. min(start + t, max_seq - 1);
 * warps past n and tiles past the last key do nothing, so one captured launch
 * serves every position.
 *
 * Flash-decoding (attn_decode_kernel, split_len > 0, head_dim 64/128/256):
 * one block of 4 warps per (KV head, split, chunk of QB query pairs): QB = the
 * GQA group (rounded up to 1, 2, 4 or 8; several chunks when max_n * group >
 * 8), so every query head of a KV head shares each K/V tile the block reads.
 * Tiles of 32 keys stream through a 3-stage cp.async pipeline (16-byte
 * copies, K rows padded by 64 bytes so the score reads below are free of bank
 * conflicts); the 4 warps split the keys of a tile, 8 each: lane (slot, c)
 * (slot = lane / 4, c = lane % 4) scores key slot against the QB queries over
 * the interleaved quarter c of the dims (16-byte chunks 4 i + c), the quarter
 * sums meet in a 2-step butterfly, and each warp keeps its own online softmax
 * (m, l, o) per query, with lane owning head_dim / 32 consecutive output dims
 * (P.V with 4-16 byte V reads). At the end the 4 warps' states merge in warp
 * order 0..3 through shared memory into one partial per (query, split).
 *
 * Split partials: the (t, h) of split s is written to the workspace
 * [n_splits, max_n, n_heads, hd + 2] (o unnormalised, m, l) iff split s holds
 * a key of t (s * split_len < kend(t)); the combine kernel (one block per
 * (token, head, 64 dims)) reads exactly those splits:
 *   M = max m_s, L = sum l_s exp(m_s - M), out = sum o_s exp(m_s - M) / L,
 * L as a block sum in a fixed tree, each output dim as 4 interleaved partial
 * sums over the splits (s mod 4) added in order 0..3.
 * Deterministic: no atomics, fixed orders. Tested in tests/test_cuda_kernels.c
 * and tests/test_cuda_decode.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define ATT_WARPS 4
#define ATT_TILE 32

struct attn_args {
    void *out;
    int out_dt;
    const void *q;
    int q_dt;
    const __nv_bfloat16 *kc, *vc;
    const int32_t *d_start, *d_n;
    float *part; /* split partials [n_splits, max_n, n_heads, hd + 2], or NULL (one pass) */
    int max_n, max_seq, n_heads, n_kv, group, split_len;
    float scale;
};

template <int DPL> __global__ __launch_bounds__(ATT_WARPS * 32) void attn_kernel(const attn_args a)
{
    constexpr int HD = 32 * DPL;
    constexpr int KST = HD + 2; /* padded K row, in bf16 elements (one extra word) */
    __shared__ __align__(16) __nv_bfloat16 Ks[ATT_TILE * KST];
    __shared__ __align__(16) __nv_bfloat16 Vs[ATT_TILE * HD];
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

    float o[DPL];
#pragma unroll
    for (int mm = 0; mm < DPL; mm++) o[mm] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int j0 = s_lo; j0 < b_hi; j0 += ATT_TILE) {
        __syncthreads(); /* the previous tile is consumed; Qs is written */
        const int rows = min(ATT_TILE, b_hi - j0);
        for (int idx = threadIdx.x; idx < ATT_TILE * (HD / 2); idx += blockDim.x) {
            const int r = idx / (HD / 2), c2 = idx % (HD / 2);
            __nv_bfloat162 k2 = __floats2bfloat162_rn(0.0f, 0.0f), v2 = k2;
            if (r < rows) {
                const size_t g = ((size_t)(j0 + r) * a.n_kv + kvh) * HD + 2 * c2;
                k2 = *(const __nv_bfloat162 *)(a.kc + g);
                v2 = *(const __nv_bfloat162 *)(a.vc + g);
            }
            *(__nv_bfloat162 *)(Ks + r * KST + 2 * c2) = k2;
            *(__nv_bfloat162 *)(Vs + r * HD + 2 * c2) = v2;
        }
        __syncthreads();
        if (j0 < w_hi) { /* warp-uniform */
            const int j = j0 + lane;
            float s = -INFINITY;
            if (j < w_hi) {
                const __nv_bfloat16 *kr = Ks + lane * KST;
                const float *qw = Qs[warp];
                float acc = 0.0f;
#pragma unroll 8
                for (int d = 0; d < HD; d += 2) {
                    const float2 kf = __bfloat1622float2(*(const __nv_bfloat162 *)(kr + d));
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
                const __nv_bfloat16 *vr = Vs + jj * HD;
#pragma unroll
                for (int mm = 0; mm < DPL; mm++) o[mm] += pj * __bfloat162float(vr[lane + 32 * mm]);
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

/* ---- flash-decoding --------------------------------------------------- */

#define DEC_WARPS 4
#define DEC_TILE 32 /* keys per tile: 8 per warp */
#define DEC_KPW 8
#define DEC_STAGES 3
#define DEC_KPAD 64 /* bytes of padding after each staged K row */

__device__ __forceinline__ void dec_cp_async16(void *smem, const void *gmem, bool pred)
{
    const unsigned int s = (unsigned int)__cvta_generic_to_shared(smem);
    const int sz = pred ? 16 : 0; /* 0: the 16 bytes are zero-filled, nothing is read */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(sz)
                 : "memory");
}

__device__ __forceinline__ void dec_cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void dec_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Eight bf16 (a 16-byte chunk) to floats. */
__device__ __forceinline__ void dec_bf16x8(const uint4 u, float (&f)[8])
{
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

/* DPL (= head_dim / 32) consecutive bf16 of a V row to floats. */
template <int DPL>
__device__ __forceinline__ void dec_ld_v(const unsigned char *p, float (&f)[DPL])
{
    if constexpr (DPL == 8) {
        dec_bf16x8(*(const uint4 *)p, f);
    } else if constexpr (DPL == 4) {
        const uint2 u = *(const uint2 *)p;
        f[0] = __uint_as_float(u.x << 16);
        f[1] = __uint_as_float(u.x & 0xFFFF0000u);
        f[2] = __uint_as_float(u.y << 16);
        f[3] = __uint_as_float(u.y & 0xFFFF0000u);
    } else {
        const uint32_t u = *(const uint32_t *)p;
        f[0] = __uint_as_float(u << 16);
        f[1] = __uint_as_float(u & 0xFFFF0000u);
    }
}

/* Dynamic shared memory of attn_decode_kernel<DPL, QB>: the pipeline stages
 * (K tile, padded rows, then V tile) and the queries (f32). The warps' final
 * states reuse the stages. */
template <int DPL, int QB> struct dec_smem {
    static constexpr int HD = 32 * DPL;
    static constexpr int RB = HD * 2;            /* bytes of a cache row */
    static constexpr int KSTR = RB + DEC_KPAD;   /* staged K row stride */
    static constexpr int STAGE = DEC_TILE * (KSTR + RB);
    static constexpr int Q_OFF = DEC_STAGES * STAGE;
    static constexpr int BYTES = Q_OFF + QB * HD * 4;
    static_assert(DEC_WARPS * QB * HD * 4 <= DEC_STAGES * STAGE, "merge scratch fits the stages");
};

template <int DPL, int QB>
__global__ __launch_bounds__(DEC_WARPS * 32) void attn_decode_kernel(const attn_args a)
{
    using SM = dec_smem<DPL, QB>;
    constexpr int HD = SM::HD, RB = SM::RB, KSTR = SM::KSTR;
    constexpr int CH = HD / 8;  /* 16-byte chunks per row */
    constexpr int QCH = CH / 4; /* chunks per quarter */
    extern __shared__ __align__(16) unsigned char dsm[];
    __shared__ float wm[DEC_WARPS][QB], wl[DEC_WARPS][QB];
    float *Qs = (float *)(dsm + SM::Q_OFF); /* [QB][HD] */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kvh = blockIdx.y;
    const int p0 = blockIdx.x * QB;
    const int npairs = n * a.group;
    if (p0 >= npairs) return; /* uniform */
    const int t_last = min((p0 + QB - 1) / a.group, n - 1);
    const int s_lo = blockIdx.z * a.split_len;
    const int s_hi = (int)min((long long)s_lo + a.split_len, (long long)a.max_seq);
    const int b_hi = min(min(start + t_last + 1, a.max_seq), s_hi); /* block's keys end */
    if (b_hi <= s_lo) return;                                      /* uniform */

    /* the block's queries: (t, h), visible keys [s_lo, lim) */
    int lim[QB];
#pragma unroll
    for (int qi = 0; qi < QB; qi++) {
        const int p = p0 + qi;
        lim[qi] = p < npairs ? min(min(start + p / a.group + 1, a.max_seq), b_hi) : s_lo;
    }

    const int ntiles = (b_hi - s_lo + DEC_TILE - 1) / DEC_TILE;
    const size_t rstride = (size_t)a.n_kv * HD; /* elements between cache rows */
    const __nv_bfloat16 *kbase = a.kc + (size_t)kvh * HD, *vbase = a.vc + (size_t)kvh * HD;
    auto load_tile = [&](int tile) {
        unsigned char *st = dsm + (tile % DEC_STAGES) * SM::STAGE;
        const int j0 = s_lo + tile * DEC_TILE;
        for (int idx = threadIdx.x; idx < DEC_TILE * CH; idx += DEC_WARPS * 32) {
            const int r = idx / CH, c = idx % CH;
            const bool ok = j0 + r < b_hi;
            const size_t g = (size_t)(ok ? j0 + r : s_lo) * rstride + (size_t)c * 8;
            dec_cp_async16(st + r * KSTR + c * 16, kbase + g, ok);
            dec_cp_async16(st + DEC_TILE * KSTR + r * RB + c * 16, vbase + g, ok);
        }
    };
#pragma unroll
    for (int st = 0; st < DEC_STAGES - 1; st++) {
        if (st < ntiles) load_tile(st);
        dec_cp_commit();
    }
    /* the queries, while the first tiles are in flight */
    for (int idx = threadIdx.x; idx < QB * HD; idx += DEC_WARPS * 32) {
        const int qi = idx / HD, d = idx % HD;
        const int p = p0 + qi;
        Qs[idx] = p < npairs
                      ? frt_ld(a.q, a.q_dt, ((size_t)(p / a.group) * a.n_heads +
                                             kvh * a.group + p % a.group) * HD + d)
                      : 0.0f;
    }

    const int slot = lane >> 2, quarter = lane & 3;
    float o[QB][DPL], m[QB], l[QB];
#pragma unroll
    for (int qi = 0; qi < QB; qi++) {
        m[qi] = -INFINITY;
        l[qi] = 0.0f;
#pragma unroll
        for (int d = 0; d < DPL; d++) o[qi][d] = 0.0f;
    }

    for (int it = 0; it < ntiles; it++) {
        dec_cp_wait<DEC_STAGES - 2>();
        __syncthreads(); /* tile it landed for every thread; tile it - 1 is consumed */
        if (it + DEC_STAGES - 1 < ntiles) load_tile(it + DEC_STAGES - 1);
        dec_cp_commit();

        const int jb = s_lo + it * DEC_TILE + warp * DEC_KPW; /* this warp's first key */
        if (jb >= b_hi) continue;                             /* warp-uniform */
        const unsigned char *st = dsm + (it % DEC_STAGES) * SM::STAGE;
        const unsigned char *krow = st + (warp * DEC_KPW + slot) * KSTR;
        const unsigned char *vt = st + DEC_TILE * KSTR + warp * DEC_KPW * RB;
        const int j = jb + slot;

        /* scores: quarter `quarter` of the dims of key j, then the 4 quarters */
        float acc[QB];
#pragma unroll
        for (int qi = 0; qi < QB; qi++) acc[qi] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < QCH; cc++) {
            const int c = cc * 4 + quarter;
            float kf[8];
            dec_bf16x8(*(const uint4 *)(krow + c * 16), kf);
#pragma unroll
            for (int qi = 0; qi < QB; qi++) {
                const float4 q0 = *(const float4 *)(Qs + qi * HD + c * 8);
                const float4 q1 = *(const float4 *)(Qs + qi * HD + c * 8 + 4);
                float s = acc[qi];
                s += q0.x * kf[0];
                s += q0.y * kf[1];
                s += q0.z * kf[2];
                s += q0.w * kf[3];
                s += q1.x * kf[4];
                s += q1.y * kf[5];
                s += q1.z * kf[6];
                s += q1.w * kf[7];
                acc[qi] = s;
            }
        }
        float p[QB];
#pragma unroll
        for (int qi = 0; qi < QB; qi++) {
            float s = acc[qi];
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2); /* equal on the 4 lanes of the key */
            const bool valid = j < lim[qi];
            s = valid ? s * a.scale : -INFINITY;
            float mt = s; /* max over the 8 keys (lanes xor 4, 8, 16) */
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 4));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 8));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 16));
            const float mn = fmaxf(m[qi], mt);
            float corr = 1.0f, pv = 0.0f;
            if (mn != -INFINITY) { /* some key seen: mn finite */
                corr = expf(m[qi] - mn); /* 0 while m = -inf */
                pv = valid ? expf(s - mn) : 0.0f;
            }
            float ps = pv;
            ps += __shfl_xor_sync(0xffffffffu, ps, 4);
            ps += __shfl_xor_sync(0xffffffffu, ps, 8);
            ps += __shfl_xor_sync(0xffffffffu, ps, 16);
            l[qi] = l[qi] * corr + ps;
            m[qi] = mn;
            p[qi] = pv;
#pragma unroll
            for (int d = 0; d < DPL; d++) o[qi][d] *= corr;
        }
        /* P.V: lane owns dims [lane * DPL, (lane + 1) * DPL) */
        const int cnt = min(DEC_KPW, b_hi - jb);
#pragma unroll
        for (int kk = 0; kk < DEC_KPW; kk++) {
            if (kk < cnt) { /* warp-uniform */
                float vf[DPL];
                dec_ld_v<DPL>(vt + kk * RB + lane * DPL * 2, vf);
#pragma unroll
                for (int qi = 0; qi < QB; qi++) {
                    const float pk = __shfl_sync(0xffffffffu, p[qi], kk * 4);
#pragma unroll
                    for (int d = 0; d < DPL; d++) o[qi][d] += pk * vf[d];
                }
            }
        }
    }
    dec_cp_wait<0>();
    __syncthreads(); /* every warp is done with the stages: reuse them */

    /* merge the 4 warps' states in warp order 0..3 */
    float *wo = (float *)dsm; /* [DEC_WARPS][QB][HD] */
#pragma unroll
    for (int qi = 0; qi < QB; qi++) {
#pragma unroll
        for (int d = 0; d < DPL; d++) wo[(warp * QB + qi) * HD + lane * DPL + d] = o[qi][d];
        if (lane == 0) {
            wm[warp][qi] = m[qi];
            wl[warp][qi] = l[qi];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < QB * HD; idx += DEC_WARPS * 32) {
        const int qi = idx / HD, d = idx % HD;
        const int p = p0 + qi;
        if (p >= npairs) continue;
        const int t = p / a.group, h = kvh * a.group + p % a.group;
        if (min(start + t + 1, a.max_seq) <= s_lo) continue; /* no key of t in this split */
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w][qi]);
        float O = 0.0f, L = 0.0f;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++) {
            const float mw = wm[w][qi];
            if (mw == -INFINITY) continue; /* this warp saw no key of the query */
            const float f = expf(mw - M);
            O += wo[(w * QB + qi) * HD + d] * f;
            L += wl[w][qi] * f;
        }
        float *pp = a.part + (((size_t)blockIdx.z * a.max_n + t) * a.n_heads + h) * (HD + 2);
        pp[d] = O;
        if (d == 0) {
            pp[HD] = M;
            pp[HD + 1] = L;
        }
    }
}

/* Merges the splits that hold keys of token t, head h, for 64 output dims
 * (blockIdx.y) with 256 threads: thread (sg, dd) = (tid / 64, tid % 64) sums
 * the splits s = sg mod 4 of dim 64 blockIdx.y + dd; M is a block max, L a
 * block sum (fixed tree), the 4 partial outputs are added in order 0..3. */
#define COMB_THREADS 256
#define COMB_CHUNK 1024 /* split weights staged in shared memory per round */

__global__ __launch_bounds__(COMB_THREADS) void attn_combine_kernel(const attn_args a, int hd)
{
    __shared__ float wsh[COMB_CHUNK];
    __shared__ float red[4][64];
    __shared__ float smax[COMB_THREADS / 32];
    const int t = blockIdx.x / a.n_heads, h = blockIdx.x % a.n_heads;
    if (t >= frt_dyn_n(a.d_n, a.max_n)) return; /* uniform */
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kend = min(start + t + 1, a.max_seq);
    const int ns = (kend + a.split_len - 1) / a.split_len;
    const size_t stride = (size_t)a.max_n * a.n_heads * (hd + 2);
    const float *p0 = a.part + ((size_t)t * a.n_heads + h) * (hd + 2);
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;

    float M = -INFINITY;
    for (int s = tid; s < ns; s += COMB_THREADS) M = fmaxf(M, p0[s * stride + hd]);
    M = frt_warp_max(M);
    if (lane == 0) smax[wid] = M;
    __syncthreads();
    M = smax[0];
#pragma unroll
    for (int w = 1; w < COMB_THREADS / 32; w++) M = fmaxf(M, smax[w]);

    float Lp = 0.0f;
    for (int s = tid; s < ns; s += COMB_THREADS)
        Lp += p0[s * stride + hd + 1] * expf(p0[s * stride + hd] - M);
    const float L = frt_block_sum(Lp);

    const int sg = tid >> 6, dd = tid & 63;
    const int d = blockIdx.y * 64 + dd;
    float acc = 0.0f;
    for (int s0 = 0; s0 < ns; s0 += COMB_CHUNK) {
        const int cnt = min(COMB_CHUNK, ns - s0);
        __syncthreads(); /* the previous round's weights are consumed */
        for (int i = tid; i < cnt; i += COMB_THREADS) wsh[i] = expf(p0[(s0 + i) * stride + hd] - M);
        __syncthreads();
        if (d < hd) {
#pragma unroll 4
            for (int i = sg; i < cnt; i += 4) acc += p0[(size_t)(s0 + i) * stride + d] * wsh[i];
        }
    }
    red[sg][dd] = acc;
    __syncthreads();
    if (sg == 0 && d < hd) {
        const float O = ((red[0][dd] + red[1][dd]) + red[2][dd]) + red[3][dd];
        frt_st(a.out, a.out_dt, ((size_t)t * a.n_heads + h) * hd + d, O / L);
    }
}

static int n_splits_of(int max_seq, int split_len)
{
    return (int)(((long long)max_seq + split_len - 1) / split_len);
}

extern "C" size_t frt_cuda_attention_workspace_bytes(int max_n, int max_seq, int n_heads,
                                                     int head_dim, int split_len)
{
    if (split_len <= 0 || max_n <= 0 || max_seq <= 0 || n_heads <= 0 || head_dim <= 0) return 0;
    return (size_t)n_splits_of(max_seq, split_len) * max_n * n_heads * (head_dim + 2) *
           sizeof(float);
}

/* Launches attn_decode_kernel<dpl, qb> (opting in to its shared memory). */
template <int DPL, int QB> static int decode_launch_t(dim3 grid, cudaStream_t s, const attn_args &a)
{
    const int bytes = dec_smem<DPL, QB>::BYTES;
    FRT_CUDA_TRY(cudaFuncSetAttribute(attn_decode_kernel<DPL, QB>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    attn_decode_kernel<DPL, QB><<<grid, DEC_WARPS * 32, bytes, s>>>(a);
    FRT_LAUNCH_CHECK();
    return 0;
}

template <int DPL> static int decode_launch_q(int qb, dim3 grid, cudaStream_t s, const attn_args &a)
{
    switch (qb) {
    case 1: return decode_launch_t<DPL, 1>(grid, s, a);
    case 2: return decode_launch_t<DPL, 2>(grid, s, a);
    case 4: return decode_launch_t<DPL, 4>(grid, s, a);
    default: return decode_launch_t<DPL, 8>(grid, s, a);
    }
}

static int decode_launch(int dpl, int qb, dim3 grid, cudaStream_t s, const attn_args &a)
{
    switch (dpl) {
    case 2: return decode_launch_q<2>(qb, grid, s, a);
    case 4: return decode_launch_q<4>(qb, grid, s, a);
    default: return decode_launch_q<8>(qb, grid, s, a);
    }
}

extern "C" int frt_cuda_attention(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                  frt_cuda_dtype q_dtype, const uint16_t *k_cache,
                                  const uint16_t *v_cache, const int32_t *d_start,
                                  const int32_t *d_n, int max_n, int max_seq, int n_heads,
                                  int n_kv_heads, int head_dim, float scale, int split_len,
                                  void *workspace, size_t workspace_bytes)
{
    FRT_ARG(out && q && k_cache && v_cache && d_start, "cuda attention: NULL pointer");
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
    if (max_n == 0) return 0;

    attn_args a;
    a.out = out;
    a.out_dt = out_dtype;
    a.q = q;
    a.q_dt = q_dtype;
    a.kc = (const __nv_bfloat16 *)k_cache;
    a.vc = (const __nv_bfloat16 *)v_cache;
    a.d_start = d_start;
    a.d_n = d_n;
    a.max_n = max_n;
    a.max_seq = max_seq;
    a.n_heads = n_heads;
    a.n_kv = n_kv_heads;
    a.group = n_heads / n_kv_heads;
    a.scale = scale;
    if (split_len > 0) {
        a.split_len = split_len;
        a.part = (float *)workspace;
    } else {
        a.split_len = max_seq;
        a.part = NULL;
    }
    const int n_splits = n_splits_of(max_seq, a.split_len);
    const long long pairs = (long long)max_n * a.group;
    cudaStream_t s = (cudaStream_t)stream;
    const int dpl = head_dim / 32;
    const bool aligned16 = ((uintptr_t)k_cache % 16) == 0 && ((uintptr_t)v_cache % 16) == 0;
    if (a.part && (dpl == 2 || dpl == 4 || dpl == 8) && aligned16) {
        /* flash-decoding: QB = the pairs of one KV head, rounded up to 1, 2,
         * 4 or 8 (several chunks past 8) */
        int qb = 1;
        while (qb < pairs && qb < 8) qb *= 2;
        dim3 grid((unsigned int)((pairs + qb - 1) / qb), (unsigned int)n_kv_heads,
                  (unsigned int)n_splits);
        FRT_TRY(decode_launch(dpl, qb, grid, s, a));
    } else {
        dim3 grid((unsigned int)((pairs + ATT_WARPS - 1) / ATT_WARPS), (unsigned int)n_kv_heads,
                  (unsigned int)n_splits);
        switch (dpl) {
        case 1: attn_kernel<1><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        case 2: attn_kernel<2><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        case 3: attn_kernel<3><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        case 4: attn_kernel<4><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        case 5: attn_kernel<5><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        case 6: attn_kernel<6><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        case 7: attn_kernel<7><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        default: attn_kernel<8><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
        }
        FRT_LAUNCH_CHECK();
    }
    if (a.part) {
        dim3 cgrid((unsigned int)(max_n * n_heads), (unsigned int)((head_dim + 63) / 64));
        attn_combine_kernel<<<cgrid, COMB_THREADS, 0, s>>>(a, head_dim);
        FRT_LAUNCH_CHECK();
    }
    return 0;
}
