/*
 * gelu.c - the activations and the bias add of the SigLIP / Gemma / action
 * expert stacks: tanh-approximated GELU (torch gelu(approximate="tanh"),
 * transformers' "gelu_pytorch_tanh"), Gemma's GeGLU gate
 * gelu_tanh(gate) * up (GemmaMLP), SiLU (the action-time MLP of
 * modeling_pi0.py / openpi pi0_pytorch.py) and a per-column bias.
 * Tested in tests/test_kernel_policy_ops.c.
 */
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

static inline float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

void frt_cpu_gelu_tanh(float *y, const float *x, int n)
{
    for (int i = 0; i < n; i++) y[i] = gelu_tanh(x[i]);
}

void frt_cpu_geglu_tanh(float *out, const float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++) out[i] = gelu_tanh(gate[i]) * up[i];
}

void frt_cpu_silu(float *y, const float *x, int n)
{
    for (int i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

void frt_cpu_add_bias(float *y, const float *b, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
#pragma omp simd
        for (int i = 0; i < cols; i++) yr[i] += b[i];
    }
}
