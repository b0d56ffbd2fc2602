/*
 * critic.c - the value critic of the rollout host (frt/rollout.h): an MLP
 * over the normalized robot state and the policy's pooled vision tokens,
 * loaded from safetensors (critic.layers.i.weight / .bias, docs/robot.md),
 * captured once as its own graph on a second stream of the policy's
 * context. The graph binds the policy's vision_tokens and
 * pixel_attention_mask port buffers, so it reads what the policy's replay
 * wrote with no copy; on the cpu backend it is one host task, on the cuda
 * backend the kernels of critic_cuda.c.
 */
#include "frt/rollout.h"
#include "robot/robot_internal.h"
#include "frt/safetensors.h"

#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRITIC_MAX_LAYERS FRT_CRITIC_MAX_LAYERS
#define CRITIC_KEY ((frt_shape_key)1)

typedef struct critic_layer {
    int in, out;
    float *w; /* [out, in] */
    float *b; /* [out] */
} critic_layer;

struct frt_critic {
    frt_model *policy;
    frt_context *ctx;
    frt_stream *stream;     /* the critic's own (second) stream */
    frt_graph *graph;
    frt_buffer *state;      /* [state_dim] f32 input */
    frt_buffer *value;      /* [1] f32 output */
    frt_critic_info info;
    int max_cameras, n_patch;
    critic_layer layers[CRITIC_MAX_LAYERS];
    float *x0, *h0, *h1;    /* scratch: [state_dim + width], [max hidden] x2 */
    frt_critic_dev *dev;    /* cuda backend: the weights on the device; NULL on cpu */
};

#define FMT(...) frt_error(FRT_ERR_FORMAT, "critic: " __VA_ARGS__)

/* One f32 copy of a float tensor of the expected element count. */
static int tensor_f32(const frt_safetensors *st, const char *name, int ndim, float **out, int64_t *shape)
{
    const frt_tensor *t = frt_safetensors_find(st, name);
    if (!t) return FMT("%s: no tensor '%s'", frt_safetensors_path(st), name);
    if (!frt_dtype_is_float(t->dtype))
        return FMT("%s: '%s' is %s (a float dtype expected)", frt_safetensors_path(st), name, frt_dtype_name(t->dtype));
    if (t->ndim != ndim) return FMT("%s: '%s' has %d dimensions (%d expected)", frt_safetensors_path(st), name, t->ndim, ndim);
    for (int d = 0; d < ndim; d++) {
        if (t->shape[d] < 1 || t->shape[d] > (1 << 20))
            return FMT("%s: '%s' dimension %d is %lld", frt_safetensors_path(st), name, d, (long long)t->shape[d]);
        shape[d] = t->shape[d];
    }
    if (!(*out = malloc((size_t)frt_tensor_numel(t) * sizeof(float))))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "critic: out of memory");
    return frt_tensor_to_f32(t, *out);
}

static int load_layer(const frt_safetensors *st, int i, critic_layer *L)
{
    char name[64];
    int64_t ws[2] = {0, 0}, bs[1] = {0};
    snprintf(name, sizeof name, "critic.layers.%d.weight", i);
    FRT_TRY(tensor_f32(st, name, 2, &L->w, ws));
    snprintf(name, sizeof name, "critic.layers.%d.bias", i);
    FRT_TRY(tensor_f32(st, name, 1, &L->b, bs));
    if (bs[0] != ws[0]) return FMT("%s has %lld values, the weight %lld rows", name, (long long)bs[0], (long long)ws[0]);
    L->out = (int)ws[0];
    L->in = (int)ws[1];
    return 0;
}

/* The layers 0..L-1 (the names present), chained in -> out, the last with
 * one output. */
static int load_layers(frt_critic *c, const frt_safetensors *st)
{
    int n = 0;
    char name[64];
    for (; n <= CRITIC_MAX_LAYERS; n++) {
        snprintf(name, sizeof name, "critic.layers.%d.weight", n);
        if (!frt_safetensors_find(st, name)) break;
    }
    if (n == 0) return FMT("%s: no tensor 'critic.layers.0.weight'", frt_safetensors_path(st));
    if (n > CRITIC_MAX_LAYERS) return FMT("more than %d layers", CRITIC_MAX_LAYERS);
    int hidden = 1;
    for (int i = 0; i < n; i++) {
        FRT_TRY(load_layer(st, i, &c->layers[i]));
        if (i > 0 && c->layers[i].in != c->layers[i - 1].out)
            return FMT("layer %d takes %d values, layer %d gives %d", i, c->layers[i].in, i - 1, c->layers[i - 1].out);
        if (c->layers[i].out > hidden) hidden = c->layers[i].out;
    }
    if (c->layers[n - 1].out != 1) return FMT("the last layer (%d) has %d outputs (1 expected)", n - 1, c->layers[n - 1].out);
    if (c->layers[0].in <= c->info.width)
        return FMT("layer 0 takes %d values: the state and the %d pooled features need more", c->layers[0].in,
                   c->info.width);
    c->info.n_layers = n;
    c->info.hidden = c->layers[0].out;
    c->info.state_dim = c->layers[0].in - c->info.width;
    c->x0 = calloc((size_t)c->layers[0].in, sizeof(float));
    c->h0 = calloc((size_t)hidden, sizeof(float));
    c->h1 = calloc((size_t)hidden, sizeof(float));
    if (!c->x0 || !c->h0 || !c->h1) return frt_error(FRT_ERR_OUT_OF_MEMORY, "critic: out of memory");
    return 0;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* y = W x + b over one layer, f32, sums in index order. */
static void dense(const critic_layer *L, const float *x, float *y, int act)
{
    for (int o = 0; o < L->out; o++) {
        const float *w = L->w + (size_t)o * L->in;
        float acc = 0.0f;
        for (int i = 0; i < L->in; i++) acc += w[i] * x[i];
        acc += L->b[o];
        y[o] = act ? silu(acc) : acc;
    }
}

/* pooled[j] = mean of vision_tokens[c, p, j] over present cameras c. */
static void pool(const frt_critic *c, const float *tok, const uint8_t *mask, float *pooled)
{
    const int W = c->info.width;
    memset(pooled, 0, (size_t)W * sizeof(float));
    int rows = 0;
    for (int cam = 0; cam < c->max_cameras; cam++) {
        if (!mask[cam]) continue;
        for (int p = 0; p < c->n_patch; p++, rows++) {
            const float *r = tok + ((size_t)cam * c->n_patch + p) * W;
            for (int j = 0; j < W; j++) pooled[j] += r[j];
        }
    }
    const float inv = rows ? 1.0f / (float)rows : 0.0f;
    for (int j = 0; j < W; j++) pooled[j] *= inv;
}

/* The graph's one task (cpu backend): reads the ports when it runs. */
static void task_critic(void *arg)
{
    frt_critic *c = *(frt_critic **)arg;
    const float *tok = frt_buffer_ptr(frt_graph_port(c->graph, "vision_tokens"));
    const uint8_t *mask = frt_buffer_ptr(frt_graph_port(c->graph, "pixel_attention_mask"));
    const float *state = frt_buffer_ptr(frt_graph_port(c->graph, "state"));
    memcpy(c->x0, state, (size_t)c->info.state_dim * sizeof(float));
    pool(c, tok, mask, c->x0 + c->info.state_dim);
    const float *x = c->x0;
    float *bufs[2] = {c->h0, c->h1};
    const int n = c->info.n_layers;
    for (int i = 0; i < n - 1; i++) {
        dense(&c->layers[i], x, bufs[i & 1], 1);
        x = bufs[i & 1];
    }
    float v;
    dense(&c->layers[n - 1], x, &v, 0);
    *(float *)frt_buffer_ptr(frt_graph_port(c->graph, "value")) = v;
}

#if FRT_HAVE_CUDA
static int record_critic_cuda(frt_stream *s, frt_critic *c)
{
    const frt_critic_io io = {
        .state = frt_buffer_ptr(frt_graph_port(c->graph, "state")),
        .tokens = frt_buffer_ptr(frt_graph_port(c->graph, "vision_tokens")),
        .cam_mask = frt_buffer_ptr(frt_graph_port(c->graph, "pixel_attention_mask")),
        .value = frt_buffer_ptr(frt_graph_port(c->graph, "value")),
        .state_dim = c->info.state_dim,
        .n_cameras = c->max_cameras,
        .n_patch = c->n_patch,
        .width = c->info.width,
    };
    return frt_critic_dev_record(c->dev, s, &io);
}

/* The layers' weights into device buffers of the policy's context. */
static int critic_upload(frt_critic *c)
{
    frt_critic_layer_view v[CRITIC_MAX_LAYERS];
    for (int i = 0; i < c->info.n_layers; i++)
        v[i] = (frt_critic_layer_view){c->layers[i].in, c->layers[i].out, c->layers[i].w, c->layers[i].b};
    return frt_critic_dev_create(c->ctx, c->stream, v, c->info.n_layers, &c->dev);
}
#endif

static int record_critic(frt_stream *s, void *user)
{
    frt_critic *c = user;
#if FRT_HAVE_CUDA
    if (c->dev) return record_critic_cuda(s, c);
#endif
    return frt_stream_host_task(s, task_critic, &c, sizeof c);
}

/* The backend's side: nothing more on cpu, the weights on the device on
 * cuda (CUDA builds). */
static int critic_backend(frt_critic *c)
{
    const frt_backend b = frt_context_backend(c->ctx);
    if (b == FRT_BACKEND_CPU) return 0;
#if FRT_HAVE_CUDA
    if (b == FRT_BACKEND_CUDA) return critic_upload(c);
#endif
    return frt_error(FRT_ERR_UNSUPPORTED, "critic: no critic kernels for the policy's backend (%s)",
                     frt_backend_name(b));
}

/* The policy's sizes the critic needs: prefix width, cameras, patches. */
static int policy_sizes(frt_critic *c, frt_model *policy)
{
    frt_policy_info pi;
    FRT_TRY(frt_policy_info_get(policy, &pi));
    frt_model_info mi;
    FRT_TRY(frt_model_info_get(policy, &mi));
    for (int i = 0; i < mi.n_io; i++) {
        frt_io_info io;
        FRT_TRY(frt_model_io_info(policy, i, &io));
        if (strcmp(io.name, "vision_tokens") == 0 && io.ndim == 3) {
            c->max_cameras = (int)io.shape[0];
            c->n_patch = (int)io.shape[1];
            c->info.width = (int)io.shape[2];
            return 0;
        }
    }
    return frt_error(FRT_ERR_UNSUPPORTED, "critic: the policy has no vision_tokens port [cameras, patches, width]");
}

static int bind_ports(frt_critic *c)
{
    frt_model *p = c->policy;
    FRT_TRY(frt_buffer_alloc(c->ctx, "critic.state", FRT_SPACE_DEVICE, (size_t)c->info.state_dim * sizeof(float),
                             &c->state));
    FRT_TRY(frt_buffer_fill(c->state, 0, frt_buffer_size(c->state), 0, c->stream));
    FRT_TRY(frt_buffer_alloc(c->ctx, "critic.value", FRT_SPACE_DEVICE, sizeof(float), &c->value));
    FRT_TRY(frt_buffer_fill(c->value, 0, sizeof(float), 0, c->stream));
    FRT_TRY(frt_stream_sync(c->stream));
    FRT_TRY(frt_graph_create(c->ctx, "critic", 1, &c->graph));
    FRT_TRY(frt_graph_bind(c->graph, "vision_tokens", frt_policy_port_buffer(p, "vision_tokens")));
    FRT_TRY(frt_graph_bind(c->graph, "pixel_attention_mask", frt_policy_port_buffer(p, "pixel_attention_mask")));
    FRT_TRY(frt_graph_bind(c->graph, "state", c->state));
    FRT_TRY(frt_graph_bind(c->graph, "value", c->value));
    return frt_graph_capture(c->graph, CRITIC_KEY, c->stream, record_critic, c);
}

static int critic_init(frt_critic *c, frt_model *policy, const char *path)
{
    c->policy = policy;
    c->ctx = frt_model_context(policy);
    FRT_TRY(policy_sizes(c, policy));
    frt_safetensors *st = NULL;
    FRT_TRY(frt_safetensors_open(path, &st));
    int rc = load_layers(c, st);
    frt_safetensors_close(st);
    FRT_TRY(rc);
    FRT_TRY(frt_stream_create(c->ctx, 0, &c->stream));
    FRT_TRY(critic_backend(c));
    return bind_ports(c);
}

int frt_critic_load(frt_model *policy, const char *path, frt_critic **out)
{
    if (!policy || !path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument");
    *out = NULL;
    if (!frt_model_is_policy(policy)) return frt_error(FRT_ERR_UNSUPPORTED, "critic: the model is not a policy");
    frt_critic *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "critic: out of memory");
    int rc = critic_init(c, policy, path);
    if (rc < 0) {
        frt_critic_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void frt_critic_free(frt_critic *c)
{
    if (!c) return;
    if (c->stream) frt_stream_sync(c->stream);
    frt_graph_destroy(c->graph);
    frt_stream_destroy(c->stream);
    frt_buffer_free(c->state);
    frt_buffer_free(c->value);
#if FRT_HAVE_CUDA
    frt_critic_dev_free(c->dev);
#endif
    for (int i = 0; i < CRITIC_MAX_LAYERS; i++) {
        free(c->layers[i].w);
        free(c->layers[i].b);
    }
    free(c->x0);
    free(c->h0);
    free(c->h1);
    free(c);
}

int frt_critic_info_get(const frt_critic *c, frt_critic_info *out)
{
    if (!c || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument");
    *out = c->info;
    return 0;
}

int frt_critic_set_state(frt_critic *c, const float *state, int n)
{
    if (!c || (!state && n > 0)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument");
    if (n < 0 || n > c->info.state_dim)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: state of %d values (the critic takes 0 to %d)", n,
                         c->info.state_dim);
    for (int i = 0; i < n; i++)
        if (!isfinite(state[i])) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: state[%d] is not finite", i);
    if (n) FRT_TRY(frt_buffer_write(c->state, 0, state, (size_t)n * sizeof(float), c->stream));
    size_t rest = (size_t)(c->info.state_dim - n) * sizeof(float);
    if (rest) FRT_TRY(frt_buffer_fill(c->state, (size_t)n * sizeof(float), rest, 0, c->stream));
    return frt_stream_sync(c->stream);
}

int frt_critic_value(frt_critic *c, float *value)
{
    if (!c || !value) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument");
    FRT_TRY(frt_buffer_read(c->value, 0, value, sizeof *value, c->stream));
    return frt_stream_sync(c->stream);
}

int frt_critic_run(frt_critic *c, float *value)
{
    if (!c || !value) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument");
    FRT_TRY(frt_graph_replay(c->graph, CRITIC_KEY, c->stream));
    return frt_critic_value(c, value);
}

int frt_critic_graph(frt_critic *c, frt_graph **graph, frt_shape_key *key, frt_stream **stream)
{
    if (!c || !graph || !key || !stream) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument");
    *graph = c->graph;
    *key = CRITIC_KEY;
    *stream = c->stream;
    return 0;
}

frt_model *frt_critic_policy(const frt_critic *c) { return c ? c->policy : NULL; }

int frt_critic_parse_memory(const void *data, size_t size, int width, frt_critic_info *out)
{
    if (!data || !out || width < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic: NULL argument or width < 1");
    frt_safetensors *st = NULL;
    FRT_TRY(frt_safetensors_open_memory(data, size, "critic", &st));
    frt_critic *c = calloc(1, sizeof *c);
    int rc = c ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "critic: out of memory");
    if (rc == 0) {
        c->info.width = width;
        rc = load_layers(c, st);
    }
    if (rc == 0) *out = c->info;
    frt_safetensors_close(st);
    frt_critic_free(c);
    return rc;
}

/* The reference's dense layer in double. */
static void dense_ref(const critic_layer *L, const double *x, double *y, int act)
{
    for (int o = 0; o < L->out; o++) {
        double acc = L->b[o];
        for (int i = 0; i < L->in; i++) acc += (double)L->w[(size_t)o * L->in + i] * x[i];
        y[o] = act ? acc / (1.0 + exp(-acc)) : acc;
    }
}

/* x0 = [state; pooled] in double. */
static int ref_input(const frt_critic *c, const float *tok, int n_cameras, int n_patch, const uint8_t *mask,
                     const float *state, int n, double *x0)
{
    const int W = c->info.width, S = c->info.state_dim;
    for (int i = 0; i < S; i++) x0[i] = i < n ? state[i] : 0.0;
    double *pooled = x0 + S;
    for (int j = 0; j < W; j++) pooled[j] = 0.0;
    long rows = 0;
    for (int cam = 0; cam < n_cameras; cam++) {
        if (mask && !mask[cam]) continue;
        for (int p = 0; p < n_patch; p++, rows++)
            for (int j = 0; j < W; j++) pooled[j] += tok[((size_t)cam * n_patch + p) * W + j];
    }
    if (!rows) return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic reference: no camera present");
    for (int j = 0; j < W; j++) pooled[j] /= (double)rows;
    return 0;
}

int frt_critic_reference(const frt_critic *c, const float *vision_tokens, int n_cameras, int n_patch,
                         const uint8_t *camera_mask, const float *state, int n, double *value)
{
    if (!c || !vision_tokens || !value || (!state && n > 0))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic reference: NULL argument");
    if (n < 0 || n > c->info.state_dim || n_cameras < 1 || n_patch < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "critic reference: %d state values, %d cameras, %d patches", n,
                         n_cameras, n_patch);
    int widest = c->layers[0].in;
    for (int i = 0; i < c->info.n_layers; i++)
        if (c->layers[i].out > widest) widest = c->layers[i].out;
    double *a = malloc((size_t)widest * sizeof *a), *b = malloc((size_t)widest * sizeof *b);
    int rc = a && b ? ref_input(c, vision_tokens, n_cameras, n_patch, camera_mask, state, n, a)
                    : frt_error(FRT_ERR_OUT_OF_MEMORY, "critic reference: out of memory");
    for (int i = 0; rc == 0 && i < c->info.n_layers; i++) {
        dense_ref(&c->layers[i], a, b, i < c->info.n_layers - 1);
        double *t = a;
        a = b;
        b = t;
    }
    if (rc == 0) *value = a[0];
    free(a);
    free(b);
    return rc;
}
