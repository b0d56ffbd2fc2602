/*
 * kernels/cuda/rmsnorm.cu - RMSNorm over the last dimension (zero-centred
 * 1 + w and plain w), and the residual add fused with it.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5RMSNorm; the same order
 * as the CPU twins frt_cpu_rmsnorm / frt_cpu_add: the sum of squares in fp64,
 * var = (float)(sum / dim), inv = 1 / sqrtf(var + eps), (x * inv) * (1 + w).
 *
 * One block per row (token, head); rows of tokens t >= *d_n exit. Latency
 * first (decode normalises one row of 4096): every thread loads all its
 * elements (x, the delta, the weight) into registers with independent
 * 16-byte loads before any arithmetic or store, so a row costs one memory
 * round trip, not one per element. Thread i owns the groups of 4 elements
 * i, i + T, i + 2T, ... (T threads, groups of 1 when dim % 4 != 0); the loads
 * are vectorised when the pointers are aligned, scalar otherwise, with the
 * same ownership, so the fp64 sum (each thread's groups in order, then
 * frt_block_sum) and the bits depend on dim only. Rows wider than the
 * register path (more than 8 groups of 4 per thread at 512 threads: dim >
 * 16384) take a strided loop. Tested in tests/test_cuda_kernels.c and
 * tests/test_cuda_decode.c.
 */
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/norm_util.h"

template <int G, int NV>
__global__ __launch_bounds__(NORM_MAX_THREADS) void rmsnorm_kernel(
    void *out, int out_dt, const void *x, int x_dt, const float *__restrict__ w,
    const int32_t *d_n, int max_n, int n_heads, int dim, float eps, int zero_centered, bool vec)
{
    frt_pdl_wait(); /* launched with PDL (NORM_DISPATCH) */
    /* the kernel after may start now: it waits for this one before it reads
     * or writes (the PDL contract, cuda_util.h); the skinny GEMM streams its
     * first weights meanwhile */
    frt_pdl_trigger();
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    const int groups = dim / G;
    const size_t o = row * dim;
    float v[NV][G], wv[NV][G];
    /* all loads first: x and w of every owned group */
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) {
            norm_ld<G>(x, x_dt, o + (size_t)gi * G, vec, v[k]);
            norm_ld<G>(w, FRT_CUDA_F32, (size_t)gi * G, vec, wv[k]);
        }
    }
    const double ss = norm_sumsq<G, NV>(v, groups);
    const float inv = norm_inv_rms(ss, dim, eps);
    /* element i is read and written by the same thread: safe in place */
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) {
            float y[G];
#pragma unroll
            for (int e = 0; e < G; e++)
                y[e] = norm_weigh(v[k][e], inv, wv[k][e], zero_centered);
            norm_st<G>(out, out_dt, o + (size_t)gi * G, vec, y);
        }
    }
}

/* Rows too wide for the register path: a strided loop (two reads of x). */
__global__ void rmsnorm_loop_kernel(void *out, int out_dt, const void *x, int x_dt, const float *w,
                                    const int32_t *d_n, int max_n, int n_heads, int dim, float eps,
                                    int zero_centered)
{
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return;
    const size_t o = row * dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i);
        ss += (double)v * (double)v;
    }
    ss = frt_block_sum(ss);
    const float inv = norm_inv_rms(ss, dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i);
        float y = norm_weigh(v, inv, w[i], zero_centered);
        frt_st(out, out_dt, o + i, y);
    }
}

/* quant (the _quant launchers): out (bf16) quantized per token in the same
 * pass, q[t, :] / q_scale[t] as fp8_quantize_dyn_kernel (fp8.cu) computes
 * them from out: the row's max |bf16(y)| (NaN skipped), the scale
 * frt_fp8_amax_scale_dev of it, each bf16(y) encoded at 1 / scale; rows t
 * >= n: quant_zero_row. */
struct norm_quant {
    uint8_t *q;     /* [max_n, dim] E4M3 codes (NULL: no quantization) */
    float *q_scale; /* [max_n] f32 */
};

/* A row t >= n of the quantized out: zero codes, scale 1 (what the
 * quantizer gives an all-zero row), so the GEMM after it reads zeros there,
 * never stale codes. */
__device__ __forceinline__ void quant_zero_row(norm_quant nq, int t, int dim)
{
    for (int i = threadIdx.x; i < dim; i += blockDim.x) nq.q[(size_t)t * dim + i] = 0;
    if (threadIdx.x == 0) nq.q_scale[t] = 1.0f;
}

template <int G, int NV, bool QZ>
__global__ __launch_bounds__(NORM_MAX_THREADS) void add_rmsnorm_any_kernel(
    float *__restrict__ resid, const void *__restrict__ delta, int delta_dt, void *__restrict__ out, int out_dt,
    const float *__restrict__ w, const int32_t *d_n, int max_n, int dim, float eps, int zero_centered, bool vec,
    const float *__restrict__ sx, const float *__restrict__ sw, norm_quant nq)
{
    frt_pdl_wait(); /* launched with PDL (NORM_DISPATCH) */
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) {
        if constexpr (QZ) quant_zero_row(nq, t, dim);
        return;
    }
    const float st = sx ? sx[t] : 1.0f;
    const int groups = dim / G;
    const size_t o = (size_t)t * dim;
    float v[NV][G], dv[NV][G], wv[NV][G];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) {
            norm_ld<G>(resid, FRT_CUDA_F32, o + (size_t)gi * G, vec, v[k]);
            norm_ld<G>(delta, delta_dt, o + (size_t)gi * G, vec, dv[k]);
            norm_ld<G>(w, FRT_CUDA_F32, (size_t)gi * G, vec, wv[k]);
            if (sx) { /* an FP8 GEMM's accumulator: the scales of its epilogue, (acc * s_x[t]) * s_w[o] */
                float sv[G];
                norm_ld<G>(sw, FRT_CUDA_F32, (size_t)gi * G, vec, sv);
#pragma unroll
                for (int e = 0; e < G; e++) dv[k][e] = frt_fp8acc_scale(dv[k][e], st, sv[e]);
            }
        }
    }
    double ss = 0;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) {
#pragma unroll
            for (int e = 0; e < G; e++) {
                v[k][e] += dv[k][e];
                ss += (double)v[k][e] * (double)v[k][e];
            }
            norm_st<G>(resid, FRT_CUDA_F32, o + (size_t)gi * G, vec, v[k]);
        }
    }
    ss = frt_block_sum(ss);
    const float inv = norm_inv_rms(ss, dim, eps);
    float m = 0.0f; /* QZ: the max |bf16(y)| of the thread's elements */
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) {
            float y[G];
#pragma unroll
            for (int e = 0; e < G; e++)
                y[e] = norm_weigh(v[k][e], inv, wv[k][e], zero_centered);
            if (!QZ || out) norm_st<G>(out, out_dt, o + (size_t)gi * G, vec, y); /* QZ: out may be NULL */
            if constexpr (QZ) { /* v keeps bf16(y), the value out holds */
#pragma unroll
                for (int e = 0; e < G; e++) {
                    v[k][e] = __bfloat162float(__float2bfloat16_rn(y[e]));
                    m = fmaxf(m, fabsf(v[k][e]));
                }
            }
        }
    }
    if constexpr (QZ) {
        const float s = frt_fp8_amax_scale_dev(frt_block_max(m)), qinv = __frcp_rn(s);
        if (threadIdx.x == 0) nq.q_scale[t] = s;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int gi = threadIdx.x + k * blockDim.x;
            if (gi < groups) {
                uint8_t *qp = nq.q + o + (size_t)gi * G;
                if (G == 4 && vec) {
                    uint32_t word = 0;
#pragma unroll
                    for (int e = 0; e < G; e++) word |= (uint32_t)frt_fp8_encode_inv(v[k][e], qinv) << (8 * e);
                    *(uint32_t *)qp = word;
                } else {
#pragma unroll
                    for (int e = 0; e < G; e++) qp[e] = frt_fp8_encode_inv(v[k][e], qinv);
                }
            }
        }
    }
}

/* The two forms NORM_DISPATCH launches (its kernels take <G, NV>). */
template <int G, int NV> static constexpr auto add_rmsnorm_kernel = add_rmsnorm_any_kernel<G, NV, false>;
template <int G, int NV> static constexpr auto add_rmsnorm_quant_kernel = add_rmsnorm_any_kernel<G, NV, true>;

/* Rows too wide for the register path (dim > 16384): a strided loop; with
 * nq.q, a third pass computes each of this thread's bf16(y) again from its
 * residual (the same operations, so the same value; out may be NULL) and
 * encodes it. */
__global__ void add_rmsnorm_loop_kernel(float *resid, const void *delta, int delta_dt, void *out,
                                        int out_dt, const float *w, const int32_t *d_n, int max_n,
                                        int dim, float eps, int zero_centered, const float *sx, const float *sw,
                                        norm_quant nq)
{
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) {
        if (nq.q) quant_zero_row(nq, t, dim);
        return;
    }
    const size_t o = (size_t)t * dim;
    float *r = resid + o;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float d = frt_ld(delta, delta_dt, o + i);
        if (sx) d = frt_fp8acc_scale(d, sx[t], sw[i]);
        float v = r[i] + d;
        r[i] = v;
        ss += (double)v * (double)v;
    }
    ss = frt_block_sum(ss);
    const float inv = norm_inv_rms(ss, dim, eps);
    float m = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = r[i]; /* written by this very thread above */
        float y = norm_weigh(v, inv, w[i], zero_centered);
        if (out) frt_st(out, out_dt, o + i, y); /* NULL only with nq.q */
        if (nq.q) m = fmaxf(m, fabsf(__bfloat162float(__float2bfloat16_rn(y))));
    }
    if (!nq.q) return; /* uniform over the block */
    const float s = frt_fp8_amax_scale_dev(frt_block_max(m)), qinv = __frcp_rn(s);
    if (threadIdx.x == 0) nq.q_scale[t] = s;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) { /* bf16(y) again, from this thread's r[i] */
        const float y = __bfloat162float(__float2bfloat16_rn(norm_weigh(r[i], inv, w[i], zero_centered)));
        nq.q[o + i] = frt_fp8_encode_inv(y, qinv);
    }
}

extern "C" int frt_cuda_rmsnorm(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                                frt_cuda_dtype x_dtype, const float *w, const int32_t *d_n,
                                int max_n, int n_heads, int dim, float eps, int zero_centered)
{
    FRT_ARG(out && x && w, "cuda rmsnorm: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(x_dtype), "cuda rmsnorm: bad dtype");
    FRT_ARG(max_n >= 0 && n_heads > 0 && dim > 0, "cuda rmsnorm: max_n %d n_heads %d dim %d",
            max_n, n_heads, dim);
    FRT_ARG((long long)max_n * n_heads < (1ll << 31), "cuda rmsnorm: too many rows");
    FRT_ARG(out == x ? out_dtype == x_dtype : 1, "cuda rmsnorm: in place needs equal dtypes");
    if (max_n == 0) return 0;
    const unsigned int rows = (unsigned int)(max_n * n_heads);
    const norm_shape sh = norm_shape_of(dim);
    if (sh.nv == 0) {
        rmsnorm_loop_kernel<<<rows, 1024, 0, (cudaStream_t)stream>>>(
            out, out_dtype, x, x_dtype, w, d_n, max_n, n_heads, dim, eps, zero_centered);
    } else if (sh.g == 4) {
        const bool vec = norm_aligned(out, out_dtype) && norm_aligned(x, x_dtype) &&
                         norm_aligned(w, FRT_CUDA_F32);
        NORM_DISPATCH(4, rmsnorm_kernel, rows, out, out_dtype, x, x_dtype, w, d_n, max_n, n_heads,
                      dim, eps, zero_centered, vec);
    } else {
        NORM_DISPATCH(1, rmsnorm_kernel, rows, out, out_dtype, x, x_dtype, w, d_n, max_n, n_heads,
                      dim, eps, zero_centered, false);
    }
    FRT_LAUNCH_CHECK();
    return 0;
}

/* frt_cuda_add_rmsnorm{,_fp8acc,_quant}: sx NULL, or the FP8 accumulator's
 * scales; nq.q NULL, or the quantized out's codes and scales. */
static int add_rmsnorm_run(void *stream, float *resid, const void *delta, frt_cuda_dtype delta_dtype, void *out,
                           frt_cuda_dtype out_dtype, const float *w, const int32_t *d_n, int max_n, int dim, float eps,
                           int zero_centered, const float *sx, const float *sw, norm_quant nq)
{
    FRT_ARG(resid && delta && (out || nq.q) && w, "cuda add_rmsnorm: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(delta_dtype), "cuda add_rmsnorm: bad dtype");
    FRT_ARG(max_n >= 0 && dim > 0, "cuda add_rmsnorm: max_n %d dim %d", max_n, dim);
    FRT_ARG((void *)resid != out && delta != out, "cuda add_rmsnorm: out aliases an input");
    if (max_n == 0) return 0;
    const norm_shape sh = norm_shape_of(dim);
    if (sh.nv == 0) {
        add_rmsnorm_loop_kernel<<<max_n, 1024, 0, (cudaStream_t)stream>>>(
            resid, delta, delta_dtype, out, out_dtype, w, d_n, max_n, dim, eps, zero_centered, sx, sw, nq);
    } else if (sh.g == 4) {
        const bool vec = norm_aligned(resid, FRT_CUDA_F32) && norm_aligned(delta, delta_dtype) &&
                         (!out || norm_aligned(out, out_dtype)) && norm_aligned(w, FRT_CUDA_F32) &&
                         (!sw || norm_aligned(sw, FRT_CUDA_F32)) && ((uintptr_t)nq.q & 3) == 0;
        if (nq.q)
            NORM_DISPATCH(4, add_rmsnorm_quant_kernel, max_n, resid, delta, delta_dtype, out, out_dtype, w, d_n,
                          max_n, dim, eps, zero_centered, vec, sx, sw, nq);
        else
            NORM_DISPATCH(4, add_rmsnorm_kernel, max_n, resid, delta, delta_dtype, out, out_dtype, w, d_n, max_n,
                          dim, eps, zero_centered, vec, sx, sw, nq);
    } else if (nq.q) {
        NORM_DISPATCH(1, add_rmsnorm_quant_kernel, max_n, resid, delta, delta_dtype, out, out_dtype, w, d_n, max_n,
                      dim, eps, zero_centered, false, sx, sw, nq);
    } else {
        NORM_DISPATCH(1, add_rmsnorm_kernel, max_n, resid, delta, delta_dtype, out, out_dtype, w,
                      d_n, max_n, dim, eps, zero_centered, false, sx, sw, nq);
    }
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_add_rmsnorm(void *stream, float *resid, const void *delta,
                                    frt_cuda_dtype delta_dtype, void *out,
                                    frt_cuda_dtype out_dtype, const float *w, const int32_t *d_n,
                                    int max_n, int dim, float eps, int zero_centered)
{
    const norm_quant none = {NULL, NULL};
    return add_rmsnorm_run(stream, resid, delta, delta_dtype, out, out_dtype, w, d_n, max_n, dim, eps, zero_centered,
                           NULL, NULL, none);
}

extern "C" int frt_cuda_add_rmsnorm_fp8acc(void *stream, float *resid, const float *acc, const float *x_scale,
                                           const float *w_scale, void *out, frt_cuda_dtype out_dtype, const float *w,
                                           const int32_t *d_n, int max_n, int dim, float eps, int zero_centered)
{
    FRT_ARG(x_scale && w_scale, "cuda add_rmsnorm_fp8acc: NULL scales");
    const norm_quant none = {NULL, NULL};
    return add_rmsnorm_run(stream, resid, acc, FRT_CUDA_F32, out, out_dtype, w, d_n, max_n, dim, eps, zero_centered,
                           x_scale, w_scale, none);
}

extern "C" int frt_cuda_add_rmsnorm_quant(void *stream, float *resid, const void *delta, frt_cuda_dtype delta_dtype,
                                          const float *x_scale, const float *w_scale, uint16_t *out, uint8_t *q,
                                          float *q_scale, const float *w, const int32_t *d_n, int max_n, int dim,
                                          float eps, int zero_centered)
{
    FRT_ARG(q && q_scale, "cuda add_rmsnorm_quant: NULL q or q_scale");
    FRT_ARG(!x_scale == !w_scale, "cuda add_rmsnorm_quant: x_scale and w_scale go together");
    FRT_ARG(!x_scale || delta_dtype == FRT_CUDA_F32, "cuda add_rmsnorm_quant: an FP8 accumulator delta is f32");
    FRT_ARG(((uintptr_t)q_scale & 3) == 0, "cuda add_rmsnorm_quant: q_scale must be 4-byte aligned");
    FRT_ARG((void *)q != (void *)resid && (const void *)q != delta && (!out || (void *)q != (void *)out) &&
                (void *)q_scale != (void *)resid && (const void *)q_scale != delta,
            "cuda add_rmsnorm_quant: q or q_scale aliases an input or out");
    const norm_quant nq = {q, q_scale};
    return add_rmsnorm_run(stream, resid, delta, delta_dtype, out, FRT_CUDA_BF16, w, d_n, max_n, dim, eps,
                           zero_centered, x_scale, w_scale, nq);
}
