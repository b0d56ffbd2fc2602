/*
 * serve_policy.c - frt serve --policy DIR: the policy server
 * (src/serving/policy_server.c; docs/policy-server.md) with the host,
 * port, API key, Origin and limits options frt serve already has.
 */
#include "cli.h"
#include "serve_cli.h"

#include "serving/policy_server.h"

#include "frt/status.h"

#include <stdio.h>

/* Serves SVC until a signal. */
static int serve(const char *cmd, frt_policy_service *svc, const frt_server_params *sp, int quiet,
                 const char *port_file)
{
    frt_policy_server_params pp = frt_policy_server_default_params();
    pp.host = sp->host;
    pp.port = sp->port;
    pp.api_key = sp->api_key;
    pp.cors_origin = sp->cors_origin;
    pp.max_body_bytes = sp->max_body_bytes;
    pp.max_connections = sp->max_connections;
    pp.conn_timeout_s = sp->conn_timeout_s;
    if (!quiet) {
        pp.log = frt_serve_log_line;
        pp.log_user = (void *)" --policy";
    }
    frt_serve_block_signals();
    frt_policy_server *srv = NULL;
    int rc = frt_policy_server_start(svc, &pp, &srv);
    if (rc) return frt_cli_fail(cmd, rc);
    if (port_file && frt_serve_write_port_file(cmd, port_file, frt_policy_server_port(srv))) {
        frt_policy_server_stop(srv);
        return 1;
    }
    fprintf(stderr, "frt serve: policy server listening on ws://%s:%d (POST /v1/policy/infer, GET /healthz)\n",
            sp->host, frt_policy_server_port(srv));
    frt_serve_wait();
    frt_policy_server_stop(srv);
    return 0;
}

int frt_serve_policy(const char *cmd, const serve_policy_opts *o, const frt_server_params *sp, int backend,
                     int threads, int quiet, int probe, const char *port_file)
{
    frt_policy_service_params p = {o->dir, o->robot, o->tokenizer, o->norm_stats, o->default_prompt, -1, -1};
    int rc = o->delta_actions ? frt_policy_delta_parse(o->delta_actions, &p.delta_actions) : 0;
    if (rc == 0 && o->discrete_state) rc = frt_policy_delta_parse(o->discrete_state, &p.discrete_state);
    if (rc) return frt_cli_fail(cmd, rc);
    frt_model_params mp = frt_model_default_params();
    mp.backend = (frt_backend)backend;
    mp.n_threads = threads;
    frt_model *m = NULL;
    if ((rc = frt_cli_load_model(cmd, o->dir, &mp, quiet, &m))) return frt_cli_fail(cmd, rc);
    frt_policy_service *svc = NULL;
    const char *note = NULL;
    rc = frt_policy_service_create(m, &p, &note, &svc);
    if (rc) {
        frt_model_free(m);
        return frt_cli_fail(cmd, rc);
    }
    if (note) fprintf(stderr, "frt %s: %s\n", cmd, note);
    int ret = 0;
    if (probe) printf("frt serve: policy ready: %s\n", o->dir);
    else ret = serve(cmd, svc, sp, quiet, port_file);
    frt_policy_service_free(svc);
    frt_model_free(m);
    return ret;
}
