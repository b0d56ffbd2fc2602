/*
 * frt/tokenizer.h - the checkpoint's tokenizer: Hugging Face tokenizer.json
 * (byte-level BPE) read and run natively, id for id.
 *
 * frt reads the tokenizer.json a checkpoint ships (Qwen3.5/3.6, Qwen2/3,
 * Llama 3, GPT-2 style) and produces exactly the ids the Hugging Face
 * `tokenizers` library (Rust, 0.23) produces for it. The pipeline follows
 * tokenizers/src/tokenizer/mod.rs (encode_single_sequence):
 *
 *   1. added tokens that are not normalized (`special` ones as a rule) are
 *      split out of the raw text, leftmost-longest (added_vocabulary.rs);
 *   2. each remaining piece is normalized (NFC, NFD, NFKC, NFKD through
 *      utf8proc, or a Sequence of them); then the normalized added tokens
 *      are split out of it;
 *   3. the pre-tokenizer (a Sequence of Split with the file's regex, run by
 *      PCRE2 with UTF + UCP + JIT, and ByteLevel) cuts the pieces into words;
 *   4. the BPE model merges each word by merge rank (word.rs: a priority
 *      queue over pair ranks with a linked list of symbols, O(n log n));
 *   5. with add_special_tokens, the post-processor (TemplateProcessing, as
 *      Llama 3 ships it) adds its special tokens.
 *
 * Decoding is the ByteLevel decoder: the bytes of each token, then invalid
 * UTF-8 replaced by U+FFFD the way Rust's String::from_utf8_lossy does.
 *
 * Anything in tokenizer.json that frt does not implement (another model type,
 * normalizer, pre-tokenizer, decoder, post-processor, option or regex
 * construct) makes the load fail with FRT_ERR_UNSUPPORTED and a message that
 * names it; it is never ignored. docs/tokenizer.md lists what is supported.
 *
 * Thread safety: a loaded tokenizer is read-only; encode, decode and the
 * lookups may run concurrently from any number of threads. Only
 * frt_tokenizer_set_chat_template and frt_tokenizer_free modify it.
 */
#ifndef FRT_TOKENIZER_H
#define FRT_TOKENIZER_H

#include "frt/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_tokenizer frt_tokenizer;

/* Loads MODEL_DIR/tokenizer.json, and the chat template when there is one:
 * MODEL_DIR/chat_template.jinja when it exists (preferred, as transformers
 * does), otherwise the "chat_template" of MODEL_DIR/tokenizer_config.json (a
 * string, or the entry named "default" of a list of {name, template}).
 * On success *out owns the tokenizer (frt_tokenizer_free).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument), FRT_ERR_NOT_FOUND
 * (MODEL_DIR or tokenizer.json missing), FRT_ERR_IO, FRT_ERR_FORMAT
 * (malformed JSON, merges naming unknown tokens, bad regex, ...),
 * FRT_ERR_UNSUPPORTED (a component or option frt does not implement),
 * FRT_ERR_OUT_OF_MEMORY. *out is left NULL on failure. */
FRT_API int frt_tokenizer_load(const char *model_dir, frt_tokenizer **out);

/* Same from the text of a tokenizer.json (LEN bytes, need not be
 * NUL-terminated). No chat template. Errors as frt_tokenizer_load. */
FRT_API int frt_tokenizer_load_json(const char *json, size_t len, frt_tokenizer **out);

/* Frees the tokenizer; NULL is a no-op. */
FRT_API void frt_tokenizer_free(frt_tokenizer *tok);

/* Encodes LEN bytes of UTF-8 TEXT (embedded NULs allowed) into token ids,
 * as tokenizers' Tokenizer.encode(text, add_special_tokens=False) does: no
 * post-processor tokens (this is what transformers' apply_chat_template
 * tokenizes with). *ids is malloc'd (caller frees with free(); NULL when
 * *n_ids is 0). Empty text gives 0 ids.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument, TEXT not valid UTF-8),
 * FRT_ERR_FORMAT (the BPE unk_token is not in the vocabulary and was
 * needed), FRT_ERR_BACKEND (a PCRE2 match failed, e.g. a match limit),
 * FRT_ERR_OUT_OF_MEMORY. On failure *ids is NULL and *n_ids 0. */
FRT_API int frt_tokenizer_encode(const frt_tokenizer *tok, const char *text, size_t len,
                         int32_t **ids, size_t *n_ids);

/* frt_tokenizer_encode with a choice: ADD_SPECIAL_TOKENS nonzero applies the
 * post-processor's single-sequence template (e.g. Llama 3's leading
 * <|begin_of_text|>), as Tokenizer.encode(text) does by default. */
FRT_API int frt_tokenizer_encode_ex(const frt_tokenizer *tok, const char *text, size_t len,
                            int add_special_tokens, int32_t **ids, size_t *n_ids);

/* Decodes N ids into text (Tokenizer.decode(ids, skip_special_tokens=False)):
 * the ByteLevel decoder, invalid UTF-8 replaced by U+FFFD. *text is malloc'd
 * and NUL-terminated (caller frees); *len excludes the NUL (LEN may be NULL).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL argument), FRT_ERR_OUT_OF_RANGE (an
 * id that is negative, >= frt_tokenizer_vocab_size or names no token; the
 * Rust library skips those silently, frt refuses), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_tokenizer_decode(const frt_tokenizer *tok, const int32_t *ids, size_t n,
                         char **text, size_t *len);

/* One more than the largest token id (model vocabulary and added tokens):
 * the number of embedding rows the ids need. 0 for NULL. */
FRT_API int frt_tokenizer_vocab_size(const frt_tokenizer *tok);

/* The id of TOKEN as Tokenizer.token_to_id: an added token's content (e.g.
 * "<|im_end|>") or a model vocabulary entry in its byte-level form (e.g.
 * "Ġthe"). -1 when absent or for NULL arguments. */
FRT_API int frt_tokenizer_token_id(const frt_tokenizer *tok, const char *token);

/* The vocabulary string of ID (Tokenizer.id_to_token), NUL-terminated,
 * owned by the tokenizer; NULL when ID names no token. */
FRT_API const char *frt_tokenizer_token_str(const frt_tokenizer *tok, int32_t id);

/* The bytes token ID decodes to on its own (the ByteLevel decoder's bytes
 * of its string, before any UTF-8 repair: a piece of a multi-byte
 * character stays a piece): *bytes (owned by the tokenizer, not
 * NUL-terminated) and *len. Concatenating the bytes of ids and repairing
 * invalid UTF-8 gives frt_tokenizer_decode. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL), FRT_ERR_OUT_OF_RANGE (ID names no token). */
FRT_API int frt_tokenizer_token_bytes(const frt_tokenizer *tok, int32_t id, const char **bytes, size_t *len);

/* 1 when ID is an added token marked "special" (e.g. <|im_end|>), else 0. */
FRT_API int frt_tokenizer_is_special(const frt_tokenizer *tok, int32_t id);

/* The chat template text found at load (NUL-terminated, owned by the
 * tokenizer), NULL when there is none. See model/chat.h. */
FRT_API const char *frt_tokenizer_chat_template(const frt_tokenizer *tok);

/* Replaces the chat template by a copy of TEMPLATE_TEXT (NULL removes it).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL tok), FRT_ERR_OUT_OF_MEMORY (the old
 * template is kept). Not safe while other threads use the tokenizer. */
FRT_API int frt_tokenizer_set_chat_template(frt_tokenizer *tok, const char *template_text);

/* The special token NAME ("bos_token", "eos_token", "unk_token" or
 * "pad_token") of the checkpoint's tokenizer_config.json: its string, or the
 * "content" of an AddedToken object. Owned by the tokenizer; NULL when the
 * file does not set it (or sets null), for another NAME, or for NULL
 * arguments. The chat template sees these as bos_token, eos_token, ...
 * (text/chat.h), as transformers passes special_tokens_map. */
FRT_API const char *frt_tokenizer_special_token(const frt_tokenizer *tok, const char *name);

/* Sets (a copy of VALUE) or removes (VALUE NULL) one of those four. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL tok / name, another name),
 * FRT_ERR_OUT_OF_MEMORY (the old value is kept). Not safe while other
 * threads use the tokenizer. */
FRT_API int frt_tokenizer_set_special_token(frt_tokenizer *tok, const char *name, const char *value);

/* ---- streaming decode ---------------------------------------------------
 * A decoder fed one id at a time that returns only complete UTF-8: bytes of
 * a character split across tokens are held back until the character is
 * complete. Invalid sequences become U+FFFD at the point they are known to
 * be invalid, so the concatenation of everything returned (pushes, then
 * flush) equals frt_tokenizer_decode of the same ids, byte for byte. */
typedef struct frt_detok_stream frt_detok_stream;

/* Creates a stream over TOK (which must outlive it). Errors:
 * FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_detok_stream_create(const frt_tokenizer *tok, frt_detok_stream **out);

/* Frees the stream; NULL is a no-op. */
FRT_API void frt_detok_stream_free(frt_detok_stream *s);

/* Feeds one id. *text / *len receive the newly complete text (possibly 0
 * bytes); *text is owned by the stream, NUL-terminated, valid until the next
 * call on it. Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_RANGE (the id
 * names no token; the stream is unchanged), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_detok_stream_push(frt_detok_stream *s, int32_t id, const char **text, size_t *len);

/* Ends the stream: a held-back incomplete character is returned as U+FFFD
 * (as a full decode would), and the stream is empty again. Same ownership
 * and errors as push. */
FRT_API int frt_detok_stream_flush(frt_detok_stream *s, const char **text, size_t *len);

/* Drops held-back bytes without returning them. NULL is a no-op. */
FRT_API void frt_detok_stream_reset(frt_detok_stream *s);

#ifdef __cplusplus
}
#endif
#ifdef __cplusplus
}
#endif
#endif /* FRT_TOKENIZER_H */
