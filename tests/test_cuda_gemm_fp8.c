/*
 * test_cuda_gemm_fp8.c - the FP8 prefill GEMM and its activation quantizer
 * (docs/fp8.md "FP8 weights", "FP8 activations"):
 *   - frt_cuda_fp8_quantize_rows_dynamic (kernels/cuda/fp8.cu) bit for bit
 *     against frt_fp8_quantize_rows_dynamic on the bf16 rows widened to
 *     f32: codes and scales, on random rows over 30 binades, dims 8..14336,
 *     and the special rows: all zeros, a NaN, an infinity, a row of bf16
 *     subnormals (its max / 448 below FLT_MIN), a -0;
 *   - frt_cuda_gemm_fp8_run (kernels/cuda/gemm_fp8.cu) against the CPU
 *     reference, dequantize both operands (frt_fp8_dequantize_rows) and a
 *     double dot product, on random bf16 activations quantized by the kernel
 *     above and random E4M3 weight codes (every finite code) with random
 *     per-channel scales: small shapes and the 8B shapes (4096 -> 4096,
 *     4096 -> 14336, 14336 -> 4096) at 1, 2, 7, 17, 64, 255, 1024, 2048 rows
 *     (odd counts included), f32 and bf16 out; norm-wise
 *     ||gpu - ref|| / ||ref|| within 1e-3 (f32 out: the tensor cores' FP8
 *     products are exact, the sums fp32 in another order) or 1e-2 (bf16 out),
 *     checked on every row for the small shapes and on 8 sampled rows
 *     (first, last, 6 random) for the 8B ones (the reference costs
 *     rows x in x out on the CPU);
 *   - the same with the scales applied by frt's epilogue kernel instead of
 *     cuBLASLt (frt_cuda_gemm_fp8_set_scaling EPILOGUE, the fallback where
 *     cuBLASLt has no outer-vector algorithm; 7, 255, 2048 rows at the 8B
 *     shapes; bf16 out refused there), and which one AUTO picked, printed;
 *   - a row's bits do not depend on the rows beside it: the first rows of
 *     the 2048-row GEMM equal, bit for bit, the 1-, 17- and 1024-row GEMMs of
 *     the same rows (the plans share the shape's algorithm, gemm_fp8.h; the
 *     plans' shape_algo flags are printed); two runs give the same bytes;
 *   - frt_cuda_gemm_fp8_set_own_algo: 64-row plans with their own algorithm
 *     (shape_algo 0) within tolerance; the ids of both kinds printed;
 *   - frt_cuda_add_rmsnorm_quant (the residual add, the norm and the
 *     per-token quantizer in one launch) bit for bit against
 *     frt_cuda_add_rmsnorm(_fp8acc) then the quantizer, and its codes
 *     against the CPU quantizer of its bf16 out; rows past n untouched;
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before any device
 *     work (they also run without a GPU); running an unplanned shape is
 *     FRT_ERR_STATE;
 *   - the prefill product of block-wise (128 x 128) weights,
 *     frt_cuda_fp8_dequantize_b128_bf16 then the bf16 GEMM, against a
 *     double reference on random x, codes and block scales (partial blocks
 *     and the 8B shapes) within 4e-3 (the weights' bf16 rounding);
 * then prints the FP8 GEMM's TFLOP/s at 8192 x 4096 x 4096 next to the bf16
 * GEMM's (frt_cuda_gemm_run, the same shape, f32 out) and the quantizer's
 * time (informative, not checked). Exits 77 (skipped) without a device.
 */
#include "frt_test.h"

#include "kernels/cpu/fp8.h"
#include "kernels/cpu/rng.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#define TOL_F32 1e-3
#define TOL_BF16 1e-2
#define GEMM_WS (32u << 20)
#define SAMPLES 8

static uint64_t g_rng = 20261127;

/* Random bf16 bits over 2^-24 .. 2^6, both signs. */
static uint16_t bf16_rand(void)
{
    float e = -24.0f + 30.0f * frt_rng_uniform(&g_rng);
    float v = exp2f(e) * (frt_rng_uniform(&g_rng) < 0.5f ? -1.0f : 1.0f);
    return frt_f32_to_bf16(v);
}

/* ---- argument checks (no device needed) ---------------------------------- */

static void test_bad_args(void)
{
    uint8_t *q = (uint8_t *)(uintptr_t)4096;
    float *s = (float *)(uintptr_t)(1u << 20);
    uint16_t *x = (uint16_t *)(uintptr_t)(1u << 24);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, NULL, s, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, NULL, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, s, NULL, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, s, x, -1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, s, x, 1, 12), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, s, x, 1, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, s, x + 1, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q + 8, s, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_fp8_quantize_rows_dynamic(NULL, q, (float *)((char *)s + 2), x, 1, 16),
                 FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_gemm_fp8 *g8 = (frt_cuda_gemm_fp8 *)(uintptr_t)1;
    CHECK_STATUS(frt_cuda_gemm_fp8_create(NULL, &g8), FRT_ERR_INVALID_ARGUMENT);
    CHECK(g8 == NULL);
    CHECK_STATUS(frt_cuda_gemm_fp8_create(NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_plan(NULL, 1, 16, 16, FRT_CUDA_F32), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_set_scaling(NULL, FRT_CUDA_GEMM_FP8_SCALES_AUTO), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_run(NULL, NULL, s, FRT_CUDA_F32, q, s, q, s, 1, 16, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_cuda_gemm_fp8_plan_count(NULL) == 0);
    CHECK(frt_cuda_gemm_fp8_fingerprint(NULL) == 0);
    frt_cuda_gemm_fp8_destroy(NULL);
    /* the accumulators' GEMM and consumers: refused before any launch */
    const frt_cuda_dtype F = FRT_CUDA_F32, B = FRT_CUDA_BF16, BAD = (frt_cuda_dtype)7;
    CHECK_STATUS(frt_cuda_gemm_fp8_run_acc(NULL, NULL, s, F, q, q, 1, 16, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_mlp(NULL, NULL, q, s, x, x, s, q, s, q, s, q, 1, 16, 16),
                 FRT_ERR_INVALID_ARGUMENT);
    uint16_t *o = x;
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(NULL, o, s, s, BAD, s, s, s, NULL, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(NULL, o, s, s, F, s, s, s, NULL, 1, 18), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(NULL, o, (char *)s + 8, s, F, s, s, s, NULL, 1, 16),
                 FRT_ERR_INVALID_ARGUMENT); /* f32 accumulators: 16-byte aligned */
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(NULL, o + 1, s, s, B, s, s, s, NULL, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(NULL, q, s, s, s, BAD, s, s, s, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(NULL, q, s, s, s, F, s, s, s, 1, 49160), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(NULL, q, s, s, s, F, s, s, s, -1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(NULL, q, (float *)((char *)s + 2), s, s, F, s, s, s, 1, 16),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_rmsnorm_fp8acc(NULL, s, s, s, NULL, x, B, s, NULL, 1, 16, 1e-6f, 0),
                 FRT_ERR_INVALID_ARGUMENT);
}

/* Shape and pointer checks on a live handle (before any plan lookup). */
static void test_bad_shapes(frt_cuda_gemm_fp8 *g8, dbuf any)
{
    uint8_t *q = any.p;
    float *s = any.p;
    const frt_cuda_dtype F = FRT_CUDA_F32;
    CHECK_STATUS(frt_cuda_gemm_fp8_plan(g8, 0, 16, 16, F), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_plan(g8, 1, 24, 16, F), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_plan(g8, 1, 16, 8, F), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_plan(g8, 1, 16, 16, (frt_cuda_dtype)7), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_run(g8, g_cs, s, F, q, s, q, s, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_run(g8, g_cs, s, F, q + 4, s, q, s, 1, 16, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_run(g8, g_cs, s, F, q, s + 1, q, s, 1, 16, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_run(g8, g_cs, s, F, q, s, q, s, 3, 32, 48), FRT_ERR_STATE); /* no plan */
    CHECK_STATUS(frt_cuda_gemm_fp8_plan_get(g8, -1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_set_scaling(g8, (frt_cuda_gemm_fp8_scaling)4), FRT_ERR_INVALID_ARGUMENT);
}

/* ---- the quantizer ------------------------------------------------------- */

/* Quantizes rows x [rows, dim] bf16 on the device and on the CPU; 1 when
 * codes and scales are bit-identical. */
static int quantize_same(const uint16_t *xb, int rows, int dim)
{
    const size_t n = (size_t)rows * dim;
    float *xf = xzalloc(n * 4), *s_cpu = xzalloc((size_t)rows * 4), *s_gpu = xzalloc((size_t)rows * 4);
    uint8_t *q_cpu = xzalloc(n), *q_gpu = xzalloc(n);
    for (size_t i = 0; i < n; i++) xf[i] = frt_bf16_to_f32(xb[i]);
    frt_fp8_quantize_rows_dynamic(q_cpu, s_cpu, xf, rows, dim);
    dbuf dx = dalloc(n * 2), dq = dalloc(n), ds = dalloc((size_t)rows * 4);
    dput(dx, 0, xb, n * 2);
    CHECK_OK(frt_cuda_fp8_quantize_rows_dynamic(g_cs, dq.p, ds.p, dx.p, rows, dim));
    sync_st();
    dget(dq, 0, q_gpu, n);
    dget(ds, 0, s_gpu, (size_t)rows * 4);
    int same = !memcmp(q_cpu, q_gpu, n) && !memcmp(s_cpu, s_gpu, (size_t)rows * 4);
    dfree(&dx);
    dfree(&dq);
    dfree(&ds);
    free(xf);
    free(s_cpu);
    free(s_gpu);
    free(q_cpu);
    free(q_gpu);
    return same;
}

static void test_quantizer(void)
{
    static const int shapes[][2] = {{1, 8}, {3, 16}, {37, 264}, {17, 4096}, {5, 14336}, {300, 1024}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int rows = shapes[k][0], dim = shapes[k][1];
        uint16_t *xb = xzalloc((size_t)rows * dim * 2);
        for (size_t i = 0; i < (size_t)rows * dim; i++) xb[i] = bf16_rand();
        char name[96];
        snprintf(name, sizeof name, "quantize_rows_dynamic %d x %d, 30 binades", rows, dim);
        report_flag(name, quantize_same(xb, rows, dim));
        free(xb);
    }
    /* Special rows: zeros (scale 1), a NaN (skipped by the max, coded 0x7F),
     * +inf (scale FLT_MAX / 448), tiny values (max / 448 < FLT_MIN: scale
     * FLT_MIN), a -0 among normal values. */
    const int dim = 64, rows = 5;
    uint16_t xb[5 * 64];
    for (int i = 0; i < rows * dim; i++) xb[i] = bf16_rand();
    for (int i = 0; i < dim; i++) xb[i] = 0;
    xb[dim + 7] = 0x7FC0;                                                           /* NaN */
    xb[2 * dim + 3] = 0x7F80;                                                       /* +inf */
    for (int i = 0; i < dim; i++) xb[3 * dim + i] = (uint16_t)(0x0001 + (i % 90)); /* bf16 subnormals */
    xb[4 * dim + 5] = 0x8000;                                                       /* -0 */
    report_flag("quantize_rows_dynamic special rows (0, NaN, inf, tiny, -0)", quantize_same(xb, rows, dim));
}

/* ---- the GEMM ------------------------------------------------------------ */

typedef struct gcase {
    int in, out, nmax;
    uint8_t *xq, *w; /* host copies: [nmax, in], [out, in] */
    float *xs, *ws;  /* [nmax], [out] */
    float *xd, *wd;  /* dequantized: [nmax, in], [out, in] */
    dbuf dxq, dxs, dw, dws, dy;
} gcase;

/* Random activations quantized by the device quantizer (also copied back),
 * random finite weight codes and scales. */
static void gcase_make(gcase *c, int in, int out, int nmax)
{
    memset(c, 0, sizeof *c);
    c->in = in, c->out = out, c->nmax = nmax;
    const size_t nx = (size_t)nmax * in, nw = (size_t)out * in;
    uint16_t *xb = xzalloc(nx * 2);
    for (size_t i = 0; i < nx; i++) xb[i] = frt_f32_to_bf16(-2.0f + 4.0f * frt_rng_uniform(&g_rng));
    dbuf dx = dalloc(nx * 2);
    c->dxq = dalloc(nx), c->dxs = dalloc((size_t)nmax * 4), c->dw = dalloc(nw), c->dws = dalloc((size_t)out * 4);
    c->dy = dalloc((size_t)nmax * out * 4 + 256);
    dput(dx, 0, xb, nx * 2);
    must(frt_cuda_fp8_quantize_rows_dynamic(g_cs, c->dxq.p, c->dxs.p, dx.p, nmax, in), "quantize");
    sync_st();
    dfree(&dx);
    free(xb);
    c->xq = xzalloc(nx), c->xs = xzalloc((size_t)nmax * 4);
    dget(c->dxq, 0, c->xq, nx);
    dget(c->dxs, 0, c->xs, (size_t)nmax * 4);
    c->w = xzalloc(nw), c->ws = xzalloc((size_t)out * 4);
    for (size_t i = 0; i < nw; i++) {
        uint8_t q;
        do q = (uint8_t)(frt_rng_next(&g_rng) >> 56);
        while ((q & 0x7F) == 0x7F);
        c->w[i] = q;
    }
    for (int o = 0; o < out; o++) c->ws[o] = 1e-4f + 1e-2f * frt_rng_uniform(&g_rng);
    dput(c->dw, 0, c->w, nw);
    dput(c->dws, 0, c->ws, (size_t)out * 4);
    const float one = 1.0f;
    c->xd = xzalloc(nx * 4), c->wd = xzalloc(nw * 4);
    frt_fp8_dequantize_rows(c->xd, c->xq, &one, 1, nmax, in); /* decode only: the scales multiply the sums */
    frt_fp8_dequantize_rows(c->wd, c->w, &one, 1, out, in);
}

static void gcase_free(gcase *c)
{
    dbuf *d[] = {&c->dxq, &c->dxs, &c->dw, &c->dws, &c->dy};
    for (size_t i = 0; i < 5; i++) dfree(d[i]);
    free(c->xq), free(c->w), free(c->xs), free(c->ws), free(c->xd), free(c->wd);
}

/* The reference row t: (sum_k decode(xq) decode(w)) * s_x[t] * s_w[o]. */
static void ref_row(const gcase *c, int t, float *y)
{
    const float *xr = c->xd + (size_t)t * c->in;
    for (int o = 0; o < c->out; o++) {
        const float *wr = c->wd + (size_t)o * c->in;
        double d = 0;
        for (int k = 0; k < c->in; k++) d += (double)xr[k] * wr[k];
        y[o] = (float)(d * c->xs[t] * c->ws[o]);
    }
}

/* Runs n rows into c->dy (dtype dt) and returns y's bytes (malloc'd). */
static void *run_gemm(frt_cuda_gemm_fp8 *g8, gcase *c, int n, frt_cuda_dtype dt)
{
    const size_t yb = (size_t)n * c->out * dsize(dt);
    dsentinel(c->dy);
    CHECK_OK(frt_cuda_gemm_fp8_run(g8, g_cs, c->dy.p, dt, c->dxq.p, c->dxs.p, c->dw.p, c->dws.p, n, c->in, c->out));
    sync_st();
    void *b = xzalloc(yb);
    dget(c->dy, 0, b, yb);
    CHECK_MSG(untouched(c->dy, yb, 256), "in %d out %d n %d: wrote past y", c->in, c->out, n);
    return b;
}

/* The rows checked: all of them (n <= 64 and a small shape), else the
 * first, the last and 6 random ones. */
static int rows_checked(const gcase *c, int n, int *rows)
{
    if (n <= SAMPLES || (size_t)n * c->in * c->out <= (64u << 20)) {
        for (int t = 0; t < n; t++) rows[t] = t;
        return n;
    }
    rows[0] = 0, rows[1] = n - 1;
    for (int i = 2; i < SAMPLES; i++) rows[i] = (int)(frt_rng_next(&g_rng) % (uint64_t)n);
    return SAMPLES;
}

/* The plan info of (n, in, out, dt) into *pi; 0 when found. */
static int info_of(const frt_cuda_gemm_fp8 *g8, int n, int in, int out, frt_cuda_dtype dt,
                   frt_cuda_gemm_fp8_plan_info *pi)
{
    for (int i = 0; i < frt_cuda_gemm_fp8_plan_count(g8); i++)
        if (frt_cuda_gemm_fp8_plan_get(g8, i, pi) == 0 && pi->n == n && pi->in_dim == in && pi->out_dim == out &&
            pi->out_dtype == dt)
            return 0;
    return -1;
}

static void check_gemm(frt_cuda_gemm_fp8 *g8, gcase *c, int n, frt_cuda_dtype dt)
{
    int rc = frt_cuda_gemm_fp8_plan(g8, n, c->in, c->out, dt);
    if (rc == FRT_ERR_UNSUPPORTED && dt == FRT_CUDA_BF16) { /* documented: bf16 out needs the library's scales */
        printf("  gemm_fp8 n %d in %d out %d -> bf16: not supported here (%s)\n", n, c->in, c->out, frt_last_error());
        return;
    }
    must(rc, "plan");
    void *b1 = run_gemm(g8, c, n, dt), *b2 = run_gemm(g8, c, n, dt);
    int *rows = xzalloc((size_t)n * sizeof(int));
    int nr = rows_checked(c, n, rows);
    float *got = xzalloc((size_t)nr * c->out * 4), *ref = xzalloc((size_t)nr * c->out * 4);
    for (int i = 0; i < nr; i++) {
        ref_row(c, rows[i], ref + (size_t)i * c->out);
        for (int o = 0; o < c->out; o++) {
            size_t at = (size_t)rows[i] * c->out + o;
            got[(size_t)i * c->out + o] =
                dt == FRT_CUDA_BF16 ? frt_bf16_to_f32(((uint16_t *)b1)[at]) : ((float *)b1)[at];
        }
    }
    char name[128];
    snprintf(name, sizeof name, "gemm_fp8 n %d in %d out %d -> %s (%d rows checked)", n, c->in, c->out, dtn(dt), nr);
    report(name, frt_test_rel_err(got, ref, (size_t)nr * c->out), dt == FRT_CUDA_BF16 ? TOL_BF16 : TOL_F32);
    CHECK_MSG(!memcmp(b1, b2, (size_t)n * c->out * dsize(dt)), "%s: two runs differ", name);
    free(b1), free(b2), free(rows), free(got), free(ref);
}

/* The shape_algo flag of plan (n, in, out, f32). */
static int shape_algo_of(const frt_cuda_gemm_fp8 *g8, int n, int in, int out)
{
    frt_cuda_gemm_fp8_plan_info pi;
    return info_of(g8, n, in, out, FRT_CUDA_F32, &pi) == 0 ? pi.shape_algo : -1;
}

/* The first rows of the nmax-row GEMM == the 1-, 17- and 1024-row GEMMs. */
static void check_row_independence(frt_cuda_gemm_fp8 *g8, gcase *c)
{
    void *big = run_gemm(g8, c, c->nmax, FRT_CUDA_F32);
    const int ns[3] = {1, 17, 1024};
    for (int i = 0; i < 3; i++) {
        if (ns[i] >= c->nmax) continue;
        must(frt_cuda_gemm_fp8_plan(g8, ns[i], c->in, c->out, FRT_CUDA_F32), "plan");
        void *small = run_gemm(g8, c, ns[i], FRT_CUDA_F32);
        char name[128];
        snprintf(name, sizeof name, "rows 0..%d of n %d == n %d (in %d out %d; shape_algo %d / %d)", ns[i] - 1,
                 c->nmax, ns[i], c->in, c->out, shape_algo_of(g8, c->nmax, c->in, c->out),
                 shape_algo_of(g8, ns[i], c->in, c->out));
        report_same(name, big, small, (size_t)ns[i] * c->out * 4);
        free(small);
    }
    free(big);
}

/* frt_cuda_gemm_fp8_set_own_algo: a fresh handle's 64-row plans at the
 * 8B shapes take their own heuristic choice (shape_algo 0) and stay within
 * the reference's tolerance, deterministic (check_gemm); set back to 0, a
 * new plan is made as before (its shape_algo and ids printed beside the
 * own plan's); bad values refused. */
static void test_own_algo(frt_cuda_gemm *g)
{
    frt_cuda_gemm_fp8 *go = NULL;
    must(frt_cuda_gemm_fp8_create(g, &go), "gemm_fp8 create");
    CHECK_STATUS(frt_cuda_gemm_fp8_set_own_algo(go, 2), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_set_own_algo(NULL, 1), FRT_ERR_INVALID_ARGUMENT);
    static const int shapes[][2] = {{4096, 6144}, {4096, 4096}, {14336, 4096}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        gcase c;
        gcase_make(&c, shapes[k][0], shapes[k][1], 64);
        must(frt_cuda_gemm_fp8_set_own_algo(go, 1), "own algo");
        check_gemm(go, &c, 64, FRT_CUDA_F32);
        char name[128];
        snprintf(name, sizeof name, "own algo: n 64 in %d out %d plan has its own (shape_algo 0)", c.in, c.out);
        report_flag(name, shape_algo_of(go, 64, c.in, c.out) == 0);
        must(frt_cuda_gemm_fp8_set_own_algo(go, 0), "own algo");
        check_gemm(go, &c, 63, FRT_CUDA_F32);
        frt_cuda_gemm_fp8_plan_info a, b;
        if (info_of(go, 64, c.in, c.out, FRT_CUDA_F32, &a) == 0 && info_of(go, 63, c.in, c.out, FRT_CUDA_F32, &b) == 0)
            printf("  own algo: in %d out %d: n 64 algo %d tile %d splitk %d; own off, n 63 (shape_algo %d) algo %d "
                   "tile %d splitk %d\n",
                   c.in, c.out, a.algo_id, a.tile_id, a.splitk_num, b.shape_algo, b.algo_id, b.tile_id, b.splitk_num);
        gcase_free(&c);
    }
    frt_cuda_gemm_fp8_destroy(go);
}

/* full: every row count at the 8B shapes; else 7, 255 and 2048 rows. */
static void test_gemm(frt_cuda_gemm_fp8 *g8, int full)
{
    static const int small[][2] = {{16, 16}, {64, 32}, {272, 48}, {1040, 1008}};
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        gcase c;
        gcase_make(&c, small[k][0], small[k][1], 37);
        const int ns[] = {1, 2, 7, 16, 37};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            check_gemm(g8, &c, ns[i], FRT_CUDA_F32);
            check_gemm(g8, &c, ns[i], FRT_CUDA_BF16);
        }
        gcase_free(&c);
    }
    static const int big[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}};
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        gcase c;
        gcase_make(&c, big[k][0], big[k][1], 2048);
        const int ns[] = {1, 2, 7, 17, 64, 255, 1024, 2048}, few[] = {7, 255, 2048};
        const int *use = full ? ns : few, nn = full ? 8 : 3;
        for (int i = 0; i < nn; i++) check_gemm(g8, &c, use[i], FRT_CUDA_F32);
        check_gemm(g8, &c, 255, FRT_CUDA_BF16);
        frt_cuda_gemm_fp8_plan_info pi;
        if (info_of(g8, 2048, c.in, c.out, FRT_CUDA_F32, &pi) == 0)
            printf("  plan n 2048 in %d out %d: scales applied by %s, algo %d tile %d stages %d splitk %d\n", c.in,
                   c.out, pi.scales_in_library ? "cuBLASLt (OUTER_VEC_32F)" : "frt's epilogue", pi.algo_id,
                   pi.tile_id, pi.stages_id, pi.splitk_num);
        check_row_independence(g8, &c);
        gcase_free(&c);
    }
}

/* ---- the unscaled accumulator and its consumers --------------------------- */

/* (acc * s_x[t]) * s_w[o] in f32, the epilogue's two roundings. */
static void epilogue_host(float *y, const float *acc, const float *sx, const float *sw, int n, int out)
{
    for (int t = 0; t < n; t++)
        for (int o = 0; o < out; o++) {
            volatile float a = acc[(size_t)t * out + o] * sx[t];
            y[(size_t)t * out + o] = a * sw[o];
        }
}

/* frt_cuda_gemm_fp8_run_acc on an epilogue-scaled plan (ge): its output
 * scaled on the host as the epilogue scales it == frt_cuda_gemm_fp8_run's
 * output, bit for bit; refused (FRT_ERR_STATE) on a plan whose scales are
 * the library's (g8) and without a plan. */
static void test_run_acc(frt_cuda_gemm_fp8 *ge, frt_cuda_gemm_fp8 *g8, int in, int out, int n)
{
    gcase c;
    gcase_make(&c, in, out, n);
    must(frt_cuda_gemm_fp8_plan(ge, n, in, out, FRT_CUDA_F32), "plan");
    float *y = run_gemm(ge, &c, n, FRT_CUDA_F32);
    const size_t ny = (size_t)n * out;
    CHECK_OK(frt_cuda_gemm_fp8_run_acc(ge, g_cs, c.dy.p, FRT_CUDA_F32, c.dxq.p, c.dw.p, n, in, out));
    sync_st();
    float *acc = xzalloc(ny * 4), *scaled = xzalloc(ny * 4);
    dget(c.dy, 0, acc, ny * 4);
    epilogue_host(scaled, acc, c.xs, c.ws, n, out);
    char name[128];
    snprintf(name, sizeof name, "run_acc n %d in %d out %d, scaled as the epilogue == run (epilogue plan)", n, in, out);
    report_same(name, scaled, y, ny * 4);
    if (frt_cuda_gemm_fp8_plan(g8, n, in, out, FRT_CUDA_F32) == 0) {
        frt_cuda_gemm_fp8_plan_info pi;
        if (info_of(g8, n, in, out, FRT_CUDA_F32, &pi) == 0 && pi.scales_in_library)
            CHECK_STATUS(frt_cuda_gemm_fp8_run_acc(g8, g_cs, c.dy.p, FRT_CUDA_F32, c.dxq.p, c.dw.p, n, in, out),
                         FRT_ERR_STATE);
    }
    CHECK_STATUS(frt_cuda_gemm_fp8_run_acc(ge, g_cs, c.dy.p, FRT_CUDA_F32, c.dxq.p, c.dw.p, n + 1, in, out), FRT_ERR_STATE);
    CHECK_STATUS(frt_cuda_gemm_fp8_run_acc(ge, g_cs, NULL, FRT_CUDA_F32, c.dxq.p, c.dw.p, n, in, out),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_fp8_run_acc(ge, g_cs, c.dy.p, FRT_CUDA_F32, c.dxq.p, c.dw.p, n, in, out - 8),
                 FRT_ERR_INVALID_ARGUMENT);
    free(y), free(acc), free(scaled);
    gcase_free(&c);
}

/* A plan of FRT_CUDA_GEMM_FP8_SCALES_NONE (g0: a handle set to it), bf16
 * out: the accumulators through run_acc, widened and scaled on the host,
 * against the double reference (the bf16 bound); frt_cuda_gemm_fp8_run
 * refuses the plan; two runs give the same bits. */
static void test_run_acc_none(frt_cuda_gemm_fp8 *g0, int in, int out, int n)
{
    gcase c;
    gcase_make(&c, in, out, n);
    must(frt_cuda_gemm_fp8_plan(g0, n, in, out, FRT_CUDA_BF16), "plan none");
    frt_cuda_gemm_fp8_plan_info pi;
    CHECK(info_of(g0, n, in, out, FRT_CUDA_BF16, &pi) == 0 && pi.scales_none && !pi.scales_in_library);
    const size_t ny = (size_t)n * out;
    uint16_t *b1 = xzalloc(ny * 2), *b2 = xzalloc(ny * 2);
    CHECK_OK(frt_cuda_gemm_fp8_run_acc(g0, g_cs, c.dy.p, FRT_CUDA_BF16, c.dxq.p, c.dw.p, n, in, out));
    sync_st();
    dget(c.dy, 0, b1, ny * 2);
    CHECK_OK(frt_cuda_gemm_fp8_run_acc(g0, g_cs, c.dy.p, FRT_CUDA_BF16, c.dxq.p, c.dw.p, n, in, out));
    sync_st();
    dget(c.dy, 0, b2, ny * 2);
    int rows[SAMPLES], nr = n <= SAMPLES ? n : SAMPLES;
    for (int i = 0; i < nr; i++) rows[i] = n <= SAMPLES ? i : i == 0 ? 0 : i == 1 ? n - 1 : (int)(frt_rng_next(&g_rng) % (uint64_t)n);
    float *got = xzalloc((size_t)nr * out * 4), *ref = xzalloc((size_t)nr * out * 4);
    for (int i = 0; i < nr; i++) {
        ref_row(&c, rows[i], ref + (size_t)i * out);
        for (int o = 0; o < out; o++) {
            volatile float a = frt_bf16_to_f32(b1[(size_t)rows[i] * out + o]) * c.xs[rows[i]];
            got[(size_t)i * out + o] = a * c.ws[o];
        }
    }
    char name[128];
    snprintf(name, sizeof name, "run_acc bf16 (scales NONE) n %d in %d out %d, scaled on the host", n, in, out);
    report(name, frt_test_rel_err(got, ref, (size_t)nr * out), TOL_BF16);
    CHECK_MSG(!memcmp(b1, b2, ny * 2), "%s: two runs differ", name);
    CHECK_STATUS(frt_cuda_gemm_fp8_run(g0, g_cs, c.dy.p, FRT_CUDA_BF16, c.dxq.p, c.dxs.p, c.dw.p, c.dws.p, n, in, out),
                 FRT_ERR_STATE);
    free(b1), free(b2), free(got), free(ref);
    gcase_free(&c);
}

/* Random f32 over a few binades, both signs. */
static void frand_fill(float *v, size_t n, float lo_exp, float span)
{
    for (size_t i = 0; i < n; i++) {
        float e = lo_exp + span * frt_rng_uniform(&g_rng);
        v[i] = exp2f(e) * (frt_rng_uniform(&g_rng) < 0.5f ? -1.0f : 1.0f);
    }
}

/* frt_cuda_swiglu_fp8acc(acc) == frt_cuda_swiglu(f32 -> bf16) of the
 * accumulators scaled as the epilogue scales them, bit for bit, on random
 * accumulators and scales (n of max_n rows valid through d_n); and its
 * refusals. */
static void test_swiglu_fp8acc(int max_n, int n, int I, frt_cuda_dtype adt)
{
    const size_t ne = (size_t)max_n * I, ab = ne * (adt == FRT_CUDA_BF16 ? 2 : 4);
    float *g = xzalloc(ne * 4), *u = xzalloc(ne * 4), *sx = xzalloc((size_t)max_n * 4);
    float *sg = xzalloc((size_t)I * 4), *su = xzalloc((size_t)I * 4), *gs = xzalloc(ne * 4), *us = xzalloc(ne * 4);
    frand_fill(g, ne, -4, 12), frand_fill(u, ne, -4, 12);
    uint16_t *gb = xzalloc(ne * 2), *ub = xzalloc(ne * 2);
    if (adt == FRT_CUDA_BF16) /* bf16 accumulators: the host's copies widened from them */
        for (size_t i = 0; i < ne; i++) {
            gb[i] = frt_f32_to_bf16(g[i]), ub[i] = frt_f32_to_bf16(u[i]);
            g[i] = frt_bf16_to_f32(gb[i]), u[i] = frt_bf16_to_f32(ub[i]);
        }
    for (int t = 0; t < max_n; t++) sx[t] = exp2f(-8.0f + 4.0f * frt_rng_uniform(&g_rng));
    for (int i = 0; i < I; i++) sg[i] = 1e-4f + 1e-2f * frt_rng_uniform(&g_rng), su[i] = 1e-4f + 1e-2f * frt_rng_uniform(&g_rng);
    epilogue_host(gs, g, sx, sg, max_n, I);
    epilogue_host(us, u, sx, su, max_n, I);
    dbuf dg = dalloc(ne * 4), du = dalloc(ne * 4), dsx = dalloc((size_t)max_n * 4), dsg = dalloc((size_t)I * 4);
    dbuf dsu = dalloc((size_t)I * 4), dgs = dalloc(ne * 4), dus = dalloc(ne * 4), dn = dalloc(4);
    dbuf o1 = dalloc(ne * 2), o2 = dalloc(ne * 2);
    if (adt == FRT_CUDA_BF16)
        dput(dg, 0, gb, ab), dput(du, 0, ub, ab);
    else
        dput(dg, 0, g, ab), dput(du, 0, u, ab);
    dput(dsx, 0, sx, (size_t)max_n * 4);
    dput(dsg, 0, sg, (size_t)I * 4), dput(dsu, 0, su, (size_t)I * 4), dput(dgs, 0, gs, ne * 4), dput(dus, 0, us, ne * 4);
    const int32_t nn = n;
    dput(dn, 0, &nn, 4);
    must(frt_buffer_fill(o1.b, 0, ne * 2, 0x5A, g_st), "fill");
    must(frt_buffer_fill(o2.b, 0, ne * 2, 0x5A, g_st), "fill");
    CHECK_OK(frt_cuda_swiglu_fp8acc(g_cs, o1.p, dg.p, du.p, adt, dsx.p, dsg.p, dsu.p, dn.p, max_n, I));
    CHECK_OK(frt_cuda_swiglu(g_cs, o2.p, FRT_CUDA_BF16, dgs.p, dus.p, FRT_CUDA_F32, dn.p, max_n, I));
    sync_st();
    uint16_t *b1 = xzalloc(ne * 2), *b2 = xzalloc(ne * 2);
    dget(o1, 0, b1, ne * 2), dget(o2, 0, b2, ne * 2);
    char name[128];
    snprintf(name, sizeof name, "swiglu_fp8acc %s %d of %d rows x %d == epilogue + swiglu (rows past n untouched)",
             dtn(adt), n, max_n, I);
    report_same(name, b1, b2, ne * 2);
    /* the fused quantize: every row, its scale written over its x_scale (in place) */
    CHECK_OK(frt_cuda_swiglu_fp8acc(g_cs, o1.p, dg.p, du.p, adt, dsx.p, dsg.p, dsu.p, NULL, max_n, I));
    dbuf q1 = dalloc(ne), q2 = dalloc(ne), s2 = dalloc((size_t)max_n * 4), sxi = dalloc((size_t)max_n * 4);
    dput(sxi, 0, sx, (size_t)max_n * 4);
    CHECK_OK(frt_cuda_fp8_quantize_rows_dynamic(g_cs, q2.p, s2.p, o1.p, max_n, I));
    CHECK_OK(frt_cuda_swiglu_fp8acc_quantize(g_cs, q1.p, sxi.p, dg.p, du.p, adt, sxi.p, dsg.p, dsu.p, max_n, I));
    sync_st();
    uint8_t *c1 = xzalloc(ne), *c2 = xzalloc(ne);
    float *f1 = xzalloc((size_t)max_n * 4), *f2 = xzalloc((size_t)max_n * 4);
    dget(q1, 0, c1, ne), dget(q2, 0, c2, ne), dget(sxi, 0, f1, (size_t)max_n * 4), dget(s2, 0, f2, (size_t)max_n * 4);
    snprintf(name, sizeof name, "swiglu_fp8acc_quantize %s %d x %d: codes == swiglu_fp8acc + quantize_rows_dynamic",
             dtn(adt), max_n, I);
    report_same(name, c1, c2, ne);
    snprintf(name, sizeof name, "swiglu_fp8acc_quantize %s %d x %d: scales (in place over x_scale) == the same",
             dtn(adt), max_n, I);
    report_same(name, f1, f2, (size_t)max_n * 4);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(g_cs, q1.p, sxi.p, dg.p, du.p, adt, sxi.p, dsg.p, dsu.p, max_n, I - 4),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(g_cs, q1.p, sxi.p, dg.p, du.p, adt, NULL, dsg.p, dsu.p, max_n, I),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc_quantize(g_cs, (uint8_t *)q1.p + 8, sxi.p, dg.p, du.p, adt, sxi.p, dsg.p, dsu.p,
                                                 max_n, I),
                 FRT_ERR_INVALID_ARGUMENT);
    dfree(&q1), dfree(&q2), dfree(&s2), dfree(&sxi);
    free(c1), free(c2), free(f1), free(f2);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(g_cs, o1.p, dg.p, du.p, adt, NULL, dsg.p, dsu.p, dn.p, max_n, I),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(g_cs, o1.p, dg.p, du.p, adt, dsx.p, dsg.p, dsu.p, dn.p, max_n, I - 2),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_swiglu_fp8acc(g_cs, o1.p, (char *)dg.p + 4, du.p, adt, dsx.p, dsg.p, dsu.p, dn.p, max_n, I),
                 FRT_ERR_INVALID_ARGUMENT);
    dbuf *d[] = {&dg, &du, &dsx, &dsg, &dsu, &dgs, &dus, &dn, &o1, &o2};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) dfree(d[i]);
    free(g), free(u), free(sx), free(sg), free(su), free(gs), free(us), free(b1), free(b2), free(gb), free(ub);
}

/* frt_cuda_add_rmsnorm_fp8acc(acc) == frt_cuda_add_rmsnorm of the
 * accumulator scaled as the epilogue scales it: the residual and the
 * normed output bit for bit (dim 4096: the vector path; 1001: groups of
 * one; 9000: the loop kernel). */
static void test_add_rmsnorm_fp8acc(int n, int dim)
{
    const size_t ne = (size_t)n * dim;
    float *acc = xzalloc(ne * 4), *res = xzalloc(ne * 4), *sx = xzalloc((size_t)n * 4), *sw = xzalloc((size_t)dim * 4);
    float *w = xzalloc((size_t)dim * 4), *d = xzalloc(ne * 4);
    frand_fill(acc, ne, -2, 10), frand_fill(res, ne, -6, 8), frand_fill(w, (size_t)dim, -1, 2);
    for (int t = 0; t < n; t++) sx[t] = exp2f(-8.0f + 4.0f * frt_rng_uniform(&g_rng));
    for (int i = 0; i < dim; i++) sw[i] = 1e-4f + 1e-2f * frt_rng_uniform(&g_rng);
    epilogue_host(d, acc, sx, sw, n, dim);
    dbuf dacc = dalloc(ne * 4), dd = dalloc(ne * 4), r1 = dalloc(ne * 4), r2 = dalloc(ne * 4);
    dbuf dsx = dalloc((size_t)n * 4), dsw = dalloc((size_t)dim * 4), dw = dalloc((size_t)dim * 4);
    dbuf o1 = dalloc(ne * 2), o2 = dalloc(ne * 2);
    dput(dacc, 0, acc, ne * 4), dput(dd, 0, d, ne * 4), dput(r1, 0, res, ne * 4), dput(r2, 0, res, ne * 4);
    dput(dsx, 0, sx, (size_t)n * 4), dput(dsw, 0, sw, (size_t)dim * 4), dput(dw, 0, w, (size_t)dim * 4);
    CHECK_OK(frt_cuda_add_rmsnorm_fp8acc(g_cs, r1.p, dacc.p, dsx.p, dsw.p, o1.p, FRT_CUDA_BF16, dw.p, NULL, n, dim,
                                         1e-6f, 0));
    CHECK_OK(frt_cuda_add_rmsnorm(g_cs, r2.p, dd.p, FRT_CUDA_F32, o2.p, FRT_CUDA_BF16, dw.p, NULL, n, dim, 1e-6f, 0));
    sync_st();
    float *h1 = xzalloc(ne * 4), *h2 = xzalloc(ne * 4);
    uint16_t *b1 = xzalloc(ne * 2), *b2 = xzalloc(ne * 2);
    dget(r1, 0, h1, ne * 4), dget(r2, 0, h2, ne * 4), dget(o1, 0, b1, ne * 2), dget(o2, 0, b2, ne * 2);
    char name[128];
    snprintf(name, sizeof name, "add_rmsnorm_fp8acc %d x %d: residual == epilogue + add_rmsnorm", n, dim);
    report_same(name, h1, h2, ne * 4);
    snprintf(name, sizeof name, "add_rmsnorm_fp8acc %d x %d: normed bf16 == epilogue + add_rmsnorm", n, dim);
    report_same(name, b1, b2, ne * 2);
    CHECK_STATUS(frt_cuda_add_rmsnorm_fp8acc(g_cs, r1.p, dacc.p, NULL, dsw.p, o1.p, FRT_CUDA_BF16, dw.p, NULL, n, dim,
                                             1e-6f, 0),
                 FRT_ERR_INVALID_ARGUMENT);
    dbuf *dl[] = {&dacc, &dd, &r1, &r2, &dsx, &dsw, &dw, &o1, &o2};
    for (size_t i = 0; i < sizeof dl / sizeof dl[0]; i++) dfree(dl[i]);
    free(acc), free(res), free(sx), free(sw), free(w), free(d), free(h1), free(h2), free(b1), free(b2);
}

/* frt_cuda_add_rmsnorm_quant == frt_cuda_add_rmsnorm(_fp8acc) to bf16 then
 * frt_cuda_fp8_quantize_rows_dynamic, bit for bit (residual, out, codes,
 * scales) on the n valid rows of max_n (d_n); rows past n: zero codes and
 * scale 1, resid and out untouched (filled with 0x5A before); in place
 * (q_scale == x_scale) and with out NULL the same bits; the codes also against the CPU quantizer on
 * the bf16 out widened to f32; then its refusals. acc: delta is an FP8
 * accumulator with its scales. Dims: 4096 (the vector path), 1001 (groups
 * of one; the GPU quantizer refuses a dim that is not a multiple of 8, so
 * there the CPU quantizer is the reference), 20000 (the strided loop). */
static void test_add_rmsnorm_quant(int max_n, int n, int dim, int acc)
{
    const size_t ne = (size_t)max_n * dim;
    float *dl = xzalloc(ne * 4), *res = xzalloc(ne * 4), *sx = xzalloc((size_t)max_n * 4);
    float *sw = xzalloc((size_t)dim * 4), *w = xzalloc((size_t)dim * 4);
    frand_fill(dl, ne, acc ? -2 : -6, acc ? 10 : 8), frand_fill(res, ne, -6, 8), frand_fill(w, (size_t)dim, -1, 2);
    for (int t = 0; t < max_n; t++) sx[t] = exp2f(-8.0f + 4.0f * frt_rng_uniform(&g_rng));
    for (int i = 0; i < dim; i++) sw[i] = 1e-4f + 1e-2f * frt_rng_uniform(&g_rng);
    dbuf dd = dalloc(ne * 4), r1 = dalloc(ne * 4), r2 = dalloc(ne * 4), dsx = dalloc((size_t)max_n * 4);
    dbuf dsw = dalloc((size_t)dim * 4), dw = dalloc((size_t)dim * 4), dn = dalloc(4);
    dbuf o1 = dalloc(ne * 2), o2 = dalloc(ne * 2), q1 = dalloc(ne), q2 = dalloc(ne);
    dbuf s1 = dalloc((size_t)max_n * 4), s2 = dalloc((size_t)max_n * 4);
    dput(dd, 0, dl, ne * 4), dput(r1, 0, res, ne * 4), dput(r2, 0, res, ne * 4);
    dput(dsx, 0, sx, (size_t)max_n * 4), dput(dsw, 0, sw, (size_t)dim * 4), dput(dw, 0, w, (size_t)dim * 4);
    const int32_t nn = n;
    dput(dn, 0, &nn, 4);
    dbuf *fill[] = {&o1, &o2, &q1, &q2, &s1, &s2};
    for (size_t i = 0; i < sizeof fill / sizeof fill[0]; i++)
        must(frt_buffer_fill(fill[i]->b, 0, i < 2 ? ne * 2 : i < 4 ? ne : (size_t)max_n * 4, 0x5A, g_st), "fill");
    const float *xs = acc ? dsx.p : NULL, *ws = acc ? dsw.p : NULL;
    CHECK_OK(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, xs, ws, o1.p, q1.p, s1.p, dw.p, dn.p, max_n,
                                        dim, 1e-6f, 1));
    if (acc)
        CHECK_OK(frt_cuda_add_rmsnorm_fp8acc(g_cs, r2.p, dd.p, dsx.p, dsw.p, o2.p, FRT_CUDA_BF16, dw.p, dn.p, max_n,
                                             dim, 1e-6f, 1));
    else
        CHECK_OK(frt_cuda_add_rmsnorm(g_cs, r2.p, dd.p, FRT_CUDA_F32, o2.p, FRT_CUDA_BF16, dw.p, dn.p, max_n, dim,
                                      1e-6f, 1));
    if (dim % 8 == 0) /* the quantizer's rows are whole 16-byte loads; else the CPU quantizer below only */
        CHECK_OK(frt_cuda_fp8_quantize_rows_dynamic(g_cs, q2.p, s2.p, o2.p, n, dim));
    sync_st();
    float *h1 = xzalloc(ne * 4), *h2 = xzalloc(ne * 4), *f1 = xzalloc((size_t)max_n * 4);
    float *f2 = xzalloc((size_t)max_n * 4), *fc = xzalloc((size_t)max_n * 4), *ow = xzalloc(ne * 4);
    uint16_t *b1 = xzalloc(ne * 2), *b2 = xzalloc(ne * 2);
    uint8_t *c1 = xzalloc(ne), *c2 = xzalloc(ne), *cc = xzalloc(ne);
    dget(r1, 0, h1, ne * 4), dget(r2, 0, h2, ne * 4), dget(o1, 0, b1, ne * 2), dget(o2, 0, b2, ne * 2);
    dget(q1, 0, c1, ne), dget(q2, 0, c2, ne), dget(s1, 0, f1, (size_t)max_n * 4), dget(s2, 0, f2, (size_t)max_n * 4);
    char name[160];
    const char *what = acc ? "fp8acc " : "";
    snprintf(name, sizeof name, "add_rmsnorm_quant %s%d of %d x %d: residual and bf16 out == add_rmsnorm", what, n,
             max_n, dim);
    report_flag(name, !memcmp(h1, h2, ne * 4) && !memcmp(b1, b2, ne * 2));
    if (dim % 8 == 0) {
        snprintf(name, sizeof name, "add_rmsnorm_quant %s%d of %d x %d: codes and scales == quantize_rows_dynamic",
                 what, n, max_n, dim);
        report_flag(name, !memcmp(c1, c2, (size_t)n * dim) && !memcmp(f1, f2, (size_t)n * 4));
    }
    int past = 1; /* rows past n: codes 0, scale 1; resid and out untouched */
    for (size_t i = (size_t)n * dim; i < ne; i++) past &= c1[i] == 0 && h1[i] == res[i];
    for (size_t i = (size_t)n * dim; i < ne; i++) past &= b1[i] == 0x5A5A;
    for (int t = n; t < max_n; t++) past &= f1[t] == 1.0f;
    snprintf(name, sizeof name, "add_rmsnorm_quant %s%d of %d x %d: rows past n zero codes, scale 1, out untouched",
             what, n, max_n, dim);
    report_flag(name, past);
    { /* out NULL: the same residual, codes and scales, no bf16 row */
        dput(r1, 0, res, ne * 4);
        dbuf q4 = dalloc(ne), s4 = dalloc((size_t)max_n * 4);
        CHECK_OK(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, xs, ws, NULL, q4.p, s4.p, dw.p, dn.p, max_n,
                                            dim, 1e-6f, 1));
        sync_st();
        uint8_t *c4 = xzalloc(ne);
        float *f4 = xzalloc((size_t)max_n * 4), *h4 = xzalloc(ne * 4);
        dget(q4, 0, c4, ne), dget(s4, 0, f4, (size_t)max_n * 4), dget(r1, 0, h4, ne * 4);
        snprintf(name, sizeof name, "add_rmsnorm_quant %s%d x %d: out NULL gives the same residual, codes, scales",
                 what, n, dim);
        report_flag(name, !memcmp(c4, c1, ne) && !memcmp(f4, f1, (size_t)max_n * 4) && !memcmp(h4, h1, ne * 4));
        dfree(&q4), dfree(&s4);
        free(c4), free(f4), free(h4);
    }
    if (acc) { /* the token scales in place: q_scale == x_scale */
        dput(r1, 0, res, ne * 4); /* the residual as before the first call */
        dbuf si = dalloc((size_t)max_n * 4), q3 = dalloc(ne);
        dput(si, 0, sx, (size_t)max_n * 4);
        CHECK_OK(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, si.p, dsw.p, o1.p, q3.p, si.p, dw.p, dn.p,
                                            max_n, dim, 1e-6f, 1));
        sync_st();
        uint8_t *c3 = xzalloc(ne);
        float *f3 = xzalloc((size_t)max_n * 4);
        dget(q3, 0, c3, ne), dget(si, 0, f3, (size_t)max_n * 4);
        snprintf(name, sizeof name, "add_rmsnorm_quant fp8acc %d x %d: q_scale over x_scale (in place) == apart", n,
                 dim);
        report_flag(name, !memcmp(c3, c1, ne) && !memcmp(f3, f1, (size_t)max_n * 4));
        dfree(&si), dfree(&q3);
        free(c3), free(f3);
    }
    for (size_t i = 0; i < (size_t)n * dim; i++) ow[i] = frt_bf16_to_f32(b1[i]);
    frt_fp8_quantize_rows_dynamic(cc, fc, ow, n, dim);
    snprintf(name, sizeof name, "add_rmsnorm_quant %s%d x %d: codes and scales == the CPU quantizer of out", what, n,
             dim);
    report_flag(name, !memcmp(c1, cc, (size_t)n * dim) && !memcmp(f1, fc, (size_t)n * 4));
    CHECK_STATUS(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, xs, ws, o1.p, NULL, s1.p, dw.p, dn.p,
                                            max_n, dim, 1e-6f, 1),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, xs, ws, o1.p, q1.p, NULL, dw.p, dn.p,
                                            max_n, dim, 1e-6f, 1),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, dsx.p, NULL, o1.p, q1.p, s1.p, dw.p, dn.p,
                                            max_n, dim, 1e-6f, 1),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_BF16, dsx.p, dsw.p, o1.p, q1.p, s1.p, dw.p,
                                            dn.p, max_n, dim, 1e-6f, 1),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_rmsnorm_quant(g_cs, r1.p, dd.p, FRT_CUDA_F32, xs, ws, o1.p, (uint8_t *)r1.p, s1.p, dw.p,
                                            dn.p, max_n, dim, 1e-6f, 1),
                 FRT_ERR_INVALID_ARGUMENT);
    dbuf *d[] = {&dd, &r1, &r2, &dsx, &dsw, &dw, &dn, &o1, &o2, &q1, &q2, &s1, &s2};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) dfree(d[i]);
    free(dl), free(res), free(sx), free(sw), free(w), free(h1), free(h2), free(f1), free(f2), free(fc), free(ow);
    free(b1), free(b2), free(c1), free(c2), free(cc);
}

/* ---- the prefill product of block-wise (128 x 128) weights ---------------- */

#define TOL_BLK 4e-3 /* the weights rounded to bf16 (2^-9 relative per element) */

/* frt_cuda_fp8_dequantize_b128_bf16 then the bf16 GEMM (frt_cuda_gemm_run,
 * f32 out), the prefill of a block-wise checkpoint on the cuda backend
 * (docs/fp8.md), against the double reference sum_k x[t, k] * decode(q[o,
 * k]) * s[o / 128][k / 128] on random bf16 x, random finite codes and
 * block scales, n rows (the first, the last and 6 random ones checked
 * past SAMPLES rows). */
static void check_block_prefill(frt_cuda_gemm *g, int in, int out, int n)
{
    const size_t nx = (size_t)n * in, nw = (size_t)out * in, nb = (size_t)((in + 127) / 128);
    const size_t ns = (size_t)((out + 127) / 128) * nb;
    uint16_t *xb = xzalloc(nx * 2);
    uint8_t *q = xzalloc(nw);
    float *sc = xzalloc(ns * 4);
    for (size_t i = 0; i < nx; i++) xb[i] = frt_f32_to_bf16(-2.0f + 4.0f * frt_rng_uniform(&g_rng));
    for (size_t i = 0; i < nw; i++) {
        do q[i] = (uint8_t)(frt_rng_next(&g_rng) >> 56);
        while ((q[i] & 0x7F) == 0x7F);
    }
    for (size_t i = 0; i < ns; i++) sc[i] = 1e-4f + 1e-2f * frt_rng_uniform(&g_rng);
    dbuf dx = dalloc(nx * 2), dq = dalloc(nw), ds = dalloc(ns * 4), dw = dalloc(nw * 2), dy = dalloc((size_t)n * out * 4);
    dput(dx, 0, xb, nx * 2);
    dput(dq, 0, q, nw);
    dput(ds, 0, sc, ns * 4);
    must(frt_cuda_gemm_plan(g, n, in, out, FRT_CUDA_F32, 0), "plan bf16");
    CHECK_OK(frt_cuda_fp8_dequantize_b128_bf16(g_cs, dw.p, dq.p, ds.p, out, in));
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, FRT_CUDA_F32, dx.p, dw.p, n, in, out, 0));
    sync_st();
    float *y = xzalloc((size_t)n * out * 4);
    dget(dy, 0, y, (size_t)n * out * 4);
    int rows[SAMPLES], nr = n <= SAMPLES ? n : SAMPLES;
    for (int i = 0; i < nr; i++)
        rows[i] = n <= SAMPLES ? i : i == 0 ? 0 : i == 1 ? n - 1 : (int)(frt_rng_next(&g_rng) % (uint64_t)n);
    float *got = xzalloc((size_t)nr * out * 4), *ref = xzalloc((size_t)nr * out * 4);
    for (int i = 0; i < nr; i++)
        for (int o = 0; o < out; o++) {
            const uint16_t *xr = xb + (size_t)rows[i] * in;
            const uint8_t *wr = q + (size_t)o * in;
            double d = 0;
            for (int k = 0; k < in; k++)
                d += (double)frt_bf16_to_f32(xr[k]) * frt_fp8_e4m3_decode(wr[k]) * sc[(size_t)(o / 128) * nb + k / 128];
            ref[(size_t)i * out + o] = (float)d;
            got[(size_t)i * out + o] = y[(size_t)rows[i] * out + o];
        }
    char name[128];
    snprintf(name, sizeof name, "block-wise prefill (dequantize_b128 + bf16 GEMM) n %d in %d out %d", n, in, out);
    report(name, frt_test_rel_err(got, ref, (size_t)nr * out), TOL_BLK);
    dfree(&dx), dfree(&dq), dfree(&ds), dfree(&dw), dfree(&dy);
    free(xb), free(q), free(sc), free(y), free(got), free(ref);
}

static void test_block_prefill(frt_cuda_gemm *g)
{
    check_block_prefill(g, 272, 200, 7);
    check_block_prefill(g, 1040, 1008, 37);
    check_block_prefill(g, 4096, 4096, 255);
    check_block_prefill(g, 4096, 14336, 64);
    check_block_prefill(g, 14336, 4096, 255);
}

/* ---- timing (informative) ------------------------------------------------ */

typedef struct timing {
    frt_cuda_gemm *g;
    frt_cuda_gemm_fp8 *g8;
    dbuf dx, dxq, dxs, dw8, dws, dw16, dy;
    int n, in, out, reps;
} timing;

static int rec_fp8(frt_stream *s, void *user)
{
    const timing *t = user;
    for (int r = 0; r < t->reps; r++)
        FRT_TEST_TRY_(frt_cuda_gemm_fp8_run(t->g8, frt_stream_native(s), t->dy.p, FRT_CUDA_F32, t->dxq.p, t->dxs.p,
                                            t->dw8.p, t->dws.p, t->n, t->in, t->out));
    return 0;
}

static int rec_bf16(frt_stream *s, void *user)
{
    const timing *t = user;
    for (int r = 0; r < t->reps; r++)
        FRT_TEST_TRY_(frt_cuda_gemm_run(t->g, frt_stream_native(s), t->dy.p, FRT_CUDA_F32, t->dx.p, t->dw16.p, t->n,
                                        t->in, t->out, 0));
    return 0;
}

static int rec_quant(frt_stream *s, void *user)
{
    const timing *t = user;
    for (int r = 0; r < t->reps; r++)
        FRT_TEST_TRY_(frt_cuda_fp8_quantize_rows_dynamic(frt_stream_native(s), t->dxq.p, t->dxs.p, t->dx.p, t->n,
                                                         t->in));
    return 0;
}

static void time_gemms(frt_cuda_gemm *g, frt_cuda_gemm_fp8 *g8)
{
    timing t;
    memset(&t, 0, sizeof t);
    t.g = g, t.g8 = g8, t.n = 8192, t.in = 4096, t.out = 4096, t.reps = 10;
    const size_t nx = (size_t)t.n * t.in, nw = (size_t)t.out * t.in;
    t.dx = dalloc(nx * 2), t.dxq = dalloc(nx), t.dxs = dalloc((size_t)t.n * 4), t.dw8 = dalloc(nw);
    t.dws = dalloc((size_t)t.out * 4), t.dw16 = dalloc(nw * 2), t.dy = dalloc((size_t)t.n * t.out * 4);
    must(frt_buffer_fill(t.dx.b, 0, nx * 2, 0x3C, g_st), "fill"); /* bf16 0x3C3C: about 0.0115 */
    must(frt_buffer_fill(t.dw8.b, 0, nw, 0x38, g_st), "fill");    /* E4M3 0x38: 1.0 */
    must(frt_buffer_fill(t.dw16.b, 0, nw * 2, 0x3C, g_st), "fill");
    must(frt_buffer_fill(t.dws.b, 0, (size_t)t.out * 4, 0, g_st), "fill");
    must(frt_cuda_fp8_quantize_rows_dynamic(g_cs, t.dxq.p, t.dxs.p, t.dx.p, t.n, t.in), "quantize");
    must(frt_cuda_gemm_fp8_plan(g8, t.n, t.in, t.out, FRT_CUDA_F32), "plan fp8");
    must(frt_cuda_gemm_plan(g, t.n, t.in, t.out, FRT_CUDA_F32, 0), "plan bf16");
    sync_st();
    const double flop = 2.0 * t.n * t.in * t.out;
    double us8 = graph_us("gemm_fp8 8192x4096x4096", rec_fp8, &t, t.reps);
    double us16 = graph_us("gemm_bf16 8192x4096x4096", rec_bf16, &t, t.reps);
    double usq = graph_us("quantize 8192x4096", rec_quant, &t, t.reps);
    printf("  time gemm_fp8  n 8192 in 4096 out 4096 (f32 out): %8.1f us, %6.1f TFLOP/s\n", us8,
           us8 > 0 ? flop / us8 * 1e-6 : 0);
    printf("  time gemm_bf16 n 8192 in 4096 out 4096 (f32 out): %8.1f us, %6.1f TFLOP/s (fp8 / bf16 %.2fx)\n", us16,
           us16 > 0 ? flop / us16 * 1e-6 : 0, us8 > 0 ? us16 / us8 : 0);
    printf("  time quantize_rows_dynamic 8192 x 4096 bf16: %8.1f us (%.0f GB/s moved)\n", usq,
           usq > 0 ? (double)nx * 3 / usq * 1e-3 : 0);
    dbuf *d[] = {&t.dx, &t.dxq, &t.dxs, &t.dw8, &t.dws, &t.dw16, &t.dy};
    for (size_t i = 0; i < 7; i++) dfree(d[i]);
}

int main(void)
{
    test_bad_args();
    frt_test_cuda_start();
    test_quantizer();
    frt_cuda_gemm *g = NULL;
    frt_cuda_gemm_fp8 *g8 = NULL;
    must(frt_cuda_gemm_create(GEMM_WS, &g), "gemm create");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    must(frt_cuda_gemm_fp8_create(g, &g8), "gemm_fp8 create");
    dbuf any = dalloc(4096);
    test_bad_shapes(g8, any);
    dfree(&any);
    printf("  -- scaling AUTO (the library's outer vectors where cuBLASLt has them)\n");
    test_gemm(g8, 1);
    frt_cuda_gemm_fp8 *ge = NULL; /* the fallback: unit scales + frt's epilogue */
    must(frt_cuda_gemm_fp8_create(g, &ge), "gemm_fp8 create");
    must(frt_cuda_gemm_fp8_set_scaling(ge, FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE), "set_scaling");
    CHECK_STATUS(frt_cuda_gemm_fp8_plan(ge, 16, 64, 64, FRT_CUDA_BF16), FRT_ERR_UNSUPPORTED);
    printf("  -- scaling EPILOGUE\n");
    test_gemm(ge, 0);
    test_run_acc(ge, g8, 4096, 14336, 255);
    test_run_acc(ge, g8, 272, 48, 37);
    frt_cuda_gemm_fp8_destroy(ge);
    test_swiglu_fp8acc(300, 257, 14336, FRT_CUDA_F32);
    test_swiglu_fp8acc(7, 7, 48, FRT_CUDA_F32);
    test_swiglu_fp8acc(300, 257, 14336, FRT_CUDA_BF16);
    test_swiglu_fp8acc(9, 9, 56, FRT_CUDA_BF16);
    frt_cuda_gemm_fp8 *g0 = NULL; /* unit scales, no epilogue: the accumulators for their consumers */
    must(frt_cuda_gemm_fp8_create(g, &g0), "gemm_fp8 create");
    must(frt_cuda_gemm_fp8_set_scaling(g0, FRT_CUDA_GEMM_FP8_SCALES_NONE), "set_scaling");
    test_run_acc_none(g0, 4096, 14336, 255);
    test_run_acc_none(g0, 272, 48, 37);
    frt_cuda_gemm_fp8_destroy(g0);
    test_add_rmsnorm_fp8acc(37, 4096);
    test_add_rmsnorm_fp8acc(5, 1001);
    test_add_rmsnorm_fp8acc(3, 9000);
    test_add_rmsnorm_quant(40, 37, 4096, 1);
    test_add_rmsnorm_quant(40, 37, 4096, 0);
    test_add_rmsnorm_quant(6, 5, 1001, 1);
    test_add_rmsnorm_quant(6, 6, 1001, 0);
    test_add_rmsnorm_quant(3, 2, 20000, 1);
    test_add_rmsnorm_quant(3, 3, 20000, 0);
    const uint64_t fp = frt_cuda_gemm_fp8_fingerprint(g8);
    CHECK(fp != 0 && frt_cuda_gemm_fp8_plan_count(g8) > 0);
    test_block_prefill(g);
    test_own_algo(g);
    time_gemms(g, g8);
    CHECK(frt_cuda_gemm_fp8_fingerprint(g8) != fp); /* a new plan changes it */
    frt_cuda_gemm_fp8_destroy(g8);
    frt_cuda_gemm_destroy(g);
    return frt_test_report();
}

#endif
