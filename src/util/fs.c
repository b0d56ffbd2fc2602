/* fs.c - whole-file reads, atomic writes, mkdir -p. */
#include "frt/fs.h"

#include "util/error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int frt_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len)
{
    if (!path || !out || !len) return frt_error(FRT_ERR_INVALID_ARGUMENT, "file read: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return frt_error(e == ENOENT ? FRT_ERR_NOT_FOUND : FRT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return frt_error(FRT_ERR_IO, "%s: not a regular file", path);
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        fclose(f);
        return frt_error(FRT_ERR_FORMAT, "%s: %lld bytes, larger than the %zu-byte limit", path,
                         (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(buf);
        return frt_error(FRT_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int frt_file_write_atomic(const char *path, const void *data, size_t len)
{
    if (!path || (!data && len)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "file write: NULL argument");
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) return frt_error(FRT_ERR_OUT_OF_MEMORY, "file write: out of memory");
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return frt_error(FRT_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(e));
    }
    int err = fchmod(fd, 0644) != 0 ? errno : 0;
    const unsigned char *p = data;
    size_t left = len;
    while (!err && left > 0) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            err = k < 0 ? errno : EIO;
            break;
        }
        p += k;
        left -= (size_t)k;
    }
    if (!err && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        free(tmp);
        return frt_error(FRT_ERR_IO, "%s: write failed: %s", path, strerror(err));
    }
    free(tmp);
    return 0;
}

int frt_mkdir_p(const char *dir)
{
    if (!dir || !*dir) return frt_error(FRT_ERR_INVALID_ARGUMENT, "mkdir: empty path");
    char buf[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof buf) return frt_error(FRT_ERR_INVALID_ARGUMENT, "mkdir: path too long: %s", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            return frt_error(FRT_ERR_IO, "mkdir %s: %s", buf, strerror(e));
        }
        buf[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return frt_error(FRT_ERR_IO, "mkdir %s: exists and is not a directory", dir);
    return 0;
}

/* pread (out 0) or pwrite (out 1) of exactly n bytes. */
static int rw_all(int fd, unsigned char *p, uint64_t n, uint64_t off, int out)
{
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t k = out ? pwrite(fd, p, chunk, (off_t)off) : pread(fd, p, chunk, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno ? errno : EIO;
        }
        if (k == 0) return EIO;
        p += k;
        n -= (uint64_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int frt_pread_all(int fd, void *buf, uint64_t n, uint64_t off) { return rw_all(fd, buf, n, off, 0); }

int frt_pwrite_all(int fd, const void *buf, uint64_t n, uint64_t off)
{
    return rw_all(fd, (unsigned char *)(uintptr_t)buf, n, off, 1);
}
