/*
 * test_cuda_gemv.c - the decode GEMV path of frt_cuda_gemm_run (n <= 8,
 * src/kernels/cuda/gemv.cu) against the CPU twin frt_cpu_matmul /
 * frt_cpu_matmul_add on random data (SplitMix64, kernels/cpu/rng.h), norm-wise
 * ||gpu - cpu|| / ||cpu|| within 1e-4 (f32 out: fp32 accumulation in another
 * order than OpenBLAS) or 1e-2 (bf16 out), with the bf16 inputs rounded the
 * same way on both sides:
 *   - every projection shape of qwen3.5-9b (hidden 4096, MLP 12288) and of
 *     the 27B (hidden 5120, MLP 17408), n = 1..4, f32 and bf16 out,
 *     accumulate off and on; a 32000-row LM head; the full 248320-row LM head
 *     on both kernels (the GEMV forced, and cuBLASLt where AUTO keeps it);
 *   - odd sizes: in_dim a multiple of 8 but not of 256, out_dim 1, 3, 7, 13,
 *     1000 (in-block split rows with empty slices, partial batches);
 *   - bytes past y [n, out] stay untouched (sentinel), 3 runs give identical
 *     bytes, a CUDA graph (frt_graph_capture) replays the GEMVs with new
 *     inputs, the plan info that feeds the model fingerprint;
 *   - the ring's and the register path's bits: n copies of one row equal
 *     n = 1, and a grid cap of 1 and 3 blocks changes no byte (plain and
 *     SwiGLU);
 *   - bad arguments fail cleanly with FRT_ERR_INVALID_ARGUMENT (before the
 *     device check: they also run on machines without a GPU).
 * Then times each model shape in a CUDA graph of back-to-back launches over
 * enough weight copies to defeat the 50 MB L2, GEMV against cuBLASLt, and
 * prints the time next to the HBM floor (weight bytes / 4.2 TB/s). The
 * timings are printed, not checked; FRT_TEST_TIMING_ONLY=1 runs them alone
 * (to compare libraries). Exits 77 (skipped) without a device.
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

#define FRT_TEST_CUDA_OWN_FRAND
#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#define TOL_GEMM_F32 1e-4
#define HBM_BYTES_PER_S 4.2e12 /* measured device-to-device copy rate of the H200 */

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness ---------------------------------------------------------- */

static uint64_t g_rng = 20261205;

static float *frand(size_t n, float lo, float hi)
{
    float *x = xzalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * frt_rng_uniform(&g_rng);
    return x;
}

/* ---- one case ----------------------------------------------------------- */

static float g_lo = -1.0f; /* lower bound of the random x and w (gemv_shape) */

/* mode bit 0: bf16 out; bit 1: accumulate. `w` is on the device in dw.
 * want_kernel: the kernel the plan must have picked. det: also check that
 * three runs give identical bytes. */
static void gemv_case(frt_cuda_gemm *g, const char *tag, int n, const hmat *w, dbuf dw, int mode,
                      frt_cuda_gemm_kernel want_kernel, int det)
{
    const int in = w->cols, out = w->rows;
    const frt_cuda_dtype odt = (mode & 1) ? BF16 : F32;
    const int acc = (mode & 2) != 0;
    const size_t ny = (size_t)n * out, ybytes = ny * dsize(odt), pad = 256;
    hmat x = hmat_rand(&g_rng, n, in, g_lo, 1);
    float *y0 = frand(ny, -4, 4);
    if (odt == BF16)
        for (size_t i = 0; i < ny; i++) y0[i] = frt_bf16_to_f32(frt_f32_to_bf16(y0[i]));
    dbuf dx = dalloc((size_t)n * in * 2), dy = dalloc(ybytes + pad);
    dput(dx, 0, x.b, (size_t)n * in * 2);
    dsentinel(dy);

    CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, odt, acc));
    frt_cuda_gemm_plan_info info;
    if (plan_of(g, n, in, out, odt, acc, &info) >= 0)
        CHECK_MSG(info.kernel == want_kernel, "%s n %d in %d out %d: kernel %d, want %d", tag, n,
                  in, out, (int)info.kernel, (int)want_kernel);
    else
        CHECK_MSG(0, "%s n %d in %d out %d: no plan", tag, n, in, out);

    float *ref = xzalloc(ny * sizeof(float)), *got = xzalloc(ny * sizeof(float));
    if (acc) {
        memcpy(ref, y0, ny * sizeof(float));
        frt_cpu_matmul_add(ref, x.f, w->f, n, in, out);
    } else {
        frt_cpu_matmul(ref, x.f, w->f, n, in, out);
    }
    void *runs[3] = {NULL, NULL, NULL};
    for (int r = 0; r < (det ? 3 : 1); r++) {
        if (acc) dput_as(dy, y0, ny, odt);
        CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, odt, dx.p, dw.p, n, in, out, acc));
        runs[r] = snap(dy, ybytes);
    }
    dget_as(dy, got, ny, odt);
    char name[128];
    snprintf(name, sizeof name, "%s n %d in %d out %d -> %s%s", tag, n, in, out, dtn(odt),
             acc ? " acc" : "");
    report(name, frt_test_rel_err(got, ref, ny), odt == BF16 ? TOL_BF16 : TOL_GEMM_F32);
    CHECK_MSG(untouched(dy, ybytes, pad), "%s: wrote past y [n, out]", name);
    if (det) {
        const void *other = memcmp(runs[0], runs[1], ybytes) ? runs[1] : runs[2];
        snprintf(name, sizeof name, "  determinism (3 runs) n %d in %d out %d %s%s", n, in, out,
                 dtn(odt), acc ? " acc" : "");
        report_same(name, runs[0], other, ybytes);
    }
    for (int r = 0; r < 3; r++) free(runs[r]);
    free(ref);
    free(got);
    free(y0);
    hmat_free(&x);
    dfree(&dx);
    dfree(&dy);
}

/* All cases of one weight matrix: n in ns, every mode; determinism for
 * f32 and bf16-accumulate. With fewer than 64 outputs the data are in
 * [0, 1): a norm over a handful of values must not meet a sum that cancels
 * to near zero (its relative error would be the rounding's, not the
 * kernel's). */
static void gemv_shape(frt_cuda_gemm *g, const char *tag, int in, int out, const int *ns, int n_ns)
{
    g_lo = out < 64 ? 0.0f : -1.0f;
    hmat w = hmat_rand(&g_rng, out, in, g_lo, 1);
    dbuf dw = dalloc((size_t)out * in * 2);
    dput(dw, 0, w.b, (size_t)out * in * 2);
    for (int i = 0; i < n_ns; i++)
        for (int mode = 0; mode < 4; mode++)
            gemv_case(g, tag, ns[i], &w, dw, mode, FRT_CUDA_GEMM_GEMV, mode == 0 || mode == 3);
    dfree(&dw);
    hmat_free(&w);
}

/* ---- timing -------------------------------------------------------------- */

typedef struct bench {
    frt_cuda_gemm *g;
    int n, in, out;
    wcopies c;
} bench;

static int record_bench(frt_stream *stream, void *user)
{
    bench *b = user;
    void *s = frt_stream_native(stream);
    for (int i = 0; i < b->c.reps; i++)
        FRT_TEST_TRY_(frt_cuda_gemm_run(b->g, s, b->c.y.p, F32, b->c.x.p, wcopies_at(&b->c, i), b->n, b->in,
                                        b->out, 0));
    return 0;
}

/* Microseconds per call of g at (n, in, out) f32 out: a graph of back-to-back
 * calls (2 GiB of weights, 4 to 200 calls) over copies of the weights
 * (wcopies_us: >= 256 MiB in all, so the L2 holds none of them), one warm-up
 * replay, then one timed replay. < 0 on failure. */
static double time_gemm(frt_cuda_gemm *g, int n, int in, int out)
{
    bench b = {g, n, in, out, {0}};
    const size_t wbytes = (size_t)out * in * 2;
    int reps = (int)(((size_t)2 << 30) / wbytes);
    if (reps < 4) reps = 4;
    if (reps > 200) reps = 200;
    if (frt_cuda_gemm_plan(g, n, in, out, F32, 0) < 0) return -1;
    return wcopies_us(&b.c, "gemv-bench", wbytes, (size_t)n * in * 2, (size_t)n * out * 4, reps, record_bench, &b);
}

static void time_shape(frt_cuda_gemm *gv, frt_cuda_gemm *lt, const char *tag, int n, int in,
                       int out)
{
    const double bytes = (double)out * in * 2, floor_us = bytes / HBM_BYTES_PER_S * 1e6;
    const double t_gv = time_gemm(gv, n, in, out), t_lt = time_gemm(lt, n, in, out);
    printf("  time %-18s n %d %5d -> %6d  %6.1f MB: floor %7.1f us | gemv %7.1f us "
           "%5.2f TB/s %5.1f%% | cublaslt %7.1f us %5.2f TB/s\n",
           tag, n, in, out, bytes / 1e6, floor_us, t_gv, bytes / (t_gv * 1e-6) / 1e12,
           100.0 * floor_us / t_gv, t_lt, bytes / (t_lt * 1e-6) / 1e12);
}

/* ---- CUDA graph ------------------------------------------------------------ */

typedef struct gemv_graph {
    frt_cuda_gemm *g;
    int in, out1, out2;
    dbuf x, w1, w2, y1, y2;
} gemv_graph;

/* y1 = x . w1^T (f32), y2 += x . w2^T (bf16): n = 1 as in decode. */
static int record_gemv(frt_stream *stream, void *user)
{
    gemv_graph *d = user;
    void *s = frt_stream_native(stream);
    FRT_TEST_TRY_(frt_cuda_gemm_run(d->g, s, d->y1.p, F32, d->x.p, d->w1.p, 1, d->in, d->out1, 0));
    FRT_TEST_TRY_(frt_cuda_gemm_run(d->g, s, d->y2.p, BF16, d->x.p, d->w2.p, 1, d->in, d->out2, 1));
    return 0;
}

static void test_graph(frt_cuda_gemm *g)
{
    gemv_graph d = {g, 4096, 1024, 64, {0}, {0}, {0}, {0}, {0}};
    hmat w1 = hmat_rand(&g_rng, d.out1, d.in, -1, 1), w2 = hmat_rand(&g_rng, d.out2, d.in, -1, 1);
    d.x = dalloc((size_t)d.in * 2);
    d.w1 = dalloc((size_t)d.out1 * d.in * 2);
    d.w2 = dalloc((size_t)d.out2 * d.in * 2);
    d.y1 = dalloc((size_t)d.out1 * 4);
    d.y2 = dalloc((size_t)d.out2 * 2);
    dput(d.w1, 0, w1.b, (size_t)d.out1 * d.in * 2);
    dput(d.w2, 0, w2.b, (size_t)d.out2 * d.in * 2);
    CHECK_OK(frt_cuda_gemm_plan(g, 1, d.in, d.out1, F32, 0));
    CHECK_OK(frt_cuda_gemm_plan(g, 1, d.in, d.out2, BF16, 1));
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "gemv", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_gemv, &d));
    float *r1 = xzalloc((size_t)d.out1 * 4), *r2 = xzalloc((size_t)d.out2 * 4);
    float *g1 = xzalloc((size_t)d.out1 * 4), *g2 = xzalloc((size_t)d.out2 * 4);
    for (int rep = 0; rep < 3 && graph; rep++) {
        hmat x = hmat_rand(&g_rng, 1, d.in, -1, 1);
        float *y0 = frand((size_t)d.out2, -4, 4);
        for (int i = 0; i < d.out2; i++) y0[i] = frt_bf16_to_f32(frt_f32_to_bf16(y0[i]));
        dput(d.x, 0, x.b, (size_t)d.in * 2);
        dput_as(d.y2, y0, (size_t)d.out2, BF16);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        frt_cpu_matmul(r1, x.f, w1.f, 1, d.in, d.out1);
        memcpy(r2, y0, (size_t)d.out2 * 4);
        frt_cpu_matmul_add(r2, x.f, w2.f, 1, d.in, d.out2);
        dget_as(d.y1, g1, (size_t)d.out1, F32);
        dget_as(d.y2, g2, (size_t)d.out2, BF16);
        char name[96];
        snprintf(name, sizeof name, "graph replay %d: n 1 in 4096 out 1024 -> f32", rep);
        report(name, frt_test_rel_err(g1, r1, (size_t)d.out1), TOL_GEMM_F32);
        snprintf(name, sizeof name, "graph replay %d: n 1 in 4096 out 64 -> bf16 acc", rep);
        report(name, frt_test_rel_err(g2, r2, (size_t)d.out2), TOL_BF16);
        free(y0);
        hmat_free(&x);
    }
    frt_graph_destroy(graph);
    free(r1), free(r2), free(g1), free(g2);
    hmat_free(&w1);
    hmat_free(&w2);
    dfree(&d.x), dfree(&d.w1), dfree(&d.w2), dfree(&d.y1), dfree(&d.y2);
}

/* ---- frt_cuda_gemm_run_unless: the device-side skip ------------------------ */

typedef struct unless_graph {
    frt_cuda_gemm *g;
    int in, out;
    dbuf x, w, y, flag;
} unless_graph;

static int record_unless(frt_stream *stream, void *user)
{
    unless_graph *d = user;
    return frt_cuda_gemm_run_unless(d->g, frt_stream_native(stream), d->flag.p, d->y.p, F32, d->x.p, d->w.p, 1,
                                    d->in, d->out, 0);
}

/* One captured launch: flag 0 computes exactly frt_cuda_gemm_run's bits,
 * flag 1 leaves y as it was; a cuBLASLt plan and a NULL flag are refused. */
static void test_run_unless(frt_cuda_gemm *g)
{
    unless_graph d = {g, 4096, 3001, {0}, {0}, {0}, {0}};
    hmat w = hmat_rand(&g_rng, d.out, d.in, -1, 1), x = hmat_rand(&g_rng, 1, d.in, -1, 1);
    d.x = dalloc((size_t)d.in * 2);
    d.w = dalloc((size_t)d.out * d.in * 2);
    d.y = dalloc((size_t)d.out * 4);
    d.flag = dalloc(64);
    dbuf yref = dalloc((size_t)d.out * 4);
    dput(d.w, 0, w.b, (size_t)d.out * d.in * 2);
    dput(d.x, 0, x.b, (size_t)d.in * 2);
    CHECK_OK(frt_cuda_gemm_plan(g, 1, d.in, d.out, F32, 0));
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, yref.p, F32, d.x.p, d.w.p, 1, d.in, d.out, 0));
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "gemv-unless", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_unless, &d));
    float *ref = xzalloc((size_t)d.out * 4), *got = xzalloc((size_t)d.out * 4), *cpu = xzalloc((size_t)d.out * 4);
    dget_as(yref, ref, (size_t)d.out, F32);
    frt_cpu_matmul(cpu, x.f, w.f, 1, d.in, d.out);
    for (int rep = 0; rep < 4 && graph; rep++) {
        const int32_t skip = rep & 1;
        dput(d.flag, 0, &skip, sizeof skip);
        dsentinel(d.y);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        if (skip) {
            CHECK_MSG(untouched(d.y, 0, (size_t)d.out * 4), "replay %d: skipped GEMV wrote y", rep);
        } else {
            dget_as(d.y, got, (size_t)d.out, F32);
            CHECK_MSG(memcmp(got, ref, (size_t)d.out * 4) == 0, "replay %d: not the bits of frt_cuda_gemm_run",
                      rep);
            char name[96];
            snprintf(name, sizeof name, "run_unless replay %d: n 1 in 4096 out 3001 -> f32", rep);
            report(name, frt_test_rel_err(got, cpu, (size_t)d.out), TOL_GEMM_F32);
        }
    }
    CHECK_STATUS(frt_cuda_gemm_run_unless(g, g_cs, NULL, d.y.p, F32, d.x.p, d.w.p, 1, d.in, d.out, 0),
                 FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_gemm *lt = NULL;
    CHECK_OK(frt_cuda_gemm_create(0, &lt));
    if (lt) {
        CHECK_OK(frt_cuda_gemm_set_gemv(lt, FRT_CUDA_GEMV_NEVER));
        CHECK_OK(frt_cuda_gemm_plan(lt, 1, d.in, 1024, F32, 0));
        dsentinel(d.y);
        CHECK_STATUS(frt_cuda_gemm_run_unless(lt, g_cs, d.flag.p, d.y.p, F32, d.x.p, d.w.p, 1, d.in, 1024, 0),
                     FRT_ERR_UNSUPPORTED);
        sync_st();
        CHECK(untouched(d.y, 0, (size_t)d.out * 4));
        frt_cuda_gemm_destroy(lt);
    }
    frt_graph_destroy(graph);
    free(ref), free(got), free(cpu);
    hmat_free(&w);
    hmat_free(&x);
    dfree(&d.x), dfree(&d.w), dfree(&d.y), dfree(&d.flag), dfree(&yref);
}

/* ---- the full LM head -------------------------------------------------------- */

/* 4096 -> 248320 (2 GB of weights): the rows repeat a random tile of 32003
 * rows (prime to every block size: a wrong row index reads other values),
 * so the CPU reference is one tile. The GEMV (AUTO takes it: 2 GB is under
 * FRT_CUDA_GEMV_AUTO_MAX_BYTES) and cuBLASLt (NEVER) are both checked. */
static void test_lm_head(frt_cuda_gemm *g_auto, frt_cuda_gemm *g_never)
{
    const int in = 4096, out = 248320, tile = 32003;
    hmat w = hmat_rand(&g_rng, tile, in, -1, 1), x = hmat_rand(&g_rng, 1, in, -1, 1);
    dbuf dw = dalloc((size_t)out * in * 2), dx = dalloc((size_t)in * 2);
    dbuf dy = dalloc((size_t)out * 4 + 256);
    for (int r0 = 0; r0 < out; r0 += tile) {
        const int rows = out - r0 < tile ? out - r0 : tile;
        dput(dw, (size_t)r0 * in * 2, w.b, (size_t)rows * in * 2);
    }
    dput(dx, 0, x.b, (size_t)in * 2);
    float *rt = xzalloc((size_t)tile * 4), *ref = xzalloc((size_t)out * 4);
    float *got = xzalloc((size_t)out * 4);
    frt_cpu_matmul(rt, x.f, w.f, 1, in, tile);
    for (int r = 0; r < out; r++) ref[r] = rt[r % tile];
    frt_cuda_gemm *gs[2] = {g_auto, g_never};
    const frt_cuda_gemm_kernel want[2] = {FRT_CUDA_GEMM_GEMV, FRT_CUDA_GEMM_CUBLASLT};
    const char *names[2] = {"lm_head gemv (AUTO) n 1 in 4096 out 248320 -> f32",
                            "lm_head cublaslt (NEVER) n 1 in 4096 out 248320 -> f32"};
    for (int k = 0; k < 2; k++) {
        dsentinel(dy);
        CHECK_OK(frt_cuda_gemm_plan(gs[k], 1, in, out, F32, 0));
        frt_cuda_gemm_plan_info info;
        CHECK(plan_of(gs[k], 1, in, out, F32, 0, &info) >= 0 && info.kernel == want[k]);
        CHECK_OK(frt_cuda_gemm_run(gs[k], g_cs, dy.p, F32, dx.p, dw.p, 1, in, out, 0));
        dget_as(dy, got, (size_t)out, F32);
        report(names[k], frt_test_rel_err(got, ref, (size_t)out), TOL_GEMM_F32);
        CHECK(untouched(dy, (size_t)out * 4, 256));
    }
    free(rt), free(ref), free(got);
    hmat_free(&w);
    hmat_free(&x);
    dfree(&dw), dfree(&dx), dfree(&dy);
}

/* ---- the weight ring and the register path ------------------------------------ */

/* An 8-warp block streams its weights through a ring in shared memory (3
 * stages at n <= 2, 2 at n 3..4); past n 4, and in a 16-warp block (x over
 * 96 KiB), they stay in registers (gemv_block.h). Both sum a row's k-blocks
 * in the same order, so n copies of one x row give n copies of the n = 1
 * output, byte for byte, on every path: in 8192 takes 16 warps at n 8. out 1000 has
 * a partial row group, in 8200 a partial last batch of every slice. The
 * plain GEMV and the SwiGLU launcher (two matrices a stage). */
static void test_ring_bits(void)
{
    /* in 64 and 136: one and two ring stages a slice (tiny-qwen3's LM head
     * is in 64) */
    const int ins[4] = {8192, 8200, 64, 136}, outs[2] = {1000, 4096}, ns[5] = {1, 2, 3, 5, 8};
    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create((size_t)1 << 20, &g), "gemm");
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++) {
            const int in = ins[a], out = outs[b];
            hmat w = hmat_rand(&g_rng, out, in, -1, 1), w2 = hmat_rand(&g_rng, out, in, -1, 1);
            hmat x1 = hmat_rand(&g_rng, 1, in, -1, 1);
            dbuf dw = dalloc((size_t)out * in * 2), dw2 = dalloc((size_t)out * in * 2);
            dbuf dx = dalloc((size_t)8 * in * 2), dy = dalloc((size_t)8 * out * 4);
            dput(dw, 0, w.b, (size_t)out * in * 2);
            dput(dw2, 0, w2.b, (size_t)out * in * 2);
            for (int t = 0; t < 8; t++) dput(dx, (size_t)t * in * 2, x1.b, (size_t)in * 2);
            float *one = xzalloc((size_t)out * 4), *all = xzalloc((size_t)8 * out * 4);
            uint16_t *sone = xzalloc((size_t)out * 2), *sall = xzalloc((size_t)8 * out * 2);
            for (int i = 0; i < 5; i++) {
                const int n = ns[i];
                frt_cuda_gemm_plan_info info;
                CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, F32, 0));
                CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, F32, dx.p, dw.p, n, in, out, 0));
                dget(dy, 0, n == 1 ? one : all, (size_t)n * out * 4);
                CHECK_OK(frt_cuda_gemv_swiglu(g_cs, dy.p, BF16, dx.p, dw.p, dw2.p, n, in, out));
                dget(dy, 0, n == 1 ? sone : sall, (size_t)n * out * 2);
                const int warps = plan_of(g, n, in, out, F32, 0, &info) >= 0 ? info.cta_swizzling : -1;
                const int want = (size_t)n * in * 2 > (96u << 10) ? 16 : 8; /* x over 96 KiB: 16 warps */
                CHECK_MSG(warps == want, "in %d n %d: %d warps a block", in, n, warps);
                /* under a grid cap of 1 and 3 blocks (the bf16 launches and
                 * plans are not persistent, so the cap must change nothing):
                 * the same bytes */
                for (int cap = 1; cap <= 3; cap += 2) {
                    frt_cuda_gemv_set_max_grid(cap);
                    frt_cuda_gemm *gc = NULL;
                    must(frt_cuda_gemm_create((size_t)1 << 20, &gc), "gemm");
                    CHECK_OK(frt_cuda_gemm_plan(gc, n, in, out, F32, 0));
                    CHECK_OK(frt_cuda_gemm_run(gc, g_cs, dy.p, F32, dx.p, dw.p, n, in, out, 0));
                    float *yc = xzalloc((size_t)n * out * 4);
                    uint16_t *sc = xzalloc((size_t)n * out * 2);
                    dget(dy, 0, yc, (size_t)n * out * 4);
                    CHECK_OK(frt_cuda_gemv_swiglu(g_cs, dy.p, BF16, dx.p, dw.p, dw2.p, n, in, out));
                    dget(dy, 0, sc, (size_t)n * out * 2);
                    frt_cuda_gemv_set_max_grid(0);
                    char name[128];
                    snprintf(name, sizeof name, "grid cap: in %d out %d n %d, grid %d == full grid", in, out, n, cap);
                    report_flag(name, memcmp(yc, n == 1 ? one : all, (size_t)n * out * 4) == 0 &&
                                          memcmp(sc, n == 1 ? (void *)sone : (void *)sall, (size_t)n * out * 2) == 0);
                    free(yc), free(sc);
                    frt_cuda_gemm_destroy(gc);
                }
                if (n == 1) continue;
                int same = 1, ssame = 1;
                for (int t = 0; t < n; t++) {
                    same &= memcmp(all + (size_t)t * out, one, (size_t)out * 4) == 0;
                    ssame &= memcmp(sall + (size_t)t * out, sone, (size_t)out * 2) == 0;
                }
                char name[128];
                snprintf(name, sizeof name, "ring: in %d out %d, n %d (%s) == n 1", in, out, n,
                         want == 16 ? "registers, 16 warps" : n <= 2 ? "3 stages" : n <= 4 ? "2 stages" : "registers");
                report_flag(name, same);
                snprintf(name, sizeof name, "ring: swiglu in %d out %d, n %d == n 1", in, out, n);
                report_flag(name, ssame);
            }
            free(one), free(all), free(sone), free(sall);
            hmat_free(&w), hmat_free(&w2), hmat_free(&x1);
            dfree(&dw), dfree(&dw2), dfree(&dx), dfree(&dy);
        }
    frt_cuda_gemm_destroy(g);
}

/* ---- bad arguments ---------------------------------------------------------- */

/* frt_cuda_gemm_gemv_rows: the row groups a batched decode may take. */
static void test_gemv_rows(void)
{
    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create((size_t)1 << 20, &g), "gemm");
    CHECK(frt_cuda_gemm_gemv_rows(NULL) == 0);
    CHECK(frt_cuda_gemm_gemv_rows(g) == FRT_CUDA_GEMV_MAX_N);
    for (int n = 1; n <= FRT_CUDA_GEMV_MAX_N; n++) must(frt_cuda_gemm_plan(g, n, 4096, 4096, F32, 1), "plan");
    must(frt_cuda_gemm_plan(g, 64, 4096, 4096, F32, 0), "plan"); /* a prefill bucket: cuBLASLt, not counted */
    CHECK(frt_cuda_gemm_gemv_rows(g) == FRT_CUDA_GEMV_MAX_N);
    /* x [8, 17408] bf16 = 272 KiB: over the shared memory of a block */
    must(frt_cuda_gemm_plan(g, 8, 17408, 64, F32, 0), "plan");
    CHECK_MSG(frt_cuda_gemm_gemv_rows(g) == 7, "gemv rows %d", frt_cuda_gemm_gemv_rows(g));
    frt_cuda_gemm_destroy(g);
    printf("  gemv rows: %d, 7 after a plan of 8 rows that does not fit\n", FRT_CUDA_GEMV_MAX_N);
}

static void test_bad_args(void)
{
    /* fake, never dereferenced pointers: every check below fails before the
     * handle or the buffers are touched */
    void *p = (void *)(uintptr_t)0x1000;
    uint16_t *hp = (uint16_t *)p;
    frt_cuda_gemm *fg = (frt_cuda_gemm *)p;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    CHECK_STATUS(frt_cuda_gemm_set_gemv(NULL, FRT_CUDA_GEMV_AUTO), E);
    CHECK_STATUS(frt_cuda_gemm_set_gemv(fg, (frt_cuda_gemv_policy)3), E);
    CHECK_STATUS(frt_cuda_gemm_set_gemv(fg, (frt_cuda_gemv_policy)-1), E);
    CHECK_STATUS(frt_cuda_gemm_plan(NULL, 1, 4096, 1024, F32, 0), E);
    CHECK_STATUS(frt_cuda_gemm_plan(fg, 0, 4096, 1024, F32, 0), E);          /* n 0 */
    CHECK_STATUS(frt_cuda_gemm_plan(fg, 1, 4100, 1024, F32, 0), E);          /* in % 8 */
    CHECK_STATUS(frt_cuda_gemm_plan(fg, 1, 4096, 0, F32, 0), E);             /* out 0 */
    CHECK_STATUS(frt_cuda_gemm_plan(fg, FRT_CUDA_GEMV_MAX_N + 1, 4096, 1001, F32, 0), E); /* out % 8, n > max */
    CHECK_STATUS(frt_cuda_gemm_plan(fg, 1, 4096, 1024, (frt_cuda_dtype)2, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(NULL, NULL, p, F32, hp, hp, 1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, NULL, F32, hp, hp, 1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, NULL, hp, 1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, hp, NULL, 1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, hp, hp, 1, 4092, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, hp, hp, -1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, hp, hp, FRT_CUDA_GEMV_MAX_N + 1, 4096, 3, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, (frt_cuda_dtype)9, hp, hp, 1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, hp + 1, hp, 1, 4096, 1024, 0), E); /* align */
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, p, F32, hp, hp + 4, 1, 4096, 1024, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(fg, NULL, (char *)p + 4, F32, hp, hp, 1, 4096, 1024, 0), E);
}

/* Errors that need a handle (and so a device). */
static void test_bad_args_device(void)
{
    frt_cuda_gemm *g = NULL;
    CHECK_OK(frt_cuda_gemm_create(0, &g));
    if (!g) return;
    dbuf d = dalloc(1 << 20);
    const uint16_t *hp = d.p;                 /* x and w (uninitialised: never checked) */
    void *yp = (char *)d.p + (512 << 10);     /* y, apart from them */
    /* no plan yet: FRT_ERR_STATE, nothing enqueued */
    CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, yp, F32, hp, hp, 1, 1000, 3, 0), FRT_ERR_STATE);
    /* the cuBLASLt path keeps out % 8 == 0 */
    CHECK_OK(frt_cuda_gemm_set_gemv(g, FRT_CUDA_GEMV_NEVER));
    CHECK_STATUS(frt_cuda_gemm_plan(g, 1, 1000, 3, F32, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_cuda_gemm_plan(g, 1, 1024, 256, F32, 0));
    frt_cuda_gemm_plan_info info;
    CHECK(plan_of(g, 1, 1024, 256, F32, 0, &info) == 0 && info.kernel == FRT_CUDA_GEMM_CUBLASLT &&
          info.algo_id >= 0);
    /* GEMV plans: no workspace needed (this handle has no stream added), and
     * the policy only applies to plans made after it */
    CHECK_OK(frt_cuda_gemm_set_gemv(g, FRT_CUDA_GEMV_AUTO));
    CHECK_OK(frt_cuda_gemm_plan(g, 1, 1024, 256, F32, 0)); /* cached: stays cuBLASLt */
    CHECK(plan_of(g, 1, 1024, 256, F32, 0, &info) == 0 && info.kernel == FRT_CUDA_GEMM_CUBLASLT);
    CHECK_OK(frt_cuda_gemm_plan(g, 1, 1000, 3, F32, 0));
    CHECK(plan_of(g, 1, 1000, 3, F32, 0, &info) == 1 && info.kernel == FRT_CUDA_GEMM_GEMV &&
          info.algo_id == -1 && info.custom_option >= 1 && info.tile_id >= 1 &&
          info.splitk_num >= 1 && info.gemv_blocks >= 1);
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, yp, F32, hp, hp, 1, 1000, 3, 0));
    CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, yp, BF16, hp, hp, 1, 1000, 3, 0), FRT_ERR_STATE);
    CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, yp, F32, hp, hp, 2, 1000, 3, 0), FRT_ERR_STATE);
    CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, yp, F32, hp, hp, 1, 1000, 3, 1), FRT_ERR_STATE);
    CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, (char *)yp + 8, F32, hp, hp, 1, 1000, 3, 0),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_plan(g, FRT_CUDA_GEMV_MAX_N + 1, 1000, 3, F32, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_plan_get(g, 2, &info), FRT_ERR_OUT_OF_RANGE);
    sync_st();
    dfree(&d);
    frt_cuda_gemm_destroy(g);
}

/* ---- main ------------------------------------------------------------------ */

int main(void)
{
    printf("  %-62s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();

    test_bad_args_device();

    frt_cuda_gemm *g = NULL, *g_lt = NULL, *g_all = NULL;
    must(frt_cuda_gemm_create((size_t)32 << 20, &g), "gemm");
    must(frt_cuda_gemm_create((size_t)32 << 20, &g_lt), "gemm");
    must(frt_cuda_gemm_create((size_t)32 << 20, &g_all), "gemm");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    must(frt_cuda_gemm_add_stream(g_lt, g_cs), "gemm stream");
    must(frt_cuda_gemm_add_stream(g_all, g_cs), "gemm stream");
    must(frt_cuda_gemm_set_gemv(g_lt, FRT_CUDA_GEMV_NEVER), "policy");
    must(frt_cuda_gemm_set_gemv(g_all, FRT_CUDA_GEMV_ALWAYS), "policy");
    const char *only = getenv("FRT_TEST_TIMING_ONLY"); /* 1: the timing rows alone (A/B of libraries) */
    if (only && strcmp(only, "1") == 0) goto timing;

    /* qwen3.5-9b: gate/up and in_proj_qkv, down, q|gate, k/v, o_proj / z /
     * out_proj, in_proj_b|a; a 32000-row LM head */
    const int n1234[6] = {1, 2, 3, 4, 5, 8}, n14[3] = {1, 4, 8};
    const int n14s[2] = {1, 4}; /* x [8, in] over a block's shared memory: cuBLASLt at n 8 */
    gemv_shape(g, "9b mlp gate/up", 4096, 12288, n1234, 6);
    gemv_shape(g, "9b mlp down", 12288, 4096, n1234, 6);
    gemv_shape(g, "9b q|gate", 4096, 8192, n1234, 6);
    gemv_shape(g, "9b k/v", 4096, 1024, n1234, 6);
    gemv_shape(g, "9b o/z/out", 4096, 4096, n1234, 6);
    gemv_shape(g, "9b b|a", 4096, 64, n1234, 6);
    gemv_shape(g, "lm_head 32k", 4096, 32000, n14, 3);
    /* the 27B: hidden 5120, MLP 17408, 24 q heads x 256 (x2 gate), 48 value
     * heads x 128 */
    gemv_shape(g, "27b mlp gate/up", 5120, 17408, n14, 3);
    gemv_shape(g, "27b mlp down", 17408, 5120, n14s, 2);
    gemv_shape(g, "27b q|gate", 5120, 12288, n14, 3);
    gemv_shape(g, "27b in_proj_qkv", 5120, 10240, n14, 3);
    gemv_shape(g, "27b o/out", 6144, 5120, n14, 3);
    gemv_shape(g, "27b z", 5120, 6144, n14, 3);
    gemv_shape(g, "27b k/v", 5120, 1024, n14, 3);
    gemv_shape(g, "27b b|a", 5120, 96, n14, 3);
    /* odd sizes */
    gemv_shape(g, "odd", 8, 1, n1234, 6);
    gemv_shape(g, "odd", 72, 7, n1234, 6);
    gemv_shape(g, "odd", 264, 1, n1234, 6);
    gemv_shape(g, "odd", 1000, 3, n1234, 6);
    gemv_shape(g, "odd", 2056, 13, n1234, 6);
    gemv_shape(g, "odd", 4104, 1000, n1234, 6);
    gemv_shape(g, "odd", 4096, 1, n1234, 6);
    gemv_shape(g, "odd", 12296, 2050, n14, 3);

    test_graph(g);
    test_run_unless(g);
    test_gemv_rows();
    test_ring_bits();
    test_lm_head(g, g_lt);

    printf("  gemv plans of the 9b decode shapes (for the fingerprint):\n");
    const int shapes9[6][2] = {{4096, 12288}, {12288, 4096}, {4096, 8192},
                               {4096, 1024},  {4096, 4096},  {4096, 64}};
    for (int s = 0; s < 6; s++) {
        frt_cuda_gemm_plan_info info;
        if (plan_of(g, 1, shapes9[s][0], shapes9[s][1], F32, 0, &info) < 0) continue;
        printf("    n 1 in %5d out %6d: rows/block %d, rows/warp %d, warps/row %d, warps/block %d, "
               "blocks %d, loads in flight/lane %d, version %d\n",
               info.in_dim, info.out_dim, info.tile_id, info.gemv_rows_per_warp, info.splitk_num,
               info.cta_swizzling, info.gemv_blocks, info.stages_id, info.custom_option);
    }

timing:
    printf("  timings (f32 out, graph of back-to-back calls, weights not in L2; floor = bytes / "
           "%.1f TB/s):\n",
           HBM_BYTES_PER_S / 1e12);
    for (int n = 1; n <= FRT_CUDA_GEMV_MAX_N; n = n == 1 ? 4 : n * 2) {
        time_shape(g, g_lt, "9b gate/up/qkv", n, 4096, 12288);
        time_shape(g, g_lt, "9b down", n, 12288, 4096);
        time_shape(g, g_lt, "9b q|gate", n, 4096, 8192);
        time_shape(g, g_lt, "9b k/v", n, 4096, 1024);
        time_shape(g, g_lt, "9b o/z/out", n, 4096, 4096);
        time_shape(g, g_lt, "9b b|a", n, 4096, 64);
        time_shape(g, g_lt, "27b gate/up", n, 5120, 17408);
        time_shape(g, g_lt, "27b down", n, 17408, 5120);
    }
    time_shape(g_all, g_lt, "lm_head", 1, 4096, 248320);

    frt_cuda_gemm_destroy(g);
    frt_cuda_gemm_destroy(g_lt);
    frt_cuda_gemm_destroy(g_all);
    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
