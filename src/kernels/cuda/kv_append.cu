/*
 * kernels/cuda/kv_append.cu - writes a block's K and V rows into the KV
 * cache at the position read from device memory, for t < *d_n:
 *   bf16 cache:  cache[*d_start + t] = bf16(src[t])
 *   FP8 cache:   cache[*d_start + t, j] = e4m3(src[t, j] / scale[j]) per KV
 *                head j (fp8_util.h: the CPU codec's bits)
 * One block per token; rows past max_seq are dropped. Tested in
 * tests/test_cuda_kernels.c (bf16) and tests/test_cuda_fp8_kv.c (FP8).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"

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

/* FP8: the K and V rows of token blockIdx.x, each element scaled by its KV
 * head's inverse scale (inverses computed once per head in shared memory). */
__global__ void kv_append_fp8_kernel(uint8_t *k_cache, uint8_t *v_cache, const float *k, const float *v,
                                     const float *k_scale, const float *v_scale, const int32_t *d_start,
                                     const int32_t *d_n, int max_n, int max_seq, int n_kv, int head_dim)
{
    extern __shared__ float inv[]; /* [2, n_kv]: 1 / k_scale, 1 / v_scale */
    for (int j = threadIdx.x; j < n_kv; j += blockDim.x) {
        inv[j] = __frcp_rn(k_scale[j]);
        inv[n_kv + j] = __frcp_rn(v_scale[j]);
    }
    __syncthreads();
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) return;
    const long long row = (long long)frt_dyn_pos(d_start) + t;
    if (row >= max_seq) return;
    const int row_len = n_kv * head_dim;
    const size_t dst = (size_t)row * row_len, src = (size_t)t * row_len;
    for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
        const int j = i / head_dim;
        k_cache[dst + i] = frt_fp8_encode_inv(k[src + i], inv[j]);
        v_cache[dst + i] = frt_fp8_encode_inv(v[src + i], inv[n_kv + j]);
    }
}

extern "C" int frt_cuda_kv_append_fp8(void *stream, uint8_t *k_cache, uint8_t *v_cache, const float *k,
                                      const float *v, const float *k_scale, const float *v_scale,
                                      const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                                      int n_kv_heads, int head_dim)
{
    FRT_ARG(k_cache && v_cache && k && v && k_scale && v_scale && d_start, "cuda kv_append fp8: NULL pointer");
    FRT_ARG(max_n >= 0 && max_seq > 0 && n_kv_heads > 0 && n_kv_heads <= 4096 && head_dim > 0,
            "cuda kv_append fp8: max_n %d max_seq %d n_kv_heads %d head_dim %d", max_n, max_seq, n_kv_heads,
            head_dim);
    FRT_ARG((long long)n_kv_heads * head_dim < (1ll << 31), "cuda kv_append fp8: row too long");
    if (max_n == 0) return 0;
    kv_append_fp8_kernel<<<max_n, 256, 2 * (size_t)n_kv_heads * sizeof(float), (cudaStream_t)stream>>>(
        k_cache, v_cache, k, v, k_scale, v_scale, d_start, d_n, max_n, max_seq, n_kv_heads, head_dim);
    FRT_LAUNCH_CHECK();
    return 0;
}
