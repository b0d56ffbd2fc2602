/*
 * cartridge_pt.c - the PyTorch .pt cartridge reader (frt/cartridge.h).
 *
 * The container is torch.save's zip (torch >= 1.6, torch/serialization.py):
 * ARCHIVE/data.pkl (the pickle), ARCHIVE/data/KEY (one raw storage per
 * persistent id KEY, little-endian), ARCHIVE/byteorder ("little"; absent in
 * old files), ARCHIVE/version. It is read with libzip (CRCs checked); the
 * pickle by the restricted reader of weights/pickle.h, which only builds
 * inert values. The two shapes a cartridge has:
 *   - the recipe's dict of lists: {"trainable_keys": [t0, t1, ...], ...};
 *   - TrainableCache.save's dict of nn.ParameterList: each a ParameterList
 *     object whose BUILD state holds "_parameters", an OrderedDict
 *     {"0": p0, "1": p1, ...} of parameters (_rebuild_parameter of a tensor).
 * Each tensor is [1, n_kv_heads, T, head_dim]; frozen rows come first. The
 * tensor views are gathered (any strides) into frt's [T, H, D] layout.
 */
#include "model/cartridge_internal.h"
#include "weights/pickle.h"

#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

#define PT_MAX_PICKLE (256u << 20)

typedef struct pt_reader {
    zip_t *z;
    const char *name;    /* for messages */
    char prefix[256];    /* "ARCHIVE/" */
    pk_doc *doc;
    const pk_value **st; /* distinct storages (by key) */
    unsigned char **st_data;
    size_t n_st;
} pt_reader;

/* One group of per-layer tensors (a list or a ParameterList). */
typedef struct pt_group {
    const pk_value **t;
    size_t n;
} pt_group;

static int zerr(pt_reader *r, const char *what)
{
    return frt_error(FRT_ERR_FORMAT, "cartridge: %s: %s: %s", r->name, what, zip_strerror(r->z));
}

/* Reads entry `entry` completely into a new buffer of exactly `size` bytes
 * (SIZE_MAX: whatever it holds, up to PT_MAX_PICKLE). */
static int read_entry(pt_reader *r, const char *entry, size_t size, unsigned char **out, size_t *len)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(r->z, entry, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: no entry '%s'", r->name, entry);
    if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cartridge: %s: entry '%s' is compressed (torch.save stores entries uncompressed; refused so "
                         "that a small file cannot expand into a large allocation)",
                         r->name, entry);
    if (size == SIZE_MAX ? st.size > PT_MAX_PICKLE : st.size != size)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: entry '%s' has %llu bytes, expected %zu", r->name, entry,
                         (unsigned long long)st.size, size == SIZE_MAX ? (size_t)PT_MAX_PICKLE : size);
    unsigned char *buf = malloc(st.size ? st.size : 1);
    if (!buf) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory for '%s'", entry);
    zip_file_t *f = zip_fopen(r->z, entry, 0);
    zip_int64_t got = f ? zip_fread(f, buf, st.size) : -1;
    /* a second read sees the end of the entry (and lets libzip check the CRC) */
    char extra;
    zip_int64_t more = f && got == (zip_int64_t)st.size ? zip_fread(f, &extra, 1) : -1;
    if (!f || got != (zip_int64_t)st.size || more != 0) {
        int rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: cannot read entry '%s': %s", r->name, entry,
                           f ? zip_file_strerror(f) : zip_strerror(r->z));
        if (f) zip_fclose(f);
        free(buf);
        return rc;
    }
    zip_fclose(f);
    *out = buf;
    if (len) *len = (size_t)st.size;
    return 0;
}

/* Finds the one ARCHIVE/data.pkl and checks ARCHIVE/byteorder. */
static int find_archive(pt_reader *r)
{
    zip_int64_t n = zip_get_num_entries(r->z, 0);
    int found = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *nm = zip_get_name(r->z, (zip_uint64_t)i, 0);
        if (!nm) return zerr(r, "entry name");
        const char *slash = strchr(nm, '/');
        if (!slash || strcmp(slash + 1, "data.pkl") || (size_t)(slash - nm) + 2 > sizeof r->prefix) continue;
        if (found++)
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: more than one ARCHIVE/data.pkl", r->name);
        snprintf(r->prefix, sizeof r->prefix, "%.*s/", (int)(slash - nm), nm);
    }
    if (!found) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: no ARCHIVE/data.pkl (not a torch.save file)", r->name);
    char entry[300];
    snprintf(entry, sizeof entry, "%sbyteorder", r->prefix);
    if (zip_name_locate(r->z, entry, 0) < 0) return 0; /* older files: little-endian */
    unsigned char *bo = NULL;
    size_t len;
    FRT_TRY(read_entry(r, entry, SIZE_MAX, &bo, &len));
    int little = len == 6 && !memcmp(bo, "little", 6);
    free(bo);
    if (!little) return frt_error(FRT_ERR_UNSUPPORTED, "cartridge: %s: byteorder is not 'little'", r->name);
    return 0;
}

/* Reads every distinct storage (by key) the pickle names. */
static int load_storages(pt_reader *r)
{
    size_t n = pk_storage_count(r->doc);
    r->st = calloc(n ? n : 1, sizeof *r->st);
    r->st_data = calloc(n ? n : 1, sizeof *r->st_data);
    if (!r->st || !r->st_data) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    for (size_t i = 0; i < n; i++) {
        const pk_value *s = pk_storage_at(r->doc, i);
        int dup = 0;
        for (size_t j = 0; j < r->n_st && !dup; j++)
            if (!strcmp(r->st[j]->s, s->s)) {
                if (r->st[j]->dtype != s->dtype || r->st[j]->i != s->i)
                    return frt_error(FRT_ERR_FORMAT, "cartridge: %s: storage '%s' named with two types or sizes",
                                     r->name, s->s);
                dup = 1;
            }
        if (dup) continue;
        if (strchr(s->s, '/') || strlen(s->s) > 64)
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: storage key '%.64s' is not a plain name", r->name, s->s);
        char entry[400];
        snprintf(entry, sizeof entry, "%sdata/%s", r->prefix, s->s);
        r->st[r->n_st] = s;
        FRT_TRY(read_entry(r, entry, (size_t)s->i * frt_dtype_size(s->dtype), &r->st_data[r->n_st], NULL));
        r->n_st++;
    }
    return 0;
}

static const unsigned char *storage_data(const pt_reader *r, const pk_value *s)
{
    for (size_t j = 0; j < r->n_st; j++)
        if (!strcmp(r->st[j]->s, s->s)) return r->st_data[j];
    return NULL;
}

/* ---- the dict of groups ------------------------------------------------------- */

/* A ParameterList's parameters, "0", "1", ... in order. */
static int param_list(pt_reader *r, const char *key, const pk_value *o, pt_group *g)
{
    const pk_value *params = o->state ? pk_dict_get(o->state, "_parameters") : NULL;
    if (!params || params->type != PK_DICT)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' is a ParameterList without _parameters", r->name, key);
    g->n = params->n / 2;
    g->t = calloc(g->n ? g->n : 1, sizeof *g->t);
    if (!g->t) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
    for (size_t i = 0; i < g->n; i++) {
        char want[32];
        snprintf(want, sizeof want, "%zu", i);
        const pk_value *k = params->items[2 * i];
        if (k->type != PK_STR || strcmp(k->s, want))
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' parameter %zu is not named '%s'", r->name, key, i,
                             want);
        g->t[i] = params->items[2 * i + 1];
    }
    return 0;
}

static int group_of(pt_reader *r, const char *key, pt_group *g)
{
    memset(g, 0, sizeof *g);
    const pk_value *v = pk_dict_get(pk_root(r->doc), key);
    if (!v) return 0;
    if (v->type == PK_OBJECT) FRT_TRY(param_list(r, key, v, g));
    else if (v->type == PK_LIST) {
        g->n = v->n;
        g->t = calloc(g->n ? g->n : 1, sizeof *g->t);
        if (!g->t) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge: out of memory");
        for (size_t i = 0; i < g->n; i++) g->t[i] = v->items[i];
    } else
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' is neither a list of tensors nor a ParameterList",
                         r->name, key);
    if (g->n == 0) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' holds no layers", r->name, key);
    for (size_t i = 0; i < g->n; i++)
        if (g->t[i]->type != PK_TENSOR)
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' item %zu is not a tensor", r->name, key, i);
    return 0;
}

static const char *const g_keys[] = {"trainable_keys", "trainable_values", "frozen_keys",
                                     "frozen_values",  "fixed_keys",       "fixed_values"};

static int check_root(pt_reader *r)
{
    const pk_value *root = pk_root(r->doc);
    if (root->type != PK_DICT) return frt_error(FRT_ERR_FORMAT, "cartridge: %s: data.pkl is not a dict", r->name);
    for (size_t i = 0; i < root->n; i += 2) {
        const pk_value *k = root->items[i];
        int known = 0;
        for (size_t j = 0; k->type == PK_STR && j < sizeof g_keys / sizeof g_keys[0]; j++) known |= !strcmp(k->s, g_keys[j]);
        if (!known)
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: unexpected key '%.64s' (trainable_keys, trainable_values, "
                             "frozen_keys / fixed_keys, frozen_values / fixed_values)",
                             r->name, k->type == PK_STR ? k->s : "(not a string)");
    }
    return 0;
}

/* The shape facts every tensor must agree on. */
typedef struct pt_shape {
    int H, D;
    frt_dtype dt;
    int have;
} pt_shape;

static int check_tensor(pt_reader *r, const char *key, size_t i, const pk_value *t, pt_shape *s, int64_t *T)
{
    if (t->ndim != 4 || t->shape[0] != 1)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' layer %zu is not [1, n_kv_heads, T, head_dim]", r->name,
                         key, i);
    if (t->dtype != FRT_DT_BF16 && t->dtype != FRT_DT_F16 && t->dtype != FRT_DT_F32)
        return frt_error(FRT_ERR_UNSUPPORTED, "cartridge: %s: '%s' layer %zu has dtype %s (bf16, f16, f32)", r->name,
                         key, i, frt_dtype_name(t->dtype));
    if (!s->have) *s = (pt_shape){(int)t->shape[1], (int)t->shape[3], t->dtype, 1};
    if (t->shape[1] != s->H || t->shape[3] != s->D || t->dtype != s->dt || t->shape[1] < 1 || t->shape[3] < 1 ||
        t->shape[1] > 4096 || t->shape[3] > 4096)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' layer %zu: [1, %lld, %lld, %lld] %s differs from [1, %d, T, %d] %s",
                         r->name, key, i, (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],
                         frt_dtype_name(t->dtype), s->H, s->D, frt_dtype_name(s->dt));
    if (t->shape[1] * t->shape[2] * t->shape[3] > t->storage->i)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' layer %zu has more elements than its storage", r->name,
                         key, i);
    if (*T < 0) *T = t->shape[2];
    if (t->shape[2] != *T)
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' layer %zu has %lld tokens, layer 0 %lld", r->name, key, i,
                         (long long)t->shape[2], (long long)*T);
    return 0;
}

/* Copies a [1, H, Tg, D] view into rows t0.. of a [T, H, D] payload. */
static void gather(unsigned char *dst, int t0, const pk_value *t, const unsigned char *src, int H, int D)
{
    const size_t es = frt_dtype_size(t->dtype);
    for (int64_t tt = 0; tt < t->shape[2]; tt++)
        for (int h = 0; h < H; h++) {
            unsigned char *row = dst + ((size_t)(t0 + tt) * (size_t)H + (size_t)h) * (size_t)D * es;
            int64_t at = t->i + h * t->stride[1] + tt * t->stride[2];
            if (t->stride[3] == 1) { /* a contiguous head row: one copy */
                memcpy(row, src + (size_t)at * es, (size_t)D * es);
                continue;
            }
            for (int d = 0; d < D; d++) memcpy(row + (size_t)d * es, src + (size_t)(at + d * t->stride[3]) * es, es);
        }
}

/* groups: trainable K, trainable V, frozen K, frozen V (frozen may be empty). */
static int assemble(pt_reader *r, pt_group *g, frt_cartridge **out)
{
    const char *names[4] = {"trainable_keys", "trainable_values", "frozen_keys", "frozen_values"};
    pt_shape s = {0};
    int64_t T[2] = {-1, -1};
    for (int k = 0; k < 4; k++) {
        if (k >= 2 && !g[2].n) break;
        if (g[k].n != g[0].n)
            return frt_error(FRT_ERR_FORMAT, "cartridge: %s: '%s' has %zu layers, '%s' %zu", r->name, names[k],
                             g[k].n, names[0], g[0].n);
        for (size_t i = 0; i < g[k].n; i++) FRT_TRY(check_tensor(r, names[k], i, g[k].t[i], &s, &T[k / 2]));
    }
    int64_t Tf = g[2].n ? T[1] : 0, total = T[0] + Tf;
    if (g[0].n > 4096 || total < 1 || total > (1 << 24))
        return frt_error(FRT_ERR_FORMAT, "cartridge: %s: %zu layers of %lld tokens", r->name, g[0].n, (long long)total);
    frt_cartridge *c = NULL;
    FRT_TRY(frt_cartridge_alloc((int)g[0].n, s.H, s.D, (int)total, s.dt, &c));
    for (size_t l = 0; l < g[0].n; l++)
        for (int kv = 0; kv < 2; kv++) {
            unsigned char *dst = frt_cartridge_half(c, (int)l, kv);
            if (Tf) gather(dst, 0, g[2 + kv].t[l], storage_data(r, g[2 + kv].t[l]->storage), s.H, s.D);
            gather(dst, (int)Tf, g[kv].t[l], storage_data(r, g[kv].t[l]->storage), s.H, s.D);
        }
    c->info.frozen_tokens = (int)Tf;
    c->info.from_pt = 1;
    *out = c;
    return 0;
}

static int read_groups(pt_reader *r, frt_cartridge **out)
{
    FRT_TRY(check_root(r));
    pt_group g[4];
    memset(g, 0, sizeof g);
    int rc = group_of(r, "trainable_keys", &g[0]);
    if (rc == 0) rc = group_of(r, "trainable_values", &g[1]);
    const pk_value *root = pk_root(r->doc);
    int fixed = pk_dict_get(root, "fixed_keys") || pk_dict_get(root, "fixed_values");
    int frozen = pk_dict_get(root, "frozen_keys") || pk_dict_get(root, "frozen_values");
    if (rc == 0 && fixed && frozen)
        rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: both frozen_* and fixed_* keys", r->name);
    if (rc == 0) rc = group_of(r, fixed ? "fixed_keys" : "frozen_keys", &g[2]);
    if (rc == 0) rc = group_of(r, fixed ? "fixed_values" : "frozen_values", &g[3]);
    if (rc == 0 && (!g[0].n || !g[1].n))
        rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: no trainable_keys / trainable_values", r->name);
    if (rc == 0 && !g[2].n != !g[3].n)
        rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: frozen keys without frozen values (or the reverse)", r->name);
    if (rc == 0) rc = assemble(r, g, out);
    for (int k = 0; k < 4; k++) free(g[k].t);
    return rc;
}

static int read_pt(pt_reader *r, frt_cartridge **out)
{
    unsigned char *pkl = NULL;
    size_t len = 0;
    char entry[300];
    int rc = find_archive(r);
    if (rc == 0) {
        snprintf(entry, sizeof entry, "%sdata.pkl", r->prefix);
        rc = read_entry(r, entry, SIZE_MAX, &pkl, &len);
    }
    if (rc == 0) rc = pk_parse(pkl, len, entry, &r->doc);
    if (rc < 0 && rc != FRT_ERR_OUT_OF_MEMORY && pkl) frt_error_prefix("cartridge: %s", r->name);
    if (rc == 0) rc = load_storages(r);
    if (rc == 0) rc = read_groups(r, out);
    free(pkl);
    pk_free(r->doc);
    for (size_t i = 0; i < r->n_st; i++) free(r->st_data[i]);
    free(r->st);
    free(r->st_data);
    return rc;
}

int frt_cartridge_read_pt_memory(const void *data, size_t size, const char *name, frt_cartridge **out)
{
    if (!data || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *out = NULL;
    pt_reader r = {.name = name ? name : "(memory)"};
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(data, size, 0, &ze);
    if (src) r.z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!r.z) {
        int rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: not a readable zip (%s)", r.name, zip_error_strerror(&ze));
        zip_source_free(src);
        zip_error_fini(&ze);
        return rc;
    }
    zip_error_fini(&ze);
    int rc = read_pt(&r, out);
    zip_discard(r.z); /* frees the source */
    if (rc == 0) (*out)->info.file_bytes = size;
    return rc;
}

int frt_cartridge_read_pt(const char *path, frt_cartridge **out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge: NULL argument");
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return frt_error(errno == ENOENT ? FRT_ERR_NOT_FOUND : FRT_ERR_IO, "cartridge: %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return frt_error(FRT_ERR_IO, "cartridge: %s: not a regular file", path);
    int zerrno = 0;
    pt_reader r = {.name = path};
    r.z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerrno);
    if (!r.z) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerrno);
        int rc = frt_error(FRT_ERR_FORMAT, "cartridge: %s: not a readable zip (%s)", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return rc;
    }
    int rc = read_pt(&r, out);
    zip_discard(r.z);
    if (rc == 0) (*out)->info.file_bytes = (uint64_t)st.st_size;
    return rc;
}
