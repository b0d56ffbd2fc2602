/*
 * test_grammar.c - frt/grammar.h: the JSON Schema compiler, the byte
 * automaton, the validator, the token trie's mask against a brute-force
 * reference, and the tool-call grammar against serving/chat_output.c.
 *
 *   - fixed texts each schema must accept (complete) or refuse;
 *   - schemas outside the subset refused, naming the keyword;
 *   - random byte walks (tests/data/grammar/schemas.json x 40 seeds): every
 *     output parses with jansson and validates (frt_json_schema_validate);
 *   - the validator on tests/data/grammar/validate_cases.json (the same
 *     file tests/sh/json_schema_python.sh checks with python3-jsonschema);
 *   - masks of a synthetic vocabulary (every byte, JSON fragments, partial
 *     UTF-8, special tokens, an end id) equal, token by token, the
 *     reference: copy the state, accept the token's bytes;
 *   - tool calls: random token walks parse as tool calls with a known name
 *     and arguments that validate against that tool's parameters.
 *
 * `test_grammar --dump FILE` writes JSON lines {schema, instance, valid} of
 * the random walks and mutations of them, for the python3-jsonschema
 * cross-check.
 */
#include "frt_test.h"

#include "frt/grammar.h"
#include "frt/status.h"
#include "frt_test_grammar.h"
#include "text/grammar_int.h"

#include <jansson.h>

#define DATA FRT_TEST_DATA "/grammar/"

static json_t *load(const char *name)
{
    json_error_t e;
    json_t *j = json_load_file(name, JSON_DECODE_ANY, &e);
    if (!j) fprintf(stderr, "%s: %s\n", name, e.text);
    return j;
}

static frt_grammar *compile_text(const char *schema)
{
    frt_grammar *g = NULL;
    frt_grammar_diag d;
    int rc = frt_grammar_compile_json_schema(schema, strlen(schema), &g, &d);
    CHECK_MSG(rc == 0, "%s: %s", schema, frt_last_error());
    return g;
}

/* 1 complete, 0 accepted but incomplete, -1 refused. */
static int run_text(frt_grammar *g, const char *text)
{
    frt_grammar_state *st;
    if (frt_grammar_state_create(g, &st)) return -2;
    int rc = frt_grammar_state_accept(st, text, strlen(text));
    int r = rc ? -1 : frt_grammar_state_complete(st);
    frt_grammar_state_free(st);
    return r;
}

static void test_texts(void)
{
    static const struct {
        const char *schema, *text;
        int want;
    } cases[] = {
        {"{\"type\":\"integer\"}", "-120", 1},
        {"{\"type\":\"integer\"}", "1.5", -1},
        {"{\"type\":\"integer\"}", "01", -1},
        {"{\"type\":\"integer\"}", "-", 0},
        {"{\"type\":\"integer\"}", "1234567890123456", -1}, /* 16 digits */
        {"{\"type\":\"number\"}", "-0.5e+12", 1},
        {"{\"type\":\"number\"}", "1e123", -1},
        {"{\"type\":\"number\"}", "1.", 0},
        {"{\"type\":\"string\"}", "\"a\\n\\u00e9\xc3\xa9\"", 1},
        {"{\"type\":\"string\"}", "\"\\u0000\"", -1},
        {"{\"type\":\"string\"}", "\"\\ud800\"", -1},
        {"{\"type\":\"string\"}", "\"\xc0\xaf\"", -1},      /* overlong */
        {"{\"type\":\"string\"}", "\"\xed\xa0\x80\"", -1},  /* surrogate */
        {"{\"type\":\"string\"}", "\"a\tb\"", -1},          /* raw control character */
        {"{\"type\":\"string\",\"maxLength\":2}", "\"\xc3\xa9\\n\"", 1},
        {"{\"type\":\"string\",\"maxLength\":2}", "\"abc", -1},
        {"{\"type\":\"string\",\"minLength\":2}", "\"a\"", -1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"],\"additionalProperties\":false}", "{ \"a\" : 1 ,\n \"b\":true }", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"],\"additionalProperties\":false}", "{\"b\":true,\"a\":1}", -1}, /* schema order */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"],\"additionalProperties\":false}", "{\"a\":1}", -1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"c\":1}", -1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{}", 1},
        {"{\"type\":\"object\"}", "{\"x\":[1,{\"y\":null}],\"z\":\"w\"}", 1},
        {"{\"type\":\"object\"}", "[]", -1},
        {"{\"type\":\"object\"}", "{}  ", -1},                        /* nothing after the value */
        {"{\"type\":\"object\"}", "{          }", -1},                /* > 8 white space bytes */
        {"{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":1,\"maxItems\":2}", "[null]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":1,\"maxItems\":2}", "[]", -1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":1,\"maxItems\":2}", "[null,null,", -1},
        {"{\"enum\":[1,12,\"a\"]}", "1", 1},
        {"{\"enum\":[1,12,\"a\"]}", "12", 1},
        {"{\"enum\":[1,12,\"a\"]}", "2", -1},
        {"{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", -1},          /* the type drops 1 */
        {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},\"required\":[\"k\"],"
         "\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":2}},"
         "\"required\":[\"k\"],\"additionalProperties\":false}]}", "{\"k\":2}", 1},
        {"{\"type\":[\"boolean\",\"null\"]}", "null", 1},
        {"{\"type\":[\"boolean\",\"null\"]}", "nul", 0},
        {"{\"$defs\":{\"a\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/a\"}", "7", 1},
        {"{}", "[{\"a\":true}]", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        frt_grammar *g = compile_text(cases[i].schema);
        if (!g) continue;
        int r = run_text(g, cases[i].text);
        CHECK_MSG(r == cases[i].want, "%s on '%s': %d, want %d", cases[i].schema, cases[i].text, r, cases[i].want);
        frt_grammar_free(g);
    }
    /* json_object (no schema): any object */
    frt_grammar *g = NULL;
    CHECK_OK(frt_grammar_compile_json_schema(NULL, 0, &g, NULL));
    CHECK(run_text(g, "{\"a\":{\"b\":[]}}") == 1 && run_text(g, "1") == -1);
    frt_grammar_free(g);
}

static void test_refusals(void)
{
    static const struct {
        const char *schema;
        int status;
        const char *keyword;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"a+\"}", FRT_ERR_UNSUPPORTED, "pattern"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":0}}}", FRT_ERR_UNSUPPORTED, "minimum"},
        {"{\"type\":\"object\",\"additionalProperties\":true}", FRT_ERR_UNSUPPORTED, "additionalProperties"},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", FRT_ERR_UNSUPPORTED, "additionalProperties"},
        {"{\"allOf\":[{}]}", FRT_ERR_UNSUPPORTED, "allOf"},
        {"{\"oneOf\":[{}]}", FRT_ERR_UNSUPPORTED, "oneOf"},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}}}},"
         "\"$ref\":\"#/$defs/n\"}", FRT_ERR_UNSUPPORTED, "$ref"},
        {"{\"properties\":{\"a\":{\"$ref\":\"#\"}}}", FRT_ERR_UNSUPPORTED, "$ref"},
        {"{\"$ref\":\"http://example.com/s.json\"}", FRT_ERR_UNSUPPORTED, "$ref"},
        {"{\"$ref\":\"#/$defs/missing\"}", FRT_ERR_FORMAT, "$ref"},
        {"{\"type\":\"strin\"}", FRT_ERR_FORMAT, "type"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":\"a\"}", FRT_ERR_FORMAT, "required"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", FRT_ERR_UNSUPPORTED, "required"},
        {"{\"type\":\"array\",\"items\":[{}]}", FRT_ERR_UNSUPPORTED, "items"},
        {"{\"type\":\"array\",\"minItems\":-1}", FRT_ERR_FORMAT, "minItems"},
        {"{\"type\":\"string\",\"enum\":[1,2]}", FRT_ERR_UNSUPPORTED, "enum"},
        {"{\"enum\":[]}", FRT_ERR_FORMAT, "enum"},
        {"{\"format\":\"date\"}", FRT_ERR_UNSUPPORTED, "format"},
        {"{\"anyOf\":[{},{}],\"type\":\"string\"}", FRT_ERR_UNSUPPORTED, "anyOf"},
        {"[1]", FRT_ERR_FORMAT, ""},
        {"{\"type\":", FRT_ERR_FORMAT, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        frt_grammar *g = (frt_grammar *)1;
        frt_grammar_diag d;
        int rc = frt_grammar_compile_json_schema(cases[i].schema, strlen(cases[i].schema), &g, &d);
        CHECK_MSG(rc == cases[i].status && !g && !strcmp(d.keyword, cases[i].keyword), "%s: %s, keyword '%s' (%s)",
                  cases[i].schema, frt_status_name(rc), d.keyword, frt_last_error());
    }
    /* widths: 6 x 6 alternatives alive at once is more than the 32 stacks */
    char big[4096] = "{\"type\":\"array\",\"items\":{\"anyOf\":[";
    for (int i = 0; i < 40; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "%s{\"type\":\"object\",\"properties\":{\"k\":{\"const\":%d}}}",
                 i ? "," : "", i);
    strcat(big, "]}}");
    frt_grammar *g = NULL;
    frt_grammar_diag d;
    CHECK_STATUS(frt_grammar_compile_json_schema(big, strlen(big), &g, &d), FRT_ERR_UNSUPPORTED);
    CHECK(!strcmp(d.keyword, "anyOf"));
}

/* ---- random byte walks ------------------------------------------------------------ */

/* Weight of byte b as the next one: closing bytes are favoured so walks end. */
static int byte_weight(uint8_t b)
{
    if (b == '"' || b == '}' || b == ']') return 40;
    if (b == ' ' || b == '\n' || b == '\t' || b == '\r') return 1;
    return 4;
}

/* A random text of g: at each step one accepted byte (weighted), stopping
 * at a complete state with probability 1/2 (always when no byte fits). */
static char *random_walk(frt_grammar *g, size_t *len)
{
    frt_grammar_state *st, *t;
    frt_grammar_state_create(g, &st);
    frt_grammar_state_create(g, &t);
    size_t cap = 4096, n = 0;
    char *out = xmalloc(cap + 1);
    for (;;) {
        if (frt_grammar_state_complete(st) && (frt_test_u64() & 1)) break;
        int ok[256], total = 0;
        for (int b = 0; b < 256; b++) {
            frt_grammar_state_copy(t, st);
            uint8_t c = (uint8_t)b;
            ok[b] = frt_grammar_state_accept(t, &c, 1) == 0 ? byte_weight(c) : 0;
            total += ok[b];
        }
        if (!total) { /* a dead end: no byte continues an incomplete value */
            CHECK_MSG(frt_grammar_state_complete(st), "dead end after '%.*s'", (int)n, out);
            break;
        }
        if (n == cap) break;
        int r = (int)(frt_test_u64() % (uint64_t)total), b = 0;
        while (r >= ok[b]) r -= ok[b++];
        uint8_t c = (uint8_t)b;
        frt_grammar_state_accept(st, &c, 1);
        out[n++] = (char)c;
    }
    out[n] = '\0';
    *len = n;
    int complete = frt_grammar_state_complete(st);
    frt_grammar_state_free(st);
    frt_grammar_state_free(t);
    if (!complete) {
        free(out);
        return NULL;
    }
    return out;
}

static FILE *g_dump;

static void dump(const char *schema, const char *inst, int valid)
{
    if (!g_dump) return;
    json_error_t e;
    json_t *s = json_loads(schema, JSON_DECODE_ANY, &e), *i = json_loads(inst, JSON_DECODE_ANY, &e);
    if (!s || !i) {
        json_decref(s);
        json_decref(i);
        return;
    }
    json_t *o = json_pack("{s:o, s:o, s:b}", "schema", s, "instance", i, "valid", valid);
    char *t = json_dumps(o, JSON_COMPACT);
    fprintf(g_dump, "%s\n", t);
    free(t);
    json_decref(o);
}

/* A mutation of a valid instance: one byte changed, kept only when it is still JSON. */
static void dump_mutation(const char *schema, const char *text, size_t n)
{
    static const char repl[] = "0123456789\"{}[],:atfn-.e ";
    if (!g_dump || !n) return;
    char *m = xmalloc(n + 1);
    memcpy(m, text, n + 1);
    m[frt_test_u64() % n] = repl[frt_test_u64() % (sizeof repl - 1)];
    json_error_t e;
    json_t *j = json_loads(m, JSON_DECODE_ANY, &e);
    if (j) {
        int v = frt_json_schema_validate(schema, strlen(schema), m, strlen(m), NULL, 0);
        if (v == 0 || v == FRT_ERR_MISMATCH) dump(schema, m, v == 0);
    }
    json_decref(j);
    free(m);
}

static void test_walks(json_t *schemas)
{
    size_t i;
    json_t *s;
    int walks = 0, complete = 0;
    json_array_foreach(schemas, i, s) {
        char *text = json_dumps(s, JSON_COMPACT);
        frt_grammar *g = compile_text(text);
        for (int seed = 0; g && seed < 40; seed++) {
            frt_test_seed(1000 * i + (size_t)seed);
            size_t n;
            char *out = random_walk(g, &n);
            walks++;
            if (!out) continue;
            complete++;
            char why[256];
            json_error_t e;
            json_t *j = json_loadb(out, n, JSON_DECODE_ANY, &e);
            CHECK_MSG(j, "schema %zu seed %d: '%s' is not JSON: %s", i, seed, out, e.text);
            int rc = frt_json_schema_validate(text, strlen(text), out, n, why, sizeof why);
            CHECK_MSG(rc == 0, "schema %zu seed %d: '%s' does not validate: %s", i, seed, out, why);
            dump(text, out, 1);
            dump_mutation(text, out, n);
            json_decref(j);
            free(out);
        }
        frt_grammar_free(g);
        free(text);
    }
    printf("random walks: %d complete of %d over %zu schemas\n", complete, walks, json_array_size(schemas));
    CHECK(complete == walks); /* no walk reaches a dead end */
}

static void test_validator(json_t *cases)
{
    size_t i, k;
    json_t *c, *inst;
    int n = 0;
    json_array_foreach(cases, i, c) {
        char *schema = json_dumps(json_object_get(c, "schema"), JSON_COMPACT | JSON_ENCODE_ANY);
        for (int want_valid = 1; want_valid >= 0; want_valid--) {
            json_array_foreach(json_object_get(c, want_valid ? "valid" : "invalid"), k, inst) {
                char *t = json_dumps(inst, JSON_COMPACT | JSON_ENCODE_ANY);
                int rc = frt_json_schema_validate(schema, strlen(schema), t, strlen(t), NULL, 0);
                CHECK_MSG(rc == (want_valid ? 0 : FRT_ERR_MISMATCH), "%s on %s: %s", schema, t, frt_status_name(rc));
                free(t);
                n++;
            }
        }
        free(schema);
    }
    printf("validator: %d instances\n", n);
    CHECK_STATUS(frt_json_schema_validate("{\"type\":", 8, "1", 1, NULL, 0), FRT_ERR_FORMAT);
    CHECK_STATUS(frt_json_schema_validate("{}", 2, "[", 1, NULL, 0), FRT_ERR_FORMAT);
    CHECK_STATUS(frt_json_schema_validate("{\"not\":{}}", 10, "1", 1, NULL, 0), FRT_ERR_UNSUPPORTED);
}

/* ---- masks against the reference ------------------------------------------------- */

typedef struct synth {
    int n;
    uint8_t **bytes;
    size_t *lens;
    uint8_t *special;
    int32_t eos;
} synth;

static void synth_add(synth *v, const void *b, size_t n, int special)
{
    v->bytes[v->n] = xmalloc(n);
    memcpy(v->bytes[v->n], b, n);
    v->lens[v->n] = n;
    v->special[v->n] = (uint8_t)special;
    v->n++;
}

/* Every byte, JSON fragments, partial UTF-8, tags, an end id, random strings. */
static void synth_make(synth *v, int n_random)
{
    static const char *const frags[] = {
        "{\"", "\":", "\",", "\"}", "true", "false", "null", " \"", "\n", "  ", "\\n", "\\u00e9", "\\ud800",
        "\xc3\xa9", "\xc3", "\xa9" "abc", "\xe4\xb8\xad\xe6\x96\x87", "\xe4\xb8", "12", "-1", ".5", "e+", "},{",
        "[{", "\"]", "</tool_call>", "\n{\"name\": \"", "get_weather", "\", \"arguments\": ", "}\n", "red",
        "green", "\"r", "kind", "circle", "\":\"", "\"\"", "\\\"", "0", "00", "1e", "a\"b", "\n</tool_call>",
        "</tool", "_call>", "</", "tool_call>", "a</tool_call>b", "<<", "</tool_call"};
    int cap = 256 + (int)(sizeof frags / sizeof frags[0]) + 8 + n_random;
    v->n = 0;
    v->bytes = xmalloc((size_t)cap * sizeof *v->bytes);
    v->lens = xmalloc((size_t)cap * sizeof *v->lens);
    v->special = xmalloc((size_t)cap);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        synth_add(v, &c, 1, 0);
    }
    for (size_t i = 0; i < sizeof frags / sizeof frags[0]; i++) synth_add(v, frags[i], strlen(frags[i]), 0);
    synth_add(v, "<tool_call>", 11, 1);
    synth_add(v, "<|im_start|>", 12, 1);
    v->eos = v->n;
    synth_add(v, "<|im_end|>", 10, 1);
    static const char alpha[] = "abc\"{}[],: \n\\01-.etrufnl";
    for (int i = 0; i < n_random; i++) {
        char t[8];
        int len = 1 + (int)(frt_test_u64() % 6);
        for (int k = 0; k < len; k++) t[k] = alpha[frt_test_u64() % (sizeof alpha - 1)];
        synth_add(v, t, (size_t)len, 0);
    }
}

static void synth_free(synth *v)
{
    for (int i = 0; i < v->n; i++) free(v->bytes[i]);
    free(v->bytes);
    free(v->lens);
    free(v->special);
}

/* The reference: token by token, a copy of the state accepts its bytes. */
static int ref_allowed(const synth *v, const frt_grammar *g, const frt_grammar_state *st, int id, int is_tag)
{
    if (id == v->eos) return frt_grammar_state_complete(st);
    if (v->special[id] && !is_tag) return 0;
    int room;
    if (is_tag && g_in_string_body(st, &room)) return 0;
    frt_grammar_state *t;
    frt_grammar_state_create(g, &t);
    frt_grammar_state_copy(t, st);
    int ok = frt_grammar_state_accept(t, v->bytes[id], v->lens[id]) == 0;
    frt_grammar_state_free(t);
    return ok;
}

static int is_tag_text(const frt_grammar *g, const synth *v, int id)
{
    for (int i = 0; i < g->n_tags; i++)
        if (strlen(g->tags[i]) == v->lens[id] && !memcmp(g->tags[i], v->bytes[id], v->lens[id])) return 1;
    return 0;
}

/* Random token walks under the mask; at each step the mask equals the reference. */
static int mask_walks(const synth *v, const frt_grammar_vocab *voc, frt_grammar *g, int seeds, const char *what)
{
    int64_t words = (v->n + 31) / 32;
    uint32_t *mask = xmalloc((size_t)words * 4);
    int steps = 0, bad = 0, ended = 0;
    for (int seed = 0; seed < seeds; seed++) {
        frt_test_seed(77 + (uint64_t)seed);
        frt_grammar_matcher *m;
        CHECK_OK(frt_grammar_matcher_create(g, voc, &m));
        for (int step = 0; step < 400 && !frt_grammar_matcher_ended(m); step++) {
            int64_t count = frt_grammar_matcher_mask(m, mask, words);
            int n_ref = 0, first_bad = -1;
            for (int id = 0; id < v->n; id++) {
                int want = ref_allowed(v, g, frt_grammar_matcher_state(m), id, is_tag_text(g, v, id));
                n_ref += want;
                if (want != (int)(mask[id >> 5] >> (id & 31) & 1) && first_bad < 0) first_bad = id;
            }
            steps++;
            if (first_bad >= 0 || count != n_ref) {
                if (!bad++)
                    fprintf(stderr, "%s seed %d step %d: token %d ('%.*s') differs from the reference (%lld vs %d)\n",
                            what, seed, step, first_bad, first_bad >= 0 ? (int)v->lens[first_bad] : 0,
                            first_bad >= 0 ? (const char *)v->bytes[first_bad] : "", (long long)count, n_ref);
                break;
            }
            if (!count) { /* only an output that ended allows nothing */
                CHECK_MSG(frt_grammar_matcher_ended(m), "%s seed %d step %d: a dead end", what, seed, step);
                break;
            }
            /* prefer the end id and closing tokens so walks finish */
            int pick = -1;
            if ((mask[v->eos >> 5] >> (v->eos & 31) & 1) && (frt_test_u64() & 1)) pick = v->eos;
            while (pick < 0) {
                int id = (int)(frt_test_u64() % (uint64_t)v->n);
                if (mask[id >> 5] >> (id & 31) & 1) pick = id;
            }
            CHECK_OK(frt_grammar_matcher_accept(m, pick));
        }
        ended += frt_grammar_matcher_ended(m);
        frt_grammar_matcher_free(m);
    }
    free(mask);
    CHECK_MSG(!bad, "%s: %d walks differ from the reference", what, bad);
    return ended;
}

static void test_masks(json_t *schemas)
{
    synth v;
    frt_test_seed(5);
    synth_make(&v, 3000);
    frt_grammar_vocab *voc = NULL;
    CHECK_OK(frt_grammar_vocab_create_bytes(v.n, (const uint8_t *const *)v.bytes, v.lens, v.special, &v.eos, 1, &voc));
    if (!voc) return;
    size_t i;
    json_t *s;
    int total = 0;
    json_array_foreach(schemas, i, s) {
        char *text = json_dumps(s, JSON_COMPACT);
        frt_grammar *g = compile_text(text);
        char what[32];
        snprintf(what, sizeof what, "schema %zu", i);
        if (g) total += mask_walks(&v, voc, g, 4, what);
        frt_grammar_free(g);
        free(text);
    }
    printf("masks: %d of %zu token walks reached the end id, every mask equal to the reference\n", total,
           4 * json_array_size(schemas));
    /* bad calls */
    frt_grammar *g = compile_text("{}");
    frt_grammar_matcher *m = NULL;
    CHECK_OK(frt_grammar_matcher_create(g, voc, &m));
    uint32_t w[4];
    CHECK(frt_grammar_matcher_mask(m, w, 1) == FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_grammar_matcher_accept(m, v.eos), FRT_ERR_MISMATCH);        /* nothing yet */
    CHECK_STATUS(frt_grammar_matcher_accept(m, v.n + 5), FRT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(frt_grammar_matcher_accept(m, v.eos - 1), FRT_ERR_MISMATCH); /* <|im_start|>: special */
    frt_grammar_matcher_free(m);
    frt_grammar_free(g);
    frt_grammar_vocab_free(voc);
    synth_free(&v);
}

/* ---- tool calls -------------------------------------------------------------------- */

static const char k_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10},\"unit\":{\"enum\":[\"c\",\"f\"]}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

static const char *tool_params(const char *name)
{
    if (!strcmp(name, "get_weather"))
        return "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10},\"unit\":"
               "{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"],\"additionalProperties\":false}";
    if (!strcmp(name, "add"))
        return "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},"
               "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}";
    return !strcmp(name, "now") ? "{\"type\":\"object\"}" : NULL;
}

static void check_tool_text(const char *text, size_t n, const char *only, int parallel)
{
    tg_calls c;
    tg_parse_calls(text, n, &c);
    CHECK_MSG(c.n >= 1 && (parallel || c.n == 1) && !c.content, "'%s': %d calls, %zu content bytes", text, c.n,
              c.content);
    const char *params = tool_params(c.name);
    CHECK_MSG(params && (!only || !strcmp(c.name, only)), "'%s': name '%s'", text, c.name);
    if (params && c.args) {
        char why[200];
        CHECK_MSG(!frt_json_schema_validate(params, strlen(params), c.args, strlen(c.args), why, sizeof why),
                  "'%s': arguments %s: %s", text, c.args, why);
    }
    free(c.args);
}

static void test_tool_calls(void)
{
    synth v;
    frt_test_seed(9);
    synth_make(&v, 2000);
    frt_grammar_vocab *voc = NULL;
    CHECK_OK(frt_grammar_vocab_create_bytes(v.n, (const uint8_t *const *)v.bytes, v.lens, v.special, &v.eos, 1, &voc));
    int64_t words = (v.n + 31) / 32;
    uint32_t *mask = xmalloc((size_t)words * 4);
    int parsed = 0, tag_tokens = 0;
    for (int mode = 0; mode < 3; mode++) {
        const char *only = mode == 2 ? "add" : NULL;
        frt_grammar *g = NULL;
        CHECK_OK(frt_grammar_compile_tool_calls(k_tools, strlen(k_tools), only, mode == 1, &g, NULL));
        if (!g) continue;
        mask_walks(&v, voc, g, 3, "tool calls");
        for (int seed = 0; seed < 20; seed++) {
            frt_test_seed(300 + (uint64_t)seed);
            frt_grammar_matcher *m;
            frt_grammar_matcher_create(g, voc, &m);
            char text[4096];
            size_t n = 0;
            for (int step = 0; step < 600 && !frt_grammar_matcher_ended(m); step++) {
                if (frt_grammar_matcher_mask(m, mask, words) <= 0) break;
                int pick = -1;
                if ((mask[v.eos >> 5] >> (v.eos & 31) & 1) && (frt_test_u64() % 4)) pick = v.eos;
                while (pick < 0) {
                    int id = (int)(frt_test_u64() % (uint64_t)v.n);
                    if (mask[id >> 5] >> (id & 31) & 1) pick = id;
                }
                CHECK_OK(frt_grammar_matcher_accept(m, pick));
                tag_tokens += v.special[pick] && pick != v.eos;
                if (pick != v.eos && n + v.lens[pick] < sizeof text) {
                    memcpy(text + n, v.bytes[pick], v.lens[pick]);
                    n += v.lens[pick];
                }
            }
            text[n] = '\0';
            if (frt_grammar_matcher_ended(m)) {
                check_tool_text(text, n, only, mode == 1);
                parsed++;
            }
            frt_grammar_matcher_free(m);
        }
        frt_grammar_free(g);
    }
    printf("tool calls: %d token walks ended, each parsed as tool calls (%d <tool_call> special tokens used)\n",
           parsed, tag_tokens);
    CHECK(parsed >= 45);
    CHECK(tag_tokens > 0);
    /* the guard: no string spells the end tag (the parser would end the call there) */
    frt_grammar *g = NULL;
    frt_grammar_diag d;
    CHECK_OK(frt_grammar_compile_tool_calls(k_tools, strlen(k_tools), "now", 0, &g, NULL));
    static const char head[] = "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"k\": \"";
    char t[256];
    snprintf(t, sizeof t, "%sa</tool_cal></tool_call", head);
    CHECK(g && run_text(g, t) == 0);
    snprintf(t, sizeof t, "%sa</tool_call>", head);
    CHECK(g && run_text(g, t) == -1);
    snprintf(t, sizeof t, "%s<</tool_call>", head);
    CHECK(g && run_text(g, t) == -1);
    snprintf(t, sizeof t, "%s</tool_\\u0063all>\"}}\n</tool_call>", head); /* escaped: JSON text differs */
    CHECK(g && run_text(g, t) == 1);
    frt_grammar_free(g);
    g = NULL;
    /* refusals */
    CHECK_STATUS(frt_grammar_compile_tool_calls(k_tools, strlen(k_tools), "nope", 0, &g, &d), FRT_ERR_NOT_FOUND);
    CHECK(!strcmp(d.keyword, "tool_choice"));
    const char *bad = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                      "\"properties\":{\"x\":{\"type\":\"string\",\"format\":\"email\"}}}}}]";
    CHECK_STATUS(frt_grammar_compile_tool_calls(bad, strlen(bad), NULL, 0, &g, &d), FRT_ERR_UNSUPPORTED);
    CHECK_MSG(!strcmp(d.keyword, "format") && strstr(d.path, "/tools/0/function/parameters"), "%s %s", d.keyword, d.path);
    CHECK_STATUS(frt_grammar_compile_tool_calls("{}", 2, NULL, 0, &g, &d), FRT_ERR_FORMAT);
    CHECK(!strcmp(d.keyword, "tools"));
    free(mask);
    frt_grammar_vocab_free(voc);
    synth_free(&v);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--dump")) g_dump = fopen(argv[2], "w");
    json_t *schemas = load(DATA "schemas.json"), *cases = load(DATA "validate_cases.json");
    CHECK(schemas && cases);
    test_texts();
    test_refusals();
    if (cases) test_validator(cases);
    if (schemas) test_walks(schemas);
    if (schemas && !g_dump) test_masks(schemas);
    if (!g_dump) test_tool_calls();
    json_decref(schemas);
    json_decref(cases);
    if (g_dump) fclose(g_dump);
    return frt_test_report();
}
