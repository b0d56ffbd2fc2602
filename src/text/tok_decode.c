/* tok_decode.c - ids back to text: the ByteLevel decoder and its streaming
 * form.
 *
 * Tokenizer.decode (tokenizer/mod.rs) maps each id to its token string (the
 * added token's normalized form or content, else the model vocabulary entry)
 * and the ByteLevel decoder (pre_tokenizers/byte_level.rs, decode_chain)
 * turns each string into its bytes when all of its characters belong to the
 * byte alphabet, else into its own UTF-8; the concatenation goes through
 * String::from_utf8_lossy. The per-id bytes are computed once at load
 * (tok_token.bytes), so decoding is a concatenation plus the lossy pass. */
#include "text/tok_internal.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static int check_id(const frt_tokenizer *tok, int32_t id, size_t at)
{
    if (id < 0 || id >= tok->n_tokens || !tok->tokens[id].str)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "tokenizer: id %d (position %zu) names no token (vocabulary "
                         "size %d)", id, at, tok->n_tokens);
    return 0;
}

int frt_tokenizer_decode(const frt_tokenizer *tok, const int32_t *ids, size_t n, char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!tok || !text || (!ids && n)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_decode: NULL argument");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        FRT_TRY(check_id(tok, ids[i], i));
        total += tok->tokens[ids[i]].bytes_len;
    }
    tok_buf raw = {0};
    FRT_TRY(tok_buf_reserve(&raw, total));
    for (size_t i = 0; i < n; i++) {
        const tok_token *t = &tok->tokens[ids[i]];
        memcpy(raw.p + raw.n, t->bytes, t->bytes_len);
        raw.n += t->bytes_len;
    }
    raw.p[raw.n] = '\0';
    if (tok_utf8_valid(raw.p, raw.n)) {
        *text = raw.p;
        if (len) *len = raw.n;
        return 0;
    }
    tok_buf out = {0};
    tok_utf8_state st = {{0}, 0, 0};
    int rc = tok_buf_reserve(&out, raw.n + 8);
    if (!rc) rc = tok_utf8_lossy_feed(&st, raw.p, raw.n, &out);
    if (!rc) rc = tok_utf8_lossy_finish(&st, &out);
    tok_buf_free(&raw);
    if (rc) {
        tok_buf_free(&out);
        return rc;
    }
    *text = out.p;
    if (len) *len = out.n;
    return 0;
}

int frt_tokenizer_token_bytes(const frt_tokenizer *tok, int32_t id, const char **bytes, size_t *len)
{
    if (!tok || !bytes || !len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_tokenizer_token_bytes: NULL argument");
    FRT_TRY(check_id(tok, id, 0));
    *bytes = tok->tokens[id].bytes;
    *len = tok->tokens[id].bytes_len;
    return 0;
}

struct frt_detok_stream {
    const frt_tokenizer *tok;
    tok_utf8_state st;
    tok_buf out;
};

int frt_detok_stream_create(const frt_tokenizer *tok, frt_detok_stream **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_detok_stream_create: NULL out");
    *out = NULL;
    if (!tok) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_detok_stream_create: NULL tokenizer");
    frt_detok_stream *s = calloc(1, sizeof *s);
    if (!s || tok_buf_reserve(&s->out, 64)) {
        free(s);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    s->tok = tok;
    s->out.p[0] = '\0';
    *out = s;
    return 0;
}

void frt_detok_stream_free(frt_detok_stream *s)
{
    if (!s) return;
    tok_buf_free(&s->out);
    free(s);
}

void frt_detok_stream_reset(frt_detok_stream *s)
{
    if (!s) return;
    s->st.n = 0;
    s->out.n = 0;
    s->out.p[0] = '\0';
}

int frt_detok_stream_push(frt_detok_stream *s, int32_t id, const char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!s || !text || !len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_detok_stream_push: NULL argument");
    FRT_TRY(check_id(s->tok, id, 0));
    const tok_token *t = &s->tok->tokens[id];
    s->out.n = 0;
    tok_utf8_state saved = s->st;
    int rc = tok_utf8_lossy_feed(&s->st, t->bytes, t->bytes_len, &s->out);
    if (rc) {
        s->st = saved;
        s->out.n = 0;
        s->out.p[0] = '\0';
        return rc;
    }
    s->out.p[s->out.n] = '\0';
    *text = s->out.p;
    *len = s->out.n;
    return 0;
}

int frt_detok_stream_flush(frt_detok_stream *s, const char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!s || !text || !len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_detok_stream_flush: NULL argument");
    s->out.n = 0;
    FRT_TRY(tok_utf8_lossy_finish(&s->st, &s->out));
    s->out.p[s->out.n] = '\0';
    *text = s->out.p;
    *len = s->out.n;
    return 0;
}
