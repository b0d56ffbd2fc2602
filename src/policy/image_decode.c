/*
 * policy/image_decode.c - PNG (libpng) and JPEG (libjpeg-turbo) file images
 * into [height, width, 3] u8 RGB, as PIL's Image.open(...).convert("RGB")
 * gives them (openpi's clients open camera frames with PIL). Both libraries
 * report errors through longjmp; each decoder keeps what it allocates in a
 * context struct outside the jump so a failure frees everything.
 */
#include "frt/policy_io.h"

#include "frt/status.h"
#include "policy/policy_internal.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#define IMG_MAX_SIDE 65535
#define IMG_MAX_PIXELS ((size_t)1 << 26)
#define IMG_MAX_FILE_BYTES ((size_t)1 << 30)

static int check_size(size_t w, size_t h)
{
    if (w < 1 || h < 1) return frt_error(FRT_ERR_FORMAT, "image: zero width or height");
    if (w > IMG_MAX_SIDE || h > IMG_MAX_SIDE || w * h > IMG_MAX_PIXELS)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "image: %zux%zu is larger than frt accepts (%d per side, %zu pixels)",
                         w, h, IMG_MAX_SIDE, IMG_MAX_PIXELS);
    return 0;
}

/* ---- PNG ----------------------------------------------------------------- */

typedef struct png_ctx {
    const unsigned char *data;
    size_t len, at;
    char msg[160];
    int status;        /* the frt status of a failure */
    int ok;            /* set when the rows were read */
    png_uint_32 w, h;
    uint8_t *rgb;      /* output, freed on failure */
    png_bytep *rows;
} png_ctx;

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->len - c->at) png_error(png, "truncated file");
    memcpy(out, c->data + c->at, n);
    c->at += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Transforms to 8-bit RGB after png_read_info; FRT status on refusal. */
static int png_setup(png_structp png, png_infop info, png_ctx *c)
{
    int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
    if (depth == 16) {
        c->status = FRT_ERR_UNSUPPORTED;
        snprintf(c->msg, sizeof c->msg, "16-bit channels are not supported (convert to 8-bit)");
        return -1;
    }
    if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    /* palette expansion turns a tRNS chunk into alpha: dropped like the rest */
    if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    return 0;
}

static int png_decode_rows(png_structp png, png_infop info, png_ctx *c)
{
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if (check_size(w, h) < 0) {
        c->status = (w < 1 || h < 1) ? FRT_ERR_FORMAT : FRT_ERR_OUT_OF_RANGE;
        snprintf(c->msg, sizeof c->msg, "%s", frt_last_error());
        return -1;
    }
    if (png_setup(png, info, c) < 0) return -1;
    if (png_get_rowbytes(png, info) != (size_t)w * 3) png_error(png, "unexpected row layout");
    c->rgb = malloc((size_t)w * h * 3);
    c->rows = malloc(h * sizeof *c->rows);
    if (!c->rgb || !c->rows) {
        c->status = FRT_ERR_OUT_OF_MEMORY;
        snprintf(c->msg, sizeof c->msg, "out of memory (%ux%u image)", (unsigned)w, (unsigned)h);
        return -1;
    }
    for (png_uint_32 y = 0; y < h; y++) c->rows[y] = c->rgb + (size_t)y * w * 3;
    png_read_image(png, c->rows);
    c->w = w;
    c->h = h;
    c->ok = 1;
    return 0;
}

static int png_decode(const unsigned char *data, size_t len, frt_policy_image *out)
{
    png_ctx c = {.data = data, .len = len, .status = FRT_ERR_FORMAT};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "image: out of memory (libpng)");
    }
    if (!setjmp(png_jmpbuf(png))) {
        png_set_user_limits(png, IMG_MAX_SIDE, IMG_MAX_SIDE);
        png_set_read_fn(png, &c, png_read_mem);
        png_read_info(png, info);
        png_decode_rows(png, info, &c);
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(c.rows);
    if (!c.ok) {
        free(c.rgb);
        return frt_error(c.status, "PNG: %s", c.msg);
    }
    *out = (frt_policy_image){.height = (int)c.h, .width = (int)c.w, .rgb = c.rgb};
    return 0;
}

/* ---- JPEG ---------------------------------------------------------------- */

typedef struct jpeg_ctx {
    struct jpeg_error_mgr err; /* first: libjpeg hands it back as j_common_ptr->err */
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 32];
    int status; /* the frt status of a failure */
    uint8_t *rgb;
} jpeg_ctx;

static void jpeg_on_error(j_common_ptr cinfo)
{
    jpeg_ctx *c = (jpeg_ctx *)cinfo->err;
    char buf[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, buf);
    snprintf(c->msg, sizeof c->msg, "%s", buf);
    longjmp(c->jump, 1);
}

/* A warning (corrupt or truncated entropy data) is a refusal too: PIL
 * raises "image file is truncated" where libjpeg only warns. */
static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    if (level < 0) jpeg_on_error(cinfo);
}

static int jpeg_color_ok(struct jpeg_decompress_struct *d, jpeg_ctx *c)
{
    switch (d->jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_RGB:
    case JCS_YCbCr:
        d->out_color_space = JCS_RGB;
        return 1;
    default:
        snprintf(c->msg, sizeof c->msg, "color space %d (CMYK / YCCK) is not supported", (int)d->jpeg_color_space);
        return 0;
    }
}

static int jpeg_decode(const unsigned char *data, size_t len, frt_policy_image *out)
{
    struct jpeg_decompress_struct d;
    jpeg_ctx c = {.status = FRT_ERR_FORMAT};
    d.err = jpeg_std_error(&c.err);
    c.err.error_exit = jpeg_on_error;
    c.err.emit_message = jpeg_on_message;
    if (setjmp(c.jump)) {
        jpeg_destroy_decompress(&d);
        free(c.rgb);
        return frt_error(c.status, "JPEG: %s", c.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    if (!jpeg_color_ok(&d, &c)) {
        c.status = FRT_ERR_UNSUPPORTED;
        longjmp(c.jump, 1);
    }
    if (check_size(d.image_width, d.image_height) < 0) {
        c.status = FRT_ERR_OUT_OF_RANGE;
        snprintf(c.msg, sizeof c.msg, "%s", frt_last_error());
        longjmp(c.jump, 1);
    }
    jpeg_start_decompress(&d);
    size_t w = d.output_width, h = d.output_height;
    c.rgb = malloc(w * h * 3);
    if (!c.rgb || d.output_components != 3) {
        c.status = c.rgb ? FRT_ERR_FORMAT : FRT_ERR_OUT_OF_MEMORY;
        snprintf(c.msg, sizeof c.msg, c.rgb ? "unexpected component count" : "out of memory (%zux%zu image)", w, h);
        longjmp(c.jump, 1);
    }
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = c.rgb + (size_t)d.output_scanline * w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    *out = (frt_policy_image){.height = (int)h, .width = (int)w, .rgb = c.rgb};
    return 0;
}

/* ---- entry points ---------------------------------------------------------- */

int frt_policy_image_decode(const void *data, size_t len, frt_policy_image *out)
{
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (!data || !out || len == 0) return frt_error(FRT_ERR_INVALID_ARGUMENT, "image: NULL or empty data");
    const unsigned char *p = data;
    if (len >= 8 && !memcmp(p, png_sig, 8)) return png_decode(p, len, out);
    if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) return jpeg_decode(p, len, out);
    return frt_error(FRT_ERR_UNSUPPORTED, "image: not a PNG or JPEG file (unknown signature)");
}

static int parse_file(const char *data, size_t len, void *out)
{
    return frt_policy_image_decode(data, len, out);
}

int frt_policy_image_load(const char *path, frt_policy_image *out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "image: NULL argument");
    return policy_load_file(path, IMG_MAX_FILE_BYTES, parse_file, out);
}

void frt_policy_image_free(frt_policy_image *img)
{
    if (!img) return;
    free(img->rgb);
    *img = (frt_policy_image){0};
}
