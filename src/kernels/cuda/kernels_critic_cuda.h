/*
 * kernels/cuda/kernels_critic_cuda.h - the two CUDA kernels of the rollout
 * host's value critic (src/robot/critic.c, docs/robot.md; critic_mlp.cu):
 * the critic's input (the state beside the vision tokens pooled over the
 * present cameras) and one f32 dense layer, optionally SiLU'd.
 *
 * Conventions: those of kernels_cuda.h (stream as void *, launchers only
 * enqueue and are legal inside a capture, 0 / FRT_ERR_INVALID_ARGUMENT /
 * FRT_ERR_BACKEND, row-major contiguous layouts, deterministic: no atomics,
 * every reduction in a fixed order that depends on the sizes only). What
 * changes between replays (the camera mask, the tokens, the state) is read
 * from device memory. The CPU twin is the critic's host task (critic.c:
 * pool, dense) and frt_critic_reference in double; tests/test_cuda_rollout.c
 * checks both kernels against a double reference on random data.
 */
#ifndef FRT_KERNELS_CRITIC_CUDA_H
#define FRT_KERNELS_CRITIC_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The critic's input x0 [state_dim + width] f32 (device):
 *   x0[i]             = state[i]                                  i < state_dim
 *   x0[state_dim + j] = mean over present cameras c (d_cam_mask[c] != 0)
 *                       and patches p of tokens[c, p, j]          j < width
 * (0 when no camera is present). state [state_dim] f32, tokens [n_cameras,
 * n_patch, width] f32, d_cam_mask [n_cameras] u8, all device. Sums in f32,
 * 8 row groups per column summed in a fixed order. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, a size < 1; state may be NULL only with
 * state_dim 0), FRT_ERR_BACKEND. */
int frt_cuda_critic_input(void *stream, float *x0, const float *state, int state_dim, const float *tokens,
                          const uint8_t *d_cam_mask, int n_cameras, int n_patch, int width);

/* One dense layer: y[o] = act(sum_i w[o, i] x[i] + b[o]) for o < out, act
 * SiLU (x / (1 + exp(-x))) when silu is 1, else the identity. w [out, in],
 * b [out], x [in], y [out] f32, device (y must not alias x). One warp per
 * output, a fixed butterfly sum. Errors: FRT_ERR_INVALID_ARGUMENT (NULL,
 * in or out < 1, silu not 0/1), FRT_ERR_BACKEND. */
int frt_cuda_dense_f32(void *stream, float *y, const float *w, const float *b, const float *x, int in, int out,
                       int silu);

#ifdef __cplusplus
}
#endif
#endif
