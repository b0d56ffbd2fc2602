/*
 * fuzz_cartridge_manifest.c - libFuzzer target: manifest.json text of an
 * frt cartridge through frt_cartridge_manifest_parse (model/cartridge_file.c,
 * the strict validation of docs/cartridges.md, version 1 and 2 with
 * starts_with). Whatever the bytes: no crash, no read outside the input, a
 * refusal is a status with a message and leaves no allocation; an accepted
 * manifest has every field inside its documented range (layers, KV heads,
 * head_dim 1..4096, 1 <= tokens <= 2^24, frozen <= tokens, a valid id,
 * at most 16 labels, a start of at most min(tokens, 4096) ids >= 0).
 *
 * Seeds (fuzz/corpus/cartridge_manifest/): manifests written for these
 * seeds (version 2 with and without a start, version 1) and near misses.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_cartridge_manifest CORPUS;
 * CI replays fuzz/corpus/cartridge_manifest/ through replay_cartridge_manifest.
 */
#include "model/cartridge_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const frt_cartridge_info *in, const int32_t *start)
{
    if (in->n_layers < 1 || in->n_layers > 4096 || in->n_kv_heads < 1 || in->n_kv_heads > 4096 || in->head_dim < 1 ||
        in->head_dim > 4096 || in->tokens < 1 || in->tokens > (1 << 24) || in->frozen_tokens < 0 ||
        in->frozen_tokens > in->tokens || !frt_cartridge_id_ok(in->id) || in->n_labels < 0 ||
        in->n_labels > FRT_CARTRIDGE_MAX_LABELS || in->n_starts_with < 0 || in->n_starts_with > in->tokens ||
        in->n_starts_with > FRT_CARTRIDGE_STARTS_MAX || (in->n_starts_with > 0) != (start != NULL) ||
        !in->model_fingerprint)
        abort();
    for (int i = 0; i < in->n_starts_with; i++)
        if (start[i] < 0) abort();
    for (int i = 0; i < in->n_labels; i++)
        if (!in->labels[i][0] || strlen(in->labels[i]) >= FRT_CARTRIDGE_LABEL_MAX) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_cartridge_info in;
    int32_t *start = (int32_t *)(uintptr_t)1; /* must be reset by the call */
    int rc = frt_cartridge_manifest_parse((const char *)data, size, "fuzz", &in, &start);
    if (rc == 0) check(&in, start);
    else if (start) abort();
    free(start);
    return 0;
}
