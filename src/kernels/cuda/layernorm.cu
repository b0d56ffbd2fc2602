/*
 * kernels/cuda/layernorm.cu - LayerNorm (SigLIP) and Pi0.5's adaptive
 * RMSNorm of f32 rows (kernels_policy_cuda.h), and the residual add fused
 * in front of a norm (frt_cuda_add_norm). All three are one kernel: the
 * residual (when y is given), then the norm of its kind.
 *
 * One block a row, shaped to the row (norm_shape_of, norm_util.h: about 4
 * groups of 4 elements a thread, 64 threads for the expert's 1024, 96 for
 * SigLIP's 1152, 128 for Gemma's 2048), so 50 rows are 50 small blocks on
 * 50 SMs. Every thread loads all its elements (x, y, bias, gate, w, b) with
 * 16-byte loads (scalar loads of the same ownership when a pointer is not
 * 16-byte aligned or dim % 4 != 0) before any store, so a row costs one
 * memory round trip; x is read once and stays in registers. The sums run
 * in fp64 over each thread's groups in order, then frt_block_sum (warp
 * shuffles, then the warps' sums in a fixed order): the order depends on
 * dim only, so the bits are reproducible. Rows wider than the register
 * path (more than 4 groups a thread at 512 threads: dim > 8192, or > 2048
 * when dim % 4 != 0) take a strided loop. The residual is
 * frt_residual_add, the expression of pi0_cuda_residual. Twins:
 * frt_cpu_layernorm, frt_cpu_rmsnorm_ada, frt_cpu_rmsnorm; tested in
 * tests/test_cuda_policy_kernels.c.
 */
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/norm_util.h"
#include "kernels/cuda/residual_util.h"

#define LN_LOOP_THREADS 256

/* One launch's arguments. xw: x to write the residual back to (y set), else
 * NULL; w, b: the norm's weight and bias (LayerNorm) or scale and shift. */
struct an_args {
    void *out;
    int out_dt;
    const float *x;
    float *xw;
    const float *y, *bias, *gate, *w, *b;
    int kind, dim;
    float eps;
    bool vec;
};

/* Element v normalised and weighted by wv, bv, given mu and r: the mean and
 * 1 / std (LayerNorm) or 0 and 1 / rms. */
static __device__ __forceinline__ float an_out(const an_args &a, float v, float mu, float r, float wv, float bv)
{
    if (a.kind == FRT_CUDA_NORM_LAYER) return (v - mu) * r * wv + bv;
    return (v * r) * (1.0f + wv) + (a.kind == FRT_CUDA_NORM_RMS_ADA ? bv : 0.0f);
}

/* The thread's groups k < NV (gi = threadIdx.x + k T < groups) of row o:
 * x with the residual applied into v, w and b into wv, bv. Every load is
 * issued before the first use of one (one memory round trip). */
template <int G, int NV>
static __device__ __forceinline__ void an_load(const an_args &a, size_t o, int groups, float (&v)[NV][G],
                                               float (&wv)[NV][G], float (&bv)[NV][G])
{
    float y[NV][G], rb[NV][G], rg[NV][G];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
#pragma unroll
        for (int e = 0; e < G; e++) v[k][e] = wv[k][e] = bv[k][e] = y[k][e] = rb[k][e] = rg[k][e] = 0.0f;
        if (gi >= groups) continue;
        const size_t c = (size_t)gi * G;
        norm_ld<G>(a.x, FRT_CUDA_F32, o + c, a.vec, v[k]);
        norm_ld<G>(a.w, FRT_CUDA_F32, c, a.vec, wv[k]);
        if (a.kind != FRT_CUDA_NORM_RMS_ONE) norm_ld<G>(a.b, FRT_CUDA_F32, c, a.vec, bv[k]);
        if (a.y) norm_ld<G>(a.y, FRT_CUDA_F32, o + c, a.vec, y[k]);
        if (a.bias) norm_ld<G>(a.bias, FRT_CUDA_F32, c, a.vec, rb[k]);
        if (a.gate) norm_ld<G>(a.gate, FRT_CUDA_F32, c, a.vec, rg[k]);
    }
    if (!a.y) return;
#pragma unroll
    for (int k = 0; k < NV; k++)
#pragma unroll
        for (int e = 0; e < G; e++)
            v[k][e] = frt_residual_add(v[k][e], y[k][e], a.bias, rb[k][e], a.gate, rg[k][e]);
}

/* The fp64 sum over the row of (v - mu)^2 (sq) or v (!sq); every thread
 * gets it. */
template <int G, int NV>
static __device__ __forceinline__ double an_sum(const float (&v)[NV][G], int groups, double mu, bool sq)
{
    double s = 0;
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (threadIdx.x + k * blockDim.x < groups)
#pragma unroll
            for (int e = 0; e < G; e++) {
                const double d = (double)v[k][e] - mu;
                s += sq ? d * d : (double)v[k][e];
            }
    return frt_block_sum(s);
}

template <int G, int NV>
__global__ __launch_bounds__(NORM_MAX_THREADS) void add_norm_kernel(an_args a)
{
    frt_pdl_wait(); /* launched with PDL */
    const int groups = a.dim / G;
    const size_t o = (size_t)blockIdx.x * a.dim;
    float v[NV][G], wv[NV][G], bv[NV][G];
    an_load<G, NV>(a, o, groups, v, wv, bv);
#pragma unroll
    for (int k = 0; k < NV; k++) /* each element is read and written by one thread */
        if (a.xw && threadIdx.x + k * blockDim.x < groups)
            norm_st<G>(a.xw, FRT_CUDA_F32, o + (size_t)(threadIdx.x + k * blockDim.x) * G, a.vec, v[k]);
    float mu = 0.0f, r;
    if (a.kind == FRT_CUDA_NORM_LAYER) {
        const double mean = an_sum<G, NV>(v, groups, 0.0, false) / a.dim;
        r = (float)(1.0 / sqrt(an_sum<G, NV>(v, groups, mean, true) / a.dim + (double)a.eps));
        mu = (float)mean;
    } else {
        r = norm_inv_rms(an_sum<G, NV>(v, groups, 0.0, true), a.dim, a.eps);
    }
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi >= groups) continue;
        float y[G];
#pragma unroll
        for (int e = 0; e < G; e++) y[e] = an_out(a, v[k][e], mu, r, wv[k][e], bv[k][e]);
        norm_st<G>(a.out, a.out_dt, o + (size_t)gi * G, a.vec, y);
    }
}

/* Rows too wide for the register path: strided loops over x (the residual
 * first, each thread reading back only its own writes). */
__global__ void __launch_bounds__(LN_LOOP_THREADS) add_norm_loop_kernel(an_args a)
{
    const size_t o = (size_t)blockIdx.x * a.dim;
    const float *xr = a.xw ? a.xw + o : a.x + o;
    double s = 0;
    for (int i = threadIdx.x; i < a.dim; i += LN_LOOP_THREADS) {
        float v = xr[i];
        if (a.xw)
            a.xw[o + i] = v = frt_residual_add(v, a.y[o + i], a.bias, a.bias ? a.bias[i] : 0.0f, a.gate,
                                               a.gate ? a.gate[i] : 0.0f);
        s += a.kind == FRT_CUDA_NORM_LAYER ? (double)v : (double)v * v;
    }
    float mu = 0.0f, r;
    if (a.kind == FRT_CUDA_NORM_LAYER) {
        const double mean = frt_block_sum(s) / a.dim;
        double ss = 0;
        for (int i = threadIdx.x; i < a.dim; i += LN_LOOP_THREADS) {
            const double d = (double)xr[i] - mean;
            ss += d * d;
        }
        r = (float)(1.0 / sqrt(frt_block_sum(ss) / a.dim + (double)a.eps));
        mu = (float)mean;
    } else {
        r = norm_inv_rms(frt_block_sum(s), a.dim, a.eps);
    }
    for (int i = threadIdx.x; i < a.dim; i += LN_LOOP_THREADS)
        frt_st(a.out, a.out_dt, o + i,
               an_out(a, xr[i], mu, r, a.w[i], a.kind == FRT_CUDA_NORM_RMS_ONE ? 0.0f : a.b[i]));
}

/* Launches the kernel of a's row shape on rows rows. */
template <int G>
static cudaError_t an_launch(const norm_shape &sh, int rows, void *stream, const an_args &a)
{
    const dim3 grid((unsigned)rows), block((unsigned)sh.threads);
    if (sh.nv == 1) return frt_pdl_launch(add_norm_kernel<G, 1>, grid, block, 0, stream, a);
    if (sh.nv == 2) return frt_pdl_launch(add_norm_kernel<G, 2>, grid, block, 0, stream, a);
    return frt_pdl_launch(add_norm_kernel<G, 4>, grid, block, 0, stream, a);
}

static bool an_aligned(const float *p) { return !p || norm_aligned(p, FRT_CUDA_F32); }

/* The launch of every norm of this file (arguments already checked). */
static int an_run(void *stream, int rows, an_args a)
{
    const norm_shape sh = norm_shape_of(a.dim);
    if (sh.nv == 0 || sh.nv > 4) {
        add_norm_loop_kernel<<<rows, LN_LOOP_THREADS, 0, (cudaStream_t)stream>>>(a);
        FRT_LAUNCH_CHECK();
        return 0;
    }
    a.vec = sh.g == 4 && norm_aligned(a.out, (frt_cuda_dtype)a.out_dt) && an_aligned(a.x) && an_aligned(a.y) &&
            an_aligned(a.bias) && an_aligned(a.gate) && an_aligned(a.w) && an_aligned(a.b);
    FRT_CUDA_TRY(sh.g == 4 ? an_launch<4>(sh, rows, stream, a) : an_launch<1>(sh, rows, stream, a));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_layernorm(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x,
                                  const float *w, const float *b, int rows, int dim, float eps)
{
    FRT_ARG(out && x && w && b && frt_dtype_ok(out_dtype), "layernorm: NULL pointer or bad dtype");
    FRT_ARG(rows >= 1 && dim >= 1 && (void *)x != out, "layernorm: rows %d dim %d (out must not alias x)", rows,
            dim);
    const an_args a = {out, out_dtype, x, NULL, NULL, NULL, NULL, w, b, FRT_CUDA_NORM_LAYER, dim, eps, false};
    return an_run(stream, rows, a);
}

extern "C" int frt_cuda_rmsnorm_ada(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x,
                                    const float *scale, const float *shift, int rows, int dim, float eps)
{
    FRT_ARG(out && x && scale && shift && frt_dtype_ok(out_dtype), "rmsnorm_ada: NULL pointer or bad dtype");
    FRT_ARG(rows >= 1 && dim >= 1 && (void *)x != out, "rmsnorm_ada: rows %d dim %d (out must not alias x)", rows,
            dim);
    const an_args a = {out, out_dtype, x, NULL, NULL, NULL, NULL, scale, shift, FRT_CUDA_NORM_RMS_ADA, dim, eps, false};
    return an_run(stream, rows, a);
}

extern "C" int frt_cuda_add_norm(void *stream, void *out, frt_cuda_dtype out_dtype, float *x, const float *y,
                                 const float *bias, const float *gate, frt_cuda_norm_kind kind, const float *w,
                                 const float *b, int rows, int dim, float eps)
{
    FRT_ARG(out && x && w && frt_dtype_ok(out_dtype), "add_norm: NULL pointer or bad dtype");
    FRT_ARG(kind == FRT_CUDA_NORM_LAYER || kind == FRT_CUDA_NORM_RMS_ADA || kind == FRT_CUDA_NORM_RMS_ONE,
            "add_norm: unknown norm kind %d", (int)kind);
    FRT_ARG(b || kind == FRT_CUDA_NORM_RMS_ONE, "add_norm: NULL b (bias / shift)");
    FRT_ARG(rows >= 1 && dim >= 1 && (void *)x != out && (const void *)y != out,
            "add_norm: rows %d dim %d (out must not alias x or y)", rows, dim);
    const an_args a = {out, out_dtype, x, y ? x : NULL, y, y ? bias : NULL, y ? gate : NULL, w,
                       kind == FRT_CUDA_NORM_RMS_ONE ? NULL : b, (int)kind, dim, eps, false};
    return an_run(stream, rows, a);
}
