/*
 * test_checkpoint.c - checkpoints across files and in memory, and gen-model:
 *   - a gen-model "tiny" checkpoint round-trips through the writer and the
 *     reader with equal bytes, single-file and sharded (+ index), and the
 *     file written from the mapped checkpoint is byte-identical;
 *   - stale files of the other layout are removed;
 *   - generation is deterministic across thread counts, depends on the
 *     seed, never writes zeros, and every init rule has its scale;
 *   - the configs gen-model writes load back to frt_gen_model_config;
 *   - weight lists for the dense layouts;
 *   - index / shard errors: missing shard, tensor not in its shard, tensor
 *     in two shards, a path in the weight_map, bad JSON, nothing to load;
 *   - in-memory add errors.
 */
#include "frt_test.h"
#include "frt/fs.h"
#include "frt/checkpoint.h"
#include "gen_model.h"
#include "util/bf16.h"

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static int contains(const char *s, const char *sub) { return s && sub && strstr(s, sub) != NULL; }

static int exists(const char *dir, const char *file)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    struct stat st;
    return stat(p, &st) == 0;
}

static void sub(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
    mkdir(out, 0755);
}

static void write_text(const char *dir, const char *file, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static unsigned char *read_all(const char *dir, const char *file, size_t *n)
{
    char p[512], *b = NULL;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    *n = 0;
    return frt_file_read_all(p, (size_t)1 << 30, &b, n) == 0 ? (unsigned char *)b : NULL;
}

/* Same tensors, in the same order, with equal bytes. */
static int same_tensors(const frt_checkpoint *a, const frt_checkpoint *b)
{
    if (frt_checkpoint_count(a) != frt_checkpoint_count(b)) return 0;
    for (int i = 0; i < frt_checkpoint_count(a); i++) {
        const frt_tensor *x = frt_checkpoint_at(a, i), *y = frt_checkpoint_at(b, i);
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes)
            return 0;
        for (int d = 0; d < x->ndim; d++)
            if (x->shape[d] != y->shape[d]) return 0;
        if (x->nbytes && memcmp(x->data, y->data, x->nbytes)) return 0;
        if (frt_checkpoint_find(b, x->name) != y) return 0;
    }
    return 1;
}

static void test_round_trip(void)
{
    frt_model_config cfg;
    frt_checkpoint *mem;
    CHECK_OK(frt_gen_model_build("tiny", 11, &cfg, &mem));
    CHECK(frt_checkpoint_file_count(mem) == 0 && frt_checkpoint_count(mem) > 0);
    CHECK(frt_checkpoint_numel(mem) * 2 == frt_checkpoint_bytes(mem)); /* all bf16 */

    char d1[300], d2[300], d3[300];
    sub(d1, sizeof d1, "single");
    sub(d2, sizeof d2, "rewrite");
    sub(d3, sizeof d3, "sharded");
    CHECK_OK(frt_checkpoint_write(mem, d1, 0, 0));
    CHECK(exists(d1, "model.safetensors") && !exists(d1, "model.safetensors.index.json"));
    frt_checkpoint *f1;
    CHECK_OK(frt_checkpoint_open(d1, &f1));
    CHECK(frt_checkpoint_file_count(f1) == 1);
    CHECK(same_tensors(mem, f1));
    CHECK(frt_checkpoint_at(f1, 0)->file && contains(frt_checkpoint_at(f1, 0)->file, "model.safetensors"));

    /* Written again from the mapped file: byte-identical file. */
    CHECK_OK(frt_checkpoint_write(f1, d2, 0, FRT_CKPT_WRITE_NO_FSYNC));
    size_t n1, n2;
    unsigned char *b1 = read_all(d1, "model.safetensors", &n1), *b2 = read_all(d2, "model.safetensors", &n2);
    CHECK(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1));
    free(b1);
    free(b2);

    /* Sharded: ~1/4 of the bytes per file. */
    uint64_t shard = frt_checkpoint_bytes(mem) / 4;
    write_text(d3, "model.safetensors", "stale single file");
    write_text(d3, "model-00001-of-00009.safetensors", "stale shard");
    write_text(d3, "model-notes.txt", "not ours");
    CHECK_OK(frt_checkpoint_write(mem, d3, shard, 0));
    CHECK(!exists(d3, "model.safetensors") && exists(d3, "model.safetensors.index.json"));
    CHECK(!exists(d3, "model-00001-of-00009.safetensors") && exists(d3, "model-notes.txt"));
    frt_checkpoint *f3;
    CHECK_OK(frt_checkpoint_open(d3, &f3));
    int nf = frt_checkpoint_file_count(f3);
    CHECK_MSG(nf >= 4 && nf <= 6, "%d shard files", nf);
    char name[64];
    snprintf(name, sizeof name, "model-00001-of-%05d.safetensors", nf);
    CHECK(exists(d3, name));
    CHECK(same_tensors(mem, f3));
    /* Each file within the limit unless it holds a single tensor. */
    for (int i = 0, j; i < frt_checkpoint_count(f3); i = j) {
        const char *file = frt_checkpoint_at(f3, i)->file;
        uint64_t bytes = 0;
        for (j = i; j < frt_checkpoint_count(f3) && !strcmp(frt_checkpoint_at(f3, j)->file, file); j++)
            bytes += frt_checkpoint_at(f3, j)->nbytes;
        CHECK_MSG(bytes <= shard || j == i + 1, "%s holds %llu bytes", file, (unsigned long long)bytes);
    }
    size_t ni;
    char *idx = (char *)read_all(d3, "model.safetensors.index.json", &ni);
    CHECK(idx && contains(idx, "\"total_size\"") && contains(idx, "\"weight_map\"") &&
          contains(idx, "\"model.embed_tokens.weight\": \"model-00001-of-"));
    free(idx);
    /* Back to one file: the index and the shards go. */
    CHECK_OK(frt_checkpoint_write(mem, d3, 0, 0));
    CHECK(exists(d3, "model.safetensors") && !exists(d3, "model.safetensors.index.json") && !exists(d3, name));

    frt_checkpoint_close(f1);
    frt_checkpoint_close(f3);
    frt_checkpoint_close(mem);
}

static void test_gen_model_dir(void)
{
    char d[300];
    sub(d, sizeof d, "gen/nested/dir");
    CHECK_STATUS(frt_gen_model_write("tiny", 5, d), 0); /* parents created */
    frt_model_config want, got;
    CHECK_OK(frt_gen_model_config("tiny", &want));
    CHECK_OK(frt_config_load(d, &got));
    CHECK(!memcmp(&want, &got, sizeof want));
    frt_generation_config g;
    CHECK_OK(frt_generation_config_load(d, &got, &g));
    CHECK(g.n_eos == 1 && g.eos_ids[0] == got.vocab_size - 1 && g.do_sample == 1 && g.top_k == 20);
    frt_checkpoint *ck, *mem;
    CHECK_OK(frt_checkpoint_open(d, &ck));
    CHECK_OK(frt_gen_model_build("tiny", 5, NULL, &mem));
    CHECK(same_tensors(mem, ck));
    /* Every weight the config implies, with its shape. */
    frt_weight_spec *w;
    int n;
    CHECK_OK(frt_model_weight_specs(&got, &w, &n));
    CHECK(n == frt_checkpoint_count(ck));
    for (int i = 0; i < n; i++) {
        const frt_tensor *t = frt_checkpoint_find(ck, w[i].name);
        CHECK_MSG(t && t->ndim == w[i].ndim && t->dtype == FRT_DT_BF16, "%s", w[i].name);
        for (int k = 0; t && k < t->ndim; k++) CHECK(t->shape[k] == w[i].shape[k]);
    }
    free(w);
    frt_checkpoint_close(ck);
    frt_checkpoint_close(mem);
    CHECK_STATUS(frt_gen_model_write("nope", 5, d), FRT_ERR_NOT_FOUND);
}

/* Mean and standard deviation of a bf16 tensor; number of exact zeros. */
static void stats(const frt_tensor *t, double *mean, double *sd, double *lo, double *hi, int64_t *zeros)
{
    int64_t n = frt_tensor_numel(t);
    float *f = malloc(sizeof(float) * (size_t)n);
    frt_tensor_to_f32(t, f);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    *zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        s += f[i];
        s2 += (double)f[i] * f[i];
        *zeros += f[i] == 0.0f;
        if (f[i] < *lo) *lo = f[i];
        if (f[i] > *hi) *hi = f[i];
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
    free(f);
}

static void test_values(void)
{
    omp_set_num_threads(1);
    frt_checkpoint *a, *b, *c;
    CHECK_OK(frt_gen_model_build("tiny", 3, NULL, &a));
    omp_set_num_threads(4);
    CHECK_OK(frt_gen_model_build("tiny", 3, NULL, &b));
    CHECK_OK(frt_gen_model_build("tiny", 4, NULL, &c));
    CHECK(same_tensors(a, b));
    const frt_tensor *ta = frt_checkpoint_find(a, "model.embed_tokens.weight"),
                     *tc = frt_checkpoint_find(c, "model.embed_tokens.weight");
    CHECK(ta && tc && memcmp(ta->data, tc->data, ta->nbytes) != 0);

    double m, sd, lo, hi;
    int64_t z;
    for (int i = 0; i < frt_checkpoint_count(a); i++) {
        const frt_tensor *t = frt_checkpoint_at(a, i);
        stats(t, &m, &sd, &lo, &hi, &z);
        int64_t n = frt_tensor_numel(t);
        /* Exact zeros can only come from N(0, s) draws rounding to 0 in
         * bf16: a handful at most, never a whole tensor. */
        CHECK_MSG(z * 1000 <= n + 1000 && sd > 0, "%s: %lld zeros of %lld", t->name, (long long)z, (long long)n);
        const char *nm = t->name;
        if (contains(nm, "A_log")) {
            CHECK_MSG(lo >= 0 && hi <= log(16.0) + 0.02, "%s in [%g, %g]", nm, lo, hi);
        } else if (contains(nm, "dt_bias")) {
            CHECK_MSG(lo >= -7.0 && hi <= -2.2, "%s in [%g, %g]", nm, lo, hi);
        } else if (contains(nm, "linear_attn.norm.weight")) {
            CHECK_MSG(fabs(m - 1.0) < 0.1 && sd > 0.03 && sd < 0.2, "%s mean %g sd %g", nm, m, sd);
        } else if (contains(nm, "conv1d")) {
            CHECK_MSG(lo >= -0.5 && hi <= 0.5 && sd > 0.2, "%s in [%g, %g]", nm, lo, hi);
        } else if (contains(nm, "norm.weight") || contains(nm, "layernorm")) {
            CHECK_MSG(fabs(m) < 0.1 && sd > 0.03 && sd < 0.2, "%s mean %g sd %g", nm, m, sd);
        } else {
            CHECK_MSG(fabs(m) < 0.003 && fabs(sd - 0.02) < 0.003, "%s mean %g sd %g", nm, m, sd);
        }
    }
    frt_checkpoint_close(a);
    frt_checkpoint_close(b);
    frt_checkpoint_close(c);
}

static void test_dense_specs(void)
{
    frt_model_config c;
    const char *qwen2 = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, "
                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"num_key_value_heads\": 2, "
                        "\"vocab_size\": 100, \"tie_word_embeddings\": true}";
    CHECK_OK(frt_config_parse_json(qwen2, strlen(qwen2), NULL, &c));
    frt_weight_spec *w;
    int n;
    CHECK_OK(frt_model_weight_specs(&c, &w, &n));
    int bias = 0, lm = 0, qn = 0;
    for (int i = 0; i < n; i++) {
        bias += contains(w[i].name, "_proj.bias");
        lm += !strcmp(w[i].name, "lm_head.weight");
        qn += contains(w[i].name, "q_norm");
        if (!strcmp(w[i].name, "model.layers.1.self_attn.q_proj.weight"))
            CHECK(w[i].shape[0] == 64 && w[i].shape[1] == 64);
        if (contains(w[i].name, "layernorm")) CHECK(w[i].a == 1.0f); /* plain x * w norms sit around 1 */
    }
    CHECK(bias == 2 * 3 && lm == 0 && qn == 0 && n == 1 + 2 * (2 + 4 + 3 + 3) + 1);
    free(w);

    /* Composite: text weights under model.language_model., lm_head at the top. */
    frt_model_config t;
    CHECK_OK(frt_gen_model_config("tiny", &t));
    snprintf(t.weight_prefix, sizeof t.weight_prefix, "model.language_model.");
    CHECK_OK(frt_model_weight_specs(&t, &w, &n));
    CHECK(!strcmp(w[0].name, "model.language_model.embed_tokens.weight"));
    CHECK(!strcmp(w[n - 1].name, "lm_head.weight"));
    /* The hybrid full-attention q_proj holds query and gate. */
    for (int i = 0; i < n; i++)
        if (!strcmp(w[i].name, "model.language_model.layers.1.self_attn.q_proj.weight"))
            CHECK(w[i].shape[0] == 2 * t.n_heads * t.head_dim && w[i].shape[1] == t.hidden_size);
    free(w);
    CHECK_STATUS(frt_model_weight_specs(NULL, &w, &n), FRT_ERR_INVALID_ARGUMENT);
}

static void test_index_errors(void)
{
    frt_checkpoint *mem, *ck;
    CHECK_OK(frt_gen_model_build("tiny", 1, NULL, &mem));
    char d[300];
    sub(d, sizeof d, "idx");
    CHECK_OK(frt_checkpoint_write(mem, d, frt_checkpoint_bytes(mem) / 3, FRT_CKPT_WRITE_NO_FSYNC));
    size_t n;
    char *good = (char *)read_all(d, "model.safetensors.index.json", &n);
    CHECK(good != NULL);
    CHECK_OK(frt_checkpoint_open(d, &ck));
    frt_checkpoint_close(ck);
    char *buf = malloc(n + 256);

    /* A shard the index names is missing. */
    snprintf(buf, n + 256, "{\"weight_map\": {\"model.norm.weight\": \"model-00007-of-00009.safetensors\"}}");
    write_text(d, "model.safetensors.index.json", buf);
    CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_NOT_FOUND);
    CHECK(contains(frt_last_error(), "model-00007-of-00009.safetensors"));
    /* The shards of the first and the last tensor (they differ). */
    char first[64] = "", last[64] = "";
    const char *p = strstr(good, "\"model.embed_tokens.weight\": \""), *q = strstr(good, "\"model.norm.weight\": \"");
    CHECK(p && q);
    if (p && q) {
        p += strlen("\"model.embed_tokens.weight\": \"");
        snprintf(first, sizeof first, "%.*s", (int)(strchr(p, '"') - p), p);
        size_t k = (size_t)(q - good);
        q += strlen("\"model.norm.weight\": \"");
        snprintf(last, sizeof last, "%.*s", (int)(strchr(q, '"') - q), q);
        CHECK(strcmp(first, last) != 0);
        /* A tensor that is not in the shard the index names. */
        memcpy(buf, good, k);
        snprintf(buf + k, n + 256 - k, "\"model.norm.weight\": \"%s%s", first, strchr(q, '"'));
        write_text(d, "model.safetensors.index.json", buf);
        CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_FORMAT);
        CHECK_MSG(contains(frt_last_error(), "model.norm.weight") && contains(frt_last_error(), first) &&
                      contains(frt_last_error(), last),
                  "%s / %s: %s", first, last, frt_last_error());
    }
    /* An entry naming a tensor no shard has. */
    snprintf(buf, n + 256, "{\"weight_map\": {\"ghost.weight\": \"%s\"}}", first);
    write_text(d, "model.safetensors.index.json", buf);
    CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "ghost.weight"));
    /* Paths outside the directory. */
    snprintf(buf, n + 256, "{\"weight_map\": {\"a\": \"../model-00001-of-00003.safetensors\"}}");
    write_text(d, "model.safetensors.index.json", buf);
    CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "'a'"));
    snprintf(buf, n + 256, "{\"weight_map\": {\"a\": 3}}");
    write_text(d, "model.safetensors.index.json", buf);
    CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_FORMAT);
    /* Bad JSON, no weight_map. */
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": ");
    CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "model.safetensors.index.json"));
    write_text(d, "model.safetensors.index.json", "{\"metadata\": {}}");
    CHECK_STATUS(frt_checkpoint_open(d, &ck), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "weight_map"));
    /* The same tensor in two shards. */
    char d2[300];
    sub(d2, sizeof d2, "dup");
    CHECK_OK(frt_checkpoint_write(mem, d2, 0, FRT_CKPT_WRITE_NO_FSYNC));
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/model.safetensors", d2);
    snprintf(dst, sizeof dst, "%s/a.safetensors", d2);
    CHECK(rename(src, dst) == 0);
    char cp[1024];
    snprintf(cp, sizeof cp, "cp '%s/a.safetensors' '%s/b.safetensors'", d2, d2);
    CHECK(system(cp) == 0);
    write_text(d2, "model.safetensors.index.json",
               "{\"weight_map\": {\"model.norm.weight\": \"a.safetensors\", \"lm_head.weight\": \"b.safetensors\"}}");
    CHECK_STATUS(frt_checkpoint_open(d2, &ck), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "appears in both") && contains(frt_last_error(), "a.safetensors") &&
          contains(frt_last_error(), "b.safetensors"));
    /* Nothing to load. */
    char d3[300];
    sub(d3, sizeof d3, "empty");
    CHECK_STATUS(frt_checkpoint_open(d3, &ck), FRT_ERR_NOT_FOUND);
    CHECK(contains(frt_last_error(), d3));
    /* A bad file inside a valid layout: the error names the file. */
    write_text(d3, "model.safetensors", "short");
    CHECK_STATUS(frt_checkpoint_open(d3, &ck), FRT_ERR_FORMAT);
    CHECK(contains(frt_last_error(), "model.safetensors"));
    CHECK_STATUS(frt_checkpoint_open(NULL, &ck), FRT_ERR_INVALID_ARGUMENT);
    free(buf);
    free(good);
    frt_checkpoint_close(mem);
}

static void test_memory_errors(void)
{
    frt_checkpoint *ck;
    CHECK_OK(frt_checkpoint_create(&ck));
    int64_t shape[2] = {2, 3};
    float *d = malloc(6 * sizeof(float));
    frt_test_fill(d, 6, -1, 1);
    CHECK_OK(frt_checkpoint_add(ck, "x", FRT_DT_F32, 2, shape, d));
    const frt_tensor *t = frt_checkpoint_find(ck, "x");
    CHECK(t && t->data == d && t->file == NULL && t->nbytes == 24);
    /* Duplicate name: the data passed in is freed (no leak under ASan). */
    CHECK_STATUS(frt_checkpoint_add(ck, "x", FRT_DT_F32, 2, shape, malloc(24)), FRT_ERR_INVALID_ARGUMENT);
    CHECK(contains(frt_last_error(), "duplicate"));
    CHECK_STATUS(frt_checkpoint_add(ck, "y", (frt_dtype)77, 2, shape, malloc(24)), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_checkpoint_add(ck, "y", FRT_DT_F32, 2, shape, NULL), FRT_ERR_INVALID_ARGUMENT);
    int64_t neg[1] = {-2};
    CHECK_STATUS(frt_checkpoint_add(ck, "y", FRT_DT_F32, 1, neg, malloc(4)), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_checkpoint_add(ck, "", FRT_DT_F32, 2, shape, malloc(24)), FRT_ERR_INVALID_ARGUMENT);
    /* Many adds: pointers stay valid across the index growing. */
    for (int i = 0; i < 1000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "t%d", i);
        int64_t one[1] = {1};
        float *v = malloc(sizeof(float));
        *v = (float)i + 0.5f;
        CHECK_OK(frt_checkpoint_add(ck, nm, FRT_DT_F32, 1, one, v));
    }
    CHECK(frt_checkpoint_find(ck, "x") == t && frt_checkpoint_count(ck) == 1001);
    const frt_tensor *t500 = frt_checkpoint_find(ck, "t500");
    CHECK(t500 && *(const float *)t500->data == 500.5f && frt_checkpoint_at(ck, 501) == t500);
    CHECK(frt_checkpoint_find(ck, "t1000") == NULL && frt_checkpoint_find(NULL, "x") == NULL);
    CHECK(frt_checkpoint_at(ck, 1001) == NULL && frt_checkpoint_at(ck, -1) == NULL);
    frt_checkpoint_close(ck);
    frt_checkpoint_close(NULL);

    /* A checkpoint opened from files takes no additions. */
    char dd[300];
    sub(dd, sizeof dd, "ro");
    frt_checkpoint *mem;
    CHECK_OK(frt_gen_model_build("tiny", 2, NULL, &mem));
    CHECK_OK(frt_checkpoint_write(mem, dd, 0, FRT_CKPT_WRITE_NO_FSYNC));
    CHECK_OK(frt_checkpoint_open(dd, &ck));
    CHECK_STATUS(frt_checkpoint_add(ck, "z", FRT_DT_F32, 2, shape, malloc(24)), FRT_ERR_STATE);
    frt_checkpoint_close(ck);
    frt_checkpoint_close(mem);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/frt_test_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) TEST_SKIP("cannot create a temporary directory");
    test_round_trip();
    test_gen_model_dir();
    test_values();
    test_dense_specs();
    test_index_errors();
    test_memory_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return frt_test_report();
}
