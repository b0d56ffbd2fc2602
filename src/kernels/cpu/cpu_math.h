/*
 * kernels/cpu/cpu_math.h - small inline helpers shared by the CPU kernels
 * (internal, not part of kernels_cpu.h).
 *
 * Determinism: every reduction here runs in one fixed order that depends on
 * the length only (never on threads or alignment), so a kernel that calls
 * these from one thread per row/head gives the same bits on every run.
 * `omp simd` is used on loops without a loop-carried dependency (each lane
 * independent), where it changes speed and never the result.
 */
#ifndef FRT_KERNELS_CPU_MATH_H
#define FRT_KERNELS_CPU_MATH_H

#include <math.h>
#include <stddef.h>

/* Dot product in fp32 with 8 interleaved partial sums (lane l takes the
 * elements i with i % 8 == l), combined pairwise at the end: a fixed order,
 * vectorisable. */
static inline float frt_dot_f32(const float *a, const float *b, int n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
#pragma omp simd
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    }
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* sum of squares in double, ascending order (the norms round it to fp32). */
static inline double frt_sumsq_f64(const float *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

/* y[i] += a * x[i]. */
static inline void frt_axpy_f32(float *restrict y, float a, const float *restrict x, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* torch's silu on fp32: x / (1 + exp(-x)) (finite for every finite x). */
static inline float frt_silu_f32(float x) { return x / (1.0f + expf(-x)); }

/* torch's sigmoid on fp32: 1 / (1 + exp(-x)). */
static inline float frt_sigmoid_f32(float x) { return 1.0f / (1.0f + expf(-x)); }

/* torch's softplus (beta 1, threshold 20). */
static inline float frt_softplus_f32(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#endif /* FRT_KERNELS_CPU_MATH_H */
