/*
 * test_serving_registry_files.c - the registry's capsule directory against
 * crashes and tampering (issue 22): temporary files of killed writes are
 * removed at open, index rows hold file names relative to the dir, a row
 * naming a path outside the dir is dropped without touching that path, and
 * a capsule file that fails its checks is quarantined (renamed aside,
 * dropped from the index) instead of being offered again, orphan capsule
 * files are removed, and every other byte in the dir counts against the
 * disk budget.
 */
#include "frt_test.h"

#include "serving/engine.h"
#include "serving/registry.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { C = 16 };

static frt_engine *make_engine(void)
{
    frt_engine_fake_params p = frt_engine_fake_default_params();
    p.prefill_chunk = C;
    p.max_seq = 1024;
    frt_engine *e = NULL;
    if (frt_engine_fake_create(&p, &e)) {
        fprintf(stderr, "fake engine: %s\n", frt_last_error());
        exit(1);
    }
    return e;
}

static char *temp_dir(void)
{
    char *d = strdup("/tmp/frt_test_regfiles_XXXXXX");
    if (!mkdtemp(d)) {
        perror("mkdtemp");
        exit(1);
    }
    return d;
}

static void rm_rf(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "cleanup of %s failed\n", dir);
}

static int exists(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void touch_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A pinned PREFIX capsule of 32 tokens, written through to disk. */
static uint64_t snap_pinned(frt_registry *r, frt_engine *e)
{
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = 40 + i;
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 32));
    frt_cap_spec s = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, -1, 1, NULL, 0, 1, NULL};
    uint64_t id = 0;
    CHECK_OK(frt_registry_snapshot(r, &s, &id));
    CHECK(frt_registry_get(r, id) && frt_registry_get(r, id)->persisted);
    return id;
}

/* The path stored in the index row of id ("" when absent). */
static void row_path(const char *dir, uint64_t id, char *out, size_t cap)
{
    char p[512];
    snprintf(p, sizeof p, "%s/index.sqlite", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    out[0] = 0;
    CHECK(sqlite3_open(p, &db) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "SELECT path FROM capsules WHERE id = ?", -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if (sqlite3_step(st) == SQLITE_ROW) snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void set_row_path(const char *dir, uint64_t id, const char *path)
{
    char p[512];
    snprintf(p, sizeof p, "%s/index.sqlite", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_open(p, &db) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "UPDATE capsules SET path = ? WHERE id = ?", -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)id);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_stale_temps(void)
{
    char *dir = temp_dir();
    char p[512];
    snprintf(p, sizeof p, "%s/cap-9.frtc.tmp", dir);
    touch_file(p, "partial");
    snprintf(p, sizeof p, "%s/cap-10.frtc.tmp.4242", dir);
    touch_file(p, "partial");
    snprintf(p, sizeof p, "%s/notes.tmp.txt", dir); /* not ours: left alone */
    touch_file(p, "operator's file");
    frt_engine *e = make_engine();
    frt_registry_params rp = {{0, 1 << 20, 1 << 20}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(!exists(dir, "cap-9.frtc.tmp") && !exists(dir, "cap-10.frtc.tmp.4242"));
    CHECK(exists(dir, "notes.tmp.txt"));
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);
    CHECK(st.stale_temp_removed == 2);
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(dir);
    free(dir);
}

static void test_relative_rows(void)
{
    char *dir = temp_dir(), *outside = temp_dir();
    frt_engine *e = make_engine();
    frt_registry_params rp = {{0, 1 << 20, 1 << 20}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    uint64_t a = snap_pinned(r, e);
    frt_registry_close(r);
    char got[512], want[64];
    row_path(dir, a, got, sizeof got);
    snprintf(want, sizeof want, "cap-%llu.frtc", (unsigned long long)a);
    CHECK(!strcmp(got, want)); /* a file name, not an absolute path */

    /* the dir moved: the relative row still finds its file */
    char moved[600];
    snprintf(moved, sizeof moved, "%s.moved", dir);
    CHECK(rename(dir, moved) == 0);
    rp.dir = moved;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(frt_registry_count(r) == 1);
    CHECK_OK(frt_registry_restore(r, a, NULL));
    frt_registry_close(r);

    /* a row naming a file outside the dir is dropped; that file is never touched */
    char victim[600];
    snprintf(victim, sizeof victim, "%s/precious.frtc", outside);
    touch_file(victim, "not a capsule of this registry");
    set_row_path(moved, a, victim);
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(frt_registry_count(r) == 0);
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);
    CHECK(st.rows_refused == 1);
    frt_registry_close(r);
    CHECK(access(victim, F_OK) == 0);
    row_path(moved, a, got, sizeof got);
    CHECK(got[0] == 0); /* the row is gone */
    /* "../x" is outside too */
    CHECK_OK(frt_registry_open(e, &rp, &r));
    uint64_t b = snap_pinned(r, e);
    frt_registry_close(r);
    set_row_path(moved, b, "../precious.frtc");
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(frt_registry_count(r) == 0);
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(moved);
    rm_rf(outside);
    free(dir);
    free(outside);
}

static void test_quarantine(void)
{
    char *dir = temp_dir();
    frt_engine *e = make_engine();
    frt_registry_params rp = {{0, 1 << 20, 1 << 20}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    uint64_t a = snap_pinned(r, e);
    frt_registry_close(r);
    char name[64], qname[80], p[600];
    snprintf(name, sizeof name, "cap-%llu.frtc", (unsigned long long)a);
    snprintf(qname, sizeof qname, "%s.quarantined", name);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK(truncate(p, 10) == 0); /* a damaged file */
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(frt_registry_count(r) == 1); /* loaded lazily: not read yet */
    CHECK(frt_registry_restore(r, a, NULL) != 0);
    CHECK(frt_registry_get(r, a) == NULL);
    CHECK(!exists(dir, name) && exists(dir, qname));
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);
    CHECK(st.load_failures == 1);
    frt_registry_close(r);
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(frt_registry_count(r) == 0); /* not offered again after a restart */
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(dir);
    free(dir);
}

/* Every byte in the dir counts against the disk budget; orphan capsule
 * files (no index row) are removed at open. */
static void test_every_byte(void)
{
    char *dir = temp_dir();
    char p[600];
    snprintf(p, sizeof p, "%s/big.bin", dir);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    for (int i = 0; f && i < 10000; i++) fputc('x', f);
    if (f) fclose(f);
    snprintf(p, sizeof p, "%s/cap-77.frtc", dir); /* a write killed before its index row */
    touch_file(p, "orphan");
    frt_engine *e = make_engine();
    /* a fake capsule of 32 tokens reports 4096 + 256 * 32 = 12288 bytes: it
     * fits 20000, but not beside the 10000 bytes of big.bin */
    frt_registry_params rp = {{0, 1 << 20, 20000}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(!exists(dir, "cap-77.frtc") && exists(dir, "big.bin"));
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);
    CHECK(st.orphans_removed == 1);
    CHECK(frt_registry_disk_other_bytes(r) == 10000);
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DISK) == 10000);
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = 40 + i;
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 32));
    frt_cap_spec s = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, -1, 1, NULL, 0, 1, NULL};
    uint64_t id = 0;
    CHECK_OK(frt_registry_snapshot(r, &s, &id));
    const frt_cap *c = frt_registry_get(r, id);
    CHECK(c && c->bytes == 12288 && !c->persisted); /* no room on disk: the write-through was refused */
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DISK) <= 20000);
    frt_registry_close(r);
    /* without big.bin it is written through (the index written by the first
     * run is charged now: the budget leaves room for it) */
    snprintf(p, sizeof p, "%s/big.bin", dir);
    CHECK(unlink(p) == 0);
    struct stat sb;
    snprintf(p, sizeof p, "%s/index.sqlite", dir);
    CHECK(stat(p, &sb) == 0 && sb.st_size > 0);
    rp.budget[FRT_ENGINE_TIER_DISK] = 20000 + (size_t)sb.st_size;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    CHECK(frt_registry_disk_other_bytes(r) == (size_t)sb.st_size);
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 32));
    CHECK_OK(frt_registry_snapshot(r, &s, &id));
    c = frt_registry_get(r, id);
    CHECK(c && c->persisted);
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(dir);
    free(dir);
}

/* Number of cap-*.frtc files in dir. */
static int capsule_files(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '^cap-[0-9]*\\.frtc$'", dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1) n = -1;
        pclose(f);
    }
    return n;
}

/* An index write that fails (another connection holds the write lock past
 * the 2 s busy timeout) leaves no capsule file behind and is reported. */
static void test_index_write_failure(void)
{
    char *dir = temp_dir();
    frt_engine *e = make_engine();
    frt_registry_params rp = {{0, 1 << 20, 1 << 20}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    char p[600];
    snprintf(p, sizeof p, "%s/index.sqlite", dir);
    sqlite3 *lock = NULL;
    CHECK(sqlite3_open(p, &lock) == SQLITE_OK);
    CHECK(sqlite3_exec(lock, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK);

    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = 50 + i;
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 32));
    /* straight to the disk tier: the snapshot fails with the index's error */
    frt_cap_spec sd = {FRT_CAP_SESSION, FRT_ENGINE_TIER_DISK, ids, 32, -1, 1, NULL, 0, 0, "s"};
    uint64_t id = 0;
    CHECK_STATUS(frt_registry_snapshot(r, &sd, &id), FRT_ERR_IO);
    CHECK(strstr(frt_last_error(), "capsule index") != NULL);
    CHECK(frt_registry_count(r) == 0);
    CHECK(capsule_files(dir) == 0);
    /* a pinned prefix is written through best effort: kept in memory, no file */
    frt_cap_spec sp = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, -1, 1, NULL, 0, 1, NULL};
    CHECK_OK(frt_registry_snapshot(r, &sp, &id));
    CHECK(frt_registry_get(r, id) && !frt_registry_get(r, id)->persisted);
    CHECK(capsule_files(dir) == 0);

    CHECK(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(lock);
    CHECK_OK(frt_registry_snapshot(r, &sd, &id)); /* the lock is gone: it works again */
    CHECK(capsule_files(dir) == 1);
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    test_index_write_failure();
    test_every_byte();
    test_stale_temps();
    test_relative_rows();
    test_quarantine();
    return frt_test_report();
}
