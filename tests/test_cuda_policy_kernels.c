/*
 * test_cuda_policy_kernels.c - the CUDA kernels of the robot policies
 * (kernels/cuda/kernels_policy_cuda.h and arch/pi0/pi0_glue.h) against
 * their CPU twins on random data: LayerNorm, adaRMSNorm, bias + GELU /
 * SiLU, GeGLU, the batched activation product, masked attention in both
 * layouts (SigLIP MHA, Gemma one KV head with the prefix and the expert's
 * block-causal masks), patches, q / k / v with RoPE at given positions, the
 * prefix mask scan, the masked softmax alone (against an fp64 softmax, at
 * the policy's sizes, timed), SigLIP's unmasked attention in one launch
 * (frt_cuda_attention_mha, timed against the products), the episode
 * noise (bit for bit with the cpu backend's
 * stream), the Euler step, the residual adds, the residual add fused
 * with each norm (frt_cuda_add_norm) and the batched copies
 * (pi0_cuda_copy_many, exact). Errors norm-wise
 * ||gpu - cpu|| / ||cpu||; bf16 outputs are compared with the bf16 rounding
 * of the inputs folded into the reference. Bad arguments are refused
 * before a device is needed.
 */
#include "frt/exec.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "model/arch/pi0/pi0.h"
#include "model/arch/pi0/pi0_glue.h"
#include "util/bf16.h"

#include "frt_test.h"

#if FRT_HAVE_CUDA
#include "frt_test_cuda.h"

/* A device copy of n floats. */
static dbuf dfl(const float *h, size_t n)
{
    dbuf d = dalloc(n * 4);
    dput(d, 0, h, n * 4);
    return d;
}

/* A device bf16 copy of n floats (h rounded in place to what the device holds). */
static dbuf dbf(float *h, size_t n)
{
    uint16_t *b = xzalloc(n * 2);
    frt_f32_array_to_bf16(h, b, n);
    for (size_t i = 0; i < n; i++) h[i] = frt_bf16_to_f32(b[i]);
    dbuf d = dalloc(n * 2);
    dput(d, 0, b, n * 2);
    free(b);
    return d;
}

/* n values of a device buffer of dtype dt as floats. */
static float *dfloats(dbuf d, size_t n, frt_cuda_dtype dt)
{
    float *h = fnew(n);
    if (dt == FRT_CUDA_F32) {
        dget(d, 0, h, n * 4);
        return h;
    }
    uint16_t *b = xzalloc(n * 2);
    dget(d, 0, b, n * 2);
    for (size_t i = 0; i < n; i++) h[i] = frt_bf16_to_f32(b[i]);
    free(b);
    return h;
}

static void test_norms(int rows, int dim, frt_cuda_dtype dt)
{
    char name[128];
    float *x = frand((size_t)rows * dim, -3, 3), *w = frand(dim, -1, 1), *b = frand(dim, -1, 1);
    float *ref = fnew((size_t)rows * dim);
    dbuf dx = dfl(x, (size_t)rows * dim), dw = dfl(w, dim), db = dfl(b, dim), dout = dalloc((size_t)rows * dim * 4);
    const double tol = dt == FRT_CUDA_BF16 ? 8e-3 : 2e-6;
    CHECK_OK(frt_cuda_layernorm(g_cs, dout.p, dt, dx.p, dw.p, db.p, rows, dim, 1e-6f));
    frt_cpu_layernorm(ref, x, w, b, rows, dim, 1e-6f);
    float *got = dfloats(dout, (size_t)rows * dim, dt);
    snprintf(name, sizeof name, "layernorm %d x %d -> %s", rows, dim, dtn(dt));
    report(name, frt_test_rel_err(got, ref, (size_t)rows * dim), tol);
    free(got);
    CHECK_OK(frt_cuda_rmsnorm_ada(g_cs, dout.p, dt, dx.p, dw.p, db.p, rows, dim, 1e-6f));
    frt_cpu_rmsnorm_ada(ref, x, w, b, rows, dim, 1e-6f);
    got = dfloats(dout, (size_t)rows * dim, dt);
    snprintf(name, sizeof name, "rmsnorm_ada %d x %d -> %s", rows, dim, dtn(dt));
    report(name, frt_test_rel_err(got, ref, (size_t)rows * dim), tol);
    free(got), free(x), free(w), free(b), free(ref);
    dfree(&dx), dfree(&dw), dfree(&db), dfree(&dout);
}

static void test_acts(int rows, int cols, frt_cuda_dtype dt)
{
    static const char *names[] = {"bias", "bias + gelu_tanh", "bias + silu"};
    const size_t n = (size_t)rows * cols;
    float *x = frand(n, -4, 4), *b = frand(cols, -1, 1), *ref = fnew(n), *gu = frand(2 * n, -4, 4);
    dbuf dx = dfl(x, n), db = dfl(b, cols), dout = dalloc(n * 4), dgu = dfl(gu, 2 * n);
    const double tol = dt == FRT_CUDA_BF16 ? 8e-3 : 2e-6;
    char name[128];
    for (int act = 0; act < 3; act++) {
        CHECK_OK(frt_cuda_bias_act(g_cs, dout.p, dt, dx.p, db.p, rows, cols, (frt_cuda_act)act));
        memcpy(ref, x, n * 4);
        frt_cpu_add_bias(ref, b, rows, cols);
        if (act == 1) frt_cpu_gelu_tanh(ref, ref, (int)n);
        if (act == 2) frt_cpu_silu(ref, ref, (int)n);
        float *got = dfloats(dout, n, dt);
        snprintf(name, sizeof name, "%s %d x %d -> %s", names[act], rows, cols, dtn(dt));
        report(name, frt_test_rel_err(got, ref, n), tol);
        free(got);
    }
    float *gate = fnew(n), *up = fnew(n);
    for (int in_dt = 0; in_dt < 2; in_dt++) { /* f32, then bf16 halves (the twin on the rounded values) */
        const frt_cuda_dtype gdt = in_dt ? FRT_CUDA_BF16 : FRT_CUDA_F32;
        if (in_dt) {
            for (size_t i = 0; i < 2 * n; i++) gu[i] = frt_bf16_to_f32(frt_f32_to_bf16(gu[i]));
            dput_as(dgu, 0, gu, 2 * n, FRT_CUDA_BF16);
        }
        CHECK_OK(frt_cuda_geglu_tanh(g_cs, dout.p, dt, dgu.p, gdt, rows, cols));
        for (int r = 0; r < rows; r++) {
            memcpy(gate + (size_t)r * cols, gu + (size_t)r * 2 * cols, (size_t)cols * 4);
            memcpy(up + (size_t)r * cols, gu + (size_t)r * 2 * cols + cols, (size_t)cols * 4);
        }
        frt_cpu_geglu_tanh(ref, gate, up, (int)n);
        float *got = dfloats(dout, n, dt);
        snprintf(name, sizeof name, "geglu_tanh %d x %d %s -> %s", rows, cols, dtn(gdt), dtn(dt));
        report(name, frt_test_rel_err(got, ref, n), tol);
        free(got);
    }
    free(gate), free(up), free(x), free(b), free(ref), free(gu);
    dfree(&dx), dfree(&db), dfree(&dout), dfree(&dgu);
}

/* bias + GELU and GeGLU with every buffer one element further (scalar
 * loads of the same groups): the bits of the aligned (vectorised) call. */
static void test_acts_shifted(int rows, int cols)
{
    const size_t n = (size_t)rows * cols;
    float *x = frand(2 * n, -4, 4), *b = frand(cols, -1, 1);
    dbuf dx = dalloc(2 * n * 4 + 4), db = dalloc((size_t)cols * 4 + 4), dout = dalloc(n * 2 + 2);
    uint16_t *got[2][2];
    for (int off = 0; off < 2; off++) {
        dput(dx, (size_t)off * 4, x, 2 * n * 4), dput(db, (size_t)off * 4, b, (size_t)cols * 4);
        const float *px = (const float *)dx.p + off, *pb = (const float *)db.p + off;
        uint16_t *po = (uint16_t *)dout.p + off;
        CHECK_OK(frt_cuda_bias_act(g_cs, po, FRT_CUDA_BF16, px, pb, rows, cols, FRT_CUDA_ACT_GELU_TANH));
        got[off][0] = xzalloc(n * 2), got[off][1] = xzalloc(n * 2);
        dget(dout, (size_t)off * 2, got[off][0], n * 2);
        CHECK_OK(frt_cuda_geglu_tanh(g_cs, po, FRT_CUDA_BF16, px, FRT_CUDA_F32, rows, cols));
        dget(dout, (size_t)off * 2, got[off][1], n * 2);
    }
    char name[128];
    snprintf(name, sizeof name, "bias + gelu_tanh %d x %d one element further (scalar path): same bits", rows, cols);
    report_same(name, got[1][0], got[0][0], n * 2);
    snprintf(name, sizeof name, "geglu_tanh %d x %d one element further (scalar path): same bits", rows, cols);
    report_same(name, got[1][1], got[0][1], n * 2);
    free(x), free(b), free(got[0][0]), free(got[0][1]), free(got[1][0]), free(got[1][1]);
    dfree(&dx), dfree(&db), dfree(&dout);
}

/* frt_cuda_geglu_quantize: the codes and scales of frt_cuda_geglu_tanh
 * into bf16 followed by frt_cuda_fp8_quantize_rows_dynamic, bit for bit;
 * and the codes decode to within e4m3's step of the cpu GeGLU. */
static void test_geglu_quantize(int rows, int inter)
{
    const size_t n = (size_t)rows * inter;
    float *gu = frand(2 * n, -4, 4);
    dbuf dgu = dbf(gu, 2 * n), dh = dalloc(n * 2), dq = dalloc(n), ds = dalloc((size_t)rows * 4);
    dbuf dq2 = dalloc(n), ds2 = dalloc((size_t)rows * 4);
    CHECK_OK(frt_cuda_geglu_tanh(g_cs, dh.p, FRT_CUDA_BF16, dgu.p, FRT_CUDA_BF16, rows, inter));
    CHECK_OK(frt_cuda_fp8_quantize_rows_dynamic(g_cs, dq.p, ds.p, dh.p, rows, inter));
    CHECK_OK(frt_cuda_geglu_quantize(g_cs, dq2.p, ds2.p, dgu.p, rows, inter));
    uint8_t *q1 = xzalloc(n), *q2 = xzalloc(n);
    float *s1 = fnew((size_t)rows), *s2 = fnew((size_t)rows);
    dget(dq, 0, q1, n), dget(dq2, 0, q2, n), dget(ds, 0, s1, (size_t)rows * 4), dget(ds2, 0, s2, (size_t)rows * 4);
    char name[128];
    snprintf(name, sizeof name, "geglu_quantize %d x %d: the codes of geglu_tanh + quantize_rows_dynamic", rows, inter);
    report_same(name, q2, q1, n);
    snprintf(name, sizeof name, "geglu_quantize %d x %d: their scales", rows, inter);
    report_same(name, s2, s1, (size_t)rows * 4);
    float *gate = fnew(n), *up = fnew(n), *ref = fnew(n), *dec = fnew(n);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < inter; c++) {
            gate[(size_t)r * inter + c] = frt_bf16_to_f32(frt_f32_to_bf16(gu[(size_t)r * 2 * inter + c]));
            up[(size_t)r * inter + c] = frt_bf16_to_f32(frt_f32_to_bf16(gu[(size_t)r * 2 * inter + inter + c]));
        }
    frt_cpu_geglu_tanh(ref, gate, up, (int)n);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < inter; c++)
            dec[(size_t)r * inter + c] = frt_fp8_e4m3_decode(q2[(size_t)r * inter + c]) * s2[r];
    snprintf(name, sizeof name, "geglu_quantize %d x %d decoded, against the cpu GeGLU (e4m3)", rows, inter);
    report(name, frt_test_rel_err(dec, ref, n), 4e-2);
    free(gu), free(q1), free(q2), free(s1), free(s2), free(gate), free(up), free(ref), free(dec);
    dfree(&dgu), dfree(&dh), dfree(&dq), dfree(&ds), dfree(&dq2), dfree(&ds2);
}

/* y = x . w^T or x . w, batched, against a double loop on the bf16 values. */
static void test_bmm(frt_cuda_bmm *h, int m, int n, int k, int batch, int trans_w)
{
    const size_t nx = (size_t)batch * m * k, nw = (size_t)batch * n * k, ny = (size_t)batch * m * n;
    float *x = frand(nx, -1, 1), *w = frand(nw, -1, 1), *ref = fnew(ny);
    dbuf dx = dbf(x, nx), dw = dbf(w, nw), dy = dalloc(ny * 4);
    frt_cuda_bmm_args a = {dy.p, FRT_CUDA_F32, dx.p, dw.p, m, n, k, trans_w, batch, k, trans_w ? k : n, n,
                           (long long)m * k, (long long)n * k, (long long)m * n, 0.5f};
    CHECK_OK(frt_cuda_bmm_run(h, g_cs, &a));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int t = 0; t < k; t++)
                    s += (double)x[(size_t)b * m * k + (size_t)i * k + t] *
                         w[(size_t)b * n * k + (trans_w ? (size_t)j * k + t : (size_t)t * n + j)];
                ref[(size_t)b * m * n + (size_t)i * n + j] = (float)(0.5 * s);
            }
    float *got = dfloats(dy, ny, FRT_CUDA_F32);
    char name[128];
    snprintf(name, sizeof name, "bmm %d x %d x %d, batch %d, %s", m, n, k, batch, trans_w ? "x.w^T" : "x.w");
    report(name, frt_test_rel_err(got, ref, ny), 1e-5);
    free(got), free(x), free(w), free(ref);
    dfree(&dx), dfree(&dw), dfree(&dy);
}

/* A product inside a graph capture: refused without a plan (the heuristic
 * cannot run there), captured and replayed with one, equal to eager. */
typedef struct bmm_rec {
    frt_cuda_bmm *h;
    frt_cuda_bmm_args a;
} bmm_rec;

static int rec_bmm(frt_stream *st, void *user)
{
    bmm_rec *r = user;
    return frt_cuda_bmm_run(r->h, frt_stream_native(st), &r->a);
}

static void test_bmm_capture(void)
{
    const int m = 40, n = 24, k = 32;
    float *x = frand((size_t)m * k, -1, 1), *w = frand((size_t)n * k, -1, 1);
    dbuf dx = dbf(x, (size_t)m * k), dw = dbf(w, (size_t)n * k), dy = dalloc((size_t)m * n * 4);
    dbuf dy2 = dalloc((size_t)m * n * 4);
    bmm_rec r;
    memset(&r, 0, sizeof r);
    CHECK_OK(frt_cuda_bmm_create(1u << 20, &r.h));
    frt_cuda_bmm_args a = {dy.p, FRT_CUDA_F32, dx.p, dw.p, m, n, k, 1, 1, k, k, n, 0, 0, 0, 1.0f};
    r.a = a;
    frt_graph *g = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "bmm", 0, &g));
    CHECK_STATUS(frt_graph_capture(g, 1, g_st, rec_bmm, &r), FRT_ERR_STATE);
    CHECK_OK(frt_cuda_bmm_plan(r.h, &r.a));
    CHECK_OK(frt_graph_capture(g, 1, g_st, rec_bmm, &r));
    CHECK_OK(frt_graph_replay(g, 1, g_st));
    r.a.y = dy2.p; /* eager, same layout and alignment: the same plan */
    CHECK_OK(frt_cuda_bmm_run(r.h, g_cs, &r.a));
    float *g1 = dfloats(dy, (size_t)m * n, FRT_CUDA_F32), *g2 = dfloats(dy2, (size_t)m * n, FRT_CUDA_F32);
    report_same("bmm: refused unplanned in a capture; planned: graph == eager", g1, g2, (size_t)m * n * 4);
    frt_graph_destroy(g);
    frt_cuda_bmm_destroy(r.h);
    free(x), free(w), free(g1), free(g2);
    dfree(&dx), dfree(&dw), dfree(&dy), dfree(&dy2);
}

/* One attention layer, both ways, `reps` times in one graph: the
 * products (after the RoPE kernel when d.slots > 0) and the fused launch
 * (RoPE on load when rope.qkv is set). */
typedef struct attn_timing {
    frt_cuda_bmm *h;
    frt_cuda_attn_args prod, fused; /* the products' form (q from the rope kernel), the fused one */
    frt_cuda_attn_rope rope;
    pi0_kv_slots d;
    const float *qkv, *inv;
    int n, heads, hd, reps;
} attn_timing;

/* [RoPE kernel +] S product + masked softmax + P V product. */
static int rec_attn_products(frt_stream *st, void *user)
{
    const attn_timing *t = user;
    void *s = frt_stream_native(st);
    for (int i = 0; i < t->reps; i++) {
        if (t->d.slots)
            FRT_TRY(pi0_cuda_qkv_rope_slots(s, (uint16_t *)t->prod.q, &t->d, t->hd, t->hd, t->qkv, t->inv, t->n, t->heads,
                                        1, t->hd));
        FRT_TRY(frt_cuda_attention_masked(t->h, s, &t->prod));
    }
    return 0;
}

/* frt_cuda_attention_fused [with RoPE on load]. */
static int rec_attn_fused(frt_stream *st, void *user)
{
    const attn_timing *t = user;
    const frt_cuda_attn_rope *r = t->rope.qkv ? &t->rope : NULL;
    for (int i = 0; i < t->reps; i++) FRT_TRY(frt_cuda_attention_fused(frt_stream_native(st), &t->fused, r));
    return 0;
}

/* Prints the time per layer of t both ways in graphs of 18 layers (an
 * expert step's worth). */
static void time_attention(attn_timing *t, const char *what)
{
    frt_cuda_bmm *h = NULL;
    CHECK_OK(frt_cuda_bmm_create(4u << 20, &h));
    if (!h) return;
    t->h = h, t->reps = 18;
    CHECK_OK(frt_cuda_attention_masked_plan(h, &t->prod));
    const double us_p = graph_us("policy attention products", rec_attn_products, t, t->reps);
    const double us_f = graph_us("policy attention fused", rec_attn_fused, t, t->reps);
    printf("  timing: %s, %d query rows over %d keys, batch %d: %sproducts %.2f us, fused %.2f us a layer (graph of "
           "18)\n",
           what, t->fused.n_q * t->fused.n_heads, t->fused.n_kv, t->fused.batch > 1 ? t->fused.batch : 1,
           t->d.slots ? "RoPE kernel + " : "", us_p, us_f);
    frt_cuda_bmm_destroy(h);
}



/* One masked attention case: n_q queries over n_kv keys (rows of ldkv),
 * mask as given (d_kmask / d_rmask filled from kmask / rmask). */
typedef struct attn_case {
    const char *name;
    int n_q, n_kv, heads, kv_heads, hd, ld_s;
    int kmask_len, sfx_start, sfx_n, solo_first, use_rmask;
    int sparse; /* the prefix mask allows 1 key in 97 (whole key splits empty), else 3 in 4 */
} attn_case;

/* fused: frt_cuda_attention_fused (one launch) instead of the products. */
static void test_attention(frt_cuda_bmm *h, const attn_case *c, int fused)
{
    const int Q = c->heads * c->hd, KV = c->kv_heads * c->hd;
    const size_t nq = (size_t)c->n_q * Q, nk = (size_t)c->n_kv * KV;
    float *q = frand(nq, -1, 1), *k = frand(nk, -1, 1), *v = frand(nk, -1, 1), *ref = fnew(nq);
    uint8_t *km = xzalloc((size_t)c->kmask_len + 1), *rm = xzalloc((size_t)c->n_q);
    for (int j = 0; j < c->kmask_len; j++) km[j] = c->sparse ? j % 97 == 5 : frt_test_u64() % 4 != 0;
    for (int t = 0; t < c->n_q; t++) rm[t] = !c->use_rmask || frt_test_u64() % 5 != 0;
    dbuf dq = dbf(q, nq), dk = dbf(k, nk), dv = dbf(v, nk), dout = dalloc(nq * 2);
    dbuf ds = dalloc((size_t)c->n_q * c->heads * c->ld_s * 4), dp = dalloc((size_t)c->n_q * c->heads * c->ld_s * 2);
    dbuf dkm = dalloc((size_t)c->kmask_len + 1), drm = dalloc((size_t)c->n_q);
    dput(dkm, 0, km, (size_t)c->kmask_len + 1);
    dput(drm, 0, rm, (size_t)c->n_q);
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.out = dout.p, a.q = dq.p, a.k = dk.p, a.v = dv.p, a.ldq = Q, a.ldkv = KV;
    a.n_q = c->n_q, a.n_kv = c->n_kv, a.n_heads = c->heads, a.n_kv_heads = c->kv_heads, a.head_dim = c->hd;
    a.scale = 1.0f / sqrtf((float)c->hd), a.scores = ds.p, a.probs = dp.p, a.ld_s = c->ld_s;
    a.mask.d_kmask = dkm.p, a.mask.kmask_len = c->kmask_len, a.mask.sfx_start = c->sfx_start;
    a.mask.sfx_n = c->sfx_n, a.mask.solo_first = c->solo_first, a.mask.d_rmask = c->use_rmask ? drm.p : NULL;
    if (fused) a.scores = NULL, a.probs = NULL; /* not read */
    CHECK_OK(fused ? frt_cuda_attention_fused(g_cs, &a, NULL) : frt_cuda_attention_masked(h, g_cs, &a));
    uint8_t *allow = xzalloc((size_t)c->n_q * c->n_kv);
    for (int t = 0; t < c->n_q; t++)
        for (int j = 0; j < c->n_kv; j++) {
            int on = j < c->kmask_len ? km[j] : j >= c->sfx_start && j - c->sfx_start < c->sfx_n &&
                                                    (!c->solo_first || t > 0 || j == c->sfx_start);
            allow[(size_t)t * c->n_kv + j] = rm[t] && on;
        }
    frt_cpu_attention_masked(ref, q, k, v, allow, c->n_q, c->n_kv, c->heads, c->kv_heads, c->hd, a.scale);
    float *got = dfloats(dout, nq, FRT_CUDA_BF16);
    char name[160];
    snprintf(name, sizeof name, "%s%s", fused ? "fused " : "", c->name);
    report(name, frt_test_rel_err(got, ref, nq), 1.5e-2);
    if (fused && (long long)c->n_q * c->heads >= 4096) { /* the prefix's size: both ways timed */
        attn_timing t = {.prod = a, .fused = a};
        t.prod.scores = ds.p, t.prod.probs = dp.p;
        time_attention(&t, c->name);
    }
    free(got), free(q), free(k), free(v), free(ref), free(km), free(rm), free(allow);
    dfree(&dq), dfree(&dk), dfree(&dv), dfree(&dout), dfree(&ds), dfree(&dp), dfree(&dkm), dfree(&drm);
}

/* frt_cuda_attention_masked_many: three MHA attentions of one layout (q /
 * k / v of camera slots one after another, scores following each other)
 * give the bytes of three single calls; a slot whose scores do not follow
 * is refused. */
static void test_attention_many(frt_cuda_bmm *h)
{
    enum { N = 3, NQ = 37, HEADS = 3, HD = 24, LD = 40 };
    const int D = HEADS * HD;
    const size_t nx = (size_t)N * NQ * 3 * D, nout = (size_t)N * NQ * D, ns = (size_t)N * HEADS * NQ * LD;
    float *qkv = frand(nx, -1, 1);
    dbuf dqkv = dbf(qkv, nx), d1 = dalloc(nout * 2), d2 = dalloc(nout * 2), ds = dalloc(ns * 4), dp = dalloc(ns * 2);
    frt_cuda_attn_args a[N];
    memset(a, 0, sizeof a);
    for (int i = 0; i < N; i++) {
        const uint16_t *q = (const uint16_t *)dqkv.p + (size_t)i * NQ * 3 * D;
        a[i].q = q, a[i].k = q + D, a[i].v = q + 2 * D, a[i].ldq = a[i].ldkv = 3 * D;
        a[i].n_q = a[i].n_kv = NQ, a[i].n_heads = a[i].n_kv_heads = HEADS, a[i].head_dim = HD;
        a[i].scale = 1.0f / sqrtf((float)HD), a[i].ld_s = LD;
        a[i].scores = (float *)ds.p + (size_t)i * HEADS * NQ * LD;
        a[i].probs = (uint16_t *)dp.p + (size_t)i * HEADS * NQ * LD;
        a[i].mask.kmask_len = a[i].mask.sfx_start = NQ;
        a[i].out = (uint16_t *)d1.p + (size_t)i * NQ * D;
        CHECK_OK(frt_cuda_attention_masked(h, g_cs, &a[i]));
        a[i].out = (uint16_t *)d2.p + (size_t)i * NQ * D;
    }
    CHECK_OK(frt_cuda_attention_masked_many(h, g_cs, a, N));
    uint16_t *g1 = xzalloc(nout * 2), *g2 = xzalloc(nout * 2);
    dget(d1, 0, g1, nout * 2), dget(d2, 0, g2, nout * 2);
    report_same("attention_many: 3 camera slots == 3 single calls", g1, g2, nout * 2);
    a[2].scores = a[0].scores; /* does not follow */
    CHECK_STATUS(frt_cuda_attention_masked_many(h, g_cs, a, N), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_attention_masked_many(h, g_cs, a, 0), FRT_ERR_INVALID_ARGUMENT);
    free(qkv), free(g1), free(g2);
    dfree(&dqkv), dfree(&d1), dfree(&d2), dfree(&ds), dfree(&dp);
}

/* frt_cuda_attention_mha: `cams` unmasked MHA attentions of n rows (heads
 * of hd) inside a fused q | k | v row layout (SigLIP's), against
 * frt_cpu_attention_masked with every key allowed, the same bits on a
 * second launch; at the SigLIP shape timed against
 * frt_cuda_attention_masked_many (a graph of 27 of each). */
typedef struct mha_timing {
    frt_cuda_bmm *h;
    frt_cuda_mha_args m, mf; /* mf: the model's form, from the f32 projection plus its bias */
    frt_cuda_attn_args a[3];
    int cams;
} mha_timing;

static int rec_mha_f32(frt_stream *st, void *user)
{
    mha_timing *t = user;
    for (int i = 0; i < 27; i++) FRT_TRY(frt_cuda_attention_mha(frt_stream_native(st), &t->mf));
    return 0;
}

static int rec_mha(frt_stream *st, void *user)
{
    mha_timing *t = user;
    for (int i = 0; i < 27; i++) FRT_TRY(frt_cuda_attention_mha(frt_stream_native(st), &t->m));
    return 0;
}

static int rec_mha_products(frt_stream *st, void *user)
{
    mha_timing *t = user;
    for (int i = 0; i < 27; i++) FRT_TRY(frt_cuda_attention_masked_many(t->h, frt_stream_native(st), t->a, t->cams));
    return 0;
}

static void test_mha(frt_cuda_bmm *h, int cams, int n, int heads, int hd)
{
    const int D = heads * hd, LD = 3 * D + 8; /* rows a little wider than q | k | v */
    const size_t nx = (size_t)cams * n * LD, nout = (size_t)cams * n * D;
    float *qkv = frand(nx, -1.5f, 1.5f);
    dbuf dqkv = dbf(qkv, nx), dout = dalloc(nout * 2);
    frt_cuda_mha_args m = {.out = dout.p, .q = dqkv.p, .k = (const uint16_t *)dqkv.p + D,
                           .v = (const uint16_t *)dqkv.p + 2 * D, .ldq = LD, .ldkv = LD, .ldo = D, .n = n,
                           .n_heads = heads, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd), .batch = cams,
                           .sq = (long long)n * LD, .skv = (long long)n * LD, .so = (long long)n * D};
    CHECK_OK(frt_cuda_attention_mha_check(&m));
    CHECK_OK(frt_cuda_attention_mha(g_cs, &m));
    float *got = dfloats(dout, nout, FRT_CUDA_BF16), *ref = fnew(nout);
    float *q = fnew((size_t)n * D), *k = fnew((size_t)n * D), *v = fnew((size_t)n * D);
    uint8_t *allow = xzalloc((size_t)n * n);
    memset(allow, 1, (size_t)n * n);
    for (int c = 0; c < cams; c++) {
        for (int r = 0; r < n; r++)
            for (int j = 0; j < D; j++) {
                const float *row = qkv + ((size_t)c * n + r) * LD;
                q[(size_t)r * D + j] = row[j], k[(size_t)r * D + j] = row[D + j], v[(size_t)r * D + j] = row[2 * D + j];
            }
        frt_cpu_attention_masked(ref + (size_t)c * n * D, q, k, v, allow, n, n, heads, heads, hd, m.scale);
    }
    char name[160];
    snprintf(name, sizeof name, "attention_mha %d x (%d x %d, %d heads x %d)", cams, n, n, heads, hd);
    report(name, frt_test_rel_err(got, ref, nout), 1.5e-2);
    CHECK_OK(frt_cuda_attention_mha(g_cs, &m));
    float *got2 = dfloats(dout, nout, FRT_CUDA_BF16);
    report_same("attention_mha: a second launch, the same bits", got2, got, nout * 4);
    { /* the f32 form: contiguous [cams n, 3 D] projection rows plus a bias, against frt_cuda_bias_act into bf16,
       * then the bf16 form */
        float *pf = frand(nx, -1.5f, 1.5f), *bias = frand((size_t)3 * D, -0.5f, 0.5f);
        dbuf dpf = dfl(pf, nx), dbias = dfl(bias, (size_t)3 * D), dbfq = dalloc(nx * 2), dout2 = dalloc(nout * 2);
        CHECK_OK(frt_cuda_bias_act(g_cs, dbfq.p, FRT_CUDA_BF16, dpf.p, dbias.p, cams * n, 3 * D, FRT_CUDA_ACT_NONE));
        frt_cuda_mha_args mb = m;
        mb.q = dbfq.p, mb.k = (const uint16_t *)dbfq.p + D, mb.v = (const uint16_t *)dbfq.p + 2 * D;
        mb.ldq = mb.ldkv = 3 * D, mb.sq = mb.skv = (long long)n * 3 * D;
        frt_cuda_mha_args mf = m;
        mf.q = mf.k = mf.v = NULL, mf.out = dout2.p;
        mf.qkv_f32 = dpf.p, mf.bias = dbias.p, mf.ld_f32 = 3 * D, mf.s_f32 = (long long)n * 3 * D;
        CHECK_OK(frt_cuda_attention_mha(g_cs, &mb));
        CHECK_OK(frt_cuda_attention_mha(g_cs, &mf));
        uint16_t *o1 = xzalloc(nout * 2), *o2 = xzalloc(nout * 2);
        dget(dout, 0, o1, nout * 2), dget(dout2, 0, o2, nout * 2);
        report_same("attention_mha: f32 q | k | v + bias == bias_act into bf16, then bf16", o2, o1, nout * 2);
        free(pf), free(bias), free(o1), free(o2);
        dfree(&dpf), dfree(&dbias), dfree(&dbfq), dfree(&dout2);
    }
    if (n == 256 && hd == 72) { /* SigLIP So400m: both ways timed */
        const int LS = 256;
        dbuf ds = dalloc((size_t)cams * heads * n * LS * 4), dp = dalloc((size_t)cams * heads * n * LS * 2);
        mha_timing t = {.h = h, .m = m, .cams = cams};
        for (int c = 0; c < cams; c++) {
            frt_cuda_attn_args *a = &t.a[c];
            memset(a, 0, sizeof *a);
            const uint16_t *qc = (const uint16_t *)dqkv.p + (size_t)c * n * LD;
            a->out = (uint16_t *)dout.p + (size_t)c * n * D, a->q = qc, a->k = qc + D, a->v = qc + 2 * D;
            a->ldq = a->ldkv = LD, a->n_q = a->n_kv = n, a->n_heads = a->n_kv_heads = heads, a->head_dim = hd;
            a->scale = m.scale, a->ld_s = LS;
            a->scores = (float *)ds.p + (size_t)c * heads * n * LS;
            a->probs = (uint16_t *)dp.p + (size_t)c * heads * n * LS;
            a->mask.kmask_len = a->mask.sfx_start = n;
            CHECK_OK(frt_cuda_attention_masked_plan(h, a));
        }
        float *pf = frand((size_t)cams * n * 3 * D, -1.5f, 1.5f), *bias = frand((size_t)3 * D, -0.5f, 0.5f);
        dbuf dpf = dfl(pf, (size_t)cams * n * 3 * D), dbias = dfl(bias, (size_t)3 * D);
        t.mf = m, t.mf.q = t.mf.k = t.mf.v = NULL;
        t.mf.qkv_f32 = dpf.p, t.mf.bias = dbias.p, t.mf.ld_f32 = 3 * D, t.mf.s_f32 = (long long)n * 3 * D;
        const double us_p = graph_us("mha products", rec_mha_products, &t, 27);
        const double us_m = graph_us("mha one launch", rec_mha, &t, 27);
        const double us_f = graph_us("mha one launch, f32", rec_mha_f32, &t, 27);
        printf("  timing: SigLIP attention, %d cameras x %d heads of %d over %d patches (graph of 27): products + "
               "softmax (%d launches) %.2f us, one launch %.2f us (from the f32 projection + bias, the model's: "
               "%.2f us)\n",
               cams, heads, hd, n, 2 * cams + 1, us_p, us_m, us_f);
        free(pf), free(bias);
        dfree(&ds), dfree(&dp), dfree(&dpf), dfree(&dbias);
    }
    free(qkv), free(got), free(got2), free(ref), free(q), free(k), free(v), free(allow);
    dfree(&dqkv), dfree(&dout);
}

/* frt_cuda_attention_mha's refusals, before any device call. */
static void test_mha_args(void)
{
    _Alignas(16) uint16_t b[64];
    frt_cuda_mha_args m = {.out = b, .q = b, .k = b, .v = b, .ldq = 24, .ldkv = 24, .ldo = 24, .n = 9,
                           .n_heads = 3, .head_dim = 8, .scale = 0.3f, .batch = 2, .sq = 216, .skv = 216, .so = 216};
    CHECK_OK(frt_cuda_attention_mha_check(&m));
    frt_cuda_mha_args x = m;
    CHECK_STATUS(frt_cuda_attention_mha_check(NULL), FRT_ERR_INVALID_ARGUMENT);
    x.v = NULL;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = m, x.n = 0;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = m, x.ldq = 23; /* under heads x head_dim */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = m, x.scale = 0.0f;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = m, x.skv = -1;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = m, x.n = 257; /* more keys than it stages */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
    x = m, x.head_dim = 12, x.ldq = x.ldkv = x.ldo = 48;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
    x = m, x.head_dim = 136, x.n_heads = 1, x.ldq = x.ldkv = x.ldo = 136;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
    x = m, x.q = b + 1; /* not 16-byte aligned */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
    x = m, x.sq = 212;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
    _Alignas(16) float f[64];
    frt_cuda_mha_args y = m; /* the f32 form */
    y.q = y.k = y.v = NULL, y.qkv_f32 = f, y.ld_f32 = 72, y.s_f32 = 648;
    CHECK_OK(frt_cuda_attention_mha_check(&y));
    x = y, x.q = b; /* both forms */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = m, x.k = NULL; /* part of the bf16 form */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = y, x.ld_f32 = 71; /* under 3 heads x head_dim */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_INVALID_ARGUMENT);
    x = y, x.ld_f32 = 74; /* not 16-byte aligned */
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
    x = y, x.bias = f + 1;
    CHECK_STATUS(frt_cuda_attention_mha(NULL, &x), FRT_ERR_UNSUPPORTED);
}

/* The allow matrix of one attention of the expert form (prefix mask km,
 * then sfx_n suffix keys from sfx_start, block-causal when solo_first). */
static uint8_t *allow_of(const attn_case *c, const uint8_t *km)
{
    uint8_t *allow = xzalloc((size_t)c->n_q * c->n_kv);
    for (int t = 0; t < c->n_q; t++)
        for (int j = 0; j < c->n_kv; j++)
            allow[(size_t)t * c->n_kv + j] = j < c->kmask_len ? km[j] : j >= c->sfx_start &&
                                                                          j - c->sfx_start < c->sfx_n &&
                                                                          (!c->solo_first || t > 0 || j == c->sfx_start);
    return allow;
}

/* A batch of 2 attentions of the one-KV-head form (fused CFG's slots):
 * each its own q, K / V (skv apart) and prefix mask (kmask_stride apart),
 * against the twin per attention. A case with use_rmask is the
 * bidirectional prefix (fused CFG's two prefixes): its mask is also the
 * row mask (d_rmask = d_kmask, batch b's at b kmask_stride). */
static void test_attention_batch(frt_cuda_bmm *h, const attn_case *c, int fused)
{
    enum { B = 2 };
    const int Q = c->heads * c->hd, KV = c->hd, MS = c->kmask_len + 41; /* the masks an odd distance apart */
    const size_t nq = (size_t)c->n_q * Q, nk = (size_t)c->n_kv * KV, ns = (size_t)c->n_q * c->heads * c->ld_s;
    float *q = frand(B * nq, -1, 1), *k = frand(B * nk, -1, 1), *v = frand(B * nk, -1, 1), *ref = fnew(nq);
    uint8_t *km = xzalloc((size_t)B * MS);
    for (int i = 0; i < B * MS; i++) km[i] = frt_test_u64() % 4 != 0;
    dbuf dq = dbf(q, B * nq), dk = dbf(k, B * nk), dv = dbf(v, B * nk), dout = dalloc(B * nq * 2);
    dbuf ds = dalloc(B * ns * 4), dp = dalloc(B * ns * 2), dkm = dalloc((size_t)B * MS);
    dput(dkm, 0, km, (size_t)B * MS);
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.out = dout.p, a.q = dq.p, a.k = dk.p, a.v = dv.p, a.ldq = Q, a.ldkv = KV;
    a.n_q = c->n_q, a.n_kv = c->n_kv, a.n_heads = c->heads, a.n_kv_heads = 1, a.head_dim = c->hd;
    a.scale = 1.0f / sqrtf((float)c->hd), a.scores = ds.p, a.probs = dp.p, a.ld_s = c->ld_s;
    a.mask.d_kmask = dkm.p, a.mask.kmask_len = c->kmask_len, a.mask.sfx_start = c->sfx_start;
    a.mask.sfx_n = c->sfx_n, a.mask.solo_first = c->solo_first, a.mask.kmask_stride = MS;
    if (c->use_rmask) a.mask.d_rmask = dkm.p;
    a.batch = B, a.sq = a.sout = (long long)nq, a.skv = (long long)nk;
    if (fused) {
        CHECK_OK(frt_cuda_attention_fused(g_cs, &a, NULL));
    } else {
        CHECK_OK(frt_cuda_attention_masked_plan(h, &a));
        CHECK_OK(frt_cuda_attention_masked(h, g_cs, &a));
    }
    float *got = dfloats(dout, B * nq, FRT_CUDA_BF16);
    for (int b = 0; b < B; b++) {
        uint8_t *allow = allow_of(c, km + b * MS);
        for (int t = 0; c->use_rmask && t < c->n_q; t++)
            if (!km[b * MS + t]) memset(allow + (size_t)t * c->n_kv, 0, (size_t)c->n_kv);
        frt_cpu_attention_masked(ref, q + b * nq, k + b * nk, v + b * nk, allow, c->n_q, c->n_kv, c->heads, 1, c->hd,
                                 a.scale);
        char name[128];
        snprintf(name, sizeof name, "%s%s, batch of 2: attention %d", fused ? "fused " : "", c->name, b);
        report(name, frt_test_rel_err(got + b * nq, ref, nq), 1.5e-2);
        free(allow);
    }
    a.n_kv_heads = a.n_heads = 2, a.ldq = a.ldkv = 2 * c->hd; /* the MHA form: no batch */
    CHECK_STATUS(fused ? frt_cuda_attention_fused(g_cs, &a, NULL) : frt_cuda_attention_masked(h, g_cs, &a),
                 FRT_ERR_UNSUPPORTED);
    a.n_kv_heads = 1, a.skv = -1;
    CHECK_STATUS(fused ? frt_cuda_attention_fused(g_cs, &a, NULL) : frt_cuda_attention_masked(h, g_cs, &a),
                 FRT_ERR_INVALID_ARGUMENT);
    free(got), free(q), free(k), free(v), free(ref), free(km);
    dfree(&dq), dfree(&dk), dfree(&dv), dfree(&dout), dfree(&ds), dfree(&dp), dfree(&dkm);
}

/* The reference of one slot of test_attention_rope: q and the suffix k
 * RoPE'd from qkv [n, heads + 2, hd] by the cpu twin at pos, prefix keys
 * from kc (rows < sfx_start), then the twin attention. */
static void rope_ref(float *ref, const float *qkv, const float *kc, const float *vc, const uint8_t *allow,
                     const int32_t *pos, const attn_case *c, float theta)
{
    const int n = c->n_q, W = (c->heads + 2) * c->hd, hd = c->hd;
    float *q = fnew((size_t)n * c->heads * hd), *k = fnew((size_t)c->n_kv * hd), *v = fnew((size_t)c->n_kv * hd);
    memcpy(k, kc, (size_t)c->sfx_start * hd * 4), memcpy(v, vc, (size_t)c->sfx_start * hd * 4);
    for (int t = 0; t < n; t++) {
        memcpy(q + (size_t)t * c->heads * hd, qkv + (size_t)t * W, (size_t)c->heads * hd * 4);
        memcpy(k + (size_t)(c->sfx_start + t) * hd, qkv + (size_t)t * W + c->heads * hd, (size_t)hd * 4);
        memcpy(v + (size_t)(c->sfx_start + t) * hd, qkv + (size_t)t * W + (c->heads + 1) * hd, (size_t)hd * 4);
    }
    frt_cpu_rope(q, n, c->heads, hd, hd, pos, theta);
    frt_cpu_rope(k + (size_t)c->sfx_start * hd, n, 1, hd, hd, pos, theta);
    frt_cpu_attention_masked(ref, q, k, v, allow, n, c->n_kv, c->heads, 1, hd, 1.0f / sqrtf((float)hd));
    free(q), free(k), free(v);
}

/* The expert attention timed both ways at batch `batch` (2: fused CFG);
 * the fused graph's output is the eager call's (bytes). */
static void time_expert_attention(attn_timing *t, int batch, dbuf out, const uint16_t *eager, size_t bytes)
{
    t->prod.batch = t->fused.batch = batch;
    t->d.slots = batch;
    time_attention(t, "expert attention, RoPE on load");
    if (batch != 2) return;
    uint16_t *g = xzalloc(bytes);
    dget(out, 0, g, bytes);
    report_same("fused attention, RoPE on load: graph replay == eager call", g, eager, bytes);
    free(g);
}

/* RoPE on load (the expert's path, fused CFG's batch of 2 with a prefix of
 * its own per slot, positions after 5/6 and 9/10 of it valid): the
 * bytes of pi0_cuda_qkv_rope_slots + frt_cuda_attention_fused on the q and
 * the cache it writes, although the cache's suffix rows hold garbage here;
 * the table of pi0_cuda_suffix_pos against cosf / sinf; each slot against
 * the twins (frt_cpu_rope, frt_cpu_attention_masked); with `timing`, the
 * time of both ways (time_expert_attention). */
static void test_attention_rope(int n, int heads, int hd, int solo_first, int P, int timing)
{
    enum { B = 2 };
    const int PP = (P + 7) / 8 * 8, MS = P + 33;
    const float theta = 10000.0f;
    const int W = (heads + 2) * hd, half = hd / 2, nkv = PP + (n + 7) / 8 * 8;
    const attn_case c = {"rope", n, nkv, heads, 1, hd, 0, P, PP, n, solo_first, 0, 0};
    const size_t nqkv = (size_t)B * n * W, nc = (size_t)B * nkv * hd, nq = (size_t)n * heads * hd;
    float *qkv = frand(nqkv, -2, 2), *kc = frand(nc, -1, 1), *vc = frand(nc, -1, 1), inv[128];
    uint8_t *km = xzalloc((size_t)B * MS);
    for (int i = 0; i < B * MS; i++) km[i] = frt_test_u64() % 4 != 0;
    for (int i = 0; i < half; i++) inv[i] = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
    const int32_t meta[B][4] = {{P, P - P / 6, 0, 0}, {P, P - P / 10, 0, 0}}; /* valid prefix rows per slot */
    dbuf dqkv = dfl(qkv, nqkv), dinv = dfl(inv, (size_t)half), dmeta = dalloc(sizeof meta), dkm = dalloc((size_t)B * MS);
    dbuf dka = dbf(kc, nc), dva = dbf(vc, nc), dkb = dbf(kc, nc), dvb = dbf(vc, nc), dq = dalloc((size_t)B * nq * 2);
    dbuf dpos = dalloc((size_t)B * n * 4), dcs = dalloc((size_t)B * n * hd * 4);
    dbuf oa = dalloc((size_t)B * nq * 2), ob = dalloc((size_t)B * nq * 2);
    dput(dmeta, 0, meta, sizeof meta), dput(dkm, 0, km, (size_t)B * MS);
    pi0_kv_slots d;
    memset(&d, 0, sizeof d);
    d.slots = B;
    for (int b = 0; b < B; b++) {
        int32_t *pos = (int32_t *)dpos.p + b * n;
        CHECK_OK(pi0_cuda_suffix_pos(g_cs, pos, (float *)dcs.p + (size_t)b * n * hd, dinv.p,
                                     (const int32_t *)dmeta.p + 4 * b, n, half));
        d.k[b] = (uint16_t *)dka.p + ((size_t)b * nkv + PP) * hd, d.v[b] = (uint16_t *)dva.p + ((size_t)b * nkv + PP) * hd;
        d.pos[b] = pos;
    }
    CHECK_OK(pi0_cuda_qkv_rope_slots(g_cs, dq.p, &d, hd, hd, dqkv.p, dinv.p, n, heads, 1, hd));
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.out = oa.p, a.q = dq.p, a.k = dka.p, a.v = dva.p, a.ldq = heads * hd, a.ldkv = hd;
    a.n_q = n, a.n_kv = nkv, a.n_heads = heads, a.n_kv_heads = 1, a.head_dim = hd, a.scale = 1.0f / sqrtf((float)hd);
    a.mask.d_kmask = dkm.p, a.mask.kmask_len = P, a.mask.sfx_start = PP, a.mask.sfx_n = n;
    a.mask.solo_first = solo_first, a.mask.kmask_stride = MS;
    a.batch = B, a.sq = a.sout = (long long)nq, a.skv = (long long)nkv * hd;
    CHECK_OK(frt_cuda_attention_fused(g_cs, &a, NULL));
    const frt_cuda_attn_rope r = {dqkv.p, dcs.p, (long long)n * hd};
    a.out = ob.p, a.q = NULL, a.k = dkb.p, a.v = dvb.p; /* the suffix rows of this cache are not the rope's */
    CHECK_OK(frt_cuda_attention_fused(g_cs, &a, &r));
    uint16_t *ga = xzalloc((size_t)B * nq * 2), *gb = xzalloc((size_t)B * nq * 2);
    dget(oa, 0, ga, (size_t)B * nq * 2), dget(ob, 0, gb, (size_t)B * nq * 2);
    char name[160];
    snprintf(name, sizeof name, "fused attention, RoPE on load (%d x %d heads x %d): == rope kernel + fused", n,
             heads, hd);
    report_same(name, ga, gb, (size_t)B * nq * 2);
    if (timing) {
        dbuf ds = dalloc((size_t)B * nq / hd * nkv * 4), dp = dalloc((size_t)B * nq / hd * nkv * 2);
        attn_timing t = {.prod = a, .fused = a, .rope = r, .d = d, .qkv = dqkv.p, .inv = dinv.p, .n = n,
                         .heads = heads, .hd = hd};
        t.prod.out = oa.p, t.prod.q = dq.p, t.prod.k = dka.p, t.prod.v = dva.p;
        t.prod.scores = ds.p, t.prod.probs = dp.p, t.prod.ld_s = nkv;
        time_expert_attention(&t, 1, ob, gb, (size_t)B * nq * 2);
        time_expert_attention(&t, 2, ob, gb, (size_t)B * nq * 2);
        dfree(&ds), dfree(&dp);
    }
    float *cs = dfloats(dcs, (size_t)B * n * hd, FRT_CUDA_F32), *cref = fnew((size_t)B * n * hd);
    int32_t *pos = xzalloc((size_t)B * n * 4);
    dget(dpos, 0, pos, (size_t)B * n * 4);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < n; t++) {
            CHECK(pos[b * n + t] == meta[b][1] + t);
            for (int p = 0; p < half; p++) {
                const float ang = (float)(meta[b][1] + t) * inv[p];
                cref[((size_t)b * n + t) * hd + 2 * p] = cosf(ang), cref[((size_t)b * n + t) * hd + 2 * p + 1] = sinf(ang);
            }
        }
    report("suffix_pos: the RoPE table (cos, sin) of the suffix positions", frt_test_rel_err(cs, cref, (size_t)B * n * hd),
           1e-6);
    float *got = dfloats(ob, (size_t)B * nq, FRT_CUDA_BF16), *ref = fnew(nq);
    for (int b = 0; b < B; b++) {
        uint8_t *allow = allow_of(&c, km + b * MS);
        rope_ref(ref, qkv + (size_t)b * n * W, kc + (size_t)b * nkv * hd, vc + (size_t)b * nkv * hd, allow, pos + b * n,
                 &c, theta);
        snprintf(name, sizeof name, "fused attention, RoPE on load (%d x %d heads x %d): slot %d vs twins", n, heads, hd,
                 b);
        report(name, frt_test_rel_err(got + (size_t)b * nq, ref, nq), 1.5e-2);
        free(allow);
    }
    free(qkv), free(kc), free(vc), free(km), free(ga), free(gb), free(cs), free(cref), free(pos), free(got), free(ref);
    dfree(&dqkv), dfree(&dinv), dfree(&dmeta), dfree(&dkm), dfree(&dka), dfree(&dva), dfree(&dkb), dfree(&dvb);
    dfree(&dq), dfree(&dpos), dfree(&dcs), dfree(&oa), dfree(&ob);
}

/* frt_cuda_attention_fused against the twin: every head_dim it takes, the
 * prefix form (row mask: some rows without a key), the expert forms at
 * the real Pi0 / Pi0.5 sizes (8 heads x 256, ~400 query rows: several row
 * blocks, keys over all 8 splits, the padding between prefix and suffix),
 * a prefix mask that empties whole splits, tiny key counts (splits without
 * a key), fused CFG's batch of 2, and the Pi0.5 prefix's size (timed
 * against the products: the prefix still attends with them). */
static void test_attentions_fused(frt_cuda_bmm *h)
{
    static const attn_case cases[] = {
        {"attention 1 KV head, prefix mask, 29 x 29, 4 heads x 32", 29, 29, 4, 1, 32, 32, 29, 29, 0, 0, 1, 0},
        {"attention 1 KV head, prefix mask, 133 x 133, 8 heads x 64", 133, 133, 8, 1, 64, 136, 133, 133, 0, 0, 1, 0},
        {"attention 1 KV head, prefix mask, 70 x 70, 2 heads x 128", 70, 70, 2, 1, 128, 72, 70, 70, 0, 0, 1, 0},
        {"attention expert Pi0 small (state token), 23 + 7 keys, 2 heads x 16", 7, 24 + 8, 2, 1, 16, 32, 23, 24, 7,
         1, 0, 0},
        {"attention expert Pi0, 611 + 51 keys, 8 heads x 256", 51, 616 + 56, 8, 1, 256, 672, 611, 616, 51, 1, 0, 0},
        {"attention expert Pi0.5, 968 + 50 keys, 8 heads x 256", 50, 968 + 56, 8, 1, 256, 1024, 968, 968, 50, 0,
         0, 0},
        {"attention expert Pi0.5, 1 + 3 keys, 3 heads x 256", 3, 8 + 3, 3, 1, 256, 16, 1, 8, 3, 0, 0, 0},
        {"attention expert Pi0, sparse prefix mask, 611 + 51 keys, 8 heads x 256", 51, 616 + 56, 8, 1, 256, 672, 611,
         616, 51, 1, 0, 1},
        {"attention 1 KV head, Pi0.5 prefix (3 cameras, 200 tokens), 968 x 968, 8 heads x 256", 968, 968, 8, 1, 256,
         968, 968, 968, 0, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_attention(h, &cases[i], 1);
    test_attention_batch(h, &cases[3], 1);
    test_attention_batch(h, &cases[5], 1);
    test_attention_batch(h, &cases[1], 1); /* two prefixes: the row mask too */
    test_attention_rope(51, 8, 256, 1, 300, 0);
    test_attention_rope(50, 8, 256, 0, 968, 1); /* Pi0.5: 3 cameras and 200 prompt tokens */
    test_attention_rope(7, 2, 16, 0, 23, 0);
}

static void test_attentions(void)
{
    frt_cuda_bmm *h = NULL;
    CHECK_OK(frt_cuda_bmm_create(4u << 20, &h));
    if (!h) return;
    test_bmm(h, 37, 29, 24, 3, 1);
    test_bmm(h, 33, 16, 40, 2, 0);
    test_bmm_capture();
    static const attn_case cases[] = {
        {"attention MHA (SigLIP) 37 x 37, 3 heads x 24, no mask", 37, 37, 3, 3, 24, 40, 37, 37, 0, 0, 0, 0},
        {"attention 1 KV head, prefix mask, 29 x 29, 4 heads x 32", 29, 29, 4, 1, 32, 32, 29, 29, 0, 0, 1, 0},
        {"attention expert Pi0 (state token), 23 + 7 keys", 7, 24 + 8, 4, 1, 32, 32, 23, 24, 7, 1, 0, 0},
        {"attention expert Pi0.5, 23 + 6 keys", 6, 24 + 8, 2, 1, 256, 40, 23, 24, 6, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_attention(h, &cases[i], 0);
    test_attention_many(h);
    test_attention_batch(h, &cases[2], 0);
    test_attention_batch(h, &cases[3], 0);
    test_attention_batch(h, &cases[1], 0); /* two prefixes: the row mask too */
    test_attentions_fused(h);
    test_mha(h, 3, 256, 16, 72); /* SigLIP So400m, 3 cameras */
    test_mha(h, 2, 9, 3, 8);     /* the small test models */
    test_mha(h, 1, 133, 4, 64);  /* a partial key tile and row tile */
    test_mha(h, 2, 70, 2, 128);
    test_mha(h, 1, 1, 1, 16);
    frt_cuda_bmm_destroy(h);
}

static void test_patchify(void)
{
    const int cams = 2, H = 28, W = 42, p = 14, K = 3 * p * p, kp = K + 4, np = (H / p) * (W / p);
    float *img = frand((size_t)cams * 3 * H * W, -1, 1), *ref = fnew((size_t)cams * np * kp);
    round_bf16(img, (size_t)cams * 3 * H * W);
    float *one = fnew((size_t)np * K);
    for (int c = 0; c < cams; c++) {
        frt_cpu_patchify(one, img + (size_t)c * 3 * H * W, 3, H, W, p);
        for (int r = 0; r < np; r++) memcpy(ref + ((size_t)c * np + r) * kp, one + (size_t)r * K, (size_t)K * 4);
    }
    dbuf di = dfl(img, (size_t)cams * 3 * H * W), dout = dalloc((size_t)cams * np * kp * 2);
    CHECK_OK(pi0_cuda_patchify(g_cs, dout.p, di.p, cams, H, W, p, kp));
    float *got = dfloats(dout, (size_t)cams * np * kp, FRT_CUDA_BF16);
    report_same("patchify 2 cameras 28 x 42, patch 14, 4 pad columns", got, ref, (size_t)cams * np * kp * 4);
    free(img), free(ref), free(one), free(got);
    dfree(&di), dfree(&dout);
}

static void test_qkv_rope(void)
{
    const int n = 13, heads = 4, kv = 1, hd = 32, nh = heads + 2 * kv, ldk = kv * hd + 8;
    float *qkv = frand((size_t)n * nh * hd, -2, 2), inv[16];
    int32_t pos[13];
    for (int t = 0; t < n; t++) pos[t] = (int32_t)(frt_test_u64() % 300);
    for (int i = 0; i < hd / 2; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hd);
    dbuf dqkv = dfl(qkv, (size_t)n * nh * hd), dinv = dfl(inv, hd / 2), dpos = dalloc(sizeof pos);
    dput(dpos, 0, pos, sizeof pos);
    dbuf dq = dalloc((size_t)n * heads * hd * 2), dk = dalloc((size_t)n * ldk * 2), dv = dalloc((size_t)n * ldk * 2);
    CHECK_OK(pi0_cuda_qkv_rope(g_cs, dq.p, dk.p, ldk, dv.p, ldk, dqkv.p, dpos.p, dinv.p, n, heads, kv, hd));
    float *rq = fnew((size_t)n * heads * hd), *rk = fnew((size_t)n * hd), *rv = fnew((size_t)n * hd);
    for (int t = 0; t < n; t++) {
        memcpy(rq + (size_t)t * heads * hd, qkv + (size_t)t * nh * hd, (size_t)heads * hd * 4);
        memcpy(rk + (size_t)t * hd, qkv + (size_t)t * nh * hd + heads * hd, (size_t)hd * 4);
        memcpy(rv + (size_t)t * hd, qkv + (size_t)t * nh * hd + (heads + 1) * hd, (size_t)hd * 4);
    }
    frt_cpu_rope(rq, n, heads, hd, hd, pos, 10000.0f);
    frt_cpu_rope(rk, n, kv, hd, hd, pos, 10000.0f);
    float *gq = dfloats(dq, (size_t)n * heads * hd, FRT_CUDA_BF16), *gk = dfloats(dk, (size_t)n * ldk, FRT_CUDA_BF16);
    float *gv = dfloats(dv, (size_t)n * ldk, FRT_CUDA_BF16);
    for (int t = 0; t < n; t++) { /* the rows of ldk: compact them */
        memmove(gk + (size_t)t * hd, gk + (size_t)t * ldk, (size_t)hd * 4);
        memmove(gv + (size_t)t * hd, gv + (size_t)t * ldk, (size_t)hd * 4);
    }
    report("qkv_rope: q (RoPE at given positions) -> bf16", frt_test_rel_err(gq, rq, (size_t)n * heads * hd), 5e-3);
    report("qkv_rope: k rows of a strided cache -> bf16", frt_test_rel_err(gk, rk, (size_t)n * hd), 5e-3);
    report("qkv_rope: v copied -> bf16", frt_test_rel_err(gv, rv, (size_t)n * hd), 5e-3);
    free(qkv), free(rq), free(rk), free(rv), free(gq), free(gk), free(gv);
    dfree(&dqkv), dfree(&dinv), dfree(&dpos), dfree(&dq), dfree(&dk), dfree(&dv);
}

/* q, k, v of pi0_cuda_qkv_rope on n tokens of head_dim 256 into K / V
 * rows of ld (odd: the pairs one at a time) as floats: q, then the rows'
 * first kv_heads * 256 of k, then of v. */
static float *qkv_rope_at(dbuf dqkv, dbuf dpos, dbuf dinv, int n, int heads, int ld)
{
    const int hd = 256, nq = n * heads * hd;
    dbuf dq = dalloc((size_t)nq * 2), dk = dalloc((size_t)n * ld * 2), dv = dalloc((size_t)n * ld * 2);
    CHECK_OK(pi0_cuda_qkv_rope(g_cs, dq.p, dk.p, ld, dv.p, ld, dqkv.p, dpos.p, dinv.p, n, heads, 1, hd));
    float *r = fnew((size_t)nq + 2 * (size_t)n * hd), *q = dfloats(dq, (size_t)nq, FRT_CUDA_BF16);
    float *k = dfloats(dk, (size_t)n * ld, FRT_CUDA_BF16), *v = dfloats(dv, (size_t)n * ld, FRT_CUDA_BF16);
    memcpy(r, q, (size_t)nq * 4);
    for (int t = 0; t < n; t++) {
        memcpy(r + nq + (size_t)t * hd, k + (size_t)t * ld, (size_t)hd * 4);
        memcpy(r + nq + (size_t)(n + t) * hd, v + (size_t)t * ld, (size_t)hd * 4);
    }
    free(q), free(k), free(v);
    dfree(&dq), dfree(&dk), dfree(&dv);
    return r;
}

typedef struct qr_timing {
    dbuf q, k, v, qkv, pos, inv;
    int n, heads;
} qr_timing;

static int rec_qkv_rope(frt_stream *st, void *user)
{
    const qr_timing *t = user;
    for (int i = 0; i < 20; i++)
        FRT_TRY(pi0_cuda_qkv_rope(frt_stream_native(st), t->q.p, t->k.p, 256, t->v.p, 256, t->qkv.p, t->pos.p,
                                  t->inv.p, t->n, t->heads, 1, 256));
    return 0;
}

/* The expert's shape (50 tokens, 8 heads + 1 KV head of 256): pairs two at
 * a time (even K / V row stride) give the bits of pairs one at a time (an
 * odd stride); the time a launch. */
static void test_qkv_rope_paths(void)
{
    const int n = 50, heads = 8, hd = 256, nh = heads + 2;
    float *qkv = frand((size_t)n * nh * hd, -2, 2), inv[128];
    int32_t pos[50];
    for (int t = 0; t < n; t++) pos[t] = 968 + t;
    for (int i = 0; i < hd / 2; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hd);
    qr_timing t = {dalloc((size_t)n * heads * hd * 2), dalloc((size_t)n * hd * 2), dalloc((size_t)n * hd * 2),
                   dfl(qkv, (size_t)n * nh * hd), dfl((const float *)pos, n), dfl(inv, hd / 2), n, heads};
    float *even = qkv_rope_at(t.qkv, t.pos, t.inv, n, heads, hd);
    float *odd = qkv_rope_at(t.qkv, t.pos, t.inv, n, heads, hd + 1);
    report_same("qkv_rope 50 x (8 + 1 + 1) x 256: pairs 2 at a time == 1 at a time (bits)", even, odd,
                ((size_t)n * heads * hd + 2 * (size_t)n * hd) * 4);
    const double us = graph_us("qkv_rope", rec_qkv_rope, &t, 20);
    printf("  timing: qkv_rope, the expert's 50 tokens x (8 + 1 + 1) heads x 256: %.2f us a launch (graph of 20)\n",
           us);
    free(qkv), free(even), free(odd);
    dfree(&t.q), dfree(&t.k), dfree(&t.v), dfree(&t.qkv), dfree(&t.pos), dfree(&t.inv);
}

/* pi0_cuda_qkv_rope_slots: two slots of n tokens (other K / V rows and
 * positions each) in one launch give the bytes of one call per slot. */
static void test_qkv_rope_slots(void)
{
    enum { N = 7, HEADS = 2, KVH = 1, HD = 16, NH = HEADS + 2 * KVH, LDK = KVH * HD };
    float *qkv = frand((size_t)2 * N * NH * HD, -2, 2), inv[HD / 2];
    int32_t pos[2 * N];
    for (int t = 0; t < 2 * N; t++) pos[t] = (int32_t)(frt_test_u64() % 300);
    for (int i = 0; i < HD / 2; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)HD);
    const size_t nq = (size_t)2 * N * HEADS * HD, nk = (size_t)N * LDK;
    dbuf dqkv = dfl(qkv, (size_t)2 * N * NH * HD), dinv = dfl(inv, HD / 2), dpos = dalloc(sizeof pos);
    dput(dpos, 0, pos, sizeof pos);
    dbuf q1 = dalloc(nq * 2), q2 = dalloc(nq * 2), kv1 = dalloc(4 * nk * 2), kv2 = dalloc(4 * nk * 2);
    pi0_kv_slots d;
    memset(&d, 0, sizeof d);
    d.slots = 2;
    for (int s = 0; s < 2; s++) {
        uint16_t *k1 = (uint16_t *)kv1.p + (size_t)(2 * s) * nk, *v1 = k1 + nk;
        CHECK_OK(pi0_cuda_qkv_rope(g_cs, (uint16_t *)q1.p + (size_t)s * N * HEADS * HD, k1, LDK, v1, LDK,
                                   (const float *)dqkv.p + (size_t)s * N * NH * HD, (const int32_t *)dpos.p + s * N,
                                   dinv.p, N, HEADS, KVH, HD));
        d.k[s] = (uint16_t *)kv2.p + (size_t)(2 * s) * nk, d.v[s] = d.k[s] + nk;
        d.pos[s] = (const int32_t *)dpos.p + s * N;
    }
    CHECK_OK(pi0_cuda_qkv_rope_slots(g_cs, q2.p, &d, LDK, LDK, dqkv.p, dinv.p, N, HEADS, KVH, HD));
    uint16_t *a = xzalloc(nq * 2 + 8 * nk), *b = xzalloc(nq * 2 + 8 * nk);
    dget(q1, 0, a, nq * 2), dget(q2, 0, b, nq * 2);
    dget(kv1, 0, a + nq, 4 * nk * 2), dget(kv2, 0, b + nq, 4 * nk * 2);
    report_same("qkv_rope_slots: 2 slots == one call per slot (q, k, v)", a, b, nq * 2 + 8 * nk);
    d.slots = 3; /* slot 2 NULL */
    CHECK_STATUS(pi0_cuda_qkv_rope_slots(g_cs, q2.p, &d, LDK, LDK, dqkv.p, dinv.p, N, HEADS, KVH, HD),
                 FRT_ERR_INVALID_ARGUMENT);
    d.slots = PI0_KV_SLOTS + 1;
    CHECK_STATUS(pi0_cuda_qkv_rope_slots(g_cs, q2.p, &d, LDK, LDK, dqkv.p, dinv.p, N, HEADS, KVH, HD),
                 FRT_ERR_INVALID_ARGUMENT);
    free(qkv), free(a), free(b);
    dfree(&dqkv), dfree(&dinv), dfree(&dpos), dfree(&q1), dfree(&q2), dfree(&kv1), dfree(&kv2);
}

/* cams camera slots of np rows (the middle one masked), tok prompt rows with
 * random padding: mask, positions and meta against a serial pass. 24 rows
 * (one row a thread) and 1868 (two rows a thread of the 1024). */
static void prefix_mask_case(int cams, int np, int tok)
{
    const int n = cams * np + tok, total = n + 5;
    uint8_t cm[3] = {1, 0, 1};
    uint8_t *am = xzalloc((size_t)tok), *mask = xzalloc((size_t)total), *want = xzalloc((size_t)total);
    int32_t *pos = xzalloc((size_t)n * 4), *wpos = xzalloc((size_t)n * 4), meta[4];
    for (int i = 0; i < tok; i++) am[i] = (uint8_t)(frt_test_u64() % 3 != 0);
    dbuf dcm = dalloc(3), dam = dalloc(tok), dmask = dalloc(total), dpos = dalloc(n * 4), dmeta = dalloc(16);
    dput(dcm, 0, cm, 3);
    dput(dam, 0, am, tok);
    memset(mask, 7, (size_t)total);
    dput(dmask, 0, mask, total); /* stale bytes past the rows: cleared */
    CHECK_OK(pi0_cuda_prefix_mask(g_cs, dmask.p, dpos.p, dmeta.p, dcm.p, dam.p, cams, np, tok, total));
    dget(dmask, 0, mask, total);
    dget(dpos, 0, pos, n * 4);
    dget(dmeta, 0, meta, 16);
    int valid = 0;
    for (int r = 0; r < n; r++) {
        want[r] = r < cams * np ? cm[r / np] : am[r - cams * np];
        valid += want[r];
        wpos[r] = valid - 1 < 0 ? 0 : valid - 1;
    }
    char name[96];
    snprintf(name, sizeof name, "prefix mask, %d rows (camera slots, the prompt, zeros after)", n);
    report_same(name, mask, want, (size_t)total);
    snprintf(name, sizeof name, "prefix positions cumsum(mask) - 1, %d rows", n);
    report_same(name, pos, wpos, (size_t)n * 4);
    report_flag("prefix meta rows, valid", meta[0] == n && meta[1] == valid);
    free(am), free(mask), free(want), free(pos), free(wpos);
    dfree(&dcm), dfree(&dam), dfree(&dmask), dfree(&dpos), dfree(&dmeta);
}

static void test_prefix_mask(void)
{
    prefix_mask_case(3, 5, 9);
    prefix_mask_case(3, 256, 1100);
}

/* The episode noise (the cpu backend's stream) and the step advance. */
static void test_noise(void)
{
    const int n = 50 * 32 + 3;
    float *ref = fnew(n), *given = frand(n, -2, 2);
    uint64_t ep[2] = {0x1234567890abcdefull, 7};
    int32_t opts[4] = {2, 9, 0, 0}, meta[4] = {5, 3, 0, 0};
    dbuf dx = dalloc((size_t)n * 4), dn = dfl(given, n), dop = dalloc(16), dep = dalloc(16), dmeta = dalloc(16);
    dput(dop, 0, opts, 16);
    dput(dep, 0, ep, 16);
    dput(dmeta, 0, meta, 16);
    CHECK_OK(pi0_cuda_noise(g_cs, dx.p, dn.p, dop.p, dep.p, dmeta.p, NULL, n));
    pi0_episode_noise(ref, n, ep[0], ep[1]);
    float *got = dfloats(dx, n, FRT_CUDA_F32);
    report_same("episode noise == the cpu backend's stream (odd count)", got, ref, (size_t)n * 4);
    uint64_t ep2[2];
    dget(dep, 0, ep2, 16);
    report_flag("episode step advanced by one", ep2[0] == ep[0] && ep2[1] == ep[1] + 1);
    opts[2] = 1, meta[0] = 0;
    dput(dop, 0, opts, 16);
    dput(dmeta, 0, meta, 16);
    CHECK_OK(pi0_cuda_noise(g_cs, dx.p, dn.p, dop.p, dep.p, dmeta.p, NULL, n));
    free(got);
    got = dfloats(dx, n, FRT_CUDA_F32);
    report_same("caller noise copied", got, given, (size_t)n * 4);
    dget(dep, 0, ep2, 16);
    report_flag("no prefix: the episode step stays", ep2[1] == ep[1] + 1);
    free(got), free(ref), free(given);
    dfree(&dx), dfree(&dn), dfree(&dop), dfree(&dep), dfree(&dmeta);
}

static void test_euler_residual(void)
{
    const int rows = 11, cols = 24, n = rows * cols;
    float *x = frand(n, -1, 1), *v = frand(n, -3, 3), *b = frand(cols, -1, 1), *g = frand(cols, -1, 1);
    float *ref = fdup(x, n);
    dbuf dx = dfl(x, n), dv = dfl(v, n), dv0 = dalloc((size_t)n * 4), db = dfl(b, cols), dg = dfl(g, cols);
    CHECK_OK(pi0_cuda_euler(g_cs, dx.p, dv.p, dv0.p, -0.1f, n));
    for (int i = 0; i < n; i++) ref[i] += -0.1f * v[i];
    float *got = dfloats(dx, n, FRT_CUDA_F32), *g0 = dfloats(dv0, n, FRT_CUDA_F32);
    report_same("euler x += dt v", got, ref, (size_t)n * 4);
    report_same("euler velocity0 copy", g0, v, (size_t)n * 4);
    free(got);
    CHECK_OK(pi0_cuda_residual(g_cs, dx.p, dv.p, db.p, dg.p, rows, cols));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) ref[r * cols + c] += (v[r * cols + c] + b[c]) * g[c];
    got = dfloats(dx, n, FRT_CUDA_F32);
    report("residual x += (y + b) * gate", frt_test_rel_err(got, ref, n), 1e-6);
    free(got), free(g0), free(x), free(v), free(b), free(g), free(ref);
    dfree(&dx), dfree(&dv), dfree(&dv0), dfree(&db), dfree(&dg);
}

/* The twin of frt_cuda_add_norm: the residual, then the norm of `kind`. */
static void add_norm_ref(float *out, float *x, const float *y, const float *bias, const float *gate, int kind,
                         const float *w, const float *b, int rows, int dim)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < dim; c++) x[r * dim + c] += (y[r * dim + c] + bias[c]) * gate[c];
    if (kind == FRT_CUDA_NORM_LAYER) frt_cpu_layernorm(out, x, w, b, rows, dim, 1e-6f);
    if (kind == FRT_CUDA_NORM_RMS_ADA) frt_cpu_rmsnorm_ada(out, x, w, b, rows, dim, 1e-6f);
    if (kind == FRT_CUDA_NORM_RMS_ONE) frt_cpu_rmsnorm(out, x, w, rows, dim, 1e-6f, 1);
}

/* The residual + norm fusion: every kind against the twin; x bit for bit
 * what pi0_cuda_residual writes; without y, the norm alone. */
static void test_add_norm(int rows, int dim, frt_cuda_dtype dt)
{
    static const char *names[3] = {"layernorm", "adaRMSNorm", "Gemma RMSNorm"};
    const size_t n = (size_t)rows * dim;
    float *x = frand(n, -3, 3), *y = frand(n, -2, 2), *bias = frand(dim, -1, 1), *gate = frand(dim, -1, 1);
    float *w = frand(dim, -1, 1), *b = frand(dim, -1, 1), *ref = fnew(n), *rx = fnew(n);
    dbuf dx = dfl(x, n), dx2 = dfl(x, n), dy = dfl(y, n), dbias = dfl(bias, dim), dgate = dfl(gate, dim);
    dbuf dw = dfl(w, dim), db = dfl(b, dim), dout = dalloc(n * 4);
    const double tol = dt == FRT_CUDA_BF16 ? 8e-3 : 2e-6;
    char name[128];
    for (int kind = 0; kind < 3; kind++) {
        dput(dx, 0, x, n * 4), dput(dx2, 0, x, n * 4);
        memcpy(rx, x, n * 4);
        CHECK_OK(frt_cuda_add_norm(g_cs, dout.p, dt, dx.p, dy.p, dbias.p, dgate.p, (frt_cuda_norm_kind)kind, dw.p,
                                   db.p, rows, dim, 1e-6f));
        add_norm_ref(ref, rx, y, bias, gate, kind, w, b, rows, dim);
        float *got = dfloats(dout, n, dt), *gx = dfloats(dx, n, FRT_CUDA_F32);
        snprintf(name, sizeof name, "add_norm %s %d x %d -> %s", names[kind], rows, dim, dtn(dt));
        report(name, frt_test_rel_err(got, ref, n), tol);
        CHECK_OK(pi0_cuda_residual(g_cs, dx2.p, dy.p, dbias.p, dgate.p, rows, dim));
        float *gx2 = dfloats(dx2, n, FRT_CUDA_F32);
        report_same("add_norm: x as pi0_cuda_residual writes it", gx, gx2, n * 4);
        free(got), free(gx), free(gx2);
    }
    dput(dx, 0, x, n * 4);
    CHECK_OK(frt_cuda_add_norm(g_cs, dout.p, dt, dx.p, NULL, NULL, NULL, FRT_CUDA_NORM_RMS_ADA, dw.p, db.p, rows, dim,
                               1e-6f));
    frt_cpu_rmsnorm_ada(ref, x, w, b, rows, dim, 1e-6f);
    float *got = dfloats(dout, n, dt), *gx = dfloats(dx, n, FRT_CUDA_F32);
    snprintf(name, sizeof name, "add_norm without y (adaRMSNorm) %d x %d -> %s", rows, dim, dtn(dt));
    report(name, frt_test_rel_err(got, ref, n), tol);
    report_same("add_norm without y: x unchanged", gx, x, n * 4);
    free(got), free(gx), free(x), free(y), free(bias), free(gate), free(w), free(b), free(ref), free(rx);
    dfree(&dx), dfree(&dx2), dfree(&dy), dfree(&dbias), dfree(&dgate), dfree(&dw), dfree(&db), dfree(&dout);
}

/* The expert's form (a gated residual without bias, then adaRMSNorm) at
 * element offset off of every buffer: out as bf16 bits into *out, x after
 * the add into *gx. */
typedef struct an_bufs {
    dbuf x, y, gate, w, b, out;
    int rows, dim;
} an_bufs;

/* y, gate, w, b into d's buffers `off` elements in (the shifted run first:
 * the aligned one's bytes are written last, over it). */
static void an_put_at(const an_bufs *d, const float *y, const float *gate, const float *w, const float *b, size_t off)
{
    const size_t n = (size_t)d->rows * d->dim;
    dput(d->y, off * 4, y, n * 4), dput(d->gate, off * 4, gate, (size_t)d->dim * 4);
    dput(d->w, off * 4, w, (size_t)d->dim * 4), dput(d->b, off * 4, b, (size_t)d->dim * 4);
}

static void an_run_at(const an_bufs *d, const float *x, size_t off, uint16_t **out, float **gx)
{
    const size_t n = (size_t)d->rows * d->dim;
    dput(d->x, off * 4, x, n * 4);
    CHECK_OK(frt_cuda_add_norm(g_cs, (uint16_t *)d->out.p + off, FRT_CUDA_BF16, (float *)d->x.p + off,
                               (const float *)d->y.p + off, NULL, (const float *)d->gate.p + off,
                               FRT_CUDA_NORM_RMS_ADA, (const float *)d->w.p + off, (const float *)d->b.p + off,
                               d->rows, d->dim, 1e-6f));
    *out = xzalloc(n * 2), *gx = fnew(n);
    dget(d->out, off * 2, *out, n * 2), dget(d->x, off * 4, *gx, n * 4);
}

static int rec_add_norm(frt_stream *st, void *user)
{
    const an_bufs *d = user;
    for (int i = 0; i < 20; i++)
        FRT_TRY(frt_cuda_add_norm(frt_stream_native(st), d->out.p, FRT_CUDA_BF16, d->x.p, d->y.p, NULL, d->gate.p,
                                  FRT_CUDA_NORM_RMS_ADA, d->w.p, d->b.p, d->rows, d->dim, 1e-6f));
    return 0;
}

/* add_norm in the expert's form against the twin; x bit for bit what
 * pi0_cuda_residual writes with a gate and no bias; every buffer one
 * element further (scalar loads and stores, the same ownership) the same
 * bits; timed at the policy's sizes. */
static void test_add_norm_gated(int rows, int dim)
{
    const size_t n = (size_t)rows * dim;
    float *x = frand(n, -3, 3), *y = frand(n, -2, 2), *gate = frand(dim, -1, 1), *w = frand(dim, -1, 1);
    float *b = frand(dim, -1, 1), *ref = fnew(n), *rx = fdup(x, n);
    an_bufs d = {dalloc(n * 4 + 4), dalloc(n * 4 + 4), dalloc((size_t)dim * 4 + 4), dalloc((size_t)dim * 4 + 4),
                 dalloc((size_t)dim * 4 + 4), dalloc(n * 2 + 2), rows, dim};
    uint16_t *out0, *out1;
    float *gx0, *gx1;
    an_put_at(&d, y, gate, w, b, 1);
    an_run_at(&d, x, 1, &out1, &gx1);
    an_put_at(&d, y, gate, w, b, 0);
    an_run_at(&d, x, 0, &out0, &gx0);
    for (size_t i = 0; i < n; i++) rx[i] += y[i] * gate[i % dim];
    frt_cpu_rmsnorm_ada(ref, rx, w, b, rows, dim, 1e-6f);
    float *got = fnew(n);
    for (size_t i = 0; i < n; i++) got[i] = frt_bf16_to_f32(out0[i]);
    char name[160];
    snprintf(name, sizeof name, "add_norm gated adaRMSNorm (the expert's) %d x %d -> bf16", rows, dim);
    report(name, frt_test_rel_err(got, ref, n), 8e-3);
    dput(d.x, 0, x, n * 4);
    CHECK_OK(pi0_cuda_residual(g_cs, d.x.p, d.y.p, NULL, d.gate.p, rows, dim));
    float *gr = dfloats(d.x, n, FRT_CUDA_F32);
    report_same("add_norm gated: x as pi0_cuda_residual writes it", gx0, gr, n * 4);
    report_same("add_norm gated: one element further (scalar path), the same out", out1, out0, n * 2);
    report_same("add_norm gated: one element further (scalar path), the same x", gx1, gx0, n * 4);
    if (rows >= 50) {
        const double us = graph_us("add_norm", rec_add_norm, &d, 20);
        printf("  timing: add_norm gated adaRMSNorm %d x %d: %.2f us a launch (graph of 20), %.0f GB/s\n", rows, dim,
               us, (double)n * 14 / (us * 1e3)); /* x, y read; x written f32; out bf16 */
    }
    free(x), free(y), free(gate), free(w), free(b), free(ref), free(rx), free(got), free(gr);
    free(out0), free(out1), free(gx0), free(gx1);
    dfree(&d.x), dfree(&d.y), dfree(&d.gate), dfree(&d.w), dfree(&d.b), dfree(&d.out);
}

/* pi0_cuda_copy_many: n pairs of random bytes, in 16-byte words (aligned
 * size) and bytewise (odd size, odd offsets), each destination exactly
 * its source, the bytes after it untouched. */
static void test_copy_many(int n, size_t bytes, size_t off)
{
    const size_t span = bytes + 64;
    uint8_t *h = xzalloc((size_t)n * span), *got = xzalloc((size_t)n * span), *zero = xzalloc((size_t)n * span);
    for (size_t i = 0; i < (size_t)n * span; i++) h[i] = (uint8_t)frt_test_u64();
    dbuf src = dalloc((size_t)n * span), dst = dalloc((size_t)n * span);
    dput(src, 0, h, (size_t)n * span), dput(dst, 0, zero, (size_t)n * span);
    pi0_copy_list l;
    memset(&l, 0, sizeof l);
    l.n = n, l.bytes = bytes;
    for (int i = 0; i < n; i++) {
        l.dst[i] = (uint8_t *)dst.p + (size_t)i * span + off;
        l.src[i] = (const uint8_t *)src.p + (size_t)(n - 1 - i) * span + off; /* reversed pairs */
    }
    CHECK_OK(pi0_cuda_copy_many(g_cs, &l));
    dget(dst, 0, got, (size_t)n * span);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        ok &= memcmp(got + (size_t)i * span + off, h + (size_t)(n - 1 - i) * span + off, bytes) == 0;
        ok &= memcmp(got + (size_t)i * span + off + bytes, zero, span - off - bytes) == 0;
    }
    char name[96];
    snprintf(name, sizeof name, "copy_many %d pairs x %zu bytes at offset %zu", n, bytes, off);
    printf("  %-60s %s\n", name, ok ? "ok (exact)" : "FAIL");
    CHECK_MSG(ok, "%s", name);
    free(h), free(got), free(zero);
    dfree(&src), dfree(&dst);
}

/* CFG's combine: the twin's bits, aligned (vector path + tail) and not. */
static void test_cfg_combine(void)
{
    const int n = 50 * 32 + 3;
    float *vc = frand(n + 1, -3, 3), *vu = frand(n + 1, -3, 3), *ref = fnew(n + 1);
    dbuf dc = dfl(vc, n + 1), du = dfl(vu, n + 1), dout = dalloc((size_t)(n + 1) * 4);
    static const float betas[] = {1.0f, 1.5f, 2.75f};
    dbuf dbeta = dfl(&betas[2], 1);
    char name[128];
    for (int off = 0; off < 2; off++)
        for (int b = 0; b < 3; b++) { /* beta 2.75 from device memory, the others as the argument */
            CHECK_OK(frt_cuda_cfg_combine(g_cs, (float *)dout.p + off, (const float *)dc.p + off,
                                          (const float *)du.p + off, b == 2 ? -7.0f : betas[b],
                                          b == 2 ? dbeta.p : NULL, n));
            frt_cpu_cfg_combine(ref, vc + off, vu + off, betas[b], n);
            float *got = fnew(n + 1);
            dget(dout, (size_t)off * 4, got, (size_t)n * 4);
            snprintf(name, sizeof name, "cfg_combine n %d beta %.2f%s, %s", n, (double)betas[b],
                     b == 2 ? " (device)" : "",
                     off ? "unaligned (scalar)" : "aligned (float4 + tail)");
            report_same(name, got, ref, (size_t)n * 4);
            free(got);
        }
    free(vc), free(vu), free(ref);
    dfree(&dc), dfree(&du), dfree(&dout), dfree(&dbeta);
}

/* One frt_cuda_softmax_masked case: rows of `keys` scores (row stride ld),
 * mask as frt_cuda_attn_mask says (kmask, when used, drawn 3 in 4 per
 * batch, kstride bytes apart; rmask 4 in 5, per batch kstride apart too). */
typedef struct sm_case {
    const char *name;
    int rows, keys, ld, rpt, tokens;
    int kmask_len, sfx_start, sfx_n, solo_first, use_kmask, use_rmask;
    long long kstride;
} sm_case;

/* key j of row r allowed: the rule of frt_cuda_attn_mask, written out. */
static int sm_allowed(const sm_case *c, const uint8_t *km, const uint8_t *rm, int r, int j)
{
    const int t = r / c->rpt % c->tokens, b = r / (c->rpt * c->tokens);
    if (c->use_rmask && !rm[(size_t)b * c->kstride + t]) return 0; /* batch b's row mask at b kstride */
    if (j < c->kmask_len) return !c->use_kmask || km[(size_t)b * c->kstride + j];
    const int s = j - c->sfx_start;
    return s >= 0 && s < c->sfx_n && (!c->solo_first || t > 0 || s == 0);
}

/* The softmax of the allowed keys of each row in fp64 (rows with none: 0);
 * *exact_zeros: every disallowed key of got is +0. */
static void sm_ref(float *ref, const float *s, const float *got, const sm_case *c, const uint8_t *km,
                   const uint8_t *rm, int *exact_zeros)
{
    for (int r = 0; r < c->rows; r++) {
        const float *sr = s + (size_t)r * c->ld;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < c->keys; j++)
            if (sm_allowed(c, km, rm, r, j) && sr[j] > mx) mx = sr[j];
        for (int j = 0; j < c->keys; j++)
            if (sm_allowed(c, km, rm, r, j)) sum += exp(sr[j] - mx);
        for (int j = 0; j < c->keys; j++) {
            const int on = sm_allowed(c, km, rm, r, j);
            ref[(size_t)r * c->keys + j] = on ? (float)(exp(sr[j] - mx) / sum) : 0.0f;
            if (!on && got[(size_t)r * c->keys + j] != 0.0f) *exact_zeros = 0;
        }
    }
}

typedef struct sm_timing {
    uint16_t *p;
    const float *s;
    const sm_case *c;
    frt_cuda_attn_mask m;
} sm_timing;

static int rec_softmax(frt_stream *st, void *user)
{
    const sm_timing *t = user;
    for (int i = 0; i < 20; i++)
        FRT_TRY(frt_cuda_softmax_masked(frt_stream_native(st), t->p, t->s, t->c->rows, t->c->keys, t->c->ld, &t->m));
    return 0;
}

/* The device's probabilities [rows, keys] (dropping the ld padding) at
 * element offset off of dp; *pad_kept: the columns keys..ld untouched. */
static float *sm_get(dbuf dp, size_t off, const sm_case *c, int *pad_kept)
{
    const size_t n = (size_t)c->rows * c->ld;
    uint16_t *b = xzalloc(n * 2);
    dget(dp, off * 2, b, n * 2);
    float *got = fnew((size_t)c->rows * c->keys);
    for (int r = 0; r < c->rows; r++)
        for (int j = 0; j < c->ld; j++) {
            const uint16_t u = b[(size_t)r * c->ld + j];
            if (j < c->keys) got[(size_t)r * c->keys + j] = frt_bf16_to_f32(u);
            else *pad_kept &= u == 0x7F7F;
        }
    free(b);
    return got;
}

/* Against the fp64 softmax; masked keys exactly 0; the padding past keys
 * untouched; two runs the same bits; the same rows one element further
 * (the scalar loads and stores) the same bits; at the policy's sizes, the
 * time a launch. */
static void test_softmax(const sm_case *c)
{
    const size_t n = (size_t)c->rows * c->ld;
    const int batches = c->rows / (c->rpt * c->tokens);
    const size_t nkm = (size_t)(batches - 1) * (size_t)c->kstride + (size_t)c->kmask_len + 1;
    const size_t nrm = (size_t)(batches - 1) * (size_t)c->kstride + (size_t)c->tokens;
    float *s = frand(n + 1, -6, 6), *ref = fnew((size_t)c->rows * c->keys);
    uint8_t *km = xzalloc(nkm), *rm = xzalloc(nrm);
    for (size_t j = 0; j < nkm; j++) km[j] = frt_test_u64() % 4 != 0;
    for (size_t t = 0; t < nrm; t++) rm[t] = frt_test_u64() % 5 != 0;
    dbuf ds = dfl(s, n + 1), dp = dalloc((n + 1) * 2), dkm = dalloc(nkm), drm = dalloc(nrm);
    dput(dkm, 0, km, nkm), dput(drm, 0, rm, nrm);
    frt_cuda_attn_mask m = {c->use_kmask ? dkm.p : NULL, c->kmask_len, c->sfx_start, c->sfx_n, c->solo_first,
                            c->use_rmask ? drm.p : NULL, c->rpt, c->tokens, c->kstride};
    int zeros = 1, pad = 1;
    dsentinel(dp);
    CHECK_OK(frt_cuda_softmax_masked(g_cs, dp.p, ds.p, c->rows, c->keys, c->ld, &m));
    float *got = sm_get(dp, 0, c, &pad);
    sm_ref(ref, s, got, c, km, rm, &zeros);
    char name[200];
    snprintf(name, sizeof name, "softmax_masked %s, %d rows x %d keys (ld %d)", c->name, c->rows, c->keys, c->ld);
    report(name, frt_test_rel_err(got, ref, (size_t)c->rows * c->keys), 4e-3);
    dsentinel(dp);
    CHECK_OK(frt_cuda_softmax_masked(g_cs, dp.p, ds.p, c->rows, c->keys, c->ld, &m));
    float *again = sm_get(dp, 0, c, &pad);
    report_same("softmax_masked: a second run, the same bits", again, got, (size_t)c->rows * c->keys * 4);
    dput(ds, 4, s, n * 4); /* the same rows one element further: 16-byte loads impossible */
    dsentinel(dp);
    CHECK_OK(frt_cuda_softmax_masked(g_cs, (uint16_t *)dp.p + 1, (const float *)ds.p + 1, c->rows, c->keys, c->ld,
                                     &m));
    float *shifted = sm_get(dp, 1, c, &pad);
    report_same("softmax_masked: shifted by one element (scalar loads), the same bits", shifted, got,
                (size_t)c->rows * c->keys * 4);
    report_flag("softmax_masked: masked keys exactly 0, columns past keys untouched", zeros && pad);
    if (c->rows >= 400) {
        sm_timing t = {dp.p, ds.p, c, m};
        const double us = graph_us("softmax_masked", rec_softmax, &t, 20);
        printf("  timing: softmax_masked %s: %.2f us a launch (graph of 20), %.0f GB/s (f32 scores in, bf16 out)\n",
               c->name, us, (double)c->rows * c->keys * 6 / (us * 1e3));
    }
    free(s), free(ref), free(km), free(rm), free(got), free(again), free(shifted);
    dfree(&ds), dfree(&dp), dfree(&dkm), dfree(&drm);
}

static void test_softmaxes(void)
{
    static const sm_case cases[] = {
        /* name, rows, keys, ld, rows_per_token, tokens, kmask_len, sfx_start, sfx_n, solo_first, kmask, rmask,
         * kstride */
        {"SigLIP (2 cameras x 16 heads), no mask", 8192, 256, 256, 1, 256, 256, 256, 0, 0, 0, 0, 0},
        {"Pi0.5 prefix (712 tokens x 8 heads)", 5696, 712, 712, 8, 712, 712, 712, 0, 0, 1, 1, 0},
        {"Pi0.5 expert (50 tokens x 8 heads), 968 + 50 keys", 400, 1018, 1024, 8, 50, 968, 968, 50, 0, 1, 0, 0},
        {"Pi0 expert, state token, 23 + 7 keys", 14, 31, 32, 2, 7, 23, 24, 7, 1, 1, 0, 0},
        {"odd keys, 2 batches, own key and row masks", 2 * 3 * 5, 37, 37, 3, 5, 30, 33, 4, 0, 1, 1, 41},
        {"Pi0.5 expert, 3 cameras + a 256-token prompt (1024 + 50 keys)", 400, 1074, 1080, 8, 50, 1024, 1024, 50, 0,
         1, 0, 0},
        {"long rows, 1500 keys", 6, 1500, 1501, 2, 3, 1400, 1400, 100, 0, 1, 1, 0},
        {"long rows (one block a row), 2100 keys", 6, 2100, 2100, 2, 3, 2000, 2000, 100, 0, 1, 1, 0},
        {"1 key", 5, 1, 1, 1, 5, 1, 1, 0, 0, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_softmax(&cases[i]);
}

/* a refused by frt_cuda_attention_fused with `want` before anything is enqueued. */
static void fused_refused_rope(const char *what, frt_cuda_attn_args a, const frt_cuda_attn_rope *rope, int want)
{
    const int rc = frt_cuda_attention_fused(NULL, &a, rope), rc_check = frt_cuda_attention_fused_check(&a, rope);
    CHECK_MSG(rc == want && rc_check == want, "%s: got %s / %s, want %s", what, frt_status_name(rc),
              frt_status_name(rc_check), frt_status_name(want));
}

static void fused_refused(const char *what, frt_cuda_attn_args a, int want)
{
    fused_refused_rope(what, a, NULL, want);
}

/* The refusals of frt_cuda_attention_fused, on host pointers (nothing is
 * enqueued, so none is dereferenced). */
static void test_fused_args(void)
{
    static _Alignas(16) uint16_t buf[4][256];
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.out = buf[0], a.q = buf[1], a.k = buf[2], a.v = buf[3];
    a.n_q = 3, a.n_kv = 5, a.n_heads = 2, a.n_kv_heads = 1, a.head_dim = 32, a.ldq = 64, a.ldkv = 32;
    a.scale = 0.1f, a.mask.kmask_len = 2, a.mask.sfx_start = 2, a.mask.sfx_n = 3;
    CHECK_OK(frt_cuda_attention_fused_check(&a, NULL));
    CHECK_STATUS(frt_cuda_attention_fused_check(NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_attn_args b = a;
    b.v = NULL;
    fused_refused("attention_fused: NULL v", b, FRT_ERR_INVALID_ARGUMENT);
    b = a, b.n_kv = 0;
    fused_refused("attention_fused: no key", b, FRT_ERR_INVALID_ARGUMENT);
    b = a, b.batch = 2, b.skv = -8;
    fused_refused("attention_fused: negative stride", b, FRT_ERR_INVALID_ARGUMENT);
    b = a, b.mask.sfx_start = 1;
    fused_refused("attention_fused: suffix before the key mask's end", b, FRT_ERR_INVALID_ARGUMENT);
    b = a, b.out = buf[1];
    fused_refused("attention_fused: out aliases q", b, FRT_ERR_INVALID_ARGUMENT);
    b = a, b.ldkv = 16;
    fused_refused("attention_fused: ldkv < head_dim", b, FRT_ERR_INVALID_ARGUMENT);
    b = a, b.n_kv_heads = 2, b.ldkv = 64;
    fused_refused("attention_fused: 2 KV heads", b, FRT_ERR_UNSUPPORTED);
    b = a, b.head_dim = 24, b.ldq = 48, b.ldkv = 24;
    fused_refused("attention_fused: head_dim 24", b, FRT_ERR_UNSUPPORTED);
    b = a, b.ldq = 72;
    fused_refused("attention_fused: query rows not contiguous", b, FRT_ERR_UNSUPPORTED);
    b = a, b.q = buf[1] + 1;
    fused_refused("attention_fused: q not 16-byte aligned", b, FRT_ERR_UNSUPPORTED);
    b = a, b.ldkv = 36;
    fused_refused("attention_fused: ldkv not 16-byte aligned", b, FRT_ERR_UNSUPPORTED);
    b = a, b.batch = 2, b.sq = b.sout = 64, b.skv = 4;
    fused_refused("attention_fused: batch stride not 16-byte aligned", b, FRT_ERR_UNSUPPORTED);
    static _Alignas(16) float qkv[4][64];
    frt_cuda_attn_rope r = {qkv[0], qkv[1], 0};
    b = a, b.q = NULL; /* not read with RoPE on load */
    CHECK_OK(frt_cuda_attention_fused_check(&b, &r));
    fused_refused("attention_fused: q NULL without rope", b, FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_attn_rope rb = r;
    rb.cs = NULL;
    fused_refused_rope("attention_fused: NULL rope.cs", b, &rb, FRT_ERR_INVALID_ARGUMENT);
    rb = r, rb.s_cs = -4;
    fused_refused_rope("attention_fused: negative rope.s_cs", b, &rb, FRT_ERR_INVALID_ARGUMENT);
    rb = r, rb.qkv = qkv[0] + 1;
    fused_refused_rope("attention_fused: rope.qkv not 16-byte aligned", b, &rb, FRT_ERR_UNSUPPORTED);
    b.mask.sfx_n = 4; /* 4 suffix keys from 3 query tokens */
    fused_refused_rope("attention_fused: more suffix keys than query tokens", b, &r, FRT_ERR_INVALID_ARGUMENT);
}

/* Argument checks (no device needed: nothing is enqueued). */
static void test_args(void)
{
    float f = 0;
    frt_cuda_attn_mask mk = {NULL, 1, 1, 0, 0, NULL, 1, 1, 0};
    CHECK_STATUS(frt_cuda_layernorm(NULL, NULL, FRT_CUDA_F32, &f, &f, &f, 1, 1, 1e-6f), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_layernorm(NULL, &f, FRT_CUDA_F32, &f, &f, &f, 1, 1, 1e-6f), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_rmsnorm_ada(NULL, &f, FRT_CUDA_F32, &f, &f, &f, 0, 1, 1e-6f), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_norm(NULL, &f, FRT_CUDA_F32, &f, NULL, NULL, NULL, FRT_CUDA_NORM_LAYER, &f, &f, 1, 1,
                                   1e-6f), FRT_ERR_INVALID_ARGUMENT); /* out aliases x */
    float g = 0, h = 0;
    CHECK_STATUS(frt_cuda_add_norm(NULL, &g, FRT_CUDA_F32, &f, NULL, NULL, NULL, (frt_cuda_norm_kind)3, &h, &h, 1, 1,
                                   1e-6f), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_norm(NULL, &g, FRT_CUDA_F32, &f, NULL, NULL, NULL, FRT_CUDA_NORM_RMS_ADA, &h, NULL, 1, 1,
                                   1e-6f), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_add_norm(NULL, &g, FRT_CUDA_F32, &f, NULL, NULL, NULL, FRT_CUDA_NORM_RMS_ONE, &h, NULL, 0, 1,
                                   1e-6f), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_bias_act(NULL, &f, FRT_CUDA_F32, &f, NULL, 1, 1, (frt_cuda_act)7), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_bias_act(NULL, &f, FRT_CUDA_BF16, &f, NULL, 1, 1, FRT_CUDA_ACT_NONE),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_geglu_tanh(NULL, &f, FRT_CUDA_F32, &f, FRT_CUDA_F32, 1, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_geglu_tanh(NULL, &f, FRT_CUDA_F32, &g, (frt_cuda_dtype)2, 1, 1), FRT_ERR_INVALID_ARGUMENT);
    _Alignas(16) uint16_t gq[32];
    _Alignas(16) uint8_t qq[32];
    float qs[2];
    CHECK_STATUS(frt_cuda_geglu_quantize(NULL, NULL, qs, gq, 1, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_geglu_quantize(NULL, qq, qs, gq, 1, 12), FRT_ERR_INVALID_ARGUMENT); /* not a multiple of 8 */
    CHECK_STATUS(frt_cuda_geglu_quantize(NULL, qq, qs, gq, 1, 49160), FRT_ERR_INVALID_ARGUMENT); /* over 49152 */
    CHECK_STATUS(frt_cuda_geglu_quantize(NULL, qq, qs, gq + 1, 1, 8), FRT_ERR_INVALID_ARGUMENT); /* misaligned */
    CHECK_STATUS(frt_cuda_geglu_quantize(NULL, qq, qs, gq, -1, 8), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_softmax_masked(NULL, (uint16_t *)&f, &f, 1, 2, 1, &mk), FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    CHECK_STATUS(frt_cuda_attention_masked(NULL, NULL, &a), FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_bmm_args b;
    memset(&b, 0, sizeof b);
    CHECK_STATUS(frt_cuda_bmm_run(NULL, NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_cfg_combine(NULL, &f, &f, &f, 1.5f, NULL, 0), FRT_ERR_INVALID_ARGUMENT);
    pi0_copy_list cl;
    memset(&cl, 0, sizeof cl);
    cl.n = PI0_COPY_MAX + 1, cl.bytes = 4;
    CHECK_STATUS(pi0_cuda_copy_many(NULL, &cl), FRT_ERR_INVALID_ARGUMENT);
    cl.n = 1;
    CHECK_STATUS(pi0_cuda_copy_many(NULL, &cl), FRT_ERR_INVALID_ARGUMENT); /* NULL pair */
    CHECK_STATUS(pi0_cuda_copy_many(NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(pi0_cuda_patchify(NULL, (uint16_t *)&f, &f, 1, 28, 28, 14, 10), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(pi0_cuda_qkv_rope(NULL, NULL, NULL, 1, NULL, 1, &f, NULL, &f, 1, 1, 1, 3), FRT_ERR_INVALID_ARGUMENT);
}
#endif /* FRT_HAVE_CUDA */

int main(void)
{
    frt_test_seed(31);
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    test_args();
    test_fused_args();
    test_mha_args();
    frt_test_cuda_start();
    test_norms(37, 1152, FRT_CUDA_BF16);
    test_norms(5, 40, FRT_CUDA_F32);
    test_norms(512, 1152, FRT_CUDA_BF16); /* SigLIP, 2 cameras */
    test_norms(7, 1001, FRT_CUDA_F32);     /* dim % 4 != 0: groups of 1 */
    test_norms(3, 9000, FRT_CUDA_F32);     /* wider than the register path: the loop */
    test_add_norm(37, 1152, FRT_CUDA_BF16);
    test_add_norm(5, 40, FRT_CUDA_F32);
    test_add_norm(712, 2048, FRT_CUDA_BF16); /* the prefix */
    test_add_norm(7, 1001, FRT_CUDA_F32);
    test_add_norm(3, 9000, FRT_CUDA_F32);
    test_add_norm_gated(50, 1024);  /* the expert */
    test_add_norm_gated(512, 1152); /* SigLIP's shape */
    test_add_norm_gated(5, 36);
    test_copy_many(36, 712 * 256 * 2, 0);
    test_copy_many(PI0_COPY_MAX, 1000, 0);
    test_copy_many(3, 37, 3);
    test_acts(19, 72, FRT_CUDA_BF16);
    test_acts(3, 40, FRT_CUDA_F32);
    test_acts(50, 4096, FRT_CUDA_BF16); /* the expert's MLP */
    test_acts(7, 37, FRT_CUDA_F32);     /* cols % 4 != 0: groups of 1 */
    test_acts_shifted(19, 72);
    test_geglu_quantize(37, 16384); /* the prefix's MLP in FP8 (2 048 -> 16 384) */
    test_geglu_quantize(3, 48);
    test_attentions();
    test_softmaxes();
    test_patchify();
    test_qkv_rope();
    test_qkv_rope_paths();
    test_qkv_rope_slots();
    test_prefix_mask();
    test_noise();
    test_euler_residual();
    test_cfg_combine();
    return frt_test_report();
#endif
}
