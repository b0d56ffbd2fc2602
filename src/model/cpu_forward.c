/*
 * cpu_forward.c - what every architecture's cpu backend records the same
 * way: a step as host tasks (embed, one task per layer, final norm + LM
 * head), and the sampling task, which reads the logits, the step's sampling
 * parameters and the boundary's RNG from their buffers (model_internal.h).
 */
#include "model/model_internal.h"

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"

int frt_cpu_step_rows(const frt_model *m, int decode)
{
    const frt_step_args *st = frt_buffer_ptr(m->step);
    return decode ? 1 : st->n_valid;
}

/* Samples the pending token from the logits with the step's parameters and
 * the boundary's RNG (greedy: argmax, the RNG untouched). */
static void task_sample(void *p)
{
    const frt_cpu_task *a = p;
    frt_model *m = a->m;
    frt_boundary *b = frt_buffer_ptr(m->boundary);
    const frt_step_args *st = frt_buffer_ptr(m->step);
    const float *logits = frt_buffer_ptr(m->logits);
    int V = m->cfg.vocab_size;
    if (st->sampling.temperature <= 0.0f) {
        b->pending = frt_cpu_argmax(logits, V);
        return;
    }
    float u = frt_rng_uniform(&b->rng[0]);
    b->pending = frt_cpu_sample(logits, V, st->sampling.temperature, st->sampling.top_k, st->sampling.top_p, u,
                                m->cpu_sample_scratch);
}

static int record_forward(frt_stream *s, frt_model *m, int decode, const frt_cpu_forward *f)
{
    frt_cpu_task a = {.m = m, .layer = -1, .decode = decode};
    FRT_TRY(frt_stream_host_task(s, f->embed, &a, sizeof a));
    for (int l = 0; l < m->cfg.n_layers; l++) {
        a.layer = l;
        FRT_TRY(frt_stream_host_task(s, f->layer, &a, sizeof a));
    }
    a.layer = -1;
    return frt_stream_host_task(s, f->final, &a, sizeof a);
}

int frt_cpu_record_prefill(frt_stream *s, const frt_record_ctx *rc, const frt_cpu_forward *f)
{
    return record_forward(s, rc->m, 0, f);
}

int frt_cpu_record_decode(frt_stream *s, const frt_record_ctx *rc, const frt_cpu_forward *f)
{
    FRT_TRY(record_forward(s, rc->m, 1, f));
    frt_cpu_task a = {.m = rc->m, .layer = -1, .decode = 1};
    return frt_stream_host_task(s, task_sample, &a, sizeof a);
}

int frt_cpu_record_sample(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    frt_cpu_task a = {.m = rc->m, .layer = -1, .decode = 0};
    return frt_stream_host_task(s, task_sample, &a, sizeof a);
}
