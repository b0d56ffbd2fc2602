/*
 * serving/service_int.h - the service's insides shared by service.c (the
 * single-sequence generation loop) and branches.c (a request forked into
 * choices): the service struct, one running request and one generated
 * sequence with its stream emitter.
 */
#ifndef FRT_SERVING_SERVICE_INT_H
#define FRT_SERVING_SERVICE_INT_H

#include "serving/service.h"

#include <pthread.h>

struct frt_service {
    frt_engine *e;
    frt_service_params p;
    frt_registry *reg;
    frt_sessions sessions;
    frt_session *anon; /* sessionless requests */
    frt_session *hot;  /* the session in the live state, or NULL */
    int hot_dirty;     /* the live state moved past hot->capsule */
    pthread_mutex_t mu;
    frt_service_metrics m;
};

/* Streaming state of one generated text. */
typedef struct frt_emitter {
    frt_service *s;
    const frt_gen_request *rq;
    size_t emitted; /* raw bytes of committed text already passed on */
    int stop_cb;    /* the callback asked to stop */
    int index;      /* -1: rq->on_text; >= 0: rq->on_choice_text with this choice index; -2: not streamed */
} frt_emitter;

/* One generated sequence: its tokens, why it ended, its text's stream. */
typedef struct frt_gen_seq {
    int32_t *g; /* generated tokens [k] (capacity cap) */
    int k, cap, eos_tail, stopped, live;
    size_t stop_at;     /* where the stop string starts in the text (stopped) */
    const char *finish; /* "stop", "length", "cancelled" (the initial value) */
    double logprob;     /* branches: sum of the tokens' logprobs */
    frt_emitter em;
    frt_logprobs *lp;   /* sampling.logprobs: the record of each token g[i] [k] (capacity lp_cap) */
    int lp_cap, lp_sent; /* lp_sent: records passed to on_logprobs */
} frt_gen_seq;

/* One completion on its way through the steps of frt_service_generate. */
typedef struct frt_gen_run {
    frt_service *s;
    const frt_gen_request *rq;
    frt_gen_result *res;
    frt_session *sess;
    double t0;
    int32_t *ids; /* the prompt's tokens [n] */
    int n;
    frt_request_plan plan;
    int pos;       /* prompt tokens in the live state */
    int pos0;      /* the restore's one call prefilled the prompt up to here (0: it did not) */
    frt_gen_seq q; /* the single-sequence path's output */
    int generated; /* tokens generated in all (every branch) */
    uint64_t cart_entry; /* the registry entry of the cartridge in use (released at the end), 0 none */
} frt_gen_run;

/* service_cartridge.c: */
/* The request's cartridge against its session's binding and the refused
 * combinations (pin_len; another cartridge; a cartridge on a session that
 * started without one), before anything runs. 0 or the error (error_param set). */
int frt_gen_cartridge_check(frt_gen_run *r);
/* 1 when the request runs with a cartridge's rows: it has one, or its session is bound to one. */
int frt_gen_cartridge_rows(const frt_gen_run *r);
/* The prompt r->ids[0..n) loses the cartridge's stated start and follows
 * its T rows (their ids, or -1). */
int frt_gen_cartridge_prompt(frt_gen_run *r);
/* Makes the cartridge resident (registry) and injects it: position T.
 * Under the service lock. 0 or the error (error_param, cartridge_refused). */
int frt_gen_cartridge_inject(frt_gen_run *r);
/* Ends the request's use of its resident cartridge. Under the service lock. */
void frt_gen_cartridge_release(frt_gen_run *r);

/* The most tokens the request may generate. */
int frt_gen_max_tokens(const frt_gen_run *r);
/* The request was cancelled (by its flag or the emitter's callback). */
int frt_gen_cancelled(const frt_gen_request *rq, const frt_emitter *em);
/* The request has run past the server's wall-time limit. */
int frt_gen_past_deadline(const frt_gen_run *r);
/* Appends tok to q (0 or FRT_ERR_OUT_OF_MEMORY). */
int frt_gen_seq_push(frt_gen_seq *q, int32_t tok);
/* 1 when q ends before its next token (end-of-sequence id, stop string,
 * max tokens, cancel, time limit), with q->finish set; else 0. */
int frt_gen_seq_done(frt_gen_run *r, frt_gen_seq *q, int max_gen);
/* Streams q's committed tokens g[0..kc) as far as they cannot change. */
void frt_gen_emit_committed(frt_emitter *em, const int32_t *g, int kc);
/* q's final text (without the end-of-sequence id and the stop string; the
 * rest of it streamed); sets q->finish to "cancelled" when cancelled.
 * *text is malloc'd. */
int frt_gen_seq_text(frt_gen_run *r, frt_gen_seq *q, char **text, size_t *len);

/* service_grammar.c: a request's grammar through the decode loop. */
typedef struct frt_gen_grammar {
    frt_engine *e;
    frt_grammar_matcher *m; /* NULL: the request has no grammar (every call is a no-op) */
    uint32_t *mask;         /* [n_words] */
    int64_t n_words;
    int masks;              /* masks written */
    double ms;              /* their host time */
} frt_gen_grammar;
/* Checks rq's grammar against the engine (service.h errors, error_param set). */
int frt_gen_grammar_check(const frt_service *s, const frt_gen_request *rq, frt_gen_result *res);
/* Starts the matcher of rq->grammar (nothing without one). */
int frt_gen_grammar_begin(frt_gen_grammar *gg, frt_engine *e, const frt_gen_request *rq);
/* Writes the mask of the current state to the engine; *none = 1 (and no
 * mask written) when the grammar's output ended (an end id was taken);
 * FRT_ERR_STATE when no token continues an output that has not ended. */
int frt_gen_grammar_mask(frt_gen_grammar *gg, int *none);
/* Advances the state by the token the step produced. */
int frt_gen_grammar_accept(frt_gen_grammar *gg, int32_t tok);
/* Masking off, the matcher freed. */
void frt_gen_grammar_end(frt_gen_grammar *gg);

/* branches.c: after the prefill, forks the boundary into rq->best_of
 * branches, decodes them, and fills res->choices (service.h). */
int frt_gen_branches(frt_gen_run *r);
/* Checks the request's n / best_of against the engine (service.h errors). */
int frt_gen_branches_check(const frt_service *s, const frt_gen_request *rq, frt_gen_result *res);
/* Frees res->choices. */
void frt_gen_choices_free(frt_gen_result *res);

#endif
