/*
 * cartridge_inject.c - KV prefixes into the live state (frt/cartridge.h):
 * frt_model_inject_kv from host memory, and the resident form
 * (frt_model_kv_upload, frt_kv_resident_move, frt_model_inject_kv_resident)
 * that the server keeps in device memory under its residency budget.
 *
 * One path for both: a prefix is checked, converted to the backend's KV
 * dtype on the host (so every check and the conversion happen before the
 * first byte of the live state is written) and held as one buffer
 * [L][K, V][T * H * D]; injection is one batched copy from that buffer into
 * the KV rows. For frt_model_inject_kv the buffer is the host staging copy
 * itself (FRT_SPACE_HOST: the copy is the host -> device transfer); for an
 * upload it is a device buffer (the copy is device -> device) or a pinned
 * host buffer (a host-resident prefix: promoted by one DMA).
 */
#include "model/cartridge_internal.h"
#include "model/model_internal.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct frt_kv_resident {
    const frt_model *m;  /* the model it was made for (its context, its KV layout) */
    frt_buffer *kv;      /* [n_layers][K, V][half bytes] in the backend's KV dtype */
    unsigned char *host; /* the staging memory kv wraps (HOST space), else NULL */
    size_t half;         /* bytes of one layer's K (or V) */
    int n_layers, tokens;
    int32_t *journal;    /* [tokens]: the ids, or -1 where unknown */
    int reads_pending;   /* a pipelined injection's copies may still read kv (kv_release) */
};

/* Frees r->kv once no pipelined injection can still read it. */
static void kv_release(frt_kv_resident *r) { frt_model_copy_source_free(r->m->ctx, &r->kv, &r->reads_pending); }

int frt_kv_prefix_supported(const frt_model *m)
{
    if (!m->arch->kv_layer)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "inject_kv: architecture '%s' keeps state that is not a KV cache (recurrent layers): "
                         "KV injection is not supported",
                         m->arch->name);
    for (int i = 0; i < m->n_state; i++)
        if (m->state[i].decl.recurrent)
            return frt_error(FRT_ERR_UNSUPPORTED, "inject_kv: state entry '%s' is recurrent: not supported",
                             m->state[i].decl.name);
    if (m->kv_dtype != m->bk->kv_dtype)
        return frt_error(FRT_ERR_UNSUPPORTED, "inject_kv: KV prefixes with an fp8 KV cache are not supported yet "
                                              "(docs/fp8.md)");
    return 0;
}

static int check_prefix(const frt_model *m, const frt_kv_prefix *p)
{
    const frt_model_config *c = &m->cfg;
    if (p->n_layers != c->n_layers || p->n_kv_heads != c->n_kv_heads || p->head_dim != c->head_dim)
        return frt_error(FRT_ERR_MISMATCH,
                         "inject_kv: the prefix has %d layers x %d KV heads x head_dim %d, the model %d x %d x %d",
                         p->n_layers, p->n_kv_heads, p->head_dim, c->n_layers, c->n_kv_heads, c->head_dim);
    if (p->tokens < 1 || p->tokens > m->max_seq)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "inject_kv: %d tokens (1 to max_seq %d)", p->tokens, m->max_seq);
    if (p->dtype != FRT_DT_BF16 && p->dtype != FRT_DT_F16 && p->dtype != FRT_DT_F32)
        return frt_error(FRT_ERR_UNSUPPORTED, "inject_kv: dtype %s (bf16, f16 or f32)", frt_dtype_name(p->dtype));
    if (!p->k || !p->v) return frt_error(FRT_ERR_INVALID_ARGUMENT, "inject_kv: NULL layer arrays");
    for (int l = 0; l < p->n_layers; l++)
        if (!p->k[l] || !p->v[l]) return frt_error(FRT_ERR_INVALID_ARGUMENT, "inject_kv: layer %d has no data", l);
    for (int i = 0; p->ids && i < p->tokens; i++)
        if (p->ids[i] < 0 || p->ids[i] >= c->vocab_size)
            return frt_error(FRT_ERR_OUT_OF_RANGE, "inject_kv: token %d at %d is outside the vocabulary", p->ids[i], i);
    return 0;
}

/* n elements of src (dtype sdt) into dst as dtype ddt. */
static int convert(void *dst, frt_dtype ddt, const void *src, frt_dtype sdt, size_t n, float *tmp)
{
    if (ddt == sdt) {
        memcpy(dst, src, n * frt_dtype_size(sdt));
        return 0;
    }
    frt_tensor t = {.name = "kv", .dtype = sdt, .ndim = 1, .shape = {(int64_t)n}, .data = src,
                    .nbytes = n * frt_dtype_size(sdt)};
    FRT_TRY(frt_tensor_to_f32(&t, tmp));
    return frt_f32_convert(dst, ddt, tmp, n);
}

/* Every layer's K and V in the backend's dtype into dst: [L][2][T * H * D]. */
static int stage(const frt_model *m, const frt_kv_prefix *p, unsigned char *dst, size_t half)
{
    const size_t n = (size_t)p->tokens * (size_t)p->n_kv_heads * (size_t)p->head_dim;
    const frt_dtype kdt = m->bk->kv_dtype;
    float *tmp = kdt == p->dtype ? NULL : malloc(n * sizeof *tmp);
    if (kdt != p->dtype && !tmp) return frt_error(FRT_ERR_OUT_OF_MEMORY, "inject_kv: out of memory");
    int rc = 0;
    for (int l = 0; l < p->n_layers && rc == 0; l++) {
        rc = convert(dst + (2 * (size_t)l) * half, kdt, p->k[l], p->dtype, n, tmp);
        if (rc == 0) rc = convert(dst + (2 * (size_t)l + 1) * half, kdt, p->v[l], p->dtype, n, tmp);
    }
    free(tmp);
    return rc;
}

/* r->kv in space holding p: HOST wraps plain staging memory (no second
 * copy); PINNED_HOST is staged into directly; DEVICE is staged in pinned
 * memory and uploaded (one DMA at the pinned rate). */
static int place(frt_model *m, const frt_kv_prefix *p, frt_kv_resident *r, frt_space space)
{
    const size_t bytes = r->half * 2 * (size_t)r->n_layers;
    if (space == FRT_SPACE_HOST) {
        if (!(r->host = malloc(bytes)))
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "inject_kv: out of memory staging %zu bytes", bytes);
        FRT_TRY(stage(m, p, r->host, r->half));
        return frt_buffer_wrap(m->ctx, "kv_prefix", FRT_SPACE_HOST, r->host, bytes, &r->kv);
    }
    frt_buffer *pinned = NULL;
    FRT_TRY(frt_buffer_alloc(m->ctx, "kv_prefix_staging", FRT_SPACE_PINNED_HOST, bytes, &pinned));
    int rc = stage(m, p, frt_buffer_ptr(pinned), r->half);
    if (rc == 0 && space == FRT_SPACE_PINNED_HOST) {
        r->kv = pinned;
        return 0;
    }
    if (rc == 0) rc = frt_buffer_alloc(m->ctx, "kv_prefix", space, bytes, &r->kv);
    if (rc == 0) rc = frt_buffer_copy(r->kv, 0, pinned, 0, bytes, m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream);
    frt_buffer_free(pinned);
    return rc;
}

int frt_kv_resident_make(frt_model *m, const frt_kv_prefix *p, frt_space space, frt_kv_resident **out)
{
    if (!m || !p || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "inject_kv: NULL argument");
    *out = NULL;
    FRT_TRY(frt_kv_prefix_supported(m));
    FRT_TRY(check_prefix(m, p));
    frt_kv_resident *r = calloc(1, sizeof *r);
    if (!r) return frt_error(FRT_ERR_OUT_OF_MEMORY, "inject_kv: out of memory");
    r->m = m;
    r->n_layers = p->n_layers;
    r->tokens = p->tokens;
    int rc = (r->journal = malloc((size_t)p->tokens * sizeof *r->journal))
                 ? 0
                 : frt_error(FRT_ERR_OUT_OF_MEMORY, "inject_kv: out of memory");
    for (int i = 0; rc == 0 && i < p->tokens; i++) r->journal[i] = p->ids ? p->ids[i] : -1;
    r->half = (size_t)p->tokens * (size_t)p->n_kv_heads * (size_t)p->head_dim * frt_dtype_size(m->bk->kv_dtype);
    if (rc == 0) rc = place(m, p, r, space);
    if (rc < 0) {
        frt_kv_resident_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int frt_model_kv_upload(frt_model *m, const frt_kv_prefix *p, frt_space space, frt_kv_resident **out)
{
    if (space != FRT_SPACE_DEVICE && space != FRT_SPACE_PINNED_HOST) {
        if (out) *out = NULL;
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "kv_upload: space %d (device or pinned host)", (int)space);
    }
    return frt_kv_resident_make(m, p, space, out);
}

int frt_kv_resident_move(frt_model *m, frt_kv_resident *r, frt_space space)
{
    if (!m || !r) return frt_error(FRT_ERR_INVALID_ARGUMENT, "kv_resident_move: NULL argument");
    if (r->m != m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "kv_resident_move: the prefix belongs to another model");
    if (space != FRT_SPACE_DEVICE && space != FRT_SPACE_PINNED_HOST)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "kv_resident_move: space %d (device or pinned host)", (int)space);
    if (frt_buffer_space(r->kv) == space) return 0;
    frt_buffer *to = NULL;
    const size_t bytes = frt_buffer_size(r->kv);
    FRT_TRY(frt_buffer_alloc(m->ctx, "kv_prefix", space, bytes, &to));
    int rc = frt_buffer_copy(to, 0, r->kv, 0, bytes, m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream);
    if (rc) {
        frt_buffer_free(to);
        return rc;
    }
    kv_release(r);
    free(r->host);
    r->host = NULL;
    r->kv = to;
    return 0;
}

frt_space frt_kv_resident_space(const frt_kv_resident *r) { return r ? frt_buffer_space(r->kv) : FRT_SPACE_HOST; }

/* The rows (one batched copy), the journal and the boundary. From pinned
 * host memory into a model with pipelined restores the rows land beside the
 * next append, as a host-tier capsule's do (frt_model_copy_layers; docs/
 * model.md "The pipelined restore"): the journal and the boundary first. */
static int write_state(frt_model *m, frt_kv_resident *r)
{
    const int piped = m->layer_ready && frt_buffer_space(r->kv) == FRT_SPACE_PINNED_HOST;
    frt_copy *cp = malloc(2 * (size_t)r->n_layers * sizeof *cp);
    int *layer = malloc(2 * (size_t)r->n_layers * sizeof *layer);
    int rc = cp && layer ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "inject_kv: out of memory");
    for (int l = 0; l < r->n_layers && rc == 0; l++) {
        int ki = 0, vi = 0;
        rc = m->arch->kv_layer(m, l, &ki, &vi);
        cp[2 * l] = (frt_copy){m->state[ki].buf, 0, r->kv, (2 * (size_t)l) * r->half, r->half};
        cp[2 * l + 1] = (frt_copy){m->state[vi].buf, 0, r->kv, (2 * (size_t)l + 1) * r->half, r->half};
        layer[2 * l] = layer[2 * l + 1] = l;
    }
    if (rc == 0 && !piped) rc = frt_buffer_copy_batch(cp, 2 * r->n_layers, m->stream);
    if (rc == 0) rc = frt_buffer_write(m->tokens, 0, r->journal, (size_t)r->tokens * sizeof *r->journal, m->stream);
    frt_boundary b;
    if (rc == 0) rc = frt_model_boundary_read(m, &b);
    if (rc == 0) {
        b.pos = r->tokens;
        b.pending = -1;
        b.has_logits = 0;
        rc = frt_buffer_write(m->boundary, 0, &b, sizeof b, m->stream);
    }
    if (rc == 0) rc = frt_stream_sync(m->stream);
    if (rc == 0 && piped) {
        r->reads_pending = 1;
        rc = frt_model_copy_layers(m, cp, layer, 2 * r->n_layers);
    }
    free(cp);
    free(layer);
    return rc;
}

int frt_model_inject_kv_resident(frt_model *m, const frt_kv_resident *r)
{
    if (!m || !r) return frt_error(FRT_ERR_INVALID_ARGUMENT, "inject_kv: NULL argument");
    if (r->m != m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "inject_kv: the resident prefix belongs to another model");
    m->live_capsule = 0; /* the KV rows no longer descend from any capsule */
    int rc = frt_model_rows_rewritten(m);
    if (rc == 0) rc = write_state(m, (frt_kv_resident *)r); /* a pipelined copy marks reads_pending */
    if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", frt_last_error());
        frt_model_reset(m);
        return frt_error(rc, "inject_kv: %s (the model was reset)", msg);
    }
    return 0;
}

int frt_model_inject_kv(frt_model *m, const frt_kv_prefix *p)
{
    frt_kv_resident *r = NULL;
    FRT_TRY(frt_kv_resident_make(m, p, FRT_SPACE_HOST, &r));
    int rc = frt_model_inject_kv_resident(m, r);
    frt_kv_resident_free(r);
    return rc;
}

size_t frt_kv_resident_bytes(const frt_kv_resident *r) { return r ? r->half * 2 * (size_t)r->n_layers : 0; }

int frt_kv_resident_tokens(const frt_kv_resident *r) { return r ? r->tokens : 0; }

void frt_kv_resident_free(frt_kv_resident *r)
{
    if (!r) return;
    kv_release(r);
    free(r->host);
    free(r->journal);
    free(r);
}
