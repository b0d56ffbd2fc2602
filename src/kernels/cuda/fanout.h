/*
 * kernels/cuda/fanout.h - independent per-slot work of a captured graph on
 * side streams: the batched decode's per-branch tails (the logits row, the
 * advance, the sampler) become parallel branches of the CUDA graph instead
 * of a chain of small launches.
 *
 * Inside a stream capture (cudaStreamCaptureModeThreadLocal, docs/exec.md),
 * a side stream that waits on an event recorded in the capturing stream
 * joins the capture; its launches become graph nodes that depend on the
 * point of the fork and nothing else, and the capturing stream waiting on an
 * event recorded in the side stream joins them back. The same bits: each
 * branch's kernels are the ones it runs alone, on its own buffers.
 */
#ifndef FRT_KERNELS_CUDA_FANOUT_H
#define FRT_KERNELS_CUDA_FANOUT_H

#define FRT_FANOUT_MAX 32 /* side streams of one fan-out */

typedef struct frt_cuda_fanout {
    int n;                            /* side streams made */
    void *side[FRT_FANOUT_MAX];       /* cudaStream_t, non-blocking */
    void *ev_fork;                    /* cudaEvent_t (timing off) */
    void *ev_done[FRT_FANOUT_MAX];    /* side i's last recorded point */
} frt_cuda_fanout;

/* Makes n (1..FRT_FANOUT_MAX) side streams and their events on the current
 * device; call outside a capture. On failure *f holds nothing to free.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, n out of range); FRT_ERR_BACKEND,
 * FRT_ERR_OUT_OF_MEMORY (stream or event creation). */
int frt_cuda_fanout_create(frt_cuda_fanout *f, int n);

/* Destroys what frt_cuda_fanout_create made (a zeroed *f: nothing). */
void frt_cuda_fanout_destroy(frt_cuda_fanout *f);

/* Side streams 0..n-1 (n <= f->n) start after everything enqueued on
 * `main` so far. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. */
int frt_cuda_fanout_fork(frt_cuda_fanout *f, void *main, int n);

/* Side stream i waits for what side stream j has enqueued so far (a chain
 * that bounds how many side streams run a kind of kernel at once).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. */
int frt_cuda_fanout_after(frt_cuda_fanout *f, int i, int j);

/* `main` continues after everything enqueued on side streams 0..n-1.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. */
int frt_cuda_fanout_join(frt_cuda_fanout *f, void *main, int n);

#endif
