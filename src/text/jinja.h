/*
 * text/jinja.h - a Jinja2 template engine for chat templates.
 *
 * Executes the `chat_template` of a checkpoint (tokenizer_config.json or
 * chat_template.jinja) the way Hugging Face transformers does in
 * apply_chat_template (transformers/utils/chat_template_utils.py,
 * _compile_jinja_template): Jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, the
 * loopcontrols extension ({% break %}, {% continue %}), the {% generation %}
 * tag (rendered as its body), and the globals raise_exception(msg) and
 * strftime_now(fmt) and transformers' own tojson filter (json.dumps with
 * ensure_ascii=False, indent, separators, sort_keys). The goal is byte-for-
 * byte the text Jinja2 3.1 renders; tests/sh/jinja_reference.sh checks that
 * against python3-jinja2 on real templates.
 *
 * The language subset (docs/chat-templates.md has the full list):
 *   {{ expr }}, {% if/elif/else %}, {% for a[, b] in x [if cond] %} with
 *   loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/
 *   cycle() and {% else %}, {% break %}/{% continue %}, {% set %} (names,
 *   tuples, ns.attr, block set), namespace(), {% macro %} with defaults,
 *   {% call %} with caller(), {% filter %}, {% raw %}, comments, whitespace
 *   control ({%- -%} {{- -}} {#- -#} and '+'), expressions (literals, lists,
 *   dicts, tuples, arithmetic, ~, comparisons, in / not in, and/or/not,
 *   x if c else y, attribute and item access, slices), filters, tests and
 *   the str/dict/list methods chat templates call.
 * Not supported (a clear FRT_ERR_UNSUPPORTED when the template is parsed):
 *   {% include/import/extends/block %}, unknown filters and tests, and
 *   anything else docs/chat-templates.md lists.
 *
 * Values are JSON values (jansson) plus Jinja's undefined; the variables a
 * render sees are the members of one JSON object (and, with
 * frt_jinja_render_ex, of a second one whose strings are message content:
 * the render then says which bytes of its text came from them).
 *
 * Thread safety: a parsed template is read-only; any number of threads may
 * render it at once.
 */
#ifndef FRT_TEXT_JINJA_H
#define FRT_TEXT_JINJA_H

#include "text/span.h"

#include <jansson.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_jinja_template frt_jinja_template;

/* Resource limits of one render: a hostile template fails with
 * FRT_ERR_OUT_OF_RANGE instead of hanging or exhausting memory. */
typedef struct frt_jinja_limits {
    size_t max_output;  /* bytes of rendered text (default 16 MiB) */
    size_t max_memory;  /* bytes of working memory for values (default 256 MiB) */
    size_t max_steps;   /* evaluation steps: nodes, loop iterations, ... (default 10,000,000) */
    int max_depth;      /* nested macro calls (default 64) */
} frt_jinja_limits;

/* The defaults above. */
frt_jinja_limits frt_jinja_default_limits(void);

/* Parses LEN bytes of template SOURCE (UTF-8; need not be NUL-terminated).
 * On success *out owns the template (frt_jinja_free).
 * Errors (message "line L, column C: ..."): FRT_ERR_INVALID_ARGUMENT (NULL
 * argument, SOURCE not UTF-8), FRT_ERR_FORMAT (a syntax error),
 * FRT_ERR_UNSUPPORTED (a tag, filter or test frt does not implement,
 * "... is not supported"), FRT_ERR_OUT_OF_MEMORY. *out is NULL on failure. */
int frt_jinja_parse(const char *source, size_t len, frt_jinja_template **out);

/* Frees T; NULL is a no-op. */
void frt_jinja_free(frt_jinja_template *t);

/* Renders T with the members of VARS (a JSON object, not modified; NULL
 * means no variables) as the template's globals, next to the built-in
 * globals range, dict, namespace, raise_exception and strftime_now.
 * LIMITS NULL means frt_jinja_default_limits(). *text is malloc'd and
 * NUL-terminated (caller frees); *len (may be NULL) excludes the NUL.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument, VARS not an object, or
 * the template failed at run time: raise_exception("msg") gives the message
 * "chat template: msg", other errors "line L, column C: ..."),
 * FRT_ERR_UNSUPPORTED (a construct reached at run time that frt does not
 * implement, e.g. an unknown method), FRT_ERR_OUT_OF_RANGE (a limit was
 * reached), FRT_ERR_OUT_OF_MEMORY. On failure *text is NULL. */
int frt_jinja_render(const frt_jinja_template *t, const json_t *vars, const frt_jinja_limits *limits,
                     char **text, size_t *len);

/* frt_jinja_render that also says which bytes of the text came from
 * message content. CONTENT (a JSON object or NULL) holds more globals, next
 * to those of VARS (a name in both is FRT_ERR_INVALID_ARGUMENT); every
 * string in them, keys included, is content, except the "role" member of
 * an object that is an item of a list member (a message's role). The engine
 * follows those bytes through every operation (concatenation, ~, slices,
 * filters, methods, tojson, macros, block sets; docs/chat-templates.md has
 * the rules): *spans (malloc'd, caller frees; NULL when none) receives the
 * sorted, disjoint, non-touching [start, end) byte ranges of *text that are
 * content, *n_spans their number. SPANS and N_SPANS may be NULL only when
 * CONTENT is. Numbers, booleans and None from the content print unmarked.
 * Errors as frt_jinja_render; nothing is returned on failure. */
int frt_jinja_render_ex(const frt_jinja_template *t, const json_t *vars, const json_t *content,
                        const frt_jinja_limits *limits, char **text, size_t *len, frt_text_span **spans,
                        size_t *n_spans);

#ifdef __cplusplus
}
#endif
#endif /* FRT_TEXT_JINJA_H */
