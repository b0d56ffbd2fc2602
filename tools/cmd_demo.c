/*
 * cmd_demo.c - frt demo: the coding-agent workload over capsules.
 *
 * A shared prefix of several thousand tokens (system prompt, tool schemas, a
 * repository index: assets/demo/) is cold-prefilled once and snapshotted at
 * aligned_len(prefix) mid-prefill. Then each turn is a fresh session with a
 * new user message, served twice: cold (reset + prefill of the whole prompt)
 * and from the capsule (restore + append of the remainder r and the suffix).
 * Then a fork into 4 branches and a rollback of one turn. Every row's
 * token-exact column is computed by running both paths and comparing the
 * generated tokens and the first logits byte for byte.
 */
#include "args.h"
#include "cli.h"

#include "frt/capsule.h"
#include "frt/model.h"
#include "frt/status.h"
#include "frt/fs.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEMO_GEN 24     /* tokens generated per turn */
#define DEMO_MAX_TURNS 8

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *read_text(const char *dir, const char *name)
{
    char path[PATH_MAX], *s = NULL;
    size_t len = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "frt demo: path too long: %s/%s\n", dir, name);
        return NULL;
    }
    if (frt_file_read_all(path, (size_t)64 << 20, &s, &len) < 0) {
        fprintf(stderr, "frt demo: cannot read %s: %s\n", path, frt_last_error());
        return NULL;
    }
    return s;
}

typedef struct demo_row {
    char what[32];
    int prefix_tokens, remainder, suffix_tokens;
    double capsule_mb, snapshot_ms, restore_ms, append_ms, cold_ttft_ms, capsule_ttft_ms, speedup;
    int token_exact;
} demo_row;

static int tokenize(frt_model *m, const char *text, int32_t **ids, int *n)
{
    size_t k = 0;
    int rc = frt_model_tokenize(m, text, strlen(text), ids, &k);
    *n = (int)k;
    return rc;
}

/* Greedy tokens after the current boundary; the first logits go to lg. */
static int run_greedy(frt_model *m, float *lg, int32_t *out, int n, double *t_first, double t0)
{
    FRT_TRY(frt_model_logits(m, lg));
    FRT_TRY(frt_model_sample(m, NULL, &out[0]));
    *t_first = now_ms() - t0;
    for (int i = 1; i < n; i++) FRT_TRY(frt_model_decode(m, NULL, &out[i]));
    return 0;
}

typedef struct demo {
    frt_model *m;
    int V;
    int32_t *prefix;
    int n_prefix, B;
    frt_capsule *cap;
    float *lc, *lw;
    int32_t cold_toks[DEMO_GEN], warm_toks[DEMO_GEN];
} demo;

/* Cold path then capsule path for one prompt whose first n_prefix tokens are
 * the shared prefix. */
static int serve_turn(demo *d, const int32_t *ids, int n, demo_row *row, int32_t *gen_out, const int32_t *detour,
                      int n_detour)
{
    frt_model *m = d->m;
    double t0 = now_ms(), tf;
    FRT_TRY(frt_model_reset(m));
    FRT_TRY(frt_model_prefill(m, ids, n));
    FRT_TRY(run_greedy(m, d->lc, d->cold_toks, DEMO_GEN, &tf, t0));
    row->cold_ttft_ms = tf;
    if (detour) {
        /* rollback: another turn runs and decodes its reply first */
        int32_t junk[DEMO_GEN];
        FRT_TRY(frt_capsule_restore(m, d->cap));
        FRT_TRY(frt_model_prefill(m, detour + d->B, n_detour - d->B));
        FRT_TRY(run_greedy(m, d->lw, junk, DEMO_GEN, &tf, now_ms()));
    }

    t0 = now_ms();
    FRT_TRY(frt_capsule_restore(m, d->cap));
    double t1 = now_ms();
    FRT_TRY(frt_model_prefill(m, ids + d->B, n - d->B));
    double t2 = now_ms();
    FRT_TRY(run_greedy(m, d->lw, d->warm_toks, DEMO_GEN, &tf, t0));
    row->restore_ms = t1 - t0;
    row->append_ms = t2 - t1;
    row->capsule_ttft_ms = tf;
    row->prefix_tokens = d->n_prefix;
    row->remainder = d->n_prefix - d->B;
    row->suffix_tokens = n - d->n_prefix;
    row->speedup = row->capsule_ttft_ms > 0 ? row->cold_ttft_ms / row->capsule_ttft_ms : 0;
    row->token_exact = memcmp(d->cold_toks, d->warm_toks, sizeof d->cold_toks) == 0 &&
                       memcmp(d->lc, d->lw, (size_t)d->V * sizeof(float)) == 0;
    if (gen_out) memcpy(gen_out, d->warm_toks, sizeof d->warm_toks);
    return 0;
}

/* The prefix prefill in pieces of whole chunks (about 1024 tokens), with a
 * progress line: the same chunks as one call, so the same state. */
static int prefill_with_progress(frt_model *m, const int32_t *ids, int n, int chunk, int quiet)
{
    int piece = chunk >= 1024 ? chunk : (1024 / chunk) * chunk;
    frt_cli_progress p;
    frt_cli_progress_begin(&p, "frt demo: prefix prefill", "tokens", (unsigned long long)n, quiet);
    for (int done = 0; done < n;) {
        int k = n - done < piece ? n - done : piece;
        FRT_TRY(frt_model_prefill(m, ids + done, k));
        done += k;
        if (done < n) frt_cli_progress_update(&p, (unsigned long long)done);
    }
    frt_cli_progress_end(&p, (unsigned long long)n);
    return 0;
}

static int chat_ids(frt_model *m, const char *system, const char *user, int gen_prompt, int32_t **ids, int *n)
{
    frt_chat_turn msgs[2] = {{"system", system}, {"user", user}};
    char *text = NULL;
    FRT_TRY(frt_model_chat_format(m, msgs, user ? 2 : 1, gen_prompt, &text));
    int rc = tokenize(m, text, ids, n);
    free(text);
    return rc;
}

static void print_row(const demo_row *r)
{
    printf("%-10s %7d %5d %6d %8.2f %8.2f %8.2f %8.2f %9.1f %9.1f %7.1fx  %s\n", r->what, r->prefix_tokens,
           r->remainder, r->suffix_tokens, r->capsule_mb, r->snapshot_ms, r->restore_ms, r->append_ms,
           r->cold_ttft_ms, r->capsule_ttft_ms, r->speedup, r->token_exact ? "yes" : "NO");
    fflush(stdout);
}

static json_t *row_json(const demo_row *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "what", json_string(r->what));
    json_object_set_new(o, "prefix_tokens", json_integer(r->prefix_tokens));
    json_object_set_new(o, "remainder", json_integer(r->remainder));
    json_object_set_new(o, "suffix_tokens", json_integer(r->suffix_tokens));
    json_object_set_new(o, "capsule_mb", json_real(r->capsule_mb));
    json_object_set_new(o, "snapshot_ms", json_real(r->snapshot_ms));
    json_object_set_new(o, "restore_ms", json_real(r->restore_ms));
    json_object_set_new(o, "append_ms", json_real(r->append_ms));
    json_object_set_new(o, "cold_ttft_ms", json_real(r->cold_ttft_ms));
    json_object_set_new(o, "capsule_ttft_ms", json_real(r->capsule_ttft_ms));
    json_object_set_new(o, "speedup", json_real(r->speedup));
    json_object_set_new(o, "token_exact", json_boolean(r->token_exact));
    return o;
}

static const char about[] =
    "The coding-agent capsule workload on the shipped demo model (models/frt-demo):\n"
    "a shared prefix (system prompt + tool schemas, about 7k tokens; --long adds\n"
    "the repository index, about 14k) snapshotted once, turns served cold and\n"
    "from the capsule, a fork into 4 branches and a rollback; each row is checked\n"
    "token-exact by running both paths. Exits 1 if any row is not.\n";

int frt_cmd_demo(int argc, char **argv)
{
    const char *model_dir = NULL, *json_path = NULL, *assets = NULL;
    char model_buf[PATH_MAX], assets_buf[PATH_MAX];
    int turns = 3, long_prefix = 0, quiet = 0, backend = FRT_ARG_BACKEND_AUTO;
    frt_model_params mp = frt_model_default_params();
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &model_dir, "DIR", "checkpoint directory", .dflt = FRT_CLI_DEMO_MODEL_HELP),
        FRT_OPT(0, "assets", FRT_ARG_STR, &assets, "DIR", "system prompt, tools and turns",
                .dflt = "assets/demo, found like the model"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the model runs"),
        FRT_OPT(0, "turns", FRT_ARG_INT, &turns, "N", "turns of fresh sessions", .min = 1, .max = DEMO_MAX_TURNS),
        FRT_OPT(0, "long", FRT_ARG_FLAG, &long_prefix, NULL, "add the repository index to the prefix (~14k tokens)"),
        FRT_OPT(0, "chunk", FRT_ARG_INT, &mp.prefill_chunk, "C", "prefill chunk, a multiple of 64; 0 = 256", .min = 0,
                .max = 1 << 20),
        FRT_OPT(0, "threads", FRT_ARG_INT, &mp.n_threads, "N", "CPU threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_OPT(0, "json", FRT_ARG_STR, &json_path, "FILE", "also write every row as JSON", .dflt = ""),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &quiet, NULL, "no loading or prefix lines on stderr; the table still prints"),
    };
    frt_cmd_spec spec = {"demo", "[options]", about, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (mp.prefill_chunk % 64)
        return frt_args_error(&spec, "--chunk: '%d' is not a multiple of 64", mp.prefill_chunk);
    mp.backend = (frt_backend)frt_args_backend(backend);
    if (!model_dir) {
        if (frt_cli_find_shipped("models/frt-demo", model_buf, sizeof model_buf) < 0) {
            fprintf(stderr, "frt demo: the demo model models/frt-demo was not found; pass --model DIR\n");
            return 1;
        }
        model_dir = model_buf;
    }
    if (!assets) {
        if (frt_cli_find_shipped("assets/demo", assets_buf, sizeof assets_buf) < 0) {
            fprintf(stderr, "frt demo: assets/demo was not found; pass --assets DIR\n");
            return 1;
        }
        assets = assets_buf;
    }
    char *sys = read_text(assets, "system.txt"), *tools = read_text(assets, "tools.json");
    char *index = read_text(assets, "repo_index.txt"), *turns_txt = read_text(assets, "turns.txt");
    if (!sys || !tools || !index || !turns_txt) return 1;
    size_t sl = strlen(sys) + strlen(tools) + strlen(index) + 64;
    char *system = malloc(sl);
    if (long_prefix)
        snprintf(system, sl, "%s\n# Tools\n%s\n# Repository\n%s", sys, tools, index);
    else
        snprintf(system, sl, "%s\n# Tools\n%s", sys, tools);
    char *user_msgs[DEMO_MAX_TURNS + 4];
    int n_user = 0;
    for (char *line = strtok(turns_txt, "\n"); line && n_user < DEMO_MAX_TURNS + 4; line = strtok(NULL, "\n"))
        if (*line) user_msgs[n_user++] = line;
    if (n_user < 6) {
        fprintf(stderr, "frt demo: %s/turns.txt needs at least 6 requests\n", assets);
        return 1;
    }

    /* Room for the prefix, the longest turn and the generated tokens. */
    mp.max_seq = 16384;
    demo d;
    memset(&d, 0, sizeof d);
    int rc = frt_cli_load_model("demo", model_dir, &mp, quiet, &d.m);
    if (rc < 0) return frt_cli_fail("demo", rc);
    frt_model *m = d.m;
    frt_model_info info;
    frt_model_info_get(m, &info);
    d.V = info.vocab_size;
    if (!info.has_tokenizer) {
        fprintf(stderr, "frt demo: %s has no tokenizer.json\n", model_dir);
        frt_model_free(m);
        return 1;
    }
    d.lc = malloc((size_t)d.V * sizeof(float));
    d.lw = malloc((size_t)d.V * sizeof(float));
    rc = chat_ids(m, system, NULL, 0, &d.prefix, &d.n_prefix);
    if (rc < 0) return frt_cli_fail("demo", rc);
    d.B = frt_model_aligned_len(m, d.n_prefix);
    printf("shared prefix: %d tokens (%zu bytes of text), prefill chunk C = %d, capsule at aligned_len = %d, "
           "remainder r = %d\n",
           d.n_prefix, strlen(system), info.prefill_chunk, d.B, d.n_prefix - d.B);

    /* Cold prefill of the prefix once, snapshot mid-prefill at B. */
    double t0 = now_ms();
    rc = prefill_with_progress(m, d.prefix, d.B, info.prefill_chunk, quiet);
    double t1 = now_ms();
    if (rc == 0) rc = frt_capsule_snapshot(m, FRT_TIER_DEVICE, NULL, NULL, 0, &d.cap);
    double t2 = now_ms();
    if (rc == 0 && d.n_prefix > d.B) rc = frt_model_prefill(m, d.prefix + d.B, d.n_prefix - d.B);
    if (rc < 0) return frt_cli_fail("demo", rc);
    frt_capsule_info ci;
    frt_capsule_info_get(d.cap, &ci);
    double snapshot_ms = t2 - t1, capsule_mb = ci.bytes / 1048576.0;
    printf("prefix prefill %.1f ms, snapshot %.2f ms, capsule %.2f MB in %d buffers\n\n", t1 - t0, snapshot_ms,
           capsule_mb, ci.n_buffers);

    printf("%-10s %7s %5s %6s %8s %8s %8s %8s %9s %9s %8s  %s\n", "row", "prefix", "r", "suffix", "cap MB",
           "snap ms", "rest ms", "app ms", "cold TTFT", "caps TTFT", "speedup", "token-exact");
    json_t *rows = json_array();
    int all_exact = 1, n_rows = 0;
    int32_t turn0_gen[DEMO_GEN];
    int32_t *ids = NULL;
    int n = 0;
    for (int t = 0; t < turns && rc == 0; t++) {
        demo_row row = {.capsule_mb = capsule_mb, .snapshot_ms = snapshot_ms};
        snprintf(row.what, sizeof row.what, "turn %d", t + 1);
        rc = chat_ids(m, system, user_msgs[t], 1, &ids, &n);
        if (rc == 0 && (n <= d.n_prefix || memcmp(ids, d.prefix, (size_t)d.B * sizeof *ids) != 0)) {
            fprintf(stderr, "frt demo: the turn's tokens do not extend the shared prefix\n");
            rc = -1;
            break;
        }
        if (rc == 0) rc = serve_turn(&d, ids, n, &row, t == 0 ? turn0_gen : NULL, NULL, 0);
        if (rc == 0) {
            print_row(&row);
            json_array_append_new(rows, row_json(&row));
            all_exact &= row.token_exact;
            n_rows++;
        }
        if (t == 0 && rc == 0) {
            char *text = NULL;
            size_t len = 0;
            if (frt_model_detokenize(m, turn0_gen, DEMO_GEN, &text, &len) == 0) {
                printf("           turn 1 reply: \"");
                for (size_t k = 0; k < len && k < 160; k++) putchar(text[k] == '\n' ? ' ' : text[k]);
                printf("\"\n");
            }
            free(text);
        }
        free(ids);
        ids = NULL;
    }
    /* Fork: 4 branches from the one capsule, each with another request. */
    for (int b = 0; b < 4 && rc == 0; b++) {
        demo_row row = {.capsule_mb = capsule_mb, .snapshot_ms = snapshot_ms};
        snprintf(row.what, sizeof row.what, "fork %d/4", b + 1);
        rc = chat_ids(m, system, user_msgs[(turns + b) % n_user], 1, &ids, &n);
        if (rc == 0) rc = serve_turn(&d, ids, n, &row, NULL, NULL, 0);
        if (rc == 0) {
            print_row(&row);
            json_array_append_new(rows, row_json(&row));
            all_exact &= row.token_exact;
            n_rows++;
        }
        free(ids);
        ids = NULL;
    }
    /* Rollback: a turn decodes its reply, is rolled back to the capsule, and
     * another request is appended instead; compared with its cold run. */
    if (rc == 0) {
        demo_row row = {.capsule_mb = capsule_mb, .snapshot_ms = snapshot_ms};
        snprintf(row.what, sizeof row.what, "rollback");
        int32_t *detour = NULL;
        int n_detour = 0;
        rc = chat_ids(m, system, user_msgs[0], 1, &detour, &n_detour);
        if (rc == 0) rc = chat_ids(m, system, user_msgs[n_user - 1], 1, &ids, &n);
        if (rc == 0) rc = serve_turn(&d, ids, n, &row, NULL, detour, n_detour);
        if (rc == 0) {
            print_row(&row);
            json_array_append_new(rows, row_json(&row));
            all_exact &= row.token_exact;
            n_rows++;
        }
        free(detour);
        free(ids);
    }
    if (rc < 0) {
        json_decref(rows);
        frt_capsule_free(d.cap);
        frt_model_free(m);
        return frt_cli_fail("demo", rc);
    }
    printf("\n%d rows, token-exact: %s\n", n_rows, all_exact ? "all" : "NOT ALL");
    if (json_path) {
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(model_dir));
        json_object_set_new(o, "backend", json_string(mp.backend == FRT_BACKEND_CUDA ? "cuda" : "cpu"));
        json_object_set_new(o, "prefill_chunk", json_integer(info.prefill_chunk));
        json_object_set_new(o, "rows", rows);
        if (json_dump_file(o, json_path, JSON_INDENT(2)) != 0)
            fprintf(stderr, "frt demo: cannot write %s\n", json_path);
        json_decref(o);
    } else {
        json_decref(rows);
    }
    free(d.prefix);
    free(d.lc);
    free(d.lw);
    free(system);
    free(sys);
    free(tools);
    free(index);
    free(turns_txt);
    frt_capsule_free(d.cap);
    frt_model_free(m);
    return all_exact ? 0 : 1;
}
