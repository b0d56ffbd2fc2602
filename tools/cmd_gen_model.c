/* cmd_gen_model.c - frt gen-model. */
#include "cli.h"

#include <stdio.h>

int frt_cmd_gen_model(int argc, char **argv)
{
    fprintf(stderr, "frt %s: not supported yet in this build\n", argv[0]);
    return 1;
}
