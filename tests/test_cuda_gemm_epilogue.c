/*
 * test_cuda_gemm_epilogue.c - frt_cuda_gemm_plan_epilogue /
 * frt_cuda_gemm_run_epilogue (y bf16 = bf16(x . w^T + b), and with
 * cuBLASLt's GELU: bf16(gelu_tanh(x . w^T + b)); src/kernels/cuda/gemm.cu)
 * against the CPU twin (frt_cpu_matmul, the bias, frt_cpu_gelu_tanh, one
 * bf16 rounding) on random data (SplitMix64), norm-wise within 1e-2, the
 * bf16 inputs and bias rounded the same way on both sides:
 *   - SigLIP So400m's q | k | v (1152 -> 3456) and fc1 (1152 -> 4304) at
 *     256 rows (one camera), and odd shapes (9, 37 and 130 rows, inner
 *     dimensions 72 and 264, outputs 24 and 520);
 *   - against the launches the epilogue replaces (frt_cuda_gemm_run into
 *     f32, then frt_cuda_bias_act): within 1e-2, and the count of bf16
 *     values that differ is printed (the bias form has given the same bits
 *     where both plans reduce alike; GELU's tanh may differ in the last bit);
 *   - bytes past y stay untouched; three runs give the same bytes;
 *   - a CUDA graph of two runs of one plan with two different biases (the
 *     bias is the descriptor's attribute, set per call) replays each with
 *     its own bias, with new inputs, to the eager bytes;
 *   - the plan's info (epilogue, cuBLASLt), a plain plan of the same shape
 *     is its own, autotune leaves the epilogue plan alone, and the model
 *     fingerprint changes with the epilogue;
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before the device
 *     check (they run on machines without a GPU), a missing plan with
 *     FRT_ERR_STATE.
 * Exits 77 (skipped) without a device.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;
static uint64_t g_rng = 20261128;

/* The CPU twin: bf16(act(x . w^T + b)) as f32. */
static float *twin(const hmat *x, const hmat *w, const hmat *b, int n, int in, int out, frt_cuda_gemm_epilogue epi)
{
    const size_t ny = (size_t)n * out;
    float *ref = fnew(ny);
    frt_cpu_matmul(ref, x->f, w->f, n, in, out);
    for (size_t i = 0; i < ny; i++) ref[i] += b->f[i % (size_t)out];
    if (epi == FRT_CUDA_GEMM_EPI_BIAS_GELU) frt_cpu_gelu_tanh(ref, ref, (int)ny);
    round_bf16(ref, ny);
    return ref;
}

/* One case: the epilogue against the CPU twin and against the launches it
 * replaces. */
static void epi_case(frt_cuda_gemm *g, const char *tag, int n, int in, int out, frt_cuda_gemm_epilogue epi)
{
    const size_t ny = (size_t)n * out, pad = 256;
    hmat w = hmat_rand(&g_rng, out, in, -1, 1), x = hmat_rand(&g_rng, n, in, -1, 1);
    hmat b = hmat_rand(&g_rng, 1, out, -2, 2);
    dbuf dw = dalloc((size_t)out * in * 2), dx = dalloc((size_t)n * in * 2), db = dalloc((size_t)out * 2);
    dbuf dbf = dalloc((size_t)out * 4), dy = dalloc(ny * 2 + pad), dyf = dalloc(ny * 4), dy2 = dalloc(ny * 2);
    dput(dw, 0, w.b, (size_t)out * in * 2);
    dput(dx, 0, x.b, (size_t)n * in * 2);
    dput(db, 0, b.b, (size_t)out * 2);
    dput(dbf, 0, b.f, (size_t)out * 4);
    dsentinel(dy);

    char name[160];
    snprintf(name, sizeof name, "%s n %d in %d out %d, %s", tag, n, in, out,
             epi == FRT_CUDA_GEMM_EPI_BIAS ? "bias" : "bias + gelu");
    CHECK_OK(frt_cuda_gemm_plan_epilogue(g, n, in, out, epi));
    CHECK_OK(frt_cuda_gemm_plan_epilogue(g, n, in, out, epi)); /* cached: a no-op */
    float *ref = twin(&x, &w, &b, n, in, out, epi), *got = fnew(ny);
    void *runs[3];
    for (int r = 0; r < 3; r++) {
        CHECK_OK(frt_cuda_gemm_run_epilogue(g, g_cs, dy.p, dx.p, dw.p, db.p, n, in, out, epi));
        sync_st();
        runs[r] = snap(dy, ny * 2);
    }
    dget_as(dy, got, ny, BF16);
    char line[400];
    snprintf(line, sizeof line, "%s: against the CPU", name);
    report(line, frt_test_rel_err(got, ref, ny), TOL_BF16);
    snprintf(line, sizeof line, "%s: bytes past y untouched", name);
    report_flag(line, untouched(dy, ny * 2, pad));
    snprintf(line, sizeof line, "%s: three runs, the same bytes", name);
    report_flag(line, !memcmp(runs[0], runs[1], ny * 2) && !memcmp(runs[0], runs[2], ny * 2));

    /* the launches it replaces: the product into f32, then the bias (and GELU) into bf16 */
    CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, F32, 0));
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, dyf.p, F32, dx.p, dw.p, n, in, out, 0));
    CHECK_OK(frt_cuda_bias_act(g_cs, dy2.p, BF16, dyf.p, dbf.p, n, out,
                               epi == FRT_CUDA_GEMM_EPI_BIAS ? FRT_CUDA_ACT_NONE : FRT_CUDA_ACT_GELU_TANH));
    sync_st();
    float *two = fnew(ny);
    dget_as(dy2, two, ny, BF16);
    uint16_t *b1 = runs[0], *b2 = snap(dy2, ny * 2);
    size_t differ = 0;
    for (size_t i = 0; i < ny; i++) differ += b1[i] != b2[i];
    snprintf(line, sizeof line, "%s: against GEMM + bias_act (%zu of %zu differ)", name, differ, ny);
    report(line, frt_test_rel_err(got, two, ny), TOL_BF16);
    frt_cuda_gemm_plan_info info;
    int found = 0;
    for (int i = 0; i < frt_cuda_gemm_plan_count(g); i++)
        if (frt_cuda_gemm_plan_get(g, i, &info) == 0 && info.n == n && info.in_dim == in && info.out_dim == out &&
            info.epilogue == epi)
            found += info.kernel == FRT_CUDA_GEMM_CUBLASLT && info.out_dtype == BF16 && !info.accumulate;
    snprintf(line, sizeof line, "%s: one cuBLASLt plan with the epilogue", name);
    report_flag(line, found == 1);
    for (int r = 0; r < 3; r++) free(runs[r]);
    free(b2);
    free(two);
    free(ref);
    free(got);
    hmat_free(&w);
    hmat_free(&x);
    hmat_free(&b);
    dfree(&dw), dfree(&dx), dfree(&db), dfree(&dbf), dfree(&dy), dfree(&dyf), dfree(&dy2);
}

/* ---- a graph: one plan, two biases ----------------------------------------- */

typedef struct grec {
    frt_cuda_gemm *g;
    dbuf x, w, b1, b2, y1, y2;
    int n, in, out;
} grec;

static int record_two(frt_stream *stream, void *user)
{
    grec *r = user;
    void *s = frt_stream_native(stream);
    FRT_TEST_TRY_(frt_cuda_gemm_run_epilogue(r->g, s, r->y1.p, r->x.p, r->w.p, r->b1.p, r->n, r->in, r->out,
                                             FRT_CUDA_GEMM_EPI_BIAS_GELU));
    FRT_TEST_TRY_(frt_cuda_gemm_run_epilogue(r->g, s, r->y2.p, r->x.p, r->w.p, r->b2.p, r->n, r->in, r->out,
                                             FRT_CUDA_GEMM_EPI_BIAS_GELU));
    return 0;
}

static void test_graph(frt_cuda_gemm *g)
{
    grec r = {.g = g, .n = 40, .in = 136, .out = 200};
    const size_t nx = (size_t)r.n * r.in, ny = (size_t)r.n * r.out;
    r.x = dalloc(nx * 2), r.w = dalloc((size_t)r.out * r.in * 2);
    r.b1 = dalloc((size_t)r.out * 2), r.b2 = dalloc((size_t)r.out * 2);
    r.y1 = dalloc(ny * 2), r.y2 = dalloc(ny * 2);
    CHECK_OK(frt_cuda_gemm_plan_epilogue(g, r.n, r.in, r.out, FRT_CUDA_GEMM_EPI_BIAS_GELU));
    hmat w = hmat_rand(&g_rng, r.out, r.in, -1, 1);
    hmat b1 = hmat_rand(&g_rng, 1, r.out, -2, 2), b2 = hmat_rand(&g_rng, 1, r.out, -2, 2);
    dput(r.w, 0, w.b, (size_t)r.out * r.in * 2);
    dput(r.b1, 0, b1.b, (size_t)r.out * 2);
    dput(r.b2, 0, b2.b, (size_t)r.out * 2);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "epilogue", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_two, &r));
    int same = 1;
    for (int rep = 0; rep < 2; rep++) { /* new inputs each replay */
        hmat x = hmat_rand(&g_rng, r.n, r.in, -1, 1);
        dput(r.x, 0, x.b, nx * 2);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        void *g1 = snap(r.y1, ny * 2), *g2 = snap(r.y2, ny * 2);
        float *ref = twin(&x, &w, &b2, r.n, r.in, r.out, FRT_CUDA_GEMM_EPI_BIAS_GELU), *got = fnew(ny);
        dget_as(r.y2, got, ny, BF16);
        report("  graph replay: the second run's bias, against the CPU", frt_test_rel_err(got, ref, ny), TOL_BF16);
        CHECK_OK(record_two(g_st, &r));
        sync_st();
        void *e1 = snap(r.y1, ny * 2), *e2 = snap(r.y2, ny * 2);
        same &= !memcmp(g1, e1, ny * 2) && !memcmp(g2, e2, ny * 2) && memcmp(g1, g2, ny * 2);
        free(ref), free(got), free(g1), free(g2), free(e1), free(e2);
        hmat_free(&x);
    }
    report_flag("  graph replays (two biases, one plan) give the eager bytes", same);
    frt_graph_destroy(graph);
    hmat_free(&w), hmat_free(&b1), hmat_free(&b2);
    dfree(&r.x), dfree(&r.w), dfree(&r.b1), dfree(&r.b2), dfree(&r.y1), dfree(&r.y2);
}

/* The epilogue plan keeps its first choice under autotune; the fingerprint
 * tells a handle with it from one without. */
static void test_plans(void)
{
    frt_cuda_gemm *a = NULL, *b = NULL;
    must(frt_cuda_gemm_create((size_t)32 << 20, &a), "gemm");
    must(frt_cuda_gemm_create((size_t)32 << 20, &b), "gemm");
    must(frt_cuda_gemm_add_stream(a, g_cs), "gemm stream");
    must(frt_cuda_gemm_add_stream(b, g_cs), "gemm stream");
    CHECK_OK(frt_cuda_gemm_plan(a, 64, 256, 512, BF16, 0));
    CHECK_OK(frt_cuda_gemm_plan(b, 64, 256, 512, BF16, 0));
    const uint64_t fa = frt_cuda_gemm_fingerprint(a);
    CHECK(fa == frt_cuda_gemm_fingerprint(b));
    CHECK_OK(frt_cuda_gemm_plan_epilogue(b, 64, 256, 512, FRT_CUDA_GEMM_EPI_BIAS));
    report_flag("a plain plan and an epilogue plan of one shape: two plans", frt_cuda_gemm_plan_count(b) == 2);
    report_flag("the fingerprint changes with an epilogue plan", frt_cuda_gemm_fingerprint(b) != fa);
    CHECK_OK(frt_cuda_gemm_autotune(b, 4, g_cs));
    frt_cuda_gemm_plan_info pi;
    int ok = 0;
    for (int i = 0; i < frt_cuda_gemm_plan_count(b); i++)
        if (frt_cuda_gemm_plan_get(b, i, &pi) == 0 && pi.epilogue == FRT_CUDA_GEMM_EPI_BIAS)
            ok = pi.tune_index == 0 && pi.tune_candidates == 0;
    report_flag("autotune leaves the epilogue plan on the heuristic's first choice", ok);
    frt_cuda_gemm_destroy(a);
    frt_cuda_gemm_destroy(b);
}

int main(void)
{
    printf("test_cuda_gemm_epilogue\n");
    uint16_t *p = (uint16_t *)(uintptr_t)64;
    const frt_cuda_gemm_epilogue E = FRT_CUDA_GEMM_EPI_BIAS;
    CHECK_STATUS(frt_cuda_gemm_plan_epilogue(NULL, 16, 64, 64, E), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_run_epilogue(NULL, NULL, p, p, p, p, 16, 64, 64, E), FRT_ERR_INVALID_ARGUMENT);
    const int sms = frt_test_cuda_start();
    (void)sms;
    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create((size_t)32 << 20, &g), "gemm");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    dbuf d = dalloc(1 << 16);
    uint16_t *q = d.p;
    CHECK_STATUS(frt_cuda_gemm_plan_epilogue(g, 16, 64, 64, FRT_CUDA_GEMM_EPI_NONE), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_plan_epilogue(g, 16, 64, 64, (frt_cuda_gemm_epilogue)3), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_plan_epilogue(g, 16, 60, 64, E), FRT_ERR_INVALID_ARGUMENT); /* in % 8 */
    CHECK_STATUS(frt_cuda_gemm_plan_epilogue(g, 16, 64, 60, E), FRT_ERR_INVALID_ARGUMENT); /* out % 8 */
    CHECK_STATUS(frt_cuda_gemm_plan_epilogue(g, 0, 64, 64, E), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_run_epilogue(g, g_cs, q, q, q, NULL, 16, 64, 64, E), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_run_epilogue(g, g_cs, q, q, q, q + 1, 16, 64, 64, E), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_run_epilogue(g, g_cs, q, q, q, q, 16, 64, 64, FRT_CUDA_GEMM_EPI_NONE),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_run_epilogue(g, g_cs, q, q, q, q, 16, 64, 64, E), FRT_ERR_STATE); /* no plan */
    CHECK_OK(frt_cuda_gemm_plan(g, 16, 64, 64, BF16, 0)); /* a plain plan is not the epilogue's */
    CHECK_STATUS(frt_cuda_gemm_run_epilogue(g, g_cs, q, q, q, q, 16, 64, 64, E), FRT_ERR_STATE);
    dfree(&d);

    const frt_cuda_gemm_epilogue G = FRT_CUDA_GEMM_EPI_BIAS_GELU;
    epi_case(g, "SigLIP q|k|v", 256, 1152, 3456, E);
    epi_case(g, "SigLIP fc1", 256, 1152, 4304, G);
    epi_case(g, "odd", 9, 72, 24, E);
    epi_case(g, "odd", 9, 72, 24, G);
    epi_case(g, "odd", 37, 264, 520, G);
    epi_case(g, "odd", 130, 264, 520, E);
    epi_case(g, "odd", 130, 72, 520, G);
    test_graph(g);
    test_plans();
    frt_cuda_gemm_destroy(g);
    return frt_test_report();
}

#endif
