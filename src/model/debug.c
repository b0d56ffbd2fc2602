/*
 * debug.c - the measurement hooks of frt/debug.h that need kernels: the
 * axpb chain step and the timed GEMM of the benchmark's ceiling.
 */
#include "frt/debug.h"

#include "util/error.h"

#if FRT_HAVE_CUDA
#include "exec/cuda/exec_kernels.h"
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

int frt_debug_gemm_ms(frt_context *ctx, int n, int reps, double *ms_out)
{
    if (!ctx || !ms_out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm timing: NULL argument");
    if (n < 64 || n % 8 || reps < 1 || reps > 64)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "gemm timing: n %d (>= 64, a multiple of 8), reps %d (1..64)", n,
                         reps);
    if (frt_context_backend(ctx) != FRT_BACKEND_CUDA)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemm timing: the cuda backend only");
#if !FRT_HAVE_CUDA
    return frt_error(FRT_ERR_UNSUPPORTED, "gemm timing: built without CUDA");
#else
    frt_stream *s = frt_context_stream(ctx);
    size_t bytes = (size_t)n * n * 2;
    frt_buffer *x = NULL, *w = NULL, *y = NULL;
    frt_event *e0 = NULL, *e1 = NULL;
    frt_cuda_gemm *g = NULL;
    uint16_t *host = malloc(bytes);
    double ms[64];
    int rc = host ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "gemm timing: out of memory");
    uint64_t st = 0x1234567ull;
    for (size_t i = 0; host && i < (size_t)n * n; i++) { /* bf16 in [-1, 1): the top half of an f32 */
        st ^= st >> 12, st ^= st << 25, st ^= st >> 27;
        float f = (float)((st * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f * 2.0f - 1.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        host[i] = (uint16_t)(u >> 16);
    }
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.x", FRT_SPACE_DEVICE, bytes, &x);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.w", FRT_SPACE_DEVICE, bytes, &w);
    if (!rc) rc = frt_buffer_alloc(ctx, "debug.gemm.y", FRT_SPACE_DEVICE, bytes, &y);
    if (!rc) rc = frt_buffer_write(x, 0, host, bytes, s);
    if (!rc) rc = frt_buffer_write(w, 0, host, bytes, s);
    if (!rc) rc = frt_stream_sync(s);
    if (!rc) rc = frt_cuda_gemm_create((size_t)32 << 20, &g);
    if (!rc) rc = frt_cuda_gemm_add_stream(g, frt_stream_native(s));
    if (!rc) rc = frt_cuda_gemm_plan(g, n, n, n, FRT_CUDA_BF16, 0);
    if (!rc) rc = frt_event_create(ctx, &e0);
    if (!rc) rc = frt_event_create(ctx, &e1);
    for (int i = -3; i < reps && !rc; i++) {
        float t = 0;
        rc = frt_event_record(e0, s);
        if (!rc)
            rc = frt_cuda_gemm_run(g, frt_stream_native(s), frt_buffer_ptr(y), FRT_CUDA_BF16, frt_buffer_ptr(x),
                                   frt_buffer_ptr(w), n, n, n, 0);
        if (!rc) rc = frt_event_record(e1, s);
        if (!rc) rc = frt_event_sync(e1);
        if (!rc) rc = frt_event_elapsed_ms(e0, e1, &t);
        if (!rc && i >= 0) ms[i] = t;
    }
    if (!rc) {
        qsort(ms, (size_t)reps, sizeof ms[0], cmp_double);
        *ms_out = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    }
    frt_stream_sync(s);
    frt_cuda_gemm_destroy(g);
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_buffer_free(x);
    frt_buffer_free(w);
    frt_buffer_free(y);
    free(host);
    return rc;
#endif
}
