/*
 * cpu_forward.c - what every architecture's cpu backend records the same
 * way: a step as host tasks (embed, one task per layer, final norm + LM
 * head), and the sampling task, which reads the logits, the step's sampling
 * parameters and the boundary's RNG from their buffers (model_internal.h).
 */
#include "model/model_internal.h"

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"
#include "kernels/cpu/sample_rule.h"

#include <string.h>

int frt_cpu_step_rows(const frt_model *m, int decode)
{
    const frt_step_args *st = frt_buffer_ptr(m->step);
    return decode ? 1 : st->n_valid;
}

void frt_cpu_journal(frt_model *m, const int32_t *ids, int n, int decode)
{
    const frt_boundary *b = frt_buffer_ptr(m->boundary);
    int32_t *journal = frt_buffer_ptr(m->tokens);
    int32_t *counts = frt_buffer_ptr(m->counts);
    uint8_t *seen = frt_buffer_ptr(m->seen);
    memcpy(journal + b->pos, ids, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        seen[ids[i]] = 1;
        if (decode) counts[ids[i]]++;
    }
}

/* The sampling step of frt/sampling.h: the adjusted logits (when a bias, a
 * penalty or the token mask is on; the mask read from the `token_mask`
 * port when the step record says so), the pending token from them with the step's parameters
 * and the boundary's RNG (greedy: argmax, the RNG untouched), then the
 * logprobs when asked. */
static void task_sample(void *p)
{
    const frt_cpu_task *a = p;
    frt_model *m = a->m;
    frt_boundary *b = frt_buffer_ptr(m->boundary);
    const frt_step_args *st = frt_buffer_ptr(m->step);
    const frt_sampling *sp = &st->sampling;
    const float *logits = frt_buffer_ptr(m->logits);
    int V = m->cfg.vocab_size, rc = 0;
    if (frt_sample_adjusts(sp))
        rc = frt_cpu_logits_adjust(m->cpu_adjusted, logits, V, sp, frt_buffer_ptr(m->counts),
                                   frt_buffer_ptr(m->seen));
    else if (st->mask_on)
        memcpy(m->cpu_adjusted, logits, (size_t)V * sizeof(float));
    if (rc == 0 && st->mask_on) rc = frt_cpu_logits_mask(m->cpu_adjusted, V, frt_buffer_ptr(m->in_mask));
    if (frt_sample_reads_adjusted(sp, st->mask_on)) logits = m->cpu_adjusted;
    if (rc < 0) {
        b->pending = -1;
    } else if (sp->temperature <= 0.0f) {
        b->pending = frt_cpu_argmax(logits, V);
    } else {
        float u = frt_rng_uniform(&b->rng[0]);
        b->pending = frt_cpu_sample_minp(logits, V, sp->temperature, sp->top_k, sp->top_p, sp->min_p, u,
                                         m->cpu_sample_scratch);
    }
    if (rc == 0 && b->pending >= 0 && sp->logprobs)
        rc = frt_cpu_logprobs(frt_buffer_ptr(m->out_logprobs), logits, V, b->pending, sp->top_logprobs);
    if (rc == 0 && b->pending < 0) rc = b->pending;
    if (rc < 0 && m->task_status == 0) m->task_status = rc; /* checked by the API after the step */
}

/* rows: the recording's bucket (1 for decode). */
static int record_forward(frt_stream *s, frt_model *m, int decode, int rows, const frt_cpu_forward *f)
{
    frt_cpu_task a = {.m = m, .layer = -1, .decode = decode};
    FRT_TRY(frt_stream_host_task(s, f->embed, &a, sizeof a));
    for (int l = 0; l < m->cfg.n_layers; l++) {
        a.layer = l;
        if (!decode) FRT_TRY(frt_model_layer_wait(s, m, l, rows)); /* the pipelined restore's layer l */
        FRT_TRY(frt_stream_host_task(s, f->layer, &a, sizeof a));
    }
    a.layer = -1;
    return frt_stream_host_task(s, f->final, &a, sizeof a);
}

int frt_cpu_record_prefill(frt_stream *s, const frt_record_ctx *rc, const frt_cpu_forward *f)
{
    return record_forward(s, rc->m, 0, rc->bucket, f);
}

int frt_cpu_record_decode(frt_stream *s, const frt_record_ctx *rc, const frt_cpu_forward *f)
{
    FRT_TRY(record_forward(s, rc->m, 1, 1, f));
    frt_cpu_task a = {.m = rc->m, .layer = -1, .decode = 1};
    return frt_stream_host_task(s, task_sample, &a, sizeof a);
}

int frt_cpu_record_sample(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    frt_cpu_task a = {.m = rc->m, .layer = -1, .decode = 0};
    return frt_stream_host_task(s, task_sample, &a, sizeof a);
}
