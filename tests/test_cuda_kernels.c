/*
 * test_cuda_kernels.c - every CUDA kernel (src/kernels/cuda/) against its CPU
 * twin (src/kernels/cpu/) on random data, norm-wise ||gpu - cpu|| / ||cpu||
 * within the tolerance of the storage precision (fp32 outputs 1e-5, bf16
 * outputs 1e-2; GEMM f32 1e-4), with bf16 inputs rounded the same way on the
 * CPU side so that the error measured is the kernel's, not the input
 * rounding's. Also:
 *   - dynamic values: the same launch (same arguments) is run again after
 *     changing the count / position in device memory, and must follow them;
 *     rows past the valid count must stay untouched (sentinel bytes);
 *   - a CUDA graph (frt_graph_capture) of rope + KV append + flash-decoding,
 *     and one of the chunked gated delta rule + argmax + sampling, replayed at
 *     several positions / lengths;
 *   - determinism: the same launch three times gives identical bytes;
 *   - bad arguments fail cleanly with FRT_ERR_INVALID_ARGUMENT (checked
 *     before the device check, so they also run on machines without a GPU).
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
#include "kernels/cuda/fanout.h"
#include "model/arch/batch_cuda.h"
#include "util/bf16.h"

#define FRT_TEST_CUDA_COL 58
#define FRT_TEST_CUDA_START_N
#include "frt_test_cuda.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define TOL_GEMM_F32 1e-4 /* tensor-core fp32 accumulation vs OpenBLAS, k up to 1024 */

static const frt_cuda_dtype F32 = FRT_CUDA_F32, BF16 = FRT_CUDA_BF16;

/* ---- harness helpers -------------------------------------------------- */

static double tol_of(frt_cuda_dtype out_dt) { return out_dt == BF16 ? TOL_BF16 : TOL_F32; }

/* ---- embedding ------------------------------------------------------- */

static void test_embedding(void)
{
    const int vocab = 1000, dim = 200, max_n = 12;
    uint16_t *table = xzalloc((size_t)vocab * dim * 2);
    float *tf = frand((size_t)vocab * dim, -1, 1);
    frt_f32_array_to_bf16(tf, table, (size_t)vocab * dim);
    int32_t ids[12];
    for (int t = 0; t < max_n; t++) ids[t] = (int32_t)(frt_test_u64() % vocab);
    ids[3] = vocab + 5; /* invalid: a row of zeros */
    ids[7] = -1;
    dbuf d_tab = dalloc((size_t)vocab * dim * 2), d_ids = dalloc(sizeof ids);
    dbuf d_out = dalloc((size_t)max_n * dim * 4);
    dput(d_tab, 0, table, (size_t)vocab * dim * 2);
    dput(d_ids, 0, ids, sizeof ids);

    float *ref = fnew((size_t)max_n * dim), *got = fnew((size_t)max_n * dim);
    for (int t = 0; t < max_n; t++) {
        if (ids[t] < 0 || ids[t] >= vocab) continue; /* stays 0 */
        frt_cpu_embedding_bf16(ref + (size_t)t * dim, table, &ids[t], 1, dim);
    }
    set_dyn(0, max_n);
    CHECK_OK(frt_cuda_embedding(g_cs, d_out.p, F32, d_tab.p, vocab, dim, d_ids.p,
                                d_n_p(), max_n));
    dget_as(d_out, 0, got, (size_t)max_n * dim, F32);
    report("embedding f32 (invalid ids -> 0 rows)", frt_test_rel_err(got, ref, (size_t)max_n * dim),
           0.0);
    CHECK(memcmp(got, ref, (size_t)max_n * dim * 4) == 0);

    /* bf16 out: the table bits */
    CHECK_OK(frt_cuda_embedding(g_cs, d_out.p, BF16, d_tab.p, vocab, dim, d_ids.p, NULL, max_n));
    uint16_t *gb = xzalloc((size_t)max_n * dim * 2);
    dget(d_out, 0, gb, (size_t)max_n * dim * 2);
    int bits_ok = 1;
    for (int t = 0; t < max_n; t++)
        for (int i = 0; i < dim; i++) {
            uint16_t want = (ids[t] < 0 || ids[t] >= vocab) ? 0 : table[(size_t)ids[t] * dim + i];
            bits_ok &= gb[(size_t)t * dim + i] == want;
        }
    report("embedding bf16 (bit copy)", bits_ok ? 0.0 : 1.0, 0.0);

    /* dynamic count: rows >= 5 untouched */
    dsentinel(d_out);
    set_dyn(0, 5);
    CHECK_OK(frt_cuda_embedding(g_cs, d_out.p, F32, d_tab.p, vocab, dim, d_ids.p, d_n_p(), max_n));
    dget_as(d_out, 0, got, (size_t)5 * dim, F32);
    report("embedding f32, n = 5 of 12 from device", frt_test_rel_err(got, ref, (size_t)5 * dim),
           0.0);
    CHECK(untouched(d_out, (size_t)5 * dim * 4, (size_t)(max_n - 5) * dim * 4));

    dfree(&d_tab);
    dfree(&d_ids);
    dfree(&d_out);
    free(table);
    free(tf);
    free(ref);
    free(got);
    free(gb);
}

/* ---- norms ------------------------------------------------------------ */

static void rmsnorm_case(int max_n, int n, int heads, int dim, int zc, frt_cuda_dtype xdt,
                         frt_cuda_dtype odt)
{
    const size_t tot = (size_t)max_n * heads * dim, val = (size_t)n * heads * dim;
    float *x = frand(tot, -2, 2), *w = frand((size_t)dim, -0.5f, 0.5f);
    float *ref = fnew(tot), *got = fnew(tot);
    dbuf dx = dalloc(tot * 4), dw = dalloc((size_t)dim * 4), dout = dalloc(tot * 4);
    dprep(dx, x, tot, xdt);
    dput(dw, 0, w, (size_t)dim * 4);
    frt_cpu_rmsnorm(ref, x, w, n * heads, dim, 1e-6f, zc);
    dsentinel(dout);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_rmsnorm(g_cs, dout.p, odt, dx.p, xdt, dw.p, d_n_p(), max_n, heads, dim, 1e-6f,
                              zc));
    dget_as(dout, 0, got, val, odt);
    char name[128];
    snprintf(name, sizeof name, "rmsnorm %s -> %s, %d x %d heads x %d, zc %d, n %d/%d", dtn(xdt),
             dtn(odt), max_n, heads, dim, zc, n, max_n);
    report(name, frt_test_rel_err(got, ref, val), tol_of(odt));
    CHECK(untouched(dout, val * (odt == BF16 ? 2 : 4), (tot - val) * (odt == BF16 ? 2 : 4)));

    if (odt == F32 && xdt == F32) {
        /* determinism, then in place (out == x) gives the same bits */
        void *a = snap(dout, tot * 4);
        for (int r = 0; r < 2; r++) {
            CHECK_OK(frt_cuda_rmsnorm(g_cs, dout.p, odt, dx.p, xdt, dw.p, d_n_p(), max_n, heads,
                                      dim, 1e-6f, zc));
            void *b = snap(dout, tot * 4);
            if (r == 1) report_same("rmsnorm determinism (3 runs)", a, b, tot * 4);
            free(b);
        }
        CHECK_OK(frt_cuda_rmsnorm(g_cs, dx.p, odt, dx.p, xdt, dw.p, d_n_p(), max_n, heads, dim,
                                  1e-6f, zc));
        void *c = snap(dx, val * 4);
        report_same("rmsnorm in place == out of place", a, c, val * 4);
        free(a);
        free(c);
    }
    dfree(&dx);
    dfree(&dw);
    dfree(&dout);
    free(x);
    free(w);
    free(ref);
    free(got);
}

static void test_add_rmsnorm(frt_cuda_dtype ddt, frt_cuda_dtype odt)
{
    const int max_n = 10, n = 7, dim = 1536;
    const size_t tot = (size_t)max_n * dim, val = (size_t)n * dim;
    float *r = frand(tot, -3, 3), *dl = frand(tot, -1, 1), *w = frand((size_t)dim, -0.3f, 0.3f);
    dbuf dr = dalloc(tot * 4), dd = dalloc(tot * 4), dw = dalloc((size_t)dim * 4),
         dout = dalloc(tot * 4);
    dput(dr, 0, r, tot * 4);
    dprep(dd, dl, tot, ddt);
    dput(dw, 0, w, (size_t)dim * 4);
    float *r_ref = fdup(r, tot), *h_ref = fnew(tot), *got = fnew(tot);
    frt_cpu_add(r_ref, dl, (int)val);
    frt_cpu_rmsnorm(h_ref, r_ref, w, n, dim, 1e-6f, 1);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_add_rmsnorm(g_cs, dr.p, dd.p, ddt, dout.p, odt, dw.p, d_n_p(), max_n, dim,
                                  1e-6f, 1));
    dget(dr, 0, got, tot * 4);
    char name[128];
    snprintf(name, sizeof name, "add_rmsnorm residual (delta %s), n %d/%d", dtn(ddt), n, max_n);
    report(name, frt_test_rel_err(got, r_ref, val), 0.0); /* one fp32 add: exact */
    CHECK(memcmp(got + val, r + val, (tot - val) * 4) == 0); /* rows >= n untouched */
    dget_as(dout, 0, got, val, odt);
    snprintf(name, sizeof name, "add_rmsnorm out %s", dtn(odt));
    report(name, frt_test_rel_err(got, h_ref, val), tol_of(odt));
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

/* zs > heads * dim: z rows at a token stride (NaN between them) */
static void test_rmsnorm_gated(frt_cuda_dtype xdt, frt_cuda_dtype zdt, frt_cuda_dtype odt, int zs)
{
    const int max_n = 9, n = 6, heads = 4, dim = 128;
    const size_t tot = (size_t)max_n * heads * dim, val = (size_t)n * heads * dim;
    float *x = frand(tot, -2, 2), *z = frand(tot, -4, 4), *w = frand((size_t)dim, 0.5f, 1.5f);
    if (zdt == BF16) round_bf16(z, tot);
    float *zsd = fnew((size_t)max_n * zs);
    for (int t = 0; t < max_n; t++)
        for (int c = 0; c < zs; c++) zsd[(size_t)t * zs + c] = c < heads * dim ? z[(size_t)t * heads * dim + c] : NAN;
    dbuf dx = dalloc(tot * 4), dz = dalloc((size_t)max_n * zs * 4), dw = dalloc((size_t)dim * 4),
         dout = dalloc(tot * 4);
    dprep(dx, x, tot, xdt);
    dprep(dz, zsd, (size_t)max_n * zs, zdt);
    free(zsd);
    dput(dw, 0, w, (size_t)dim * 4);
    float *ref = fnew(tot), *got = fnew(tot);
    frt_cpu_rmsnorm_gated(ref, x, z, w, n * heads, dim, 1e-6f);
    dsentinel(dout);
    set_dyn(0, n);
    if (zs == heads * dim)
        CHECK_OK(frt_cuda_rmsnorm_gated(g_cs, dout.p, odt, dx.p, xdt, dz.p, zdt, dw.p, d_n_p(), max_n, heads, dim,
                                        1e-6f));
    else
        CHECK_OK(frt_cuda_rmsnorm_gated_strided(g_cs, dout.p, odt, dx.p, xdt, dz.p, zdt, zs, dw.p, d_n_p(), max_n,
                                                heads, dim, 1e-6f));
    dget_as(dout, 0, got, val, odt);
    char name[128];
    snprintf(name, sizeof name, "rmsnorm_gated x %s z %s (stride %d) -> %s, n %d/%d", dtn(xdt), dtn(zdt), zs,
             dtn(odt), n, max_n);
    report(name, frt_test_rel_err(got, ref, val), tol_of(odt));
    CHECK(untouched(dout, val * (odt == BF16 ? 2 : 4), (tot - val) * (odt == BF16 ? 2 : 4)));
    /* 36 rows ran 8 to a block (a warp each); max_n 7 (28 rows) runs a row per
     * block: the same bits */
    {
        const size_t vb = val * (odt == BF16 ? 2 : 4);
        void *warp_rows = snap(dout, vb);
        CHECK_OK(frt_cuda_rmsnorm_gated_strided(g_cs, dout.p, odt, dx.p, xdt, dz.p, zdt, zs, dw.p, d_n_p(), 7,
                                                heads, dim, 1e-6f));
        void *block_rows = snap(dout, vb);
        snprintf(name, sizeof name, "rmsnorm_gated x %s z %s -> %s: a warp per row == a block per row", dtn(xdt),
                 dtn(zdt), dtn(odt));
        report_same(name, warp_rows, block_rows, vb);
        free(warp_rows);
        free(block_rows);
    }
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

static void test_l2norm(frt_cuda_dtype dt)
{
    const int max_n = 11, n = 8, heads = 2, dim = 128;
    const size_t tot = (size_t)max_n * heads * dim, val = (size_t)n * heads * dim;
    float *x = frand(tot, -1, 1);
    dbuf dx = dalloc(tot * 4);
    dprep(dx, x, tot, dt);
    float *ref = fdup(x, tot), *got = fnew(tot);
    frt_cpu_l2norm(ref, n * heads, dim, 1e-6f);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_l2norm(g_cs, dx.p, dt, d_n_p(), max_n, heads, dim, 1e-6f));
    dget_as(dx, 0, got, tot, dt);
    char name[128];
    snprintf(name, sizeof name, "l2norm %s in place, n %d/%d", dtn(dt), n, max_n);
    report(name, frt_test_rel_err(got, ref, val), tol_of(dt));
    CHECK(memcmp(got + val, x + val, (tot - val) * 4) == 0); /* rows >= n untouched */
    dfree(&dx);
    free(x);
    free(ref);
    free(got);
}

/* ---- rope ------------------------------------------------------------- */

static void test_rope(int heads, int hd, int rot, float theta, frt_cuda_dtype dt)
{
    const int max_n = 9, n = 7;
    const size_t tot = (size_t)max_n * heads * hd, val = (size_t)n * heads * hd;
    float *x = frand(tot, -2, 2);
    if (dt == BF16) round_bf16(x, tot);
    dbuf dx = dalloc(tot * 4);
    float *ref = fnew(tot), *got = fnew(tot);
    const int starts[3] = {0, 1000, 100000};
    for (int s = 0; s < 3; s++) {
        dput_as(dx, 0, x, tot, dt);
        set_dyn(starts[s], n); /* the same launch, a new position in device memory */
        CHECK_OK(frt_cuda_rope(g_cs, dx.p, dt, d_start_p(), d_n_p(), max_n, heads, hd, rot, theta));
        dget_as(dx, 0, got, tot, dt);
        memcpy(ref, x, tot * 4);
        int32_t pos[9];
        for (int t = 0; t < n; t++) pos[t] = starts[s] + t;
        frt_cpu_rope(ref, n, heads, hd, rot, pos, theta);
        char name[128];
        snprintf(name, sizeof name, "rope %s hd %d rot %d theta %g, start %d (device)", dtn(dt), hd,
                 rot, (double)theta, starts[s]);
        report(name, frt_test_rel_err(got, ref, val), tol_of(dt));
        CHECK(memcmp(got + val, x + val, (tot - val) * 4) == 0);
    }
    dfree(&dx);
    free(x);
    free(ref);
    free(got);
}

/* ---- KV append ---------------------------------------------------------- */

static void test_kv_append(frt_cuda_dtype dt)
{
    const int max_seq = 40, nkv = 2, hd = 64, max_n = 8, row = nkv * hd;
    float *k = frand((size_t)max_n * row, -2, 2), *v = frand((size_t)max_n * row, -2, 2);
    dbuf dk = dalloc((size_t)max_n * row * 4), dv = dalloc((size_t)max_n * row * 4);
    dbuf kc = dalloc((size_t)max_seq * row * 2), vc = dalloc((size_t)max_seq * row * 2);
    dprep(dk, k, (size_t)max_n * row, dt);
    dprep(dv, v, (size_t)max_n * row, dt);
    dsentinel(kc);
    dsentinel(vc);
    /* start 3, n 8: rows 3..10; then start 36, n 8: rows 36..39, 40.. dropped */
    int ok = 1;
    const int starts[2] = {3, 36};
    for (int s = 0; s < 2; s++) {
        set_dyn(starts[s], max_n);
        CHECK_OK(frt_cuda_kv_append(g_cs, kc.p, vc.p, dk.p, dv.p, dt, d_start_p(), d_n_p(), max_n,
                                    max_seq, nkv, hd));
    }
    uint16_t *hk = xzalloc((size_t)max_seq * row * 2), *hv = xzalloc((size_t)max_seq * row * 2);
    dget(kc, 0, hk, (size_t)max_seq * row * 2);
    dget(vc, 0, hv, (size_t)max_seq * row * 2);
    for (int r = 0; r < max_seq; r++) {
        int t = r >= 3 && r < 11 ? r - 3 : (r >= 36 ? r - 36 : -1);
        for (int i = 0; i < row; i++) {
            uint16_t wk = t < 0 ? 0x7F7F : frt_f32_to_bf16(k[(size_t)t * row + i]);
            uint16_t wv = t < 0 ? 0x7F7F : frt_f32_to_bf16(v[(size_t)t * row + i]);
            ok &= hk[(size_t)r * row + i] == wk && hv[(size_t)r * row + i] == wv;
        }
    }
    char name[128];
    snprintf(name, sizeof name, "kv_append %s -> bf16 at start 3 then 36 (clipped at 40)", dtn(dt));
    report(name, ok ? 0.0 : 1.0, 0.0);
    dfree(&dk);
    dfree(&dv);
    dfree(&kc);
    dfree(&vc);
    free(k);
    free(v);
    free(hk);
    free(hv);
}

/* ---- attention -------------------------------------------------------- */

typedef struct att_case {
    int hd, nh, nkv, max_seq, max_n, split;
    frt_cuda_dtype qdt, odt;
} att_case;

/* Runs one configuration at each (start, n) in turn with the same launch
 * arguments (the dynamic values change in device memory only). */
static void attention_case(att_case c, const int *starts, const int *ns, int n_runs, int determinism)
{
    const size_t crow = (size_t)c.nkv * c.hd, qrow = (size_t)c.nh * c.hd;
    const size_t csz = (size_t)c.max_seq * crow, qsz = (size_t)c.max_n * qrow;
    float *kcf = frand(csz, -1, 1), *vcf = frand(csz, -1, 1), *q = frand(qsz, -2, 2);
    round_bf16(kcf, csz);
    round_bf16(vcf, csz);
    if (c.qdt == BF16) round_bf16(q, qsz);
    dbuf kc = dalloc(csz * 2), vc = dalloc(csz * 2), dq = dalloc(qsz * 4), dout = dalloc(qsz * 4);
    dput_as(kc, 0, kcf, csz, BF16);
    dput_as(vc, 0, vcf, csz, BF16);
    dput_as(dq, 0, q, qsz, c.qdt);
    size_t wsb = frt_cuda_attention_workspace_bytes(c.max_n, c.max_seq, c.nh, c.hd, c.split);
    dbuf ws = dalloc(wsb ? wsb : 16);
    const float scale = 1.0f / sqrtf((float)c.hd);
    float *ref = fnew(qsz), *got = fnew(qsz);
    const size_t esz = c.odt == BF16 ? 2 : 4;
    for (int r = 0; r < n_runs; r++) {
        const int start = starts[r], n = ns[r];
        dsentinel(dout);
        set_dyn(start, n);
        CHECK_OK(frt_cuda_attention(g_cs, dout.p, c.odt, dq.p, c.qdt, kc.p, vc.p, d_start_p(),
                                    d_n_p(), c.max_n, c.max_seq, c.nh, c.nkv, c.hd, scale, c.split,
                                    ws.p, wsb));
        dget_as(dout, 0, got, (size_t)n * qrow, c.odt);
        frt_cpu_attention(ref, q, kcf, vcf, n, start, c.nh, c.nkv, c.hd, scale);
        char name[160];
        snprintf(name, sizeof name, "attention hd %d h %d/%d %s->%s split %d start %d n %d/%d",
                 c.hd, c.nh, c.nkv, dtn(c.qdt), dtn(c.odt), c.split, start, n, c.max_n);
        report(name, frt_test_rel_err(got, ref, (size_t)n * qrow), tol_of(c.odt));
        CHECK(untouched(dout, (size_t)n * qrow * esz, (size_t)(c.max_n - n) * qrow * esz));
    }
    if (determinism) {
        void *a = snap(dout, qsz * esz);
        for (int r = 0; r < 2; r++) {
            CHECK_OK(frt_cuda_attention(g_cs, dout.p, c.odt, dq.p, c.qdt, kc.p, vc.p, d_start_p(),
                                        d_n_p(), c.max_n, c.max_seq, c.nh, c.nkv, c.hd, scale,
                                        c.split, ws.p, wsb));
        }
        void *b = snap(dout, qsz * esz);
        report_same(c.split ? "attention (flash-decoding) determinism (3 runs)"
                            : "attention (prefill) determinism (3 runs)",
                    a, b, qsz * esz);
        free(a);
        free(b);
    }
    dfree(&kc);
    dfree(&vc);
    dfree(&dq);
    dfree(&dout);
    dfree(&ws);
    free(kcf);
    free(vcf);
    free(q);
    free(ref);
    free(got);
}

static void test_attention(void)
{
    { /* group 1, hd 32, from 0 */
        att_case c = {32, 4, 4, 300, 80, 0, F32, F32};
        int s[2] = {0, 7}, n[2] = {70, 80};
        attention_case(c, s, n, 2, 0);
    }
    { /* group 4, hd 64, bf16 q */
        att_case c = {64, 8, 2, 300, 40, 0, BF16, F32};
        int s[2] = {100, 1}, n[2] = {37, 1};
        attention_case(c, s, n, 2, 0);
    }
    { /* group 3, hd 96 (3 dims per lane), bf16 out */
        att_case c = {96, 6, 2, 200, 40, 0, F32, BF16};
        int s[1] = {50}, n[1] = {33};
        attention_case(c, s, n, 1, 0);
    }
    { /* group 2, hd 128 */
        att_case c = {128, 4, 2, 400, 70, 0, F32, F32};
        int s[2] = {63, 0}, n[2] = {65, 64};
        attention_case(c, s, n, 2, 0);
    }
    { /* the Qwen3.5 shape: hd 256, 16 heads over 4 KV heads, prefill */
        att_case c = {256, 16, 4, 512, 72, 0, BF16, BF16};
        int s[2] = {200, 0}, n[2] = {65, 72};
        attention_case(c, s, n, 2, 1);
    }
    { /* prefill through the split path (combine over several splits) */
        att_case c = {256, 8, 2, 600, 24, 64, F32, F32};
        int s[2] = {180, 0}, n[2] = {20, 24};
        attention_case(c, s, n, 2, 0);
    }
    { /* decode, flash-decoding: one launch, positions from device memory */
        att_case c = {256, 16, 4, 1024, 1, 128, F32, F32};
        int s[6] = {0, 31, 32, 33, 500, 1023}, n[6] = {1, 1, 1, 1, 1, 1};
        attention_case(c, s, n, 6, 1);
    }
    { /* decode, hd 128, group 1, splits of 256 */
        att_case c = {128, 4, 4, 700, 1, 256, BF16, F32};
        int s[3] = {5, 255, 699}, n[3] = {1, 1, 1};
        attention_case(c, s, n, 3, 0);
    }
}

/* ---- the gated delta rule ------------------------------------------------ */

typedef struct gdr_data {
    int n, nk, nv, dk, dv;
    float *q, *k, *v, *g, *beta, *state0;
} gdr_data;

static double softplus_d(double x) { return x > 20 ? x : log1p(exp(x)); }

/* Realistic inputs (as tests/test_kernel_gdr.c): q, k L2-normalised,
 * A in [0.01, 16] log-uniform (head 0 at 16: log-decay near -20 per token,
 * head 1 at 0.01: long memory), beta = sigmoid(U[-3, 3]). */
static gdr_data gdr_make(int n, int nk, int nv, int dk, int dv, frt_cuda_dtype in_dt)
{
    gdr_data d = {n, nk, nv, dk, dv, 0, 0, 0, 0, 0, 0};
    const size_t nq = (size_t)n * nk * dk, nvv = (size_t)n * nv * dv;
    d.q = frand(nq, -1, 1);
    d.k = frand(nq, -1, 1);
    frt_cpu_l2norm(d.q, n * nk, dk, 1e-6f);
    frt_cpu_l2norm(d.k, n * nk, dk, 1e-6f);
    d.v = frand(nvv, -2, 2);
    if (in_dt == BF16) {
        round_bf16(d.q, nq);
        round_bf16(d.k, nq);
        round_bf16(d.v, nvv);
    }
    d.g = fnew((size_t)n * nv);
    d.beta = fnew((size_t)n * nv);
    double A[64], dt[64];
    for (int h = 0; h < nv && h < 64; h++) {
        double la = log(0.01) + (log(16.0) - log(0.01)) * frt_test_rand(0, 1);
        A[h] = h == 0 ? 16.0 : h == 1 ? 0.01 : exp(la);
        dt[h] = frt_test_rand(-1.0f, 0.2f);
    }
    for (int t = 0; t < n; t++)
        for (int h = 0; h < nv; h++) {
            double a = frt_test_rand(-4.0f, 1.2f);
            d.g[t * nv + h] = (float)(-A[h % 64] * softplus_d(a + dt[h % 64]));
            d.beta[t * nv + h] = (float)(1.0 / (1.0 + exp(-frt_test_rand(-3, 3))));
        }
    d.state0 = frand((size_t)nv * dk * dv, -1, 1);
    return d;
}

static void gdr_free(gdr_data *d)
{
    free(d->q);
    free(d->k);
    free(d->v);
    free(d->g);
    free(d->beta);
    free(d->state0);
}

typedef struct gdr_dev {
    dbuf q, k, v, g, beta, state, out;
    dbuf ws; /* frt_cuda_gdr_chunked workspace for max_n, chunk 64 */
} gdr_dev;

/* Device copies sized for max_n tokens (rows >= d.n hold sentinels). */
static gdr_dev gdr_upload(const gdr_data *d, int max_n, frt_cuda_dtype in_dt)
{
    gdr_dev x;
    const size_t nq = (size_t)max_n * d->nk * d->dk, nvv = (size_t)max_n * d->nv * d->dv;
    x.q = dalloc(nq * 4);
    x.k = dalloc(nq * 4);
    x.v = dalloc(nvv * 4);
    x.g = dalloc((size_t)max_n * d->nv * 4);
    x.beta = dalloc((size_t)max_n * d->nv * 4);
    x.state = dalloc((size_t)d->nv * d->dk * d->dv * 4);
    x.out = dalloc(nvv * 4);
    x.ws = dalloc(frt_cuda_gdr_chunked_workspace_bytes(max_n, d->nk, d->nv, d->dk, d->dv, 64));
    dsentinel(x.q);
    dsentinel(x.k);
    dsentinel(x.v);
    dsentinel(x.g);
    dsentinel(x.beta);
    dput_as(x.q, 0, d->q, (size_t)d->n * d->nk * d->dk, in_dt);
    dput_as(x.k, 0, d->k, (size_t)d->n * d->nk * d->dk, in_dt);
    dput_as(x.v, 0, d->v, (size_t)d->n * d->nv * d->dv, in_dt);
    dput(x.g, 0, d->g, (size_t)d->n * d->nv * 4);
    dput(x.beta, 0, d->beta, (size_t)d->n * d->nv * 4);
    dput(x.state, 0, d->state0, (size_t)d->nv * d->dk * d->dv * 4);
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

static int gdr_launch(const gdr_dev *x, const gdr_data *d, int chunked, frt_cuda_dtype in_dt,
                      frt_cuda_dtype out_dt, const int32_t *dn, int max_n)
{
    if (chunked)
        return frt_cuda_gdr_chunked(g_cs, x->out.p, out_dt, x->state.p, x->q.p, x->k.p, x->v.p,
                                    in_dt, x->g.p, x->beta.p, dn, max_n, d->nk, d->nv, d->dk,
                                    d->dv, 64, x->ws.p, x->ws.bytes);
    return frt_cuda_gdr_recurrent(g_cs, x->out.p, out_dt, x->state.p, x->q.p, x->k.p, x->v.p,
                                  in_dt, x->g.p, x->beta.p, dn, max_n, d->nk, d->nv, d->dk, d->dv);
}

/* One case: GPU (chunked or recurrent) vs the CPU twin, out and final state;
 * the GPU buffers are sized for max_n >= n and n is read from device memory. */
static void gdr_case(int chunked, int n, int max_n, int nk, int nv, int dk, int dv,
                     frt_cuda_dtype in_dt, frt_cuda_dtype out_dt, int determinism)
{
    gdr_data d = gdr_make(n, nk, nv, dk, dv, in_dt);
    gdr_dev x = gdr_upload(&d, max_n, in_dt);
    const size_t no = (size_t)n * nv * dv, ns = (size_t)nv * dk * dv;
    float *out_ref = fnew(no), *st_ref = fdup(d.state0, ns), *got = fnew(ns > no ? ns : no);
    if (chunked)
        CHECK_OK(frt_cpu_gdr_chunked(out_ref, st_ref, d.q, d.k, d.v, d.g, d.beta, n, nk, nv, dk, dv,
                                     64));
    else
        frt_cpu_gdr_recurrent(out_ref, st_ref, d.q, d.k, d.v, d.g, d.beta, n, nk, nv, dk, dv);
    dsentinel(x.out);
    set_dyn(0, n);
    CHECK_OK(gdr_launch(&x, &d, chunked, in_dt, out_dt, d_n_p(), max_n));
    dget_as(x.out, 0, got, no, out_dt);
    char name[160];
    snprintf(name, sizeof name, "gdr_%s out %s->%s n %d/%d k%d v%d dk %d dv %d",
             chunked ? "chunked" : "recurrent", dtn(in_dt), dtn(out_dt), n, max_n, nk, nv, dk, dv);
    report(name, frt_test_rel_err(got, out_ref, no), tol_of(out_dt));
    const size_t esz = out_dt == BF16 ? 2 : 4;
    CHECK(untouched(x.out, no * esz, (size_t)(max_n - n) * nv * dv * esz));
    dget(x.state, 0, got, ns * 4);
    snprintf(name, sizeof name, "gdr_%s state (fp32) n %d/%d k%d v%d dk %d dv %d",
             chunked ? "chunked" : "recurrent", n, max_n, nk, nv, dk, dv);
    report(name, frt_test_rel_err(got, st_ref, ns), TOL_F32);

    if (determinism) {
        void *a = snap(x.out, no * esz), *sa = snap(x.state, ns * 4);
        for (int r = 0; r < 2; r++) {
            dput(x.state, 0, d.state0, ns * 4);
            CHECK_OK(gdr_launch(&x, &d, chunked, in_dt, out_dt, d_n_p(), max_n));
        }
        void *b = snap(x.out, no * esz), *sb = snap(x.state, ns * 4);
        snprintf(name, sizeof name, "gdr_%s determinism (3 runs, out + state)",
                 chunked ? "chunked" : "recurrent");
        report_same(name, a, b, no * esz);
        report_same(name, sa, sb, ns * 4);
        free(a);
        free(b);
        free(sa);
        free(sb);
    }
    gdr_dev_free(&x);
    gdr_free(&d);
    free(out_ref);
    free(st_ref);
    free(got);
}

/* Splitting: chunked prefill of 128 tokens in one call vs two calls of 64
 * (chunk boundaries at the same absolute tokens) gives the same bits; decode
 * of 3 tokens one launch each equals one recurrent launch of 3. */
static void gdr_split_tests(void)
{
    const int n = 128, nk = 2, nv = 4, dk = 128, dv = 64;
    gdr_data d = gdr_make(n, nk, nv, dk, dv, F32);
    gdr_dev x = gdr_upload(&d, n, F32);
    const size_t no = (size_t)n * nv * dv, ns = (size_t)nv * dk * dv;
    CHECK_OK(gdr_launch(&x, &d, 1, F32, F32, NULL, n));
    void *out1 = snap(x.out, no * 4), *st1 = snap(x.state, ns * 4);
    dput(x.state, 0, d.state0, ns * 4);
    const size_t qo = (size_t)64 * nk * dk * 4, vo = (size_t)64 * nv * dv * 4,
                 go = (size_t)64 * nv * 4;
    for (int half = 0; half < 2; half++) {
        CHECK_OK(frt_cuda_gdr_chunked(g_cs, (char *)x.out.p + half * vo, F32, x.state.p,
                                      (char *)x.q.p + half * qo, (char *)x.k.p + half * qo,
                                      (char *)x.v.p + half * vo, F32,
                                      (float *)((char *)x.g.p + half * go),
                                      (float *)((char *)x.beta.p + half * go), NULL, 64, nk, nv, dk,
                                      dv, 64, x.ws.p, x.ws.bytes));
    }
    void *out2 = snap(x.out, no * 4), *st2 = snap(x.state, ns * 4);
    report_same("gdr_chunked 128 tokens == 64 + 64 (out)", out1, out2, no * 4);
    report_same("gdr_chunked 128 tokens == 64 + 64 (state)", st1, st2, ns * 4);
    free(out1);
    free(out2);
    free(st1);
    free(st2);

    /* recurrent: 3 tokens in one launch vs one launch per token */
    dput(x.state, 0, d.state0, ns * 4);
    CHECK_OK(gdr_launch(&x, &d, 0, F32, F32, NULL, 3));
    void *o3 = snap(x.out, (size_t)3 * nv * dv * 4), *s3 = snap(x.state, ns * 4);
    dput(x.state, 0, d.state0, ns * 4);
    for (int t = 0; t < 3; t++)
        CHECK_OK(frt_cuda_gdr_recurrent(
            g_cs, (char *)x.out.p + (size_t)t * nv * dv * 4, F32, x.state.p,
            (char *)x.q.p + (size_t)t * nk * dk * 4, (char *)x.k.p + (size_t)t * nk * dk * 4,
            (char *)x.v.p + (size_t)t * nv * dv * 4, F32, (float *)x.g.p + (size_t)t * nv,
            (float *)x.beta.p + (size_t)t * nv, NULL, 1, nk, nv, dk, dv));
    void *o1 = snap(x.out, (size_t)3 * nv * dv * 4), *s1 = snap(x.state, ns * 4);
    report_same("gdr_recurrent 3 tokens == 3 x 1 token (out)", o3, o1, (size_t)3 * nv * dv * 4);
    report_same("gdr_recurrent 3 tokens == 3 x 1 token (state)", s3, s1, ns * 4);
    free(o3);
    free(s3);
    free(o1);
    free(s1);
    gdr_dev_free(&x);
    gdr_free(&d);
}

static void test_gdr(void)
{
    /* decode: one token; a few tokens; the Qwen3.5-9B shape */
    gdr_case(0, 1, 1, 2, 4, 128, 64, F32, F32, 1);
    gdr_case(0, 3, 5, 2, 6, 64, 128, F32, F32, 0);
    gdr_case(0, 1, 1, 16, 32, 128, 128, BF16, F32, 0);
    gdr_case(0, 2, 2, 2, 4, 128, 128, F32, BF16, 0);
    /* chunked prefill: lengths around the chunk, 2x and 3x value heads,
     * dk != dv, buckets larger than n */
    const int lens[5] = {1, 63, 64, 65, 200};
    for (int i = 0; i < 5; i++) {
        gdr_case(1, lens[i], lens[i] + (i % 2 ? 0 : 7), 2, 4, 128, 64, F32, F32, i == 4);
        gdr_case(1, lens[i], 256, 1, 3, 64, 80, i % 2 ? BF16 : F32, F32, 0);
    }
    gdr_case(1, 130, 192, 16, 32, 128, 128, BF16, BF16, 0);
    gdr_split_tests();
}

/* ---- conv1d ---------------------------------------------------------- */

/* stride > C: x rows strided (frt_cuda_conv1d_causal_strided), NaN between
 * them (never read). */
static void test_conv1d(frt_cuda_dtype dt, int stride)
{
    const int C = 300, K = 4, max_n = 40, ks = K - 1;
    float *w = frand((size_t)C * K, -1, 1), *st0 = frand((size_t)C * ks, -1, 1);
    float *st_ref = fdup(st0, (size_t)C * ks);
    dbuf dx = dalloc((size_t)max_n * stride * 4), dout = dalloc((size_t)max_n * C * 4);
    dbuf dw = dalloc((size_t)C * K * 4), dst = dalloc((size_t)C * ks * 4);
    float *xs = fnew((size_t)max_n * stride);
    dput(dw, 0, w, (size_t)C * K * 4);
    dput(dst, 0, st0, (size_t)C * ks * 4);
    float *ref = fnew((size_t)max_n * C), *got = fnew((size_t)max_n * C);
    /* consecutive calls with the same launch arguments: n = 37, 1, 2, 5 (2 < ks
     * mixes the old state into the new one) */
    const int ns[4] = {37, 1, 2, 5};
    for (int r = 0; r < 4; r++) {
        const int n = ns[r];
        float *x = frand((size_t)max_n * C, -2, 2);
        if (dt == BF16) round_bf16(x, (size_t)max_n * C); /* the values the device sees */
        for (int t = 0; t < max_n; t++)
            for (int c = 0; c < stride; c++) xs[(size_t)t * stride + c] = c < C ? x[(size_t)t * C + c] : NAN;
        dprep(dx, xs, (size_t)max_n * stride, dt);
        frt_cpu_conv1d_causal(ref, x, st_ref, w, n, C, K);
        dsentinel(dout);
        set_dyn(0, n);
        if (stride == C)
            CHECK_OK(frt_cuda_conv1d_causal(g_cs, dout.p, dt, dx.p, dt, dst.p, dw.p, d_n_p(), max_n, C, K));
        else
            CHECK_OK(frt_cuda_conv1d_causal_strided(g_cs, dout.p, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                                    max_n, C, K));
        dget_as(dout, 0, got, (size_t)n * C, dt);
        char name[128];
        snprintf(name, sizeof name, "conv1d %s out, x stride %d, call %d, n %d/%d", dtn(dt), stride, r + 1, n,
                 max_n);
        report(name, frt_test_rel_err(got, ref, (size_t)n * C), tol_of(dt));
        const size_t esz = dt == BF16 ? 2 : 4;
        CHECK(untouched(dout, (size_t)n * C * esz, (size_t)(max_n - n) * C * esz));
        dget(dst, 0, got, (size_t)C * ks * 4);
        snprintf(name, sizeof name, "conv1d %s state, x stride %d, after call %d (exact)", dtn(dt), stride, r + 1);
        report(name, frt_test_rel_err(got, st_ref, (size_t)C * ks), 0.0);
        free(x);
    }
    dfree(&dx);
    dfree(&dout);
    dfree(&dw);
    dfree(&dst);
    free(w);
    free(st0);
    free(st_ref);
    free(ref);
    free(got);
    free(xs);
}

/* frt_cuda_conv1d_causal_split: the columns of the strided conv written to
 * three buffers (the DeltaNet's q, k, v); each equals its columns of the
 * twin (with l2: the first 2 x 256 channels L2-normalised in groups of l2,
 * as frt_cpu_l2norm after the conv), the gaps past each buffer's rows are
 * untouched. */
static void test_conv1d_split(frt_cuda_dtype dt, int l2)
{
    const int C = l2 ? 1100 : 300, K = 4, max_n = 24, ks = K - 1, stride = C + 57, n = 19;
    const int widths[3] = {l2 ? 256 : 100, l2 ? 256 : 57, l2 ? 588 : 143};
    float *w = frand((size_t)C * K, -1, 1), *st0 = frand((size_t)C * ks, -1, 1);
    float *st_ref = fdup(st0, (size_t)C * ks);
    float *x = frand((size_t)max_n * C, -2, 2), *xs = fnew((size_t)max_n * stride);
    if (dt == BF16) round_bf16(x, (size_t)max_n * C);
    for (int t = 0; t < max_n; t++)
        for (int c = 0; c < stride; c++) xs[(size_t)t * stride + c] = c < C ? x[(size_t)t * C + c] : NAN;
    dbuf dx = dalloc((size_t)max_n * stride * 4), dw = dalloc((size_t)C * K * 4), dst = dalloc((size_t)C * ks * 4);
    dbuf dout[3];
    void *outs[3];
    for (int i = 0; i < 3; i++) {
        dout[i] = dalloc((size_t)max_n * widths[i] * 4);
        outs[i] = dout[i].p;
        dsentinel(dout[i]);
    }
    dprep(dx, xs, (size_t)max_n * stride, dt);
    dput(dw, 0, w, (size_t)C * K * 4);
    dput(dst, 0, st0, (size_t)C * ks * 4);
    float *ref = fnew((size_t)max_n * C), *got = fnew((size_t)max_n * C), *seg = fnew((size_t)max_n * C);
    frt_cpu_conv1d_causal(ref, x, st_ref, w, n, C, K);
    if (l2)
        for (int t = 0; t < n; t++) frt_cpu_l2norm(ref + (size_t)t * C, 512 / l2, l2, 1e-6f);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(), max_n,
                                          C, K, l2 ? 512 : 0, l2, 1e-6f));
    const size_t esz = dt == BF16 ? 2 : 4;
    for (int i = 0, col = 0; i < 3; col += widths[i], i++) {
        dget_as(dout[i], 0, got, (size_t)n * widths[i], dt);
        for (int t = 0; t < n; t++)
            for (int c = 0; c < widths[i]; c++) seg[(size_t)t * widths[i] + c] = ref[(size_t)t * C + col + c];
        char name[128];
        snprintf(name, sizeof name, "conv1d split %s out %d (cols %d..%d)%s, x stride %d, n %d/%d", dtn(dt), i, col,
                 col + widths[i] - 1, l2 && i < 2 ? " l2" : "", stride, n, max_n);
        report(name, frt_test_rel_err(got, seg, (size_t)n * widths[i]), tol_of(dt));
        CHECK(untouched(dout[i], (size_t)n * widths[i] * esz, (size_t)(max_n - n) * widths[i] * esz));
    }
    dget(dst, 0, got, (size_t)C * ks * 4);
    char name[128];
    snprintf(name, sizeof name, "conv1d split %s%s state (exact)", dtn(dt), l2 ? " l2" : "");
    report(name, frt_test_rel_err(got, st_ref, (size_t)C * ks), 0.0);
    /* max_n 24 ran 8 tokens per thread; max_n 15 runs one: the first 15 rows
     * are the same bits (from the same initial state) */
    {
        void *many[3];
        for (int i = 0; i < 3; i++) many[i] = snap(dout[i], (size_t)15 * widths[i] * esz);
        dput(dst, 0, st0, (size_t)C * ks * 4);
        set_dyn(0, 15);
        CHECK_OK(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              15, C, K, l2 ? 512 : 0, l2, 1e-6f));
        for (int i = 0; i < 3; i++) {
            void *one = snap(dout[i], (size_t)15 * widths[i] * esz);
            snprintf(name, sizeof name, "conv1d split %s%s out %d: 1 token per thread == 8", dtn(dt), l2 ? " l2" : "",
                     i);
            report_same(name, many[i], one, (size_t)15 * widths[i] * esz);
            free(one);
            free(many[i]);
        }
        set_dyn(0, n);
        dput(dst, 0, st_ref, (size_t)C * ks * 4); /* the state after the n rows, as checked above */
    }
    /* bad splits: nothing enqueued */
    const int short_w[3] = {100, 57, 142}, zero_w[3] = {100, 0, 200};
    void *with_null[3] = {outs[0], NULL, outs[2]}, *with_x[3] = {outs[0], dx.p, outs[2]};
    const int E = FRT_ERR_INVALID_ARGUMENT;
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, short_w, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 0, 0, 0.0f), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, zero_w, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 0, 0, 0.0f), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 0, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 0, 0, 0.0f), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 4, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 0, 0, 0.0f), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, with_null, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p,
                                              d_n_p(), max_n, C, K, 0, 0, 0.0f), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, with_x, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 0, 0, 0.0f), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, NULL, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 0, 0, 0.0f), E);
    /* L2 layouts the fused norm does not take: not supported, nothing enqueued */
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 100, 50, 1e-6f), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, 256, 48, 1e-6f), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_cuda_conv1d_causal_split(g_cs, outs, widths, 3, dt, dx.p, dt, stride, dst.p, dw.p, d_n_p(),
                                              max_n, C, K, C + 1, 64, 1e-6f), E);
    dget(dst, 0, got, (size_t)C * ks * 4);
    CHECK(frt_test_rel_err(got, st_ref, (size_t)C * ks) == 0.0); /* the refused calls left the state */
    for (int i = 0; i < 3; i++) dfree(&dout[i]);
    dfree(&dx), dfree(&dw), dfree(&dst);
    free(w), free(st0), free(st_ref), free(x), free(xs), free(ref), free(got), free(seg);
}

/* ---- gates and elementwise ------------------------------------------------ */

static void test_gdn_gate(frt_cuda_dtype dt)
{
    const int max_n = 9, n = 7, nh = 32;
    const size_t tot = (size_t)max_n * nh, val = (size_t)n * nh;
    float *a = frand(tot, -4, 4), *b = frand(tot, -4, 4), *dtb = frand(nh, -1, 1);
    float *alog = fnew(nh);
    for (int h = 0; h < nh; h++) alog[h] = logf(frt_test_rand(0.01f, 16.0f));
    dbuf da = dalloc(tot * 4), db = dalloc(tot * 4), dal = dalloc((size_t)nh * 4),
         ddt = dalloc((size_t)nh * 4), dg = dalloc(tot * 4), dbeta = dalloc(tot * 4);
    dprep(da, a, tot, dt);
    dprep(db, b, tot, dt);
    dput(dal, 0, alog, (size_t)nh * 4);
    dput(ddt, 0, dtb, (size_t)nh * 4);
    float *g_ref = fnew(tot), *b_ref = fnew(tot), *got = fnew(tot);
    frt_cpu_gdn_gate(g_ref, b_ref, a, b, alog, dtb, n, nh);
    dsentinel(dg);
    set_dyn(0, n);
    CHECK_OK(frt_cuda_gdn_gate(g_cs, dg.p, dbeta.p, da.p, db.p, dt, dal.p, ddt.p, d_n_p(), max_n,
                               nh));
    dget(dg, 0, got, val * 4);
    char name[96];
    snprintf(name, sizeof name, "gdn_gate g (a, b %s), n %d/%d", dtn(dt), n, max_n);
    report(name, frt_test_rel_err(got, g_ref, val), TOL_F32);
    CHECK(untouched(dg, val * 4, (tot - val) * 4));
    dget(dbeta, 0, got, val * 4);
    snprintf(name, sizeof name, "gdn_gate beta (a, b %s)", dtn(dt));
    report(name, frt_test_rel_err(got, b_ref, val), TOL_F32);
    /* strided: b and a as columns 5.. and 5 + nh.. of rows of 2 nh + 11 (the
     * fused in_proj output's layout): the bits of the contiguous run */
    {
        const int stride = 2 * nh + 11;
        float *wide = frand((size_t)max_n * stride, -9, 9);
        for (int t = 0; t < max_n; t++)
            for (int h = 0; h < nh; h++) {
                wide[(size_t)t * stride + 5 + h] = b[(size_t)t * nh + h];
                wide[(size_t)t * stride + 5 + nh + h] = a[(size_t)t * nh + h];
            }
        dbuf dw = dalloc((size_t)max_n * stride * 4), dg2 = dalloc(tot * 4), db2 = dalloc(tot * 4);
        dprep(dw, wide, (size_t)max_n * stride, dt);
        dsentinel(dg2);
        const size_t esz = dt == BF16 ? 2 : 4;
        CHECK_OK(frt_cuda_gdn_gate_strided(g_cs, dg2.p, db2.p, (char *)dw.p + (5 + nh) * esz, (char *)dw.p + 5 * esz,
                                           dt, stride, dal.p, ddt.p, d_n_p(), max_n, nh));
        void *g1 = snap(dg, val * 4), *g2 = snap(dg2, val * 4), *b1 = snap(dbeta, val * 4), *b2 = snap(db2, val * 4);
        snprintf(name, sizeof name, "gdn_gate_strided (a, b %s, stride %d) == contiguous g", dtn(dt), stride);
        report_same(name, g1, g2, val * 4);
        snprintf(name, sizeof name, "gdn_gate_strided (a, b %s, stride %d) == contiguous beta", dtn(dt), stride);
        report_same(name, b1, b2, val * 4);
        CHECK(untouched(dg2, val * 4, (tot - val) * 4));
        CHECK_STATUS(frt_cuda_gdn_gate_strided(g_cs, dg2.p, db2.p, dw.p, dw.p, dt, nh - 1, dal.p, ddt.p, d_n_p(),
                                               max_n, nh),
                     FRT_ERR_INVALID_ARGUMENT);
        free(g1), free(g2), free(b1), free(b2);
        free(wide);
        dfree(&dw), dfree(&dg2), dfree(&db2);
    }
    dfree(&da);
    dfree(&db);
    dfree(&dal);
    dfree(&ddt);
    dfree(&dg);
    dfree(&dbeta);
    free(a);
    free(b);
    free(dtb);
    free(alog);
    free(g_ref);
    free(b_ref);
    free(got);
}

/* The bf16 outputs in vec (val of them, from a vector-path swiglu) against
 * the scalar path's: the same swiglu into a buffer at +2 bytes. */
static void swiglu_scalar_same(const char *name, dbuf vec, dbuf da, dbuf db, frt_cuda_dtype in_dt, int max_n, int per,
                               size_t val)
{
    void *v = snap(vec, val * 2), *sca = xzalloc(val * 2);
    dbuf dv = dalloc((size_t)max_n * per * 2 + 64);
    CHECK_OK(frt_cuda_swiglu(g_cs, (char *)dv.p + 2, BF16, da.p, db.p, in_dt, d_n_p(), max_n, per));
    dget(dv, 2, sca, val * 2);
    report_same(name, v, sca, val * 2);
    free(v);
    free(sca);
    dfree(&dv);
}

static void test_elementwise(frt_cuda_dtype dt)
{
    const int max_n = 6, n = 4, per = 1000;
    const size_t tot = (size_t)max_n * per, val = (size_t)n * per;
    const size_t esz = dt == BF16 ? 2 : 4;
    float *a = frand(tot, -5, 5), *b = frand(tot, -3, 3);
    dbuf da = dalloc(tot * 4), db = dalloc(tot * 4), dy = dalloc(tot * 4);
    dprep(da, a, tot, dt);
    dprep(db, b, tot, dt);
    float *ref = fnew(tot), *got = fnew(tot);
    char name[96];
    set_dyn(0, n);

    frt_cpu_swiglu(ref, a, b, (int)val);
    dsentinel(dy);
    CHECK_OK(frt_cuda_swiglu(g_cs, dy.p, dt, da.p, db.p, dt, d_n_p(), max_n, per));
    dget_as(dy, 0, got, val, dt);
    snprintf(name, sizeof name, "swiglu %s, n %d/%d", dtn(dt), n, max_n);
    report(name, frt_test_rel_err(got, ref, val), tol_of(dt));
    CHECK(untouched(dy, val * esz, (tot - val) * esz));
    if (dt == F32) { /* f32 in, bf16 out: the vector path (aligned), and the scalar one (out at +2 bytes) */
        dbuf dv = dalloc(tot * 2 + 64);
        dsentinel(dv);
        CHECK_OK(frt_cuda_swiglu(g_cs, dv.p, BF16, da.p, db.p, F32, d_n_p(), max_n, per));
        dget_as(dv, 0, got, val, BF16);
        snprintf(name, sizeof name, "swiglu f32 -> bf16 (4 per thread), n %d/%d", n, max_n);
        report(name, frt_test_rel_err(got, ref, val), TOL_BF16);
        CHECK(untouched(dv, val * 2, tot * 2 + 64 - val * 2));
        swiglu_scalar_same("swiglu f32 -> bf16: vector path == scalar path", dv, da, db, F32, max_n, per, val);
        dfree(&dv);
    } else { /* bf16 in and out: the vector path above (8 per thread, aligned) against the scalar one (+2 bytes) */
        swiglu_scalar_same("swiglu bf16 -> bf16: vector path == scalar path", dy, da, db, BF16, max_n, per, val);
    }

    memcpy(ref, a, tot * 4);
    frt_cpu_sigmoid_mul(ref, b, (int)val);
    dput_as(dy, 0, a, tot, dt);
    CHECK_OK(frt_cuda_sigmoid_mul(g_cs, dy.p, dt, db.p, dt, d_n_p(), max_n, per));
    dget_as(dy, 0, got, tot, dt);
    snprintf(name, sizeof name, "sigmoid_mul %s", dtn(dt));
    report(name, frt_test_rel_err(got, ref, val), tol_of(dt));
    CHECK(memcmp(got + val, a + val, (tot - val) * 4) == 0);
    if (dt == F32) { /* sigmoid_mul_to == sigmoid_mul (f32, in place) then convert, bit for bit */
        dbuf d16 = dalloc(tot * 2 + 64), dto = dalloc(tot * 2 + 64), df = dalloc(tot * 4);
        CHECK_OK(frt_cuda_convert(g_cs, d16.p, BF16, dy.p, F32, d_n_p(), max_n, per)); /* dy: sigmoid_mul's f32 */
        void *want = snap(d16, val * 2);
        dsentinel(dto);
        CHECK_OK(frt_cuda_sigmoid_mul_to(g_cs, dto.p, BF16, da.p, F32, db.p, F32, d_n_p(), max_n, per));
        void *v4 = snap(dto, val * 2);
        report_same("sigmoid_mul_to f32 -> bf16 (4 a thread) == sigmoid_mul + convert", v4, want, val * 2);
        CHECK(untouched(dto, val * 2, tot * 2 + 64 - val * 2));
        CHECK_OK(frt_cuda_sigmoid_mul_to(g_cs, (char *)dto.p + 2, BF16, da.p, F32, db.p, F32, d_n_p(), max_n, per));
        void *v1 = xzalloc(val * 2);
        dget(dto, 2, v1, val * 2);
        report_same("sigmoid_mul_to f32 -> bf16 (one a thread, out at +2 bytes) == the same", v1, want, val * 2);
        CHECK_OK(frt_cuda_sigmoid_mul_to(g_cs, df.p, F32, da.p, F32, db.p, F32, d_n_p(), max_n, per));
        void *vf = snap(df, val * 4), *wf = snap(dy, val * 4);
        report_same("sigmoid_mul_to f32 -> f32 == sigmoid_mul in place", vf, wf, val * 4);
        CHECK_STATUS(frt_cuda_sigmoid_mul_to(g_cs, NULL, BF16, da.p, F32, db.p, F32, d_n_p(), max_n, per),
                     FRT_ERR_INVALID_ARGUMENT);
        free(want), free(v4), free(v1), free(vf), free(wf);
        dfree(&d16), dfree(&dto), dfree(&df);
    }

    memcpy(ref, a, tot * 4);
    frt_cpu_add(ref, b, (int)val);
    dput_as(dy, 0, a, tot, dt);
    CHECK_OK(frt_cuda_add(g_cs, dy.p, dt, db.p, dt, d_n_p(), max_n, per));
    dget_as(dy, 0, got, tot, dt);
    snprintf(name, sizeof name, "add %s", dtn(dt));
    report(name, frt_test_rel_err(got, ref, val), dt == BF16 ? TOL_BF16 : 0.0);
    CHECK(memcmp(got + val, a + val, (tot - val) * 4) == 0);

    /* copy_rows: the q half and the gate half of [q | gate] rows */
    {
        const int rpt = 3, cols = 40, stride = 80, rows = max_n * rpt;
        float *src = frand((size_t)rows * stride, -1, 1);
        if (dt == BF16) round_bf16(src, (size_t)rows * stride);
        dbuf ds = dalloc((size_t)rows * stride * 4), dd = dalloc((size_t)rows * cols * 4);
        dput_as(ds, 0, src, (size_t)rows * stride, dt);
        for (int half = 0; half < 2; half++) {
            float *cref = fnew((size_t)rows * cols), *cgot = fnew((size_t)rows * cols);
            frt_cpu_copy_rows(cref, src + half * cols, n * rpt, cols, stride);
            dsentinel(dd);
            CHECK_OK(frt_cuda_copy_rows(g_cs, dd.p, F32, (char *)ds.p + half * cols * esz, dt,
                                        d_n_p(), max_n, rpt, cols, stride));
            dget(dd, 0, cgot, (size_t)n * rpt * cols * 4);
            snprintf(name, sizeof name, "copy_rows %s -> f32, half %d (exact)", dtn(dt), half);
            report(name, frt_test_rel_err(cgot, cref, (size_t)n * rpt * cols), 0.0);
            CHECK(untouched(dd, (size_t)n * rpt * cols * 4, (size_t)(max_n - n) * rpt * cols * 4));
            free(cref);
            free(cgot);
        }
        dfree(&ds);
        dfree(&dd);
        free(src);
    }

    /* last_row: row n - 1; n = 0 reads row 0 */
    {
        dbuf dd = dalloc((size_t)per * 4);
        float *row = fnew(per);
        for (int k = 0; k < 2; k++) {
            const int nn = k ? 0 : n;
            set_dyn(0, nn);
            CHECK_OK(frt_cuda_last_row(g_cs, dd.p, F32, da.p, dt, d_n_p(), max_n, per));
            dget(dd, 0, row, (size_t)per * 4);
            snprintf(name, sizeof name, "last_row %s -> f32, n %d (exact)", dtn(dt), nn);
            report(name, frt_test_rel_err(row, a + (size_t)(nn ? nn - 1 : 0) * per, per), 0.0);
        }
        set_dyn(0, n);
        dfree(&dd);
        free(row);
    }
    dfree(&da);
    dfree(&db);
    dfree(&dy);
    free(a);
    free(b);
    free(ref);
    free(got);
}

static void test_convert(void)
{
    const int n = 4096;
    float *x = frand(n, -100, 100);
    /* special values: ties to even, tiny, huge, negative zero, infinities */
    const float sp[8] = {1.00390625f, 1.01171875f, 1e-40f, 3.0e38f, -0.0f, INFINITY, -INFINITY,
                         65504.0f};
    memcpy(x, sp, sizeof sp);
    dbuf dx = dalloc((size_t)n * 4), db = dalloc((size_t)n * 2), dy = dalloc((size_t)n * 4);
    dput(dx, 0, x, (size_t)n * 4);
    CHECK_OK(frt_cuda_convert(g_cs, db.p, BF16, dx.p, F32, NULL, 1, n));
    uint16_t *hb = xzalloc((size_t)n * 2);
    dget(db, 0, hb, (size_t)n * 2);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= hb[i] == frt_f32_to_bf16(x[i]);
    report("convert f32 -> bf16 == frt_f32_to_bf16 (bits)", ok ? 0.0 : 1.0, 0.0);
    CHECK_OK(frt_cuda_convert(g_cs, dy.p, F32, db.p, BF16, NULL, 1, n));
    float *y = fnew(n);
    dget(dy, 0, y, (size_t)n * 4);
    ok = 1;
    for (int i = 0; i < n; i++) ok &= frt_f32_bits(y[i]) == frt_f32_bits(frt_bf16_to_f32(hb[i]));
    report("convert bf16 -> f32 (exact)", ok ? 0.0 : 1.0, 0.0);
    dfree(&dx);
    dfree(&db);
    dfree(&dy);
    free(x);
    free(hb);
    free(y);
}

/* ---- argmax and sampling ---------------------------------------------- */

static int run_argmax(dbuf dl, int n, dbuf ws, dbuf dtok)
{
    int32_t tok = -7;
    CHECK_OK(frt_cuda_argmax(g_cs, dtok.p, dl.p, n, ws.p, ws.bytes));
    dget(dtok, 0, &tok, sizeof tok);
    return tok;
}

static void test_argmax(void)
{
    const int n = 248320;
    float *x = frand(n, -10, 10);
    dbuf dl = dalloc((size_t)n * 4), dtok = dalloc(16);
    dbuf ws = dalloc(frt_cuda_argmax_workspace_bytes(n));
    int fails = 0;
    /* plain random; ties (lowest index wins); NaNs skipped; all NaN -> 0;
     * NaN then -inf -> the first -inf; +inf */
    for (int c = 0; c < 6; c++) {
        frt_test_fill(x, n, -10, 10);
        if (c == 1) x[200000] = x[5000] = x[170000] = 50.0f;
        if (c == 2)
            for (int i = 0; i < n; i += 97) x[i] = NAN;
        if (c == 2) x[123457] = 60.0f;
        if (c == 3)
            for (int i = 0; i < n; i++) x[i] = NAN;
        if (c == 4)
            for (int i = 0; i < n; i++) x[i] = i < 10 ? NAN : -INFINITY;
        if (c == 5) x[77] = x[76] = INFINITY;
        dput(dl, 0, x, (size_t)n * 4);
        int want = frt_cpu_argmax(x, n), got = run_argmax(dl, n, ws, dtok);
        if (got != want) {
            fails++;
            fprintf(stderr, "argmax case %d: got %d want %d\n", c, got, want);
        }
    }
    {
        int got = run_argmax(dl, 1, ws, dtok); /* n = 1 */
        fails += got != 0;
    }
    report("argmax == frt_cpu_argmax (6 vectors + n 1), mismatches", (double)fails, 0.0);
    /* determinism: the partial winners and the token, three runs */
    frt_test_fill(x, n, -1, 1);
    dput(dl, 0, x, (size_t)n * 4);
    int t0 = run_argmax(dl, n, ws, dtok), t1 = run_argmax(dl, n, ws, dtok),
        t2 = run_argmax(dl, n, ws, dtok);
    report("argmax determinism (3 runs), mismatches", (double)((t0 != t1) + (t0 != t2)), 0.0);
    dfree(&dl);
    dfree(&dtok);
    dfree(&ws);
    free(x);
}

static void test_sample(void)
{
    const int sizes[2] = {1000, 151936};
    const frt_cuda_sampler_params ps[7] = {
        {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f},
        {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f},
        {.temperature = 1.3f, .top_k = 0, .top_p = 0.9f},
        {.temperature = 0.5f, .top_k = 50, .top_p = 1.0f},
        {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f},
        {.temperature = 1.0f, .top_k = 5000, .top_p = 0.95f},
        {.temperature = 0.05f, .top_k = 0, .top_p = 0.5f},
    };
    int mism = 0, total = 0, rng_bad = 0;
    for (int si = 0; si < 2; si++) {
        const int n = sizes[si];
        float *x = frand(n, -8, 8);
        for (int i = 0; i < n; i += 61) x[i] += 6.0f; /* a few peaks */
        x[n / 3] = x[n / 2];                          /* a tie */
        float *scratch = fnew(FRT_CPU_SAMPLE_SCRATCH(n));
        size_t wsb = 0;
        CHECK_OK(frt_cuda_sample_workspace_bytes(n, &wsb));
        int conc = 0; /* samplers that fit the device at once (the batched decode's side streams) */
        CHECK_OK(frt_cuda_sample_concurrency(n, &conc));
        CHECK(conc >= 1);
        printf("  sampler over %d logits: %d launches fit at once\n", n, conc);
        dbuf ws = dalloc(wsb), dl = dalloc((size_t)n * 4), dp = dalloc(sizeof ps[0]);
        dbuf drng = dalloc(8), dtok = dalloc(16);
        dput(dl, 0, x, (size_t)n * 4);
        for (int pi = 0; pi < 7; pi++) {
            uint64_t host = 0x1234ull + (uint64_t)pi * 977 + (uint64_t)si;
            dput(drng, 0, &host, 8);
            dput(dp, 0, &ps[pi], sizeof ps[pi]);
            for (int draw = 0; draw < 6; draw++) {
                CHECK_OK(frt_cuda_sample(g_cs, dtok.p, dl.p, n, dp.p, drng.p, ws.p, wsb));
                int32_t got = -7;
                dget(dtok, 0, &got, 4);
                float u = frt_rng_uniform(&host);
                int want = frt_cpu_sample(x, n, ps[pi].temperature, ps[pi].top_k, ps[pi].top_p, u,
                                          scratch);
                total++;
                if (got != want) {
                    mism++;
                    fprintf(stderr, "sample n %d params %d draw %d: got %d want %d (u %.9g)\n", n,
                            pi, draw, got, want, (double)u);
                }
            }
            uint64_t dev_state = 0;
            dget(drng, 0, &dev_state, 8);
            rng_bad += dev_state != host;
        }
        /* +inf wins (the first one); all NaN -> 0; invalid params -> -1 */
        {
            float *y = fdup(x, n);
            y[n - 5] = INFINITY;
            y[n - 9] = INFINITY;
            dput(dl, 0, y, (size_t)n * 4);
            dput(dp, 0, &ps[1], sizeof ps[1]);
            CHECK_OK(frt_cuda_sample(g_cs, dtok.p, dl.p, n, dp.p, drng.p, ws.p, wsb));
            int32_t got = -7;
            dget(dtok, 0, &got, 4);
            total++;
            mism += got != n - 9;
            for (int i = 0; i < n; i++) y[i] = NAN;
            dput(dl, 0, y, (size_t)n * 4);
            CHECK_OK(frt_cuda_sample(g_cs, dtok.p, dl.p, n, dp.p, drng.p, ws.p, wsb));
            dget(dtok, 0, &got, 4);
            total++;
            mism += got != 0;
            frt_cuda_sampler_params bad = {.temperature = -1.0f, .top_k = 0, .top_p = 1.0f};
            uint64_t before = 0, after = 0;
            dget(drng, 0, &before, 8);
            dput(dp, 0, &bad, sizeof bad);
            CHECK_OK(frt_cuda_sample(g_cs, dtok.p, dl.p, n, dp.p, drng.p, ws.p, wsb));
            dget(dtok, 0, &got, 4);
            dget(drng, 0, &after, 8);
            total++;
            mism += got != -1;
            frt_rng_next(&before);
            rng_bad += after != before;
            free(y);
        }
        dfree(&ws);
        dfree(&dl);
        dfree(&dp);
        dfree(&drng);
        dfree(&dtok);
        free(x);
        free(scratch);
    }
    char name[96];
    snprintf(name, sizeof name, "sample == frt_cpu_sample, same u (%d draws), mismatches", total);
    report(name, (double)mism, 0.0);
    report("sample RNG state advanced as frt_rng_uniform, mismatches", (double)rng_bad, 0.0);
}

/* ---- GEMM ------------------------------------------------------------- */

static void test_gemm(void)
{
    frt_cuda_gemm *g = NULL;
    CHECK_OK(frt_cuda_gemm_create((size_t)32 << 20, &g));
    if (!g) return;
    CHECK_OK(frt_cuda_gemm_add_stream(g, g_cs));
    CHECK_OK(frt_cuda_gemm_add_stream(g, g_cs)); /* twice: a no-op */
    const int shapes[4][3] = {{1, 1024, 2048}, {16, 512, 768}, {77, 256, 520}, {64, 1024, 256}};
    for (int s = 0; s < 4; s++) {
        const int n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = frand((size_t)n * in, -1, 1), *w = frand((size_t)out * in, -1, 1);
        float *y0 = frand((size_t)n * out, -4, 4);
        round_bf16(x, (size_t)n * in);
        round_bf16(w, (size_t)out * in);
        dbuf dx = dalloc((size_t)n * in * 2), dw = dalloc((size_t)out * in * 2),
             dy = dalloc((size_t)n * out * 4);
        dput_as(dx, 0, x, (size_t)n * in, BF16);
        dput_as(dw, 0, w, (size_t)out * in, BF16);
        float *ref = fnew((size_t)n * out), *got = fnew((size_t)n * out);
        for (int mode = 0; mode < 3; mode++) { /* f32, bf16, f32 accumulate */
            const frt_cuda_dtype odt = mode == 1 ? BF16 : F32;
            const int acc = mode == 2;
            CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, dy.p, odt, dx.p, dw.p, n, in, out, acc),
                         FRT_ERR_STATE); /* no plan yet */
            CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, odt, acc));
            CHECK_OK(frt_cuda_gemm_plan(g, n, in, out, odt, acc)); /* cached */
            if (acc) {
                memcpy(ref, y0, (size_t)n * out * 4);
                dput(dy, 0, y0, (size_t)n * out * 4);
                frt_cpu_matmul_add(ref, x, w, n, in, out);
            } else {
                frt_cpu_matmul(ref, x, w, n, in, out);
            }
            CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, odt, dx.p, dw.p, n, in, out, acc));
            dget_as(dy, 0, got, (size_t)n * out, odt);
            char name[128];
            snprintf(name, sizeof name, "gemm n %d in %d out %d -> %s%s", n, in, out, dtn(odt),
                     acc ? " accumulate" : "");
            report(name, frt_test_rel_err(got, ref, (size_t)n * out),
                   odt == BF16 ? TOL_BF16 : TOL_GEMM_F32);
            if (mode == 0) {
                void *a = snap(dy, (size_t)n * out * 4);
                CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, odt, dx.p, dw.p, n, in, out, 0));
                CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, odt, dx.p, dw.p, n, in, out, 0));
                void *b = snap(dy, (size_t)n * out * 4);
                report_same("gemm determinism (3 runs)", a, b, (size_t)n * out * 4);
                free(a);
                free(b);
            }
        }
        /* misaligned pointer */
        CHECK_STATUS(frt_cuda_gemm_run(g, g_cs, dy.p, F32, (const uint16_t *)dx.p + 1, dw.p, n, in,
                                       out, 0),
                     FRT_ERR_INVALID_ARGUMENT);
        dfree(&dx);
        dfree(&dw);
        dfree(&dy);
        free(x);
        free(w);
        free(y0);
        free(ref);
        free(got);
    }
    CHECK(frt_cuda_gemm_plan_count(g) == 12);
    printf("  gemm plans (for the fingerprint):\n");
    for (int i = 0; i < frt_cuda_gemm_plan_count(g); i++) {
        frt_cuda_gemm_plan_info info;
        CHECK_OK(frt_cuda_gemm_plan_get(g, i, &info));
        printf("    n %5d in %5d out %5d %s%s: algo %d tile %d stages %d splitk %d red %d swz %d "
               "custom %d\n",
               info.n, info.in_dim, info.out_dim, dtn(info.out_dtype),
               info.accumulate ? " acc" : "    ", info.algo_id, info.tile_id, info.stages_id,
               info.splitk_num, info.reduction_scheme, info.cta_swizzling, info.custom_option);
    }
    frt_cuda_gemm_plan_info info;
    CHECK_STATUS(frt_cuda_gemm_plan_get(g, 12, &info), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_cuda_gemm_plan(g, 4, 100, 256, F32, 0), FRT_ERR_INVALID_ARGUMENT);
    frt_cuda_gemm_destroy(g);
    frt_cuda_gemm_destroy(NULL);
}

/* ---- CUDA graphs ---------------------------------------------------------- */

/* Decode step graph: rope(q), rope(k), KV append, flash-decoding attention,
 * all reading the position from device memory. */
typedef struct decode_graph {
    int nh, nkv, hd, rot, max_seq, split;
    float theta;
    dbuf q, k, v, kc, vc, out, ws;
} decode_graph;

static int record_decode(frt_stream *stream, void *user)
{
    decode_graph *d = user;
    void *s = frt_stream_native(stream);
    FRT_TEST_TRY_(frt_cuda_rope(s, d->q.p, F32, d_start_p(), NULL, 1, d->nh, d->hd, d->rot,
                                d->theta));
    FRT_TEST_TRY_(frt_cuda_rope(s, d->k.p, F32, d_start_p(), NULL, 1, d->nkv, d->hd, d->rot,
                                d->theta));
    FRT_TEST_TRY_(frt_cuda_kv_append(s, d->kc.p, d->vc.p, d->k.p, d->v.p, F32, d_start_p(), NULL,
                                     1, d->max_seq, d->nkv, d->hd));
    FRT_TEST_TRY_(frt_cuda_attention(s, d->out.p, F32, d->q.p, F32, d->kc.p, d->vc.p, d_start_p(),
                                     NULL, 1, d->max_seq, d->nh, d->nkv, d->hd,
                                     1.0f / sqrtf((float)d->hd), d->split, d->ws.p, d->ws.bytes));
    return 0;
}

static void test_graph_decode(void)
{
    decode_graph d = {4, 2, 128, 64, 512, 64, 1e7f, {0}, {0}, {0}, {0}, {0}, {0}, {0}};
    const size_t crow = (size_t)d.nkv * d.hd, csz = (size_t)d.max_seq * crow;
    const size_t qn = (size_t)d.nh * d.hd;
    float *kcf = frand(csz, -1, 1), *vcf = frand(csz, -1, 1);
    round_bf16(kcf, csz);
    round_bf16(vcf, csz);
    d.q = dalloc(qn * 4);
    d.k = dalloc(crow * 4);
    d.v = dalloc(crow * 4);
    d.kc = dalloc(csz * 2);
    d.vc = dalloc(csz * 2);
    d.out = dalloc(qn * 4);
    d.ws = dalloc(frt_cuda_attention_workspace_bytes(1, d.max_seq, d.nh, d.hd, d.split));
    dput_as(d.kc, 0, kcf, csz, BF16);
    dput_as(d.vc, 0, vcf, csz, BF16);
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "decode", 0, &graph));
    set_dyn(0, 1);
    CHECK_OK(frt_graph_capture(graph, 1, g_st, record_decode, &d));
    const int positions[4] = {10, 11, 300, 511};
    float *ref = fnew(qn), *got = fnew(qn);
    for (int i = 0; i < 4 && graph; i++) {
        const int p = positions[i];
        float *q = frand(qn, -2, 2), *k = frand(crow, -1, 1), *v = frand(crow, -1, 1);
        dput(d.q, 0, q, qn * 4);
        dput(d.k, 0, k, crow * 4);
        dput(d.v, 0, v, crow * 4);
        set_dyn(p, 1);
        CHECK_OK(frt_graph_replay(graph, 1, g_st));
        sync_st();
        dget(d.out, 0, got, qn * 4);
        /* CPU: the same step. The appended K row is checked against the CPU
         * roped row at bf16 precision, then the device's row goes into the
         * CPU cache (a 1-ulp difference of a roped value may flip a bf16
         * rounding: that would be input noise, not an attention error). */
        int32_t pos = p;
        frt_cpu_rope(q, 1, d.nh, d.hd, d.rot, &pos, d.theta);
        frt_cpu_rope(k, 1, d.nkv, d.hd, d.rot, &pos, d.theta);
        char name[96];
        float *krow = kcf + (size_t)p * crow, *vrow = vcf + (size_t)p * crow;
        dget_as(d.kc, (size_t)p * crow, krow, crow, BF16);
        dget_as(d.vc, (size_t)p * crow, vrow, crow, BF16);
        snprintf(name, sizeof name, "graph decode: appended K row (roped) at pos %d", p);
        report(name, frt_test_rel_err(krow, k, crow), TOL_BF16);
        round_bf16(v, crow);
        snprintf(name, sizeof name, "graph decode: appended V row at pos %d (exact)", p);
        report(name, frt_test_rel_err(vrow, v, crow), 0.0);
        frt_cpu_attention(ref, q, kcf, vcf, 1, p, d.nh, d.nkv, d.hd, 1.0f / sqrtf((float)d.hd));
        snprintf(name, sizeof name, "graph decode (rope+append+attention) replay at pos %d", p);
        report(name, frt_test_rel_err(got, ref, qn), TOL_F32);
        free(q);
        free(k);
        free(v);
    }
    frt_graph_destroy(graph);
    dfree(&d.q);
    dfree(&d.k);
    dfree(&d.v);
    dfree(&d.kc);
    dfree(&d.vc);
    dfree(&d.out);
    dfree(&d.ws);
    free(kcf);
    free(vcf);
    free(ref);
    free(got);
}

/* Prefill-side graph: chunked gated delta rule over a bucket of 256 with the
 * valid length in device memory, then argmax and sampling of a logits row
 * (CUB sort and cudaFuncSetAttribute inside a capture). */
typedef struct gdn_graph {
    gdr_data *d;
    gdr_dev *x;
    int max_n, vocab;
    dbuf logits, tok_a, tok_s, am_ws, s_ws, params, rng;
} gdn_graph;

static int record_gdn(frt_stream *stream, void *user)
{
    gdn_graph *G = user;
    void *s = frt_stream_native(stream);
    const gdr_data *d = G->d;
    FRT_TEST_TRY_(frt_cuda_gdr_chunked(s, G->x->out.p, F32, G->x->state.p, G->x->q.p, G->x->k.p,
                                       G->x->v.p, F32, G->x->g.p, G->x->beta.p, d_n_p(), G->max_n,
                                       d->nk, d->nv, d->dk, d->dv, 64, G->x->ws.p,
                                       G->x->ws.bytes));
    FRT_TEST_TRY_(frt_cuda_argmax(s, G->tok_a.p, G->logits.p, G->vocab, G->am_ws.p,
                                  G->am_ws.bytes));
    FRT_TEST_TRY_(frt_cuda_sample(s, G->tok_s.p, G->logits.p, G->vocab, G->params.p, G->rng.p,
                                  G->s_ws.p, G->s_ws.bytes));
    return 0;
}

static void test_graph_gdn(void)
{
    const int max_n = 256, nk = 2, nv = 4, dk = 128, dv = 64, vocab = 50000;
    gdr_data d = gdr_make(max_n, nk, nv, dk, dv, F32);
    gdr_dev x = gdr_upload(&d, max_n, F32);
    gdn_graph G;
    memset(&G, 0, sizeof G);
    G.d = &d;
    G.x = &x;
    G.max_n = max_n;
    G.vocab = vocab;
    G.logits = dalloc((size_t)vocab * 4);
    G.tok_a = dalloc(16);
    G.tok_s = dalloc(16);
    G.am_ws = dalloc(frt_cuda_argmax_workspace_bytes(vocab));
    size_t swb = 0;
    CHECK_OK(frt_cuda_sample_workspace_bytes(vocab, &swb));
    G.s_ws = dalloc(swb);
    G.params = dalloc(sizeof(frt_cuda_sampler_params));
    G.rng = dalloc(8);
    frt_cuda_sampler_params prm = {.temperature = 0.8f, .top_k = 40, .top_p = 0.9f};
    dput(G.params, 0, &prm, sizeof prm);
    uint64_t host_rng = 42;
    dput(G.rng, 0, &host_rng, 8);
    float *logits = frand(vocab, -6, 6), *scratch = fnew(FRT_CPU_SAMPLE_SCRATCH(vocab));
    frt_graph *graph = NULL;
    CHECK_OK(frt_graph_create(g_ctx, "gdn", 0, &graph));
    set_dyn(0, max_n);
    CHECK_OK(frt_graph_capture(graph, 7, g_st, record_gdn, &G));
    const size_t ns = (size_t)nv * dk * dv;
    float *got = fnew((size_t)max_n * nv * dv > ns ? (size_t)max_n * nv * dv : ns);
    const int lens[3] = {200, 64, 1};
    for (int i = 0; i < 3 && graph; i++) {
        const int n = lens[i];
        frt_test_fill(logits, vocab, -6, 6);
        dput(G.logits, 0, logits, (size_t)vocab * 4);
        dput(x.state, 0, d.state0, ns * 4);
        set_dyn(0, n);
        CHECK_OK(frt_graph_replay(graph, 7, g_st));
        sync_st();
        float *out_ref = fnew((size_t)n * nv * dv), *st_ref = fdup(d.state0, ns);
        CHECK_OK(frt_cpu_gdr_chunked(out_ref, st_ref, d.q, d.k, d.v, d.g, d.beta, n, nk, nv, dk, dv,
                                     64));
        dget(x.out, 0, got, (size_t)n * nv * dv * 4);
        char name[96];
        snprintf(name, sizeof name, "graph gdr_chunked replay, n %d/%d from device (out)", n,
                 max_n);
        report(name, frt_test_rel_err(got, out_ref, (size_t)n * nv * dv), TOL_F32);
        dget(x.state, 0, got, ns * 4);
        snprintf(name, sizeof name, "graph gdr_chunked replay, n %d/%d (state)", n, max_n);
        report(name, frt_test_rel_err(got, st_ref, ns), TOL_F32);
        int32_t ta = -7, ts = -7;
        dget(G.tok_a, 0, &ta, 4);
        dget(G.tok_s, 0, &ts, 4);
        float u = frt_rng_uniform(&host_rng);
        int wa = frt_cpu_argmax(logits, vocab);
        int ws = frt_cpu_sample(logits, vocab, prm.temperature, prm.top_k, prm.top_p, u, scratch);
        snprintf(name, sizeof name, "graph argmax + sample replay %d, mismatches", i + 1);
        report(name, (double)((ta != wa) + (ts != ws)), 0.0);
        free(out_ref);
        free(st_ref);
    }
    frt_graph_destroy(graph);
    gdr_dev_free(&x);
    gdr_free(&d);
    dfree(&G.logits);
    dfree(&G.tok_a);
    dfree(&G.tok_s);
    dfree(&G.am_ws);
    dfree(&G.s_ws);
    dfree(&G.params);
    dfree(&G.rng);
    free(logits);
    free(scratch);
    free(got);
}

/* ---- bad arguments (no device needed: checked before any CUDA call) ---- */

static void test_bad_args(void)
{
    /* fake, never dereferenced pointers */
    void *p = (void *)(uintptr_t)0x1000;
    int32_t *ip = (int32_t *)p;
    float *fp = (float *)p;
    uint16_t *hp = (uint16_t *)p;
    const int E = FRT_ERR_INVALID_ARGUMENT;
    CHECK_STATUS(frt_cuda_embedding(NULL, NULL, F32, hp, 10, 8, ip, ip, 4), E);
    CHECK_STATUS(frt_cuda_embedding(NULL, p, (frt_cuda_dtype)7, hp, 10, 8, ip, ip, 4), E);
    CHECK_STATUS(frt_cuda_embedding(NULL, p, F32, hp, 0, 8, ip, ip, 4), E);
    CHECK_STATUS(frt_cuda_rmsnorm(NULL, p, F32, p, F32, NULL, ip, 4, 1, 8, 1e-6f, 1), E);
    CHECK_STATUS(frt_cuda_rmsnorm(NULL, p, F32, p, BF16, fp, ip, 4, 1, 8, 1e-6f, 1), E);
    CHECK_STATUS(frt_cuda_rmsnorm(NULL, p, F32, (char *)p + 64, F32, fp, ip, 4, 0, 8, 1e-6f, 1), E);
    CHECK_STATUS(frt_cuda_add_rmsnorm(NULL, fp, p, F32, p, F32, fp, ip, 4, 8, 1e-6f, 1), E);
    CHECK_STATUS(frt_cuda_rmsnorm_gated_strided(NULL, p, F32, fp, F32, fp, F32, 15, fp, ip, 4, 2, 8, 1e-6f),
                 E); /* z stride shorter than a token */
    CHECK_STATUS(frt_cuda_rmsnorm_gated_strided(NULL, p, F32, fp, F32, p, F32, 20, fp, ip, 4, 2, 8, 1e-6f),
                 E); /* out == a strided z */
    CHECK_STATUS(frt_cuda_rmsnorm_gated(NULL, p, F32, p, F32, NULL, F32, fp, ip, 4, 1, 8, 1e-6f),
                 E);
    CHECK_STATUS(frt_cuda_l2norm(NULL, p, F32, ip, 4, 1, -1, 1e-6f), E);
    CHECK_STATUS(frt_cuda_rope(NULL, p, F32, NULL, ip, 4, 2, 64, 32, 1e4f), E);
    CHECK_STATUS(frt_cuda_rope(NULL, p, F32, ip, ip, 4, 2, 64, 33, 1e4f), E);
    CHECK_STATUS(frt_cuda_rope(NULL, p, F32, ip, ip, 4, 2, 64, 128, 1e4f), E);
    CHECK_STATUS(frt_cuda_kv_append(NULL, hp, hp, p, p, F32, NULL, ip, 4, 16, 2, 64), E);
    CHECK_STATUS(frt_cuda_kv_append(NULL, hp, hp, p, p, F32, ip, ip, 4, 0, 2, 64), E);
    /* attention: head_dim not a multiple of 32 / too large, heads not a
     * multiple of KV heads, missing workspace for splits */
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, ip, ip, 1, 64, 4, 2,
                                    48, 0.1f, 0, NULL, 0),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, ip, ip, 1, 64, 4, 2,
                                    288, 0.1f, 0, NULL, 0),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, ip, ip, 1, 64, 6, 4,
                                    64, 0.1f, 0, NULL, 0),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, ip, ip, 1, 64, 4, 2,
                                    64, 0.1f, 16, NULL, 0),
                 E);
    CHECK_STATUS(frt_cuda_attention(NULL, p, F32, (char *)p + 4, F32, hp, hp, NULL, ip, 1, 64, 4, 2,
                                    64, 0.1f, 0, NULL, 0),
                 E);
    CHECK(frt_cuda_attention_workspace_bytes(1, 64, 4, 64, 0) == 0);
    CHECK(frt_cuda_attention_workspace_bytes(2, 100, 4, 64, 32) == (size_t)4 * 2 * 4 * 66 * 4);
    CHECK_STATUS(frt_cuda_conv1d_causal(NULL, p, F32, (char *)p + 4, F32, NULL, fp, ip, 4, 8, 4),
                 E);
    CHECK_STATUS(frt_cuda_conv1d_causal(NULL, p, F32, p, F32, fp, fp, ip, 4, 8, 4), E);
    CHECK_STATUS(frt_cuda_conv1d_causal_strided(NULL, p, F32, (char *)p + 64, F32, 7, fp, fp, ip, 4, 8, 4), E);
    CHECK_STATUS(frt_cuda_gdn_gate(NULL, fp, fp, p, p, F32, fp, NULL, ip, 4, 8), E);
    CHECK_STATUS(frt_cuda_gdr_recurrent(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 4, 3, 4, 64,
                                        64),
                 E);
    CHECK_STATUS(frt_cuda_gdr_recurrent(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 4, 2, 4, 512,
                                        64),
                 E);
    CHECK_STATUS(frt_cuda_gdr_chunked(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 4, 2, 4, 64, 64,
                                      0, p, (size_t)1 << 30),
                 E);
    CHECK_STATUS(frt_cuda_gdr_chunked(NULL, p, F32, fp, p, p, p, F32, fp, fp, ip, 4, 2, 4, 64, 64,
                                      65, p, (size_t)1 << 30),
                 E);
    CHECK_STATUS(frt_cuda_gdr_chunked(NULL, p, F32, NULL, p, p, p, F32, fp, fp, ip, 4, 2, 4, 64, 64,
                                      64, p, (size_t)1 << 30),
                 E);
    CHECK_STATUS(frt_cuda_swiglu(NULL, p, F32, p, (char *)p + 4, BF16, ip, 4, 8), E);
    CHECK_STATUS(frt_cuda_swiglu(NULL, p, F32, (char *)p + 4, (char *)p + 8, F32, ip, 4, 0), E);
    CHECK_STATUS(frt_cuda_sigmoid_mul(NULL, NULL, F32, p, F32, ip, 4, 8), E);
    CHECK_STATUS(frt_cuda_add(NULL, p, (frt_cuda_dtype)-1, p, F32, ip, 4, 8), E);
    CHECK_STATUS(frt_cuda_convert(NULL, p, BF16, p, F32, ip, 4, 8), E);
    CHECK_STATUS(frt_cuda_copy_rows(NULL, p, F32, (char *)p + 4, F32, ip, 4, 2, 8, 4), E);
    CHECK_STATUS(frt_cuda_last_row(NULL, p, F32, (char *)p + 4, F32, ip, 0, 8), E);
    CHECK_STATUS(frt_cuda_argmax(NULL, ip, fp, 0, p, 1024), E);
    CHECK_STATUS(frt_cuda_argmax(NULL, ip, fp, 100000, p, 8), E);
    CHECK(frt_cuda_argmax_workspace_bytes(0) == 0);
    CHECK_STATUS(frt_cuda_sample(NULL, ip, fp, 0, (const frt_cuda_sampler_params *)p, (uint64_t *)p,
                                 p, 1 << 20),
                 E);
    CHECK_STATUS(frt_cuda_sample(NULL, ip, fp, 100, NULL, (uint64_t *)p, p, 1 << 20), E);
    size_t b = 0;
    CHECK_STATUS(frt_cuda_sample_workspace_bytes((1 << 24) + 1, &b), E);
    CHECK_STATUS(frt_cuda_sample_workspace_bytes(100, NULL), E);
    CHECK_STATUS(frt_cuda_sample_concurrency(100, NULL), E);
    int conc = 0;
    CHECK_STATUS(frt_cuda_sample_concurrency(0, &conc), E);
    /* the batched decode's side streams and slot ends (checked before any
     * CUDA call: valid without a device) */
    frt_cuda_fanout fan;
    CHECK_STATUS(frt_cuda_fanout_create(&fan, 0), E);
    CHECK(fan.n == 0 && fan.side[0] == NULL && fan.ev_fork == NULL); /* nothing to free */
    CHECK_STATUS(frt_cuda_fanout_create(&fan, FRT_FANOUT_MAX + 1), E);
    CHECK_STATUS(frt_cuda_fanout_create(NULL, 2), E);
    CHECK_STATUS(frt_cuda_fanout_fork(&fan, NULL, 1), E); /* more side streams than made */
    CHECK_STATUS(frt_cuda_fanout_join(&fan, NULL, 1), E);
    CHECK_STATUS(frt_cuda_fanout_after(&fan, 0, 0), E);
    size_t eb = 0;
    CHECK_STATUS(frt_batch_ends_bytes(0, 1000, &eb), E);
    CHECK_STATUS(frt_batch_ends_bytes(FRT_FANOUT_MAX + 1, 1000, &eb), E);
    CHECK_STATUS(frt_batch_ends_bytes(2, 0, &eb), E);
    CHECK_STATUS(frt_batch_ends_bytes(2, 1000, NULL), E);
    CHECK_STATUS(frt_batch_ends_init(NULL, 2, 1000, p, fp), E);
    CHECK_STATUS(frt_cuda_gemm_create(1024, NULL), E);
    CHECK_STATUS(frt_cuda_gemm_plan(NULL, 1, 8, 8, F32, 0), E);
    CHECK_STATUS(frt_cuda_gemm_run(NULL, NULL, p, F32, hp, hp, 1, 8, 8, 0), E);
    CHECK_STATUS(frt_cuda_gemm_add_stream(NULL, NULL), E);
    CHECK_STATUS(frt_cuda_gemm_plan_get(NULL, 0, NULL), E);
    CHECK(frt_cuda_gemm_plan_count(NULL) == 0);
    /* max_n 0: a no-op that launches nothing (valid without a device) */
    CHECK_OK(frt_cuda_rmsnorm(NULL, p, F32, p, F32, fp, ip, 0, 1, 8, 1e-6f, 1));
    CHECK_OK(frt_cuda_swiglu(NULL, p, F32, (char *)p + 4, (char *)p + 8, F32, ip, 0, 8));
}

int main(void)
{
    frt_test_seed(20261121);
    printf("  %-58s %10s %8s\n", "kernel", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    g_dyn = dalloc(64);

    test_embedding();
    rmsnorm_case(9, 9, 1, 1000, 1, F32, F32);
    rmsnorm_case(9, 4, 1, 4096, 1, BF16, BF16);
    rmsnorm_case(9, 6, 4, 256, 0, F32, BF16);
    rmsnorm_case(5, 3, 16, 256, 1, BF16, F32);
    test_add_rmsnorm(F32, F32);
    test_add_rmsnorm(BF16, BF16);
    test_rmsnorm_gated(F32, F32, F32, 512);
    test_rmsnorm_gated(F32, BF16, BF16, 512);
    test_rmsnorm_gated(F32, F32, F32, 1036);
    test_rmsnorm_gated(F32, F32, BF16, 517);
    test_l2norm(F32);
    test_l2norm(BF16);
    test_rope(4, 256, 64, 1e7f, F32);
    test_rope(2, 128, 128, 1e4f, BF16);
    test_rope(3, 64, 32, 1e6f, F32);
    test_kv_append(F32);
    test_kv_append(BF16);
    test_attention();
    test_gdr();
    test_conv1d(F32, 300);
    test_conv1d(BF16, 300);
    test_conv1d(F32, 357);
    test_conv1d(BF16, 1000);
    test_conv1d_split(F32, 0);
    test_conv1d_split(BF16, 0);
    test_conv1d_split(F32, 128);
    test_conv1d_split(F32, 64);
    test_conv1d_split(BF16, 256);
    test_gdn_gate(F32);
    test_gdn_gate(BF16);
    test_elementwise(F32);
    test_elementwise(BF16);
    test_convert();
    test_argmax();
    test_sample();
    test_gemm();
    test_graph_decode();
    test_graph_gdn();

    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    dfree(&g_dyn);
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
