/*
 * fuzz_cli_lists.c - libFuzzer target: the command line's list parsers
 * (tools/args.c, compiled into the target as tests/test_args.c does):
 * frt_parse_logit_bias (--logit-bias ID:BIAS,..) and frt_parse_i32_list
 * (--ids). A parse either fails with a status and a refused element inside
 * the input, or yields entries whose invariants hold (count in [1, cap],
 * ids in range, biases finite).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_cli_lists CORPUS;
 * CI replays fuzz/corpus/cli_lists/ through replay_cli_lists.
 */
#include "../tools/args.c"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    const size_t len = strlen(s);
    frt_logit_bias b[FRT_SAMPLING_MAX_BIAS];
    int n = -1;
    const char *bad = NULL;
    int rc = frt_parse_logit_bias(s, b, FRT_SAMPLING_MAX_BIAS, &n, &bad);
    if (rc == 0) {
        if (n < 1 || n > FRT_SAMPLING_MAX_BIAS) abort();
        for (int i = 0; i < n; i++)
            if (b[i].token < 0 || !isfinite(b[i].bias)) abort();
    } else if (n != -1 || !bad || bad < s || bad > s + len) {
        abort();
    }
    int32_t *ids = NULL;
    size_t m = 0;
    rc = frt_parse_i32_list(s, 0, 1000, &ids, &m, &bad);
    if (rc == 0) {
        if (m < 1) abort();
        for (size_t i = 0; i < m; i++)
            if (ids[i] < 0 || ids[i] > 1000) abort();
        free(ids);
    } else if (ids || !bad || bad < s || bad > s + len) {
        abort();
    }
    free(s);
    return 0;
}
