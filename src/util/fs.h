/* util/fs.h - small file helpers: whole-file reads, atomic writes, mkdir -p. */
#ifndef FRT_UTIL_FS_H
#define FRT_UTIL_FS_H

#include <stddef.h>
#include <stdint.h>

/* Reads a whole regular file of at most max_bytes into a malloc'd,
 * NUL-terminated buffer (*out, *len without the NUL; free it).
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_NOT_FOUND (no such file),
 * FRT_ERR_IO, FRT_ERR_FORMAT (larger than max_bytes), FRT_ERR_OUT_OF_MEMORY. */
int frt_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len);

/* Writes len bytes to PATH atomically: PATH.tmp.XXXXXX in the same
 * directory, fsync, rename (mode 0644). On failure PATH is untouched.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY. */
int frt_file_write_atomic(const char *path, const void *data, size_t len);

/* Creates DIR and its missing parents (mode 0755); an existing directory
 * is fine. Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_IO. */
int frt_mkdir_p(const char *dir);

/* pread / pwrite of exactly n bytes at file offset off, looping over short
 * transfers and EINTR (in pieces of at most 1 GiB). Returns 0 or an errno
 * value (EIO for an unexpected end of file); sets no frt error. */
int frt_pread_all(int fd, void *buf, uint64_t n, uint64_t off);
int frt_pwrite_all(int fd, const void *buf, uint64_t n, uint64_t off);

#endif /* FRT_UTIL_FS_H */
