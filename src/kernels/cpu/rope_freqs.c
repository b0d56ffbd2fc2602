/*
 * rope_freqs.c - rotary position embedding from a table of inverse
 * frequencies, and the default and llama3 tables.
 * Math: transformers 5.x modeling_rope_utils.py (_compute_default_rope_parameters,
 * _compute_llama3_parameters) and modeling_llama.py (LlamaRotaryEmbedding.forward:
 * fp32 freqs = inv_freq * pos, fp32 cos / sin; apply_rotary_pos_emb, rotate_half).
 * Tested in tests/test_dense_rope.c.
 */
#include "kernels/cpu/rope_freqs.h"

#include <math.h>
#include <stddef.h>

void frt_rope_inv_freq_default(float *inv_freq, int rot_dim, float theta)
{
    for (int i = 0; i < rot_dim / 2; i++) inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)rot_dim);
}

void frt_rope_inv_freq_llama3(float *inv_freq, int rot_dim, float theta, float factor, float low_freq_factor,
                              float high_freq_factor, int original_max_pos)
{
    frt_rope_inv_freq_default(inv_freq, rot_dim, theta);
    const float orig = (float)original_max_pos;
    const float low_wavelen = (float)((double)original_max_pos / (double)low_freq_factor);
    const float high_wavelen = (float)((double)original_max_pos / (double)high_freq_factor);
    const float two_pi = (float)(2.0 * M_PI);
    const float band = (float)((double)high_freq_factor - (double)low_freq_factor);
    for (int i = 0; i < rot_dim / 2; i++) {
        float f = inv_freq[i];
        float wavelen = (1.0f / f) * two_pi; /* torch: scalar / tensor = reciprocal(tensor) * scalar */
        float scaled = wavelen > low_wavelen ? f / factor : f;
        float s = ((1.0f / wavelen) * orig - low_freq_factor) / band;
        float smoothed = (1.0f - s) * scaled / factor + s * scaled;
        int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        inv_freq[i] = medium ? smoothed : scaled;
    }
}

/* rot_dim / 2 up to this uses a per-token cos/sin table on the stack. */
#define ROPE_TABLE 512

void frt_cpu_rope_freqs(float *x, int n_tok, int n_heads, int head_dim, int rot_dim, const int32_t *pos,
                        const float *inv_freq)
{
    int half = rot_dim / 2;
    if (half <= 0 || half > ROPE_TABLE) return; /* head_dim <= 1024: checked by the architecture */
#pragma omp parallel for schedule(static) if (n_tok > 1)
    for (int t = 0; t < n_tok; t++) {
        float p = (float)pos[t];
        float cs[ROPE_TABLE], sn[ROPE_TABLE];
        for (int i = 0; i < half; i++) {
            float a = p * inv_freq[i];
            cs[i] = cosf(a);
            sn[i] = sinf(a);
        }
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + ((size_t)t * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float x1 = xh[i], x2 = xh[i + half];
                xh[i] = x1 * cs[i] + (-x2) * sn[i];
                xh[i + half] = x2 * cs[i] + x1 * sn[i];
            }
        }
    }
}
