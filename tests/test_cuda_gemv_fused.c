/*
 * test_cuda_gemv_fused.c - the fused decode GEMVs of src/kernels/cuda/gemv.cu
 * against their CPU twins on random data (SplitMix64, kernels/cpu/rng.h),
 * norm-wise ||gpu - cpu|| / ||cpu|| within 1e-4 (f32 out) or 1e-2 (bf16 out),
 * the bf16 inputs rounded the same way on both sides:
 *   - frt_cuda_gemv_multi (several products of one x in one launch; twin
 *     frt_cpu_matmul per entry) on the projection groups of qwen3.5-9b
 *     (q | k | v: 8192, 1024, 1024 of 4096; in_proj_qkv | z | b | a: 12288,
 *     4096, 32, 32, b and a as rows [0, 32) and [32, 64) of one matrix) and
 *     of the 27B (hidden 5120: 12288, 1024, 1024; 10240, 6144, 48, 48), n =
 *     1..4, all f32, all bf16 and mixed outputs; odd sizes (out 1, 3, 7, 13;
 *     in not a multiple of 256) and x over 48 KiB (8- and 16-warp blocks);
 *   - frt_cuda_gemv_swiglu (silu(x Wg^T) * (x Wu^T) in one launch; twin
 *     frt_cpu_matmul twice + frt_cpu_swiglu, f32 intermediates) at 4096 ->
 *     12288 and 5120 -> 17408, n = 1..4, bf16 and f32 out, and odd sizes;
 *   - every result is the same bits as the unfused path: frt_cuda_gemm_run
 *     (its GEMV plan) for each entry alone, and frt_cuda_gemm_run (gate, up,
 *     f32) + frt_cuda_swiglu for the SwiGLU; 3 runs give identical bytes;
 *     bytes past each y stay untouched (sentinel);
 *   - a CUDA graph (frt_graph_capture) of both, replayed with new inputs,
 *     one launch with x over 48 KiB included (its shared-memory attribute is
 *     set inside the capture);
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before anything is
 *     enqueued (they also run on machines without a GPU).
 * Then times the 9B groups in CUDA graphs of back-to-back calls over weight
 * copies that defeat the 50 MB L2: fused against the unfused launches, next
 * to the HBM floor (weight bytes / 4.2 TB/s). The timings are printed, not
 * checked. Exits 77 (skipped) without a device.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_COL 66
#define FRT_TEST_CUDA_OWN_REPORT_SAME
#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#define TOL_GEMM_F32 1e-4
#define TOL_BF16 1e-2
#define HBM_BYTES_PER_S 4.2e12 /* measured device-to-device copy rate of the H200 */
#define MAXE FRT_CUDA_GEMV_MULTI_MAX

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness ---------------------------------------------------------- */

static uint64_t g_rng = 20261206;

static void report_same(const char *name, int same)
{
    printf("  %-66s %10s %8s %s\n", name, same ? "identical" : "DIFFER", "bits",
           same ? "ok" : "FAIL");
    CHECK_MSG(same, "%s: not bit-identical", name);
}

static dbuf dmat(const hmat *m)
{
    dbuf d = dalloc((size_t)m->rows * m->cols * 2);
    dput(d, 0, m->b, d.bytes);
    return d;
}

/* y = x . w^T through frt_cuda_gemm_run, after checking its plan is the GEMV
 * (the path whose bits the fused kernels reproduce). */
static void gemm_ref(frt_cuda_gemm *g, void *y, frt_cuda_dtype dt, const void *x, const void *w,
                     int n, int in, int out)
{
    CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, dt, 0));
    frt_cuda_gemm_plan_info info;
    CHECK_MSG(plan_of(g, n, in, out, dt, 0, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_GEMV,
              "n %d in %d out %d: the gemm plan is not the GEMV", n, in, out);
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, y, dt, x, w, n, in, out, 0));
}

/* ---- frt_cuda_gemv_multi -------------------------------------------------- */

/* A group of products of one x: matrices stored apart, entries = row ranges
 * of them (b and a: two ranges of one matrix). */
typedef struct mset {
    const char *tag;
    int in, n_mats, n_ent;
    int mat_rows[MAXE];
    int ent_mat[MAXE], ent_row0[MAXE], ent_rows[MAXE];
} mset;

/* The weights of a set on host and device. A matrix with an entry of fewer
 * than 64 rows is in [0, 1), and so is x when any entry is: a norm over a
 * handful of sums must not meet one that cancels to near zero (its relative
 * error would be the rounding's, not the kernel's). */
typedef struct mdata {
    hmat w[MAXE];
    dbuf dw[MAXE];
    float x_lo;
} mdata;

static mdata mdata_make(const mset *s)
{
    mdata d;
    memset(&d, 0, sizeof d);
    d.x_lo = -1.0f;
    float lo[MAXE];
    for (int m = 0; m < MAXE; m++) lo[m] = -1.0f;
    for (int e = 0; e < s->n_ent; e++)
        if (s->ent_rows[e] < 64) lo[s->ent_mat[e]] = d.x_lo = 0.0f;
    for (int m = 0; m < s->n_mats; m++) {
        d.w[m] = hmat_rand(&g_rng, s->mat_rows[m], s->in, lo[m], 1.0f);
        d.dw[m] = dmat(&d.w[m]);
    }
    return d;
}

static void mdata_free(const mset *s, mdata *d)
{
    for (int m = 0; m < s->n_mats; m++) {
        hmat_free(&d->w[m]);
        dfree(&d->dw[m]);
    }
}

static const uint16_t *ent_w(const mset *s, const mdata *d, int e)
{
    return (const uint16_t *)d->dw[s->ent_mat[e]].p + (size_t)s->ent_row0[e] * s->in;
}

/* One call of the set at n with output dtypes dts: against the twin, against
 * frt_cuda_gemm_run entry by entry (bits), 3 runs (bits), sentinels. */
static void multi_case(frt_cuda_gemm *g, const mset *s, const mdata *d, int n,
                       const frt_cuda_dtype *dts, const char *mode)
{
    const int in = s->in;
    const size_t pad = 256;
    hmat x = hmat_rand(&g_rng, n, in, d->x_lo, 1);
    dbuf dx = dalloc((size_t)n * in * 2);
    dput(dx, 0, x.b, dx.bytes);
    dbuf dy[MAXE], dref[MAXE];
    frt_cuda_gemv_entry ent[MAXE];
    void *runs[3][MAXE];
    for (int e = 0; e < s->n_ent; e++) {
        const size_t yb = (size_t)n * s->ent_rows[e] * dsize(dts[e]);
        dy[e] = dalloc(yb + pad);
        dref[e] = dalloc(yb);
        dsentinel(dy[e]);
        ent[e].y = dy[e].p;
        ent[e].y_dtype = dts[e];
        ent[e].w = ent_w(s, d, e);
        ent[e].out_dim = s->ent_rows[e];
    }
    for (int r = 0; r < 3; r++) {
        CHECK_OK(frt_cuda_gemv_multi(g_cs, ent, s->n_ent, dx.p, n, in));
        for (int e = 0; e < s->n_ent; e++)
            runs[r][e] = snap(dy[e], (size_t)n * s->ent_rows[e] * dsize(dts[e]));
    }
    for (int e = 0; e < s->n_ent; e++) {
        const int out = s->ent_rows[e];
        const size_t ny = (size_t)n * out, yb = ny * dsize(dts[e]);
        const hmat *w = &d->w[s->ent_mat[e]];
        float *ref = xzalloc(ny * 4), *got = xzalloc(ny * 4);
        frt_cpu_matmul(ref, x.f, w->f + (size_t)s->ent_row0[e] * in, n, in, out);
        dget_as(dy[e], got, ny, dts[e]);
        char name[160];
        snprintf(name, sizeof name, "multi %s [%s] n %d e%d in %d out %d -> %s", s->tag, mode, n, e,
                 in, out, dtn(dts[e]));
        report(name, frt_test_rel_err(got, ref, ny), dts[e] == BF16 ? TOL_BF16 : TOL_GEMM_F32);
        CHECK_MSG(untouched(dy[e], yb, pad), "%s: wrote past y [n, out]", name);
        snprintf(name, sizeof name, "  == gemm_run alone, 3 runs: %s n %d e%d out %d %s", s->tag, n,
                 e, out, dtn(dts[e]));
        gemm_ref(g, dref[e].p, dts[e], dx.p, ent_w(s, d, e), n, in, out);
        void *alone = snap(dref[e], yb);
        report_same(name, !memcmp(runs[0][e], alone, yb) && !memcmp(runs[0][e], runs[1][e], yb) &&
                              !memcmp(runs[0][e], runs[2][e], yb));
        free(alone);
        free(ref);
        free(got);
    }
    for (int e = 0; e < s->n_ent; e++) {
        for (int r = 0; r < 3; r++) free(runs[r][e]);
        dfree(&dy[e]);
        dfree(&dref[e]);
    }
    hmat_free(&x);
    dfree(&dx);
}

/* Every n in ns and three dtype modes: all f32, all bf16, mixed. */
static void multi_set(frt_cuda_gemm *g, const mset *s, const int *ns, int n_ns)
{
    mdata d = mdata_make(s);
    for (int i = 0; i < n_ns; i++) {
        frt_cuda_dtype all32[MAXE], all16[MAXE], mixed[MAXE];
        for (int e = 0; e < MAXE; e++) {
            all32[e] = F32;
            all16[e] = BF16;
            mixed[e] = ((e + ns[i]) & 1) ? BF16 : F32;
        }
        multi_case(g, s, &d, ns[i], all32, "f32");
        multi_case(g, s, &d, ns[i], all16, "bf16");
        multi_case(g, s, &d, ns[i], mixed, "mixed");
    }
    mdata_free(s, &d);
}

/* ---- frt_cuda_gemv_swiglu -------------------------------------------------- */

/* y = silu(x Wg^T) * (x Wu^T) at n, f32 and bf16 out: against the twin, and
 * against frt_cuda_gemm_run (gate, up; f32) + frt_cuda_swiglu (bits); 3 runs.
 * Weights in [-0.05, 0.05) (x . w of order 1: silu is not linear there), in
 * [0, 0.05) with x in [0, 1) below 64 outputs. */
static void swiglu_shape(frt_cuda_gemm *g, const char *tag, int in, int inter, const int *ns,
                         int n_ns)
{
    const float lo = inter < 64 ? 0.0f : -1.0f;
    hmat wg = hmat_rand(&g_rng, inter, in, 0.05f * lo, 0.05f), wu = hmat_rand(&g_rng, inter, in, 0.05f * lo, 0.05f);
    dbuf dwg = dmat(&wg), dwu = dmat(&wu);
    for (int i = 0; i < n_ns; i++) {
        const int n = ns[i];
        const size_t ny = (size_t)n * inter, pad = 256;
        hmat x = hmat_rand(&g_rng, n, in, lo, 1);
        dbuf dx = dalloc((size_t)n * in * 2);
        dput(dx, 0, x.b, dx.bytes);
        float *rg = xzalloc(ny * 4), *ru = xzalloc(ny * 4), *ref = xzalloc(ny * 4);
        float *got = xzalloc(ny * 4);
        frt_cpu_matmul(rg, x.f, wg.f, n, in, inter);
        frt_cpu_matmul(ru, x.f, wu.f, n, in, inter);
        frt_cpu_swiglu(ref, rg, ru, (int)ny);
        dbuf dg = dalloc(ny * 4), du = dalloc(ny * 4);
        for (int k = 0; k < 2; k++) {
            const frt_cuda_dtype dt = k ? BF16 : F32;
            const size_t yb = ny * dsize(dt);
            dbuf dy = dalloc(yb + pad), dref = dalloc(yb);
            dsentinel(dy);
            void *runs[3];
            for (int r = 0; r < 3; r++) {
                CHECK_OK(frt_cuda_gemv_swiglu(g_cs, dy.p, dt, dx.p, dwg.p, dwu.p, n, in, inter));
                runs[r] = snap(dy, yb);
            }
            dget_as(dy, got, ny, dt);
            char name[160];
            snprintf(name, sizeof name, "swiglu %s n %d in %d inter %d -> %s", tag, n, in, inter,
                     dtn(dt));
            report(name, frt_test_rel_err(got, ref, ny), dt == BF16 ? TOL_BF16 : TOL_GEMM_F32);
            CHECK_MSG(untouched(dy, yb, pad), "%s: wrote past y [n, inter]", name);
            gemm_ref(g, dg.p, F32, dx.p, dwg.p, n, in, inter);
            gemm_ref(g, du.p, F32, dx.p, dwu.p, n, in, inter);
            CHECK_OK(frt_cuda_swiglu(g_cs, dref.p, dt, dg.p, du.p, F32, NULL, n, inter));
            void *chain = snap(dref, yb);
            snprintf(name, sizeof name, "  == gemm_run x2 + swiglu, 3 runs: %s n %d %s", tag, n,
                     dtn(dt));
            report_same(name, !memcmp(runs[0], chain, yb) && !memcmp(runs[0], runs[1], yb) &&
                                  !memcmp(runs[0], runs[2], yb));
            free(chain);
            for (int r = 0; r < 3; r++) free(runs[r]);
            dfree(&dy);
            dfree(&dref);
        }
        free(rg), free(ru), free(ref), free(got);
        dfree(&dg), dfree(&du), dfree(&dx);
        hmat_free(&x);
    }
    hmat_free(&wg), hmat_free(&wu);
    dfree(&dwg), dfree(&dwu);
}

/* ---- CUDA graph ------------------------------------------------------------ */

typedef struct fgraph {
    const mset *s, *big;
    const mdata *d, *dbig;
    frt_cuda_gemv_entry ent[MAXE], ebig[MAXE];
    int in, inter, nbig;
    dbuf x, xbig, wg, wu, y;
} fgraph;

/* decode (n 1): q | k | v and the MLP; and a 4-row call with x of 96 KiB */
static int record_fused(frt_stream *stream, void *user)
{
    fgraph *f = user;
    void *st = frt_stream_native(stream);
    FRT_TEST_TRY_(frt_cuda_gemv_multi(st, f->ent, f->s->n_ent, f->x.p, 1, f->in));
    FRT_TEST_TRY_(frt_cuda_gemv_swiglu(st, f->y.p, BF16, f->x.p, f->wg.p, f->wu.p, 1, f->in,
                                       f->inter));
    FRT_TEST_TRY_(frt_cuda_gemv_multi(st, f->ebig, f->big->n_ent, f->xbig.p, f->nbig, f->big->in));
    return 0;
}

static void test_graph(const mset *s, const mset *big)
{
    fgraph f;
    memset(&f, 0, sizeof f);
    f.s = s;
    f.big = big;
    f.in = s->in;
    f.inter = 12288;
    f.nbig = 4;
    mdata d = mdata_make(s), dbig = mdata_make(big);
    hmat wg = hmat_rand(&g_rng, f.inter, f.in, -0.05f, 0.05f), wu = hmat_rand(&g_rng, f.inter, f.in, -0.05f, 0.05f);
    f.wg = dmat(&wg);
    f.wu = dmat(&wu);
    f.x = dalloc((size_t)f.in * 2);
    f.xbig = dalloc((size_t)f.nbig * big->in * 2);
    f.y = dalloc((size_t)f.inter * 2);
    dbuf dy[MAXE], dyb[MAXE];
    for (int e = 0; e < s->n_ent; e++) {
        dy[e] = dalloc((size_t)s->ent_rows[e] * 4);
        f.ent[e] = (frt_cuda_gemv_entry){dy[e].p, e == 1 ? BF16 : F32, ent_w(s, &d, e),
                                         s->ent_rows[e]};
    }
    for (int e = 0; e < big->n_ent; e++) {
        dyb[e] = dalloc((size_t)f.nbig * big->ent_rows[e] * 4);
        f.ebig[e] = (frt_cuda_gemv_entry){dyb[e].p, F32, ent_w(big, &dbig, e), big->ent_rows[e]};
    }
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "gemv-fused", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_fused, &f));
    float *rg = xzalloc((size_t)f.inter * 4), *ru = xzalloc((size_t)f.inter * 4);
    float *ref = xzalloc((size_t)f.inter * 4), *got = xzalloc((size_t)f.inter * 4);
    for (int rep = 0; rep < 3 && graph; rep++) {
        hmat x = hmat_rand(&g_rng, 1, f.in, d.x_lo, 1), xb = hmat_rand(&g_rng, f.nbig, big->in, dbig.x_lo, 1);
        dput(f.x, 0, x.b, f.x.bytes);
        dput(f.xbig, 0, xb.b, f.xbig.bytes);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        char name[160];
        for (int e = 0; e < s->n_ent; e++) {
            const int out = s->ent_rows[e];
            frt_cpu_matmul(ref, x.f, d.w[s->ent_mat[e]].f + (size_t)s->ent_row0[e] * f.in, 1, f.in,
                           out);
            dget_as(dy[e], got, (size_t)out, f.ent[e].y_dtype);
            snprintf(name, sizeof name, "graph replay %d: multi %s e%d out %d -> %s", rep, s->tag,
                     e, out, dtn(f.ent[e].y_dtype));
            report(name, frt_test_rel_err(got, ref, (size_t)out),
                   f.ent[e].y_dtype == BF16 ? TOL_BF16 : TOL_GEMM_F32);
        }
        frt_cpu_matmul(rg, x.f, wg.f, 1, f.in, f.inter);
        frt_cpu_matmul(ru, x.f, wu.f, 1, f.in, f.inter);
        frt_cpu_swiglu(ref, rg, ru, f.inter);
        dget_as(f.y, got, (size_t)f.inter, BF16);
        snprintf(name, sizeof name, "graph replay %d: swiglu n 1 in %d inter %d -> bf16", rep, f.in,
                 f.inter);
        report(name, frt_test_rel_err(got, ref, (size_t)f.inter), TOL_BF16);
        for (int e = 0; e < big->n_ent; e++) {
            const size_t ny = (size_t)f.nbig * big->ent_rows[e];
            float *rb = xzalloc(ny * 4), *gb = xzalloc(ny * 4);
            frt_cpu_matmul(rb, xb.f, dbig.w[big->ent_mat[e]].f + (size_t)big->ent_row0[e] * big->in,
                           f.nbig, big->in, big->ent_rows[e]);
            dget_as(dyb[e], gb, ny, F32);
            snprintf(name, sizeof name, "graph replay %d: multi %s n %d e%d in %d out %d -> f32",
                     rep, big->tag, f.nbig, e, big->in, big->ent_rows[e]);
            report(name, frt_test_rel_err(gb, rb, ny), TOL_GEMM_F32);
            free(rb), free(gb);
        }
        hmat_free(&x);
        hmat_free(&xb);
    }
    frt_graph_destroy(graph);
    free(rg), free(ru), free(ref), free(got);
    for (int e = 0; e < s->n_ent; e++) dfree(&dy[e]);
    for (int e = 0; e < big->n_ent; e++) dfree(&dyb[e]);
    hmat_free(&wg), hmat_free(&wu);
    dfree(&f.wg), dfree(&f.wu), dfree(&f.x), dfree(&f.xbig), dfree(&f.y);
    mdata_free(s, &d);
    mdata_free(big, &dbig);
}

/* ---- bad arguments ---------------------------------------------------------- */

static void test_bad_args(void)
{
    /* fake, never dereferenced pointers: every check below fails before
     * anything touches the device */
    char *p = (char *)(uintptr_t)0x10000;
    const uint16_t *x = (const uint16_t *)p, *w = (const uint16_t *)(p + 0x1000);
    void *y0 = p + 0x2000, *y1 = p + 0x3000;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    frt_cuda_gemv_entry ok[2] = {{y0, F32, w, 1024}, {y1, BF16, w, 32}};
    frt_cuda_gemv_entry e[2];

    CHECK_STATUS(frt_cuda_gemv_multi(NULL, NULL, 1, x, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 0, x, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, MAXE + 1, x, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, NULL, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, x, 0, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, x, FRT_CUDA_GEMV_MAX_N + 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, x, 1, 0), E);
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, x, 1, 4100), E);     /* in % 8 */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, x + 4, 1, 4096), E); /* x alignment */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 2, x, 4, 65536), E);    /* x: 512 KiB */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, ok, 1, x, 1, 131072), E);   /* x: 256 KiB */
    memcpy(e, ok, sizeof e), e[1].y = NULL;
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[0].w = NULL;
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y_dtype = (frt_cuda_dtype)2;
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].out_dim = 0;
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[0].out_dim = -3;
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].w = w + 4; /* 8 bytes off */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[0].y = p + 0x2002; /* f32 at 2 bytes */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y = p + 0x3001; /* bf16 at 1 byte */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y = (void *)x; /* y == x */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y = y0; /* two entries, one y */
    CHECK_STATUS(frt_cuda_gemv_multi(NULL, e, 2, x, 1, 4096), E);

    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, NULL, BF16, x, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, NULL, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, NULL, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, NULL, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, (frt_cuda_dtype)7, x, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, w, 0, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, w, FRT_CUDA_GEMV_MAX_N + 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, w, 1, 4092, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, w, 1, 4096, 0), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x + 1, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w + 2, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, w + 1, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, p + 0x2003, BF16, x, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, p + 0x2002, F32, x, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, (void *)x, BF16, x, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu(NULL, y0, BF16, x, w, w, 4, 65536, 12288), E); /* x size */
}

/* ---- timing -------------------------------------------------------------- */

enum { B_MULTI, B_SEPARATE, B_SWIGLU, B_SWIGLU_SEPARATE };

typedef struct fbench {
    frt_cuda_gemm *g;
    const mset *s;
    int kind, n, copies, reps;
    size_t copy_bytes, mat_off[MAXE];
    dbuf w, x, y[MAXE];
} fbench;

static int record_bench(frt_stream *stream, void *user)
{
    fbench *b = user;
    const mset *s = b->s;
    void *st = frt_stream_native(stream);
    for (int i = 0; i < b->reps; i++) {
        const char *base = (const char *)b->w.p + (size_t)(i % b->copies) * b->copy_bytes;
        const uint16_t *mw[MAXE];
        for (int m = 0; m < s->n_mats; m++) mw[m] = (const uint16_t *)(base + b->mat_off[m]);
        if (b->kind == B_MULTI) {
            frt_cuda_gemv_entry ent[MAXE];
            for (int e = 0; e < s->n_ent; e++)
                ent[e] = (frt_cuda_gemv_entry){b->y[e].p, F32,
                                               mw[s->ent_mat[e]] + (size_t)s->ent_row0[e] * s->in,
                                               s->ent_rows[e]};
            FRT_TEST_TRY_(frt_cuda_gemv_multi(st, ent, s->n_ent, b->x.p, b->n, s->in));
        } else if (b->kind == B_SEPARATE) {
            for (int m = 0; m < s->n_mats; m++)
                FRT_TEST_TRY_(frt_cuda_gemm_run(b->g, st, b->y[m].p, F32, b->x.p, mw[m], b->n,
                                                s->in, s->mat_rows[m], 0));
        } else if (b->kind == B_SWIGLU) {
            FRT_TEST_TRY_(frt_cuda_gemv_swiglu(st, b->y[0].p, BF16, b->x.p, mw[0], mw[1], b->n,
                                               s->in, s->mat_rows[0]));
        } else {
            const int I = s->mat_rows[0];
            FRT_TEST_TRY_(
                frt_cuda_gemm_run(b->g, st, b->y[1].p, F32, b->x.p, mw[0], b->n, s->in, I, 0));
            FRT_TEST_TRY_(
                frt_cuda_gemm_run(b->g, st, b->y[2].p, F32, b->x.p, mw[1], b->n, s->in, I, 0));
            FRT_TEST_TRY_(frt_cuda_swiglu(st, b->y[0].p, BF16, b->y[1].p, b->y[2].p, F32, NULL,
                                          b->n, I));
        }
    }
    return 0;
}

/* Microseconds per call: a graph of back-to-back calls cycling over copies
 * of the set's weights (>= 256 MiB in all, so the L2 holds none of them), one
 * warm-up replay, then one timed replay. < 0 on failure. */
static double time_set(frt_cuda_gemm *g, const mset *s, int kind, int n)
{
    fbench b;
    memset(&b, 0, sizeof b);
    b.g = g;
    b.s = s;
    b.kind = kind;
    b.n = n;
    int max_rows = 0;
    for (int m = 0; m < s->n_mats; m++) {
        b.mat_off[m] = b.copy_bytes;
        b.copy_bytes += (size_t)s->mat_rows[m] * s->in * 2;
        if (s->mat_rows[m] > max_rows) max_rows = s->mat_rows[m];
        if (kind == B_SEPARATE || kind == B_SWIGLU_SEPARATE)
            CHECK_OK(frt_cuda_gemm_plan(g, n, s->in, s->mat_rows[m], F32, 0));
    }
    const size_t min_total = (size_t)256 << 20;
    b.copies = (int)((min_total + b.copy_bytes - 1) / b.copy_bytes);
    b.reps = (int)(((size_t)2 << 30) / b.copy_bytes);
    if (b.reps < 8) b.reps = 8;
    if (b.reps > 200) b.reps = 200;
    b.w = dalloc(b.copies * b.copy_bytes);
    b.x = dalloc((size_t)n * s->in * 2);
    for (int e = 0; e < MAXE; e++) b.y[e] = dalloc((size_t)n * max_rows * 4);
    /* bf16 0x3C3C = 0.0115: finite values; the time does not depend on them */
    must(frt_buffer_fill(b.w.b, 0, b.w.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(b.x.b, 0, b.x.bytes, 0x3C, g_st), "fill");
    const double us = graph_us("gemv-fused-bench", record_bench, &b, b.reps);
    dfree(&b.w);
    dfree(&b.x);
    for (int e = 0; e < MAXE; e++) dfree(&b.y[e]);
    return us;
}

static void time_group(frt_cuda_gemm *g, const mset *s, int swiglu, int n)
{
    double bytes = 0;
    for (int m = 0; m < s->n_mats; m++) bytes += (double)s->mat_rows[m] * s->in * 2;
    const double floor_us = bytes / HBM_BYTES_PER_S * 1e6;
    const double tf = time_set(g, s, swiglu ? B_SWIGLU : B_MULTI, n);
    const double ts = time_set(g, s, swiglu ? B_SWIGLU_SEPARATE : B_SEPARATE, n);
    printf("  time %-22s n %d %6.1f MB: floor %6.1f us | fused %6.1f us %5.2f TB/s %5.1f%% "
           "(1 launch) | unfused %6.1f us (%d launches)\n",
           s->tag, n, bytes / 1e6, floor_us, tf, bytes / (tf * 1e-6) / 1e12,
           100.0 * floor_us / tf, ts, swiglu ? 3 : s->n_mats);
}

/* ---- main ------------------------------------------------------------------ */

int main(void)
{
    printf("  %-66s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();

    /* the unfused reference path: frt_cuda_gemm_run with GEMV plans */
    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create(0, &g), "gemm");
    must(frt_cuda_gemm_set_gemv(g, FRT_CUDA_GEMV_ALWAYS), "policy");

    const int n1234[6] = {1, 2, 3, 4, 5, 8}, n14[3] = {1, 4, 8}, n34[2] = {3, 4};
    /* qwen3.5-9b (hidden 4096): full attention q|gate, k, v; Gated DeltaNet
     * in_proj_qkv (2 x 16 x 128 + 32 x 128), z, and b | a from one matrix */
    const mset attn9 = {"9b q|k|v", 4096, 3, 3, {8192, 1024, 1024},
                        {0, 1, 2}, {0, 0, 0}, {8192, 1024, 1024}};
    const mset gdn9 = {"9b qkv|z|b|a", 4096, 3, 4, {12288, 4096, 64},
                       {0, 1, 2, 2}, {0, 0, 0, 32}, {12288, 4096, 32, 32}};
    /* the 27B (hidden 5120): 24 q heads x 256 (x2 gate), 4 KV heads x 256;
     * in_proj_qkv 2 x 16 x 128 + 48 x 128, z 48 x 128, b | a 48 each */
    const mset attn27 = {"27b q|k|v", 5120, 3, 3, {12288, 1024, 1024},
                         {0, 1, 2}, {0, 0, 0}, {12288, 1024, 1024}};
    const mset gdn27 = {"27b qkv|z|b|a", 5120, 3, 4, {10240, 6144, 96},
                        {0, 1, 2, 2}, {0, 0, 0, 48}, {10240, 6144, 48, 48}};
    /* odd sizes: out 1, 3, 7, 13, rows past a matrix's end of a block,
     * in_dim not a multiple of 256, entries in and out of size order */
    const mset odd1 = {"odd", 72, 4, 4, {7, 1, 13, 3}, {0, 1, 2, 3}, {0, 0, 0, 0}, {7, 1, 13, 3}};
    const mset odd2 = {"odd", 1000, 2, 3, {3, 1000}, {0, 1, 1}, {0, 0, 999}, {3, 999, 1}};
    const mset odd3 = {"odd", 2056, 3, 3, {13, 2050, 1}, {0, 1, 2}, {0, 0, 0}, {13, 2050, 1}};
    const mset odd4 = {"odd", 4104, 2, 2, {64, 1000}, {0, 1}, {0, 0}, {64, 1000}};
    /* x over 48 KiB: n 4 x 12288 (96 KiB, 8 warps), 17408 (27B down's in_dim:
     * 136 KiB at n 4, 102 KiB at n 3, 16 warps) */
    const mset big1 = {"big x", 12288, 2, 2, {4096, 100}, {0, 1}, {0, 0}, {4096, 100}};
    const mset big2 = {"big x", 17408, 2, 2, {5120, 13}, {0, 1}, {0, 0}, {5120, 13}};

    multi_set(g, &attn9, n1234, 6);
    multi_set(g, &gdn9, n1234, 6);
    multi_set(g, &attn27, n14, 3);
    multi_set(g, &gdn27, n14, 3);
    multi_set(g, &odd1, n1234, 6);
    multi_set(g, &odd2, n1234, 6);
    multi_set(g, &odd3, n14, 3);
    multi_set(g, &odd4, n14, 3);
    multi_set(g, &big1, n34, 2);
    multi_set(g, &big2, n34, 2);

    swiglu_shape(g, "9b mlp", 4096, 12288, n1234, 6);
    swiglu_shape(g, "27b mlp", 5120, 17408, n14, 3);
    swiglu_shape(g, "odd", 72, 7, n1234, 6);
    swiglu_shape(g, "odd", 264, 1, n1234, 6);
    swiglu_shape(g, "odd", 1000, 13, n14, 3);
    swiglu_shape(g, "odd", 4104, 1000, n14, 3);
    swiglu_shape(g, "odd", 2056, 2050, n14, 3);
    swiglu_shape(g, "big x", 12296, 300, n34, 2);

    test_graph(&attn9, &big1);

    printf("  timings (graph of back-to-back calls, weights not in L2; floor = weight bytes / "
           "%.1f TB/s; unfused = frt_cuda_gemm_run per matrix (+ frt_cuda_swiglu)):\n",
           HBM_BYTES_PER_S / 1e12);
    const mset mlp9 = {"9b mlp gate,up", 4096, 2, 0, {12288, 12288}, {0}, {0}, {0}};
    for (int n = 1; n <= FRT_CUDA_GEMV_MAX_N; n = n == 1 ? 4 : n * 2) {
        time_group(g, &attn9, 0, n);
        time_group(g, &gdn9, 0, n);
        time_group(g, &mlp9, 1, n);
    }

    frt_cuda_gemm_destroy(g);
    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
