/*
 * fuzz_tokenizer.c - libFuzzer target: arbitrary bytes through the encoder
 * and decoder of a byte-level BPE tokenizer with the Qwen3.5 pipeline (NFC,
 * the Qwen3.5 split regex, ByteLevel, ChatML specials), built in memory by
 * tests/test_tokenizer_fixture.h.
 *
 * Invariants: invalid UTF-8 is refused with FRT_ERR_INVALID_ARGUMENT; valid
 * text encodes, every id is inside the vocabulary, the ids equal those of a
 * second copy of the tokenizer with the encoder's fast paths off (the split
 * regex through PCRE2 only, no whole-word lookups), the streaming decoder
 * gives the same bytes as the full decode, and when the input holds no '<'
 * (so no added token can match) decode(encode(x)) == NFC(x).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_tokenizer CORPUS;
 * CI replays fuzz/corpus/tokenizer/ through replay_tokenizer.
 */
#include "frt/status.h"
#include "frt/tokenizer.h"
#include "../tests/test_tokenizer_fixture.h"
#include "text/tok_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static frt_tokenizer *fuzz_tok, *general_tok;

static frt_tokenizer *tokenizer(void)
{
    if (fuzz_tok) return fuzz_tok;
    static const char *const merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "\xc4\xa0 \xc4\xa0", "i n",
                                         "\xc4\xa0 a", "\xc4\x8a \xc4\x8a", "' s", NULL};
    tokfx f = {.merges = merges, .pre_tokenizer = TOKFX_QWEN35_PRE, .added_tokens = TOKFX_SPECIALS,
               .normalizer = "{\"type\":\"NFC\"}"};
    char *json = tokfx_json(&f);
    if (!json || frt_tokenizer_load_json(json, strlen(json), &fuzz_tok)) abort();
    if (frt_tokenizer_load_json(json, strlen(json), &general_tok)) abort();
    free(json);
    for (int i = 0; i < general_tok->n_stages; i++) {
        if (fuzz_tok->stages[i].re.fast == TOK_FAST_NONE && !fuzz_tok->stages[i].is_byte_level) abort();
        general_tok->stages[i].re.fast = TOK_FAST_NONE;
    }
    tok_strmap_free(&general_tok->word_ids);
    return fuzz_tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_tokenizer *tok = tokenizer();
    const char *text = (const char *)data;
    int32_t *ids = NULL;
    size_t n = 0;
    int valid = 1;
    for (size_t i = 0; i < size;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t r = utf8proc_iterate(data + i, (utf8proc_ssize_t)(size - i), &cp);
        if (r <= 0) {
            valid = 0;
            break;
        }
        i += (size_t)r;
    }
    int rc = frt_tokenizer_encode(tok, text, size, &ids, &n);
    if (!valid) {
        if (rc != FRT_ERR_INVALID_ARGUMENT || ids || n) abort();
        return 0;
    }
    if (rc) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= frt_tokenizer_vocab_size(tok)) abort();
    int32_t *gids = NULL;
    size_t gn = 0;
    if (frt_tokenizer_encode(general_tok, text, size, &gids, &gn) || gn != n ||
        (n && memcmp(gids, ids, n * sizeof *ids)))
        abort();
    free(gids);
    char *back = NULL;
    size_t blen = 0;
    if (frt_tokenizer_decode(tok, ids, n, &back, &blen)) abort();
    /* streaming decode == full decode */
    frt_detok_stream *s = NULL;
    if (frt_detok_stream_create(tok, &s)) abort();
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t pl;
        if (i < n ? frt_detok_stream_push(s, ids[i], &p, &pl) : frt_detok_stream_flush(s, &p, &pl)) abort();
        if (at + pl > blen || memcmp(back + at, p, pl)) abort();
        at += pl;
    }
    if (at != blen) abort();
    frt_detok_stream_free(s);
    if (!memchr(text, '<', size)) {
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t nl = utf8proc_map(data, (utf8proc_ssize_t)size, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (nl < 0 || (size_t)nl != blen || memcmp(nfc, back, blen)) abort();
        free(nfc);
    }
    free(back);
    free(ids);
    return 0;
}
