/* chat.c - the ChatML family of chat templates, formatted natively.
 *
 * Recognition works on a normalized copy of the template text (ASCII
 * whitespace and Jinja's '-' whitespace-control marks removed, " read as ',
 * message['x'] read as message.x, adjacent string literals joined), checked
 * against pieces of the known templates normalized the same way:
 *
 *   every dialect   contains <|im_start|>, <|im_end|> and add_generation_prompt,
 *                   and ends with the dialect's generation-prompt block;
 *   ChatML          the message line '<|im_start|>' + role + '\n' + content +
 *                   '<|im_end|>\n'; no <think>, trim, strip, reasoning_content,
 *                   bos_token or eos_token;
 *   Qwen3           the Qwen3 assistant logic (think split, loop.last rule);
 *   Qwen3.5         render_content(...)|trim and the Qwen3.5 assistant logic.
 *
 * The renderers below then reproduce the Jinja output of those templates for
 * system / user / assistant messages (Python str semantics for split, strip
 * and Jinja's trim). The reference outputs are rendered by transformers'
 * apply_chat_template (scripts/ref/make_tokenizer.py) and checked in
 * tests/test_tokenizer_chat.c. */
#include "text/chat.h"
#include "text/tok_internal.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

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
    if (k == FRT_CHAT_CHATML) FRT_TRY(default_system(template_text, &def));
    *kind = k;
    if (default_sys)
        *default_sys = def;
    else
        free(def);
    return 0;
}

/* ---- Python string helpers over UTF-8 ----------------------------------------------------- */
typedef struct str {
    const char *p;
    size_t n;
} str;

static str S(const char *p) { return (str){p, strlen(p)}; }


static const char *find(str s, const char *needle)
{
    size_t nn = strlen(needle);
    if (nn > s.n) return NULL;
    for (size_t i = 0; i + nn <= s.n; i++)
        if (!memcmp(s.p + i, needle, nn)) return s.p + i;
    return NULL;
}

static const char *rfind(str s, const char *needle)
{
    size_t nn = strlen(needle);
    if (nn > s.n) return NULL;
    for (size_t i = s.n - nn + 1; i-- > 0;)
        if (!memcmp(s.p + i, needle, nn)) return s.p + i;
    return NULL;
}

static str lstrip_nl(str s)
{
    while (s.n && s.p[0] == '\n') {
        s.p++;
        s.n--;
    }
    return s;
}

static str rstrip_nl(str s)
{
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}

/* Python str.isspace(): category Zs or bidirectional class WS, B or S. */
static int py_isspace(uint32_t cp)
{
    const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
    return pr->category == UTF8PROC_CATEGORY_ZS || pr->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           pr->bidi_class == UTF8PROC_BIDI_CLASS_B || pr->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

/* Python str.strip() (Jinja's trim filter). */
static str py_strip(str s)
{
    while (s.n) {
        uint32_t cp;
        int l = tok_utf8_decode(s.p, &cp);
        if (!py_isspace(cp)) break;
        s.p += l;
        s.n -= (size_t)l;
    }
    while (s.n) {
        size_t i = s.n - 1;
        while (i > 0 && ((unsigned char)s.p[i] & 0xC0) == 0x80) i--;
        uint32_t cp;
        tok_utf8_decode(s.p + i, &cp);
        if (!py_isspace(cp)) break;
        s.n = i;
    }
    return s;
}

/* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
 * and content.split('</think>')[-1].lstrip('\n') (content holds '</think>'). */
static void split_think(str content, str *reasoning, str *answer)
{
    const char *first = find(content, "</think>");
    str before = {content.p, (size_t)(first - content.p)};
    before = rstrip_nl(before);
    const char *open = rfind(before, "<think>");
    if (open) {
        size_t skip = (size_t)(open - before.p) + 7;
        before.p += skip;
        before.n -= skip;
    }
    *reasoning = lstrip_nl(before);
    const char *last = rfind(content, "</think>");
    str after = {last + 8, content.n - (size_t)(last + 8 - content.p)};
    *answer = lstrip_nl(after);
}

/* ---- rendering ----------------------------------------------------------------------------------- */
static int put(tok_buf *b, str s) { return tok_buf_put(b, s.p, s.n); }
static int puts_(tok_buf *b, const char *s) { return tok_buf_put(b, s, strlen(s)); }

static int render_chatml(const frt_chat_message *m, int n, const frt_chat_options *o, const char *def, tok_buf *b)
{
    if (def && strcmp(m[0].role, "system")) {
        FRT_TRY(puts_(b, "<|im_start|>system\n"));
        FRT_TRY(puts_(b, def));
        FRT_TRY(puts_(b, "<|im_end|>\n"));
    }
    for (int i = 0; i < n; i++) {
        FRT_TRY(puts_(b, "<|im_start|>"));
        FRT_TRY(puts_(b, m[i].role));
        FRT_TRY(puts_(b, "\n"));
        FRT_TRY(puts_(b, m[i].content));
        FRT_TRY(puts_(b, "<|im_end|>\n"));
    }
    if (o->add_generation_prompt) FRT_TRY(puts_(b, "<|im_start|>assistant\n"));
    return 0;
}

static int is_tool_response(str c)
{
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    return c.n >= sizeof open - 1 && !memcmp(c.p, open, sizeof open - 1) && c.n >= sizeof close - 1 &&
           !memcmp(c.p + c.n - (sizeof close - 1), close, sizeof close - 1);
}

static int render_qwen3(const frt_chat_message *m, int n, const frt_chat_options *o, tok_buf *b)
{
    if (!strcmp(m[0].role, "system")) {
        FRT_TRY(puts_(b, "<|im_start|>system\n"));
        FRT_TRY(puts_(b, m[0].content));
        FRT_TRY(puts_(b, "<|im_end|>\n"));
    }
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--) {
        if (!strcmp(m[i].role, "user") && !is_tool_response(S(m[i].content))) {
            last_query = i;
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        str content = S(m[i].content);
        if (!strcmp(m[i].role, "user") || (!strcmp(m[i].role, "system") && i > 0)) {
            FRT_TRY(puts_(b, "<|im_start|>"));
            FRT_TRY(puts_(b, m[i].role));
            FRT_TRY(puts_(b, "\n"));
            FRT_TRY(put(b, content));
            FRT_TRY(puts_(b, "<|im_end|>\n"));
        } else if (!strcmp(m[i].role, "assistant")) {
            str reasoning = {"", 0};
            if (find(content, "</think>")) split_think(content, &reasoning, &content);
            FRT_TRY(puts_(b, "<|im_start|>assistant\n"));
            if (i > last_query && (i == n - 1 || reasoning.n)) {
                FRT_TRY(puts_(b, "<think>\n"));
                FRT_TRY(put(b, lstrip_nl(rstrip_nl(reasoning))));
                FRT_TRY(puts_(b, "\n</think>\n\n"));
                FRT_TRY(put(b, lstrip_nl(content)));
            } else {
                FRT_TRY(put(b, content));
            }
            FRT_TRY(puts_(b, "<|im_end|>\n"));
        }
    }
    if (o->add_generation_prompt) {
        FRT_TRY(puts_(b, "<|im_start|>assistant\n"));
        if (o->enable_thinking == 0) FRT_TRY(puts_(b, "<think>\n\n</think>\n\n"));
    }
    return 0;
}

static int render_qwen35(const frt_chat_message *m, int n, const frt_chat_options *o, tok_buf *b)
{
    if (!strcmp(m[0].role, "system")) {
        FRT_TRY(puts_(b, "<|im_start|>system\n"));
        FRT_TRY(put(b, py_strip(S(m[0].content))));
        FRT_TRY(puts_(b, "<|im_end|>\n"));
    }
    int last_query = -1;
    for (int i = n - 1; i >= 0; i--) {
        if (!strcmp(m[i].role, "user") && !is_tool_response(py_strip(S(m[i].content)))) {
            last_query = i;
            break;
        }
    }
    if (last_query < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat template: No user query found in messages.");
    for (int i = 0; i < n; i++) {
        str content = py_strip(S(m[i].content));
        if (!strcmp(m[i].role, "system")) {
            if (i > 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat template: System message must be at the beginning.");
        } else if (!strcmp(m[i].role, "user")) {
            FRT_TRY(puts_(b, "<|im_start|>user\n"));
            FRT_TRY(put(b, content));
            FRT_TRY(puts_(b, "<|im_end|>\n"));
        } else {
            str reasoning = {"", 0};
            if (find(content, "</think>")) split_think(content, &reasoning, &content);
            reasoning = py_strip(reasoning);
            FRT_TRY(puts_(b, "<|im_start|>assistant\n"));
            if (i > last_query) {
                FRT_TRY(puts_(b, "<think>\n"));
                FRT_TRY(put(b, reasoning));
                FRT_TRY(puts_(b, "\n</think>\n\n"));
            }
            FRT_TRY(put(b, content));
            FRT_TRY(puts_(b, "<|im_end|>\n"));
        }
    }
    if (o->add_generation_prompt) {
        FRT_TRY(puts_(b, "<|im_start|>assistant\n"));
        FRT_TRY(puts_(b, o->enable_thinking == 0 ? "<think>\n\n</think>\n\n" : "<think>\n"));
    }
    return 0;
}

int frt_chat_render(const char *template_text, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!template_text || !text || (!msgs && n))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: NULL argument");
    if (n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: no messages");
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: message %d has a NULL role or content", i);
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") && strcmp(msgs[i].role, "assistant"))
            return frt_error(FRT_ERR_UNSUPPORTED, "frt_chat_render: message %d: role \"%s\" is not supported "
                             "(system, user, assistant)", i, msgs[i].role);
        if (!tok_utf8_valid(msgs[i].content, strlen(msgs[i].content)))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_render: message %d is not valid UTF-8", i);
    }
    frt_chat_options o = opt ? *opt : (frt_chat_options){1, -1};
    int kind;
    char *def = NULL;
    FRT_TRY(frt_chat_template_kind(template_text, &kind, &def));
    tok_buf b = {0};
    int rc = tok_buf_reserve(&b, 256);
    if (!rc) {
        if (kind == FRT_CHAT_CHATML)
            rc = render_chatml(msgs, n, &o, def, &b);
        else if (kind == FRT_CHAT_QWEN3)
            rc = render_qwen3(msgs, n, &o, &b);
        else
            rc = render_qwen35(msgs, n, &o, &b);
    }
    free(def);
    if (rc) {
        tok_buf_free(&b);
        return rc;
    }
    *text = b.p;
    if (len) *len = b.n;
    return 0;
}

int frt_chat_format_ex(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                       const frt_chat_options *opt, char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!tok) return frt_error(FRT_ERR_INVALID_ARGUMENT, "frt_chat_format: NULL tokenizer");
    const char *t = frt_tokenizer_chat_template(tok);
    if (!t)
        return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: the checkpoint has none "
                         "(no chat_template.jinja, no chat_template in tokenizer_config.json)");
    return frt_chat_render(t, msgs, n, opt, text, len);
}

int frt_chat_format(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    int add_generation_prompt, char **text)
{
    frt_chat_options o = {add_generation_prompt, -1};
    return frt_chat_format_ex(tok, msgs, n, &o, text, NULL);
}

int frt_chat_encode(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    char *text;
    size_t len;
    FRT_TRY(frt_chat_format_ex(tok, msgs, n, opt, &text, &len));
    int rc = frt_tokenizer_encode(tok, text, len, ids, n_ids);
    free(text);
    return rc;
}
