/*
 * safetensors.c - the validating *.safetensors reader (mmap) and the atomic
 * writer. Format and checks: safetensors.h.
 */
#include "frt/safetensors.h"

#include "util/bf16.h"
#include "util/error.h"
#include "frt/fs.h"
#include "util/json.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull /* the safetensors crate's MAX_HEADER_SIZE */

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
    int is_float;
} dtypes[FRT_DT_COUNT_] = {
    [FRT_DT_BF16] = {"BF16", 2, 1},    [FRT_DT_F16] = {"F16", 2, 1},         [FRT_DT_F32] = {"F32", 4, 1},
    [FRT_DT_F64] = {"F64", 8, 1},      [FRT_DT_F8_E4M3] = {"F8_E4M3", 1, 1}, [FRT_DT_F8_E5M2] = {"F8_E5M2", 1, 1},
    [FRT_DT_I8] = {"I8", 1, 0},        [FRT_DT_I16] = {"I16", 2, 0},         [FRT_DT_I32] = {"I32", 4, 0},
    [FRT_DT_I64] = {"I64", 8, 0},      [FRT_DT_U8] = {"U8", 1, 0},           [FRT_DT_U16] = {"U16", 2, 0},
    [FRT_DT_U32] = {"U32", 4, 0},      [FRT_DT_U64] = {"U64", 8, 0},         [FRT_DT_BOOL] = {"BOOL", 1, 0},
};

static int dtype_valid(frt_dtype dt) { return (int)dt >= 0 && dt < FRT_DT_COUNT_; }

size_t frt_dtype_size(frt_dtype dt) { return dtype_valid(dt) ? dtypes[dt].size : 0; }

const char *frt_dtype_name(frt_dtype dt) { return dtype_valid(dt) ? dtypes[dt].name : "?"; }

int frt_dtype_is_float(frt_dtype dt) { return dtype_valid(dt) && dtypes[dt].is_float; }

int frt_dtype_from_name(const char *name, frt_dtype *out)
{
    for (int i = 0; name && i < FRT_DT_COUNT_; i++)
        if (!strcmp(name, dtypes[i].name)) {
            *out = (frt_dtype)i;
            return 0;
        }
    return frt_error(FRT_ERR_UNSUPPORTED,
                     "unknown dtype '%s' (supported: BF16 F16 F32 F64 F8_E4M3 F8_E5M2 I8 I16 I32 I64 U8 U16 "
                     "U32 U64 BOOL)",
                     name ? name : "(null)");
}

int64_t frt_tensor_numel(const frt_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; t && i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* numel * elem_size with overflow checks; -1 on overflow or a negative dim. */
static int64_t shape_bytes(int ndim, const int64_t *shape, size_t elem)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n)) return -1;
    }
    if (__builtin_mul_overflow(n, (uint64_t)elem, &n) || n > (uint64_t)INT64_MAX) return -1;
    return (int64_t)n;
}

int frt_f32_convert(void *dst, frt_dtype dt, const float *src, size_t n)
{
    if ((!dst || !src) && n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "convert: NULL argument");
    unsigned char *d = dst;
    switch (dt) {
    case FRT_DT_BF16:
        for (size_t k = 0; k < n; k++) {
            uint16_t h = frt_f32_to_bf16(src[k]);
            memcpy(d + 2 * k, &h, 2);
        }
        return 0;
    case FRT_DT_F16:
        for (size_t k = 0; k < n; k++) {
            uint16_t h = frt_f32_to_f16(src[k]);
            memcpy(d + 2 * k, &h, 2);
        }
        return 0;
    case FRT_DT_F32:
        if (n) memcpy(d, src, n * sizeof(float));
        return 0;
    default:
        return frt_error(FRT_ERR_UNSUPPORTED, "convert: f32 to %s", frt_dtype_name(dt));
    }
}

int frt_tensor_to_f32(const frt_tensor *t, float *out)
{
    if (!t || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "tensor_to_f32: NULL argument");
    if (!frt_dtype_is_float(t->dtype))
        return frt_error(FRT_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not a float type", t->name ? t->name : "?",
                         frt_dtype_name(t->dtype));
    int64_t n = frt_tensor_numel(t);
    if ((uint64_t)n * frt_dtype_size(t->dtype) != t->nbytes)
        return frt_error(FRT_ERR_FORMAT, "tensor '%s': %zu bytes do not hold %lld %s elements",
                         t->name ? t->name : "?", t->nbytes, (long long)n, frt_dtype_name(t->dtype));
    const unsigned char *p = t->data;
    frt_dtype dt = t->dtype;
#pragma omp parallel for schedule(static) if (n >= (1 << 18))
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case FRT_DT_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = frt_bf16_to_f32(h);
            break;
        }
        case FRT_DT_F16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = frt_f16_to_f32(h);
            break;
        }
        case FRT_DT_F32:
            memcpy(&out[i], p + 4 * i, 4);
            break;
        case FRT_DT_F64: {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
            break;
        }
        case FRT_DT_F8_E4M3:
            out[i] = frt_fp8_e4m3_to_f32(p[i]);
            break;
        case FRT_DT_F8_E5M2:
            out[i] = frt_fp8_e5m2_to_f32(p[i]);
            break;
        default:
            break;
        }
    }
    return 0;
}

/* ---- reader ------------------------------------------------------------- */

struct frt_safetensors {
    char *path;
    const unsigned char *base; /* file image */
    size_t size;
    void *map; /* non-NULL when we mapped it */
    size_t map_len;
    frt_tensor *tensors; /* [n], data-offset order */
    int n;
    int *by_name;        /* [n] indices sorted by name */
    char **meta_keys, **meta_vals;
    int n_meta;
};

typedef struct parsed_entry {
    int idx;
    uint64_t begin, end;
} parsed_entry;

static int cmp_range(const void *a, const void *b)
{
    const parsed_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* qsort has no context argument: the tensor array being sorted, per thread. */
static _Thread_local const frt_tensor *sort_tensors_;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(sort_tensors_[*(const int *)a].name, sort_tensors_[*(const int *)b].name);
}

void frt_safetensors_close(frt_safetensors *st)
{
    if (!st) return;
    if (st->map) munmap(st->map, st->map_len);
    if (st->tensors)
        for (int i = 0; i < st->n; i++) free((char *)st->tensors[i].name);
    free(st->tensors);
    free(st->by_name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_vals[i]);
    }
    free(st->meta_keys);
    free(st->meta_vals);
    free(st->path);
    free(st);
}

/* Reads one header entry into *t (name not yet set). */
static int parse_entry(frt_safetensors *st, const char *name, json_t *v, frt_tensor *t, uint64_t *begin,
                       uint64_t *end, uint64_t data_len)
{
    const char *P = st->path;
    if (!json_is_object(v))
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': header entry is not an object", P, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': missing or non-string 'dtype'", P, name);
    if (frt_dtype_from_name(json_string_value(jd), &t->dtype) < 0) {
        frt_error_prefix("safetensors: %s: tensor '%s'", P, name);
        return FRT_ERR_UNSUPPORTED;
    }
    if (!json_is_array(js))
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': missing or non-array 'shape'", P, name);
    size_t nd = json_array_size(js);
    if (nd > FRT_TENSOR_MAX_DIMS)
        return frt_error(FRT_ERR_UNSUPPORTED, "safetensors: %s: tensor '%s': %zu dims, at most %d supported", P,
                         name, nd, FRT_TENSOR_MAX_DIMS);
    t->ndim = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': shape[%zu] is not a non-negative integer",
                             P, name, i);
        t->shape[i] = (int64_t)json_integer_value(d);
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': 'data_offsets' must be [begin, end]", P,
                         name);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), e = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || e < b)
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': invalid data_offsets [%lld, %lld]", P, name,
                         (long long)b, (long long)e);
    if ((uint64_t)e > data_len)
        return frt_error(FRT_ERR_FORMAT,
                         "safetensors: %s: tensor '%s': byte range [%lld, %lld) runs past the end of the %llu-byte "
                         "data buffer (file truncated?)",
                         P, name, (long long)b, (long long)e, (unsigned long long)data_len);
    int64_t want = shape_bytes(t->ndim, t->shape, frt_dtype_size(t->dtype));
    if (want < 0)
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: tensor '%s': shape size overflows", P, name);
    if ((uint64_t)want != (uint64_t)(e - b))
        return frt_error(FRT_ERR_FORMAT,
                         "safetensors: %s: tensor '%s': dtype %s x shape needs %lld bytes but data_offsets span %lld",
                         P, name, frt_dtype_name(t->dtype), (long long)want, (long long)(e - b));
    *begin = (uint64_t)b;
    *end = (uint64_t)e;
    return 0;
}

static int parse_metadata(frt_safetensors *st, json_t *m)
{
    if (!json_is_object(m))
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: '__metadata__' is not an object", st->path);
    size_t n = json_object_size(m);
    st->meta_keys = calloc(n ? n : 1, sizeof(char *));
    st->meta_vals = calloc(n ? n : 1, sizeof(char *));
    if (!st->meta_keys || !st->meta_vals) return frt_error(FRT_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v)
    {
        if (!json_is_string(v))
            return frt_error(FRT_ERR_FORMAT, "safetensors: %s: __metadata__ value of '%s' is not a string", st->path,
                             k);
        st->meta_keys[st->n_meta] = strdup(k);
        st->meta_vals[st->n_meta] = strdup(json_string_value(v));
        st->n_meta++;
        if (!st->meta_keys[st->n_meta - 1] || !st->meta_vals[st->n_meta - 1])
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
    }
    return 0;
}

static int validate(frt_safetensors *st)
{
    const char *P = st->path;
    if (st->size < 8)
        return frt_error(FRT_ERR_FORMAT,
                         "safetensors: %s: file is %zu bytes, shorter than the 8-byte header length (truncated?)", P,
                         st->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | st->base[i];
    if (hlen > ST_MAX_HEADER)
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: header length %llu exceeds the %llu-byte limit", P,
                         (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > st->size - 8)
        return frt_error(FRT_ERR_FORMAT,
                         "safetensors: %s: header length %llu runs past the end of the %zu-byte file (truncated?)", P,
                         (unsigned long long)hlen, st->size);
    if (hlen < 2 || st->base[8] != '{')
        return frt_error(FRT_ERR_FORMAT, "safetensors: %s: header does not start with a JSON object", P);
    uint64_t data_len = st->size - 8 - hlen;

    json_t *root;
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "safetensors: %s: header", P);
    FRT_TRY(frt_json_parse((const char *)st->base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &root, what));
    int rc = 0;
    parsed_entry *ranges = NULL;
    if (!json_is_object(root)) {
        rc = frt_error(FRT_ERR_FORMAT, "safetensors: %s: header is not a JSON object", P);
        goto out;
    }
    size_t cap = json_object_size(root);
    st->tensors = calloc(cap ? cap : 1, sizeof *st->tensors);
    ranges = calloc(cap ? cap : 1, sizeof *ranges);
    if (!st->tensors || !ranges) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "safetensors: %s: out of memory for %zu entries", P, cap);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (!strcmp(key, "__metadata__")) {
            if ((rc = parse_metadata(st, v)) < 0) goto out;
            continue;
        }
        frt_tensor *t = &st->tensors[st->n];
        if ((rc = parse_entry(st, key, v, t, &ranges[st->n].begin, &ranges[st->n].end, data_len)) < 0) goto out;
        t->name = strdup(key);
        if (!t->name) {
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
            goto out;
        }
        ranges[st->n].idx = st->n;
        st->n++;
    }

    /* Ranges: sorted, they must tile [0, data_len) exactly. */
    qsort(ranges, (size_t)st->n, sizeof *ranges, cmp_range);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (int i = 0; i < st->n; i++) {
        const parsed_entry *r = &ranges[i];
        const char *name = st->tensors[r->idx].name;
        if (r->begin < pos) {
            rc = frt_error(FRT_ERR_FORMAT,
                           "safetensors: %s: tensor '%s' bytes [%llu, %llu) overlap tensor '%s' (ends at %llu)", P,
                           name, (unsigned long long)r->begin, (unsigned long long)r->end, prev ? prev : "?",
                           (unsigned long long)pos);
            goto out;
        }
        if (r->begin > pos) {
            rc = frt_error(FRT_ERR_FORMAT,
                           "safetensors: %s: data bytes [%llu, %llu) before tensor '%s' belong to no tensor (holes "
                           "are not allowed)",
                           P, (unsigned long long)pos, (unsigned long long)r->begin, name);
            goto out;
        }
        pos = r->end;
        prev = name;
    }
    if (pos != data_len) {
        rc = frt_error(FRT_ERR_FORMAT,
                       "safetensors: %s: %llu bytes after the last tensor belong to no tensor (data buffer is %llu "
                       "bytes)",
                       P, (unsigned long long)(data_len - pos), (unsigned long long)data_len);
        goto out;
    }

    /* Reorder the tensors by offset and point them at the data. */
    frt_tensor *sorted = calloc((size_t)(st->n ? st->n : 1), sizeof *sorted);
    st->by_name = calloc((size_t)(st->n ? st->n : 1), sizeof *st->by_name);
    if (!sorted || !st->by_name) {
        free(sorted);
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
        goto out;
    }
    const unsigned char *data = st->base + 8 + hlen;
    for (int i = 0; i < st->n; i++) {
        sorted[i] = st->tensors[ranges[i].idx];
        sorted[i].data = data + ranges[i].begin;
        sorted[i].nbytes = (size_t)(ranges[i].end - ranges[i].begin);
        sorted[i].file = st->path;
        st->by_name[i] = i;
    }
    free(st->tensors);
    st->tensors = sorted;
    sort_tensors_ = st->tensors;
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_name);
out:
    free(ranges);
    json_decref(root);
    return rc;
}

static int st_new(const char *name, frt_safetensors **out)
{
    frt_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(name))) {
        free(st);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
    }
    *out = st;
    return 0;
}

int frt_safetensors_open_memory(const void *data, size_t size, const char *name, frt_safetensors **out)
{
    if (!out || (!data && size)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "safetensors: NULL argument");
    frt_safetensors *st = NULL;
    FRT_TRY(st_new(name ? name : "(memory)", &st));
    st->base = data;
    st->size = size;
    int rc = validate(st);
    if (rc < 0) {
        frt_safetensors_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

int frt_safetensors_open(const char *path, frt_safetensors **out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "safetensors: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return frt_error(e == ENOENT ? FRT_ERR_NOT_FOUND : FRT_ERR_IO, "safetensors: %s: cannot open: %s", path,
                         strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return frt_error(FRT_ERR_IO, "safetensors: %s: not a regular file", path);
    }
    frt_safetensors *st = NULL;
    int rc = st_new(path, &st);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    st->size = (size_t)sb.st_size;
    if (st->size > 0) {
        void *m = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            frt_safetensors_close(st);
            return frt_error(FRT_ERR_IO, "safetensors: %s: mmap of %lld bytes failed: %s", path,
                             (long long)sb.st_size, strerror(e));
        }
        st->map = m;
        st->map_len = st->size;
        st->base = m;
    } else {
        st->base = (const unsigned char *)"";
    }
    close(fd);
    rc = validate(st);
    if (rc < 0) {
        frt_safetensors_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

int frt_safetensors_count(const frt_safetensors *st) { return st ? st->n : 0; }

const frt_tensor *frt_safetensors_at(const frt_safetensors *st, int i)
{
    return st && i >= 0 && i < st->n ? &st->tensors[i] : NULL;
}

const frt_tensor *frt_safetensors_find(const frt_safetensors *st, const char *name)
{
    if (!st || !name) return NULL;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const frt_tensor *t = &st->tensors[st->by_name[mid]];
        int c = strcmp(name, t->name);
        if (!c) return t;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *frt_safetensors_metadata(const frt_safetensors *st, const char *key)
{
    for (int i = 0; st && key && i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], key)) return st->meta_vals[i];
    return NULL;
}

const char *frt_safetensors_path(const frt_safetensors *st) { return st ? st->path : NULL; }

size_t frt_safetensors_size(const frt_safetensors *st) { return st ? st->size : 0; }

/* ---- writer ------------------------------------------------------------- */

typedef struct wentry {
    char *name;
    frt_dtype dtype;
    int ndim;
    int64_t shape[FRT_TENSOR_MAX_DIMS];
    const void *data;
    uint64_t nbytes, offset;
} wentry;

struct frt_st_writer {
    wentry *e;
    int n, cap;
    char **mkeys, **mvals;
    int n_meta;
    uint64_t data_bytes;
    int no_sync;
};

void frt_st_writer_set_sync(frt_st_writer *w, int sync)
{
    if (w) w->no_sync = !sync;
}

void frt_st_writer_destroy(frt_st_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->e[i].name);
    free(w->e);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->mkeys[i]);
        free(w->mvals[i]);
    }
    free(w->mkeys);
    free(w->mvals);
    free(w);
}

int frt_st_writer_set_metadata(frt_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: NULL argument");
    char *v = strdup(value);
    if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
    for (int i = 0; i < w->n_meta; i++)
        if (!strcmp(w->mkeys[i], key)) {
            free(w->mvals[i]);
            w->mvals[i] = v;
            return 0;
        }
    char *k = strdup(key);
    char **nk = realloc(w->mkeys, (size_t)(w->n_meta + 1) * sizeof *nk);
    if (nk) w->mkeys = nk;
    char **nv = nk ? realloc(w->mvals, (size_t)(w->n_meta + 1) * sizeof *nv) : NULL;
    if (nv) w->mvals = nv;
    if (!k || !nk || !nv) {
        free(k);
        free(v);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
    }
    w->mkeys[w->n_meta] = k;
    w->mvals[w->n_meta] = v;
    w->n_meta++;
    return 0;
}

int frt_st_writer_create(frt_st_writer **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: NULL argument");
    frt_st_writer *w = calloc(1, sizeof *w);
    if (!w) return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
    int rc = frt_st_writer_set_metadata(w, "format", "pt");
    if (rc < 0) {
        frt_st_writer_destroy(w);
        return rc;
    }
    *out = w;
    return 0;
}

int frt_st_writer_add(frt_st_writer *w, const char *name, frt_dtype dtype, int ndim, const int64_t *shape,
                      const void *data)
{
    if (!w || !name || (ndim > 0 && !shape)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: NULL argument");
    size_t len = strlen(name);
    if (len == 0 || len > 4096 || !strcmp(name, "__metadata__"))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: invalid tensor name '%s'", name);
    json_t *probe = json_string(name); /* NULL for invalid UTF-8 */
    if (!probe) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: tensor name is not valid UTF-8");
    json_decref(probe);
    if (!dtype_valid(dtype)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: '%s': invalid dtype", name);
    if (ndim < 0 || ndim > FRT_TENSOR_MAX_DIMS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: '%s': ndim %d outside [0, %d]", name, ndim,
                         FRT_TENSOR_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: '%s': negative dim", name);
    int64_t nb = shape_bytes(ndim, shape, frt_dtype_size(dtype));
    if (nb < 0) return frt_error(FRT_ERR_OUT_OF_RANGE, "st_writer: '%s': size overflows", name);
    if (nb > 0 && !data) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: '%s': NULL data", name);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->e[i].name, name))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: duplicate tensor name '%s'", name);
    if (w->n == w->cap) {
        int nc = w->cap ? 2 * w->cap : 64;
        wentry *ne = realloc(w->e, (size_t)nc * sizeof *ne);
        if (!ne) return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
        w->e = ne;
        w->cap = nc;
    }
    wentry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = strdup(name))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
    e->dtype = dtype;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->data = data;
    e->nbytes = (uint64_t)nb;
    e->offset = w->data_bytes;
    w->data_bytes += (uint64_t)nb;
    w->n++;
    return 0;
}

/* The header JSON padded with spaces so 8 + its length is a multiple of 8. */
static int build_header(const frt_st_writer *w, char **out, size_t *len)
{
    json_t *root = json_object();
    int bad = !root;
    if (!bad && w->n_meta) {
        json_t *m = json_object();
        bad |= !m || json_object_set_new(root, "__metadata__", m) != 0;
        for (int i = 0; !bad && i < w->n_meta; i++)
            bad |= json_object_set_new(m, w->mkeys[i], json_string(w->mvals[i])) != 0;
    }
    for (int i = 0; !bad && i < w->n; i++) {
        const wentry *e = &w->e[i];
        json_t *shape = json_array();
        for (int d = 0; shape && d < e->ndim; d++) bad |= json_array_append_new(shape, json_integer(e->shape[d]));
        json_t *t = json_pack("{s:s, s:o, s:[I, I]}", "dtype", frt_dtype_name(e->dtype), "shape", shape,
                              "data_offsets", (json_int_t)e->offset, (json_int_t)(e->offset + e->nbytes));
        bad |= !shape || !t || json_object_set_new(root, e->name, t) != 0;
    }
    char *s = bad ? NULL : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: cannot build the header");
    size_t n = strlen(s), padded = (n + 7) / 8 * 8;
    char *p = realloc(s, padded + 1);
    if (!p) {
        free(s);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
    }
    memset(p + n, ' ', padded - n);
    p[padded] = '\0';
    *out = p;
    *len = padded;
    return 0;
}

uint64_t frt_st_writer_file_size(const frt_st_writer *w)
{
    char *h;
    size_t hl;
    if (!w || build_header(w, &h, &hl) < 0) return 0;
    free(h);
    return 8 + hl + w->data_bytes;
}

typedef struct wjob {
    const unsigned char *src;
    uint64_t off, len;
} wjob;

int frt_st_writer_write(frt_st_writer *w, const char *path)
{
    if (!w || !path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "st_writer: NULL argument");
    char *header;
    size_t hlen;
    FRT_TRY(build_header(w, &header, &hlen));
    uint64_t data0 = 8 + hlen, total = data0 + w->data_bytes;

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        free(header);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "st_writer: out of memory");
    }
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(header);
        free(tmp);
        return frt_error(FRT_ERR_IO, "st_writer: %s: cannot create a temporary file: %s", path, strerror(e));
    }
    int err = 0;
    const char *stage = "write";
    if (fchmod(fd, 0644) != 0) { /* mkstemp creates 0600 */
        err = errno;
        stage = "chmod";
    }
    if (!err && ftruncate(fd, (off_t)total) != 0) {
        err = errno;
        stage = "truncate";
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    if (!err) err = frt_pwrite_all(fd, len8, 8, 0);
    if (!err) err = frt_pwrite_all(fd, header, hlen, 8);
    free(header);

    /* Data: chunks of at most 64 MiB written by all threads. */
    const uint64_t CH = 64ull << 20;
    size_t njobs = 0;
    for (int i = 0; i < w->n; i++) njobs += (size_t)((w->e[i].nbytes + CH - 1) / CH);
    wjob *jobs = njobs ? malloc(njobs * sizeof *jobs) : NULL;
    if (!err && njobs && !jobs) err = ENOMEM;
    size_t j = 0;
    for (int i = 0; !err && i < w->n; i++)
        for (uint64_t o = 0; o < w->e[i].nbytes; o += CH) {
            jobs[j].src = (const unsigned char *)w->e[i].data + o;
            jobs[j].off = data0 + w->e[i].offset + o;
            jobs[j].len = w->e[i].nbytes - o < CH ? w->e[i].nbytes - o : CH;
            j++;
        }
    if (!err) {
        int first = 0;
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t k = 0; k < njobs; k++) {
            int e;
#pragma omp atomic read
            e = first;
            if (e) continue;
            e = frt_pwrite_all(fd, jobs[k].src, jobs[k].len, jobs[k].off);
            if (e) {
#pragma omp critical(frt_st_write_err)
                {
                    int f0;
#pragma omp atomic read
                    f0 = first;
                    if (!f0) {
#pragma omp atomic write
                        first = e;
                    }
                }
            }
        }
        err = first;
    }
    free(jobs);
    if (!err && !w->no_sync && fsync(fd) != 0) {
        err = errno;
        stage = "fsync";
    }
    if (close(fd) != 0 && !err) {
        err = errno;
        stage = "close";
    }
    if (!err && rename(tmp, path) != 0) {
        err = errno;
        stage = "rename";
    }
    if (err) {
        unlink(tmp);
        free(tmp);
        return frt_error(FRT_ERR_IO, "st_writer: %s: %s failed: %s", path, stage, strerror(err));
    }
    free(tmp);
    /* Make the rename durable (best effort). */
    char *dcopy = w->no_sync ? NULL : strdup(path);
    if (dcopy) {
        int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dcopy);
    }
    return 0;
}
