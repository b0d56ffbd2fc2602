/* cmd_compare.c - frt compare: the accuracy of one model against another
 * (docs/fp8.md "Accuracy runs"). Model A (-m, the reference) and model B
 * (--model2, by default the same directory) are loaded on one backend, each
 * with its own weight and KV precision; for every prompt they prefill the
 * same ids, then decode greedily in lock step. Reported per prompt:
 *   - the hidden state after the embedding, after each layer and after the
 *     final norm, over the rows of the last prefill piece (params.
 *     debug_hidden), as ||B - A|| / ||A|| (norm-wise, double sums);
 *   - the last prompt position's logits, the same way;
 *   - greedy agreement: each model is fed its own greedy token; steps are
 *     counted while the two pick the same token, and the first step where
 *     they differ is reported with A's top-2 logit margin there (the gap
 *     B's error had to close) and both tokens; the largest logit error of
 *     the steps up to and including it. Decoding stops there: after it the
 *     two continue different texts and their logits are not comparable.
 * End-of-sequence ids do not stop the decode. */
#include "args.h"
#include "cli.h"
#include "prompt_set.h"

#include "frt/debug.h"
#include "frt/model.h"
#include "frt/status.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cmp_side {
    const char *dir, *dtype, *kv_dtype, *lm_dtype; /* as given: "default" / "fp8" */
    frt_model *m;
    float *logits; /* [V] */
    float *hidden; /* [rows of a piece, H] */
} cmp_side;

typedef struct cmp_result {
    size_t len;           /* prompt tokens */
    int rows;             /* rows of the last prefill piece compared */
    double *hidden;       /* [L + 2]: embedding, layers 0..L-1, final norm */
    double logit_err;     /* last prompt position */
    int steps;            /* greedy steps decoded (<= tokens) */
    int agreed;           /* steps whose tokens were equal */
    int diverged_at;      /* the first step whose tokens differ; -1: none */
    int32_t tok_a, tok_b; /* the tokens there */
    float margin;         /* A's top-2 logit margin there */
    double max_err;       /* the largest logit error over the steps decoded */
    double seconds;
} cmp_result;

typedef struct cmp_run {
    cmp_side a, b;
    frt_backend backend;
    int V, H, L, C, tokens, quiet;
    frt_prompt_set ps;
    cmp_result *res; /* [ps.n] */
} cmp_run;

/* ||b - a|| / ||a|| in double; 0 when both are zero, inf when only a is. */
static double rel_err(const float *b, const float *a, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)b[i] - (double)a[i];
        d += e * e;
        r += (double)a[i] * (double)a[i];
    }
    if (r == 0) return d == 0 ? 0 : INFINITY;
    return sqrt(d / r);
}

/* The largest logit minus the second largest. */
static float top2_margin(const float *x, int n)
{
    float m1 = -INFINITY, m2 = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (x[i] > m1) m2 = m1, m1 = x[i];
        else if (x[i] > m2) m2 = x[i];
    }
    return m1 - m2;
}

/* ---- loading --------------------------------------------------------------- */

static int load_side(cmp_run *r, cmp_side *s, const frt_model_params *base, const char *label)
{
    frt_model_params mp = *base;
    mp.weight_dtype = strcmp(s->dtype, "fp8") ? FRT_WEIGHT_DEFAULT : FRT_WEIGHT_FP8;
    mp.kv_dtype = strcmp(s->kv_dtype, "fp8") ? FRT_KV_DEFAULT : FRT_KV_FP8;
    mp.lm_head_dtype = strcmp(s->lm_dtype, "fp8") ? FRT_WEIGHT_DEFAULT : FRT_WEIGHT_FP8;
    if (!r->quiet)
        fprintf(stderr, "frt compare: model %s: %s (--dtype %s, --kv-dtype %s, --lm-head-dtype %s)\n", label, s->dir,
                s->dtype, s->kv_dtype, s->lm_dtype);
    int rc = frt_cli_load_model("compare", s->dir, &mp, r->quiet, &s->m);
    return rc < 0 ? frt_cli_fail("compare", rc) : 0;
}

/* The shapes the comparison needs equal on both models; 1 after a message. */
static int check_shapes(cmp_run *r)
{
    frt_model_info ia, ib;
    frt_model_info_get(r->a.m, &ia);
    frt_model_info_get(r->b.m, &ib);
    if (ia.vocab_size != ib.vocab_size || ia.hidden_size != ib.hidden_size || ia.n_layers != ib.n_layers ||
        ia.prefill_chunk != ib.prefill_chunk) {
        fprintf(stderr,
                "frt compare: the models differ in shape (vocab %d / %d, hidden %d / %d, layers %d / %d, "
                "prefill chunk %d / %d): nothing to compare\n",
                ia.vocab_size, ib.vocab_size, ia.hidden_size, ib.hidden_size, ia.n_layers, ib.n_layers,
                ia.prefill_chunk, ib.prefill_chunk);
        return 1;
    }
    r->V = ia.vocab_size;
    r->H = ia.hidden_size;
    r->L = ia.n_layers;
    r->C = ia.prefill_chunk;
    return 0;
}

static int alloc_buffers(cmp_run *r)
{
    cmp_side *sides[2] = {&r->a, &r->b};
    for (int k = 0; k < 2; k++) {
        sides[k]->logits = malloc((size_t)r->V * sizeof(float));
        sides[k]->hidden = malloc((size_t)r->C * (size_t)r->H * sizeof(float));
        if (!sides[k]->logits || !sides[k]->hidden) return -1;
    }
    r->res = calloc((size_t)r->ps.n, sizeof *r->res);
    if (!r->res) return -1;
    for (int p = 0; p < r->ps.n; p++)
        if (!(r->res[p].hidden = calloc((size_t)r->L + 2, sizeof(double)))) return -1;
    return 0;
}

/* ---- one prompt ------------------------------------------------------------ */

static int prefill(cmp_side *s, const int32_t *ids, size_t n)
{
    int rc = frt_model_reset(s->m);
    if (!rc) rc = frt_model_prefill(s->m, ids, (int)n);
    if (!rc) rc = frt_model_logits(s->m, s->logits);
    return rc;
}

/* Every hidden state of the last prefill piece's rows. */
static int hidden_errors(cmp_run *r, cmp_result *res)
{
    size_t n = (size_t)res->rows * (size_t)r->H;
    for (int idx = 0; idx <= r->L + 1; idx++) {
        int rc = frt_model_debug_hidden(r->a.m, idx, r->a.hidden, res->rows);
        if (!rc) rc = frt_model_debug_hidden(r->b.m, idx, r->b.hidden, res->rows);
        if (rc) return rc;
        res->hidden[idx] = rel_err(r->b.hidden, r->a.hidden, n);
    }
    return 0;
}

/* The greedy token of step t on s (t 0: from the prefill's logits; else a
 * decode step feeding the last one) and the logits it came from. */
static int greedy_step(cmp_side *s, int t, int32_t *tok)
{
    int rc = t ? frt_model_decode(s->m, NULL, tok) : frt_model_sample(s->m, NULL, tok);
    if (!rc && t) rc = frt_model_logits(s->m, s->logits);
    return rc;
}

static int greedy(cmp_run *r, cmp_result *res)
{
    res->diverged_at = -1;
    res->max_err = res->logit_err;
    for (int t = 0; t < r->tokens; t++) {
        int32_t ta = -1, tb = -1;
        int rc = greedy_step(&r->a, t, &ta);
        if (!rc) rc = greedy_step(&r->b, t, &tb);
        if (rc) return rc;
        double e = rel_err(r->b.logits, r->a.logits, (size_t)r->V);
        if (!(e <= res->max_err)) res->max_err = e; /* NaN sticks */
        res->steps = t + 1;
        if (ta != tb) {
            res->diverged_at = t;
            res->tok_a = ta, res->tok_b = tb;
            res->margin = top2_margin(r->a.logits, r->V);
            break;
        }
        res->agreed++;
    }
    return 0;
}

static int run_prompt(cmp_run *r, int p)
{
    cmp_result *res = &r->res[p];
    const int32_t *ids = r->ps.ids + r->ps.off[p];
    res->len = r->ps.off[p + 1] - r->ps.off[p];
    res->rows = (int)(res->len - (res->len - 1) / (size_t)r->C * (size_t)r->C);
    double t0 = frt_cli_now_s();
    int rc = prefill(&r->a, ids, res->len);
    if (!rc) rc = prefill(&r->b, ids, res->len);
    if (!rc) rc = hidden_errors(r, res);
    if (rc) return rc;
    res->logit_err = rel_err(r->b.logits, r->a.logits, (size_t)r->V);
    rc = greedy(r, res);
    res->seconds = frt_cli_now_s() - t0;
    if (!rc && !r->quiet)
        fprintf(stderr, "frt compare: prompt %d/%d (%zu tokens): last logits %.3e, greedy %d/%d agree (%.1f s)\n",
                p + 1, r->ps.n, res->len, res->logit_err, res->agreed, r->tokens, res->seconds);
    return rc;
}

/* ---- reports ----------------------------------------------------------------- */

static double max_hidden(const cmp_run *r, const cmp_result *res)
{
    double m = 0;
    for (int i = 0; i <= r->L + 1; i++)
        if (!(res->hidden[i] <= m)) m = res->hidden[i];
    return m;
}

static void print_table(const cmp_run *r)
{
    printf("A = %s (--dtype %s, --kv-dtype %s, --lm-head-dtype %s)\nB = %s (--dtype %s, --kv-dtype %s, "
           "--lm-head-dtype %s)\nbackend %s; errors are ||B - A|| / ||A||; greedy: lock step, each fed its own token, "
           "up to the first divergence\n\n",
           r->a.dir, r->a.dtype, r->a.kv_dtype, r->a.lm_dtype, r->b.dir, r->b.dtype, r->b.kv_dtype, r->b.lm_dtype,
           r->backend == FRT_BACKEND_CUDA ? "cuda" : "cpu");
    printf("%-6s %6s %11s %11s %11s %9s %11s %12s %11s\n", "prompt", "tokens", "hidden max", "final norm",
           "last logits", "agree", "divergence", "A top-2 gap", "greedy max");
    for (int p = 0; p < r->ps.n; p++) {
        const cmp_result *res = &r->res[p];
        char agree[32], div[32] = "none", gap[32] = "-";
        snprintf(agree, sizeof agree, "%d/%d", res->agreed, r->tokens);
        if (res->diverged_at >= 0) {
            snprintf(div, sizeof div, "step %d", res->diverged_at);
            snprintf(gap, sizeof gap, "%.3e", (double)res->margin);
        }
        printf("%-6d %6zu %11.3e %11.3e %11.3e %9s %11s %12s %11.3e\n", p, res->len, max_hidden(r, res),
               res->hidden[r->L + 1], res->logit_err, agree, div, gap, res->max_err);
    }
}

/* Hidden-state errors: one row per state, one column per prompt. */
static void print_layers(const cmp_run *r)
{
    printf("\nhidden state error per layer (rows of the last prefill piece)\n%-10s", "state");
    for (int p = 0; p < r->ps.n; p++) printf(" %9s%-2d", "prompt ", p);
    printf("\n");
    for (int i = 0; i <= r->L + 1; i++) {
        char name[32];
        if (i == 0) snprintf(name, sizeof name, "embed");
        else if (i <= r->L) snprintf(name, sizeof name, "layer %d", i - 1);
        else snprintf(name, sizeof name, "final norm");
        printf("%-10s", name);
        for (int p = 0; p < r->ps.n; p++) printf(" %11.3e", r->res[p].hidden[i]);
        printf("\n");
    }
}

/* A double as JSON: a number, or null for NaN / inf (JSON has neither). */
static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *side_json(const cmp_side *s)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "dir", s->dir, "dtype", s->dtype, "kv_dtype", s->kv_dtype,
                     "lm_head_dtype", s->lm_dtype);
}

static json_t *result_json(const cmp_run *r, const cmp_result *res, const int32_t *ids)
{
    json_t *h = json_array(), *pid = json_array();
    for (int i = 0; i <= r->L + 1; i++) json_array_append_new(h, jnum(res->hidden[i]));
    for (size_t i = 0; i < res->len; i++) json_array_append_new(pid, json_integer(ids[i]));
    json_t *g = json_pack("{s:i, s:i, s:i, s:o}", "steps", res->steps, "agreed", res->agreed, "diverged_at",
                          res->diverged_at, "max_logit_err", jnum(res->max_err));
    if (res->diverged_at >= 0) {
        json_object_set_new(g, "token_a", json_integer(res->tok_a));
        json_object_set_new(g, "token_b", json_integer(res->tok_b));
        json_object_set_new(g, "a_top2_margin", jnum(res->margin));
    }
    return json_pack("{s:o, s:I, s:i, s:o, s:o, s:o, s:f}", "ids", pid, "tokens", (json_int_t)res->len,
                     "hidden_rows", res->rows, "hidden_err", h, "last_logit_err", jnum(res->logit_err), "greedy", g,
                     "seconds", res->seconds);
}

static int write_json(const cmp_run *r, const char *path, double bound, int pass)
{
    json_t *arr = json_array();
    for (int p = 0; p < r->ps.n; p++)
        json_array_append_new(arr, result_json(r, &r->res[p], r->ps.ids + r->ps.off[p]));
    json_t *o = json_pack("{s:o, s:o, s:s, s:i, s:i, s:i, s:o, s:o, s:b}", "a", side_json(&r->a), "b",
                          side_json(&r->b), "backend", r->backend == FRT_BACKEND_CUDA ? "cuda" : "cpu", "n_layers",
                          r->L, "vocab_size", r->V, "greedy_tokens", r->tokens, "max_logit_err_bound",
                          bound >= 0 ? json_real(bound) : json_null(), "prompts", arr, "pass", pass);
    int rc = json_dump_file(o, path, JSON_INDENT(1));
    json_decref(o);
    if (rc) fprintf(stderr, "frt compare: cannot write %s: %s\n", path, strerror(errno));
    return rc ? 1 : 0;
}

/* 1 when some prompt's last-logit error exceeds bound (>= 0; NaN fails). */
static int over_bound(const cmp_run *r, double bound)
{
    int bad = 0;
    for (int p = 0; bound >= 0 && p < r->ps.n; p++) {
        if (r->res[p].logit_err <= bound) continue;
        fprintf(stderr, "frt compare: prompt %d: last-logit error %.3e exceeds --max-logit-err %g\n", p,
                r->res[p].logit_err, bound);
        bad = 1;
    }
    return bad;
}

/* ---- options and prompts ------------------------------------------------------ */

typedef struct cmp_opts {
    const char *ids_arg, *ids_file, *json_path;
    int n_random, prompt_len;
    unsigned long long seed;
    double bound; /* -1: none */
} cmp_opts;

/* Reads --ids-file into r->ps; 0 or 2 (usage) / 1 (I/O) after a message. */
static int read_ids_file(const frt_cmd_spec *spec, cmp_run *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return frt_args_error(spec, "--ids-file: cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int io = ferror(f);
    fclose(f);
    if (!buf || io) {
        free(buf);
        fprintf(stderr, "frt compare: --ids-file: cannot read %s\n", path);
        return 1;
    }
    int line = 0, rc = frt_prompt_set_parse(&r->ps, buf, len, &line);
    free(buf);
    if (rc == -1) {
        fprintf(stderr, "frt compare: out of memory reading %s\n", path);
        return 1;
    }
    if (rc == FRT_PARSE_RANGE)
        return frt_args_error(spec, "--ids-file: %s line %d: an id outside 0..%d, or more than %d prompts", path,
                              line, INT32_MAX, FRT_PROMPT_SET_MAX);
    if (rc)
        return frt_args_error(spec, "--ids-file: %s line %d: not a comma-separated list of token ids (like 1,2,3)",
                              path, line);
    if (r->ps.n == 0) return frt_args_error(spec, "--ids-file: %s holds no prompt", path);
    return 0;
}

/* The prompts of --ids and --ids-file (before loading: their syntax). */
static int given_prompts(const frt_cmd_spec *spec, cmp_run *r, const cmp_opts *o)
{
    if (o->ids_arg) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (frt_args_ids(spec, o->ids_arg, &ids, &n)) return 2;
        int rc = frt_prompt_set_add(&r->ps, ids, n);
        free(ids);
        if (rc) return 1;
    }
    return o->ids_file ? read_ids_file(spec, r, o->ids_file) : 0;
}

/* After loading: the random prompts, every id inside the vocabulary. */
static int vocab_prompts(const frt_cmd_spec *spec, cmp_run *r, const cmp_opts *o)
{
    if (o->n_random && frt_prompt_set_add_random(&r->ps, o->n_random, o->prompt_len, r->V, o->seed)) {
        fprintf(stderr, "frt compare: out of memory\n");
        return 1;
    }
    for (int p = 0; p < r->ps.n; p++)
        for (size_t i = r->ps.off[p]; i < r->ps.off[p + 1]; i++)
            if (r->ps.ids[i] >= r->V)
                return frt_args_error(spec, "prompt %d (--ids / --ids-file): token id %d is outside the vocabulary [0, %d)",
                                      p, (int)r->ps.ids[i], r->V);
    return 0;
}

static const char about[] =
    "Loads model A (-m, the reference) and model B (--model2, default the same directory) on one\n"
    "backend, each with its own --dtype / --kv-dtype / --lm-head-dtype, runs the same prompts through\n"
    "both and prints,\n"
    "per prompt, the norm-wise error ||B - A|| / ||A|| of every hidden state (embedding, each layer,\n"
    "final norm; the rows of the last prefill piece) and of the last logits, then greedy agreement:\n"
    "both decode greedily in lock step, each fed its own token, until the first step where their\n"
    "tokens differ (reported with A's top-2 logit margin there) or -n tokens. Prompts: --prompts N\n"
    "random ones of --prompt-len ids (from --seed), and/or --ids, and/or --ids-file.\n";

static const char epilog[] =
    "--ids-file FILE: one prompt a line, comma-separated token ids (1,2,3); blank lines and lines\n"
    "starting with '#' are skipped. End-of-sequence ids do not stop the greedy decode.\n"
    "--json FILE: every figure (per prompt: ids, hidden_err [L + 2], last_logit_err, greedy {steps,\n"
    "agreed, diverged_at, token_a, token_b, a_top2_margin, max_logit_err}).\n"
    "Exit status: 0; 1 when a prompt's last-logit error exceeds --max-logit-err (or is NaN), or on a\n"
    "failure; 2 on a usage error. docs/fp8.md \"Accuracy runs\".\n";

/* The option checks no table entry can make; 0 or 2 after the message. */
static int check_opts(const frt_cmd_spec *spec, const cmp_opts *o, const frt_model_params *mp)
{
    if (!frt_args_find((frt_cmd_spec *)spec, "model")->given) return frt_args_error(spec, "no reference: give -m DIR");
    if (!o->n_random && !o->ids_arg && !o->ids_file)
        return frt_args_error(spec, "no prompts: give --prompts N (N >= 1), --ids or --ids-file");
    static const char *const random_only[] = {"prompt-len", "seed"};
    const char *r = FRT_ARGS_FIRST_GIVEN((frt_cmd_spec *)spec, random_only);
    if (!o->n_random && r)
        return frt_args_error(spec, "--%s shapes the random prompts and there are none (give --prompts N, N >= 1)", r);
    if (mp->prefill_chunk % 64) return frt_args_error(spec, "--chunk: '%d' is not a multiple of 64", mp->prefill_chunk);
    return 0;
}

/* max_seq: the longest prompt plus the greedy tokens, unless given (then it
 * must hold them). */
static int fit_max_seq(const frt_cmd_spec *spec, const cmp_run *r, const cmp_opts *o, frt_model_params *mp)
{
    size_t longest = frt_prompt_set_max_len(&r->ps);
    if ((size_t)o->prompt_len > longest && o->n_random) longest = (size_t)o->prompt_len;
    size_t need = longest + (size_t)r->tokens;
    if (need > (1u << 24)) return frt_args_error(spec, "a prompt of %zu tokens plus -n %d is too long", longest, r->tokens);
    if (!mp->max_seq) mp->max_seq = (int)need;
    else if ((size_t)mp->max_seq < need)
        return frt_args_error(spec, "--max-seq %d cannot hold a prompt of %zu tokens plus -n %d", mp->max_seq, longest,
                              r->tokens);
    return 0;
}

static void run_free(cmp_run *r)
{
    cmp_side *sides[2] = {&r->a, &r->b};
    for (int k = 0; k < 2; k++) {
        frt_model_free(sides[k]->m);
        free(sides[k]->logits);
        free(sides[k]->hidden);
    }
    for (int p = 0; r->res && p < r->ps.n; p++) free(r->res[p].hidden);
    free(r->res);
    frt_prompt_set_free(&r->ps);
}

/* Loads both models, makes the prompts, runs them; the exit code. */
static int compare(const frt_cmd_spec *spec, cmp_run *r, const cmp_opts *o, const frt_model_params *mp)
{
    int rc = load_side(r, &r->a, mp, "A");
    if (!rc) rc = load_side(r, &r->b, mp, "B");
    if (!rc) rc = check_shapes(r);
    if (!rc) rc = vocab_prompts(spec, r, o);
    if (rc) return rc;
    if (alloc_buffers(r)) {
        fprintf(stderr, "frt compare: out of memory\n");
        return 1;
    }
    for (int p = 0; p < r->ps.n; p++) {
        int st = run_prompt(r, p);
        if (st < 0) return frt_cli_fail("compare", st);
    }
    print_table(r);
    print_layers(r);
    int bad = over_bound(r, o->bound);
    if (o->json_path && write_json(r, o->json_path, o->bound, !bad)) return 1;
    return bad;
}

int frt_cmd_compare(int argc, char **argv)
{
    cmp_run r = {.a = {.dtype = "default", .kv_dtype = "default", .lm_dtype = "default"},
                 .b = {.dtype = "default", .kv_dtype = "default", .lm_dtype = "default"},
                 .tokens = 256};
    cmp_opts o = {.prompt_len = 64, .seed = 1, .bound = -1};
    int backend = FRT_ARG_BACKEND_AUTO;
    frt_model_params mp = frt_model_default_params();
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &r.a.dir, "DIR", "model A, the reference", .dflt = ""),
        FRT_OPT(0, "dtype", FRT_ARG_CHOICE, &r.a.dtype, NULL, "A's weights: the checkpoint's, or FP8 quantized at load",
                .choices = "default|fp8"),
        FRT_OPT(0, "kv-dtype", FRT_ARG_CHOICE, &r.a.kv_dtype, NULL, "A's KV cache", .choices = "default|fp8"),
        FRT_OPT(0, "lm-head-dtype", FRT_ARG_CHOICE, &r.a.lm_dtype, NULL, "A's LM head: the backend's, or FP8 at load",
                .choices = "default|fp8"),
        FRT_OPT(0, "model2", FRT_ARG_STR, &r.b.dir, "DIR", "model B, compared with A", .dflt = "the -m directory"),
        FRT_OPT(0, "dtype2", FRT_ARG_CHOICE, &r.b.dtype, NULL, "B's weights", .choices = "default|fp8"),
        FRT_OPT(0, "kv-dtype2", FRT_ARG_CHOICE, &r.b.kv_dtype, NULL, "B's KV cache", .choices = "default|fp8"),
        FRT_OPT(0, "lm-head-dtype2", FRT_ARG_CHOICE, &r.b.lm_dtype, NULL, "B's LM head", .choices = "default|fp8"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where both models run"),
        FRT_OPT(0, "prompts", FRT_ARG_INT, &o.n_random, "N", "random prompts (ids uniform over the vocabulary)",
                .min = 0, .max = FRT_PROMPT_SET_MAX, .dflt = "4 when no --ids / --ids-file, else 0"),
        FRT_OPT(0, "prompt-len", FRT_ARG_INT, &o.prompt_len, "L", "tokens of a random prompt (with --prompts)",
                .min = 1, .max = 1 << 20),
        FRT_OPT(0, "seed", FRT_ARG_U64, &o.seed, "S", "seed of the random prompts (with --prompts)"),
        FRT_OPT(0, "ids", FRT_ARG_STR, &o.ids_arg, "ID,ID,..", "one more prompt as token ids", .dflt = ""),
        FRT_OPT(0, "ids-file", FRT_ARG_STR, &o.ids_file, "FILE", "more prompts, one a line (below)", .dflt = ""),
        FRT_OPT('n', "tokens", FRT_ARG_INT, &r.tokens, "N", "greedy steps per prompt; 0 = none", .min = 0,
                .max = 1 << 20),
        FRT_OPT(0, "max-logit-err", FRT_ARG_DOUBLE, &o.bound, "X",
                "exit 1 when a prompt's last-logit error exceeds X", .fmin = 0, .fmax = 1e30, .dflt = "no bound"),
        FRT_OPT(0, "json", FRT_ARG_STR, &o.json_path, "FILE", "write every figure as JSON", .dflt = ""),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &mp.max_seq, "N", "state capacity; 0 = longest prompt + -n", .min = 0,
                .max = 1 << 24),
        FRT_OPT(0, "chunk", FRT_ARG_INT, &mp.prefill_chunk, "C", "prefill chunk, a multiple of 64; 0 = 256", .min = 0,
                .max = 1 << 20),
        FRT_OPT(0, "threads", FRT_ARG_INT, &mp.n_threads, "N", "CPU threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &r.quiet, NULL, "no progress lines on stderr"),
    };
    frt_cmd_spec spec = {"compare", "-m DIR [--model2 DIR2] [--dtype2 fp8] [options]", about, opts,
                         (int)(sizeof opts / sizeof opts[0]), 0, 0, epilog};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!frt_args_find(&spec, "prompts")->given && !o.ids_arg && !o.ids_file) o.n_random = 4;
    int rc = check_opts(&spec, &o, &mp);
    if (!r.b.dir) r.b.dir = r.a.dir;
    if (!rc) rc = given_prompts(&spec, &r, &o);
    if (!rc) rc = fit_max_seq(&spec, &r, &o, &mp);
    if (!rc) {
        mp.backend = (frt_backend)frt_args_backend(backend);
        mp.debug_hidden = 1;
        r.backend = mp.backend;
        rc = compare(&spec, &r, &o, &mp);
    }
    run_free(&r);
    return rc;
}
