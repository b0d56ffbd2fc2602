/*
 * frt/capsule.h - execution-state capsules: the byte copy of a model's live
 * state closure at a committed boundary, plus its descriptor.
 *
 * Mechanism only (the model layer): snapshot into a tier, restore from any
 * tier, information, free. Fork is restoring one capsule into the live state
 * again and again; rollback is restoring an earlier one. Policy (names,
 * pinning, budgets, LRU, prefix matching) belongs to the serving layer.
 *
 * Exactness (../shared/DESIGN.md section 5):
 *   1. byte restore: stored buffers come back byte for byte;
 *   2. completeness: every buffer of the closure is stored;
 *   3. equivalence: for a capsule at a boundary B that is a multiple of the
 *      prefill chunk C, restore + prefill of S tokens runs exactly the same
 *      operations as one cold prefill of B + S tokens.
 *
 * A capsule holds, per named buffer of the closure, its valid byte range:
 * KV rows 0..pos-1 only, fixed-size state (recurrent, conv, boundary) whole.
 * Format of the file tier: docs/capsule-format.md.
 */
#ifndef FRT_CAPSULE_H
#define FRT_CAPSULE_H

#include "frt/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_capsule frt_capsule;

typedef enum frt_tier {
    FRT_TIER_DEVICE = 0, /* the model's device memory (host memory on the cpu backend) */
    FRT_TIER_HOST = 1,   /* pinned host memory */
    FRT_TIER_DISK = 2,   /* one file; the payload is read back on restore */
} frt_tier;

FRT_API const char *frt_tier_name(frt_tier t); /* "device", "host", "disk" */

#define FRT_CAPSULE_MAX_BUFFERS 512

/* What a capsule holds. */
typedef struct frt_capsule_info {
    frt_tier tier;
    int position;           /* committed tokens */
    int pending;            /* pending token or -1 */
    int prefill_chunk;      /* C of the model that made it */
    int aligned;            /* position % C == 0 */
    uint64_t rng[2];        /* sampler RNG state */
    uint64_t prefix_digest; /* xxh64 of (salt, tokens 0..position-1) */
    uint64_t fingerprint;   /* model fingerprint, see frt_model_fingerprint */
    size_t bytes;           /* payload bytes (sum of the valid ranges) */
    int n_buffers;
    const char *path;       /* the file, for the disk tier; NULL otherwise */
} frt_capsule_info;

/* Copies the live state's closure at the current boundary into a new capsule
 * in `tier`. For FRT_TIER_DISK, `path` names the file (written to a temporary
 * name and renamed); the other tiers write no file and take path NULL.
 * salt/salt_len (optional: NULL, 0) salt the prefix digest. The live state
 * is not changed.
 *   FRT_ERR_INVALID_ARGUMENT  NULL model/out, an unknown tier, disk tier
 *                             without a path, a path with another tier,
 *                             salt NULL with salt_len > 0
 *   FRT_ERR_OUT_OF_MEMORY     the tier has no room (nothing allocated remains)
 *   FRT_ERR_IO                the file could not be written (no file remains) */
FRT_API int frt_capsule_snapshot(frt_model *m, frt_tier tier, const char *path, const void *salt, size_t salt_len,
                         frt_capsule **out);

/* Restores a capsule into the live state: promotes it to device memory if
 * needed, copies every buffer back, rebinds the boundary. No recapture, no
 * recompute. The capsule stays valid (restore it again to fork).
 * Rollback: when the live state descends from this very capsule (it was the
 * last one snapshotted or restored into `m`, device or host tier, and only
 * prefill / decode ran since, which write at or past its position), the KV
 * rows and the token journal below its position are still the capsule's
 * bytes, so only the fixed-size state (recurrent, conv, boundary, logits) is
 * copied: the result is the same live state as a full restore, byte for
 * byte, at a cost independent of the context length.
 * frt_capsule_last_restore says what was copied.
 * Pipelined (docs/model.md "The pipelined restore"): a full restore of a
 * host-tier capsule into an LLM (the dense family or the hybrid; not a
 * policy) returns once the entries no layer owns have landed, while each
 * layer's own state (KV rows, the hybrid's recurrent and conv state) is
 * still being copied on a stream of its own; the next prefill's first
 * piece runs beside those copies, each layer waiting for its own entries,
 * and every other call that touches the
 * state waits for all of them first. Results are the same bytes either
 * way; frt_capsule_restore_wait blocks until the copies have landed.
 *   FRT_ERR_MISMATCH  the capsule was made by a model with another fingerprint
 *   FRT_ERR_FORMAT    a disk capsule fails its checks (checksum, sizes)
 *   FRT_ERR_IO        its file can no longer be read
 * On any error the live state is untouched. */
FRT_API int frt_capsule_restore(frt_model *m, const frt_capsule *c);

/* Blocks until the copies of m's last restore have landed (at once unless
 * it was pipelined, see frt_capsule_restore): what a caller timing a restore
 * on its own waits for. Errors: FRT_ERR_INVALID_ARGUMENT (NULL);
 * FRT_ERR_BACKEND (a copy failed). */
FRT_API int frt_capsule_restore_wait(frt_model *m);

/* Restores c, then prefills the n tokens ids, in one call: the result is
 * frt_capsule_restore followed by frt_model_prefill, byte for byte (the
 * live state, the logits, the tokens sampled after). Where the model can
 * (the dense family on cuda with a bf16 KV cache and head_dim 128; a
 * device-tier capsule whose position is a multiple of the prefill chunk;
 * an append of fewer tokens than the chunk whose bucket fills whole
 * 128-row attention blocks; not a rollback: docs/model.md "Restore and
 * append in one call"), the capsule's KV rows are not copied first: the
 * append's attention reads them from the capsule and writes them into the
 * live cache as it goes, so a restore + append streams those bytes once
 * less. Elsewhere it is the two calls. frt_capsule_last_restore then says
 * which (fused). Errors: those of frt_capsule_restore and frt_model_prefill;
 * FRT_ERR_INVALID_ARGUMENT (NULL, n < 1); FRT_ERR_OUT_OF_RANGE (a token
 * outside the vocabulary: checked first, nothing changed);
 * FRT_ERR_UNSUPPORTED (a policy). A restore error leaves the live state
 * untouched; after a prefill error the live state is the restored one
 * (what the two calls leave). */
FRT_API int frt_capsule_restore_prefill(frt_model *m, const frt_capsule *c, const int32_t *ids, int n);

/* What the last successful frt_capsule_restore into a model copied. */
typedef struct frt_restore_stats {
    size_t bytes;  /* payload bytes copied into the live state */
    int n_buffers; /* closure buffers copied */
    int rollback;  /* 1: the positional prefix was already live (see above) */
    int fused;     /* 1: frt_capsule_restore_prefill copied the KV rows inside the append's attention */
} frt_restore_stats;

/* The stats of m's last successful restore (all zero before the first).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL). */
FRT_API int frt_capsule_last_restore(const frt_model *m, frt_restore_stats *out);

/* Opens a capsule file written by frt_capsule_snapshot(FRT_TIER_DISK) or
 * frt_capsule_save, checking magic, version, sizes, the fingerprint against
 * `m` and every checksum. Returns a disk-tier capsule.
 *   FRT_ERR_IO, FRT_ERR_FORMAT, FRT_ERR_MISMATCH (message says which check;
 *   a MAC that does not verify under the model's key, a keyed file without
 *   a key or an unkeyed file with one: FRT_ERR_MISMATCH) */
FRT_API int frt_capsule_load(frt_model *m, const char *path, frt_capsule **out);

/* Writes any capsule to a file (temporary name + rename). */
FRT_API int frt_capsule_save(const frt_capsule *c, const char *path);

/* Moves a capsule to another tier (device <-> host <-> disk); `path` is
 * required for FRT_TIER_DISK and must be NULL for the others. Already in
 * `tier`: 0, nothing done (a disk capsule given its own path).
 *   FRT_ERR_INVALID_ARGUMENT  NULL capsule, an unknown tier, disk without a
 *                             path, a path with another tier
 *   FRT_ERR_UNSUPPORTED       a disk capsule to another file (copy the file
 *                             and frt_capsule_load it), a disk capsule to
 *                             device or host (restore it: the restore reads
 *                             the file)
 *   FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY, FRT_ERR_BACKEND  the write or copy
 * On error the capsule is unchanged. */
FRT_API int frt_capsule_move(frt_capsule *c, frt_tier tier, const char *path);

FRT_API int frt_capsule_info_get(const frt_capsule *c, frt_capsule_info *info);

/* Name and valid bytes of buffer i (0 <= i < n_buffers). */
FRT_API int frt_capsule_buffer(const frt_capsule *c, int i, const char **name, size_t *bytes);

#define FRT_CAPSULE_KEY_MAX 1024

/* Sets the capsule key of m (key_len 1..FRT_CAPSULE_KEY_MAX bytes, copied),
 * or clears it (key NULL, key_len 0). With a key, every capsule file m
 * writes carries an HMAC-SHA256 (OpenSSL) of its metadata and one of each
 * buffer's payload, and every file m loads or restores must carry MACs
 * under this key, checked before the live state is touched: a file whose
 * checksums were recomputed after a change is refused. Without a key,
 * capsule files are checked by checksums and semantic checks only, so the
 * capsule directory must be trusted like the model directory; a keyed file
 * is then refused (its MAC cannot be checked). Capsules in memory (device,
 * host tier) are not affected. Snapshots taken before a change of key keep
 * the key they were taken under when written later (frt_capsule_save,
 * frt_capsule_move).
 *   FRT_ERR_INVALID_ARGUMENT  NULL model, key NULL with key_len > 0, key_len
 *                             above FRT_CAPSULE_KEY_MAX */
FRT_API int frt_capsule_set_key(frt_model *m, const void *key, size_t key_len);

/* Frees the capsule's memory (a disk capsule's file is left in place). */
FRT_API void frt_capsule_free(frt_capsule *c);

/* The model's fingerprint: architecture, config, dtypes, a hash of the
 * weights, C and the prefill buckets, the capsule format version. */
FRT_API uint64_t frt_model_fingerprint(const frt_model *m);

/* xxh64 digest of (salt, ids) as stored in capsules, for prefix matching. */
FRT_API uint64_t frt_prefix_digest(const int32_t *ids, int n, const void *salt, size_t salt_len);

#ifdef __cplusplus
}
#endif
#endif /* FRT_CAPSULE_H */
