/*
 * gdr_chunk.c - the gated delta rule, chunked (prefill).
 * Math: transformers 5.x modeling_qwen3_5.py, torch_chunk_gated_delta_rule:
 * within a chunk the delta-rule updates are condensed by the UT transform
 * (a unit lower triangular solve), then one sequential scan over chunks
 * carries the state. Per value head h and chunk of L rows (S = state[h]
 * [dk, dv], q already scaled by dk^-0.5, cum the in-chunk cumulative sum of g):
 *   A[i][j]   = ((beta_i k_i) . k_j) exp(cum_i - cum_j)           j < i
 *   Att[i][j] = (q_i . k_j) exp(cum_i - cum_j)                     j <= i
 *   U = (I + A)^-1 [beta_i v_i],  W = (I + A)^-1 [beta_i k_i exp(cum_i)]
 *   Vn_i  = U_i - W_i S
 *   out_i = (q_i exp(cum_i)) S + sum_{j<=i} Att[i][j] Vn_j
 *   S     = S exp(cum_{L-1}) + sum_i (k_i exp(cum_{L-1} - cum_i)) (x) Vn_i
 * Every decay is the exp of a difference of the in-chunk cumulative sum,
 * which is kept in fp64 (HF: fp32), so a pairwise decay stays accurate when
 * the cumulative sum is large and small per-token decays follow large ones;
 * nothing overflows (all exponents are <= 0).
 * HF pads the last chunk to `chunk` rows with zeros (q = k = v = beta = g =
 * 0): padded rows give U = W = 0 rows, leave cum_{L-1} as it is and add
 * nothing to the state, so the tail here is computed with its L real rows.
 * One value head per OpenMP iteration, fixed orders inside: the same bits
 * for any thread count, and for any split of the tokens into calls at
 * multiples of `chunk`. Tested in tests/test_kernel_gdr.c.
 */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/kernels_cpu.h"
#include "util/error.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

typedef struct gdr_scratch {
    float *A;    /* [C, C] strictly lower: the UT system */
    float *Att;  /* [C, C] lower incl. diagonal: intra-chunk attention */
    float *Qs;   /* [C, dk] q * scale */
    float *W;    /* [C, dk] beta k, then beta k exp(cum), then solved */
    float *U;    /* [C, dv] beta v, then solved, then Vn */
    double *cum; /* [C] in-chunk cumulative log-decay */
} gdr_scratch;

static size_t scratch_floats(int C, int dk, int dv)
{
    return 2 * (size_t)C * C + (size_t)C * (2 * (size_t)dk + dv);
}

static void gdr_chunk_one(float *out, float *S, const float *q, const float *k, const float *v,
                          const float *g, const float *beta, int c0, int L, int h, int kh,
                          int n_k_heads, int n_v_heads, int dk, int dv, float scale,
                          const gdr_scratch *s)
{
    const int C = L; /* leading dimension of A/Att inside this call: rows used = L */
    size_t qk_stride = (size_t)n_k_heads * dk;
    size_t v_stride = (size_t)n_v_heads * dv;
    const float *q0 = q + (size_t)c0 * qk_stride + (size_t)kh * dk;
    const float *k0 = k + (size_t)c0 * qk_stride + (size_t)kh * dk;
    const float *v0 = v + (size_t)c0 * v_stride + (size_t)h * dv;
    float *o0 = out + (size_t)c0 * v_stride + (size_t)h * dv;
#define KROW(i) (k0 + (size_t)(i) * qk_stride)
#define OROW(i) (o0 + (size_t)(i) * v_stride)

    double acc = 0;
    for (int i = 0; i < L; i++) {
        size_t gi = (size_t)(c0 + i) * n_v_heads + h;
        acc += (double)g[gi];
        s->cum[i] = acc;
        float b = beta[gi];
        const float *qi = q0 + (size_t)i * qk_stride;
        const float *ki = KROW(i);
        const float *vi = v0 + (size_t)i * v_stride;
        float *Qi = s->Qs + (size_t)i * dk, *Wi = s->W + (size_t)i * dk, *Ui = s->U + (size_t)i * dv;
        for (int a = 0; a < dk; a++) {
            Qi[a] = qi[a] * scale;
            Wi[a] = ki[a] * b;
        }
        for (int j = 0; j < dv; j++) Ui[j] = vi[j] * b;
    }

    /* the UT system and the intra-chunk attention (HF: x @ key^T * decay) */
    for (int i = 0; i < L; i++) {
        for (int j = 0; j <= i; j++) {
            float e = (float)exp(s->cum[i] - s->cum[j]);
            const float *kj = KROW(j);
            if (j < i) s->A[(size_t)i * C + j] = frt_dot_f32(s->W + (size_t)i * dk, kj, dk) * e;
            s->Att[(size_t)i * C + j] = frt_dot_f32(s->Qs + (size_t)i * dk, kj, dk) * e;
        }
    }
    for (int i = 0; i < L; i++) {
        float e = (float)exp(s->cum[i]);
        float *Wi = s->W + (size_t)i * dk;
#pragma omp simd
        for (int a = 0; a < dk; a++) Wi[a] *= e;
    }

    /* (I + A) X = RHS by forward substitution (unit diagonal), rows in order */
    for (int i = 1; i < L; i++) {
        float *Ui = s->U + (size_t)i * dv, *Wi = s->W + (size_t)i * dk;
        for (int j = 0; j < i; j++) {
            float aij = -s->A[(size_t)i * C + j];
            frt_axpy_f32(Ui, aij, s->U + (size_t)j * dv, dv);
            frt_axpy_f32(Wi, aij, s->W + (size_t)j * dk, dk);
        }
    }

    /* Vn_i = U_i - W_i S, then out_i = (q_i exp(cum_i)) S + sum_j Att[i][j] Vn_j,
     * both reading the state of the previous chunk; out_i is the temporary
     * for W_i S first. */
    for (int i = 0; i < L; i++) {
        float *o = OROW(i);
        float *Ui = s->U + (size_t)i * dv;
        const float *Wi = s->W + (size_t)i * dk;
        const float *Qi = s->Qs + (size_t)i * dk;
        for (int j = 0; j < dv; j++) o[j] = 0.0f;
        for (int a = 0; a < dk; a++) frt_axpy_f32(o, Wi[a], S + (size_t)a * dv, dv);
#pragma omp simd
        for (int j = 0; j < dv; j++) Ui[j] -= o[j];
        float e = (float)exp(s->cum[i]);
        for (int j = 0; j < dv; j++) o[j] = 0.0f;
        for (int a = 0; a < dk; a++) frt_axpy_f32(o, Qi[a] * e, S + (size_t)a * dv, dv);
        for (int j = 0; j <= i; j++)
            frt_axpy_f32(o, s->Att[(size_t)i * C + j], s->U + (size_t)j * dv, dv);
    }

    /* S = S exp(cum_last) + sum_i (k_i exp(cum_last - cum_i)) (x) Vn_i */
    double last = s->cum[L - 1];
    float decay = (float)exp(last);
    for (int a = 0; a < dk; a++) {
        float *Sa = S + (size_t)a * dv;
#pragma omp simd
        for (int j = 0; j < dv; j++) Sa[j] *= decay;
    }
    for (int i = 0; i < L; i++) {
        float e = (float)exp(last - s->cum[i]);
        const float *ki = KROW(i);
        const float *Vi = s->U + (size_t)i * dv;
        for (int a = 0; a < dk; a++) frt_axpy_f32(S + (size_t)a * dv, ki[a] * e, Vi, dv);
    }
#undef KROW
#undef OROW
}

int frt_cpu_gdr_chunked(float *out, float *state, const float *q, const float *k, const float *v,
                        const float *g, const float *beta, int n_tok, int n_k_heads,
                        int n_v_heads, int dk, int dv, int chunk)
{
    if (chunk < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gdr_chunked: chunk %d < 1", chunk);
    if (n_tok <= 0 || n_v_heads <= 0) return 0;
    int C = chunk < n_tok ? chunk : n_tok;
    int n_slices = omp_get_max_threads();
    if (n_slices > n_v_heads) n_slices = n_v_heads;
    if (n_slices < 1) n_slices = 1;
    size_t per = scratch_floats(C, dk, dv);
    float *buf = malloc((size_t)n_slices * per * sizeof(float));
    double *cum = malloc((size_t)n_slices * C * sizeof(double));
    if (!buf || !cum) {
        free(buf);
        free(cum);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "gdr_chunked: %zu bytes of scratch",
                         (size_t)n_slices * (per * sizeof(float) + C * sizeof(double)));
    }
    int ratio = n_v_heads / n_k_heads;
    float scale = (float)(1.0 / sqrt((double)dk));
#pragma omp parallel for schedule(static) num_threads(n_slices) if (n_slices > 1)
    for (int h = 0; h < n_v_heads; h++) {
        int slice = omp_get_thread_num();
        float *base = buf + (size_t)slice * per;
        gdr_scratch s;
        s.A = base;
        s.Att = s.A + (size_t)C * C;
        s.Qs = s.Att + (size_t)C * C;
        s.W = s.Qs + (size_t)C * dk;
        s.U = s.W + (size_t)C * dk;
        s.cum = cum + (size_t)slice * C;
        float *S = state + (size_t)h * dk * dv;
        for (int c0 = 0; c0 < n_tok; c0 += C) {
            int L = n_tok - c0 < C ? n_tok - c0 : C;
            gdr_chunk_one(out, S, q, k, v, g, beta, c0, L, h, h / ratio, n_k_heads, n_v_heads,
                          dk, dv, scale, &s);
        }
    }
    free(buf);
    free(cum);
    return 0;
}
