/*
 * arch/dense/dense_glue.cu - a Linear's bias and RoPE from a frequency
 * table, for the dense CUDA forward pass (dense_glue.h). Elementwise: one
 * thread per output element (bias) or per (token, head, pair) (RoPE); no
 * reductions, so the bits do not depend on the launch shape.
 */
#include "model/arch/dense/dense_glue.h"

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/norm_util.h"

static __device__ __forceinline__ int dense_count(const int32_t *d_n, int max_n)
{
    int n = d_n ? *d_n : max_n;
    return n < 0 ? 0 : (n > max_n ? max_n : n);
}

__global__ void bias_add_kernel(float *y, const float *b, const int32_t *d_n, int max_n, int dim)
{
    const long long total = (long long)dense_count(d_n, max_n) * dim;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x)
        y[i] += b[i % dim];
}

extern "C" int frt_dense_bias_add(void *stream, float *y, const float *b, const int32_t *d_n, int max_n, int dim)
{
    FRT_ARG(y && b, "dense bias: NULL pointer");
    FRT_ARG(max_n >= 1 && dim >= 1, "dense bias: max_n %d dim %d", max_n, dim);
    bias_add_kernel<<<frt_grid_blocks((size_t)max_n * (size_t)dim, 256, 1024), 256, 0, (cudaStream_t)stream>>>(
        y, b, d_n, max_n, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* The pair (x1, x2) = (x[p], x[p + half]) of a head rotated by angle a
 * (rotate-half), in the one expression every dense RoPE kernel uses. */
static __device__ __forceinline__ void rope_rotate(float x1, float x2, float a, float *r1, float *r2)
{
    const float c = cosf(a), s = sinf(a);
    *r1 = x1 * c + (-x2) * s;
    *r2 = x2 * c + x1 * s;
}

/* Rotates the pair (p, p + half) of one head by angle a (rope_rotate):
 * from the head at src (plus the head's bias b where b is not NULL: the
 * f32 sum a bias launch would have stored) into the head at dst (src
 * itself: in place). */
static __device__ __forceinline__ void rope_pair_to(const float *src, float *dst, int p, int half, float a,
                                                    const float *b = NULL)
{
    float x1 = src[p], x2 = src[p + half], r1, r2;
    if (b) {
        x1 += b[p];
        x2 += b[p + half];
    }
    rope_rotate(x1, x2, a, &r1, &r2);
    dst[p] = r1;
    dst[p + half] = r2;
}

static __device__ __forceinline__ void rope_pair(float *xh, int p, int half, float a)
{
    rope_pair_to(xh, xh, p, half, a);
}

__global__ void rope_table_kernel(float *x, const float *inv_freq, const int32_t *d_start, const int32_t *d_n,
                                  int max_n, int n_heads, int head_dim)
{
    const int half = head_dim / 2;
    const long long total = (long long)dense_count(d_n, max_n) * n_heads * half;
    const int start = *d_start;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int p = (int)(i % half);
        const long long th = i / half; /* token * n_heads + head */
        const int t = (int)(th / n_heads);
        rope_pair(x + th * head_dim, p, half, (float)(start + t) * inv_freq[p]);
    }
}

extern "C" int frt_dense_rope_table(void *stream, float *x, const float *inv_freq, const int32_t *d_start,
                                    const int32_t *d_n, int max_n, int n_heads, int head_dim)
{
    FRT_ARG(x && inv_freq && d_start, "dense rope: NULL pointer");
    FRT_ARG(max_n >= 1 && n_heads >= 1 && head_dim >= 2 && head_dim <= 1024 && head_dim % 2 == 0,
            "dense rope: max_n %d heads %d head_dim %d", max_n, n_heads, head_dim);
    size_t total = (size_t)max_n * (size_t)n_heads * (size_t)(head_dim / 2);
    rope_table_kernel<<<frt_grid_blocks(total, 256, 1024), 256, 0, (cudaStream_t)stream>>>(
        x, inv_freq, d_start, d_n, max_n, n_heads, head_dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* Where the decode prep stores a K or V element: a bf16 cache (prep_bf16)
 * or an E4M3 cache with static per-KV-head scales (prep_fp8: the code of
 * x / scale[head] as frt_cuda_kv_append_fp8, fp8_util.h). off: the row's
 * first element in the cache; e: the element within the row. */
struct prep_bf16 {
    __nv_bfloat16 *k, *v;
    __device__ void put_k(size_t off, int e, float x) const { k[off + e] = __float2bfloat16_rn(x); }
    __device__ void put_v(size_t off, int e, float x) const { v[off + e] = __float2bfloat16_rn(x); }
    /* elements e .. e + 3 (e a multiple of 4: one 8-byte store), the bits of four put_k / put_v */
    __device__ static void put4(__nv_bfloat16 *c, size_t at, const float (&x)[4])
    {
        uint2 u;
        const __nv_bfloat162 a = __floats2bfloat162_rn(x[0], x[1]), b = __floats2bfloat162_rn(x[2], x[3]);
        u.x = *(const uint32_t *)&a;
        u.y = *(const uint32_t *)&b;
        *(uint2 *)(c + at) = u;
    }
    __device__ void put_k4(size_t off, int e, const float (&x)[4]) const { put4(k, off + e, x); }
    __device__ void put_v4(size_t off, int e, const float (&x)[4]) const { put4(v, off + e, x); }
};

struct prep_fp8 {
    uint8_t *k, *v;
    const float *ks, *vs; /* [n_kv] */
    int head_dim;
    __device__ void put_k(size_t off, int e, float x) const
    {
        k[off + e] = frt_fp8_encode_inv(x, __frcp_rn(ks[e / head_dim]));
    }
    __device__ void put_v(size_t off, int e, float x) const
    {
        v[off + e] = frt_fp8_encode_inv(x, __frcp_rn(vs[e / head_dim]));
    }
    /* elements e .. e + 3 of one head (e a multiple of 4, head_dim of 8) */
    __device__ static void put4(uint8_t *c, size_t at, float s, const float (&x)[4])
    {
        const float inv = __frcp_rn(s);
        uint32_t w = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) w |= (uint32_t)frt_fp8_encode_inv(x[j], inv) << (8 * j);
        *(uint32_t *)(c + at) = w;
    }
    __device__ void put_k4(size_t off, int e, const float (&x)[4]) const { put4(k, off + e, ks[e / head_dim], x); }
    __device__ void put_v4(size_t off, int e, const float (&x)[4]) const { put4(v, off + e, vs[e / head_dim], x); }
};

/* The branches' caches of the batched prep (device tables of n_branches
 * pointers); [b] is branch b's cache. The FP8 scales are the layer's,
 * shared by every branch. */
struct prep_bf16_tab {
    __nv_bfloat16 *const *k, *const *v;
    __device__ prep_bf16 operator[](int b) const { return prep_bf16{k[b], v[b]}; }
};

struct prep_fp8_tab {
    uint8_t *const *k, *const *v;
    const float *ks, *vs;
    int head_dim;
    __device__ prep_fp8 operator[](int b) const { return prep_fp8{k[b], v[b], ks, vs, head_dim}; }
};

/* The q, k and v biases a decode prep adds before RoPE and the append
 * (frt_dense_qkv_bias; all NULL: none). */
struct prep_bias {
    const float *q, *k, *v;
};

/* One sequence's decode token: RoPE of its q heads at *d_start (from qb
 * into qo: qb itself in place) and of its k heads, and its K (roped) and V
 * rows into the caches, each first plus its bias where bias has one. Item
 * i of the grid-stride loop is a q pair, a k pair (roped in place, then
 * both elements stored by the same thread: no barrier, so any number of
 * blocks) or a V element. */
template <class Cache>
__device__ __forceinline__ void prep_row(const float *qb, float *qo, float *kb, const float *vb,
                                         const float *inv_freq, const Cache &cache, int start, long long row,
                                         int max_seq, int n_heads, int n_kv, int head_dim, prep_bias bias = {},
                                         __nv_bfloat16 *q16 = NULL)
{
    const int half = head_dim / 2;
    const bool store = row < max_seq;
    const int row_len = n_kv * head_dim;
    const size_t off = (size_t)row * row_len;
    const int q_pairs = n_heads * half, k_end = q_pairs + n_kv * half, items = k_end + row_len;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < items; i += gridDim.x * blockDim.x) {
        if (i < k_end) {
            const int h = i / half, p = i % half;
            const bool is_k = h >= n_heads;
            const float a = (float)start * inv_freq[p];
            if (!is_k) {
                const size_t o = (size_t)h * head_dim;
                if (q16) { /* a prefill's q (no bias) roped, then rounded to bf16 (RNE) */
                    float r1, r2;
                    rope_rotate(qb[o + p], qb[o + p + half], a, &r1, &r2);
                    q16[o + p] = __float2bfloat16_rn(r1);
                    q16[o + p + half] = __float2bfloat16_rn(r2);
                } else {
                    rope_pair_to(qb + o, qo + o, p, half, a, bias.q ? bias.q + o : NULL);
                }
                continue;
            }
            float *kh = kb + (size_t)(h - n_heads) * head_dim;
            rope_pair_to(kh, kh, p, half, a, bias.k ? bias.k + (size_t)(h - n_heads) * head_dim : NULL);
            if (store) {
                const int e = (h - n_heads) * head_dim + p;
                cache.put_k(off, e, kb[e]);
                cache.put_k(off, e + half, kb[e + half]);
            }
        } else if (store) {
            const int e = i - k_end;
            cache.put_v(off, e, bias.v ? vb[e] + bias.v[e] : vb[e]);
        }
    }
}

/* prep_row for a prefill row with 4 consecutive elements an item (the
 * same expression on each element, so the same bits): item i is 4 pairs
 * (p .. p + 3, p + half .. p + half + 3) of a q or k head, or 4 V
 * elements; 16-byte loads and stores (head_dim a multiple of 8, every row
 * and pointer 16-byte aligned: prep4_ok). */
template <class Cache>
__device__ __forceinline__ void prep_row4(const float *qb, float *qo, float *kb, const float *vb,
                                          const float *inv_freq, const Cache &cache, int start, long long row,
                                          int max_seq, int n_heads, int n_kv, int head_dim, __nv_bfloat16 *q16)
{
    const int half = head_dim / 2, hq = half / 4;
    const bool store = row < max_seq;
    const int row_len = n_kv * head_dim;
    const size_t off = (size_t)row * row_len;
    const int k_end = (n_heads + n_kv) * hq, items = k_end + row_len / 4;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < items; i += gridDim.x * blockDim.x) {
        if (i < k_end) {
            const int h = i / hq, p = (i - h * hq) * 4;
            const bool is_k = h >= n_heads;
            const float *src = is_k ? kb + (size_t)(h - n_heads) * head_dim : qb + (size_t)h * head_dim;
            float *dst = is_k ? kb + (size_t)(h - n_heads) * head_dim : qo + (size_t)h * head_dim;
            const float4 f = *(const float4 *)(inv_freq + p);
            const float4 a = *(const float4 *)(src + p), b = *(const float4 *)(src + p + half);
            const float fr[4] = {f.x, f.y, f.z, f.w}, x1[4] = {a.x, a.y, a.z, a.w}, x2[4] = {b.x, b.y, b.z, b.w};
            float r1[4], r2[4];
#pragma unroll
            for (int j = 0; j < 4; j++) rope_rotate(x1[j], x2[j], (float)start * fr[j], &r1[j], &r2[j]);
            if (!is_k && q16) { /* q rounded to bf16 (RNE): 8-byte stores */
                prep_bf16::put4(q16 + (size_t)h * head_dim, p, r1);
                prep_bf16::put4(q16 + (size_t)h * head_dim, p + half, r2);
                continue;
            }
            *(float4 *)(dst + p) = make_float4(r1[0], r1[1], r1[2], r1[3]);
            *(float4 *)(dst + p + half) = make_float4(r2[0], r2[1], r2[2], r2[3]);
            if (is_k && store) {
                const int e = (h - n_heads) * head_dim + p;
                cache.put_k4(off, e, r1);
                cache.put_k4(off, e + half, r2);
            }
        } else if (store) {
            const int e = (i - k_end) * 4;
            const float4 v = *(const float4 *)(vb + e);
            const float x[4] = {v.x, v.y, v.z, v.w};
            cache.put_v4(off, e, x);
        }
    }
}

/* One sequence's decode token at *d_start (prep_row). */
template <class Cache>
__device__ __forceinline__ void decode_prep_one(float *qb, float *kb, const float *vb, const float *inv_freq,
                                                const Cache &cache, const int32_t *d_start, int max_seq, int n_heads,
                                                int n_kv, int head_dim, prep_bias bias)
{
    /* launched with PDL: the attention after it may launch now (it waits
     * for this kernel before it reads q or the new cache row); q, k, v come
     * from the kernels before */
    frt_pdl_trigger();
    frt_pdl_wait();
    prep_row(qb, qb, kb, vb, inv_freq, cache, *d_start, (long long)frt_dyn_pos(d_start), max_seq, n_heads, n_kv,
             head_dim, bias);
}

/* The rows of a prefill's q, k and v: row t's q at q + t * ldq (k, v
 * alike), its roped q to qo + t * n_heads * head_dim. */
struct prep_rows {
    const float *q;
    float *qo, *k;
    const float *v;
    long long ldq, ldk, ldv;
    __nv_bfloat16 *q16; /* non-NULL: row t's roped q to q16 + t * n_heads * head_dim as bf16 instead of qo */
};

/* A prefill's rows (frt_dense_prefill_prep{,_packed}{,_fp8}): row
 * blockIdx.y < n at position *d_start + row, the decode token's work on
 * each (V4: prep_row4, 4 elements an item, where prep4_ok; else prep_row). */
template <class Cache, bool V4>
__global__ void prefill_prep_kernel(prep_rows r, const float *inv_freq, Cache cache, const int32_t *d_start,
                                    const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv, int head_dim)
{
    frt_pdl_trigger(); /* the attention after it may launch and stage the rows below the position */
    frt_pdl_wait();
    const int t = blockIdx.y;
    if (t >= dense_count(d_n, max_n)) return;
    const int pos = *d_start + t;
    const size_t qrow = (size_t)t * n_heads * head_dim;
    const long long row = (long long)frt_dyn_pos(d_start) + t;
    __nv_bfloat16 *q16 = r.q16 ? r.q16 + qrow : NULL;
    if constexpr (V4)
        prep_row4(r.q + t * r.ldq, r.qo + qrow, r.k + t * r.ldk, r.v + t * r.ldv, inv_freq, cache, pos, row, max_seq,
                  n_heads, n_kv, head_dim, q16);
    else
        prep_row(r.q + t * r.ldq, r.qo + qrow, r.k + t * r.ldk, r.v + t * r.ldv, inv_freq, cache, pos, row, max_seq,
                 n_heads, n_kv, head_dim, prep_bias{}, q16);
}

/* Branch blockIdx.y (frt_dense_decode_prep_batch, _batch_fp8). */
template <class Tab>
__global__ void decode_prep_batch_kernel(float *q, float *k, const float *v, const float *inv_freq, Tab tab,
                                         const int32_t *const *starts, int max_seq, int n_heads, int n_kv,
                                         int head_dim, prep_bias bias)
{
    const int b = blockIdx.y;
    decode_prep_one(q + (size_t)b * n_heads * head_dim, k + (size_t)b * n_kv * head_dim,
                    v + (size_t)b * n_kv * head_dim, inv_freq, tab[b], starts[b], max_seq, n_heads, n_kv, head_dim,
                    bias);
}

/* The single sequence (frt_dense_decode_prep, _fp8). */
template <class Cache>
__global__ void decode_prep_kernel(float *q, float *k, const float *v, const float *inv_freq, Cache cache,
                                   const int32_t *d_start, int max_seq, int n_heads, int n_kv, int head_dim,
                                   prep_bias bias)
{
    decode_prep_one(q, k, v, inv_freq, cache, d_start, max_seq, n_heads, n_kv, head_dim, bias);
}

#define PREP_THREADS 128

/* Blocks a sequence: one item per thread (the pairs and the V row). */
static unsigned int decode_prep_blocks(int n_heads, int n_kv_heads, int head_dim)
{
    const long long items = (long long)(n_heads + n_kv_heads) * (head_dim / 2) + (long long)n_kv_heads * head_dim;
    const long long b = (items + PREP_THREADS - 1) / PREP_THREADS;
    return (unsigned int)(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}

/* The sizes every decode prep takes (n_branches 1 for one sequence). */
static int decode_prep_sizes(int n_branches, int max_seq, int n_heads, int n_kv_heads, int head_dim)
{
    FRT_ARG(n_branches >= 1 && n_branches <= 65535 && max_seq >= 1 && n_heads >= 1 && n_kv_heads >= 1 &&
                head_dim >= 2 && head_dim <= 1024 && head_dim % 2 == 0,
            "dense decode prep: branches %d max_seq %d heads %d / %d head_dim %d", n_branches, max_seq, n_heads,
            n_kv_heads, head_dim);
    return 0;
}

/* The biases of a decode prep: none for NULL, else all three non-NULL
 * (FRT_ERR_INVALID_ARGUMENT otherwise). */
static int bias_of(const frt_dense_qkv_bias *bias, prep_bias *out)
{
    *out = prep_bias{NULL, NULL, NULL};
    if (!bias) return 0;
    FRT_ARG(bias->q && bias->k && bias->v, "dense decode prep: a NULL bias");
    *out = prep_bias{bias->q, bias->k, bias->v};
    return 0;
}

/* One launch of decode_prep_kernel<Cache> (one sequence). */
template <class Cache>
static int decode_prep_launch(void *stream, float *q, float *k, const float *v, const float *inv_freq, Cache cache,
                              const int32_t *d_start, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                              const frt_dense_qkv_bias *bias)
{
    FRT_TRY(decode_prep_sizes(1, max_seq, n_heads, n_kv_heads, head_dim));
    prep_bias b;
    FRT_TRY(bias_of(bias, &b));
    FRT_CUDA_TRY(frt_pdl_launch(decode_prep_kernel<Cache>, dim3(decode_prep_blocks(n_heads, n_kv_heads, head_dim)),
                                dim3(PREP_THREADS), 0, stream, q, k, v, inv_freq, cache, d_start, max_seq, n_heads,
                                n_kv_heads, head_dim, b));
    FRT_LAUNCH_CHECK();
    return 0;
}

/* One launch of decode_prep_batch_kernel<Tab>, blockIdx.y the branch. */
template <class Tab>
static int decode_prep_batch_launch(void *stream, float *q, float *k, const float *v, const float *inv_freq, Tab tab,
                                    const int32_t *const *d_starts, int n_branches, int max_seq, int n_heads,
                                    int n_kv_heads, int head_dim, const frt_dense_qkv_bias *bias)
{
    prep_bias b;
    FRT_TRY(bias_of(bias, &b));
    FRT_TRY(decode_prep_sizes(n_branches, max_seq, n_heads, n_kv_heads, head_dim));
    dim3 grid(decode_prep_blocks(n_heads, n_kv_heads, head_dim), (unsigned int)n_branches);
    FRT_CUDA_TRY(frt_pdl_launch(decode_prep_batch_kernel<Tab>, grid, dim3(PREP_THREADS), 0, stream, q, k, v, inv_freq,
                                tab, d_starts, max_seq, n_heads, n_kv_heads, head_dim, b));
    FRT_LAUNCH_CHECK();
    return 0;
}

static bool al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Whether a prefill's rows take prep_row4: head_dim a multiple of 8, the
 * rows' strides multiples of 4 floats, every base 16-byte aligned. */
template <class Cache>
static bool prep4_ok(const prep_rows &r, const float *inv_freq, const Cache &cache, int head_dim)
{
    return head_dim % 8 == 0 && r.ldq % 4 == 0 && r.ldk % 4 == 0 && r.ldv % 4 == 0 && al16(r.q) && al16(r.qo) &&
           al16(r.k) && al16(r.v) && al16(inv_freq) && al16(cache.k) && al16(cache.v) && al16(r.q16);
}

/* One launch of prefill_prep_kernel<Cache, prep4_ok>: blockIdx.y the row. */
template <class Cache>
static int prefill_prep_launch(void *stream, const prep_rows &r, const float *inv_freq, Cache cache,
                               const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq, int n_heads,
                               int n_kv_heads, int head_dim)
{
    FRT_TRY(decode_prep_sizes(1, max_seq, n_heads, n_kv_heads, head_dim));
    FRT_ARG(max_n >= 1 && max_n <= 65535, "dense prefill prep: max_n %d", max_n);
    if (prep4_ok(r, inv_freq, cache, head_dim)) {
        const long long items = (long long)(n_heads + n_kv_heads) * (head_dim / 8) + (long long)n_kv_heads * head_dim / 4;
        dim3 grid((unsigned int)((items + PREP_THREADS - 1) / PREP_THREADS), (unsigned int)max_n);
        FRT_CUDA_TRY(frt_pdl_launch(prefill_prep_kernel<Cache, true>, grid, dim3(PREP_THREADS), 0, stream, r,
                                    inv_freq, cache, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads, head_dim));
        FRT_LAUNCH_CHECK();
        return 0;
    }
    dim3 grid(decode_prep_blocks(n_heads, n_kv_heads, head_dim), (unsigned int)max_n);
    FRT_CUDA_TRY(frt_pdl_launch(prefill_prep_kernel<Cache, false>, grid, dim3(PREP_THREADS), 0, stream, r, inv_freq,
                                cache, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads, head_dim));
    FRT_LAUNCH_CHECK();
    return 0;
}

/* Separate q [max_n, n_heads * head_dim], k and v [max_n, n_kv * head_dim]
 * (q roped in place). */
static prep_rows rows_apart(float *q, float *k, const float *v, int n_heads, int n_kv_heads, int head_dim,
                            uint16_t *q16)
{
    return prep_rows{q, q, k, v, (long long)n_heads * head_dim, (long long)n_kv_heads * head_dim,
                     (long long)n_kv_heads * head_dim, (__nv_bfloat16 *)q16};
}

/* q16 [max_n, n_heads * head_dim] bf16 must not overlap the f32 rows
 * [max_n, ld] at rows (FRT_ERR_INVALID_ARGUMENT). */
static int q16_apart(const uint16_t *q16, const float *rows, long long ld, int max_n, int n_heads, int head_dim)
{
    if (!q16) return 0;
    const char *a = (const char *)rows, *b = (const char *)q16;
    FRT_ARG(b + (size_t)max_n * n_heads * head_dim * 2 <= a || a + (size_t)max_n * ld * sizeof(float) <= b,
            "dense prefill prep: q16 overlaps q");
    return 0;
}

/* One GEMM's rows qkv [max_n, ld] = q | k | v (q roped into q_out); NULL
 * pointers, ld < the three widths or q_out inside qkv's rows:
 * FRT_ERR_INVALID_ARGUMENT. */
static int rows_packed(prep_rows *r, float *qkv, int ld, float *q_out, uint16_t *q16, int max_n, int n_heads,
                       int n_kv_heads, int head_dim)
{
    FRT_ARG(qkv && (!q_out != !q16), "dense prefill prep packed: NULL qkv, or not one of q_out and q16");
    const long long qd = (long long)n_heads * head_dim, kvd = (long long)n_kv_heads * head_dim;
    FRT_ARG(ld >= qd + 2 * kvd, "dense prefill prep packed: ld %d < %lld", ld, qd + 2 * kvd);
    const char *a = (const char *)qkv, *b = q_out ? (const char *)q_out : (const char *)q16;
    const size_t qbytes = (size_t)max_n * qd * (q_out ? sizeof(float) : 2);
    FRT_ARG(b + qbytes <= a || a + (size_t)max_n * ld * sizeof(float) <= b,
            "dense prefill prep packed: q_out or q16 overlaps qkv");
    /* q16: qo is never written; qkv's own q (its alignment is checked, not written) stands in */
    *r = prep_rows{qkv, q_out ? q_out : qkv, qkv + qd, qkv + qd + kvd, ld, ld, ld, (__nv_bfloat16 *)q16};
    return 0;
}

extern "C" int frt_dense_prefill_prep(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                      uint16_t *k_cache, uint16_t *v_cache, const int32_t *d_start,
                                      const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv_heads,
                                      int head_dim, uint16_t *q16)
{
    FRT_ARG(q && k && v && inv_freq && k_cache && v_cache && d_start, "dense prefill prep: NULL pointer");
    FRT_TRY(q16_apart(q16, q, (long long)n_heads * head_dim, max_n, n_heads, head_dim));
    const prep_bf16 cache = {(__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache};
    return prefill_prep_launch(stream, rows_apart(q, k, v, n_heads, n_kv_heads, head_dim, q16), inv_freq, cache,
                               d_start, d_n, max_n, max_seq, n_heads, n_kv_heads, head_dim);
}

extern "C" int frt_dense_prefill_prep_fp8(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                          uint8_t *k_cache, uint8_t *v_cache, const float *k_scale,
                                          const float *v_scale, const int32_t *d_start, const int32_t *d_n,
                                          int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                                          uint16_t *q16)
{
    FRT_ARG(q && k && v && inv_freq && k_cache && v_cache && k_scale && v_scale && d_start,
            "dense prefill prep fp8: NULL pointer");
    FRT_TRY(q16_apart(q16, q, (long long)n_heads * head_dim, max_n, n_heads, head_dim));
    const prep_fp8 cache = {k_cache, v_cache, k_scale, v_scale, head_dim};
    return prefill_prep_launch(stream, rows_apart(q, k, v, n_heads, n_kv_heads, head_dim, q16), inv_freq, cache,
                               d_start, d_n, max_n, max_seq, n_heads, n_kv_heads, head_dim);
}

extern "C" int frt_dense_prefill_prep_packed(void *stream, float *qkv, int ld, float *q_out, const float *inv_freq,
                                             uint16_t *k_cache, uint16_t *v_cache, const int32_t *d_start,
                                             const int32_t *d_n, int max_n, int max_seq, int n_heads,
                                             int n_kv_heads, int head_dim, uint16_t *q16)
{
    FRT_ARG(inv_freq && k_cache && v_cache && d_start, "dense prefill prep packed: NULL pointer");
    prep_rows r;
    FRT_TRY(rows_packed(&r, qkv, ld, q_out, q16, max_n, n_heads, n_kv_heads, head_dim));
    const prep_bf16 cache = {(__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache};
    return prefill_prep_launch(stream, r, inv_freq, cache, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads,
                               head_dim);
}

extern "C" int frt_dense_prefill_prep_packed_fp8(void *stream, float *qkv, int ld, float *q_out,
                                                 const float *inv_freq, uint8_t *k_cache, uint8_t *v_cache,
                                                 const float *k_scale, const float *v_scale, const int32_t *d_start,
                                                 const int32_t *d_n, int max_n, int max_seq, int n_heads,
                                                 int n_kv_heads, int head_dim, uint16_t *q16)
{
    FRT_ARG(inv_freq && k_cache && v_cache && k_scale && v_scale && d_start,
            "dense prefill prep packed fp8: NULL pointer");
    prep_rows r;
    FRT_TRY(rows_packed(&r, qkv, ld, q_out, q16, max_n, n_heads, n_kv_heads, head_dim));
    const prep_fp8 cache = {k_cache, v_cache, k_scale, v_scale, head_dim};
    return prefill_prep_launch(stream, r, inv_freq, cache, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads,
                               head_dim);
}

extern "C" int frt_dense_decode_prep(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                     uint16_t *k_cache, uint16_t *v_cache, const int32_t *d_start, int max_seq,
                                     int n_heads, int n_kv_heads, int head_dim, const frt_dense_qkv_bias *bias)
{
    FRT_ARG(q && k && v && inv_freq && k_cache && v_cache && d_start, "dense decode prep: NULL pointer");
    const prep_bf16 cache = {(__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache};
    return decode_prep_launch(stream, q, k, v, inv_freq, cache, d_start, max_seq, n_heads, n_kv_heads, head_dim, bias);
}

extern "C" int frt_dense_decode_prep_batch(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                           uint16_t *const *d_k_caches, uint16_t *const *d_v_caches,
                                           const int32_t *const *d_starts, int n_branches, int max_seq, int n_heads,
                                           int n_kv_heads, int head_dim, const frt_dense_qkv_bias *bias)
{
    FRT_ARG(q && k && v && inv_freq && d_k_caches && d_v_caches && d_starts, "dense decode prep: NULL pointer");
    const prep_bf16_tab tab = {(__nv_bfloat16 *const *)d_k_caches, (__nv_bfloat16 *const *)d_v_caches};
    return decode_prep_batch_launch(stream, q, k, v, inv_freq, tab, d_starts, n_branches, max_seq, n_heads,
                                    n_kv_heads, head_dim, bias);
}

extern "C" int frt_dense_decode_prep_fp8(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                         uint8_t *k_cache, uint8_t *v_cache, const float *k_scale,
                                         const float *v_scale, const int32_t *d_start, int max_seq, int n_heads,
                                         int n_kv_heads, int head_dim, const frt_dense_qkv_bias *bias)
{
    FRT_ARG(q && k && v && inv_freq && k_cache && v_cache && k_scale && v_scale && d_start,
            "dense decode prep fp8: NULL pointer");
    const prep_fp8 cache = {k_cache, v_cache, k_scale, v_scale, head_dim};
    return decode_prep_launch(stream, q, k, v, inv_freq, cache, d_start, max_seq, n_heads, n_kv_heads, head_dim, bias);
}

extern "C" int frt_dense_decode_prep_batch_fp8(void *stream, float *q, float *k, const float *v,
                                               const float *inv_freq, uint8_t *const *d_k_caches,
                                               uint8_t *const *d_v_caches, const float *k_scale,
                                               const float *v_scale, const int32_t *const *d_starts, int n_branches,
                                               int max_seq, int n_heads, int n_kv_heads, int head_dim,
                                               const frt_dense_qkv_bias *bias)
{
    FRT_ARG(q && k && v && inv_freq && d_k_caches && d_v_caches && k_scale && v_scale && d_starts,
            "dense decode prep fp8: NULL pointer");
    const prep_fp8_tab tab = {d_k_caches, d_v_caches, k_scale, v_scale, head_dim};
    return decode_prep_batch_launch(stream, q, k, v, inv_freq, tab, d_starts, n_branches, max_seq, n_heads,
                                    n_kv_heads, head_dim, bias);
}

/* ---- the preps with qwen3's q / k RMSNorm -------------------------------
 *
 * One warp a (token, head): lane l holds elements l + 32 j (j < E, head_dim
 * = 32 E, E even), so the RoPE pair (p, p + head_dim / 2) of p = l + 32 j
 * (j < E / 2) is the lane's elements j and j + E / 2. The head's RMSNorm
 * is frt_cuda_rmsnorm's arithmetic (norm_util.h: the squares summed in fp64,
 * here over the warp; var = (float)(sum / head_dim), 1 / sqrtf(var + eps),
 * (x * inv) * w), then rope_rotate, then the stores of prep_row.
 * V elements: one a thread, as prep_row. */
template <class Cache, int E>
__device__ __forceinline__ void prep_norm_row(const float *qb, float *qo, float *kb, const float *vb,
                                              const float *qw, const float *kw, float eps, const float *inv_freq,
                                              const Cache &cache, int start, long long row, int max_seq,
                                              int n_heads, int n_kv)
{
    constexpr int HD = 32 * E, HALF = HD / 2;
    const int lane = threadIdx.x & 31;
    const int wid = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), nw = (int)((gridDim.x * blockDim.x) >> 5);
    const bool store = row < max_seq;
    const size_t off = (size_t)row * n_kv * HD;
    for (int h = wid; h < n_heads + n_kv; h += nw) {
        const bool is_k = h >= n_heads;
        const int hh = is_k ? h - n_heads : h;
        const float *src = (is_k ? kb : qb) + (size_t)hh * HD, *w = is_k ? kw : qw;
        float x[E];
        double ss = 0;
#pragma unroll
        for (int j = 0; j < E; j++) {
            x[j] = src[lane + 32 * j];
            ss += (double)x[j] * (double)x[j];
        }
        const float inv = norm_inv_rms(frt_warp_sum(ss), HD, eps);
#pragma unroll
        for (int j = 0; j < E; j++) x[j] = norm_weigh(x[j], inv, w[lane + 32 * j], 0);
#pragma unroll
        for (int j = 0; j < E / 2; j++) {
            const int p = lane + 32 * j;
            float r1, r2;
            rope_rotate(x[j], x[j + E / 2], (float)start * inv_freq[p], &r1, &r2);
            if (!is_k) {
                qo[(size_t)hh * HD + p] = r1;
                qo[(size_t)hh * HD + p + HALF] = r2;
            } else if (store) {
                cache.put_k(off, hh * HD + p, r1);
                cache.put_k(off, hh * HD + p + HALF, r2);
            }
        }
    }
    if (!store) return;
    for (int e = (int)(blockIdx.x * blockDim.x + threadIdx.x); e < n_kv * HD; e += (int)(gridDim.x * blockDim.x))
        cache.put_v(off, e, vb[e]);
}

template <class Cache, int E>
__global__ void decode_prep_norm_kernel(float *q, float *k, const float *v, const float *qw, const float *kw,
                                        float eps, const float *inv_freq, Cache cache, const int32_t *d_start,
                                        int max_seq, int n_heads, int n_kv)
{
    frt_pdl_trigger(); /* the attention after it may launch (decode_prep_one) */
    frt_pdl_wait();    /* launched with PDL: q, k, v come from the kernels before */
    prep_norm_row<Cache, E>(q, q, k, v, qw, kw, eps, inv_freq, cache, *d_start, (long long)frt_dyn_pos(d_start),
                            max_seq, n_heads, n_kv);
}

template <class Cache, int E>
__global__ void prefill_prep_norm_kernel(prep_rows r, const float *qw, const float *kw, float eps,
                                         const float *inv_freq, Cache cache, const int32_t *d_start,
                                         const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv)
{
    frt_pdl_trigger(); /* the attention after it may launch and stage the rows below the position */
    frt_pdl_wait();
    const int t = blockIdx.y;
    if (t >= dense_count(d_n, max_n)) return;
    prep_norm_row<Cache, E>(r.q + t * r.ldq, r.qo + (size_t)t * n_heads * 32 * E, r.k + t * r.ldk, r.v + t * r.ldv,
                            qw, kw, eps, inv_freq, cache, *d_start + t, (long long)frt_dyn_pos(d_start) + t, max_seq,
                            n_heads, n_kv);
}

/* Branch blockIdx.y of the batched decode (frt_dense_decode_prep_norm_batch,
 * _fp8): decode_prep_norm_kernel's work on its rows, caches and position. */
template <class Tab, int E>
__global__ void decode_prep_norm_batch_kernel(float *q, float *k, const float *v, const float *qw, const float *kw,
                                              float eps, const float *inv_freq, Tab tab,
                                              const int32_t *const *starts, int max_seq, int n_heads, int n_kv)
{
    frt_pdl_trigger(); /* the attention after it may launch (decode_prep_one) */
    frt_pdl_wait();
    const int b = blockIdx.y;
    constexpr int HD = 32 * E;
    float *qb = q + (size_t)b * n_heads * HD;
    prep_norm_row<decltype(tab[b]), E>(qb, qb, k + (size_t)b * n_kv * HD, v + (size_t)b * n_kv * HD, qw, kw, eps,
                                       inv_freq, tab[b], *starts[b], (long long)frt_dyn_pos(starts[b]), max_seq,
                                       n_heads, n_kv);
}

/* One launch of decode_prep_norm_batch_kernel<Tab>. */
template <class Tab>
static int prep_norm_batch_launch(void *stream, float *q, float *k, const float *v, const float *qw, const float *kw,
                                  float eps, const float *inv_freq, Tab tab, const int32_t *const *d_starts,
                                  int n_branches, int max_seq, int n_heads, int n_kv_heads, int head_dim)
{
    FRT_TRY(decode_prep_sizes(n_branches, max_seq, n_heads, n_kv_heads, head_dim));
    FRT_ARG(q && k && v && qw && kw && inv_freq && d_starts, "dense decode prep norm batch: NULL pointer");
    if (head_dim != 64 && head_dim != 128 && head_dim != 256)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense prep norm: head_dim %d (64, 128 or 256)", head_dim);
    const dim3 grid((unsigned int)((n_heads + n_kv_heads + 3) / 4), (unsigned int)n_branches);
#define PREP_NORM_B(E)                                                                                          \
    frt_pdl_launch(decode_prep_norm_batch_kernel<Tab, E>, grid, dim3(PREP_THREADS), 0, stream, q, k, v, qw, kw, \
                   eps, inv_freq, tab, d_starts, max_seq, n_heads, n_kv_heads)
    FRT_CUDA_TRY(head_dim == 64 ? PREP_NORM_B(2) : head_dim == 128 ? PREP_NORM_B(4) : PREP_NORM_B(8));
#undef PREP_NORM_B
    FRT_LAUNCH_CHECK();
    return 0;
}

/* The launch of the norm preps (rows 1: decode): blocks of 4 warps over the
 * heads, head_dim 64, 128 or 256. */
template <class Cache>
static int prep_norm_launch(void *stream, const prep_rows &r, int decode, const float *qw, const float *kw, float eps,
                            const float *inv_freq, Cache cache, const int32_t *d_start, const int32_t *d_n,
                            int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim)
{
    FRT_TRY(decode_prep_sizes(1, max_seq, n_heads, n_kv_heads, head_dim));
    FRT_ARG(qw && kw && inv_freq && d_start, "dense prep norm: NULL pointer");
    FRT_ARG(max_n >= 1 && max_n <= 65535, "dense prep norm: max_n %d", max_n);
    if (head_dim != 64 && head_dim != 128 && head_dim != 256)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense prep norm: head_dim %d (64, 128 or 256)", head_dim);
    const dim3 grid((unsigned int)((n_heads + n_kv_heads + 3) / 4), decode ? 1u : (unsigned int)max_n);
    const dim3 block(PREP_THREADS);
#define PREP_NORM(E)                                                                                            \
    (decode ? frt_pdl_launch(decode_prep_norm_kernel<Cache, E>, grid, block, 0, stream, (float *)r.q, r.k, r.v,  \
                             qw, kw, eps, inv_freq, cache, d_start, max_seq, n_heads, n_kv_heads)                \
            : frt_pdl_launch(prefill_prep_norm_kernel<Cache, E>, grid, block, 0, stream, r, qw, kw, eps,         \
                             inv_freq, cache, d_start, d_n, max_n, max_seq, n_heads, n_kv_heads))
    FRT_CUDA_TRY(head_dim == 64 ? PREP_NORM(2) : head_dim == 128 ? PREP_NORM(4) : PREP_NORM(8));
#undef PREP_NORM
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_dense_decode_prep_norm(void *stream, float *q, float *k, const float *v, const float *q_norm,
                                          const float *k_norm, float eps, const float *inv_freq, uint16_t *k_cache,
                                          uint16_t *v_cache, const int32_t *d_start, int max_seq, int n_heads,
                                          int n_kv_heads, int head_dim)
{
    FRT_ARG(q && k && v && k_cache && v_cache, "dense decode prep norm: NULL pointer");
    const prep_bf16 cache = {(__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache};
    return prep_norm_launch(stream, rows_apart(q, k, v, n_heads, n_kv_heads, head_dim, NULL), 1, q_norm, k_norm, eps,
                            inv_freq, cache, d_start, NULL, 1, max_seq, n_heads, n_kv_heads, head_dim);
}

extern "C" int frt_dense_prefill_prep_packed_norm(void *stream, float *qkv, int ld, float *q_out,
                                                  const float *q_norm, const float *k_norm, float eps,
                                                  const float *inv_freq, uint16_t *k_cache, uint16_t *v_cache,
                                                  const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                                                  int n_heads, int n_kv_heads, int head_dim)
{
    FRT_ARG(k_cache && v_cache, "dense prefill prep packed norm: NULL pointer");
    prep_rows r;
    FRT_ARG(q_out, "dense prefill prep packed norm: NULL q_out");
    FRT_TRY(rows_packed(&r, qkv, ld, q_out, NULL, max_n, n_heads, n_kv_heads, head_dim));
    const prep_bf16 cache = {(__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache};
    return prep_norm_launch(stream, r, 0, q_norm, k_norm, eps, inv_freq, cache, d_start, d_n, max_n, max_seq, n_heads,
                            n_kv_heads, head_dim);
}

extern "C" int frt_dense_decode_prep_norm_fp8(void *stream, float *q, float *k, const float *v, const float *q_norm,
                                              const float *k_norm, float eps, const float *inv_freq, uint8_t *k_cache,
                                              uint8_t *v_cache, const float *k_scale, const float *v_scale,
                                              const int32_t *d_start, int max_seq, int n_heads, int n_kv_heads,
                                              int head_dim)
{
    FRT_ARG(q && k && v && k_cache && v_cache && k_scale && v_scale, "dense decode prep norm fp8: NULL pointer");
    const prep_fp8 cache = {k_cache, v_cache, k_scale, v_scale, head_dim};
    return prep_norm_launch(stream, rows_apart(q, k, v, n_heads, n_kv_heads, head_dim, NULL), 1, q_norm, k_norm, eps,
                            inv_freq, cache, d_start, NULL, 1, max_seq, n_heads, n_kv_heads, head_dim);
}

extern "C" int frt_dense_prefill_prep_packed_norm_fp8(void *stream, float *qkv, int ld, float *q_out,
                                                      const float *q_norm, const float *k_norm, float eps,
                                                      const float *inv_freq, uint8_t *k_cache, uint8_t *v_cache,
                                                      const float *k_scale, const float *v_scale,
                                                      const int32_t *d_start, const int32_t *d_n, int max_n,
                                                      int max_seq, int n_heads, int n_kv_heads, int head_dim)
{
    FRT_ARG(k_cache && v_cache && k_scale && v_scale, "dense prefill prep packed norm fp8: NULL pointer");
    prep_rows r;
    FRT_ARG(q_out, "dense prefill prep packed norm: NULL q_out");
    FRT_TRY(rows_packed(&r, qkv, ld, q_out, NULL, max_n, n_heads, n_kv_heads, head_dim));
    const prep_fp8 cache = {k_cache, v_cache, k_scale, v_scale, head_dim};
    return prep_norm_launch(stream, r, 0, q_norm, k_norm, eps, inv_freq, cache, d_start, d_n, max_n, max_seq, n_heads,
                            n_kv_heads, head_dim);
}

extern "C" int frt_dense_decode_prep_norm_batch(void *stream, float *q, float *k, const float *v,
                                                const float *q_norm, const float *k_norm, float eps,
                                                const float *inv_freq, uint16_t *const *d_k_caches,
                                                uint16_t *const *d_v_caches, const int32_t *const *d_starts,
                                                int n_branches, int max_seq, int n_heads, int n_kv_heads, int head_dim)
{
    FRT_ARG(d_k_caches && d_v_caches, "dense decode prep norm batch: NULL pointer");
    const prep_bf16_tab tab = {(__nv_bfloat16 *const *)d_k_caches, (__nv_bfloat16 *const *)d_v_caches};
    return prep_norm_batch_launch(stream, q, k, v, q_norm, k_norm, eps, inv_freq, tab, d_starts, n_branches, max_seq,
                                  n_heads, n_kv_heads, head_dim);
}

extern "C" int frt_dense_decode_prep_norm_batch_fp8(void *stream, float *q, float *k, const float *v,
                                                    const float *q_norm, const float *k_norm, float eps,
                                                    const float *inv_freq, uint8_t *const *d_k_caches,
                                                    uint8_t *const *d_v_caches, const float *k_scale,
                                                    const float *v_scale, const int32_t *const *d_starts,
                                                    int n_branches, int max_seq, int n_heads, int n_kv_heads,
                                                    int head_dim)
{
    FRT_ARG(d_k_caches && d_v_caches && k_scale && v_scale, "dense decode prep norm batch fp8: NULL pointer");
    const prep_fp8_tab tab = {d_k_caches, d_v_caches, k_scale, v_scale, head_dim};
    return prep_norm_batch_launch(stream, q, k, v, q_norm, k_norm, eps, inv_freq, tab, d_starts, n_branches, max_seq,
                                  n_heads, n_kv_heads, head_dim);
}
