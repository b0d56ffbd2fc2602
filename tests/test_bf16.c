/*
 * test_bf16.c - util/bf16.h against a brute-force reference: widening is
 * checked for every code, narrowing (RNE) against "the nearest code, ties
 * to the even code" found by search over all codes, on exact ties, on both
 * sides of every tie, at the overflow and subnormal edges, and on random
 * inputs; plus NaN / inf / signed-zero rules (torch's semantics).
 */
#include "frt_test.h"
#include "util/bf16.h"

typedef struct fmt {
    const char *name;
    int bits;            /* 8 or 16 */
    uint32_t max_finite; /* largest finite magnitude code */
    int overflow_nan;    /* 1: rounding past max gives NaN (E4M3), 0: inf */
    float (*dec)(uint32_t);
    uint32_t (*enc)(float);
    uint32_t inf_code, nan_code;
} fmt;

static float dec_bf16(uint32_t c) { return frt_bf16_to_f32((uint16_t)c); }
static float dec_f16(uint32_t c) { return frt_f16_to_f32((uint16_t)c); }
static float dec_e4m3(uint32_t c) { return frt_fp8_e4m3_to_f32((uint8_t)c); }
static float dec_e5m2(uint32_t c) { return frt_fp8_e5m2_to_f32((uint8_t)c); }
static uint32_t enc_bf16(float f) { return frt_f32_to_bf16(f); }
static uint32_t enc_f16(float f) { return frt_f32_to_f16(f); }
static uint32_t enc_e4m3(float f) { return frt_f32_to_fp8_e4m3(f); }
static uint32_t enc_e5m2(float f) { return frt_f32_to_fp8_e5m2(f); }

static const fmt FMTS[] = {
    {"bf16", 16, 0x7F7F, 0, dec_bf16, enc_bf16, 0x7F80, 0x7FC0},
    {"f16", 16, 0x7BFF, 0, dec_f16, enc_f16, 0x7C00, 0x7E00},
    {"e4m3", 8, 0x7E, 1, dec_e4m3, enc_e4m3, 0x7F, 0x7F},
    {"e5m2", 8, 0x7C - 1, 0, dec_e5m2, enc_e5m2, 0x7C, 0x7F},
};

/* Value of magnitude code c as a double, including the virtual code
 * max_finite + 1 (the next value if the format went on: 2^128 for bf16,
 * 65536 for f16 and E5M2, 480 for E4M3). */
static double code_value(const fmt *f, uint32_t c)
{
    if (c <= f->max_finite) return (double)f->dec(c);
    double a = f->dec(f->max_finite), b = f->dec(f->max_finite - 1);
    return a + (a - b); /* max + 1 ulp (the max code has an odd, non-zero mantissa) */
}

/* Reference: the magnitude code nearest to |x|, ties to the even code;
 * returns max_finite + 1 for an overflow. Binary search over codes (values
 * increase with the code). */
static uint32_t ref_mag(const fmt *f, double ax)
{
    uint32_t lo = 0, hi = f->max_finite + 1;
    if (ax >= code_value(f, hi)) return hi;
    while (hi - lo > 1) { /* invariant: value(lo) <= ax < value(hi) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (code_value(f, mid) <= ax)
            lo = mid;
        else
            hi = mid;
    }
    double dl = ax - code_value(f, lo), dh = code_value(f, hi) - ax;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static uint32_t ref_enc(const fmt *f, float x)
{
    uint32_t sign = (frt_f32_bits(x) >> 31) ? (f->bits == 16 ? 0x8000u : 0x80u) : 0;
    if (isnan(x)) return sign | f->nan_code;
    if (isinf(x)) return sign | (f->overflow_nan ? f->nan_code : f->inf_code);
    uint32_t m = ref_mag(f, fabs((double)x));
    if (m > f->max_finite) m = f->overflow_nan ? f->nan_code : f->inf_code;
    return sign | m;
}

static int n_mismatch;

static void check_enc(const fmt *f, float x)
{
    uint32_t got = f->enc(x), want = ref_enc(f, x);
    if (got != want) {
        if (n_mismatch++ < 10)
            fprintf(stderr, "%s: encode(%a = 0x%08x) = 0x%x, reference 0x%x\n", f->name, (double)x,
                    frt_f32_bits(x), got, want);
    }
}

static void test_format(const fmt *f)
{
    uint32_t ncodes = 1u << f->bits, signbit = ncodes >> 1;
    n_mismatch = 0;
    /* Every code decodes to the value the reference table assumes, and
     * every non-NaN code survives decode -> encode. */
    int roundtrip_bad = 0, monotone_bad = 0;
    for (uint32_t c = 0; c < ncodes; c++) {
        float v = f->dec(c);
        if (isnan(v)) continue;
        if (f->enc(v) != c && !(v == 0 && (c & ~signbit) == 0)) roundtrip_bad++;
        uint32_t m = c & ~signbit;
        if (m > 0 && m <= f->max_finite && !(f->dec(m) > f->dec(m - 1))) monotone_bad++;
    }
    CHECK_MSG(roundtrip_bad == 0, "%s: %d codes do not round-trip", f->name, roundtrip_bad);
    CHECK_MSG(monotone_bad == 0, "%s: %d codes out of order", f->name, monotone_bad);
    CHECK(f->enc(-0.0f) == signbit && f->enc(0.0f) == 0);

    /* Exact ties and their neighbours, for every pair of adjacent codes
     * (including max / virtual max + 1, the overflow threshold). */
    for (uint32_t m = 0; m <= f->max_finite; m++) {
        double a = code_value(f, m), b = code_value(f, m + 1), mid = 0.5 * (a + b);
        float fm = (float)mid;
        if ((double)fm != mid) continue; /* tie not representable in f32 (bf16 at the top) */
        float below = nextafterf(fm, 0.0f), above = nextafterf(fm, INFINITY);
        float xs[] = {fm, below, above, (float)a, -fm, -below, -above};
        for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) check_enc(f, xs[k]);
    }
    /* Random finite inputs around the format's range, both signs. */
    frt_test_seed(0xB16 + (uint64_t)f->bits);
    double maxv = code_value(f, f->max_finite);
    int emax = (int)ceil(log2(maxv)) + 2;
    for (int i = 0; i < 200000; i++) {
        int e = -(f->bits == 8 ? 22 : (f->max_finite == 0x7F7F ? 140 : 30)) + (int)(frt_test_u64() % (uint64_t)(emax + 40));
        if (e > 127) e = 127;
        float mant = 1.0f + (float)(frt_test_u64() >> 40) / 16777216.0f;
        float x = ldexpf(mant, e);
        if (frt_test_u64() & 1) x = -x;
        check_enc(f, x);
    }
    CHECK_MSG(n_mismatch == 0, "%s: %d encodings differ from the nearest-even reference", f->name, n_mismatch);

    /* Specials. */
    CHECK(f->enc(NAN) == f->nan_code);
    CHECK(f->enc(-NAN) == (signbit | f->nan_code));
    CHECK(f->enc(INFINITY) == (f->overflow_nan ? f->nan_code : f->inf_code));
    CHECK(isnan(f->dec(f->nan_code)));
}

static void test_known_values(void)
{
    CHECK(frt_f32_to_bf16(1.0f) == 0x3F80);
    CHECK(frt_f32_to_bf16(frt_f32_from_bits(0x3F808000u)) == 0x3F80); /* tie, even stays */
    CHECK(frt_f32_to_bf16(frt_f32_from_bits(0x3F818000u)) == 0x3F82); /* tie, odd rounds up */
    CHECK(frt_f32_to_bf16(frt_f32_from_bits(0x3F808001u)) == 0x3F81);
    CHECK(frt_f32_to_bf16(3.4028235e38f) == 0x7F80);                  /* rounds past max: inf */
    CHECK(frt_f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(frt_f32_to_f16(65519.0f) == 0x7BFF);
    CHECK(frt_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(frt_f32_to_f16(5.9604645e-08f) == 0x0001); /* 2^-24, smallest subnormal */
    CHECK(frt_f32_to_f16(2.9802322e-08f) == 0x0000); /* 2^-25: tie to even (0) */
    CHECK(frt_f16_to_f32(0x3C00) == 1.0f && frt_f16_to_f32(0xC000) == -2.0f);
    CHECK(frt_fp8_e4m3_to_f32(0x7E) == 448.0f && frt_fp8_e4m3_to_f32(0x01) == 0.001953125f);
    CHECK(frt_f32_to_fp8_e4m3(448.0f) == 0x7E);
    CHECK(frt_f32_to_fp8_e4m3(464.0f) == 0x7E); /* tie to even 448 (torch) */
    CHECK(frt_f32_to_fp8_e4m3(465.0f) == 0x7F); /* NaN, not saturated */
    CHECK(frt_f32_to_fp8_e4m3(-1000.0f) == 0xFF);
    CHECK(frt_fp8_e5m2_to_f32(0x7B) == 57344.0f && isinf(frt_fp8_e5m2_to_f32(0x7C)));
    CHECK(frt_f32_to_fp8_e5m2(57344.0f) == 0x7B);
    CHECK(frt_f32_to_fp8_e5m2(61440.0f) == 0x7C); /* tie, odd max -> inf */
    CHECK(frt_f32_to_fp8_e5m2(1.0f) == 0x3C);
    /* Every bf16 code widens to bits << 16. */
    int bad = 0;
    for (uint32_t c = 0; c < 65536; c++) bad += frt_f32_bits(frt_bf16_to_f32((uint16_t)c)) != c << 16;
    CHECK(bad == 0);
    /* Arrays, from an unaligned source. */
    unsigned char raw[2 * 9 + 1];
    float src[9], back[9];
    frt_test_fill(src, 9, -3.0f, 3.0f);
    uint16_t h[9];
    frt_f32_array_to_bf16(src, h, 9);
    memcpy(raw + 1, h, sizeof h);
    frt_bf16_array_to_f32(raw + 1, back, 9);
    for (int i = 0; i < 9; i++) CHECK(back[i] == frt_bf16_to_f32(frt_f32_to_bf16(src[i])));
    CHECK_ERR_NEAR(back, src, 9, 4e-3);
}

int main(void)
{
    for (size_t i = 0; i < sizeof FMTS / sizeof FMTS[0]; i++) test_format(&FMTS[i]);
    test_known_values();
    return frt_test_report();
}
