/*
 * cmd_serve.c - frt serve: the OpenAI-compatible server with sessions,
 * fork, rollback and the capsule registry (docs/serving.md).
 */
#include "cli.h"

#include "frt/serving.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: frt serve [-m MODEL_DIR] [--backend cpu|cuda] [--host 127.0.0.1] [--port 8000]\n"
            "                 [--capsule-dir DIR] [--device-budget-mb N] [--host-budget-mb N] [--disk-budget-mb N]\n"
            "                 [OPTIONS]\n\n"
            "Serves MODEL_DIR (default: the demo model models/frt-demo) over HTTP: /v1/models,\n"
            "/v1/completions, /v1/chat/completions (stream or not), /v1/sessions (fork, checkpoints,\n"
            "rollback), /v1/capsules, /health, /metrics. Binds 127.0.0.1 unless --host says otherwise.\n\n"
            "  -m, --model DIR         checkpoint directory\n"
            "  --backend cpu|cuda      (cpu)\n"
            "  --host ADDR             bind address (127.0.0.1)\n"
            "  --port N                TCP port; 0 = any free port (8000)\n"
            "  --port-file PATH        write the bound port there once listening\n"
            "  --capsule-dir DIR       disk tier + its SQLite index (kept across restarts); none = no disk tier\n"
            "  --device-budget-mb N    capsule bytes in device memory (1024)\n"
            "  --host-budget-mb N      capsule bytes in pinned host memory (8192)\n"
            "  --disk-budget-mb N      capsule bytes on disk (65536)\n"
            "  --no-auto-capsules      do not snapshot cold-exact prefixes automatically\n"
            "  --queue N               queued requests before 503 (16)\n"
            "  --max-body-mb N         larger request bodies get 413 (8)\n"
            "  --max-tokens N          most tokens one request may generate; 0 = no cap (4096)\n"
            "  --request-timeout-s S   wall time per request; past it generation stops; 0 = none (300)\n"
            "  --queue-timeout-s S     a request queued this long gets 503 + Retry-After; 0 = none (60)\n"
            "  --conn-timeout-s S      close a connection idle this long; 0 = never (10)\n"
            "  --max-conns N           concurrent connections (64)\n"
            "  --max-conns-per-ip N    concurrent connections from one address; 0 = no limit (16)\n"
            "  --api-key KEY           require 'Authorization: Bearer KEY' (all but /health); $FRT_API_KEY too\n"
            "  --cors-origin ORIGIN    the browser Origin allowed (or *); others get 403 (none)\n"
            "  --allowed-host NAME     a Host name accepted on a loopback bind besides localhost (repeatable)\n"
            "  --max-seq N             state capacity in tokens (model default)\n"
            "  --prefill-chunk N       prefill chunk C, a multiple of 64 (model default)\n"
            "  --threads N             CPU threads (all cores)\n"
            "  --quiet                 no request log on stderr\n"
            "  --probe                 load the model, print what would be served, exit\n"
            "  --engine model|fake     fake: a deterministic toy model for tests (model)\n"
            "  --fake-delay-us N       fake engine: sleep per decode step and prefill chunk (0)\n"
            "  --fake-eos-every N      fake engine: ~1 in N greedy tokens ends the turn (0 = never)\n"
            "  --fake-no-chatml        fake engine: its chat template is not ChatML\n");
}

static void log_line(void *user, const char *line)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%H:%M:%S", &tm);
    fprintf(stderr, "[%s] frt serve: %s\n", ts, line);
}

static int is_model_dir(const char *dir)
{
    char p[PATH_MAX + 16];
    struct stat sb;
    snprintf(p, sizeof p, "%.*s/config.json", PATH_MAX - 1, dir);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The shipped demo model: $FRT_DEMO_MODEL, next to the binary (../models,
 * models), or ./models/frt-demo. */
static int find_demo_model(char *out, size_t cap)
{
    const char *env = getenv("FRT_DEMO_MODEL");
    if (env && is_model_dir(env)) {
        snprintf(out, cap, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *rel[] = {"../models/frt-demo", "models/frt-demo", "../share/frt/models/frt-demo"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%.*s/%s", PATH_MAX - 64, exe, rel[i]);
            if (is_model_dir(p)) {
                char *real = realpath(p, NULL);
                snprintf(out, cap, "%s", real ? real : p);
                free(real);
                return 0;
            }
        }
    }
    if (is_model_dir("models/frt-demo")) {
        snprintf(out, cap, "models/frt-demo");
        return 0;
    }
    return -1;
}

static int parse_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "frt %s: %s needs an integer in [%lld, %lld]\n", cmd, opt, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int frt_cmd_serve(int argc, char **argv)
{
    const char *cmd = argv[0], *model = NULL, *backend = "cpu", *port_file = NULL, *engine_kind = "model";
    frt_server_params sp = frt_server_default_params();
    frt_engine_fake_params fp = frt_engine_fake_default_params();
    long long max_seq = 0, chunk = 0, threads = 0, v = 0;
    const char *hosts[16];
    int n_hosts = 0;
    if (getenv("FRT_API_KEY") && *getenv("FRT_API_KEY")) sp.api_key = getenv("FRT_API_KEY");
    int quiet = 0, probe = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKES(name) (!strcmp(a, name) && (next || (fprintf(stderr, "frt %s: %s needs a value\n", cmd, name), 0)) && ++i)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--probe")) {
            probe = 1;
        } else if (!strcmp(a, "--no-auto-capsules")) {
            sp.auto_capsules = 0;
        } else if (!strcmp(a, "--fake-no-chatml")) {
            fp.chatml = 0;
        } else if (TAKES("-m") || (!strcmp(a, "--model") && next && ++i)) {
            model = next;
        } else if (TAKES("--backend")) {
            backend = next;
        } else if (TAKES("--host")) {
            sp.host = next;
        } else if (TAKES("--port")) {
            if (parse_int(cmd, a, next, 0, 65535, &v)) return 2;
            sp.port = (int)v;
        } else if (TAKES("--port-file")) {
            port_file = next;
        } else if (TAKES("--capsule-dir")) {
            sp.capsule_dir = next;
        } else if (TAKES("--device-budget-mb") || TAKES("--host-budget-mb") || TAKES("--disk-budget-mb")) {
            if (parse_int(cmd, a, next, 0, 1LL << 40, &v)) return 2;
            int t = a[2] == 'd' && a[3] == 'e' ? 0 : a[2] == 'h' ? 1 : 2;
            sp.budget_bytes[t] = (size_t)v << 20;
        } else if (TAKES("--queue")) {
            if (parse_int(cmd, a, next, 1, 100000, &v)) return 2;
            sp.queue_size = (int)v;
        } else if (TAKES("--max-body-mb")) {
            if (parse_int(cmd, a, next, 1, 4096, &v)) return 2;
            sp.max_body_bytes = (size_t)v << 20;
        } else if (TAKES("--max-tokens")) {
            if (parse_int(cmd, a, next, 0, 1 << 30, &v)) return 2;
            sp.max_tokens = (int)v;
        } else if (TAKES("--request-timeout-s") || TAKES("--queue-timeout-s")) {
            if (parse_int(cmd, a, next, 0, 1 << 24, &v)) return 2;
            if (a[2] == 'r') sp.max_request_s = (double)v;
            else sp.queue_timeout_s = (double)v;
        } else if (TAKES("--conn-timeout-s")) {
            if (parse_int(cmd, a, next, 0, 1 << 20, &v)) return 2;
            sp.conn_timeout_s = (int)v;
        } else if (TAKES("--max-conns")) {
            if (parse_int(cmd, a, next, 1, 100000, &v)) return 2;
            sp.max_connections = (int)v;
        } else if (TAKES("--max-conns-per-ip")) {
            if (parse_int(cmd, a, next, 0, 100000, &v)) return 2;
            sp.max_connections_per_ip = (int)v;
        } else if (TAKES("--api-key")) {
            if (!*next) {
                fprintf(stderr, "frt %s: --api-key is empty\n", cmd);
                return 2;
            }
            sp.api_key = next;
        } else if (TAKES("--cors-origin")) {
            sp.cors_origin = next;
        } else if (TAKES("--allowed-host")) {
            if (n_hosts == 16) {
                fprintf(stderr, "frt %s: at most 16 --allowed-host\n", cmd);
                return 2;
            }
            hosts[n_hosts++] = next;
        } else if (TAKES("--max-seq")) {
            if (parse_int(cmd, a, next, 1, 1 << 24, &max_seq)) return 2;
        } else if (TAKES("--prefill-chunk")) {
            if (parse_int(cmd, a, next, 1, 1 << 20, &chunk)) return 2;
        } else if (TAKES("--threads")) {
            if (parse_int(cmd, a, next, 0, 4096, &threads)) return 2;
        } else if (TAKES("--engine")) {
            engine_kind = next;
        } else if (TAKES("--fake-delay-us")) {
            if (parse_int(cmd, a, next, 0, 10000000, &v)) return 2;
            fp.delay_us = (int)v;
        } else if (TAKES("--fake-eos-every")) {
            if (parse_int(cmd, a, next, 0, 1 << 30, &v)) return 2;
            fp.eos_every = (int)v;
        } else {
            fprintf(stderr, "frt %s: unknown option '%s'\n\n", cmd, a);
            usage(stderr);
            return 2;
        }
#undef TAKES
    }

    frt_engine *engine = NULL;
    int rc;
    char dir[PATH_MAX];
    if (!strcmp(engine_kind, "fake")) {
        if (max_seq) fp.max_seq = (int)max_seq;
        if (chunk) fp.prefill_chunk = (int)chunk;
        rc = frt_engine_fake_create(&fp, &engine);
        if (rc) return frt_cli_fail(cmd, rc);
    } else if (!strcmp(engine_kind, "model")) {
        if (!model) {
            if (find_demo_model(dir, sizeof dir)) {
                fprintf(stderr,
                        "frt %s: no -m MODEL_DIR given and the demo model models/frt-demo was not found\n"
                        "(looked in $FRT_DEMO_MODEL, next to the frt binary and in ./models)\n",
                        cmd);
                return 1;
            }
            model = dir;
        }
        rc = frt_engine_model_open(model, backend, (int)max_seq, (int)chunk, (int)threads, &engine);
        if (rc) return frt_cli_fail(cmd, rc);
    } else {
        fprintf(stderr, "frt %s: --engine must be model or fake\n", cmd);
        return 2;
    }
    if (probe) {
        printf("frt serve: engine ready (%s): %s\n", engine_kind, model ? model : "fake");
        frt_engine_free(engine);
        return 0;
    }

    /* signals go to sigwait below; worker threads inherit the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!quiet) {
        sp.log = log_line;
        sp.log_user = NULL;
    }
    sp.allowed_hosts = hosts;
    sp.n_allowed_hosts = n_hosts;
    if (!sp.api_key && !frt_host_is_loopback(sp.host))
        fprintf(stderr, "frt %s: warning: binding %s (beyond loopback) without --api-key: anyone who can reach the "
                        "port can use the model and read every session\n",
                cmd, sp.host);
    frt_server *srv = NULL;
    rc = frt_server_start(engine, &sp, &srv);
    if (rc) {
        frt_engine_free(engine);
        return frt_cli_fail(cmd, rc);
    }
    if (port_file) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", frt_server_port(srv)) < 0 || fclose(f) || rename(tmp, port_file)) {
            fprintf(stderr, "frt %s: cannot write %s\n", cmd, port_file);
            frt_server_stop(srv);
            frt_engine_free(engine);
            return 1;
        }
    }
    if (quiet) fprintf(stderr, "frt serve: listening on http://%s:%d\n", sp.host, frt_server_port(srv));
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "frt serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    frt_server_stop(srv);
    frt_engine_free(engine);
    return 0;
}
