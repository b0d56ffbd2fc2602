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

/* The LLM load options of frt generate, frt serve and frt bench (and the
 * autotune pair of frt policy run), one declaration each: arguments of an
 * frt_arg table (args.h), bound to the variable p points at, mapped by the
 * command onto frt_model_params (weight_dtype, kv_dtype, kv_scales,
 * gemm_autotune, gemm_tune_file). */
#define FRT_CLI_OPT_DTYPE(p)                                                                                    \
    FRT_OPT(0, "dtype", FRT_ARG_CHOICE, (p), NULL,                                                              \
            "weight precision: the checkpoint's, or the Linear weights quantized to FP8 E4M3 at load (dense and "  \
            "hybrid models, cpu and cuda; docs/fp8.md)",                                                        \
            .choices = "default|fp8")
#define FRT_CLI_OPT_LM_HEAD_DTYPE(p)                                                                            \
    FRT_OPT(0, "lm-head-dtype", FRT_ARG_CHOICE, (p), NULL,                                                      \
            "the LM head's precision: the backend's, or FP8 E4M3 with a scale per vocabulary row, quantized at "    \
            "load (dense and hybrid models, cpu and cuda; docs/fp8.md \"An FP8 LM head\")",                     \
            .choices = "default|fp8")
#define FRT_CLI_OPT_KV_DTYPE(p)                                                                                 \
    FRT_OPT(0, "kv-dtype", FRT_ARG_CHOICE, (p), NULL,                                                           \
            "KV cache precision: the backend's, or FP8 E4M3 (dense models and the hybrid's attention layers; "     \
            "docs/fp8.md)",                                                                                     \
            .choices = "default|fp8")
#define FRT_CLI_OPT_KV_SCALES(p)                                                                                \
    FRT_OPT(0, "kv-scales", FRT_ARG_STR, (p), "FILE",                                                           \
            "with --kv-dtype fp8: per-head KV scales written by frt calibrate (wins over the checkpoint's)",      \
            .dflt = "the checkpoint's k_scale / v_scale (kv_cache_scheme), else 1.0")
#define FRT_CLI_OPT_AUTOTUNE(p)                                                                                 \
    FRT_OPT(0, "autotune", FRT_ARG_INT, (p), "N",                                                               \
            "time N of cuBLASLt's algorithms for each GEMM shape the model tunes at load and keep the fastest "    \
            "(cuda; 0 = the heuristic's choice; docs/kernels-cuda.md \"GEMM autotune\")",                         \
            .min = 0, .max = 64)
#define FRT_CLI_OPT_TUNE_FILE(p)                                                                                \
    FRT_OPT(0, "tune-file", FRT_ARG_STR, (p), "FILE",                                                           \
            "with --autotune: load the choice from FILE when it exists (nothing timed), else tune and save it",   \
            .dflt = "none")

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
