/*
 * kernels/cuda/gemm_fp8.cu - the FP8 prefill GEMM (gemm_fp8.h):
 * y[n, out] = (xq[n, in] . w[out, in]^T) * s_x[t] * s_w[o] through cuBLASLt
 * with E4M3 A and B, fp32 compute and accumulation, f32 or bf16 D.
 *
 * Layout: as gemm.cu, row-major y [n, out] is column-major y^T [out, n] =
 * W x^T: A = w (column-major [in, out], ld in, op T), B = xq (column-major
 * [in, n], ld in, op N), C = D = y (column-major [out, n], ld out): the "TN"
 * form that Hopper's FP8 kernels require, m = out, n = n, k = in. A's
 * scale is an OUTER_VEC_32F vector of m = out elements (s_w), B's one of n
 * elements (s_x): cuBLASLt multiplies D(i, j) by A_scale[i] * B_scale[j]
 * (cublasLt.h, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F). alpha 1, beta 0.
 *
 * Where the library has no outer-vector algorithm (or the handle's scaling
 * asks for it), the plan leaves the scale modes at their defaults (unit
 * scalars) and fp8_epilogue multiplies the f32 output by s_x[t] * s_w[o]
 * after the GEMM (gemm_fp8.h).
 *
 * One algorithm per (in, out, out dtype): the heuristic's first result for
 * FRT_CUDA_GEMM_FP8_REF_N rows, kept for every n that
 * cublasLtMatmulAlgoCheck accepts (gemm_fp8.h). The plan's descriptors are
 * built for its n. The cuBLASLt handle and the per-stream workspaces are
 * the base frt_cuda_gemm's (gemm_internal.h). Tested in
 * tests/test_cuda_gemm_fp8.c.
 */
#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/gemm_internal.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#define FP8_MAX_PLANS 256 /* the table is allocated whole at create */

struct fp8_plan {
    gemm_plan lt; /* n, in_dim, out_dim, out_dt, desc, a, b, c, algo, ws_needed (kernel: cuBLASLt); lt.like_n:
                     frt_cuda_gemm_fp8_plan_like's source rows (0: its own plan) */
    int shape_algo;
    int lib; /* 1: cuBLASLt applies the scales (OUTER_VEC_32F); 0: fp8_epilogue after it */
    int acc_only; /* FRT_CUDA_GEMM_FP8_SCALES_NONE: unit scales, no epilogue; run_acc only (f32 or bf16 out) */
};

struct frt_cuda_gemm_fp8 {
    frt_cuda_gemm *base;
    frt_cuda_gemm_fp8_scaling scaling; /* for the next plans */
    int own_algo;                       /* for the next plans: their n's heuristic choice (set_own_algo) */
    float *d_dummy; /* [64] f32: the scale pointers the heuristic sees at plan time */
    int n_plans;
    fp8_plan *plans; /* [FP8_MAX_PLANS] */
};

static void fp8_plan_release(fp8_plan *p)
{
    if (p->lt.c) cublasLtMatrixLayoutDestroy(p->lt.c);
    if (p->lt.b) cublasLtMatrixLayoutDestroy(p->lt.b);
    if (p->lt.a) cublasLtMatrixLayoutDestroy(p->lt.a);
    if (p->lt.desc) cublasLtMatmulDescDestroy(p->lt.desc);
}

extern "C" void frt_cuda_gemm_fp8_destroy(frt_cuda_gemm_fp8 *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_plans; i++) fp8_plan_release(&g->plans[i]);
    free(g->plans);
    cudaFree(g->d_dummy);
    free(g);
}

extern "C" int frt_cuda_gemm_fp8_create(frt_cuda_gemm *base, frt_cuda_gemm_fp8 **out)
{
    FRT_ARG(out, "cuda gemm_fp8: NULL out");
    *out = NULL;
    FRT_ARG(base, "cuda gemm_fp8: NULL base handle");
    frt_cuda_gemm_fp8 *g = (frt_cuda_gemm_fp8 *)calloc(1, sizeof *g);
    if (!g) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda gemm_fp8: handle");
    g->base = base;
    g->plans = (fp8_plan *)calloc(FP8_MAX_PLANS, sizeof *g->plans);
    if (!g->plans) {
        frt_cuda_gemm_fp8_destroy(g);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda gemm_fp8: plan table");
    }
    cudaError_t e = cudaMalloc((void **)&g->d_dummy, 64 * sizeof(float));
    if (e != cudaSuccess) {
        g->d_dummy = NULL;
        frt_cuda_gemm_fp8_destroy(g);
        return frt_cuda_fail(e, "cudaMalloc", __FILE__, __LINE__);
    }
    *out = g;
    return 0;
}

/* The next free plan slot, cleared to the key (n, in, out, dtype);
 * FRT_ERR_OUT_OF_RANGE when the table is full. */
static int fp8_slot(frt_cuda_gemm_fp8 *g, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype, fp8_plan **out)
{
    if (g->n_plans == FP8_MAX_PLANS)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cuda gemm_fp8: more than %d plans", FP8_MAX_PLANS);
    fp8_plan *p = &g->plans[g->n_plans];
    memset(p, 0, sizeof *p);
    p->lt.n = n, p->lt.in_dim = in_dim, p->lt.out_dim = out_dim, p->lt.out_dt = out_dtype;
    p->lt.kernel = FRT_CUDA_GEMM_CUBLASLT;
    *out = p;
    return 0;
}

/* Keeps slot p as the next plan (rc 0), or releases and clears it. */
static int fp8_commit(frt_cuda_gemm_fp8 *g, fp8_plan *p, int rc)
{
    if (rc < 0) {
        fp8_plan_release(p);
        memset(p, 0, sizeof *p);
        return rc;
    }
    g->n_plans++;
    return 0;
}

static fp8_plan *fp8_find(const frt_cuda_gemm_fp8 *g, int n, int in_dim, int out_dim, int out_dt)
{
    for (int i = 0; i < g->n_plans; i++) {
        fp8_plan *p = &g->plans[i];
        if (p->lt.n == n && p->lt.in_dim == in_dim && p->lt.out_dim == out_dim && p->lt.out_dt == out_dt) return p;
    }
    return NULL;
}

static int fp8_shape_check(const char *what, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype)
{
    FRT_ARG(out_dtype == FRT_CUDA_F32 || out_dtype == FRT_CUDA_BF16, "cuda gemm_fp8 %s: out dtype must be f32 or bf16",
            what);
    FRT_ARG(n > 0 && in_dim > 0 && out_dim > 0, "cuda gemm_fp8 %s: n %d in %d out %d", what, n, in_dim, out_dim);
    FRT_ARG(in_dim % 16 == 0 && out_dim % 16 == 0, "cuda gemm_fp8 %s: in %d and out %d must be multiples of 16", what,
            in_dim, out_dim);
    return 0;
}

static int set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t size)
{
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(d, a, v, size));
    return 0;
}

/* The two scale pointers of a run (or the dummy at plan time). */
static int set_scales(cublasLtMatmulDesc_t d, const float *w_scale, const float *x_scale)
{
    FRT_TRY(set_attr(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale));
    return set_attr(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof x_scale);
}

/* p->lt's descriptors for its key (fields set on failure are released by
 * the caller). */
static int fp8_descs(const frt_cuda_gemm_fp8 *g, fp8_plan *p)
{
    gemm_plan *l = &p->lt;
    const cudaDataType_t yt = l->out_dt == FRT_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    FRT_CUBLAS_TRY(cublasLtMatmulDescCreate(&l->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    FRT_TRY(set_attr(l->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    FRT_TRY(set_attr(l->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    if (p->lib) {
        FRT_TRY(set_attr(l->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof vec));
        FRT_TRY(set_attr(l->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec));
        FRT_TRY(set_scales(l->desc, g->d_dummy, g->d_dummy));
    }
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l->a, CUDA_R_8F_E4M3, l->in_dim, l->out_dim, l->in_dim));
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l->b, CUDA_R_8F_E4M3, l->in_dim, l->n, l->in_dim));
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l->c, yt, l->out_dim, l->n, l->out_dim));
    return 0;
}

/* The heuristic's first algorithm for p's key at n rows into *algo. */
static int fp8_heuristic(const frt_cuda_gemm_fp8 *g, const fp8_plan *key, int n, cublasLtMatmulAlgo_t *algo)
{
    fp8_plan p;
    memset(&p, 0, sizeof p);
    p.lt = key->lt;
    p.lt.desc = NULL, p.lt.a = p.lt.b = p.lt.c = NULL;
    p.lt.n = n;
    p.lib = key->lib;
    int rc = fp8_descs(g, &p), found = 0;
    cublasLtMatmulHeuristicResult_t res;
    if (rc == 0) rc = gemm_heuristic(g->base, &p.lt, 1, &res, &found);
    if (rc == 0) *algo = res.algo;
    fp8_plan_release(&p);
    return rc;
}

/* Whether algo runs p's descriptors within the workspace (1) or not (0). */
static int fp8_algo_fits(const frt_cuda_gemm_fp8 *g, fp8_plan *p, const cublasLtMatmulAlgo_t *algo)
{
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    gemm_plan *l = &p->lt;
    cublasStatus_t st = cublasLtMatmulAlgoCheck(g->base->lt, l->desc, l->a, l->b, l->c, l->c, algo, &r);
    if (st != CUBLAS_STATUS_SUCCESS || r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > g->base->ws_bytes)
        return 0;
    l->algo = *algo;
    l->ws_needed = r.workspaceSize;
    return 1;
}

/* The shape's algorithm (n = REF_N) when it fits p's n, else (or with
 * g->own_algo) n's own. */
static int fp8_build_as(const frt_cuda_gemm_fp8 *g, fp8_plan *p)
{
    FRT_TRY(fp8_descs(g, p));
    cublasLtMatmulAlgo_t algo;
    if (!g->own_algo) {
        FRT_TRY(fp8_heuristic(g, p, FRT_CUDA_GEMM_FP8_REF_N, &algo));
        p->shape_algo = 1;
        if (fp8_algo_fits(g, p, &algo)) return 0;
    }
    p->shape_algo = 0;
    FRT_TRY(fp8_heuristic(g, p, p->lt.n, &algo));
    if (fp8_algo_fits(g, p, &algo)) return 0;
    return frt_error(FRT_ERR_UNSUPPORTED, "cuda gemm_fp8: no cuBLASLt algorithm for n %d in %d out %d", p->lt.n,
                     p->lt.in_dim, p->lt.out_dim);
}

/* The library's scales when the handle's scaling allows and cuBLASLt has
 * an algorithm, else (AUTO, EPILOGUE) unit scales + the epilogue. */
static int fp8_build(const frt_cuda_gemm_fp8 *g, fp8_plan *p)
{
    if (g->scaling == FRT_CUDA_GEMM_FP8_SCALES_NONE) {
        p->lib = 0;
        p->acc_only = 1;
        return fp8_build_as(g, p);
    }
    if (g->scaling != FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE) {
        p->lib = 1;
        int rc = fp8_build_as(g, p);
        if (rc == 0 || g->scaling == FRT_CUDA_GEMM_FP8_SCALES_LIBRARY) return rc;
        fp8_plan_release(p);
        p->lt.desc = NULL, p->lt.a = p->lt.b = p->lt.c = NULL;
    }
    if (p->lt.out_dt != FRT_CUDA_F32)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gemm_fp8: n %d in %d out %d: bf16 out needs cuBLASLt's outer-vector scales (the "
                         "epilogue scales an f32 output)",
                         p->lt.n, p->lt.in_dim, p->lt.out_dim);
    p->lib = 0;
    return fp8_build_as(g, p);
}

extern "C" int frt_cuda_gemm_fp8_set_own_algo(frt_cuda_gemm_fp8 *g, int own)
{
    FRT_ARG(g, "cuda gemm_fp8 set_own_algo: NULL handle");
    FRT_ARG(own == 0 || own == 1, "cuda gemm_fp8 set_own_algo: %d is not 0 or 1", own);
    g->own_algo = own;
    return 0;
}

extern "C" int frt_cuda_gemm_fp8_set_scaling(frt_cuda_gemm_fp8 *g, frt_cuda_gemm_fp8_scaling scaling)
{
    FRT_ARG(g, "cuda gemm_fp8 set_scaling: NULL handle");
    FRT_ARG(scaling == FRT_CUDA_GEMM_FP8_SCALES_AUTO || scaling == FRT_CUDA_GEMM_FP8_SCALES_LIBRARY ||
                scaling == FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE || scaling == FRT_CUDA_GEMM_FP8_SCALES_NONE,
            "cuda gemm_fp8 set_scaling: bad value %d", (int)scaling);
    g->scaling = scaling;
    return 0;
}

/* y[t, o] = (y[t, o] * x_scale[t]) * w_scale[o], four columns a thread
 * (out_dim % 16 == 0, y 16-byte aligned). */
__global__ void fp8_epilogue_kernel(float4 *y, const float *x_scale, const float4 *w_scale, int n, int out4)
{
    const size_t total = (size_t)n * out4;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const float sx = x_scale[i / (size_t)out4];
        const float4 sw = w_scale[i % (size_t)out4];
        float4 v = y[i];
        v.x = __fmul_rn(__fmul_rn(v.x, sx), sw.x);
        v.y = __fmul_rn(__fmul_rn(v.y, sx), sw.y);
        v.z = __fmul_rn(__fmul_rn(v.z, sx), sw.z);
        v.w = __fmul_rn(__fmul_rn(v.w, sx), sw.w);
        y[i] = v;
    }
}

static int fp8_epilogue(void *stream, float *y, const float *x_scale, const float *w_scale, int n, int out_dim)
{
    const size_t total = (size_t)n * (out_dim / 4);
    fp8_epilogue_kernel<<<frt_grid_blocks(total, 256, 8192), 256, 0, (cudaStream_t)stream>>>(
        (float4 *)y, x_scale, (const float4 *)w_scale, n, out_dim / 4);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_gemm_fp8_plan(frt_cuda_gemm_fp8 *g, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype)
{
    FRT_ARG(g, "cuda gemm_fp8 plan: NULL handle");
    FRT_TRY(fp8_shape_check("plan", n, in_dim, out_dim, out_dtype));
    if (fp8_find(g, n, in_dim, out_dim, out_dtype)) return 0;
    fp8_plan *p = NULL;
    FRT_TRY(fp8_slot(g, n, in_dim, out_dim, out_dtype, &p));
    return fp8_commit(g, p, fp8_build(g, p));
}

extern "C" int frt_cuda_gemm_fp8_plan_like(frt_cuda_gemm_fp8 *g, int n, int n_src, int in_dim, int out_dim,
                                           frt_cuda_dtype out_dtype)
{
    FRT_ARG(g, "cuda gemm_fp8 plan_like: NULL handle");
    FRT_TRY(fp8_shape_check("plan_like", n, in_dim, out_dim, out_dtype));
    FRT_ARG(n_src > 0 && n > n_src, "cuda gemm_fp8 plan_like: %d rows like %d", n, n_src);
    const fp8_plan *src = fp8_find(g, n_src, in_dim, out_dim, out_dtype);
    if (!src)
        return frt_error(FRT_ERR_STATE, "cuda gemm_fp8 plan_like: no plan of %d rows for in %d out %d", n_src, in_dim,
                         out_dim);
    const fp8_plan *have = fp8_find(g, n, in_dim, out_dim, out_dtype);
    if (have) {
        if (have->lt.like_n == n_src) return 0;
        return frt_error(FRT_ERR_STATE, "cuda gemm_fp8 plan_like: the plan of %d rows for in %d out %d has its own "
                         "algorithm", n, in_dim, out_dim);
    }
    fp8_plan *p = NULL;
    FRT_TRY(fp8_slot(g, n, in_dim, out_dim, out_dtype, &p));
    p->lt.like_n = n_src;
    p->lib = src->lib;
    p->acc_only = src->acc_only;
    p->shape_algo = src->shape_algo;
    int rc = fp8_descs(g, p);
    if (rc == 0 && !fp8_algo_fits(g, p, &src->lt.algo))
        rc = frt_error(FRT_ERR_UNSUPPORTED, "cuda gemm_fp8 plan_like: the algorithm of %d rows does not take %d (in %d "
                       "out %d)", n_src, n, in_dim, out_dim);
    return fp8_commit(g, p, rc);
}

/* The check's operands: fixed pseudo-random E4M3 codes (no NaN code) and
 * per-row scales 2^-(t % 5). */
__global__ void fp8_like_fill(uint8_t *xq, size_t n, float *x_scale, int rows)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9e3779b1u + 0x2545f491u;
        h ^= h >> 15;
        h *= 0x2c1b3c6du;
        h ^= h >> 12;
        const uint8_t c = (uint8_t)(h >> 8);
        xq[i] = (c & 0x7f) == 0x7f ? (uint8_t)0x38 : c; /* 0x7f / 0xff are NaN: 1.0 instead */
        if (i < (size_t)rows) x_scale[i] = exp2f(-(float)(i % 5));
    }
}

/* One piece of frt_cuda_gemm_fp8_check_like: rows j * n_src.. by the n_src plan into y_ref. */
typedef struct fp8_like_run {
    frt_cuda_gemm_fp8 *g;
    void *stream, *y_ref;
    frt_cuda_dtype out_dtype;
    const uint8_t *xq, *w;
    const float *x_scale, *w_scale;
    int n_src, in_dim, out_dim;
    int acc_only; /* the plans run through frt_cuda_gemm_fp8_run_acc */
} fp8_like_run;

static int fp8_like_piece(int j, void *user)
{
    const fp8_like_run *r = (const fp8_like_run *)user;
    if (r->acc_only)
        return frt_cuda_gemm_fp8_run_acc(r->g, r->stream, r->y_ref, r->out_dtype,
                                         r->xq + (size_t)j * r->n_src * r->in_dim, r->w, r->n_src, r->in_dim,
                                         r->out_dim);
    return frt_cuda_gemm_fp8_run(r->g, r->stream, r->y_ref, r->out_dtype, r->xq + (size_t)j * r->n_src * r->in_dim,
                                 r->x_scale + (size_t)j * r->n_src, r->w, r->w_scale, r->n_src, r->in_dim,
                                 r->out_dim);
}

extern "C" int frt_cuda_gemm_fp8_check_like(frt_cuda_gemm_fp8 *g, void *stream, int n, int n_src, int in_dim,
                                            int out_dim, frt_cuda_dtype out_dtype, const uint8_t *w,
                                            const float *w_scale, uint8_t *xq, float *x_scale, void *y, void *y_ref,
                                            int *same)
{
    FRT_ARG(g && w && w_scale && xq && x_scale && y && y_ref && same, "cuda gemm_fp8 check_like: NULL pointer");
    FRT_ARG(n_src > 0 && n > n_src && n % n_src == 0, "cuda gemm_fp8 check_like: %d rows in pieces of %d", n,
            n_src);
    *same = 0;
    cudaStream_t st = (cudaStream_t)stream;
    fp8_like_fill<<<1024, 256, 0, st>>>(xq, (size_t)n * in_dim, x_scale, n);
    FRT_LAUNCH_CHECK();
    const fp8_plan *pn = fp8_find(g, n, in_dim, out_dim, out_dtype);
    const int acc_only = pn && pn->acc_only;
    if (acc_only)
        FRT_TRY(frt_cuda_gemm_fp8_run_acc(g, stream, y, out_dtype, xq, w, n, in_dim, out_dim));
    else
        FRT_TRY(frt_cuda_gemm_fp8_run(g, stream, y, out_dtype, xq, x_scale, w, w_scale, n, in_dim, out_dim));
    fp8_like_run r = {g, stream, y_ref, out_dtype, xq, w, x_scale, w_scale, n_src, in_dim, out_dim, acc_only};
    const size_t piece_bytes = (size_t)n_src * out_dim * (out_dtype == FRT_CUDA_BF16 ? 2 : 4);
    return gemm_compare_pieces(st, y, y_ref, piece_bytes, n / n_src, fp8_like_piece, &r, same);
}

/* Plan p's cuBLASLt call, y = w . xq^T (alpha 1, beta 0), on the stream's
 * workspace (FRT_ERR_STATE when the stream has none that p needs). */
static int fp8_matmul(const frt_cuda_gemm_fp8 *g, const fp8_plan *p, void *stream, void *y, const uint8_t *xq,
                      const uint8_t *w, const char *what)
{
    void *ws = NULL;
    size_t ws_bytes = 0;
    gemm_stream_ws(g->base, stream, &ws, &ws_bytes);
    if (p->lt.ws_needed > ws_bytes)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm_fp8 %s: the plan needs %zu bytes of workspace and the stream has none "
                         "(frt_cuda_gemm_add_stream on the base handle)",
                         what, p->lt.ws_needed);
    const float alpha = 1.0f, beta = 0.0f;
    FRT_CUBLAS_TRY(cublasLtMatmul(g->base->lt, p->lt.desc, &alpha, w, p->lt.a, xq, p->lt.b, &beta, y, p->lt.c, y,
                                  p->lt.c, &p->lt.algo, ws, ws_bytes, (cudaStream_t)stream));
    return 0;
}

extern "C" int frt_cuda_gemm_fp8_run(frt_cuda_gemm_fp8 *g, void *stream, void *y, frt_cuda_dtype y_dtype,
                                     const uint8_t *xq, const float *x_scale, const uint8_t *w,
                                     const float *w_scale, int n, int in_dim, int out_dim)
{
    FRT_ARG(g && y && xq && x_scale && w && w_scale, "cuda gemm_fp8 run: NULL pointer");
    FRT_TRY(fp8_shape_check("run", n, in_dim, out_dim, y_dtype));
    const uintptr_t all = (uintptr_t)y | (uintptr_t)xq | (uintptr_t)x_scale | (uintptr_t)w | (uintptr_t)w_scale;
    FRT_ARG((all & (GEMM_ALIGN - 1)) == 0, "cuda gemm_fp8 run: pointers must be %d-byte aligned", GEMM_ALIGN);
    const fp8_plan *p = fp8_find(g, n, in_dim, out_dim, y_dtype);
    if (!p)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm_fp8 run: no plan for n %d in %d out %d %s (frt_cuda_gemm_fp8_plan at setup)", n,
                         in_dim, out_dim, y_dtype == FRT_CUDA_BF16 ? "bf16" : "f32");
    if (p->acc_only)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm_fp8 run: the plan for n %d in %d out %d applies no scales "
                         "(FRT_CUDA_GEMM_FP8_SCALES_NONE): run it with frt_cuda_gemm_fp8_run_acc",
                         n, in_dim, out_dim);
    if (p->lib) FRT_TRY(set_scales(p->lt.desc, w_scale, x_scale));
    FRT_TRY(fp8_matmul(g, p, stream, y, xq, w, "run"));
    return p->lib ? 0 : fp8_epilogue(stream, (float *)y, x_scale, w_scale, n, out_dim);
}

extern "C" int frt_cuda_gemm_fp8_run_acc(frt_cuda_gemm_fp8 *g, void *stream, void *acc, frt_cuda_dtype acc_dtype,
                                         const uint8_t *xq, const uint8_t *w, int n, int in_dim, int out_dim)
{
    FRT_ARG(g && acc && xq && w, "cuda gemm_fp8 run_acc: NULL pointer");
    FRT_TRY(fp8_shape_check("run_acc", n, in_dim, out_dim, acc_dtype));
    const uintptr_t all = (uintptr_t)acc | (uintptr_t)xq | (uintptr_t)w;
    FRT_ARG((all & (GEMM_ALIGN - 1)) == 0, "cuda gemm_fp8 run_acc: pointers must be %d-byte aligned", GEMM_ALIGN);
    const fp8_plan *p = fp8_find(g, n, in_dim, out_dim, acc_dtype);
    if (!p)
        return frt_error(FRT_ERR_STATE, "cuda gemm_fp8 run_acc: no plan for n %d in %d out %d %s", n, in_dim,
                         out_dim, acc_dtype == FRT_CUDA_BF16 ? "bf16" : "f32");
    if (p->lib)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm_fp8 run_acc: the plan for n %d in %d out %d has cuBLASLt apply the scales (plan "
                         "it with FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE or _NONE)",
                         n, in_dim, out_dim);
    return fp8_matmul(g, p, stream, acc, xq, w, "run_acc");
}

extern "C" int frt_cuda_gemm_fp8_mlp(frt_cuda_gemm_fp8 *g, void *stream, uint8_t *xq, float *xs, uint16_t *gate_acc,
                                     uint16_t *up_acc, float *down_acc, const uint8_t *gate_w, const float *gate_s,
                                     const uint8_t *up_w, const float *up_s, const uint8_t *down_w, int n, int hidden,
                                     int inter)
{
    const frt_cuda_dtype B = FRT_CUDA_BF16;
    FRT_TRY(frt_cuda_gemm_fp8_run_acc(g, stream, gate_acc, B, xq, gate_w, n, hidden, inter));
    FRT_TRY(frt_cuda_gemm_fp8_run_acc(g, stream, up_acc, B, xq, up_w, n, hidden, inter));
    /* SwiGLU straight into down's quantized input (the bf16 row never leaves the SM) */
    FRT_TRY(frt_cuda_swiglu_fp8acc_quantize(stream, xq, xs, gate_acc, up_acc, B, xs, gate_s, up_s, n, inter));
    return frt_cuda_gemm_fp8_run_acc(g, stream, down_acc, FRT_CUDA_F32, xq, down_w, n, inter, hidden);
}

extern "C" int frt_cuda_gemm_fp8_plan_count(const frt_cuda_gemm_fp8 *g) { return g ? g->n_plans : 0; }

extern "C" int frt_cuda_gemm_fp8_plan_get(const frt_cuda_gemm_fp8 *g, int i, frt_cuda_gemm_fp8_plan_info *info)
{
    FRT_ARG(g && info, "cuda gemm_fp8 plan_get: NULL pointer");
    if (i < 0 || i >= g->n_plans)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cuda gemm_fp8 plan_get: %d of %d plans", i, g->n_plans);
    const fp8_plan *p = &g->plans[i];
    memset(info, 0, sizeof *info);
    info->n = p->lt.n, info->in_dim = p->lt.in_dim, info->out_dim = p->lt.out_dim;
    info->out_dtype = (frt_cuda_dtype)p->lt.out_dt;
    int ids[7];
    gemm_algo_ids(&p->lt.algo, ids);
    info->algo_id = ids[0], info->tile_id = ids[1], info->stages_id = ids[2], info->splitk_num = ids[3];
    info->reduction_scheme = ids[4], info->cta_swizzling = ids[5], info->custom_option = ids[6];
    info->shape_algo = p->shape_algo;
    info->scales_in_library = p->lib;
    info->scales_none = p->acc_only;
    info->like_n = p->lt.like_n;
    return 0;
}

extern "C" uint64_t frt_cuda_gemm_fp8_fingerprint(const frt_cuda_gemm_fp8 *g)
{
    if (!g) return 0;
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0x38); /* seed: the FP8 plans' hash never equals the bf16 plans' */
    for (int i = 0; i < g->n_plans; i++) {
        frt_cuda_gemm_fp8_plan_info pi; /* ints only: no padding bytes */
        if (frt_cuda_gemm_fp8_plan_get(g, i, &pi) == 0 && !pi.like_n) /* like_n: its source's algorithm */
            XXH64_update(h, &pi, sizeof pi);
    }
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}
