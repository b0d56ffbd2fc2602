/* cmd_generate.c - frt generate: prompt in, streamed text out, TTFT and
 * tokens per second at the end (or one JSON object with --json). */
#include "cli.h"

#include "frt/model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: frt generate -m MODEL_DIR -p TEXT [-n N] [--backend cpu|cuda]\n"
            "                    [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
            "                    [--ignore-eos] [--max-seq N] [--chunk C] [--json]\n"
            "  Streams the continuation of TEXT, then prints TTFT and tokens per second.\n"
            "  -n N            tokens to generate (default 64)\n"
            "  --temperature   0 = greedy (default)\n"
            "  --json          print one JSON object: tokens, text, ttft_ms, tokens_per_s\n");
}

typedef struct gen_state {
    frt_model *m;
    int32_t *toks;
    int n, cap;
    size_t printed; /* bytes of the decoded text already written */
    int stream;
    double t0, t_first;
} gen_state;

/* Prints the newly completed part of the decoded text: decode everything
 * generated so far and write what follows the printed bytes, holding back a
 * trailing incomplete UTF-8 sequence. */
static void stream_text(gen_state *g, int final)
{
    char *text = NULL;
    size_t len = 0;
    if (frt_model_detokenize(g->m, g->toks, (size_t)g->n, &text, &len) < 0) return;
    size_t end = len;
    if (!final) {
        /* hold back an incomplete trailing sequence (and U+FFFD placeholders) */
        size_t i = len, k = 0;
        while (i > 0 && k < 4 && ((unsigned char)text[i - 1] & 0xC0) == 0x80) i--, k++;
        if (i > 0) {
            unsigned char lead = (unsigned char)text[i - 1];
            int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
            if (need > 1 && (int)(len - (i - 1)) < need) end = i - 1;
        }
    }
    if (end > g->printed) {
        fwrite(text + g->printed, 1, end - g->printed, stdout);
        fflush(stdout);
        g->printed = end;
    }
    free(text);
}

static int on_token(int32_t t, void *user)
{
    gen_state *g = user;
    if (g->n == 0) g->t_first = now_ms();
    if (g->n < g->cap) g->toks[g->n++] = t;
    if (g->stream) stream_text(g, 0);
    return 0;
}

int frt_cmd_generate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = NULL;
    int n = 64, json = 0, ignore_eos = 0;
    unsigned long long seed = 0;
    int have_seed = 0;
    frt_model_params mp = frt_model_default_params();
    frt_generate_params gp = {.sampling = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--ignore-eos")) {
            ignore_eos = 1;
        } else if (!v) {
            fprintf(stderr, "frt generate: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_dir = v, i++;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            prompt = v, i++;
        } else if (!strcmp(a, "-n")) {
            n = atoi(v), i++;
        } else if (!strcmp(a, "--backend")) {
            if (frt_backend_parse(v, &mp.backend) < 0) {
                fprintf(stderr, "frt generate: unknown backend '%s' (cpu or cuda)\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--temperature")) {
            gp.sampling.temperature = strtof(v, NULL), i++;
        } else if (!strcmp(a, "--top-p")) {
            gp.sampling.top_p = strtof(v, NULL), i++;
        } else if (!strcmp(a, "--top-k")) {
            gp.sampling.top_k = atoi(v), i++;
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, NULL, 10), have_seed = 1, i++;
        } else if (!strcmp(a, "--max-seq")) {
            mp.max_seq = atoi(v), i++;
        } else if (!strcmp(a, "--chunk")) {
            mp.prefill_chunk = atoi(v), i++;
        } else {
            fprintf(stderr, "frt generate: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_dir || !prompt || n < 1 || gp.sampling.temperature < 0 || gp.sampling.top_p <= 0 ||
        gp.sampling.top_p > 1 || gp.sampling.top_k < 0) {
        usage(stderr);
        return 2;
    }
    gp.max_tokens = n;
    gp.ignore_eos = ignore_eos;

    frt_model *m = NULL;
    int rc = frt_model_load(model_dir, &mp, &m);
    if (rc < 0) return frt_cli_fail("generate", rc);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    rc = frt_model_tokenize(m, prompt, strlen(prompt), &ids, &n_ids);
    if (rc == 0 && n_ids == 0) rc = -1;
    if (rc < 0) {
        if (rc == -1) fprintf(stderr, "frt generate: the prompt has no tokens\n");
        frt_model_free(m);
        return rc == -1 ? 1 : frt_cli_fail("generate", rc);
    }
    gen_state g = {.m = m, .cap = n, .stream = !json};
    g.toks = calloc((size_t)n, sizeof *g.toks);
    if (have_seed) frt_model_seed(m, seed);
    g.t0 = now_ms();
    rc = frt_model_prefill(m, ids, (int)n_ids);
    int produced = 0;
    if (rc == 0) rc = frt_model_generate(m, &gp, on_token, &g, &produced);
    double t_end = now_ms();
    if (rc < 0) {
        free(ids);
        free(g.toks);
        frt_model_free(m);
        return frt_cli_fail("generate", rc);
    }
    double ttft = g.t_first - g.t0;
    double tps = g.n > 1 ? (g.n - 1) / ((t_end - g.t_first) / 1e3) : 0.0;
    if (json) {
        char *text = NULL;
        size_t len = 0;
        frt_model_detokenize(m, g.toks, (size_t)g.n, &text, &len);
        json_t *o = json_object(), *arr = json_array();
        for (int i = 0; i < g.n; i++) json_array_append_new(arr, json_integer(g.toks[i]));
        json_object_set_new(o, "tokens", arr);
        json_object_set_new(o, "text", json_stringn(text ? text : "", text ? len : 0));
        json_object_set_new(o, "prompt_tokens", json_integer((json_int_t)n_ids));
        json_object_set_new(o, "ttft_ms", json_real(ttft));
        json_object_set_new(o, "tokens_per_s", json_real(tps));
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s);
        free(s);
        json_decref(o);
        free(text);
    } else {
        stream_text(&g, 1);
        fprintf(stdout, "\n");
        fprintf(stderr, "[%zu prompt tokens, %d generated, TTFT %.1f ms, %.1f tokens/s]\n", n_ids, g.n, ttft, tps);
    }
    free(ids);
    free(g.toks);
    frt_model_free(m);
    return 0;
}
