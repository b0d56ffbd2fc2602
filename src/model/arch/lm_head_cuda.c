/*
 * model/arch/lm_head_cuda.c - the LM head of the CUDA backends
 * (lm_head_cuda.h).
 */
#include "model/arch/lm_head_cuda.h"

#include "kernels/cuda/gemv_fp8.h"
#include "util/error.h"

int frt_lm_head_cuda_fp8_ok(int64_t H)
{
    if (H % 16 == 0) return 0;
    return frt_error(FRT_ERR_UNSUPPORTED,
                     "cuda model: an fp8 lm_head needs hidden_size %lld a multiple of 16 (the E4M3 GEMV's rows)",
                     (long long)H);
}

int frt_lm_head_cuda_run(const frt_lm_head_cuda *h, frt_cuda_gemm *g, void *stream, const int32_t *d_skip,
                         float *logits, const uint16_t *x, int n, int H, int V)
{
    if (h->q)
        return d_skip ? frt_cuda_gemv_fp8_unless(stream, d_skip, logits, FRT_CUDA_F32, x, h->q, h->s, n, H, V)
                      : frt_cuda_gemv_fp8(stream, logits, FRT_CUDA_F32, 0, x, h->q, h->s, n, H, V);
    if (d_skip) {
        int rc = frt_cuda_gemm_run_unless(g, stream, d_skip, logits, FRT_CUDA_F32, x, h->w, n, H, V, 0);
        if (rc != FRT_ERR_UNSUPPORTED) return rc; /* a cuBLASLt plan: run it (has_logits follows the flag) */
    }
    return frt_cuda_gemm_run(g, stream, logits, FRT_CUDA_F32, x, h->w, n, H, V, 0);
}
