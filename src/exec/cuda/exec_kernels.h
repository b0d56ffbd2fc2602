/*
 * exec/cuda/exec_kernels.h - the few CUDA kernels the exec layer itself needs.
 *
 *   frt_cuda_copy_batch  the batched device-to-device copy behind
 *                        frt_buffer_copy_batch (capsule snapshot / restore):
 *                        one launch per FRT_CUDA_COPY_BATCH_MAX entries.
 *   frt_cuda_axpb        x = a * x + b over n fp32 values: the tiny kernel of
 *                        `frt bench exec`'s launch chain and of the cuda exec
 *                        tests (a real kernel node inside a captured graph).
 *
 * Streams are passed as void * (a cudaStream_t) so that C callers (tools,
 * tests) need no CUDA headers. Built only with CUDA. Both return 0 or an frt
 * status (FRT_ERR_BACKEND from the launch) and are legal inside a capture.
 */
#ifndef FRT_EXEC_CUDA_KERNELS_H
#define FRT_EXEC_CUDA_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRT_CUDA_COPY_BATCH_MAX 128

typedef struct frt_cuda_copy_desc {
    void *dst;
    const void *src;
    size_t bytes;
} frt_cuda_copy_desc;

/* Copies n device-to-device ranges (non-overlapping) on `stream`. The
 * descriptors are passed by value as kernel parameters, so they are baked into
 * a captured graph and `d` need not outlive the call. Entries whose pointers
 * are 16-byte aligned move 16 bytes per load. */
int frt_cuda_copy_batch(const frt_cuda_copy_desc *d, int n, void *stream);

/* x[i] = a * x[i] + b for i < n; x is device memory (fp32). */
int frt_cuda_axpb(void *stream, float *x, size_t n, float a, float b);

#ifdef __cplusplus
}
#endif
#endif
