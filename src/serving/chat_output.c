/*
 * serving/chat_output.c - generated chat text -> reasoning, content and
 * tool calls, incrementally (see chat_output.h for the formats).
 *
 * The parser holds the undecided tail in buf and works in one of four
 * modes: START (a `<think>` may still open), REASONING (until `</think>`),
 * CONTENT (a `<tool_call>` may open; leading and inter-call white space is
 * held), TOOL (the body, until `</tool_call>`).
 */
#include "serving/chat_output.h"

#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { M_START, M_REASONING, M_AFTER_THINK, M_CONTENT, M_TOOL };

static const char k_think[] = "<think>", k_think_end[] = "</think>";
static const char k_call[] = "<tool_call>", k_call_end[] = "</tool_call>";

void frt_chat_output_init(frt_chat_output *p, int tools, int reasoning_open, uint64_t id_seed,
                          frt_chat_piece_fn fn, void *user)
{
    memset(p, 0, sizeof *p);
    p->tools = tools;
    p->reasoning_open = reasoning_open;
    p->id_seed = id_seed;
    p->fn = fn;
    p->user = user;
    p->mode = reasoning_open ? M_REASONING : M_START;
}

void frt_chat_output_clear(frt_chat_output *p)
{
    if (!p) return;
    free(p->buf);
    p->buf = NULL;
    p->len = p->cap = 0;
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static size_t skip_space(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && is_space(s[i])) i++;
    return i;
}

/* Index of needle in s[0..n), or n when absent. */
static size_t find(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return i;
    return n;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    size_t k = strlen(tag);
    for (size_t l = k - 1 < n ? k - 1 : n; l > 0; l--)
        if (!memcmp(s + n - l, tag, l)) return l;
    return 0;
}

/* Drops the first n held bytes. */
static void consume(frt_chat_output *p, size_t n)
{
    if (n < p->len) memmove(p->buf, p->buf + n, p->len - n); /* (buf is NULL while nothing was held) */
    p->len -= n;
}

static int emit_text(frt_chat_output *p, frt_chat_part part, const char *s, size_t n)
{
    if (!n) return 0;
    frt_chat_piece pc = {.part = part, .text = s, .len = n};
    return p->fn(p->user, &pc);
}

/* End of the JSON value starting at s[i] (s is valid JSON: jansson checked it). */
static size_t skip_value(const char *s, size_t n, size_t i)
{
    if (s[i] == '"') {
        for (i++; i < n && s[i] != '"'; i++)
            if (s[i] == '\\') i++;
        return i + 1;
    }
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        for (; i < n; i++) {
            if (s[i] == '"') i = skip_value(s, n, i) - 1;
            else if (s[i] == '{' || s[i] == '[') depth++;
            else if ((s[i] == '}' || s[i] == ']') && --depth == 0) return i + 1;
        }
        return n;
    }
    while (i < n && !is_space(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') i++;
    return i;
}

/* The bytes of the top-level member "arguments" of the object s[0..n), as
 * the model wrote them: *at, *len; 0 when absent. */
static int raw_arguments(const char *s, size_t n, size_t *at, size_t *len)
{
    size_t i = skip_space(s, n) + 1; /* past '{' */
    while (i < n) {
        i += skip_space(s + i, n - i);
        if (s[i] != '"') return 0;
        size_t k = i, ke = skip_value(s, n, i);
        i = ke + skip_space(s + ke, n - ke) + 1; /* past ':' */
        i += skip_space(s + i, n - i);
        size_t ve = skip_value(s, n, i);
        if (ke - k == 11 && !memcmp(s + k, "\"arguments\"", 11)) {
            *at = i;
            *len = ve - i;
            return 1;
        }
        i = ve + skip_space(s + ve, n - ve) + 1; /* past ',' or '}' */
    }
    return 0;
}

/* The body of one tool call: *o (the object) when it is a valid call, else NULL. */
static json_t *parse_call(const char *body, size_t n)
{
    json_t *o = json_loadb(body, n, 0, NULL);
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    if (json_is_object(o) && json_is_string(name) && json_string_length(name) &&
        (!args || json_is_object(args) || json_is_string(args)))
        return o;
    json_decref(o);
    return NULL;
}

/* Emits the call o parsed from body[0..n). */
static int emit_call(frt_chat_output *p, json_t *o, const char *body, size_t n)
{
    json_t *args = json_object_get(o, "arguments");
    size_t at = 0, len = 0;
    char *a = NULL;
    if (!args) a = strdup("{}");
    else if (json_is_string(args)) a = strdup(json_string_value(args));
    else if (raw_arguments(body, n, &at, &len)) a = strndup(body + at, len);
    else a = json_dumps(args, JSON_PRESERVE_ORDER); /* a key spelled with escapes: re-serialized */
    if (!a) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat output: tool call");
    uint64_t seeds[2] = {p->id_seed, (uint64_t)p->n_calls};
    char id[32];
    snprintf(id, sizeof id, "call_%016llx", (unsigned long long)XXH64(seeds, sizeof seeds, 0x7001ca11ull));
    frt_chat_piece pc = {.part = FRT_CHAT_PART_TOOL_CALL,
                         .index = p->n_calls,
                         .id = id,
                         .name = json_string_value(json_object_get(o, "name")),
                         .arguments = a};
    p->n_calls++;
    int rc = p->fn(p->user, &pc);
    free(a);
    return rc;
}

/* One step of the machine over the held text: *progress is set when it
 * changed something (the caller loops until no progress). */
static int step_start(frt_chat_output *p, int *progress)
{
    size_t ws = skip_space(p->buf, p->len), tl = sizeof k_think - 1;
    size_t rest = p->len - ws;
    if (rest >= tl && !memcmp(p->buf + ws, k_think, tl)) {
        consume(p, ws + tl);
        p->mode = M_REASONING;
        *progress = 1;
    } else if (rest < tl && !memcmp(p->buf + ws, k_think, rest)) {
        return 0; /* still undecided */
    } else {
        p->mode = M_CONTENT;
        *progress = 1;
    }
    return 0;
}

static int step_reasoning(frt_chat_output *p, int *progress, int final)
{
    size_t at = find(p->buf, p->len, k_think_end);
    if (at < p->len) {
        int rc = emit_text(p, FRT_CHAT_PART_REASONING, p->buf, at);
        consume(p, at + sizeof k_think_end - 1);
        p->mode = M_AFTER_THINK;
        *progress = 1;
        return rc;
    }
    size_t keep = final ? 0 : partial_tag(p->buf, p->len, k_think_end);
    int rc = emit_text(p, FRT_CHAT_PART_REASONING, p->buf, p->len - keep);
    consume(p, p->len - keep);
    return rc;
}

/* After </think>: new lines are dropped until something else comes. */
static int step_after_think(frt_chat_output *p, int *progress)
{
    size_t i = 0;
    while (i < p->len && (p->buf[i] == '\n' || p->buf[i] == '\r')) i++;
    consume(p, i);
    if (p->len) {
        p->mode = M_CONTENT;
        *progress = 1;
    }
    return 0;
}

static int step_content(frt_chat_output *p, int *progress, int final)
{
    if (p->after_call) { /* white space after a call is dropped */
        consume(p, skip_space(p->buf, p->len));
        if (!p->len) return 0;
        p->after_call = 0;
    }
    size_t at = p->tools ? find(p->buf, p->len, k_call) : p->len;
    if (at < p->len) {
        /* white space right before a call is dropped if the call is valid */
        size_t end = at;
        while (end > 0 && is_space(p->buf[end - 1])) end--;
        int rc = emit_text(p, FRT_CHAT_PART_CONTENT, p->buf, end);
        consume(p, end);
        p->body_at = at - end + sizeof k_call - 1;
        p->scanned = p->body_at;
        p->mode = M_TOOL;
        *progress = 1;
        return rc;
    }
    size_t keep = 0;
    if (!final && p->tools) {
        keep = partial_tag(p->buf, p->len, k_call);
        /* trailing white space may precede a call: hold it too */
        while (keep < p->len && is_space(p->buf[p->len - keep - 1])) keep++;
    }
    int rc = emit_text(p, FRT_CHAT_PART_CONTENT, p->buf, p->len - keep);
    consume(p, p->len - keep);
    if (final) p->len = 0;
    return rc;
}

/* The held text is [white space] "<tool_call>" body ["</tool_call>" ...]
 * with the body at body_at. */
static int step_tool(frt_chat_output *p, int *progress, int final)
{
    /* what was scanned before cannot hold the whole end tag: resume near its end */
    size_t from = p->scanned > p->body_at + sizeof k_call_end ? p->scanned - sizeof k_call_end : p->body_at;
    size_t at = find(p->buf + from, p->len - from, k_call_end) + from;
    p->scanned = p->len;
    if (at == p->len && !final) return 0;
    size_t end = at == p->len ? at : at + sizeof k_call_end - 1;
    json_t *o = at < p->len ? parse_call(p->buf + p->body_at, at - p->body_at) : NULL;
    /* a valid call is a piece; anything else is content, exactly as written */
    int rc = o ? emit_call(p, o, p->buf + p->body_at, at - p->body_at) : emit_text(p, FRT_CHAT_PART_CONTENT, p->buf, end);
    p->after_call = o != NULL;
    json_decref(o);
    *progress = at < p->len; /* the end tag was found: what follows it is content to look at */
    consume(p, end);
    p->mode = M_CONTENT;
    return rc;
}

static int run(frt_chat_output *p, int final)
{
    int progress = 1, rc = 0;
    while (progress && !rc) {
        progress = 0;
        switch (p->mode) {
        case M_START:
            if (final) p->mode = M_CONTENT, progress = 1;
            else rc = step_start(p, &progress);
            break;
        case M_REASONING: rc = step_reasoning(p, &progress, final); break;
        case M_AFTER_THINK: rc = step_after_think(p, &progress); break;
        case M_CONTENT: rc = step_content(p, &progress, final); break;
        default: rc = step_tool(p, &progress, final); break;
        }
    }
    return rc;
}

int frt_chat_output_feed(frt_chat_output *p, const char *text, size_t len)
{
    if (!len) return 0;
    if (p->len + len + 1 > p->cap) {
        size_t nc = p->cap ? p->cap : 256;
        while (nc < p->len + len + 1) nc *= 2;
        char *b = realloc(p->buf, nc);
        if (!b) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat output: %zu bytes", nc);
        p->buf = b;
        p->cap = nc;
    }
    memcpy(p->buf + p->len, text, len);
    p->len += len;
    return run(p, 0);
}

int frt_chat_output_finish(frt_chat_output *p) { return run(p, 1); }

int frt_chat_prompt_opens_reasoning(const char *prompt, size_t len)
{
    size_t tl = sizeof k_think - 1, end = len;
    while (end > 0 && is_space(prompt[end - 1])) end--;
    return end >= tl && !memcmp(prompt + end - tl, k_think, tl);
}
