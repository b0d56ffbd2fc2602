/*
 * fuzz_safetensors.c - libFuzzer target: a safetensors file image through
 * the validating reader (model/safetensors.h). Whatever the bytes, the
 * reader either rejects them with a status or hands out tensors that lie
 * inside the image; every byte of every tensor is read, float tensors are
 * converted, and each name finds its own tensor.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_safetensors
 * CORPUS; CI replays fuzz/corpus/safetensors/ through replay_safetensors.
 */
#include "frt/safetensors.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_safetensors *st;
    if (frt_safetensors_open_memory(data, size, "fuzz.safetensors", &st) != 0) return 0;
    volatile unsigned sink = 0;
    for (int i = 0; i < frt_safetensors_count(st); i++) {
        const frt_tensor *t = frt_safetensors_at(st, i);
        const unsigned char *p = t->data;
        if (t->nbytes && (p < data || p + t->nbytes > data + size)) abort();
        for (size_t k = 0; k < t->nbytes; k++) sink += p[k];
        if (frt_safetensors_find(st, t->name) != t) abort();
        int64_t n = frt_tensor_numel(t);
        if ((uint64_t)n * frt_dtype_size(t->dtype) != t->nbytes) abort();
        if (frt_dtype_is_float(t->dtype) && n > 0 && n <= (1 << 20)) {
            float *f = malloc(sizeof(float) * (size_t)n);
            if (f && frt_tensor_to_f32(t, f) != 0) abort();
            free(f);
        }
    }
    (void)frt_safetensors_metadata(st, "format");
    frt_safetensors_close(st);
    (void)sink;
    return 0;
}
