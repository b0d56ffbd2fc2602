/*
 * model/kv_scales.h - the runtime side of an FP8 KV cache's static
 * per-head scales (frt/kv_scales.h, docs/fp8.md): reading and checking a
 * scales file against the state table at load, and handing each KV
 * entry's scales to the backends. Internal.
 */
#ifndef FRT_MODEL_KV_SCALES_H
#define FRT_MODEL_KV_SCALES_H

#include "frt/exec.h"
#include "frt/safetensors.h"

#include <stddef.h>
#include <stdint.h>

typedef struct frt_model frt_model;

/* One KV entry a scales file must cover: its state entry name and head
 * count. */
typedef struct frt_kv_scales_want {
    const char *name;
    int heads;
} frt_kv_scales_want;

/* Checks st against the n entries of want (frt/kv_scales.h: the metadata,
 * exactly one "<name>.scale" F32 [heads] tensor per entry, values finite
 * and > 0, no other tensor) and copies the scales into out (entry after
 * entry, heads values each). Errors: FRT_ERR_FORMAT naming the tensor and
 * what is wrong; nothing is written to out on error. Pure: the fuzz target
 * fuzz/fuzz_kv_scales.c drives it. */
int frt_kv_scales_check(const frt_safetensors *st, const frt_kv_scales_want *want, int n, float *out);

/* At load, after the state table exists: with params.kv_scales, reads and
 * checks the file (frt_kv_scales_check over every F8_E4M3 rows entry) and
 * keeps the scales (m->kv_scales, m->kv_scales_hash). Errors:
 * FRT_ERR_INVALID_ARGUMENT (kv_scales without kv_dtype FRT_KV_FP8), those
 * of frt_safetensors_open and frt_kv_scales_check, FRT_ERR_OUT_OF_MEMORY. */
int frt_model_kv_scales_load(frt_model *m);

/* Entry e's scales [shape[1]] into out: the file's, or 1.0 without one. */
void frt_model_kv_scales_of(const frt_model *m, int e, float *out, int heads);

/* The scales of state entries 0 .. n_entries-1 into out [n_entries, heads]
 * f32 (entry after entry; 1.0 for an entry without scales). For an
 * architecture that declares two entries per layer (dense, qwen35: layer
 * l's K at 2 l, its V at 2 l + 1, or its two recurrent entries), n_entries
 * = 2 n_layers gives the [n_layers, 2, n_kv_heads] table its backends
 * index as (2 l + kv) * n_kv_heads. */
void frt_model_kv_scales_table(const frt_model *m, int n_entries, int heads, float *out);

/* frt_model_kv_scales_table written into buf at byte offset off (device
 * memory of a cuda backend's scratch), on m->stream, synchronised before
 * it returns (the host copy is freed). Errors: FRT_ERR_OUT_OF_MEMORY, those
 * of frt_buffer_write and frt_stream_sync. */
int frt_model_kv_scales_upload(const frt_model *m, int n_entries, int heads, frt_buffer *buf, size_t off);

#endif /* FRT_MODEL_KV_SCALES_H */
