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

/* At load, after the state table exists and with m->ckpt open, for an FP8
 * KV cache (kv_dtype F8_E4M3): with params.kv_scales, reads and checks the
 * file (frt_kv_scales_check over every F8_E4M3 rows entry); without it, when
 * config.json's quantization_config has a kv_cache_scheme (cfg.quant.kv
 * FRT_QUANT_KV_TENSOR or _HEAD), reads each entry "kv.L.k" / "kv.L.v"'s
 * scales from the checkpoint tensor
 * "<weight_prefix>layers.L.self_attn.k_scale" / ".v_scale" (F32 or BF16,
 * finite and > 0; TENSOR: [] or [1], given to every head; HEAD:
 * [n_kv_heads], one a head), or with TENSOR from the older per-tensor
 * names vLLM reads, "...self_attn.k_proj.output_scale" /
 * ".v_proj.output_scale" or one "...self_attn.kv_scale" for both K and V
 * (the same checks; one naming a layer). The file wins over the checkpoint; a KV cache of another dtype uses
 * neither (the checkpoint's scales are ignored; a file is an error). Keeps
 * the scales (m->kv_scales, m->kv_scales_hash: the same hash for the same
 * values, whatever their source); on error nothing is kept. Errors:
 * FRT_ERR_INVALID_ARGUMENT (kv_scales without kv_dtype FRT_KV_FP8), those
 * of frt_safetensors_open and frt_kv_scales_check, FRT_ERR_FORMAT (a
 * checkpoint scale missing, of another dtype or shape, zero, negative, NaN
 * or infinite, a layer's scales under two namings, an older name with
 * HEAD: the message names the tensors), FRT_ERR_UNSUPPORTED (an FP8
 * entry not named kv.L.k / kv.L.v with checkpoint scales),
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_model_kv_scales_load(frt_model *m);

/* 1 when checkpoint tensor `name` is a KV-cache scale under one of the
 * names frt_model_kv_scales_load reads ("<prefix>layers.L.self_attn."
 * followed by k_scale, v_scale, k_proj.output_scale, v_proj.output_scale
 * or kv_scale), else 0. The weights hash leaves these out: they enter the
 * fingerprint as values (kv_scales_hash) when an FP8 KV cache reads them. */
int frt_kv_scales_ckpt_name(const char *prefix, const char *name);

/* Entry e's scales [shape[1]] into out: the file's or the checkpoint's, or
 * 1.0 without either. */
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
