/* test_tokenizer.c - the tokenizer machinery on hand-made tokenizer.json
 * fixtures (tests/test_tokenizer_fixture.h): BPE merge order, pre-tokenizer
 * behaviors, ByteLevel, NFC, added tokens and their flags, post-processor,
 * decoding (lossy UTF-8, streaming), loading from a directory, and every
 * refusal path. The Hugging Face golden ids are in test_tokenizer_golden.c. */
#include "frt_test.h"
#include "frt/tokenizer.h"
#include "test_tokenizer_fixture.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

static frt_tokenizer *load_fx(const tokfx *f)
{
    char *json = tokfx_json(f);
    CHECK(json != NULL);
    if (!json) return NULL;
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load_json(json, strlen(json), &tok));
    free(json);
    return tok;
}

static int load_fx_status(const tokfx *f)
{
    char *json = tokfx_json(f);
    if (!json) return -1000;
    frt_tokenizer *tok = NULL;
    int rc = frt_tokenizer_load_json(json, strlen(json), &tok);
    free(json);
    if (rc == 0) frt_tokenizer_free(tok);
    if (rc && tok) return -1001; /* *out must stay NULL on failure */
    return rc;
}

/* Encodes TEXT (LEN bytes, -1 = strlen) and compares with EXP[0..N). */
static void check_ids_n(const frt_tokenizer *tok, const char *text, long len, int special, const int32_t *exp,
                        size_t n, int line)
{
    int32_t *ids = NULL;
    size_t got = 0;
    size_t l = len < 0 ? strlen(text) : (size_t)len;
    int rc = frt_tokenizer_encode_ex(tok, text, l, special, &ids, &got);
    int same = rc == 0 && got == n && (n == 0 || !memcmp(ids, exp, n * sizeof *ids));
    CHECK_MSG(same, "line %d: encode(\"%s\") rc %d (%s), %zu ids, want %zu", line, text, rc, frt_last_error(),
              got, n);
    if (!same) {
        fprintf(stderr, "  got:");
        for (size_t i = 0; i < got; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  want:");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", exp[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), (sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define CHECK_IDS(tok, text, ...) check_ids_n(tok, text, -1, 0, IDS(__VA_ARGS__), __LINE__)
#define CHECK_IDS_SPECIAL(tok, text, ...) check_ids_n(tok, text, -1, 1, IDS(__VA_ARGS__), __LINE__)
#define CHECK_NO_IDS(tok, text) check_ids_n(tok, text, -1, 0, NULL, 0, __LINE__)

/* The id of a vocabulary string given in raw bytes (" t" -> "Ġt"). */
static int32_t vid(const frt_tokenizer *tok, const char *raw)
{
    char *m = tokfx_map(raw);
    int32_t id = frt_tokenizer_token_id(tok, m);
    free(m);
    CHECK_MSG(id >= 0, "no token for \"%s\"", raw);
    return id;
}

static char *decode(const frt_tokenizer *tok, const int32_t *ids, size_t n, size_t *len)
{
    char *text = NULL;
    CHECK_OK(frt_tokenizer_decode(tok, ids, n, &text, len));
    return text;
}

/* ---- BPE ------------------------------------------------------------------------ */
static void test_bpe_merges(void)
{
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "a b", "b c", NULL};
    tokfx f = {.merges = merges, .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "hello", vid(tok, "hello"));
    CHECK_IDS(tok, "hell", vid(tok, "hell"));
    CHECK_IDS(tok, "xhelloy", 'x', vid(tok, "hello"), 'y');
    /* "a b" ranks before "b c": abc -> ab c */
    CHECK_IDS(tok, "abc", vid(tok, "ab"), 'c');
    CHECK_NO_IDS(tok, "");
    frt_tokenizer_free(tok);

    /* the other order: bc first */
    static const char *const merges2[] = {"b c", "a b", NULL};
    tokfx f2 = {.merges = merges2, .pre_tokenizer = f.pre_tokenizer};
    tok = load_fx(&f2);
    if (!tok) return;
    CHECK_IDS(tok, "abc", 'a', vid(tok, "bc"));
    frt_tokenizer_free(tok);
}

static void test_bpe_ties_and_long_runs(void)
{
    static const char *const merges[] = {"a a", "aa aa", NULL};
    tokfx f = {.merges = merges, .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    int32_t aa = vid(tok, "aa"), aaaa = vid(tok, "aaaa");
    /* equal ranks merge left to right (min-heap on (rank, position)) */
    CHECK_IDS(tok, "aaa", aa, 'a');
    CHECK_IDS(tok, "aaaaa", aaaa, 'a');
    CHECK_IDS(tok, "aaaaaaa", aaaa, aa, 'a');
    /* a long run of one character: O(n log n), exact result */
    size_t n = 200001;
    char *run = malloc(n + 1);
    memset(run, 'a', n);
    run[n] = '\0';
    int32_t *ids = NULL;
    size_t got = 0;
    CHECK_OK(frt_tokenizer_encode(tok, run, n, &ids, &got));
    CHECK(got == n / 4 + 1);
    int ok = got == n / 4 + 1;
    for (size_t i = 0; ok && i + 1 < got; i++) ok = ids[i] == aaaa;
    CHECK(ok && ids[got - 1] == 'a');
    free(ids);
    free(run);
    frt_tokenizer_free(tok);
}

static void test_bpe_ignore_merges_and_unk(void)
{
    static const char *const merges[] = {"a b", NULL};
    static const char *const extra[] = {"abc", NULL};
    tokfx f = {.merges = merges, .extra_vocab = extra,
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "abc", vid(tok, "ab"), 'c'); /* "abc" is in the vocabulary but no merge makes it */
    frt_tokenizer_free(tok);
    f.model_options = "{\"ignore_merges\": true}";
    tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "abc", vid(tok, "abc"));
    CHECK_IDS(tok, "abcd", vid(tok, "ab"), 'c', 'd');
    frt_tokenizer_free(tok);

    /* no ByteLevel: characters are looked up as they are; unknown ones go to
     * unk_token (fused or not), or are dropped without one */
    static const char *const m2[] = {"a b", NULL};
    static const char *const ex2[] = {"<unk>", NULL};
    tokfx g = {.merges = m2, .extra_vocab = ex2, .model_options = "{\"unk_token\": \"<unk>\"}"};
    tok = load_fx(&g);
    if (!tok) return;
    int32_t unk = frt_tokenizer_token_id(tok, "<unk>");
    CHECK(unk > 0);
    CHECK_IDS(tok, "ab\xe6\x97\xa5\xe6\x97\xa5" "a", vid(tok, "ab"), unk, unk, 'a');
    frt_tokenizer_free(tok);
    g.model_options = "{\"unk_token\": \"<unk>\", \"fuse_unk\": true}";
    tok = load_fx(&g);
    if (!tok) return;
    CHECK_IDS(tok, "ab\xe6\x97\xa5\xe6\x97\xa5" "a", vid(tok, "ab"), unk, 'a');
    frt_tokenizer_free(tok);
    g.model_options = NULL;
    tok = load_fx(&g);
    if (!tok) return;
    CHECK_IDS(tok, "ab\xe6\x97\xa5\xe6\x97\xa5" "a", vid(tok, "ab"), 'a');
    frt_tokenizer_free(tok);
    g.model_options = "{\"unk_token\": \"<missing>\"}";
    tok = load_fx(&g);
    if (!tok) return;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_STATUS(frt_tokenizer_encode(tok, "x\xe6\x97\xa5", 4, &ids, &n), FRT_ERR_FORMAT);
    CHECK(ids == NULL && n == 0);
    CHECK_IDS(tok, "ab", vid(tok, "ab")); /* unk only matters when needed */
    frt_tokenizer_free(tok);
}

static void test_merges_legacy_form(void)
{
    static const char *const merges[] = {"\xc4\xa0 t", "\xc4\xa0t h", NULL}; /* "Ġ t", "Ġt h" */
    tokfx f = {.merges = merges, .legacy = 1,
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "a thx", 'a', vid(tok, " th"), 'x');
    frt_tokenizer_free(tok);
}

/* ---- pre-tokenizers ------------------------------------------------------------------ */
static void test_split_behaviors(void)
{
    /* merges that cross split boundaries show where the pieces are */
    static const char *const merges[] = {"a \xc4\xa0", "\xc4\xa0 b", "\xc4\xa0 \xc4\xa0", NULL};
    char pre[512];
    const char *fmt = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"%s\":\"%s\"},"
                      "\"behavior\":\"%s\",\"invert\":%s},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                      "\"use_regex\":false}]}";
    tokfx f = {.merges = merges, .pre_tokenizer = pre};
    struct {
        const char *kind, *pat, *behavior, *invert, *text;
        int32_t exp[8];
        size_t n;
    } cases[] = {
        {"Regex", " ", "Isolated", "false", "a b", {'a', ' ', 'b'}, 3},
        {"Regex", " ", "Removed", "false", "a b", {'a', 'b'}, 2},
        {"Regex", " ", "MergedWithPrevious", "false", "a b", {-1 /* a_ */, 'b'}, 2},
        {"Regex", " ", "MergedWithNext", "false", "a b", {'a', -2 /* _b */}, 2},
        {"Regex", " ", "Contiguous", "false", "a  b", {'a', -3 /* __ */, 'b'}, 3},
        {"Regex", " ", "Isolated", "false", "a  b", {'a', ' ', ' ', 'b'}, 4},
        {"String", " ", "Isolated", "false", "a  b", {'a', ' ', ' ', 'b'}, 4},
        /* invert: the pattern marks the kept words, the gaps become the delimiters */
        {"Regex", "[ab]", "Removed", "true", "a b", {'a', 'b'}, 2},
        {"Regex", "[ab]", "MergedWithNext", "true", "a b", {'a', -2}, 2},
        {"Regex", "[ab]", "MergedWithPrevious", "true", "a b", {-1, 'b'}, 2},
        /* a pattern that can match empty (the onig crate's iteration rules) */
        {"Regex", "x*", "Isolated", "false", "a b", {'a', ' ', 'b'}, 3},
        {"Regex", "x*", "Removed", "false", "a b", {'a', ' ', 'b'}, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(pre, sizeof pre, fmt, cases[i].kind, cases[i].pat, cases[i].behavior, cases[i].invert);
        frt_tokenizer *tok = load_fx(&f);
        if (!tok) continue;
        int32_t exp[8];
        for (size_t k = 0; k < cases[i].n; k++) {
            int32_t e = cases[i].exp[k];
            exp[k] = e == -1 ? vid(tok, "a ") : e == -2 ? vid(tok, " b") : e == -3 ? vid(tok, "  ") : e;
        }
        check_ids_n(tok, cases[i].text, -1, 0, exp, cases[i].n, (int)(1000 + i));
        frt_tokenizer_free(tok);
    }
}

static void test_qwen35_pretokenizer(void)
{
    static const char *const merges[] = {"\xc4\xa0 \xc4\xa0", "\xc4\xa0\xc4\xa0 \xc4\xa0\xc4\xa0",
                                         "' s", "Ċ Ċ", NULL};
    tokfx f = {.merges = merges, .pre_tokenizer = TOKFX_QWEN35_PRE, .added_tokens = TOKFX_SPECIALS,
               .normalizer = "{\"type\":\"NFC\"}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    /* \s+(?!\S): five spaces before a word split as 4 + " x" */
    CHECK_IDS(tok, "a     x", 'a', vid(tok, "    "), ' ', 'x');
    /* (?i:'s) and \s*[\r\n]+ */
    CHECK_IDS(tok, "it's\n\n", 'i', 't', vid(tok, "'s"), vid(tok, "\n\n"));
    CHECK_IDS(tok, "IT'S", 'I', 'T', '\'', 'S');
    /* digits one by one */
    CHECK_IDS(tok, "12", '1', '2');
    /* a mark continues a letter run (\p{M} in the Qwen3.5 regex): no split */
    CHECK_IDS(tok, "a\xe0\xa4\xbf", 'a', 0xE0, 0xA4, 0xBF);
    /* U+180E is not white space for Oniguruma: it is [^\s\p{L}\p{M}\p{N}] */
    CHECK_IDS(tok, "\xe1\xa0\x8e" " ", 0xE1, 0xA0, 0x8E, ' ');
    /* specials are split out before everything, and only whole */
    int32_t im_start = frt_tokenizer_token_id(tok, "<|im_start|>"), im_end = frt_tokenizer_token_id(tok, "<|im_end|>");
    CHECK(im_start == 257 || im_start == 256 || im_start > 255);
    CHECK_IDS(tok, "<|im_start|>a<|im_end|>", im_start, 'a', im_end);
    CHECK_IDS(tok, "<|im_end", '<', '|', 'i', 'm', '_', 'e', 'n', 'd');
    frt_tokenizer_free(tok);
}

static void test_byte_level_prefix_space(void)
{
    static const char *const merges[] = {"\xc4\xa0 h", "\xc4\xa0h i", NULL};
    tokfx f = {.merges = merges, .added_tokens = TOKFX_SPECIALS,
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    int32_t hi = vid(tok, " hi"), eot = frt_tokenizer_token_id(tok, "<|endoftext|>");
    CHECK_IDS(tok, "hi", hi);
    CHECK_IDS(tok, " hi", hi);
    /* every piece between added tokens gets its own prefix space */
    CHECK_IDS(tok, "hi<|endoftext|>hi", hi, eot, hi);
    frt_tokenizer_free(tok);
}

/* ---- normalizer --------------------------------------------------------------------- */
static void test_nfc(void)
{
    tokfx f = {.normalizer = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]}",
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "e\xcc\x81", 0xC3, 0xA9);        /* e + U+0301 -> U+00E9 */
    CHECK_IDS(tok, "\xe2\x84\xab", 0xC3, 0x85);     /* U+212B ANGSTROM SIGN -> U+00C5 */
    CHECK_IDS(tok, "a\xcc\xa3\xcc\x87", 0xE1, 0xBA, 0xA1, 0xCC, 0x87); /* reordered and composed */
    frt_tokenizer_free(tok);
    f.normalizer = NULL;
    tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "e\xcc\x81", 'e', 0xCC, 0x81);
    frt_tokenizer_free(tok);
    f.normalizer = "{\"type\":\"NFKC\"}";
    tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "\xef\xac\x81", 'f', 'i'); /* U+FB01 ligature fi */
    frt_tokenizer_free(tok);
}

/* decode(encode(x)) == NFC(x) on random strings of a mixed alphabet */
static void test_round_trip_nfc(void)
{
    static const char *const merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "\xc3\x83 \xc2\xa9", NULL};
    tokfx f = {.merges = merges, .pre_tokenizer = TOKFX_QWEN35_PRE, .added_tokens = TOKFX_SPECIALS,
               .normalizer = "{\"type\":\"NFC\"}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    static const char *const pool[] = {"a", "Z", "7", " ", "  ", "\t", "\n", "\r\n", "'s", "the", " the",
                                       "e\xcc\x81", "\xc3\xa9", "\xcc\x81", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
                                       "\xc2\xa0", "\xe3\x80\x80", "\xe2\x84\xab", "\xd9\xa3", "<", "|>",
                                       "\xe0\xa4\xb9\xe0\xa4\xbf", "\x00", "\xc4\xa0"};
    frt_test_seed(7);
    int bad = 0;
    for (int iter = 0; iter < 400; iter++) {
        char text[512];
        size_t n = 0;
        int k = (int)(frt_test_u64() % 30);
        for (int j = 0; j < k; j++) {
            const char *p = pool[frt_test_u64() % (sizeof pool / sizeof pool[0])];
            size_t l = p[0] ? strlen(p) : 1; /* the "\x00" entry is one NUL byte */
            memcpy(text + n, p, l);
            n += l;
        }
        int32_t *ids = NULL;
        size_t nid = 0;
        if (frt_tokenizer_encode(tok, text, n, &ids, &nid)) {
            bad++;
            continue;
        }
        size_t len = 0;
        char *back = decode(tok, ids, nid, &len);
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t nl = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)n, &nfc,
                                           UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (nl < 0 || back == NULL || (size_t)nl != len || memcmp(back, nfc, len)) bad++;
        free(nfc);
        free(back);
        free(ids);
    }
    CHECK_MSG(bad == 0, "%d of 400 random strings do not round-trip to NFC", bad);
    frt_tokenizer_free(tok);
}

/* ---- added tokens --------------------------------------------------------------------- */
static void test_added_token_flags(void)
{
    const char *added =
        "[{\"id\":0,\"content\":\"<mask>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":false,\"normalized\":false,\"special\":true},"
        "{\"id\":0,\"content\":\"[SEP]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":true,\"normalized\":false,\"special\":true},"
        "{\"id\":0,\"content\":\"xyzzy\",\"single_word\":true,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false},"
        "{\"id\":0,\"content\":\"e\\u0301t\\u00e9\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":false},"
        "{\"id\":0,\"content\":\"ab\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false},"
        "{\"id\":0,\"content\":\"abc\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false}]";
    tokfx f = {.added_tokens = added, .normalizer = "{\"type\":\"NFC\"}",
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    /* ids after the 256-entry model vocabulary, in file order */
    int32_t mask = frt_tokenizer_token_id(tok, "<mask>"), sep = frt_tokenizer_token_id(tok, "[SEP]");
    int32_t xyz = frt_tokenizer_token_id(tok, "xyzzy"), ete = frt_tokenizer_token_id(tok, "e\xcc\x81t\xc3\xa9");
    int32_t ab = frt_tokenizer_token_id(tok, "ab"), abc = frt_tokenizer_token_id(tok, "abc");
    CHECK(mask == 256 && sep == 257 && xyz == 258 && ete == 259 && ab == 260 && abc == 261);
    CHECK(frt_tokenizer_vocab_size(tok) == 262);
    CHECK(frt_tokenizer_is_special(tok, mask) && !frt_tokenizer_is_special(tok, xyz) && !frt_tokenizer_is_special(tok, 'a'));
    /* lstrip takes the spaces on its left */
    CHECK_IDS(tok, "a  <mask> b", 'a', mask, ' ', 'b');
    /* rstrip takes the spaces (and newlines) on its right */
    CHECK_IDS(tok, "a [SEP] \n b", 'a', ' ', sep, 'b');
    /* single_word: only between non-word characters */
    CHECK_IDS(tok, "xyzzy", xyz);
    CHECK_IDS(tok, "a xyzzy.", 'a', ' ', xyz, '.');
    CHECK_IDS(tok, "axyzzy", 'a', 'x', 'y', 'z', 'z', 'y');
    CHECK_IDS(tok, "xyzzy_", 'x', 'y', 'z', 'z', 'y', '_');
    CHECK_IDS(tok, "\xc3\xa9xyzzy", 0xC3, 0xA9, 'x', 'y', 'z', 'z', 'y');
    /* normalized: matches the NFC form, composed or not in the input */
    CHECK_IDS(tok, "\xc3\xa9t\xc3\xa9", ete);
    CHECK_IDS(tok, "e\xcc\x81te\xcc\x81", ete);
    /* leftmost-longest */
    CHECK_IDS(tok, "abcab", abc, ab);
    /* decode starts from the normalized form "\u00e9t\u00e9"; all of its
     * characters are in the byte alphabet (U+00E9 stands for byte 0xE9), so
     * the ByteLevel decoder turns it into bytes E9 74 E9: invalid UTF-8, as
     * the Rust decoder gives it */
    size_t len;
    char *text = decode(tok, &ete, 1, &len);
    CHECK(text && len == 7 && !memcmp(text, "\xef\xbf\xbdt\xef\xbf\xbd", 7));
    free(text);
    /* its own bytes, before the UTF-8 repair */
    const char *raw = NULL;
    size_t raw_len = 0;
    CHECK_OK(frt_tokenizer_token_bytes(tok, ete, &raw, &raw_len));
    CHECK(raw_len == 3 && !memcmp(raw, "\xe9t\xe9", 3));
    CHECK_OK(frt_tokenizer_token_bytes(tok, 0xC3, &raw, &raw_len)); /* a byte token: one byte */
    CHECK(raw_len == 1 && (unsigned char)raw[0] == 0xC3);
    CHECK_OK(frt_tokenizer_token_bytes(tok, mask, &raw, &raw_len));
    CHECK(raw_len == 6 && !memcmp(raw, "<mask>", 6));
    CHECK_STATUS(frt_tokenizer_token_bytes(tok, 262, &raw, &raw_len), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_tokenizer_token_bytes(tok, -1, &raw, &raw_len), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_tokenizer_token_bytes(NULL, 1, &raw, &raw_len), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_tokenizer_token_str(tok, mask) && !strcmp(frt_tokenizer_token_str(tok, mask), "<mask>"));
    CHECK(frt_tokenizer_token_str(tok, 262) == NULL && frt_tokenizer_token_str(tok, -1) == NULL);
    CHECK(frt_tokenizer_token_id(tok, "nope") == -1 && frt_tokenizer_token_id(NULL, "a") == -1);
    frt_tokenizer_free(tok);
}

static void test_added_ids_from_vocab(void)
{
    /* an added token already in the model vocabulary keeps the model's id;
     * the "id" field of the file is not used (tokenizers ignores it too) */
    static const char *const extra[] = {"<|im_end|>", NULL};
    tokfx f = {.extra_vocab = extra, .added_tokens = TOKFX_SPECIALS};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK(frt_tokenizer_token_id(tok, "<|im_end|>") == 256);
    CHECK(frt_tokenizer_token_id(tok, "<|endoftext|>") == 257);
    CHECK(frt_tokenizer_token_id(tok, "<|im_start|>") == 258);
    CHECK(frt_tokenizer_vocab_size(tok) == 259);
    frt_tokenizer_free(tok);
}

/* ---- post-processor -------------------------------------------------------------------- */
static void test_template_processing(void)
{
    tokfx f = {.added_tokens = TOKFX_SPECIALS,
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}",
               .post_processor =
                   "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                   "\"trim_offsets\":false,\"use_regex\":true},{\"type\":\"TemplateProcessing\",\"single\":["
                   "{\"SpecialToken\":{\"id\":\"<|endoftext|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\","
                   "\"type_id\":0}},{\"SpecialToken\":{\"id\":\"<|im_end|>\",\"type_id\":0}}],\"pair\":[],"
                   "\"special_tokens\":{\"<|endoftext|>\":{\"id\":\"<|endoftext|>\",\"ids\":[256],\"tokens\":"
                   "[\"<|endoftext|>\"]},\"<|im_end|>\":{\"id\":\"<|im_end|>\",\"ids\":[258],\"tokens\":"
                   "[\"<|im_end|>\"]}}}]}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK_IDS(tok, "ab", 'a', 'b');
    CHECK_IDS_SPECIAL(tok, "ab", 256, 'a', 'b', 258);
    CHECK_IDS_SPECIAL(tok, "", 256, 258);
    frt_tokenizer_free(tok);
}

/* ---- decode ---------------------------------------------------------------------------------- */
static void check_decode(const frt_tokenizer *tok, const int32_t *ids, size_t n, const char *exp, size_t exp_len, int line)
{
    size_t len = 0;
    char *text = NULL;
    int rc = frt_tokenizer_decode(tok, ids, n, &text, &len);
    CHECK_MSG(rc == 0 && len == exp_len && !memcmp(text, exp, len) && text[len] == '\0', "line %d: decode", line);
    /* the stream gives the same bytes, never a partial character */
    frt_detok_stream *s = NULL;
    CHECK_OK(frt_detok_stream_create(tok, &s));
    char acc[256];
    size_t an = 0;
    int partial = 0;
    for (size_t i = 0; s && i <= n; i++) {
        const char *piece;
        size_t pl;
        if (i < n)
            CHECK_OK(frt_detok_stream_push(s, ids[i], &piece, &pl));
        else
            CHECK_OK(frt_detok_stream_flush(s, &piece, &pl));
        if (!piece) continue;
        if (pl && !utf8proc_iterate((const utf8proc_uint8_t *)piece, (utf8proc_ssize_t)pl, &(utf8proc_int32_t){0})) partial = 1;
        for (size_t k = 0; k < pl;) { /* each piece is complete UTF-8 */
            utf8proc_int32_t cp;
            utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)piece + k, (utf8proc_ssize_t)(pl - k), &cp);
            if (r <= 0) {
                partial = 1;
                break;
            }
            k += (size_t)r;
        }
        if (an + pl <= sizeof acc) memcpy(acc + an, piece, pl);
        an += pl;
    }
    CHECK_MSG(!partial && an == exp_len && !memcmp(acc, exp, an), "line %d: stream decode", line);
    frt_detok_stream_free(s);
    free(text);
}
#define CHECK_DECODE(tok, exp, ...) check_decode(tok, IDS(__VA_ARGS__), exp, sizeof(exp) - 1, __LINE__)

static void test_decode(void)
{
    tokfx f = {.added_tokens = TOKFX_SPECIALS,
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    CHECK_DECODE(tok, "\xf0\x9f\x98\x80" "A", 0xF0, 0x9F, 0x98, 0x80, 'A');
    CHECK_DECODE(tok, "<|im_start|>x", 257, 'x');
    /* lossy: each maximal invalid subpart is one U+FFFD (Rust from_utf8_lossy) */
    CHECK_DECODE(tok, "\xef\xbf\xbd", 0xC3);
    CHECK_DECODE(tok, "\xef\xbf\xbd" "A", 0xF0, 0x9F, 0x98, 'A');
    CHECK_DECODE(tok, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 0xED, 0xA0, 0x80); /* a surrogate */
    CHECK_DECODE(tok, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 0xFF, 0xC0, 0x80);
    CHECK_DECODE(tok, "\xef\xbf\xbd" "<|im_end|>", 0xE6, 0x97, 258);
    CHECK_DECODE(tok, "\xef\xbf\xbd\xc3\xa9", 0xE6, 0xC3, 0xA9);
    /* an empty id list */
    size_t len = 7;
    char *text = NULL;
    CHECK_OK(frt_tokenizer_decode(tok, NULL, 0, &text, &len));
    CHECK(text && len == 0 && text[0] == '\0');
    free(text);
    /* out of range */
    CHECK_STATUS(frt_tokenizer_decode(tok, IDS(1, 259), &text, &len), FRT_ERR_OUT_OF_RANGE);
    CHECK(text == NULL);
    CHECK_STATUS(frt_tokenizer_decode(tok, IDS(-1), &text, &len), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_tokenizer_decode(NULL, IDS(1), &text, &len), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_decode(tok, NULL, 1, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    /* the stream: bytes held until the character completes; errors keep state */
    frt_detok_stream *s = NULL;
    CHECK_OK(frt_detok_stream_create(tok, &s));
    const char *p;
    size_t pl;
    CHECK_OK(frt_detok_stream_push(s, 0xE6, &p, &pl));
    CHECK(pl == 0 && p && p[0] == '\0');
    CHECK_OK(frt_detok_stream_push(s, 0x97, &p, &pl));
    CHECK(pl == 0);
    CHECK_STATUS(frt_detok_stream_push(s, 5000, &p, &pl), FRT_ERR_OUT_OF_RANGE);
    CHECK_OK(frt_detok_stream_push(s, 0xA5, &p, &pl));
    CHECK(pl == 3 && !memcmp(p, "\xe6\x97\xa5", 3));
    CHECK_OK(frt_detok_stream_push(s, 0xE6, &p, &pl));
    frt_detok_stream_reset(s);
    CHECK_OK(frt_detok_stream_flush(s, &p, &pl));
    CHECK(pl == 0);
    CHECK_STATUS(frt_detok_stream_push(NULL, 1, &p, &pl), FRT_ERR_INVALID_ARGUMENT);
    frt_detok_stream_free(s);
    CHECK_STATUS(frt_detok_stream_create(NULL, &s), FRT_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    frt_detok_stream_free(NULL);
    frt_tokenizer_free(tok);
}

/* ---- bad input ------------------------------------------------------------------------------- */
static void test_encode_bad_input(void)
{
    tokfx f = {.pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    int32_t *ids = (int32_t *)1;
    size_t n = 9;
    CHECK_STATUS(frt_tokenizer_encode(tok, "\xc3\x28", 2, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK(ids == NULL && n == 0);
    CHECK_STATUS(frt_tokenizer_encode(tok, "\xed\xa0\x80", 3, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_encode(tok, "\xf4\x90\x80\x80", 4, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_encode(tok, "\xc0\x80", 2, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_encode(NULL, "a", 1, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_encode(tok, NULL, 1, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_encode(tok, "a", 1, NULL, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_tokenizer_encode(tok, NULL, 0, &ids, &n));
    CHECK(ids == NULL && n == 0);
    /* an embedded NUL is a character like any other */
    CHECK_OK(frt_tokenizer_encode(tok, "a\0b", 3, &ids, &n));
    CHECK(n == 3 && ids[0] == 'a' && ids[1] == 0 && ids[2] == 'b');
    free(ids);
    frt_tokenizer_free(tok);
    frt_tokenizer_free(NULL);
    CHECK(frt_tokenizer_vocab_size(NULL) == 0);
}

static void test_refusals(void)
{
    frt_tokenizer *tok = (frt_tokenizer *)1;
    CHECK_STATUS(frt_tokenizer_load_json("{", 1, &tok), FRT_ERR_FORMAT);
    CHECK(tok == NULL);
    CHECK_STATUS(frt_tokenizer_load_json("[1]", 3, &tok), FRT_ERR_FORMAT);
    CHECK_STATUS(frt_tokenizer_load_json("{}", 2, &tok), FRT_ERR_FORMAT);
    CHECK_STATUS(frt_tokenizer_load_json(NULL, 0, &tok), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_load_json("{}", 2, NULL), FRT_ERR_INVALID_ARGUMENT);

    const char *bl = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}";
    static const char *const bad_merge[] = {"a q", "q z", NULL};
    static const char *const ok_merge[] = {"a b", NULL};
    struct {
        tokfx f;
        int status;
        const char *msg; /* a piece of the message that names the problem */
    } cases[] = {
        {{.pre_tokenizer = bl, .model_options = "{\"type\":\"WordPiece\"}"}, FRT_ERR_UNSUPPORTED, "WordPiece"},
        {{.pre_tokenizer = bl, .model_options = "{\"type\":\"Unigram\"}"}, FRT_ERR_UNSUPPORTED, "Unigram"},
        {{.pre_tokenizer = bl, .model_options = "{\"dropout\":0.1}"}, FRT_ERR_UNSUPPORTED, "dropout"},
        {{.pre_tokenizer = bl, .model_options = "{\"dropout\":2}"}, FRT_ERR_FORMAT, "dropout"},
        {{.pre_tokenizer = bl, .model_options = "{\"byte_fallback\":true}"}, FRT_ERR_UNSUPPORTED, "byte_fallback"},
        {{.pre_tokenizer = bl, .model_options = "{\"continuing_subword_prefix\":\"##\"}"}, FRT_ERR_UNSUPPORTED, "continuing_subword_prefix"},
        {{.pre_tokenizer = bl, .model_options = "{\"end_of_word_suffix\":\"</w>\"}"}, FRT_ERR_UNSUPPORTED, "end_of_word_suffix"},
        {{.pre_tokenizer = bl, .model_options = "{\"vocab\":{\"a\":-1}}"}, FRT_ERR_FORMAT, "vocab"},
        {{.pre_tokenizer = bl, .model_options = "{\"vocab\":{\"a\":0,\"b\":0}}"}, FRT_ERR_FORMAT, "vocab id 0"},
        {{.pre_tokenizer = bl, .model_options = "{\"vocab\":{\"a\":16777216}}"}, FRT_ERR_FORMAT, "vocab"},
        {{.pre_tokenizer = bl, .model_options = "{\"merges\":[\"a b c\"]}"}, FRT_ERR_FORMAT, "merges invalid"},
        {{.pre_tokenizer = bl, .merges = ok_merge, .model_options = "{\"merges\":[[\"a\",\"b\"],\"a b\"]}"}, FRT_ERR_FORMAT, "merge 1"},
        {{.pre_tokenizer = bl, .model_options = "{\"merges\":7}"}, FRT_ERR_FORMAT, "merges"},
        {{.pre_tokenizer = bl, .merges = bad_merge, .model_options = "{\"merges\":[\"a q\", \"q qq\"]}"}, FRT_ERR_FORMAT, "merge 1: token `qq` out of vocabulary"},
        {{.pre_tokenizer = bl, .merges = ok_merge, .model_options = "{\"merges\":[[\"a\",\"zz\"]]}"}, FRT_ERR_FORMAT, "zz"},
        {{.pre_tokenizer = bl, .normalizer = "{\"type\":\"Lowercase\"}"}, FRT_ERR_UNSUPPORTED, "Lowercase"},
        {{.pre_tokenizer = bl, .normalizer = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Strip\"}]}"}, FRT_ERR_UNSUPPORTED, "Strip"},
        {{.pre_tokenizer = "{\"type\":\"Whitespace\"}"}, FRT_ERR_UNSUPPORTED, "Whitespace"},
        {{.pre_tokenizer = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\",\"invert\":false}]}"}, FRT_ERR_UNSUPPORTED, "after ByteLevel"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_UNSUPPORTED, "\\w"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"^a\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_UNSUPPORTED, "anchor"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?m:a)\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_UNSUPPORTED, "inline option"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[[:alpha:]]\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_UNSUPPORTED, "POSIX"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\h\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_UNSUPPORTED, "\\h"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_FORMAT, "bad regex"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Sideways\",\"invert\":false}"}, FRT_ERR_UNSUPPORTED, "Sideways"},
        {{.pre_tokenizer = "{\"type\":\"Split\",\"pattern\":{\"Glob\":\"a\"},\"behavior\":\"Isolated\",\"invert\":false}"}, FRT_ERR_FORMAT, "pattern"},
        {{.pre_tokenizer = bl, .decoder = "null"}, FRT_ERR_UNSUPPORTED, "decoder"},
        {{.pre_tokenizer = bl, .decoder = "{\"type\":\"WordPiece\"}"}, FRT_ERR_UNSUPPORTED, "WordPiece"},
        {{.pre_tokenizer = bl, .post_processor = "{\"type\":\"RobertaProcessing\"}"}, FRT_ERR_UNSUPPORTED, "RobertaProcessing"},
        {{.pre_tokenizer = bl, .post_processor = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"x\",\"type_id\":0}}],\"special_tokens\":{\"x\":{\"id\":\"x\",\"ids\":[1],\"tokens\":[\"x\"]}}}"}, FRT_ERR_FORMAT, "$A"},
        {{.pre_tokenizer = bl, .post_processor = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"x\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{}}"}, FRT_ERR_FORMAT, "no ids"},
        {{.pre_tokenizer = bl, .post_processor = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"x\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"x\":{\"id\":\"x\",\"ids\":[9999],\"tokens\":[\"x\"]}}}"}, FRT_ERR_FORMAT, "names no token"},
        {{.pre_tokenizer = bl, .added_tokens = "[{\"id\":1,\"content\":\"e\\u0301\",\"normalized\":true},{\"id\":2,\"content\":\"\\u00e9\",\"normalized\":true}]", .normalizer = "{\"type\":\"NFC\"}"}, FRT_ERR_FORMAT, "same text"},
        {{.pre_tokenizer = bl, .added_tokens = "{}"}, FRT_ERR_FORMAT, "added_tokens"},
        {{.pre_tokenizer = bl, .added_tokens = "[{\"id\":1}]"}, FRT_ERR_FORMAT, "content"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = load_fx_status(&cases[i].f);
        CHECK_MSG(rc == cases[i].status && strstr(frt_last_error(), cases[i].msg),
                  "refusal case %zu: got %s \"%s\", want %s naming \"%s\"", i, frt_status_name(rc), frt_last_error(),
                  frt_status_name(cases[i].status), cases[i].msg);
    }
    /* top-level options */
    const char *tops[][2] = {
        {"{\"version\":\"2.0\",\"model\":{}}", "version"},
        {"{\"truncation\":{\"max_length\":5},\"model\":{}}", "truncation"},
        {"{\"padding\":{\"strategy\":\"BatchLongest\"},\"model\":{}}", "padding"},
    };
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
        int rc = frt_tokenizer_load_json(tops[i][0], strlen(tops[i][0]), &tok);
        CHECK_MSG(rc == FRT_ERR_UNSUPPORTED && strstr(frt_last_error(), tops[i][1]), "top case %zu: %s", i, frt_last_error());
    }
}

/* ---- concurrency: a loaded tokenizer is read-only ------------------------------------------- */
typedef struct enc_job {
    const frt_tokenizer *tok;
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n;
    int rc;
} enc_job;

static void *enc_thread(void *arg)
{
    enc_job *j = arg;
    for (int r = 0; r < 20 && !j->rc; r++) {
        free(j->ids);
        j->rc = frt_tokenizer_encode(j->tok, j->text, j->len, &j->ids, &j->n);
    }
    return NULL;
}

static void test_threads(void)
{
    static const char *const merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", NULL};
    tokfx f = {.merges = merges, .pre_tokenizer = TOKFX_QWEN35_PRE, .added_tokens = TOKFX_SPECIALS,
               .normalizer = "{\"type\":\"NFC\"}"};
    frt_tokenizer *tok = load_fx(&f);
    if (!tok) return;
    char text[4096];
    size_t len = 0;
    while (len + 40 < sizeof text) {
        memcpy(text + len, "the e\xcc\x81t\xc3\xa9 <|im_end|> \xe6\x97\xa5  x'll\n", 33);
        len += 33;
    }
    enc_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (enc_job){tok, text, len, NULL, 0, 0};
        CHECK(pthread_create(&th[i], NULL, enc_thread, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        CHECK(jobs[i].rc == 0 && jobs[i].n == jobs[0].n && jobs[i].n > 100 &&
              !memcmp(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof(int32_t)));
    }
    for (int i = 0; i < 4; i++) free(jobs[i].ids);
    frt_tokenizer_free(tok);
}

/* ---- loading from a directory ---------------------------------------------------------------------- */
static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void test_load_dir(void)
{
    char dir[] = "/tmp/frt_tok_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    frt_tokenizer *tok = (frt_tokenizer *)1;
    CHECK_STATUS(frt_tokenizer_load("/nonexistent/frt/dir", &tok), FRT_ERR_NOT_FOUND);
    CHECK(tok == NULL);
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_NOT_FOUND);
    CHECK(strstr(frt_last_error(), "tokenizer.json") != NULL);
    CHECK_STATUS(frt_tokenizer_load(NULL, &tok), FRT_ERR_INVALID_ARGUMENT);

    tokfx f = {.added_tokens = TOKFX_SPECIALS, .pre_tokenizer = TOKFX_QWEN35_PRE, .normalizer = "{\"type\":\"NFC\"}"};
    char *json = tokfx_json(&f);
    write_file(dir, "tokenizer.json", json);
    free(json);
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && frt_tokenizer_chat_template(tok) == NULL);
    frt_tokenizer_free(tok);

    write_file(dir, "tokenizer_config.json", "{\"chat_template\": \"CONFIG {{ x }}\", \"eos_token\": \"<|im_end|>\"}");
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && frt_tokenizer_chat_template(tok) && !strcmp(frt_tokenizer_chat_template(tok), "CONFIG {{ x }}"));
    frt_tokenizer_free(tok);

    write_file(dir, "tokenizer_config.json",
               "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"TOOLS\"}, {\"name\": \"default\", \"template\": \"DEFAULT\"}]}");
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && frt_tokenizer_chat_template(tok) && !strcmp(frt_tokenizer_chat_template(tok), "DEFAULT"));
    frt_tokenizer_free(tok);

    /* chat_template.jinja wins over tokenizer_config.json */
    write_file(dir, "chat_template.jinja", "JINJA {{ y }}\n");
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && frt_tokenizer_chat_template(tok) && !strcmp(frt_tokenizer_chat_template(tok), "JINJA {{ y }}\n"));
    CHECK_OK(frt_tokenizer_set_chat_template(tok, "OTHER"));
    CHECK(!strcmp(frt_tokenizer_chat_template(tok), "OTHER"));
    CHECK_OK(frt_tokenizer_set_chat_template(tok, NULL));
    CHECK(frt_tokenizer_chat_template(tok) == NULL);
    CHECK_STATUS(frt_tokenizer_set_chat_template(NULL, "x"), FRT_ERR_INVALID_ARGUMENT);
    frt_tokenizer_free(tok);
    remove_file(dir, "chat_template.jinja");

    write_file(dir, "tokenizer_config.json", "{\"chat_template\": ");
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_FORMAT);
    CHECK(tok == NULL);
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": 5}");
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_FORMAT);
    /* numbers are not read: an integer beyond 64 bits (Llama 3's
     * model_max_length) loads; one beyond the double range does not */
    write_file(dir, "tokenizer_config.json",
               "{\"model_max_length\": 1000000000000000019884624838656, \"eos_token\": \"<|im_end|>\"}");
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && frt_tokenizer_special_token(tok, "eos_token") &&
          !strcmp(frt_tokenizer_special_token(tok, "eos_token"), "<|im_end|>"));
    frt_tokenizer_free(tok);
    tok = NULL;
    write_file(dir, "tokenizer_config.json", "{\"model_max_length\": 1e999}");
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_FORMAT);
    CHECK(tok == NULL && strstr(frt_last_error(), "tokenizer_config.json"));
    remove_file(dir, "tokenizer_config.json");

    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"WordLevel\"}}");
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "tokenizer.json") && strstr(frt_last_error(), "WordLevel"));
    remove_file(dir, "tokenizer.json");
    rmdir(dir);
}

int main(void)
{
    test_bpe_merges();
    test_bpe_ties_and_long_runs();
    test_bpe_ignore_merges_and_unk();
    test_merges_legacy_form();
    test_split_behaviors();
    test_qwen35_pretokenizer();
    test_byte_level_prefix_space();
    test_nfc();
    test_round_trip_nfc();
    test_added_token_flags();
    test_added_ids_from_vocab();
    test_template_processing();
    test_decode();
    test_encode_bad_input();
    test_refusals();
    test_threads();
    test_load_dir();
    return frt_test_report();
}
