/*
 * fuzz_serving_tokens.c - libFuzzer target: the bodies of POST /tokenize and
 * POST /detokenize through frt_api_parse_tokens (serving/api_tokens.h). The
 * first byte picks the endpoint, the rest is the body. A parse either fails
 * with a 4xx/5xx error object and leaves the request empty, or yields a
 * request whose invariants hold (tokenize: the content, NUL-terminated;
 * detokenize: every id inside the vocabulary).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_serving_tokens CORPUS;
 * CI replays fuzz/corpus/serving_tokens/ through replay_serving_tokens.
 */
#include "serving/api_tokens.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    enum { VOCAB = 1000 };
    const int detok = data[0] & 1;
    frt_api_tokens t;
    frt_api_error err;
    memset(&err, 0, sizeof err);
    if (frt_api_parse_tokens((const char *)data + 1, size - 1, detok, VOCAB, &t, &err)) {
        if (err.status < 400 || err.status > 599 || !err.message[0]) abort();
        if (t.text || t.ids || t.n_ids) abort();
        json_t *o = frt_api_error_json(&err);
        if (!o) abort();
        json_decref(o);
        return 0;
    }
    if (t.detokenize != detok) abort();
    if (detok) {
        if (t.n_ids && !t.ids) abort();
        for (size_t i = 0; i < t.n_ids; i++)
            if (t.ids[i] < 0 || t.ids[i] >= VOCAB) abort();
    } else if (!t.text || t.text[t.len] != '\0') {
        abort();
    }
    frt_api_tokens_clear(&t);
    return 0;
}
