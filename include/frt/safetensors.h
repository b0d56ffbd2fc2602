/*
 * frt/safetensors.h - one *.safetensors file: a validating reader over a
 * read-only mmap, and an atomic writer.
 *
 * Format (https://huggingface.co/docs/safetensors, the `safetensors` crate):
 *   8 bytes   N, little-endian u64: the header length
 *   N bytes   UTF-8 JSON object: {"__metadata__": {str: str} (optional),
 *             "NAME": {"dtype": "BF16", "shape": [d0, ...],
 *                      "data_offsets": [begin, end]}, ...}
 *             (may end with spaces: writers pad it to a multiple of 8)
 *   rest      the data buffer; offsets are relative to its start.
 *
 * The reader checks everything before a tensor is handed out, so nothing is
 * ever read out of bounds: N <= 100,000,000 (the crate's limit) and
 * 8 + N <= file size; the header is one JSON object without duplicate keys;
 * every entry has a known dtype, a shape of at most 8 non-negative dims and
 * data_offsets [begin <= end]; the product of the shape times the dtype size
 * equals end - begin (no overflow); ranges lie inside the buffer, do not
 * overlap, and cover it without gaps (the spec forbids holes, which is what
 * keeps polyglot files out). Each problem is an FRT_ERR_FORMAT (an unknown
 * dtype or more than 8 dims: FRT_ERR_UNSUPPORTED) whose message names the
 * file and the tensor.
 *
 * Tensor data points into the mapping: it is read-only, lives as long as the
 * file handle, and is aligned only as far as the file aligns it (8 + N is a
 * multiple of 8 in files from the reference writer and from this one). Read
 * it with memcpy or the converters below, not through a cast pointer.
 * A file truncated by another process while mapped raises SIGBUS on access;
 * that is outside what a reader can prevent.
 */
#ifndef FRT_SAFETENSORS_H
#define FRT_SAFETENSORS_H

#include "frt/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FRT_DT_BF16,
    FRT_DT_F16,
    FRT_DT_F32,
    FRT_DT_F64,
    FRT_DT_F8_E4M3,
    FRT_DT_F8_E5M2,
    FRT_DT_I8,
    FRT_DT_I16,
    FRT_DT_I32,
    FRT_DT_I64,
    FRT_DT_U8,
    FRT_DT_U16,
    FRT_DT_U32,
    FRT_DT_U64,
    FRT_DT_BOOL,
    FRT_DT_COUNT_
} frt_dtype;

#define FRT_TENSOR_MAX_DIMS 8

/* Bytes per element (BOOL: 1); 0 for a value outside the enum. */
FRT_API size_t frt_dtype_size(frt_dtype dt);

/* The safetensors name ("BF16", "F8_E4M3", ...); "?" outside the enum. */
FRT_API const char *frt_dtype_name(frt_dtype dt);

/* The dtype of a safetensors name (exact, case-sensitive). Returns 0, or
 * FRT_ERR_UNSUPPORTED for an unknown name. */
FRT_API int frt_dtype_from_name(const char *name, frt_dtype *out);

/* 1 for BF16, F16, F32, F64, F8_E4M3, F8_E5M2. */
FRT_API int frt_dtype_is_float(frt_dtype dt);

/* One tensor. Every pointer is owned by the file / checkpoint that handed
 * the tensor out and stays valid until it is closed. */
typedef struct frt_tensor {
    const char *name;
    frt_dtype dtype;
    int ndim;                          /* 0 = scalar (one element) */
    int64_t shape[FRT_TENSOR_MAX_DIMS];
    const void *data;                  /* nbytes bytes; unaligned in general */
    size_t nbytes;
    const char *file;                  /* path of the file it lives in; NULL in memory */
} frt_tensor;

/* Element count (product of the shape; 1 for a scalar). */
FRT_API int64_t frt_tensor_numel(const frt_tensor *t);

/* Converts a float tensor (BF16, F16, F32, F64, F8_E4M3, F8_E5M2) to f32:
 * out must hold frt_tensor_numel(t) floats. Widening is exact; F64 rounds
 * to nearest. Runs on OpenMP threads for large tensors.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_UNSUPPORTED (an integer
 * or bool dtype). */
FRT_API int frt_tensor_to_f32(const frt_tensor *t, float *out);

/* Writes n f32 values as dtype dt into dst (2 bytes each for BF16 and F16,
 * rounded to nearest even; 4 for F32, copied). The writer's side of
 * frt_tensor_to_f32. Errors: FRT_ERR_INVALID_ARGUMENT (NULL with n > 0),
 * FRT_ERR_UNSUPPORTED (another dtype). */
FRT_API int frt_f32_convert(void *dst, frt_dtype dt, const float *src, size_t n);

/* ---- reader ------------------------------------------------------------- */

typedef struct frt_safetensors frt_safetensors;

/* Maps PATH read-only and validates it (see above). *out is set on success
 * only. Free with frt_safetensors_close.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_NOT_FOUND (no such file),
 * FRT_ERR_IO (open/stat/mmap failed, not a regular file), FRT_ERR_FORMAT,
 * FRT_ERR_UNSUPPORTED, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_safetensors_open(const char *path, frt_safetensors **out);

/* Validates a file image already in memory (size bytes at data; not copied:
 * it must outlive the handle). `name` stands for the path in messages and
 * in frt_tensor.file. Same checks and errors as frt_safetensors_open. */
FRT_API int frt_safetensors_open_memory(const void *data, size_t size, const char *name, frt_safetensors **out);

/* Unmaps and frees. Accepts NULL. Tensors handed out become invalid. */
FRT_API void frt_safetensors_close(frt_safetensors *st);

/* Tensors in data-offset order. at() returns NULL outside [0, count). */
FRT_API int frt_safetensors_count(const frt_safetensors *st);
FRT_API const frt_tensor *frt_safetensors_at(const frt_safetensors *st, int i);

/* The tensor named `name`, or NULL. O(log n). */
FRT_API const frt_tensor *frt_safetensors_find(const frt_safetensors *st, const char *name);

/* The __metadata__ value for key, or NULL. */
FRT_API const char *frt_safetensors_metadata(const frt_safetensors *st, const char *key);

/* The path (or memory name) given at open. */
FRT_API const char *frt_safetensors_path(const frt_safetensors *st);

/* Total size of the file image in bytes. */
FRT_API size_t frt_safetensors_size(const frt_safetensors *st);

/* ---- writer ------------------------------------------------------------- */

typedef struct frt_st_writer frt_st_writer;

/* An empty writer whose __metadata__ holds {"format": "pt"} (transformers
 * refuses files without it). Errors: FRT_ERR_INVALID_ARGUMENT,
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_st_writer_create(frt_st_writer **out);

/* Frees the writer (not the tensor data it references). Accepts NULL. */
FRT_API void frt_st_writer_destroy(frt_st_writer *w);

/* Sets a __metadata__ entry (copied; replaces an existing key).
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_st_writer_set_metadata(frt_st_writer *w, const char *key, const char *value);

/* Adds a tensor in file order. The name is copied; `data` (numel * dtype
 * size bytes) is NOT copied and must stay valid until _write returns.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, empty or over-long name, ndim
 * outside [0, 8], negative dim, data NULL for a non-empty tensor, a name
 * that is already there, an invalid dtype), FRT_ERR_OUT_OF_RANGE (size
 * overflow), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_st_writer_add(frt_st_writer *w, const char *name, frt_dtype dtype, int ndim, const int64_t *shape,
                      const void *data);

/* fsync before the rename (default 1). 0 trades durability against a power
 * loss for speed (the rename is still atomic for readers): for files that
 * can be regenerated, e.g. frt gen-model --no-fsync. */
FRT_API void frt_st_writer_set_sync(frt_st_writer *w, int sync);

/* Bytes the file will have (header included). */
FRT_API uint64_t frt_st_writer_file_size(const frt_st_writer *w);

/* Writes the file atomically: a temporary file in the same directory, data
 * copied on OpenMP threads, fsync, then rename over PATH; a failure removes
 * the temporary file and leaves PATH as it was. The header lists the
 * tensors in the order added; its JSON is padded with spaces so the data
 * starts at a multiple of 8. The writer can be written again.
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_IO (the message names the path
 * and the system error), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_st_writer_write(frt_st_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* FRT_SAFETENSORS_H */
