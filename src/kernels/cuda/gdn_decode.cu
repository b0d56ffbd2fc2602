/*
 * kernels/cuda/gdn_decode.cu - the Gated DeltaNet token step (decode) in ONE
 * launch (frt_cuda_gdn_decode: the short convolution of q, k, v, the l2norm
 * of q and k, the gates, the gated delta rule, the gated RMSNorm), and the
 * convolution's token step alone (frt_cuda_conv1d_step).
 * Math: transformers 5.x modeling_qwen3_5.py (causal_conv1d_update, l2norm,
 * Qwen3_5GatedDeltaNet.forward, torch_recurrent_gated_delta_rule,
 * Qwen3_5RMSNormGated), in the operations of the CPU twins
 * frt_cpu_conv1d_causal (n_tok 1), frt_cpu_l2norm, frt_cpu_gdn_gate,
 * frt_cpu_gdr_recurrent and frt_cpu_rmsnorm_gated.
 *
 * conv1d_step: one thread per channel (128 per block): it loads its weights,
 * its state row and x[c] before the first multiply, writes silu(sum) (taps
 * j ascending, as the twin) and shifts its own state row. The token count
 * (0 or 1) is read from device memory.
 *
 * gdn_decode: the dv columns of each value head are cut into S slices of
 * DVS columns (S = 4 at the 9B shape); block (h, s) owns the [dk, DVS] f32
 * slice of state[h] in registers (R = 8 rows x one float4 of columns per
 * thread, dk DVS / 32 threads; warps load and store whole 16-byte-aligned
 * row segments, read once and written once) and the DVS output columns.
 * The G = n_v_heads / n_k_heads value heads of key head kh, S slices each,
 * form one thread block cluster (G S <= 8 blocks, sm_90):
 *   - every block of the cluster computes the conv of the 2 dk q and k
 *     channels of kh itself (from x, the weights and the conv state) and
 *     the conv of its own DVS v channels; each v channel has one reader and
 *     writer, but the q and k conv-state rows are read by all G S blocks, so
 *     their new rows are written (by block rank c % (G S) for channel c)
 *     only after a cluster barrier that every block arrives at once its
 *     conv-state loads are consumed (barrier.cluster.arrive.release early,
 *     .wait.acquire late: the wait is normally already satisfied);
 *   - the l2norm of q and k (fp64 sums of squares: warp butterfly, then the
 *     dk / 32 warp sums in order) and the gates are computed redundantly by
 *     every block;
 *   - the dk-sums (kv = S^T k, o = S^T q) run per thread over its 8 rows
 *     ascending, then a butterfly over the row groups of a warp, then the
 *     warps in order through shared memory;
 *   - the gated RMSNorm needs the sum of squares over all dv columns of the
 *     head: each slice's fp64 partial is pushed into a slot of the shared
 *     memory of the S blocks of its head (distributed shared memory), a
 *     second cluster barrier, then every block adds the S slots in order
 *     0..S-1 (the same bits in all S blocks).
 * Every global store (state, conv state, ob, qkv_out) comes after the last
 * cluster barrier, so the barriers' release orders no pending store, and is
 * predicated on the token count (read from device memory; 0 stores
 * nothing): no early exit, every thread reaches both barriers. All loads
 * are issued before the first arithmetic. No atomics; the bits depend on
 * dk, dv and the slice count only. Tested in tests/test_cuda_gdn_decode.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/norm_util.h"

#include <cooperative_groups.h>
#include <math.h>

#define CONV_STEP_THREADS 128
#define GDN_L2_EPS 1e-6f /* the l2norm eps of q and k (Qwen3.5: 1e-6) */

/* ---- conv1d, one token --------------------------------------------------- */

/* KT > 0: the kernel size at compile time (2..4: every load first); KT == 0:
 * any size (1 included: no state), a loop. */
template <int KT>
__global__ __launch_bounds__(CONV_STEP_THREADS) void conv1d_step_kernel(
    void *out, int out_dt, const void *x, int x_dt, float *conv_state, const float *w,
    const int32_t *d_n, int channels, int kernel)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels || frt_dyn_n(d_n, 1) == 0) return;
    const float xc = frt_ld(x, x_dt, (size_t)c);
    float acc = 0.0f;
    if constexpr (KT > 0) {
        constexpr int KS = KT - 1;
        float *st = conv_state + (size_t)c * KS;
        const float *wc = w + (size_t)c * KT;
        float wv[KT], sv[KS];
#pragma unroll
        for (int j = 0; j < KT; j++) wv[j] = wc[j];
#pragma unroll
        for (int i = 0; i < KS; i++) sv[i] = st[i];
        /* xpad = [state, x]: taps 0..KS-1 read the state, tap KS reads x */
#pragma unroll
        for (int j = 0; j < KS; j++) acc += wv[j] * sv[j];
        acc += wv[KS] * xc;
        frt_st(out, out_dt, (size_t)c, frt_silu(acc));
#pragma unroll
        for (int i = 0; i + 1 < KS; i++) st[i] = sv[i + 1];
        st[KS - 1] = xc;
    } else {
        const int ks = kernel - 1;
        const float *wc = w + (size_t)c * kernel;
        float *st = ks > 0 ? conv_state + (size_t)c * ks : nullptr;
        for (int j = 0; j < kernel; j++) acc += wc[j] * (j < ks ? st[j] : xc);
        frt_st(out, out_dt, (size_t)c, frt_silu(acc));
        /* ascending i reads i + 1 before it is overwritten */
        for (int i = 0; i < ks; i++) st[i] = i + 1 < ks ? st[i + 1] : xc;
    }
}

extern "C" int frt_cuda_conv1d_step(void *stream, void *out, frt_cuda_dtype out_dtype,
                                    const void *x, frt_cuda_dtype x_dtype, float *conv_state,
                                    const float *w, const int32_t *d_n, int channels, int kernel)
{
    FRT_ARG(out && x && w && (conv_state || kernel == 1), "cuda conv1d_step: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(x_dtype), "cuda conv1d_step: bad dtype");
    FRT_ARG(channels > 0 && kernel >= 1 && kernel <= 64,
            "cuda conv1d_step: channels %d kernel %d (1..64)", channels, kernel);
    FRT_ARG(out != x, "cuda conv1d_step: out aliases x");
    const unsigned int blocks =
        (unsigned int)((channels + CONV_STEP_THREADS - 1) / CONV_STEP_THREADS);
    cudaStream_t s = (cudaStream_t)stream;
#define CONV_STEP_LAUNCH(KT)                                                                     \
    conv1d_step_kernel<KT><<<blocks, CONV_STEP_THREADS, 0, s>>>(out, out_dtype, x, x_dtype,      \
                                                                conv_state, w, d_n, channels,    \
                                                                kernel)
    switch (kernel) {
    case 2: CONV_STEP_LAUNCH(2); break;
    case 3: CONV_STEP_LAUNCH(3); break;
    case 4: CONV_STEP_LAUNCH(4); break;
    default: CONV_STEP_LAUNCH(0); break;
    }
#undef CONV_STEP_LAUNCH
    FRT_LAUNCH_CHECK();
    return 0;
}


/* ---- the whole token step ------------------------------------------------ */

namespace cg = cooperative_groups;

#define GDN_MAX_CLUSTER 8 /* blocks per cluster (the portable limit) */
#define GDN_MAX_SLICES 4  /* dv / 32 at dv = 128 */
#define GDN_MAX_KERNEL 4  /* conv taps */

__device__ __forceinline__ float4 f4_fma(float a, float4 x, float4 y)
{
    return make_float4(y.x + a * x.x, y.y + a * x.y, y.z + a * x.z, y.w + a * x.w);
}

__device__ __forceinline__ float4 f4_add(float4 x, float4 y)
{
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

/* Butterfly over the lanes that hold the same columns (lane ^ CG, ^ 2 CG, ..):
 * every lane ends with the sum of its column group. */
template <int CG> __device__ __forceinline__ float4 f4_rowgroup_sum(float4 v)
{
#pragma unroll
    for (int off = CG; off < 32; off <<= 1) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, off);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, off);
        v.z += __shfl_xor_sync(0xffffffffu, v.z, off);
        v.w += __shfl_xor_sync(0xffffffffu, v.w, off);
    }
    return v;
}

/* One conv channel of the token: xpad = [st[0..ks-1], x]; taps j ascending
 * from 0.0f as frt_cpu_conv1d_causal; returns the pre-activation sum. w, st
 * hold GDN_MAX_KERNEL entries (only the first k, ks = k - 1 are meaningful). */
__device__ __forceinline__ float gdn_conv_tap_sum(const float (&w)[GDN_MAX_KERNEL],
                                                  const float (&st)[GDN_MAX_KERNEL], float x,
                                                  int k)
{
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < GDN_MAX_KERNEL; j++)
        if (j < k) acc += w[j] * (j < k - 1 ? st[j] : x);
    return acc;
}

/* Loads channel c's weights and conv-state row (k - 1 entries). Entries
 * past them repeat the last one (clamped indices: every load unconditional,
 * no branch; gdn_conv_tap_sum never uses them). */
__device__ __forceinline__ void gdn_conv_load(float (&w)[GDN_MAX_KERNEL],
                                              float (&st)[GDN_MAX_KERNEL], const float *conv_w,
                                              const float *conv_state, size_t c, int k)
{
#pragma unroll
    for (int j = 0; j < GDN_MAX_KERNEL; j++) {
        w[j] = conv_w[c * k + (j < k ? j : k - 1)];
        st[j] = 0.0f;
    }
    if (k > 1) { /* uniform; conv_state may be NULL for k = 1 */
#pragma unroll
        for (int j = 0; j + 1 < GDN_MAX_KERNEL; j++)
            st[j] = conv_state[c * (k - 1) + (j < k - 1 ? j : k - 2)];
    }
}

/* A channel's new conv-state row, xpad[1 .. k-1], into entries i * stride
 * of a shared-memory stash (i < k - 1), so that it needs no registers until
 * the stores at the end of the kernel. */
__device__ __forceinline__ void gdn_conv_stash(float *row, int stride,
                                               const float (&st)[GDN_MAX_KERNEL], float x, int k)
{
#pragma unroll
    for (int i = 0; i + 1 < GDN_MAX_KERNEL; i++)
        if (i < k - 1) row[i * stride] = i + 1 < k - 1 ? st[i + 1] : x;
}

/* Stores channel c's new conv-state row from the stash. */
__device__ __forceinline__ void gdn_conv_store(float *conv_state, size_t c, const float *row,
                                               int stride, int k)
{
#pragma unroll
    for (int i = 0; i + 1 < GDN_MAX_KERNEL; i++)
        if (i < k - 1) conv_state[c * (k - 1) + i] = row[i * stride];
}

/* The launch arguments (one struct: cudaLaunchKernelEx). */
struct gdn_args {
    void *ob;
    int ob_dt;
    float *state, *conv_state, *qkv_out;
    const void *x;
    int x_dt;
    const float *conv_w, *zg, *a, *b, *A_log, *dt_bias, *norm_w;
    const int32_t *d_n;
    int n_k_heads, dv, ratio, slices, kernel;
    float scale, eps;
};

/* Grid: n_v_heads * slices blocks in clusters of ratio * slices along x;
 * block x = kh * (ratio * slices) + rank, rank = gv * slices + s: value head
 * h = kh * ratio + gv, columns s * DVS .. + DVS - 1. */
template <int DK, int DVS>
__global__ __launch_bounds__(DK * DVS / 32, 1) void gdn_decode_kernel(const gdn_args p)
{
    constexpr int NT = DK * DVS / 32; /* threads */
    constexpr int CG = DVS / 4;       /* column groups (one float4 each) */
    constexpr int RG = NT / CG;       /* row groups, DK / 8 */
    constexpr int R = DK / RG;        /* rows per thread, 8 */
    constexpr int NW = NT / 32;       /* warps */
    constexpr int KW = DK / 32;       /* warps holding the q and k channels */
    static_assert(R == 8 && CG <= 32 && 32 % CG == 0 && DK % 32 == 0 && NT >= DK && NT >= DVS,
                  "gdn_decode shape");
    constexpr int NC = 2 * DK + DVS;                             /* conv channels: q, k, my v */
    __shared__ __align__(16) float qraw[DK], kraw[DK], vs[DVS]; /* conv outputs */
    __shared__ float newrow[GDN_MAX_KERNEL - 1][NC];            /* new conv-state rows */
    __shared__ __align__(16) float red_kv[NW][DVS], red_o[NW][DVS];
    __shared__ double ss_q[KW], ss_k[KW];
    __shared__ double ss_o[GDN_MAX_SLICES]; /* the head's slices' partials, by slice */

    cg::cluster_group cluster = cg::this_cluster();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cg_ = tid % CG, rg = tid / CG, c0 = 4 * cg_;
    const int G = p.ratio, S = p.slices, CS = G * S, K = p.kernel, dv = p.dv;
    const int rank = (int)cluster.block_rank(); /* == blockIdx.x % CS */
    const int kh = (int)blockIdx.x / CS, gv = rank / S, sl = rank % S, h = kh * G + gv;
    const int col = sl * DVS + c0; /* my first column within the head */
    const size_t kd = (size_t)p.n_k_heads * DK;

    /* ---- every load up front: the token count, the state slice, the conv
     * inputs (q and k of kh: threads < DK; my v channels: the last DVS
     * threads), the gate inputs, z and the norm weight (warp 0) */
    /* programmatic dependent launch (as the GEMVs, gemv.cu): let the next
     * kernel (the output projection) launch and start its weight loads, then
     * wait for the kernels before to complete; everything read below may
     * have been written by them (the state by a previous step's launch) */
    frt_pdl_trigger();
    frt_pdl_wait();
    const int n = frt_dyn_n(p.d_n, 1);
    float4 *Sg = (float4 *)(p.state + (size_t)h * DK * dv);
    const int rs = dv / 4; /* float4 per state row */
    float4 St[R];
#pragma unroll
    for (int r = 0; r < R; r++) St[r] = Sg[(size_t)(rg + r * RG) * rs + col / 4];

    const size_t cq = (size_t)kh * DK + tid, ck = kd + cq; /* tid < DK */
    float xq = 0.0f, xk = 0.0f, wq[GDN_MAX_KERNEL], sq[GDN_MAX_KERNEL], wk[GDN_MAX_KERNEL],
          sk[GDN_MAX_KERNEL];
    if (tid < DK) {
        xq = frt_ld(p.x, p.x_dt, cq);
        xk = frt_ld(p.x, p.x_dt, ck);
        gdn_conv_load(wq, sq, p.conv_w, p.conv_state, cq, K);
        gdn_conv_load(wk, sk, p.conv_w, p.conv_state, ck, K);
    }
    const int vj = tid - (NT - DVS); /* my v channel, when >= 0 */
    const size_t cv = 2 * kd + (size_t)h * dv + sl * DVS + vj;
    float xv = 0.0f, wv[GDN_MAX_KERNEL], sv[GDN_MAX_KERNEL];
    if (vj >= 0) {
        xv = frt_ld(p.x, p.x_dt, cv);
        gdn_conv_load(wv, sv, p.conv_w, p.conv_state, cv, K);
    }
    const float ah = p.a[h], bh = p.b[h], alog = p.A_log[h], dtb = p.dt_bias[h];
    float4 z4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), w4 = z4;
    if (warp == 0) {
        z4 = *(const float4 *)(p.zg + (size_t)h * dv + col);
        w4 = *(const float4 *)(p.norm_w + col);
    }

    /* ---- the convolution (frt_cpu_conv1d_causal, n_tok 1) */
    float qa = 0.0f, ka = 0.0f, va = 0.0f;
    if (tid < DK) {
        qa = frt_silu(gdn_conv_tap_sum(wq, sq, xq, K));
        ka = frt_silu(gdn_conv_tap_sum(wk, sk, xk, K));
        gdn_conv_stash(&newrow[0][tid], NC, sq, xq, K);
        gdn_conv_stash(&newrow[0][DK + tid], NC, sk, xk, K);
    }
    if (vj >= 0) {
        va = frt_silu(gdn_conv_tap_sum(wv, sv, xv, K));
        gdn_conv_stash(&newrow[0][2 * DK + vj], NC, sv, xv, K);
    }
    /* B1: this block's conv-state loads are consumed; the q / k rows may be
     * overwritten by their owners once every block has arrived */
    __cluster_barrier_arrive();

    /* ---- frt_cpu_l2norm: x * (1 / sqrtf((float)sum_f64(x^2) + eps)) */
    if (warp < KW) {
        const double sqq = frt_warp_sum((double)qa * (double)qa);
        const double skk = frt_warp_sum((double)ka * (double)ka);
        if (lane == 0) {
            ss_q[warp] = sqq;
            ss_k[warp] = skk;
        }
        qraw[tid] = qa;
        kraw[tid] = ka;
    }
    if (vj >= 0) vs[vj] = va;
    __syncthreads();
    double tq = 0.0, tk = 0.0;
#pragma unroll
    for (int w = 0; w < KW; w++) {
        tq += ss_q[w];
        tk += ss_k[w];
    }
    const float invq = norm_inv_l2(tq, GDN_L2_EPS);
    const float invk = norm_inv_l2(tk, GDN_L2_EPS);

    /* ---- frt_cpu_gdn_gate */
    const float g = -expf(alog) * frt_softplus(ah + dtb);
    const float beta = frt_sigmoid(bh);
    const float decay = expf(g);

    /* ---- S *= exp(g); kv = S^T k */
    float kr[R];
    float4 kvp = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < R; r++) {
        kr[r] = kraw[rg + r * RG] * invk;
        St[r] = make_float4(St[r].x * decay, St[r].y * decay, St[r].z * decay, St[r].w * decay);
        kvp = f4_fma(kr[r], St[r], kvp);
    }
    kvp = f4_rowgroup_sum<CG>(kvp);
    if (lane < CG) *(float4 *)&red_kv[warp][c0] = kvp;
    __syncthreads();
    float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < NW; w++) kv = f4_add(kv, *(const float4 *)&red_kv[w][c0]);

    /* ---- delta = (v - kv) beta; S += k (x) delta; o = S^T (q dk^-0.5) */
    const float4 v4 = *(const float4 *)&vs[c0];
    const float4 delta = make_float4((v4.x - kv.x) * beta, (v4.y - kv.y) * beta,
                                     (v4.z - kv.z) * beta, (v4.w - kv.w) * beta);
    float4 op = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float qr = (qraw[rg + r * RG] * invq) * p.scale; /* l2norm stores q, gdr scales */
        St[r] = f4_fma(kr[r], delta, St[r]);
        op = f4_fma(qr, St[r], op);
    }
    op = f4_rowgroup_sum<CG>(op);
    if (lane < CG) *(float4 *)&red_o[warp][c0] = op;
    __syncthreads();

    /* ---- warp 0: o of columns c0..c0+3 (lanes l, l + CG, .. alike) and the
     * slice's fp64 sum of squares (butterfly over the CG column groups) */
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    double ss = 0.0;
    if (warp == 0) {
#pragma unroll
        for (int w = 0; w < NW; w++) o = f4_add(o, *(const float4 *)&red_o[w][c0]);
        ss = (double)o.x * (double)o.x + (double)o.y * (double)o.y + (double)o.z * (double)o.z +
             (double)o.w * (double)o.w;
#pragma unroll
        for (int off = CG / 2; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    }
    /* B1 wait: every block of the cluster has started and consumed its
     * conv-state loads */
    __cluster_barrier_wait();
    if (S > 1) { /* uniform: B2, the slices' partials of each head */
        if (warp == 0 && lane < S) *cluster.map_shared_rank(&ss_o[sl], gv * S + lane) = ss;
        __cluster_barrier_arrive();
        __cluster_barrier_wait();
        if (warp == 0) {
            ss = 0.0;
            for (int i = 0; i < S; i++) ss += ss_o[i];
        }
    }
    if (n == 0) return; /* uniform: nothing is stored */

    /* ---- the stores: the state slice, the conv rows this block owns (each
     * thread reads back only its own stash and conv outputs), ob */
#pragma unroll
    for (int r = 0; r < R; r++) Sg[(size_t)(rg + r * RG) * rs + col / 4] = St[r];
    if (vj >= 0) {
        gdn_conv_store(p.conv_state, cv, &newrow[0][2 * DK + vj], NC, K);
        if (p.qkv_out) p.qkv_out[cv] = vs[vj];
    }
    if (tid < DK && tid % CS == rank) {
        gdn_conv_store(p.conv_state, cq, &newrow[0][tid], NC, K);
        gdn_conv_store(p.conv_state, ck, &newrow[0][DK + tid], NC, K);
        if (p.qkv_out) {
            p.qkv_out[cq] = qraw[tid];
            p.qkv_out[ck] = kraw[tid];
        }
    }
    if (warp != 0 || lane >= CG) return;
    /* frt_cpu_rmsnorm_gated over the dv columns of the head */
    const float inv = norm_inv_rms(ss, dv, p.eps);
    const float y0 = (w4.x * (o.x * inv)) * frt_silu(z4.x);
    const float y1 = (w4.y * (o.y * inv)) * frt_silu(z4.y);
    const float y2 = (w4.z * (o.z * inv)) * frt_silu(z4.z);
    const float y3 = (w4.w * (o.w * inv)) * frt_silu(z4.w);
    const size_t oi = (size_t)h * dv + col;
    if (p.ob_dt == FRT_CUDA_BF16) {
        __nv_bfloat162 *q = (__nv_bfloat162 *)((__nv_bfloat16 *)p.ob + oi);
        const __nv_bfloat162 lo = __floats2bfloat162_rn(y0, y1), hi = __floats2bfloat162_rn(y2, y3);
        uint2 u;
        u.x = *(const uint32_t *)&lo;
        u.y = *(const uint32_t *)&hi;
        *(uint2 *)q = u;
    } else {
        *(float4 *)((float *)p.ob + oi) = make_float4(y0, y1, y2, y3);
    }
}

static bool gdn_aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

/* Slices per value head for a ratio: the most (dv / 32 at most) with
 * ratio * slices <= GDN_MAX_CLUSTER; 0 when ratio > GDN_MAX_CLUSTER. */
static int gdn_slices(int ratio, int dv)
{
    if (ratio > GDN_MAX_CLUSTER) return 0;
    int s = dv / 32;
    while (s > 1 && ratio * s > GDN_MAX_CLUSTER) s >>= 1;
    return s;
}

template <int DK, int DVS> static int gdn_launch(cudaStream_t stream, const gdn_args &a)
{
    const int cs = a.ratio * a.slices;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned int)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;

    cfg.gridDim = dim3((unsigned int)(a.n_k_heads * cs));
    cfg.blockDim = dim3(DK * DVS / 32);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1 + frt_pdl_attr(&attr[1]); /* programmatic dependent launch (see the kernel) */
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, gdn_decode_kernel<DK, DVS>, a));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_gdn_decode(void *stream, void *ob, frt_cuda_dtype ob_dtype, float *state,
                                   float *conv_state, float *qkv_out, const void *x,
                                   frt_cuda_dtype x_dtype, const float *conv_w, const float *zg,
                                   const float *a, const float *b, const float *A_log,
                                   const float *dt_bias, const float *norm_w, const int32_t *d_n,
                                   int n_k_heads, int n_v_heads, int dk, int dv, int kernel,
                                   float eps)
{
    FRT_ARG(ob && state && x && conv_w && zg && a && b && A_log && dt_bias && norm_w &&
                (conv_state || kernel == 1),
            "cuda gdn_decode: NULL pointer");
    FRT_ARG(frt_dtype_ok(ob_dtype) && frt_dtype_ok(x_dtype), "cuda gdn_decode: bad dtype");
    FRT_ARG(n_k_heads > 0 && n_v_heads > 0 && n_v_heads % n_k_heads == 0 && dk > 0 && dv > 0 &&
                kernel >= 1,
            "cuda gdn_decode: n_k_heads %d n_v_heads %d dk %d dv %d kernel %d", n_k_heads,
            n_v_heads, dk, dv, kernel);
    FRT_ARG(gdn_aligned(state, 16) && gdn_aligned(zg, 16) && gdn_aligned(norm_w, 16) &&
                gdn_aligned(ob, ob_dtype == FRT_CUDA_BF16 ? 8 : 16),
            "cuda gdn_decode: state, zg, norm_w must be 16-byte aligned (ob 16, bf16 8)");
    FRT_ARG(ob != x && ob != (const void *)zg && ob != (const void *)state &&
                ob != (const void *)conv_state && ob != (const void *)qkv_out,
            "cuda gdn_decode: ob aliases an input or output");
    FRT_ARG(!qkv_out || ((const void *)qkv_out != x && qkv_out != zg && qkv_out != state &&
                         qkv_out != conv_state),
            "cuda gdn_decode: qkv_out aliases an input or output");
    if ((dk != 64 && dk != 128) || (dv != 64 && dv != 128) || kernel > GDN_MAX_KERNEL ||
        n_v_heads / n_k_heads > GDN_MAX_CLUSTER)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gdn_decode: dk %d dv %d (64 or 128), kernel %d (<= %d), "
                         "n_v_heads / n_k_heads %d (<= %d)",
                         dk, dv, kernel, GDN_MAX_KERNEL, n_v_heads / n_k_heads, GDN_MAX_CLUSTER);
    gdn_args A;
    A.ob = ob;
    A.ob_dt = ob_dtype;
    A.state = state;
    A.conv_state = conv_state;
    A.qkv_out = qkv_out;
    A.x = x;
    A.x_dt = x_dtype;
    A.conv_w = conv_w;
    A.zg = zg;
    A.a = a;
    A.b = b;
    A.A_log = A_log;
    A.dt_bias = dt_bias;
    A.norm_w = norm_w;
    A.d_n = d_n;
    A.n_k_heads = n_k_heads;
    A.dv = dv;
    A.ratio = n_v_heads / n_k_heads;
    A.slices = gdn_slices(A.ratio, dv);
    A.kernel = kernel;
    A.scale = (float)(1.0 / sqrt((double)dk));
    A.eps = eps;
    cudaStream_t s = (cudaStream_t)stream;
    const int dvs = dv / A.slices;
    if (dk == 128)
        return dvs == 32 ? gdn_launch<128, 32>(s, A)
                         : (dvs == 64 ? gdn_launch<128, 64>(s, A) : gdn_launch<128, 128>(s, A));
    return dvs == 32 ? gdn_launch<64, 32>(s, A)
                     : (dvs == 64 ? gdn_launch<64, 64>(s, A) : gdn_launch<64, 128>(s, A));
}
