/*
 * frt_test_fp8.h - what the FP8 accuracy tests share (test_kv_fp8.c,
 * test_fp8_weights.c, test_cuda_fp8_kv.c, test_cuda_fp8_weights.c): two
 * models of one checkpoint in two precisions or on two backends, compared.
 * Include after frt_test.h and frt/model.h.
 *
 *   frt_test_each_subdir(root, fn)       fn(dir, name) for every entry of root; the count
 *   frt_test_load_kv(dir, kv, scales, max_seq, expect)  a cpu model with a KV dtype and scales file
 *   frt_test_prefill_logits(m, ids, n, out)  reset, prefill, the last logits
 *   frt_test_greedy(a, b, ids, n, V, steps, &st)  greedy decode on both while they agree
 *   frt_test_greedy_margin(label, ref, m, V, steps, bound)  greedy while ref's margin allows
 *   frt_test_hidden(label, ref, m, other, rows, H, L, bound)  per-layer hidden states
 *   frt_test_three_way(label, ref, m, other, ids, n, bound, what)  all of the above on one prefill
 *   frt_test_golden_prompts(a, b, g, what, hook, user)  last logits of a golden file's prompts
 *   frt_test_round_trip_diff(t, got, fp8)  elements of got off t's per-row E4M3 round trip (or values)
 *   frt_test_golden_greedy(a, b, g, steps, what, value)  frt_test_greedy on a golden file's greedy.prompt
 *   frt_test_capsules_cross(a, b, &ca, &cb)  a capsule of each, each refused by the other
 */
#ifndef FRT_TEST_FP8_H
#define FRT_TEST_FP8_H

#include "frt/capsule.h"
#include "frt/debug.h"
#include "frt/model.h"
#include "frt/safetensors.h"
#include "frt_test.h"
#include "kernels/cpu/fp8.h"

#include <dirent.h>

/* fn(path, name) for every entry of root except dot files; the count. */
static inline int frt_test_each_subdir(const char *root, void (*fn)(const char *dir, const char *name))
{
    DIR *d = opendir(root);
    CHECK_MSG(d != NULL, "%s is absent", root);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        fn(dir, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* dir loaded on the cpu backend (C 64, max_seq) with kv_dtype kv and the
 * kv_scales file `scales` (NULL: none); the status must be `expect` (then
 * no model). */
static inline frt_model *frt_test_load_kv(const char *dir, frt_kv_dtype kv, const char *scales, int max_seq,
                                          int expect)
{
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = 64;
    p.max_seq = max_seq;
    p.kv_dtype = kv;
    p.kv_scales = scales;
    frt_model *m = NULL;
    CHECK_STATUS(frt_model_load(dir, &p, &m), expect);
    if (expect) CHECK(m == NULL);
    return m;
}

/* Resets m, prefills ids [n], copies the last logits into out [vocab]. */
static inline int frt_test_prefill_logits(frt_model *m, const int32_t *ids, int n, float *out)
{
    int rc = frt_model_reset(m);
    if (!rc) rc = frt_model_prefill(m, ids, n);
    if (!rc) rc = frt_model_logits(m, out);
    return rc;
}

typedef struct frt_test_greedy_stats {
    double max_err;  /* the largest ||b - a|| / ||a|| of the logits over the steps */
    int steps;       /* steps decoded */
    int diverged_at; /* the first step whose tokens differ; -1: none */
    float margin;    /* a's top-2 margin there */
} frt_test_greedy_stats;

/* Greedy decode of `steps` tokens on a and b from the prompt ids [n], the
 * logits compared at every step while the two pick the same tokens. */
static inline void frt_test_greedy(frt_model *a, frt_model *b, const int32_t *ids, int n, int V, int steps,
                                   frt_test_greedy_stats *st)
{
    float *la = xmalloc((size_t)V * 4), *lb = xmalloc((size_t)V * 4);
    CHECK_OK(frt_test_prefill_logits(a, ids, n, la));
    CHECK_OK(frt_test_prefill_logits(b, ids, n, lb));
    st->max_err = 0;
    st->steps = 0;
    st->diverged_at = -1;
    for (int t = 0; t < steps; t++) {
        int32_t ta = -1, tb = -1;
        CHECK_OK(t ? frt_model_decode(a, NULL, &ta) : frt_model_sample(a, NULL, &ta));
        CHECK_OK(t ? frt_model_decode(b, NULL, &tb) : frt_model_sample(b, NULL, &tb));
        CHECK_OK(frt_model_logits(a, la));
        CHECK_OK(frt_model_logits(b, lb));
        double e = frt_test_rel_err(lb, la, (size_t)V);
        if (e > st->max_err) st->max_err = e;
        st->steps = t + 1;
        if (ta != tb) {
            st->diverged_at = t;
            st->margin = frt_test_top2_margin(la, (size_t)V);
            break;
        }
    }
    free(la);
    free(lb);
}

/* Greedy decode of up to `steps` tokens on ref and m (both prefilled):
 * the logits within `bound` norm-wise at every step, the tokens equal
 * while ref's top-2 margin exceeds 4x the max |logit difference|. */
static inline void frt_test_greedy_margin(const char *label, frt_model *ref, frt_model *m, int V, int steps,
                                          double bound)
{
    float *la = xmalloc((size_t)V * 4), *lb = xmalloc((size_t)V * 4);
    int compared = 0;
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        int32_t tr = -1, tm = -1;
        CHECK_OK(frt_model_logits(ref, la));
        CHECK_OK(frt_model_logits(m, lb));
        double e = frt_test_rel_err(lb, la, (size_t)V), tol = 4 * frt_test_max_abs_diff(lb, la, (size_t)V);
        if (e > worst) worst = e;
        CHECK_MSG(e <= bound, "%s greedy step %d: logits rel err %.3e", label, i, e);
        CHECK_OK(i ? frt_model_decode(ref, NULL, &tr) : frt_model_sample(ref, NULL, &tr));
        CHECK_OK(i ? frt_model_decode(m, NULL, &tm) : frt_model_sample(m, NULL, &tm));
        float margin = frt_test_top2_margin(la, (size_t)V);
        if (margin <= tol) {
            printf("  greedy: stopped at step %d (reference top-2 margin %.3e <= 4 x max |diff| = %.3e)\n", i,
                   (double)margin, tol);
            break;
        }
        CHECK_MSG(tr == tm, "%s greedy step %d: %d vs reference %d (margin %.3e, 4 x max |diff| %.3e)", label, i, tm,
                  tr, (double)margin, tol);
        if (tr != tm) break;
        compared++;
    }
    printf("  greedy: %d of %d steps equal, logits rel err at most %.3e\n", compared, steps, worst);
    free(la);
    free(lb);
}

/* The hidden states of the last prefill's last `rows` rows (debug_hidden:
 * the embedding, each layer, the final norm): m against ref within `bound`
 * norm-wise, m against `other` reported (NULL: none). The largest error. */
static inline double frt_test_hidden(const char *label, frt_model *ref, frt_model *m, frt_model *other, int rows,
                                     int H, int L, double bound, const char *other_what)
{
    float *a = xmalloc((size_t)rows * H * 4), *b = xmalloc((size_t)rows * H * 4), *c = xmalloc((size_t)rows * H * 4);
    double worst = 0;
    for (int idx = 0; idx <= L + 1; idx++) {
        CHECK_OK(frt_model_debug_hidden(ref, idx, a, rows));
        CHECK_OK(frt_model_debug_hidden(m, idx, b, rows));
        char name[32];
        snprintf(name, sizeof name, idx == 0 ? "embed" : idx <= L ? "layer %d" : "final norm", idx - 1);
        double e = frt_test_rel_err(b, a, (size_t)rows * H);
        if (other) {
            CHECK_OK(frt_model_debug_hidden(other, idx, c, rows));
            printf("  %-12s %.3e   (vs %s %.3e)\n", name, e, other_what, frt_test_rel_err(b, c, (size_t)rows * H));
        } else {
            printf("  %-12s %.3e\n", name, e);
        }
        CHECK_MSG(e <= bound && !isnan(e), "%s %s: rel err %.3e", label, name, e);
        if (e > worst) worst = e;
    }
    free(a);
    free(b);
    free(c);
    return worst;
}

/* ref, m and other (debug_hidden on all three, prefill chunk 64) prefill
 * ids [n] (n > 64); m against ref within `bound`: the hidden states of the
 * last piece (frt_test_hidden), the last logits, then a 24-step greedy
 * decode (frt_test_greedy_margin); m against other reported as `what`. */
static inline void frt_test_three_way(const char *label, frt_model *ref, frt_model *m, frt_model *other,
                                      const int32_t *ids, int n, double bound, const char *what)
{
    frt_model_info info;
    CHECK_OK(frt_model_info_get(ref, &info));
    const int V = info.vocab_size;
    float *la = xmalloc((size_t)V * 4), *lb = xmalloc((size_t)V * 4), *lc = xmalloc((size_t)V * 4);
    CHECK_OK(frt_test_prefill_logits(ref, ids, n, la));
    CHECK_OK(frt_test_prefill_logits(m, ids, n, lb));
    CHECK_OK(frt_test_prefill_logits(other, ids, n, lc));
    frt_test_hidden(label, ref, m, other, n - 64, info.hidden_size, info.n_layers, bound, what);
    double e = frt_test_rel_err(lb, la, (size_t)V);
    printf("  %-12s %.3e   (vs %s %.3e)\n", "logits", e, what, frt_test_rel_err(lb, lc, (size_t)V));
    CHECK_MSG(e <= bound && !isnan(e), "%s logits: rel err %.3e", label, e);
    frt_test_greedy_margin(label, ref, m, V, 24, bound);
    free(la);
    free(lb);
    free(lc);
}

/* dir's golden.safetensors, opened (CHECK_OK on the open); NULL when it
 * could not be. Close with frt_safetensors_close. */
static inline frt_safetensors *frt_test_open_golden(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    frt_safetensors *g = NULL;
    CHECK_OK(frt_safetensors_open(path, &g));
    return g;
}

typedef void (*frt_test_prompt_fn)(frt_model *a, frt_model *b, const int32_t *ids, int n, void *user);

/* The last logits of each prompt<i>.ids of golden file g on a and b,
 * ||b - a|| / ||a|| printed per prompt (b "vs" `what`); hook(a, b, ids, n,
 * user) right after prompt 1's prefills (NULL: none). The largest error. */
static inline double frt_test_golden_prompts(frt_model *a, frt_model *b, const frt_safetensors *g, const char *what,
                                             frt_test_prompt_fn hook, void *user)
{
    frt_model_info info;
    CHECK_OK(frt_model_info_get(a, &info));
    const int V = info.vocab_size;
    float *la = xmalloc((size_t)V * 4), *lb = xmalloc((size_t)V * 4);
    double worst = 0;
    for (int i = 0; i < 16; i++) {
        char name[64];
        snprintf(name, sizeof name, "prompt%d.ids", i);
        const frt_tensor *ids = frt_safetensors_find(g, name);
        if (!ids) break;
        int n = (int)frt_tensor_numel(ids);
        CHECK_OK(frt_test_prefill_logits(a, ids->data, n, la));
        CHECK_OK(frt_test_prefill_logits(b, ids->data, n, lb));
        double e = frt_test_rel_err(lb, la, (size_t)V);
        printf("  prompt%d (%d tokens): %s, last logits rel err %.3e\n", i, n, what, e);
        if (e > worst) worst = e;
        if (i == 1 && hook) hook(a, b, ids->data, n, user);
    }
    free(la);
    free(lb);
    return worst;
}

/* frt_test_greedy of `steps` tokens from golden file g's greedy.prompt on a
 * and b, printed after "  <what> <value>; " with the first divergence and
 * a's top-2 margin there; the stats. */
static inline frt_test_greedy_stats frt_test_golden_greedy(frt_model *a, frt_model *b, const frt_safetensors *g,
                                                           int steps, const char *what, double value)
{
    frt_test_greedy_stats gs = {0, 0, -1, 0};
    frt_model_info info;
    CHECK_OK(frt_model_info_get(a, &info));
    const frt_tensor *gp = frt_safetensors_find(g, "greedy.prompt");
    CHECK(gp != NULL);
    if (gp) frt_test_greedy(a, b, gp->data, (int)frt_tensor_numel(gp), info.vocab_size, steps, &gs);
    printf("  %s %.3e; greedy: %d steps, max rel err %.3e; ", what, value, gs.steps, gs.max_err);
    if (gs.diverged_at < 0) printf("no divergence in %d tokens\n", steps);
    else printf("first divergence at step %d (top-2 margin %.3e)\n", gs.diverged_at, gs.margin);
    return gs;
}

/* a and b (two precisions of one checkpoint) prefill the same 20 ids and
 * snapshot them (host tier) into *ca and *cb; each refuses the other's
 * capsule (FRT_ERR_MISMATCH). The caller frees the capsules. */
static inline void frt_test_capsules_cross(frt_model *a, frt_model *b, frt_capsule **ca, frt_capsule **cb)
{
    frt_model_info info;
    CHECK_OK(frt_model_info_get(a, &info));
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = (3 + 7 * i) % info.vocab_size;
    CHECK_OK(frt_model_prefill(a, ids, 20));
    CHECK_OK(frt_model_prefill(b, ids, 20));
    CHECK_OK(frt_capsule_snapshot(a, FRT_TIER_HOST, NULL, NULL, 0, ca));
    CHECK_OK(frt_capsule_snapshot(b, FRT_TIER_HOST, NULL, NULL, 0, cb));
    CHECK_STATUS(frt_capsule_restore(b, *ca), FRT_ERR_MISMATCH);
    CHECK_STATUS(frt_capsule_restore(a, *cb), FRT_ERR_MISMATCH);
}

/* Elements of got [d0, d1 = numel / d0] that differ from the per-row E4M3
 * round trip decode(encode(w / s)) * s, s = max|row| / 448 (fp8), or from
 * the values (!fp8), of tensor t, recomputed element by element. */
static inline long frt_test_round_trip_diff(const frt_tensor *t, const float *got, int fp8)
{
    int64_t d0 = t->shape[0], d1 = (int64_t)frt_tensor_numel(t) / d0; /* conv1d: [ch, 1, kernel] */
    float *w = xmalloc((size_t)(d0 * d1) * sizeof(float));
    CHECK_OK(frt_tensor_to_f32(t, w));
    long bad = 0;
    for (int64_t r = 0; r < d0; r++) {
        const float *wr = w + r * d1;
        float amax = 0;
        for (int64_t c = 0; c < d1; c++) amax = fabsf(wr[c]) > amax ? fabsf(wr[c]) : amax;
        float s = amax > 0 ? amax / 448.0f : 1.0f, inv = 1.0f / s;
        for (int64_t c = 0; c < d1; c++) {
            float want = fp8 ? frt_fp8_e4m3_decode(frt_fp8_e4m3_encode(wr[c] * inv)) * s : wr[c];
            bad += memcmp(&want, &got[r * d1 + c], sizeof want) != 0;
        }
    }
    free(w);
    return bad;
}

#endif /* FRT_TEST_FP8_H */
