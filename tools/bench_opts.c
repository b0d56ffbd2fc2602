/*
 * tools/bench_opts.c - the options of `frt bench -m DIR | --shape NAME
 * --random-weights`: parsing, checking, the usage text.
 */
#include "bench_run.h"
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: frt bench -m DIR [options]\n"
            "       frt bench --shape NAME --random-weights [options]\n\n"
            "  --backend cpu|cuda       (default: cuda when a device is present)\n"
            "  --chunk C                prefill chunk of the main run (default 256)\n"
            "  --chunks A,B,..          prefill-chunk sweep (issue 8), after the main run\n"
            "  --sweep-prefixes P,..    prefixes of the sweep (default 8192,32768)\n"
            "  --sweep-repeats N        timed repeats in the sweep (default: --repeats)\n"
            "  --prefixes P,..          prefix lengths, rounded down to multiples of C (default 2048,8192,32768)\n"
            "  --suffix S               suffix tokens after the prefix (default 64)\n"
            "  --repeats N              timed repeats after one warm-up (default 5)\n"
            "  --decode-tokens N        greedy decode steps timed at each context (default 32)\n"
            "  --seed S                 seed of the weights and the token ids (default 1)\n"
            "  --threads N              cpu threads (default: all cores)\n"
            "  --kv-dtype default|fp8   KV cache precision: the backend's, or FP8 E4M3 (docs/fp8.md)\n"
            "  --dtype default|fp8      weight precision: the checkpoint's, or Linear weights in FP8 E4M3 (docs/fp8.md)\n"
            "  --lm-head-dtype default|fp8  the LM head's precision: the backend's, or FP8 E4M3 per vocabulary row\n"
            "  --prefill-group G        whole prefill pieces one replay runs: 0 the backend's default, 1 off,\n"
            "                           2..64 a power of two (docs/architectures.md \"Prefill groups\")\n"
            "  --autotune N             GEMM autotune over N candidates for the append shapes (cuda; default 0:\n"
            "                           the heuristic's choice; docs/kernels-cuda.md \"GEMM autotune\")\n"
            "  --tune-file FILE         with --autotune: load the choice from FILE, or tune and save it there\n"
            "  --no-tiers               skip the host and disk capsule tiers\n"
            "  --no-sampling-costs      skip decode with penalties and with a token mask\n"
            "  --max-seq N              state capacity of the main run (default: what the prefixes need);\n"
            "                           a prefix that does not fit fails, is recorded, and the run goes on (exit 1)\n"
            "  --tmpdir DIR             where disk-tier capsules go (default /tmp)\n"
            "  --time-budget SEC        skip what is left after SEC seconds (default: none)\n"
            "  --json FILE              write every figure (rewritten after each step)\n"
            "  --dump-ids FILE          write the token ids as JSON {seed, vocab_size, ids}\n"
            "  --write-config DIR       write DIR/config.json of --shape (for bench/hf_baseline.py)\n"
            "  --no-run                 only --dump-ids / --write-config, then exit\n"
            "With neither --prefixes nor --chunks the main run uses 2048,8192,32768;\n"
            "with --chunks alone only the sweep runs (add --prefixes for both), and the main\n"
            "run's --chunk, --max-seq, --decode-tokens, --no-tiers, --no-sampling-costs are\n"
            "refused; --sweep-prefixes / --sweep-repeats need --chunks.\n");
}

/* "2048,8192" -> list; 0 ok, -1 malformed. */
static int parse_list(const char *s, int *out, int *n)
{
    *n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 1 || v > INT_MAX / 4 || *n >= MAX_LIST) return -1;
        out[(*n)++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return *n > 0 ? 0 : -1;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > INT_MAX / 4) return -1;
    *out = (int)v;
    return 0;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "frt bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

int bm_parse_args(int argc, char **argv, bm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->chunk = FRT_DEFAULT_PREFILL_CHUNK;
    o->suffix = 64;
    o->repeats = 5;
    o->decode_tokens = 32;
    o->seed = 1;
    o->tmpdir = "/tmp";
    int have_prefixes = 0;
    const char *main_only = NULL; /* an option of the main run given (refused when only the sweep runs) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                    \
    do {                                                                \
        if (!v) return usage_error("%s needs a value", a);             \
        i++;                                                            \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEED_VALUE();
            o->model_dir = v;
        } else if (!strcmp(a, "--shape")) {
            NEED_VALUE();
            o->shape = v;
        } else if (!strcmp(a, "--random-weights")) {
            o->random_weights = 1;
        } else if (!strcmp(a, "--backend")) {
            NEED_VALUE();
            if (frt_backend_parse(v, &o->backend)) return usage_error("unknown backend '%s' (cpu or cuda)", v);
            o->backend_set = 1;
        } else if (!strcmp(a, "--chunk")) {
            NEED_VALUE();
            main_only = "--chunk";
            if (parse_int(v, 64, &o->chunk) || o->chunk % 64) return usage_error("--chunk '%s': a multiple of 64", v);
        } else if (!strcmp(a, "--chunks")) {
            NEED_VALUE();
            if (parse_list(v, o->chunks, &o->n_chunks)) return usage_error("--chunks '%s': a list like 256,512", v);
            for (int k = 0; k < o->n_chunks; k++)
                if (o->chunks[k] % 64) return usage_error("--chunks '%s': each a multiple of 64", v);
        } else if (!strcmp(a, "--prefixes")) {
            NEED_VALUE();
            if (parse_list(v, o->prefixes, &o->n_prefixes)) return usage_error("--prefixes '%s': a list like 2048,8192", v);
            have_prefixes = 1;
        } else if (!strcmp(a, "--sweep-prefixes")) {
            NEED_VALUE();
            if (parse_list(v, o->sweep_prefixes, &o->n_sweep)) return usage_error("--sweep-prefixes '%s': a list", v);
        } else if (!strcmp(a, "--suffix")) {
            NEED_VALUE();
            if (parse_int(v, 1, &o->suffix)) return usage_error("--suffix '%s': a positive integer", v);
        } else if (!strcmp(a, "--repeats")) {
            NEED_VALUE();
            if (parse_int(v, 1, &o->repeats)) return usage_error("--repeats '%s': a positive integer", v);
        } else if (!strcmp(a, "--max-seq")) {
            NEED_VALUE();
            main_only = "--max-seq";
            if (parse_int(v, 1, &o->max_seq)) return usage_error("--max-seq '%s': a positive integer", v);
        } else if (!strcmp(a, "--sweep-repeats")) {
            NEED_VALUE();
            if (parse_int(v, 1, &o->sweep_repeats)) return usage_error("--sweep-repeats '%s': a positive integer", v);
        } else if (!strcmp(a, "--decode-tokens")) {
            NEED_VALUE();
            main_only = "--decode-tokens";
            if (parse_int(v, 1, &o->decode_tokens)) return usage_error("--decode-tokens '%s': a positive integer", v);
        } else if (!strcmp(a, "--threads")) {
            NEED_VALUE();
            if (parse_int(v, 1, &o->threads)) return usage_error("--threads '%s': a positive integer", v);
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 0);
            if (errno || end == v || *end) return usage_error("--seed '%s': an integer", v);
        } else if (!strcmp(a, "--time-budget")) {
            NEED_VALUE();
            char *end;
            o->time_budget_s = strtod(v, &end);
            if (end == v || *end || o->time_budget_s <= 0) return usage_error("--time-budget '%s': seconds > 0", v);
        } else if (!strcmp(a, "--json")) {
            NEED_VALUE();
            o->json_path = v;
        } else if (!strcmp(a, "--dump-ids")) {
            NEED_VALUE();
            o->dump_ids = v;
        } else if (!strcmp(a, "--write-config")) {
            NEED_VALUE();
            o->write_config = v;
        } else if (!strcmp(a, "--tmpdir")) {
            NEED_VALUE();
            o->tmpdir = v;
        } else if (!strcmp(a, "--no-tiers")) {
            o->no_tiers = 1;
            main_only = "--no-tiers";
        } else if (!strcmp(a, "--no-sampling-costs")) {
            o->no_sampling_costs = 1;
            main_only = "--no-sampling-costs";
        } else if (!strcmp(a, "--kv-dtype")) {
            NEED_VALUE();
            if (strcmp(v, "default") && strcmp(v, "fp8")) return usage_error("--kv-dtype '%s': default or fp8", v);
            o->kv_fp8 = !strcmp(v, "fp8");
        } else if (!strcmp(a, "--dtype")) {
            NEED_VALUE();
            if (strcmp(v, "default") && strcmp(v, "fp8")) return usage_error("--dtype '%s': default or fp8", v);
            o->w_fp8 = !strcmp(v, "fp8");
        } else if (!strcmp(a, "--lm-head-dtype")) {
            NEED_VALUE();
            if (strcmp(v, "default") && strcmp(v, "fp8"))
                return usage_error("--lm-head-dtype '%s': default or fp8", v);
            o->lm_fp8 = !strcmp(v, "fp8");
        } else if (!strcmp(a, "--autotune")) {
            NEED_VALUE();
            if (parse_int(v, 0, &o->autotune) || o->autotune > 64)
                return usage_error("--autotune '%s': 0 to 64", v);
        } else if (!strcmp(a, "--tune-file")) {
            NEED_VALUE();
            o->tune_file = v;
        } else if (!strcmp(a, "--prefill-group")) {
            NEED_VALUE();
            if (parse_int(v, 0, &o->prefill_group) || o->prefill_group > 64)
                return usage_error("--prefill-group '%s': 0, 1 or a power of two up to 64", v);
        } else if (!strcmp(a, "--no-run")) {
            o->no_run = 1;
        } else {
            return usage_error("unknown argument '%s'", a);
        }
#undef NEED_VALUE
    }
    if (!!o->model_dir == !!o->shape) return usage_error("%sgive either -m DIR or --shape NAME --random-weights", "");
    if (o->shape && !o->random_weights)
        return usage_error("%s--shape needs --random-weights (weights are generated in memory)", "");
    if (o->write_config && !o->shape) return usage_error("%s--write-config needs --shape", "");
    if (o->random_weights && !o->shape)
        return usage_error("%s--random-weights goes with --shape (-m DIR benchmarks the checkpoint's weights)", "");
    if (!o->n_chunks && (o->n_sweep || o->sweep_repeats))
        return usage_error("%s--sweep-prefixes and --sweep-repeats set the prefill-chunk sweep: give --chunks A,B,..",
                           "");
    if (o->n_chunks && !have_prefixes && main_only)
        return usage_error("%s only sets the main run, and with --chunks alone only the sweep runs (add --prefixes "
                           "for both)",
                           main_only);
    if (!have_prefixes && !o->n_chunks) {
        int d[] = {2048, 8192, 32768};
        memcpy(o->prefixes, d, sizeof d);
        o->n_prefixes = 3;
    }
    if (!o->sweep_repeats) o->sweep_repeats = o->repeats;
    if (o->n_chunks && !o->n_sweep) {
        o->sweep_prefixes[0] = 8192;
        o->sweep_prefixes[1] = 32768;
        o->n_sweep = 2;
    }
    /* Prefixes of the main run: multiples of C (rounded down, at least C). */
    for (int k = 0; k < o->n_prefixes; k++) {
        int p = o->prefixes[k] / o->chunk * o->chunk;
        o->prefixes[k] = p < o->chunk ? o->chunk : p;
    }
    return 0;
}
