/*
 * serving/server_int.h - what server.c (HTTP: routes, validation, answers)
 * and server_jobs.c (the job queue and the engine thread) share. Internal.
 *
 * A job is one request that touches the model or the sessions. The
 * connection thread that made it and the engine thread each hold a
 * reference (refs); the last frt_job_unref frees it. j->mu guards the
 * answer and the stream; the server's qmu guards the queue.
 */
#ifndef FRT_SERVING_SERVER_INT_H
#define FRT_SERVING_SERVER_INT_H

#include "frt/serving.h"

#include "serving/api.h"
#include "serving/api_tokens.h"
#include "serving/cartridges.h"

#include <microhttpd.h>
#include <pthread.h>

typedef enum frt_job_kind {
    FRT_JOB_COMPLETION,
    FRT_JOB_SESSION_CREATE,
    FRT_JOB_SESSION_DELETE,
    FRT_JOB_FORK,
    FRT_JOB_CHECKPOINT,
    FRT_JOB_ROLLBACK,
    FRT_JOB_CAPSULE_PIN,
    FRT_JOB_CAPSULE_UNPIN,
    FRT_JOB_CAPSULE_DELETE,
    FRT_JOB_TOKENS, /* /tokenize, /detokenize (api_tokens.h) */
} frt_job_kind;

/* A streamed chat choice: the job and the choice's index. */
struct frt_job_choice {
    struct frt_job *j;
    int index;
};

typedef struct frt_job {
    frt_job_kind kind;
    struct frt_job *next;
    struct frt_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int taken;           /* the engine thread popped it (under the server's qmu) */
    int started, done;
    volatile int cancel;
    double t_arrival;
    /* inputs */
    frt_api_completion rq;
    frt_api_session_create create;
    frt_api_session_op op;
    frt_api_tokens tokens;
    char id[FRT_SESSION_ID_MAX];
    uint64_t capsule;
    /* the answer when not streaming (or an error before the stream started) */
    int status;
    json_t *body;
    /* chat: the output split into content, reasoning and tool calls */
    frt_chat_output out;
    frt_chat_output *outs; /* a streamed chat with n > 1: one parser per choice [rq.n] */
    struct frt_job_choice *sinks; /* their callbacks' users [rq.n] */
    json_t *message; /* not streaming: the answer's message */
    char *prompt;    /* frt_return_prompt: the rendered prompt */
    /* the routed cartridge (server_cartridges.c): id and tokens, or why none */
    char cart_id[FRT_CARTRIDGE_ID_MAX];
    int cart_tokens;
    char cart_why[256];
    /* streaming */
    frt_api_ident ident;
    char *sse;
    size_t sse_len, sse_cap, sse_off;
    int sse_end;
    frt_api_lp_text lp_text; /* streamed completions' logprobs: the text_offset so far */
} frt_job;

struct frt_server {
    frt_server_params p;
    char *api_key;       /* owned copies of the string parameters */
    char *cors_origin;
    char *bind_host;     /* accepted as a Host name on loopback binds */
    char **allowed_hosts;
    int n_allowed_hosts;
    int loopback;        /* bound to a loopback address: Host is checked */
    frt_engine *e;
    frt_service *svc;
    frt_cart_store *carts; /* NULL without cartridge_dir */
    struct MHD_Daemon *d;
    int port;
    pthread_t engine;
    int engine_started;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    frt_job *head, *tail;
    int qlen, stopping;
    frt_job *running;
    frt_http_stats http; /* under qmu */
    double t_start;
    long long created;   /* unix seconds at start */
    uint64_t counter;    /* response ids */
};

/* One line to p.log (no-op without it). Never called with secrets. */
void frt_server_logf(frt_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A job with one reference (the caller's); NULL on out of memory. */
frt_job *frt_job_new(frt_server *s, frt_job_kind kind);
void frt_job_unref(frt_job *j);

/* Queues j for the engine thread (which takes its own reference): 0, or -1
 * when the queue is full or the server is stopping (counted as busy). */
int frt_job_submit(frt_server *s, frt_job *j);

/* Removes j from the queue if the engine has not taken it yet (dropping the
 * engine's reference): 1 when removed, 0 when it already runs or ran. */
int frt_job_withdraw(frt_server *s, frt_job *j);

/* server_checks.c, on a request's headers: */
/* 1 when origin may read answers (cors_origin is "*" or equals it). */
int frt_server_origin_allowed(const frt_server *s, const char *origin);
/* Adds Access-Control-Allow-Origin (+ Vary) when the request's Origin is allowed. */
void frt_server_cors_headers(frt_server *s, struct MHD_Connection *c, struct MHD_Response *r);
/* 1 without an api_key, or with "Authorization: Bearer KEY" (constant time in the key's length). */
int frt_server_authorized(const frt_server *s, struct MHD_Connection *c);
/* 1 unless a loopback bind gets a Host name it does not answer (DNS rebinding). */
int frt_server_host_allowed(const frt_server *s, struct MHD_Connection *c);
/* 1 when Content-Type is application/json (parameters allowed). */
int frt_server_json_content_type(struct MHD_Connection *c);

/* server_cartridges.c: */
/* Opens the cartridge store of s->p.cartridge_dir (when set) with its
 * static mappings. Errors: see frt_server_start. */
int frt_server_cartridges_open(frt_server *s, const frt_server_params *p);
/* Routes j's cartridge into g (engine thread): 0 with g->cartridge set, or
 * left NULL (none asked or applied, or the registry failed: j->cart_why),
 * or -1 with *err. */
int frt_server_cartridge_route(frt_server *s, frt_job *j, frt_gen_request *g, frt_api_error *err);
/* Adds j's cartridge facts to the "frt" object of the answer o; returns o. */
json_t *frt_server_cartridge_note(const frt_job *j, json_t *o);

/* The engine thread's loop (pthread start routine, arg = the server). */
void *frt_server_engine_main(void *arg);

#endif
