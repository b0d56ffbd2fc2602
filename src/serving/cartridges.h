/*
 * serving/cartridges.h - the serving side of cartridges (docs/cartridges.md):
 * a SQLite registry of frt cartridge directories, beside the capsule
 * index, and the per-request router that picks one.
 *
 * The server (frt serve --cartridge-dir) opens a store (below) over them:
 * the request fields cartridge_id / cartridge_label (api.h) are routed on
 * the engine thread and the cartridge is injected before the prompt
 * (service.h frt_gen_request.cartridge). See docs/cartridges.md.
 *
 * Policy on failures: an unknown explicit id, or a label that no rule
 * resolves, is the client's error (FRT_ERR_NOT_FOUND; a cartridge of another
 * model: FRT_ERR_MISMATCH). A registry that cannot answer (SQLite error,
 * database gone) is not: the router reports "no cartridge" with the reason,
 * counts a fallback, and the request runs with a full prefill.
 */
#ifndef FRT_SERVING_CARTRIDGES_H
#define FRT_SERVING_CARTRIDGES_H

#include "frt/cartridge.h"

#include <stddef.h>
#include <stdint.h>

/* ---- the registry ------------------------------------------------------------ */

typedef struct frt_cartreg frt_cartreg;

/* One row: the manifest facts of a cartridge directory. */
typedef struct frt_cartreg_entry {
    char id[FRT_CARTRIDGE_ID_MAX];
    char path[1024];                 /* the cartridge directory */
    uint64_t model_fingerprint;
    int tokens;
    uint64_t bytes;                  /* payload bytes (kv.safetensors) */
    char created[32];
    int n_labels;
    char labels[FRT_CARTRIDGE_MAX_LABELS][FRT_CARTRIDGE_LABEL_MAX];
} frt_cartreg_entry;

/* Opens (creating if missing) the registry database at PATH (e.g.
 * CAPSULE_DIR/cartridges.sqlite). FRT_ERR_IO with SQLite's message. */
int frt_cartreg_open(const char *path, frt_cartreg **out);
void frt_cartreg_close(frt_cartreg *r); /* NULL-safe */

/* Registers the frt cartridge directory DIR: it is loaded and checked in
 * full (frt_cartridge_load: manifest, size, checksum), then its row is
 * inserted or replaces the row of the same id, labels included, in one
 * transaction. Errors: those of frt_cartridge_load (nothing stored),
 * FRT_ERR_INVALID_ARGUMENT (a path longer than the row holds), FRT_ERR_IO. */
int frt_cartreg_insert(frt_cartreg *r, const char *dir);

/* The row of id. FRT_ERR_NOT_FOUND, FRT_ERR_IO. */
int frt_cartreg_get(frt_cartreg *r, const char *id, frt_cartreg_entry *out);

/* Every row, ordered by id; *out malloc'd (free it). FRT_ERR_IO. */
int frt_cartreg_list(frt_cartreg *r, frt_cartreg_entry **out, int *n);

/* The newest row (created, then id, descending) carrying label and bound to
 * fingerprint. FRT_ERR_NOT_FOUND, FRT_ERR_IO. */
int frt_cartreg_by_label(frt_cartreg *r, const char *label, uint64_t fingerprint, frt_cartreg_entry *out);

/* Removes the row of id (its files stay). FRT_ERR_NOT_FOUND, FRT_ERR_IO. */
int frt_cartreg_remove(frt_cartreg *r, const char *id);

/* ---- the router ------------------------------------------------------------- */

typedef enum frt_cart_rule {
    FRT_CART_RULE_ID,     /* the request's cartridge_id */
    FRT_CART_RULE_LABEL,  /* the request's cartridge_label */
    FRT_CART_RULE_STATIC, /* the static mapping of the request's model name */
} frt_cart_rule;

#define FRT_CART_MAX_RULES 8
#define FRT_CART_MAX_STATIC 64

/* What a request says (any field NULL = absent). */
typedef struct frt_cart_request {
    const char *cartridge_id;
    const char *cartridge_label;
    const char *model; /* the request's "model" field, the key of the static mapping */
} frt_cart_request;

typedef struct frt_cart_router_stats {
    uint64_t hits;      /* a rule resolved a cartridge */
    uint64_t misses;    /* no rule applied: full prefill */
    uint64_t fallbacks; /* the registry failed: full prefill */
    uint64_t refused;   /* NOT_FOUND / MISMATCH answers */
} frt_cart_router_stats;

typedef struct frt_cart_router frt_cart_router;

/* A router over r (borrowed) for an engine whose model has fingerprint
 * (frt_cartridge_model_fingerprint). The chain starts as id, label, static. */
int frt_cart_router_create(frt_cartreg *r, uint64_t fingerprint, frt_cart_router **out);
void frt_cart_router_free(frt_cart_router *rt); /* NULL-safe */

/* Replaces the chain: n rules (1..FRT_CART_MAX_RULES), tried in order, the
 * first that resolves wins. FRT_ERR_INVALID_ARGUMENT (n, an unknown rule). */
int frt_cart_router_set_chain(frt_cart_router *rt, const frt_cart_rule *rules, int n);

/* Maps a model name to a cartridge id (the static rule), configured at
 * start; a repeated name replaces its mapping. FRT_ERR_INVALID_ARGUMENT (a
 * bad id), FRT_ERR_OUT_OF_RANGE (more than FRT_CART_MAX_STATIC). */
int frt_cart_router_add_static(frt_cart_router *rt, const char *model, const char *cartridge_id);

/* Routes one request. Returns 1 and *out when a rule resolved a cartridge,
 * 0 when none applies or the registry failed (why, when not NULL, says
 * which: "no rule applied", "registry unavailable: ..."), or:
 *   FRT_ERR_NOT_FOUND  the request's cartridge_id is not registered, or its
 *                      cartridge_label matches nothing and no later rule resolved
 *   FRT_ERR_MISMATCH   the cartridge_id (or a static mapping) names a
 *                      cartridge bound to another model
 *   FRT_ERR_UNSUPPORTED the request has a field the chain has no rule for */
int frt_cart_router_route(frt_cart_router *rt, const frt_cart_request *req, frt_cartreg_entry *out, char *why,
                          size_t why_size);

void frt_cart_router_stats_get(const frt_cart_router *rt, frt_cart_router_stats *out);

/* ---- the store: registry + router + an LRU of loaded cartridges ---------------- */

typedef struct frt_cart_store frt_cart_store;

typedef struct frt_cart_store_stats {
    frt_cart_router_stats route;
    uint64_t cache_hits;    /* a routed cartridge was already loaded (host memory) */
    uint64_t cache_misses;  /* a routed cartridge was read from disk */
    uint64_t loads;         /* reads that succeeded */
    uint64_t load_failures; /* reads that failed (file gone, checksum mismatch) */
    uint64_t evictions;     /* loaded cartridges dropped for a newer one (LRU) */
    uint64_t bytes;         /* payload bytes of the loaded cartridges */
    int entries;            /* loaded cartridges */
    int capacity;           /* the most kept loaded */
    int registered;         /* cartridges registered at open */
    int refused;            /* cartridge directories refused at open */
    int forgotten;          /* rows removed at open: their directory holds no manifest.json any more */
} frt_cart_store_stats;

#define FRT_CART_STORE_MAX_ENTRIES 1024

/* Opens the store of directory dir: the registry dir/cartridges.sqlite
 * (created if missing), its rows whose directory holds no manifest.json
 * any more removed (counted in `forgotten`), and the registration of every subdirectory of dir
 * holding a manifest.json (frt_cartreg_insert: loaded and checked in full;
 * one that fails is left out of the registry, counted in `refused` and
 * reported through log when not NULL). fingerprint: the engine model's
 * (frt_cartridge_model_fingerprint); capacity: 1..FRT_CART_STORE_MAX_ENTRIES
 * cartridges kept loaded in host memory, least recently used evicted first.
 *   FRT_ERR_INVALID_ARGUMENT (NULL, capacity, fingerprint 0),
 *   FRT_ERR_NOT_FOUND / FRT_ERR_IO (dir, the database), FRT_ERR_OUT_OF_MEMORY */
int frt_cart_store_open(const char *dir, uint64_t fingerprint, int capacity, void (*log)(void *, const char *),
                        void *log_user, frt_cart_store **out);
void frt_cart_store_free(frt_cart_store *st); /* NULL-safe; frees the loaded cartridges */

/* The store's router (owned by the store): frt_cart_router_add_static at start. */
frt_cart_router *frt_cart_store_router(frt_cart_store *st);

/* Routes req (frt_cart_router_route) and, when a cartridge resolves, gives
 * it loaded: 1 with *out (owned by the store, valid until the next acquire
 * or free: call both from one thread, the engine thread) and *entry; 0 when
 * none applies or the registry failed (why says which); or the router's
 * errors, or those of frt_cartridge_load for a registered cartridge whose
 * files no longer load (counted in load_failures; nothing is cached). */
int frt_cart_store_acquire(frt_cart_store *st, const frt_cart_request *req, const frt_cartridge **out,
                           frt_cartreg_entry *entry, char *why, size_t why_size);

/* The counters (any thread). */
void frt_cart_store_stats_get(frt_cart_store *st, frt_cart_store_stats *out);

/* Device residency (the capsule registry's CARTRIDGE entries, registry.h
 * frt_registry_cartridge_acquire). */
typedef struct frt_cart_residency_stats {
    uint64_t hits;         /* acquired while resident in device memory */
    uint64_t misses;       /* acquired while not: promoted from the host tier, uploaded, or refused */
    uint64_t promotions;   /* made device-resident: host tier -> device, or uploaded from the store's copy */
    uint64_t demotions;    /* moved device -> pinned host memory to make room (LRU) */
    uint64_t evictions;    /* dropped to make room (no host room, or evicted from the host tier) */
    uint64_t refused;      /* acquisitions refused: it could not fit (503 insufficient_capacity) */
    uint64_t device_bytes; /* bytes of the device-resident cartridges (counted in the device budget) */
    uint64_t host_bytes;   /* bytes of the host-resident ones (pinned memory, counted in the host budget) */
    int resident;          /* device-resident cartridges */
    int host_resident;     /* host-resident cartridges */
} frt_cart_residency_stats;

/* The counters as Prometheus text (frt_cartridge_* metrics, malloc'd; NULL
 * on out of memory), with the residency counters when res is not NULL. */
char *frt_cart_store_metrics_text(frt_cart_store *st, const frt_cart_residency_stats *res);

#endif /* FRT_SERVING_CARTRIDGES_H */
