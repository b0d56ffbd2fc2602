/*
 * model/cuda/qwen35_glue.cu - the boundary-record kernels of the Qwen3.5
 * CUDA forward pass (qwen35_glue.h): the token journal and the end-of-step
 * advance (the greedy/sampled decision is frt_cuda_sample_token's). Each is a handful of scalar
 * writes; they exist so that the captured graphs update the state on the
 * device exactly as the cpu backend's host tasks do.
 */
#include "model/arch/qwen35/qwen35_glue.h"

#include "kernels/cuda/cuda_util.h"

static __device__ __forceinline__ int glue_count(const int32_t *d_n, int max_n)
{
    int n = d_n ? *d_n : max_n;
    return n < 0 ? 0 : (n > max_n ? max_n : n);
}

__global__ void journal_kernel(int32_t *tokens, const int32_t *ids, const int32_t *d_pos,
                               const int32_t *d_n, int max_n, int max_seq, uint8_t *seen,
                               int32_t *counts)
{
    const int n = glue_count(d_n, max_n);
    const int pos = *d_pos;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
        const long long p = (long long)pos + t;
        if (p >= 0 && p < max_seq) tokens[p] = ids[t];
        seen[ids[t]] = 1; /* the same byte from every thread that writes it */
    }
    /* decode: one row, one thread; no two threads count one id */
    if (counts && n == 1 && blockIdx.x == 0 && threadIdx.x == 0) counts[ids[0]]++;
}

extern "C" int frt_qwen35_journal(void *stream, int32_t *tokens, const int32_t *ids,
                                  const int32_t *d_pos, const int32_t *d_n, int max_n, int max_seq,
                                  uint8_t *seen, int32_t *counts)
{
    FRT_ARG(tokens && ids && d_pos && seen, "qwen35 journal: NULL pointer");
    FRT_ARG(max_n >= 1 && max_seq >= 1, "qwen35 journal: max_n %d max_seq %d", max_n, max_seq);
    FRT_ARG(!counts || max_n == 1, "qwen35 journal: counts for %d rows (decode only)", max_n);
    journal_kernel<<<frt_grid_blocks((size_t)max_n, 256, 64), 256, 0, (cudaStream_t)stream>>>(
        tokens, ids, d_pos, d_n, max_n, max_seq, seen, counts);
    FRT_LAUNCH_CHECK();
    return 0;
}

__global__ void advance_kernel(int32_t *d_pos, int32_t *d_pending, int32_t *d_has_logits,
                               int32_t *d_rows, const int32_t *d_n, const int32_t *d_no_logits,
                               int max_n)
{
    const int n = glue_count(d_n, max_n);
    *d_pos += n;
    *d_has_logits = d_no_logits ? !*d_no_logits : 1;
    *d_pending = -1;
    if (d_rows) *d_rows = n;
}

extern "C" int frt_qwen35_advance(void *stream, int32_t *d_pos, int32_t *d_pending,
                                  int32_t *d_has_logits, int32_t *d_rows, const int32_t *d_n,
                                  const int32_t *d_no_logits, int max_n)
{
    FRT_ARG(d_pos && d_pending && d_has_logits, "qwen35 advance: NULL pointer");
    FRT_ARG(max_n >= 1, "qwen35 advance: max_n %d", max_n);
    advance_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(d_pos, d_pending, d_has_logits, d_rows, d_n,
                                                      d_no_logits, max_n);
    FRT_LAUNCH_CHECK();
    return 0;
}

