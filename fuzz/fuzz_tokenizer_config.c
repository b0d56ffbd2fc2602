/*
 * fuzz_tokenizer_config.c - libFuzzer target: tokenizer_config.json through
 * frt_tokenizer_load (text/tokenizer.h), which reads its "chat_template" (a
 * string, or the "default" entry of a list of {name, template}) when the
 * model dir has no chat_template.jinja. A per-process directory holds a
 * real tokenizer.json (fuzz/corpus/tokenizer_json/valid_qwen35.json, found
 * next to this source); the input is its tokenizer_config.json. Whatever
 * the bytes: no crash; a load that succeeds has a template that is NUL-free
 * text or none, and formatting a conversation with it either fails with a
 * status or yields text and ids inside the vocabulary.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_tokenizer_config CORPUS;
 * CI replays fuzz/corpus/tokenizer_config/ through replay_tokenizer_config.
 */
#include "text/chat.h"
#include "frt/tokenizer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64], g_config[128], g_tok[128];

static void cleanup(void)
{
    unlink(g_config);
    unlink(g_tok);
    rmdir(g_dir);
}

static void init(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_tokcfg_%ld", (long)getpid());
    snprintf(g_config, sizeof g_config, "%s/tokenizer_config.json", g_dir);
    snprintf(g_tok, sizeof g_tok, "%s/tokenizer.json", g_dir);
    if (mkdir(g_dir, 0700) && access(g_dir, W_OK)) abort();
    char src[4096];
    const char *here = __FILE__, *slash = strrchr(here, '/');
    snprintf(src, sizeof src, "%.*s/corpus/tokenizer_json/valid_qwen35.json", slash ? (int)(slash - here) : 1,
             slash ? here : ".");
    FILE *in = fopen(src, "rb"), *out = fopen(g_tok, "wb");
    if (!in || !out) {
        fprintf(stderr, "fuzz_tokenizer_config: cannot copy %s to %s\n", src, g_tok);
        abort();
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) abort();
    fclose(in);
    if (fclose(out)) abort();
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dir[0]) init();
    FILE *f = fopen(g_config, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    frt_tokenizer *tok = NULL;
    if (frt_tokenizer_load(g_dir, &tok) != 0) {
        if (tok) abort(); /* *out stays NULL on failure */
        return 0;
    }
    const char *t = frt_tokenizer_chat_template(tok);
    if (t) {
        (void)strlen(t);
        frt_chat_message m[] = {{"system", "sys"}, {"user", "hi"}, {"assistant", "a"}, {"user", "x"}};
        int32_t *ids = NULL;
        size_t n_ids = 0;
        frt_chat_options opt = {1, -1, 0};
        if (frt_chat_encode(tok, m, 4, &opt, &ids, &n_ids) == 0) {
            int V = frt_tokenizer_vocab_size(tok);
            for (size_t i = 0; i < n_ids; i++)
                if (ids[i] < 0 || ids[i] >= V) abort();
        }
        free(ids);
    }
    frt_tokenizer_free(tok);
    return 0;
}
