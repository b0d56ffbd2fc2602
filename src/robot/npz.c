/*
 * npz.c - numpy .npz archives through libzip: each array a version 1.0
 * .npy member (magic "\x93NUMPY", version 1 0, a little-endian u16 header
 * length, the header dict padded with spaces and ended by '\n' so the data
 * starts at a multiple of 64; numpy/lib/format.py), stored uncompressed.
 * numpy.load reads them.
 */
#include "robot/robot_internal.h"

#include "util/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

struct frt_npz {
    zip_t *zip;
    char *path;
};

int frt_npz_open(const char *path, frt_npz **out)
{
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "npz: NULL argument");
    *out = NULL;
    frt_npz *z = calloc(1, sizeof *z);
    if (!z || !(z->path = strdup(path))) {
        free(z);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "npz: out of memory");
    }
    int err = 0;
    z->zip = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!z->zip) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        int rc = frt_error(FRT_ERR_IO, "npz: %s: %s", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        free(z->path);
        free(z);
        return rc;
    }
    *out = z;
    return 0;
}

/* The .npy header for descr and shape into buf (cap bytes): its length, a
 * multiple of 64, or 0 when it does not fit. */
static size_t npy_header(char *buf, size_t cap, const char *descr, int ndim, const int64_t *shape)
{
    char dims[128] = "";
    size_t at = 0;
    for (int d = 0; d < ndim; d++)
        at += (size_t)snprintf(dims + at, sizeof dims - at, "%" PRId64 "%s", shape[d], ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
    size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
    if (n < 0 || (size_t)n >= sizeof dict || total > cap || total - 10 > 65535) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(total - 10);
    buf[8] = (char)(hl & 0xff);
    buf[9] = (char)(hl >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}

int frt_npz_add(frt_npz *z, const char *name, const char *descr, int ndim, const int64_t *shape, const void *data,
                size_t bytes)
{
    if (!z || !name || !descr || (ndim > 0 && !shape) || (bytes && !data))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "npz: NULL argument");
    if (ndim < 0 || ndim > 4) return frt_error(FRT_ERR_INVALID_ARGUMENT, "npz: %s: %d dimensions", name, ndim);
    char head[320];
    size_t hn = npy_header(head, sizeof head, descr, ndim, shape);
    if (!hn) return frt_error(FRT_ERR_INVALID_ARGUMENT, "npz: %s: header too long", name);
    char *img = malloc(hn + bytes);
    if (!img) return frt_error(FRT_ERR_OUT_OF_MEMORY, "npz: %s: out of memory", name);
    memcpy(img, head, hn);
    if (bytes) memcpy(img + hn, data, bytes);
    zip_source_t *src = zip_source_buffer(z->zip, img, hn + bytes, 1); /* libzip frees img */
    if (!src) {
        free(img);
        return frt_error(FRT_ERR_IO, "npz: %s: %s", z->path, zip_strerror(z->zip));
    }
    char member[96];
    snprintf(member, sizeof member, "%s.npy", name);
    zip_int64_t idx = zip_file_add(z->zip, member, src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
        zip_source_free(src);
        return frt_error(FRT_ERR_IO, "npz: %s: %s: %s", z->path, member, zip_strerror(z->zip));
    }
    if (zip_set_file_compression(z->zip, (zip_uint64_t)idx, ZIP_CM_STORE, 0) < 0)
        return frt_error(FRT_ERR_IO, "npz: %s: %s", z->path, zip_strerror(z->zip));
    return 0;
}

int frt_npz_close(frt_npz *z)
{
    if (!z) return frt_error(FRT_ERR_INVALID_ARGUMENT, "npz: NULL argument");
    int rc = 0;
    if (zip_close(z->zip) < 0) {
        rc = frt_error(FRT_ERR_IO, "npz: %s: %s", z->path, zip_strerror(z->zip));
        zip_discard(z->zip);
    }
    free(z->path);
    free(z);
    return rc;
}

void frt_npz_discard(frt_npz *z)
{
    if (!z) return;
    zip_discard(z->zip);
    free(z->path);
    free(z);
}
