/*
 * model/fp8_weights.h - FP8 E4M3 Linear weights (docs/fp8.md "FP8
 * weights"), shared by the architectures' loaders and cpu forward passes
 * (dense, qwen35): the checks and dequantization of an FP8 checkpoint's
 * weights with their scales (cfg.quant), the quantize-at-load of
 * params.weight_dtype FRT_WEIGHT_FP8 (per output channel, max|row| / 448),
 * the codes and scales a GPU backend holds, the fingerprint's description,
 * and the prefill activation rule. Internal.
 */
#ifndef FRT_MODEL_FP8_WEIGHTS_H
#define FRT_MODEL_FP8_WEIGHTS_H

#include "frt/exec.h"
#include "frt/safetensors.h"

#include <stddef.h>
#include <stdint.h>

typedef struct frt_model frt_model;

/* 0 for a tensor other than a decoder-layer Linear weight (embedding,
 * lm_head, norms, biases) of a float dtype but FP8; FRT_ERR_UNSUPPORTED
 * naming `full` for an FP8 one: FP8 is read only for the Linear weights
 * (frt_fp8w_linear_check). */
int frt_fp8w_check_dtype(const frt_tensor *t, const char *full);

/* Checks Linear weight t (named `full`, shape [d0, d1] already checked):
 * 0 for a float tensor; for F8_E4M3, its scale tensor by cfg.quant
 * (`full` + "_scale": [] / [1] per-tensor, [d0, 1] / [d0] per-channel;
 * `full` + "_scale_inv" [ceil(d0 / bo), ceil(d1 / bi)] block-wise), of
 * dtype F32 / BF16 / F16, every scale finite and > 0, every code finite
 * (no 0x7F / 0xFF). Errors (messages name the tensor):
 * FRT_ERR_UNSUPPORTED (F8_E5M2), FRT_ERR_FORMAT (FP8 without a
 * quantization_config, a scale of the wrong dtype / shape / value, a NaN
 * code), FRT_ERR_NOT_FOUND (no scale tensor), FRT_ERR_OUT_OF_MEMORY. */
int frt_fp8w_linear_check(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1);

/* Linear weight t as f32 values into out [d0, d1] (after
 * frt_fp8w_linear_check): an F8_E4M3 tensor dequantized, decode(q) * scale;
 * a float tensor converted, and with params.weight_dtype FRT_WEIGHT_FP8
 * quantized per output row (scale max|row| / 448, satfinite RNE,
 * kernels/cpu/fp8.h) and dequantized, the values an FP8 GPU kernel
 * multiplies by. Errors: FRT_ERR_OUT_OF_MEMORY, those of
 * frt_tensor_to_f32. */
int frt_fp8w_linear_to_f32(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1,
                           float *out);

/* Whether the checkpoint's FP8 weights have block-wise scales (cfg.quant
 * FRT_QUANT_FP8_BLOCK, transformers `fp8`): 1 or 0. A GPU backend then
 * holds every Linear weight with its 128 x 128 block scales. */
int frt_fp8w_blocked(const frt_model *m);

/* The f32 scales a GPU backend holds for a [d0, d1] Linear weight: d0 (one
 * per output row), or with block-wise scales (frt_fp8w_blocked) the block
 * table's ceil(d0 / 128) * ceil(d1 / 128). */
size_t frt_fp8w_n_scales(const frt_model *m, int64_t d0, int64_t d1);

/* Linear weight t (after frt_fp8w_linear_check) as E4M3 codes [d0, d1] and
 * its f32 scales [frt_fp8w_n_scales], the form the cuda backend holds: an
 * FP8 tensor's own codes with its per-channel scales (a per-tensor scale
 * repeated on every row [d0]) or its block scales ([ceil(d0 / 128),
 * ceil(d1 / 128)] row-major, the checkpoint's weight_scale_inv as it is);
 * a float tensor with params.weight_dtype FRT_WEIGHT_FP8 quantized per row
 * (the codes and scales of frt_fp8w_linear_to_f32's quantize-at-load).
 * Errors: FRT_ERR_UNSUPPORTED (block sizes other than [128, 128]; a float
 * weight of a block-wise checkpoint; a float weight of an FP8 checkpoint
 * without FRT_WEIGHT_FP8), FRT_ERR_OUT_OF_MEMORY, those of
 * frt_tensor_to_f32. */
int frt_fp8w_linear_codes(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1,
                          uint8_t *codes, float *scale);

/* The FRT_ERR_UNSUPPORTED cases of frt_fp8w_linear_codes alone (no
 * conversion): the check of a loader's sizing pass, so a refused load
 * allocates nothing. 0 when frt_fp8w_linear_codes can read t. */
int frt_fp8w_linear_supported(const frt_model *m, const frt_tensor *t, const char *full);

/* Linear weight `full` (the checkpoint tensor's whole name), [d0, d1], into
 * a GPU backend's weight arena wbuf as E4M3 codes and its scales (the
 * two-pass loaders of dense_cuda.c and qwen35_cuda_load.c). pass 0 checks
 * it and writes nothing: the shape, frt_fp8w_linear_check and
 * frt_fp8w_linear_supported, so a refused load allocates nothing. pass 1
 * writes frt_fp8w_linear_codes' codes [d0, d1] u8 at byte offset woff and
 * its scales [frt_fp8w_n_scales(m, d0, d1)] f32 at soff of wbuf (on m->stream, synchronised before
 * it returns: the host copies are freed). Errors: FRT_ERR_NOT_FOUND (no
 * such tensor), FRT_ERR_FORMAT (another shape), those of the checks and of
 * frt_fp8w_linear_codes, FRT_ERR_OUT_OF_MEMORY, frt_buffer_write's. */
int frt_fp8w_arena_put(frt_model *m, frt_buffer *wbuf, int pass, const char *full, int64_t d0, int64_t d1,
                       size_t woff, size_t soff);

/* The LM head t ([d0 = vocab, d1 = hidden], a float tensor named `full`:
 * lm_head.weight, or a tied model's embedding) with params.lm_head_dtype
 * FRT_WEIGHT_FP8 (docs/fp8.md "An FP8 LM head") into a GPU backend's weight
 * arena wbuf: pass 0 checks its dtype and writes nothing; pass 1 writes
 * the codes [d0, d1] u8 at woff and the per-row scales [d0] f32 at soff
 * (frt_fp8w_quantize_rows: the values frt_fp8w_round_trip gives the cpu
 * backend), on m->stream, synchronised before it returns. The caller
 * checks the shape. Errors: FRT_ERR_UNSUPPORTED (an FP8 tensor, as
 * frt_fp8w_check_dtype), FRT_ERR_OUT_OF_MEMORY, frt_tensor_to_f32's and
 * frt_buffer_write's. */
int frt_fp8w_lm_head_put(frt_model *m, frt_buffer *wbuf, int pass, const frt_tensor *t, const char *full, int64_t d0,
                         int64_t d1, size_t woff, size_t soff);

/* The fingerprint's description of the FP8 weights of this load
 * (m->weights_desc): the checkpoint's scale layout and / or the
 * quantize-at-load; NULL for float weights. Static storage. */
const char *frt_fp8w_desc(const frt_model *m);

/* Whether Linear weight t is held in FP8 (an F8_E4M3 tensor, or any Linear
 * weight with params.weight_dtype FRT_WEIGHT_FP8): 1 or 0. */
int frt_fp8w_is_fp8(const frt_model *m, const frt_tensor *t);

/* Whether a prefill piece quantizes the inputs of the FP8 weights' products
 * per token (frt_fp8w_activations): 1, but 0 for a block-wise checkpoint
 * (frt_fp8w_blocked), whose prefill products take the activations as they
 * are (f32 on cpu, bf16 on cuda, where the prefill GEMM is a bf16 GEMM over
 * the weights dequantized to bf16; docs/fp8.md "FP8 activations"). A
 * model-level rule, the same for every Linear weight and both backends. */
int frt_fp8w_act_per_token(const frt_model *m);

/* The model-level rule for activations with FP8 weights (docs/fp8.md "FP8
 * activations"): in a prefill piece, the input of a product with an FP8
 * weight is quantized per token, scale[r] = max|x[r, :]| / 448 and codes
 * encode(x / scale[r]) (frt_fp8_quantize_rows_dynamic), and the product
 * multiplies the dequantized values decode(code) * scale[r]: the values
 * the cuda backend's FP8 GEMM multiplies. Decode steps (the GEMV) keep
 * the activations. A row's result depends on that row only.
 * out [n, dim] f32, codes [n, dim] u8, scale [n] f32 (scratch), x [n, dim]
 * f32. */
void frt_fp8w_activations(float *out, uint8_t *codes, float *scale, const float *x, int n, int dim);

/* Per-row amax / 448 scales s [d0] and E4M3 codes q [d0, d1] of x [d0, d1]
 * f32 (frt_fp8_quantize_rows_dynamic over blocks of 64 rows, in parallel:
 * rows are independent, so the bits are those of one call): the
 * quantize-at-load of FRT_WEIGHT_FP8. */
void frt_fp8w_quantize_rows(uint8_t *q, float *s, const float *x, int64_t d0, int64_t d1);

/* x [d0, d1] f32 in place through frt_fp8w_quantize_rows and back
 * (decode(code) * scale): the values an FP8 GPU kernel multiplies by.
 * Errors: FRT_ERR_OUT_OF_MEMORY (naming `full`). */
int frt_fp8w_round_trip(float *x, int64_t d0, int64_t d1, const char *full);

#endif /* FRT_MODEL_FP8_WEIGHTS_H */
