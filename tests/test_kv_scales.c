/*
 * test_kv_scales.c - calibrated static per-head scales of the FP8 KV cache
 * (frt/kv_scales.h, params.kv_scales, docs/fp8.md "Calibrated scales") on
 * the dense golden models, cpu backend:
 *   - frt_model_kv_calibrate on the 700-token golden prompt writes, per KV
 *     entry, max|x| / 448 of each head over the prefill's rows, computed
 *     here again from the f32 model's cache (bits);
 *   - a model loaded with the file stores layer 0's K and V as the codes of
 *     the f32 rows divided by those scales (bits), and its last logits of the
 *     100-token golden prompt are within 2^-3 of the f32 model's (reported
 *     next to the scale-1.0 model's error);
 *   - the scales are in the fingerprint: a capsule of the calibrated model
 *     is refused by the scale-1.0 model and the other way round
 *     (FRT_ERR_MISMATCH), restores into a second model loaded with the same
 *     file, and snapshot -> decode -> restore -> decode gives the same
 *     tokens and logits bits;
 *   - bad input: kv_scales without FP8, a missing file, files with a
 *     missing, extra, misshapen, BF16, zero, negative, NaN or infinite
 *     scale or the wrong format metadata (FRT_ERR_FORMAT naming the tensor),
 *     calibrating an FP8 model, n < 1, n past max_seq, an unwritable path.
 */
#include "frt_test.h"
#include "frt_test_fp8.h"

#include "frt/capsule.h"
#include "frt/kv_scales.h"
#include "frt/model.h"
#include "frt/safetensors.h"
#include "kernels/cpu/fp8.h"
#include "model/model_internal.h"

#include <float.h>
#include <math.h>
#include <unistd.h>

#define GOLDEN_DIR FRT_TEST_DATA "/golden_dense"
#define BOUND 0.125 /* 2^-3: docs/fp8.md "Accuracy" */

static char tmp[256];

static frt_model *load(const char *dir, frt_kv_dtype kv, const char *scales, int expect)
{
    return frt_test_load_kv(dir, kv, scales, 1024, expect);
}

/* Rows 0..n-1 of state entry e as f32 (the f32 model) or codes. */
static void *rows_of(frt_model *m, int e, int n, size_t *bytes)
{
    frt_state_info si;
    CHECK_OK(frt_model_state_info(m, e, &si));
    *bytes = (size_t)n * si.row_bytes;
    void *p = xmalloc(*bytes);
    CHECK_OK(frt_buffer_read(m->state[e].buf, 0, p, *bytes, m->stream));
    CHECK_OK(frt_stream_sync(m->stream));
    return p;
}

/* The file's scales == max|x| / 448 per head of the f32 model's rows. */
static void check_file(frt_model *a, const char *path, int n)
{
    frt_safetensors *st = NULL;
    CHECK_OK(frt_safetensors_open(path, &st));
    if (!st) return;
    CHECK(!strcmp(frt_safetensors_metadata(st, "format"), "frt-kv-scales"));
    frt_model_info info;
    CHECK_OK(frt_model_info_get(a, &info));
    int entries = 0, bad = 0;
    for (int e = 0; e < 2 * info.n_layers; e++) {
        frt_state_info si;
        CHECK_OK(frt_model_state_info(a, e, &si));
        char name[64];
        snprintf(name, sizeof name, "%s.scale", si.name);
        const frt_tensor *t = frt_safetensors_find(st, name);
        CHECK_MSG(t && t->dtype == FRT_DT_F32 && t->ndim == 1 && t->shape[0] == si.shape[1], "%s", name);
        if (!t) continue;
        size_t b;
        float *x = rows_of(a, e, n, &b);
        int H = (int)si.shape[1], D = (int)si.shape[2];
        for (int j = 0; j < H; j++) {
            float amax = 0, got;
            for (int r = 0; r < n; r++)
                for (int d = 0; d < D; d++) amax = fmaxf(amax, fabsf(x[((size_t)r * H + j) * D + d]));
            memcpy(&got, (const char *)t->data + (size_t)j * 4, 4);
            bad += got != amax / 448.0f;
        }
        free(x);
        entries++;
    }
    CHECK_MSG(bad == 0, "%d scales are not max|x| / 448", bad);
    CHECK(entries == frt_safetensors_count(st));
    printf("  %s: %d entries, each head's scale == max|x| / 448 over %d rows\n", path, entries, n);
    frt_safetensors_close(st);
}

/* Layer 0's K and V in b (calibrated) == the codes of a's f32 rows / scale. */
static void check_codes(frt_model *a, frt_model *b, const char *path, int n)
{
    frt_safetensors *st = NULL;
    CHECK_OK(frt_safetensors_open(path, &st));
    if (!st) return;
    for (int e = 0; e < 2; e++) {
        frt_state_info si;
        CHECK_OK(frt_model_state_info(b, e, &si));
        char name[64];
        snprintf(name, sizeof name, "%s.scale", si.name);
        const frt_tensor *t = frt_safetensors_find(st, name);
        int H = (int)si.shape[1], D = (int)si.shape[2];
        float *s = xmalloc((size_t)H * 4);
        memcpy(s, t->data, (size_t)H * 4);
        size_t fa, fb;
        float *x = rows_of(a, e, n, &fa);
        uint8_t *q = rows_of(b, e, n, &fb), *want = xmalloc(fb);
        frt_fp8_quantize_rows(want, x, s, H, n * H, D);
        CHECK(fb * 4 == fa);
        CHECK_MSG(!memcmp(q, want, fb), "%s: the codes are not encode(x / scale)", si.name);
        free(s), free(x), free(q), free(want);
    }
    frt_safetensors_close(st);
}

static double logits_err(frt_model *a, frt_model *b, const int32_t *ids, int n, int V)
{
    float *la = xmalloc((size_t)V * 4), *lb = xmalloc((size_t)V * 4);
    CHECK_OK(frt_model_reset(a));
    CHECK_OK(frt_model_prefill(a, ids, n));
    CHECK_OK(frt_model_reset(b));
    CHECK_OK(frt_model_prefill(b, ids, n));
    CHECK_OK(frt_model_logits(a, la));
    CHECK_OK(frt_model_logits(b, lb));
    double e = frt_test_rel_err(lb, la, (size_t)V);
    free(la), free(lb);
    return e;
}

/* k greedy tokens from the current logits, the last logits into l. */
static void decode_k(frt_model *m, int k, int32_t *t, float *l)
{
    CHECK_OK(frt_model_sample(m, NULL, &t[0]));
    for (int i = 1; i < k; i++) CHECK_OK(frt_model_decode(m, NULL, &t[i]));
    CHECK_OK(frt_model_logits(m, l));
}

static void check_capsules(frt_model *b, frt_model *b2, frt_model *c, const int32_t *ids, int n, int V)
{
    enum { K = 6 };
    CHECK_OK(frt_model_reset(b));
    CHECK_OK(frt_model_prefill(b, ids, n));
    CHECK_OK(frt_model_reset(c));
    CHECK_OK(frt_model_prefill(c, ids, n));
    frt_capsule *cb = NULL, *cc = NULL;
    CHECK_OK(frt_capsule_snapshot(b, FRT_TIER_HOST, NULL, NULL, 0, &cb));
    CHECK_OK(frt_capsule_snapshot(c, FRT_TIER_HOST, NULL, NULL, 0, &cc));
    if (cb && cc) {
        CHECK_STATUS(frt_capsule_restore(c, cb), FRT_ERR_MISMATCH);
        CHECK_STATUS(frt_capsule_restore(b, cc), FRT_ERR_MISMATCH);
        int32_t t1[K], t2[K], t3[K];
        float *l1 = xmalloc((size_t)V * 4), *l2 = xmalloc((size_t)V * 4), *l3 = xmalloc((size_t)V * 4);
        char path[300];
        snprintf(path, sizeof path, "%s/b.cap", tmp);
        frt_capsule *cb2 = NULL;
        CHECK_OK(frt_capsule_save(cb, path));
        CHECK_OK(frt_capsule_load(b2, path, &cb2)); /* the same file: the same fingerprint */
        decode_k(b, K, t1, l1);
        CHECK_OK(frt_capsule_restore(b, cb));
        decode_k(b, K, t2, l2);
        if (cb2) CHECK_OK(frt_capsule_restore(b2, cb2));
        decode_k(b2, K, t3, l3);
        int same = !memcmp(t1, t2, sizeof t1) && !memcmp(l1, l2, (size_t)V * 4) && !memcmp(t1, t3, sizeof t1) &&
                   !memcmp(l1, l3, (size_t)V * 4);
        CHECK_MSG(same, "restore + decode is not the first run's bits");
        printf("  capsules: the other scales refused both ways; restore + %d decodes == the first run (bits): %s, in "
               "this model and in a second one loaded with the same file (disk tier)\n",
               K, same ? "yes" : "NO");
        frt_capsule_free(cb2);
        unlink(path);
        free(l1), free(l2), free(l3);
    }
    frt_capsule_free(cb);
    frt_capsule_free(cc);
}

static void test_model(const char *dir)
{
    char gpath[600], spath[300];
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    snprintf(spath, sizeof spath, "%s/scales.safetensors", tmp);
    frt_safetensors *g = NULL;
    CHECK_OK(frt_safetensors_open(gpath, &g));
    const frt_tensor *cal = g ? frt_safetensors_find(g, "prompt2.ids") : NULL;
    const frt_tensor *ev = g ? frt_safetensors_find(g, "prompt1.ids") : NULL;
    CHECK(cal && ev);
    frt_model *a = load(dir, FRT_KV_DEFAULT, NULL, 0);
    if (!cal || !ev || !a) goto out;
    int nc = (int)frt_tensor_numel(cal), ne = (int)frt_tensor_numel(ev);
    CHECK_OK(frt_model_kv_calibrate(a, cal->data, nc, spath));
    check_file(a, spath, nc);
    frt_model *b = load(dir, FRT_KV_FP8, spath, 0), *b2 = load(dir, FRT_KV_FP8, spath, 0);
    frt_model *c = load(dir, FRT_KV_FP8, NULL, 0);
    if (b && b2 && c) {
        CHECK_OK(frt_model_reset(b));
        CHECK_OK(frt_model_prefill(b, cal->data, nc));
        check_codes(a, b, spath, nc);
        frt_model_info info;
        CHECK_OK(frt_model_info_get(a, &info));
        double eb = logits_err(a, b, ev->data, ne, info.vocab_size);
        double ec = logits_err(a, c, ev->data, ne, info.vocab_size);
        printf("  last logits of the %d-token prompt vs f32 KV: calibrated fp8 %.3e, scale-1.0 fp8 %.3e\n", ne, eb,
               ec);
        CHECK_MSG(eb <= BOUND, "calibrated fp8 logits rel err %.3e", eb);
        check_capsules(b, b2, c, ev->data, ne, info.vocab_size);
    }
    frt_model_free(b);
    frt_model_free(b2);
    frt_model_free(c);
out:
    frt_model_free(a);
    frt_safetensors_close(g);
    unlink(spath);
}

/* ---- bad input ------------------------------------------------------------- */

typedef struct bad_file {
    const char *what, *expect; /* a case name; a substring of the message */
    int drop, extra, shape, bf16, value, format;
} bad_file;

/* Writes a scales file for the golden model's entries (n_layers x K, V of
 * H heads) with one defect, and loads it: FRT_ERR_FORMAT naming it. */
static void bad_case(const char *dir, int L, int H, const bad_file *c)
{
    char path[300];
    snprintf(path, sizeof path, "%s/bad.safetensors", tmp);
    frt_st_writer *w = NULL;
    CHECK_OK(frt_st_writer_create(&w));
    if (!c->format) CHECK_OK(frt_st_writer_set_metadata(w, "format", "frt-kv-scales"));
    float *s = xmalloc((size_t)(H + 1) * 2 * L * 4);
    for (int i = 0; i < (H + 1) * 2 * L; i++) s[i] = 0.01f * (float)(1 + i % 7);
    uint16_t one[64];
    for (int i = 0; i < 64; i++) one[i] = 0x3F80;
    for (int e = 0; e < 2 * L; e++) {
        if (c->drop && e == 2 * L - 1) continue;
        char name[64];
        snprintf(name, sizeof name, "kv.%d.%s.scale", e / 2, e % 2 ? "v" : "k");
        int64_t shape[1] = {H + (c->shape && e == 1)};
        float *v = s + (size_t)e * (H + 1);
        static const float defect[] = {0, 0.0f, -0.5f, NAN, INFINITY}; /* value 1..4 */
        if (c->value && e == 2) v[H - 1] = defect[c->value];
        if (c->bf16 && e == 0)
            CHECK_OK(frt_st_writer_add(w, name, FRT_DT_BF16, 1, shape, one));
        else
            CHECK_OK(frt_st_writer_add(w, name, FRT_DT_F32, 1, shape, v));
    }
    int64_t sh[1] = {H};
    if (c->extra) CHECK_OK(frt_st_writer_add(w, "kv.99.k.scale", FRT_DT_F32, 1, sh, s));
    CHECK_OK(frt_st_writer_write(w, path));
    frt_st_writer_destroy(w);
    free(s);
    CHECK(load(dir, FRT_KV_FP8, path, FRT_ERR_FORMAT) == NULL);
    CHECK_MSG(strstr(frt_last_error(), c->expect) != NULL, "%s: '%s' does not name '%s'", c->what, frt_last_error(),
              c->expect);
    printf("  refused (%s): %s\n", c->what, frt_last_error());
    unlink(path);
}

static void test_bad(const char *dir)
{
    frt_model *a = load(dir, FRT_KV_DEFAULT, NULL, 0), *b = load(dir, FRT_KV_FP8, NULL, 0);
    if (!a || !b) goto out;
    frt_model_info info;
    CHECK_OK(frt_model_info_get(a, &info));
    frt_state_info si;
    CHECK_OK(frt_model_state_info(a, 0, &si));
    const int L = info.n_layers, H = (int)si.shape[1];
    char path[300];
    snprintf(path, sizeof path, "%s/none.safetensors", tmp);
    int32_t ids[4] = {1, 2, 3, 4};
    CHECK(load(dir, FRT_KV_DEFAULT, path, FRT_ERR_INVALID_ARGUMENT) == NULL); /* without FP8 */
    CHECK(strstr(frt_last_error(), "without kv_dtype FRT_KV_FP8") != NULL);
    frt_model *m = NULL;
    frt_model_params p = frt_model_default_params();
    p.kv_dtype = FRT_KV_FP8;
    p.kv_scales = path;
    CHECK(frt_model_load(dir, &p, &m) < 0 && m == NULL); /* a missing file */
    char last[80];
    snprintf(last, sizeof last, "kv.%d.v.scale", L - 1);
    char one[] = "kv.0.v.scale", two[] = "kv.1.k.scale";
    const bad_file cases[] = {
        {"a missing entry", last, 1, 0, 0, 0, 0, 0},  {"an extra tensor", "kv.99.k.scale", 0, 1, 0, 0, 0, 0},
        {"a misshapen scale", one, 0, 0, 1, 0, 0, 0}, {"a BF16 scale", "kv.0.k.scale", 0, 0, 0, 1, 0, 0},
        {"a zero scale", two, 0, 0, 0, 0, 1, 0},      {"a negative scale", two, 0, 0, 0, 0, 2, 0},
        {"a NaN scale", two, 0, 0, 0, 0, 3, 0},       {"an infinite scale", two, 0, 0, 0, 0, 4, 0},
        {"format metadata 'pt'", "format", 0, 0, 0, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad_case(dir, L, H, &cases[i]);
    CHECK_STATUS(frt_model_kv_calibrate(b, ids, 4, path), FRT_ERR_INVALID_ARGUMENT); /* an FP8 model */
    CHECK_STATUS(frt_model_kv_calibrate(a, ids, 0, path), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_kv_calibrate(a, NULL, 4, path), FRT_ERR_INVALID_ARGUMENT);
    int32_t *many = xmalloc(2000 * sizeof(int32_t));
    for (int i = 0; i < 2000; i++) many[i] = i % 50;
    CHECK(frt_model_kv_calibrate(a, many, 2000, path) < 0); /* past max_seq */
    free(many);
    CHECK_STATUS(frt_model_kv_calibrate(a, ids, 4, "/nonexistent-dir/x/scales.safetensors"), FRT_ERR_IO);
    CHECK(access(path, F_OK) != 0); /* nothing written by the failures */
out:
    frt_model_free(a);
    frt_model_free(b);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/frt-test-kv-scales-%d", (int)getpid());
    char cmd[400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmp);
    CHECK(system(cmd) == 0);
    static const char *models[] = {"dense_qwen3_qknorm", "dense_llama3_gqa"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", GOLDEN_DIR, models[i]);
        printf("golden model %s\n", models[i]);
        test_model(dir);
    }
    test_bad(GOLDEN_DIR "/dense_llama3_gqa");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return frt_test_report();
}
