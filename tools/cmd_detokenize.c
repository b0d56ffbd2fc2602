/* cmd_detokenize.c - frt detokenize: the text of token ids.
 *
 *   frt detokenize [-n] MODEL_DIR ID...
 *
 * Prints the decoded text followed by a newline (-n: no newline). Invalid
 * UTF-8 in the decoded bytes prints as U+FFFD, as the Hugging Face decoder
 * gives it. */
#include "cli.h"

#include "frt/status.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: frt detokenize [-n] MODEL_DIR ID...\n"
                    "Prints the text of the token ids (tokenizer.json of MODEL_DIR).\n"
                    "  -n   no newline after the text\n");
    return 2;
}

int frt_cmd_detokenize(int argc, char **argv)
{
    const char *cmd = argv[0];
    int newline = 1, first = 1;
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage();
        return 0;
    }
    if (argc > first && !strcmp(argv[first], "-n")) {
        newline = 0;
        first++;
    }
    if (argc - first < 1) return usage();
    const char *dir = argv[first++];
    size_t n = (size_t)(argc - first);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "frt %s: out of memory\n", cmd);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *a = argv[first + (int)i];
        char *end;
        errno = 0;
        long v = strtol(a, &end, 10);
        if (errno || end == a || *end || v < -2147483647L - 1 || v > 2147483647L) {
            fprintf(stderr, "frt %s: '%s' is not a token id\n", cmd, a);
            free(ids);
            return usage();
        }
        ids[i] = (int32_t)v;
    }
    frt_tokenizer *tok = NULL;
    int rc = frt_tokenizer_load(dir, &tok);
    if (rc) {
        free(ids);
        return frt_cli_fail(cmd, rc);
    }
    char *text = NULL;
    size_t len = 0;
    rc = frt_tokenizer_decode(tok, ids, n, &text, &len);
    frt_tokenizer_free(tok);
    free(ids);
    if (rc) return frt_cli_fail(cmd, rc);
    fwrite(text, 1, len, stdout);
    if (newline) fputc('\n', stdout);
    free(text);
    return 0;
}
