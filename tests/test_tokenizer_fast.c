/* test_tokenizer_fast.c - the encoder's fast paths against its general
 * paths, which they must equal exactly:
 *
 *   - the split patterns of Qwen2/3, Qwen3.5 and Llama 3 matched without
 *     PCRE2 (tok_split_fast.c) vs PCRE2: the spans of tok_regex_find_matches
 *     on random text built to hit every alternative, every class of
 *     non-ASCII character and every hand-over to PCRE2 (letters, digits,
 *     marks, white space outside ASCII, the long s that (?i) matches for
 *     's', random code points in and outside the BMP), on one large random
 *     text, and on real text (frt's own sources and docs, the Python
 *     standard library when installed);
 *   - normalization through utf8proc on the non-ASCII runs only
 *     (tok_utf8_normalize) vs utf8proc_map over the whole text, in the four
 *     normal forms, on random text;
 *   - whole tokenizers: ids with both fast paths and word_ids (one lookup
 *     for a word that merges into one token) vs ids with the fast split
 *     disabled and word_ids emptied, for the reference tokenizers of
 *     tests/data/tokenizer and every TOKENIZER_DIR given on the command
 *     line (tests/sh/tokenizer_real.sh passes the real Llama 3.1 and Qwen3
 *     tokenizers).
 *
 *   test_tokenizer_fast [TOKENIZER_DIR...] */
#include "frt_test.h"
#include "frt/tokenizer.h"
#include "test_tokenizer_fixture.h"
#include "text/tok_internal.h"

#include <glob.h>
#include <utf8proc.h>

static const char *const patterns[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Pieces of random text: every ASCII class, contractions in both cases and
 * cut short, and non-ASCII letters (é, ſ, ǅ, Ａ, 日本), marks (U+0301),
 * digits (Arabic-Indic 3, Ⅻ, ①), white space (NBSP, NEL, U+2028, U+3000),
 * U+180E (not White_Space), punctuation (—, «) and an emoji. */
static const char *const pool[] = {
    "a", "Z", "the", "Hello", "x", "7", "42", "1234567", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\v",
    "\f", "\n\n", " \n ", "'", "'s", "'S", "'t", "'re", "'RE", "'rE", "'ve", "'m", "'ll", "'Ll", "'d", "'r",
    "'l", "'v", "(", ")", ".", ",", ";", "::", "#", "_", "-", "+=", "\"", "\\", "{}", "\x01", "\x7f",
    "\xc3\xa9", "e\xcc\x81", "\xcc\x81", "\xc5\xbf", "\xc7\x85", "\xef\xbc\xa1", "\xe6\x97\xa5\xe6\x9c\xac",
    "\xd9\xa3", "\xe2\x85\xab", "\xe2\x91\xa0", "\xc2\xa0", "\xc2\x85", "\xe2\x80\xa8", "\xe3\x80\x80",
    "\xe1\xa0\x8e", "\xe2\x80\x94", "\xc2\xab", "\xf0\x9f\x98\x80", "def f(x):\n    return x\n",
};

/* pieces of the pool, and one in eight a random code point (BMP or not) */
static void random_text(tok_buf *b, int pieces)
{
    b->n = 0;
    for (int j = 0; j < pieces; j++) {
        uint64_t r = frt_test_u64();
        if (r % 8 == 0) {
            uint32_t cp = (r >> 8) % 2 ? 0x80 + (uint32_t)((r >> 16) % 0xFF80) : 0x80 + (uint32_t)((r >> 16) % 0x10FF80);
            if (cp >= 0xD800 && cp < 0xE000) cp = 0x3000;
            char u[4];
            if (tok_buf_put(b, u, (size_t)tok_utf8_encode(cp, u))) return;
            continue;
        }
        const char *p = pool[(r >> 3) % (sizeof pool / sizeof pool[0])];
        if (tok_buf_put(b, p, strlen(p))) return;
    }
}

/* 1 when the fast and the PCRE2 spans of S agree (prints the first difference) */
static int same_spans(tok_regex *re, tok_matcher *m, const char *s, size_t n, const char *what)
{
    tok_spanvec a = {0}, b = {0};
    int fast = re->fast;
    int rc = tok_regex_find_matches(re, m, s, n, &a);
    re->fast = TOK_FAST_NONE;
    rc |= tok_regex_find_matches(re, m, s, n, &b);
    re->fast = fast;
    size_t k = 0;
    while (!rc && k < a.n && k < b.n && !memcmp(&a.v[k], &b.v[k], sizeof a.v[k])) k++;
    int ok = !rc && a.n == b.n && k == a.n;
    if (!ok)
        fprintf(stderr, "%s: spans differ at %zu of %zu/%zu: fast [%u, %u) pcre2 [%u, %u) near \"%.20s\"\n", what, k,
                a.n, b.n, k < a.n ? a.v[k].start : 0, k < a.n ? a.v[k].end : 0, k < b.n ? b.v[k].start : 0,
                k < b.n ? b.v[k].end : 0, k < a.n ? s + a.v[k].start : "");
    tok_spanvec_free(&a);
    tok_spanvec_free(&b);
    return ok;
}

static char *read_path(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = p ? (size_t)len : 0;
    return p;
}

/* The real texts: every file matching the globs, valid UTF-8 only,
 * concatenated. */
static void real_text(tok_buf *b)
{
    static const char *const globs[] = {FRT_SOURCE_DIR "/src/*/*.c", FRT_SOURCE_DIR "/docs/*.md",
                                        FRT_SOURCE_DIR "/tests/jinja/*.py", "/usr/lib/python3*/*.py"};
    for (size_t g = 0; g < sizeof globs / sizeof globs[0]; g++) {
        glob_t gl;
        if (glob(globs[g], 0, NULL, &gl)) continue;
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            size_t n;
            char *p = read_path(gl.gl_pathv[i], &n);
            if (p && tok_utf8_valid(p, n)) tok_buf_put(b, p, n);
            free(p);
        }
        globfree(&gl);
    }
}

static void test_split_fast(const tok_buf *real)
{
    tok_matcher m;
    CHECK_OK(tok_matcher_init(&m));
    tok_buf t = {0};
    for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
        tok_regex re;
        CHECK_OK(tok_regex_compile(&re, patterns[k], strlen(patterns[k]), "test"));
        CHECK(re.fast == (k == 2 ? TOK_FAST_LLAMA3 : k == 1 ? TOK_FAST_QWEN35 : TOK_FAST_QWEN));
        frt_test_seed(11 + k);
        int bad = 0;
        for (int it = 0; it < 4000 && bad < 3; it++) {
            random_text(&t, (int)(frt_test_u64() % 40));
            bad += !same_spans(&re, &m, t.p ? t.p : "", t.n, "random");
        }
        CHECK_MSG(bad == 0, "pattern %zu: fast spans differ on random text", k);
        random_text(&t, 200000);
        CHECK(same_spans(&re, &m, t.p, t.n, "large random"));
        CHECK(real->n > 100000 && same_spans(&re, &m, real->p, real->n, "real text"));
        tok_regex_free(&re);
    }
    /* a near miss is not recognized */
    tok_regex re;
    const char *other = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,2}";
    CHECK_OK(tok_regex_compile(&re, other, strlen(other), "test"));
    CHECK(re.fast == TOK_FAST_NONE);
    tok_regex_free(&re);
    tok_buf_free(&t);
    tok_matcher_free(&m);
}

static void test_normalize_segments(void)
{
    static const int forms[] = {UTF8PROC_STABLE | UTF8PROC_COMPOSE, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
                                UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
                                UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT};
    tok_buf t = {0}, out = {0};
    frt_test_seed(5);
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        t.n = 0;
        int k = (int)(frt_test_u64() % 24);
        for (int j = 0; j < k; j++) {
            /* ASCII, Latin with marks, Hangul jamo (L V T compose), compatibility
             * forms, or any valid code point */
            static const uint32_t lo[] = {0x20, 0x300, 0xC0, 0x1100, 0x1161, 0x11A8, 0xFB00, 0x2460, 0x1};
            static const uint32_t span[] = {0x5F, 0x70, 0x180, 0x13, 0x15, 0x1B, 0x50, 0x40, 0x10FFFE};
            size_t r = frt_test_u64() % (sizeof lo / sizeof lo[0]);
            uint32_t cp = lo[r] + (uint32_t)(frt_test_u64() % span[r]);
            if (cp >= 0xD800 && cp < 0xE000) cp = 'q';
            char u[4];
            tok_buf_put(&t, u, (size_t)tok_utf8_encode(cp, u));
        }
        for (size_t f = 0; f < 4; f++) {
            out.n = 0;
            utf8proc_uint8_t *ref = NULL;
            utf8proc_ssize_t rn = utf8proc_map((const utf8proc_uint8_t *)(t.p ? t.p : ""), (utf8proc_ssize_t)t.n, &ref,
                                               (utf8proc_option_t)forms[f]);
            int rc = tok_utf8_normalize(t.p ? t.p : "", t.n, forms[f], &out);
            if (rn < 0 || rc || (size_t)rn != out.n || (rn && memcmp(ref, out.p, out.n))) bad++;
            free(ref);
        }
    }
    CHECK_MSG(bad == 0, "%d of 12000 normalizations differ from utf8proc_map", bad);
    tok_buf_free(&t);
    tok_buf_free(&out);
}

static int32_t *encode(const frt_tokenizer *tok, const char *text, size_t n, size_t *n_ids)
{
    int32_t *ids = NULL;
    CHECK_OK(frt_tokenizer_encode(tok, text, n, &ids, n_ids));
    return ids;
}

static void check_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb, const char *what)
{
    size_t k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    CHECK_MSG(na == nb && k == na, "%s: %zu ids vs %zu, first difference at %zu", what, na, nb, k);
}

/* ids of TEXT with the fast paths (twice: word_state is learnt by the first
 * pass), then with them off (no fast split, no word_ids but under
 * ignore_merges, where the lookup is the rule): all equal */
static void check_same_ids(frt_tokenizer *tok, const char *text, size_t n, const char *what)
{
    size_t na, nb, nc;
    int32_t *a = encode(tok, text, n, &na), *b = encode(tok, text, n, &nb);
    int fast[16];
    for (int i = 0; i < tok->n_stages; i++) {
        fast[i] = tok->stages[i].re.fast;
        tok->stages[i].re.fast = TOK_FAST_NONE;
    }
    tok_strmap words = tok->word_ids;
    if (!tok->ignore_merges) memset(&tok->word_ids, 0, sizeof tok->word_ids);
    int32_t *c = encode(tok, text, n, &nc);
    tok->word_ids = words;
    for (int i = 0; i < tok->n_stages; i++) tok->stages[i].re.fast = fast[i];
    check_ids(a, na, c, nc, what);
    check_ids(b, nb, c, nc, what);
    free(a);
    free(b);
    free(c);
}

static void test_tokenizer_dir(const char *dir, const tok_buf *real)
{
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    if (!tok) return;
    int has_fast = 0;
    for (int i = 0; i < tok->n_stages; i++) has_fast |= tok->stages[i].re.fast != TOK_FAST_NONE;
    printf("%s: %d ids, %zu merges, fast split %s, %zu of %zu vocabulary entries in word_ids\n", dir,
           frt_tokenizer_vocab_size(tok), tok->merges.n, has_fast ? "on" : "off", tok->word_ids.n,
           tok->vocab_entries);
    tok_buf t = {0};
    frt_test_seed(3);
    random_text(&t, 100000);
    check_same_ids(tok, t.p, t.n, "random text");
    check_same_ids(tok, real->p, real->n, "real text");
    /* every vocabulary entry's own text */
    t.n = 0;
    for (int32_t id = 0; id < frt_tokenizer_vocab_size(tok); id++) {
        const tok_token *e = &tok->tokens[id];
        if (e->bytes && !e->special && tok_utf8_valid(e->bytes, e->bytes_len)) {
            tok_buf_put(&t, e->bytes, e->bytes_len);
            tok_buf_put(&t, "\n", 1);
        }
    }
    check_same_ids(tok, t.p, t.n, "vocabulary");
    if (tok->word_state) {
        size_t self = 0, merged = 0;
        for (size_t i = 0; i < tok->vocab_entries; i++) {
            self += tok->word_state[i] == TOK_WORD_SELF;
            merged += tok->word_state[i] == TOK_WORD_MERGED;
        }
        printf("  word_state after the texts: %zu entries merge into themselves, %zu do not\n", self, merged);
        CHECK(self > 0);
    }
    tok_buf_free(&t);
    frt_tokenizer_free(tok);
}

/* a vocabulary entry whose text does not merge into it ("xy" without the
 * merge x y): word_state learns TOK_WORD_MERGED and the merge loop's ids
 * stay the answer, first and later times */
static void test_word_state_merged(void)
{
    static const char *const merges[] = {"h e", NULL};
    static const char *const extra[] = {"xy", NULL};
    tokfx f = {.merges = merges, .extra_vocab = extra, .pre_tokenizer = TOKFX_QWEN35_PRE};
    char *json = tokfx_json(&f);
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load_json(json, strlen(json), &tok));
    free(json);
    if (!tok) return;
    int32_t xy = frt_tokenizer_token_id(tok, "xy"), he = frt_tokenizer_token_id(tok, "he");
    CHECK(xy > 0 && he > 0 && tok->word_state);
    /* words "xy" " he" " xy" "\n" "he"; fixture ids: a byte's id is its value */
    const int32_t want[] = {'x', 'y', ' ', he, ' ', 'x', 'y', '\n', he};
    for (int pass = 0; pass < 2; pass++) {
        size_t n;
        int32_t *ids = encode(tok, "xy he xy\nhe", 11, &n);
        check_ids(ids, n, want, sizeof want / sizeof want[0], pass ? "second pass" : "first pass");
        free(ids);
    }
    CHECK(tok->word_state[xy] == TOK_WORD_MERGED && tok->word_state[he] == TOK_WORD_SELF);
    frt_tokenizer_free(tok);
}

int main(int argc, char **argv)
{
    tok_buf real = {0};
    real_text(&real);
    printf("real text: %zu bytes\n", real.n);
    test_split_fast(&real);
    test_normalize_segments();
    test_word_state_merged();
    static const char *const refs[] = {FRT_TEST_DATA "/tokenizer/qwen2", FRT_TEST_DATA "/tokenizer/qwen35",
                                       FRT_TEST_DATA "/tokenizer/gpt2"};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) test_tokenizer_dir(refs[i], &real);
    for (int i = 1; i < argc; i++) test_tokenizer_dir(argv[i], &real);
    tok_buf_free(&real);
    return frt_test_report();
}
