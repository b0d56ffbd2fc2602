/* cmd_tokenize.c - frt tokenize: the token ids of a text, and the tokenizer
 * benchmark.
 *
 *   frt tokenize [--special] [--chat] MODEL_DIR TEXT
 *   frt tokenize [--special] [--chat] MODEL_DIR --file PATH
 *   frt tokenize MODEL_DIR --bench FILE [--seconds S]
 *
 * Prints the ids on one line, separated by spaces. --special adds the
 * post-processor's tokens (Llama 3's <|begin_of_text|>); --chat formats TEXT
 * as one user message with the chat template and the generation prompt,
 * TEXT's bytes protected (special-token text in it is ordinary tokens)
 * unless --parse-special-in-content (transformers' ids).
 * --bench encodes FILE repeatedly on one core and prints MB/s. */
#include "args.h"
#include "cli.h"

#include "frt/status.h"
#include "frt/chat.h"
#include "frt/tokenizer.h"
#include "text/chat.h"
#include "text/tok_internal.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int read_all(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "frt tokenize: %s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (!r) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        fprintf(stderr, "frt tokenize: %s: read failed\n", path);
        return 1;
    }
    *data = buf;
    *len = n;
    return 0;
}

/* TEXT as one user message through the chat template; its bytes protected
 * unless PARSE_SPECIAL. */
static int chat_ids(const frt_tokenizer *tok, const char *text, size_t len, int special, int parse_special,
                    int32_t **ids, size_t *n)
{
    json_t *msgs = json_pack("[{s:s, s:s%}]", "role", "user", "content", text, len);
    if (!msgs) return frt_error(FRT_ERR_INVALID_ARGUMENT, "the text is not valid UTF-8");
    frt_chat_request req = {.messages = msgs, .add_generation_prompt = 1};
    char *prompt = NULL;
    size_t plen = 0, nsp = 0;
    frt_text_span *sp = NULL;
    int rc = frt_chat_format_json_spans(tok, &req, &prompt, &plen, &sp, &nsp);
    if (!rc) rc = parse_special ? frt_tokenizer_encode_ex(tok, prompt, plen, special, ids, n)
                                : tok_encode_protected(tok, prompt, plen, sp, nsp, special, ids, n);
    free(prompt);
    free(sp);
    json_decref(msgs);
    return rc;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* CPU time of this thread: the one-core rate even on a shared machine. */
static double cpu_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

/* The targets of issue 17 for a tokenizer at a real vocabulary size (Llama 3,
 * Qwen2/3): encode source code at 20 MB/s on one core, load in 1 s. */
#define BENCH_TARGET_MB_S 20.0
#define BENCH_TARGET_LOAD_S 1.0

static int bench(const char *cmd, const frt_tokenizer *tok, const char *path, double seconds, double load_s,
                 double load_cpu_s)
{
    char *text;
    size_t len;
    if (read_all(path, &text, &len)) return 1;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = frt_tokenizer_encode(tok, text, len, &ids, &n_ids); /* warm-up */
    if (rc) {
        free(text);
        return frt_cli_fail(cmd, rc);
    }
    double best = 1e30, total = 0, best_cpu = 1e30;
    int reps = 0;
    while (reps < 3 || total < seconds) {
        free(ids);
        double t0 = now_s(), c0 = cpu_s();
        rc = frt_tokenizer_encode(tok, text, len, &ids, &n_ids);
        double dt = now_s() - t0, dc = cpu_s() - c0;
        if (dc < best_cpu) best_cpu = dc;
        if (rc) {
            free(text);
            return frt_cli_fail(cmd, rc);
        }
        if (dt < best) best = dt;
        total += dt;
        reps++;
    }
    char *back = NULL;
    size_t back_len = 0;
    double t0 = now_s();
    rc = frt_tokenizer_decode(tok, ids, n_ids, &back, &back_len);
    double dec = now_s() - t0;
    if (rc) {
        free(ids);
        free(text);
        return frt_cli_fail(cmd, rc);
    }
    double mb = (double)len / 1e6;
    printf("file: %s, %zu bytes, %zu tokens, %.3f bytes/token\n", path, len, n_ids,
           n_ids ? (double)len / (double)n_ids : 0.0);
    printf("encode (one thread, %d runs): best %.2f MB/s wall (%.3f s), mean %.2f MB/s wall, "
           "%.2f MB/s of CPU time, %.2f M tokens/s\n", reps, mb / best, best, mb * reps / total,
           mb / (best_cpu > 0 ? best_cpu : 1e-9), (double)n_ids / best / 1e6);
    printf("decode: %.2f MB/s\n", (double)back_len / 1e6 / (dec > 0 ? dec : 1e-9));
    double rate = mb / (best_cpu > 0 ? best_cpu : 1e-9);
    printf("target: >= %.0f MB/s encode on one core (CPU time): %.2f MB/s, %s\n", BENCH_TARGET_MB_S, rate,
           rate >= BENCH_TARGET_MB_S ? "met" : "NOT met");
    printf("load: %.3f s wall, %.3f s CPU (tokenizer.json, tokenizer_config.json, chat template); target < %.0f s "
           "(CPU time): %s\n", load_s, load_cpu_s, BENCH_TARGET_LOAD_S, load_cpu_s < BENCH_TARGET_LOAD_S ? "met" : "NOT met");
    printf("round trip: decode(encode(file)) %s the file\n",
           back_len == len && !memcmp(back, text, len) ? "equals" : "differs from (normalization or added-token stripping)");
    free(back);
    free(ids);
    free(text);
    return 0;
}

int frt_cmd_tokenize(int argc, char **argv)
{
    const char *cmd = argv[0], *dir = NULL, *text = NULL, *file = NULL, *bench_file = NULL;
    int special = 0, chat = 0, parse_special = 0;
    double seconds = 2.0;
    frt_arg opts[] = {
        FRT_OPT(0, "special", FRT_ARG_FLAG, &special, NULL, "add the post-processor's special tokens (e.g. Llama 3's BOS)"),
        FRT_OPT(0, "chat", FRT_ARG_FLAG, &chat, NULL, "format TEXT as a user message with the chat template"),
        FRT_OPT(0, "parse-special-in-content", FRT_ARG_FLAG, &parse_special, NULL,
                "--chat: special-token text in TEXT becomes special ids, as in transformers (default: ordinary text)"),
        FRT_OPT(0, "file", FRT_ARG_STR, &file, "PATH", "read the text from PATH instead of TEXT", .dflt = ""),
        FRT_OPT(0, "bench", FRT_ARG_STR, &bench_file, "FILE", "encode FILE repeatedly on one core; print MB/s",
                .dflt = ""),
        FRT_OPT(0, "seconds", FRT_ARG_DOUBLE, &seconds, "S", "--bench: time to spend after 3 runs", .fmin = 0,
                .fmax = 86400),
    };
    frt_cmd_spec spec = {"tokenize", "[--special] [--chat [--parse-special-in-content]] MODEL_DIR (TEXT | --file PATH)\n"
                                     "       frt tokenize MODEL_DIR --bench FILE [--seconds S]",
                         "Prints the token ids of TEXT (tokenizer.json of MODEL_DIR) on one line.\n", opts,
                         (int)(sizeof opts / sizeof opts[0]), 1, 2, NULL};
    char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    int prc = frt_args_parse(&spec, argc, argv, pos, &n_pos);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    dir = pos[0];
    text = n_pos > 1 ? pos[1] : NULL;
    if (bench_file && (text || file)) return frt_args_error(&spec, "--bench takes no TEXT or --file");
    if (bench_file && (chat || special || parse_special))
        return frt_args_error(&spec, "--%s: --bench times the plain encode of FILE (no chat template, no special "
                                     "tokens added)",
                              chat ? "chat" : special ? "special" : "parse-special-in-content");
    if (!bench_file && frt_args_find(&spec, "seconds")->given)
        return frt_args_error(&spec, "--seconds only changes --bench");
    if (parse_special && !chat) return frt_args_error(&spec, "--parse-special-in-content only changes --chat");
    if (!bench_file && !!text == !!file)
        return frt_args_error(&spec, text ? "give TEXT or --file, not both" : "missing TEXT (or --file PATH): usage: "
                                                                               "frt tokenize MODEL_DIR TEXT");

    frt_tokenizer *tok = NULL;
    double t0 = now_s(), c0 = cpu_s();
    int rc = frt_tokenizer_load(dir, &tok);
    double load_s = now_s() - t0, load_cpu_s = cpu_s() - c0;
    if (rc) return frt_cli_fail(cmd, rc);
    if (bench_file) {
        int r = bench(cmd, tok, bench_file, seconds, load_s, load_cpu_s);
        frt_tokenizer_free(tok);
        return r;
    }
    char *owned = NULL;
    size_t len;
    if (file) {
        if (read_all(file, &owned, &len)) {
            frt_tokenizer_free(tok);
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (chat) {
        rc = chat_ids(tok, text, len, special, parse_special, &ids, &n);
    } else {
        rc = frt_tokenizer_encode_ex(tok, text, len, special, &ids, &n);
    }
    free(owned);
    frt_tokenizer_free(tok);
    if (rc) return frt_cli_fail(cmd, rc);
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    return 0;
}
