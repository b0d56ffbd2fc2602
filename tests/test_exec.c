/*
 * test_exec.c - the execution contract (include/frt/exec.h) on one backend.
 * FRT_TEST_BACKENDS: registered as exec_cpu and exec_cuda; argv[1] is the
 * backend. The cuda run is skipped (77) when there is no device.
 *
 * Work inside graphs is "axpb" (x = a*x + b over fp32): a host task on
 * host-accessible memory, the tiny CUDA kernel (exec/cuda/exec_kernels.h) on
 * cuda device memory, so captured graphs hold real kernel nodes on cuda and
 * recorded host tasks on cpu.
 */
#include "frt/exec.h"
#include "frt_test.h"
#include "util/error.h"

#if FRT_HAVE_CUDA
#include "exec/cuda/exec_kernels.h"
#endif

#include <stdatomic.h>
#include <time.h>

static frt_backend g_backend;

/* ---- helpers --------------------------------------------------------------- */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct axpb_args {
    float *x;
    size_t n;
    float a, b;
} axpb_args;

static void axpb_host(void *p)
{
    axpb_args *A = p;
    for (size_t i = 0; i < A->n; i++) A->x[i] = A->a * A->x[i] + A->b;
}

/* x = a * x + b over the whole buffer, enqueued on s. */
static int enqueue_axpb(frt_stream *s, frt_buffer *buf, float a, float b)
{
    float *x = frt_buffer_ptr(buf);
    size_t n = frt_buffer_size(buf) / sizeof(float);
#if FRT_HAVE_CUDA
    if (g_backend == FRT_BACKEND_CUDA && frt_buffer_space(buf) == FRT_SPACE_DEVICE)
        return frt_cuda_axpb(frt_stream_native(s), x, n, a, b);
#endif
    axpb_args A = {x, n, a, b};
    return frt_stream_host_task(s, axpb_host, &A, sizeof A);
}

static frt_buffer *alloc_or_die(frt_context *ctx, const char *name, frt_space sp, size_t bytes)
{
    frt_buffer *b = NULL;
    int rc = frt_buffer_alloc(ctx, name, sp, bytes, &b);
    if (rc) {
        fprintf(stderr, "alloc %s: %s\n", name, frt_last_error());
        exit(1);
    }
    return b;
}

static void fill_random_floats(float *x, size_t n) { frt_test_fill(x, n, 0.5f, 2.0f); }

static void fill_random_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(frt_test_u64() >> 32);
}

/* Synchronous whole-buffer transfers through the default stream. */
static int put(frt_context *ctx, frt_buffer *b, const void *src)
{
    frt_stream *s = frt_context_stream(ctx);
    FRT_TRY(frt_buffer_write(b, 0, src, frt_buffer_size(b), s));
    return frt_stream_sync(s);
}

static int get(frt_context *ctx, const frt_buffer *b, void *dst)
{
    frt_stream *s = frt_context_stream(ctx);
    FRT_TRY(frt_buffer_read(b, 0, dst, frt_buffer_size(b), s));
    return frt_stream_sync(s);
}

/* ---- NULL and invalid handles ---------------------------------------------- */

static void test_invalid_handles(frt_context *ctx)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *buf = alloc_or_die(ctx, "h", FRT_SPACE_HOST, 64);
    frt_backend be;
    int n;
    frt_device_info info;
    frt_stream *so = (frt_stream *)1;
    frt_event *eo = (frt_event *)1;
    frt_buffer *bo = (frt_buffer *)1;
    frt_graph *go = (frt_graph *)1;
    frt_plan *po = (frt_plan *)1;
    frt_context *co = (frt_context *)1;
    float f;
    char host[8];

    CHECK_STATUS(frt_backend_parse(NULL, &be), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_backend_parse("tpu", &be), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_device_count(FRT_BACKEND_CPU, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_device_count((frt_backend)7, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_create(FRT_BACKEND_CPU, 0, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_create((frt_backend)7, 0, &co), FRT_ERR_INVALID_ARGUMENT);
    CHECK(co == NULL);
    CHECK_STATUS(frt_context_create(FRT_BACKEND_CPU, -1, &co), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_create(FRT_BACKEND_CPU, 1, &co), FRT_ERR_NO_DEVICE);
    CHECK_STATUS(frt_context_device_info(NULL, &info), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_device_info(ctx, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_sync(NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_context_stream(NULL) == NULL);

    CHECK_STATUS(frt_stream_create(NULL, 0, &so), FRT_ERR_INVALID_ARGUMENT);
    CHECK(so == NULL);
    CHECK_STATUS(frt_stream_create(ctx, 0, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_sync(NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_stream_native(NULL) == NULL);
    CHECK_STATUS(frt_stream_is_capturing(NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_host_task(NULL, axpb_host, NULL, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_host_task(s, NULL, NULL, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_host_task(s, axpb_host, NULL, 8), FRT_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(frt_event_create(NULL, &eo), FRT_ERR_INVALID_ARGUMENT);
    CHECK(eo == NULL);
    CHECK_STATUS(frt_event_record(NULL, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_wait_event(s, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_event_sync(NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_event_elapsed_ms(NULL, NULL, &f), FRT_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(frt_buffer_alloc(NULL, "x", FRT_SPACE_HOST, 8, &bo), FRT_ERR_INVALID_ARGUMENT);
    CHECK(bo == NULL);
    CHECK_STATUS(frt_buffer_alloc(ctx, "x", FRT_SPACE_HOST, 8, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_alloc(ctx, "x", FRT_SPACE_HOST, 0, &bo), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_alloc(ctx, "x", (frt_space)9, 8, &bo), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_wrap(ctx, "x", FRT_SPACE_HOST, NULL, 8, &bo), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_buffer_ptr(NULL) == NULL);
    CHECK(frt_buffer_size(NULL) == 0);
    CHECK(strcmp(frt_buffer_name(NULL), "") == 0);
    CHECK_STATUS(frt_buffer_fill(NULL, 0, 1, 0, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_fill(buf, 0, 1, 0, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_copy(NULL, 0, buf, 0, 1, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_copy(buf, 0, NULL, 0, 1, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_copy_batch(NULL, 1, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_copy_batch(NULL, -1, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_write(buf, 0, NULL, 1, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_read(NULL, 0, host, 1, s), FRT_ERR_INVALID_ARGUMENT);
    /* a copy onto itself (overlapping ranges of one buffer) */
    CHECK_STATUS(frt_buffer_copy(buf, 0, buf, 8, 16, s), FRT_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(frt_graph_create(NULL, "g", 0, &go), FRT_ERR_INVALID_ARGUMENT);
    CHECK(go == NULL);
    CHECK_STATUS(frt_graph_create(ctx, "g", -1, &go), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_graph_bind(NULL, "x", buf), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_graph_port(NULL, "x") == NULL);
    CHECK_STATUS(frt_graph_capture(NULL, 1, s, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_graph_replay(NULL, 1, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_graph_has(NULL, 1) == 0);
    CHECK_STATUS(frt_graph_evict(NULL, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_graph_count(NULL) == 0);

    CHECK_STATUS(frt_plan_create(NULL, &po), FRT_ERR_INVALID_ARGUMENT);
    CHECK(po == NULL);
    CHECK_STATUS(frt_plan_add(NULL, NULL, 0, s, NULL, 0, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_plan_execute(NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_plan_sync(NULL), FRT_ERR_INVALID_ARGUMENT);

    /* Destructors accept NULL; the default stream is not the caller's. */
    frt_context_destroy(NULL);
    frt_stream_destroy(NULL);
    frt_stream_destroy(s);
    frt_event_destroy(NULL);
    frt_buffer_free(NULL);
    frt_graph_destroy(NULL);
    frt_plan_destroy(NULL);
    CHECK_OK(frt_stream_sync(s));

    /* A handle of the wrong type (a zeroed block carries no magic tag). */
    static uint64_t zeros[64];
    CHECK(frt_buffer_ptr((frt_buffer *)zeros) == NULL);
    CHECK_STATUS(frt_stream_sync((frt_stream *)zeros), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_buffer_fill((frt_buffer *)s, 0, 1, 0, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_graph_replay((frt_graph *)buf, 1, s), FRT_ERR_INVALID_ARGUMENT);
    frt_buffer_free(buf);
}

/* ---- allocation ------------------------------------------------------------ */

static void test_alloc_too_large(frt_context *ctx)
{
    frt_device_info info;
    CHECK_OK(frt_context_device_info(ctx, &info));
    CHECK(info.backend == g_backend);
    CHECK(info.total_bytes > 0 && info.name[0]);
    /* Sizes no host or device has, in every space; and twice the device. */
    const size_t sizes[] = {(size_t)1 << 62, SIZE_MAX / 2, SIZE_MAX};
    const frt_space spaces[] = {FRT_SPACE_DEVICE, FRT_SPACE_PINNED_HOST, FRT_SPACE_HOST};
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            if (i == 3 && j > 0) break;
            size_t bytes = i < 3 ? sizes[i] : info.total_bytes * 2 + 4096;
            frt_buffer *b = (frt_buffer *)1;
            CHECK_STATUS(frt_buffer_alloc(ctx, "kv.too_big", spaces[j], bytes, &b), FRT_ERR_OUT_OF_MEMORY);
            CHECK(b == NULL);
            CHECK_MSG(strstr(frt_last_error(), "kv.too_big") != NULL, "message: %s", frt_last_error());
        }
    }
    /* The context still works afterwards. */
    frt_buffer *b = alloc_or_die(ctx, "ok", FRT_SPACE_DEVICE, 4096);
    CHECK(strcmp(frt_buffer_name(b), "ok") == 0 && frt_buffer_size(b) == 4096);
    CHECK(frt_buffer_space(b) == FRT_SPACE_DEVICE);
    CHECK_OK(frt_buffer_fill(b, 0, 4096, 7, frt_context_stream(ctx)));
    uint8_t host[4096];
    CHECK_OK(get(ctx, b, host));
    CHECK(host[0] == 7 && host[4095] == 7);
    frt_buffer_free(b);
}

/* ---- the pinned host cache -------------------------------------------------- */

static frt_pinned_cache_stats pstats(frt_context *c)
{
    frt_pinned_cache_stats st;
    memset(&st, 0xff, sizeof st);
    CHECK_OK(frt_context_pinned_cache_stats(c, &st));
    return st;
}

/* Freed PINNED_HOST blocks come back (same pointer, counted as hits), grown
 * requests fit a rounded block, too-large blocks do not serve small
 * requests, the limit drops the oldest blocks, 0 turns the cache off, trim
 * empties it, other spaces are never cached, the environment sets the
 * limit, and a reused block carries copies like a new one. */
static void test_pinned_cache(void)
{
    const size_t MiB = (size_t)1 << 20;
    unsetenv("FRT_PINNED_CACHE_MB");
    frt_context *c = NULL;
    CHECK_OK(frt_context_create(g_backend, 0, &c));
    if (!c) return;
    frt_pinned_cache_stats st = pstats(c);
    CHECK(st.limit_bytes == (size_t)FRT_PINNED_CACHE_DEFAULT_MB * MiB);
    CHECK(st.cached_bytes == 0 && st.cached_blocks == 0 && st.hits == 0 && st.misses == 0);

    /* 3 MiB + 5 bytes: a new block of 4 MiB (rounded to 1 MiB steps) */
    frt_buffer *a = alloc_or_die(c, "pin.a", FRT_SPACE_PINNED_HOST, 3 * MiB + 5);
    void *pa = frt_buffer_ptr(a);
    CHECK(frt_buffer_size(a) == 3 * MiB + 5);
    frt_buffer_free(a);
    st = pstats(c);
    CHECK(st.misses == 1 && st.hits == 0 && st.cached_blocks == 1 && st.cached_bytes == 4 * MiB);
    /* the same size, then a grown one (3.9 MiB): the same block each time */
    a = alloc_or_die(c, "pin.a2", FRT_SPACE_PINNED_HOST, 3 * MiB + 5);
    CHECK(frt_buffer_ptr(a) == pa && frt_buffer_size(a) == 3 * MiB + 5);
    st = pstats(c);
    CHECK(st.hits == 1 && st.cached_blocks == 0 && st.cached_bytes == 0);
    frt_buffer_free(a);
    a = alloc_or_die(c, "pin.a3", FRT_SPACE_PINNED_HOST, 4 * MiB - 100);
    CHECK(frt_buffer_ptr(a) == pa);
    /* a reused block carries a copy like a new one */
    uint8_t *src = malloc(4 * MiB), *back = malloc(4 * MiB);
    frt_buffer *d = alloc_or_die(c, "pin.dev", FRT_SPACE_DEVICE, 4 * MiB);
    if (src && back) {
        for (size_t i = 0; i < 4 * MiB; i++) src[i] = (uint8_t)(i * 131 + 7);
        frt_stream *s = frt_context_stream(c);
        memcpy(frt_buffer_ptr(a), src, 4 * MiB - 100);
        CHECK_OK(frt_buffer_copy(d, 0, a, 0, 4 * MiB - 100, s));
        CHECK_OK(frt_buffer_fill(a, 0, 4 * MiB - 100, 0, s));
        CHECK_OK(frt_buffer_copy(a, 0, d, 0, 4 * MiB - 100, s));
        CHECK_OK(frt_stream_sync(s));
        CHECK(memcmp(frt_buffer_ptr(a), src, 4 * MiB - 100) == 0);
    }
    free(src);
    free(back);
    frt_buffer_free(d);
    frt_buffer_free(a);
    /* a cached 4 MiB block does not serve 1 MiB (more than twice) */
    frt_buffer *b = alloc_or_die(c, "pin.b", FRT_SPACE_PINNED_HOST, MiB);
    CHECK(frt_buffer_ptr(b) != pa);
    st = pstats(c);
    CHECK(st.cached_blocks == 1 && st.cached_bytes == 4 * MiB);
    /* device and pageable memory never enter the cache */
    frt_buffer *h = alloc_or_die(c, "pin.host", FRT_SPACE_HOST, 3 * MiB);
    frt_buffer *dv = alloc_or_die(c, "pin.device", FRT_SPACE_DEVICE, 3 * MiB);
    frt_buffer_free(h);
    frt_buffer_free(dv);
    frt_pinned_cache_stats st2 = pstats(c);
    CHECK(st2.cached_blocks == 1 && st2.hits == st.hits && st2.misses == st.misses);
    /* limit 6 MiB: freeing b (1 MiB) keeps both (5 MiB); a 2 MiB block more
     * (7 MiB) drops the oldest, the 4 MiB one */
    CHECK_OK(frt_context_set_pinned_cache(c, 6 * MiB));
    frt_buffer_free(b);
    st = pstats(c);
    CHECK(st.cached_blocks == 2 && st.cached_bytes == 5 * MiB && st.limit_bytes == 6 * MiB);
    frt_buffer *e = alloc_or_die(c, "pin.e", FRT_SPACE_PINNED_HOST, 3 * MiB / 2); /* new: 2 MiB */
    frt_buffer_free(e);
    st = pstats(c);
    CHECK(st.cached_blocks == 2 && st.cached_bytes == 3 * MiB);
    frt_buffer *f = alloc_or_die(c, "pin.f", FRT_SPACE_PINNED_HOST, 3 * MiB + 5);
    CHECK(pstats(c).misses == st.misses + 1); /* the 4 MiB block was released */
    frt_buffer_free(f);
    /* an allocation no host can satisfy empties the cache, retries, and
     * fails cleanly */
    {
        frt_buffer *big = (frt_buffer *)1;
        CHECK(pstats(c).cached_blocks > 0);
        CHECK_STATUS(frt_buffer_alloc(c, "pin.huge", FRT_SPACE_PINNED_HOST, (size_t)1 << 62, &big),
                     FRT_ERR_OUT_OF_MEMORY);
        CHECK(big == NULL);
        st = pstats(c);
        CHECK(st.cached_blocks == 0 && st.cached_bytes == 0);
        frt_buffer *again = alloc_or_die(c, "pin.again", FRT_SPACE_PINNED_HOST, 3 * MiB + 5);
        frt_buffer_free(again); /* cached again */
    }
    /* trim empties the cache, the limit stays */
    CHECK_OK(frt_context_trim(c));
    st = pstats(c);
    CHECK(st.cached_blocks == 0 && st.cached_bytes == 0 && st.limit_bytes == 6 * MiB);
    /* limit 0: nothing is kept */
    CHECK_OK(frt_context_set_pinned_cache(c, 0));
    frt_buffer *g = alloc_or_die(c, "pin.g", FRT_SPACE_PINNED_HOST, MiB);
    frt_buffer_free(g);
    st = pstats(c);
    CHECK(st.cached_blocks == 0 && st.cached_bytes == 0);
    /* bad arguments */
    frt_pinned_cache_stats junk;
    CHECK_STATUS(frt_context_pinned_cache_stats(NULL, &junk), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_pinned_cache_stats(c, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_set_pinned_cache(NULL, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_context_trim(NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_context_destroy(c);

    /* the environment: 5 MiB; unparsable values leave the default */
    setenv("FRT_PINNED_CACHE_MB", "5", 1);
    CHECK_OK(frt_context_create(g_backend, 0, &c));
    if (c) {
        CHECK(pstats(c).limit_bytes == 5 * MiB);
        frt_buffer *k = alloc_or_die(c, "pin.k", FRT_SPACE_PINNED_HOST, 6 * MiB); /* alone over the limit */
        frt_buffer_free(k);
        CHECK(pstats(c).cached_blocks == 0);
        frt_context_destroy(c);
    }
    setenv("FRT_PINNED_CACHE_MB", "12x", 1);
    CHECK_OK(frt_context_create(g_backend, 0, &c));
    if (c) {
        CHECK(pstats(c).limit_bytes == (size_t)FRT_PINNED_CACHE_DEFAULT_MB * MiB);
        frt_context_destroy(c);
    }
    unsetenv("FRT_PINNED_CACHE_MB");
}

/* ---- copies ---------------------------------------------------------------- */

static void test_copies(frt_context *ctx)
{
    const size_t N = (3u << 20) + 13; /* not a multiple of anything nice */
    frt_stream *s;
    CHECK_OK(frt_stream_create(ctx, 0, &s));
    frt_buffer *h1 = alloc_or_die(ctx, "h1", FRT_SPACE_HOST, N);
    frt_buffer *d1 = alloc_or_die(ctx, "d1", FRT_SPACE_DEVICE, N);
    frt_buffer *d2 = alloc_or_die(ctx, "d2", FRT_SPACE_DEVICE, N);
    frt_buffer *p1 = alloc_or_die(ctx, "p1", FRT_SPACE_PINNED_HOST, N);
    frt_buffer *h2 = alloc_or_die(ctx, "h2", FRT_SPACE_HOST, N);
    uint8_t *src = malloc(N), *out = malloc(N);
    fill_random_bytes(src, N);
    memcpy(frt_buffer_ptr(h1), src, N);

    /* host -> device -> device -> pinned -> host, all async on one stream */
    CHECK_OK(frt_buffer_copy(d1, 0, h1, 0, N, s));
    CHECK_OK(frt_buffer_copy(d2, 0, d1, 0, N, s));
    CHECK_OK(frt_buffer_copy(p1, 0, d2, 0, N, s));
    CHECK_OK(frt_buffer_copy(h2, 0, p1, 0, N, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK(memcmp(frt_buffer_ptr(h2), src, N) == 0);
    CHECK(memcmp(frt_buffer_ptr(p1), src, N) == 0);

    /* pinned -> device, device -> host with offsets; host <-> pinned */
    memset(frt_buffer_ptr(h2), 0, N);
    CHECK_OK(frt_buffer_fill(d1, 0, N, 0, s));
    CHECK_OK(frt_buffer_copy(d1, 5, p1, 3, N - 7, s));
    CHECK_OK(frt_buffer_copy(h2, 1, d1, 5, N - 7, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK(memcmp((uint8_t *)frt_buffer_ptr(h2) + 1, src + 3, N - 7) == 0);
    CHECK(((uint8_t *)frt_buffer_ptr(h2))[0] == 0);

    /* write / read through caller memory */
    fill_random_bytes(src, N);
    CHECK_OK(frt_buffer_write(d2, 0, src, N, s));
    CHECK_OK(frt_buffer_read(d2, 0, out, N, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK(memcmp(out, src, N) == 0);

    /* a batch: device->device pieces (aligned and not), plus host and pinned */
    CHECK_OK(frt_buffer_fill(d1, 0, N, 0x5A, s));
    frt_copy batch[5] = {
        {d1, 0, d2, 0, 1 << 20},                           /* aligned, 1 MiB */
        {d1, (1 << 20) + 1, d2, (1 << 20) + 7, 100001},    /* unaligned bytes */
        {d1, 2u << 20, d2, 2u << 20, 64},                  /* tiny */
        {d1, (2u << 20) + 4096, d2, (2u << 20) + 4096, 0}, /* empty */
        {p1, 0, d2, 0, N},                                 /* device -> pinned */
    };
    frt_copy then = {h2, 0, p1, 0, 4096}; /* pinned -> host, after the batch */
    CHECK_OK(frt_buffer_copy_batch(batch, 5, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, d1, out));
    CHECK(memcmp(out, src, 1 << 20) == 0);
    CHECK(out[1 << 20] == 0x5A);
    CHECK(memcmp(out + (1 << 20) + 1, src + (1 << 20) + 7, 100001) == 0);
    CHECK(out[(1 << 20) + 1 + 100001] == 0x5A);
    CHECK(memcmp(out + (2u << 20), src + (2u << 20), 64) == 0);
    CHECK(out[(2u << 20) + 64] == 0x5A);
    CHECK(memcmp(frt_buffer_ptr(p1), src, N) == 0);
    CHECK_OK(frt_buffer_copy_batch(&then, 1, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK(memcmp(frt_buffer_ptr(h2), src, 4096) == 0);

    /* many device -> device entries with 16-byte aligned pointers (the even
     * split of the cuda copy kernel): sizes with tail bytes, entries shorter
     * than 16 bytes, empty ones, and more entries than one launch takes
     * (FRT_CUDA_COPY_BATCH_MAX 128); the gaps between entries stay untouched */
    {
        enum { NE = 300 };
        static frt_copy many[NE];
        size_t dst_off[NE], src_off[NE], len[NE], at = 0;
        CHECK_OK(frt_buffer_write(d2, 0, src, N, s));
        CHECK_OK(frt_buffer_fill(d1, 0, N, 0x5A, s));
        for (int i = 0; i < NE; i++) {
            size_t r = (size_t)(frt_test_u64() >> 40);
            len[i] = i % 7 == 0 ? r % 16 : i % 11 == 0 ? 0 : i % 5 == 0 ? (r % 64) * 16 : r % 8000;
            if (i == 17) len[i] = (1u << 20) + 3; /* one big entry */
            dst_off[i] = at;
            src_off[i] = (N - len[i] - 16) / 16 * 16 - (at % (N / 2)) / 16 * 16;
            at = (at + len[i] + 16 + 15) / 16 * 16; /* a gap of >= 16 bytes */
            many[i] = (frt_copy){d1, dst_off[i], d2, src_off[i], len[i]};
        }
        CHECK(at <= N);
        CHECK_OK(frt_buffer_copy_batch(many, NE, s));
        CHECK_OK(frt_stream_sync(s));
        CHECK_OK(get(ctx, d1, out));
        size_t wrong = 0, gap = 0;
        for (int i = 0; i < NE; i++) {
            wrong += memcmp(out + dst_off[i], src + src_off[i], len[i]) != 0;
            size_t end = i + 1 < NE ? dst_off[i + 1] : N;
            for (size_t k = dst_off[i] + len[i]; k < end; k++) gap += out[k] != 0x5A;
        }
        CHECK_MSG(wrong == 0, "%zu of %d batch entries differ", wrong, NE);
        CHECK_MSG(gap == 0, "%zu bytes outside the batch entries written", gap);
    }

    /* out of range: an error, and nothing written */
    CHECK_OK(frt_buffer_fill(d1, 0, N, 0xAB, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_STATUS(frt_buffer_copy(d1, 1, d2, 0, N, s), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_buffer_copy(d1, 0, d2, 1, N, s), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_buffer_copy(d1, SIZE_MAX, d2, 0, 2, s), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_buffer_copy(d1, 2, d2, 0, SIZE_MAX - 1, s), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_buffer_fill(d1, N, 1, 0, s), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_buffer_write(d1, N - 1, src, 2, s), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_buffer_read(d2, 1, out, N, s), FRT_ERR_OUT_OF_RANGE);
    frt_copy bad[3] = {
        {d1, 0, d2, 0, 4096},
        {d1, 8192, d2, 8192, 4096},
        {d1, N - 10, d2, 0, 11}, /* one byte too far */
    };
    CHECK_STATUS(frt_buffer_copy_batch(bad, 3, s), FRT_ERR_OUT_OF_RANGE);
    CHECK(strstr(frt_last_error(), "[2]") != NULL);
    bad[2].dst = NULL;
    CHECK_STATUS(frt_buffer_copy_batch(bad, 3, s), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, d1, out));
    size_t bad_bytes = 0;
    for (size_t i = 0; i < N; i++) bad_bytes += out[i] != 0xAB;
    CHECK_MSG(bad_bytes == 0, "%zu bytes written by failed copies", bad_bytes);

    free(src);
    free(out);
    frt_buffer_free(h1);
    frt_buffer_free(d1);
    frt_buffer_free(d2);
    frt_buffer_free(p1);
    frt_buffer_free(h2);
    frt_stream_destroy(s);
}

/* ---- capture and replay ---------------------------------------------------- */

/* The work of test_replay: reads ports "x" and "y", writes both. */
static int record_work(frt_stream *s, void *user)
{
    frt_graph *g = user;
    frt_buffer *x = frt_graph_port(g, "x"), *y = frt_graph_port(g, "y");
    FRT_TRY(enqueue_axpb(s, x, 1.5f, 0.25f));
    FRT_TRY(frt_buffer_copy(y, 0, x, 0, frt_buffer_size(x), s));
    FRT_TRY(enqueue_axpb(s, y, -0.5f, 3.0f));
    FRT_TRY(frt_buffer_fill(x, 0, 16, 0, s));
    return enqueue_axpb(s, x, 1.0f, 1.0f);
}

/* A chain of copies through every space with no sync in between must run in
 * stream order: each copy reads what the previous one wrote (on cuda, a
 * pageable source is staged at the call unless the stream is waited for). */
static void test_copy_chain_order(frt_context *ctx)
{
    enum { N = 1 << 20 };
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *d = NULL, *p = NULL, *h = NULL;
    unsigned char *src = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) src[i] = (unsigned char)(frt_test_u64() | 1);
    CHECK_OK(frt_buffer_alloc(ctx, "chain.d", FRT_SPACE_DEVICE, N, &d));
    CHECK_OK(frt_buffer_alloc(ctx, "chain.p", FRT_SPACE_PINNED_HOST, N, &p));
    CHECK_OK(frt_buffer_alloc(ctx, "chain.h", FRT_SPACE_HOST, N, &h));
    if (d && p && h) {
        CHECK_OK(frt_buffer_fill(h, 0, N, 0, s));
        CHECK_OK(frt_buffer_write(d, 0, src, N, s));
        CHECK_OK(frt_buffer_copy(p, 0, d, 0, N, s));
        CHECK_OK(frt_buffer_copy(h, 0, p, 0, N, s));
        CHECK_OK(frt_buffer_fill(d, 0, N, 0, s));
        CHECK_OK(frt_buffer_copy(d, 0, h, 0, N, s));
        CHECK_OK(frt_buffer_read(d, 0, back, N, s));
        CHECK_OK(frt_stream_sync(s));
        CHECK_MSG(memcmp(src, back, N) == 0, "device -> pinned -> host -> device chain out of stream order");
    }
    frt_buffer_free(d);
    frt_buffer_free(p);
    frt_buffer_free(h);
    free(src);
    free(back);
}

static void test_replay_matches_direct(frt_context *ctx, frt_space space)
{
    const size_t n = 100003;
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *x = alloc_or_die(ctx, "x", space, n * 4);
    frt_buffer *y = alloc_or_die(ctx, "y", space, n * 4);
    float *x0 = malloc(n * 4), *rx = malloc(n * 4), *ry = malloc(n * 4), *gx = malloc(n * 4),
          *gy = malloc(n * 4), *ry2 = malloc(n * 4);
    fill_random_floats(x0, n);
    frt_graph *g;
    CHECK_OK(frt_graph_create(ctx, "work", 0, &g));
    CHECK_OK(frt_graph_bind(g, "x", x));
    CHECK_OK(frt_graph_bind(g, "y", y));
    CHECK(frt_graph_port(g, "x") == x && frt_graph_port(g, "z") == NULL);

    /* direct */
    CHECK_OK(put(ctx, x, x0));
    CHECK_OK(frt_buffer_fill(y, 0, n * 4, 0, s));
    CHECK_OK(record_work(s, g));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, x, rx));
    CHECK_OK(get(ctx, y, ry));

    /* capture: nothing runs */
    CHECK_OK(put(ctx, x, x0));
    CHECK_OK(frt_buffer_fill(y, 0, n * 4, 0, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK(frt_stream_is_capturing(s) == 0);
    CHECK_OK(frt_graph_capture(g, 7, s, record_work, g));
    CHECK(frt_stream_is_capturing(s) == 0);
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, x, gx));
    CHECK(memcmp(gx, x0, n * 4) == 0);
    CHECK(frt_graph_has(g, 7) && frt_graph_count(g) == 1);

    /* replay: the same bytes */
    CHECK_OK(frt_graph_replay(g, 7, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, x, gx));
    CHECK_OK(get(ctx, y, gy));
    CHECK(memcmp(gx, rx, n * 4) == 0);
    CHECK(memcmp(gy, ry, n * 4) == 0);

    /* a second replay reads the new contents of x (state lives in buffers) */
    CHECK_OK(record_work(s, g));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, y, ry2));
    CHECK_OK(put(ctx, x, rx));
    CHECK_OK(frt_graph_replay(g, 7, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, y, gy));
    CHECK(memcmp(gy, ry2, n * 4) == 0);
    CHECK(memcmp(ry2, ry, n * 4) != 0);

    frt_graph_destroy(g);
    frt_buffer_free(x);
    frt_buffer_free(y);
    free(x0);
    free(rx);
    free(ry);
    free(gx);
    free(gy);
    free(ry2);
}

/* Arguments baked at capture: the host variable `scale` is read at capture. */
typedef struct baked_ctx {
    frt_buffer *hx; /* host-accessible (host task) */
    frt_buffer *dx; /* device (kernel on cuda, host task on cpu) */
    float scale;
} baked_ctx;

static int record_baked(frt_stream *s, void *user)
{
    baked_ctx *b = user;
    FRT_TRY(enqueue_axpb(s, b->hx, 1.0f, b->scale));
    return enqueue_axpb(s, b->dx, b->scale, 0.0f);
}

static void test_args_baked(frt_context *ctx)
{
    const size_t n = 4096;
    frt_stream *s = frt_context_stream(ctx);
    baked_ctx b = {alloc_or_die(ctx, "hx", FRT_SPACE_PINNED_HOST, n * 4),
                   alloc_or_die(ctx, "dx", FRT_SPACE_DEVICE, n * 4), 2.0f};
    float *h = frt_buffer_ptr(b.hx), *v = malloc(n * 4), *d = malloc(n * 4);
    frt_graph *g;
    CHECK_OK(frt_graph_create(ctx, "baked", 0, &g));
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    for (size_t i = 0; i < n; i++) v[i] = 3.0f;
    CHECK_OK(put(ctx, b.dx, v));
    CHECK_OK(frt_graph_capture(g, 1, s, record_baked, &b));
    b.scale = 100.0f; /* after capture: must not matter */
    CHECK_OK(frt_graph_replay(g, 1, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, b.dx, d));
    CHECK_MSG(h[0] == 3.0f && h[n - 1] == 3.0f, "host task saw %g, want 3 (1 + 2 baked)", h[0]);
    CHECK_MSG(d[0] == 6.0f && d[n - 1] == 6.0f, "device work saw %g, want 6 (3 * 2 baked)", d[0]);
    /* changing the buffer's contents does change the replay */
    for (size_t i = 0; i < n; i++) h[i] = 10.0f;
    for (size_t i = 0; i < n; i++) v[i] = 5.0f;
    CHECK_OK(put(ctx, b.dx, v));
    CHECK_OK(frt_graph_replay(g, 1, s));
    CHECK_OK(frt_graph_replay(g, 1, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(get(ctx, b.dx, d));
    CHECK_MSG(h[7] == 14.0f, "host task: %g, want 14", h[7]);
    CHECK_MSG(d[7] == 20.0f, "device: %g, want 20", d[7]);
    frt_graph_destroy(g);
    frt_buffer_free(b.hx);
    frt_buffer_free(b.dx);
    free(v);
    free(d);
}

/* ---- variant table ----------------------------------------------------------- */

typedef struct add_ctx {
    frt_buffer *buf;
    float add;
    int fail;
} add_ctx;

static int record_add(frt_stream *s, void *user)
{
    add_ctx *a = user;
    FRT_TRY(enqueue_axpb(s, a->buf, 1.0f, a->add));
    return a->fail ? frt_error(FRT_ERR_MISMATCH, "record failed on purpose") : 0;
}

static float value0(frt_context *ctx, frt_buffer *b)
{
    float v[4];
    frt_stream *s = frt_context_stream(ctx);
    if (frt_buffer_read(b, 0, v, sizeof v, s) || frt_stream_sync(s)) return -1;
    return v[0];
}

static void test_variants(frt_context *ctx)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *x = alloc_or_die(ctx, "acc", FRT_SPACE_DEVICE, 64 * 4);
    frt_buffer *x2 = alloc_or_die(ctx, "acc2", FRT_SPACE_DEVICE, 64 * 4);
    CHECK_OK(frt_buffer_fill(x, 0, 64 * 4, 0, s));
    frt_graph *g;
    CHECK_OK(frt_graph_create(ctx, "lru", 2, &g));
    CHECK(strcmp(frt_graph_name(g), "lru") == 0);
    CHECK_OK(frt_graph_bind(g, "acc", x));

    /* missing variant: an error, never a silent no-op; nothing runs */
    CHECK_STATUS(frt_graph_replay(g, 1, s), FRT_ERR_NO_VARIANT);
    CHECK(strstr(frt_last_error(), "lru") != NULL);
    CHECK_STATUS(frt_graph_evict(g, 1), FRT_ERR_NO_VARIANT);

    add_ctx a = {x, 1.0f, 0};
    for (int k = 1; k <= 2; k++) {
        a.add = (float)k;
        CHECK_OK(frt_graph_capture(g, (frt_shape_key)k, s, record_add, &a));
    }
    CHECK(frt_graph_count(g) == 2);
    CHECK(value0(ctx, x) == 0.0f);
    CHECK_OK(frt_graph_replay(g, 1, s)); /* 1 is now more recent than 2 */
    CHECK(value0(ctx, x) == 1.0f);
    a.add = 3.0f;
    CHECK_OK(frt_graph_capture(g, 3, s, record_add, &a)); /* evicts 2 */
    CHECK(frt_graph_count(g) == 2);
    CHECK(frt_graph_has(g, 1) && !frt_graph_has(g, 2) && frt_graph_has(g, 3));
    CHECK_STATUS(frt_graph_replay(g, 2, s), FRT_ERR_NO_VARIANT);
    CHECK_OK(frt_graph_replay(g, 3, s));
    CHECK(value0(ctx, x) == 4.0f);
    CHECK_OK(frt_graph_replay(g, 1, s)); /* now 3 is the least recent */
    CHECK(value0(ctx, x) == 5.0f);
    a.add = 4.0f;
    CHECK_OK(frt_graph_capture(g, 4, s, record_add, &a)); /* evicts 3 */
    CHECK(frt_graph_has(g, 1) && !frt_graph_has(g, 3) && frt_graph_has(g, 4));

    /* recapturing a key replaces it without evicting another */
    a.add = 10.0f;
    CHECK_OK(frt_graph_capture(g, 1, s, record_add, &a));
    CHECK(frt_graph_count(g) == 2 && frt_graph_has(g, 4));
    CHECK_OK(frt_graph_replay(g, 1, s));
    CHECK(value0(ctx, x) == 15.0f);

    /* a failing record fn: its status, the capture discarded, table unchanged */
    a.add = 1000.0f;
    a.fail = 1;
    CHECK_STATUS(frt_graph_capture(g, 1, s, record_add, &a), FRT_ERR_MISMATCH);
    CHECK_STATUS(frt_graph_capture(g, 9, s, record_add, &a), FRT_ERR_MISMATCH);
    CHECK(frt_graph_count(g) == 2 && frt_graph_has(g, 1) && !frt_graph_has(g, 9));
    CHECK(frt_stream_is_capturing(s) == 0);
    CHECK(value0(ctx, x) == 15.0f);
    CHECK_OK(frt_graph_replay(g, 1, s));
    CHECK(value0(ctx, x) == 25.0f);

    /* explicit eviction */
    CHECK_OK(frt_graph_evict(g, 4));
    CHECK(frt_graph_count(g) == 1 && !frt_graph_has(g, 4));

    /* rebinding the same buffer keeps variants; a new buffer evicts them all */
    CHECK_OK(frt_graph_bind(g, "acc", x));
    CHECK(frt_graph_count(g) == 1);
    CHECK_OK(frt_graph_bind(g, "acc", x2));
    CHECK(frt_graph_count(g) == 0 && frt_graph_port(g, "acc") == x2);
    CHECK_OK(frt_graph_bind(g, "acc", NULL));
    CHECK(frt_graph_port(g, "acc") == NULL);
    CHECK_STATUS(frt_graph_bind(g, "", x), FRT_ERR_INVALID_ARGUMENT);

    /* unbounded table */
    frt_graph *u;
    CHECK_OK(frt_graph_create(ctx, "unbounded", 0, &u));
    a.fail = 0;
    for (int k = 0; k < 40; k++) CHECK_OK(frt_graph_capture(u, (frt_shape_key)k << 40, s, record_add, &a));
    CHECK(frt_graph_count(u) == 40 && frt_graph_has(u, (frt_shape_key)39 << 40));
    frt_graph_destroy(u);

    frt_graph_destroy(g);
    frt_buffer_free(x);
    frt_buffer_free(x2);
}

/* ---- what a capture refuses ------------------------------------------------------ */

typedef struct rules_ctx {
    frt_context *ctx;
    frt_graph *self, *other;
    frt_buffer *dev, *host, *pinned;
    frt_event *ev;
    int capturing, sync, record, wait, defer, write, read, replay, nested, alloc, pageable, csync, bind;
    int pinned_copy;
} rules_ctx;

static int record_nothing(frt_stream *s, void *user) { return 0; }

static int record_rules(frt_stream *s, void *user)
{
    rules_ctx *r = user;
    char tmp[16];
    frt_buffer *b = NULL;
    r->capturing = frt_stream_is_capturing(s);
    r->sync = frt_stream_sync(s);
    r->record = frt_event_record(r->ev, s);
    r->wait = frt_stream_wait_event(s, r->ev); /* allowed: a wait each replay performs */
    r->defer = frt_stream_defer_wait(s, r->ev);
    r->write = frt_buffer_write(r->dev, 0, tmp, sizeof tmp, s);
    r->read = frt_buffer_read(r->dev, 0, tmp, sizeof tmp, s);
    r->replay = frt_graph_replay(r->other, 1, s);
    r->nested = frt_graph_capture(r->other, 2, s, record_nothing, NULL);
    r->alloc = frt_buffer_alloc(r->ctx, "during", FRT_SPACE_DEVICE, 64, &b);
    r->pageable = frt_buffer_copy(r->dev, 0, r->host, 0, 16, s);
    r->csync = frt_context_sync(r->ctx);
    r->bind = frt_graph_bind(r->self, "p", r->dev);
    r->pinned_copy = frt_buffer_copy(r->dev, 0, r->pinned, 0, 16, s);
    frt_buffer_free(b);
    return 0;
}

static void test_capture_rules(frt_context *ctx)
{
    frt_stream *s = frt_context_stream(ctx);
    rules_ctx r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.dev = alloc_or_die(ctx, "dev", FRT_SPACE_DEVICE, 64);
    r.host = alloc_or_die(ctx, "host", FRT_SPACE_HOST, 64);
    r.pinned = alloc_or_die(ctx, "pinned", FRT_SPACE_PINNED_HOST, 64);
    CHECK_OK(frt_event_create(ctx, &r.ev));
    CHECK_OK(frt_graph_create(ctx, "self", 0, &r.self));
    CHECK_OK(frt_graph_create(ctx, "other", 0, &r.other));
    CHECK_OK(frt_graph_capture(r.other, 1, s, record_nothing, NULL));
    CHECK_OK(frt_graph_capture(r.self, 1, s, record_rules, &r));
    CHECK(r.capturing == 1);
    CHECK(r.sync == FRT_ERR_STATE);
    CHECK(r.record == FRT_ERR_STATE);
    CHECK(r.wait == 0);
    CHECK(r.defer == FRT_ERR_STATE);
    CHECK(r.write == FRT_ERR_STATE);
    CHECK(r.read == FRT_ERR_STATE);
    CHECK(r.replay == FRT_ERR_STATE);
    CHECK(r.nested == FRT_ERR_STATE);
    CHECK(r.alloc == FRT_ERR_STATE);
    CHECK(r.pageable == FRT_ERR_STATE);
    CHECK(r.csync == FRT_ERR_STATE);
    CHECK(r.bind == FRT_ERR_STATE);
    CHECK(r.pinned_copy == 0);
    CHECK(frt_graph_has(r.self, 1));
    CHECK_OK(frt_graph_replay(r.self, 1, s));
    CHECK_OK(frt_graph_replay(r.other, 1, s));
    CHECK_OK(frt_context_sync(ctx));
    /* outside a capture the same calls work */
    CHECK_OK(frt_buffer_copy(r.dev, 0, r.host, 0, 16, s));
    CHECK_OK(frt_event_record(r.ev, s));
    CHECK_OK(frt_event_sync(r.ev));
    frt_graph_destroy(r.self);
    frt_graph_destroy(r.other);
    frt_event_destroy(r.ev);
    frt_buffer_free(r.dev);
    frt_buffer_free(r.host);
    frt_buffer_free(r.pinned);
}

/* ---- two graphs, one buffer ------------------------------------------------------ */

static int record_producer(frt_stream *s, void *user)
{
    frt_graph *g = user;
    frt_buffer *in = frt_graph_port(g, "in"), *x = frt_graph_port(g, "x");
    FRT_TRY(frt_buffer_copy(x, 0, in, 0, frt_buffer_size(in), s));
    return enqueue_axpb(s, x, 3.0f, 1.0f);
}

static int record_consumer(frt_stream *s, void *user)
{
    frt_graph *g = user;
    frt_buffer *x = frt_graph_port(g, "x"), *out = frt_graph_port(g, "out");
    FRT_TRY(frt_buffer_copy(out, 0, x, 0, frt_buffer_size(x), s));
    return enqueue_axpb(s, out, 0.5f, -2.0f);
}

static void test_shared_port(frt_context *ctx)
{
    const size_t n = 1 << 16;
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *in = alloc_or_die(ctx, "in", FRT_SPACE_DEVICE, n * 4);
    frt_buffer *x = alloc_or_die(ctx, "x", FRT_SPACE_DEVICE, n * 4);
    frt_buffer *out = alloc_or_die(ctx, "out", FRT_SPACE_DEVICE, n * 4);
    frt_graph *g1, *g2;
    CHECK_OK(frt_graph_create(ctx, "producer", 0, &g1));
    CHECK_OK(frt_graph_create(ctx, "consumer", 0, &g2));
    CHECK_OK(frt_graph_bind(g1, "in", in));
    CHECK_OK(frt_graph_bind(g1, "x", x));
    CHECK_OK(frt_graph_bind(g2, "x", x));
    CHECK_OK(frt_graph_bind(g2, "out", out));
    CHECK(frt_graph_port(g1, "x") == frt_graph_port(g2, "x"));
    CHECK(frt_buffer_ptr(frt_graph_port(g1, "x")) == frt_buffer_ptr(frt_graph_port(g2, "x")));
    CHECK_OK(frt_graph_capture(g1, 0, s, record_producer, g1));
    CHECK_OK(frt_graph_capture(g2, 0, s, record_consumer, g2));
    float *h = malloc(n * 4), *r = malloc(n * 4), *want = malloc(n * 4);
    for (int round = 0; round < 3; round++) {
        fill_random_floats(h, n);
        for (size_t i = 0; i < n; i++) want[i] = 0.5f * (3.0f * h[i] + 1.0f) + -2.0f;
        CHECK_OK(put(ctx, in, h));
        CHECK_OK(frt_graph_replay(g1, 0, s));
        CHECK_OK(frt_graph_replay(g2, 0, s));
        CHECK_OK(get(ctx, out, r));
        CHECK_ERR_NEAR(r, want, n, 1e-6);
    }
    frt_graph_destroy(g1);
    frt_graph_destroy(g2);
    frt_buffer_free(in);
    frt_buffer_free(x);
    frt_buffer_free(out);
    free(h);
    free(r);
    free(want);
}

/* ---- events ----------------------------------------------------------------------- */

typedef struct flag_args {
    atomic_int *flag;
    int value;
    int sleep_ms;
} flag_args;

static void set_flag_slowly(void *p)
{
    flag_args *a = p;
    if (a->sleep_ms) sleep_ms(a->sleep_ms);
    atomic_store(a->flag, a->value);
}

typedef struct copy_flag_args {
    atomic_int *flag;
    int *out;
} copy_flag_args;

static void copy_flag(void *p)
{
    copy_flag_args *a = p;
    *a->out = atomic_load(a->flag);
}

static void test_events(frt_context *ctx)
{
    frt_stream *a, *b;
    frt_event *e0, *e1, *never;
    CHECK_OK(frt_stream_create(ctx, 0, &a));
    CHECK_OK(frt_stream_create(ctx, -1, &b));
    CHECK_OK(frt_event_create(ctx, &e0));
    CHECK_OK(frt_event_create(ctx, &e1));
    CHECK_OK(frt_event_create(ctx, &never));
    float ms = -1;
    CHECK_STATUS(frt_event_elapsed_ms(e0, never, &ms), FRT_ERR_STATE);
    CHECK_OK(frt_event_sync(never));                 /* never recorded: returns at once */
    CHECK_OK(frt_stream_wait_event(b, never));       /* ... and waiting on it is a no-op */

    static atomic_int flag;
    static int seen;
    atomic_store(&flag, 0);
    seen = -1;
    flag_args fa = {&flag, 1, 20};
    copy_flag_args ca = {&flag, &seen};
    CHECK_OK(frt_event_record(e0, a));
    CHECK_OK(frt_stream_host_task(a, set_flag_slowly, &fa, sizeof fa));
    CHECK_OK(frt_event_record(e1, a));
    CHECK_OK(frt_stream_wait_event(b, e1));
    CHECK_OK(frt_stream_host_task(b, copy_flag, &ca, sizeof ca));
    CHECK_OK(frt_stream_sync(b));
    CHECK_MSG(seen == 1, "stream b ran before the event it waits on (saw %d)", seen);
    CHECK_OK(frt_event_sync(e1));
    CHECK_OK(frt_event_elapsed_ms(e0, e1, &ms));
    CHECK_MSG(ms > 0, "elapsed %g ms", ms);
    CHECK_OK(frt_context_sync(ctx));
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_event_destroy(never);
    frt_stream_destroy(a);
    frt_stream_destroy(b);
}

/* ---- deferred and captured waits ----------------------------------------------- */

static atomic_int g_gate;

/* Blocks its stream until the test opens the gate. */
static void gate_task(void *p)
{
    (void)p;
    while (!atomic_load(&g_gate)) sleep_ms(1);
}

static int32_t dev_value(frt_buffer *b, frt_stream *s)
{
    int32_t v = -1;
    CHECK_OK(frt_buffer_read(b, 0, &v, sizeof v, s));
    CHECK_OK(frt_stream_sync(s));
    return v;
}

typedef struct wait_copy_ctx {
    frt_event *ev;
    frt_buffer *dst, *src;
} wait_copy_ctx;

static int record_wait_copy(frt_stream *s, void *user)
{
    wait_copy_ctx *w = user;
    FRT_TRY(frt_stream_wait_event(s, w->ev));
    return frt_buffer_copy(w->dst, 0, w->src, 0, 4, s);
}

/* frt_stream_defer_wait / frt_stream_defer_hold, a wait recorded in a
 * capture, and frt_buffer_copy_batch_ex: stream t is held at a gate the
 * test opens, so what s may run before it is decided, not timed (a broken
 * wait could pass only if s were delayed past the gate; it never fails a
 * correct one). */
static void test_deferred_wait(frt_context *ctx)
{
    frt_stream *s, *t;
    frt_event *e, *e2, *never;
    CHECK_OK(frt_stream_create(ctx, 0, &s));
    CHECK_OK(frt_stream_create(ctx, 0, &t));
    CHECK_OK(frt_event_create(ctx, &e));
    CHECK_OK(frt_event_create(ctx, &e2));
    CHECK_OK(frt_event_create(ctx, &never));
    frt_buffer *x = alloc_or_die(ctx, "x", FRT_SPACE_DEVICE, 64), *y = alloc_or_die(ctx, "y", FRT_SPACE_DEVICE, 64),
               *z = alloc_or_die(ctx, "z", FRT_SPACE_DEVICE, 64), *w = alloc_or_die(ctx, "w", FRT_SPACE_DEVICE, 64);
    const int32_t zero = 0, seven = 7, nine = 9;
    CHECK_OK(frt_buffer_write(x, 0, &zero, 4, s));
    CHECK_OK(frt_buffer_write(y, 0, &zero, 4, s));
    CHECK_OK(frt_buffer_write(z, 0, &zero, 4, s));
    CHECK_OK(frt_buffer_write(w, 0, &zero, 4, s));
    CHECK_OK(frt_stream_sync(s));
    frt_buffer *seven_b = alloc_or_die(ctx, "seven", FRT_SPACE_DEVICE, 64);
    frt_buffer *nine_b = alloc_or_die(ctx, "nine", FRT_SPACE_DEVICE, 64);
    CHECK_OK(frt_buffer_write(seven_b, 0, &seven, 4, s));
    CHECK_OK(frt_buffer_write(nine_b, 0, &nine, 4, s));
    CHECK_OK(frt_stream_sync(s));

    CHECK_STATUS(frt_stream_defer_wait(NULL, e), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_defer_hold(NULL, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_stream_deferred(NULL), FRT_ERR_INVALID_ARGUMENT);

    /* t: the gate, then x = 7, then e */
    atomic_store(&g_gate, 0);
    CHECK_OK(frt_stream_host_task(t, gate_task, NULL, 0));
    CHECK_OK(frt_buffer_copy(x, 0, seven_b, 0, 4, t));
    CHECK_OK(frt_event_record(e, t));
    CHECK_OK(frt_stream_defer_wait(s, e));
    CHECK(frt_stream_deferred(s) == 1);
    /* held: s runs ahead of t (a sync returns with the gate still shut) */
    CHECK_OK(frt_stream_defer_hold(s, 1));
    CHECK_OK(frt_buffer_copy(y, 0, x, 0, 4, s));
    CHECK_MSG(dev_value(y, s) == 0, "a held stream waited for the deferred event");
    CHECK(frt_stream_deferred(s) == 1);
    /* released: the next operation enqueues the wait first */
    CHECK_OK(frt_stream_defer_hold(s, 0));
    CHECK_OK(frt_buffer_copy(z, 0, x, 0, 4, s));
    CHECK(frt_stream_deferred(s) == 0);
    sleep_ms(30);
    atomic_store(&g_gate, 1);
    CHECK_MSG(dev_value(z, s) == 7, "the deferred wait did not order the copy after the event");

    /* a wait recorded in a capture waits, at each replay, for the record made before it */
    wait_copy_ctx wc = {e2, w, x};
    frt_graph *g = NULL, *gn = NULL;
    CHECK_OK(frt_graph_create(ctx, "wait_copy", 0, &g));
    CHECK_OK(frt_graph_capture(g, 1, s, record_wait_copy, &wc));
    for (int rep = 0; rep < 2; rep++) {
        atomic_store(&g_gate, 0);
        CHECK_OK(frt_buffer_write(x, 0, &zero, 4, s));
        CHECK_OK(frt_buffer_write(w, 0, &zero, 4, s));
        CHECK_OK(frt_stream_sync(s));
        CHECK_OK(frt_stream_host_task(t, gate_task, NULL, 0));
        CHECK_OK(frt_buffer_copy(x, 0, nine_b, 0, 4, t));
        CHECK_OK(frt_event_record(e2, t));
        CHECK_OK(frt_graph_replay(g, 1, s));
        sleep_ms(30);
        atomic_store(&g_gate, 1);
        CHECK_MSG(dev_value(w, s) == 9, "replay %d: the captured wait did not wait for the newest record", rep);
        CHECK_OK(frt_stream_sync(t));
    }
    /* on a never-recorded event the captured wait is a no-op */
    wait_copy_ctx wn = {never, y, seven_b};
    CHECK_OK(frt_graph_create(ctx, "wait_never", 0, &gn));
    CHECK_OK(frt_graph_capture(gn, 1, s, record_wait_copy, &wn));
    CHECK_OK(frt_graph_replay(gn, 1, s));
    CHECK(dev_value(y, s) == 7);

    /* destroying the awaited event satisfies the deferred wait (the host waits for it) */
    frt_event *e3 = NULL;
    CHECK_OK(frt_event_create(ctx, &e3));
    CHECK_OK(frt_event_record(e3, t));
    CHECK_OK(frt_stream_defer_wait(s, e3));
    frt_event_destroy(e3);
    CHECK(frt_stream_deferred(s) == 0);
    /* a second deferred wait enqueues the first; NULL enqueues a pending one */
    CHECK_OK(frt_stream_defer_wait(s, e));
    CHECK_OK(frt_stream_defer_wait(s, e2));
    CHECK(frt_stream_deferred(s) == 1);
    CHECK_OK(frt_stream_defer_wait(s, NULL));
    CHECK(frt_stream_deferred(s) == 0);

    /* copy_batch_ex: FRT_COPY_OVERLAP copies the same bytes; unknown flags are refused */
    frt_buffer *p = alloc_or_die(ctx, "pinned", FRT_SPACE_PINNED_HOST, 64);
    int32_t *pp = frt_buffer_ptr(p);
    pp[0] = 41;
    frt_copy cs[2] = {{y, 0, seven_b, 0, 4}, {z, 0, p, 0, 4}};
    CHECK_STATUS(frt_buffer_copy_batch_ex(cs, 2, t, 2u), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_buffer_copy_batch_ex(cs, 2, t, FRT_COPY_OVERLAP));
    CHECK_OK(frt_stream_sync(t));
    CHECK(dev_value(y, s) == 7 && dev_value(z, s) == 41);

    frt_graph_destroy(g);
    frt_graph_destroy(gn);
    frt_buffer_free(p);
    frt_buffer_free(x);
    frt_buffer_free(y);
    frt_buffer_free(z);
    frt_buffer_free(w);
    frt_buffer_free(seven_b);
    frt_buffer_free(nine_b);
    frt_event_destroy(e);
    frt_event_destroy(e2);
    frt_event_destroy(never);
    frt_stream_destroy(s);
    frt_stream_destroy(t);
    printf("deferred and captured waits: ordered by the event, held when asked\n");
}

/* ---- plans ------------------------------------------------------------------------ */

typedef struct produce_args {
    const int32_t *counter; /* pinned: the iteration, read when the task runs */
    int32_t *x;             /* pinned */
    size_t n;
    int sleep_ms;
    atomic_int *wait_for; /* if set: wait (up to 2 s) until it is non-zero */
} produce_args;

static void produce(void *p)
{
    produce_args *a = p;
    if (a->wait_for)
        for (int i = 0; i < 2000 && !atomic_load(a->wait_for); i++) sleep_ms(1);
    if (a->sleep_ms) sleep_ms(a->sleep_ms);
    for (size_t i = 0; i < a->n; i++) a->x[i] = a->counter[0] * 1000 + (int32_t)i;
}

typedef struct plan_ctx {
    frt_buffer *counter, *x, *y;
    atomic_int *consumed; /* set after the consumer's copy when non-NULL */
    atomic_int *wait_for;
} plan_ctx;

static int record_plan_producer(frt_stream *s, void *user)
{
    plan_ctx *c = user;
    produce_args a = {frt_buffer_ptr(c->counter), frt_buffer_ptr(c->x),
                      frt_buffer_size(c->x) / 4, 3, c->wait_for};
    return frt_stream_host_task(s, produce, &a, sizeof a);
}

static int record_plan_consumer(frt_stream *s, void *user)
{
    plan_ctx *c = user;
    FRT_TRY(frt_buffer_copy(c->y, 0, c->x, 0, frt_buffer_size(c->x), s));
    if (!c->consumed) return 0;
    flag_args f = {c->consumed, 1, 0};
    return frt_stream_host_task(s, set_flag_slowly, &f, sizeof f);
}

/* Runs plan `p` `iters` times; returns how many results were wrong. */
static int run_plan(frt_context *ctx, frt_plan *p, plan_ctx *c, int iters, atomic_int *flag)
{
    size_t n = frt_buffer_size(c->x) / 4;
    int32_t *got = malloc(n * 4);
    int wrong = 0;
    for (int it = 1; it <= iters; it++) {
        if (flag) atomic_store(flag, 0);
        *(int32_t *)frt_buffer_ptr(c->counter) = it;
        memset(frt_buffer_ptr(c->x), 0xFF, n * 4); /* -1 everywhere */
        if (frt_plan_execute(p) || frt_plan_sync(p) || get(ctx, c->y, got)) {
            fprintf(stderr, "plan: %s\n", frt_last_error());
            wrong = iters;
            break;
        }
        int ok = 1;
        for (size_t i = 0; i < n; i++) ok &= got[i] == it * 1000 + (int32_t)i;
        wrong += !ok;
    }
    free(got);
    return wrong;
}

static void test_plan(frt_context *ctx)
{
    const size_t n = 1024;
    frt_stream *a, *b;
    CHECK_OK(frt_stream_create(ctx, 0, &a));
    CHECK_OK(frt_stream_create(ctx, 0, &b));
    plan_ctx c = {alloc_or_die(ctx, "counter", FRT_SPACE_PINNED_HOST, 64),
                  alloc_or_die(ctx, "x", FRT_SPACE_PINNED_HOST, n * 4),
                  alloc_or_die(ctx, "y", FRT_SPACE_DEVICE, n * 4), NULL, NULL};
    frt_graph *prod, *cons;
    CHECK_OK(frt_graph_create(ctx, "producer", 0, &prod));
    CHECK_OK(frt_graph_create(ctx, "consumer", 0, &cons));
    CHECK_OK(frt_graph_capture(prod, 1, a, record_plan_producer, &c));
    CHECK_OK(frt_graph_capture(cons, 1, b, record_plan_consumer, &c));

    /* with the dependency: right, every time */
    frt_plan *p;
    int n0 = -1, n1 = -1;
    CHECK_OK(frt_plan_create(ctx, &p));
    CHECK_OK(frt_plan_add(p, prod, 1, a, NULL, 0, &n0));
    CHECK_OK(frt_plan_add(p, cons, 1, b, &n0, 1, &n1));
    CHECK(n0 == 0 && n1 == 1 && frt_plan_count(p) == 2);
    int wrong = run_plan(ctx, p, &c, 50, NULL);
    CHECK_MSG(wrong == 0, "%d of 50 plan runs wrong with the dependency", wrong);

    /* bad plans */
    int bad = 5;
    CHECK_STATUS(frt_plan_add(p, prod, 1, a, &bad, 1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_plan_add(p, prod, 1, a, NULL, 1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_plan_count(p) == 2);
    frt_plan *missing;
    CHECK_OK(frt_plan_create(ctx, &missing));
    CHECK_OK(frt_plan_add(missing, prod, 1, a, NULL, 0, NULL));
    CHECK_OK(frt_plan_add(missing, cons, 99, b, NULL, 0, NULL));
    *(int32_t *)frt_buffer_ptr(c.counter) = 777;
    CHECK_STATUS(frt_plan_execute(missing), FRT_ERR_NO_VARIANT);
    CHECK_OK(frt_context_sync(ctx));
    CHECK_MSG(((int32_t *)frt_buffer_ptr(c.x))[0] != 777000, "a failed plan ran its first node");
    frt_plan_destroy(missing);

    /* without the dependency the consumer races ahead. The racing producer
     * waits until the consumer has copied, so the race is certain as long as
     * the two streams really run concurrently (if they did not, the producer
     * would give up after 2 s, run first, and this check would fail). */
    atomic_int consumed;
    plan_ctx rc = c;
    rc.consumed = &consumed;
    rc.wait_for = &consumed;
    frt_graph *prod2, *cons2;
    CHECK_OK(frt_graph_create(ctx, "racing producer", 0, &prod2));
    CHECK_OK(frt_graph_create(ctx, "racing consumer", 0, &cons2));
    CHECK_OK(frt_graph_capture(prod2, 1, a, record_plan_producer, &rc));
    CHECK_OK(frt_graph_capture(cons2, 1, b, record_plan_consumer, &rc));
    frt_plan *race;
    CHECK_OK(frt_plan_create(ctx, &race));
    CHECK_OK(frt_plan_add(race, prod2, 1, a, NULL, 0, NULL));
    CHECK_OK(frt_plan_add(race, cons2, 1, b, NULL, 0, NULL)); /* no dependency */
    wrong = run_plan(ctx, race, &rc, 3, &consumed);
    CHECK_MSG(wrong > 0, "the plan without its dependency was right every time");
    /* the plain plan is still right (the dependency is what makes it right) */
    wrong = run_plan(ctx, p, &c, 5, NULL);
    CHECK(wrong == 0);

    frt_plan_destroy(race);
    frt_plan_destroy(p);
    frt_graph_destroy(prod);
    frt_graph_destroy(cons);
    frt_graph_destroy(prod2);
    frt_graph_destroy(cons2);
    frt_buffer_free(c.counter);
    frt_buffer_free(c.x);
    frt_buffer_free(c.y);
    frt_stream_destroy(a);
    frt_stream_destroy(b);
}

/* ---- host tasks and stream lifetimes ---------------------------------------------- */

static atomic_int null_args_seen;
static void note_null_args(void *p) { atomic_store(&null_args_seen, p == NULL ? 1 : 2); }

typedef struct count_args {
    atomic_int *count;
} count_args;

static void count_up(void *p)
{
    count_args *a = p;
    atomic_fetch_add(a->count, 1);
}

static void test_streams(frt_context *ctx)
{
    static atomic_int count;
    CHECK_OK(frt_stream_host_task(frt_context_stream(ctx), note_null_args, NULL, 0));
    CHECK_OK(frt_stream_sync(frt_context_stream(ctx)));
    CHECK(atomic_load(&null_args_seen) == 1);
    atomic_store(&count, 0);
    frt_stream *ss[4];
    for (int i = 0; i < 4; i++) CHECK_OK(frt_stream_create(ctx, i - 2, &ss[i]));
    count_args ca = {&count};
    for (int k = 0; k < 100; k++)
        for (int i = 0; i < 4; i++) CHECK_OK(frt_stream_host_task(ss[i], count_up, &ca, sizeof ca));
    /* destroying a stream waits for its work */
    for (int i = 0; i < 4; i++) frt_stream_destroy(ss[i]);
    CHECK(atomic_load(&count) == 400);
    CHECK(frt_stream_native(frt_context_stream(ctx)) == NULL || g_backend == FRT_BACKEND_CUDA);

    /* a second context with a stream left alive: destroy joins it */
    frt_context *c2;
    CHECK_OK(frt_context_create(g_backend, 0, &c2));
    CHECK(frt_context_backend(c2) == g_backend);
    frt_stream *left;
    CHECK_OK(frt_stream_create(c2, 0, &left));
    CHECK_OK(frt_stream_host_task(left, count_up, &ca, sizeof ca));
    frt_context_destroy(c2);
    CHECK(atomic_load(&count) == 401);
}

int main(int argc, char **argv)
{
    if (argc < 2 || frt_backend_parse(argv[1], &g_backend)) {
        fprintf(stderr, "usage: test_exec cpu|cuda\n");
        return 2;
    }
    int n = -1;
    CHECK_OK(frt_device_count(g_backend, &n));
    if (g_backend == FRT_BACKEND_CUDA) {
        frt_context *c;
        if (!frt_exec_has_cuda()) {
            CHECK(n == 0);
            CHECK_STATUS(frt_context_create(FRT_BACKEND_CUDA, 0, &c), FRT_ERR_UNSUPPORTED);
            TEST_SKIP("built without CUDA");
        }
        if (n == 0) {
            CHECK_STATUS(frt_context_create(FRT_BACKEND_CUDA, 0, &c), FRT_ERR_NO_DEVICE);
            if (frt_test_failed_) return frt_test_report();
            TEST_SKIP("no CUDA device");
        }
    } else {
        CHECK(n == 1);
    }
    frt_test_seed(42);
    frt_context *ctx;
    CHECK_OK(frt_context_create(g_backend, 0, &ctx));
    if (!ctx) return frt_test_report();
    frt_device_info info;
    CHECK_OK(frt_context_device_info(ctx, &info));
    printf("backend %s: %s\n", frt_backend_name(g_backend), info.name);

    test_invalid_handles(ctx);
    test_alloc_too_large(ctx);
    test_copies(ctx);
    test_copy_chain_order(ctx);
    test_replay_matches_direct(ctx, FRT_SPACE_DEVICE);
    test_replay_matches_direct(ctx, FRT_SPACE_PINNED_HOST);
    test_args_baked(ctx);
    test_variants(ctx);
    test_capture_rules(ctx);
    test_shared_port(ctx);
    test_events(ctx);
    test_deferred_wait(ctx);
    test_plan(ctx);
    test_streams(ctx);
    test_pinned_cache();

    frt_context_destroy(ctx);
    return frt_test_report();
}
