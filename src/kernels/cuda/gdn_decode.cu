/*
 * kernels/cuda/gdn_decode.cu - the Gated DeltaNet token step (decode) in two
 * launches instead of ten: the short convolution of one token
 * (frt_cuda_conv1d_step), then everything after it for one token
 * (frt_cuda_gdn_decode: l2norm of q and k, the gates, the gated delta rule,
 * the gated RMSNorm).
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
 * gdn_decode: one block per value head h, DK * DV / 32 threads (512 at
 * dk = dv = 128), owning the whole [DK, DV] f32 state of the head in
 * registers: thread t holds the 4 columns 4 (t % (DV/4)) .. + 3 (one float4)
 * of the R = 8 rows rg + r RG (rg = t / (DV/4), RG = DK / 8 row groups), so a
 * warp loads and stores whole contiguous rows (16-byte accesses, coalesced);
 * the state is read once (every load issued before any arithmetic) and
 * written once. The first DK threads L2-normalise q and k of key head
 * h / (n_v_heads / n_k_heads) (sum of squares in fp64 through a warp
 * butterfly and the DK / 32 warp sums in order: every block computes them
 * redundantly, 2 x DK values). The sums over the key dim (kv = S^T k,
 * o = S^T q) run per thread over its 8 rows ascending, then over the RG row
 * groups in order 0..RG-1 through shared memory (not the twin's single
 * ascending sum; fixed, so the bits depend on DK and DV only). Warp 0 then
 * holds o for all DV columns (twice over when DV = 64) and does the gated
 * RMSNorm with a butterfly over the DV / 4 lanes of a row group (fp64).
 * No atomics. Tested in tests/test_cuda_gdn_decode.c.
 */
#include "kernels/cuda/cuda_util.h"

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

/* ---- the rest of the token step ------------------------------------------ */

__device__ __forceinline__ float4 f4_fma(float a, float4 x, float4 y)
{
    return make_float4(y.x + a * x.x, y.y + a * x.y, y.z + a * x.z, y.w + a * x.w);
}

__device__ __forceinline__ float4 f4_add(float4 x, float4 y)
{
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

template <int DK, int DV>
__global__ __launch_bounds__(DK * DV / 32, 1) void gdn_decode_kernel(
    void *ob, int ob_dt, float *__restrict__ state, const float *__restrict__ qkv,
    const float *__restrict__ zg, const float *__restrict__ a, const float *__restrict__ b,
    const float *__restrict__ A_log, const float *__restrict__ dt_bias,
    const float *__restrict__ norm_w, const int32_t *d_n, int n_k_heads, int n_v_heads,
    float scale, float eps)
{
    constexpr int NT = DK * DV / 32; /* threads */
    constexpr int CG = DV / 4;       /* column groups (one float4 each) */
    constexpr int RG = NT / CG;      /* row groups, DK / 8 */
    constexpr int R = DK / RG;       /* rows per thread, 8 */
    constexpr int KW = DK / 32;      /* warps holding the q and k elements */
    static_assert(R == 8 && CG <= 32 && 32 % CG == 0 && DK % 32 == 0, "gdn_decode shape");
    __shared__ __align__(16) float qs[DK], ks[DK]; /* normalised; qs also scaled */
    __shared__ __align__(16) float red_kv[RG][DV], red_o[RG][DV];
    __shared__ double ss_q[KW], ss_k[KW];

    if (frt_dyn_n(d_n, 1) == 0) return; /* uniform: the state stays */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cg = tid % CG, rg = tid / CG, c0 = 4 * cg;
    const int h = blockIdx.x, kh = h / (n_v_heads / n_k_heads);
    const size_t kd = (size_t)n_k_heads * DK;
    float4 *Sg = (float4 *)(state + (size_t)h * DK * DV);

    /* every load up front: the state (8 x 16 bytes per thread), v of my
     * columns, q and k, the gate inputs, z and the norm weight (warp 0) */
    float4 S[R];
#pragma unroll
    for (int r = 0; r < R; r++) S[r] = Sg[(size_t)(rg + r * RG) * CG + cg];
    const float4 v4 = *(const float4 *)(qkv + 2 * kd + (size_t)h * DV + c0);
    float qa = 0.0f, ka = 0.0f;
    if (tid < DK) {
        qa = qkv[(size_t)kh * DK + tid];
        ka = qkv[kd + (size_t)kh * DK + tid];
    }
    const float ah = a[h], bh = b[h], alog = A_log[h], dtb = dt_bias[h];
    float4 z4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), w4 = z4;
    if (warp == 0) {
        z4 = *(const float4 *)(zg + (size_t)h * DV + c0);
        w4 = *(const float4 *)(norm_w + c0);
    }

    /* frt_cpu_gdn_gate */
    const float g = -expf(alog) * frt_softplus(ah + dtb);
    const float beta = frt_sigmoid(bh);
    const float decay = expf(g);

    /* frt_cpu_l2norm: x * (1 / sqrtf((float)sum_f64(x^2) + eps)) */
    if (warp < KW) {
        const double sq = frt_warp_sum((double)qa * (double)qa);
        const double sk = frt_warp_sum((double)ka * (double)ka);
        if (lane == 0) {
            ss_q[warp] = sq;
            ss_k[warp] = sk;
        }
    }
    __syncthreads();
    if (tid < DK) {
        double tq = 0.0, tk = 0.0;
#pragma unroll
        for (int w = 0; w < KW; w++) {
            tq += ss_q[w];
            tk += ss_k[w];
        }
        const float invq = 1.0f / sqrtf((float)tq + GDN_L2_EPS);
        const float invk = 1.0f / sqrtf((float)tk + GDN_L2_EPS);
        qs[tid] = (qa * invq) * scale; /* the twin: l2norm stores q, gdr scales it */
        ks[tid] = ka * invk;
    }
    __syncthreads();

    /* S *= exp(g); kv = S^T k */
    float4 kvp = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float kr = ks[rg + r * RG];
        S[r] = make_float4(S[r].x * decay, S[r].y * decay, S[r].z * decay, S[r].w * decay);
        kvp = f4_fma(kr, S[r], kvp);
    }
    *(float4 *)&red_kv[rg][c0] = kvp;
    __syncthreads();
    float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < RG; w++) kv = f4_add(kv, *(const float4 *)&red_kv[w][c0]);

    /* delta = (v - kv) beta; S += k (x) delta; o = S^T (q dk^-0.5) */
    const float4 delta = make_float4((v4.x - kv.x) * beta, (v4.y - kv.y) * beta,
                                     (v4.z - kv.z) * beta, (v4.w - kv.w) * beta);
    float4 op = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int row = rg + r * RG;
        S[r] = f4_fma(ks[row], delta, S[r]);
        op = f4_fma(qs[row], S[r], op);
    }
    *(float4 *)&red_o[rg][c0] = op;
#pragma unroll
    for (int r = 0; r < R; r++) Sg[(size_t)(rg + r * RG) * CG + cg] = S[r];
    __syncthreads();
    if (warp != 0) return;

    /* warp 0: o of columns c0..c0+3 (lanes l and l + 16 alike when CG = 16),
     * then frt_cpu_rmsnorm_gated over the DV columns of the head */
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < RG; w++) o = f4_add(o, *(const float4 *)&red_o[w][c0]);
    double ss = (double)o.x * (double)o.x + (double)o.y * (double)o.y +
                (double)o.z * (double)o.z + (double)o.w * (double)o.w;
#pragma unroll
    for (int off = CG / 2; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float var = (float)(ss / DV);
    const float inv = 1.0f / sqrtf(var + eps);
    if (tid >= CG) return; /* row group 0 writes */
    const float y0 = (w4.x * (o.x * inv)) * frt_silu(z4.x);
    const float y1 = (w4.y * (o.y * inv)) * frt_silu(z4.y);
    const float y2 = (w4.z * (o.z * inv)) * frt_silu(z4.z);
    const float y3 = (w4.w * (o.w * inv)) * frt_silu(z4.w);
    const size_t oi = (size_t)h * DV + c0;
    if (ob_dt == FRT_CUDA_BF16) {
        __nv_bfloat162 *p = (__nv_bfloat162 *)((__nv_bfloat16 *)ob + oi);
        const __nv_bfloat162 lo = __floats2bfloat162_rn(y0, y1), hi = __floats2bfloat162_rn(y2, y3);
        uint2 u;
        u.x = *(const uint32_t *)&lo;
        u.y = *(const uint32_t *)&hi;
        *(uint2 *)p = u;
    } else {
        *(float4 *)((float *)ob + oi) = make_float4(y0, y1, y2, y3);
    }
}

static bool gdn_aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

extern "C" int frt_cuda_gdn_decode(void *stream, void *ob, frt_cuda_dtype ob_dtype, float *state,
                                   const float *qkv, const float *zg, const float *a,
                                   const float *b, const float *A_log, const float *dt_bias,
                                   const float *norm_w, const int32_t *d_n, int n_k_heads,
                                   int n_v_heads, int dk, int dv, float eps)
{
    FRT_ARG(ob && state && qkv && zg && a && b && A_log && dt_bias && norm_w,
            "cuda gdn_decode: NULL pointer");
    FRT_ARG(frt_dtype_ok(ob_dtype), "cuda gdn_decode: bad dtype");
    FRT_ARG(n_k_heads > 0 && n_v_heads > 0 && n_v_heads % n_k_heads == 0 && dk > 0 && dv > 0,
            "cuda gdn_decode: n_k_heads %d n_v_heads %d dk %d dv %d", n_k_heads, n_v_heads, dk,
            dv);
    FRT_ARG(gdn_aligned(state, 16) && gdn_aligned(qkv, 16) && gdn_aligned(zg, 16) &&
                gdn_aligned(norm_w, 16) && gdn_aligned(ob, ob_dtype == FRT_CUDA_BF16 ? 8 : 16),
            "cuda gdn_decode: state, qkv, zg, norm_w must be 16-byte aligned (ob 16, bf16 8)");
    FRT_ARG(ob != (const void *)qkv && ob != (const void *)zg && ob != (const void *)state,
            "cuda gdn_decode: ob aliases an input");
    if ((dk != 64 && dk != 128) || (dv != 64 && dv != 128))
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda gdn_decode: dk %d dv %d (64 or 128)", dk, dv);
    const float scale = (float)(1.0 / sqrt((double)dk));
    cudaStream_t s = (cudaStream_t)stream;
#define GDN_LAUNCH(DK, DV)                                                                       \
    gdn_decode_kernel<DK, DV><<<(unsigned int)n_v_heads, DK * DV / 32, 0, s>>>(                  \
        ob, ob_dtype, state, qkv, zg, a, b, A_log, dt_bias, norm_w, d_n, n_k_heads, n_v_heads,   \
        scale, eps)
    if (dk == 128 && dv == 128)
        GDN_LAUNCH(128, 128);
    else if (dk == 128)
        GDN_LAUNCH(128, 64);
    else if (dv == 128)
        GDN_LAUNCH(64, 128);
    else
        GDN_LAUNCH(64, 64);
#undef GDN_LAUNCH
    FRT_LAUNCH_CHECK();
    return 0;
}
