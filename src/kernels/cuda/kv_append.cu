/*
 * kernels/cuda/kv_append.cu - writes a block's K and V rows (rounded to bf16)
 * into the KV cache at the position read from device memory:
 * cache[*d_start + t] = bf16(src[t]) for t < *d_n. One block per token;
 * rows past max_seq are dropped. Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

__global__ void kv_append_kernel(__nv_bfloat16 *k_cache, __nv_bfloat16 *v_cache, const void *k,
                                 const void *v, int src_dt, const int32_t *d_start,
                                 const int32_t *d_n, int max_n, int max_seq, int row_len)
{
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) return;
    const long long row = (long long)frt_dyn_pos(d_start) + t;
    if (row >= max_seq) return;
    const size_t dst = (size_t)row * row_len, src = (size_t)t * row_len;
    for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
        k_cache[dst + i] = __float2bfloat16_rn(frt_ld(k, src_dt, src + i));
        v_cache[dst + i] = __float2bfloat16_rn(frt_ld(v, src_dt, src + i));
    }
}

extern "C" int frt_cuda_kv_append(void *stream, uint16_t *k_cache, uint16_t *v_cache,
                                  const void *k, const void *v, frt_cuda_dtype src_dtype,
                                  const int32_t *d_start, const int32_t *d_n, int max_n,
                                  int max_seq, int n_kv_heads, int head_dim)
{
    FRT_ARG(k_cache && v_cache && k && v && d_start, "cuda kv_append: NULL pointer");
    FRT_ARG(frt_dtype_ok(src_dtype), "cuda kv_append: bad dtype");
    FRT_ARG(max_n >= 0 && max_seq > 0 && n_kv_heads > 0 && head_dim > 0,
            "cuda kv_append: max_n %d max_seq %d n_kv_heads %d head_dim %d", max_n, max_seq,
            n_kv_heads, head_dim);
    FRT_ARG((long long)n_kv_heads * head_dim < (1ll << 31), "cuda kv_append: row too long");
    if (max_n == 0) return 0;
    kv_append_kernel<<<max_n, 256, 0, (cudaStream_t)stream>>>(
        (__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache, k, v, src_dtype, d_start, d_n, max_n,
        max_seq, n_kv_heads * head_dim);
    FRT_LAUNCH_CHECK();
    return 0;
}
