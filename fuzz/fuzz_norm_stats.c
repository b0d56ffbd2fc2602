/*
 * fuzz_norm_stats.c - libFuzzer target: norm_stats.json text through
 * frt_policy_norm_stats_parse (frt/policy_io.h), then both normalisations
 * of a state and an action chunk. A parse either fails with a status and
 * no handle, or no normalisation of small finite values gives NaN (the
 * denominators std + 1e-6 and q99 - q01 + 1e-6 are positive and finite:
 * the parser refuses a negative std, q01 > q99 and a range that
 * overflows), and statistics longer than the action dim are refused.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_norm_stats CORPUS;
 * CI replays fuzz/corpus/norm_stats/ through replay_norm_stats.
 */
#include "frt/policy_io.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const frt_policy_norm_stats *st, frt_policy_variant v)
{
    float state[8] = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, -0.25f, 1.0f, 7.0f}, out[8];
    size_t n = frt_policy_norm_stats_dim(st, "state", NULL);
    if (n > 8) n = 8;
    if (n && frt_policy_normalize_state(st, v, state, n, out) == 0)
        for (size_t i = 0; i < n; i++)
            if (isnan(out[i])) abort(); /* huge statistics may overflow f32 to inf: allowed */
    float act[2 * 32], aout[2 * 32];
    for (int i = 0; i < 64; i++) act[i] = (float)(i % 7) * 0.25f - 0.75f;
    if (frt_policy_unnormalize_actions(st, v, act, 2, 32, 7, aout) != 0) return;
    if (frt_policy_norm_stats_dim(st, "actions", NULL) > 32) abort(); /* must be refused */
    for (int i = 0; i < 2 * 7; i++)
        if (isnan(aout[i])) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_policy_norm_stats *st = NULL;
    if (frt_policy_norm_stats_parse((const char *)data, size, &st) != 0) {
        if (st) abort();
        return 0;
    }
    exercise(st, FRT_POLICY_PI0);
    exercise(st, FRT_POLICY_PI05);
    frt_policy_norm_stats_free(st);
    return 0;
}
