/*
 * test_cuda_decode.c - the decode-step kernels at the Qwen3.5 decode shapes,
 * against their CPU twins (norm-wise ||gpu - cpu|| / ||cpu||; fp32 outputs
 * 1e-5, bf16 outputs 1e-2):
 *   - flash-decoding attention (split form): head_dim 256, GQA group 4 (9B:
 *     16 / 4 heads) and 6 (27B: 24 / 4), contexts 1, 300, 8192, 32768 with
 *     max_n 1 and 4, split 128 (DECODE_SPLIT); head_dim 64 / 128 and an odd
 *     split of 100; rows past n untouched; 3 runs give the same bits; the
 *     time per call and the KV bytes / time it implies;
 *   - the gated delta rule, recurrent: 32 value heads over 16 key heads,
 *     dk = dv = 128 (one token and several), odd dk / dv, dk 256;
 *     determinism, n tokens in one launch == n launches of one;
 *   - the norms at 4096 (add_rmsnorm, rmsnorm), the per-head norms (q/k
 *     norm 256, rmsnorm_gated and l2norm 128), odd and very wide rows, and
 *     a misaligned (scalar-load) row giving the bits of the aligned one;
 *     rope and conv1d at the decode shapes;
 *   - sampling over a 248320-token vocabulary: frt_cuda_sample_token greedy
 *     (temperature <= 0: argmax, the RNG untouched) and sampled (==
 *     frt_cpu_sample with the same u, one RNG step), frt_cuda_sample at
 *     temperature 0 (argmax, one RNG step), flat / peaked / tied logits,
 *     top-k and top-p extremes, and a captured graph replayed while the
 *     temperature changes in device memory;
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT (before any device
 *     call, so they also run without a GPU).
 * Prints a table: kernel, rel err, tolerance. Exits 77 (skipped) without a
 * CUDA device, after the argument checks.
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

#define FRT_TEST_CUDA_START_N
#include "frt_test_cuda.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define DECODE_SPLIT 128 /* as qwen35_cuda.c */

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness (the rest: frt_test_cuda.h) ---------------------------- */

static double tol_of(frt_cuda_dtype dt) { return dt == BF16 ? TOL_BF16 : TOL_F32; }

/* Event timing of `iters` calls of fn(user) on the stream, in microseconds. */
typedef int (*launch_fn)(void *user);

static double time_us(launch_fn fn, void *user, int iters)
{
    frt_event *e0 = NULL, *e1 = NULL;
    must(frt_event_create(g_ctx, &e0), "event");
    must(frt_event_create(g_ctx, &e1), "event");
    CHECK_OK(fn(user)); /* warm-up */
    must(frt_event_record(e0, g_st), "event record");
    for (int i = 0; i < iters; i++) CHECK_OK(fn(user));
    must(frt_event_record(e1, g_st), "event record");
    must(frt_event_sync(e1), "event sync");
    float ms = 0.0f;
    must(frt_event_elapsed_ms(e0, e1, &ms), "elapsed");
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    return 1000.0 * ms / iters;
}

/* ---- flash-decoding attention --------------------------------------------- */

/* One KV cache [max_seq, nkv, hd] (bf16 on the device, widened on the host)
 * shared by the cases of one head_dim. */
typedef struct att_cache {
    int max_seq, nkv, hd;
    float *kf, *vf;
    dbuf kc, vc;
} att_cache;

static att_cache cache_make(int max_seq, int nkv, int hd)
{
    att_cache c = {max_seq, nkv, hd, NULL, NULL, {0}, {0}};
    const size_t sz = (size_t)max_seq * nkv * hd;
    c.kf = frand(sz, -1, 1);
    c.vf = frand(sz, -1, 1);
    round_bf16(c.kf, sz);
    round_bf16(c.vf, sz);
    c.kc = dalloc(sz * 2);
    c.vc = dalloc(sz * 2);
    dput_as(c.kc, 0, c.kf, sz, BF16);
    dput_as(c.vc, 0, c.vf, sz, BF16);
    return c;
}

static void cache_free(att_cache *c)
{
    free(c->kf);
    free(c->vf);
    dfree(&c->kc);
    dfree(&c->vc);
}

typedef struct att_call {
    const att_cache *c;
    int nh, max_n, split;
    frt_cuda_dtype qdt, odt;
    dbuf q, out, ws;
} att_call;

static int att_launch(void *user)
{
    att_call *a = user;
    return frt_cuda_attention(g_cs, a->out.p, a->odt, a->q.p, a->qdt, a->c->kc.p, a->c->vc.p,
                              d_start_p(), d_n_p(), a->max_n, a->c->max_seq, a->nh, a->c->nkv,
                              a->c->hd, 1.0f / sqrtf((float)a->c->hd), a->split, a->ws.p,
                              a->ws.bytes);
}

/* One configuration at each context: the last of n tokens sees ctx keys
 * (start = ctx - n). timing: also the time per call at each context. */
static void attention_cases(const att_cache *c, int nh, int max_n, int split, frt_cuda_dtype qdt,
                            frt_cuda_dtype odt, const int *ctxs, int n_ctx, int timing)
{
    att_call a = {c, nh, max_n, split, qdt, odt, {0}, {0}, {0}};
    const size_t qrow = (size_t)nh * c->hd, qsz = (size_t)max_n * qrow;
    float *q = frand(qsz, -2, 2);
    if (qdt == BF16) round_bf16(q, qsz);
    a.q = dalloc(qsz * 4);
    a.out = dalloc(qsz * 4);
    a.ws = dalloc(frt_cuda_attention_workspace_bytes(max_n, c->max_seq, nh, c->hd, split));
    dput_as(a.q, 0, q, qsz, qdt);
    float *ref = fnew(qsz), *got = fnew(qsz);
    for (int i = 0; i < n_ctx; i++) {
        const int ctx = ctxs[i];
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: n = max_n (or ctx); pass 1: n = max_n - 1 (rows past n untouched) */
            int n = max_n < ctx ? max_n : ctx;
            if (pass == 1) {
                if (n < 2) continue;
                n--;
            }
            const int start = ctx - n;
            dsentinel(a.out);
            set_dyn(start, n);
            CHECK_OK(att_launch(&a));
            dget_as(a.out, 0, got, (size_t)n * qrow, odt);
            frt_cpu_attention(ref, q, c->kf, c->vf, n, start, nh, c->nkv, c->hd,
                              1.0f / sqrtf((float)c->hd));
            char name[160];
            snprintf(name, sizeof name, "attention hd %d h %d/%d %s->%s split %d ctx %d n %d/%d",
                     c->hd, nh, c->nkv, dtn(qdt), dtn(odt), split, ctx, n, max_n);
            report(name, frt_test_rel_err(got, ref, (size_t)n * qrow), tol_of(odt));
            CHECK(untouched(a.out, (size_t)n * qrow * dsize(odt),
                            (size_t)(max_n - n) * qrow * dsize(odt)));
        }
        if (timing) {
            const int n = max_n < ctx ? max_n : ctx;
            set_dyn(ctx - n, n);
            void *b0 = snap(a.out, qsz * dsize(odt));
            const double us = time_us(att_launch, &a, 20);
            void *b1 = snap(a.out, qsz * dsize(odt));
            char name[160];
            snprintf(name, sizeof name, "attention determinism, ctx %d n %d (21 runs)", ctx, n);
            report_same(name, b0, b1, qsz * dsize(odt));
            const double bytes = (double)ctx * c->nkv * c->hd * 2 * 2;
            printf("  %-62s %7.1f us  %6.0f GB/s of K+V (HBM ~4800)\n", "  time per call", us,
                   bytes / us * 1e-3);
            free(b0);
            free(b1);
        }
    }
    dfree(&a.q);
    dfree(&a.out);
    dfree(&a.ws);
    free(q);
    free(ref);
    free(got);
}

static void test_attention_decode(void)
{
    { /* the Qwen3.5 shape: head_dim 256, 4 KV heads, group 4 (9B) and 6 (27B) */
        att_cache c = cache_make(32768, 4, 256);
        const int ctxs[4] = {1, 300, 8192, 32768};
        attention_cases(&c, 16, 1, DECODE_SPLIT, F32, F32, ctxs, 4, 1);
        attention_cases(&c, 16, 4, DECODE_SPLIT, F32, F32, ctxs, 4, 0);
        attention_cases(&c, 24, 1, DECODE_SPLIT, F32, F32, ctxs, 4, 1);
        attention_cases(&c, 24, 4, DECODE_SPLIT, F32, F32, ctxs, 4, 0);
        const int ctx2[2] = {129, 4000};
        attention_cases(&c, 16, 1, DECODE_SPLIT, BF16, BF16, ctx2, 2, 0);
        attention_cases(&c, 4, 3, 256, F32, F32, ctx2, 2, 0); /* group 1, 3 tokens */
        cache_free(&c);
    }
    { /* head_dim 128 and 64, odd splits (not multiples of the 32-key tile) */
        att_cache c = cache_make(2000, 2, 128);
        const int ctxs[3] = {1, 33, 1999};
        attention_cases(&c, 4, 1, 100, F32, F32, ctxs, 3, 0);
        attention_cases(&c, 16, 2, 96, F32, BF16, ctxs, 3, 0); /* group 8 */
        cache_free(&c);
        att_cache c2 = cache_make(700, 3, 64);
        const int ctx3[2] = {64, 700};
        attention_cases(&c2, 6, 4, 128, BF16, F32, ctx3, 2, 0); /* group 2 */
        cache_free(&c2);
    }
}

/* ---- the gated delta rule (recurrent) ------------------------------------- */

typedef struct gdr_case {
    int n, max_n, nk, nv, dk, dv;
    frt_cuda_dtype in_dt, out_dt;
} gdr_case;

static void gdr_run(gdr_case c, int determinism)
{
    const size_t nq = (size_t)c.max_n * c.nk * c.dk, nvv = (size_t)c.max_n * c.nv * c.dv;
    const size_t ns = (size_t)c.nv * c.dk * c.dv, ng = (size_t)c.max_n * c.nv;
    float *q = frand(nq, -1, 1), *k = frand(nq, -1, 1), *v = frand(nvv, -2, 2);
    frt_cpu_l2norm(q, c.max_n * c.nk, c.dk, 1e-6f);
    frt_cpu_l2norm(k, c.max_n * c.nk, c.dk, 1e-6f);
    if (c.in_dt == BF16) {
        round_bf16(q, nq);
        round_bf16(k, nq);
        round_bf16(v, nvv);
    }
    float *g = fnew(ng), *beta = fnew(ng);
    for (size_t i = 0; i < ng; i++) {
        g[i] = -expf(frt_test_rand(-4.5f, 2.7f)) * log1pf(expf(frt_test_rand(-4.0f, 1.0f)));
        beta[i] = 1.0f / (1.0f + expf(-frt_test_rand(-3, 3)));
    }
    float *state0 = frand(ns, -1, 1);
    dbuf dq = dalloc(nq * 4), dk = dalloc(nq * 4), dv = dalloc(nvv * 4), dg = dalloc(ng * 4),
         db = dalloc(ng * 4), ds = dalloc(ns * 4), dout = dalloc(nvv * 4);
    dput_as(dq, 0, q, nq, c.in_dt);
    dput_as(dk, 0, k, nq, c.in_dt);
    dput_as(dv, 0, v, nvv, c.in_dt);
    dput(dg, 0, g, ng * 4);
    dput(db, 0, beta, ng * 4);
    dput(ds, 0, state0, ns * 4);
    dsentinel(dout);
    set_dyn(0, c.n);
    CHECK_OK(frt_cuda_gdr_recurrent(g_cs, dout.p, c.out_dt, ds.p, dq.p, dk.p, dv.p, c.in_dt, dg.p,
                                    db.p, d_n_p(), c.max_n, c.nk, c.nv, c.dk, c.dv));
    const size_t no = (size_t)c.n * c.nv * c.dv;
    float *out_ref = fnew(no), *st_ref = fdup(state0, ns), *got = fnew(ns > no ? ns : no);
    frt_cpu_gdr_recurrent(out_ref, st_ref, q, k, v, g, beta, c.n, c.nk, c.nv, c.dk, c.dv);
    dget_as(dout, 0, got, no, c.out_dt);
    char name[160];
    snprintf(name, sizeof name, "gdr_recurrent out %s->%s n %d/%d k%d v%d dk %d dv %d",
             dtn(c.in_dt), dtn(c.out_dt), c.n, c.max_n, c.nk, c.nv, c.dk, c.dv);
    report(name, frt_test_rel_err(got, out_ref, no), tol_of(c.out_dt));
    CHECK(untouched(dout, no * dsize(c.out_dt),
                    (size_t)(c.max_n - c.n) * c.nv * c.dv * dsize(c.out_dt)));
    dget(ds, 0, got, ns * 4);
    snprintf(name, sizeof name, "gdr_recurrent state n %d k%d v%d dk %d dv %d", c.n, c.nk, c.nv,
             c.dk, c.dv);
    report(name, frt_test_rel_err(got, st_ref, ns), TOL_F32);

    if (determinism) {
        void *o1 = snap(dout, no * dsize(c.out_dt)), *s1 = snap(ds, ns * 4);
        for (int r = 0; r < 2; r++) {
            dput(ds, 0, state0, ns * 4);
            CHECK_OK(frt_cuda_gdr_recurrent(g_cs, dout.p, c.out_dt, ds.p, dq.p, dk.p, dv.p,
                                            c.in_dt, dg.p, db.p, d_n_p(), c.max_n, c.nk, c.nv,
                                            c.dk, c.dv));
        }
        void *o2 = snap(dout, no * dsize(c.out_dt)), *s2 = snap(ds, ns * 4);
        report_same("gdr_recurrent determinism (3 runs, out)", o1, o2, no * dsize(c.out_dt));
        report_same("gdr_recurrent determinism (3 runs, state)", s1, s2, ns * 4);
        /* the same n tokens one launch each (pointers advanced by hand) */
        dput(ds, 0, state0, ns * 4);
        const size_t qs = (size_t)c.nk * c.dk * dsize(c.in_dt);
        const size_t vs = (size_t)c.nv * c.dv * dsize(c.in_dt);
        const size_t os = (size_t)c.nv * c.dv * dsize(c.out_dt);
        for (int t = 0; t < c.n; t++)
            CHECK_OK(frt_cuda_gdr_recurrent(
                g_cs, (char *)dout.p + t * os, c.out_dt, ds.p, (char *)dq.p + t * qs,
                (char *)dk.p + t * qs, (char *)dv.p + t * vs, c.in_dt, (float *)dg.p + t * c.nv,
                (float *)db.p + t * c.nv, NULL, 1, c.nk, c.nv, c.dk, c.dv));
        void *o3 = snap(dout, no * dsize(c.out_dt)), *s3 = snap(ds, ns * 4);
        report_same("gdr_recurrent n tokens == n launches of 1 (out)", o1, o3, no * dsize(c.out_dt));
        report_same("gdr_recurrent n tokens == n launches of 1 (state)", s1, s3, ns * 4);
        free(o1);
        free(o2);
        free(o3);
        free(s1);
        free(s2);
        free(s3);
    }
    dfree(&dq);
    dfree(&dk);
    dfree(&dv);
    dfree(&dg);
    dfree(&db);
    dfree(&ds);
    dfree(&dout);
    free(q);
    free(k);
    free(v);
    free(g);
    free(beta);
    free(state0);
    free(out_ref);
    free(st_ref);
    free(got);
}

typedef struct gdr_timing {
    dbuf q, k, v, g, b, s, out;
} gdr_timing;

static int gdr_time_launch(void *user)
{
    gdr_timing *x = user;
    return frt_cuda_gdr_recurrent(g_cs, x->out.p, F32, x->s.p, x->q.p, x->k.p, x->v.p, F32, x->g.p,
                                  x->b.p, NULL, 1, 16, 32, 128, 128);
}

static void test_gdr_decode(void)
{
    const gdr_case cases[6] = {
        {1, 1, 16, 32, 128, 128, F32, F32},  /* Qwen3.5-9B decode */
        {3, 4, 16, 32, 128, 128, BF16, F32}, /* several tokens, rows past n untouched */
        {2, 2, 16, 48, 128, 128, F32, BF16}, /* 27B value heads, bf16 out */
        {2, 3, 2, 4, 100, 96, F32, F32},     /* dk not a multiple of 8, dv of 32 */
        {1, 1, 2, 2, 256, 64, F32, F32},     /* dk 256 */
        {4, 4, 1, 3, 8, 40, F32, F32},       /* tiny dk: trailing warps without rows */
    };
    for (int i = 0; i < 6; i++) gdr_run(cases[i], i == 0 || i == 1);
    /* time per call at the 9B shape (state 2 MiB read + 2 MiB written) */
    gdr_timing x;
    x.q = dalloc(16 * 128 * 4);
    x.k = dalloc(16 * 128 * 4);
    x.v = dalloc(32 * 128 * 4);
    x.g = dalloc(32 * 4);
    x.b = dalloc(32 * 4);
    x.s = dalloc((size_t)32 * 128 * 128 * 4);
    x.out = dalloc(32 * 128 * 4);
    float *h = frand((size_t)32 * 128 * 128, -0.01f, 0.01f);
    dput(x.q, 0, h, 16 * 128 * 4);
    dput(x.k, 0, h, 16 * 128 * 4);
    dput(x.v, 0, h, 32 * 128 * 4);
    float gb[32];
    for (int i = 0; i < 32; i++) gb[i] = -0.01f;
    dput(x.g, 0, gb, sizeof gb);
    dput(x.b, 0, gb, sizeof gb);
    dput(x.s, 0, h, (size_t)32 * 128 * 128 * 4);
    const double us = time_us(gdr_time_launch, &x, 50);
    printf("  %-62s %7.1f us  %6.0f GB/s of state\n", "gdr_recurrent 32 x 128 x 128, one token", us,
           4.0 * 32 * 128 * 128 * 2 / us * 1e-3);
    free(h);
    dfree(&x.q);
    dfree(&x.k);
    dfree(&x.v);
    dfree(&x.g);
    dfree(&x.b);
    dfree(&x.s);
    dfree(&x.out);
}

/* ---- norms, rope, conv1d ------------------------------------------------- */

static void rmsnorm_run(int max_n, int n, int heads, int dim, int zc, frt_cuda_dtype xdt,
                        frt_cuda_dtype odt, int misalign)
{
    const size_t tot = (size_t)max_n * heads * dim, val = (size_t)n * heads * dim;
    float *x = frand(tot, -2, 2), *w = frand((size_t)dim, -0.5f, 0.5f);
    if (xdt == BF16) round_bf16(x, tot);
    float *ref = fnew(tot), *got = fnew(tot);
    dbuf dx = dalloc(tot * 4 + 16), dw = dalloc((size_t)dim * 4), dout = dalloc(tot * 4 + 16);
    dput(dw, 0, w, (size_t)dim * 4);
    frt_cpu_rmsnorm(ref, x, w, n * heads, dim, 1e-6f, zc);
    set_dyn(0, n);
    void *a_out = NULL;
    for (int m = 0; m <= misalign; m++) {
        /* m 1: x and out one element past an aligned address (scalar loads) */
        const size_t xoff = m ? dsize(xdt) : 0, ooff = m ? dsize(odt) : 0;
        dsentinel(dout);
        dput_as(dx, xoff / dsize(xdt), x, tot, xdt);
        CHECK_OK(frt_cuda_rmsnorm(g_cs, (char *)dout.p + ooff, odt, (char *)dx.p + xoff, xdt, dw.p,
                                  d_n_p(), max_n, heads, dim, 1e-6f, zc));
        dget_as(dout, ooff / dsize(odt), got, val, odt);
        char name[160];
        snprintf(name, sizeof name, "rmsnorm %s->%s %d x %d x %d zc %d n %d%s", dtn(xdt), dtn(odt),
                 max_n, heads, dim, zc, n, m ? " misaligned" : "");
        report(name, frt_test_rel_err(got, ref, val), tol_of(odt));
        CHECK(untouched(dout, ooff + val * dsize(odt), (tot - val) * dsize(odt)));
        if (m == 0) {
            a_out = xzalloc(val * dsize(odt));
            dget(dout, 0, a_out, val * dsize(odt));
        } else {
            void *b_out = xzalloc(val * dsize(odt));
            dget(dout, ooff, b_out, val * dsize(odt));
            report_same("rmsnorm misaligned (scalar loads) == aligned", a_out, b_out,
                        val * dsize(odt));
            free(b_out);
        }
    }
    free(a_out);
    dfree(&dx);
    dfree(&dw);
    dfree(&dout);
    free(x);
    free(w);
    free(ref);
    free(got);
}

static void add_rmsnorm_run(int max_n, int n, int dim, frt_cuda_dtype ddt, frt_cuda_dtype odt)
{
    const size_t tot = (size_t)max_n * dim, val = (size_t)n * dim;
    float *r = frand(tot, -3, 3), *dl = frand(tot, -1, 1), *w = frand((size_t)dim, -0.3f, 0.3f);
    dbuf dr = dalloc(tot * 4), dd = dalloc(tot * 4), dw = dalloc((size_t)dim * 4),
         dout = dalloc(tot * 4);
    dprep(dd, dl, tot, ddt);
    dput(dw, 0, w, (size_t)dim * 4);
    float *r_ref = fdup(r, tot), *h_ref = fnew(tot), *got = fnew(tot);
    frt_cpu_add(r_ref, dl, (int)val);
    frt_cpu_rmsnorm(h_ref, r_ref, w, n, dim, 1e-6f, 1);
    set_dyn(0, n);
    void *first = NULL;
    for (int run = 0; run < 3; run++) {
        dput(dr, 0, r, tot * 4);
        dsentinel(dout);
        CHECK_OK(frt_cuda_add_rmsnorm(g_cs, dr.p, dd.p, ddt, dout.p, odt, dw.p, d_n_p(), max_n,
                                      dim, 1e-6f, 1));
        if (run == 0) {
            first = snap(dout, tot * dsize(odt));
            continue;
        }
        if (run == 2) {
            void *b = snap(dout, tot * dsize(odt));
            report_same("add_rmsnorm determinism (3 runs)", first, b, tot * dsize(odt));
            free(b);
        }
    }
    dget(dr, 0, got, tot * 4);
    char name[160];
    snprintf(name, sizeof name, "add_rmsnorm residual (delta %s) %d x %d n %d", dtn(ddt), max_n,
             dim, n);
    report(name, frt_test_rel_err(got, r_ref, val), 0.0);
    CHECK(memcmp(got + val, r + val, (tot - val) * 4) == 0);
    dget_as(dout, 0, got, val, odt);
    snprintf(name, sizeof name, "add_rmsnorm out %s %d x %d n %d", dtn(odt), max_n, dim, n);
    report(name, frt_test_rel_err(got, h_ref, val), tol_of(odt));
    CHECK(untouched(dout, val * dsize(odt), (tot - val) * dsize(odt)));
    free(first);
    dfree(&dr);
    dfree(&dd);
    dfree(&dw);
    dfree(&dout);
    free(r);
    free(dl);
    free(w);
    free(r_ref);
    free(h_ref);
    free(got);
}

static void gated_run(int max_n, int n, int heads, int dim, frt_cuda_dtype xdt,
                      frt_cuda_dtype odt)
{
    const size_t tot = (size_t)max_n * heads * dim, val = (size_t)n * heads * dim;
    float *x = frand(tot, -2, 2), *z = frand(tot, -4, 4), *w = frand((size_t)dim, 0.5f, 1.5f);
    dbuf dx = dalloc(tot * 4), dz = dalloc(tot * 4), dw = dalloc((size_t)dim * 4),
         dout = dalloc(tot * 4);
    dprep(dx, x, tot, xdt);
    dprep(dz, z, tot, xdt);
    dput(dw, 0, w, (size_t)dim * 4);
    float *ref = fnew(tot), *got = fnew(tot);
    frt_cpu_rmsnorm_gated(ref, x, z, w, n * heads, dim, 1e-6f);
    dsentinel(dout);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_rmsnorm_gated(g_cs, dout.p, odt, dx.p, xdt, dz.p, xdt, dw.p, d_n_p(), max_n,
                                    heads, dim, 1e-6f));
    dget_as(dout, 0, got, val, odt);
    char name[160];
    snprintf(name, sizeof name, "rmsnorm_gated %s->%s %d x %d x %d n %d", dtn(xdt), dtn(odt),
             max_n, heads, dim, n);
    report(name, frt_test_rel_err(got, ref, val), tol_of(odt));
    CHECK(untouched(dout, val * dsize(odt), (tot - val) * dsize(odt)));
    dfree(&dx);
    dfree(&dz);
    dfree(&dw);
    dfree(&dout);
    free(x);
    free(z);
    free(w);
    free(ref);
    free(got);
}

static void l2norm_run(int max_n, int n, int heads, int dim, frt_cuda_dtype dt)
{
    const size_t tot = (size_t)max_n * heads * dim, val = (size_t)n * heads * dim;
    float *x = frand(tot, -1, 1);
    dbuf dx = dalloc(tot * 4);
    dprep(dx, x, tot, dt);
    float *ref = fdup(x, tot), *got = fnew(tot);
    frt_cpu_l2norm(ref, n * heads, dim, 1e-6f);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_l2norm(g_cs, dx.p, dt, d_n_p(), max_n, heads, dim, 1e-6f));
    dget_as(dx, 0, got, tot, dt);
    char name[160];
    snprintf(name, sizeof name, "l2norm %s %d x %d x %d n %d", dtn(dt), max_n, heads, dim, n);
    report(name, frt_test_rel_err(got, ref, val), tol_of(dt));
    CHECK(memcmp(got + val, x + val, (tot - val) * 4) == 0);
    dfree(&dx);
    free(x);
    free(ref);
    free(got);
}

typedef struct norm_timing {
    dbuf r, d, w, out;
} norm_timing;

static int norm_time_launch(void *user)
{
    norm_timing *x = user;
    return frt_cuda_add_rmsnorm(g_cs, x->r.p, x->d.p, F32, x->out.p, BF16, x->w.p, NULL, 1, 4096,
                                1e-6f, 1);
}

static void test_norms_decode(void)
{
    add_rmsnorm_run(1, 1, 4096, F32, BF16); /* decode: post-attention / next input norm */
    add_rmsnorm_run(4, 1, 4096, F32, F32);  /* the final norm (f32 out), rows past n */
    add_rmsnorm_run(3, 2, 5120, BF16, BF16);
    add_rmsnorm_run(2, 2, 1001, F32, F32); /* dim % 4 != 0 */
    rmsnorm_run(1, 1, 1, 4096, 1, F32, BF16, 1);
    rmsnorm_run(4, 1, 16, 256, 1, F32, F32, 1); /* q_norm */
    rmsnorm_run(1, 1, 4, 256, 1, F32, F32, 0);  /* k_norm */
    rmsnorm_run(256, 200, 1, 4096, 1, F32, BF16, 0);
    rmsnorm_run(3, 3, 2, 13, 0, BF16, F32, 0);
    rmsnorm_run(2, 1, 1, 20000, 1, F32, F32, 0); /* wider than the register path */
    gated_run(1, 1, 32, 128, F32, BF16);
    gated_run(3, 2, 48, 128, F32, F32);
    gated_run(2, 2, 3, 100, BF16, BF16);
    l2norm_run(1, 1, 16, 128, F32);
    l2norm_run(5, 3, 16, 128, BF16);
    l2norm_run(2, 2, 2, 4096, F32);
    norm_timing x;
    x.r = dalloc(4096 * 4);
    x.d = dalloc(4096 * 4);
    x.w = dalloc(4096 * 4);
    x.out = dalloc(4096 * 2);
    float *h = frand(4096, -0.01f, 0.01f);
    dput(x.r, 0, h, 4096 * 4);
    dput(x.d, 0, h, 4096 * 4);
    dput(x.w, 0, h, 4096 * 4);
    const double us = time_us(norm_time_launch, &x, 100);
    printf("  %-62s %7.1f us\n", "add_rmsnorm one row of 4096 (f32 + f32 -> bf16)", us);
    free(h);
    dfree(&x.r);
    dfree(&x.d);
    dfree(&x.w);
    dfree(&x.out);
}

static void test_rope_conv_decode(void)
{
    { /* rope: 16 q heads of 256, rot 64, one token at 30000; 24 heads, 4 tokens */
        const int heads[2] = {16, 24}, ns[2] = {1, 4};
        for (int c = 0; c < 2; c++) {
            const int nh = heads[c], n = ns[c], hd = 256, rot = 64;
            const size_t tot = (size_t)n * nh * hd;
            float *x = frand(tot, -2, 2), *ref = fdup(x, tot), *got = fnew(tot);
            dbuf dx = dalloc(tot * 4);
            dput(dx, 0, x, tot * 4);
            set_dyn(30000, n);
            CHECK_OK(frt_cuda_rope(g_cs, dx.p, F32, d_start_p(), d_n_p(), n, nh, hd, rot, 1e7f));
            int32_t pos[4];
            for (int t = 0; t < n; t++) pos[t] = 30000 + t;
            frt_cpu_rope(ref, n, nh, hd, rot, pos, 1e7f);
            dget(dx, 0, got, tot * 4);
            char name[128];
            snprintf(name, sizeof name, "rope %d heads x 256, rot 64, %d token(s) at 30000", nh, n);
            report(name, frt_test_rel_err(got, ref, tot), TOL_F32);
            dfree(&dx);
            free(x);
            free(ref);
            free(got);
        }
    }
    { /* conv1d: kernel 4, 8192 channels (q | k | v of 9B), n 1 and 3 of 4 */
        const int ch = 8192, K = 4, ns[2] = {1, 3};
        for (int c = 0; c < 2; c++) {
            const int n = ns[c], max_n = 4;
            float *x = frand((size_t)max_n * ch, -2, 2), *w = frand((size_t)ch * K, -1, 1);
            float *st = frand((size_t)ch * (K - 1), -1, 1);
            float *st_ref = fdup(st, (size_t)ch * (K - 1));
            float *ref = fnew((size_t)max_n * ch), *got = fnew((size_t)max_n * ch);
            dbuf dx = dalloc((size_t)max_n * ch * 4), dw = dalloc((size_t)ch * K * 4),
                 ds = dalloc((size_t)ch * (K - 1) * 4), dout = dalloc((size_t)max_n * ch * 4);
            dput(dx, 0, x, (size_t)max_n * ch * 4);
            dput(dw, 0, w, (size_t)ch * K * 4);
            dput(ds, 0, st, (size_t)ch * (K - 1) * 4);
            dsentinel(dout);
            set_dyn(0, n);
            CHECK_OK(frt_cuda_conv1d_causal(g_cs, dout.p, F32, dx.p, F32, ds.p, dw.p, d_n_p(),
                                            max_n, ch, K));
            frt_cpu_conv1d_causal(ref, x, st_ref, w, n, ch, K);
            dget(dout, 0, got, (size_t)n * ch * 4);
            char name[128];
            snprintf(name, sizeof name, "conv1d kernel 4, 8192 channels, n %d/%d", n, max_n);
            report(name, frt_test_rel_err(got, ref, (size_t)n * ch), TOL_F32);
            CHECK(untouched(dout, (size_t)n * ch * 4, (size_t)(max_n - n) * ch * 4));
            dget(ds, 0, got, (size_t)ch * (K - 1) * 4);
            snprintf(name, sizeof name, "conv1d state after n %d (exact)", n);
            report(name, frt_test_rel_err(got, st_ref, (size_t)ch * (K - 1)), 0.0);
            dfree(&dx);
            dfree(&dw);
            dfree(&ds);
            dfree(&dout);
            free(x);
            free(w);
            free(st);
            free(st_ref);
            free(ref);
            free(got);
        }
    }
}

/* ---- sampling --------------------------------------------------------------- */

#define VOCAB 248320

typedef struct smp_dev {
    dbuf logits, tok, params, rng, ws;
    int n;
} smp_dev;

static smp_dev smp_alloc(int n)
{
    smp_dev s;
    size_t wsb = 0;
    CHECK_OK(frt_cuda_sample_workspace_bytes(n, &wsb));
    s.logits = dalloc((size_t)n * 4);
    s.tok = dalloc(16);
    s.params = dalloc(sizeof(frt_cuda_sampler_params));
    s.rng = dalloc(8);
    s.ws = dalloc(wsb);
    s.n = n;
    return s;
}

static void smp_free(smp_dev *s)
{
    dfree(&s->logits);
    dfree(&s->tok);
    dfree(&s->params);
    dfree(&s->rng);
    dfree(&s->ws);
}

/* One call (token mode: frt_cuda_sample_token; else frt_cuda_sample) with
 * the RNG at *host_rng; returns the token and checks the RNG against what
 * the call should have done (one step, or none for a greedy token call). */
static int smp_call(smp_dev *s, const frt_cuda_sampler_params *p, int token_mode,
                    uint64_t *host_rng, int *rng_bad)
{
    dput(s->params, 0, p, sizeof *p);
    dput(s->rng, 0, host_rng, 8);
    int32_t tok = -7;
    dput(s->tok, 0, &tok, 4);
    if (token_mode)
        CHECK_OK(frt_cuda_sample_token(g_cs, s->tok.p, s->logits.p, s->n, s->params.p, s->rng.p,
                                       s->ws.p, s->ws.bytes));
    else
        CHECK_OK(frt_cuda_sample(g_cs, s->tok.p, s->logits.p, s->n, s->params.p, s->rng.p,
                                 s->ws.p, s->ws.bytes));
    dget(s->tok, 0, &tok, 4);
    uint64_t dev_rng = 0;
    dget(s->rng, 0, &dev_rng, 8);
    const int steps = !(token_mode && p->temperature <= 0.0f);
    if (steps) frt_rng_next(host_rng);
    *rng_bad += dev_rng != *host_rng;
    return tok;
}

/* What the decode step must pick (task_sample of qwen35_cpu.c), with the
 * host RNG before the call. */
static int smp_want(const float *x, int n, const frt_cuda_sampler_params *p, int token_mode,
                    uint64_t rng_before, float *scratch)
{
    if (token_mode && p->temperature <= 0.0f) return frt_cpu_argmax(x, n);
    const float u = frt_rng_uniform(&rng_before);
    const int t = frt_cpu_sample(x, n, p->temperature, p->top_k, p->top_p, u, scratch);
    return t < 0 ? -1 : t;
}

typedef struct smp_timing {
    smp_dev *s;
} smp_timing;

static int smp_time_launch(void *user)
{
    smp_dev *s = ((smp_timing *)user)->s;
    return frt_cuda_sample_token(g_cs, s->tok.p, s->logits.p, s->n, s->params.p, s->rng.p, s->ws.p,
                                 s->ws.bytes);
}

static void test_sample_decode(void)
{
    smp_dev s = smp_alloc(VOCAB);
    float *x = fnew(VOCAB), *scratch = fnew(FRT_CPU_SAMPLE_SCRATCH(VOCAB));
    const frt_cuda_sampler_params ps[12] = {
        {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f},
        {.temperature = -1.0f, .top_k = 50, .top_p = 0.5f},
        {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f},
        {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f},
        {.temperature = 1.3f, .top_k = 0, .top_p = 0.9f},
        {.temperature = 0.6f, .top_k = 1, .top_p = 1.0f},
        {.temperature = 1.0f, .top_k = 300000, .top_p = 0.95f},
        {.temperature = 0.8f, .top_k = 0, .top_p = 1e-6f},
        {.temperature = 0.05f, .top_k = 40, .top_p = 0.9f},
        {.temperature = 2.0f, .top_k = 5000, .top_p = 1.0f},
        {.temperature = NAN, .top_k = 0, .top_p = 1.0f},
        {.temperature = 0.9f, .top_k = -1, .top_p = 1.0f},
    };
    const char *kinds[4] = {"realistic", "flat", "peaked", "tied"};
    int mism = 0, total = 0, rng_bad = 0;
    for (int kind = 0; kind < 4; kind++) {
        for (int i = 0; i < VOCAB; i++) {
            switch (kind) {
            case 0: x[i] = frt_test_rand(-12, 8) + (i % 997 == 0 ? 9.0f : 0.0f); break;
            case 1: x[i] = frt_test_rand(-1, 1); break;
            case 2: x[i] = frt_test_rand(-30, -20); break;
            default: x[i] = (float)(int)frt_test_rand(-6, 4); break; /* many ties */
            }
        }
        if (kind == 2) x[VOCAB / 3] = 40.0f; /* one token holds the mass */
        dput(s.logits, 0, x, (size_t)VOCAB * 4);
        for (int pi = 0; pi < 12; pi++) {
            for (int mode = 0; mode < 2; mode++) {
                for (int draw = 0; draw < 3; draw++) {
                    uint64_t host = 0xC0FFEEull + (uint64_t)(kind * 131 + pi * 7 + draw);
                    const uint64_t before = host;
                    const int got = smp_call(&s, &ps[pi], mode, &host, &rng_bad);
                    const int want = smp_want(x, VOCAB, &ps[pi], mode, before, scratch);
                    total++;
                    if (got != want) {
                        mism++;
                        fprintf(stderr, "sample %s params %d mode %d draw %d: got %d want %d\n",
                                kinds[kind], pi, mode, draw, got, want);
                    }
                }
            }
        }
    }
    char name[128];
    snprintf(name, sizeof name, "sample / sample_token == CPU, %d calls, mismatches", total);
    report(name, (double)mism, 0.0);
    report("sample RNG: one step, none for a greedy sample_token, mismatches", (double)rng_bad,
           0.0);

    /* timing: greedy and sampled sample_token over the vocabulary */
    for (int i = 0; i < VOCAB; i++) x[i] = frt_test_rand(-12, 8);
    dput(s.logits, 0, x, (size_t)VOCAB * 4);
    const frt_cuda_sampler_params tp[3] = {
        {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f},
        {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f},
        {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f},
    };
    const char *tn[3] = {"sample_token greedy (T 0), 248320 logits",
                         "sample_token T 0.7 top-k 20 top-p 0.8",
                         "sample_token T 1 (no filter)"};
    smp_timing st = {&s};
    for (int i = 0; i < 3; i++) {
        dput(s.params, 0, &tp[i], sizeof tp[i]);
        const double us = time_us(smp_time_launch, &st, 20);
        printf("  %-62s %7.1f us\n", tn[i], us);
    }
    free(x);
    free(scratch);
    smp_free(&s);
}

/* Graph: one capture of sample_token, replayed while the temperature in
 * device memory switches between greedy and sampled. */
static int record_sample(frt_stream *stream, void *user)
{
    smp_dev *s = user;
    FRT_TEST_TRY_(frt_cuda_sample_token(frt_stream_native(stream), s->tok.p, s->logits.p, s->n,
                                        s->params.p, s->rng.p, s->ws.p, s->ws.bytes));
    return 0;
}

static void test_sample_graph(void)
{
    const int n = 50000;
    smp_dev s = smp_alloc(n);
    float *x = frand(n, -6, 6), *scratch = fnew(FRT_CPU_SAMPLE_SCRATCH(n));
    dput(s.logits, 0, x, (size_t)n * 4);
    frt_cuda_sampler_params p = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f};
    dput(s.params, 0, &p, sizeof p);
    uint64_t host = 77;
    dput(s.rng, 0, &host, 8);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "sample", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 3, g_st, record_sample, &s));
    const float temps[5] = {0.0f, 0.8f, 0.0f, 1.1f, -2.0f};
    int bad = 0;
    for (int i = 0; i < 5 && graph; i++) {
        p.temperature = temps[i];
        p.top_k = i == 3 ? 100 : 0;
        dput(s.params, 0, &p, sizeof p);
        const uint64_t before = host;
        CHECK_OK(frt_graph_replay(graph, 3, g_st));
        sync_st();
        int32_t tok = -7;
        uint64_t dev_rng = 0;
        dget(s.tok, 0, &tok, 4);
        dget(s.rng, 0, &dev_rng, 8);
        const int want = smp_want(x, n, &p, 1, before, scratch);
        if (p.temperature > 0.0f) frt_rng_next(&host);
        bad += tok != want;
        bad += dev_rng != host;
    }
    report("graph sample_token replays (greedy <-> sampled), mismatches", (double)bad, 0.0);
    frt_graph_destroy(graph);
    free(x);
    free(scratch);
    smp_free(&s);
}

/* ---- bad arguments (no device needed) ----------------------------------------- */

static void test_bad_args(void)
{
    void *p = (void *)(uintptr_t)0x1000;
    int32_t *ip = (int32_t *)p;
    float *fp = (float *)p;
    uint16_t *hp = (uint16_t *)p;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    const frt_cuda_sampler_params *pp = (const frt_cuda_sampler_params *)p;
    /* sample_token: NULL params / rng / token, n out of range, short workspace */
    CHECK_STATUS(frt_cuda_sample_token(NULL, ip, fp, 100, NULL, (uint64_t *)p, p, 1 << 20), E);
    CHECK_STATUS(frt_cuda_sample_token(NULL, ip, fp, 100, pp, NULL, p, 1 << 20), E);
    CHECK_STATUS(frt_cuda_sample_token(NULL, NULL, fp, 100, pp, (uint64_t *)p, p, 1 << 20), E);
    CHECK_STATUS(frt_cuda_sample_token(NULL, ip, fp, 0, pp, (uint64_t *)p, p, 1 << 20), E);
    CHECK_STATUS(frt_cuda_sample_token(NULL, ip, fp, (1 << 24) + 1, pp, (uint64_t *)p, p, 1 << 30),
                 E);
    CHECK_STATUS(frt_cuda_sample_token(NULL, ip, fp, 100000, pp, (uint64_t *)p, p, 64), E);
    CHECK_STATUS(frt_cuda_sample(NULL, ip, fp, 100000, pp, (uint64_t *)p, p, 64), E);
    /* attention split form: short workspace, NULL workspace */
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, ip, ip, 1, 8192, 16,
                                    4, 256, 0.0625f, 128, p, 1024),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, ip, ip, 1, 8192, 16,
                                    4, 256, 0.0625f, 128, NULL, 1 << 30),
                 E);
    CHECK(frt_cuda_attention_workspace_bytes(1, 8192, 16, 256, 128) ==
          (size_t)64 * 16 * 258 * 4);
    /* gdr_recurrent: dk 0, dk 257, value heads not a multiple of key heads */
    CHECK_STATUS(frt_cuda_gdr_recurrent(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 1, 16, 32, 0,
                                        128),
                 E);
    CHECK_STATUS(frt_cuda_gdr_recurrent(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 1, 16, 32, 257,
                                        128),
                 E);
    CHECK_STATUS(frt_cuda_gdr_recurrent(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 1, 16, 40, 128,
                                        128),
                 E);
    /* norms: out aliasing, zero sizes, NULL weight */
    CHECK_STATUS(frt_cuda_add_rmsnorm(NULL, fp, p, F32, fp, BF16, fp, ip, 1, 4096, 1e-6f, 1), E);
    CHECK_STATUS(frt_cuda_add_rmsnorm(NULL, fp, (char *)p + 64, F32, (char *)p + 128, BF16, fp, ip,
                                      1, 0, 1e-6f, 1),
                 E);
    CHECK_STATUS(frt_cuda_rmsnorm(NULL, p, F32, p, F32, NULL, ip, 1, 1, 4096, 1e-6f, 1), E);
    CHECK_STATUS(frt_cuda_rmsnorm_gated(NULL, p, BF16, p, F32, p, F32, fp, ip, 1, 32, 128, 1e-6f),
                 E);
    CHECK_STATUS(frt_cuda_l2norm(NULL, p, F32, ip, 1, 16, 0, 1e-6f), E);
    /* max_n 0: nothing enqueued, valid without a device */
    CHECK_OK(
        frt_cuda_gdr_recurrent(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 0, 16, 32, 128, 128));
    CHECK_OK(frt_cuda_add_rmsnorm(NULL, fp, (char *)p + 64, F32, (char *)p + 128, BF16, fp, ip, 0,
                                  4096, 1e-6f, 1));
}

int main(void)
{
    frt_test_seed(20261207);
    printf("  %-62s %10s %8s\n", "kernel", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    g_dyn = dalloc(64);

    test_norms_decode();
    test_rope_conv_decode();
    test_gdr_decode();
    test_attention_decode();
    test_sample_decode();
    test_sample_graph();

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dyn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
