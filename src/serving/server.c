/*
 * serving/server.c - the OpenAI-compatible HTTP server (libmicrohttpd).
 *
 * Threads: MHD runs one thread per connection; those threads parse and
 * validate requests (api.c), answer listings under the service lock, and
 * queue everything that touches the model as a job. One engine thread pops
 * jobs and runs them one at a time (frt_service_*). A full queue answers 503
 * with Retry-After.
 *
 * Streaming: the connection thread waits until the engine has validated and
 * planned the request (so errors still get their 4xx status), then answers
 * 200 text/event-stream and reads SSE chunks from the job as the engine
 * appends them. When the client goes away, MHD frees the response: the free
 * callback cancels the job, and the engine stops at the next token boundary
 * (the session stays at its last committed token).
 */
#include "frt/serving.h"

#include "serving/api.h"
#include "util/error.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef enum job_kind {
    JOB_COMPLETION,
    JOB_SESSION_CREATE,
    JOB_SESSION_DELETE,
    JOB_FORK,
    JOB_CHECKPOINT,
    JOB_ROLLBACK,
    JOB_CAPSULE_PIN,
    JOB_CAPSULE_UNPIN,
    JOB_CAPSULE_DELETE,
} job_kind;

typedef struct job {
    job_kind kind;
    struct job *next;
    struct frt_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int started, done;
    volatile int cancel;
    double t_arrival;
    /* inputs */
    frt_api_completion rq;
    char id[FRT_SESSION_ID_MAX], name[FRT_SESSION_ID_MAX];
    int has_id;
    char *salt;
    size_t salt_len;
    int pin, n;
    uint64_t capsule;
    /* the answer when not streaming (or an error before the stream started) */
    int status;
    json_t *body;
    /* streaming */
    frt_api_ident ident;
    char *sse;
    size_t sse_len, sse_cap, sse_off;
    int sse_end;
} job;

struct frt_server {
    frt_server_params p;
    frt_engine *e;
    frt_service *svc;
    struct MHD_Daemon *d;
    int port;
    pthread_t engine;
    int engine_started;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    job *head, *tail;
    int qlen, stopping;
    job *running;
    frt_http_stats http; /* under qmu */
    double t_start;
    long long created; /* unix seconds at start */
    uint64_t counter;  /* response ids */
};

typedef struct conn {
    char *body;
    size_t len, cap;
    int too_large;
} conn;

static void logf_(frt_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(frt_server *s, const char *fmt, ...)
{
    if (!s->p.log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_user, line);
}

frt_server_params frt_server_default_params(void)
{
    frt_server_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8000;
    p.budget_bytes[0] = (size_t)1 << 30;
    p.budget_bytes[1] = (size_t)8 << 30;
    p.budget_bytes[2] = (size_t)64 << 30;
    p.displace_tier = 1;
    p.auto_capsules = 1;
    p.queue_size = 16;
    p.max_body_bytes = (size_t)8 << 20;
    p.max_connections = 64;
    return p;
}

int frt_server_port(const frt_server *s) { return s ? s->port : 0; }

/* ---- jobs --------------------------------------------------------------------------------- */

static job *job_new(frt_server *srv, job_kind kind)
{
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->srv = srv;
    j->refs = 1;
    j->t_arrival = frt_service_now();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

static void job_unref(job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    frt_api_completion_clear(&j->rq);
    free(j->salt);
    free(j->sse);
    if (j->body) json_decref(j->body);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Appends "data: JSON\n\n" (steals obj) or a raw line to the stream. Under j->mu. */
static void sse_append_raw(job *j, const char *s, size_t n)
{
    if (j->sse_len + n + 1 > j->sse_cap) {
        size_t nc = j->sse_cap ? j->sse_cap : 4096;
        while (nc < j->sse_len + n + 1) nc *= 2;
        char *p = realloc(j->sse, nc);
        if (!p) return;
        j->sse = p;
        j->sse_cap = nc;
    }
    memcpy(j->sse + j->sse_len, s, n);
    j->sse_len += n;
}

static void sse_append(job *j, json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(obj);
    if (!s) return;
    sse_append_raw(j, "data: ", 6);
    sse_append_raw(j, s, strlen(s));
    sse_append_raw(j, "\n\n", 2);
    free(s);
}

static void job_answer(job *j, int status, json_t *body)
{
    pthread_mutex_lock(&j->mu);
    j->status = status;
    if (j->body) json_decref(j->body);
    j->body = body;
    pthread_mutex_unlock(&j->mu);
}

static void job_fail(job *j, const frt_api_error *err) { job_answer(j, err->status, frt_api_error_json(err)); }

/* Marks the job done (ending its stream) and wakes its connection thread. */
static void job_finish(job *j)
{
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    j->sse_end = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Queues a job for the engine thread; 0, or -1 when the queue is full or the
 * server is stopping. */
static int submit(frt_server *s, job *j)
{
    pthread_mutex_lock(&s->qmu);
    if (s->stopping || s->qlen >= s->p.queue_size) {
        s->http.rejected_busy++;
        pthread_mutex_unlock(&s->qmu);
        return -1;
    }
    j->refs++; /* the engine's reference */
    j->next = NULL;
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->qlen++;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

/* ---- the engine thread --------------------------------------------------------------------- */

static void on_start(void *user, const frt_gen_result *res)
{
    job *j = user;
    pthread_mutex_lock(&j->mu);
    j->started = 1;
    if (j->ident.chat) sse_append(j, frt_api_chunk_json(&j->ident, "", 0, 1, NULL, NULL));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static int on_text(void *user, const char *text, size_t len)
{
    job *j = user;
    pthread_mutex_lock(&j->mu);
    sse_append(j, frt_api_chunk_json(&j->ident, text, len, 0, NULL, NULL));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return j->cancel;
}

static void run_completion(frt_server *s, job *j)
{
    frt_api_completion *c = &j->rq;
    frt_api_error err;
    const char *what = c->chat ? "messages" : "prompt";
    char *chat_text = NULL;
    frt_gen_request g;
    memset(&g, 0, sizeof g);
    if (c->chat) {
        int rc = frt_service_chat_prompt(s->svc, c->msgs, c->n_msgs, &chat_text);
        if (rc) {
            frt_api_error_from_status(&err, rc, "messages");
            job_fail(j, &err);
            return;
        }
        g.text = chat_text;
        g.text_len = strlen(chat_text);
    } else if (c->prompt_text) {
        g.text = c->prompt_text;
        g.text_len = strlen(c->prompt_text);
    } else {
        g.ids = c->prompt_ids;
        g.n_ids = c->n_prompt_ids;
    }
    g.session_id = c->session_id;
    g.max_tokens = c->max_tokens;
    g.sampling = c->sampling;
    g.has_seed = c->has_seed;
    g.seed = c->seed;
    g.stop = (const char *const *)c->stop;
    g.n_stop = c->n_stop;
    g.ignore_eos = c->ignore_eos;
    g.pin_len = c->pin_len;
    g.t_arrival = j->t_arrival;
    if (c->stream) {
        g.on_start = on_start;
        g.on_text = on_text;
    }
    g.user = j;
    g.cancel = &j->cancel;
    frt_gen_result res;
    int rc = frt_service_generate(s->svc, &g, &res);
    free(chat_text);
    if (rc) {
        frt_api_error_from_status(&err, rc, what);
        logf_(s, "%s %d %s", c->chat ? "chat" : "completion", err.status, err.message);
        pthread_mutex_lock(&j->mu);
        int started = j->started;
        if (started) {
            sse_append(j, frt_api_error_json(&err));
            sse_append_raw(j, "data: [DONE]\n\n", 14);
        }
        pthread_mutex_unlock(&j->mu);
        if (!started) job_fail(j, &err);
        return;
    }
    logf_(s, "%s session=%s action=%s prompt=%d cached=%d prefilled=%d generated=%d finish=%s restore=%.2fms ttft=%.2fms",
          c->chat ? "chat" : "completion", res.session_id[0] ? res.session_id : "-", frt_prefix_action_name(res.action),
          res.prompt_tokens, res.cached_tokens, res.prefill_tokens, res.completion_tokens, res.finish_reason,
          res.restore_ms, res.ttft_ms);
    if (c->stream) {
        pthread_mutex_lock(&j->mu);
        if (strcmp(res.finish_reason, "cancelled")) {
            sse_append(j, frt_api_chunk_json(&j->ident, "", 0, 0, res.finish_reason, &res));
            if (c->include_usage) sse_append(j, frt_api_usage_chunk_json(&j->ident, &res));
        }
        sse_append_raw(j, "data: [DONE]\n\n", 14);
        pthread_mutex_unlock(&j->mu);
    } else {
        job_answer(j, 200, frt_api_completion_json(&j->ident, &res));
    }
    frt_gen_result_clear(&res);
}

static json_t *session_body(frt_server *s, const char *id)
{
    frt_service_lock(s->svc);
    const frt_session *x = frt_sessions_find(frt_service_sessions(s->svc), id);
    json_t *o = x ? frt_api_session_json(s->svc, x) : json_object();
    frt_service_unlock(s->svc);
    return o;
}

static void fail_status(job *j, int rc, const char *not_found_code, const char *param)
{
    frt_api_error err;
    if (rc == FRT_ERR_NOT_FOUND) frt_api_fail(&err, 404, not_found_code, param, "%s", frt_last_error());
    else if (rc == FRT_ERR_INVALID_ARGUMENT) frt_api_fail(&err, 400, "invalid_value", param, "%s", frt_last_error());
    else frt_api_error_from_status(&err, rc, param);
    job_fail(j, &err);
}

static void run_job(frt_server *s, job *j)
{
    int rc = 0;
    char out[FRT_SESSION_ID_MAX];
    switch (j->kind) {
    case JOB_COMPLETION: run_completion(s, j); return;
    case JOB_SESSION_CREATE:
        rc = frt_service_session_create(s->svc, j->has_id ? j->id : NULL, j->salt, j->salt_len, j->pin, out);
        if (rc == FRT_ERR_STATE) {
            frt_api_error err;
            frt_api_fail(&err, 409, "session_exists", "id", "%s", frt_last_error());
            job_fail(j, &err);
        } else if (rc) {
            fail_status(j, rc, "session_not_found", "id");
        } else {
            job_answer(j, 200, session_body(s, out));
            logf_(s, "session %s created", out);
        }
        return;
    case JOB_SESSION_DELETE:
        rc = frt_service_session_delete(s->svc, j->id);
        if (rc) {
            fail_status(j, rc, "session_not_found", "session_id");
        } else {
            json_t *o = json_object();
            json_object_set_new(o, "id", json_string(j->id));
            json_object_set_new(o, "object", json_string("session.deleted"));
            json_object_set_new(o, "deleted", json_true());
            job_answer(j, 200, o);
        }
        return;
    case JOB_FORK: {
        char(*ids)[FRT_SESSION_ID_MAX] = calloc((size_t)j->n, sizeof *ids);
        rc = ids ? frt_service_session_fork(s->svc, j->id, j->n, ids) : FRT_ERR_OUT_OF_MEMORY;
        if (rc) {
            fail_status(j, rc, "session_not_found", "n");
        } else {
            json_t *data = json_array(), *o = json_object();
            for (int i = 0; i < j->n; i++) json_array_append_new(data, session_body(s, ids[i]));
            json_object_set_new(o, "object", json_string("list"));
            json_object_set_new(o, "data", data);
            job_answer(j, 200, o);
        }
        free(ids);
        return;
    }
    case JOB_CHECKPOINT: {
        uint64_t cap = 0;
        rc = frt_service_checkpoint(s->svc, j->id, j->name, j->pin, &cap);
        if (rc) {
            fail_status(j, rc, "session_not_found", "name");
        } else {
            char cn[32];
            frt_api_capsule_name(cap, cn);
            json_t *o = json_object();
            json_object_set_new(o, "object", json_string("checkpoint"));
            json_object_set_new(o, "session_id", json_string(j->id));
            json_object_set_new(o, "name", json_string(j->name));
            json_object_set_new(o, "capsule", json_string(cn));
            frt_service_lock(s->svc);
            const frt_cap *c = frt_registry_get(frt_service_registry(s->svc), cap);
            json_object_set_new(o, "position", json_integer(c ? c->position : 0));
            frt_service_unlock(s->svc);
            json_object_set_new(o, "pinned", json_boolean(j->pin));
            job_answer(j, 200, o);
        }
        return;
    }
    case JOB_ROLLBACK:
        rc = frt_service_rollback(s->svc, j->id, j->name);
        if (rc == FRT_ERR_NOT_FOUND && strstr(frt_last_error(), "checkpoint")) fail_status(j, rc, "checkpoint_not_found", "name");
        else if (rc) fail_status(j, rc, "session_not_found", "session_id");
        else job_answer(j, 200, session_body(s, j->id));
        return;
    case JOB_CAPSULE_PIN:
    case JOB_CAPSULE_UNPIN:
    case JOB_CAPSULE_DELETE:
        rc = j->kind == JOB_CAPSULE_DELETE ? frt_service_capsule_delete(s->svc, j->capsule)
                                           : frt_service_capsule_pin(s->svc, j->capsule, j->kind == JOB_CAPSULE_PIN);
        if (rc) {
            fail_status(j, rc, "capsule_not_found", "capsule_id");
        } else if (j->kind == JOB_CAPSULE_DELETE) {
            char cn[32];
            frt_api_capsule_name(j->capsule, cn);
            json_t *o = json_object();
            json_object_set_new(o, "id", json_string(cn));
            json_object_set_new(o, "object", json_string("capsule.deleted"));
            json_object_set_new(o, "deleted", json_true());
            job_answer(j, 200, o);
        } else {
            frt_service_lock(s->svc);
            const frt_cap *c = frt_registry_get(frt_service_registry(s->svc), j->capsule);
            json_t *o = c ? frt_api_capsule_json(s->svc, c) : json_object();
            frt_service_unlock(s->svc);
            job_answer(j, 200, o);
        }
        return;
    }
}

static void *engine_main(void *arg)
{
    frt_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->head && !s->stopping) pthread_cond_wait(&s->qcv, &s->qmu);
        job *j = s->head;
        if (!j) {
            pthread_mutex_unlock(&s->qmu);
            break;
        }
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->qlen--;
        s->running = j;
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->qmu);
        if (stopping) {
            frt_api_error err;
            frt_api_fail(&err, 503, "shutting_down", NULL, "The server is shutting down");
            job_fail(j, &err);
        } else {
            run_job(s, j);
        }
        pthread_mutex_lock(&s->qmu);
        s->running = NULL;
        pthread_mutex_unlock(&s->qmu);
        job_finish(j);
        job_unref(j);
    }
    return NULL;
}

/* ---- HTTP ----------------------------------------------------------------------------------- */

static void count_status(frt_server *s, int status)
{
    pthread_mutex_lock(&s->qmu);
    if (status >= 200 && status < 600) s->http.responses[status / 100]++;
    pthread_mutex_unlock(&s->qmu);
}

static enum MHD_Result send_text(frt_server *s, struct MHD_Connection *c, int status, const char *type, char *text,
                                 int retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return ret;
}

/* Sends a JSON body (steals it). */
static enum MHD_Result send_json(frt_server *s, struct MHD_Connection *c, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(body);
    if (!text) return MHD_NO;
    return send_text(s, c, status, "application/json", text, status == 503);
}

static enum MHD_Result send_error(frt_server *s, struct MHD_Connection *c, const frt_api_error *e)
{
    return send_json(s, c, e->status, frt_api_error_json(e));
}

static enum MHD_Result send_fail(frt_server *s, struct MHD_Connection *c, int status, const char *code,
                                 const char *param, const char *msg)
{
    frt_api_error e;
    frt_api_fail(&e, status, code, param, "%s", msg);
    return send_error(s, c, &e);
}

static enum MHD_Result send_busy(frt_server *s, struct MHD_Connection *c)
{
    return send_fail(s, c, 503, "server_busy", NULL, "The request queue is full; retry later");
}

/* Waits for a job's answer and sends it. */
static enum MHD_Result wait_and_send(frt_server *s, struct MHD_Connection *c, job *j)
{
    pthread_mutex_lock(&j->mu);
    while (!j->done) pthread_cond_wait(&j->cv, &j->mu);
    int status = j->status ? j->status : 500;
    json_t *body = j->body;
    j->body = NULL;
    pthread_mutex_unlock(&j->mu);
    if (!body) {
        frt_api_error e;
        frt_api_fail(&e, 500, "internal_error", NULL, "no answer");
        body = frt_api_error_json(&e);
    }
    enum MHD_Result r = send_json(s, c, status, body);
    job_unref(j);
    return r;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    job *j = cls;
    pthread_mutex_lock(&j->mu);
    while (j->sse_off == j->sse_len && !j->sse_end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    if (j->sse_off == j->sse_len) {
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = j->sse_len - j->sse_off;
    if (n > max) n = max;
    memcpy(buf, j->sse + j->sse_off, n);
    j->sse_off += n;
    if (j->sse_off == j->sse_len) j->sse_off = j->sse_len = 0;
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)n;
}

/* The response is gone: normally at its end, or because the client left. */
static void sse_free(void *cls)
{
    job *j = cls;
    j->cancel = 1;
    job_unref(j);
}

static enum MHD_Result handle_completion(frt_server *s, struct MHD_Connection *c, conn *cc, int chat)
{
    frt_api_error err;
    const frt_engine_facts *f = frt_service_facts(s->svc);
    job *j = job_new(s, JOB_COMPLETION);
    if (!j) return MHD_NO;
    if (frt_api_parse_completion(cc->body ? cc->body : "", cc->len, chat, chat ? f->max_seq : 16, &j->rq, &err)) {
        job_unref(j);
        return send_error(s, c, &err);
    }
    j->ident.chat = chat;
    pthread_mutex_lock(&s->qmu);
    unsigned long long k = ++s->counter;
    pthread_mutex_unlock(&s->qmu);
    snprintf(j->ident.id, sizeof j->ident.id, "%s-%llu", chat ? "chatcmpl" : "cmpl", k);
    j->ident.created = (long long)time(NULL);
    snprintf(j->ident.model, sizeof j->ident.model, "%s", j->rq.model[0] ? j->rq.model : f->model_id);
    if (submit(s, j)) {
        job_unref(j);
        return send_busy(s, c);
    }
    if (!j->rq.stream) return wait_and_send(s, c, j);
    /* streaming: wait for validation + planning, or an early error */
    pthread_mutex_lock(&j->mu);
    while (!j->started && !j->done) pthread_cond_wait(&j->cv, &j->mu);
    int started = j->started;
    pthread_mutex_unlock(&j->mu);
    if (!started) return wait_and_send(s, c, j);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, j, sse_free);
    if (!r) {
        j->cancel = 1;
        job_unref(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* the response (and its reference to j) lives until sent or aborted */
    count_status(s, 200);
    return ret;
}

static enum MHD_Result run_simple(frt_server *s, struct MHD_Connection *c, job *j)
{
    if (submit(s, j)) {
        job_unref(j);
        return send_busy(s, c);
    }
    return wait_and_send(s, c, j);
}

static enum MHD_Result handle_sessions_post(frt_server *s, struct MHD_Connection *c, conn *cc)
{
    frt_api_error err;
    json_t *o = frt_api_parse_object(cc->body ? cc->body : "", cc->len, &err);
    if (!o) return send_error(s, c, &err);
    const char *id = NULL, *salt = NULL;
    int pin = 0;
    if (frt_api_opt_string(o, "id", &id, &err) || frt_api_opt_string(o, "salt", &salt, &err) ||
        frt_api_opt_bool(o, "pin", &pin, &err)) {
        json_decref(o);
        return send_error(s, c, &err);
    }
    if (id && !frt_session_id_valid(id)) {
        json_decref(o);
        return send_fail(s, c, 400, "invalid_value", "id",
                         "'id' must be 1 to 63 characters of letters, digits, '.', '_', '-', ':'");
    }
    job *j = job_new(s, JOB_SESSION_CREATE);
    if (!j) {
        json_decref(o);
        return MHD_NO;
    }
    if (id) {
        snprintf(j->id, sizeof j->id, "%s", id);
        j->has_id = 1;
    }
    if (salt && *salt) {
        j->salt = strdup(salt);
        j->salt_len = strlen(salt);
    }
    j->pin = pin;
    json_decref(o);
    return run_simple(s, c, j);
}

static enum MHD_Result handle_session_op(frt_server *s, struct MHD_Connection *c, conn *cc, const char *sid,
                                         const char *op)
{
    frt_api_error err;
    json_t *o = frt_api_parse_object(cc->body ? cc->body : "", cc->len, &err);
    if (!o) return send_error(s, c, &err);
    job *j = NULL;
    const char *name = NULL;
    long long n = 1;
    int present = 0, pin = 1, bad = 0;
    if (!strcmp(op, "fork")) {
        if (frt_api_opt_int(o, "n", &n, &present, &err)) bad = 1;
        else if (n < 1 || n > 64) bad = frt_api_fail(&err, 400, "invalid_value", "n", "'n' must be 1..64");
        if (!bad && (j = job_new(s, JOB_FORK))) j->n = (int)n;
    } else {
        int ckpt = !strcmp(op, "checkpoints");
        if (frt_api_opt_string(o, "name", &name, &err)) bad = 1;
        else if (!ckpt && !name && frt_api_opt_string(o, "checkpoint", &name, &err)) bad = 1;
        else if (ckpt && frt_api_opt_bool(o, "pin", &pin, &err)) bad = 1;
        else if (!name) bad = frt_api_fail(&err, 400, "missing_required_parameter", "name", "Missing required parameter: 'name'");
        else if (!frt_session_id_valid(name))
            bad = frt_api_fail(&err, 400, "invalid_value", "name",
                               "'name' must be 1 to 63 characters of letters, digits, '.', '_', '-', ':'");
        if (!bad && (j = job_new(s, ckpt ? JOB_CHECKPOINT : JOB_ROLLBACK))) {
            snprintf(j->name, sizeof j->name, "%s", name);
            j->pin = pin;
        }
    }
    json_decref(o);
    if (bad) return send_error(s, c, &err);
    if (!j) return MHD_NO;
    snprintf(j->id, sizeof j->id, "%s", sid);
    return run_simple(s, c, j);
}

static enum MHD_Result answer_listing(frt_server *s, struct MHD_Connection *c, json_t *o)
{
    return send_json(s, c, 200, o);
}

static enum MHD_Result handle_get_session(frt_server *s, struct MHD_Connection *c, const char *sid, int ckpts)
{
    frt_service_lock(s->svc);
    const frt_session *x = frt_sessions_find(frt_service_sessions(s->svc), sid);
    json_t *o = x ? frt_api_session_json(s->svc, x) : NULL;
    frt_service_unlock(s->svc);
    if (!o) {
        char msg[160];
        snprintf(msg, sizeof msg, "No session '%s'", sid);
        return send_fail(s, c, 404, "session_not_found", "session_id", msg);
    }
    if (ckpts) {
        json_t *l = json_object();
        json_object_set(l, "data", json_object_get(o, "checkpoints"));
        json_object_set_new(l, "object", json_string("list"));
        json_decref(o);
        o = l;
    }
    return answer_listing(s, c, o);
}

static enum MHD_Result handle_models(frt_server *s, struct MHD_Connection *c, const char *one)
{
    const frt_engine_facts *f = frt_service_facts(s->svc);
    if (one && strcmp(one, f->model_id)) {
        char msg[200];
        snprintf(msg, sizeof msg, "The model '%.120s' does not exist", one);
        return send_fail(s, c, 404, "model_not_found", "model", msg);
    }
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(f->model_id));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(s->created));
    json_object_set_new(m, "owned_by", json_string("frt"));
    json_t *x = json_object();
    json_object_set_new(x, "backend", json_string(f->backend));
    json_object_set_new(x, "max_seq", json_integer(f->max_seq));
    json_object_set_new(x, "prefill_chunk", json_integer(f->prefill_chunk));
    json_object_set_new(x, "vocab_size", json_integer(f->vocab_size));
    json_object_set_new(m, "frt", x);
    if (one) return answer_listing(s, c, m);
    json_t *o = json_object(), *data = json_array();
    json_array_append_new(data, m);
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return answer_listing(s, c, o);
}

static void http_snapshot(frt_server *s, frt_http_stats *h)
{
    pthread_mutex_lock(&s->qmu);
    *h = s->http;
    h->queue_depth = s->qlen;
    h->running = s->running != NULL;
    pthread_mutex_unlock(&s->qmu);
    h->uptime_s = frt_service_now() - s->t_start;
}

static enum MHD_Result handle_health(frt_server *s, struct MHD_Connection *c)
{
    frt_http_stats h;
    http_snapshot(s, &h);
    const frt_engine_facts *f = frt_service_facts(s->svc);
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("ok"));
    json_object_set_new(o, "model", json_string(f->model_id));
    json_object_set_new(o, "backend", json_string(f->backend));
    json_object_set_new(o, "queue_depth", json_integer(h.queue_depth));
    json_object_set_new(o, "running", json_boolean(h.running));
    frt_service_lock(s->svc);
    json_object_set_new(o, "sessions", json_integer(frt_service_sessions(s->svc)->n));
    frt_service_unlock(s->svc);
    json_object_set_new(o, "uptime_s", json_real(h.uptime_s));
    return answer_listing(s, c, o);
}

static enum MHD_Result handle_metrics(frt_server *s, struct MHD_Connection *c)
{
    frt_http_stats h;
    http_snapshot(s, &h);
    frt_service_lock(s->svc);
    char *text = frt_api_metrics_text(s->svc, &h);
    frt_service_unlock(s->svc);
    if (!text) return MHD_NO;
    return send_text(s, c, 200, "text/plain; version=0.0.4", text, 0);
}

/* Splits "/v1/a/b/c" into at most 5 segments (in place in buf). */
static int split_path(const char *url, char *buf, size_t cap, char **seg, int max)
{
    snprintf(buf, cap, "%s", url);
    int n = 0;
    for (char *p = buf; *p && n <= max;) {
        while (*p == '/') *p++ = 0;
        if (!*p) break;
        seg[n++] = p;
        while (*p && *p != '/') p++;
    }
    return n;
}

static enum MHD_Result route(frt_server *s, struct MHD_Connection *c, const char *url, const char *method, conn *cc)
{
    char buf[512], *seg[6] = {0};
    int n = strlen(url) < sizeof buf ? split_path(url, buf, sizeof buf, seg, 5) : -1;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST"), del = !strcmp(method, "DELETE");
#define IS(i, str) (n > (i) && !strcmp(seg[i], str))
    int known = 0;
    if (n == 1 && IS(0, "health")) {
        known = 1;
        if (get) return handle_health(s, c);
    } else if (n == 1 && IS(0, "metrics")) {
        known = 1;
        if (get) return handle_metrics(s, c);
    } else if (IS(0, "v1")) {
        if (n == 2 && IS(1, "models")) {
            known = 1;
            if (get) return handle_models(s, c, NULL);
        } else if (n == 3 && IS(1, "models")) {
            known = 1;
            if (get) return handle_models(s, c, seg[2]);
        } else if (n == 2 && IS(1, "completions")) {
            known = 1;
            if (post) return handle_completion(s, c, cc, 0);
        } else if (n == 3 && IS(1, "chat") && IS(2, "completions")) {
            known = 1;
            if (post) return handle_completion(s, c, cc, 1);
        } else if (n == 2 && IS(1, "sessions")) {
            known = 1;
            if (post) return handle_sessions_post(s, c, cc);
            if (get) {
                frt_service_lock(s->svc);
                json_t *o = frt_api_sessions_json(s->svc);
                frt_service_unlock(s->svc);
                return answer_listing(s, c, o);
            }
        } else if (n == 3 && IS(1, "sessions")) {
            known = 1;
            if (get) return handle_get_session(s, c, seg[2], 0);
            if (del) {
                job *j = job_new(s, JOB_SESSION_DELETE);
                if (!j) return MHD_NO;
                snprintf(j->id, sizeof j->id, "%s", seg[2]);
                return run_simple(s, c, j);
            }
        } else if (n == 4 && IS(1, "sessions") && (IS(3, "fork") || IS(3, "checkpoints") || IS(3, "rollback"))) {
            known = 1;
            if (post) return handle_session_op(s, c, cc, seg[2], seg[3]);
            if (get && IS(3, "checkpoints")) return handle_get_session(s, c, seg[2], 1);
        } else if (n == 2 && IS(1, "capsules")) {
            known = 1;
            if (get) {
                frt_service_lock(s->svc);
                json_t *o = frt_api_capsules_json(s->svc);
                frt_service_unlock(s->svc);
                return answer_listing(s, c, o);
            }
        } else if ((n == 3 || (n == 4 && (IS(3, "pin") || IS(3, "unpin")))) && IS(1, "capsules")) {
            known = 1;
            uint64_t id = frt_api_capsule_id(seg[2]);
            int ok_method = n == 4 ? post : (get || del);
            if (ok_method && !id) {
                char msg[160];
                snprintf(msg, sizeof msg, "No capsule '%.100s' (capsule ids look like cap-12)", seg[2]);
                return send_fail(s, c, 404, "capsule_not_found", "capsule_id", msg);
            }
            if (n == 3 && get) {
                frt_service_lock(s->svc);
                const frt_cap *k = frt_registry_get(frt_service_registry(s->svc), id);
                json_t *o = k ? frt_api_capsule_json(s->svc, k) : NULL;
                frt_service_unlock(s->svc);
                if (o) return answer_listing(s, c, o);
                return send_fail(s, c, 404, "capsule_not_found", "capsule_id", "No such capsule");
            }
            if (ok_method) {
                job *j = job_new(s, n == 3 ? JOB_CAPSULE_DELETE : IS(3, "pin") ? JOB_CAPSULE_PIN : JOB_CAPSULE_UNPIN);
                if (!j) return MHD_NO;
                j->capsule = id;
                return run_simple(s, c, j);
            }
        }
    }
#undef IS
    if (known) {
        char msg[160];
        snprintf(msg, sizeof msg, "Method %.16s is not allowed on %.100s", method, url);
        return send_fail(s, c, 405, "method_not_allowed", NULL, msg);
    }
    char msg[300];
    snprintf(msg, sizeof msg, "Unknown endpoint: %.16s %.200s", method, url);
    return send_fail(s, c, 404, "unknown_url", NULL, msg);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    frt_server *s = cls;
    conn *cc = *con_cls;
    if (!cc) {
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body_bytes) {
            /* answered before the body is read (curl's Expect: 100-continue stops there) */
            cc->too_large = 1;
            char msg[128];
            snprintf(msg, sizeof msg, "The request body is larger than %zu bytes", s->p.max_body_bytes);
            return send_fail(s, c, 413, "request_too_large", NULL, msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cc->too_large) {
            if (cc->len + *upload_size > s->p.max_body_bytes) {
                cc->too_large = 1;
                free(cc->body);
                cc->body = NULL;
                cc->len = cc->cap = 0;
            } else {
                if (cc->len + *upload_size + 1 > cc->cap) {
                    size_t nc = cc->cap ? cc->cap : 4096;
                    while (nc < cc->len + *upload_size + 1) nc *= 2;
                    char *p = realloc(cc->body, nc);
                    if (!p) return MHD_NO;
                    cc->body = p;
                    cc->cap = nc;
                }
                memcpy(cc->body + cc->len, upload, *upload_size);
                cc->len += *upload_size;
                cc->body[cc->len] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "The request body is larger than %zu bytes", s->p.max_body_bytes);
        return send_fail(s, c, 413, "request_too_large", NULL, msg);
    }
    return route(s, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    conn *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    frt_server *s = cls;
    if (!s->p.log) return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    s->p.log(s->p.log_user, line);
}

/* ---- lifecycle ---------------------------------------------------------------------------------- */

int frt_server_start(frt_engine *engine, const frt_server_params *p, frt_server **out)
{
    frt_server_params d = frt_server_default_params();
    if (!p) p = &d;
    if (!engine || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: NULL argument");
    if (p->port < 0 || p->port > 65535 || p->queue_size < 1 || p->max_body_bytes < 1 || p->max_connections < 1 ||
        p->displace_tier < 0 || p->displace_tier > 2)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: bad parameters");
    const char *host = p->host && *p->host ? p->host : "127.0.0.1";
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    int ipv6 = 0;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)p->port);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)p->port);
        ipv6 = 1;
    } else {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(host, NULL, &hints, &res) || !res)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: cannot resolve host '%s'", host);
        memcpy(a4, res->ai_addr, sizeof *a4);
        a4->sin_port = htons((uint16_t)p->port);
        freeaddrinfo(res);
    }

    frt_server *s = calloc(1, sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "server");
    s->p = *p;
    s->p.host = NULL;
    s->p.capsule_dir = NULL;
    s->e = engine;
    s->t_start = frt_service_now();
    s->created = (long long)time(NULL);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    frt_service_params sp = frt_service_default_params();
    memcpy(sp.budget, p->budget_bytes, sizeof sp.budget);
    sp.capsule_dir = p->capsule_dir;
    sp.displace_tier = p->displace_tier;
    sp.auto_capsules = p->auto_capsules;
    int rc = frt_service_create(engine, &sp, &s->svc);
    if (rc) {
        pthread_mutex_destroy(&s->qmu);
        pthread_cond_destroy(&s->qcv);
        free(s);
        return rc;
    }
    if (pthread_create(&s->engine, NULL, engine_main, s)) {
        frt_server_stop(s);
        return frt_error(FRT_ERR_BACKEND, "server: cannot start the engine thread");
    }
    s->engine_started = 1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
                     (ipv6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                            mhd_log, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
    if (!s->d) {
        frt_server_stop(s);
        return frt_error(FRT_ERR_IO, "server: cannot listen on %s:%d (address in use?)", host, p->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : p->port;
    logf_(s, "listening on http://%s%s%s:%d (model %s, backend %s)", ipv6 ? "[" : "", host, ipv6 ? "]" : "",
          s->port, engine->facts.model_id, engine->facts.backend);
    *out = s;
    return 0;
}

void frt_server_stop(frt_server *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->qmu);
    s->stopping = 1;
    if (s->running) s->running->cancel = 1;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    if (s->engine_started) pthread_join(s->engine, NULL);
    if (s->d) MHD_stop_daemon(s->d);
    frt_service_free(s->svc);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s);
}
