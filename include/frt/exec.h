/*
 * frt/exec.h - the execution contract: context, streams, events, buffers,
 * graphs, plans and the shape key.
 *
 * The contract is the one layer every other part of frt runs on (DESIGN.md
 * sections 2-3). It knows nothing about kernels, models, sessions or caches:
 * the model layer enqueues its kernels (or, on the cpu backend, host tasks that
 * call CPU kernels) on an exec stream, inside a graph capture.
 *
 *   buffer  named, contiguous memory in one space (device, pinned host, host):
 *           the only state primitive. Two graphs that bind the same buffer hand
 *           data over with zero copies.
 *   graph   captured work over buffers, one variant per shape key, in a
 *           bounded (LRU) variant table. A missing variant is an error, never a
 *           silent no-op. Argument values are baked in at capture: anything
 *           that changes between replays must live in a buffer.
 *   plan    a small DAG of graph replays across streams, data dependencies
 *           only.
 *   shape key  an opaque 64-bit value; the contract only compares keys for
 *           equality, the caller owns their encoding.
 *
 * Two backends implement the same contract:
 *   FRT_BACKEND_CUDA  streams are CUDA streams, graphs are CUDA graphs (stream
 *                     capture, cudaStreamCaptureModeThreadLocal), buffers are
 *                     cudaMalloc / cudaHostAlloc / malloc memory, copies are
 *                     cudaMemcpyAsync or one batched copy kernel.
 *   FRT_BACKEND_CPU   every stream is a worker thread draining an in-order task
 *                     queue (streams really run concurrently; events and plans
 *                     really synchronize). A graph variant is the recorded list
 *                     of tasks, with arguments copied at capture and replayed
 *                     exactly as recorded, so a CPU-only CI catches the same
 *                     "state read from a host variable" bug a CUDA graph would.
 *                     All three spaces are host memory (DEVICE is 256-byte
 *                     aligned malloc).
 *
 * Errors. Every call that can fail returns an int: 0 on success, a negative
 * frt_status (frt/status.h) on failure, with a message for frt_last_error() on
 * the calling thread. Nothing here prints, exits or aborts on bad input or on
 * out-of-memory. Unless a function says otherwise, a failed call changes
 * nothing (no handle is created, nothing is enqueued, no byte is written).
 *
 * Handles. All handles are opaque. A NULL handle gives
 * FRT_ERR_INVALID_ARGUMENT (or NULL / 0 from accessors, a no-op from
 * destructors). Each handle carries a magic tag that its destructor clears, so
 * passing a handle of the wrong type or an already destroyed one is usually
 * caught as FRT_ERR_INVALID_ARGUMENT too; this detection is best effort (the
 * memory of a destroyed handle may be reused), never something to rely on.
 *
 * Threads. A context and everything made from it are driven by one host thread
 * at a time (the model's engine thread). Streams run their work asynchronously
 * (on the GPU, or on their worker thread on the cpu backend); host tasks run on
 * a thread that is not the caller's. Objects made from a context must be
 * destroyed before the context.
 *
 * Asynchrony. Fills, copies, host tasks, replays and event records are
 * enqueued on a stream and return at once; their effects are visible after a
 * sync (frt_stream_sync, frt_event_sync, frt_context_sync, frt_plan_sync) or
 * to later work on the same stream, or on another stream that waits on an
 * event recorded after them.
 *
 * Capture. While a stream is capturing (inside the record callback of
 * frt_graph_capture) the work enqueued on it is recorded, not run. Inside a
 * capture these calls on the capturing stream return FRT_ERR_STATE (on both
 * backends, because a CUDA capture cannot hold them): frt_stream_sync,
 * frt_event_record, frt_stream_defer_wait, frt_buffer_read, frt_buffer_write
 * (a raw host pointer must never be baked into a graph), frt_graph_replay,
 * a nested frt_graph_capture, and a copy between FRT_SPACE_HOST (pageable)
 * memory and FRT_SPACE_DEVICE memory. frt_buffer_alloc and frt_context_sync
 * return FRT_ERR_STATE while any stream of the context is capturing.
 * frt_stream_wait_event inside a capture records a wait that every replay
 * performs (see there).
 */
#ifndef FRT_EXEC_H
#define FRT_EXEC_H

#include "frt/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_context frt_context;
typedef struct frt_stream frt_stream;
typedef struct frt_event frt_event;
typedef struct frt_buffer frt_buffer;
typedef struct frt_graph frt_graph;
typedef struct frt_plan frt_plan;

/* An opaque key naming one variant of a graph (batch, bucket length, ...).
 * The contract only compares keys for equality. */
typedef uint64_t frt_shape_key;

typedef enum frt_backend {
    FRT_BACKEND_CPU = 0,
    FRT_BACKEND_CUDA = 1,
} frt_backend;

typedef enum frt_space {
    FRT_SPACE_DEVICE = 0,      /* cuda: cudaMalloc; cpu: 256-byte aligned malloc */
    FRT_SPACE_PINNED_HOST = 1, /* cuda: cudaHostAlloc (page-locked);  cpu: malloc */
    FRT_SPACE_HOST = 2,        /* plain pageable host memory (64-byte aligned) */
} frt_space;

/* ---- backends and devices ------------------------------------------------ */

/* "cpu" or "cuda". Never NULL ("?" for a value outside the enum). */
FRT_API const char *frt_backend_name(frt_backend backend);

/* "cpu" / "cuda" (case-sensitive) -> *out.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, or an unknown name; *out unchanged). */
FRT_API int frt_backend_parse(const char *name, frt_backend *out);

/* Number of devices of a backend: cpu always 1. cuda: cudaGetDeviceCount;
 * when that fails for any reason (no driver: cudaErrorInsufficientDriver 35,
 * no device: cudaErrorNoDevice 100, any initialization error) *count is 0 and
 * the call still returns 0. Built without CUDA: *count = 0, returns 0.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL count, unknown backend). */
FRT_API int frt_device_count(frt_backend backend, int *count);

/* 1 when frt was built with the CUDA backend, else 0. */
FRT_API int frt_exec_has_cuda(void);

/* ---- context --------------------------------------------------------------- */

typedef struct frt_device_info {
    char name[256];       /* "NVIDIA H200", or the CPU model name */
    size_t total_bytes;   /* device memory (cpu: physical RAM) */
    size_t free_bytes;    /* free device memory now (cpu: available RAM) */
    int cc_major;         /* compute capability (cpu: 0) */
    int cc_minor;
    int sm_count;         /* streaming multiprocessors (cpu: online cores) */
    frt_backend backend;
} frt_device_info;

/* Opens device `device` (cpu: must be 0) of a backend and creates its default
 * stream. *out is owned by the caller: free with frt_context_destroy.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL out, bad backend, negative device);
 * FRT_ERR_NO_DEVICE (cuda: no driver or no such device, cpu: device != 0);
 * FRT_ERR_UNSUPPORTED (cuda requested in a build without CUDA);
 * FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND (cuda runtime failure).
 * On failure *out is set to NULL. */
FRT_API int frt_context_create(frt_backend backend, int device, frt_context **out);

/* Waits for the context's work, destroys its default stream and frees the
 * context. Every event, buffer, graph and plan made from the context must be
 * destroyed first; streams still alive are destroyed here (their work waited
 * for, cpu workers joined) and their handles become invalid. NULL is a no-op. */
FRT_API void frt_context_destroy(frt_context *ctx);

/* The backend of a context (FRT_BACKEND_CPU for NULL). */
FRT_API frt_backend frt_context_backend(const frt_context *ctx);

/* The device index the context was created on (cpu: 0); -1 for an invalid
 * context. */
FRT_API int frt_context_device(const frt_context *ctx);

/* Fills *info. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. */
FRT_API int frt_context_device_info(frt_context *ctx, frt_device_info *info);

/* Waits until all work enqueued on every stream of the context has finished
 * (cuda: cudaDeviceSynchronize on the context's device).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_STATE (a stream is capturing);
 * FRT_ERR_BACKEND (an asynchronous CUDA error surfaced here). */
FRT_API int frt_context_sync(frt_context *ctx);

/* The context's default stream: owned by the context, valid until
 * frt_context_destroy (frt_stream_destroy on it is a no-op). NULL for NULL. */
FRT_API frt_stream *frt_context_stream(frt_context *ctx);

/* ---- the pinned host cache -------------------------------------------------- */

/* Page-locking host memory costs far more than copying into it: cudaHostAlloc
 * of a 1.1 GB capsule takes ~0.4 s on an H200 host, the copy ~20 ms. So a
 * context keeps the FRT_SPACE_PINNED_HOST blocks that frt_buffer_free
 * releases, up to a byte limit, and frt_buffer_alloc hands them out again:
 *   - it takes the smallest cached block of at least the requested size and
 *     at most twice it (at most 1 MiB more below 1 MiB);
 *   - a new block is rounded up to 1/8 of the power of two at or below its
 *     size (at least 1 MiB; pages below 1 MiB), so a capsule that grows a
 *     little reuses its old block;
 *   - past the limit, the blocks freed longest ago are released;
 *   - when an allocation fails, the cache is emptied and it is tried again.
 * A block from the cache holds whatever its last user wrote (allocations are
 * uninitialized either way). Pageable (FRT_SPACE_HOST) and device memory are
 * not cached. The limit starts at FRT_PINNED_CACHE_DEFAULT_MB MiB, or at the
 * MiB given by the environment variable FRT_PINNED_CACHE_MB when the context
 * is created (0 turns the cache off). */
#define FRT_PINNED_CACHE_DEFAULT_MB 8192

typedef struct frt_pinned_cache_stats {
    size_t limit_bytes;  /* the limit on cached bytes */
    size_t cached_bytes; /* bytes held in cached (free) blocks now */
    int cached_blocks;   /* blocks held */
    uint64_t hits;       /* PINNED_HOST allocations served from the cache */
    uint64_t misses;     /* ... that page-locked new memory */
} frt_pinned_cache_stats;

/* Sets the limit (bytes; 0 turns the cache off) and releases the oldest
 * cached blocks beyond it. Errors: FRT_ERR_INVALID_ARGUMENT (bad context). */
FRT_API int frt_context_set_pinned_cache(frt_context *ctx, size_t limit_bytes);

/* Releases every cached pinned block (the limit stays).
 * Errors: FRT_ERR_INVALID_ARGUMENT (bad context). */
FRT_API int frt_context_trim(frt_context *ctx);

/* Fills *out. Errors: FRT_ERR_INVALID_ARGUMENT (bad context, NULL out). */
FRT_API int frt_context_pinned_cache_stats(frt_context *ctx, frt_pinned_cache_stats *out);

/* The number of successful frt_graph_capture calls on graphs of this
 * context since it was created (a discarded capture does not count). Lets
 * a caller assert that a loop of replays, restores and port writes never
 * recaptures (the rollout host's episode resets, frt/rollout.h). 0 for an
 * invalid context. */
FRT_API uint64_t frt_context_capture_count(const frt_context *ctx);

/* ---- streams --------------------------------------------------------------- */

/* Creates an in-order stream. priority: 0 is the default; on cuda a lower
 * (negative) value is a higher priority, clamped to the device's range; the
 * cpu backend ignores it. The cpu backend starts one worker thread per stream.
 * *out is owned by the caller: free with frt_stream_destroy.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND
 * (cuda stream or pthread creation failed). On failure *out is NULL. */
FRT_API int frt_stream_create(frt_context *ctx, int priority, frt_stream **out);

/* Waits for the stream's work, then destroys it (the cpu worker is joined).
 * NULL, the context's default stream and a capturing stream are no-ops. */
FRT_API void frt_stream_destroy(frt_stream *stream);

/* Blocks until all work enqueued on the stream so far has finished.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_STATE (the stream is capturing);
 * FRT_ERR_BACKEND (an asynchronous CUDA error surfaced here). */
FRT_API int frt_stream_sync(frt_stream *stream);

/* The backend's native stream: the cudaStream_t on cuda (to launch kernels on
 * it), NULL on cpu and for an invalid stream. Not owned by the caller.
 * Enqueues the stream's deferred wait first (frt_stream_defer_wait), since
 * the caller is about to enqueue work natively. */
FRT_API void *frt_stream_native(frt_stream *stream);

/* 1 while the stream is capturing (inside frt_graph_capture), 0 when not,
 * FRT_ERR_INVALID_ARGUMENT for an invalid stream. */
FRT_API int frt_stream_is_capturing(frt_stream *stream);

/* ---- events ---------------------------------------------------------------- */

/* Creates an event (with timing). Free with frt_event_destroy.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND.
 * On failure *out is NULL. */
FRT_API int frt_event_create(frt_context *ctx, frt_event **out);

/* Destroys an event; the caller must not have work waiting on it any more
 * (sync first). NULL is a no-op. */
FRT_API void frt_event_destroy(frt_event *event);

/* Records the event at the current end of the stream: the event completes when
 * all work enqueued on the stream before this call has finished. Recording
 * again moves the event to the new point (waits and syncs enqueued later
 * refer to the newest record, as in CUDA).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, or event and stream from different
 * contexts); FRT_ERR_STATE (the stream is capturing); FRT_ERR_BACKEND. */
FRT_API int frt_event_record(frt_event *event, frt_stream *stream);

/* Makes all work enqueued on `stream` after this call wait until the event's
 * most recent record (at the time of this call) has completed. Waiting on a
 * never-recorded event is a no-op. Does not block the caller.
 * Inside a capture the wait is recorded: each replay of the graph waits for
 * the event's newest record enqueued before that replay (a CUDA external
 * event wait node; on the cpu backend the newest record when the wait is
 * reached, so a record enqueued while the replay runs may be waited for
 * too: don't). The event must outlive the graph's variants.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, different contexts);
 * FRT_ERR_BACKEND. */
FRT_API int frt_stream_wait_event(frt_stream *stream, frt_event *event);

/* A deferred wait: the next operation enqueued on `stream` (a fill, copy,
 * read, write, host task, event record or wait, graph replay or capture,
 * a sync, or a frt_stream_native call, after which the caller enqueues
 * natively) first makes the stream wait for the event's newest record, as
 * frt_stream_wait_event would. Lets a stream run ahead of copies on another
 * stream while it only touches what they don't write (the pipelined
 * capsule restore, docs/model.md "The pipelined restore"). A second
 * deferred wait on another event enqueues the first one at once; event NULL
 * enqueues a pending one at once and leaves none. Destroying the event
 * first blocks until its newest record has completed, which satisfies a
 * pending wait on it.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL stream, different contexts);
 * FRT_ERR_STATE (inside a capture); FRT_ERR_BACKEND. */
FRT_API int frt_stream_defer_wait(frt_stream *stream, frt_event *event);

/* hold != 0: operations enqueued on `stream` from now on do not enqueue its
 * deferred wait, until frt_stream_defer_hold(stream, 0); the caller vouches
 * that they don't touch what the awaited copies write (a graph whose
 * captured waits order it, for one). Errors: FRT_ERR_INVALID_ARGUMENT. */
FRT_API int frt_stream_defer_hold(frt_stream *stream, int hold);

/* 1 while `stream` has a deferred wait not yet enqueued, else 0;
 * FRT_ERR_INVALID_ARGUMENT for an invalid stream. */
FRT_API int frt_stream_deferred(frt_stream *stream);

/* Blocks until the event's most recent record has completed (at once when
 * never recorded). Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. */
FRT_API int frt_event_sync(frt_event *event);

/* *ms = time between two completed records (end - start), in milliseconds.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, different contexts);
 * FRT_ERR_STATE (an event was never recorded or has not completed yet);
 * FRT_ERR_BACKEND. */
FRT_API int frt_event_elapsed_ms(frt_event *start, frt_event *end, float *ms);

/* ---- host tasks ------------------------------------------------------------ */

typedef void (*frt_host_fn)(void *args);

/* Enqueues fn(copy_of_args) on the stream. The args_size bytes at args are
 * copied at enqueue time (max_align_t aligned); fn gets a pointer to the copy
 * (NULL when args_size is 0) and may modify it. fn runs on a thread that is
 * not the caller's: the cpu stream's worker, or a CUDA callback thread
 * (cudaLaunchHostFunc), where it must not call CUDA or frt stream functions.
 * Inside a capture the copy becomes part of the graph variant and every replay
 * passes that same copy, exactly as recorded: arguments are baked at capture,
 * so a value that changes between replays must be read from a buffer.
 * This is how CPU kernels run on the cpu backend.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL stream or fn, NULL args with
 * args_size > 0); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
FRT_API int frt_stream_host_task(frt_stream *stream, frt_host_fn fn, const void *args, size_t args_size);

/* ---- buffers --------------------------------------------------------------- */

/* Allocates `bytes` (> 0) of memory in a space, uninitialized. `name` (copied;
 * NULL gives "") names the buffer in messages and capsule tables. *out is
 * owned by the caller: free with frt_buffer_free.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL ctx/out, bytes 0, bad space);
 * FRT_ERR_OUT_OF_MEMORY with a message naming the buffer, its space and size
 * (more than the device or host has, or the allocator failed; never aborts);
 * FRT_ERR_STATE (a stream of the context is capturing); FRT_ERR_BACKEND.
 * On failure *out is NULL. */
FRT_API int frt_buffer_alloc(frt_context *ctx, const char *name, frt_space space, size_t bytes,
                             frt_buffer **out);

/* Wraps memory the caller owns as a buffer of a space (the caller vouches for
 * the space: a device pointer for DEVICE, page-locked memory for PINNED_HOST).
 * frt never frees `ptr`; it must outlive the buffer and every graph bound to
 * it. Errors: FRT_ERR_INVALID_ARGUMENT (NULL ctx/ptr/out, bytes 0, bad space);
 * FRT_ERR_OUT_OF_MEMORY. On failure *out is NULL. */
FRT_API int frt_buffer_wrap(frt_context *ctx, const char *name, frt_space space, void *ptr,
                            size_t bytes, frt_buffer **out);

/* Frees a buffer (and its memory unless wrapped). No work may still use it
 * (sync first) and no graph may still bind it. NULL is a no-op. */
FRT_API void frt_buffer_free(frt_buffer *buf);

/* The buffer's memory (a device pointer for DEVICE on cuda); NULL for NULL. */
FRT_API void *frt_buffer_ptr(const frt_buffer *buf);
/* Its size in bytes; 0 for NULL. */
FRT_API size_t frt_buffer_size(const frt_buffer *buf);
/* Its name (owned by the buffer); "" for NULL. */
FRT_API const char *frt_buffer_name(const frt_buffer *buf);
/* Its space; FRT_SPACE_HOST for NULL. */
FRT_API frt_space frt_buffer_space(const frt_buffer *buf);

/* Asynchronously sets bytes [off, off + bytes) of buf to `value`.
 * bytes == 0 is a no-op. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, handles of
 * different contexts); FRT_ERR_OUT_OF_RANGE (range past the end, overflow
 * included; nothing written); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
FRT_API int frt_buffer_fill(frt_buffer *buf, size_t off, size_t bytes, uint8_t value, frt_stream *stream);

/* Asynchronously copies src[src_off, +bytes) to dst[dst_off, +bytes), any
 * space to any space. Ranges are bounds-checked first. The two ranges must
 * not overlap. bytes == 0 is a no-op.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, different contexts, overlapping
 * ranges of one buffer); FRT_ERR_OUT_OF_RANGE (nothing enqueued or written);
 * FRT_ERR_STATE (HOST <-> DEVICE inside a capture); FRT_ERR_OUT_OF_MEMORY;
 * FRT_ERR_BACKEND. */
FRT_API int frt_buffer_copy(frt_buffer *dst, size_t dst_off, const frt_buffer *src, size_t src_off,
                            size_t bytes, frt_stream *stream);

typedef struct frt_copy {
    frt_buffer *dst;
    size_t dst_off;
    const frt_buffer *src;
    size_t src_off;
    size_t bytes;
} frt_copy;

/* Asynchronously performs n copies (the snapshot/restore primitive of
 * capsules). All entries are validated before anything is enqueued: if any is
 * invalid or out of range, the call fails and nothing is written. The copies
 * of one batch may run concurrently and in any order, so no destination may
 * overlap another entry's source or destination. On cuda, when a batch has two
 * or more device-to-device entries they all go through one launch (per 128
 * entries) of a batched copy kernel reading a descriptor table (a single one
 * goes through cudaMemcpyAsync); entries touching host memory go through
 * cudaMemcpyAsync (host <-> host through a host task). This is the
 * bandwidth path of capsule snapshot / restore.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL copies with n > 0, n < 0, a NULL
 * buffer, mixed contexts, an entry overlapping itself); FRT_ERR_OUT_OF_RANGE
 * (with the index of the entry); FRT_ERR_STATE; FRT_ERR_OUT_OF_MEMORY;
 * FRT_ERR_BACKEND (after some entries may have been enqueued). */
FRT_API int frt_buffer_copy_batch(const frt_copy *copies, int n, frt_stream *stream);

/* frt_buffer_copy_batch_ex flags. FRT_COPY_OVERLAP: the copies run beside
 * kernels of other streams and should leave them the compute units: on cuda
 * they go to the copy engines (cudaMemcpyBatchAsync with
 * cudaMemcpyFlagPreferOverlapWithCompute) instead of the batched copy kernel,
 * which is faster alone (docs/PERF.md) but takes SMs; pageable host memory
 * takes the plain path. No effect on the cpu backend. */
#define FRT_COPY_OVERLAP 1u

/* frt_buffer_copy_batch with flags (0 or FRT_COPY_OVERLAP).
 * Errors: as frt_buffer_copy_batch; FRT_ERR_INVALID_ARGUMENT for unknown
 * flags. */
FRT_API int frt_buffer_copy_batch_ex(const frt_copy *copies, int n, frt_stream *stream, unsigned flags);

/* Asynchronously copies `bytes` from host memory into buf[off, +bytes).
 * host_src must stay valid and unchanged until the stream has synced past this
 * call (it is read when the copy runs, not at enqueue).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_RANGE (nothing written);
 * FRT_ERR_STATE (inside a capture); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
FRT_API int frt_buffer_write(frt_buffer *buf, size_t off, const void *host_src, size_t bytes,
                             frt_stream *stream);

/* Asynchronously copies buf[off, +bytes) into host memory. host_dst must stay
 * valid until the stream has synced past this call; its contents are
 * undefined until then. Errors: as frt_buffer_write. */
FRT_API int frt_buffer_read(const frt_buffer *buf, size_t off, void *host_dst, size_t bytes,
                            frt_stream *stream);

/* ---- graphs ---------------------------------------------------------------- */

/* The record callback of a capture: enqueue the work on `stream` (kernels on
 * frt_stream_native(stream), host tasks, fills, copies) and return 0, or a
 * negative frt_status to abandon the capture. */
typedef int (*frt_record_fn)(frt_stream *stream, void *user);

/* Creates an empty graph. name (copied; NULL gives "") is used in messages.
 * max_variants: 0 = unbounded, else the variant table holds at most that many
 * variants and evicts the least recently replayed (or captured) one.
 * Free with frt_graph_destroy.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, max_variants < 0);
 * FRT_ERR_OUT_OF_MEMORY. On failure *out is NULL. */
FRT_API int frt_graph_create(frt_context *ctx, const char *name, int max_variants, frt_graph **out);

/* Destroys a graph and all its variants (waiting, on cuda, for replays of
 * variants holding host-task arguments). Bound buffers are not freed.
 * NULL and a graph that is capturing are no-ops. */
FRT_API void frt_graph_destroy(frt_graph *graph);

/* Binds a buffer to a named port (name copied), replacing an earlier binding;
 * buf NULL unbinds. The record callback reads ports with frt_graph_port.
 * Bindings are fixed at capture, so changing a port's buffer while the graph
 * has variants evicts all of them (rebinding the same buffer changes nothing).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL graph/port, empty port name, a
 * buffer of another context); FRT_ERR_STATE (the graph is capturing);
 * FRT_ERR_OUT_OF_MEMORY (the binding is unchanged). */
FRT_API int frt_graph_bind(frt_graph *graph, const char *port, frt_buffer *buf);

/* The buffer bound to a port, NULL when unbound (or NULL arguments). */
FRT_API frt_buffer *frt_graph_port(const frt_graph *graph, const char *port);

/* Captures the variant for `key`: marks `stream` capturing, calls
 * record(stream, user), and turns what it enqueued into the variant. Replaces
 * an existing variant with the same key; when the table is full, evicts the
 * least recently used other variant. Nothing runs during capture.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL graph/stream/record, different
 * contexts); FRT_ERR_STATE (the stream or graph is already capturing);
 * the record callback's own status (the capture is discarded, the variant
 * table unchanged); FRT_ERR_BACKEND (CUDA refused the captured work, e.g. a
 * synchronous call inside the callback; the capture is discarded);
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_graph_capture(frt_graph *graph, frt_shape_key key, frt_stream *stream,
                              frt_record_fn record, void *user);

/* Enqueues the variant for `key` on `stream`, as captured (same buffers, same
 * arguments; buffer contents are read when it runs). Marks the variant most
 * recently used. Replays of one variant run one after the other, in the order
 * they were enqueued, even across streams.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_NO_VARIANT (no variant for the key:
 * never a silent no-op; nothing enqueued); FRT_ERR_STATE (the stream is
 * capturing); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
FRT_API int frt_graph_replay(frt_graph *graph, frt_shape_key key, frt_stream *stream);

/* 1 when the graph has a variant for key, 0 when not (or graph invalid). */
FRT_API int frt_graph_has(const frt_graph *graph, frt_shape_key key);

/* Drops the variant for key (waiting on cuda as frt_graph_destroy does).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_NO_VARIANT; FRT_ERR_STATE
 * (the graph is capturing). */
FRT_API int frt_graph_evict(frt_graph *graph, frt_shape_key key);

/* Number of variants (0 for NULL). */
FRT_API int frt_graph_count(const frt_graph *graph);

/* The graph's name ("" for NULL). */
FRT_API const char *frt_graph_name(const frt_graph *graph);

/* ---- plans ----------------------------------------------------------------- */

/* Creates an empty plan: a DAG of graph replays across streams. Free with
 * frt_plan_destroy. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_plan_create(frt_context *ctx, frt_plan **out);

/* Waits for the plan's enqueued work (frt_plan_sync), then destroys the plan
 * (not its graphs or streams). NULL is a no-op. */
FRT_API void frt_plan_destroy(frt_plan *plan);

/* Adds node "replay `key` of `graph` on `stream`", which starts only after the
 * nodes listed in deps (ids returned by earlier frt_plan_add calls: the plan is
 * a DAG by construction). Nodes on the same stream also run in the order they
 * were added. *node_id (may be NULL) receives the new node's id (0, 1, ...).
 * The graph and stream must outlive the plan. The variant need not exist yet.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, different contexts, deps NULL with
 * n_deps > 0, n_deps < 0, a dep that is not an earlier node);
 * FRT_ERR_OUT_OF_MEMORY. On failure the plan is unchanged. */
FRT_API int frt_plan_add(frt_plan *plan, frt_graph *graph, frt_shape_key key, frt_stream *stream,
                         const int *deps, int n_deps, int *node_id);

/* Number of nodes (0 for NULL). */
FRT_API int frt_plan_count(const frt_plan *plan);

/* Enqueues every node in order: cross-stream dependencies become event waits,
 * then each node's replay. Returns without waiting. Executing again before
 * frt_plan_sync is allowed (streams keep the order).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_NO_VARIANT (checked for every node
 * before anything is enqueued: on this error nothing is enqueued);
 * FRT_ERR_STATE (a stream is capturing; nothing enqueued); FRT_ERR_BACKEND and
 * FRT_ERR_OUT_OF_MEMORY (part of the plan may have been enqueued: sync it). */
FRT_API int frt_plan_execute(frt_plan *plan);

/* Blocks until everything enqueued by earlier frt_plan_execute calls has
 * finished. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. */
FRT_API int frt_plan_sync(frt_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* FRT_EXEC_H */
