/*
 * test_cuda_gemv_norm.c - the decode GEMVs with the residual stream folded in
 * (src/kernels/cuda/gemv.cu): frt_cuda_gemv_multi_norm and
 * frt_cuda_gemv_swiglu_norm (x = bf16(rmsnorm(resid)) computed by every
 * block in its prologue) and the accumulating GEMV of frt_cuda_gemm_run
 * (y += x . W^T, the residual add of decode's output projections), on random
 * data (SplitMix64, kernels/cpu/rng.h):
 *   - resid [n, in] f32 drawn as N(0, sigma) with sigma in [1, 30) per row
 *     (the magnitudes of a real residual stream), norm weights in [-0.5, 0.5)
 *     (zero-centred, Qwen3.5's 1 + w) or [0.5, 1.5) (plain), eps 1e-6;
 *   - the shapes of qwen3.5-9b (4096 -> 8192 | 1024 | 1024, 4096 -> 12288 |
 *     4096 | 32 | 32 with b | a from one matrix, 4096 -> 12288 x2 SwiGLU),
 *     the 27B's hidden 5120 (rmsnorm.cu's 320 threads: more "virtual threads"
 *     than the block has), odd ones (in 72 -> 5, 264, 1000, 2056), in 16384
 *     (two batches of groups per virtual thread) and in 17408 (rmsnorm.cu's
 *     strided loop, x over 48 KiB at n 3: 16-warp blocks), n = 1..4;
 *   - against the unfused GPU path (frt_cuda_rmsnorm to bf16, then
 *     frt_cuda_gemv_multi / frt_cuda_gemv_swiglu): the number of outputs
 *     whose bits differ (must be 0: the prologue replays rmsnorm.cu's
 *     operations in its order) and their largest relative difference;
 *   - against the CPU twin (frt_cpu_rmsnorm, rounded to bf16, then
 *     frt_cpu_matmul per entry / x2 + frt_cpu_swiglu), norm-wise
 *     ||gpu - cpu|| / ||cpu|| within 1e-4 (f32 out) or 1e-2 (bf16 out);
 *   - 3 runs give identical bytes; bytes past each y stay untouched
 *     (sentinel); the residual is not written;
 *   - frt_cuda_gemm_run's accumulating GEMV == frt_cuda_gemm_run into a
 *     delta + frt_cuda_add (bits), f32 and bf16 y, kw 1, 2 and 8 shapes;
 *   - a CUDA graph (frt_graph_capture) of both _norm launchers and an
 *     accumulating GEMV, replayed with new residuals and norm weights, a
 *     16-warp launch with x over 48 KiB included;
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before anything is
 *     enqueued (they also run on machines without a GPU).
 * Then times, in CUDA graphs of back-to-back calls over weight copies that
 * defeat the 50 MB L2, each _norm launcher against the plain launcher (the
 * prologue's cost) and against rmsnorm + the plain launcher, and one decode
 * layer's MLP + next mixer GEMVs fused (3 launches) against the unfused
 * chain (add_rmsnorm, swiglu, down, add_rmsnorm, multi: 5 launches), next to
 * the HBM floor (weight bytes / 4.2 TB/s). The timings are printed, not
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

#define FRT_TEST_CUDA_COL 70
#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#define TOL_GEMM_F32 1e-4
#define TOL_BF16 1e-2
#define EPS 1e-6f
#define HBM_BYTES_PER_S 4.2e12 /* measured device-to-device copy rate of the H200 */
#define MAXE FRT_CUDA_GEMV_MULTI_MAX

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness ---------------------------------------------------------- */

static uint64_t g_rng = 20261207;

/* A standard normal draw (Box-Muller on two uniforms). */
static float gauss(void)
{
    float u1 = frt_rng_uniform(&g_rng), u2 = frt_rng_uniform(&g_rng);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

/* A residual [n, in]: row t ~ N(0, sigma_t), sigma_t in [1, 30); |.| when
 * positive (with weights >= 0 no output cancels to near zero). */
static float *resid_rand(int n, int in, int positive)
{
    float *x = xzalloc((size_t)n * in * sizeof(float));
    for (int t = 0; t < n; t++) {
        const float sigma = 1.0f + 29.0f * frt_rng_uniform(&g_rng);
        for (int i = 0; i < in; i++) {
            float v = sigma * gauss();
            x[(size_t)t * in + i] = positive ? fabsf(v) : v;
        }
    }
    return x;
}

/* A norm weight [in]: zero-centred in [-0.5, 0.5), plain in [0.5, 1.5). */
static float *normw_rand(int in, int zc)
{
    float *w = xzalloc((size_t)in * sizeof(float));
    for (int i = 0; i < in; i++) w[i] = (zc ? -0.5f : 0.5f) + frt_rng_uniform(&g_rng);
    return w;
}

/* x = bf16(rmsnorm(resid)) as the CPU twin gives it, widened to f32. */
static float *cpu_norm_bf16(const float *resid, const float *w, int n, int in, int zc)
{
    float *x = xzalloc((size_t)n * in * sizeof(float));
    frt_cpu_rmsnorm(x, resid, w, n, in, EPS, zc);
    round_bf16(x, (size_t)n * in);
    return x;
}

static dbuf dmat(const hmat *m)
{
    dbuf d = dalloc((size_t)m->rows * m->cols * 2);
    dput(d, 0, m->b, d.bytes);
    return d;
}

static dbuf dfloats(const float *x, size_t n)
{
    dbuf d = dalloc(n * sizeof(float));
    dput(d, 0, x, d.bytes);
    return d;
}

/* One row of the table: a fused result against the unfused GPU path. The
 * number of outputs whose bits differ (must be 0) and the largest relative
 * difference among them. */
static void report_bits(const char *name, const void *a, const void *b, size_t n,
                        frt_cuda_dtype dt)
{
    size_t diff = 0;
    double maxrel = 0;
    for (size_t i = 0; i < n; i++) {
        float fa, fb;
        if (dt == BF16) {
            const uint16_t ua = ((const uint16_t *)a)[i], ub = ((const uint16_t *)b)[i];
            if (ua == ub) continue;
            fa = frt_bf16_to_f32(ua), fb = frt_bf16_to_f32(ub);
        } else {
            if (!memcmp((const float *)a + i, (const float *)b + i, sizeof(float))) continue;
            fa = ((const float *)a)[i], fb = ((const float *)b)[i];
        }
        diff++;
        const double den = fabs((double)fb) > 1e-30 ? fabs((double)fb) : 1e-30;
        const double rel = fabs((double)fa - fb) / den;
        if (!(rel <= maxrel)) maxrel = rel;
    }
    char val[32];
    snprintf(val, sizeof val, "%zu/%zu", diff, n);
    printf("  %-*s %10s %8s %s  (outputs differing; max rel diff %.1e)\n", FRT_TEST_CUDA_COL, name,
           val, "0 bits", diff ? "FAIL" : "ok", maxrel);
    CHECK_MSG(diff == 0, "%s: %zu of %zu outputs differ from the unfused path (max rel %.1e)",
              name, diff, n, maxrel);
}

/* Makes the plan of a key and checks it is the GEMV. */
static void plan_gemv(frt_cuda_gemm *g, int n, int in, int out, frt_cuda_dtype dt, int acc)
{
    CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, dt, acc));
    frt_cuda_gemm_plan_info info;
    CHECK_MSG(plan_of(g, n, in, out, dt, acc, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_GEMV,
              "n %d in %d out %d acc %d: the gemm plan is not the GEMV", n, in, out, acc);
}

/* ---- frt_cuda_gemv_multi_norm ------------------------------------------- */

/* A group of products of one x: matrices stored apart, entries = row ranges
 * of them (b and a: two ranges of one matrix). */
typedef struct mset {
    const char *tag;
    int in, n_mats, n_ent;
    int mat_rows[MAXE];
    int ent_mat[MAXE], ent_row0[MAXE], ent_rows[MAXE];
} mset;

/* The weights of a set. A matrix with an entry of fewer than 64 rows is in
 * [0, 1), and the residual is positive when any entry is (see resid_rand);
 * the others are in [-1, 1). */
typedef struct mdata {
    hmat w[MAXE];
    dbuf dw[MAXE];
    int positive;
} mdata;

static mdata mdata_make(const mset *s)
{
    mdata d;
    memset(&d, 0, sizeof d);
    float lo[MAXE];
    for (int m = 0; m < MAXE; m++) lo[m] = -1.0f;
    for (int e = 0; e < s->n_ent; e++)
        if (s->ent_rows[e] < 64) {
            lo[s->ent_mat[e]] = 0.0f;
            d.positive = 1;
        }
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

/* One call of the set at n, output dtypes dts, zero-centred or not. */
static void multi_case(const mset *s, const mdata *d, int n, const frt_cuda_dtype *dts, int zc,
                       const char *mode)
{
    const int in = s->in;
    const size_t nx = (size_t)n * in, pad = 256;
    float *resid = resid_rand(n, in, d->positive), *nw = normw_rand(in, zc);
    float *xn = cpu_norm_bf16(resid, nw, n, in, zc);
    dbuf dres = dfloats(resid, nx), dnw = dfloats(nw, (size_t)in), dh = dalloc(nx * 2);
    const frt_cuda_gemv_norm nm = {(const float *)dres.p, (const float *)dnw.p, EPS, zc};
    dbuf dy[MAXE], dref[MAXE];
    frt_cuda_gemv_entry ent[MAXE], eref[MAXE];
    void *runs[3][MAXE];
    for (int e = 0; e < s->n_ent; e++) {
        const size_t yb = (size_t)n * s->ent_rows[e] * dsize(dts[e]);
        dy[e] = dalloc(yb + pad);
        dref[e] = dalloc(yb);
        dsentinel(dy[e]);
        ent[e] = (frt_cuda_gemv_entry){dy[e].p, dts[e], ent_w(s, d, e), s->ent_rows[e]};
        eref[e] = ent[e];
        eref[e].y = dref[e].p;
    }
    for (int r = 0; r < 3; r++) {
        CHECK_OK(frt_cuda_gemv_multi_norm(g_cs, ent, s->n_ent, &nm, n, in));
        for (int e = 0; e < s->n_ent; e++)
            runs[r][e] = snap(dy[e], (size_t)n * s->ent_rows[e] * dsize(dts[e]));
    }
    /* the unfused path: rmsnorm to bf16, then the plain multi GEMV */
    CHECK_OK(frt_cuda_rmsnorm(g_cs, dh.p, BF16, dres.p, F32, dnw.p, NULL, n, 1, in, EPS, zc));
    CHECK_OK(frt_cuda_gemv_multi(g_cs, eref, s->n_ent, dh.p, n, in));
    char name[200];
    for (int e = 0; e < s->n_ent; e++) {
        const int out = s->ent_rows[e];
        const size_t ny = (size_t)n * out, yb = ny * dsize(dts[e]);
        const hmat *w = &d->w[s->ent_mat[e]];
        float *ref = xzalloc(ny * 4), *got = xzalloc(ny * 4);
        frt_cpu_matmul(ref, xn, w->f + (size_t)s->ent_row0[e] * in, n, in, out);
        dget_as(dy[e], got, ny, dts[e]);
        snprintf(name, sizeof name, "multi_norm %s [%s%s] n %d e%d in %d out %d -> %s", s->tag,
                 mode, zc ? "" : ", plain w", n, e, in, out, dtn(dts[e]));
        report(name, frt_test_rel_err(got, ref, ny), dts[e] == BF16 ? TOL_BF16 : TOL_GEMM_F32);
        CHECK_MSG(untouched(dy[e], yb, pad), "%s: wrote past y [n, out]", name);
        void *unfused = snap(dref[e], yb);
        snprintf(name, sizeof name, "  vs rmsnorm + multi: %s n %d e%d out %d %s", s->tag, n, e,
                 out, dtn(dts[e]));
        report_bits(name, runs[0][e], unfused, ny, dts[e]);
        snprintf(name, sizeof name, "  3 runs: %s n %d e%d", s->tag, n, e);
        report_same(name, runs[0][e], runs[1][e], yb);
        CHECK(!memcmp(runs[0][e], runs[2][e], yb));
        free(unfused);
        free(ref);
        free(got);
    }
    float *after = snap(dres, nx * 4);
    CHECK_MSG(!memcmp(after, resid, nx * 4), "multi_norm %s n %d: the residual was written",
              s->tag, n);
    free(after);
    for (int e = 0; e < s->n_ent; e++) {
        for (int r = 0; r < 3; r++) free(runs[r][e]);
        dfree(&dy[e]);
        dfree(&dref[e]);
    }
    free(resid), free(nw), free(xn);
    dfree(&dres), dfree(&dnw), dfree(&dh);
}

/* Every n in ns: all f32 (zero-centred), all bf16 (zero-centred), mixed
 * (plain weight). */
static void multi_set(const mset *s, const int *ns, int n_ns)
{
    mdata d = mdata_make(s);
    for (int i = 0; i < n_ns; i++) {
        frt_cuda_dtype all32[MAXE], all16[MAXE], mixed[MAXE];
        for (int e = 0; e < MAXE; e++) {
            all32[e] = F32;
            all16[e] = BF16;
            mixed[e] = ((e + ns[i]) & 1) ? BF16 : F32;
        }
        multi_case(s, &d, ns[i], all32, 1, "f32");
        multi_case(s, &d, ns[i], all16, 1, "bf16");
        multi_case(s, &d, ns[i], mixed, 0, "mixed");
    }
    mdata_free(s, &d);
}

/* ---- frt_cuda_gemv_swiglu_norm ------------------------------------------- */

/* y = silu(x Wg^T) * (x Wu^T), x = bf16(rmsnorm(resid)), at every n in ns,
 * bf16 and f32 out. Weights in [-0.05, 0.05) (x . w of order 1: silu is not
 * linear there); below 64 outputs [0, 0.05) with a positive residual. */
static void swiglu_shape(const char *tag, int in, int inter, const int *ns, int n_ns)
{
    const int positive = inter < 64;
    const float lo = positive ? 0.0f : -0.05f;
    hmat wg = hmat_rand(&g_rng, inter, in, lo, 0.05f), wu = hmat_rand(&g_rng, inter, in, lo, 0.05f);
    dbuf dwg = dmat(&wg), dwu = dmat(&wu);
    char name[200];
    for (int i = 0; i < n_ns; i++) {
        const int n = ns[i];
        const size_t nx = (size_t)n * in, ny = (size_t)n * inter, pad = 256;
        for (int k = 0; k < 2; k++) {
            const frt_cuda_dtype dt = k ? F32 : BF16;
            const int zc = k == 0; /* bf16 out: zero-centred (the model); f32 out: plain */
            float *resid = resid_rand(n, in, positive), *nw = normw_rand(in, zc);
            float *xn = cpu_norm_bf16(resid, nw, n, in, zc);
            dbuf dres = dfloats(resid, nx), dnw = dfloats(nw, (size_t)in), dh = dalloc(nx * 2);
            const frt_cuda_gemv_norm nm = {(const float *)dres.p, (const float *)dnw.p, EPS, zc};
            float *rg = xzalloc(ny * 4), *ru = xzalloc(ny * 4), *ref = xzalloc(ny * 4);
            float *got = xzalloc(ny * 4);
            frt_cpu_matmul(rg, xn, wg.f, n, in, inter);
            frt_cpu_matmul(ru, xn, wu.f, n, in, inter);
            frt_cpu_swiglu(ref, rg, ru, (int)ny);
            const size_t yb = ny * dsize(dt);
            dbuf dy = dalloc(yb + pad), dref = dalloc(yb);
            dsentinel(dy);
            void *runs[3];
            for (int r = 0; r < 3; r++) {
                CHECK_OK(
                    frt_cuda_gemv_swiglu_norm(g_cs, dy.p, dt, &nm, dwg.p, dwu.p, n, in, inter));
                runs[r] = snap(dy, yb);
            }
            dget_as(dy, got, ny, dt);
            snprintf(name, sizeof name, "swiglu_norm %s%s n %d in %d inter %d -> %s", tag,
                     zc ? "" : " [plain w]", n, in, inter, dtn(dt));
            report(name, frt_test_rel_err(got, ref, ny), dt == BF16 ? TOL_BF16 : TOL_GEMM_F32);
            CHECK_MSG(untouched(dy, yb, pad), "%s: wrote past y [n, inter]", name);
            CHECK_OK(
                frt_cuda_rmsnorm(g_cs, dh.p, BF16, dres.p, F32, dnw.p, NULL, n, 1, in, EPS, zc));
            CHECK_OK(frt_cuda_gemv_swiglu(g_cs, dref.p, dt, dh.p, dwg.p, dwu.p, n, in, inter));
            void *unfused = snap(dref, yb);
            snprintf(name, sizeof name, "  vs rmsnorm + swiglu: %s n %d %s", tag, n, dtn(dt));
            report_bits(name, runs[0], unfused, ny, dt);
            snprintf(name, sizeof name, "  3 runs: %s n %d %s", tag, n, dtn(dt));
            report_same(name, runs[0], runs[1], yb);
            CHECK(!memcmp(runs[0], runs[2], yb));
            float *after = snap(dres, nx * 4);
            CHECK_MSG(!memcmp(after, resid, nx * 4), "%s: the residual was written", name);
            free(after);
            free(unfused);
            for (int r = 0; r < 3; r++) free(runs[r]);
            free(rg), free(ru), free(ref), free(got), free(resid), free(nw), free(xn);
            dfree(&dy), dfree(&dref), dfree(&dres), dfree(&dnw), dfree(&dh);
        }
    }
    hmat_free(&wg), hmat_free(&wu);
    dfree(&dwg), dfree(&dwu);
}

/* ---- the accumulating GEMV (decode's residual add) ------------------------ */

/* y += x . W^T through frt_cuda_gemm_run (accumulate) against the unfused
 * form: frt_cuda_gemm_run into an f32 delta, then frt_cuda_add(y, delta): the
 * same bits (fl(sum + y) both ways); and against frt_cpu_matmul_add. */
static void accum_shape(frt_cuda_gemm *g, int in, int out, const int *ns, int n_ns)
{
    hmat w = hmat_rand(&g_rng, out, in, -1.0f, 1.0f);
    dbuf dw = dmat(&w);
    char name[200];
    for (int i = 0; i < n_ns; i++) {
        const int n = ns[i];
        const size_t ny = (size_t)n * out, pad = 256;
        hmat x = hmat_rand(&g_rng, n, in, -1.0f, 1.0f);
        dbuf dx = dalloc((size_t)n * in * 2), dd = dalloc(ny * 4);
        dput(dx, 0, x.b, dx.bytes);
        for (int k = 0; k < 2; k++) {
            const frt_cuda_dtype dt = k ? BF16 : F32;
            const size_t yb = ny * dsize(dt);
            float *y0 = resid_rand(n, out, 0), *ref = xzalloc(ny * 4), *got = xzalloc(ny * 4);
            if (dt == BF16) round_bf16(y0, ny);
            plan_gemv(g, n, in, out, dt, 1);
            plan_gemv(g, n, in, out, F32, 0);
            dbuf dy = dalloc(yb + pad), dy2 = dalloc(yb);
            dsentinel(dy);
            dput_as(dy, y0, ny, dt);
            dput_as(dy2, y0, ny, dt);
            CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, dt, dx.p, dw.p, n, in, out, 1));
            CHECK_OK(frt_cuda_gemm_run(g, g_cs, dd.p, F32, dx.p, dw.p, n, in, out, 0));
            CHECK_OK(frt_cuda_add(g_cs, dy2.p, dt, dd.p, F32, NULL, n, out));
            memcpy(ref, y0, ny * 4);
            frt_cpu_matmul_add(ref, x.f, w.f, n, in, out);
            dget_as(dy, got, ny, dt);
            snprintf(name, sizeof name, "gemm_run accumulate n %d in %d out %d -> %s", n, in, out,
                     dtn(dt));
            report(name, frt_test_rel_err(got, ref, ny), dt == BF16 ? TOL_BF16 : TOL_GEMM_F32);
            CHECK_MSG(untouched(dy, yb, pad), "%s: wrote past y", name);
            void *a = snap(dy, yb), *b = snap(dy2, yb);
            snprintf(name, sizeof name, "  vs gemm_run + add: n %d in %d out %d %s", n, in, out,
                     dtn(dt));
            report_bits(name, a, b, ny, dt);
            free(a), free(b), free(y0), free(ref), free(got);
            dfree(&dy), dfree(&dy2);
        }
        hmat_free(&x);
        dfree(&dx), dfree(&dd);
    }
    hmat_free(&w);
    dfree(&dw);
}

/* ---- CUDA graph ------------------------------------------------------------ */

typedef struct fgraph {
    frt_cuda_gemm *g;
    const mset *s;
    frt_cuda_gemv_entry ent[MAXE], ebig[2];
    frt_cuda_gemv_norm nm, nmbig;
    int in, inter, acc_in, nbig, inbig;
    dbuf res, nw, resbig, nwbig, wg, wu, y, xacc, wacc, yacc;
} fgraph;

/* decode (n 1): the q | k | v GEMVs, the MLP, an accumulating down_proj; and
 * a 3-row call with in 17408 (x of 102 KiB: 16 warps, strided-loop norm) */
static int record_norm(frt_stream *stream, void *user)
{
    fgraph *f = user;
    void *st = frt_stream_native(stream);
    FRT_TEST_TRY_(frt_cuda_gemv_multi_norm(st, f->ent, f->s->n_ent, &f->nm, 1, f->in));
    FRT_TEST_TRY_(frt_cuda_gemv_swiglu_norm(st, f->y.p, BF16, &f->nm, f->wg.p, f->wu.p, 1, f->in,
                                            f->inter));
    FRT_TEST_TRY_(frt_cuda_gemm_run(f->g, st, f->yacc.p, F32, f->xacc.p, f->wacc.p, 1, f->acc_in,
                                    f->in, 1));
    FRT_TEST_TRY_(frt_cuda_gemv_multi_norm(st, f->ebig, 2, &f->nmbig, f->nbig, f->inbig));
    return 0;
}

static void test_graph(frt_cuda_gemm *g, const mset *s)
{
    fgraph f;
    memset(&f, 0, sizeof f);
    f.g = g;
    f.s = s;
    f.in = s->in;
    f.inter = 12288;
    f.acc_in = 12288;
    f.nbig = 3;
    f.inbig = 17408;
    mdata d = mdata_make(s);
    hmat wg = hmat_rand(&g_rng, f.inter, f.in, -0.05f, 0.05f);
    hmat wu = hmat_rand(&g_rng, f.inter, f.in, -0.05f, 0.05f);
    hmat wacc = hmat_rand(&g_rng, f.in, f.acc_in, -1.0f, 1.0f);
    hmat wbig = hmat_rand(&g_rng, 113, f.inbig, -1.0f, 1.0f);
    f.wg = dmat(&wg), f.wu = dmat(&wu), f.wacc = dmat(&wacc);
    dbuf dwbig = dmat(&wbig);
    f.res = dalloc((size_t)f.in * 4), f.nw = dalloc((size_t)f.in * 4);
    f.resbig = dalloc((size_t)f.nbig * f.inbig * 4), f.nwbig = dalloc((size_t)f.inbig * 4);
    f.y = dalloc((size_t)f.inter * 2);
    f.xacc = dalloc((size_t)f.acc_in * 2);
    f.yacc = dalloc((size_t)f.in * 4);
    f.nm = (frt_cuda_gemv_norm){(const float *)f.res.p, (const float *)f.nw.p, EPS, 1};
    f.nmbig = (frt_cuda_gemv_norm){(const float *)f.resbig.p, (const float *)f.nwbig.p, EPS, 1};
    dbuf dy[MAXE], dyb[2];
    for (int e = 0; e < s->n_ent; e++) {
        dy[e] = dalloc((size_t)s->ent_rows[e] * 4);
        f.ent[e] = (frt_cuda_gemv_entry){dy[e].p, e == 1 ? BF16 : F32, ent_w(s, &d, e),
                                         s->ent_rows[e]};
    }
    const int big_rows[2] = {100, 13};
    for (int e = 0; e < 2; e++) {
        dyb[e] = dalloc((size_t)f.nbig * big_rows[e] * 4);
        f.ebig[e] = (frt_cuda_gemv_entry){dyb[e].p, F32,
                                          (const uint16_t *)dwbig.p + (size_t)100 * f.inbig * e,
                                          big_rows[e]};
    }
    plan_gemv(g, 1, f.acc_in, f.in, F32, 1);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "gemv-norm", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_norm, &f));
    float *rg = xzalloc((size_t)f.inter * 4), *ru = xzalloc((size_t)f.inter * 4);
    float *ref = xzalloc((size_t)f.inter * 4), *got = xzalloc((size_t)f.inter * 4);
    char name[200];
    for (int rep = 0; rep < 3 && graph; rep++) {
        float *res = resid_rand(1, f.in, 0), *nw = normw_rand(f.in, 1);
        float *resb = resid_rand(f.nbig, f.inbig, 0), *nwb = normw_rand(f.inbig, 1);
        float *y0 = resid_rand(1, f.in, 0), *yref = xzalloc((size_t)f.in * 4);
        hmat xa = hmat_rand(&g_rng, 1, f.acc_in, -1.0f, 1.0f);
        dput(f.res, 0, res, f.res.bytes);
        dput(f.nw, 0, nw, f.nw.bytes);
        dput(f.resbig, 0, resb, f.resbig.bytes);
        dput(f.nwbig, 0, nwb, f.nwbig.bytes);
        dput(f.yacc, 0, y0, f.yacc.bytes);
        dput(f.xacc, 0, xa.b, f.xacc.bytes);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        float *xn = cpu_norm_bf16(res, nw, 1, f.in, 1);
        float *xnb = cpu_norm_bf16(resb, nwb, f.nbig, f.inbig, 1);
        for (int e = 0; e < s->n_ent; e++) {
            const int out = s->ent_rows[e];
            frt_cpu_matmul(ref, xn, d.w[s->ent_mat[e]].f + (size_t)s->ent_row0[e] * f.in, 1, f.in,
                           out);
            dget_as(dy[e], got, (size_t)out, f.ent[e].y_dtype);
            snprintf(name, sizeof name, "graph replay %d: multi_norm %s e%d out %d -> %s", rep,
                     s->tag, e, out, dtn(f.ent[e].y_dtype));
            report(name, frt_test_rel_err(got, ref, (size_t)out),
                   f.ent[e].y_dtype == BF16 ? TOL_BF16 : TOL_GEMM_F32);
        }
        frt_cpu_matmul(rg, xn, wg.f, 1, f.in, f.inter);
        frt_cpu_matmul(ru, xn, wu.f, 1, f.in, f.inter);
        frt_cpu_swiglu(ref, rg, ru, f.inter);
        dget_as(f.y, got, (size_t)f.inter, BF16);
        snprintf(name, sizeof name, "graph replay %d: swiglu_norm n 1 in %d inter %d -> bf16", rep,
                 f.in, f.inter);
        report(name, frt_test_rel_err(got, ref, (size_t)f.inter), TOL_BF16);
        memcpy(yref, y0, (size_t)f.in * 4);
        frt_cpu_matmul_add(yref, xa.f, wacc.f, 1, f.acc_in, f.in);
        dget_as(f.yacc, got, (size_t)f.in, F32);
        snprintf(name, sizeof name, "graph replay %d: gemm_run accumulate in %d out %d -> f32", rep,
                 f.acc_in, f.in);
        report(name, frt_test_rel_err(got, yref, (size_t)f.in), TOL_GEMM_F32);
        for (int e = 0; e < 2; e++) {
            const size_t ny = (size_t)f.nbig * big_rows[e];
            float *rb = xzalloc(ny * 4), *gb = xzalloc(ny * 4);
            frt_cpu_matmul(rb, xnb, wbig.f + (size_t)100 * f.inbig * e, f.nbig, f.inbig,
                           big_rows[e]);
            dget_as(dyb[e], gb, ny, F32);
            snprintf(name, sizeof name, "graph replay %d: multi_norm n %d e%d in %d out %d -> f32",
                     rep, f.nbig, e, f.inbig, big_rows[e]);
            report(name, frt_test_rel_err(gb, rb, ny), TOL_GEMM_F32);
            free(rb), free(gb);
        }
        free(res), free(nw), free(resb), free(nwb), free(y0), free(yref), free(xn), free(xnb);
        hmat_free(&xa);
    }
    frt_graph_destroy(graph);
    free(rg), free(ru), free(ref), free(got);
    for (int e = 0; e < s->n_ent; e++) dfree(&dy[e]);
    for (int e = 0; e < 2; e++) dfree(&dyb[e]);
    hmat_free(&wg), hmat_free(&wu), hmat_free(&wacc), hmat_free(&wbig);
    dfree(&f.wg), dfree(&f.wu), dfree(&f.wacc), dfree(&dwbig);
    dfree(&f.res), dfree(&f.nw), dfree(&f.resbig), dfree(&f.nwbig);
    dfree(&f.y), dfree(&f.xacc), dfree(&f.yacc);
    mdata_free(s, &d);
}

/* ---- bad arguments ---------------------------------------------------------- */

static void test_bad_args(void)
{
    /* fake, never dereferenced pointers: every check below fails before
     * anything touches the device */
    char *p = (char *)(uintptr_t)0x10000;
    const uint16_t *w = (const uint16_t *)(p + 0x1000);
    const float *rx = (const float *)(p + 0x4000), *rw = (const float *)(p + 0x8000);
    void *y0 = p + 0x2000, *y1 = p + 0x3000;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    frt_cuda_gemv_entry ok[2] = {{y0, F32, w, 1024}, {y1, BF16, w, 32}};
    frt_cuda_gemv_entry e[2];
    const frt_cuda_gemv_norm nm = {rx, rw, EPS, 1};
    frt_cuda_gemv_norm b;

    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, NULL, 1, 4096), E);
    b = nm, b.x = NULL;
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &b, 1, 4096), E);
    b = nm, b.w = NULL;
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &b, 1, 4096), E);
    b = nm, b.x = rx + 1; /* 4 bytes off */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &b, 1, 4096), E);
    b = nm, b.w = rw + 2; /* 8 bytes off */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &b, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &nm, 1, 4100), E); /* in % 8 */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &nm, 1, 4092), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &nm, 1, 0), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &nm, 0, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &nm, FRT_CUDA_GEMV_MAX_N + 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 2, &nm, 4, 65536), E); /* x: 512 KiB */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, NULL, 1, &nm, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, 0, &nm, 1, 4096), E);
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, ok, MAXE + 1, &nm, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y = (void *)rx; /* y == the residual */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, e, 2, &nm, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[0].y = (void *)rw; /* y == the norm weight */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, e, 2, &nm, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y = y0; /* two entries, one y */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, e, 2, &nm, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[0].w = w + 4; /* 8 bytes off */
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, e, 2, &nm, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].out_dim = 0;
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, e, 2, &nm, 1, 4096), E);
    memcpy(e, ok, sizeof e), e[1].y_dtype = (frt_cuda_dtype)2;
    CHECK_STATUS(frt_cuda_gemv_multi_norm(NULL, e, 2, &nm, 1, 4096), E);

    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, NULL, w, w, 1, 4096, 12288), E);
    b = nm, b.x = NULL;
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &b, w, w, 1, 4096, 12288), E);
    b = nm, b.w = NULL;
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &b, w, w, 1, 4096, 12288), E);
    b = nm, b.x = rx + 2;
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &b, w, w, 1, 4096, 12288), E);
    b = nm, b.w = rw + 1;
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &b, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, w, w, 1, 4092, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, w, w, 0, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, w, w, FRT_CUDA_GEMV_MAX_N + 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, w, w, 1, 4096, 0), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, NULL, BF16, &nm, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, NULL, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, w, w + 1, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, (frt_cuda_dtype)7, &nm, w, w, 1, 4096, 12288),
                 E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, (void *)rx, BF16, &nm, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, (void *)rw, F32, &nm, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, p + 0x2002, F32, &nm, w, w, 1, 4096, 12288), E);
    CHECK_STATUS(frt_cuda_gemv_swiglu_norm(NULL, y0, BF16, &nm, w, w, 4, 65536, 12288), E);
}

/* ---- timing -------------------------------------------------------------- */

enum {
    B_MULTI,          /* frt_cuda_gemv_multi of a bf16 x (no norm) */
    B_MULTI_NORM,     /* frt_cuda_gemv_multi_norm */
    B_MULTI_UNFUSED,  /* frt_cuda_rmsnorm + frt_cuda_gemv_multi */
    B_SWIGLU,         /* the same three for the SwiGLU */
    B_SWIGLU_NORM,
    B_SWIGLU_UNFUSED,
    B_CHAIN,          /* swiglu_norm, down accumulate, multi_norm (qkv|z|b|a) */
    B_CHAIN_UNFUSED,  /* add_rmsnorm, swiglu, down, add_rmsnorm, multi */
};

/* Matrices of one copy: multi: the set's; swiglu: gate, up; chain: gate, up,
 * down, then the set's. */
typedef struct nbench {
    frt_cuda_gemm *g;
    const mset *s;
    int kind, n, I, copies, reps, n_mats;
    size_t copy_bytes, mat_off[8];
    dbuf w, res, nw, h, delta, ob, y[MAXE];
} nbench;

static const uint16_t *bw(const nbench *b, int i, int m)
{
    return (const uint16_t *)((const char *)b->w.p + (size_t)(i % b->copies) * b->copy_bytes +
                              b->mat_off[m]);
}

static int bench_multi(const nbench *b, void *st, int i, int m0, int norm, const void *x)
{
    const mset *s = b->s;
    frt_cuda_gemv_entry ent[MAXE];
    for (int e = 0; e < s->n_ent; e++) {
        const uint16_t *w = bw(b, i, m0 + s->ent_mat[e]) + (size_t)s->ent_row0[e] * s->in;
        ent[e] = (frt_cuda_gemv_entry){b->y[e].p, F32, w, s->ent_rows[e]};
    }
    if (norm) {
        const frt_cuda_gemv_norm nm = {(const float *)b->res.p, (const float *)b->nw.p, EPS, 1};
        return frt_cuda_gemv_multi_norm(st, ent, s->n_ent, &nm, b->n, s->in);
    }
    return frt_cuda_gemv_multi(st, ent, s->n_ent, x, b->n, s->in);
}

static int record_bench(frt_stream *stream, void *user)
{
    nbench *b = user;
    void *st = frt_stream_native(stream);
    const int H = b->s->in, n = b->n;
    const frt_cuda_gemv_norm nm = {(const float *)b->res.p, (const float *)b->nw.p, EPS, 1};
    for (int i = 0; i < b->reps; i++) {
        switch (b->kind) {
        case B_MULTI: FRT_TEST_TRY_(bench_multi(b, st, i, 0, 0, b->h.p)); break;
        case B_MULTI_NORM: FRT_TEST_TRY_(bench_multi(b, st, i, 0, 1, NULL)); break;
        case B_MULTI_UNFUSED:
            FRT_TEST_TRY_(frt_cuda_rmsnorm(st, b->h.p, BF16, b->res.p, F32, b->nw.p, NULL, n, 1, H,
                                           EPS, 1));
            FRT_TEST_TRY_(bench_multi(b, st, i, 0, 0, b->h.p));
            break;
        case B_SWIGLU:
            FRT_TEST_TRY_(frt_cuda_gemv_swiglu(st, b->ob.p, BF16, b->h.p, bw(b, i, 0), bw(b, i, 1),
                                               n, H, b->I));
            break;
        case B_SWIGLU_NORM:
            FRT_TEST_TRY_(frt_cuda_gemv_swiglu_norm(st, b->ob.p, BF16, &nm, bw(b, i, 0),
                                                    bw(b, i, 1), n, H, b->I));
            break;
        case B_SWIGLU_UNFUSED:
            FRT_TEST_TRY_(frt_cuda_rmsnorm(st, b->h.p, BF16, b->res.p, F32, b->nw.p, NULL, n, 1, H,
                                           EPS, 1));
            FRT_TEST_TRY_(frt_cuda_gemv_swiglu(st, b->ob.p, BF16, b->h.p, bw(b, i, 0), bw(b, i, 1),
                                               n, H, b->I));
            break;
        case B_CHAIN:
            FRT_TEST_TRY_(frt_cuda_gemv_swiglu_norm(st, b->ob.p, BF16, &nm, bw(b, i, 0),
                                                    bw(b, i, 1), n, H, b->I));
            FRT_TEST_TRY_(frt_cuda_gemm_run(b->g, st, b->res.p, F32, b->ob.p, bw(b, i, 2), n, b->I,
                                            H, 1));
            FRT_TEST_TRY_(bench_multi(b, st, i, 3, 1, NULL));
            break;
        default: /* B_CHAIN_UNFUSED */
            FRT_TEST_TRY_(frt_cuda_add_rmsnorm(st, b->res.p, b->delta.p, F32, b->h.p, BF16,
                                               b->nw.p, NULL, n, H, EPS, 1));
            FRT_TEST_TRY_(frt_cuda_gemv_swiglu(st, b->ob.p, BF16, b->h.p, bw(b, i, 0), bw(b, i, 1),
                                               n, H, b->I));
            FRT_TEST_TRY_(frt_cuda_gemm_run(b->g, st, b->delta.p, F32, b->ob.p, bw(b, i, 2), n,
                                            b->I, H, 0));
            FRT_TEST_TRY_(frt_cuda_add_rmsnorm(st, b->res.p, b->delta.p, F32, b->h.p, BF16,
                                               b->nw.p, NULL, n, H, EPS, 1));
            FRT_TEST_TRY_(bench_multi(b, st, i, 3, 0, b->h.p));
            break;
        }
    }
    return 0;
}

/* Microseconds per repetition of `kind` at n: a graph of back-to-back
 * repetitions cycling over copies of the weights (>= 256 MiB in all, so the
 * L2 holds none of them), one warm-up replay, one timed replay; *bytes: the
 * weight bytes of one repetition. < 0 on failure. */
static double time_kind(frt_cuda_gemm *g, const mset *s, int I, int kind, int n, double *bytes)
{
    nbench b;
    memset(&b, 0, sizeof b);
    b.g = g;
    b.s = s;
    b.kind = kind;
    b.n = n;
    b.I = I;
    const int H = s->in;
    const int mlp = kind >= B_SWIGLU, chain = kind >= B_CHAIN;
    size_t elems[8]; /* of each matrix of one copy */
    int nm = 0;
    if (mlp) {
        elems[nm++] = (size_t)I * H; /* gate */
        elems[nm++] = (size_t)I * H; /* up */
    }
    if (chain) elems[nm++] = (size_t)H * I; /* down */
    if (!mlp || chain) /* the set's matrices: from index 0 (multi), 3 (chain) */
        for (int m = 0; m < s->n_mats; m++) elems[nm++] = (size_t)s->mat_rows[m] * H;
    b.n_mats = nm;
    for (int m = 0; m < nm; m++) {
        b.mat_off[m] = b.copy_bytes;
        b.copy_bytes += elems[m] * 2;
    }
    if (chain) plan_gemv(g, n, I, H, F32, kind == B_CHAIN);
    *bytes = (double)b.copy_bytes;
    const size_t min_total = (size_t)256 << 20;
    b.copies = (int)((min_total + b.copy_bytes - 1) / b.copy_bytes);
    b.reps = (int)(((size_t)2 << 30) / b.copy_bytes);
    if (b.reps < 8) b.reps = 8;
    if (b.reps > 200) b.reps = 200;
    int max_rows = I > H ? I : H;
    for (int m = 0; m < s->n_mats; m++)
        if (s->mat_rows[m] > max_rows) max_rows = s->mat_rows[m];
    b.w = dalloc(b.copies * b.copy_bytes);
    b.res = dalloc((size_t)n * H * 4);
    b.nw = dalloc((size_t)H * 4);
    b.h = dalloc((size_t)n * H * 2);
    b.delta = dalloc((size_t)n * H * 4);
    b.ob = dalloc((size_t)n * I * 2);
    for (int e = 0; e < MAXE; e++) b.y[e] = dalloc((size_t)n * max_rows * 4);
    /* 0x3C bytes: bf16 0.0115, f32 0.0115; finite; the time does not depend on them */
    must(frt_buffer_fill(b.w.b, 0, b.w.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(b.res.b, 0, b.res.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(b.nw.b, 0, b.nw.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(b.h.b, 0, b.h.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(b.delta.b, 0, b.delta.bytes, 0, g_st), "fill");
    const double us = graph_us("gemv-norm-bench", record_bench, &b, b.reps);
    dfree(&b.w), dfree(&b.res), dfree(&b.nw), dfree(&b.h), dfree(&b.delta), dfree(&b.ob);
    for (int e = 0; e < MAXE; e++) dfree(&b.y[e]);
    return us;
}

static void time_all(frt_cuda_gemm *g, const mset *attn, const mset *gdn, int I, int n)
{
    const mset *sets[2] = {attn, gdn};
    double bytes = 0;
    for (int k = 0; k < 2; k++) {
        const double tp = time_kind(g, sets[k], I, B_MULTI, n, &bytes);
        const double tn = time_kind(g, sets[k], I, B_MULTI_NORM, n, &bytes);
        const double tu = time_kind(g, sets[k], I, B_MULTI_UNFUSED, n, &bytes);
        const double fl = bytes / HBM_BYTES_PER_S * 1e6;
        printf("  time %-14s n %d %6.1f MB: floor %6.1f us | norm %6.1f us (%4.1f%%) | plain "
               "%6.1f us: prologue %+5.2f us | rmsnorm + plain %6.1f us: saves %5.2f us\n",
               sets[k]->tag, n, bytes / 1e6, fl, tn, 100.0 * fl / tn, tp, tn - tp, tu, tu - tn);
    }
    const double tp = time_kind(g, attn, I, B_SWIGLU, n, &bytes);
    const double tn = time_kind(g, attn, I, B_SWIGLU_NORM, n, &bytes);
    const double tu = time_kind(g, attn, I, B_SWIGLU_UNFUSED, n, &bytes);
    double fl = bytes / HBM_BYTES_PER_S * 1e6;
    printf("  time %-14s n %d %6.1f MB: floor %6.1f us | norm %6.1f us (%4.1f%%) | plain %6.1f "
           "us: prologue %+5.2f us | rmsnorm + plain %6.1f us: saves %5.2f us\n",
           "mlp swiglu", n, bytes / 1e6, fl, tn, 100.0 * fl / tn, tp, tn - tp, tu, tu - tn);
    const double tc = time_kind(g, gdn, I, B_CHAIN, n, &bytes);
    const double tcu = time_kind(g, gdn, I, B_CHAIN_UNFUSED, n, &bytes);
    fl = bytes / HBM_BYTES_PER_S * 1e6;
    printf("  time %-14s n %d %6.1f MB: floor %6.1f us | fused %6.1f us (%4.1f%%, 3 launches) | "
           "unfused %6.1f us (5 launches): saves %5.2f us per layer\n",
           "mlp+next mixer", n, bytes / 1e6, fl, tc, 100.0 * fl / tc, tcu, tcu - tc);
}

/* ---- main ------------------------------------------------------------------ */

int main(void)
{
    printf("  %-70s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();

    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create(0, &g), "gemm");
    must(frt_cuda_gemm_set_gemv(g, FRT_CUDA_GEMV_ALWAYS), "policy");

    const int n1234[6] = {1, 2, 3, 4, 5, 8}, n14[3] = {1, 4, 8}, n13[2] = {1, 3};
    const int n14s[2] = {1, 4}; /* x [8, 16384] over a block's shared memory */
    /* qwen3.5-9b (hidden 4096): q|gate, k, v; in_proj_qkv, z, b | a */
    const mset attn9 = {"9b q|k|v", 4096, 3, 3, {8192, 1024, 1024},
                        {0, 1, 2}, {0, 0, 0}, {8192, 1024, 1024}};
    const mset gdn9 = {"9b qkv|z|b|a", 4096, 3, 4, {12288, 4096, 64},
                       {0, 1, 2, 2}, {0, 0, 0, 32}, {12288, 4096, 32, 32}};
    /* the 27B's hidden 5120: rmsnorm.cu runs it on 320 threads (more than
     * the GEMV block's 256) */
    const mset attn27 = {"27b q|k|v", 5120, 3, 3, {12288, 1024, 1024},
                         {0, 1, 2}, {0, 0, 0}, {12288, 1024, 1024}};
    /* odd sizes (rmsnorm.cu's shapes: 72 -> 32 threads x 1 group; 1000 -> 64
     * x 4 with idle threads; 2056 -> 160 x 4), out 1, 3, 5, 7, 13 */
    const mset odd1 = {"odd", 72, 4, 4, {5, 1, 13, 3}, {0, 1, 2, 3}, {0, 0, 0, 0}, {5, 1, 13, 3}};
    const mset odd2 = {"odd", 1000, 2, 3, {3, 1000}, {0, 1, 1}, {0, 0, 999}, {3, 999, 1}};
    const mset odd3 = {"odd", 2056, 2, 2, {7, 2050}, {0, 1}, {0, 0}, {7, 2050}};
    /* in 16384: 512 threads x 8 groups (two batches per virtual thread);
     * in 17408: rmsnorm.cu's strided loop (1024 threads, groups of 1), x of
     * 102 KiB at n 3 (16-warp blocks) */
    const mset wide1 = {"wide", 16384, 2, 2, {300, 13}, {0, 1}, {0, 0}, {300, 13}};
    const mset wide2 = {"wide", 17408, 2, 2, {100, 7}, {0, 1}, {0, 0}, {100, 7}};

    multi_set(&attn9, n1234, 6);
    multi_set(&gdn9, n1234, 6);
    multi_set(&attn27, n14, 3);
    multi_set(&odd1, n1234, 6);
    multi_set(&odd2, n14, 3);
    multi_set(&odd3, n14, 3);
    multi_set(&wide1, n14s, 2);
    multi_set(&wide2, n13, 2);

    swiglu_shape("9b mlp", 4096, 12288, n1234, 6);
    swiglu_shape("27b hidden", 5120, 1000, n14, 3);
    swiglu_shape("odd", 72, 5, n1234, 6);
    swiglu_shape("odd", 264, 1, n14, 3);
    swiglu_shape("odd", 1000, 13, n14, 3);
    swiglu_shape("wide", 16384, 300, n14s, 2);
    swiglu_shape("wide", 17408, 7, n13, 2);

    /* decode's output projections: o_proj / out_proj 4096 -> 4096 (kw 1, 2
     * rows per group), down 12288 -> 4096, and in-block splits (kw 2, 8) */
    accum_shape(g, 4096, 4096, n1234, 6);
    accum_shape(g, 12288, 4096, n14, 3);
    accum_shape(g, 4096, 1024, n14, 3);
    accum_shape(g, 4096, 64, n14, 3);
    accum_shape(g, 72, 5, n14, 3);

    test_graph(g, &attn9);

    printf("  timings (graph of back-to-back calls, weights not in L2; floor = weight bytes / "
           "%.1f TB/s; prologue = norm - plain; chain = one layer's MLP and the next mixer's "
           "input GEMVs):\n",
           HBM_BYTES_PER_S / 1e12);
    for (int n = 1; n <= FRT_CUDA_GEMV_MAX_N; n = n == 1 ? 4 : n * 2) time_all(g, &attn9, &gdn9, 12288, n);

    frt_cuda_gemm_destroy(g);
    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
