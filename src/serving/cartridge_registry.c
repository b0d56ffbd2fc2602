/* serving/cartridge_registry.c - the SQLite registry of cartridges
 * (serving/cartridges.h). Two tables: one row per cartridge, one row per
 * (cartridge, label). */
#include "serving/cartridges.h"

#include "util/error.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct frt_cartreg {
    sqlite3 *db;
};

static const char k_schema[] =
    "CREATE TABLE IF NOT EXISTS cartridges ("
    " id TEXT PRIMARY KEY, path TEXT NOT NULL, fingerprint INTEGER NOT NULL, tokens INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL, created TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS cartridge_labels ("
    " id TEXT NOT NULL REFERENCES cartridges(id) ON DELETE CASCADE, label TEXT NOT NULL,"
    " PRIMARY KEY (id, label));"
    "CREATE INDEX IF NOT EXISTS cartridge_labels_by_label ON cartridge_labels(label);";

static const char k_columns[] = "SELECT c.id, c.path, c.fingerprint, c.tokens, c.bytes, c.created FROM cartridges c";

static int db_fail(const frt_cartreg *r, const char *what)
{
    return frt_error(FRT_ERR_IO, "cartridge registry: %s: %s", what, r && r->db ? sqlite3_errmsg(r->db) : "?");
}

int frt_cartreg_open(const char *path, frt_cartreg **out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: NULL argument");
    *out = NULL;
    frt_cartreg *r = calloc(1, sizeof *r);
    if (!r) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge registry");
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
        SQLITE_OK) {
        int rc = frt_error(FRT_ERR_IO, "cartridge registry: cannot open %s: %s", path,
                           r->db ? sqlite3_errmsg(r->db) : "?");
        frt_cartreg_close(r);
        return rc;
    }
    sqlite3_busy_timeout(r->db, 2000);
    char *msg = NULL;
    if (sqlite3_exec(r->db, "PRAGMA foreign_keys=ON;", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(r->db, k_schema, NULL, NULL, &msg) != SQLITE_OK) {
        int rc = frt_error(FRT_ERR_IO, "cartridge registry: %s: schema: %s", path, msg ? msg : sqlite3_errmsg(r->db));
        sqlite3_free(msg);
        frt_cartreg_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void frt_cartreg_close(frt_cartreg *r)
{
    if (!r) return;
    sqlite3_close(r->db);
    free(r);
}

/* Runs sql with one text parameter; 0 or FRT_ERR_IO. */
static int exec1(frt_cartreg *r, const char *sql, const char *text)
{
    sqlite3_stmt *st = NULL;
    int ok = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) == SQLITE_OK &&
             sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT) == SQLITE_OK && sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return ok ? 0 : db_fail(r, sql);
}

static int put_row(frt_cartreg *r, const frt_cartridge_info *in, const char *dir)
{
    sqlite3_stmt *st = NULL;
    int ok = sqlite3_prepare_v2(r->db, "INSERT OR REPLACE INTO cartridges VALUES (?, ?, ?, ?, ?, ?)", -1, &st, NULL) ==
             SQLITE_OK;
    ok = ok && sqlite3_bind_text(st, 1, in->id, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
         sqlite3_bind_text(st, 2, dir, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
         sqlite3_bind_int64(st, 3, (sqlite3_int64)in->model_fingerprint) == SQLITE_OK &&
         sqlite3_bind_int(st, 4, in->tokens) == SQLITE_OK &&
         sqlite3_bind_int64(st, 5, (sqlite3_int64)in->file_bytes) == SQLITE_OK &&
         sqlite3_bind_text(st, 6, in->created, -1, SQLITE_TRANSIENT) == SQLITE_OK && sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    if (!ok) return db_fail(r, "insert");
    FRT_TRY(exec1(r, "DELETE FROM cartridge_labels WHERE id = ?", in->id));
    for (int i = 0; i < in->n_labels; i++) {
        ok = sqlite3_prepare_v2(r->db, "INSERT OR IGNORE INTO cartridge_labels VALUES (?, ?)", -1, &st, NULL) ==
                 SQLITE_OK &&
             sqlite3_bind_text(st, 1, in->id, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
             sqlite3_bind_text(st, 2, in->labels[i], -1, SQLITE_TRANSIENT) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_DONE;
        sqlite3_finalize(st);
        if (!ok) return db_fail(r, "insert label");
    }
    return 0;
}

int frt_cartreg_insert(frt_cartreg *r, const char *dir)
{
    if (!r || !dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: NULL argument");
    if (strlen(dir) >= sizeof(((frt_cartreg_entry *)0)->path))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: path of %zu bytes", strlen(dir));
    frt_cartridge *c = NULL;
    FRT_TRY(frt_cartridge_load(dir, &c));
    frt_cartridge_info in;
    frt_cartridge_info_get(c, &in);
    frt_cartridge_free(c);
    if (sqlite3_exec(r->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return db_fail(r, "begin");
    int rc = put_row(r, &in, dir);
    if (rc == 0 && sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) rc = db_fail(r, "commit");
    if (rc < 0) sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static void text_col(sqlite3_stmt *st, int col, char *dst, size_t n)
{
    const unsigned char *s = sqlite3_column_text(st, col);
    snprintf(dst, n, "%s", s ? (const char *)s : "");
}

/* The row at the statement's cursor, labels included. */
static int read_row(frt_cartreg *r, sqlite3_stmt *st, frt_cartreg_entry *e)
{
    memset(e, 0, sizeof *e);
    text_col(st, 0, e->id, sizeof e->id);
    text_col(st, 1, e->path, sizeof e->path);
    e->model_fingerprint = (uint64_t)sqlite3_column_int64(st, 2);
    e->tokens = sqlite3_column_int(st, 3);
    e->bytes = (uint64_t)sqlite3_column_int64(st, 4);
    text_col(st, 5, e->created, sizeof e->created);
    sqlite3_stmt *ls = NULL;
    if (sqlite3_prepare_v2(r->db, "SELECT label FROM cartridge_labels WHERE id = ? ORDER BY label", -1, &ls, NULL) !=
            SQLITE_OK ||
        sqlite3_bind_text(ls, 1, e->id, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        sqlite3_finalize(ls);
        return db_fail(r, "labels");
    }
    int s;
    while ((s = sqlite3_step(ls)) == SQLITE_ROW && e->n_labels < FRT_CARTRIDGE_MAX_LABELS)
        text_col(ls, 0, e->labels[e->n_labels++], sizeof e->labels[0]);
    sqlite3_finalize(ls);
    return s == SQLITE_ROW || s == SQLITE_DONE ? 0 : db_fail(r, "labels");
}

/* Runs a query of k_columns + `where` with text parameters a (and b, and
 * the fingerprint when fp != 0) and reads its first row. */
static int query_one(frt_cartreg *r, const char *where, const char *a, uint64_t fp, frt_cartreg_entry *out,
                     const char *what)
{
    char sql[512];
    snprintf(sql, sizeof sql, "%s %s", k_columns, where);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_text(st, 1, a, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        (fp && sqlite3_bind_int64(st, 2, (sqlite3_int64)fp) != SQLITE_OK)) {
        sqlite3_finalize(st);
        return db_fail(r, "query");
    }
    int s = sqlite3_step(st), rc;
    if (s == SQLITE_ROW) rc = read_row(r, st, out);
    else if (s == SQLITE_DONE) rc = frt_error(FRT_ERR_NOT_FOUND, "cartridge registry: no cartridge %s '%s'", what, a);
    else rc = db_fail(r, "query");
    sqlite3_finalize(st);
    return rc;
}

int frt_cartreg_get(frt_cartreg *r, const char *id, frt_cartreg_entry *out)
{
    if (!r || !id || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: NULL argument");
    return query_one(r, "WHERE c.id = ?", id, 0, out, "with id");
}

int frt_cartreg_by_label(frt_cartreg *r, const char *label, uint64_t fingerprint, frt_cartreg_entry *out)
{
    if (!r || !label || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: NULL argument");
    if (!fingerprint) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: fingerprint 0");
    return query_one(r,
                     "JOIN cartridge_labels l ON l.id = c.id WHERE l.label = ? AND c.fingerprint = ?"
                     " ORDER BY c.created DESC, c.id DESC LIMIT 1",
                     label, fingerprint, out, "for this model with label");
}

int frt_cartreg_list(frt_cartreg *r, frt_cartreg_entry **out, int *n)
{
    if (!r || !out || !n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: NULL argument");
    *out = NULL;
    *n = 0;
    char sql[256];
    snprintf(sql, sizeof sql, "%s ORDER BY c.id", k_columns);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) return db_fail(r, "list");
    frt_cartreg_entry *v = NULL;
    int cnt = 0, cap = 0, rc = 0, s = SQLITE_DONE;
    while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? 2 * cap : 8;
            frt_cartreg_entry *nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge registry");
                break;
            }
            v = nv;
        }
        rc = read_row(r, st, &v[cnt++]);
    }
    if (rc == 0 && s != SQLITE_DONE) rc = db_fail(r, "list");
    sqlite3_finalize(st);
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int frt_cartreg_remove(frt_cartreg *r, const char *id)
{
    if (!r || !id) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge registry: NULL argument");
    FRT_TRY(exec1(r, "DELETE FROM cartridges WHERE id = ?", id));
    if (sqlite3_changes(r->db) == 0)
        return frt_error(FRT_ERR_NOT_FOUND, "cartridge registry: no cartridge with id '%s'", id);
    return 0;
}
