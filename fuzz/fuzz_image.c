/*
 * fuzz_image.c - libFuzzer target: PNG / JPEG file images through
 * frt_policy_image_decode (frt/policy_io.h), then a decoded image through
 * resize_with_pad and the [-1, 1] conversion. A decode either fails with a
 * status and no image, or yields an RGB image of the sizes it claims whose
 * pixel_values lie in [-1, 1].
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_image CORPUS;
 * CI replays fuzz/corpus/image/ through replay_image.
 */
#include "frt/policy_io.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_policy_image img = {0};
    if (frt_policy_image_decode(data, size, &img) != 0) {
        if (img.rgb) abort();
        return 0;
    }
    if (!img.rgb || img.width < 1 || img.height < 1) abort();
    if ((size_t)img.width * (size_t)img.height <= 1u << 20) { /* keep each input fast */
        float *pix = malloc(3 * FRT_POLICY_IMAGE_SIZE * FRT_POLICY_IMAGE_SIZE * sizeof *pix);
        int rc = pix ? frt_policy_pixels_from_u8(img.rgb, img.height, img.width, 3, pix) : -1;
        for (size_t i = 0; rc == 0 && i < 3 * FRT_POLICY_IMAGE_SIZE * FRT_POLICY_IMAGE_SIZE; i++)
            if (!(pix[i] >= -1.0f && pix[i] <= 1.0f)) abort();
        free(pix);
    }
    frt_policy_image_free(&img);
    return 0;
}
