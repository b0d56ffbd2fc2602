/*
 * policy_obs.c - the policy server's observation (policy_obs.h): the value
 * list, dtypes, base64, and the msgpack parser over msgpack-c, reading
 * openpi's msgpack_numpy encoding (openpi_client/msgpack_numpy.py:
 * pack_array / unpack_array).
 *
 * msgpack-c allocates a container's element table from the count in its
 * header before reading the elements, so a few bytes could ask for
 * gigabytes: pobs_msgpack_prescan walks the bytes first and refuses a
 * container that claims more elements than there are bytes left, nesting
 * past the limit, and truncated or reserved encodings.
 */
#include "serving/policy_obs.h"

#include "frt/status.h"
#include "serving/text.h"

#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values --------------------------------------------------------------- */

/* 1 when s[0..n) is valid UTF-8 (repairing it changes nothing). */
static int utf8_ok(const char *s, size_t n)
{
    size_t m = 0;
    char *r = frt_utf8_sanitize(s, n, &m);
    int ok = r && m == n && !memcmp(r, s, n);
    free(r);
    return ok;
}

static const struct {
    const char *str, *name;
    size_t size;
} DTYPES[] = {
    [FRT_POBS_BOOL] = {"|b1", "bool", 1}, [FRT_POBS_U8] = {"|u1", "uint8", 1},  [FRT_POBS_I8] = {"|i1", "int8", 1},
    [FRT_POBS_U16] = {"<u2", "uint16", 2}, [FRT_POBS_I16] = {"<i2", "int16", 2}, [FRT_POBS_U32] = {"<u4", "uint32", 4},
    [FRT_POBS_I32] = {"<i4", "int32", 4}, [FRT_POBS_U64] = {"<u8", "uint64", 8}, [FRT_POBS_I64] = {"<i8", "int64", 8},
    [FRT_POBS_F32] = {"<f4", "float32", 4}, [FRT_POBS_F64] = {"<f8", "float64", 8},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

size_t frt_pobs_dtype_size(frt_pobs_dtype d) { return (size_t)d < N_DTYPES ? DTYPES[d].size : 0; }

const char *frt_pobs_dtype_str(frt_pobs_dtype d) { return (size_t)d < N_DTYPES ? DTYPES[d].str : "?"; }

int frt_pobs_dtype_parse(const char *s, size_t len, int names, frt_pobs_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        const char *a = DTYPES[i].str, *b = DTYPES[i].name;
        int one_byte = DTYPES[i].size == 1;
        /* numpy writes "|u1" for one-byte types; "<u1" / "=f4" mean the same on a little-endian host */
        if (len == 3 && !memcmp(s + 1, a + 1, 2) && (s[0] == a[0] || s[0] == '=' || (one_byte && s[0] == '<'))) {
            *out = (frt_pobs_dtype)i;
            return 0;
        }
        if (names && strlen(b) == len && !memcmp(s, b, len)) {
            *out = (frt_pobs_dtype)i;
            return 0;
        }
    }
    return frt_error(FRT_ERR_INVALID_ARGUMENT,
                     "dtype '%.*s' is not supported (|b1 |u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8 <f4 <f8; little-endian)",
                     (int)(len > 32 ? 32 : len), s);
}

void frt_pobs_free(frt_pobs *o)
{
    if (!o) return;
    for (size_t i = 0; i < o->n; i++) {
        free(o->v[i].key);
        free(o->v[i].data);
    }
    free(o->v);
    o->v = NULL;
    o->n = 0;
}

const frt_pobs_value *frt_pobs_get(const frt_pobs *o, const char *key)
{
    for (size_t i = 0; o && i < o->n; i++)
        if (!strcmp(o->v[i].key, key)) return &o->v[i];
    return NULL;
}

int frt_pobs_add(frt_pobs *o, const char *prefix, const char *key, size_t key_len, frt_pobs_value **slot)
{
    size_t pl = strlen(prefix), kl = pl ? pl + 1 + key_len : key_len;
    if (!key_len || kl > FRT_POBS_MAX_KEY || memchr(key, '\0', key_len) || !utf8_ok(key, key_len))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation key '%s%s%.*s': empty, over %d bytes, or not UTF-8",
                         prefix, pl ? "/" : "", (int)(key_len > 64 ? 64 : key_len), key, FRT_POBS_MAX_KEY);
    if (o->n >= FRT_POBS_MAX_KEYS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation: more than %d values", FRT_POBS_MAX_KEYS);
    char *k = malloc(kl + 1);
    frt_pobs_value *nv = k ? realloc(o->v, (o->n + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(k);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "observation: out of memory");
    }
    o->v = nv;
    if (pl) snprintf(k, kl + 1, "%s/%.*s", prefix, (int)key_len, key);
    else memcpy(k, key, key_len), k[kl] = '\0';
    if (frt_pobs_get(o, k)) {
        int rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "observation key '%s' given twice", k);
        free(k);
        return rc;
    }
    memset(&o->v[o->n], 0, sizeof o->v[o->n]);
    o->v[o->n].key = k;
    *slot = &o->v[o->n++];
    return 0;
}

int frt_pobs_set_array(frt_pobs_value *v, frt_pobs_dtype dtype, const int64_t *shape, int ndim, const void *data,
                       size_t nbytes)
{
    if (ndim < 0 || ndim > FRT_POBS_MAX_NDIM)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': %d dimensions (at most %d)", v->key, ndim,
                         FRT_POBS_MAX_NDIM);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > FRT_POBS_MAX_ELEMS / shape[i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': shape entry %d (%lld) negative or too large", v->key,
                             i, (long long)shape[i]);
        n *= shape[i];
        v->shape[i] = shape[i];
    }
    size_t want = (size_t)n * frt_pobs_dtype_size(dtype);
    if (nbytes != want)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': %zu data bytes, but dtype %s and its shape need %zu", v->key,
                         nbytes, frt_pobs_dtype_str(dtype), want);
    v->data = malloc(want ? want : 1);
    if (!v->data) return frt_error(FRT_ERR_OUT_OF_MEMORY, "'%s': out of memory (%zu bytes)", v->key, want);
    if (want) memcpy(v->data, data, want);
    v->kind = FRT_POBS_ARRAY;
    v->dtype = dtype;
    v->ndim = ndim;
    v->n = (size_t)n;
    return 0;
}

int frt_pobs_set_string(frt_pobs_value *v, const char *s, size_t len)
{
    if (len > FRT_POBS_MAX_STRING || !utf8_ok(s, len))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': a string over %d bytes or not UTF-8", v->key,
                         FRT_POBS_MAX_STRING);
    v->data = malloc(len + 1);
    if (!v->data) return frt_error(FRT_ERR_OUT_OF_MEMORY, "'%s': out of memory", v->key);
    memcpy(v->data, s, len);
    ((char *)v->data)[len] = '\0';
    v->kind = FRT_POBS_STRING;
    v->n = len;
    return 0;
}

int frt_pobs_error_at(const char *key, const char *what)
{
    char m[512];
    snprintf(m, sizeof m, "%s", frt_last_error());
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': %s%s", key, what, m);
}

int frt_pobs_set_f64(frt_pobs_value *v, double x) { return frt_pobs_set_array(v, FRT_POBS_F64, NULL, 0, &x, 8); }
int frt_pobs_set_i64(frt_pobs_value *v, int64_t x) { return frt_pobs_set_array(v, FRT_POBS_I64, NULL, 0, &x, 8); }
int frt_pobs_set_u64(frt_pobs_value *v, uint64_t x) { return frt_pobs_set_array(v, FRT_POBS_U64, NULL, 0, &x, 8); }

int frt_pobs_set_bool(frt_pobs_value *v, int x)
{
    uint8_t b = x != 0;
    return frt_pobs_set_array(v, FRT_POBS_BOOL, NULL, 0, &b, 1);
}

int frt_pobs_to_f64(const frt_pobs_value *v, double *out)
{
    if (!v || v->kind != FRT_POBS_ARRAY)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': not an array", v ? v->key : "(null)");
    const void *p = v->data;
    for (size_t i = 0; i < v->n; i++) {
        switch (v->dtype) {
        case FRT_POBS_BOOL: out[i] = ((const uint8_t *)p)[i] != 0; break;
        case FRT_POBS_U8: out[i] = ((const uint8_t *)p)[i]; break;
        case FRT_POBS_I8: out[i] = ((const int8_t *)p)[i]; break;
        case FRT_POBS_U16: out[i] = ((const uint16_t *)p)[i]; break;
        case FRT_POBS_I16: out[i] = ((const int16_t *)p)[i]; break;
        case FRT_POBS_U32: out[i] = ((const uint32_t *)p)[i]; break;
        case FRT_POBS_I32: out[i] = ((const int32_t *)p)[i]; break;
        case FRT_POBS_U64: out[i] = (double)((const uint64_t *)p)[i]; break;
        case FRT_POBS_I64: out[i] = (double)((const int64_t *)p)[i]; break;
        case FRT_POBS_F32: out[i] = ((const float *)p)[i]; break;
        case FRT_POBS_F64: out[i] = ((const double *)p)[i]; break;
        }
    }
    return 0;
}

/* ---- base64 ------------------------------------------------------------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(unsigned char c)
{
    const char *p = c ? strchr(B64, c) : NULL;
    return p ? (int)(p - B64) : -1;
}

int frt_pobs_base64_decode(const char *s, size_t len, uint8_t **out, size_t *n_out)
{
    if (len % 4) return frt_error(FRT_ERR_INVALID_ARGUMENT, "base64: length %zu is not a multiple of 4", len);
    size_t pad = len && s[len - 1] == '=' ? (len > 1 && s[len - 2] == '=' ? 2 : 1) : 0;
    size_t n = len / 4 * 3 - pad;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return frt_error(FRT_ERR_OUT_OF_MEMORY, "base64: out of memory");
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            int is_pad = i + 4 == len && k >= 4 - (int)pad;
            v[k] = is_pad ? 0 : b64_val((unsigned char)s[i + k]);
            if (v[k] < 0) {
                free(b);
                return frt_error(FRT_ERR_INVALID_ARGUMENT, "base64: bad character at %zu", i + k);
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        for (int k = 0; k < 3 && o < n; k++) b[o++] = (uint8_t)(w >> (16 - 8 * k));
    }
    *out = b;
    *n_out = n;
    return 0;
}

char *frt_pobs_base64_encode(const uint8_t *p, size_t n)
{
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        for (int k = 0; k < 4; k++) *o++ = (size_t)k <= n - i ? B64[(w >> (18 - 6 * k)) & 63] : '=';
    }
    *o = '\0';
    return s;
}

/* ---- msgpack: the pre-scan ------------------------------------------------ */

/* Reads a big-endian unsigned of W bytes at p[*at] (bounds checked). */
static int be_read(const uint8_t *p, size_t len, size_t *at, int w, uint64_t *v)
{
    if (len - *at < (size_t)w) return -1;
    *v = 0;
    for (int i = 0; i < w; i++) *v = *v << 8 | p[(*at)++];
    return 0;
}

/* One msgpack header at p[*at]: *skip = payload bytes to jump over, *count =
 * elements that follow (map entries count twice). -1 when truncated or
 * reserved (0xc1). */
static int mp_header(const uint8_t *p, size_t len, size_t *at, uint64_t *skip, uint64_t *count)
{
    uint8_t c = p[(*at)++];
    uint64_t v = 0;
    *skip = 0;
    *count = 0;
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) return 0;
    if ((c & 0xf0) == 0x80) return *count = 2u * (c & 0x0f), 0;
    if ((c & 0xf0) == 0x90) return *count = c & 0x0f, 0;
    if ((c & 0xe0) == 0xa0) return *skip = c & 0x1f, 0;
    static const int8_t fixed[] = {[0xca - 0xc0] = 4, [0xcb - 0xc0] = 8, [0xcc - 0xc0] = 1, [0xcd - 0xc0] = 2,
                                   [0xce - 0xc0] = 4, [0xcf - 0xc0] = 8, [0xd0 - 0xc0] = 1, [0xd1 - 0xc0] = 2,
                                   [0xd2 - 0xc0] = 4, [0xd3 - 0xc0] = 8, [0xd4 - 0xc0] = 2, [0xd5 - 0xc0] = 3,
                                   [0xd6 - 0xc0] = 5, [0xd7 - 0xc0] = 9, [0xd8 - 0xc0] = 17};
    if (c >= 0xca && c <= 0xd8) return *skip = (uint64_t)fixed[c - 0xc0], 0;
    /* length-prefixed: bin 8/16/32 (c4-c6), ext 8/16/32 (c7-c9, + a type byte), str 8/16/32 (d9-db),
     * array 16/32 (dc, dd), map 16/32 (de, df) */
    static const int8_t width[] = {[0xc4 - 0xc4] = 1, [0xc5 - 0xc4] = 2, [0xc6 - 0xc4] = 4, [0xc7 - 0xc4] = 1,
                                   [0xc8 - 0xc4] = 2, [0xc9 - 0xc4] = 4, [0xd9 - 0xc4] = 1, [0xda - 0xc4] = 2,
                                   [0xdb - 0xc4] = 4, [0xdc - 0xc4] = 2, [0xdd - 0xc4] = 4, [0xde - 0xc4] = 2,
                                   [0xdf - 0xc4] = 4};
    if (c < 0xc4 || c > 0xdf || !width[c - 0xc4] || be_read(p, len, at, width[c - 0xc4], &v)) return -1;
    if (c >= 0xdc) *count = c >= 0xde ? 2 * v : v;
    else *skip = v + (c >= 0xc7 && c <= 0xc9);
    return 0;
}

/* Walks one msgpack value: every header complete, every payload inside the
 * buffer, every container's count <= the bytes left, nesting <= MAX_NEST,
 * and nothing after the value. */
#define MAX_NEST (2 * FRT_POBS_MAX_DEPTH + 4)
static int pobs_msgpack_prescan(const uint8_t *p, size_t len)
{
    uint64_t left[MAX_NEST + 1];
    int depth = 0;
    size_t at = 0;
    left[0] = 1;
    while (depth >= 0) {
        if (left[depth] == 0) {
            depth--;
            continue;
        }
        left[depth]--;
        uint64_t skip, count;
        if (at >= len || mp_header(p, len, &at, &skip, &count) || skip > len - at)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "msgpack: truncated or malformed at byte %zu", at);
        at += skip;
        if (count) {
            if (count > len - at)
                return frt_error(FRT_ERR_INVALID_ARGUMENT,
                                 "msgpack: a container at byte %zu claims more elements than bytes follow", at);
            if (depth == MAX_NEST)
                return frt_error(FRT_ERR_INVALID_ARGUMENT, "msgpack: nested deeper than %d", MAX_NEST);
            left[++depth] = count;
        }
    }
    if (at != len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "msgpack: %zu bytes after the message", len - at);
    return 0;
}

/* ---- msgpack: the values -------------------------------------------------- */

/* The text of a str or bin object (openpi's keys are bin), or NULL. */
static const char *mp_text(const msgpack_object *o, size_t *n)
{
    if (o->type == MSGPACK_OBJECT_STR) return *n = o->via.str.size, o->via.str.ptr;
    if (o->type == MSGPACK_OBJECT_BIN) return *n = o->via.bin.size, o->via.bin.ptr;
    return NULL;
}

static int mp_text_is(const msgpack_object *o, const char *s)
{
    size_t n;
    const char *t = mp_text(o, &n);
    return t && n == strlen(s) && !memcmp(t, s, n);
}

/* The value of key NAME in map M, or NULL. */
static const msgpack_object *mp_find(const msgpack_object_map *m, const char *name)
{
    for (uint32_t i = 0; i < m->size; i++)
        if (mp_text_is(&m->ptr[i].key, name)) return &m->ptr[i].val;
    return NULL;
}

static int mp_dtype(const frt_pobs_value *v, const msgpack_object *d, frt_pobs_dtype *dt)
{
    size_t n;
    const char *s = d ? mp_text(d, &n) : NULL;
    if (!s) return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': an array without a dtype string", v->key);
    if (frt_pobs_dtype_parse(s, n, 0, dt) < 0)
        return frt_pobs_error_at(v->key, "");
    return 0;
}

/* {"__ndarray__": true, "data": bin, "dtype": str, "shape": [..]} */
static int mp_ndarray(frt_pobs_value *v, const msgpack_object_map *m)
{
    const msgpack_object *data = mp_find(m, "data"), *shape = mp_find(m, "shape");
    frt_pobs_dtype dt;
    if (m->size != 4 || !data || !shape)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': an __ndarray__ map needs exactly data, dtype and shape",
                         v->key);
    FRT_TRY(mp_dtype(v, mp_find(m, "dtype"), &dt));
    size_t nb;
    const char *bytes = mp_text(data, &nb);
    if (!bytes || shape->type != MSGPACK_OBJECT_ARRAY || shape->via.array.size > FRT_POBS_MAX_NDIM)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': data must be bin and shape a list of at most %d ints",
                         v->key, FRT_POBS_MAX_NDIM);
    int64_t sh[FRT_POBS_MAX_NDIM];
    for (uint32_t i = 0; i < shape->via.array.size; i++) {
        const msgpack_object *e = &shape->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER || e->via.u64 > (uint64_t)FRT_POBS_MAX_ELEMS)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': shape entry %u is not an int in [0, 2^31]", v->key, i);
        sh[i] = (int64_t)e->via.u64;
    }
    return frt_pobs_set_array(v, dt, sh, (int)shape->via.array.size, bytes, nb);
}

/* A msgpack scalar (int, float, bool) as a 0-d array. */
static int mp_scalar(frt_pobs_value *v, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_BOOLEAN: return frt_pobs_set_bool(v, o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return o->via.u64 > INT64_MAX ? frt_pobs_set_u64(v, o->via.u64) : frt_pobs_set_i64(v, (int64_t)o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return frt_pobs_set_i64(v, o->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return frt_pobs_set_f64(v, o->via.f64);
    default: return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': not a number", v->key);
    }
}

/* {"__npgeneric__": true, "data": x, "dtype": str}: a 0-d array of dtype. */
static int mp_npgeneric(frt_pobs_value *v, const msgpack_object_map *m)
{
    const msgpack_object *data = mp_find(m, "data");
    frt_pobs_dtype dt;
    if (m->size != 3 || !data)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': an __npgeneric__ map needs exactly data and dtype", v->key);
    FRT_TRY(mp_dtype(v, mp_find(m, "dtype"), &dt));
    FRT_TRY(mp_scalar(v, data));
    double x;
    frt_pobs_to_f64(v, &x);
    free(v->data);
    v->data = NULL;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64; int64_t i64;
            float f32; double f64; } u;
    int64_t i = (int64_t)x;
    switch (dt) {
    case FRT_POBS_BOOL: u.u8 = x != 0; break;
    case FRT_POBS_U8: u.u8 = (uint8_t)i; break;
    case FRT_POBS_I8: u.i8 = (int8_t)i; break;
    case FRT_POBS_U16: u.u16 = (uint16_t)i; break;
    case FRT_POBS_I16: u.i16 = (int16_t)i; break;
    case FRT_POBS_U32: u.u32 = (uint32_t)i; break;
    case FRT_POBS_I32: u.i32 = (int32_t)i; break;
    case FRT_POBS_U64: u.u64 = data->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? data->via.u64 : (uint64_t)i; break;
    case FRT_POBS_I64: u.i64 = data->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? data->via.i64 : i; break;
    case FRT_POBS_F32: u.f32 = (float)x; break;
    case FRT_POBS_F64: u.f64 = x; break;
    }
    int ok = fabs(x) < 9.3e18 || dt == FRT_POBS_F32 || dt == FRT_POBS_F64;
    if (!ok) return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': scalar out of range for %s", v->key,
                              frt_pobs_dtype_str(dt));
    return frt_pobs_set_array(v, dt, NULL, 0, &u, frt_pobs_dtype_size(dt));
}

/* A list of numbers as a 1-d f64 array. */
static int mp_list(frt_pobs_value *v, const msgpack_object_array *a)
{
    double *x = malloc((a->size ? a->size : 1) * sizeof *x);
    if (!x) return frt_error(FRT_ERR_OUT_OF_MEMORY, "'%s': out of memory", v->key);
    for (uint32_t i = 0; i < a->size; i++) {
        msgpack_object_type t = a->ptr[i].type;
        if (t == MSGPACK_OBJECT_POSITIVE_INTEGER) x[i] = (double)a->ptr[i].via.u64;
        else if (t == MSGPACK_OBJECT_NEGATIVE_INTEGER) x[i] = (double)a->ptr[i].via.i64;
        else if (t == MSGPACK_OBJECT_FLOAT32 || t == MSGPACK_OBJECT_FLOAT64) x[i] = a->ptr[i].via.f64;
        else {
            free(x);
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': a list whose element %u is not a number", v->key, i);
        }
    }
    int64_t n = a->size;
    int rc = frt_pobs_set_array(v, FRT_POBS_F64, &n, 1, x, (size_t)n * 8);
    free(x);
    return rc;
}

static int mp_map(frt_pobs *o, const char *prefix, const msgpack_object_map *m, int depth);

/* One entry KEY -> VAL of a map at PREFIX. */
static int mp_entry(frt_pobs *o, const char *prefix, const msgpack_object *key, const msgpack_object *val, int depth)
{
    size_t kn;
    const char *k = mp_text(key, &kn);
    if (!k) return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation: a key under '%s' is not a string", prefix);
    if (val->type == MSGPACK_OBJECT_MAP && !mp_find(&val->via.map, "__ndarray__") &&
        !mp_find(&val->via.map, "__npgeneric__")) {
        char sub[FRT_POBS_MAX_KEY + 2];
        if (kn + strlen(prefix) + 1 > FRT_POBS_MAX_KEY || memchr(k, '\0', kn))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation: key under '%s' too long", prefix);
        snprintf(sub, sizeof sub, "%s%s%.*s", prefix, *prefix ? "/" : "", (int)kn, k);
        if (depth >= FRT_POBS_MAX_DEPTH)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': maps nested deeper than %d", sub, FRT_POBS_MAX_DEPTH);
        return mp_map(o, sub, &val->via.map, depth + 1);
    }
    frt_pobs_value *v;
    FRT_TRY(frt_pobs_add(o, prefix, k, kn, &v));
    size_t sn;
    const char *s = mp_text(val, &sn);
    switch (val->type) {
    case MSGPACK_OBJECT_NIL: v->kind = FRT_POBS_NIL; return 0;
    case MSGPACK_OBJECT_STR:
    case MSGPACK_OBJECT_BIN: return frt_pobs_set_string(v, s, sn);
    case MSGPACK_OBJECT_ARRAY: return mp_list(v, &val->via.array);
    case MSGPACK_OBJECT_MAP:
        if (mp_find(&val->via.map, "__ndarray__")) return mp_ndarray(v, &val->via.map);
        return mp_npgeneric(v, &val->via.map);
    case MSGPACK_OBJECT_EXT: return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': msgpack ext types are not read", v->key);
    default: return mp_scalar(v, val);
    }
}

static int mp_map(frt_pobs *o, const char *prefix, const msgpack_object_map *m, int depth)
{
    for (uint32_t i = 0; i < m->size; i++) FRT_TRY(mp_entry(o, prefix, &m->ptr[i].key, &m->ptr[i].val, depth));
    return 0;
}

int frt_pobs_parse_msgpack(const void *buf, size_t len, frt_pobs *out)
{
    if (!buf || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "observation: NULL");
    *out = (frt_pobs){0};
    if (!len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "msgpack: an empty message");
    FRT_TRY(pobs_msgpack_prescan(buf, len));
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc = 0;
    msgpack_unpack_return r = msgpack_unpack_next(&u, buf, len, &off);
    if (r == MSGPACK_UNPACK_NOMEM_ERROR) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "msgpack: out of memory");
    else if (r != MSGPACK_UNPACK_SUCCESS || off != len)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "msgpack: malformed message");
    else if (u.data.type != MSGPACK_OBJECT_MAP)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "msgpack: the message is not a map (a dict of observation keys)");
    else rc = mp_map(out, "", &u.data.via.map, 0);
    msgpack_unpacked_destroy(&u);
    if (rc < 0) frt_pobs_free(out);
    return rc;
}
