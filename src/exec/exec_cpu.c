/*
 * exec/exec_cpu.c - the cpu backend of the execution contract.
 *
 * Every stream is a worker thread draining an in-order queue of tasks (host
 * function, fill, copy, event record, event wait, graph replay), so streams
 * really run concurrently and events and plans really synchronize.
 *
 * While a stream captures, host tasks, fills and copies are appended to the
 * variant's recording instead of the queue, with host-task arguments copied
 * into the recording. A replay enqueues one task that runs the recording as
 * recorded: arguments are baked at capture exactly as a CUDA graph bakes them.
 * Replays of one recording run one after the other in enqueue order (the CUDA
 * rule for a graph exec), and a recording is reference counted so that
 * evicting a variant while a replay is queued is safe.
 *
 * All three memory spaces are host memory: DEVICE is 256-byte aligned, the
 * others 64-byte aligned. Allocations larger than physical memory fail with
 * FRT_ERR_OUT_OF_MEMORY before reaching the allocator.
 */
#include "exec/exec_internal.h"

#include "util/error.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct cpu_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded;  /* records enqueued (the newest record's generation) */
    uint64_t completed; /* highest generation that has completed */
    struct timespec when; /* completion time of generation `completed` */
} cpu_event;

typedef struct cpu_recording cpu_recording;

typedef enum task_kind {
    TASK_HOST,
    TASK_FILL,
    TASK_COPY,
    TASK_RECORD,
    TASK_WAIT,
    TASK_REPLAY,
} task_kind;

typedef struct cpu_task {
    struct cpu_task *next;
    task_kind kind;
    union {
        struct {
            frt_host_fn fn;
            size_t size;
        } host;
        struct {
            void *dst;
            size_t bytes;
            uint8_t value;
        } fill;
        struct {
            void *dst;
            const void *src;
            size_t bytes;
        } copy;
        struct {
            cpu_event *ev;
            uint64_t gen;
        } ev;
        struct {
            cpu_recording *rec;
            uint64_t seq;
        } replay;
    } u;
    max_align_t args[]; /* host-task arguments (u.host.size bytes) */
} cpu_task;

struct cpu_recording {
    cpu_task *head, *tail;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t launched; /* replays enqueued */
    uint64_t finished; /* replays finished (they finish in launch order) */
    int refs;          /* the variant + one per queued replay */
};

typedef struct cpu_stream {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work; /* the worker waits for tasks */
    pthread_cond_t idle; /* syncs wait for progress */
    cpu_task *head, *tail;
    uint64_t enqueued, done;
    int stop;
} cpu_stream;

/* ---- recordings ------------------------------------------------------------ */

static void recording_unref(cpu_recording *rec)
{
    pthread_mutex_lock(&rec->mu);
    int last = --rec->refs == 0;
    pthread_mutex_unlock(&rec->mu);
    if (!last) return;
    for (cpu_task *t = rec->head, *n; t; t = n) {
        n = t->next;
        free(t);
    }
    pthread_mutex_destroy(&rec->mu);
    pthread_cond_destroy(&rec->cv);
    free(rec);
}

/* ---- running tasks --------------------------------------------------------- */

static void run_task(cpu_task *t);

static void run_replay(cpu_recording *rec, uint64_t seq)
{
    pthread_mutex_lock(&rec->mu);
    while (rec->finished + 1 != seq) pthread_cond_wait(&rec->cv, &rec->mu);
    pthread_mutex_unlock(&rec->mu);
    for (cpu_task *t = rec->head; t; t = t->next) run_task(t);
    pthread_mutex_lock(&rec->mu);
    rec->finished = seq;
    pthread_cond_broadcast(&rec->cv);
    pthread_mutex_unlock(&rec->mu);
    recording_unref(rec);
}

static void run_task(cpu_task *t)
{
    switch (t->kind) {
    case TASK_HOST:
        t->u.host.fn(t->u.host.size ? (void *)t->args : NULL);
        break;
    case TASK_FILL:
        memset(t->u.fill.dst, t->u.fill.value, t->u.fill.bytes);
        break;
    case TASK_COPY:
        memcpy(t->u.copy.dst, t->u.copy.src, t->u.copy.bytes);
        break;
    case TASK_RECORD: {
        cpu_event *e = t->u.ev.ev;
        pthread_mutex_lock(&e->mu);
        if (t->u.ev.gen > e->completed) {
            e->completed = t->u.ev.gen;
            clock_gettime(CLOCK_MONOTONIC, &e->when);
        }
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        break;
    }
    case TASK_WAIT: {
        cpu_event *e = t->u.ev.ev;
        pthread_mutex_lock(&e->mu);
        /* gen 0: a wait recorded in a capture, on the newest record now */
        const uint64_t gen = t->u.ev.gen ? t->u.ev.gen : e->recorded;
        while (e->completed < gen) pthread_cond_wait(&e->cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
        break;
    }
    case TASK_REPLAY:
        run_replay(t->u.replay.rec, t->u.replay.seq);
        break;
    }
}

static void *worker_main(void *arg)
{
    cpu_stream *st = arg;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->head && !st->stop) pthread_cond_wait(&st->work, &st->mu);
        if (!st->head) break; /* stop requested and the queue is drained */
        cpu_task *t = st->head;
        st->head = t->next;
        if (!st->head) st->tail = NULL;
        pthread_mutex_unlock(&st->mu);
        run_task(t);
        free(t);
        pthread_mutex_lock(&st->mu);
        st->done++;
        pthread_cond_broadcast(&st->idle);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* ---- enqueueing ------------------------------------------------------------ */

static cpu_task *task_new(task_kind kind, size_t args_size)
{
    if (args_size > SIZE_MAX - sizeof(cpu_task)) return NULL;
    cpu_task *t = calloc(1, sizeof *t + args_size);
    if (t) t->kind = kind;
    return t;
}

/* Hands t to the stream: the capture's recording while capturing, else the
 * queue. Never fails (t is allocated by the caller). */
static void task_submit(frt_stream *s, cpu_task *t)
{
    t->next = NULL;
    if (s->capture) {
        cpu_recording *rec = s->capture->impl;
        if (rec->tail)
            rec->tail->next = t;
        else
            rec->head = t;
        rec->tail = t;
        return;
    }
    cpu_stream *st = s->impl;
    pthread_mutex_lock(&st->mu);
    if (st->tail)
        st->tail->next = t;
    else
        st->head = t;
    st->tail = t;
    st->enqueued++;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->mu);
}

static int oom(const char *what) { return frt_error(FRT_ERR_OUT_OF_MEMORY, "cpu: %s: out of memory", what); }

/* ---- device ---------------------------------------------------------------- */

static int cpu_device_count(int *count)
{
    *count = 1;
    return 0;
}

static size_t phys_bytes(int avail)
{
    long pages = sysconf(avail ? _SC_AVPHYS_PAGES : _SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return SIZE_MAX;
    return (size_t)pages * (size_t)page;
}

static int cpu_context_init(frt_context *ctx)
{
    if (ctx->device != 0)
        return frt_error(FRT_ERR_NO_DEVICE, "cpu: no device %d (the cpu backend has device 0 only)",
                         ctx->device);
    return 0;
}

static void cpu_context_fini(frt_context *ctx) { (void)ctx; }

static int cpu_device_info(frt_context *ctx, frt_device_info *info)
{
    snprintf(info->name, sizeof info->name, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10)) continue;
            char *v = strchr(line, ':');
            if (!v) break;
            v++;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = '\0';
            snprintf(info->name, sizeof info->name, "%s", v);
            break;
        }
        fclose(f);
    }
    info->total_bytes = phys_bytes(0);
    info->free_bytes = phys_bytes(1);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    info->sm_count = n > 0 ? (int)n : 1;
    return 0;
}

/* ---- streams --------------------------------------------------------------- */

static int cpu_stream_sync(frt_stream *s)
{
    cpu_stream *st = s->impl;
    pthread_mutex_lock(&st->mu);
    uint64_t target = st->enqueued;
    while (st->done < target) pthread_cond_wait(&st->idle, &st->mu);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

static int cpu_context_sync(frt_context *ctx)
{
    for (frt_stream *s = ctx->streams; s; s = s->next) FRT_TRY(cpu_stream_sync(s));
    return 0;
}

static int cpu_stream_init(frt_stream *s, int priority)
{
    (void)priority;
    cpu_stream *st = calloc(1, sizeof *st);
    if (!st) return oom("stream");
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->work, NULL);
    pthread_cond_init(&st->idle, NULL);
    int rc = pthread_create(&st->thread, NULL, worker_main, st);
    if (rc) {
        pthread_mutex_destroy(&st->mu);
        pthread_cond_destroy(&st->work);
        pthread_cond_destroy(&st->idle);
        free(st);
        return frt_error(rc == EAGAIN ? FRT_ERR_OUT_OF_MEMORY : FRT_ERR_BACKEND,
                         "cpu: stream: cannot start a worker thread: %s", strerror(rc));
    }
    s->impl = st;
    return 0;
}

static void cpu_stream_fini(frt_stream *s)
{
    cpu_stream *st = s->impl;
    if (!st) return;
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->thread, NULL); /* the worker drains the queue first */
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->work);
    pthread_cond_destroy(&st->idle);
    free(st);
    s->impl = NULL;
}

static void *cpu_stream_native(frt_stream *s)
{
    (void)s;
    return NULL;
}

/* ---- events ---------------------------------------------------------------- */

static int cpu_event_init(frt_event *e)
{
    cpu_event *ce = calloc(1, sizeof *ce);
    if (!ce) return oom("event");
    pthread_mutex_init(&ce->mu, NULL);
    pthread_cond_init(&ce->cv, NULL);
    e->impl = ce;
    return 0;
}

static void cpu_event_fini(frt_event *e)
{
    cpu_event *ce = e->impl;
    if (!ce) return;
    pthread_mutex_destroy(&ce->mu);
    pthread_cond_destroy(&ce->cv);
    free(ce);
    e->impl = NULL;
}

static int cpu_event_record(frt_event *e, frt_stream *s)
{
    cpu_event *ce = e->impl;
    cpu_task *t = task_new(TASK_RECORD, 0);
    if (!t) return oom("event record");
    pthread_mutex_lock(&ce->mu);
    t->u.ev.ev = ce;
    t->u.ev.gen = ++ce->recorded;
    pthread_mutex_unlock(&ce->mu);
    task_submit(s, t);
    return 0;
}

static int cpu_stream_wait_event(frt_stream *s, frt_event *e)
{
    cpu_event *ce = e->impl;
    pthread_mutex_lock(&ce->mu);
    uint64_t gen = s->capture ? 0 : ce->recorded; /* captured: resolved by each replay (run_task) */
    pthread_mutex_unlock(&ce->mu);
    if (gen == 0 && !s->capture) return 0; /* never recorded: nothing to wait for */
    cpu_task *t = task_new(TASK_WAIT, 0);
    if (!t) return oom("stream wait event");
    t->u.ev.ev = ce;
    t->u.ev.gen = gen;
    task_submit(s, t);
    return 0;
}

static int cpu_event_sync(frt_event *e)
{
    cpu_event *ce = e->impl;
    pthread_mutex_lock(&ce->mu);
    uint64_t gen = ce->recorded;
    while (ce->completed < gen) pthread_cond_wait(&ce->cv, &ce->mu);
    pthread_mutex_unlock(&ce->mu);
    return 0;
}

/* The completion time of the newest record, or FRT_ERR_STATE. */
static int event_time(cpu_event *ce, struct timespec *t)
{
    pthread_mutex_lock(&ce->mu);
    int ok = ce->recorded > 0 && ce->completed >= ce->recorded;
    *t = ce->when;
    pthread_mutex_unlock(&ce->mu);
    return ok ? 0 : frt_error(FRT_ERR_STATE, "cpu: event elapsed: an event was not recorded or has not completed");
}

static int cpu_event_elapsed_ms(frt_event *start, frt_event *end, float *ms)
{
    struct timespec a, b;
    FRT_TRY(event_time(start->impl, &a));
    FRT_TRY(event_time(end->impl, &b));
    *ms = (float)((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6);
    return 0;
}

/* ---- memory ---------------------------------------------------------------- */

static int cpu_mem_alloc(frt_context *ctx, frt_space space, size_t bytes, void **ptr)
{
    (void)ctx;
    size_t align = space == FRT_SPACE_DEVICE ? 256 : 64;
    size_t phys = phys_bytes(0);
    if (bytes > phys)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "more than the %zu bytes of physical memory", phys);
    if (bytes > SIZE_MAX - align) return frt_error(FRT_ERR_OUT_OF_MEMORY, "size overflow");
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = NULL;
    int rc = posix_memalign(&p, align, rounded);
    if (rc || !p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "malloc failed");
    *ptr = p;
    return 0;
}

static void cpu_mem_free(frt_context *ctx, frt_space space, void *ptr)
{
    (void)ctx;
    (void)space;
    free(ptr);
}

/* ---- work ------------------------------------------------------------------ */

static int cpu_host_task(frt_stream *s, frt_host_fn fn, const void *args, size_t args_size)
{
    cpu_task *t = task_new(TASK_HOST, args_size);
    if (!t) return oom("host task");
    t->u.host.fn = fn;
    t->u.host.size = args_size;
    if (args_size) memcpy(t->args, args, args_size);
    task_submit(s, t);
    return 0;
}

static int cpu_fill(frt_stream *s, void *dst, frt_space space, size_t bytes, uint8_t value)
{
    (void)space;
    cpu_task *t = task_new(TASK_FILL, 0);
    if (!t) return oom("fill");
    t->u.fill.dst = dst;
    t->u.fill.bytes = bytes;
    t->u.fill.value = value;
    task_submit(s, t);
    return 0;
}

static int cpu_copy(frt_stream *s, const frt_copy_op *ops, int n)
{
    /* Allocate every task first, so a failure enqueues nothing. */
    cpu_task *local[16];
    cpu_task **ts = n <= 16 ? local : malloc((size_t)n * sizeof *ts);
    if (!ts) return oom("copy");
    int rc = 0;
    for (int i = 0; i < n; i++) {
        ts[i] = task_new(TASK_COPY, 0);
        if (!ts[i]) {
            for (int j = 0; j < i; j++) free(ts[j]);
            rc = oom("copy");
            break;
        }
        ts[i]->u.copy.dst = ops[i].dst;
        ts[i]->u.copy.src = ops[i].src;
        ts[i]->u.copy.bytes = ops[i].bytes;
    }
    if (rc == 0)
        for (int i = 0; i < n; i++) task_submit(s, ts[i]);
    if (ts != local) free(ts);
    return rc;
}

/* ---- graphs ---------------------------------------------------------------- */

static int cpu_capture_begin(frt_stream *s, frt_variant *v)
{
    (void)s;
    cpu_recording *rec = calloc(1, sizeof *rec);
    if (!rec) return oom("capture");
    pthread_mutex_init(&rec->mu, NULL);
    pthread_cond_init(&rec->cv, NULL);
    rec->refs = 1;
    v->impl = rec;
    return 0;
}

static int cpu_capture_end(frt_stream *s, frt_variant *v, int ok)
{
    (void)s;
    if (!ok && v->impl) {
        recording_unref(v->impl);
        v->impl = NULL;
    }
    return 0;
}

static int cpu_replay(frt_variant *v, frt_stream *s)
{
    cpu_recording *rec = v->impl;
    cpu_task *t = task_new(TASK_REPLAY, 0);
    if (!t) return oom("replay");
    pthread_mutex_lock(&rec->mu);
    rec->refs++;
    t->u.replay.rec = rec;
    t->u.replay.seq = ++rec->launched;
    pthread_mutex_unlock(&rec->mu);
    task_submit(s, t);
    return 0;
}

static void cpu_variant_fini(frt_variant *v)
{
    if (v->impl) recording_unref(v->impl); /* queued replays keep it alive */
    v->impl = NULL;
}

const frt_exec_ops frt_exec_cpu_ops = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .context_init = cpu_context_init,
    .context_fini = cpu_context_fini,
    .device_info = cpu_device_info,
    .context_sync = cpu_context_sync,
    .stream_init = cpu_stream_init,
    .stream_fini = cpu_stream_fini,
    .stream_sync = cpu_stream_sync,
    .stream_native = cpu_stream_native,
    .event_init = cpu_event_init,
    .event_fini = cpu_event_fini,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .host_task = cpu_host_task,
    .fill = cpu_fill,
    .copy = cpu_copy,
    .capture_begin = cpu_capture_begin,
    .capture_end = cpu_capture_end,
    .replay = cpu_replay,
    .variant_fini = cpu_variant_fini,
};
