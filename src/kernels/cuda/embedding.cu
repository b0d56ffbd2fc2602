/*
 * kernels/cuda/embedding.cu - token embedding gather from a bf16 table
 * (HF embed_tokens). One block per token row; rows t >= *d_n exit. The ids and
 * the count are read from device memory. CPU twin: frt_cpu_embedding_bf16.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

__global__ void embedding_kernel(void *out, int out_dt, const __nv_bfloat16 *table, int vocab,
                                 int dim, const int32_t *ids, const int32_t *d_n, int max_n)
{
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) return;
    const int id = ids[t];
    const size_t o = (size_t)t * dim;
    if (id < 0 || id >= vocab) {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) frt_st(out, out_dt, o + i, 0.0f);
        return;
    }
    const __nv_bfloat16 *row = table + (size_t)id * dim;
    if (out_dt == FRT_CUDA_BF16) {
        __nv_bfloat16 *y = (__nv_bfloat16 *)out + o;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) y[i] = row[i];
    } else {
        float *y = (float *)out + o;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) y[i] = __bfloat162float(row[i]);
    }
}

extern "C" int frt_cuda_embedding(void *stream, void *out, frt_cuda_dtype out_dtype,
                                  const uint16_t *table, int vocab, int dim, const int32_t *d_ids,
                                  const int32_t *d_n, int max_n)
{
    FRT_ARG(out && table && d_ids, "cuda embedding: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype), "cuda embedding: bad dtype %d", (int)out_dtype);
    FRT_ARG(vocab > 0 && dim > 0 && max_n >= 0, "cuda embedding: vocab %d dim %d max_n %d", vocab,
            dim, max_n);
    if (max_n == 0) return 0;
    embedding_kernel<<<max_n, 256, 0, (cudaStream_t)stream>>>(
        out, out_dtype, (const __nv_bfloat16 *)table, vocab, dim, d_ids, d_n, max_n);
    FRT_LAUNCH_CHECK();
    return 0;
}
