/* cmd_generate.c - frt generate: prompt in, streamed text out, TTFT and
 * tokens per second at the end (or one JSON object with --json). The prompt
 * is text (-p, through the checkpoint's tokenizer) or token ids (--ids), so
 * a checkpoint without tokenizer.json (frt gen-model output) runs too. */
#include "args.h"
#include "cli.h"

#include "frt/cartridge.h"
#include "frt/model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>

static double now_ms(void) { return frt_cli_now_s() * 1e3; }

typedef struct gen_state {
    frt_model *m;
    int32_t *toks;
    frt_logprobs *lps; /* --logprobs: one record per generated token, else NULL */
    int n, cap;
    size_t printed; /* bytes of the decoded text already written */
    int stream;   /* print the text as it comes */
    int stream_ids; /* no tokenizer: print the ids as they come */
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
    if (g->lps && g->n < g->cap && frt_model_logprobs(g->m, &g->lps[g->n]) < 0) return 1;
    if (g->n < g->cap) g->toks[g->n++] = t;
    if (g->stream) stream_text(g, 0);
    if (g->stream_ids) {
        printf(g->n > 1 ? " %d" : "%d", (int)t);
        fflush(stdout);
    }
    return 0;
}

static const char about[] =
    "Streams the continuation of the prompt to stdout, then prints the prompt and generated\n"
    "token counts, TTFT and tokens per second to stderr. The prompt is TEXT (-p, encoded with\n"
    "the checkpoint's tokenizer.json) or token ids (--ids: also for checkpoints without a\n"
    "tokenizer, e.g. frt gen-model output, whose output is then printed as ids).\n";

static const char epilog[] =
    "--json prints one object: tokens (generated ids), prompt_ids, text (null without a\n"
    "tokenizer), prompt_tokens, cartridge_tokens, ttft_ms, tokens_per_s; with --logprobs N also\n"
    "logprobs: one object per token, {token, logprob, top: [[id, logprob], ...]} (N entries).\n"
    "--cartridge: the prompt follows the cartridge's T tokens at positions T, T+1, ...; the\n"
    "chat template is not applied; a prompt that begins with the cartridge's stated start\n"
    "(manifest starts_with: its BOS / system header) loses it, as in the server.\n"
    "docs/cartridges.md.\n"
    "The sampling step (include/frt/sampling.h): --logit-bias first, then the repetition\n"
    "penalty (prompt and output tokens), then the frequency and presence penalties (generated\n"
    "tokens), then temperature, --min-p, --top-k, --top-p.\n";

/* The tokens at the head of ids[0..n) that the cartridge states it starts
 * with (it holds them): its start's length when ids begin with it, else 0. */
static size_t stated_start(const frt_cartridge *c, const int32_t *ids, size_t n)
{
    const int32_t *s = NULL;
    int k = 0;
    if (frt_cartridge_starts_with(c, &s, &k) || k < 1 || (size_t)k > n || memcmp(s, ids, (size_t)k * sizeof *ids))
        return 0;
    return (size_t)k;
}

/* --logit-bias ID:BIAS,ID:BIAS,..: exit code 2 after the message on a bad
 * list (ranges and duplicates are frt_sampling_check's, after the load). */
static int parse_bias(const frt_cmd_spec *spec, const char *arg, frt_sampling *s)
{
    const char *bad = NULL;
    int rc = frt_parse_logit_bias(arg, s->logit_bias, FRT_SAMPLING_MAX_BIAS, &s->n_logit_bias, &bad);
    int len = (int)strcspn(bad, ",");
    if (rc == FRT_PARSE_EMPTY)
        return frt_args_error(spec, "--logit-bias: '%s' has an empty element (a list like 42:5,7:-100)", arg);
    if (rc == FRT_PARSE_RANGE)
        return frt_args_error(spec, "--logit-bias: '%.*s' is out of range (ID 0 to %d, at most %d entries)", len, bad,
                              INT32_MAX, FRT_SAMPLING_MAX_BIAS);
    if (rc)
        return frt_args_error(spec, "--logit-bias: '%.*s' is not ID:BIAS with a finite BIAS (a list like 42:5,7:-100)",
                              len, bad);
    return 0;
}

/* The --logprobs records as a JSON array. */
static json_t *logprobs_json(const frt_logprobs *lps, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object(), *top = json_array();
        for (int k = 0; k < lps[i].n_top; k++)
            json_array_append_new(top, json_pack("[i,f]", (int)lps[i].top_token[k], (double)lps[i].top_logprob[k]));
        json_object_set_new(o, "token", json_integer(lps[i].token));
        json_object_set_new(o, "logprob", json_real(lps[i].logprob));
        json_object_set_new(o, "top", top);
        json_array_append_new(arr, o);
    }
    return arr;
}

int frt_cmd_generate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = NULL, *ids_arg = NULL, *cart_path = NULL, *bias_arg = NULL;
    const char *kv_dtype = "default", *kv_scales = NULL, *wdtype = "default", *lmdtype = "default";
    int n = 64, json = 0, ignore_eos = 0, quiet = 0, backend = FRT_ARG_BACKEND_AUTO, logprobs = -1;
    unsigned long long seed = 0;
    frt_model_params mp = frt_model_default_params();
    frt_generate_params gp = {.sampling = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f}};
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &model_dir, "DIR", "checkpoint directory", .dflt = FRT_CLI_DEMO_MODEL_HELP),
        FRT_OPT('p', "prompt", FRT_ARG_STR, &prompt, "TEXT", "the prompt as text (needs tokenizer.json)", .dflt = ""),
        FRT_OPT(0, "ids", FRT_ARG_STR, &ids_arg, "ID,ID,..", "the prompt as token ids, e.g. 1,2,3", .dflt = ""),
        FRT_OPT(0, "cartridge", FRT_ARG_STR, &cart_path, "PATH",
         "inject this KV prefix (an frt cartridge directory or a .pt) before the prompt", .dflt = ""),
        FRT_OPT('n', "max-tokens", FRT_ARG_INT, &n, "N", "tokens to generate", .min = 1, .max = 1 << 20),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the model runs"),
        FRT_OPT(0, "temperature", FRT_ARG_FLOAT, &gp.sampling.temperature, "T", "0 = greedy", .fmin = 0, .fmax = 100),
        FRT_OPT(0, "top-p", FRT_ARG_FLOAT, &gp.sampling.top_p, "P", "nucleus mass, (0, 1]; 1 = off", .fmin = 0, .fmax = 1,
         .dflt = "1"),
        FRT_OPT(0, "top-k", FRT_ARG_INT, &gp.sampling.top_k, "K", "0 = off", .min = 0, .max = 1 << 24),
        FRT_OPT(0, "min-p", FRT_ARG_FLOAT, &gp.sampling.min_p, "P", "keep p >= P * p_max, [0, 1]; 0 = off", .fmin = 0,
         .fmax = 1),
        FRT_OPT(0, "presence-penalty", FRT_ARG_FLOAT, &gp.sampling.presence_penalty, "X",
         "subtract X from each generated token's logit, [-2, 2]", .fmin = -2, .fmax = 2),
        FRT_OPT(0, "frequency-penalty", FRT_ARG_FLOAT, &gp.sampling.frequency_penalty, "X",
         "subtract X * count from each generated token's logit, [-2, 2]", .fmin = -2, .fmax = 2),
        FRT_OPT(0, "repetition-penalty", FRT_ARG_FLOAT, &gp.sampling.repetition_penalty, "R",
         "divide (> 0) or multiply (<= 0) prompt and output tokens' logits by R; 1 = off", .fmin = 0, .fmax = 100,
         .dflt = "1"),
        FRT_OPT(0, "logit-bias", FRT_ARG_STR, &bias_arg, "ID:B,..", "add B in [-100, 100] to token ID's logit",
         .dflt = ""),
        FRT_OPT(0, "logprobs", FRT_ARG_INT, &logprobs, "N", "report each token's logprob and the top N (0..20); needs --json",
         .min = 0, .max = FRT_SAMPLING_MAX_TOP_LOGPROBS, .dflt = "off"),
        FRT_OPT(0, "seed", FRT_ARG_U64, &seed, "S", "sampling seed", .dflt = "the model's fixed initial RNG state"),
        FRT_OPT(0, "ignore-eos", FRT_ARG_FLAG, &ignore_eos, NULL, "keep generating past end-of-sequence tokens"),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &mp.max_seq, "N", "state capacity in tokens; 0 = min(config, 8192)",
         .min = 0, .max = 1 << 24),
        FRT_OPT(0, "chunk", FRT_ARG_INT, &mp.prefill_chunk, "C", "prefill chunk, a multiple of 64; 0 = 256", .min = 0,
         .max = 1 << 20),
        FRT_CLI_OPT_KV_DTYPE(&kv_dtype),
        FRT_CLI_OPT_DTYPE(&wdtype),
        FRT_CLI_OPT_LM_HEAD_DTYPE(&lmdtype),
        FRT_CLI_OPT_KV_SCALES(&kv_scales),
        FRT_OPT(0, "threads", FRT_ARG_INT, &mp.n_threads, "N", "CPU threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_OPT(0, "json", FRT_ARG_FLAG, &json, NULL,
                "print one JSON object instead of the text (no loading or timing lines)"),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &quiet, NULL,
                "no loading or timing lines on stderr (--json prints none: not with --json)"),
    };
    frt_cmd_spec spec = {"generate", "[-m MODEL_DIR] (-p TEXT | --ids ID,ID,..) [options]", about, opts,
                         (int)(sizeof opts / sizeof opts[0]), 0, 0, epilog};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!!prompt == !!ids_arg)
        return frt_args_error(&spec, prompt ? "give the prompt once: -p TEXT or --ids, not both"
                                            : "no prompt: give -p TEXT or --ids ID,ID,..");
    if (gp.sampling.top_p <= 0)
        return frt_args_error(&spec, "--top-p: '%g' is out of range (a number in (0, 1])", (double)gp.sampling.top_p);
    if (mp.prefill_chunk % 64)
        return frt_args_error(&spec, "--chunk: '%d' is not a multiple of 64", mp.prefill_chunk);
    if (frt_args_find(&spec, "repetition-penalty")->given && gp.sampling.repetition_penalty <= 0)
        return frt_args_error(&spec, "--repetition-penalty: '%g' is out of range (a number > 0)",
                              (double)gp.sampling.repetition_penalty);
    if (logprobs >= 0 && !json) return frt_args_error(&spec, "--logprobs needs --json (the values are in its output)");
    if (quiet && json)
        return frt_args_error(&spec, "-q/--quiet: --json already prints no loading or timing lines (only errors go "
                                     "to stderr)");
    gp.sampling.logprobs = logprobs >= 0;
    gp.sampling.top_logprobs = logprobs > 0 ? logprobs : 0;
    if (bias_arg && parse_bias(&spec, bias_arg, &gp.sampling)) return 2;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (ids_arg && frt_args_ids(&spec, ids_arg, &ids, &n_ids)) return 2;
    char model_buf[PATH_MAX];
    if (!model_dir) {
        if (frt_cli_find_shipped("models/frt-demo", model_buf, sizeof model_buf) < 0) {
            free(ids);
            fprintf(stderr, "frt generate: no -m MODEL_DIR given and the demo model models/frt-demo was not found\n");
            return 1;
        }
        model_dir = model_buf;
    }
    gp.max_tokens = n;
    gp.ignore_eos = ignore_eos;
    mp.backend = (frt_backend)frt_args_backend(backend);
    mp.kv_dtype = strcmp(kv_dtype, "fp8") ? FRT_KV_DEFAULT : FRT_KV_FP8;
    mp.kv_scales = kv_scales;
    mp.weight_dtype = strcmp(wdtype, "fp8") ? FRT_WEIGHT_DEFAULT : FRT_WEIGHT_FP8;
    mp.lm_head_dtype = strcmp(lmdtype, "fp8") ? FRT_WEIGHT_DEFAULT : FRT_WEIGHT_FP8;

    frt_model *m = NULL;
    int rc = frt_cli_load_model("generate", model_dir, &mp, quiet || json, &m);
    if (rc < 0) {
        free(ids);
        return frt_cli_fail("generate", rc);
    }
    frt_model_info info;
    frt_model_info_get(m, &info);
    if (ids && frt_args_check_ids(&spec, ids, n_ids, info.vocab_size)) {
        free(ids);
        frt_model_free(m);
        return 2;
    }
    if (frt_sampling_check(&gp.sampling, info.vocab_size) < 0) {
        free(ids);
        frt_model_free(m);
        return frt_args_error(&spec, "%s", frt_last_error());
    }
    if (!ids && !info.has_tokenizer) {
        frt_model_free(m);
        return frt_args_error(&spec, "%s has no tokenizer.json: give the prompt as token ids with --ids ID,ID,..",
                              model_dir);
    }
    if (!ids) {
        rc = frt_model_tokenize(m, prompt, strlen(prompt), &ids, &n_ids);
        if (rc < 0) {
            frt_model_free(m);
            return frt_cli_fail("generate", rc);
        }
        if (n_ids == 0) {
            fprintf(stderr, "frt generate: the prompt has no tokens\n");
            free(ids);
            frt_model_free(m);
            return 1;
        }
    }
    gen_state g = {.m = m, .cap = n, .stream = !json && info.has_tokenizer,
                   .stream_ids = !json && !info.has_tokenizer};
    g.toks = calloc((size_t)n, sizeof *g.toks);
    if (gp.sampling.logprobs) g.lps = calloc((size_t)n, sizeof *g.lps);
    if (!g.toks || (gp.sampling.logprobs && !g.lps)) {
        free(g.toks);
        free(g.lps);
        free(ids);
        frt_model_free(m);
        fprintf(stderr, "frt generate: out of memory\n");
        return 1;
    }
    if (frt_args_find(&spec, "seed")->given) frt_model_seed(m, seed);
    frt_cartridge *cart = NULL;
    int cart_tokens = 0;
    if (cart_path) {
        rc = frt_cartridge_open(cart_path, &cart);
        if (rc < 0) {
            free(ids);
            free(g.toks);
            frt_model_free(m);
            return frt_cli_fail("generate", rc);
        }
    }
    g.t0 = now_ms();
    rc = cart ? frt_cartridge_inject(m, cart) : 0; /* TTFT includes the injection */
    size_t skip = 0;
    if (cart) {
        frt_cartridge_info ci;
        frt_cartridge_info_get(cart, &ci);
        cart_tokens = ci.tokens;
        skip = stated_start(cart, ids, n_ids);
        frt_cartridge_free(cart);
    }
    if (rc == 0 && skip == n_ids)
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt holds nothing after the cartridge's stated start");
    if (rc == 0) rc = frt_model_prefill(m, ids + skip, (int)(n_ids - skip));
    int produced = 0;
    if (rc == 0) rc = frt_model_generate(m, &gp, on_token, &g, &produced);
    double t_end = now_ms();
    if (rc < 0) {
        free(ids);
        free(g.toks);
        free(g.lps);
        frt_model_free(m);
        return frt_cli_fail("generate", rc);
    }
    double ttft = g.n ? g.t_first - g.t0 : 0.0;
    double tps = g.n > 1 ? (g.n - 1) / ((t_end - g.t_first) / 1e3) : 0.0;
    if (json) {
        char *text = NULL;
        size_t len = 0;
        int have_text = info.has_tokenizer && frt_model_detokenize(m, g.toks, (size_t)g.n, &text, &len) == 0;
        json_t *o = json_object(), *arr = json_array(), *parr = json_array();
        for (int i = 0; i < g.n; i++) json_array_append_new(arr, json_integer(g.toks[i]));
        for (size_t i = 0; i < n_ids; i++) json_array_append_new(parr, json_integer(ids[i]));
        json_object_set_new(o, "tokens", arr);
        json_object_set_new(o, "prompt_ids", parr);
        json_object_set_new(o, "text", have_text ? json_stringn(text ? text : "", text ? len : 0) : json_null());
        json_object_set_new(o, "prompt_tokens", json_integer((json_int_t)n_ids));
        json_object_set_new(o, "cartridge_tokens", json_integer(cart_tokens));
        json_object_set_new(o, "cartridge_start_dropped", json_integer((json_int_t)skip));
        json_object_set_new(o, "ttft_ms", json_real(ttft));
        json_object_set_new(o, "tokens_per_s", json_real(tps));
        if (g.lps) json_object_set_new(o, "logprobs", logprobs_json(g.lps, g.n));
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s);
        free(s);
        json_decref(o);
        free(text);
    } else {
        if (g.stream) stream_text(&g, 1);
        fprintf(stdout, "\n");
        if (!quiet)
            fprintf(stderr, "[%d cartridge tokens, %zu prompt tokens, %d generated, TTFT %.1f ms, %.1f tokens/s]\n",
                    cart_tokens, n_ids, g.n, ttft, tps);
    }
    free(ids);
    free(g.toks);
    free(g.lps);
    frt_model_free(m);
    return 0;
}
