/*
 * patchify.c - cuts an image into the non-overlapping patches a stride-p
 * convolution reads, so the patch embedding becomes one GEMM.
 * Math: transformers 5.x modeling_siglip.py SiglipVisionEmbeddings
 * (Conv2d(channels, width, kernel p, stride p, no padding), then
 * flatten(2).transpose(1, 2): patches in row-major order). Tested in
 * tests/test_kernel_policy_ops.c against a direct convolution.
 */
#include "kernels/cpu/kernels_cpu.h"

#include <string.h>

void frt_cpu_patchify(float *out, const float *img, int channels, int height, int width, int patch)
{
    int ny = height / patch, nx = width / patch;
    size_t row = (size_t)channels * patch * patch;
    for (int py = 0; py < ny; py++)
        for (int px = 0; px < nx; px++) {
            float *o = out + ((size_t)py * nx + px) * row;
            for (int c = 0; c < channels; c++)
                for (int ky = 0; ky < patch; ky++) {
                    const float *src = img + ((size_t)c * height + (size_t)py * patch + ky) * width + (size_t)px * patch;
                    memcpy(o + ((size_t)c * patch + ky) * patch, src, (size_t)patch * sizeof(float));
                }
        }
}
