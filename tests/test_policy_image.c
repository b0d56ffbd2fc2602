/*
 * test_policy_image.c - camera images for the policy inputs
 * (frt/policy_io.h): PNG / JPEG decoding against Pillow's
 * Image.open(f).convert("RGB") and openpi's resize_with_pad (PIL bilinear)
 * against goldens made at test time by scripts/ref/policy_io_goldens.py on
 * random images of odd sizes and modes; the [-1, 1] conversion; every
 * refusal (16-bit, CMYK, truncated, corrupt, unknown format, bad sizes and
 * channel counts, float values out of range).
 */
#include "policy_test_util.h"

#include <png.h>

/* Largest |a - b| over N bytes. */
static int max_abs_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        if (d > m) m = d;
    }
    return m;
}

static void test_image_goldens(const json_t *m)
{
    const json_t *cases = json_object_get(m, "images");
    int worst_dec = 0, worst_rsz = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "name"));
        char fname[128];
        frt_policy_image img = {0};
        CHECK_OK(frt_policy_image_load(ptu_path(json_string_value(json_object_get(c, "file"))), &img));
        if (!img.rgb) continue;
        int w = (int)json_integer_value(json_object_get(c, "width"));
        int h = (int)json_integer_value(json_object_get(c, "height"));
        CHECK_MSG(img.width == w && img.height == h, "%s: %dx%d, want %dx%d", name, img.width, img.height, w, h);
        size_t len;
        snprintf(fname, sizeof fname, "img_%s.dec", name);
        uint8_t *dec = (uint8_t *)ptu_read(fname, &len);
        CHECK(len == (size_t)w * h * 3);
        int d = len == (size_t)w * h * 3 ? max_abs_diff(img.rgb, dec, len) : 255;
        CHECK_MSG(d == 0, "%s: decoded pixels differ from Pillow's by up to %d", name, d);
        worst_dec = d > worst_dec ? d : worst_dec;
        uint8_t *rsz = xmalloc(224 * 224 * 3);
        CHECK_OK(frt_policy_resize_with_pad(img.rgb, h, w, 224, 224, rsz));
        snprintf(fname, sizeof fname, "img_%s.rsz", name);
        uint8_t *want = (uint8_t *)ptu_read(fname, &len);
        d = len == 224 * 224 * 3 ? max_abs_diff(rsz, want, len) : 255;
        CHECK_MSG(d == 0, "%s: resize_with_pad differs from PIL's by up to %d", name, d);
        worst_rsz = d > worst_rsz ? d : worst_rsz;
        /* pixel_values: x / 255 * 2 - 1 in f32, CHW */
        float *pix = xmalloc(3 * 224 * 224 * sizeof *pix);
        CHECK_OK(frt_policy_pixels_from_u8(img.rgb, h, w, 3, pix));
        int conv_ok = 1;
        for (size_t p = 0; p < 224 * 224; p++)
            for (int ch = 0; ch < 3; ch++)
                conv_ok &= pix[ch * 224 * 224 + p] == (float)want[p * 3 + ch] / 255.0f * 2.0f - 1.0f;
        CHECK_MSG(conv_ok, "%s: pixel_values", name);
        free(pix), free(want), free(rsz), free(dec);
        frt_policy_image_free(&img);
        CHECK(img.rgb == NULL && img.width == 0);
    }
    printf("images: %zu files, max |frt - Pillow| decode %d, resize_with_pad %d\n", json_array_size(cases),
           worst_dec, worst_rsz);
}

static void test_array_goldens(const json_t *m)
{
    const json_t *cases = json_object_get(m, "arrays");
    int worst = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *f = json_string_value(json_object_get(c, "file"));
        int h = (int)json_integer_value(json_object_get(c, "height"));
        int w = (int)json_integer_value(json_object_get(c, "width"));
        int oh = (int)json_integer_value(json_object_get(c, "out_height"));
        int ow = (int)json_integer_value(json_object_get(c, "out_width"));
        char name[128];
        size_t len, wlen;
        snprintf(name, sizeof name, "%s.u8", f);
        uint8_t *in = (uint8_t *)ptu_read(name, &len);
        snprintf(name, sizeof name, "%s.rsz", f);
        uint8_t *want = (uint8_t *)ptu_read(name, &wlen);
        uint8_t *out = xmalloc((size_t)oh * ow * 3);
        CHECK_OK(frt_policy_resize_with_pad(in, h, w, oh, ow, out));
        int d = wlen == (size_t)oh * ow * 3 ? max_abs_diff(out, want, wlen) : 255;
        CHECK_MSG(d == 0, "%s (%dx%d -> %dx%d): differs by up to %d", f, w, h, ow, oh, d);
        worst = d > worst ? d : worst;
        free(in), free(want), free(out);
    }
    printf("arrays: %zu resizes to other targets, max |frt - PIL| %d\n", json_array_size(cases), worst);
}

static void test_refusals(const json_t *m)
{
    const json_t *cases = json_object_get(m, "refused");
    frt_policy_image img = {0};
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *want = json_string_value(json_object_get(c, "status"));
        int rc = frt_policy_image_load(ptu_path(json_string_value(json_object_get(c, "file"))), &img);
        CHECK_MSG(!strcmp(frt_status_name(rc), want), "%s: got %s (%s), want %s",
                  json_string_value(json_object_get(c, "name")), frt_status_name(rc), frt_last_error(), want);
        CHECK(img.rgb == NULL);
    }
    /* truncated and corrupted files */
    const char *files[] = {"img_rgb_wide.png", "img_jpeg_rgb.jpg", "img_jpeg_progressive.jpg", "img_palette.png"};
    for (int f = 0; f < 4; f++) {
        size_t len;
        char *data = ptu_read(files[f], &len);
        for (size_t cut = 4; cut < len; cut = cut * 3 / 2 + 7) {
            int want = cut < 8 && f % 3 == 0 ? FRT_ERR_UNSUPPORTED : FRT_ERR_FORMAT; /* PNG signature cut */
            CHECK_STATUS(frt_policy_image_decode(data, cut, &img), want);
            CHECK(img.rgb == NULL);
        }
        frt_test_seed(f + 1);
        for (size_t k = len / 3; k < len - 16; k += 97) data[k] ^= (char)(1 + frt_test_u64() % 255);
        int rc = frt_policy_image_decode(data, len, &img);
        CHECK_MSG(rc == FRT_ERR_FORMAT || rc == 0, "%s corrupted: %s", files[f], frt_status_name(rc));
        frt_policy_image_free(&img);
        free(data);
    }
    CHECK_STATUS(frt_policy_image_decode("GIF89a....", 10, &img), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_policy_image_decode("x", 0, &img), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_image_load(ptu_path("nope.png"), &img), FRT_ERR_NOT_FOUND);
    CHECK(strstr(frt_last_error(), "nope.png") != NULL);
    FILE *f = fopen(ptu_path("empty.png"), "w");
    fclose(f);
    CHECK_STATUS(frt_policy_image_load(ptu_path("empty.png"), &img), FRT_ERR_FORMAT);
    frt_policy_image_free(NULL);
}

static void test_array_refusals(void)
{
    uint8_t px[7 * 1000 * 3], out[96 * 96 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(frt_test_u64() & 0xff);
    CHECK_STATUS(frt_policy_resize_with_pad(px, 7, 1000, 96, 96, out), FRT_ERR_INVALID_ARGUMENT); /* 0 rows */
    CHECK_STATUS(frt_policy_resize_with_pad(px, 0, 10, 96, 96, out), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_resize_with_pad(px, 10, 10, 96, 0, out), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_resize_with_pad(NULL, 10, 10, 96, 96, out), FRT_ERR_INVALID_ARGUMENT);
    float *pix = xmalloc(3 * 224 * 224 * sizeof *pix);
    CHECK_STATUS(frt_policy_pixels_from_u8(px, 10, 10, 4, pix), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_pixels_from_u8(px, 10, 10, 1, pix), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_pixels_from_u8(px, 0, 10, 3, pix), FRT_ERR_INVALID_ARGUMENT);
    free(pix);
}

/* An Adam7-interlaced RGB PNG written by libpng (Pillow writes none) reads
 * back as the pixels written. */
static void test_interlaced_png(void)
{
    enum { W = 37, H = 23 };
    uint8_t px[H * W * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(frt_test_u64() >> 56);
    FILE *f = fopen(ptu_path("adam7.png"), "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (!f || !png || !info || setjmp(png_jmpbuf(png))) {
        CHECK(!"libpng write failed");
        return;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, W, H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_bytep rows[H];
    for (int y = 0; y < H; y++) rows[y] = px + (size_t)y * W * 3;
    png_set_rows(png, info, rows);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    frt_policy_image img = {0};
    CHECK_OK(frt_policy_image_load(ptu_path("adam7.png"), &img));
    CHECK(img.rgb && img.width == W && img.height == H && !memcmp(img.rgb, px, sizeof px));
    frt_policy_image_free(&img);
}

static void test_float_pixels(void)
{
    size_t n = 224 * 224 * 3;
    float *hwc = xmalloc(n * sizeof *hwc), *chw = xmalloc(n * sizeof *chw);
    frt_test_seed(7);
    frt_test_fill(hwc, n, -1.0f, 1.0f);
    hwc[5] = 1.0f;
    hwc[6] = -1.0f;
    CHECK_OK(frt_policy_pixels_from_f32(hwc, 224, 224, 3, chw));
    int ok = 1;
    for (size_t p = 0; p < 224 * 224; p++)
        for (int c = 0; c < 3; c++) ok &= chw[c * 224 * 224 + p] == hwc[p * 3 + c];
    CHECK(ok);
    CHECK_STATUS(frt_policy_pixels_from_f32(hwc, 200, 224, 3, chw), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_policy_pixels_from_f32(hwc, 224, 224, 4, chw), FRT_ERR_INVALID_ARGUMENT);
    hwc[1000] = 1.5f;
    CHECK_STATUS(frt_policy_pixels_from_f32(hwc, 224, 224, 3, chw), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "1000") != NULL);
    hwc[1000] = NAN;
    CHECK_STATUS(frt_policy_pixels_from_f32(hwc, 224, 224, 3, chw), FRT_ERR_INVALID_ARGUMENT);
    free(hwc), free(chw);
}

int main(void)
{
    json_t *m = ptu_setup(0);
    test_image_goldens(m);
    test_array_goldens(m);
    test_refusals(m);
    test_array_refusals();
    test_interlaced_png();
    test_float_pixels();
    json_decref(m);
    return frt_test_report();
}
