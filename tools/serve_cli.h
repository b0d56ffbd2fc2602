/* serve_cli.h - what frt serve's two servers share (cmd_serve.c): the LLM
 * server and the policy server (serve_policy.c, docs/policy-server.md). */
#ifndef FRT_TOOLS_SERVE_CLI_H
#define FRT_TOOLS_SERVE_CLI_H

#include "frt/serving.h"

/* The policy server's own options (--policy DIR and the robot's). */
typedef struct serve_policy_opts {
    const char *dir, *robot, *norm_stats, *tokenizer, *default_prompt, *delta_actions, *discrete_state;
    const char *dtype; /* "default" or "fp8" (the prefix's MLP in FP8 E4M3); NULL: default */
    int autotune;          /* frt_model_params.gemm_autotune (0: the heuristic's choice) */
    const char *tune_file; /* frt_model_params.gemm_tune_file (NULL: none) */
    /* the rollout host (docs/robot.md) and CFG; NaN / 0 / NULL = not given */
    const char *critic, *record, *advantage;
    float value_threshold, cfg_beta;
    int max_chunks;
    double episode_timeout_s;
} serve_policy_opts;

/* frt serve's policy options of the rollout host and CFG (--critic,
 * --value-threshold, --max-chunks, --episode-timeout, --record, --cfg-beta,
 * --advantage), bound to O; 1 when any was given. */
int frt_serve_policy_host_given(const serve_policy_opts *o);

/* A server's log callback: "[HH:MM:SS] frt serve<USER>: LINE" on stderr
 * (USER: a NUL-terminated suffix such as " --policy", or NULL). */
void frt_serve_log_line(void *user, const char *line);

/* Writes PORT to PATH atomically (PATH.tmp, then rename). 0, or 1 after
 * printing the error. */
int frt_serve_write_port_file(const char *cmd, const char *path, int port);

/* Blocks SIGINT / SIGTERM (the threads started after inherit the mask) and
 * ignores SIGPIPE; frt_serve_wait then waits for one and names it. */
void frt_serve_block_signals(void);
void frt_serve_wait(void);

/* A policy being served (serve_policy.c). */
typedef struct serve_policy serve_policy;

/* The LLM's execution context a policy beside it is loaded into, and the
 * turn lock both servers take around their device work
 * (src/serving/policy_share.h). */
typedef struct serve_policy_share {
    frt_context *context;       /* borrowed: outlives the policy */
    struct frt_turn_lock *lock; /* borrowed */
} serve_policy_share;

/* Loads the policy of O (into SHARE's context, taking turns through its
 * lock; SHARE NULL: a context of its own) and, unless PROBE, serves it on
 * PORT with SP's host, API key, Origin and limits (PORT_FILE: where the
 * bound port is written, or NULL). The listening line says whose context
 * the policy runs in and its graph captures; the close line the captures
 * again (and the turns taken). Call frt_serve_block_signals first.
 * Returns the exit code (0, 1 failure printed); *out on success
 * (frt_serve_policy_close). */
int frt_serve_policy_open(const char *cmd, const serve_policy_opts *o, const frt_server_params *sp, int port,
                          const char *port_file, int backend, int threads, int quiet, int probe,
                          const serve_policy_share *share, serve_policy **out);

/* Stops the server, frees the policy; NULL is a no-op. */
void frt_serve_policy_close(serve_policy *p);

/* frt serve --policy DIR alone: loads the policy, serves it on SP's port
 * until SIGINT / SIGTERM. Returns the exit code (0, 1 failure printed). */
int frt_serve_policy(const char *cmd, const serve_policy_opts *o, const frt_server_params *sp, int backend,
                     int threads, int quiet, int probe, const char *port_file);

#endif
