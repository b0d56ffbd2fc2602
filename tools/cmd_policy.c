/* cmd_policy.c - frt policy: the robot-policy commands.
 *
 *   frt policy prepare ...   the model inputs from images, a prompt and a
 *                            state (policy_prepare.c)
 *   frt policy run ...       one inference: the action chunk (policy_run.c)
 *   frt policy rollout ...   episodes of the rollout host (cmd_rollout.c)
 *
 * The dispatcher only; each subcommand lives in its own file. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} subs[] = {
    {"prepare", frt_cmd_policy_prepare, "write a policy's exact inputs (safetensors) from images, prompt, state"},
    {"run", frt_cmd_policy_run, "one inference of a Pi0 / Pi0.5 policy: the action chunk"},
    {"rollout", frt_cmd_policy_rollout, "episodes of the rollout host driven by the fake robot (docs/robot.md)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: frt policy COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].help);
}

int frt_cmd_policy(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[1], subs[i].name)) return subs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "frt policy: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
