/*
 * fuzz_tokenizer_chat.c - libFuzzer target: arbitrary bytes as a chat
 * template through frt_chat_template_kind (the legacy ChatML classifier:
 * refused with FRT_ERR_UNSUPPORTED or recognized as one of the kinds) and
 * frt_chat_render, which executes the template (text/jinja.h) on a fixed
 * conversation: it renders NUL-terminated text of the reported length (which
 * may hold NUL bytes the template printed) or fails with one of its
 * documented statuses. fuzz_jinja.c fuzzes the engine itself.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_tokenizer_chat CORPUS;
 * CI replays fuzz/corpus/tokenizer_chat/ through replay_tokenizer_chat.
 */
#include "frt/status.h"
#include "text/chat.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = '\0'; /* a template is a C string: it ends at the first NUL */
    int kind = 0;
    char *def = NULL;
    int rc = frt_chat_template_kind(t, &kind, &def);
    if (rc && rc != FRT_ERR_UNSUPPORTED && rc != FRT_ERR_OUT_OF_MEMORY) abort();
    if (!rc && (kind < FRT_CHAT_CHATML || kind > FRT_CHAT_QWEN35)) abort();
    free(def);
    frt_chat_message m[] = {{"system", " sys "}, {"user", "hi"}, {"assistant", "<think>r</think>a"}, {"user", "x"}};
    frt_chat_options opt = {1, 0, 0};
    char *text = NULL;
    size_t len = 0;
    int rc2 = frt_chat_render(t, m, 4, &opt, &text, &len);
    if (rc2 && (text || (rc2 != FRT_ERR_UNSUPPORTED && rc2 != FRT_ERR_INVALID_ARGUMENT && rc2 != FRT_ERR_OUT_OF_RANGE &&
                         rc2 != FRT_ERR_OUT_OF_MEMORY)))
        abort();
    /* a template may print a NUL ('\0' in a string literal, as in Jinja2): len counts it */
    if (!rc2 && (!text || text[len] != '\0' || strlen(text) > len)) abort();
    free(text);
    free(t);
    return 0;
}
