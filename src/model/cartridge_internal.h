/*
 * model/cartridge_internal.h - the cartridge object shared by cartridge.c
 * (injection, export from the live state, metadata), cartridge_file.c (frt's
 * own format: manifest.json + kv.safetensors) and cartridge_pt.c (the
 * PyTorch .pt reader). The API is include/frt/cartridge.h.
 */
#ifndef FRT_MODEL_CARTRIDGE_INTERNAL_H
#define FRT_MODEL_CARTRIDGE_INTERNAL_H

#include "frt/cartridge.h"

#include <stddef.h>
#include <stdint.h>

struct frt_cartridge {
    frt_cartridge_info info;
    unsigned char *data; /* [n_layers][K, V][tokens, n_kv_heads, head_dim] of info.dtype */
    size_t half_bytes;   /* bytes of one K (or V) tensor */
    int32_t *ids;        /* [tokens] when known (exported from a model); NULL otherwise */
    int32_t *start;      /* [info.n_starts_with] what the cartridge starts with (manifest starts_with), or NULL */
};

/* A new cartridge with its payload allocated (zero-filled) for the shape;
 * training_steps -1. Errors: FRT_ERR_INVALID_ARGUMENT (a shape < 1, a dtype
 * other than BF16/F16/F32), FRT_ERR_OUT_OF_RANGE (size overflow),
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_cartridge_alloc(int n_layers, int n_kv_heads, int head_dim, int tokens, frt_dtype dt, frt_cartridge **out);

/* Parses len bytes of manifest.json text (`what` names it in messages)
 * strictly into *in (every field of docs/cartridges.md; version 1 or 2)
 * and *start (the starts_with ids, malloc'd; NULL when none; in->n_starts_with
 * of them). Errors: FRT_ERR_FORMAT naming the field, FRT_ERR_OUT_OF_MEMORY;
 * *start is NULL on error (cartridge_file.c, fuzzed by fuzz_cartridge_manifest). */
int frt_cartridge_manifest_parse(const char *text, size_t len, const char *what, frt_cartridge_info *in,
                                 int32_t **start);

/* Layer l's K (kv 0) or V (kv 1) payload. */
unsigned char *frt_cartridge_half(frt_cartridge *c, int layer, int kv);

/* 0 when m's architecture takes a KV prefix, else FRT_ERR_UNSUPPORTED
 * naming what it keeps instead (cartridge_inject.c). */
int frt_kv_prefix_supported(const frt_model *m);

/* p checked against m (frt_model_inject_kv's checks) and converted to the
 * backend's KV dtype, held in buffers of m's context in space: DEVICE for
 * frt_model_kv_upload (or PINNED_HOST), HOST (the staging copy itself, no
 * second copy) for frt_model_inject_kv. Errors as frt_model_kv_upload. */
int frt_kv_resident_make(frt_model *m, const frt_kv_prefix *p, frt_space space, frt_kv_resident **out);


#endif
