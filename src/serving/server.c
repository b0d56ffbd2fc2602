/*
 * serving/server.c - the OpenAI-compatible HTTP server (libmicrohttpd): the
 * routes, the refusals made before a body is read (Host, Origin, API key,
 * Content-Type: the predicates are in server_checks.c; body size), ids in
 * URLs, and the answers. The job queue and the engine thread are in
 * server_jobs.c; every JSON object is built in api.c / api_answers.c.
 *
 * Threads: MHD runs one thread per connection; those threads parse and
 * validate requests, answer listings under the service lock, and queue
 * everything that touches the model as a job. A full queue answers 503 with
 * Retry-After; so does a job still waiting in the queue at its deadline
 * (queue_timeout_s). Slow clients: each connection times out after
 * conn_timeout_s of inactivity, and one address holds at most
 * max_connections_per_ip of the max_connections, so /health stays
 * answerable for everyone else.
 *
 * Streaming: the connection thread waits until the engine has validated and
 * planned the request (so errors still get their 4xx status), then answers
 * 200 text/event-stream and reads SSE chunks from the job as the engine
 * appends them. When the client goes away, MHD frees the response: the free
 * callback cancels the job, and the engine stops at the next token boundary
 * (the session stays at its last committed token).
 */
#include "serving/server_int.h"

#include "util/error.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

typedef struct conn {
    char *body;
    size_t len, cap;
    int too_large;
} conn;

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
    p.max_connections_per_ip = 16;
    p.conn_timeout_s = 10;
    p.max_tokens = 4096;
    p.max_request_s = 300;
    p.queue_timeout_s = 60;
    p.cartridge_cache = 4;
    return p;
}

int frt_server_port(const frt_server *s) { return s ? s->port : 0; }

/* ---- answers ----------------------------------------------------------------------------- */

static void count_status(frt_server *s, int status)
{
    pthread_mutex_lock(&s->qmu);
    if (status >= 200 && status < 600) s->http.responses[status / 100]++;
    if (status == 401) s->http.rejected_auth++;
    pthread_mutex_unlock(&s->qmu);
}

/* Sends text (steals it). retry_after > 0 adds Retry-After (seconds). */
static enum MHD_Result send_text(frt_server *s, struct MHD_Connection *c, int status, const char *type, char *text,
                                 int retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    frt_server_cors_headers(s, c, r);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return ret;
}

/* Sends a JSON body (steals it). */
static enum MHD_Result send_json(frt_server *s, struct MHD_Connection *c, int status, json_t *body, int retry_after)
{
    char *text = frt_api_dumps(body);
    if (!text) return MHD_NO;
    return send_text(s, c, status, "application/json", text, retry_after);
}

static enum MHD_Result send_error(frt_server *s, struct MHD_Connection *c, const frt_api_error *e)
{
    return send_json(s, c, e->status, frt_api_error_json(e), e->status == 503 ? 1 : 0);
}

static enum MHD_Result send_fail(frt_server *s, struct MHD_Connection *c, int status, const char *code,
                                 const char *param, const char *msg)
{
    frt_api_error e;
    frt_api_fail(&e, status, code, param, "%s", msg);
    return send_error(s, c, &e);
}

/* Waits until the job is done (or started, for a stream). 0, or -1 when it
 * was still queued at its queue deadline and has been taken off the queue. */
static int wait_job(frt_server *s, frt_job *j, int want_started)
{
    double deadline = s->p.queue_timeout_s > 0 ? j->t_arrival + s->p.queue_timeout_s : 0;
    pthread_mutex_lock(&j->mu);
    while (!j->done && !(want_started && j->started)) {
        if (!deadline) {
            pthread_cond_wait(&j->cv, &j->mu);
            continue;
        }
        double now = frt_service_now();
        if (now >= deadline) {
            pthread_mutex_unlock(&j->mu);
            if (frt_job_withdraw(s, j)) return -1;
            deadline = 0; /* it runs: wait for it */
            pthread_mutex_lock(&j->mu);
            continue;
        }
        double w = deadline - now < 1.0 ? deadline - now : 1.0;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = (long long)ts.tv_nsec + (long long)(w * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static enum MHD_Result send_queue_timeout(frt_server *s, struct MHD_Connection *c)
{
    char msg[160];
    snprintf(msg, sizeof msg, "The request waited %.0f s in the queue behind other requests; retry later",
             s->p.queue_timeout_s);
    frt_api_error e;
    frt_api_fail(&e, 503, "queue_timeout", NULL, "%s", msg);
    int ra = (int)(s->p.queue_timeout_s < 1 ? 1 : s->p.queue_timeout_s);
    return send_json(s, c, 503, frt_api_error_json(&e), ra);
}

/* Waits for a job's answer and sends it (drops the caller's reference). */
static enum MHD_Result wait_and_send(frt_server *s, struct MHD_Connection *c, frt_job *j)
{
    if (wait_job(s, j, 0)) {
        frt_job_unref(j);
        return send_queue_timeout(s, c);
    }
    pthread_mutex_lock(&j->mu);
    int status = j->status ? j->status : 500;
    json_t *body = j->body;
    j->body = NULL;
    pthread_mutex_unlock(&j->mu);
    if (!body) {
        frt_api_error e;
        frt_api_fail(&e, 500, "internal_error", NULL, "no answer");
        body = frt_api_error_json(&e);
    }
    enum MHD_Result r = send_json(s, c, status, body, status == 503 ? 1 : 0);
    frt_job_unref(j);
    return r;
}

static enum MHD_Result run_simple(frt_server *s, struct MHD_Connection *c, frt_job *j)
{
    if (frt_job_submit(s, j)) {
        frt_job_unref(j);
        return send_fail(s, c, 503, "server_busy", NULL, "The request queue is full; retry later");
    }
    return wait_and_send(s, c, j);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    frt_job *j = cls;
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
    frt_job *j = cls;
    j->cancel = 1;
    frt_job_unref(j);
}

/* ---- endpoints ---------------------------------------------------------------------------- */

static enum MHD_Result handle_completion(frt_server *s, struct MHD_Connection *c, conn *cc, int chat)
{
    frt_api_error err;
    const frt_engine_facts *f = frt_service_facts(s->svc);
    frt_job *j = frt_job_new(s, FRT_JOB_COMPLETION);
    if (!j) return MHD_NO;
    /* absent max_tokens: 16 for completions (OpenAI's default), the rest of
     * the context for chat; both clamped to the context and the server cap */
    int dflt = chat ? (s->p.max_tokens > 0 && s->p.max_tokens < f->max_seq ? s->p.max_tokens : f->max_seq) : 16;
    if (frt_api_parse_completion(cc->body ? cc->body : "", cc->len, chat, dflt, &j->rq, &err)) {
        frt_job_unref(j);
        return send_error(s, c, &err);
    }
    j->ident.chat = chat;
    pthread_mutex_lock(&s->qmu);
    unsigned long long k = ++s->counter;
    pthread_mutex_unlock(&s->qmu);
    snprintf(j->ident.id, sizeof j->ident.id, "%s-%llu", chat ? "chatcmpl" : "cmpl", k);
    j->ident.created = (long long)time(NULL);
    snprintf(j->ident.model, sizeof j->ident.model, "%s", j->rq.model[0] ? j->rq.model : f->model_id);
    if (!j->rq.stream) return run_simple(s, c, j);
    if (frt_job_submit(s, j)) {
        frt_job_unref(j);
        return send_fail(s, c, 503, "server_busy", NULL, "The request queue is full; retry later");
    }
    /* streaming: wait for validation + planning, or an early error */
    if (wait_job(s, j, 1)) {
        frt_job_unref(j);
        return send_queue_timeout(s, c);
    }
    pthread_mutex_lock(&j->mu);
    int started = j->started;
    pthread_mutex_unlock(&j->mu);
    if (!started) return wait_and_send(s, c, j);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, j, sse_free);
    if (!r) {
        j->cancel = 1;
        frt_job_unref(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    frt_server_cors_headers(s, c, r);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* the response (and its reference to j) lives until sent or aborted */
    count_status(s, 200);
    return ret;
}

static enum MHD_Result handle_sessions_post(frt_server *s, struct MHD_Connection *c, conn *cc)
{
    frt_api_error err;
    frt_job *j = frt_job_new(s, FRT_JOB_SESSION_CREATE);
    if (!j) return MHD_NO;
    if (frt_api_parse_session_create(cc->body ? cc->body : "", cc->len, &j->create, &err)) {
        frt_job_unref(j);
        return send_error(s, c, &err);
    }
    return run_simple(s, c, j);
}

static enum MHD_Result handle_session_op(frt_server *s, struct MHD_Connection *c, conn *cc, const char *sid,
                                         const char *op)
{
    frt_api_error err;
    frt_api_session_verb verb = !strcmp(op, "fork")          ? FRT_API_FORK
                                : !strcmp(op, "checkpoints") ? FRT_API_CHECKPOINT
                                                             : FRT_API_ROLLBACK;
    frt_job *j = frt_job_new(s, verb == FRT_API_FORK ? FRT_JOB_FORK
                                : verb == FRT_API_CHECKPOINT ? FRT_JOB_CHECKPOINT
                                                             : FRT_JOB_ROLLBACK);
    if (!j) return MHD_NO;
    if (frt_api_parse_session_op(cc->body ? cc->body : "", cc->len, verb, &j->op, &err)) {
        frt_job_unref(j);
        return send_error(s, c, &err);
    }
    snprintf(j->id, sizeof j->id, "%s", sid); /* checked by the router */
    return run_simple(s, c, j);
}

static enum MHD_Result handle_get_session(frt_server *s, struct MHD_Connection *c, const char *sid, int ckpts)
{
    frt_service_lock(s->svc);
    const frt_session *x = frt_sessions_find(frt_service_sessions(s->svc), sid);
    json_t *o = !x ? NULL : ckpts ? frt_api_checkpoints_json(s->svc, x) : frt_api_session_json(s->svc, x);
    frt_service_unlock(s->svc);
    if (o) return send_json(s, c, 200, o, 0);
    char msg[160];
    snprintf(msg, sizeof msg, "No session '%s'", sid);
    return send_fail(s, c, 404, "session_not_found", "session_id", msg);
}

/* POST /tokenize, /detokenize (api_tokens.h): on the engine thread, which
 * owns the tokenizer. */
static enum MHD_Result handle_tokens(frt_server *s, struct MHD_Connection *c, conn *cc, int detokenize)
{
    frt_api_error err;
    frt_job *j = frt_job_new(s, FRT_JOB_TOKENS);
    if (!j) return MHD_NO;
    if (frt_api_parse_tokens(cc->body ? cc->body : "", cc->len, detokenize, frt_service_facts(s->svc)->vocab_size,
                             &j->tokens, &err)) {
        frt_job_unref(j);
        return send_error(s, c, &err);
    }
    return run_simple(s, c, j);
}

static enum MHD_Result handle_models(frt_server *s, struct MHD_Connection *c, const char *one)
{
    const frt_engine_facts *f = frt_service_facts(s->svc);
    if (one && strcmp(one, f->model_id)) {
        char msg[200];
        snprintf(msg, sizeof msg, "The model '%.120s' does not exist", one);
        return send_fail(s, c, 404, "model_not_found", "model", msg);
    }
    return send_json(s, c, 200, one ? frt_api_model_json(f, s->created) : frt_api_models_json(f, s->created), 0);
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
    frt_service_lock(s->svc);
    json_t *o = frt_api_health_json(s->svc, &h);
    frt_service_unlock(s->svc);
    return send_json(s, c, 200, o, 0);
}

static enum MHD_Result handle_metrics(frt_server *s, struct MHD_Connection *c)
{
    frt_http_stats h;
    http_snapshot(s, &h);
    frt_service_lock(s->svc);
    char *text = frt_api_metrics_text(s->svc, &h);
    frt_service_unlock(s->svc);
    if (text && s->carts) {
        char *ct = frt_server_cartridge_metrics(s);
        char *all = NULL;
        if (ct && asprintf(&all, "%s%s", text, ct) < 0) all = NULL;
        free(ct);
        free(text);
        text = all;
    }
    if (!text) return MHD_NO;
    return send_text(s, c, 200, "text/plain; version=0.0.4", text, 0);
}

static enum MHD_Result handle_listing(frt_server *s, struct MHD_Connection *c, int capsules)
{
    frt_service_lock(s->svc);
    json_t *o = capsules ? frt_api_capsules_json(s->svc) : frt_api_sessions_json(s->svc);
    frt_service_unlock(s->svc);
    return send_json(s, c, 200, o, 0);
}

/* GET or DELETE /v1/capsules/{id} (verb NULL), POST .../pin or .../unpin. */
static enum MHD_Result handle_capsule(frt_server *s, struct MHD_Connection *c, const char *name, const char *verb,
                                      int get)
{
    uint64_t id = frt_api_capsule_id(name);
    if (!id) {
        char msg[160];
        snprintf(msg, sizeof msg, "No capsule '%.100s' (capsule ids look like cap-12)", name);
        return send_fail(s, c, 404, "capsule_not_found", "capsule_id", msg);
    }
    if (!verb && get) {
        frt_service_lock(s->svc);
        const frt_cap *k = frt_registry_get(frt_service_registry(s->svc), id);
        json_t *o = k ? frt_api_capsule_json(s->svc, k) : NULL;
        frt_service_unlock(s->svc);
        if (o) return send_json(s, c, 200, o, 0);
        return send_fail(s, c, 404, "capsule_not_found", "capsule_id", "No such capsule");
    }
    frt_job *j = frt_job_new(s, !verb                   ? FRT_JOB_CAPSULE_DELETE
                                : !strcmp(verb, "pin") ? FRT_JOB_CAPSULE_PIN
                                                       : FRT_JOB_CAPSULE_UNPIN);
    if (!j) return MHD_NO;
    j->capsule = id;
    return run_simple(s, c, j);
}

/* ---- routing ------------------------------------------------------------------------------ */

/* The first query parameter's name into *cls (libmicrohttpd's iterator). */
static enum MHD_Result first_query_key(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    *(const char **)cls = key;
    return MHD_NO;
}

/* Splits "/v1/a/b/c" into at most max segments (in place in buf). */
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
    frt_api_error err;
    /* no endpoint takes a query parameter: one is refused, never ignored */
    const char *qkey = NULL;
    if (MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, first_query_key, &qkey) > 0 && qkey) {
        char msg[300];
        snprintf(msg, sizeof msg, "Unsupported query parameter '%.100s' in %.16s %.100s (frt serve takes none)", qkey,
                 method, url);
        return send_fail(s, c, 400, "unsupported_parameter", qkey, msg);
    }
#define IS(i, str) (n > (i) && !strcmp(seg[i], str))
/* GET, DELETE and capsule pin / unpin take no body: a member is refused, never ignored */
#define NO_BODY()                                                                                                  \
    do {                                                                                                           \
        char where_[160];                                                                                          \
        snprintf(where_, sizeof where_, "the body of %.16s %.100s (it takes none)", method, url);                  \
        if (frt_api_parse_no_body(cc->body ? cc->body : "", cc->len, where_, &err)) return send_error(s, c, &err); \
    } while (0)
    int known = 0;
    if (n == 1 && IS(0, "health")) {
        known = 1;
        if (get) {
            NO_BODY();
            return handle_health(s, c);
        }
    } else if (n == 1 && IS(0, "metrics")) {
        known = 1;
        if (get) {
            NO_BODY();
            return handle_metrics(s, c);
        }
    } else if (n == 1 && (IS(0, "tokenize") || IS(0, "detokenize"))) {
        known = 1;
        if (post) return handle_tokens(s, c, cc, IS(0, "detokenize"));
    } else if (IS(0, "v1")) {
        if ((n == 2 || n == 3) && IS(1, "models")) {
            known = 1;
            if (get) {
                NO_BODY();
                return handle_models(s, c, n == 3 ? seg[2] : NULL);
            }
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
                NO_BODY();
                return handle_listing(s, c, 0);
            }
        } else if ((n == 3 || (n == 4 && (IS(3, "fork") || IS(3, "checkpoints") || IS(3, "rollback")))) &&
                   IS(1, "sessions")) {
            known = 1;
            int ok = n == 3 ? get || del : post || (get && IS(3, "checkpoints"));
            /* an id from the URL is refused when malformed, never truncated */
            if (ok && frt_api_check_url_id(seg[2], "session_id", &err)) return send_error(s, c, &err);
            if (ok && !post) NO_BODY();
            if (n == 3 && get) return handle_get_session(s, c, seg[2], 0);
            if (n == 3 && del) {
                frt_job *j = frt_job_new(s, FRT_JOB_SESSION_DELETE);
                if (!j) return MHD_NO;
                snprintf(j->id, sizeof j->id, "%s", seg[2]);
                return run_simple(s, c, j);
            }
            if (n == 4 && post) return handle_session_op(s, c, cc, seg[2], seg[3]);
            if (n == 4 && get) return handle_get_session(s, c, seg[2], 1);
        } else if (n == 2 && IS(1, "capsules")) {
            known = 1;
            if (get) {
                NO_BODY();
                return handle_listing(s, c, 1);
            }
        } else if ((n == 3 || (n == 4 && (IS(3, "pin") || IS(3, "unpin")))) && IS(1, "capsules")) {
            known = 1;
            if (n == 4 ? post : (get || del)) {
                NO_BODY();
                return handle_capsule(s, c, seg[2], n == 4 ? seg[3] : NULL, get);
            }
        }
    }
#undef NO_BODY
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

/* ---- the checks before a request is read ------------------------------------------------ */

/* The answer to a CORS preflight (OPTIONS). */
static enum MHD_Result send_preflight(frt_server *s, struct MHD_Connection *c)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    frt_server_cors_headers(s, c, r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    count_status(s, 204);
    return ret;
}

/* Checks made once the headers are in, before the body is read. MHD_YES to
 * go on (nothing queued), or the result of the refusal it queued in *ret. */
static int refuse_early(frt_server *s, struct MHD_Connection *c, const char *url, const char *method,
                        enum MHD_Result *ret)
{
    if (!frt_server_host_allowed(s, c)) {
        *ret = send_fail(s, c, 403, "host_not_allowed", NULL,
                         "This server answers only requests for localhost (see --allowed-host)");
        return 1;
    }
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin && !frt_server_origin_allowed(s, origin)) {
        *ret = send_fail(s, c, 403, "origin_not_allowed", NULL,
                         "Cross-origin requests are refused (see --cors-origin)");
        return 1;
    }
    if (!strcmp(method, "OPTIONS") && origin) {
        *ret = send_preflight(s, c);
        return 1;
    }
    if (strcmp(url, "/health") && !frt_server_authorized(s, c)) {
        *ret = send_fail(s, c, 401, "invalid_api_key", NULL,
                         "Incorrect or missing API key: send the header 'Authorization: Bearer KEY'");
        return 1;
    }
    if (!strcmp(method, "POST") && !frt_server_json_content_type(c)) {
        *ret = send_fail(s, c, 415, "unsupported_media_type", NULL,
                         "POST bodies must be sent with 'Content-Type: application/json'");
        return 1;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->p.max_body_bytes) {
        /* answered before the body is read (curl's Expect: 100-continue stops there) */
        char msg[128];
        snprintf(msg, sizeof msg, "The request body is larger than %zu bytes", s->p.max_body_bytes);
        *ret = send_fail(s, c, 413, "request_too_large", NULL, msg);
        return 1;
    }
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    frt_server *s = cls;
    conn *cc = *con_cls;
    if (!cc) {
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
        enum MHD_Result ret = MHD_YES;
        if (refuse_early(s, c, url, method, &ret)) cc->too_large = -1; /* answered: ignore any body */
        return ret;
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
    if (cc->too_large < 0) return MHD_YES; /* the early answer is queued */
    if (cc->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "The request body is larger than %zu bytes", s->p.max_body_bytes);
        return send_fail(s, c, 413, "request_too_large", NULL, msg);
    }
    return route(s, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
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

/* ---- lifecycle ---------------------------------------------------------------------------- */

int frt_server_start(frt_engine *engine, const frt_server_params *p, frt_server **out)
{
    frt_server_params d = frt_server_default_params();
    if (!p) p = &d;
    if (!engine || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: NULL argument");
    if (p->port < 0 || p->port > 65535 || p->queue_size < 1 || p->max_body_bytes < 1 || p->max_connections < 1 ||
        p->displace_tier < 0 || p->displace_tier > 2)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: bad parameters");
    if (p->max_connections_per_ip < 0 || p->conn_timeout_s < 0 || p->max_tokens < 0 || !(p->max_request_s >= 0) ||
        !(p->queue_timeout_s >= 0) || p->n_allowed_hosts < 0 || (p->n_allowed_hosts && !p->allowed_hosts))
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "server: limits (connections per IP, timeouts, max_tokens) must not be negative");
    if (p->api_key && !*p->api_key) return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: the API key is empty");
    if (p->cors_origin && !*p->cors_origin)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: the CORS origin is empty");
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
    s->p.api_key = s->p.cors_origin = NULL;
    s->p.allowed_hosts = NULL;
    s->loopback = frt_host_is_loopback(host);
    int oom = !(s->bind_host = strdup(host)) || (p->api_key && !(s->api_key = strdup(p->api_key))) ||
              (p->cors_origin && !(s->cors_origin = strdup(p->cors_origin))) ||
              (p->n_allowed_hosts && !(s->allowed_hosts = calloc((size_t)p->n_allowed_hosts, sizeof(char *))));
    for (int i = 0; !oom && i < p->n_allowed_hosts; i++, s->n_allowed_hosts++)
        oom = !(s->allowed_hosts[i] = strdup(p->allowed_hosts[i] ? p->allowed_hosts[i] : ""));
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
    sp.max_tokens_cap = p->max_tokens;
    sp.max_request_s = p->max_request_s;
    int rc = oom ? frt_error(FRT_ERR_OUT_OF_MEMORY, "server") : frt_service_create(engine, &sp, &s->svc);
    if (!rc) rc = frt_server_cartridges_open(s, p);
    if (rc) {
        frt_server_stop(s);
        return rc;
    }
    if (pthread_create(&s->engine, NULL, frt_server_engine_main, s)) {
        frt_server_stop(s);
        return frt_error(FRT_ERR_BACKEND, "server: cannot start the engine thread");
    }
    s->engine_started = 1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
                     (ipv6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                            mhd_log, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)p->max_connections_per_ip,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)p->conn_timeout_s, MHD_OPTION_END);
    if (!s->d) {
        frt_server_stop(s);
        return frt_error(FRT_ERR_IO, "server: cannot listen on %s:%d (address in use?)", host, p->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : p->port;
    frt_server_logf(s, "listening on http://%s%s%s:%d (model %s, backend %s)", ipv6 ? "[" : "", host, ipv6 ? "]" : "",
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
    frt_cart_store_free(s->carts);
    free(s->api_key);
    free(s->bind_host);
    free(s->cors_origin);
    for (int i = 0; i < s->n_allowed_hosts; i++) free(s->allowed_hosts[i]);
    free(s->allowed_hosts);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s);
}
