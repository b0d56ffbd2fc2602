/*
 * gdr_recurrent.c - the gated delta rule, one token at a time (decode).
 * Math: transformers 5.x modeling_qwen3_5.py, torch_recurrent_gated_delta_rule:
 *   S *= exp(g); kv = S^T k; delta = (v - kv) * beta; S += k (x) delta;
 *   o = S^T (q * dk^-0.5)
 * with S = state[h] [dk, dv] (row a = key dim a). One value head per OpenMP
 * iteration; every sum runs over the key dim in ascending order, so the bits
 * depend neither on the thread count nor on how tokens are split into calls.
 * Tested in tests/test_kernel_gdr.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

void frt_cpu_gdr_recurrent(float *out, float *state, const float *q, const float *k,
                           const float *v, const float *g, const float *beta, int n_tok,
                           int n_k_heads, int n_v_heads, int dk, int dv)
{
    if (n_tok <= 0 || n_v_heads <= 0) return;
    int ratio = n_v_heads / n_k_heads;
    float scale = (float)(1.0 / sqrt((double)dk));
#pragma omp parallel for schedule(static) if (n_v_heads > 1)
    for (int h = 0; h < n_v_heads; h++) {
        int kh = h / ratio;
        float *S = state + (size_t)h * dk * dv;
        for (int t = 0; t < n_tok; t++) {
            const float *qt = q + ((size_t)t * n_k_heads + kh) * dk;
            const float *kt = k + ((size_t)t * n_k_heads + kh) * dk;
            const float *vt = v + ((size_t)t * n_v_heads + h) * dv;
            float *o = out + ((size_t)t * n_v_heads + h) * dv; /* also the delta scratch */
            float decay = expf(g[(size_t)t * n_v_heads + h]);
            float b = beta[(size_t)t * n_v_heads + h];
            /* pass 1: S *= decay; o = kv = S^T k */
            for (int j = 0; j < dv; j++) o[j] = 0.0f;
            for (int a = 0; a < dk; a++) {
                float *Sa = S + (size_t)a * dv;
#pragma omp simd
                for (int j = 0; j < dv; j++) Sa[j] *= decay;
                frt_axpy_f32(o, kt[a], Sa, dv);
            }
            /* delta = (v - kv) * beta */
#pragma omp simd
            for (int j = 0; j < dv; j++) o[j] = (vt[j] - o[j]) * b;
            /* pass 2: S += k (x) delta */
            for (int a = 0; a < dk; a++) frt_axpy_f32(S + (size_t)a * dv, kt[a], o, dv);
            /* pass 3: o = S^T (q * scale) */
            for (int j = 0; j < dv; j++) o[j] = 0.0f;
            for (int a = 0; a < dk; a++) frt_axpy_f32(o, qt[a] * scale, S + (size_t)a * dv, dv);
        }
    }
}
