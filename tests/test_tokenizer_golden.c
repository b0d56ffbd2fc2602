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
 * (77) while golden.json is absent.
 *
 * test_tokenizer_golden --real TEXTS REF NAME=DIR... compares the ids of
 * real tokenizers instead (tests/sh/tokenizer_real*.sh): REF from
 * scripts/ref/make_tokenizer_goldens.py (HF tokenizers) or
 * tests/node/tokenizers-real/encode.mjs (the JavaScript cross-check). */
#include "frt_test.h"
#include "test_tokenizer_fixture.h"
#include "text/chat.h"
#include "frt/tokenizer.h"

#include <jansson.h>
#include <openssl/evp.h>

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

/* ---- --real: real tokenizers against a golden id file ---------------------------- */
/* lower-case hex SHA-256 of the file at PATH into HEX[65]; 0 or -1 */
static int file_sha256(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    unsigned char buf[1 << 16], md[32];
    size_t r;
    while (ok && (r = fread(buf, 1, sizeof buf, f)) > 0) ok = EVP_DigestUpdate(ctx, buf, r);
    unsigned len = 0;
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    for (int i = 0; ok && i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return ok ? 0 : -1;
}

static int same_sha(const char *path, const json_t *want)
{
    char hex[65];
    return file_sha256(path, hex) == 0 && json_is_string(want) && !strcmp(hex, json_string_value(want));
}

/* the ids of every text (and, with special tokens, of the first ones) equal SPEC's */
static void check_real(const char *name, const char *dir, const json_t *spec, const json_t *texts)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK_MSG(same_sha(path, json_object_get(spec, "tokenizer_json_sha256")),
              "%s: %s is not the file the reference ids were made from", name, path);
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    if (!tok) return;
    const json_t *vs = json_object_get(spec, "vocab_size");
    CHECK_MSG(!vs || frt_tokenizer_vocab_size(tok) == json_integer_value(vs), "%s: vocab size %d", name,
              frt_tokenizer_vocab_size(tok));
    size_t n_ids = 0, agree = 0, cases = 0;
    for (int special = 0; special < 2; special++) {
        const json_t *want = json_object_get(spec, special ? "ids_special" : "ids");
        CHECK_MSG(json_is_array(want) && (special || json_array_size(want) == json_array_size(texts)),
                  "%s: no %s list for every text", name, special ? "ids_special" : "ids");
        for (size_t i = 0; i < json_array_size(want) && i < json_array_size(texts); i++) {
            const json_t *t = json_array_get(texts, i), *w = json_array_get(want, i);
            int32_t *ids = NULL;
            size_t n = 0;
            CHECK_OK(frt_tokenizer_encode_ex(tok, json_string_value(t), json_string_length(t), special, &ids, &n));
            int ok = ids_equal(ids, n, w);
            CHECK_MSG(ok, "%s: text %zu%s differs", name, i, special ? " (special tokens)" : "");
            if (!ok) print_diff(ids, n, w);
            cases++;
            agree += (size_t)ok;
            n_ids += n;
            free(ids);
        }
    }
    printf("%s: %zu of %zu cases agree (%zu ids)\n", name, agree, cases, n_ids);
    frt_tokenizer_free(tok);
}

/* test_tokenizer_golden --real TEXTS REF NAME=DIR...: frt's ids of each text of
 * TEXTS (a JSON list of strings) against REF (scripts/ref/make_tokenizer_goldens.py
 * or tests/node/tokenizers-real/encode.mjs) for each tokenizer folder. */
static int real_main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test_tokenizer_golden --real TEXTS REF NAME=DIR...\n");
        return 2;
    }
    json_error_t err;
    json_t *texts = json_load_file(argv[2], 0, &err);
    json_t *ref = json_load_file(argv[3], 0, &err);
    CHECK_MSG(json_is_array(texts) && ref, "%s / %s: %s", argv[2], argv[3], err.text);
    if (!json_is_array(texts) || !ref) return frt_test_report();
    printf("reference: %s (%s)\n", argv[3], json_string_value(json_object_get(ref, "generator")));
    CHECK_MSG(same_sha(argv[2], json_object_get(ref, "texts_sha256")), "%s is not the texts file of %s", argv[2],
              argv[3]);
    for (int i = 4; i < argc; i++) {
        char name[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof name) {
            fprintf(stderr, "%s: expected NAME=DIR\n", argv[i]);
            return 2;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i]), argv[i]);
        const json_t *spec = json_object_get(json_object_get(ref, "tokenizers"), name);
        CHECK_MSG(spec != NULL, "%s: no tokenizer %s", argv[3], name);
        if (spec) check_real(name, eq + 1, spec, texts);
    }
    json_decref(texts);
    json_decref(ref);
    return frt_test_report();
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--real")) return real_main(argc, argv);
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
