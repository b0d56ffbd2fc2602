/* test_tokenizer_golden.c - frt's ids against the Hugging Face reference.
 *
 * tests/data/tokenizer/ holds three tokenizers trained with `tokenizers`
 * (qwen35: NFC + Qwen3.5 split regex + ByteLevel; qwen2: Qwen2 regex, legacy
 * merges, added tokens with every flag; gpt2: ByteLevel with the GPT-2
 * regex and a prefix space, ignore_merges, a BOS template) and golden.json:
 * the ids `tokenizers` gives for a set of texts (English, code, CJK, emoji,
 * combining marks, white space runs, specials, empty), with and without
 * special tokens, the decodes of id lists, and the ids of chat prompts from
 * transformers' apply_chat_template. All made by
 * scripts/ref/make_tokenizer.py on the GPU machine; the test is skipped
 * (77) while golden.json is absent. */
#include "frt_test.h"
#include "test_tokenizer_fixture.h"
#include "text/chat.h"
#include "frt/tokenizer.h"

#include <jansson.h>

#define MAX_TOK 8

static int ids_equal(const int32_t *ids, size_t n, const json_t *want)
{
    if (!json_is_array(want) || json_array_size(want) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(want, i)) != ids[i]) return 0;
    return 1;
}

static int32_t *ids_of(const json_t *arr, size_t *n)
{
    *n = json_array_size(arr);
    int32_t *v = malloc((*n ? *n : 1) * sizeof *v);
    for (size_t i = 0; v && i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return v;
}

static void print_diff(const int32_t *ids, size_t n, const json_t *want)
{
    size_t m = json_array_size(want), k = 0;
    while (k < n && k < m && json_integer_value(json_array_get(want, k)) == ids[k]) k++;
    fprintf(stderr, "  %zu ids, want %zu; first difference at %zu: got %d, want %lld\n", n, m, k,
            k < n ? ids[k] : -1, k < m ? (long long)json_integer_value(json_array_get(want, k)) : -1LL);
}

/* decode and the streaming decoder both give WANT */
static void check_decode(const frt_tokenizer *tok, const int32_t *ids, size_t n, const json_t *want, const char *what)
{
    char *text = NULL;
    size_t len = 0;
    int rc = frt_tokenizer_decode(tok, ids, n, &text, &len);
    CHECK_MSG(rc == 0 && len == json_string_length(want) && !memcmp(text, json_string_value(want), len),
              "%s: decode differs (rc %s %s)", what, frt_status_name(rc), frt_last_error());
    free(text);
    frt_detok_stream *s = NULL;
    CHECK_OK(frt_detok_stream_create(tok, &s));
    char *acc = malloc(json_string_length(want) + 64);
    size_t an = 0;
    int ok = s && acc;
    for (size_t i = 0; ok && i <= n; i++) {
        const char *p;
        size_t pl;
        rc = i < n ? frt_detok_stream_push(s, ids[i], &p, &pl) : frt_detok_stream_flush(s, &p, &pl);
        if (rc || an + pl > json_string_length(want)) {
            ok = 0;
            break;
        }
        memcpy(acc + an, p, pl);
        an += pl;
    }
    CHECK_MSG(ok && an == json_string_length(want) && !memcmp(acc, json_string_value(want), an),
              "%s: streaming decode differs", what);
    free(acc);
    frt_detok_stream_free(s);
}

static void check_tokenizer(const char *name, const json_t *spec, frt_tokenizer *tok)
{
    CHECK_MSG(frt_tokenizer_vocab_size(tok) == json_integer_value(json_object_get(spec, "vocab_size")),
              "%s: vocab size %d", name, frt_tokenizer_vocab_size(tok));
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(spec, "cases"), i, c) {
        const json_t *text = json_object_get(c, "text");
        const char *cname = json_string_value(json_object_get(c, "name"));
        char what[128];
        snprintf(what, sizeof what, "%s/%s", name, cname);
        for (int special = 0; special < 2; special++) {
            const json_t *want = json_object_get(c, "ids");
            if (special && json_object_get(c, "ids_special")) want = json_object_get(c, "ids_special");
            int32_t *ids = NULL;
            size_t n = 0;
            int rc = frt_tokenizer_encode_ex(tok, json_string_value(text), json_string_length(text), special, &ids, &n);
            int same = rc == 0 && ids_equal(ids, n, want);
            CHECK_MSG(same, "%s (special tokens %d): ids differ from tokenizers (rc %s %s)", what, special,
                      frt_status_name(rc), frt_last_error());
            if (!same) print_diff(ids, n, want);
            if (!special) check_decode(tok, ids, n, json_object_get(c, "decoded"), what);
            free(ids);
        }
    }
    json_array_foreach(json_object_get(spec, "decode"), i, c) {
        size_t n;
        int32_t *ids = ids_of(json_object_get(c, "ids"), &n);
        char what[64];
        snprintf(what, sizeof what, "%s/decode %zu", name, i);
        check_decode(tok, ids, n, json_object_get(c, "text"), what);
        free(ids);
    }
}

static void check_chat(const json_t *golden, const json_t *chat_golden, const char *const *names,
                       frt_tokenizer *const *toks, int n_tok)
{
    const json_t *templates = json_object_get(chat_golden, "templates");
    const json_t *convs = json_object_get(chat_golden, "conversations");
    size_t i, n_checked = 0;
    const json_t *c;
    json_array_foreach(json_object_get(golden, "chat"), i, c) {
        const char *tname = json_string_value(json_object_get(c, "tokenizer"));
        frt_tokenizer *tok = NULL;
        for (int k = 0; k < n_tok; k++)
            if (tname && !strcmp(tname, names[k])) tok = toks[k];
        const char *tmpl = json_string_value(json_object_get(templates, json_string_value(json_object_get(c, "template"))));
        const json_t *conv = json_array_get(convs, (size_t)json_integer_value(json_object_get(c, "conversation")));
        CHECK(tok && tmpl && conv);
        if (!tok || !tmpl || !conv) continue;
        frt_chat_options opt;
        frt_chat_message msgs[16];
        int n = chat_case_messages(c, conv, msgs, &opt);
        char *text = NULL;
        size_t len = 0;
        int rc = frt_chat_render(tmpl, msgs, n, &opt, &text, &len);
        if (json_object_get(c, "error")) {
            CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT, "chat case %zu: transformers raised, frt gave %s", i, frt_status_name(rc));
        } else {
            const json_t *want = json_object_get(c, "text");
            CHECK_MSG(rc == 0 && len == json_string_length(want) && !memcmp(text, json_string_value(want), len),
                      "chat case %zu (%s): text differs from apply_chat_template", i, tname);
            int32_t *ids = NULL;
            size_t nid = 0;
            if (text) rc = frt_tokenizer_encode(tok, text, len, &ids, &nid);
            CHECK_MSG(rc == 0 && ids_equal(ids, nid, json_object_get(c, "ids")), "chat case %zu: ids differ", i);
            free(ids);
            n_checked++;
        }
        free(text);
    }
    CHECK(n_checked > 50);
}

int main(void)
{
    json_error_t err;
    json_t *golden = json_load_file(FRT_TEST_DATA "/tokenizer/golden.json", 0, &err);
    if (!golden) TEST_SKIP("tests/data/tokenizer/golden.json absent (scripts/ref/make_tokenizer.py makes it)");
    json_t *chat_golden = json_load_file(FRT_TEST_DATA "/tokenizer/chat_golden.json", 0, &err);
    CHECK_MSG(chat_golden != NULL, "chat_golden.json: %s", err.text);

    const char *names[MAX_TOK];
    frt_tokenizer *toks[MAX_TOK];
    int n_tok = 0;
    const char *name;
    const json_t *spec;
    json_object_foreach(json_object_get(golden, "tokenizers"), name, spec) {
        if (n_tok == MAX_TOK) break;
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/tokenizer/%s", FRT_TEST_DATA, json_string_value(json_object_get(spec, "dir")));
        frt_tokenizer *tok = NULL;
        CHECK_OK(frt_tokenizer_load(dir, &tok));
        if (!tok) continue;
        check_tokenizer(name, spec, tok);
        names[n_tok] = name;
        toks[n_tok++] = tok;
    }
    CHECK(n_tok == 3);
    /* the chat templates the directories ship, loaded the way transformers loads them */
    const json_t *templates = json_object_get(chat_golden, "templates");
    for (int k = 0; k < n_tok; k++) {
        const char *t = frt_tokenizer_chat_template(toks[k]);
        if (!strcmp(names[k], "qwen35"))
            CHECK(t && !strcmp(t, json_string_value(json_object_get(templates, "chatml"))));
        else if (!strcmp(names[k], "qwen2"))
            CHECK(t && !strcmp(t, json_string_value(json_object_get(templates, "qwen2.5"))));
        else
            CHECK(t == NULL);
    }
    if (chat_golden) check_chat(golden, chat_golden, names, toks, n_tok);
    const json_t *checks = json_object_get(golden, "transformers_checks");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)checks, key, v)
        if (!json_is_true(json_object_get(v, "ids_match_tokenizers")))
            printf("note: transformers (%s) did not give tokenizers' ids on %s\n",
                   json_string_value(json_object_get(v, "loader")), key);
    for (int k = 0; k < n_tok; k++) frt_tokenizer_free(toks[k]);
    json_decref(golden);
    json_decref(chat_golden);
    return frt_test_report();
}
