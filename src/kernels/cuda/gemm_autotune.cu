/*
 * kernels/cuda/gemm_autotune.cu - GEMM autotune for the cuBLASLt plans of
 * a frt_cuda_gemm handle (kernels_cuda.h, docs/kernels-cuda.md):
 *   frt_cuda_gemm_autotune  times the heuristic's first N results of every
 *                           cuBLASLt plan and keeps the fastest;
 *   frt_cuda_gemm_save      writes each plan's choice (rank + config ids)
 *                           to a text file (kernels/gemm_tune.h);
 *   frt_cuda_gemm_load      gives each listed shape its saved choice with
 *                           no timing, after checking that the heuristic's
 *                           result at the saved rank is that algorithm;
 *   frt_cuda_gemm_autotune_file  a backend's hook: load the file, or tune
 *                           and save it when there is none.
 * Timing: scratch operands (bf16 x and w from a hash in [-1, 1), y zero)
 * sized for the largest plan, 3 warm-up runs, then cudaEvents around 20
 * runs on the caller's stream and workspace; a candidate cuBLASLt refuses
 * to run (or that needs more workspace than the stream has) is skipped.
 * Tested in tests/test_cuda_gemm_autotune.c (the file format on the CPU in
 * tests/test_gemm_tune.c).
 */
#include "kernels/cuda/gemm_internal.h"

#include <stdio.h>
#include <string.h>

#define TUNE_WARMUP 3
#define TUNE_RUNS 20

/* p[i] = a bf16 in [-1, 1) from a hash of i and seed. */
__global__ void tune_fill(uint16_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = ((uint32_t)i * 2654435761u) ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = __bfloat16_as_ushort(__float2bfloat16((float)(h & 0xffff) / 32768.0f - 1.0f));
    }
}

/* Scratch operands for timing, sized for the largest cuBLASLt plan. */
typedef struct tune_bufs {
    void *x, *w, *y;
} tune_bufs;

static void tune_free(tune_bufs *b)
{
    cudaFree(b->x);
    cudaFree(b->w);
    cudaFree(b->y);
    memset(b, 0, sizeof *b);
}

static int fill(void *p, size_t elems, uint32_t seed, cudaStream_t st)
{
    tune_fill<<<256, 256, 0, st>>>((uint16_t *)p, elems, seed);
    FRT_LAUNCH_CHECK();
    return 0;
}

static int tune_alloc(const frt_cuda_gemm *g, cudaStream_t st, tune_bufs *b)
{
    size_t xe = 0, we = 0, yb = 0;
    for (int i = 0; i < g->n_plans; i++) {
        const gemm_plan *p = &g->plans[i];
        if (p->kernel != FRT_CUDA_GEMM_CUBLASLT || p->like_n) continue;
        xe = xe > (size_t)p->n * p->in_dim ? xe : (size_t)p->n * p->in_dim;
        we = we > (size_t)p->out_dim * p->in_dim ? we : (size_t)p->out_dim * p->in_dim;
        yb = yb > (size_t)p->n * p->out_dim * 4 ? yb : (size_t)p->n * p->out_dim * 4;
    }
    if (!xe) return 0;
    FRT_CUDA_TRY(cudaMalloc(&b->x, xe * 2));
    FRT_CUDA_TRY(cudaMalloc(&b->w, we * 2));
    FRT_CUDA_TRY(cudaMalloc(&b->y, yb));
    FRT_TRY(fill(b->x, xe, 0x51u, st));
    FRT_TRY(fill(b->w, we, 0xa7u, st));
    FRT_CUDA_TRY(cudaMemsetAsync(b->y, 0, yb, st));
    FRT_CUDA_TRY(cudaStreamSynchronize(st));
    return 0;
}

/* The mean time of one run of algo on p's shape (us); 1 when cuBLASLt
 * refuses to run it (not a failure: the candidate is skipped). */
static int time_algo(const frt_cuda_gemm *g, const gemm_plan *p, const cublasLtMatmulAlgo_t *algo, void *ws,
                     size_t ws_bytes, cudaStream_t st, const tune_bufs *b, float *us)
{
    const float alpha = 1.0f, beta = p->accumulate ? 1.0f : 0.0f;
    cudaEvent_t e[2] = {NULL, NULL};
    FRT_CUDA_TRY(cudaEventCreate(&e[0]));
    cudaError_t ce = cudaEventCreate(&e[1]);
    cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
    for (int r = 0; ce == cudaSuccess && cs == CUBLAS_STATUS_SUCCESS && r < TUNE_WARMUP + TUNE_RUNS; r++) {
        if (r == TUNE_WARMUP) ce = cudaEventRecord(e[0], st);
        cs = cublasLtMatmul(g->lt, p->desc, &alpha, b->w, p->a, b->x, p->b, &beta, b->y, p->c, b->y, p->c, algo,
                            ws, ws_bytes, st);
    }
    float ms = 0.0f;
    if (ce == cudaSuccess && cs == CUBLAS_STATUS_SUCCESS) ce = cudaEventRecord(e[1], st);
    if (ce == cudaSuccess && cs == CUBLAS_STATUS_SUCCESS) ce = cudaEventSynchronize(e[1]);
    if (ce == cudaSuccess && cs == CUBLAS_STATUS_SUCCESS) ce = cudaEventElapsedTime(&ms, e[0], e[1]);
    cudaEventDestroy(e[0]);
    if (e[1]) cudaEventDestroy(e[1]);
    if (ce != cudaSuccess) return frt_cuda_fail(ce, "cuda gemm autotune: timing", __FILE__, __LINE__);
    if (cs != CUBLAS_STATUS_SUCCESS) return 1;
    *us = ms * 1000.0f / TUNE_RUNS;
    return 0;
}

static void set_choice(gemm_plan *p, const cublasLtMatmulHeuristicResult_t *r, int index, int candidates,
                       float us_first, float us_best)
{
    p->algo = r->algo;
    p->ws_needed = r->workspaceSize;
    p->tune_index = index;
    p->tune_candidates = candidates;
    p->tune_us_first = us_first;
    p->tune_us_best = us_best;
}

/* One plan: the heuristic's first choice (n 0) or the fastest of its first
 * n results. */
static int tune_plan(const frt_cuda_gemm *g, gemm_plan *p, int n, cudaStream_t st, void *ws, size_t ws_bytes,
                     const tune_bufs *b)
{
    cublasLtMatmulHeuristicResult_t res[FRT_GEMM_TUNE_MAX_CANDIDATES];
    int found = 0, best = -1, timed = 0;
    FRT_TRY(gemm_heuristic(g, p, n ? n : 1, res, &found));
    if (n == 0) {
        set_choice(p, &res[0], 0, 0, 0.0f, 0.0f);
        return 0;
    }
    float us_first = 0.0f, us_best = 0.0f;
    for (int k = 0; k < found; k++) {
        if (res[k].state != CUBLAS_STATUS_SUCCESS || res[k].workspaceSize > ws_bytes) continue;
        float us = 0.0f;
        int rc = time_algo(g, p, &res[k].algo, ws, ws_bytes, st, b, &us);
        if (rc < 0) return rc;
        if (rc) continue;
        timed++;
        if (k == 0) us_first = us;
        if (best < 0 || us < us_best) best = k, us_best = us;
    }
    if (best < 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda gemm autotune: none of %d candidates ran for n %d in %d out %d",
                         found, p->n, p->in_dim, p->out_dim);
    set_choice(p, &res[best], best, timed, us_first, us_best);
    return 0;
}

/* A choice made after frt_cuda_gemm_plan_like would leave the plans that
 * follow it on the old algorithm: refused. */
static int no_like_plans(const frt_cuda_gemm *g, const char *what)
{
    for (int i = 0; i < g->n_plans; i++)
        if (g->plans[i].like_n)
            return frt_error(FRT_ERR_STATE, "cuda gemm %s: after frt_cuda_gemm_plan_like (plan of %d rows)", what,
                             g->plans[i].n);
    return 0;
}

extern "C" int frt_cuda_gemm_autotune(frt_cuda_gemm *g, int n_candidates, void *stream)
{
    FRT_ARG(g, "cuda gemm autotune: NULL handle");
    FRT_ARG(n_candidates >= 0 && n_candidates <= FRT_GEMM_TUNE_MAX_CANDIDATES,
            "cuda gemm autotune: %d candidates (0 to %d)", n_candidates, FRT_GEMM_TUNE_MAX_CANDIDATES);
    FRT_TRY(no_like_plans(g, "autotune"));
    cudaStream_t st = (cudaStream_t)stream;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    FRT_CUDA_TRY(cudaStreamIsCapturing(st, &cap));
    if (cap != cudaStreamCaptureStatusNone)
        return frt_error(FRT_ERR_STATE, "cuda gemm autotune: the stream is capturing (autotune at setup)");
    void *ws = NULL;
    size_t ws_bytes = 0;
    if (!gemm_stream_ws(g, stream, &ws, &ws_bytes) && g->ws_bytes)
        return frt_error(FRT_ERR_STATE, "cuda gemm autotune: the stream was not added (frt_cuda_gemm_add_stream)");
    tune_bufs b;
    memset(&b, 0, sizeof b);
    int rc = n_candidates ? tune_alloc(g, st, &b) : 0;
    for (int i = 0; rc == 0 && i < g->n_plans; i++)
        if (g->plans[i].kernel == FRT_CUDA_GEMM_CUBLASLT && !g->plans[i].like_n && !g->plans[i].epi)
            rc = tune_plan(g, &g->plans[i], n_candidates, st, ws, ws_bytes, &b);
    if (rc == 0) g->tune_n = n_candidates;
    cudaStreamSynchronize(st);
    tune_free(&b);
    return rc;
}

extern "C" int frt_cuda_gemm_candidates(const frt_cuda_gemm *g, int i, int max, int (*ids)[7], int *found)
{
    FRT_ARG(g && ids && found, "cuda gemm candidates: NULL pointer");
    FRT_ARG(max >= 1 && max <= FRT_GEMM_TUNE_MAX_CANDIDATES, "cuda gemm candidates: max %d (1 to %d)", max,
            FRT_GEMM_TUNE_MAX_CANDIDATES);
    if (i < 0 || i >= g->n_plans)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cuda gemm candidates: %d of %d plans", i, g->n_plans);
    const gemm_plan *p = &g->plans[i];
    FRT_ARG(p->kernel == FRT_CUDA_GEMM_CUBLASLT, "cuda gemm candidates: plan %d is a GEMV", i);
    cublasLtMatmulHeuristicResult_t res[FRT_GEMM_TUNE_MAX_CANDIDATES];
    FRT_TRY(gemm_heuristic(g, p, max, res, found));
    for (int k = 0; k < *found; k++) gemm_algo_ids(&res[k].algo, ids[k]);
    return 0;
}

/* The current device's name, cuBLASLt version and g's workspace size. */
static int origin(const frt_cuda_gemm *g, frt_gemm_tune *t)
{
    int dev = 0;
    cudaDeviceProp prop;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaGetDeviceProperties(&prop, dev));
    snprintf(t->device, sizeof t->device, "%s", prop.name);
    t->cublaslt_version = (long long)cublasLtGetVersion();
    t->workspace_bytes = (long long)g->ws_bytes;
    return 0;
}

extern "C" int frt_cuda_gemm_save(const frt_cuda_gemm *g, const char *path)
{
    FRT_ARG(g && path, "cuda gemm save: NULL argument");
    frt_gemm_tune t;
    memset(&t, 0, sizeof t);
    FRT_TRY(origin(g, &t));
    t.candidates = g->tune_n > 0 ? g->tune_n : 1;
    t.e = (frt_gemm_tune_entry *)calloc((size_t)(g->n_plans ? g->n_plans : 1), sizeof *t.e);
    if (!t.e) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda gemm save: out of memory");
    for (int i = 0; i < g->n_plans; i++) {
        const gemm_plan *p = &g->plans[i];
        if (p->kernel != FRT_CUDA_GEMM_CUBLASLT || p->like_n || p->epi) continue;
        frt_gemm_tune_entry *e = &t.e[t.n++];
        e->n = p->n, e->in_dim = p->in_dim, e->out_dim = p->out_dim;
        e->out_bf16 = p->out_dt == FRT_CUDA_BF16;
        e->accumulate = p->accumulate;
        e->index = p->tune_index;
        if (e->index >= t.candidates) t.candidates = e->index + 1;
        gemm_algo_ids(&p->algo, e->algo);
    }
    int rc = frt_gemm_tune_write(path, &t);
    free(t.e);
    return rc;
}

/* The file was tuned here: same device name, cuBLASLt and workspace. */
static int check_origin(const frt_cuda_gemm *g, const frt_gemm_tune *t, const char *path)
{
    frt_gemm_tune here;
    memset(&here, 0, sizeof here);
    FRT_TRY(origin(g, &here));
    if (strcmp(here.device, t->device) || here.cublaslt_version != t->cublaslt_version ||
        here.workspace_bytes != t->workspace_bytes)
        return frt_error(FRT_ERR_STATE,
                         "cuda gemm load: %s was tuned on '%s' with cuBLASLt %lld and a %lld-byte workspace; this is "
                         "'%s' with cuBLASLt %lld and %lld bytes: re-run the autotune",
                         path, t->device, t->cublaslt_version, t->workspace_bytes, here.device,
                         here.cublaslt_version, here.workspace_bytes);
    return 0;
}

/* The saved choice of e: its plan (made when absent) and the heuristic's
 * result at the saved rank, which must be the saved algorithm. */
static int load_entry(frt_cuda_gemm *g, const frt_gemm_tune *t, const frt_gemm_tune_entry *e, const char *path,
                      int *plan, cublasLtMatmulHeuristicResult_t *out)
{
    const frt_cuda_dtype dt = e->out_bf16 ? FRT_CUDA_BF16 : FRT_CUDA_F32;
    FRT_TRY(frt_cuda_gemm_plan(g, e->n, e->in_dim, e->out_dim, dt, e->accumulate));
    const gemm_plan *p = gemm_plan_find(g, e->n, e->in_dim, e->out_dim, dt, e->accumulate);
    *plan = (int)(p - g->plans);
    if (p->kernel != FRT_CUDA_GEMM_CUBLASLT)
        return frt_error(FRT_ERR_STATE, "cuda gemm load: %s: n %d in %d out %d takes the %s here (another GEMV or "
                         "skinny policy than when tuned)", path, e->n, e->in_dim, e->out_dim,
                         p->kernel == FRT_CUDA_GEMM_GEMV ? "GEMV" : "skinny GEMM");
    cublasLtMatmulHeuristicResult_t res[FRT_GEMM_TUNE_MAX_CANDIDATES];
    int found = 0, ids[7];
    FRT_TRY(gemm_heuristic(g, p, t->candidates, res, &found));
    if (e->index < found) gemm_algo_ids(&res[e->index].algo, ids);
    if (e->index >= found || memcmp(ids, e->algo, sizeof ids) || res[e->index].workspaceSize > g->ws_bytes)
        return frt_error(FRT_ERR_STATE, "cuda gemm load: %s: n %d in %d out %d: the heuristic's result %d is not the "
                         "saved algorithm any more: re-run the autotune", path, e->n, e->in_dim, e->out_dim,
                         e->index);
    *out = res[e->index];
    return 0;
}

extern "C" int frt_cuda_gemm_load(frt_cuda_gemm *g, const char *path)
{
    FRT_ARG(g && path, "cuda gemm load: NULL argument");
    FRT_TRY(no_like_plans(g, "load"));
    frt_gemm_tune t;
    FRT_TRY(frt_gemm_tune_read(path, &t));
    int rc = check_origin(g, &t, path);
    int *plan = (int *)calloc((size_t)(t.n ? t.n : 1), sizeof *plan);
    cublasLtMatmulHeuristicResult_t *res =
        (cublasLtMatmulHeuristicResult_t *)calloc((size_t)(t.n ? t.n : 1), sizeof *res);
    if (rc == 0 && (!plan || !res)) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda gemm load: out of memory");
    for (int i = 0; rc == 0 && i < t.n; i++) rc = load_entry(g, &t, &t.e[i], path, &plan[i], &res[i]);
    for (int i = 0; rc == 0 && i < t.n; i++) set_choice(&g->plans[plan[i]], &res[i], t.e[i].index, 0, 0.0f, 0.0f);
    if (rc == 0) g->tune_n = t.candidates;
    free(plan);
    free(res);
    frt_gemm_tune_free(&t);
    return rc;
}

extern "C" int frt_cuda_gemm_autotune_file(frt_cuda_gemm *g, const char *path, int n_candidates, void *stream,
                                           int *tuned)
{
    FRT_ARG(g, "cuda gemm autotune_file: NULL handle");
    if (tuned) *tuned = 0;
    if (n_candidates == 0) return 0;
    if (!path) { /* no file: time at this load, save nothing */
        FRT_TRY(frt_cuda_gemm_autotune(g, n_candidates, stream));
        if (tuned) *tuned = 1;
        return 0;
    }
    int rc = frt_cuda_gemm_load(g, path);
    if (rc != FRT_ERR_NOT_FOUND) return rc;
    FRT_TRY(frt_cuda_gemm_autotune(g, n_candidates, stream));
    FRT_TRY(frt_cuda_gemm_save(g, path));
    if (tuned) *tuned = 1;
    return 0;
}
