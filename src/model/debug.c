/*
 * debug.c - the measurement hooks of frt/debug.h that need kernels: the
 * axpb chain step and the timed GEMMs (bf16, FP8) of the benchmark's
 * ceilings.
 */
#include "frt/debug.h"

#include "util/error.h"

#if FRT_HAVE_CUDA
#include "exec/cuda/exec_kernels.h"
#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct axpb_task {
    float *x;
    size_t n;
    float a, b;
} axpb_task;

static void axpb_host(void *p)
{
    const axpb_task *t = p;
    for (size_t i = 0; i < t->n; i++) t->x[i] = t->a * t->x[i] + t->b;
}

int frt_debug_axpb(frt_stream *s, frt_buffer *x, size_t n, float a, float b)
{
    if (!s || !x) return frt_error(FRT_ERR_INVALID_ARGUMENT, "axpb: NULL argument");
    if (n > frt_buffer_size(x) / sizeof(float))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "axpb: %zu floats in a buffer of %zu bytes", n, frt_buffer_size(x));
    float *p = frt_buffer_ptr(x);
#if FRT_HAVE_CUDA
    if (frt_buffer_space(x) == FRT_SPACE_DEVICE && frt_stream_native(s))
        return frt_cuda_axpb(frt_stream_native(s), p, n, a, b);
#endif
    axpb_task t = {p, n, a, b};
    return frt_stream_host_task(s, axpb_host, &t, sizeof t);
}

#if FRT_HAVE_CUDA
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
#endif

/* The operands of a timed n x n x n GEMM: bf16 x and w (random in [-1,
 * 1)), bf16 y; fp8: x and w also quantized per row (xq, xs, wq, ws). */
typedef struct gemm_bench {
    int n, fp8;
    frt_buffer *x, *w, *y, *xq, *xs, *wq, *ws;
#if FRT_HAVE_CUDA
    frt_cuda_gemm *g;
    frt_cuda_gemm_fp8 *g8;
#endif
} gemm_bench;

static int check_gemm_args(frt_context *ctx, int n, int reps, const double *ms_out)
{
    if (!ctx || !ms_out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm timing: NULL argument");
    if (n < 64 || n % 16 || reps < 1 || reps > 64)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm timing: n %d (>= 64, a multiple of 16), reps %d (1..64)", n,
                         reps);
    if (frt_context_backend(ctx) != FRT_BACKEND_CUDA)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemm timing: the cuda backend only");
#if !FRT_HAVE_CUDA
    return frt_error(FRT_ERR_UNSUPPORTED, "gemm timing: built without CUDA");
#else
    return 0;
#endif
}

#if FRT_HAVE_CUDA
static void *dptr(frt_buffer *b) { return frt_buffer_ptr(b); }

static int bench_alloc(frt_context *ctx, gemm_bench *b)
{
    frt_stream *s = frt_context_stream(ctx);
    const size_t nn = (size_t)b->n * b->n, bytes = nn * 2;
    uint16_t *host = malloc(bytes);
    if (!host) return frt_error(FRT_ERR_OUT_OF_MEMORY, "gemm timing: out of memory");
    uint64_t st = 0x1234567ull;
    for (size_t i = 0; i < nn; i++) { /* bf16 in [-1, 1): the top half of an f32 */
        st ^= st >> 12, st ^= st << 25, st ^= st >> 27;
        float f = (float)((st * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f * 2.0f - 1.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        host[i] = (uint16_t)(u >> 16);
    }
    int rc = frt_buffer_alloc(ctx, "debug.gemm.x", FRT_SPACE_DEVICE, bytes, &b->x);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.w", FRT_SPACE_DEVICE, bytes, &b->w);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.y", FRT_SPACE_DEVICE, bytes, &b->y);
    if (!rc) rc = frt_buffer_write(b->x, 0, host, bytes, s);
    if (!rc) rc = frt_buffer_write(b->w, 0, host, bytes, s);
    if (!rc) rc = frt_stream_sync(s);
    free(host);
    if (rc || !b->fp8) return rc;
    void *cs = frt_stream_native(s);
    rc = frt_buffer_alloc(ctx, "debug.gemm.xq", FRT_SPACE_DEVICE, nn, &b->xq);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.wq", FRT_SPACE_DEVICE, nn, &b->wq);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.xs", FRT_SPACE_DEVICE, (size_t)b->n * 4, &b->xs);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.ws", FRT_SPACE_DEVICE, (size_t)b->n * 4, &b->ws);
    if (!rc) rc = frt_cuda_fp8_quantize_rows_dynamic(cs, dptr(b->xq), dptr(b->xs), dptr(b->x), b->n, b->n);
    if (!rc) rc = frt_cuda_fp8_quantize_rows_dynamic(cs, dptr(b->wq), dptr(b->ws), dptr(b->w), b->n, b->n);
    return rc ? rc : frt_stream_sync(s);
}

static int bench_plan(frt_context *ctx, gemm_bench *b)
{
    int rc = frt_cuda_gemm_create((size_t)32 << 20, &b->g);
    if (!rc) rc = frt_cuda_gemm_add_stream(b->g, frt_stream_native(frt_context_stream(ctx)));
    if (!rc && !b->fp8) return frt_cuda_gemm_plan(b->g, b->n, b->n, b->n, FRT_CUDA_BF16, 0);
    if (!rc) rc = frt_cuda_gemm_fp8_create(b->g, &b->g8);
    if (!rc) rc = frt_cuda_gemm_fp8_plan(b->g8, b->n, b->n, b->n, FRT_CUDA_BF16);
    return rc;
}

static int bench_run(gemm_bench *b, void *cs)
{
    const int n = b->n;
    if (b->fp8)
        return frt_cuda_gemm_fp8_run(b->g8, cs, dptr(b->y), FRT_CUDA_BF16, dptr(b->xq), dptr(b->xs), dptr(b->wq),
                                     dptr(b->ws), n, n, n);
    return frt_cuda_gemm_run(b->g, cs, dptr(b->y), FRT_CUDA_BF16, dptr(b->x), dptr(b->w), n, n, n, 0);
}

/* 3 warm-up runs, then reps timed with events: the median in *ms_out. */
static int bench_time(frt_context *ctx, gemm_bench *b, int reps, double *ms_out)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_event *e0 = NULL, *e1 = NULL;
    double ms[64];
    int rc = frt_event_create(ctx, &e0);
    if (!rc) rc = frt_event_create(ctx, &e1);
    for (int i = -3; i < reps && !rc; i++) {
        float t = 0;
        rc = frt_event_record(e0, s);
        if (!rc) rc = bench_run(b, frt_stream_native(s));
        if (!rc) rc = frt_event_record(e1, s);
        if (!rc) rc = frt_event_sync(e1);
        if (!rc) rc = frt_event_elapsed_ms(e0, e1, &t);
        if (!rc && i >= 0) ms[i] = t;
    }
    if (!rc) {
        qsort(ms, (size_t)reps, sizeof ms[0], cmp_double);
        *ms_out = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    }
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    return rc;
}
#endif

static int time_gemm(frt_context *ctx, int n, int reps, int fp8, double *ms_out)
{
    FRT_TRY(check_gemm_args(ctx, n, reps, ms_out));
#if FRT_HAVE_CUDA
    gemm_bench b;
    memset(&b, 0, sizeof b);
    b.n = n, b.fp8 = fp8;
    int rc = bench_alloc(ctx, &b);
    if (!rc) rc = bench_plan(ctx, &b);
    if (!rc) rc = bench_time(ctx, &b, reps, ms_out);
    frt_stream_sync(frt_context_stream(ctx));
    frt_cuda_gemm_fp8_destroy(b.g8);
    frt_cuda_gemm_destroy(b.g);
    frt_buffer *all[] = {b.x, b.w, b.y, b.xq, b.xs, b.wq, b.ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) frt_buffer_free(all[i]);
    return rc;
#else
    return 0;
#endif
}

int frt_debug_gemm_ms(frt_context *ctx, int n, int reps, double *ms_out)
{
    return time_gemm(ctx, n, reps, 0, ms_out);
}

int frt_debug_gemm_fp8_ms(frt_context *ctx, int n, int reps, double *ms_out)
{
    return time_gemm(ctx, n, reps, 1, ms_out);
}
