/*
 * cartridge.c - the binding fingerprint, cartridges in memory: export
 * from the live state, metadata, views, injection and upload with the
 * binding check (frt/cartridge.h). The copy into the live state is
 * cartridge_inject.c.
 */
#include "model/cartridge_internal.h"
#include "model/model_internal.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- the binding fingerprint ----------------------------------------------- */

uint64_t frt_cartridge_model_fingerprint(const frt_model *m)
{
    if (!m) return 0;
    char s[1024];
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0);
    int n = snprintf(s, sizeof s, "frt-cartridge-v1|%s|%s|weights=%016llx|", m->arch->name, m->cfg.model_type,
                     (unsigned long long)m->weights_hash);
    XXH64_update(h, s, (size_t)(n < (int)sizeof s ? n : (int)sizeof s - 1));
    n = m->arch->describe(&m->cfg, s, sizeof s);
    XXH64_update(h, s, (size_t)(n < (int)sizeof s ? n : (int)sizeof s - 1));
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d ? d : 1; /* 0 means unbound */
}

/* ---- cartridges in memory -------------------------------------------------- */

int frt_cartridge_alloc(int n_layers, int n_kv_heads, int head_dim, int tokens, frt_dtype dt, frt_cartridge **out)
{
    *out = NULL;
    if (n_layers < 1 || n_kv_heads < 1 || head_dim < 1 || tokens < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: shape %d layers x %d heads x %d x %d tokens",
                         n_layers, n_kv_heads, head_dim, tokens);
    if (dt != FRT_DT_BF16 && dt != FRT_DT_F16 && dt != FRT_DT_F32)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: dtype %s (bf16, f16 or f32)", frt_dtype_name(dt));
    unsigned __int128 half = (unsigned __int128)tokens * (unsigned)n_kv_heads * (unsigned)head_dim * frt_dtype_size(dt);
    if (half * 2 * (unsigned)n_layers > ((unsigned __int128)1 << 40))
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cartridge: more than 1 TiB of KV");
    frt_cartridge *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    c->half_bytes = (size_t)half;
    c->data = calloc(2 * (size_t)n_layers, c->half_bytes);
    if (!c->data) {
        free(c);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory for %zu bytes of KV",
                         2 * (size_t)n_layers * (size_t)half);
    }
    c->info.n_layers = n_layers;
    c->info.n_kv_heads = n_kv_heads;
    c->info.head_dim = head_dim;
    c->info.tokens = tokens;
    c->info.dtype = dt;
    c->info.training_steps = -1;
    *out = c;
    return 0;
}

unsigned char *frt_cartridge_half(frt_cartridge *c, int layer, int kv)
{
    return c->data + (2 * (size_t)layer + (size_t)kv) * c->half_bytes;
}

int frt_cartridge_id_ok(const char *id)
{
    if (!id) return 0;
    size_t n = strlen(id);
    if (n < 1 || n >= FRT_CARTRIDGE_ID_MAX || !strcmp(id, ".") || !strcmp(id, "..")) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = id[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

int frt_cartridge_from_model(frt_model *m, frt_cartridge **out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *out = NULL;
    FRT_TRY(frt_kv_prefix_supported(m));
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    if (b.pos < 1) return frt_error(FRT_ERR_STATE, "cartridge: the live state is empty (position 0)");
    frt_cartridge *c = NULL;
    FRT_TRY(frt_cartridge_alloc(m->cfg.n_layers, m->cfg.n_kv_heads, m->cfg.head_dim, b.pos, m->bk->kv_dtype, &c));
    c->ids = malloc((size_t)b.pos * sizeof *c->ids);
    int rc = c->ids ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    for (int l = 0; l < m->cfg.n_layers && rc == 0; l++) {
        int ki = 0, vi = 0;
        rc = m->arch->kv_layer(m, l, &ki, &vi);
        if (rc == 0) rc = frt_buffer_read(m->state[ki].buf, 0, frt_cartridge_half(c, l, 0), c->half_bytes, m->stream);
        if (rc == 0) rc = frt_buffer_read(m->state[vi].buf, 0, frt_cartridge_half(c, l, 1), c->half_bytes, m->stream);
    }
    if (rc == 0) rc = frt_buffer_read(m->tokens, 0, c->ids, (size_t)b.pos * sizeof *c->ids, m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream);
    if (rc < 0) {
        frt_cartridge_free(c);
        return rc;
    }
    c->info.model_fingerprint = frt_cartridge_model_fingerprint(m);
    *out = c;
    return 0;
}

static int copy_text(char *dst, size_t size, const char *src, const char *what)
{
    if (strlen(src) >= size)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: %s of %zu bytes (at most %zu)", what, strlen(src),
                         size - 1);
    snprintf(dst, size, "%s", src);
    return 0;
}

int frt_cartridge_set_meta(frt_cartridge *c, const frt_cartridge_meta *meta)
{
    if (!c || !meta) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    frt_cartridge_info in = c->info; /* all or nothing */
    /* -1 is "leave"; another negative value, or labels with n_labels -1, would be ignored */
    if (meta->training_steps < -1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: training_steps %lld (>= 0, or -1 to leave it)",
                         meta->training_steps);
    if (meta->n_labels < -1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: n_labels %d (0 to %d, or -1 to leave the labels)",
                         meta->n_labels, FRT_CARTRIDGE_MAX_LABELS);
    if (meta->n_labels == -1 && meta->labels)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: labels given with n_labels -1 (which leaves them): "
                                                   "set n_labels");
    if (meta->id && !frt_cartridge_id_ok(meta->id))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: id '%.*s' (1 to %d characters of A-Z a-z 0-9 . _ -)",
                         64, meta->id, FRT_CARTRIDGE_ID_MAX - 1);
    if (meta->id) FRT_TRY(copy_text(in.id, sizeof in.id, meta->id, "id"));
    if (meta->model_id) FRT_TRY(copy_text(in.model_id, sizeof in.model_id, meta->model_id, "model id"));
    if (meta->source_document)
        FRT_TRY(copy_text(in.source_document, sizeof in.source_document, meta->source_document, "source document"));
    if (meta->model_fingerprint) in.model_fingerprint = meta->model_fingerprint;
    if (meta->training_steps >= 0) in.training_steps = meta->training_steps;
    if (meta->n_labels >= 0) {
        if (meta->n_labels > FRT_CARTRIDGE_MAX_LABELS || (meta->n_labels && !meta->labels))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: %d labels (at most %d)", meta->n_labels,
                             FRT_CARTRIDGE_MAX_LABELS);
        for (int i = 0; i < meta->n_labels; i++) {
            if (!meta->labels[i] || !meta->labels[i][0])
                return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: label %d is empty", i);
            FRT_TRY(copy_text(in.labels[i], sizeof in.labels[i], meta->labels[i], "label"));
        }
        in.n_labels = meta->n_labels;
    }
    c->info = in;
    return 0;
}

int frt_cartridge_info_get(const frt_cartridge *c, frt_cartridge_info *out)
{
    if (!c || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *out = c->info;
    return 0;
}

int frt_cartridge_layer(const frt_cartridge *c, int layer, frt_tensor *k, frt_tensor *v)
{
    if (!c || !k || !v) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    if (layer < 0 || layer >= c->info.n_layers)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cartridge: layer %d of %d", layer, c->info.n_layers);
    for (int kv = 0; kv < 2; kv++) {
        frt_tensor *t = kv ? v : k;
        memset(t, 0, sizeof *t);
        t->name = kv ? "v" : "k";
        t->dtype = c->info.dtype;
        t->ndim = 3;
        t->shape[0] = c->info.tokens;
        t->shape[1] = c->info.n_kv_heads;
        t->shape[2] = c->info.head_dim;
        t->data = frt_cartridge_half((frt_cartridge *)c, layer, kv);
        t->nbytes = c->half_bytes;
    }
    return 0;
}

int frt_cartridge_starts_with(const frt_cartridge *c, const int32_t **ids, int *n)
{
    if (!c || !ids || !n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *ids = c->info.n_starts_with ? c->start : NULL;
    *n = c->info.n_starts_with;
    return 0;
}

int frt_cartridge_token_ids(const frt_cartridge *c, const int32_t **ids)
{
    if (!c || !ids) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *ids = c->ids;
    return 0;
}

int frt_cartridge_set_starts_with(frt_cartridge *c, const int32_t *ids, int n)
{
    if (!c || (n > 0 && !ids)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    if (n < 0 || n > c->info.tokens || n > FRT_CARTRIDGE_STARTS_MAX)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cartridge: a start of %d tokens (0 to %d, at most its %d tokens)", n,
                         FRT_CARTRIDGE_STARTS_MAX, c->info.tokens);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: start token %d is %d", i, ids[i]);
        if (c->ids && c->ids[i] != ids[i])
            return frt_error(FRT_ERR_MISMATCH,
                             "cartridge: the stated start does not match its tokens: token %d is %d, row %d holds %d",
                             i, ids[i], i, c->ids[i]);
    }
    int32_t *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
    if (n && !copy) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    if (n) memcpy(copy, ids, (size_t)n * sizeof *copy);
    free(c->start);
    c->start = copy;
    c->info.n_starts_with = n;
    return 0;
}

int frt_cartridge_supported(const frt_model *m)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL model");
    return frt_kv_prefix_supported(m);
}

int frt_cartridge_check(const frt_model *m, const frt_cartridge *c)
{
    if (!m || !c) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    FRT_TRY(frt_kv_prefix_supported(m));
    uint64_t fp = frt_cartridge_model_fingerprint(m);
    if (c->info.model_fingerprint && c->info.model_fingerprint != fp)
        return frt_error(FRT_ERR_MISMATCH,
                         "cartridge '%s': made for model '%s' (fingerprint %016llx), this model is %016llx",
                         c->info.id, c->info.model_id, (unsigned long long)c->info.model_fingerprint,
                         (unsigned long long)fp);
    const frt_model_config *g = &m->cfg;
    if (c->info.n_layers != g->n_layers || c->info.n_kv_heads != g->n_kv_heads || c->info.head_dim != g->head_dim)
        return frt_error(FRT_ERR_MISMATCH,
                         "cartridge '%s': %d layers x %d KV heads x head_dim %d, the model %d x %d x %d", c->info.id,
                         c->info.n_layers, c->info.n_kv_heads, c->info.head_dim, g->n_layers, g->n_kv_heads,
                         g->head_dim);
    for (int i = 0; i < c->info.n_starts_with; i++)
        if (c->start[i] >= g->vocab_size)
            return frt_error(FRT_ERR_OUT_OF_RANGE, "cartridge '%s': starts_with token %d is outside the vocabulary (%d)",
                             c->info.id, c->start[i], g->vocab_size);
    return 0;
}

/* c's payload as a KV prefix (ptr: 2 * n_layers pointers, malloc'd). */
static int as_prefix(const frt_cartridge *c, frt_kv_prefix *p, const void ***ptr)
{
    const int L = c->info.n_layers;
    const void **v = malloc(2 * (size_t)L * sizeof *v);
    if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    for (int l = 0; l < L; l++) {
        v[l] = frt_cartridge_half((frt_cartridge *)c, l, 0);
        v[L + l] = frt_cartridge_half((frt_cartridge *)c, l, 1);
    }
    *p = (frt_kv_prefix){.n_layers = L, .n_kv_heads = c->info.n_kv_heads, .head_dim = c->info.head_dim,
                         .tokens = c->info.tokens, .dtype = c->info.dtype, .k = v, .v = v + L, .ids = c->ids};
    *ptr = v;
    return 0;
}

/* c, checked against m, as a resident prefix in space. */
static int cart_resident(frt_model *m, const frt_cartridge *c, frt_space space, frt_kv_resident **out)
{
    FRT_TRY(frt_cartridge_check(m, c));
    frt_kv_prefix p;
    const void **ptr = NULL;
    FRT_TRY(as_prefix(c, &p, &ptr));
    int rc = frt_kv_resident_make(m, &p, space, out);
    free(ptr);
    if (rc < 0 && c->info.id[0]) frt_error_prefix("cartridge '%s'", c->info.id);
    return rc;
}

size_t frt_cartridge_upload_bytes(const frt_model *m, const frt_cartridge *c)
{
    if (!m || !c) return 0;
    return 2 * (size_t)c->info.n_layers * (size_t)c->info.tokens * (size_t)c->info.n_kv_heads *
           (size_t)c->info.head_dim * frt_dtype_size(m->bk->kv_dtype);
}

int frt_cartridge_upload(frt_model *m, const frt_cartridge *c, frt_space space, frt_kv_resident **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *out = NULL;
    if (space != FRT_SPACE_DEVICE && space != FRT_SPACE_PINNED_HOST)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge upload: space %d (device or pinned host)", (int)space);
    return cart_resident(m, c, space, out);
}

int frt_cartridge_inject(frt_model *m, const frt_cartridge *c)
{
    frt_kv_resident *r = NULL;
    FRT_TRY(cart_resident(m, c, FRT_SPACE_HOST, &r));
    int rc = frt_model_inject_kv_resident(m, r);
    frt_kv_resident_free(r);
    if (rc < 0 && c->info.id[0]) frt_error_prefix("cartridge '%s'", c->info.id);
    return rc;
}

void frt_cartridge_free(frt_cartridge *c)
{
    if (!c) return;
    free(c->data);
    free(c->ids);
    free(c->start);
    free(c);
}
