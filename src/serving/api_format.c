/*
 * serving/api_format.c - the constrained-output members of a completion
 * request: response_format (json_object, json_schema) and tool_choice
 * required / a named function, compiled into a grammar (frt/grammar.h)
 * when the request is parsed, so a schema outside the subset is a 400
 * before anything runs. docs/serving.md, "Structured output".
 */
#include "serving/api.h"

#include "frt/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A compile failure as a 400: param names the keyword at fault (or the
 * member, for a malformed JSON text). */
static int grammar_fail(frt_api_error *err, int rc, const frt_grammar_diag *d, const char *member)
{
    const char *param = d->keyword[0] ? d->keyword : member;
    if (rc == FRT_ERR_OUT_OF_MEMORY) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    return frt_api_fail(err, 400, rc == FRT_ERR_UNSUPPORTED ? "unsupported_value" : "invalid_value", param, "%s: %s",
                        member, frt_last_error());
}

/* {"name", "schema", "strict"?, "description"?}: the schema's grammar. */
static int parse_json_schema(json_t *js, frt_api_completion *c, frt_api_error *err)
{
    static const char *const fields[] = {"name", "schema", "strict", "description", NULL};
    if (!json_is_object(js))
        return frt_api_fail(err, 400, "invalid_type", "response_format.json_schema",
                            "'response_format.json_schema' must be an object");
    if (frt_api_only_known(js, fields, "response_format.json_schema", err)) return -1;
    json_t *name = json_object_get(js, "name"), *schema = json_object_get(js, "schema");
    json_t *strict = json_object_get(js, "strict");
    if (!json_is_string(name) || !json_string_length(name))
        return frt_api_fail(err, 400, "missing_required_parameter", "response_format.json_schema.name",
                            "'response_format.json_schema.name' must be a non-empty string");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return frt_api_fail(err, 400, "invalid_type", "response_format.json_schema.strict",
                            "'response_format.json_schema.strict' must be a boolean");
    if (!json_is_object(schema))
        return frt_api_fail(err, 400, "missing_required_parameter", "response_format.json_schema.schema",
                            "'response_format.json_schema.schema' must be a JSON Schema object");
    char *text = json_dumps(schema, JSON_COMPACT);
    if (!text) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    frt_grammar_diag d;
    int rc = frt_grammar_compile_json_schema(text, strlen(text), &c->grammar, &d);
    free(text);
    return rc ? grammar_fail(err, rc, &d, "response_format.json_schema.schema") : 0;
}

static int parse_response_format(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    static const char *const fields[] = {"type", "json_schema", NULL};
    json_t *rf = json_object_get(o, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    if (!json_is_object(rf))
        return frt_api_fail(err, 400, "invalid_type", "response_format", "'response_format' must be an object");
    if (frt_api_only_known(rf, fields, "response_format", err)) return -1;
    json_t *t = json_object_get(rf, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : "";
    if (strcmp(type, "json_schema") && json_object_get(rf, "json_schema"))
        return frt_api_fail(err, 400, "invalid_value", "response_format.json_schema",
                            "'json_schema' goes with \"type\": \"json_schema\"");
    if (!strcmp(type, "text")) return 0;
    c->grammar_param = "response_format";
    if (!strcmp(type, "json_object")) {
        frt_grammar_diag d;
        int rc = frt_grammar_compile_json_schema(NULL, 0, &c->grammar, &d);
        return rc ? grammar_fail(err, rc, &d, "response_format") : 0;
    }
    if (!strcmp(type, "json_schema")) return parse_json_schema(json_object_get(rf, "json_schema"), c, err);
    return frt_api_fail(err, 400, "invalid_value", "response_format.type",
                        "'response_format.type' must be 'text', 'json_object' or 'json_schema'");
}

/* tool_choice required / named: the tool-call grammar of the tools. */
static int parse_forced_tools(frt_api_completion *c, frt_api_error *err)
{
    if (c->tool_choice != FRT_API_TOOLS_REQUIRED && c->tool_choice != FRT_API_TOOLS_NAMED) return 0;
    if (c->grammar)
        return frt_api_fail(err, 400, "invalid_value", "response_format",
                            "a JSON 'response_format' and 'tool_choice' %s cannot both be enforced: the answer is "
                            "either a tool call or JSON content",
                            c->tool_choice == FRT_API_TOOLS_REQUIRED ? "'required'" : "naming a function");
    char *text = json_dumps(c->tools, JSON_COMPACT);
    if (!text) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    frt_grammar_diag d;
    int rc = frt_grammar_compile_tool_calls(text, strlen(text), c->tool_choice == FRT_API_TOOLS_NAMED ? c->tool_name : NULL,
                                            c->parallel_tool_calls, &c->grammar, &d);
    free(text);
    c->grammar_param = "tool_choice";
    if (rc == FRT_ERR_NOT_FOUND)
        return frt_api_fail(err, 400, "invalid_value", "tool_choice", "'tool_choice' names '%s', which is not in 'tools'",
                            c->tool_name);
    return rc ? grammar_fail(err, rc, &d, "tools") : 0;
}

int frt_api_parse_grammar(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    if (parse_response_format(o, c, err)) return -1;
    return c->chat ? parse_forced_tools(c, err) : 0;
}
