/*
 * test_cuda_fp8.c - the CUDA FP8 E4M3 quantize / dequantize (kernels/cuda/
 * fp8.cu, cuda_fp8.h's satfinite conversion) against the CPU codec
 * (kernels/cpu/fp8.h), bit for bit:
 *   - every one of the 256 codes decoded (scale 1), NaN codes compared as
 *     NaN of the same sign;
 *   - the encoder on every code's value, the midpoints of adjacent codes
 *     (ties), +-inf, NaN, values past 448, signed zeros;
 *   - random rows (never zero, many binades) with per-tensor, per-head and
 *     per-row scales, quantized and dequantized;
 *   - 128 x 128 block-scaled weights to bf16 (frt_cuda_fp8_dequantize_b128_bf16
 *     against frt_fp8_dequantize_b128_bf16) on random codes and scales.
 * Bad arguments fail with FRT_ERR_INVALID_ARGUMENT before the device check.
 * Exits 77 (skipped) without a device.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#include <float.h>

/* Quantizes x [rows, dim] with scale [ns] on the device and the host;
 * returns the count of differing codes and fills *dq_bad with the count of
 * differing dequantized bit patterns (NaN == NaN of the same sign). */
static int run_case(const float *x, const float *scale, int ns, int rows, int dim, int *dq_bad)
{
    size_t n = (size_t)rows * dim;
    dbuf dx = dalloc(n * 4), dq = dalloc(n), ds = dalloc((size_t)ns * 4), dy = dalloc(n * 4);
    dput(dx, 0, x, n * 4);
    dput(ds, 0, scale, (size_t)ns * 4);
    must(frt_cuda_fp8_quantize_rows(g_cs, dq.p, dx.p, ds.p, ns, rows, dim), "quantize");
    must(frt_cuda_fp8_dequantize_rows(g_cs, dy.p, dq.p, ds.p, ns, rows, dim), "dequantize");
    uint8_t *qg = xzalloc(n), *qc = xzalloc(n);
    float *yg = xzalloc(n * 4), *yc = xzalloc(n * 4);
    dget(dq, 0, qg, n);
    dget(dy, 0, yg, n * 4);
    frt_fp8_quantize_rows(qc, x, scale, ns, rows, dim);
    frt_fp8_dequantize_rows(yc, qg, scale, ns, rows, dim);
    int bad = 0;
    *dq_bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (qg[i] != qc[i] && bad++ < 5)
            fprintf(stderr, "x = %.9g: gpu 0x%02X cpu 0x%02X\n", (double)x[i], qg[i], qc[i]);
        int same = isnan(yc[i]) ? isnan(yg[i]) && !!signbit(yg[i]) == !!signbit(yc[i]) : !memcmp(&yg[i], &yc[i], 4);
        *dq_bad += !same;
    }
    free(qg), free(qc), free(yg), free(yc);
    dfree(&dx), dfree(&dq), dfree(&ds), dfree(&dy);
    return bad;
}

/* Every one of the 256 codes dequantized with scale 1: the CPU decode's bits
 * (NaN codes: a NaN; its sign is not compared: the device multiplies the
 * decoded NaN by the scale, and NVIDIA GPUs return the canonical NaN
 * 0x7FFFFFFF for arithmetic on a NaN, as IEEE 754 leaves the sign of a NaN
 * result unspecified; measured on the H100: -NaN * 1 came back +NaN). */
static void test_decode(void)
{
    uint8_t codes[256];
    float one = 1.0f, yg[256];
    for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    dbuf dq = dalloc(256), ds = dalloc(4), dy = dalloc(256 * 4);
    dput(dq, 0, codes, 256);
    dput(ds, 0, &one, 4);
    must(frt_cuda_fp8_dequantize_rows(g_cs, dy.p, dq.p, ds.p, 1, 1, 256), "dequantize");
    dget(dy, 0, yg, sizeof yg);
    int bad = 0;
    for (int c = 0; c < 256; c++) {
        float yc = frt_fp8_e4m3_decode((uint8_t)c);
        bad += isnan(yc) ? !isnan(yg[c]) : memcmp(&yg[c], &yc, 4) != 0;
    }
    report_flag("decode: all 256 codes", bad == 0);
    dfree(&dq), dfree(&ds), dfree(&dy);
}

/* The encoder on every code's value, the midpoints of adjacent codes
 * (ties), +-inf, NaN, values past 448 and -0. */
static void test_codes(void)
{
    float x[256 + 126 * 2 + 8];
    int n = 0;
    for (unsigned c = 0; c < 256; c++) x[n++] = frt_fp8_e4m3_decode((uint8_t)c);
    for (unsigned c = 0; c < 0x7E; c++) {
        float mid = (frt_fp8_e4m3_decode((uint8_t)c) + frt_fp8_e4m3_decode((uint8_t)(c + 1))) * 0.5f;
        x[n++] = mid;
        x[n++] = -mid;
    }
    const float extra[8] = {INFINITY, -INFINITY, NAN, -NAN, 464.0f, -465.0f, FLT_MAX, -0.0f};
    for (int i = 0; i < 8; i++) x[n++] = extra[i];
    float one = 1.0f;
    int dq_bad, bad = run_case(x, &one, 1, 1, n, &dq_bad);
    if (bad || dq_bad) fprintf(stderr, "%d of %d values encode differently, %d decode differently\n", bad, n, dq_bad);
    report_flag("encode: 256 codes, ties, inf / NaN / saturation", bad == 0 && dq_bad == 0);
}

static void test_random(void)
{
    enum { T = 61, H = 8, D = 128 };
    size_t n = (size_t)T * H * D;
    float *x = xzalloc(n * 4);
    uint64_t rng = 827;
    for (size_t i = 0; i < n; i++) {
        float v = ldexpf(1.0f + frt_rng_uniform(&rng), (int)(frt_rng_uniform(&rng) * 26.0f) - 14);
        x[i] = frt_rng_uniform(&rng) < 0.5f ? -v : v;
    }
    float one = 1.0f, head[H], *row = xzalloc((size_t)T * H * 4);
    for (int h = 0; h < H; h++) head[h] = 0.37f * (float)(h + 1);
    uint8_t *q = xzalloc(n);
    frt_fp8_quantize_rows_dynamic(q, row, x, T * H, D);
    struct { const char *name; const float *s; int ns; } cases[] = {
        {"random, per-tensor scale 1", &one, 1}, {"random, per-head scales", head, H}, {"random, per-row scales", row, T * H}};
    for (int c = 0; c < 3; c++) {
        int dq_bad, bad = run_case(x, cases[c].s, cases[c].ns, T * H, D, &dq_bad);
        if (bad || dq_bad) fprintf(stderr, "%s: %d codes, %d values differ\n", cases[c].name, bad, dq_bad);
        report_flag(cases[c].name, bad == 0 && dq_bad == 0);
    }
    free(q), free(row), free(x);
}

/* frt_cuda_fp8_dequantize_b128_bf16 against frt_fp8_dequantize_b128_bf16,
 * bit for bit: random finite codes (every code but the NaNs), random block
 * scales over many binades; shapes with partial blocks both ways and an
 * 8B one. */
static void test_dequant_b128(int rows, int dim)
{
    const size_t n = (size_t)rows * dim, ns = (size_t)((rows + 127) / 128) * ((dim + 127) / 128);
    uint64_t rng = 20261126u + (uint64_t)rows * 7 + (uint64_t)dim;
    uint8_t *q = xzalloc(n);
    float *sc = xzalloc(ns * 4);
    uint16_t *want = xzalloc(n * 2), *got = xzalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        uint8_t c;
        do c = (uint8_t)(frt_rng_next(&rng) >> 56);
        while ((c & 0x7F) == 0x7F);
        q[i] = c;
    }
    for (size_t i = 0; i < ns; i++) sc[i] = ldexpf(1.0f + frt_rng_uniform(&rng), (int)(frt_rng_uniform(&rng) * 20) - 16);
    frt_fp8_dequantize_b128_bf16(want, q, sc, rows, dim);
    dbuf dq = dalloc(n), ds = dalloc(ns * 4), dout = dalloc(n * 2);
    dput(dq, 0, q, n);
    dput(ds, 0, sc, ns * 4);
    must(frt_cuda_fp8_dequantize_b128_bf16(g_cs, dout.p, dq.p, ds.p, rows, dim), "dequantize_b128");
    sync_st();
    dget(dout, 0, got, n * 2);
    char name[96];
    snprintf(name, sizeof name, "dequantize_b128_bf16 %d x %d == cpu", rows, dim);
    report_flag(name, memcmp(got, want, n * 2) == 0);
    dfree(&dq), dfree(&ds), dfree(&dout);
    free(q), free(sc), free(want), free(got);
}

int main(void)
{
    float f = 0, s = 1;
    uint8_t q = 0;
    CHECK_STATUS(frt_cuda_fp8_quantize_rows(NULL, NULL, &f, &s, 1, 1, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows(NULL, &q, &f, &s, 0, 1, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_dequantize_rows(NULL, &f, &q, &s, 1, 1, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_dequantize_rows(NULL, &f, &q, NULL, 1, 1, 1), FRT_ERR_INVALID_ARGUMENT);
    uint16_t *o16 = (uint16_t *)(uintptr_t)4096;
    const uint8_t *q16 = (const uint8_t *)(uintptr_t)8192;
    CHECK_STATUS(frt_cuda_fp8_dequantize_b128_bf16(NULL, NULL, q16, &s, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_dequantize_b128_bf16(NULL, o16, q16, NULL, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_dequantize_b128_bf16(NULL, o16, q16, &s, -1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_dequantize_b128_bf16(NULL, o16, q16, &s, 1, 24), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_dequantize_b128_bf16(NULL, o16 + 1, q16, &s, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    frt_test_cuda_start();
    test_decode();
    test_codes();
    test_random();
    test_dequant_b128(1, 16);
    test_dequant_b128(300, 272);
    test_dequant_b128(1003, 1040);
    test_dequant_b128(4096, 4096);
    return frt_test_report();
}
#endif
