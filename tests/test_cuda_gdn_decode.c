/*
 * test_cuda_gdn_decode.c - the one-launch Gated DeltaNet decode step
 * (src/kernels/cuda/gdn_decode.cu: frt_cuda_gdn_decode, the conv included)
 * and the conv step alone (frt_cuda_conv1d_step) against the composition of
 * the CPU twins the model's ten-launch path computes: frt_cpu_conv1d_causal
 * (n_tok 1), frt_cpu_l2norm of q and k (eps 1e-6), frt_cpu_gdn_gate,
 * frt_cpu_gdr_recurrent, frt_cpu_rmsnorm_gated. Norm-wise ||gpu - cpu|| /
 * ||cpu|| on random data (random nonzero recurrent and conv states, decays
 * from A in [0.01, 16]); fp32 outputs 1e-5, bf16 outputs 1e-2:
 *   - the Qwen3.5-9B shape (16 key heads, 32 value heads, dk = dv = 128,
 *     8192 conv channels, kernel 4: 4 slices, clusters of 8), the 27B shape
 *     (48 value heads: 2 slices, clusters of 6), and every launch form:
 *     ratios 1, 2, 3, 4, 5, 8 (1, 2 or 4 slices; clusters of 1 to 8
 *     blocks), dk / dv 64 and 128 mixed, conv kernels 1 (no conv state), 2,
 *     3, 4; several steps in sequence carrying both states; ob f32 and bf16,
 *     x f32 and bf16; the conv output (qkv_out), the conv state and ob after
 *     every step, the recurrent state after the last;
 *   - qkv_out NULL gives the bits of qkv_out set (ob, both states);
 *   - conv1d_step alone: kernel 1 (no state), 3, 4, 5 (the loop), bf16 in
 *     and out;
 *   - *d_n = 0: state, conv state, qkv_out and ob untouched; d_n NULL ==
 *     *d_n = 1 (bits);
 *   - determinism: 3 runs from the same start give the same bytes;
 *   - a CUDA graph of the launch replayed step after step gives the bytes
 *     of the eager launches;
 *   - bad arguments (no device needed).
 * Prints a table (case, rel err, tolerance) and the time per call at the 9B
 * and 27B shapes (eager, median of 50) against the HBM floor.
 * Exits 77 without a CUDA device, after the argument checks.
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
#define FRT_TEST_CUDA_OWN_UNTOUCHED
#define FRT_TEST_CUDA_AS_AT0
#define FRT_TEST_CUDA_COUNT
#include "frt_test_cuda.h"

#include <time.h>

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define RMS_EPS 1e-6f

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness (the rest: frt_test_cuda.h) ---------------------------- */

static uint64_t g_rng = 20260611;

/* 1 when bytes [0, bytes) still hold the sentinel. */
static int untouched(dbuf d, size_t bytes)
{
    unsigned char *h = xzalloc(bytes);
    dget(d, 0, h, bytes);
    int ok = 1;
    for (size_t i = 0; i < bytes; i++) ok &= h[i] == 0x7F;
    free(h);
    return ok;
}

/* Uniform in [lo, hi) from the SplitMix64 stream of kernels/cpu/rng.h. */
static float urand(float lo, float hi) { return lo + (hi - lo) * frt_rng_uniform(&g_rng); }

static float *frand(size_t n, float lo, float hi)
{
    float *x = fnew(n);
    for (size_t i = 0; i < n; i++) x[i] = urand(lo, hi);
    return x;
}

static double maxerr(double acc, double e) { return isnan(e) || e > acc ? e : acc; }

/* ---- the layer: shape, weights, states, device buffers ------------------- */

typedef struct gdn_shape {
    int nk, nv, dk, dv, K; /* key heads, value heads, head dims, conv kernel */
} gdn_shape;

static int sh_kd(gdn_shape s) { return s.nk * s.dk; }
static int sh_vd(gdn_shape s) { return s.nv * s.dv; }
static int sh_ch(gdn_shape s) { return 2 * sh_kd(s) + sh_vd(s); }
static size_t sh_ns(gdn_shape s) { return (size_t)s.nv * s.dk * s.dv; }
static size_t sh_ncs(gdn_shape s) { return (size_t)sh_ch(s) * (s.K - 1); }

/* Host weights and states (the reference carries its own copies). */
typedef struct gdn_host {
    gdn_shape s;
    float *w, *A_log, *dt_bias, *norm_w, *state, *conv;
} gdn_host;

/* One step's inputs: x = the fused GEMV's q|k|v before the conv, zg, a, b. */
typedef struct gdn_in {
    float *x, *zg, *a, *b;
} gdn_in;

typedef struct gdn_dev {
    gdn_shape s;
    frt_cuda_dtype ob_dt, x_dt; /* x_dt: the conv input's dtype (f32 unless set) */
    int with_qkv;               /* 1: qkv_out = t1 (the conv output); 0: NULL */
    dbuf w, A_log, dt_bias, norm_w, state, conv, x, t1, zg, a, b, ob;
} gdn_dev;

static gdn_host host_new(gdn_shape s)
{
    gdn_host h;
    h.s = s;
    h.w = frand((size_t)sh_ch(s) * s.K, -0.6f, 0.6f);
    h.A_log = fnew((size_t)s.nv);
    h.dt_bias = frand((size_t)s.nv, -1.0f, 0.2f);
    for (int i = 0; i < s.nv; i++) /* A log-uniform in [0.01, 16]; head 0 fast, head 1 slow */
        h.A_log[i] = i == 0 ? logf(16.0f) : i == 1 ? logf(0.01f) : urand(logf(0.01f), logf(16.0f));
    h.norm_w = frand((size_t)s.dv, 0.5f, 1.5f);
    h.state = frand(sh_ns(s), -1.0f, 1.0f);
    h.conv = frand(sh_ncs(s) ? sh_ncs(s) : 1, -2.0f, 2.0f);
    return h;
}

static void host_free(gdn_host *h)
{
    free(h->w);
    free(h->A_log);
    free(h->dt_bias);
    free(h->norm_w);
    free(h->state);
    free(h->conv);
}

static gdn_in in_new(gdn_shape s)
{
    gdn_in d;
    d.x = frand((size_t)sh_ch(s), -2.0f, 2.0f);
    d.zg = frand((size_t)sh_vd(s), -3.0f, 3.0f);
    d.a = frand((size_t)s.nv, -4.0f, 1.2f);
    d.b = frand((size_t)s.nv, -3.0f, 3.0f);
    return d;
}

static void in_free(gdn_in *d)
{
    free(d->x);
    free(d->zg);
    free(d->a);
    free(d->b);
}

/* The reference step (the model's ten-launch composition, on the CPU):
 * updates conv and state, writes t1 [ch] and ob [vd]. */
static void ref_step(const gdn_host *h, float *conv, float *state, const gdn_in *d, float *t1,
                     float *ob)
{
    const gdn_shape s = h->s;
    const int kd = sh_kd(s), vd = sh_vd(s), ch = sh_ch(s);
    frt_cpu_conv1d_causal(t1, d->x, conv, h->w, 1, ch, s.K);
    float *q = fdup(t1, (size_t)kd), *k = fdup(t1 + kd, (size_t)kd);
    float *v = fdup(t1 + 2 * kd, (size_t)vd);
    frt_cpu_l2norm(q, s.nk, s.dk, 1e-6f);
    frt_cpu_l2norm(k, s.nk, s.dk, 1e-6f);
    float *g = fnew((size_t)s.nv), *beta = fnew((size_t)s.nv), *o = fnew((size_t)vd);
    frt_cpu_gdn_gate(g, beta, d->a, d->b, h->A_log, h->dt_bias, 1, s.nv);
    frt_cpu_gdr_recurrent(o, state, q, k, v, g, beta, 1, s.nk, s.nv, s.dk, s.dv);
    frt_cpu_rmsnorm_gated(ob, o, d->zg, h->norm_w, s.nv, s.dv, RMS_EPS);
    free(q);
    free(k);
    free(v);
    free(g);
    free(beta);
    free(o);
}

/* Device copies of h's weights and states. */
static gdn_dev dev_new(const gdn_host *h, frt_cuda_dtype ob_dt)
{
    const gdn_shape s = h->s;
    gdn_dev x;
    x.s = s;
    x.ob_dt = ob_dt;
    x.x_dt = F32;
    x.with_qkv = 1;
    x.w = dalloc((size_t)sh_ch(s) * s.K * 4);
    x.A_log = dalloc((size_t)s.nv * 4);
    x.dt_bias = dalloc((size_t)s.nv * 4);
    x.norm_w = dalloc((size_t)s.dv * 4);
    x.state = dalloc(sh_ns(s) * 4);
    x.conv = dalloc((sh_ncs(s) ? sh_ncs(s) : 1) * 4);
    x.x = dalloc((size_t)sh_ch(s) * 4);
    x.t1 = dalloc((size_t)sh_ch(s) * 4);
    x.zg = dalloc((size_t)sh_vd(s) * 4);
    x.a = dalloc((size_t)s.nv * 4);
    x.b = dalloc((size_t)s.nv * 4);
    x.ob = dalloc((size_t)sh_vd(s) * 4);
    dput(x.w, 0, h->w, x.w.bytes);
    dput(x.A_log, 0, h->A_log, x.A_log.bytes);
    dput(x.dt_bias, 0, h->dt_bias, x.dt_bias.bytes);
    dput(x.norm_w, 0, h->norm_w, x.norm_w.bytes);
    dput(x.state, 0, h->state, x.state.bytes);
    dput(x.conv, 0, h->conv, x.conv.bytes);
    return x;
}

static void dev_reset_states(gdn_dev *x, const gdn_host *h)
{
    dput(x->state, 0, h->state, x->state.bytes);
    dput(x->conv, 0, h->conv, x->conv.bytes);
}

static void dev_free(gdn_dev *x)
{
    dbuf *all[12] = {&x->w,  &x->A_log, &x->dt_bias, &x->norm_w, &x->state, &x->conv,
                     &x->x,  &x->t1,    &x->zg,      &x->a,      &x->b,     &x->ob};
    for (int i = 0; i < 12; i++) dfree(all[i]);
}

static void dev_put_in(gdn_dev *x, const gdn_in *d)
{
    const gdn_shape s = x->s;
    dput_as(x->x, d->x, (size_t)sh_ch(s), x->x_dt);
    dput(x->zg, 0, d->zg, (size_t)sh_vd(s) * 4);
    dput(x->a, 0, d->a, (size_t)s.nv * 4);
    dput(x->b, 0, d->b, (size_t)s.nv * 4);
}

/* The one launch of the step (what the model records per layer; the model
 * passes qkv_out NULL). Kernel 1 passes a NULL conv state. */
static int dev_step_on(void *cs, const gdn_dev *x, const int32_t *dn)
{
    const gdn_shape s = x->s;
    return frt_cuda_gdn_decode(cs, x->ob.p, x->ob_dt, x->state.p, sh_ncs(s) ? x->conv.p : NULL,
                               x->with_qkv ? x->t1.p : NULL, x->x.p, x->x_dt, x->w.p, x->zg.p,
                               x->a.p, x->b.p, x->A_log.p, x->dt_bias.p, x->norm_w.p, dn, s.nk,
                               s.nv, s.dk, s.dv, s.K, RMS_EPS);
}

/* The launch form frt_cuda_gdn_decode picks (for the case names): slices
 * per value head and blocks per cluster. */
static int sh_slices(gdn_shape s)
{
    const int g = s.nv / s.nk;
    int sl = s.dv / 32;
    while (sl > 1 && g * sl > 8) sl >>= 1;
    return sl;
}

static int dev_step(const gdn_dev *x, const int32_t *dn) { return dev_step_on(g_cs, x, dn); }

/* ---- cases -------------------------------------------------------------- */

/* `steps` tokens in sequence from random states: per step the conv output
 * and the conv state, ob (worst step), and the recurrent state at the end. */
static void step_case(gdn_shape s, int steps, frt_cuda_dtype ob_dt, frt_cuda_dtype x_dt)
{
    const int ch = sh_ch(s), vd = sh_vd(s);
    const size_t ns = sh_ns(s), ncs = sh_ncs(s);
    gdn_host h = host_new(s);
    float *st_ref = fdup(h.state, ns), *cs_ref = fdup(h.conv, ncs ? ncs : 1);
    float *t1_ref = fnew((size_t)ch), *ob_ref = fnew((size_t)vd);
    size_t ngot = ns > (size_t)ch ? ns : (size_t)ch;
    float *got = fnew(ngot > ncs ? ngot : ncs);
    gdn_dev x = dev_new(&h, ob_dt);
    x.x_dt = x_dt;
    double e_t1 = 0, e_cs = 0, e_ob = 0;
    set_n(1);
    for (int t = 0; t < steps; t++) {
        gdn_in d = in_new(s);
        if (x_dt == BF16) round_bf16(d.x, (size_t)ch); /* what the device reads */
        ref_step(&h, cs_ref, st_ref, &d, t1_ref, ob_ref);
        dev_put_in(&x, &d);
        CHECK_OK(dev_step(&x, d_n_p()));
        dget(x.t1, 0, got, (size_t)ch * 4);
        e_t1 = maxerr(e_t1, frt_test_rel_err(got, t1_ref, (size_t)ch));
        if (ncs) {
            dget(x.conv, 0, got, ncs * 4);
            e_cs = maxerr(e_cs, frt_test_rel_err(got, cs_ref, ncs));
        }
        dget_as(x.ob, got, (size_t)vd, ob_dt);
        e_ob = maxerr(e_ob, frt_test_rel_err(got, ob_ref, (size_t)vd));
        in_free(&d);
    }
    char name[160];
    snprintf(name, sizeof name, "gdn_decode k%d v%d dk %d dv %d kernel %d (%d slices, cluster %d)",
             s.nk, s.nv, s.dk, s.dv, s.K, sh_slices(s), s.nv / s.nk * sh_slices(s));
    printf("  %s\n", name);
    snprintf(name, sizeof name, "  conv out (qkv_out, x %s) x%d steps, %d ch", dtn(x_dt), steps,
             ch);
    report(name, e_t1, TOL_F32);
    snprintf(name, sizeof name, "  conv state x%d steps (exact)", steps);
    report(name, e_cs, 0.0);
    snprintf(name, sizeof name, "  ob %s x%d steps", dtn(ob_dt), steps);
    report(name, e_ob, ob_dt == BF16 ? TOL_BF16 : TOL_F32);
    dget(x.state, 0, got, ns * 4);
    snprintf(name, sizeof name, "  state (f32) after %d steps", steps);
    report(name, frt_test_rel_err(got, st_ref, ns), TOL_F32);
    dev_free(&x);
    host_free(&h);
    free(st_ref);
    free(cs_ref);
    free(t1_ref);
    free(ob_ref);
    free(got);
}

/* conv1d_step alone (kernel sizes, dtypes) against frt_cpu_conv1d_causal
 * with n_tok 1, `steps` tokens carrying the state. */
static void conv_case(int ch, int K, frt_cuda_dtype x_dt, frt_cuda_dtype out_dt, int steps)
{
    const size_t ncs = (size_t)ch * (K - 1);
    float *w = frand((size_t)ch * K, -0.6f, 0.6f), *cs = frand(ncs ? ncs : 1, -2, 2);
    float *out_ref = fnew((size_t)ch), *got = fnew((size_t)ch > ncs ? (size_t)ch : ncs);
    dbuf dw = dalloc((size_t)ch * K * 4), dcs = dalloc((ncs ? ncs : 1) * 4);
    dbuf dx = dalloc((size_t)ch * 4), dout = dalloc((size_t)ch * 4);
    dput(dw, 0, w, dw.bytes);
    dput(dcs, 0, cs, dcs.bytes);
    double e_out = 0, e_cs = 0;
    set_n(1);
    for (int t = 0; t < steps; t++) {
        float *xx = frand((size_t)ch, -2, 2);
        if (x_dt == BF16) round_bf16(xx, (size_t)ch);
        frt_cpu_conv1d_causal(out_ref, xx, cs, w, 1, ch, K);
        dput_as(dx, xx, (size_t)ch, x_dt);
        CHECK_OK(frt_cuda_conv1d_step(g_cs, dout.p, out_dt, dx.p, x_dt, ncs ? dcs.p : NULL, dw.p,
                                      d_n_p(), ch, K));
        dget_as(dout, got, (size_t)ch, out_dt);
        e_out = maxerr(e_out, frt_test_rel_err(got, out_ref, (size_t)ch));
        if (ncs) {
            dget(dcs, 0, got, ncs * 4);
            e_cs = maxerr(e_cs, frt_test_rel_err(got, cs, ncs));
        }
        free(xx);
    }
    char name[160];
    snprintf(name, sizeof name, "conv1d_step %s->%s ch %d kernel %d x%d steps", dtn(x_dt),
             dtn(out_dt), ch, K, steps);
    report(name, e_out, out_dt == BF16 ? TOL_BF16 : TOL_F32);
    snprintf(name, sizeof name, "  conv state kernel %d (exact)", K);
    report(name, e_cs, 0.0);
    dfree(&dw);
    dfree(&dcs);
    dfree(&dx);
    dfree(&dout);
    free(w);
    free(cs);
    free(out_ref);
    free(got);
}

/* *d_n = 0: nothing written (states keep their bytes, qkv_out = t1 and ob
 * their sentinels); then d_n NULL gives the bits of *d_n = 1. */
static void dyn_n_case(gdn_shape s)
{
    const size_t ns = sh_ns(s), ncs = sh_ncs(s);
    printf("  d_n cases k%d v%d dk %d dv %d kernel %d\n", s.nk, s.nv, s.dk, s.dv, s.K);
    gdn_host h = host_new(s);
    gdn_dev x = dev_new(&h, BF16);
    gdn_in d = in_new(s);
    dev_put_in(&x, &d);
    dsentinel(x.t1);
    dsentinel(x.ob);
    set_n(0);
    CHECK_OK(dev_step(&x, d_n_p()));
    float *got = fnew(ns > ncs ? ns : ncs);
    dget(x.state, 0, got, ns * 4);
    report_same("d_n = 0: state untouched", got, h.state, ns * 4);
    dget(x.conv, 0, got, ncs * 4);
    report_same("d_n = 0: conv state untouched", got, h.conv, ncs * 4);
    report_flag("d_n = 0: conv out (qkv_out) untouched", untouched(x.t1, x.t1.bytes));
    report_flag("d_n = 0: ob untouched", untouched(x.ob, x.ob.bytes));
    set_n(1);
    CHECK_OK(dev_step(&x, d_n_p()));
    void *ob1 = snap(x.ob, x.ob.bytes), *st1 = snap(x.state, ns * 4);
    dev_reset_states(&x, &h);
    CHECK_OK(dev_step(&x, NULL));
    void *ob2 = snap(x.ob, x.ob.bytes), *st2 = snap(x.state, ns * 4);
    report_same("d_n NULL == *d_n = 1 (ob)", ob1, ob2, (size_t)sh_vd(s) * 2);
    report_same("d_n NULL == *d_n = 1 (state)", st1, st2, ns * 4);
    free(ob1);
    free(st1);
    free(ob2);
    free(st2);
    free(got);
    in_free(&d);
    dev_free(&x);
    host_free(&h);
}

/* The same step three times from the same states: identical bytes. */
static void determinism_case(gdn_shape s, frt_cuda_dtype ob_dt)
{
    const size_t ns = sh_ns(s), ncs = sh_ncs(s), nob = (size_t)sh_vd(s) * (ob_dt == BF16 ? 2 : 4);
    gdn_host h = host_new(s);
    gdn_dev x = dev_new(&h, ob_dt);
    gdn_in d = in_new(s);
    dev_put_in(&x, &d);
    set_n(1);
    void *ob[3], *st[3], *cs[3], *t1[3];
    for (int r = 0; r < 3; r++) {
        dev_reset_states(&x, &h);
        dsentinel(x.ob);
        CHECK_OK(dev_step(&x, d_n_p()));
        ob[r] = snap(x.ob, nob);
        st[r] = snap(x.state, ns * 4);
        cs[r] = snap(x.conv, ncs * 4);
        t1[r] = snap(x.t1, (size_t)sh_ch(s) * 4);
    }
    char name[128];
    snprintf(name, sizeof name, "determinism, 3 runs k%d v%d dk %d dv %d (ob %s)", s.nk, s.nv, s.dk,
             s.dv, dtn(ob_dt));
    report_same(name, ob[0], ob[1], nob);
    report_same(name, ob[0], ob[2], nob);
    report_same("  (state)", st[0], st[1], ns * 4);
    report_same("  (state)", st[0], st[2], ns * 4);
    report_same("  (conv state)", cs[0], cs[2], ncs * 4);
    report_same("  (conv out)", t1[0], t1[2], (size_t)sh_ch(s) * 4);
    for (int r = 0; r < 3; r++) {
        free(ob[r]);
        free(st[r]);
        free(cs[r]);
        free(t1[r]);
    }
    in_free(&d);
    dev_free(&x);
    host_free(&h);
}

/* qkv_out NULL (the model's call) gives the bits of qkv_out set: ob and
 * both states after `steps` steps. */
static void qkv_null_case(gdn_shape s, int steps)
{
    const size_t ns = sh_ns(s), ncs = sh_ncs(s), nob = (size_t)sh_vd(s) * 2;
    gdn_host h = host_new(s);
    gdn_dev x = dev_new(&h, BF16);
    gdn_in *d = xzalloc((size_t)steps * sizeof *d);
    for (int t = 0; t < steps; t++) d[t] = in_new(s);
    set_n(1);
    void *ob[2], *st[2], *cs[2];
    for (int r = 0; r < 2; r++) {
        x.with_qkv = r == 0;
        dev_reset_states(&x, &h);
        dsentinel(x.t1);
        for (int t = 0; t < steps; t++) {
            dev_put_in(&x, &d[t]);
            CHECK_OK(dev_step(&x, d_n_p()));
        }
        ob[r] = snap(x.ob, nob);
        st[r] = snap(x.state, ns * 4);
        cs[r] = snap(x.conv, (ncs ? ncs : 1) * 4);
    }
    char name[128];
    snprintf(name, sizeof name, "qkv_out NULL == set, %d steps k%d v%d (ob)", steps, s.nk, s.nv);
    report_same(name, ob[0], ob[1], nob);
    report_same("  (state)", st[0], st[1], ns * 4);
    report_same("  (conv state)", cs[0], cs[1], ncs * 4);
    report_flag("  qkv_out NULL: t1 untouched", untouched(x.t1, x.t1.bytes));
    for (int r = 0; r < 2; r++) {
        free(ob[r]);
        free(st[r]);
        free(cs[r]);
    }
    for (int t = 0; t < steps; t++) in_free(&d[t]);
    free(d);
    dev_free(&x);
    host_free(&h);
}

static int record_step(frt_stream *stream, void *user)
{
    return dev_step_on(frt_stream_native(stream), user, d_n_p());
}

/* One capture of the launch replayed `steps` times (new inputs each
 * time, the states carried) == the eager launches, bytes of every ob and of
 * the final states. */
static void graph_case(gdn_shape s, int steps)
{
    const size_t ns = sh_ns(s), ncs = sh_ncs(s), nob = (size_t)sh_vd(s) * 2;
    gdn_host h = host_new(s);
    gdn_dev x = dev_new(&h, BF16);
    gdn_in *d = xzalloc((size_t)steps * sizeof *d);
    void **ob_e = xzalloc((size_t)steps * sizeof *ob_e);
    for (int t = 0; t < steps; t++) d[t] = in_new(s);
    set_n(1);
    for (int t = 0; t < steps; t++) {
        dev_put_in(&x, &d[t]);
        CHECK_OK(dev_step(&x, d_n_p()));
        ob_e[t] = snap(x.ob, nob);
    }
    void *st_e = snap(x.state, ns * 4), *cs_e = snap(x.conv, ncs * 4);
    dev_reset_states(&x, &h);
    dsentinel(x.ob);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "gdn_decode", 0, &graph));
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_step, &x));
    int same = 1;
    for (int t = 0; t < steps && graph; t++) {
        dev_put_in(&x, &d[t]);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        void *ob = snap(x.ob, nob);
        same &= memcmp(ob, ob_e[t], nob) == 0;
        free(ob);
    }
    char name[128];
    snprintf(name, sizeof name, "graph, %d replays == eager k%d v%d (every ob)", steps, s.nk, s.nv);
    report_flag(name, same);
    void *st_g = snap(x.state, ns * 4), *cs_g = snap(x.conv, ncs * 4);
    report_same("  graph == eager (state)", st_g, st_e, ns * 4);
    report_same("  graph == eager (conv state)", cs_g, cs_e, ncs * 4);
    frt_graph_destroy(graph);
    for (int t = 0; t < steps; t++) {
        in_free(&d[t]);
        free(ob_e[t]);
    }
    free(d);
    free(ob_e);
    free(st_e);
    free(cs_e);
    free(st_g);
    free(cs_g);
    dev_free(&x);
    host_free(&h);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Eager time per call of f(x): 50 samples of 20 back-to-back launches
 * (then a sync), the median sample / 20. Informational, no check. */
#define TIME_SAMPLES 50
#define TIME_BATCH 20
static double time_us(int (*f)(const gdn_dev *), const gdn_dev *x)
{
    double t[TIME_SAMPLES];
    for (int r = 0; r < 3 + TIME_SAMPLES; r++) {
        const double t0 = now_us();
        for (int i = 0; i < TIME_BATCH; i++) CHECK_OK(f(x));
        sync_st();
        if (r >= 3) t[r - 3] = (now_us() - t0) / TIME_BATCH;
    }
    qsort(t, TIME_SAMPLES, sizeof(double), cmp_double);
    return t[TIME_SAMPLES / 2];
}

static int run_step(const gdn_dev *x) { return dev_step(x, d_n_p()); }

static int run_conv_step(const gdn_dev *x)
{
    return frt_cuda_conv1d_step(g_cs, x->t1.p, F32, x->x.p, F32, x->conv.p, x->w.p, d_n_p(),
                                sh_ch(x->s), x->s.K);
}

/* The step as the model calls it (ob bf16, qkv_out NULL) at shape s; with
 * conv 1: conv1d_step alone too (the first of the former two launches). */
static void timing_case(const char *what, gdn_shape s, int conv)
{
    gdn_host h = host_new(s);
    gdn_dev x = dev_new(&h, BF16);
    x.with_qkv = 0;
    gdn_in d = in_new(s);
    dev_put_in(&x, &d);
    set_n(1);
    const int ch = sh_ch(s);
    /* bytes: the recurrent state and the conv state read and written, the
     * conv weights, x, zg, ob (the rest is < 1 KB) */
    const double mb = (2.0 * (double)sh_ns(s) * 4 + 2.0 * (double)sh_ncs(s) * 4 +
                       (double)ch * s.K * 4 + (double)ch * 4 + sh_vd(s) * 6.0) /
                      1e6;
    const double t = time_us(run_step, &x);
    printf("  gdn_decode %s (%d x %d heads, %d x %d, %d slices, cluster %d): %.2f us per call "
           "(median of %d x %d, eager; %.2f MB, HBM floor %.2f us at 4.2 TB/s)\n",
           what, s.nk, s.nv, s.dk, s.dv, sh_slices(s), s.nv / s.nk * sh_slices(s), t,
           TIME_SAMPLES, TIME_BATCH, mb, mb / 4.2e6 * 1e6);
    if (conv) {
        const double tc = time_us(run_conv_step, &x);
        const double cmb = (double)ch * (1 + s.K + 2 * (s.K - 1) + 1) * 4 / 1e6;
        printf("  conv1d_step %s (%d ch) alone: %.2f us per call (%.2f MB, HBM floor %.2f us)\n",
               what, ch, tc, cmb, cmb / 4.2e6 * 1e6);
    }
    in_free(&d);
    dev_free(&x);
    host_free(&h);
}

/* ---- bad arguments (no device needed: checked before any CUDA call) ---- */

static void test_bad_args(void)
{
    void *p = (void *)(uintptr_t)0x1000;
    int32_t *ip = (int32_t *)p;
    float *fp = (float *)p;
    const int E = FRT_ERR_INVALID_ARGUMENT, U = FRT_ERR_UNSUPPORTED;
    void *out = (void *)(uintptr_t)0x2000;
    /* conv1d_step */
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, NULL, F32, p, F32, fp, fp, ip, 8192, 4), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, NULL, F32, fp, fp, ip, 8192, 4), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, p, F32, NULL, fp, ip, 8192, 4), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, p, F32, fp, NULL, ip, 8192, 4), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, (frt_cuda_dtype)7, p, F32, fp, fp, ip, 8192, 4),
                 E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, p, (frt_cuda_dtype)-1, fp, fp, ip, 8192, 4),
                 E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, p, F32, fp, fp, ip, 0, 4), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, p, F32, fp, fp, ip, 8192, 0), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, out, F32, p, F32, fp, fp, ip, 8192, 65), E);
    CHECK_STATUS(frt_cuda_conv1d_step(NULL, p, F32, p, F32, fp, fp, ip, 8192, 4), E); /* out == x */
    /* gdn_decode: GDN_BAD varies the pointers (the 9B shape, f32 ob and x),
     * GDN_SHAPE the dtypes and sizes (valid pointers) */
    float *st = (float *)(uintptr_t)0x3000, *cst = (float *)(uintptr_t)0x6000;
    float *zg = (float *)(uintptr_t)0x5000, *qo = (float *)(uintptr_t)0x7000;
    float *cw = (float *)(uintptr_t)0x8000;
    void *x = (void *)(uintptr_t)0x4000;
#define GDN_BAD(ob, st, cst, qo, x, cw, zg)                                                       \
    frt_cuda_gdn_decode(NULL, (ob), F32, (st), (cst), (qo), (x), F32, (cw), (zg), fp, fp, fp, fp, \
                        fp, ip, 16, 32, 128, 128, 4, 1e-6f)
#define GDN_SHAPE(obdt, xdt, nk, nv, dk, dv, K)                                                   \
    frt_cuda_gdn_decode(NULL, out, (obdt), st, cst, qo, x, (xdt), cw, zg, fp, fp, fp, fp, fp, ip,  \
                        (nk), (nv), (dk), (dv), (K), 1e-6f)
    CHECK_STATUS(GDN_BAD(NULL, st, cst, qo, x, cw, zg), E);
    CHECK_STATUS(GDN_BAD(out, NULL, cst, qo, x, cw, zg), E);
    CHECK_STATUS(GDN_BAD(out, st, NULL, qo, x, cw, zg), E); /* no conv state, kernel 4 */
    CHECK_STATUS(GDN_BAD(out, st, cst, qo, NULL, cw, zg), E);
    CHECK_STATUS(GDN_BAD(out, st, cst, qo, x, NULL, zg), E);
    CHECK_STATUS(GDN_BAD(out, st, cst, qo, x, cw, NULL), E);
    CHECK_STATUS(frt_cuda_gdn_decode(NULL, out, F32, st, cst, qo, x, F32, cw, zg, fp, fp, fp, fp,
                                     NULL, ip, 16, 32, 128, 128, 4, 1e-6f),
                 E); /* NULL norm weight */
    CHECK_STATUS(frt_cuda_gdn_decode(NULL, out, F32, st, cst, qo, x, F32, cw, zg, NULL, fp, fp, fp,
                                     fp, ip, 16, 32, 128, 128, 4, 1e-6f),
                 E); /* NULL a */
    CHECK_STATUS(GDN_BAD(out, st + 1, cst, qo, x, cw, zg), E); /* misaligned */
    CHECK_STATUS(GDN_BAD(out, st, cst, qo, x, cw, zg + 1), E);
    CHECK_STATUS(GDN_BAD((char *)out + 8, st, cst, qo, x, cw, zg), E);
    CHECK_STATUS(GDN_BAD((void *)zg, st, cst, qo, x, cw, zg), E);  /* ob aliases zg */
    CHECK_STATUS(GDN_BAD(x, st, cst, qo, x, cw, zg), E);           /* ob aliases x */
    CHECK_STATUS(GDN_BAD((void *)cst, st, cst, qo, x, cw, zg), E); /* ob aliases the conv state */
    CHECK_STATUS(GDN_BAD((void *)qo, st, cst, qo, x, cw, zg), E);  /* ob aliases qkv_out */
    CHECK_STATUS(GDN_BAD(out, st, cst, (float *)x, x, cw, zg), E); /* qkv_out aliases x */
    CHECK_STATUS(GDN_BAD(out, st, cst, cst, x, cw, zg), E);        /* qkv_out aliases conv state */
    CHECK_STATUS(GDN_BAD(out, st, cst, st, x, cw, zg), E);         /* qkv_out aliases state */
    CHECK_STATUS(frt_cuda_gdn_decode(NULL, (char *)out + 4, BF16, st, cst, qo, x, F32, cw, zg, fp,
                                     fp, fp, fp, fp, ip, 16, 32, 128, 128, 4, 1e-6f),
                 E); /* bf16 ob 4-byte aligned */
    CHECK_STATUS(GDN_SHAPE((frt_cuda_dtype)3, F32, 16, 32, 128, 128, 4), E);
    CHECK_STATUS(GDN_SHAPE(F32, (frt_cuda_dtype)-1, 16, 32, 128, 128, 4), E);
    CHECK_STATUS(GDN_SHAPE(F32, F32, 3, 32, 128, 128, 4), E); /* 32 % 3 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 0, 32, 128, 128, 4), E); /* no key heads */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 0, 128, 128, 4), E); /* no value heads */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 0, 128, 4), E);  /* dk 0 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 128, -1, 4), E); /* dv < 0 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 128, 128, 0), E); /* kernel 0 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 256, 128, 4), U); /* dk 256 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 128, 96, 4), U);  /* dv 96 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 32, 32, 4), U);   /* dk = dv = 32 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 16, 32, 128, 128, 5), U); /* kernel 5 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 1, 9, 128, 128, 4), U);   /* ratio 9 */
    CHECK_STATUS(GDN_SHAPE(F32, F32, 2, 32, 64, 64, 4), U);    /* ratio 16 */
#undef GDN_SHAPE
#undef GDN_BAD
}

int main(void)
{
    printf("  %-62s %10s %8s\n", "case", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    g_dn = dalloc(64);

    const gdn_shape s9b = {16, 32, 128, 128, 4}, s27b = {16, 48, 128, 128, 4};
    const gdn_shape small = {4, 4, 64, 64, 4};
    step_case(s9b, 4, F32, F32);
    step_case(s9b, 3, BF16, F32);
    step_case(s9b, 2, F32, BF16);
    step_case(s27b, 3, F32, F32);
    step_case(s27b, 2, BF16, F32);
    step_case(small, 5, F32, F32);                                /* ratio 1, 2 slices */
    step_case(small, 3, BF16, BF16);
    step_case((gdn_shape){1, 1, 128, 128, 4}, 3, F32, F32);       /* one head, cluster 4 */
    step_case((gdn_shape){2, 4, 128, 64, 3}, 3, F32, F32);        /* mixed dk / dv, kernel 3 */
    step_case((gdn_shape){2, 6, 64, 128, 2}, 3, F32, F32);        /* ratio 3, kernel 2 */
    step_case((gdn_shape){3, 9, 64, 64, 4}, 3, F32, F32);         /* ratio 3 at dv 64 */
    step_case((gdn_shape){3, 12, 128, 128, 1}, 3, F32, F32);      /* ratio 4, no conv state */
    step_case((gdn_shape){16, 64, 128, 128, 4}, 2, BF16, F32);    /* ratio 4, 128 blocks */
    step_case((gdn_shape){1, 5, 128, 128, 4}, 3, F32, F32);       /* ratio 5: 1 slice */
    step_case((gdn_shape){2, 16, 64, 64, 4}, 3, F32, F32);        /* ratio 8, cluster 8 */
    step_case((gdn_shape){1, 8, 64, 128, 3}, 3, F32, F32);        /* ratio 8, dv 128 */
    conv_case(8192, 4, BF16, BF16, 3);
    conv_case(1000, 1, F32, F32, 2); /* no state */
    conv_case(777, 3, F32, BF16, 3);
    conv_case(300, 5, F32, F32, 6); /* the loop */
    dyn_n_case(s9b);
    dyn_n_case((gdn_shape){2, 6, 64, 128, 2});
    qkv_null_case(s9b, 3);
    qkv_null_case((gdn_shape){3, 12, 128, 128, 1}, 2);
    determinism_case(s9b, F32);
    determinism_case(s27b, BF16);
    determinism_case(small, F32);
    determinism_case((gdn_shape){2, 16, 64, 64, 4}, F32);
    graph_case(s9b, 5);
    graph_case(s27b, 3);
    timing_case("9B", s9b, 1);
    timing_case("27B", s27b, 0);

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
