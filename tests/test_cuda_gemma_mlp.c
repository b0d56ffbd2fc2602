/*
 * test_cuda_gemma_mlp.c - frt_cuda_gemma_mlp (kernels/cuda/gemma_mlp.cu:
 * Gemma's MLP block, the residual and the next norm as one cooperative
 * launch) against its twin on random data: h = bf16(gelu_tanh(gate) * up)
 * from fp64 products of the same bf16 inputs, then down over the kernel's
 * own h (so the check of x and out does not fold h's roundings in twice),
 * the gated residual, adaRMSNorm / Gemma's RMSNorm (frt_cpu_rmsnorm_ada,
 * frt_cpu_rmsnorm). Errors norm-wise ||gpu - cpu|| / ||cpu||. Also: the
 * same bits on a second run and with out aliasing hb; with the attention
 * in front, attn against frt_cpu_attention_masked (Pi0.5's and Pi0's
 * masks, masked rows, more key splits than one pass of the grid) and the
 * rest from the kernel's own attn; the shapes the kernel
 * does not take refused with FRT_ERR_UNSUPPORTED (before anything is
 * enqueued), bad arguments refused before a device is needed, and the
 * policy expert's shape timed against the five launches it replaces
 * (cuBLASLt gate | up, GeGLU, cuBLASLt down, the add + norm), 8 layers of
 * distinct weights a graph (more bytes than L2 holds).
 */
#include "frt/exec.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "util/bf16.h"

#include "frt_test.h"

#if FRT_HAVE_CUDA
#include "frt_test_cuda.h"

#include <math.h>

/* The host side of one case. */
typedef struct mlp_case {
    int rows, W, I, kind; /* kind -1: no norm */
    int gated;
    int Q, okind; /* Q > 0: o_proj [W, Q] first, then the norm of okind into hb (the o gate when gated) */
    int heads, hd; /* heads > 0: the next q | k | v (heads, one KV head of hd) with RoPE from out */
    int att_p;     /* > 0 (with Q): the layer's attention first, over att_p prefix keys (a random mask), 7 padding
                      keys and the rows' own suffix keys (Pi0's lone state token with solo) */
    int solo, rmask;
} mlp_case;

/* The attention's host side: q [rows, heads 256], k / v [keys, LDKV]
 * (bf16 bits and their f32), the mask and its device copies. */
#define AT_LDKV 264
typedef struct att_host {
    int keys, heads;
    hmat q, k, v;
    uint8_t *km, *rm;
    dbuf dq, dk, dv, dkm, drm, dwork;
    frt_cuda_attn_args a;
} att_host;

static void att_setup(att_host *h, uint64_t *rng, const mlp_case *c, void *attn)
{
    const int R = c->rows, P = c->att_p, Pp = P + 7;
    h->keys = Pp + R, h->heads = c->Q / 256;
    h->q = hmat_rand(rng, R, c->Q, -1, 1);
    h->k = hmat_rand(rng, h->keys, AT_LDKV, -1, 1), h->v = hmat_rand(rng, h->keys, AT_LDKV, -1, 1);
    h->km = xzalloc((size_t)P + 1), h->rm = xzalloc((size_t)R);
    for (int j = 0; j < P; j++) h->km[j] = frt_test_u64() % 4 != 0;
    for (int t = 0; t < R; t++) h->rm[t] = !c->rmask || frt_test_u64() % 5 != 0;
    h->dq = dalloc((size_t)R * c->Q * 2), h->dk = dalloc((size_t)h->keys * AT_LDKV * 2);
    h->dv = dalloc((size_t)h->keys * AT_LDKV * 2), h->dkm = dalloc((size_t)P + 1), h->drm = dalloc((size_t)R);
    dput(h->dq, 0, h->q.b, (size_t)R * c->Q * 2), dput(h->dk, 0, h->k.b, (size_t)h->keys * AT_LDKV * 2);
    dput(h->dv, 0, h->v.b, (size_t)h->keys * AT_LDKV * 2), dput(h->dkm, 0, h->km, (size_t)P + 1);
    dput(h->drm, 0, h->rm, (size_t)R);
    memset(&h->a, 0, sizeof h->a);
    frt_cuda_attn_args *a = &h->a;
    a->out = attn, a->q = h->dq.p, a->k = h->dk.p, a->v = h->dv.p, a->ldq = c->Q, a->ldkv = AT_LDKV;
    a->n_q = R, a->n_kv = h->keys, a->n_heads = h->heads, a->n_kv_heads = 1, a->head_dim = 256;
    a->scale = 1.0f / 16.0f;
    a->mask.d_kmask = h->dkm.p, a->mask.kmask_len = P, a->mask.sfx_start = Pp, a->mask.sfx_n = R;
    a->mask.solo_first = c->solo, a->mask.d_rmask = c->rmask ? h->drm.p : NULL;
    size_t wb = 0;
    CHECK_OK(frt_cuda_gemma_mlp_att_work_bytes(R, h->heads, h->keys, &wb));
    h->dwork = dalloc(wb);
}

/* The twin: frt_cpu_attention_masked over the same bf16 values. */
static float *att_ref(const att_host *h, const mlp_case *c)
{
    const int R = c->rows, P = c->att_p, Pp = P + 7, n = h->keys;
    float *k = fnew((size_t)n * 256), *v = fnew((size_t)n * 256), *out = fnew((size_t)R * c->Q);
    for (int j = 0; j < n; j++)
        for (int d = 0; d < 256; d++) {
            k[(size_t)j * 256 + d] = h->k.f[(size_t)j * AT_LDKV + d];
            v[(size_t)j * 256 + d] = h->v.f[(size_t)j * AT_LDKV + d];
        }
    uint8_t *allow = xzalloc((size_t)R * n);
    for (int t = 0; t < R; t++)
        for (int j = 0; j < n; j++) {
            const int on = j < P ? h->km[j] : j >= Pp && (!c->solo || t > 0 || j == Pp);
            allow[(size_t)t * n + j] = h->rm[t] && on;
        }
    frt_cpu_attention_masked(out, h->q.f, k, v, allow, R, n, h->heads, 1, 256, h->a.scale);
    free(k), free(v), free(allow);
    return out;
}

static void att_free(att_host *h)
{
    hmat_free(&h->q), hmat_free(&h->k), hmat_free(&h->v);
    free(h->km), free(h->rm);
    dfree(&h->dq), dfree(&h->dk), dfree(&h->dv), dfree(&h->dkm), dfree(&h->drm), dfree(&h->dwork);
}

/* The next layer's q | k | v from out (bf16 values in outf), RoPE at pos
 * as pi0_cuda_qkv_rope_slots: q [rows, heads hd], k and v rows ldkv apart. */
static void qkv_ref(float *q, float *k, float *v, const float *outf, const float *w, const int32_t *pos,
                    const float *inv, int rows, int W, int heads, int hd, int ldkv)
{
    const int half = hd / 2;
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads + 2; h++)
            for (int p = 0; p < half; p++) {
                double a = 0, b = 0;
                for (int c = 0; c < W; c++) {
                    a += (double)outf[(size_t)r * W + c] * w[(size_t)(h * hd + p) * W + c];
                    b += (double)outf[(size_t)r * W + c] * w[(size_t)(h * hd + p + half) * W + c];
                }
                float y1 = (float)a, y2 = (float)b;
                if (h <= heads) {
                    const float an = (float)pos[r] * inv[p], cs = cosf(an), sn = sinf(an);
                    y1 = (float)a * cs - (float)b * sn, y2 = (float)b * cs + (float)a * sn;
                }
                float *d = h < heads ? q + ((size_t)r * heads + h) * hd : (h == heads ? k : v) + (size_t)r * ldkv;
                d[p] = frt_bf16_to_f32(frt_f32_to_bf16(y1)), d[p + half] = frt_bf16_to_f32(frt_f32_to_bf16(y2));
            }
}

static float gelu_ref(float x)
{
    float g;
    frt_cpu_geglu_tanh(&g, &x, &(float){1.0f}, 1);
    return g;
}

/* h as the kernel defines it, from fp64 products of the bf16 inputs. */
static void h_ref(float *h, const float *hb, const float *gu, int rows, int W, int I)
{
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < I; i++) {
            double g = 0, u = 0;
            for (int k = 0; k < W; k++) {
                g += (double)hb[(size_t)r * W + k] * gu[(size_t)i * W + k];
                u += (double)hb[(size_t)r * W + k] * gu[(size_t)(I + i) * W + k];
            }
            h[(size_t)r * I + i] = frt_bf16_to_f32(frt_f32_to_bf16(gelu_ref((float)g) * (float)u));
        }
}

/* x += (h down^T) * gate, then out = norm(x) (kind -1: none): the MLP's
 * residual and norm (h [rows, I], down [W, I]), and o_proj's (attn, o). */
static void rest_ref(float *out, float *x, const float *h, const float *down, const float *gate, int kind,
                     const float *w, const float *b, int rows, int W, int I)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < W; c++) {
            double y = 0;
            for (int i = 0; i < I; i++) y += (double)h[(size_t)r * I + i] * down[(size_t)c * I + i];
            x[(size_t)r * W + c] += gate ? (float)y * gate[c] : (float)y;
        }
    if (kind == FRT_CUDA_NORM_RMS_ADA) frt_cpu_rmsnorm_ada(out, x, w, b, rows, W, 1e-6f);
    if (kind == FRT_CUDA_NORM_RMS_ONE) frt_cpu_rmsnorm(out, x, w, rows, W, 1e-6f, 1);
}

/* n bf16 values as fresh floats. */
static float *bf16_floats(const uint16_t *b, size_t n)
{
    float *f = fnew(n);
    frt_bf16_array_to_f32(b, f, n);
    return f;
}

/* n bf16 values of a device buffer as fresh floats. */
static float *dfloats_bf16(dbuf d, size_t n)
{
    float *f = fnew(n);
    dget_as(d, 0, f, n, FRT_CUDA_BF16);
    return f;
}

static void test_case(const mlp_case *c)
{
    static const char *kinds[3] = {"no norm", "adaRMSNorm", "Gemma RMSNorm"};
    uint64_t rng = 0x5eed0000u + (uint64_t)c->rows * 131 + c->I;
    const int R = c->rows, W = c->W, I = c->I;
    const size_t nx = (size_t)R * W;
    hmat hb = hmat_rand(&rng, R, W, -2, 2), gu = hmat_rand(&rng, 2 * I, W, -0.06f, 0.06f);
    hmat dn = hmat_rand(&rng, W, I, -0.03f, 0.03f);
    float *x = frand(nx, -3, 3), *gate = frand(W, -1, 1), *w = frand(W, -1, 1), *b = frand(W, -1, 1);
    size_t wb = 0;
    const int Q = c->Q > 0 ? c->Q : 8;
    hmat at = hmat_rand(&rng, R, Q, -1, 1), ow = hmat_rand(&rng, W, Q, -0.04f, 0.04f);
    float *og = frand(W, -1, 1), *mw = frand(W, -1, 1), *mb = frand(W, -1, 1);
    CHECK_OK(frt_cuda_gemma_mlp_work_bytes(R, W, I, c->Q, &wb));
    dbuf dat = dalloc((size_t)R * Q * 2), dow = dalloc((size_t)W * Q * 2), dog = dalloc((size_t)W * 4);
    dbuf dmw = dalloc((size_t)W * 4), dmb = dalloc((size_t)W * 4);
    dput(dat, 0, at.b, (size_t)R * Q * 2), dput(dow, 0, ow.b, (size_t)W * Q * 2), dput(dog, 0, og, (size_t)W * 4);
    dput(dmw, 0, mw, (size_t)W * 4), dput(dmb, 0, mb, (size_t)W * 4);
    dbuf dhb = dalloc(nx * 2), dgu = dalloc((size_t)2 * I * W * 2), ddn = dalloc((size_t)W * I * 2);
    dbuf dx = dalloc(nx * 4), dg = dalloc((size_t)W * 4), dw = dalloc((size_t)W * 4), db = dalloc((size_t)W * 4);
    dbuf dout = dalloc(nx * 2), dwork = dalloc(wb);
    dput(dhb, 0, hb.b, nx * 2), dput(dgu, 0, gu.b, (size_t)2 * I * W * 2), dput(ddn, 0, dn.b, (size_t)W * I * 2);
    dput(dg, 0, gate, (size_t)W * 4), dput(dw, 0, w, (size_t)W * 4), dput(db, 0, b, (size_t)W * 4);
    frt_cuda_gemma_mlp_args a = {.out = dout.p, .out_dtype = FRT_CUDA_BF16, .x = dx.p, .hb = dhb.p, .gu = dgu.p,
                                 .down = ddn.p, .gate = c->gated ? dg.p : NULL,
                                 .kind = c->kind < 0 ? FRT_CUDA_NORM_RMS_ADA : (frt_cuda_norm_kind)c->kind,
                                 .w = c->kind < 0 ? NULL : dw.p, .b = db.p, .eps = 1e-6f, .rows = R, .width = W,
                                 .inter = I, .work = dwork.p, .work_bytes = wb};
    if (c->Q > 0) {
        a.attn = dat.p, a.o = dow.p, a.q_dim = Q, a.o_gate = c->gated ? dog.p : NULL;
        a.mlp_kind = (frt_cuda_norm_kind)c->okind, a.mlp_w = dmw.p, a.mlp_b = dmb.p;
    }
    const int H = c->heads, HD = c->hd > 0 ? c->hd : 16, LDKV = HD + 8, NQ = (H + 2) * HD;
    hmat qw = hmat_rand(&rng, NQ, W, -0.04f, 0.04f);
    int32_t *pos = xzalloc((size_t)R * 4);
    float *inv = fnew((size_t)HD / 2);
    for (int r = 0; r < R; r++) pos[r] = 700 + 3 * r;
    for (int p2 = 0; p2 < HD / 2; p2++) inv[p2] = powf(10000.0f, -2.0f * p2 / HD);
    dbuf dqw = dalloc((size_t)NQ * W * 2), dpos = dalloc((size_t)R * 4), dinv = dalloc((size_t)HD * 2);
    dbuf dq = dalloc((size_t)R * (H > 0 ? H : 1) * HD * 2), dk = dalloc((size_t)R * LDKV * 2);
    dbuf dv = dalloc((size_t)R * LDKV * 2);
    dput(dqw, 0, qw.b, (size_t)NQ * W * 2), dput(dpos, 0, pos, (size_t)R * 4), dput(dinv, 0, inv, (size_t)HD * 2);
    if (H > 0) {
        a.qkv = dqw.p, a.heads = H, a.kv_heads = 1, a.head_dim = HD, a.ld_kv = LDKV;
        a.q_out = dq.p, a.k_out = dk.p, a.v_out = dv.p, a.pos = dpos.p, a.inv_freq = dinv.p;
    }
    att_host ah;
    memset(&ah, 0, sizeof ah);
    if (c->att_p > 0) {
        att_setup(&ah, &rng, c, dat.p);
        a.att = &ah.a, a.att_work = ah.dwork.p, a.att_work_bytes = ah.dwork.bytes;
    }
    CHECK_OK(frt_cuda_gemma_mlp_check(&a));
    dput(dx, 0, x, nx * 4);
    CHECK_OK(frt_cuda_gemma_mlp(g_cs, &a));
    sync_st();
    uint16_t *hgot = xzalloc((size_t)R * I * 2), *out = xzalloc(nx * 2);
    float *xgot = fnew(nx);
    dget(dwork, 0, hgot, (size_t)R * I * 2), dget(dout, 0, out, nx * 2), dget(dx, 0, xgot, nx * 4);
    char name[160];
    float *x1 = fdup(x, nx); /* x after o_proj's residual (the reference's) */
    float *hbin = hb.f;      /* the MLP's input: the given hb, or the kernel's first norm */
    float *atin = at.f; /* o_proj's input: the given attn, or the kernel's attention */
    if (c->att_p > 0) {
        float *ref = att_ref(&ah, c);
        atin = dfloats_bf16(dat, (size_t)R * Q);
        snprintf(name, sizeof name, "gemma_mlp %d: attention (%d heads of 256, %d keys%s%s) into attn", R, ah.heads,
                 ah.keys, c->solo ? ", Pi0's state token" : "", c->rmask ? ", masked rows" : "");
        report(name, frt_test_rel_err(atin, ref, (size_t)R * Q), 1.5e-2);
        free(ref);
    }
    if (c->Q > 0) {
        uint16_t *hbgot = xzalloc(nx * 2);
        dget(dhb, 0, hbgot, nx * 2);
        float *hbref = fnew(nx);
        hbin = bf16_floats(hbgot, nx);
        rest_ref(hbref, x1, atin, ow.f, c->gated ? og : NULL, c->okind, mw, mb, R, W, Q);
        snprintf(name, sizeof name, "gemma_mlp %d x %d: hb = %s(x + o_proj(attn [%d])%s) (bf16)", R, W,
                 kinds[c->okind], Q, c->gated ? " * gate" : "");
        report(name, frt_test_rel_err(hbin, hbref, nx), 8e-3);
        free(hbgot), free(hbref);
    }
    /* h against fp64 products */
    float *href = fnew((size_t)R * I), *hg = bf16_floats(hgot, (size_t)R * I);
    h_ref(href, hbin, gu.f, R, W, I);
    snprintf(name, sizeof name, "gemma_mlp %d x %d -> %d: h = gelu(gate) * up (bf16)", R, W, I);
    report(name, frt_test_rel_err(hg, href, (size_t)R * I), 2e-3);
    /* x and out from the kernel's own h */
    float *xref = x1, *oref = fnew(nx), *outf = bf16_floats(out, nx);
    rest_ref(oref, xref, hg, dn.f, c->gated ? gate : NULL, c->kind, w, b, R, W, I);
    snprintf(name, sizeof name, "gemma_mlp %d x %d -> %d: x += down(h)%s", R, W, I, c->gated ? " * gate" : "");
    report(name, frt_test_rel_err(xgot, xref, nx), c->Q > 0 ? 1e-5 : 2e-6);
    if (c->kind >= 0) {
        snprintf(name, sizeof name, "gemma_mlp %d x %d -> %d: out = %s (bf16)", R, W, I, kinds[c->kind]);
        report(name, frt_test_rel_err(outf, oref, nx), 8e-3);
    }
    if (H > 0) { /* q | k | v from the kernel's own out */
        float *qr = fnew((size_t)R * H * HD), *kr = fnew((size_t)R * LDKV), *vr = fnew((size_t)R * LDKV);
        qkv_ref(qr, kr, vr, outf, qw.f, pos, inv, R, W, H, HD, LDKV);
        float *qg = dfloats_bf16(dq, (size_t)R * H * HD), *kg = dfloats_bf16(dk, (size_t)R * LDKV);
        float *vg = dfloats_bf16(dv, (size_t)R * LDKV);
        for (int r = 0; r < R; r++)
            for (int j = HD; j < LDKV; j++) kg[(size_t)r * LDKV + j] = vg[(size_t)r * LDKV + j] = 0; /* untouched */
        snprintf(name, sizeof name, "gemma_mlp %d: next q (%d heads of %d, RoPE)", R, H, HD);
        report(name, frt_test_rel_err(qg, qr, (size_t)R * H * HD), 4e-3);
        snprintf(name, sizeof name, "gemma_mlp %d: next k (RoPE) into rows %d apart", R, LDKV);
        report(name, frt_test_rel_err(kg, kr, (size_t)R * LDKV), 4e-3);
        snprintf(name, sizeof name, "gemma_mlp %d: next v", R);
        report(name, frt_test_rel_err(vg, vr, (size_t)R * LDKV), 4e-3);
        free(qr), free(kr), free(vr), free(qg), free(kg), free(vg);
    }
    /* a second run from the same x, and with out over hb: the same bits */
    dput(dx, 0, x, nx * 4);
    CHECK_OK(frt_cuda_gemma_mlp(g_cs, &a));
    sync_st();
    uint16_t *out2 = xzalloc(nx * 2);
    float *x2 = fnew(nx);
    dget(dout, 0, out2, nx * 2), dget(dx, 0, x2, nx * 4);
    report_same("gemma_mlp: a second run, the same x", x2, xgot, nx * 4);
    if (c->att_p > 0) {
        float *at2 = dfloats_bf16(dat, (size_t)R * Q);
        report_same("gemma_mlp: a second run, the same attention", at2, atin, (size_t)R * Q * 4);
        free(at2);
    }
    if (c->kind >= 0) {
        report_same("gemma_mlp: a second run, the same out", out2, out, nx * 2);
        dput(dx, 0, x, nx * 4);
        a.out = dhb.p;
        CHECK_OK(frt_cuda_gemma_mlp(g_cs, &a));
        sync_st();
        dget(dhb, 0, out2, nx * 2);
        report_same("gemma_mlp: out aliasing hb, the same out", out2, out, nx * 2);
    }
    free(hgot), free(out), free(out2), free(xgot), free(x2), free(href), free(hg), free(xref), free(oref), free(outf);
    if (hbin != hb.f) free(hbin);
    if (atin != at.f) free(atin);
    if (c->att_p > 0) att_free(&ah);
    free(x), free(gate), free(w), free(b), free(og), free(mw), free(mb);
    hmat_free(&at), hmat_free(&ow), hmat_free(&qw);
    free(pos), free(inv);
    dfree(&dqw), dfree(&dpos), dfree(&dinv), dfree(&dq), dfree(&dk), dfree(&dv);
    dfree(&dat), dfree(&dow), dfree(&dog), dfree(&dmw), dfree(&dmb);
    hmat_free(&hb), hmat_free(&gu), hmat_free(&dn);
    dfree(&dhb), dfree(&dgu), dfree(&ddn), dfree(&dx), dfree(&dg), dfree(&dw), dfree(&db), dfree(&dout);
    dfree(&dwork);
}

/* Shapes the kernel does not take: FRT_ERR_UNSUPPORTED from the check and
 * the launch, nothing enqueued (x untouched). */
static void test_unsupported(void)
{
    const int W = 2048, I = 512, R = 24; /* a width other than 1024 */
    size_t wb = 0;
    CHECK_OK(frt_cuda_gemma_mlp_work_bytes(R, W, I, 0, &wb));
    dbuf dhb = dalloc((size_t)R * W * 2), dgu = dalloc((size_t)2 * I * W * 2), ddn = dalloc((size_t)W * I * 2);
    dbuf dx = dalloc((size_t)R * W * 4), dwork = dalloc(wb);
    dsentinel(dx);
    frt_cuda_gemma_mlp_args a = {.x = dx.p, .hb = dhb.p, .gu = dgu.p, .down = ddn.p, .rows = R, .width = W,
                                 .inter = I, .work = dwork.p, .work_bytes = wb};
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&a), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_cuda_gemma_mlp(g_cs, &a), FRT_ERR_UNSUPPORTED);
    sync_st();
    report_flag("gemma_mlp: width 2048 refused, x untouched", untouched(dx, 0, (size_t)R * W * 4));
    dfree(&dhb), dfree(&dgu), dfree(&ddn), dfree(&dx), dfree(&dwork);
}

/* The timed comparison: L layers of distinct weights. */
#define TL 8
typedef struct mlp_timing {
    frt_cuda_gemm *gemm;
    dbuf gu[TL], dn[TL], ow[TL], attn, hb, x, gate, w, b, y, act, work;
    int with_o, with_att; /* with_att: the attention in front (its products and softmax when separate) */
    frt_cuda_bmm *bmm;
    dbuf q, k[TL], v[TL], km, scores, probs, att_work;
    frt_cuda_attn_args att[TL];
    size_t wb;
    int R, W, I;
} mlp_timing;

static int rec_fused(frt_stream *st, void *user)
{
    mlp_timing *t = user;
    for (int l = 0; l < TL; l++) {
        frt_cuda_gemma_mlp_args a = {.out = t->hb.p, .out_dtype = FRT_CUDA_BF16, .x = t->x.p, .hb = t->hb.p,
                                     .gu = t->gu[l].p, .down = t->dn[l].p, .gate = t->gate.p,
                                     .kind = FRT_CUDA_NORM_RMS_ADA, .w = t->w.p, .b = t->b.p, .eps = 1e-6f,
                                     .rows = t->R, .width = t->W, .inter = t->I, .work = t->work.p,
                                     .work_bytes = t->wb};
        if (t->with_o)
            a.attn = t->attn.p, a.o = t->ow[l].p, a.q_dim = 2048, a.o_gate = t->gate.p,
            a.mlp_kind = FRT_CUDA_NORM_RMS_ADA, a.mlp_w = t->w.p, a.mlp_b = t->b.p;
        if (t->with_att) a.att = &t->att[l], a.att_work = t->att_work.p, a.att_work_bytes = t->att_work.bytes;
        FRT_TRY(frt_cuda_gemma_mlp(frt_stream_native(st), &a));
    }
    return 0;
}

static int rec_separate(frt_stream *st, void *user)
{
    mlp_timing *t = user;
    void *s = frt_stream_native(st);
    for (int l = 0; l < TL; l++) {
        if (t->with_att) FRT_TRY(frt_cuda_attention_masked(t->bmm, s, &t->att[l]));
        if (t->with_o) {
            FRT_TRY(frt_cuda_gemm_run(t->gemm, s, t->y.p, FRT_CUDA_F32, t->attn.p, t->ow[l].p, t->R, 2048, t->W, 0));
            FRT_TRY(frt_cuda_add_norm(s, t->hb.p, FRT_CUDA_BF16, t->x.p, t->y.p, NULL, t->gate.p,
                                      FRT_CUDA_NORM_RMS_ADA, t->w.p, t->b.p, t->R, t->W, 1e-6f));
        }
        FRT_TRY(frt_cuda_gemm_run(t->gemm, s, t->y.p, FRT_CUDA_BF16, t->hb.p, t->gu[l].p, t->R, t->W, 2 * t->I, 0));
        FRT_TRY(frt_cuda_geglu_tanh(s, t->act.p, FRT_CUDA_BF16, t->y.p, FRT_CUDA_BF16, t->R, t->I));
        FRT_TRY(frt_cuda_gemm_run(t->gemm, s, t->y.p, FRT_CUDA_F32, t->act.p, t->dn[l].p, t->R, t->I, t->W, 0));
        FRT_TRY(frt_cuda_add_norm(s, t->hb.p, FRT_CUDA_BF16, t->x.p, t->y.p, NULL, t->gate.p, FRT_CUDA_NORM_RMS_ADA,
                                  t->w.p, t->b.p, t->R, t->W, 1e-6f));
    }
    return 0;
}

static void time_expert(int R)
{
    mlp_timing t;
    memset(&t, 0, sizeof t);
    t.R = R, t.W = 1024, t.I = 4096;
    uint64_t rng = 77;
    for (int l = 0; l < TL; l++) {
        hmat gu = hmat_rand(&rng, 2 * t.I, t.W, -0.06f, 0.06f), dn = hmat_rand(&rng, t.W, t.I, -0.03f, 0.03f);
        hmat ow = hmat_rand(&rng, t.W, 2048, -0.04f, 0.04f);
        t.gu[l] = dalloc((size_t)2 * t.I * t.W * 2), t.dn[l] = dalloc((size_t)t.W * t.I * 2);
        t.ow[l] = dalloc((size_t)t.W * 2048 * 2);
        dput(t.gu[l], 0, gu.b, (size_t)2 * t.I * t.W * 2), dput(t.dn[l], 0, dn.b, (size_t)t.W * t.I * 2);
        dput(t.ow[l], 0, ow.b, (size_t)t.W * 2048 * 2);
        hmat_free(&gu), hmat_free(&dn), hmat_free(&ow);
    }
    hmat hb = hmat_rand(&rng, R, t.W, -2, 2), at = hmat_rand(&rng, R, 2048, -1, 1);
    t.attn = dalloc((size_t)R * 2048 * 2);
    dput(t.attn, 0, at.b, (size_t)R * 2048 * 2);
    hmat_free(&at);
    float *x = frand((size_t)R * t.W, -3, 3), *v = frand(t.W, -0.5f, 0.5f);
    t.hb = dalloc((size_t)R * t.W * 2), t.x = dalloc((size_t)R * t.W * 4);
    t.gate = dalloc((size_t)t.W * 4), t.w = dalloc((size_t)t.W * 4), t.b = dalloc((size_t)t.W * 4);
    t.y = dalloc((size_t)R * 2 * t.I * 4), t.act = dalloc((size_t)R * t.I * 2);
    dput(t.hb, 0, hb.b, (size_t)R * t.W * 2), dput(t.x, 0, x, (size_t)R * t.W * 4);
    dput(t.gate, 0, v, (size_t)t.W * 4), dput(t.w, 0, v, (size_t)t.W * 4), dput(t.b, 0, v, (size_t)t.W * 4);
    CHECK_OK(frt_cuda_gemma_mlp_work_bytes(R, t.W, t.I, 2048, &t.wb));
    t.work = dalloc(t.wb);
    must(frt_cuda_gemm_create((size_t)32 << 20, &t.gemm), "gemm handle");
    must(frt_cuda_gemm_add_stream(t.gemm, g_cs), "gemm stream");
    must(frt_cuda_gemm_plan(t.gemm, R, t.W, 2 * t.I, FRT_CUDA_BF16, 0), "gate | up plan");
    must(frt_cuda_gemm_plan(t.gemm, R, t.I, t.W, FRT_CUDA_F32, 0), "down plan");
    must(frt_cuda_gemm_plan(t.gemm, R, 2048, t.W, FRT_CUDA_F32, 0), "o plan");
    frt_cuda_gemma_mlp_args a = {.out = t.hb.p, .out_dtype = FRT_CUDA_BF16, .x = t.x.p, .hb = t.hb.p,
                                 .gu = t.gu[0].p, .down = t.dn[0].p, .gate = t.gate.p, .kind = FRT_CUDA_NORM_RMS_ADA,
                                 .w = t.w.p, .b = t.b.p, .eps = 1e-6f, .rows = R, .width = t.W, .inter = t.I,
                                 .work = t.work.p, .work_bytes = t.wb};
    CHECK_OK(frt_cuda_gemma_mlp_check(&a));
    const double sep = graph_us("mlp separate", rec_separate, &t, TL);
    double ph[2];
    for (int k = 1; k <= 2; k++) {
        frt_cuda_gemma_mlp_set_phases(k);
        ph[k - 1] = graph_us("mlp phases", rec_fused, &t, TL);
    }
    frt_cuda_gemma_mlp_set_phases(3);
    const double fused = graph_us("mlp fused", rec_fused, &t, TL);
    t.with_o = 1;
    const double sep_o = graph_us("tail separate", rec_separate, &t, TL);
    const double fused_o = graph_us("tail fused", rec_fused, &t, TL);
    const double bytes = (double)3 * t.I * t.W * 2, bytes_o = bytes + (double)t.W * 2048 * 2;
    printf("  timing: expert MLP %d x %d -> %d, a layer (graph of %d layers): 5 launches %.2f us, one %.2f us "
           "(weights alone at 3.0 TB/s: %.2f us)\n",
           R, t.W, t.I, TL, sep, fused, bytes / 3.0e6);
    printf("  timing: its phases: gate | up + GeGLU %.2f us, + down %.2f us, + the rows %.2f us\n", ph[0], ph[1],
           fused);
    printf("  timing: with o_proj (2048 -> %d) in front: 7 launches %.2f us, one %.2f us (weights alone %.2f us)\n",
           t.W, sep_o, fused_o, bytes_o / 3.0e6);
    /* the attention in front: 8 heads of 256 over 968 prefix keys and the 50 rows' own, each layer its KV */
    const int NKV = 1018;
    t.q = dalloc((size_t)R * 2048 * 2), t.km = dalloc(968);
    t.scores = dalloc((size_t)R * 8 * 1024 * 4), t.probs = dalloc((size_t)R * 8 * 1024 * 2);
    size_t awb = 0;
    CHECK_OK(frt_cuda_gemma_mlp_att_work_bytes(R, 8, NKV, &awb));
    t.att_work = dalloc(awb);
    hmat q = hmat_rand(&rng, R, 2048, -1, 1);
    dput(t.q, 0, q.b, (size_t)R * 2048 * 2);
    hmat_free(&q);
    uint8_t ones[968];
    memset(ones, 1, sizeof ones);
    dput(t.km, 0, ones, sizeof ones);
    must(frt_cuda_bmm_create((size_t)8 << 20, &t.bmm), "bmm handle");
    for (int l = 0; l < TL; l++) {
        hmat kl = hmat_rand(&rng, NKV, 256, -1, 1), vl = hmat_rand(&rng, NKV, 256, -1, 1);
        t.k[l] = dalloc((size_t)NKV * 512), t.v[l] = dalloc((size_t)NKV * 512);
        dput(t.k[l], 0, kl.b, (size_t)NKV * 512), dput(t.v[l], 0, vl.b, (size_t)NKV * 512);
        hmat_free(&kl), hmat_free(&vl);
        frt_cuda_attn_args *al = &t.att[l];
        memset(al, 0, sizeof *al);
        al->out = t.attn.p, al->q = t.q.p, al->k = t.k[l].p, al->v = t.v[l].p, al->ldq = 2048, al->ldkv = 256;
        al->n_q = R, al->n_kv = NKV, al->n_heads = 8, al->n_kv_heads = 1, al->head_dim = 256, al->scale = 0.0625f;
        al->scores = t.scores.p, al->probs = t.probs.p, al->ld_s = 1024;
        al->mask.d_kmask = t.km.p, al->mask.kmask_len = 968, al->mask.sfx_start = 968, al->mask.sfx_n = R;
        al->mask.rows_per_token = 8, al->mask.tokens = R;
    }
    must(frt_cuda_attention_masked_plan(t.bmm, &t.att[0]), "attention plan");
    t.with_att = 1;
    const double sep_a = graph_us("layer separate", rec_separate, &t, TL);
    const double fused_a = graph_us("layer fused", rec_fused, &t, TL);
    double pa[2];
    for (int k = 4; k <= 5; k++) {
        frt_cuda_gemma_mlp_set_phases(k);
        pa[k - 4] = graph_us("attention phases", rec_fused, &t, TL);
    }
    frt_cuda_gemma_mlp_set_phases(3);
    printf("  timing: with the attention (8 heads of 256 over %d keys) in front: its 3 launches + 7 %.2f us, one "
           "%.2f us (the tail alone above %.2f us); the launch to the key splits' end %.2f us, to their merge "
           "%.2f us\n",
           NKV, sep_a, fused_a, fused_o, pa[0], pa[1]);
    frt_cuda_bmm_destroy(t.bmm);
    for (int l = 0; l < TL; l++) dfree(&t.k[l]), dfree(&t.v[l]);
    dfree(&t.q), dfree(&t.km), dfree(&t.scores), dfree(&t.probs), dfree(&t.att_work);
    frt_cuda_gemm_destroy(t.gemm);
    for (int l = 0; l < TL; l++) dfree(&t.gu[l]), dfree(&t.dn[l]), dfree(&t.ow[l]);
    dfree(&t.attn);
    dfree(&t.hb), dfree(&t.x), dfree(&t.gate), dfree(&t.w), dfree(&t.b), dfree(&t.y), dfree(&t.act);
    dfree(&t.work);
    hmat_free(&hb), free(x), free(v);
}

/* Refused before any device call. */
static void test_args(void)
{
    _Alignas(16) float f[8];
    _Alignas(16) uint16_t h[8];
    size_t wb = 0;
    CHECK_STATUS(frt_cuda_gemma_mlp_work_bytes(0, 1024, 256, 0, &wb), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemma_mlp_work_bytes(1, 1024, 256, -1, &wb), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemma_mlp_work_bytes(1, 1024, 256, 0, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_cuda_gemma_mlp_work_bytes(50, 1024, 4096, 0, &wb));
    CHECK(wb == (size_t)56 * 4096 * 2 + (size_t)16 * 56 * 1024 * 4);
    size_t wq = 0;
    CHECK_OK(frt_cuda_gemma_mlp_work_bytes(50, 1024, 1024, 4096, &wq)); /* o_proj's 32 slabs of partial sums */
    CHECK(wq == (size_t)56 * 1024 * 2 + (size_t)32 * 56 * 1024 * 4);
    frt_cuda_gemma_mlp_args a = {.out = h, .out_dtype = FRT_CUDA_BF16, .x = f, .hb = h, .gu = h, .down = h,
                                 .kind = FRT_CUDA_NORM_RMS_ONE, .w = f, .eps = 1e-6f, .rows = 50, .width = 1024,
                                 .inter = 4096, .work = f, .work_bytes = wb};
    frt_cuda_gemma_mlp_args b = a;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    b.down = NULL;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.rows = 0;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.work_bytes = wb - 1;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.kind = (frt_cuda_norm_kind)9;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.kind = FRT_CUDA_NORM_RMS_ADA; /* no shift */
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.out = f; /* out over x */
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.out = NULL;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.kind = FRT_CUDA_NORM_LAYER, b.b = f;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_UNSUPPORTED);
    b = a, b.rows = 65, b.work_bytes = (size_t)1 << 30;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_UNSUPPORTED);
    b = a, b.width = 1000;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_UNSUPPORTED);
    b = a, b.inter = 4000;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_UNSUPPORTED);
    /* o_proj in front */
    CHECK_OK(frt_cuda_gemma_mlp_work_bytes(50, 1024, 4096, 2048, &wq));
    frt_cuda_gemma_mlp_args q = a;
    q.attn = h, q.o = h, q.q_dim = 2048, q.mlp_kind = FRT_CUDA_NORM_RMS_ONE, q.mlp_w = f, q.work_bytes = wq;
    b = q, b.o = NULL;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = q, b.mlp_w = NULL;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = q, b.q_dim = 0;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = q, b.mlp_kind = FRT_CUDA_NORM_RMS_ADA; /* no shift */
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = q, b.q_dim = 4096; /* work too small for o_proj's 32 slabs of partial sums */
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_INVALID_ARGUMENT);
    b = q, b.q_dim = 2000;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_UNSUPPORTED);
    b = q, b.mlp_kind = FRT_CUDA_NORM_LAYER, b.mlp_b = f;
    CHECK_STATUS(frt_cuda_gemma_mlp(NULL, &b), FRT_ERR_UNSUPPORTED);
    /* the next q | k | v */
    b = a, b.qkv = h, b.heads = 1, b.kv_heads = 1, b.head_dim = 24, b.ld_kv = 24;
    b.q_out = h, b.k_out = h, b.v_out = h, b.pos = (const int32_t *)f, b.inv_freq = f;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_UNSUPPORTED); /* head_dim not a multiple of 16 */
    b.head_dim = 32, b.ld_kv = 32, b.pos = NULL;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    b.pos = (const int32_t *)f, b.ld_kv = 31; /* rows shorter than a head */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    b = a, b.x = (float *)((char *)f + 4); /* not 16-byte aligned */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_UNSUPPORTED);
    /* the attention in front */
    size_t aw = 0;
    CHECK_STATUS(frt_cuda_gemma_mlp_att_work_bytes(0, 8, 100, &aw), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemma_mlp_att_work_bytes(50, 8, 0, &aw), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_cuda_gemma_mlp_att_work_bytes(50, 8, 1018, &aw)); /* 7 row tiles of 64 over 16 key splits */
    CHECK(aw == (size_t)16 * 7 * 64 * (256 * 4 + 8));
    frt_cuda_attn_args t = {.out = h, .q = h, .k = h, .v = h, .ldq = 2048, .ldkv = 256, .n_q = 50, .n_kv = 1018,
                            .n_heads = 8, .n_kv_heads = 1, .head_dim = 256, .scale = 0.0625f};
    t.mask.kmask_len = 968, t.mask.sfx_start = 968, t.mask.sfx_n = 50;
    frt_cuda_gemma_mlp_args at = q;
    at.att = &t, at.att_work = f, at.att_work_bytes = aw;
    frt_cuda_attn_args u = t;
    b = at, b.att_work = NULL;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    b = at, b.att_work_bytes = aw - 1;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    b = at, b.attn = NULL, b.att = &t; /* attn is its output */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    u = t, u.out = h + 8, b = at, b.att = &u; /* out other than attn */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    u = t, u.n_q = 49, b = at, b.att = &u;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    u = t, u.n_heads = 4, b = at, b.att = &u; /* heads x head_dim other than q_dim */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    u = t, u.batch = 2, b = at, b.att = &u;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    u = t, u.mask.sfx_start = 900, b = at, b.att = &u; /* the suffix inside the key mask */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_INVALID_ARGUMENT);
    u = t, u.n_heads = 16, u.head_dim = 128, b = at, b.att = &u, b.att_work_bytes = (size_t)1 << 30;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_UNSUPPORTED); /* head_dim 128 */
    u = t, u.n_kv_heads = 2, b = at, b.att = &u;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_UNSUPPORTED);
    u = t, u.ldkv = 260, b = at, b.att = &u;
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_UNSUPPORTED);
    u = t, u.k = h + 1, b = at, b.att = &u; /* not 16-byte aligned */
    CHECK_STATUS(frt_cuda_gemma_mlp_check(&b), FRT_ERR_UNSUPPORTED);
}
#endif /* FRT_HAVE_CUDA */

int main(void)
{
    frt_test_seed(47);
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    test_args();
    frt_test_cuda_start();
    static const mlp_case cases[] = {
        /* the Pi0.5 expert's layer after its q | k | v, 2 and 3 cameras with a 200-token prompt */
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ADA, 1, 2048, FRT_CUDA_NORM_RMS_ADA, 8, 256, 712, 0, 0},
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ADA, 1, 2048, FRT_CUDA_NORM_RMS_ADA, 8, 256, 968, 0, 0},
        /* Pi0's (the state token), masked rows, a key split past the grid's first pass */
        {51, 1024, 4096, FRT_CUDA_NORM_RMS_ONE, 0, 2048, FRT_CUDA_NORM_RMS_ONE, 8, 256, 1049, 1, 1},
        {13, 1024, 512, FRT_CUDA_NORM_RMS_ADA, 1, 512, FRT_CUDA_NORM_RMS_ADA, 0, 0, 37, 1, 0},
        {64, 1024, 768, FRT_CUDA_NORM_RMS_ONE, 1, 2048, FRT_CUDA_NORM_RMS_ADA, 8, 256, 2301, 0, 1},
        /* the Pi0.5 expert's tail */
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ADA, 1, 2048, FRT_CUDA_NORM_RMS_ADA, 8, 256, 0, 0, 0},
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ONE, 0, 2048, FRT_CUDA_NORM_RMS_ONE, 8, 256, 0, 0, 0}, /* Pi0's */
        /* the last layer's but one */
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ADA, 1, 2048, FRT_CUDA_NORM_RMS_ADA, 0, 0, 0, 0, 0},
        {13, 1024, 512, FRT_CUDA_NORM_RMS_ONE, 1, 256, FRT_CUDA_NORM_RMS_ADA, 3, 48, 0, 0, 0},
        {13, 1024, 512, -1, 1, 256, FRT_CUDA_NORM_RMS_ADA, 0, 0, 0, 0, 0},
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ADA, 1, 0, 0, 0, 0, 0, 0, 0}, /* the Pi0.5 expert's MLP block */
        {50, 1024, 4096, -1, 1, 0, 0, 0, 0, 0, 0, 0},                    /* its last layer: no norm after it */
        {50, 1024, 4096, FRT_CUDA_NORM_RMS_ONE, 0, 0, 0, 0, 0, 0, 0, 0}, /* Pi0's expert */
        {13, 1024, 512, FRT_CUDA_NORM_RMS_ADA, 1, 0, 0, 0, 0, 0, 0, 0},
        {1, 1024, 256, FRT_CUDA_NORM_RMS_ONE, 1, 0, 0, 0, 0, 0, 0, 0},
        {64, 1024, 768, FRT_CUDA_NORM_RMS_ADA, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i]);
    test_unsupported();
    time_expert(50);
    return frt_test_report();
#endif
}
