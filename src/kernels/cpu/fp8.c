/*
 * kernels/cpu/fp8.c - the OCP FP8 E4M3 satfinite codec (kernels/cpu/fp8.h).
 * Rounding is util/bf16.h's shared RNE narrowing core (3 mantissa bits,
 * bias 7); this file adds the satfinite overflow and NaN rules. Tested in
 * tests/test_kernel_fp8.c against the OCP definition computed there.
 */
#include "kernels/cpu/fp8.h"

#include "util/bf16.h"

#include <float.h>
#include <math.h>

float frt_fp8_e4m3_decode(uint8_t code) { return frt_fp8_e4m3_to_f32(code); }

uint8_t frt_fp8_e4m3_encode(float x)
{
    uint32_t u = frt_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint8_t)FRT_FP8_E4M3_NAN; /* NaN -> 0x7F */
    if (a == 0x7F800000u) return (uint8_t)(sign | 0x7Eu);  /* inf -> +-448 */
    uint32_t c = frt_narrow_rne_(a, 3, 7);
    if (c > 0x7Eu) c = 0x7Eu; /* rounds past 448 -> +-448 */
    return (uint8_t)(sign | c);
}

void frt_fp8_quantize_rows(uint8_t *q, const float *x, const float *scale, int n_scales, int rows, int dim)
{
    for (int r = 0; r < rows; r++) {
        const float inv = 1.0f / scale[r % n_scales];
        const float *xr = x + (size_t)r * dim;
        uint8_t *qr = q + (size_t)r * dim;
        for (int i = 0; i < dim; i++) qr[i] = frt_fp8_e4m3_encode(xr[i] * inv);
    }
}

void frt_fp8_dequantize_b128_bf16(uint16_t *out, const uint8_t *q, const float *scale, int rows, int dim)
{
    const int nb = (dim + 127) / 128;
    for (int r = 0; r < rows; r++) {
        const float *sr = scale + (size_t)(r / 128) * nb;
        for (int c = 0; c < dim; c++)
            out[(size_t)r * dim + c] = frt_f32_to_bf16(frt_fp8_e4m3_to_f32(q[(size_t)r * dim + c]) * sr[c / 128]);
    }
}

void frt_fp8_dequantize_rows(float *x, const uint8_t *q, const float *scale, int n_scales, int rows, int dim)
{
    for (int r = 0; r < rows; r++) {
        const float s = scale[r % n_scales];
        const uint8_t *qr = q + (size_t)r * dim;
        float *xr = x + (size_t)r * dim;
        for (int i = 0; i < dim; i++) xr[i] = frt_fp8_e4m3_to_f32(qr[i]) * s;
    }
}

float frt_fp8_amax_scale(const float *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a; /* NaN compares false: skipped */
    }
    if (amax == 0.0f) return 1.0f;
    if (amax > FLT_MAX) amax = FLT_MAX;
    float s = amax / FRT_FP8_E4M3_MAX;
    return s < FLT_MIN ? FLT_MIN : s; /* 1 / s stays finite */
}

void frt_fp8_quantize_rows_dynamic(uint8_t *q, float *scale, const float *x, int rows, int dim)
{
    for (int r = 0; r < rows; r++) scale[r] = frt_fp8_amax_scale(x + (size_t)r * dim, (size_t)dim);
    frt_fp8_quantize_rows(q, x, scale, rows, rows, dim);
}
