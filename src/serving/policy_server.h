/*
 * policy_server.h - the policy server (docs/policy-server.md): openpi's
 * websocket policy protocol, GET /healthz and POST /v1/policy/infer on one
 * port, on libwebsockets, over a policy service (policy_service.h). One
 * service thread runs the event loop and the inferences (one at a time).
 */
#ifndef FRT_SERVING_POLICY_SERVER_H
#define FRT_SERVING_POLICY_SERVER_H

#include "serving/policy_service.h"

#include <stddef.h>

typedef struct frt_policy_server frt_policy_server;

typedef struct frt_policy_server_params {
    const char *host;        /* bind address ("127.0.0.1") */
    int port;                /* 0: any free port (frt_policy_server_port) */
    const char *api_key;     /* NULL: none; else "Authorization: Api-Key K" (or "Bearer K") on every request
                                but GET /healthz */
    const char *cors_origin; /* NULL: a request with an Origin header is refused (403); "*" or one origin */
    size_t max_body_bytes;   /* websocket message / POST body limit */
    int max_connections;     /* websocket sessions at once; more get 503 */
    int conn_timeout_s;      /* a message (or an HTTP request) must be complete this long after its first
                                byte, else the connection is closed; idle sessions are kept; 0: no deadline */
    void (*log)(void *user, const char *line); /* optional: one line per event */
    void *log_user;
} frt_policy_server_params;

/* 127.0.0.1:8000, no key, no Origin, 8 MiB, 64 sessions, 10 s (frt_server_default_params' limits). */
frt_policy_server_params frt_policy_server_default_params(void);

/* Binds and starts serving SVC (borrowed: it must outlive the server).
 * *out on success only (frt_policy_server_stop). The parameters' strings
 * are copied. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, a bad limit),
 * FRT_ERR_IO (the address cannot be bound), FRT_ERR_OUT_OF_MEMORY. */
int frt_policy_server_start(frt_policy_service *svc, const frt_policy_server_params *p, frt_policy_server **out);

/* The bound port. */
int frt_policy_server_port(const frt_policy_server *s);

/* Stops the loop, closes every connection, frees; NULL is a no-op. */
void frt_policy_server_stop(frt_policy_server *s);

#endif
