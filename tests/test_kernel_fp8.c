/*
 * test_kernel_fp8.c - the OCP FP8 E4M3 satfinite codec (kernels/cpu/fp8.h)
 * against the format's definition, computed here independently in double
 * (OCP OFP8 v1.0 section 5.1: sign, 4-bit exponent with bias 7, 3-bit
 * mantissa, subnormals at exponent 0, S.1111.111 the only NaN, no inf):
 *   - decode of every one of the 256 codes;
 *   - encode(decode(c)) == c for every finite code (both zeros included);
 *   - encode of random values (never zero, every binade from 2^-12 to 2^10,
 *     both signs) against an exhaustive nearest-code search with ties to
 *     the even code, and exact midpoints of every adjacent pair;
 *   - satfinite: +-inf and everything past 464 give +-448, NaN gives 0x7F;
 *   - the scaled helpers: per-tensor, per-row, per-head and per-row dynamic
 *     scales, bit-exact against encode(x * (1 / s)), and the norm-wise
 *     dequantization error within 2^-4 (half an E4M3 ulp, relative).
 */
#include "frt_test.h"

#include "kernels/cpu/fp8.h"

#include <float.h>

/* The definition: the value of code c (NaN for S.1111.111). */
static double ref_decode(unsigned c)
{
    int s = (int)(c >> 7), e = (int)((c >> 3) & 15), m = (int)(c & 7);
    if (e == 15 && m == 7) return NAN;
    double mag = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -mag : mag;
}

/* The nearest finite code to x by exhaustive search, ties to the code with
 * an even mantissa (its last bit 0); the sign of x kept, so past 448 this
 * is +-448 (satfinite) and below 2^-10 signed zero. */
static unsigned ref_encode(double x)
{
    unsigned sign = signbit(x) ? 0x80u : 0u, best = 0;
    double a = fabs(x), best_d = INFINITY;
    for (unsigned c = 0; c <= 0x7E; c++) {
        double d = fabs(ref_decode(c) - a);
        if (d < best_d || (d == best_d && !(c & 1u))) {
            best = c;
            best_d = d;
        }
    }
    return sign | best;
}

static void test_decode_all_codes(void)
{
    int nan = 0, finite = 0;
    float maxv = 0.0f;
    for (unsigned c = 0; c < 256; c++) {
        float v = frt_fp8_e4m3_decode((uint8_t)c);
        double r = ref_decode(c);
        CHECK(!isinf(v));
        if (isnan(r)) {
            CHECK_MSG(isnan(v) && !!signbit(v) == !!(c & 0x80u), "code 0x%02X: NaN expected", c);
            nan++;
        } else {
            CHECK_MSG((double)v == r && !!signbit(v) == !!(c & 0x80u), "code 0x%02X: %.9g vs %.9g", c, (double)v, r);
            finite++;
            if (v > maxv) maxv = v;
        }
    }
    CHECK(nan == 2 && finite == 254);
    CHECK(maxv == FRT_FP8_E4M3_MAX);
    CHECK(frt_fp8_e4m3_decode(0x01) == ldexpf(1.0f, -9)); /* the smallest subnormal */
    CHECK(frt_fp8_e4m3_decode(0x08) == ldexpf(1.0f, -6)); /* the smallest normal */
}

static void test_roundtrip_finite(void)
{
    int bad = 0;
    for (unsigned c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F) continue;
        if (frt_fp8_e4m3_encode(frt_fp8_e4m3_decode((uint8_t)c)) != c) bad++;
    }
    CHECK_MSG(bad == 0, "%d finite codes do not round-trip", bad);
}

static void test_random_rne(void)
{
    frt_test_seed(827);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        float mant = frt_test_rand(1.0f, 2.0f);
        int e = (int)(frt_test_u64() % 23) - 12; /* 2^-12 .. 2^10 */
        float x = ldexpf(mant, e) * (frt_test_u64() & 1 ? -1.0f : 1.0f);
        if (frt_fp8_e4m3_encode(x) != ref_encode((double)x) && bad++ < 5)
            fprintf(stderr, "x = %.9g: 0x%02X vs 0x%02X\n", (double)x, frt_fp8_e4m3_encode(x), ref_encode(x));
    }
    CHECK_MSG(bad == 0, "%d random values differ from the nearest-even code", bad);
    /* Exact midpoints of adjacent codes (representable in f32): the even code. */
    int ties = 0;
    for (unsigned c = 0; c < 0x7E; c++) {
        float mid = (float)((ref_decode(c) + ref_decode(c + 1)) / 2);
        unsigned want = (c & 1u) ? c + 1 : c;
        CHECK_MSG(frt_fp8_e4m3_encode(mid) == want, "tie %.9g: 0x%02X", (double)mid, frt_fp8_e4m3_encode(mid));
        CHECK(frt_fp8_e4m3_encode(-mid) == (0x80u | want));
        ties++;
    }
    CHECK(ties == 126);
    CHECK(frt_fp8_e4m3_encode(ldexpf(1.0f, -10)) == 0x00);       /* half the smallest subnormal: even (zero) */
    CHECK(frt_fp8_e4m3_encode(ldexpf(1.5f, -10)) == 0x01);       /* above it: the smallest subnormal */
    CHECK(frt_fp8_e4m3_encode(-0.0f) == 0x80);
}

static void test_saturation(void)
{
    CHECK(frt_fp8_e4m3_encode(INFINITY) == 0x7E);
    CHECK(frt_fp8_e4m3_encode(-INFINITY) == 0xFE);
    CHECK(frt_fp8_e4m3_encode(FLT_MAX) == 0x7E);
    CHECK(frt_fp8_e4m3_encode(-1e9f) == 0xFE);
    CHECK(frt_fp8_e4m3_encode(464.0f) == 0x7E);  /* the tie past 448 rounds to 448 (even) */
    CHECK(frt_fp8_e4m3_encode(465.0f) == 0x7E);  /* would round to 480: saturates */
    CHECK(frt_fp8_e4m3_encode(-500.0f) == 0xFE);
    CHECK(frt_fp8_e4m3_encode(NAN) == FRT_FP8_E4M3_NAN);
    CHECK(frt_fp8_e4m3_encode(-NAN) == FRT_FP8_E4M3_NAN);
}

/* Rows of random data quantized with `scale`, checked bit for bit against
 * the scalar encoder and, dequantized, norm-wise within 2^-4. */
static void check_scaled(const char *what, const float *x, const float *scale, int n_scales, int rows, int dim)
{
    size_t n = (size_t)rows * dim;
    uint8_t *q = xmalloc(n);
    float *y = xmalloc(n * sizeof(float));
    frt_fp8_quantize_rows(q, x, scale, n_scales, rows, dim);
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < dim; i++)
            bad += q[(size_t)r * dim + i] != frt_fp8_e4m3_encode(x[(size_t)r * dim + i] * (1.0f / scale[r % n_scales]));
    CHECK_MSG(bad == 0, "%s: %d codes differ from encode(x * (1 / s))", what, bad);
    frt_fp8_dequantize_rows(y, q, scale, n_scales, rows, dim);
    double err = frt_test_rel_err(y, x, n);
    printf("%-28s rel err %.4g (bound 2^-4 = 0.0625)\n", what, err);
    CHECK_MSG(err > 0 && err <= 0.0625, "%s: rel err %g", what, err);
    free(q);
    free(y);
}

static void test_scaled(void)
{
    enum { T = 37, H = 4, D = 64 };
    float *x = xmalloc(sizeof(float) * T * H * D);
    frt_test_seed(4);
    frt_test_fill(x, (size_t)T * H * D, -3.0f, 3.0f);
    for (int h = 0; h < H; h++) /* heads of very different magnitudes */
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) x[((size_t)t * H + h) * D + i] *= ldexpf(1.0f, 4 * h - 6);
    float one = 1.0f, head[H], rows[T * H];
    for (int h = 0; h < H; h++) head[h] = frt_fp8_amax_scale(x + (size_t)h * D, D) * 1.5f;
    check_scaled("per-tensor scale 1", x, &one, 1, T * H, D);
    check_scaled("per-head static scales", x, head, H, T * H, D);
    uint8_t *q = xmalloc((size_t)T * H * D);
    frt_fp8_quantize_rows_dynamic(q, rows, x, T * H, D);
    check_scaled("per-row dynamic scales", x, rows, T * H, T * H, D);
    int at_max = 0;
    for (int r = 0; r < T * H; r++) {
        for (int i = 0; i < D; i++) at_max += (q[(size_t)r * D + i] & 0x7F) == 0x7E;
        CHECK(rows[r] > 0 && isfinite(1.0f / rows[r]));
    }
    CHECK(at_max >= T * H); /* each row's largest magnitude lands on 448 */
    float zeros[3] = {0, -0.0f, 0}, tiny[2] = {1e-44f, -1e-45f}, inf[2] = {1.0f, -INFINITY};
    CHECK(frt_fp8_amax_scale(zeros, 3) == 1.0f);
    CHECK(frt_fp8_amax_scale(tiny, 2) == FLT_MIN);
    CHECK(frt_fp8_amax_scale(inf, 2) == FLT_MAX / FRT_FP8_E4M3_MAX);
    free(q);
    free(x);
}

int main(void)
{
    test_decode_all_codes();
    test_roundtrip_finite();
    test_random_rne();
    test_saturation();
    test_scaled();
    return frt_test_report();
}
