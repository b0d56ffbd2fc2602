/*
 * frt/kv_scales.h - static per-head scales of an FP8 E4M3 KV cache
 * (docs/fp8.md "Calibrated scales").
 *
 * A scales file is a safetensors file (the format of weights; read by the
 * same parser) whose __metadata__ has "format": "frt-kv-scales" and which
 * holds, for every KV entry of the model's state table (frt_model_state_info:
 * rows validity, a float dtype; the dense family's "kv.L.k" / "kv.L.v"), one
 * tensor "<entry>.scale" of dtype F32 and shape [n_kv_heads] (the entry's
 * shape[1]), every value finite and > 0, and nothing else. A model loaded
 * with frt_model_params.kv_scales = that path and kv_dtype FRT_KV_FP8 stores
 * head j of entry e as e4m3_satfinite(x / scale[j]) and reads it back as
 * decode(code) * scale[j]; the scales are fixed at load and hashed into the
 * fingerprint, so a capsule of a model with other scales (or none) is refused
 * (FRT_ERR_MISMATCH).
 */
#ifndef FRT_KV_SCALES_H
#define FRT_KV_SCALES_H

#include "frt/export.h"
#include "frt/model.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The calibration pass: resets m, prefills ids [n] (the calibration text),
 * and writes to `path` (atomically: frt_st_writer_write) the scales that
 * map the largest magnitude of each KV head over those n rows onto the
 * largest E4M3 value: scale = max|x| / 448 (frt_fp8_amax_scale; 1.0 for a
 * head of zeros), one tensor per KV entry as above. m must hold its KV cache
 * in the backend's precision (kv_dtype FRT_KV_DEFAULT: f32 on the cpu
 * backend, bf16 on cuda): calibrating from FP8 codes would measure the
 * codes. On return m holds the calibration prefill (call frt_model_reset
 * to start over). Errors: FRT_ERR_INVALID_ARGUMENT (NULL, n < 1, m with an
 * FP8 KV cache or without KV entries), the errors of frt_model_prefill
 * (FRT_ERR_OUT_OF_RANGE: n past max_seq), FRT_ERR_IO (the file),
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_model_kv_calibrate(frt_model *m, const int32_t *ids, int n, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* FRT_KV_SCALES_H */
