/*
 * policy/image_resize.c - openpi's resize_with_pad (openpi_client
 * image_tools._resize_with_pad_pil) with PIL's bilinear resampling
 * arithmetic for 8-bit images (Pillow src/libImaging/Resample.c:
 * precompute_coeffs, normalize_coeffs_8bpc, the 8bpc horizontal and
 * vertical passes), and the u8 -> [-1, 1] f32 CHW conversion of openpi's
 * Observation.from_dict. Written for frt from the published math.
 */
#include "frt/policy_io.h"

#include "frt/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2) /* PIL: 8 bits of result, 2 of headroom */

/* PIL's bilinear (triangle) filter, support 1. */
static double triangle(double x)
{
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Per output pixel: first input index, tap count and ksize fixed-point
 * coefficients (PIL's precompute_coeffs + normalize_coeffs_8bpc over the
 * whole axis [0, in_size)). Returns ksize, 0 when out of memory. */
static int coeffs(int in_size, int out_size, int **bounds_out, int32_t **kk_out)
{
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale, inv_filterscale = 1.0 / filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc((size_t)out_size * 2 * sizeof *bounds);
    int32_t *kk = malloc((size_t)out_size * (size_t)ksize * sizeof *kk);
    double *k = malloc((size_t)ksize * sizeof *k);
    if (!bounds || !kk || !k) {
        free(bounds), free(kk), free(k);
        return 0;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) ww += k[x] = triangle((x + xmin - center + 0.5) * inv_filterscale);
        for (int x = 0; x < ksize; x++) {
            double w = x < xmax ? (ww != 0.0 ? k[x] / ww : k[x]) : 0.0;
            kk[xx * ksize + x] = (int32_t)(w < 0 ? -0.5 + w * (1 << PRECISION_BITS) : 0.5 + w * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *kk_out = kk;
    return ksize;
}

static uint8_t clip8(int32_t ss)
{
    int32_t v = ss >> PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* One axis of RGB u8 pixels: N_LINES lines, each reading IN_N pixels IN_STEP
 * apart (line starts LINE_STEP apart) and writing OUT_N pixels. */
typedef struct axis_pass {
    int n_lines;
    size_t in_line_step, in_step, out_line_step, out_step;
} axis_pass;

static void resample_axis(const uint8_t *in, uint8_t *out, const axis_pass *p, int out_n, int ksize,
                          const int *bounds, const int32_t *kk)
{
    for (int line = 0; line < p->n_lines; line++) {
        const uint8_t *src = in + (size_t)line * p->in_line_step;
        uint8_t *dst = out + (size_t)line * p->out_line_step;
        for (int o = 0; o < out_n; o++) {
            const int32_t *k = kk + (size_t)o * ksize;
            int xmin = bounds[2 * o], xmax = bounds[2 * o + 1];
            for (int c = 0; c < 3; c++) {
                int32_t ss = 1 << (PRECISION_BITS - 1);
                for (int x = 0; x < xmax; x++) ss += src[(size_t)(x + xmin) * p->in_step + c] * k[x];
                dst[(size_t)o * p->out_step + c] = clip8(ss);
            }
        }
    }
}

/* PIL's Image.resize((w2, h2), BILINEAR) of an RGB u8 image: horizontal
 * pass over the rows the vertical pass reads, then the vertical pass; an
 * axis whose size is unchanged is not resampled. OUT [h2, w2, 3]. */
static int pil_bilinear(const uint8_t *in, int h, int w, int h2, int w2, uint8_t *out)
{
    int *vb = NULL, *hb = NULL;
    int32_t *vk = NULL, *hk = NULL;
    int kv = coeffs(h, h2, &vb, &vk);
    int kh = kv ? coeffs(w, w2, &hb, &hk) : 0;
    int y0 = kv ? vb[0] : 0, y1 = kv ? vb[2 * h2 - 2] + vb[2 * h2 - 1] : 0;
    uint8_t *tmp = kh ? malloc((size_t)(y1 - y0) * w2 * 3) : NULL;
    int rc = 0;
    if (!tmp) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "resize: out of memory (%dx%d -> %dx%d)", w, h, w2, h2);
    } else {
        const uint8_t *mid = in;
        if (w2 != w) { /* rows y0..y1 only, as PIL does */
            axis_pass hp = {y1 - y0, (size_t)w * 3, 3, (size_t)w2 * 3, 3};
            resample_axis(in + (size_t)y0 * w * 3, tmp, &hp, w2, kh, hb, hk);
            for (int i = 0; i < h2; i++) vb[2 * i] -= y0;
            mid = tmp;
        }
        if (h2 != h) {
            axis_pass vp = {w2, 3, (size_t)w2 * 3, 3, (size_t)w2 * 3};
            resample_axis(mid, out, &vp, h2, kv, vb, vk);
        } else {
            memcpy(out, mid, (size_t)h2 * w2 * 3);
        }
    }
    free(vb), free(vk), free(hb), free(hk), free(tmp);
    return rc;
}

int frt_policy_resize_with_pad(const uint8_t *rgb, int height, int width, int out_h, int out_w, uint8_t *out)
{
    if (!rgb || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "resize_with_pad: NULL argument");
    if (height < 1 || width < 1 || out_h < 1 || out_w < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "resize_with_pad: size %dx%d -> %dx%d (each must be >= 1)",
                         width, height, out_w, out_h);
    if (height == out_h && width == out_w) {
        memcpy(out, rgb, (size_t)height * width * 3);
        return 0;
    }
    double rw = (double)width / out_w, rh = (double)height / out_h, ratio = rw > rh ? rw : rh;
    int h2 = (int)(height / ratio), w2 = (int)(width / ratio);
    if (h2 < 1 || w2 < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "resize_with_pad: %dx%d is too thin to resize to %dx%d (a side would be 0)", width, height,
                         out_w, out_h);
    uint8_t *small = malloc((size_t)h2 * w2 * 3);
    if (!small) return frt_error(FRT_ERR_OUT_OF_MEMORY, "resize_with_pad: out of memory");
    int rc = pil_bilinear(rgb, height, width, h2, w2, small);
    if (rc == 0) {
        int top = (out_h - h2) / 2, left = (out_w - w2) / 2;
        memset(out, 0, (size_t)out_h * out_w * 3);
        for (int y = 0; y < h2; y++)
            memcpy(out + ((size_t)(y + top) * out_w + left) * 3, small + (size_t)y * w2 * 3, (size_t)w2 * 3);
    }
    free(small);
    return rc;
}

static int check_pixel_args(const void *hwc, int channels, const float *out)
{
    if (!hwc || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "pixels: NULL argument");
    if (channels != 3)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "pixels: %d channels; an RGB image has 3", channels);
    return 0;
}

int frt_policy_pixels_from_u8(const uint8_t *hwc, int height, int width, int channels, float *out)
{
    enum { S = FRT_POLICY_IMAGE_SIZE };
    FRT_TRY(check_pixel_args(hwc, channels, out));
    /* the expression per value, (float)v / 255 * 2 - 1, tabled once: the
     * same bits, without a division per element */
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (float)v / 255.0f * 2.0f - 1.0f;
    uint8_t *sq = NULL;
    const uint8_t *src = hwc; /* already S x S: resize_with_pad would copy it unchanged */
    int rc = 0;
    if (height != S || width != S) {
        if (!(sq = malloc((size_t)S * S * 3))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pixels: out of memory");
        rc = frt_policy_resize_with_pad(hwc, height, width, S, S, sq);
        src = sq;
    }
    for (size_t i = 0; rc == 0 && i < (size_t)S * S; i++)
        for (int c = 0; c < 3; c++) out[(size_t)c * S * S + i] = lut[src[i * 3 + c]];
    free(sq);
    return rc;
}

int frt_policy_pixels_from_f32(const float *hwc, int height, int width, int channels, float *out)
{
    enum { S = FRT_POLICY_IMAGE_SIZE };
    FRT_TRY(check_pixel_args(hwc, channels, out));
    if (height != S || width != S)
        return frt_error(FRT_ERR_UNSUPPORTED, "pixels: a float image must be %dx%d already (got %dx%d); "
                         "resizing float images is not supported (give u8 pixels)", S, S, width, height);
    for (size_t i = 0; i < (size_t)S * S * 3; i++)
        if (!(hwc[i] >= -1.0f && hwc[i] <= 1.0f))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "pixels: value %g at index %zu is outside [-1, 1]",
                             (double)hwc[i], i);
    for (size_t i = 0; i < (size_t)S * S; i++)
        for (int c = 0; c < 3; c++) out[(size_t)c * S * S + i] = hwc[i * 3 + c];
    return 0;
}
