/*
 * serving/service.h - the serving core without HTTP: one engine, its
 * capsule registry, the sessions, the planner, and the generation loop.
 *
 * Threading: every function except the readers is called from one thread
 * (the engine thread). Mutations of sessions and registry happen under the
 * service lock; model compute (prefill, decode) runs outside it, so readers
 * on other threads (listings, metrics) take frt_service_lock and see a
 * consistent state at any time.
 *
 * Sessions (../shared/DESIGN.md section 6): the hot session is the one in
 * the live state. A request on another session displaces it: its boundary
 * is snapshotted (tier `displace_tier`, host by default) unless a capsule
 * already holds it, so it comes back by restore. The anonymous session
 * holds sessionless requests: a sessionless request may append to it while
 * it is hot; it is dropped, not snapshotted, when displaced.
 */
#ifndef FRT_SERVING_SERVICE_H
#define FRT_SERVING_SERVICE_H

#include "serving/planner.h"
#include "serving/registry.h"
#include "serving/session.h"

typedef struct frt_service frt_service;

typedef struct frt_service_params {
    size_t budget[FRT_ENGINE_N_TIERS]; /* bytes per tier */
    const char *capsule_dir;           /* NULL = no disk tier */
    int displace_tier;                 /* FRT_ENGINE_TIER_HOST */
    int auto_capsules;                 /* 1 */
    int prefill_piece;                 /* tokens per prefill call, a multiple of C (cancellation points); 0 = 4 C */
    int max_tokens_cap;                /* most tokens one request may generate; 0 = no cap (0) */
    double max_request_s;              /* wall time of one request from its arrival, seconds; 0 = none (0):
                                        * past it, generation stops at the next token boundary with
                                        * finish_reason "length" and time_limited set */
} frt_service_params;

frt_service_params frt_service_default_params(void);

/* Creates the service over e (not owned) and opens the registry.
 * Errors of frt_registry_open; FRT_ERR_INVALID_ARGUMENT for NULL. */
int frt_service_create(frt_engine *e, const frt_service_params *p, frt_service **out);
void frt_service_free(frt_service *s);

/* ---- completions ----------------------------------------------------------- */

struct frt_gen_result;

typedef struct frt_gen_request {
    const char *session_id;     /* NULL = sessionless */
    const char *text;           /* the prompt as text (tokenized here), or NULL and: */
    size_t text_len;
    const int32_t *ids;         /* the prompt as token ids */
    int n_ids;
    int max_tokens;             /* >= 1; see clamp_max_tokens */
    int clamp_max_tokens;       /* 0: max_tokens beyond the context (prompt + max_tokens > max_seq + 1) or
                                 * above max_tokens_cap is FRT_ERR_OUT_OF_RANGE / FRT_ERR_INVALID_ARGUMENT;
                                 * 1 (a default, not asked by the client): generation stops when the
                                 * state is full */
    frt_sampling sampling;
    int has_seed;
    uint64_t seed;
    const char *const *stop;    /* stop strings (not included in the text) */
    int n_stop;
    int ignore_eos;
    int pin_len;                /* frt_pin_prefix: 0 none, -1 the whole prompt, > 0 tokens */
    double t_arrival;           /* frt_service_now() when the request arrived (TTFT origin); 0 = now */
    /* A cartridge to inject before the prompt (a const frt_cartridge *, the
     * store's host copy, borrowed for the call), NULL = none, its token
     * count T, the identity of its version (key: residency and session
     * binding), its id (name) and its rows' token ids (NULL: -1 each, the
     * journal's mark for rows that are no prompt's tokens). It is made
     * resident in device memory under the registry's device budget
     * (frt_registry_cartridge_acquire; FRT_ERR_OUT_OF_MEMORY when it cannot
     * fit) and injected; the prompt follows at positions T.. . Sessionless:
     * no prefix capsule is taken and the next request starts afresh. With
     * session_id: the session's first request binds it to the cartridge
     * (its journal rows 0..T-1 are the cartridge's rows, its capsules carry
     * them, it never takes or matches PREFIX capsules); its later requests
     * continue from its state with or without the cartridge (a different
     * one, or one on a session that started without, is FRT_ERR_MISMATCH
     * with error_param "cartridge_id"); the cartridge is needed again only
     * when the session's state was lost (a rebuild re-injects it). */
    const void *cartridge;
    int cartridge_tokens;
    uint64_t cartridge_key;
    const char *cartridge_name;
    const int32_t *cartridge_ids;
    /* What the cartridge starts with (its manifest's starts_with, borrowed):
     * the prompt's leading tokens equal to it are dropped (the cartridge
     * holds them). cartridge_start_required (chat requests): a prompt that
     * does not begin with it is FRT_ERR_MISMATCH (error_param "messages",
     * cartridge_refused set); otherwise (completions) such a prompt is used
     * as given. */
    const int32_t *cartridge_start;
    int n_cartridge_start;
    int cartridge_start_required;
    /* Grammar-constrained decoding (frt/grammar.h; borrowed for the call),
     * NULL = none: before each sampling step the allowed-token mask of the
     * grammar's state is written to the engine (engine.h token_mask), each
     * token advances the state, and masking is off again after the request.
     * grammar_param names the request field it came from ("response_format",
     * "tool_choice") for the errors: FRT_ERR_UNSUPPORTED on an engine that
     * cannot mask, or with n / best_of > 1 (error_param "n"). */
    const frt_grammar *grammar;
    const char *grammar_param;
    /* Called once the request is validated and planned, before the prefill
     * (res holds the plan: action, cached tokens, restore ms). Optional. */
    void (*on_start)(void *user, const struct frt_gen_result *res);
    /* Streaming: called with each piece of committed text (valid UTF-8),
     * in order; a nonzero return cancels. Optional. */
    int (*on_text)(void *user, const char *text, size_t len);
    void *user;
    const volatile int *cancel; /* optional: nonzero = stop at the next token boundary */
    /* Choices (OpenAI n / best_of). n = 0 or 1 and best_of = 0 or 1: the
     * single-sequence path. Otherwise the prompt is prefilled once, its
     * boundary snapshotted and forked into best_of branches (0 = n;
     * frt/branch.h, branch i seeded with frt_branch_seed(seed, i)), and the
     * n branches with the highest cumulative logprob are returned in
     * res->choices (all best_of of them in branch order when best_of == n).
     * The session continues with branch 0. */
    int n, best_of;
    /* Streaming with n > 1 (best_of must equal n): each choice's committed
     * text, as on_text; index = the choice. */
    int (*on_choice_text)(void *user, int index, const char *text, size_t len);
    /* Streaming with sampling.logprobs: called with the logprobs records
     * lp[0..n) of the tokens committed since the last call (token i of the
     * generation is lp[i - first]), in order, before their text may be
     * streamed (text can be held back for stop strings and UTF-8); the
     * pending last token's record comes at the end. A nonzero return
     * cancels. e names the ids (engine.h token_bytes). Optional. */
    int (*on_logprobs)(void *user, const frt_engine *e, const frt_logprobs *lp, int first, int n);
} frt_gen_request;

/* One returned choice of a forked request. */
typedef struct frt_gen_choice {
    char *text;                 /* as frt_gen_result.text, malloc'd */
    size_t text_len;
    int32_t *tokens;            /* generated ids, malloc'd */
    int n_tokens;
    const char *finish_reason;  /* "stop", "length" or "cancelled" */
    double logprob;             /* sum over its tokens of log_softmax(raw logits)[token] (engine.h logprob) */
    uint64_t seed;              /* its sampler seed: frt_branch_seed(fork_seed, branch) */
    int branch;                 /* its branch in the fork */
} frt_gen_choice;

typedef struct frt_gen_result {
    frt_prefix_action action;
    uint64_t restored;          /* capsule restored, 0 none */
    uint64_t pinned;            /* capsule pinned by frt_pin_prefix, 0 none */
    int pin_unavailable;        /* pin asked but the prompt is shorter than C */
    int prompt_tokens, cached_tokens, prefill_tokens, completion_tokens;
    int cartridge_tokens;       /* T of the injected cartridge (counted in prompt and cached tokens), 0 none */
    double restore_ms, prefill_ms, ttft_ms, total_ms;
    char *text;                 /* the completion, valid UTF-8, malloc'd */
    size_t text_len;
    int32_t *tokens;            /* generated ids (including a final end-of-sequence id), malloc'd */
    int n_tokens;
    const char *finish_reason;  /* "stop", "length" or "cancelled" */
    int time_limited;           /* "length" because the request ran past max_request_s */
    int position;               /* committed tokens after the request */
    char session_id[FRT_SESSION_ID_MAX]; /* "" for sessionless */
    const char *error_param;    /* on an error return: the request field at fault ("max_tokens"), or NULL */
    int cartridge_refused;      /* on an error return: the cartridge refused the request (api.h
                                 * frt_api_cartridge_error names error_param) */
    frt_gen_choice *choices;    /* a forked request (n or best_of > 1): its n choices, else NULL; text,
                                 * tokens stay empty and finish_reason is choice 0's */
    int n_choices, n_branches;  /* returned, forked */
    uint64_t fork_seed;         /* the fork's seed (the request's, or drawn when it has none) */
    int masks;                  /* constrained decoding (rq->grammar): allowed-token masks computed (one per
                                 * generated token), 0 without a grammar */
    double mask_ms;             /* host time computing them and handing them to the engine, ms */
    /* sampling.logprobs: one record per generated token but a final
     * end-of-sequence id (frt/sampling.h; engine.h logprobs), malloc'd,
     * and the engine whose token_bytes names their ids; else NULL, 0. */
    frt_logprobs *logprobs;
    int n_logprobs;
    const frt_engine *lp_engine;
} frt_gen_result;

/* Plans and runs one completion. Returns 0 and fills *res (free with
 * frt_gen_result_clear), also for a cancelled request, or (with *res
 * empty but for error_param):
 *   FRT_ERR_NOT_FOUND         no such session
 *   FRT_ERR_INVALID_ARGUMENT  empty prompt, max_tokens < 1, an id outside
 *                             the vocabulary, max_tokens above max_tokens_cap
 *                             (unless clamp_max_tokens)
 *                             n < 1, best_of < n, more branches than the engine
 *                             has slots (error_param "n" or "best_of"),
 *                             on_choice_text with best_of != n
 *   FRT_ERR_UNSUPPORTED       logprobs with n or best_of > 1
 *                             (error_param "logprobs")
 *   FRT_ERR_UNSUPPORTED       a cartridge on an engine or model that takes
 *                             none (error_param "cartridge_id"); pin_len on a
 *                             cartridge request or session (error_param
 *                             "frt_pin_prefix": no PREFIX capsule holds injected rows)
 *   FRT_ERR_MISMATCH          cartridge_refused: the prompt does not begin with
 *                             the cartridge's stated start (chat), or the
 *                             session is bound to another cartridge or none
 *   FRT_ERR_OUT_OF_MEMORY     cartridge_refused: the cartridge cannot fit the
 *                             device budget (pinned / in-use entries)
 *   FRT_ERR_STATE             cartridge_refused: the session's state was lost
 *                             and its cartridge is not available to rebuild it
 *   FRT_ERR_UNSUPPORTED       a grammar on an engine that cannot mask
 *                             (error_param grammar_param) or with n / best_of > 1
 *   FRT_ERR_OUT_OF_RANGE      the prompt does not fit the context, or (unless
 *                             clamp_max_tokens) prompt + max_tokens exceeds
 *                             max_seq + 1 (the last token stays pending)
 *   engine errors (the session then holds whatever the live state holds:
 *   its journal always matches it) */
int frt_service_generate(frt_service *s, const frt_gen_request *rq, frt_gen_result *res);
void frt_gen_result_clear(frt_gen_result *res);

/* The chat prompt of req through the engine's chat template (engine.h
 * chat_prompt): the rendered text, and its tokens when ids is not NULL.
 * Results are malloc'd. FRT_ERR_INVALID_ARGUMENT for NULL s / req / text;
 * FRT_ERR_UNSUPPORTED when the model has no chat template; the template's
 * errors (text/chat.h). */
int frt_service_chat_prompt(frt_service *s, const frt_chat_request *req, char **text, size_t *len, int32_t **ids,
                            size_t *n);

/* ---- sessions ------------------------------------------------------------------ */

/* Creates a session (id NULL = generated; salt optional; pin: its boundary
 * capsules are pinned). out_id receives the id.
 *   FRT_ERR_INVALID_ARGUMENT  invalid id;  FRT_ERR_STATE  the id is taken */
int frt_service_session_create(frt_service *s, const char *id, const char *salt, size_t salt_len, int pin,
                               char out_id[FRT_SESSION_ID_MAX]);

/* Deletes a session and its references. FRT_ERR_NOT_FOUND. */
int frt_service_session_delete(frt_service *s, const char *id);

/* n new sessions starting from the session's current boundary (one shared
 * capsule, restored once per branch when each runs). out_ids receives n ids.
 *   FRT_ERR_NOT_FOUND; FRT_ERR_INVALID_ARGUMENT for n < 1 or n > 64;
 *   FRT_ERR_OUT_OF_MEMORY when no tier can hold the boundary */
int frt_service_session_fork(frt_service *s, const char *id, int n, char (*out_ids)[FRT_SESSION_ID_MAX]);

/* A named capsule of the session's current boundary (replacing one of the
 * same name). *capsule (optional) receives its registry id.
 *   FRT_ERR_NOT_FOUND (session); FRT_ERR_INVALID_ARGUMENT (name);
 *   FRT_ERR_STATE (the boundary was lost: no capsule holds it) */
int frt_service_checkpoint(frt_service *s, const char *id, const char *name, int pin, uint64_t *capsule);

/* Moves the session back to a checkpoint's boundary (restored by its next
 * request). FRT_ERR_NOT_FOUND (session, checkpoint, or its capsule was
 * deleted). */
int frt_service_rollback(frt_service *s, const char *id, const char *name);

/* Capsule pin/unpin/delete through the API. FRT_ERR_NOT_FOUND. */
int frt_service_capsule_pin(frt_service *s, uint64_t id, int pin);
int frt_service_capsule_delete(frt_service *s, uint64_t id);

/* ---- readers (take the lock around them from other threads) ---------------------- */

void frt_service_lock(frt_service *s);
void frt_service_unlock(frt_service *s);
const frt_engine_facts *frt_service_facts(const frt_service *s);
const frt_sessions *frt_service_sessions(const frt_service *s);
const frt_registry *frt_service_registry(const frt_service *s);
const frt_session *frt_service_hot(const frt_service *s);

#define FRT_TTFT_BUCKETS 12
extern const double frt_ttft_bounds[FRT_TTFT_BUCKETS]; /* seconds, the last is +Inf */

typedef struct frt_service_metrics {
    uint64_t requests[3];              /* by frt_prefix_action */
    uint64_t cancelled, failed;
    uint64_t time_limited;             /* stopped by max_request_s */
    uint64_t prompt_tokens, cached_tokens, prefill_tokens, generated_tokens;
    uint64_t ttft_count[FRT_TTFT_BUCKETS]; /* cumulative histogram counts */
    double ttft_sum;                   /* seconds */
    double restore_ms_sum;
    uint64_t displacements;            /* hot sessions snapshotted when displaced */
    uint64_t snapshot_failures;        /* snapshots that found no room (the request went on without) */
    uint64_t restore_failures;         /* restores that failed (the request fell back to a rebuild) */
} frt_service_metrics;

void frt_service_metrics_get(const frt_service *s, frt_service_metrics *m);

/* Monotonic seconds. */
double frt_service_now(void);

#endif
