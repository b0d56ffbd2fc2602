/* tools/cli.h - the frt command line: one file per subcommand (cmd_*.c). */
#ifndef FRT_TOOLS_CLI_H
#define FRT_TOOLS_CLI_H

/* Each subcommand gets argv[0] = its own name. Returns the process exit
 * code: 0 ok, 1 failure (the message is printed), 2 usage error. */
int frt_cmd_selfcheck(int argc, char **argv);
int frt_cmd_bench(int argc, char **argv);
int frt_cmd_gen_model(int argc, char **argv);
int frt_cmd_inspect(int argc, char **argv);
int frt_cmd_tokenize(int argc, char **argv);
int frt_cmd_detokenize(int argc, char **argv);
int frt_cmd_generate(int argc, char **argv);
int frt_cmd_demo(int argc, char **argv);
int frt_cmd_serve(int argc, char **argv);

/* Prints "frt NAME: MESSAGE (STATUS)" for a failed frt call to stderr and
 * returns 1. */
int frt_cli_fail(const char *cmd, int status);

#endif
