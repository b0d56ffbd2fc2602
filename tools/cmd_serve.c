/*
 * cmd_serve.c - frt serve: the OpenAI-compatible server with sessions,
 * fork, rollback and the capsule registry (docs/serving.md).
 */
#include "args.h"
#include "cli.h"
#include "serve_cli.h"

#include "frt/serving.h"
#include "serving/engine.h"
#include "serving/policy_share.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char about[] =
    "Serves MODEL_DIR over HTTP: /v1/models, /v1/completions, /v1/chat/completions (stream or\n"
    "not), /v1/sessions (fork, checkpoints, rollback), /v1/capsules, /health, /metrics. Binds\n"
    "127.0.0.1 unless --host says otherwise. The demo model is looked up in $FRT_DEMO_MODEL,\n"
    "next to the frt binary, under ../share/frt and in ./models.\n"
    "--policy DIR serves a Pi0 / Pi0.5 policy instead: openpi's websocket policy protocol,\n"
    "POST /v1/policy/infer and GET /healthz (docs/policy-server.md).\n";

void frt_serve_log_line(void *user, const char *line)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%H:%M:%S", &tm);
    fprintf(stderr, "[%s] frt serve%s: %s\n", ts, user ? (const char *)user : "", line);
}

/* Splits a comma-separated list held in buf (at most 1023 bytes, copied
 * from list) into out[0..max): the count, or -1 when too long or too many. */
static int split_commas(const char *list, char *buf, const char **out, int max)
{
    if (strlen(list) >= 1024) return -1;
    snprintf(buf, 1024, "%s", list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) return -1;
        out[n++] = t;
    }
    return n;
}

int frt_serve_write_port_file(const char *cmd, const char *path, int port)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) || rename(tmp, path)) {
        fprintf(stderr, "frt %s: cannot write %s\n", cmd, path);
        return 1;
    }
    return 0;
}

static sigset_t serve_signals;

void frt_serve_block_signals(void)
{
    sigemptyset(&serve_signals);
    sigaddset(&serve_signals, SIGINT);
    sigaddset(&serve_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &serve_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void frt_serve_wait(void)
{
    int sig = 0;
    sigwait(&serve_signals, &sig);
    fprintf(stderr, "frt serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
}

/* With --policy alone: the first option of the LLM server that was given
 * (the policy server would not use it), or NULL. ints and strs follow
 * int_names and str_names below, one entry each. */
static const char *llm_only_given(const frt_server_params *sp, const int *budget_mb, const int *ints,
                                  const char *const *strs)
{
    frt_server_params d = frt_server_default_params();
    static const char *const int_names[] = {"--max-seq",   "--prefill-chunk", "--branches",
                                            "--no-auto-capsules", "--fake-* / --parse-special-in-content",
                                            "--dtype",     "--kv-dtype",      "--autotune", "--lm-head-dtype"};
    static const char *const str_names[] = {"--allowed-host", "--capsule-key-file", "--cartridge-map", "--kv-scales",
                                            "--tune-file"};
    for (size_t i = 0; i < sizeof int_names / sizeof int_names[0]; i++)
        if (ints[i]) return int_names[i];
    for (size_t i = 0; i < sizeof str_names / sizeof str_names[0]; i++)
        if (strs[i]) return str_names[i];
    for (int t = 0; t < 3; t++)
        if ((size_t)budget_mb[t] << 20 != d.budget_bytes[t]) return "--device/host/disk-budget-mb";
    if (sp->capsule_dir) return "--capsule-dir";
    if (sp->cartridge_dir) return "--cartridge-dir";
    if (sp->cartridge_cache != d.cartridge_cache) return "--cartridge-cache";
    if (sp->queue_size != d.queue_size) return "--queue";
    if (sp->max_tokens != d.max_tokens) return "--max-tokens";
    if (sp->max_request_s != d.max_request_s) return "--request-timeout-s";
    if (sp->queue_timeout_s != d.queue_timeout_s) return "--queue-timeout-s";
    if (sp->max_connections_per_ip != d.max_connections_per_ip) return "--max-conns-per-ip";
    return NULL;
}

/* The LLM beside a policy (-m DIR --policy ... --policy-port): loaded
 * here rather than by frt_engine_model_open, so that the policy can be
 * loaded into its context; its engine (named after DIR's last component, as
 * frt_engine_model_open names it) takes turns with the policy through *lock
 * (src/serving/policy_share.h). On failure nothing is left allocated. */
static int open_shared_llm(const char *cmd, const char *dir, const frt_model_params *mp, int quiet, frt_model **llm,
                           frt_turn_lock **lock, frt_engine **engine)
{
    frt_engine *inner = NULL;
    int rc = frt_cli_load_model(cmd, dir, mp, quiet, llm);
    if (rc == 0) rc = frt_engine_model_create(*llm, &inner);
    if (rc == 0) {
        size_t end = strlen(dir), start;
        while (end > 1 && dir[end - 1] == '/') end--;
        for (start = end; start > 0 && dir[start - 1] != '/'; start--) {}
        snprintf(inner->facts.model_id, sizeof inner->facts.model_id, "%.*s", (int)(end - start), dir + start);
        rc = frt_turn_lock_create(lock);
        if (rc) frt_engine_free(inner);
    }
    if (rc == 0) rc = frt_engine_locked_create(inner, *lock, engine); /* takes inner, also on failure */
    if (rc == 0) return 0;
    frt_turn_lock_free(*lock);
    frt_model_free(*llm);
    *lock = NULL;
    *llm = NULL;
    return frt_cli_fail(cmd, rc);
}

/* Frees the engine, then the LLM it wraps and the turn lock (NULL when
 * frt_engine_model_open made the engine: it owns its model). */
static void free_llm(frt_engine *engine, frt_model *llm, frt_turn_lock *turns)
{
    frt_engine_free(engine);
    frt_model_free(llm);
    frt_turn_lock_free(turns);
}

int frt_cmd_serve(int argc, char **argv)
{
    const char *cmd = argv[0], *model = NULL, *port_file = NULL, *engine_kind = "model";
    frt_server_params sp = frt_server_default_params();
    frt_engine_fake_params fp = frt_engine_fake_default_params();
    int max_seq = 0, chunk = 0, threads = 0, branches = 1, quiet = 0, probe = 0, no_auto = 0, no_chatml = 0, no_tools = 0;
    int backend = FRT_ARG_BACKEND_AUTO, budget_mb[3], max_body_mb = (int)(sp.max_body_bytes >> 20);
    int req_timeout_s = (int)sp.max_request_s, queue_timeout_s = (int)sp.queue_timeout_s;
    const char *allowed_hosts = NULL, *capsule_key_file = NULL, *cartridge_map = NULL;
    const char *wdtype = "default", *lmdtype = "default", *kv_dtype = "default", *kv_scales = NULL, *tune_file = NULL;
    int autotune = 0;
    serve_policy_opts po = {.value_threshold = NAN, .cfg_beta = NAN};
    int policy_port = -1;
    const char *policy_port_file = NULL;
    if (getenv("FRT_API_KEY") && *getenv("FRT_API_KEY")) sp.api_key = getenv("FRT_API_KEY");
    for (int t = 0; t < 3; t++) budget_mb[t] = (int)(sp.budget_bytes[t] >> 20);
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &model, "DIR", "checkpoint directory (not with --engine fake)",
                .dflt = FRT_CLI_DEMO_MODEL_HELP),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the model runs"),
        FRT_OPT(0, "host", FRT_ARG_STR, &sp.host, "ADDR", "bind address"),
        FRT_OPT(0, "port", FRT_ARG_INT, &sp.port, "N", "TCP port; 0 = any free port", .min = 0, .max = 65535),
        FRT_OPT(0, "port-file", FRT_ARG_STR, &port_file, "PATH", "write the bound port there once listening",
                .dflt = ""),
        FRT_OPT(0, "capsule-dir", FRT_ARG_STR, &sp.capsule_dir, "DIR",
                "disk tier + its SQLite index (kept across restarts)", .dflt = "none: no disk tier"),
        FRT_OPT(0, "device-budget-mb", FRT_ARG_INT, &budget_mb[0], "N", "capsule MB in device memory", .min = 0,
                .max = 1 << 30),
        FRT_OPT(0, "host-budget-mb", FRT_ARG_INT, &budget_mb[1], "N", "capsule MB in pinned host memory", .min = 0,
                .max = 1 << 30),
        FRT_OPT(0, "disk-budget-mb", FRT_ARG_INT, &budget_mb[2], "N", "capsule MB on disk", .min = 0, .max = 1 << 30),
        FRT_OPT(0, "no-auto-capsules", FRT_ARG_FLAG, &no_auto, NULL, "do not snapshot cold-exact prefixes automatically"),
        FRT_OPT(0, "queue", FRT_ARG_INT, &sp.queue_size, "N", "queued requests before 503", .min = 1, .max = 100000),
        FRT_OPT(0, "max-body-mb", FRT_ARG_INT, &max_body_mb, "N", "larger request bodies get 413", .min = 1,
                .max = 4096),
        FRT_OPT(0, "max-tokens", FRT_ARG_INT, &sp.max_tokens, "N",
                "most tokens one request may generate (larger: 400); 0 = no cap", .min = 0, .max = 1 << 30),
        FRT_OPT(0, "request-timeout-s", FRT_ARG_INT, &req_timeout_s, "S",
                "wall time per request; past it generation stops (finish_reason length); 0 = none", .min = 0,
                .max = 1 << 24),
        FRT_OPT(0, "queue-timeout-s", FRT_ARG_INT, &queue_timeout_s, "S",
                "a request queued this long gets 503 + Retry-After; 0 = none", .min = 0, .max = 1 << 24),
        FRT_OPT(0, "conn-timeout-s", FRT_ARG_INT, &sp.conn_timeout_s, "S",
                "close a connection idle this long; 0 = never", .min = 0, .max = 1 << 20),
        FRT_OPT(0, "max-conns", FRT_ARG_INT, &sp.max_connections, "N", "concurrent connections", .min = 1,
                .max = 100000),
        FRT_OPT(0, "max-conns-per-ip", FRT_ARG_INT, &sp.max_connections_per_ip, "N",
                "concurrent connections from one address; 0 = no limit", .min = 0, .max = 100000),
        FRT_OPT(0, "api-key", FRT_ARG_STR, &sp.api_key, "KEY",
                "require 'Authorization: Bearer KEY' (all but /health); $FRT_API_KEY too", .dflt = "none"),
        FRT_OPT(0, "cors-origin", FRT_ARG_STR, &sp.cors_origin, "ORIGIN",
                "the browser Origin allowed (or *); others get 403", .dflt = "none"),
        FRT_OPT(0, "allowed-host", FRT_ARG_STR, &allowed_hosts, "NAMES",
                "comma-separated Host names accepted on a loopback bind besides localhost and the bind address",
                .dflt = "none"),
        FRT_OPT(0, "parse-special-in-content", FRT_ARG_FLAG, &sp.parse_special_in_content, NULL,
                "tokenize special-token text inside chat messages as control tokens, as transformers does "
                "(default: as text; docs/chat-templates.md)"),
        FRT_OPT(0, "capsule-key-file", FRT_ARG_STR, &capsule_key_file, "PATH",
                "a file of 16..1024 bytes: capsule files carry an HMAC-SHA256 under it and are checked",
                .dflt = "none: the capsule directory must be trusted"),
        FRT_OPT(0, "cartridge-dir", FRT_ARG_STR, &sp.cartridge_dir, "DIR",
                "serve the frt cartridges under DIR (registered at start in DIR/cartridges.sqlite)",
                .dflt = "none"),
        FRT_OPT(0, "cartridge-map", FRT_ARG_STR, &cartridge_map, "MODEL=ID,...",
                "requests with model MODEL that name no cartridge get cartridge ID", .dflt = "none"),
        FRT_OPT(0, "cartridge-cache", FRT_ARG_INT, &sp.cartridge_cache, "N",
                "cartridges kept loaded in host memory (LRU)", .min = 1, .max = 1024),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &max_seq, "N", "state capacity in tokens; 0 = the model's default",
                .min = 0, .max = 1 << 24),
        FRT_OPT(0, "prefill-chunk", FRT_ARG_INT, &chunk, "C", "prefill chunk, a multiple of 64; 0 = 256", .min = 0,
                .max = 1 << 20),
        FRT_OPT(0, "threads", FRT_ARG_INT, &threads, "N", "CPU threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_OPT(0, "branches", FRT_ARG_INT, &branches, "B",
                "branch slots of the live state: requests with n (or best_of) up to B fork one prefill into that "
                "many branches (docs/serving.md)",
                .min = 1, .max = 4096),
        FRT_CLI_OPT_DTYPE(&wdtype),
        FRT_CLI_OPT_LM_HEAD_DTYPE(&lmdtype),
        FRT_CLI_OPT_KV_DTYPE(&kv_dtype),
        FRT_CLI_OPT_KV_SCALES(&kv_scales),
        FRT_CLI_OPT_AUTOTUNE(&autotune),
        FRT_CLI_OPT_TUNE_FILE(&tune_file),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &quiet, NULL, "no request log on stderr"),
        FRT_OPT(0, "probe", FRT_ARG_FLAG, &probe, NULL, "load the model, print what would be served, exit"),
        FRT_OPT(0, "engine", FRT_ARG_CHOICE, &engine_kind, NULL, "fake: a deterministic toy model for tests",
                .choices = "model|fake"),
        FRT_OPT(0, "fake-delay-us", FRT_ARG_INT, &fp.delay_us, "N",
                "--engine fake: sleep per decode step and prefill chunk", .min = 0, .max = 10000000),
        FRT_OPT(0, "fake-eos-every", FRT_ARG_INT, &fp.eos_every, "N",
                "--engine fake: ~1 in N greedy tokens ends the turn; 0 = never", .min = 0, .max = 1 << 30),
        FRT_OPT(0, "fake-no-chatml", FRT_ARG_FLAG, &no_chatml, NULL, "--engine fake: it has no chat template"),
        FRT_OPT(0, "fake-no-tools", FRT_ARG_FLAG, &no_tools, NULL,
                "--engine fake: its chat template ignores tools, tool calls and chat_template_kwargs"),
        FRT_OPT(0, "fake-reply", FRT_ARG_STR, &fp.reply, "TEXT",
                "--engine fake: every completion generates TEXT, then <|im_end|>", .dflt = "the hashed tokens"),
        FRT_OPT(0, "policy", FRT_ARG_STR, &po.dir, "DIR",
                "serve this Pi0 / Pi0.5 policy (openpi's websocket protocol; docs/policy-server.md) instead of an LLM",
                .dflt = "none"),
        FRT_OPT(0, "robot", FRT_ARG_CHOICE, &po.robot, NULL, "--policy: the robot's keys and actions",
                .choices = "libero|droid|aloha", .dflt = "from DIR/assets/<asset>/"),
        FRT_OPT(0, "norm-stats", FRT_ARG_STR, &po.norm_stats, "FILE", "--policy: openpi's norm_stats.json",
                .dflt = "DIR/norm_stats.json, else DIR/assets/<asset>/norm_stats.json"),
        FRT_OPT(0, "tokenizer", FRT_ARG_STR, &po.tokenizer, "FILE", "--policy: PaliGemma's SentencePiece model",
                .dflt = "DIR/tokenizer.model"),
        FRT_OPT(0, "default-prompt", FRT_ARG_STR, &po.default_prompt, "TEXT",
                "--policy: the prompt of requests without one", .dflt = "none: a prompt is required"),
        FRT_OPT(0, "delta-actions", FRT_ARG_CHOICE, &po.delta_actions, NULL,
                "--policy: add the state to the delta joints (openpi's AbsoluteActions); auto: as openpi's configs",
                .choices = "auto|on|off"),
        FRT_OPT(0, "policy-port", FRT_ARG_INT, &policy_port, "N",
                "--policy beside the LLM server (-m MODEL, the demo model or --engine fake) in one process: the "
                "policy's port; 0 = any free port",
                .min = 0, .max = 65535, .dflt = "none: the policy alone on --port"),
        FRT_OPT(0, "policy-port-file", FRT_ARG_STR, &policy_port_file, "PATH",
                "with --policy-port: write the policy's bound port there once listening", .dflt = ""),
        FRT_OPT(0, "critic", FRT_ARG_STR, &po.critic, "FILE",
                "--policy: the value critic (.safetensors, docs/robot.md): replies carry its value in `values`",
                .dflt = "none"),
        FRT_OPT(0, "value-threshold", FRT_ARG_FLOAT, &po.value_threshold, "V",
                "--policy with --critic: stop the episode when a value is below V", .fmin = -1e30, .fmax = 1e30,
                .dflt = "none"),
        FRT_OPT(0, "max-chunks", FRT_ARG_INT, &po.max_chunks, "N", "--policy: stop an episode after N chunks",
                .min = 1, .max = 1 << 30, .dflt = "no limit"),
        FRT_OPT(0, "episode-timeout", FRT_ARG_DOUBLE, &po.episode_timeout_s, "S",
                "--policy: stop an episode S seconds after its first chunk", .fmin = 1e-9, .fmax = 1e9,
                .dflt = "none"),
        FRT_OPT(0, "record", FRT_ARG_STR, &po.record, "DIR",
                "--policy: write each ended episode as DIR/episode_NNN.npz (docs/robot.md)", .dflt = "none"),
        FRT_OPT(0, "cfg-beta", FRT_ARG_FLOAT, &po.cfg_beta, "B",
                "--policy: classifier-free guidance (RECAP) with weight B >= 1 from the start", .fmin = 1,
                .fmax = 1e30, .dflt = "off"),
        FRT_OPT(0, "advantage", FRT_ARG_CHOICE, &po.advantage, NULL,
                "--policy with --cfg-beta: the conditioned prompt's advantage indicator", .choices =
                "positive|negative", .dflt = "positive"),
        FRT_OPT(0, "policy-dtype", FRT_ARG_CHOICE, &po.dtype, NULL,
                "--policy: weight precision: the checkpoint's, or the prefix's MLP in FP8 E4M3 (cuda; "
                "docs/policies.md)",
                .choices = "default|fp8", .dflt = "default"),
        FRT_OPT(0, "policy-autotune", FRT_ARG_INT, &po.autotune, "N",
                "--policy: time N of cuBLASLt's algorithms for each GEMM shape at load and keep the fastest (cuda; "
                "0 = the heuristic's choice; docs/policies.md)",
                .min = 0, .max = 64),
        FRT_OPT(0, "policy-tune-file", FRT_ARG_STR, &po.tune_file, "FILE",
                "--policy with --policy-autotune: load the choice from FILE when it exists, else tune and save it",
                .dflt = "none"),
        FRT_OPT(0, "discrete-state", FRT_ARG_CHOICE, &po.discrete_state, NULL,
                "--policy, Pi0.5: the state in the prompt (openpi's discrete_state_input); auto: on but for libero "
                "(pi05_libero)",
                .choices = "auto|on|off"),
    };
    frt_cmd_spec spec = {"serve", "[-m MODEL_DIR] [options]", about, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0,
                         NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (chunk % 64) return frt_args_error(&spec, "--prefill-chunk: '%d' is not a multiple of 64", chunk);
    for (int t = 0; t < 3; t++) sp.budget_bytes[t] = (size_t)budget_mb[t] << 20;
    sp.max_body_bytes = (size_t)max_body_mb << 20;
    if (no_auto) sp.auto_capsules = 0;
    if (no_chatml) fp.chatml = 0;
    if (no_tools) fp.chat_tools = 0;
    sp.max_request_s = (double)req_timeout_s;
    sp.queue_timeout_s = (double)queue_timeout_s;
    if (sp.api_key && !*sp.api_key) return frt_args_error(&spec, "--api-key: empty");
    const char *hosts[16], *maps[64];
    char host_buf[1024], map_buf[1024];
    int n_hosts = 0, n_maps = 0;
    if (allowed_hosts) {
        if ((n_hosts = split_commas(allowed_hosts, host_buf, hosts, 16)) < 0)
            return frt_args_error(&spec, "--allowed-host: too long or more than 16 names");
        if (!n_hosts) return frt_args_error(&spec, "--allowed-host: '%s' names no host", allowed_hosts);
    }
    if (cartridge_map && (n_maps = split_commas(cartridge_map, map_buf, maps, 64)) < 1)
        return frt_args_error(&spec, "--cartridge-map: too long, empty or more than 64 mappings");
    if (n_maps && !sp.cartridge_dir) return frt_args_error(&spec, "--cartridge-map needs --cartridge-dir");
    sp.allowed_hosts = hosts;
    sp.n_allowed_hosts = n_hosts;
    sp.cartridge_map = maps;
    sp.n_cartridge_map = n_maps;
    unsigned char key[1025];
    size_t key_len = 0;
    if (capsule_key_file) {
        FILE *kf = fopen(capsule_key_file, "rb");
        if (!kf) return frt_args_error(&spec, "--capsule-key-file: cannot open '%s'", capsule_key_file);
        key_len = fread(key, 1, sizeof key, kf);
        fclose(kf);
        while (key_len && (key[key_len - 1] == '\n' || key[key_len - 1] == '\r')) key_len--;
        if (key_len < 16 || key_len > 1024)
            return frt_args_error(&spec, "--capsule-key-file: '%s' holds %zu bytes (16 to 1024, a final newline aside)",
                                  capsule_key_file, key_len);
    }
    if (!isnan(po.value_threshold) && !po.critic) return frt_args_error(&spec, "--value-threshold needs --critic");
    if (tune_file && !autotune) return frt_args_error(&spec, "--tune-file needs --autotune N");
    if (kv_scales && strcmp(kv_dtype, "fp8")) return frt_args_error(&spec, "--kv-scales needs --kv-dtype fp8");
    const int llm_fp8 = !strcmp(wdtype, "fp8"), llm_kv8 = !strcmp(kv_dtype, "fp8"), llm_lm8 = !strcmp(lmdtype, "fp8");
    if (po.advantage && isnan(po.cfg_beta)) return frt_args_error(&spec, "--advantage goes with --cfg-beta");
    if (po.tune_file && !po.autotune) return frt_args_error(&spec, "--policy-tune-file needs --policy-autotune N");
    const char *backend_name = frt_backend_name((frt_backend)frt_args_backend(backend));
    if (!po.dir && (policy_port >= 0 || policy_port_file))
        return frt_args_error(&spec, "--policy-port and --policy-port-file go with --policy DIR");
    if (po.dir && policy_port < 0 && (model || strcmp(engine_kind, "model")))
        return frt_args_error(&spec, "--policy with an LLM (-m or --engine fake) in one process needs --policy-port N "
                                     "(the policy's own port)");
    if (policy_port_file && policy_port < 0)
        return frt_args_error(&spec, "--policy-port-file goes with --policy-port");
    if (po.dir && policy_port < 0) {
        int ints[9] = {max_seq, chunk, branches > 1, no_auto, no_chatml || no_tools || fp.reply || fp.delay_us || fp.eos_every ||
                                                              sp.parse_special_in_content,
                       llm_fp8, llm_kv8, autotune, llm_lm8};
        const char *strs[5] = {allowed_hosts, capsule_key_file, cartridge_map, kv_scales, tune_file};
        const char *bad = llm_only_given(&sp, budget_mb, ints, strs);
        if (bad)
            return frt_args_error(&spec, "--policy: %s is an option of the LLM server; with --policy alone it is not "
                                         "supported (serve an LLM beside it with --policy-port)", bad);
        return frt_serve_policy(cmd, &po, &sp, frt_args_backend(backend), threads, quiet, probe, port_file);
    }
    if (!po.dir && (po.robot || po.norm_stats || po.tokenizer || po.default_prompt || po.delta_actions ||
                    po.discrete_state || po.dtype || po.autotune || po.tune_file ||
                    frt_serve_policy_host_given(&po)))
        return frt_args_error(&spec, "--robot, --norm-stats, --tokenizer, --default-prompt, --delta-actions, "
                                     "--discrete-state, --policy-dtype, --policy-autotune, --policy-tune-file, "
                                     "--critic, --value-threshold, --max-chunks, "
                                     "--episode-timeout, --record, --cfg-beta and --advantage go with --policy DIR");

    if (!strcmp(engine_kind, "fake")) {
        if (model)
            return frt_args_error(&spec, "-m/--model: the fake engine loads no model (drop -m, or drop --engine fake)");
    } else {
        static const char *const fake_only[] = {"fake-reply", "fake-delay-us", "fake-eos-every", "fake-no-chatml",
                                                "fake-no-tools"};
        const char *n = FRT_ARGS_FIRST_GIVEN(&spec, fake_only);
        if (n)
            return frt_args_error(&spec, "--%s: an option of the fake engine (give --engine fake); the model engine "
                                         "does not use it", n);
    }

    frt_engine *engine = NULL;
    frt_model *llm = NULL;         /* -m beside --policy: the LLM whose context the policy shares */
    frt_turn_lock *turns = NULL;   /* and the lock both servers take turns through */
    int rc;
    char dir[PATH_MAX];
    if (!strcmp(engine_kind, "fake")) {
        if (sp.parse_special_in_content)
            return frt_args_error(&spec, "--parse-special-in-content: the fake engine's tokenizer has no special "
                                         "tokens (a model engine option)");
        if (branches > 1)
            return frt_args_error(&spec, "--branches: the fake engine has no branch slots (a model engine option)");
        if (llm_fp8 || llm_kv8 || llm_lm8 || autotune)
            return frt_args_error(&spec, "--%s: the fake engine has no weights, KV cache or GEMMs (a model engine "
                                         "option)",
                                  llm_fp8 ? "dtype" : llm_kv8 ? "kv-dtype" : llm_lm8 ? "lm-head-dtype" : "autotune");
        if (max_seq) fp.max_seq = max_seq;
        if (chunk) fp.prefill_chunk = chunk;
        rc = frt_engine_fake_create(&fp, &engine);
        if (rc) return frt_cli_fail(cmd, rc);
    } else if (!strcmp(engine_kind, "model")) {
        if (!model) {
            if (frt_cli_find_shipped("models/frt-demo", dir, sizeof dir)) {
                fprintf(stderr,
                        "frt %s: no -m MODEL_DIR given and the demo model models/frt-demo was not found\n"
                        "(looked in $FRT_DEMO_MODEL, next to the frt binary, under ../share/frt and in ./models)\n",
                        cmd);
                return 1;
            }
            model = dir;
        }
        frt_model_params mp = frt_model_default_params();
        mp.backend = (frt_backend)frt_args_backend(backend);
        mp.max_seq = max_seq;
        mp.prefill_chunk = chunk;
        mp.n_threads = threads;
        mp.branch_slots = branches;
        mp.weight_dtype = llm_fp8 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
        mp.lm_head_dtype = llm_lm8 ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
        mp.kv_dtype = llm_kv8 ? FRT_KV_FP8 : FRT_KV_DEFAULT;
        mp.kv_scales = kv_scales;
        mp.gemm_autotune = autotune;
        mp.gemm_tune_file = tune_file;
        if (po.dir) {
            if ((rc = open_shared_llm(cmd, model, &mp, quiet, &llm, &turns, &engine))) return rc;
        } else {
            /* HOOK(load progress): the engine loads the weights; it gets the
             * library's loading callback when there is one. */
            if (!quiet) fprintf(stderr, "frt %s: loading %s (%s backend)\n", cmd, model, backend_name);
            rc = frt_engine_model_open_params(model, &mp, &engine);
            if (rc) return frt_cli_fail(cmd, rc);
        }
    }
    if (key_len) {
        rc = frt_engine_set_capsule_key(engine, key, key_len);
        memset(key, 0, sizeof key);
        if (rc) {
            free_llm(engine, llm, turns);
            return frt_cli_fail(cmd, rc);
        }
    }
    if (!sp.api_key && !frt_host_is_loopback(sp.host))
        fprintf(stderr,
                "frt %s: warning: binding %s (beyond loopback) without --api-key: anyone who can reach the port can "
                "use the model and read every session\n",
                cmd, sp.host);
    /* signals go to sigwait below; worker threads inherit the mask */
    frt_serve_block_signals();
    serve_policy *ps = NULL; /* --policy beside the LLM: its own port, the same host, key and limits */
    const serve_policy_share share = {llm ? frt_model_context(llm) : NULL, turns};
    if (po.dir && (rc = frt_serve_policy_open(cmd, &po, &sp, policy_port, policy_port_file,
                                              frt_args_backend(backend), threads, quiet, probe,
                                              llm ? &share : NULL, &ps))) {
        free_llm(engine, llm, turns);
        return rc;
    }
    if (probe) {
        printf("frt serve: engine ready (%s): %s\n", engine_kind, model ? model : "fake");
        frt_serve_policy_close(ps);
        free_llm(engine, llm, turns);
        return 0;
    }

    if (!quiet) {
        sp.log = frt_serve_log_line;
        sp.log_user = NULL;
    }
    frt_server *srv = NULL;
    rc = frt_server_start(engine, &sp, &srv);
    int ret = rc ? frt_cli_fail(cmd, rc) : 0;
    if (ret == 0 && port_file) ret = frt_serve_write_port_file(cmd, port_file, frt_server_port(srv));
    if (ret == 0) {
        if (quiet) fprintf(stderr, "frt serve: listening on http://%s:%d\n", sp.host, frt_server_port(srv));
        frt_serve_wait();
    }
    frt_server_stop(srv);
    frt_serve_policy_close(ps); /* before the LLM: the policy borrows its context */
    free_llm(engine, llm, turns);
    return ret;
}
