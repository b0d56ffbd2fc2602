/*
 * fuzz_kv_scales.c - libFuzzer target: a file image through the FP8 KV
 * scales check (model/kv_scales.h frt_kv_scales_check, docs/fp8.md) for a
 * fixed model of two KV entries ("kv.0.k", "kv.0.v") of 2 heads. Whatever
 * the bytes, the check either refuses them with a status, leaving the
 * output untouched, or accepts them with 4 scales that are finite and > 0.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_kv_scales CORPUS; CI
 * replays fuzz/corpus/kv_scales/ through replay_kv_scales.
 */
#include "frt/safetensors.h"
#include "model/kv_scales.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_safetensors *st;
    if (frt_safetensors_open_memory(data, size, "fuzz.safetensors", &st) != 0) return 0;
    static const frt_kv_scales_want want[2] = {{"kv.0.k", 2}, {"kv.0.v", 2}};
    float out[4] = {-1, -1, -1, -1};
    int rc = frt_kv_scales_check(st, want, 2, out);
    for (int i = 0; i < 4; i++) {
        if (rc == 0 && !(isfinite(out[i]) && out[i] > 0)) abort(); /* accepted: valid scales */
        if (rc != 0 && out[i] != -1) abort();                       /* refused: nothing written */
    }
    frt_safetensors_close(st);
    return 0;
}
