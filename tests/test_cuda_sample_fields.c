/*
 * test_cuda_sample_fields.c - the sampling fields of frt/sampling.h on the
 * device against their CPU twins, on random logits at the 151936 and 248320
 * vocabularies (Qwen3 / Qwen3.5):
 *   - frt_cuda_logits_adjust == frt_cpu_logits_adjust bit for bit (bias,
 *     repetition, frequency and presence penalties, random counts); with
 *     every field off it leaves its output untouched;
 *   - frt_cuda_sample_step == the CPU step (adjust + frt_cpu_sample_minp with
 *     the same u, or argmax) over many parameter sets and draws: mismatches
 *     0 (the association of the prefix sums can move a token only when u
 *     falls within ~1e-16 of a boundary); the RNG advances as the twin's;
 *   - min_p = 1 at temperature 5 is the argmax; a +100 bias forces its token;
 *   - frt_cuda_logprobs == frt_cpu_logprobs: the same top ids, |d| <= 1e-5;
 *     nothing written when the step asks for none;
 *   - the allowed-token mask (step 3b): frt_cuda_logits_adjust with a
 *     random half mask == frt_cpu_logits_adjust + frt_cpu_logits_mask bit
 *     for bit; sample_step with the mask == the CPU step (mismatches 0), no
 *     masked token drawn, logprobs over the allowed set; a one-token mask
 *     forces its token at T 0..50 with logprob 0;
 *   - bad arguments fail with FRT_ERR_INVALID_ARGUMENT (before any device
 *     call, so they also run without a GPU);
 *   - timing (CUDA events over captured graphs): frt_cuda_sample_token alone,
 *     frt_cuda_sample_step with every field off (its two extra launches
 *     return at once), and with penalties + bias on, greedy and sampled.
 * Exits 77 (skipped) without a CUDA device, after the argument checks.
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "frt/exec.h"
#include "kernels/cuda/kernels_cuda.h"
#include "util/bf16.h"

#include "frt_test_cuda.h"
#include "frt_test_sampling.h"

/* The device buffers of one vocabulary. */
typedef struct dev {
    int n;
    dbuf logits, adj, counts, seen, params, rng, token, lp, ws, mask_on, mask;
    size_t ws_bytes;
} dev;

static dev dev_make(int n)
{
    dev d;
    memset(&d, 0, sizeof d);
    d.n = n;
    d.logits = dalloc((size_t)n * 4);
    d.adj = dalloc((size_t)n * 4);
    d.counts = dalloc((size_t)n * 4);
    d.seen = dalloc((size_t)n);
    d.params = dalloc(sizeof(frt_sampling));
    d.rng = dalloc(8);
    d.token = dalloc(4);
    d.lp = dalloc(sizeof(frt_logprobs));
    d.mask_on = dalloc(4);
    d.mask = dalloc((size_t)(n + 31) / 32 * 4);
    const int32_t off = 0;
    dput(d.mask_on, 0, &off, 4);
    must(frt_cuda_sample_workspace_bytes(n, &d.ws_bytes), "workspace bytes");
    d.ws = dalloc(d.ws_bytes);
    return d;
}

static void dev_free(dev *d)
{
    dbuf *all[] = {&d->logits, &d->adj,   &d->counts, &d->seen,    &d->params, &d->rng,
                   &d->token,  &d->lp,    &d->ws,     &d->mask_on, &d->mask};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dfree(all[i]);
}

static void random_counts(int32_t *c, uint8_t *seen, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t r = frt_test_u64();
        c[i] = (r & 7) == 0 ? (int32_t)((r >> 8) % 5) : 0;
        seen[i] = c[i] > 0 || ((r >> 4) & 7) == 0;
    }
}

static void with_bias(frt_sampling *s, int n, int k)
{
    s->n_logit_bias = k;
    for (int j = 0; j < k; j++)
        s->logit_bias[j] = (frt_logit_bias){(int32_t)(((uint64_t)j * 7919u + 13u) % (uint64_t)n),
                                            frt_test_rand(-5, 5)};
}

static int step(dev *d, const frt_sampling *s)
{
    dput(d->params, 0, s, sizeof *s);
    int rc = frt_cuda_sample_step(g_cs, d->token.p, d->logits.p, d->n, d->params.p, d->counts.p, d->seen.p,
                                  d->mask_on.p, d->mask.p, d->rng.p, d->lp.p, d->ws.p, d->ws_bytes);
    sync_st();
    int32_t t = -7;
    dget(d->token, 0, &t, 4);
    return rc < 0 ? rc : t;
}

static void test_adjust_bits(dev *d, const float *l, const int32_t *c, const uint8_t *seen)
{
    const int n = d->n;
    float *want = fnew((size_t)n), *got = fnew((size_t)n);
    frt_sampling s = frt_test_sampling(1.0f);
    s.presence_penalty = 0.6f;
    s.frequency_penalty = -0.4f;
    s.repetition_penalty = 1.25f;
    with_bias(&s, n, FRT_SAMPLING_MAX_BIAS);
    dput(d->params, 0, &s, sizeof s);
    CHECK_OK(frt_cpu_logits_adjust(want, l, n, &s, c, seen));
    CHECK_OK(frt_cuda_logits_adjust(g_cs, d->adj.p, d->logits.p, n, d->params.p, d->counts.p, d->seen.p, NULL,
                                    NULL));
    sync_st();
    dget(d->adj, 0, got, (size_t)n * 4);
    char name[96];
    snprintf(name, sizeof name, "logits_adjust n %d, 300 biases, 3 penalties", n);
    report_same(name, got, want, (size_t)n * 4);
    /* off: the output is not touched */
    frt_sampling off = frt_test_sampling(0.7f);
    dput(d->params, 0, &off, sizeof off);
    dsentinel(d->adj);
    CHECK_OK(frt_cuda_logits_adjust(g_cs, d->adj.p, d->logits.p, n, d->params.p, d->counts.p, d->seen.p,
                                    d->mask_on.p, d->mask.p));
    sync_st();
    dget(d->adj, 0, got, (size_t)n * 4);
    int untouched = 1;
    for (int i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &got[i], 4);
        untouched &= b == 0x7F7F7F7Fu;
    }
    snprintf(name, sizeof name, "logits_adjust n %d, every field off: output untouched", n);
    report_flag(name, untouched);
    free(want);
    free(got);
}

static void check_lp(dev *d, const float *used, int token, const frt_sampling *s, int *bad)
{
    frt_logprobs got, want;
    dget(d->lp, 0, &got, sizeof got);
    CHECK_OK(frt_cpu_logprobs(&want, used, d->n, token, s->top_logprobs));
    int ok = got.token == want.token && got.n_top == want.n_top && fabsf(got.logprob - want.logprob) <= 1e-5f;
    for (int k = 0; k < want.n_top; k++)
        ok &= got.top_token[k] == want.top_token[k] && fabsf(got.top_logprob[k] - want.top_logprob[k]) <= 1e-5f;
    *bad += !ok;
}

static void test_steps(dev *d, const float *l, const int32_t *c, const uint8_t *seen)
{
    const int n = d->n;
    float *adj = fnew((size_t)n), *scratch = fnew(FRT_CPU_SAMPLE_SCRATCH(n));
    frt_sampling ps[8];
    for (int i = 0; i < 8; i++) ps[i] = frt_test_sampling(1.0f);
    ps[0].temperature = 0.0f;                                  /* greedy, off */
    ps[1].temperature = 0.7f, ps[1].top_k = 20, ps[1].top_p = 0.95f; /* Qwen's defaults */
    ps[2].min_p = 0.05f;
    ps[3].min_p = 0.1f, ps[3].top_k = 50, ps[3].top_p = 0.9f, ps[3].temperature = 1.3f;
    ps[4].presence_penalty = 1.5f, ps[4].frequency_penalty = 0.5f, ps[4].repetition_penalty = 1.1f;
    ps[5] = ps[4], ps[5].temperature = 0.0f, with_bias(&ps[5], n, 50);
    ps[6] = ps[3], ps[6].repetition_penalty = 0.9f, with_bias(&ps[6], n, 300);
    ps[7].temperature = 0.8f, ps[7].frequency_penalty = -1.0f, ps[7].min_p = 0.02f;
    int mism = 0, rng_bad = 0, lp_bad = 0, total = 0;
    for (int p = 0; p < 8; p++) {
        ps[p].logprobs = 1;
        ps[p].top_logprobs = p % 2 ? 20 : 5;
        uint64_t host = 1000 + (uint64_t)p;
        dput(d->rng, 0, &host, 8);
        for (int r = 0; r < 25; r++, total++) {
            const float *used = NULL;
            int want = frt_test_sample_ref(l, n, c, seen, &ps[p], &host, adj, scratch, &used);
            int got = step(d, &ps[p]);
            uint64_t drng = 0;
            dget(d->rng, 0, &drng, 8);
            mism += got != want;
            rng_bad += drng != host;
            if (got >= 0) check_lp(d, used, got, &ps[p], &lp_bad);
        }
    }
    char name[96];
    snprintf(name, sizeof name, "sample_step n %d == CPU step (%d draws, 8 sets), mismatches", n, total);
    report(name, (double)mism, 0.0);
    snprintf(name, sizeof name, "sample_step n %d: RNG as the twin's, mismatches", n);
    report(name, (double)rng_bad, 0.0);
    snprintf(name, sizeof name, "logprobs n %d == frt_cpu_logprobs (1e-5), mismatches", n);
    report(name, (double)lp_bad, 0.0);
    /* min_p = 1 at temperature 5 is the argmax; +100 forces its token */
    frt_sampling mp = frt_test_sampling(5.0f);
    mp.min_p = 1.0f;
    int greedy_ok = 1, forced_ok = 1;
    for (int r = 0; r < 20; r++) greedy_ok &= step(d, &mp) == frt_cpu_argmax(l, n);
    frt_sampling f = frt_test_sampling(1.5f);
    f.n_logit_bias = 1;
    f.logit_bias[0] = (frt_logit_bias){n / 3, 100.0f};
    for (int r = 0; r < 20; r++) forced_ok &= step(d, &f) == n / 3;
    snprintf(name, sizeof name, "n %d: min_p 1 at T 5 is the argmax (20 draws)", n);
    report_flag(name, greedy_ok);
    snprintf(name, sizeof name, "n %d: logit_bias +100 forces its token (20 draws)", n);
    report_flag(name, forced_ok);
    /* no logprobs asked: the port is not written */
    dsentinel(d->lp);
    frt_sampling q = frt_test_sampling(0.9f);
    step(d, &q);
    frt_logprobs lp;
    dget(d->lp, 0, &lp, sizeof lp);
    snprintf(name, sizeof name, "n %d: logprobs off: nothing written", n);
    report_flag(name, lp.token == 0x7F7F7F7F && lp.n_top == 0x7F7F7F7F);
    free(adj);
    free(scratch);
}

/* ---- the allowed-token mask (step 3b) ---------------------------------------- */

static void mask_set(dev *d, const uint32_t *mask)
{
    const int32_t on = mask != NULL;
    dput(d->mask_on, 0, &on, 4);
    if (mask) dput(d->mask, 0, mask, (size_t)(d->n + 31) / 32 * 4);
}

/* The mask applied by the device: bit-exact adjust (with and without the
 * penalties), every step equal to the CPU step over a random half mask,
 * a one-token mask forcing its token at any temperature, masked tokens
 * never drawn, logprobs over the allowed set. */
static void test_mask(dev *d, const float *l, const int32_t *c, const uint8_t *seen)
{
    const int n = d->n, words = (n + 31) / 32;
    uint32_t *mask = xzalloc((size_t)words * 4);
    frt_test_random_mask(mask, n, 8);
    float *want = fnew((size_t)n), *got = fnew((size_t)n), *scratch = fnew(FRT_CPU_SAMPLE_SCRATCH(n));
    char name[96];
    frt_sampling pen = frt_test_sampling(1.0f);
    pen.presence_penalty = 0.6f, pen.repetition_penalty = 1.25f, with_bias(&pen, n, 100);
    frt_sampling plain = frt_test_sampling(1.0f);
    const frt_sampling *sets[2] = {&plain, &pen};
    mask_set(d, mask);
    for (int k = 0; k < 2; k++) {
        dput(d->params, 0, sets[k], sizeof *sets[k]);
        uint64_t r0 = 0;
        const float *used = NULL;
        frt_test_sample_ref_mask(l, n, c, seen, sets[k], mask, &r0, want, scratch, &used);
        CHECK_OK(frt_cuda_logits_adjust(g_cs, d->adj.p, d->logits.p, n, d->params.p, d->counts.p, d->seen.p,
                                        d->mask_on.p, d->mask.p));
        sync_st();
        dget(d->adj, 0, got, (size_t)n * 4);
        snprintf(name, sizeof name, "logits_adjust + mask n %d (%s)", n, k ? "bias + penalties" : "fields off");
        report_same(name, got, want, (size_t)n * 4);
    }
    frt_sampling ps[4] = {frt_test_sampling(0.0f), frt_test_sampling(0.8f), pen, frt_test_sampling(1.2f)};
    ps[1].top_k = 40, ps[1].top_p = 0.9f;
    ps[3].min_p = 0.05f;
    int mism = 0, lp_bad = 0, masked_drawn = 0, total = 0;
    for (int p = 0; p < 4; p++) {
        ps[p].logprobs = 1;
        ps[p].top_logprobs = 20;
        uint64_t host = 500 + (uint64_t)p;
        dput(d->rng, 0, &host, 8);
        for (int r = 0; r < 25; r++, total++) {
            const float *used = NULL;
            int w = frt_test_sample_ref_mask(l, n, c, seen, &ps[p], mask, &host, want, scratch, &used);
            int t = step(d, &ps[p]);
            mism += t != w;
            masked_drawn += t < 0 || !((mask[t >> 5] >> (t & 31)) & 1u);
            if (t >= 0) check_lp(d, used, t, &ps[p], &lp_bad);
        }
    }
    snprintf(name, sizeof name, "sample_step + half mask n %d == CPU step (%d draws), mismatches", n, total);
    report(name, (double)mism, 0.0);
    snprintf(name, sizeof name, "sample_step + half mask n %d: masked tokens drawn", n);
    report(name, (double)masked_drawn, 0.0);
    snprintf(name, sizeof name, "logprobs + half mask n %d == frt_cpu_logprobs (1e-5), mismatches", n);
    report(name, (double)lp_bad, 0.0);
    /* one allowed token wins at any temperature; its logprob is 0 */
    memset(mask, 0, (size_t)words * 4);
    const int only = n - 5;
    mask[only >> 5] = 1u << (only & 31);
    mask_set(d, mask);
    int forced = 1;
    const float temps[4] = {0.0f, 0.5f, 1.0f, 50.0f};
    for (int i = 0; i < 4; i++) {
        frt_sampling s = frt_test_sampling(temps[i]);
        s.logprobs = 1;
        for (int r = 0; r < 5; r++) {
            frt_logprobs lp;
            forced &= step(d, &s) == only;
            dget(d->lp, 0, &lp, sizeof lp);
            forced &= lp.token == only && lp.logprob == 0.0f;
        }
    }
    snprintf(name, sizeof name, "n %d: a one-token mask forces it at T 0..50, logprob 0", n);
    report_flag(name, forced);
    mask_set(d, NULL);
    free(mask);
    free(want);
    free(got);
    free(scratch);
}

/* ---- timing ---------------------------------------------------------------- */

typedef struct timed {
    dev *d;
    int full; /* 1: frt_cuda_sample_step; 0: frt_cuda_sample_token alone */
} timed;

static int record_timed(frt_stream *s, void *user)
{
    const timed *t = user;
    dev *d = t->d;
    void *st = frt_stream_native(s);
    for (int r = 0; r < 10; r++)
        if (t->full)
            FRT_TEST_TRY_(frt_cuda_sample_step(st, d->token.p, d->logits.p, d->n, d->params.p, d->counts.p,
                                               d->seen.p, d->mask_on.p, d->mask.p, d->rng.p, d->lp.p, d->ws.p,
                                               d->ws_bytes));
        else
            FRT_TEST_TRY_(frt_cuda_sample_token(st, d->token.p, d->logits.p, d->n, d->params.p, d->rng.p, d->ws.p,
                                                d->ws_bytes));
    return 0;
}

static void test_timing(dev *d)
{
    frt_sampling cases[4];
    const char *names[4] = {"greedy", "T 0.7 top_k 20 top_p 0.95", "greedy + penalties + 50 biases",
                            "T 0.7 ... + penalties + 50 biases + min_p"};
    for (int i = 0; i < 4; i++) cases[i] = frt_test_sampling(i % 2 ? 0.7f : 0.0f);
    cases[1].top_k = cases[3].top_k = 20;
    cases[1].top_p = cases[3].top_p = 0.95f;
    for (int i = 2; i < 4; i++) {
        cases[i].presence_penalty = 0.5f;
        cases[i].frequency_penalty = 0.5f;
        cases[i].repetition_penalty = 1.1f;
        with_bias(&cases[i], d->n, 50);
    }
    cases[3].min_p = 0.05f;
    printf("  timing, vocabulary %d (us per step, 10 steps per graph replay):\n", d->n);
    for (int i = 0; i < 4; i++) {
        dput(d->params, 0, &cases[i], sizeof cases[i]);
        timed base = {d, 0}, full = {d, 1};
        double us_full = graph_us("sample_step", record_timed, &full, 1) / 10;
        if (i < 2) {
            double us_base = graph_us("sample_token", record_timed, &base, 1) / 10;
            printf("    %-44s sample_token %7.2f  sample_step %7.2f  (+%.2f)\n", names[i], us_base, us_full,
                   us_full - us_base);
        } else {
            printf("    %-44s sample_step %7.2f\n", names[i], us_full);
        }
    }
    uint32_t *mask = xzalloc((size_t)(d->n + 31) / 32 * 4);
    frt_test_random_mask(mask, d->n, 8);
    mask_set(d, mask);
    for (int i = 0; i < 2; i++) {
        dput(d->params, 0, &cases[i], sizeof cases[i]);
        timed full = {d, 1};
        printf("    %-44s sample_step %7.2f\n", i ? "T 0.7 top_k 20 top_p 0.95 + half mask" : "greedy + half mask",
               graph_us("sample_step", record_timed, &full, 1) / 10);
    }
    mask_set(d, NULL);
    free(mask);
}

static void test_bad_args(void)
{
    char b[64];
    void *p = b;
    float *fp = (float *)p;
    int32_t *ip = (int32_t *)p;
    const frt_sampling *sp = (const frt_sampling *)p;
    int bad = FRT_ERR_INVALID_ARGUMENT;
    uint32_t *mp = (uint32_t *)p;
    CHECK_STATUS(frt_cuda_logits_adjust(NULL, NULL, fp, 10, sp, ip, (uint8_t *)p, NULL, NULL), bad);
    CHECK_STATUS(frt_cuda_logits_adjust(NULL, fp, fp, 0, sp, ip, (uint8_t *)p, NULL, NULL), bad);
    CHECK_STATUS(frt_cuda_logits_adjust(NULL, fp, fp, 10, sp, NULL, (uint8_t *)p, NULL, NULL), bad);
    CHECK_STATUS(frt_cuda_logits_adjust(NULL, fp, fp, 10, sp, ip, (uint8_t *)p, ip, NULL), bad); /* flag, no mask */
    CHECK_STATUS(frt_cuda_logprobs(NULL, NULL, fp, fp, 10, ip, sp, NULL), bad);
    CHECK_STATUS(frt_cuda_logprobs(NULL, (frt_logprobs *)p, fp, fp, 0, ip, sp, NULL), bad);
    CHECK_STATUS(frt_cuda_sample_step(NULL, ip, fp, 10, sp, NULL, (uint8_t *)p, ip, mp, (uint64_t *)p,
                                      (frt_logprobs *)p, p, 1 << 30),
                 bad);
    CHECK_STATUS(frt_cuda_sample_step(NULL, ip, fp, 10, sp, ip, (uint8_t *)p, ip, mp, (uint64_t *)p,
                                      (frt_logprobs *)p, p, 8),
                 bad);
}

int main(void)
{
    frt_test_seed(262626);
    printf("  %-62s %10s %8s\n", "kernel", "rel err", "tol");
    test_bad_args();
    frt_test_cuda_start();
    const int vocabs[2] = {151936, 248320};
    for (int v = 0; v < 2; v++) {
        const int n = vocabs[v];
        dev d = dev_make(n);
        float *l = frand((size_t)n, -8, 8);
        int32_t *c = xzalloc((size_t)n * 4);
        uint8_t *seen = xzalloc((size_t)n);
        random_counts(c, seen, n);
        dput(d.logits, 0, l, (size_t)n * 4);
        dput(d.counts, 0, c, (size_t)n * 4);
        dput(d.seen, 0, seen, (size_t)n);
        test_adjust_bits(&d, l, c, seen);
        test_steps(&d, l, c, seen);
        test_mask(&d, l, c, seen);
        test_timing(&d);
        free(l);
        free(c);
        free(seen);
        dev_free(&d);
    }
    must(frt_context_sync(g_ctx), "final sync (asynchronous errors)");
    frt_context_destroy(g_ctx);
    return frt_test_report();
}

#endif /* FRT_HAVE_CUDA */
