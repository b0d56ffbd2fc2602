/*
 * test_fork.c - branch slots (frt/branch.h) on the cpu and cuda backends: B branches
 * forked from one capsule and decoded together give the same tokens and
 * logits, byte for byte, as each branch decoded alone in a single-slot
 * model (greedy and sampled, seeds frt_branch_seed(seed, i)); a stopped
 * branch is no longer stepped; a branch snapshot is an ordinary capsule
 * that a single-slot model continues identically; forking more branches
 * than slots is refused with the live state intact; too many slots for
 * memory and bad slot counts are refused at load. Models: the dense
 * goldens (tests/data/golden_dense), the demo model, and a random tiny
 * Qwen3.5 hybrid (frt_gen_model); with an FP8 E4M3 KV cache (docs/fp8.md)
 * once more: on the cpu backend the dense goldens and the tiny hybrid, on
 * cuda every random shape (the tiny hybrid, tiny-dense, tiny-qwen3,
 * llama3.2-1b, qwen3.5-0.8b); with FP8 E4M3 weights two dense goldens and
 * the tiny hybrid on the cpu, and on cuda every random shape but the demo
 * model (weights alone and with the FP8 KV cache). Runs on both backends
 * (FRT_TEST_BACKENDS): argv[1] is "cpu" or "cuda".
 */
#include "frt_test.h"

#include "frt/branch.h"
#include "frt/capsule.h"
#include "frt/model.h"
#include "gen_model.h"

#include <dirent.h>
#include <unistd.h>

#define B_MAX 6
/* Branches of a fork: 3 on the cpu; 6 on cuda, so that the batched decode's
 * GEMVs run a group of more than 4 rows (FRT_CUDA_GEMV_MAX_N 8) beside the
 * GEMVs of one row of the branches alone. */
static int B = 3;
#define T 5 /* decode steps after the first sampled token */

/* The backend (argv[1]: FRT_TEST_BACKENDS, "cpu" or "cuda"); on cuda the
 * runtime captures one set of graphs per slot (each holds its slot's
 * addresses) and the same equalities must hold bit for bit. */
static frt_backend g_backend = FRT_BACKEND_CPU;
static frt_kv_dtype g_kv = FRT_KV_DEFAULT;
static frt_weight_dtype g_wd = FRT_WEIGHT_DEFAULT; /* FRT_WEIGHT_FP8: E4M3 Linear weights (docs/fp8.md) */

static frt_model *load(const char *dir, int slots, int max_seq)
{
    frt_model_params p = frt_model_default_params();
    p.backend = g_backend;
    p.prefill_chunk = 64;
    p.max_seq = max_seq;
    p.branch_slots = slots;
    p.kv_dtype = g_kv;
    p.weight_dtype = g_wd;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    return m;
}

typedef struct run {
    int32_t tok[B_MAX][T + 1];
    float *logits; /* [B][T + 1][V]: after each step (the first: the capsule's) */
} run;

static float *logits_at(run *r, int V, int b, int t) { return r->logits + ((size_t)b * (T + 1) + (size_t)t) * V; }

/* Reads branch b's logits (selecting its slot, then slot 0 again). */
static void branch_logits(frt_model *m, int b, float *out)
{
    CHECK_OK(frt_model_branch_select(m, b));
    CHECK_OK(frt_model_logits(m, out));
    CHECK_OK(frt_model_branch_select(m, 0));
}

/* Forks cap into B branches of mb and decodes them together; branch 1 is
 * stopped after step 2 when stop_one. */
static void run_batched(frt_model *mb, const frt_capsule *cap, const frt_sampling *s, uint64_t seed, int V, run *r,
                        int stop_one)
{
    int32_t t[B_MAX];
    CHECK_OK(frt_model_fork(mb, cap, B, seed));
    CHECK(frt_model_branch_count(mb) == B);
    CHECK_OK(frt_model_branch_sample(mb, s, t));
    for (int b = 0; b < B; b++) {
        r->tok[b][0] = t[b];
        branch_logits(mb, b, logits_at(r, V, b, 0));
    }
    for (int k = 1; k <= T; k++) {
        if (stop_one && k == 3) CHECK_OK(frt_model_branch_stop(mb, 1));
        CHECK_OK(frt_model_branch_decode(mb, s, t));
        for (int b = 0; b < B; b++) {
            r->tok[b][k] = t[b];
            if (t[b] >= 0) branch_logits(mb, b, logits_at(r, V, b, k));
        }
    }
    if (stop_one) {
        CHECK(frt_model_branch_live(mb, 1) == 0);
        CHECK(r->tok[1][3] == -1 && r->tok[1][T] == -1);
        CHECK_OK(frt_model_branch_select(mb, 1));
        frt_capsule_info ci;
        frt_capsule_info_get(cap, &ci);
        CHECK(frt_model_position(mb) == ci.position + 2); /* two decode steps, then stopped */
        CHECK_OK(frt_model_branch_select(mb, 0));
    }
}

/* Branch b alone: the capsule into the single-slot model, seeded with the
 * branch's stream, the same steps; tokens and logits equal byte for byte. */
static void check_alone(frt_model *m1, const frt_capsule *cap, const frt_sampling *s, uint64_t seed, int V, run *r,
                        int b, float *lg)
{
    int32_t t;
    CHECK_OK(frt_capsule_restore(m1, cap));
    CHECK_OK(frt_model_seed(m1, frt_branch_seed(seed, b)));
    CHECK_OK(frt_model_sample(m1, s, &t));
    for (int k = 0; k <= T && r->tok[b][k] >= 0; k++) {
        if (k) CHECK_OK(frt_model_decode(m1, s, &t));
        CHECK_MSG(t == r->tok[b][k], "branch %d step %d: alone %d, batched %d", b, k, t, r->tok[b][k]);
        CHECK_OK(frt_model_logits(m1, lg));
        CHECK_MSG(!memcmp(lg, logits_at(r, V, b, k), (size_t)V * sizeof *lg), "branch %d step %d: logits differ", b,
                  k);
    }
}

/* cap: the trunk in mb; cap1: the same capsule loaded from its file into m1. */
static void check_equal_alone(frt_model *mb, frt_model *m1, const frt_capsule *cap, const frt_capsule *cap1, int V)
{
    /* greedy; sampled; sampled with penalties (each branch's counts live in
     * its own slot) */
    const frt_sampling modes[3] = {{.temperature = 0.0f, .top_p = 1.0f},
                                   {.temperature = 0.9f, .top_p = 0.95f},
                                   {.temperature = 0.8f,
                                    .top_p = 1.0f,
                                    .frequency_penalty = 1.5f,
                                    .presence_penalty = 0.5f,
                                    .repetition_penalty = 1.3f}};
    run r;
    r.logits = malloc((size_t)B * (T + 1) * V * sizeof(float));
    float *lg = malloc((size_t)V * sizeof *lg);
    if (!r.logits || !lg) abort();
    for (int mode = 0; mode < 3; mode++) {
        uint64_t seed = 1234 + (uint64_t)mode;
        run_batched(mb, cap, &modes[mode], seed, V, &r, mode == 1);
        for (int b = 0; b < B; b++) check_alone(m1, cap1, &modes[mode], seed, V, &r, b, lg);
        if (mode == 1) { /* the streams differ per branch: the sampled branches are not all the same */
            int same = 1;
            for (int k = 0; k < 3; k++) same &= r.tok[0][k] == r.tok[2][k];
            CHECK_MSG(!same || V < 64, "branches 0 and 2 sampled the same 3 tokens");
        }
    }
    free(r.logits);
    free(lg);
}

/* A fork's shared prefix ends when a slot's rows are rewritten: after the
 * fork, slot 0 is reset and prefilled with other ids (its rows below the
 * trunk's end change), then every branch steps together. On cuda the
 * batched attention read branches 1..B-1's trunk rows from slot 0 while
 * they were shared (frt_cuda_attention_batch's d_shared); now each must read
 * its own again and still equal its run alone. */
static void check_rewritten(frt_model *mb, frt_model *m1, const frt_capsule *cap, const frt_capsule *cap1, int V,
                            const int32_t *other, int n_other)
{
    const frt_sampling s = {.temperature = 0.9f, .top_p = 0.95f};
    const uint64_t seed = 4321;
    run r;
    r.logits = malloc((size_t)B * (T + 1) * V * sizeof(float));
    float *lg = malloc((size_t)V * sizeof *lg);
    if (!r.logits || !lg) abort();
    int32_t t[B_MAX];
    CHECK_OK(frt_model_fork(mb, cap, B, seed));
    CHECK_OK(frt_model_reset(mb)); /* slot 0 (selected after the fork) */
    CHECK_OK(frt_model_prefill(mb, other, n_other));
    for (int k = 0; k <= T; k++) {
        CHECK_OK(k ? frt_model_branch_decode(mb, &s, t) : frt_model_branch_sample(mb, &s, t));
        for (int b = 0; b < B; b++) {
            r.tok[b][k] = t[b];
            branch_logits(mb, b, logits_at(&r, V, b, k));
        }
    }
    for (int b = 1; b < B; b++) check_alone(m1, cap1, &s, seed, V, &r, b, lg);
    free(r.logits);
    free(lg);
}

/* Each slot keeps its own rollback record (capsule.c): after
 * check_rewritten, slot 0 no longer descends from cap (reset, other ids)
 * while slots 1..B-1 do. A fork into slot 0 alone copies its whole state;
 * the fork into B slots then copies only the fixed-size state of each (slot
 * B-1 restored last), and every branch still equals its run alone. */
static void check_refork(frt_model *mb, frt_model *m1, const frt_capsule *cap, const frt_capsule *cap1, int V)
{
    const frt_sampling s = {.temperature = 0.9f, .top_p = 1.0f};
    const uint64_t seed = 777;
    frt_restore_stats st = {0, 0, 0, 0};
    CHECK_OK(frt_model_fork(mb, cap, 1, seed));
    CHECK_OK(frt_capsule_last_restore(mb, &st));
    CHECK_MSG(st.rollback == 0, "refork: the rewritten slot 0 was restored by rollback");
    run r;
    r.logits = malloc((size_t)B * (T + 1) * V * sizeof(float));
    float *lg = malloc((size_t)V * sizeof *lg);
    if (!r.logits || !lg) abort();
    run_batched(mb, cap, &s, seed, V, &r, 0);
    CHECK_OK(frt_capsule_last_restore(mb, &st));
    CHECK_MSG(st.rollback == 1, "refork: slot %d, which descends from the trunk, was copied whole", B - 1);
    for (int b = 0; b < B; b++) check_alone(m1, cap1, &s, seed, V, &r, b, lg);
    free(r.logits);
    free(lg);
}

/* A branch's snapshot is an ordinary capsule: the single-slot model
 * continues it exactly as the branch continues in its slot. */
static void check_branch_snapshot(frt_model *mb, frt_model *m1, int V, const char *path)
{
    frt_capsule *c = NULL, *c1 = NULL;
    CHECK_OK(frt_model_branch_select(mb, 2));
    CHECK_OK(frt_capsule_snapshot(mb, FRT_TIER_DISK, path, NULL, 0, &c));
    CHECK_OK(frt_capsule_load(m1, path, &c1));
    if (!c || !c1) return;
    CHECK_OK(frt_capsule_restore(m1, c1));
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    if (!a || !b) abort();
    const frt_sampling s = {.temperature = 0.7f, .top_p = 1.0f};
    for (int k = 0; k < 4; k++) {
        int32_t ta = -1, tb = -2;
        CHECK_OK(frt_model_decode(mb, &s, &ta));
        CHECK_OK(frt_model_decode(m1, &s, &tb));
        CHECK_MSG(ta == tb, "snapshot step %d: slot %d, alone %d", k, ta, tb);
        CHECK_OK(frt_model_logits(mb, a));
        CHECK_OK(frt_model_logits(m1, b));
        CHECK_MSG(!memcmp(a, b, (size_t)V * sizeof *a), "snapshot step %d: logits differ", k);
    }
    CHECK(frt_model_position(mb) == frt_model_position(m1));
    CHECK_OK(frt_model_branch_select(mb, 0));
    free(a);
    free(b);
    frt_capsule_free(c);
    frt_capsule_free(c1);
}

/* More branches than slots: refused, nothing changed. */
static void check_too_many(frt_model *mb, const frt_capsule *cap, int V)
{
    CHECK_OK(frt_model_branch_select(mb, 1));
    int pos = frt_model_position(mb), pend = frt_model_pending(mb), nb = frt_model_branch_count(mb);
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    if (!a || !b) abort();
    CHECK_OK(frt_model_logits(mb, a));
    CHECK_STATUS(frt_model_fork(mb, cap, B + 1, 7), FRT_ERR_OUT_OF_RANGE);
    CHECK(strstr(frt_last_error(), "branch slots") != NULL);
    CHECK_STATUS(frt_model_fork(mb, cap, 0, 7), FRT_ERR_OUT_OF_RANGE);
    CHECK(frt_model_branch_selected(mb) == 1);
    CHECK(frt_model_position(mb) == pos && frt_model_pending(mb) == pend && frt_model_branch_count(mb) == nb);
    CHECK_OK(frt_model_logits(mb, b));
    CHECK(!memcmp(a, b, (size_t)V * sizeof *a));
    CHECK_STATUS(frt_model_branch_select(mb, B), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_model_branch_stop(mb, B), FRT_ERR_OUT_OF_RANGE);
    CHECK_OK(frt_model_branch_select(mb, 0));
    free(a);
    free(b);
}

/* Steps refused before any work: no fork yet, no pending token, a full
 * state (max_seq 64 with a 63-token trunk: one decode fills it). */
static void check_step_refusals(const char *dir)
{
    frt_model *m = load(dir, 2, 64);
    if (!m) return;
    int32_t t[2] = {0, 0}, ids[63];
    const frt_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    CHECK_STATUS(frt_model_branch_sample(m, &g, t), FRT_ERR_STATE);
    CHECK_STATUS(frt_model_branch_decode(m, &g, t), FRT_ERR_STATE);
    for (int i = 0; i < 63; i++) ids[i] = i % 7 + 1;
    CHECK_OK(frt_model_prefill(m, ids, 63));
    frt_capsule *c = NULL;
    CHECK_OK(frt_capsule_snapshot(m, FRT_TIER_HOST, NULL, NULL, 0, &c));
    if (c) {
        CHECK_OK(frt_model_fork(m, c, 2, 3));
        CHECK_STATUS(frt_model_branch_decode(m, &g, t), FRT_ERR_STATE); /* nothing sampled yet */
        CHECK(frt_model_position(m) == 63);
        CHECK_OK(frt_model_branch_sample(m, &g, t));
        CHECK_OK(frt_model_branch_decode(m, &g, t));
        CHECK_STATUS(frt_model_branch_decode(m, &g, t), FRT_ERR_OUT_OF_RANGE); /* full */
        CHECK(frt_model_position(m) == 64);
    }
    frt_capsule_free(c);
    frt_model_free(m);
}

/* batched: the cuda backend decodes this checkpoint's forks in one batched
 * graph (frt_model_info.branch_batched == B there). */
static void test_model(const char *dir, int batched)
{
    frt_model *mb = load(dir, B, 256), *m1 = load(dir, 1, 256);
    frt_capsule *cap = NULL, *cap1 = NULL;
    if (!mb || !m1) goto out;
    frt_model_info ib, i1;
    CHECK_OK(frt_model_info_get(mb, &ib));
    CHECK_OK(frt_model_info_get(m1, &i1));
    CHECK(ib.branch_slots == B && i1.branch_slots == 1);
    CHECK(ib.branch_state_bytes == B * ib.state_bytes && i1.branch_state_bytes == i1.state_bytes);
    /* cuda: the batched decode graph (the checks below then cover it:
     * a fork's steps run batched while every branch is live) */
    CHECK_MSG(ib.branch_batched == (g_backend == FRT_BACKEND_CUDA && batched ? B : 0), "%s: branch_batched %d", dir,
              ib.branch_batched);
    CHECK(i1.branch_batched == 0);
    CHECK_MSG(frt_model_fingerprint(mb) == frt_model_fingerprint(m1), "%s: the fingerprint depends on B", dir);
    int V = ib.vocab_size;
    int32_t ids[70];
    for (int i = 0; i < 70; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
    CHECK_OK(frt_model_prefill(mb, ids, 70));
    char path[256], bpath[256];
    snprintf(path, sizeof path, "/tmp/frt-test-fork-%d.trunk.cap", (int)getpid());
    snprintf(bpath, sizeof bpath, "/tmp/frt-test-fork-%d.branch.cap", (int)getpid());
    CHECK_OK(frt_capsule_snapshot(mb, FRT_TIER_HOST, NULL, NULL, 0, &cap));
    if (cap) CHECK_OK(frt_capsule_save(cap, path));
    CHECK_OK(frt_capsule_load(m1, path, &cap1));
    if (!cap || !cap1) goto out;
    int fails = frt_test_failed_;
    check_equal_alone(mb, m1, cap, cap1, V);
    int32_t other[70];
    for (int i = 0; i < 70; i++) other[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
    check_rewritten(mb, m1, cap, cap1, V, other, 70);
    check_refork(mb, m1, cap, cap1, V);
    check_branch_snapshot(mb, m1, V, bpath);
    check_too_many(mb, cap, V);
    if (frt_test_failed_ > fails) fprintf(stderr, "  (model %s)\n", dir);
    frt_state_info kv0;
    /* the first KV entry (the dense family's entry 0; the hybrid's follows
     * its first Gated DeltaNet layer's f32 recurrent entries) */
    for (int e = 0; frt_model_state_info(mb, e, &kv0) == 0 && strncmp(kv0.name, "kv.", 3); e++) continue;
    if (g_kv == FRT_KV_FP8) CHECK(!strcmp(kv0.dtype, "F8_E4M3"));
    printf("%s, first KV entry %s (%s), weights %s: %d branches == alone%s\n", strrchr(dir, '/') + 1, kv0.name,
           kv0.dtype, g_wd == FRT_WEIGHT_FP8 ? "fp8" : "default", B, ib.branch_batched ? " (batched)" : "");
out:
    frt_capsule_free(cap);
    frt_capsule_free(cap1);
    unlink(path);
    unlink(bpath);
    frt_model_free(mb);
    frt_model_free(m1);
}

/* Slot counts refused at load: out of range, and more slots than memory. */
static void test_load_refusals(const char *dir)
{
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 64;
    frt_model *m = NULL;
    p.branch_slots = -1;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_INVALID_ARGUMENT);
    p.branch_slots = FRT_MAX_BRANCH_SLOTS + 1;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    p.branch_slots = 1;
    CHECK_OK(frt_model_load(dir, &p, &m));
    if (!m) return;
    frt_model_info info;
    frt_device_info di;
    CHECK_OK(frt_model_info_get(m, &info));
    CHECK_OK(frt_context_device_info(frt_model_context(m), &di));
    frt_model_free(m);
    m = NULL;
    /* max_seq so that FRT_MAX_BRANCH_SLOTS slots exceed the free memory. */
    double per_token = (double)info.state_bytes / info.max_seq;
    /* 8x the free memory: the check must fail even if other processes free
     * memory between the measurement and the load (a shared machine) */
    double want = (double)di.free_bytes / (FRT_MAX_BRANCH_SLOTS / 8) / per_token;
    if (want > (1 << 24)) {
        printf("note: %zu bytes free: the out-of-memory case is not reachable here\n", di.free_bytes);
        return;
    }
    p.max_seq = ((int)want + 63) / 64 * 64;
    p.branch_slots = FRT_MAX_BRANCH_SLOTS;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_OUT_OF_MEMORY);
    CHECK(strstr(frt_last_error(), "branch slots") != NULL);
    CHECK(m == NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && frt_backend_parse(argv[1], &g_backend) < 0) {
        fprintf(stderr, "usage: test_fork [cpu|cuda]\n");
        return 2;
    }
    if (g_backend == FRT_BACKEND_CUDA) {
        int n = 0;
        frt_device_count(FRT_BACKEND_CUDA, &n);
        if (n == 0) TEST_SKIP("no CUDA device");
        B = B_MAX;
    }
    char dir[1024];
    /* The dense goldens have odd sizes the cuda backend refuses (head_dim
     * 12, hidden 84): cuda runs the random-weight dense shapes instead. */
    const char *golden[] = {"dense_llama3_gqa", "dense_llama_mqa_tied", "dense_mistral", "dense_qwen2_bias",
                            "dense_qwen3_qknorm"};
    /* cpu: every golden with the default and the FP8 KV cache, and two
     * with FP8 weights (the emulation: f32 weights holding the E4M3 values) */
    if (g_backend == FRT_BACKEND_CPU)
        for (int v = 0; v < 3; v++)
            for (size_t i = 0; i < (v == 2 ? 2 : sizeof golden / sizeof golden[0]); i++) {
                g_kv = v == 1 ? FRT_KV_FP8 : FRT_KV_DEFAULT;
                g_wd = v == 2 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
                snprintf(dir, sizeof dir, "%s/golden_dense/%s", FRT_TEST_DATA, golden[i]);
                test_model(dir, 1);
            }
    g_kv = FRT_KV_DEFAULT;
    g_wd = FRT_WEIGHT_DEFAULT;
    snprintf(dir, sizeof dir, "%s/models/frt-demo", FRT_SOURCE_DIR);
    test_model(dir, 0);
    /* cuda only, real shapes: llama3.2-1b (2.5 GB; head_dim 64: the batched
     * flash-decoding kernel, where the tiny shapes' head_dim 32 runs
     * attention slot by slot inside the batched graph) and qwen3.5-0.8b
     * (1.6 GB; the fused Gated DeltaNet step the hybrid's batched graph
     * needs: the tiny hybrid and the demo model (d_k 32) step their slots
     * one after another). batched: the cuda backend has a batched graph. */
    const struct {
        const char *shape;
        int batched;
    } shapes[] = {{"tiny", 0}, {"tiny-dense", 1}, {"tiny-qwen3", 1}, {"llama3.2-1b", 1}, {"qwen3.5-0.8b", 1}};
    size_t n_shapes = sizeof shapes / sizeof shapes[0] - (g_backend == FRT_BACKEND_CPU ? 2 : 0);
    char tiny[256];
    for (size_t i = 0; i < n_shapes; i++) {
        snprintf(tiny, sizeof tiny, "/tmp/frt-test-fork-%d-%zu", (int)getpid(), i);
        CHECK_OK(frt_gen_model_write(shapes[i].shape, 11, tiny));
        test_model(tiny, shapes[i].batched);
        if (i == 1) check_step_refusals(tiny);
        /* FP8 variants, v: bit 0 the KV cache, bit 1 the weights. On cuda
         * every shape in all three: the dense ones (tiny-dense and
         * tiny-qwen3, head_dim 32, attend slot by slot; llama3.2-1b (64)
         * through frt_dense_decode_prep_batch_fp8 and
         * frt_cuda_attention_batch_fp8), the hybrids (the tiny one, and
         * qwen3.5-0.8b: head_dim 256, slot by slot inside its batched
         * graph), the weights through the E4M3 GEMV on the batch's rows. On
         * cpu the tiny hybrid in all three (FP8 weights: the emulation) */
        const int cuda = g_backend == FRT_BACKEND_CUDA;
        const int v_max = cuda || i == 0 ? 3 : 0;
        for (int v = 1; v <= v_max; v++) {
            g_kv = v & 1 ? FRT_KV_FP8 : FRT_KV_DEFAULT;
            g_wd = v & 2 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
            test_model(tiny, shapes[i].batched);
        }
        g_kv = FRT_KV_DEFAULT;
        g_wd = FRT_WEIGHT_DEFAULT;
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tiny);
        if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tiny);
    }
    snprintf(dir, sizeof dir, "%s/golden_dense/dense_mistral", FRT_TEST_DATA);
    if (g_backend == FRT_BACKEND_CPU) { /* sized from the free memory of the host */
        test_load_refusals(dir);
        check_step_refusals(dir);
    }
    return frt_test_report();
}
