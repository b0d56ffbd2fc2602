/*
 * test_tokenizer_fixture.h - small tokenizer.json files built in C, for the
 * tokenizer tests and fuzz targets (no file on disk needed).
 *
 * The vocabulary of a fixture: the 256 byte-level characters of GPT-2's
 * alphabet with id = byte value (so without merges the ids of a byte-level
 * word are its bytes), then the result of each merge in merge order (ids
 * 256, 257, ...), then the extra_vocab strings. Merges are written in the
 * byte-level alphabet ("Ġ t" for " t"). The byte alphabet is computed here
 * independently of the library (GPT-2 encoder.py bytes_to_unicode).
 */
#ifndef FRT_TEST_TOKENIZER_FIXTURE_H
#define FRT_TEST_TOKENIZER_FIXTURE_H

#include "text/chat.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct tokfx {
    const char *normalizer;        /* JSON text, NULL = null */
    const char *pre_tokenizer;     /* JSON text, NULL = null */
    const char *post_processor;    /* JSON text, NULL = null */
    const char *decoder;           /* JSON text, NULL = {"type": "ByteLevel"} */
    const char *added_tokens;      /* JSON array text, NULL = [] */
    const char *model_options;     /* JSON object text merged into the model, NULL = none */
    const char *const *merges;     /* "a b" pairs, NULL-terminated list (NULL = none) */
    const char *const *extra_vocab; /* more vocabulary strings, NULL-terminated */
    int legacy;                    /* merges as "a b" strings instead of pairs */
} tokfx;

/* UTF-8 of the byte-level character that stands for byte B; returns length. */
static inline int tokfx_byte_char(int b, char out[4])
{
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    unsigned cp = (unsigned)b;
    if (!printable) {
        unsigned n = 0;
        for (int k = 0; k < b; k++) {
            int p = (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF);
            if (!p) n++;
        }
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* The byte-level form of raw bytes S (e.g. " the" -> "Ġthe"), malloc'd. */
static inline char *tokfx_map(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(2 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) o += tokfx_byte_char((unsigned char)s[i], o);
    *o = '\0';
    return out;
}

static inline json_t *tokfx_parse_or_null(const char *text)
{
    if (!text) return json_null();
    json_error_t err;
    return json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
}

/* The fixture's tokenizer.json text (malloc'd; NULL on a bad fixture). */
static inline char *tokfx_json(const tokfx *f)
{
    json_t *vocab = json_object();
    json_t *merges = json_array();
    int next = 0;
    for (int b = 0; b < 256; b++) {
        char c[5] = {0};
        tokfx_byte_char(b, c);
        json_object_set_new(vocab, c, json_integer(next++));
    }
    for (int i = 0; f->merges && f->merges[i]; i++) {
        const char *m = f->merges[i];
        const char *sp = strchr(m, ' ');
        if (!sp) return NULL;
        char *a = strndup(m, (size_t)(sp - m));
        const char *b = sp + 1;
        size_t la = strlen(a), lb = strlen(b);
        char *ab = malloc(la + lb + 1);
        memcpy(ab, a, la);
        memcpy(ab + la, b, lb + 1);
        if (!json_object_get(vocab, ab)) json_object_set_new(vocab, ab, json_integer(next++));
        if (f->legacy) {
            json_array_append_new(merges, json_string(m));
        } else {
            json_t *pair = json_array();
            json_array_append_new(pair, json_string(a));
            json_array_append_new(pair, json_string(b));
            json_array_append_new(merges, pair);
        }
        free(a);
        free(ab);
    }
    for (int i = 0; f->extra_vocab && f->extra_vocab[i]; i++)
        if (!json_object_get(vocab, f->extra_vocab[i]))
            json_object_set_new(vocab, f->extra_vocab[i], json_integer(next++));

    json_t *model = json_object();
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", json_string(""));
    json_object_set_new(model, "end_of_word_suffix", json_string(""));
    json_object_set_new(model, "fuse_unk", json_false());
    json_object_set_new(model, "byte_fallback", json_false());
    json_object_set_new(model, "ignore_merges", json_false());
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", merges);
    if (f->model_options) { /* may replace anything above */
        json_t *opt = tokfx_parse_or_null(f->model_options);
        if (!json_is_object(opt)) return NULL;
        json_object_update(model, opt);
        json_decref(opt);
    }

    json_t *root = json_object();
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    json_t *added = f->added_tokens ? tokfx_parse_or_null(f->added_tokens) : json_array();
    json_t *norm = tokfx_parse_or_null(f->normalizer);
    json_t *pre = tokfx_parse_or_null(f->pre_tokenizer);
    json_t *post = tokfx_parse_or_null(f->post_processor);
    json_t *dec = f->decoder ? tokfx_parse_or_null(f->decoder)
                             : json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                                         "trim_offsets", 1, "use_regex", 1);
    if (!added || !norm || !pre || !post || !dec) return NULL;
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "normalizer", norm);
    json_object_set_new(root, "pre_tokenizer", pre);
    json_object_set_new(root, "post_processor", post);
    json_object_set_new(root, "decoder", dec);
    json_object_set_new(root, "model", model);
    char *text = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(root);
    return text;
}

/* Pre-tokenizers the tests use. */
#define TOKFX_QWEN35_REGEX                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{L}\\\\p{M}]+|\\\\p{N}| "             \
    "?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define TOKFX_QWEN35_PRE                                                                            \
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" \
    TOKFX_QWEN35_REGEX "\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","   \
    "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]}"
#define TOKFX_SPECIALS                                                                              \
    "[{\"id\":0,\"content\":\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false," \
    "\"normalized\":false,\"special\":true},"                                                        \
    "{\"id\":0,\"content\":\"<|im_start|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"  \
    "\"normalized\":false,\"special\":true},"                                                        \
    "{\"id\":0,\"content\":\"<|im_end|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"    \
    "\"normalized\":false,\"special\":true}]"

/* The messages and options of one chat case of chat_golden.json / golden.json
 * (conversation conv; at most 16 messages). Returns the message count. */
static inline int chat_case_messages(const json_t *c, const json_t *conv, frt_chat_message msgs[16],
                                     frt_chat_options *opt)
{
    const json_t *think = json_object_get(c, "enable_thinking");
    opt->add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt"));
    opt->enable_thinking = json_is_null(think) ? -1 : json_is_true(think);
    int n = (int)json_array_size(conv);
    for (int k = 0; k < n && k < 16; k++) {
        msgs[k].role = json_string_value(json_object_get(json_array_get(conv, (size_t)k), "role"));
        msgs[k].content = json_string_value(json_object_get(json_array_get(conv, (size_t)k), "content"));
    }
    return n;
}

#endif /* FRT_TEST_TOKENIZER_FIXTURE_H */
