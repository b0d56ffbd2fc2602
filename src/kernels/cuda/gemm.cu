/*
 * kernels/cuda/gemm.cu - y[n, out] = x[n, in] . w[out, in]^T (+ y) through
 * cuBLASLt: bf16 inputs, fp32 compute, f32 or bf16 output (the HF Linear
 * layout, as the CPU twins frt_cpu_matmul / frt_cpu_matmul_add).
 *
 * cuBLASLt is column-major. Row-major y [n, out] is column-major y^T
 * [out, n] = W x^T: A = w (column-major [in, out], ld in, op T), B = x
 * (column-major [in, n], ld in, op N), C = D = y (column-major [out, n], ld
 * out): a "TN" GEMM with m = out, n = n, k = in.
 *
 * The algorithm of each (n, in, out, out dtype, accumulate) is chosen once by
 * frt_cuda_gemm_plan through cublasLtMatmulAlgoGetHeuristic (the top result,
 * for 16-byte aligned operands and the handle's workspace size) and cached
 * with its descriptors; frt_cuda_gemm_run only finds the plan and calls
 * cublasLtMatmul, so the hot path (and a captured graph) never runs a
 * heuristic. cuBLAS gives the same bits run to run for a fixed algorithm on
 * the same GPU model (its reductions, split-K included, are ordered); each
 * stream gets its own workspace so concurrent streams never share one.
 *
 * Decode (n <= FRT_CUDA_GEMV_MAX_N) takes frt's own GEMV instead (gemv.cu):
 * the plan then holds gemv_choose's launch configuration.
 *
 * Autotune (frt_cuda_gemm_autotune): per cuBLASLt plan, the heuristic's
 * first N results are timed on scratch operands (cudaEvent, mean of 20 runs
 * after 3 warm-ups) and the fastest is kept; frt_cuda_gemm_save /
 * frt_cuda_gemm_load keep the choice in a text file (kernels/gemm_tune.h)
 * as the result's rank plus its config ids, so a later load takes the same
 * algorithm without timing and refuses a file whose rank now names another
 * algorithm.
 * Tested in tests/test_cuda_kernels.c, tests/test_cuda_gemv.c and
 * tests/test_cuda_gemm_autotune.c.
 */
#include "kernels/cuda/gemm_internal.h"

#include <stdio.h>
#include <string.h>


/* ---- the handle and the plans ------------------------------------------- */

static void plan_release(gemm_plan *p)
{
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
}

extern "C" void frt_cuda_gemm_destroy(frt_cuda_gemm *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_plans; i++) plan_release(&g->plans[i]);
    free(g->plans);
    for (int i = 0; i < g->n_streams; i++) cudaFree(g->ws[i]);
    if (g->lt) cublasLtDestroy(g->lt);
    free(g);
}

extern "C" int frt_cuda_gemm_create(size_t workspace_bytes, frt_cuda_gemm **out)
{
    FRT_ARG(out, "cuda gemm: NULL out");
    *out = NULL;
    frt_cuda_gemm *g = (frt_cuda_gemm *)calloc(1, sizeof *g);
    if (!g) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda gemm: handle");
    g->ws_bytes = workspace_bytes;
    cublasStatus_t st = cublasLtCreate(&g->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        g->lt = NULL;
        frt_cuda_gemm_destroy(g);
        return frt_cublas_fail(st, "cublasLtCreate", __FILE__, __LINE__);
    }
    *out = g;
    return 0;
}

extern "C" int frt_cuda_gemm_add_stream(frt_cuda_gemm *g, void *stream)
{
    FRT_ARG(g, "cuda gemm: NULL handle");
    for (int i = 0; i < g->n_streams; i++)
        if (g->streams[i] == stream) return 0;
    if (g->n_streams == GEMM_MAX_STREAMS)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cuda gemm: more than %d streams", GEMM_MAX_STREAMS);
    void *ws = NULL;
    if (g->ws_bytes) FRT_CUDA_TRY(cudaMalloc(&ws, g->ws_bytes));
    g->streams[g->n_streams] = stream;
    g->ws[g->n_streams] = ws;
    g->n_streams++;
    return 0;
}

/* The plan of a shape and epilogue, or NULL. */
static gemm_plan *plan_find_epi(const frt_cuda_gemm *g, int n, int in_dim, int out_dim, int out_dt, int accumulate,
                                int epi)
{
    for (int i = 0; i < g->n_plans; i++) {
        gemm_plan *p = &g->plans[i];
        if (p->n == n && p->in_dim == in_dim && p->out_dim == out_dim && p->out_dt == out_dt &&
            p->accumulate == accumulate && p->epi == epi)
            return p;
    }
    return NULL;
}

gemm_plan *gemm_plan_find(const frt_cuda_gemm *g, int n, int in_dim, int out_dim, int out_dt,
                            int accumulate)
{
    return plan_find_epi(g, n, in_dim, out_dim, out_dt, accumulate, FRT_CUDA_GEMM_EPI_NONE);
}

/* The checks common to both kernels (out_dim % 8 is the cuBLASLt path's). */
static int shape_check(const char *what, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype)
{
    FRT_ARG(frt_dtype_ok(out_dtype), "cuda gemm %s: bad dtype", what);
    FRT_ARG(n > 0 && in_dim > 0 && out_dim > 0, "cuda gemm %s: n %d in %d out %d", what, n, in_dim,
            out_dim);
    FRT_ARG(in_dim % 8 == 0, "cuda gemm %s: in %d must be a multiple of 8", what, in_dim);
    FRT_ARG(n <= FRT_CUDA_GEMV_MAX_N || out_dim % 8 == 0,
            "cuda gemm %s: out %d must be a multiple of 8 (n %d > %d)", what, out_dim, n,
            FRT_CUDA_GEMV_MAX_N);
    return 0;
}

extern "C" int frt_cuda_gemm_set_gemv(frt_cuda_gemm *g, frt_cuda_gemv_policy policy)
{
    FRT_ARG(g, "cuda gemm set_gemv: NULL handle");
    FRT_ARG(policy == FRT_CUDA_GEMV_AUTO || policy == FRT_CUDA_GEMV_NEVER ||
                policy == FRT_CUDA_GEMV_ALWAYS,
            "cuda gemm set_gemv: bad policy %d", (int)policy);
    g->gemv_policy = policy;
    return 0;
}

extern "C" int frt_cuda_gemm_set_skinny(frt_cuda_gemm *g, int on)
{
    FRT_ARG(g, "cuda gemm set_skinny: NULL handle");
    FRT_ARG(on == 0 || on == 1, "cuda gemm set_skinny: %d (0 or 1)", on);
    g->skinny = on;
    return 0;
}

/* Makes *p a skinny plan when the handle takes them and the shape fits
 * the kernel; leaves p->kernel otherwise. */
static int skinny_plan(const frt_cuda_gemm *g, gemm_plan *p)
{
    if (!g->skinny) return 0;
    skinny_cfg c;
    FRT_TRY(gemm_skinny_choose(p->n, p->in_dim, p->out_dim, 0, &c));
    if (!c.on) return 0;
    if (!p->accumulate) FRT_TRY(gemm_skinny_choose(p->n, p->in_dim, p->out_dim, 1, &p->skg));
    p->kernel = FRT_CUDA_GEMM_SKINNY;
    p->sk = c;
    return 0;
}

/* The skinny plan whose SwiGLU form serves (n, in, out, products), or NULL. */
static const gemm_plan *swiglu_plan(const frt_cuda_gemm *g, int n, int in_dim, int out_dim, frt_cuda_dtype products)
{
    if (!g || !frt_dtype_ok(products)) return NULL;
    const gemm_plan *p = gemm_plan_find(g, n, in_dim, out_dim, products, 0);
    return p && p->kernel == FRT_CUDA_GEMM_SKINNY && p->skg.on ? p : NULL;
}

extern "C" int frt_cuda_gemm_swiglu_ok(const frt_cuda_gemm *g, int n, int in_dim, int out_dim,
                                       frt_cuda_dtype products)
{
    return swiglu_plan(g, n, in_dim, out_dim, products) != NULL;
}

extern "C" int frt_cuda_gemm_swiglu(frt_cuda_gemm *g, void *stream, uint16_t *y, const uint16_t *x,
                                    const uint16_t *w_gate, const uint16_t *w_up, int n, int in_dim, int out_dim,
                                    frt_cuda_dtype products)
{
    FRT_ARG(g && y && x && w_gate && w_up, "cuda gemm swiglu: NULL pointer");
    FRT_TRY(shape_check("swiglu", n, in_dim, out_dim, products));
    FRT_ARG((((uintptr_t)y | (uintptr_t)x | (uintptr_t)w_gate | (uintptr_t)w_up) & (GEMM_ALIGN - 1)) == 0,
            "cuda gemm swiglu: pointers must be %d-byte aligned", GEMM_ALIGN);
    const gemm_plan *p = swiglu_plan(g, n, in_dim, out_dim, products);
    if (!p)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gemm swiglu: n %d in %d out %d has no skinny plan of %s out (frt_cuda_gemm_set_skinny "
                         "and frt_cuda_gemm_plan at setup; 9 to 64 rows on a Hopper device)",
                         n, in_dim, out_dim, products == FRT_CUDA_BF16 ? "bf16" : "f32");
    return gemm_skinny_glu_run(&p->skg, stream, y, x, w_gate, w_up, n, in_dim, out_dim, products == FRT_CUDA_BF16);
}

/* Makes *p a GEMV plan when the policy takes it and x fits the device's
 * shared memory; leaves p->kernel cuBLASLt otherwise. */
static int gemv_plan(const frt_cuda_gemm *g, gemm_plan *p)
{
    if (p->n > FRT_CUDA_GEMV_MAX_N || g->gemv_policy == FRT_CUDA_GEMV_NEVER) return 0;
    const size_t wbytes = (size_t)p->out_dim * (size_t)p->in_dim * 2;
    if (g->gemv_policy == FRT_CUDA_GEMV_AUTO && wbytes > FRT_CUDA_GEMV_AUTO_MAX_BYTES &&
        p->out_dim % 8 == 0)
        return 0;
    gemv_cfg c;
    gemv_choose(p->n, p->in_dim, p->out_dim, &c);
    int dev = 0, optin = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (c.smem > (size_t)optin) return 0; /* x too long for shared memory: cuBLASLt */
    /* Allow the device maximum (not this plan's size: another plan of the
     * same instantiation may need more); occupancy follows the launch's
     * actual size. */
    if (c.smem > (48u << 10))
        FRT_CUDA_TRY(cudaFuncSetAttribute((const void *)c.fn,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    p->kernel = FRT_CUDA_GEMM_GEMV;
    p->gv = c;
    return 0;
}

/* The heuristic's first `want` (1..FRT_GEMM_TUNE_MAX_CANDIDATES) results
 * for p's descriptors, for 16-byte aligned operands and the handle's
 * workspace, ranked; *found of them. */
int gemm_heuristic(const frt_cuda_gemm *g, const gemm_plan *p, int want, cublasLtMatmulHeuristicResult_t *res,
                     int *found)
{
    cublasLtMatmulPreference_t pref = NULL;
    FRT_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const uint32_t align = GEMM_ALIGN;
    const size_t ws = g->ws_bytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &align, sizeof align);
    memset(res, 0, (size_t)want * sizeof *res);
    *found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->a, p->b, p->c, p->c, pref, want, res,
                                            found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS)
        return frt_cublas_fail(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (*found < 1 || res[0].state != CUBLAS_STATUS_SUCCESS)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gemm: no cuBLASLt algorithm for n %d in %d out %d (%s out)", p->n,
                         p->in_dim, p->out_dim, p->out_dt == FRT_CUDA_BF16 ? "bf16" : "f32");
    return 0;
}

/* Builds p's descriptors (fields set on failure are released by the
 * caller). */
static int plan_layouts(gemm_plan *p)
{
    const cudaDataType_t yt = p->out_dt == FRT_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    FRT_CUBLAS_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT,
                                                  sizeof opT));
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN,
                                                  sizeof opN));
    if (p->epi != FRT_CUDA_GEMM_EPI_NONE) { /* the bias (bf16, one per output column) and GELU after the sum */
        const cublasLtEpilogue_t ep =
            p->epi == FRT_CUDA_GEMM_EPI_BIAS ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
        const cudaDataType_t bt = CUDA_R_16BF;
        FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, p->in_dim, p->out_dim, p->in_dim));
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, p->in_dim, p->n, p->in_dim));
    FRT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->c, yt, p->out_dim, p->n, p->out_dim));
    return 0;
}

/* Builds the descriptors and runs the heuristic into *p (fields set on
 * failure are released by the caller). */
static int plan_build(frt_cuda_gemm *g, gemm_plan *p)
{
    FRT_TRY(plan_layouts(p));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    FRT_TRY(gemm_heuristic(g, p, 1, &res, &found));
    p->algo = res.algo;
    p->ws_needed = res.workspaceSize;
    return 0;
}

/* A plan's key, everything else zero. */
static gemm_plan plan_key(int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype, int accumulate)
{
    gemm_plan p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.in_dim = in_dim;
    p.out_dim = out_dim;
    p.out_dt = out_dtype;
    p.accumulate = accumulate;
    p.kernel = FRT_CUDA_GEMM_CUBLASLT;
    return p;
}

/* Room for one more plan in the table. */
static int plan_room(frt_cuda_gemm *g)
{
    if (g->n_plans == GEMM_MAX_PLANS)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cuda gemm: more than %d plans", GEMM_MAX_PLANS);
    if (g->n_plans == g->cap_plans) {
        int cap = g->cap_plans ? 2 * g->cap_plans : 16;
        gemm_plan *np = (gemm_plan *)realloc(g->plans, (size_t)cap * sizeof *np);
        if (!np) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda gemm: plan table");
        g->plans = np;
        g->cap_plans = cap;
    }
    return 0;
}

extern "C" int frt_cuda_gemm_plan(frt_cuda_gemm *g, int n, int in_dim, int out_dim,
                                  frt_cuda_dtype out_dtype, int accumulate)
{
    FRT_ARG(g, "cuda gemm plan: NULL handle");
    FRT_TRY(shape_check("plan", n, in_dim, out_dim, out_dtype));
    accumulate = accumulate ? 1 : 0;
    if (gemm_plan_find(g, n, in_dim, out_dim, out_dtype, accumulate)) return 0;
    FRT_TRY(plan_room(g));
    gemm_plan p = plan_key(n, in_dim, out_dim, out_dtype, accumulate);
    int rc = gemv_plan(g, &p);
    if (rc == 0 && p.kernel == FRT_CUDA_GEMM_CUBLASLT) rc = skinny_plan(g, &p);
    if (rc == 0 && p.kernel == FRT_CUDA_GEMM_CUBLASLT) {
        if (out_dim % 8 != 0)
            return frt_error(FRT_ERR_INVALID_ARGUMENT,
                             "cuda gemm plan: out %d must be a multiple of 8 on the cuBLASLt path",
                             out_dim);
        rc = plan_build(g, &p);
    }
    if (rc < 0) {
        plan_release(&p);
        return rc;
    }
    g->plans[g->n_plans++] = p;
    return 0;
}

static int gemm_run(frt_cuda_gemm *g, void *stream, const int32_t *d_skip, void *y, frt_cuda_dtype y_dtype,
                    const uint16_t *x, const uint16_t *w, int n, int in_dim, int out_dim, int accumulate);

extern "C" int frt_cuda_gemm_plan_like(frt_cuda_gemm *g, int n, int n_src, int in_dim, int out_dim,
                                       frt_cuda_dtype out_dtype, int accumulate, int rank)
{
    FRT_ARG(g, "cuda gemm plan_like: NULL handle");
    FRT_TRY(shape_check("plan_like", n, in_dim, out_dim, out_dtype));
    FRT_ARG(n_src > 0 && n > n_src, "cuda gemm plan_like: %d rows like %d", n, n_src);
    FRT_ARG(rank >= -1 && rank < FRT_GEMM_TUNE_MAX_CANDIDATES, "cuda gemm plan_like: rank %d", rank);
    accumulate = accumulate ? 1 : 0;
    const gemm_plan *src = gemm_plan_find(g, n_src, in_dim, out_dim, out_dtype, accumulate);
    if (!src || src->kernel != FRT_CUDA_GEMM_CUBLASLT)
        return frt_error(FRT_ERR_STATE, "cuda gemm plan_like: no cuBLASLt plan of %d rows for in %d out %d", n_src,
                         in_dim, out_dim);
    gemm_plan *have = gemm_plan_find(g, n, in_dim, out_dim, out_dtype, accumulate);
    if (have && have->like_n != n_src)
        return frt_error(FRT_ERR_STATE, "cuda gemm plan_like: the plan of %d rows for in %d out %d has its own "
                         "algorithm", n, in_dim, out_dim);
    if (!have) FRT_TRY(plan_room(g));
    src = gemm_plan_find(g, n_src, in_dim, out_dim, out_dtype, accumulate); /* the table may have moved */
    gemm_plan p = plan_key(n, in_dim, out_dim, out_dtype, accumulate);
    p.like_n = n_src;
    p.algo = src->algo;
    p.tune_index = rank;
    int rc = plan_layouts(&p);
    if (rc == 0 && rank >= 0) { /* the heuristic's result of that rank for n rows */
        cublasLtMatmulHeuristicResult_t res[FRT_GEMM_TUNE_MAX_CANDIDATES];
        int found = 0;
        rc = gemm_heuristic(g, &p, rank + 1, res, &found);
        if (rc == 0 && (found <= rank || res[rank].state != CUBLAS_STATUS_SUCCESS))
            rc = frt_error(FRT_ERR_NOT_FOUND, "cuda gemm plan_like: the heuristic has %d results for n %d in %d out %d "
                           "(rank %d asked)", found, n, in_dim, out_dim, rank);
        if (rc == 0) p.algo = res[rank].algo;
    }
    if (rc == 0) {
        cublasLtMatmulHeuristicResult_t res;
        memset(&res, 0, sizeof res);
        cublasStatus_t st = cublasLtMatmulAlgoCheck(g->lt, p.desc, p.a, p.b, p.c, p.c, &p.algo, &res);
        if (st != CUBLAS_STATUS_SUCCESS || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > g->ws_bytes)
            rc = frt_error(FRT_ERR_UNSUPPORTED, "cuda gemm plan_like: the algorithm (rank %d) does not take %d rows "
                           "(in %d out %d; cuBLASLt status %d)", rank, n, in_dim, out_dim, (int)st);
        else
            p.ws_needed = res.workspaceSize;
    }
    if (rc < 0) {
        plan_release(&p);
        return rc;
    }
    if (have) { /* re-pointed */
        plan_release(have);
        *have = p;
    } else {
        g->plans[g->n_plans++] = p;
    }
    return 0;
}

/* The check's operand: a fixed pseudo-random bf16 in [-1, 1) per element. */
__global__ void like_fill(uint16_t *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9e3779b1u + 0x7f4a7c15u;
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        x[i] = (uint16_t)(0x3f80u | (h & 0x8000u) | ((h >> 8) & 0x007fu)); /* +-[1, 2) ... */
        x[i] = (uint16_t)(x[i] - (uint16_t)((h >> 20) & 0x0380u));        /* ... scaled by 2^-(0..7) */
    }
}

/* Counts the 32-bit words where a and b differ into *bad. */
__global__ void like_compare(const uint32_t *a, const uint32_t *b, size_t n, unsigned int *bad)
{
    unsigned int k = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        k += a[i] != b[i];
    if (k) atomicAdd(bad, k);
}

int gemm_compare_pieces(cudaStream_t st, const void *y, void *y_ref, size_t piece_bytes, int pieces,
                        int (*run_piece)(int j, void *user), void *user, int *same)
{
    *same = 0;
    unsigned int *bad = NULL, nbad = 0;
    FRT_CUDA_TRY(cudaMalloc(&bad, sizeof *bad));
    cudaError_t e = cudaMemsetAsync(bad, 0, sizeof *bad, st);
    int rc = e == cudaSuccess ? 0 : frt_cuda_fail(e, "cudaMemsetAsync", __FILE__, __LINE__);
    for (int j = 0; rc == 0 && j < pieces; j++) {
        rc = run_piece(j, user);
        if (rc == 0) {
            like_compare<<<512, 256, 0, st>>>((const uint32_t *)((const char *)y + (size_t)j * piece_bytes),
                                              (const uint32_t *)y_ref, piece_bytes / 4, bad);
            e = cudaGetLastError();
            if (e != cudaSuccess) rc = frt_cuda_fail(e, "like_compare", __FILE__, __LINE__);
        }
    }
    if (rc == 0) {
        e = cudaMemcpyAsync(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost, st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(st);
        if (e != cudaSuccess) rc = frt_cuda_fail(e, "the row check", __FILE__, __LINE__);
    }
    cudaFree(bad);
    if (rc == 0) *same = nbad == 0;
    return rc;
}

/* One piece of frt_cuda_gemm_check_like: rows j * n_src.. by the n_src plan into y_ref. */
typedef struct like_run {
    frt_cuda_gemm *g;
    void *stream, *y_ref;
    frt_cuda_dtype out_dtype;
    const uint16_t *x, *w;
    int n_src, in_dim, out_dim, accumulate;
} like_run;

static int like_piece(int j, void *user)
{
    const like_run *r = (const like_run *)user;
    if (r->accumulate)
        FRT_CUDA_TRY(cudaMemsetAsync(r->y_ref, 0, (size_t)r->n_src * r->out_dim * (r->out_dtype == FRT_CUDA_BF16 ? 2 : 4),
                                     (cudaStream_t)r->stream));
    return gemm_run(r->g, r->stream, NULL, r->y_ref, r->out_dtype, r->x + (size_t)j * r->n_src * r->in_dim, r->w,
                    r->n_src, r->in_dim, r->out_dim, r->accumulate);
}

extern "C" int frt_cuda_gemm_check_like(frt_cuda_gemm *g, void *stream, int n, int n_src, int in_dim, int out_dim,
                                        int accumulate, frt_cuda_dtype out_dtype, const uint16_t *w, uint16_t *x, void *y,
                                        void *y_ref, int *same)
{
    FRT_ARG(g && w && x && y && y_ref && same, "cuda gemm check_like: NULL pointer");
    FRT_ARG(n_src > 0 && n > n_src && n % n_src == 0, "cuda gemm check_like: %d rows in pieces of %d", n, n_src);
    *same = 0;
    cudaStream_t st = (cudaStream_t)stream;
    like_fill<<<1024, 256, 0, st>>>(x, (size_t)n * in_dim);
    FRT_LAUNCH_CHECK();
    accumulate = accumulate ? 1 : 0;
    if (accumulate)
        FRT_CUDA_TRY(cudaMemsetAsync(y, 0, (size_t)n * out_dim * (out_dtype == FRT_CUDA_BF16 ? 2 : 4), st));
    FRT_TRY(gemm_run(g, stream, NULL, y, out_dtype, x, w, n, in_dim, out_dim, accumulate));
    like_run r = {g, stream, y_ref, out_dtype, x, w, n_src, in_dim, out_dim, accumulate};
    const size_t piece_bytes = (size_t)n_src * out_dim * (out_dtype == FRT_CUDA_BF16 ? 2 : 4);
    return gemm_compare_pieces(st, y, y_ref, piece_bytes, n / n_src, like_piece, &r, same);
}

/* The workspace of an added stream (*ws NULL, *bytes 0 otherwise); 1 when
 * the stream was added. */
int gemm_stream_ws(const frt_cuda_gemm *g, void *stream, void **ws, size_t *bytes)
{
    for (int i = 0; i < g->n_streams; i++)
        if (g->streams[i] == stream) {
            *ws = g->ws[i];
            *bytes = g->ws_bytes;
            return 1;
        }
    *ws = NULL;
    *bytes = 0;
    return 0;
}

/* The workspace of `stream` for cuBLASLt plan p into *ws, *bytes;
 * FRT_ERR_STATE when the plan needs more than the stream has. */
static int plan_ws(const frt_cuda_gemm *g, const gemm_plan *p, void *stream, const char *what, void **ws,
                   size_t *bytes)
{
    gemm_stream_ws(g, stream, ws, bytes);
    if (p->ws_needed > *bytes)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm %s: the plan needs %zu bytes of workspace and the stream has "
                         "none (frt_cuda_gemm_add_stream at setup)",
                         what, p->ws_needed);
    return 0;
}

static int gemm_run(frt_cuda_gemm *g, void *stream, const int32_t *d_skip, void *y,
                    frt_cuda_dtype y_dtype, const uint16_t *x, const uint16_t *w, int n, int in_dim,
                    int out_dim, int accumulate)
{
    FRT_ARG(g && y && x && w, "cuda gemm run: NULL pointer");
    FRT_TRY(shape_check("run", n, in_dim, out_dim, y_dtype));
    FRT_ARG((((uintptr_t)y | (uintptr_t)x | (uintptr_t)w) & (GEMM_ALIGN - 1)) == 0,
            "cuda gemm run: pointers must be %d-byte aligned", GEMM_ALIGN);
    accumulate = accumulate ? 1 : 0;
    const gemm_plan *p = gemm_plan_find(g, n, in_dim, out_dim, y_dtype, accumulate);
    if (!p)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm run: no plan for n %d in %d out %d %s%s (frt_cuda_gemm_plan "
                         "at setup)",
                         n, in_dim, out_dim, y_dtype == FRT_CUDA_BF16 ? "bf16" : "f32",
                         accumulate ? " accumulate" : "");
    if (p->kernel == FRT_CUDA_GEMM_GEMV) {
        const gemv_cfg *c = &p->gv;
        FRT_CUDA_TRY(frt_pdl_launch(c->fn, c->blocks, c->warps * 32, c->smem, stream, y,
                                 (int)(y_dtype == FRT_CUDA_BF16), accumulate, (const uint4 *)x,
                                 (const uint4 *)w, in_dim / 8, out_dim, c->kw, d_skip));
        return 0;
    }
    if (d_skip)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gemm run_unless: n %d in %d out %d has a %s plan (the device-side "
                         "skip needs the GEMV)",
                         n, in_dim, out_dim, p->kernel == FRT_CUDA_GEMM_SKINNY ? "skinny" : "cuBLASLt");
    if (p->kernel == FRT_CUDA_GEMM_SKINNY) /* no workspace */
        return gemm_skinny_run(&p->sk, stream, y, y_dtype == FRT_CUDA_BF16, x, w, n, in_dim, out_dim, accumulate);
    void *ws = NULL;
    size_t ws_bytes = 0;
    FRT_TRY(plan_ws(g, p, stream, "run", &ws, &ws_bytes));
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    FRT_CUBLAS_TRY(cublasLtMatmul(g->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c, y,
                                  p->c, &p->algo, ws, ws_bytes, (cudaStream_t)stream));
    return 0;
}

extern "C" int frt_cuda_gemm_run(frt_cuda_gemm *g, void *stream, void *y, frt_cuda_dtype y_dtype,
                                 const uint16_t *x, const uint16_t *w, int n, int in_dim,
                                 int out_dim, int accumulate)
{
    return gemm_run(g, stream, NULL, y, y_dtype, x, w, n, in_dim, out_dim, accumulate);
}

extern "C" int frt_cuda_gemm_run_unless(frt_cuda_gemm *g, void *stream, const int32_t *d_skip,
                                        void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                                        const uint16_t *w, int n, int in_dim, int out_dim,
                                        int accumulate)
{
    FRT_ARG(d_skip, "cuda gemm run_unless: NULL d_skip");
    return gemm_run(g, stream, d_skip, y, y_dtype, x, w, n, in_dim, out_dim, accumulate);
}

static const char *epi_name(int epi)
{
    return epi == FRT_CUDA_GEMM_EPI_BIAS ? "bias" : epi == FRT_CUDA_GEMM_EPI_BIAS_GELU ? "bias + gelu" : "none";
}

extern "C" int frt_cuda_gemm_plan_epilogue(frt_cuda_gemm *g, int n, int in_dim, int out_dim, frt_cuda_gemm_epilogue epi)
{
    FRT_ARG(g, "cuda gemm plan_epilogue: NULL handle");
    FRT_ARG(epi == FRT_CUDA_GEMM_EPI_BIAS || epi == FRT_CUDA_GEMM_EPI_BIAS_GELU, "cuda gemm plan_epilogue: epilogue %d",
            (int)epi);
    FRT_TRY(shape_check("plan_epilogue", n, in_dim, out_dim, FRT_CUDA_BF16));
    FRT_ARG(out_dim % 8 == 0, "cuda gemm plan_epilogue: out %d must be a multiple of 8", out_dim);
    if (plan_find_epi(g, n, in_dim, out_dim, FRT_CUDA_BF16, 0, epi)) return 0;
    FRT_TRY(plan_room(g));
    gemm_plan p = plan_key(n, in_dim, out_dim, FRT_CUDA_BF16, 0);
    p.epi = epi;
    int rc = plan_build(g, &p);
    if (rc < 0) {
        plan_release(&p);
        return rc;
    }
    g->plans[g->n_plans++] = p;
    return 0;
}

extern "C" int frt_cuda_gemm_run_epilogue(frt_cuda_gemm *g, void *stream, uint16_t *y, const uint16_t *x,
                                          const uint16_t *w, const uint16_t *bias, int n, int in_dim, int out_dim,
                                          frt_cuda_gemm_epilogue epi)
{
    FRT_ARG(g && y && x && w && bias, "cuda gemm run_epilogue: NULL pointer");
    FRT_ARG(epi == FRT_CUDA_GEMM_EPI_BIAS || epi == FRT_CUDA_GEMM_EPI_BIAS_GELU, "cuda gemm run_epilogue: epilogue %d",
            (int)epi);
    FRT_TRY(shape_check("run_epilogue", n, in_dim, out_dim, FRT_CUDA_BF16));
    FRT_ARG((((uintptr_t)y | (uintptr_t)x | (uintptr_t)w | (uintptr_t)bias) & (GEMM_ALIGN - 1)) == 0,
            "cuda gemm run_epilogue: pointers must be %d-byte aligned", GEMM_ALIGN);
    const gemm_plan *p = plan_find_epi(g, n, in_dim, out_dim, FRT_CUDA_BF16, 0, epi);
    if (!p)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm run_epilogue: no plan for n %d in %d out %d with the %s epilogue "
                         "(frt_cuda_gemm_plan_epilogue at setup)",
                         n, in_dim, out_dim, epi_name(epi));
    void *ws = NULL;
    size_t ws_bytes = 0;
    FRT_TRY(plan_ws(g, p, stream, "run_epilogue", &ws, &ws_bytes));
    /* The bias is an attribute of the plan's descriptor: set for this call
     * (read when the launch is enqueued, and kept by a graph capture). */
    FRT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const float alpha = 1.0f, beta = 0.0f;
    FRT_CUBLAS_TRY(cublasLtMatmul(g->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c, y, p->c, &p->algo, ws,
                                  ws_bytes, (cudaStream_t)stream));
    return 0;
}

extern "C" int frt_cuda_gemm_plan_count(const frt_cuda_gemm *g) { return g ? g->n_plans : 0; }

extern "C" int frt_cuda_gemm_gemv_rows(const frt_cuda_gemm *g)
{
    if (!g) return 0;
    int rows = FRT_CUDA_GEMV_MAX_N;
    for (int i = 0; i < g->n_plans; i++)
        if (g->plans[i].kernel != FRT_CUDA_GEMM_GEMV && g->plans[i].n <= rows) rows = g->plans[i].n - 1;
    return rows;
}

static int algo_attr(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr)
{
    uint32_t v = 0; /* the attributes are int32/uint32/uint16: read into a zeroed 32-bit */
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &written) !=
        CUBLAS_STATUS_SUCCESS)
        return -1;
    return (int)v;
}

/* The config ids of an algorithm: id, tile, stages, split-k, reduction,
 * swizzle, custom option (the order of frt_gemm_tune_entry.algo). */
void gemm_algo_ids(const cublasLtMatmulAlgo_t *a, int ids[7])
{
    static const cublasLtMatmulAlgoConfigAttributes_t attr[7] = {
        CUBLASLT_ALGO_CONFIG_ID,           CUBLASLT_ALGO_CONFIG_TILE_ID,
        CUBLASLT_ALGO_CONFIG_STAGES_ID,    CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
        CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
        CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION};
    for (int i = 0; i < 7; i++) ids[i] = algo_attr(a, attr[i]);
}

extern "C" int frt_cuda_gemm_plan_get(const frt_cuda_gemm *g, int i, frt_cuda_gemm_plan_info *info)
{
    FRT_ARG(g && info, "cuda gemm plan_get: NULL pointer");
    if (i < 0 || i >= g->n_plans)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cuda gemm plan_get: %d of %d plans", i, g->n_plans);
    const gemm_plan *p = &g->plans[i];
    memset(info, 0, sizeof *info);
    info->n = p->n;
    info->in_dim = p->in_dim;
    info->out_dim = p->out_dim;
    info->out_dtype = (frt_cuda_dtype)p->out_dt;
    info->accumulate = p->accumulate;
    info->epilogue = (frt_cuda_gemm_epilogue)p->epi;
    info->kernel = p->kernel;
    if (p->kernel == FRT_CUDA_GEMM_GEMV) {
        const gemv_cfg *c = &p->gv;
        info->algo_id = -1;
        info->tile_id = c->warps / c->kw * c->nr;
        info->stages_id = GEMV_LOADS;
        info->splitk_num = c->kw;
        info->reduction_scheme = 0;
        info->cta_swizzling = c->warps;
        info->custom_option = GEMV_VERSION;
        info->gemv_rows_per_warp = c->nr;
        info->gemv_blocks = c->blocks;
        info->tune_index = -1;
        return 0;
    }
    if (p->kernel == FRT_CUDA_GEMM_SKINNY) {
        info->algo_id = -2;
        info->tile_id = p->sk.tiles;
        info->stages_id = p->sk.kb;
        info->splitk_num = p->sk.splits;
        info->reduction_scheme = p->skg.on ? p->skg.splits : 0; /* the SwiGLU form's bits depend on it too */
        info->cta_swizzling = p->skg.on ? p->skg.tiles : 0;
        info->custom_option = GEMM_SKINNY_VERSION;
        info->tune_index = -1;
        return 0;
    }
    int ids[7];
    gemm_algo_ids(&p->algo, ids);
    info->algo_id = ids[0];
    info->tile_id = ids[1];
    info->stages_id = ids[2];
    info->splitk_num = ids[3];
    info->reduction_scheme = ids[4];
    info->cta_swizzling = ids[5];
    info->custom_option = ids[6];
    memcpy(info->algo_data, p->algo.data, sizeof info->algo_data);
    info->tune_index = p->tune_index;
    info->tune_candidates = p->tune_candidates;
    info->tune_us_first = p->tune_us_first;
    info->tune_us_best = p->tune_us_best;
    info->like_n = p->like_n;
    return 0;
}
