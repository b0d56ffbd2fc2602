/*
 * test_registry_cartridges.c - cartridges under the capsule registry's device
 * budget (registry.h frt_registry_cartridge_acquire / _release / _stats), on
 * the fake engine with a counting cartridge upload (every capsule and every
 * cartridge weighs 1000 bytes; device budget 2500):
 *
 *  1. acquire uploads (miss, promotion), a second acquire of the same key is
 *     a hit with the same handle;
 *  2. making room for a cartridge demotes the least recently used device
 *     capsule to host;
 *  3. a cartridge that cannot fit because the rest is pinned (a manual pin)
 *     or in use (another cartridge not released) is FRT_ERR_OUT_OF_MEMORY,
 *     counted as refused, and nothing is lost: the in-use cartridge and the
 *     pinned capsule stay where they were, no handle is freed;
 *  4. once released, a cartridge is evicted (LRU) for the next one, and a
 *     capsule snapshot into the device tier evicts an idle cartridge too;
 *  5. a cartridge larger than the device budget, an upload the engine
 *     refuses (nothing kept; the room it made stays made), a restore of a cartridge entry, a delete while
 *     in use, bad arguments: each a clear error;
 *  6. the counters and the bytes, and no handle left after close.
 */
#include "frt_test.h"

#include "serving/engine.h"
#include "serving/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C = 16, CAP_BYTES = 1000 };

static int g_live; /* resident handles the fake upload made and nobody freed */

static int fake_upload(void *self, const void *cart, void **resident)
{
    (void)self;
    if (*(const int *)cart < 0) return frt_error(FRT_ERR_BACKEND, "fake upload refused");
    int *h = malloc(sizeof *h);
    if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake upload");
    *h = *(const int *)cart;
    *resident = h;
    g_live++;
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

static void stats_are(frt_registry *r, uint64_t hits, uint64_t misses, uint64_t promotions, uint64_t evictions,
                      uint64_t refused, int resident, const char *what)
{
    frt_cart_residency_stats st;
    frt_registry_cartridge_stats(r, &st);
    CHECK_MSG(st.hits == hits && st.misses == misses && st.promotions == promotions && st.evictions == evictions &&
                  st.refused == refused && st.resident == resident &&
                  st.device_bytes == (uint64_t)resident * CAP_BYTES,
              "%s: hits %llu misses %llu promotions %llu evictions %llu refused %llu resident %d bytes %llu", what,
              (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.promotions,
              (unsigned long long)st.evictions, (unsigned long long)st.refused, st.resident,
              (unsigned long long)st.device_bytes);
}

int main(void)
{
    frt_engine *e = make_engine();
    frt_registry_params p = {{2500, 10000, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &p, &r));
    const int a = 1, b = 2, c = 3, bad = -1;
    const void *ha = NULL, *ha2 = NULL, *hb = NULL, *hc = NULL, *hx = NULL;

    /* 1. miss then hit */
    uint64_t ea = acquire(r, 0xA, &a, &ha);
    uint64_t ea2 = acquire(r, 0xA, &a, &ha2);
    CHECK(ea == ea2 && ha == ha2 && *(const int *)ha == 1 && g_live == 1);
    stats_are(r, 1, 1, 1, 0, 0, 1, "after A twice");
    CHECK_OK(frt_registry_cartridge_release(r, ea));
    CHECK_OK(frt_registry_cartridge_release(r, ea));

    /* 2. capsules and cartridges share the budget: A (idle) is evicted for a capsule, then the LRU capsule is
     * demoted to host for B */
    uint64_t k1 = device_capsule(r, e, 1);
    uint64_t k2 = device_capsule(r, e, 2);
    CHECK(tier_of(r, k1) == FRT_ENGINE_TIER_DEVICE && tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE);
    CHECK(frt_registry_get(r, ea) == NULL && g_live == 0); /* A made room for k2 */
    stats_are(r, 1, 1, 1, 1, 0, 0, "a capsule evicts an idle cartridge");
    uint64_t eb = acquire(r, 0xB, &b, &hb);
    CHECK(tier_of(r, k1) == FRT_ENGINE_TIER_HOST && tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE);
    CHECK(frt_registry_bytes(r, FRT_ENGINE_TIER_DEVICE) == 2 * CAP_BYTES);

    /* 3. k2 pinned, B in use: C cannot fit; nothing moves */
    CHECK_OK(frt_registry_pin(r, k2, 1));
    uint64_t ec = 0;
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xC, "c", &c, CAP_BYTES, &ec, &hc), FRT_ERR_OUT_OF_MEMORY);
    CHECK(strstr(frt_last_error(), "pinned or in-use") != NULL);
    CHECK(tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE && frt_registry_get(r, eb) && g_live == 1);
    stats_are(r, 1, 3, 2, 1, 1, 1, "C refused"); /* a refused acquisition is a miss too */

    /* 4. B released: C evicts it */
    CHECK_OK(frt_registry_cartridge_release(r, eb));
    ec = acquire(r, 0xC, &c, &hc);
    CHECK(frt_registry_get(r, eb) == NULL && *(const int *)hc == 3 && g_live == 1);
    CHECK(tier_of(r, k2) == FRT_ENGINE_TIER_DEVICE);
    stats_are(r, 1, 4, 3, 2, 1, 1, "C evicts B");

    /* 5. refusals */
    uint64_t ex = 0;
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xD, "d", &c, 3000, &ex, &hx), FRT_ERR_OUT_OF_MEMORY);
    CHECK(strstr(frt_last_error(), "device budget is 2500") != NULL);
    CHECK_OK(frt_registry_pin(r, k2, 0));
    CHECK_OK(frt_registry_cartridge_release(r, ec));
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xE, "e", &bad, CAP_BYTES, &ex, &hx), FRT_ERR_BACKEND);
    /* k2 (the least recently used) went to host to make room; nothing kept of E; C stays resident */
    CHECK(g_live == 1 && frt_registry_get(r, ec) && tier_of(r, k2) == FRT_ENGINE_TIER_HOST);
    CHECK(acquire(r, 0xC, &c, &hc) == ec);
    stats_are(r, 2, 6, 3, 2, 2, 1, "D refused (above the budget), E refused by the engine, C a hit");
    CHECK_STATUS(frt_registry_restore(r, ec, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_delete(r, ec), FRT_ERR_STATE);
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xF, "f", NULL, CAP_BYTES, &ex, &hx), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_cartridge_acquire(r, 0xF, "f", &c, 0, &ex, &hx), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_registry_cartridge_release(r, k2), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_registry_cartridge_release(r, 99999), FRT_ERR_NOT_FOUND);
    const frt_cap *entry = frt_registry_get(r, ec);
    CHECK(entry && entry->kind == FRT_CAP_CARTRIDGE && !strcmp(frt_cap_kind_name(entry->kind), "cartridge"));

    /* 6. close frees what is resident */
    CHECK_OK(frt_registry_cartridge_release(r, ec));
    CHECK_OK(frt_registry_delete(r, ec));
    CHECK(g_live == 0);
    acquire(r, 0xA, &a, &ha);
    frt_registry_close(r);
    CHECK(g_live == 0);
    e->destroy(e->self);
    return frt_test_report();
}
