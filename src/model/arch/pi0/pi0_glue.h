/*
 * arch/pi0/pi0_glue.h - the small CUDA kernels of the Pi0 / Pi0.5 forward
 * pass (pi0_glue.cu) that are specific to the policy: patches, the prefix
 * masks and positions from the input ports, the prefix embedding, q / k / v
 * with RoPE at given positions, residual adds (plain, biased, gated), the
 * episode noise, the Euler step. The general kernels (LayerNorm, GELU,
 * adaRMSNorm, masked attention) are in kernels/cuda/kernels_policy_cuda.h.
 *
 * Conventions as kernels/cuda/kernels_cuda.h: `stream` is a cudaStream_t
 * as void *; launchers only enqueue (legal inside a capture) and return 0,
 * FRT_ERR_INVALID_ARGUMENT (nothing enqueued) or FRT_ERR_BACKEND. Sizes are
 * launch arguments (one graph per shape); what changes between replays is
 * read from device memory. Tested against CPU twins in
 * tests/test_cuda_policy_kernels.c and through the whole policy in
 * tests/test_cuda_policy.c.
 */
#ifndef FRT_MODEL_ARCH_PI0_GLUE_H
#define FRT_MODEL_ARCH_PI0_GLUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out [cams * (H/p) * (W/p), kp] bf16: the patches of img [cams, 3, H, W]
 * f32 laid out as frt_cpu_patchify (channel, ky, kx), columns k >= 3 p^2
 * zero (kp >= 3 p^2: rows padded for 16-byte alignment).
 * Twin: frt_cpu_patchify per camera. */
int pi0_cuda_patchify(void *stream, uint16_t *out, const float *img, int cams, int height, int width, int patch,
                      int kp);

/* x[r, c] += (y[r, c] + b[c]) * gate[c]; b, gate [cols] f32 or NULL (none).
 * x, y [rows, cols] f32. Roundings: y + b, then one fused multiply-add with
 * the gate (frt_residual_add, kernels/cuda/residual_util.h; the bits of
 * frt_cuda_add_norm's x). Twin: frt_cpu_add_bias + frt_cpu_add, or the gated
 * residual of pi0_cpu.c. */
int pi0_cuda_residual(void *stream, float *x, const float *y, const float *b, const float *gate, int rows,
                      int cols);

/* The prefix rows' mask and positions from the ports: row r < cams * n_patch
 * is camera r / n_patch's token (valid iff cam_mask[r / n_patch]), row
 * ni + i the prompt's token i (valid iff tok_mask[i]), n = ni + tokens rows.
 * mask [n_total] u8 (rows n .. n_total - 1 get 0); pos [n] i32 =
 * max(cumsum(mask) - 1, 0); meta [4] i32 = n, valid rows, 0, 0. One thread
 * (n_total is a few thousand at most).
 * Twin: task_prefix of pi0_cpu.c (all camera slots present as rows). */
int pi0_cuda_prefix_mask(void *stream, uint8_t *mask, int32_t *pos, int32_t *meta, const uint8_t *cam_mask,
                         const uint8_t *tok_mask, int cams, int n_patch, int tokens, int n_total);

/* x [cams * n_patch + tokens, width] f32: the image rows copied from
 * vis [cams * n_patch, width] f32, then embed[ids[i]] * scale for each
 * prompt token (embed [vocab, width] bf16; an id outside [0, vocab) gives
 * zeros). Twin: prefix_embed of pi0_cpu.c. */
int pi0_cuda_prefix_embed(void *stream, float *x, const float *vis, const uint16_t *embed, const int32_t *ids,
                          int img_rows, int tokens, int width, int vocab, float scale);

/* pos[r] = meta[1] + r for r < n (the suffix continues after the valid
 * prefix), and, when cs is not NULL, the RoPE table of those positions for
 * frt_cuda_attn_rope: cs [n][half][2] f32 = cosf, sinf of (float)pos[r] *
 * inv_freq[p] (inv_freq [half] f32, device), the angle and functions of
 * pi0_cuda_qkv_rope (the same bits). One launch.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL pos / meta, n < 1, cs without
 * inv_freq or half < 1), FRT_ERR_BACKEND. */
int pi0_cuda_suffix_pos(void *stream, int32_t *pos, float *cs, const float *inv_freq, const int32_t *meta, int n,
                        int half);

/* Splits the fused projection qkv [n, (heads + 2 kv) hd] f32 into q [n,
 * heads, hd] bf16, k rows (k + t * ldk, [kv, hd]) and v rows (v + t * ldv)
 * bf16, with RoPE (rotate-half, whole head) on q and k at pos[t]: angle
 * (float)pos * inv_freq[i], inv_freq [hd / 2] f32 (device, computed with
 * frt_cpu_rope's expression), accurate cosf / sinf. Twin: frt_cpu_rope. */
int pi0_cuda_qkv_rope(void *stream, uint16_t *q, uint16_t *k, int ldk, uint16_t *v, int ldv, const float *qkv,
                      const int32_t *pos, const float *inv_freq, int n, int heads, int kv_heads, int hd);

/* pi0_cuda_qkv_rope over `slots` blocks of n tokens (fused CFG's two
 * slots, a batch's up to FRT_POLICY_BATCH_MAX, in one launch): q [slots n, heads, hd] and qkv [slots n, ...]
 * contiguous over the blocks; block s's K / V rows go to k[s] / v[s] (rows
 * ldk / ldv apart) at positions pos[s] [n]. The bits of one
 * pi0_cuda_qkv_rope per block. Errors: FRT_ERR_INVALID_ARGUMENT (those of
 * pi0_cuda_qkv_rope, slots outside 1..PI0_KV_SLOTS, a NULL slot pointer),
 * FRT_ERR_BACKEND. */
#define PI0_KV_SLOTS 64
typedef struct pi0_kv_slots {
    uint16_t *k[PI0_KV_SLOTS], *v[PI0_KV_SLOTS];
    const int32_t *pos[PI0_KV_SLOTS];
    int slots;
} pi0_kv_slots;

int pi0_cuda_qkv_rope_slots(void *stream, uint16_t *q, const pi0_kv_slots *d, int ldk, int ldv, const float *qkv,
                            const float *inv_freq, int n, int heads, int kv_heads, int hd);

/* x [n] f32 = noise when opts[2] (frt_policy_options.noise_given) is set,
 * else the episode stream of pi0.h (pi0_episode_noise) for
 * episode = {seed, step}; then, when meta[0] >= 1 and (meta2 NULL or
 * meta2[0] >= 1) (the prefixes are there), the episode's step advances by
 * one. Two launches. */
int pi0_cuda_noise(void *stream, float *x, const float *noise, const int32_t *opts, uint64_t *episode,
                   const int32_t *meta, const int32_t *meta2, int n);

/* cudaMemsetAsync(p, 0, bytes). */
int pi0_cuda_zero(void *stream, void *p, size_t bytes);

/* x += dt * v (fp32, no contraction, as pi0_cpu.c's euler); v0 (may be
 * NULL) gets a copy of v. */
int pi0_cuda_euler(void *stream, float *x, const float *v, float *v0, float dt, int n);

/* cudaMemcpyAsync(dst, src, bytes, Default) (device, pinned host). */
int pi0_cuda_copy(void *stream, void *dst, const void *src, size_t bytes);

/* Up to PI0_COPY_MAX device copies of `bytes` each, dst[i] <- src[i] (no
 * overlaps), in one kernel launch instead of n copy nodes of a graph (the
 * prefix KV of every layer into the state and back). */
#define PI0_COPY_MAX 64
typedef struct pi0_copy_list {
    void *dst[PI0_COPY_MAX];
    const void *src[PI0_COPY_MAX];
    int n;
    size_t bytes;
} pi0_copy_list;

/* Enqueues the copies of l (passed by value to the kernel: l may be freed
 * after the call). 16-byte words where every pointer and bytes allow.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL list or pointer, n outside
 * 0..PI0_COPY_MAX), FRT_ERR_BACKEND. Tested in test_cuda_policy_kernels.c. */
int pi0_cuda_copy_many(void *stream, const pi0_copy_list *l);

/* *nodes = the nodes (kernels, copies, memsets, host tasks) the stream's
 * capture holds so far (cudaStreamGetCaptureInfo + cudaGraphGetNodes; legal
 * inside the capture, enqueues nothing). Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL), FRT_ERR_STATE (the stream is not capturing), FRT_ERR_BACKEND. */
int pi0_cuda_capture_nodes(void *stream, int *nodes);

#ifdef __cplusplus
}
#endif
#endif /* FRT_MODEL_ARCH_PI0_GLUE_H */
