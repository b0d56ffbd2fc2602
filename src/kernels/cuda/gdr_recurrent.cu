/*
 * kernels/cuda/gdr_recurrent.cu - the gated delta rule, token by token
 * (decode). Math: transformers 5.x modeling_qwen3_5.py,
 * torch_recurrent_gated_delta_rule, in the order of the CPU twin
 * frt_cpu_gdr_recurrent: per token, value head h and column j of S = state[h]
 * [dk, dv],
 *   S[a][j] *= exp(g);  kv_j = sum_a k[a] S[a][j]  (a ascending)
 *   delta_j = (v_j - kv_j) beta;  S[a][j] += k[a] delta_j;  o_j = sum_a (q[a] dk^-0.5) S[a][j]
 * Column j of S only ever meets column j, so the columns are independent:
 * one warp per (value head, 32 columns), lane jj owning column 32 by + jj
 * in shared memory (S[a][lane]: conflict-free), k and q of the token staged
 * in shared memory. No reduction across threads: deterministic, and the sums
 * run over the key dim in the twin's order. The token count is read from
 * device memory. Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define GDR_MAX_DK 256

__global__ __launch_bounds__(32) void gdr_recurrent_kernel(
    void *out, int out_dt, float *state, const void *q, const void *k, const void *v, int in_dt,
    const float *g, const float *beta, const int32_t *d_n, int max_n, int n_k_heads,
    int n_v_heads, int dk, int dv, float scale)
{
    extern __shared__ float sm[];
    float *S = sm;             /* [dk][32] */
    float *ks = S + dk * 32;   /* [dk] */
    float *qs = ks + dk;       /* [dk], already scaled */
    const int lane = threadIdx.x;
    const int h = blockIdx.x, kh = h / (n_v_heads / n_k_heads);
    const int j = blockIdx.y * 32 + lane;
    const bool col = j < dv;
    const int n = frt_dyn_n(d_n, max_n);
    float *Sg = state + (size_t)h * dk * dv;

    for (int a = 0; a < dk; a++) S[a * 32 + lane] = col ? Sg[(size_t)a * dv + j] : 0.0f;
    for (int t = 0; t < n; t++) {
        __syncwarp(); /* the previous token's ks / qs are consumed */
        const size_t qk = ((size_t)t * n_k_heads + kh) * dk;
        for (int a = lane; a < dk; a += 32) {
            ks[a] = frt_ld(k, in_dt, qk + a);
            qs[a] = frt_ld(q, in_dt, qk + a) * scale;
        }
        __syncwarp();
        const float decay = expf(g[(size_t)t * n_v_heads + h]);
        const float b = beta[(size_t)t * n_v_heads + h];
        float kv = 0.0f;
        for (int a = 0; a < dk; a++) {
            const float s = S[a * 32 + lane] * decay;
            S[a * 32 + lane] = s;
            kv += ks[a] * s;
        }
        const size_t vo = ((size_t)t * n_v_heads + h) * dv + j;
        const float delta = col ? (frt_ld(v, in_dt, vo) - kv) * b : 0.0f;
        float o = 0.0f;
        for (int a = 0; a < dk; a++) {
            const float s = S[a * 32 + lane] + ks[a] * delta;
            S[a * 32 + lane] = s;
            o += qs[a] * s;
        }
        if (col) frt_st(out, out_dt, vo, o);
    }
    if (col)
        for (int a = 0; a < dk; a++) Sg[(size_t)a * dv + j] = S[a * 32 + lane];
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
    const size_t smem = ((size_t)dk * 32 + 2 * (size_t)dk) * sizeof(float);
    dim3 grid((unsigned int)n_v_heads, (unsigned int)((dv + 31) / 32));
    gdr_recurrent_kernel<<<grid, 32, smem, (cudaStream_t)stream>>>(
        out, out_dtype, state, q, k, v, in_dtype, g, beta, d_n, max_n, n_k_heads, n_v_heads, dk,
        dv, scale);
    FRT_LAUNCH_CHECK();
    return 0;
}
