/*
 * serving/chat_output.h - a chat completion's generated text split into
 * what the OpenAI chat API returns apart: reasoning (`reasoning_content`),
 * the answer (`content`) and tool calls (`tool_calls`), incrementally, so
 * that a stream can send each piece as soon as it is decided.
 *
 * Formats (Qwen3 / Qwen3.5, and every model trained on the Hermes
 * tool-call format):
 *   - reasoning: `<think>...</think>` at the start of the text (after white
 *     space), or, when the prompt's generation turn already opened
 *     `<think>` (reasoning_open), the text up to `</think>`. New lines right
 *     after `</think>` are dropped (the templates drop them when they render
 *     the turn back). An unterminated reasoning block is reasoning to the end.
 *   - tool calls (only when parsing is on): `<tool_call>\n{"name": NAME,
 *     "arguments": {...}}\n</tool_call>`, any number of them. The body must
 *     be a JSON object with a string `name` and an `arguments` object (or a
 *     JSON string, kept as it is; absent = `{}`). A body that is not that,
 *     or a `<tool_call>` never closed, is returned as content, tags
 *     included: nothing the model wrote is lost, and nothing malformed is
 *     offered as a call. `arguments` is the object's text exactly as the
 *     model wrote it, so a history that sends the call back renders to the
 *     same text (and the session appends).
 *   - white space right before and right after a valid tool call is
 *     dropped (so between calls too); a malformed call keeps the white
 *     space before it.
 *
 * Text that could still become a tag (a proper prefix of `<think>`,
 * `</think>` or `<tool_call>` at the end of what was fed) is held back until
 * the next piece decides it.
 *
 * Source of the formats: Qwen3's chat template (tokenizer_config.json of
 * Qwen/Qwen3-*) and the Hermes function-calling format; the split follows
 * what vLLM's qwen3 reasoning parser and hermes tool parser return.
 */
#ifndef FRT_SERVING_CHAT_OUTPUT_H
#define FRT_SERVING_CHAT_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

typedef enum frt_chat_part {
    FRT_CHAT_PART_CONTENT = 0,
    FRT_CHAT_PART_REASONING = 1,
    FRT_CHAT_PART_TOOL_CALL = 2,
} frt_chat_part;

/* One decided piece. For CONTENT and REASONING: text[0..len) (UTF-8, not
 * NUL-terminated). For TOOL_CALL: index (0, 1, ... in order), id
 * ("call_" + 16 hex digits), name and arguments (NUL-terminated JSON text).
 * Pointers are valid during the callback only. */
typedef struct frt_chat_piece {
    frt_chat_part part;
    const char *text;
    size_t len;
    int index;
    const char *id;
    const char *name;
    const char *arguments;
} frt_chat_piece;

/* Receives the pieces in order; a nonzero return stops the parser (feed and
 * finish then return that value). */
typedef int (*frt_chat_piece_fn)(void *user, const frt_chat_piece *piece);

typedef struct frt_chat_output {
    int tools;          /* parse tool calls */
    int reasoning_open; /* the prompt opened <think>: start inside reasoning */
    uint64_t id_seed;   /* tool call ids derive from it and the index */
    frt_chat_piece_fn fn;
    void *user;
    /* internal */
    int mode;
    int n_calls;
    size_t body_at; /* TOOL mode: where the call's body starts in buf */
    size_t scanned; /* TOOL mode: buf[0..scanned) was searched for the end tag */
    int after_call; /* a valid call just ended: white space is dropped */
    char *buf;        /* held text */
    size_t len, cap;
} frt_chat_output;

/* Sets up a parser (nothing allocated yet). fn is required. */
void frt_chat_output_init(frt_chat_output *p, int tools, int reasoning_open, uint64_t id_seed,
                          frt_chat_piece_fn fn, void *user);

/* Feeds the next piece of generated text. Returns 0, FRT_ERR_OUT_OF_MEMORY
 * (what was held is kept), or the callback's nonzero value. */
int frt_chat_output_feed(frt_chat_output *p, const char *text, size_t len);

/* The end of the text: everything still held is emitted (an unterminated
 * tool call as content, an unterminated reasoning block as reasoning).
 * Returns as frt_chat_output_feed. */
int frt_chat_output_finish(frt_chat_output *p);

/* Frees what the parser holds (NULL-safe); it can then be init'ed again. */
void frt_chat_output_clear(frt_chat_output *p);

/* 1 when the rendered PROMPT ends with `<think>` and white space only
 * (Qwen3.5's generation prompt with thinking on opens the block), else 0. */
int frt_chat_prompt_opens_reasoning(const char *prompt, size_t len);

#endif
