/* serving/cartridge_store.c - the server's cartridge store
 * (serving/cartridges.h): the registry beside the cartridge directories,
 * registration of every cartridge found at open, the router, and an LRU
 * of loaded cartridges in host memory with its counters. */
#include "serving/cartridges.h"

#include "util/error.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct loaded {
    char id[FRT_CARTRIDGE_ID_MAX];
    char created[32];      /* with id: the registered version it holds */
    frt_cartridge *c;
    uint64_t bytes;
    uint64_t used;         /* LRU clock */
} loaded;

struct frt_cart_store {
    frt_cartreg *reg;
    frt_cart_router *rt;
    pthread_mutex_t mu;    /* stats, and the router's counters, against readers */
    loaded *slots;         /* [capacity] */
    int capacity;
    uint64_t clock;
    frt_cart_store_stats st;
};

static void logf_to(void (*log)(void *, const char *), void *user, const char *fmt, const char *a, const char *b)
{
    if (!log) return;
    char line[1400];
    snprintf(line, sizeof line, fmt, a, b);
    log(user, line);
}

/* Removes the rows whose directory holds no manifest.json any more (a
 * cartridge deleted from the directory since the last start). */
static void forget_missing(frt_cart_store *st)
{
    frt_cartreg_entry *all = NULL;
    int n = 0;
    if (frt_cartreg_list(st->reg, &all, &n)) return;
    for (int i = 0; i < n; i++) {
        char man[1100];
        struct stat sb;
        snprintf(man, sizeof man, "%s/manifest.json", all[i].path);
        if (stat(man, &sb) && frt_cartreg_remove(st->reg, all[i].id) == 0) st->st.forgotten++;
    }
    free(all);
}

/* Registers every subdirectory of dir holding a manifest.json. */
static void register_all(frt_cart_store *st, const char *dir, void (*log)(void *, const char *), void *user)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[1024], man[1100];
        struct stat sb;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path) continue;
        snprintf(man, sizeof man, "%s/manifest.json", path);
        if (stat(man, &sb) || !S_ISREG(sb.st_mode)) continue;
        if (frt_cartreg_insert(st->reg, path) == 0) {
            st->st.registered++;
        } else {
            st->st.refused++;
            logf_to(log, user, "cartridge %s refused: %s", path, frt_last_error());
        }
    }
    closedir(d);
}

int frt_cart_store_open(const char *dir, uint64_t fingerprint, int capacity, void (*log)(void *, const char *),
                        void *log_user, frt_cart_store **out)
{
    if (!dir || !out || !fingerprint || capacity < 1 || capacity > FRT_CART_STORE_MAX_ENTRIES)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge store: bad argument (capacity %d: 1 to %d)", capacity,
                         FRT_CART_STORE_MAX_ENTRIES);
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return frt_error(FRT_ERR_NOT_FOUND, "cartridge store: '%s' is not a directory", dir);
    frt_cart_store *st = calloc(1, sizeof *st);
    if (!st || !(st->slots = calloc((size_t)capacity, sizeof *st->slots))) {
        free(st);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge store");
    }
    pthread_mutex_init(&st->mu, NULL);
    st->capacity = st->st.capacity = capacity;
    char db[1100];
    snprintf(db, sizeof db, "%s/cartridges.sqlite", dir);
    int rc = frt_cartreg_open(db, &st->reg);
    if (!rc) rc = frt_cart_router_create(st->reg, fingerprint, &st->rt);
    if (rc) {
        frt_cart_store_free(st);
        return rc;
    }
    forget_missing(st);
    register_all(st, dir, log, log_user);
    *out = st;
    return 0;
}

void frt_cart_store_free(frt_cart_store *st)
{
    if (!st) return;
    for (int i = 0; st->slots && i < st->capacity; i++) frt_cartridge_free(st->slots[i].c);
    free(st->slots);
    frt_cart_router_free(st->rt);
    frt_cartreg_close(st->reg);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

frt_cart_router *frt_cart_store_router(frt_cart_store *st) { return st ? st->rt : NULL; }

/* The slot holding e's version, or -1. */
static int find_slot(const frt_cart_store *st, const frt_cartreg_entry *e)
{
    for (int i = 0; i < st->capacity; i++)
        if (st->slots[i].c && !strcmp(st->slots[i].id, e->id) && !strcmp(st->slots[i].created, e->created)) return i;
    return -1;
}

/* An empty slot, or the least recently used one emptied (counted). */
static int free_slot(frt_cart_store *st)
{
    int best = 0;
    for (int i = 0; i < st->capacity; i++) {
        if (!st->slots[i].c) return i;
        if (st->slots[i].used < st->slots[best].used) best = i;
    }
    st->st.evictions++;
    st->st.bytes -= st->slots[best].bytes;
    st->st.entries--;
    frt_cartridge_free(st->slots[best].c);
    memset(&st->slots[best], 0, sizeof st->slots[best]);
    return best;
}

/* Reads e's directory and checks it is the version registered. */
static int load_entry(const frt_cartreg_entry *e, frt_cartridge **out)
{
    frt_cartridge *c = NULL;
    FRT_TRY(frt_cartridge_load(e->path, &c));
    frt_cartridge_info in;
    frt_cartridge_info_get(c, &in);
    if (strcmp(in.id, e->id) || strcmp(in.created, e->created) || in.tokens != e->tokens) {
        frt_cartridge_free(c);
        return frt_error(FRT_ERR_MISMATCH, "cartridge '%s': %s holds another version than the one registered",
                         e->id, e->path);
    }
    *out = c;
    return 0;
}

int frt_cart_store_acquire(frt_cart_store *st, const frt_cart_request *req, const frt_cartridge **out,
                           frt_cartreg_entry *entry, char *why, size_t why_size)
{
    if (!st || !req || !out || !entry) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge store: NULL argument");
    *out = NULL;
    pthread_mutex_lock(&st->mu);
    int rc = frt_cart_router_route(st->rt, req, entry, why, why_size);
    frt_cart_router_stats_get(st->rt, &st->st.route);
    int slot = rc == 1 ? find_slot(st, entry) : -1;
    if (rc == 1 && slot >= 0) st->st.cache_hits++;
    if (rc == 1 && slot < 0) st->st.cache_misses++;
    pthread_mutex_unlock(&st->mu);
    if (rc != 1) return rc;
    frt_cartridge *c = NULL;
    int lrc = slot < 0 ? load_entry(entry, &c) : 0;
    pthread_mutex_lock(&st->mu);
    if (lrc) st->st.load_failures++;
    if (!lrc && slot < 0) {
        st->st.loads++;
        slot = free_slot(st);
        loaded *l = &st->slots[slot];
        snprintf(l->id, sizeof l->id, "%s", entry->id);
        snprintf(l->created, sizeof l->created, "%s", entry->created);
        l->c = c;
        l->bytes = entry->bytes;
        st->st.bytes += l->bytes;
        st->st.entries++;
    }
    if (!lrc) {
        st->slots[slot].used = ++st->clock;
        *out = st->slots[slot].c;
    }
    pthread_mutex_unlock(&st->mu);
    return lrc ? lrc : 1;
}

void frt_cart_store_stats_get(frt_cart_store *st, frt_cart_store_stats *out)
{
    if (!st || !out) return;
    pthread_mutex_lock(&st->mu);
    *out = st->st;
    pthread_mutex_unlock(&st->mu);
}

typedef struct metric_row {
    const char *name, *type, *help;
    unsigned long long v;
} metric_row;

static void print_rows(FILE *f, const metric_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", rows[i].name, rows[i].help, rows[i].name, rows[i].type,
                rows[i].name, rows[i].v);
}

char *frt_cart_store_metrics_text(frt_cart_store *st, const frt_cart_residency_stats *res)
{
    frt_cart_store_stats s;
    frt_cart_store_stats_get(st, &s);
    const metric_row rows[] = {
        {"frt_cartridge_routed_total", "counter", "Requests a routing rule gave a cartridge.", s.route.hits},
        {"frt_cartridge_unrouted_total", "counter", "Requests no routing rule applied to.", s.route.misses},
        {"frt_cartridge_fallbacks_total", "counter", "Requests that ran a full prefill because the registry failed.",
         s.route.fallbacks},
        {"frt_cartridge_refused_total", "counter", "Requests refused by the router (unknown id or label, another "
                                                   "model's cartridge).", s.route.refused},
        {"frt_cartridge_cache_hits_total", "counter", "Routed cartridges found loaded in host memory.", s.cache_hits},
        {"frt_cartridge_cache_misses_total", "counter", "Routed cartridges read from disk.", s.cache_misses},
        {"frt_cartridge_loads_total", "counter", "Cartridge reads that succeeded.", s.loads},
        {"frt_cartridge_load_failures_total", "counter", "Cartridge reads that failed.", s.load_failures},
        {"frt_cartridge_evictions_total", "counter", "Loaded cartridges evicted from host memory (LRU).", s.evictions},
        {"frt_cartridge_loaded_bytes", "gauge", "Payload bytes of the loaded cartridges (host memory).", s.bytes},
        {"frt_cartridge_loaded", "gauge", "Loaded cartridges (host memory).", (unsigned long long)s.entries},
        {"frt_cartridge_registered", "gauge", "Cartridges registered at start.", (unsigned long long)s.registered},
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    print_rows(f, rows, sizeof rows / sizeof rows[0]);
    if (res) {
        const metric_row dev[] = {
            {"frt_cartridge_resident_hits_total", "counter", "Cartridges acquired while resident in device memory.",
             res->hits},
            {"frt_cartridge_resident_misses_total", "counter", "Cartridges acquired while not resident.", res->misses},
            {"frt_cartridge_promotions_total", "counter",
             "Cartridges made device-resident (from the host tier, or uploaded from the store's copy).",
             res->promotions},
            {"frt_cartridge_resident_demotions_total", "counter",
             "Resident cartridges moved device -> pinned host memory to make room (LRU).", res->demotions},
            {"frt_cartridge_resident_evictions_total", "counter",
             "Resident cartridges dropped to make room (LRU).", res->evictions},
            {"frt_cartridge_insufficient_capacity_total", "counter",
             "Cartridge requests refused: the cartridge could not fit the device budget.", res->refused},
            {"frt_cartridge_device_bytes", "gauge", "Bytes of the resident cartridges (in the device budget).",
             res->device_bytes},
            {"frt_cartridge_resident", "gauge", "Cartridges resident in device memory.",
             (unsigned long long)res->resident},
            {"frt_cartridge_host_resident_bytes", "gauge",
             "Bytes of the cartridges resident in pinned host memory (in the host budget).", res->host_bytes},
            {"frt_cartridge_host_resident", "gauge", "Cartridges resident in pinned host memory.",
             (unsigned long long)res->host_resident},
        };
        print_rows(f, dev, sizeof dev / sizeof dev[0]);
    }
    fclose(f);
    return buf;
}
