/* cmd_demo.c - frt demo. */
#include "cli.h"

#include <stdio.h>

int frt_cmd_demo(int argc, char **argv)
{
    fprintf(stderr, "frt %s: not supported yet in this build\n", argv[0]);
    return 1;
}
