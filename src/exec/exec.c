/*
 * exec/exec.c - the backend-independent half of the execution contract:
 * argument validation, contexts and stream lists, buffers and range checks,
 * graphs (ports, the variant table with its LRU bound, capture bookkeeping)
 * and plans (a DAG of replays turned into event waits across streams).
 * Everything that touches a device goes through frt_exec_ops (exec_internal.h).
 */
#include "exec/exec_internal.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation helpers ---------------------------------------------------- */

static int ctx_ok(const frt_context *c) { return c && c->magic == FRT_MAGIC_CONTEXT; }
static int stream_ok(const frt_stream *s) { return s && s->magic == FRT_MAGIC_STREAM; }
static int event_ok(const frt_event *e) { return e && e->magic == FRT_MAGIC_EVENT; }
static int buffer_ok(const frt_buffer *b) { return b && b->magic == FRT_MAGIC_BUFFER; }
static int graph_ok(const frt_graph *g);
static int plan_ok(const frt_plan *p);

#define CHECK_HANDLE(okfn, h, what)                                                          \
    do {                                                                                     \
        if (!okfn(h))                                                                        \
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: %s: %s " what, __func__,       \
                             (h) ? "invalid (destroyed or wrong type)" : "NULL");            \
    } while (0)

static int space_ok(frt_space s)
{
    return s == FRT_SPACE_DEVICE || s == FRT_SPACE_PINNED_HOST || s == FRT_SPACE_HOST;
}

static const char *space_name(frt_space s)
{
    switch (s) {
    case FRT_SPACE_DEVICE: return "device";
    case FRT_SPACE_PINNED_HOST: return "pinned host";
    case FRT_SPACE_HOST: return "host";
    }
    return "?";
}

/* [off, off + bytes) inside [0, size), without overflow. */
static int range_ok(size_t off, size_t bytes, size_t size)
{
    return off <= size && bytes <= size - off;
}

static char *dup_name(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static const frt_exec_ops *backend_ops(frt_backend b)
{
    switch (b) {
    case FRT_BACKEND_CPU: return &frt_exec_cpu_ops;
    case FRT_BACKEND_CUDA: return &frt_exec_cuda_ops;
    }
    return NULL;
}

/* ---- backends -------------------------------------------------------------- */

const char *frt_backend_name(frt_backend backend)
{
    switch (backend) {
    case FRT_BACKEND_CPU: return "cpu";
    case FRT_BACKEND_CUDA: return "cuda";
    }
    return "?";
}

int frt_backend_parse(const char *name, frt_backend *out)
{
    if (!name || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: backend: NULL argument");
    if (!strcmp(name, "cpu")) {
        *out = FRT_BACKEND_CPU;
        return 0;
    }
    if (!strcmp(name, "cuda")) {
        *out = FRT_BACKEND_CUDA;
        return 0;
    }
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: unknown backend '%s' (expected cpu or cuda)",
                     name);
}

int frt_device_count(frt_backend backend, int *count)
{
    const frt_exec_ops *ops = backend_ops(backend);
    if (!count || !ops)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: device count: %s",
                         count ? "unknown backend" : "NULL count");
    *count = 0;
    return ops->device_count(count);
}

int frt_exec_has_cuda(void) { return FRT_HAVE_CUDA; }

/* ---- streams (internal) ---------------------------------------------------- */

static int stream_new(frt_context *ctx, int priority, int is_default, frt_stream **out)
{
    frt_stream *s = calloc(1, sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: stream: out of memory");
    s->ctx = ctx;
    s->is_default = is_default;
    int rc = ctx->ops->stream_init(s, priority);
    if (rc < 0) {
        free(s);
        return rc;
    }
    s->magic = FRT_MAGIC_STREAM;
    s->next = ctx->streams;
    ctx->streams = s;
    *out = s;
    return 0;
}

static void stream_delete(frt_stream *s)
{
    frt_context *ctx = s->ctx;
    for (frt_stream **p = &ctx->streams; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    ctx->ops->stream_fini(s);
    s->magic = 0;
    free(s);
}

/* ---- the pinned host cache -------------------------------------------------- */

#define PINNED_MIB ((size_t)1 << 20)

/* FRT_PINNED_CACHE_MB from the environment (a decimal number of MiB), else
 * FRT_PINNED_CACHE_DEFAULT_MB. */
static size_t pinned_limit_default(void)
{
    const char *e = getenv("FRT_PINNED_CACHE_MB");
    if (e && *e) {
        char *end = NULL;
        unsigned long long mb = strtoull(e, &end, 10);
        if (end && !*end && mb <= (unsigned long long)(SIZE_MAX / PINNED_MIB)) return (size_t)mb * PINNED_MIB;
    }
    return (size_t)FRT_PINNED_CACHE_DEFAULT_MB * PINNED_MIB;
}

/* The size a new pinned block of `bytes` gets: page-rounded below 1 MiB,
 * else rounded up to 1/8 of the power of two at or below it (at least
 * 1 MiB), so a capsule that grows a little finds its old block. */
static size_t pinned_round(size_t bytes)
{
    if (bytes < PINNED_MIB) return (bytes + 4095) / 4096 * 4096;
    size_t p2 = PINNED_MIB;
    while (p2 <= bytes / 2) p2 *= 2;
    size_t g = p2 / 8 > PINNED_MIB ? p2 / 8 : PINNED_MIB;
    if (bytes > SIZE_MAX - g) return bytes;
    return (bytes + g - 1) / g * g;
}

/* Releases cached blocks, oldest first, until at most `keep` bytes stay. */
static void pinned_trim(frt_context *ctx, size_t keep)
{
    int drop = 0;
    while (drop < ctx->n_pinned && ctx->pinned_cached > keep) {
        ctx->ops->mem_free(ctx, FRT_SPACE_PINNED_HOST, ctx->pinned[drop].ptr);
        ctx->pinned_cached -= ctx->pinned[drop].bytes;
        drop++;
    }
    if (drop) {
        memmove(ctx->pinned, ctx->pinned + drop, (size_t)(ctx->n_pinned - drop) * sizeof *ctx->pinned);
        ctx->n_pinned -= drop;
    }
}

/* Takes the smallest cached block of bytes .. 2 x bytes (1 MiB more below
 * 1 MiB); 0 with *ptr NULL when none fits. */
static void pinned_take(frt_context *ctx, size_t bytes, void **ptr, size_t *got)
{
    *ptr = NULL;
    const size_t most = bytes < PINNED_MIB ? bytes + PINNED_MIB : (bytes > SIZE_MAX / 2 ? SIZE_MAX : 2 * bytes);
    int best = -1;
    for (int i = 0; i < ctx->n_pinned; i++) {
        const size_t b = ctx->pinned[i].bytes;
        if (b >= bytes && b <= most && (best < 0 || b < ctx->pinned[best].bytes)) best = i;
    }
    if (best < 0) return;
    *ptr = ctx->pinned[best].ptr;
    *got = ctx->pinned[best].bytes;
    ctx->pinned_cached -= *got;
    memmove(ctx->pinned + best, ctx->pinned + best + 1, (size_t)(ctx->n_pinned - best - 1) * sizeof *ctx->pinned);
    ctx->n_pinned--;
}

/* A PINNED_HOST block for frt_buffer_alloc: from the cache, else new (after
 * emptying the cache when the first try fails). */
static int pinned_alloc(frt_context *ctx, size_t bytes, void **ptr, size_t *got)
{
    pinned_take(ctx, bytes, ptr, got);
    if (*ptr) {
        ctx->pinned_hits++;
        return 0;
    }
    ctx->pinned_misses++;
    size_t want = pinned_round(bytes);
    int rc = ctx->ops->mem_alloc(ctx, FRT_SPACE_PINNED_HOST, want, ptr);
    if (rc < 0 && want != bytes) {
        want = bytes;
        rc = ctx->ops->mem_alloc(ctx, FRT_SPACE_PINNED_HOST, want, ptr);
    }
    if (rc < 0 && ctx->n_pinned) {
        pinned_trim(ctx, 0);
        rc = ctx->ops->mem_alloc(ctx, FRT_SPACE_PINNED_HOST, want, ptr);
    }
    if (rc < 0) return rc;
    *got = want;
    return 0;
}

/* Keeps a freed block (the newest at the end), or releases it when it alone
 * is over the limit or the table cannot grow; then trims to the limit. */
static void pinned_put(frt_context *ctx, void *ptr, size_t bytes)
{
    if (bytes > ctx->pinned_limit) {
        ctx->ops->mem_free(ctx, FRT_SPACE_PINNED_HOST, ptr);
        return;
    }
    if (ctx->n_pinned == ctx->cap_pinned) {
        int cap = ctx->cap_pinned ? 2 * ctx->cap_pinned : 16;
        struct frt_pinned_block *nb = realloc(ctx->pinned, (size_t)cap * sizeof *nb);
        if (!nb) {
            ctx->ops->mem_free(ctx, FRT_SPACE_PINNED_HOST, ptr);
            return;
        }
        ctx->pinned = nb;
        ctx->cap_pinned = cap;
    }
    ctx->pinned[ctx->n_pinned].ptr = ptr;
    ctx->pinned[ctx->n_pinned].bytes = bytes;
    ctx->n_pinned++;
    ctx->pinned_cached += bytes;
    pinned_trim(ctx, ctx->pinned_limit);
}

int frt_context_set_pinned_cache(frt_context *ctx, size_t limit_bytes)
{
    CHECK_HANDLE(ctx_ok, ctx, "context");
    ctx->pinned_limit = limit_bytes;
    pinned_trim(ctx, limit_bytes);
    return 0;
}

int frt_context_trim(frt_context *ctx)
{
    CHECK_HANDLE(ctx_ok, ctx, "context");
    pinned_trim(ctx, 0);
    return 0;
}

int frt_context_pinned_cache_stats(frt_context *ctx, frt_pinned_cache_stats *out)
{
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: pinned cache stats: NULL out");
    out->limit_bytes = ctx->pinned_limit;
    out->cached_bytes = ctx->pinned_cached;
    out->cached_blocks = ctx->n_pinned;
    out->hits = ctx->pinned_hits;
    out->misses = ctx->pinned_misses;
    return 0;
}

int frt_context_device(const frt_context *ctx) { return ctx_ok(ctx) ? ctx->device : -1; }

uint64_t frt_context_capture_count(const frt_context *ctx)
{
    return ctx_ok(ctx) ? ctx->n_captures : 0;
}

/* ---- context --------------------------------------------------------------- */

int frt_context_create(frt_backend backend, int device, frt_context **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: context: NULL out");
    *out = NULL;
    const frt_exec_ops *ops = backend_ops(backend);
    if (!ops) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: context: unknown backend %d", (int)backend);
    if (device < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: context: negative device %d", device);
    frt_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: context: out of memory");
    ctx->backend = backend;
    ctx->device = device;
    ctx->ops = ops;
    ctx->pinned_limit = pinned_limit_default();
    int rc = ops->context_init(ctx);
    if (rc < 0) {
        free(ctx);
        return rc;
    }
    rc = stream_new(ctx, 0, 1, &ctx->default_stream);
    if (rc < 0) {
        ops->context_fini(ctx);
        free(ctx);
        return rc;
    }
    ctx->magic = FRT_MAGIC_CONTEXT;
    *out = ctx;
    return 0;
}

void frt_context_destroy(frt_context *ctx)
{
    if (!ctx_ok(ctx)) return;
    /* Streams left alive by the caller are destroyed too, so no worker thread
     * outlives its context. */
    while (ctx->streams) stream_delete(ctx->streams);
    pinned_trim(ctx, 0);
    free(ctx->pinned);
    ctx->ops->context_fini(ctx);
    ctx->magic = 0;
    free(ctx);
}

frt_backend frt_context_backend(const frt_context *ctx)
{
    return ctx_ok(ctx) ? ctx->backend : FRT_BACKEND_CPU;
}

int frt_context_device_info(frt_context *ctx, frt_device_info *info)
{
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!info) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: device info: NULL info");
    memset(info, 0, sizeof *info);
    info->backend = ctx->backend;
    return ctx->ops->device_info(ctx, info);
}

int frt_context_sync(frt_context *ctx)
{
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (ctx->n_capturing)
        return frt_error(FRT_ERR_STATE, "exec: context sync while a stream is capturing");
    return ctx->ops->context_sync(ctx);
}

frt_stream *frt_context_stream(frt_context *ctx)
{
    return ctx_ok(ctx) ? ctx->default_stream : NULL;
}

/* ---- streams --------------------------------------------------------------- */

int frt_stream_create(frt_context *ctx, int priority, frt_stream **out)
{
    if (out) *out = NULL;
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: stream: NULL out");
    return stream_new(ctx, priority, 0, out);
}

void frt_stream_destroy(frt_stream *stream)
{
    if (!stream_ok(stream) || stream->is_default || stream->capture) return;
    stream_delete(stream);
}

/* Enqueues the stream's deferred wait (frt_stream_defer_wait) before the
 * operation that calls this, unless held or capturing. Kept for the next
 * operation when the backend fails to enqueue it. */
static int stream_enter(frt_stream *s)
{
    if (!s->deferred || s->deferred_hold || s->capture) return 0;
    FRT_TRY(s->ctx->ops->stream_wait_event(s, s->deferred));
    s->deferred = NULL;
    return 0;
}

int frt_stream_sync(frt_stream *stream)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (stream->capture)
        return frt_error(FRT_ERR_STATE, "exec: stream sync inside a capture");
    FRT_TRY(stream_enter(stream));
    return stream->ctx->ops->stream_sync(stream);
}

void *frt_stream_native(frt_stream *stream)
{
    if (!stream_ok(stream)) return NULL;
    (void)stream_enter(stream); /* on failure the next checked operation enqueues it (and reports) */
    return stream->ctx->ops->stream_native(stream);
}

int frt_stream_defer_wait(frt_stream *stream, frt_event *event)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (event) {
        CHECK_HANDLE(event_ok, event, "event");
        if (event->ctx != stream->ctx)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: defer wait: event and stream of different contexts");
    }
    if (stream->capture) return frt_error(FRT_ERR_STATE, "exec: defer wait inside a capture");
    if (stream->deferred && stream->deferred != event) {
        /* the earlier deferred wait stays in force: enqueue it now */
        const int hold = stream->deferred_hold;
        stream->deferred_hold = 0;
        int rc = stream_enter(stream);
        stream->deferred_hold = hold;
        FRT_TRY(rc);
    }
    stream->deferred = event;
    return 0;
}

int frt_stream_defer_hold(frt_stream *stream, int hold)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    stream->deferred_hold = hold != 0;
    return 0;
}

int frt_stream_deferred(frt_stream *stream)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    return stream->deferred != NULL;
}

int frt_stream_is_capturing(frt_stream *stream)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    return stream->capture != NULL;
}

/* ---- events ---------------------------------------------------------------- */

int frt_event_create(frt_context *ctx, frt_event **out)
{
    if (out) *out = NULL;
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: event: NULL out");
    frt_event *e = calloc(1, sizeof *e);
    if (!e) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: event: out of memory");
    e->ctx = ctx;
    int rc = ctx->ops->event_init(e);
    if (rc < 0) {
        free(e);
        return rc;
    }
    e->magic = FRT_MAGIC_EVENT;
    *out = e;
    return 0;
}

void frt_event_destroy(frt_event *event)
{
    if (!event_ok(event)) return;
    /* A stream's deferred wait on it is satisfied here, by the host: an
     * enqueued wait would outlive the event (the cpu backend's wait task
     * reads it when it runs). */
    int waited = 0;
    for (frt_stream *s = event->ctx->streams; s; s = s->next)
        if (s->deferred == event) {
            if (!waited) (void)event->ctx->ops->event_sync(event);
            waited = 1;
            s->deferred = NULL;
        }
    event->ctx->ops->event_fini(event);
    event->magic = 0;
    free(event);
}

static int event_stream_check(frt_event *e, frt_stream *s, const char *what)
{
    CHECK_HANDLE(event_ok, e, "event");
    CHECK_HANDLE(stream_ok, s, "stream");
    if (e->ctx != s->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: %s: event and stream of different contexts",
                         what);
    return 0;
}

int frt_event_record(frt_event *event, frt_stream *stream)
{
    FRT_TRY(event_stream_check(event, stream, "event record"));
    if (stream->capture)
        return frt_error(FRT_ERR_STATE,
                         "exec: event record inside a capture (cross-stream work is expressed with plans)");
    FRT_TRY(stream_enter(stream));
    return stream->ctx->ops->event_record(event, stream);
}

int frt_stream_wait_event(frt_stream *stream, frt_event *event)
{
    FRT_TRY(event_stream_check(event, stream, "stream wait event"));
    FRT_TRY(stream_enter(stream));
    return stream->ctx->ops->stream_wait_event(stream, event);
}

int frt_event_sync(frt_event *event)
{
    CHECK_HANDLE(event_ok, event, "event");
    return event->ctx->ops->event_sync(event);
}

int frt_event_elapsed_ms(frt_event *start, frt_event *end, float *ms)
{
    CHECK_HANDLE(event_ok, start, "start event");
    CHECK_HANDLE(event_ok, end, "end event");
    if (!ms) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: event elapsed: NULL ms");
    if (start->ctx != end->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: event elapsed: events of different contexts");
    return start->ctx->ops->event_elapsed_ms(start, end, ms);
}

/* ---- host tasks ------------------------------------------------------------ */

int frt_stream_host_task(frt_stream *stream, frt_host_fn fn, const void *args, size_t args_size)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (!fn) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: host task: NULL function");
    if (!args && args_size)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: host task: NULL args with %zu bytes",
                         args_size);
    FRT_TRY(stream_enter(stream));
    return stream->ctx->ops->host_task(stream, fn, args_size ? args : NULL, args_size);
}

/* ---- buffers --------------------------------------------------------------- */

static int buffer_new(frt_context *ctx, const char *name, frt_space space, void *ptr, size_t bytes,
                      int owned, frt_buffer **out)
{
    frt_buffer *b = calloc(1, sizeof *b);
    char *n = dup_name(name);
    if (!b || !n) {
        free(b);
        free(n);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: buffer '%s': out of memory for the handle",
                         name ? name : "");
    }
    b->ctx = ctx;
    b->ptr = ptr;
    b->bytes = bytes;
    b->space = space;
    b->owned = owned;
    b->name = n;
    b->magic = FRT_MAGIC_BUFFER;
    *out = b;
    return 0;
}

int frt_buffer_alloc(frt_context *ctx, const char *name, frt_space space, size_t bytes,
                     frt_buffer **out)
{
    if (out) *out = NULL;
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!name) name = "";
    if (!out || !bytes || !space_ok(space))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: buffer '%s': %s", name,
                         !out ? "NULL out" : !bytes ? "zero bytes" : "unknown memory space");
    if (ctx->n_capturing)
        return frt_error(FRT_ERR_STATE, "exec: buffer '%s': allocation while a stream is capturing",
                         name);
    void *ptr = NULL;
    size_t got = bytes;
    int rc = space == FRT_SPACE_PINNED_HOST ? pinned_alloc(ctx, bytes, &ptr, &got)
                                            : ctx->ops->mem_alloc(ctx, space, bytes, &ptr);
    if (rc < 0) {
        frt_error_prefix("exec: buffer '%s': cannot allocate %zu bytes (%.2f GiB) of %s memory on %s",
                         name, bytes, (double)bytes / (1024.0 * 1024.0 * 1024.0), space_name(space),
                         ctx->ops->name);
        return rc;
    }
    rc = buffer_new(ctx, name, space, ptr, bytes, 1, out);
    if (rc < 0) {
        if (space == FRT_SPACE_PINNED_HOST)
            pinned_put(ctx, ptr, got);
        else
            ctx->ops->mem_free(ctx, space, ptr);
        return rc;
    }
    (*out)->alloc_bytes = got;
    return 0;
}

int frt_buffer_wrap(frt_context *ctx, const char *name, frt_space space, void *ptr, size_t bytes,
                    frt_buffer **out)
{
    if (out) *out = NULL;
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!name) name = "";
    if (!out || !ptr || !bytes || !space_ok(space))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: wrap buffer '%s': %s", name,
                         !out ? "NULL out" : !ptr ? "NULL pointer" : !bytes ? "zero bytes"
                                                                           : "unknown memory space");
    return buffer_new(ctx, name, space, ptr, bytes, 0, out);
}

void frt_buffer_free(frt_buffer *buf)
{
    if (!buffer_ok(buf)) return;
    if (buf->owned && buf->space == FRT_SPACE_PINNED_HOST)
        pinned_put(buf->ctx, buf->ptr, buf->alloc_bytes);
    else if (buf->owned)
        buf->ctx->ops->mem_free(buf->ctx, buf->space, buf->ptr);
    buf->magic = 0;
    free(buf->name);
    free(buf);
}

void *frt_buffer_ptr(const frt_buffer *buf) { return buffer_ok(buf) ? buf->ptr : NULL; }
size_t frt_buffer_size(const frt_buffer *buf) { return buffer_ok(buf) ? buf->bytes : 0; }
const char *frt_buffer_name(const frt_buffer *buf) { return buffer_ok(buf) ? buf->name : ""; }
frt_space frt_buffer_space(const frt_buffer *buf)
{
    return buffer_ok(buf) ? buf->space : FRT_SPACE_HOST;
}

static int buffer_stream_check(const frt_buffer *b, frt_stream *s, const char *what)
{
    if (!buffer_ok(b))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: %s: %s buffer", what,
                         b ? "invalid (destroyed or wrong type)" : "NULL");
    if (!stream_ok(s))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: %s: %s stream", what,
                         s ? "invalid (destroyed or wrong type)" : "NULL");
    if (b->ctx != s->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "exec: %s: buffer '%s' and stream of different contexts", what, b->name);
    return 0;
}

int frt_buffer_fill(frt_buffer *buf, size_t off, size_t bytes, uint8_t value, frt_stream *stream)
{
    FRT_TRY(buffer_stream_check(buf, stream, "fill"));
    if (!range_ok(off, bytes, buf->bytes))
        return frt_error(FRT_ERR_OUT_OF_RANGE, "exec: fill: [%zu, +%zu) past the end of '%s' (%zu bytes)",
                         off, bytes, buf->name, buf->bytes);
    if (!bytes) return 0;
    FRT_TRY(stream_enter(stream));
    return stream->ctx->ops->fill(stream, (char *)buf->ptr + off, buf->space, bytes, value);
}

/* Validates one copy and resolves it into *op. index < 0 for a single copy. */
/* The label of copy `index` in error messages ("copy" for a single copy).
 * Formatted only on an error path: a capsule restore resolves ~70 copies,
 * and snprintf for each took ~10 us of the restore's latency. */
static const char *copy_where(char *buf, size_t n, int index)
{
    if (index < 0) return "copy";
    snprintf(buf, n, "copy batch [%d]", index);
    return buf;
}

static int copy_resolve(const frt_copy *c, frt_stream *s, int index, frt_copy_op *op)
{
    char wb[32];
    if (!buffer_ok(c->dst) || !buffer_ok(c->src) || !stream_ok(s) || c->dst->ctx != s->ctx ||
        c->src->ctx != s->ctx) {
        const char *where = copy_where(wb, sizeof wb, index);
        FRT_TRY(buffer_stream_check(c->dst, s, where));
        FRT_TRY(buffer_stream_check(c->src, s, where));
    }
    if (!range_ok(c->dst_off, c->bytes, c->dst->bytes))
        return frt_error(FRT_ERR_OUT_OF_RANGE,
                         "exec: %s: destination [%zu, +%zu) past the end of '%s' (%zu bytes)",
                         copy_where(wb, sizeof wb, index), c->dst_off, c->bytes, c->dst->name, c->dst->bytes);
    if (!range_ok(c->src_off, c->bytes, c->src->bytes))
        return frt_error(FRT_ERR_OUT_OF_RANGE,
                         "exec: %s: source [%zu, +%zu) past the end of '%s' (%zu bytes)",
                         copy_where(wb, sizeof wb, index), c->src_off, c->bytes, c->src->name, c->src->bytes);
    op->dst = (char *)c->dst->ptr + c->dst_off;
    op->src = (const char *)c->src->ptr + c->src_off;
    op->bytes = c->bytes;
    op->dst_space = c->dst->space;
    op->src_space = c->src->space;
    uintptr_t d = (uintptr_t)op->dst, sp = (uintptr_t)op->src;
    if (c->bytes && d < sp + c->bytes && sp < d + c->bytes)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: %s: source '%s' and destination '%s' overlap",
                         copy_where(wb, sizeof wb, index), c->src->name, c->dst->name);
    if (s->capture && ((op->dst_space == FRT_SPACE_HOST && op->src_space == FRT_SPACE_DEVICE) ||
                       (op->dst_space == FRT_SPACE_DEVICE && op->src_space == FRT_SPACE_HOST)))
        return frt_error(FRT_ERR_STATE,
                         "exec: %s: '%s' -> '%s': pageable host <-> device copies cannot be captured "
                         "(use pinned host memory)",
                         copy_where(wb, sizeof wb, index), c->src->name, c->dst->name);
    return 0;
}

int frt_buffer_copy(frt_buffer *dst, size_t dst_off, const frt_buffer *src, size_t src_off,
                    size_t bytes, frt_stream *stream)
{
    frt_copy c = {dst, dst_off, src, src_off, bytes};
    frt_copy_op op;
    FRT_TRY(copy_resolve(&c, stream, -1, &op));
    if (!bytes) return 0;
    FRT_TRY(stream_enter(stream));
    return stream->ctx->ops->copy(stream, &op, 1);
}

int frt_buffer_copy_batch(const frt_copy *copies, int n, frt_stream *stream)
{
    return frt_buffer_copy_batch_ex(copies, n, stream, 0);
}

int frt_buffer_copy_batch_ex(const frt_copy *copies, int n, frt_stream *stream, unsigned flags)
{
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (flags & ~(unsigned)FRT_COPY_OVERLAP)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: copy batch: unknown flags 0x%x", flags);
    if (n < 0 || (n > 0 && !copies))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: copy batch: %s",
                         n < 0 ? "negative count" : "NULL copies");
    if (n == 0) return 0;
    frt_copy_op local[32];
    frt_copy_op *ops = n <= 32 ? local : malloc((size_t)n * sizeof *ops);
    if (!ops) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: copy batch: out of memory (%d copies)", n);
    int m = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = copy_resolve(&copies[i], stream, i, &ops[m]);
        if (rc == 0 && ops[m].bytes) m++;
    }
    if (rc == 0 && m) rc = stream_enter(stream);
    if (rc == 0 && m) {
        const frt_exec_ops *eo = stream->ctx->ops;
        const int overlap = (flags & FRT_COPY_OVERLAP) && eo->copy_overlap;
        rc = overlap ? eo->copy_overlap(stream, ops, m) : eo->copy(stream, ops, m);
    }
    if (ops != local) free(ops);
    return rc;
}

static int host_copy(frt_buffer *buf, size_t off, void *host, size_t bytes, frt_stream *s, int write)
{
    const char *what = write ? "write" : "read";
    FRT_TRY(buffer_stream_check(buf, s, what));
    if (!host) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: %s '%s': NULL host pointer", what, buf->name);
    if (!range_ok(off, bytes, buf->bytes))
        return frt_error(FRT_ERR_OUT_OF_RANGE, "exec: %s: [%zu, +%zu) past the end of '%s' (%zu bytes)",
                         what, off, bytes, buf->name, buf->bytes);
    if (s->capture)
        return frt_error(FRT_ERR_STATE,
                         "exec: %s '%s' inside a capture (a host pointer would be baked into the graph; "
                         "use a buffer)",
                         what, buf->name);
    if (!bytes) return 0;
    frt_copy_op op;
    if (write) {
        op = (frt_copy_op){(char *)buf->ptr + off, host, bytes, buf->space, FRT_SPACE_HOST};
    } else {
        op = (frt_copy_op){host, (char *)buf->ptr + off, bytes, FRT_SPACE_HOST, buf->space};
    }
    FRT_TRY(stream_enter(s));
    return s->ctx->ops->copy(s, &op, 1);
}

int frt_buffer_write(frt_buffer *buf, size_t off, const void *host_src, size_t bytes,
                     frt_stream *stream)
{
    return host_copy(buf, off, (void *)host_src, bytes, stream, 1);
}

int frt_buffer_read(const frt_buffer *buf, size_t off, void *host_dst, size_t bytes,
                    frt_stream *stream)
{
    return host_copy((frt_buffer *)buf, off, host_dst, bytes, stream, 0);
}

/* ---- graphs ---------------------------------------------------------------- */

typedef struct graph_port {
    char *name;
    frt_buffer *buf;
} graph_port;

struct frt_graph {
    uint32_t magic;
    frt_context *ctx;
    char *name;
    int max_variants; /* 0 = unbounded */
    graph_port *ports;
    int n_ports, cap_ports;
    frt_variant **variants;
    int n_variants, cap_variants;
    uint64_t tick; /* LRU clock: bumped on every capture and replay */
    int capturing;
};

static int graph_ok(const frt_graph *g) { return g && g->magic == FRT_MAGIC_GRAPH; }

int frt_variant_keep(frt_variant *v, void *block)
{
    if (v->n_keep == v->cap_keep) {
        int cap = v->cap_keep ? 2 * v->cap_keep : 8;
        void **k = realloc(v->keep, (size_t)cap * sizeof *k);
        if (!k) {
            free(block);
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: capture: out of memory");
        }
        v->keep = k;
        v->cap_keep = cap;
    }
    v->keep[v->n_keep++] = block;
    return 0;
}

static void variant_destroy(frt_context *ctx, frt_variant *v)
{
    if (!v) return;
    ctx->ops->variant_fini(v);
    for (int i = 0; i < v->n_keep; i++) free(v->keep[i]);
    free(v->keep);
    free(v);
}

static int variant_find(const frt_graph *g, frt_shape_key key)
{
    for (int i = 0; i < g->n_variants; i++)
        if (g->variants[i]->key == key) return i;
    return -1;
}

static void variant_remove(frt_graph *g, int i)
{
    frt_variant *v = g->variants[i];
    g->variants[i] = g->variants[--g->n_variants];
    variant_destroy(g->ctx, v);
}

static void variants_clear(frt_graph *g)
{
    while (g->n_variants) variant_remove(g, g->n_variants - 1);
}

int frt_graph_create(frt_context *ctx, const char *name, int max_variants, frt_graph **out)
{
    if (out) *out = NULL;
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!out || max_variants < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: graph '%s': %s", name ? name : "",
                         !out ? "NULL out" : "negative max_variants");
    frt_graph *g = calloc(1, sizeof *g);
    char *n = dup_name(name);
    if (!g || !n) {
        free(g);
        free(n);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: graph: out of memory");
    }
    g->ctx = ctx;
    g->name = n;
    g->max_variants = max_variants;
    g->magic = FRT_MAGIC_GRAPH;
    *out = g;
    return 0;
}

void frt_graph_destroy(frt_graph *graph)
{
    if (!graph_ok(graph) || graph->capturing) return;
    variants_clear(graph);
    free(graph->variants);
    for (int i = 0; i < graph->n_ports; i++) free(graph->ports[i].name);
    free(graph->ports);
    free(graph->name);
    graph->magic = 0;
    free(graph);
}

const char *frt_graph_name(const frt_graph *graph) { return graph_ok(graph) ? graph->name : ""; }

int frt_graph_bind(frt_graph *graph, const char *port, frt_buffer *buf)
{
    CHECK_HANDLE(graph_ok, graph, "graph");
    if (!port || !port[0])
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: graph '%s': bind: %s port name", graph->name,
                         port ? "empty" : "NULL");
    if (buf && !buffer_ok(buf))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: graph '%s': bind '%s': invalid buffer",
                         graph->name, port);
    if (buf && buf->ctx != graph->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "exec: graph '%s': bind '%s': buffer '%s' of another context", graph->name,
                         port, buf->name);
    if (graph->capturing)
        return frt_error(FRT_ERR_STATE, "exec: graph '%s': bind '%s' during its own capture",
                         graph->name, port);
    int i = 0;
    while (i < graph->n_ports && strcmp(graph->ports[i].name, port)) i++;
    frt_buffer *old = i < graph->n_ports ? graph->ports[i].buf : NULL;
    if (old == buf) return 0;
    if (buf && i == graph->n_ports) {
        if (graph->n_ports == graph->cap_ports) {
            int cap = graph->cap_ports ? 2 * graph->cap_ports : 8;
            graph_port *p = realloc(graph->ports, (size_t)cap * sizeof *p);
            if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: graph '%s': bind: out of memory", graph->name);
            graph->ports = p;
            graph->cap_ports = cap;
        }
        char *n = dup_name(port);
        if (!n) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: graph '%s': bind: out of memory", graph->name);
        graph->ports[graph->n_ports++] = (graph_port){n, buf};
    } else if (buf) {
        graph->ports[i].buf = buf;
    } else {
        free(graph->ports[i].name);
        graph->ports[i] = graph->ports[--graph->n_ports];
    }
    /* Captured work holds the old buffer's address: every variant is stale. */
    variants_clear(graph);
    return 0;
}

frt_buffer *frt_graph_port(const frt_graph *graph, const char *port)
{
    if (!graph_ok(graph) || !port) return NULL;
    for (int i = 0; i < graph->n_ports; i++)
        if (!strcmp(graph->ports[i].name, port)) return graph->ports[i].buf;
    return NULL;
}

int frt_graph_capture(frt_graph *graph, frt_shape_key key, frt_stream *stream, frt_record_fn record,
                      void *user)
{
    CHECK_HANDLE(graph_ok, graph, "graph");
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (!record)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: graph '%s': capture: NULL record function",
                         graph->name);
    if (graph->ctx != stream->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "exec: graph '%s': capture: stream of another context", graph->name);
    if (stream->capture || graph->capturing)
        return frt_error(FRT_ERR_STATE, "exec: graph '%s': capture: the %s is already capturing",
                         graph->name, stream->capture ? "stream" : "graph");
    FRT_TRY(stream_enter(stream)); /* before, never into the recording */
    /* Room for one more variant first, so a finished capture is never lost. */
    if (graph->n_variants == graph->cap_variants) {
        int cap = graph->cap_variants ? 2 * graph->cap_variants : 8;
        frt_variant **vs = realloc(graph->variants, (size_t)cap * sizeof *vs);
        if (!vs) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: graph '%s': out of memory", graph->name);
        graph->variants = vs;
        graph->cap_variants = cap;
    }
    frt_variant *v = calloc(1, sizeof *v);
    if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: graph '%s': out of memory", graph->name);
    v->key = key;
    v->graph = graph;

    frt_context *ctx = graph->ctx;
    stream->capture = v;
    ctx->n_capturing++;
    graph->capturing = 1;
    int rc = ctx->ops->capture_begin(stream, v);
    if (rc == 0) {
        int urc = record(stream, user);
        int erc = ctx->ops->capture_end(stream, v, urc == 0);
        rc = urc < 0 ? urc : erc;
        if (urc > 0 && rc == 0)
            rc = frt_error(FRT_ERR_INVALID_ARGUMENT,
                           "exec: graph '%s': record function returned %d (expected 0 or a negative status)",
                           graph->name, urc);
    }
    stream->capture = NULL;
    ctx->n_capturing--;
    graph->capturing = 0;
    if (rc < 0) {
        frt_error_prefix("exec: graph '%s': capture of key 0x%llx discarded", graph->name,
                         (unsigned long long)key);
        variant_destroy(ctx, v);
        return rc;
    }

    int old = variant_find(graph, key);
    if (old >= 0) {
        variant_remove(graph, old);
    } else if (graph->max_variants && graph->n_variants >= graph->max_variants) {
        int lru = 0;
        for (int i = 1; i < graph->n_variants; i++)
            if (graph->variants[i]->last_use < graph->variants[lru]->last_use) lru = i;
        variant_remove(graph, lru);
    }
    v->last_use = ++graph->tick;
    graph->variants[graph->n_variants++] = v;
    ctx->n_captures++;
    return 0;
}

int frt_graph_replay(frt_graph *graph, frt_shape_key key, frt_stream *stream)
{
    CHECK_HANDLE(graph_ok, graph, "graph");
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (graph->ctx != stream->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: graph '%s': replay: stream of another context",
                         graph->name);
    if (stream->capture)
        return frt_error(FRT_ERR_STATE, "exec: graph '%s': replay on a capturing stream", graph->name);
    int i = variant_find(graph, key);
    if (i < 0)
        return frt_error(FRT_ERR_NO_VARIANT, "exec: graph '%s': no variant for shape key 0x%llx",
                         graph->name, (unsigned long long)key);
    frt_variant *v = graph->variants[i];
    FRT_TRY(stream_enter(stream));
    FRT_TRY(graph->ctx->ops->replay(v, stream));
    v->last_use = ++graph->tick;
    return 0;
}

int frt_graph_has(const frt_graph *graph, frt_shape_key key)
{
    return graph_ok(graph) && variant_find(graph, key) >= 0;
}

int frt_graph_evict(frt_graph *graph, frt_shape_key key)
{
    CHECK_HANDLE(graph_ok, graph, "graph");
    if (graph->capturing)
        return frt_error(FRT_ERR_STATE, "exec: graph '%s': evict during its own capture", graph->name);
    int i = variant_find(graph, key);
    if (i < 0)
        return frt_error(FRT_ERR_NO_VARIANT, "exec: graph '%s': evict: no variant for shape key 0x%llx",
                         graph->name, (unsigned long long)key);
    variant_remove(graph, i);
    return 0;
}

int frt_graph_count(const frt_graph *graph) { return graph_ok(graph) ? graph->n_variants : 0; }

/* ---- plans ----------------------------------------------------------------- */

typedef struct plan_node {
    frt_graph *graph;
    frt_shape_key key;
    frt_stream *stream;
    int *deps;
    int n_deps;
    frt_event *done; /* recorded after the node's replay */
} plan_node;

struct frt_plan {
    uint32_t magic;
    frt_context *ctx;
    plan_node *nodes;
    int n, cap;
};

static int plan_ok(const frt_plan *p) { return p && p->magic == FRT_MAGIC_PLAN; }

int frt_plan_create(frt_context *ctx, frt_plan **out)
{
    if (out) *out = NULL;
    CHECK_HANDLE(ctx_ok, ctx, "context");
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: plan: NULL out");
    frt_plan *p = calloc(1, sizeof *p);
    if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: plan: out of memory");
    p->ctx = ctx;
    p->magic = FRT_MAGIC_PLAN;
    *out = p;
    return 0;
}

void frt_plan_destroy(frt_plan *plan)
{
    if (!plan_ok(plan)) return;
    (void)frt_plan_sync(plan); /* node events may still be referenced by queued work */
    for (int i = 0; i < plan->n; i++) {
        free(plan->nodes[i].deps);
        frt_event_destroy(plan->nodes[i].done);
    }
    free(plan->nodes);
    plan->magic = 0;
    free(plan);
}

int frt_plan_add(frt_plan *plan, frt_graph *graph, frt_shape_key key, frt_stream *stream,
                 const int *deps, int n_deps, int *node_id)
{
    CHECK_HANDLE(plan_ok, plan, "plan");
    CHECK_HANDLE(graph_ok, graph, "graph");
    CHECK_HANDLE(stream_ok, stream, "stream");
    if (graph->ctx != plan->ctx || stream->ctx != plan->ctx)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: plan add: graph '%s' or stream of another context",
                         graph->name);
    if (n_deps < 0 || (n_deps > 0 && !deps))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: plan add: %s",
                         n_deps < 0 ? "negative dependency count" : "NULL deps");
    for (int i = 0; i < n_deps; i++)
        if (deps[i] < 0 || deps[i] >= plan->n)
            return frt_error(FRT_ERR_INVALID_ARGUMENT,
                             "exec: plan add: dependency %d is not an earlier node (plan has %d)", deps[i],
                             plan->n);
    if (plan->n == plan->cap) {
        int cap = plan->cap ? 2 * plan->cap : 8;
        plan_node *nodes = realloc(plan->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: plan add: out of memory");
        plan->nodes = nodes;
        plan->cap = cap;
    }
    plan_node nd = {graph, key, stream, NULL, n_deps, NULL};
    if (n_deps) {
        nd.deps = malloc((size_t)n_deps * sizeof *nd.deps);
        if (!nd.deps) return frt_error(FRT_ERR_OUT_OF_MEMORY, "exec: plan add: out of memory");
        memcpy(nd.deps, deps, (size_t)n_deps * sizeof *deps);
    }
    int rc = frt_event_create(plan->ctx, &nd.done);
    if (rc < 0) {
        free(nd.deps);
        return rc;
    }
    plan->nodes[plan->n] = nd;
    if (node_id) *node_id = plan->n;
    plan->n++;
    return 0;
}

int frt_plan_count(const frt_plan *plan) { return plan_ok(plan) ? plan->n : 0; }

int frt_plan_execute(frt_plan *plan)
{
    CHECK_HANDLE(plan_ok, plan, "plan");
    for (int i = 0; i < plan->n; i++) {
        plan_node *nd = &plan->nodes[i];
        if (!graph_ok(nd->graph) || !stream_ok(nd->stream))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "exec: plan node %d: graph or stream destroyed", i);
        if (nd->stream->capture)
            return frt_error(FRT_ERR_STATE, "exec: plan node %d: stream is capturing", i);
        if (!frt_graph_has(nd->graph, nd->key))
            return frt_error(FRT_ERR_NO_VARIANT, "exec: plan node %d: graph '%s' has no variant for "
                                                 "shape key 0x%llx",
                             i, nd->graph->name, (unsigned long long)nd->key);
    }
    for (int i = 0; i < plan->n; i++) {
        plan_node *nd = &plan->nodes[i];
        for (int j = 0; j < nd->n_deps; j++) {
            plan_node *dep = &plan->nodes[nd->deps[j]];
            if (dep->stream != nd->stream) FRT_TRY(frt_stream_wait_event(nd->stream, dep->done));
        }
        FRT_TRY(frt_graph_replay(nd->graph, nd->key, nd->stream));
        FRT_TRY(frt_event_record(nd->done, nd->stream));
    }
    return 0;
}

int frt_plan_sync(frt_plan *plan)
{
    CHECK_HANDLE(plan_ok, plan, "plan");
    for (int i = 0; i < plan->n; i++) FRT_TRY(frt_event_sync(plan->nodes[i].done));
    return 0;
}
