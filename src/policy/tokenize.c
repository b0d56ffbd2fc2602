/*
 * policy/tokenize.c - the prompt of a Pi0 / Pi0.5 policy: PaliGemma's
 * SentencePiece model (through policy/spm_shim.cc), openpi's prompt
 * cleaning and Pi0.5's discretised state, padding and truncation to the
 * prompt length. Math and strings: openpi src/openpi/models/tokenizer.py
 * (PaligemmaTokenizer.tokenize).
 */
#include "frt/policy_io.h"

#include "frt/status.h"
#include "policy/policy_internal.h"
#include "policy/spm.h"
#include "text/tok_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_MAX_FILE_BYTES ((size_t)1 << 30)

int frt_policy_variant_parse(const char *name, frt_policy_variant *out)
{
    if (!name || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy variant: NULL argument");
    if (!strcmp(name, "pi0")) *out = FRT_POLICY_PI0;
    else if (!strcmp(name, "pi05") || !strcmp(name, "pi0.5")) *out = FRT_POLICY_PI05;
    else return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy variant '%s': expected pi0 or pi05", name);
    return 0;
}

size_t frt_policy_default_max_tokens(frt_policy_variant v)
{
    return v == FRT_POLICY_PI05 ? 200 : 48;
}

/* ---- the tokenizer ------------------------------------------------------ */

/* A tokenizer.json (or any JSON) starts with '{' after optional space. */
static int looks_like_json(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) i++;
    return i < len && data[i] == '{';
}

int frt_policy_tokenizer_load_memory(const void *data, size_t len, frt_policy_tokenizer **out)
{
    if (out) *out = NULL;
    if (!data || !out || len == 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenizer: NULL or empty model");
    if (looks_like_json(data, len))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "policy tokenizer: a tokenizer.json (Unigram / SentencePiece in JSON) is not supported; "
                         "give the SentencePiece tokenizer.model");
    return frt_spm_load(data, len, out);
}

static int parse_file(const char *data, size_t len, void *out)
{
    return frt_policy_tokenizer_load_memory(data, len, out);
}

int frt_policy_tokenizer_load(const char *path, frt_policy_tokenizer **out)
{
    if (out) *out = NULL;
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenizer: NULL argument");
    return policy_load_file(path, SPM_MAX_FILE_BYTES, parse_file, out);
}

void frt_policy_tokenizer_free(frt_policy_tokenizer *tok)
{
    if (tok) frt_spm_free(tok);
}

int frt_policy_tokenizer_vocab_size(const frt_policy_tokenizer *tok)
{
    return tok ? frt_spm_vocab_size(tok) : 0;
}

int frt_policy_tokenizer_bos_id(const frt_policy_tokenizer *tok)
{
    return tok ? frt_spm_bos_id(tok) : -1;
}

int frt_policy_tokenizer_encode(const frt_policy_tokenizer *tok, const char *text, size_t len, int add_bos,
                                int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!tok || !ids || !n_ids || (!text && len))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenizer encode: NULL argument");
    if (len && !tok_utf8_valid(text, len))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenizer encode: text is not valid UTF-8");
    int bos = frt_spm_bos_id(tok);
    if (add_bos && bos < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenizer encode: the model has no BOS token");
    int32_t *body = NULL;
    size_t n = 0;
    FRT_TRY(frt_spm_encode(tok, len ? text : "", len, &body, &n));
    if (!add_bos) {
        *ids = body;
        *n_ids = n;
        return 0;
    }
    int32_t *all = malloc((n + 1) * sizeof *all);
    if (!all) {
        free(body);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory (%zu token ids)", n + 1);
    }
    all[0] = bos;
    if (n) memcpy(all + 1, body, n * sizeof *all);
    free(body);
    *ids = all;
    *n_ids = n + 1;
    return 0;
}

/* ---- the prompt text ----------------------------------------------------- */

/* Python's str.isspace(): bidirectional class WS, B or S, or category Zs. */
static int py_isspace(uint32_t c)
{
    if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680)
        return 1;
    return (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

/* Python's str.strip() of valid UTF-8 S[0..N): *begin / *end (byte offsets). */
static void py_strip(const char *s, size_t n, size_t *begin, size_t *end)
{
    size_t b = 0, e = 0, i = 0;
    int seen = 0;
    while (i < n) {
        uint32_t cp;
        int l = tok_utf8_decode(s + i, &cp);
        if (!py_isspace(cp)) {
            if (!seen) b = i;
            seen = 1;
            e = i + (size_t)l;
        }
        i += (size_t)l;
    }
    *begin = seen ? b : 0;
    *end = seen ? e : 0;
}

int frt_policy_state_bins(const float *state, size_t n, int32_t *bins)
{
    if (n && (!state || !bins)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "state bins: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(state[i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "state[%zu] is not finite (%g)", i, (double)state[i]);
    for (size_t i = 0; i < n; i++) {
        double x = (double)state[i];
        int32_t count = 0; /* edges -1 + k/128 (exact in double) that are <= x */
        for (int k = 0; k < FRT_POLICY_STATE_BINS; k++)
            count += (-1.0 + (double)k / 128.0) <= x;
        bins[i] = count - 1;
    }
    return 0;
}

/* The cleaned prompt: strip, then '_' and '\n' -> ' '. Malloc'd in *out. */
static int clean_prompt(const char *prompt, char **out, size_t *len)
{
    size_t n = strlen(prompt), b, e;
    if (!tok_utf8_valid(prompt, n)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "prompt is not valid UTF-8");
    py_strip(prompt, n, &b, &e);
    if (e == b) return frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt is empty");
    char *s = malloc(e - b + 1);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory (prompt of %zu bytes)", e - b);
    for (size_t i = b; i < e; i++) s[i - b] = (prompt[i] == '_' || prompt[i] == '\n') ? ' ' : prompt[i];
    s[e - b] = '\0';
    *out = s;
    *len = e - b;
    return 0;
}

int frt_policy_cfg_prompt(const char *task, int advantage_positive, char **out)
{
    if (!task || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cfg prompt: NULL argument");
    if (advantage_positive != 0 && advantage_positive != 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cfg prompt: advantage_positive = %d (0 or 1)",
                         advantage_positive);
    char *text = NULL, *cat;
    size_t len = 0;
    FRT_TRY(clean_prompt(task, &text, &len)); /* an empty task is refused before the indicator is added */
    free(text);
    const char *ind = advantage_positive ? "\nAdvantage: positive" : "\nAdvantage: negative";
    size_t n = strlen(task) + strlen(ind) + 1;
    if (!(cat = malloc(n))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory (cfg prompt)");
    snprintf(cat, n, "%s%s", task, ind);
    int rc = clean_prompt(cat, out, &len);
    free(cat);
    return rc;
}

/* "Task: TEXT, State: B0 B1 ...;\nAction: " into a malloc'd string. */
static int pi05_text(const char *text, size_t len, const float *state, size_t n_state, char **out)
{
    if (!state || n_state == 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "Pi0.5 prompt: the state is required");
    int32_t *bins = malloc(n_state * sizeof *bins);
    size_t cap = len + n_state * 5 + 64;
    char *s = malloc(cap);
    int rc = (!bins || !s) ? frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory (Pi0.5 prompt)")
                           : frt_policy_state_bins(state, n_state, bins);
    if (rc == 0) {
        size_t at = (size_t)snprintf(s, cap, "Task: %s, State: ", text);
        for (size_t i = 0; i < n_state; i++)
            at += (size_t)snprintf(s + at, cap - at, i ? " %d" : "%d", (int)bins[i]);
        snprintf(s + at, cap - at, ";\nAction: ");
        *out = s;
        s = NULL;
    }
    free(bins);
    free(s);
    return rc;
}

int frt_policy_prompt_text(frt_policy_variant v, const char *prompt, const float *state, size_t n_state, char **out)
{
    if (!prompt || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy prompt: NULL argument");
    if (v != FRT_POLICY_PI0 && v != FRT_POLICY_PI05)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy prompt: unknown variant %d", (int)v);
    char *text = NULL;
    size_t len = 0;
    FRT_TRY(clean_prompt(prompt, &text, &len));
    if (v == FRT_POLICY_PI0) {
        *out = text;
        return 0;
    }
    int rc = pi05_text(text, len, state, n_state, out);
    free(text);
    return rc;
}

/* The unpadded ids of the variant's prompt (see frt_policy_tokenize). */
static int prompt_ids(const frt_policy_tokenizer *tok, frt_policy_variant v, const char *prompt, const float *state,
                      size_t n_state, int32_t **ids, size_t *n)
{
    char *text = NULL;
    FRT_TRY(frt_policy_prompt_text(v, prompt, state, n_state, &text));
    int rc = frt_policy_tokenizer_encode(tok, text, strlen(text), 1, ids, n);
    free(text);
    if (rc < 0 || v == FRT_POLICY_PI05) return rc;
    int32_t *nl = NULL, *all = NULL;
    size_t n_nl = 0;
    rc = frt_policy_tokenizer_encode(tok, "\n", 1, 0, &nl, &n_nl);
    if (rc == 0 && n_nl) {
        all = realloc(*ids, (*n + n_nl) * sizeof *all);
        if (!all) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory (prompt ids)");
        else {
            memcpy(all + *n, nl, n_nl * sizeof *all);
            *ids = all;
            *n += n_nl;
        }
    }
    free(nl);
    if (rc < 0) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

int frt_policy_tokenize(const frt_policy_tokenizer *tok, frt_policy_variant v, const char *prompt,
                        const float *state, size_t n_state, size_t max_len, int32_t *ids, uint8_t *mask,
                        size_t *n_valid, size_t *n_untruncated)
{
    if (!tok || !prompt || !ids || !mask || !n_valid)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenize: NULL argument");
    if (max_len == 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy tokenize: max_len is 0");
    int32_t *all = NULL;
    size_t n = 0;
    FRT_TRY(prompt_ids(tok, v, prompt, state, n_state, &all, &n));
    size_t keep = n < max_len ? n : max_len;
    for (size_t i = 0; i < max_len; i++) {
        ids[i] = i < keep ? all[i] : 0;
        mask[i] = i < keep;
    }
    free(all);
    *n_valid = keep;
    if (n_untruncated) *n_untruncated = n;
    return 0;
}
