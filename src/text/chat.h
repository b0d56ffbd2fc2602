/*
 * text/chat.h - chat messages -> prompt text, for the ChatML family.
 *
 * A checkpoint's chat template is Jinja (chat_template.jinja, or
 * tokenizer_config.json's "chat_template"). frt does not run Jinja: it
 * recognizes the templates of the ChatML family by distinctive pieces of
 * their text and formats the messages natively, character for character as
 * transformers' apply_chat_template renders them. Any other template is
 * FRT_ERR_UNSUPPORTED "unsupported chat template", never a guess.
 *
 * Recognized (docs/tokenizer.md has the exact rules):
 *
 *   FRT_CHAT_CHATML  plain ChatML: each message as
 *                    "<|im_start|>ROLE\nCONTENT<|im_end|>\n", the generation
 *                    prompt "<|im_start|>assistant\n". Covers the generic
 *                    ChatML template, Qwen2 and Qwen2.5, including a default
 *                    system message the template inserts when the first
 *                    message is not a system message.
 *   FRT_CHAT_QWEN3   Qwen3 (thinking): assistant turns after the last user
 *                    query carry "<think>\n...\n</think>\n\n"; earlier ones
 *                    lose their <think> part; the generation prompt gets an
 *                    empty think block when enable_thinking is false.
 *   FRT_CHAT_QWEN35  Qwen3.5 / Qwen3.6: contents trimmed, every assistant
 *                    turn after the last user query with a think block, the
 *                    generation prompt opens "<think>\n" (or an empty block
 *                    when enable_thinking is false).
 *
 * Roles: "system", "user", "assistant". Tools, tool calls, the "tool" role
 * and multimodal content are not supported (FRT_ERR_UNSUPPORTED).
 */
#ifndef FRT_TEXT_CHAT_H
#define FRT_TEXT_CHAT_H

#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *role;    /* "system", "user" or "assistant" (NUL-terminated UTF-8) */
    const char *content; /* NUL-terminated UTF-8 */
} frt_chat_message;

typedef enum frt_chat_kind {
    FRT_CHAT_CHATML = 1,
    FRT_CHAT_QWEN3 = 2,
    FRT_CHAT_QWEN35 = 3,
} frt_chat_kind;

typedef struct frt_chat_options {
    int add_generation_prompt; /* nonzero: end with the assistant turn's opening */
    int enable_thinking;       /* -1: not passed (the template's default), 0: false, 1: true */
} frt_chat_options;

/* Which dialect TEMPLATE_TEXT is (*kind), and for FRT_CHAT_CHATML the
 * default system message it inserts (*default_system, malloc'd, NULL when
 * none; pass NULL to skip). Errors: FRT_ERR_INVALID_ARGUMENT (NULL),
 * FRT_ERR_UNSUPPORTED ("unsupported chat template: ..."), OOM. */
int frt_chat_template_kind(const char *template_text, int *kind, char **default_system);

/* Renders N messages with the dialect of TEMPLATE_TEXT. *text is malloc'd
 * and NUL-terminated (caller frees); *len (may be NULL) excludes the NUL.
 * OPT NULL means {add_generation_prompt 1, enable_thinking -1}.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument, N < 1, a NULL role or
 * content, content not UTF-8, or what the template itself rejects: Qwen3.5
 * without a user message or with a system message not first),
 * FRT_ERR_UNSUPPORTED (the template, or a role other than system / user /
 * assistant), FRT_ERR_OUT_OF_MEMORY. */
int frt_chat_render(const char *template_text, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, char **text, size_t *len);

/* frt_chat_render with the tokenizer's chat template and
 * {add_generation_prompt, enable_thinking -1}. FRT_ERR_UNSUPPORTED
 * "unsupported chat template" also when the tokenizer has no template. */
int frt_chat_format(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    int add_generation_prompt, char **text);

/* frt_chat_format with options and the length. */
int frt_chat_format_ex(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                       const frt_chat_options *opt, char **text, size_t *len);

/* Formats and encodes (without post-processor tokens, as apply_chat_template
 * with tokenize=True does). *ids is malloc'd (free()). Errors as
 * frt_chat_format_ex and frt_tokenizer_encode. */
int frt_chat_encode(const frt_tokenizer *tok, const frt_chat_message *msgs, int n,
                    const frt_chat_options *opt, int32_t **ids, size_t *n_ids);

#ifdef __cplusplus
}
#endif
#endif /* FRT_TEXT_CHAT_H */
