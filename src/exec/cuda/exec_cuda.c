/*
 * exec/cuda/exec_cuda.c - the cuda backend of the execution contract (CUDA
 * runtime API, linked statically; the driver is loaded at run time, so a
 * machine without it simply has zero devices).
 *
 *   streams  non-blocking CUDA streams with a priority
 *   events   CUDA events with timing
 *   buffers  DEVICE cudaMalloc, PINNED_HOST cudaHostAlloc (portable),
 *            HOST 64-byte aligned malloc
 *   fills    DEVICE cudaMemsetAsync; host spaces a host task (memset)
 *   copies   host <-> host: a host task (memcpy), so stream order holds;
 *            a batch of device <-> device entries: one batched copy kernel
 *            (exec_kernels.cu); everything else cudaMemcpyAsync(Default);
 *            FRT_COPY_OVERLAP batches: cudaMemcpyBatchAsync (copy engines)
 *   events   captured waits: external event wait nodes
 *   host tasks  cudaLaunchHostFunc with a heap copy of the arguments: freed
 *            by the callback after a direct launch, owned by the variant when
 *            captured (frt_variant_keep)
 *   graphs   cudaStreamBeginCapture(ThreadLocal) / EndCapture /
 *            cudaGraphInstantiate; replay is cudaGraphLaunch. A variant holding
 *            host-task arguments records an event after each launch, and is
 *            freed only after that event completes (launches of one graph exec
 *            are ordered, so the newest record covers them all).
 */
#include "exec/cuda/exec_kernels.h"
#include "exec/exec_internal.h"
#include "kernels/cuda/cuda_check.h"

#include "util/error.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int use_device(int device)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == device) return 0;
    FRT_CUDA_TRY(cudaSetDevice(device));
    return 0;
}

static cudaStream_t native(frt_stream *s) { return (cudaStream_t)s->impl; }

/* ---- device ---------------------------------------------------------------- */

static int cuda_device_count(int *count)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver (35), no device (100), init errors */
        n = 0;
    }
    *count = n;
    return 0;
}

static int cuda_context_init(frt_context *ctx)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return frt_error(FRT_ERR_NO_DEVICE, "cuda: no usable CUDA device (cudaGetDeviceCount: %s: %s)",
                         cudaGetErrorName(err), cudaGetErrorString(err));
    }
    if (ctx->device >= n)
        return frt_error(FRT_ERR_NO_DEVICE, "cuda: no device %d (%d device%s found)", ctx->device, n,
                         n == 1 ? "" : "s");
    FRT_CUDA_TRY(cudaSetDevice(ctx->device));
    FRT_CUDA_TRY(cudaFree(NULL)); /* create the primary context now, not on first use */
    return 0;
}

static void cuda_context_fini(frt_context *ctx)
{
    (void)ctx; /* the primary context is shared with the rest of the process */
}

static int cuda_device_info(frt_context *ctx, frt_device_info *info)
{
    FRT_TRY(use_device(ctx->device));
    struct cudaDeviceProp prop;
    FRT_CUDA_TRY(cudaGetDeviceProperties(&prop, ctx->device));
    memcpy(info->name, prop.name, sizeof info->name < sizeof prop.name ? sizeof info->name : sizeof prop.name);
    info->name[sizeof info->name - 1] = '\0';
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->sm_count = prop.multiProcessorCount;
    size_t free_b = 0, total_b = 0;
    FRT_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    info->free_bytes = free_b;
    info->total_bytes = total_b;
    return 0;
}

static int cuda_context_sync(frt_context *ctx)
{
    FRT_TRY(use_device(ctx->device));
    FRT_CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

/* ---- streams --------------------------------------------------------------- */

static int cuda_stream_init(frt_stream *s, int priority)
{
    FRT_TRY(use_device(s->ctx->device));
    int least = 0, greatest = 0;
    FRT_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    if (priority > least) priority = least;
    if (priority < greatest) priority = greatest;
    cudaStream_t st = NULL;
    FRT_CUDA_TRY(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, priority));
    s->impl = st;
    return 0;
}

static void cuda_stream_fini(frt_stream *s)
{
    if (!s->impl) return;
    (void)cudaStreamSynchronize(native(s));
    (void)cudaStreamDestroy(native(s));
    (void)cudaGetLastError();
    s->impl = NULL;
}

static int cuda_stream_sync(frt_stream *s)
{
    FRT_CUDA_TRY(cudaStreamSynchronize(native(s)));
    return 0;
}

static void *cuda_stream_native(frt_stream *s) { return s->impl; }

/* ---- events ---------------------------------------------------------------- */

typedef struct cuda_event {
    cudaEvent_t ev;
    int recorded;
} cuda_event;

static int cuda_event_init(frt_event *e)
{
    FRT_TRY(use_device(e->ctx->device));
    cuda_event *ce = calloc(1, sizeof *ce);
    if (!ce) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda: event: out of memory");
    cudaError_t err = cudaEventCreate(&ce->ev);
    if (err != cudaSuccess) {
        free(ce);
        return frt_cuda_fail(err, "cudaEventCreate", __FILE__, __LINE__);
    }
    e->impl = ce;
    return 0;
}

static void cuda_event_fini(frt_event *e)
{
    cuda_event *ce = e->impl;
    if (!ce) return;
    (void)cudaEventDestroy(ce->ev);
    free(ce);
    e->impl = NULL;
}

static int cuda_event_record(frt_event *e, frt_stream *s)
{
    cuda_event *ce = e->impl;
    FRT_CUDA_TRY(cudaEventRecord(ce->ev, native(s)));
    ce->recorded = 1;
    return 0;
}

static int cuda_stream_wait_event(frt_stream *s, frt_event *e)
{
    cuda_event *ce = e->impl;
    /* captured: an external event wait node, on the record before each launch */
    FRT_CUDA_TRY(cudaStreamWaitEvent(native(s), ce->ev, s->capture ? cudaEventWaitExternal : 0));
    return 0;
}

static int cuda_event_sync(frt_event *e)
{
    cuda_event *ce = e->impl;
    FRT_CUDA_TRY(cudaEventSynchronize(ce->ev));
    return 0;
}

static int cuda_event_elapsed_ms(frt_event *start, frt_event *end, float *ms)
{
    cuda_event *a = start->impl, *b = end->impl;
    if (!a->recorded || !b->recorded)
        return frt_error(FRT_ERR_STATE, "cuda: event elapsed: an event was never recorded");
    cudaError_t err = cudaEventElapsedTime(ms, a->ev, b->ev);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return frt_error(FRT_ERR_STATE, "cuda: event elapsed: an event has not completed yet");
    }
    if (err != cudaSuccess) return frt_cuda_fail(err, "cudaEventElapsedTime", __FILE__, __LINE__);
    return 0;
}

/* ---- memory ---------------------------------------------------------------- */

static int host_alloc(size_t bytes, void **ptr)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "more than the physical memory of this host");
    if (bytes > SIZE_MAX - 64) return frt_error(FRT_ERR_OUT_OF_MEMORY, "size overflow");
    void *p = NULL;
    if (posix_memalign(&p, 64, (bytes + 63) / 64 * 64) || !p)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "malloc failed");
    *ptr = p;
    return 0;
}

static int cuda_mem_alloc(frt_context *ctx, frt_space space, size_t bytes, void **ptr)
{
    if (space == FRT_SPACE_HOST) return host_alloc(bytes, ptr);
    FRT_TRY(use_device(ctx->device));
    /* Sizes no allocator could satisfy fail here, without asking CUDA. */
    if (space == FRT_SPACE_DEVICE) {
        size_t free_b = 0, total_b = 0;
        FRT_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
        if (bytes > total_b)
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "more than the %zu bytes of device memory", total_b);
    } else {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages)
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "more than the physical memory of this host");
    }
    if (space == FRT_SPACE_DEVICE)
        FRT_CUDA_TRY(cudaMalloc(ptr, bytes));
    else
        FRT_CUDA_TRY(cudaHostAlloc(ptr, bytes, cudaHostAllocPortable));
    return 0;
}

static void cuda_mem_free(frt_context *ctx, frt_space space, void *ptr)
{
    if (space == FRT_SPACE_HOST) {
        free(ptr);
        return;
    }
    (void)use_device(ctx->device);
    if (space == FRT_SPACE_DEVICE)
        (void)cudaFree(ptr);
    else
        (void)cudaFreeHost(ptr);
    (void)cudaGetLastError();
}

/* ---- host tasks ------------------------------------------------------------ */

typedef struct host_payload {
    frt_host_fn fn;
    size_t size;
    int free_after; /* direct launch: the callback frees the payload */
    max_align_t args[];
} host_payload;

static void CUDART_CB host_trampoline(void *data)
{
    host_payload *p = data;
    p->fn(p->size ? (void *)p->args : NULL);
    if (p->free_after) free(p);
}

static int cuda_host_task(frt_stream *s, frt_host_fn fn, const void *args, size_t args_size)
{
    if (args_size > SIZE_MAX - sizeof(host_payload))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda: host task: %zu argument bytes", args_size);
    host_payload *p = malloc(sizeof *p + args_size);
    if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda: host task: out of memory");
    p->fn = fn;
    p->size = args_size;
    p->free_after = s->capture == NULL;
    if (args_size) memcpy(p->args, args, args_size);
    if (s->capture) FRT_TRY(frt_variant_keep(s->capture, p)); /* the variant owns it now */
    cudaError_t err = cudaLaunchHostFunc(native(s), host_trampoline, p);
    if (err != cudaSuccess) {
        if (!s->capture) free(p);
        return frt_cuda_fail(err, "cudaLaunchHostFunc", __FILE__, __LINE__);
    }
    return 0;
}

typedef struct host_fill_args {
    void *dst;
    size_t bytes;
    int value;
} host_fill_args;

static void host_fill_fn(void *a)
{
    host_fill_args *f = a;
    memset(f->dst, f->value, f->bytes);
}

typedef struct host_copy_args {
    void *dst;
    const void *src;
    size_t bytes;
} host_copy_args;

static void host_copy_fn(void *a)
{
    host_copy_args *c = a;
    memcpy(c->dst, c->src, c->bytes);
}

/* ---- fills and copies ------------------------------------------------------ */

static int cuda_fill(frt_stream *s, void *dst, frt_space space, size_t bytes, uint8_t value)
{
    if (space == FRT_SPACE_DEVICE) {
        FRT_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, native(s)));
        return 0;
    }
    host_fill_args a = {dst, bytes, value};
    return cuda_host_task(s, host_fill_fn, &a, sizeof a);
}

static int is_host(frt_space sp) { return sp != FRT_SPACE_DEVICE; }

static int cuda_copy(frt_stream *s, const frt_copy_op *ops, int n)
{
    int n_d2d = 0;
    for (int i = 0; i < n; i++)
        n_d2d += ops[i].dst_space == FRT_SPACE_DEVICE && ops[i].src_space == FRT_SPACE_DEVICE;
    FRT_TRY(use_device(s->ctx->device));
    frt_cuda_copy_desc *descs = NULL;
    if (n_d2d > 1) {
        descs = malloc((size_t)n_d2d * sizeof *descs);
        if (!descs) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda: copy batch: out of memory");
    }
    int rc = 0, m = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const frt_copy_op *op = &ops[i];
        if (descs && op->dst_space == FRT_SPACE_DEVICE && op->src_space == FRT_SPACE_DEVICE) {
            descs[m++] = (frt_cuda_copy_desc){op->dst, op->src, op->bytes};
        } else if (is_host(op->dst_space) && is_host(op->src_space)) {
            host_copy_args a = {op->dst, op->src, op->bytes};
            rc = cuda_host_task(s, host_copy_fn, &a, sizeof a);
        } else {
            /* cudaMemcpyAsync stages a pageable source at the call, not in
             * stream order: wait for the stream's earlier work (which may be
             * what writes the source) first. Pageable copies are refused
             * inside a capture, so this never runs there. */
            if (op->src_space == FRT_SPACE_HOST) {
                cudaError_t e = cudaStreamSynchronize(native(s));
                if (e != cudaSuccess) {
                    rc = frt_cuda_fail(e, "cudaStreamSynchronize", __FILE__, __LINE__);
                    break;
                }
            }
            cudaError_t err = cudaMemcpyAsync(op->dst, op->src, op->bytes, cudaMemcpyDefault, native(s));
            if (err != cudaSuccess) rc = frt_cuda_fail(err, "cudaMemcpyAsync", __FILE__, __LINE__);
        }
    }
    if (rc == 0 && m) rc = frt_cuda_copy_batch(descs, m, native(s));
    free(descs);
    return rc;
}

/* FRT_COPY_OVERLAP: the copy engines (cudaMemcpyBatchAsync, preferring
 * overlap with compute), so the copies leave the SMs to other streams'
 * kernels; a batch touching pageable memory takes cuda_copy. */
static int cuda_copy_overlap(frt_stream *s, const frt_copy_op *ops, int n)
{
    for (int i = 0; i < n; i++)
        if (ops[i].dst_space == FRT_SPACE_HOST || ops[i].src_space == FRT_SPACE_HOST) return cuda_copy(s, ops, n);
    FRT_TRY(use_device(s->ctx->device));
    void **dst = malloc((size_t)n * (2 * sizeof(void *) + 2 * sizeof(size_t)));
    struct cudaMemcpyAttributes *at = calloc((size_t)n, sizeof *at);
    int rc = 0;
    if (!dst || !at) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda: copy batch: out of memory");
    } else {
        void **src = dst + n;
        size_t *sizes = (size_t *)(void *)(src + n), *idx = sizes + n;
        for (int i = 0; i < n; i++) {
            const int sd = ops[i].src_space == FRT_SPACE_DEVICE, dd = ops[i].dst_space == FRT_SPACE_DEVICE;
            dst[i] = ops[i].dst, src[i] = (void *)ops[i].src, sizes[i] = ops[i].bytes, idx[i] = (size_t)i;
            at[i].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            at[i].flags = cudaMemcpyFlagPreferOverlapWithCompute;
            at[i].srcLocHint.type = sd ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
            at[i].srcLocHint.id = sd ? s->ctx->device : 0;
            at[i].dstLocHint.type = dd ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
            at[i].dstLocHint.id = dd ? s->ctx->device : 0;
        }
        cudaError_t err = cudaMemcpyBatchAsync((void *const *)dst, (const void *const *)src, sizes, (size_t)n, at, idx,
                                               (size_t)n, native(s));
        if (err != cudaSuccess) rc = frt_cuda_fail(err, "cudaMemcpyBatchAsync", __FILE__, __LINE__);
    }
    free(dst);
    free(at);
    return rc;
}

/* ---- graphs ---------------------------------------------------------------- */

typedef struct cuda_variant {
    cudaGraphExec_t exec;
    cudaEvent_t done; /* recorded after each launch when the variant owns host args */
    int has_done;
} cuda_variant;

static int cuda_capture_begin(frt_stream *s, frt_variant *v)
{
    (void)v;
    FRT_TRY(use_device(s->ctx->device));
    FRT_CUDA_TRY(cudaStreamBeginCapture(native(s), cudaStreamCaptureModeThreadLocal));
    return 0;
}

static int cuda_capture_end(frt_stream *s, frt_variant *v, int ok)
{
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(native(s), &graph);
    if (!ok) {
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        return 0;
    }
    if (err != cudaSuccess) {
        if (graph) (void)cudaGraphDestroy(graph);
        return frt_cuda_fail(err, "cudaStreamEndCapture (work enqueued during the capture was not capturable)",
                             __FILE__, __LINE__);
    }
    cuda_variant *cv = calloc(1, sizeof *cv);
    if (!cv) {
        (void)cudaGraphDestroy(graph);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda: capture: out of memory");
    }
    err = cudaGraphInstantiate(&cv->exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        free(cv);
        return frt_cuda_fail(err, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
    if (v->n_keep) {
        err = cudaEventCreateWithFlags(&cv->done, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            (void)cudaGraphExecDestroy(cv->exec);
            free(cv);
            return frt_cuda_fail(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
        }
        cv->has_done = 1;
    }
    v->impl = cv;
    return 0;
}

static int cuda_replay(frt_variant *v, frt_stream *s)
{
    cuda_variant *cv = v->impl;
    FRT_CUDA_TRY(cudaGraphLaunch(cv->exec, native(s)));
    if (cv->has_done) FRT_CUDA_TRY(cudaEventRecord(cv->done, native(s)));
    return 0;
}

static void cuda_variant_fini(frt_variant *v)
{
    cuda_variant *cv = v->impl;
    if (!cv) return;
    if (cv->has_done) {
        (void)cudaEventSynchronize(cv->done); /* host args must outlive the last launch */
        (void)cudaEventDestroy(cv->done);
    }
    (void)cudaGraphExecDestroy(cv->exec);
    (void)cudaGetLastError();
    free(cv);
    v->impl = NULL;
}

const frt_exec_ops frt_exec_cuda_ops = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .context_init = cuda_context_init,
    .context_fini = cuda_context_fini,
    .device_info = cuda_device_info,
    .context_sync = cuda_context_sync,
    .stream_init = cuda_stream_init,
    .stream_fini = cuda_stream_fini,
    .stream_sync = cuda_stream_sync,
    .stream_native = cuda_stream_native,
    .event_init = cuda_event_init,
    .event_fini = cuda_event_fini,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_sync = cuda_event_sync,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .host_task = cuda_host_task,
    .fill = cuda_fill,
    .copy = cuda_copy,
    .copy_overlap = cuda_copy_overlap,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .replay = cuda_replay,
    .variant_fini = cuda_variant_fini,
};
