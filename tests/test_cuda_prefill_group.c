/*
 * test_cuda_prefill_group.c - prefill groups (docs/architectures.md
 * "Prefill groups"): whole prefill pieces of C rows run in one replay, each
 * product once over the group, every row with the bits of its own piece.
 *
 *  1. GEMM: a plan of j * C rows made by frt_cuda_gemm_plan_like from the
 *     C-row plan gives each piece the bytes the C-row plan gives it (checked
 *     here on the host, independently of frt_cuda_gemm_check_like, which
 *     must agree), at the tiny model's shapes, llama3.1-8b's and
 *     qwen3.5-9b's fused ones; the handle's fingerprint ignores such
 *     plans; plan_like's refusals; autotune and load refuse a handle with
 *     such plans. The same for the
 *     FP8 GEMM (frt_cuda_gemm_fp8_plan_like / _check_like).
 *  2. The model, on cuda, C = 64, with the default groups (G = 8) and
 *     with prefill_group 1: one fingerprint, and a prefill of 11 whole
 *     pieces + 13 tokens (groups of 8, 2, 1) leaves the same logits, the same
 *     capsule file bytes and the same greedy tokens; restore == cold across
 *     the groupings (a capsule of 3 pieces made by one model restores into
 *     the other, then the rest is appended); the ids port holds C * G ids;
 *     with the FP8 KV cache and with FP8 weights (per channel, the FP8
 *     GEMM's group plans) too. Over each family: tiny-dense (llama, llama3
 *     RoPE) and tiny (the hybrid: Gated DeltaNet conv state and chunked
 *     gated delta rule over a group's pieces in one call), both head_dim 32
 *     (the CUDA-core attention, one piece a launch), and each with head_dim
 *     64 (the FlashAttention pieces launch; the hybrid also with key head
 *     dim 64: the conv's fused L2 norm of q and k), and tiny-dense with
 *     head_dim 128 (the wgmma kernel: 2 heads a KV head make 128 rows a
 *     piece), built in memory. tiny-dense at head_dim 32 and 128
 *     (intermediate 1024) runs q | k | v as one GEMM (dense_cuda.c
 *     qkv_one), at head_dim 64 as three (q | k | v wider than the t0
 *     scratch).
 *  3. Refusals at load, on both families: prefill_group 2 with
 *     debug_hidden (FRT_ERR_UNSUPPORTED, the reason in the message),
 *     prefill_group 3 (FRT_ERR_INVALID_ARGUMENT); the default with
 *     debug_hidden is 1. (Block-wise FP8 checkpoints also run one piece a
 *     replay on the dense backend and do not load on the hybrid's; no such
 *     checkpoint is made here.)
 * The cpu-side checks of params.prefill_group are in tests/test_model.c;
 * the capsule suite on cuda (tests/test_capsule.c, capsule_cuda) runs with
 * the default groups, so its restore == cold checks cover them too.
 */
#include "frt_test.h"

#include "frt/capsule.h"
#include "frt/fs.h"
#include "frt/debug.h"
#include "frt/model.h"
#include "gen_model.h"
#include "util/error.h"

#if FRT_HAVE_CUDA
#include "frt/exec.h"
#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"
#include "frt_test_cuda.h"

#include <math.h>
#include <unistd.h>

/* 1. One shape: the j * C-row plan (the C-row algorithm, rank -1, or the
 * heuristic's first choice for j * C rows, rank 0) against j runs of the
 * C-row plan. The C-row algorithm must give the pieces' bytes; for rank 0
 * the result is reported, and frt_cuda_gemm_check_like must agree with the
 * host's comparison either way. */
static void gemm_shape(int C, int j, int in, int out, int rank)
{
    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create(32u << 20, &g), "gemm create");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    const int n = j * C;
    uint64_t rng = 0x5eedu + (uint64_t)in * 31u + (uint64_t)out;
    hmat x = hmat_rand(&rng, n, in, -1.0f, 1.0f), w = hmat_rand(&rng, out, in, -0.5f, 0.5f);
    dbuf dx = dalloc((size_t)n * in * 2), dw = dalloc((size_t)out * in * 2);
    dbuf dy = dalloc((size_t)n * out * 4), dp = dalloc((size_t)n * out * 4), dref = dalloc((size_t)C * out * 4);
    dput(dx, 0, x.b, (size_t)n * in * 2);
    dput(dw, 0, w.b, (size_t)out * in * 2);
    CHECK_OK(frt_cuda_gemm_plan(g, C, in, out, FRT_CUDA_F32, 0));
    const uint64_t fp = frt_cuda_gemm_fingerprint(g);
    CHECK_OK(frt_cuda_gemm_plan_like(g, n, C, in, out, FRT_CUDA_F32, 0, rank));
    CHECK_OK(frt_cuda_gemm_plan_like(g, n, C, in, out, FRT_CUDA_F32, 0, rank)); /* again: re-pointed, not added */
    CHECK(frt_cuda_gemm_plan_count(g) == 2 && frt_cuda_gemm_fingerprint(g) == fp);
    frt_cuda_gemm_plan_info pi, ps;
    CHECK(plan_of(g, n, in, out, FRT_CUDA_F32, 0, &pi) >= 0 && pi.like_n == C && pi.tune_index == rank);
    CHECK(plan_of(g, C, in, out, FRT_CUDA_F32, 0, &ps) >= 0);
    if (rank < 0) CHECK(!memcmp(pi.algo_data, ps.algo_data, sizeof pi.algo_data));
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, FRT_CUDA_F32, dx.p, dw.p, n, in, out, 0));
    for (int p = 0; p < j; p++)
        CHECK_OK(frt_cuda_gemm_run(g, g_cs, (char *)dp.p + (size_t)p * C * out * 4, FRT_CUDA_F32,
                                   (const uint16_t *)dx.p + (size_t)p * C * in, dw.p, C, in, out, 0));
    float *hy = xzalloc((size_t)n * out * 4), *hp = xzalloc((size_t)n * out * 4);
    dget(dy, 0, hy, (size_t)n * out * 4);
    dget(dp, 0, hp, (size_t)n * out * 4);
    const int host_same = !memcmp(hy, hp, (size_t)n * out * 4);
    char name[160];
    snprintf(name, sizeof name, "%d rows = %d x %d, in %d out %d, %s (algo %d tile %d): the pieces' bytes", n, j,
             C, in, out, rank < 0 ? "C-row algorithm" : "first choice", pi.algo_id, pi.tile_id);
    if (rank < 0)
        report_same(name, hy, hp, (size_t)n * out * 4);
    else
        printf("  %-*s %10s\n", FRT_TEST_CUDA_COL, name, host_same ? "identical" : "differ");
    /* not trivially equal: the values are the product's (one entry against the CPU) */
    double want = 0;
    for (int k = 0; k < in; k++) want += (double)x.f[(size_t)(n - 1) * in + k] * w.f[(size_t)(out - 1) * in + k];
    const double got = hp[(size_t)n * out - 1];
    CHECK_MSG(fabs(got - want) <= 1e-3 * (1 + fabs(want)), "%s: last entry %g, cpu %g", name, got, want);
    int same = -1;
    CHECK_OK(frt_cuda_gemm_check_like(g, g_cs, n, C, in, out, 0, FRT_CUDA_F32, dw.p, dx.p, dy.p, dref.p, &same));
    report_flag("  frt_cuda_gemm_check_like agrees with the host", same == host_same);
    /* the accumulating plans (the dense prefill's o_proj and down_proj add into the residual): y = 0 + x . w^T
     * over n rows against the pieces, on the host and by the device check */
    CHECK_OK(frt_cuda_gemm_plan(g, C, in, out, FRT_CUDA_F32, 1));
    CHECK_OK(frt_cuda_gemm_plan_like(g, n, C, in, out, FRT_CUDA_F32, 1, rank));
    dput(dx, 0, x.b, (size_t)n * in * 2); /* the check filled x with its own pattern */
    float *zero = xzalloc((size_t)n * out * 4);
    dput(dy, 0, zero, (size_t)n * out * 4);
    dput(dp, 0, zero, (size_t)n * out * 4);
    CHECK_OK(frt_cuda_gemm_run(g, g_cs, dy.p, FRT_CUDA_F32, dx.p, dw.p, n, in, out, 1));
    for (int p = 0; p < j; p++)
        CHECK_OK(frt_cuda_gemm_run(g, g_cs, (char *)dp.p + (size_t)p * C * out * 4, FRT_CUDA_F32,
                                   (const uint16_t *)dx.p + (size_t)p * C * in, dw.p, C, in, out, 1));
    dget(dy, 0, hy, (size_t)n * out * 4);
    dget(dp, 0, hp, (size_t)n * out * 4);
    const int acc_same = !memcmp(hy, hp, (size_t)n * out * 4);
    CHECK_MSG(fabs(hp[(size_t)n * out - 1] - want) <= 1e-3 * (1 + fabs(want)), "%s: accumulated last entry %g, cpu %g",
              name, hp[(size_t)n * out - 1], want);
    same = -1;
    CHECK_OK(frt_cuda_gemm_check_like(g, g_cs, n, C, in, out, 1, FRT_CUDA_F32, dw.p, dx.p, dy.p, dref.p, &same));
    report_flag("  accumulating: frt_cuda_gemm_check_like agrees with the host", same == acc_same);
    if (rank < 0) report_flag("  accumulating, the C-row algorithm: the pieces' bytes", acc_same);
    free(zero);
    free(hy);
    free(hp);
    hmat_free(&x);
    hmat_free(&w);
    dfree(&dx);
    dfree(&dw);
    dfree(&dy);
    dfree(&dp);
    dfree(&dref);
    frt_cuda_gemm_destroy(g);
}

static void test_gemm(void)
{
    printf("1. GEMM plans of j * C rows with the C-row algorithm\n");
    static const int shapes[][4] = {
        {64, 4, 256, 136},     /* tiny */
        {64, 8, 200, 520},     /* odd multiples of 8 */
        {256, 8, 4096, 4096},  /* llama3.1-8b q / o_proj */
        {256, 2, 4096, 1024},  /* k / v */
        {256, 4, 4096, 14336}, /* gate / up */
        {256, 8, 14336, 4096}, /* down */
        {256, 8, 4096, 12352}, /* qwen3.5-9b in_proj_qkv | z | b | a (fused) */
        {256, 8, 4096, 10240}, /* qwen3.5-9b q_proj (with its gate) | k_proj | v_proj (fused) */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int rank = -1; rank <= 0; rank++) gemm_shape(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], rank);

    frt_cuda_gemm *g = NULL;
    must(frt_cuda_gemm_create(32u << 20, &g), "gemm create");
    must(frt_cuda_gemm_add_stream(g, g_cs), "gemm stream");
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 256, 64, 256, 128, FRT_CUDA_F32, 0, -1), FRT_ERR_STATE); /* no source */
    CHECK_OK(frt_cuda_gemm_plan(g, 64, 256, 128, FRT_CUDA_F32, 0));
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 64, 64, 256, 128, FRT_CUDA_F32, 0, -1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 32, 64, 256, 128, FRT_CUDA_F32, 0, -1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 256, 64, 256, 128, FRT_CUDA_F32, 0, -2), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_cuda_gemm_plan(g, 128, 256, 128, FRT_CUDA_F32, 0)); /* its own algorithm */
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 128, 64, 256, 128, FRT_CUDA_F32, 0, 0), FRT_ERR_STATE);
    CHECK_OK(frt_cuda_gemm_plan(g, 4, 256, 128, FRT_CUDA_F32, 0)); /* a GEMV plan is no source */
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 256, 4, 256, 128, FRT_CUDA_F32, 0, -1), FRT_ERR_STATE);
    CHECK_STATUS(frt_cuda_gemm_plan_like(g, 256, 64, 256, 128, FRT_CUDA_F32, 0, 63), FRT_ERR_NOT_FOUND);
    CHECK_OK(frt_cuda_gemm_plan_like(g, 256, 64, 256, 128, FRT_CUDA_F32, 0, -1));
    CHECK_STATUS(frt_cuda_gemm_autotune(g, 2, g_cs), FRT_ERR_STATE);
    CHECK_STATUS(frt_cuda_gemm_load(g, "/nonexistent-tune-file"), FRT_ERR_STATE);
    frt_cuda_gemm_destroy(g);
}

/* 1b. The FP8 GEMM's group plans: the C-row plan's algorithm over j * C
 * rows, left out of the fingerprint, and the device check. */
static void test_gemm_fp8(int C, int j, int in, int out)
{
    frt_cuda_gemm *base = NULL;
    frt_cuda_gemm_fp8 *g = NULL;
    must(frt_cuda_gemm_create(32u << 20, &base), "gemm create");
    must(frt_cuda_gemm_add_stream(base, g_cs), "gemm stream");
    must(frt_cuda_gemm_fp8_create(base, &g), "gemm_fp8 create");
    const int n = j * C;
    unsigned char *wc = xzalloc((size_t)out * in);
    float *ws = xzalloc((size_t)out * 4);
    uint64_t rng = 0xf8f8u + (uint64_t)in;
    for (size_t i = 0; i < (size_t)out * in; i++) {
        unsigned char c8 = (unsigned char)(frt_rng_next(&rng) & 0xff);
        wc[i] = (c8 & 0x7f) == 0x7f ? 0x30 : c8;
    }
    for (int o = 0; o < out; o++) ws[o] = 0.01f + 0.001f * (float)(o % 7);
    dbuf dw = dalloc((size_t)out * in), dws = dalloc((size_t)out * 4), dx = dalloc((size_t)n * in);
    dbuf dxs = dalloc((size_t)n * 4), dy = dalloc((size_t)n * out * 4), dref = dalloc((size_t)C * out * 4);
    dput(dw, 0, wc, (size_t)out * in);
    dput(dws, 0, ws, (size_t)out * 4);
    CHECK_STATUS(frt_cuda_gemm_fp8_plan_like(g, n, C, in, out, FRT_CUDA_F32), FRT_ERR_STATE); /* no source */
    CHECK_OK(frt_cuda_gemm_fp8_plan(g, C, in, out, FRT_CUDA_F32));
    CHECK_STATUS(frt_cuda_gemm_fp8_plan_like(g, C, C, in, out, FRT_CUDA_F32), FRT_ERR_INVALID_ARGUMENT);
    const uint64_t fp = frt_cuda_gemm_fp8_fingerprint(g);
    CHECK_OK(frt_cuda_gemm_fp8_plan_like(g, n, C, in, out, FRT_CUDA_F32));
    CHECK_OK(frt_cuda_gemm_fp8_plan_like(g, n, C, in, out, FRT_CUDA_F32)); /* a no-op */
    CHECK(frt_cuda_gemm_fp8_plan_count(g) == 2 && frt_cuda_gemm_fp8_fingerprint(g) == fp);
    frt_cuda_gemm_fp8_plan_info a, b;
    CHECK_OK(frt_cuda_gemm_fp8_plan_get(g, 0, &a));
    CHECK_OK(frt_cuda_gemm_fp8_plan_get(g, 1, &b));
    CHECK(b.like_n == C && b.n == n && a.algo_id == b.algo_id && a.tile_id == b.tile_id &&
          a.splitk_num == b.splitk_num && a.scales_in_library == b.scales_in_library);
    int same = -1;
    CHECK_OK(frt_cuda_gemm_fp8_check_like(g, g_cs, n, C, in, out, FRT_CUDA_F32, dw.p, dws.p, dx.p, dxs.p, dy.p,
                                          dref.p, &same));
    char name[160];
    snprintf(name, sizeof name, "FP8 GEMM %d rows = %d x %d, in %d out %d: the pieces' bytes (check_like)", n, j, C,
             in, out);
    report_flag(name, same == 1);
    free(wc);
    free(ws);
    dfree(&dw);
    dfree(&dws);
    dfree(&dx);
    dfree(&dxs);
    dfree(&dy);
    dfree(&dref);
    frt_cuda_gemm_fp8_destroy(g);
    frt_cuda_gemm_destroy(base);
}

/* 2. The model: from a checkpoint directory, or (dir NULL) from an
 * in-memory checkpoint and its config (borrowed by the models). */
typedef struct model_src {
    const char *label;
    const char *dir;
    frt_checkpoint *ck;
    const frt_model_config *cfg;
} model_src;

static frt_model *load(const model_src *src, int group, frt_kv_dtype kv, frt_weight_dtype wd)
{
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA;
    p.prefill_chunk = 64;
    p.max_seq = 1024;
    p.prefill_group = group;
    p.kv_dtype = kv;
    p.weight_dtype = wd;
    frt_model *m = NULL;
    if (src->dir)
        CHECK_OK(frt_model_load(src->dir, &p, &m));
    else
        CHECK_OK(frt_model_load_checkpoint(src->ck, src->cfg, NULL, &p, &m));
    return m;
}

static void test_model(const model_src *src, frt_kv_dtype kv, frt_weight_dtype wd)
{
    printf("2. %s on cuda, groups of up to 8 pieces against one piece a replay%s%s\n", src->label,
           kv == FRT_KV_FP8 ? " (FP8 KV cache)" : "", wd == FRT_WEIGHT_FP8 ? " (FP8 weights)" : "");
    frt_model *a = load(src, 0, kv, wd), *b = load(src, 1, kv, wd);
    if (!a || !b) goto out;
    frt_model_info ia, ib;
    CHECK_OK(frt_model_info_get(a, &ia));
    CHECK_OK(frt_model_info_get(b, &ib));
    printf("  prefill_group in effect: %d (default) and %d\n", ia.prefill_group, ib.prefill_group);
    CHECK(ia.prefill_group == 8 && ib.prefill_group == 1);
    CHECK(frt_model_fingerprint(a) == frt_model_fingerprint(b));
    frt_io_info io;
    CHECK_OK(frt_model_io_info(a, 0, &io));
    CHECK(!strcmp(io.name, "ids") && io.bytes == 8 * 64 * sizeof(int32_t));
    const int V = ia.vocab_size, n = 64 * 11 + 13, cut = 64 * 3;
    int32_t *ids = xzalloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(frt_test_u64() % (uint64_t)V);
    float *la = xzalloc((size_t)V * 4), *lb = xzalloc((size_t)V * 4), *lc = xzalloc((size_t)V * 4);
    /* cold: a runs groups of 8, 2, 1 and the 13-token piece; b eleven pieces and that one */
    CHECK_OK(frt_model_reset(a));
    CHECK_OK(frt_model_prefill(a, ids, n));
    CHECK_OK(frt_model_logits(a, la));
    CHECK_OK(frt_model_reset(b));
    CHECK_OK(frt_model_prefill(b, ids, n));
    CHECK_OK(frt_model_logits(b, lb));
    report_same("  cold prefill of 717 tokens: logits", la, lb, (size_t)V * 4);
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "/tmp/frt-test-group-a-%d.cap", (int)getpid());
    snprintf(pb, sizeof pb, "/tmp/frt-test-group-b-%d.cap", (int)getpid());
    frt_capsule *ca = NULL, *cb = NULL;
    CHECK_OK(frt_capsule_snapshot(a, FRT_TIER_DISK, pa, NULL, 0, &ca));
    CHECK_OK(frt_capsule_snapshot(b, FRT_TIER_DISK, pb, NULL, 0, &cb));
    size_t na = 0, nb = 0;
    char *fa = NULL, *fb = NULL;
    CHECK_OK(frt_file_read_all(pa, (size_t)1 << 30, &fa, &na));
    CHECK_OK(frt_file_read_all(pb, (size_t)1 << 30, &fb, &nb));
    CHECK(fa && fb && na > 0);
    report_flag("  capsule files of the two states: the same bytes", fa && fb && na == nb && !memcmp(fa, fb, na));
    free(fa);
    free(fb);
    frt_capsule_free(ca);
    frt_capsule_free(cb);
    unlink(pa);
    unlink(pb);
    int32_t ta[8], tb[8];
    CHECK_OK(frt_model_sample(a, NULL, &ta[0]));
    CHECK_OK(frt_model_sample(b, NULL, &tb[0]));
    for (int i = 1; i < 8; i++) {
        CHECK_OK(frt_model_decode(a, NULL, &ta[i]));
        CHECK_OK(frt_model_decode(b, NULL, &tb[i]));
    }
    report_same("  then 8 greedy tokens", ta, tb, sizeof ta);

    /* restore == cold across groupings, through capsule files (an
     * in-memory capsule belongs to its model's context): 3 pieces in a (a
     * group of 2 and a piece), restored into b, the rest appended there (8
     * whole pieces one by one); and b's restored into a, the rest appended
     * in a group of 8. Both against a's cold logits. */
    for (int dir_ab = 0; dir_ab < 2; dir_ab++) {
        frt_model *from = dir_ab ? b : a, *to = dir_ab ? a : b;
        frt_capsule *c3 = NULL, *back = NULL;
        CHECK_OK(frt_model_reset(from));
        CHECK_OK(frt_model_prefill(from, ids, cut));
        CHECK_OK(frt_capsule_snapshot(from, FRT_TIER_DISK, pa, NULL, 0, &c3));
        frt_capsule_free(c3);
        CHECK_OK(frt_model_reset(to));
        CHECK_OK(frt_capsule_load(to, pa, &back));
        if (back) {
            CHECK_OK(frt_capsule_restore(to, back));
            CHECK_OK(frt_model_prefill(to, ids + cut, n - cut));
            CHECK_OK(frt_model_logits(to, lc));
            report_same(dir_ab ? "  b's capsule at 3 pieces into a, append 525 (a group of 8): cold logits"
                               : "  a's capsule at 3 pieces into b, append 525 (piece by piece): cold logits",
                        lc, la, (size_t)V * 4);
            frt_capsule_free(back);
        }
        unlink(pa);
    }
    /* one piece at a time in a (calls of C tokens) against its groups */
    CHECK_OK(frt_model_reset(a));
    for (int done = 0; done < n; done += 64)
        CHECK_OK(frt_model_prefill(a, ids + done, n - done < 64 ? n - done : 64));
    CHECK_OK(frt_model_logits(a, lc));
    report_same("  a, one call a piece: cold logits", lc, la, (size_t)V * 4);
    free(ids);
    free(la);
    free(lb);
    free(lc);
out:
    frt_model_free(a);
    frt_model_free(b);
}

static void test_refusals(const char *dir)
{
    printf("3. refusals at load (%s)\n", dir);
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA;
    p.prefill_chunk = 64;
    p.max_seq = 512;
    frt_model *m = NULL;
    p.prefill_group = 2;
    p.debug_hidden = 1;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_UNSUPPORTED);
    CHECK(m == NULL && strstr(frt_last_error(), "debug_hidden") != NULL);
    p.debug_hidden = 0;
    p.prefill_group = 3;
    CHECK_STATUS(frt_model_load(dir, &p, &m), FRT_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    /* the default with debug_hidden: one piece a replay, no error */
    p.prefill_group = 0;
    p.debug_hidden = 1;
    CHECK_OK(frt_model_load(dir, &p, &m));
    frt_model_info info;
    if (m) {
        CHECK_OK(frt_model_info_get(m, &info));
        CHECK(info.prefill_group == 1);
    }
    frt_model_free(m);
}
#endif /* FRT_HAVE_CUDA */

int main(void)
{
    frt_test_seed(41);
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    frt_test_cuda_start();
    test_gemm();
    test_gemm_fp8(64, 4, 256, 128);
    test_gemm_fp8(256, 8, 4096, 4096);
    test_gemm_fp8(256, 8, 14336, 4096);
    test_gemm_fp8(256, 8, 4096, 12352); /* qwen3.5-9b in_proj_qkv | z | b | a */
    char dir[256], dir_h[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-cuda-group-%d", (int)getpid());
    snprintf(dir_h, sizeof dir_h, "/tmp/frt-test-cuda-group-hybrid-%d", (int)getpid());
    CHECK_OK(frt_gen_model_write("tiny-dense", 3, dir));
    CHECK_OK(frt_gen_model_write("tiny", 3, dir_h));
    /* head_dim 64 variants in memory: the FlashAttention pieces launch (head_dim 32 takes the
     * CUDA-core kernel); the hybrid's key head dim 64 makes 2 kd = 256 channels, the conv's fused
     * L2 norm of q and k */
    frt_model_config cd, ch, cw;
    frt_checkpoint *ckd = NULL, *ckh = NULL, *ckw = NULL;
    CHECK_OK(frt_gen_model_config("tiny-dense", &cd));
    CHECK_OK(frt_gen_model_config("tiny-dense", &cw));
    cw.head_dim = cw.rotary_dim = 128; /* 2 heads a KV head: 128 rows a piece, the wgmma kernel */
    cw.intermediate_size = 1024;       /* q | k | v (1024 wide) fits t0: the one-GEMM prefill path */
    CHECK_OK(frt_gen_model_config("tiny", &ch));
    cd.head_dim = cd.rotary_dim = 64;
    ch.head_dim = 64;
    ch.rotary_dim = 16; /* partial_rotary_factor 0.25 */
    ch.lin_k_head_dim = 64;
    CHECK_OK(frt_gen_model_build_config(&cd, 3, &ckd));
    CHECK_OK(frt_gen_model_build_config(&ch, 3, &ckh));
    CHECK_OK(frt_gen_model_build_config(&cw, 3, &ckw));
    const model_src srcs[] = {
        {"tiny-dense", dir, NULL, NULL},
        {"tiny (the hybrid)", dir_h, NULL, NULL},
        {"tiny-dense with head_dim 64", NULL, ckd, &cd},
        {"tiny (the hybrid) with head_dim 64 and key head dim 64", NULL, ckh, &ch},
        {"tiny-dense with head_dim 128", NULL, ckw, &cw},
    };
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        if (!srcs[i].dir && !srcs[i].ck) continue; /* its build failed (reported above) */
        test_model(&srcs[i], FRT_KV_DEFAULT, FRT_WEIGHT_DEFAULT);
        test_model(&srcs[i], FRT_KV_FP8, FRT_WEIGHT_DEFAULT);
        test_model(&srcs[i], FRT_KV_DEFAULT, FRT_WEIGHT_FP8);
    }
    test_refusals(dir);
    test_refusals(dir_h);
    frt_checkpoint_close(ckd);
    frt_checkpoint_close(ckh);
    frt_checkpoint_close(ckw);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, dir_h);
    CHECK(system(cmd) == 0);
    return frt_test_report();
#endif
}
