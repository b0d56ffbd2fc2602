/*
 * test_cuda_gemm_skinny.c - the skinny GEMM of frt_cuda_gemm_run
 * (FRT_CUDA_GEMV_MAX_N < n <= 64 on a handle with frt_cuda_gemm_set_skinny,
 * src/kernels/cuda/gemm_skinny.cu) against the CPU twin frt_cpu_matmul /
 * frt_cpu_matmul_add on random data (SplitMix64, kernels/cpu/rng.h),
 * norm-wise ||gpu - cpu|| / ||cpu|| within 1e-4 (f32 out) or 1e-2 (bf16
 * out), the bf16 inputs rounded the same way on both sides:
 *   - llama3.1-8b's append products at 16, 32 and 64 rows (q | k | v, o_proj
 *     into the residual, gate / up in bf16, down_proj into the residual);
 *   - odd shapes: in_dim a multiple of 8 but not of 64 (the last unit's
 *     columns read as zeros), out_dim not a multiple of 256 (the last tile's
 *     rows too), 9, 17 and 63 rows (x's rows past n read as zeros), fewer
 *     units than splits, a single unit, bf16 out with accumulate;
 *   - bytes past y [n, out] stay untouched (sentinel); three runs give the
 *     same bytes; a CUDA graph replays the launches with new inputs and
 *     gives the eager bytes; the plans' kernel and info (the fingerprint's
 *     fields: tiles, units, the split); the GEMV keeps n <= 8, cuBLASLt
 *     n > 64, and a handle without set_skinny stays on cuBLASLt; a stream
 *     that was not added runs it too (no workspace), with the same bytes;
 *   - frt_cuda_gemm_swiglu (gate and up products and SwiGLU in one launch)
 *     against frt_cpu_matmul twice, bf16 rounding for bf16 products (none
 *     for f32 ones), frt_cpu_swiglu; refused (FRT_ERR_UNSUPPORTED) where the
 *     plan of that products dtype is not skinny or accumulates;
 *   - bad arguments fail cleanly with FRT_ERR_INVALID_ARGUMENT (before the
 *     device check: they also run on machines without a GPU).
 * Then times llama3.1-8b's four append products at 64 rows, skinny
 * against cuBLASLt, in CUDA graphs of back-to-back launches over weight
 * copies that defeat the L2, next to the floor (bytes / 3.0 TB/s, the
 * H100's measured copy rate, docs GPU.md). The timings are printed, not
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

#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#define TOL_F32 1e-4
#define COPY_BYTES_PER_S 3.0e12

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;
static uint64_t g_rng = 20261127;

/* One case: y = x . w^T (+ y0) on the skinny plan, against the CPU. */
static void skinny_case(frt_cuda_gemm *g, const char *tag, int n, int in, int out, frt_cuda_dtype odt, int acc)
{
    const size_t ny = (size_t)n * out, ybytes = ny * dsize(odt), pad = 256;
    hmat w = hmat_rand(&g_rng, out, in, -1, 1), x = hmat_rand(&g_rng, n, in, -1, 1);
    float *y0 = frand(ny, -4, 4);
    if (odt == BF16) round_bf16(y0, ny);
    dbuf dw = dalloc((size_t)out * in * 2), dx = dalloc((size_t)n * in * 2), dy = dalloc(ybytes + pad);
    dput(dw, 0, w.b, (size_t)out * in * 2);
    dput(dx, 0, x.b, (size_t)n * in * 2);
    dsentinel(dy);

    char name[160];
    snprintf(name, sizeof name, "%s n %d in %d out %d -> %s%s", tag, n, in, out, dtn(odt), acc ? " acc" : "");
    CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, odt, acc));
    frt_cuda_gemm_plan_info info;
    CHECK_MSG(plan_of(g, n, in, out, odt, acc, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_SKINNY && info.algo_id == -2,
              "%s: the plan is not skinny (kernel %d)", name, (int)info.kernel);

    float *ref = xzalloc(ny * sizeof(float)), *got = xzalloc(ny * sizeof(float));
    if (acc) {
        memcpy(ref, y0, ny * sizeof(float));
        frt_cpu_matmul_add(ref, x.f, w.f, n, in, out);
    } else {
        frt_cpu_matmul(ref, x.f, w.f, n, in, out);
    }
    void *runs[3] = {NULL, NULL, NULL};
    for (int r = 0; r < 3; r++) {
        if (acc) dput_as(dy, y0, ny, odt);
        CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, odt, dx.p, dw.p, n, in, out, acc));
        runs[r] = snap(dy, ybytes);
    }
    dget_as(dy, got, ny, odt);
    report(name, frt_test_rel_err(got, ref, ny), odt == BF16 ? TOL_BF16 : TOL_F32);
    CHECK_MSG(untouched(dy, ybytes, pad), "%s: wrote past y [n, out]", name);
    report_same("  three runs: the same bytes", runs[0], memcmp(runs[0], runs[1], ybytes) ? runs[1] : runs[2], ybytes);
    for (int r = 0; r < 3; r++) free(runs[r]);
    free(ref);
    free(got);
    free(y0);
    hmat_free(&x);
    hmat_free(&w);
    dfree(&dx);
    dfree(&dw);
    dfree(&dy);
}

/* frt_cuda_gemm_swiglu against the CPU: both products (each rounded to
 * bf16 for bf16 products), then frt_cpu_swiglu; and the same bytes three
 * times. */
static void swiglu_case(frt_cuda_gemm *g, int n, int in, int out, frt_cuda_dtype products)
{
    const size_t ny = (size_t)n * out;
    hmat wg = hmat_rand(&g_rng, out, in, -1, 1), wu = hmat_rand(&g_rng, out, in, -1, 1), x = hmat_rand(&g_rng, n, in, -1, 1);
    dbuf dwg = dalloc((size_t)out * in * 2), dwu = dalloc((size_t)out * in * 2), dx = dalloc((size_t)n * in * 2),
         dy = dalloc(ny * 2 + 256);
    dput(dwg, 0, wg.b, (size_t)out * in * 2);
    dput(dwu, 0, wu.b, (size_t)out * in * 2);
    dput(dx, 0, x.b, (size_t)n * in * 2);
    dsentinel(dy);
    CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, products, 0));
    CHECK_MSG(frt_cuda_gemm_swiglu_ok(g, n, in, out, products), "swiglu n %d in %d out %d: not available", n, in, out);
    float *gate = fnew(ny), *up = fnew(ny), *ref = fnew(ny), *got = fnew(ny);
    frt_cpu_matmul(gate, x.f, wg.f, n, in, out);
    frt_cpu_matmul(up, x.f, wu.f, n, in, out);
    if (products == BF16) {
        round_bf16(gate, ny);
        round_bf16(up, ny);
    }
    frt_cpu_swiglu(ref, gate, up, (int)ny);
    void *runs[3];
    for (int r = 0; r < 3; r++) {
        CHECK_OK(frt_cuda_gemm_swiglu(g, g_cs, dy.p, dx.p, dwg.p, dwu.p, n, in, out, products));
        runs[r] = snap(dy, ny * 2);
    }
    dget_as(dy, got, ny, BF16);
    char name[160];
    snprintf(name, sizeof name, "swiglu n %d in %d out %d, %s products -> bf16", n, in, out, dtn(products));
    report(name, frt_test_rel_err(got, ref, ny), TOL_BF16);
    CHECK_MSG(untouched(dy, ny * 2, 256), "%s: wrote past y [n, out]", name);
    report_same("  three runs: the same bytes", runs[0], memcmp(runs[0], runs[1], ny * 2) ? runs[1] : runs[2], ny * 2);
    for (int r = 0; r < 3; r++) free(runs[r]);
    free(gate), free(up), free(ref), free(got);
    hmat_free(&wg), hmat_free(&wu), hmat_free(&x);
    dfree(&dwg), dfree(&dwu), dfree(&dx), dfree(&dy);
}

/* ---- a graph replays the launches ----------------------------------------- */

typedef struct grec {
    frt_cuda_gemm *g;
    dbuf x, w, y1, y2;
    int n, in, out;
} grec;

static int record_two(frt_stream *stream, void *user)
{
    grec *r = user;
    void *s = frt_stream_native(stream);
    /* two launches of one plan back to back: the second's counters are the first's, reset */
    FRT_TEST_TRY_(frt_cuda_gemm_run(r->g, s, r->y1.p, F32, r->x.p, r->w.p, r->n, r->in, r->out, 0));
    FRT_TEST_TRY_(frt_cuda_gemm_run(r->g, s, r->y2.p, F32, r->x.p, r->w.p, r->n, r->in, r->out, 1));
    return 0;
}

static void test_graph(frt_cuda_gemm *g)
{
    grec r = {g, {0}, {0}, {0}, {0}, 64, 1000, 776};
    const size_t nx = (size_t)r.n * r.in, ny = (size_t)r.n * r.out;
    r.x = dalloc(nx * 2);
    r.w = dalloc((size_t)r.out * r.in * 2);
    r.y1 = dalloc(ny * 4);
    r.y2 = dalloc(ny * 4);
    CHECK_OK(frt_cuda_gemm_plan(g, r.n, r.in, r.out, F32, 0));
    CHECK_OK(frt_cuda_gemm_plan(g, r.n, r.in, r.out, F32, 1));
    hmat w = hmat_rand(&g_rng, r.out, r.in, -1, 1);
    dput(r.w, 0, w.b, (size_t)r.out * r.in * 2);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "skinny", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_two, &r));
    int same = 1;
    for (int rep = 0; rep < 2; rep++) { /* new inputs each replay */
        hmat x = hmat_rand(&g_rng, r.n, r.in, -1, 1);
        float *y0 = frand(ny, -2, 2);
        dput(r.x, 0, x.b, nx * 2);
        dput_as(r.y2, y0, ny, F32);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        void *g1 = snap(r.y1, ny * 4), *g2 = snap(r.y2, ny * 4);
        CHECK_OK(frt_cuda_gemm_run(g, g_cs, r.y1.p, F32, r.x.p, r.w.p, r.n, r.in, r.out, 0));
        dput_as(r.y2, y0, ny, F32);
        CHECK_OK(frt_cuda_gemm_run(g, g_cs, r.y2.p, F32, r.x.p, r.w.p, r.n, r.in, r.out, 1));
        void *e1 = snap(r.y1, ny * 4), *e2 = snap(r.y2, ny * 4);
        same &= !memcmp(g1, e1, ny * 4) && !memcmp(g2, e2, ny * 4);
        float *ref = fdup(y0, ny), *got = fnew(ny);
        frt_cpu_matmul_add(ref, x.f, w.f, r.n, r.in, r.out);
        dget_as(r.y2, got, ny, F32);
        report("  graph replay with new inputs: accumulate against the CPU", frt_test_rel_err(got, ref, ny), TOL_F32);
        free(ref);
        free(got);
        free(g1);
        free(g2);
        free(e1);
        free(e2);
        free(y0);
        hmat_free(&x);
    }
    report_flag("  graph replays (2 launches each) give the eager bytes", same);
    frt_graph_destroy(graph);
    hmat_free(&w);
    dfree(&r.x);
    dfree(&r.w);
    dfree(&r.y1);
    dfree(&r.y2);
}

/* Which kernel each handle picks, and the refusals. */
static void test_plans(frt_cuda_gemm *g, frt_cuda_gemm *g_lt, int sms)
{
    frt_cuda_gemm_plan_info info;
    CHECK_OK(frt_cuda_gemm_plan(g, 8, 4096, 1024, F32, 0));
    CHECK(plan_of(g, 8, 4096, 1024, F32, 0, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_GEMV);
    CHECK_OK(frt_cuda_gemm_plan(g, 65, 4096, 1024, F32, 0));
    CHECK(plan_of(g, 65, 4096, 1024, F32, 0, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_CUBLASLT);
    CHECK_OK(frt_cuda_gemm_plan(g_lt, 64, 4096, 1024, F32, 0));
    CHECK(plan_of(g_lt, 64, 4096, 1024, F32, 0, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_CUBLASLT);
    /* 4 tiles x 64 units: split 8 (32 blocks); 4 tiles x 4 units: split 4 */
    CHECK_OK(frt_cuda_gemm_plan(g, 64, 4096, 1024, F32, 0));
    CHECK(plan_of(g, 64, 4096, 1024, F32, 0, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_SKINNY &&
          info.tile_id == 4 && info.stages_id == 64 && info.splitk_num == (sms >= 32 ? 8 : sms / 4) &&
          info.custom_option >= 1);
    printf("  plan n 64 in 4096 out 1024: %d tiles x %d units, split %d\n", info.tile_id, info.stages_id,
           info.splitk_num);
    CHECK_OK(frt_cuda_gemm_plan(g, 16, 256, 1024, F32, 0));
    CHECK(plan_of(g, 16, 256, 1024, F32, 0, &info) >= 0 && info.splitk_num == 4);
    /* an accumulating plan has no SwiGLU form */
    CHECK(plan_of(g, 64, 4096, 4096, F32, 1, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_SKINNY &&
          info.reduction_scheme == 0 && info.cta_swizzling == 0);
    /* a bf16 plan carries its SwiGLU form's tiles (of 128) and split into the fingerprint's fields */
    CHECK(plan_of(g, 64, 4096, 14336, BF16, 0, &info) >= 0 && info.kernel == FRT_CUDA_GEMM_SKINNY &&
          info.cta_swizzling == 112 && info.reduction_scheme >= 1 && info.tile_id == 56);
    /* a stream that was not added: no workspace needed, the same bytes */
    frt_stream *other = NULL;
    CHECK_OK(frt_stream_create(g_ctx, 0, &other));
    dbuf x = dalloc(64 * 4096 * 2), w = dalloc((size_t)1024 * 4096 * 2), y = dalloc(64 * 1024 * 4);
    hmat hx = hmat_rand(&g_rng, 64, 4096, -1, 1), hw = hmat_rand(&g_rng, 1024, 4096, -1, 1);
    dput(x, 0, hx.b, (size_t)64 * 4096 * 2);
    dput(w, 0, hw.b, (size_t)1024 * 4096 * 2);
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, y.p, F32, x.p, w.p, 64, 4096, 1024, 0));
    void *y1 = snap(y, 64 * 1024 * 4);
    CHECK_OK(frt_cuda_gemm_run(g, frt_stream_native(other), y.p, F32, x.p, w.p, 64, 4096, 1024, 0));
    CHECK_OK(frt_stream_sync(other));
    void *y2 = snap(y, 64 * 1024 * 4);
    report_same("  a stream that was not added: the same bytes", y1, y2, 64 * 1024 * 4);
    free(y1);
    free(y2);
    hmat_free(&hx);
    hmat_free(&hw);
    CHECK_STATUS(frt_cuda_gemm_run_unless(g, g_cs, (const int32_t *)y.p, y.p, F32, x.p, w.p, 64, 4096, 1024, 0),
              FRT_ERR_UNSUPPORTED);
    /* the SwiGLU form: only where the bf16 plan is skinny */
    CHECK(!frt_cuda_gemm_swiglu_ok(g_lt, 64, 4096, 1024, F32));
    CHECK_STATUS(frt_cuda_gemm_swiglu(g_lt, g_cs, y.p, x.p, w.p, w.p, 64, 4096, 1024, F32), FRT_ERR_UNSUPPORTED);
    CHECK(frt_cuda_gemm_swiglu_ok(g, 64, 4096, 1024, F32));
    CHECK(!frt_cuda_gemm_swiglu_ok(g, 64, 4096, 1024, BF16)); /* f32 out planned only */
    CHECK_STATUS(frt_cuda_gemm_swiglu(g, g_cs, y.p, x.p, w.p, w.p, 64, 4096, 1024, BF16), FRT_ERR_UNSUPPORTED);
    CHECK(!frt_cuda_gemm_swiglu_ok(g, 64, 4096, 4096, F32)); /* accumulating only */
    frt_stream_destroy(other);
    dfree(&x);
    dfree(&w);
    dfree(&y);
}

/* ---- timing -------------------------------------------------------------- */

/* A graph of launches cycling over copies of the weights (one matrix, or
 * gate and up side by side for the SwiGLU form: glu). */
typedef struct bench {
    frt_cuda_gemm *g;
    int n, in, out, acc, glu;
    frt_cuda_dtype odt;
    wcopies c;
} bench;

static int record_bench(frt_stream *stream, void *user)
{
    bench *b = user;
    void *s = frt_stream_native(stream);
    for (int i = 0; i < b->c.reps; i++) {
        const uint16_t *w = wcopies_at(&b->c, i);
        if (b->glu)
            FRT_TEST_TRY_(frt_cuda_gemm_swiglu(b->g, s, b->c.y.p, b->c.x.p, w, w + (size_t)b->out * b->in, b->n, b->in,
                                               b->out, BF16));
        else
            FRT_TEST_TRY_(frt_cuda_gemm_run(b->g, s, b->c.y.p, b->odt, b->c.x.p, w, b->n, b->in, b->out, b->acc));
    }
    return 0;
}

/* Microseconds a launch (-1 when the plan fails): 64 launches over copies
 * of the weights (wcopies_us). */
static double time_gemm(frt_cuda_gemm *g, int n, int in, int out, frt_cuda_dtype odt, int acc, int glu)
{
    bench b = {g, n, in, out, acc, glu, odt, {0}};
    if (frt_cuda_gemm_plan(g, n, in, out, odt, acc) < 0) return -1;
    return wcopies_us(&b.c, "skinny-bench", (size_t)out * in * 2 * (glu ? 2 : 1), (size_t)n * in * 2,
                      (size_t)n * out * 4, 64, record_bench, &b);
}

static void time_shape(frt_cuda_gemm *g, frt_cuda_gemm *g_lt, const char *tag, int n, int in, int out,
                       frt_cuda_dtype odt, int acc)
{
    const double bytes = (double)out * in * 2, floor_us = bytes / COPY_BYTES_PER_S * 1e6;
    const double t_sk = time_gemm(g, n, in, out, odt, acc, 0), t_lt = time_gemm(g_lt, n, in, out, odt, acc, 0);
    printf("  time %-10s n %d %5d -> %6d %5.1f MB: floor %6.1f us | skinny %6.1f us %5.2f TB/s | cublaslt %6.1f us "
           "%5.2f TB/s\n",
           tag, n, in, out, bytes / 1e6, floor_us, t_sk, bytes / (t_sk * 1e-6) / 1e12, t_lt,
           bytes / (t_lt * 1e-6) / 1e12);
}

/* The SwiGLU form: gate and up products and the SwiGLU in one launch. */
static void time_swiglu(frt_cuda_gemm *g, int n, int in, int out)
{
    const double bytes = 2.0 * out * in * 2, us = time_gemm(g, n, in, out, BF16, 0, 1);
    printf("  time %-10s n %d %5d -> %6d %5.1f MB: floor %6.1f us | gate + up + SwiGLU in one launch %6.1f us "
           "%5.2f TB/s\n",
           "swiglu", n, in, out, bytes / 1e6, bytes / COPY_BYTES_PER_S * 1e6, us, bytes / (us * 1e-6) / 1e12);
}

int main(void)
{
    printf("test_cuda_gemm_skinny\n");
    CHECK_STATUS(frt_cuda_gemm_set_skinny(NULL, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_swiglu(NULL, NULL, NULL, NULL, NULL, NULL, 64, 64, 64, BF16), FRT_ERR_INVALID_ARGUMENT);
    CHECK(!frt_cuda_gemm_swiglu_ok(NULL, 64, 64, 64, BF16));
    const int sms = frt_test_cuda_start();
    frt_cuda_gemm *g = NULL, *g_lt = NULL;
    must(frt_cuda_gemm_create((size_t)32 << 20, &g), "gemm");
    must(frt_cuda_gemm_create((size_t)32 << 20, &g_lt), "gemm");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    must(frt_cuda_gemm_add_stream(g_lt, g_cs), "gemm stream");
    CHECK_STATUS(frt_cuda_gemm_set_skinny(g, 2), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_cuda_gemm_set_skinny(g, 1));

    const int ns[3] = {16, 32, 64};
    for (int i = 0; i < 3; i++) {
        skinny_case(g, "8b q|k|v", ns[i], 4096, 6144, F32, 0);
        skinny_case(g, "8b o_proj", ns[i], 4096, 4096, F32, 1);
        skinny_case(g, "8b gate", ns[i], 4096, 14336, BF16, 0);
        skinny_case(g, "8b down", ns[i], 14336, 4096, F32, 1);
    }
    skinny_case(g, "odd", 9, 200, 264, F32, 0);
    skinny_case(g, "odd", 17, 1000, 776, F32, 1);
    skinny_case(g, "odd", 63, 72, 4104, BF16, 1);
    skinny_case(g, "odd", 64, 8, 8, F32, 0);
    skinny_case(g, "odd", 33, 12296, 520, BF16, 0);
    skinny_case(g, "odd", 40, 1480, 2048, F32, 1); /* 24 units: a split that does not divide them */
    swiglu_case(g, 64, 4096, 14336, BF16);
    swiglu_case(g, 16, 4096, 14336, BF16);
    swiglu_case(g, 33, 1000, 776, BF16);
    swiglu_case(g, 9, 200, 264, BF16);
    swiglu_case(g, 64, 4096, 12288, F32); /* the hybrid's (qwen3.5-9b) MLP, f32 products */
    swiglu_case(g, 17, 1000, 776, F32);
    test_graph(g);
    test_plans(g, g_lt, sms);

    printf("  timings (graph of 64 back-to-back launches, weights not in L2; floor = bytes / %.1f TB/s):\n",
           COPY_BYTES_PER_S / 1e12);
    for (int n = 16; n <= 64; n *= 2) {
        time_shape(g, g_lt, "q|k|v", n, 4096, 6144, F32, 0);
        time_shape(g, g_lt, "o_proj", n, 4096, 4096, F32, 1);
        time_shape(g, g_lt, "gate/up", n, 4096, 14336, BF16, 0);
        time_shape(g, g_lt, "down", n, 14336, 4096, F32, 1);
        time_swiglu(g, n, 4096, 14336);
    }
    frt_cuda_gemm_destroy(g);
    frt_cuda_gemm_destroy(g_lt);
    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
