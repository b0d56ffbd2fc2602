/*
 * fuzz_tokenizer_json.c - libFuzzer target: arbitrary bytes as tokenizer.json
 * through frt_tokenizer_load_json. A load either fails with a status (and
 * leaves no tokenizer) or gives a tokenizer that encodes a few fixed texts
 * into ids inside its vocabulary and decodes them back.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_tokenizer_json CORPUS;
 * CI replays fuzz/corpus/tokenizer_json/ through replay_tokenizer_json.
 */
#include "frt/status.h"
#include "frt/tokenizer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_tokenizer *tok = NULL;
    int rc = frt_tokenizer_load_json((const char *)data, size, &tok);
    if (rc) {
        if (tok || rc >= 0) abort();
        return 0;
    }
    if (!tok) abort();
    static const char *const texts[] = {"", "Hello, world!", "  it's\n\n\tx = 1  ", "<|im_start|>user\nhi<|im_end|>",
                                        "e\xcc\x81 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "aaaaaaaaaaaaaaaa"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        for (int special = 0; special < 2; special++) {
            int32_t *ids = NULL;
            size_t n = 0;
            rc = frt_tokenizer_encode_ex(tok, texts[t], strlen(texts[t]), special, &ids, &n);
            if (rc) { /* only the documented run-time failures */
                if (rc != FRT_ERR_FORMAT && rc != FRT_ERR_BACKEND) abort();
                continue;
            }
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= frt_tokenizer_vocab_size(tok)) abort();
            char *back = NULL;
            size_t len = 0;
            if (frt_tokenizer_decode(tok, ids, n, &back, &len)) abort();
            if (strlen(back) > len) abort();
            free(back);
            free(ids);
        }
    }
    frt_tokenizer_free(tok);
    return 0;
}
