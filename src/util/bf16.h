/*
 * util/bf16.h - conversions between f32 and the narrow float formats of
 * checkpoints: bf16, IEEE f16, fp8 E4M3 (the "fn" variant: no infinity) and
 * fp8 E5M2.
 *
 * Narrowing rounds to nearest, ties to even (RNE), the way PyTorch's
 * `tensor.to(dtype)` does (c10/util/BFloat16.h, Half.h, Float8_e4m3fn.h,
 * Float8_e5m2.h), so a value rounded here has the same bits as the same
 * value rounded by torch:
 *   - bf16, f16, E5M2: overflow rounds to infinity; NaN stays NaN (quiet,
 *     sign kept);
 *   - E4M3: no infinity; anything that rounds past 448 (and +-inf, NaN)
 *     becomes NaN (0x7F | sign), as in torch (not saturating);
 *   - f32 subnormals (< 2^-126) are far below the smallest subnormal of
 *     every format here except bf16 and round to signed zero there; bf16
 *     keeps them (it has f32's exponent range).
 * Widening to f32 is exact for every code.
 *
 * Header only (static inline, no state): every layer may include it.
 */
#ifndef FRT_UTIL_BF16_H
#define FRT_UTIL_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t frt_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float frt_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- bf16 ------------------------------------------------------------- */

static inline float frt_bf16_to_f32(uint16_t h) { return frt_f32_from_bits((uint32_t)h << 16); }

static inline uint16_t frt_f32_to_bf16(float f)
{
    uint32_t u = frt_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);                                          /* RNE */
    return (uint16_t)(u >> 16);
}

/* ---- shared narrowing core ---------------------------------------------- */

/* Magnitude code of a finite, non-negative f32 (bits without the sign) in a
 * format with M mantissa bits and exponent bias B, rounded to nearest even.
 * The code may exceed the format's largest finite code when the value
 * rounds past it: the caller maps that to infinity or NaN. */
static inline uint32_t frt_narrow_rne_(uint32_t abs_bits, int M, int B)
{
    int e = (int)(abs_bits >> 23);
    if (e == 0) return 0; /* f32 subnormal: below half the smallest target subnormal */
    uint32_t sig = (abs_bits & 0x7FFFFFu) | 0x800000u; /* value = sig * 2^(e - 150) */
    int te = e - 127 + B;                               /* target biased exponent */
    int shift = 23 - M;
    if (te < 1) { /* target subnormal: code = value / 2^(1 - B - M) */
        shift += 1 - te;
        te = 0;
    }
    if (shift > 24) return 0; /* value < half of the smallest subnormal */
    uint32_t q = sig >> shift;
    uint32_t rem = sig & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    if (te == 0) return q; /* q == 2^M lands exactly on the smallest normal code */
    return ((uint32_t)te << M) + q - (1u << M); /* a carry out of q bumps the exponent */
}

/* ---- IEEE f16 ----------------------------------------------------------- */

static inline float frt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return frt_f32_from_bits(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * (1.0f / 16777216.0f); /* man * 2^-24 */
        return sign ? -v : v;
    }
    return frt_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t frt_f32_to_f16(float f)
{
    uint32_t u = frt_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u); /* NaN */
    if (a == 0x7F800000u) return (uint16_t)(sign | 0x7C00u); /* inf */
    uint32_t c = frt_narrow_rne_(a, 10, 15);
    if (c > 0x7BFFu) c = 0x7C00u; /* overflow -> inf */
    return (uint16_t)(sign | c);
}

/* ---- fp8 E4M3 (fn: bias 7, no infinity, 0x7F / 0xFF are NaN) ---------- */

static inline float frt_fp8_e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp = (b >> 3) & 0xFu, man = b & 7u;
    if (exp == 15 && man == 7) return frt_f32_from_bits(sign | 0x7FC00000u);
    if (exp == 0) {
        float v = (float)man * (1.0f / 512.0f); /* man * 2^-9 */
        return sign ? -v : v;
    }
    return frt_f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
}

static inline uint8_t frt_f32_to_fp8_e4m3(float f)
{
    uint32_t u = frt_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) return (uint8_t)(sign | 0x7Fu); /* inf, NaN -> NaN */
    uint32_t c = frt_narrow_rne_(a, 3, 7);
    if (c > 0x7Eu) c = 0x7Fu; /* rounds past 448 -> NaN */
    return (uint8_t)(sign | c);
}

/* ---- fp8 E5M2 (bias 15, IEEE-like: 0x7C inf, 0x7D..0x7F NaN) ---------- */

static inline float frt_fp8_e5m2_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp = (b >> 2) & 0x1Fu, man = b & 3u;
    if (exp == 31) return frt_f32_from_bits(sign | 0x7F800000u | (man << 21));
    if (exp == 0) {
        float v = (float)man * (1.0f / 65536.0f); /* man * 2^-16 */
        return sign ? -v : v;
    }
    return frt_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 21));
}

static inline uint8_t frt_f32_to_fp8_e5m2(float f)
{
    uint32_t u = frt_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint8_t)(sign | 0x7Fu); /* NaN */
    if (a == 0x7F800000u) return (uint8_t)(sign | 0x7Cu); /* inf */
    uint32_t c = frt_narrow_rne_(a, 2, 15);
    if (c > 0x7Bu) c = 0x7Cu; /* overflow -> inf */
    return (uint8_t)(sign | c);
}

/* ---- arrays ------------------------------------------------------------- */

/* n bf16 values -> f32. src may be unaligned (it is read with memcpy). */
static inline void frt_bf16_array_to_f32(const void *src, float *dst, size_t n)
{
    const unsigned char *p = (const unsigned char *)src;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = frt_bf16_to_f32(h);
    }
}

/* n f32 values -> bf16 (RNE). */
static inline void frt_f32_array_to_bf16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = frt_f32_to_bf16(src[i]);
}

#endif /* FRT_UTIL_BF16_H */
