/*
 * test_cartridge_start.c - what a cartridge starts with (manifest
 * starts_with, frt_cartridge_starts_with / _set_starts_with), on the
 * "tiny-dense" random-weight model (tools/gen_model.h, built in memory), cpu:
 *
 *  1. set: a start that the exported rows begin with is kept; one that they
 *     do not begin with (FRT_ERR_MISMATCH), a negative id
 *     (FRT_ERR_INVALID_ARGUMENT), more tokens than the cartridge holds
 *     (FRT_ERR_OUT_OF_RANGE) are refused and leave the start unchanged;
 *  2. the manifest round trip: saved as version 2 with "starts_with",
 *     loaded back with the same ids; a version 1 manifest (no starts_with)
 *     loads with no stated start; version 1 with starts_with, version 2
 *     without it, a non-integer or negative id, more ids than tokens, and
 *     ids that the payload's token_ids do not begin with are FRT_ERR_FORMAT;
 *  3. frt_cartridge_check refuses a start id outside the model's vocabulary
 *     (FRT_ERR_OUT_OF_RANGE) on a cartridge whose row ids are not known.
 */
#include "frt/cartridge.h"
#include "frt/checkpoint.h"
#include "frt/debug.h"
#include "frt/fs.h"
#include "frt_test.h"
#include "gen_model.h"
#include "model/cartridge_internal.h"

#include <jansson.h>
#include <unistd.h>

enum { T = 40 };

static char g_dir[512];

/* A cartridge of the KV of a prefill of doc[0..T). */
static frt_cartridge *exported(frt_model *m, const int32_t *doc)
{
    frt_cartridge *c = NULL;
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, doc, T));
    CHECK_OK(frt_cartridge_from_model(m, &c));
    frt_cartridge_meta meta = {.id = "start", .model_id = "tiny-dense", .training_steps = -1, .n_labels = -1};
    CHECK_OK(frt_cartridge_set_meta(c, &meta));
    return c;
}

static void start_is(const frt_cartridge *c, const int32_t *want, int n, const char *what)
{
    const int32_t *ids = NULL;
    int k = -1;
    CHECK_OK(frt_cartridge_starts_with(c, &ids, &k));
    CHECK_MSG(k == n && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof *ids)), "%s: a start of %d tokens, want %d",
              what, k, n);
    frt_cartridge_info in;
    CHECK_OK(frt_cartridge_info_get(c, &in));
    CHECK(in.n_starts_with == n);
}

static void test_set(frt_cartridge *c, const int32_t *doc)
{
    start_is(c, NULL, 0, "exported");
    CHECK_OK(frt_cartridge_set_starts_with(c, doc, 3));
    start_is(c, doc, 3, "set");
    int32_t wrong[3] = {doc[0], doc[1], doc[2] + 1};
    CHECK_STATUS(frt_cartridge_set_starts_with(c, wrong, 3), FRT_ERR_MISMATCH);
    int32_t neg[1] = {-4};
    CHECK_STATUS(frt_cartridge_set_starts_with(c, neg, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cartridge_set_starts_with(c, doc, T + 1), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_cartridge_set_starts_with(c, NULL, 2), FRT_ERR_INVALID_ARGUMENT);
    start_is(c, doc, 3, "after refusals");
}

/* Rewrites the saved manifest with edit(j), then loads: want the status. */
static void edited(void (*edit)(json_t *), int want, const char *what)
{
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", g_dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    CHECK_MSG(j != NULL, "%s: %s", path, je.text);
    if (!j) return;
    char *orig = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    edit(j);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    CHECK_OK(frt_file_write_atomic(path, text, strlen(text)));
    frt_cartridge *c = NULL;
    int rc = frt_cartridge_load(g_dir, &c);
    CHECK_MSG(rc == want, "%s: got %s (%s), want %s", what, frt_status_name(rc), frt_last_error(),
              frt_status_name(want));
    if (rc == 0) start_is(c, NULL, 0, what);
    frt_cartridge_free(c);
    CHECK_OK(frt_file_write_atomic(path, orig, strlen(orig)));
    free(orig);
    free(text);
    json_decref(j);
}

static void v1_plain(json_t *j)
{
    json_object_set_new(j, "version", json_integer(1));
    json_object_del(j, "starts_with");
}
static void v1_with_start(json_t *j) { json_object_set_new(j, "version", json_integer(1)); }
static void v2_without(json_t *j) { json_object_del(j, "starts_with"); }
static void not_int(json_t *j) { json_array_set_new(json_object_get(j, "starts_with"), 0, json_string("x")); }
static void negative(json_t *j) { json_array_set_new(json_object_get(j, "starts_with"), 0, json_integer(-1)); }
static void off_rows(json_t *j) { json_array_set_new(json_object_get(j, "starts_with"), 1, json_integer(1999)); }
static void too_many(json_t *j)
{
    json_t *a = json_array();
    for (int i = 0; i < T + 1; i++) json_array_append_new(a, json_integer(1));
    json_object_set_new(j, "starts_with", a);
}

static void test_file(frt_cartridge *c, const int32_t *doc)
{
    CHECK_OK(frt_cartridge_save(c, g_dir));
    frt_cartridge *back = NULL;
    CHECK_OK(frt_cartridge_load(g_dir, &back));
    if (back) start_is(back, doc, 3, "loaded");
    frt_cartridge_free(back);
    edited(v1_plain, 0, "version 1 without starts_with");
    edited(v1_with_start, FRT_ERR_FORMAT, "version 1 with starts_with");
    edited(v2_without, FRT_ERR_FORMAT, "version 2 without starts_with");
    edited(not_int, FRT_ERR_FORMAT, "a string in starts_with");
    edited(negative, FRT_ERR_FORMAT, "a negative id in starts_with");
    edited(too_many, FRT_ERR_FORMAT, "more ids than tokens");
    if (doc[1] != 1999) edited(off_rows, FRT_ERR_FORMAT, "starts_with the rows do not begin with");
}

static void test_vocab(frt_model *m, frt_cartridge *c, int vocab)
{
    free(c->ids); /* as a .pt: the row ids are not known */
    c->ids = NULL;
    int32_t big[2] = {3, vocab};
    CHECK_OK(frt_cartridge_set_starts_with(c, big, 2));
    CHECK_STATUS(frt_cartridge_check(m, c), FRT_ERR_OUT_OF_RANGE);
    big[1] = vocab - 1;
    CHECK_OK(frt_cartridge_set_starts_with(c, big, 2));
    CHECK_OK(frt_cartridge_check(m, c));
}

int main(void)
{
    frt_test_seed(2525);
    frt_model_config cfg;
    frt_checkpoint *ck = NULL;
    frt_model *m = NULL;
    CHECK_OK(frt_gen_model_build("tiny-dense", 1, &cfg, &ck));
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 128;
    p.n_threads = 2;
    CHECK_OK(frt_model_load_checkpoint(ck, &cfg, NULL, &p, &m));
    if (!m) return frt_test_report();
    snprintf(g_dir, sizeof g_dir, "%s/test_cartridge_start.%ld.cart", FRT_BINARY_DIR, (long)getpid());
    int32_t doc[T];
    for (int i = 0; i < T; i++) doc[i] = (int32_t)(frt_test_u64() % (uint64_t)cfg.vocab_size);
    frt_cartridge *c = exported(m, doc);
    if (c) {
        test_set(c, doc);
        test_file(c, doc);
        test_vocab(m, c, cfg.vocab_size);
    }
    frt_cartridge_free(c);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    frt_model_free(m);
    frt_checkpoint_close(ck);
    return frt_test_report();
}
