/*
 * serving/registry.h - the capsule registry: the serving layer's policy over
 * the model layer's capsules (../shared/DESIGN.md sections 5 and 6).
 *
 * Each entry is one capsule of the live state at a committed boundary, with
 * the token prefix it holds. Two kinds:
 *   PREFIX   a cold-exact capsule at a chunk-aligned position (its state is
 *            exactly what a cold prefill of its tokens gives). Shared: any
 *            request with the same salt whose prompt extends its tokens can
 *            restore it. Indexed by the salted prefix digest.
 *   SESSION  the boundary of a session (a displaced hot session, a fork
 *            point, a checkpoint). Reached only through the sessions that
 *            hold a reference; deleted when the last reference goes.
 *   CARTRIDGE a resident cartridge (engine.h cartridge_upload): not a
 *            capsule of the live state but KV rows the engine injects from,
 *            in device memory (counted in the device budget with the
 *            capsules) or demoted to pinned host memory (the host budget);
 *            evicted from there (its source stays the cartridge store's
 *            copy); never restored, matched, persisted or put on disk
 *            (frt_registry_cartridge_acquire below).
 *
 * Tiers and budgets: device, host and disk each have a byte budget. A new
 * capsule goes to the requested tier (falling to the next one down when it
 * does not fit); making room demotes the least recently used unpinned
 * capsules device -> host -> disk, and deletes them from the disk tier. A
 * restore promotes the capsule to the fastest tier with room (a memory
 * capsule by a move; a disk capsule, which the model layer promotes only by
 * restoring it, by snapshotting the just-restored live state). Pinned
 * capsules are never demoted or deleted by the budgets; a pinned capsule is
 * also written through to the disk tier so it survives a restart.
 *
 * Persistence: with a capsule dir, the disk tier's files
 * (DIR/cap-ID.frtc) and their index (DIR/index.sqlite: kind, tokens, salt
 * hash, digest, pin, LRU clock, engine fingerprint) survive a restart.
 * Reopening loads the index of PREFIX capsules made by the same engine
 * fingerprint; their files are loaded lazily when a request matches them.
 * SESSION capsules do not outlive the process (sessions do not), so
 * reopening deletes them.
 *
 * Threading: one thread at a time (the service's lock).
 */
#ifndef FRT_SERVING_REGISTRY_H
#define FRT_SERVING_REGISTRY_H

#include "serving/cartridges.h"
#include "serving/engine.h"

#include <stddef.h>
#include <stdint.h>

typedef enum frt_cap_kind { FRT_CAP_PREFIX = 0, FRT_CAP_SESSION = 1, FRT_CAP_CARTRIDGE = 2 } frt_cap_kind;

const char *frt_cap_kind_name(frt_cap_kind k); /* "prefix", "session", "cartridge" */

/* One entry (read-only for callers). */
typedef struct frt_cap {
    uint64_t id;          /* > 0, unique in the capsule dir */
    frt_cap_kind kind;
    int tier;             /* fastest tier holding it (FRT_ENGINE_TIER_*) */
    void *handle;         /* engine capsule; NULL when only its file holds it (loaded on restore) */
    int persisted;        /* the file `path` holds it (counted in the disk budget) */
    char *path;           /* DIR/cap-ID.frtc, NULL without a capsule dir */
    size_t bytes;         /* payload bytes (what a memory tier holds) */
    size_t file_bytes;    /* size of its file while persisted (payload + metadata + alignment); the disk tier charges
                             max(file_bytes, bytes) */
    int position;         /* committed tokens */
    int pending;          /* pending token at the boundary, -1 when none */
    int exact;            /* the state equals a cold prefill of `tokens` */
    uint64_t digest;      /* engine digest of (salt, tokens) */
    uint64_t salt_hash;   /* xxh64 of the salt (0 for no salt) */
    char *salt;           /* the salt bytes (NULL for none), for re-snapshots */
    size_t salt_len;
    int32_t *tokens;      /* [position] the committed prefix */
    int pin_manual;       /* pinned through the API */
    int pin_holds;        /* references that pin it (pinned sessions, checkpoints) */
    int refs;             /* session references (boundaries and checkpoints) */
    uint64_t last_used;   /* LRU clock: larger = more recent */
    char owner[64];       /* the session that made it ("" for PREFIX) */
    char name[64];        /* the last checkpoint name given to it, or "" */
} frt_cap;

/* Pinned: by the API or by a holder. */
static inline int frt_cap_pinned(const frt_cap *c) { return c->pin_manual || c->pin_holds > 0; }

typedef struct frt_registry frt_registry;

typedef struct frt_registry_params {
    size_t budget[FRT_ENGINE_N_TIERS]; /* bytes per tier; 0 = the tier is not used */
    const char *dir;                   /* capsule dir (created if missing); NULL = no disk tier */
} frt_registry_params;

typedef struct frt_registry_stats {
    uint64_t snapshots;
    uint64_t restores[FRT_ENGINE_N_TIERS]; /* by the tier restored from */
    uint64_t demotions;                    /* moved one tier down by the budgets */
    uint64_t promotions;                   /* moved up on restore */
    uint64_t restore_prefills;             /* restores that ran the first prefill piece in the same call */
    uint64_t evictions;                    /* deleted from the disk tier by the budget (or no disk tier) */
    uint64_t load_failures;                /* files that failed their checks on load (quarantined) */
    uint64_t stale_temp_removed;           /* temporary files of killed writes removed at open */
    uint64_t rows_refused;                 /* index rows naming a path outside the dir (dropped) */
    uint64_t orphans_removed;              /* capsule files without an index row removed at open */
} frt_registry_stats;

/* Opens a registry over `e` (not owned). With a dir: creates it if missing,
 * removes the temporary files of killed writes (cap-*.tmp*), opens
 * DIR/index.sqlite, loads the PREFIX rows of e's fingerprint whose files
 * exist (lazily: no file is read), deletes SESSION rows and their files,
 * drops rows whose path is not a file name inside the dir (never touching
 * that path), removes capsule files without any index row (cap-N.frtc
 * orphans), charges every other byte in the dir to the disk budget (see
 * frt_registry_disk_other_bytes), then enforces the disk budget. Index rows hold file names
 * relative to the dir; the dir is fsynced after every file it gains. A file
 * that fails its checks on restore is quarantined: renamed to
 * NAME.quarantined and dropped from the index.
 *   FRT_ERR_INVALID_ARGUMENT  NULL e/out
 *   FRT_ERR_IO                the dir or the index cannot be created/opened */
int frt_registry_open(frt_engine *e, const frt_registry_params *p, frt_registry **out);

/* Frees every handle (files and index stay). NULL is a no-op. */
void frt_registry_close(frt_registry *r);

/* What to snapshot. tokens[n] must be the live state's committed tokens
 * (n == engine position). */
typedef struct frt_cap_spec {
    frt_cap_kind kind;
    int tier;                  /* preferred tier; falls down a tier when it does not fit */
    const int32_t *tokens;
    int n;
    int pending;
    int exact;                 /* the state equals a cold prefill of tokens */
    const void *salt;
    size_t salt_len;
    int pin;                   /* manual pin */
    const char *owner;         /* session id or NULL */
} frt_cap_spec;

/* Snapshots the live state into a new entry; *id receives its id.
 *   FRT_ERR_INVALID_ARGUMENT  bad spec (n != engine position, PREFIX not
 *                             chunk-aligned or not exact)
 *   FRT_ERR_OUT_OF_MEMORY     no tier has room even after demotions
 *   errors of the engine's snapshot
 * The live state is never changed. */
int frt_registry_snapshot(frt_registry *r, const frt_cap_spec *spec, uint64_t *id);

/* Restores entry `id` into the live state: loads its file if needed,
 * (a CARTRIDGE entry is FRT_ERR_INVALID_ARGUMENT: it is injected, not restored),
 * restores, marks it most recently used, and promotes it to the fastest
 * tier with room. *from_tier (optional) receives the tier it was restored
 * from. A file that fails its checks is deleted with its entry.
 *   FRT_ERR_NOT_FOUND  no such entry
 *   errors of the engine's load/restore (the live state is then untouched) */
int frt_registry_restore(frt_registry *r, uint64_t id, int *from_tier);

/* frt_registry_restore followed by the prefill of ids [n] (n >= 1), as one
 * call of the engine (restore_prefill) where it can: the engine has the
 * call and entry `id` sits in the device tier (it would not be promoted:
 * a promotion snapshots the live state, which the one call has moved on).
 * *prefilled is then n, else 0 and only the restore ran (the caller
 * prefills). Counts stats.restore_prefills.
 *   FRT_ERR_NOT_FOUND  no such entry
 *   errors of frt_registry_restore, or of the one call (the live state is
 *   then unknown: the caller rebuilds it) */
int frt_registry_restore_prefill(frt_registry *r, uint64_t id, const int32_t *ids, int n, int *prefilled);

/* The entry, or NULL. Valid until the next mutating call. */
const frt_cap *frt_registry_get(const frt_registry *r, uint64_t id);

/* Entries in creation order: 0 <= i < frt_registry_count. */
int frt_registry_count(const frt_registry *r);
const frt_cap *frt_registry_at(const frt_registry *r, int i);

/* The longest PREFIX entry with this salt whose tokens are a prefix of
 * ids[0..n) and whose position is <= max_pos. Returns its position (0 when
 * none) and *id (0 when none). Matching computes the salted digest of each
 * chunk-aligned length and compares tokens on a digest hit. */
int frt_registry_match_prefix(const frt_registry *r, const int32_t *ids, int n, int max_pos, const void *salt,
                              size_t salt_len, uint64_t *id);

/* Manual pin on/off. Pinning writes the capsule through to the disk tier.
 * FRT_ERR_NOT_FOUND. */
int frt_registry_pin(frt_registry *r, uint64_t id, int pin);

/* Session references. ref(id, +1, pin) adds a reference (pin: a pinning
 * one); ref(id, -1, pin) drops one, deleting a SESSION entry whose last
 * reference went. FRT_ERR_NOT_FOUND (the entry was deleted: nothing done). */
int frt_registry_ref(frt_registry *r, uint64_t id, int delta, int pin);

/* Records a checkpoint name on the entry (for listings). */
int frt_registry_set_name(frt_registry *r, uint64_t id, const char *name);

/* Deletes an entry: frees its handle, deletes its file and index row.
 * Sessions that referenced it fall back to other plans. FRT_ERR_NOT_FOUND;
 * FRT_ERR_STATE for a cartridge in use. */
int frt_registry_delete(frt_registry *r, uint64_t id);

/* Bytes held in a tier, and the budget. The disk tier counts its capsules
 * plus frt_registry_disk_other_bytes: the budget covers every byte in the
 * capsule dir. */
size_t frt_registry_bytes(const frt_registry *r, int tier);

/* Bytes in the capsule dir that are not capsules of this registry, measured
 * at open (the index as it was then, other models' capsules, quarantined and
 * foreign files) plus files quarantined since. The index's growth while
 * running is charged at the next open. */
size_t frt_registry_disk_other_bytes(const frt_registry *r);
size_t frt_registry_budget(const frt_registry *r, int tier);
int frt_registry_tier_count(const frt_registry *r, int tier);

void frt_registry_stats_get(const frt_registry *r, frt_registry_stats *st);

/* ---- cartridge residency ---------------------------------------------------- */

/* Makes the cartridge `cart` (a const frt_cartridge *, the store's host copy)
 * resident in device memory and marks it in use: a CARTRIDGE entry keyed by
 * `key` (the caller's identity of the cartridge version) already in device
 * memory is a hit; otherwise the device tier makes room for `bytes`
 * (engine.h cartridge_bytes) by demoting or evicting the least recently used
 * entries that are neither pinned nor in use (capsules go down to host /
 * disk; other cartridges to pinned host memory when the host budget has
 * room, else they are dropped), then the entry is promoted: moved from the
 * host tier (engine.h cartridge_move, one DMA) or, when absent, uploaded
 * from cart. In use = pinned: nothing demotes or evicts it until
 * frt_registry_cartridge_release. *id receives the entry, *resident the
 * engine's handle (valid while in use). name (its id) is kept for listings.
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments, bytes 0, an engine without
 *                             cartridge residency
 *   FRT_ERR_OUT_OF_MEMORY     it cannot fit: bytes above the device budget,
 *                             or pinned / in-use entries leave too little
 *                             room (counted in `refused`; nothing evicted
 *                             beyond what the budget check moved)
 *   errors of the engine's upload (nothing kept) */
int frt_registry_cartridge_acquire(frt_registry *r, uint64_t key, const char *name, const void *cart, size_t bytes,
                                   uint64_t *id, const void **resident);

/* Ends one use of entry id (from acquire); the entry stays resident and
 * evictable once no use holds it. FRT_ERR_NOT_FOUND. */
int frt_registry_cartridge_release(frt_registry *r, uint64_t id);

/* The residency counters and the bytes / count of resident cartridges. */
void frt_registry_cartridge_stats(const frt_registry *r, frt_cart_residency_stats *out);

/* The salt hash entries carry (xxh64, 0 for an empty salt). */
uint64_t frt_salt_hash(const void *salt, size_t salt_len);

#endif
