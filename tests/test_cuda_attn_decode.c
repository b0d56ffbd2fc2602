/*
 * test_cuda_attn_decode.c - the flash-decoding form of frt_cuda_attention
 * (split_len > 0: the tensor-core kernel attn_decode_tc_kernel of
 * src/kernels/cuda/attention.cu for head_dim 64 / 128 / 256 with 16-byte
 * aligned caches, then the split combine) against its CPU twin
 * frt_cpu_attention, norm-wise ||gpu - cpu|| / ||cpu|| on random data
 * (q in [-2, 2), K and V bf16 in [-1, 1)).
 *
 * Tolerances: 1e-5 for f32 out, 1e-2 for bf16 out (one bf16 rounding of the
 * result, 2^-9 relative). The kernel splits q and the softmax weights into
 * three bf16 terms each (hi + mid + lo == the fp32 value), so every product
 * is exact and only the fp32 accumulation order differs from the twin: a
 * CPU model of it gives ~2e-7 against an fp64 reference where the twin
 * itself is ~1e-6 (8k keys), so the error printed here is mostly the twin's
 * and ~1e-6 is expected; plain bf16 q and P (the prefill kernel's
 * precision) would be ~2e-3 and fail 1e-5.
 *
 * Cases:
 *   - the Qwen3.5 shapes: head_dim 256 over 4 KV heads with 16 query heads
 *     (9B: one chunk of 4 pairs) and 24 (27B: two chunks of 3), splits 128
 *     (DECODE_SPLIT) and 64, contexts 1, 7, 129, 2048, 8191 and 32768 in one
 *     cache of 33024 rows; the rows past the context hold NaN (bf16 0xFFFF),
 *     so reading any of them would poison the output;
 *   - small odd cases: head_dim 64 with group 2 (6 / 3 heads), head_dim 128
 *     with group 1 and an odd split of 100, three tokens (max_n 3: n 3 and
 *     2), bf16 q and out;
 *   - rows past n keep their sentinel bytes; d_n NULL (= max_n);
 *   - determinism: three runs give identical bytes; the same call on a
 *     shorter view of the cache (smaller max_seq: fewer splits, another
 *     grid) gives the same bytes (the partition is split_len only);
 *   - one CUDA graph capture replayed at two positions: the eager bytes;
 *   - frt_cuda_attention_batch (branch slots: one cache and position a
 *     branch): each branch's bytes equal frt_cuda_attention on it alone;
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT before any device
 *     call (also without a GPU);
 *   - time per call (the mean over 10 replays of a graph of 10 calls, so
 *     no host launch cost) at contexts 2048, 8192 and 32768 against the HBM
 *     floor (K + V bytes / 4.8 TB/s): information, no check.
 * Prints a table: case, rel err, tolerance. Exits 77 (skipped) without a
 * CUDA device, after the argument checks.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_COL 70
#define FRT_TEST_CUDA_START_N
#include "frt_test_cuda.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define HBM_GBS 4800.0 /* H200 HBM3e peak, GB/s */

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

static double tol_of(frt_cuda_dtype dt) { return dt == BF16 ? TOL_BF16 : TOL_F32; }

/* ---- a KV cache whose rows past `valid` hold NaN on the device --------- */

typedef struct dcache {
    int max_seq, nkv, hd, valid;
    float *kf, *vf; /* [max_seq, nkv, hd] host values (bf16-exact), all rows */
    dbuf kc, vc;    /* device bf16: rows < valid = kf / vf, the rest NaN */
} dcache;

static dcache dcache_make(int max_seq, int nkv, int hd)
{
    dcache c = {max_seq, nkv, hd, 0, NULL, NULL, {0}, {0}};
    const size_t sz = (size_t)max_seq * nkv * hd;
    c.kf = frand(sz, -1, 1);
    c.vf = frand(sz, -1, 1);
    round_bf16(c.kf, sz);
    round_bf16(c.vf, sz);
    c.kc = dalloc(sz * 2);
    c.vc = dalloc(sz * 2);
    must(frt_buffer_fill(c.kc.b, 0, sz * 2, 0xFF, g_st), "fill"); /* bf16 0xFFFF: NaN */
    must(frt_buffer_fill(c.vc.b, 0, sz * 2, 0xFF, g_st), "fill");
    sync_st();
    return c;
}

/* Makes rows [valid, rows) real (the cache only grows, as in decoding). */
static void dcache_grow(dcache *c, int rows)
{
    if (rows > c->max_seq) rows = c->max_seq;
    if (rows <= c->valid) return;
    const size_t row = (size_t)c->nkv * c->hd, off = (size_t)c->valid * row;
    const size_t cnt = (size_t)(rows - c->valid) * row;
    dput_as(c->kc, off, c->kf + off, cnt, BF16);
    dput_as(c->vc, off, c->vf + off, cnt, BF16);
    c->valid = rows;
}

static void dcache_free(dcache *c)
{
    free(c->kf);
    free(c->vf);
    dfree(&c->kc);
    dfree(&c->vc);
}

/* ---- one launch configuration --------------------------------------------- */

typedef struct dcall {
    const dcache *c;
    int nh, max_n, split, max_seq, null_dn; /* max_seq <= c->max_seq (a view) */
    frt_cuda_dtype qdt, odt;
    size_t qrow, qsz, esz;
    float scale;
    float *q;
    dbuf dq, out, ws;
} dcall;

static dcall call_make(const dcache *c, int nh, int max_n, int split, frt_cuda_dtype qdt,
                       frt_cuda_dtype odt)
{
    dcall a;
    memset(&a, 0, sizeof a);
    a.c = c;
    a.nh = nh;
    a.max_n = max_n;
    a.split = split;
    a.max_seq = c->max_seq;
    a.qdt = qdt;
    a.odt = odt;
    a.qrow = (size_t)nh * c->hd;
    a.qsz = (size_t)max_n * a.qrow;
    a.esz = dsize(odt);
    a.scale = 1.0f / sqrtf((float)c->hd);
    a.q = frand(a.qsz, -2, 2);
    if (qdt == BF16) round_bf16(a.q, a.qsz);
    a.dq = dalloc(a.qsz * dsize(qdt));
    a.out = dalloc(a.qsz * a.esz);
    a.ws = dalloc(frt_cuda_attention_workspace_bytes(max_n, c->max_seq, nh, c->hd, split));
    dput_as(a.dq, 0, a.q, a.qsz, qdt);
    return a;
}

static void call_free(dcall *a)
{
    free(a->q);
    dfree(&a->dq);
    dfree(&a->out);
    dfree(&a->ws);
}

static int call_on(const dcall *a, void *stream)
{
    return frt_cuda_attention(stream, a->out.p, a->odt, a->dq.p, a->qdt, a->c->kc.p, a->c->vc.p,
                              d_start_p(), a->null_dn ? NULL : d_n_p(), a->max_n, a->max_seq,
                              a->nh, a->c->nkv, a->c->hd, a->scale, a->split, a->ws.p,
                              a->ws.bytes);
}

static void call_name(char *buf, size_t sz, const dcall *a, int ctx, int n, const char *what)
{
    snprintf(buf, sz, "hd %d h %d/%d %s->%s split %d ctx %d n %d/%d%s", a->c->hd, a->nh,
             a->c->nkv, dtn(a->qdt), dtn(a->odt), a->split, ctx, n, a->max_n, what);
}

/* n tokens whose last sees ctx keys (start = ctx - n) against the twin;
 * rows past n keep the sentinel. The cache must hold ctx real rows. */
static void check_at(const dcall *a, int ctx, int n)
{
    const dcache *c = a->c;
    const int start = ctx - n;
    CHECK(ctx <= c->valid && n >= 1 && n <= a->max_n);
    dsentinel(a->out);
    set_dyn(start, a->null_dn ? a->max_n : n);
    CHECK_OK(call_on(a, g_cs));
    const size_t cnt = (size_t)n * a->qrow;
    float *got = fnew(cnt), *ref = fnew(cnt);
    dget_as(a->out, 0, got, cnt, a->odt);
    frt_cpu_attention(ref, a->q, c->kf, c->vf, n, start, a->nh, c->nkv, c->hd, a->scale);
    char name[200];
    call_name(name, sizeof name, a, ctx, n, a->null_dn ? " (d_n NULL)" : "");
    report(name, frt_test_rel_err(got, ref, cnt), tol_of(a->odt));
    CHECK_MSG(untouched(a->out, cnt * a->esz, (size_t)(a->max_n - n) * a->qrow * a->esz),
              "%s: rows past n written", name);
    free(got);
    free(ref);
}

/* Three runs at (ctx, n): identical bytes. */
static void check_determinism(const dcall *a, int ctx, int n)
{
    set_dyn(ctx - n, n);
    CHECK_OK(call_on(a, g_cs));
    void *b0 = snap(a->out, a->qsz * a->esz);
    CHECK_OK(call_on(a, g_cs));
    CHECK_OK(call_on(a, g_cs));
    void *b1 = snap(a->out, a->qsz * a->esz);
    char name[200];
    call_name(name, sizeof name, a, ctx, n, ": 3 runs (bits)");
    report_same(name, b0, b1, a->qsz * a->esz);
    free(b0);
    free(b1);
}

/* The same call on a view of the cache with max_seq `view` (fewer splits,
 * another grid and workspace stride): the same bytes. */
static void check_view(dcall *a, int ctx, int view)
{
    set_dyn(ctx - 1, 1);
    dsentinel(a->out);
    CHECK_OK(call_on(a, g_cs));
    void *b0 = snap(a->out, a->qsz * a->esz);
    const int full = a->max_seq;
    a->max_seq = view;
    dsentinel(a->out);
    CHECK_OK(call_on(a, g_cs));
    a->max_seq = full;
    void *b1 = snap(a->out, a->qsz * a->esz);
    char name[200];
    snprintf(name, sizeof name, "hd %d h %d/%d ctx %d: max_seq %d == max_seq %d (bits)", a->c->hd,
             a->nh, a->c->nkv, ctx, view, full);
    report_same(name, b0, b1, a->qsz * a->esz);
    free(b0);
    free(b1);
}

static int record_call(frt_stream *stream, void *user)
{
    return call_on((const dcall *)user, frt_stream_native(stream));
}

/* One capture (at ctx0), replayed at each context: the eager launch's bytes,
 * and the twin within tolerance. n = 1. */
static void check_graph(const dcall *a, int ctx0, const int *ctxs, int count)
{
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "attn_decode", 0, &graph));
    if (!graph) return;
    set_dyn(ctx0 - 1, 1);
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_call, (void *)a));
    float *got = fnew(a->qrow), *ref = fnew(a->qrow);
    for (int i = 0; i < count; i++) {
        const int ctx = ctxs[i];
        dsentinel(a->out);
        set_dyn(ctx - 1, 1);
        CHECK_OK(call_on(a, g_cs));
        void *b0 = snap(a->out, a->qsz * a->esz);
        dsentinel(a->out);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        void *b1 = snap(a->out, a->qsz * a->esz);
        char name[200];
        call_name(name, sizeof name, a, ctx, 1, ": graph replay == eager");
        report_same(name, b0, b1, a->qsz * a->esz);
        dget_as(a->out, 0, got, a->qrow, a->odt);
        frt_cpu_attention(ref, a->q, a->c->kf, a->c->vf, 1, ctx - 1, a->nh, a->c->nkv, a->c->hd,
                          a->scale);
        call_name(name, sizeof name, a, ctx, 1, ": graph replay");
        report(name, frt_test_rel_err(got, ref, a->qrow), tol_of(a->odt));
        free(b0);
        free(b1);
    }
    free(got);
    free(ref);
    frt_graph_destroy(graph);
}

/* Time per call at ctx (n = 1): a graph of 10 calls replayed 10 times. */
#define TIME_CALLS 10
static int record_calls(frt_stream *stream, void *user)
{
    for (int i = 0; i < TIME_CALLS; i++) {
        int rc = call_on((const dcall *)user, frt_stream_native(stream));
        if (rc < 0) return rc;
    }
    return 0;
}

static void time_at(const dcall *a, int ctx)
{
    frt_graph *graph = NULL;
    frt_event *e0 = NULL, *e1 = NULL;
    must(frt_graph_create(g_ctx, "attn_decode_time", 0, &graph), "graph");
    must(frt_event_create(g_ctx, &e0), "event");
    must(frt_event_create(g_ctx, &e1), "event");
    set_dyn(ctx - 1, 1);
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_calls, (void *)a));
    CHECK_OK(frt_graph_replay(graph, 1, g_st)); /* warm-up */
    const int reps = 10;
    must(frt_event_record(e0, g_st), "record");
    for (int i = 0; i < reps; i++) CHECK_OK(frt_graph_replay(graph, 1, g_st));
    must(frt_event_record(e1, g_st), "record");
    must(frt_event_sync(e1), "event sync");
    float ms = 0.0f;
    must(frt_event_elapsed_ms(e0, e1, &ms), "elapsed");
    const double us = 1e3 * ms / (reps * TIME_CALLS);
    const double bytes = (double)ctx * a->c->nkv * a->c->hd * 2 * 2; /* K + V bf16 */
    char name[200];
    call_name(name, sizeof name, a, ctx, 1, "");
    printf("  time %-66s %7.1f us %6.0f GB/s of K+V (floor %.1f us at %.0f GB/s)\n", name, us,
           bytes / us * 1e-3, bytes / HBM_GBS * 1e-3, HBM_GBS);
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_graph_destroy(graph);
}

/* ---- the cases ---------------------------------------------------------- */

static void test_qwen_shapes(void)
{
    dcache c = dcache_make(33024, 4, 256);
    dcall a9 = call_make(&c, 16, 1, 128, F32, F32);     /* 9B, DECODE_SPLIT */
    dcall a9s = call_make(&c, 16, 1, 64, F32, F32);     /* 9B, split 64 */
    dcall a27 = call_make(&c, 24, 1, 128, F32, F32);    /* 27B */
    dcall abf = call_make(&c, 16, 1, 128, BF16, BF16);  /* bf16 q and out */
    dcall a3 = call_make(&c, 16, 3, 128, F32, F32);     /* three tokens */
    const int ctxs[6] = {1, 7, 129, 2048, 8191, 32768};
    for (int i = 0; i < 6; i++) { /* ascending: the NaN rows shrink as the cache grows */
        const int ctx = ctxs[i];
        dcache_grow(&c, ctx);
        check_at(&a9, ctx, 1);
        check_at(&a9s, ctx, 1);
        check_at(&a27, ctx, 1);
        check_at(&abf, ctx, 1);
        if (ctx >= 3) {
            check_at(&a3, ctx, 3);
            check_at(&a3, ctx, 2);
        }
        if (ctx == 8191) {
            check_determinism(&a9, ctx, 1);
            check_determinism(&a27, ctx, 1);
            check_determinism(&a3, ctx, 3);
            check_view(&a9, 2048, 8192);
        }
        if (ctx == 2048) {
            const int g[2] = {129, 2048};
            check_graph(&a9, 7, g, 2);
            check_graph(&a27, 2048, g, 2);
        }
    }
    /* time per call: the cache is fully real from here */
    dcache_grow(&c, c.max_seq);
    const int tctx[3] = {2048, 8192, 32768};
    for (int i = 0; i < 3; i++) {
        time_at(&a9, tctx[i]);
        time_at(&a9s, tctx[i]);
        time_at(&a27, tctx[i]);
    }
    call_free(&a9);
    call_free(&a9s);
    call_free(&a27);
    call_free(&abf);
    call_free(&a3);
    dcache_free(&c);
}

static void test_small(void)
{
    { /* head_dim 64, group 2 (6 query heads over 3 KV heads), split 64 */
        dcache c = dcache_make(700, 3, 64);
        dcall a = call_make(&c, 6, 1, 64, F32, F32);
        dcall b = call_make(&c, 6, 3, 64, BF16, F32);
        const int ctxs[5] = {1, 7, 64, 65, 699};
        for (int i = 0; i < 5; i++) {
            dcache_grow(&c, ctxs[i]);
            check_at(&a, ctxs[i], 1);
            if (ctxs[i] >= 3) check_at(&b, ctxs[i], 3);
        }
        check_determinism(&b, 699, 3);
        check_view(&a, 300, 320);
        const int g[2] = {65, 699};
        check_graph(&a, 1, g, 2);
        call_free(&a);
        call_free(&b);
        dcache_free(&c);
    }
    { /* head_dim 128, group 1 (4 over 4), odd split 100, bf16 out; d_n NULL */
        dcache c = dcache_make(1100, 4, 128);
        dcall a = call_make(&c, 4, 1, 100, F32, BF16);
        dcall b = call_make(&c, 4, 2, 100, F32, F32);
        const int ctxs[5] = {1, 7, 100, 101, 1100};
        for (int i = 0; i < 5; i++) {
            dcache_grow(&c, ctxs[i]);
            check_at(&a, ctxs[i], 1);
            if (ctxs[i] >= 2) check_at(&b, ctxs[i], 2);
        }
        b.null_dn = 1;
        check_at(&b, 1100, 2);
        call_free(&a);
        call_free(&b);
        dcache_free(&c);
    }
}

/* ---- bad arguments (no device needed: checked before any CUDA call) ---- */

static void test_bad_args(void)
{
    void *p = (void *)(uintptr_t)0x1000; /* fake, never dereferenced */
    void *p2 = (void *)(uintptr_t)0x2000;
    int32_t *ip = (int32_t *)(uintptr_t)0x3000;
    uint16_t *hp = (uint16_t *)(uintptr_t)0x4000;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    const size_t big = (size_t)1 << 40;
    /* NULL out / q / caches / d_start, bad dtype */
    CHECK_STATUS(frt_cuda_attention(NULL, NULL, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, NULL, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, NULL, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, NULL, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, (frt_cuda_dtype)7, p2, F32, hp, hp, ip, ip, 1, 8192,
                                    16, 4, 256, 0.0625f, 128, p, big),
                 E);
    /* heads not a multiple of KV heads; head_dim 48 and 512; sizes */
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 18, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 48,
                                    0.1f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 512,
                                    0.1f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, -1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 0, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 1 << 30, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    /* out aliasing q; negative split; more than 65535 splits */
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, -128, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 70000, 16, 4, 256,
                                    0.0625f, 1, p, big),
                 E);
    /* workspace: NULL, one byte short */
    const size_t need = frt_cuda_attention_workspace_bytes(1, 8192, 16, 256, 128);
    CHECK(need == (size_t)64 * 16 * 258 * 4);
    CHECK(frt_cuda_attention_workspace_bytes(1, 8192, 16, 256, 0) == 0);
    CHECK(frt_cuda_attention_workspace_bytes(3, 1100, 4, 128, 100) == (size_t)11 * 3 * 4 * 130 * 4);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, NULL, big),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 1, 8192, 16, 4, 256,
                                    0.0625f, 128, p, need - 1),
                 E);
    /* max_n 0: nothing enqueued, valid without a device */
    CHECK_OK(frt_cuda_attention(NULL, p, F32, p2, F32, hp, hp, ip, ip, 0, 8192, 16, 4, 256,
                                0.0625f, 128, p, need));
}

/* frt_cuda_attention_batch: branch b over its own cache at its own
 * position gives the bytes of frt_cuda_attention on that branch alone
 * (max_n 1, d_n NULL); the positions differ per branch (one past the last
 * row of the cache too). shared > 0: the branches' rows below `shared` are
 * branch 0's (a fork's prefix) and the launch reads them from branch 0
 * (d_shared); the other branches' own copies of those rows are overwritten
 * with NaN after the references are taken, so equal bytes prove the rows
 * came from branch 0. */
#define NB 3
static void test_batch_case(int hd, int nh, int nkv, int split, int shared)
{
    const int max_seq = 333, pos[NB] = {17, 300, 332};
    dcache c[NB];
    const size_t row = (size_t)nh * hd, crow = (size_t)nkv * hd;
    float *q = frand(NB * row, -2, 2);
    dbuf dq = dalloc(NB * row * 4), out = dalloc(NB * row * 4), ref = dalloc(row * 4), dpos = dalloc(NB * 4);
    size_t ws1 = frt_cuda_attention_workspace_bytes(1, max_seq, nh, hd, split);
    dbuf ws = dalloc(NB * ws1), tabs = dalloc(3 * NB * sizeof(void *)), dsh = dalloc(NB * 4);
    dput(dq, 0, q, NB * row * 4);
    dput(dpos, 0, pos, sizeof pos);
    void *tk[NB], *tv[NB], *tp[NB];
    int32_t sh[NB];
    for (int b = 0; b < NB; b++) {
        c[b] = dcache_make(max_seq, nkv, hd);
        sh[b] = b ? shared : 0;
        if (b && shared) { /* the fork's prefix: branch 0's rows */
            memcpy(c[b].kf, c[0].kf, (size_t)shared * crow * sizeof(float));
            memcpy(c[b].vf, c[0].vf, (size_t)shared * crow * sizeof(float));
        }
        /* branch 0's cache holds the shared rows, also past its position
         * (slot 0's rows a fork shares are below its position in frt) */
        dcache_grow(&c[b], !b && shared > pos[b] + 1 ? shared : pos[b] + 1);
        tk[b] = c[b].kc.p, tv[b] = c[b].vc.p, tp[b] = (int32_t *)dpos.p + b;
    }
    dput(tabs, 0, tk, sizeof tk);
    dput(tabs, sizeof tk, tv, sizeof tv);
    dput(tabs, 2 * sizeof tk, tp, sizeof tp);
    dput(dsh, 0, sh, sizeof sh);
    void **dt = tabs.p;
    float scale = 1.0f / sqrtf((float)hd);
    float *got = fnew(NB * row), *want = fnew(NB * row);
    for (int b = 0; b < NB; b++) {
        dbuf w1 = dalloc(ws1);
        must(frt_cuda_attention(g_cs, ref.p, F32, (float *)dq.p + b * row, F32, c[b].kc.p, c[b].vc.p,
                                (int32_t *)dpos.p + b, NULL, 1, max_seq, nh, nkv, hd, scale, split, w1.p, w1.bytes),
             "attention alone");
        sync_st();
        dget(ref, 0, want + b * row, row * 4);
        dfree(&w1);
    }
    for (int b = 1; b < NB && shared; b++) { /* the own copies of the shared rows: NaN */
        must(frt_buffer_fill(c[b].kc.b, 0, (size_t)shared * crow * 2, 0xFF, g_st), "fill");
        must(frt_buffer_fill(c[b].vc.b, 0, (size_t)shared * crow * 2, 0xFF, g_st), "fill");
    }
    must(frt_cuda_attention_batch(g_cs, out.p, F32, dq.p, (const uint16_t *const *)dt, (const uint16_t *const *)(dt + NB),
                                  (const int32_t *const *)(dt + 2 * NB), shared ? (const int32_t *)dsh.p : NULL, NB,
                                  max_seq, nh, nkv, hd, scale, split, ws.p, ws.bytes),
         "attention batch");
    sync_st();
    dget(out, 0, got, NB * row * 4);
    for (int b = 0; b < NB; b++) {
        char name[200];
        snprintf(name, sizeof name,
                 "batch of %d: branch %d at %d, hd %d, heads %d / %d, split %d, shared %d: the bytes alone", NB, b,
                 pos[b], hd, nh, nkv, split, sh[b]);
        report_same(name, got + b * row, want + b * row, row * 4);
    }
    /* bf16 out: the f32 result rounded once (the bits of converting it) */
    dbuf ob = dalloc(NB * row * 2);
    must(frt_cuda_attention_batch(g_cs, ob.p, BF16, dq.p, (const uint16_t *const *)dt,
                                  (const uint16_t *const *)(dt + NB), (const int32_t *const *)(dt + 2 * NB),
                                  shared ? (const int32_t *)dsh.p : NULL, NB, max_seq, nh, nkv, hd, scale, split, ws.p,
                                  ws.bytes),
         "attention batch bf16");
    sync_st();
    uint16_t *gb = malloc(NB * row * 2), *wb = malloc(NB * row * 2);
    if (!gb || !wb) abort();
    dget(ob, 0, gb, NB * row * 2);
    for (size_t i = 0; i < NB * row; i++) wb[i] = frt_f32_to_bf16(want[i]);
    char bname[160];
    snprintf(bname, sizeof bname, "batch of %d, hd %d, shared %d, bf16 out: the f32 bytes rounded", NB, hd, shared);
    report_same(bname, gb, wb, NB * row * 2);
    free(gb), free(wb);
    dfree(&ob);
    free(got), free(want), free(q);
    for (int b = 0; b < NB; b++) dcache_free(&c[b]);
    dfree(&dq), dfree(&out), dfree(&ref), dfree(&dpos), dfree(&ws), dfree(&tabs), dfree(&dsh);
}

static void test_batch(void)
{
    test_batch_case(128, 32, 8, 128, 0); /* llama3.1-8b's heads */
    test_batch_case(64, 6, 2, 100, 0);
    test_batch_case(256, 16, 4, 64, 0);
    /* a fork's shared prefix: split-aligned, mid-split and mid-tile ends,
     * longer than a branch's position (17) */
    test_batch_case(128, 32, 8, 128, 256);
    test_batch_case(64, 6, 2, 100, 150);
    test_batch_case(256, 16, 4, 64, 13);
    /* head_dim outside the tensor-core kernel: refused */
    dbuf d = dalloc(4096);
    void **p = d.p;
    /* an out dtype other than f32 / bf16 */
    CHECK_STATUS(frt_cuda_attention_batch(g_cs, d.p, (frt_cuda_dtype)7, (float *)d.p + 8, (const uint16_t *const *)p,
                                          (const uint16_t *const *)p, (const int32_t *const *)p, NULL, 1, 16, 2, 1,
                                          64, 1.0f, 8, d.p, d.bytes),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_attention_batch(g_cs, d.p, F32, (float *)d.p + 8, (const uint16_t *const *)p,
                                          (const uint16_t *const *)p, (const int32_t *const *)p, NULL, 1, 16, 2, 1, 32,
                                          1.0f, 8, d.p, d.bytes),
                 FRT_ERR_UNSUPPORTED);
    dfree(&d);
}

int main(void)
{
    frt_test_seed(20260611);
    printf("  %-*s %10s %8s\n", FRT_TEST_CUDA_COL, "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    g_dyn = dalloc(64);

    test_small();
    test_batch();
    test_qwen_shapes();

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dyn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
