/*
 * fuzz_chat_output.c - libFuzzer target: serving/chat_output.c (generated
 * chat text -> reasoning, content, tool calls). The first byte picks the
 * flags (tools, reasoning opened by the prompt) and where the rest is cut
 * into two stream pieces. Checks: the split does not depend on the cut;
 * no text is invented (the reasoning and content are at most the input's
 * length); every tool call has a name, an id and arguments.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_chat_output CORPUS;
 * CI replays fuzz/corpus/chat_output/ through replay_chat_output.
 */
#include "serving/chat_output.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct acc {
    size_t content, reasoning;
    uint64_t hash;
    int calls;
} acc;

static uint64_t fold(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static int take(void *user, const frt_chat_piece *pc)
{
    acc *a = user;
    a->hash = fold(a->hash, (const char *)&pc->part, sizeof pc->part);
    if (pc->part == FRT_CHAT_PART_TOOL_CALL) {
        if (!pc->name || !*pc->name || strncmp(pc->id, "call_", 5) || !pc->arguments) abort();
        a->hash = fold(a->hash, pc->name, strlen(pc->name));
        a->hash = fold(a->hash, pc->arguments, strlen(pc->arguments));
        a->calls++;
        return 0;
    }
    if (pc->part == FRT_CHAT_PART_CONTENT) a->content += pc->len;
    else a->reasoning += pc->len;
    a->hash = fold(a->hash, pc->text, pc->len);
    return 0;
}

/* Parses text with the flags, cut at `cut`; hashes the pieces' concatenation. */
static acc run(const char *text, size_t n, int tools, int open, size_t cut)
{
    acc a = {0, 0, 0xcbf29ce484222325ull, 0};
    frt_chat_output p;
    frt_chat_output_init(&p, tools, open, 1, take, &a);
    if (frt_chat_output_feed(&p, text, cut) || frt_chat_output_feed(&p, text + cut, n - cut) ||
        frt_chat_output_finish(&p))
        abort();
    frt_chat_output_clear(&p);
    return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int tools = data[0] & 1, open = (data[0] >> 1) & 1;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    acc whole = run(text, n, tools, open, 0);
    acc cut = run(text, n, tools, open, n ? (data[0] >> 2) % (n + 1) : 0);
    if (whole.content + whole.reasoning > n) abort();
    /* the pieces may be cut differently; their concatenation per part may not */
    if (whole.content != cut.content || whole.reasoning != cut.reasoning || whole.calls != cut.calls) abort();
    return 0;
}
