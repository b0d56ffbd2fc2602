/*
 * test_cuda_gemv_fp8.c - the E4M3-weight decode GEMV (frt_cuda_gemv_fp8,
 * src/kernels/cuda/gemv_fp8.cu) against its CPU twin frt_cpu_matmul_fp8 on
 * random data: x random bf16 in [-1, 1), weights random E4M3 codes (every
 * finite code, both signs, subnormals included), per-channel scales random
 * in [1e-3, 1e-1):
 *   - the twin itself against decode-then-multiply (frt_fp8_dequantize_rows
 *     and a plain dot product), on the CPU, no device needed;
 *   - shapes with in_dim a multiple of 16 from 16 to 12288 (odd row counts
 *     1, 7, 13, 1003; the qwen3 / llama 8B MLP and attention shapes), n =
 *     1..8, f32 and bf16 out, accumulate off and on: norm-wise
 *     ||gpu - cpu|| / ||cpu|| within 1e-4 (f32 out; fp32 sums in another
 *     order than the double reference) or 1e-2 (bf16 out);
 *   - batch invariance: each row of an n = 8 run is, bit for bit, the n = 1
 *     run of that row alone; two runs give the same bytes; nothing past
 *     y [n, out] is written (sentinel);
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before the device
 *     check (they also run without a GPU);
 * then times the 8B-class shapes in a CUDA graph over enough weight copies
 * to defeat the L2 and prints GB/s next to the FP8 HBM floor (printed, not
 * checked). Exits 77 (skipped) without a device.
 */
#include "frt_test.h"

#include "kernels/cpu/fp8.h"
#include "kernels/cpu/gemv_fp8.h"
#include "kernels/cpu/rng.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cuda/gemv_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#define TOL_F32 1e-4
#define TOL_BF16 1e-2
#define HBM_BYTES_PER_S 3.35e12 /* H100 SXM HBM3 (the H200: 4.8e12) */

static uint64_t g_rng = 20261126;

/* Random finite E4M3 codes (0x7F / 0xFF, the NaNs, redrawn). */
static uint8_t *codes_rand(size_t n)
{
    uint8_t *q = xzalloc(n);
    for (size_t i = 0; i < n; i++) {
        uint8_t c;
        do c = (uint8_t)(frt_rng_next(&g_rng) >> 56);
        while ((c & 0x7F) == 0x7F);
        q[i] = c;
    }
    return q;
}

static float *scales_rand(int out)
{
    float *s = xzalloc((size_t)out * sizeof(float));
    for (int i = 0; i < out; i++) s[i] = 1e-3f + 0.099f * frt_rng_uniform(&g_rng);
    return s;
}

/* The twin against decode-then-multiply. */
static void test_twin(void)
{
    const int n = 3, in = 48, out = 11;
    hmat x = hmat_rand(&g_rng, n, in, -1, 1);
    uint8_t *w = codes_rand((size_t)out * in);
    float *s = scales_rand(out), *wd = xzalloc((size_t)out * in * 4), *y = xzalloc((size_t)n * out * 4);
    float *ref = xzalloc((size_t)n * out * 4);
    float ones[1] = {1.0f};
    frt_fp8_dequantize_rows(wd, w, ones, 1, out, in);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < out; r++) {
            double d = 0;
            for (int k = 0; k < in; k++) d += (double)x.f[t * in + k] * wd[r * in + k];
            ref[t * out + r] = (float)d * s[r] + 1.0f;
            y[t * out + r] = 1.0f;
        }
    frt_cpu_matmul_fp8(y, x.f, w, s, n, in, out, 1);
    CHECK(!memcmp(y, ref, (size_t)n * out * 4));
    hmat_free(&x);
    free(w);
    free(s);
    free(wd);
    free(y);
    free(ref);
}

static void test_bad_args(void)
{
    void *p = (void *)(uintptr_t)4096, *p2 = (void *)(uintptr_t)(1u << 20), *p3 = (void *)(uintptr_t)(1u << 24);
    float *ps = (float *)(uintptr_t)(1u << 28);
    const frt_cuda_dtype F = FRT_CUDA_F32;
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, NULL, F, 0, p2, p3, ps, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, F, 0, p2, p3, ps, 0, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, F, 0, p2, p3, ps, 9, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, F, 0, p2, p3, ps, 1, 24, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, F, 0, p2, p3, ps, 1, 16, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, F, 0, (uint16_t *)((char *)p2 + 8), p3, ps, 1, 16, 8),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, F, 0, p2, p3, (float *)((char *)ps + 2), 1, 16, 8),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p, (frt_cuda_dtype)5, 0, p2, p3, ps, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8(NULL, p2, F, 0, p2, p3, ps, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT); /* y == x */
}

typedef struct shape_dev {
    int in, out;
    hmat x8;        /* [8, in] */
    uint8_t *w;     /* [out, in] */
    float *s;       /* [out] */
    dbuf dx, dw, ds;
} shape_dev;

/* One run: y [n, out] of odt from x rows 0..n-1 of dx (at row offset x0).
 * Returns the bytes of y (malloc'd). */
static void *run(shape_dev *sd, int n, int x0, frt_cuda_dtype odt, int acc, const float *y0, dbuf dy)
{
    const size_t ny = (size_t)n * sd->out, yb = ny * dsize(odt);
    dsentinel(dy);
    if (acc) dput_as(dy, y0, ny, odt);
    CHECK_OK(frt_cuda_gemv_fp8(g_cs, dy.p, odt, acc, (const uint16_t *)((char *)sd->dx.p + (size_t)x0 * sd->in * 2),
                               sd->dw.p, sd->ds.p, n, sd->in, sd->out));
    sync_st();
    void *b = xzalloc(yb);
    dget(dy, 0, b, yb);
    CHECK_MSG(untouched(dy, yb, 256), "in %d out %d n %d: wrote past y", sd->in, sd->out, n);
    return b;
}

static void check_case(shape_dev *sd, int n, frt_cuda_dtype odt, int acc, dbuf dy)
{
    const size_t ny = (size_t)n * sd->out;
    float *y0 = xzalloc(ny * 4), *ref = xzalloc(ny * 4), *got = xzalloc(ny * 4);
    for (size_t i = 0; i < ny; i++) {
        y0[i] = -1.0f + 2.0f * frt_rng_uniform(&g_rng);
        if (odt == FRT_CUDA_BF16) y0[i] = frt_bf16_to_f32(frt_f32_to_bf16(y0[i]));
    }
    memcpy(ref, y0, ny * 4);
    frt_cpu_matmul_fp8(ref, sd->x8.f, sd->w, sd->s, n, sd->in, sd->out, acc);
    void *b1 = run(sd, n, 0, odt, acc, y0, dy), *b2 = run(sd, n, 0, odt, acc, y0, dy);
    dget_as(dy, got, ny, odt);
    char name[128];
    snprintf(name, sizeof name, "gemv_fp8 n %d in %d out %d -> %s%s", n, sd->in, sd->out, dtn(odt), acc ? " acc" : "");
    report(name, frt_test_rel_err(got, ref, ny), odt == FRT_CUDA_BF16 ? TOL_BF16 : TOL_F32);
    CHECK_MSG(!memcmp(b1, b2, ny * dsize(odt)), "%s: two runs differ", name);
    if (n > 1 && !acc) { /* batch invariance: row t alone (n = 1 from x row t) == row t of the batch */
        int bad = 0;
        for (int t = 0; t < n; t++) {
            void *one = run(sd, 1, t, odt, 0, NULL, dy);
            bad += memcmp(one, (char *)b1 + (size_t)t * sd->out * dsize(odt), sd->out * dsize(odt)) != 0;
            free(one);
        }
        CHECK_MSG(bad == 0, "%s: %d rows differ from their n = 1 runs", name, bad);
    }
    free(b1);
    free(b2);
    free(y0);
    free(ref);
    free(got);
}

static void test_shape(int in, int out, const int *ns, int n_ns)
{
    shape_dev sd;
    memset(&sd, 0, sizeof sd);
    sd.in = in;
    sd.out = out;
    sd.x8 = hmat_rand(&g_rng, 8, in, -1, 1);
    sd.w = codes_rand((size_t)out * in);
    sd.s = scales_rand(out);
    sd.dx = dalloc((size_t)8 * in * 2);
    sd.dw = dalloc((size_t)out * in);
    sd.ds = dalloc((size_t)out * 4);
    dput(sd.dx, 0, sd.x8.b, (size_t)8 * in * 2);
    dput(sd.dw, 0, sd.w, (size_t)out * in);
    dput(sd.ds, 0, sd.s, (size_t)out * 4);
    dbuf dy = dalloc((size_t)8 * out * 4 + 256);
    for (int i = 0; i < n_ns; i++)
        for (int mode = 0; mode < 4; mode++)
            check_case(&sd, ns[i], (mode & 1) ? FRT_CUDA_BF16 : FRT_CUDA_F32, (mode & 2) != 0, dy);
    dfree(&dy);
    dfree(&sd.dx);
    dfree(&sd.dw);
    dfree(&sd.ds);
    hmat_free(&sd.x8);
    free(sd.w);
    free(sd.s);
}

/* ---- timing -------------------------------------------------------------- */

typedef struct timing {
    dbuf dx, dw, ds, dy;
    int n, in, out, copies;
} timing;

static int rec_timing(frt_stream *s, void *user)
{
    const timing *t = user;
    for (int c = 0; c < t->copies; c++)
        FRT_TEST_TRY_(frt_cuda_gemv_fp8(frt_stream_native(s), t->dy.p, FRT_CUDA_BF16, 0, t->dx.p,
                                        (const uint8_t *)t->dw.p + (size_t)c * t->out * t->in, t->ds.p, t->n,
                                        t->in, t->out));
    return 0;
}

static void time_shape(const char *tag, int n, int in, int out)
{
    const size_t wb = (size_t)out * in;
    timing t;
    memset(&t, 0, sizeof t);
    t.n = n, t.in = in, t.out = out, t.copies = (int)((200u << 20) / wb) + 1;
    t.dx = dalloc((size_t)n * in * 2);
    t.ds = dalloc((size_t)out * 4);
    t.dy = dalloc((size_t)n * out * 2);
    t.dw = dalloc(wb * (size_t)t.copies);
    must(frt_buffer_fill(t.dw.b, 0, wb * (size_t)t.copies, 0x38, g_st), "fill"); /* code 0x38: 1.0 */
    must(frt_buffer_fill(t.ds.b, 0, (size_t)out * 4, 0, g_st), "fill");
    must(frt_buffer_fill(t.dx.b, 0, (size_t)n * in * 2, 0, g_st), "fill");
    sync_st();
    double us = graph_us(tag, rec_timing, &t, t.copies);
    double floor_us = (double)(wb + (size_t)out * 4) / HBM_BYTES_PER_S * 1e6;
    printf("  time %-28s n %d: %8.2f us, %6.0f GB/s (FP8 HBM floor %.2f us, %.2f of it)\n", tag, n, us,
           (double)wb / us * 1e-3, floor_us, us > 0 ? floor_us / us : 0);
    dfree(&t.dx);
    dfree(&t.dw);
    dfree(&t.ds);
    dfree(&t.dy);
}

int main(void)
{
    test_twin();
    test_bad_args();
    frt_test_cuda_start();
    const int all[] = {1, 2, 3, 5, 8}, few[] = {1, 4, 8};
    test_shape(16, 1, all, 5);
    test_shape(48, 7, all, 5);
    test_shape(272, 13, all, 5);
    test_shape(1040, 1003, all, 5);
    test_shape(4096, 4096, few, 3);
    test_shape(4096, 14336, few, 3);
    test_shape(14336, 4096, few, 3);
    test_shape(12288, 4096, few, 3);
    time_shape("8B q_proj 4096->4096", 1, 4096, 4096);
    time_shape("8B gate/up 4096->14336", 1, 4096, 14336);
    time_shape("8B down 14336->4096", 1, 14336, 4096);
    time_shape("8B gate/up 4096->14336", 8, 4096, 14336);
    return frt_test_report();
}

#endif
