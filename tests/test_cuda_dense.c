/*
 * test_cuda_dense.c - the dense architecture's CUDA backend
 * (src/model/arch/dense/dense_cuda.c, dense_glue.cu) against the cpu
 * backend. Skipped (77) without a CUDA device.
 *
 *  1. the glue kernels on random data against their CPU twins: the bias add
 *     (bits: one f32 add per element) and RoPE from a llama3 table
 *     (frt_cpu_rope_freqs; within 1e-6 norm-wise), rows past n untouched;
 *     the decode prep (RoPE + KV append in one launch; bf16 and FP8 E4M3
 *     caches, one sequence and batched over branches, with and without
 *     qwen2's biases) byte for byte against the separate launches it
 *     replaces, FP8 codes against the CPU codec (frt_fp8_quantize_rows);
 *     the prefill prep over one q | k | v GEMM's rows against the prep on
 *     them apart (bytes); qwen3's preps with the q / k norms against the
 *     norm launches + the prep (1e-6 on q, 1e-3 on the cache rows);
 *  2. a random-weight tiny-dense model (llama, llama3 scaling, GQA 4/2,
 *     head_dim 32) and a qwen2-like and qwen3-like variant of it (and the
 *     qwen3-like at head_dim 64: one q | k | v GEMM and the norm preps): every
 *     layer's hidden state and the logits of a 100-token prefill (pieces of
 *     64 and 36) within 3e-2 norm-wise of the f32 cpu backend; greedy tokens
 *     equal while the cpu's top-2 margin exceeds 4x the max |logit
 *     difference|; the decode graph replayed at every position gives the
 *     same logits as eager prefill of the same tokens within 1e-2;
 *  3. refusals: the golden models' odd shapes (hidden 72, head_dim 12) are
 *     refused with FRT_ERR_UNSUPPORTED naming the dimension.
 *  4. params.gemm_autotune on tiny-dense and on the hybrid (tiny): the
 *     tune file lists only the append shapes (below C), a second load
 *     reads it without rewriting it and gives the same logits bit for
 *     bit, within 3e-2 of an untuned load; the cpu backend refuses it.
 * The capsule suite over the dense family on cuda is tests/test_capsule.c
 * (capsule_cuda).
 */
#include "frt_test.h"

#if defined(__GNUC__) && !defined(__clang__) /* a GCC-only warning (make fuzz builds with clang) */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include "frt/debug.h"
#include "frt/exec.h"
#include "frt/model.h"
#include "gen_model.h"
#include "kernels/cpu/rope_freqs.h"
#include "util/error.h"

#if FRT_HAVE_CUDA
#include "kernels/cpu/fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/arch/dense/dense_glue.h"
#include "util/bf16.h"
#include "frt_test_cuda.h"
#endif

#include <math.h>
#include <unistd.h>

#if FRT_HAVE_CUDA

static frt_buffer *dev_alloc(size_t bytes)
{
    frt_buffer *b = NULL;
    must(frt_buffer_alloc(g_ctx, "test", FRT_SPACE_DEVICE, bytes, &b), "device buffer");
    return b;
}

static void test_glue(void)
{
    enum { MAXN = 37, N = 29, NH = 5, HD = 96, DIM = 200 };
    /* bias */
    float *y = xmalloc(MAXN * DIM * sizeof(float)), *b = xmalloc(DIM * sizeof(float));
    float *ref = xmalloc(MAXN * DIM * sizeof(float)), *got = xmalloc(MAXN * DIM * sizeof(float));
    frt_test_fill(y, MAXN * DIM, -3, 3);
    frt_test_fill(b, DIM, -1, 1);
    memcpy(ref, y, MAXN * DIM * sizeof(float));
    for (int r = 0; r < N; r++)
        for (int i = 0; i < DIM; i++) ref[r * DIM + i] += b[i];
    frt_buffer *dy = dev_alloc(MAXN * DIM * sizeof(float)), *db = dev_alloc(DIM * sizeof(float));
    frt_buffer *dn = dev_alloc(2 * sizeof(int32_t));
    int32_t nn[2] = {N, 1000};
    must(frt_buffer_write(dy, 0, y, MAXN * DIM * sizeof(float), g_st), "write");
    must(frt_buffer_write(db, 0, b, DIM * sizeof(float), g_st), "write");
    must(frt_buffer_write(dn, 0, nn, sizeof nn, g_st), "write");
    const int32_t *d_n = frt_buffer_ptr(dn), *d_start = (const int32_t *)frt_buffer_ptr(dn) + 1;
    CHECK_OK(frt_dense_bias_add(g_cs, frt_buffer_ptr(dy), frt_buffer_ptr(db), d_n, MAXN, DIM));
    must(frt_buffer_read(dy, 0, got, MAXN * DIM * sizeof(float), g_st), "read");
    must(frt_stream_sync(g_st), "sync");
    CHECK_MSG(memcmp(got, ref, MAXN * DIM * sizeof(float)) == 0, "bias add: not the CPU bits (rows past n too)");
    printf("  bias add [%d of %d rows, %d]: same bits as the CPU, rows past n untouched\n", N, MAXN, DIM);
    CHECK_STATUS(frt_dense_bias_add(g_cs, NULL, frt_buffer_ptr(db), d_n, MAXN, DIM), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_dense_bias_add(g_cs, frt_buffer_ptr(dy), frt_buffer_ptr(db), d_n, 0, DIM), FRT_ERR_INVALID_ARGUMENT);

    /* RoPE from a llama3 table at positions 1000 .. 1000 + N - 1 */
    size_t nx = (size_t)MAXN * NH * HD;
    float *x = xmalloc(nx * sizeof(float)), *xr = xmalloc(nx * sizeof(float)), *xg = xmalloc(nx * sizeof(float));
    float inv[HD / 2];
    int32_t pos[MAXN];
    frt_rope_inv_freq_llama3(inv, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    frt_test_fill(x, nx, -2, 2);
    memcpy(xr, x, nx * sizeof(float));
    for (int t = 0; t < MAXN; t++) pos[t] = 1000 + t;
    frt_cpu_rope_freqs(xr, N, NH, HD, HD, pos, inv);
    frt_buffer *dx = dev_alloc(nx * sizeof(float)), *dinv = dev_alloc(sizeof inv);
    must(frt_buffer_write(dx, 0, x, nx * sizeof(float), g_st), "write");
    must(frt_buffer_write(dinv, 0, inv, sizeof inv, g_st), "write");
    CHECK_OK(frt_dense_rope_table(g_cs, frt_buffer_ptr(dx), frt_buffer_ptr(dinv), d_start, d_n, MAXN, NH, HD));
    must(frt_buffer_read(dx, 0, xg, nx * sizeof(float), g_st), "read");
    must(frt_stream_sync(g_st), "sync");
    size_t valid = (size_t)N * NH * HD;
    report("rope table (llama3) vs frt_cpu_rope_freqs", frt_test_rel_err(xg, xr, valid), 1e-6);
    CHECK_MSG(memcmp(xg + valid, x + valid, (nx - valid) * sizeof(float)) == 0, "rope: rows past n touched");
    CHECK_STATUS(frt_dense_rope_table(g_cs, frt_buffer_ptr(dx), frt_buffer_ptr(dinv), d_start, d_n, MAXN, NH, 7),
                 FRT_ERR_INVALID_ARGUMENT);
    frt_buffer_free(dy);
    frt_buffer_free(db);
    frt_buffer_free(dn);
    frt_buffer_free(dx);
    frt_buffer_free(dinv);
    free(y);
    free(b);
    free(ref);
    free(got);
    free(x);
    free(xr);
    free(xg);
}

/* The decode prep's caches and scales: bf16 caches (fp8 0) or E4M3 caches
 * with per-KV-head scales ks, vs (device, [NKV] each). */
typedef struct prep_kv {
    int fp8;
    const float *ks, *vs;
    const frt_dense_qkv_bias *bias; /* the fused preps' biases (NULL: none) */
} prep_kv;

/* One sequence through the fused prep (frt_dense_decode_prep, _fp8). */
static int prep_one(const prep_kv *p, float *q, float *k, const float *v, const float *inv, void *kc, void *vc,
                    const int32_t *pos, int maxs, int nh, int nkv, int hd)
{
    if (p->fp8)
        return frt_dense_decode_prep_fp8(g_cs, q, k, v, inv, kc, vc, p->ks, p->vs, pos, maxs, nh, nkv, hd, p->bias);
    return frt_dense_decode_prep(g_cs, q, k, v, inv, kc, vc, pos, maxs, nh, nkv, hd, p->bias);
}

/* The branches through the batched prep (tables t: k caches, v caches,
 * positions, nb each). */
static int prep_batch(const prep_kv *p, float *q, float *k, const float *v, const float *inv, void **t, int nb,
                      int maxs, int nh, int nkv, int hd)
{
    if (p->fp8)
        return frt_dense_decode_prep_batch_fp8(g_cs, q, k, v, inv, (uint8_t *const *)t, (uint8_t *const *)(t + nb),
                                               p->ks, p->vs, (const int32_t *const *)(t + 2 * nb), nb, maxs, nh, nkv,
                                               hd, p->bias);
    return frt_dense_decode_prep_batch(g_cs, q, k, v, inv, (uint16_t *const *)t, (uint16_t *const *)(t + nb),
                                       (const int32_t *const *)(t + 2 * nb), nb, maxs, nh, nkv, hd, p->bias);
}

/* The separate launches the prep replaces: RoPE of q, RoPE of k, the KV
 * append (bf16 or FP8). */
static void prep_unfused(const prep_kv *p, float *q, float *k, const float *v, const float *inv, void *kc, void *vc,
                         const int32_t *pos, int maxs, int nh, int nkv, int hd)
{
    CHECK_OK(frt_dense_rope_table(g_cs, q, inv, pos, NULL, 1, nh, hd));
    CHECK_OK(frt_dense_rope_table(g_cs, k, inv, pos, NULL, 1, nkv, hd));
    if (p->fp8)
        CHECK_OK(frt_cuda_kv_append_fp8(g_cs, kc, vc, k, v, p->ks, p->vs, pos, NULL, 1, maxs, nkv, hd));
    else
        CHECK_OK(frt_cuda_kv_append(g_cs, kc, vc, k, v, FRT_CUDA_F32, pos, NULL, 1, maxs, nkv, hd));
}

/* FP8: row `pos` of the E4M3 caches against the CPU codec on the roped k
 * (read back from the device) and v: frt_fp8_quantize_rows per head. */
static int prep_codes_cpu(const unsigned char *kc, const unsigned char *vc, const float *k_roped, const float *v,
                          const float *ks, const float *vs, int pos, int nkv, int hd)
{
    const size_t row = (size_t)nkv * hd;
    uint8_t *want = xmalloc(row);
    frt_fp8_quantize_rows(want, k_roped, ks, nkv, nkv, hd);
    int same = !memcmp(kc + (size_t)pos * row, want, row);
    frt_fp8_quantize_rows(want, v, vs, nkv, nkv, hd);
    same &= !memcmp(vc + (size_t)pos * row, want, row);
    free(want);
    return same;
}

/* q16 (read back: [max_n, w] bf16) against the f32 rows ref [max_n, w]
 * (device) rounded to bf16 (RNE) for rows < n, and the fill 0x5A5A past
 * them. */
static int q16_is_rounded(frt_buffer *q16, frt_buffer *ref, int max_n, int n, size_t w)
{
    const size_t all = (size_t)max_n * w;
    uint16_t *a = xmalloc(all * 2);
    float *b = xmalloc(all * 4);
    must(frt_buffer_read(q16, 0, a, all * 2, g_st), "read");
    must(frt_buffer_read(ref, 0, b, (size_t)n * w * 4, g_st), "read");
    must(frt_stream_sync(g_st), "sync");
    int same = 1;
    for (size_t i = 0; i < all; i++) same &= a[i] == (i < (size_t)n * w ? frt_f32_to_bf16(b[i]) : 0x5A5A);
    free(a);
    free(b);
    return same;
}

enum { PP_MAXN = 37, PP_N = 29, PP_NH = 8, PP_NKV = 2, PP_HD = 64, PP_MAXS = 290 };

/* frt_dense_prefill_prep_packed (_fp8): the rows of test_prefill_prep laid
 * out as one GEMM's q | k | v | pad unused columns give the bytes of the
 * prep on them apart (ref: its q, K cache, V cache buffers) in q_out and
 * the caches; q_out's rows past n keep their fill; bad ld, NULL, q_out
 * overlapping the rows are refused. pad 4: rows of a multiple of 4 floats
 * (the kernel of 4 elements an item, prep_row4); pad 5: the kernel of one
 * (prep_row), so both meet the same bytes. */
static void test_prefill_prep_packed(int fp8, int pad, const float *q, const float *k, const float *v,
                                     const float *dinv, const float *ks, const float *vs, const int32_t *pos,
                                     const int32_t *dn, frt_buffer *const *ref)
{
    enum { QD = PP_NH * PP_HD, KVD = PP_NKV * PP_HD };
    const int LD = QD + 2 * KVD + pad;
    const size_t cache = (size_t)PP_MAXS * KVD * (fp8 ? 1 : 2), qn = (size_t)PP_MAXN * QD;
    float *rows = xmalloc((size_t)PP_MAXN * LD * 4), *fill = xmalloc(qn * 4);
    frt_test_fill(rows, (size_t)PP_MAXN * LD, -3, 3);
    for (int t = 0; t < PP_MAXN; t++) {
        memcpy(rows + (size_t)t * LD, q + (size_t)t * QD, QD * 4);
        memcpy(rows + (size_t)t * LD + QD, k + (size_t)t * KVD, KVD * 4);
        memcpy(rows + (size_t)t * LD + QD + KVD, v + (size_t)t * KVD, KVD * 4);
    }
    frt_test_fill(fill, qn, -5, 5);
    frt_buffer *dr = dev_alloc((size_t)PP_MAXN * LD * 4), *dq = dev_alloc(qn * 4), *kc = dev_alloc(cache),
               *vc = dev_alloc(cache);
    must(frt_buffer_write(dr, 0, rows, (size_t)PP_MAXN * LD * 4, g_st), "write");
    must(frt_buffer_write(dq, 0, fill, qn * 4, g_st), "write");
    must(frt_buffer_fill(kc, 0, cache, 0x5A, g_st), "fill");
    must(frt_buffer_fill(vc, 0, cache, 0x5A, g_st), "fill");
    float *r = frt_buffer_ptr(dr), *qo = frt_buffer_ptr(dq);
    if (fp8)
        CHECK_OK(frt_dense_prefill_prep_packed_fp8(g_cs, r, LD, qo, dinv, frt_buffer_ptr(kc), frt_buffer_ptr(vc), ks,
                                                   vs, pos, dn, PP_MAXN, PP_MAXS, PP_NH, PP_NKV, PP_HD, NULL));
    else
        CHECK_OK(frt_dense_prefill_prep_packed(g_cs, r, LD, qo, dinv, frt_buffer_ptr(kc), frt_buffer_ptr(vc), pos, dn,
                                               PP_MAXN, PP_MAXS, PP_NH, PP_NKV, PP_HD, NULL));
    frt_buffer *got[3] = {dq, kc, vc};
    static const char *what[3] = {"q_out (rows < n)", "K cache", "V cache"};
    for (int i = 0; i < 3; i++) {
        const size_t bytes = i == 0 ? (size_t)PP_N * QD * 4 : cache;
        char *a = xmalloc(i == 0 ? qn * 4 : cache), *b = xmalloc(bytes);
        must(frt_buffer_read(got[i], 0, a, i == 0 ? qn * 4 : cache, g_st), "read");
        must(frt_buffer_read(ref[i == 0 ? 0 : i + 2], 0, b, bytes, g_st), "read");
        must(frt_stream_sync(g_st), "sync");
        char name[120];
        snprintf(name, sizeof name, "prefill prep packed%s (ld pad %d): %s == the prep apart", fp8 ? " fp8" : "", pad,
                 what[i]);
        report_same(name, a, b, bytes);
        if (i == 0) CHECK(!memcmp(a + bytes, (const char *)fill + bytes, qn * 4 - bytes));
        free(a);
        free(b);
    }
    /* q16: the roped q as bf16 (q_out NULL), the same caches */
    frt_buffer *q16 = dev_alloc(qn * 2);
    must(frt_buffer_write(dr, 0, rows, (size_t)PP_MAXN * LD * 4, g_st), "write");
    must(frt_buffer_fill(kc, 0, cache, 0x5A, g_st), "fill");
    must(frt_buffer_fill(vc, 0, cache, 0x5A, g_st), "fill");
    must(frt_buffer_fill(q16, 0, qn * 2, 0x5A, g_st), "fill");
    if (fp8)
        CHECK_OK(frt_dense_prefill_prep_packed_fp8(g_cs, r, LD, NULL, dinv, frt_buffer_ptr(kc), frt_buffer_ptr(vc), ks,
                                                   vs, pos, dn, PP_MAXN, PP_MAXS, PP_NH, PP_NKV, PP_HD,
                                                   frt_buffer_ptr(q16)));
    else
        CHECK_OK(frt_dense_prefill_prep_packed(g_cs, r, LD, NULL, dinv, frt_buffer_ptr(kc), frt_buffer_ptr(vc), pos, dn,
                                               PP_MAXN, PP_MAXS, PP_NH, PP_NKV, PP_HD, frt_buffer_ptr(q16)));
    {
        char name[120];
        snprintf(name, sizeof name, "prefill prep packed%s (ld pad %d) q16: bf16 (RNE) of the roped q", fp8 ? " fp8" : "",
                 pad);
        report_flag(name, q16_is_rounded(q16, ref[0], PP_MAXN, PP_N, QD));
        for (int i = 1; i < 3; i++) {
            char *a = xmalloc(cache), *b = xmalloc(cache);
            must(frt_buffer_read(got[i], 0, a, cache, g_st), "read");
            must(frt_buffer_read(ref[i + 2], 0, b, cache, g_st), "read");
            must(frt_stream_sync(g_st), "sync");
            snprintf(name, sizeof name, "prefill prep packed%s (ld pad %d) q16: %s == the prep apart", fp8 ? " fp8" : "",
                     pad, what[i]);
            report_same(name, a, b, cache);
            free(a);
            free(b);
        }
    }
    CHECK_STATUS(frt_dense_prefill_prep_packed(g_cs, r, LD, qo, dinv, frt_buffer_ptr(kc), frt_buffer_ptr(vc), pos, dn,
                                               PP_MAXN, PP_MAXS, PP_NH, PP_NKV, PP_HD, frt_buffer_ptr(q16)),
                 FRT_ERR_INVALID_ARGUMENT); /* q_out and q16 both */
    frt_buffer_free(q16);
    uint16_t *k16 = frt_buffer_ptr(kc), *v16 = frt_buffer_ptr(vc);
    CHECK_STATUS(frt_dense_prefill_prep_packed(g_cs, r, QD + 2 * KVD - 1, qo, dinv, k16, v16, pos, dn, PP_MAXN,
                                               PP_MAXS, PP_NH, PP_NKV, PP_HD, NULL),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_dense_prefill_prep_packed(g_cs, r, LD, NULL, dinv, k16, v16, pos, dn, PP_MAXN, PP_MAXS, PP_NH,
                                               PP_NKV, PP_HD, NULL),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_dense_prefill_prep_packed(g_cs, r, LD, r + LD, dinv, k16, v16, pos, dn, PP_MAXN, PP_MAXS, PP_NH,
                                               PP_NKV, PP_HD, NULL),
                 FRT_ERR_INVALID_ARGUMENT);
    frt_buffer_free(dr);
    frt_buffer_free(dq);
    frt_buffer_free(kc);
    frt_buffer_free(vc);
    free(rows);
    free(fill);
}

/* frt_dense_prefill_prep (fp8 0) / _fp8 (fp8 1): n = 29 of max_n = 37 rows
 * at positions 270.. (the last rows past max_seq 290: no cache row) give
 * the bytes of frt_dense_rope_table on q and k + frt_cuda_kv_append(_fp8)
 * over the same rows; rows past n are not touched. */
static void test_prefill_prep(int fp8)
{
    enum { MAXN = PP_MAXN, N = PP_N, NH = PP_NH, NKV = PP_NKV, HD = PP_HD, MAXS = PP_MAXS, START = 270 };
    const size_t qn = (size_t)MAXN * NH * HD, kn = (size_t)MAXN * NKV * HD, row = (size_t)NKV * HD;
    const size_t cache = (size_t)MAXS * row * (fp8 ? 1 : 2);
    float *q = xmalloc(qn * 4), *k = xmalloc(kn * 4), *v = xmalloc(kn * 4), inv[HD / 2];
    const float sc[2 * NKV] = {0.0037f, 0.61f, 0.023f, 1.7f};
    frt_test_fill(q, qn, -2, 2);
    frt_test_fill(k, kn, -2, 2);
    frt_test_fill(v, kn, -2, 2);
    frt_rope_inv_freq_llama3(inv, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    const int32_t dyn[2] = {START, N};
    frt_buffer *dinv = dev_alloc(sizeof inv), *ddyn = dev_alloc(sizeof dyn), *dsc = dev_alloc(sizeof sc);
    frt_buffer *bufs[2][5]; /* q, k, v, k cache, v cache: fused, unfused */
    for (int u = 0; u < 2; u++) {
        bufs[u][0] = dev_alloc(qn * 4), bufs[u][1] = dev_alloc(kn * 4), bufs[u][2] = dev_alloc(kn * 4);
        bufs[u][3] = dev_alloc(cache), bufs[u][4] = dev_alloc(cache);
        must(frt_buffer_write(bufs[u][0], 0, q, qn * 4, g_st), "write");
        must(frt_buffer_write(bufs[u][1], 0, k, kn * 4, g_st), "write");
        must(frt_buffer_write(bufs[u][2], 0, v, kn * 4, g_st), "write");
        must(frt_buffer_fill(bufs[u][3], 0, cache, 0x5A, g_st), "fill");
        must(frt_buffer_fill(bufs[u][4], 0, cache, 0x5A, g_st), "fill");
    }
    must(frt_buffer_write(dinv, 0, inv, sizeof inv, g_st), "write");
    must(frt_buffer_write(ddyn, 0, dyn, sizeof dyn, g_st), "write");
    must(frt_buffer_write(dsc, 0, sc, sizeof sc, g_st), "write");
    const int32_t *pos = frt_buffer_ptr(ddyn), *dn = pos + 1;
    const float *ks = frt_buffer_ptr(dsc), *vs = ks + NKV, *dinvp = frt_buffer_ptr(dinv);
#define BP(u, i) frt_buffer_ptr(bufs[u][i])
    if (fp8)
        CHECK_OK(frt_dense_prefill_prep_fp8(g_cs, BP(0, 0), BP(0, 1), BP(0, 2), dinvp, BP(0, 3), BP(0, 4), ks, vs, pos,
                                            dn, MAXN, MAXS, NH, NKV, HD, NULL));
    else
        CHECK_OK(frt_dense_prefill_prep(g_cs, BP(0, 0), BP(0, 1), BP(0, 2), dinvp, BP(0, 3), BP(0, 4), pos, dn, MAXN,
                                        MAXS, NH, NKV, HD, NULL));
    CHECK_OK(frt_dense_rope_table(g_cs, BP(1, 0), dinvp, pos, dn, MAXN, NH, HD));
    CHECK_OK(frt_dense_rope_table(g_cs, BP(1, 1), dinvp, pos, dn, MAXN, NKV, HD));
    if (fp8)
        CHECK_OK(frt_cuda_kv_append_fp8(g_cs, BP(1, 3), BP(1, 4), BP(1, 1), BP(1, 2), ks, vs, pos, dn, MAXN, MAXS, NKV,
                                        HD));
    else
        CHECK_OK(frt_cuda_kv_append(g_cs, BP(1, 3), BP(1, 4), BP(1, 1), BP(1, 2), FRT_CUDA_F32, pos, dn, MAXN, MAXS,
                                    NKV, HD));
#undef BP
    static const char *what[5] = {"q (roped; rows past n untouched)", "k (roped)", "v", "K cache", "V cache"};
    for (int i = 0; i < 5; i++) {
        const size_t bytes = i == 0 ? qn * 4 : i < 3 ? kn * 4 : cache;
        char *a = xmalloc(bytes), *b = xmalloc(bytes);
        must(frt_buffer_read(bufs[0][i], 0, a, bytes, g_st), "read");
        must(frt_buffer_read(bufs[1][i], 0, b, bytes, g_st), "read");
        must(frt_stream_sync(g_st), "sync");
        char name[120];
        snprintf(name, sizeof name, "prefill prep%s: %s == rope x 2 + kv append", fp8 ? " fp8" : "", what[i]);
        report_same(name, a, b, bytes);
        if (i == 0) CHECK(!memcmp(a + (size_t)N * NH * HD * 4, (const char *)q + (size_t)N * NH * HD * 4,
                                  (size_t)(MAXN - N) * NH * HD * 4));
        free(a);
        free(b);
    }
    { /* q16: the roped q as bf16 into its own buffer, q untouched, the same caches */
        frt_buffer *q2 = dev_alloc(qn * 4), *k2 = dev_alloc(kn * 4), *kc2 = dev_alloc(cache), *vc2 = dev_alloc(cache);
        frt_buffer *q16 = dev_alloc(qn * 2);
        must(frt_buffer_write(q2, 0, q, qn * 4, g_st), "write");
        must(frt_buffer_write(k2, 0, k, kn * 4, g_st), "write");
        must(frt_buffer_fill(kc2, 0, cache, 0x5A, g_st), "fill");
        must(frt_buffer_fill(vc2, 0, cache, 0x5A, g_st), "fill");
        must(frt_buffer_fill(q16, 0, qn * 2, 0x5A, g_st), "fill");
        float *q2p = frt_buffer_ptr(q2), *k2p = frt_buffer_ptr(k2), *vp = frt_buffer_ptr(bufs[1][2]);
        if (fp8)
            CHECK_OK(frt_dense_prefill_prep_fp8(g_cs, q2p, k2p, vp, dinvp, frt_buffer_ptr(kc2), frt_buffer_ptr(vc2), ks,
                                                vs, pos, dn, MAXN, MAXS, NH, NKV, HD, frt_buffer_ptr(q16)));
        else
            CHECK_OK(frt_dense_prefill_prep(g_cs, q2p, k2p, vp, dinvp, frt_buffer_ptr(kc2), frt_buffer_ptr(vc2), pos,
                                            dn, MAXN, MAXS, NH, NKV, HD, frt_buffer_ptr(q16)));
        char name[120];
        snprintf(name, sizeof name, "prefill prep%s q16: bf16 (RNE) of the roped q", fp8 ? " fp8" : "");
        report_flag(name, q16_is_rounded(q16, bufs[1][0], MAXN, N, (size_t)NH * HD));
        frt_buffer *pair[3][2] = {{q2, NULL}, {kc2, bufs[1][3]}, {vc2, bufs[1][4]}};
        static const char *w2[3] = {"q untouched", "K cache", "V cache"};
        for (int i = 0; i < 3; i++) {
            const size_t bytes = i == 0 ? qn * 4 : cache;
            char *a = xmalloc(bytes), *b = xmalloc(bytes);
            must(frt_buffer_read(pair[i][0], 0, a, bytes, g_st), "read");
            if (pair[i][1]) must(frt_buffer_read(pair[i][1], 0, b, bytes, g_st), "read");
            else memcpy(b, q, bytes);
            must(frt_stream_sync(g_st), "sync");
            snprintf(name, sizeof name, "prefill prep%s q16: %s", fp8 ? " fp8" : "", w2[i]);
            report_same(name, a, b, bytes);
            free(a);
            free(b);
        }
        CHECK_STATUS(frt_dense_prefill_prep(g_cs, q2p, k2p, vp, dinvp, frt_buffer_ptr(kc2), frt_buffer_ptr(vc2), pos,
                                            dn, MAXN, MAXS, NH, NKV, HD, (uint16_t *)(void *)(q2p + 8)),
                     FRT_ERR_INVALID_ARGUMENT); /* q16 inside q */
        frt_buffer *fl[5] = {q2, k2, kc2, vc2, q16};
        for (int i = 0; i < 5; i++) frt_buffer_free(fl[i]);
    }
    CHECK_STATUS(frt_dense_prefill_prep(g_cs, frt_buffer_ptr(bufs[0][0]), frt_buffer_ptr(bufs[0][1]),
                                        frt_buffer_ptr(bufs[0][2]), dinvp, frt_buffer_ptr(bufs[0][3]),
                                        frt_buffer_ptr(bufs[0][4]), pos, dn, 0, MAXS, NH, NKV, HD, NULL),
                 FRT_ERR_INVALID_ARGUMENT);
    test_prefill_prep_packed(fp8, 4, q, k, v, dinvp, ks, vs, pos, dn, bufs[0]);
    test_prefill_prep_packed(fp8, 5, q, k, v, dinvp, ks, vs, pos, dn, bufs[0]);
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 5; i++) frt_buffer_free(bufs[u][i]);
    frt_buffer_free(dinv);
    frt_buffer_free(ddyn);
    frt_buffer_free(dsc);
    free(q);
    free(k);
    free(v);
}

/* The K or V cache row `row` of a device cache [max_seq, nkv * hd], as
 * floats: bf16 widened, or (sc: the host's per-head scales [nkv]) E4M3
 * codes decoded times their head's scale. */
static void cache_row(frt_buffer *c, int row, int nkv, int hd, const float *sc, float *out)
{
    const int kvd = nkv * hd;
    const size_t eb = sc ? 1 : 2;
    unsigned char *h = xmalloc((size_t)kvd * eb);
    must(frt_buffer_read(c, (size_t)row * kvd * eb, h, (size_t)kvd * eb, g_st), "read");
    must(frt_stream_sync(g_st), "sync");
    if (sc)
        frt_fp8_dequantize_rows(out, h, sc, nkv, nkv, hd);
    else
        for (int i = 0; i < kvd; i++) out[i] = frt_bf16_to_f32(((const uint16_t *)h)[i]);
    free(h);
}

/* qwen3's preps with the q / k RMSNorm (frt_dense_decode_prep_norm,
 * frt_dense_prefill_prep_packed_norm, their _fp8 forms over E4M3 caches
 * with per-head scales) against frt_cuda_rmsnorm on q and k followed by the
 * prep without norms: q within 1e-6 norm-wise (the fp64 sum of squares in
 * another order), the K and V rows written within 1e-3 (bf16) / 3e-2 (E4M3
 * decoded: a rounding may land one code apart; the count of rows with a
 * differing element is printed); decode at positions 5 and 299 of max_seq
 * 300 and at 300 (no row written); the prefill over rows packed as one
 * GEMM's, n = 29 of 37 at 260; head_dim 96 refused (FRT_ERR_UNSUPPORTED). */
static void test_prep_norm(int hd, int fp8)
{
    enum { NH = 4, NKV = 2, MAXS = 300, MAXN = 37, N = 29, START = 260 };
    const int qd = NH * hd, kvd = NKV * hd, ld = qd + 2 * kvd + 3;
    const size_t cache = (size_t)MAXS * kvd * (fp8 ? 1 : 2);
    const float sc[2 * NKV] = {0.011f, 0.027f, 0.019f, 0.007f}; /* K, V scales per head */
    frt_buffer *dsc = dev_alloc(sizeof sc);
    must(frt_buffer_write(dsc, 0, sc, sizeof sc, g_st), "write");
    const float *ks = frt_buffer_ptr(dsc), *vs = ks + NKV;
    float *rows = xmalloc((size_t)MAXN * ld * 4), *nw = xmalloc((size_t)2 * hd * 4), *inv = xmalloc((size_t)hd / 2 * 4);
    frt_test_fill(rows, (size_t)MAXN * ld, -2, 2);
    frt_test_fill(nw, (size_t)2 * hd, 0.5, 1.5);
    frt_rope_inv_freq_default(inv, hd, 1000000.0f); /* qwen3: plain RoPE */
    frt_buffer *dr = dev_alloc((size_t)MAXN * ld * 4), *dnw = dev_alloc((size_t)2 * hd * 4),
               *dinv = dev_alloc((size_t)hd / 2 * 4), *ddyn = dev_alloc(8), *dq = dev_alloc((size_t)MAXN * qd * 4);
    frt_buffer *apart[3], *kc[2], *vc[2];
    for (int u = 0; u < 2; u++) {
        kc[u] = dev_alloc(cache), vc[u] = dev_alloc(cache);
        must(frt_buffer_fill(kc[u], 0, cache, 0x5A, g_st), "fill");
        must(frt_buffer_fill(vc[u], 0, cache, 0x5A, g_st), "fill");
    }
    const int widths[3] = {qd, kvd, kvd}, offs[3] = {0, qd, qd + kvd};
    for (int i = 0; i < 3; i++) { /* the rows apart: q, k, v [MAXN, width] */
        float *h = xmalloc((size_t)MAXN * widths[i] * 4);
        for (int t = 0; t < MAXN; t++) memcpy(h + (size_t)t * widths[i], rows + (size_t)t * ld + offs[i], widths[i] * 4);
        apart[i] = dev_alloc((size_t)MAXN * widths[i] * 4);
        must(frt_buffer_write(apart[i], 0, h, (size_t)MAXN * widths[i] * 4, g_st), "write");
        free(h);
    }
    must(frt_buffer_write(dr, 0, rows, (size_t)MAXN * ld * 4, g_st), "write");
    must(frt_buffer_write(dnw, 0, nw, (size_t)2 * hd * 4, g_st), "write");
    must(frt_buffer_write(dinv, 0, inv, (size_t)hd / 2 * 4, g_st), "write");
    const float *qn = frt_buffer_ptr(dnw), *kn = qn + hd, *di = frt_buffer_ptr(dinv), eps = 1e-6f;
    const int32_t *pos = frt_buffer_ptr(ddyn), *dn = pos + 1;
    float *A[3] = {frt_buffer_ptr(apart[0]), frt_buffer_ptr(apart[1]), frt_buffer_ptr(apart[2])};
    float *wq = xmalloc((size_t)MAXN * qd * 4), *gq = xmalloc((size_t)MAXN * qd * 4);
    float *wr = xmalloc((size_t)kvd * 4), *gr = xmalloc((size_t)kvd * 4);
    double qerr = 0, cerr = 0;
    /* pass 0: the prefill (reference on the rows apart, then the packed norm prep); pass 1..3: decode of
     * row 0 at 5, 299, 300 */
    for (int pass = 0; pass < 4; pass++) {
        const int start = pass == 0 ? START : pass == 1 ? 5 : pass == 2 ? 299 : 300;
        const int32_t dyn[2] = {start, N};
        must(frt_buffer_write(ddyn, 0, dyn, sizeof dyn, g_st), "write");
        for (int i = 0; i < 3; i++) { /* fresh rows apart (the reference ropes them in place) */
            float *h = xmalloc((size_t)MAXN * widths[i] * 4);
            for (int t = 0; t < MAXN; t++)
                memcpy(h + (size_t)t * widths[i], rows + (size_t)t * ld + offs[i], widths[i] * 4);
            must(frt_buffer_write(apart[i], 0, h, (size_t)MAXN * widths[i] * 4, g_st), "write");
            free(h);
        }
        const int rn = pass ? 1 : MAXN;
        char *before = NULL;
        if (pass == 3) { /* position 300 = max_seq: no cache row may change */
            before = xmalloc(2 * cache);
            must(frt_buffer_read(kc[1], 0, before, cache, g_st), "read");
            must(frt_buffer_read(vc[1], 0, before + cache, cache, g_st), "read");
        }
        CHECK_OK(frt_cuda_rmsnorm(g_cs, A[0], FRT_CUDA_F32, A[0], FRT_CUDA_F32, qn, pass ? NULL : dn, rn, NH, hd, eps, 0));
        CHECK_OK(frt_cuda_rmsnorm(g_cs, A[1], FRT_CUDA_F32, A[1], FRT_CUDA_F32, kn, pass ? NULL : dn, rn, NKV, hd, eps, 0));
        if (pass) {
            if (fp8)
                CHECK_OK(frt_dense_decode_prep_fp8(g_cs, A[0], A[1], A[2], di, frt_buffer_ptr(kc[0]),
                                                   frt_buffer_ptr(vc[0]), ks, vs, pos, MAXS, NH, NKV, hd, NULL));
            else
                CHECK_OK(frt_dense_decode_prep(g_cs, A[0], A[1], A[2], di, frt_buffer_ptr(kc[0]),
                                               frt_buffer_ptr(vc[0]), pos, MAXS, NH, NKV, hd, NULL));
            must(frt_buffer_write(dq, 0, rows, (size_t)qd * 4, g_st), "write"); /* row 0's q, in place */
            float *k1 = xmalloc((size_t)kvd * 4), *v1 = xmalloc((size_t)kvd * 4);
            memcpy(k1, rows + qd, kvd * 4);
            memcpy(v1, rows + qd + kvd, kvd * 4);
            must(frt_buffer_write(dr, 0, k1, kvd * 4, g_st), "write"); /* scratch: k at dr, v after it */
            must(frt_buffer_write(dr, kvd * 4, v1, kvd * 4, g_st), "write");
            free(k1), free(v1);
            float *dk = frt_buffer_ptr(dr);
            if (fp8)
                CHECK_OK(frt_dense_decode_prep_norm_fp8(g_cs, frt_buffer_ptr(dq), dk, dk + kvd, qn, kn, eps, di,
                                                        frt_buffer_ptr(kc[1]), frt_buffer_ptr(vc[1]), ks, vs, pos,
                                                        MAXS, NH, NKV, hd));
            else
                CHECK_OK(frt_dense_decode_prep_norm(g_cs, frt_buffer_ptr(dq), dk, dk + kvd, qn, kn, eps, di,
                                                    frt_buffer_ptr(kc[1]), frt_buffer_ptr(vc[1]), pos, MAXS, NH, NKV,
                                                    hd));
        } else if (fp8) {
            CHECK_OK(frt_dense_prefill_prep_fp8(g_cs, A[0], A[1], A[2], di, frt_buffer_ptr(kc[0]),
                                                frt_buffer_ptr(vc[0]), ks, vs, pos, dn, MAXN, MAXS, NH, NKV, hd, NULL));
            CHECK_OK(frt_dense_prefill_prep_packed_norm_fp8(g_cs, frt_buffer_ptr(dr), ld, frt_buffer_ptr(dq), qn, kn,
                                                            eps, di, frt_buffer_ptr(kc[1]), frt_buffer_ptr(vc[1]), ks,
                                                            vs, pos, dn, MAXN, MAXS, NH, NKV, hd));
        } else {
            CHECK_OK(frt_dense_prefill_prep(g_cs, A[0], A[1], A[2], di, frt_buffer_ptr(kc[0]), frt_buffer_ptr(vc[0]),
                                            pos, dn, MAXN, MAXS, NH, NKV, hd, NULL));
            CHECK_OK(frt_dense_prefill_prep_packed_norm(g_cs, frt_buffer_ptr(dr), ld, frt_buffer_ptr(dq), qn, kn, eps,
                                                        di, frt_buffer_ptr(kc[1]), frt_buffer_ptr(vc[1]), pos, dn,
                                                        MAXN, MAXS, NH, NKV, hd));
        }
        const int nq = pass ? 1 : N;
        must(frt_buffer_read(apart[0], 0, wq, (size_t)nq * qd * 4, g_st), "read");
        must(frt_buffer_read(dq, 0, gq, (size_t)nq * qd * 4, g_st), "read");
        must(frt_stream_sync(g_st), "sync");
        const double e = frt_test_rel_err(gq, wq, (size_t)nq * qd);
        if (e > qerr) qerr = e;
        int differ = 0;
        for (int t = 0; t < nq && start + t < MAXS; t++)
            for (int kv = 0; kv < 2; kv++) {
                const float *hs = fp8 ? sc + kv * NKV : NULL;
                cache_row(kv ? vc[0] : kc[0], start + t, NKV, hd, hs, wr);
                cache_row(kv ? vc[1] : kc[1], start + t, NKV, hd, hs, gr);
                const double ce = frt_test_rel_err(gr, wr, kvd);
                if (ce > cerr) cerr = ce;
                differ += memcmp(gr, wr, (size_t)kvd * 4) != 0;
            }
        if (before) {
            char *after = xmalloc(2 * cache);
            must(frt_buffer_read(kc[1], 0, after, cache, g_st), "read");
            must(frt_buffer_read(vc[1], 0, after + cache, cache, g_st), "read");
            must(frt_stream_sync(g_st), "sync");
            CHECK_MSG(!memcmp(before, after, 2 * cache), "prep norm hd %d: a cache row written at max_seq", hd);
            free(before), free(after);
        }
        printf("  prep norm hd %d%s %s at %d: q rel %.2e, cache rows differing in some element: %d\n", hd,
               fp8 ? " fp8" : "", pass ? "decode" : "prefill packed", start, e, differ);
    }
    char name[120];
    snprintf(name, sizeof name, "prep norm hd %d%s: q vs rmsnorm x 2 + prep", hd, fp8 ? " fp8" : "");
    report(name, qerr, 1e-6);
    snprintf(name, sizeof name, "prep norm hd %d%s: K / V rows vs rmsnorm x 2 + prep", hd, fp8 ? " fp8" : "");
    report(name, cerr, fp8 ? 3e-2 : 1e-3);
    CHECK_STATUS(frt_dense_decode_prep_norm(g_cs, frt_buffer_ptr(dq), A[1], A[2], qn, kn, eps, di,
                                            frt_buffer_ptr(kc[1]), frt_buffer_ptr(vc[1]), pos, MAXS, NH * hd / 96,
                                            NKV * hd / 96 > 0 ? NKV * hd / 96 : 1, 96),
                 FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_dense_decode_prep_norm(g_cs, frt_buffer_ptr(dq), A[1], A[2], NULL, kn, eps, di,
                                            frt_buffer_ptr(kc[1]), frt_buffer_ptr(vc[1]), pos, MAXS, NH, NKV, hd),
                 FRT_ERR_INVALID_ARGUMENT);
    frt_buffer *all[] = {dr, dnw, dinv, ddyn, dq, apart[0], apart[1], apart[2], kc[0], kc[1], vc[0], vc[1], dsc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) frt_buffer_free(all[i]);
    free(rows), free(nw), free(inv), free(wq), free(gq), free(wr), free(gr);
}

/* The batched preps' branches: nb caches of `cache` bytes each for K and V
 * (filled with 0x5A) and the host copy of their device tables: tab[b] the
 * K cache, tab[nb + b] the V cache, tab[2 nb + b] branch b's position in
 * dpos. */
static void branch_caches(frt_buffer **kc, frt_buffer **vc, void **tab, int nb, size_t cache, frt_buffer *dpos)
{
    for (int b = 0; b < nb; b++) {
        kc[b] = dev_alloc(cache), vc[b] = dev_alloc(cache);
        must(frt_buffer_fill(kc[b], 0, cache, 0x5A, g_st), "fill");
        must(frt_buffer_fill(vc[b], 0, cache, 0x5A, g_st), "fill");
        tab[b] = frt_buffer_ptr(kc[b]), tab[nb + b] = frt_buffer_ptr(vc[b]);
        tab[2 * nb + b] = (int32_t *)frt_buffer_ptr(dpos) + b;
    }
}

/* frt_dense_decode_prep_norm_batch (_fp8): 3 branches at 5, 299 and 300 of
 * max_seq 300 (own caches, own positions) give the bytes of
 * frt_dense_decode_prep_norm (_fp8) on each branch alone: q, both caches;
 * then the refusals (no norm weight, head_dim 96, no FP8 scales). */
static void test_prep_norm_batch(int fp8)
{
    enum { NB = 3, NH = 4, NKV = 2, HD = 128, MAXS = 300 };
    const int pos[NB] = {5, 299, 300}, qd = NH * HD, kvd = NKV * HD;
    const size_t cache = (size_t)MAXS * kvd * (fp8 ? 1 : 2);
    const float sc[2 * NKV] = {0.011f, 0.027f, 0.019f, 0.007f};
    float *q = xmalloc((size_t)NB * qd * 4), *kv = xmalloc((size_t)NB * 2 * kvd * 4), *nw = xmalloc(2 * HD * 4),
          inv[HD / 2];
    frt_test_fill(q, (size_t)NB * qd, -2, 2);
    frt_test_fill(kv, (size_t)NB * 2 * kvd, -2, 2);
    frt_test_fill(nw, 2 * HD, 0.5, 1.5);
    frt_rope_inv_freq_default(inv, HD, 1000000.0f);
    frt_buffer *dq = dev_alloc((size_t)NB * qd * 4), *dk = dev_alloc((size_t)NB * kvd * 4),
               *dv = dev_alloc((size_t)NB * kvd * 4), *dnw = dev_alloc(2 * HD * 4), *dinv = dev_alloc(sizeof inv),
               *dpos = dev_alloc(sizeof pos), *dsc = dev_alloc(sizeof sc), *tabs = dev_alloc(3 * NB * sizeof(void *));
    frt_buffer *kc[NB], *vc[NB], *rq = dev_alloc((size_t)qd * 4), *rk = dev_alloc((size_t)kvd * 4), *rkc = dev_alloc(cache),
               *rvc = dev_alloc(cache);
    void *tab[3 * NB];
    branch_caches(kc, vc, tab, NB, cache, dpos);
    must(frt_buffer_write(dq, 0, q, (size_t)NB * qd * 4, g_st), "write");
    must(frt_buffer_write(dk, 0, kv, (size_t)NB * kvd * 4, g_st), "write");
    must(frt_buffer_write(dv, 0, kv + (size_t)NB * kvd, (size_t)NB * kvd * 4, g_st), "write");
    must(frt_buffer_write(dnw, 0, nw, 2 * HD * 4, g_st), "write");
    must(frt_buffer_write(dinv, 0, inv, sizeof inv, g_st), "write");
    must(frt_buffer_write(dpos, 0, pos, sizeof pos, g_st), "write");
    must(frt_buffer_write(dsc, 0, sc, sizeof sc, g_st), "write");
    must(frt_buffer_write(tabs, 0, tab, sizeof tab, g_st), "write");
    const float *qn = frt_buffer_ptr(dnw), *kn = qn + HD, *di = frt_buffer_ptr(dinv), *ks = frt_buffer_ptr(dsc),
                *vs = ks + NKV;
    void **t = frt_buffer_ptr(tabs);
    const int32_t *const *tp = (const int32_t *const *)(t + 2 * NB);
    if (fp8)
        CHECK_OK(frt_dense_decode_prep_norm_batch_fp8(g_cs, frt_buffer_ptr(dq), frt_buffer_ptr(dk), frt_buffer_ptr(dv),
                                                      qn, kn, 1e-6f, di, (uint8_t *const *)t,
                                                      (uint8_t *const *)(t + NB), ks, vs, tp, NB, MAXS, NH, NKV, HD));
    else
        CHECK_OK(frt_dense_decode_prep_norm_batch(g_cs, frt_buffer_ptr(dq), frt_buffer_ptr(dk), frt_buffer_ptr(dv), qn,
                                                  kn, 1e-6f, di, (uint16_t *const *)t, (uint16_t *const *)(t + NB), tp,
                                                  NB, MAXS, NH, NKV, HD));
    char *a = xmalloc(cache), *c = xmalloc(cache);
    int same = 1;
    for (int b = 0; b < NB; b++) {
        must(frt_buffer_write(rq, 0, q + (size_t)b * qd, (size_t)qd * 4, g_st), "write");
        must(frt_buffer_write(rk, 0, kv + (size_t)b * kvd, (size_t)kvd * 4, g_st), "write");
        must(frt_buffer_fill(rkc, 0, cache, 0x5A, g_st), "fill");
        must(frt_buffer_fill(rvc, 0, cache, 0x5A, g_st), "fill");
        const float *vb = (const float *)frt_buffer_ptr(dv) + (size_t)b * kvd;
        const int32_t *pb = (const int32_t *)frt_buffer_ptr(dpos) + b;
        if (fp8)
            CHECK_OK(frt_dense_decode_prep_norm_fp8(g_cs, frt_buffer_ptr(rq), frt_buffer_ptr(rk), vb, qn, kn, 1e-6f,
                                                    di, frt_buffer_ptr(rkc), frt_buffer_ptr(rvc), ks, vs, pb, MAXS, NH,
                                                    NKV, HD));
        else
            CHECK_OK(frt_dense_decode_prep_norm(g_cs, frt_buffer_ptr(rq), frt_buffer_ptr(rk), vb, qn, kn, 1e-6f, di,
                                                frt_buffer_ptr(rkc), frt_buffer_ptr(rvc), pb, MAXS, NH, NKV, HD));
        must(frt_buffer_read(dq, (size_t)b * qd * 4, a, (size_t)qd * 4, g_st), "read");
        must(frt_buffer_read(rq, 0, c, (size_t)qd * 4, g_st), "read");
        must(frt_stream_sync(g_st), "sync");
        same &= !memcmp(a, c, (size_t)qd * 4);
        for (int k2 = 0; k2 < 2; k2++) {
            must(frt_buffer_read(k2 ? vc[b] : kc[b], 0, a, cache, g_st), "read");
            must(frt_buffer_read(k2 ? rvc : rkc, 0, c, cache, g_st), "read");
            must(frt_stream_sync(g_st), "sync");
            same &= !memcmp(a, c, cache);
        }
    }
    report_flag(fp8 ? "prep norm batch fp8: q, caches == the one-sequence prep per branch"
                    : "prep norm batch: q, caches == the one-sequence prep per branch",
                same);
    /* refusals before any launch: no norm weight, head_dim 96, no scales (FP8) */
    float *pq = frt_buffer_ptr(dq), *pk = frt_buffer_ptr(dk), *pv = frt_buffer_ptr(dv);
    if (fp8) {
        uint8_t *const *t8k = (uint8_t *const *)t, *const *t8v = (uint8_t *const *)(t + NB);
        CHECK_STATUS(frt_dense_decode_prep_norm_batch_fp8(g_cs, pq, pk, pv, NULL, kn, 1e-6f, di, t8k, t8v, ks, vs, tp,
                                                          NB, MAXS, NH, NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_dense_decode_prep_norm_batch_fp8(g_cs, pq, pk, pv, qn, kn, 1e-6f, di, t8k, t8v, NULL, vs, tp,
                                                          NB, MAXS, NH, NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_dense_decode_prep_norm_fp8(g_cs, pq, pk, pv, qn, kn, 1e-6f, di, frt_buffer_ptr(rkc),
                                                    frt_buffer_ptr(rvc), ks, NULL, frt_buffer_ptr(dpos), MAXS, NH,
                                                    NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
    } else {
        uint16_t *const *t16k = (uint16_t *const *)t, *const *t16v = (uint16_t *const *)(t + NB);
        CHECK_STATUS(frt_dense_decode_prep_norm_batch(g_cs, pq, pk, pv, NULL, kn, 1e-6f, di, t16k, t16v, tp, NB, MAXS,
                                                      NH, NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_dense_decode_prep_norm_batch(g_cs, pq, pk, pv, qn, kn, 1e-6f, di, t16k, t16v, tp, NB, MAXS,
                                                      NH * HD / 96, 1, 96),
                     FRT_ERR_UNSUPPORTED);
    }
    frt_buffer *all[] = {dq, dk, dv, dnw, dinv, dpos, dsc, tabs, rq, rk, rkc, rvc, kc[0], kc[1], kc[2], vc[0], vc[1], vc[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) frt_buffer_free(all[i]);
    free(q), free(kv), free(nw), free(a), free(c);
}

/* frt_dense_decode_prep_batch (fp8 0) / _batch_fp8 (fp8 1, per-head scales
 * != 1 over several binades, values past 448 x scale saturating): branch b
 * (own caches, own position) gives the bytes of frt_dense_rope_table on q
 * and k + frt_cuda_kv_append(_fp8) on it alone, and frt_dense_decode_prep
 * (_fp8) of one sequence the same bytes; a position past max_seq writes no
 * cache row; FP8 codes equal the CPU codec's on the roped rows. With bias
 * (qwen2's q, k, v biases, random): the preps given the biases against the
 * three launches on q + b, k + b, v + b (the f32 sums frt_dense_bias_add
 * stores, computed here on the host). */
static void test_prep_batch(int fp8, int with_bias)
{
    enum { NB = 3, NH = 8, NKV = 2, HD = 128, MAXS = 300 };
    const int pos[NB] = {5, 299, 300};
    const size_t qn = (size_t)NB * NH * HD, kn = (size_t)NB * NKV * HD, row = (size_t)NKV * HD;
    const size_t cache = (size_t)MAXS * row * (fp8 ? 1 : 2);
    float *q = xmalloc(qn * 4), *k = xmalloc(kn * 4), *v = xmalloc(kn * 4), inv[HD / 2];
    const float ks[NKV] = {0.0037f, 0.61f}, vs[NKV] = {0.023f, 1.7f}; /* 448 x 0.0037 = 1.66 < 2: some K codes saturate */
    frt_test_fill(q, qn, -2, 2);
    frt_test_fill(k, kn, -2, 2);
    frt_test_fill(v, kn, -2, 2);
    frt_rope_inv_freq_llama3(inv, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    /* the reference's inputs (qr, kr0, vr: q, k, v plus the biases when with_bias) */
    enum { BN = NH * HD + 2 * NKV * HD };
    float *bias = xmalloc(BN * 4), *qr = xmalloc(qn * 4), *kr0 = xmalloc(kn * 4), *vr = xmalloc(kn * 4);
    frt_test_fill(bias, BN, -1, 1);
    for (size_t i = 0; i < qn; i++) qr[i] = with_bias ? q[i] + bias[i % (NH * HD)] : q[i];
    for (size_t i = 0; i < kn; i++) {
        kr0[i] = with_bias ? k[i] + bias[NH * HD + i % row] : k[i];
        vr[i] = with_bias ? v[i] + bias[NH * HD + row + i % row] : v[i];
    }
    frt_buffer *dbias = dev_alloc(BN * 4), *dvr = dev_alloc(kn * 4);
    must(frt_buffer_write(dbias, 0, bias, BN * 4, g_st), "write");
    must(frt_buffer_write(dvr, 0, vr, kn * 4, g_st), "write");
    const float *db = frt_buffer_ptr(dbias);
    const frt_dense_qkv_bias qkvb = {db, db + NH * HD, db + NH * HD + row};
    frt_buffer *dq = dev_alloc(qn * 4), *dk = dev_alloc(kn * 4), *dv = dev_alloc(kn * 4), *dinv = dev_alloc(sizeof inv);
    frt_buffer *dpos = dev_alloc(sizeof pos), *tabs = dev_alloc(3 * NB * sizeof(void *)), *kc[NB], *vc[NB];
    frt_buffer *rq = dev_alloc(qn * 4), *rk = dev_alloc(kn * 4), *rkc = dev_alloc(cache), *rvc = dev_alloc(cache);
    frt_buffer *dsc = dev_alloc(2 * NKV * sizeof(float));
    void *tab[3 * NB];
    branch_caches(kc, vc, tab, NB, cache, dpos);
    must(frt_buffer_write(dq, 0, q, qn * 4, g_st), "write");
    must(frt_buffer_write(dk, 0, k, kn * 4, g_st), "write");
    must(frt_buffer_write(dv, 0, v, kn * 4, g_st), "write");
    must(frt_buffer_write(dinv, 0, inv, sizeof inv, g_st), "write");
    must(frt_buffer_write(dpos, 0, pos, sizeof pos, g_st), "write");
    must(frt_buffer_write(tabs, 0, tab, sizeof tab, g_st), "write");
    must(frt_buffer_write(dsc, 0, ks, sizeof ks, g_st), "write");
    must(frt_buffer_write(dsc, sizeof ks, vs, sizeof vs, g_st), "write");
    const prep_kv pk = {fp8, frt_buffer_ptr(dsc), (const float *)frt_buffer_ptr(dsc) + NKV, with_bias ? &qkvb : NULL};
    void **t = frt_buffer_ptr(tabs);
    CHECK_OK(prep_batch(&pk, frt_buffer_ptr(dq), frt_buffer_ptr(dk), frt_buffer_ptr(dv), frt_buffer_ptr(dinv), t, NB,
                        MAXS, NH, NKV, HD));
    float *got = xmalloc(qn * 4), *want = xmalloc(qn * 4), *kr = xmalloc(kn * 4);
    unsigned char *cg = xmalloc(cache), *cw = xmalloc(cache), *cv = xmalloc(cache);
    must(frt_buffer_read(dq, 0, got, qn * 4, g_st), "read");
    must(frt_buffer_read(dk, 0, kr, kn * 4, g_st), "read");
    must(frt_stream_sync(g_st), "sync");
    /* pass 0: each branch through the three unbatched launches; pass 1:
     * through the one-sequence prep (one launch) */
    int same[2] = {1, 1}, cpu_same = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < NB; b++) {
            const int32_t *ps = (const int32_t *)frt_buffer_ptr(dpos) + b;
            /* pass 0 (the launches without bias) on the biased inputs, pass 1 (the prep given the biases) on
             * the raw ones */
            float *vb = (float *)frt_buffer_ptr(pass ? dv : dvr) + (size_t)b * row;
            must(frt_buffer_write(rq, 0, (pass ? q : qr) + (size_t)b * NH * HD, (size_t)NH * HD * 4, g_st), "write");
            must(frt_buffer_write(rk, 0, (pass ? k : kr0) + (size_t)b * row, row * 4, g_st), "write");
            must(frt_buffer_fill(rkc, 0, cache, 0x5A, g_st), "fill");
            must(frt_buffer_fill(rvc, 0, cache, 0x5A, g_st), "fill");
            if (pass)
                CHECK_OK(prep_one(&pk, frt_buffer_ptr(rq), frt_buffer_ptr(rk), vb, frt_buffer_ptr(dinv),
                                  frt_buffer_ptr(rkc), frt_buffer_ptr(rvc), ps, MAXS, NH, NKV, HD));
            else
                prep_unfused(&pk, frt_buffer_ptr(rq), frt_buffer_ptr(rk), vb, frt_buffer_ptr(dinv),
                             frt_buffer_ptr(rkc), frt_buffer_ptr(rvc), ps, MAXS, NH, NKV, HD);
            must(frt_buffer_read(rq, 0, want, (size_t)NH * HD * 4, g_st), "read");
            must(frt_stream_sync(g_st), "sync");
            same[pass] &= !memcmp(got + (size_t)b * NH * HD, want, (size_t)NH * HD * 4);
            must(frt_buffer_read(rk, 0, want, row * 4, g_st), "read"); /* k roped in place */
            must(frt_stream_sync(g_st), "sync");
            same[pass] &= !memcmp(kr + (size_t)b * row, want, row * 4);
            for (int kv = 0; kv < 2; kv++) {
                must(frt_buffer_read(kv ? vc[b] : kc[b], 0, kv ? cv : cg, cache, g_st), "read");
                must(frt_buffer_read(kv ? rvc : rkc, 0, cw, cache, g_st), "read");
                must(frt_stream_sync(g_st), "sync");
                same[pass] &= !memcmp(kv ? cv : cg, cw, cache);
            }
            if (fp8 && pass == 0 && pos[b] < MAXS)
                cpu_same &= prep_codes_cpu(cg, cv, kr + (size_t)b * row, vr + (size_t)b * row, ks, vs, pos[b], NKV, HD);
        }
    const char *what = fp8 ? (with_bias ? "fp8 with q, k, v biases" : "fp8")
                           : (with_bias ? "bf16 with q, k, v biases" : "bf16");
    CHECK_MSG(same[0], "decode prep batch %s: not the bytes of rope_table + kv_append per branch", what);
    printf("  decode prep batch %s [%d branches at 5, 299, 300 of %d]: q, k and both caches the bytes of the "
           "unbatched kernels\n", what, NB, MAXS);
    CHECK_MSG(same[1], "decode prep %s: not the bytes of the batch's branch", what);
    printf("  decode prep %s [one sequence at 5, 299, 300]: the bytes of the batch's branches\n", what);
    CHECK_MSG(cpu_same, "decode prep fp8: codes differ from frt_fp8_quantize_rows of the roped rows");
    CHECK_STATUS(prep_one(&pk, frt_buffer_ptr(rq), NULL, frt_buffer_ptr(dv), frt_buffer_ptr(dinv),
                          frt_buffer_ptr(rkc), frt_buffer_ptr(rvc), (const int32_t *)frt_buffer_ptr(dpos), MAXS, NH,
                          NKV, HD),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(prep_batch(&pk, NULL, frt_buffer_ptr(dk), frt_buffer_ptr(dv), frt_buffer_ptr(dinv), t, NB, MAXS, NH,
                            NKV, HD),
                 FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(prep_batch(&pk, frt_buffer_ptr(dq), frt_buffer_ptr(dk), frt_buffer_ptr(dv), frt_buffer_ptr(dinv), t,
                            NB, MAXS, NH, NKV, HD - 1),
                 FRT_ERR_INVALID_ARGUMENT);
    if (fp8) {
        const prep_kv no_scale = {1, NULL, pk.vs, NULL};
        CHECK_STATUS(prep_one(&no_scale, frt_buffer_ptr(rq), frt_buffer_ptr(rk), frt_buffer_ptr(dv),
                              frt_buffer_ptr(dinv), frt_buffer_ptr(rkc), frt_buffer_ptr(rvc),
                              (const int32_t *)frt_buffer_ptr(dpos), MAXS, NH, NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
    }
    if (with_bias) { /* a bias with a NULL member is refused */
        const frt_dense_qkv_bias half = {qkvb.q, qkvb.k, NULL};
        const prep_kv bad = {fp8, pk.ks, pk.vs, &half};
        CHECK_STATUS(prep_one(&bad, frt_buffer_ptr(rq), frt_buffer_ptr(rk), frt_buffer_ptr(dv), frt_buffer_ptr(dinv),
                              frt_buffer_ptr(rkc), frt_buffer_ptr(rvc), (const int32_t *)frt_buffer_ptr(dpos), MAXS,
                              NH, NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(prep_batch(&bad, frt_buffer_ptr(dq), frt_buffer_ptr(dk), frt_buffer_ptr(dv),
                                frt_buffer_ptr(dinv), t, NB, MAXS, NH, NKV, HD),
                     FRT_ERR_INVALID_ARGUMENT);
    }
    frt_buffer *all[] = {dq,  dk,    dv,    dinv,  dpos,  tabs,  rq,    rk,  rkc,  rvc,
                         kc[0], kc[1], kc[2], vc[0], vc[1], vc[2], dsc, dbias, dvr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) frt_buffer_free(all[i]);
    free(q), free(k), free(v), free(got), free(want), free(kr), free(cg), free(cw), free(cv);
    free(bias), free(qr), free(kr0), free(vr);
}

static frt_model *load(const char *dir, frt_backend be)
{
    frt_model_params p = frt_model_default_params();
    p.backend = be;
    p.prefill_chunk = 64;
    p.max_seq = 512;
    p.debug_hidden = 1;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    return m;
}

static void compare_model(const char *label, const char *dir)
{
    frt_model *cpu = load(dir, FRT_BACKEND_CPU), *gpu = load(dir, FRT_BACKEND_CUDA);
    if (!cpu || !gpu) goto out;
    frt_model_info ic, ig;
    CHECK_OK(frt_model_info_get(cpu, &ic));
    CHECK_OK(frt_model_info_get(gpu, &ig));
    CHECK(!strcmp(ig.arch, "dense") && ig.backend == FRT_BACKEND_CUDA && ig.state_bytes < ic.state_bytes);
    int V = ic.vocab_size, H = ic.hidden_size, L = ic.n_layers, n = 100, rows = n - 64;
    int32_t ids[128];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
    CHECK_OK(frt_model_reset(cpu));
    CHECK_OK(frt_model_prefill(cpu, ids, n));
    CHECK_OK(frt_model_reset(gpu));
    CHECK_OK(frt_model_prefill(gpu, ids, n));
    float *a = xmalloc((size_t)rows * H * sizeof(float)), *b = xmalloc((size_t)rows * H * sizeof(float));
    float *la = xmalloc((size_t)V * sizeof(float)), *lb = xmalloc((size_t)V * sizeof(float));
    printf("%s: CUDA vs CPU, prefill of %d tokens (the last piece's %d rows)\n", label, n, rows);
    for (int idx = 0; idx <= L + 1; idx++) {
        CHECK_OK(frt_model_debug_hidden(cpu, idx, a, rows));
        CHECK_OK(frt_model_debug_hidden(gpu, idx, b, rows));
        char name[32];
        snprintf(name, sizeof name, idx == 0 ? "embed" : idx <= L ? "layer %d" : "final norm", idx - 1);
        double e = frt_test_rel_err(b, a, (size_t)rows * H);
        printf("  %-12s %.3e\n", name, e);
        CHECK_MSG(e < 3e-2 && !isnan(e), "%s %s: rel err %.3e", label, name, e);
    }
    CHECK_OK(frt_model_logits(cpu, la));
    CHECK_OK(frt_model_logits(gpu, lb));
    double e = frt_test_rel_err(lb, la, (size_t)V), tol_abs = 4 * frt_test_max_abs_diff(lb, la, (size_t)V);
    printf("  %-12s %.3e (max |diff| %.3e)\n", "logits", e, tol_abs / 4);
    CHECK_MSG(e < 3e-2 && !isnan(e), "%s logits: rel err %.3e", label, e);

    /* greedy: while the cpu's top-2 margin exceeds 4x the measured max |diff| */
    enum { G = 24 };
    int32_t tc[G], tg[G];
    int compared = 0;
    for (int i = 0; i < G; i++) {
        CHECK_OK(i ? frt_model_decode(cpu, NULL, &tc[i]) : frt_model_sample(cpu, NULL, &tc[i]));
        CHECK_OK(i ? frt_model_decode(gpu, NULL, &tg[i]) : frt_model_sample(gpu, NULL, &tg[i]));
    }
    /* margins of the cpu run, recomputed from prefills of the same tokens */
    int32_t all[128 + G];
    memcpy(all, ids, (size_t)n * sizeof(int32_t));
    memcpy(all + n, tc, sizeof tc);
    for (int i = 0; i < G; i++) {
        CHECK_OK(frt_model_reset(cpu));
        CHECK_OK(frt_model_prefill(cpu, all, n + i));
        CHECK_OK(frt_model_logits(cpu, la));
        float m1 = -INFINITY, m2 = -INFINITY;
        for (int k = 0; k < V; k++) {
            if (la[k] > m1) {
                m2 = m1;
                m1 = la[k];
            } else if (la[k] > m2) {
                m2 = la[k];
            }
        }
        if (m1 - m2 <= tol_abs) break;
        CHECK_MSG(tc[i] == tg[i], "%s greedy step %d: cuda %d cpu %d", label, i, tg[i], tc[i]);
        if (tc[i] != tg[i]) break;
        compared++;
    }
    printf("  greedy: %d of %d steps compared (stop margin %.2e)\n", compared, G, tol_abs);

    /* the decode graph at every position against eager prefill of the same tokens (cuda) */
    int32_t allg[128 + G];
    memcpy(allg, ids, (size_t)n * sizeof(int32_t));
    memcpy(allg + n, tg, sizeof tg);
    CHECK_OK(frt_model_reset(gpu));
    CHECK_OK(frt_model_prefill(gpu, allg, n + G - 1));
    CHECK_OK(frt_model_logits(gpu, la));
    CHECK_OK(frt_model_reset(gpu));
    CHECK_OK(frt_model_prefill(gpu, allg, n));
    int32_t t;
    CHECK_OK(frt_model_sample(gpu, NULL, &t));
    for (int i = 0; i < G - 1; i++) {
        CHECK_MSG(t == tg[i], "%s: the replayed decode gave %d at step %d, first run %d", label, t, i, tg[i]);
        CHECK_OK(frt_model_decode(gpu, NULL, &t));
    }
    CHECK_OK(frt_model_logits(gpu, lb));
    double worst = frt_test_rel_err(lb, la, (size_t)V);
    printf("  decode graph over %d positions vs one prefill: logits rel err %.3e\n", G - 1, worst);
    CHECK(worst < 1e-2);
    free(a);
    free(b);
    free(la);
    free(lb);
out:
    frt_model_free(cpu);
    frt_model_free(gpu);
}

static void sh_sed(const char *dir, const char *expr)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sed -i '%s' '%s/config.json'", expr, dir);
    CHECK(system(cmd) == 0);
}


/* The bytes of a file, NUL-terminated, their count in *n; NULL when it
 * cannot be read. */
static char *read_text(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = xmalloc(1 << 16);
    *n = fread(b, 1, (1 << 16) - 1, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* params.gemm_autotune on an LLM family (dense or the hybrid), C = 64: the
 * first load times the append plans (buckets 16, 32) and writes the file,
 * which lists only shapes below C (the C-row plans that prefill groups are
 * made like keep the heuristic's choice); the second load reads it (the
 * file's bytes unchanged) and gives the same logits bit for bit; both
 * within 3e-2 of an untuned load; the cpu backend refuses the option. */
static void test_autotune(const char *label, const char *dir)
{
    printf("%s: GEMM autotune of the append plans\n", label);
    char path[400];
    snprintf(path, sizeof path, "%s/gemm_tune_test.txt", dir);
    unlink(path);
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA;
    p.prefill_chunk = 64;
    p.max_seq = 512;
    frt_model *m0 = NULL, *m1 = NULL, *m2 = NULL, *mc = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m0));
    p.gemm_autotune = 4;
    p.gemm_tune_file = path;
    CHECK_OK(frt_model_load(dir, &p, &m1));
    size_t n1 = 0, n2 = 0;
    char *f1 = read_text(path, &n1);
    CHECK_MSG(f1 != NULL, "%s: no tune file written", label);
    if (f1) {
        int gemms = 0, below = 0;
        for (const char *line = f1; line;) {
            int rows = 0;
            if (sscanf(line, "gemm %d", &rows) == 1) gemms++, below += rows < 64;
            line = strchr(line, '\n');
            if (line) line++;
        }
        printf("  tune file: %d shapes, %d of them below C = 64\n", gemms, below);
        CHECK_MSG(gemms > 0 && below == gemms, "%s: %d shapes tuned, %d below C", label, gemms, below);
    }
    CHECK_OK(frt_model_load(dir, &p, &m2));
    char *f2 = read_text(path, &n2);
    CHECK_MSG(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1), "%s: the second load rewrote the tune file", label);
    p.backend = FRT_BACKEND_CPU;
    CHECK_STATUS(frt_model_load(dir, &p, &mc), FRT_ERR_UNSUPPORTED);
    if (m0 && m1 && m2) {
        frt_model_info info;
        CHECK_OK(frt_model_info_get(m0, &info));
        const int V = info.vocab_size, n = 100; /* 64 + 20 + 16 */
        int32_t ids[100];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
        float *l0 = xmalloc((size_t)V * 4), *l1 = xmalloc((size_t)V * 4), *l2 = xmalloc((size_t)V * 4);
        frt_model *ms[3] = {m0, m1, m2};
        float *ls[3] = {l0, l1, l2};
        for (int k = 0; k < 3; k++) {
            CHECK_OK(frt_model_reset(ms[k]));
            CHECK_OK(frt_model_prefill(ms[k], ids, 64));      /* a whole piece: the C-row plans */
            CHECK_OK(frt_model_prefill(ms[k], ids + 64, 20)); /* appends: the tuned 32- and 16-row plans */
            CHECK_OK(frt_model_prefill(ms[k], ids + 84, 16));
            CHECK_OK(frt_model_logits(ms[k], ls[k]));
        }
        report_same("  logits, tuned load and load from the file", l1, l2, (size_t)V * 4);
        report("  logits, tuned against untuned", frt_test_rel_err(l1, l0, (size_t)V), 3e-2);
        free(l0), free(l1), free(l2);
    }
    free(f1), free(f2);
    frt_model_free(m0), frt_model_free(m1), frt_model_free(m2), frt_model_free(mc);
    unlink(path);
}
#endif /* FRT_HAVE_CUDA */

int main(void)
{
    frt_test_seed(23);
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    frt_test_cuda_start();
    test_glue();
    test_prep_norm(64, 0);
    test_prep_norm(128, 0);
    test_prep_norm(256, 0);
    test_prep_norm(128, 1);
    test_prep_norm_batch(0);
    test_prep_norm_batch(1);
    test_prep_batch(0, 0);
    test_prep_batch(1, 0);
    test_prep_batch(0, 1);
    test_prep_batch(1, 1);
    test_prefill_prep(0);
    test_prefill_prep(1);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-cuda-dense-%d", (int)getpid());
    CHECK_OK(frt_gen_model_write("tiny-dense", 3, dir));
    compare_model("tiny-dense (llama, llama3 rope)", dir);
    test_autotune("tiny-dense", dir);
    {
        char dir3[300];
        snprintf(dir3, sizeof dir3, "%s-hybrid", dir);
        CHECK_OK(frt_gen_model_write("tiny", 3, dir3));
        test_autotune("tiny (the hybrid)", dir3);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir3);
        if (system(cmd) != 0) printf("  (could not remove %s)\n", dir3);
    }
    /* the same weights as qwen2 (q/k/v biases: gen-model writes them for this config) and qwen3 (q/k norms) */
    char dir2[300];
    snprintf(dir2, sizeof dir2, "%s-q2", dir);
    frt_model_config c;
    CHECK_OK(frt_gen_model_config("tiny-dense", &c));
    /* qwen3 at head_dim 64 (intermediate 512, so q | k | v fits t0): its prefill runs one q | k | v GEMM
     * and both preps take the q / k norms (frt_dense_prefill_prep_packed_norm, frt_dense_decode_prep_norm);
     * at head_dim 32 the norms run as their own launches */
    static const char *variants[][2] = {
        {"qwen2", "s/\"model_type\": \"llama\"/\"model_type\": \"qwen2\"/"},
        {"qwen3", "s/\"model_type\": \"llama\"/\"model_type\": \"qwen3\"/"},
        {"qwen3 (head_dim 64)", "s/\"model_type\": \"llama\"/\"model_type\": \"qwen3\"/; "
                                "s/\"head_dim\": 32/\"head_dim\": 64/; "
                                "s/\"intermediate_size\": 384/\"intermediate_size\": 512/"},
    };
    for (int v = 0; v < 3; v++) {
        /* a config of that type, then weights generated for it (biases or norms included) */
        char cmd[800];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s/config.json' '%s/'", dir2, dir2, dir, dir2);
        CHECK(system(cmd) == 0);
        sh_sed(dir2, variants[v][1]);
        frt_model_config vc;
        CHECK_OK(frt_config_load(dir2, &vc));
        frt_checkpoint *ck = NULL;
        CHECK_OK(frt_gen_model_build_config(&vc, 5, &ck));
        if (ck) {
            CHECK_OK(frt_checkpoint_write(ck, dir2, FRT_GEN_MODEL_SHARD_BYTES, 0));
            frt_checkpoint_close(ck);
        }
        char label[64];
        snprintf(label, sizeof label, "tiny-dense as %s", variants[v][0]);
        compare_model(label, dir2);
    }
    /* odd golden shapes: refused on cuda with the reason */
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA;
    p.prefill_chunk = 64;
    p.max_seq = 256;
    frt_model *m = NULL;
    CHECK_STATUS(frt_model_load(FRT_TEST_DATA "/golden_dense/dense_llama3_gqa", &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "head_dim 12 (the CUDA attention takes multiples of 32") != NULL && m == NULL);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, dir2);
    CHECK(system(cmd) == 0);
    return frt_test_report();
#endif
}
