/*
 * rope.c - rotary position embedding, rotate-half (NeoX) form, partial.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5TextRotaryEmbedding
 * (fp32 inv_freq, fp32 freqs, fp32 cos/sin) and apply_rotary_pos_emb.
 * Tested in tests/test_kernel_rope.c.
 */
#include "kernels/cpu/kernels_cpu.h"

#include <math.h>

/* cos/sin of one frequency at one position, in HF's fp32 order. */
static void rope_angle(float p, int i, int rot_dim, float theta, float *c, float *s)
{
    float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)rot_dim);
    float a = p * inv_freq;
    *c = cosf(a);
    *s = sinf(a);
}

/* HF: x * cos + rotate_half(x) * sin with rotate_half(x) = [-x2, x1]. */
static inline void rope_pair(float *xh, int i, int half, float c, float s)
{
    float x1 = xh[i], x2 = xh[i + half];
    xh[i] = x1 * c + (-x2) * s;
    xh[i + half] = x2 * c + x1 * s;
}

/* rot_dim / 2 up to this uses a per-token cos/sin table on the stack (shared
 * by all heads); larger (no known model) recomputes per head. Same bits. */
#define ROPE_TABLE 512

void frt_cpu_rope(float *x, int n_tok, int n_heads, int head_dim, int rot_dim, const int32_t *pos,
                  float theta)
{
    int half = rot_dim / 2;
    if (half <= 0) return;
#pragma omp parallel for schedule(static) if (n_tok > 1)
    for (int t = 0; t < n_tok; t++) {
        float p = (float)pos[t];
        float *xt = x + (size_t)t * n_heads * head_dim;
        if (half <= ROPE_TABLE) {
            float cs[ROPE_TABLE], sn[ROPE_TABLE];
            for (int i = 0; i < half; i++) rope_angle(p, i, rot_dim, theta, &cs[i], &sn[i]);
            for (int h = 0; h < n_heads; h++)
                for (int i = 0; i < half; i++)
                    rope_pair(xt + (size_t)h * head_dim, i, half, cs[i], sn[i]);
        } else {
            for (int h = 0; h < n_heads; h++) {
                for (int i = 0; i < half; i++) {
                    float c, s;
                    rope_angle(p, i, rot_dim, theta, &c, &s);
                    rope_pair(xt + (size_t)h * head_dim, i, half, c, s);
                }
            }
        }
    }
}
