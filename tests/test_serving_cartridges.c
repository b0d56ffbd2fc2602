/*
 * test_serving_cartridges.c - the cartridge registry (SQLite) and the
 * per-request router of serving/cartridges.h: insert / get / list / lookup
 * by label / replace / remove, a corrupt cartridge refused with nothing
 * stored, the router's chain (explicit id, label, static mapping, first
 * match wins), its refusals (unknown id, another model's cartridge, a label
 * nothing resolves, a field the chain does not route) and the fallback when
 * the registry is unavailable (full prefill, counted, the request goes on).
 * Cartridges are made from scripts/ref/make_pt_like.py files.
 */
#include "serving/cartridges.h"

#include "frt/fs.h"
#include "frt_test.h"

#include <sqlite3.h>
#include <unistd.h>

#define FP_A 0xA11CEull
#define FP_B 0xB0Bull

static char g_dir[512];

static void make(const char *pt, const char *id, uint64_t fp, const char *const *labels, int n_labels)
{
    char src[700], dst[700];
    snprintf(src, sizeof src, "%s/%s", g_dir, pt);
    snprintf(dst, sizeof dst, "%s/%s", g_dir, id);
    frt_cartridge *c = NULL;
    CHECK_OK(frt_cartridge_read_pt(src, &c));
    frt_cartridge_meta m = {.id = id, .model_id = "test", .model_fingerprint = fp, .training_steps = -1,
                            .labels = labels, .n_labels = n_labels};
    CHECK_OK(frt_cartridge_set_meta(c, &m));
    CHECK_OK(frt_cartridge_save(c, dst));
    frt_cartridge_free(c);
}

static void insert(frt_cartreg *r, const char *id)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, id);
    CHECK_OK(frt_cartreg_insert(r, dir));
}

static void test_registry(frt_cartreg *r)
{
    insert(r, "manual");
    insert(r, "faq");
    insert(r, "other");
    frt_cartreg_entry e;
    CHECK_OK(frt_cartreg_get(r, "faq", &e));
    CHECK(!strcmp(e.id, "faq") && e.model_fingerprint == FP_A && e.tokens == 8 && e.n_labels == 1 &&
          !strcmp(e.labels[0], "lang:en") && strstr(e.path, "/faq") && e.bytes > 0 && e.created[0]);
    CHECK_STATUS(frt_cartreg_get(r, "nope", &e), FRT_ERR_NOT_FOUND);
    frt_cartreg_entry *all = NULL;
    int n = 0;
    CHECK_OK(frt_cartreg_list(r, &all, &n));
    CHECK(n == 3 && !strcmp(all[0].id, "faq") && !strcmp(all[1].id, "manual") && !strcmp(all[2].id, "other"));
    CHECK(n == 3 && all[1].n_labels == 2 && !strcmp(all[1].labels[0], "doc:manual"));
    free(all);
    CHECK_OK(frt_cartreg_by_label(r, "doc:manual", FP_A, &e));
    CHECK(!strcmp(e.id, "manual"));
    CHECK_OK(frt_cartreg_by_label(r, "doc:manual", FP_B, &e));
    CHECK(!strcmp(e.id, "other"));
    CHECK_STATUS(frt_cartreg_by_label(r, "doc:none", FP_A, &e), FRT_ERR_NOT_FOUND);

    /* a corrupt cartridge: refused, nothing stored */
    char cmd[2048], f[800];
    snprintf(cmd, sizeof cmd, "cp -r %s/faq %s/broken && sed -i 's/\"cartridge_id\": \"faq\"/\"cartridge_id\": \"broken\"/' %s/broken/manifest.json",
             g_dir, g_dir, g_dir);
    CHECK(system(cmd) == 0);
    snprintf(f, sizeof f, "%s/broken/kv.safetensors", g_dir);
    char *bytes = NULL;
    size_t len = 0;
    CHECK_OK(frt_file_read_all(f, 1 << 20, &bytes, &len));
    if (bytes) {
        bytes[len - 1] ^= 1;
        CHECK_OK(frt_file_write_atomic(f, bytes, len));
    }
    free(bytes);
    snprintf(f, sizeof f, "%s/broken", g_dir);
    CHECK_STATUS(frt_cartreg_insert(r, f), FRT_ERR_MISMATCH);
    CHECK_STATUS(frt_cartreg_get(r, "broken", &e), FRT_ERR_NOT_FOUND);

    /* re-registering an id replaces its row and labels */
    const char *lab[] = {"v2"};
    make("recipe_f32.pt", "faq", FP_A, lab, 1);
    insert(r, "faq");
    CHECK_OK(frt_cartreg_get(r, "faq", &e));
    CHECK(e.n_labels == 1 && !strcmp(e.labels[0], "v2"));
    CHECK_STATUS(frt_cartreg_by_label(r, "lang:en", FP_A, &e), FRT_OK);
    CHECK(!strcmp(e.id, "manual"));
    make("recipe_f32.pt", "tmp", FP_A, lab, 1);
    insert(r, "tmp");
    CHECK_OK(frt_cartreg_remove(r, "tmp"));
    CHECK_STATUS(frt_cartreg_remove(r, "tmp"), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_cartreg_by_label(r, "v2", FP_A, &e), FRT_OK); /* faq, not the removed tmp */
    CHECK(!strcmp(e.id, "faq"));
}

static void expect_route(frt_cart_router *rt, const char *id, const char *label, const char *model, int want,
                         const char *want_id)
{
    frt_cart_request q = {id, label, model};
    frt_cartreg_entry e;
    char why[256] = "";
    int rc = frt_cart_router_route(rt, &q, &e, why, sizeof why);
    CHECK_MSG(rc == want, "route(%s, %s, %s): %d (%s), want %d", id ? id : "-", label ? label : "-",
              model ? model : "-", rc, rc < 0 ? frt_last_error() : why, want);
    if (rc == 1 && want_id) CHECK_MSG(!strcmp(e.id, want_id), "routed to %s, want %s", e.id, want_id);
}

static void test_router(frt_cartreg *r, const char *db_path)
{
    frt_cart_router *rt = NULL;
    CHECK_OK(frt_cart_router_create(r, FP_A, &rt));
    if (!rt) return;
    CHECK_OK(frt_cart_router_add_static(rt, "tiny", "faq"));
    CHECK_STATUS(frt_cart_router_add_static(rt, "tiny", "bad id"), FRT_ERR_INVALID_ARGUMENT);
    expect_route(rt, "manual", NULL, NULL, 1, "manual");
    expect_route(rt, "manual", "v2", "tiny", 1, "manual");      /* id first */
    expect_route(rt, NULL, "lang:en", "tiny", 1, "manual");     /* label before static */
    expect_route(rt, NULL, "doc:none", "tiny", 1, "faq");       /* label misses, static resolves */
    expect_route(rt, NULL, NULL, "tiny", 1, "faq");
    expect_route(rt, NULL, NULL, "unmapped", 0, NULL);          /* full prefill */
    expect_route(rt, NULL, NULL, NULL, 0, NULL);
    expect_route(rt, "nope", NULL, NULL, FRT_ERR_NOT_FOUND, NULL);
    expect_route(rt, "other", NULL, NULL, FRT_ERR_MISMATCH, NULL);
    expect_route(rt, NULL, "doc:none", "unmapped", FRT_ERR_NOT_FOUND, NULL);
    frt_cart_rule chain[] = {FRT_CART_RULE_STATIC, FRT_CART_RULE_LABEL};
    CHECK_OK(frt_cart_router_set_chain(rt, chain, 2));
    expect_route(rt, NULL, "lang:en", "tiny", 1, "faq");        /* static first now */
    expect_route(rt, "manual", NULL, "tiny", FRT_ERR_UNSUPPORTED, NULL);
    frt_cart_rule bad[] = {(frt_cart_rule)9};
    CHECK_STATUS(frt_cart_router_set_chain(rt, bad, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cart_router_set_chain(rt, chain, 0), FRT_ERR_INVALID_ARGUMENT);
    frt_cart_router_stats st;
    frt_cart_router_stats_get(rt, &st);
    CHECK(st.hits == 6 && st.misses == 2 && st.refused == 4 && st.fallbacks == 0);

    /* the registry becomes unavailable: every rule falls back to a full prefill */
    sqlite3 *other = NULL;
    CHECK(sqlite3_open(db_path, &other) == SQLITE_OK);
    CHECK(sqlite3_exec(other, "DROP TABLE cartridge_labels; DROP TABLE cartridges;", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(other);
    frt_cart_rule all[] = {FRT_CART_RULE_ID, FRT_CART_RULE_LABEL, FRT_CART_RULE_STATIC};
    CHECK_OK(frt_cart_router_set_chain(rt, all, 3));
    frt_cart_request q = {"manual", NULL, NULL};
    frt_cartreg_entry e;
    char why[256] = "";
    CHECK(frt_cart_router_route(rt, &q, &e, why, sizeof why) == 0);
    CHECK_MSG(strstr(why, "registry unavailable") && strstr(why, "no such table"), "why: %s", why);
    q = (frt_cart_request){NULL, "lang:en", NULL};
    CHECK(frt_cart_router_route(rt, &q, &e, why, sizeof why) == 0);
    q = (frt_cart_request){NULL, NULL, "tiny"};
    CHECK(frt_cart_router_route(rt, &q, &e, NULL, 0) == 0);
    frt_cart_router_stats_get(rt, &st);
    CHECK(st.fallbacks == 3);
    frt_cart_router_free(rt);
}

/* The server's store over a directory: registration at open (3 cartridges,
 * a broken manifest refused, a directory without one ignored), the LRU of
 * one loaded cartridge (hits, misses, loads, evictions, bytes), a refusal
 * of another model's cartridge, a registered file that no longer loads. */
static void test_store(void)
{
    char sd[600], cmd[6000], f[800];
    snprintf(sd, sizeof sd, "%.500s/store", g_dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/junk' '%s/bad' && cp -r '%s/manual' '%s/faq' '%s/other' '%s/' && "
             "printf '{' >'%s/bad/manifest.json'",
             sd, sd, g_dir, g_dir, g_dir, sd, sd);
    CHECK(system(cmd) == 0);
    frt_cart_store *st = NULL;
    CHECK_STATUS(frt_cart_store_open(sd, FP_A, 0, NULL, NULL, &st), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cart_store_open(sd, 0, 1, NULL, NULL, &st), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cart_store_open("/no/such/dir", FP_A, 1, NULL, NULL, &st), FRT_ERR_NOT_FOUND);
    CHECK_OK(frt_cart_store_open(sd, FP_A, 1, NULL, NULL, &st));
    if (!st) return;
    frt_cart_store_stats s;
    frt_cart_store_stats_get(st, &s);
    CHECK(s.registered == 3 && s.refused == 1 && s.capacity == 1 && s.entries == 0);
    frt_cart_request q = {"manual", NULL, NULL};
    const frt_cartridge *c1 = NULL, *c2 = NULL;
    frt_cartreg_entry e;
    frt_cartridge_info in;
    CHECK(frt_cart_store_acquire(st, &q, &c1, &e, NULL, 0) == 1 && c1 && e.tokens == 8);
    CHECK(c1 && frt_cartridge_info_get(c1, &in) == 0 && !strcmp(in.id, "manual"));
    CHECK(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0) == 1 && c2 == c1); /* a hit: the same object */
    q.cartridge_id = "faq";
    CHECK(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0) == 1 && c2 && frt_cartridge_info_get(c2, &in) == 0 &&
          !strcmp(in.id, "faq"));
    const uint64_t faq_bytes = e.bytes;
    q.cartridge_id = "other";
    CHECK_STATUS(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0), FRT_ERR_MISMATCH);
    CHECK(c2 == NULL);
    frt_cart_store_stats_get(st, &s);
    CHECK(s.cache_hits == 1 && s.cache_misses == 2 && s.loads == 2 && s.evictions == 1 && s.entries == 1 &&
          s.bytes == faq_bytes && s.route.hits == 3 && s.route.refused == 1);
    /* manual (evicted) changes on disk: its load fails, nothing is cached */
    snprintf(f, sizeof f, "%s/manual/kv.safetensors", sd);
    FILE *fp = fopen(f, "r+b");
    CHECK(fp != NULL);
    if (fp) {
        fseek(fp, 200, SEEK_SET);
        fputc('x', fp);
        fclose(fp);
    }
    q.cartridge_id = "manual";
    CHECK_STATUS(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0), FRT_ERR_MISMATCH);
    frt_cart_store_stats_get(st, &s);
    CHECK(s.load_failures == 1 && s.entries == 1 && s.evictions == 1);
    /* a cartridge removed from the directory is forgotten at the next open */
    frt_cart_store_free(st);
    snprintf(cmd, sizeof cmd, "rm -rf '%s/other'", sd);
    CHECK(system(cmd) == 0);
    st = NULL;
    CHECK_OK(frt_cart_store_open(sd, FP_A, 1, NULL, NULL, &st));
    if (!st) return;
    frt_cart_store_stats_get(st, &s);
    CHECK(s.forgotten == 1 && s.registered == 1 && s.refused == 2); /* faq; bad, and manual (its payload changed) */
    q.cartridge_id = "other";
    CHECK_STATUS(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0), FRT_ERR_NOT_FOUND);
    q.cartridge_id = "faq";
    CHECK(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0) == 1);
    q.cartridge_id = "manual";
    CHECK_STATUS(frt_cart_store_acquire(st, &q, &c2, &e, NULL, 0), FRT_ERR_MISMATCH);
    frt_cart_store_stats_get(st, &s);
    CHECK(s.load_failures == 1 && s.evictions == 0 && s.loads == 1);
    char *m = frt_cart_store_metrics_text(st, NULL);
    CHECK(m && strstr(m, "frt_cartridge_evictions_total 0\n") && strstr(m, "frt_cartridge_load_failures_total 1\n") &&
          strstr(m, "# TYPE frt_cartridge_loaded_bytes gauge"));
    free(m);
    frt_cart_store_free(st);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s/test_serving_cartridges.%ld", FRT_BINARY_DIR, (long)getpid());
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/ref/make_pt_like.py %s", FRT_SOURCE_DIR, g_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "the generator failed: %s\n", cmd);
        return 1;
    }
    const char *l_manual[] = {"doc:manual", "lang:en"}, *l_faq[] = {"lang:en"}, *l_other[] = {"doc:manual"};
    make("recipe_f32.pt", "manual", FP_A, l_manual, 2);
    make("recipe_f32.pt", "faq", FP_A, l_faq, 1);
    make("trainable_cache_bf16.pt", "other", FP_B, l_other, 1);

    frt_cartreg *r = NULL;
    CHECK_STATUS(frt_cartreg_open(g_dir, &r), FRT_ERR_IO); /* a directory is no database */
    char db[700];
    snprintf(db, sizeof db, "%s/cartridges.sqlite", g_dir);
    CHECK_OK(frt_cartreg_open(db, &r));
    if (r) {
        test_registry(r);
        test_router(r, db);
    }
    test_store();
    frt_cartreg_close(r);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return frt_test_report();
}
