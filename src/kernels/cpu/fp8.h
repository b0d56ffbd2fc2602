/*
 * kernels/cpu/fp8.h - the OCP FP8 E4M3 codec and its scaled quantize /
 * dequantize helpers, the CPU twin of kernels/cuda/fp8.cu.
 *
 * Format (OCP 8-bit Floating Point Specification (OFP8), revision 1.0,
 * 2023, section 5.1, "E4M3"): 1 sign bit, 4 exponent bits with bias 7, 3
 * mantissa bits.
 *   exponent 1..15:  (-1)^s * 2^(e - 7) * (1 + m / 8)
 *   exponent 0:      (-1)^s * 2^-6 * (m / 8)           (subnormals, +-0)
 *   S.1111.111 (0x7F, 0xFF) is NaN: the only NaN per sign; there is no
 *   infinity, so S.1111.110 = +-448 is the largest finite magnitude and
 *   2^-9 the smallest subnormal.
 *
 * Encoding is the "satfinite" conversion of OCP OFP8 section 4.2 (the
 * saturating mode), the same as CUDA's
 * __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) (cuda_fp8.h):
 *   - round to nearest, ties to even, in the E4M3 grid (subnormals too);
 *   - a finite value whose rounded magnitude exceeds 448, and +-inf,
 *     saturate to +-448 (0x7E / 0xFE);
 *   - NaN (any payload, either sign) becomes 0x7F (NaN, sign dropped, as
 *     cuda_fp8.hpp's __nv_cvt_float_to_fp8 returns 0x7F for every NaN);
 *   - -0 stays -0 (0x80); magnitudes below 2^-10 (half the smallest
 *     subnormal) round to signed zero, exactly 2^-10 ties to even (zero).
 * util/bf16.h's frt_f32_to_fp8_e4m3 is the other mode (torch's
 * tensor.to(float8_e4m3fn): overflow -> NaN), used to read checkpoints.
 * Decoding is exact for every code (E4M3 is a subset of f32).
 *
 * Scaled forms: a scale s maps the real value x to the code of x / s, and
 * back to s * decode(code). The division is a multiplication by the f32
 * reciprocal inv = 1.0f / s, computed once per scale, on both backends
 * (the bits of x * inv and x / s can differ in the last place; the CUDA
 * twin does the same multiplication, so the codes agree bit for bit).
 * Dequantization is decode(code) * s in f32. A scale must be finite and
 * > 0 (the caller checks; the helpers below that compute a scale return a
 * positive finite one).
 */
#ifndef FRT_KERNELS_CPU_FP8_H
#define FRT_KERNELS_CPU_FP8_H

#include <stddef.h>
#include <stdint.h>

#define FRT_FP8_E4M3_MAX 448.0f  /* largest finite magnitude (0x7E) */
#define FRT_FP8_E4M3_NAN 0x7Fu   /* the NaN the encoder writes */

/* The f32 value of an E4M3 code: exact; 0x7F / 0xFF give a quiet NaN of
 * that sign. */
float frt_fp8_e4m3_decode(uint8_t code);

/* The E4M3 code of x, satfinite (above). */
uint8_t frt_fp8_e4m3_encode(float x);

/* Quantizes rows: q[r, i] = encode(x[r, i] * (1 / scale[r % n_scales]))
 * for r < rows, i < dim. x [rows, dim] f32; q [rows, dim] E4M3 codes;
 * scale [n_scales] f32 (> 0, finite). n_scales = 1: one per-tensor scale;
 * n_scales = rows: one per row; n_scales = h with rows = tokens * h on a
 * [tokens, h, dim] tensor: one per head (the KV cache). */
void frt_fp8_quantize_rows(uint8_t *q, const float *x, const float *scale, int n_scales, int rows, int dim);

/* The inverse: x[r, i] = decode(q[r, i]) * scale[r % n_scales]. */
void frt_fp8_dequantize_rows(float *x, const uint8_t *q, const float *scale, int n_scales, int rows, int dim);

/* The scale that maps the largest magnitude of x [n] onto 448:
 * max|x| / 448 (at least FLT_MIN, so 1 / scale is finite), or 1 when x
 * is all zeros (or n == 0). NaN elements are
 * skipped; an infinite element gives FLT_MAX / 448 (everything finite then
 * quantizes to zero or saturates). The per-tensor dynamic scale. */
float frt_fp8_amax_scale(const float *x, size_t n);

/* Per-row dynamic quantization (one scale per row, a row's codes never
 * depend on other rows): scale[r] = frt_fp8_amax_scale(row r), then
 * frt_fp8_quantize_rows with n_scales = rows. scale [rows] f32 out. */
void frt_fp8_quantize_rows_dynamic(uint8_t *q, float *scale, const float *x, int rows, int dim);

/* A weight with 128 x 128 block scales as bf16 (the operand of the cuda
 * prefill GEMM for block-wise FP8 checkpoints, docs/fp8.md "FP8 weights"):
 * out[r, c] = bf16(decode(q[r, c]) * scale[r / 128][c / 128]), the product
 * in f32 (one rounding) then rounded to bf16 (RNE). q [rows, dim] E4M3,
 * scale [ceil(rows / 128), ceil(dim / 128)] f32 row-major, out [rows, dim]
 * bf16 bits. Bit-exact twin of frt_cuda_fp8_dequantize_b128_bf16. */
void frt_fp8_dequantize_b128_bf16(uint16_t *out, const uint8_t *q, const float *scale, int rows, int dim);

#endif /* FRT_KERNELS_CPU_FP8_H */
