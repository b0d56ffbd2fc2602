/*
 * test_cartridge_inject.c - KV injection (frt_model_inject_kv,
 * frt_cartridge_inject) into the "tiny-dense" random-weight model (a
 * 4-layer llama, tools/gen_model.h, built in memory), cpu backend, C = 64.
 *
 *  1. exactness: export the KV of frt's own prefill of a document D (70
 *     tokens: not a multiple of C), save it as an frt cartridge, load it,
 *     overwrite the live state with another prompt, inject, prefill a
 *     prompt P, greedy: the first logits and 24 greedy tokens are bit for
 *     bit those of the cold path (prefill D, prefill P, greedy), for D
 *     aligned (64) and not (70). This also shows that P's RoPE positions
 *     continue from T.
 *  2. byte injection: random f32 and bf16 prefixes land in KV rows 0..T-1
 *     exactly (bf16 widened exactly), position T, no logits.
 *  3. refusals leave the live state untouched (position, logits, next greedy
 *     token): a shape mismatch (a .pt-like cartridge of another shape),
 *     another model's binding, tokens > max_seq, an id outside the
 *     vocabulary, the qwen35 hybrid ("not supported");
 *  4. isolation: two cartridges injected one after the other never see each
 *     other's KV (a shorter one after a longer one included);
 *  5. the hybrid refuses an upload too (the resident form on both
 *     backends: test_cartridge_resident.c).
 *
 * test_cartridge_inject --write-capsule MODEL_DIR ID,ID,.. PATH: loads
 * MODEL_DIR (cpu, C = 64, max_seq 256), prefills the ids and writes a
 * capsule file of that state to PATH (tests/sh/cartridge_cli.sh exports it
 * with frt cartridge export).
 */
#include "frt/capsule.h"
#include "frt/cartridge.h"
#include "frt/debug.h"
#include "frt/checkpoint.h"
#include "frt_test.h"
#include "gen_model.h"

#include <unistd.h>

enum { C = 64, MAXSEQ = 256, G = 24 };

static frt_model *build(const char *shape, uint64_t seed, frt_checkpoint **ck)
{
    static frt_model_config cfg[4];
    static int n_cfg;
    frt_model_config *c = &cfg[n_cfg++ % 4];
    frt_model *m = NULL;
    CHECK_OK(frt_gen_model_build(shape, seed, c, ck));
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = C;
    p.max_seq = MAXSEQ;
    p.n_threads = 2;
    CHECK_OK(frt_model_load_checkpoint(*ck, c, NULL, &p, &m));
    return m;
}

static int V;

static void random_ids(int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
}

static void greedy(frt_model *m, int32_t *out, int n)
{
    CHECK_OK(frt_model_sample(m, NULL, &out[0]));
    for (int i = 1; i < n; i++) CHECK_OK(frt_model_decode(m, NULL, &out[i]));
}

static void test_exact(frt_model *m, int T, const char *dir)
{
    int32_t doc[200], prompt[20], other[90], t_cold[G], t_inj[G];
    random_ids(doc, T);
    random_ids(prompt, 20);
    random_ids(other, 90);
    float *l_cold = xmalloc((size_t)V * sizeof(float)), *l_inj = xmalloc((size_t)V * sizeof(float));
    /* cold: the same call schedule without the cartridge */
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, doc, T));
    frt_cartridge *c = NULL;
    CHECK_OK(frt_cartridge_from_model(m, &c));
    CHECK_OK(frt_model_prefill(m, prompt, 20));
    CHECK_OK(frt_model_logits(m, l_cold));
    greedy(m, t_cold, G);
    const char *labels[] = {"test"};
    frt_cartridge_meta meta = {.id = "doc", .model_id = "tiny-dense", .training_steps = -1, .labels = labels,
                               .n_labels = 1};
    CHECK_OK(frt_cartridge_set_meta(c, &meta));
    CHECK_OK(frt_cartridge_save(c, dir));
    frt_cartridge_free(c);
    c = NULL;
    CHECK_OK(frt_cartridge_open(dir, &c));
    /* something else in the live state first */
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, other, 90));
    CHECK_OK(frt_cartridge_inject(m, c));
    CHECK(frt_model_position(m) == T);
    int32_t journal[200];
    CHECK(frt_model_tokens(m, journal, 200) == T && !memcmp(journal, doc, (size_t)T * sizeof *doc));
    CHECK_OK(frt_model_prefill(m, prompt, 20));
    CHECK_OK(frt_model_logits(m, l_inj));
    greedy(m, t_inj, G);
    CHECK_MSG(!memcmp(l_cold, l_inj, (size_t)V * sizeof(float)), "T=%d: first logits differ (rel %.3e)", T,
              frt_test_rel_err(l_inj, l_cold, (size_t)V));
    CHECK_MSG(!memcmp(t_cold, t_inj, sizeof t_cold), "T=%d: greedy tokens differ", T);
    int distinct = 0;
    for (int i = 0; i < G; i++) distinct += i == 0 || t_cold[i] != t_cold[i - 1];
    CHECK(distinct > 4); /* the comparison is not between two constant streams */
    frt_cartridge_free(c);
    free(l_cold);
    free(l_inj);
}

/* A prefix of random data [T, H, D] per layer in dt. */
typedef struct prefix_data {
    float *f32;             /* [L][2][T * H * D] */
    void *raw;              /* the same in dt */
    const void **k, **v;
    frt_kv_prefix p;
} prefix_data;

static void make_prefix(prefix_data *d, const frt_model_info *info, int kvh, int hd, int T, frt_dtype dt)
{
    int L = info->n_layers;
    size_t per = (size_t)T * (size_t)kvh * (size_t)hd;
    d->f32 = xmalloc(per * 2 * (size_t)L * sizeof(float));
    frt_test_fill(d->f32, per * 2 * (size_t)L, -3, 3);
    d->raw = xmalloc(per * 2 * (size_t)L * frt_dtype_size(dt));
    CHECK_OK(frt_f32_convert(d->raw, dt, d->f32, per * 2 * (size_t)L));
    d->k = xmalloc((size_t)L * sizeof *d->k);
    d->v = xmalloc((size_t)L * sizeof *d->v);
    for (int l = 0; l < L; l++) {
        d->k[l] = (char *)d->raw + (2 * (size_t)l) * per * frt_dtype_size(dt);
        d->v[l] = (char *)d->raw + (2 * (size_t)l + 1) * per * frt_dtype_size(dt);
    }
    d->p = (frt_kv_prefix){.n_layers = L, .n_kv_heads = kvh, .head_dim = hd, .tokens = T, .dtype = dt,
                           .k = d->k, .v = d->v};
}

static void free_prefix(prefix_data *d)
{
    free(d->f32);
    free(d->raw);
    free(d->k);
    free(d->v);
}

static void test_bytes(frt_model *m, const frt_model_info *info, int kvh, int hd, frt_dtype dt)
{
    prefix_data d;
    make_prefix(&d, info, kvh, hd, 37, dt);
    CHECK_OK(frt_model_inject_kv(m, &d.p));
    CHECK(frt_model_position(m) == 37 && frt_model_pending(m) == -1);
    float *lg = xmalloc((size_t)V * sizeof(float));
    CHECK_STATUS(frt_model_logits(m, lg), FRT_ERR_STATE);
    frt_cartridge *c = NULL;
    CHECK_OK(frt_cartridge_from_model(m, &c));
    size_t per = 37 * (size_t)kvh * (size_t)hd;
    for (int l = 0; c && l < info->n_layers; l++) {
        frt_tensor k, v;
        CHECK_OK(frt_cartridge_layer(c, l, &k, &v));
        /* the raw values as the prefix's dtype holds them, widened (exact) */
        float *want = xmalloc(per * sizeof(float));
        frt_tensor src = {.dtype = dt, .ndim = 1, .shape = {(int64_t)per}, .data = d.k[l], .nbytes = per * frt_dtype_size(dt)};
        CHECK_OK(frt_tensor_to_f32(&src, want));
        CHECK(k.dtype == FRT_DT_F32 && !memcmp(k.data, want, per * sizeof(float)));
        src.data = d.v[l];
        CHECK_OK(frt_tensor_to_f32(&src, want));
        CHECK(!memcmp(v.data, want, per * sizeof(float)));
        free(want);
    }
    frt_cartridge_free(c);
    int32_t ids[3] = {1, 2, 3};
    CHECK_OK(frt_model_prefill(m, ids, 3)); /* the prompt follows */
    CHECK(frt_model_position(m) == 40);
    free(lg);
    free_prefix(&d);
}

/* The live state's observable facts: position, logits, next greedy token. */
typedef struct snap {
    int pos;
    float *logits;
} snap;

static snap take(frt_model *m)
{
    snap s = {frt_model_position(m), xmalloc((size_t)V * sizeof(float))};
    CHECK_OK(frt_model_logits(m, s.logits));
    return s;
}

static void same_as(frt_model *m, snap *s, const char *what)
{
    float *lg = xmalloc((size_t)V * sizeof(float));
    CHECK_MSG(frt_model_position(m) == s->pos, "%s: position changed", what);
    CHECK_OK(frt_model_logits(m, lg));
    CHECK_MSG(!memcmp(lg, s->logits, (size_t)V * sizeof(float)), "%s: logits changed", what);
    free(lg);
}

static void test_refusals(frt_model *m, const frt_model_info *info, int kvh, int hd)
{
    int32_t ids[50];
    random_ids(ids, 50);
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, ids, 50));
    snap s = take(m);
    prefix_data d;
    make_prefix(&d, info, kvh, hd, 10, FRT_DT_F32);

    d.p.head_dim = hd / 2;
    CHECK_STATUS(frt_model_inject_kv(m, &d.p), FRT_ERR_MISMATCH);
    same_as(m, &s, "head_dim mismatch");
    d.p.head_dim = hd;
    d.p.n_layers = info->n_layers - 1;
    CHECK_STATUS(frt_model_inject_kv(m, &d.p), FRT_ERR_MISMATCH);
    same_as(m, &s, "layer mismatch");
    d.p.n_layers = info->n_layers;
    d.p.tokens = MAXSEQ + 1;
    CHECK_STATUS(frt_model_inject_kv(m, &d.p), FRT_ERR_OUT_OF_RANGE);
    same_as(m, &s, "too many tokens");
    d.p.tokens = 10;
    int32_t bad_ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, V};
    d.p.ids = bad_ids;
    CHECK_STATUS(frt_model_inject_kv(m, &d.p), FRT_ERR_OUT_OF_RANGE);
    same_as(m, &s, "id outside the vocabulary");
    d.p.ids = NULL;
    d.p.dtype = FRT_DT_I32;
    CHECK_STATUS(frt_model_inject_kv(m, &d.p), FRT_ERR_UNSUPPORTED);
    same_as(m, &s, "integer dtype");
    free_prefix(&d);

    /* a .pt-like cartridge of another shape */
    char dir[512], cmd[1200], path[600];
    snprintf(dir, sizeof dir, "%s/test_cartridge_inject.%ld", FRT_BINARY_DIR, (long)getpid());
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/ref/make_pt_like.py %s", FRT_SOURCE_DIR, dir);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/recipe_f32.pt", dir);
    frt_cartridge *c = NULL;
    CHECK_OK(frt_cartridge_open(path, &c));
    CHECK_STATUS(frt_cartridge_inject(m, c), FRT_ERR_MISMATCH);
    CHECK(strstr(frt_last_error(), "2 layers x 2 KV heads x head_dim 4") != NULL);
    same_as(m, &s, ".pt of another shape");
    frt_cartridge_free(c);

    /* bound to another model */
    CHECK_OK(frt_cartridge_from_model(m, &c));
    frt_cartridge_meta meta = {.id = "other", .model_fingerprint = frt_cartridge_model_fingerprint(m) ^ 1,
                               .training_steps = -1, .n_labels = -1};
    CHECK_OK(frt_cartridge_set_meta(c, &meta));
    CHECK_STATUS(frt_cartridge_inject(m, c), FRT_ERR_MISMATCH);
    CHECK(strstr(frt_last_error(), "made for model") != NULL);
    same_as(m, &s, "another model's cartridge");
    frt_cartridge_free(c);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(s.logits);
}

/* Injects c, prefills the prompt, greedy tokens into out. */
static void run_with(frt_model *m, const frt_cartridge *c, const int32_t *prompt, int n, int32_t *out)
{
    CHECK_OK(frt_cartridge_inject(m, c));
    CHECK_OK(frt_model_prefill(m, prompt, n));
    greedy(m, out, G);
}

/* Two cartridges one after the other never see each other's KV: B (30
 * tokens) after A (50 tokens, whose rows 30..49 stay in the buffers) gives
 * the tokens of B after a reset, and A again gives A's first tokens. */
static void test_isolation(frt_model *m)
{
    int32_t a_ids[50], b_ids[30], prompt[9], ta[G], tb[G], ta2[G], tb_fresh[G];
    random_ids(a_ids, 50);
    random_ids(b_ids, 30);
    random_ids(prompt, 9);
    frt_cartridge *a = NULL, *b = NULL;
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, a_ids, 50));
    CHECK_OK(frt_cartridge_from_model(m, &a));
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, b_ids, 30));
    CHECK_OK(frt_cartridge_from_model(m, &b));
    if (!a || !b) goto out;
    CHECK_OK(frt_model_reset(m));
    run_with(m, b, prompt, 9, tb_fresh);
    run_with(m, a, prompt, 9, ta);
    run_with(m, b, prompt, 9, tb);
    run_with(m, a, prompt, 9, ta2);
    CHECK_MSG(!memcmp(tb, tb_fresh, sizeof tb), "cartridge B after A differs from B alone");
    CHECK_MSG(!memcmp(ta, ta2, sizeof ta), "cartridge A after B differs from A before");
    CHECK(memcmp(ta, tb, sizeof ta) != 0);
out:
    frt_cartridge_free(a);
    frt_cartridge_free(b);
}

static void test_hybrid(void)
{
    frt_checkpoint *ck = NULL;
    frt_model *m = build("tiny", 1, &ck);
    if (!m) return;
    frt_model_info info;
    frt_model_info_get(m, &info);
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_OK(frt_model_prefill(m, ids, 8));
    float one = 1.0f;
    const void *ptr[64];
    for (int i = 0; i < 64; i++) ptr[i] = &one;
    frt_kv_prefix p = {.n_layers = info.n_layers, .n_kv_heads = 1, .head_dim = 1, .tokens = 1, .dtype = FRT_DT_F32,
                       .k = ptr, .v = ptr};
    CHECK_STATUS(frt_model_inject_kv(m, &p), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "not supported") != NULL);
    frt_kv_resident *r = NULL;
    CHECK_STATUS(frt_model_kv_upload(m, &p, FRT_SPACE_DEVICE, &r), FRT_ERR_UNSUPPORTED);
    CHECK(r == NULL);
    CHECK(frt_model_position(m) == 8);
    frt_cartridge *c = NULL;
    CHECK_STATUS(frt_cartridge_from_model(m, &c), FRT_ERR_UNSUPPORTED);
    frt_model_free(m);
    frt_checkpoint_close(ck);
}

static int write_capsule(const char *dir, const char *list, const char *path)
{
    int32_t ids[MAXSEQ];
    int n = 0;
    for (const char *p = list; *p && n < MAXSEQ; n++) {
        ids[n] = (int32_t)strtol(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    frt_model_params mp = frt_model_default_params();
    mp.prefill_chunk = C;
    mp.max_seq = MAXSEQ;
    frt_model *m = NULL;
    frt_capsule *cap = NULL;
    int rc = frt_model_load(dir, &mp, &m);
    if (rc == 0) rc = frt_model_prefill(m, ids, n);
    if (rc == 0) rc = frt_capsule_snapshot(m, FRT_TIER_DISK, path, NULL, 0, &cap);
    if (rc < 0) fprintf(stderr, "write-capsule: %s\n", frt_last_error());
    frt_capsule_free(cap);
    frt_model_free(m);
    return rc < 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--write-capsule")) return write_capsule(argv[2], argv[3], argv[4]);
    frt_test_seed(25);
    frt_checkpoint *ck = NULL;
    frt_model *m = build("tiny-dense", 1, &ck);
    if (!m) return frt_test_report();
    frt_model_info info;
    frt_model_info_get(m, &info);
    V = info.vocab_size;
    frt_model_config cfg;
    CHECK_OK(frt_gen_model_config("tiny-dense", &cfg));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/test_cartridge_inject.%ld.cart", FRT_BINARY_DIR, (long)getpid());
    test_exact(m, 70, dir);
    test_exact(m, 64, dir);
    test_exact(m, 1, dir);
    test_bytes(m, &info, cfg.n_kv_heads, cfg.head_dim, FRT_DT_F32);
    test_bytes(m, &info, cfg.n_kv_heads, cfg.head_dim, FRT_DT_BF16);
    test_refusals(m, &info, cfg.n_kv_heads, cfg.head_dim);
    test_isolation(m);
    test_hybrid();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    frt_model_free(m);
    frt_checkpoint_close(ck);
    return frt_test_report();
}
