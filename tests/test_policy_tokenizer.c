/*
 * test_policy_tokenizer.c - the policy prompt (frt/policy_io.h): frt's ids
 * through libsentencepiece against spm_encode on many strings (unicode,
 * empty, 20,000 characters), openpi's prompt strings (Pi0 cleaning, Pi0.5's
 * "Task: ..., State: ...;\nAction: " with the 256-bin state) against
 * goldens computed by numpy, padding and truncation, and every refusal.
 * The SentencePiece model is trained at test time (policy_test_util.h).
 */
#include "policy_test_util.h"

#include "frt/tokenizer.h"

static frt_policy_tokenizer *tok;

/* Splits TEXT at '\n' into lines (in place); returns the count. */
static size_t split_lines(char *text, size_t len, char ***out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += text[i] == '\n';
    char **lines = xmalloc((n + 1) * sizeof *lines);
    size_t k = 0;
    char *s = text;
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\n') {
            text[i] = '\0';
            lines[k++] = s;
            s = text + i + 1;
        }
    *out = lines;
    return k;
}

/* spm_encode's ids of one line ("1 2 3"). */
static size_t parse_ids(const char *line, int32_t *ids, size_t cap)
{
    size_t n = 0;
    char *end;
    for (const char *p = line; *p && n < cap; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
    }
    return n;
}

static void test_against_spm_encode(const json_t *m)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "spm_encode --model=%s --output_format=id < %s > %s", ptu_path("spm.model"),
             ptu_path("strings.txt"), ptu_path("ids.txt"));
    ptu_run(cmd);
    size_t slen, ilen;
    char *stext = ptu_read("strings.txt", &slen), *itext = ptu_read("ids.txt", &ilen);
    char **strs, **idl;
    size_t ns = split_lines(stext, slen, &strs), ni = split_lines(itext, ilen, &idl);
    CHECK(ns == (size_t)json_integer_value(json_object_get(m, "n_strings")));
    CHECK(ns == ni);
    int32_t *want = xmalloc(100000 * sizeof *want);
    size_t n_same = 0, total_ids = 0;
    for (size_t i = 0; i < ns && i < ni; i++) {
        size_t nw = parse_ids(idl[i], want, 100000), n = 0;
        int32_t *got = NULL;
        CHECK_OK(frt_policy_tokenizer_encode(tok, strs[i], strlen(strs[i]), 0, &got, &n));
        int same = n == nw && (n == 0 || !memcmp(got, want, n * sizeof *got));
        CHECK_MSG(same, "string %zu (%zu bytes): %zu ids, spm_encode %zu", i, strlen(strs[i]), n, nw);
        n_same += same;
        total_ids += n;
        free(got);
    }
    printf("tokenizer: %zu / %zu strings give spm_encode's ids (%zu ids)\n", n_same, ns, total_ids);
    free(want), free(strs), free(idl), free(stext), free(itext);
}

static void test_encode_basics(void)
{
    int vocab = frt_policy_tokenizer_vocab_size(tok); /* 4 specials + 256 bytes + pieces */
    CHECK(vocab > 260 && vocab <= 1000);
    CHECK(frt_policy_tokenizer_bos_id(tok) == 2);
    int32_t *ids = NULL;
    size_t n = 9;
    CHECK_OK(frt_policy_tokenizer_encode(tok, "", 0, 1, &ids, &n));
    CHECK(n == 1 && ids && ids[0] == 2);
    free(ids);
    CHECK_OK(frt_policy_tokenizer_encode(tok, "\n", 1, 0, &ids, &n)); /* byte fallback <0x0A> */
    CHECK(n == 1 && ids[0] > 3 && ids[0] < vocab);
    free(ids);
    CHECK_STATUS(frt_policy_tokenizer_encode(tok, "\xff\xfe", 2, 0, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK(ids == NULL && n == 0);
    CHECK_STATUS(frt_policy_tokenizer_encode(NULL, "a", 1, 0, &ids, &n), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_policy_tokenizer_vocab_size(NULL) == 0 && frt_policy_tokenizer_bos_id(NULL) == -1);
}

static void test_load_refusals(void)
{
    frt_policy_tokenizer *t = (frt_policy_tokenizer *)1;
    CHECK_STATUS(frt_policy_tokenizer_load(ptu_path("no_such.model"), &t), FRT_ERR_NOT_FOUND);
    CHECK(t == NULL);
    const char *json = "  {\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1.0]]}}";
    CHECK_STATUS(frt_policy_tokenizer_load_memory(json, strlen(json), &t), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "tokenizer.json") != NULL);
    /* why: frt's own tokenizer (byte-level BPE) refuses a Unigram model too */
    const char *unigram = "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, "
                          "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\"}, "
                          "\"post_processor\": null, \"decoder\": null, "
                          "\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, "
                          "\"vocab\": [[\"<unk>\", 0.0], [\"a\", -1.0]], \"byte_fallback\": true}}";
    frt_tokenizer *ft = NULL;
    CHECK_STATUS(frt_tokenizer_load_json(unigram, strlen(unigram), &ft), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "Unigram") != NULL);
    CHECK(ft == NULL);
    const char junk[] = "\x08\x96\x01 this is not a model proto \x12\xff";
    CHECK_STATUS(frt_policy_tokenizer_load_memory(junk, sizeof junk - 1, &t), FRT_ERR_FORMAT);
    CHECK_STATUS(frt_policy_tokenizer_load_memory(junk, 0, &t), FRT_ERR_INVALID_ARGUMENT);
    size_t len;
    char *model = ptu_read("spm.model", &len);
    CHECK_STATUS(frt_policy_tokenizer_load_memory(model, len / 2, &t), FRT_ERR_FORMAT); /* truncated */
    CHECK(t == NULL);
    free(model);
    frt_policy_tokenizer_free(NULL);
}

/* ids of TEXT through spm_encode (no '\n' in TEXT). */
static size_t spm_ids(const char *text, int32_t *ids, size_t cap)
{
    FILE *f = fopen(ptu_path("one.txt"), "w");
    fprintf(f, "%s\n", text);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "spm_encode --model=%s --output_format=id < %s > %s", ptu_path("spm.model"),
             ptu_path("one.txt"), ptu_path("one.ids"));
    ptu_run(cmd);
    size_t len;
    char *t = ptu_read("one.ids", &len);
    size_t n = parse_ids(t, ids, cap);
    free(t);
    return n;
}

/* Pi0: [BOS] + spm(cleaned) + encode("\n"); Pi0.5: [BOS] + spm(before "\n")
 * + encode("\n") + spm(after): pieces of this model never span the '\n'
 * (its corpus has none) so the split is exact. */
static void check_prompt_ids(const json_t *g, frt_policy_variant v, int32_t nl)
{
    const char *prompt = json_string_value(json_object_get(g, "prompt"));
    size_t n_state;
    float *state = ptu_floats(json_object_get(g, "state"), &n_state);
    int32_t want[512], ids[512];
    uint8_t mask[512];
    size_t n = 0, nv = 0, nu = 0;
    want[n++] = 2;
    if (v == FRT_POLICY_PI0) {
        n += spm_ids(json_string_value(json_object_get(g, "cleaned")), want + n, 400);
        want[n++] = nl;
    } else {
        char *text = strdup(json_string_value(json_object_get(g, "pi05_text")));
        char *cut = strchr(text, '\n');
        *cut = '\0';
        n += spm_ids(text, want + n, 200);
        want[n++] = nl;
        n += spm_ids(cut + 1, want + n, 200);
        free(text);
    }
    CHECK_OK(frt_policy_tokenize(tok, v, prompt, state, n_state, 300, ids, mask, &nv, &nu));
    CHECK_MSG(nv == n && nu == n && !memcmp(ids, want, n * sizeof *ids), "%s prompt '%s': %zu ids, want %zu",
              v == FRT_POLICY_PI0 ? "pi0" : "pi05", prompt, nv, n);
    int pad_ok = 1;
    for (size_t i = 0; i < 300; i++) pad_ok &= mask[i] == (i < n) && (i < n || ids[i] == 0);
    CHECK(pad_ok);
    /* cut to fewer tokens than the prompt has: openpi keeps the first ones */
    size_t cut_len = n - 2;
    CHECK_OK(frt_policy_tokenize(tok, v, prompt, state, n_state, cut_len, ids, mask, &nv, &nu));
    CHECK(nv == cut_len && nu == n && !memcmp(ids, want, cut_len * sizeof *ids) && mask[cut_len - 1] == 1);
    free(state);
}

static void test_prompts(const json_t *m)
{
    int32_t *nl_ids = NULL;
    size_t n_nl = 0;
    CHECK_OK(frt_policy_tokenizer_encode(tok, "\n", 1, 0, &nl_ids, &n_nl));
    const json_t *prompts = json_object_get(m, "prompts");
    for (size_t i = 0; i < json_array_size(prompts); i++) {
        const json_t *g = json_array_get(prompts, i);
        const char *prompt = json_string_value(json_object_get(g, "prompt"));
        size_t n_state;
        float *state = ptu_floats(json_object_get(g, "state"), &n_state);
        char *text = NULL;
        CHECK_OK(frt_policy_prompt_text(FRT_POLICY_PI0, prompt, NULL, 0, &text));
        CHECK_MSG(text && !strcmp(text, json_string_value(json_object_get(g, "cleaned"))), "pi0 text '%s'", text);
        free(text);
        CHECK_OK(frt_policy_prompt_text(FRT_POLICY_PI05, prompt, state, n_state, &text));
        CHECK_MSG(text && !strcmp(text, json_string_value(json_object_get(g, "pi05_text"))), "pi05 text '%s'", text);
        free(text);
        check_prompt_ids(g, FRT_POLICY_PI0, nl_ids[0]);
        check_prompt_ids(g, FRT_POLICY_PI05, nl_ids[0]);
        free(state);
    }
    free(nl_ids);
}

static void test_state_bins(void)
{
    const float x[] = {-2.0f, -1.0f, -0.9921875f, -0.99f, 0.0f, 0.5f, 0.9921875f, 0.99f, 1.0f, 3.0f};
    const int32_t want[] = {-1, 0, 1, 1, 128, 192, 255, 254, 255, 255}; /* numpy.digitize */
    int32_t bins[10];
    CHECK_OK(frt_policy_state_bins(x, 10, bins));
    CHECK(!memcmp(bins, want, sizeof want));
    const float bad[] = {0.0f, NAN};
    CHECK_STATUS(frt_policy_state_bins(bad, 2, bins), FRT_ERR_INVALID_ARGUMENT);
}

static void test_prompt_refusals(void)
{
    char *text = NULL;
    const float st[] = {0.1f, NAN};
    int32_t ids[8];
    uint8_t mask[8];
    size_t nv;
    CHECK_STATUS(frt_policy_prompt_text(FRT_POLICY_PI0, " \t\n\u3000 ", NULL, 0, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_prompt_text(FRT_POLICY_PI0, "", NULL, 0, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_prompt_text(FRT_POLICY_PI05, "go", NULL, 0, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_prompt_text(FRT_POLICY_PI05, "go", st, 2, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_prompt_text(FRT_POLICY_PI0, "bad \xc3(", NULL, 0, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_prompt_text((frt_policy_variant)7, "go", NULL, 0, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL);
    CHECK_STATUS(frt_policy_tokenize(tok, FRT_POLICY_PI0, "go", NULL, 0, 0, ids, mask, &nv, NULL),
                 FRT_ERR_INVALID_ARGUMENT);
    frt_policy_variant v;
    CHECK_OK(frt_policy_variant_parse("pi05", &v));
    CHECK(v == FRT_POLICY_PI05);
    CHECK_STATUS(frt_policy_variant_parse("pi1", &v), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_policy_default_max_tokens(FRT_POLICY_PI0) == 48 && frt_policy_default_max_tokens(FRT_POLICY_PI05) == 200);
}

/* The conditioned prompt of CFG: the indicator appended, then cleaned
 * (strip, '_' and '\n' -> ' '); the Pi0.5 text built from it holds it; the
 * refusals (nothing allocated). */
static void test_cfg_prompt(void)
{
    char *text = NULL, *full = NULL;
    CHECK_OK(frt_policy_cfg_prompt("  pick_up\tthe cup\n ", 1, &text));
    /* appended before the cleaning: the task's trailing "\n " stays inside, as spaces */
    CHECK_MSG(text && !strcmp(text, "pick up\tthe cup   Advantage: positive"), "cfg prompt '%s'", text ? text : "");
    const float st[] = {0.5f, -1.0f};
    if (text) CHECK_OK(frt_policy_prompt_text(FRT_POLICY_PI05, text, st, 2, &full));
    CHECK(full && !strcmp(full, "Task: pick up\tthe cup   Advantage: positive, State: 192 0;\nAction: "));
    free(text);
    free(full);
    CHECK_OK(frt_policy_cfg_prompt("fold\u3000", 0, &text));
    CHECK(text && !strcmp(text, "fold\u3000 Advantage: negative"));
    free(text);
    text = NULL;
    CHECK_STATUS(frt_policy_cfg_prompt(" \n\u3000 ", 1, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_cfg_prompt("go", 2, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_cfg_prompt("bad \xc3(", 1, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_cfg_prompt(NULL, 1, &text), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_cfg_prompt("go", 1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL);
}

int main(void)
{
    json_t *m = ptu_setup(1);
    CHECK_OK(frt_policy_tokenizer_load(ptu_path("spm.model"), &tok));
    if (!tok) return frt_test_report();
    test_against_spm_encode(m);
    test_encode_basics();
    test_load_refusals();
    test_prompts(m);
    test_state_bins();
    test_prompt_refusals();
    test_cfg_prompt();
    frt_policy_tokenizer_free(tok);
    json_decref(m);
    return frt_test_report();
}
