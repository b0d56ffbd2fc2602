/*
 * policy_server.c - the policy server on libwebsockets (policy_server.h,
 * docs/policy-server.md). One protocol handles both the HTTP requests
 * (/healthz, /v1/policy/infer) and the websocket sessions; a session's
 * replies wait in a per-connection queue until the socket is writable.
 * openpi's server (serving/websocket_policy_server.py) was read for the
 * conversation; the code is frt's own.
 */
#include "serving/policy_server.h"

#include "frt/status.h"

#include <jansson.h>
#include <libwebsockets.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One frame or HTTP body waiting to be written; LWS_PRE bytes of headroom. */
typedef struct outmsg {
    struct outmsg *next;
    int text;             /* a text frame (an error), closed with 1011 after it */
    double t_request;     /* when its request was complete (ms); < 0 for none */
    size_t len;
    unsigned char buf[];  /* LWS_PRE + len */
} outmsg;

/* Per connection (websocket) or per HTTP transaction. */
typedef struct conn {
    unsigned char *in; /* the message or body being received */
    size_t in_len, in_cap;
    int too_big;       /* the message passed the limit: the rest is dropped */
    outmsg *head, *tail;
    double prev_total_ms; /* -1 before the first reply is written */
    int http_post;        /* a POST /v1/policy/infer transaction */
    int http_status;
    int counted;          /* a websocket session in s->sessions */
} conn;

struct frt_policy_server {
    struct lws_context *ctx;
    pthread_t thread;
    volatile int stop;
    int port, sessions;
    frt_policy_service *svc;
    frt_policy_server_params p;
    char *host, *api_key, *cors_origin;
    char *metadata;
    size_t metadata_len;
};

frt_policy_server_params frt_policy_server_default_params(void)
{
    return (frt_policy_server_params){"127.0.0.1", 8000, NULL, NULL, 8u << 20, 64, 10, NULL, NULL};
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void logf_(frt_policy_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(frt_policy_server *s, const char *fmt, ...)
{
    if (!s->p.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_user, line);
}

static frt_policy_server *server_of(struct lws *wsi) { return lws_context_user(lws_get_context(wsi)); }

/* ---- checks ----------------------------------------------------------------- */

static int const_eq(const char *a, size_t al, const char *b, size_t bl)
{
    unsigned char d = al != bl;
    for (size_t i = 0; i < al && i < bl; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* "Api-Key K" or "Bearer K" with the server's key (always when none is set). */
static int authorized(frt_policy_server *s, struct lws *wsi)
{
    if (!s->api_key) return 1;
    char h[1100];
    int n = lws_hdr_copy(wsi, h, sizeof h, WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n <= 0) return 0;
    const char *k = !strncmp(h, "Api-Key ", 8) ? h + 8 : !strncmp(h, "Bearer ", 7) ? h + 7 : NULL;
    return k && const_eq(k, strlen(k), s->api_key, strlen(s->api_key));
}

/* No Origin (a robot, curl), or the one --cors-origin allows. */
static int origin_ok(frt_policy_server *s, struct lws *wsi)
{
    char o[512];
    if (lws_hdr_copy(wsi, o, sizeof o, WSI_TOKEN_ORIGIN) <= 0) return 1;
    return s->cors_origin && (!strcmp(s->cors_origin, "*") || !strcmp(s->cors_origin, o));
}

/* 0 when the request may go on, else the HTTP status to refuse it with. */
static int gate(frt_policy_server *s, struct lws *wsi)
{
    if (!origin_ok(s, wsi)) return 403;
    if (!authorized(s, wsi)) return 401;
    return 0;
}

/* ---- the outgoing queue ------------------------------------------------------ */

static int enqueue(struct lws *wsi, conn *c, const void *data, size_t len, int text, double t_request)
{
    outmsg *m = malloc(sizeof *m + LWS_PRE + len);
    if (!m) return -1;
    m->next = NULL;
    m->text = text;
    m->t_request = t_request;
    m->len = len;
    memcpy(m->buf + LWS_PRE, data, len);
    if (c->tail) c->tail->next = m;
    else c->head = m;
    c->tail = m;
    lws_callback_on_writable(wsi);
    return 0;
}

static void conn_free(conn *c)
{
    while (c->head) {
        outmsg *n = c->head->next;
        free(c->head);
        c->head = n;
    }
    c->tail = NULL;
    free(c->in);
    c->in = NULL;
    c->in_len = c->in_cap = 0;
}

/* Appends a received piece; marks too_big past the limit. */
static int take_piece(frt_policy_server *s, conn *c, const void *in, size_t len)
{
    if (c->too_big || c->in_len + len > s->p.max_body_bytes) return c->too_big = 1, 0;
    if (c->in_len + len > c->in_cap) {
        size_t cap = c->in_cap ? c->in_cap : 65536;
        while (cap < c->in_len + len) cap *= 2;
        unsigned char *n = realloc(c->in, cap);
        if (!n) return -1;
        c->in = n;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_len, in, len);
    c->in_len += len;
    return 0;
}

/* ---- one message ------------------------------------------------------------ */

/* Runs a control message or an inference of O; *out its reply as msgpack
 * or JSON (NULL when memory ran out). T0: when the message was complete. */
static int answer(frt_policy_server *s, const frt_pobs *o, int json, double t0, double prev_total_ms, char **out,
                  size_t *len)
{
    if (frt_policy_service_is_ctrl(o)) {
        frt_policy_ctrl_reply cr;
        FRT_TRY(frt_policy_service_ctrl(s->svc, o, &cr));
        *out = json ? frt_policy_ctrl_json(&cr, len) : frt_policy_ctrl_msgpack(&cr, len);
        frt_policy_ctrl_reply_clear(&cr);
        return 0;
    }
    frt_policy_reply r;
    FRT_TRY(frt_policy_service_infer(s->svc, o, &r));
    double ms = now_ms() - t0;
    *out = json ? frt_policy_reply_json(&r, ms, len) : frt_policy_reply_msgpack(&r, ms, prev_total_ms, len);
    free(r.actions);
    return 0;
}

/* ---- websocket ------------------------------------------------------------ */

static int ws_error(struct lws *wsi, conn *c, const char *what)
{
    char line[1024];
    snprintf(line, sizeof line, "frt: %s", what);
    logf_(server_of(wsi), "websocket: %s", line);
    return enqueue(wsi, c, line, strlen(line), 1, -1);
}

/* One complete message: a control message or an inference. */
static int ws_message(frt_policy_server *s, struct lws *wsi, conn *c)
{
    double t0 = now_ms();
    frt_pobs o;
    if (c->too_big) {
        char m[128];
        snprintf(m, sizeof m, "the message is larger than the limit of %zu bytes (--max-body-mb)",
                 s->p.max_body_bytes);
        return ws_error(wsi, c, m);
    }
    if (frt_pobs_parse_msgpack(c->in, c->in_len, &o) < 0) return ws_error(wsi, c, frt_last_error());
    char *out = NULL;
    size_t len = 0;
    int rc = answer(s, &o, 0, t0, c->prev_total_ms, &out, &len);
    frt_pobs_free(&o);
    if (rc < 0) return ws_error(wsi, c, frt_last_error());
    if (!out) return ws_error(wsi, c, "out of memory");
    rc = enqueue(wsi, c, out, len, 0, t0);
    free(out);
    return rc;
}

static int ws_receive(frt_policy_server *s, struct lws *wsi, conn *c, const void *in, size_t len)
{
    /* the deadline: a message must be complete within conn_timeout_s of its first piece */
    if (c->in_len == 0 && !c->too_big && s->p.conn_timeout_s)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, s->p.conn_timeout_s);
    if (take_piece(s, c, in, len) < 0) return ws_error(wsi, c, "out of memory");
    if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi)) {
        if (c->too_big) { /* refuse as soon as the limit is passed */
            c->in_len = 0;
            return c->head && c->tail->text ? 0 : ws_message(s, wsi, c);
        }
        return 0;
    }
    int rc = c->head && c->tail->text ? 0 : ws_message(s, wsi, c); /* after an error nothing more is read */
    c->in_len = 0;
    c->too_big = 0;
    lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0); /* an idle session between messages is kept */
    return rc;
}

/* Writes the head of the queue; after an error frame the close with 1011. */
static int ws_writeable(struct lws *wsi, conn *c)
{
    outmsg *m = c->head;
    if (!m) return 0;
    int n = lws_write(wsi, m->buf + LWS_PRE, m->len, m->text ? LWS_WRITE_TEXT : LWS_WRITE_BINARY);
    if (n < (int)m->len) return -1;
    if (m->t_request >= 0) c->prev_total_ms = now_ms() - m->t_request;
    int text = m->text;
    c->head = m->next;
    if (!c->head) c->tail = NULL;
    free(m);
    if (text) {
        static const char reason[] = "error in the previous frame";
        lws_close_reason(wsi, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, (unsigned char *)reason, sizeof reason - 1);
        return -1;
    }
    if (c->head) lws_callback_on_writable(wsi);
    return 0;
}

/* ---- HTTP ---------------------------------------------------------------- */

/* Queues BODY as the reply and writes the headers. */
static int http_reply(struct lws *wsi, conn *c, int status, const char *ctype, const char *body, size_t len)
{
    unsigned char hb[LWS_PRE + 1024], *start = hb + LWS_PRE, *p = start, *end = hb + sizeof hb - 1;
    c->http_status = status;
    if (lws_add_http_common_headers(wsi, (unsigned int)status, ctype, len, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    return enqueue(wsi, c, body, len, 0, -1);
}

static int http_error(struct lws *wsi, conn *c, int status, const char *msg)
{
    json_t *j = json_pack("{s:{s:s, s:s}}", "error", "message", msg, "type",
                          status >= 500 ? "server_error" : "invalid_request_error");
    char *b = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    logf_(server_of(wsi), "POST /v1/policy/infer: %d %s", status, msg);
    int rc = b ? http_reply(wsi, c, status, "application/json", b, strlen(b)) : -1;
    free(b);
    return rc;
}

static int status_of(int rc)
{
    return rc == FRT_ERR_INVALID_ARGUMENT || rc == FRT_ERR_OUT_OF_RANGE || rc == FRT_ERR_MISMATCH ||
                   rc == FRT_ERR_NOT_FOUND
               ? 400
               : 500;
}

/* The whole JSON body is in: parse, run, reply. */
static int http_infer(frt_policy_server *s, struct lws *wsi, conn *c)
{
    double t0 = now_ms();
    frt_pobs o;
    if (c->too_big) return http_error(wsi, c, 413, "the body is larger than --max-body-mb");
    if (frt_pobs_parse_json((const char *)c->in, c->in_len, &o) < 0) return http_error(wsi, c, 400, frt_last_error());
    char *out = NULL;
    size_t len = 0;
    int rc = answer(s, &o, 1, t0, -1, &out, &len);
    frt_pobs_free(&o);
    if (rc < 0) return http_error(wsi, c, status_of(rc), frt_last_error());
    if (!out) return http_error(wsi, c, 500, "out of memory");
    rc = http_reply(wsi, c, 200, "application/json", out, len);
    free(out);
    return rc;
}

/* Whether the request's URI has query parameters (libwebsockets hands
 * the path without them): no endpoint takes one, so a request with one is
 * refused rather than served as if it had none. */
static int has_query(struct lws *wsi) { return lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS) > 0; }

/* A new HTTP request: PATH is its URI. */
static int http_request(frt_policy_server *s, struct lws *wsi, conn *c, const char *path)
{
    conn_free(c); /* a kept-alive connection's next transaction starts clean */
    c->http_post = c->too_big = c->http_status = 0;
    int is_post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
    int is_get = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
    if (has_query(wsi)) return http_error(wsi, c, 400, "query parameters are not supported (no endpoint takes one)");
    if (!strcmp(path, "/healthz")) return is_get ? http_reply(wsi, c, 200, "text/plain", "OK\n", 3)
                                                 : http_error(wsi, c, 405, "GET /healthz");
    if (strcmp(path, "/v1/policy/infer")) return http_error(wsi, c, 404, "no such path (POST /v1/policy/infer, "
                                                            "GET /healthz, or a websocket)");
    if (!is_post) return http_error(wsi, c, 405, "POST /v1/policy/infer");
    int g = gate(s, wsi);
    if (g) return http_error(wsi, c, g, g == 401 ? "missing or wrong API key" : "Origin not allowed");
    char ct[128] = "";
    lws_hdr_copy(wsi, ct, sizeof ct, WSI_TOKEN_HTTP_CONTENT_TYPE);
    if (strncmp(ct, "application/json", 16)) return http_error(wsi, c, 415, "Content-Type must be application/json");
    char cl[32] = "";
    /* an oversized body is read and dropped, then answered 413 (a client that sends it whole sees the answer) */
    if (lws_hdr_copy(wsi, cl, sizeof cl, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0 &&
        strtoull(cl, NULL, 10) > s->p.max_body_bytes)
        c->too_big = 1;
    c->http_post = 1;
    return 0;
}

static int http_writeable(struct lws *wsi, conn *c)
{
    outmsg *m = c->head;
    if (!m) return 0;
    int n = lws_write(wsi, m->buf + LWS_PRE, m->len, LWS_WRITE_HTTP_FINAL);
    c->head = m->next;
    if (!c->head) c->tail = NULL;
    free(m);
    if (n < 0) return -1;
    /* an error reply ends the connection (its body may be unread) */
    if (c->http_status != 200 || lws_http_transaction_completed(wsi)) return -1;
    return 0;
}

/* ---- the callback ---------------------------------------------------------- */

static int on_upgrade(frt_policy_server *s, struct lws *wsi)
{
    int g = gate(s, wsi);
    if (!g && has_query(wsi)) g = 400; /* no query parameter is read */
    if (!g && s->sessions >= s->p.max_connections) g = 503;
    if (!g) return 0;
    logf_(s, "websocket upgrade refused: %d", g);
    /* written whole here: lws_return_http_status answers HTTP/1.0 at this stage */
    char r[160];
    int n = snprintf(r, sizeof r, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", g,
                     g == 400   ? "Bad Request"
                     : g == 401 ? "Unauthorized"
                     : g == 403 ? "Forbidden"
                                : "Service Unavailable");
    unsigned char buf[LWS_PRE + 160];
    memcpy(buf + LWS_PRE, r, (size_t)n);
    lws_write(wsi, buf + LWS_PRE, (size_t)n, LWS_WRITE_HTTP_HEADERS);
    return 1;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    frt_policy_server *s = server_of(wsi);
    conn *c = user;
    switch (reason) {
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: return on_upgrade(s, wsi);
    case LWS_CALLBACK_ESTABLISHED:
        c->prev_total_ms = -1;
        c->counted = 1;
        s->sessions++;
        return enqueue(wsi, c, s->metadata, s->metadata_len, 0, -1);
    case LWS_CALLBACK_RECEIVE: return ws_receive(s, wsi, c, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE: return ws_writeable(wsi, c);
    case LWS_CALLBACK_CLOSED:
        if (c->counted) s->sessions--;
        c->counted = 0;
        conn_free(c);
        return 0;
    case LWS_CALLBACK_HTTP: return http_request(s, wsi, c, in ? (const char *)in : "");
    case LWS_CALLBACK_HTTP_BODY: return c->http_post && take_piece(s, c, in, len) < 0 ? -1 : 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: return c->http_post ? http_infer(s, wsi, c) : 0;
    case LWS_CALLBACK_HTTP_WRITEABLE: return http_writeable(wsi, c);
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL: conn_free(c); return 0;
    default: return 0;
    }
}

static const struct lws_protocols PROTOCOLS[] = {
    {"frt-policy", callback, sizeof(conn), 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- start / stop ---------------------------------------------------------- */

static void *loop(void *arg)
{
    frt_policy_server *s = arg;
    while (!s->stop)
        if (lws_service(s->ctx, 0) < 0) break;
    return NULL;
}

static void server_free(frt_policy_server *s)
{
    if (s->ctx) lws_context_destroy(s->ctx);
    free(s->host);
    free(s->api_key);
    free(s->cors_origin);
    free(s->metadata);
    free(s);
}

static char *dup_or_null(const char *x, int *fail)
{
    char *d = x ? strdup(x) : NULL;
    if (x && !d) *fail = 1;
    return d;
}

int frt_policy_server_start(frt_policy_service *svc, const frt_policy_server_params *p, frt_policy_server **out)
{
    if (!svc || !p || !out || !p->host || p->max_body_bytes == 0 || p->max_connections < 1 || p->conn_timeout_s < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy server: NULL or a bad limit");
    frt_policy_server *s = calloc(1, sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "policy server: out of memory");
    int fail = 0;
    s->svc = svc;
    s->p = *p;
    s->host = dup_or_null(p->host, &fail);
    s->api_key = dup_or_null(p->api_key, &fail);
    s->cors_origin = dup_or_null(p->cors_origin, &fail);
    s->metadata = frt_policy_service_metadata(svc, &s->metadata_len);
    if (fail || !s->metadata) {
        server_free(s);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "policy server: out of memory");
    }
    lws_set_log_level(LLL_ERR, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = p->port;
    info.iface = s->host;
    info.protocols = PROTOCOLS;
    info.user = s;
    info.timeout_secs = p->conn_timeout_s ? (unsigned)p->conn_timeout_s : 0;
    s->ctx = lws_create_context(&info);
    struct lws_vhost *vh = s->ctx ? lws_get_vhost_by_name(s->ctx, "default") : NULL;
    s->port = vh ? lws_get_vhost_listen_port(vh) : -1;
    if (!s->ctx || s->port <= 0) {
        server_free(s);
        return frt_error(FRT_ERR_IO, "policy server: cannot listen on %s:%d", p->host, p->port);
    }
    if (pthread_create(&s->thread, NULL, loop, s)) {
        server_free(s);
        return frt_error(FRT_ERR_IO, "policy server: cannot start its thread");
    }
    *out = s;
    return 0;
}

int frt_policy_server_port(const frt_policy_server *s) { return s ? s->port : -1; }

void frt_policy_server_stop(frt_policy_server *s)
{
    if (!s) return;
    s->stop = 1;
    lws_cancel_service(s->ctx);
    pthread_join(s->thread, NULL);
    server_free(s);
}
