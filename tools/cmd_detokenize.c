/* cmd_detokenize.c - frt detokenize: the text of token ids.
 *
 *   frt detokenize [-n] MODEL_DIR ID...
 *
 * Prints the decoded text followed by a newline (-n: no newline). Invalid
 * UTF-8 in the decoded bytes prints as U+FFFD, as the Hugging Face decoder
 * gives it. */
#include "args.h"
#include "cli.h"

#include "frt/status.h"
#include "frt/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int frt_cmd_detokenize(int argc, char **argv)
{
    const char *cmd = argv[0];
    int no_newline = 0;
    frt_arg opts[] = {
        FRT_OPT('n', "no-newline", FRT_ARG_FLAG, &no_newline, NULL, "no newline after the text"),
    };
    frt_cmd_spec spec = {"detokenize", "[-n] MODEL_DIR ID...",
                         "Prints the text of the token ids (tokenizer.json of MODEL_DIR). Invalid UTF-8 in\n"
                         "the decoded bytes prints as U+FFFD.\n",
                         opts, 1, 1, -1, NULL};
    char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int n_pos = 0;
    int prc = pos ? frt_args_parse(&spec, argc, argv, pos, &n_pos) : FRT_ARGS_USAGE;
    if (prc != FRT_ARGS_RUN) {
        free(pos);
        return prc == FRT_ARGS_EXIT ? 0 : 2;
    }
    const int newline = !no_newline;
    const char *dir = pos[0];
    size_t n = (size_t)(n_pos - 1);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        free(pos);
        fprintf(stderr, "frt %s: out of memory\n", cmd);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *a = pos[1 + i];
        long long v = 0;
        int prc2 = frt_parse_i64(a, 0, INT32_MAX, &v);
        if (prc2) {
            free(ids);
            free(pos);
            return frt_args_error(&spec, prc2 == FRT_PARSE_RANGE ? "'%s' is out of range (a token id from 0 to 2147483647)"
                                                                 : "'%s' is not a token id", a);
        }
        ids[i] = (int32_t)v;
    }
    frt_tokenizer *tok = NULL;
    int rc = frt_tokenizer_load(dir, &tok);
    free(pos);
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
