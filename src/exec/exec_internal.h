/*
 * exec/exec_internal.h - the handle structs and the backend vtable.
 *
 * exec.c owns validation, the graph variant table (LRU), ports and plans, and
 * calls a backend only through frt_exec_ops. A backend sees already validated,
 * resolved arguments (raw pointers, spaces, byte counts) and keeps its own
 * state in the `impl` field of each handle.
 *
 *   exec_cpu.c             FRT_BACKEND_CPU (worker thread per stream)
 *   cuda/exec_cuda.c       FRT_BACKEND_CUDA (cudart), built only with CUDA
 *   exec_cuda_stub.c       FRT_BACKEND_CUDA without CUDA: FRT_ERR_UNSUPPORTED
 */
#ifndef FRT_EXEC_INTERNAL_H
#define FRT_EXEC_INTERNAL_H

#include "frt/exec.h"

#include <stdint.h>

/* Handle tags; destroy clears them (best-effort use-after-destroy check). */
#define FRT_MAGIC_CONTEXT 0x78746366u /* "fctx" */
#define FRT_MAGIC_STREAM 0x6d727366u  /* "fsrm" */
#define FRT_MAGIC_EVENT 0x74766566u   /* "fevt" */
#define FRT_MAGIC_BUFFER 0x66756266u  /* "fbuf" */
#define FRT_MAGIC_GRAPH 0x68726766u   /* "fgrh" */
#define FRT_MAGIC_PLAN 0x6e6c7066u    /* "fpln" */

typedef struct frt_variant frt_variant;

/* One resolved copy: raw pointers and their spaces (ranges already checked). */
typedef struct frt_copy_op {
    void *dst;
    const void *src;
    size_t bytes;
    frt_space dst_space;
    frt_space src_space;
} frt_copy_op;

typedef struct frt_exec_ops {
    const char *name;
    int (*device_count)(int *count);
    /* Context: set ctx->impl. ctx->device is already set. */
    int (*context_init)(frt_context *ctx);
    void (*context_fini)(frt_context *ctx);
    int (*device_info)(frt_context *ctx, frt_device_info *info);
    int (*context_sync)(frt_context *ctx);
    /* Streams: set s->impl. fini waits for the stream's work first. */
    int (*stream_init)(frt_stream *s, int priority);
    void (*stream_fini)(frt_stream *s);
    int (*stream_sync)(frt_stream *s);
    void *(*stream_native)(frt_stream *s);
    /* Events. */
    int (*event_init)(frt_event *e);
    void (*event_fini)(frt_event *e);
    int (*event_record)(frt_event *e, frt_stream *s);
    int (*stream_wait_event)(frt_stream *s, frt_event *e);
    int (*event_sync)(frt_event *e);
    int (*event_elapsed_ms)(frt_event *start, frt_event *end, float *ms);
    /* Memory. alloc returns FRT_ERR_OUT_OF_MEMORY (message set by exec.c when
     * the backend leaves it generic) or FRT_ERR_BACKEND. */
    int (*mem_alloc)(frt_context *ctx, frt_space space, size_t bytes, void **ptr);
    void (*mem_free)(frt_context *ctx, frt_space space, void *ptr);
    /* Work. When s->capture is set, these record into that variant instead of
     * running. host_task copies args (args_size may be 0, args then NULL). */
    int (*host_task)(frt_stream *s, frt_host_fn fn, const void *args, size_t args_size);
    int (*fill)(frt_stream *s, void *dst, frt_space space, size_t bytes, uint8_t value);
    int (*copy)(frt_stream *s, const frt_copy_op *ops, int n);
    /* FRT_COPY_OVERLAP copies (frt_buffer_copy_batch_ex): copies that leave
     * the compute units to other streams' kernels; NULL: `copy`. */
    int (*copy_overlap)(frt_stream *s, const frt_copy_op *ops, int n);
    /* Graphs: begin puts the stream in capture mode for v (s->capture is set
     * by exec.c before begin); end turns the recording into v->impl when ok,
     * or discards it. end is called exactly once after a successful begin. */
    int (*capture_begin)(frt_stream *s, frt_variant *v);
    int (*capture_end)(frt_stream *s, frt_variant *v, int ok);
    int (*replay)(frt_variant *v, frt_stream *s);
    /* Frees v->impl; must wait until no replay of v can still be running. */
    void (*variant_fini)(frt_variant *v);
} frt_exec_ops;

extern const frt_exec_ops frt_exec_cpu_ops;
extern const frt_exec_ops frt_exec_cuda_ops; /* the stub when built without CUDA */

struct frt_context {
    uint32_t magic;
    frt_backend backend;
    int device;
    const frt_exec_ops *ops;
    void *impl;
    frt_stream *default_stream;
    frt_stream *streams; /* every live stream, the default one included */
    int n_capturing;     /* streams of this context in capture mode */
    /* the pinned host cache (exec.c): freed PINNED_HOST blocks, oldest first */
    struct frt_pinned_block *pinned;
    int n_pinned, cap_pinned;
    size_t pinned_limit, pinned_cached;
    uint64_t pinned_hits, pinned_misses;
    uint64_t n_captures; /* successful frt_graph_capture calls (frt_context_capture_count) */
};

/* A cached pinned host block. */
struct frt_pinned_block {
    void *ptr;
    size_t bytes;
};

struct frt_stream {
    uint32_t magic;
    frt_context *ctx;
    void *impl;
    frt_variant *capture; /* non-NULL while capturing */
    frt_event *deferred;  /* frt_stream_defer_wait: the wait the next operation enqueues first */
    int deferred_hold;    /* frt_stream_defer_hold: not yet */
    int is_default;
    frt_stream *next; /* in ctx->streams */
};

struct frt_event {
    uint32_t magic;
    frt_context *ctx;
    void *impl;
};

struct frt_buffer {
    uint32_t magic;
    frt_context *ctx;
    void *ptr;
    size_t bytes;
    frt_space space;
    int owned;          /* 0 for frt_buffer_wrap */
    size_t alloc_bytes; /* owned PINNED_HOST: the block's size (>= bytes; the pinned cache) */
    char *name;
};

/* One captured variant. Memory the backend must keep alive for the variant's
 * lifetime (host-task arguments on cuda) goes to frt_variant_keep. */
struct frt_variant {
    frt_shape_key key;
    uint64_t last_use; /* graph tick of the last capture or replay */
    frt_graph *graph;
    void *impl;   /* backend: cpu recording or cudaGraphExec_t holder */
    void **keep;  /* blocks freed after variant_fini */
    int n_keep, cap_keep;
};

/* Takes ownership of a malloc'd block: freed when the variant is destroyed.
 * Returns 0 or FRT_ERR_OUT_OF_MEMORY (the block is then freed). */
int frt_variant_keep(frt_variant *v, void *block);

#endif
