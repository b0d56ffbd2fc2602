/*
 * test_policy_obs.c - the policy server's observation parsers
 * (src/serving/policy_obs.c, policy_obs_json.c; docs/policy-server.md):
 * messages packed here with msgpack-c the way openpi's msgpack_numpy packs
 * them (bin keys, dtype.str, the shape as a list) over random arrays of
 * every dtype, read back byte for byte; the same observation as JSON with
 * base64 data; nested maps flattened; numpy scalars and lists; base64
 * round trips; and every refusal, with the observation left empty.
 */
#include "frt_test.h"
#include "serving/policy_obs.h"

#include "frt/status.h"

#include <msgpack.h>

static void pack_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static void pack_bin_key(msgpack_packer *pk, const char *s)
{
    msgpack_pack_bin(pk, strlen(s));
    msgpack_pack_bin_body(pk, s, strlen(s));
}

/* openpi's pack_array: {b"__ndarray__": True, b"data": bytes, b"dtype": str, b"shape": tuple} */
static void pack_ndarray(msgpack_packer *pk, const char *dtype, const int64_t *shape, int ndim, const void *data,
                         size_t nb)
{
    msgpack_pack_map(pk, 4);
    pack_bin_key(pk, "__ndarray__");
    msgpack_pack_true(pk);
    pack_bin_key(pk, "data");
    msgpack_pack_bin(pk, nb);
    msgpack_pack_bin_body(pk, data, nb);
    pack_bin_key(pk, "dtype");
    pack_str(pk, dtype);
    pack_bin_key(pk, "shape");
    msgpack_pack_array(pk, (size_t)ndim);
    for (int i = 0; i < ndim; i++) msgpack_pack_int64(pk, shape[i]);
}

static const char *DT[] = {"|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8"};

/* Every dtype at a random shape, nested under "images", a prompt, a scalar. */
static void test_msgpack_roundtrip(void)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    uint8_t *bufs[11];
    size_t sizes[11];
    int64_t shapes[11][3];
    msgpack_pack_map(&pk, 3);
    pack_str(&pk, "images");
    msgpack_pack_map(&pk, 11);
    for (int d = 0; d < 11; d++) {
        frt_pobs_dtype dt;
        CHECK_OK(frt_pobs_dtype_parse(DT[d], 3, 0, &dt));
        size_t item = frt_pobs_dtype_size(dt), n = 1;
        for (int k = 0; k < 3; k++) n *= (size_t)(shapes[d][k] = 1 + (int64_t)(frt_test_u64() % 5));
        sizes[d] = n * item;
        bufs[d] = xmalloc(sizes[d]);
        for (size_t i = 0; i < sizes[d]; i++) bufs[d][i] = (uint8_t)frt_test_u64();
        if (dt == FRT_POBS_BOOL)
            for (size_t i = 0; i < n; i++) bufs[d][i] &= 1;
        if (dt == FRT_POBS_F32 || dt == FRT_POBS_F64) /* finite values */
            for (size_t i = 0; i < n; i++) {
                if (dt == FRT_POBS_F32) ((float *)bufs[d])[i] = frt_test_rand(-3, 3);
                else ((double *)bufs[d])[i] = frt_test_rand(-3, 3);
            }
        char key[16];
        snprintf(key, sizeof key, "cam_%d", d);
        pack_bin_key(&pk, key); /* a bin key, as Python bytes */
        pack_ndarray(&pk, DT[d], shapes[d], 3, bufs[d], sizes[d]);
    }
    pack_str(&pk, "prompt");
    pack_str(&pk, "pick up the cup");
    pack_str(&pk, "gripper");
    msgpack_pack_map(&pk, 3); /* np.float32(0.5) */
    pack_bin_key(&pk, "__npgeneric__");
    msgpack_pack_true(&pk);
    pack_bin_key(&pk, "data");
    msgpack_pack_double(&pk, 0.5);
    pack_bin_key(&pk, "dtype");
    pack_str(&pk, "<f4");

    frt_pobs o;
    CHECK_OK(frt_pobs_parse_msgpack(sb.data, sb.size, &o));
    CHECK(o.n == 13);
    for (int d = 0; d < 11; d++) {
        char key[32];
        snprintf(key, sizeof key, "images/cam_%d", d);
        const frt_pobs_value *v = frt_pobs_get(&o, key);
        CHECK_MSG(v && v->kind == FRT_POBS_ARRAY && v->ndim == 3, "%s", key);
        if (!v) continue;
        CHECK(!strcmp(frt_pobs_dtype_str(v->dtype), DT[d]));
        CHECK(v->shape[0] == shapes[d][0] && v->shape[1] == shapes[d][1] && v->shape[2] == shapes[d][2]);
        CHECK(v->n * frt_pobs_dtype_size(v->dtype) == sizes[d] && !memcmp(v->data, bufs[d], sizes[d]));
    }
    const frt_pobs_value *p = frt_pobs_get(&o, "prompt"), *g = frt_pobs_get(&o, "gripper");
    CHECK(p && p->kind == FRT_POBS_STRING && !strcmp(p->data, "pick up the cup"));
    CHECK(g && g->kind == FRT_POBS_ARRAY && g->ndim == 0 && g->dtype == FRT_POBS_F32 && *(float *)g->data == 0.5f);

    /* the same observation as JSON: base64 data, numpy names for two of the dtypes */
    size_t cap = 1 << 16, len = 0;
    char *js = xmalloc(cap);
    len += (size_t)snprintf(js + len, cap - len, "{\"prompt\": \"pick up the cup\", \"images\": {");
    for (int d = 0; d < 11; d++) {
        char *b = frt_pobs_base64_encode(bufs[d], sizes[d]);
        const char *dn = d == 1 ? "uint8" : d == 9 ? "float32" : DT[d];
        len += (size_t)snprintf(js + len, cap - len, "%s\"cam_%d\": {\"dtype\": \"%s\", \"shape\": [%lld, %lld, %lld], "
                                "\"data\": \"%s\"}", d ? ", " : "", d, dn, (long long)shapes[d][0],
                                (long long)shapes[d][1], (long long)shapes[d][2], b);
        free(b);
    }
    snprintf(js + len, cap - len, "}, \"state\": [1, -2.5, 3e-3]}");
    frt_pobs oj;
    CHECK_OK(frt_pobs_parse_json(js, strlen(js), &oj));
    for (int d = 0; d < 11; d++) {
        char key[32];
        snprintf(key, sizeof key, "images/cam_%d", d);
        const frt_pobs_value *a = frt_pobs_get(&o, key), *b = frt_pobs_get(&oj, key);
        CHECK_MSG(a && b && a->dtype == b->dtype && a->n == b->n && !memcmp(a->data, b->data, sizes[d]), "%s", key);
    }
    const frt_pobs_value *st = frt_pobs_get(&oj, "state");
    CHECK(st && st->dtype == FRT_POBS_F64 && st->ndim == 1 && st->n == 3 && ((double *)st->data)[2] == 3e-3);
    free(js);
    frt_pobs_free(&oj);
    frt_pobs_free(&o);
    frt_pobs_free(NULL);
    for (int d = 0; d < 11; d++) free(bufs[d]);
    msgpack_sbuffer_destroy(&sb);
}

static void test_base64(void)
{
    for (size_t n = 0; n < 40; n++) {
        uint8_t b[40];
        for (size_t i = 0; i < n; i++) b[i] = (uint8_t)frt_test_u64();
        char *s = frt_pobs_base64_encode(b, n);
        uint8_t *back = NULL;
        size_t m = 99;
        CHECK_OK(frt_pobs_base64_decode(s, strlen(s), &back, &m));
        CHECK(m == n && (!n || !memcmp(back, b, n)));
        free(back);
        free(s);
    }
    char *s = frt_pobs_base64_encode((const uint8_t *)"frt", 3);
    CHECK(!strcmp(s, "ZnJ0")); /* RFC 4648 */
    free(s);
    uint8_t *x = NULL;
    size_t m;
    CHECK_STATUS(frt_pobs_base64_decode("Zn", 2, &x, &m), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_pobs_base64_decode("Zn*0", 4, &x, &m), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_pobs_base64_decode("=nJ0", 4, &x, &m), FRT_ERR_INVALID_ARGUMENT);
}

/* One msgpack message built by F must be refused, naming NEEDLE. */
static void refuse_bytes(const void *p, size_t n, const char *needle, int json)
{
    frt_pobs o = {(frt_pobs_value *)1, 7};
    int rc = json ? frt_pobs_parse_json(p, n, &o) : frt_pobs_parse_msgpack(p, n, &o);
    CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT && strstr(frt_last_error(), needle), "want '%s', got %s: %s", needle,
              frt_status_name(rc), frt_last_error());
    CHECK(o.n == 0 && o.v == NULL);
}

static void refuse_json(const char *s, const char *needle) { refuse_bytes(s, strlen(s), needle, 1); }

static void test_refusals(void)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int64_t two = 2, big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float f2[2] = {1, 2};
#define MSG(body)                                                                                                      \
    do {                                                                                                               \
        msgpack_sbuffer_init(&sb);                                                                                     \
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);                                                          \
        body;                                                                                                          \
    } while (0)
#define REFUSE(body, needle)                                                                                           \
    do {                                                                                                               \
        MSG(body);                                                                                                     \
        refuse_bytes(sb.data, sb.size, needle, 0);                                                                     \
        msgpack_sbuffer_destroy(&sb);                                                                                  \
    } while (0)
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), pack_ndarray(&pk, "<f4", &two, 1, f2, 7)), "'x': 7 data");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), pack_ndarray(&pk, ">f4", &two, 1, f2, 8)), "'>f4'");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), pack_ndarray(&pk, "<f2", &two, 1, f2, 4)), "'<f2'");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), pack_ndarray(&pk, "<c8", &two, 1, f2, 8)), "'<c8'");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), pack_ndarray(&pk, "|u1", big, 9, f2, 1)), "at most 8 ints");
    REFUSE((msgpack_pack_map(&pk, 2), pack_str(&pk, "x"), msgpack_pack_int(&pk, 1), pack_bin_key(&pk, "x"),
            msgpack_pack_int(&pk, 2)),
           "'x' given twice");
    REFUSE((msgpack_pack_map(&pk, 2), pack_str(&pk, "a/b"), msgpack_pack_int(&pk, 1), pack_str(&pk, "a"),
            msgpack_pack_map(&pk, 1), pack_str(&pk, "b"), msgpack_pack_int(&pk, 2)),
           "'a/b' given twice");
    REFUSE((msgpack_pack_array(&pk, 1), msgpack_pack_int(&pk, 1)), "not a map");
    REFUSE((msgpack_pack_map(&pk, 1), msgpack_pack_int(&pk, 3), msgpack_pack_int(&pk, 1)), "not a string");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), msgpack_pack_array(&pk, 2), msgpack_pack_int(&pk, 1),
            pack_str(&pk, "a")),
           "element 1 is not a number");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), msgpack_pack_ext(&pk, 1, 5), msgpack_pack_ext_body(&pk, "x", 1)),
           "ext");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), msgpack_pack_str(&pk, 2), msgpack_pack_str_body(&pk, "\xff\xfe", 2)),
           "not UTF-8");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "x"), msgpack_pack_map(&pk, 2), pack_bin_key(&pk, "__ndarray__"),
            msgpack_pack_true(&pk), pack_bin_key(&pk, "data"), msgpack_pack_bin(&pk, 0)),
           "exactly data, dtype and shape");
    REFUSE((msgpack_pack_map(&pk, 1), pack_str(&pk, "a"), msgpack_pack_map(&pk, 1), pack_str(&pk, "b"),
            msgpack_pack_map(&pk, 1), pack_str(&pk, "c"), msgpack_pack_map(&pk, 1), pack_str(&pk, "d"),
            msgpack_pack_map(&pk, 1), pack_str(&pk, "e"), msgpack_pack_map(&pk, 1), pack_str(&pk, "f"),
            msgpack_pack_int(&pk, 1)),
           "nested deeper");
    /* too many keys */
    MSG(msgpack_pack_map(&pk, FRT_POBS_MAX_KEYS + 1));
    for (int i = 0; i <= FRT_POBS_MAX_KEYS; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        pack_str(&pk, k);
        msgpack_pack_nil(&pk);
    }
    refuse_bytes(sb.data, sb.size, "more than 64", 0);
    /* a few bytes that claim 2^32 - 1 elements; truncation; trailing bytes; reserved 0xc1 */
    static const uint8_t huge[] = {0x81, 0xa1, 0x61, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01};
    refuse_bytes(huge, sizeof huge, "claims more elements", 0);
    for (size_t cut = 1; cut < sb.size; cut += 7) refuse_bytes(sb.data, cut, "msgpack: ", 0);
    char *extra = xmalloc(sb.size + 1);
    memcpy(extra, sb.data, sb.size);
    extra[sb.size] = 0;
    refuse_bytes(extra, sb.size + 1, "after the message", 0);
    free(extra);
    msgpack_sbuffer_destroy(&sb);
    static const uint8_t reserved[] = {0x81, 0xa1, 0x61, 0xc1};
    refuse_bytes(reserved, sizeof reserved, "malformed", 0);
    refuse_bytes("", 0, "empty", 0);
#undef REFUSE
#undef MSG
    refuse_json("{\"x\": {\"dtype\": \"<f4\", \"shape\": [2], \"data\": \"AAAA\"}}", "'x': 3 data bytes");
    refuse_json("{\"x\": {\"dtype\": \"<f4\", \"shape\": [-1], \"data\": \"\"}}", "shape entry 0");
    refuse_json("{\"x\": {\"dtype\": \"<f4\", \"shape\": [1], \"data\": \"AA*A\"}}", "bad character");
    refuse_json("{\"x\": {\"dtype\": \"half\", \"shape\": [1], \"data\": \"AAA=\"}}", "'half'");
    refuse_json("{\"x\": 1, \"x\": 2}", "duplicate");
    refuse_json("[1]", "not an object");
    refuse_json("{\"x\": [1, \"a\"]}", "element 1");
    refuse_json("{\"a\": {\"b\": {\"c\": {\"d\": {\"e\": {\"f\": 1}}}}}}", "nested deeper");
    refuse_json("{\"x\": ", "JSON");
}

int main(void)
{
    frt_test_seed(23);
    test_msgpack_roundtrip();
    test_base64();
    test_refusals();
    return frt_test_report();
}
