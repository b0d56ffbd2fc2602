/*
 * frt/fs.h - the small file helpers the library uses for checkpoints,
 * capsules and configs, public for the frt command and programs built on
 * the library: whole-file reads, atomic writes, mkdir -p, full pread/pwrite.
 */
#ifndef FRT_FS_H
#define FRT_FS_H

#include "frt/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a whole regular file of at most max_bytes into a malloc'd,
 * NUL-terminated buffer (*out, *len without the NUL; free it).
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_NOT_FOUND (no such file),
 * FRT_ERR_IO, FRT_ERR_FORMAT (larger than max_bytes), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len);

/* Writes len bytes to PATH atomically: PATH.tmp.XXXXXX in the same
 * directory, fsync, rename (mode 0644). On failure PATH is untouched.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_file_write_atomic(const char *path, const void *data, size_t len);

/* Creates DIR and its missing parents (mode 0755); an existing directory
 * is fine. Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_IO. */
FRT_API int frt_mkdir_p(const char *dir);

/* pread / pwrite of exactly n bytes at file offset off, looping over short
 * transfers and EINTR (in pieces of at most 1 GiB). Returns 0 or an errno
 * value (EIO for an unexpected end of file); sets no frt error. */
FRT_API int frt_pread_all(int fd, void *buf, uint64_t n, uint64_t off);
FRT_API int frt_pwrite_all(int fd, const void *buf, uint64_t n, uint64_t off);

#ifdef __cplusplus
}
#endif
#endif /* FRT_FS_H */
