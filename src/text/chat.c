/* chat.c - chat messages -> prompt text: the checkpoint's chat template
 * executed by the Jinja engine (text/jinja.h) with the variables
 * transformers' apply_chat_template passes (transformers/utils/
 * chat_template_utils.py render_jinja_template: messages, tools, documents,
 * add_generation_prompt, the special tokens, **kwargs).
 *
 * frt_chat_template_kind, the recognizer of the ChatML family that earlier
 * versions formatted natively, stays for its callers: it works on a
 * normalized copy of the template text (ASCII whitespace and Jinja's '-'
 * whitespace-control marks removed, " read as ', message['x'] read as
 * message.x, adjacent string literals joined), checked against pieces of the
 * known templates normalized the same way. */
#include "text/chat.h"
#include "text/jinja.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- template normalization --------------------------------------------------------- */
static int is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Replaces every FROM by TO in B (in place; TO no longer than FROM). */
static void replace_all(tok_buf *b, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), w = 0;
    for (size_t r = 0; r < b->n;) {
        if (r + nf <= b->n && !memcmp(b->p + r, from, nf)) {
            memmove(b->p + w, to, nt);
            w += nt;
            r += nf;
        } else {
            b->p[w++] = b->p[r++];
        }
    }
    b->n = w;
    b->p[w] = '\0';
}

static int normalize_template(const char *t, tok_buf *out)
{
    out->n = 0;
    size_t n = strlen(t);
    FRT_TRY(tok_buf_reserve(out, n));
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (is_ascii_space(c)) continue;
        if (c == '"') c = '\'';
        if (c == '-') {
            /* "{%-" / "{{-" / "{#-" */
            if (out->n >= 2 && (out->p[out->n - 1] == '%' || out->p[out->n - 1] == '{' || out->p[out->n - 1] == '#') &&
                out->p[out->n - 2] == '{')
                continue;
            /* "-%}" / "-}}" / "-#}" (whitespace allowed before the closer) */
            size_t j = i + 1;
            while (j < n && is_ascii_space(t[j])) j++;
            if (j + 1 < n && (t[j] == '%' || t[j] == '}' || t[j] == '#') && t[j + 1] == '}') continue;
        }
        out->p[out->n++] = c;
    }
    out->p[out->n] = '\0';
    replace_all(out, "message['role']", "message.role");
    replace_all(out, "message['content']", "message.content");
    replace_all(out, "messages[0]['role']", "messages[0].role");
    replace_all(out, "messages[0]['content']", "messages[0].content");
    replace_all(out, "'+'", "");
    return 0;
}

/* Does the normalized template NT contain the normalized form of PIECE? */
static int has(const tok_buf *nt, const char *piece, tok_buf *scratch, int *yes)
{
    FRT_TRY(normalize_template(piece, scratch));
    *yes = strstr(nt->p, scratch->p) != NULL;
    return 0;
}

static int ends_with(const tok_buf *nt, const char *piece, tok_buf *scratch, int *yes)
{
    FRT_TRY(normalize_template(piece, scratch));
    *yes = nt->n >= scratch->n && !memcmp(nt->p + nt->n - scratch->n, scratch->p, scratch->n);
    return 0;
}

static const char tail_chatml[] =
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char tail_qwen3[] =
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
static const char tail_qwen35[] =
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}";

static const char *const chatml_need[] = {
    "'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'",
    NULL,
};
static const char *const chatml_forbid[] = {
    "<think>", "trim", "strip", "reasoning_content", "bos_token", "eos_token", NULL,
};

/* Qwen3: one of the two message lines (content / message.content), and the
 * assistant logic. */
static const char *const qwen3_need[] = {
    "(message.role == \"user\") or (message.role == \"system\" and not loop.first)",
    "content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n')",
    "content.split('</think>')[-1].lstrip('\\n')",
    "{%- if loop.index0 > ns.last_query_index %}{%- if loop.last or (not loop.last and reasoning_content) %}",
    "'<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n')",
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + content }}",
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
    NULL,
};
static const char *const qwen3_forbid[] = {"|trim", "bos_token", "render_content", NULL};

static const char *const qwen35_need[] = {
    "render_content(messages[0].content, false, true)|trim",
    "{{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' }}",
    "render_content(message.content, true)|trim",
    "content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n')",
    "content.split('</think>')[-1].lstrip('\\n')",
    "reasoning_content|trim",
    "loop.index0 > ns.last_query_index",
    "'<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + content",
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + content }}",
    "'<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n'",
    NULL,
};
static const char *const qwen35_forbid[] = {"bos_token", NULL};

static int check_all(const tok_buf *nt, const char *const *need, const char *const *forbid, tok_buf *sc, int *ok)
{
    *ok = 0;
    int yes;
    for (int i = 0; need[i]; i++) {
        FRT_TRY(has(nt, need[i], sc, &yes));
        if (!yes) return 0;
    }
    for (int i = 0; forbid[i]; i++) {
        FRT_TRY(has(nt, forbid[i], sc, &yes));
        if (yes) return 0;
    }
    *ok = 1;
    return 0;
}

/* The default system message of a ChatML template: a literal
 * '<|im_start|>system\n...<|im_end|>' (Qwen2: "You are a helpful
 * assistant.", Qwen2.5: "You are Qwen, created by Alibaba Cloud. ..."). */
static int default_system(const char *t, char **out)
{
    *out = NULL;
    static const char open[] = "<|im_start|>system";
    size_t no = sizeof open - 1;
    for (const char *p = strstr(t, open); p; p = strstr(p + 1, open)) {
        const char *q = p + no;
        if (q[0] == '\\' && q[1] == 'n')
            q += 2;
        else if (q[0] == '\n')
            q += 1;
        else
            continue;
        const char *end = strstr(q, "<|im_end|>");
        if (!end) continue;
        int literal = end > q;
        for (const char *r = q; r < end && literal; r++)
            if (*r == '\'' || *r == '"' || *r == '+' || *r == '{' || *r == '}') literal = 0;
        if (!literal) continue;
        tok_buf v = {0};
        for (const char *r = q; r < end; r++) {
            char c = *r;
            if (c == '\\') {
                char e = *++r;
                if (e == 'n') c = '\n';
                else if (e == 't') c = '\t';
                else if (e == 'r') c = '\r';
                else if (e == '\\' || e == '\'' || e == '"') c = e;
                else {
                    tok_buf_free(&v);
                    return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: escape \\%c in "
                                     "its default system message", e);
                }
            }
            if (tok_buf_put(&v, &c, 1)) {
                tok_buf_free(&v);
                return FRT_ERR_OUT_OF_MEMORY;
            }
        }
        if (*out && strcmp(*out, v.p)) {
            free(*out);
            *out = NULL;
            tok_buf_free(&v);
            return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: two different default "
                             "system messages");
        }
        if (*out)
            tok_buf_free(&v);
        else
            *out = v.p;
    }
    return 0;
}

int frt_chat_template_kind(const char *template_text, int *kind, char **default_sys)
{
    if (default_sys) *default_sys = NULL;
    if (!template_text || !kind) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_template_kind: NULL argument");
    *kind = 0;
    if (!strstr(template_text, "<|im_start|>") || !strstr(template_text, "<|im_end|>") ||
        !strstr(template_text, "add_generation_prompt"))
        return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: not ChatML (frt formats the "
                         "ChatML family natively: plain ChatML, Qwen2/2.5, Qwen3, Qwen3.5/3.6)");
    tok_buf nt = {0}, sc = {0};
    int rc = normalize_template(template_text, &nt);
    int ok = 0, k = 0;
    if (!rc) rc = ends_with(&nt, tail_chatml, &sc, &ok);
    if (!rc && ok) {
        rc = check_all(&nt, chatml_need, chatml_forbid, &sc, &ok);
        if (!rc && ok) k = FRT_CHAT_CHATML;
    }
    if (!rc && !k) rc = ends_with(&nt, tail_qwen3, &sc, &ok);
    if (!rc && !k && ok) {
        rc = check_all(&nt, qwen3_need, qwen3_forbid, &sc, &ok);
        if (!rc && ok) k = FRT_CHAT_QWEN3;
    }
    if (!rc && !k) rc = ends_with(&nt, tail_qwen35, &sc, &ok);
    if (!rc && !k && ok) {
        rc = check_all(&nt, qwen35_need, qwen35_forbid, &sc, &ok);
        if (!rc && ok) k = FRT_CHAT_QWEN35;
    }
    tok_buf_free(&nt);
    tok_buf_free(&sc);
    FRT_TRY(rc);
    if (!k)
        return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: a ChatML variant frt does not "
                         "recognize (supported: plain ChatML, Qwen2/2.5, Qwen3, Qwen3.5/3.6)");
    char *def = NULL;
    if (k == FRT_CHAT_CHATML) {
        int drc = default_system(template_text, &def);
        if (drc) {
            free(def); /* a message found before the failing one */
            return drc;
        }
    }
    *kind = k;
    if (default_sys)
        *default_sys = def;
    else
        free(def);
    return 0;
}

/* ---- rendering ------------------------------------------------------------------------ */
static const char *const reserved_vars[] = {"messages", "tools", "documents", "add_generation_prompt", NULL};

int frt_chat_render_json_spans(const char *template_text, const frt_chat_request *req, const json_t *special,
                               char **text, size_t *len, frt_text_span **spans, size_t *n_spans)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!template_text || !req || !text || !spans || !n_spans)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render_json: NULL argument");
    if (!json_is_array(req->messages))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: messages must be a JSON array");
    if (req->tools && !json_is_array(req->tools) && !json_is_null(req->tools))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: tools must be a JSON array");
    if (req->documents && !json_is_array(req->documents) && !json_is_null(req->documents))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: documents must be a JSON array");
    if (req->kwargs && !json_is_object(req->kwargs))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: the template kwargs must be a JSON object");
    if (special && !json_is_object(special))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: the special tokens must be a JSON object");
    for (int i = 0; req->kwargs && reserved_vars[i]; i++)
        if (json_object_get(req->kwargs, reserved_vars[i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat: the template kwargs may not set '%s'", reserved_vars[i]);
    /* variables, in transformers' order: special tokens, then kwargs over
     * them; the messages are content (their bytes are tracked) */
    json_t *vars = json_object(), *content = json_pack("{s:O}", "messages", (json_t *)req->messages);
    int rc = vars && content ? 0 : FRT_ERR_OUT_OF_MEMORY;
    if (!rc && special) rc = json_object_update(vars, (json_t *)special) ? FRT_ERR_OUT_OF_MEMORY : 0;
    if (!rc && req->kwargs) rc = json_object_update(vars, (json_t *)req->kwargs) ? FRT_ERR_OUT_OF_MEMORY : 0;
    if (!rc && (json_object_set_new(vars, "tools", req->tools ? json_incref((json_t *)req->tools) : json_null()) ||
                json_object_set_new(vars, "documents", req->documents ? json_incref((json_t *)req->documents) : json_null()) ||
                json_object_set_new(vars, "add_generation_prompt", json_boolean(req->add_generation_prompt))))
        rc = FRT_ERR_OUT_OF_MEMORY;
    if (rc) {
        json_decref(vars);
        json_decref(content);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat: out of memory");
    }
    frt_jinja_template *t = NULL;
    rc = frt_jinja_parse(template_text, strlen(template_text), &t);
    if (rc == FRT_ERR_FORMAT || rc == FRT_ERR_UNSUPPORTED || rc == FRT_ERR_INVALID_ARGUMENT) {
        /* the checkpoint's template cannot run here: "unsupported chat template: line L, column C: ..." */
        const char *m = frt_last_error();
        if (!strncmp(m, "chat template: ", 15)) m += 15;
        char msg[512];
        snprintf(msg, sizeof msg, "%s", m);
        rc = frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: %s", msg);
    }
    if (!rc) rc = frt_jinja_render_ex(t, vars, content, NULL, text, len, spans, n_spans);
    frt_jinja_free(t);
    json_decref(vars);
    json_decref(content);
    return rc;
}

int frt_chat_render_json(const char *template_text, const frt_chat_request *req, const json_t *special,
                         char **text, size_t *len)
{
    frt_text_span *spans;
    size_t n;
    int rc = frt_chat_render_json_spans(template_text, req, special, text, len, &spans, &n);
    free(spans);
    return rc;
}

/* {"bos_token": ..., ...} of the tokenizer (NULL on OOM) */
static json_t *special_of(const frt_tokenizer *tok)
{
    static const char *const names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    json_t *o = json_object();
    for (int i = 0; o && i < 4; i++) {
        const char *v = frt_tokenizer_special_token(tok, names[i]);
        if (v && json_object_set_new(o, names[i], json_string(v))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int frt_chat_format_json_spans(const frt_tokenizer *tok, const frt_chat_request *req, char **text, size_t *len,
                               frt_text_span **spans, size_t *n_spans)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!tok) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_format: NULL tokenizer");
    const char *t = frt_tokenizer_chat_template(tok);
    if (!t)
        return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: the checkpoint has none "
                         "(no chat_template.jinja, no chat_template in tokenizer_config.json)");
    json_t *special = special_of(tok);
    if (!special) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat: out of memory");
    int rc = frt_chat_render_json_spans(t, req, special, text, len, spans, n_spans);
    json_decref(special);
    return rc;
}

int frt_chat_format_json(const frt_tokenizer *tok, const frt_chat_request *req, char **text, size_t *len)
{
    frt_text_span *spans;
    size_t n;
    int rc = frt_chat_format_json_spans(tok, req, text, len, &spans, &n);
    free(spans);
    return rc;
}

int frt_chat_encode_json(const frt_tokenizer *tok, const frt_chat_request *req, int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!req) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_encode: NULL argument");
    char *text;
    size_t len, n_spans;
    frt_text_span *spans;
    FRT_TRY(frt_chat_format_json_spans(tok, req, &text, &len, &spans, &n_spans));
    int rc = req->parse_special_in_content ? frt_tokenizer_encode(tok, text, len, ids, n_ids)
                                           : tok_encode_protected(tok, text, len, spans, n_spans, 0, ids, n_ids);
    free(text);
    free(spans);
    return rc;
}

/* The request of N plain messages (*req owns *messages / *kwargs: free with
 * json_decref). */
static int plain_request(const frt_chat_message *msgs, int n, const frt_chat_options *opt, frt_chat_request *req)
{
    memset(req, 0, sizeof *req);
    if (!msgs && n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: NULL argument");
    if (n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: no messages");
    frt_chat_options o = opt ? *opt : (frt_chat_options){1, -1, 0};
    json_t *arr = json_array();
    if (!arr) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat: out of memory");
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            json_decref(arr);
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: message %d has a NULL role or content", i);
        }
        if (!tok_utf8_valid(msgs[i].content, strlen(msgs[i].content)) || !tok_utf8_valid(msgs[i].role, strlen(msgs[i].role))) {
            json_decref(arr);
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: message %d is not valid UTF-8", i);
        }
        if (json_array_append_new(arr, json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content))) {
            json_decref(arr);
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat: out of memory");
        }
    }
    req->messages = arr;
    req->add_generation_prompt = o.add_generation_prompt != 0;
    req->parse_special_in_content = o.parse_special_in_content != 0;
    if (o.enable_thinking >= 0) {
        req->kwargs = json_pack("{s:b}", "enable_thinking", o.enable_thinking != 0);
        if (!req->kwargs) {
            json_decref(arr);
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat: out of memory");
        }
    }
    return 0;
}

static void plain_request_free(frt_chat_request *req)
{
    json_decref((json_t *)req->messages);
    json_decref((json_t *)req->kwargs);
}

int frt_chat_render(const char *template_text, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!template_text || !text) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: NULL argument");
    frt_chat_request req;
    FRT_TRY(plain_request(msgs, n, opt, &req));
    int rc = frt_chat_render_json(template_text, &req, NULL, text, len);
    plain_request_free(&req);
    return rc;
}

int frt_chat_format_ex(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                       const frt_chat_options *opt, char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!tok || !text) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_format: NULL argument");
    frt_chat_request req;
    FRT_TRY(plain_request(msgs, n, opt, &req));
    int rc = frt_chat_format_json(tok, &req, text, len);
    plain_request_free(&req);
    return rc;
}

int frt_chat_format(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    int add_generation_prompt, char **text)
{
    frt_chat_options o = {add_generation_prompt, -1, 0};
    return frt_chat_format_ex(tok, msgs, n, &o, text, NULL);
}

int frt_chat_encode(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!tok) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_encode: NULL tokenizer");
    frt_chat_request req;
    FRT_TRY(plain_request(msgs, n, opt, &req));
    int rc = frt_chat_encode_json(tok, &req, ids, n_ids);
    plain_request_free(&req);
    return rc;
}
