/*
 * frt/checkpoint.h - all the weights of a model: the safetensors files of
 * a Hugging Face checkpoint directory, or tensors built in memory.
 *
 * A directory is read the way transformers reads it: model.safetensors when
 * present, else model.safetensors.index.json and the shard files its
 * weight_map names (each mapped read-only and validated, see
 * safetensors.h). Checks across files: a tensor name appears in one file
 * only; every weight_map entry names a plain file in the directory (no
 * path separators) and the tensor is in that file; a tensor found in a
 * shard that the weight_map assigns to another shard is an error. Tensors
 * in a listed shard but absent from the weight_map are kept.
 *
 * In-memory checkpoints (frt_checkpoint_create + _add) hold tensors in
 * malloc'd memory that the checkpoint owns: benchmarks build random weights
 * at a real shape without touching the disk (gen_model.h).
 */
#ifndef FRT_CHECKPOINT_H
#define FRT_CHECKPOINT_H

#include "frt/export.h"

#include "frt/safetensors.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_checkpoint frt_checkpoint;

/* Opens MODEL_DIR's safetensors weights (see above). *out is set on success
 * only. Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_NOT_FOUND (neither file;
 * a shard named by the index is missing), FRT_ERR_IO, FRT_ERR_FORMAT (bad
 * file or index, duplicate name across files, index/shard disagreement),
 * FRT_ERR_UNSUPPORTED, FRT_ERR_OUT_OF_MEMORY. Messages name the file and
 * the tensor. */
FRT_API int frt_checkpoint_open(const char *model_dir, frt_checkpoint **out);

/* An empty in-memory checkpoint. Errors: FRT_ERR_INVALID_ARGUMENT,
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_checkpoint_create(frt_checkpoint **out);

/* Adds a tensor to an in-memory checkpoint, taking ownership of `data`
 * (malloc'd, numel * dtype size bytes; freed with the checkpoint, also when
 * this call fails). The name is copied. Pointers returned by _find / _at
 * stay valid across later adds.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, bad dtype / ndim / dim, duplicate
 * name, data NULL for a non-empty tensor), FRT_ERR_STATE (a checkpoint
 * opened from files), FRT_ERR_OUT_OF_RANGE (size overflow),
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_checkpoint_add(frt_checkpoint *ck, const char *name, frt_dtype dtype, int ndim, const int64_t *shape,
                       void *data);

/* Unmaps / frees everything. Accepts NULL. */
FRT_API void frt_checkpoint_close(frt_checkpoint *ck);

/* The tensor named `name`, or NULL when absent (or ck / name NULL). O(1). */
FRT_API const frt_tensor *frt_checkpoint_find(const frt_checkpoint *ck, const char *name);

/* Tensors in order: files by name (shards in index order), each file in
 * data-offset order; in memory, in the order added. at() returns NULL
 * outside [0, count). */
FRT_API int frt_checkpoint_count(const frt_checkpoint *ck);
FRT_API const frt_tensor *frt_checkpoint_at(const frt_checkpoint *ck, int i);

/* Number of files (0 in memory), the sum of tensor bytes, and the sum of
 * element counts. */
FRT_API int frt_checkpoint_file_count(const frt_checkpoint *ck);
FRT_API uint64_t frt_checkpoint_bytes(const frt_checkpoint *ck);
FRT_API uint64_t frt_checkpoint_numel(const frt_checkpoint *ck);

/* Writes the checkpoint's tensors into DIR (which must exist) as HF does:
 * one model.safetensors when the total is at most shard_bytes (0 = no
 * limit), else model-0000i-of-0000n.safetensors files of at most
 * shard_bytes each (a larger tensor gets a file of its own) plus
 * model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}).
 * Files are written atomically; a stale model.safetensors or index from an
 * earlier run with the other layout is removed so loaders never pick it.
 * Tensors keep the checkpoint's order. flags: 0, or FRT_CKPT_WRITE_NO_FSYNC
 * (see frt_st_writer_set_sync). Errors: those of frt_st_writer_write,
 * FRT_ERR_INVALID_ARGUMENT. */
#define FRT_CKPT_WRITE_NO_FSYNC 1
FRT_API int frt_checkpoint_write(const frt_checkpoint *ck, const char *dir, uint64_t shard_bytes, int flags);

#ifdef __cplusplus
}
#endif
#endif /* FRT_CHECKPOINT_H */
