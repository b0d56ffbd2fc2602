/* tok_encode.c - the encode pipeline (normalizer, pre-tokenizer stages,
 * BPE, added tokens, post-processor) and the lookups of the tokenizer
 * (text/tokenizer.h); loading is tokenizer.c. The reference is the Hugging
 * Face `tokenizers` library, 0.23 (tokenizers/src/tokenizer/mod.rs,
 * normalizers/unicode.rs, pre_tokenizers/{split,byte_level}.rs,
 * processors/template.rs). */
#include "frt/tokenizer.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- normalizer ------------------------------------------------------------------ */
/* Applies the normalizer sequence to S[0..N). *out points either at S (no
 * change) or at a malloc'd string stored in *owned (caller frees). */
int tok_normalize(const frt_tokenizer *tok, const char *s, size_t n, const char **out,
                     size_t *out_n, char **owned)
{
    *out = s;
    *out_n = n;
    *owned = NULL;
    if (!tok->n_norm) return 0;
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++) ascii = (unsigned char)s[i] < 0x80;
    if (ascii) return 0; /* ASCII is invariant under every normal form */
    for (int k = 0; k < tok->n_norm; k++) {
        utf8proc_option_t opt = UTF8PROC_STABLE;
        switch (tok->norm[k]) {
        case TOK_NFC: opt |= UTF8PROC_COMPOSE; break;
        case TOK_NFD: opt |= UTF8PROC_DECOMPOSE; break;
        case TOK_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        default: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
        }
        tok_buf res = {0};
        int rc = tok_utf8_normalize(*out, *out_n, (int)opt, &res);
        free(*owned);
        *owned = NULL;
        if (rc) {
            tok_buf_free(&res);
            return rc;
        }
        if (!res.p && tok_buf_put(&res, "", 0)) return FRT_ERR_OUT_OF_MEMORY;
        *owned = res.p;
        *out = res.p;
        *out_n = res.n;
    }
    return 0;
}

/* ---- encode ---------------------------------------------------------------------------------------- */
typedef struct enc_ctx {
    const frt_tokenizer *tok;
    tok_idvec ids;
    tok_matcher m;
    tok_bpe_scratch bpe;
    tok_spanvec sv[17]; /* one per stage, the last for ByteLevel's regex */
    tok_buf prefixed;   /* " " + word for ByteLevel add_prefix_space */
    const char *text;   /* the whole text (protected spans are offsets in it) */
    const tok_protect *pr; /* protected bytes of the raw text, or NULL */
} enc_ctx;

static int run_stage(enc_ctx *c, int si, const char *s, size_t n);

/* The ByteLevel pre-tokenizer (always the last stage) and BPE. */
static int byte_level(enc_ctx *c, const tok_stage *st, int si, const char *s, size_t n)
{
    const frt_tokenizer *tok = c->tok;
    if (st->add_prefix_space && s[0] != ' ') {
        c->prefixed.n = 0;
        FRT_TRY(tok_buf_put(&c->prefixed, " ", 1));
        FRT_TRY(tok_buf_put(&c->prefixed, s, n));
        s = c->prefixed.p;
        n = c->prefixed.n;
    }
    if (!st->use_regex) return tok_bpe_word(tok, &c->bpe, s, n, 1, &c->ids);
    tok_spanvec *sv = &c->sv[si + 1];
    FRT_TRY(tok_regex_find_matches(&tok->gpt2_re, &c->m, s, n, sv));
    for (size_t k = 0; k < sv->n; k++) /* Isolated: every piece, empties dropped */
        if (sv->v[k].end > sv->v[k].start)
            FRT_TRY(tok_bpe_word(tok, &c->bpe, s + sv->v[k].start, sv->v[k].end - sv->v[k].start, 1, &c->ids));
    return 0;
}

/* NormalizedString::split with a behavior (normalizer.rs), then the next
 * stage on each kept, non-empty piece. */
static int split_stage(enc_ctx *c, const tok_stage *st, int si, const char *s, size_t n)
{
    tok_spanvec *sv = &c->sv[si];
    FRT_TRY(tok_regex_find_matches(&st->re, &c->m, s, n, sv));
    tok_span *v = sv->v;
    size_t m = sv->n;
    if (st->invert)
        for (size_t k = 0; k < m; k++) v[k].is_match = !v[k].is_match;
    /* fold the spans in place into (offsets, remove) pairs */
    size_t w = 0;
    switch (st->behavior) {
    case TOK_ISOLATED:
        for (size_t k = 0; k < m; k++) v[k].is_match = 0;
        w = m;
        break;
    case TOK_REMOVED:
        w = m;
        break;
    case TOK_CONTIGUOUS: {
        uint32_t prev_match = 0;
        for (size_t k = 0; k < m; k++) {
            uint32_t is_m = v[k].is_match;
            if (is_m == prev_match && w > 0)
                v[w - 1].end = v[k].end;
            else
                v[w++] = (tok_span){v[k].start, v[k].end, 0};
            prev_match = is_m;
        }
        break;
    }
    case TOK_MERGED_WITH_PREVIOUS: {
        uint32_t prev_match = 0;
        for (size_t k = 0; k < m; k++) {
            uint32_t is_m = v[k].is_match;
            if (is_m && !prev_match && w > 0)
                v[w - 1].end = v[k].end;
            else
                v[w++] = (tok_span){v[k].start, v[k].end, 0};
            prev_match = is_m;
        }
        break;
    }
    case TOK_MERGED_WITH_NEXT: {
        /* folded from the end; the kept spans are written back to front */
        uint32_t prev_match = 0;
        size_t r = m; /* v[r..m) holds the output in order */
        for (size_t k = m; k-- > 0;) {
            tok_span cur = v[k];
            if (cur.is_match && !prev_match && r < m)
                v[r].start = cur.start;
            else
                v[--r] = (tok_span){cur.start, cur.end, 0};
            prev_match = cur.is_match;
        }
        memmove(v, v + r, (m - r) * sizeof *v);
        w = m - r;
        break;
    }
    default:
        w = m;
        break;
    }
    for (size_t k = 0; k < w; k++) {
        /* c->sv[si] is not touched deeper: read the span before recursing */
        tok_span sp = c->sv[si].v[k];
        if (sp.is_match || sp.end <= sp.start) continue;
        FRT_TRY(run_stage(c, si + 1, s + sp.start, sp.end - sp.start));
    }
    return 0;
}

static int run_stage(enc_ctx *c, int si, const char *s, size_t n)
{
    if (n == 0) return 0;
    if (si == c->tok->n_stages) return tok_bpe_word(c->tok, &c->bpe, s, n, 0, &c->ids);
    const tok_stage *st = &c->tok->stages[si];
    if (st->is_byte_level) return byte_level(c, st, si, s, n);
    return split_stage(c, st, si, s, n);
}

/* Pieces after the normalized added tokens are split out: pre-tokenize. */
static int on_normalized_piece(void *ctx, const char *s, size_t n, int32_t token)
{
    enc_ctx *c = ctx;
    if (token >= 0) return tok_idvec_push(&c->ids, c->tok->added[token].id);
    return run_stage(c, 0, s, n);
}

/* Does any protected range of PR meet [at, at + n) of the whole text? */
static int prot_overlaps(const tok_protect *pr, size_t at, size_t n)
{
    size_t lo = 0, hi = pr->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pr->v[mid].end <= at) lo = mid + 1;
        else hi = mid;
    }
    return lo < pr->n && pr->v[lo].start < at + n;
}

/* Pieces of the raw text: normalize, then split the normalized added tokens. */
static int on_raw_piece(void *ctx, const char *s, size_t n, int32_t token)
{
    enc_ctx *c = ctx;
    if (token >= 0) return tok_idvec_push(&c->ids, c->tok->added[token].id);
    const char *ns;
    size_t nn;
    char *owned;
    FRT_TRY(tok_normalize(c->tok, s, n, &ns, &nn, &owned));
    /* the normalized pass protects special tokens only; offsets hold when
     * normalization left the piece as it was, else the whole piece is
     * protected when it holds a protected byte */
    tok_protect np, *pr = NULL;
    if (c->pr) {
        np = *c->pr;
        np.base = (size_t)(s - c->text);
        np.special_only = 1;
        if (nn != n || memcmp(ns, s, n)) np.whole = prot_overlaps(c->pr, np.base, n);
        pr = &np;
    }
    int rc = tok_added_split(c->tok, &c->tok->trie_norm, &c->m, ns, nn, pr, on_normalized_piece, c);
    free(owned);
    return rc;
}

static int encode(const frt_tokenizer *tok, const char *text, size_t len, int add_special_tokens,
                  const tok_protect *pr, int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!tok || !ids || !n_ids || (!text && len))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_encode: NULL argument");
    if (len && !tok_utf8_valid(text, len))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_encode: text is not valid UTF-8");
    if (len > 0xffffffffu)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_encode: text of %zu bytes (4 GiB at most)", len);
    enc_ctx c;
    memset(&c, 0, sizeof c);
    c.tok = tok;
    c.text = text;
    c.pr = pr;
    int rc = tok_matcher_init(&c.m);
    if (!rc && add_special_tokens)
        for (size_t k = 0; k < tok->n_pp_pre && !rc; k++) rc = tok_idvec_push(&c.ids, tok->pp_pre[k]);
    if (!rc && len) rc = tok_added_split(tok, &tok->trie_raw, &c.m, text, len, pr, on_raw_piece, &c);
    if (!rc && add_special_tokens)
        for (size_t k = 0; k < tok->n_pp_post && !rc; k++) rc = tok_idvec_push(&c.ids, tok->pp_post[k]);
    tok_matcher_free(&c.m);
    tok_bpe_scratch_free(&c.bpe);
    for (size_t k = 0; k < sizeof c.sv / sizeof c.sv[0]; k++) tok_spanvec_free(&c.sv[k]);
    tok_buf_free(&c.prefixed);
    if (rc) {
        free(c.ids.v);
        return rc;
    }
    if (c.ids.n == 0) {
        free(c.ids.v);
        c.ids.v = NULL;
    }
    *ids = c.ids.v;
    *n_ids = c.ids.n;
    return 0;
}

int frt_tokenizer_encode_ex(const frt_tokenizer *tok, const char *text, size_t len,
                            int add_special_tokens, int32_t **ids, size_t *n_ids)
{
    return encode(tok, text, len, add_special_tokens, NULL, ids, n_ids);
}

int tok_encode_protected(const frt_tokenizer *tok, const char *text, size_t len, const frt_text_span *spans,
                         size_t n_spans, int add_special_tokens, int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (n_spans && !spans) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_encode: NULL spans");
    for (size_t i = 0; i < n_spans; i++)
        if (spans[i].start >= spans[i].end || spans[i].end > len || (i && spans[i].start < spans[i - 1].end))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_encode: protected span %zu [%zu, %zu) is "
                             "empty, out of the %zu-byte text or not after the previous one", i, spans[i].start,
                             spans[i].end, len);
    tok_protect pr = {spans, n_spans, 0, 0, 0};
    return encode(tok, text, len, add_special_tokens, n_spans ? &pr : NULL, ids, n_ids);
}

int frt_tokenizer_encode(const frt_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                         size_t *n_ids)
{
    return frt_tokenizer_encode_ex(tok, text, len, 0, ids, n_ids);
}

/* ---- lookups ------------------------------------------------------------------------------------------ */
int frt_tokenizer_vocab_size(const frt_tokenizer *tok) { return tok ? tok->n_tokens : 0; }

int frt_tokenizer_token_id(const frt_tokenizer *tok, const char *token)
{
    if (!tok || !token) return -1;
    size_t n = strlen(token);
    int32_t id = tok_strmap_get(&tok->added_map, token, n);
    return id >= 0 ? id : tok_strmap_get(&tok->vocab, token, n);
}

const char *frt_tokenizer_token_str(const frt_tokenizer *tok, int32_t id)
{
    if (!tok || id < 0 || id >= tok->n_tokens) return NULL;
    return tok->tokens[id].str;
}

int frt_tokenizer_is_special(const frt_tokenizer *tok, int32_t id)
{
    if (!tok || id < 0 || id >= tok->n_tokens) return 0;
    return tok->tokens[id].special;
}

const char *frt_tokenizer_chat_template(const frt_tokenizer *tok) { return tok ? tok->chat_template : NULL; }

int frt_tokenizer_set_chat_template(frt_tokenizer *tok, const char *template_text)
{
    if (!tok) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_set_chat_template: NULL tokenizer");
    char *copy = NULL;
    if (template_text) {
        copy = strdup(template_text);
        if (!copy) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    free(tok->chat_template);
    tok->chat_template = copy;
    return 0;
}
