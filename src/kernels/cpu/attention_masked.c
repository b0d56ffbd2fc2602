/*
 * attention_masked.c - GQA attention of n_q query tokens over n_kv keys under
 * an explicit boolean mask (bidirectional prefixes, block-causal suffixes).
 * Math: eager_attention_forward (transformers 5.x modeling_gemma.py,
 * modeling_siglip.py) with a 4-D mask: scores scale * q.k, masked keys
 * dropped, softmax in fp32, times v. A query with no allowed key (a padding
 * token of a policy prefix, whose output nobody reads) gets zeros. Online
 * softmax over the allowed keys in ascending order, one (token, head) pair
 * per OpenMP iteration: the same bits for any thread count. Tested in
 * tests/test_kernel_policy_ops.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

static void attend_masked(float *o, const float *qh, const float *k, const float *v, const uint8_t *allow,
                          int n_kv, size_t row_stride, int head_dim, float scale)
{
    float m = -INFINITY, l = 0.0f;
    for (int d = 0; d < head_dim; d++) o[d] = 0.0f;
    for (int j = 0; j < n_kv; j++) {
        if (!allow[j]) continue;
        float s = frt_dot_f32(qh, k + (size_t)j * row_stride, head_dim) * scale;
        if (s > m) {
            float r = expf(m - s);
            l *= r;
            for (int d = 0; d < head_dim; d++) o[d] *= r;
            m = s;
        }
        float p = expf(s - m);
        l += p;
        frt_axpy_f32(o, p, v + (size_t)j * row_stride, head_dim);
    }
    if (l > 0.0f) {
        float inv = 1.0f / l;
        for (int d = 0; d < head_dim; d++) o[d] *= inv;
    }
}

void frt_cpu_attention_masked(float *out, const float *q, const float *k, const float *v, const uint8_t *allow,
                              int n_q, int n_kv, int n_heads, int n_kv_heads, int head_dim, float scale)
{
    if (n_q <= 0 || n_heads <= 0) return;
    int group = n_heads / n_kv_heads;
    size_t row_stride = (size_t)n_kv_heads * head_dim;
    int n_pairs = n_q * n_heads;
#pragma omp parallel for schedule(dynamic, 1) if (n_pairs > 1)
    for (int p = 0; p < n_pairs; p++) {
        int t = p / n_heads, h = p % n_heads;
        size_t off = ((size_t)t * n_heads + h) * head_dim;
        attend_masked(out + off, q + off, k + (size_t)(h / group) * head_dim, v + (size_t)(h / group) * head_dim,
                      allow + (size_t)t * n_kv, n_kv, row_stride, head_dim, scale);
    }
}
