/*
 * critic_cuda.c - the value critic on the cuda backend (frt/rollout.h,
 * docs/robot.md): the layers' weights copied once into device buffers of
 * the policy's context, and the record function of the critic's graph,
 * which enqueues the critic's input (state and pooled vision tokens) and
 * one dense kernel per layer (kernels/cuda/kernels_critic_cuda.h) on the
 * critic's stream. The graph binds the policy's vision_tokens and
 * pixel_attention_mask port buffers, so the replay reads what the policy's
 * replay wrote on the device, with no copy.
 */
#include "robot/robot_internal.h"

#include "kernels/cuda/kernels_critic_cuda.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>

struct frt_critic_dev {
    int n_layers;
    int in[FRT_CRITIC_MAX_LAYERS], out[FRT_CRITIC_MAX_LAYERS];
    frt_buffer *w[FRT_CRITIC_MAX_LAYERS]; /* [out, in] f32 */
    frt_buffer *b[FRT_CRITIC_MAX_LAYERS]; /* [out] f32 */
    frt_buffer *x0;                       /* [in_0] f32: [state; pooled] */
    frt_buffer *h[2];                     /* [widest hidden] f32, alternating */
};

static int upload(frt_context *ctx, frt_stream *s, const char *name, const float *src, size_t n, frt_buffer **out)
{
    FRT_TRY(frt_buffer_alloc(ctx, name, FRT_SPACE_DEVICE, n * sizeof(float), out));
    return frt_buffer_write(*out, 0, src, n * sizeof(float), s);
}

static int dev_init(frt_critic_dev *d, frt_context *ctx, frt_stream *s, const frt_critic_layer_view *layers,
                    int n_layers)
{
    int widest = 1;
    char name[64];
    d->n_layers = n_layers;
    for (int i = 0; i < n_layers; i++) {
        const frt_critic_layer_view *L = &layers[i];
        d->in[i] = L->in;
        d->out[i] = L->out;
        if (L->out > widest) widest = L->out;
        snprintf(name, sizeof name, "critic.layers.%d.weight", i);
        FRT_TRY(upload(ctx, s, name, L->w, (size_t)L->out * L->in, &d->w[i]));
        snprintf(name, sizeof name, "critic.layers.%d.bias", i);
        FRT_TRY(upload(ctx, s, name, L->b, (size_t)L->out, &d->b[i]));
    }
    FRT_TRY(frt_buffer_alloc(ctx, "critic.x0", FRT_SPACE_DEVICE, (size_t)layers[0].in * sizeof(float), &d->x0));
    FRT_TRY(frt_buffer_alloc(ctx, "critic.h0", FRT_SPACE_DEVICE, (size_t)widest * sizeof(float), &d->h[0]));
    FRT_TRY(frt_buffer_alloc(ctx, "critic.h1", FRT_SPACE_DEVICE, (size_t)widest * sizeof(float), &d->h[1]));
    return frt_stream_sync(s);
}

int frt_critic_dev_create(frt_context *ctx, frt_stream *s, const frt_critic_layer_view *layers, int n_layers,
                          frt_critic_dev **out)
{
    *out = NULL;
    frt_critic_dev *d = calloc(1, sizeof *d);
    if (!d) return frt_error(FRT_ERR_OUT_OF_MEMORY, "critic: out of memory");
    int rc = dev_init(d, ctx, s, layers, n_layers);
    if (rc < 0) {
        frt_stream_sync(s);
        frt_critic_dev_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void frt_critic_dev_free(frt_critic_dev *d)
{
    if (!d) return;
    for (int i = 0; i < FRT_CRITIC_MAX_LAYERS; i++) {
        frt_buffer_free(d->w[i]);
        frt_buffer_free(d->b[i]);
    }
    frt_buffer_free(d->x0);
    frt_buffer_free(d->h[0]);
    frt_buffer_free(d->h[1]);
    free(d);
}

int frt_critic_dev_record(const frt_critic_dev *d, frt_stream *s, const frt_critic_io *io)
{
    void *st = frt_stream_native(s);
    float *x0 = frt_buffer_ptr(d->x0);
    FRT_TRY(frt_cuda_critic_input(st, x0, io->state, io->state_dim, io->tokens, io->cam_mask, io->n_cameras,
                                  io->n_patch, io->width));
    const float *x = x0;
    const int n = d->n_layers;
    for (int i = 0; i < n; i++) {
        float *y = i == n - 1 ? io->value : frt_buffer_ptr(d->h[i & 1]);
        FRT_TRY(frt_cuda_dense_f32(st, y, frt_buffer_ptr(d->w[i]), frt_buffer_ptr(d->b[i]), x, d->in[i], d->out[i],
                                   i < n - 1));
        x = y;
    }
    return 0;
}
