/*
 * test_cuda_gemm_autotune.c - GEMM autotune of the cuBLASLt plans
 * (frt_cuda_gemm_autotune / _candidates / _save / _load,
 * src/kernels/cuda/gemm_autotune.cu), on random bf16 data:
 *   - autotune with N = 8 picks, for every cuBLASLt plan, one of the
 *     heuristic's first 8 results (its config ids equal the candidate's at
 *     the reported rank), times at least one, and its choice is no slower
 *     than the heuristic's first (as measured); a GEMV plan is left alone;
 *   - the tuned GEMMs match the CPU twin frt_cpu_matmul / _add (norm-wise
 *     rel <= 1e-4 f32 out, 1e-2 bf16 out) and give the same bytes twice;
 *   - the saved file round-trips: read back it lists every cuBLASLt plan
 *     with its rank and ids; a fresh handle that loads it (with its plans
 *     made first, and one with no plans, which load makes) has the same
 *     choices and fingerprint, and its outputs equal the tuned handle's
 *     bit for bit;
 *   - autotune 0 puts every plan back on the heuristic's first choice (the
 *     fingerprint of a handle never tuned);
 *   - frt_cuda_gemm_autotune_file (a backend's hook): 0 candidates does
 *     nothing; without a file it tunes and saves; with it, it loads the same
 *     choices without timing; with path NULL it tunes and saves nothing;
 *   - refusals: N out of range, a stream not added, a file from another
 *     device name, a saved algorithm that is not the heuristic's result at
 *     its rank, a malformed file (FRT_ERR_FORMAT naming the line), a
 *     missing file; none changes a plan's choice.
 * Prints each plan's autotune spread (heuristic first vs the chosen one).
 * Exits 77 (skipped) without a device; the argument checks run first.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/gemm_tune.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_AS_AT0
#include "frt_test_cuda.h"

#include <unistd.h>

#define WS ((size_t)32 << 20)
#define N_CAND 8

typedef struct shape {
    int n, in, out;
    frt_cuda_dtype dt;
    int acc;
} shape;

/* Three cuBLASLt shapes (prefill-like rows) and one GEMV shape (n 2). */
static const shape SHAPES[] = {
    {64, 1024, 2048, FRT_CUDA_F32, 0},
    {128, 2048, 512, FRT_CUDA_BF16, 0},
    {96, 512, 1024, FRT_CUDA_F32, 1},
    {2, 1024, 1024, FRT_CUDA_F32, 0},
};
enum { N_SHAPES = 4, N_LT = 3 };

static uint64_t g_rng = 20261126;

static void test_bad_args(void)
{
    CHECK_STATUS(frt_cuda_gemm_autotune(NULL, 1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_save(NULL, "/tmp/x"), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_load(NULL, "/tmp/x"), FRT_ERR_INVALID_ARGUMENT);
    int ids[1][7], found;
    CHECK_STATUS(frt_cuda_gemm_candidates(NULL, 0, 1, ids, &found), FRT_ERR_INVALID_ARGUMENT);
}

static frt_cuda_gemm *handle(int plans)
{
    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create(WS, &g), "gemm");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    for (int i = 0; i < plans; i++) {
        const shape *s = &SHAPES[i];
        must(frt_cuda_gemm_plan(g, s->n, s->in, s->out, s->dt, s->acc), "plan");
    }
    return g;
}

static void ids_of(const frt_cuda_gemm_plan_info *pi, int ids[7])
{
    const int v[7] = {pi->algo_id,          pi->tile_id,       pi->stages_id,    pi->splitk_num,
                      pi->reduction_scheme, pi->cta_swizzling, pi->custom_option};
    memcpy(ids, v, sizeof v);
}

/* Every plan's config ids [N_SHAPES][7] (to compare choices). */
static void choices(const frt_cuda_gemm *g, int out[N_SHAPES][7])
{
    memset(out, 0, N_SHAPES * 7 * sizeof(int));
    for (int i = 0; i < N_SHAPES; i++) {
        frt_cuda_gemm_plan_info pi;
        if (plan_of(g, SHAPES[i].n, SHAPES[i].in, SHAPES[i].out, SHAPES[i].dt, SHAPES[i].acc, &pi) >= 0)
            ids_of(&pi, out[i]);
    }
}

/* Operands of every shape, and the outputs of running them on a handle. */
typedef struct operands {
    hmat x[N_SHAPES], w[N_SHAPES];
    float *y0[N_SHAPES];
} operands;

static void make_operands(operands *o)
{
    for (int i = 0; i < N_SHAPES; i++) {
        o->x[i] = hmat_rand(&g_rng, SHAPES[i].n, SHAPES[i].in, -1, 1);
        o->w[i] = hmat_rand(&g_rng, SHAPES[i].out, SHAPES[i].in, -1, 1);
        o->y0[i] = xzalloc((size_t)SHAPES[i].n * SHAPES[i].out * sizeof(float));
        for (size_t k = 0; k < (size_t)SHAPES[i].n * SHAPES[i].out; k++)
            o->y0[i][k] = frt_bf16_to_f32(frt_f32_to_bf16(-2 + 4 * frt_rng_uniform(&g_rng)));
    }
}

static void free_operands(operands *o)
{
    for (int i = 0; i < N_SHAPES; i++) {
        hmat_free(&o->x[i]);
        hmat_free(&o->w[i]);
        free(o->y0[i]);
    }
}

/* Shape i on g: its output bytes (malloc'd); with check, against the CPU. */
static void *run_shape(frt_cuda_gemm *g, const operands *o, int i, int check)
{
    const shape *s = &SHAPES[i];
    const size_t ny = (size_t)s->n * s->out, yb = ny * dsize(s->dt);
    dbuf dx = dalloc((size_t)s->n * s->in * 2), dw = dalloc((size_t)s->out * s->in * 2), dy = dalloc(yb);
    dput(dx, 0, o->x[i].b, (size_t)s->n * s->in * 2);
    dput(dw, 0, o->w[i].b, (size_t)s->out * s->in * 2);
    dput_as(dy, o->y0[i], ny, s->dt);
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, s->dt, dx.p, dw.p, s->n, s->in, s->out, s->acc));
    void *bytes = xzalloc(yb);
    dget(dy, 0, bytes, yb);
    if (check) {
        float *ref = xzalloc(ny * sizeof(float)), *got = xzalloc(ny * sizeof(float));
        memcpy(ref, o->y0[i], ny * sizeof(float));
        if (s->acc)
            frt_cpu_matmul_add(ref, o->x[i].f, o->w[i].f, s->n, s->in, s->out);
        else
            frt_cpu_matmul(ref, o->x[i].f, o->w[i].f, s->n, s->in, s->out);
        dget_as(dy, got, ny, s->dt);
        char name[128];
        snprintf(name, sizeof name, "tuned n %d in %d out %d -> %s%s vs cpu", s->n, s->in, s->out, dtn(s->dt),
                 s->acc ? " acc" : "");
        report(name, frt_test_rel_err(got, ref, ny), s->dt == FRT_CUDA_BF16 ? 1e-2 : 1e-4);
        free(ref);
        free(got);
    }
    dfree(&dx);
    dfree(&dw);
    dfree(&dy);
    return bytes;
}

/* Autotune picks one of the heuristic's candidates of each cuBLASLt plan. */
static void check_tuned(const frt_cuda_gemm *g)
{
    for (int i = 0; i < frt_cuda_gemm_plan_count(g); i++) {
        frt_cuda_gemm_plan_info pi;
        CHECK_OK(frt_cuda_gemm_plan_get(g, i, &pi));
        char name[128];
        snprintf(name, sizeof name, "n %d in %d out %d %s%s", pi.n, pi.in_dim, pi.out_dim, dtn(pi.out_dtype),
                 pi.accumulate ? " acc" : "");
        if (pi.kernel == FRT_CUDA_GEMM_GEMV) {
            report_flag("GEMV plan left alone by autotune", pi.tune_index == -1 && pi.tune_candidates == 0);
            continue;
        }
        int ids[N_CAND][7], found = 0, mine[7];
        CHECK_OK(frt_cuda_gemm_candidates(g, i, N_CAND, ids, &found));
        ids_of(&pi, mine);
        int ok = pi.tune_index >= 0 && pi.tune_index < found && pi.tune_candidates >= 1 &&
                 memcmp(mine, ids[pi.tune_index], sizeof mine) == 0;
        printf("  %-40s rank %d of %d candidates (%d timed): first %.2f us, chosen %.2f us\n", name, pi.tune_index,
               found, pi.tune_candidates, (double)pi.tune_us_first, (double)pi.tune_us_best);
        report_flag("  autotune chose one of the heuristic's candidates", ok);
        report_flag("  the chosen one is no slower than the first (as timed)",
                    pi.tune_us_best > 0 && (pi.tune_us_first == 0 || pi.tune_us_best <= pi.tune_us_first));
    }
}

/* Rewrites the saved file with one change (edit 0: the device name, 1: an
 * algorithm id of the first entry) into path2. */
static void edited(const char *path, const char *path2, int edit)
{
    frt_gemm_tune t;
    CHECK_OK(frt_gemm_tune_read(path, &t));
    if (edit == 0) snprintf(t.device, sizeof t.device, "Another GPU");
    if (edit == 1 && t.n) t.e[0].algo[0] += 1000;
    CHECK_OK(frt_gemm_tune_write(path2, &t));
    frt_gemm_tune_free(&t);
}

static void test_refusals(frt_cuda_gemm *g, const char *dir, const char *path)
{
    int before[N_SHAPES][7], after[N_SHAPES][7];
    choices(g, before);
    char p2[700];
    snprintf(p2, sizeof p2, "%s/edited.txt", dir);
    edited(path, p2, 0);
    CHECK_STATUS(frt_cuda_gemm_load(g, p2), FRT_ERR_STATE);
    CHECK(strstr(frt_last_error(), "Another GPU") != NULL);
    edited(path, p2, 1);
    CHECK_STATUS(frt_cuda_gemm_load(g, p2), FRT_ERR_STATE);
    CHECK(strstr(frt_last_error(), "not the saved algorithm") != NULL);
    FILE *f = fopen(p2, "w");
    if (f) fputs("frt-gemm-tune 1\ndevice X\ncublaslt x\n", f), fclose(f);
    CHECK_STATUS(frt_cuda_gemm_load(g, p2), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "line 3") != NULL);
    snprintf(p2, sizeof p2, "%s/missing.txt", dir);
    CHECK_STATUS(frt_cuda_gemm_load(g, p2), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_cuda_gemm_autotune(g, 65, g_cs), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_autotune(g, -1, g_cs), FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_gemm *other = NULL;
    must(frt_cuda_gemm_create(WS, &other), "gemm");
    must(frt_cuda_gemm_plan(other, 64, 1024, 2048, FRT_CUDA_F32, 0), "plan");
    CHECK_STATUS(frt_cuda_gemm_autotune(other, 2, g_cs), FRT_ERR_STATE); /* g_cs not added to `other` */
    frt_cuda_gemm_destroy(other);
    choices(g, after);
    report_flag("refused loads and autotunes changed no choice", memcmp(before, after, sizeof before) == 0);
}

/* frt_cuda_gemm_autotune_file: tunes and saves without a file, loads the
 * same choices with one, does nothing with 0 candidates, tunes without
 * saving with path NULL. */
static void test_hook(const char *dir)
{
    char path[700];
    snprintf(path, sizeof path, "%s/hook.txt", dir);
    frt_cuda_gemm *a = handle(N_SHAPES), *b = handle(N_SHAPES), *c = handle(N_SHAPES);
    int tuned = -1, ca[N_SHAPES][7], cb[N_SHAPES][7];
    CHECK_OK(frt_cuda_gemm_autotune_file(c, path, 0, g_cs, &tuned));
    report_flag("hook with 0 candidates: no file, nothing tuned", tuned == 0 && access(path, F_OK) != 0);
    CHECK_OK(frt_cuda_gemm_autotune_file(a, path, N_CAND, g_cs, &tuned));
    report_flag("hook without a file: tuned and saved", tuned == 1 && access(path, F_OK) == 0);
    CHECK_OK(frt_cuda_gemm_autotune_file(b, path, N_CAND, g_cs, &tuned));
    choices(a, ca);
    choices(b, cb);
    report_flag("hook with the file: loaded (untimed), the same choices", tuned == 0 && !memcmp(ca, cb, sizeof ca));
    frt_cuda_gemm *d = handle(N_SHAPES);
    CHECK_OK(frt_cuda_gemm_autotune_file(d, NULL, N_CAND, g_cs, &tuned));
    frt_cuda_gemm_plan_info pi;
    CHECK_OK(frt_cuda_gemm_plan_get(d, 0, &pi));
    report_flag("hook with path NULL: tuned, nothing saved", tuned == 1 && pi.tune_candidates > 0);
    frt_cuda_gemm_destroy(d);
    frt_cuda_gemm_destroy(a);
    frt_cuda_gemm_destroy(b);
    frt_cuda_gemm_destroy(c);
}

int main(void)
{
    test_bad_args();
    frt_test_cuda_start();
    char dir[] = "/tmp/frt_test_cuda_gemm_autotune_XXXXXX";
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");
    char path[700];
    snprintf(path, sizeof path, "%s/gemm_tune.txt", dir);
    operands o;
    make_operands(&o);

    frt_cuda_gemm *g = handle(N_SHAPES), *g0 = handle(N_SHAPES);
    const uint64_t fp_first = frt_cuda_gemm_fingerprint(g0);
    CHECK_OK(frt_cuda_gemm_autotune(g, N_CAND, g_cs));
    check_tuned(g);
    void *y1[N_SHAPES];
    for (int i = 0; i < N_SHAPES; i++) y1[i] = run_shape(g, &o, i, 1);
    void *again = run_shape(g, &o, 0, 0);
    report_same("a tuned GEMM twice", y1[0], again, (size_t)SHAPES[0].n * SHAPES[0].out * 4);
    free(again);

    CHECK_OK(frt_cuda_gemm_save(g, path));
    frt_gemm_tune t;
    CHECK_OK(frt_gemm_tune_read(path, &t));
    int listed = t.n == N_LT && t.candidates == N_CAND;
    for (int i = 0; listed && i < N_LT; i++) {
        frt_cuda_gemm_plan_info pi;
        int k = plan_of(g, SHAPES[i].n, SHAPES[i].in, SHAPES[i].out, SHAPES[i].dt, SHAPES[i].acc, &pi), mine[7];
        const frt_gemm_tune_entry *e = frt_gemm_tune_find(&t, SHAPES[i].n, SHAPES[i].in, SHAPES[i].out,
                                                          SHAPES[i].dt == FRT_CUDA_BF16, SHAPES[i].acc);
        ids_of(&pi, mine);
        listed &= k >= 0 && e && e->index == pi.tune_index && !memcmp(e->algo, mine, sizeof mine);
    }
    report_flag("the saved file lists every cuBLASLt plan's rank and ids", listed);
    frt_gemm_tune_free(&t);

    frt_cuda_gemm *g2 = handle(N_SHAPES), *g3 = handle(0);
    CHECK_OK(frt_cuda_gemm_load(g2, path));
    CHECK_OK(frt_cuda_gemm_load(g3, path));
    int c1[N_SHAPES][7], c2[N_SHAPES][7], c3[N_SHAPES][7];
    choices(g, c1);
    choices(g2, c2);
    choices(g3, c3);
    report_flag("a loaded handle has the tuned choices (and fingerprint)",
                !memcmp(c1, c2, sizeof c1) && frt_cuda_gemm_fingerprint(g) == frt_cuda_gemm_fingerprint(g2));
    report_flag("load makes the plans it lists", frt_cuda_gemm_plan_count(g3) == N_LT &&
                                                     !memcmp(c1, c3, (size_t)N_LT * sizeof c1[0]));
    for (int i = 0; i < N_SHAPES; i++) {
        void *y2 = run_shape(g2, &o, i, 0);
        char name[96];
        snprintf(name, sizeof name, "loaded choice == tuned run, n %d in %d out %d", SHAPES[i].n, SHAPES[i].in,
                 SHAPES[i].out);
        report_same(name, y1[i], y2, (size_t)SHAPES[i].n * SHAPES[i].out * dsize(SHAPES[i].dt));
        free(y2);
    }
    test_refusals(g2, dir, path);
    test_hook(dir);

    CHECK_OK(frt_cuda_gemm_autotune(g, 0, g_cs));
    int c0[N_SHAPES][7];
    choices(g, c1);
    choices(g0, c0);
    report_flag("autotune 0: the heuristic's first choices again",
                !memcmp(c1, c0, sizeof c1) && frt_cuda_gemm_fingerprint(g) == fp_first);

    for (int i = 0; i < N_SHAPES; i++) free(y1[i]);
    free_operands(&o);
    frt_cuda_gemm_destroy(g);
    frt_cuda_gemm_destroy(g0);
    frt_cuda_gemm_destroy(g2);
    frt_cuda_gemm_destroy(g3);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}
#endif
