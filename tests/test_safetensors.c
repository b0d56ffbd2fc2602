/*
 * test_safetensors.c - the safetensors writer and reader: a round trip of
 * every dtype (bytes equal), scalars and empty tensors, conversion to f32,
 * writer argument errors, atomic replacement; and every malformed-file case
 * fails with a clear error naming the file and the tensor: truncated file,
 * short file, huge or overlong header length, bad JSON, non-object header,
 * overlapping ranges, holes, trailing bytes, dtype x shape / size mismatch,
 * unknown dtype, duplicate name, range outside the file, bad offsets, bad
 * shapes, too many dims, bad metadata, shape overflow.
 */
#include "frt_test.h"
#include "frt/fs.h"
#include "frt/safetensors.h"
#include "util/bf16.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/frt_test_st_XXXXXX");
    if (!mkdtemp(tmpdir)) TEST_SKIP("cannot create a temporary directory");
}

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    char *b = NULL;
    *n = 0;
    return frt_file_read_all(path, (size_t)1 << 30, &b, n) == 0 ? (unsigned char *)b : NULL;
}

static int write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t k = fwrite(data, 1, n, f);
    fclose(f);
    return k == n ? 0 : -1;
}

static int contains(const char *s, const char *sub) { return s && sub && strstr(s, sub) != NULL; }

/* ---- round trip --------------------------------------------------------- */

typedef struct tdef {
    const char *name;
    frt_dtype dt;
    int ndim;
    int64_t shape[3];
} tdef;

static const tdef DEFS[] = {
    {"w.bf16", FRT_DT_BF16, 2, {5, 7}},   {"w.f16", FRT_DT_F16, 2, {3, 4}},   {"w.f32", FRT_DT_F32, 1, {9}},
    {"w.f64", FRT_DT_F64, 2, {2, 3}},     {"w.e4m3", FRT_DT_F8_E4M3, 1, {33}}, {"w.e5m2", FRT_DT_F8_E5M2, 1, {17}},
    {"i.i8", FRT_DT_I8, 1, {11}},         {"i.i16", FRT_DT_I16, 1, {6}},      {"i.i32", FRT_DT_I32, 2, {2, 2}},
    {"i.i64", FRT_DT_I64, 1, {3}},        {"i.u8", FRT_DT_U8, 1, {13}},       {"i.u16", FRT_DT_U16, 1, {4}},
    {"i.u32", FRT_DT_U32, 1, {5}},        {"i.u64", FRT_DT_U64, 1, {2}},      {"i.bool", FRT_DT_BOOL, 1, {7}},
    {"scalar", FRT_DT_F32, 0, {0}},       {"empty", FRT_DT_BF16, 2, {0, 4}},  {"w.3d", FRT_DT_BF16, 3, {2, 3, 4}},
};
#define NDEFS (int)(sizeof DEFS / sizeof DEFS[0])

static size_t def_bytes(const tdef *d)
{
    size_t n = frt_dtype_size(d->dt);
    for (int i = 0; i < d->ndim; i++) n *= (size_t)d->shape[i];
    return n;
}

/* Float tensors get real values of their dtype, others random bytes. */
static void *make_data(const tdef *d, float **as_f32)
{
    size_t nb = def_bytes(d), n = nb / frt_dtype_size(d->dt);
    unsigned char *p = malloc(nb ? nb : 1);
    float *f = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        float v = frt_test_rand(-4.0f, 4.0f);
        if (fabsf(v) < 0.01f) v = 0.5f; /* never zero */
        switch (d->dt) {
        case FRT_DT_BF16: {
            uint16_t h = frt_f32_to_bf16(v);
            memcpy(p + 2 * i, &h, 2);
            f[i] = frt_bf16_to_f32(h);
            break;
        }
        case FRT_DT_F16: {
            uint16_t h = frt_f32_to_f16(v);
            memcpy(p + 2 * i, &h, 2);
            f[i] = frt_f16_to_f32(h);
            break;
        }
        case FRT_DT_F32:
            memcpy(p + 4 * i, &v, 4);
            f[i] = v;
            break;
        case FRT_DT_F64: {
            double x = (double)v;
            memcpy(p + 8 * i, &x, 8);
            f[i] = v;
            break;
        }
        case FRT_DT_F8_E4M3:
            p[i] = frt_f32_to_fp8_e4m3(v);
            f[i] = frt_fp8_e4m3_to_f32(p[i]);
            break;
        case FRT_DT_F8_E5M2:
            p[i] = frt_f32_to_fp8_e5m2(v);
            f[i] = frt_fp8_e5m2_to_f32(p[i]);
            break;
        default:
            for (size_t k = 0; k < frt_dtype_size(d->dt); k++)
                p[i * frt_dtype_size(d->dt) + k] = (unsigned char)(frt_test_u64() | 1);
            f[i] = 0;
            break;
        }
    }
    *as_f32 = f;
    return p;
}

static void test_round_trip(void)
{
    void *data[NDEFS];
    float *ref[NDEFS];
    frt_st_writer *w;
    CHECK_OK(frt_st_writer_create(&w));
    CHECK_OK(frt_st_writer_set_metadata(w, "origin", "frt test"));
    for (int i = 0; i < NDEFS; i++) {
        data[i] = make_data(&DEFS[i], &ref[i]);
        CHECK_OK(frt_st_writer_add(w, DEFS[i].name, DEFS[i].dt, DEFS[i].ndim, DEFS[i].shape, data[i]));
    }
    char path[320];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
    CHECK_OK(frt_st_writer_write(w, path));
    uint64_t fsize = frt_st_writer_file_size(w);

    frt_safetensors *st;
    CHECK_OK(frt_safetensors_open(path, &st));
    CHECK(frt_safetensors_count(st) == NDEFS);
    CHECK(frt_safetensors_size(st) == fsize);
    CHECK(frt_safetensors_metadata(st, "format") && !strcmp(frt_safetensors_metadata(st, "format"), "pt"));
    CHECK(frt_safetensors_metadata(st, "origin") && !strcmp(frt_safetensors_metadata(st, "origin"), "frt test"));
    CHECK(frt_safetensors_metadata(st, "nope") == NULL);
    CHECK(!strcmp(frt_safetensors_path(st), path));
    for (int i = 0; i < NDEFS; i++) {
        const frt_tensor *t = frt_safetensors_find(st, DEFS[i].name);
        CHECK_MSG(t != NULL, "missing %s", DEFS[i].name);
        if (!t) continue;
        CHECK(t->dtype == DEFS[i].dt && t->ndim == DEFS[i].ndim && t->nbytes == def_bytes(&DEFS[i]));
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == DEFS[i].shape[d]);
        CHECK(t->nbytes == 0 || !memcmp(t->data, data[i], t->nbytes));
        CHECK(!strcmp(t->file, path));
        if (frt_dtype_is_float(t->dtype)) {
            int64_t n = frt_tensor_numel(t);
            float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
            CHECK_OK(frt_tensor_to_f32(t, out));
            int same = 1;
            for (int64_t k = 0; k < n; k++) same &= out[k] == ref[i][k];
            CHECK_MSG(same, "%s: f32 conversion differs", t->name);
            free(out);
        } else {
            float dummy;
            CHECK_STATUS(frt_tensor_to_f32(t, &dummy), FRT_ERR_UNSUPPORTED);
        }
    }
    /* File order is add order: at(i) in data-offset order. */
    for (int i = 0; i + 1 < frt_safetensors_count(st); i++)
        CHECK((const char *)frt_safetensors_at(st, i)->data <= (const char *)frt_safetensors_at(st, i + 1)->data);
    CHECK(frt_safetensors_at(st, -1) == NULL && frt_safetensors_at(st, NDEFS) == NULL);
    CHECK(frt_safetensors_find(st, "absent") == NULL && frt_safetensors_find(st, NULL) == NULL);
    const frt_tensor *sc = frt_safetensors_find(st, "scalar");
    CHECK(sc && frt_tensor_numel(sc) == 1 && sc->nbytes == 4);
    frt_safetensors_close(st);

    /* The header length puts the data at a multiple of 8; the bytes of a
     * second write are identical (deterministic writer). */
    size_t n1, n2;
    unsigned char *b1 = read_file(path, &n1);
    CHECK(b1 && n1 == fsize);
    uint64_t hl = 0;
    for (int i = 7; b1 && i >= 0; i--) hl = (hl << 8) | b1[i];
    CHECK((8 + hl) % 8 == 0);
    char path2[330];
    snprintf(path2, sizeof path2, "%s/rt2.safetensors", tmpdir);
    CHECK_OK(frt_st_writer_write(w, path2));
    unsigned char *b2 = read_file(path2, &n2);
    CHECK(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1));

    /* Writing over an existing file replaces it; nothing temporary stays. */
    CHECK(write_raw(path2, "old", 3) == 0);
    CHECK_OK(frt_st_writer_write(w, path2));
    free(b2);
    b2 = read_file(path2, &n2);
    CHECK(b2 && n2 == n1 && !memcmp(b1, b2, n1));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c tmp > /dev/null", tmpdir);
    CHECK(system(cmd) != 0); /* grep -c finds nothing -> status 1 */
    free(b1);
    free(b2);

    /* In memory: the same checks on the same image. */
    b1 = read_file(path, &n1);
    CHECK_OK(frt_safetensors_open_memory(b1, n1, "mem", &st));
    CHECK(frt_safetensors_count(st) == NDEFS && !strcmp(frt_safetensors_at(st, 0)->file, "mem"));
    frt_safetensors_close(st);
    free(b1);

    frt_st_writer_destroy(w);
    for (int i = 0; i < NDEFS; i++) {
        free(data[i]);
        free(ref[i]);
    }
}

static void test_writer_errors(void)
{
    frt_st_writer *w;
    CHECK_OK(frt_st_writer_create(&w));
    int64_t shape[2] = {2, 2};
    float d[4] = {1, 2, 3, 4};
    CHECK_OK(frt_st_writer_add(w, "a", FRT_DT_F32, 2, shape, d));
    CHECK_STATUS(frt_st_writer_add(w, "a", FRT_DT_F32, 2, shape, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK(contains(frt_last_error(), "duplicate"));
    CHECK_STATUS(frt_st_writer_add(w, "b", FRT_DT_F32, 9, shape, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_add(w, "b", FRT_DT_F32, 2, shape, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_add(w, "b", (frt_dtype)99, 2, shape, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_add(w, "", FRT_DT_F32, 2, shape, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_add(w, "__metadata__", FRT_DT_F32, 2, shape, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_add(w, "bad\xff", FRT_DT_F32, 2, shape, d), FRT_ERR_INVALID_ARGUMENT);
    int64_t neg[1] = {-1}, huge[2] = {INT64_MAX / 2, 8};
    CHECK_STATUS(frt_st_writer_add(w, "b", FRT_DT_F32, 1, neg, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_add(w, "b", FRT_DT_F32, 2, huge, d), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_st_writer_add(NULL, "b", FRT_DT_F32, 2, shape, d), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_st_writer_set_metadata(w, NULL, "x"), FRT_ERR_INVALID_ARGUMENT);
    /* A directory that does not exist: FRT_ERR_IO naming the path. */
    CHECK_STATUS(frt_st_writer_write(w, "/nonexistent-frt-dir/x.safetensors"), FRT_ERR_IO);
    CHECK(contains(frt_last_error(), "/nonexistent-frt-dir/x.safetensors"));
    CHECK_STATUS(frt_st_writer_create(NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_st_writer_destroy(w);
    frt_st_writer_destroy(NULL);
    frt_safetensors_close(NULL);
    CHECK(frt_dtype_size((frt_dtype)99) == 0 && !strcmp(frt_dtype_name((frt_dtype)99), "?"));
    frt_dtype dt;
    CHECK_OK(frt_dtype_from_name("F8_E4M3", &dt));
    CHECK(dt == FRT_DT_F8_E4M3);
    CHECK_STATUS(frt_dtype_from_name("bf16", &dt), FRT_ERR_UNSUPPORTED);
}

/* ---- malformed files ---------------------------------------------------- */

/* A file image: 8-byte length, header text padded to 8, data_len bytes of
 * non-zero data, plus extra bytes appended. */
static unsigned char *image(const char *header, size_t data_len, size_t *n)
{
    size_t hl = strlen(header), pad = (8 - (8 + hl) % 8) % 8;
    *n = 8 + hl + pad + data_len;
    unsigned char *b = malloc(*n);
    uint64_t L = hl + pad;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(L >> (8 * i));
    memcpy(b + 8, header, hl);
    memset(b + 8 + hl, ' ', pad);
    for (size_t i = 0; i < data_len; i++) b[8 + L + i] = (unsigned char)(i * 7 + 1);
    return b;
}

/* Opens the image both from memory and from a file; both must fail with
 * `status` and a message containing each of the needles. */
static void expect_bad(const char *label, const unsigned char *b, size_t n, int status, const char *needle1,
                       const char *needle2)
{
    frt_safetensors *st = NULL;
    int rc = frt_safetensors_open_memory(b, n, "bad.safetensors", &st);
    CHECK_MSG(rc == status, "%s: memory: got %s (%s), want %s", label, frt_status_name(rc), frt_last_error(),
              frt_status_name(status));
    CHECK_MSG(contains(frt_last_error(), "bad.safetensors"), "%s: message lacks the file: %s", label,
              frt_last_error());
    if (needle1) CHECK_MSG(contains(frt_last_error(), needle1), "%s: message lacks '%s': %s", label, needle1,
                           frt_last_error());
    if (needle2) CHECK_MSG(contains(frt_last_error(), needle2), "%s: message lacks '%s': %s", label, needle2,
                           frt_last_error());
    if (rc == 0) frt_safetensors_close(st);
    char path[320];
    snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
    CHECK(write_raw(path, b, n) == 0);
    st = NULL;
    rc = frt_safetensors_open(path, &st);
    CHECK_MSG(rc == status, "%s: file: got %s (%s)", label, frt_status_name(rc), frt_last_error());
    CHECK(contains(frt_last_error(), path));
    if (rc == 0) frt_safetensors_close(st);
}

#define GOOD_HEADER                                                                                                \
    "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"   \
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}"

static void bad_header(const char *label, const char *header, size_t data_len, int status, const char *n1,
                       const char *n2)
{
    size_t n;
    unsigned char *b = image(header, data_len, &n);
    expect_bad(label, b, n, status, n1, n2);
    free(b);
}

static void test_malformed(void)
{
    size_t n;
    unsigned char *good = image(GOOD_HEADER, 24, &n);
    frt_safetensors *st;
    CHECK_OK(frt_safetensors_open_memory(good, n, "good", &st));
    CHECK(frt_safetensors_count(st) == 2);
    frt_safetensors_close(st);

    /* Truncated: the data is cut short / the header is cut / < 8 bytes. */
    expect_bad("truncated data", good, n - 3, FRT_ERR_FORMAT, "past the end", "'b'");
    expect_bad("truncated header", good, 20, FRT_ERR_FORMAT, "header length", "truncated");
    expect_bad("shorter than 8", good, 5, FRT_ERR_FORMAT, "8-byte", NULL);
    expect_bad("empty file", good, 0, FRT_ERR_FORMAT, "0 bytes", NULL);

    /* Huge header length (no allocation, no read past the end). */
    unsigned char *b = malloc(n);
    memcpy(b, good, n);
    uint64_t huge = 1ull << 40;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(huge >> (8 * i));
    expect_bad("huge header length", b, n, FRT_ERR_FORMAT, "limit", NULL);
    for (int i = 0; i < 8; i++) b[i] = 0xFF;
    expect_bad("2^64-1 header length", b, n, FRT_ERR_FORMAT, "limit", NULL);
    free(b);

    /* Bad JSON / wrong shapes of the header. */
    bad_header("bad JSON", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]", 16, FRT_ERR_FORMAT,
               "invalid JSON", NULL);
    bad_header("not an object", "[1,2,3]", 0, FRT_ERR_FORMAT, "JSON object", NULL);
    bad_header("entry not an object", "{\"a\":5}", 0, FRT_ERR_FORMAT, "'a'", "not an object");
    bad_header("invalid UTF-8", "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               FRT_ERR_FORMAT, "invalid JSON", NULL);

    /* Ranges. */
    bad_header("overlap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
               16, FRT_ERR_FORMAT, "overlap", "'a'");
    bad_header("hole",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
               20, FRT_ERR_FORMAT, "no tensor", "'b'");
    bad_header("trailing bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12,
               FRT_ERR_FORMAT, "after the last tensor", NULL);
    bad_header("range outside the file", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 16,
               FRT_ERR_FORMAT, "past the end", "'a'");
    bad_header("begin > end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8,
               FRT_ERR_FORMAT, "invalid data_offsets", "'a'");
    bad_header("negative offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 0,
               FRT_ERR_FORMAT, "invalid data_offsets", NULL);
    bad_header("offsets not a pair", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
               FRT_ERR_FORMAT, "data_offsets", "'a'");
    bad_header("offsets missing", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, FRT_ERR_FORMAT, "data_offsets",
               NULL);

    /* dtype / shape. */
    bad_header("dtype x shape mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16,
               FRT_ERR_FORMAT, "needs 12 bytes", "'a'");
    bad_header("dtype size mismatch", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16,
               FRT_ERR_FORMAT, "BF16", "'a'");
    bad_header("unknown dtype", "{\"w\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[0,2]}}", 2,
               FRT_ERR_UNSUPPORTED, "'F4'", "'w'");
    bad_header("dtype not a string", "{\"w\":{\"dtype\":7,\"shape\":[4],\"data_offsets\":[0,16]}}", 16,
               FRT_ERR_FORMAT, "dtype", NULL);
    bad_header("negative dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
               FRT_ERR_FORMAT, "shape[0]", NULL);
    bad_header("shape not a list", "{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16,
               FRT_ERR_FORMAT, "shape", NULL);
    bad_header("nine dims",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               FRT_ERR_UNSUPPORTED, "9 dims", NULL);
    bad_header("shape overflow",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
               FRT_ERR_FORMAT, "overflow", NULL);

    /* Names. */
    bad_header("duplicate name",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, FRT_ERR_FORMAT, "duplicate", "\"a\"");
    bad_header("metadata value not a string", "{\"__metadata__\":{\"format\":1}}", 0, FRT_ERR_FORMAT, "format",
               NULL);
    bad_header("metadata not an object", "{\"__metadata__\":[]}", 0, FRT_ERR_FORMAT, "__metadata__", NULL);

    /* Still fine: only metadata, no tensors; zero-size tensors sharing an
     * offset. */
    size_t m;
    unsigned char *ok = image("{\"__metadata__\":{\"format\":\"pt\"}}", 0, &m);
    CHECK_OK(frt_safetensors_open_memory(ok, m, "meta-only", &st));
    CHECK(frt_safetensors_count(st) == 0);
    frt_safetensors_close(st);
    free(ok);
    ok = image("{\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
               "\"e2\":{\"dtype\":\"I8\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
               "\"x\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
               2, &m);
    CHECK_OK(frt_safetensors_open_memory(ok, m, "zero-size", &st));
    CHECK(frt_safetensors_count(st) == 3);
    frt_safetensors_close(st);
    free(ok);

    /* A path that does not exist / a directory. */
    CHECK_STATUS(frt_safetensors_open("/nonexistent-frt/x.safetensors", &st), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_safetensors_open(tmpdir, &st), FRT_ERR_IO);
    CHECK_STATUS(frt_safetensors_open(NULL, &st), FRT_ERR_INVALID_ARGUMENT);
    free(good);
}

/* frt_f32_convert: the writer's side of frt_tensor_to_f32 (bf16 and f16
 * round to nearest even, f32 copies), on random values. */
static void test_f32_convert(void)
{
    float src[257], back[257];
    frt_test_fill(src, 257, -4.0f, 4.0f);
    src[0] = 1.00390625f; /* 1 + 2^-8: a bf16 tie, rounds to the even 1.0 */
    uint16_t h[257];
    const frt_dtype dts[2] = {FRT_DT_BF16, FRT_DT_F16};
    for (int d = 0; d < 2; d++) {
        CHECK_OK(frt_f32_convert(h, dts[d], src, 257));
        frt_tensor t = {0};
        t.dtype = dts[d];
        t.ndim = 1;
        t.shape[0] = 257;
        t.data = h;
        t.nbytes = sizeof h;
        CHECK_OK(frt_tensor_to_f32(&t, back));
        double num = 0, den = 0;
        for (int i = 0; i < 257; i++) num += (back[i] - src[i]) * (back[i] - src[i]), den += src[i] * src[i];
        CHECK(sqrt(num / den) < (dts[d] == FRT_DT_BF16 ? 4e-3 : 5e-4));
        if (dts[d] == FRT_DT_BF16) CHECK(back[0] == 1.0f);
    }
    float f[3];
    CHECK_OK(frt_f32_convert(f, FRT_DT_F32, src, 3));
    CHECK(!memcmp(f, src, sizeof f));
    int32_t i32[2];
    CHECK_STATUS(frt_f32_convert(i32, FRT_DT_I32, src, 2), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_f32_convert(NULL, FRT_DT_BF16, src, 2), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_f32_convert(NULL, FRT_DT_BF16, NULL, 0));
}

int main(void)
{
    test_f32_convert();
    frt_test_seed(42);
    make_tmpdir();
    test_round_trip();
    test_writer_errors();
    test_malformed();
    remove_tmpdir();
    return frt_test_report();
}
