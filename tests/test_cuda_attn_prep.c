/*
 * test_cuda_attn_prep.c - frt_cuda_attn_decode_prep (src/kernels/cuda/
 * attn_decode_prep.cu), the fused pre-attention work of a full-attention
 * layer in a decode step, on random data (frt_test_fill):
 *   - against the UNFUSED CUDA kernels on the same inputs (frt_cuda_copy_rows
 *     q / gate, frt_cuda_rmsnorm q / k, frt_cuda_rope q / k,
 *     frt_cuda_kv_append): the same bits are expected; where they differ the
 *     norm-wise difference is reported and must be <= 1e-6;
 *   - against the CPU twins (frt_cpu_rmsnorm, frt_cpu_rope): q and the gate
 *     within TOL_F32 (1e-5, norm-wise ||gpu - cpu|| / ||cpu||), the appended
 *     K row within TOL_BF16 (its bf16 rounding), the V row exact;
 *   - shapes: qwen3.5-9b (16 q / 4 KV heads, head_dim 256, rot 64, theta
 *     1e7, gated), 27B (24 / 4), a small ungated one (4 / 2, head_dim 64,
 *     rot 64); positions 0, 1, 8191, 32767 and 32768, 40000 (>= max_seq:
 *     dropped, the cache and a guard row past it untouched: sentinel bytes);
 *   - frt_cuda_attn_prep (a prefill piece at a row stride) and
 *     frt_cuda_attn_prep_fp8 (appending E4M3 codes with random per-head
 *     scales; prefill pieces and decode rows) against the unfused sequence
 *     ending in frt_cuda_kv_append / frt_cuda_kv_append_fp8: the V rows and
 *     the gate bit for bit, q within TOL_UNFUSED, the K rows the same bits
 *     but for a value at a rounding midpoint (within one bf16 / E4M3 step
 *     on a few elements: 1e-5 / 1e-3 norm-wise);
 *   - *d_n == 0 writes nothing; 3 runs give identical bytes; a CUDA graph
 *     (frt_graph_capture) replayed at several positions (d_start changed in
 *     device memory between replays); bad arguments fail with
 *     FRT_ERR_INVALID_ARGUMENT before the device check.
 * Then prints the time per call at the 9B shape (median of 50 graph replays,
 * fused against the 7 unfused launches). Exits 77 (skipped) without a device.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_OWN_UNTOUCHED
#define FRT_TEST_CUDA_START_N
#include "frt_test_cuda.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define TOL_UNFUSED 1e-6 /* when the bits differ from the unfused path */
#define MAX_SEQ 32768
#define EPS 1e-6f

static const frt_cuda_dtype F32 = FRT_CUDA_F32;

/* ---- harness ---------------------------------------------------------- */

static int untouched(dbuf d, size_t off, size_t bytes)
{
    unsigned char *h = xmalloc(bytes);
    dget(d, off, h, bytes);
    int ok = 1;
    for (size_t i = 0; i < bytes; i++) ok &= h[i] == 0x7F;
    free(h);
    return ok;
}

/* ---- one layer's buffers ------------------------------------------------ */

typedef struct prep {
    int nh, nkv, hd, rot, gated;
    float theta;
    size_t per, qgn, qn, kvn, crow; /* floats per q head in qg, qg, q, k / v, cache row */
    dbuf qg, k, v, qw, kw;          /* inputs */
    dbuf q, zg, kc, vc;             /* fused outputs (caches: MAX_SEQ + 1 rows, the last a guard) */
    dbuf uq, uzg, uk, ukc, uvc;     /* the unfused path */
    float *h_qg, *h_k, *h_v, *h_qw, *h_kw;
} prep;

static void prep_init(prep *P, int nh, int nkv, int hd, int rot, float theta, int gated)
{
    memset(P, 0, sizeof *P);
    P->nh = nh;
    P->nkv = nkv;
    P->hd = hd;
    P->rot = rot;
    P->theta = theta;
    P->gated = gated;
    P->per = (size_t)(gated ? 2 : 1) * hd;
    P->qgn = (size_t)nh * P->per;
    P->qn = (size_t)nh * hd;
    P->kvn = (size_t)nkv * hd;
    P->crow = P->kvn;
    const size_t cbytes = (size_t)(MAX_SEQ + 1) * P->crow * 2;
    P->qg = dalloc(P->qgn * 4);
    P->k = dalloc(P->kvn * 4);
    P->v = dalloc(P->kvn * 4);
    P->qw = dalloc((size_t)hd * 4);
    P->kw = dalloc((size_t)hd * 4);
    P->q = dalloc(P->qn * 4);
    P->zg = dalloc(P->qn * 4);
    P->kc = dalloc(cbytes);
    P->vc = dalloc(cbytes);
    P->uq = dalloc(P->qn * 4);
    P->uzg = dalloc(P->qn * 4);
    P->uk = dalloc(P->kvn * 4);
    P->ukc = dalloc(cbytes);
    P->uvc = dalloc(cbytes);
    P->h_qw = frand((size_t)hd, -0.5f, 0.5f);
    P->h_kw = frand((size_t)hd, -0.5f, 0.5f);
    dput(P->qw, 0, P->h_qw, (size_t)hd * 4);
    dput(P->kw, 0, P->h_kw, (size_t)hd * 4);
}

/* New random inputs (host and device). */
static void prep_inputs(prep *P)
{
    free(P->h_qg);
    free(P->h_k);
    free(P->h_v);
    P->h_qg = frand(P->qgn, -2, 2);
    P->h_k = frand(P->kvn, -2, 2);
    P->h_v = frand(P->kvn, -2, 2);
    dput(P->qg, 0, P->h_qg, P->qgn * 4);
    dput(P->k, 0, P->h_k, P->kvn * 4);
    dput(P->v, 0, P->h_v, P->kvn * 4);
}

static void prep_free(prep *P)
{
    dbuf *all[] = {&P->qg, &P->k,  &P->v,  &P->qw, &P->kw,  &P->q,   &P->zg,
                   &P->kc, &P->vc, &P->uq, &P->uzg, &P->uk, &P->ukc, &P->uvc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dfree(all[i]);
    free(P->h_qg);
    free(P->h_k);
    free(P->h_v);
    free(P->h_qw);
    free(P->h_kw);
}

static int run_fused(const prep *P, void *s, const int32_t *d_n)
{
    return frt_cuda_attn_decode_prep(s, P->q.p, P->gated ? P->zg.p : NULL, P->kc.p, P->vc.p,
                                     P->qg.p, P->k.p, P->v.p, P->qw.p, P->kw.p, d_start_p(), d_n,
                                     MAX_SEQ, P->nh, P->nkv, P->hd, P->rot, P->theta, EPS, 1,
                                     P->gated);
}

/* The unfused sequence of attention_block (k copied to uk first: the norm
 * and rope run in place on it there). */
static int run_unfused(const prep *P, void *s, const int32_t *d_n)
{
    const int per = (int)P->per;
    FRT_TEST_TRY_(frt_cuda_copy_rows(s, P->uk.p, F32, P->k.p, F32, d_n, 1, 1, (int)P->kvn,
                                     (int)P->kvn));
    FRT_TEST_TRY_(frt_cuda_copy_rows(s, P->uq.p, F32, P->qg.p, F32, d_n, 1, P->nh, P->hd, per));
    if (P->gated)
        FRT_TEST_TRY_(frt_cuda_copy_rows(s, P->uzg.p, F32, (const float *)P->qg.p + P->hd, F32,
                                         d_n, 1, P->nh, P->hd, per));
    FRT_TEST_TRY_(frt_cuda_rmsnorm(s, P->uq.p, F32, P->uq.p, F32, P->qw.p, d_n, 1, P->nh, P->hd,
                                   EPS, 1));
    FRT_TEST_TRY_(frt_cuda_rmsnorm(s, P->uk.p, F32, P->uk.p, F32, P->kw.p, d_n, 1, P->nkv, P->hd,
                                   EPS, 1));
    FRT_TEST_TRY_(frt_cuda_rope(s, P->uq.p, F32, d_start_p(), d_n, 1, P->nh, P->hd, P->rot,
                                P->theta));
    FRT_TEST_TRY_(frt_cuda_rope(s, P->uk.p, F32, d_start_p(), d_n, 1, P->nkv, P->hd, P->rot,
                                P->theta));
    FRT_TEST_TRY_(frt_cuda_kv_append(s, P->ukc.p, P->uvc.p, P->uk.p, P->v.p, F32, d_start_p(),
                                     d_n, 1, MAX_SEQ, P->nkv, P->hd));
    return 0;
}

/* Equal bits (0), else the norm-wise difference of the two f32 arrays. */
static double diff_f32(const float *a, const float *b, size_t n)
{
    if (memcmp(a, b, n * 4) == 0) return 0.0;
    double e = frt_test_rel_err(a, b, n);
    return e == 0.0 ? 1e-300 : e; /* -0 vs +0 only: report as (tiny) nonzero */
}

static double diff_bf16(const uint16_t *a, const uint16_t *b, size_t n)
{
    if (memcmp(a, b, n * 2) == 0) return 0.0;
    float *fa = fnew(n), *fb = fnew(n);
    frt_bf16_array_to_f32(a, fa, n);
    frt_bf16_array_to_f32(b, fb, n);
    double e = frt_test_rel_err(fa, fb, n);
    free(fa);
    free(fb);
    return e == 0.0 ? 1e-300 : e;
}

/* Compares the fused outputs at position p against the unfused path and the
 * CPU twins; `what` names the case. Both paths must have run. */
static void check_outputs(const prep *P, int p, const char *what)
{
    char name[160];
    const size_t qn = P->qn, crow = P->crow;
    float *q = fnew(qn), *uq = fnew(qn), *zg = fnew(qn), *uzg = fnew(qn);
    dget(P->q, 0, q, qn * 4);
    dget(P->uq, 0, uq, qn * 4);
    snprintf(name, sizeof name, "%s pos %d: q vs unfused", what, p);
    report(name, diff_f32(q, uq, qn), TOL_UNFUSED);
    if (P->gated) {
        dget(P->zg, 0, zg, qn * 4);
        dget(P->uzg, 0, uzg, qn * 4);
        snprintf(name, sizeof name, "%s pos %d: gate vs unfused (exact)", what, p);
        report(name, diff_f32(zg, uzg, qn), 0.0);
    }
    /* CPU twins: q = rope(rmsnorm(q)), the gate copied */
    float *ref = fnew(qn), *gref = fnew(qn);
    for (int h = 0; h < P->nh; h++) {
        memcpy(ref + (size_t)h * P->hd, P->h_qg + (size_t)h * P->per, (size_t)P->hd * 4);
        if (P->gated)
            memcpy(gref + (size_t)h * P->hd, P->h_qg + (size_t)h * P->per + P->hd,
                   (size_t)P->hd * 4);
    }
    const int32_t pos = p;
    frt_cpu_rmsnorm(ref, ref, P->h_qw, P->nh, P->hd, EPS, 1);
    frt_cpu_rope(ref, 1, P->nh, P->hd, P->rot, &pos, P->theta);
    snprintf(name, sizeof name, "%s pos %d: q vs CPU twin", what, p);
    report(name, frt_test_rel_err(q, ref, qn), TOL_F32);
    if (P->gated) {
        snprintf(name, sizeof name, "%s pos %d: gate vs CPU (exact)", what, p);
        report(name, frt_test_rel_err(zg, gref, qn), 0.0);
    }
    /* the cache rows, the guard row past max_seq and the neighbours */
    const int in = p < MAX_SEQ;
    if (in) {
        uint16_t *kr = xmalloc(crow * 2), *ukr = xmalloc(crow * 2);
        uint16_t *vr = xmalloc(crow * 2), *uvr = xmalloc(crow * 2);
        dget(P->kc, (size_t)p * crow * 2, kr, crow * 2);
        dget(P->ukc, (size_t)p * crow * 2, ukr, crow * 2);
        dget(P->vc, (size_t)p * crow * 2, vr, crow * 2);
        dget(P->uvc, (size_t)p * crow * 2, uvr, crow * 2);
        snprintf(name, sizeof name, "%s pos %d: K row vs unfused", what, p);
        report(name, diff_bf16(kr, ukr, crow), TOL_UNFUSED);
        snprintf(name, sizeof name, "%s pos %d: V row vs unfused (exact)", what, p);
        report(name, diff_bf16(vr, uvr, crow), 0.0);
        float *kref = fnew(crow), *kg = fnew(crow), *vg = fnew(crow), *vref = fnew(crow);
        memcpy(kref, P->h_k, crow * 4);
        frt_cpu_rmsnorm(kref, kref, P->h_kw, P->nkv, P->hd, EPS, 1);
        frt_cpu_rope(kref, 1, P->nkv, P->hd, P->rot, &pos, P->theta);
        frt_bf16_array_to_f32(kr, kg, crow);
        snprintf(name, sizeof name, "%s pos %d: K row vs CPU twin (bf16)", what, p);
        report(name, frt_test_rel_err(kg, kref, crow), TOL_BF16);
        for (size_t i = 0; i < crow; i++) vref[i] = frt_bf16_to_f32(frt_f32_to_bf16(P->h_v[i]));
        frt_bf16_array_to_f32(vr, vg, crow);
        snprintf(name, sizeof name, "%s pos %d: V row vs CPU (exact bf16)", what, p);
        report(name, frt_test_rel_err(vg, vref, crow), 0.0);
        free(kref);
        free(kg);
        free(vg);
        free(vref);
        free(kr);
        free(ukr);
        free(vr);
        free(uvr);
        if (p > 0) {
            CHECK(untouched(P->kc, (size_t)(p - 1) * crow * 2, crow * 2));
            CHECK(untouched(P->vc, (size_t)(p - 1) * crow * 2, crow * 2));
        }
        if (p + 1 < MAX_SEQ) {
            CHECK(untouched(P->kc, (size_t)(p + 1) * crow * 2, crow * 2));
            CHECK(untouched(P->vc, (size_t)(p + 1) * crow * 2, crow * 2));
        }
    } else {
        /* dropped: nothing of either cache written */
        int ok = untouched(P->kc, 0, P->kc.bytes) && untouched(P->vc, 0, P->vc.bytes);
        snprintf(name, sizeof name, "%s pos %d (>= max_seq): caches untouched", what, p);
        report(name, ok ? 0.0 : 1.0, 0.0);
    }
    CHECK(untouched(P->kc, (size_t)MAX_SEQ * crow * 2, crow * 2)); /* guard row */
    CHECK(untouched(P->vc, (size_t)MAX_SEQ * crow * 2, crow * 2));
    free(q);
    free(uq);
    free(zg);
    free(uzg);
    free(ref);
    free(gref);
}

static void sentinel_all(prep *P)
{
    dsentinel(P->q);
    dsentinel(P->zg);
    dsentinel(P->kc);
    dsentinel(P->vc);
    dsentinel(P->uq);
    dsentinel(P->uzg);
    dsentinel(P->ukc);
    dsentinel(P->uvc);
}

/* ---- the cases -------------------------------------------------------- */

static void test_shape(const char *what, int nh, int nkv, int hd, int rot, float theta, int gated)
{
    prep P;
    prep_init(&P, nh, nkv, hd, rot, theta, gated);
    const int positions[6] = {0, 1, 8191, 32767, MAX_SEQ, 40000};
    for (int i = 0; i < 6; i++) {
        const int p = positions[i];
        prep_inputs(&P);
        sentinel_all(&P);
        set_dyn(p, 1);
        CHECK_OK(run_fused(&P, g_cs, d_n_p()));
        CHECK_OK(run_unfused(&P, g_cs, d_n_p()));
        sync_st();
        check_outputs(&P, p, what);
        if (!P.gated) CHECK(untouched(P.zg, 0, P.zg.bytes));
    }
    /* d_n NULL means one token */
    prep_inputs(&P);
    sentinel_all(&P);
    set_dyn(77, 0); /* *d_n 0 is not read: d_n NULL means one token */
    CHECK_OK(run_fused(&P, g_cs, NULL));
    CHECK_OK(run_unfused(&P, g_cs, NULL));
    sync_st();
    check_outputs(&P, 77, what);
    /* *d_n == 0: nothing written */
    sentinel_all(&P);
    set_dyn(5, 0);
    CHECK_OK(run_fused(&P, g_cs, d_n_p()));
    sync_st();
    {
        int ok = untouched(P.q, 0, P.q.bytes) && untouched(P.zg, 0, P.zg.bytes) &&
                 untouched(P.kc, 0, P.kc.bytes) && untouched(P.vc, 0, P.vc.bytes);
        char name[160];
        snprintf(name, sizeof name, "%s: *d_n == 0 writes nothing", what);
        report(name, ok ? 0.0 : 1.0, 0.0);
    }
    /* determinism: 3 runs, identical bytes (q, gate, the K / V rows) */
    {
        const int p = 8191;
        set_dyn(p, 1);
        const size_t qb = P.qn * 4, rb = P.crow * 2;
        unsigned char *first = xmalloc(2 * qb + 2 * rb), *again = xmalloc(2 * qb + 2 * rb);
        int same = 1;
        for (int r = 0; r < 3; r++) {
            sentinel_all(&P);
            CHECK_OK(run_fused(&P, g_cs, d_n_p()));
            sync_st();
            unsigned char *dst = r == 0 ? first : again;
            dget(P.q, 0, dst, qb);
            dget(P.zg, 0, dst + qb, qb);
            dget(P.kc, (size_t)p * rb, dst + 2 * qb, rb);
            dget(P.vc, (size_t)p * rb, dst + 2 * qb + rb, rb);
            if (r) same &= memcmp(first, again, 2 * qb + 2 * rb) == 0;
        }
        char name[160];
        snprintf(name, sizeof name, "%s: 3 runs identical bytes", what);
        report(name, same ? 0.0 : 1.0, 0.0);
        free(first);
        free(again);
    }
    prep_free(&P);
}

static int record_fused(frt_stream *stream, void *user)
{
    return run_fused(user, frt_stream_native(stream), d_n_p());
}

static int record_unfused(frt_stream *stream, void *user)
{
    return run_unfused(user, frt_stream_native(stream), d_n_p());
}

/* A graph captured once, replayed at several positions with new inputs; the
 * unfused path runs directly after each replay (same inputs, same position). */
static void test_graph(void)
{
    prep P;
    prep_init(&P, 16, 4, 256, 64, 1e7f, 1);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "attn_prep", 0, &graph));
    set_dyn(0, 1);
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_fused, &P));
    const int positions[5] = {3, 8191, 100, 32767, 50000};
    for (int i = 0; i < 5 && graph; i++) {
        const int p = positions[i];
        prep_inputs(&P);
        sentinel_all(&P);
        set_dyn(p, 1);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        CHECK_OK(run_unfused(&P, g_cs, d_n_p()));
        sync_st();
        check_outputs(&P, p, "graph 9B");
    }
    frt_graph_destroy(graph);
    prep_free(&P);
}

/* ---- timing ------------------------------------------------------------ */

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median microseconds of 50 replays of a graph of one call (events around
 * each replay), after 5 warm-up replays; < 0 on failure. */
static double time_graph(prep *P, frt_record_fn rec)
{
    frt_graph *g = NULL;
    frt_event *e0 = NULL, *e1 = NULL;
    double med = -1;
    if (frt_graph_create(g_ctx, "attn_prep_time", 0, &g) || frt_event_create(g_ctx, &e0) ||
        frt_event_create(g_ctx, &e1) || frt_graph_capture(g, 1, g_st, rec, P))
        goto out;
    for (int i = 0; i < 5; i++)
        if (frt_graph_replay(g, 1, g_st)) goto out;
    sync_st();
    float t[50];
    for (int i = 0; i < 50; i++) {
        if (frt_event_record(e0, g_st) || frt_graph_replay(g, 1, g_st) ||
            frt_event_record(e1, g_st) || frt_event_sync(e1) || frt_event_elapsed_ms(e0, e1, &t[i]))
            goto out;
    }
    qsort(t, 50, sizeof t[0], cmp_f);
    med = 0.5 * (t[24] + t[25]) * 1e3;
out:
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_graph_destroy(g);
    return med;
}

static void test_timing(void)
{
    prep P;
    prep_init(&P, 16, 4, 256, 64, 1e7f, 1);
    prep_inputs(&P);
    set_dyn(8191, 1);
    const double tf = time_graph(&P, record_fused), tu = time_graph(&P, record_unfused);
    CHECK(tf > 0 && tu > 0);
    /* bytes: qg 32 KiB + k, v 8 KiB + weights 2 KiB read; q, gate 32 KiB + K, V rows 4 KiB written */
    printf("  timing 9B (16/4 heads, hd 256), graph replay, median of 50: fused %.2f us, "
           "unfused (8 launches incl. the k copy) %.2f us\n",
           tf, tu);
    prep_free(&P);
}

/* ---- bad arguments ------------------------------------------------------ */

/* ---- frt_cuda_attn_prep: the tokens of a prefill piece ------------------- */

/* The prep of n of max_n tokens at position start, reading q | gate, k, v
 * at a stride out of one fused row per token (pad floats after v), against
 * the unfused sequence of the model's prefill on contiguous copies of the
 * same rows: every output buffer (sentinels past n included) bit for bit. */
static void test_multi(const char *what, int nh, int nkv, int hd, int rot, float theta, int gated, int start,
                       int n, int max_n, int pad, int fp8)
{
    const int per = (gated ? 2 : 1) * hd, qgn = nh * per, kvn = nkv * hd, qn = nh * hd;
    const int W = qgn + 2 * kvn + pad;
    const size_t cbytes = (size_t)(MAX_SEQ + 1) * kvn * (fp8 ? 1 : 2);
    /* fp8: per-head scales putting the rows well inside E4M3's range, subnormals included */
    float *ksc = frand((size_t)nkv, 0.01f, 0.05f), *vsc = frand((size_t)nkv, 0.01f, 0.05f);
    dbuf dks = dalloc((size_t)nkv * 4), dvs = dalloc((size_t)nkv * 4);
    dput(dks, 0, ksc, (size_t)nkv * 4);
    dput(dvs, 0, vsc, (size_t)nkv * 4);
    float *F = frand((size_t)max_n * W, -2, 2), *QG = fnew((size_t)max_n * qgn);
    float *K = fnew((size_t)max_n * kvn), *V = fnew((size_t)max_n * kvn);
    for (int t = 0; t < max_n; t++) {
        memcpy(QG + (size_t)t * qgn, F + (size_t)t * W, (size_t)qgn * 4);
        memcpy(K + (size_t)t * kvn, F + (size_t)t * W + qgn, (size_t)kvn * 4);
        memcpy(V + (size_t)t * kvn, F + (size_t)t * W + qgn + kvn, (size_t)kvn * 4);
    }
    float *qw = frand((size_t)hd, -0.5f, 0.5f), *kw = frand((size_t)hd, -0.5f, 0.5f);
    dbuf dF = dalloc((size_t)max_n * W * 4), dQG = dalloc((size_t)max_n * qgn * 4);
    dbuf dK = dalloc((size_t)max_n * kvn * 4), dV = dalloc((size_t)max_n * kvn * 4);
    dbuf dqw = dalloc((size_t)hd * 4), dkw = dalloc((size_t)hd * 4);
    dbuf q1 = dalloc((size_t)max_n * qn * 4), z1 = dalloc((size_t)max_n * qn * 4), kc1 = dalloc(cbytes),
         vc1 = dalloc(cbytes);
    dbuf q2 = dalloc((size_t)max_n * qn * 4), z2 = dalloc((size_t)max_n * qn * 4), kc2 = dalloc(cbytes),
         vc2 = dalloc(cbytes), k2 = dalloc((size_t)max_n * kvn * 4);
    dput(dF, 0, F, (size_t)max_n * W * 4);
    dput(dQG, 0, QG, (size_t)max_n * qgn * 4);
    dput(dK, 0, K, (size_t)max_n * kvn * 4);
    dput(dV, 0, V, (size_t)max_n * kvn * 4);
    dput(dqw, 0, qw, (size_t)hd * 4);
    dput(dkw, 0, kw, (size_t)hd * 4);
    dbuf *outs[] = {&q1, &z1, &kc1, &vc1, &q2, &z2, &kc2, &vc2};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) dsentinel(*outs[i]);
    set_dyn(start, n);
    const float *f = dF.p;
    if (fp8)
        CHECK_OK(frt_cuda_attn_prep_fp8(g_cs, q1.p, gated ? z1.p : NULL, kc1.p, vc1.p, dks.p, dvs.p, f, W, f + qgn, W,
                                        f + qgn + kvn, W, dqw.p, dkw.p, d_start_p(), d_n_p(), max_n, MAX_SEQ, nh, nkv,
                                        hd, rot, theta, EPS, 1, gated));
    else
        CHECK_OK(frt_cuda_attn_prep(g_cs, q1.p, gated ? z1.p : NULL, kc1.p, vc1.p, f, W, f + qgn, W, f + qgn + kvn,
                                    W, dqw.p, dkw.p, d_start_p(), d_n_p(), max_n, MAX_SEQ, nh, nkv, hd, rot, theta,
                                    EPS, 1, gated));
    /* the model's unfused prefill sequence */
    CHECK_OK(frt_cuda_copy_rows(g_cs, k2.p, F32, dK.p, F32, d_n_p(), max_n, 1, kvn, kvn));
    CHECK_OK(frt_cuda_copy_rows(g_cs, q2.p, F32, dQG.p, F32, d_n_p(), max_n, nh, hd, per));
    if (gated)
        CHECK_OK(frt_cuda_copy_rows(g_cs, z2.p, F32, (const float *)dQG.p + hd, F32, d_n_p(), max_n, nh, hd, per));
    CHECK_OK(frt_cuda_rmsnorm(g_cs, q2.p, F32, q2.p, F32, dqw.p, d_n_p(), max_n, nh, hd, EPS, 1));
    CHECK_OK(frt_cuda_rmsnorm(g_cs, k2.p, F32, k2.p, F32, dkw.p, d_n_p(), max_n, nkv, hd, EPS, 1));
    CHECK_OK(frt_cuda_rope(g_cs, q2.p, F32, d_start_p(), d_n_p(), max_n, nh, hd, rot, theta));
    CHECK_OK(frt_cuda_rope(g_cs, k2.p, F32, d_start_p(), d_n_p(), max_n, nkv, hd, rot, theta));
    if (fp8)
        CHECK_OK(frt_cuda_kv_append_fp8(g_cs, kc2.p, vc2.p, k2.p, dV.p, dks.p, dvs.p, d_start_p(), d_n_p(), max_n,
                                        MAX_SEQ, nkv, hd));
    else
        CHECK_OK(frt_cuda_kv_append(g_cs, kc2.p, vc2.p, k2.p, dV.p, F32, d_start_p(), d_n_p(), max_n, MAX_SEQ, nkv,
                                    hd));
    sync_st();
    /* q: one FMA contraction differs from the unfused rope (as in decode) */
    {
        float *a = fnew((size_t)n * qn), *b = fnew((size_t)n * qn);
        dget(q1, 0, a, (size_t)n * qn * 4);
        dget(q2, 0, b, (size_t)n * qn * 4);
        char name[160];
        snprintf(name, sizeof name, "prep%s %s start %d n %d/%d stride %d: q vs unfused", fp8 ? " fp8" : "", what,
                 start, n, max_n, W);
        report(name, diff_f32(a, b, (size_t)n * qn), TOL_UNFUSED);
        free(a), free(b);
    }
    /* the k rows: the same bits expected; the RoPE differs from the unfused kernel's in the last bit
     * of a few values, as q does (above), and such a value at a rounding midpoint of the cache's
     * dtype rounds the other way: norm-wise within one step of the dtype on a few elements */
    {
        const int rows = start + n <= MAX_SEQ ? n : MAX_SEQ - start;
        const size_t cnt = (size_t)(rows > 0 ? rows : 0) * kvn, esz = fp8 ? 1 : 2, off = (size_t)start * kvn * esz;
        unsigned char *a = xmalloc(cnt * esz + 1), *b = xmalloc(cnt * esz + 1);
        float *fa = fnew(cnt + 1), *fb = fnew(cnt + 1);
        dget(kc1, off, a, cnt * esz);
        dget(kc2, off, b, cnt * esz);
        size_t differ = 0;
        for (size_t e = 0; e < cnt; e++) {
            fa[e] = fp8 ? frt_fp8_e4m3_decode(a[e]) : frt_bf16_to_f32(((const uint16_t *)(const void *)a)[e]);
            fb[e] = fp8 ? frt_fp8_e4m3_decode(b[e]) : frt_bf16_to_f32(((const uint16_t *)(const void *)b)[e]);
            differ += memcmp(a + e * esz, b + e * esz, esz) != 0;
        }
        char name[160];
        snprintf(name, sizeof name, "prep%s %s start %d n %d/%d: k rows vs unfused (%zu of %zu differ)",
                 fp8 ? " fp8" : "", what, start, n, max_n, differ, cnt);
        report(name, differ ? frt_test_rel_err(fa, fb, cnt) : 0.0, fp8 ? 1e-3 : 1e-5);
        free(a), free(b), free(fa), free(fb);
    }
    const char *names[4] = {"q", "gate", "k cache", "v cache"};
    for (int i = 1; i < 4; i++) {
        if (i == 1 && !gated) continue;
        if (i == 2) { /* the k rows above; the rest of the k cache untouched */
            const size_t esz = fp8 ? 1 : 2, row = (size_t)kvn * esz;
            const size_t end = (size_t)(start + n < MAX_SEQ ? start + n : MAX_SEQ) * row;
            CHECK(untouched(kc1, 0, (size_t)start * row));
            CHECK(untouched(kc1, end, cbytes - end));
            continue;
        }
        const size_t bytes = i < 2 ? (size_t)max_n * qn * 4 : cbytes;
        unsigned char *a = xmalloc(bytes), *b = xmalloc(bytes);
        dget(*outs[i], 0, a, bytes);
        dget(*outs[i + 4], 0, b, bytes);
        char name[160];
        snprintf(name, sizeof name, "prep%s %s start %d n %d/%d stride %d: %s == unfused (bits)", fp8 ? " fp8" : "",
                 what, start, n, max_n, W, names[i]);
        report(name, memcmp(a, b, bytes) == 0 ? 0.0 : 1.0, 0.0);
        free(a), free(b);
    }
    CHECK(untouched(q1, (size_t)n * qn * 4, (size_t)(max_n - n) * qn * 4));
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) dfree(outs[i]);
    dfree(&dF), dfree(&dQG), dfree(&dK), dfree(&dV), dfree(&dqw), dfree(&dkw), dfree(&k2), dfree(&dks), dfree(&dvs);
    free(F), free(QG), free(K), free(V), free(qw), free(kw), free(ksc), free(vsc);
}

static void test_bad_args(void)
{
    float *fp = (float *)(uintptr_t)0x1000, *fo = (float *)(uintptr_t)0x2000;
    float *fz = (float *)(uintptr_t)0x3000;
    uint16_t *kc = (uint16_t *)(uintptr_t)0x4000, *vc = (uint16_t *)(uintptr_t)0x5000;
    int32_t *ip = (int32_t *)(uintptr_t)0x6000;
    const int E = FRT_ERR_INVALID_ARGUMENT;
#define PREP(q, z, k_c, v_c, qg, dst, ms, nh, nkv, hd, rot, th, gated)                          \
    frt_cuda_attn_decode_prep(NULL, q, z, k_c, v_c, qg, fp, fp, fp, fp, dst, ip, ms, nh, nkv, hd, \
                              rot, th, 1e-6f, 1, gated)
    CHECK_STATUS(PREP(NULL, fz, kc, vc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, NULL, kc, vc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E); /* gated */
    CHECK_STATUS(PREP(fo, fz, NULL, vc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, NULL, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, NULL, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, NULL, 64, 16, 4, 256, 64, 1e7f, 1), E); /* d_start */
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 0, 16, 4, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 0, 4, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 0, 256, 64, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, 0, 0, 1e7f, 1), E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, FRT_CUDA_ATTN_PREP_MAX_HD + 4, 64, 1e7f,
                      1),
                 E);
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, 256, 63, 1e7f, 1), E);  /* odd rot */
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, 256, 0, 1e7f, 1), E);   /* rot 0 */
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, 64, 128, 1e7f, 1), E);  /* rot > hd */
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, 1024, 1024, 1e7f, 1), E); /* > max rot */
    CHECK_STATUS(PREP(fo, fz, kc, vc, fp, ip, 64, 16, 4, 256, 64, 0.0f, 1), E);  /* theta */
    CHECK_STATUS(PREP(fp, fz, kc, vc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);  /* q_out == qg */
    CHECK_STATUS(PREP(fo, fp, kc, vc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);  /* zg == qg */
    CHECK_STATUS(PREP(fo, fo, kc, vc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);  /* zg == q_out */
    CHECK_STATUS(PREP(fo, fz, kc, kc, fp, ip, 64, 16, 4, 256, 64, 1e7f, 1), E);  /* k == v cache */
#undef PREP
    /* the prefill form: max_n and the row strides */
#define PREPN(mn, qs, ks, vs)                                                                          \
    frt_cuda_attn_prep(NULL, fo, fz, kc, vc, fp, qs, fp, ks, fp, vs, fp, fp, ip, ip, mn, 64, 16, 4, 256, 64, \
                       1e7f, 1e-6f, 1, 1)
    CHECK_STATUS(PREPN(-1, 10240, 10240, 10240), E);
    CHECK_STATUS(PREPN(65536, 10240, 10240, 10240), E);
    CHECK_STATUS(PREPN(2, 8191, 10240, 10240), E); /* q | gate of 16 heads need 8192 */
    CHECK_STATUS(PREPN(2, 10240, 1023, 10240), E);
    CHECK_STATUS(PREPN(2, 10240, 10240, 1023), E);
    CHECK_OK(PREPN(0, 0, 0, 0)); /* nothing to do: nothing enqueued */
#undef PREPN
}

int main(void)
{
    frt_test_seed(20261212);
    printf("  %-62s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    g_dyn = dalloc(64);

    test_shape("9B 16/4 hd 256 rot 64 gated", 16, 4, 256, 64, 1e7f, 1);
    test_shape("27B 24/4 hd 256 rot 64 gated", 24, 4, 256, 64, 1e7f, 1);
    test_shape("small 4/2 hd 64 rot 64 ungated", 4, 2, 64, 64, 1e4f, 0);
    test_shape("odd 3/1 hd 50 rot 16 gated", 3, 1, 50, 16, 1e6f, 1);
    test_graph();
    for (int fp8 = 0; fp8 < 2; fp8++) { /* the bf16 cache, then the FP8 one (frt_cuda_attn_prep_fp8) */
        test_multi("9B", 16, 4, 256, 64, 1e7f, 1, 0, 256, 256, 4, fp8);
        test_multi("9B", 16, 4, 256, 64, 1e7f, 1, 8192, 37, 256, 4, fp8);
        test_multi("9B tail", 16, 4, 256, 64, 1e7f, 1, MAX_SEQ - 3, 5, 8, 0, fp8);
        test_multi("27B", 24, 4, 256, 64, 1e7f, 1, 300, 64, 64, 4, fp8);
        test_multi("odd ungated", 3, 1, 50, 16, 1e6f, 0, 7, 6, 9, 3, fp8);
    }
    test_multi("9B decode", 16, 4, 256, 64, 1e7f, 1, 8191, 1, 1, 0, 1);
    test_multi("small decode", 4, 2, 64, 64, 1e4f, 0, 40, 1, 1, 0, 1);
    test_timing();

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dyn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
