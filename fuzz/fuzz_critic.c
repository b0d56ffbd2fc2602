/*
 * fuzz_critic.c - libFuzzer target: a value critic's safetensors file
 * (docs/robot.md layout) through the checks of frt_critic_load
 * (frt_critic_parse_memory, src/robot/robot_internal.h) for a policy of
 * prefix width 8. A parse either fails with a status or yields sizes whose
 * invariants hold (1 to 16 layers, a state of at least one value, a hidden
 * width of at least one).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_critic CORPUS;
 * CI replays fuzz/corpus/critic/ through replay_critic.
 */
#include "robot/robot_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_critic_info ci;
    if (frt_critic_parse_memory(data, size, 8, &ci) != 0) return 0;
    if (ci.width != 8 || ci.state_dim < 1 || ci.n_layers < 1 || ci.n_layers > 16 || ci.hidden < 1) abort();
    return 0;
}
