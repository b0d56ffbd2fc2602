/*
 * test_model.c - the Qwen3.5 hybrid model on the cpu backend.
 *
 *  - golden models (tests/data/golden/<name>/, made by
 *    scripts/ref/make_golden_models.py with transformers): last-position
 *    logits and per-layer hidden states within 1e-4 norm-wise of the fp32
 *    reference; 32 greedy tokens identical, compared while the reference's
 *    top-2 margin exceeds the measured error;
 *  - one prefill, prefill split at multiples of C, and token-by-token decode
 *    give the same greedy tokens;
 *  - frt_model_params.n_threads sets the OpenMP and OpenBLAS thread counts
 *    (0 leaves them; out of range refused);
 *  - bad input (id out of range, prompt past max_seq, decode before prefill)
 *    fails cleanly and leaves the state unchanged; bad load parameters
 *    (prefill_chunk, prefill_group, a backend that is not an frt_backend,
 *    device != 0 on the cpu backend) are refused with no model.
 */
#include "frt_test.h"

#include "frt/debug.h"
#include "frt/model.h"
#include "frt/checkpoint.h"
#include "frt/safetensors.h"
#include "gen_model.h"
#include "model/model_internal.h"
#include "util/error.h"

#include <cblas.h>
#include <dirent.h>
#include <jansson.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN_DIR FRT_TEST_DATA "/golden"

static const frt_tensor *need(const frt_safetensors *ck, const char *name)
{
    const frt_tensor *t = frt_safetensors_find(ck, name);
    CHECK_MSG(t != NULL, "golden tensor '%s' missing", name);
    return t;
}

static size_t numel(const frt_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

static int prefill_all(frt_model *m, const int32_t *ids, int n)
{
    FRT_TRY(frt_model_reset(m));
    return frt_model_prefill(m, ids, n);
}

/* Greedy decode of n tokens after the current boundary. */
static int greedy(frt_model *m, int32_t *out, int n)
{
    FRT_TRY(frt_model_sample(m, NULL, &out[0]));
    for (int i = 1; i < n; i++) FRT_TRY(frt_model_decode(m, NULL, &out[i]));
    return 0;
}

static void test_golden_model(const char *dir)
{
    char path[4200];
    printf("golden model %s\n", dir);
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 2048;
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
    int V = info.vocab_size;
    float *logits = malloc((size_t)V * sizeof(float)), *ref = malloc((size_t)V * sizeof(float));
    double max_abs = 0;

    /* Last-position logits of each prompt. */
    for (int i = 0; i < 16; i++) {
        char name[64];
        snprintf(name, sizeof name, "prompt%d.ids", i);
        const frt_tensor *ids = frt_safetensors_find(g, name);
        if (!ids) break;
        snprintf(name, sizeof name, "prompt%d.logits_last", i);
        const frt_tensor *lt = need(g, name);
        if (!lt) break;
        CHECK(numel(lt) == (size_t)V);
        CHECK_OK(prefill_all(m, ids->data, (int)numel(ids)));
        CHECK_OK(frt_model_logits(m, logits));
        CHECK_OK(frt_tensor_to_f32(lt, ref));
        double e = frt_test_rel_err(logits, ref, (size_t)V);
        for (int k = 0; k < V; k++) {
            double d = fabs((double)logits[k] - ref[k]);
            if (d > max_abs) max_abs = d;
        }
        printf("  prompt%d (%zu tokens): logits rel err %.3e\n", i, numel(ids), e);
        CHECK_ERR_NEAR(logits, ref, (size_t)V, 1e-4);
    }

    /* Per-layer hidden states of one prompt, prefilled in one piece. */
    const frt_tensor *hid_ids = frt_safetensors_find(g, "hidden.ids");
    if (hid_ids) {
        int n = (int)numel(hid_ids), H = info.hidden_size;
        CHECK(n <= 64);
        float *ours = malloc((size_t)n * H * sizeof(float)), *theirs = malloc((size_t)n * H * sizeof(float));
        CHECK_OK(prefill_all(m, hid_ids->data, n));
        printf("  %-8s %s\n", "layer", "hidden rel err");
        /* golden.json says whether HF's hidden_states[-1] has the final norm */
        snprintf(path, sizeof path, "%s/golden.json", dir);
        json_t *meta = json_load_file(path, 0, NULL);
        int last_normed = json_is_true(json_object_get(json_object_get(meta, "hidden"), "last_is_normed"));
        json_decref(meta);
        for (int l = 0; l <= info.n_layers + 1; l++) {
            char name[64];
            int idx = l;
            if (l == info.n_layers) {
                snprintf(name, sizeof name, "hidden.final_prenorm");
            } else if (l == info.n_layers + 1) {
                snprintf(name, sizeof name, "hidden.layer%d", info.n_layers);
                idx = last_normed ? info.n_layers + 1 : info.n_layers;
            } else {
                snprintf(name, sizeof name, "hidden.layer%d", l);
            }
            const frt_tensor *t = need(g, name);
            if (!t) break;
            CHECK_OK(frt_model_debug_hidden(m, idx, ours, n));
            CHECK_OK(frt_tensor_to_f32(t, theirs));
            double e = frt_test_rel_err(ours, theirs, (size_t)n * H);
            printf("  %-22s %.3e\n", name, e);
            CHECK_ERR_NEAR(ours, theirs, (size_t)n * H, 1e-4);
        }
        free(ours);
        free(theirs);
    }

    /* 32 greedy tokens, compared while the recorded margin exceeds the error. */
    const frt_tensor *gp = need(g, "greedy.prompt"), *gt = need(g, "greedy.tokens"), *gm = need(g, "greedy.margins");
    if (gp && gt && gm) {
        int n = (int)numel(gt);
        int32_t *toks = calloc((size_t)n, sizeof *toks);
        float *margins = malloc((size_t)n * sizeof(float));
        CHECK_OK(frt_tensor_to_f32(gm, margins));
        CHECK_OK(prefill_all(m, gp->data, (int)numel(gp)));
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
    if (!d) {
        printf("golden: %s absent, golden comparisons not run\n", GOLDEN_DIR);
        return;
    }
    struct dirent *e;
    char names[16][256];
    int n = 0;
    while ((e = readdir(d)) && n < 16) {
        if (e->d_name[0] == '.') continue;
        char cfg[2048];
        struct stat st;
        snprintf(cfg, sizeof cfg, "%s/%s/golden.safetensors", GOLDEN_DIR, e->d_name);
        if (stat(cfg, &st) == 0) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char dir[2048];
        if (snprintf(dir, sizeof dir, "%s/%s", GOLDEN_DIR, names[i]) >= (int)sizeof dir) {
            CHECK_MSG(0, "golden path too long: %s/%s", GOLDEN_DIR, names[i]);
            continue;
        }
        test_golden_model(dir);
    }
    CHECK_MSG(n >= 3, "expected at least 3 golden models, found %d", n);
}

/* ---- schedules on a random-weight tiny model --------------------------- */

static char tiny_dir[256];

static void make_tiny(void)
{
    snprintf(tiny_dir, sizeof tiny_dir, "/tmp/frt-test-model-%d", (int)getpid());
    CHECK_OK(frt_gen_model_write("tiny", 7, tiny_dir));
}

static void rm_tiny(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tiny_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tiny_dir);
}

static void random_ids(int32_t *ids, int n, int vocab)
{
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)vocab);
}

static void test_schedules(void)
{
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 512;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(tiny_dir, &p, &m));
    if (!m) return;
    frt_model_info info;
    frt_model_info_get(m, &info);
    enum { N = 200, G = 12 };
    int32_t ids[N], a[G], b[G], c[G];
    random_ids(ids, N, info.vocab_size);
    float *la = malloc((size_t)info.vocab_size * sizeof(float)), *lb = malloc((size_t)info.vocab_size * sizeof(float));

    /* one call */
    CHECK_OK(prefill_all(m, ids, N));
    CHECK_OK(frt_model_logits(m, la));
    CHECK_OK(greedy(m, a, G));
    /* split at multiples of C over several calls: same operations, same bytes */
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, ids, 64));
    CHECK_OK(frt_model_prefill(m, ids + 64, 128));
    CHECK_OK(frt_model_prefill(m, ids + 192, N - 192));
    CHECK_OK(frt_model_logits(m, lb));
    CHECK(memcmp(la, lb, (size_t)info.vocab_size * sizeof(float)) == 0);
    CHECK_OK(greedy(m, b, G));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* token by token: other arithmetic (recurrent form), same greedy tokens */
    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, ids, 1));
    for (int i = 1; i < N; i++) CHECK_OK(frt_model_prefill(m, ids + i, 1));
    CHECK_OK(frt_model_logits(m, lb));
    double e = frt_test_rel_err(lb, la, (size_t)info.vocab_size);
    printf("token-by-token vs one prefill: logits rel err %.3e\n", e);
    CHECK(e < 1e-4);
    CHECK_OK(greedy(m, c, G));
    CHECK(memcmp(a, c, sizeof a) == 0);
    /* decode steps (recurrent gated delta rule) agree with a prefill of the same tokens */
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
    printf("decode step vs prefill: logits rel err %.3e\n", e);
    CHECK(e < 1e-4);
    CHECK(frt_model_position(m) == N + 1);
    int32_t journal[N + 1];
    CHECK(frt_model_tokens(m, journal, N + 1) == N + 1);
    CHECK(memcmp(journal, ext, sizeof ext) == 0);
    free(la);
    free(lb);
    frt_model_free(m);
}

typedef struct progress_log {
    int calls, weights_calls, capture_calls, monotonic;
    uint64_t weights_last, weights_total, capture_last, capture_total;
} progress_log;

static void on_progress(void *user, const char *phase, uint64_t done, uint64_t total)
{
    progress_log *l = user;
    l->calls++;
    uint64_t *last = !strcmp(phase, "weights") ? &l->weights_last : &l->capture_last;
    if (done < *last || done > total) l->monotonic = 0;
    *last = done;
    if (!strcmp(phase, "weights")) {
        l->weights_calls++;
        l->weights_total = total;
    } else if (!strcmp(phase, "capture")) {
        l->capture_calls++;
        l->capture_total = total;
    } else {
        l->monotonic = 0; /* an unknown phase */
    }
}

/* frt_model_params.progress: weights in bytes up to the checkpoint's, then
 * the captured variants, each phase monotonic and ending at its total. */
static void test_progress(void)
{
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 128;
    progress_log l = {.monotonic = 1};
    p.progress = on_progress;
    p.progress_user = &l;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(tiny_dir, &p, &m));
    if (!m) return;
    frt_model_info info;
    CHECK_OK(frt_model_info_get(m, &info));
    CHECK(l.monotonic);
    CHECK(l.weights_calls >= 3 && l.weights_total > 0 && l.weights_last == l.weights_total);
    CHECK(l.capture_total == (uint64_t)info.n_buckets + 2 && l.capture_last == l.capture_total);
    CHECK(l.capture_calls == info.n_buckets + 3);
    frt_model_free(m);
}

/* frt_model_params.n_threads sets the host's OpenMP and OpenBLAS thread
 * counts at load (0 leaves them); out of range is refused, nothing loaded. */
static void test_threads(void)
{
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 128;
    frt_model *m = NULL;
    const int before = omp_get_max_threads();
    CHECK_OK(frt_model_load(tiny_dir, &p, &m)); /* 0: unchanged */
    CHECK(omp_get_max_threads() == before);
    frt_model_free(m);
    m = NULL;
    p.n_threads = 3;
    CHECK_OK(frt_model_load(tiny_dir, &p, &m));
    CHECK_MSG(omp_get_max_threads() == 3 && openblas_get_num_threads() == 3, "n_threads 3: OpenMP %d, OpenBLAS %d",
              omp_get_max_threads(), openblas_get_num_threads());
    frt_model_free(m);
    for (int bad = -1; bad <= 4097; bad += 4098) {
        m = NULL;
        p.n_threads = bad;
        CHECK_STATUS(frt_model_load(tiny_dir, &p, &m), FRT_ERR_INVALID_ARGUMENT);
        CHECK(m == NULL && strstr(frt_last_error(), "n_threads") != NULL);
    }
    omp_set_num_threads(before);
    openblas_set_num_threads(before);
}

static void test_bad_input(void)
{
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 128;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(tiny_dir, &p, &m));
    if (!m) return;
    frt_model_info info;
    frt_model_info_get(m, &info);
    int32_t t;
    /* decode before prefill */
    CHECK_STATUS(frt_model_decode(m, NULL, &t), FRT_ERR_STATE);
    CHECK_STATUS(frt_model_sample(m, NULL, &t), FRT_ERR_STATE);
    CHECK(strstr(frt_last_error(), "prefill") != NULL);

    int32_t ids[100];
    random_ids(ids, 100, info.vocab_size);
    CHECK_OK(frt_model_prefill(m, ids, 100));
    float *before = malloc((size_t)info.vocab_size * sizeof(float)), *after = malloc((size_t)info.vocab_size * sizeof(float));
    CHECK_OK(frt_model_logits(m, before));
    frt_buffer *st = m->state[0].buf;
    size_t sb = frt_buffer_size(st);
    unsigned char *snap = malloc(sb);
    memcpy(snap, frt_buffer_ptr(st), sb);

    int32_t bad[3] = {1, info.vocab_size, 2};
    CHECK_STATUS(frt_model_prefill(m, bad, 3), FRT_ERR_OUT_OF_RANGE);
    CHECK(strstr(frt_last_error(), "vocabulary") != NULL);
    bad[1] = -1;
    CHECK_STATUS(frt_model_prefill(m, bad, 3), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_model_prefill(m, ids, 29), FRT_ERR_OUT_OF_RANGE); /* 100 + 29 > 128 */
    CHECK(strstr(frt_last_error(), "max_seq") != NULL);
    CHECK_STATUS(frt_model_prefill(m, NULL, 3), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_prefill(m, ids, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_model_position(m) == 100);
    CHECK_OK(frt_model_logits(m, after));
    CHECK(memcmp(before, after, (size_t)info.vocab_size * sizeof(float)) == 0);
    CHECK(memcmp(snap, frt_buffer_ptr(st), sb) == 0);
    /* fill to capacity, then decode must refuse */
    CHECK_OK(frt_model_prefill(m, ids, 28));
    CHECK_OK(frt_model_sample(m, NULL, &t));
    CHECK_STATUS(frt_model_decode(m, NULL, &t), FRT_ERR_OUT_OF_RANGE);
    CHECK(frt_model_position(m) == 128);

    /* the declared state table and the ports */
    CHECK(!strcmp(info.arch, "qwen35") && info.n_state == 2 * info.n_layers + 5 && info.n_io == 4);
    size_t table_bytes = 0;
    for (int i = 0; i < info.n_state; i++) {
        frt_state_info si;
        CHECK_OK(frt_model_state_info(m, i, &si));
        table_bytes += si.bytes;
        CHECK(si.validity == FRT_STATE_ROWS ? si.shape[0] == info.max_seq && si.row_bytes * 128 == si.bytes
                                            : si.row_bytes == si.bytes);
    }
    CHECK(table_bytes == info.state_bytes);
    frt_state_info si;
    CHECK_STATUS(frt_model_state_info(m, info.n_state, &si), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_model_state_info(m, -1, &si), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_model_state_info(m, 0, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_io_info io;
    CHECK_OK(frt_model_io_info(m, 0, &io));
    CHECK(!strcmp(io.name, "ids") && io.dir == FRT_IO_INPUT && io.bytes == 64 * sizeof(int32_t) && !io.in_state);
    CHECK_OK(frt_model_io_info(m, 1, &io));
    CHECK(!strcmp(io.name, "logits") && io.dir == FRT_IO_OUTPUT && io.in_state);
    CHECK_OK(frt_model_io_info(m, 2, &io));
    CHECK(!strcmp(io.name, "logprobs") && io.dir == FRT_IO_OUTPUT && io.bytes == sizeof(frt_logprobs) && !io.in_state);
    CHECK_OK(frt_model_io_info(m, 3, &io));
    CHECK(!strcmp(io.name, "token_mask") && io.dir == FRT_IO_INPUT && io.bytes == (size_t)(info.vocab_size + 31) / 32 * 4 &&
          !io.in_state);
    CHECK_STATUS(frt_model_io_info(m, 4, &io), FRT_ERR_OUT_OF_RANGE);
    float *via_port = malloc((size_t)info.vocab_size * sizeof(float));
    CHECK_OK(frt_model_output_read(m, "logits", via_port, (size_t)info.vocab_size * sizeof(float)));
    CHECK_OK(frt_model_logits(m, after));
    CHECK(memcmp(via_port, after, (size_t)info.vocab_size * sizeof(float)) == 0);
    free(via_port);
    CHECK_STATUS(frt_model_output_read(m, "logits", after, (size_t)info.vocab_size * sizeof(float) + 4),
                 FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_model_output_read(m, "ids", after, 4), FRT_ERR_NOT_FOUND); /* an input, not an output */
    CHECK_STATUS(frt_model_input_write(m, "images", ids, 4), FRT_ERR_NOT_FOUND);
    CHECK(strstr(frt_last_error(), "images") != NULL);
    CHECK_STATUS(frt_model_input_write(m, "ids", ids, 65 * sizeof(int32_t)), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_model_input_write(m, NULL, ids, 4), FRT_ERR_INVALID_ARGUMENT);

    /* the debug hooks on the cpu backend: axpb as a host task, no GEMM timing */
    {
        frt_context *ctx = frt_model_context(m);
        frt_buffer *xb = NULL;
        CHECK_OK(frt_buffer_alloc(ctx, "axpb", FRT_SPACE_DEVICE, 8 * sizeof(float), &xb));
        float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ys[8];
        frt_stream *sx = frt_context_stream(ctx);
        CHECK_OK(frt_buffer_write(xb, 0, xs, sizeof xs, sx));
        CHECK_OK(frt_debug_axpb(sx, xb, 6, 2.0f, 0.5f));
        CHECK_OK(frt_buffer_read(xb, 0, ys, sizeof ys, sx));
        CHECK_OK(frt_stream_sync(sx));
        for (int i = 0; i < 8; i++) CHECK(ys[i] == (i < 6 ? 2.0f * xs[i] + 0.5f : xs[i]));
        CHECK_STATUS(frt_debug_axpb(sx, xb, 9, 1.0f, 0.0f), FRT_ERR_INVALID_ARGUMENT);
        double ms = 0;
        CHECK_STATUS(frt_debug_gemm_ms(ctx, 64, 3, &ms), FRT_ERR_UNSUPPORTED);
        CHECK_STATUS(frt_debug_gemm_ms(ctx, 60, 3, &ms), FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_debug_gemm_fp8_ms(ctx, 64, 3, &ms), FRT_ERR_UNSUPPORTED);
        CHECK_STATUS(frt_debug_gemm_fp8_ms(ctx, 72, 3, &ms), FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_debug_gemm_fp8_ms(ctx, 64, 0, &ms), FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_debug_gemm_fp8_ms(ctx, 64, 3, NULL), FRT_ERR_INVALID_ARGUMENT);
        frt_buffer_free(xb);
    }

    /* chat formatting without a tokenizer, and with bad arguments */
    frt_chat_turn turn = {"user", "hi"};
    char *text = NULL;
    CHECK_STATUS(frt_model_chat_format(m, &turn, 1, 1, &text), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "tokenizer") != NULL);
    CHECK_STATUS(frt_model_chat_format(m, &turn, 0, 1, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_model_chat_format(m, NULL, 1, 1, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL);
    CHECK(frt_model_tokenizer(m) == NULL && frt_model_tokenizer(NULL) == NULL);

    /* bad load parameters and directories */
    frt_model *m2 = NULL;
    p.prefill_chunk = 100;
    CHECK_STATUS(frt_model_load(tiny_dir, &p, &m2), FRT_ERR_INVALID_ARGUMENT);
    CHECK(m2 == NULL);
    p.prefill_chunk = 64;
    CHECK(frt_model_load("/nonexistent/model", &p, &m2) < 0);
    CHECK(m2 == NULL);
    /* prefill_group: 0 / 1 or a power of two up to 64, and only where the backend groups pieces
     * (docs/architectures.md "Prefill groups": the cuda backends of the dense family and of the hybrid, never
     * the cpu one; tests/test_cuda_prefill_group.c) */
    {
        static const int bad_groups[] = {-1, 3, 6, 128};
        for (size_t i = 0; i < sizeof bad_groups / sizeof bad_groups[0]; i++) {
            p.prefill_group = bad_groups[i];
            CHECK_STATUS(frt_model_load(tiny_dir, &p, &m2), FRT_ERR_INVALID_ARGUMENT);
            CHECK(m2 == NULL && strstr(frt_last_error(), "prefill_group") != NULL);
        }
        p.prefill_group = 2;
        CHECK_STATUS(frt_model_load(tiny_dir, &p, &m2), FRT_ERR_UNSUPPORTED);
        CHECK(m2 == NULL && strstr(frt_last_error(), "runs every prefill piece on its own") != NULL);
        for (int g = 0; g <= 1; g++) {
            p.prefill_group = g;
            CHECK_OK(frt_model_load(tiny_dir, &p, &m2));
            frt_model_info gi;
            if (m2) {
                CHECK_OK(frt_model_info_get(m2, &gi));
                CHECK(gi.prefill_group == 1);
            }
            frt_model_free(m2);
            m2 = NULL;
        }
        p.prefill_group = 0;
    }
    /* backend not an frt_backend, and a device the cpu backend does not have: refused, no model */
    p.backend = (frt_backend)7;
    CHECK_STATUS(frt_model_load(tiny_dir, &p, &m2), FRT_ERR_INVALID_ARGUMENT);
    CHECK(m2 == NULL && strstr(frt_last_error(), "backend 7") != NULL);
    p.backend = FRT_BACKEND_CPU;
    p.device = 1;
    CHECK_STATUS(frt_model_load(tiny_dir, &p, &m2), FRT_ERR_NO_DEVICE);
    CHECK(m2 == NULL && strstr(frt_last_error(), "device 1") != NULL);
    p.device = 0;
    /* a dense config (the dense architecture runs it) without weights: refused, naming the missing file
     * (every model_type the config parser accepts has an architecture; an unknown one fails in the parser) */
    {
        char dense[600], cfg[2048];
        snprintf(dense, sizeof dense, "%s-dense", tiny_dir);
        snprintf(cfg, sizeof cfg, "mkdir -p '%s' && printf '%%s' '{\"model_type\": \"llama\", \"hidden_size\": 64, "
                 "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
                 "\"num_key_value_heads\": 2, \"vocab_size\": 100}' > '%s/config.json'", dense, dense);
        CHECK(system(cfg) == 0);
        CHECK(frt_model_type_arch("gpt2") == NULL && frt_model_type_arch(NULL) == NULL);
        CHECK(!strcmp(frt_model_type_arch("qwen3_5_text"), "qwen35") && !strcmp(frt_model_type_arch("qwen3_5"), "qwen35"));
        CHECK(!strcmp(frt_model_type_arch("llama"), "dense") && !strcmp(frt_model_type_arch("qwen3"), "dense"));
        CHECK_STATUS(frt_model_load(dense, &p, &m2), FRT_ERR_NOT_FOUND);
        CHECK(strstr(frt_last_error(), "model.safetensors") != NULL);
        CHECK(m2 == NULL);
        snprintf(cfg, sizeof cfg, "rm -rf '%s'", dense);
        CHECK(system(cfg) == 0);
    }
    int n_dev = 0;
    frt_device_count(FRT_BACKEND_CUDA, &n_dev);
    if (n_dev == 0) { /* no GPU (or no CUDA build): a clear error, no model */
        p.backend = FRT_BACKEND_CUDA;
        CHECK(frt_model_load(tiny_dir, &p, &m2) < 0);
        CHECK(m2 == NULL);
    }
    free(before);
    free(after);
    free(snap);
    frt_model_free(m);
    frt_model_free(NULL);
}

int main(void)
{
    frt_test_seed(42);
    test_golden();
    make_tiny();
    test_schedules();
    test_progress();
    test_threads();
    test_bad_input();
    rm_tiny();
    return frt_test_report();
}
