/*
 * serving/registry.c - the capsule registry: tiers, byte budgets, pinning,
 * LRU demotion, promotion on restore, salted prefix matching, the disk
 * tier's persistence. See registry.h.
 */
#include "serving/registry.h"

#include "serving/registry_db.h"
#include "util/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

struct frt_registry {
    frt_engine *e;
    size_t budget[FRT_ENGINE_N_TIERS];
    char *dir;
    frt_capdb *db;
    frt_cap **caps; /* creation order */
    int n, cap;
    uint64_t next_id, clock;
    uint64_t prot[16]; /* entries being placed, promoted or persisted: never victims */
    int n_prot;
    size_t disk_other; /* bytes in the dir that are not capsules of this registry (charged to the disk budget) */
    char **row_names;  /* during open: the file names of every index row (any model) */
    int n_row_names, cap_row_names;
    frt_registry_stats st;
    frt_cart_residency_stats cart; /* counters only: bytes and count are computed */
};

const char *frt_cap_kind_name(frt_cap_kind k)
{
    return k == FRT_CAP_PREFIX ? "prefix" : k == FRT_CAP_SESSION ? "session" : "cartridge";
}

uint64_t frt_salt_hash(const void *salt, size_t salt_len)
{
    return salt && salt_len ? XXH64(salt, salt_len, 0x5A17ull) : 0;
}

/* ---- bookkeeping ------------------------------------------------------------ */

static int find_index(const frt_registry *r, uint64_t id)
{
    for (int i = 0; i < r->n; i++)
        if (r->caps[i]->id == id) return i;
    return -1;
}

const frt_cap *frt_registry_get(const frt_registry *r, uint64_t id)
{
    int i = r && id ? find_index(r, id) : -1;
    return i < 0 ? NULL : r->caps[i];
}

int frt_registry_count(const frt_registry *r) { return r ? r->n : 0; }
const frt_cap *frt_registry_at(const frt_registry *r, int i) { return r && i >= 0 && i < r->n ? r->caps[i] : NULL; }

/* Memory tiers count entries whose handle lives there; the disk tier counts files. */
static int in_tier(const frt_cap *c, int tier)
{
    return tier == FRT_ENGINE_TIER_DISK ? c->persisted : (c->handle && c->tier == tier);
}

/* What c costs in a tier: the payload in memory; on disk its file's size
 * (the payload plus the metadata and alignment of the format), never less
 * than the payload (the fake engine's files are smaller than the sizes it
 * simulates). */
static size_t tier_bytes(const frt_cap *c, int tier)
{
    return tier == FRT_ENGINE_TIER_DISK && c->file_bytes > c->bytes ? c->file_bytes : c->bytes;
}

/* Notes the size of c's file (after it is written, or found at open). */
static void note_file(frt_cap *c)
{
    struct stat sb;
    c->file_bytes = c->path && stat(c->path, &sb) == 0 ? (size_t)sb.st_size : 0;
}

size_t frt_registry_bytes(const frt_registry *r, int tier)
{
    size_t b = r && tier == FRT_ENGINE_TIER_DISK ? r->disk_other : 0;
    for (int i = 0; r && i < r->n; i++)
        if (in_tier(r->caps[i], tier)) b += tier_bytes(r->caps[i], tier);
    return b;
}

size_t frt_registry_disk_other_bytes(const frt_registry *r) { return r ? r->disk_other : 0; }

int frt_registry_tier_count(const frt_registry *r, int tier)
{
    int k = 0;
    for (int i = 0; r && i < r->n; i++) k += in_tier(r->caps[i], tier);
    return k;
}

size_t frt_registry_budget(const frt_registry *r, int tier)
{
    return r && tier >= 0 && tier < FRT_ENGINE_N_TIERS ? r->budget[tier] : 0;
}

void frt_registry_stats_get(const frt_registry *r, frt_registry_stats *st)
{
    if (r && st) *st = r->st;
}

static char *path_for(const frt_registry *r, uint64_t id)
{
    if (!r->dir) return NULL;
    size_t n = strlen(r->dir) + 48;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/cap-%llu.frtc", r->dir, (unsigned long long)id);
    return p;
}

/* Frees an entry's own memory (not its handle, file or row). */
static void cap_destroy(frt_cap *c)
{
    free(c->tokens);
    free(c->salt);
    free(c->path);
    free(c);
}

/* Frees c's engine handle: a capsule, or a resident cartridge. */
static void free_handle(frt_registry *r, frt_cap *c)
{
    if (c->handle && c->kind == FRT_CAP_CARTRIDGE) r->e->cartridge_resident_free(r->e->self, c->handle);
    else if (c->handle) r->e->capsule_free(r->e->self, c->handle);
    c->handle = NULL;
}

static void drop_handle(frt_registry *r, frt_cap *c)
{
    free_handle(r, c);
    if (c->persisted) c->tier = FRT_ENGINE_TIER_DISK;
}

static void unpersist(frt_registry *r, frt_cap *c)
{
    if (!c->persisted) return;
    if (c->path) unlink(c->path);
    if (r->db) frt_capdb_del(r->db, c->id);
    c->persisted = 0;
}

/* Removes entry i entirely: handle, file, index row. */
static void remove_at(frt_registry *r, int i)
{
    frt_cap *c = r->caps[i];
    free_handle(r, c);
    unpersist(r, c);
    cap_destroy(c);
    memmove(r->caps + i, r->caps + i + 1, (size_t)(r->n - i - 1) * sizeof *r->caps);
    r->n--;
}

static void remove_entry(frt_registry *r, frt_cap *c)
{
    int i = find_index(r, c->id);
    if (i >= 0) remove_at(r, i);
}

static int push(frt_registry *r, frt_cap *c)
{
    if (r->n == r->cap) {
        int nc = r->cap ? 2 * r->cap : 16;
        frt_cap **p = realloc(r->caps, (size_t)nc * sizeof *p);
        if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry: %d entries", nc);
        r->caps = p;
        r->cap = nc;
    }
    r->caps[r->n++] = c;
    return 0;
}

static void protect(frt_registry *r, uint64_t id)
{
    if (r->n_prot < (int)(sizeof r->prot / sizeof r->prot[0])) r->prot[r->n_prot] = id;
    r->n_prot++;
}
static void unprotect(frt_registry *r) { r->n_prot--; }
static int is_protected(const frt_registry *r, uint64_t id)
{
    int n = r->n_prot < (int)(sizeof r->prot / sizeof r->prot[0]) ? r->n_prot : (int)(sizeof r->prot / sizeof r->prot[0]);
    for (int i = 0; i < n; i++)
        if (r->prot[i] == id) return 1;
    return 0;
}

static void touch(frt_registry *r, frt_cap *c)
{
    c->last_used = ++r->clock;
    if (c->persisted && r->db) frt_capdb_touch(r->db, c->id, c->last_used, c->pin_manual);
}

/* ---- budgets ------------------------------------------------------------------ */

static int make_room(frt_registry *r, int tier, size_t need);

/* Makes the dir's new names durable (after a rename into it). */
static int sync_dir(const frt_registry *r)
{
    int fd = open(r->dir, O_RDONLY | O_DIRECTORY);
    int ok = fd >= 0 && fsync(fd) == 0;
    if (fd >= 0) close(fd);
    return ok ? 0 : frt_error(FRT_ERR_IO, "registry: cannot fsync the capsule dir %s: %s", r->dir, strerror(errno));
}

/* Writes c's file (making room in the disk tier) and indexes it. */
static int persist(frt_registry *r, frt_cap *c)
{
    if (c->persisted) return 0;
    if (!r->dir || !c->path || !c->handle) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry: no disk tier");
    if (c->bytes + r->disk_other > r->budget[FRT_ENGINE_TIER_DISK])
        return frt_error(FRT_ERR_OUT_OF_MEMORY,
                         "registry: capsule of %zu bytes exceeds the disk budget (%zu bytes of it held by other files "
                         "in the capsule dir)",
                         c->bytes, r->disk_other);
    protect(r, c->id);
    int rc = make_room(r, FRT_ENGINE_TIER_DISK, c->bytes);
    unprotect(r);
    FRT_TRY(rc);
    FRT_TRY(r->e->capsule_save(r->e->self, c->handle, c->path));
    rc = sync_dir(r);
    if (!rc && r->db) rc = frt_capdb_put(r->db, c, r->e->facts.fingerprint);
    if (rc) {
        unlink(c->path); /* no orphan: a file without its row is never loaded */
        return rc;
    }
    c->persisted = 1;
    /* the room made above was for the payload: charge the file's metadata too */
    note_file(c);
    protect(r, c->id);
    rc = make_room(r, FRT_ENGINE_TIER_DISK, 0);
    unprotect(r);
    if (rc) unpersist(r, c);
    return rc;
}

/* Moves c (in memory tier c->tier) one step down: device -> host when the
 * host tier has room, else to the disk tier, else it is evicted. */
static void demote(frt_registry *r, frt_cap *c)
{
    if (c->kind == FRT_CAP_CARTRIDGE) { /* device -> pinned host when the host tier has room, else dropped */
        if (c->tier == FRT_ENGINE_TIER_DEVICE && r->budget[FRT_ENGINE_TIER_HOST] >= c->bytes &&
            make_room(r, FRT_ENGINE_TIER_HOST, c->bytes) == 0 &&
            r->e->cartridge_move(r->e->self, c->handle, FRT_ENGINE_TIER_HOST) == 0) {
            c->tier = FRT_ENGINE_TIER_HOST;
            r->cart.demotions++;
            return;
        }
        r->cart.evictions++;
        remove_entry(r, c);
        return;
    }
    if (c->tier == FRT_ENGINE_TIER_DEVICE && r->budget[FRT_ENGINE_TIER_HOST] >= c->bytes &&
        make_room(r, FRT_ENGINE_TIER_HOST, c->bytes) == 0 &&
        r->e->capsule_move(r->e->self, c->handle, FRT_ENGINE_TIER_HOST, NULL) == 0) {
        c->tier = FRT_ENGINE_TIER_HOST;
        r->st.demotions++;
        return;
    }
    if (persist(r, c) == 0) {
        drop_handle(r, c);
        r->st.demotions++;
        return;
    }
    r->st.evictions++;
    remove_entry(r, c);
}

/* The least recently used unpinned entry in `tier`, not protected. */
static frt_cap *victim(frt_registry *r, int tier)
{
    frt_cap *best = NULL;
    for (int i = 0; i < r->n; i++) {
        frt_cap *c = r->caps[i];
        if (!in_tier(c, tier) || frt_cap_pinned(c) || is_protected(r, c->id)) continue;
        if (!best || c->last_used < best->last_used) best = c;
    }
    return best;
}

/* Demotes (memory tiers) or deletes (disk) LRU unpinned entries until
 * bytes(tier) + need <= budget(tier). FRT_ERR_OUT_OF_MEMORY when pinned or
 * protected entries alone leave no room. */
static int make_room(frt_registry *r, int tier, size_t need)
{
    if (need > r->budget[tier])
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry: %zu bytes exceed the %s budget", need,
                         frt_engine_tier_name(tier));
    for (int guard = 0; guard < 1000000; guard++) {
        if (frt_registry_bytes(r, tier) + need <= r->budget[tier]) return 0;
        frt_cap *v = victim(r, tier);
        if (!v) break;
        if (tier == FRT_ENGINE_TIER_DISK) {
            r->st.evictions++;
            if (v->handle && v->tier != FRT_ENGINE_TIER_DISK) unpersist(r, v); /* the memory copy stays */
            else remove_entry(r, v);
        } else {
            demote(r, v);
        }
    }
    return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry: the %s tier is full of pinned capsules",
                     frt_engine_tier_name(tier));
}

/* Places a new entry already counted in c->tier, moving it down while its
 * tier cannot make room. */
static int place(frt_registry *r, frt_cap *c)
{
    for (;;) {
        int t = c->tier;
        if (t == FRT_ENGINE_TIER_DISK) return make_room(r, t, 0);
        if (c->bytes <= r->budget[t]) {
            size_t mine = c->bytes;
            c->bytes = 0; /* make room for it as if it were not there yet */
            int rc = make_room(r, t, mine);
            c->bytes = mine;
            if (rc == 0) return 0;
        }
        if (t + 1 < FRT_ENGINE_TIER_DISK && r->budget[t + 1] > 0) {
            FRT_TRY(r->e->capsule_move(r->e->self, c->handle, t + 1, NULL));
            c->tier = t + 1;
            continue;
        }
        FRT_TRY(persist(r, c));
        drop_handle(r, c);
        return 0;
    }
}

/* ---- open / close --------------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
    char *p = strdup(dir);
    if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) break;
        *s = '/';
    }
    int ok = mkdir(p, 0755) == 0 || errno == EEXIST;
    struct stat sb;
    ok = ok && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
    free(p);
    return ok ? 0 : frt_error(FRT_ERR_IO, "registry: cannot create the capsule dir %s", dir);
}

/* The path of an index row's file: a plain file name inside the dir (or,
 * from older indexes, an absolute path directly in the dir). NULL for
 * anything else: such a row is refused and its path never touched. */
static char *row_path(const frt_registry *r, const char *p)
{
    size_t dl = strlen(r->dir);
    if (p[0] == '/' && !strncmp(p, r->dir, dl) && p[dl] == '/') p += dl + 1;
    if (!*p || strchr(p, '/') || !strcmp(p, ".") || !strcmp(p, "..")) return NULL;
    size_t n = dl + strlen(p) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", r->dir, p);
    return out;
}

/* Remembers the file name of a row (any model's) so that open can tell
 * orphan capsule files from indexed ones. */
static int note_row_name(frt_registry *r, const char *row_file)
{
    const char *slash = strrchr(row_file, '/');
    if (r->n_row_names == r->cap_row_names) {
        int nc = r->cap_row_names ? 2 * r->cap_row_names : 64;
        char **v = realloc(r->row_names, (size_t)nc * sizeof *v);
        if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
        r->row_names = v;
        r->cap_row_names = nc;
    }
    if (!(r->row_names[r->n_row_names] = strdup(slash ? slash + 1 : row_file)))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
    r->n_row_names++;
    return 0;
}

static int load_row(void *user, const frt_cap *row, uint64_t fp)
{
    frt_registry *r = user;
    FRT_TRY(note_row_name(r, row->path));
    if (fp != r->e->facts.fingerprint) return 0; /* another model's capsule: left alone */
    char *path = row_path(r, row->path);
    if (!path) {
        r->st.rows_refused++;
        return frt_capdb_del(r->db, row->id);
    }
    if (row->kind != FRT_CAP_PREFIX || access(path, R_OK) != 0) {
        if (row->kind != FRT_CAP_PREFIX) unlink(path);
        free(path);
        return frt_capdb_del(r->db, row->id);
    }
    frt_cap *c = calloc(1, sizeof *c);
    if (!c) {
        free(path);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
    }
    *c = *row;
    c->tokens = malloc((size_t)(row->position ? row->position : 1) * sizeof *c->tokens);
    c->path = path;
    c->salt = row->salt_len ? malloc(row->salt_len) : NULL;
    if (c->salt) memcpy(c->salt, row->salt, row->salt_len);
    c->handle = NULL;
    c->tier = FRT_ENGINE_TIER_DISK;
    c->persisted = 1;
    note_file(c);
    c->refs = c->pin_holds = 0;
    if (!c->tokens || !c->path || (row->salt_len && !c->salt) || push(r, c)) {
        cap_destroy(c);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
    }
    if (row->position) memcpy(c->tokens, row->tokens, (size_t)row->position * sizeof *c->tokens);
    if (c->last_used > r->clock) r->clock = c->last_used;
    return 0;
}

/* "cap-DIGITS.frtc": a name this registry writes capsules under. */
static int is_capsule_name(const char *n)
{
    if (strncmp(n, "cap-", 4) || !(n[4] >= '0' && n[4] <= '9')) return 0;
    n += 4;
    while (*n >= '0' && *n <= '9') n++;
    return !strcmp(n, ".frtc");
}

static int is_index_name(const char *n) { return !strncmp(n, "index.sqlite", 12); }

/* Bytes of the index files (index.sqlite, -wal, -journal) before this run
 * opens them: in a fresh dir, 0. */
static size_t index_bytes(const frt_registry *r)
{
    DIR *d = opendir(r->dir);
    size_t b = 0;
    struct dirent *de;
    struct stat sb;
    while (d && (de = readdir(d)))
        if (is_index_name(de->d_name) && fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(sb.st_mode))
            b += (size_t)sb.st_size;
    if (d) closedir(d);
    return b;
}

/* After the index is loaded: removes orphan capsule files (no index row of
 * any model: a write killed between the rename and the row), and charges
 * every other byte in the dir that is not a loaded capsule to the disk
 * budget (other models' capsules, quarantined and foreign files; the index
 * as it was at start). */
static void account_dir(frt_registry *r, size_t index_at_start)
{
    r->disk_other = index_at_start;
    DIR *d = opendir(r->dir);
    if (!d) return;
    struct dirent *de;
    struct stat sb;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (is_index_name(n) || fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode)) continue;
        int mine = 0;
        for (int i = 0; !mine && i < r->n; i++) {
            const char *p = r->caps[i]->path, *slash = p ? strrchr(p, '/') : NULL;
            mine = slash && !strcmp(slash + 1, n);
        }
        if (mine) continue;
        int indexed = 0;
        for (int i = 0; !indexed && i < r->n_row_names; i++) indexed = !strcmp(r->row_names[i], n);
        if (!indexed && is_capsule_name(n) && unlinkat(dirfd(d), n, 0) == 0) {
            r->st.orphans_removed++;
            continue;
        }
        r->disk_other += (size_t)sb.st_size;
    }
    closedir(d);
}

static void free_row_names(frt_registry *r)
{
    for (int i = 0; i < r->n_row_names; i++) free(r->row_names[i]);
    free(r->row_names);
    r->row_names = NULL;
    r->n_row_names = r->cap_row_names = 0;
}

/* Removes cap-*.tmp* files: writes killed between create and rename. */
static void remove_stale_temps(frt_registry *r)
{
    DIR *d = opendir(r->dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "cap-", 4) || !strstr(de->d_name, ".tmp")) continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0) r->st.stale_temp_removed++;
    }
    closedir(d);
}

int frt_registry_open(frt_engine *e, const frt_registry_params *p, frt_registry **out)
{
    if (!e || !p || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "registry: NULL argument");
    frt_registry *r = calloc(1, sizeof *r);
    if (!r) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
    r->e = e;
    memcpy(r->budget, p->budget, sizeof r->budget);
    r->next_id = 1;
    int rc = 0;
    if (p->dir && p->dir[0]) {
        if (!(r->dir = strdup(p->dir))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
        size_t index_at_start = 0;
        if (!rc) rc = mkdir_p(r->dir);
        if (!rc) remove_stale_temps(r);
        if (!rc) index_at_start = index_bytes(r);
        if (!rc) rc = frt_capdb_open(r->dir, &r->db);
        if (!rc) rc = frt_capdb_scan(r->db, load_row, r);
        if (!rc) account_dir(r, index_at_start);
        free_row_names(r);
        if (!rc) r->next_id = frt_capdb_max_id(r->db) + 1;
        if (!rc) make_room(r, FRT_ENGINE_TIER_DISK, 0); /* a smaller budget than last time */
    } else {
        r->budget[FRT_ENGINE_TIER_DISK] = 0;
    }
    if (rc) {
        frt_registry_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void frt_registry_close(frt_registry *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        frt_cap *c = r->caps[i];
        free_handle(r, c);
        /* SESSION capsules do not outlive the process */
        if (c->kind == FRT_CAP_SESSION) unpersist(r, c);
        cap_destroy(c);
    }
    free(r->caps);
    frt_capdb_close(r->db);
    free(r->dir);
    free(r);
}

/* ---- verbs ---------------------------------------------------------------------- */

int frt_registry_snapshot(frt_registry *r, const frt_cap_spec *s, uint64_t *id)
{
    if (!r || !s || !id || s->n < 0 || (s->n > 0 && !s->tokens) || s->tier < 0 || s->tier >= FRT_ENGINE_N_TIERS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "registry snapshot: bad arguments");
    frt_engine *e = r->e;
    const int C = e->facts.prefill_chunk;
    if (e->position(e->self) != s->n)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "registry snapshot: %d tokens given, the live state holds %d", s->n,
                         e->position(e->self));
    if (s->kind == FRT_CAP_PREFIX && (s->n % C != 0 || !s->exact || s->n == 0))
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "registry snapshot: a prefix capsule must be cold-exact at a nonzero multiple of %d (got %d)",
                         C, s->n);
    frt_cap *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry snapshot");
    c->id = r->next_id++;
    c->kind = s->kind;
    c->path = path_for(r, c->id);
    c->tokens = malloc((size_t)(s->n ? s->n : 1) * sizeof *c->tokens);
    if (s->salt && s->salt_len && (c->salt = malloc(s->salt_len))) {
        memcpy(c->salt, s->salt, s->salt_len);
        c->salt_len = s->salt_len;
    }
    if (!c->tokens || (r->dir && !c->path) || (s->salt && s->salt_len && !c->salt)) {
        cap_destroy(c);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry snapshot");
    }
    if (s->n) memcpy(c->tokens, s->tokens, (size_t)s->n * sizeof *c->tokens);
    c->position = s->n;
    c->pending = s->pending;
    c->exact = s->exact;
    c->salt_hash = frt_salt_hash(s->salt, s->salt_len);
    c->digest = e->digest(e->self, s->tokens, s->n, s->salt, s->salt_len);
    c->pin_manual = s->pin ? 1 : 0;
    c->last_used = ++r->clock;
    if (s->owner) snprintf(c->owner, sizeof c->owner, "%s", s->owner);

    /* the first tier at or below the preferred one with a budget */
    int t = s->tier;
    while (t < FRT_ENGINE_TIER_DISK && r->budget[t] == 0) t++;
    int rc;
    if (t == FRT_ENGINE_TIER_DISK && (!r->dir || r->budget[t] == 0)) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "registry snapshot: no tier has a budget");
    } else {
        rc = e->snapshot(e->self, t, t == FRT_ENGINE_TIER_DISK ? c->path : NULL, s->salt, s->salt_len, &c->handle);
    }
    if (rc) {
        cap_destroy(c);
        return rc;
    }
    frt_engine_capsule_info info;
    int on_disk = t == FRT_ENGINE_TIER_DISK;
    rc = e->capsule_info(e->self, c->handle, &info);
    if (!rc && on_disk) rc = sync_dir(r);
    if (!rc) {
        c->bytes = info.bytes;
        c->tier = info.tier;
        c->persisted = c->tier == FRT_ENGINE_TIER_DISK;
        if (c->persisted) note_file(c);
        rc = push(r, c);
    }
    if (!rc && c->persisted && r->db && (rc = frt_capdb_put(r->db, c, e->facts.fingerprint))) remove_at(r, r->n - 1);
    else if (rc) {
        e->capsule_free(e->self, c->handle);
        if (on_disk) unlink(c->path); /* no orphan file */
        cap_destroy(c);
    }
    if (rc) return rc;
    protect(r, c->id);
    rc = place(r, c);
    if (!rc && frt_cap_pinned(c) && c->kind == FRT_CAP_PREFIX) persist(r, c); /* write-through: best effort */
    unprotect(r);
    if (rc) {
        remove_entry(r, c);
        return rc;
    }
    r->st.snapshots++;
    *id = c->id;
    return 0;
}

/* Renames c's file to NAME.quarantined, drops its row and the entry. */
static void quarantine(frt_registry *r, frt_cap *c)
{
    if (c->persisted && c->path) {
        size_t n = strlen(c->path) + 16;
        char *q = malloc(n);
        if (q) {
            snprintf(q, n, "%s.quarantined", c->path);
            struct stat sb;
            if (rename(c->path, q) == 0) {
                sync_dir(r);
                if (stat(q, &sb) == 0) r->disk_other += (size_t)sb.st_size; /* it stays in the dir */
                if (r->db) frt_capdb_del(r->db, c->id);
                c->persisted = 0; /* the file is no longer its own: not unlinked below */
            }
            free(q);
        }
    }
    remove_entry(r, c);
}

int frt_registry_restore(frt_registry *r, uint64_t id, int *from_tier)
{
    int i = r ? find_index(r, id) : -1;
    if (i < 0) return frt_error(FRT_ERR_NOT_FOUND, "registry: no capsule %llu", (unsigned long long)id);
    frt_engine *e = r->e;
    frt_cap *c = r->caps[i];
    if (c->kind == FRT_CAP_CARTRIDGE)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "registry: entry %llu is a resident cartridge, not a capsule",
                         (unsigned long long)id);
    int rc = 0;
    if (!c->handle) {
        rc = c->persisted ? e->capsule_load(e->self, c->path, &c->handle)
                          : frt_error(FRT_ERR_NOT_FOUND, "registry: capsule %llu has no data", (unsigned long long)id);
        if (!rc) {
            frt_engine_capsule_info info;
            rc = e->capsule_info(e->self, c->handle, &info);
            if (!rc && (info.position != c->position || info.digest != c->digest))
                rc = frt_error(FRT_ERR_FORMAT, "registry: capsule file %s does not hold its indexed prefix", c->path);
            c->tier = FRT_ENGINE_TIER_DISK;
        }
    }
    if (!rc) rc = e->restore(e->self, c->handle);
    if (rc) {
        if (c->tier == FRT_ENGINE_TIER_DISK) {
            r->st.load_failures++;
            quarantine(r, c); /* kept aside for a look, never offered again */
        }
        return rc;
    }
    int from = c->tier;
    if (from_tier) *from_tier = from;
    r->st.restores[from]++;
    touch(r, c);
    /* A session capsule is superseded when its session next leaves the live
     * state with new tokens, and a promotion (a device snapshot) would wait
     * for a pipelined host restore's copies, which the request's first
     * prefill piece otherwise runs beside: it stays where it is. */
    if (from == FRT_ENGINE_TIER_HOST && c->kind == FRT_CAP_SESSION && e->facts.restore_pipelined) return 0;
    /* promotion: the fastest tier with room */
    protect(r, c->id);
    for (int t = 0; t < from; t++) {
        if (r->budget[t] < c->bytes || make_room(r, t, c->bytes) != 0) continue;
        if (from == FRT_ENGINE_TIER_DISK || t == FRT_ENGINE_TIER_DEVICE) {
            /* the live state is this capsule now: a snapshot of it is the promoted copy
             * (the model layer promotes disk capsules only by restoring them; into the
             * device tier the snapshot is a device copy, where moving a host capsule
             * would copy it from the host a second time) */
            void *h = NULL;
            if (e->snapshot(e->self, t, NULL, c->salt, c->salt_len, &h) != 0) continue;
            e->capsule_free(e->self, c->handle);
            c->handle = h;
        } else if (e->capsule_move(e->self, c->handle, t, NULL) != 0) {
            continue;
        }
        c->tier = t;
        r->st.promotions++;
        break;
    }
    unprotect(r);
    return 0;
}

int frt_registry_restore_prefill(frt_registry *r, uint64_t id, const int32_t *ids, int n, int *prefilled)
{
    if (prefilled) *prefilled = 0;
    if (!ids || n < 1 || !prefilled) return frt_error(FRT_ERR_INVALID_ARGUMENT, "registry restore_prefill: %d ids", n);
    int i = r ? find_index(r, id) : -1;
    if (i < 0) return frt_error(FRT_ERR_NOT_FOUND, "registry: no capsule %llu", (unsigned long long)id);
    frt_engine *e = r->e;
    frt_cap *c = r->caps[i];
    if (!e->restore_prefill || c->kind == FRT_CAP_CARTRIDGE || !c->handle || c->tier != FRT_ENGINE_TIER_DEVICE)
        return frt_registry_restore(r, id, NULL);
    FRT_TRY(e->restore_prefill(e->self, c->handle, ids, n));
    r->st.restores[FRT_ENGINE_TIER_DEVICE]++;
    r->st.restore_prefills++;
    touch(r, c);
    *prefilled = n;
    return 0;
}

int frt_registry_match_prefix(const frt_registry *r, const int32_t *ids, int n, int max_pos, const void *salt,
                              size_t salt_len, uint64_t *id)
{
    if (id) *id = 0;
    if (!r || !ids || n <= 0) return 0;
    if (max_pos > n) max_pos = n;
    const uint64_t sh = frt_salt_hash(salt, salt_len);
    const int C = r->e->facts.prefill_chunk;
    /* candidate lengths, longest first: only positions some entry holds */
    const frt_cap *best = NULL;
    for (int i = 0; i < r->n; i++) {
        const frt_cap *c = r->caps[i];
        if (c->kind != FRT_CAP_PREFIX || c->salt_hash != sh || c->position > max_pos || c->position % C)
            continue;
        if (best && c->position <= best->position) continue;
        if (r->e->digest(r->e->self, ids, c->position, salt, salt_len) != c->digest) continue;
        if (memcmp(c->tokens, ids, (size_t)c->position * sizeof *ids)) continue;
        best = c;
    }
    if (!best) return 0;
    if (id) *id = best->id;
    return best->position;
}

int frt_registry_pin(frt_registry *r, uint64_t id, int pin)
{
    int i = r ? find_index(r, id) : -1;
    if (i < 0) return frt_error(FRT_ERR_NOT_FOUND, "registry: no capsule %llu", (unsigned long long)id);
    frt_cap *c = r->caps[i];
    c->pin_manual = pin ? 1 : 0;
    if (c->persisted && r->db) frt_capdb_touch(r->db, c->id, c->last_used, c->pin_manual);
    if (pin && c->kind == FRT_CAP_PREFIX && c->handle && !c->persisted) {
        persist(r, c); /* write-through: best effort (an error leaves it pinned in memory) */
    }
    return 0;
}

int frt_registry_ref(frt_registry *r, uint64_t id, int delta, int pin)
{
    int i = r ? find_index(r, id) : -1;
    if (i < 0) return frt_error(FRT_ERR_NOT_FOUND, "registry: no capsule %llu", (unsigned long long)id);
    frt_cap *c = r->caps[i];
    c->refs += delta;
    if (pin) c->pin_holds += delta;
    if (c->refs < 0) c->refs = 0;
    if (c->pin_holds < 0) c->pin_holds = 0;
    if (c->refs == 0 && c->kind == FRT_CAP_SESSION) remove_at(r, i);
    return 0;
}

int frt_registry_set_name(frt_registry *r, uint64_t id, const char *name)
{
    int i = r ? find_index(r, id) : -1;
    if (i < 0) return frt_error(FRT_ERR_NOT_FOUND, "registry: no capsule %llu", (unsigned long long)id);
    snprintf(r->caps[i]->name, sizeof r->caps[i]->name, "%s", name ? name : "");
    return 0;
}

int frt_registry_delete(frt_registry *r, uint64_t id)
{
    int i = r ? find_index(r, id) : -1;
    if (i < 0) return frt_error(FRT_ERR_NOT_FOUND, "registry: no capsule %llu", (unsigned long long)id);
    if (r->caps[i]->kind == FRT_CAP_CARTRIDGE && r->caps[i]->pin_holds > 0)
        return frt_error(FRT_ERR_STATE, "registry: cartridge %llu is in use", (unsigned long long)id);
    remove_at(r, i);
    return 0;
}

/* ---- cartridge residency ---------------------------------------------------------- */

static frt_cap *find_cartridge(const frt_registry *r, uint64_t key)
{
    for (int i = 0; i < r->n; i++)
        if (r->caps[i]->kind == FRT_CAP_CARTRIDGE && r->caps[i]->digest == key) return r->caps[i];
    return NULL;
}

/* Room for bytes in the device tier, or FRT_ERR_OUT_OF_MEMORY saying why. */
static int cartridge_room(frt_registry *r, size_t bytes)
{
    const size_t budget = r->budget[FRT_ENGINE_TIER_DEVICE];
    if (bytes > budget)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "the cartridge needs %zu bytes of device memory, the device budget is %zu",
                         bytes, budget);
    if (make_room(r, FRT_ENGINE_TIER_DEVICE, bytes) == 0) return 0;
    return frt_error(FRT_ERR_OUT_OF_MEMORY,
                     "the cartridge needs %zu bytes of device memory: %zu of the %zu-byte device budget stay held by "
                     "pinned or in-use entries",
                     bytes, frt_registry_bytes(r, FRT_ENGINE_TIER_DEVICE), budget);
}

/* A new resident entry: room made, then the engine's upload. */
static int cartridge_upload(frt_registry *r, uint64_t key, const char *name, const void *cart, size_t bytes,
                            frt_cap **out)
{
    frt_engine *e = r->e;
    int rc = cartridge_room(r, bytes);
    if (rc) {
        r->cart.refused++;
        return rc;
    }
    frt_cap *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "registry");
    rc = e->cartridge_upload(e->self, cart, &c->handle);
    if (!rc && (rc = push(r, c))) free_handle(r, c);
    if (rc) {
        cap_destroy(c);
        return rc;
    }
    c->id = r->next_id++;
    c->kind = FRT_CAP_CARTRIDGE;
    c->tier = FRT_ENGINE_TIER_DEVICE;
    c->bytes = bytes;
    c->digest = key;
    c->pending = -1;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
    r->cart.promotions++;
    *out = c;
    return 0;
}

/* A host-resident entry back to device memory (room made first; c itself is
 * protected from the host tier's evictions meanwhile). */
static int cartridge_promote(frt_registry *r, frt_cap *c)
{
    protect(r, c->id);
    int rc = cartridge_room(r, c->bytes);
    unprotect(r);
    if (rc) {
        r->cart.refused++;
        return rc;
    }
    FRT_TRY(r->e->cartridge_move(r->e->self, c->handle, FRT_ENGINE_TIER_DEVICE));
    c->tier = FRT_ENGINE_TIER_DEVICE;
    r->cart.promotions++;
    return 0;
}

int frt_registry_cartridge_acquire(frt_registry *r, uint64_t key, const char *name, const void *cart, size_t bytes,
                                   uint64_t *id, const void **resident)
{
    if (!r || !cart || !id || !resident || !bytes || !r->e->cartridge_upload || !r->e->cartridge_move)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "registry: bad cartridge acquisition");
    frt_cap *c = find_cartridge(r, key);
    if (c && c->tier == FRT_ENGINE_TIER_DEVICE) {
        r->cart.hits++;
    } else {
        r->cart.misses++;
        FRT_TRY(c ? cartridge_promote(r, c) : cartridge_upload(r, key, name, cart, bytes, &c));
    }
    c->pin_holds++;
    touch(r, c);
    *id = c->id;
    *resident = c->handle;
    return 0;
}

int frt_registry_cartridge_release(frt_registry *r, uint64_t id)
{
    int i = r ? find_index(r, id) : -1;
    if (i < 0 || r->caps[i]->kind != FRT_CAP_CARTRIDGE)
        return frt_error(FRT_ERR_NOT_FOUND, "registry: no resident cartridge %llu", (unsigned long long)id);
    if (r->caps[i]->pin_holds > 0) r->caps[i]->pin_holds--;
    return 0;
}

void frt_registry_cartridge_stats(const frt_registry *r, frt_cart_residency_stats *out)
{
    if (!r || !out) return;
    *out = r->cart;
    out->device_bytes = out->host_bytes = 0;
    out->resident = out->host_resident = 0;
    for (int i = 0; i < r->n; i++) {
        const frt_cap *c = r->caps[i];
        if (c->kind != FRT_CAP_CARTRIDGE) continue;
        int dev = c->tier == FRT_ENGINE_TIER_DEVICE;
        *(dev ? &out->device_bytes : &out->host_bytes) += c->bytes;
        *(dev ? &out->resident : &out->host_resident) += 1;
    }
}
