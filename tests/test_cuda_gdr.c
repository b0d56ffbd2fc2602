/*
 * test_cuda_gdr.c - the chunked gated delta rule on the GPU
 * (frt_cuda_gdr_chunked: the intra-chunk kernel and the state scan of
 * src/kernels/cuda/gdr_chunk.cu) against its CPU twin frt_cpu_gdr_chunked,
 * norm-wise ||gpu - cpu|| / ||cpu|| on random data (q, k L2-normalised,
 * decays from A in [0.01, 16], beta = sigmoid(U[-3, 3]), a random nonzero
 * starting state; bf16 inputs rounded the same way on the CPU side):
 *   - the Qwen3.5-9B shape (16 key heads, 32 value heads, dk = dv = 128)
 *     and the 27B shape (16 / 48), buckets of 256 tokens, chunk 64, three
 *     calls in sequence carrying the state; the tail chunk and d_n < max_n
 *     (odd lengths 1, 63, 65, 130, 200 in larger buckets); n_v_heads ==
 *     n_k_heads; dk / dv 32 and 64; odd dk, dv and chunk; bf16 in and out;
 *   - long runs carrying the state: 32 calls of 256 at the 9B shape (8k
 *     tokens) and 128 calls of 256 (32k tokens) at dk = dv = 128 with the
 *     fastest (A = 16) and slowest (A = 0.01) decays, each call against the
 *     twin, and out and state of selected heads against an fp64 recurrent
 *     reference (the exact result: the twin's own error is printed beside
 *     the GPU's, so "at the level of the twin" reads off the table; the
 *     error must not grow with the calls);
 *   - call splitting: 256 tokens in one call == 128 + 128 == 4 x 64 (bits);
 *   - determinism: the same launch three times (bits), and a workspace full
 *     of garbage gives the same bits (nothing stale is read);
 *   - d_n: one launch (same arguments) run with n = 200, 65, 1, 0, 256 from
 *     device memory; rows past n keep their sentinel bytes, n = 0 leaves the
 *     state untouched;
 *   - bad arguments (no device needed): NULL / short / misaligned workspace,
 *     chunk, heads, dk > 128 (unsupported), the workspace size formula.
 * Prints a table (case, rel err, tolerance) and the time per call at the
 * 9B and 27B shapes against the floors (fp32 FMA; the 3xTF32 tensor-core
 * work). Exits 77 without a CUDA device, after the argument checks.
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
#define FRT_TEST_CUDA_COUNT
#include "frt_test_cuda.h"

#include <time.h>

#define TOL_F32 1e-5
#define CHUNK 64

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness (the rest: frt_test_cuda.h) ---------------------------- */

static uint64_t g_rng = 20261122;

/* Uniform in [lo, hi) from the SplitMix64 stream of kernels/cpu/rng.h. */
static float urand(float lo, float hi) { return lo + (hi - lo) * frt_rng_uniform(&g_rng); }

static float *frand(size_t n, float lo, float hi)
{
    float *x = fnew(n);
    for (size_t i = 0; i < n; i++) x[i] = urand(lo, hi);
    return x;
}

/* ---- inputs ------------------------------------------------------------- */

typedef struct gdr_shape {
    int nk, nv, dk, dv, chunk;
} gdr_shape;

/* One call's inputs, rows = the bucket (all rows real data). */
typedef struct gdr_in {
    float *q, *k, *v, *g, *beta;
} gdr_in;

static double softplus_d(double x) { return x > 20 ? x : log1p(exp(x)); }

/* As tests/test_cuda_kernels.c gdr_make: head 0 at A = 16 (log-decay near
 * -20 per token), head 1 at A = 0.01 (long memory), the others log-uniform. */
static gdr_in gdr_inputs(int rows, gdr_shape s, frt_cuda_dtype in_dt)
{
    gdr_in d;
    const size_t nq = (size_t)rows * s.nk * s.dk, nvv = (size_t)rows * s.nv * s.dv;
    d.q = frand(nq, -1, 1);
    d.k = frand(nq, -1, 1);
    frt_cpu_l2norm(d.q, rows * s.nk, s.dk, 1e-6f);
    frt_cpu_l2norm(d.k, rows * s.nk, s.dk, 1e-6f);
    d.v = frand(nvv, -2, 2);
    if (in_dt == BF16) {
        round_bf16(d.q, nq);
        round_bf16(d.k, nq);
        round_bf16(d.v, nvv);
    }
    d.g = fnew((size_t)rows * s.nv);
    d.beta = fnew((size_t)rows * s.nv);
    double *A = xzalloc((size_t)s.nv * sizeof(double));
    double *dt = xzalloc((size_t)s.nv * sizeof(double));
    for (int h = 0; h < s.nv; h++) {
        const double la = log(0.01) + (log(16.0) - log(0.01)) * urand(0, 1);
        A[h] = h == 0 ? 16.0 : h == 1 ? 0.01 : exp(la);
        dt[h] = urand(-1.0f, 0.2f);
    }
    for (int t = 0; t < rows; t++)
        for (int h = 0; h < s.nv; h++) {
            const double a = urand(-4.0f, 1.2f);
            d.g[(size_t)t * s.nv + h] = (float)(-A[h] * softplus_d(a + dt[h]));
            d.beta[(size_t)t * s.nv + h] = (float)(1.0 / (1.0 + exp(-urand(-3, 3))));
        }
    free(A);
    free(dt);
    return d;
}

static void gdr_in_free(gdr_in *d)
{
    free(d->q);
    free(d->k);
    free(d->v);
    free(d->g);
    free(d->beta);
}

/* Device buffers for a bucket of max_n rows; inputs as in_dt (4 bytes per
 * element allocated either way), out as f32 or bf16. */
typedef struct gdr_dev {
    gdr_shape s;
    int max_n;
    frt_cuda_dtype in_dt, out_dt;
    dbuf q, k, v, g, beta, state, out, ws;
} gdr_dev;

static gdr_dev gdr_dev_new(gdr_shape s, int max_n, frt_cuda_dtype in_dt, frt_cuda_dtype out_dt)
{
    gdr_dev x;
    x.s = s;
    x.max_n = max_n;
    x.in_dt = in_dt;
    x.out_dt = out_dt;
    const size_t nq = (size_t)max_n * s.nk * s.dk, nvv = (size_t)max_n * s.nv * s.dv;
    x.q = dalloc(nq * 4);
    x.k = dalloc(nq * 4);
    x.v = dalloc(nvv * 4);
    x.g = dalloc((size_t)max_n * s.nv * 4);
    x.beta = dalloc((size_t)max_n * s.nv * 4);
    x.state = dalloc((size_t)s.nv * s.dk * s.dv * 4);
    x.out = dalloc(nvv * 4);
    x.ws = dalloc(frt_cuda_gdr_chunked_workspace_bytes(max_n, s.nk, s.nv, s.dk, s.dv, s.chunk));
    return x;
}

static void gdr_dev_free(gdr_dev *x)
{
    dfree(&x->q);
    dfree(&x->k);
    dfree(&x->v);
    dfree(&x->g);
    dfree(&x->beta);
    dfree(&x->state);
    dfree(&x->out);
    dfree(&x->ws);
}

/* Uploads the first n rows of d; the rows past n hold sentinels. */
static void gdr_dev_put(gdr_dev *x, const gdr_in *d, int n)
{
    const gdr_shape s = x->s;
    dsentinel(x->q);
    dsentinel(x->k);
    dsentinel(x->v);
    dsentinel(x->g);
    dsentinel(x->beta);
    dput_as(x->q, 0, d->q, (size_t)n * s.nk * s.dk, x->in_dt);
    dput_as(x->k, 0, d->k, (size_t)n * s.nk * s.dk, x->in_dt);
    dput_as(x->v, 0, d->v, (size_t)n * s.nv * s.dv, x->in_dt);
    dput(x->g, 0, d->g, (size_t)n * s.nv * 4);
    dput(x->beta, 0, d->beta, (size_t)n * s.nv * 4);
}

static int gdr_launch(const gdr_dev *x, const int32_t *dn)
{
    const gdr_shape s = x->s;
    return frt_cuda_gdr_chunked(g_cs, x->out.p, x->out_dt, x->state.p, x->q.p, x->k.p, x->v.p,
                                x->in_dt, x->g.p, x->beta.p, dn, x->max_n, s.nk, s.nv, s.dk, s.dv,
                                s.chunk, x->ws.p, x->ws.bytes);
}

/* ---- cases -------------------------------------------------------------- */

/* `calls` calls in sequence, n valid tokens each in a bucket of max_n (from
 * device memory), the state carried from a random nonzero start; each call's
 * out and the final state against the twin; rows past n untouched. */
static void gdr_case(gdr_shape s, int n, int max_n, int calls, frt_cuda_dtype in_dt,
                     frt_cuda_dtype out_dt)
{
    const size_t ns = (size_t)s.nv * s.dk * s.dv, no = (size_t)n * s.nv * s.dv;
    const size_t esz = out_dt == BF16 ? 2 : 4;
    float *st0 = frand(ns, -1, 1), *st_ref = fdup(st0, ns);
    float *out_ref = fnew(no ? no : 1), *got = fnew(ns > no ? ns : no);
    gdr_dev x = gdr_dev_new(s, max_n, in_dt, out_dt);
    dput(x.state, 0, st0, ns * 4);
    double err = 0;
    int rows_ok = 1;
    for (int c = 0; c < calls; c++) {
        gdr_in d = gdr_inputs(max_n, s, in_dt);
        CHECK_OK(frt_cpu_gdr_chunked(out_ref, st_ref, d.q, d.k, d.v, d.g, d.beta, n, s.nk, s.nv,
                                     s.dk, s.dv, s.chunk));
        gdr_dev_put(&x, &d, n);
        dsentinel(x.out);
        set_n(n);
        CHECK_OK(gdr_launch(&x, d_n_p()));
        dget_as(x.out, 0, got, no, out_dt);
        const double e = frt_test_rel_err(got, out_ref, no);
        err = isnan(e) || e > err ? e : err;
        rows_ok &= untouched(x.out, no * esz, (size_t)(max_n - n) * s.nv * s.dv * esz);
        gdr_in_free(&d);
    }
    char name[160];
    snprintf(name, sizeof name, "out %s->%s n %d/%d x%d calls k%d v%d dk %d dv %d chunk %d",
             dtn(in_dt), dtn(out_dt), n, max_n, calls, s.nk, s.nv, s.dk, s.dv, s.chunk);
    report(name, err, out_dt == BF16 ? TOL_BF16 : TOL_F32);
    snprintf(name, sizeof name, "  rows past n untouched (n %d/%d)", n, max_n);
    report_flag(name, rows_ok);
    dget(x.state, 0, got, ns * 4);
    snprintf(name, sizeof name, "state (f32) after %d calls k%d v%d dk %d dv %d", calls, s.nk, s.nv,
             s.dk, s.dv);
    report(name, frt_test_rel_err(got, st_ref, ns), TOL_F32);
    gdr_dev_free(&x);
    free(st0);
    free(st_ref);
    free(out_ref);
    free(got);
}

/* 256 tokens in one call == calls of `part` tokens (chunk boundaries at the
 * same tokens): the same bytes of out and state. */
static void split_case(gdr_shape s)
{
    const int n = 256;
    const size_t ns = (size_t)s.nv * s.dk * s.dv, no = (size_t)n * s.nv * s.dv;
    float *st0 = frand(ns, -1, 1);
    gdr_in d = gdr_inputs(n, s, F32);
    gdr_dev x = gdr_dev_new(s, n, F32, F32);
    gdr_dev_put(&x, &d, n);
    dput(x.state, 0, st0, ns * 4);
    CHECK_OK(gdr_launch(&x, NULL));
    void *o1 = snap(x.out, no * 4), *s1 = snap(x.state, ns * 4);
    const int parts[2] = {128, 64};
    for (int pi = 0; pi < 2; pi++) {
        const int part = parts[pi];
        dput(x.state, 0, st0, ns * 4);
        dsentinel(x.out);
        for (int c0 = 0; c0 < n; c0 += part) {
            const size_t qo = (size_t)c0 * s.nk * s.dk * 4, vo = (size_t)c0 * s.nv * s.dv * 4,
                         go = (size_t)c0 * s.nv * 4;
            CHECK_OK(frt_cuda_gdr_chunked(
                g_cs, (char *)x.out.p + vo, F32, x.state.p, (char *)x.q.p + qo,
                (char *)x.k.p + qo, (char *)x.v.p + vo, F32, (float *)((char *)x.g.p + go),
                (float *)((char *)x.beta.p + go), NULL, part, s.nk, s.nv, s.dk, s.dv, s.chunk,
                x.ws.p, x.ws.bytes));
        }
        void *o2 = snap(x.out, no * 4), *s2 = snap(x.state, ns * 4);
        char name[128];
        snprintf(name, sizeof name, "split 256 == %d x %d tokens k%d v%d dk %d dv %d (out)",
                 n / part, part, s.nk, s.nv, s.dk, s.dv);
        report_same(name, o1, o2, no * 4);
        snprintf(name, sizeof name, "split 256 == %d x %d tokens (state)", n / part, part);
        report_same(name, s1, s2, ns * 4);
        free(o2);
        free(s2);
    }
    free(o1);
    free(s1);
    gdr_dev_free(&x);
    gdr_in_free(&d);
    free(st0);
}

/* The same launch three times from the same state, and once more after the
 * workspace was filled with garbage: identical bytes. */
static void determinism_case(gdr_shape s, int n)
{
    const size_t ns = (size_t)s.nv * s.dk * s.dv, no = (size_t)n * s.nv * s.dv;
    float *st0 = frand(ns, -1, 1);
    gdr_in d = gdr_inputs(n, s, F32);
    gdr_dev x = gdr_dev_new(s, n, F32, F32);
    gdr_dev_put(&x, &d, n);
    void *o[4], *st[4];
    for (int r = 0; r < 4; r++) {
        if (r == 3) dsentinel(x.ws);
        dput(x.state, 0, st0, ns * 4);
        CHECK_OK(gdr_launch(&x, NULL));
        o[r] = snap(x.out, no * 4);
        st[r] = snap(x.state, ns * 4);
    }
    char name[128];
    snprintf(name, sizeof name, "determinism, 3 runs n %d k%d v%d (out)", n, s.nk, s.nv);
    report_same(name, o[0], o[1], no * 4);
    report_same(name, o[0], o[2], no * 4);
    snprintf(name, sizeof name, "determinism, 3 runs n %d k%d v%d (state)", n, s.nk, s.nv);
    report_same(name, st[0], st[1], ns * 4);
    report_same(name, st[0], st[2], ns * 4);
    report_same("garbage-filled workspace: same bits (out)", o[0], o[3], no * 4);
    report_same("garbage-filled workspace: same bits (state)", st[0], st[3], ns * 4);
    for (int r = 0; r < 4; r++) {
        free(o[r]);
        free(st[r]);
    }
    gdr_dev_free(&x);
    gdr_in_free(&d);
    free(st0);
}

/* One launch (the same arguments, max_n 256) replayed with n from device
 * memory; n = 0 leaves out and state untouched. */
static void dyn_n_case(gdr_shape s)
{
    const int max_n = 256;
    const size_t ns = (size_t)s.nv * s.dk * s.dv, nvv = (size_t)max_n * s.nv * s.dv;
    float *st0 = frand(ns, -1, 1), *got = fnew(ns > nvv ? ns : nvv), *out_ref = fnew(nvv);
    gdr_in d = gdr_inputs(max_n, s, F32);
    gdr_dev x = gdr_dev_new(s, max_n, F32, F32);
    gdr_dev_put(&x, &d, max_n);
    const int lens[5] = {200, 65, 1, 0, 256};
    for (int i = 0; i < 5; i++) {
        const int n = lens[i];
        const size_t no = (size_t)n * s.nv * s.dv;
        float *st_ref = fdup(st0, ns);
        CHECK_OK(frt_cpu_gdr_chunked(out_ref, st_ref, d.q, d.k, d.v, d.g, d.beta, n, s.nk, s.nv,
                                     s.dk, s.dv, s.chunk));
        dput(x.state, 0, st0, ns * 4);
        dsentinel(x.out);
        set_n(n);
        CHECK_OK(gdr_launch(&x, d_n_p()));
        char name[128];
        if (n > 0) {
            dget(x.out, 0, got, no * 4);
            snprintf(name, sizeof name, "d_n = %d of max_n %d, same launch, v%d (out)", n, max_n,
                     s.nv);
            report(name, frt_test_rel_err(got, out_ref, no), TOL_F32);
        }
        snprintf(name, sizeof name, "  rows past n = %d untouched", n);
        report_flag(name, untouched(x.out, no * 4, (nvv - no) * 4));
        dget(x.state, 0, got, ns * 4);
        if (n > 0) {
            snprintf(name, sizeof name, "d_n = %d of max_n %d, same launch, v%d (state)", n, max_n,
                     s.nv);
            report(name, frt_test_rel_err(got, st_ref, ns), TOL_F32);
        } else {
            report_same("d_n = 0: state untouched", got, st0, ns * 4);
        }
        free(st_ref);
    }
    gdr_dev_free(&x);
    gdr_in_free(&d);
    free(st0);
    free(got);
    free(out_ref);
}

/* The gated delta rule token by token in fp64 (the recurrent form, which the
 * chunked algorithm equals in exact arithmetic) for value head h over n
 * tokens of d: S [dk][dv] (fp64, carried) and out64 [n][dv]. */
static void gdr_ref64(gdr_shape s, const gdr_in *d, int n, int h, double *S, double *out64)
{
    const int kh = h / (s.nv / s.nk);
    const double scale = 1.0 / sqrt((double)s.dk);
    double *kv = xzalloc((size_t)s.dv * sizeof(double));
    for (int t = 0; t < n; t++) {
        const float *q = d->q + ((size_t)t * s.nk + kh) * s.dk;
        const float *k = d->k + ((size_t)t * s.nk + kh) * s.dk;
        const float *v = d->v + ((size_t)t * s.nv + h) * s.dv;
        const double eg = exp((double)d->g[(size_t)t * s.nv + h]);
        const double b = d->beta[(size_t)t * s.nv + h];
        for (size_t i = 0; i < (size_t)s.dk * s.dv; i++) S[i] *= eg;
        for (int j = 0; j < s.dv; j++) kv[j] = 0;
        for (int a = 0; a < s.dk; a++)
            for (int j = 0; j < s.dv; j++) kv[j] += S[(size_t)a * s.dv + j] * k[a];
        for (int j = 0; j < s.dv; j++) kv[j] = ((double)v[j] - kv[j]) * b;
        for (int a = 0; a < s.dk; a++)
            for (int j = 0; j < s.dv; j++) S[(size_t)a * s.dv + j] += (double)k[a] * kv[j];
        double *o = out64 + (size_t)t * s.dv;
        for (int j = 0; j < s.dv; j++) o[j] = 0;
        for (int a = 0; a < s.dk; a++)
            for (int j = 0; j < s.dv; j++) o[j] += S[(size_t)a * s.dv + j] * ((double)q[a] * scale);
    }
    free(kv);
}

/* ||x - ref|| / ||ref|| over the rows of value head h of out [n][nv][dv]
 * (or of the state [nv][dk][dv] with n = dk rows of the head's block),
 * accumulated into the sums num, den. */
static void err64_acc(const float *x, const double *ref, int rows, size_t row_stride, int dv,
                      double *num, double *den)
{
    for (int t = 0; t < rows; t++)
        for (int j = 0; j < dv; j++) {
            const double e = (double)x[(size_t)t * row_stride + j] - ref[(size_t)t * dv + j];
            *num += e * e;
            *den += ref[(size_t)t * dv + j] * ref[(size_t)t * dv + j];
        }
}

/* `calls` calls of 256 tokens carrying the state from a random start: every
 * call's out and the state against the twin (tolerance), and out and state
 * of the value heads sel[] against the fp64 reference, GPU and twin side by
 * side, at calls 1, calls / 4, calls / 2 and calls. */
static void long_case(gdr_shape s, int calls, const int *sel, int n_sel)
{
    const int n = 256;
    const size_t ns = (size_t)s.nv * s.dk * s.dv, no = (size_t)n * s.nv * s.dv;
    const size_t nsh = (size_t)s.dk * s.dv;
    float *st0 = frand(ns, -1, 1), *st_ref = fdup(st0, ns);
    float *out_ref = fnew(no), *got = fnew(no), *st_got = fnew(ns);
    double *S64 = xzalloc((size_t)n_sel * nsh * sizeof(double));
    double *o64 = xzalloc((size_t)n_sel * n * s.dv * sizeof(double));
    for (int u = 0; u < n_sel; u++)
        for (size_t i = 0; i < nsh; i++) S64[u * nsh + i] = st0[(size_t)sel[u] * nsh + i];
    gdr_dev x = gdr_dev_new(s, n, F32, F32);
    dput(x.state, 0, st0, ns * 4);
    double e_out = 0;
    for (int c = 0; c < calls; c++) {
        gdr_in d = gdr_inputs(n, s, F32);
        CHECK_OK(frt_cpu_gdr_chunked(out_ref, st_ref, d.q, d.k, d.v, d.g, d.beta, n, s.nk, s.nv,
                                     s.dk, s.dv, s.chunk));
        gdr_dev_put(&x, &d, n);
        set_n(n);
        CHECK_OK(gdr_launch(&x, d_n_p()));
        dget(x.out, 0, got, no * 4);
        const double e = frt_test_rel_err(got, out_ref, no);
        e_out = isnan(e) || e > e_out ? e : e_out;
        for (int u = 0; u < n_sel; u++)
            gdr_ref64(s, &d, n, sel[u], S64 + u * nsh, o64 + (size_t)u * n * s.dv);
        gdr_in_free(&d);
        const int at = c + 1;
        if (at != 1 && at != calls / 4 && at != calls / 2 && at != calls) continue;
        dget(x.state, 0, st_got, ns * 4);
        double ng = 0, nt = 0, den = 0, sg = 0, stw = 0, sden = 0;
        for (int u = 0; u < n_sel; u++) {
            const size_t v_stride = (size_t)s.nv * s.dv;
            double dummy = 0;
            err64_acc(got + (size_t)sel[u] * s.dv, o64 + (size_t)u * n * s.dv, n, v_stride, s.dv,
                      &ng, &den);
            err64_acc(out_ref + (size_t)sel[u] * s.dv, o64 + (size_t)u * n * s.dv, n, v_stride,
                      s.dv, &nt, &dummy);
            dummy = 0;
            err64_acc(st_got + (size_t)sel[u] * nsh, S64 + u * nsh, s.dk, s.dv, s.dv, &sg, &sden);
            err64_acc(st_ref + (size_t)sel[u] * nsh, S64 + u * nsh, s.dk, s.dv, s.dv, &stw,
                      &dummy);
        }
        char name[160];
        snprintf(name, sizeof name, "long k%d v%d dk %d: calls 1..%d x 256, out vs twin (max)",
                 s.nk, s.nv, s.dk, at);
        report(name, e_out, TOL_F32);
        snprintf(name, sizeof name, "  state after %d calls vs twin", at);
        report(name, frt_test_rel_err(st_got, st_ref, ns), TOL_F32);
        snprintf(name, sizeof name, "  call %d out vs fp64, %d heads (twin %.2e)", at, n_sel,
                 sqrt(nt / (den > 0 ? den : 1)));
        report(name, sqrt(ng / (den > 0 ? den : 1)), TOL_F32);
        snprintf(name, sizeof name, "  state after %d calls vs fp64 (twin %.2e)", at,
                 sqrt(stw / (sden > 0 ? sden : 1)));
        report(name, sqrt(sg / (sden > 0 ? sden : 1)), TOL_F32);
    }
    gdr_dev_free(&x);
    free(st0);
    free(st_ref);
    free(out_ref);
    free(got);
    free(st_got);
    free(S64);
    free(o64);
}

/* Time per call at the 9B shape (bucket 256, all rows valid) against the
 * fp32 FMA floor (FMAs of the algorithm / (SMs x 128 FMA per clock x
 * 1.98 GHz, the H200's boost clock)). Informational, no check. */
static void timing_case(gdr_shape s, const char *label, int sm_count)
{
    const int n = 256, reps = 50;
    const size_t ns = (size_t)s.nv * s.dk * s.dv;
    float *st0 = frand(ns, -1, 1);
    gdr_in d = gdr_inputs(n, s, F32);
    gdr_dev x = gdr_dev_new(s, n, F32, F32);
    gdr_dev_put(&x, &d, n);
    dput(x.state, 0, st0, ns * 4);
    set_n(n);
    for (int r = 0; r < 3; r++) CHECK_OK(gdr_launch(&x, d_n_p()));
    sync_st();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; r++) CHECK_OK(gdr_launch(&x, d_n_p()));
    sync_st();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double us =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / reps;
    /* per (chunk of L, value head): A and Att L^2 dk, the solve L(L-1)/2 (dk + dv),
     * [W; q] S 2 L dk dv, Att Vn L(L+1)/2 dv, the state update L dk dv */
    const double L = CHUNK, per = L * L * s.dk + L * (L - 1) / 2 * (s.dk + s.dv) +
                                  3 * L * s.dk * s.dv + L * (L + 1) / 2 * s.dv;
    const double fma = per * (n / CHUNK) * s.nv;
    const double floor_us = fma / ((double)sm_count * 128 * 1.98e9) * 1e6;
    /* 3xTF32: three tf32 mma per FMA above at the dense tf32 peak (1024 FMA
     * per SM and clock) */
    const double tc_us = 3 * fma / ((double)sm_count * 1024 * 1.98e9) * 1e6;
    printf("  gdr_chunked %s shape, 256 tokens: %.1f us per call (%.2f GFLOP, %.1f TFLOP/s; "
           "fp32 FMA floor %.1f us, 3xTF32 tensor floor %.1f us)\n",
           label, us, 2 * fma / 1e9, 2 * fma / (us * 1e-6) / 1e12, floor_us, tc_us);
    gdr_dev_free(&x);
    gdr_in_free(&d);
    free(st0);
}

/* ---- bad arguments (no device needed: checked before any CUDA call) ---- */

static void test_bad_args(void)
{
    void *p = (void *)(uintptr_t)0x1000;
    int32_t *ip = (int32_t *)p;
    float *fp = (float *)p;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    const size_t need = frt_cuda_gdr_chunked_workspace_bytes(256, 16, 32, 128, 128, 64);
    /* the size formula: (3 dk4 cp + cp^2 + cp dvb + 4) floats per (chunk, value head) */
    CHECK(need == (size_t)4 * 32 * (3 * 128 * 64 + 64 * 64 + 64 * 128 + 4) * 4);
    CHECK(frt_cuda_gdr_chunked_workspace_bytes(65, 1, 3, 33, 50, 20) ==
          (size_t)4 * 3 * (3 * 36 * 20 + 20 * 20 + 20 * 64 + 4) * 4);
    CHECK(frt_cuda_gdr_chunked_workspace_bytes(0, 16, 32, 128, 128, 64) == 0);
    CHECK(frt_cuda_gdr_chunked_workspace_bytes(256, 16, 32, 128, 128, 0) == 0);
    CHECK(frt_cuda_gdr_chunked_workspace_bytes(256, 16, 32, 129, 128, 64) == 0);
    CHECK(frt_cuda_gdr_chunked_workspace_bytes(256, 3, 32, 128, 128, 64) == 0);
#define GDR_BAD(ws, wsb, max_n, nk, nv, dk, dv, chunk)                                         \
    frt_cuda_gdr_chunked(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, (max_n), (nk), (nv), (dk), \
                         (dv), (chunk), (ws), (wsb))
    CHECK_STATUS(GDR_BAD(NULL, need, 256, 16, 32, 128, 128, 64), E);         /* NULL workspace */
    CHECK_STATUS(GDR_BAD(p, need - 1, 256, 16, 32, 128, 128, 64), E);        /* short */
    CHECK_STATUS(GDR_BAD((char *)p + 4, need, 256, 16, 32, 128, 128, 64), E); /* misaligned */
    CHECK_STATUS(GDR_BAD(p, need, 256, 16, 32, 128, 128, 0), E);             /* chunk 0 */
    CHECK_STATUS(GDR_BAD(p, need, 256, 16, 32, 128, 128, 65), E);            /* chunk 65 */
    CHECK_STATUS(GDR_BAD(p, need, 256, 3, 32, 128, 128, 64), E);             /* heads 32 % 3 */
    CHECK_STATUS(GDR_BAD(p, need, 256, 16, 32, 128, 0, 64), E);              /* dv 0 */
    CHECK_STATUS(GDR_BAD(p, need, -1, 16, 32, 128, 128, 64), E);             /* max_n < 0 */
    CHECK_STATUS(GDR_BAD(p, need, 256, 16, 32, 256, 128, 64), FRT_ERR_UNSUPPORTED); /* dk > 128 */
    CHECK_STATUS(frt_cuda_gdr_chunked(NULL, p, F32, NULL, p, p, p, F32, fp, fp, ip, 256, 16, 32,
                                      128, 128, 64, p, need),
                 E); /* NULL state */
    CHECK_STATUS(frt_cuda_gdr_chunked(NULL, p, (frt_cuda_dtype)5, fp, p, p, p, F32, fp, fp, ip,
                                      256, 16, 32, 128, 128, 64, p, need),
                 E); /* bad dtype */
    /* max_n 0: nothing to launch, no workspace needed */
    CHECK_OK(GDR_BAD(NULL, 0, 0, 16, 32, 128, 128, 64));
#undef GDR_BAD
}

int main(void)
{
    printf("  %-62s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    int sm_count = frt_test_cuda_start();
    if (sm_count <= 0) sm_count = 132;
    g_dn = dalloc(64);

    const gdr_shape s9b = {16, 32, 128, 128, CHUNK}, s27b = {16, 48, 128, 128, CHUNK};
    /* the 9B and 27B shapes: full buckets, three calls carrying the state;
     * tail chunks with d_n < max_n; bf16 paths */
    gdr_case(s9b, 256, 256, 3, F32, F32);
    gdr_case(s9b, 200, 256, 2, BF16, F32);
    gdr_case(s9b, 130, 192, 1, BF16, BF16);
    gdr_case(s27b, 256, 256, 3, F32, F32);
    gdr_case(s27b, 130, 256, 2, F32, F32);
    gdr_case(s27b, 200, 256, 1, BF16, BF16);
    /* odd lengths in larger buckets */
    const int lens[4] = {1, 63, 65, 200};
    for (int i = 0; i < 4; i++) gdr_case(s9b, lens[i], 256, 1, F32, F32);
    /* n_v_heads == n_k_heads; smaller and odd dk / dv */
    gdr_case((gdr_shape){4, 4, 128, 128, CHUNK}, 200, 256, 2, F32, F32);
    gdr_case((gdr_shape){2, 4, 64, 64, CHUNK}, 65, 128, 2, F32, F32);
    gdr_case((gdr_shape){2, 2, 32, 32, CHUNK}, 63, 64, 3, F32, F32);
    gdr_case((gdr_shape){2, 4, 32, 64, CHUNK}, 129, 192, 1, F32, F32);
    gdr_case((gdr_shape){1, 3, 64, 80, CHUNK}, 200, 256, 1, F32, F32);
    /* odd dk, dv and chunks (tail rows, padded strides) */
    gdr_case((gdr_shape){2, 4, 36, 50, 20}, 100, 100, 2, F32, F32);
    gdr_case((gdr_shape){1, 2, 7, 5, 3}, 10, 16, 2, F32, F32);
    gdr_case((gdr_shape){2, 4, 128, 64, 16}, 70, 96, 1, F32, F32);
    /* splitting, determinism, d_n */
    split_case(s9b);
    split_case(s27b);
    split_case((gdr_shape){2, 4, 64, 80, CHUNK});
    determinism_case(s9b, 256);
    determinism_case(s27b, 256);
    determinism_case((gdr_shape){2, 4, 64, 80, CHUNK}, 65);
    dyn_n_case(s9b);
    dyn_n_case(s27b);
    /* long runs: the 9B shape over 8k tokens (heads 0: A = 16, 1: A = 0.01,
     * 31: random); the real head size over 32k tokens (A = 16 and 0.01) */
    const int sel9b[3] = {0, 1, 31}, sel2[2] = {0, 1};
    long_case(s9b, 32, sel9b, 3);
    long_case((gdr_shape){1, 2, 128, 128, CHUNK}, 128, sel2, 2);
    timing_case(s9b, "9B", sm_count);
    timing_case(s27b, "27B", sm_count);

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
