/*
 * model/arch/batch_cuda.h - the per-slot ends of a batched decode graph
 * (frt_arch_backend.record_decode_batch) on the CUDA backends, shared by the
 * dense and the hybrid architectures.
 *
 * A batched decode step runs the weight-bound products on the rows of
 * slots 0..n-1 together; what each slot does alone (its journal and the
 * embedding of its pending token at the start; its logits row, advance and
 * sampler at the end) runs on side streams, one a slot (kernels/cuda/
 * fanout.h), as parallel branches of the graph: each slot's kernels are the
 * ones its decode alone runs, on its own state, so the bits do not change.
 */
#ifndef FRT_MODEL_ARCH_BATCH_CUDA_H
#define FRT_MODEL_ARCH_BATCH_CUDA_H

#include "kernels/cuda/fanout.h"
#include "model/model_internal.h"

#include <stddef.h>
#include <stdint.h>

typedef struct frt_batch_ends {
    frt_cuda_fanout fan;     /* side stream b: slot b's ends */
    int smp_conc;            /* samplers in flight at most (frt_cuda_sample_concurrency) */
    int V;                   /* vocabulary */
    void *sample_ws;         /* [slots] sampler workspaces of sample_ws_bytes each (device) */
    size_t sample_ws_bytes;
    frt_logprobs *logprobs;  /* [slots] (device): every slot's step logprobs but the last's */
    const float *blogits;    /* [slots, V] f32 (device): the batch's logits rows */
} frt_batch_ends;

/* Device bytes of the workspaces for `slots` slots over a vocabulary of V
 * (what frt_batch_ends_init carves from `base`). Errors:
 * FRT_ERR_INVALID_ARGUMENT; FRT_ERR_UNSUPPORTED / FRT_ERR_BACKEND (the
 * sampler's setup). */
int frt_batch_ends_bytes(int slots, int V, size_t *bytes);

/* Makes the side streams and points the workspaces into `base` (device,
 * frt_batch_ends_bytes bytes, 256-byte aligned, owned by the caller) and
 * at blogits. Call at load, outside a capture. Errors: as
 * frt_cuda_fanout_create and frt_cuda_sample_concurrency. */
int frt_batch_ends_init(frt_batch_ends *e, int slots, int V, void *base, const float *blogits);

/* Destroys the side streams (a zeroed *e: nothing). */
void frt_batch_ends_free(frt_batch_ends *e);

/* Records, on side streams forked from `main` and joined back, for slots
 * b = 0..n-1 (each bound in turn, m left bound to slot n-1): its journal
 * entry of the pending token and that token's embedding (bf16 table
 * [V, H]) into row b of x [n, H] f32. Errors: FRT_ERR_BACKEND (capture). */
int frt_batch_ends_start(frt_batch_ends *e, frt_model *m, void *main, int n, float *x, const uint16_t *embed,
                         int H);

/* Records, likewise, slot b's end: logits row b into its logits buffer,
 * the advance of its boundary, its sampling step (frt_cuda_sample_step;
 * slot n-1's logprobs into the logprobs port, as after stepping the slots
 * in order). Slot b's sampler starts after slot b - smp_conc's. Errors:
 * FRT_ERR_BACKEND; the sampler's argument errors. */
int frt_batch_ends_finish(frt_batch_ends *e, frt_model *m, void *main, int n);

#endif
