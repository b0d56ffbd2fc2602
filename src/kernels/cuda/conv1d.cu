/*
 * kernels/cuda/conv1d.cu - depthwise causal conv1d + SiLU with a carried
 * state (the Gated DeltaNet short convolution over q, k, v).
 * Math: transformers 5.x modeling_qwen3_5.py, causal_conv1d_update /
 * causal_conv1d_fn (torch fallbacks), as the CPU twin frt_cpu_conv1d_causal:
 * with xpad = [state, x], out[t, c] = silu(sum_j w[c, j] xpad[t + j, c]),
 * j ascending. Two launches: every output (t, c) reads only x and the old
 * state, so the outputs are computed in parallel over tokens and channels;
 * then one thread per channel moves the state to the last kernel - 1 rows of
 * [state, x[0 .. n-1]] (n, the valid token count, read from device memory:
 * padded rows of a prefill bucket never enter the state). Kernel sizes 2-4
 * are compiled with their taps unrolled so every load of an output is issued
 * before the first multiply (one memory round trip in decode). The rows of
 * x may be strided (frt_cuda_conv1d_causal_strided: the q | k | v columns of
 * the prefill's fused in_proj_qkv | z | b | a output).
 * Tested in tests/test_cuda_kernels.c and tests/test_cuda_conv1d.c.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/norm_util.h"

#include <string.h>

#define CONV_THREADS 256 /* threads per block of the output kernel */

/* KT > 0: the kernel size at compile time (every tap's weight and input
 * loaded into registers before the first multiply: one memory round trip);
 * KT == 0: any size, a loop. */
/* Where the output columns go: [first[i], first[i] + width[i]) to out[i]
 * [max_n, width[i]], i < n (one entry: the plain [max_n, channels] out). */
struct conv_outs {
    void *out[3];
    int first[3], width[3];
    int n;
    int l2_ch, l2_dim; /* channels [0, l2_ch) L2-normalised in groups of l2_dim (0: none) */
    float l2_eps;
};

/* Where output column c of token t goes (constant indices only: a dynamic
 * index into the by-value o would copy it to local memory in every thread,
 * measured 2.5x slower). */
__device__ __forceinline__ void conv_store(const conv_outs &o, int out_dt, int t, int c, float y)
{
    void *op = o.out[0];
    int first = 0, width = o.width[0];
    if (o.n > 1 && c >= o.first[1]) op = o.out[1], first = o.first[1], width = o.width[1];
    if (o.n > 2 && c >= o.first[2]) op = o.out[2], first = o.first[2], width = o.width[2];
    frt_st(op, out_dt, (size_t)t * width + (c - first), y);
}

/* One thread per channel c and TT consecutive tokens t0 .. t0 + TT - 1 (the
 * block's, t0 = TT blockIdx.x): the TT + KT - 1 inputs they share are loaded
 * once. Each output sums its taps j ascending as the twin; with the L2 norm,
 * each token's group sum is the same warp butterfly and the same ascending
 * sum over the group's warps as one token per block would give (the same
 * bits), with one barrier for all TT tokens. */
template <int KT, int TT>
__global__ void conv1d_out_kernel(conv_outs o, int out_dt, const void *x, int x_dt,
                                  const float *conv_state, const float *w, const int32_t *d_n,
                                  int max_n, int channels, int kernel, int x_stride)
{
    const int t0 = blockIdx.x * TT;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    const int n = frt_dyn_n(d_n, max_n);
    if (t0 >= n) return; /* uniform over the block */
    /* an L2 block lies inside [0, l2_ch) (the host checked l2_ch % 256 == 0) */
    const bool l2 = (int)(blockIdx.y * blockDim.x) < o.l2_ch;
    if (c >= channels) return; /* never in an L2 block */
    const int ks = kernel - 1;
    const float *wc = w + (size_t)c * kernel;
    float y[TT];
    if constexpr (KT > 0) {
        float wv[KT], xv[TT + KT - 1];
#pragma unroll
        for (int j = 0; j < KT; j++) wv[j] = wc[j];
#pragma unroll
        for (int i = 0; i < TT + KT - 1; i++) { /* xpad row t0 + i */
            const int r = t0 + i - (KT - 1);    /* row of x, < 0: the state */
            xv[i] = r < 0 ? conv_state[(size_t)c * (KT - 1) + (r + KT - 1)]
                          : (r < max_n ? frt_ld(x, x_dt, (size_t)r * x_stride + c) : 0.0f);
        }
#pragma unroll
        for (int k = 0; k < TT; k++) {
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < KT; j++) acc += wv[j] * xv[k + j];
            y[k] = frt_silu(acc);
        }
    } else {
#pragma unroll
        for (int k = 0; k < TT; k++) {
            const int t = t0 + k;
            float acc = 0.0f;
            if (t < max_n)
                for (int j = 0; j < kernel; j++) {
                    const int i = t + j;
                    const float xv = i < ks ? conv_state[(size_t)c * ks + i]
                                            : frt_ld(x, x_dt, (size_t)(i - ks) * x_stride + c);
                    acc += wc[j] * xv;
                }
            y[k] = frt_silu(acc);
        }
    }
    if (l2) { /* y * (1 / sqrtf(sum y^2 + eps)) over the thread's group of l2_dim channels */
        __shared__ double part[TT][CONV_THREADS / 32];
        const int warp = threadIdx.x >> 5, wpg = o.l2_dim >> 5, g0 = warp / wpg * wpg;
#pragma unroll
        for (int k = 0; k < TT; k++) {
            const double sq = frt_warp_sum((double)y[k] * (double)y[k]);
            if ((threadIdx.x & 31) == 0) part[k][warp] = sq;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TT; k++) {
            double ss = 0;
            for (int w = 0; w < wpg; w++) ss += part[k][g0 + w];
            y[k] = y[k] * norm_inv_l2(ss, o.l2_eps);
        }
    }
#pragma unroll
    for (int k = 0; k < TT; k++)
        if (t0 + k < n) conv_store(o, out_dt, t0 + k, c, y[k]);
}

__global__ void conv1d_state_kernel(const void *x, int x_dt, float *conv_state,
                                    const int32_t *d_n, int max_n, int channels, int kernel,
                                    int x_stride)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const int n = frt_dyn_n(d_n, max_n), ks = kernel - 1;
    float *st = conv_state + (size_t)c * ks;
    /* ascending i reads index n + i >= i before it is overwritten: safe.
     * Kernel sizes up to 4 (ks <= 3): all reads first, then the writes. */
    if (ks <= 3) {
        float v[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 3; i++) {
            const int src = n + i;
            if (i < ks)
                v[i] = src < ks ? st[src] : frt_ld(x, x_dt, (size_t)(src - ks) * x_stride + c);
        }
#pragma unroll
        for (int i = 0; i < 3; i++)
            if (i < ks) st[i] = v[i];
        return;
    }
    for (int i = 0; i < ks; i++) {
        const int src = n + i;
        st[i] = src < ks ? st[src] : frt_ld(x, x_dt, (size_t)(src - ks) * x_stride + c);
    }
}

static int conv1d_run(void *stream, const conv_outs &o, frt_cuda_dtype out_dtype, const void *x,
                      frt_cuda_dtype x_dtype, int x_stride, float *conv_state, const float *w,
                      const int32_t *d_n, int max_n, int channels, int kernel)
{
    FRT_ARG(x_stride >= channels, "cuda conv1d: x row stride %d < channels %d", x_stride, channels);
    for (int i = 0; i < o.n; i++) FRT_ARG(o.out[i] && o.out[i] != x, "cuda conv1d: out %d NULL or x", i);
    FRT_ARG(x && w && (conv_state || kernel == 1), "cuda conv1d: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(x_dtype), "cuda conv1d: bad dtype");
    FRT_ARG(max_n >= 0 && channels > 0 && kernel >= 1 && kernel <= 64,
            "cuda conv1d: max_n %d channels %d kernel %d (1..64)", max_n, channels, kernel);
    FRT_ARG(channels <= 65535 * 256, "cuda conv1d: channels %d", channels);
    if (max_n == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const dim3 grid1((unsigned int)max_n, (unsigned int)((channels + CONV_THREADS - 1) / CONV_THREADS));
    const dim3 grid8((unsigned int)((max_n + 7) / 8), grid1.y);
    /* 8 tokens per thread from 16 rows up (prefill buckets), 1 below (decode) */
    const bool many = max_n >= 16;
#define CONV_LAUNCH(KT)                                                                                  \
    do {                                                                                                 \
        if (many)                                                                                        \
            conv1d_out_kernel<KT, 8><<<grid8, CONV_THREADS, 0, s>>>(o, out_dtype, x, x_dtype, conv_state, \
                                                                  w, d_n, max_n, channels, kernel,       \
                                                                  x_stride);                             \
        else                                                                                             \
            conv1d_out_kernel<KT, 1><<<grid1, CONV_THREADS, 0, s>>>(o, out_dtype, x, x_dtype, conv_state, \
                                                                  w, d_n, max_n, channels, kernel,       \
                                                                  x_stride);                             \
    } while (0)
    switch (kernel) {
    case 2: CONV_LAUNCH(2); break;
    case 3: CONV_LAUNCH(3); break;
    case 4: CONV_LAUNCH(4); break;
    default: CONV_LAUNCH(0); break;
    }
#undef CONV_LAUNCH
    FRT_LAUNCH_CHECK();
    if (kernel > 1) {
        conv1d_state_kernel<<<(channels + 255) / 256, 256, 0, s>>>(x, x_dtype, conv_state, d_n,
                                                                  max_n, channels, kernel, x_stride);
        FRT_LAUNCH_CHECK();
    }
    return 0;
}

extern "C" int frt_cuda_conv1d_causal_strided(void *stream, void *out, frt_cuda_dtype out_dtype,
                                              const void *x, frt_cuda_dtype x_dtype, int x_stride,
                                              float *conv_state, const float *w, const int32_t *d_n,
                                              int max_n, int channels, int kernel)
{
    conv_outs o = {{out, NULL, NULL}, {0, 0, 0}, {channels, 0, 0}, 1, 0, 0, 0.0f};
    return conv1d_run(stream, o, out_dtype, x, x_dtype, x_stride, conv_state, w, d_n, max_n, channels, kernel);
}

extern "C" int frt_cuda_conv1d_causal_split(void *stream, void *const *outs, const int *widths, int n_outs,
                                            frt_cuda_dtype out_dtype, const void *x, frt_cuda_dtype x_dtype,
                                            int x_stride, float *conv_state, const float *w, const int32_t *d_n,
                                            int max_n, int channels, int kernel, int l2_channels, int l2_dim,
                                            float l2_eps)
{
    FRT_ARG(outs && widths && n_outs >= 1 && n_outs <= 3, "cuda conv1d split: %d outputs (1..3)", n_outs);
    FRT_ARG(l2_channels >= 0 && l2_channels <= channels && (l2_channels == 0 || l2_dim > 0),
            "cuda conv1d split: L2 channels %d of %d, dim %d", l2_channels, channels, l2_dim);
    if (l2_channels && (l2_channels % CONV_THREADS || l2_dim % 32 || CONV_THREADS % l2_dim))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda conv1d split: the fused L2 norm needs its channels in blocks of %d and a group "
                         "of 32..%d dividing %d (channels %d, group %d)",
                         CONV_THREADS, CONV_THREADS, CONV_THREADS, l2_channels, l2_dim);
    conv_outs o;
    memset(&o, 0, sizeof o);
    o.n = n_outs;
    o.l2_ch = l2_channels;
    o.l2_dim = l2_dim;
    o.l2_eps = l2_eps;
    int col = 0;
    for (int i = 0; i < n_outs; i++) {
        FRT_ARG(widths[i] >= 1 && widths[i] <= channels - col, "cuda conv1d split: width %d of output %d",
                widths[i], i);
        o.out[i] = outs[i];
        o.first[i] = col;
        o.width[i] = widths[i];
        col += widths[i];
    }
    FRT_ARG(col == channels, "cuda conv1d split: the widths cover %d of %d channels", col, channels);
    return conv1d_run(stream, o, out_dtype, x, x_dtype, x_stride, conv_state, w, d_n, max_n, channels, kernel);
}

extern "C" int frt_cuda_conv1d_causal(void *stream, void *out, frt_cuda_dtype out_dtype,
                                      const void *x, frt_cuda_dtype x_dtype, float *conv_state,
                                      const float *w, const int32_t *d_n, int max_n, int channels,
                                      int kernel)
{
    return frt_cuda_conv1d_causal_strided(stream, out, out_dtype, x, x_dtype, channels, conv_state, w,
                                          d_n, max_n, channels, kernel);
}
