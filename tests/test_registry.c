/*
 * test_registry.c - the capsule registry over the fake engine: byte budgets
 * per tier, LRU demotion device -> host -> disk, eviction from the disk tier,
 * pinning, promotion on restore, restore + the first prefill piece in one
 * call (frt_registry_restore_prefill), salted prefix digests, references, the disk
 * tier's SQLite index across a reopen, and every bad-input path.
 */
#include "frt_test.h"

#include "serving/engine.h"
#include "serving/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { C = 16, CAP_BYTES = 1000 };

static frt_engine *make_engine(uint64_t model_seed)
{
    frt_engine_fake_params p = frt_engine_fake_default_params();
    p.prefill_chunk = C;
    p.max_seq = 1024;
    p.capsule_bytes_fixed = CAP_BYTES; /* every capsule weighs the same: budgets count capsules */
    p.capsule_bytes_per_token = 0;
    p.model_seed = model_seed;
    frt_engine *e = NULL;
    if (frt_engine_fake_create(&p, &e)) {
        fprintf(stderr, "fake engine: %s\n", frt_last_error());
        exit(1);
    }
    return e;
}

static void fill_ids(int32_t *ids, int n, int salt)
{
    for (int i = 0; i < n; i++) ids[i] = 32 + (int32_t)((i * 7 + salt * 13) % 90);
}

/* Puts ids[0..n) into the live state by a cold prefill. */
static void live(frt_engine *e, const int32_t *ids, int n)
{
    e->reset(e->self);
    if (n) CHECK_OK(e->prefill(e->self, ids, n));
}

static uint64_t snap(frt_registry *r, frt_engine *e, frt_cap_kind kind, int tier, const int32_t *ids, int n,
                     const char *salt, int pin)
{
    live(e, ids, n);
    frt_cap_spec s = {kind, tier, ids, n, -1, 1, salt, salt ? strlen(salt) : 0, pin, NULL};
    uint64_t id = 0;
    CHECK_OK(frt_registry_snapshot(r, &s, &id));
    CHECK(id > 0);
    return id;
}

static int tier_of(frt_registry *r, uint64_t id)
{
    const frt_cap *c = frt_registry_get(r, id);
    return c ? c->tier : -1;
}

/* Greedy tokens after the current state's logits. */
static void greedy(frt_engine *e, int32_t *out, int k)
{
    CHECK_OK(e->sample(e->self, NULL, &out[0]));
    for (int i = 1; i < k; i++) CHECK_OK(e->decode(e->self, NULL, &out[i]));
}

/* The live state holds the 32-token capsule of fill_ids seed `seed`: its
 * append of 16 more tokens equals a cold prefill of all 48. */
static void check_append_cold(frt_engine *e, int seed)
{
    int32_t ids[48], a[8], b[8];
    fill_ids(ids, 48, seed);
    CHECK_OK(e->prefill(e->self, ids + 32, 16));
    greedy(e, a, 8);
    live(e, ids, 48);
    greedy(e, b, 8);
    CHECK_MSG(!memcmp(a, b, sizeof a), "capsule of seed %d: restore + append differs from a cold prefill", seed);
}

static char *temp_dir(void)
{
    char *d = strdup("/tmp/frt_test_registry_XXXXXX");
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

/* frt_registry_restore_prefill: a device-tier capsule restores and
 * prefills in one call of the engine (the state of restore + prefill, which
 * equals a cold prefill); a host-tier one only restores (and is promoted);
 * an engine without the call only restores; bad input changes nothing. */
static void test_restore_prefill(void)
{
    frt_engine *e = make_engine(7);
    frt_registry_params p = {{4 * CAP_BYTES, 4 * CAP_BYTES, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[48], a[8], b[8];
    fill_ids(ids, 48, 5);
    const uint64_t dev = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, NULL, 0);
    const uint64_t host = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_HOST, ids, 32, NULL, 0);
    live(e, ids, 8); /* another live state */
    frt_registry_stats st;
    int prefilled = -1;
    CHECK_OK(frt_registry_restore_prefill(r, dev, ids + 32, 16, &prefilled));
    frt_registry_stats_get(r, &st);
    CHECK(prefilled == 16 && st.restore_prefills == 1 && st.restores[FRT_ENGINE_TIER_DEVICE] == 1);
    CHECK(e->position(e->self) == 48);
    greedy(e, a, 8);
    live(e, ids, 48);
    greedy(e, b, 8);
    CHECK_MSG(!memcmp(a, b, sizeof a), "restore_prefill differs from a cold prefill");
    /* the host tier: the restore alone, and its promotion */
    CHECK_OK(frt_registry_restore_prefill(r, host, ids + 32, 16, &prefilled));
    frt_registry_stats_get(r, &st);
    CHECK(prefilled == 0 && st.restore_prefills == 1 && st.restores[FRT_ENGINE_TIER_HOST] == 1 && st.promotions == 1);
    CHECK(e->position(e->self) == 32 && tier_of(r, host) == FRT_ENGINE_TIER_DEVICE);
    check_append_cold(e, 5);
    /* bad input: refused, the live state kept */
    live(e, ids, 8);
    CHECK_STATUS(frt_registry_restore_prefill(r, dev, NULL, 16, &prefilled), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_restore_prefill(r, dev, ids, 0, &prefilled), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_restore_prefill(r, dev, ids, 1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_restore_prefill(r, 999999, ids, 1, &prefilled), FRT_ERR_NOT_FOUND);
    CHECK(prefilled == 0 && e->position(e->self) == 8);
    /* an engine without the call: the restore alone */
    e->restore_prefill = NULL;
    CHECK_OK(frt_registry_restore_prefill(r, dev, ids + 32, 16, &prefilled));
    CHECK(prefilled == 0 && e->position(e->self) == 32);
    frt_registry_stats_get(r, &st);
    CHECK(st.restore_prefills == 1);
    frt_registry_close(r);
    frt_engine_free(e);
}

/* LRU demotion device -> host -> disk, eviction from disk, promotion. */
static void test_budgets_lru(void)
{
    frt_engine *e = make_engine(1);
    char *dir = temp_dir();
    frt_registry_params p = {{2 * CAP_BYTES, 2 * CAP_BYTES, 2 * CAP_BYTES}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[64];
    uint64_t id[7];
    for (int i = 0; i < 7; i++) {
        fill_ids(ids, 32, i);
        id[i] = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, NULL, 0);
        frt_registry_ref(r, id[i], +1, 0);
    }
    /* the two newest in device, the next two in host, the next two on disk, the oldest evicted */
    CHECK(tier_of(r, id[6]) == FRT_ENGINE_TIER_DEVICE && tier_of(r, id[5]) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, id[4]) == FRT_ENGINE_TIER_HOST && tier_of(r, id[3]) == FRT_ENGINE_TIER_HOST);
    CHECK(tier_of(r, id[2]) == FRT_ENGINE_TIER_DISK && tier_of(r, id[1]) == FRT_ENGINE_TIER_DISK);
    CHECK(frt_registry_get(r, id[0]) == NULL);
    for (int t = 0; t < 3; t++) CHECK(frt_registry_bytes(r, t) == 2 * CAP_BYTES);
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);
    CHECK(st.evictions == 1);
    CHECK(st.snapshots == 7);
    CHECK(st.demotions == 5 + 3); /* id0..id4 device->host, id0..id2 host->disk */

    /* a disk capsule file exists and is indexed */
    const frt_cap *c2 = frt_registry_get(r, id[2]);
    CHECK(c2 && c2->persisted && c2->handle == NULL && access(c2->path, R_OK) == 0);

    /* restoring the disk capsule promotes it to device (demoting the LRU there) */
    int from = -1;
    CHECK_OK(frt_registry_restore(r, id[2], &from));
    CHECK(from == FRT_ENGINE_TIER_DISK);
    CHECK(tier_of(r, id[2]) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, id[5]) == FRT_ENGINE_TIER_HOST); /* the LRU of device went down */
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DEVICE) <= 2 * CAP_BYTES);
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_HOST) <= 2 * CAP_BYTES);
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DISK) <= 2 * CAP_BYTES);
    frt_registry_stats_get(r, &st);
    CHECK(st.restores[FRT_ENGINE_TIER_DISK] == 1 && st.promotions == 1);

    /* the restored state is the capsule's: restore + append equals a cold prefill */
    check_append_cold(e, 2);

    CHECK(frt_registry_get(r, id[1]) == NULL); /* the disk LRU made room for id3 */

    /* LRU order follows use, not creation: id4 (host) comes back to device and
     * pushes out id6, now older than the restored id2 */
    CHECK(tier_of(r, id[4]) == FRT_ENGINE_TIER_HOST);
    CHECK_OK(frt_registry_restore(r, id[4], &from));
    CHECK(from == FRT_ENGINE_TIER_HOST);
    CHECK(tier_of(r, id[4]) == FRT_ENGINE_TIER_DEVICE && tier_of(r, id[2]) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, id[6]) == FRT_ENGINE_TIER_HOST);
    for (int t = 0; t < 3; t++) CHECK(frt_registry_bytes(r, t) <= 2 * CAP_BYTES);
    /* promoted by a device snapshot of the restored state: restoring the
     * promoted copy + an append equals a cold prefill */
    frt_registry_stats_get(r, &st);
    CHECK(st.promotions == 2);
    CHECK_OK(frt_registry_restore(r, id[4], &from));
    CHECK(from == FRT_ENGINE_TIER_DEVICE);
    check_append_cold(e, 4);
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(dir);
    free(dir);
}

/* With an engine whose host restores are pipelined, a session capsule
 * restored from the host tier stays there (a promotion would wait for the
 * copies the request's first prefill piece runs beside); a prefix capsule
 * is still promoted. */
static void test_pipelined_host_restore(void)
{
    frt_engine *e = make_engine(1);
    e->facts.restore_pipelined = 1;
    char *dir = temp_dir();
    frt_registry_params p = {{4 * CAP_BYTES, 4 * CAP_BYTES, 0}, dir};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[32];
    fill_ids(ids, 32, 7);
    const uint64_t sess = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_HOST, ids, 32, NULL, 0);
    fill_ids(ids, 32, 8);
    const uint64_t pre = snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, NULL, 0);
    frt_registry_ref(r, sess, +1, 0);
    frt_registry_ref(r, pre, +1, 0);
    CHECK(tier_of(r, sess) == FRT_ENGINE_TIER_HOST && tier_of(r, pre) == FRT_ENGINE_TIER_HOST);
    int from = -1;
    CHECK_OK(frt_registry_restore(r, sess, &from));
    CHECK(from == FRT_ENGINE_TIER_HOST && tier_of(r, sess) == FRT_ENGINE_TIER_HOST);
    check_append_cold(e, 7);
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);
    CHECK(st.promotions == 0 && st.restores[FRT_ENGINE_TIER_HOST] == 1);
    CHECK_OK(frt_registry_restore(r, pre, &from));
    CHECK(from == FRT_ENGINE_TIER_HOST && tier_of(r, pre) == FRT_ENGINE_TIER_DEVICE);
    check_append_cold(e, 8);
    frt_registry_stats_get(r, &st);
    CHECK(st.promotions == 1);
    frt_registry_close(r);
    frt_engine_free(e);
    rm_rf(dir);
    free(dir);
}

/* Pinned capsules are never demoted or evicted; a full tier of pins sends new capsules down. */
static void test_pin(void)
{
    frt_engine *e = make_engine(1);
    frt_registry_params p = {{2 * CAP_BYTES, 1 * CAP_BYTES, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[32];
    fill_ids(ids, 32, 0);
    uint64_t pinned = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, NULL, 1);
    frt_registry_ref(r, pinned, +1, 0);
    uint64_t other[4];
    for (int i = 0; i < 4; i++) {
        fill_ids(ids, 32, i + 1);
        other[i] = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, NULL, 0);
        frt_registry_ref(r, other[i], +1, 0);
    }
    CHECK(tier_of(r, pinned) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, other[3]) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, other[2]) == FRT_ENGINE_TIER_HOST);
    CHECK(!frt_registry_get(r, other[0]) && !frt_registry_get(r, other[1])); /* no disk tier: evicted */

    /* a pin hold (a pinned session's reference) pins as well */
    CHECK_OK(frt_registry_ref(r, other[3], +1, 1));
    CHECK(frt_cap_pinned(frt_registry_get(r, other[3])));
    /* device is now all pinned: the next capsule lands in host */
    fill_ids(ids, 32, 9);
    uint64_t x = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, NULL, 0);
    frt_registry_ref(r, x, +1, 0);
    CHECK(tier_of(r, x) == FRT_ENGINE_TIER_HOST);
    CHECK(!frt_registry_get(r, other[2]));
    CHECK(tier_of(r, pinned) == FRT_ENGINE_TIER_DEVICE && tier_of(r, other[3]) == FRT_ENGINE_TIER_DEVICE);
    /* unpin: demotable again */
    CHECK_OK(frt_registry_pin(r, pinned, 0));
    CHECK(!frt_cap_pinned(frt_registry_get(r, pinned)));
    fill_ids(ids, 32, 10);
    uint64_t y = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, NULL, 0);
    frt_registry_ref(r, y, +1, 0);
    CHECK(tier_of(r, y) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, pinned) == FRT_ENGINE_TIER_HOST);
    CHECK(!frt_registry_get(r, x));
    /* every tier full of pins: no room anywhere */
    CHECK_OK(frt_registry_pin(r, y, 1));
    CHECK_OK(frt_registry_pin(r, pinned, 1));
    fill_ids(ids, 32, 11);
    live(e, ids, 32);
    frt_cap_spec s = {FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 32, -1, 1, NULL, 0, 0, NULL};
    uint64_t z = 0;
    CHECK_STATUS(frt_registry_snapshot(r, &s, &z), FRT_ERR_OUT_OF_MEMORY);
    CHECK(frt_registry_count(r) == 3);
    for (int t = 0; t < 2; t++) CHECK(frt_registry_bytes(r, t) <= frt_registry_budget(r, t));
    frt_registry_close(r);
    frt_engine_free(e);
}

/* The salted prefix index: longest chunk-aligned match, salts isolate, tokens verified. */
static void test_digest_match(void)
{
    frt_engine *e = make_engine(1);
    frt_registry_params p = {{0, 100 * CAP_BYTES, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[100];
    fill_ids(ids, 100, 3);
    uint64_t a32 = snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, NULL, 0);
    uint64_t a64 = snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 64, NULL, 0);
    uint64_t s48 = snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 48, "alice", 0);
    CHECK(tier_of(r, a32) == FRT_ENGINE_TIER_HOST); /* no device budget: the next tier down */
    uint64_t id = 0;
    CHECK(frt_registry_match_prefix(r, ids, 100, 99, NULL, 0, &id) == 64 && id == a64);
    CHECK(frt_registry_match_prefix(r, ids, 100, 63, NULL, 0, &id) == 32 && id == a32);
    CHECK(frt_registry_match_prefix(r, ids, 20, 19, NULL, 0, &id) == 0 && id == 0);
    /* salted: only the same salt matches, and the salted entry is invisible without it */
    CHECK(frt_registry_match_prefix(r, ids, 100, 99, "alice", 5, &id) == 48 && id == s48);
    CHECK(frt_registry_match_prefix(r, ids, 100, 99, "bob", 3, &id) == 0 && id == 0);
    /* the digest covers the salt: an entry's digest is engine digest(salt, tokens) */
    CHECK(frt_registry_get(r, s48)->digest == e->digest(e->self, ids, 48, "alice", 5));
    CHECK(frt_registry_get(r, s48)->digest != e->digest(e->self, ids, 48, NULL, 0));
    /* a prompt that differs inside the 64-token prefix matches only 32 */
    int32_t other[100];
    memcpy(other, ids, sizeof other);
    other[40] ^= 1;
    CHECK(frt_registry_match_prefix(r, other, 100, 99, NULL, 0, &id) == 32 && id == a32);
    other[3] ^= 1;
    CHECK(frt_registry_match_prefix(r, other, 100, 99, NULL, 0, &id) == 0);
    /* session capsules are not in the shared index */
    uint64_t sess = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_HOST, ids, 80, NULL, 0);
    frt_registry_ref(r, sess, +1, 0);
    CHECK(frt_registry_match_prefix(r, ids, 100, 99, NULL, 0, &id) == 64);
    /* bad prefix capsules: unaligned, not cold-exact, empty */
    live(e, ids, 40);
    frt_cap_spec bad = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 40, -1, 1, NULL, 0, 0, NULL};
    CHECK_STATUS(frt_registry_snapshot(r, &bad, &id), FRT_ERR_INVALID_ARGUMENT);
    live(e, ids, 32);
    bad.n = 32;
    bad.exact = 0;
    CHECK_STATUS(frt_registry_snapshot(r, &bad, &id), FRT_ERR_INVALID_ARGUMENT);
    bad.exact = 1;
    bad.n = 31; /* not the live state's length */
    CHECK_STATUS(frt_registry_snapshot(r, &bad, &id), FRT_ERR_INVALID_ARGUMENT);
    frt_registry_close(r);
    frt_engine_free(e);
}

/* SESSION entries live while referenced; PREFIX entries outlive references. */
static void test_refs(void)
{
    frt_engine *e = make_engine(1);
    frt_registry_params p = {{0, 100 * CAP_BYTES, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[64];
    fill_ids(ids, 64, 5);
    uint64_t s = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_HOST, ids, 20, NULL, 0);
    CHECK_OK(frt_registry_ref(r, s, +1, 0));
    CHECK_OK(frt_registry_ref(r, s, +1, 1));
    CHECK(frt_registry_get(r, s)->refs == 2 && frt_cap_pinned(frt_registry_get(r, s)));
    CHECK_OK(frt_registry_ref(r, s, -1, 1));
    CHECK(frt_registry_get(r, s) && !frt_cap_pinned(frt_registry_get(r, s)));
    CHECK_OK(frt_registry_ref(r, s, -1, 0));
    CHECK(frt_registry_get(r, s) == NULL);
    CHECK_STATUS(frt_registry_ref(r, s, -1, 0), FRT_ERR_NOT_FOUND);
    uint64_t pf = snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, NULL, 0);
    CHECK_OK(frt_registry_ref(r, pf, +1, 0));
    CHECK_OK(frt_registry_ref(r, pf, -1, 0));
    CHECK(frt_registry_get(r, pf) != NULL);
    CHECK_OK(frt_registry_set_name(r, pf, "ckpt"));
    CHECK(!strcmp(frt_registry_get(r, pf)->name, "ckpt"));
    CHECK_OK(frt_registry_delete(r, pf));
    CHECK(frt_registry_count(r) == 0);
    /* unknown ids */
    CHECK_STATUS(frt_registry_restore(r, 999, NULL), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_registry_pin(r, 999, 1), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_registry_delete(r, 999), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_registry_set_name(r, 999, "x"), FRT_ERR_NOT_FOUND);
    CHECK(frt_registry_get(r, 999) == NULL);
    frt_registry_close(r);
    frt_engine_free(e);
}

/* The disk tier and its index survive a reopen; another model's capsules are
 * left alone; a damaged file fails its checks and is dropped. */
static void test_persistence(void)
{
    char *dir = temp_dir();
    int32_t ids[100];
    fill_ids(ids, 100, 7);
    int32_t cold[8], got[8];
    {
        frt_engine *e = make_engine(1);
        live(e, ids, 80);
        greedy(e, cold, 8);
        frt_registry_params p = {{0, 100 * CAP_BYTES, 100 * CAP_BYTES}, dir};
        frt_registry *r = NULL;
        CHECK_OK(frt_registry_open(e, &p, &r));
        uint64_t pinned = snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 64, "s", 1);
        const frt_cap *c = frt_registry_get(r, pinned);
        CHECK(c->tier == FRT_ENGINE_TIER_HOST && c->persisted); /* pinned: written through */
        snap(r, e, FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 32, "s", 0); /* unpinned, memory only */
        uint64_t sd = snap(r, e, FRT_CAP_SESSION, FRT_ENGINE_TIER_DISK, ids, 48, NULL, 0);
        frt_registry_ref(r, sd, +1, 0);
        CHECK(frt_registry_get(r, sd)->persisted);
        CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DISK) == 2 * CAP_BYTES);
        frt_registry_close(r);
        frt_engine_free(e);
    }
    {
        frt_engine *e = make_engine(1);
        frt_registry_params p = {{0, 100 * CAP_BYTES, 100 * CAP_BYTES}, dir};
        frt_registry *r = NULL;
        CHECK_OK(frt_registry_open(e, &p, &r));
        CHECK(frt_registry_count(r) == 1); /* the pinned prefix only */
        const frt_cap *c = frt_registry_at(r, 0);
        CHECK(c && c->kind == FRT_CAP_PREFIX && c->tier == FRT_ENGINE_TIER_DISK && !c->handle && c->pin_manual);
        uint64_t id = 0;
        CHECK(frt_registry_match_prefix(r, ids, 100, 99, "s", 1, &id) == 64);
        CHECK(frt_registry_match_prefix(r, ids, 100, 99, NULL, 0, NULL) == 0);
        int from = -1;
        CHECK_OK(frt_registry_restore(r, id, &from)); /* loaded lazily from its file */
        CHECK(from == FRT_ENGINE_TIER_DISK);
        CHECK(e->position(e->self) == 64);
        CHECK_OK(e->prefill(e->self, ids + 64, 16));
        greedy(e, got, 8);
        CHECK(!memcmp(got, cold, sizeof got));
        /* new ids never reuse old ones */
        live(e, ids, 16);
        uint64_t nid = 0;
        frt_cap_spec s = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 16, -1, 1, NULL, 0, 0, NULL};
        CHECK_OK(frt_registry_snapshot(r, &s, &nid));
        CHECK(nid > id + 1);
        frt_registry_close(r);
        frt_engine_free(e);
    }
    {
        frt_engine *e = make_engine(2); /* another model: its index rows are not ours */
        frt_registry_params p = {{0, 100 * CAP_BYTES, 100 * CAP_BYTES}, dir};
        frt_registry *r = NULL;
        CHECK_OK(frt_registry_open(e, &p, &r));
        CHECK(frt_registry_count(r) == 0);
        frt_registry_close(r);
        frt_engine_free(e);
    }
    {
        frt_engine *e = make_engine(1);
        frt_registry_params p = {{0, 100 * CAP_BYTES, 100 * CAP_BYTES}, dir};
        frt_registry *r = NULL;
        CHECK_OK(frt_registry_open(e, &p, &r));
        CHECK(frt_registry_count(r) == 1);
        const frt_cap *c = frt_registry_at(r, 0);
        uint64_t id = c->id;
        /* damage the file: the restore fails cleanly, the live state is untouched */
        FILE *f = fopen(c->path, "r+b");
        CHECK(f != NULL);
        if (f) {
            fseek(f, 40, SEEK_SET);
            fputc(0x5A, f);
            fclose(f);
        }
        live(e, ids, 10);
        CHECK_STATUS(frt_registry_restore(r, id, NULL), FRT_ERR_FORMAT);
        CHECK(e->position(e->self) == 10);
        CHECK(frt_registry_get(r, id) == NULL);
        frt_registry_stats st;
        frt_registry_stats_get(r, &st);
        CHECK(st.load_failures == 1);
        frt_registry_close(r);
        CHECK_OK(frt_registry_open(e, &p, &r));
        CHECK(frt_registry_count(r) == 0);
        frt_registry_close(r);
        frt_engine_free(e);
    }
    rm_rf(dir);
    free(dir);
}

static void test_bad_input(void)
{
    frt_engine *e = make_engine(1);
    frt_registry *r = NULL;
    frt_registry_params p = {{CAP_BYTES, CAP_BYTES, CAP_BYTES}, NULL};
    CHECK_STATUS(frt_registry_open(NULL, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_open(e, NULL, &r), FRT_ERR_INVALID_ARGUMENT);
    p.dir = "/proc/frt-cannot-create-this";
    CHECK_STATUS(frt_registry_open(e, &p, &r), FRT_ERR_IO);
    p.dir = NULL;
    p.budget[0] = p.budget[1] = 0;
    CHECK_OK(frt_registry_open(e, &p, &r));
    int32_t ids[16];
    fill_ids(ids, 16, 1);
    live(e, ids, 16);
    frt_cap_spec s = {FRT_CAP_SESSION, FRT_ENGINE_TIER_DEVICE, ids, 16, -1, 1, NULL, 0, 0, NULL};
    uint64_t id = 0;
    CHECK_STATUS(frt_registry_snapshot(r, &s, &id), FRT_ERR_OUT_OF_MEMORY); /* no tier at all */
    CHECK_STATUS(frt_registry_snapshot(r, NULL, &id), FRT_ERR_INVALID_ARGUMENT);
    s.tier = 7;
    CHECK_STATUS(frt_registry_snapshot(r, &s, &id), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_registry_count(r) == 0);
    frt_registry_close(r);
    frt_registry_close(NULL);
    frt_engine_free(e);
}

int main(void)
{
    test_budgets_lru();
    test_restore_prefill();
    test_pipelined_host_restore();
    test_pin();
    test_digest_match();
    test_refs();
    test_persistence();
    test_bad_input();
    return frt_test_report();
}
