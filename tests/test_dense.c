/*
 * test_dense.c - the dense architecture (src/model/arch/dense/: llama,
 * mistral, qwen2, qwen3) on the cpu backend.
 *
 *  - golden models (tests/data/golden_dense/<name>/, made by
 *    scripts/ref/make_golden_dense.py with transformers 5.17, fp32 CPU):
 *    last-position logits of three prompts (7, 100, 700 tokens) within 1e-4
 *    norm-wise; per-layer hidden states, the last layer's raw output and its
 *    final norm within 1e-4; the RoPE table (default / llama3) against the
 *    model's inv_freq buffer; 32 greedy tokens identical while the
 *    reference's top-2 margin exceeds twice the measured max |logit error|;
 *  - schedules: one prefill, pieces at multiples of C (same bits), token by
 *    token and decode steps (same greedy tokens, logits within 1e-4);
 *  - bad input: a missing weight and a mis-shaped weight are refused at load
 *    with the tensor's name; a mistral sliding window is refused, and so
 *    are the golden models' odd shapes on the cuda backend (head_dim 12,
 *    widths not multiples of 8); the state table is two KV buffers per
 *    layer plus the runtime's three.
 */
#include "frt_test.h"

#if defined(__GNUC__) && !defined(__clang__) /* a GCC-only warning (make fuzz builds with clang) */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include "frt/model.h"
#include "kernels/cpu/rope_freqs.h"
#include "model/model_internal.h"
#include "util/error.h"
#include "frt/config.h"
#include "frt/safetensors.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN_DIR FRT_TEST_DATA "/golden_dense"

static const frt_tensor *need(const frt_safetensors *g, const char *name)
{
    const frt_tensor *t = frt_safetensors_find(g, name);
    CHECK_MSG(t != NULL, "golden tensor '%s' missing", name);
    return t;
}

static int prefill_all(frt_model *m, const int32_t *ids, int n)
{
    FRT_TRY(frt_model_reset(m));
    return frt_model_prefill(m, ids, n);
}

static int greedy(frt_model *m, int32_t *out, int n)
{
    FRT_TRY(frt_model_sample(m, NULL, &out[0]));
    for (int i = 1; i < n; i++) FRT_TRY(frt_model_decode(m, NULL, &out[i]));
    return 0;
}

/* The RoPE table frt computes from the config against HF's inv_freq buffer. */
static void check_rope_table(const char *dir, const frt_safetensors *g)
{
    frt_model_config c;
    CHECK_OK(frt_config_load(dir, &c));
    const frt_tensor *t = need(g, "rope.inv_freq");
    if (!t) return;
    int half = c.head_dim / 2;
    CHECK(frt_tensor_numel(t) == half);
    float ours[512], theirs[512];
    if (!strcmp(c.rope_type, "llama3"))
        frt_rope_inv_freq_llama3(ours, c.head_dim, c.rope_theta, c.rope_factor, c.rope_low_freq_factor,
                                 c.rope_high_freq_factor, c.rope_original_max_pos);
    else
        frt_rope_inv_freq_default(ours, c.head_dim, c.rope_theta);
    CHECK_OK(frt_tensor_to_f32(t, theirs));
    double worst = 0;
    for (int i = 0; i < half; i++) {
        double r = fabs((double)ours[i] - theirs[i]) / fabs((double)theirs[i]);
        if (r > worst) worst = r;
    }
    printf("  rope %s: inv_freq max rel err %.3e over %d frequencies\n", c.rope_type, worst, half);
    CHECK(worst <= 1e-6);
    if (!strcmp(c.rope_type, "llama3")) { /* the scaling matters here: the default table is far off */
        float plain[512];
        frt_rope_inv_freq_default(plain, c.head_dim, c.rope_theta);
        int changed = 0;
        for (int i = 0; i < half; i++) changed += fabsf(plain[i] - theirs[i]) > 1e-3f * fabsf(theirs[i]);
        printf("  rope llama3: %d of %d frequencies differ from the default table\n", changed, half);
        CHECK(changed >= 2);
    }
}

static void test_golden_model(const char *dir, int *families)
{
    char path[4200];
    printf("golden model %s\n", dir);
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 1024;
    p.debug_hidden = 1;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    if (!m) return;
    frt_safetensors *g = NULL;
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    CHECK_OK(frt_safetensors_open(path, &g));
    if (!g) {
        frt_model_free(m);
        return;
    }
    frt_model_info info;
    frt_model_info_get(m, &info);
    CHECK(!strcmp(info.arch, "dense") && info.n_linear_layers == 0 && info.n_full_layers == info.n_layers);
    CHECK(info.n_state == 2 * info.n_layers + 5);
    if (!strcmp(info.model_type, "llama")) *families |= 1;
    if (!strcmp(info.model_type, "qwen2")) *families |= 2;
    if (!strcmp(info.model_type, "qwen3")) *families |= 4;
    if (!strcmp(info.model_type, "mistral")) *families |= 8;
    check_rope_table(dir, g);
    int V = info.vocab_size;
    float *logits = xmalloc((size_t)V * sizeof(float)), *ref = xmalloc((size_t)V * sizeof(float));
    double max_abs = 0;

    for (int i = 0; i < 16; i++) {
        char name[64];
        snprintf(name, sizeof name, "prompt%d.ids", i);
        const frt_tensor *ids = frt_safetensors_find(g, name);
        if (!ids) break;
        snprintf(name, sizeof name, "prompt%d.logits_last", i);
        const frt_tensor *lt = need(g, name);
        if (!lt) break;
        CHECK(frt_tensor_numel(lt) == V);
        CHECK_OK(prefill_all(m, ids->data, (int)frt_tensor_numel(ids)));
        CHECK_OK(frt_model_logits(m, logits));
        CHECK_OK(frt_tensor_to_f32(lt, ref));
        double e = frt_test_rel_err(logits, ref, (size_t)V);
        for (int k = 0; k < V; k++) {
            double d = fabs((double)logits[k] - ref[k]);
            if (d > max_abs) max_abs = d;
        }
        printf("  prompt%d (%lld tokens): logits rel err %.3e\n", i, (long long)frt_tensor_numel(ids), e);
        CHECK_ERR_NEAR(logits, ref, (size_t)V, 1e-4);
    }

    const frt_tensor *hid_ids = need(g, "hidden.ids");
    if (hid_ids) {
        int n = (int)frt_tensor_numel(hid_ids), H = info.hidden_size;
        float *ours = xmalloc((size_t)n * H * sizeof(float)), *theirs = xmalloc((size_t)n * H * sizeof(float));
        CHECK_OK(prefill_all(m, hid_ids->data, n));
        for (int l = 0; l <= info.n_layers + 1; l++) {
            char name[64];
            if (l < info.n_layers)
                snprintf(name, sizeof name, "hidden.layer%d", l);
            else
                snprintf(name, sizeof name, "%s", l == info.n_layers ? "hidden.final_prenorm" : "hidden.final_normed");
            const frt_tensor *t = need(g, name);
            if (!t) break;
            CHECK_OK(frt_model_debug_hidden(m, l, ours, n));
            CHECK_OK(frt_tensor_to_f32(t, theirs));
            double e = frt_test_rel_err(ours, theirs, (size_t)n * H);
            printf("  %-22s rel err %.3e\n", name, e);
            CHECK_ERR_NEAR(ours, theirs, (size_t)n * H, 1e-4);
        }
        free(ours);
        free(theirs);
    }

    const frt_tensor *gp = need(g, "greedy.prompt"), *gt = need(g, "greedy.tokens"), *gm = need(g, "greedy.margins");
    if (gp && gt && gm) {
        int n = (int)frt_tensor_numel(gt);
        int32_t *toks = calloc((size_t)n, sizeof *toks);
        float *margins = xmalloc((size_t)n * sizeof(float));
        CHECK_OK(frt_tensor_to_f32(gm, margins));
        CHECK_OK(prefill_all(m, gp->data, (int)frt_tensor_numel(gp)));
        CHECK_OK(greedy(m, toks, n));
        const int32_t *want = gt->data;
        double tol = 2.0 * max_abs;
        int compared = 0;
        for (int i = 0; i < n; i++) {
            if (margins[i] <= tol) break;
            CHECK_MSG(toks[i] == want[i], "greedy step %d: got %d want %d", i, toks[i], want[i]);
            if (toks[i] != want[i]) break;
            compared++;
        }
        printf("  greedy: %d of %d steps compared (max |logit err| %.2e, stop margin %.2e)\n", compared, n, max_abs,
               tol);
        CHECK(compared >= 8);
        free(toks);
        free(margins);
    }
    free(logits);
    free(ref);
    frt_safetensors_close(g);
    frt_model_free(m);
}

static void test_golden(void)
{
    DIR *d = opendir(GOLDEN_DIR);
    CHECK_MSG(d != NULL, "%s is absent", GOLDEN_DIR);
    if (!d) return;
    struct dirent *e;
    char names[16][256];
    int n = 0, families = 0;
    while ((e = readdir(d)) && n < 16) {
        if (e->d_name[0] == '.') continue;
        char f[2048];
        struct stat st;
        snprintf(f, sizeof f, "%s/%s/golden.safetensors", GOLDEN_DIR, e->d_name);
        if (stat(f, &st) == 0) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/%s", GOLDEN_DIR, names[i]);
        test_golden_model(dir, &families);
    }
    CHECK_MSG(n >= 5 && families == 15, "%d golden dense models, families mask %d (want llama, qwen2, qwen3, mistral)",
              n, families);
}

/* ---- schedules --------------------------------------------------------- */

static void random_ids(int32_t *ids, int n, int vocab)
{
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)vocab);
}

static void test_schedules(const char *dir)
{
    printf("schedules on %s\n", dir);
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 512;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    if (!m) return;
    frt_model_info info;
    frt_model_info_get(m, &info);
    enum { N = 200, G = 12 };
    int32_t ids[N], a[G], b[G], c[G];
    random_ids(ids, N, info.vocab_size);
    size_t lb_bytes = (size_t)info.vocab_size * sizeof(float);
    float *la = xmalloc(lb_bytes), *lb = xmalloc(lb_bytes);

    CHECK_OK(prefill_all(m, ids, N));
    CHECK_OK(frt_model_logits(m, la));
    CHECK_OK(greedy(m, a, G));
    /* pieces at multiples of C: the same operations, the same bits */
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, ids, 64));
    CHECK_OK(frt_model_prefill(m, ids + 64, 128));
    CHECK_OK(frt_model_prefill(m, ids + 192, N - 192));
    CHECK_OK(frt_model_logits(m, lb));
    CHECK(memcmp(la, lb, lb_bytes) == 0);
    CHECK_OK(greedy(m, b, G));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* token by token: other GEMM shapes, the same tokens */
    CHECK_OK(frt_model_reset(m));
    for (int i = 0; i < N; i++) CHECK_OK(frt_model_prefill(m, ids + i, 1));
    CHECK_OK(frt_model_logits(m, lb));
    double e = frt_test_rel_err(lb, la, (size_t)info.vocab_size);
    printf("  token-by-token vs one prefill: logits rel err %.3e\n", e);
    CHECK(e < 1e-4);
    CHECK_OK(greedy(m, c, G));
    CHECK(memcmp(a, c, sizeof a) == 0);
    /* a decode step agrees with a prefill of the same tokens */
    CHECK_OK(prefill_all(m, ids, N));
    int32_t t;
    CHECK_OK(frt_model_sample(m, NULL, &t));
    CHECK_OK(frt_model_decode(m, NULL, &t));
    CHECK_OK(frt_model_logits(m, la));
    int32_t ext[N + 1];
    memcpy(ext, ids, sizeof ids);
    ext[N] = a[0];
    CHECK_OK(prefill_all(m, ext, N + 1));
    CHECK_OK(frt_model_logits(m, lb));
    e = frt_test_rel_err(la, lb, (size_t)info.vocab_size);
    printf("  decode step vs prefill: logits rel err %.3e\n", e);
    CHECK(e < 1e-4);
    int32_t journal[N + 1];
    CHECK(frt_model_tokens(m, journal, N + 1) == N + 1);
    CHECK(memcmp(journal, ext, sizeof ext) == 0);
    free(la);
    free(lb);
    frt_model_free(m);
}

/* ---- bad checkpoints and configs --------------------------------------- */

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return system(cmd);
}

/* Copies src's model.safetensors into dir without `drop` and with `reshape`
 * given a wrong first dimension (either may be NULL). */
static int rewrite_checkpoint(const char *src, const char *dir, const char *drop, const char *reshape)
{
    char in[1024], out[1024];
    snprintf(in, sizeof in, "%s/model.safetensors", src);
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    frt_safetensors *st = NULL;
    frt_st_writer *w = NULL;
    FRT_TRY(frt_safetensors_open(in, &st));
    int rc = frt_st_writer_create(&w);
    for (int i = 0; rc == 0 && i < frt_safetensors_count(st); i++) {
        const frt_tensor *t = frt_safetensors_at(st, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t shape[8];
        memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
        int ndim = t->ndim;
        if (reshape && !strcmp(t->name, reshape)) { /* same bytes, another shape: [d0 * d1] -> [d0 / 2, 2 * d1] */
            shape[0] /= 2;
            shape[ndim - 1] *= 2;
        }
        rc = frt_st_writer_add(w, t->name, t->dtype, ndim, shape, t->data);
    }
    if (rc == 0) rc = frt_st_writer_write(w, out);
    frt_st_writer_destroy(w);
    frt_safetensors_close(st);
    return rc;
}

static void test_bad_checkpoints(const char *src)
{
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-dense-%d", (int)getpid());
    CHECK(sh("rm -rf '%s' && mkdir -p '%s'", dir, dir) == 0);
    CHECK(sh("cp '%s/config.json' '%s/'", src, dir) == 0);
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 128;
    frt_model *m = NULL;

    CHECK_OK(rewrite_checkpoint(src, dir, "model.layers.1.self_attn.k_proj.weight", NULL));
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_NOT_FOUND);
    CHECK(strstr(frt_last_error(), "model.layers.1.self_attn.k_proj.weight") != NULL);
    CHECK(m == NULL);

    CHECK_OK(rewrite_checkpoint(src, dir, NULL, "model.layers.2.mlp.up_proj.weight"));
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "model.layers.2.mlp.up_proj.weight") != NULL &&
          strstr(frt_last_error(), "expected") != NULL);
    CHECK(m == NULL);

    /* qwen2 biases are required by the config */
    CHECK(sh("cp '%s/../dense_qwen2_bias/config.json' '%s/'", src, dir) == 0);
    CHECK_OK(rewrite_checkpoint(FRT_TEST_DATA "/golden_dense/dense_qwen2_bias", dir, "model.layers.0.self_attn.v_proj.bias",
                                NULL));
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_NOT_FOUND);
    CHECK(strstr(frt_last_error(), "model.layers.0.self_attn.v_proj.bias") != NULL);

    /* cuda: this shape is refused (no device: no cuda backend at all); a mistral sliding window is refused */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/model.safetensors' '%s/'", src, src, dir);
    CHECK(system(cmd) == 0);
    p.backend = FRT_BACKEND_CUDA;
    CHECK(frt_model_load(dir, &p, &m) < 0);
    CHECK(m == NULL);
    p.backend = FRT_BACKEND_CPU;
    snprintf(cmd, sizeof cmd,
             "sed -i 's/\"model_type\": \"[a-z0-9]*\"/\"model_type\": \"mistral\"/; "
             "s/\"sliding_window\": null/\"sliding_window\": 4096/' '%s/config.json' && "
             "grep -q '\"sliding_window\": 4096' '%s/config.json' || "
             "sed -i 's/^{/{\"sliding_window\": 4096,/' '%s/config.json'",
             dir, dir, dir);
    CHECK(system(cmd) == 0);
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "sliding_window") != NULL);
    CHECK(m == NULL);
    CHECK(sh("rm -rf '%s'%s", dir, "") == 0);
}

/* With a device, the cuda backend refuses the golden models' odd shapes, naming why. */
static void test_cuda_refused(const char *src)
{
    int n_dev = 0;
    frt_device_count(FRT_BACKEND_CUDA, &n_dev);
    if (n_dev == 0) return;
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA;
    p.prefill_chunk = 64;
    p.max_seq = 128;
    frt_model *m = NULL;
    CHECK_STATUS(frt_model_load(src, &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "dense") != NULL);
    CHECK(m == NULL);
}

int main(void)
{
    frt_test_seed(17);
    test_golden();
    test_schedules(GOLDEN_DIR "/dense_llama3_gqa");
    test_schedules(GOLDEN_DIR "/dense_qwen3_qknorm");
    test_bad_checkpoints(GOLDEN_DIR "/dense_llama3_gqa");
    test_cuda_refused(GOLDEN_DIR "/dense_mistral");
    return frt_test_report();
}
