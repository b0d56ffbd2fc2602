/* bench_policy.c - frt bench policy: the latency of one Pi0 / Pi0.5
 * inference next to its floor (docs/policies.md, docs/PERF.md).
 *
 *   frt bench policy -m DIR [--cameras N] [--tokens N] [--repeats R]
 *                    [--warmup W] [--backend cpu|cuda] [--json FILE]
 *
 * Random inputs at the model's shapes (every camera present, a prompt of N
 * valid tokens, a random state for Pi0, the episode's noise); W untimed
 * inferences, then R timed ones: p50, p99, mean and min in ms. The floor:
 * the vision and prefix FLOPs over this machine's measured GEMM rate, plus
 * the expert's FLOPs over the same rate or one read of its weights per
 * Euler step over the measured copy rate, whichever is larger
 * (frt_policy_cost_get; weights f32 on the cpu backend, bf16 on cuda).
 * The cuda backend's graph runs at the model's most cameras and tokens
 * whatever --cameras / --tokens say (absent cameras and padding are masked
 * rows: docs/policies.md), while the floor counts the requested ones, so
 * the ratio to the floor shows that cost too. */
#include "args.h"
#include "bench_run.h"
#include "cli.h"

#include "frt/policy.h"
#include "frt/status.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Random inputs at the model's shapes; owns its arrays. */
typedef struct bench_obs {
    float *px, *state;
    int32_t *ids;
    frt_policy_inputs in;
} bench_obs;

static float uniform(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return (float)((*x >> 40) * (1.0 / 16777216.0));
}

static int obs_make(const frt_policy_info *pi, int cameras, int tokens, bench_obs *o)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    size_t npx = (size_t)cameras * 3 * pi->image_height * pi->image_width;
    memset(o, 0, sizeof *o);
    o->px = malloc(npx * sizeof(float));
    o->ids = malloc((size_t)tokens * sizeof(int32_t));
    o->state = malloc((size_t)pi->max_state_dim * sizeof(float) + 4);
    if (!o->px || !o->ids || !o->state) return FRT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < npx; i++) o->px[i] = 2.0f * uniform(&x) - 1.0f;
    for (int i = 0; i < tokens; i++) o->ids[i] = i == 0 ? 2 : 3 + (int32_t)(uniform(&x) * (float)(pi->vocab_size - 3));
    for (int i = 0; i < pi->max_state_dim; i++) o->state[i] = 2.0f * uniform(&x) - 1.0f;
    o->in = (frt_policy_inputs){o->px, cameras, 3, pi->image_height, pi->image_width, NULL, o->ids, NULL, tokens,
                                pi->state_in_prompt ? NULL : o->state, pi->state_in_prompt ? 0 : pi->max_state_dim,
                                NULL, NULL, NULL, 0};
    return 0;
}

static void obs_free(bench_obs *o)
{
    free(o->px);
    free(o->ids);
    free(o->state);
}

/* The timed inferences; ms[0..repeats) in milliseconds. */
static int time_runs(frt_model *m, const bench_obs *o, int warmup, int repeats, float *act, size_t n, double *ms)
{
    for (int i = -warmup; i < repeats; i++) {
        double t0 = bm_now_s();
        FRT_TRY(frt_policy_run(m, &o->in, act, n));
        if (i >= 0) ms[i] = (bm_now_s() - t0) * 1e3;
    }
    return 0;
}

/* The floor in ms (see the top of the file). */
static double floor_ms(const frt_policy_cost *c, const bm_floors *fl, int steps, double bytes_per_param)
{
    double pre = (c->flops_vision + c->flops_prefix) / fl->gemm_flops;
    double exp_flops = c->flops_expert / fl->gemm_flops;
    double exp_bytes = steps * c->expert_params * bytes_per_param / (fl->d2d_rw_Bps / 2.0);
    return 1e3 * (pre + (exp_flops > exp_bytes ? exp_flops : exp_bytes));
}

static void report(const char *dir, frt_backend backend, const frt_policy_info *pi, int cameras, int tokens, const frt_policy_cost *c,
                   const double *ms, int repeats, double fl_ms, json_t *root)
{
    double mean = 0, mn = ms[0];
    for (int i = 0; i < repeats; i++) {
        mean += ms[i] / repeats;
        if (ms[i] < mn) mn = ms[i];
    }
    double p50 = bm_pct(ms, repeats, 0.5), p99 = bm_pct(ms, repeats, 0.99);
    double gf = (c->flops_vision + c->flops_prefix + c->flops_expert) / 1e9;
    const char *bk = backend == FRT_BACKEND_CUDA ? "cuda" : "cpu";
    printf("frt bench policy: %s (%s) on %s, %d cameras, %d tokens, chunk %d x %d, %d steps\n", dir, pi->model_type,
           bk, cameras, tokens, pi->chunk, pi->action_dim, pi->n_steps);
    printf("  %.3f GFLOP an inference (vision %.3f, prefix %.3f, expert %.3f)\n", gf, c->flops_vision / 1e9,
           c->flops_prefix / 1e9, c->flops_expert / 1e9);
    printf("  p50 %.3f ms  p99 %.3f ms  mean %.3f ms  min %.3f ms  (%d runs)\n", p50, p99, mean, mn, repeats);
    printf("  floor %.3f ms: p50 is %.2fx the floor, %.1f GFLOP/s\n", fl_ms, p50 / fl_ms, gf / (p50 * 1e-3));
    json_object_set_new(root, "bench", json_string("policy"));
    json_object_set_new(root, "model_type", json_string(pi->model_type));
    json_object_set_new(root, "backend", json_string(bk));
    json_object_set_new(root, "cameras", json_integer(cameras));
    json_object_set_new(root, "tokens", json_integer(tokens));
    json_object_set_new(root, "gflop", json_real(gf));
    json_object_set_new(root, "latency_ms", json_pack("{s:f, s:f, s:f, s:f, s:i}", "p50", p50, "p99", p99, "mean",
                                                      mean, "min", mn, "runs", repeats));
    json_object_set_new(root, "floor_ms", json_real(fl_ms));
}

static int bench_run(const char *dir, frt_backend backend, int cameras, int tokens, int warmup, int repeats,
                     const char *json_path)
{
    frt_model_params mp = frt_model_default_params();
    mp.backend = backend;
    frt_model *m = NULL;
    int rc = frt_cli_load_model("bench policy", dir, &mp, 0, &m);
    if (rc) return frt_cli_fail("bench policy", rc);
    frt_policy_info pi;
    frt_policy_cost cost;
    bench_obs o;
    memset(&o, 0, sizeof o);
    rc = frt_policy_info_get(m, &pi);
    if (rc == 0 && cameras == 0) cameras = pi.max_cameras;
    if (rc == 0 && tokens == 0) tokens = pi.max_tokens;
    if (rc == 0) rc = frt_policy_cost_get(m, cameras, tokens, &cost);
    if (rc == 0) rc = obs_make(&pi, cameras, tokens, &o);
    size_t n = rc == 0 ? (size_t)pi.chunk * pi.action_dim : 0;
    float *act = malloc(n * sizeof(float) + 4);
    double *ms = malloc((size_t)repeats * sizeof(double));
    if (rc == 0 && (!act || !ms)) rc = FRT_ERR_OUT_OF_MEMORY;
    if (rc == 0) rc = time_runs(m, &o, warmup, repeats, act, n, ms);
    bm_run r;
    memset(&r, 0, sizeof r);
    r.o.backend = backend;
    r.root = json_object();
    if (rc == 0) rc = bm_measure_floors(&r);
    if (rc == 0)
        report(dir, backend, &pi, cameras, tokens, &cost, ms, repeats,
               floor_ms(&cost, &r.fl, pi.n_steps, backend == FRT_BACKEND_CPU ? 4.0 : 2.0), r.root);
    if (rc == 0 && json_path && json_dump_file(r.root, json_path, JSON_INDENT(2)) != 0)
        rc = frt_cli_fail("bench policy", FRT_ERR_IO);
    else if (rc < 0)
        rc = frt_cli_fail("bench policy", rc);
    json_decref(r.root);
    free(act);
    free(ms);
    obs_free(&o);
    frt_model_free(m);
    return rc ? 1 : 0;
}

int frt_bench_policy(int argc, char **argv)
{
    const char *dir = NULL, *json_path = NULL;
    int cameras = 0, tokens = 0, repeats = 10, warmup = 1, backend = FRT_ARG_BACKEND_AUTO;
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &dir, "DIR", "the policy checkpoint directory", .dflt = ""),
        FRT_OPT(0, "cameras", FRT_ARG_INT, &cameras, "N", "cameras, all present (0 = the model's most)", .min = 0,
                .max = 64),
        FRT_OPT(0, "tokens", FRT_ARG_INT, &tokens, "N", "valid prompt tokens (0 = the model's most)", .min = 0,
                .max = 1 << 16),
        FRT_OPT(0, "repeats", FRT_ARG_INT, &repeats, "R", "timed inferences", .min = 1, .max = 100000),
        FRT_OPT(0, "warmup", FRT_ARG_INT, &warmup, "W", "untimed inferences first", .min = 0, .max = 1000),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the policy runs"),
        FRT_OPT(0, "json", FRT_ARG_STR, &json_path, "FILE", "also write the results as JSON", .dflt = ""),
    };
    frt_cmd_spec spec = {"bench policy", "-m DIR [options]",
                         "The latency of one Pi0 / Pi0.5 inference on random inputs, next to its floor (the\n"
                         "vision and prefix FLOPs over the measured GEMM rate plus the expert's FLOPs or\n"
                         "weight reads per step, whichever is larger).\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!dir) return frt_args_error(&spec, "-m/--model DIR is required");
    return bench_run(dir, (frt_backend)frt_args_backend(backend), cameras, tokens, warmup, repeats, json_path);
}
