/*
 * kernels/cuda/bmm.cu - batched products of two activations on cuBLASLt
 * (kernels_policy_cuda.h: frt_cuda_bmm_*): bf16 operands, fp32 compute,
 * f32 or bf16 result, strided batches with row strides of their own (the
 * heads of a [tokens, heads, head_dim] buffer without a transpose).
 *
 * Row-major y = x . w^T is column-major y^T = w . x^T: A = w (op T when
 * trans_w: w_b [n, k] row-major is column-major [k, n]), B = x (column-major
 * [k, m]), C = y^T (column-major [n, m]).
 *
 * Plans: the descriptors and cuBLASLt's heuristic choice are made once per
 * layout (sizes, strides, dtype and the alignment of the pointers and
 * strides, given to the heuristic) and cached. The heuristic query fails
 * inside a stream capture on recent cuBLASLt, so a graph's products are
 * planned at setup (frt_cuda_bmm_plan); a run without a plan plans on the
 * spot outside a capture and is FRT_ERR_STATE inside one.
 * Weight x activation GEMMs stay in gemm.cu (frt_cuda_gemm).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

#include <string.h>

#define BMM_MAX_PLANS 256

/* A layout: everything the plan depends on. */
typedef struct bmm_key {
    int m, n, k, trans_w, batch, y_dtype;
    long long ldx, ldw, ldy, sx, sw, sy;
    uint32_t align_x, align_w, align_y;
} bmm_key;

typedef struct bmm_plan {
    bmm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} bmm_plan;

struct frt_cuda_bmm {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    bmm_plan plans[BMM_MAX_PLANS];
    int n_plans;
};

extern "C" int frt_cuda_bmm_create(size_t workspace_bytes, frt_cuda_bmm **out)
{
    FRT_ARG(out, "bmm: NULL argument");
    *out = NULL;
    frt_cuda_bmm *h = (frt_cuda_bmm *)calloc(1, sizeof *h);
    if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "bmm: out of memory");
    cublasStatus_t st = cublasLtCreate(&h->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(h);
        return frt_cublas_fail(st, "cublasLtCreate", __FILE__, __LINE__);
    }
    h->ws_bytes = workspace_bytes;
    if (workspace_bytes) {
        cudaError_t err = cudaMalloc(&h->ws, workspace_bytes);
        if (err != cudaSuccess) {
            cublasLtDestroy(h->lt);
            free(h);
            return frt_cuda_fail(err, "cudaMalloc", __FILE__, __LINE__);
        }
    }
    *out = h;
    return 0;
}

static void plan_free(bmm_plan *p)
{
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

extern "C" void frt_cuda_bmm_destroy(frt_cuda_bmm *h)
{
    if (!h) return;
    for (int i = 0; i < h->n_plans; i++) plan_free(&h->plans[i]);
    cudaFree(h->ws);
    cublasLtDestroy(h->lt);
    free(h);
}

/* The largest power of two up to 256 dividing the address and every byte
 * stride of one operand. */
static uint32_t align_of(const void *p, long long ld, long long stride, int batch, size_t esize)
{
    unsigned long long v = (unsigned long long)(uintptr_t)p | (unsigned long long)ld * esize | 256ull;
    if (batch > 1) v |= (unsigned long long)stride * esize;
    return (uint32_t)(v & (~v + 1));
}

static bmm_key key_of(const frt_cuda_bmm_args *a)
{
    bmm_key k;
    memset(&k, 0, sizeof k);
    k.m = a->m, k.n = a->n, k.k = a->k, k.trans_w = a->trans_w, k.batch = a->batch, k.y_dtype = a->y_dtype;
    k.ldx = a->ldx, k.ldw = a->ldw, k.ldy = a->ldy;
    if (a->batch > 1) k.sx = a->sx, k.sw = a->sw, k.sy = a->sy;
    k.align_x = align_of(a->x, a->ldx, a->sx, a->batch, 2);
    k.align_w = align_of(a->w, a->ldw, a->sw, a->batch, 2);
    k.align_y = align_of(a->y, a->ldy, a->sy, a->batch, a->y_dtype == FRT_CUDA_BF16 ? 2 : 4);
    return k;
}

static int layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, long long rows, long long cols, long long ld,
                  int batch, long long stride)
{
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    const int32_t bc = batch;
    const int64_t so = stride;
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    FRT_CUBLAS_TRY(
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &so, sizeof so));
    return 0;
}

static int desc_build(const bmm_key *k, bmm_plan *p)
{
    FRT_CUBLAS_TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opA = k->trans_w ? CUBLAS_OP_T : CUBLAS_OP_N, opB = CUBLAS_OP_N;
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
    if (k->trans_w)
        FRT_TRY(layout(&p->a, CUDA_R_16BF, k->k, k->n, k->ldw, k->batch, k->sw));
    else
        FRT_TRY(layout(&p->a, CUDA_R_16BF, k->n, k->k, k->ldw, k->batch, k->sw));
    FRT_TRY(layout(&p->b, CUDA_R_16BF, k->k, k->m, k->ldx, k->batch, k->sx));
    return layout(&p->c, k->y_dtype == FRT_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F, k->n, k->m, k->ldy, k->batch,
                  k->sy);
}

/* The heuristic's first algorithm for p's descriptors and alignments. */
static int choose(frt_cuda_bmm *h, bmm_plan *p)
{
    cublasLtMatmulPreference_t pref = NULL;
    FRT_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = h->ws_bytes;
    const uint32_t al[4] = {p->key.align_w, p->key.align_x, p->key.align_y, p->key.align_y};
    const cublasLtMatmulPreferenceAttributes_t at[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t st =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, at[i], &al[i], sizeof al[i]);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(h->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS) return frt_cublas_fail(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS)
        return frt_error(FRT_ERR_UNSUPPORTED, "bmm: no cuBLASLt algorithm for m %d n %d k %d batch %d", p->key.m,
                         p->key.n, p->key.k, p->key.batch);
    p->algo = res.algo;
    return 0;
}

static bmm_plan *plan_find(frt_cuda_bmm *h, const bmm_key *k)
{
    for (int i = 0; i < h->n_plans; i++)
        if (!memcmp(&h->plans[i].key, k, sizeof *k)) return &h->plans[i];
    return NULL;
}

static int plan_make(frt_cuda_bmm *h, const bmm_key *k, bmm_plan **out)
{
    if (h->n_plans == BMM_MAX_PLANS) return frt_error(FRT_ERR_OUT_OF_RANGE, "bmm: more than %d plans", BMM_MAX_PLANS);
    bmm_plan *p = &h->plans[h->n_plans];
    memset(p, 0, sizeof *p);
    p->key = *k;
    int rc = desc_build(k, p);
    if (rc == 0) rc = choose(h, p);
    if (rc) {
        plan_free(p);
        return rc;
    }
    h->n_plans++;
    *out = p;
    return 0;
}

static int bmm_check(const frt_cuda_bmm_args *a)
{
    FRT_ARG(a->y && a->x && a->w && frt_dtype_ok(a->y_dtype), "bmm: NULL pointer or bad dtype");
    FRT_ARG(a->m >= 1 && a->n >= 1 && a->k >= 1 && a->batch >= 1, "bmm: m %d n %d k %d batch %d", a->m, a->n, a->k,
            a->batch);
    FRT_ARG(a->ldx >= a->k && a->ldw >= (a->trans_w ? a->k : a->n) && a->ldy >= a->n,
            "bmm: a row stride is shorter than its row (ldx %lld ldw %lld ldy %lld)", a->ldx, a->ldw, a->ldy);
    FRT_ARG(a->batch == 1 || (a->sx >= 0 && a->sw >= 0 && a->sy >= 1), "bmm: bad batch strides");
    return 0;
}

extern "C" int frt_cuda_bmm_plan(frt_cuda_bmm *h, const frt_cuda_bmm_args *a)
{
    FRT_ARG(h && a, "bmm: NULL argument");
    FRT_TRY(bmm_check(a));
    const bmm_key k = key_of(a);
    bmm_plan *p = plan_find(h, &k);
    return p ? 0 : plan_make(h, &k, &p);
}

extern "C" int frt_cuda_bmm_run(frt_cuda_bmm *h, void *stream, const frt_cuda_bmm_args *a)
{
    FRT_ARG(h && a, "bmm: NULL argument");
    FRT_TRY(bmm_check(a));
    const bmm_key k = key_of(a);
    bmm_plan *p = plan_find(h, &k);
    if (!p) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        FRT_CUDA_TRY(cudaStreamIsCapturing((cudaStream_t)stream, &cs));
        if (cs != cudaStreamCaptureStatusNone)
            return frt_error(FRT_ERR_STATE, "bmm: no plan for m %d n %d k %d batch %d inside a capture "
                                            "(frt_cuda_bmm_plan it at setup)", a->m, a->n, a->k, a->batch);
        FRT_TRY(plan_make(h, &k, &p));
    }
    const float alpha = a->alpha, beta = 0.0f;
    FRT_CUBLAS_TRY(cublasLtMatmul(h->lt, p->op, &alpha, a->w, p->a, a->x, p->b, &beta, a->y, p->c, a->y, p->c,
                                  &p->algo, h->ws, h->ws_bytes, (cudaStream_t)stream));
    return 0;
}
