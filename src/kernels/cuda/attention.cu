/*
 * kernels/cuda/attention.cu - causal GQA attention over the bf16 KV cache:
 * the prefill form (one pass over the keys) and flash-decoding (the keys cut
 * into splits, per-split partials, then a combine kernel).
 * Math: transformers 5.x modeling_qwen3_5.py, eager_attention_forward with
 * the causal mask, softmax in fp32; computed as the CPU twin
 * frt_cpu_attention does, with an online softmax (running max m, running sum
 * l, the partial output rescaled by exp(m_old - m_new)), over tiles of 32 keys
 * instead of 128.
 *
 * Layout of the work. A block has 4 warps; warp w takes the (token, head)
 * pair p = 4 * blockIdx.x + w, enumerated as p = t * group + g over the heads
 * h = kvh * group + g that share KV head kvh = blockIdx.y, so a block's warps
 * share every K/V tile it stages in shared memory (decode with group 4: the 4
 * heads of one KV head). blockIdx.z is the split. For a tile of 32 keys, lane
 * j scores key j0 + j against the warp's query (K rows padded by one word:
 * conflict-free), the warp max and sum come from butterflies, and each lane
 * accumulates head_dim / 32 output dims (V read row by row). The valid token
 * count n and the start position are read from device memory: token t sees
 * cache rows 0 .. min(start + t, max_seq - 1); warps past n and tiles past
 * the last key do nothing, so one captured launch serves every position.
 *
 * Split form: the warp of (t, h) in split s writes (o unnormalised, m, l) to
 * the workspace iff split s holds a key of t (s * split_len < kend(t)); the
 * combine kernel reads exactly those splits, in ascending order:
 *   M = max m_s, L = sum l_s exp(m_s - M), out = sum o_s exp(m_s - M) / L.
 * Deterministic: no atomics, fixed orders. Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define ATT_WARPS 4
#define ATT_TILE 32

struct attn_args {
    void *out;
    int out_dt;
    const void *q;
    int q_dt;
    const __nv_bfloat16 *kc, *vc;
    const int32_t *d_start, *d_n;
    float *part; /* split partials [n_splits, max_n, n_heads, hd + 2], or NULL (one pass) */
    int max_n, max_seq, n_heads, n_kv, group, split_len;
    float scale;
};

template <int DPL> __global__ __launch_bounds__(ATT_WARPS * 32) void attn_kernel(const attn_args a)
{
    constexpr int HD = 32 * DPL;
    constexpr int KST = HD + 2; /* padded K row, in bf16 elements (one extra word) */
    __shared__ __align__(16) __nv_bfloat16 Ks[ATT_TILE * KST];
    __shared__ __align__(16) __nv_bfloat16 Vs[ATT_TILE * HD];
    __shared__ float Qs[ATT_WARPS][HD];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = frt_dyn_n(a.d_n, a.max_n);
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kvh = blockIdx.y;
    const int p0 = blockIdx.x * ATT_WARPS;
    if (p0 / a.group >= n) return; /* uniform: no valid pair in this block */
    const int t_last = min((p0 + ATT_WARPS - 1) / a.group, n - 1);
    const int s_lo = blockIdx.z * a.split_len;
    const int s_hi = s_lo + a.split_len;
    const int b_hi = min(min(start + t_last + 1, a.max_seq), s_hi); /* block's keys end */
    if (b_hi <= s_lo) return; /* uniform: no key of this block in this split */

    const int pair = p0 + warp;
    const int t = pair / a.group;
    const int h = kvh * a.group + pair % a.group;
    const bool active = t < n;
    const int kend = active ? min(start + t + 1, a.max_seq) : 0;
    const int w_hi = min(kend, s_hi); /* this warp's keys: [s_lo, w_hi) */

    if (active)
        for (int d = lane; d < HD; d += 32)
            Qs[warp][d] = frt_ld(a.q, a.q_dt, ((size_t)t * a.n_heads + h) * HD + d);

    float o[DPL];
#pragma unroll
    for (int mm = 0; mm < DPL; mm++) o[mm] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int j0 = s_lo; j0 < b_hi; j0 += ATT_TILE) {
        __syncthreads(); /* the previous tile is consumed; Qs is written */
        const int rows = min(ATT_TILE, b_hi - j0);
        for (int idx = threadIdx.x; idx < ATT_TILE * (HD / 2); idx += blockDim.x) {
            const int r = idx / (HD / 2), c2 = idx % (HD / 2);
            __nv_bfloat162 k2 = __floats2bfloat162_rn(0.0f, 0.0f), v2 = k2;
            if (r < rows) {
                const size_t g = ((size_t)(j0 + r) * a.n_kv + kvh) * HD + 2 * c2;
                k2 = *(const __nv_bfloat162 *)(a.kc + g);
                v2 = *(const __nv_bfloat162 *)(a.vc + g);
            }
            *(__nv_bfloat162 *)(Ks + r * KST + 2 * c2) = k2;
            *(__nv_bfloat162 *)(Vs + r * HD + 2 * c2) = v2;
        }
        __syncthreads();
        if (j0 < w_hi) { /* warp-uniform */
            const int j = j0 + lane;
            float s = -INFINITY;
            if (j < w_hi) {
                const __nv_bfloat16 *kr = Ks + lane * KST;
                const float *qw = Qs[warp];
                float acc = 0.0f;
#pragma unroll 8
                for (int d = 0; d < HD; d += 2) {
                    const float2 kf = __bfloat1622float2(*(const __nv_bfloat162 *)(kr + d));
                    acc += qw[d] * kf.x;
                    acc += qw[d + 1] * kf.y;
                }
                s = acc * a.scale;
            }
            const float mt = frt_warp_max(s); /* finite: key j0 < w_hi is lane 0's */
            const float mn = fmaxf(m, mt);
            const float corr = expf(m - mn); /* 0 on the first tile (m = -inf) */
            const float p = j < w_hi ? expf(s - mn) : 0.0f;
            l = l * corr + frt_warp_sum(p);
#pragma unroll
            for (int mm = 0; mm < DPL; mm++) o[mm] *= corr;
            const int cnt = min(ATT_TILE, w_hi - j0);
            for (int jj = 0; jj < cnt; jj++) {
                const float pj = __shfl_sync(0xffffffffu, p, jj);
                const __nv_bfloat16 *vr = Vs + jj * HD;
#pragma unroll
                for (int mm = 0; mm < DPL; mm++) o[mm] += pj * __bfloat162float(vr[lane + 32 * mm]);
            }
            m = mn;
        }
    }
    if (!active || w_hi <= s_lo) return;
    if (!a.part) {
        const float inv = 1.0f / l;
        const size_t ob = ((size_t)t * a.n_heads + h) * HD;
#pragma unroll
        for (int mm = 0; mm < DPL; mm++) frt_st(a.out, a.out_dt, ob + lane + 32 * mm, o[mm] * inv);
    } else {
        float *pp = a.part + (((size_t)blockIdx.z * a.max_n + t) * a.n_heads + h) * (HD + 2);
#pragma unroll
        for (int mm = 0; mm < DPL; mm++) pp[lane + 32 * mm] = o[mm];
        if (lane == 0) {
            pp[HD] = m;
            pp[HD + 1] = l;
        }
    }
}

/* One block (head_dim threads) per (token, head): merges the splits that
 * hold keys of the token, in ascending order. */
__global__ void attn_combine_kernel(const attn_args a, int hd)
{
    const int t = blockIdx.x / a.n_heads, h = blockIdx.x % a.n_heads;
    if (t >= frt_dyn_n(a.d_n, a.max_n)) return;
    const int start = min(frt_dyn_pos(a.d_start), a.max_seq);
    const int kend = min(start + t + 1, a.max_seq);
    const int ns = (kend + a.split_len - 1) / a.split_len;
    const size_t stride = (size_t)a.max_n * a.n_heads * (hd + 2);
    const float *p0 = a.part + ((size_t)t * a.n_heads + h) * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < ns; s++) M = fmaxf(M, p0[s * stride + hd]);
    float L = 0.0f;
    for (int s = 0; s < ns; s++) L += p0[s * stride + hd + 1] * expf(p0[s * stride + hd] - M);
    const size_t ob = ((size_t)t * a.n_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float O = 0.0f;
        for (int s = 0; s < ns; s++) O += p0[s * stride + d] * expf(p0[s * stride + hd] - M);
        frt_st(a.out, a.out_dt, ob + d, O / L);
    }
}

static int n_splits_of(int max_seq, int split_len)
{
    return (int)(((long long)max_seq + split_len - 1) / split_len);
}

extern "C" size_t frt_cuda_attention_workspace_bytes(int max_n, int max_seq, int n_heads,
                                                     int head_dim, int split_len)
{
    if (split_len <= 0 || max_n <= 0 || max_seq <= 0 || n_heads <= 0 || head_dim <= 0) return 0;
    return (size_t)n_splits_of(max_seq, split_len) * max_n * n_heads * (head_dim + 2) *
           sizeof(float);
}

extern "C" int frt_cuda_attention(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                  frt_cuda_dtype q_dtype, const uint16_t *k_cache,
                                  const uint16_t *v_cache, const int32_t *d_start,
                                  const int32_t *d_n, int max_n, int max_seq, int n_heads,
                                  int n_kv_heads, int head_dim, float scale, int split_len,
                                  void *workspace, size_t workspace_bytes)
{
    FRT_ARG(out && q && k_cache && v_cache && d_start, "cuda attention: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(q_dtype), "cuda attention: bad dtype");
    FRT_ARG(max_n >= 0 && max_seq > 0 && n_heads > 0 && n_kv_heads > 0 && n_kv_heads <= 65535 &&
                n_heads % n_kv_heads == 0,
            "cuda attention: max_n %d max_seq %d n_heads %d n_kv_heads %d", max_n, max_seq,
            n_heads, n_kv_heads);
    FRT_ARG(head_dim >= 32 && head_dim <= 256 && head_dim % 32 == 0,
            "cuda attention: head_dim %d (a multiple of 32, at most 256)", head_dim);
    FRT_ARG((long long)max_seq + max_n < (1ll << 30) && (long long)max_n * n_heads < (1ll << 30),
            "cuda attention: sizes too large");
    FRT_ARG(split_len >= 0 && split_len < (1 << 30), "cuda attention: split_len %d", split_len);
    FRT_ARG(out != q, "cuda attention: out aliases q");
    if (split_len > 0) {
        size_t need =
            frt_cuda_attention_workspace_bytes(max_n, max_seq, n_heads, head_dim, split_len);
        FRT_ARG(workspace && workspace_bytes >= need,
                "cuda attention: workspace of %zu bytes, %zu needed", workspace_bytes, need);
        FRT_ARG(n_splits_of(max_seq, split_len) <= 65535, "cuda attention: more than 65535 splits");
    }
    if (max_n == 0) return 0;

    attn_args a;
    a.out = out;
    a.out_dt = out_dtype;
    a.q = q;
    a.q_dt = q_dtype;
    a.kc = (const __nv_bfloat16 *)k_cache;
    a.vc = (const __nv_bfloat16 *)v_cache;
    a.d_start = d_start;
    a.d_n = d_n;
    a.max_n = max_n;
    a.max_seq = max_seq;
    a.n_heads = n_heads;
    a.n_kv = n_kv_heads;
    a.group = n_heads / n_kv_heads;
    a.scale = scale;
    if (split_len > 0) {
        a.split_len = split_len;
        a.part = (float *)workspace;
    } else {
        a.split_len = max_seq;
        a.part = NULL;
    }
    const int n_splits = n_splits_of(max_seq, a.split_len);
    const long long pairs = (long long)max_n * a.group;
    dim3 grid((unsigned int)((pairs + ATT_WARPS - 1) / ATT_WARPS), (unsigned int)n_kv_heads,
              (unsigned int)n_splits);
    cudaStream_t s = (cudaStream_t)stream;
    switch (head_dim / 32) {
    case 1: attn_kernel<1><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 2: attn_kernel<2><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 3: attn_kernel<3><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 4: attn_kernel<4><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 5: attn_kernel<5><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 6: attn_kernel<6><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    case 7: attn_kernel<7><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    default: attn_kernel<8><<<grid, ATT_WARPS * 32, 0, s>>>(a); break;
    }
    FRT_LAUNCH_CHECK();
    if (a.part) {
        attn_combine_kernel<<<(unsigned int)(max_n * n_heads), head_dim, 0, s>>>(a, head_dim);
        FRT_LAUNCH_CHECK();
    }
    return 0;
}
