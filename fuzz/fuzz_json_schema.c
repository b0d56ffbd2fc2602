/*
 * fuzz_json_schema.c - libFuzzer target: text/json_schema.c (the JSON
 * Schema and tools compilers), text/grammar.c (the byte automaton) and
 * text/json_schema_validate.c. The input is SCHEMA '\0' BYTES: the schema
 * (or, when it starts with 'T', a tools array after the 'T') is compiled;
 * BYTES are fed one at a time (a refused byte is skipped) and, when the
 * bytes taken form a complete value, that value must parse as JSON and
 * validate against the schema. Checks: a refused byte leaves the state
 * unchanged, a complete schema output validates, nothing crashes.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_json_schema CORPUS;
 * CI replays fuzz/corpus/json_schema/ through replay_json_schema.
 */
#include "frt/grammar.h"
#include "frt/status.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feeds bytes one by one; returns the taken bytes (malloc'd) in *taken. */
static size_t feed(frt_grammar *g, const uint8_t *b, size_t n, char **taken)
{
    frt_grammar_state *st = NULL, *before = NULL;
    *taken = malloc(n + 1);
    if (!*taken || frt_grammar_state_create(g, &st) || frt_grammar_state_create(g, &before)) abort();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        frt_grammar_state_copy(before, st);
        if (frt_grammar_state_accept(st, b + i, 1) == 0) {
            (*taken)[k++] = (char)b[i];
            continue;
        }
        /* refused: unchanged (the next byte is accepted or refused as before) */
        if (frt_grammar_state_complete(st) != frt_grammar_state_complete(before)) abort();
    }
    (*taken)[k] = '\0';
    if (!frt_grammar_state_complete(st)) k = (size_t)-1;
    frt_grammar_state_free(st);
    frt_grammar_state_free(before);
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    const uint8_t *rest = nul ? nul + 1 : data + size;
    size_t rlen = (size_t)(data + size - rest);
    int tools = slen > 0 && data[0] == 'T';
    frt_grammar *g = NULL;
    frt_grammar_diag d;
    int rc = tools ? frt_grammar_compile_tool_calls((const char *)data + 1, slen - 1, NULL, (int)(rlen & 1), &g, &d)
                   : frt_grammar_compile_json_schema((const char *)data, slen, &g, &d);
    if (rc) {
        if (g || !frt_last_error()[0]) abort();
        return 0;
    }
    char *taken;
    size_t k = feed(g, rest, rlen, &taken);
    if (k != (size_t)-1 && !tools) {
        json_error_t e;
        json_t *j = json_loadb(taken, k, JSON_DECODE_ANY, &e);
        if (!j) abort(); /* a complete output is JSON */
        json_decref(j);
        int v = frt_json_schema_validate((const char *)data, slen, taken, k, NULL, 0);
        if (v != 0) abort(); /* and valid */
    }
    if (!tools) frt_json_schema_validate((const char *)data, slen, (const char *)rest, rlen, NULL, 0);
    free(taken);
    frt_grammar_free(g);
    return 0;
}
