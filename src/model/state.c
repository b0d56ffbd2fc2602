/*
 * state.c - the live state table and the graph ports of a model.
 *
 * The architecture declares its state (model/arch.h, frt_state_decl); the
 * runtime appends the entries every token model has (the token journal, the
 * boundary record, the last logits), allocates each buffer once in device
 * memory, zero-filled, and answers what capsules, reset and the public
 * introspection ask of the table. Nothing here names an architecture's
 * buffer.
 */
#include "model/model_internal.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t decl_elems(int ndim, const int64_t *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return n;
}

static void decl_set(frt_state_decl *d, const char *name, frt_dtype dt, frt_state_validity v, int64_t d0, int64_t d1)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->dtype = dt;
    d->validity = v;
    d->ndim = d1 ? 2 : 1;
    d->shape[0] = d0;
    d->shape[1] = d1;
}

static int alloc_zeroed(frt_model *m, const char *name, size_t bytes, frt_buffer **out)
{
    FRT_TRY(frt_buffer_alloc(m->ctx, name, FRT_SPACE_DEVICE, bytes ? bytes : 1, out));
    return frt_buffer_fill(*out, 0, bytes ? bytes : 1, 0, m->stream);
}

static int check_decl(const frt_model *m, const frt_state_decl *d)
{
    if (!d->name[0] || d->ndim < 1 || d->ndim > 4)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "state: entry '%s' has %d dims", d->name, d->ndim);
    for (int i = 0; i < d->ndim; i++)
        if (d->shape[i] < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "state: entry '%s' dim %d < 1", d->name, i);
    if (d->validity == FRT_STATE_ROWS && d->shape[0] != m->max_seq)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "state: rows entry '%s' has %lld rows, max_seq is %d", d->name,
                         (long long)d->shape[0], m->max_seq);
    return 0;
}

/* Entries the runtime appends to the architecture's table, at most. */
#define N_RUNTIME 5

static int alloc_ports(frt_model *m);
static int alloc_declared_ports(frt_model *m);

/* The token-model entries every token architecture gets: the journal, the
 * boundary, the last logits, and the penalty counts (frt/sampling.h; not
 * `recurrent`, which is the model's arithmetic state: reset zeroes them by
 * name, frt_model_reset). A policy gets the boundary (capsules describe a
 * state by it; it stays at position 0) and its episode record. */
static int append_runtime(const frt_model *m, frt_state_decl *decl, int n)
{
    if (m->arch->kind == FRT_ARCH_POLICY) {
        decl_set(&decl[n++], "boundary", FRT_DT_U8, FRT_STATE_WHOLE, sizeof(frt_boundary), 0);
        decl_set(&decl[n++], "episode", FRT_DT_U8, FRT_STATE_WHOLE, sizeof(frt_episode), 0);
        return n;
    }
    decl_set(&decl[n++], "tokens", FRT_DT_I32, FRT_STATE_ROWS, m->max_seq, 0);
    decl_set(&decl[n++], "boundary", FRT_DT_U8, FRT_STATE_WHOLE, sizeof(frt_boundary), 0);
    decl_set(&decl[n++], "logits", FRT_DT_F32, FRT_STATE_WHOLE, m->cfg.vocab_size, 0);
    decl_set(&decl[n++], "sampler.counts", FRT_DT_I32, FRT_STATE_WHOLE, m->cfg.vocab_size, 0);
    decl_set(&decl[n++], "sampler.seen", FRT_DT_U8, FRT_STATE_WHOLE, m->cfg.vocab_size, 0);
    return n;
}

/* Points the runtime's views at its entries (from `first` on, in the
 * order append_runtime declared them). */
static void bind_runtime(frt_model *m, int first)
{
    if (m->arch->kind == FRT_ARCH_POLICY) {
        m->boundary = m->state[first].buf;
        m->episode = m->state[first + 1].buf;
        return;
    }
    m->tokens = m->state[first].buf;
    m->boundary = m->state[first + 1].buf;
    m->logits = m->state[first + 2].buf;
    m->counts = m->state[first + 3].buf;
    m->seen = m->state[first + 4].buf;
}

int frt_model_state_alloc(frt_model *m)
{
    frt_state_decl *decl = calloc(FRT_STATE_MAX, sizeof *decl);
    if (!decl) return frt_error(FRT_ERR_OUT_OF_MEMORY, "state: out of memory for the table");
    int n = m->arch->declare_state(m, decl, FRT_STATE_MAX - N_RUNTIME);
    if (n < 0) {
        free(decl);
        return n;
    }
    const int first = n;
    n = append_runtime(m, decl, n);
    m->state = calloc((size_t)n, sizeof *m->state);
    if (!m->state) {
        free(decl);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "state: out of memory for the table");
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        for (int j = 0; j < i && rc == 0; j++)
            if (!strcmp(decl[j].name, decl[i].name))
                rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "state: two entries named '%s'", decl[i].name);
        if (rc == 0) rc = check_decl(m, &decl[i]);
        if (rc < 0) break;
        frt_state_entry *e = &m->state[i];
        e->decl = decl[i];
        e->bytes = decl_elems(decl[i].ndim, decl[i].shape) * frt_dtype_size(decl[i].dtype);
        e->row_bytes = decl[i].validity == FRT_STATE_ROWS ? e->bytes / (size_t)m->max_seq : e->bytes;
        rc = alloc_zeroed(m, decl[i].name, e->bytes, &e->buf);
        if (rc == 0) m->n_state = i + 1;
    }
    free(decl);
    FRT_TRY(rc);
    bind_runtime(m, first);
    return m->arch->kind == FRT_ARCH_POLICY ? alloc_declared_ports(m) : alloc_ports(m);
}

/* The ports a policy architecture declares, each in device memory,
 * zero-filled. */
static int alloc_declared_ports(frt_model *m)
{
    frt_io_decl decl[32];
    int n = m->arch->declare_io(m, decl, 32);
    if (n < 0) return n;
    m->io = calloc((size_t)n, sizeof *m->io);
    if (!m->io) return frt_error(FRT_ERR_OUT_OF_MEMORY, "state: out of memory for the ports");
    for (int i = 0; i < n; i++) {
        frt_io_entry *e = &m->io[i];
        e->decl = decl[i];
        e->bytes = decl_elems(decl[i].ndim, decl[i].shape) * frt_dtype_size(decl[i].dtype);
        FRT_TRY(alloc_zeroed(m, decl[i].name, e->bytes, &e->buf));
        m->n_io = i + 1;
    }
    return 0;
}

/* The allowed-token mask (frt_model_set_token_mask): an input port, not a
 * state entry. It is a per-step input like `ids`: the caller (a grammar)
 * derives it from its own state before each sampling step, and a
 * continuation from a boundary samples with whatever mask its caller sets
 * then, so capsules need not carry it (and a restore leaves it as set). */
static int alloc_mask_port(frt_model *m)
{
    frt_io_entry *mk = &m->io[m->n_io];
    snprintf(mk->decl.name, sizeof mk->decl.name, "token_mask");
    mk->decl.dir = FRT_IO_INPUT;
    mk->decl.dtype = FRT_DT_U32;
    mk->decl.ndim = 1;
    mk->decl.shape[0] = ((int64_t)m->cfg.vocab_size + 31) / 32;
    mk->bytes = (size_t)mk->decl.shape[0] * sizeof(uint32_t);
    mk->api_only = 1;
    FRT_TRY(alloc_zeroed(m, "token_mask", mk->bytes, &mk->buf));
    m->in_mask = mk->buf;
    m->n_io++;
    return 0;
}

/* The ports of a token model: the prefill piece and the allowed-token mask
 * in, the logits and the last sampling step's logprobs out. */
static int alloc_ports(frt_model *m)
{
    m->io = calloc(4, sizeof *m->io);
    if (!m->io) return frt_error(FRT_ERR_OUT_OF_MEMORY, "state: out of memory for the ports");
    frt_io_entry *ids = &m->io[0], *logits = &m->io[1];
    snprintf(ids->decl.name, sizeof ids->decl.name, "ids");
    ids->decl.dir = FRT_IO_INPUT;
    ids->decl.dtype = FRT_DT_I32;
    ids->decl.ndim = 1;
    ids->decl.shape[0] = (int64_t)m->C * m->G; /* a group of G pieces at most (m->G 1: one piece) */
    ids->bytes = (size_t)m->C * (size_t)m->G * sizeof(int32_t);
    FRT_TRY(alloc_zeroed(m, "ids", ids->bytes, &ids->buf));
    m->n_io = 1;
    m->in_ids = ids->buf;
    snprintf(logits->decl.name, sizeof logits->decl.name, "logits");
    logits->decl.dir = FRT_IO_OUTPUT;
    logits->decl.dtype = FRT_DT_F32;
    logits->decl.ndim = 1;
    logits->decl.shape[0] = m->cfg.vocab_size;
    logits->bytes = (size_t)m->cfg.vocab_size * sizeof(float);
    logits->buf = m->logits;
    logits->in_state = 1;
    m->n_io = 2;
    frt_io_entry *lp = &m->io[2];
    snprintf(lp->decl.name, sizeof lp->decl.name, "logprobs");
    lp->decl.dir = FRT_IO_OUTPUT;
    lp->decl.dtype = FRT_DT_U8;
    lp->decl.ndim = 1;
    lp->decl.shape[0] = sizeof(frt_logprobs);
    lp->bytes = sizeof(frt_logprobs);
    FRT_TRY(alloc_zeroed(m, "logprobs", lp->bytes, &lp->buf));
    m->n_io = 3;
    m->out_logprobs = lp->buf;
    return alloc_mask_port(m);
}

void frt_model_state_free(frt_model *m)
{
    for (int i = 0; i < m->n_state; i++) frt_buffer_free(m->state[i].buf);
    for (int i = 0; i < m->n_io; i++)
        if (!m->io[i].in_state) frt_buffer_free(m->io[i].buf);
    free(m->state);
    free(m->io);
    m->state = NULL;
    m->io = NULL;
    m->n_state = m->n_io = 0;
}

size_t frt_model_state_valid_bytes(const frt_model *m, int i, int pos)
{
    const frt_state_entry *e = &m->state[i];
    return e->decl.validity == FRT_STATE_ROWS ? e->row_bytes * (size_t)pos : e->bytes;
}

int frt_model_state_zero_recurrent(frt_model *m)
{
    for (int i = 0; i < m->n_state; i++)
        if (m->state[i].decl.recurrent) FRT_TRY(frt_buffer_fill(m->state[i].buf, 0, m->state[i].bytes, 0, m->stream));
    return 0;
}

frt_io_entry *frt_model_io_find(frt_model *m, const char *name, frt_io_dir dir)
{
    for (int i = 0; i < m->n_io; i++)
        if (m->io[i].decl.dir == dir && !strcmp(m->io[i].decl.name, name)) return &m->io[i];
    return NULL;
}

/* ---- the public introspection and port API --------------------------------- */

int frt_model_state_info(const frt_model *m, int i, frt_state_info *out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "state: NULL argument");
    if (i < 0 || i >= m->n_state) return frt_error(FRT_ERR_OUT_OF_RANGE, "state: entry %d of %d", i, m->n_state);
    const frt_state_entry *e = &m->state[i];
    memset(out, 0, sizeof *out);
    out->name = e->decl.name;
    out->dtype = frt_dtype_name(e->decl.dtype);
    out->ndim = e->decl.ndim;
    memcpy(out->shape, e->decl.shape, sizeof out->shape);
    out->validity = e->decl.validity;
    out->bytes = e->bytes;
    out->row_bytes = e->row_bytes;
    out->recurrent = e->decl.recurrent;
    return 0;
}

int frt_model_io_info(const frt_model *m, int i, frt_io_info *out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "io: NULL argument");
    if (i < 0 || i >= m->n_io) return frt_error(FRT_ERR_OUT_OF_RANGE, "io: port %d of %d", i, m->n_io);
    const frt_io_entry *e = &m->io[i];
    memset(out, 0, sizeof *out);
    out->name = e->decl.name;
    out->dir = e->decl.dir;
    out->dtype = frt_dtype_name(e->decl.dtype);
    out->ndim = e->decl.ndim;
    memcpy(out->shape, e->decl.shape, sizeof out->shape);
    out->bytes = e->bytes;
    out->in_state = e->in_state;
    return 0;
}

static int port_for(frt_model *m, const char *name, frt_io_dir dir, size_t bytes, frt_io_entry **out)
{
    frt_io_entry *e = frt_model_io_find(m, name, dir);
    if (!e)
        return frt_error(FRT_ERR_NOT_FOUND, "io: no %s port named '%s'", dir == FRT_IO_INPUT ? "input" : "output",
                         name);
    if (bytes > e->bytes)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "io: %zu bytes for port '%s' of %zu bytes", bytes, name, e->bytes);
    *out = e;
    return 0;
}

int frt_model_input_write(frt_model *m, const char *name, const void *data, size_t bytes)
{
    if (!m || !name || (!data && bytes)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "io: NULL argument");
    frt_io_entry *e = NULL;
    FRT_TRY(port_for(m, name, FRT_IO_INPUT, bytes, &e));
    if (e->api_only)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "io: port '%s' is written by frt_model_set_token_mask", name);
    if (!bytes) return 0;
    FRT_TRY(frt_buffer_write(e->buf, 0, data, bytes, m->stream));
    return frt_stream_sync(m->stream);
}

int frt_model_output_read(frt_model *m, const char *name, void *out, size_t bytes)
{
    if (!m || !name || (!out && bytes)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "io: NULL argument");
    frt_io_entry *e = NULL;
    FRT_TRY(port_for(m, name, FRT_IO_OUTPUT, bytes, &e));
    if (!bytes) return 0;
    FRT_TRY(frt_buffer_read(e->buf, 0, out, bytes, m->stream));
    return frt_stream_sync(m->stream);
}

/* ---- the pipelined restore's stream and events ------------------------ */

int frt_model_restore_pipe_alloc(frt_model *m)
{
    if (!m->bk->layer_waits || !m->arch->state_layer || m->arch->kind != FRT_ARCH_TOKEN) return 0;
    const int L = m->cfg.n_layers;
    m->entry_layer = malloc((size_t)m->n_state * sizeof *m->entry_layer);
    m->layer_ready = calloc((size_t)L, sizeof *m->layer_ready);
    if (!m->entry_layer || !m->layer_ready) return frt_error(FRT_ERR_OUT_OF_MEMORY, "state: out of memory");
    for (int i = 0; i < m->n_state; i++) {
        const int l = m->arch->state_layer(m, i);
        if (l < -1 || l >= L)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "state: entry '%s' in layer %d of %d", m->state[i].decl.name,
                             l, L);
        m->entry_layer[i] = l;
    }
    for (int l = 0; l < L; l++) FRT_TRY(frt_event_create(m->ctx, &m->layer_ready[l]));
    FRT_TRY(frt_event_create(m->ctx, &m->restore_start));
    return frt_stream_create(m->ctx, 0, &m->copy_stream);
}

void frt_model_restore_pipe_free(frt_model *m)
{
    frt_stream_destroy(m->copy_stream); /* waits for its copies */
    m->copy_stream = NULL;
    if (m->layer_ready)
        for (int l = 0; l < m->cfg.n_layers; l++) frt_event_destroy(m->layer_ready[l]);
    frt_event_destroy(m->restore_start);
    free(m->layer_ready);
    free(m->entry_layer);
    m->layer_ready = NULL;
    m->restore_start = NULL;
    m->entry_layer = NULL;
}

int frt_model_copy_layers(frt_model *m, const frt_copy *copies, const int *layer, int n)
{
    /* the copy stream starts after everything enqueued on m->stream so far */
    FRT_TRY(frt_event_record(m->restore_start, m->stream));
    FRT_TRY(frt_stream_wait_event(m->copy_stream, m->restore_start));
    frt_copy batch[FRT_STATE_MAX];
    int rc = 0;
    for (int l = 0; l < m->cfg.n_layers && rc == 0; l++) {
        int k = 0;
        for (int i = 0; i < n && k < FRT_STATE_MAX; i++)
            if (layer[i] == l) batch[k++] = copies[i];
        rc = frt_buffer_copy_batch_ex(batch, k, m->copy_stream, FRT_COPY_OVERLAP);
        if (rc == 0) rc = frt_event_record(m->layer_ready[l], m->copy_stream);
    }
    if (rc < 0) { /* nothing may still be copying when the error returns */
        (void)frt_stream_sync(m->copy_stream);
        return rc;
    }
    FRT_TRY(frt_stream_defer_wait(m->stream, m->layer_ready[m->cfg.n_layers - 1]));
    m->restore_pending = 1;
    return 0;
}

void frt_model_copy_source_free(frt_context *ctx, frt_buffer **buf, int *reads_pending)
{
    if (*reads_pending) (void)frt_context_sync(ctx);
    *reads_pending = 0;
    frt_buffer_free(*buf);
    *buf = NULL;
}

int frt_state_layer_pairs(const frt_model *m, int entry) { return entry < 2 * m->cfg.n_layers ? entry / 2 : -1; }

int frt_model_layer_waits(const frt_model *m, int rows) { return m->layer_ready && rows < m->C; }

int frt_model_layer_wait(frt_stream *s, const frt_model *m, int layer, int rows)
{
    if (!frt_model_layer_waits(m, rows)) return 0;
    return frt_stream_wait_event(s, m->layer_ready[layer]);
}
