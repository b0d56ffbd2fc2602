/*
 * elementwise.c - small elementwise helpers: residual add, sigmoid gate,
 * softplus, strided row copy. Math: transformers 5.x modeling_qwen3_5.py
 * (Qwen3_5Attention output gate, torch softplus). Tested in
 * tests/test_kernel_elementwise.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

#include <string.h>

void frt_cpu_add(float *y, const float *x, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void frt_cpu_sigmoid_mul(float *y, const float *gate, int n)
{
    for (int i = 0; i < n; i++) y[i] *= frt_sigmoid_f32(gate[i]);
}

void frt_cpu_softplus(float *y, const float *x, int n)
{
    for (int i = 0; i < n; i++) y[i] = frt_softplus_f32(x[i]);
}

void frt_cpu_copy_rows(float *dst, const float *src, int rows, int cols, int src_stride)
{
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * cols, src + (size_t)r * src_stride, (size_t)cols * sizeof(float));
}
