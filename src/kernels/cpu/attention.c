/*
 * attention.c - causal GQA attention of a block of query tokens over the KV
 * cache (prefill block or decode, n_tok = 1).
 * Math: transformers 5.x modeling_qwen3_5.py, eager_attention_forward with
 * the causal mask (softmax in fp32). Here the softmax is computed online over
 * blocks of ATT_BLOCK keys: the scores of a block, the running max m and sum
 * l, the partial output rescaled by exp(m_old - m_new) when the max grows.
 * One (token, head) pair per OpenMP iteration, in a fixed key order: the same
 * bits for any thread count. Tested in tests/test_kernel_attention.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

#define ATT_BLOCK 128

/* out_row [head_dim] = softmax over keys 0..n_ctx-1 of scale * q.k, times v. */
static void attend_one(float *o, const float *qh, const float *k_cache, const float *v_cache,
                       int n_ctx, size_t row_stride, int head_dim, float scale)
{
    float s[ATT_BLOCK];
    float m = -INFINITY, l = 0.0f;
    for (int d = 0; d < head_dim; d++) o[d] = 0.0f;
    for (int j0 = 0; j0 < n_ctx; j0 += ATT_BLOCK) {
        int nb = n_ctx - j0 < ATT_BLOCK ? n_ctx - j0 : ATT_BLOCK;
        float bmax = -INFINITY;
        for (int j = 0; j < nb; j++) {
            s[j] = frt_dot_f32(qh, k_cache + (size_t)(j0 + j) * row_stride, head_dim) * scale;
            if (s[j] > bmax) bmax = s[j];
        }
        if (bmax > m) {
            /* first block: m = -inf, o = 0, l = 0; expf(-inf) = 0 keeps them 0 */
            float r = expf(m - bmax);
            l *= r;
#pragma omp simd
            for (int d = 0; d < head_dim; d++) o[d] *= r;
            m = bmax;
        }
        for (int j = 0; j < nb; j++) {
            float p = expf(s[j] - m);
            l += p;
            frt_axpy_f32(o, p, v_cache + (size_t)(j0 + j) * row_stride, head_dim);
        }
    }
    float inv = 1.0f / l;
#pragma omp simd
    for (int d = 0; d < head_dim; d++) o[d] *= inv;
}

void frt_cpu_attention(float *out, const float *q, const float *k_cache, const float *v_cache,
                       int n_tok, int start_pos, int n_heads, int n_kv_heads, int head_dim,
                       float scale)
{
    if (n_tok <= 0 || n_heads <= 0) return;
    int group = n_heads / n_kv_heads;
    size_t row_stride = (size_t)n_kv_heads * head_dim;
    int n_pairs = n_tok * n_heads;
#pragma omp parallel for schedule(dynamic, 1) if (n_pairs > 1)
    for (int p = 0; p < n_pairs; p++) {
        int t = p / n_heads, h = p % n_heads;
        int kvh = h / group;
        size_t off = ((size_t)t * n_heads + h) * head_dim;
        attend_one(out + off, q + off, k_cache + (size_t)kvh * head_dim,
                   v_cache + (size_t)kvh * head_dim, start_pos + t + 1, row_stride, head_dim,
                   scale);
    }
}
