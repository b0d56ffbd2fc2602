/*
 * serving/api.h - the OpenAI-compatible wire format: request parsing and
 * validation, response and stream-chunk objects, error objects, listings,
 * Prometheus metrics. Pure functions over jansson; the HTTP plumbing is in
 * server.c. Field reference: docs/serving.md.
 */
#ifndef FRT_SERVING_API_H
#define FRT_SERVING_API_H

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

/* A parsed and validated completion request. */
typedef struct frt_api_completion {
    int chat;                   /* /v1/chat/completions */
    char model[128];
    char *prompt_text;          /* completions: the prompt as text, or */
    int32_t *prompt_ids;        /* the prompt as token ids */
    int n_prompt_ids;
    frt_engine_msg *msgs;       /* chat: messages (strings owned here) */
    int n_msgs;
    int max_tokens;
    frt_engine_sampling sampling;
    int has_seed;
    uint64_t seed;
    char **stop;
    int n_stop;
    int stream, include_usage;
    char *session_id;           /* NULL = sessionless */
    int pin_len;                /* frt_pin_prefix: 0, -1 (true) or a token count */
    int ignore_eos;
} frt_api_completion;

/* Parses a request body. default_max_tokens applies when max_tokens is
 * absent. Returns 0, or -1 with *err (400: malformed JSON, wrong types,
 * values out of range, unsupported options). */
int frt_api_parse_completion(const char *body, size_t len, int chat, int default_max_tokens,
                             frt_api_completion *out, frt_api_error *err);
void frt_api_completion_clear(frt_api_completion *c);

/* Parses a body that must be a JSON object (an empty body is {}). Returns
 * the object (new reference) or NULL with *err. */
json_t *frt_api_parse_object(const char *body, size_t len, frt_api_error *err);

/* Reads an optional member of the given JSON type into *out; -1 with *err
 * when present with another type. */
int frt_api_opt_string(json_t *o, const char *key, const char **out, frt_api_error *err);
int frt_api_opt_bool(json_t *o, const char *key, int *out, frt_api_error *err);
int frt_api_opt_int(json_t *o, const char *key, long long *out, int *present, frt_api_error *err);

/* Identity of one response: "cmpl-N" / "chatcmpl-N", creation time, model. */
typedef struct frt_api_ident {
    int chat;
    char id[48];
    long long created;
    char model[128];
} frt_api_ident;

/* The whole non-streamed response (new reference). */
json_t *frt_api_completion_json(const frt_api_ident *id, const frt_gen_result *res);

/* One stream chunk (new reference): text (may be empty) with finish = NULL,
 * or the final chunk with its finish_reason, usage and frt object (res).
 * role: the first chat chunk's {"role": "assistant"} delta. */
json_t *frt_api_chunk_json(const frt_api_ident *id, const char *text, size_t len, int role, const char *finish,
                           const frt_gen_result *res);

/* The usage-only chunk of stream_options.include_usage (choices: []). */
json_t *frt_api_usage_chunk_json(const frt_api_ident *id, const frt_gen_result *res);

/* The frt object: prefix_action, cached/prefilled tokens, timings, capsules. */
json_t *frt_api_frt_json(const frt_gen_result *res);

/* "cap-N" and back. frt_api_capsule_id returns 0 for a malformed id. */
void frt_api_capsule_name(uint64_t id, char out[32]);
uint64_t frt_api_capsule_id(const char *s);

/* Listings; call under frt_service_lock. */
json_t *frt_api_session_json(const frt_service *s, const frt_session *x);
json_t *frt_api_sessions_json(const frt_service *s);
json_t *frt_api_capsule_json(const frt_service *s, const frt_cap *c);
json_t *frt_api_capsules_json(const frt_service *s);

/* Counters kept by the HTTP layer. */
typedef struct frt_http_stats {
    uint64_t responses[6];  /* by status class: [2] = 2xx ... [5] = 5xx */
    uint64_t rejected_busy; /* 503 for a full queue */
    int queue_depth;
    int running;
    double uptime_s;
} frt_http_stats;

/* Prometheus text exposition (malloc'd); call under frt_service_lock. */
char *frt_api_metrics_text(const frt_service *s, const frt_http_stats *h);

#endif
