/*
 * fuzz_pi0_config.c - libFuzzer target: a policy's config.json text through
 * pi0_config_parse_json (src/model/arch/pi0/pi0.h). A parse either fails
 * with a status or yields a config whose invariants hold (positive sizes
 * within frt's limits, heads a multiple of KV heads, the expert's layers
 * and KV layout equal to the prefix's, whole patches, an even expert
 * width, the prefix capacity the sum of its parts; for openpi's layout,
 * Pi0 / Pi0.5 and the capacity left to the checkpoint, a known precision,
 * the state as wide as the action).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_pi0_config CORPUS;
 * CI replays fuzz/corpus/pi0_config/ through replay_pi0_config.
 */
#include "model/arch/pi0/pi0.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pi0_config c;
    char mt[32];
    if (pi0_config_parse_json((const char *)data, size, "fuzz.json", 0, mt, sizeof mt, &c) != 0) return 0;
    if (c.layout == PI0_LAYOUT_OPENPI) {
        /* Pi0 or Pi0.5 waits for the tensors (pi0_config_from_checkpoint). */
        if (mt[0] || c.pi05 != -1 || c.max_tokens != 0 || c.max_prefix != 0 || c.state_dim != c.action_dim) abort();
        if (strcmp(c.precision, "float32") && strcmp(c.precision, "bfloat16")) abort();
        if (!c.t_variant[0] || !c.e_variant[0]) abort();
    } else {
        if (strcmp(mt, "pi0") && strcmp(mt, "pi05")) abort();
        if (c.pi05 != !strcmp(mt, "pi05")) abort();
        if (c.max_tokens != (c.pi05 ? 200 : 48) || c.max_prefix != c.max_cameras * c.n_patch + c.max_tokens) abort();
    }
    const pi0_gemma_config *g[2] = {&c.t, &c.e};
    for (int i = 0; i < 2; i++)
        if (g[i]->width < 1 || g[i]->width > 65536 || g[i]->inter < 1 || g[i]->layers < 1 || g[i]->heads < 1 ||
            g[i]->kv_heads < 1 || g[i]->heads % g[i]->kv_heads || g[i]->head_dim < 2 || g[i]->head_dim % 2)
            abort();
    if (c.e.layers != c.t.layers || c.e.kv_heads != c.t.kv_heads || c.e.head_dim != c.t.head_dim) abort();
    if (c.v_width < 1 || c.v_heads < 1 || c.v_width % c.v_heads || c.v_head_dim * c.v_heads != c.v_width) abort();
    if (c.patch < 1 || c.image_size % c.patch || c.n_patch != (c.image_size / c.patch) * (c.image_size / c.patch))
        abort();
    if (c.e.width % 2 || c.chunk < 1 || c.action_dim < 1 || c.state_dim < 1 || c.vocab < 1) abort();
    if (c.n_steps < 1 || c.n_steps > 1000) abort();
    return 0;
}
