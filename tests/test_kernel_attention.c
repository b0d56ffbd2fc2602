/*
 * test_kernel_attention.c - frt_cpu_attention (causal GQA over the KV cache)
 * against a naive fp64 softmax attention: decode (n_tok 1), prefill from 0,
 * a block in the middle of the cache, contexts over several 128-key softmax
 * blocks, GQA / MQA / MHA, large scores (max subtraction), cache rows past
 * the causal horizon filled with NaN (never read), thread-count independence.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

#include <omp.h>

#define TOL 2e-6 /* norm-wise vs fp64 */

static void ref_attention(double *out, const float *q, const float *kc, const float *vc, int n_tok,
                          int start_pos, int nh, int nkv, int hd, double scale)
{
    int n_ctx = start_pos + n_tok;
    double *s = xmalloc((size_t)n_ctx * sizeof(double));
    for (int t = 0; t < n_tok; t++) {
        for (int h = 0; h < nh; h++) {
            int kvh = h / (nh / nkv), n = start_pos + t + 1;
            const float *qh = q + ((size_t)t * nh + h) * hd;
            double m = -INFINITY, sum = 0;
            for (int j = 0; j < n; j++) {
                const float *kj = kc + ((size_t)j * nkv + kvh) * hd;
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qh[i] * kj[i];
                s[j] = d * scale;
                if (s[j] > m) m = s[j];
            }
            for (int j = 0; j < n; j++) sum += (s[j] = exp(s[j] - m));
            double *o = out + ((size_t)t * nh + h) * hd;
            for (int i = 0; i < hd; i++) o[i] = 0;
            for (int j = 0; j < n; j++) {
                const float *vj = vc + ((size_t)j * nkv + kvh) * hd;
                for (int i = 0; i < hd; i++) o[i] += s[j] / sum * vj[i];
            }
        }
    }
    free(s);
}

static double max_err_seen;

/* q_amp scales q (and so the scores): 30 gives scores in the hundreds, where
 * exp without max subtraction overflows fp32. k_late scales the keys of cache
 * rows >= 256 (the third softmax block on), so the running max must grow
 * there by more than exp's range. */
static void run_case(int n_tok, int start_pos, int nh, int nkv, int hd, float q_amp, float k_late)
{
    int max_seq = start_pos + n_tok + 7;
    size_t nq = (size_t)n_tok * nh * hd, nc = (size_t)max_seq * nkv * hd;
    float *q = xmalloc(nq * 4), *kc = xmalloc(nc * 4), *vc = xmalloc(nc * 4);
    float *out = xmalloc(nq * 4), *out3 = xmalloc(nq * 4);
    double *ref = xmalloc(nq * sizeof(double));
    frt_test_fill(q, nq, -q_amp, q_amp);
    frt_test_fill(kc, nc, -1, 1);
    frt_test_fill(vc, nc, -2, 2);
    for (size_t i = (size_t)256 * nkv * hd; i < nc; i++) kc[i] *= k_late;
    /* rows past the last query's position: poison */
    for (size_t i = (size_t)(start_pos + n_tok) * nkv * hd; i < nc; i++) kc[i] = vc[i] = NAN;
    for (size_t i = 0; i < nq; i++) out[i] = NAN;
    double scale = 1.0 / sqrt((double)hd);
    ref_attention(ref, q, kc, vc, n_tok, start_pos, nh, nkv, hd, scale);
    frt_cpu_attention(out, q, kc, vc, n_tok, start_pos, nh, nkv, hd, (float)scale);
    double e = rel_err_d(out, ref, nq);
    if (e > max_err_seen) max_err_seen = e;
    CHECK_MSG(e <= TOL, "n_tok %d start %d heads %d/%d hd %d amp %g: rel err %.3e", n_tok,
              start_pos, nh, nkv, hd, (double)q_amp, e);

    int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    frt_cpu_attention(out3, q, kc, vc, n_tok, start_pos, nh, nkv, hd, (float)scale);
    omp_set_num_threads(1);
    float *out1 = xmalloc(nq * 4);
    frt_cpu_attention(out1, q, kc, vc, n_tok, start_pos, nh, nkv, hd, (float)scale);
    omp_set_num_threads(saved);
    CHECK(memcmp(out, out3, nq * 4) == 0);
    CHECK(memcmp(out, out1, nq * 4) == 0);
    free(out1);
    free(q);
    free(kc);
    free(vc);
    free(out);
    free(out3);
    free(ref);
}

/* A decode step equals the matching row of a prefill block over the same
 * cache (one (token, head) pair is computed the same way in both). */
static void test_decode_matches_prefill_row(void)
{
    int n_tok = 9, nh = 4, nkv = 2, hd = 32, max_seq = 200, start = 150;
    size_t nq = (size_t)n_tok * nh * hd, nc = (size_t)max_seq * nkv * hd;
    float *q = xmalloc(nq * 4), *kc = xmalloc(nc * 4), *vc = xmalloc(nc * 4);
    float *out = xmalloc(nq * 4), *o1 = xmalloc((size_t)nh * hd * 4);
    frt_test_fill(q, nq, -1, 1);
    frt_test_fill(kc, nc, -1, 1);
    frt_test_fill(vc, nc, -1, 1);
    frt_cpu_attention(out, q, kc, vc, n_tok, start, nh, nkv, hd, 0.17f);
    int same = 1;
    for (int t = 0; t < n_tok; t++) {
        frt_cpu_attention(o1, q + (size_t)t * nh * hd, kc, vc, 1, start + t, nh, nkv, hd, 0.17f);
        same &= memcmp(o1, out + (size_t)t * nh * hd, (size_t)nh * hd * 4) == 0;
    }
    CHECK(same);
    free(q);
    free(kc);
    free(vc);
    free(out);
    free(o1);
}

int main(void)
{
    frt_test_seed(21);
    /* n_tok, start_pos, n_heads, n_kv_heads, head_dim, q amplitude, late-key scale */
    run_case(1, 0, 4, 4, 64, 1, 1);      /* one key */
    run_case(1, 300, 8, 2, 64, 1, 1);    /* decode over 3 softmax blocks */
    run_case(37, 0, 4, 2, 32, 1, 1);     /* prefill */
    run_case(20, 250, 6, 3, 256, 1, 1);  /* a block mid-cache, Qwen3.5 head_dim */
    run_case(5, 10, 3, 1, 8, 1, 1);      /* MQA */
    run_case(3, 126, 2, 1, 16, 1, 1);    /* contexts 127..129: block edge */
    run_case(4, 200, 4, 2, 64, 30, 1);   /* large scores */
    run_case(1, 400, 2, 2, 16, 100, 10); /* large scores, max growing across blocks */
    printf("largest rel err vs fp64: %.3e (tolerance %.0e)\n", max_err_seen, TOL);
    test_decode_matches_prefill_row();
    frt_cpu_attention(NULL, NULL, NULL, NULL, 0, 0, 4, 2, 8, 1.0f); /* n_tok 0: no-op */
    CHECK(1);
    return frt_test_report();
}
