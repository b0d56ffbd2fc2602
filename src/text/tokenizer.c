/* tokenizer.c - loading tokenizer.json (the encode pipeline is tok_encode.c).
 *
 * The reference is the Hugging Face `tokenizers` library, 0.23
 * (tokenizers/src/tokenizer/{mod,serialization,added_vocabulary}.rs,
 * models/bpe/{model,serialization}.rs, pre_tokenizers/{split,byte_level}.rs,
 * normalizers/unicode.rs, processors/template.rs). Each step below names the
 * Rust function it mirrors. */
#include "frt/tokenizer.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

/* ---- small JSON helpers -------------------------------------------------------- */

/* A bool field: absent or null gives DEF; anything but a bool is an error. */
int tok_json_bool(const json_t *obj, const char *key, int def, int *out, const char *what)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) return frt_error(FRT_ERR_FORMAT, "%s: \"%s\" is not a boolean", what, key);
    *out = json_is_true(v);
    return 0;
}

static const char *type_of(const json_t *obj)
{
    const json_t *t = json_object_get(obj, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* ---- normalizer ------------------------------------------------------------------ */
static int load_normalizer(frt_tokenizer *tok, const json_t *n, int depth)
{
    if (!n || json_is_null(n)) return 0;
    if (!json_is_object(n)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: normalizer is not an object");
    const char *type = type_of(n);
    if (!type) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: normalizer without a \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: normalizer Sequence without \"normalizers\"");
        if (depth > 8) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: normalizer Sequences nested too deep");
        size_t i;
        const json_t *e;
        json_array_foreach(list, i, e) FRT_TRY(load_normalizer(tok, e, depth + 1));
        return 0;
    }
    int form;
    if (!strcmp(type, "NFC"))
        form = TOK_NFC;
    else if (!strcmp(type, "NFD"))
        form = TOK_NFD;
    else if (!strcmp(type, "NFKC"))
        form = TOK_NFKC;
    else if (!strcmp(type, "NFKD"))
        form = TOK_NFKD;
    else
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: normalizer \"%s\" is not supported "
                         "(frt implements NFC, NFD, NFKC, NFKD and Sequence)", type);
    if (tok->n_norm == (int)(sizeof tok->norm / sizeof tok->norm[0]))
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: more than 8 normalizers");
    tok->norm[tok->n_norm++] = form;
    return 0;
}


/* ---- pre-tokenizer ------------------------------------------------------------------ */
static int add_stage(frt_tokenizer *tok, tok_stage **st)
{
    if (tok->n_stages >= 16) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: more than 16 pre-tokenizers");
    tok_stage *s = realloc(tok->stages, (size_t)(tok->n_stages + 1) * sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    tok->stages = s;
    *st = &s[tok->n_stages++];
    memset(*st, 0, sizeof **st);
    return 0;
}

static int load_pretok(frt_tokenizer *tok, const json_t *p, int depth)
{
    if (!p || json_is_null(p)) return 0;
    if (!json_is_object(p)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: pre_tokenizer is not an object");
    const char *type = type_of(p);
    if (!type) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer without a \"type\"");
    if (tok->n_stages && tok->stages[tok->n_stages - 1].is_byte_level)
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer \"%s\" after ByteLevel is "
                         "not supported (ByteLevel must come last)", type);
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: pre_tokenizer Sequence without \"pretokenizers\"");
        if (depth > 8) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer Sequences nested too deep");
        size_t i;
        const json_t *e;
        json_array_foreach(list, i, e) FRT_TRY(load_pretok(tok, e, depth + 1));
        return 0;
    }
    tok_stage *st = NULL;
    if (!strcmp(type, "ByteLevel")) {
        int trim = 0;
        FRT_TRY(add_stage(tok, &st));
        st->is_byte_level = 1;
        FRT_TRY(tok_json_bool(p, "add_prefix_space", 1, &st->add_prefix_space, "tokenizer.json: ByteLevel pre_tokenizer"));
        FRT_TRY(tok_json_bool(p, "trim_offsets", 1, &trim, "tokenizer.json: ByteLevel pre_tokenizer"));
        FRT_TRY(tok_json_bool(p, "use_regex", 1, &st->use_regex, "tokenizer.json: ByteLevel pre_tokenizer"));
        if (st->use_regex && !tok->gpt2_re.code) {
            /* pre_tokenizers/byte_level.rs RE */
            static const char gpt2[] =
                "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
            FRT_TRY(tok_regex_compile(&tok->gpt2_re, gpt2, sizeof gpt2 - 1, "ByteLevel regex"));
        }
        return 0;
    }
    if (!strcmp(type, "Split")) {
        FRT_TRY(add_stage(tok, &st));
        const json_t *pat = json_object_get(p, "pattern");
        const json_t *re = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
        const json_t *str = json_is_object(pat) ? json_object_get(pat, "String") : NULL;
        if (json_is_string(re))
            FRT_TRY(tok_regex_compile(&st->re, json_string_value(re), json_string_length(re),
                                      "tokenizer.json: Split pattern"));
        else if (json_is_string(str))
            FRT_TRY(tok_regex_compile_literal(&st->re, json_string_value(str), json_string_length(str),
                                              "tokenizer.json: Split pattern"));
        else
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: Split pre_tokenizer without a "
                             "{\"Regex\": ...} or {\"String\": ...} pattern");
        const json_t *b = json_object_get(p, "behavior");
        const char *bs = json_is_string(b) ? json_string_value(b) : NULL;
        if (!bs) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: Split pre_tokenizer without \"behavior\"");
        if (!strcmp(bs, "Removed"))
            st->behavior = TOK_REMOVED;
        else if (!strcmp(bs, "Isolated"))
            st->behavior = TOK_ISOLATED;
        else if (!strcmp(bs, "MergedWithPrevious"))
            st->behavior = TOK_MERGED_WITH_PREVIOUS;
        else if (!strcmp(bs, "MergedWithNext"))
            st->behavior = TOK_MERGED_WITH_NEXT;
        else if (!strcmp(bs, "Contiguous"))
            st->behavior = TOK_CONTIGUOUS;
        else
            return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: Split behavior \"%s\" is not supported", bs);
        FRT_TRY(tok_json_bool(p, "invert", 0, &st->invert, "tokenizer.json: Split pre_tokenizer"));
        return 0;
    }
    return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer \"%s\" is not supported "
                     "(frt implements Sequence, Split and ByteLevel)", type);
}

/* ---- model ---------------------------------------------------------------------------- */
static int string_option(const json_t *m, const char *key, const char **out)
{
    const json_t *v = json_object_get(m, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: BPE \"%s\" is not a string", key);
    *out = json_string_value(v);
    return 0;
}

static int lookup_merge_part(const frt_tokenizer *tok, const char *s, size_t n, size_t rank, int32_t *id)
{
    *id = tok_strmap_get(&tok->vocab, s, n);
    if (*id < 0)
        return frt_error(FRT_ERR_FORMAT, "tokenizer.json: merge %zu: token `%.*s` out of vocabulary", rank,
                         (int)(n > 200 ? 200 : n), s);
    return 0;
}

static int add_merge(frt_tokenizer *tok, const char *a, size_t na, const char *b, size_t nb, size_t rank,
                     tok_buf *cat)
{
    int32_t ia, ib, inew;
    FRT_TRY(lookup_merge_part(tok, a, na, rank, &ia));
    FRT_TRY(lookup_merge_part(tok, b, nb, rank, &ib));
    cat->n = 0;
    FRT_TRY(tok_buf_put(cat, a, na));
    FRT_TRY(tok_buf_put(cat, b, nb));
    FRT_TRY(lookup_merge_part(tok, cat->p, cat->n, rank, &inew));
    return tok_pairmap_put(&tok->merges, ia, ib, (uint32_t)rank, inew);
}

/* The raw bytes of vocabulary entry E into RAW when every character of it
 * is in the byte-level alphabet; 0 when one is not. */
static int raw_bytes(const tok_strmap_entry *e, tok_buf *raw)
{
    raw->n = 0;
    for (size_t j = 0; j < e->len;) {
        uint32_t cp;
        j += (size_t)tok_utf8_decode(e->key + j, &cp);
        int byte = tok_char_byte(cp);
        if (byte < 0) return 0;
        unsigned char c = (unsigned char)byte;
        if (tok_buf_put(raw, &c, 1)) return FRT_ERR_OUT_OF_MEMORY;
    }
    return 1;
}

/* word_ids: raw bytes -> id of every vocabulary entry made of byte-level
 * characters, so that a byte-level word that is one entry costs one lookup
 * (tok_bpe_word). With ignore_merges that lookup is the rule (model.rs looks
 * the word up before merging); without, whether the entry's own text merges
 * into it is learnt the first time the word is met (word_state, MODEL_MAX + 1
 * entries), not here: running the merge loop on 150 000 entries would cost
 * a fifth of the load. */
static int build_word_ids(frt_tokenizer *tok, int32_t model_max)
{
    if (!tok->ignore_merges && model_max >= 0) {
        tok->word_state = calloc((size_t)model_max + 1, sizeof *tok->word_state);
        if (!tok->word_state) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    FRT_TRY(tok_strmap_reserve(&tok->word_ids, tok->vocab.n));
    tok_buf raw = {0};
    int rc = 0;
    for (size_t k = 0; k < tok->vocab.cap && !rc; k++) {
        const tok_strmap_entry *ve = &tok->vocab.e[k];
        if (!ve->key) continue;
        rc = raw_bytes(ve, &raw);
        if (rc <= 0) {
            if (rc) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
            continue;
        }
        const char *r = tok_arena_dup(&tok->arena, raw.p ? raw.p : "", raw.n);
        rc = r ? tok_strmap_put(&tok->word_ids, r, raw.n, ve->val, NULL)
               : frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    tok_buf_free(&raw);
    return rc;
}

/* Model vocabulary strings by id, for the per-id tables (freed after load). */
typedef struct load_state {
    const char **model_str;
    uint32_t *model_len;
    int32_t model_max; /* largest model id, -1 none */
} load_state;

static int load_model(frt_tokenizer *tok, const json_t *m, load_state *ls)
{
    if (!json_is_object(m)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: no \"model\" object");
    const char *type = type_of(m);
    if (type && strcmp(type, "BPE"))
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: model type \"%s\" is not supported (frt "
                         "implements BPE)", type);
    const json_t *v = json_object_get(m, "dropout");
    if (v && !json_is_null(v)) {
        if (!json_is_number(v)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: BPE dropout is not a number");
        double d = json_number_value(v);
        if (!(d >= 0 && d <= 1)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: BPE dropout %g outside [0, 1]", d);
        if (d > 0)
            return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout %g is not supported "
                             "(random merges)", d);
    }
    const char *s;
    FRT_TRY(string_option(m, "continuing_subword_prefix", &s));
    if (s && *s)
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: BPE continuing_subword_prefix \"%s\" is not "
                         "supported", s);
    FRT_TRY(string_option(m, "end_of_word_suffix", &s));
    if (s && *s)
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: BPE end_of_word_suffix \"%s\" is not supported", s);
    int byte_fallback = 0;
    FRT_TRY(tok_json_bool(m, "byte_fallback", 0, &byte_fallback, "tokenizer.json: BPE"));
    if (byte_fallback)
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: BPE byte_fallback is not supported");
    FRT_TRY(tok_json_bool(m, "fuse_unk", 0, &tok->fuse_unk, "tokenizer.json: BPE"));
    FRT_TRY(tok_json_bool(m, "ignore_merges", 0, &tok->ignore_merges, "tokenizer.json: BPE"));
    v = json_object_get(m, "unk_token");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: BPE unk_token is not a string");
        tok->unk = tok_arena_dup(&tok->arena, json_string_value(v), json_string_length(v));
        if (!tok->unk) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        tok->unk_len = (uint32_t)json_string_length(v);
    }

    /* vocab: {"token": id, ...} */
    const json_t *vocab = json_object_get(m, "vocab");
    const json_t *merges = json_object_get(m, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges))
        return frt_error(FRT_ERR_FORMAT, "tokenizer.json: BPE model without \"vocab\" object and \"merges\" list");
    ls->model_max = -1;
    FRT_TRY(tok_strmap_reserve(&tok->vocab, json_object_size(vocab)));
    FRT_TRY(tok_pairmap_reserve(&tok->merges, json_array_size(merges)));
    for (void *it = json_object_iter((json_t *)vocab); it; it = json_object_iter_next((json_t *)vocab, it)) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        const json_t *val = json_object_iter_value(it);
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= TOK_MAX_ID)
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: vocab entry `%.*s`: id is not an integer in "
                             "[0, %d)", (int)(klen > 200 ? 200 : klen), key, TOK_MAX_ID);
        int32_t id = (int32_t)json_integer_value(val);
        const char *k = tok_arena_dup(&tok->arena, key, klen);
        if (!k) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        FRT_TRY(tok_strmap_put(&tok->vocab, k, klen, id, NULL));
        if (id > ls->model_max) ls->model_max = id;
    }
    tok->vocab_entries = tok->vocab.n;
    if (ls->model_max >= 0) {
        ls->model_str = calloc((size_t)ls->model_max + 1, sizeof *ls->model_str);
        ls->model_len = calloc((size_t)ls->model_max + 1, sizeof *ls->model_len);
        if (!ls->model_str || !ls->model_len) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        for (size_t i = 0; i < tok->vocab.cap; i++) {
            const tok_strmap_entry *e = &tok->vocab.e[i];
            if (!e->key) continue;
            if (ls->model_str[e->val])
                return frt_error(FRT_ERR_FORMAT, "tokenizer.json: vocab id %d is given to both `%s` and `%s`",
                                 e->val, ls->model_str[e->val], e->key);
            ls->model_str[e->val] = e->key;
            ls->model_len[e->val] = e->len;
        }
    }

    /* merges: [["a", "b"], ...] or the legacy ["a b", ...] (BPEVisitor) */
    tok_buf cat = {0};
    int rc = 0;
    size_t rank = 0, i;
    const json_t *e;
    int tuples = json_array_size(merges) && json_is_array(json_array_get(merges, 0));
    json_array_foreach(merges, i, e) {
        if (tuples) {
            const json_t *a = json_array_get(e, 0), *b = json_array_get(e, 1);
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(a) || !json_is_string(b)) {
                rc = frt_error(FRT_ERR_FORMAT, "tokenizer.json: merge %zu is not a pair of strings", i);
                break;
            }
            rc = add_merge(tok, json_string_value(a), json_string_length(a), json_string_value(b),
                           json_string_length(b), rank++, &cat);
        } else {
            if (!json_is_string(e)) {
                rc = frt_error(FRT_ERR_FORMAT, "tokenizer.json: merge %zu is not a string", i);
                break;
            }
            const char *line = json_string_value(e);
            size_t len = json_string_length(e);
            if (len >= 8 && !memcmp(line, "#version", 8)) continue;
            const char *sp = memchr(line, ' ', len);
            if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - line))) {
                rc = frt_error(FRT_ERR_FORMAT, "tokenizer.json: merges invalid at line %zu (not two "
                               "tokens separated by one space)", rank + 1);
                break;
            }
            rc = add_merge(tok, line, (size_t)(sp - line), sp + 1, len - (size_t)(sp + 1 - line), rank++, &cat);
        }
        if (rc) break;
    }
    tok_buf_free(&cat);
    FRT_TRY(rc);

    /* byte -> id of its byte-level character */
    for (int b = 0; b < 256; b++) {
        char u[4];
        int ul = tok_utf8_encode(tok_byte_char((unsigned char)b), u);
        tok->byte_id[b] = tok_strmap_get(&tok->vocab, u, (size_t)ul);
    }
    return build_word_ids(tok, ls->model_max);
}

/* ---- post-processor ------------------------------------------------------------------------- */
static int push_id(int32_t **v, size_t *n, int32_t id)
{
    int32_t *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    *v = p;
    p[(*n)++] = id;
    return 0;
}

static int load_template(frt_tokenizer *tok, const json_t *pp)
{
    const json_t *single = json_object_get(pp, "single");
    const json_t *specials = json_object_get(pp, "special_tokens");
    if (!json_is_array(single))
        return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing without a \"single\" template");
    if (tok->pp_pre || tok->pp_post || tok->n_pp_pre || tok->n_pp_post)
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: more than one TemplateProcessing");
    int seen_a = 0;
    size_t i;
    const json_t *piece;
    json_array_foreach(single, i, piece) {
        const json_t *sp = json_object_get(piece, "SpecialToken");
        const json_t *sq = json_object_get(piece, "Sequence");
        if (json_is_object(sq)) {
            const json_t *id = json_object_get(sq, "id");
            if (!json_is_string(id) || strcmp(json_string_value(id), "A") || seen_a)
                return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing single template must "
                                 "hold the sequence $A once");
            seen_a = 1;
            continue;
        }
        if (!json_is_object(sp))
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing piece %zu is neither "
                             "SpecialToken nor Sequence", i);
        const json_t *name = json_object_get(sp, "id");
        const json_t *def = json_is_string(name) && json_is_object(specials)
                                ? json_object_get(specials, json_string_value(name)) : NULL;
        const json_t *ids = json_is_object(def) ? json_object_get(def, "ids") : NULL;
        if (!json_is_array(ids))
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing special token %s has no ids",
                             json_is_string(name) ? json_string_value(name) : "?");
        size_t j;
        const json_t *idv;
        json_array_foreach(ids, j, idv) {
            if (!json_is_integer(idv) || json_integer_value(idv) < 0 || json_integer_value(idv) >= TOK_MAX_ID)
                return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing id out of range");
            int32_t id = (int32_t)json_integer_value(idv);
            FRT_TRY(seen_a ? push_id(&tok->pp_post, &tok->n_pp_post, id) : push_id(&tok->pp_pre, &tok->n_pp_pre, id));
        }
    }
    if (!seen_a)
        return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing single template lacks $A");
    return 0;
}

static int load_post(frt_tokenizer *tok, const json_t *pp, int depth)
{
    if (!pp || json_is_null(pp)) return 0;
    if (!json_is_object(pp)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: post_processor is not an object");
    const char *type = type_of(pp);
    if (!type) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: post_processor without a \"type\"");
    if (!strcmp(type, "ByteLevel")) return 0; /* offsets only: adds no ids */
    if (!strcmp(type, "TemplateProcessing")) return load_template(tok, pp);
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(pp, "processors");
        if (!json_is_array(list))
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: post_processor Sequence without \"processors\"");
        if (depth > 8) return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: post_processor Sequences nested too deep");
        size_t i;
        const json_t *e;
        json_array_foreach(list, i, e) FRT_TRY(load_post(tok, e, depth + 1));
        return 0;
    }
    return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: post_processor \"%s\" is not supported (frt "
                     "implements ByteLevel, TemplateProcessing and Sequence)", type);
}

/* ---- per-id tables ----------------------------------------------------------------------------- */
/* The ByteLevel decoder on one token string (Decoder for ByteLevel): its
 * bytes when every character is in the byte alphabet, else the string. */
static int byte_level_bytes(tok_arena *ar, const char *s, size_t n, const char **out, uint32_t *out_n)
{
    char small[256];
    char *buf = n <= sizeof small ? small : malloc(n);
    if (!buf) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    size_t k = 0;
    int ok = 1;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)tok_utf8_decode(s + i, &cp);
        int b = tok_char_byte(cp);
        if (b < 0) {
            ok = 0;
            break;
        }
        buf[k++] = (char)b;
    }
    int rc = 0;
    if (!ok || (k == n && !memcmp(buf, s, n))) {
        *out = s;
        *out_n = (uint32_t)n;
    } else {
        *out = tok_arena_dup(ar, buf, k);
        *out_n = (uint32_t)k;
        if (!*out) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    if (buf != small) free(buf);
    return rc;
}

static int build_tokens(frt_tokenizer *tok, const load_state *ls)
{
    int32_t max = ls->model_max;
    for (size_t k = 0; k < tok->n_added; k++)
        if (tok->added[k].id > max) max = tok->added[k].id;
    tok->n_tokens = max + 1;
    if (!tok->n_tokens) return 0;
    tok->tokens = calloc((size_t)tok->n_tokens, sizeof *tok->tokens);
    if (!tok->tokens) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    for (int32_t id = 0; id <= ls->model_max; id++) {
        if (!ls->model_str[id]) continue;
        tok->tokens[id].str = ls->model_str[id];
        tok->tokens[id].str_len = ls->model_len[id];
    }
    for (size_t k = 0; k < tok->n_added; k++) {
        const tok_added *a = &tok->added[k];
        tok_token *t = &tok->tokens[a->id];
        /* simple_id_to_token: the cached normalized form, else the content */
        t->str = a->pattern ? a->pattern : a->content;
        t->str_len = a->pattern ? a->pattern_len : a->content_len;
        /* a token is special when its content is in special_tokens_set */
        t->special = tok_strmap_get(&tok->special_set, a->content, a->content_len) >= 0;
    }
    for (int32_t id = 0; id < tok->n_tokens; id++) {
        tok_token *t = &tok->tokens[id];
        if (!t->str) continue;
        FRT_TRY(byte_level_bytes(&tok->arena, t->str, t->str_len, &t->bytes, &t->bytes_len));
    }
    for (size_t k = 0; k < tok->n_pp_pre; k++)
        if (tok->pp_pre[k] >= tok->n_tokens || !tok->tokens[tok->pp_pre[k]].str)
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing id %d names no token", tok->pp_pre[k]);
    for (size_t k = 0; k < tok->n_pp_post; k++)
        if (tok->pp_post[k] >= tok->n_tokens || !tok->tokens[tok->pp_post[k]].str)
            return frt_error(FRT_ERR_FORMAT, "tokenizer.json: TemplateProcessing id %d names no token", tok->pp_post[k]);
    return 0;
}

/* ---- load ------------------------------------------------------------------------------------------ */
static int load_root(frt_tokenizer *tok, const json_t *root)
{
    if (!json_is_object(root)) return frt_error(FRT_ERR_FORMAT, "tokenizer.json: not a JSON object");
    const json_t *v = json_object_get(root, "version");
    if (v && !(json_is_string(v) && !strcmp(json_string_value(v), "1.0")))
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: version %s is not supported (1.0 is)",
                         json_is_string(v) ? json_string_value(v) : "(not a string)");
    v = json_object_get(root, "truncation");
    if (v && !json_is_null(v))
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: truncation is not supported (must be null)");
    v = json_object_get(root, "padding");
    if (v && !json_is_null(v))
        return frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: padding is not supported (must be null)");

    load_state ls = {NULL, NULL, -1};
    tok_pairmap by_id = {0};
    int rc = load_model(tok, json_object_get(root, "model"), &ls);
    if (!rc) rc = load_normalizer(tok, json_object_get(root, "normalizer"), 0);
    if (!rc) rc = load_pretok(tok, json_object_get(root, "pre_tokenizer"), 0);
    if (!rc) {
        const json_t *d = json_object_get(root, "decoder");
        const char *type = json_is_object(d) ? type_of(d) : NULL;
        if (!d || json_is_null(d))
            rc = frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: decoder null is not supported (frt decodes "
                           "through the ByteLevel decoder)");
        else if (!type || strcmp(type, "ByteLevel"))
            rc = frt_error(FRT_ERR_UNSUPPORTED, "tokenizer.json: decoder \"%s\" is not supported (frt "
                           "implements ByteLevel)", type ? type : "(no type)");
    }
    if (!rc) rc = load_post(tok, json_object_get(root, "post_processor"), 0);
    if (!rc) rc = tok_load_added(tok, json_object_get(root, "added_tokens"), &by_id);
    if (!rc) rc = tok_build_tries(tok);
    if (!rc) rc = build_tokens(tok, &ls);
    tok_pairmap_free(&by_id);
    free(ls.model_str);
    free(ls.model_len);
    return rc;
}

int frt_tokenizer_load_json(const char *json, size_t len, frt_tokenizer **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_load_json: NULL out");
    *out = NULL;
    if (!json) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_load_json: NULL json");
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &jerr);
    if (!root)
        return frt_error(FRT_ERR_FORMAT, "tokenizer.json: line %d column %d: %s", jerr.line, jerr.column,
                         jerr.text);
    frt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        json_decref(root);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    int rc = load_root(tok, root);
    json_decref(root);
    if (rc) {
        frt_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return 0;
}

static int read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return frt_error(FRT_ERR_NOT_FOUND, "%s: no such file", path);
        return frt_error(FRT_ERR_IO, "%s: %s", path, strerror(errno));
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (!buf) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    } else if (ferror(f)) {
        rc = frt_error(FRT_ERR_IO, "%s: read error", path);
    } else if (n + 1 >= cap) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

static const char *const special_token_names[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};

/* the "chat_template" of CFG: a string, or the "default" of a list of
 * {name, template}; NULL when none */
static int config_template(const json_t *cfg, const char *path, const char **text)
{
    const json_t *ct = json_object_get(cfg, "chat_template");
    *text = NULL;
    if (json_is_string(ct)) {
        *text = json_string_value(ct);
    } else if (json_is_array(ct)) {
        size_t i;
        const json_t *e;
        json_array_foreach(ct, i, e) {
            const json_t *name = json_object_get(e, "name"), *t = json_object_get(e, "template");
            if (json_is_string(name) && !strcmp(json_string_value(name), "default") && json_is_string(t))
                *text = json_string_value(t);
        }
    } else if (ct && !json_is_null(ct)) {
        return frt_error(FRT_ERR_FORMAT, "%s: chat_template is neither a string nor a list", path);
    }
    return 0;
}

int tok_config_load(const char *path, char **chat_template, char *special[4])
{
    *chat_template = NULL;
    for (int i = 0; i < 4; i++) special[i] = NULL;
    char *data = NULL;
    size_t len = 0;
    FRT_TRY(read_file(path, &data, &len));
    json_error_t jerr;
    /* integers as reals: files carry model_max_length = 1e30 (transformers' VERY_LARGE_INTEGER) */
    json_t *cfg = json_loadb(data, len, JSON_DECODE_INT_AS_REAL, &jerr);
    free(data);
    if (!cfg || !json_is_object(cfg)) {
        int rc = frt_error(FRT_ERR_FORMAT, "%s: line %d: %s", path, cfg ? 0 : jerr.line,
                           cfg ? "not a JSON object" : jerr.text);
        json_decref(cfg);
        return rc;
    }
    const char *text = NULL;
    int rc = config_template(cfg, path, &text);
    if (!rc && text && !(*chat_template = strdup(text))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    for (int i = 0; i < 4 && !rc; i++) {
        const json_t *v = json_object_get(cfg, special_token_names[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (!json_is_string(v)) continue;
        special[i] = strdup(json_string_value(v));
        if (!special[i]) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    json_decref(cfg);
    if (rc) {
        free(*chat_template);
        *chat_template = NULL;
        for (int i = 0; i < 4; i++) {
            free(special[i]);
            special[i] = NULL;
        }
    }
    return rc;
}

/* DIR/tokenizer_config.json (absent: nothing), then DIR/chat_template.jinja,
 * which replaces the config's template when it exists (as transformers
 * prefers it). */
static int load_config(frt_tokenizer *tok, const char *dir)
{
    size_t plen = strlen(dir) + 64;
    char *path = malloc(plen);
    if (!path) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    snprintf(path, plen, "%s/tokenizer_config.json", dir);
    int rc = tok_config_load(path, &tok->chat_template, tok->special_tokens);
    if (rc == FRT_ERR_NOT_FOUND) rc = 0;
    char *data = NULL;
    size_t len = 0;
    snprintf(path, plen, "%s/chat_template.jinja", dir);
    int jr = rc ? FRT_ERR_NOT_FOUND : read_file(path, &data, &len);
    free(path);
    if (!jr) {
        if (!tok_utf8_valid(data, len) || memchr(data, '\0', len)) {
            free(data);
            return frt_error(FRT_ERR_FORMAT, "%s/chat_template.jinja: not UTF-8 text", dir);
        }
        free(tok->chat_template);
        tok->chat_template = data;
    } else if (jr != FRT_ERR_NOT_FOUND) {
        rc = jr;
    }
    return rc;
}

const char *frt_tokenizer_special_token(const frt_tokenizer *tok, const char *name)
{
    if (!tok || !name) return NULL;
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, special_token_names[i])) return tok->special_tokens[i];
    return NULL;
}

int frt_tokenizer_set_special_token(frt_tokenizer *tok, const char *name, const char *value)
{
    if (!tok || !name) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_set_special_token: NULL argument");
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, special_token_names[i])) continue;
        char *copy = NULL;
        if (value && !(copy = strdup(value))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        free(tok->special_tokens[i]);
        tok->special_tokens[i] = copy;
        return 0;
    }
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_set_special_token: '%s' is not bos_token, eos_token, "
                     "unk_token or pad_token", name);
}

int frt_tokenizer_load(const char *model_dir, frt_tokenizer **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_load: NULL out");
    *out = NULL;
    if (!model_dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_load: NULL model_dir");
    struct stat st;
    if (stat(model_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return frt_error(FRT_ERR_NOT_FOUND, "%s: no such directory", model_dir);
    size_t plen = strlen(model_dir) + 32;
    char *path = malloc(plen);
    if (!path) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    snprintf(path, plen, "%s/tokenizer.json", model_dir);
    char *data;
    size_t len;
    int rc = read_file(path, &data, &len);
    if (rc) {
        free(path);
        return rc;
    }
    frt_tokenizer *tok = NULL;
    rc = frt_tokenizer_load_json(data, len, &tok);
    free(data);
    if (rc) {
        frt_error_prefix("%s", path);
        free(path);
        return rc;
    }
    free(path);
    rc = load_config(tok, model_dir);
    if (rc) {
        frt_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return 0;
}

void frt_tokenizer_free(frt_tokenizer *tok)
{
    if (!tok) return;
    tok_strmap_free(&tok->vocab);
    tok_strmap_free(&tok->word_ids);
    free((void *)tok->word_state);
    tok_strmap_free(&tok->added_map);
    tok_strmap_free(&tok->special_set);
    tok_pairmap_free(&tok->merges);
    for (int i = 0; i < tok->n_stages; i++) tok_regex_free(&tok->stages[i].re);
    free(tok->stages);
    tok_regex_free(&tok->gpt2_re);
    tok_regex_free(&tok->ws_re);
    tok_regex_free(&tok->word_re);
    free(tok->added);
    tok_trie_free(&tok->trie_raw);
    tok_trie_free(&tok->trie_norm);
    free(tok->pp_pre);
    free(tok->pp_post);
    free(tok->tokens);
    free(tok->chat_template);
    for (int i = 0; i < 4; i++) free(tok->special_tokens[i]);
    tok_arena_free(&tok->arena);
    free(tok);
}

