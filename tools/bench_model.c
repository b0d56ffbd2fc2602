/*
 * bench_model.c - frt bench -m DIR | --shape NAME --random-weights: the model
 * benchmark (issues 8 and 9). Token ids in (random, fixed seed), not text.
 *
 * For each prefix length P (a multiple of the prefill chunk C) and a suffix
 * of S tokens (the ids that follow the prefix in the same sequence):
 *   cold TTFT      reset + prefill(P + S) + sample            p50/p90/p99
 *   capsule        snapshot of the prefix (device tier), restore, append
 *                  (prefill of the S suffix tokens), capsule TTFT = restore
 *                  + append + sample                          p50/p90/p99
 *   tiers          host and disk snapshot / restore (two samples each)
 *   decode         greedy steps after P + S: median ms/token, tokens/s;
 *                  then (unless --no-sampling-costs) the same with
 *                  penalties and 50 logit biases, with a token mask
 *                  allowing half the vocabulary (set once, and rewritten
 *                  every step), each followed by plain steps:
 *                  decode_penalties / decode_mask / decode_mask_per_step
 *                  .overhead_fraction
 *   memory         device memory in use (total - free) at its high point,
 *                  weight bytes, state bytes
 * With --chunks a,b,c (issue 8): for each C, a model loaded with that
 * prefill chunk from the same in-memory checkpoint; cold TTFT at each sweep
 * prefix, capsule TTFT with the prefix aligned (append S) and unaligned
 * (prefix P + C/2: restore at aligned_len = P, append the C/2 remainder + S),
 * and the remainder's cost (unaligned - aligned, p50).
 *
 * FLOORS, measured in the same run on the same device:
 *   d2d   device-to-device copy rate, counting bytes read + written (as
 *         ../shared/H200.md: 3971 GB/s on the H200 for a 2 GiB copy);
 *   h2d, d2h  pinned copies, one-way bytes;
 *   GEMM  bf16 8192^3 through the model's cuBLASLt wrapper (cuda), or an
 *         OpenBLAS sgemm 1024^3 (cpu: the cpu backend computes in f32).
 * Floors (convention of H200.md, written into the JSON as "conventions"):
 *   capsule snapshot/restore (device tier)  = 2 x capsule bytes / d2d rate
 *   host tier snapshot = bytes / d2h, restore = bytes / h2d
 *   decode per token = bytes read / d2d rate, where bytes read = every
 *         matrix incl. lm_head (not the embedding table) + recurrent and conv
 *         state + KV up to the context. A read-only stream is charged at the
 *         read+write copy rate ("~15.9 GB ... about 4.1 ms at ~3.97 TB/s").
 *   prefill (cold, and the append after a restore) = the roofline: the
 *         larger of FLOPs / GEMM rate and bytes / d2d rate. FLOPs = 2 x
 *         matrix params (lm_head once, for the last token only) x tokens +
 *         attention 4 x (causal pairs) x heads x head_dim per full layer +
 *         the gated delta rule, charged 8 x d_k x d_v per token per value
 *         head per linear layer; bytes = what a decode step at that context
 *         reads (every weight once). A cold prefill of 2k+ tokens is bound by
 *         the FLOPs; a 64-token append by the bytes. With --dtype fp8 on
 *         cuda the layers' matrix FLOPs are charged at the FP8 GEMM rate
 *         (frt_debug_gemm_fp8_ms, measured like the bf16 one) and the rest
 *         at the bf16 rate (bm_prefill_floor_ms).
 * "frac" is floor / measured: 1.0 is at the floor.
 * Timing: wall clock around synchronous model calls (each returns after
 * its stream is synced); copies and GEMMs with events.
 */
#include "bench_model.h"
#include "bench_run.h"
#include "cli.h"

#include "frt/capsule.h"
#include "frt/exec.h"
#include "frt/model.h"
#include "frt/status.h"
#include "frt/debug.h"
#include "frt/checkpoint.h"
#include "frt/config.h"
#include "gen_model.h"
#include "frt/fs.h"


#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bm_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Percentile q in [0, 1] with linear interpolation between order statistics. */
double bm_pct(const double *v, int n, double q)
{
    if (n <= 0) return 0;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return 0;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double x = q * (n - 1);
    int i = (int)x;
    double r = i + 1 < n ? s[i] + (x - i) * (s[i + 1] - s[i]) : s[n - 1];
    free(s);
    return r;
}

static json_t *stats_json(const double *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return json_pack("{s:f, s:f, s:f, s:i, s:o}", "p50", bm_pct(v, n, 0.5), "p90", bm_pct(v, n, 0.9), "p99",
                     bm_pct(v, n, 0.99), "n", n, "samples_ms", a);
}

/* ---- budget, memory, JSON -------------------------------------------------- */

static int over_budget(bm_run *r, const char *what)
{
    if (r->o.time_budget_s <= 0 || bm_now_s() - r->t_start < r->o.time_budget_s) return 0;
    fprintf(stderr, "frt bench: time budget of %.0f s spent: skipping %s\n", r->o.time_budget_s, what);
    json_t *sk = json_object_get(r->root, "skipped");
    json_array_append_new(sk, json_string(what));
    return 1;
}

/* Records a failed step in obj ("error") and on stderr; the run goes on. */
static void note_error(bm_run *r, json_t *obj, const char *what, int status)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s (%s)", what, frt_last_error(), frt_status_str(status));
    fprintf(stderr, "frt bench: FAILED %s\n", msg);
    json_object_set_new(obj, "error", json_string(msg));
    if (!r->first_error) r->first_error = status;
}

void bm_mem_sample(bm_run *r, frt_context *ctx)
{
    frt_device_info di;
    if (!ctx || frt_context_device_info(ctx, &di)) return;
    size_t used = di.total_bytes > di.free_bytes ? di.total_bytes - di.free_bytes : 0;
    if (used > r->mem_peak) r->mem_peak = used;
    r->mem_total = di.total_bytes;
}

static void json_flush(bm_run *r)
{
    json_object_set_new(r->root, "elapsed_s", json_real(bm_now_s() - r->t_start));
    json_object_set_new(r->root, "memory",
                        json_pack("{s:I, s:I, s:I, s:s}", "used_before_load_bytes", (json_int_t)r->mem_base,
                                  "peak_used_bytes", (json_int_t)r->mem_peak, "total_bytes", (json_int_t)r->mem_total,
                                  "how", "total - free (cudaMemGetInfo / available RAM), sampled after each step"));
    if (r->o.json_path && json_dump_file(r->root, r->o.json_path, JSON_INDENT(1)))
        fprintf(stderr, "frt bench: cannot write %s\n", r->o.json_path);
}

/* ---- the token ids --------------------------------------------------------- */

static int ids_make(bm_run *r, int n, int vocab)
{
    r->ids = malloc((size_t)n * sizeof *r->ids);
    if (!r->ids) return frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: %d token ids", n);
    uint64_t x = r->o.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n; i++) { /* xorshift64*, the same stream as bench/hf_baseline.py reads from the dump */
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r->ids[i] = (int32_t)(((x * 0x2545F4914F6CDD1Dull) >> 33) % (uint64_t)vocab);
    }
    r->n_ids = n;
    return 0;
}

static int ids_dump(const bm_run *r, const char *path, int vocab)
{
    FILE *f = fopen(path, "w");
    if (!f) return frt_error(FRT_ERR_IO, "bench: cannot write %s: %s", path, strerror(errno));
    fprintf(f, "{\"seed\": %llu, \"vocab_size\": %d, \"n\": %d, \"ids\": [", r->o.seed, vocab, r->n_ids);
    for (int i = 0; i < r->n_ids; i++) fprintf(f, "%s%d", i ? "," : "", r->ids[i]);
    fprintf(f, "]}\n");
    if (fclose(f)) return frt_error(FRT_ERR_IO, "bench: cannot write %s", path);
    return 0;
}

/* ---- loading --------------------------------------------------------------- */

static int load_model(bm_run *r, int C, int max_seq, frt_model **m)
{
    frt_model_params p = frt_model_default_params();
    p.backend = r->o.backend;
    p.prefill_chunk = C;
    p.max_seq = max_seq;
    p.n_threads = r->o.threads;
    p.kv_dtype = r->o.kv_fp8 ? FRT_KV_FP8 : FRT_KV_DEFAULT;
    p.weight_dtype = r->o.w_fp8 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
    p.lm_head_dtype = r->o.lm_fp8 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
    p.prefill_group = r->o.prefill_group;
    p.gemm_autotune = r->o.autotune;
    p.gemm_tune_file = r->o.tune_file;
    double t0 = bm_now_s();
    fprintf(stderr, "frt bench: loading the model (C=%d, max_seq=%d)...\n", C, max_seq);
    int rc = r->ck ? frt_model_load_checkpoint(r->ck, &r->cfg, NULL, &p, m) : frt_model_load(r->o.model_dir, &p, m);
    if (!rc) {
        frt_model_info info;
        frt_model_info_get(*m, &info);
        fprintf(stderr, "frt bench: loaded in %.1f s (prefill groups of up to %d pieces; GEMM autotune %d)\n",
                bm_now_s() - t0, info.prefill_group, r->o.autotune);
    }
    return rc;
}

/* The KV cache per token of context, from the state table: the bytes and
 * values of one row of every "kv." entry (rows validity), and the dtype
 * of the first. */
typedef struct bm_kv {
    size_t bytes, values;
    const char *dtype;
} bm_kv;

static bm_kv kv_per_token(frt_model *m, int n_state)
{
    bm_kv kv = {0, 0, "none"};
    for (int i = 0; i < n_state; i++) {
        frt_state_info si;
        if (frt_model_state_info(m, i, &si) || si.validity != FRT_STATE_ROWS || strncmp(si.name, "kv.", 3)) continue;
        if (!kv.bytes) kv.dtype = si.dtype;
        kv.bytes += si.row_bytes;
        kv.values += (size_t)(si.shape[1] * si.shape[2]);
    }
    return kv;
}

/* ---- profiler range ------------------------------------------------------ */

/* FRT_PROFILE=cold|decode|append brackets that phase of the first prefix
 * (the last cold repeat, the decode steps, the last capsule TTFT sample) with
 * the driver's cuProfilerStart / cuProfilerStop, for
 * `ncu --profile-from-start off`. Loaded with dlopen: the runtime is linked
 * statically and nothing else here calls the driver. A no-op otherwise. */
void bm_profile(const char *phase, int on)
{
    static int done;
    const char *want = getenv("FRT_PROFILE");
    if (!want || strcmp(want, phase) || (on && done)) return;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    int (*fn)(void) = lib ? (int (*)(void))dlsym(lib, on ? "cuProfilerStart" : "cuProfilerStop") : NULL;
    int rc = fn ? fn() : -1;
    fprintf(stderr, "frt bench: profiler %s for '%s' (driver status %d)\n", on ? "start" : "stop", phase, rc);
    if (!on) done = 1;
}

/* One cold TTFT sample: reset + prefill(n) + sample. */
static int cold_once(frt_model *m, const int32_t *ids, int n, double *ms)
{
    int32_t tok;
    double t0 = bm_now_s();
    int rc = frt_model_reset(m);
    if (!rc) rc = frt_model_prefill(m, ids, n);
    if (!rc) rc = frt_model_sample(m, NULL, &tok);
    *ms = (bm_now_s() - t0) * 1e3;
    return rc;
}

/* One capsule TTFT sample: restore (frt_capsule_restore_ex flags: 0 or
 * FRT_RESTORE_FULL; landed: then frt_capsule_restore_wait, so a pipelined
 * restore's copies land before the append) + prefill(n) + sample; parts in
 * ms. */
static int capsule_once_ex(frt_model *m, const frt_capsule *c, int flags, int landed, const int32_t *ids, int n,
                           double *restore, double *append, double *ttft)
{
    int32_t tok;
    double t0 = bm_now_s();
    int rc = frt_capsule_restore_ex(m, c, flags);
    if (!rc && landed) rc = frt_capsule_restore_wait(m);
    double t1 = bm_now_s();
    if (!rc) rc = frt_model_prefill(m, ids, n);
    double t2 = bm_now_s();
    if (!rc) rc = frt_model_sample(m, NULL, &tok);
    double t3 = bm_now_s();
    *restore = (t1 - t0) * 1e3, *append = (t2 - t1) * 1e3, *ttft = (t3 - t0) * 1e3;
    return rc;
}

static int capsule_once(frt_model *m, const frt_capsule *c, int flags, const int32_t *ids, int n, double *restore,
                        double *append, double *ttft)
{
    return capsule_once_ex(m, c, flags, 0, ids, n, restore, append, ttft);
}

/* One capsule TTFT sample through frt_capsule_restore_prefill (a full
 * restore) + sample, ms; *fused: the restore's KV rows went through the
 * append's attention. */
static int capsule_one_call(frt_model *m, const frt_capsule *c, const int32_t *ids, int n, double *ttft, int *fused)
{
    int32_t tok;
    frt_restore_stats st;
    double t0 = bm_now_s();
    int rc = frt_capsule_restore_prefill_ex(m, c, FRT_RESTORE_FULL, ids, n);
    if (!rc) rc = frt_model_sample(m, NULL, &tok);
    *ttft = (bm_now_s() - t0) * 1e3;
    if (!rc) rc = frt_capsule_last_restore(m, &st);
    if (!rc) *fused = st.fused;
    return rc;
}

/* The roofline of a prefill: its FLOP floor (flops_ms:
 * bm_prefill_floor_ms, FLOPs at the GEMM rates) or the bytes it must read
 * at least once (every matrix, the state, the KV cache) at the copy rate,
 * whichever takes longer. A short append (64 tokens) is bound by the bytes,
 * a long prefill by the FLOPs. */
static double roofline_ms(const bm_run *r, double flops_ms, double bytes)
{
    const double b = bytes / r->fl.d2d_rw_Bps * 1e3;
    return flops_ms > b ? flops_ms : b;
}

static json_t *floor_json(double floor_ms, double measured_ms)
{
    return json_pack("{s:f, s:f, s:f}", "measured_ms", measured_ms, "floor_ms", floor_ms, "fraction_of_floor",
                     measured_ms > 0 ? floor_ms / measured_ms : 0.0);
}

/* ---- the main run: one prefix --------------------------------------------- */

typedef struct bm_row {
    int P;
    double cold50, cold90, cold99, cold_floor;
    double snap, restore, restore_floor, append, cap50, cap90, cap99, cap_floor;
    double rb_restore, rb_floor, rb_cap50; /* rollback restore (only the fixed-size state) */
    double one50, one99; /* the full restore + append in one call (frt_capsule_restore_prefill) + sample */
    int one_fused;       /* ... with the KV rows copied inside the append's attention */
    double dec_ms, dec_floor;
    double tier_sn[2][2], tier_re[2][2]; /* [host, disk][first, second] */
    double host_sn_floor, host_re_floor;
    double host_cap[2][2]; /* host-tier capsule TTFT [restore landed first, pipelined][first, second] */
    double host_cap_floor; /* max(host restore floor, append floor) */
    int tiers; /* the host and disk tiers ran */
    size_t cap_bytes;
    int done;
} bm_row;

/* D timed greedy decode steps with s (NULL = plain greedy) after one
 * untimed step: ms per step into d[0..*nd). With a mask (words u32 words,
 * frt_model_set_token_mask) the steps sample under it: set once before
 * the steps, or (per_step) rewritten before each step inside the timing,
 * as a grammar does; masking is off again afterwards. */
static int time_decode_masked(frt_model *m, const frt_sampling *s, const uint32_t *mask, int64_t words, int per_step,
                              int D, double *d, int *nd)
{
    int rc = mask && !per_step ? frt_model_set_token_mask(m, mask, words) : 0;
    *nd = 0;
    for (int i = -1; i < D && !rc; i++) {
        int32_t tok;
        double t0 = bm_now_s();
        if (mask && per_step) rc = frt_model_set_token_mask(m, mask, words);
        if (!rc) rc = frt_model_decode(m, s, &tok);
        if (!rc && i >= 0) d[(*nd)++] = (bm_now_s() - t0) * 1e3;
    }
    int off = frt_model_set_token_mask(m, NULL, 0);
    return rc ? rc : off;
}

static int time_decode(frt_model *m, const frt_sampling *s, int D, double *d, int *nd)
{
    return time_decode_masked(m, s, NULL, 0, 0, D, d, nd);
}

/* One sampling variant of the decode step against plain greedy. */
typedef struct bm_variant {
    const char *key, *what;
    const frt_sampling *s;   /* NULL = greedy */
    const uint32_t *mask;    /* NULL = no mask */
    int64_t words;
    int per_step;
} bm_variant;

/* D steps of the variant, then D plain steps; the overhead is against the
 * mean of the plain medians before (*plain) and after (the context grows
 * by D per block), and *plain becomes the one after. Adds v->key to out. */
static int bench_variant(frt_model *m, int D, double *plain, const bm_variant *v, json_t *out)
{
    double *a = malloc((size_t)D * sizeof *a), *b = malloc((size_t)D * sizeof *b);
    int na = 0, nb = 0;
    int rc = a && b ? 0 : FRT_ERR_OUT_OF_MEMORY;
    if (!rc) rc = time_decode_masked(m, v->s, v->mask, v->words, v->per_step, D, a, &na);
    if (!rc) rc = time_decode(m, NULL, D, b, &nb);
    if (!rc && na && nb) {
        double ms = bm_pct(a, na, .5), after = bm_pct(b, nb, .5), base = (*plain + after) / 2;
        json_t *j = stats_json(a, na);
        json_object_set_new(j, "what", json_string(v->what));
        json_object_set_new(j, "plain_ms_p50", json_real(base));
        json_object_set_new(j, "overhead_fraction", json_real(ms / base - 1.0));
        json_object_set_new(out, v->key, j);
        fprintf(stderr, "frt bench: decode, %s: %.3f ms/token, plain %.3f (%+.1f %%)\n", v->what, ms, base,
                (ms / base - 1.0) * 100.0);
        *plain = after;
    }
    free(a);
    free(b);
    return rc;
}

/* The cost of the sampling step's fields (frt/sampling.h), each against
 * plain greedy decode: presence, frequency and repetition penalties with
 * 50 logit biases ("decode_penalties"); the allowed-token mask allowing
 * about half the vocabulary (random bits, fixed seed), set once
 * ("decode_mask": the step's own cost) and rewritten before every step
 * ("decode_mask_per_step": with the host-to-device copy a grammar pays). */
static int bench_sampling_costs(frt_model *m, int D, double plain, json_t *out)
{
    frt_model_info info;
    frt_model_info_get(m, &info);
    const int V = info.vocab_size;
    frt_sampling s;
    memset(&s, 0, sizeof s);
    s.top_p = 1.0f;
    s.presence_penalty = 0.5f;
    s.frequency_penalty = 0.5f;
    s.repetition_penalty = 1.1f;
    s.n_logit_bias = V >= 50 ? 50 : V;
    const int stride = V / s.n_logit_bias; /* >= 1: distinct ids spread over the vocabulary */
    for (int j = 0; j < s.n_logit_bias; j++) s.logit_bias[j] = (frt_logit_bias){j * stride, (float)(j % 7) - 3.0f};
    const int64_t words = ((int64_t)V + 31) / 32;
    uint32_t *mask = malloc((size_t)words * sizeof *mask);
    if (!mask) return frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: mask");
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int64_t w = 0; w < words; w++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        mask[w] = (uint32_t)(x >> 16);
    }
    mask[0] |= 1u; /* never empty */
    const bm_variant vs[3] = {
        {"decode_penalties", "greedy + presence 0.5, frequency 0.5, repetition 1.1, 50 logit_bias entries", &s,
         NULL, 0, 0},
        {"decode_mask", "greedy + a token mask allowing half the vocabulary, set once", NULL, mask, words, 0},
        {"decode_mask_per_step", "greedy + the half mask rewritten before every step", NULL, mask, words, 1},
    };
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) rc = bench_variant(m, D, &plain, &vs[i], out);
    free(mask);
    return rc;
}

static int bench_prefix(bm_run *r, frt_model *m, int P, bm_row *row, json_t *out)
{
    const int R = r->o.repeats, S = r->o.suffix, cuda = r->o.backend == FRT_BACKEND_CUDA;
    const bm_counts k = bm_counts_of(&r->cfg, cuda, r->o.kv_fp8, r->w_mode, r->o.lm_fp8);
    double *a = calloc((size_t)R * 3, sizeof *a), *b = a + R, *c = a + 2 * R;
    if (!a) return frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: samples");
    int rc = 0, n = 0;
    memset(row, 0, sizeof *row);
    row->P = P;
    json_object_set_new(out, "prefix", json_integer(P));
    json_object_set_new(out, "suffix", json_integer(S));

    /* cold TTFT */
    fprintf(stderr, "frt bench: P=%d: cold TTFT x%d...\n", P, R);
    for (int i = -1; i < R && !rc; i++) {
        double t;
        if (i == R - 1) bm_profile("cold", 1);
        rc = cold_once(m, r->ids, P + S, &t);
        if (i == R - 1) bm_profile("cold", 0);
        if (!rc && i >= 0) a[n++] = t;
        if (i >= 0 && i + 1 < R && over_budget(r, "cold TTFT repeats")) break;
    }
    if (rc) goto done;
    bm_mem_sample(r, frt_model_context(m));
    row->cold50 = bm_pct(a, n, .5), row->cold90 = bm_pct(a, n, .9), row->cold99 = bm_pct(a, n, .99);
    double fl = bm_prefill_flops(&r->cfg, &k, 0, P + S);
    row->cold_floor = roofline_ms(r, bm_prefill_floor_ms(r, &k, 0, P + S), bm_decode_bytes(&k, P + S));
    json_t *cold = stats_json(a, n);
    json_object_set_new(cold, "flops", json_real(fl));
    json_object_set_new(cold, "floor_ms", json_real(row->cold_floor));
    json_object_set_new(cold, "fraction_of_floor_p50", json_real(row->cold_floor / row->cold50));
    json_object_set_new(out, "cold_ttft", cold);

    /* decode after the cold prefill (context P + S, a token pending) */
    if (!over_budget(r, "decode")) {
        int D = r->o.decode_tokens;
        double *d = malloc((size_t)D * sizeof *d);
        if (!d) rc = FRT_ERR_OUT_OF_MEMORY;
        int nd = 0;
        bm_profile("decode", 1);
        if (!rc) rc = time_decode(m, NULL, D, d, &nd);
        if (!rc && nd && !r->o.no_sampling_costs) rc = bench_sampling_costs(m, D, bm_pct(d, nd, .5), out);
        if (!rc && nd) {
            row->dec_ms = bm_pct(d, nd, .5);
            row->dec_floor = bm_decode_bytes(&k, P + S) / r->fl.d2d_rw_Bps * 1e3;
            json_t *dj = stats_json(d, nd);
            json_object_set_new(dj, "context", json_integer(P + S));
            json_object_set_new(dj, "tokens_per_s", json_real(1e3 / row->dec_ms));
            json_object_set_new(dj, "bytes_read_per_token", json_real(bm_decode_bytes(&k, P + S)));
            json_object_set_new(dj, "floor_ms", json_real(row->dec_floor));
            json_object_set_new(dj, "fraction_of_floor_p50", json_real(row->dec_floor / row->dec_ms));
            json_object_set_new(out, "decode", dj);
        }
        bm_profile("decode", 0);
        free(d);
        if (rc) goto done;
    }

    /* capsule of the prefix, device tier */
    if (over_budget(r, "capsule")) goto done;
    fprintf(stderr, "frt bench: P=%d: capsule snapshot / restore / append x%d...\n", P, R);
    frt_capsule *cap = NULL;
    rc = frt_model_reset(m);
    if (!rc) rc = frt_model_prefill(m, r->ids, P);
    n = 0;
    for (int i = -1; i < R && !rc; i++) {
        frt_capsule_free(cap);
        cap = NULL;
        double t0 = bm_now_s();
        rc = frt_capsule_snapshot(m, FRT_TIER_DEVICE, NULL, NULL, 0, &cap);
        if (!rc && i >= 0) a[n++] = (bm_now_s() - t0) * 1e3;
        if (!rc) bm_mem_sample(r, frt_model_context(m));
    }
    if (rc) {
        frt_capsule_free(cap);
        goto done;
    }
    frt_capsule_info ci;
    frt_capsule_info_get(cap, &ci);
    row->cap_bytes = ci.bytes;
    row->snap = bm_pct(a, n, .5);
    double copy_floor = 2.0 * (double)ci.bytes / r->fl.d2d_rw_Bps * 1e3;
    json_t *cj = json_object();
    json_object_set_new(cj, "bytes", json_integer((json_int_t)ci.bytes));
    json_object_set_new(cj, "buffers", json_integer(ci.n_buffers));
    json_object_set_new(cj, "snapshot_device", floor_json(copy_floor, row->snap));
    /* full restores (every buffer: what a capsule costs when the live state
     * holds something else), then rollback restores (the live state
     * descends from the capsule: the fixed-size state only) */
    n = 0;
    for (int i = -1; i < R && !rc; i++) {
        double t_res, t_app, t_ttft;
        if (i == R - 1) bm_profile("append", 1);
        rc = capsule_once(m, cap, FRT_RESTORE_FULL, r->ids + P, S, &t_res, &t_app, &t_ttft);
        if (i == R - 1) bm_profile("append", 0);
        if (!rc && i >= 0) a[n] = t_res, b[n] = t_app, c[n] = t_ttft, n++;
        if (i >= 0 && i + 1 < R && over_budget(r, "capsule repeats")) break;
    }
    if (!rc) {
        row->restore = bm_pct(a, n, .5), row->append = bm_pct(b, n, .5);
        row->cap50 = bm_pct(c, n, .5), row->cap90 = bm_pct(c, n, .9), row->cap99 = bm_pct(c, n, .99);
        row->restore_floor = copy_floor;
        double app_fl = bm_prefill_flops(&r->cfg, &k, P, S);
        const double app_bytes = bm_decode_bytes(&k, P + S);
        const double app_flops_ms = bm_prefill_floor_ms(r, &k, P, S);
        const double app_floor = roofline_ms(r, app_flops_ms, app_bytes);
        row->cap_floor = copy_floor + app_floor;
        json_t *rs = stats_json(a, n), *ap = stats_json(b, n), *tt = stats_json(c, n);
        json_object_set_new(rs, "floor_ms", json_real(copy_floor));
        json_object_set_new(rs, "fraction_of_floor_p50", json_real(copy_floor / row->restore));
        json_object_set_new(ap, "flops", json_real(app_fl));
        json_object_set_new(ap, "bytes_read", json_real(app_bytes));
        json_object_set_new(ap, "flops_floor_ms", json_real(app_flops_ms));
        json_object_set_new(ap, "bytes_floor_ms", json_real(app_bytes / r->fl.d2d_rw_Bps * 1e3));
        json_object_set_new(ap, "floor_ms", json_real(app_floor));
        json_object_set_new(ap, "fraction_of_floor_p50", json_real(app_floor / row->append));
        json_object_set_new(tt, "floor_ms", json_real(row->cap_floor));
        json_object_set_new(tt, "fraction_of_floor_p50", json_real(row->cap_floor / row->cap50));
        json_object_set_new(tt, "speedup_vs_cold_p50", json_real(row->cold50 / row->cap50));
        json_object_set_new(cj, "restore_device", rs);
        json_object_set_new(cj, "append", ap);
        json_object_set_new(cj, "ttft", tt);
    }
    /* the same full restore + append in one call (docs/model.md "Restore and append in one call") */
    n = 0;
    for (int i = -1; i < R && !rc; i++) {
        double t_ttft;
        rc = capsule_one_call(m, cap, r->ids + P, S, &t_ttft, &row->one_fused);
        if (!rc && i >= 0) c[n++] = t_ttft;
        if (i >= 0 && i + 1 < R && over_budget(r, "capsule repeats")) break;
    }
    if (!rc) {
        row->one50 = bm_pct(c, n, .5), row->one99 = bm_pct(c, n, .99);
        json_t *tt = stats_json(c, n);
        json_object_set_new(tt, "floor_ms", json_real(row->cap_floor));
        json_object_set_new(tt, "fraction_of_floor_p50", json_real(row->cap_floor / row->one50));
        json_object_set_new(tt, "kv_in_attention", json_boolean(row->one_fused));
        json_object_set_new(cj, "ttft_one_call", tt);
    }
    frt_restore_stats rst = {0, 0, 0, 0};
    n = 0;
    for (int i = -1; i < R && !rc; i++) {
        double t_res, t_app, t_ttft;
        rc = capsule_once(m, cap, 0, r->ids + P, S, &t_res, &t_app, &t_ttft);
        if (!rc) rc = frt_capsule_last_restore(m, &rst);
        if (!rc && i >= 0 && !rst.rollback) {
            rc = frt_error(FRT_ERR_STATE, "bench: a restore after the capsule's own restore was not a rollback");
            break;
        }
        if (!rc && i >= 0) a[n] = t_res, c[n] = t_ttft, n++;
        if (i >= 0 && i + 1 < R && over_budget(r, "capsule repeats")) break;
    }
    if (!rc) {
        row->rb_restore = bm_pct(a, n, .5), row->rb_cap50 = bm_pct(c, n, .5);
        row->rb_floor = 2.0 * (double)rst.bytes / r->fl.d2d_rw_Bps * 1e3;
        json_t *rs = stats_json(a, n), *tt = stats_json(c, n);
        json_object_set_new(rs, "bytes", json_integer((json_int_t)rst.bytes));
        json_object_set_new(rs, "floor_ms", json_real(row->rb_floor));
        json_object_set_new(rs, "fraction_of_floor_p50", json_real(row->rb_floor / row->rb_restore));
        json_object_set_new(cj, "restore_device_rollback", rs);
        json_object_set_new(cj, "ttft_rollback", tt);
    }

    /* host and disk tiers: two samples each */
    if (!rc && !r->o.no_tiers && !over_budget(r, "host/disk tiers")) {
        fprintf(stderr, "frt bench: P=%d: host and disk tiers...\n", P);
        frt_tier tiers[2] = {FRT_TIER_HOST, FRT_TIER_DISK};
        char path[4096];
        snprintf(path, sizeof path, "%s/frt_bench_%d_%d.cap", r->o.tmpdir, (int)getpid(), P);
        for (int t = 0; t < 2 && !rc; t++) {
            double sn[2] = {0, 0}, re[2] = {0, 0};
            for (int i = 0; i < 2 && !rc; i++) {
                frt_capsule *tc = NULL;
                rc = frt_capsule_restore(m, cap); /* the live state at the prefix */
                double t0 = bm_now_s();
                if (!rc) rc = frt_capsule_snapshot(m, tiers[t], tiers[t] == FRT_TIER_DISK ? path : NULL, NULL, 0, &tc);
                sn[i] = (bm_now_s() - t0) * 1e3;
                t0 = bm_now_s();
                if (!rc) rc = frt_capsule_restore_ex(m, tc, FRT_RESTORE_FULL);
                if (!rc) rc = frt_capsule_restore_wait(m); /* until it has landed (pipelined or not) */
                re[i] = (bm_now_s() - t0) * 1e3;
                /* host-tier capsule TTFT: the restore landed before the
                 * append, then the append beside it (the same where the
                 * model does not pipeline) */
                for (int pipe = 0; pipe < 2 && !rc && tiers[t] == FRT_TIER_HOST; pipe++) {
                    double t_res, t_app;
                    rc = capsule_once_ex(m, tc, FRT_RESTORE_FULL, !pipe, r->ids + P, S, &t_res, &t_app,
                                         &row->host_cap[pipe][i]);
                }
                frt_capsule_free(tc);
            }
            if (tiers[t] == FRT_TIER_DISK) unlink(path);
            if (rc) break;
            for (int i = 0; i < 2; i++) row->tier_sn[t][i] = sn[i], row->tier_re[t][i] = re[i];
            row->tiers = t == 1;
            json_t *tj = json_pack("{s:[f,f], s:[f,f]}", "snapshot_ms", sn[0], sn[1], "restore_ms", re[0], re[1]);
            if (tiers[t] == FRT_TIER_HOST) {
                row->host_sn_floor = (double)ci.bytes / r->fl.d2h_Bps * 1e3;
                row->host_re_floor = (double)ci.bytes / r->fl.h2d_Bps * 1e3;
                /* the append's floor (the device capsule's floor less its restore's); the
                 * restore and the append can overlap, so the larger of the two bounds */
                const double app_floor = row->cap_floor - row->restore_floor;
                row->host_cap_floor = row->host_re_floor > app_floor ? row->host_re_floor : app_floor;
                json_object_set_new(tj, "ttft_landed_first_ms",
                                    json_pack("[f,f]", row->host_cap[0][0], row->host_cap[0][1]));
                json_object_set_new(tj, "ttft_ms", json_pack("[f,f]", row->host_cap[1][0], row->host_cap[1][1]));
                json_object_set_new(tj, "ttft_floor_ms", json_real(row->host_cap_floor));
                json_object_set_new(tj, "snapshot_floor_ms", json_real(row->host_sn_floor));
                json_object_set_new(tj, "restore_floor_ms", json_real(row->host_re_floor));
            } else {
                json_object_set_new(tj, "note", json_string("file in --tmpdir; the second restore may be served "
                                                            "from the page cache; floors depend on the disk"));
            }
            json_object_set_new(cj, tiers[t] == FRT_TIER_HOST ? "host" : "disk", tj);
        }
        frt_pinned_cache_stats ps;
        if (!rc && !frt_context_pinned_cache_stats(frt_model_context(m), &ps))
            json_object_set_new(cj, "pinned_cache",
                                json_pack("{s:I, s:I, s:i, s:I, s:I}", "limit_bytes", (json_int_t)ps.limit_bytes,
                                          "cached_bytes", (json_int_t)ps.cached_bytes, "cached_blocks",
                                          ps.cached_blocks, "hits", (json_int_t)ps.hits, "misses",
                                          (json_int_t)ps.misses));
    }
    frt_capsule_free(cap);
    json_object_set_new(out, "capsule", cj);
    if (!rc) row->done = 1;
done:
    free(a);
    return rc;
}

static void print_rows(const bm_run *r, const bm_row *rows, int n)
{
    printf("\nmodel benchmark (%s, %s backend, suffix %d, %d repeats; frac = floor / measured)\n",
           r->o.shape ? r->o.shape : r->o.model_dir, frt_backend_name(r->o.backend), r->o.suffix, r->o.repeats);
    printf("%7s | %9s %9s %9s %9s %5s | %8s %8s %8s %5s %8s | %9s %9s %5s %7s | %8s %8s %5s %7s\n", "prefix",
           "cold p50", "p90", "p99", "floor", "frac", "snap", "restore", "floor", "frac", "append", "cap p50",
           "floor", "frac", "speedup", "decode", "floor", "frac", "tok/s");
    for (int i = 0; i < n; i++) {
        const bm_row *w = &rows[i];
        if (!w->cold50) continue;
        printf("%7d | %9.2f %9.2f %9.2f %9.2f %5.2f | %8.3f %8.3f %8.3f %5.2f %8.2f | %9.2f %9.2f %5.2f %6.1fx | "
               "%8.3f %8.3f %5.2f %7.1f\n",
               w->P, w->cold50, w->cold90, w->cold99, w->cold_floor, w->cold_floor / w->cold50, w->snap, w->restore,
               w->restore_floor, w->restore > 0 ? w->restore_floor / w->restore : 0, w->append, w->cap50,
               w->cap_floor, w->cap50 > 0 ? w->cap_floor / w->cap50 : 0, w->cap50 > 0 ? w->cold50 / w->cap50 : 0,
               w->dec_ms, w->dec_floor, w->dec_ms > 0 ? w->dec_floor / w->dec_ms : 0,
               w->dec_ms > 0 ? 1e3 / w->dec_ms : 0);
    }
    printf("(all times ms; capsule bytes per prefix in the JSON; cold TTFT = reset + prefill(P + suffix) + sample;\n"
           " restore and cap = a full restore; rollback restores, when the live state descends from the capsule:)\n");
    for (int i = 0; i < n; i++) {
        const bm_row *w = &rows[i];
        if (!w->rb_cap50) continue;
        printf("%7d | rollback restore %8.3f ms (floor %8.3f, frac %5.2f) | cap p50 %9.2f ms\n", w->P, w->rb_restore,
               w->rb_floor, w->rb_restore > 0 ? w->rb_floor / w->rb_restore : 0, w->rb_cap50);
    }
    printf("(the full restore + append in one call, frt_capsule_restore_prefill: docs/model.md)\n");
    for (int i = 0; i < n; i++) {
        const bm_row *w = &rows[i];
        if (!w->one50) continue;
        printf("%7d | one call: cap p50 %9.2f ms p99 %9.2f (floor %9.2f, frac %5.2f) | KV rows %s\n", w->P, w->one50,
               w->one99, w->cap_floor, w->cap_floor / w->one50,
               w->one_fused ? "inside the append's attention" : "copied first (the two calls)");
    }
    int any_tiers = 0;
    for (int i = 0; i < n; i++) any_tiers |= rows[i].tiers;
    if (any_tiers)
        printf("(host and disk tiers, ms, first / second run: the first snapshot page-locks a new host block, the\n"
               " second takes it from the context's pinned cache; disk restores may come from the page cache;\n"
               " restores timed until they have landed; host cap = restore + append + sample, the append after\n"
               " the restore landed or beside it (the pipelined restore, docs/model.md):)\n");
    for (int i = 0; i < n; i++) {
        const bm_row *w = &rows[i];
        if (!w->tiers) continue;
        printf("%7d | host snapshot %8.2f / %7.2f (floor %6.2f) restore %7.2f / %7.2f (floor %6.2f) | disk snapshot "
               "%8.2f / %8.2f restore %7.2f / %7.2f\n",
               w->P, w->tier_sn[0][0], w->tier_sn[0][1], w->host_sn_floor, w->tier_re[0][0], w->tier_re[0][1],
               w->host_re_floor, w->tier_sn[1][0], w->tier_sn[1][1], w->tier_re[1][0], w->tier_re[1][1]);
        printf("%7d | host cap: restore landed, then append %8.2f / %8.2f | append beside the restore %8.2f / %8.2f "
               "(floor %7.2f)\n",
               w->P, w->host_cap[0][0], w->host_cap[0][1], w->host_cap[1][0], w->host_cap[1][1], w->host_cap_floor);
    }
}

/* The weight bytes a decode step streams (the decode floor's weight part),
 * with the FP8 split for FP8 weights (--dtype fp8 or an FP8 checkpoint);
 * into r->root's model_info too. */
static void print_weight_stream(bm_run *r, const bm_counts *k)
{
    const double w = k->mat_params * k->w_b + k->mat_rows * k->scale_b + k->block_scale_b + k->lm_head * k->lm_b +
                     k->lm_scale_b;
    static const char *const mode[3] = {"default", "fp8", "fp8-block"};
    json_t *mi = json_object_get(r->root, "model_info");
    if (mi) {
        json_object_set_new(mi, "weight_dtype", json_string(mode[r->w_mode]));
        json_object_set_new(mi, "lm_head_dtype", json_string(r->o.lm_fp8 ? "fp8" : "default"));
        json_object_set_new(mi, "weight_bytes_per_decode_step", json_real(w));
    }
    if (r->o.lm_fp8)
        printf("lm_head FP8 E4M3 (--lm-head-dtype fp8): %.0f weights x %g B + %.0f B of per-row scales\n", k->lm_head,
               k->lm_b, k->lm_scale_b);
    if (r->w_mode == BM_W_FLOAT) return;
    const char *from = r->o.w_fp8 ? "--dtype fp8" : "the checkpoint";
    if (r->w_mode == BM_W_FP8_BLOCK)
        printf("weights FP8 E4M3 (%s, %dx%d blocks): a decode step streams %.4f GB of weights: %.0f matrix weights x "
               "%g B + %.0f B of block scales + lm_head %.0f x %g B (+ %.0f B of its scales)%s\n",
               from, r->cfg.quant.block_out, r->cfg.quant.block_in, w / 1e9, k->mat_params, k->w_b, k->block_scale_b,
               k->lm_head, k->lm_b, k->lm_scale_b,
               k->w_b == 1 ? "; prefill runs bf16 GEMMs over dequantized weights (floor at the bf16 rate)"
                           : " (this backend emulates FP8 with f32 weights: the floor counts what it reads)");
    else
        printf("weights FP8 E4M3 (%s): a decode step streams %.4f GB of weights: %.0f matrix weights x %g B + "
               "%.0f per-channel scales x %g B + lm_head %.0f x %g B (+ %.0f B of its scales)%s\n",
               from, w / 1e9, k->mat_params, k->w_b, k->mat_rows, k->scale_b, k->lm_head, k->lm_b, k->lm_scale_b,
               k->w_b == 1 ? "" : " (this backend emulates FP8 with f32 weights: the floor counts what it reads)");
}

/* ---- the prefill-chunk sweep ----------------------------------------------- */

static int bench_sweep(bm_run *r, json_t *arr)
{
    const int R = r->o.sweep_repeats, S = r->o.suffix;
    int maxC = 0, maxP = 0;
    for (int i = 0; i < r->o.n_chunks; i++) maxC = r->o.chunks[i] > maxC ? r->o.chunks[i] : maxC;
    for (int i = 0; i < r->o.n_sweep; i++) maxP = r->o.sweep_prefixes[i] > maxP ? r->o.sweep_prefixes[i] : maxP;
    double *a = calloc((size_t)R * 2, sizeof *a), *b = a + R;
    if (!a) return FRT_ERR_OUT_OF_MEMORY;
    printf("\nprefill-chunk sweep (suffix %d, %d repeats, p50 ms; unaligned prefix = P + C/2: restore at P, append "
           "C/2 + %d)\n",
           S, R, S);
    printf("%6s %7s | %9s | %11s %13s %12s %12s\n", "C", "prefix", "cold p50", "cap aligned", "cap unaligned",
           "remainder", "rem. floor");
    const bm_counts k = bm_counts_of(&r->cfg, r->o.backend == FRT_BACKEND_CUDA, r->o.kv_fp8, r->w_mode, r->o.lm_fp8);
    for (int ci = 0; ci < r->o.n_chunks; ci++) {
        const int C = r->o.chunks[ci];
        if (over_budget(r, "sweep chunk")) break;
        frt_model *m = NULL;
        int rc = load_model(r, C, maxP + maxC / 2 + S + 1, &m);
        if (rc) {
            json_t *e = json_pack("{s:i}", "C", C);
            note_error(r, e, "sweep: load", rc);
            json_array_append_new(arr, e);
            continue;
        }
        bm_mem_sample(r, frt_model_context(m));
        for (int pi = 0; pi < r->o.n_sweep; pi++) {
            int P = r->o.sweep_prefixes[pi] / C * C;
            if (P < C) P = C;
            if (over_budget(r, "sweep prefix")) break;
            fprintf(stderr, "frt bench: sweep C=%d P=%d...\n", C, P);
            int n = 0;
            for (int i = -1; i < R && !rc; i++) {
                double t;
                rc = cold_once(m, r->ids, P + S, &t);
                if (!rc && i >= 0) a[n++] = t;
            }
            double cold = bm_pct(a, n, .5);
            frt_capsule *cap = NULL;
            if (!rc) rc = frt_model_reset(m);
            if (!rc) rc = frt_model_prefill(m, r->ids, P);
            if (!rc) rc = frt_capsule_snapshot(m, FRT_TIER_DEVICE, NULL, NULL, 0, &cap);
            int aligned = frt_model_aligned_len(m, P + C / 2);
            int na = 0, nu = 0;
            for (int i = -1; i < R && !rc; i++) {
                double t_res, t_app, t1, t2;
                rc = capsule_once(m, cap, FRT_RESTORE_FULL, r->ids + P, S, &t_res, &t_app, &t1);
                if (!rc) rc = capsule_once(m, cap, FRT_RESTORE_FULL, r->ids + P, C / 2 + S, &t_res, &t_app, &t2);
                if (!rc && i >= 0) a[na++] = t1, b[nu++] = t2;
            }
            frt_capsule_free(cap);
            if (rc) {
                json_t *e = json_pack("{s:i, s:i}", "C", C, "prefix", P);
                note_error(r, e, "sweep", rc);
                json_array_append_new(arr, e);
                json_flush(r);
                rc = 0;
                continue;
            }
            double al = bm_pct(a, na, .5), un = bm_pct(b, nu, .5);
            double rem_fl = bm_prefill_floor_ms(r, &k, P, C / 2 + S) - bm_prefill_floor_ms(r, &k, P, S);
            printf("%6d %7d | %9.2f | %11.2f %13.2f %12.2f %12.3f\n", C, P, cold, al, un, un - al, rem_fl);
            json_t *e = json_pack("{s:i, s:i, s:i, s:i, s:f, s:f, s:o, s:o, s:f, s:f}", "C", C, "prefix", P,
                                  "unaligned_prefix", P + C / 2, "aligned_len", aligned, "cold_ttft_p50_ms", cold,
                                  "cold_ttft_floor_ms", bm_prefill_floor_ms(r, &k, 0, P + S),
                                  "capsule_ttft_aligned", stats_json(a, na), "capsule_ttft_unaligned",
                                  stats_json(b, nu), "remainder_ms", un - al, "remainder_floor_ms", rem_fl);
            json_array_append_new(arr, e);
            json_flush(r);
        }
        frt_model_free(m);
    }
    free(a);
    return 0;
}

/* ---- entry ----------------------------------------------------------------- */

static int fail(bm_run *r, int status)
{
    json_object_set_new(r->root, "error", json_string(frt_last_error()));
    json_flush(r);
    return frt_cli_fail("bench", status);
}

int frt_bench_model(int argc, char **argv)
{
    bm_run run;
    memset(&run, 0, sizeof run);
    bm_run *r = &run;
    int prc = bm_parse_args(argc, argv, &r->o);
    if (prc) return prc == 1 ? 0 : prc;
    if (!r->o.backend_set) {
        int n = 0;
        frt_device_count(FRT_BACKEND_CUDA, &n);
        r->o.backend = n > 0 ? FRT_BACKEND_CUDA : FRT_BACKEND_CPU;
    }
    r->t_start = bm_now_s();
    r->root = json_object();
    json_object_set_new(r->root, "bench", json_string("model"));
    json_object_set_new(r->root, "skipped", json_array());
    int rc = r->o.shape ? frt_gen_model_config(r->o.shape, &r->cfg) : frt_config_load(r->o.model_dir, &r->cfg);
    r->w_mode = bm_weight_mode(&r->cfg, r->o.w_fp8);
    if (rc) return fail(r, rc);

    /* the ids: enough for every prefix, remainder, suffix and decode */
    int maxP = 0, maxC = 0;
    for (int i = 0; i < r->o.n_prefixes; i++) maxP = r->o.prefixes[i] > maxP ? r->o.prefixes[i] : maxP;
    for (int i = 0; i < r->o.n_sweep; i++) maxP = r->o.sweep_prefixes[i] > maxP ? r->o.sweep_prefixes[i] : maxP;
    for (int i = 0; i < r->o.n_chunks; i++) maxC = r->o.chunks[i] > maxC ? r->o.chunks[i] : maxC;
    rc = ids_make(r, maxP + maxC + r->o.suffix + r->o.decode_tokens + 1, r->cfg.vocab_size);
    if (!rc && r->o.dump_ids) rc = ids_dump(r, r->o.dump_ids, r->cfg.vocab_size);
    if (!rc && r->o.write_config) rc = frt_mkdir_p(r->o.write_config);
    if (!rc && r->o.write_config) rc = frt_gen_model_write_configs(r->o.shape, r->o.write_config);
    if (rc || r->o.no_run) {
        int ret = rc ? fail(r, rc) : 0;
        free(r->ids);
        json_decref(r->root);
        return ret;
    }

    const int cuda = r->o.backend == FRT_BACKEND_CUDA;
    json_object_set_new(r->root, "model", json_string(r->o.shape ? r->o.shape : r->o.model_dir));
    json_object_set_new(r->root, "backend", json_string(frt_backend_name(r->o.backend)));
    json_object_set_new(r->root, "seed", json_integer((json_int_t)r->o.seed));
    json_object_set_new(r->root, "suffix", json_integer(r->o.suffix));
    json_object_set_new(r->root, "repeats", json_integer(r->o.repeats));
    json_object_set_new(
        r->root, "conventions",
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "d2d_rate",
                  "device-to-device copy rate counting bytes read + written (H200.md: 3971 GB/s)", "capsule_floor",
                  "device tier: 2 x capsule bytes / d2d rate; host tier: bytes / pinned d2h or h2d rate",
                  "decode_floor",
                  "bytes read per token (all matrices incl. lm_head, not the embedding table; recurrent + conv state; "
                  "KV up to the context) / d2d rate, a read-only stream charged at the read+write rate as H200.md",
                  "prefill_floor",
                  "roofline: the larger of FLOPs / measured GEMM rate and the bytes read at least once (the decode "
                  "bytes at the context) / d2d rate; FLOPs = 2 x matrix params x tokens (lm_head once) + 4 x causal "
                  "pairs x heads x head_dim per full layer + 8 x d_k x d_v per token per value head per linear layer; "
                  "a long prefill is bound by the FLOPs, a short append by the bytes",
                  "fraction", "floor / measured (1.0 = at the floor)"));

    rc = bm_measure_floors(r);
    if (rc) return fail(r, rc);
    json_flush(r);

    if (r->o.shape) {
        fprintf(stderr, "frt bench: building random %s weights in memory (seed %llu)...\n", r->o.shape, r->o.seed);
        double t0 = bm_now_s();
        rc = frt_gen_model_build(r->o.shape, r->o.seed, &r->cfg, &r->ck);
        if (rc) return fail(r, rc);
        double dt = bm_now_s() - t0;
        fprintf(stderr, "frt bench: built in %.1f s\n", dt);
        json_object_set_new(r->root, "weights_build_s", json_real(dt));
    }

    bm_row rows[MAX_LIST];
    memset(rows, 0, sizeof rows);
    if (r->o.n_prefixes) {
        frt_model *m = NULL;
        /* 3 D for the decode figures, and the sampling-cost variants: 3 x (D variant steps + D plain ones) */
        int dec = r->o.decode_tokens * (r->o.no_sampling_costs ? 3 : 9);
        rc = load_model(r, r->o.chunk, r->o.max_seq ? r->o.max_seq : maxP + r->o.suffix + dec + 4, &m);
        if (rc) {
            frt_checkpoint_close(r->ck);
            free(r->ids);
            return fail(r, rc);
        }
        bm_mem_sample(r, frt_model_context(m));
        frt_model_info info;
        frt_model_info_get(m, &info);
        const bm_counts k = bm_counts_of(&r->cfg, cuda, r->o.kv_fp8, r->w_mode, r->o.lm_fp8);
        const bm_kv kv = kv_per_token(m, info.n_state);
        json_object_set_new(
            r->root, "model_info",
            json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:f, s:f, s:s, s:I, s:I}", "model_type",
                      info.model_type, "n_layers", info.n_layers, "n_full_layers", info.n_full_layers,
                      "n_linear_layers", info.n_linear_layers, "vocab_size", info.vocab_size, "prefill_chunk",
                      info.prefill_chunk, "prefill_group", info.prefill_group, "max_seq", info.max_seq,
                      "weight_bytes", (json_int_t)info.weight_bytes,
                      "state_bytes", (json_int_t)info.state_bytes, "matrix_params", k.mat_params, "lm_head_params",
                      k.lm_head, "kv_dtype", kv.dtype, "kv_bytes_per_token", (json_int_t)kv.bytes,
                      "kv_bf16_bytes_per_token", (json_int_t)(kv.values * 2)));
        json_object_set_new(json_object_get(r->root, "model_info"), "gemm_autotune", json_integer(r->o.autotune));
        json_t *arr = json_array();
        json_object_set_new(r->root, "prefixes", arr);
        for (int i = 0; i < r->o.n_prefixes && !rc; i++) {
            if (over_budget(r, "prefix")) break;
            json_t *pj = json_object();
            json_array_append_new(arr, pj);
            int prc2 = bench_prefix(r, m, r->o.prefixes[i], &rows[i], pj);
            if (prc2) note_error(r, pj, "prefix", prc2);
            json_flush(r);
        }
        frt_model_free(m);
        print_rows(r, rows, r->o.n_prefixes);
        printf("weights %.2f GB, state %.3f GB (at max_seq %d), device memory in use: %.2f GB before load, "
               "%.2f GB peak\n",
               (double)info.weight_bytes / 1e9, (double)info.state_bytes / 1e9, info.max_seq,
               (double)r->mem_base / 1e9, (double)r->mem_peak / 1e9);
        printf("KV cache %s: %zu bytes per token of context (%zu values; at bf16 %zu bytes, %.2fx)\n", kv.dtype,
               kv.bytes, kv.values, kv.values * 2, kv.values ? (double)kv.bytes / (double)(kv.values * 2) : 0.0);
        print_weight_stream(r, &k);
    }
    if (r->o.n_chunks) {
        json_t *sw = json_array();
        json_object_set_new(r->root, "chunk_sweep", sw);
        rc = bench_sweep(r, sw);
    }
    if (!rc && r->first_error) {
        json_object_set_new(r->root, "error", json_string("some steps failed: see their \"error\" fields"));
        json_flush(r);
        fprintf(stderr, "frt bench: some steps failed (see FAILED above)\n");
        json_decref(r->root);
        frt_checkpoint_close(r->ck);
        free(r->ids);
        return 1;
    }
    printf("floors: d2d %.0f GB/s (read+write), h2d %.1f GB/s, d2h %.1f GB/s, %s: %.1f TFLOP/s\n",
           r->fl.d2d_rw_Bps / 1e9, r->fl.h2d_Bps / 1e9, r->fl.d2h_Bps / 1e9, r->fl.gemm_what,
           r->fl.gemm_flops / 1e12);
    if (r->fl.gemm_fp8_flops > 0)
        printf("        FP8 GEMM (frt_cuda_gemm_fp8, 8192^3): %.1f TFLOP/s: the prefill floors count the layers' "
               "matrix FLOPs at it, the rest at the bf16 rate\n",
               r->fl.gemm_fp8_flops / 1e12);
    if (rc) {
        frt_checkpoint_close(r->ck);
        free(r->ids);
        return fail(r, rc);
    }
    json_flush(r);
    if (r->o.json_path) printf("wrote %s\n", r->o.json_path);
    json_decref(r->root);
    frt_checkpoint_close(r->ck);
    free(r->ids);
    return 0;
}
