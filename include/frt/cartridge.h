/*
 * frt/cartridge.h - cartridges: KV prefixes made elsewhere (trained offline
 * per document, or exported from a capsule), read from disk and injected
 * into the live KV cache of a dense model before the prompt.
 *
 * A cartridge holds, per layer l, a key and a value tensor
 * [tokens, n_kv_heads, head_dim] (frt's KV row layout) in one dtype (bf16,
 * f16 or f32), keys already carrying RoPE for positions 0..tokens-1, plus
 * its manifest (the fields of frt_cartridge_info). Two file formats
 * (docs/cartridges.md):
 *
 *   - the PyTorch .pt of the Cartridges recipe, read natively (a zip read
 *     with libzip, a restricted pickle reader that only builds tensors,
 *     storages, dicts, lists, sets and ParameterLists and never executes
 *     anything): a dict with trainable_keys / trainable_values and,
 *     optionally, frozen_keys / frozen_values (older files: fixed_keys /
 *     fixed_values), each a list (or an nn.ParameterList) of one tensor per
 *     layer [1, n_kv_heads, T, head_dim]; the frozen tokens come first.
 *     A .pt names no model: it binds to none (model_fingerprint 0).
 *   - frt's own: a directory holding kv.safetensors (layers.L.k,
 *     layers.L.v) and manifest.json, strictly validated, bound to a model
 *     by frt_cartridge_model_fingerprint and checked by an xxh64 of the
 *     payload file.
 *
 * Injection (frt_cartridge_inject, frt_model_inject_kv) copies the K/V into
 * KV rows 0..T-1 of every layer and sets the position to T with no pending
 * token and no logits: the prompt that follows is prefilled at positions
 * T, T+1, ... (RoPE continues from T). Only architectures whose whole
 * positional state is a KV cache accept it (dense: llama, mistral, qwen2,
 * qwen3); the hybrid qwen35 refuses it (FRT_ERR_UNSUPPORTED: its linear
 * layers' state is a fold over the prefix, not rows).
 *
 * Threading: a cartridge is immutable after load and may be read from
 * several threads; injection follows the model's rule (one thread).
 */
#ifndef FRT_CARTRIDGE_H
#define FRT_CARTRIDGE_H

#include "frt/model.h"
#include "frt/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the runtime API: a KV prefix into the live state --------------------- */

/* A KV prefix in host memory: per layer l, k[l] and v[l] point to
 * [tokens, n_kv_heads, head_dim] contiguous elements of dtype (FRT_DT_BF16,
 * FRT_DT_F16 or FRT_DT_F32). ids (optional, [tokens]) are written to the
 * token journal; without them the journal rows hold -1 (no token id: prefix
 * digests of such a state never match a tokenized prompt). */
typedef struct frt_kv_prefix {
    int n_layers, n_kv_heads, head_dim;
    int tokens;
    frt_dtype dtype;
    const void *const *k;
    const void *const *v;
    const int32_t *ids;
} frt_kv_prefix;

/* Replaces the live state by the prefix: KV rows 0..tokens-1 of every layer
 * (converted to the backend's KV dtype: f32 on cpu, bf16 on cuda; rounding
 * to nearest even when narrowing), the token journal, position = tokens, no
 * pending token, no logits (prefill at least one token before sampling).
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments or pointers
 *   FRT_ERR_UNSUPPORTED       the architecture's state is not only a KV
 *                             cache (qwen35), or a dtype other than the three
 *   FRT_ERR_MISMATCH          layers, KV heads or head_dim differ from the model's
 *   FRT_ERR_OUT_OF_RANGE      tokens < 1 or > max_seq, an id outside the vocabulary
 *   FRT_ERR_OUT_OF_MEMORY     the staging copy
 * Every check runs before the state is touched: on these errors the live
 * state is unchanged. A backend copy failure after that resets the model
 * (position 0) and returns its status. */
FRT_API int frt_model_inject_kv(frt_model *m, const frt_kv_prefix *p);

/* A KV prefix resident in the model's memory: per layer K and V in the
 * backend's KV dtype (bf16 on cuda, f32 on cpu), [tokens, n_kv_heads,
 * head_dim] each, in one buffer of the model's context, in device memory
 * (injecting it is a device-to-device copy: no conversion, no host staging,
 * no PCIe transfer) or in pinned host memory (host-resident: promoted to
 * the device by one DMA, frt_kv_resident_move), plus the token journal
 * rows. On cpu, device and pinned memory are host memory. Made by
 * frt_model_kv_upload or frt_cartridge_upload; owned by the caller; it
 * must be freed before its model. */
typedef struct frt_kv_resident frt_kv_resident;

/* Converts p to the backend's KV dtype in pinned host memory and, for
 * FRT_SPACE_DEVICE, uploads it into a new device buffer of m's context
 * (one DMA); FRT_SPACE_PINNED_HOST keeps it there (*out).
 *   FRT_ERR_INVALID_ARGUMENT  space other than DEVICE / PINNED_HOST; and
 *   FRT_ERR_INVALID_ARGUMENT, FRT_ERR_UNSUPPORTED, FRT_ERR_MISMATCH,
 *   FRT_ERR_OUT_OF_RANGE  as frt_model_inject_kv (checked first)
 *   FRT_ERR_OUT_OF_MEMORY the buffers (the message names the size)
 *   FRT_ERR_BACKEND       the upload
 * The live state is never touched. On error *out is NULL. */
FRT_API int frt_model_kv_upload(frt_model *m, const frt_kv_prefix *p, frt_space space, frt_kv_resident **out);

/* Moves r to space (DEVICE: a promotion over PCIe; PINNED_HOST: a
 * demotion): a new buffer, one copy, the old buffer freed. Already there: 0.
 *   FRT_ERR_INVALID_ARGUMENT  NULL, another model's r, another space
 *   FRT_ERR_OUT_OF_MEMORY, FRT_ERR_BACKEND  (r is unchanged) */
FRT_API int frt_kv_resident_move(frt_model *m, frt_kv_resident *r, frt_space space);

/* Where r is (FRT_SPACE_DEVICE or FRT_SPACE_PINNED_HOST; FRT_SPACE_HOST for
 * NULL and for frt_model_inject_kv's own staging). */
FRT_API frt_space frt_kv_resident_space(const frt_kv_resident *r);

/* Replaces the live state by the resident prefix r, as frt_model_inject_kv
 * does (rows 0..tokens-1 by one batched copy from r's buffer, device to
 * device or, host-resident, host to device; the journal, position =
 * tokens, no pending token, no logits).
 *   FRT_ERR_INVALID_ARGUMENT  NULL, or r was made by another model (the
 *                             live state is then unchanged)
 *   a backend copy failure resets the model (position 0) and returns its status */
FRT_API int frt_model_inject_kv_resident(frt_model *m, const frt_kv_resident *r);

/* Bytes r holds (K and V of every layer); 0 for NULL. */
FRT_API size_t frt_kv_resident_bytes(const frt_kv_resident *r);

/* Its token count T; 0 for NULL. */
FRT_API int frt_kv_resident_tokens(const frt_kv_resident *r);

/* Frees r (no work may still read it; the calls above return after their
 * copies completed). NULL is a no-op. */
FRT_API void frt_kv_resident_free(frt_kv_resident *r);

/* The hash a cartridge binds to: the architecture, model_type, the
 * hyperparameters of the config and the weights (not the backend, C or
 * max_seq, so one cartridge serves the cpu and the cuda backend). 0 on NULL. */
FRT_API uint64_t frt_cartridge_model_fingerprint(const frt_model *m);

/* ---- cartridges ------------------------------------------------------------ */

typedef struct frt_cartridge frt_cartridge;

#define FRT_CARTRIDGE_MAX_LABELS 16
#define FRT_CARTRIDGE_ID_MAX 128
#define FRT_CARTRIDGE_LABEL_MAX 64
#define FRT_CARTRIDGE_TEXT_MAX 512
#define FRT_CARTRIDGE_STARTS_MAX 4096 /* most tokens a cartridge's stated start may hold */

/* The manifest. Strings are NUL-terminated ("" = unset). */
typedef struct frt_cartridge_info {
    char id[FRT_CARTRIDGE_ID_MAX];          /* [A-Za-z0-9._-]+ */
    char model_id[FRT_CARTRIDGE_TEXT_MAX];  /* the checkpoint it was made for (a name or path) */
    uint64_t model_fingerprint;             /* frt_cartridge_model_fingerprint; 0 = unbound (.pt) */
    int n_layers, n_kv_heads, head_dim;
    frt_dtype dtype;
    int tokens;                             /* T = frozen + trainable */
    int frozen_tokens;
    long long training_steps;               /* -1 unknown */
    char source_document[FRT_CARTRIDGE_TEXT_MAX];
    char created[32];                       /* "YYYY-MM-DDTHH:MM:SSZ"; "" for a .pt */
    int n_labels;
    char labels[FRT_CARTRIDGE_MAX_LABELS][FRT_CARTRIDGE_LABEL_MAX];
    uint64_t checksum;                      /* xxh64 of kv.safetensors (frt format; 0 for a .pt) */
    uint64_t file_bytes;                    /* bytes of kv.safetensors, or of the .pt */
    int from_pt;                            /* 1: read from a .pt */
    int n_starts_with;                      /* tokens of the stated start (frt_cartridge_starts_with), 0 = none */
} frt_cartridge_info;

/* Reads a PyTorch .pt cartridge (file, or size bytes at data for the memory
 * form, not copied; `name` stands for the path in messages). Every tensor
 * is checked (4 dims [1, H, T, D], one float dtype for all, the same H and
 * D everywhere, one T per group, as many layers in each list, views inside
 * their storage) and copied out of the file, so nothing stays mapped.
 *   FRT_ERR_NOT_FOUND / FRT_ERR_IO  missing or unreadable file
 *   FRT_ERR_FORMAT       not a zip, no single ARCHIVE/data.pkl, a truncated
 *                        or corrupt entry (CRC), a malformed pickle, a
 *                        storage of the wrong size, a missing or unexpected
 *                        key, tensors of the wrong rank or shapes that differ
 *   FRT_ERR_UNSUPPORTED  a pickle opcode or global outside the allowlist
 *                        (the message names it), byteorder "big", a dtype
 *                        other than bf16/f16/f32
 *   FRT_ERR_OUT_OF_RANGE the pickle reader's limits
 *   FRT_ERR_OUT_OF_MEMORY */
FRT_API int frt_cartridge_read_pt(const char *path, frt_cartridge **out);
FRT_API int frt_cartridge_read_pt_memory(const void *data, size_t size, const char *name, frt_cartridge **out);

/* Reads an frt cartridge directory (manifest.json + kv.safetensors): the
 * manifest strictly (every field below of the right type and range, no
 * unknown field, no duplicate), the payload's size and xxh64 against the
 * manifest, its tensors against the manifest's shapes.
 *   FRT_ERR_NOT_FOUND / FRT_ERR_IO, FRT_ERR_FORMAT (the message names the
 *   field or tensor), FRT_ERR_MISMATCH (size or checksum of the payload),
 *   FRT_ERR_OUT_OF_MEMORY */
FRT_API int frt_cartridge_load(const char *dir, frt_cartridge **out);

/* Either: a directory is an frt cartridge, a regular file a .pt. */
FRT_API int frt_cartridge_open(const char *path, frt_cartridge **out);

/* The KV rows 0..pos-1 of m's live state as a new cartridge (dtype: the
 * backend's KV dtype), bound to m (model_fingerprint), ids from the token
 * journal kept for frt_cartridge_inject, frozen_tokens 0.
 *   FRT_ERR_UNSUPPORTED (qwen35), FRT_ERR_STATE (position 0),
 *   FRT_ERR_OUT_OF_MEMORY */
FRT_API int frt_cartridge_from_model(frt_model *m, frt_cartridge **out);

/* What an importer or exporter sets. NULL / -1 fields are left as they are. */
typedef struct frt_cartridge_meta {
    const char *id;
    const char *model_id;
    uint64_t model_fingerprint;  /* 0: leave */
    long long training_steps;    /* >= 0, or -1: leave */
    const char *source_document;
    const char *const *labels;   /* n_labels strings; NULL with n_labels -1 (leave) or 0 */
    int n_labels;                /* 0 .. FRT_CARTRIDGE_MAX_LABELS, or -1: leave */
} frt_cartridge_meta;

/* Sets manifest fields (validated as frt_cartridge_load validates them).
 *   FRT_ERR_INVALID_ARGUMENT  NULL, an empty or badly formed id, a string
 *                             too long, more than FRT_CARTRIDGE_MAX_LABELS
 *                             labels, an empty label, labels NULL with
 *                             n_labels > 0, training_steps or n_labels
 *                             below -1, labels given with n_labels -1.
 * On error the cartridge is unchanged. */
FRT_API int frt_cartridge_set_meta(frt_cartridge *c, const frt_cartridge_meta *meta);

/* Writes c as an frt cartridge directory DIR (created if missing):
 * kv.safetensors, then manifest.json (with created = now, the payload's
 * size and xxh64), each written atomically (temporary name + rename); the
 * manifest last, so a crash never leaves a manifest over a partial payload.
 *   FRT_ERR_INVALID_ARGUMENT  no id, no model_id or unbound (model_fingerprint 0)
 *   FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY */
FRT_API int frt_cartridge_save(frt_cartridge *c, const char *dir);

FRT_API int frt_cartridge_info_get(const frt_cartridge *c, frt_cartridge_info *out);

/* What the cartridge starts with: the token ids its first rows hold that a
 * chat template would render again before the conversation (the BOS token,
 * a system header), manifest field starts_with (docs/cartridges.md). *ids
 * is owned by c (NULL when *n is 0: the cartridge states nothing; version 1
 * manifests and .pt files). FRT_ERR_INVALID_ARGUMENT for NULL. */
FRT_API int frt_cartridge_starts_with(const frt_cartridge *c, const int32_t **ids, int *n);

/* The token ids of the cartridge's rows ([tokens], owned by c) when known
 * (exported from a model), else *ids = NULL. FRT_ERR_INVALID_ARGUMENT for NULL. */
FRT_API int frt_cartridge_token_ids(const frt_cartridge *c, const int32_t **ids);

/* Sets the stated start to ids[0..n) (n = 0 clears it; ids copied).
 *   FRT_ERR_INVALID_ARGUMENT  NULL c, NULL ids with n > 0, a negative id
 *   FRT_ERR_OUT_OF_RANGE      n < 0, n > tokens or n > FRT_CARTRIDGE_STARTS_MAX
 *   FRT_ERR_MISMATCH          the cartridge knows its token ids (exported
 *                             from a model) and they do not begin with ids
 *   FRT_ERR_OUT_OF_MEMORY
 * On error the cartridge is unchanged. */
FRT_API int frt_cartridge_set_starts_with(frt_cartridge *c, const int32_t *ids, int n);

/* Views of layer l's K and V ([tokens, n_kv_heads, head_dim], dtype of the
 * cartridge; data owned by c). FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_RANGE. */
FRT_API int frt_cartridge_layer(const frt_cartridge *c, int layer, frt_tensor *k, frt_tensor *v);

/* The checks of frt_cartridge_inject without injecting: the binding (when
 * bound), the layers, KV heads and head_dim against m's (not the token
 * count against max_seq), and the stated start's ids inside m's vocabulary.
 * FRT_ERR_INVALID_ARGUMENT, FRT_ERR_MISMATCH, FRT_ERR_OUT_OF_RANGE (a
 * starts_with id outside the vocabulary), FRT_ERR_UNSUPPORTED (an
 * architecture that takes no KV prefix). */
FRT_API int frt_cartridge_check(const frt_model *m, const frt_cartridge *c);

/* 0 when m's architecture takes a KV prefix (its whole positional state is
 * a KV cache: the dense family), else FRT_ERR_UNSUPPORTED with a message
 * naming the architecture (qwen35); FRT_ERR_INVALID_ARGUMENT for NULL. The
 * first check of frt_cartridge_check, for callers that must answer before
 * they hold a cartridge (the server refuses cartridge requests with it). */
FRT_API int frt_cartridge_supported(const frt_model *m);

/* Uploads c to space (frt_model_kv_upload: FRT_SPACE_DEVICE or
 * FRT_SPACE_PINNED_HOST) after the checks of frt_cartridge_check. Errors of
 * both; *out NULL on error. */
FRT_API int frt_cartridge_upload(frt_model *m, const frt_cartridge *c, frt_space space, frt_kv_resident **out);

/* The device bytes frt_cartridge_upload of c into m takes (K and V of every
 * layer in m's KV dtype: frt_kv_resident_bytes of the result). 0 for NULL. */
FRT_API size_t frt_cartridge_upload_bytes(const frt_model *m, const frt_cartridge *c);

/* Injects c into m (frt_model_inject_kv) after checking the binding: a
 * bound cartridge (model_fingerprint != 0) must match
 * frt_cartridge_model_fingerprint(m) (FRT_ERR_MISMATCH otherwise); an
 * unbound one (.pt) is checked by shape only. Errors as frt_model_inject_kv;
 * the live state is unchanged on every refusal. */
FRT_API int frt_cartridge_inject(frt_model *m, const frt_cartridge *c);

/* 1 for a valid cartridge id (1..127 bytes of A-Z a-z 0-9 . _ -, not "."
 * or ".."), 0 otherwise (NULL included). */
FRT_API int frt_cartridge_id_ok(const char *id);

/* Frees c. NULL is a no-op. */
FRT_API void frt_cartridge_free(frt_cartridge *c);

#ifdef __cplusplus
}
#endif
#endif /* FRT_CARTRIDGE_H */
