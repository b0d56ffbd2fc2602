/*
 * cartridge_file.c - frt's cartridge format (docs/cartridges.md): a
 * directory holding kv.safetensors (layers.L.k, layers.L.v [T, H, D] in the
 * cartridge's dtype, and token_ids [T] i32 when the ids are known) and
 * manifest.json (every field of frt_cartridge_info, validated strictly).
 */
#include "model/cartridge_internal.h"

#include "frt/fs.h"
#include "util/error.h"
#include "util/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#define CART_FORMAT "frt-cartridge"
#define CART_VERSION 2 /* written; version 1 (no starts_with) still loads */
#define CART_PAYLOAD "kv.safetensors"
#define CART_MANIFEST "manifest.json"
#define CART_MAX_MANIFEST (1u << 20)

static const char *dt_name(frt_dtype dt) { return dt == FRT_DT_BF16 ? "bf16" : dt == FRT_DT_F16 ? "f16" : "f32"; }

static int join(char *out, size_t n, const char *dir, const char *file)
{
    if ((size_t)snprintf(out, n, "%s/%s", dir, file) >= n)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: path '%s' too long", dir);
    return 0;
}

/* xxh64 of a whole file and its size. */
static int hash_file(const char *path, uint64_t *hash, uint64_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return frt_error(errno == ENOENT ? FRT_ERR_NOT_FOUND : FRT_ERR_IO, "cartridge: %s: %s", path, strerror(errno));
    XXH64_state_t *h = XXH64_createState();
    unsigned char *buf = malloc(1 << 20);
    if (!h || !buf) {
        fclose(f);
        XXH64_freeState(h);
        free(buf);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    }
    XXH64_reset(h, 0);
    uint64_t total = 0;
    size_t got;
    while ((got = fread(buf, 1, 1 << 20, f)) > 0) {
        XXH64_update(h, buf, got);
        total += got;
    }
    int rc = ferror(f) ? frt_error(FRT_ERR_IO, "cartridge: cannot read %s", path) : 0;
    fclose(f);
    *hash = XXH64_digest(h);
    *size = total;
    XXH64_freeState(h);
    free(buf);
    return rc;
}

/* ---- save ------------------------------------------------------------------ */

static int write_payload(const frt_cartridge *c, const char *path)
{
    frt_st_writer *w = NULL;
    FRT_TRY(frt_st_writer_create(&w));
    int rc = frt_st_writer_set_metadata(w, "frt.cartridge", c->info.id);
    const int64_t shape[3] = {c->info.tokens, c->info.n_kv_heads, c->info.head_dim};
    for (int l = 0; l < c->info.n_layers && rc == 0; l++)
        for (int kv = 0; kv < 2 && rc == 0; kv++) {
            char name[64];
            snprintf(name, sizeof name, "layers.%d.%s", l, kv ? "v" : "k");
            rc = frt_st_writer_add(w, name, c->info.dtype, 3, shape, frt_cartridge_half((frt_cartridge *)c, l, kv));
        }
    const int64_t nt = c->info.tokens;
    if (rc == 0 && c->ids) rc = frt_st_writer_add(w, "token_ids", FRT_DT_I32, 1, &nt, c->ids);
    if (rc == 0) rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    return rc;
}

static json_t *manifest_json(const frt_cartridge_info *in, const int32_t *start)
{
    char fp[32], sum[40];
    snprintf(fp, sizeof fp, "%016" PRIx64, in->model_fingerprint);
    snprintf(sum, sizeof sum, "xxh64:%016" PRIx64, in->checksum);
    json_t *labels = json_array();
    for (int i = 0; i < in->n_labels; i++) json_array_append_new(labels, json_string(in->labels[i]));
    json_t *starts = json_array();
    for (int i = 0; i < in->n_starts_with; i++) json_array_append_new(starts, json_integer(start[i]));
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:i, s:i, s:o, s:s, s:I, s:s, s:o, s:o, s:o}",
                     "format", CART_FORMAT, "version", CART_VERSION, "cartridge_id", in->id, "model_id", in->model_id,
                     "model_fingerprint", fp, "layers", in->n_layers, "kv_heads", in->n_kv_heads, "head_dim",
                     in->head_dim, "dtype", dt_name(in->dtype), "tokens", in->tokens, "frozen_tokens",
                     in->frozen_tokens, "starts_with", starts, "checksum", sum, "file_bytes", (json_int_t)in->file_bytes, "created",
                     in->created, "training_steps",
                     in->training_steps >= 0 ? json_integer(in->training_steps) : json_null(), "source_document",
                     in->source_document[0] ? json_string(in->source_document) : json_null(), "labels", labels);
}

int frt_cartridge_save(frt_cartridge *c, const char *dir)
{
    if (!c || !dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    if (!c->info.id[0] || !c->info.model_id[0] || !c->info.model_fingerprint)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "cartridge: saving needs an id, a model id and a model binding (import or export it with --model)");
    char payload[4096], manifest[4096];
    FRT_TRY(join(payload, sizeof payload, dir, CART_PAYLOAD));
    FRT_TRY(join(manifest, sizeof manifest, dir, CART_MANIFEST));
    FRT_TRY(frt_mkdir_p(dir));
    frt_cartridge_info in = c->info;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(in.created, sizeof in.created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    in.from_pt = 0;
    FRT_TRY(write_payload(c, payload));
    FRT_TRY(hash_file(payload, &in.checksum, &in.file_bytes));
    json_t *j = manifest_json(&in, c->start);
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory for the manifest");
    int rc = frt_file_write_atomic(manifest, text, strlen(text));
    free(text);
    if (rc == 0) c->info = in;
    return rc;
}

/* ---- load -------------------------------------------------------------------- */

static const char *const g_fields[] = {"format",        "version",  "cartridge_id",   "model_id",   "model_fingerprint",
                                       "layers",        "kv_heads", "head_dim",       "dtype",      "tokens",
                                       "frozen_tokens", "checksum", "file_bytes",     "created",    "training_steps",
                                       "source_document", "labels", "starts_with"};

static int check_keys(const json_t *j, const char *what)
{
    const char *key;
    json_t *v = NULL;
    json_object_foreach((json_t *)j, key, v) {
        int known = 0;
        for (size_t i = 0; i < sizeof g_fields / sizeof g_fields[0]; i++) known |= !strcmp(key, g_fields[i]);
        if (!known) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: unknown field '%.64s'", what, key);
    }
    return 0;
}

static int hex64(const char *s, const char *prefix, uint64_t *out)
{
    size_t pl = strlen(prefix);
    if (strncmp(s, prefix, pl) || strlen(s + pl) != 16) return -1;
    uint64_t v = 0;
    for (const char *p = s + pl; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* A json getter's "present" (1) or "absent" (0) as success. */
static int present(int rc) { return rc > 0 ? 0 : rc; }

static int int_field(const json_t *j, const char *key, long long lo, long long hi, int *out, const char *what)
{
    long long v;
    FRT_TRY(frt_json_int(j, key, 1, lo, hi, &v, what));
    *out = (int)v; /* required: present */
    return 0;
}

static int string_fields(const json_t *j, frt_cartridge_info *in, const char *what)
{
    char buf[64], dt[8];
    FRT_TRY(frt_json_string(j, "format", 1, buf, sizeof buf, what));
    if (strcmp(buf, CART_FORMAT)) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: format '%s' is not '%s'", what, buf, CART_FORMAT);
    FRT_TRY(frt_json_string(j, "cartridge_id", 1, in->id, sizeof in->id, what));
    if (!frt_cartridge_id_ok(in->id)) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: cartridge_id '%s' is not a valid id", what, in->id);
    FRT_TRY(frt_json_string(j, "model_id", 1, in->model_id, sizeof in->model_id, what));
    if (!in->model_id[0]) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: model_id is empty", what);
    FRT_TRY(frt_json_string(j, "model_fingerprint", 1, buf, sizeof buf, what));
    if (hex64(buf, "", &in->model_fingerprint) || !in->model_fingerprint)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: model_fingerprint '%s' is not 16 lowercase hex digits", what, buf);
    FRT_TRY(frt_json_string(j, "checksum", 1, buf, sizeof buf, what));
    if (hex64(buf, "xxh64:", &in->checksum))
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: checksum '%s' is not xxh64:<16 hex digits>", what, buf);
    FRT_TRY(frt_json_string(j, "dtype", 1, dt, sizeof dt, what));
    if (!strcmp(dt, "bf16")) in->dtype = FRT_DT_BF16;
    else if (!strcmp(dt, "f16")) in->dtype = FRT_DT_F16;
    else if (!strcmp(dt, "f32")) in->dtype = FRT_DT_F32;
    else return frt_error(FRT_ERR_FORMAT, "cartridge: %s: dtype '%s' (bf16, f16, f32)", what, dt);
    FRT_TRY(frt_json_string(j, "created", 1, in->created, sizeof in->created, what));
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(in->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: created '%s' is not YYYY-MM-DDTHH:MM:SSZ", what, in->created);
    FRT_TRY(frt_json_string(j, "source_document", 0, in->source_document, sizeof in->source_document, what));
    return 0;
}

static int labels_field(const json_t *j, frt_cartridge_info *in, const char *what)
{
    json_t *arr = NULL;
    FRT_TRY(frt_json_child(j, "labels", 1, JSON_ARRAY, &arr, what));
    if (json_array_size(arr) > FRT_CARTRIDGE_MAX_LABELS)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: %zu labels (at most %d)", what, json_array_size(arr),
                         FRT_CARTRIDGE_MAX_LABELS);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *s = json_array_get(arr, i);
        if (!json_is_string(s) || json_string_length(s) < 1 || json_string_length(s) >= FRT_CARTRIDGE_LABEL_MAX ||
            strlen(json_string_value(s)) != json_string_length(s))
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: label %zu is not a string of 1 to %d bytes", what, i,
                             FRT_CARTRIDGE_LABEL_MAX - 1);
        snprintf(in->labels[i], sizeof in->labels[i], "%s", json_string_value(s));
    }
    in->n_labels = (int)json_array_size(arr);
    return 0;
}

/* starts_with (version 2, required; version 1 has none): an array of at
 * most min(tokens, FRT_CARTRIDGE_STARTS_MAX) token ids >= 0, into *out
 * (malloc'd, NULL when empty). */
static int starts_field(const json_t *j, int version, frt_cartridge_info *in, int32_t **out, const char *what)
{
    json_t *arr = NULL;
    *out = NULL;
    in->n_starts_with = 0;
    int rc = frt_json_child(j, "starts_with", version >= 2, JSON_ARRAY, &arr, what);
    if (rc < 0) return rc;
    if (version < 2 && arr)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: starts_with is a version 2 field (version is 1)", what);
    size_t n = arr ? json_array_size(arr) : 0;
    if (n > (size_t)in->tokens || n > FRT_CARTRIDGE_STARTS_MAX)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: starts_with holds %zu tokens (at most %d and the %d tokens)",
                         what, n, FRT_CARTRIDGE_STARTS_MAX, in->tokens);
    if (n && !(*out = malloc(n * sizeof **out))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            free(*out);
            *out = NULL;
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: starts_with[%zu] is not a token id (0 to 2^31-1)", what, i);
        }
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    in->n_starts_with = (int)n;
    return 0;
}

int frt_cartridge_manifest_parse(const char *text, size_t len, const char *what, frt_cartridge_info *in,
                                 int32_t **start)
{
    json_t *j = NULL;
    *start = NULL;
    FRT_TRY(frt_json_parse(text, len, JSON_REJECT_DUPLICATES, &j, what));
    memset(in, 0, sizeof *in);
    int rc = json_is_object(j) ? 0 : frt_error(FRT_ERR_FORMAT, "cartridge: %s: not a JSON object", what);
    long long v = 0;
    if (rc == 0) rc = check_keys(j, what);
    long long version = 0;
    if (rc == 0) rc = present(frt_json_int(j, "version", 1, 1, CART_VERSION, &version, what));
    if (rc == 0) rc = string_fields(j, in, what);
    if (rc == 0) rc = int_field(j, "layers", 1, 4096, &in->n_layers, what);
    if (rc == 0) rc = int_field(j, "kv_heads", 1, 4096, &in->n_kv_heads, what);
    if (rc == 0) rc = int_field(j, "head_dim", 1, 4096, &in->head_dim, what);
    if (rc == 0) rc = int_field(j, "tokens", 1, 1 << 24, &in->tokens, what);
    if (rc == 0) rc = int_field(j, "frozen_tokens", 0, in->tokens, &in->frozen_tokens, what);
    if (rc == 0) rc = present(frt_json_int(j, "file_bytes", 1, 1, INT64_MAX, &v, what));
    if (rc == 0) in->file_bytes = (uint64_t)v;
    in->training_steps = -1;
    if (rc == 0) rc = present(frt_json_int(j, "training_steps", 0, 0, INT64_MAX, &in->training_steps, what));
    if (rc == 0) rc = labels_field(j, in, what);
    if (rc == 0) rc = starts_field(j, (int)version, in, start, what);
    json_decref(j);
    return rc < 0 ? rc : 0;
}

/* The payload's tensors against the manifest, copied into c. */
static int read_payload(frt_cartridge *c, const void *data, size_t size, const char *path)
{
    frt_safetensors *st = NULL;
    FRT_TRY(frt_safetensors_open_memory(data, size, path, &st));
    const frt_cartridge_info *in = &c->info;
    int rc = 0, n = frt_safetensors_count(st);
    const frt_tensor *ids = frt_safetensors_find(st, "token_ids");
    if (n != 2 * in->n_layers + (ids ? 1 : 0))
        rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: %d tensors for %d layers", path, n, in->n_layers);
    for (int l = 0; l < in->n_layers && rc == 0; l++)
        for (int kv = 0; kv < 2 && rc == 0; kv++) {
            char name[64];
            snprintf(name, sizeof name, "layers.%d.%s", l, kv ? "v" : "k");
            const frt_tensor *t = frt_safetensors_find(st, name);
            if (!t || t->dtype != in->dtype || t->ndim != 3 || t->shape[0] != in->tokens ||
                t->shape[1] != in->n_kv_heads || t->shape[2] != in->head_dim)
                rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: tensor '%s' missing or not [%d, %d, %d] %s", path, name,
                               in->tokens, in->n_kv_heads, in->head_dim, dt_name(in->dtype));
            else memcpy(frt_cartridge_half(c, l, kv), t->data, c->half_bytes);
        }
    if (rc == 0 && ids) {
        if (ids->dtype != FRT_DT_I32 || ids->ndim != 1 || ids->shape[0] != in->tokens)
            rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: token_ids is not [%d] I32", path, in->tokens);
        else if (!(c->ids = malloc(ids->nbytes)))
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
        else memcpy(c->ids, ids->data, ids->nbytes);
    }
    frt_safetensors_close(st);
    return rc;
}

int frt_cartridge_load(const char *dir, frt_cartridge **out)
{
    if (!dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *out = NULL;
    char payload[4096], manifest[4096];
    FRT_TRY(join(payload, sizeof payload, dir, CART_PAYLOAD));
    FRT_TRY(join(manifest, sizeof manifest, dir, CART_MANIFEST));
    char *text;
    size_t len;
    FRT_TRY(frt_file_read_all(manifest, CART_MAX_MANIFEST, &text, &len));
    frt_cartridge_info in;
    int32_t *start = NULL;
    int rc = frt_cartridge_manifest_parse(text, len, manifest, &in, &start);
    free(text);
    FRT_TRY(rc);
    char *buf = NULL;
    size_t blen = 0;
    rc = frt_file_read_all(payload, (size_t)in.file_bytes, &buf, &blen);
    if (rc < 0) free(start);
    if (rc == FRT_ERR_FORMAT)
        return frt_error(FRT_ERR_MISMATCH, "cartridge: %s: larger than the %llu bytes the manifest says", payload,
                         (unsigned long long)in.file_bytes);
    FRT_TRY(rc);
    uint64_t hash = XXH64(buf, blen, 0);
    frt_cartridge *c = NULL;
    if (blen != in.file_bytes)
        rc = frt_error(FRT_ERR_MISMATCH, "cartridge: %s: %zu bytes, the manifest says %llu", payload, blen,
                       (unsigned long long)in.file_bytes);
    else if (hash != in.checksum)
        rc = frt_error(FRT_ERR_MISMATCH, "cartridge: %s: checksum mismatch (xxh64 %016llx, manifest %016llx)",
                       payload, (unsigned long long)hash, (unsigned long long)in.checksum);
    if (rc == 0) rc = frt_cartridge_alloc(in.n_layers, in.n_kv_heads, in.head_dim, in.tokens, in.dtype, &c);
    if (rc == 0) {
        c->info = in;
        c->info.n_starts_with = 0; /* set below, checked against the payload's token ids */
        rc = read_payload(c, buf, blen, payload);
    }
    if (rc == 0 && (rc = frt_cartridge_set_starts_with(c, start, in.n_starts_with)) == FRT_ERR_MISMATCH)
        rc = frt_error(FRT_ERR_FORMAT, "%s: %s", manifest, frt_last_error());
    free(start);
    free(buf);
    if (rc < 0) {
        frt_cartridge_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int frt_cartridge_open(const char *path, frt_cartridge **out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    struct stat st;
    if (stat(path, &st) != 0)
        return frt_error(errno == ENOENT ? FRT_ERR_NOT_FOUND : FRT_ERR_IO, "cartridge: %s: %s", path, strerror(errno));
    return S_ISDIR(st.st_mode) ? frt_cartridge_load(path, out) : frt_cartridge_read_pt(path, out);
}
