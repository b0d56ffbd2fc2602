/*
 * test_registry_cartridges.c - cartridges under the capsule registry's
 * budgets (registry.h frt_registry_cartridge_acquire / _release / _stats),
 * on the fake engine with a counting cartridge upload and move (every
 * capsule and every cartridge weighs 1000 bytes):
 *
 *  1. acquire uploads (miss, promotion), a second acquire of the same key is
 *     a hit with the same handle;
 *  2. capsules and cartridges share the device budget: a device capsule
 *     demotes an idle cartridge to pinned host memory, a cartridge demotes
 *     the least recently used device capsule to host;
 *  3. a cartridge that cannot fit because the rest is pinned (a manual pin)
 *     or in use (another cartridge not released) is FRT_ERR_OUT_OF_MEMORY,
 *     counted as refused, and nothing is lost: the in-use cartridge and the
 *     pinned capsule stay where they were, a host-resident one stays on the
 *     host, no handle is freed;
 *  4. a host-resident cartridge is promoted back by a move (the same
 *     handle, no upload), demoting the idle one on the device;
 *  5. with a host budget of one cartridge, a demotion evicts the host
 *     tier's least recently used cartridge (its handle freed);
 *  6. a cartridge larger than the device budget, an upload the engine
 *     refuses (nothing kept; the room it made stays made), a restore of a
 *     cartridge entry, a delete while in use, bad arguments: each a clear
 *     error; the counters and bytes per tier; no handle left after close.
 */
#include "frt_test.h"

#include "serving/engine.h"
#include "serving/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C = 16, CAP_BYTES = 1000 };

typedef struct fake_resident {
    int cart, tier;
} fake_resident;

static int g_live, g_uploads; /* handles alive; uploads made */

static int fake_upload(void *self, const void *cart, void **resident)
{
    (void)self;
    if (*(const int *)cart < 0) return frt_error(FRT_ERR_BACKEND, "fake upload refused");
    fake_resident *h = malloc(sizeof *h);
    if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake upload");
    *h = (fake_resident){*(const int *)cart, FRT_ENGINE_TIER_DEVICE};
    *resident = h;
    g_live++;
    g_uploads++;
    return 0;
}

static int fake_move(void *self, void *resident, int tier)
{
    (void)self;
    ((fake_resident *)resident)->tier = tier;
    return 0;
}

static void fake_free(void *self, void *resident)
{
    (void)self;
    free(resident);
    g_live--;
}

static frt_engine *make_engine(void)
{
    frt_engine_fake_params p = frt_engine_fake_default_params();
    p.prefill_chunk = C;
    p.max_seq = 1024;
    p.capsule_bytes_fixed = CAP_BYTES;
    p.capsule_bytes_per_token = 0;
    frt_engine *e = NULL;
    if (frt_engine_fake_create(&p, &e)) {
        fprintf(stderr, "fake engine: %s\n", frt_last_error());
        exit(1);
    }
    e->cartridge_upload = fake_upload;
    e->cartridge_move = fake_move;
    e->cartridge_resident_free = fake_free;
    return e;
}

static uint64_t device_capsule(frt_registry *r, frt_engine *e, int salt)
{
    int32_t ids[C];
    for (int i = 0; i < C; i++) ids[i] = 40 + (i * 7 + salt * 13) % 50;
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, C));
    frt_cap_spec s = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_DEVICE, ids, C, -1, 1, NULL, 0, 0, NULL};
    uint64_t id = 0;
    CHECK_OK(frt_registry_snapshot(r, &s, &id));
    return id;
}

static int tier_of(frt_registry *r, uint64_t id)
{
    const frt_cap *c = frt_registry_get(r, id);
    return c ? c->tier : -1;
}

static uint64_t acquire(frt_registry *r, uint64_t key, const int *cart, const void **h)
{
    uint64_t id = 0;
    CHECK_OK(frt_registry_cartridge_acquire(r, key, "cart", cart, CAP_BYTES, &id, h));
    return id;
}

/* hits misses promotions demotions evictions refused | device-resident host-resident */
static void stats_are(frt_registry *r, const uint64_t want[6], int dev, int host, const char *what)
{
    frt_cart_residency_stats st;
    frt_registry_cartridge_stats(r, &st);
    const uint64_t got[6] = {st.hits, st.misses, st.promotions, st.demotions, st.evictions, st.refused};
    CHECK_MSG(!memcmp(got, want, sizeof got) && st.resident == dev && st.host_resident == host &&
                  st.device_bytes == (uint64_t)dev * CAP_BYTES && st.host_bytes == (uint64_t)host * CAP_BYTES,
              "%s: hits %llu misses %llu promotions %llu demotions %llu evictions %llu refused %llu, resident %d + "
              "%d on the host",
              what, (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2],
              (unsigned long long)got[3], (unsigned long long)got[4], (unsigned long long)got[5], st.resident,
              st.host_resident);
}

static const int A = 1, B = 2, K = 3, BAD = -1;

/* 1 to 4 on a device budget of 2.5 cartridges and an ample host budget. */
static void test_shared_budget(frt_engine *e)
{
    frt_registry_params p = {{2500, 10000, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    if (!r) return;
    const void *ha = NULL, *ha2 = NULL, *hb = NULL, *hc = NULL;
    uint64_t ea = acquire(r, 0xA, &A, &ha);
    CHECK(acquire(r, 0xA, &A, &ha2) == ea && ha == ha2 && g_live == 1);
    stats_are(r, (const uint64_t[]){1, 1, 1, 0, 0, 0}, 1, 0, "A twice");
    CHECK_OK(frt_registry_cartridge_release(r, ea));
    CHECK_OK(frt_registry_cartridge_release(r, ea));

    uint64_t k1 = device_capsule(r, e, 1), k2 = device_capsule(r, e, 2);
    CHECK(tier_of(r, ea) == FRT_ENGINE_TIER_HOST && ((const fake_resident *)ha)->tier == FRT_ENGINE_TIER_HOST);
    CHECK(tier_of(r, k1) == FRT_ENGINE_TIER_DEVICE && tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE && g_live == 1);
    uint64_t eb = acquire(r, 0xB, &B, &hb);
    CHECK(tier_of(r, k1) == FRT_ENGINE_TIER_HOST && tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE);
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DEVICE) == 2 * CAP_BYTES);
    stats_are(r, (const uint64_t[]){1, 2, 2, 1, 0, 0}, 1, 1, "A demoted by a capsule, B uploaded");

    /* k2 pinned, B in use: neither C nor A (host-resident) fits; nothing moves */
    CHECK_OK(frt_registry_pin(r, k2, 1));
    uint64_t x = 0;
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xC, "c", &K, CAP_BYTES, &x, &hc), FRT_ERR_OUT_OF_MEMORY);
    CHECK(strstr(frt_last_error(), "pinned or in-use") != NULL);
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xA, "a", &A, CAP_BYTES, &x, &ha2), FRT_ERR_OUT_OF_MEMORY);
    CHECK(tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE && tier_of(r, eb) == FRT_ENGINE_TIER_DEVICE);
    CHECK(tier_of(r, ea) == FRT_ENGINE_TIER_HOST && g_live == 2);
    stats_are(r, (const uint64_t[]){1, 4, 2, 1, 0, 2}, 1, 1, "C and A refused");

    /* B released: A comes back by a move (no upload), B goes to the host */
    CHECK_OK(frt_registry_cartridge_release(r, eb));
    int uploads = g_uploads;
    CHECK(acquire(r, 0xA, &A, &ha2) == ea && ha2 == ha && g_uploads == uploads);
    CHECK(((const fake_resident *)ha)->tier == FRT_ENGINE_TIER_DEVICE && tier_of(r, eb) == FRT_ENGINE_TIER_HOST);
    stats_are(r, (const uint64_t[]){1, 5, 3, 2, 0, 2}, 1, 1, "A promoted back, B demoted");

    /* refusals */
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xD, "d", &K, 3000, &x, &hc), FRT_ERR_OUT_OF_MEMORY);
    CHECK(strstr(frt_last_error(), "device budget is 2500") != NULL);
    CHECK_OK(frt_registry_pin(r, k2, 0));
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xE, "e", &BAD, CAP_BYTES, &x, &hc), FRT_ERR_BACKEND);
    /* k2 went to the host to make room; nothing kept of E */
    CHECK(g_live == 2 && frt_registry_get(r, ea) && frt_registry_get(r, eb) && tier_of(r, k2) == FRT_ENGINE_TIER_HOST);
    CHECK_STATUS(frt_registry_restore(r, ea, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_delete(r, ea), FRT_ERR_STATE);
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xF, "f", NULL, CAP_BYTES, &x, &hc), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xF, "f", &K, 0, &x, &hc), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_cartridge_release(r, k2), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_registry_cartridge_release(r, 99999), FRT_ERR_NOT_FOUND);
    const frt_cap *entry = frt_registry_get(r, ea);
    CHECK(entry && entry->kind == FRT_CAP_CARTRIDGE && !strcmp(frt_cap_kind_name(entry->kind), "cartridge"));
    CHECK_OK(frt_registry_cartridge_release(r, ea));
    CHECK_OK(frt_registry_delete(r, ea));
    CHECK(g_live == 1);
    frt_registry_close(r);
    CHECK(g_live == 0);
}

/* 5: a host tier of one cartridge evicts its least recently used one for the next demotion. */
static void test_host_eviction(frt_engine *e)
{
    frt_registry_params p = {{1000, 1000, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    if (!r) return;
    const void *h = NULL;
    uint64_t ea = acquire(r, 0xA, &A, &h);
    CHECK_OK(frt_registry_cartridge_release(r, ea));
    uint64_t eb = acquire(r, 0xB, &B, &h);
    CHECK_OK(frt_registry_cartridge_release(r, eb));
    CHECK(tier_of(r, ea) == FRT_ENGINE_TIER_HOST && tier_of(r, eb) == FRT_ENGINE_TIER_DEVICE && g_live == 2);
    uint64_t ec = acquire(r, 0xC, &K, &h);
    CHECK(frt_registry_get(r, ea) == NULL && tier_of(r, eb) == FRT_ENGINE_TIER_HOST && g_live == 2);
    stats_are(r, (const uint64_t[]){0, 3, 3, 2, 1, 0}, 1, 1, "A evicted from the host for B");
    CHECK_OK(frt_registry_cartridge_release(r, ec));
    frt_registry_close(r);
    CHECK(g_live == 0);
}

int main(void)
{
    frt_engine *e = make_engine();
    test_shared_budget(e);
    test_host_eviction(e);
    e->destroy(e->self);
    return frt_test_report();
}
