/*
 * kernels/cuda/layernorm.cu - LayerNorm (SigLIP) and Pi0.5's adaptive
 * RMSNorm of f32 rows (kernels_policy_cuda.h), and the residual add fused
 * in front of a norm (frt_cuda_add_norm). One block per row; the sums
 * run in fp64 per thread over a strided slice, then a fixed shared-memory
 * tree (the order depends on the block size only, so the bits are
 * reproducible). Twins: frt_cpu_layernorm, frt_cpu_rmsnorm_ada; tested in
 * tests/test_cuda_policy_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

#define LN_THREADS 256

/* The block's sum of v (every thread returns it). */
static __device__ double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = LN_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

/* The rest of the LayerNorm of row xr into out row `o` (element offset),
 * given s, this thread's part of the row's sum. */
static __device__ void ln_finish(void *out, int out_dt, size_t o, const float *xr, const float *w, const float *b,
                                 int dim, float eps, double s, double *sh)
{
    const double mean = block_sum(s, sh) / dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += LN_THREADS) ss += ((double)xr[i] - mean) * ((double)xr[i] - mean);
    const float rstd = (float)(1.0 / sqrt(block_sum(ss, sh) / dim + (double)eps));
    const float mu = (float)mean;
    for (int i = threadIdx.x; i < dim; i += LN_THREADS) frt_st(out, out_dt, o + i, (xr[i] - mu) * rstd * w[i] + b[i]);
}

__global__ void __launch_bounds__(LN_THREADS) layernorm_kernel(void *out, int out_dt, const float *x, const float *w,
                                                               const float *b, int dim, float eps)
{
    __shared__ double sh[LN_THREADS];
    const float *xr = x + (size_t)blockIdx.x * dim;
    double s = 0;
    for (int i = threadIdx.x; i < dim; i += LN_THREADS) s += xr[i];
    ln_finish(out, out_dt, (size_t)blockIdx.x * dim, xr, w, b, dim, eps, s, sh);
}

__global__ void __launch_bounds__(LN_THREADS) rmsnorm_ada_kernel(void *out, int out_dt, const float *x,
                                                                 const float *scale, const float *shift, int dim,
                                                                 float eps)
{
    __shared__ double sh[LN_THREADS];
    const float *xr = x + (size_t)blockIdx.x * dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += LN_THREADS) ss += (double)xr[i] * xr[i];
    const float var = (float)(block_sum(ss, sh) / dim);
    const float inv = 1.0f / sqrtf(var + eps);
    for (int i = threadIdx.x; i < dim; i += LN_THREADS)
        frt_st(out, out_dt, (size_t)blockIdx.x * dim + i, (xr[i] * inv) * (1.0f + scale[i]) + shift[i]);
}

extern "C" int frt_cuda_layernorm(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x,
                                  const float *w, const float *b, int rows, int dim, float eps)
{
    FRT_ARG(out && x && w && b && frt_dtype_ok(out_dtype), "layernorm: NULL pointer or bad dtype");
    FRT_ARG(rows >= 1 && dim >= 1 && (void *)x != out, "layernorm: rows %d dim %d (out must not alias x)", rows,
            dim);
    layernorm_kernel<<<rows, LN_THREADS, 0, (cudaStream_t)stream>>>(out, out_dtype, x, w, b, dim, eps);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_rmsnorm_ada(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x,
                                    const float *scale, const float *shift, int rows, int dim, float eps)
{
    FRT_ARG(out && x && scale && shift && frt_dtype_ok(out_dtype), "rmsnorm_ada: NULL pointer or bad dtype");
    FRT_ARG(rows >= 1 && dim >= 1 && (void *)x != out, "rmsnorm_ada: rows %d dim %d (out must not alias x)", rows,
            dim);
    rmsnorm_ada_kernel<<<rows, LN_THREADS, 0, (cudaStream_t)stream>>>(out, out_dtype, x, scale, shift, dim, eps);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* add_norm's residual on row xr (the expression of pi0_cuda_residual, so
 * the same bits): xr[i] += (yr[i] + bias[i]) * gate[i]; returns xr[i]. */
static __device__ float add_res(float *xr, const float *yr, const float *bias, const float *gate, int i)
{
    if (!yr) return xr[i];
    float o = yr[i];
    if (bias) o += bias[i];
    xr[i] += gate ? o * gate[i] : o;
    return xr[i];
}

__global__ void __launch_bounds__(LN_THREADS) add_norm_kernel(void *out, int out_dt, float *x, const float *y,
                                                              const float *bias, const float *gate, int kind,
                                                              const float *w, const float *b, int dim, float eps)
{
    __shared__ double sh[LN_THREADS];
    float *xr = x + (size_t)blockIdx.x * dim;
    const float *yr = y ? y + (size_t)blockIdx.x * dim : NULL;
    double s = 0;
    for (int i = threadIdx.x; i < dim; i += LN_THREADS) {
        const float v = add_res(xr, yr, bias, gate, i); /* each thread reads back only its own writes */
        s += kind == FRT_CUDA_NORM_LAYER ? (double)v : (double)v * v;
    }
    const size_t o = (size_t)blockIdx.x * dim;
    if (kind == FRT_CUDA_NORM_LAYER) {
        ln_finish(out, out_dt, o, xr, w, b, dim, eps, s, sh);
        return;
    }
    const float var = (float)(block_sum(s, sh) / dim);
    const float inv = 1.0f / sqrtf(var + eps);
    for (int i = threadIdx.x; i < dim; i += LN_THREADS)
        frt_st(out, out_dt, o + i, (xr[i] * inv) * (1.0f + w[i]) + (kind == FRT_CUDA_NORM_RMS_ADA ? b[i] : 0.0f));
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
    add_norm_kernel<<<rows, LN_THREADS, 0, (cudaStream_t)stream>>>(out, out_dtype, x, y, bias, gate, (int)kind, w, b,
                                                                   dim, eps);
    FRT_LAUNCH_CHECK();
    return 0;
}
