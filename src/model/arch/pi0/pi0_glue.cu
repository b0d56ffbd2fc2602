/*
 * arch/pi0/pi0_glue.cu - the policy-specific CUDA kernels of the Pi0 /
 * Pi0.5 forward pass (pi0_glue.h). Elementwise kernels run one thread per
 * output in grid-stride loops (bits independent of the launch shape); the
 * prefix mask is a single-thread scan.
 */
#include "model/arch/pi0/pi0_glue.h"

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/policy_util.h"
#include "kernels/cuda/residual_util.h"

#include <string.h>

#define T256 256

static unsigned int blocks(long long total) { return frt_grid_blocks((size_t)total, T256, 8192); }

#define GRID_LOOP(i, total)                                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (total);      \
         i += (long long)gridDim.x * blockDim.x)

__global__ void patchify_kernel(__nv_bfloat16 *out, const float *img, long long total, int height, int width,
                                int patch, int kp)
{
    const int gw = width / patch, np = (height / patch) * gw, pp = patch * patch, k = 3 * pp;
    GRID_LOOP(i, total)
    {
        const int col = (int)(i % kp);
        const long long row = i / kp;
        float v = 0.0f;
        if (col < k) {
            const int cam = (int)(row / np), pi = (int)(row % np);
            const int c = col / pp, ky = (col / patch) % patch, kx = col % patch;
            const int y = (pi / gw) * patch + ky, x = (pi % gw) * patch + kx;
            v = img[(((size_t)cam * 3 + c) * height + y) * width + x];
        }
        out[i] = __float2bfloat16_rn(v);
    }
}

extern "C" int pi0_cuda_patchify(void *stream, uint16_t *out, const float *img, int cams, int height, int width,
                                 int patch, int kp)
{
    FRT_ARG(out && img && cams >= 1 && patch >= 1 && height % patch == 0 && width % patch == 0 &&
                kp >= 3 * patch * patch,
            "pi0 patchify: bad arguments");
    const long long total = (long long)cams * (height / patch) * (width / patch) * kp;
    patchify_kernel<<<blocks(total), T256, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)out, img, total, height,
                                                                       width, patch, kp);
    FRT_LAUNCH_CHECK();
    return 0;
}

__global__ void residual_kernel(float *x, const float *y, const float *b, const float *gate, long long total,
                                int cols)
{
    GRID_LOOP(i, total)
    {
        const int c = (int)(i % cols);
        x[i] = frt_residual_add(x[i], y[i], b != NULL, b ? b[c] : 0.0f, gate != NULL, gate ? gate[c] : 0.0f);
    }
}

extern "C" int pi0_cuda_residual(void *stream, float *x, const float *y, const float *b, const float *gate,
                                 int rows, int cols)
{
    FRT_ARG(x && y && rows >= 1 && cols >= 1, "pi0 residual: bad arguments");
    const long long total = (long long)rows * cols;
    residual_kernel<<<blocks(total), T256, 0, (cudaStream_t)stream>>>(x, y, b, gate, total, cols);
    FRT_LAUNCH_CHECK();
    return 0;
}

#define PM_THREADS 1024

/* One block: thread t owns rows [t c, t c + c) (c = ceil(n / PM_THREADS)),
 * counts their valid rows, an exclusive scan of the counts (warp shuffles,
 * then the warp totals) gives each thread the valid rows before its own,
 * and it writes mask and pos (the cumulative count of valid rows - 1,
 * clamped at 0) of its rows. Integers: the same values as a serial pass. */
__global__ void __launch_bounds__(PM_THREADS) prefix_mask_kernel(uint8_t *mask, int32_t *pos, int32_t *meta,
                                                                 const uint8_t *cam_mask, const uint8_t *tok_mask,
                                                                 int cams, int n_patch, int tokens, int n_total)
{
    __shared__ int warp_sum[PM_THREADS / 32];
    const int ni = cams * n_patch, n = ni + tokens, c = (n + PM_THREADS - 1) / PM_THREADS;
    const int t = threadIdx.x, lane = t & 31, w = t >> 5, r0 = t * c, r1 = min(n, r0 + c);
    int mine = 0;
    for (int r = r0; r < r1; r++) mine += r < ni ? (cam_mask[r / n_patch] != 0) : (tok_mask[r - ni] != 0);
    int incl = mine; /* inclusive scan within the warp */
    for (int d = 1; d < 32; d <<= 1) {
        const int o = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += o;
    }
    if (lane == 31) warp_sum[w] = incl;
    __syncthreads();
    int before = incl - mine;
    for (int i = 0; i < w; i++) before += warp_sum[i];
    int valid = before;
    for (int r = r0; r < r1; r++) {
        const uint8_t m = r < ni ? (cam_mask[r / n_patch] != 0) : (tok_mask[r - ni] != 0);
        mask[r] = m;
        valid += m;
        pos[r] = valid - 1 < 0 ? 0 : valid - 1;
    }
    for (int r = n + t; r < n_total; r += PM_THREADS) mask[r] = 0;
    if (t == PM_THREADS - 1) {
        meta[0] = n;
        meta[1] = valid; /* the last thread's running count is the total (threads past n add 0) */
        meta[2] = meta[3] = 0;
    }
}

extern "C" int pi0_cuda_prefix_mask(void *stream, uint8_t *mask, int32_t *pos, int32_t *meta,
                                    const uint8_t *cam_mask, const uint8_t *tok_mask, int cams, int n_patch,
                                    int tokens, int n_total)
{
    FRT_ARG(mask && pos && meta && cam_mask && tok_mask && cams >= 1 && n_patch >= 1 && tokens >= 1 &&
                n_total >= cams * n_patch + tokens,
            "pi0 prefix mask: bad arguments");
    prefix_mask_kernel<<<1, PM_THREADS, 0, (cudaStream_t)stream>>>(mask, pos, meta, cam_mask, tok_mask, cams, n_patch,
                                                          tokens, n_total);
    FRT_LAUNCH_CHECK();
    return 0;
}

__global__ void prefix_embed_kernel(float *x, const float *vis, const __nv_bfloat16 *embed, const int32_t *ids,
                                    long long total, int img_rows, int width, int vocab, float scale)
{
    GRID_LOOP(i, total)
    {
        const long long r = i / width;
        const int c = (int)(i % width);
        if (r < img_rows) {
            x[i] = vis[i];
            continue;
        }
        const int id = ids[r - img_rows];
        x[i] = id >= 0 && id < vocab ? __bfloat162float(embed[(size_t)id * width + c]) * scale : 0.0f;
    }
}

extern "C" int pi0_cuda_prefix_embed(void *stream, float *x, const float *vis, const uint16_t *embed,
                                     const int32_t *ids, int img_rows, int tokens, int width, int vocab,
                                     float scale)
{
    FRT_ARG(x && vis && embed && ids && img_rows >= 0 && tokens >= 1 && width >= 1 && vocab >= 1,
            "pi0 prefix embed: bad arguments");
    const long long total = (long long)(img_rows + tokens) * width;
    prefix_embed_kernel<<<blocks(total), T256, 0, (cudaStream_t)stream>>>(
        x, vis, (const __nv_bfloat16 *)embed, ids, total, img_rows, width, vocab, scale);
    FRT_LAUNCH_CHECK();
    return 0;
}

__global__ void suffix_pos_kernel(int32_t *pos, float *cs, const float *inv_freq, const int32_t *meta, int n,
                                  int half)
{
    const long long total = cs ? (long long)n * half : n;
    GRID_LOOP(i, total)
    {
        const int r = (int)(cs ? i / half : i), p = (int)(cs ? i % half : 0);
        const int32_t at = meta[1] + r;
        if (p == 0) pos[r] = at;
        if (!cs) continue;
        const float a = (float)at * inv_freq[p]; /* qkv_rope_kernel's angle and functions */
        cs[2 * i] = cosf(a);
        cs[2 * i + 1] = sinf(a);
    }
}

extern "C" int pi0_cuda_suffix_pos(void *stream, int32_t *pos, float *cs, const float *inv_freq,
                                   const int32_t *meta, int n, int half)
{
    FRT_ARG(pos && meta && n >= 1 && (!cs || (inv_freq && half >= 1)), "pi0 suffix pos: bad arguments");
    const long long total = cs ? (long long)n * half : n;
    suffix_pos_kernel<<<blocks(total), T256, 0, (cudaStream_t)stream>>>(pos, cs, inv_freq, meta, n, half);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* Row (token t, head h) of q / k / v per block, VP pairs (p, p + half)
 * a thread (VP 2: 8-byte loads of the two halves, 4-byte bf16x2 stores);
 * token t of the whole q / qkv is token t % n of slot t / n, whose K / V
 * rows and positions are d's. Each element's arithmetic is the same
 * whatever VP (the bits of frt_cuda_attention_fused's RoPE on load). */
template <int VP>
__global__ void qkv_rope_kernel(__nv_bfloat16 *q, pi0_kv_slots d, int ldk, int ldv, const float *qkv,
                                const float *inv_freq, int n, int heads, int kv_heads, int hd)
{
    const int half = hd / 2, nh = heads + 2 * kv_heads;
    const long long row = blockIdx.x, t = row / nh; /* row = t nh + h */
    const int h = (int)(row - t * nh), slot = (int)(t / n);
    const long long ts = t - (long long)slot * n;
    const float *src = qkv + row * hd;
    const bool is_v = h >= heads + kv_heads;
    __nv_bfloat16 *dst = h < heads ? q + (t * heads + h) * hd
                         : is_v    ? (__nv_bfloat16 *)d.v[slot] + ts * ldv + (size_t)(h - heads - kv_heads) * hd
                                   : (__nv_bfloat16 *)d.k[slot] + ts * ldk + (size_t)(h - heads) * hd;
    const float at = is_v ? 0.0f : (float)d.pos[slot][ts];
    for (int p = threadIdx.x * VP; p < half; p += blockDim.x * VP) {
        float x1[VP], x2[VP], y1[VP], y2[VP];
        if constexpr (VP == 2) {
            const float2 a = *(const float2 *)(src + p), b = *(const float2 *)(src + p + half);
            x1[0] = a.x, x1[1] = a.y, x2[0] = b.x, x2[1] = b.y;
        } else {
            x1[0] = src[p], x2[0] = src[p + half];
        }
#pragma unroll
        for (int e = 0; e < VP; e++) {
            if (is_v) { /* v: copied */
                y1[e] = x1[e], y2[e] = x2[e];
                continue;
            }
            const float a = at * inv_freq[p + e];
            const float c = cosf(a), s = sinf(a);
            frt_rope_rotate(x1[e], x2[e], c, s, &y1[e], &y2[e]);
        }
        if constexpr (VP == 2) {
            *(__nv_bfloat162 *)(dst + p) = __floats2bfloat162_rn(y1[0], y1[1]);
            *(__nv_bfloat162 *)(dst + p + half) = __floats2bfloat162_rn(y2[0], y2[1]);
        } else {
            dst[p] = __float2bfloat16_rn(y1[0]);
            dst[p + half] = __float2bfloat16_rn(y2[0]);
        }
    }
}

static bool aligned_to(const void *p, unsigned bytes) { return (uintptr_t)p % bytes == 0; }

/* Pairs two at a time: half even, qkv 8-byte and every destination 4-byte
 * aligned (q, each slot's K / V, their row strides). */
static bool qkv_rope_vec(const uint16_t *q, const pi0_kv_slots *d, int ldk, int ldv, const float *qkv, int hd)
{
    bool ok = hd % 4 == 0 && ldk % 2 == 0 && ldv % 2 == 0 && aligned_to(q, 4) && aligned_to(qkv, 8);
    for (int s = 0; s < d->slots; s++) ok = ok && aligned_to(d->k[s], 4) && aligned_to(d->v[s], 4);
    return ok;
}

extern "C" int pi0_cuda_qkv_rope_slots(void *stream, uint16_t *q, const pi0_kv_slots *d, int ldk, int ldv,
                                       const float *qkv, const float *inv_freq, int n, int heads, int kv_heads,
                                       int hd)
{
    FRT_ARG(q && d && qkv && inv_freq && n >= 1 && heads >= 1 && kv_heads >= 1 && hd >= 2 && hd % 2 == 0 &&
                ldk >= kv_heads * hd && ldv >= kv_heads * hd && d->slots >= 1 && d->slots <= PI0_KV_SLOTS,
            "pi0 qkv rope: bad arguments");
    for (int s = 0; s < d->slots; s++) FRT_ARG(d->k[s] && d->v[s] && d->pos[s], "pi0 qkv rope: NULL slot %d", s);
    const long long rows = (long long)d->slots * n * (heads + 2 * kv_heads);
    FRT_ARG(rows < (1ll << 31), "pi0 qkv rope: %lld rows", rows);
    const int vp = qkv_rope_vec(q, d, ldk, ldv, qkv, hd) ? 2 : 1, per = hd / 2 / vp;
    const int threads = per >= 128 ? 128 : (per + 31) / 32 * 32;
    if (vp == 2)
        qkv_rope_kernel<2><<<(unsigned)rows, threads, 0, (cudaStream_t)stream>>>(
            (__nv_bfloat16 *)q, *d, ldk, ldv, qkv, inv_freq, n, heads, kv_heads, hd);
    else
        qkv_rope_kernel<1><<<(unsigned)rows, threads, 0, (cudaStream_t)stream>>>(
            (__nv_bfloat16 *)q, *d, ldk, ldv, qkv, inv_freq, n, heads, kv_heads, hd);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int pi0_cuda_qkv_rope(void *stream, uint16_t *q, uint16_t *k, int ldk, uint16_t *v, int ldv,
                                 const float *qkv, const int32_t *pos, const float *inv_freq, int n, int heads,
                                 int kv_heads, int hd)
{
    pi0_kv_slots d;
    memset(&d, 0, sizeof d);
    d.k[0] = k, d.v[0] = v, d.pos[0] = pos, d.slots = 1;
    return pi0_cuda_qkv_rope_slots(stream, q, &d, ldk, ldv, qkv, inv_freq, n, heads, kv_heads, hd);
}

/* splitmix64 value number `i` (0-based) of the stream starting at x0. */
static __device__ __forceinline__ uint64_t splitmix_at(uint64_t x0, uint64_t i)
{
    uint64_t z = x0 + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__global__ void noise_kernel(float *x, const float *noise, const int32_t *opts, const uint64_t *episode, int n)
{
    const int pairs = (n + 1) / 2;
    const uint64_t x0 = episode[0] ^ (episode[1] * 0xD1B54A32D192ED03ull);
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < pairs; k += gridDim.x * blockDim.x) {
        const int i = 2 * k;
        if (opts[2]) {
            x[i] = noise[i];
            if (i + 1 < n) x[i + 1] = noise[i + 1];
            continue;
        }
        const double u1 = ((double)(splitmix_at(x0, 2ull * k) >> 11) + 1.0) * 0x1p-53;
        const double u2 = (double)(splitmix_at(x0, 2ull * k + 1) >> 11) * 0x1p-53;
        const double r = sqrt(-2.0 * log(u1)), a = 2.0 * 3.14159265358979323846 * u2;
        x[i] = (float)(r * cos(a));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(a));
    }
}

__global__ void episode_advance_kernel(uint64_t *episode, const int32_t *meta, const int32_t *meta2)
{
    if (meta[0] >= 1 && (!meta2 || meta2[0] >= 1)) episode[1] += 1;
}

extern "C" int pi0_cuda_noise(void *stream, float *x, const float *noise, const int32_t *opts, uint64_t *episode,
                              const int32_t *meta, const int32_t *meta2, int n)
{
    FRT_ARG(x && noise && opts && episode && meta && n >= 1, "pi0 noise: bad arguments");
    noise_kernel<<<blocks((n + 1) / 2), T256, 0, (cudaStream_t)stream>>>(x, noise, opts, episode, n);
    FRT_LAUNCH_CHECK();
    episode_advance_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(episode, meta, meta2);
    FRT_LAUNCH_CHECK();
    return 0;
}

__global__ void euler_kernel(float *x, const float *v, float *v0, float dt, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (v0) v0[i] = v[i];
        x[i] = __fadd_rn(x[i], __fmul_rn(dt, v[i]));
    }
}

extern "C" int pi0_cuda_euler(void *stream, float *x, const float *v, float *v0, float dt, int n)
{
    FRT_ARG(x && v && n >= 1, "pi0 euler: bad arguments");
    euler_kernel<<<blocks(n), T256, 0, (cudaStream_t)stream>>>(x, v, v0, dt, n);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int pi0_cuda_zero(void *stream, void *p, size_t bytes)
{
    FRT_ARG(p, "pi0 zero: NULL pointer");
    if (bytes) FRT_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream));
    return 0;
}

extern "C" int pi0_cuda_copy(void *stream, void *dst, const void *src, size_t bytes)
{
    FRT_ARG(dst && src, "pi0 copy: NULL pointer");
    if (bytes) FRT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
    return 0;
}

extern "C" int pi0_cuda_capture_nodes(void *stream, int *nodes)
{
    FRT_ARG(nodes, "pi0 capture nodes: NULL pointer");
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = NULL;
    FRT_CUDA_TRY(cudaStreamGetCaptureInfo((cudaStream_t)stream, &st, NULL, &graph));
    if (st != cudaStreamCaptureStatusActive || !graph)
        return frt_error(FRT_ERR_STATE, "pi0 capture nodes: the stream is not capturing");
    size_t n = 0;
    FRT_CUDA_TRY(cudaGraphGetNodes(graph, NULL, &n));
    *nodes = (int)n;
    return 0;
}

/* Block (x, p) copies a slice of pair p: 16-byte words when every pointer
 * and the size allow, else bytes. */
__global__ void copy_many_kernel(pi0_copy_list l)
{
    const int p = blockIdx.y;
    const size_t stride = (size_t)gridDim.x * blockDim.x, t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int wide = ((uintptr_t)l.dst[p] | (uintptr_t)l.src[p] | l.bytes) % 16 == 0;
    if (wide) {
        uint4 *d = (uint4 *)l.dst[p];
        const uint4 *s = (const uint4 *)l.src[p];
        for (size_t i = t0; i < l.bytes / 16; i += stride) d[i] = s[i];
        return;
    }
    uint8_t *d = (uint8_t *)l.dst[p];
    const uint8_t *s = (const uint8_t *)l.src[p];
    for (size_t i = t0; i < l.bytes; i += stride) d[i] = s[i];
}

extern "C" int pi0_cuda_copy_many(void *stream, const pi0_copy_list *l)
{
    FRT_ARG(l && l->n >= 0 && l->n <= PI0_COPY_MAX, "pi0 copy many: bad list");
    for (int i = 0; i < l->n; i++) FRT_ARG(l->dst[i] && l->src[i], "pi0 copy many: NULL pointer in pair %d", i);
    if (l->n == 0 || l->bytes == 0) return 0;
    const unsigned int bx = frt_grid_blocks((l->bytes + 15) / 16, T256, 64);
    copy_many_kernel<<<dim3(bx, (unsigned int)l->n), T256, 0, (cudaStream_t)stream>>>(*l);
    FRT_LAUNCH_CHECK();
    return 0;
}
