/*
 * serving/api.h - the OpenAI-compatible wire format: request parsing and
 * validation, response and stream-chunk objects, error objects, listings,
 * Prometheus metrics. Pure functions over jansson; the HTTP plumbing is in
 * server.c. Field reference: docs/serving.md.
 */
#ifndef FRT_SERVING_API_H
#define FRT_SERVING_API_H

#include "frt/cartridge.h"
#include "serving/chat_output.h"
#include "serving/service.h"

#include <jansson.h>

/* An error answer: HTTP status and the OpenAI error object
 * {"error": {"message", "type", "param", "code"}}. */
typedef struct frt_api_error {
    int status;
    const char *type; /* "invalid_request_error", "not_found_error", "server_error" */
    const char *code; /* "invalid_json", "invalid_type", "missing_required_parameter", ... */
    char param[64];   /* "" = null */
    char message[512];
} frt_api_error;

/* Fills *e and returns -1 (for `return frt_api_fail(...)`). */
int frt_api_fail(frt_api_error *e, int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The error object (new reference). */
json_t *frt_api_error_json(const frt_api_error *e);

/* Maps a service status (and frt_last_error()) to an API error. `what` is
 * the request's prompt parameter name ("prompt" or "messages"). */
void frt_api_error_from_status(frt_api_error *e, int status, const char *what);

/* tool_choice: auto (tool calls are parsed from the output), none (the
 * tools are rendered as with auto, the output is never parsed for calls),
 * required (the output is one or more tool calls: a grammar), or a named
 * function (one call of that function: a grammar). */
enum { FRT_API_TOOLS_AUTO = 0, FRT_API_TOOLS_NONE = 1, FRT_API_TOOLS_REQUIRED = 2, FRT_API_TOOLS_NAMED = 3 };

/* A parsed and validated completion request. */
typedef struct frt_api_completion {
    int chat;                   /* /v1/chat/completions */
    char model[128];
    char *prompt_text;          /* completions: the prompt as text, or */
    int32_t *prompt_ids;        /* the prompt as token ids */
    int n_prompt_ids;
    json_t *messages;           /* chat: the validated messages (own reference), as the template sees them:
                                 * text parts joined into one string, "developer" renamed "system" */
    json_t *tools;              /* chat: the tools array (own reference), or NULL */
    json_t *template_kwargs;    /* chat: chat_template_kwargs (own reference), or NULL */
    int tool_choice;            /* FRT_API_TOOLS_* */
    char tool_name[128];        /* FRT_API_TOOLS_NAMED: the function */
    int parallel_tool_calls;    /* 1 unless the request sent false */
    frt_grammar *grammar;       /* response_format json_object / json_schema or tool_choice required / named,
                                 * compiled when the request is parsed (owned); NULL = unconstrained */
    const char *grammar_param;  /* "response_format" or "tool_choice" (static) */
    int return_prompt;          /* chat: frt_return_prompt, the rendered prompt goes back in frt.prompt */
    int max_tokens;             /* max_tokens (or max_completion_tokens), else the default */
    int max_tokens_given;       /* the client sent it (else the server may clamp it to the context) */
    frt_sampling sampling;
    int has_seed;
    uint64_t seed;
    char **stop;
    int n_stop;
    int stream, include_usage;
    char *session_id;           /* NULL = sessionless */
    int pin_len;                /* frt_pin_prefix: 0, -1 (true) or a token count */
    int ignore_eos;
    int n, best_of;             /* choices returned and branches forked (best_of: completions only,
                                 * >= n; 1 and 1 when absent): service.h frt_gen_request */
    char user[64];              /* "user": shown in the request log ("" = none) */
    char cartridge_id[FRT_CARTRIDGE_ID_MAX];       /* "cartridge_id" ("" = absent) */
    char cartridge_label[FRT_CARTRIDGE_LABEL_MAX]; /* "cartridge_label" ("" = absent) */
} frt_api_completion;

/* Parses a request body. default_max_tokens applies when max_tokens is
 * absent. Returns 0, or -1 with *err (400: malformed JSON, wrong types,
 * values out of range, unsupported options; a member this server does not
 * know is 400 unsupported_parameter, never ignored). On success free with
 * frt_api_completion_clear. */
int frt_api_parse_completion(const char *body, size_t len, int chat, int default_max_tokens,
                             frt_api_completion *out, frt_api_error *err);
void frt_api_completion_clear(frt_api_completion *c);

/* The chat members of a request (api_chat.c): messages, tools,
 * tool_choice, parallel_tool_calls, chat_template_kwargs, validated
 * strictly (an unknown member of a message, a tool or a tool call is 400
 * unsupported_parameter naming it; required and named tool_choice, image
 * or audio parts, strict tools and parallel_tool_calls false are 400
 * unsupported_value). 0, or -1 with *err; what was set is freed by
 * frt_api_completion_clear. */
int frt_api_parse_chat(json_t *o, frt_api_completion *c, frt_api_error *err);

/* The constrained-output members (api_format.c): response_format
 * ({"type": "text"}, {"type": "json_object"} or {"type": "json_schema",
 * "json_schema": {"name", "schema", "strict"?, "description"?}}) and, after
 * frt_api_parse_chat, tool_choice required / named: compiled into
 * c->grammar (frt/grammar.h). 400 invalid_type / invalid_value /
 * unsupported_parameter for malformed members; a schema outside the subset
 * is 400 unsupported_value whose param names the keyword ("pattern"); both
 * a JSON response_format and a forced tool call are 400 (param
 * "response_format"). 0, or -1 with *err. */
int frt_api_parse_grammar(json_t *o, frt_api_completion *c, frt_api_error *err);

/* Refuses members of o that are not in known (NULL-terminated): 400
 * unsupported_parameter naming the member and where (e.g. "a message"). */
int frt_api_only_known(json_t *o, const char *const *known, const char *where, frt_api_error *err);

/* Parses a body that must be a JSON object (an empty body is {}). A member
 * given twice in any object is 400 invalid_json (never last-one-wins).
 * Returns the object (new reference) or NULL with *err. */
json_t *frt_api_parse_object(const char *body, size_t len, frt_api_error *err);

/* The body of an endpoint that takes none (GET, DELETE, capsule pin and
 * unpin): empty, whitespace or {}. A member is 400 unsupported_parameter
 * naming it and where (e.g. "DELETE /v1/sessions/{id}"), never ignored;
 * anything else is refused as frt_api_parse_object refuses it. 0, or -1
 * with *err. */
int frt_api_parse_no_body(const char *body, size_t len, const char *where, frt_api_error *err);

/* Reads an optional member of the given JSON type into *out; -1 with *err
 * when present with another type. */
int frt_api_opt_string(json_t *o, const char *key, const char **out, frt_api_error *err);
int frt_api_opt_bool(json_t *o, const char *key, int *out, frt_api_error *err);
int frt_api_opt_int(json_t *o, const char *key, long long *out, int *present, frt_api_error *err);

/* POST /v1/sessions: {"id"?, "salt"?, "pin"?}. */
typedef struct frt_api_session_create {
    char id[FRT_SESSION_ID_MAX];
    int has_id;
    char *salt;      /* malloc'd, NULL for none or "" */
    size_t salt_len;
    int pin;
} frt_api_session_create;

/* The cartridge members of a completion request (cartridge_api.c):
 * cartridge_id (a string, frt_cartridge_id_ok) or cartridge_label (a
 * string of 1..63 bytes without control characters), not both (with
 * session_id, it starts the session: service.h). 0, or -1 with *err (400
 * invalid_type, invalid_value naming the member). */
int frt_api_parse_cartridge(json_t *o, frt_api_completion *c, frt_api_error *err);

/* A cartridge failure as an API error naming param: FRT_ERR_NOT_FOUND 404
 * cartridge_not_found, FRT_ERR_MISMATCH 400 cartridge_mismatch,
 * FRT_ERR_UNSUPPORTED 400 unsupported_value, FRT_ERR_OUT_OF_RANGE 400
 * context_length_exceeded, FRT_ERR_OUT_OF_MEMORY 503 insufficient_capacity
 * (it cannot fit the device budget), others 500 cartridge_unavailable. */
void frt_api_cartridge_error(frt_api_error *e, int status, const char *param);

/* Parses and validates (id charset and length). 0, or -1 with *err (400);
 * on success free with frt_api_session_create_clear (NULL-safe). */
int frt_api_parse_session_create(const char *body, size_t len, frt_api_session_create *out, frt_api_error *err);
void frt_api_session_create_clear(frt_api_session_create *c);

/* POST /v1/sessions/{id}/fork {"n"?: 1..64}, .../checkpoints {"name", "pin"?:
 * true}, .../rollback {"name" or "checkpoint"; both is 400}. */
typedef enum frt_api_session_verb { FRT_API_FORK, FRT_API_CHECKPOINT, FRT_API_ROLLBACK } frt_api_session_verb;
typedef struct frt_api_session_op {
    int n;                          /* fork */
    char name[FRT_SESSION_ID_MAX];  /* checkpoint, rollback */
    int pin;                        /* checkpoint (default 1) */
} frt_api_session_op;

/* 0, or -1 with *err (400). Nothing to free. */
int frt_api_parse_session_op(const char *body, size_t len, frt_api_session_verb verb, frt_api_session_op *out,
                             frt_api_error *err);

/* An id taken from a URL (session id, checkpoint name): 0 when it is 1 to
 * FRT_SESSION_ID_MAX - 1 characters of [A-Za-z0-9._:-], else -1 with *err
 * (400 invalid_value naming param). Ids are refused, never truncated. */
int frt_api_check_url_id(const char *s, const char *param, frt_api_error *err);

/* Identity of one response: "cmpl-N" / "chatcmpl-N", creation time, model. */
typedef struct frt_api_ident {
    int chat;
    char id[48];
    long long created;
    char model[128];
} frt_api_ident;

/* The whole non-streamed response (new reference). message: the chat
 * answer's message object (borrowed; NULL = {"role": "assistant",
 * "content": res->text}); finish: the finish_reason (NULL = res's). */
json_t *frt_api_completion_json(const frt_api_ident *id, const frt_gen_result *res, const json_t *message,
                                const char *finish);

/* The whole answer of a forked request (res->choices, service.h): choice i
 * with index i, its text, or for chat messages[i] (borrowed); finishes[i]
 * its finish_reason (NULL = the choice's). New reference. */
json_t *frt_api_choices_json(const frt_api_ident *id, const frt_gen_result *res, json_t *const *messages,
                             const char *const *finishes);

/* Sets the index of a stream chunk's choice (a choice of a forked
 * request); returns chunk. */
json_t *frt_api_chunk_index(json_t *chunk, int index);

/* A chat answer built from the pieces of its output (chat_output.h):
 * frt_api_message_new -> {"role": "assistant", "content": null};
 * frt_api_message_add appends a piece (content and reasoning_content
 * grow, a tool call joins tool_calls as {id, type, function: {name,
 * arguments}}), 0 or -1 (out of memory); frt_api_message_finish sets
 * content to "" when it is null and there are no tool calls (OpenAI: null
 * only beside tool calls). */
json_t *frt_api_message_new(void);
int frt_api_message_add(json_t *msg, const frt_chat_piece *pc);
void frt_api_message_finish(json_t *msg);

/* The stream deltas of one piece (new array): {"content"} or
 * {"reasoning_content"}; a tool call gives two: {"tool_calls": [{index, id,
 * type, function: {name, arguments: ""}}]} then {"tool_calls": [{index,
 * function: {arguments}}]}. */
json_t *frt_api_piece_deltas(const frt_chat_piece *pc);

/* A chat stream chunk whose choice has the delta given (stolen). */
json_t *frt_api_delta_chunk_json(const frt_api_ident *id, json_t *delta);

/* One stream chunk (new reference): text (may be empty) with finish = NULL,
 * or the final chunk with its finish_reason, usage and frt object (res).
 * role: the first chat chunk's {"role": "assistant"} delta. */
json_t *frt_api_chunk_json(const frt_api_ident *id, const char *text, size_t len, int role, const char *finish,
                           const frt_gen_result *res);

/* ---- logprobs (api_logprobs.c) ---- */

/* The text of the tokens whose logprobs were written so far (completions'
 * text_offset across stream chunks): raw bytes [n] (capacity cap), the
 * settled prefix (no partial character at its end) and its characters.
 * Zero-initialise; free with frt_api_lp_text_free (NULL-safe). */
typedef struct frt_api_lp_text {
    char *raw;
    size_t n, cap, settled, chars;
} frt_api_lp_text;
void frt_api_lp_text_free(frt_api_lp_text *t);

/* The logprobs object of a choice for the records lp[0..n) (frt/sampling.h;
 * token strings from e->token_bytes): chat {"content": [{token, logprob,
 * bytes, top_logprobs: [{token, logprob, bytes}]}]}; completions {tokens,
 * token_logprobs, top_logprobs: [{token: logprob}], text_offset}, the
 * offsets (characters of the repaired UTF-8 text) continuing *t (NULL =
 * from 0). A token's string is its bytes, each byte of a partial character
 * as \xHH; -inf is written -9999.0. New reference; null when e has no
 * token_bytes or lp is NULL; NULL when out of memory. */
json_t *frt_api_logprobs_json(const frt_api_ident *id, const frt_engine *e, const frt_logprobs *lp, int n,
                              frt_api_lp_text *t);

/* frt_api_logprobs_json of res->logprobs (service.h), or null. */
json_t *frt_api_result_logprobs_json(const frt_api_ident *id, const frt_gen_result *res);

/* A stream chunk carrying logprobs (stolen) with an empty delta (chat) or
 * text "" (completions). */
json_t *frt_api_logprobs_chunk_json(const frt_api_ident *id, json_t *logprobs);

/* The usage-only chunk of stream_options.include_usage (choices: []). */
json_t *frt_api_usage_chunk_json(const frt_api_ident *id, const frt_gen_result *res);

/* The frt object: prefix_action, cached/prefilled tokens, timings, capsules;
 * for a forked request also branches, fork_seed and choices[] ({index,
 * branch, seed (as a signed 64-bit integer, the form "seed" accepts),
 * logprob, tokens, completion_tokens}). */
json_t *frt_api_frt_json(const frt_gen_result *res);

/* "cap-N" and back. frt_api_capsule_id returns 0 for a malformed id. */
void frt_api_capsule_name(uint64_t id, char out[32]);
uint64_t frt_api_capsule_id(const char *s);

/* Compact JSON text of o (steals o; malloc'd; NULL on out of memory). */
char *frt_api_dumps(json_t *o);

/* {"id": id, "object": object, "deleted": true} */
json_t *frt_api_deleted_json(const char *id, const char *object);

/* {"object": "list", "data": data} (steals data). */
json_t *frt_api_list_json(json_t *data);

/* The answer of POST /v1/sessions/{id}/checkpoints. */
json_t *frt_api_checkpoint_json(const char *session_id, const char *name, uint64_t capsule, int position, int pinned);

/* One model object (GET /v1/models/{id}) and the list (GET /v1/models). */
json_t *frt_api_model_json(const frt_engine_facts *f, long long created);
json_t *frt_api_models_json(const frt_engine_facts *f, long long created);

/* Listings; call under frt_service_lock. */
json_t *frt_api_session_json(const frt_service *s, const frt_session *x);
json_t *frt_api_sessions_json(const frt_service *s);
json_t *frt_api_capsule_json(const frt_service *s, const frt_cap *c);
json_t *frt_api_capsules_json(const frt_service *s);
/* The session (capsule) object of an id, {} when there is none. */
json_t *frt_api_session_by_id_json(const frt_service *s, const char *id);
json_t *frt_api_capsule_by_id_json(const frt_service *s, uint64_t id);
/* {"object": "list", "data": [the sessions of ids[0..n)]} */
json_t *frt_api_sessions_by_ids_json(const frt_service *s, const char (*ids)[FRT_SESSION_ID_MAX], int n);
/* {"object": "list", "data": [the session's checkpoints]} */
json_t *frt_api_checkpoints_json(const frt_service *s, const frt_session *x);

/* Counters kept by the HTTP layer. */
typedef struct frt_http_stats {
    uint64_t responses[6];  /* by status class: [2] = 2xx ... [5] = 5xx */
    uint64_t rejected_busy; /* 503 for a full queue */
    uint64_t rejected_queue_timeout; /* 503 after waiting past the queue deadline */
    uint64_t rejected_auth; /* 401 */
    int queue_depth;
    int running;
    double uptime_s;
} frt_http_stats;

/* GET /health; call under frt_service_lock. */
json_t *frt_api_health_json(const frt_service *s, const frt_http_stats *h);

/* Prometheus text exposition (malloc'd); call under frt_service_lock. */
char *frt_api_metrics_text(const frt_service *s, const frt_http_stats *h);

#endif
