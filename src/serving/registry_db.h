/*
 * serving/registry_db.h - the SQLite index of the registry's disk tier
 * (DIR/index.sqlite): one row per capsule file, so the disk tier survives a
 * restart. Internal to registry.c.
 */
#ifndef FRT_SERVING_REGISTRY_DB_H
#define FRT_SERVING_REGISTRY_DB_H

#include "serving/registry.h"

typedef struct frt_capdb frt_capdb;

/* Opens (creating if missing) DIR/index.sqlite. FRT_ERR_IO with SQLite's
 * message on failure. */
int frt_capdb_open(const char *dir, frt_capdb **out);
void frt_capdb_close(frt_capdb *db);

/* Inserts or replaces the row of c (every field but handle, tier, refs and
 * pin_holds), tagged with the engine fingerprint. The row holds the file
 * name of c->path only (relative to the capsule dir). FRT_ERR_IO with
 * SQLite's message on failure. */
int frt_capdb_put(frt_capdb *db, const frt_cap *c, uint64_t fingerprint);

/* Updates the LRU clock and the manual pin of row id (no-op when absent). */
int frt_capdb_touch(frt_capdb *db, uint64_t id, uint64_t last_used, int pin_manual);

int frt_capdb_del(frt_capdb *db, uint64_t id);

/* Calls cb for every row: c has id, kind, path, bytes, position, pending,
 * exact, digest, salt_hash, salt and tokens (valid during the call), pin_manual,
 * last_used, owner, name. A nonzero return from cb stops the scan and is
 * returned. */
typedef int (*frt_capdb_row_cb)(void *user, const frt_cap *c, uint64_t fingerprint);
int frt_capdb_scan(frt_capdb *db, frt_capdb_row_cb cb, void *user);

/* The largest id ever stored (0 when empty). */
uint64_t frt_capdb_max_id(frt_capdb *db);

#endif
