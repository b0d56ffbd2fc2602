/*
 * kernels/cuda/elementwise.cu - small elementwise kernels: the sigmoid output
 * gate (in place, or into another buffer and dtype), the residual add, dtype
 * conversion, strided row copies and the last-valid-row pick. Math:
 * transformers 5.x modeling_qwen3_5.py (Qwen3_5Attention output gate), as
 * the CPU twins in kernels/cpu/elementwise.c. Each works on the first n tokens, n read from
 * device memory. Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#define EW_THREADS 256
#define EW_MAX_BLOCKS 8192

#define GRID_STRIDE(i, total)                                                  \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (total); \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void sigmoid_mul_kernel(void *y, int y_dt, const void *gate, int gate_dt,
                                   const int32_t *d_n, int max_n, int per_tok)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok;
    GRID_STRIDE(i, total)
    frt_st(y, y_dt, i, frt_ld(y, y_dt, i) * frt_sigmoid(frt_ld(gate, gate_dt, i)));
}

/* out = y * sigmoid(gate), the f32 product stored as out_dt: the bits of
 * sigmoid_mul_kernel on an f32 y then convert_kernel. */
__global__ void sigmoid_mul_to_kernel(void *out, int out_dt, const void *y, int y_dt, const void *gate, int gate_dt,
                                      const int32_t *d_n, int max_n, int per_tok)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok;
    GRID_STRIDE(i, total)
    frt_st(out, out_dt, i, frt_ld(y, y_dt, i) * frt_sigmoid(frt_ld(gate, gate_dt, i)));
}

/* The same for f32 y and gate into bf16, 4 elements a thread (16-byte
 * loads, an 8-byte store; per_tok % 4 == 0, aligned). */
__global__ void sigmoid_mul_to_bf16x4_kernel(uint2 *out, const float4 *y, const float4 *gate, const int32_t *d_n,
                                             int max_n, int per4)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per4;
    GRID_STRIDE(i, total)
    {
        const float4 a = y[i], g = gate[i];
        const __nv_bfloat162 lo = __floats2bfloat162_rn(a.x * frt_sigmoid(g.x), a.y * frt_sigmoid(g.y));
        const __nv_bfloat162 hi = __floats2bfloat162_rn(a.z * frt_sigmoid(g.z), a.w * frt_sigmoid(g.w));
        out[i] = make_uint2(*(const uint32_t *)&lo, *(const uint32_t *)&hi);
    }
}

__global__ void add_kernel(void *y, int y_dt, const void *x, int x_dt, const int32_t *d_n,
                           int max_n, int per_tok)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok;
    GRID_STRIDE(i, total)
    frt_st(y, y_dt, i, frt_ld(y, y_dt, i) + frt_ld(x, x_dt, i));
}

__global__ void convert_kernel(void *dst, int dst_dt, const void *src, int src_dt,
                               const int32_t *d_n, int max_n, int per_tok)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * per_tok;
    if (dst_dt == src_dt && dst_dt == FRT_CUDA_BF16) { /* a bit copy */
        GRID_STRIDE(i, total)
        ((__nv_bfloat16 *)dst)[i] = ((const __nv_bfloat16 *)src)[i];
        return;
    }
    GRID_STRIDE(i, total)
    frt_st(dst, dst_dt, i, frt_ld(src, src_dt, i));
}

__global__ void copy_rows_kernel(void *dst, int dst_dt, const void *src, int src_dt,
                                 const int32_t *d_n, int max_n, int rows_per_tok, int cols,
                                 int src_stride)
{
    const size_t total = (size_t)frt_dyn_n(d_n, max_n) * rows_per_tok * cols;
    GRID_STRIDE(i, total)
    {
        const size_t r = i / cols, c = i % cols;
        const size_t s = r * src_stride + c;
        if (dst_dt == src_dt && dst_dt == FRT_CUDA_BF16)
            ((__nv_bfloat16 *)dst)[i] = ((const __nv_bfloat16 *)src)[s];
        else
            frt_st(dst, dst_dt, i, frt_ld(src, src_dt, s));
    }
}

__global__ void last_row_kernel(void *dst, int dst_dt, const void *src, int src_dt,
                                const int32_t *d_n, int max_n, int width)
{
    int n = frt_dyn_n(d_n, max_n);
    const size_t base = (size_t)(n > 0 ? n - 1 : 0) * width;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x) {
        if (dst_dt == src_dt && dst_dt == FRT_CUDA_BF16)
            ((__nv_bfloat16 *)dst)[i] = ((const __nv_bfloat16 *)src)[base + i];
        else
            frt_st(dst, dst_dt, i, frt_ld(src, src_dt, base + i));
    }
}

static int ew_check(const char *name, const void *y, frt_cuda_dtype y_dt, const void *x,
                    frt_cuda_dtype x_dt, int max_n, int per_tok)
{
    FRT_ARG(y && x, "cuda %s: NULL pointer", name);
    FRT_ARG(frt_dtype_ok(y_dt) && frt_dtype_ok(x_dt), "cuda %s: bad dtype", name);
    FRT_ARG(max_n >= 0 && per_tok > 0, "cuda %s: max_n %d per_tok %d", name, max_n, per_tok);
    return 0;
}

extern "C" int frt_cuda_sigmoid_mul(void *stream, void *y, frt_cuda_dtype y_dtype,
                                    const void *gate, frt_cuda_dtype gate_dtype,
                                    const int32_t *d_n, int max_n, int per_tok)
{
    FRT_TRY(ew_check("sigmoid_mul", y, y_dtype, gate, gate_dtype, max_n, per_tok));
    if (max_n == 0) return 0;
    sigmoid_mul_kernel<<<frt_grid_blocks((size_t)max_n * per_tok, EW_THREADS, EW_MAX_BLOCKS),
                         EW_THREADS, 0, (cudaStream_t)stream>>>(y, y_dtype, gate, gate_dtype, d_n,
                                                                max_n, per_tok);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_sigmoid_mul_to(void *stream, void *out, frt_cuda_dtype out_dtype, const void *y,
                                       frt_cuda_dtype y_dtype, const void *gate, frt_cuda_dtype gate_dtype,
                                       const int32_t *d_n, int max_n, int per_tok)
{
    FRT_TRY(ew_check("sigmoid_mul_to", y, y_dtype, gate, gate_dtype, max_n, per_tok));
    FRT_ARG(out && frt_dtype_ok(out_dtype), "cuda sigmoid_mul_to: NULL out or bad dtype");
    if (max_n == 0) return 0;
    const size_t total = (size_t)max_n * per_tok;
    if (out_dtype == FRT_CUDA_BF16 && y_dtype == FRT_CUDA_F32 && gate_dtype == FRT_CUDA_F32 && per_tok % 4 == 0 &&
        (((uintptr_t)out & 7) | ((uintptr_t)y & 15) | ((uintptr_t)gate & 15)) == 0) {
        sigmoid_mul_to_bf16x4_kernel<<<frt_grid_blocks(total / 4, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0,
                                       (cudaStream_t)stream>>>((uint2 *)out, (const float4 *)y,
                                                               (const float4 *)gate, d_n, max_n, per_tok / 4);
    } else {
        sigmoid_mul_to_kernel<<<frt_grid_blocks(total, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0,
                                (cudaStream_t)stream>>>(out, out_dtype, y, y_dtype, gate, gate_dtype, d_n, max_n,
                                                        per_tok);
    }
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_add(void *stream, void *y, frt_cuda_dtype y_dtype, const void *x,
                            frt_cuda_dtype x_dtype, const int32_t *d_n, int max_n, int per_tok)
{
    FRT_TRY(ew_check("add", y, y_dtype, x, x_dtype, max_n, per_tok));
    if (max_n == 0) return 0;
    add_kernel<<<frt_grid_blocks((size_t)max_n * per_tok, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS,
                 0, (cudaStream_t)stream>>>(y, y_dtype, x, x_dtype, d_n, max_n, per_tok);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_convert(void *stream, void *dst, frt_cuda_dtype dst_dtype, const void *src,
                                frt_cuda_dtype src_dtype, const int32_t *d_n, int max_n,
                                int per_tok)
{
    FRT_TRY(ew_check("convert", dst, dst_dtype, src, src_dtype, max_n, per_tok));
    FRT_ARG(dst != src, "cuda convert: dst aliases src");
    if (max_n == 0) return 0;
    convert_kernel<<<frt_grid_blocks((size_t)max_n * per_tok, EW_THREADS, EW_MAX_BLOCKS),
                     EW_THREADS, 0, (cudaStream_t)stream>>>(dst, dst_dtype, src, src_dtype, d_n,
                                                            max_n, per_tok);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_copy_rows(void *stream, void *dst, frt_cuda_dtype dst_dtype,
                                  const void *src, frt_cuda_dtype src_dtype, const int32_t *d_n,
                                  int max_n, int rows_per_tok, int cols, int src_stride)
{
    FRT_ARG(dst && src, "cuda copy_rows: NULL pointer");
    FRT_ARG(frt_dtype_ok(dst_dtype) && frt_dtype_ok(src_dtype), "cuda copy_rows: bad dtype");
    FRT_ARG(max_n >= 0 && rows_per_tok > 0 && cols > 0 && src_stride >= cols,
            "cuda copy_rows: max_n %d rows_per_tok %d cols %d src_stride %d", max_n, rows_per_tok,
            cols, src_stride);
    FRT_ARG(dst != src, "cuda copy_rows: dst aliases src");
    if (max_n == 0) return 0;
    copy_rows_kernel<<<frt_grid_blocks((size_t)max_n * rows_per_tok * cols, EW_THREADS,
                                       EW_MAX_BLOCKS),
                       EW_THREADS, 0, (cudaStream_t)stream>>>(dst, dst_dtype, src, src_dtype, d_n,
                                                              max_n, rows_per_tok, cols,
                                                              src_stride);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_last_row(void *stream, void *dst, frt_cuda_dtype dst_dtype,
                                 const void *src, frt_cuda_dtype src_dtype, const int32_t *d_n,
                                 int max_n, int width)
{
    FRT_ARG(dst && src, "cuda last_row: NULL pointer");
    FRT_ARG(frt_dtype_ok(dst_dtype) && frt_dtype_ok(src_dtype), "cuda last_row: bad dtype");
    FRT_ARG(max_n >= 1 && width > 0, "cuda last_row: max_n %d width %d", max_n, width);
    FRT_ARG(dst != src, "cuda last_row: dst aliases src");
    last_row_kernel<<<frt_grid_blocks((size_t)width, EW_THREADS, 1024), EW_THREADS, 0,
                      (cudaStream_t)stream>>>(dst, dst_dtype, src, src_dtype, d_n, max_n, width);
    FRT_LAUNCH_CHECK();
    return 0;
}
