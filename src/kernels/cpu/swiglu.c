/*
 * swiglu.c - SwiGLU: silu(gate) * up.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5MLP
 * (act_fn(gate_proj(x)) * up_proj(x), act_fn = silu). Tested in
 * tests/test_kernel_elementwise.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

void frt_cpu_swiglu(float *out, const float *gate, const float *up, int n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int i = 0; i < n; i++) out[i] = frt_silu_f32(gate[i]) * up[i];
}
