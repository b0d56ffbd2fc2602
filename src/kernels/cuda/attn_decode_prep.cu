/*
 * kernels/cuda/attn_decode_prep.cu - the pre-attention work of a full-attention
 * layer in a decode step (one token), in one launch: the q / gate split of the
 * fused q_proj output, RMSNorm of q and k per head (q_norm, k_norm), partial
 * RoPE of both, and the KV-cache append (k and v rounded to bf16).
 *
 * It replaces, with the same bits, the unfused sequence of the model runner
 * (src/model/cuda/qwen35_cuda.c, attention_block):
 *   copy_rows(q), copy_rows(gate), rmsnorm(q), rmsnorm(k), rope(q), rope(k),
 *   kv_append(k, v)
 * Math: rmsnorm.cu (Qwen3_5RMSNorm: fp64 sum of squares, var = (float)(sum /
 * dim), inv = 1 / sqrtf(var + eps), (x * inv) * (1 + w)) and rope.cu
 * (rotate-half, inv_freq from the host with the CPU twin's powf expression,
 * the fp32 angle pos * inv_freq, accurate cosf / sinf). To give the same bits
 * the norm uses rmsnorm.cu's launch shape for head_dim (norm_shape_of, copied
 * below: groups of 4 elements, thread i owns groups i, i + T, ..., the fp64
 * sum in that order, then frt_block_sum over T threads), so the reduction
 * order is identical; rope and the bf16 stores are elementwise.
 *
 * frt_cuda_attn_prep does the same for the max_n tokens of a prefill piece
 * (token t at position start + t, rows of the inputs at a stride: the q | k |
 * v columns of one fused GEMM output), replacing the same sequence there.
 * frt_cuda_attn_prep_fp8 appends to an FP8 E4M3 cache instead (KV8): K
 * after RoPE and V quantized with the static per-head scales as
 * frt_cuda_kv_append_fp8 does (e4m3_satfinite(x * __frcp_rn(scale)), the
 * same bits), replacing the unfused sequence of qwen35_cuda.c's
 * attention_fp8 (7 launches).
 *
 * One block per row: blockIdx.y is the token; blocks x in [0, n_heads) are
 * the query heads, [n_heads, n_heads + n_kv_heads) the KV heads. Every load of a row (x, the
 * norm weight, the gate or v row) is issued first (16-byte loads when
 * aligned), the gate / v copy is stored at once, the row is normalised into
 * shared memory, and after one barrier each thread rotates and stores its own
 * groups (a rotation reads the partner element at i +- rot_dim / 2 from
 * shared memory). Tested in tests/test_cuda_attn_prep.c.
 */
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/norm_util.h"

#include <math.h>

#define PREP_MAX_THREADS 512
#define PREP_MAX_NV 4

struct prep_params {
    float inv_freq[FRT_CUDA_ROPE_MAX_ROT / 2];
};

/* The G values y of a cache row's group at element offset off: bf16 (RNE)
 * or, KV8, E4M3 codes of y * inv (one 4-byte store when vec). */
template <int G, bool KV8>
__device__ __forceinline__ void prep_st_kv(void *cache, size_t off, bool vec, const float (&y)[G], float inv)
{
    if constexpr (KV8) {
        uint8_t *c = (uint8_t *)cache + off;
        if (G == 4 && vec) {
            uint32_t u = 0;
#pragma unroll
            for (int e = 0; e < G; e++) u |= (uint32_t)frt_fp8_encode_inv(y[e], inv) << (8 * e);
            *(uint32_t *)c = u;
        } else {
#pragma unroll
            for (int e = 0; e < G; e++) c[e] = frt_fp8_encode_inv(y[e], inv);
        }
    } else {
        norm_st<G>((__nv_bfloat16 *)cache + off, FRT_CUDA_BF16, 0, vec, y);
    }
}

template <int G, int NV, bool KV8>
__global__ __launch_bounds__(PREP_MAX_THREADS) void attn_decode_prep_kernel(
    float *__restrict__ q_out, float *__restrict__ zg_out, void *__restrict__ k_cache,
    void *__restrict__ v_cache, const float *__restrict__ k_scale, const float *__restrict__ v_scale,
    const float *__restrict__ qg,
    const float *__restrict__ k, const float *__restrict__ v, const float *__restrict__ q_norm_w,
    const float *__restrict__ k_norm_w, const int32_t *d_start, const int32_t *d_n, int max_n,
    int max_seq, int n_heads, int n_kv_heads, int head_dim, int half, float eps, int zero_centered,
    int gated, bool vec, size_t qg_stride, size_t k_stride, size_t v_stride, const prep_params p)
{
    __shared__ float row[FRT_CUDA_ATTN_PREP_MAX_HD];
    __shared__ float cs[FRT_CUDA_ROPE_MAX_ROT / 2], sn[FRT_CUDA_ROPE_MAX_ROT / 2];
    /* launched with PDL: the attention after it may launch now (it waits
     * for this kernel before it reads q or the new cache rows); q, k, v come
     * from the kernels before */
    frt_pdl_trigger();
    frt_pdl_wait();
    const int t = blockIdx.y;
    if (t >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    const int b = blockIdx.x;
    const bool is_q = b < n_heads;
    const int start = frt_dyn_pos(d_start);
    const int pos = start + t;
    const int kvh = b - n_heads;
    if (!is_q && pos >= max_seq) return; /* the row is dropped (uniform over the block) */
    const float *x, *w, *cp;             /* cp: the row copied alongside (gate or v), or NULL */
    const size_t qrow = ((size_t)t * n_heads + b) * head_dim; /* q_out / zg_out row (query blocks) */
    if (is_q) {
        x = qg + t * qg_stride + (size_t)b * (gated ? 2 * head_dim : head_dim);
        w = q_norm_w;
        cp = gated ? x + head_dim : nullptr;
    } else {
        x = k + t * k_stride + (size_t)kvh * head_dim;
        w = k_norm_w;
        cp = v + t * v_stride + (size_t)kvh * head_dim;
    }
    const size_t dst_kv = ((size_t)pos * n_kv_heads + kvh) * head_dim; /* KV blocks only */
    const int groups = head_dim / G;
    const int T = blockDim.x;
    /* KV8: frt_cuda_kv_append_fp8's inverse scales of this KV head */
    const float inv_k = KV8 && !is_q ? __frcp_rn(k_scale[kvh]) : 0.0f;
    const float inv_v = KV8 && !is_q ? __frcp_rn(v_scale[kvh]) : 0.0f;
    float xv[NV][G], wv[NV][G], cv[NV][G];
    /* all loads first: x, w and the copied row of every owned group */
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int gi = threadIdx.x + j * T;
        if (gi < groups) {
            norm_ld<G>(x, FRT_CUDA_F32, (size_t)gi * G, vec, xv[j]);
            norm_ld<G>(w, FRT_CUDA_F32, (size_t)gi * G, vec, wv[j]);
            if (cp) norm_ld<G>(cp, FRT_CUDA_F32, (size_t)gi * G, vec, cv[j]);
        }
    }
    /* cos / sin of the position, as rope.cu (its angle of token t is
     * (float)(start + t) * inv_freq) */
    const float fpos = (float)(start + t);
    for (int i = threadIdx.x; i < half; i += T) {
        float a = fpos * p.inv_freq[i];
        cs[i] = cosf(a);
        sn[i] = sinf(a);
    }
    /* the gate / v copy */
    if (cp) {
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int gi = threadIdx.x + j * T;
            if (gi < groups) {
                if (is_q)
                    norm_st<G>(zg_out + qrow, FRT_CUDA_F32, (size_t)gi * G, vec, cv[j]);
                else
                    prep_st_kv<G, KV8>(v_cache, dst_kv + (size_t)gi * G, vec, cv[j], inv_v);
            }
        }
    }
    /* RMSNorm: the fp64 sum in rmsnorm_kernel's order */
    const double ss = norm_sumsq<G, NV>(xv, groups); /* its barriers also publish cs / sn */
    const float inv = norm_inv_rms(ss, head_dim, eps);
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int gi = threadIdx.x + j * T;
        if (gi < groups)
#pragma unroll
            for (int e = 0; e < G; e++)
                row[gi * G + e] = norm_weigh(xv[j][e], inv, wv[j][e], zero_centered);
    }
    __syncthreads();
    /* RoPE (rope_kernel's expressions) and the stores */
    const int rot = 2 * half;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int gi = threadIdx.x + j * T;
        if (gi < groups) {
            float y[G];
#pragma unroll
            for (int e = 0; e < G; e++) {
                const int i = gi * G + e;
                if (i < half) {
                    const float x1 = row[i], x2 = row[i + half];
                    const float c = cs[i], s = sn[i];
                    y[e] = x1 * c + (-x2) * s;
                } else if (i < rot) {
                    const float x1 = row[i - half], x2 = row[i];
                    const float c = cs[i - half], s = sn[i - half];
                    /* rope.cu's `x2 * c + x1 * s` compiles (nvcc -O3, PTX) to
                     * fma.rn(x1, s, x2 * c); the same expression here was
                     * contracted the other way round, so it is spelled out */
                    y[e] = __fmaf_rn(x1, s, __fmul_rn(x2, c));
                } else {
                    y[e] = row[i];
                }
            }
            if (is_q)
                norm_st<G>(q_out + qrow, FRT_CUDA_F32, (size_t)gi * G, vec, y);
            else
                prep_st_kv<G, KV8>(k_cache, dst_kv + (size_t)gi * G, vec, y, inv_k);
        }
    }
}

static bool prep_aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

#define PREP_LAUNCH(G, NV)                                                                                  \
    frt_pdl_launch(kv8 ? attn_decode_prep_kernel<G, NV, true> : attn_decode_prep_kernel<G, NV, false>, grid,   \
                   dim3(sh.threads), 0, stream, q_out, zg_out, k_cache, v_cache, k_scale, v_scale, qg, k, v,    \
                   q_norm_w, k_norm_w, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads, head_dim, half, eps,  \
                   zero_centered, gated, vec, (size_t)qg_stride, (size_t)k_stride, (size_t)v_stride, p)

/* frt_cuda_attn_prep (kv8 0: bf16 caches, the scales unused) and
 * frt_cuda_attn_prep_fp8 (kv8 1: E4M3 caches, per-head scales). */
static int prep_launch(void *stream, float *q_out, float *zg_out, void *k_cache, void *v_cache, int kv8,
                       const float *k_scale, const float *v_scale, const float *qg, int qg_stride, const float *k,
                       int k_stride, const float *v, int v_stride, const float *q_norm_w, const float *k_norm_w,
                       const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq, int n_heads,
                       int n_kv_heads, int head_dim, int rot_dim, float theta, float eps, int zero_centered,
                       int gated)
{
    FRT_ARG(q_out && k_cache && v_cache && qg && k && v && q_norm_w && k_norm_w && d_start,
            "cuda attn_decode_prep: NULL pointer");
    FRT_ARG(!kv8 || (k_scale && v_scale), "cuda attn_prep fp8: NULL scales");
    FRT_ARG(max_n >= 0 && max_n <= 65535, "cuda attn_prep: max_n %d (0..65535)", max_n);
    FRT_ARG(!gated || zg_out, "cuda attn_decode_prep: gated needs zg_out");
    FRT_ARG(max_seq > 0 && n_heads > 0 && n_kv_heads > 0,
            "cuda attn_decode_prep: max_seq %d n_heads %d n_kv_heads %d", max_seq, n_heads,
            n_kv_heads);
    FRT_ARG(head_dim > 0 && head_dim <= FRT_CUDA_ATTN_PREP_MAX_HD,
            "cuda attn_decode_prep: head_dim %d (1..%d)", head_dim, FRT_CUDA_ATTN_PREP_MAX_HD);
    FRT_ARG(rot_dim >= 2 && rot_dim % 2 == 0 && rot_dim <= head_dim &&
                rot_dim <= FRT_CUDA_ROPE_MAX_ROT,
            "cuda attn_decode_prep: rot_dim %d (even, 2..min(head_dim %d, %d))", rot_dim,
            head_dim, FRT_CUDA_ROPE_MAX_ROT);
    FRT_ARG(theta > 0.0f, "cuda attn_decode_prep: theta %g", (double)theta);
    FRT_ARG((long long)n_heads + n_kv_heads < (1ll << 31) &&
                (long long)max_seq * n_kv_heads * head_dim < (1ll << 62),
            "cuda attn_decode_prep: too many heads");
    FRT_ARG((const float *)q_out != qg && (const float *)zg_out != qg &&
                (!gated || q_out != zg_out) && k_cache != v_cache,
            "cuda attn_decode_prep: an output aliases another buffer");
    FRT_ARG(max_n <= 1 || ((long long)qg_stride >= (long long)n_heads * (gated ? 2 : 1) * head_dim &&
                           (long long)k_stride >= (long long)n_kv_heads * head_dim &&
                           (long long)v_stride >= (long long)n_kv_heads * head_dim),
            "cuda attn_prep: row strides %d / %d / %d shorter than a token's row", qg_stride, k_stride,
            v_stride);
    if (max_n == 0) return 0;
    if (!gated) zg_out = NULL;
    /* the shape of the other norm kernels (the fp64 sum order, hence the bits,
     * depends on it); nv <= PREP_MAX_NV for head_dim <= FRT_CUDA_ATTN_PREP_MAX_HD */
    const norm_shape sh = norm_shape_of(head_dim);
    if (sh.nv == 0 || sh.nv > PREP_MAX_NV)
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda attn_decode_prep: head_dim %d", head_dim);
    prep_params p;
    const int half = rot_dim / 2;
    for (int i = 0; i < FRT_CUDA_ROPE_MAX_ROT / 2; i++) /* rope.cu's very expression */
        p.inv_freq[i] = i < half ? 1.0f / powf(theta, (float)(2 * i) / (float)rot_dim) : 0.0f;
    const bool vec = sh.g == 4 && (max_n == 1 || (qg_stride % 4 == 0 && k_stride % 4 == 0 && v_stride % 4 == 0)) &&
                     prep_aligned(q_out, 16) && prep_aligned(qg, 16) &&
                     prep_aligned(k, 16) && prep_aligned(v, 16) && prep_aligned(q_norm_w, 16) &&
                     prep_aligned(k_norm_w, 16) && (!zg_out || prep_aligned(zg_out, 16)) &&
                     prep_aligned(k_cache, kv8 ? 4 : 8) && prep_aligned(v_cache, kv8 ? 4 : 8);
    const dim3 grid((unsigned int)(n_heads + n_kv_heads), (unsigned int)max_n);
    cudaError_t le;
    if (sh.g == 4) {
        switch (sh.nv) {
        case 1: le = PREP_LAUNCH(4, 1); break;
        case 2: le = PREP_LAUNCH(4, 2); break;
        default: le = PREP_LAUNCH(4, PREP_MAX_NV); break;
        }
    } else {
        switch (sh.nv) {
        case 1: le = PREP_LAUNCH(1, 1); break;
        case 2: le = PREP_LAUNCH(1, 2); break;
        default: le = PREP_LAUNCH(1, PREP_MAX_NV); break;
        }
    }
    FRT_CUDA_TRY(le);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_attn_prep(void *stream, float *q_out, float *zg_out, uint16_t *k_cache,
                                  uint16_t *v_cache, const float *qg, int qg_stride, const float *k,
                                  int k_stride, const float *v, int v_stride, const float *q_norm_w,
                                  const float *k_norm_w, const int32_t *d_start, const int32_t *d_n,
                                  int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                                  int rot_dim, float theta, float eps, int zero_centered, int gated)
{
    return prep_launch(stream, q_out, zg_out, k_cache, v_cache, 0, NULL, NULL, qg, qg_stride, k, k_stride, v,
                       v_stride, q_norm_w, k_norm_w, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads, head_dim,
                       rot_dim, theta, eps, zero_centered, gated);
}

extern "C" int frt_cuda_attn_prep_fp8(void *stream, float *q_out, float *zg_out, uint8_t *k_cache,
                                      uint8_t *v_cache, const float *k_scale, const float *v_scale,
                                      const float *qg, int qg_stride, const float *k, int k_stride,
                                      const float *v, int v_stride, const float *q_norm_w, const float *k_norm_w,
                                      const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                                      int n_heads, int n_kv_heads, int head_dim, int rot_dim, float theta,
                                      float eps, int zero_centered, int gated)
{
    return prep_launch(stream, q_out, zg_out, k_cache, v_cache, 1, k_scale, v_scale, qg, qg_stride, k, k_stride,
                       v, v_stride, q_norm_w, k_norm_w, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads,
                       head_dim, rot_dim, theta, eps, zero_centered, gated);
}

extern "C" int frt_cuda_attn_decode_prep(void *stream, float *q_out, float *zg_out,
                                         uint16_t *k_cache, uint16_t *v_cache, const float *qg,
                                         const float *k, const float *v, const float *q_norm_w,
                                         const float *k_norm_w, const int32_t *d_start,
                                         const int32_t *d_n, int max_seq, int n_heads,
                                         int n_kv_heads, int head_dim, int rot_dim, float theta,
                                         float eps, int zero_centered, int gated)
{
    return frt_cuda_attn_prep(stream, q_out, zg_out, k_cache, v_cache, qg, 0, k, 0, v, 0, q_norm_w, k_norm_w,
                              d_start, d_n, 1, max_seq, n_heads, n_kv_heads, head_dim, rot_dim, theta, eps,
                              zero_centered, gated);
}
