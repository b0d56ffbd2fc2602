/*
 * frt/grammar.h - grammar-constrained decoding: a JSON Schema subset (and the
 * Hermes tool-call format) compiled to a byte-level pushdown automaton, a
 * copyable state advanced byte by byte, and the allowed-token mask of a
 * state over a tokenizer's vocabulary (a token trie walked by the state).
 *
 * The schema subset (anything else is refused, naming the keyword):
 *   type        "object", "array", "string", "number", "integer", "boolean",
 *               "null", or an array of those (any one of them);
 *   properties, required, additionalProperties (only false);
 *   items (one schema), minItems, maxItems;
 *   enum, const (any JSON values, at most FRT_GRAMMAR_MAX_ENUM of them);
 *   anyOf;
 *   minLength, maxLength (strings, counted in code points);
 *   $defs / definitions with "$ref": "#/$defs/NAME" (or
 *   "#/definitions/NAME", or "#" for the root), without recursion;
 *   annotations that change nothing: title, description, $schema, $id,
 *   $comment, default, examples, strict.
 * A schema without type/enum/const/anyOf/$ref is any JSON value.
 *
 * What the automaton produces (docs/serving.md, "Structured output"):
 *   - objects list their properties in the schema's order; each may be
 *     left out unless required; no other property is produced (an object
 *     schema without "properties" is any object);
 *   - white space: at most FRT_GRAMMAR_MAX_WS bytes of ' ', '\n', '\t',
 *     '\r' at each place JSON allows it inside a value; none before or after
 *     the value;
 *   - strings: valid UTF-8 (no surrogates, no overlongs), control
 *     characters only escaped, escapes \" \\ \/ \b \f \n \r \t and \uXXXX
 *     (never a surrogate, never \u0000); code points bounded by maxLength;
 *   - numbers: JSON syntax with at most FRT_GRAMMAR_MAX_INT_DIGITS integer
 *     digits, FRT_GRAMMAR_MAX_FRAC_DIGITS fraction digits and
 *     FRT_GRAMMAR_MAX_EXP_DIGITS exponent digits (always a finite double);
 *     integers: no fraction, no exponent;
 *   - enum / const values: their compact JSON text (jansson's JSON_COMPACT);
 *   - nesting: at most FRT_GRAMMAR_MAX_DEPTH open values; a generic value
 *     (any JSON) opens an object or array only while there is room.
 *
 * Sources: JSON grammar RFC 8259; JSON Schema 2020-12 (Core and
 * Validation) for the meaning of the keywords; the Hermes tool-call format
 * as serving/chat_output.h parses it.
 *
 * Thread safety: a compiled grammar and a vocabulary are read-only once
 * made and may be shared by any number of threads; a state or a matcher is
 * used by one thread at a time.
 */
#ifndef FRT_GRAMMAR_H
#define FRT_GRAMMAR_H

#include "frt/export.h"
#include "frt/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRT_GRAMMAR_MAX_WS 8          /* white space bytes at one place */
#define FRT_GRAMMAR_MAX_DEPTH 24      /* frames of one stack: open values + literals */
#define FRT_GRAMMAR_MAX_INT_DIGITS 15
#define FRT_GRAMMAR_MAX_FRAC_DIGITS 15
#define FRT_GRAMMAR_MAX_EXP_DIGITS 2
#define FRT_GRAMMAR_MAX_ENUM 64       /* values of one enum */
#define FRT_GRAMMAR_MAX_PROPERTIES 64 /* properties of one object schema */
#define FRT_GRAMMAR_MAX_ALTERNATIVES 32 /* stacks alive at once (anyOf, tools) */
#define FRT_GRAMMAR_MAX_TOOLS 32
#define FRT_GRAMMAR_KEYWORD_MAX 64

typedef struct frt_grammar frt_grammar;
typedef struct frt_grammar_state frt_grammar_state;
typedef struct frt_grammar_vocab frt_grammar_vocab;
typedef struct frt_grammar_matcher frt_grammar_matcher;

/* Where a compile failed: the keyword at fault ("patternProperties",
 * "anyOf", "$ref", "tools", ...; "" for a malformed JSON text) and the JSON
 * pointer of the schema object holding it ("/properties/a"). */
typedef struct frt_grammar_diag {
    char keyword[FRT_GRAMMAR_KEYWORD_MAX];
    char path[192];
} frt_grammar_diag;

/* Compiles SCHEMA (LEN bytes of JSON text, need not be NUL-terminated) to a
 * grammar of one JSON value that validates against it. SCHEMA NULL: any JSON
 * object (response_format json_object). On success *out owns the grammar
 * (frt_grammar_free). Errors: FRT_ERR_INVALID_ARGUMENT (NULL out),
 * FRT_ERR_FORMAT (not JSON, or a keyword with a value of the wrong form,
 * e.g. "required" not an array of strings; diag names it),
 * FRT_ERR_UNSUPPORTED (a keyword outside the subset, additionalProperties
 * other than false, a recursive $ref, a limit above; diag names the
 * keyword), FRT_ERR_OUT_OF_MEMORY. diag may be NULL. *out NULL on failure. */
FRT_API int frt_grammar_compile_json_schema(const char *schema, size_t len, frt_grammar **out,
                                            frt_grammar_diag *diag);

/* Compiles the tool-call grammar of an OpenAI "tools" array (TOOLS, LEN
 * bytes of JSON text: [{"type": "function", "function": {"name",
 * "parameters"?}}]): the output is one tool call (PARALLEL 0) or one or more
 * separated by "\n" (PARALLEL nonzero), each
 *   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 * with NAME one of the tools (or exactly NAME when name is not NULL: a named
 * tool_choice) and ARGS matching that tool's "parameters" schema (absent:
 * any object). The tags "<tool_call>" and "</tool_call>" may be produced by
 * special tokens of that text (frt_grammar_matcher_create); no string of a
 * call contains "</tool_call>" (the output parser would end the call there). Errors as
 * frt_grammar_compile_json_schema, plus FRT_ERR_NOT_FOUND (NAME names no
 * tool; diag keyword "tool_choice"); diag keyword "tools" for a malformed
 * tools array or more than FRT_GRAMMAR_MAX_TOOLS; a parameters schema
 * outside the subset names its keyword, diag path "/tools/I/function/
 * parameters/...". */
FRT_API int frt_grammar_compile_tool_calls(const char *tools, size_t len, const char *name, int parallel,
                                           frt_grammar **out, frt_grammar_diag *diag);

/* Frees a grammar; NULL is a no-op. States and matchers made from it must
 * be freed first. */
FRT_API void frt_grammar_free(frt_grammar *g);

/* ---- states ----------------------------------------------------------------
 * A state is the automaton's position after the bytes accepted so far: a
 * set of at most FRT_GRAMMAR_MAX_ALTERNATIVES stacks (anyOf keeps every
 * alternative that still fits alive). It is a plain value: copy it to
 * snapshot, copy back to undo. */

/* A new state at the start of G (nothing accepted). Errors:
 * FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_grammar_state_create(const frt_grammar *g, frt_grammar_state **out);
FRT_API void frt_grammar_state_free(frt_grammar_state *st);
/* Back to the start. */
FRT_API void frt_grammar_state_reset(frt_grammar_state *st);
/* *dst = *src (both of the same grammar). FRT_ERR_INVALID_ARGUMENT when
 * they are not. */
FRT_API int frt_grammar_state_copy(frt_grammar_state *dst, const frt_grammar_state *src);
/* Advances by BYTES[0..N): 0 when every byte is accepted, else
 * FRT_ERR_MISMATCH and the state is unchanged (all or nothing). */
FRT_API int frt_grammar_state_accept(frt_grammar_state *st, const void *bytes, size_t n);
/* 1 when the bytes accepted so far form a complete output (an end of
 * sequence may follow), else 0. A complete state may still accept more
 * bytes (a number's next digit, another parallel tool call). */
FRT_API int frt_grammar_state_complete(const frt_grammar_state *st);

/* ---- vocabulary and masks --------------------------------------------------- */

/* The token trie of TOK's vocabulary (each id's bytes:
 * frt_tokenizer_token_bytes), built once per tokenizer. Special tokens stay
 * out of the trie (a matcher allows one only when it is an end-of-sequence
 * id and the state is complete, or when its text is a tag of the grammar);
 * EOS_IDS[0..N_EOS) are the ids that end generation. VOCAB_SIZE: the
 * number of ids masks cover (the model's, >= the tokenizer's; 0 = the
 * tokenizer's). Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_grammar_vocab_create(const frt_tokenizer *tok, const int32_t *eos_ids, int n_eos, int vocab_size,
                                     frt_grammar_vocab **out);

/* The same from raw token bytes: token i is BYTES[i][0..LENS[i]) (BYTES[i]
 * NULL: no such id), SPECIAL[i] nonzero marks a special token (SPECIAL may
 * be NULL). Copies what it needs. Errors as above. */
FRT_API int frt_grammar_vocab_create_bytes(int n_tokens, const uint8_t *const *bytes, const size_t *lens,
                                           const uint8_t *special, const int32_t *eos_ids, int n_eos,
                                           frt_grammar_vocab **out);
FRT_API void frt_grammar_vocab_free(frt_grammar_vocab *v);
/* Ids a mask covers (bits), and trie nodes (for benchmarks). */
FRT_API int frt_grammar_vocab_size(const frt_grammar_vocab *v);
FRT_API int64_t frt_grammar_vocab_nodes(const frt_grammar_vocab *v);

/* A matcher: a grammar, a vocabulary and a state, with the scratch the
 * mask walk needs. Both G and V must outlive it. Errors:
 * FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_grammar_matcher_create(const frt_grammar *g, const frt_grammar_vocab *v,
                                       frt_grammar_matcher **out);
FRT_API void frt_grammar_matcher_free(frt_grammar_matcher *m);

/* The allowed-token mask of the current state: bit j of ALLOWED[j / 32] set
 * = token j may come next (the layout frt_model_set_token_mask takes).
 * N_WORDS must be at least ceil(vocab / 32) (frt_grammar_vocab_size);
 * words past it are cleared. A token is allowed when the state accepts all
 * its bytes (special tokens never, but for a tag below); an end-of-sequence
 * id when the state is complete; a token whose text is a tag of the grammar
 * ("<tool_call>", special or not) where the grammar takes that text outside
 * a JSON string. Masks of recently seen states are cached in the matcher.
 * Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, N_WORDS too small). Returns the number
 * of allowed tokens (>= 0) on success. */
FRT_API int64_t frt_grammar_matcher_mask(frt_grammar_matcher *m, uint32_t *allowed, int64_t n_words);

/* Advances by token ID (its bytes; an end-of-sequence id ends the output
 * and needs a complete state). 0, or FRT_ERR_MISMATCH (the token is not
 * allowed: the state is unchanged), FRT_ERR_OUT_OF_RANGE (no such id),
 * FRT_ERR_STATE (the output already ended). */
FRT_API int frt_grammar_matcher_accept(frt_grammar_matcher *m, int32_t id);

/* 1 when an end-of-sequence id was accepted, else 0. */
FRT_API int frt_grammar_matcher_ended(const frt_grammar_matcher *m);
/* The matcher's state (owned by it): copy it to snapshot, or write it back
 * with frt_grammar_state_copy to roll back. */
FRT_API frt_grammar_state *frt_grammar_matcher_state(frt_grammar_matcher *m);
/* Back to the start (nothing accepted, not ended). */
FRT_API void frt_grammar_matcher_reset(frt_grammar_matcher *m);

/* ---- validation --------------------------------------------------------------
 * Checks INSTANCE (JSON text) against SCHEMA (JSON text) with the meaning
 * JSON Schema 2020-12 gives the keywords of the subset (additional
 * properties are valid unless additionalProperties is false; 1.0 is an
 * integer; enum and const compare numbers by value). Returns 0 when valid,
 * FRT_ERR_MISMATCH when not (WHY, when not NULL, receives the first reason,
 * NUL-terminated, at most WHY_LEN bytes), FRT_ERR_FORMAT (either text is not
 * JSON; the instance may be any JSON value), FRT_ERR_UNSUPPORTED (a keyword
 * outside the subset). */
FRT_API int frt_json_schema_validate(const char *schema, size_t schema_len, const char *instance,
                                     size_t instance_len, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* FRT_GRAMMAR_H */
