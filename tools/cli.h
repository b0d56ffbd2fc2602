/* tools/cli.h - the frt command line: one file per subcommand (cmd_*.c), the
 * option parser (args.h) and the helpers they share (cli_util.c). */
#ifndef FRT_TOOLS_CLI_H
#define FRT_TOOLS_CLI_H

#include "frt/model.h"

#include <stddef.h>

/* Each subcommand gets argv[0] = its own name. Returns the process exit
 * code: 0 ok, 1 failure (the message is printed), 2 usage error. */
int frt_cmd_selfcheck(int argc, char **argv);
int frt_cmd_bench(int argc, char **argv);
/* frt bench grammar (bench_grammar.c), reached through frt_cmd_bench. */
int frt_bench_grammar(int argc, char **argv);
int frt_cmd_gen_model(int argc, char **argv);
int frt_cmd_inspect(int argc, char **argv);
int frt_cmd_tokenize(int argc, char **argv);
int frt_cmd_detokenize(int argc, char **argv);
int frt_cmd_chat_template(int argc, char **argv);
int frt_cmd_generate(int argc, char **argv);
int frt_cmd_calibrate(int argc, char **argv); /* cmd_calibrate.c: FP8 KV scales */
int frt_cmd_compare(int argc, char **argv);   /* cmd_compare.c: accuracy of model B against model A */
int frt_cmd_demo(int argc, char **argv);
int frt_cmd_serve(int argc, char **argv);
int frt_cmd_cartridge(int argc, char **argv);
int frt_cmd_fork(int argc, char **argv);
int frt_cmd_policy(int argc, char **argv);         /* cmd_policy.c: the dispatcher */
int frt_cmd_policy_prepare(int argc, char **argv); /* policy_prepare.c */
int frt_cmd_policy_run(int argc, char **argv);     /* policy_run.c */
int frt_cmd_policy_rollout(int argc, char **argv); /* cmd_rollout.c */
int frt_bench_policy(int argc, char **argv);       /* frt bench policy (bench_policy.c) */

/* Prints "frt NAME: MESSAGE (STATUS)" for a failed frt call to stderr and
 * returns 1. */
int frt_cli_fail(const char *cmd, int status);

/* What every command shows as the --model default. */
#define FRT_CLI_DEMO_MODEL_HELP "the demo model models/frt-demo"

/* Finds the shipped REL ("models/frt-demo", "assets/demo") the same way for
 * every command: $FRT_DEMO_MODEL (for models/frt-demo only), then next to
 * the frt binary, one and two folders up (the build tree, a bundle), under
 * ../share/frt (an installed tree), then the current directory. A model
 * must hold config.json. Writes the path to out; 0 found, -1 not. */
int frt_cli_find_shipped(const char *rel, char *out, size_t n);

/* Loads MODEL_DIR for command CMD; unless quiet prints "frt CMD: loading DIR
 * (BACKEND)" before and the seconds it took after, on stderr.
 * Between them, the library's load progress (frt_model_params.progress:
 * weight bytes, then graph capture) on frt_cli_progress lines; generate and
 * demo load through here. Returns the status of frt_model_load. */
int frt_cli_load_model(const char *cmd, const char *dir, const frt_model_params *mp, int quiet, frt_model **out);

/* Progress of one long step, on stderr. On a terminal one line rewritten in
 * place ("\r"); otherwise plain log lines (at most one per quarter of the
 * total, and the last). Nothing when quiet. unit NULL: bytes, shown in MB or
 * GB; else a count of that unit ("tokens"). */
typedef struct frt_cli_progress {
    char label[64], unit[16];
    unsigned long long total;
    int quiet, tty, last_quarter;
    double t0;
} frt_cli_progress;
void frt_cli_progress_begin(frt_cli_progress *p, const char *label, const char *unit, unsigned long long total,
                            int quiet);
void frt_cli_progress_update(frt_cli_progress *p, unsigned long long done);
void frt_cli_progress_end(frt_cli_progress *p, unsigned long long done);

/* Monotonic seconds. */
double frt_cli_now_s(void);

#endif
