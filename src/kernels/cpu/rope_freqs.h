/*
 * kernels/cpu/rope_freqs.h - rotary position embedding from a table of
 * inverse frequencies, and the tables of transformers' rope types "default"
 * and "llama3". The dense architectures (src/model/arch/dense/) use it; the
 * hybrid keeps frt_cpu_rope (kernels_cpu.h), which computes the default
 * table inline: with the default table both give the same bits.
 * Tested in tests/test_dense_rope.c.
 */
#ifndef FRT_KERNELS_CPU_ROPE_FREQS_H
#define FRT_KERNELS_CPU_ROPE_FREQS_H

#include <stdint.h>

/* inv_freq[i] = 1.0f / powf(theta, (float)(2 i) / (float)rot_dim), i < rot_dim / 2,
 * fp32 as transformers' _compute_default_rope_parameters. inv_freq [rot_dim / 2]. */
void frt_rope_inv_freq_default(float *inv_freq, int rot_dim, float theta);

/* The llama3 table (transformers 5.x modeling_rope_utils._compute_llama3_parameters),
 * fp32 in torch's order, from the default table f_i with
 * wavelen_i = (1 / f_i) * 2 pi, low = orig / low_freq_factor, high = orig / high_freq_factor:
 *   wavelen_i < high:          f_i                       (high frequencies kept)
 *   wavelen_i > low:           f_i / factor              (low frequencies divided)
 *   otherwise (medium):        (1 - s) f_i / factor + s f_i,
 *                              s = (orig / wavelen_i - low_freq_factor) / (high_freq_factor - low_freq_factor)
 * The attention scaling of llama3 is 1 (cos and sin are not rescaled).
 * high_freq_factor > low_freq_factor (the config parser checks it). */
void frt_rope_inv_freq_llama3(float *inv_freq, int rot_dim, float theta, float factor, float low_freq_factor,
                              float high_freq_factor, int original_max_pos);

/* Rotary position embedding, rotate-half (NeoX) form, in place on the first
 * rot_dim dims of each head, from a table: as frt_cpu_rope with
 * a = (float)pos[t] * inv_freq[i].
 * x [n_tok, n_heads, head_dim] f32; pos [n_tok] i32; inv_freq [rot_dim / 2] f32. */
void frt_cpu_rope_freqs(float *x, int n_tok, int n_heads, int head_dim, int rot_dim, const int32_t *pos,
                        const float *inv_freq);

#endif /* FRT_KERNELS_CPU_ROPE_FREQS_H */
