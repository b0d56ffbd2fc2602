/* serving/registry_db.c - the SQLite index of the disk tier. */
#include "serving/registry_db.h"

#include "util/error.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct frt_capdb {
    sqlite3 *db;
    uint64_t max_id; /* also remembers ids of deleted rows */
};

static const char k_schema[] =
    "CREATE TABLE IF NOT EXISTS capsules ("
    " id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, path TEXT NOT NULL, bytes INTEGER NOT NULL,"
    " position INTEGER NOT NULL, pending INTEGER NOT NULL, exact INTEGER NOT NULL,"
    " digest INTEGER NOT NULL, salt_hash INTEGER NOT NULL, tokens BLOB,"
    " pin_manual INTEGER NOT NULL, last_used INTEGER NOT NULL, owner TEXT, name TEXT,"
    " fingerprint INTEGER NOT NULL, salt BLOB);"
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER);";

static int db_fail(frt_capdb *db, const char *what)
{
    return frt_error(FRT_ERR_IO, "capsule index: %s: %s", what, db && db->db ? sqlite3_errmsg(db->db) : "?");
}

int frt_capdb_open(const char *dir, frt_capdb **out)
{
    if (!dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule index: NULL argument");
    frt_capdb *db = calloc(1, sizeof *db);
    if (!db) return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule index");
    size_t n = strlen(dir) + 32;
    char *path = malloc(n);
    if (!path) {
        free(db);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule index");
    }
    snprintf(path, n, "%s/index.sqlite", dir);
    int rc = sqlite3_open_v2(path, &db->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        frt_error(FRT_ERR_IO, "capsule index: cannot open %s: %s", path, db->db ? sqlite3_errmsg(db->db) : "?");
        free(path);
        frt_capdb_close(db);
        return FRT_ERR_IO;
    }
    free(path);
    sqlite3_busy_timeout(db->db, 2000);
    char *msg = NULL;
    if (sqlite3_exec(db->db, k_schema, NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(db->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, NULL) != SQLITE_OK) {
        frt_error(FRT_ERR_IO, "capsule index: schema: %s", msg ? msg : sqlite3_errmsg(db->db));
        sqlite3_free(msg);
        frt_capdb_close(db);
        return FRT_ERR_IO;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->db, "SELECT max(coalesce((SELECT max(id) FROM capsules), 0),"
                                    " coalesce((SELECT value FROM meta WHERE key = 'max_id'), 0))",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        db->max_id = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    *out = db;
    return 0;
}

void frt_capdb_close(frt_capdb *db)
{
    if (!db) return;
    sqlite3_close(db->db);
    free(db);
}

int frt_capdb_put(frt_capdb *db, const frt_cap *c, uint64_t fingerprint)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->db,
                           "INSERT OR REPLACE INTO capsules (id, kind, path, bytes, position, pending, exact, digest,"
                           " salt_hash, tokens, pin_manual, last_used, owner, name, fingerprint, salt)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, "prepare insert");
    sqlite3_bind_int64(st, 1, (sqlite3_int64)c->id);
    sqlite3_bind_int(st, 2, (int)c->kind);
    /* the file name only: rows hold paths relative to the capsule dir */
    const char *slash = c->path ? strrchr(c->path, '/') : NULL;
    sqlite3_bind_text(st, 3, slash ? slash + 1 : c->path ? c->path : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)c->bytes);
    sqlite3_bind_int(st, 5, c->position);
    sqlite3_bind_int(st, 6, c->pending);
    sqlite3_bind_int(st, 7, c->exact);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)c->digest);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)c->salt_hash);
    sqlite3_bind_blob(st, 10, c->tokens, (int)((size_t)c->position * sizeof *c->tokens), SQLITE_STATIC);
    sqlite3_bind_int(st, 11, c->pin_manual);
    sqlite3_bind_int64(st, 12, (sqlite3_int64)c->last_used);
    sqlite3_bind_text(st, 13, c->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 14, c->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 15, (sqlite3_int64)fingerprint);
    if (c->salt_len) sqlite3_bind_blob(st, 16, c->salt, (int)c->salt_len, SQLITE_STATIC);
    else sqlite3_bind_null(st, 16);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_fail(db, "insert");
    sqlite3_finalize(st);
    if (!rc && c->id > db->max_id) {
        db->max_id = c->id;
        sqlite3_stmt *m = NULL;
        if (sqlite3_prepare_v2(db->db, "INSERT OR REPLACE INTO meta (key, value) VALUES ('max_id', ?)", -1, &m,
                               NULL) == SQLITE_OK) {
            sqlite3_bind_int64(m, 1, (sqlite3_int64)db->max_id);
            sqlite3_step(m);
        }
        sqlite3_finalize(m);
    }
    return rc;
}

int frt_capdb_touch(frt_capdb *db, uint64_t id, uint64_t last_used, int pin_manual)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->db, "UPDATE capsules SET last_used = ?, pin_manual = ? WHERE id = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return db_fail(db, "prepare update");
    sqlite3_bind_int64(st, 1, (sqlite3_int64)last_used);
    sqlite3_bind_int(st, 2, pin_manual);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)id);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_fail(db, "update");
    sqlite3_finalize(st);
    return rc;
}

int frt_capdb_del(frt_capdb *db, uint64_t id)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->db, "DELETE FROM capsules WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, "prepare delete");
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_fail(db, "delete");
    sqlite3_finalize(st);
    return rc;
}

int frt_capdb_scan(frt_capdb *db, frt_capdb_row_cb cb, void *user)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->db,
                           "SELECT id, kind, path, bytes, position, pending, exact, digest, salt_hash, tokens,"
                           " pin_manual, last_used, owner, name, fingerprint, salt FROM capsules ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, "prepare scan");
    int rc = 0, step;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        frt_cap c;
        memset(&c, 0, sizeof c);
        c.id = (uint64_t)sqlite3_column_int64(st, 0);
        c.kind = (frt_cap_kind)sqlite3_column_int(st, 1);
        c.path = (char *)sqlite3_column_text(st, 2);
        c.bytes = (size_t)sqlite3_column_int64(st, 3);
        c.position = sqlite3_column_int(st, 4);
        c.pending = sqlite3_column_int(st, 5);
        c.exact = sqlite3_column_int(st, 6);
        c.digest = (uint64_t)sqlite3_column_int64(st, 7);
        c.salt_hash = (uint64_t)sqlite3_column_int64(st, 8);
        c.tokens = (int32_t *)sqlite3_column_blob(st, 9);
        int blob = sqlite3_column_bytes(st, 9);
        c.pin_manual = sqlite3_column_int(st, 10);
        c.last_used = (uint64_t)sqlite3_column_int64(st, 11);
        const char *owner = (const char *)sqlite3_column_text(st, 12), *name = (const char *)sqlite3_column_text(st, 13);
        snprintf(c.owner, sizeof c.owner, "%s", owner ? owner : "");
        snprintf(c.name, sizeof c.name, "%s", name ? name : "");
        uint64_t fp = (uint64_t)sqlite3_column_int64(st, 14);
        c.salt = (char *)sqlite3_column_blob(st, 15);
        c.salt_len = (size_t)sqlite3_column_bytes(st, 15);
        if (!c.salt) c.salt_len = 0;
        if (c.position < 0 || (size_t)blob != (size_t)c.position * sizeof(int32_t) || !c.path) continue; /* damaged row */
        rc = cb(user, &c, fp);
    }
    sqlite3_finalize(st);
    return rc;
}

uint64_t frt_capdb_max_id(frt_capdb *db) { return db ? db->max_id : 0; }
