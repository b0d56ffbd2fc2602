/*
 * cfg_combine.c - classifier-free guidance's velocity combine (RECAP,
 * pi*0.6 arXiv:2511.14759 Appendix E): v = v_u + beta (v_c - v_u), computed
 * as fmaf(beta, v_c - v_u, v_u) in f32 (one rounding for the subtraction,
 * one for the fused multiply-add). Tested in tests/test_kernel_cfg_combine.c
 * (bit-exact against a plain loop over fmaf at the production size 50 x 32).
 */
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

void frt_cpu_cfg_combine(float *out, const float *v_cond, const float *v_uncond, float beta, int n)
{
    for (int i = 0; i < n; i++) out[i] = fmaf(beta, v_cond[i] - v_uncond[i], v_uncond[i]);
}
