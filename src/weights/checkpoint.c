/*
 * checkpoint.c - a model's weights across safetensors files (single or
 * sharded with model.safetensors.index.json) or in memory, with one O(1)
 * name index over all of them. Rules: checkpoint.h.
 */
#include "frt/checkpoint.h"

#include "util/error.h"
#include "frt/fs.h"
#include "util/json.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define INDEX_MAX_BYTES (256u << 20)

struct frt_checkpoint {
    int in_memory;
    frt_safetensors **files;
    int n_files;
    const frt_tensor **list; /* [n] in order */
    int n, cap;
    frt_tensor **owned;      /* in memory: [n] tensors we allocated (same order as list) */
    int *slots;              /* open-addressing table of list indices, -1 = empty */
    size_t n_slots;          /* power of two, > 2n */
    uint64_t bytes, numel;
};

static uint64_t name_hash(const char *s) { return XXH3_64bits(s, strlen(s)); }

static int index_insert(frt_checkpoint *ck, int idx)
{
    if ((size_t)(ck->n + 1) * 2 > ck->n_slots) {
        size_t ns = ck->n_slots ? ck->n_slots * 2 : 256;
        while ((size_t)(ck->n + 1) * 2 > ns) ns *= 2;
        int *s = malloc(ns * sizeof *s);
        if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory for the name index");
        memset(s, 0xFF, ns * sizeof *s);
        for (size_t i = 0; i < ck->n_slots; i++) {
            int j = ck->slots[i];
            if (j < 0) continue;
            size_t h = (size_t)name_hash(ck->list[j]->name) & (ns - 1);
            while (s[h] >= 0) h = (h + 1) & (ns - 1);
            s[h] = j;
        }
        free(ck->slots);
        ck->slots = s;
        ck->n_slots = ns;
    }
    size_t h = (size_t)name_hash(ck->list[idx]->name) & (ck->n_slots - 1);
    while (ck->slots[h] >= 0) h = (h + 1) & (ck->n_slots - 1);
    ck->slots[h] = idx;
    return 0;
}

const frt_tensor *frt_checkpoint_find(const frt_checkpoint *ck, const char *name)
{
    if (!ck || !name || !ck->n_slots) return NULL;
    size_t h = (size_t)name_hash(name) & (ck->n_slots - 1);
    while (ck->slots[h] >= 0) {
        const frt_tensor *t = ck->list[ck->slots[h]];
        if (!strcmp(t->name, name)) return t;
        h = (h + 1) & (ck->n_slots - 1);
    }
    return NULL;
}

/* Appends t to the list and the index; FRT_ERR_FORMAT for a name seen before. */
static int list_add(frt_checkpoint *ck, const frt_tensor *t)
{
    const frt_tensor *prev = frt_checkpoint_find(ck, t->name);
    if (prev) {
        if (prev->file && t->file)
            return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' appears in both %s and %s", t->name, prev->file,
                             t->file);
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: duplicate tensor name '%s'", t->name);
    }
    if (ck->n == ck->cap) {
        int nc = ck->cap ? 2 * ck->cap : 256;
        const frt_tensor **nl = realloc(ck->list, (size_t)nc * sizeof *nl);
        if (!nl) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
        ck->list = nl;
        if (ck->in_memory) {
            frt_tensor **no = realloc(ck->owned, (size_t)nc * sizeof *no);
            if (!no) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
            ck->owned = no;
        }
        ck->cap = nc;
    }
    ck->list[ck->n] = t;
    int rc = index_insert(ck, ck->n);
    if (rc < 0) return rc;
    ck->n++;
    ck->bytes += t->nbytes;
    ck->numel += (uint64_t)frt_tensor_numel(t);
    return 0;
}

void frt_checkpoint_close(frt_checkpoint *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n_files; i++) frt_safetensors_close(ck->files[i]);
    free(ck->files);
    if (ck->in_memory)
        for (int i = 0; i < ck->n; i++) {
            free((char *)ck->owned[i]->name);
            free((void *)ck->owned[i]->data);
            free(ck->owned[i]);
        }
    free(ck->owned);
    free(ck->list);
    free(ck->slots);
    free(ck);
}

int frt_checkpoint_create(frt_checkpoint **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: NULL argument");
    frt_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
    ck->in_memory = 1;
    *out = ck;
    return 0;
}

int frt_checkpoint_add(frt_checkpoint *ck, const char *name, frt_dtype dtype, int ndim, const int64_t *shape,
                       void *data)
{
    int rc = 0;
    frt_tensor *t = NULL;
    if (!ck || !name || !*name || (ndim > 0 && !shape)) {
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: NULL or empty argument");
        goto fail;
    }
    if (!ck->in_memory) {
        rc = frt_error(FRT_ERR_STATE, "checkpoint: cannot add '%s' to a checkpoint opened from files", name);
        goto fail;
    }
    if (frt_dtype_size(dtype) == 0 || ndim < 0 || ndim > FRT_TENSOR_MAX_DIMS) {
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: '%s': invalid dtype or ndim %d", name, ndim);
        goto fail;
    }
    uint64_t n = frt_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: '%s': negative dim", name);
            goto fail;
        }
        if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) || n > (uint64_t)INT64_MAX) {
            rc = frt_error(FRT_ERR_OUT_OF_RANGE, "checkpoint: '%s': size overflows", name);
            goto fail;
        }
    }
    if (n > 0 && !data) {
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: '%s': NULL data", name);
        goto fail;
    }
    t = calloc(1, sizeof *t);
    char *nm = strdup(name);
    if (!t || !nm) {
        free(nm);
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
        goto fail;
    }
    t->name = nm;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    t->nbytes = (size_t)n;
    t->file = NULL;
    if ((rc = list_add(ck, t)) < 0) {
        free(nm);
        goto fail;
    }
    ck->owned[ck->n - 1] = t;
    return 0;
fail:
    free(t);
    free(data);
    return rc;
}

static int add_file(frt_checkpoint *ck, const char *path)
{
    frt_safetensors *st;
    FRT_TRY(frt_safetensors_open(path, &st));
    frt_safetensors **nf = realloc(ck->files, (size_t)(ck->n_files + 1) * sizeof *nf);
    if (!nf) {
        frt_safetensors_close(st);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
    }
    ck->files = nf;
    ck->files[ck->n_files++] = st;
    for (int i = 0; i < frt_safetensors_count(st); i++) FRT_TRY(list_add(ck, frt_safetensors_at(st, i)));
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int open_index(frt_checkpoint *ck, const char *dir, const char *index_path)
{
    char *text;
    size_t len;
    FRT_TRY(frt_file_read_all(index_path, INDEX_MAX_BYTES, &text, &len));
    json_t *root;
    int rc = frt_json_parse(text, len, JSON_REJECT_DUPLICATES, &root, index_path);
    free(text);
    if (rc < 0) return rc;
    json_t *wm = NULL;
    const char **shards = NULL;
    size_t n_shards = 0;
    if (!json_is_object(root)) {
        rc = frt_error(FRT_ERR_FORMAT, "%s: the top level is not a JSON object", index_path);
        goto out;
    }
    if ((rc = frt_json_child(root, "weight_map", 1, JSON_OBJECT, &wm, index_path)) < 0) goto out;
    size_t n = json_object_size(wm);
    shards = calloc(n ? n : 1, sizeof *shards);
    if (!shards) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v)
    {
        const char *f = json_string_value(v);
        if (!f || !*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..")) {
            rc = frt_error(FRT_ERR_FORMAT, "%s: weight_map entry '%s' must name a file in the directory, got %s%s%s",
                           index_path, key, f ? "'" : "", f ? f : "a non-string", f ? "'" : "");
            goto out;
        }
        shards[n_shards++] = f;
    }
    qsort(shards, n_shards, sizeof *shards, cmp_str);
    for (size_t i = 0; i < n_shards; i++) {
        if (i > 0 && !strcmp(shards[i], shards[i - 1])) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, shards[i]) >= (int)sizeof path) {
            rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: path too long: %s/%s", dir, shards[i]);
            goto out;
        }
        if ((rc = add_file(ck, path)) < 0) {
            if (rc == FRT_ERR_NOT_FOUND) frt_error_prefix("%s names a shard that is missing", index_path);
            goto out;
        }
    }
    /* Every weight_map entry is in the shard it names. */
    json_object_foreach(wm, key, v)
    {
        const frt_tensor *t = frt_checkpoint_find(ck, key);
        const char *f = json_string_value(v);
        if (!t) {
            rc = frt_error(FRT_ERR_FORMAT, "%s: weight_map puts tensor '%s' in %s, which has no such tensor",
                           index_path, key, f);
            goto out;
        }
        const char *base = strrchr(t->file, '/');
        base = base ? base + 1 : t->file;
        if (strcmp(base, f) != 0) {
            rc = frt_error(FRT_ERR_FORMAT, "%s: weight_map puts tensor '%s' in %s, but it is in %s", index_path, key,
                           f, t->file);
            goto out;
        }
    }
    rc = 0;
out:
    free(shards);
    json_decref(root);
    return rc;
}

int frt_checkpoint_open(const char *model_dir, frt_checkpoint **out)
{
    if (!model_dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: NULL argument");
    frt_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
    char single[PATH_MAX], index[PATH_MAX];
    int rc;
    if (snprintf(single, sizeof single, "%s/model.safetensors", model_dir) >= (int)sizeof single ||
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", model_dir) >= (int)sizeof index) {
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint: path too long: %s", model_dir);
        goto fail;
    }
    struct stat sb;
    if (stat(single, &sb) == 0)
        rc = add_file(ck, single);
    else if (stat(index, &sb) == 0)
        rc = open_index(ck, model_dir, index);
    else
        rc = frt_error(FRT_ERR_NOT_FOUND, "checkpoint: %s has neither model.safetensors nor "
                                          "model.safetensors.index.json",
                       model_dir);
    if (rc < 0) goto fail;
    *out = ck;
    return 0;
fail:
    frt_checkpoint_close(ck);
    return rc;
}

int frt_checkpoint_count(const frt_checkpoint *ck) { return ck ? ck->n : 0; }

const frt_tensor *frt_checkpoint_at(const frt_checkpoint *ck, int i)
{
    return ck && i >= 0 && i < ck->n ? ck->list[i] : NULL;
}

int frt_checkpoint_file_count(const frt_checkpoint *ck) { return ck ? ck->n_files : 0; }
uint64_t frt_checkpoint_bytes(const frt_checkpoint *ck) { return ck ? ck->bytes : 0; }
uint64_t frt_checkpoint_numel(const frt_checkpoint *ck) { return ck ? ck->numel : 0; }

/* ---- writing ------------------------------------------------------------ */

static int write_file(const frt_checkpoint *ck, int first, int last, const char *path, int flags)
{
    frt_st_writer *w;
    FRT_TRY(frt_st_writer_create(&w));
    frt_st_writer_set_sync(w, !(flags & FRT_CKPT_WRITE_NO_FSYNC));
    int rc = 0;
    for (int i = first; rc == 0 && i < last; i++) {
        const frt_tensor *t = ck->list[i];
        rc = frt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    if (rc == 0) rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    return rc;
}

static int is_shard_name(const char *s)
{
    unsigned a, b;
    int n = 0;
    return strlen(s) == 32 && sscanf(s, "model-%5u-of-%5u.safetensors%n", &a, &b, &n) == 2 && n == 32;
}

/* Removes stale shard files (our naming pattern only) not in keep[0..nk). */
static void remove_stale_shards(const char *dir, char **keep, int nk)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_shard_name(e->d_name)) continue;
        int kept = 0;
        for (int i = 0; i < nk && !kept; i++) kept = !strcmp(keep[i], e->d_name);
        if (kept) continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p) unlink(p);
    }
    closedir(d);
}

int frt_checkpoint_write(const frt_checkpoint *ck, const char *dir, uint64_t shard_bytes, int flags)
{
    if (!ck || !dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint write: NULL argument");
    char single[PATH_MAX], index[PATH_MAX];
    if (snprintf(single, sizeof single, "%s/model.safetensors", dir) >= (int)sizeof single ||
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir) >= (int)sizeof index)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint write: path too long: %s", dir);

    /* Group tensors greedily in order. */
    int *start = malloc(sizeof(int) * (size_t)(ck->n + 2));
    if (!start) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint write: out of memory");
    int ns = 0;
    uint64_t cur = 0;
    start[ns++] = 0;
    for (int i = 0; i < ck->n; i++) {
        uint64_t b = ck->list[i]->nbytes;
        if (shard_bytes && cur > 0 && cur + b > shard_bytes) {
            start[ns++] = i;
            cur = 0;
        }
        cur += b;
    }
    start[ns] = ck->n;

    int rc = 0;
    if (ns == 1) {
        rc = write_file(ck, 0, ck->n, single, flags);
        if (rc == 0) {
            unlink(index);
            remove_stale_shards(dir, NULL, 0);
        }
        free(start);
        return rc;
    }

    char **names = calloc((size_t)ns, sizeof *names);
    json_t *root = json_object(), *meta = json_object(), *wm = json_object();
    if (!names || !root || !meta || !wm) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint write: out of memory");
    for (int s = 0; rc == 0 && s < ns; s++) {
        names[s] = malloc(64);
        if (!names[s]) {
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint write: out of memory");
            break;
        }
        snprintf(names[s], 64, "model-%05d-of-%05d.safetensors", s + 1, ns);
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[s]) >= (int)sizeof path) {
            rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "checkpoint write: path too long: %s", dir);
            break;
        }
        rc = write_file(ck, start[s], start[s + 1], path, flags);
        for (int i = start[s]; rc == 0 && i < start[s + 1]; i++)
            if (json_object_set_new(wm, ck->list[i]->name, json_string(names[s])) != 0)
                rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint write: out of memory");
    }
    if (rc == 0) {
        json_object_set_new(meta, "total_size", json_integer((json_int_t)ck->bytes));
        json_object_set_new(root, "metadata", meta);
        json_object_set_new(root, "weight_map", wm);
        meta = wm = NULL;
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!s) {
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint write: out of memory");
        } else {
            char tmp[PATH_MAX + 8];
            snprintf(tmp, sizeof tmp, "%s.tmp", index);
            FILE *f = fopen(tmp, "wb");
            int ok = f && fputs(s, f) >= 0 && fputc('\n', f) != EOF;
            ok = f && fflush(f) == 0 && ((flags & FRT_CKPT_WRITE_NO_FSYNC) || fsync(fileno(f)) == 0) && ok;
            if (f && fclose(f) != 0) ok = 0;
            if (!ok || rename(tmp, index) != 0) {
                int e = errno;
                unlink(tmp);
                rc = frt_error(FRT_ERR_IO, "checkpoint write: %s: %s", index, strerror(e));
            }
            free(s);
        }
    }
    if (rc == 0) {
        unlink(single);
        remove_stale_shards(dir, names, ns);
    }
    for (int s = 0; names && s < ns; s++) free(names[s]);
    free(names);
    json_decref(meta);
    json_decref(wm);
    json_decref(root);
    free(start);
    return rc;
}
