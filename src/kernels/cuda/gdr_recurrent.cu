/*
 * kernels/cuda/gdr_recurrent.cu - the gated delta rule, token by token
 * (decode). Math: transformers 5.x modeling_qwen3_5.py,
 * torch_recurrent_gated_delta_rule, with the operations of the CPU twin
 * frt_cpu_gdr_recurrent: per token, value head h and column j of
 * S = state[h] [dk, dv],
 *   S[a][j] *= exp(g);  kv_j = sum_a k[a] S[a][j]
 *   delta_j = (v_j - kv_j) beta;  S[a][j] += k[a] delta_j;  o_j = sum_a (q[a] dk^-0.5) S[a][j]
 * Column j of S only ever meets column j, so the columns are independent.
 *
 * Layout: one block of GDR_WARPS (8) warps per (value head, 32 columns):
 * lane jj owns column 32 * blockIdx.y + jj, warp w owns the key rows
 * [w * rw, (w + 1) * rw) (rw = ceil(dk / 8)), and the thread keeps its rw
 * state values in registers for the whole call: the state is read once
 * (every load issued up front, 128-byte coalesced rows) and written once.
 * Per token, k and q go to shared memory; each warp sums its rows in
 * ascending order and the 8 partial sums of kv_j (then of o_j) are added in
 * warp order 0..7 through shared memory: a fixed order (not the twin's
 * single ascending sum; the tolerance decides), so the bits depend only on
 * dk. Qwen3.5-9B decode (32 value heads, dk = dv = 128): 128 blocks of 256
 * threads, 16 state values per thread, 2 MiB read + 2 MiB written. The token
 * count is read from device memory; tokens run in order, so one launch of n
 * tokens gives the bits of n launches of one. Tested in
 * tests/test_cuda_kernels.c, tests/test_cuda_decode.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define GDR_MAX_DK 256
#define GDR_WARPS 8

template <int RW>
__global__ __launch_bounds__(GDR_WARPS * 32, 1) void gdr_recurrent_kernel(
    void *out, int out_dt, float *state, const void *q, const void *k, const void *v, int in_dt,
    const float *g, const float *beta, const int32_t *d_n, int max_n, int n_k_heads,
    int n_v_heads, int dk, int dv, float scale)
{
    __shared__ float ks[GDR_MAX_DK], qs[GDR_MAX_DK]; /* qs already scaled */
    __shared__ float red_kv[GDR_WARPS][32], red_o[GDR_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.x, kh = h / (n_v_heads / n_k_heads);
    const int j = blockIdx.y * 32 + lane;
    const bool col = j < dv;
    const int rw = (dk + GDR_WARPS - 1) / GDR_WARPS; /* <= RW */
    const int a0 = warp * rw;
    const int nr = min(rw, dk - a0); /* this warp's rows (<= 0 for trailing warps) */
    const int n = frt_dyn_n(d_n, max_n);
    if (n == 0) return; /* uniform: nothing to do, the state stays */
    float *Sg = state + (size_t)h * dk * dv;

    float S[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) {
        S[r] = (r < nr && col) ? Sg[(size_t)(a0 + r) * dv + j] : 0.0f;
    }
    for (int t = 0; t < n; t++) {
        /* the previous token's ks / qs / red_* were consumed before its last
         * barrier, so they may be overwritten here */
        const size_t qk = ((size_t)t * n_k_heads + kh) * dk;
        for (int a = threadIdx.x; a < dk; a += blockDim.x) {
            ks[a] = frt_ld(k, in_dt, qk + a);
            qs[a] = frt_ld(q, in_dt, qk + a) * scale;
        }
        const size_t vo = ((size_t)t * n_v_heads + h) * dv + j;
        const float vj = col ? frt_ld(v, in_dt, vo) : 0.0f;
        const float decay = expf(g[(size_t)t * n_v_heads + h]);
        const float b = beta[(size_t)t * n_v_heads + h];
        __syncthreads();

        float kvp = 0.0f;
#pragma unroll
        for (int r = 0; r < RW; r++) {
            if (r < nr) {
                const float s = S[r] * decay;
                S[r] = s;
                kvp += ks[a0 + r] * s;
            }
        }
        red_kv[warp][lane] = kvp;
        __syncthreads();
        float kv = 0.0f;
#pragma unroll
        for (int w = 0; w < GDR_WARPS; w++) kv += red_kv[w][lane];
        const float delta = col ? (vj - kv) * b : 0.0f;

        float op = 0.0f;
#pragma unroll
        for (int r = 0; r < RW; r++) {
            if (r < nr) {
                const float s = S[r] + ks[a0 + r] * delta;
                S[r] = s;
                op += qs[a0 + r] * s;
            }
        }
        red_o[warp][lane] = op;
        __syncthreads();
        if (warp == 0 && col) {
            float o = 0.0f;
#pragma unroll
            for (int w = 0; w < GDR_WARPS; w++) o += red_o[w][lane];
            frt_st(out, out_dt, vo, o);
        }
    }
    if (col) {
#pragma unroll
        for (int r = 0; r < RW; r++) {
            if (r < nr) Sg[(size_t)(a0 + r) * dv + j] = S[r];
        }
    }
}

extern "C" int frt_cuda_gdr_recurrent(void *stream, void *out, frt_cuda_dtype out_dtype,
                                      float *state, const void *q, const void *k, const void *v,
                                      frt_cuda_dtype in_dtype, const float *g, const float *beta,
                                      const int32_t *d_n, int max_n, int n_k_heads, int n_v_heads,
                                      int dk, int dv)
{
    FRT_ARG(out && state && q && k && v && g && beta, "cuda gdr_recurrent: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(in_dtype), "cuda gdr_recurrent: bad dtype");
    FRT_ARG(max_n >= 0 && n_k_heads > 0 && n_v_heads > 0 && n_v_heads % n_k_heads == 0,
            "cuda gdr_recurrent: max_n %d n_k_heads %d n_v_heads %d", max_n, n_k_heads, n_v_heads);
    FRT_ARG(dk >= 1 && dk <= GDR_MAX_DK && dv >= 1 && dv <= 65535 * 32,
            "cuda gdr_recurrent: dk %d (1..%d) dv %d", dk, GDR_MAX_DK, dv);
    if (max_n == 0) return 0;
    const float scale = (float)(1.0 / sqrt((double)dk));
    const int rw = (dk + GDR_WARPS - 1) / GDR_WARPS;
    dim3 grid((unsigned int)n_v_heads, (unsigned int)((dv + 31) / 32));
    cudaStream_t s = (cudaStream_t)stream;
#define GDR_LAUNCH(RW)                                                                            \
    gdr_recurrent_kernel<RW><<<grid, GDR_WARPS * 32, 0, s>>>(out, out_dtype, state, q, k, v,      \
                                                             in_dtype, g, beta, d_n, max_n,       \
                                                             n_k_heads, n_v_heads, dk, dv, scale)
    if (rw <= 4)
        GDR_LAUNCH(4);
    else if (rw <= 8)
        GDR_LAUNCH(8);
    else if (rw <= 16)
        GDR_LAUNCH(16);
    else
        GDR_LAUNCH(32);
#undef GDR_LAUNCH
    FRT_LAUNCH_CHECK();
    return 0;
}
