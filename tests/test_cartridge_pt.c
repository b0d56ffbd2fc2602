/*
 * test_cartridge_pt.c - the native .pt cartridge reader and frt's own
 * cartridge format (frt/cartridge.h), without a model.
 *
 * The .pt files are made at test time by scripts/ref/make_pt_like.py
 * (/usr/bin/python3, standard library only) in torch.save's exact layout:
 * both shapes (the recipe's dict of lists, TrainableCache.save's dict of
 * ParameterList of Parameter), the older fixed_* spelling, f32 / bf16 / f16,
 * a non-contiguous view, and the fault files. Each good file's K/V must
 * equal the generator's expected values bit for bit (after widening to
 * f32); each bad file must be refused with its status and a message naming
 * the problem. Then the frt format: save, load, and the refusals (checksum,
 * size, manifest fields).
 */
#include "frt/cartridge.h"
#include "frt/fs.h"
#include "frt_test.h"
#include "weights/pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[512];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

/* Every layer's K then V widened to f32, concatenated (the generator's order). */
static float *widen_all(const frt_cartridge *c, size_t *n_out)
{
    frt_cartridge_info in;
    frt_cartridge_info_get(c, &in);
    size_t per = (size_t)in.tokens * (size_t)in.n_kv_heads * (size_t)in.head_dim;
    float *out = xmalloc(per * 2 * (size_t)in.n_layers * sizeof *out);
    for (int l = 0; l < in.n_layers; l++) {
        frt_tensor k, v;
        CHECK_OK(frt_cartridge_layer(c, l, &k, &v));
        CHECK_OK(frt_tensor_to_f32(&k, out + (2 * (size_t)l) * per));
        CHECK_OK(frt_tensor_to_f32(&v, out + (2 * (size_t)l + 1) * per));
    }
    *n_out = per * 2 * (size_t)in.n_layers;
    return out;
}

static void check_good(const char *name, int L, int H, int D, int T, int Tf, frt_dtype dt)
{
    char path[600], exp_path[600];
    path_of(path, sizeof path, name);
    snprintf(exp_path, sizeof exp_path, "%.*s.expected.f32", (int)(strlen(path) - 3), path);
    frt_cartridge *c = NULL;
    CHECK_OK(frt_cartridge_read_pt(path, &c));
    if (!c) return;
    frt_cartridge_info in;
    CHECK_OK(frt_cartridge_info_get(c, &in));
    CHECK_MSG(in.n_layers == L && in.n_kv_heads == H && in.head_dim == D && in.tokens == T && in.frozen_tokens == Tf &&
                  in.dtype == dt && in.from_pt && in.model_fingerprint == 0,
              "%s: %d layers %d heads %d dim %d tokens %d frozen dtype %s", name, in.n_layers, in.n_kv_heads,
              in.head_dim, in.tokens, in.frozen_tokens, frt_dtype_name(in.dtype));
    char *exp = NULL;
    size_t exp_len = 0;
    CHECK_OK(frt_file_read_all(exp_path, 1 << 24, &exp, &exp_len));
    size_t n = 0;
    float *got = widen_all(c, &n);
    CHECK_MSG(exp && exp_len == n * sizeof(float) && !memcmp(exp, got, exp_len), "%s: K/V differ from the generator's",
              name);
    /* the memory form reads the same bytes to the same cartridge */
    char *bytes = NULL;
    size_t len = 0;
    CHECK_OK(frt_file_read_all(path, 1 << 24, &bytes, &len));
    frt_cartridge *cm = NULL;
    CHECK_OK(frt_cartridge_read_pt_memory(bytes, len, name, &cm));
    if (cm) {
        size_t n2 = 0;
        float *got2 = widen_all(cm, &n2);
        CHECK(n2 == n && !memcmp(got, got2, n * sizeof *got));
        free(got2);
    }
    frt_cartridge_free(cm);
    free(bytes);
    free(got);
    free(exp);
    frt_cartridge_free(c);
}

static void check_bad(const char *name, int status, const char *needle)
{
    char path[600];
    path_of(path, sizeof path, name);
    frt_cartridge *c = (frt_cartridge *)&c; /* must come back NULL */
    CHECK_STATUS(frt_cartridge_read_pt(path, &c), status);
    CHECK_MSG(strstr(frt_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", name, frt_last_error(), needle);
    CHECK(c == NULL);
}

/* ---- frt's format ----------------------------------------------------------- */

static void write_text(const char *path, const char *text) { CHECK_OK(frt_file_write_atomic(path, text, strlen(text))); }

/* Rewrites the manifest with `from` replaced by `to` (first occurrence). */
static void edit_manifest(const char *dir, const char *from, const char *to)
{
    char path[700], *text = NULL, out[8192];
    size_t len;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    CHECK_OK(frt_file_read_all(path, 1 << 20, &text, &len));
    if (!text) return;
    char *at = strstr(text, from);
    CHECK_MSG(at != NULL, "manifest lacks '%s'", from);
    if (at) {
        snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
        write_text(path, out);
    }
    free(text);
}

static void copy_dir(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    CHECK(system(cmd) == 0);
}

static void expect_load(const char *dir, int status, const char *needle)
{
    frt_cartridge *c = NULL;
    CHECK_STATUS(frt_cartridge_load(dir, &c), status);
    CHECK_MSG(!needle || strstr(frt_last_error(), needle), "message '%s' lacks '%s'", frt_last_error(), needle);
    frt_cartridge_free(c);
}

static void test_frt_format(void)
{
    char pt[600], dir[600], bad[600];
    path_of(pt, sizeof pt, "trainable_cache_bf16.pt");
    path_of(dir, sizeof dir, "cart_ok");
    path_of(bad, sizeof bad, "cart_bad");
    frt_cartridge *c = NULL;
    CHECK_OK(frt_cartridge_read_pt(pt, &c));
    if (!c) return;
    CHECK_STATUS(frt_cartridge_save(c, dir), FRT_ERR_INVALID_ARGUMENT); /* unbound */
    const char *labels[] = {"doc:manual", "lang:en"};
    frt_cartridge_meta bad_id = {.id = "no spaces", .training_steps = -1, .n_labels = -1};
    CHECK_STATUS(frt_cartridge_set_meta(c, &bad_id), FRT_ERR_INVALID_ARGUMENT);
    /* values that would be ignored: steps or a label count below -1, labels with n_labels -1 (leave) */
    frt_cartridge_meta ignored = {.training_steps = -2, .n_labels = -1};
    CHECK_STATUS(frt_cartridge_set_meta(c, &ignored), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "training_steps") != NULL);
    ignored.training_steps = -1;
    ignored.n_labels = -3;
    CHECK_STATUS(frt_cartridge_set_meta(c, &ignored), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "n_labels") != NULL);
    ignored.n_labels = -1;
    ignored.labels = labels;
    CHECK_STATUS(frt_cartridge_set_meta(c, &ignored), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "labels") != NULL);
    frt_cartridge_meta meta = {.id = "manual-v1", .model_id = "tiny-dense", .model_fingerprint = 0x1234abcdull,
                               .training_steps = 500, .source_document = "manual.txt", .labels = labels, .n_labels = 2};
    CHECK_OK(frt_cartridge_set_meta(c, &meta));
    CHECK_OK(frt_cartridge_save(c, dir));
    frt_cartridge *r = NULL;
    CHECK_OK(frt_cartridge_open(dir, &r));
    if (r) {
        frt_cartridge_info a, b;
        frt_cartridge_info_get(c, &a);
        frt_cartridge_info_get(r, &b);
        CHECK(!strcmp(b.id, "manual-v1") && !strcmp(b.model_id, "tiny-dense") && b.model_fingerprint == 0x1234abcdull);
        CHECK(b.training_steps == 500 && !strcmp(b.source_document, "manual.txt") && b.n_labels == 2 &&
              !strcmp(b.labels[1], "lang:en"));
        CHECK(b.n_layers == a.n_layers && b.tokens == a.tokens && b.frozen_tokens == a.frozen_tokens &&
              b.dtype == a.dtype && b.checksum == a.checksum && b.file_bytes == a.file_bytes && !b.from_pt);
        CHECK(strlen(b.created) == 20 && b.created[19] == 'Z');
        size_t n1, n2;
        float *x = widen_all(c, &n1), *y = widen_all(r, &n2);
        CHECK(n1 == n2 && !memcmp(x, y, n1 * sizeof *x));
        free(x);
        free(y);
    }
    frt_cartridge_free(r);

    char f[700];
    /* a flipped payload byte: checksum mismatch */
    copy_dir(dir, bad);
    snprintf(f, sizeof f, "%s/kv.safetensors", bad);
    char *bytes = NULL;
    size_t len = 0;
    CHECK_OK(frt_file_read_all(f, 1 << 24, &bytes, &len));
    if (bytes) {
        bytes[len - 3] ^= 0x40;
        CHECK_OK(frt_file_write_atomic(f, bytes, len));
        expect_load(bad, FRT_ERR_MISMATCH, "checksum mismatch");
        CHECK_OK(frt_file_write_atomic(f, bytes, len - 7)); /* truncated */
        expect_load(bad, FRT_ERR_MISMATCH, "bytes, the manifest says");
    }
    free(bytes);
    /* manifest faults: each edit of a good manifest, its status and message */
    static const struct {
        const char *from, *to, *needle;
        int status;
    } faults[] = {
        {"\"format\"", "\"extra\": 1, \"format\"", "unknown field 'extra'", FRT_ERR_FORMAT},
        {"\"tokens\"", "\"tokens_\"", "unknown field", FRT_ERR_FORMAT},
        {"\"dtype\": \"bf16\"", "\"dtype\": \"f64\"", "dtype 'f64'", FRT_ERR_FORMAT},
        {"\"layers\": 3", "\"layers\": 2", "tensors for 2 layers", FRT_ERR_FORMAT},
        {"\"version\": 2", "\"version\": 3", "version", FRT_ERR_FORMAT},
        {"\"model_fingerprint\": \"", "\"model_fingerprint\": \"x", "model_fingerprint", FRT_ERR_FORMAT},
        {"\"created\": \"", "\"created\": \"yesterday", "created", FRT_ERR_FORMAT},
        {"\"labels\": [", "\"labels\": [\"\", ", "label 0", FRT_ERR_FORMAT},
        {"{", "{\"format\": \"frt-cartridge\",", "invalid JSON", FRT_ERR_FORMAT}, /* a duplicate key */
    };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        copy_dir(dir, bad);
        edit_manifest(bad, faults[i].from, faults[i].to);
        expect_load(bad, faults[i].status, faults[i].needle);
    }
    snprintf(f, sizeof f, "%s/manifest.json", bad);
    unlink(f);
    expect_load(bad, FRT_ERR_NOT_FOUND, "manifest.json");
    frt_cartridge *none = NULL;
    CHECK_STATUS(frt_cartridge_open("/nonexistent/cart.pt", &none), FRT_ERR_NOT_FOUND);
    frt_cartridge_free(c);
}

/* The pickle machine's own refusals on raw data.pkl bytes. */
static void expect_pickle(const void *data, size_t n, int status, const char *needle)
{
    pk_doc *d = NULL;
    CHECK_STATUS(pk_parse(data, n, "t.pkl", &d), status);
    CHECK_MSG(strstr(frt_last_error(), needle) != NULL, "message '%s' lacks '%s'", frt_last_error(), needle);
    CHECK(d == NULL);
}

static void test_pickle_machine(void)
{
    static const unsigned char ok[] = {0x80, 2, '}', 'q', 0, 'X', 1, 0, 0, 0, 'a', 'K', 7, 's', '.'};
    pk_doc *d = NULL;
    CHECK_OK(pk_parse(ok, sizeof ok, "ok.pkl", &d));
    const pk_value *v = d ? pk_dict_get(pk_root(d), "a") : NULL;
    CHECK(v && v->type == PK_INT && v->i == 7);
    pk_free(d);
    static const unsigned char no_stop[] = {0x80, 2, '}'}, underflow[] = {0x80, 2, 's', '.'},
                               unset_memo[] = {0x80, 2, 'h', 5, '.'}, two_left[] = {0x80, 2, 'N', 'N', '.'},
                               proto9[] = {0x80, 9, '.'}, short_str[] = {0x80, 2, 'X', 9, 0, 0, 0, 'a', '.'},
                               big_memo[] = {0x80, 2, 'N', 'r', 0xff, 0xff, 0xff, 0x7f, '.'},
                               pers[] = {0x80, 2, 'K', 1, 'Q', '.'}, build[] = {0x80, 2, '}', '}', 'b', '.'},
                               setitems_odd[] = {0x80, 2, '}', '(', 'K', 1, 'u', '.'};
    expect_pickle(no_stop, sizeof no_stop, FRT_ERR_FORMAT, "no STOP");
    expect_pickle(underflow, sizeof underflow, FRT_ERR_FORMAT, "stack underflow");
    expect_pickle(unset_memo, sizeof unset_memo, FRT_ERR_FORMAT, "memo index 5 is not set");
    expect_pickle(two_left, sizeof two_left, FRT_ERR_FORMAT, "2 values left");
    expect_pickle(proto9, sizeof proto9, FRT_ERR_UNSUPPORTED, "protocol 9");
    expect_pickle(short_str, sizeof short_str, FRT_ERR_FORMAT, "truncated");
    expect_pickle(big_memo, sizeof big_memo, FRT_ERR_OUT_OF_RANGE, "memo index");
    expect_pickle(pers, sizeof pers, FRT_ERR_UNSUPPORTED, "persistent id");
    expect_pickle(build, sizeof build, FRT_ERR_UNSUPPORTED, "BUILD");
    expect_pickle(setitems_odd, sizeof setitems_odd, FRT_ERR_FORMAT, "odd count");
    size_t n = 1000002 + 3;
    unsigned char *many = xmalloc(n);
    many[0] = 0x80, many[1] = 2;
    memset(many + 2, '(', n - 3);
    many[n - 1] = '.';
    expect_pickle(many, n, FRT_ERR_OUT_OF_RANGE, "more than 1000000 values");
    free(many);
}

int main(void)
{
    test_pickle_machine();
    snprintf(g_dir, sizeof g_dir, "%s/test_cartridge_pt.%ld", FRT_BINARY_DIR, (long)getpid());
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/ref/make_pt_like.py %s", FRT_SOURCE_DIR, g_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "the generator failed: %s\n", cmd);
        return 1;
    }
    check_good("recipe_f32.pt", 2, 2, 4, 8, 3, FRT_DT_F32);
    check_good("trainable_cache_bf16.pt", 3, 1, 8, 6, 2, FRT_DT_BF16);
    check_good("fixed_f16.pt", 2, 2, 4, 4, 1, FRT_DT_F16);
    check_good("trainable_only_f32.pt", 2, 2, 4, 6, 0, FRT_DT_F32);

    check_bad("bad_global.pt", FRT_ERR_UNSUPPORTED, "global 'posix.system'");
    check_bad("bad_truncated.pt", FRT_ERR_FORMAT, "not a readable zip");
    check_bad("bad_storage_size.pt", FRT_ERR_FORMAT, "archive/data/0");
    check_bad("bad_rank.pt", FRT_ERR_FORMAT, "is not [1, n_kv_heads, T, head_dim]");
    check_bad("bad_layers.pt", FRT_ERR_FORMAT, "layers");
    check_bad("bad_byteorder.pt", FRT_ERR_UNSUPPORTED, "byteorder");
    check_bad("bad_key.pt", FRT_ERR_FORMAT, "unexpected key 'optimizer'");
    check_bad("bad_opcode.pt", FRT_ERR_UNSUPPORTED, "opcode 0x69 ('i')");
    check_bad("bad_compressed.pt", FRT_ERR_UNSUPPORTED, "is compressed");
    check_bad("missing.pt", FRT_ERR_NOT_FOUND, "missing.pt");
    test_frt_format();

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return frt_test_report();
}
