/*
 * fuzz_policy_json.c - libFuzzer target: a POST /v1/policy/infer body
 * through frt_pobs_parse_json (serving/policy_obs.h: arrays as {"dtype",
 * "shape", "data" base64}), with the consistency checks of
 * fuzz_policy_msgpack.c; then base64 round trips of the input bytes.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_policy_json CORPUS;
 * CI replays fuzz/corpus/policy_json/ through replay_policy_json.
 */
#include "serving/policy_obs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define frt_fuzz_pobs_check frt_fuzz_pobs_check_json
#define LLVMFuzzerTestOneInput frt_fuzz_msgpack_entry_unused
#include "fuzz_policy_msgpack.c"
#undef LLVMFuzzerTestOneInput

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_pobs o = {0};
    int rc = frt_pobs_parse_json((const char *)data, size, &o);
    frt_fuzz_pobs_check_json(&o, rc);
    frt_pobs_free(&o);
    char *b = frt_pobs_base64_encode(data, size);
    uint8_t *back = NULL;
    size_t n = 0;
    if (b && (frt_pobs_base64_decode(b, strlen(b), &back, &n) != 0 || n != size || memcmp(back, data, size)))
        abort();
    free(back);
    free(b);
    return 0;
}
