/*
 * fuzz_serving_capdb.c - libFuzzer target: rows of the capsule index
 * (DIR/index.sqlite, serving/registry_db.c) as a tampered or damaged index
 * would hold them, loaded by frt_registry_open over the fake engine, then
 * each loaded capsule restored. The input is a sequence of rows:
 *   kind (1 byte), flags (1: this model's fingerprint, 2: tokens blob of the
 *   right size), position (2 bytes), pending (2 bytes), path length (1 byte),
 *   path bytes, a token seed (1 byte).
 * Checks: open succeeds; a file outside the dir (named by some rows) is
 * never removed; every loaded entry's path is a file directly in the dir;
 * restores either work or fail cleanly (and drop the entry).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_serving_capdb CORPUS;
 * CI replays fuzz/corpus/serving_capdb/ through replay_serving_capdb.
 */
#include "serving/engine.h"
#include "serving/registry.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64], g_outside[64], g_victim[128];
static frt_engine *g_e;

static void cleanup(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", g_dir, g_outside);
    if (system(cmd)) fprintf(stderr, "fuzz_serving_capdb: cleanup failed\n");
    frt_engine_free(g_e);
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/frt_fuzz_capdb_XXXXXX");
    snprintf(g_outside, sizeof g_outside, "/tmp/frt_fuzz_capdb_out_XXXXXX");
    if (!mkdtemp(g_dir) || !mkdtemp(g_outside)) abort();
    atexit(cleanup);
    snprintf(g_victim, sizeof g_victim, "%s/victim.frtc", g_outside);
    frt_engine_fake_params p = frt_engine_fake_default_params();
    p.prefill_chunk = 16;
    p.max_seq = 256;
    if (frt_engine_fake_create(&p, &g_e)) abort();
    frt_registry_params rp = {{0, 1 << 20, 1 << 20}, g_dir};
    frt_registry *r = NULL;
    if (frt_registry_open(g_e, &rp, &r)) abort(); /* creates the schema */
    frt_registry_close(r);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_e) setup();
    write_file(g_victim, "not this registry's");
    char p[256];
    snprintf(p, sizeof p, "%s/cap-1.frtc", g_dir);
    write_file(p, "garbage capsule");
    snprintf(p, sizeof p, "%s/index.sqlite", g_dir);
    sqlite3 *db = NULL;
    if (sqlite3_open(p, &db) != SQLITE_OK) abort();
    sqlite3_exec(db, "DELETE FROM capsules", NULL, NULL, NULL);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "INSERT OR REPLACE INTO capsules (id, kind, path, bytes, position, pending, exact, digest,"
                           " salt_hash, tokens, pin_manual, last_used, owner, name, fingerprint, salt)"
                           " VALUES (?,?,?,?,?,?,1,?,0,?,?,?,NULL,NULL,?,NULL)",
                           -1, &st, NULL) != SQLITE_OK)
        abort();
    size_t i = 0;
    for (int id = 1; i + 7 <= size && id <= 8; id++) {
        int kind = data[i] & 1, flags = data[i + 1];
        int position = (int)(data[i + 2] | data[i + 3] << 8) - 16, pending = (int)(data[i + 4] | data[i + 5] << 8) - 2;
        size_t plen = data[i + 6];
        i += 7;
        if (plen > size - i) plen = size - i;
        char path[256];
        memcpy(path, data + i, plen);
        path[plen] = 0;
        i += plen;
        if (flags & 4) snprintf(path, sizeof path, "%s", g_victim); /* an absolute path outside */
        int seed = i < size ? data[i++] : 0;
        int npos = position > 0 && position <= 4096 ? position : 1;
        int32_t *tok = malloc((size_t)npos * sizeof *tok);
        if (!tok) abort();
        for (int k = 0; k < npos; k++) tok[k] = (seed + 7 * k) % 300;
        int blob = (flags & 2) && position > 0 ? position : (seed % 5);
        if (blob > npos) blob = npos;
        uint64_t digest = g_e->digest(g_e->self, tok, position > 0 && position <= npos ? position : 0, NULL, 0);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, kind);
        sqlite3_bind_text(st, 3, path, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 4, 100 + seed);
        sqlite3_bind_int(st, 5, position);
        sqlite3_bind_int(st, 6, pending);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)digest);
        sqlite3_bind_blob(st, 8, tok, blob * (int)sizeof *tok, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 9, flags >> 3 & 1);
        sqlite3_bind_int64(st, 10, seed);
        sqlite3_bind_int64(st, 11, (flags & 1) ? (sqlite3_int64)g_e->facts.fingerprint : 12345);
        sqlite3_step(st);
        sqlite3_reset(st);
        free(tok);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);

    frt_registry_params rp = {{0, 1 << 20, 1 << 20}, g_dir};
    frt_registry *r = NULL;
    if (frt_registry_open(g_e, &rp, &r)) abort();
    size_t dl = strlen(g_dir);
    for (int k = 0; k < frt_registry_count(r); k++) {
        const frt_cap *c = frt_registry_at(r, k);
        if (!c->path || strncmp(c->path, g_dir, dl) || c->path[dl] != '/' || strchr(c->path + dl + 1, '/')) abort();
        if (c->position < 0) abort();
    }
    for (int k = frt_registry_count(r) - 1; k >= 0; k--) {
        const frt_cap *c = frt_registry_at(r, k);
        if (c) frt_registry_restore(r, c->id, NULL); /* works, or fails and drops the entry */
    }
    frt_registry_close(r);
    if (access(g_victim, F_OK) != 0) abort(); /* a path outside the dir was touched */
    return 0;
}
