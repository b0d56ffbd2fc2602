/*
 * model/kv_scales.c - static per-head scales of an FP8 KV cache
 * (frt/kv_scales.h, model/kv_scales.h, docs/fp8.md): the calibration pass
 * that writes a scales file, and the load of the scales at model load, from
 * such a file or from the checkpoint (compressed-tensors kv_cache_scheme:
 * one k_scale and one v_scale per attention layer, broadcast to its heads,
 * or one per KV head; per layer also under the older names
 * k_proj.output_scale / v_proj.output_scale or one kv_scale).
 */
#include "model/kv_scales.h"

#include "frt/kv_scales.h"
#include "kernels/cpu/fp8.h"
#include "model/model_internal.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define KV_SCALES_FORMAT "frt-kv-scales"

/* A KV entry of the state table: rows of [n_kv_heads, head_dim] of a float dtype. */
static int is_kv_entry(const frt_state_decl *d)
{
    return d->validity == FRT_STATE_ROWS && d->ndim == 3 && frt_dtype_is_float(d->dtype);
}

/* The index of want[] whose "<name>.scale" is `tensor`, or -1. */
static int want_of(const char *tensor, const frt_kv_scales_want *want, int n)
{
    for (int i = 0; i < n; i++) {
        size_t k = strlen(want[i].name);
        if (!strncmp(tensor, want[i].name, k) && !strcmp(tensor + k, ".scale")) return i;
    }
    return -1;
}

/* Checks the tensor of want w: F32 [heads], every value finite and > 0. */
static int check_one(const frt_safetensors *st, const frt_kv_scales_want *w)
{
    char name[FRT_STATE_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.scale", w->name);
    const frt_tensor *t = frt_safetensors_find(st, name);
    if (!t) return frt_error(FRT_ERR_FORMAT, "kv scales: no tensor '%s'", name);
    if (t->dtype != FRT_DT_F32 || t->ndim != 1 || t->shape[0] != w->heads)
        return frt_error(FRT_ERR_FORMAT, "kv scales: '%s' is %s with %d dims [%lld...], expected F32 [%d]", name,
                         frt_dtype_name(t->dtype), t->ndim, t->ndim ? (long long)t->shape[0] : 0LL, w->heads);
    for (int j = 0; j < w->heads; j++) {
        float v;
        memcpy(&v, (const char *)t->data + (size_t)j * sizeof v, sizeof v);
        if (!(isfinite(v) && v > 0))
            return frt_error(FRT_ERR_FORMAT, "kv scales: '%s'[%d] = %g (a scale is finite and > 0)", name, j,
                             (double)v);
    }
    return 0;
}

int frt_kv_scales_check(const frt_safetensors *st, const frt_kv_scales_want *want, int n, float *out)
{
    if (!st || !want || !out || n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "kv scales: NULL argument");
    const char *fmt = frt_safetensors_metadata(st, "format");
    if (!fmt || strcmp(fmt, KV_SCALES_FORMAT))
        return frt_error(FRT_ERR_FORMAT, "kv scales: __metadata__ \"format\" is '%s', not '" KV_SCALES_FORMAT "'",
                         fmt ? fmt : "(none)");
    for (int i = 0; i < frt_safetensors_count(st); i++) {
        const frt_tensor *t = frt_safetensors_at(st, i);
        if (want_of(t->name, want, n) < 0)
            return frt_error(FRT_ERR_FORMAT, "kv scales: unexpected tensor '%s' (not '<KV entry>.scale' of this "
                                             "model)", t->name);
    }
    for (int i = 0; i < n; i++) FRT_TRY(check_one(st, &want[i]));
    for (int i = 0; i < n; i++) { /* every check passed: copy */
        char name[FRT_STATE_NAME_MAX + 8];
        snprintf(name, sizeof name, "%s.scale", want[i].name);
        memcpy(out, frt_safetensors_find(st, name)->data, (size_t)want[i].heads * sizeof(float));
        out += want[i].heads;
    }
    return 0;
}

/* The F8_E4M3 rows entries of m as wants, their count in *n, their heads in
 * *heads; NULL (no error) when there are none. */
static frt_kv_scales_want *fp8_wants(const frt_model *m, int *n, int *heads)
{
    *n = *heads = 0;
    frt_kv_scales_want *w = calloc((size_t)m->n_state + 1, sizeof *w);
    if (!w) return NULL;
    for (int i = 0; i < m->n_state; i++) {
        const frt_state_decl *d = &m->state[i].decl;
        if (!is_kv_entry(d) || d->dtype != FRT_DT_F8_E4M3) continue;
        w[*n].name = d->name;
        w[*n].heads = (int)d->shape[1];
        *heads += w[(*n)++].heads;
    }
    return w;
}

/* The scales file at path checked against want [n], into out. */
static int read_file(const char *path, const frt_kv_scales_want *want, int n, float *out)
{
    frt_safetensors *st = NULL;
    int rc = frt_safetensors_open(path, &st);
    if (rc == 0) rc = frt_kv_scales_check(st, want, n, out);
    frt_safetensors_close(st);
    if (rc < 0) frt_error_prefix("kv scales %s", path);
    return rc;
}

/* The names a checkpoint gives layer L's K and V scales, after
 * "<weight_prefix>layers.L.self_attn.": compressed-tensors' k_scale /
 * v_scale (per tensor or per KV head), and two older per-tensor namings
 * vLLM still reads: k_proj.output_scale / v_proj.output_scale (older
 * compressed-tensors applied the kv_cache_scheme as output_activations of
 * k_proj and v_proj; vLLM's get_cache_scale) and one kv_scale for both K
 * and V (vLLM's maybe_remap_kv_scale_name, deprecated there). One layer
 * uses one naming. */
static const struct ckpt_naming {
    const char *k, *v;
} ckpt_namings[] = {
    {"k_scale", "v_scale"},
    {"k_proj.output_scale", "v_proj.output_scale"},
    {"kv_scale", "kv_scale"},
};
#define N_CKPT_NAMINGS ((int)(sizeof ckpt_namings / sizeof ckpt_namings[0]))
#define CKPT_NAME_MAX (FRT_STATE_NAME_MAX + 128)

int frt_kv_scales_ckpt_name(const char *prefix, const char *name)
{
    size_t p = strlen(prefix);
    int layer = -1, used = 0;
    if (strncmp(name, prefix, p) || sscanf(name + p, "layers.%d.self_attn.%n", &layer, &used) != 1 || !used ||
        layer < 0)
        return 0;
    for (int i = 0; i < N_CKPT_NAMINGS; i++)
        if (!strcmp(name + p + used, ckpt_namings[i].k) || !strcmp(name + p + used, ckpt_namings[i].v)) return 1;
    return 0;
}

/* State entry `entry` ("kv.L.k" / "kv.L.v") as its layer and kv (0 K, 1 V). */
static int entry_layer(const char *entry, int *layer, int *kv)
{
    int used = 0;
    char c = 0;
    if (sscanf(entry, "kv.%d.%c%n", layer, &c, &used) != 2 || entry[used] || *layer < 0 || (c != 'k' && c != 'v'))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "kv scales: state entry '%s' is not a layer's K or V: the checkpoint's KV scales "
                         "(kv_cache_scheme) cannot be mapped onto it",
                         entry);
    *kv = c == 'v';
    return 0;
}

/* The checkpoint name of layer's K (kv 0) or V scale under naming i. */
static void ckpt_scale_name(const frt_model *m, int layer, int i, int kv, char *out)
{
    snprintf(out, CKPT_NAME_MAX, "%slayers.%d.self_attn.%s", m->cfg.weight_prefix, layer,
             kv ? ckpt_namings[i].v : ckpt_namings[i].k);
}

/* The naming of layer's scales in the checkpoint into *naming (0 when it
 * holds none); FRT_ERR_FORMAT naming two tensors when it holds two. */
static int layer_naming(const frt_model *m, int layer, int *naming)
{
    char first[CKPT_NAME_MAX] = "", name[CKPT_NAME_MAX];
    *naming = 0;
    for (int i = 0; i < N_CKPT_NAMINGS; i++)
        for (int kv = 0; kv < 2; kv++) {
            ckpt_scale_name(m, layer, i, kv, name);
            if (!frt_checkpoint_find(m->ckpt, name)) continue;
            if (first[0])
                return frt_error(FRT_ERR_FORMAT,
                                 "kv scales: the checkpoint holds both '%s' and '%s' (one naming a layer: "
                                 "self_attn.k_scale / v_scale, or the older k_proj.output_scale / "
                                 "v_proj.output_scale, or kv_scale; docs/fp8.md)",
                                 first, name);
            snprintf(first, sizeof first, "%s", name);
            *naming = i;
            break;
        }
    return 0;
}

/* State entry `entry`'s scales from the checkpoint into out [heads]: F32
 * or BF16, [] or [1] (per_head 0: the one value on every head) or [heads]
 * (per_head 1: under the k_scale / v_scale names only), each finite and
 * > 0. */
static int ckpt_scale(const frt_model *m, const char *entry, int per_head, int heads, float *out)
{
    char name[CKPT_NAME_MAX];
    int layer = 0, kv = 0, naming = 0;
    FRT_TRY(entry_layer(entry, &layer, &kv));
    FRT_TRY(layer_naming(m, layer, &naming));
    ckpt_scale_name(m, layer, naming, kv, name);
    const frt_tensor *t = frt_checkpoint_find(m->ckpt, name);
    if (!t)
        return frt_error(FRT_ERR_FORMAT,
                         "kv scales: config.json declares a kv_cache_scheme but the checkpoint has no tensor '%s'%s",
                         name, naming || per_head ? "" : " (nor an older k_proj.output_scale / kv_scale)");
    if (naming && per_head)
        return frt_error(FRT_ERR_FORMAT,
                         "kv scales: '%s' is an older per-tensor scale name; kv_cache_scheme strategy attn_head "
                         "reads self_attn.k_scale / v_scale [n_kv_heads]",
                         name);
    const int n = per_head ? heads : 1;
    if ((t->dtype != FRT_DT_F32 && t->dtype != FRT_DT_BF16) || t->ndim > 1 || frt_tensor_numel(t) != n ||
        (per_head && t->ndim != 1))
        return frt_error(FRT_ERR_FORMAT,
                         "kv scales: '%s' is %s with %d dims [%lld...], expected F32 or BF16 %s (kv_cache_scheme "
                         "strategy %s)",
                         name, frt_dtype_name(t->dtype), t->ndim, t->ndim ? (long long)t->shape[0] : 0LL,
                         per_head ? "[n_kv_heads]" : "[] or [1]", per_head ? "attn_head" : "tensor");
    FRT_TRY(frt_tensor_to_f32(t, out));
    for (int j = 0; j < n; j++)
        if (!(isfinite(out[j]) && out[j] > 0))
            return frt_error(FRT_ERR_FORMAT, "kv scales: '%s'[%d] = %g (a scale is finite and > 0)", name, j,
                             (double)out[j]);
    for (int j = n; j < heads; j++) out[j] = out[0];
    return 0;
}

/* Every entry of want [n] gets its checkpoint scales: the layer's one on
 * each of its heads (strategy tensor), or one a head (attn_head). */
static int read_ckpt(const frt_model *m, const frt_kv_scales_want *want, int n, float *out)
{
    const int per_head = m->cfg.quant.kv == FRT_QUANT_KV_HEAD;
    for (int i = 0; i < n; i++) {
        FRT_TRY(ckpt_scale(m, want[i].name, per_head, want[i].heads, out));
        out += want[i].heads;
    }
    return 0;
}

int frt_model_kv_scales_load(frt_model *m)
{
    const char *path = m->params.kv_scales;
    if (path && m->kv_dtype != FRT_DT_F8_E4M3)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "model: kv_scales '%s' given without kv_dtype FRT_KV_FP8 (they scale an FP8 KV cache)", path);
    /* The checkpoint's scales scale an FP8 cache only; a file wins over them. */
    if (m->kv_dtype != FRT_DT_F8_E4M3 || (!path && m->cfg.quant.kv == FRT_QUANT_KV_NONE)) return 0;
    int n = 0, heads = 0;
    frt_kv_scales_want *want = fp8_wants(m, &n, &heads);
    float **per = calloc((size_t)m->n_state, sizeof *per);
    float *data = malloc((size_t)(heads ? heads : 1) * sizeof(float));
    int rc = want && per && data ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for the kv scales");
    if (rc == 0) rc = path ? read_file(path, want, n, data) : read_ckpt(m, want, n, data);
    free(want);
    if (rc < 0) { /* nothing kept */
        free(per);
        free(data);
        return rc;
    }
    float *at = data;
    for (int i = 0; i < m->n_state; i++) {
        const frt_state_decl *d = &m->state[i].decl;
        if (!is_kv_entry(d) || d->dtype != FRT_DT_F8_E4M3) continue;
        per[i] = at;
        at += d->shape[1];
    }
    m->kv_scales = per;
    m->kv_scales_data = data;
    m->kv_scales_hash = XXH64(data, (size_t)heads * sizeof(float), 0x6b7673) | 1;
    return 0;
}

void frt_model_kv_scales_of(const frt_model *m, int e, float *out, int heads)
{
    const float *s = m->kv_scales && e >= 0 && e < m->n_state ? m->kv_scales[e] : NULL;
    for (int j = 0; j < heads; j++) out[j] = s ? s[j] : 1.0f;
}

void frt_model_kv_scales_table(const frt_model *m, int n_entries, int heads, float *out)
{
    for (int e = 0; e < n_entries; e++) frt_model_kv_scales_of(m, e, out + (size_t)e * heads, heads);
}

int frt_model_kv_scales_upload(const frt_model *m, int n_entries, int heads, frt_buffer *buf, size_t off)
{
    size_t bytes = (size_t)n_entries * (size_t)heads * sizeof(float);
    float *h = malloc(bytes ? bytes : 1);
    if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for the kv scales");
    frt_model_kv_scales_table(m, n_entries, heads, h);
    int rc = frt_buffer_write(buf, off, h, bytes, m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream); /* the host copy must outlive the transfer */
    free(h);
    return rc;
}

/* ---- calibration ---------------------------------------------------------- */

/* The scales of KV entry i over rows 0..n-1: out[j] = amax(head j) / 448. */
static int entry_scales(frt_model *m, int i, int n, float *out)
{
    const frt_state_decl *d = &m->state[i].decl;
    const int H = (int)d->shape[1], D = (int)d->shape[2];
    const size_t vals = (size_t)n * H * D, esz = frt_dtype_size(d->dtype);
    if (d->dtype != FRT_DT_F32 && d->dtype != FRT_DT_BF16)
        return frt_error(FRT_ERR_UNSUPPORTED, "calibrate: KV entry '%s' is %s (F32 or BF16 supported)", d->name,
                         frt_dtype_name(d->dtype));
    void *raw = malloc(vals * esz);
    float *x = malloc(vals * sizeof(float)), *head = malloc((size_t)n * D * sizeof(float));
    int rc = raw && x && head ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    if (rc == 0) rc = frt_buffer_read(m->state[i].buf, 0, raw, vals * esz, m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream);
    if (rc == 0) {
        if (d->dtype == FRT_DT_BF16)
            frt_bf16_array_to_f32(raw, x, vals);
        else
            memcpy(x, raw, vals * sizeof(float));
        for (int j = 0; j < H; j++) {
            for (int t = 0; t < n; t++) memcpy(head + (size_t)t * D, x + ((size_t)t * H + j) * D, D * sizeof(float));
            out[j] = frt_fp8_amax_scale(head, (size_t)n * D);
        }
    }
    free(raw), free(x), free(head);
    return rc;
}

/* Adds every KV entry's scales (computed into s, which must outlive the
 * write) to w. */
static int add_scales(frt_model *m, int n, frt_st_writer *w, float *s)
{
    for (int i = 0; i < m->n_state; i++) {
        const frt_state_decl *d = &m->state[i].decl;
        if (!is_kv_entry(d)) continue;
        FRT_TRY(entry_scales(m, i, n, s));
        char name[FRT_STATE_NAME_MAX + 8];
        snprintf(name, sizeof name, "%s.scale", d->name);
        int64_t shape[1] = {d->shape[1]};
        FRT_TRY(frt_st_writer_add(w, name, FRT_DT_F32, 1, shape, s));
        s += d->shape[1];
    }
    return 0;
}

int frt_model_kv_calibrate(frt_model *m, const int32_t *ids, int n, const char *path)
{
    if (!m || !ids || !path || n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "calibrate: NULL argument or n < 1");
    if (m->kv_dtype == FRT_DT_F8_E4M3)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "calibrate: the model holds an FP8 KV cache (the codes would be "
                                                   "measured); load it with kv_dtype FRT_KV_DEFAULT");
    FRT_TRY(frt_model_reset(m));
    FRT_TRY(frt_model_prefill(m, ids, n));
    size_t heads = 0;
    for (int i = 0; i < m->n_state; i++)
        if (is_kv_entry(&m->state[i].decl)) heads += (size_t)m->state[i].decl.shape[1];
    if (!heads) return frt_error(FRT_ERR_INVALID_ARGUMENT, "calibrate: the model has no KV entries");
    float *s = malloc(heads * sizeof(float));
    frt_st_writer *w = NULL;
    int rc = s ? frt_st_writer_create(&w) : frt_error(FRT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    char tokens[32];
    snprintf(tokens, sizeof tokens, "%d", n);
    if (rc == 0) rc = frt_st_writer_set_metadata(w, "format", KV_SCALES_FORMAT);
    if (rc == 0) rc = frt_st_writer_set_metadata(w, "tokens", tokens);
    if (rc == 0) rc = frt_st_writer_set_metadata(w, "scale", "amax/448 per KV head");
    if (rc == 0) rc = add_scales(m, n, w, s);
    if (rc == 0) rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    free(s);
    return rc;
}
