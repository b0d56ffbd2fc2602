/* frt.c - the frt command line: dispatch to one subcommand. */
#include "cli.h"

#include "frt/status.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cmds[] = {
    {"demo", frt_cmd_demo, "run the coding-agent capsule demo (the main job)"},
    {"generate", frt_cmd_generate, "generate text from a prompt"},
    {"calibrate", frt_cmd_calibrate, "write the per-head scales of an FP8 KV cache from a calibration text"},
    {"compare", frt_cmd_compare, "accuracy of one model against another: per-layer, logits, greedy agreement"},
    {"serve", frt_cmd_serve, "OpenAI-compatible HTTP server with sessions and capsules"},
    {"bench", frt_cmd_bench, "benchmarks (frt bench exec | frt bench -m DIR ...)"},
    {"fork", frt_cmd_fork, "fork a trunk into branches decoded together, with a receipt"},
    {"cartridge", frt_cmd_cartridge, "import, export and describe KV cartridges (frt cartridge --help)"},
    {"policy", frt_cmd_policy, "robot policies (Pi0 / Pi0.5): prepare inputs, run one observation"},
    {"gen-model", frt_cmd_gen_model, "write a random-weight checkpoint at a real shape"},
    {"inspect", frt_cmd_inspect, "describe a checkpoint directory"},
    {"tokenize", frt_cmd_tokenize, "print the token ids of a text"},
    {"detokenize", frt_cmd_detokenize, "print the text of token ids"},
    {"chat-template", frt_cmd_chat_template, "print the prompt a chat template renders for messages"},
    {"selfcheck", frt_cmd_selfcheck, "self-check of the execution contract"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: frt COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-13s %s\n", cmds[i].name, cmds[i].help);
    fprintf(f, "\n'frt COMMAND --help' lists a command's options with their defaults;\n"
               "'frt --version' prints the version.\n");
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "help")) { /* frt help CMD = frt CMD --help */
        char help[] = "--help";
        char *av[] = {argv[2], help, NULL};
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
            if (!strcmp(argv[2], cmds[i].name)) return cmds[i].fn(2, av);
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("frt %s\n", frt_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    if (argv[1][0] == '-')
        fprintf(stderr, "frt: unknown option %s (options follow the command: frt COMMAND --help)\n\n", argv[1]);
    else
        fprintf(stderr, "frt: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
