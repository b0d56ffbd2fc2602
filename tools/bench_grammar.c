/*
 * bench_grammar.c - frt bench grammar: the host cost of one allowed-token
 * mask (frt/grammar.h) per generated token, against the 0.3 ms target.
 *
 *   frt bench grammar --tokenizer DIR        the checkpoint tokenizer (frt_tokenizer_load)
 *   frt bench grammar --vocab-json FILE      the vocabulary of any tokenizer.json read as
 *                                            bytes: byte-level BPE entries (Qwen, Llama 3)
 *                                            or SentencePiece-style ones ('▁' = space,
 *                                            <0xNN> byte fallback: Gemma 3's 262,144 ids)
 *
 * For each grammar (a JSON Schema object, json_object, the tool-call
 * grammar) it follows a fixed target document token by token: at each step
 * the mask is computed (timed), then the allowed token covering the longest
 * prefix of what is left of the document is taken. Prints the trie build
 * time and, per grammar, the mean, median, p99 and worst mask time next to
 * the 0.3 ms target.
 */
#include "args.h"
#include "cli.h"

#include "frt/grammar.h"
#include "frt/status.h"
#include "frt/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TARGET_MS 0.3

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

typedef struct bvocab {
    int n;
    uint8_t **bytes;
    size_t *lens;
    uint8_t *special;
    int32_t eos[4];
    int n_eos;
} bvocab;

static void bvocab_free(bvocab *v)
{
    for (int i = 0; v->bytes && i < v->n; i++) free(v->bytes[i]);
    free(v->bytes);
    free(v->lens);
    free(v->special);
}

static int bvocab_alloc(bvocab *v, int n)
{
    v->n = n;
    v->bytes = calloc((size_t)n, sizeof *v->bytes);
    v->lens = calloc((size_t)n, sizeof *v->lens);
    v->special = calloc((size_t)n, 1);
    return v->bytes && v->lens && v->special ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "bench grammar");
}

static int bvocab_set(bvocab *v, int id, const void *b, size_t n, int special)
{
    if (id < 0 || id >= v->n || !(v->bytes[id] = malloc(n ? n : 1))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "vocab");
    memcpy(v->bytes[id], b, n);
    v->lens[id] = n;
    v->special[id] = (uint8_t)special;
    return 0;
}

static void add_eos(bvocab *v, int id)
{
    if (id >= 0 && v->n_eos < 4) v->eos[v->n_eos++] = id;
}

static int from_tokenizer(const char *dir, bvocab *v)
{
    frt_tokenizer *tok = NULL;
    FRT_TRY(frt_tokenizer_load(dir, &tok));
    int rc = bvocab_alloc(v, frt_tokenizer_vocab_size(tok));
    for (int id = 0; !rc && id < v->n; id++) {
        size_t n;
        const char *b;
        if (frt_tokenizer_token_bytes(tok, id, &b, &n) == 0) rc = bvocab_set(v, id, b, n, frt_tokenizer_is_special(tok, id));
    }
    add_eos(v, frt_tokenizer_token_id(tok, "<|im_end|>"));
    add_eos(v, frt_tokenizer_token_id(tok, "<|endoftext|>"));
    add_eos(v, frt_tokenizer_token_id(tok, "<|eot_id|>"));
    frt_tokenizer_free(tok);
    return rc;
}

/* The bytes of one vocabulary string: byte-level characters (U+0100.. map
 * back to bytes as GPT-2's table does), or '▁' for a space and <0xNN>. */
static size_t entry_bytes(const char *s, int byte_level, uint8_t *out)
{
    size_t n = 0, len = strlen(s);
    unsigned hex;
    if (!byte_level && len == 6 && sscanf(s, "<0x%2X>", &hex) == 1) {
        out[0] = (uint8_t)hex;
        return 1;
    }
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)s + i;
        if (!byte_level && p[0] == 0xE2 && p[1] == 0x96 && p[2] == 0x81) { /* U+2581 */
            out[n++] = ' ';
            i += 3;
        } else if (byte_level && (p[0] & 0xE0) == 0xC0) { /* U+0080..U+07FF */
            unsigned cp = (unsigned)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
            /* GPT-2 bytes_to_unicode: printable bytes stand for themselves, the rest are 256 + k */
            out[n++] = (uint8_t)(cp >= 256 ? (cp - 256 < 33 ? cp - 256 : cp - 256 < 67 ? cp - 256 - 33 + 127 : 173)
                                           : cp);
            i += 2;
        } else {
            out[n++] = p[0];
            i++;
        }
    }
    return n;
}

static int from_json(const char *path, bvocab *v)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) return frt_error(FRT_ERR_FORMAT, "%s: %s", path, e.text);
    json_t *vocab = json_object_get(json_object_get(j, "model"), "vocab"), *added = json_object_get(j, "added_tokens");
    int byte_level = json_is_object(json_object_get(j, "decoder")) &&
                     !strcmp(json_string_value(json_object_get(json_object_get(j, "decoder"), "type")) ?: "", "ByteLevel");
    const char *k;
    json_t *x;
    int n = 0, rc = 0;
    size_t i;
    json_object_foreach(vocab, k, x) if (json_integer_value(x) >= n) n = (int)json_integer_value(x) + 1;
    json_array_foreach(added, i, x) if (json_integer_value(json_object_get(x, "id")) >= n) n =
        (int)json_integer_value(json_object_get(x, "id")) + 1;
    rc = bvocab_alloc(v, n);
    uint8_t buf[1024];
    json_object_foreach(vocab, k, x) {
        if (rc || strlen(k) >= sizeof buf) continue;
        rc = bvocab_set(v, (int)json_integer_value(x), buf, entry_bytes(k, byte_level, buf), 0);
    }
    json_array_foreach(added, i, x) {
        const char *c = json_string_value(json_object_get(x, "content"));
        int id = (int)json_integer_value(json_object_get(x, "id"));
        if (rc || !c) continue;
        free(v->bytes[id]);
        rc = bvocab_set(v, id, c, strlen(c), json_is_true(json_object_get(x, "special")));
        if (!strcmp(c, "<eos>") || !strcmp(c, "<end_of_turn>") || !strcmp(c, "<|im_end|>")) add_eos(v, id);
    }
    json_decref(j);
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The allowed token covering the longest prefix of doc[at..n). */
static int pick(const bvocab *v, const uint32_t *mask, const char *doc, size_t at, size_t n)
{
    int best = -1;
    size_t best_len = 0;
    for (int id = 0; id < v->n; id++) {
        if (!(mask[id >> 5] >> (id & 31) & 1) || !v->bytes[id] || v->lens[id] > n - at || v->lens[id] <= best_len)
            continue;
        if (!memcmp(v->bytes[id], doc + at, v->lens[id])) {
            best = id;
            best_len = v->lens[id];
        }
    }
    return best;
}

/* Follows doc under g; prints the mask times. */
static int run_doc(const bvocab *v, const frt_grammar_vocab *voc, const frt_grammar *g, const char *what,
                   const char *doc, int repeats, int trace)
{
    frt_grammar_matcher *m = NULL;
    FRT_TRY(frt_grammar_matcher_create(g, voc, &m));
    int64_t words = (v->n + 31) / 32;
    uint32_t *mask = malloc((size_t)words * 4);
    double *t = malloc(4096 * sizeof *t);
    int steps = 0, rc = mask && t ? 0 : FRT_ERR_OUT_OF_MEMORY;
    int64_t allowed_sum = 0;
    size_t n = strlen(doc);
    for (int r = 0; r < repeats && !rc; r++) {
        frt_grammar_matcher_reset(m);
        for (size_t at = 0; at <= n && steps < 4096 && !rc;) {
            double t0 = now_ms();
            int64_t c = frt_grammar_matcher_mask(m, mask, words);
            t[steps++] = now_ms() - t0;
            allowed_sum += c;
            if (at == n) break;
            int id = pick(v, mask, doc, at, n);
            if (trace && r == 0) printf("%8.4f ms  %7lld  '%.*s'\n", t[steps - 1], (long long)c, id >= 0 ? (int)v->lens[id] : 0, id >= 0 ? (const char *)v->bytes[id] : "");
            if (id < 0) rc = frt_error(FRT_ERR_MISMATCH, "%s: no allowed token continues the document at byte %zu", what, at);
            else rc = frt_grammar_matcher_accept(m, id);
            if (!rc) at += v->lens[id];
        }
    }
    if (!rc) {
        double sum = 0;
        for (int i = 0; i < steps; i++) sum += t[i];
        qsort(t, (size_t)steps, sizeof *t, cmp_d);
        printf("  %-13s %4d masks  mean %.4f ms  median %.4f  p99 %.4f  max %.4f  (target %.1f ms: mean %s)  "
               "%.0f tokens allowed on average\n",
               what, steps, sum / steps, t[steps / 2], t[(int)(steps * 0.99)], t[steps - 1], TARGET_MS,
               sum / steps <= TARGET_MS ? "met" : "MISSED", (double)allowed_sum / steps);
    }
    free(mask);
    free(t);
    frt_grammar_matcher_free(m);
    return rc;
}

static const char k_schema[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\",\"maxLength\":64},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\"}},\"required\":[\"street\",\"city\"],\"additionalProperties\":false},"
    "\"active\":{\"type\":\"boolean\"},\"score\":{\"type\":\"number\"},\"notes\":{\"type\":[\"string\",\"null\"]}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"address\",\"active\"],\"additionalProperties\":false}";

static const char k_doc[] =
    "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"tags\": [\"mathematician\", "
    "\"writer\", \"analytical engine\"], \"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", "
    "\"zip\": \"SW1Y 4JH\"}, \"active\": false, \"score\": 98.5, \"notes\": \"Wrote the first published algorithm "
    "intended for a machine; \\\"poetical science\\\" \xe2\x80\x94 her phrase.\"}";

static const char k_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}}},{\"type\":\"function\",\"function\":{\"name\":"
    "\"search\",\"parameters\":{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"},\"limit\":"
    "{\"type\":\"integer\"}},\"required\":[\"query\"],\"additionalProperties\":false}}}]";

static const char k_call[] = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"grammar-constrained "
                             "decoding with a token trie\", \"limit\": 10}}\n</tool_call>";

int frt_bench_grammar(int argc, char **argv)
{
    const char *dir = NULL, *json = NULL;
    int repeats = 5, trace = 0;
    frt_arg opts[] = {
        FRT_OPT(0, "tokenizer", FRT_ARG_STR, &dir, "DIR", "a checkpoint folder with tokenizer.json", .dflt = ""),
        FRT_OPT(0, "vocab-json", FRT_ARG_STR, &json, "FILE", "a tokenizer.json whose vocabulary is read as bytes",
                .dflt = ""),
        FRT_OPT(0, "repeats", FRT_ARG_INT, &repeats, "N", "times each document is followed", .min = 1, .max = 100),
        FRT_OPT(0, "trace", FRT_ARG_FLAG, &trace, NULL, "print each mask's time, allowed count and the token taken"),
    };
    frt_cmd_spec spec = {"bench grammar", "(--tokenizer DIR | --vocab-json FILE) [options]",
                         "The host cost of one allowed-token mask of grammar-constrained decoding per token\n"
                         "(a JSON Schema object, json_object, a tool call), next to the 0.3 ms target.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!dir == !json) return frt_args_error(&spec, "give one of --tokenizer and --vocab-json");
    bvocab v = {0};
    double t0 = now_ms();
    int rc = dir ? from_tokenizer(dir, &v) : from_json(json, &v);
    frt_grammar_vocab *voc = NULL;
    double t1 = now_ms();
    if (!rc) rc = frt_grammar_vocab_create_bytes(v.n, (const uint8_t *const *)v.bytes, v.lens, v.special, v.eos,
                                                 v.n_eos, &voc);
    if (!rc) {
        printf("frt bench grammar: %s, %d ids, %lld trie nodes, built in %.0f ms (read in %.0f ms)\n", dir ? dir : json,
               v.n, (long long)frt_grammar_vocab_nodes(voc), now_ms() - t1, t1 - t0);
    }
    frt_grammar *gs = NULL, *go = NULL, *gt = NULL;
    if (!rc) rc = frt_grammar_compile_json_schema(k_schema, strlen(k_schema), &gs, NULL);
    if (!rc) rc = frt_grammar_compile_json_schema(NULL, 0, &go, NULL);
    if (!rc) rc = frt_grammar_compile_tool_calls(k_tools, strlen(k_tools), NULL, 0, &gt, NULL);
    if (!rc) rc = run_doc(&v, voc, gs, "json_schema", k_doc, repeats, trace);
    if (!rc) rc = run_doc(&v, voc, go, "json_object", k_doc, repeats, trace);
    if (!rc) rc = run_doc(&v, voc, gt, "tool call", k_call, repeats, trace);
    frt_grammar_free(gs);
    frt_grammar_free(go);
    frt_grammar_free(gt);
    frt_grammar_vocab_free(voc);
    bvocab_free(&v);
    return rc ? frt_cli_fail("bench grammar", rc) : 0;
}
