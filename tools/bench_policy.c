/* bench_policy.c - frt bench policy: the latency of one Pi0 / Pi0.5
 * inference next to its floor (docs/policies.md, docs/PERF.md).
 *
 *   frt bench policy -m DIR [--cameras N] [--tokens N] [--repeats R]
 *                    [--warmup W] [--backend cpu|cuda] [--cfg-beta B]
 *                    [--cfg-mode both|fused|serial] [--autotune N]
 *                    [--tune-file FILE] [--batch B] [--dtype default|fp8]
 *                    [--json FILE]
 *
 * Random inputs at the model's shapes (every camera present, a prompt of N
 * valid tokens, a random state for Pi0, the episode's noise); W untimed
 * inferences, then R timed ones: p50, p99, mean and min in ms, and the
 * p50 of the denoise-only replay (the 10 expert passes alone, on the prefix
 * the run left: how the time splits between the prefix and the expert).
 * Without --cameras, one row per camera count from 2 (or 1) to the model's
 * most. With --cfg-beta B (>= 1) each camera count also runs guided
 * (RECAP CFG, a conditioned prompt of N + 4 tokens): serial and / or fused.
 * Each row prints the graph's node count where the backend counts it (the
 * cuda backend: kernels, copies and host tasks of the whole inference).
 * With --batch B (the model loaded with B batch slots, 2 B with
 * --cfg-beta) each camera count also times frt_policy_run_batch of B
 * rollouts with B different observations (and guided, at --cfg-beta):
 * p50 / p99 of the batch, its p50 per slot and its throughput in slots
 * (rollouts) a second next to the single inference's (B = 1), and how far
 * each rollout is from its own single run (max norm-wise rel, min cosine
 * over the rollouts, the same noise).
 *
 * The floors: the vision and prefix FLOPs over this machine's measured GEMM
 * rate, plus the expert's FLOPs over the same rate or its weight reads over
 * the measured copy rate (bytes read + written a second: a read of N bytes
 * takes N / rate, as frt bench's decode floor charges it), whichever is
 * larger (frt_policy_cost_get; weights f32 on the cpu backend, bf16 on
 * cuda). Guided: the prefix twice (the
 * advantage tokens sit inside the bidirectional prefix) and the expert's
 * FLOPs twice; its weights read twice a step serially, once fused (both
 * slots in one pass). The cuda backend's graph runs at the prompt bucket
 * of N (16, 32, ...: padding rows are masked) while the floor counts N.
 * A batch of B: B times the vision and prefix FLOPs, B times the expert's
 * FLOPs (2 B guided) or its weights read once a step, whichever is larger
 * (the cuda batch graph runs at the prompt bucket of N, as a single run).
 * FRT_PROFILE=policy brackets the last timed inference of the first row
 * with the driver's profiler (`ncu --profile-from-start off
 * --graph-profiling node`: every kernel of that one graph replay). */
#include "args.h"
#include "bench_run.h"
#include "cli.h"

#include "frt/policy.h"
#include "frt/status.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Random inputs at the model's shapes; owns its arrays. */
typedef struct bench_obs {
    float *px, *state, *noise;
    int32_t *ids, *ids_cond;
    frt_policy_inputs in;
} bench_obs;

static float uniform(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return (float)((*x >> 40) * (1.0 / 16777216.0));
}

static void fill_ids(int32_t *ids, int n, int vocab, uint64_t *x)
{
    for (int i = 0; i < n; i++) ids[i] = i == 0 ? 2 : 3 + (int32_t)(uniform(x) * (float)(vocab - 3));
}

/* tokens_cond: the conditioned prompt's length (0: no CFG); seed: which
 * random observation (and noise, o->noise, not in o->in). */
static int obs_make(const frt_policy_info *pi, int cameras, int tokens, int tokens_cond, uint64_t seed,
                    bench_obs *o)
{
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
    size_t npx = (size_t)cameras * 3 * pi->image_height * pi->image_width;
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    memset(o, 0, sizeof *o);
    o->px = malloc(npx * sizeof(float));
    o->noise = malloc(na * sizeof(float));
    o->ids = malloc((size_t)tokens * sizeof(int32_t));
    o->ids_cond = malloc((size_t)tokens_cond * sizeof(int32_t) + 4);
    o->state = malloc((size_t)pi->max_state_dim * sizeof(float) + 4);
    if (!o->px || !o->ids || !o->ids_cond || !o->state || !o->noise) return FRT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < npx; i++) o->px[i] = 2.0f * uniform(&x) - 1.0f;
    for (size_t i = 0; i < na; i++) o->noise[i] = 4.0f * uniform(&x) - 2.0f;
    fill_ids(o->ids, tokens, pi->vocab_size, &x);
    if (tokens_cond > 0) { /* the task, then the indicator */
        memcpy(o->ids_cond, o->ids, (size_t)tokens * sizeof(int32_t));
        fill_ids(o->ids_cond + tokens, tokens_cond - tokens, pi->vocab_size, &x);
    }
    for (int i = 0; i < pi->max_state_dim; i++) o->state[i] = 2.0f * uniform(&x) - 1.0f;
    o->in = (frt_policy_inputs){o->px, cameras, 3, pi->image_height, pi->image_width, NULL, o->ids, NULL, tokens,
                                pi->state_in_prompt ? NULL : o->state, pi->state_in_prompt ? 0 : pi->max_state_dim,
                                NULL, tokens_cond ? o->ids_cond : NULL, NULL, tokens_cond};
    return 0;
}

static void obs_free(bench_obs *o)
{
    free(o->px);
    free(o->ids);
    free(o->ids_cond);
    free(o->state);
    free(o->noise);
}

/* One row's results. */
typedef struct bench_row {
    const char *what; /* "baseline", "cfg serial", "cfg fused" */
    int cameras;
    double p50, p99, mean, min, denoise_p50, floor_ms;
    int nodes; /* -1: the backend does not count */
    frt_policy_cost cost; /* what the floor counts (the JSON's "cost") */
    int steps;
    double bytes_per_param;
} bench_row;

/* The timed inferences (ms[0..repeats) in milliseconds), then as many
 * denoise-only replays (dn[]). */
static int time_runs(frt_model *m, const frt_policy_inputs *in, int warmup, int repeats, float *act, size_t n,
                     double *ms, double *dn)
{
    for (int i = -warmup; i < repeats; i++) {
        double t0 = bm_now_s();
        if (i == repeats - 1) bm_profile("policy", 1); /* FRT_PROFILE=policy: the last inference of the first row */
        FRT_TRY(frt_policy_run(m, in, act, n));
        if (i == repeats - 1) bm_profile("policy", 0);
        if (i >= 0) ms[i] = (bm_now_s() - t0) * 1e3;
    }
    for (int i = -warmup; i < repeats; i++) {
        double t0 = bm_now_s();
        FRT_TRY(frt_policy_denoise(m, in->state, in->n_state, NULL, act, n));
        if (i >= 0) dn[i] = (bm_now_s() - t0) * 1e3;
    }
    return 0;
}

/* The floor in ms (see the top of the file); cfg 0 none, 1 serial, 2 fused. */
static double floor_ms(const frt_policy_cost *c, const bm_floors *fl, int steps, double bytes_per_param, int cfg)
{
    const double k = cfg ? 2.0 : 1.0, reads = cfg == 1 ? 2.0 : 1.0;
    double pre = (c->flops_vision + k * c->flops_prefix) / fl->gemm_flops;
    double exp_flops = k * c->flops_expert / fl->gemm_flops;
    double exp_bytes = reads * steps * c->expert_params * bytes_per_param / fl->d2d_rw_Bps;
    return 1e3 * (pre + (exp_flops > exp_bytes ? exp_flops : exp_bytes));
}

static void row_stats(bench_row *r, const double *ms, const double *dn, int repeats)
{
    r->mean = 0, r->min = ms[0];
    for (int i = 0; i < repeats; i++) {
        r->mean += ms[i] / repeats;
        if (ms[i] < r->min) r->min = ms[i];
    }
    r->p50 = bm_pct(ms, repeats, 0.5), r->p99 = bm_pct(ms, repeats, 0.99);
    r->denoise_p50 = bm_pct(dn, repeats, 0.5);
}

/* The JSON of what a floor counts. */
static json_t *cost_json(const frt_policy_cost *c, int steps, double bytes_per_param)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:i, s:f}", "flops_vision", c->flops_vision, "flops_prefix",
                     c->flops_prefix, "flops_expert", c->flops_expert, "expert_params", c->expert_params, "steps",
                     steps, "weight_bytes_per_param", bytes_per_param);
}

static void row_print(const bench_row *r, json_t *rows)
{
    char nodes[32] = "n/a";
    if (r->nodes >= 0) snprintf(nodes, sizeof nodes, "%d", r->nodes);
    printf("  %d cams %-11s p50 %8.3f  p99 %8.3f (%.3fx p50)  min %8.3f  denoise p50 %8.3f  floor %7.3f "
           "(p50 %.2fx)  nodes %s\n",
           r->cameras, r->what, r->p50, r->p99, r->p99 / r->p50, r->min, r->denoise_p50, r->floor_ms,
           r->p50 / r->floor_ms, nodes);
    json_t *cost = cost_json(&r->cost, r->steps, r->bytes_per_param);
    json_array_append_new(rows, json_pack("{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:o}", "what", r->what,
                                          "cameras", r->cameras, "p50", r->p50, "p99", r->p99, "mean", r->mean,
                                          "min", r->min, "denoise_p50", r->denoise_p50, "floor_ms", r->floor_ms,
                                          "nodes", r->nodes, "cost", cost));
}

/* What one bench invocation measures. */
typedef struct bench_cfg {
    int tokens, warmup, repeats;
    float beta;       /* 0: no CFG rows */
    const char *mode; /* both | fused | serial */
    double bytes_per_param;
    bm_floors fl;
    int batch; /* 0: no batch rows */
} bench_cfg;

/* One row: the model's CFG settings as `cfg` says (0 off, 1 serial, 2
 * fused), the timed runs, the node count. */
static int bench_row_run(frt_model *m, const frt_policy_info *pi, const bench_cfg *b, const bench_obs *o, int cfg,
                         bench_row *r, double *ms, double *dn, float *act)
{
    static const char *const names[3] = {"baseline", "cfg serial", "cfg fused"};
    frt_policy_cost cost;
    FRT_TRY(frt_policy_cost_get(m, o->in.n_cameras, b->tokens, &cost));
    FRT_TRY(frt_policy_set_cfg(m, cfg > 0, cfg ? b->beta : 1.0f, 1));
    if (cfg) FRT_TRY(frt_policy_set_cfg_mode(m, cfg == 2 ? FRT_POLICY_CFG_FUSED : FRT_POLICY_CFG_SERIAL));
    const size_t n = (size_t)pi->chunk * pi->action_dim;
    frt_policy_inputs in = o->in;
    if (!cfg) in.input_ids_cond = NULL, in.n_tokens_cond = 0; /* refused while CFG is off */
    FRT_TRY(time_runs(m, &in, b->warmup, b->repeats, act, n, ms, dn));
    memset(r, 0, sizeof *r);
    r->what = names[cfg], r->cameras = o->in.n_cameras;
    row_stats(r, ms, dn, b->repeats);
    r->floor_ms = floor_ms(&cost, &b->fl, pi->n_steps, b->bytes_per_param, cfg);
    r->cost = cost, r->steps = pi->n_steps, r->bytes_per_param = b->bytes_per_param;
    int rc = frt_policy_graph_nodes(m, &in, &r->nodes);
    if (rc == FRT_ERR_UNSUPPORTED || rc == FRT_ERR_BACKEND) r->nodes = -1; /* not counted: n/a */
    else if (rc) return rc;
    return 0;
}

/* The floor of a batch of n rollouts in ms (see the top of the file). */
static double floor_batch_ms(const frt_policy_cost *c, const bm_floors *fl, int steps, double bytes_per_param,
                             int n, int cfg)
{
    const double k = cfg ? 2.0 : 1.0;
    double pre = n * (c->flops_vision + k * c->flops_prefix) / fl->gemm_flops;
    double exp_flops = n * k * c->flops_expert / fl->gemm_flops;
    double exp_bytes = steps * c->expert_params * bytes_per_param / fl->d2d_rw_Bps;
    return 1e3 * (pre + (exp_flops > exp_bytes ? exp_flops : exp_bytes));
}

/* One batch's results. */
typedef struct batch_row {
    int cameras, n, cfg;
    double p50, p99, single_p50, floor_ms, max_rel, min_cos;
    frt_policy_cost cost; /* what the floor counts (the JSON's "cost", as a row's) */
    int steps;
    double bytes_per_param;
} batch_row;

static void batch_print(const batch_row *r, json_t *rows)
{
    const double sps = 1e3 * r->n / r->p50, sps1 = 1e3 / r->single_p50;
    printf("  %d cams %-11s p50 %8.3f  p99 %8.3f (%.3fx p50)  per slot %8.3f  %8.1f slots/s (B=1 %.1f: %.2fx)  "
           "floor %7.3f (p50 %.2fx)  vs single: rel <= %.2e, cos >= %.6f\n",
           r->cameras, r->cfg ? "cfg batch" : "batch", r->p50, r->p99, r->p99 / r->p50, r->p50 / r->n, sps, sps1,
           sps / sps1, r->floor_ms, r->p50 / r->floor_ms, r->max_rel, r->min_cos);
    json_array_append_new(rows, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o}", "what",
                                          r->cfg ? "cfg batch" : "batch", "cameras", r->cameras, "batch", r->n, "p50",
                                          r->p50, "p99", r->p99, "per_slot_p50", r->p50 / r->n, "slots_per_s", sps,
                                          "single_p50", r->single_p50, "floor_ms", r->floor_ms, "max_rel",
                                          r->max_rel, "min_cos", r->min_cos, "cost",
                                          cost_json(&r->cost, r->steps, r->bytes_per_param)));
}

/* Rollout r's chunk a against its single run s: norm-wise rel and cosine
 * folded into the row's worst. */
static void batch_agree(batch_row *row, const float *a, const float *s, size_t n)
{
    double d = 0, ss = 0, aa = 0, as = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - s[i]) * ((double)a[i] - s[i]);
        ss += (double)s[i] * s[i], aa += (double)a[i] * a[i], as += (double)a[i] * s[i];
    }
    const double rel = ss > 0 ? sqrt(d / ss) : sqrt(d), cs = aa > 0 && ss > 0 ? as / sqrt(aa * ss) : 1.0;
    if (rel > row->max_rel) row->max_rel = rel;
    if (cs < row->min_cos) row->min_cos = cs;
}

/* The single runs of the batch's observations (the reference), then the
 * timed batches; o[r] owns rollout r's inputs, in[r] with its noise. */
static int batch_time(frt_model *m, const bench_cfg *b, const frt_policy_inputs *in, size_t na, batch_row *row,
                      float *ref, float *act, double *ms)
{
    for (int r = 0; r < row->n; r++) FRT_TRY(frt_policy_run(m, &in[r], ref + r * na, na));
    for (int i = -b->warmup; i < b->repeats; i++) {
        double t0 = bm_now_s();
        FRT_TRY(frt_policy_run_batch(m, in, row->n, act, na * row->n));
        if (i >= 0) ms[i] = (bm_now_s() - t0) * 1e3;
    }
    row->p50 = bm_pct(ms, b->repeats, 0.5), row->p99 = bm_pct(ms, b->repeats, 0.99);
    row->max_rel = 0, row->min_cos = 1;
    for (int r = 0; r < row->n; r++) batch_agree(row, act + r * na, ref + r * na, na);
    return 0;
}

/* B rollouts of B different observations in one batch (cfg: guided at
 * --cfg-beta, fused), next to the single inference's p50 single_p50. */
static int bench_batch(frt_model *m, const frt_policy_info *pi, const bench_cfg *b, int cameras, int cfg,
                       double single_p50, json_t *rows)
{
    const int n = b->batch, tokens_cond = cfg ? (b->tokens + 4 < pi->max_tokens ? b->tokens + 4 : pi->max_tokens) : 0;
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    bench_obs *o = calloc((size_t)n, sizeof *o);
    frt_policy_inputs *in = calloc((size_t)n, sizeof *in);
    float *ref = malloc((size_t)n * na * sizeof(float)), *act = malloc((size_t)n * na * sizeof(float));
    double *ms = malloc((size_t)b->repeats * sizeof(double));
    int rc = o && in && ref && act && ms ? 0 : FRT_ERR_OUT_OF_MEMORY;
    for (int r = 0; r < n && rc == 0; r++) {
        rc = obs_make(pi, cameras, b->tokens, tokens_cond, 1 + (uint64_t)r, &o[r]);
        in[r] = o[r].in, in[r].noise = o[r].noise;
    }
    batch_row row = {.cameras = cameras, .n = n, .cfg = cfg, .single_p50 = single_p50, .min_cos = 1};
    frt_policy_cost cost;
    if (rc == 0) rc = frt_policy_cost_get(m, cameras, b->tokens, &cost);
    if (rc == 0) rc = frt_policy_set_cfg(m, cfg, cfg ? b->beta : 1.0f, 1);
    if (rc == 0 && cfg) rc = frt_policy_set_cfg_mode(m, FRT_POLICY_CFG_FUSED);
    if (rc == 0) rc = batch_time(m, b, in, na, &row, ref, act, ms);
    if (rc == 0) {
        row.floor_ms = floor_batch_ms(&cost, &b->fl, pi->n_steps, b->bytes_per_param, n, cfg);
        row.cost = cost, row.steps = pi->n_steps, row.bytes_per_param = b->bytes_per_param;
        batch_print(&row, rows);
    }
    for (int r = 0; o && r < n; r++) obs_free(&o[r]);
    free(o), free(in), free(ref), free(act), free(ms);
    return rc;
}

/* Every row of one camera count. */
static int bench_cameras(frt_model *m, const frt_policy_info *pi, const bench_cfg *b, int cameras, json_t *rows)
{
    const int tokens_cond = b->beta > 0 ? (b->tokens + 4 < pi->max_tokens ? b->tokens + 4 : pi->max_tokens) : 0;
    bench_obs o;
    int rc = obs_make(pi, cameras, b->tokens, tokens_cond, 0, &o);
    double single_p50[3] = {0, 0, 0};
    double *ms = malloc((size_t)b->repeats * sizeof(double)), *dn = malloc((size_t)b->repeats * sizeof(double));
    float *act = malloc((size_t)pi->chunk * pi->action_dim * sizeof(float));
    if (rc == 0 && (!ms || !dn || !act)) rc = FRT_ERR_OUT_OF_MEMORY;
    const int want[3] = {1, b->beta > 0 && strcmp(b->mode, "fused") != 0,
                         b->beta > 0 && strcmp(b->mode, "serial") != 0};
    for (int cfg = 0; cfg < 3 && rc == 0; cfg++) {
        if (!want[cfg]) continue;
        bench_row r;
        rc = bench_row_run(m, pi, b, &o, cfg, &r, ms, dn, act);
        if (rc == 0) row_print(&r, rows);
        single_p50[cfg] = r.p50;
    }
    for (int cfg = 0; cfg < 2 && rc == 0 && b->batch > 0; cfg++) /* the guided batch next to fused (else serial) */
        if (!cfg || b->beta > 0)
            rc = bench_batch(m, pi, b, cameras, cfg, cfg ? (want[2] ? single_p50[2] : single_p50[1]) : single_p50[0],
                             rows);
    if (rc == 0) rc = frt_policy_set_cfg(m, 0, 1.0f, 1);
    free(ms), free(dn), free(act);
    obs_free(&o);
    return rc;
}

static void print_head(const char *dir, frt_backend backend, const frt_policy_info *pi, const bench_cfg *b,
                       frt_model *m, json_t *root)
{
    frt_policy_cost c;
    const char *bk = backend == FRT_BACKEND_CUDA ? "cuda" : "cpu";
    printf("frt bench policy: %s (%s) on %s, %d tokens, chunk %d x %d, %d steps, %d runs after %d warm-up\n", dir,
           pi->model_type, bk, b->tokens, pi->chunk, pi->action_dim, pi->n_steps, b->repeats, b->warmup);
    if (frt_policy_cost_get(m, pi->max_cameras, b->tokens, &c) == 0)
        printf("  %d cameras: %.3f GFLOP an inference (vision %.3f, prefix %.3f, expert %.3f); expert %.2f M "
               "params\n", pi->max_cameras, (c.flops_vision + c.flops_prefix + c.flops_expert) / 1e9,
               c.flops_vision / 1e9, c.flops_prefix / 1e9, c.flops_expert / 1e9, c.expert_params / 1e6);
    printf("  floors from %.1f GFLOP/s GEMM and %.1f GB/s copy (read + write); times in ms\n", b->fl.gemm_flops / 1e9,
           b->fl.d2d_rw_Bps / 1e9);
    json_object_set_new(root, "bench", json_string("policy"));
    json_object_set_new(root, "model_type", json_string(pi->model_type));
    json_object_set_new(root, "backend", json_string(bk));
    json_object_set_new(root, "tokens", json_integer(b->tokens));
    json_object_set_new(root, "cfg_beta", json_real(b->beta));
}

/* The camera counts of the run: `cameras`, or 2 (1) .. max. */
static int bench_all(frt_model *m, const frt_policy_info *pi, const bench_cfg *b, int cameras, json_t *rows)
{
    const int lo = cameras ? cameras : (pi->max_cameras >= 2 ? 2 : 1), hi = cameras ? cameras : pi->max_cameras;
    for (int c = lo; c <= hi; c++) FRT_TRY(bench_cameras(m, pi, b, c, rows));
    return 0;
}

static int load(const char *dir, frt_backend backend, int autotune, const char *tune_file, int slots, int fp8,
                frt_model **m)
{
    frt_model_params mp = frt_model_default_params();
    mp.backend = backend;
    mp.weight_dtype = fp8 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
    mp.gemm_autotune = autotune;
    mp.gemm_tune_file = tune_file;
    mp.policy_batch = slots;
    return frt_cli_load_model("bench policy", dir, &mp, 0, m);
}

static int bench_run(const char *dir, frt_backend backend, int cameras, bench_cfg *b, int autotune,
                     const char *tune_file, const char *json_path, int fp8)
{
    frt_model *m = NULL;
    int rc = load(dir, backend, autotune, tune_file, b->batch * (b->beta > 0 ? 2 : 1), fp8, &m);
    if (rc) return frt_cli_fail("bench policy", rc);
    frt_policy_info pi;
    rc = frt_policy_info_get(m, &pi);
    if (rc == 0 && b->tokens == 0) b->tokens = pi.max_tokens;
    bm_run r;
    memset(&r, 0, sizeof r);
    r.o.backend = backend;
    r.root = json_object();
    json_t *rows = json_array();
    if (rc == 0) rc = bm_measure_floors(&r);
    b->fl = r.fl;
    b->bytes_per_param = backend == FRT_BACKEND_CPU ? 4.0 : 2.0;
    if (rc == 0) print_head(dir, backend, &pi, b, m, r.root);
    if (rc == 0 && fp8)
        printf("  --dtype fp8: the prefix's MLP in FP8 E4M3 (docs/policies.md); the floors are the unquantized ones\n");
    json_object_set_new(r.root, "dtype", json_string(fp8 ? "fp8" : "default"));
    if (rc == 0) rc = bench_all(m, &pi, b, cameras, rows);
    json_object_set_new(r.root, "rows", rows);
    if (rc == 0 && json_path && json_dump_file(r.root, json_path, JSON_INDENT(2)) != 0)
        rc = frt_cli_fail("bench policy", FRT_ERR_IO);
    else if (rc < 0)
        rc = frt_cli_fail("bench policy", rc);
    json_decref(r.root);
    frt_model_free(m);
    return rc ? 1 : 0;
}

int frt_bench_policy(int argc, char **argv)
{
    const char *dir = NULL, *json_path = NULL, *tune_file = NULL, *mode = "both", *dtype = "default";
    int cameras = 0, autotune = 0, backend = FRT_ARG_BACKEND_AUTO;
    bench_cfg b = {.tokens = 0, .warmup = 1, .repeats = 10, .beta = 0.0f};
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &dir, "DIR", "the policy checkpoint directory", .dflt = ""),
        FRT_OPT(0, "cameras", FRT_ARG_INT, &cameras, "N", "cameras, all present (0 = each of 2 .. the model's most)",
                .min = 0, .max = 64),
        FRT_OPT(0, "tokens", FRT_ARG_INT, &b.tokens, "N", "valid prompt tokens (0 = the model's most)", .min = 0,
                .max = 1 << 16),
        FRT_OPT(0, "repeats", FRT_ARG_INT, &b.repeats, "R", "timed inferences", .min = 1, .max = 100000),
        FRT_OPT(0, "warmup", FRT_ARG_INT, &b.warmup, "W", "untimed inferences first", .min = 0, .max = 1000),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the policy runs"),
        FRT_OPT(0, "cfg-beta", FRT_ARG_FLOAT, &b.beta, "B",
                "also time guided inference (RECAP CFG) at this beta (>= 1; 0 = none)", .fmin = 0, .fmax = 1e6),
        FRT_OPT(0, "cfg-mode", FRT_ARG_CHOICE, &mode, "MODE", "with --cfg-beta: the guided arrangements timed",
                .choices = "both|fused|serial"),
        FRT_CLI_OPT_AUTOTUNE(&autotune),
        FRT_CLI_OPT_TUNE_FILE(&tune_file),
        FRT_OPT(0, "batch", FRT_ARG_INT, &b.batch, "B",
                "also time frt_policy_run_batch of B rollouts (0 = none; 2 B slots with --cfg-beta)", .min = 0,
                .max = FRT_POLICY_BATCH_MAX),
        FRT_OPT(0, "dtype", FRT_ARG_CHOICE, &dtype, "DTYPE",
                "weight precision: the checkpoint's, or the prefix's MLP in FP8 E4M3 (cuda; docs/policies.md)",
                .choices = "default|fp8"),
        FRT_OPT(0, "json", FRT_ARG_STR, &json_path, "FILE", "also write the results as JSON", .dflt = ""),
    };
    frt_cmd_spec spec = {"bench policy", "-m DIR [options]",
                         "The latency of one Pi0 / Pi0.5 inference on random inputs, next to its floor (the\n"
                         "vision and prefix FLOPs over the measured GEMM rate plus the expert's FLOPs or\n"
                         "weight reads per step, whichever is larger), with the denoise-only time and the\n"
                         "graph's node count; with --cfg-beta, also serial and fused guided inference;\n"
                         "with --batch B, also B rollouts in one batched replay (p50 / p99 per batch and\n"
                         "per slot, slots a second next to B = 1).\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!dir) return frt_args_error(&spec, "-m/--model DIR is required");
    if (b.beta != 0.0f && b.beta < 1.0f) return frt_args_error(&spec, "--cfg-beta must be 0 (none) or >= 1");
    if (frt_args_find(&spec, "cfg-mode")->given && b.beta == 0.0f)
        return frt_args_error(&spec, "--cfg-mode picks the guided rows, which only --cfg-beta B (>= 1) runs");
    if (tune_file && autotune == 0) return frt_args_error(&spec, "--tune-file needs --autotune N");
    if (b.beta > 0 && 2 * b.batch > FRT_POLICY_BATCH_MAX)
        return frt_args_error(&spec, "--batch %d with --cfg-beta needs %d slots (at most %d)", b.batch, 2 * b.batch,
                              FRT_POLICY_BATCH_MAX);
    b.mode = mode;
    return bench_run(dir, (frt_backend)frt_args_backend(backend), cameras, &b, autotune, tune_file, json_path,
                     !strcmp(dtype, "fp8"));
}
