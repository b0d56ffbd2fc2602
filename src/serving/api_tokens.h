/*
 * serving/api_tokens.h - the token endpoints, in llama-server's shapes
 * (tools/server/README.md of llama.cpp):
 *   POST /tokenize   {"content": string, "with_pieces"?: bool,
 *                     "add_special"?: false, "parse_special"?: true}
 *                    -> {"tokens": [id, ...]}, or with with_pieces
 *                       {"tokens": [{"id": id, "piece": string}, ...]}
 *                       (a piece that is not valid UTF-8 on its own is the
 *                       array of its byte values, as llama-server does)
 *   POST /detokenize {"tokens": [id, ...]} -> {"content": string}
 * frt's tokenizer adds no special tokens and always matches the added
 * tokens in the text, so add_special: true and parse_special: false are
 * refused (400 unsupported_value) rather than ignored. Any other member is
 * 400 unsupported_parameter. Internal to the server.
 */
#ifndef FRT_SERVING_API_TOKENS_H
#define FRT_SERVING_API_TOKENS_H

#include "serving/api.h"
#include "serving/engine.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A parsed token request. Strings and arrays are malloc'd:
 * frt_api_tokens_clear frees them. */
typedef struct frt_api_tokens {
    int detokenize;   /* 0: /tokenize, 1: /detokenize */
    char *text;       /* tokenize: the content, NUL-terminated */
    size_t len;
    int with_pieces;
    int32_t *ids;     /* detokenize: the ids */
    size_t n_ids;
} frt_api_tokens;

/* Parses a /tokenize (detokenize 0) or /detokenize (1) body into *out.
 * Returns 0, or -1 with *err filled (400: invalid_json, invalid_type,
 * missing_required_parameter, unsupported_parameter, unsupported_value,
 * invalid_value for an id outside [0, vocab)); *out is left empty on error. */
int frt_api_parse_tokens(const char *body, size_t len, int detokenize, int vocab, frt_api_tokens *out,
                         frt_api_error *err);

void frt_api_tokens_clear(frt_api_tokens *t);

/* Runs the request on the engine (its tokenize / detokenize, on the engine
 * thread) and returns the answer object (new reference), or NULL with *err
 * filled (the engine's status mapped: 400 for refused input, 500 else). */
json_t *frt_api_tokens_answer(frt_engine *e, const frt_api_tokens *t, frt_api_error *err);

#endif
