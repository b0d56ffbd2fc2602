/*
 * serve_policy.c - frt serve --policy DIR: the policy server
 * (src/serving/policy_server.c; docs/policy-server.md) with the host,
 * port, API key, Origin and limits options frt serve already has; alone,
 * or beside the LLM server in the same process (--policy-port).
 */
#include "cli.h"
#include "serve_cli.h"

#include "serving/policy_server.h"
#include "serving/policy_share.h"

#include "frt/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct serve_policy {
    frt_model *m;
    frt_policy_service *svc;
    frt_policy_server *srv;
    serve_policy_share share; /* zero: the policy's own context */
};

/* Whose context the policy runs in, and its graph captures so far. */
static void say_context(const serve_policy *p, const char *when)
{
    const unsigned long long n = (unsigned long long)frt_context_capture_count(frt_model_context(p->m));
    if (!p->share.context) {
        fprintf(stderr, "frt serve: policy context: its own (%llu graph captures %s)\n", n, when);
        return;
    }
    frt_turn_lock_stats st[FRT_TURN_SIDES];
    frt_turn_lock_stats_get(p->share.lock, st);
    char side[2][160];
    for (int i = 0; i < FRT_TURN_SIDES; i++)
        snprintf(side[i], sizeof side[i], "%s %llu turns, %llu waited (mean %.3f, longest %.3f ms)",
                 i == FRT_TURN_LLM ? "LLM" : "policy", (unsigned long long)st[i].turns,
                 (unsigned long long)st[i].waited, st[i].waited ? st[i].wait_ms_total / (double)st[i].waited : 0.0,
                 st[i].wait_ms_max);
    fprintf(stderr, "frt serve: policy context: shared with the LLM (%llu graph captures %s; %s; %s)\n", n, when,
            side[FRT_TURN_LLM], side[FRT_TURN_POLICY]);
}

void frt_serve_policy_close(serve_policy *p)
{
    if (!p) return;
    if (p->srv) {
        frt_policy_server_stop(p->srv);
        say_context(p, "at stop");
    }
    frt_policy_service_free(p->svc);
    frt_model_free(p->m);
    free(p);
}

/* Starts the server of P->svc on PORT with SP's host, key, Origin and limits. */
static int start(const char *cmd, serve_policy *p, const frt_server_params *sp, int port, int quiet,
                 const char *port_file)
{
    frt_policy_server_params pp = frt_policy_server_default_params();
    pp.host = sp->host;
    pp.port = port;
    pp.api_key = sp->api_key;
    pp.cors_origin = sp->cors_origin;
    pp.max_body_bytes = sp->max_body_bytes;
    pp.max_connections = sp->max_connections;
    pp.conn_timeout_s = sp->conn_timeout_s;
    if (!quiet) {
        pp.log = frt_serve_log_line;
        pp.log_user = (void *)" --policy";
    }
    int rc = frt_policy_server_start(p->svc, &pp, &p->srv);
    if (rc) return frt_cli_fail(cmd, rc);
    if (port_file && frt_serve_write_port_file(cmd, port_file, frt_policy_server_port(p->srv))) return 1;
    fprintf(stderr, "frt serve: policy server listening on ws://%s:%d (POST /v1/policy/infer, GET /healthz)\n",
            sp->host, frt_policy_server_port(p->srv));
    say_context(p, "at start");
    return 0;
}

int frt_serve_policy_host_given(const serve_policy_opts *o)
{
    return o->critic || o->record || o->advantage || !isnan(o->value_threshold) || !isnan(o->cfg_beta) ||
           o->max_chunks || o->episode_timeout_s != 0;
}

/* The rollout host's and CFG's settings of the service from the options. */
static void host_params(const serve_policy_opts *o, frt_policy_service_params *sv)
{
    sv->critic = o->critic;
    sv->value_stop = !isnan(o->value_threshold);
    sv->value_threshold = sv->value_stop ? o->value_threshold : 0.0f;
    sv->max_chunks = o->max_chunks;
    sv->episode_timeout_s = o->episode_timeout_s;
    sv->record_dir = o->record;
    sv->cfg = !isnan(o->cfg_beta);
    sv->cfg_beta = sv->cfg ? o->cfg_beta : 1.0f;
    sv->advantage_positive = !o->advantage || strcmp(o->advantage, "negative") != 0;
}

int frt_serve_policy_open(const char *cmd, const serve_policy_opts *o, const frt_server_params *sp, int port,
                          const char *port_file, int backend, int threads, int quiet, int probe,
                          const serve_policy_share *share, serve_policy **out)
{
    frt_policy_service_params sv = {.dir = o->dir, .robot = o->robot, .tokenizer = o->tokenizer,
                                    .norm_stats = o->norm_stats, .default_prompt = o->default_prompt,
                                    .delta_actions = -1, .discrete_state = -1};
    host_params(o, &sv);
    sv.device_lock = share ? share->lock : NULL;
    int rc = o->delta_actions ? frt_policy_delta_parse(o->delta_actions, &sv.delta_actions) : 0;
    if (rc == 0 && o->discrete_state) rc = frt_policy_delta_parse(o->discrete_state, &sv.discrete_state);
    if (rc) return frt_cli_fail(cmd, rc);
    serve_policy *p = calloc(1, sizeof *p);
    if (!p) return frt_cli_fail(cmd, FRT_ERR_OUT_OF_MEMORY);
    frt_model_params mp = frt_model_default_params();
    mp.backend = (frt_backend)backend;
    mp.n_threads = threads;
    mp.weight_dtype = o->dtype && !strcmp(o->dtype, "fp8") ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
    mp.gemm_autotune = o->autotune, mp.gemm_tune_file = o->tune_file;
    if (share) {
        mp.context = share->context;
        p->share = *share;
    }
    const char *note = NULL;
    rc = frt_cli_load_model(cmd, o->dir, &mp, quiet, &p->m);
    if (rc == 0) rc = frt_policy_service_create(p->m, &sv, &note, &p->svc);
    int ret = rc ? frt_cli_fail(cmd, rc) : 0;
    if (ret == 0 && note) fprintf(stderr, "frt %s: %s\n", cmd, note);
    if (ret == 0 && probe) printf("frt serve: policy ready: %s\n", o->dir);
    if (ret == 0 && !probe) ret = start(cmd, p, sp, port, quiet, port_file);
    if (ret) {
        frt_serve_policy_close(p);
        return ret;
    }
    *out = p;
    return 0;
}

int frt_serve_policy(const char *cmd, const serve_policy_opts *o, const frt_server_params *sp, int backend,
                     int threads, int quiet, int probe, const char *port_file)
{
    serve_policy *p = NULL;
    frt_serve_block_signals();
    int rc = frt_serve_policy_open(cmd, o, sp, sp->port, port_file, backend, threads, quiet, probe, NULL, &p);
    if (rc) return rc;
    if (!probe) frt_serve_wait();
    frt_serve_policy_close(p);
    return 0;
}
