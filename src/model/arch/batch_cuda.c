/* model/arch/batch_cuda.c - the per-slot ends of a batched decode graph
 * (batch_cuda.h). */
#include "model/arch/batch_cuda.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/arch/qwen35/qwen35_glue.h"
#include "util/error.h"

#include <cuda_runtime.h>
#include <string.h>

#define ALIGN 256

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

int frt_batch_ends_bytes(int slots, int V, size_t *bytes)
{
    if (!bytes || slots < 1 || slots > FRT_FANOUT_MAX || V < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "batch ends: %d slots, vocabulary %d", slots, V);
    size_t ws = 0;
    FRT_TRY(frt_cuda_sample_workspace_bytes(V, &ws));
    *bytes = align_up(ws) * (size_t)slots + align_up((size_t)slots * sizeof(frt_logprobs));
    return 0;
}

int frt_batch_ends_init(frt_batch_ends *e, int slots, int V, void *base, const float *blogits)
{
    if (!e || !base || !blogits) return frt_error(FRT_ERR_INVALID_ARGUMENT, "batch ends: NULL argument");
    memset(e, 0, sizeof *e);
    size_t ws = 0;
    FRT_TRY(frt_cuda_sample_workspace_bytes(V, &ws));
    FRT_TRY(frt_cuda_sample_concurrency(V, &e->smp_conc));
    e->V = V;
    e->sample_ws_bytes = align_up(ws);
    e->sample_ws = base;
    e->logprobs = (frt_logprobs *)(void *)((char *)base + e->sample_ws_bytes * (size_t)slots);
    e->blogits = blogits;
    return frt_cuda_fanout_create(&e->fan, slots);
}

void frt_batch_ends_free(frt_batch_ends *e)
{
    if (e) frt_cuda_fanout_destroy(&e->fan);
}

/* The bound slot's boundary and the step record's fields (device). */
typedef struct slot_ptrs {
    int32_t *pos, *pending, *has_logits;
    uint64_t *rng;
    const frt_cuda_sampler_params *params;
    const int32_t *mask_on;
} slot_ptrs;

static slot_ptrs slot_ptrs_of(const frt_model *m)
{
    char *bd = frt_buffer_ptr(m->boundary), *sp = frt_buffer_ptr(m->step);
    slot_ptrs p = {(int32_t *)(void *)(bd + offsetof(frt_boundary, pos)),
                   (int32_t *)(void *)(bd + offsetof(frt_boundary, pending)),
                   (int32_t *)(void *)(bd + offsetof(frt_boundary, has_logits)),
                   (uint64_t *)(void *)(bd + offsetof(frt_boundary, rng)),
                   (const frt_cuda_sampler_params *)(const void *)(sp + offsetof(frt_step_args, sampling)),
                   (const int32_t *)(const void *)(sp + offsetof(frt_step_args, mask_on))};
    return p;
}

int frt_batch_ends_start(frt_batch_ends *e, frt_model *m, void *main, int n, float *x, const uint16_t *embed,
                         int H)
{
    FRT_TRY(frt_cuda_fanout_fork(&e->fan, main, n));
    for (int b = 0; b < n; b++) {
        FRT_TRY(frt_model_bind_slot(m, b));
        slot_ptrs p = slot_ptrs_of(m);
        void *st = e->fan.side[b];
        FRT_TRY(frt_qwen35_journal(st, frt_buffer_ptr(m->tokens), p.pending, p.pos, NULL, 1, m->max_seq,
                                   frt_buffer_ptr(m->seen), frt_buffer_ptr(m->counts)));
        FRT_TRY(frt_cuda_embedding(st, x + (size_t)b * H, FRT_CUDA_F32, embed, e->V, H, p.pending, NULL, 1));
    }
    return frt_cuda_fanout_join(&e->fan, main, n);
}

int frt_batch_ends_finish(frt_batch_ends *e, frt_model *m, void *main, int n)
{
    FRT_TRY(frt_cuda_fanout_fork(&e->fan, main, n));
    for (int b = 0; b < n; b++) {
        FRT_TRY(frt_model_bind_slot(m, b));
        slot_ptrs p = slot_ptrs_of(m);
        void *st = e->fan.side[b];
        float *logits = frt_buffer_ptr(m->logits);
        FRT_CUDA_TRY(cudaMemcpyAsync(logits, e->blogits + (size_t)b * e->V, (size_t)e->V * sizeof(float),
                                     cudaMemcpyDeviceToDevice, (cudaStream_t)st));
        FRT_TRY(frt_qwen35_advance(st, p.pos, p.pending, p.has_logits, NULL, NULL, NULL, 1));
        if (b >= e->smp_conc) FRT_TRY(frt_cuda_fanout_after(&e->fan, b, b - e->smp_conc));
        void *lp = b == n - 1 ? frt_buffer_ptr(m->out_logprobs) : (void *)&e->logprobs[b];
        FRT_TRY(frt_cuda_sample_step(st, p.pending, logits, e->V, p.params, frt_buffer_ptr(m->counts),
                                     frt_buffer_ptr(m->seen), p.mask_on, frt_buffer_ptr(m->in_mask), p.rng, lp,
                                     (char *)e->sample_ws + (size_t)b * e->sample_ws_bytes, e->sample_ws_bytes));
    }
    return frt_cuda_fanout_join(&e->fan, main, n);
}
