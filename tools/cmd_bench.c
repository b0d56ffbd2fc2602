/*
 * cmd_bench.c - frt bench: benchmarks.
 *
 *   frt bench exec [--backend cuda|cpu] [--json FILE] [--quick]
 *       the execution contract against the machine's ceilings:
 *       - a chain of 100 tiny kernels (cpu: host tasks), launched directly vs
 *         replayed as one captured graph: microseconds per chain (median of
 *         many, wall clock from first enqueue to sync, and between events);
 *       - copy bandwidth: device -> device (2 GiB, frt_buffer_copy and a
 *         64-piece frt_buffer_copy_batch), host -> device and device -> host
 *         through pinned memory (1 GiB); cpu: 256 MiB each. Events, warm-up,
 *         median. cuda rates are shown against the H200 ceilings measured in
 *         ../shared/H200.md. The device-to-device rate counts bytes read +
 *         written, in GiB/s (2^30), which is how that page's 3971 figure
 *         was computed (a 2 GiB copy in 1.007 ms).
 *
 *   frt bench grammar (--tokenizer DIR | --vocab-json FILE)   the host cost of
 *       one grammar mask per token: bench_grammar.c.
 *
 *   frt bench -m DIR | --shape NAME --random-weights ...   the model
 *       benchmark: bench_model.c.
 *
 *   frt bench cartridge --shape NAME [--docs P1,P2,..] ...   TTFT with a
 *       device- / host-resident cartridge against a cold prefill:
 *       bench_cartridge.c.
 */
#include "bench_model.h"
#include "args.h"
#include "cli.h"

#include "frt/debug.h"
#include "frt/exec.h"
#include "frt/status.h"


#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define CHAIN_LEN 100
#define CHAIN_FLOATS 256

/* The H200 ceilings (../shared/H200.md), GiB/s. */
#define H200_D2D_RW_GIBS 3971.0
#define H200_H2D_GIBS 51.6
#define H200_D2H_GIBS 51.5

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the launch chain ------------------------------------------------------ */

typedef struct chain_ctx {
    frt_context *ctx;
    frt_buffer *x;
} chain_ctx;

/* CHAIN_LEN tiny steps on s: kernels on cuda, host tasks on cpu. */
static int chain_enqueue(frt_stream *s, void *user)
{
    chain_ctx *c = user;
    for (int i = 0; i < CHAIN_LEN; i++) {
        int rc = frt_debug_axpb(s, c->x, CHAIN_FLOATS, 0.999f, 0.001f);
        if (rc) return rc;
    }
    return 0;
}

typedef struct chain_result {
    double wall_us, event_us;
} chain_result;

/* One timed chain: mode 0 direct, 1 graph replay. */
static int chain_once(chain_ctx *c, frt_graph *g, frt_stream *s, frt_event *e0, frt_event *e1,
                      int mode, double *wall, double *ev)
{
    double t0 = now_us();
    int rc = frt_event_record(e0, s);
    if (!rc) rc = mode ? frt_graph_replay(g, 0, s) : chain_enqueue(s, c);
    if (!rc) rc = frt_event_record(e1, s);
    if (!rc) rc = frt_stream_sync(s);
    *wall = now_us() - t0;
    float ms = 0;
    if (!rc) rc = frt_event_elapsed_ms(e0, e1, &ms);
    *ev = (double)ms * 1e3;
    return rc;
}

static int bench_chain(frt_context *ctx, int reps, chain_result res[2])
{
    frt_stream *s = frt_context_stream(ctx);
    frt_event *e0 = NULL, *e1 = NULL;
    frt_graph *g = NULL;
    chain_ctx c = {ctx, NULL};
    double *wall = malloc((size_t)reps * sizeof *wall), *ev = malloc((size_t)reps * sizeof *ev);
    int rc = wall && ev ? 0 : FRT_ERR_OUT_OF_MEMORY;
    if (!rc) rc = frt_buffer_alloc(ctx, "bench.chain", FRT_SPACE_DEVICE, CHAIN_FLOATS * sizeof(float), &c.x);
    if (!rc) rc = frt_buffer_fill(c.x, 0, CHAIN_FLOATS * sizeof(float), 0, s);
    if (!rc) rc = frt_event_create(ctx, &e0);
    if (!rc) rc = frt_event_create(ctx, &e1);
    if (!rc) rc = frt_graph_create(ctx, "bench.chain", 1, &g);
    if (!rc) rc = frt_graph_capture(g, 0, s, chain_enqueue, &c);
    for (int mode = 0; mode < 2 && !rc; mode++) {
        for (int i = 0; i < 10 && !rc; i++) rc = chain_once(&c, g, s, e0, e1, mode, &wall[0], &ev[0]);
        for (int i = 0; i < reps && !rc; i++) rc = chain_once(&c, g, s, e0, e1, mode, &wall[i], &ev[i]);
        if (!rc) {
            res[mode].wall_us = median(wall, reps);
            res[mode].event_us = median(ev, reps);
        }
    }
    frt_graph_destroy(g);
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_buffer_free(c.x);
    free(wall);
    free(ev);
    return rc;
}

/* ---- copies ---------------------------------------------------------------- */

typedef struct copy_case {
    const char *name;
    frt_space dst, src;
    size_t bytes;
    int pieces;     /* 0: one frt_buffer_copy; else a batch of that many pieces */
    double factor;  /* bytes counted per byte copied (2 for read + written) */
    double ceiling; /* GiB/s, 0 when unknown */
    double ms, gibs;
} copy_case;

static int bench_copy(frt_context *ctx, copy_case *cc, int reps)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *dst = NULL, *src = NULL;
    frt_event *e0 = NULL, *e1 = NULL;
    frt_copy *batch = NULL;
    double *ms = malloc((size_t)reps * sizeof *ms);
    int rc = ms ? 0 : FRT_ERR_OUT_OF_MEMORY;
    if (!rc) rc = frt_buffer_alloc(ctx, "bench.dst", cc->dst, cc->bytes, &dst);
    if (!rc) rc = frt_buffer_alloc(ctx, "bench.src", cc->src, cc->bytes, &src);
    if (!rc) rc = frt_buffer_fill(src, 0, cc->bytes, 0x3C, s);
    if (!rc) rc = frt_buffer_fill(dst, 0, cc->bytes, 0, s);
    if (!rc) rc = frt_event_create(ctx, &e0);
    if (!rc) rc = frt_event_create(ctx, &e1);
    if (!rc && cc->pieces) {
        batch = calloc((size_t)cc->pieces, sizeof *batch);
        if (!batch) rc = FRT_ERR_OUT_OF_MEMORY;
        size_t piece = cc->bytes / (size_t)cc->pieces;
        for (int i = 0; batch && i < cc->pieces; i++)
            batch[i] = (frt_copy){dst, (size_t)i * piece, src, (size_t)i * piece,
                                  i == cc->pieces - 1 ? cc->bytes - (size_t)i * piece : piece};
    }
    if (!rc) rc = frt_stream_sync(s);
    for (int i = -2; i < reps && !rc; i++) { /* two warm-up copies */
        rc = frt_event_record(e0, s);
        if (!rc) rc = cc->pieces ? frt_buffer_copy_batch(batch, cc->pieces, s)
                                 : frt_buffer_copy(dst, 0, src, 0, cc->bytes, s);
        if (!rc) rc = frt_event_record(e1, s);
        if (!rc) rc = frt_event_sync(e1);
        float t = 0;
        if (!rc) rc = frt_event_elapsed_ms(e0, e1, &t);
        if (!rc && i >= 0) ms[i] = t;
    }
    if (!rc) {
        cc->ms = median(ms, reps);
        cc->gibs = cc->factor * (double)cc->bytes / GIB / (cc->ms * 1e-3);
    }
    free(batch);
    free(ms);
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_buffer_free(dst);
    frt_buffer_free(src);
    return rc;
}

/* ---- frt bench exec -------------------------------------------------------- */

static int bench_exec(int argc, char **argv)
{
    const char *json_path = NULL;
    int quick = 0, backend_opt = FRT_ARG_BACKEND_AUTO;
    frt_arg opts[] = {
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend_opt, NULL, "where the benchmark runs"),
        FRT_OPT(0, "json", FRT_ARG_STR, &json_path, "FILE", "also write every figure as JSON", .dflt = ""),
        FRT_OPT(0, "quick", FRT_ARG_FLAG, &quick, NULL, "few repeats and 16 MiB copies (a smoke test)"),
    };
    frt_cmd_spec spec = {"bench exec", "[options]",
                         "The execution contract against the machine's ceilings: a chain of 100 tiny kernels\n"
                         "launched directly vs replayed as one graph, and copy bandwidth across memory spaces.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    frt_backend backend = (frt_backend)frt_args_backend(backend_opt);
    frt_context *ctx = NULL;
    int rc = frt_context_create(backend, 0, &ctx);
    if (rc) return frt_cli_fail("bench exec", rc);
    frt_device_info info;
    rc = frt_context_device_info(ctx, &info);
    if (rc) {
        frt_context_destroy(ctx);
        return frt_cli_fail("bench exec", rc);
    }
    const int cuda = backend == FRT_BACKEND_CUDA;
    printf("frt bench exec: %s backend, %s (%d %s, %.1f GiB)\n", frt_backend_name(backend), info.name,
           info.sm_count, cuda ? "SMs" : "cores", (double)info.total_bytes / GIB);

    /* launch chain */
    chain_result ch[2] = {{0, 0}, {0, 0}};
    rc = bench_chain(ctx, quick ? 20 : 500, ch);
    if (rc) {
        frt_context_destroy(ctx);
        return frt_cli_fail("bench exec", rc);
    }
    printf("\nlaunch chain: %d %s, median of %d\n", CHAIN_LEN, cuda ? "tiny kernels" : "tiny host tasks",
           quick ? 20 : 500);
    printf("  %-26s %14s %14s %12s\n", "", "us/chain wall", "us/chain event", "us/launch");
    printf("  %-26s %14.1f %14.1f %12.2f\n", "direct launches", ch[0].wall_us, ch[0].event_us,
           ch[0].wall_us / CHAIN_LEN);
    printf("  %-26s %14.1f %14.1f %12.2f\n", "one graph replay", ch[1].wall_us, ch[1].event_us,
           ch[1].wall_us / CHAIN_LEN);
    printf("  %-26s %13.2fx\n", "graph speed-up (wall)", ch[1].wall_us > 0 ? ch[0].wall_us / ch[1].wall_us : 0);

    /* copies */
    size_t big = quick ? (16u << 20) : cuda ? ((size_t)2 << 30) : (256u << 20);
    size_t host = quick ? (16u << 20) : cuda ? ((size_t)1 << 30) : (256u << 20);
    copy_case cases[] = {
        {"device -> device", FRT_SPACE_DEVICE, FRT_SPACE_DEVICE, big, 0, 2.0, cuda ? H200_D2D_RW_GIBS : 0, 0, 0},
        {"device -> device, batch 64", FRT_SPACE_DEVICE, FRT_SPACE_DEVICE, big, 64, 2.0,
         cuda ? H200_D2D_RW_GIBS : 0, 0, 0},
        {"host -> device (pinned)", FRT_SPACE_DEVICE, FRT_SPACE_PINNED_HOST, host, 0, 1.0,
         cuda ? H200_H2D_GIBS : 0, 0, 0},
        {"device -> host (pinned)", FRT_SPACE_PINNED_HOST, FRT_SPACE_DEVICE, host, 0, 1.0,
         cuda ? H200_D2H_GIBS : 0, 0, 0},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    const int reps = quick ? 3 : 20;
    printf("\ncopies: median of %d after 2 warm-up; d2d counts bytes read + written%s\n", reps,
           cuda ? "; ceilings from H200.md" : "");
    printf("  %-28s %10s %10s %12s %12s %9s\n", "", "bytes", "ms", "GiB/s", "ceiling", "of ceil");
    for (int i = 0; i < n_cases && !rc; i++) {
        rc = bench_copy(ctx, &cases[i], reps);
        if (rc) break;
        char ceil_s[32] = "-", frac_s[32] = "-";
        if (cases[i].ceiling > 0) {
            snprintf(ceil_s, sizeof ceil_s, "%.1f", cases[i].ceiling);
            snprintf(frac_s, sizeof frac_s, "%.1f%%", 100.0 * cases[i].gibs / cases[i].ceiling);
        }
        printf("  %-28s %7.2f GiB %10.3f %12.1f %12s %9s\n", cases[i].name, (double)cases[i].bytes / GIB,
               cases[i].ms, cases[i].gibs, ceil_s, frac_s);
    }
    if (rc) {
        frt_context_destroy(ctx);
        return frt_cli_fail("bench exec", rc);
    }

    if (json_path) {
        json_t *root = json_object(), *copies = json_array();
        json_object_set_new(root, "bench", json_string("exec"));
        json_object_set_new(root, "backend", json_string(frt_backend_name(backend)));
        json_object_set_new(root, "device", json_string(info.name));
        json_object_set_new(root, "quick", json_boolean(quick));
        json_object_set_new(root, "chain",
                            json_pack("{s:i, s:f, s:f, s:f, s:f}", "launches", CHAIN_LEN, "direct_wall_us",
                                      ch[0].wall_us, "direct_event_us", ch[0].event_us, "graph_wall_us",
                                      ch[1].wall_us, "graph_event_us", ch[1].event_us));
        for (int i = 0; i < n_cases; i++) {
            json_t *c = json_pack("{s:s, s:I, s:i, s:f, s:f, s:f}", "name", cases[i].name, "bytes",
                                  (json_int_t)cases[i].bytes, "pieces", cases[i].pieces, "median_ms",
                                  cases[i].ms, "gib_per_s", cases[i].gibs, "bytes_counted_per_byte",
                                  cases[i].factor);
            if (cases[i].ceiling > 0) {
                json_object_set_new(c, "ceiling_gib_per_s", json_real(cases[i].ceiling));
                json_object_set_new(c, "fraction_of_ceiling", json_real(cases[i].gibs / cases[i].ceiling));
            }
            json_array_append_new(copies, c);
        }
        json_object_set_new(root, "copies", copies);
        int jrc = json_dump_file(root, json_path, JSON_INDENT(2));
        json_decref(root);
        if (jrc) {
            fprintf(stderr, "frt bench exec: cannot write %s\n", json_path);
            frt_context_destroy(ctx);
            return 1;
        }
        printf("\nwrote %s\n", json_path);
    }
    frt_context_destroy(ctx);
    return 0;
}

/* ---- frt bench -m DIR | --shape NAME ... ------------------------------------ */

/* A comma-separated list for bench_model.c: positive, each a multiple of
 * `mult`. Exit code 2 after the message when it is not. */
static int check_list(const frt_cmd_spec *spec, const char *opt, const char *v, int mult)
{
    int32_t *ids = NULL;
    size_t n = 0;
    const char *bad = NULL;
    int rc = frt_parse_i32_list(v, 1, INT_MAX / 4, &ids, &n, &bad);
    if (rc == 0 && n > 16) {
        free(ids);
        return frt_args_error(spec, "%s: '%s' has %zu elements (at most 16)", opt, v, n);
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (ids[i] % mult) {
            int bad_value = (int)ids[i];
            free(ids);
            return frt_args_error(spec, "%s: '%d' is not a multiple of %d", opt, bad_value, mult);
        }
    free(ids);
    if (rc == 0) return 0;
    if (rc == FRT_PARSE_EMPTY) return frt_args_error(spec, "%s: '%s' has an empty element (a list like 2048,8192)", opt, v);
    return frt_args_error(spec, "%s: '%.*s' is not a positive integer (a list like 2048,8192)", opt,
                          (int)strcspn(bad, ","), bad);
}

/* The model benchmark's options are checked here with the shared parser,
 * then handed to bench_model.c (which parses them again, in this canonical
 * form, and checks how they combine). */
static int bench_model_cmd(int argc, char **argv)
{
    const char *model = NULL, *shape = NULL, *chunks = NULL, *prefixes = NULL, *sweep_prefixes = NULL;
    const char *json = NULL, *dump_ids = NULL, *write_config = NULL, *tmpdir = "/tmp";
    int random_weights = 0, backend = FRT_ARG_BACKEND_AUTO, chunk = 256, suffix = 64, repeats = 5, max_seq = 0;
    int sweep_repeats = 0, decode_tokens = 32, threads = 0, no_tiers = 0, no_run = 0, no_sampling_costs = 0;
    int prefill_group = 0, autotune = 0;
    const char *tune_file = NULL;
    const char *kv_dtype = "default", *wdtype = "default", *lmdtype = "default";
    unsigned long long seed = 1;
    double time_budget = 0;
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &model, "DIR", "checkpoint directory (or --shape)", .dflt = ""),
        FRT_OPT(0, "shape", FRT_ARG_STR, &shape, "NAME", "random weights at a real shape (frt gen-model --list)",
                .dflt = ""),
        FRT_OPT(0, "random-weights", FRT_ARG_FLAG, &random_weights, NULL, "with --shape: weights built in memory"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the model runs"),
        FRT_OPT(0, "chunk", FRT_ARG_INT, &chunk, "C", "prefill chunk of the main run, a multiple of 64", .min = 64,
                .max = INT_MAX / 4),
        FRT_OPT(0, "chunks", FRT_ARG_STR, &chunks, "A,B,..", "prefill-chunk sweep, after the main run", .dflt = "none"),
        FRT_OPT(0, "sweep-prefixes", FRT_ARG_STR, &sweep_prefixes, "P,..", "prefixes of the sweep",
                .dflt = "8192,32768"),
        FRT_OPT(0, "sweep-repeats", FRT_ARG_INT, &sweep_repeats, "N", "timed repeats in the sweep; 0 = --repeats",
                .min = 0, .max = INT_MAX / 4),
        FRT_OPT(0, "prefixes", FRT_ARG_STR, &prefixes, "P,..", "prefix lengths, rounded down to multiples of C",
                .dflt = "2048,8192,32768"),
        FRT_OPT(0, "suffix", FRT_ARG_INT, &suffix, "S", "suffix tokens after the prefix", .min = 1, .max = INT_MAX / 4),
        FRT_OPT(0, "repeats", FRT_ARG_INT, &repeats, "N", "timed repeats after one warm-up", .min = 1,
                .max = INT_MAX / 4),
        FRT_OPT(0, "decode-tokens", FRT_ARG_INT, &decode_tokens, "N", "greedy decode steps timed at each context",
                .min = 1, .max = INT_MAX / 4),
        FRT_OPT(0, "seed", FRT_ARG_U64, &seed, "S", "seed of the weights and the token ids"),
        FRT_OPT(0, "threads", FRT_ARG_INT, &threads, "N", "CPU threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_CLI_OPT_KV_DTYPE(&kv_dtype),
        FRT_CLI_OPT_DTYPE(&wdtype),
        FRT_CLI_OPT_LM_HEAD_DTYPE(&lmdtype),
        FRT_OPT(0, "prefill-group", FRT_ARG_INT, &prefill_group, "G",
                "whole prefill pieces one replay runs: 0 = the backend's default, 1 = off, else a power of two "
                "(docs/architectures.md \"Prefill groups\")",
                .min = 0, .max = 64),
        FRT_CLI_OPT_AUTOTUNE(&autotune),
        FRT_CLI_OPT_TUNE_FILE(&tune_file),
        FRT_OPT(0, "no-tiers", FRT_ARG_FLAG, &no_tiers, NULL, "skip the host and disk capsule tiers"),
        FRT_OPT(0, "no-sampling-costs", FRT_ARG_FLAG, &no_sampling_costs, NULL,
                "skip decode with penalties and with a token mask (half the vocabulary) next to plain decode"),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &max_seq, "N",
                "state capacity of the main run (a prefix that does not fit fails, is recorded, and the run "
                "goes on: exit 1)",
                .min = 1, .max = INT_MAX / 4, .dflt = "what the prefixes need"),
        FRT_OPT(0, "tmpdir", FRT_ARG_STR, &tmpdir, "DIR", "where disk-tier capsules go"),
        FRT_OPT(0, "time-budget", FRT_ARG_DOUBLE, &time_budget, "SEC", "skip what is left after SEC seconds; 0 = none",
                .fmin = 0, .fmax = 1e9),
        FRT_OPT(0, "json", FRT_ARG_STR, &json, "FILE", "write every figure (rewritten after each step)", .dflt = ""),
        FRT_OPT(0, "dump-ids", FRT_ARG_STR, &dump_ids, "FILE", "write the token ids as JSON {seed, vocab_size, ids}",
                .dflt = ""),
        FRT_OPT(0, "write-config", FRT_ARG_STR, &write_config, "DIR",
                "write DIR/config.json of --shape (for bench/hf_baseline.py)", .dflt = ""),
        FRT_OPT(0, "no-run", FRT_ARG_FLAG, &no_run, NULL, "only --dump-ids / --write-config, then exit"),
    };
    frt_cmd_spec spec = {"bench", "-m DIR | --shape NAME --random-weights [options]\n       frt bench exec [options]",
                         "The model benchmark (TTFT cold and from a capsule, capsule tiers, decode, the\n"
                         "prefill-chunk sweep), each figure next to its floor; docs/PERF.md. 'frt bench exec\n"
                         "--help' describes the execution-contract benchmark.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0,
                         "With neither --prefixes nor --chunks the main run uses 2048,8192,32768;\n"
                         "with --chunks alone only the sweep runs (add --prefixes for both), and the main\n"
                         "run's --chunk, --max-seq, --decode-tokens, --no-tiers, --no-sampling-costs are\n"
                         "refused; --sweep-prefixes / --sweep-repeats need --chunks.\n"};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (chunk % 64) return frt_args_error(&spec, "--chunk: '%d' is not a multiple of 64", chunk);
    if (tune_file && autotune == 0) return frt_args_error(&spec, "--tune-file needs --autotune N");
    if (prefill_group & (prefill_group - 1))
        return frt_args_error(&spec, "--prefill-group: '%d' is not 0, 1 or a power of two", prefill_group);
    if (chunks && check_list(&spec, "--chunks", chunks, 64)) return 2;
    if (prefixes && check_list(&spec, "--prefixes", prefixes, 1)) return 2;
    if (sweep_prefixes && check_list(&spec, "--sweep-prefixes", sweep_prefixes, 1)) return 2;
    if (frt_args_find(&spec, "time-budget")->given && time_budget <= 0)
        return frt_args_error(&spec, "--time-budget: '%g' is out of range (seconds > 0)", time_budget);

    /* canonical argv: every given option, "--name value" */
    char **fwd = calloc(2 * (size_t)spec.n_args + 2, sizeof *fwd);
    char (*num)[32] = calloc((size_t)spec.n_args, sizeof *num);
    char (*names)[40] = calloc((size_t)spec.n_args, sizeof *names);
    if (!fwd || !num || !names) {
        free(fwd);
        free(num);
        free(names);
        fprintf(stderr, "frt bench: out of memory\n");
        return 1;
    }
    int n = 0;
    fwd[n++] = argv[0];
    for (int i = 0; i < spec.n_args; i++) {
        frt_arg *a = &opts[i];
        if (!a->given) continue;
        const char *v = NULL;
        switch (a->kind) {
        case FRT_ARG_STR:
        case FRT_ARG_CHOICE: v = *(const char **)a->dst; break;
        case FRT_ARG_INT:
            if (*(int *)a->dst == 0) continue; /* 0 = bench_model's own default */
            snprintf(num[i], sizeof num[i], "%d", *(int *)a->dst);
            v = num[i];
            break;
        case FRT_ARG_U64: snprintf(num[i], sizeof num[i], "%llu", *(unsigned long long *)a->dst), v = num[i]; break;
        case FRT_ARG_DOUBLE:
            if (*(double *)a->dst == 0) continue;
            snprintf(num[i], sizeof num[i], "%.17g", *(double *)a->dst);
            v = num[i];
            break;
        case FRT_ARG_BACKEND:
            if (*(int *)a->dst == FRT_ARG_BACKEND_AUTO) continue; /* bench_model's default is auto */
            v = frt_backend_name((frt_backend)*(int *)a->dst);
            break;
        default: break;
        }
        snprintf(names[i], sizeof names[i], "--%s", a->long_name);
        fwd[n++] = names[i];
        if (a->kind != FRT_ARG_FLAG) fwd[n++] = (char *)v;
    }
    int rc = frt_bench_model(n, fwd);
    free(fwd);
    free(num);
    free(names);
    return rc;
}

int frt_cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "exec")) return bench_exec(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "cartridge")) return frt_bench_cartridge(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "grammar")) return frt_bench_grammar(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "policy")) {
        argv[1] = "bench policy";
        return frt_bench_policy(argc - 1, argv + 1);
    }
    if (argc >= 2 && argv[1][0] != '-') {
        fprintf(stderr,
                "frt bench: unknown benchmark '%s' (frt bench exec, frt bench cartridge, frt bench grammar, frt bench "
                "policy, or frt bench -m DIR | --shape NAME)\n",
                argv[1]);
        return 2;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: frt bench -m DIR | --shape NAME --random-weights [options]\n"
                        "       frt bench exec [options]\n       frt bench policy -m DIR [options]\n"
                        "(see 'frt bench --help')\n");
        return 2;
    }
    return bench_model_cmd(argc, argv);
}
