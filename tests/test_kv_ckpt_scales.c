/*
 * test_kv_ckpt_scales.c - FP8 KV-cache scales from the checkpoint
 * (compressed-tensors kv_cache_scheme; docs/fp8.md "Scales from the
 * checkpoint"), cpu backend. The checkpoints are made at test time by
 * scripts/ref/make_fp8_checkpoint.py --kv-scales (k_scale 0.01 (L + 1),
 * v_scale 0.013 (L + 1) per attention layer L; with --kv-strategy attn_head
 * one per KV head j, times 1 + 0.125 j) from golden models:
 *   - loaded with kv_dtype FRT_KV_FP8, the scales table holds those values on
 *     every head of every layer's K and V (a hybrid's linear-attention
 *     entries: none), for a kv-only dense checkpoint (strategy tensor and
 *     attn_head), an FP8-weights one and the composite hybrid (BF16 scales
 *     under model.language_model., both strategies);
 *   - its last logits equal bit for bit those of the same checkpoint and of
 *     the source checkpoint loaded with the same scales as a scales file,
 *     and differ from the scale-1.0 model's; the fingerprints of the same
 *     checkpoint with and without that file are equal (a capsule moves
 *     between them) and a file of other scales, which wins over the
 *     checkpoint's, changes the table and refuses the capsule
 *     (FRT_ERR_MISMATCH);
 *   - with the default (f32) KV cache the scales are not used: the logits are
 *     the source checkpoint's bits;
 *   - bad checkpoint scales (FRT_ERR_FORMAT naming the tensor, no model): a
 *     missing v_scale, shape [2], NaN, zero, negative, infinite, I32; a
 *     [1]-shaped scale is accepted; under attn_head: shape [] and
 *     [n_kv_heads + 1], a NaN or a zero on one head, [n_kv_heads] accepted
 *     with each head's value; the default KV cache and a scales file both
 *     load a checkpoint with a bad scale (neither reads it);
 *   - the older per-tensor names (--kv-names output_scale:
 *     k_proj.output_scale / v_proj.output_scale; kv_scale: one for K and V):
 *     the table holds their values (kv_scale's on V too), and the logits
 *     bits, fingerprint and capsules equal those of the same checkpoint with
 *     the scales renamed to k_scale / v_scale and of the source checkpoint
 *     with a file of them (the scale tensors are not in the weights hash);
 *     refused (FRT_ERR_FORMAT naming the tensors): a layer under two
 *     namings (k_scale beside k_proj.output_scale, kv_scale beside k_scale
 *     or v_proj.output_scale), shape [n_kv_heads], NaN, zero, a missing
 *     v_proj.output_scale, an older name under strategy attn_head; shapes
 *     [] and [1] accepted.
 */
#include "frt_test.h"
#include "frt_test_fp8.h"

#include "frt/capsule.h"
#include "frt/model.h"
#include "frt/safetensors.h"
#include "model/kv_scales.h"
#include "model/model_internal.h"
#include "util/bf16.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#define DENSE FRT_TEST_DATA "/golden_dense/dense_llama3_gqa"
#define COMPOSITE FRT_TEST_DATA "/golden/composite_qwen3_5"

static char tmp[256];

static frt_model *load(const char *dir, frt_kv_dtype kv, const char *scales, int expect)
{
    return frt_test_load_kv(dir, kv, scales, 256, expect);
}

/* make_fp8_checkpoint.py SRC tmp/NAME --layout LAYOUT --kv-scales DT
 * --kv-strategy STRATEGY --kv-names NAMES; the output directory into out. */
static int make_ckpt(const char *src, const char *layout, const char *dt, const char *strategy, const char *names,
                     const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", tmp, name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "P=/usr/bin/python3; $P -c 'import numpy' 2>/dev/null || P=python3; "
             "$P %s/scripts/ref/make_fp8_checkpoint.py '%s' '%s' --layout %s --kv-scales %s --kv-strategy %s "
             "--kv-names %s",
             FRT_SOURCE_DIR, src, out, layout, dt, strategy, names);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "make_fp8_checkpoint.py %s --kv-scales %s --kv-names %s failed (%d): numpy for "
              "/usr/bin/python3?", layout, dt, names, rc);
    return rc;
}

/* The script's scale of layer l's K (kv 0) or V (kv 1) on KV head j, as
 * stored: per_head (strategy attn_head) times 1 + 0.125 j, in float32 in
 * the script's order; one (--kv-names kv_scale): the K value for V too. */
static float ckpt_value(int l, int kv, int j, int per_head, int bf16, int one)
{
    float x = (kv && !one ? 0.013f : 0.01f) * (float)(l + 1);
    if (per_head) x = x * (1.0f + 0.125f * (float)j);
    return bf16 ? frt_bf16_to_f32(frt_f32_to_bf16(x)) : x;
}

static int per_head_of(const frt_model *m) { return m->cfg.quant.kv == FRT_QUANT_KV_HEAD; }

/* The [2 L, H] scales table of m == ckpt_value * mul on the K / V entries
 * of attention layers, 1.0 elsewhere; the count of values that differ. */
static int table_differs(const frt_model *m, int bf16, float mul, int one)
{
    const int L = m->cfg.n_layers, H = m->cfg.n_kv_heads;
    float *t = xmalloc((size_t)2 * L * H * sizeof(float));
    frt_model_kv_scales_table(m, 2 * L, H, t);
    int bad = 0;
    for (int l = 0; l < L; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int j = 0; j < H; j++) {
                int attn = !m->cfg.hybrid || m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION;
                float want = attn ? ckpt_value(l, kv, j, per_head_of(m), bf16, one) * mul : 1.0f;
                bad += t[((size_t)2 * l + kv) * H + j] != want;
            }
    free(t);
    return bad;
}

/* A scales file (frt/kv_scales.h) for m's FP8 entries holding the
 * checkpoint's values times mul; its path into path. */
static void write_file(const frt_model *m, int bf16, float mul, int one, const char *path)
{
    frt_st_writer *w = NULL;
    CHECK_OK(frt_st_writer_create(&w));
    CHECK_OK(frt_st_writer_set_metadata(w, "format", "frt-kv-scales"));
    const int L = m->cfg.n_layers, H = m->cfg.n_kv_heads;
    float *s = xmalloc((size_t)2 * L * H * sizeof(float));
    char name[64];
    for (int e = 0; e < m->n_state; e++) {
        int l, used = 0;
        char kv;
        const char *ename = m->state[e].decl.name;
        if (sscanf(ename, "kv.%d.%c%n", &l, &kv, &used) != 2 || ename[used]) continue;
        float *v = s + ((size_t)2 * l + (kv == 'v')) * H;
        for (int j = 0; j < H; j++) v[j] = ckpt_value(l, kv == 'v', j, per_head_of(m), bf16, one) * mul;
        snprintf(name, sizeof name, "%s.scale", ename);
        int64_t shape[1] = {H};
        CHECK_OK(frt_st_writer_add(w, name, FRT_DT_F32, 1, shape, v));
    }
    CHECK_OK(frt_st_writer_write(w, path));
    frt_st_writer_destroy(w);
    free(s);
}

/* A capsule of a (after a prefill), saved and loaded into b (another
 * context: the disk tier), restores there: 0, or the status. */
static int capsule_moves(frt_model *a, frt_model *b, const int32_t *ids, int n)
{
    char path[300];
    snprintf(path, sizeof path, "%s/a.cap", tmp);
    frt_capsule *c = NULL, *cb = NULL;
    CHECK_OK(frt_model_reset(a));
    CHECK_OK(frt_model_prefill(a, ids, n));
    CHECK_OK(frt_capsule_snapshot(a, FRT_TIER_HOST, NULL, NULL, 0, &c));
    if (c) CHECK_OK(frt_capsule_save(c, path));
    int rc = c ? frt_capsule_load(b, path, &cb) : -1;
    if (rc == 0) rc = frt_capsule_restore(b, cb);
    frt_capsule_free(c);
    frt_capsule_free(cb);
    unlink(path);
    return rc;
}

/* The golden prompt1 ids of src (at most 100). */
static const int32_t *prompt(const char *src, frt_safetensors **g, int *n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/golden.safetensors", src);
    CHECK_OK(frt_safetensors_open(path, g));
    const frt_tensor *t = *g ? frt_safetensors_find(*g, "prompt1.ids") : NULL;
    CHECK(t != NULL);
    if (!t) return NULL;
    *n = (int)frt_tensor_numel(t) < 100 ? (int)frt_tensor_numel(t) : 100;
    return t->data;
}

/* Same logits bits, or the rel err printed. */
static int same_logits(frt_model *a, frt_model *b, const int32_t *ids, int n, const char *what)
{
    const size_t V = (size_t)a->cfg.vocab_size;
    float *la = xmalloc(V * 4), *lb = xmalloc(V * 4);
    CHECK_OK(frt_test_prefill_logits(a, ids, n, la));
    CHECK_OK(frt_test_prefill_logits(b, ids, n, lb));
    int same = !memcmp(la, lb, V * 4);
    printf("    %s: %s (rel err %.3e)\n", what, same ? "same bits" : "differ", frt_test_rel_err(lb, la, V));
    free(la), free(lb);
    return same;
}

/* The file tests on checkpoint ck (with scales) of source src (kv_only:
 * the same weights). */
static void check_against_files(frt_model *m, const char *ck, const char *src, int kv_only, int bf16,
                                const int32_t *ids, int n)
{
    char same[300], other[300];
    snprintf(same, sizeof same, "%s/same.safetensors", tmp);
    snprintf(other, sizeof other, "%s/other.safetensors", tmp);
    write_file(m, bf16, 1.0f, 0, same);
    write_file(m, bf16, 2.0f, 0, other);
    frt_model *mf = load(ck, FRT_KV_FP8, same, 0), *sf = load(src, FRT_KV_FP8, same, 0);
    frt_model *mo = load(ck, FRT_KV_FP8, other, 0), *s1 = load(src, FRT_KV_FP8, NULL, 0);
    if (mf && sf && mo && s1) {
        CHECK(same_logits(m, mf, ids, n, "vs the same checkpoint + a file of the same scales"));
        if (kv_only) {
            CHECK(same_logits(m, sf, ids, n, "vs the source checkpoint + a file of the same scales"));
            CHECK(!same_logits(m, s1, ids, n, "vs the source checkpoint at scale 1.0 (must differ)"));
            CHECK(frt_model_fingerprint(m) == frt_model_fingerprint(sf));
            CHECK_OK(capsule_moves(m, sf, ids, n));
            CHECK_OK(capsule_moves(sf, m, ids, n));
        }
        CHECK(frt_model_fingerprint(m) == frt_model_fingerprint(mf));
        CHECK_OK(capsule_moves(m, mf, ids, n));
        CHECK_OK(capsule_moves(mf, m, ids, n));
        CHECK_MSG(table_differs(mo, bf16, 2.0f, 0) == 0, "a scales file does not win over the checkpoint's scales");
        CHECK_STATUS(capsule_moves(m, mo, ids, n), FRT_ERR_MISMATCH);
        CHECK_STATUS(capsule_moves(mo, m, ids, n), FRT_ERR_MISMATCH);
        printf("    fingerprint == with a file of the same scales (capsules move both ways); a file of other "
               "scales wins (table) and its capsules are refused both ways\n");
    }
    frt_model_free(mf), frt_model_free(sf), frt_model_free(mo), frt_model_free(s1);
    unlink(same), unlink(other);
}

/* Checkpoint scales of src in layout (dtype dt, strategy tensor or
 * attn_head): the table, the files, the default KV cache. */
static void test_ckpt(const char *src, const char *layout, const char *dt, const char *strategy, const char *name)
{
    char ck[300];
    const int kv_only = !strcmp(layout, "none");
    printf("%s: %s --kv-scales %s --kv-strategy %s\n", src, layout, dt, strategy);
    if (make_ckpt(src, layout, dt, strategy, "new", name, ck, sizeof ck)) return;
    const int bf16 = !strcmp(dt, "bf16");
    frt_safetensors *g = NULL;
    int n = 0;
    const int32_t *ids = prompt(src, &g, &n);
    frt_model *m = load(ck, FRT_KV_FP8, NULL, 0);
    if (m && ids) {
        CHECK(m->cfg.quant.kv == (strcmp(strategy, "tensor") ? FRT_QUANT_KV_HEAD : FRT_QUANT_KV_TENSOR) &&
              m->kv_scales_hash != 0);
        int bad = table_differs(m, bf16, 1.0f, 0);
        CHECK_MSG(bad == 0, "%d table values are not the checkpoint's", bad);
        printf("    scales table == the checkpoint's k_scale / v_scale on every head (%s): %s\n", strategy,
               bad ? "NO" : "yes");
        check_against_files(m, ck, src, kv_only, bf16, ids, n);
        frt_model *d = load(ck, FRT_KV_DEFAULT, NULL, 0), *s = load(src, FRT_KV_DEFAULT, NULL, 0);
        if (d && s && kv_only) {
            CHECK(d->kv_scales == NULL && d->kv_scales_hash == 0);
            CHECK(same_logits(d, s, ids, n, "default KV cache vs the source's (the scales unused)"));
        }
        frt_model_free(d), frt_model_free(s);
    }
    frt_model_free(m);
    frt_safetensors_close(g);
}

/* ---- the older names -------------------------------------------------------- */

/* What rewrite_ckpt does with tensor t of a checkpoint (NULL: after the
 * last one): adds what it keeps to w, with data that outlives the write. */
typedef void (*tensor_fn)(frt_st_writer *w, const frt_tensor *t, void *ctx);

/* ck copied into out/ with its model.safetensors passed through fn. */
static void rewrite_ckpt(const char *ck, const char *out, tensor_fn fn, void *ctx)
{
    char path[400], cmd[1000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", out, ck, out);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/model.safetensors", ck);
    frt_safetensors *st = NULL;
    frt_st_writer *w = NULL;
    CHECK_OK(frt_safetensors_open(path, &st));
    CHECK_OK(frt_st_writer_create(&w));
    if (st && w) {
        for (int i = 0; i < frt_safetensors_count(st); i++) fn(w, frt_safetensors_at(st, i), ctx);
        fn(w, NULL, ctx);
        snprintf(path, sizeof path, "%s/model.safetensors", out);
        CHECK_OK(frt_st_writer_write(w, path));
    }
    frt_st_writer_destroy(w);
    frt_safetensors_close(st);
}

/* tensor_fn: the older scale names renamed to k_scale / v_scale (a
 * kv_scale to both), every value and shape kept. */
static void to_new_names(frt_st_writer *w, const frt_tensor *t, void *ctx)
{
    static const char *const older[][3] = {
        {".self_attn.k_proj.output_scale", ".self_attn.k_scale", NULL},
        {".self_attn.v_proj.output_scale", ".self_attn.v_scale", NULL},
        {".self_attn.kv_scale", ".self_attn.k_scale", ".self_attn.v_scale"},
    };
    (void)ctx;
    if (!t) return;
    const size_t n = strlen(t->name);
    for (int i = 0; i < 3; i++) {
        const size_t k = strlen(older[i][0]);
        if (n < k || strcmp(t->name + n - k, older[i][0])) continue;
        for (int j = 1; j < 3 && older[i][j]; j++) {
            char name[256];
            snprintf(name, sizeof name, "%.*s%s", (int)(n - k), t->name, older[i][j]);
            CHECK_OK(frt_st_writer_add(w, name, t->dtype, t->ndim, t->shape, t->data));
        }
        return;
    }
    CHECK_OK(frt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data));
}

/* dir's checkpoint holds `present` and not `absent`. */
static int holds(const char *dir, const char *present, const char *absent)
{
    char path[400];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    frt_safetensors *st = NULL;
    CHECK_OK(frt_safetensors_open(path, &st));
    int ok = st && frt_safetensors_find(st, present) && !frt_safetensors_find(st, absent);
    frt_safetensors_close(st);
    return ok;
}

/* Older scale names (--kv-names output_scale | kv_scale, whose layer 0 K
 * tensor is l0; dense kv-only, strategy tensor): the table holds the
 * values (kv_scale: the K value on V too); the logits bits, fingerprint
 * and capsules equal those of the same values under k_scale / v_scale (the
 * checkpoint renamed) and of the source checkpoint with a file of them;
 * the default KV cache reads none. */
static void test_older(const char *names, const char *l0)
{
    char ck[300], renamed[300], file[300];
    const int one = !strcmp(names, "kv_scale");
    printf("%s: none --kv-scales f32 --kv-names %s\n", DENSE, names);
    if (make_ckpt(DENSE, "none", "f32", "tensor", names, names, ck, sizeof ck)) return;
    snprintf(renamed, sizeof renamed, "%s/%s-renamed", tmp, names);
    snprintf(file, sizeof file, "%s/%s.safetensors", tmp, names);
    rewrite_ckpt(ck, renamed, to_new_names, NULL);
    CHECK_MSG(holds(renamed, "model.layers.0.self_attn.v_scale", l0), "%s: the scales were not renamed", names);
    frt_safetensors *g = NULL;
    int n = 0;
    const int32_t *ids = prompt(DENSE, &g, &n);
    frt_model *m = load(ck, FRT_KV_FP8, NULL, 0), *mn = load(renamed, FRT_KV_FP8, NULL, 0), *sf = NULL;
    frt_model *d = load(ck, FRT_KV_DEFAULT, NULL, 0);
    if (m) {
        int bad = table_differs(m, 0, 1.0f, one);
        CHECK_MSG(bad == 0, "%d table values are not the checkpoint's", bad);
        printf("    scales table == the checkpoint's %s on every head%s: %s\n", names, one ? " (V = K)" : "",
               bad ? "NO" : "yes");
        write_file(m, 0, 1.0f, one, file);
        sf = load(DENSE, FRT_KV_FP8, file, 0);
    }
    if (m && mn && sf && ids) {
        CHECK(same_logits(m, mn, ids, n, "vs the same scales as k_scale / v_scale"));
        CHECK(same_logits(m, sf, ids, n, "vs the source checkpoint + a file of the same scales"));
        CHECK(frt_model_fingerprint(m) == frt_model_fingerprint(mn));
        CHECK(frt_model_fingerprint(m) == frt_model_fingerprint(sf));
        CHECK_OK(capsule_moves(m, mn, ids, n));
        CHECK_OK(capsule_moves(mn, m, ids, n));
        CHECK_OK(capsule_moves(sf, m, ids, n));
        printf("    fingerprint == both (capsules move)\n");
    }
    CHECK(d && d->kv_scales == NULL && d->kv_scales_hash == 0);
    frt_model_free(m), frt_model_free(mn), frt_model_free(sf), frt_model_free(d);
    frt_safetensors_close(g);
    unlink(file);
}

/* ---- bad checkpoint scales ------------------------------------------------- */

#define BAD_MAX_N 64

enum { BAD_REPLACE, BAD_DROP, BAD_ADD };

typedef struct bad_scale {
    const char *what, *tensor; /* a case; the tensor changed (named by the message) */
    int op;                    /* BAD_REPLACE, BAD_DROP (left out), BAD_ADD (written after the others) */
    frt_dtype dtype;           /* the dtype written */
    int ndim, n;               /* its shape: ndim 0 or 1, n elements (<= BAD_MAX_N) */
    float value;               /* the value written at element `at` (0.5 elsewhere) */
    int at;
    int expect;                /* the status of an FP8 load */
    const char *other;         /* NULL, or another tensor the message must name */
} bad_scale;

/* A bad case and the values it writes. */
typedef struct bad_ctx {
    const bad_scale *c;
    float f[BAD_MAX_N];
    int32_t i32[BAD_MAX_N];
} bad_ctx;

/* tensor_fn of a bad case: every tensor kept but c->tensor, which is
 * replaced, dropped, or added at the end. */
static void bad_tensor(frt_st_writer *w, const frt_tensor *t, void *ctx)
{
    const bad_ctx *b = ctx;
    const bad_scale *c = b->c;
    const int64_t shape[1] = {c->n};
    if (t && strcmp(t->name, c->tensor))
        CHECK_OK(frt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data));
    else if (t ? c->op == BAD_REPLACE : c->op == BAD_ADD)
        CHECK_OK(frt_st_writer_add(w, c->tensor, c->dtype, c->ndim, shape,
                                   c->dtype == FRT_DT_I32 ? (const void *)b->i32 : (const void *)b->f));
}

/* ck's model.safetensors rewritten into bad/ with case c applied. */
static void write_bad(const char *ck, const char *bad, const bad_scale *c)
{
    bad_ctx b = {.c = c};
    for (int j = 0; j < BAD_MAX_N; j++) b.f[j] = j == c->at ? c->value : 0.5f, b.i32[j] = 1;
    rewrite_ckpt(ck, bad, bad_tensor, &b);
}

/* Each case of cases [n] applied to checkpoint ck: refused with the tensor
 * named (and the bad checkpoint still loads with the default KV cache or a
 * scales file), or accepted with the written values on layer 0's K. */
static void run_bad(const char *ck, const bad_scale *cases, int n, const char *file)
{
    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad", tmp);
    for (int i = 0; i < n; i++) {
        const bad_scale *c = &cases[i];
        write_bad(ck, bad, c);
        frt_model *m = load(bad, FRT_KV_FP8, NULL, c->expect);
        if (c->expect) {
            CHECK_MSG(strstr(frt_last_error(), c->tensor) != NULL, "%s: '%s' does not name '%s'", c->what,
                      frt_last_error(), c->tensor);
            CHECK_MSG(!c->other || strstr(frt_last_error(), c->other), "%s: '%s' does not name '%s'", c->what,
                      frt_last_error(), c->other);
            printf("  refused (%s): %s\n", c->what, frt_last_error());
            frt_model *d = load(bad, FRT_KV_DEFAULT, NULL, 0), *f = load(bad, FRT_KV_FP8, file, 0);
            CHECK_MSG(d && f, "%s: the default KV cache or a scales file does not load it", c->what);
            frt_model_free(d), frt_model_free(f);
        } else if (m) {
            const int H = m->cfg.n_kv_heads;
            float t[BAD_MAX_N];
            frt_model_kv_scales_of(m, 0, t, H);
            int ok = 1;
            for (int j = 0; j < H; j++) ok &= t[j] == (c->n == 1 || j == c->at ? c->value : 0.5f);
            CHECK_MSG(ok, "%s: layer 0's K scales are not the written ones", c->what);
            printf("  accepted (%s): layer 0's K scales %g .. %g\n", c->what, (double)t[0], (double)t[H - 1]);
        }
        frt_model_free(m);
    }
}

/* Bad scales under the older names (checkpoints made with --kv-names
 * output_scale and kv_scale). */
static void test_bad_older(int H, const char *file)
{
    char ck[300];
    const char *k0 = "model.layers.0.self_attn.k_scale", *k1 = "model.layers.1.self_attn.k_scale";
    const char *o0 = "model.layers.0.self_attn.k_proj.output_scale";
    const char *o1 = "model.layers.1.self_attn.v_proj.output_scale";
    const char *o2 = "model.layers.2.self_attn.v_proj.output_scale";
    const char *kv0 = "model.layers.0.self_attn.kv_scale", *kv1 = "model.layers.1.self_attn.kv_scale";
    const bad_scale output_scale[] = {
        {"k_scale beside k_proj.output_scale", k0, BAD_ADD, FRT_DT_F32, 0, 1, 0.5f, 0, FRT_ERR_FORMAT, o0},
        {"output_scale: shape [n_kv_heads]", o0, BAD_REPLACE, FRT_DT_F32, 1, H, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"output_scale: a NaN", o2, BAD_REPLACE, FRT_DT_F32, 1, 1, NAN, 0, FRT_ERR_FORMAT, NULL},
        {"output_scale: zero", o0, BAD_REPLACE, FRT_DT_F32, 0, 1, 0.0f, 0, FRT_ERR_FORMAT, NULL},
        {"output_scale: a missing v_proj.output_scale", o2, BAD_DROP, FRT_DT_F32, 0, 1, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"output_scale: shape [] (accepted)", o0, BAD_REPLACE, FRT_DT_F32, 0, 1, 0.25f, 0, 0, NULL},
    };
    const bad_scale kv_scale[] = {
        {"a kv_scale and a k_scale in one layer", k1, BAD_ADD, FRT_DT_F32, 0, 1, 0.5f, 0, FRT_ERR_FORMAT, kv1},
        {"a kv_scale and a v_proj.output_scale in one layer", o1, BAD_ADD, FRT_DT_F32, 0, 1, 0.5f, 0, FRT_ERR_FORMAT,
         kv1},
        {"kv_scale: shape [n_kv_heads]", kv0, BAD_REPLACE, FRT_DT_F32, 1, H, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"kv_scale: a NaN", kv1, BAD_REPLACE, FRT_DT_F32, 0, 1, NAN, 0, FRT_ERR_FORMAT, NULL},
        {"kv_scale: zero", kv1, BAD_REPLACE, FRT_DT_F32, 0, 1, 0.0f, 0, FRT_ERR_FORMAT, NULL},
        {"kv_scale: shape [1] (accepted)", kv0, BAD_REPLACE, FRT_DT_F32, 1, 1, 0.25f, 0, 0, NULL},
    };
    if (make_ckpt(DENSE, "none", "f32", "tensor", "output_scale", "bad-os-src", ck, sizeof ck) == 0)
        run_bad(ck, output_scale, (int)(sizeof output_scale / sizeof output_scale[0]), file);
    if (make_ckpt(DENSE, "none", "f32", "tensor", "kv_scale", "bad-kvs-src", ck, sizeof ck) == 0)
        run_bad(ck, kv_scale, (int)(sizeof kv_scale / sizeof kv_scale[0]), file);
    /* the same output_scale checkpoint declaring strategy attn_head */
    char cmd[800];
    if (make_ckpt(DENSE, "none", "f32", "tensor", "output_scale", "os-head", ck, sizeof ck)) return;
    snprintf(cmd, sizeof cmd,
             "sed -i 's/\"strategy\": \"tensor\"/\"strategy\": \"attn_head\"/' '%s/config.json' && "
             "grep -q '\"attn_head\"' '%s/config.json'",
             ck, ck);
    CHECK(system(cmd) == 0);
    frt_model *m = load(ck, FRT_KV_FP8, NULL, FRT_ERR_FORMAT);
    CHECK_MSG(strstr(frt_last_error(), o0) != NULL, "'%s' does not name '%s'", frt_last_error(), o0);
    printf("  refused (an older name under strategy attn_head): %s\n", frt_last_error());
    frt_model_free(m);
}

static void test_bad(void)
{
    char ck[300], file[300];
    snprintf(file, sizeof file, "%s/file.safetensors", tmp);
    const char *v1 = "model.layers.1.self_attn.v_scale", *k0 = "model.layers.0.self_attn.k_scale";
    const char *v2 = "model.layers.2.self_attn.v_scale";
    frt_model *ref = load(DENSE, FRT_KV_FP8, NULL, 0);
    if (!ref) return;
    write_file(ref, 0, 1.0f, 0, file);
    const int H = ref->cfg.n_kv_heads;
    CHECK(H >= 2 && H < BAD_MAX_N);
    const bad_scale tensor[] = {
        {"a missing v_scale", v1, BAD_DROP, FRT_DT_F32, 0, 1, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"shape [2]", k0, BAD_REPLACE, FRT_DT_F32, 1, 2, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"a NaN", v2, BAD_REPLACE, FRT_DT_F32, 0, 1, NAN, 0, FRT_ERR_FORMAT, NULL},
        {"zero", v2, BAD_REPLACE, FRT_DT_F32, 0, 1, 0.0f, 0, FRT_ERR_FORMAT, NULL},
        {"a negative scale", v2, BAD_REPLACE, FRT_DT_F32, 0, 1, -0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"an infinite scale", v2, BAD_REPLACE, FRT_DT_F32, 0, 1, INFINITY, 0, FRT_ERR_FORMAT, NULL},
        {"an I32 scale", k0, BAD_REPLACE, FRT_DT_I32, 0, 1, 0.0f, 0, FRT_ERR_FORMAT, NULL},
        {"shape [1] (accepted)", k0, BAD_REPLACE, FRT_DT_F32, 1, 1, 0.5f, 0, 0, NULL},
    };
    const bad_scale per_head[] = {
        {"attn_head: shape [] (one scale)", k0, BAD_REPLACE, FRT_DT_F32, 0, 1, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"attn_head: shape [n_kv_heads + 1]", k0, BAD_REPLACE, FRT_DT_F32, 1, H + 1, 0.5f, 0, FRT_ERR_FORMAT, NULL},
        {"attn_head: a NaN on head 1", v2, BAD_REPLACE, FRT_DT_F32, 1, H, NAN, 1, FRT_ERR_FORMAT, NULL},
        {"attn_head: zero on the last head", v1, BAD_REPLACE, FRT_DT_F32, 1, H, 0.0f, H - 1, FRT_ERR_FORMAT, NULL},
        {"attn_head: shape [n_kv_heads] (accepted)", k0, BAD_REPLACE, FRT_DT_F32, 1, H, 0.25f, 1, 0, NULL},
    };
    if (make_ckpt(DENSE, "none", "f32", "tensor", "new", "bad-src", ck, sizeof ck) == 0)
        run_bad(ck, tensor, (int)(sizeof tensor / sizeof tensor[0]), file);
    if (make_ckpt(DENSE, "none", "f32", "attn_head", "new", "bad-head-src", ck, sizeof ck) == 0)
        run_bad(ck, per_head, (int)(sizeof per_head / sizeof per_head[0]), file);
    test_bad_older(H, file);
    frt_model_free(ref);
    unlink(file);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/frt-test-kv-ckpt-scales-XXXXXX");
    if (!mkdtemp(tmp)) {
        CHECK_MSG(0, "mkdtemp %s failed", tmp);
        return frt_test_report();
    }
    test_ckpt(DENSE, "none", "f32", "tensor", "dense-kv");
    test_ckpt(DENSE, "none", "f32", "attn_head", "dense-kv-head");
    test_ckpt(DENSE, "ct-channel", "f32", "tensor", "dense-w8-kv");
    test_ckpt(COMPOSITE, "none", "bf16", "tensor", "composite-kv");
    test_ckpt(COMPOSITE, "none", "bf16", "attn_head", "composite-kv-head");
    test_older("output_scale", "model.layers.0.self_attn.k_proj.output_scale");
    test_older("kv_scale", "model.layers.0.self_attn.kv_scale");
    test_bad();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return frt_test_report();
}
