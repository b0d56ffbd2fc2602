/*
 * serving/api_chat.c - the chat members of a completion request (see api.h
 * and docs/serving.md): messages (every role and field an agent sends),
 * tools, tool_choice, parallel_tool_calls, chat_template_kwargs. Each is
 * validated strictly and kept as JSON for the chat template (text/chat.h);
 * anything the server cannot honour is refused, never dropped.
 */
#include "serving/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARAM_MAX = 128 };

/* out = where + suffix (a parameter path such as "messages[2].tool_calls[0]"), truncated to fit. */
static const char *param_of(char out[PARAM_MAX], const char *where, const char *suffix)
{
    if (snprintf(out, PARAM_MAX, "%s%s", where, suffix) >= PARAM_MAX) out[PARAM_MAX - 1] = 0;
    return out;
}

static int oom(frt_api_error *err) { return frt_api_fail(err, 500, "internal_error", NULL, "out of memory"); }

static int bad_type(frt_api_error *err, const char *param, const char *want)
{
    return frt_api_fail(err, 400, "invalid_type", param, "Invalid type for '%s': expected %s", param, want);
}

static int need_string(json_t *o, const char *key, const char *where, int required, frt_api_error *err)
{
    char param[PARAM_MAX], dot_key[64];
    snprintf(dot_key, sizeof dot_key, ".%.60s", key);
    param_of(param, where, dot_key);
    json_t *v = json_object_get(o, key);
    if (!v && required) return frt_api_fail(err, 400, "missing_required_parameter", param, "Missing '%s'", param);
    if (v && !json_is_string(v)) return bad_type(err, param, "a string");
    return 0;
}

/* Content: a string, null (or absent: ""), or text parts [{type: "text",
 * text}] joined into one string, as vLLM passes content to templates (the
 * Qwen3 template fails on a null content). *out: a new reference. */
static int content_value(json_t *content, const char *param, json_t **out, frt_api_error *err)
{
    if (!content || json_is_null(content) || json_is_string(content)) {
        *out = json_is_string(content) ? json_incref(content) : json_string("");
        return *out ? 0 : oom(err);
    }
    if (!json_is_array(content)) return bad_type(err, param, "a string, null or an array of content parts");
    size_t total = 1, k;
    json_t *part;
    json_array_foreach(content, k, part) {
        static const char *const part_fields[] = {"type", "text", NULL};
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type)) return bad_type(err, param, "an array of content parts");
        if (strcmp(json_string_value(type), "text"))
            return frt_api_fail(err, 400, "unsupported_value", param,
                                "Content parts of type '%.64s' are not supported in '%s' (text only)",
                                json_string_value(type), param);
        if (frt_api_only_known(part, part_fields, "a content part", err)) return -1;
        if (!json_is_string(text)) return bad_type(err, param, "text parts with a string 'text'");
        total += json_string_length(text);
    }
    char *s = malloc(total), *p = s;
    if (!s) return oom(err);
    json_array_foreach(content, k, part) {
        json_t *t = json_object_get(part, "text");
        memcpy(p, json_string_value(t), json_string_length(t));
        p += json_string_length(t);
    }
    *out = json_stringn(s, (size_t)(p - s));
    free(s);
    return *out ? 0 : oom(err);
}

/* Members the official clients echo back in an assistant message they
 * received (refusal, annotations, audio, function_call, parsed; a tool
 * call's parsed_arguments): accepted when null or [] (they carry nothing),
 * else 400 unsupported_value naming them; the caller drops them. */
static int only_empty(json_t *o, const char *const *keys, const char *where, frt_api_error *err)
{
    for (const char *const *k = keys; *k; k++) {
        json_t *v = json_object_get(o, *k);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v))) {
            char param[PARAM_MAX], dot_key[64];
            snprintf(dot_key, sizeof dot_key, ".%.60s", *k);
            return frt_api_fail(err, 400, "unsupported_value", param_of(param, where, dot_key),
                                "'%s' must be null or empty: frt serve does not take it back into a conversation",
                                param);
        }
    }
    return 0;
}

static const char *const k_echoed[] = {"refusal", "annotations", "audio", "function_call", "parsed", NULL};

/* Deletes the members keys (an echoed message's empty members) from o. */
static void drop_members(json_t *o, const char *const *keys)
{
    for (const char *const *k = keys; *k; k++) json_object_del(o, *k);
}

/* One tool call of an assistant message: {id, type: "function", function: {name, arguments}}. */
static int check_tool_call(json_t *tc, const char *where, frt_api_error *err)
{
    static const char *const tc_fields[] = {"id", "type", "function", NULL};
    static const char *const fn_fields[] = {"name", "arguments", "parsed_arguments", NULL};
    if (!json_is_object(tc)) return bad_type(err, where, "an object");
    if (frt_api_only_known(tc, tc_fields, "a tool call", err) || need_string(tc, "id", where, 1, err) ||
        need_string(tc, "type", where, 0, err))
        return -1;
    json_t *type = json_object_get(tc, "type"), *fn = json_object_get(tc, "function");
    if (type && strcmp(json_string_value(type), "function"))
        return frt_api_fail(err, 400, "unsupported_value", where, "Only tool calls of type 'function' are supported");
    char param[PARAM_MAX];
    param_of(param, where, ".function");
    if (!json_is_object(fn)) return bad_type(err, param, "an object");
    static const char *const empty_ok[] = {"parsed_arguments", NULL};
    return frt_api_only_known(fn, fn_fields, "a tool call's function", err) ||
                   need_string(fn, "name", param, 1, err) || need_string(fn, "arguments", param, 1, err) ||
                   only_empty(fn, empty_ok, param, err)
               ? -1
               : 0;
}

/* A call's arguments reach the template as a JSON object when the string
 * parses as one (as vLLM passes them): templates iterate them
 * (Qwen3.5: `arguments|items`) or print them with tojson (Qwen3 prints a
 * string as it is, an object with tojson). Any other string stays a string.
 * Returns -1 on out of memory. */
static int arguments_as_object(json_t *fn)
{
    json_t *a = json_object_get(fn, "arguments");
    if (!json_is_string(a)) return 0;
    json_t *obj = json_loadb(json_string_value(a), json_string_length(a), JSON_DECODE_ANY, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return 0;
    }
    return json_object_set_new(fn, "arguments", obj) ? -1 : 0;
}

/* The fields each role may carry. */
static const char *const *role_fields(const char *role)
{
    static const char *const plain[] = {"role", "content", "name", NULL};
    static const char *const assistant[] = {"role",    "content",     "name",          "tool_calls", "reasoning_content",
                                            "refusal", "annotations", "function_call", "audio",      "parsed",
                                            NULL};
    static const char *const tool[] = {"role", "content", "tool_call_id", NULL};
    if (!strcmp(role, "system") || !strcmp(role, "developer") || !strcmp(role, "user")) return plain;
    if (!strcmp(role, "assistant")) return assistant;
    if (!strcmp(role, "tool")) return tool;
    return NULL;
}

/* Checks message x (index i) and appends its normalized copy to out. */
static int add_message(json_t *x, size_t i, json_t *out, frt_api_error *err)
{
    char where[48], param[PARAM_MAX], idx[48];
    snprintf(where, sizeof where, "messages[%zu]", i);
    if (!json_is_object(x)) return bad_type(err, where, "an object");
    json_t *role = json_object_get(x, "role");
    param_of(param, where, ".role");
    if (!role) return frt_api_fail(err, 400, "missing_required_parameter", param, "Missing '%s'", param);
    if (!json_is_string(role)) return bad_type(err, param, "a string");
    const char *r = json_string_value(role);
    const char *const *fields = role_fields(r);
    if (!fields)
        return frt_api_fail(err, 400, "invalid_value", param,
                            "Role '%.32s' is not supported in '%s' (system, developer, user, assistant, tool)", r,
                            param);
    if (frt_api_only_known(x, fields, "a message", err) || need_string(x, "name", where, 0, err) ||
        only_empty(x, k_echoed, where, err))
        return -1;
    if (!strcmp(r, "tool") && need_string(x, "tool_call_id", where, 1, err)) return -1;
    json_t *rc = json_object_get(x, "reasoning_content");
    if (rc && !json_is_null(rc) && !json_is_string(rc)) {
        param_of(param, where, ".reasoning_content");
        return bad_type(err, param, "a string");
    }
    json_t *calls = json_object_get(x, "tool_calls");
    if (calls && !json_is_null(calls)) {
        param_of(param, where, ".tool_calls");
        if (!json_is_array(calls)) return bad_type(err, param, "an array");
        size_t k;
        json_t *tc;
        json_array_foreach(calls, k, tc) {
            snprintf(idx, sizeof idx, ".tool_calls[%zu]", k);
            param_of(param, where, idx);
            if (check_tool_call(tc, param, err)) return -1;
        }
    }
    json_t *m = json_deep_copy(x), *content = NULL;
    param_of(param, where, ".content");
    if (!m) return oom(err);
    if (content_value(json_object_get(x, "content"), param, &content, err)) {
        json_decref(m);
        return -1;
    }
    json_object_set_new(m, "content", content);
    drop_members(m, k_echoed);
    json_t *mc = json_object_get(m, "tool_calls");
    size_t k;
    json_t *tc;
    json_array_foreach(mc, k, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_object_del(fn, "parsed_arguments");
        if (arguments_as_object(fn)) {
            json_decref(m);
            return oom(err);
        }
    }
    if (!strcmp(r, "developer")) json_object_set_new(m, "role", json_string("system"));
    return json_array_append_new(out, m) ? oom(err) : 0;
}

static int parse_messages(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *m = json_object_get(o, "messages");
    if (!m || json_is_null(m))
        return frt_api_fail(err, 400, "missing_required_parameter", "messages",
                            "Missing required parameter: 'messages'");
    if (!json_is_array(m)) return bad_type(err, "messages", "an array");
    if (!json_array_size(m)) return frt_api_fail(err, 400, "invalid_value", "messages", "'messages' must not be empty");
    if (!(c->messages = json_array())) return oom(err);
    size_t i;
    json_t *x;
    json_array_foreach(m, i, x) if (add_message(x, i, c->messages, err)) return -1;
    return 0;
}

/* One tool: {type: "function", function: {name, description?, parameters?, strict?}}. */
static int check_tool(json_t *t, size_t i, frt_api_error *err)
{
    static const char *const tool_fields[] = {"type", "function", NULL};
    static const char *const fn_fields[] = {"name", "description", "parameters", "strict", NULL};
    char where[48], param[PARAM_MAX];
    snprintf(where, sizeof where, "tools[%zu]", i);
    if (!json_is_object(t)) return bad_type(err, where, "an object");
    if (frt_api_only_known(t, tool_fields, "a tool", err) || need_string(t, "type", where, 1, err)) return -1;
    if (strcmp(json_string_value(json_object_get(t, "type")), "function"))
        return frt_api_fail(err, 400, "unsupported_value", where, "Only tools of type 'function' are supported");
    json_t *fn = json_object_get(t, "function");
    param_of(param, where, ".function");
    if (!json_is_object(fn)) return bad_type(err, param, "an object");
    if (frt_api_only_known(fn, fn_fields, "a tool's function", err) || need_string(fn, "name", param, 1, err) ||
        need_string(fn, "description", param, 0, err))
        return -1;
    json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
    param_of(param, where, ".function.parameters");
    if (params && !json_is_object(params)) return bad_type(err, param, "a JSON schema object");
    param_of(param, where, ".function.strict");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict)) return bad_type(err, param, "a boolean");
    if (json_is_true(strict))
        return frt_api_fail(err, 400, "unsupported_value", param,
                            "'strict' tools need constrained decoding, which frt serve does not do yet");
    return 0;
}

static int parse_tools(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *tools = json_object_get(o, "tools");
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools)) return bad_type(err, "tools", "an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) if (check_tool(t, i, err)) return -1;
    if (json_array_size(tools) && !(c->tools = json_deep_copy(tools))) return oom(err);
    return 0;
}

/* {"type": "function", "function": {"name": NAME}}: NAME into c->tool_name. */
static int parse_named_choice(json_t *tc, frt_api_completion *c, frt_api_error *err)
{
    static const char *const fields[] = {"type", "function", NULL}, *const fn_fields[] = {"name", NULL};
    json_t *type = json_object_get(tc, "type"), *fn = json_object_get(tc, "function");
    if (frt_api_only_known(tc, fields, "tool_choice", err)) return -1;
    if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_object(fn))
        return frt_api_fail(err, 400, "invalid_value", "tool_choice",
                            "a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (frt_api_only_known(fn, fn_fields, "tool_choice.function", err)) return -1;
    json_t *name = json_object_get(fn, "name");
    if (!json_is_string(name) || !json_string_length(name) || json_string_length(name) >= sizeof c->tool_name)
        return frt_api_fail(err, 400, "invalid_value", "tool_choice", "'tool_choice.function.name' must be a tool's name");
    snprintf(c->tool_name, sizeof c->tool_name, "%s", json_string_value(name));
    c->tool_choice = FRT_API_TOOLS_NAMED;
    return 0;
}

static int parse_tool_choice(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *tc = json_object_get(o, "tool_choice");
    c->tool_choice = FRT_API_TOOLS_AUTO;
    if (tc && json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "none")) c->tool_choice = FRT_API_TOOLS_NONE;
        else if (!strcmp(v, "required")) c->tool_choice = FRT_API_TOOLS_REQUIRED;
        else if (strcmp(v, "auto"))
            return frt_api_fail(err, 400, "invalid_value", "tool_choice",
                                "'tool_choice' must be 'auto', 'none', 'required' or a named function");
    } else if (tc && json_is_object(tc)) {
        if (parse_named_choice(tc, c, err)) return -1;
    } else if (tc && !json_is_null(tc)) {
        return bad_type(err, "tool_choice", "a string or an object");
    }
    if ((c->tool_choice == FRT_API_TOOLS_REQUIRED || c->tool_choice == FRT_API_TOOLS_NAMED) && !c->tools)
        return frt_api_fail(err, 400, "invalid_value", "tool_choice", "'tool_choice' %s needs 'tools'",
                            c->tool_choice == FRT_API_TOOLS_REQUIRED ? "'required'" : "naming a function");
    json_t *ptc = json_object_get(o, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc)) return bad_type(err, "parallel_tool_calls", "a boolean");
    c->parallel_tool_calls = !json_is_false(ptc);
    if (json_is_false(ptc) && c->tool_choice != FRT_API_TOOLS_REQUIRED && c->tool_choice != FRT_API_TOOLS_NAMED)
        return frt_api_fail(err, 400, "unsupported_value", "parallel_tool_calls",
                            "'parallel_tool_calls': false is enforced only with tool_choice 'required' or a named "
                            "function (with 'auto' the model may still make several calls)");
    return 0;
}

static int parse_kwargs(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *kw = json_object_get(o, "chat_template_kwargs");
    if (!kw || json_is_null(kw)) return 0;
    if (!json_is_object(kw)) return bad_type(err, "chat_template_kwargs", "an object");
    static const char *const reserved[] = {"messages", "tools", "documents", "add_generation_prompt"};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (json_object_get(kw, reserved[i]))
            return frt_api_fail(err, 400, "invalid_value", "chat_template_kwargs",
                                "'chat_template_kwargs' may not set '%s' (it is a request field of its own)",
                                reserved[i]);
    c->template_kwargs = json_deep_copy(kw);
    return c->template_kwargs ? 0 : oom(err);
}

int frt_api_parse_chat(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    if (frt_api_opt_bool(o, "frt_return_prompt", &c->return_prompt, err) || parse_messages(o, c, err) || parse_tools(o, c, err) || parse_tool_choice(o, c, err) ||
        parse_kwargs(o, c, err))
        return -1;
    return 0;
}

/* ---- the answer side: parsed output -> message / stream deltas ------------------------ */

static json_t *tool_call_json(const frt_chat_piece *pc, int with_head, int with_args)
{
    json_t *tc = json_object(), *fn = json_object();
    json_object_set_new(tc, "index", json_integer(pc->index));
    if (with_head) {
        json_object_set_new(tc, "id", json_string(pc->id));
        json_object_set_new(tc, "type", json_string("function"));
        json_object_set_new(fn, "name", json_string(pc->name));
    }
    json_object_set_new(fn, "arguments", json_string(with_args ? pc->arguments : ""));
    json_object_set_new(tc, "function", fn);
    return tc;
}

json_t *frt_api_piece_deltas(const frt_chat_piece *pc)
{
    json_t *out = json_array();
    if (pc->part == FRT_CHAT_PART_TOOL_CALL) {
        /* the call's head first (arguments ""), then its arguments: the
         * shape the official clients reassemble */
        for (int k = 0; k < 2; k++) {
            json_t *d = json_object(), *calls = json_array();
            json_array_append_new(calls, tool_call_json(pc, k == 0, k == 1));
            json_object_set_new(d, "tool_calls", calls);
            json_array_append_new(out, d);
        }
        return out;
    }
    json_t *d = json_object();
    json_object_set_new(d, pc->part == FRT_CHAT_PART_REASONING ? "reasoning_content" : "content",
                        json_stringn(pc->text, pc->len));
    json_array_append_new(out, d);
    return out;
}

/* Appends s[0..n) to the string member key of o. */
static int append_member(json_t *o, const char *key, const char *s, size_t n)
{
    json_t *old = json_object_get(o, key);
    size_t l = json_is_string(old) ? json_string_length(old) : 0;
    char *b = malloc(l + n + 1);
    if (!b) return -1;
    if (l) memcpy(b, json_string_value(old), l);
    memcpy(b + l, s, n);
    int rc = json_object_set_new(o, key, json_stringn(b, l + n));
    free(b);
    return rc;
}

int frt_api_message_add(json_t *msg, const frt_chat_piece *pc)
{
    if (pc->part == FRT_CHAT_PART_CONTENT) return append_member(msg, "content", pc->text, pc->len);
    if (pc->part == FRT_CHAT_PART_REASONING) return append_member(msg, "reasoning_content", pc->text, pc->len);
    json_t *calls = json_object_get(msg, "tool_calls");
    if (!calls) json_object_set_new(msg, "tool_calls", calls = json_array());
    json_t *tc = tool_call_json(pc, 1, 1);
    json_object_del(tc, "index");
    return json_array_append_new(calls, tc);
}

json_t *frt_api_message_new(void)
{
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "content", json_null());
    return m;
}

void frt_api_message_finish(json_t *msg)
{
    if (!json_object_get(msg, "tool_calls") && json_is_null(json_object_get(msg, "content")))
        json_object_set_new(msg, "content", json_string(""));
}
