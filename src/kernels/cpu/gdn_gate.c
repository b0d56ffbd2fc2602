/*
 * gdn_gate.c - the Gated DeltaNet gates: log-decay g and write strength beta.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5GatedDeltaNet.forward:
 *   beta = b.sigmoid();  g = -A_log.float().exp() * F.softplus(a.float() + dt_bias)
 * Tested in tests/test_kernel_elementwise.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

void frt_cpu_gdn_gate(float *g, float *beta, const float *a, const float *b, const float *A_log,
                      const float *dt_bias, int n_tok, int n_heads)
{
    for (int t = 0; t < n_tok; t++) {
        for (int h = 0; h < n_heads; h++) {
            size_t i = (size_t)t * n_heads + h;
            g[i] = -expf(A_log[h]) * frt_softplus_f32(a[i] + dt_bias[h]);
            beta[i] = frt_sigmoid_f32(b[i]);
        }
    }
}
