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
 *     run of that row alone; two runs give the same bytes; so do the
 *     persistent launches capped at 1 and 3 blocks (each block doing many
 *     blocks of work); nothing past y [n, out] is written (sentinel);
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before the device
 *     check (they also run without a GPU);
 *   - the fused forms (frt_cuda_gemv_fp8_multi / _multi_norm, q | k | v
 *     with one bf16 output; frt_cuda_gemv_fp8_swiglu / _swiglu_norm) on
 *     small, odd and 8B shapes, n = 1, 3, 8 (n 3 on a grid of 2 blocks,
 *     each crossing entries): bit for bit the separate launches they replace (frt_cuda_gemv_fp8 per matrix; frt_cuda_rmsnorm
 *     first for the _norm forms; frt_cuda_swiglu after gate and up), and
 *     against the CPU twins (frt_cpu_rmsnorm rounded to bf16,
 *     frt_cpu_matmul_fp8, frt_cpu_swiglu) within 1e-4 (f32) / 1e-2 (bf16
 *     or a normed input); bad arguments refused;
 *   - the 128 x 128 block-scaled forms (frt_cuda_gemv_fp8_b128 and its
 *     fused forms) the same way against frt_cpu_matmul_fp8_b128 (itself
 *     checked against dequantize-then-multiply), on shapes with partial
 *     last blocks in both dims and the 8B shapes;
 *   - frt_cuda_gemv_fp8_max_n: that many rows launch at in 16 .. 65536, one
 *     more is refused;
 * then times the 8B-class shapes in a CUDA graph over enough weight copies
 * to defeat the L2 and prints GB/s next to the FP8 HBM floor, and the fused
 * q | k | v next to its three launches (printed, not checked); with
 * FRT_TEST_TIMING_ONLY=1 only those rows (to compare libraries). Exits 77
 * (skipped) without a device.
 */
#include "frt_test.h"

#include "kernels/cpu/fp8.h"
#include "kernels/cpu/gemv_fp8.h"
#include "kernels/cpu/kernels_cpu.h"
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

/* Scales of an E4M3 matrix [out, in]: [out] per row, or with b128 the
 * block table [ceil(out / 128), ceil(in / 128)]. */
static size_t n_scales(int b128, int in, int out)
{
    return b128 ? (size_t)((out + 127) / 128) * (size_t)((in + 127) / 128) : (size_t)out;
}

/* The twin of either scale layout. */
static void twin(int b128, float *y, const float *x, const uint8_t *w, const float *s, int n, int in, int out, int acc)
{
    (b128 ? frt_cpu_matmul_fp8_b128 : frt_cpu_matmul_fp8)(y, x, w, s, n, in, out, acc);
}

/* The block-scaled twin against decode, scale each weight by its block's
 * scale (in double), then a plain double dot product: the same sum in
 * another association, so within 1e-12 norm-wise; in 272 and out 200 have
 * partial last blocks both ways. */
static void test_twin_b128(void)
{
    const int n = 3, in = 272, out = 200, nb = 3;
    hmat x = hmat_rand(&g_rng, n, in, -1, 1);
    uint8_t *w = codes_rand((size_t)out * in);
    float *s = scales_rand((int)n_scales(1, in, out)), *y = fnew((size_t)n * out), *ref = fnew((size_t)n * out);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < out; r++) {
            double d = 0;
            for (int k = 0; k < in; k++)
                d += (double)x.f[t * in + k] * frt_fp8_e4m3_decode(w[r * in + k]) * (double)s[(r / 128) * nb + k / 128];
            ref[t * out + r] = (float)d;
        }
    frt_cpu_matmul_fp8_b128(y, x.f, w, s, n, in, out, 0);
    report("cpu matmul_fp8_b128 vs dequantize-then-multiply", frt_test_rel_err(y, ref, (size_t)n * out), 1e-6);
    hmat_free(&x);
    free(w), free(s), free(y), free(ref);
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
    CHECK_STATUS(frt_cuda_gemv_fp8_unless(NULL, NULL, p, F, p2, p3, ps, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_unless(NULL, (const int32_t *)ps, p, F, p2, p3, ps, 9, 16, 8),
                 FRT_ERR_INVALID_ARGUMENT);
    /* the block-scaled GEMV: the same checks; y over the block table
     * refused (in 2048, out 8: 16 block scales, past the 8 a per-row
     * table would have) */
    CHECK_STATUS(frt_cuda_gemv_fp8_b128(NULL, p, F, 0, p2, p3, NULL, 1, 256, 200), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128(NULL, p, F, 0, p2, p3, ps, 1, 264, 200), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128(NULL, p, F, 0, p2, p3, ps, 9, 256, 200), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128(NULL, p, F, 0, p2, p3, (float *)((char *)ps + 2), 1, 256, 200),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128(NULL, ps + 12, F, 0, p2, p3, ps, 1, 2048, 8), FRT_ERR_INVALID_ARGUMENT);
}

typedef struct shape_dev {
    int in, out, b128; /* b128: block scales, frt_cuda_gemv_fp8_b128 */
    hmat x8;        /* [8, in] */
    uint8_t *w;     /* [out, in] */
    float *s;       /* [out], or b128 [ceil(out / 128), ceil(in / 128)] */
    dbuf dx, dw, ds;
} shape_dev;

/* One run: y [n, out] of odt from x rows 0..n-1 of dx (at row offset x0).
 * Returns the bytes of y (malloc'd). */
static void *run(shape_dev *sd, int n, int x0, frt_cuda_dtype odt, int acc, const float *y0, dbuf dy)
{
    const size_t ny = (size_t)n * sd->out, yb = ny * dsize(odt);
    dsentinel(dy);
    if (acc) dput_as(dy, y0, ny, odt);
    CHECK_OK((sd->b128 ? frt_cuda_gemv_fp8_b128 : frt_cuda_gemv_fp8)(
        g_cs, dy.p, odt, acc, (const uint16_t *)((char *)sd->dx.p + (size_t)x0 * sd->in * 2), sd->dw.p, sd->ds.p, n,
        sd->in, sd->out));
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
    twin(sd->b128, ref, sd->x8.f, sd->w, sd->s, n, sd->in, sd->out, acc);
    void *b1 = run(sd, n, 0, odt, acc, y0, dy), *b2 = run(sd, n, 0, odt, acc, y0, dy);
    dget_as(dy, got, ny, odt);
    char name[128];
    snprintf(name, sizeof name, "gemv_fp8%s n %d in %d out %d -> %s%s", sd->b128 ? "_b128" : "", n, sd->in, sd->out,
             dtn(odt), acc ? " acc" : "");
    report(name, frt_test_rel_err(got, ref, ny), odt == FRT_CUDA_BF16 ? TOL_BF16 : TOL_F32);
    CHECK_MSG(!memcmp(b1, b2, ny * dsize(odt)), "%s: two runs differ", name);
    /* the launch is persistent: a grid of 1 or 3 blocks doing every block
     * of work gives the bytes of the full grid */
    for (int cap = 1; cap <= 3; cap += 2) {
        frt_cuda_gemv_set_max_grid(cap);
        void *bc = run(sd, n, 0, odt, acc, y0, dy);
        frt_cuda_gemv_set_max_grid(0);
        CHECK_MSG(!memcmp(b1, bc, ny * dsize(odt)), "%s: a grid of %d blocks differs", name, cap);
        free(bc);
    }
    if (!acc && !sd->b128) { /* frt_cuda_gemv_fp8_unless: *d_skip 0 the same bytes, 1 nothing written */
        dbuf dflag = dalloc(4);
        for (int skip = 0; skip <= 1; skip++) {
            const int32_t f = skip;
            dput(dflag, 0, &f, 4);
            dsentinel(dy);
            CHECK_OK(frt_cuda_gemv_fp8_unless(g_cs, (const int32_t *)dflag.p, dy.p, odt, (const uint16_t *)sd->dx.p,
                                              sd->dw.p, sd->ds.p, n, sd->in, sd->out));
            sync_st();
            if (skip) {
                CHECK_MSG(untouched(dy, 0, ny * dsize(odt) + 256), "%s: the skipped launch wrote y", name);
            } else {
                void *bu = xzalloc(ny * dsize(odt));
                dget(dy, 0, bu, ny * dsize(odt));
                CHECK_MSG(!memcmp(b1, bu, ny * dsize(odt)), "%s: _unless (not skipped) differs", name);
                free(bu);
            }
        }
        dfree(&dflag);
    }
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

static void test_shape_of(int b128, int in, int out, const int *ns, int n_ns)
{
    shape_dev sd;
    memset(&sd, 0, sizeof sd);
    const size_t ns_ = n_scales(b128, in, out);
    sd.in = in;
    sd.out = out;
    sd.b128 = b128;
    sd.x8 = hmat_rand(&g_rng, 8, in, -1, 1);
    sd.w = codes_rand((size_t)out * in);
    sd.s = scales_rand((int)ns_);
    sd.dx = dalloc((size_t)8 * in * 2);
    sd.dw = dalloc((size_t)out * in);
    sd.ds = dalloc(ns_ * 4);
    dput(sd.dx, 0, sd.x8.b, (size_t)8 * in * 2);
    dput(sd.dw, 0, sd.w, (size_t)out * in);
    dput(sd.ds, 0, sd.s, ns_ * 4);
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

static void test_shape(int in, int out, const int *ns, int n_ns) { test_shape_of(0, in, out, ns, n_ns); }

/* ---- the fused forms: q | k | v, gate | up, and their norm prologue ------ */

/* An E4M3 matrix [out, in] with its scales, on the host and the device. */
typedef struct fmat {
    int out;
    uint8_t *w;
    float *s;
    dbuf dw, ds;
} fmat;

static fmat fmat_make(int out, int in, int b128)
{
    const size_t ns = n_scales(b128, in, out);
    fmat m = {out, codes_rand((size_t)out * in), scales_rand((int)ns), dalloc((size_t)out * in), dalloc(ns * 4)};
    dput(m.dw, 0, m.w, (size_t)out * in);
    dput(m.ds, 0, m.s, ns * 4);
    return m;
}

static void fmat_free(fmat *m)
{
    free(m->w);
    free(m->s);
    dfree(&m->dw);
    dfree(&m->ds);
}

/* One fused case's inputs: x [8, in] bf16 (read) or the residual rows
 * [8, in] f32 and the norm weight (the _norm forms; dh their RMSNorm by
 * frt_cuda_rmsnorm, the reference input), the q, k, v, gate, up matrices. */
typedef struct fused {
    int in, b128; /* b128: block-scaled matrices, the _b128 launchers */
    hmat x;
    float *res, *nw, *xn; /* xn: the CPU's bf16(rmsnorm(res)) */
    dbuf dx, dres, dnw, dh;
    fmat m[5];
} fused;

#define FUSED_EPS 1e-6f

static void fused_make(fused *f, int in, int qd, int kvd, int inter, int b128)
{
    memset(f, 0, sizeof *f);
    f->in = in;
    f->b128 = b128;
    f->x = hmat_rand(&g_rng, 8, in, -1, 1);
    f->res = frand((size_t)8 * in, -3, 3);
    f->nw = frand((size_t)in, 0.5f, 1.5f);
    f->xn = fnew((size_t)8 * in);
    frt_cpu_rmsnorm(f->xn, f->res, f->nw, 8, in, FUSED_EPS, 0);
    round_bf16(f->xn, (size_t)8 * in);
    f->dx = dalloc((size_t)8 * in * 2);
    f->dres = dalloc((size_t)8 * in * 4);
    f->dnw = dalloc((size_t)in * 4);
    f->dh = dalloc((size_t)8 * in * 2);
    dput(f->dx, 0, f->x.b, (size_t)8 * in * 2);
    dput(f->dres, 0, f->res, (size_t)8 * in * 4);
    dput(f->dnw, 0, f->nw, (size_t)in * 4);
    const int outs[5] = {qd, kvd, kvd, inter, inter};
    for (int i = 0; i < 5; i++) f->m[i] = fmat_make(outs[i], in, b128);
}

static void fused_free(fused *f)
{
    hmat_free(&f->x);
    free(f->res), free(f->nw), free(f->xn);
    dfree(&f->dx), dfree(&f->dres), dfree(&f->dnw), dfree(&f->dh);
    for (int i = 0; i < 5; i++) fmat_free(&f->m[i]);
}

/* The separate launch: frt_cuda_gemv_fp8 of matrix m on x into dy; its bytes. */
static void *separate(const fused *f, const fmat *m, const void *x, int n, frt_cuda_dtype dt, dbuf dy)
{
    CHECK_OK((f->b128 ? frt_cuda_gemv_fp8_b128 : frt_cuda_gemv_fp8)(g_cs, dy.p, dt, 0, x, m->dw.p, m->ds.p, n, f->in,
                                                                   m->out));
    sync_st();
    return snap(dy, (size_t)n * m->out * dsize(dt));
}

/* q | k | v (k's y bf16) in one launch == the three launches, bit for bit;
 * against frt_cpu_matmul_fp8 on the CPU's input. norm: the _norm form. */
static void check_multi(fused *f, int n, int norm, dbuf *dy, dbuf dref)
{
    const frt_cuda_dtype dts[3] = {FRT_CUDA_F32, FRT_CUDA_BF16, FRT_CUDA_F32};
    frt_cuda_gemv_fp8_entry e[3];
    for (int i = 0; i < 3; i++) {
        dsentinel(dy[i]);
        e[i] = (frt_cuda_gemv_fp8_entry){dy[i].p, dts[i], f->m[i].dw.p, f->m[i].ds.p, f->m[i].out};
    }
    const frt_cuda_gemv_norm nm = {f->dres.p, f->dnw.p, FUSED_EPS, 0};
    /* at n 3 the persistent launch runs on 2 blocks: each crosses from
     * entry to entry (and kw to kw) */
    frt_cuda_gemv_set_max_grid(n == 3 ? 2 : 0);
    if (norm)
        CHECK_OK((f->b128 ? frt_cuda_gemv_fp8_b128_multi_norm : frt_cuda_gemv_fp8_multi_norm)(g_cs, e, 3, &nm, n, f->in));
    else
        CHECK_OK((f->b128 ? frt_cuda_gemv_fp8_b128_multi : frt_cuda_gemv_fp8_multi)(g_cs, e, 3, f->dx.p, n, f->in));
    frt_cuda_gemv_set_max_grid(0);
    sync_st();
    const float *xc = norm ? f->xn : f->x.f;
    for (int i = 0; i < 3; i++) {
        const fmat *m = &f->m[i];
        const size_t ny = (size_t)n * m->out, yb = ny * dsize(dts[i]);
        void *got = snap(dy[i], yb), *want = separate(f, m, norm ? f->dh.p : f->dx.p, n, dts[i], dref);
        char name[128];
        snprintf(name, sizeof name, "fp8%s_multi%s n %d in %d entry %d (out %d, %s) == gemv_fp8",
                 f->b128 ? "_b128" : "", norm ? "_norm" : "", n, f->in, i, m->out, dtn(dts[i]));
        report_same(name, got, want, yb);
        CHECK_MSG(untouched(dy[i], yb, 256), "%s: wrote past y", name);
        float *ref = fnew(ny), *g = fnew(ny);
        twin(f->b128, ref, xc, m->w, m->s, n, f->in, m->out, 0);
        dget_as(dy[i], g, ny, dts[i]);
        snprintf(name, sizeof name, "fp8%s_multi%s n %d in %d entry %d vs cpu", f->b128 ? "_b128" : "",
                 norm ? "_norm" : "", n, f->in, i);
        report(name, frt_test_rel_err(g, ref, ny), dts[i] == FRT_CUDA_BF16 || norm ? TOL_BF16 : TOL_F32);
        free(got), free(want), free(ref), free(g);
    }
}

/* gate | up | SwiGLU in one launch == gate and up by frt_cuda_gemv_fp8 (f32)
 * and frt_cuda_swiglu (bf16 out), bit for bit; against the CPU twins. */
static void check_swiglu(fused *f, int n, int norm, dbuf dact, dbuf dg, dbuf du)
{
    const fmat *g = &f->m[3], *u = &f->m[4];
    const int inter = g->out;
    const size_t ny = (size_t)n * inter;
    const frt_cuda_gemv_fp8_mat gm = {g->dw.p, g->ds.p}, um = {u->dw.p, u->ds.p};
    const frt_cuda_gemv_norm nm = {f->dres.p, f->dnw.p, FUSED_EPS, 0};
    dsentinel(dact);
    frt_cuda_gemv_set_max_grid(n == 3 ? 2 : 0); /* as check_multi */
    if (norm)
        CHECK_OK((f->b128 ? frt_cuda_gemv_fp8_b128_swiglu_norm : frt_cuda_gemv_fp8_swiglu_norm)(
            g_cs, dact.p, FRT_CUDA_BF16, &nm, &gm, &um, n, f->in, inter));
    else
        CHECK_OK((f->b128 ? frt_cuda_gemv_fp8_b128_swiglu : frt_cuda_gemv_fp8_swiglu)(g_cs, dact.p, FRT_CUDA_BF16,
                                                                                    f->dx.p, &gm, &um, n, f->in, inter));
    frt_cuda_gemv_set_max_grid(0);
    sync_st();
    void *got = snap(dact, ny * 2);
    CHECK_MSG(untouched(dact, ny * 2, 256), "fp8_swiglu: wrote past y");
    const void *x = norm ? f->dh.p : f->dx.p;
    free(separate(f, g, x, n, FRT_CUDA_F32, dg));
    free(separate(f, u, x, n, FRT_CUDA_F32, du));
    CHECK_OK(frt_cuda_swiglu(g_cs, dact.p, FRT_CUDA_BF16, dg.p, du.p, FRT_CUDA_F32, NULL, n, inter));
    sync_st();
    void *want = snap(dact, ny * 2);
    char name[128];
    snprintf(name, sizeof name, "fp8%s_swiglu%s n %d in %d inter %d == gemv_fp8 x2 + swiglu", f->b128 ? "_b128" : "",
             norm ? "_norm" : "", n, f->in, inter);
    report_same(name, got, want, ny * 2);
    const float *xc = norm ? f->xn : f->x.f;
    float *rg = fnew(ny), *ru = fnew(ny), *ref = fnew(ny), *gf = fnew(ny);
    twin(f->b128, rg, xc, g->w, g->s, n, f->in, inter, 0);
    twin(f->b128, ru, xc, u->w, u->s, n, f->in, inter, 0);
    frt_cpu_swiglu(ref, rg, ru, (int)ny);
    for (size_t i = 0; i < ny; i++) gf[i] = frt_bf16_to_f32(((const uint16_t *)got)[i]);
    snprintf(name, sizeof name, "fp8%s_swiglu%s n %d in %d inter %d vs cpu", f->b128 ? "_b128" : "",
             norm ? "_norm" : "", n, f->in, inter);
    report(name, frt_test_rel_err(gf, ref, ny), TOL_BF16);
    free(got), free(want), free(rg), free(ru), free(ref), free(gf);
}

static void test_fused_of(int b128, int in, int qd, int kvd, int inter)
{
    fused f;
    fused_make(&f, in, qd, kvd, inter, b128);
    dbuf dy[3], dref = dalloc((size_t)8 * (qd > inter ? qd : inter) * 4 + 256);
    for (int i = 0; i < 3; i++) dy[i] = dalloc((size_t)8 * f.m[i].out * 4 + 256);
    dbuf dact = dalloc((size_t)8 * inter * 2 + 256), dg = dalloc((size_t)8 * inter * 4), du = dalloc((size_t)8 * inter * 4);
    const int ns[3] = {1, 3, 8};
    for (int i = 0; i < 3; i++)
        for (int norm = 0; norm < 2; norm++) {
            if (norm) /* the reference input of the _norm forms: frt_cuda_rmsnorm's bf16 rows */
                CHECK_OK(frt_cuda_rmsnorm(g_cs, f.dh.p, FRT_CUDA_BF16, f.dres.p, FRT_CUDA_F32, f.dnw.p, NULL, ns[i], 1,
                                          in, FUSED_EPS, 0));
            check_multi(&f, ns[i], norm, dy, dref);
            check_swiglu(&f, ns[i], norm, dact, dg, du);
        }
    for (int i = 0; i < 3; i++) dfree(&dy[i]);
    dfree(&dref), dfree(&dact), dfree(&dg), dfree(&du);
    fused_free(&f);
}

static void test_fused(int in, int qd, int kvd, int inter) { test_fused_of(0, in, qd, kvd, inter); }

/* Bad arguments of the fused forms: refused before the device is touched. */
static void test_fused_bad_args(void)
{
    void *y = (void *)(uintptr_t)4096, *y2 = (void *)(uintptr_t)8192, *x = (void *)(uintptr_t)(1u << 20);
    const uint8_t *w = (const uint8_t *)(uintptr_t)(1u << 24);
    const float *s = (const float *)(uintptr_t)(1u << 28), *s_odd = (const float *)(uintptr_t)((1u << 28) + 2);
    const frt_cuda_dtype F = FRT_CUDA_F32;
    frt_cuda_gemv_fp8_entry e[2] = {{y, F, w, s, 8}, {y2, F, w, s, 8}};
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, NULL, 2, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, 0, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, FRT_CUDA_GEMV_MULTI_MAX + 1, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, 2, x, 9, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, 2, x, 1, 24), FRT_ERR_INVALID_ARGUMENT); /* in % 16 */
    CHECK_STATUS(frt_cuda_gemv_fp8_multi_norm(NULL, e, 2, NULL, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    e[1].scale = NULL;
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, 2, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    e[1].scale = s_odd;
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, 2, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    e[1].scale = s;
    e[1].y = y; /* two entries, one y */
    CHECK_STATUS(frt_cuda_gemv_fp8_multi(NULL, e, 2, x, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    const frt_cuda_gemv_fp8_mat m = {w, s}, bad = {w, NULL};
    CHECK_STATUS(frt_cuda_gemv_fp8_swiglu(NULL, y, FRT_CUDA_BF16, x, &m, &bad, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_swiglu(NULL, y, FRT_CUDA_BF16, x, &m, NULL, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_swiglu(NULL, x, FRT_CUDA_BF16, x, &m, &m, 1, 16, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_swiglu(NULL, y, FRT_CUDA_BF16, x, &m, &m, 1, 16, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_swiglu_norm(NULL, y, FRT_CUDA_BF16, NULL, &m, &m, 1, 16, 8),
                 FRT_ERR_INVALID_ARGUMENT);
    /* the block-scaled fused forms share the checks */
    CHECK_STATUS(frt_cuda_gemv_fp8_b128_multi(NULL, e, 2, x, 1, 16), FRT_ERR_INVALID_ARGUMENT); /* shared y */
    CHECK_STATUS(frt_cuda_gemv_fp8_b128_multi(NULL, e, 1, x, 1, 24), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128_multi_norm(NULL, e, 1, NULL, 1, 16), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128_swiglu(NULL, y, FRT_CUDA_BF16, x, &m, &bad, 1, 16, 8),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemv_fp8_b128_swiglu_norm(NULL, y, FRT_CUDA_BF16, NULL, &m, &m, 1, 16, 8),
                 FRT_ERR_INVALID_ARGUMENT);
}

/* frt_cuda_gemv_fp8_max_n: at each in_dim, n = max_n rows launch and, below
 * FRT_CUDA_GEMV_MAX_N, n + 1 rows are refused (x past the shared memory). */
static void test_max_n(void)
{
    CHECK(frt_cuda_gemv_fp8_max_n(0) == 0 && frt_cuda_gemv_fp8_max_n(-16) == 0);
    const int ins[] = {16, 4096, 14336, 17408, 65536};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++) {
        const int in = ins[i], n = frt_cuda_gemv_fp8_max_n(in);
        CHECK_MSG(n >= 1 && n <= FRT_CUDA_GEMV_MAX_N, "max_n(%d) = %d", in, n);
        if (n < 1) continue;
        dbuf dx = dalloc((size_t)(n + 1) * in * 2), dw = dalloc((size_t)8 * in), ds = dalloc(8 * 4),
             dy = dalloc((size_t)(n + 1) * 8 * 4);
        must(frt_buffer_fill(dx.b, 0, dx.bytes, 0, g_st), "fill");
        must(frt_buffer_fill(dw.b, 0, dw.bytes, 0x38, g_st), "fill");
        must(frt_buffer_fill(ds.b, 0, ds.bytes, 0, g_st), "fill");
        CHECK_OK(frt_cuda_gemv_fp8(g_cs, dy.p, FRT_CUDA_F32, 0, dx.p, dw.p, ds.p, n, in, 8));
        sync_st();
        if (n < FRT_CUDA_GEMV_MAX_N)
            CHECK_STATUS(frt_cuda_gemv_fp8(g_cs, dy.p, FRT_CUDA_F32, 0, dx.p, dw.p, ds.p, n + 1, in, 8),
                         FRT_ERR_INVALID_ARGUMENT);
        printf("  gemv_fp8 max rows at in %d: %d\n", in, n);
        dfree(&dx), dfree(&dw), dfree(&ds), dfree(&dy);
    }
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

/* q | k | v of the 8B shape (4096 -> 4096 | 1024 | 1024): one
 * frt_cuda_gemv_fp8_multi launch against three frt_cuda_gemv_fp8 launches,
 * over enough weight copies to defeat the L2. */
typedef struct timing_qkv {
    dbuf dx, dw, ds, dy;
    int n, in, out[3], copies, fused;
} timing_qkv;

static int rec_qkv(frt_stream *s, void *user)
{
    const timing_qkv *t = user;
    const size_t per = (size_t)(t->out[0] + t->out[1] + t->out[2]) * t->in;
    for (int c = 0; c < t->copies; c++) {
        frt_cuda_gemv_fp8_entry e[3];
        size_t row = 0;
        for (int i = 0; i < 3; i++) {
            e[i] = (frt_cuda_gemv_fp8_entry){(float *)t->dy.p + (size_t)t->n * row, FRT_CUDA_F32,
                                             (const uint8_t *)t->dw.p + (size_t)c * per + row * t->in,
                                             (const float *)t->ds.p + row, t->out[i]};
            row += (size_t)t->out[i];
        }
        if (t->fused) {
            FRT_TEST_TRY_(frt_cuda_gemv_fp8_multi(frt_stream_native(s), e, 3, t->dx.p, t->n, t->in));
            continue;
        }
        for (int i = 0; i < 3; i++)
            FRT_TEST_TRY_(frt_cuda_gemv_fp8(frt_stream_native(s), e[i].y, FRT_CUDA_F32, 0, t->dx.p, e[i].w,
                                            e[i].scale, t->n, t->in, e[i].out_dim));
    }
    return 0;
}

static void time_qkv(int n)
{
    timing_qkv t;
    memset(&t, 0, sizeof t);
    t.n = n, t.in = 4096, t.out[0] = 4096, t.out[1] = t.out[2] = 1024;
    const size_t rows = 6144, wb = rows * (size_t)t.in;
    t.copies = (int)((200u << 20) / wb) + 1;
    t.dx = dalloc((size_t)n * t.in * 2);
    t.ds = dalloc(rows * 4);
    t.dy = dalloc((size_t)n * rows * 4);
    t.dw = dalloc(wb * (size_t)t.copies);
    must(frt_buffer_fill(t.dw.b, 0, wb * (size_t)t.copies, 0x38, g_st), "fill");
    must(frt_buffer_fill(t.ds.b, 0, rows * 4, 0, g_st), "fill");
    must(frt_buffer_fill(t.dx.b, 0, (size_t)n * t.in * 2, 0, g_st), "fill");
    sync_st();
    double us[2];
    for (t.fused = 0; t.fused < 2; t.fused++) us[t.fused] = graph_us(t.fused ? "qkv fused" : "qkv x3", rec_qkv, &t, t.copies);
    const double floor_us = (double)(wb + rows * 4) / HBM_BYTES_PER_S * 1e6;
    printf("  time 8B q|k|v 4096->6144 n %d: three launches %.2f us, fp8_multi %.2f us (FP8 HBM floor %.2f us)\n", n,
           us[0], us[1], floor_us);
    dfree(&t.dx);
    dfree(&t.dw);
    dfree(&t.ds);
    dfree(&t.dy);
}

int main(void)
{
    test_twin();
    test_twin_b128();
    test_bad_args();
    test_fused_bad_args();
    frt_test_cuda_start();
    const char *only = getenv("FRT_TEST_TIMING_ONLY"); /* 1: the timing rows alone (A/B of libraries) */
    if (only && strcmp(only, "1") == 0) goto timing;
    const int all[] = {1, 2, 3, 5, 8}, few[] = {1, 4, 8};
    test_shape(16, 1, all, 5);
    test_shape(48, 7, all, 5);
    test_shape(272, 13, all, 5);
    test_shape(1040, 1003, all, 5);
    test_shape(4096, 4096, few, 3);
    test_shape(4096, 14336, few, 3);
    test_shape(14336, 4096, few, 3);
    test_shape(12288, 4096, few, 3);
    test_fused(272, 48, 13, 80);
    test_fused(1040, 1003, 16, 2000);
    test_fused(4096, 4096, 1024, 14336);
    /* 128 x 128 block scales: in below one block, partial last blocks of
     * 1 chunk (400: the fold after the loop), 5 chunks (208) and 2 (1056:
     * kw > 1 slices), partial row blocks; the 8B shapes */
    test_shape_of(1, 16, 1, all, 5);
    test_shape_of(1, 208, 13, all, 5);
    test_shape_of(1, 400, 300, all, 5);
    test_shape_of(1, 1056, 1003, all, 5);
    test_shape_of(1, 4096, 4096, few, 3);
    test_shape_of(1, 4096, 14336, few, 3);
    test_shape_of(1, 14336, 4096, few, 3);
    test_fused_of(1, 272, 48, 13, 80);
    test_fused_of(1, 1040, 1003, 16, 2000);
    test_fused_of(1, 4096, 4096, 1024, 14336);
    test_max_n();
timing:
    time_shape("8B q_proj 4096->4096", 1, 4096, 4096);
    time_shape("8B gate/up 4096->14336", 1, 4096, 14336);
    time_shape("8B down 14336->4096", 1, 14336, 4096);
    time_shape("8B gate/up 4096->14336", 8, 4096, 14336);
    time_qkv(1);
    time_qkv(4);
    return frt_test_report();
}

#endif
