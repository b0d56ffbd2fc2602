/*
 * model/arch/lm_head_cuda.h - the LM head of the CUDA backends of the
 * dense and the hybrid architectures: bf16 (frt_cuda_gemm_run: the GEMV up
 * to FRT_CUDA_GEMV_MAX_N rows, else cuBLASLt), or with
 * params.lm_head_dtype FRT_WEIGHT_FP8 (docs/fp8.md "An FP8 LM head") E4M3
 * codes with one scale a vocabulary row through the E4M3 decode GEMV.
 */
#ifndef FRT_MODEL_ARCH_LM_HEAD_CUDA_H
#define FRT_MODEL_ARCH_LM_HEAD_CUDA_H

#include "kernels/cuda/kernels_cuda.h"

#include <stdint.h>

/* Device pointers into a weight arena: w bf16 [V, H] (a tied model's: the
 * embedding), or q E4M3 codes [V, H] with s f32 scales [V] (w NULL). */
typedef struct frt_lm_head_cuda {
    const uint16_t *w;
    const uint8_t *q;
    const float *s;
} frt_lm_head_cuda;

/* 0 when the E4M3 GEMV takes a head of hidden_size H (a multiple of 16:
 * its 16-byte rows), else FRT_ERR_UNSUPPORTED naming H: the loaders' check
 * before they reserve the codes. */
int frt_lm_head_cuda_fp8_ok(int64_t H);

/* logits [n, V] f32 = x [n, H] bf16 . head^T on stream. d_skip (device
 * int32, or NULL): when set, the launch returns on the device without
 * writing while *d_skip != 0 (a prefill's pieces but the last:
 * frt_cuda_gemv_fp8_unless, frt_cuda_gemm_run_unless); a bf16 head on a
 * cuBLASLt plan cannot skip and always runs. g: the bf16 head's plans
 * (frt_cuda_gemm_plan of (n, H, V) at setup). Errors: those of the launch. */
int frt_lm_head_cuda_run(const frt_lm_head_cuda *h, frt_cuda_gemm *g, void *stream, const int32_t *d_skip,
                         float *logits, const uint16_t *x, int n, int H, int V);

#endif /* FRT_MODEL_ARCH_LM_HEAD_CUDA_H */
