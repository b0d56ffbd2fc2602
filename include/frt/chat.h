/*
 * frt/chat.h - chat messages -> prompt text, by executing the checkpoint's
 * chat template in frt's Jinja engine, byte for byte as transformers'
 * apply_chat_template renders it (docs/chat-templates.md: the variables the
 * template sees, what the engine supports, the limits).
 *
 * This header has the plain-message entry points (role and content); the
 * server's JSON entry points (any message field, tools, kwargs) are
 * internal (src/text/chat.h).
 *
 * Errors of a render: FRT_ERR_UNSUPPORTED "unsupported chat template: ..."
 * when the template does not parse or uses something frt does not implement
 * (the message names the line and column); FRT_ERR_INVALID_ARGUMENT when the
 * template rejects the conversation (raise_exception("...") gives "chat
 * template: ..."); FRT_ERR_OUT_OF_RANGE when a rendering limit is hit.
 */
#ifndef FRT_CHAT_H
#define FRT_CHAT_H

#include "frt/export.h"
#include "frt/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A plain message: {"role": ROLE, "content": CONTENT} (the entry points
 * taking these build that JSON; use the *_json entry points for tool calls,
 * tool results, multimodal content or any other field). */
typedef struct {
    const char *role;    /* any role the template knows: "system", "user", "assistant", "tool", ... (UTF-8) */
    const char *content; /* NUL-terminated UTF-8 */
} frt_chat_message;

typedef struct frt_chat_options {
    int add_generation_prompt; /* nonzero: end with the assistant turn's opening */
    int enable_thinking;       /* -1: not passed (the template's default), 0: false, 1: true */
    int parse_special_in_content; /* frt_chat_encode: 0 (default): special-token text inside the
                                   * messages is encoded as ordinary tokens (a user cannot type a
                                   * control token); nonzero: transformers' ids (the whole prompt
                                   * tokenized as one string) */
} frt_chat_options;

/* ---- plain-message entry points ----------------------------------------------------- */

/* Renders N plain messages with TEMPLATE_TEXT, no tools, no special tokens,
 * kwargs {enable_thinking} when OPT->enable_thinking >= 0. *text is
 * malloc'd and NUL-terminated (caller frees); *len (may be NULL) excludes
 * the NUL. OPT NULL means {add_generation_prompt 1, enable_thinking -1}.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument, N < 1, a NULL role or
 * content, a role or content not UTF-8, or what the template rejects),
 * FRT_ERR_UNSUPPORTED (the template), FRT_ERR_OUT_OF_RANGE,
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_chat_render(const char *template_text, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, char **text, size_t *len);

/* frt_chat_render with the tokenizer's chat template and special tokens and
 * {add_generation_prompt, enable_thinking -1}. FRT_ERR_UNSUPPORTED
 * "unsupported chat template" also when the tokenizer has no template. */
FRT_API int frt_chat_format(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    int add_generation_prompt, char **text);

/* frt_chat_format with options and the length. */
FRT_API int frt_chat_format_ex(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                       const frt_chat_options *opt, char **text, size_t *len);

/* Formats and encodes (without post-processor tokens, as apply_chat_template
 * with tokenize=True does). Unless OPT->parse_special_in_content, the bytes
 * of the prompt that came from the messages' contents (not their roles) are
 * protected:
 * a special or added token's text inside a content ("<|im_end|>") is
 * encoded as ordinary tokens, never as the control token, while the
 * template's own control tokens stay special ids. This deliberately
 * differs from transformers (docs/chat-templates.md). *ids is malloc'd
 * (free()). Errors as frt_chat_format_ex and frt_tokenizer_encode. */
FRT_API int frt_chat_encode(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, int32_t **ids, size_t *n_ids);

#ifdef __cplusplus
}
#endif
#endif /* FRT_CHAT_H */
