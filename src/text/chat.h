/*
 * text/chat.h - chat messages -> prompt text, by executing the checkpoint's
 * chat template: the JSON entry points the server uses (the plain-message
 * ones are public, frt/chat.h).
 *
 * The template (chat_template.jinja, or tokenizer_config.json's
 * "chat_template") runs in frt's Jinja engine (text/jinja.h) the way
 * transformers' apply_chat_template runs it: the variables are messages (the
 * message objects as given, every field reaching the template: role,
 * content, tool_calls, tool_call_id, name, reasoning_content, ...), tools
 * (None when not given), documents (None), add_generation_prompt, the
 * special tokens of tokenizer_config.json (bos_token, eos_token, unk_token,
 * pad_token) and the extra keyword arguments (chat_template_kwargs, e.g.
 * enable_thinking). The text is byte for byte what transformers renders
 * (tests/sh/jinja_reference.sh compares with python3-jinja2 on real
 * templates); docs/chat-templates.md lists what the engine supports.
 *
 * Errors of a render: FRT_ERR_UNSUPPORTED "unsupported chat template: ..."
 * when the template does not parse or uses something frt does not implement
 * (the message names the line and column); FRT_ERR_INVALID_ARGUMENT when the
 * template rejects the conversation (raise_exception("...") gives "chat
 * template: ..."; a message the template cannot handle, e.g. a content of
 * the wrong type, gives the position and the Python-style error);
 * FRT_ERR_OUT_OF_RANGE when a limit of frt_jinja_default_limits() is hit.
 */
#ifndef FRT_TEXT_CHAT_H
#define FRT_TEXT_CHAT_H

#include "frt/chat.h"
#include "frt/tokenizer.h"
#include "text/span.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum frt_chat_kind {
    FRT_CHAT_CHATML = 1,
    FRT_CHAT_QWEN3 = 2,
    FRT_CHAT_QWEN35 = 3,
} frt_chat_kind;


/* A classifier kept for callers of the earlier API (rendering no longer
 * depends on it): which ChatML dialect TEMPLATE_TEXT is (*kind), recognized
 * from distinctive pieces of its text, and for FRT_CHAT_CHATML the default
 * system message it inserts (*default_system, malloc'd, NULL when none; pass
 * NULL to skip). Errors: FRT_ERR_INVALID_ARGUMENT (NULL),
 * FRT_ERR_UNSUPPORTED ("unsupported chat template: ..." for anything that is
 * not plain ChatML, Qwen2/2.5, Qwen3 or Qwen3.5), OOM. */
int frt_chat_template_kind(const char *template_text, int *kind, char **default_system);

/* ---- JSON entry points (the server's) ---------------------------------------------- */

/* One render request. Nothing is modified or kept. */
typedef struct frt_chat_request {
    const json_t *messages; /* array of message objects, passed to the template as they are (required) */
    const json_t *tools;    /* array of tool objects, or NULL: the template sees tools = None */
    const json_t *kwargs;   /* object of extra variables (chat_template_kwargs: enable_thinking, ...),
                             * or NULL; may override the special tokens, not messages / tools /
                             * documents / add_generation_prompt */
    int add_generation_prompt;
    const json_t *documents; /* array of documents for RAG templates, or NULL: documents = None */
    int parse_special_in_content; /* 0 (default): special-token strings inside bytes that came from
                                   * the messages are tokenized as text; nonzero: the whole rendered
                                   * string is tokenized as transformers does (frt_chat_encode_json) */
} frt_chat_request;

/* Renders REQ with TEMPLATE_TEXT. SPECIAL: a JSON object of the special
 * tokens the template sees ({"bos_token": "<s>", ...}), or NULL for none.
 * *text is malloc'd and NUL-terminated (caller frees); *len (may be NULL)
 * excludes the NUL. Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument,
 * messages not an array, tools / documents not an array or null, kwargs not an object or
 * naming a reserved variable, SPECIAL not an object, and the template's own
 * rejections as above), FRT_ERR_UNSUPPORTED, FRT_ERR_OUT_OF_RANGE,
 * FRT_ERR_OUT_OF_MEMORY; *text is NULL on failure. */
int frt_chat_render_json(const char *template_text, const frt_chat_request *req, const json_t *special,
                         char **text, size_t *len);

/* frt_chat_render_json that also returns which bytes of *text came from the
 * messages: *spans (malloc'd, caller frees; NULL when none) gets *n_spans
 * sorted, disjoint [start, end) byte ranges of *text. Every string of the
 * messages counts (content, content parts, tool-call names and arguments,
 * tool results, reasoning_content, names, ids, keys), except each message's
 * "role"; tools, documents, kwargs and the special tokens do not (they come
 * from the application, not from the conversation). The engine follows the
 * bytes through the template's operations (text/jinja.h,
 * frt_jinja_render_ex). SPANS and N_SPANS must not be NULL. Errors as
 * frt_chat_render_json; nothing is returned on failure. */
int frt_chat_render_json_spans(const char *template_text, const frt_chat_request *req, const json_t *special,
                               char **text, size_t *len, frt_text_span **spans, size_t *n_spans);

/* frt_chat_render_json with the tokenizer's chat template and special tokens
 * (frt_tokenizer_special_token). FRT_ERR_UNSUPPORTED "unsupported chat
 * template" also when the checkpoint has no template. */
int frt_chat_format_json(const frt_tokenizer *tok, const frt_chat_request *req, char **text, size_t *len);

/* frt_chat_format_json with the message spans (frt_chat_render_json_spans). */
int frt_chat_format_json_spans(const frt_tokenizer *tok, const frt_chat_request *req, char **text, size_t *len,
                               frt_text_span **spans, size_t *n_spans);

/* frt_chat_format_json, then the tokens of the text (no post-processor
 * tokens, as apply_chat_template with tokenize=True). Unless
 * REQ->parse_special_in_content, the bytes that came from the messages are
 * protected (tok_encode_protected): "<|im_end|>" typed by a user is several
 * ordinary tokens, never the control token; this deliberately differs from
 * transformers, which tokenizes the whole string. With
 * parse_special_in_content the ids are frt_tokenizer_encode of the text,
 * transformers' ids. *ids is malloc'd (free()). Errors as
 * frt_chat_format_json and frt_tokenizer_encode. */
int frt_chat_encode_json(const frt_tokenizer *tok, const frt_chat_request *req, int32_t **ids, size_t *n_ids);

#ifdef __cplusplus
}
#endif
#endif /* FRT_TEXT_CHAT_H */
