/*
 * test_cuda_flash_attention.c - frt_cuda_attention_prefill (the tensor-core
 * FlashAttention-2 prefill, src/kernels/cuda/flash_attention.cu) against its
 * CPU twin frt_cpu_attention on random data, norm-wise
 * ||gpu - cpu|| / ||cpu|| within 1e-2 (P is rounded to bf16 for P.V). The
 * CPU side gets the cache widened from bf16 and q rounded to bf16 as the
 * kernel stages it, so the error measured is the kernel's; for f32 q a
 * second line measures it against the unrounded q (the q -> bf16 rounding
 * included, tolerance 2e-2).
 * Cases: the Qwen3.5 shape (head_dim 256, 16 query / 4 KV heads) as a
 * 256-token chunk at positions 0 and 7936 and a 64-token append at 8192 and
 * 32704 (max_seq 33024, many splits), odd counts 1..7; head_dim 64 and 128;
 * GQA 1x, 4x and 8x; f32 and bf16 q and out; one split and many. Also:
 *   - each configuration's launch runs at several (start, n) with the same
 *     arguments (the dynamic values change in device memory only), and is
 *     captured once in a CUDA graph (frt_graph_capture) and replayed: the
 *     replay gives the eager launch's bytes;
 *   - rows past n keep their sentinel bytes;
 *   - determinism: three runs give identical bytes, and the rows of a short
 *     n are bit-identical to the same rows of a longer n (a row's result
 *     does not depend on which splits are empty);
 *   - bad arguments fail cleanly (checked before the device check);
 *   - time per launch and TFLOP/s of the big cases (information, no check).
 * The CPU reference covers sampled token ranges of long blocks (the first,
 * middle and last 8 tokens) so each case runs in seconds. Prints a table:
 * case, rel err, tolerance. Exits 77 (skipped) without a CUDA device, after
 * the argument checks.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_COL 66
#define FRT_TEST_CUDA_START_N
#include "frt_test_cuda.h"

#define TOL 1e-2      /* bf16 P (and bf16 out) */
#define TOL_QF32 2e-2 /* against the unrounded f32 q */
#define PEAK_TFLOPS 989.0 /* H200 dense bf16 tensor-core peak */

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- a KV cache and a query block ------------------------------------- */

/* A random cache [max_seq, nkv, hd]: bf16 on the device, the same values
 * widened on the host. */
typedef struct kv_cache {
    int hd, nkv, max_seq;
    float *kf, *vf;
    dbuf k, v;
} kv_cache;

static kv_cache cache_make(int hd, int nkv, int max_seq)
{
    kv_cache kv = {hd, nkv, max_seq, NULL, NULL, {0}, {0}};
    const size_t csz = (size_t)max_seq * nkv * hd;
    kv.kf = frand(csz, -1, 1);
    kv.vf = frand(csz, -1, 1);
    round_bf16(kv.kf, csz);
    round_bf16(kv.vf, csz);
    kv.k = dalloc(csz * 2);
    kv.v = dalloc(csz * 2);
    dput_as(kv.k, 0, kv.kf, csz, BF16);
    dput_as(kv.v, 0, kv.vf, csz, BF16);
    return kv;
}

static void cache_free(kv_cache *kv)
{
    dfree(&kv->k);
    dfree(&kv->v);
    free(kv->kf);
    free(kv->vf);
}

/* One launch configuration: its arguments never change; (start, n) do. */
typedef struct fa_run {
    const kv_cache *kv;
    int nh, max_n;
    frt_cuda_dtype qdt, odt;
    size_t qrow, qsz, esz, wsb;
    float scale;
    float *q, *qr; /* q as uploaded; rounded to bf16 (what the kernel stages) */
    dbuf dq, dout, ws;
} fa_run;

static fa_run run_make(const kv_cache *kv, int nh, int max_n, frt_cuda_dtype qdt,
                       frt_cuda_dtype odt)
{
    fa_run r;
    memset(&r, 0, sizeof r);
    r.kv = kv;
    r.nh = nh;
    r.max_n = max_n;
    r.qdt = qdt;
    r.odt = odt;
    r.qrow = (size_t)nh * kv->hd;
    r.qsz = (size_t)max_n * r.qrow;
    r.esz = odt == BF16 ? 2 : 4;
    r.scale = 1.0f / sqrtf((float)kv->hd);
    r.q = frand(r.qsz, -2, 2);
    if (qdt == BF16) round_bf16(r.q, r.qsz);
    r.qr = xzalloc(r.qsz * sizeof(float));
    memcpy(r.qr, r.q, r.qsz * sizeof(float));
    round_bf16(r.qr, r.qsz);
    r.dq = dalloc(r.qsz * (qdt == BF16 ? 2 : 4));
    r.dout = dalloc(r.qsz * r.esz);
    dput_as(r.dq, 0, r.q, r.qsz, qdt);
    r.wsb = frt_cuda_attention_prefill_workspace_bytes(max_n, kv->max_seq, nh, kv->hd);
    r.ws = dalloc(r.wsb ? r.wsb : 16);
    return r;
}

static void run_free(fa_run *r)
{
    dfree(&r->dq);
    dfree(&r->dout);
    dfree(&r->ws);
    free(r->q);
    free(r->qr);
}

static int launch_on(const fa_run *r, void *stream)
{
    const kv_cache *kv = r->kv;
    return frt_cuda_attention_prefill(stream, r->dout.p, r->odt, r->dq.p, r->qdt, kv->k.p, kv->v.p,
                                      d_start_p(), d_n_p(), r->max_n, kv->max_seq, r->nh, kv->nkv,
                                      kv->hd, r->scale, r->ws.p, r->wsb);
}

static void launch(const fa_run *r) { CHECK_OK(launch_on(r, g_cs)); }

static void run_name(char *buf, size_t sz, const fa_run *r, int start, int n, const char *what)
{
    snprintf(buf, sz, "hd %d h %d/%d %s->%s start %d n %d/%d%s", r->kv->hd, r->nh, r->kv->nkv,
             dtn(r->qdt), dtn(r->odt), start, n, r->max_n, what);
}

/* The token ranges the CPU checks: all of a short block, else the first,
 * middle and last 8 tokens. Returns the count of ranges. */
static int check_ranges(int n, int lo[3], int hi[3])
{
    if (n <= 24) {
        lo[0] = 0;
        hi[0] = n;
        return 1;
    }
    lo[0] = 0, hi[0] = 8;
    lo[1] = n / 2 - 4, hi[1] = n / 2 + 4;
    lo[2] = n - 8, hi[2] = n;
    return 3;
}

/* The launch at (start, n) against the CPU on the checked ranges; rows past
 * n must keep the sentinel. Leaves the output in r->dout. */
static void check_at(const fa_run *r, int start, int n)
{
    const kv_cache *kv = r->kv;
    dsentinel(r->dout);
    set_dyn(start, n);
    launch(r);
    float *all = fnew((size_t)n * r->qrow + 1);
    dget_as(r->dout, 0, all, (size_t)n * r->qrow, r->odt);
    int lo[3], hi[3];
    const int nr = check_ranges(n, lo, hi);
    size_t rows = 0;
    for (int i = 0; i < nr; i++) rows += (size_t)(hi[i] - lo[i]);
    float *got = fnew(rows * r->qrow), *ref = fnew(rows * r->qrow), *reff = fnew(rows * r->qrow);
    size_t off = 0;
    for (int i = 0; i < nr; i++) {
        const size_t cnt = (size_t)(hi[i] - lo[i]) * r->qrow, q0 = (size_t)lo[i] * r->qrow;
        memcpy(got + off, all + q0, cnt * sizeof(float));
        frt_cpu_attention(ref + off, r->qr + q0, kv->kf, kv->vf, hi[i] - lo[i], start + lo[i],
                          r->nh, kv->nkv, kv->hd, r->scale);
        if (r->qdt == F32)
            frt_cpu_attention(reff + off, r->q + q0, kv->kf, kv->vf, hi[i] - lo[i], start + lo[i],
                              r->nh, kv->nkv, kv->hd, r->scale);
        off += cnt;
    }
    char name[200];
    run_name(name, sizeof name, r, start, n, nr > 1 ? " (24 rows)" : "");
    report(name, frt_test_rel_err(got, ref, rows * r->qrow), TOL);
    if (r->qdt == F32) {
        run_name(name, sizeof name, r, start, n, " vs f32 q");
        report(name, frt_test_rel_err(got, reff, rows * r->qrow), TOL_QF32);
    }
    CHECK_MSG(untouched(r->dout, (size_t)n * r->qrow * r->esz,
                        (size_t)(r->max_n - n) * r->qrow * r->esz),
              "rows past n written (start %d n %d)", start, n);
    free(all);
    free(got);
    free(ref);
    free(reff);
}

/* Three runs at (start, n): identical bytes. */
static void check_determinism(const fa_run *r, int start, int n)
{
    set_dyn(start, n);
    launch(r);
    void *a = snap(r->dout, r->qsz * r->esz);
    launch(r);
    launch(r);
    void *b = snap(r->dout, r->qsz * r->esz);
    char name[200];
    run_name(name, sizeof name, r, start, n, ": determinism (3 runs)");
    report_same(name, a, b, r->qsz * r->esz);
    free(a);
    free(b);
}

/* The rows of n_short tokens are the same bits as with n_long tokens. */
static void check_n_independent(const fa_run *r, int start, int n_long, int n_short)
{
    set_dyn(start, n_long);
    launch(r);
    void *a = snap(r->dout, r->qsz * r->esz);
    set_dyn(start, n_short);
    launch(r);
    void *b = snap(r->dout, r->qsz * r->esz);
    char name[200];
    snprintf(name, sizeof name, "hd %d start %d: rows of n %d == rows of n %d (bits)", r->kv->hd,
             start, n_short, n_long);
    report_same(name, a, b, (size_t)n_short * r->qrow * r->esz);
    free(a);
    free(b);
}

static int record_fa(frt_stream *stream, void *user)
{
    return launch_on((const fa_run *)user, frt_stream_native(stream));
}

/* One capture, replayed at each (start, n): the eager launch's bytes. */
static void check_graph(const fa_run *r, const int *starts, const int *ns, int count)
{
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "flash_attention", 0, &graph));
    if (!graph) return;
    set_dyn(starts[0], ns[0]);
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_fa, (void *)r));
    for (int i = 0; i < count; i++) {
        dsentinel(r->dout);
        set_dyn(starts[i], ns[i]);
        launch(r);
        void *a = snap(r->dout, r->qsz * r->esz);
        dsentinel(r->dout);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        void *b = snap(r->dout, r->qsz * r->esz);
        char name[200];
        run_name(name, sizeof name, r, starts[i], ns[i], ": graph replay == eager");
        report_same(name, a, b, r->qsz * r->esz);
        free(a);
        free(b);
    }
    frt_graph_destroy(graph);
}

/* Time per launch at (start, n) and the achieved TFLOP/s (4 hd flops per
 * visible (query, key) pair and head: Q K^T and P V). */
static void time_at(const fa_run *r, int start, int n)
{
    const kv_cache *kv = r->kv;
    double flops = 0;
    for (int t = 0; t < n; t++) flops += 4.0 * r->nh * kv->hd * (double)(start + t + 1);
    frt_event *e0 = NULL, *e1 = NULL;
    must(frt_event_create(g_ctx, &e0), "event");
    must(frt_event_create(g_ctx, &e1), "event");
    set_dyn(start, n);
    launch(r); /* warm-up */
    const int iters = 20;
    must(frt_event_record(e0, g_st), "record");
    for (int i = 0; i < iters; i++) launch(r);
    must(frt_event_record(e1, g_st), "record");
    must(frt_event_sync(e1), "event sync");
    float ms = 0;
    must(frt_event_elapsed_ms(e0, e1, &ms), "elapsed");
    const double us = 1e3 * ms / iters, tf = flops / (us * 1e-6) / 1e12;
    char name[200];
    run_name(name, sizeof name, r, start, n, "");
    printf("  time %-61s %8.1f us %6.1f TFLOP/s (%.0f%% of %.0f)\n", name, us, tf,
           100.0 * tf / PEAK_TFLOPS, PEAK_TFLOPS);
    frt_event_destroy(e0);
    frt_event_destroy(e1);
}

/* ---- the cases ---------------------------------------------------------- */

static void test_qwen_shape(void)
{
    /* head_dim 256, 16 query heads over 4 KV heads; max_seq 32768 + 256 */
    kv_cache kv = cache_make(256, 4, 33024);
    { /* a 256-token prefill chunk (split length 2048, 17 splits) */
        fa_run r = run_make(&kv, 16, 256, F32, F32);
        check_at(&r, 0, 256);
        check_at(&r, 7936, 256);
        check_at(&r, 300, 3);
        check_determinism(&r, 7936, 256);
        time_at(&r, 0, 256);
        time_at(&r, 7936, 256);
        run_free(&r);
    }
    { /* the same in bf16 */
        fa_run r = run_make(&kv, 16, 256, BF16, BF16);
        check_at(&r, 7936, 256);
        check_at(&r, 4000, 100);
        run_free(&r);
    }
    { /* a 64-token append (bucket 64: split length 512, 65 splits) */
        fa_run r = run_make(&kv, 16, 64, F32, F32);
        check_at(&r, 8192, 64);
        check_at(&r, 32704, 64);
        check_at(&r, 0, 64);
        check_at(&r, 2047, 33);
        check_determinism(&r, 32704, 64);
        check_n_independent(&r, 8192, 64, 5);
        check_n_independent(&r, 0, 64, 17);
        const int s[3] = {8192, 32704, 100}, n[3] = {64, 64, 7};
        check_graph(&r, s, n, 3);
        time_at(&r, 8192, 64);
        time_at(&r, 32704, 64);
        run_free(&r);
    }
    { /* odd small counts (bucket 16), bf16 q, f32 out */
        fa_run r = run_make(&kv, 16, 16, BF16, F32);
        check_at(&r, 0, 1);
        check_at(&r, 1000, 3);
        check_at(&r, 5001, 5);
        check_at(&r, 12345, 7);
        run_free(&r);
    }
    { /* GQA 8x (32 query heads over 4 KV heads), f32 q, bf16 out */
        fa_run r = run_make(&kv, 32, 32, F32, BF16);
        check_at(&r, 3000, 29);
        check_at(&r, 0, 32);
        run_free(&r);
    }
    cache_free(&kv);

    kv_cache small = cache_make(256, 4, 512);
    { /* one split (max_seq <= 512): out written directly */
        fa_run r = run_make(&small, 16, 32, F32, F32);
        check_at(&r, 0, 32);
        check_at(&r, 480, 32);
        check_at(&r, 77, 1);
        check_determinism(&r, 480, 32);
        run_free(&r);
    }
    cache_free(&small);
}

/* head_dim 128 on a bf16 cache where a launch fills whole 128-row blocks
 * (rows = tokens x query heads per KV head): the wgmma kernel
 * (flash_attention.cu fa_split_wg). llama3.1-8b's heads (32 over 8, 4 a
 * KV head): a 256-token prefill piece (split length 2048) and a 64-token
 * append (split length 512) at 8k; 3 heads a KV head with 128-token
 * pieces, where a split ends inside a key tile. */
static void test_llama_shape(void)
{
    kv_cache kv = cache_make(128, 8, 8448);
    { /* a 256-token piece: 1024 rows a KV head, 5 splits at 8k */
        fa_run r = run_make(&kv, 32, 256, F32, BF16);
        check_at(&r, 0, 256);
        check_at(&r, 7936, 256);
        check_at(&r, 300, 3);
        check_at(&r, 2047, 200);
        check_determinism(&r, 7936, 256);
        check_n_independent(&r, 4000, 256, 70);
        time_at(&r, 0, 256);
        time_at(&r, 7936, 256);
        run_free(&r);
    }
    { /* a 64-token append, bf16 q (the dense model's) */
        fa_run r = run_make(&kv, 32, 64, BF16, BF16);
        check_at(&r, 8192, 64);
        check_at(&r, 8384, 64);
        check_at(&r, 0, 64);
        check_at(&r, 1111, 33);
        check_determinism(&r, 8192, 64);
        check_n_independent(&r, 8192, 64, 5);
        const int s[3] = {8192, 100, 4095}, n[3] = {64, 7, 64};
        check_graph(&r, s, n, 3);
        time_at(&r, 8192, 64);
        run_free(&r);
    }
    cache_free(&kv);
    kv_cache mh = cache_make(128, 6, 1800);
    { /* 18 heads over 6 KV heads, 128-token pieces: split length 576 (4.5
       * tiles: a split ends inside a tile), 4 splits, the last one short */
        fa_run r = run_make(&mh, 18, 128, F32, F32);
        check_at(&r, 0, 128);
        check_at(&r, 1672, 128);
        check_at(&r, 555, 77);
        check_at(&r, 1799, 1);
        check_n_independent(&r, 600, 128, 13);
        run_free(&r);
    }
    { /* 192-token pieces (576 rows, 4.5 blocks: the mma.sync kernel) */
        fa_run r = run_make(&mh, 18, 192, BF16, F32);
        check_at(&r, 0, 192);
        check_at(&r, 1500, 192);
        run_free(&r);
    }
    cache_free(&mh);
}

/* frt_cuda_attention_prefill_pieces{,_fp8}: one launch over `pieces`
 * pieces of C rows gives each piece the bytes of a launch over that piece
 * alone at its start (the prefill groups' attention, docs/architectures.md),
 * with a bf16 cache and with E4M3 codes (random finite codes, per-head
 * scales), several splits (llama3.1-8b's heads, 32 over 8: at C 64 a split
 * length of 512, at C 256 2048). At C 256 (bf16) also the time of the
 * pieces launch, a group of 8 as a cold prefill of 8k runs its last. */
static void test_pieces(int fp8, int C, int pieces, int max_seq, int start1)
{
    const int hd = 128, nkv = 8, nh = 32, R = C * pieces;
    const size_t csz = (size_t)max_seq * nkv * hd, qrow = (size_t)nh * hd;
    uint64_t rng = 0x9e37u + (uint64_t)fp8;
    dbuf k = dalloc(csz * 2), v = dalloc(csz * 2), ks = dalloc(nkv * 4), vs = dalloc(nkv * 4);
    if (fp8) {
        unsigned char *codes = xzalloc(csz);
        for (int t = 0; t < 2; t++) {
            for (size_t i = 0; i < csz; i++) {
                unsigned char c8 = (unsigned char)(frt_rng_next(&rng) & 0xff);
                codes[i] = (c8 & 0x7f) == 0x7f ? 0x3c : c8; /* no NaN code */
            }
            dput(t ? v : k, 0, codes, csz);
        }
        free(codes);
        float sc[8];
        for (int h = 0; h < nkv; h++) sc[h] = 0.25f + 0.125f * (float)h;
        dput(ks, 0, sc, sizeof sc);
        dput(vs, 0, sc, sizeof sc);
    } else {
        float *f = frand(csz, -1, 1);
        dput_as(k, 0, f, csz, BF16);
        free(f);
        f = frand(csz, -1, 1);
        dput_as(v, 0, f, csz, BF16);
        free(f);
    }
    float *q = frand((size_t)R * qrow, -2, 2);
    dbuf dq = dalloc((size_t)R * qrow * 4), o1 = dalloc((size_t)R * qrow * 4), o2 = dalloc((size_t)R * qrow * 4);
    dput(dq, 0, q, (size_t)R * qrow * 4);
    const size_t wg = frt_cuda_attention_prefill_pieces_workspace_bytes(R, C, max_seq, nh, hd);
    const size_t w1 = frt_cuda_attention_prefill_workspace_bytes(C, max_seq, nh, hd);
    CHECK(wg > 0 && wg >= (size_t)pieces * w1 / 2);
    dbuf ws = dalloc(wg > w1 ? wg : w1);
    const float scale = 1.0f / sqrtf((float)hd);
    const int starts[2] = {0, start1};
    for (int si = 0; si < 2; si++) {
        set_dyn(starts[si], R);
        CHECK_OK(fp8 ? frt_cuda_attention_prefill_pieces_fp8(g_cs, o1.p, F32, dq.p, F32, k.p, v.p, ks.p, vs.p,
                                                             d_start_p(), d_n_p(), R, C, max_seq, nh, nkv, hd, scale,
                                                             ws.p, ws.bytes)
                     : frt_cuda_attention_prefill_pieces(g_cs, o1.p, F32, dq.p, F32, k.p, v.p, d_start_p(), d_n_p(), R,
                                                         C, max_seq, nh, nkv, hd, scale, ws.p, ws.bytes));
        for (int p = 0; p < pieces; p++) {
            set_dyn(starts[si] + p * C, C);
            void *op = (char *)o2.p + (size_t)p * C * qrow * 4;
            const void *qp = (const char *)dq.p + (size_t)p * C * qrow * 4;
            CHECK_OK(fp8 ? frt_cuda_attention_prefill_fp8(g_cs, op, F32, qp, F32, k.p, v.p, ks.p, vs.p, d_start_p(),
                                                          d_n_p(), C, max_seq, nh, nkv, hd, scale, ws.p, ws.bytes)
                         : frt_cuda_attention_prefill(g_cs, op, F32, qp, F32, k.p, v.p, d_start_p(), d_n_p(), C,
                                                      max_seq, nh, nkv, hd, scale, ws.p, ws.bytes));
            sync_st();
        }
        void *a = snap(o1, (size_t)R * qrow * 4), *b = snap(o2, (size_t)R * qrow * 4);
        char name[200];
        snprintf(name, sizeof name, "%s pieces: %d x %d rows at %d in one launch == one launch a piece",
                 fp8 ? "E4M3" : "bf16", pieces, C, starts[si]);
        report_same(name, a, b, (size_t)R * qrow * 4);
        free(a);
        free(b);
    }
    if (!fp8 && C == 256) { /* the time of the pieces launch at start1 */
        double flops = 0;
        for (int t = 0; t < R; t++) flops += 4.0 * nh * hd * (double)(start1 + t + 1);
        frt_event *e0 = NULL, *e1 = NULL;
        must(frt_event_create(g_ctx, &e0), "event");
        must(frt_event_create(g_ctx, &e1), "event");
        set_dyn(start1, R);
        const int iters = 10;
        for (int i = -1; i < iters; i++) {
            if (i == 0) must(frt_event_record(e0, g_st), "record");
            CHECK_OK(frt_cuda_attention_prefill_pieces(g_cs, o1.p, BF16, dq.p, F32, k.p, v.p, d_start_p(), d_n_p(), R,
                                                       C, max_seq, nh, nkv, hd, scale, ws.p, ws.bytes));
        }
        must(frt_event_record(e1, g_st), "record");
        must(frt_event_sync(e1), "event sync");
        float ms = 0;
        must(frt_event_elapsed_ms(e0, e1, &ms), "elapsed");
        const double us = 1e3 * ms / iters, tf = flops / (us * 1e-6) / 1e12;
        printf("  time pieces %d x %d at %-44d %8.1f us %6.1f TFLOP/s (%.0f%% of %.0f)\n", pieces, C, start1, us, tf,
               100.0 * tf / PEAK_TFLOPS, PEAK_TFLOPS);
        frt_event_destroy(e0);
        frt_event_destroy(e1);
    }
    CHECK_STATUS(frt_cuda_attention_prefill_pieces(g_cs, o1.p, F32, dq.p, F32, k.p, v.p, d_start_p(), d_n_p(), R, 48,
                                                   max_seq, nh, nkv, hd, scale, ws.p, ws.bytes),
                 FRT_ERR_INVALID_ARGUMENT); /* 256 rows are not pieces of 48 */
    CHECK(frt_cuda_attention_prefill_pieces_workspace_bytes(R, 48, max_seq, nh, hd) == 0);
    free(q);
    dfree(&dq);
    dfree(&o1);
    dfree(&o2);
    dfree(&ws);
    dfree(&k);
    dfree(&v);
    dfree(&ks);
    dfree(&vs);
}

static void test_head_dims(void)
{
    { /* head_dim 128, GQA 8x (16 over 2), bf16 in and out, 8 splits */
        kv_cache kv = cache_make(128, 2, 4096);
        fa_run r = run_make(&kv, 16, 100, BF16, BF16);
        check_at(&r, 0, 100);
        check_at(&r, 2047, 37);
        check_at(&r, 3996, 100);
        check_determinism(&r, 3996, 100);
        run_free(&r);
        cache_free(&kv);
    }
    { /* head_dim 128, GQA 1x, one split */
        kv_cache kv = cache_make(128, 4, 500);
        fa_run r = run_make(&kv, 4, 48, F32, F32);
        check_at(&r, 0, 48);
        check_at(&r, 300, 17);
        check_at(&r, 452, 48);
        run_free(&r);
        cache_free(&kv);
    }
    { /* head_dim 64, GQA 1x (8 over 8), f32 q, bf16 out, 6 splits */
        kv_cache kv = cache_make(64, 8, 3000);
        fa_run r = run_make(&kv, 8, 128, F32, BF16);
        check_at(&r, 0, 128);
        check_at(&r, 1500, 77);
        check_at(&r, 2872, 128);
        check_n_independent(&r, 1500, 128, 9);
        run_free(&r);
        cache_free(&kv);
    }
    { /* head_dim 64, GQA 8x (16 over 2), one split, bf16 q */
        kv_cache kv = cache_make(64, 2, 400);
        fa_run r = run_make(&kv, 16, 40, BF16, F32);
        check_at(&r, 0, 40);
        check_at(&r, 123, 9);
        check_determinism(&r, 123, 9);
        run_free(&r);
        cache_free(&kv);
    }
}

/* ---- bad arguments (no device needed: checked before any CUDA call) ---- */

static void test_bad_args(void)
{
    void *p = (void *)(uintptr_t)0x1000; /* fake, never dereferenced */
    void *p2 = (void *)(uintptr_t)0x2000;
    int32_t *ip = (int32_t *)(uintptr_t)0x3000;
    uint16_t *hp = (uint16_t *)(uintptr_t)0x4000;
    const int E = FRT_ERR_INVALID_ARGUMENT, U = FRT_ERR_UNSUPPORTED;
    const size_t big = (size_t)1 << 40;
    /* NULL pointers, bad dtype */
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, NULL, F32, p2, F32, hp, hp, ip, ip, 16, 256, 16,
                                            4, 256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, NULL, ip, ip, 16, 256, 16,
                                            4, 256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, NULL, ip, 16, 256, 16,
                                            4, 256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, (frt_cuda_dtype)5, p2, F32, hp, hp, ip, ip, 16,
                                            256, 16, 4, 256, 0.0625f, p, big),
                 E);
    /* heads not a multiple of KV heads, bad sizes, aliasing, scale */
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 16, 256, 6, 4,
                                            256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, -1, 256, 16, 4,
                                            256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 16, 0, 16, 4,
                                            256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p, F32, hp, hp, ip, ip, 16, 256, 16, 4,
                                            256, 0.0625f, p, big),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 16, 256, 16, 4,
                                            256, NAN, p, big),
                 E);
    /* head_dim without a tensor-core variant, misaligned q: unsupported */
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 16, 256, 16, 4,
                                            96, 0.1f, p, big),
                 U);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 16, 256, 16, 4,
                                            32, 0.1f, p, big),
                 U);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 16, 256, 16, 4,
                                            512, 0.1f, p, big),
                 U);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, (char *)p2 + 4, F32, hp, hp, ip, ip, 16,
                                            256, 16, 4, 256, 0.0625f, p, big),
                 U);
    /* splits need the workspace: missing, too small */
    const size_t need = frt_cuda_attention_prefill_workspace_bytes(64, 33024, 16, 256);
    CHECK(need == (size_t)65 * 64 * 16 * 258 * 4); /* split length 512: 65 splits */
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 64, 33024, 16, 4,
                                            256, 0.0625f, NULL, 0),
                 E);
    CHECK_STATUS(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 64, 33024, 16, 4,
                                            256, 0.0625f, p, need - 1),
                 E);
    /* workspace sizes: one split needs none; the bucket-256 size covers the
     * smaller buckets; invalid sizes give 0 */
    CHECK(frt_cuda_attention_prefill_workspace_bytes(256, 512, 16, 256) == 0);
    CHECK(frt_cuda_attention_prefill_workspace_bytes(256, 33024, 16, 256) ==
          (size_t)17 * 256 * 16 * 258 * 4); /* split length 2048 */
    for (int b = 16; b <= 256; b *= 2)
        CHECK(frt_cuda_attention_prefill_workspace_bytes(b, 33024, 16, 256) <=
              frt_cuda_attention_prefill_workspace_bytes(256, 33024, 16, 256));
    CHECK(frt_cuda_attention_prefill_workspace_bytes(0, 512, 16, 256) == 0);
    CHECK(frt_cuda_attention_prefill_workspace_bytes(16, -1, 16, 256) == 0);
    /* max_n 0: a no-op that launches nothing (valid without a device) */
    CHECK_OK(frt_cuda_attention_prefill(NULL, p, F32, p2, F32, hp, hp, ip, ip, 0, 256, 16, 4, 256,
                                        0.0625f, NULL, 0));
}

/* An f32 q and the same q rounded to bf16 (RNE) give the same output
 * bytes: the kernels round an f32 q to bf16 as they stage it, so the dense
 * prefill preps may write q in bf16 (frt_dense_prefill_prep's q16). Each
 * head_dim's kernel (64, 256: mma.sync; 128: wgmma), an append and a
 * piece with several splits. */
static void test_q_bf16_same(int hd, int nh, int nkv, int max_seq, int max_n, int start)
{
    kv_cache kv = cache_make(hd, nkv, max_seq);
    fa_run a = run_make(&kv, nh, max_n, F32, BF16); /* q not rounded on the host */
    fa_run b = run_make(&kv, nh, max_n, BF16, BF16);
    memcpy(b.q, a.q, a.qsz * sizeof(float));
    dput_as(b.dq, 0, b.q, b.qsz, BF16); /* bf16(q): RNE */
    set_dyn(start, max_n);
    must(frt_buffer_fill(a.dout.b, 0, a.qsz * 2, 0x5A, g_st), "fill");
    must(frt_buffer_fill(b.dout.b, 0, b.qsz * 2, 0xA5, g_st), "fill");
    launch(&a);
    launch(&b);
    sync_st();
    uint16_t *oa = xmalloc(a.qsz * 2), *ob = xmalloc(b.qsz * 2);
    dget(a.dout, 0, oa, a.qsz * 2);
    dget(b.dout, 0, ob, b.qsz * 2);
    char name[120];
    snprintf(name, sizeof name, "hd %d, %d rows at %d: f32 q == bf16(q), same output bytes", hd, max_n, start);
    report_flag(name, !memcmp(oa, ob, a.qsz * 2));
    free(oa);
    free(ob);
    run_free(&a);
    run_free(&b);
    cache_free(&kv);
}

/* frt_cuda_attention_prefill_src (the append after a device-tier capsule
 * in one call): a cache whose rows below P hold NaN bits, with a source
 * holding cache A's rows below P, gives the output bytes of the plain launch
 * on A, and afterwards holds A's bytes in every row (rows below P stored by
 * the launch, the rest untouched); the same with the descriptor's rows 0
 * on A (no source); n with one block of rows (it stores K and V) and two
 * (one each). Timed against the plain launch (the stores' cost). */
static void test_src(int nh, int nkv, int max_seq, int max_n, int P, int n, int timed)
{
    const int hd = 128;
    kv_cache kv = cache_make(hd, nkv, max_seq);
    fa_run r = run_make(&kv, nh, max_n, BF16, BF16);
    const size_t row = (size_t)nkv * hd * 2, cb = (size_t)max_seq * row, sb = (size_t)P * row;
    dbuf bk = dalloc(cb), bv = dalloc(cb), sk = dalloc(sb), sv = dalloc(sb), dsrc = dalloc(FRT_CUDA_KV_SRC_BYTES);
    void *hk = snap(kv.k, cb), *hv = snap(kv.v, cb);
    dput(sk, 0, hk, sb), dput(sv, 0, hv, sb);
    char name[200];
    _Alignas(128) unsigned char desc[FRT_CUDA_KV_SRC_BYTES];
    CHECK_OK(frt_cuda_kv_src_encode(desc, sk.p, sv.p, P, nkv, hd));
    dput(dsrc, 0, desc, sizeof desc);
    set_dyn(P, n);
    launch(&r);
    sync_st();
    const size_t ob = (size_t)n * r.qrow * 2; /* the output rows of the n tokens (the rest are not written) */
    void *want = snap(r.dout, ob);
    for (int pass = 0; pass < 2; pass++) { /* 0: the source over NaN rows; 1: rows 0 (no source) on A's bytes */
        dput(bk, 0, hk, cb), dput(bv, 0, hv, cb);
        if (pass == 0) {
            must(frt_buffer_fill(bk.b, 0, sb, 0xFF, g_st), "fill");
            must(frt_buffer_fill(bv.b, 0, sb, 0xFF, g_st), "fill");
        } else {
            memset(desc, 0, sizeof desc);
            CHECK_OK(frt_cuda_kv_src_encode(desc, NULL, NULL, 0, nkv, hd));
            dput(dsrc, 0, desc, sizeof desc);
        }
        dsentinel(r.dout);
        CHECK_OK(frt_cuda_attention_prefill_src(g_cs, r.dout.p, BF16, r.dq.p, BF16, bk.p, bv.p, d_start_p(), d_n_p(),
                                                max_n, max_seq, nh, nkv, hd, r.scale, r.ws.p, r.wsb, dsrc.p));
        sync_st();
        void *got = snap(r.dout, ob), *gk = snap(bk, cb), *gv = snap(bv, cb);
        snprintf(name, sizeof name, "src %d rows, %d/%d heads, %d at %d%s: out bytes of the plain launch", P, nh,
                 nkv, n, P, pass ? " (rows 0)" : "");
        report_flag(name, !memcmp(got, want, ob));
        snprintf(name, sizeof name, "src %d rows, %d at %d%s: the cache holds the source's rows, the rest kept", P, n,
                 P, pass ? " (rows 0)" : "");
        report_flag(name, !memcmp(gk, hk, cb) && !memcmp(gv, hv, cb));
        free(got), free(gk), free(gv);
    }
    if (timed) { /* the plain launch and the source's, 20 each after a warm-up */
        memset(desc, 0, sizeof desc);
        CHECK_OK(frt_cuda_kv_src_encode(desc, sk.p, sv.p, P, nkv, hd));
        dput(dsrc, 0, desc, sizeof desc);
        frt_event *e[3] = {NULL, NULL, NULL};
        for (int i = 0; i < 3; i++) must(frt_event_create(g_ctx, &e[i]), "event");
        launch(&r);
        must(frt_event_record(e[0], g_st), "record");
        for (int i = 0; i < 20; i++) launch(&r);
        must(frt_event_record(e[1], g_st), "record");
        for (int i = 0; i < 20; i++)
            CHECK_OK(frt_cuda_attention_prefill_src(g_cs, r.dout.p, BF16, r.dq.p, BF16, bk.p, bv.p, d_start_p(),
                                                    d_n_p(), max_n, max_seq, nh, nkv, hd, r.scale, r.ws.p, r.wsb,
                                                    dsrc.p));
        must(frt_event_record(e[2], g_st), "record");
        must(frt_event_sync(e[2]), "event sync");
        float a = 0, b = 0;
        must(frt_event_elapsed_ms(e[0], e[1], &a), "elapsed");
        must(frt_event_elapsed_ms(e[1], e[2], &b), "elapsed");
        printf("  time src: %d at %d, %d/%d heads: plain %.1f us, reading %d rows from the source and storing them "
               "%.1f us (+ combine each; the source's %.1f MB alone at 3.0 TB/s read + write: %.1f us)\n",
               n, P, nh, nkv, 1e3 * a / 20, P, 1e3 * b / 20, 2.0 * sb / 1e6, 2.0 * 2.0 * sb / 3.0e6);
        for (int i = 0; i < 3; i++) frt_event_destroy(e[i]);
    }
    /* refused: a launch the wgmma form does not take (rows not whole blocks), a misaligned source */
    CHECK_STATUS(frt_cuda_attention_prefill_src(g_cs, r.dout.p, BF16, r.dq.p, BF16, bk.p, bv.p, d_start_p(),
                                                d_n_p(), 24, max_seq, nh, nkv, hd, r.scale, r.ws.p, r.wsb, dsrc.p),
                 frt_cuda_attention_prefill_src_ok(24, nh, nkv, hd) ? 0 : FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_cuda_attention_prefill_src(g_cs, r.dout.p, BF16, r.dq.p, BF16, bk.p, bv.p, d_start_p(),
                                                d_n_p(), max_n, max_seq, nh, nkv, hd, r.scale, r.ws.p, r.wsb,
                                                (char *)dsrc.p + 64),
                 FRT_ERR_INVALID_ARGUMENT);
    sync_st();
    free(want), free(hk), free(hv);
    dfree(&bk), dfree(&bv), dfree(&sk), dfree(&sv), dfree(&dsrc);
    run_free(&r);
    cache_free(&kv);
}

/* The source's checks that need no launch. */
static void test_src_args(void)
{
    _Alignas(128) unsigned char desc[FRT_CUDA_KV_SRC_BYTES];
    _Alignas(16) static const uint16_t h[8];
    CHECK_STATUS(frt_cuda_kv_src_encode(NULL, h, h, 128, 1, 128), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_kv_src_encode(desc, NULL, h, 128, 1, 128), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_kv_src_encode(desc, h, h, -128, 1, 128), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_kv_src_encode(desc, h, h, 100, 1, 128), FRT_ERR_UNSUPPORTED); /* not whole tiles */
    CHECK_STATUS(frt_cuda_kv_src_encode(desc, h, h, 128, 1, 64), FRT_ERR_UNSUPPORTED);  /* head_dim 64 */
    CHECK_STATUS(frt_cuda_kv_src_encode(desc, h + 1, h, 128, 1, 128), FRT_ERR_UNSUPPORTED);
    CHECK_OK(frt_cuda_kv_src_encode(desc, NULL, NULL, 0, 1, 128)); /* none */
    CHECK(frt_cuda_attention_prefill_src_ok(64, 32, 8, 128) == 1);  /* llama3.1-8b's 64-token append */
    CHECK(frt_cuda_attention_prefill_src_ok(16, 32, 8, 128) == 0);  /* 64 rows a KV head: mma.sync */
    CHECK(frt_cuda_attention_prefill_src_ok(64, 16, 4, 256) == 0);  /* head_dim 256 */
    CHECK(frt_cuda_attention_prefill_src_ok(64, 32, 8, 64) == 0);
}

int main(void)
{
    frt_test_seed(20261205);
    printf("  %-66s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    g_dyn = dalloc(64);

    test_qwen_shape();
    test_llama_shape();
    test_head_dims();
    test_pieces(0, 64, 4, 4160, 3008);
    test_pieces(1, 64, 4, 4160, 3008);
    test_pieces(0, 256, 8, 8448, 6144);
    test_q_bf16_same(128, 32, 8, 8448, 64, 8192);
    test_q_bf16_same(128, 32, 8, 8448, 256, 7936);
    test_q_bf16_same(64, 16, 4, 4160, 256, 3008);
    test_q_bf16_same(256, 16, 4, 8448, 256, 7936);
    test_src_args();
    test_src(32, 8, 8448, 64, 8192, 64, 1); /* llama3.1-8b's append after an 8k capsule: two blocks of rows */
    test_src(32, 8, 8448, 64, 8192, 20, 0); /* 80 rows a KV head: one block stores K and V */
    test_src(12, 3, 2304, 64, 1024, 57, 0); /* 3 KV heads, 3 splits */

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dyn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
