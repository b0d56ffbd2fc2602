/*
 * model/arch/group_cuda.c - prefill groups on the CUDA backends
 * (group_cuda.h): the load-time check of the group plans and a group's
 * attention launches.
 */
#include "model/arch/group_cuda.h"

#include "kernels/cuda/cuda_check.h"
#include "model/model_internal.h"
#include "util/error.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_DEFAULT_ROWS 2048 /* rows of a default group: the GEMMs' rate is reached (docs/PERF.md) */
#define MAX_PRODUCTS 32

/* Scratch of the load-time check. */
typedef struct group_scratch {
    void *x, *xs, *y, *y_ref; /* x: bf16 rows or E4M3 codes; xs: FP8's per-row scales */
} group_scratch;

static void scratch_free(group_scratch *gs)
{
    cudaFree(gs->x);
    cudaFree(gs->xs);
    cudaFree(gs->y);
    cudaFree(gs->y_ref);
}

/* Device buffers for products of up to xin inputs and yout outputs over
 * rows = G C rows (y_ref: C rows). */
static int scratch_alloc(group_scratch *gs, const char *who, int G, size_t rows, size_t C, size_t xin, size_t yout,
                         int fp8)
{
    const size_t xb = rows * xin * (fp8 ? 1 : 2);
    if (cudaMalloc(&gs->x, xb) == cudaSuccess && cudaMalloc(&gs->xs, rows * 4) == cudaSuccess &&
        cudaMalloc(&gs->y, rows * yout * 4) == cudaSuccess && cudaMalloc(&gs->y_ref, C * yout * 4) == cudaSuccess)
        return 0;
    (void)cudaGetLastError();
    return frt_error(FRT_ERR_OUT_OF_MEMORY, "%s: prefill_group %d: no device memory for the load-time check (%.0f MB)",
                     who, G, (double)(xb + rows * (4 + yout * 4) + C * yout * 4) / 1e6);
}

/* Product p over j * C rows: makes its group plan and checks on the device
 * that every row gets its piece's bits (group_cuda.h). *same 1 when a plan
 * passed; FRT_ERR_* from the calls. */
static int group_product(frt_model *m, frt_cuda_gemm *gemm, frt_cuda_gemm_fp8 *gemm8, int j, const frt_group_product *p,
                         const group_scratch *gs, int *same)
{
    const int n = j * m->C;
    void *st = frt_stream_native(m->stream);
    *same = 0;
    if (gemm8) {
        int rc = frt_cuda_gemm_fp8_plan_like(gemm8, n, m->C, p->in, p->out, p->y_dtype);
        if (rc == FRT_ERR_UNSUPPORTED) return 0;
        FRT_TRY(rc);
        return frt_cuda_gemm_fp8_check_like(gemm8, st, n, m->C, p->in, p->out, p->y_dtype, p->q, p->s, gs->x, gs->xs,
                                            gs->y, gs->y_ref, same);
    }
    static const int ranks[] = {0, 1, 2, 3, -1};
    for (size_t r = 0; !*same && r < sizeof ranks / sizeof ranks[0]; r++) {
        int rc = frt_cuda_gemm_plan_like(gemm, n, m->C, p->in, p->out, p->y_dtype, p->acc, ranks[r]);
        if (rc == FRT_ERR_NOT_FOUND || rc == FRT_ERR_UNSUPPORTED) continue;
        FRT_TRY(rc);
        FRT_TRY(frt_cuda_gemm_check_like(gemm, st, n, m->C, p->in, p->out, p->acc, p->y_dtype, p->w, gs->x, gs->y,
                                         gs->y_ref, same));
    }
    return 0;
}

/* Whether product k repeats the shape of an earlier one (its plan is that
 * one's: checked once). */
static int seen_shape(const frt_group_product *p, int k)
{
    for (int i = 0; i < k; i++)
        if (p[i].in == p[k].in && p[i].out == p[k].out && p[i].y_dtype == p[k].y_dtype && p[i].acc == p[k].acc)
            return 1;
    return 0;
}

int frt_group_refuse(const char *who, const char *why, int want, int *got)
{
    *got = 1;
    if (want > 1) return frt_error(FRT_ERR_UNSUPPORTED, "%s: prefill_group %d: %s", who, want, why);
    return 0;
}

/* The default G: up to 8 pieces and GROUP_DEFAULT_ROWS rows (8 at C = 256,
 * 1 from C = 2048), at most the runtime's cap m->G. */
static int default_group(const frt_model *m)
{
    int g = 1;
    while (g < 8 && g * 2 <= m->G && (long)g * 2 * m->C <= GROUP_DEFAULT_ROWS) g *= 2;
    return g;
}

int frt_group_check(frt_model *m, const char *who, frt_cuda_gemm *gemm, frt_cuda_gemm_fp8 *gemm8,
                    const frt_group_product *p, int n, int want, int *got)
{
    if (!m || !who || !p || !got || n < 1 || n > MAX_PRODUCTS || (!gemm && !gemm8))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "prefill group check: NULL or %d products (1..%d)", n,
                         MAX_PRODUCTS);
    *got = 1;
    const int G = want ? want : default_group(m);
    size_t xin = 0, yout = 0;
    for (int k = 0; k < n; k++) {
        xin = xin > (size_t)p[k].in ? xin : (size_t)p[k].in;
        yout = yout > (size_t)p[k].out ? yout : (size_t)p[k].out;
    }
    group_scratch gs = {NULL, NULL, NULL, NULL};
    int rc = scratch_alloc(&gs, who, G, (size_t)G * (size_t)m->C, (size_t)m->C, xin, yout, gemm8 != NULL);
    int ok = 1;
    for (int j = 2; rc == 0 && ok && j <= G; j *= 2) {
        for (int k = 0; rc == 0 && ok && k < n; k++) {
            if (seen_shape(p, k)) continue;
            int same = 0;
            rc = group_product(m, gemm, gemm8, j, &p[k], &gs, &same);
            if (rc == 0 && !same) {
                ok = 0;
                if (want > 1)
                    rc = frt_error(FRT_ERR_UNSUPPORTED, "%s: prefill_group %d: the product in %d out %d over %d rows "
                                   "differs from its pieces of %d rows with every algorithm tried "
                                   "(docs/architectures.md \"Prefill groups\")",
                                   who, want, p[k].in, p[k].out, j * m->C, m->C);
            }
        }
        if (rc == 0 && ok) *got = j;
    }
    scratch_free(&gs);
    return rc;
}

int frt_group_pieces(const frt_model *m, int rows, int decode)
{
    return !decode && rows > m->C ? rows / m->C : 1;
}

int frt_group_bucket_check(const frt_model *m, int bucket, const char *who)
{
    const int C = m->C, j = bucket / C;
    if (bucket >= 1 && bucket <= C) return 0;
    if (bucket > C && bucket % C == 0 && j <= m->G && (j & (j - 1)) == 0) return 0;
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "%s: bucket %d is neither in [1, %d] nor a group of up to %d pieces", who,
                     bucket, C, m->G);
}

int frt_group_attn_pieces(int G, int C, int max_seq, int n_heads, int head_dim, size_t *ws_bytes)
{
    int ap = 1;
    for (int a = 2; a <= G; a *= 2) {
        size_t need = frt_cuda_attention_prefill_pieces_workspace_bytes(a * C, C, max_seq, n_heads, head_dim);
        if (need > FRT_GROUP_ATTN_WS && need > *ws_bytes) break;
        ap = a;
    }
    if (G > 1) {
        size_t need = frt_cuda_attention_prefill_pieces_workspace_bytes(ap * C, C, max_seq, n_heads, head_dim);
        if (need > *ws_bytes) *ws_bytes = need;
    }
    return ap;
}

/* Row r's pointer into a [rows, width] array of dtype dt. */
static void *row_at(const void *base, frt_cuda_dtype dt, size_t r, size_t width)
{
    return (char *)(uintptr_t)base + r * width * (dt == FRT_CUDA_F32 ? 4 : 2);
}

/* The CUDA-core kernel over rows rows from d_start (d_n of them valid). */
static int attention_scalar(const frt_group_attn *a, void *out, const void *q, const int32_t *d_start,
                            const int32_t *d_n, int rows)
{
    if (a->k_scale)
        return frt_cuda_attention_fp8(a->stream, out, a->out_dtype, q, a->q_dtype, a->k_cache, a->v_cache, a->k_scale,
                                      a->v_scale, d_start, d_n, rows, a->max_seq, a->n_heads, a->n_kv_heads,
                                      a->head_dim, a->scale, 0, NULL, 0);
    return frt_cuda_attention(a->stream, out, a->out_dtype, q, a->q_dtype, a->k_cache, a->v_cache, d_start, d_n,
                              rows, a->max_seq, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, 0, NULL, 0);
}

/* The FlashAttention kernel over one piece. */
static int attention_piece(const frt_group_attn *a)
{
    if (a->k_scale)
        return frt_cuda_attention_prefill_fp8(a->stream, a->out, a->out_dtype, a->q, a->q_dtype, a->k_cache,
                                              a->v_cache, a->k_scale, a->v_scale, a->d_start, a->d_n, a->rows,
                                              a->max_seq, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, a->ws,
                                              a->ws_bytes);
    if (a->kv_src)
        return frt_cuda_attention_prefill_src(a->stream, a->out, a->out_dtype, a->q, a->q_dtype, a->k_cache,
                                              a->v_cache, a->d_start, a->d_n, a->rows, a->max_seq, a->n_heads,
                                              a->n_kv_heads, a->head_dim, a->scale, a->ws, a->ws_bytes, a->kv_src);
    return frt_cuda_attention_prefill(a->stream, a->out, a->out_dtype, a->q, a->q_dtype, a->k_cache, a->v_cache,
                                      a->d_start, a->d_n, a->rows, a->max_seq, a->n_heads, a->n_kv_heads, a->head_dim,
                                      a->scale, a->ws, a->ws_bytes);
}

/* The FlashAttention kernel over run pieces from piece p. */
static int attention_run(const frt_group_attn *a, int p, int run)
{
    const size_t w = (size_t)a->n_heads * (size_t)a->head_dim, r0 = (size_t)p * (size_t)a->C;
    const void *q = row_at(a->q, a->q_dtype, r0, w);
    void *out = row_at(a->out, a->out_dtype, r0, w);
    const int32_t *run_n = a->gpos + a->pieces + 1; /* run * C */
    if (a->k_scale)
        return frt_cuda_attention_prefill_pieces_fp8(a->stream, out, a->out_dtype, q, a->q_dtype, a->k_cache,
                                                     a->v_cache, a->k_scale, a->v_scale, a->gpos + p, run_n,
                                                     run * a->C, a->C, a->max_seq, a->n_heads, a->n_kv_heads,
                                                     a->head_dim, a->scale, a->ws, a->ws_bytes);
    return frt_cuda_attention_prefill_pieces(a->stream, out, a->out_dtype, q, a->q_dtype, a->k_cache, a->v_cache,
                                             a->gpos + p, run_n, run * a->C, a->C, a->max_seq, a->n_heads,
                                             a->n_kv_heads, a->head_dim, a->scale, a->ws, a->ws_bytes);
}

int frt_group_attention(const frt_group_attn *a)
{
    if (a->pieces <= 1) {
        int rc = attention_piece(a);
        if (rc != FRT_ERR_UNSUPPORTED || a->kv_src) return rc; /* a source no other kernel reads */
        return attention_scalar(a, a->out, a->q, a->d_start, a->d_n, a->rows);
    }
    const int run = a->run < a->pieces ? a->run : a->pieces;
    int rc = 0;
    for (int p = 0; rc == 0 && p < a->pieces; p += run) rc = attention_run(a, p, run);
    if (rc != FRT_ERR_UNSUPPORTED) return rc;
    const size_t w = (size_t)a->n_heads * (size_t)a->head_dim;
    const int32_t *piece_n = a->gpos + a->pieces; /* C */
    for (int p = 0; p < a->pieces; p++) { /* the CUDA-core kernel, one piece a launch */
        const size_t r0 = (size_t)p * (size_t)a->C;
        FRT_TRY(attention_scalar(a, row_at(a->out, a->out_dtype, r0, w), row_at(a->q, a->q_dtype, r0, w), a->gpos + p,
                                 piece_n, a->C));
    }
    return 0;
}

int frt_gemm_skinny_mode(const frt_model *m)
{
    if (m->params.gemm_autotune) return 0;
    const char *e = getenv("FRT_GEMM_SKINNY");
    if (e && (!strcmp(e, "0") || !strcmp(e, "2"))) return e[0] - '0';
    return 1;
}

int frt_gemm_tune_appends(frt_model *m, frt_cuda_gemm *gemm)
{
    return frt_cuda_gemm_autotune_file(gemm, m->params.gemm_tune_file, m->params.gemm_autotune,
                                       frt_stream_native(m->stream), NULL);
}
