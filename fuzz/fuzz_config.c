/*
 * fuzz_config.c - libFuzzer target: config.json and generation_config.json
 * text through frt_config_parse_json / frt_generation_config_parse_json
 * (model/config.h). A parse either fails with a status or yields a config
 * whose invariants hold (sizes positive, layer counts add up, rotary dim
 * even and within the head, eos ids inside the vocabulary, a
 * quantization_config's method known, on a dense type, with block sizes
 * exactly for the block-wise layout, its KV-cache scheme known).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_config CORPUS;
 * CI replays fuzz/corpus/config/ through replay_config.
 */
#include "frt/config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_model_config c;
    frt_generation_config g;
    const char *text = (const char *)data;
    int ok = frt_config_parse_json(text, size, "fuzz.json", &c) == 0;
    if (ok) {
        if (c.n_layers < 1 || c.n_layers > FRT_MAX_LAYERS || c.n_full_layers + c.n_linear_layers != c.n_layers)
            abort();
        if (c.vocab_size < 1 || c.hidden_size < 1 || c.n_heads < 1 || c.n_kv_heads < 1 || c.head_dim < 1) abort();
        if (c.n_heads % c.n_kv_heads || c.rotary_dim < 2 || c.rotary_dim % 2 || c.rotary_dim > c.head_dim) abort();
        if (c.eos_token_id >= c.vocab_size || c.bos_token_id >= c.vocab_size) abort();
        if (c.hybrid && (c.lin_n_k_heads < 1 || c.lin_n_v_heads % c.lin_n_k_heads)) abort();
        if (c.quant.method < FRT_QUANT_NONE || c.quant.method > FRT_QUANT_FP8_BLOCK) abort();
        if (c.quant.kv < FRT_QUANT_KV_NONE || c.quant.kv > FRT_QUANT_KV_HEAD) abort();
        if ((c.quant.method == FRT_QUANT_FP8_BLOCK) !=
            (c.quant.block_out >= 1 && c.quant.block_out <= 65536 && c.quant.block_in >= 1 && c.quant.block_in <= 65536))
            abort();
        char pat[2 * FRT_MAX_LAYERS + 1];
        frt_config_layer_pattern(&c, pat, sizeof pat);
    }
    if (frt_generation_config_parse_json(text, size, "fuzz.json", ok ? &c : NULL, &g) == 0) {
        if (g.n_eos < 0 || g.n_eos > 16) abort();
        for (int i = 0; ok && i < g.n_eos; i++)
            if (g.eos_ids[i] < 0 || g.eos_ids[i] >= c.vocab_size) abort();
    }
    return 0;
}
