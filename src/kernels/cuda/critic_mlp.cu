/*
 * kernels/cuda/critic_mlp.cu - the value critic's kernels
 * (kernels_critic_cuda.h): its input (state, then the vision tokens pooled
 * over the present cameras) and an f32 dense layer with an optional SiLU.
 * Small and latency-bound: the critic of the real Pi0.5 shape reads 1.5k
 * rows of 2048 tokens and a few MB of weights per tick.
 *
 * Input: a block covers 32 columns with 8 row groups (256 threads); group g
 * sums rows g, g + 8, ... in order, then the 8 partials are added in group
 * order (the same bits on every run). Dense: one warp per output, lane l
 * sums columns l, l + 32, ... in order, then frt_warp_sum's fixed butterfly.
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_critic_cuda.h"

#define CRITIC_COLS 32
#define CRITIC_GROUPS 8

__global__ void critic_input_kernel(float *x0, const float *state, int state_dim, const float *tokens,
                                    const uint8_t *mask, int n_cameras, int n_patch, int width)
{
    __shared__ float part[CRITIC_GROUPS][CRITIC_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * CRITIC_COLS + tx, nthreads = CRITIC_COLS * CRITIC_GROUPS;
    for (int i = blockIdx.x * nthreads + tid; i < state_dim; i += gridDim.x * nthreads) x0[i] = state[i];
    const int j = blockIdx.x * CRITIC_COLS + tx;
    int present = 0;
    for (int c = 0; c < n_cameras; c++) present += mask[c] != 0;
    float acc = 0.0f;
    const int rows = n_cameras * n_patch;
    if (j < width)
        for (int r = ty; r < rows; r += CRITIC_GROUPS)
            if (mask[r / n_patch]) acc += tokens[(size_t)r * width + j];
    part[ty][tx] = acc;
    __syncthreads();
    if (ty != 0 || j >= width) return;
    float sum = 0.0f;
    for (int g = 0; g < CRITIC_GROUPS; g++) sum += part[g][tx];
    const float inv = present ? 1.0f / (float)(present * n_patch) : 0.0f;
    x0[state_dim + j] = sum * inv;
}

__global__ void dense_f32_kernel(float *y, const float *w, const float *b, const float *x, int in, int out,
                                 int silu)
{
    const int o = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (o >= out) return;
    const float *row = w + (size_t)o * in;
    float acc = 0.0f;
    for (int i = lane; i < in; i += 32) acc = fmaf(row[i], x[i], acc);
    acc = frt_warp_sum(acc);
    if (lane != 0) return;
    acc += b[o];
    y[o] = silu ? frt_silu(acc) : acc;
}

extern "C" int frt_cuda_critic_input(void *stream, float *x0, const float *state, int state_dim, const float *tokens,
                                     const uint8_t *d_cam_mask, int n_cameras, int n_patch, int width)
{
    FRT_ARG(x0 && tokens && d_cam_mask && (state || state_dim == 0), "critic_input: NULL pointer");
    FRT_ARG(state_dim >= 0 && n_cameras >= 1 && n_patch >= 1 && width >= 1,
            "critic_input: state_dim %d, %d cameras, %d patches, width %d", state_dim, n_cameras, n_patch, width);
    const dim3 block(CRITIC_COLS, CRITIC_GROUPS);
    const int blocks = (width + CRITIC_COLS - 1) / CRITIC_COLS;
    critic_input_kernel<<<blocks, block, 0, (cudaStream_t)stream>>>(x0, state, state_dim, tokens, d_cam_mask,
                                                                     n_cameras, n_patch, width);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_dense_f32(void *stream, float *y, const float *w, const float *b, const float *x, int in,
                                  int out, int silu)
{
    FRT_ARG(y && w && b && x && y != x, "dense_f32: NULL pointer or y aliases x");
    FRT_ARG(in >= 1 && out >= 1 && (silu == 0 || silu == 1), "dense_f32: in %d, out %d, silu %d", in, out, silu);
    const int warps = 8;
    dense_f32_kernel<<<(out + warps - 1) / warps, warps * 32, 0, (cudaStream_t)stream>>>(y, w, b, x, in, out, silu);
    FRT_LAUNCH_CHECK();
    return 0;
}
