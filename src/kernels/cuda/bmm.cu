/*
 * kernels/cuda/bmm.cu - batched products of two activations on cuBLASLt
 * (kernels_policy_cuda.h: frt_cuda_bmm_*): bf16 operands, fp32 compute,
 * f32 or bf16 result, strided batches with row strides of their own (the
 * heads of a [tokens, heads, head_dim] buffer without a transpose).
 *
 * Row-major y = x . w^T is column-major y^T = w . x^T: A = w (op T when
 * trans_w: w_b [n, k] row-major is column-major [k, n]), B = x (column-major
 * [k, m]), C = y^T (column-major [n, m]). The descriptors and the heuristic
 * run at each call (at capture, once per graph variant); the launch they
 * enqueue keeps what it needs, so they are freed right after.
 * Weight x activation GEMMs stay in gemm.cu (frt_cuda_gemm).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

#include <string.h>

struct frt_cuda_bmm {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
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

extern "C" void frt_cuda_bmm_destroy(frt_cuda_bmm *h)
{
    if (!h) return;
    cudaFree(h->ws);
    cublasLtDestroy(h->lt);
    free(h);
}

/* The descriptors of one call. */
typedef struct bmm_desc {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulPreference_t pref;
} bmm_desc;

static void desc_free(bmm_desc *d)
{
    if (d->pref) cublasLtMatmulPreferenceDestroy(d->pref);
    if (d->c) cublasLtMatrixLayoutDestroy(d->c);
    if (d->b) cublasLtMatrixLayoutDestroy(d->b);
    if (d->a) cublasLtMatrixLayoutDestroy(d->a);
    if (d->op) cublasLtMatmulDescDestroy(d->op);
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

static int desc_build(const frt_cuda_bmm *h, const frt_cuda_bmm_args *a, bmm_desc *d)
{
    FRT_CUBLAS_TRY(cublasLtMatmulDescCreate(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opA = a->trans_w ? CUBLAS_OP_T : CUBLAS_OP_N, opB = CUBLAS_OP_N;
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
    if (a->trans_w)
        FRT_TRY(layout(&d->a, CUDA_R_16BF, a->k, a->n, a->ldw, a->batch, a->sw));
    else
        FRT_TRY(layout(&d->a, CUDA_R_16BF, a->n, a->k, a->ldw, a->batch, a->sw));
    FRT_TRY(layout(&d->b, CUDA_R_16BF, a->k, a->m, a->ldx, a->batch, a->sx));
    FRT_TRY(layout(&d->c, a->y_dtype == FRT_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F, a->n, a->m, a->ldy, a->batch,
                   a->sy));
    FRT_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&d->pref));
    const size_t ws = h->ws_bytes;
    FRT_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                        sizeof ws));
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

static int bmm_enqueue(frt_cuda_bmm *h, void *stream, const frt_cuda_bmm_args *a, bmm_desc *d)
{
    FRT_TRY(desc_build(h, a, d));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    FRT_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(h->lt, d->op, d->a, d->b, d->c, d->c, d->pref, 1, &res, &found));
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS)
        return frt_error(FRT_ERR_UNSUPPORTED, "bmm: no cuBLASLt algorithm for m %d n %d k %d batch %d", a->m, a->n,
                         a->k, a->batch);
    const float alpha = a->alpha, beta = 0.0f;
    FRT_CUBLAS_TRY(cublasLtMatmul(h->lt, d->op, &alpha, a->w, d->a, a->x, d->b, &beta, a->y, d->c, a->y, d->c,
                                  &res.algo, h->ws, h->ws_bytes, (cudaStream_t)stream));
    return 0;
}

extern "C" int frt_cuda_bmm_run(frt_cuda_bmm *h, void *stream, const frt_cuda_bmm_args *a)
{
    FRT_ARG(h && a, "bmm: NULL argument");
    FRT_TRY(bmm_check(a));
    bmm_desc d;
    memset(&d, 0, sizeof d);
    int rc = bmm_enqueue(h, stream, a, &d);
    desc_free(&d);
    return rc;
}
