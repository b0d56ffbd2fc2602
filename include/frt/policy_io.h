/*
 * frt/policy_io.h - the inputs of a Pi0 / Pi0.5 vision-language-action
 * policy, made from what a robot has: camera images, an instruction and a
 * proprioceptive state; and the way back from the model's normalised action
 * chunk to the robot's units.
 *
 * The model takes (the `--inputs` safetensors layout, docs/policies-inputs.md):
 *   pixel_values          [cameras, 3, 224, 224] F32 in [-1, 1]
 *   pixel_attention_mask  [cameras] U8 (1: camera present, 0: masked out)
 *   input_ids             [tokens] I64 (PaliGemma SentencePiece ids, 0-padded)
 *   attention_mask        [tokens] U8 (1 for the prompt's tokens, 0 padding)
 *   state                 [max_state_dim] F32 (normalised, zero-padded)
 *
 * Every step follows openpi (Physical-Intelligence/openpi), the code the
 * Pi0 / Pi0.5 checkpoints were trained with:
 *   - prompt: models/tokenizer.py (PaligemmaTokenizer.tokenize);
 *   - images: openpi_client/image_tools.py (resize_with_pad through PIL's
 *     bilinear resampling, libImaging/Resample.c) and models/model.py
 *     (Observation.from_dict: x / 255 * 2 - 1);
 *   - statistics: shared/normalize.py (norm_stats.json) and transforms.py
 *     (Normalize, Unnormalize, PadStatesAndActions).
 * Where transformers' PI0Processor differs (bicubic resize, padding after
 * normalisation, "\n" tokenised with the prompt) frt follows openpi; the
 * differences are listed in docs/policies-inputs.md.
 *
 * Every function returns 0 or a negative frt_status with a message
 * (frt_last_error()); on failure outputs are untouched unless said
 * otherwise. Nothing here prints.
 */
#ifndef FRT_POLICY_IO_H
#define FRT_POLICY_IO_H

#include "frt/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The two prompt / normalisation conventions. */
typedef enum frt_policy_variant {
    FRT_POLICY_PI0 = 0, /* prompt "BOS text \n"; z-score statistics */
    FRT_POLICY_PI05 = 1 /* prompt "Task: ..., State: ...;\nAction: "; quantile statistics */
} frt_policy_variant;

#define FRT_POLICY_IMAGE_SIZE 224 /* height and width of pixel_values */
#define FRT_POLICY_STATE_BINS 256 /* Pi0.5's discretised state */
#define FRT_POLICY_MAX_CAMERAS 16

/* "pi0" / "pi05" (also "pi0.5") -> *out. Errors: FRT_ERR_INVALID_ARGUMENT. */
FRT_API int frt_policy_variant_parse(const char *name, frt_policy_variant *out);

/* openpi's Pi0Config.max_token_len default: 48 for Pi0, 200 for Pi0.5. */
FRT_API size_t frt_policy_default_max_tokens(frt_policy_variant v);

/* ---- tokenizer: PaliGemma's SentencePiece model ------------------------ */

typedef struct frt_policy_tokenizer frt_policy_tokenizer;

/* Loads a SentencePiece model file (PaliGemma's `tokenizer.model`,
 * vocabulary 257152) through libsentencepiece. A `tokenizer.json` (the
 * Hugging Face form of the same model: a Unigram model with a Metaspace
 * pre-tokenizer and byte fallback) is refused with FRT_ERR_UNSUPPORTED:
 * frt's own tokenizer (frt/tokenizer.h) runs byte-level BPE only.
 * *out owns the tokenizer (frt_policy_tokenizer_free); NULL on failure.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_NOT_FOUND, FRT_ERR_IO,
 * FRT_ERR_FORMAT (not a SentencePiece model), FRT_ERR_UNSUPPORTED
 * (tokenizer.json), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_tokenizer_load(const char *path, frt_policy_tokenizer **out);

/* Same from the LEN bytes of a serialized model (copied). Errors as above. */
FRT_API int frt_policy_tokenizer_load_memory(const void *data, size_t len, frt_policy_tokenizer **out);

/* Frees; NULL is a no-op. */
FRT_API void frt_policy_tokenizer_free(frt_policy_tokenizer *tok);

/* Number of pieces (257152 for PaliGemma); 0 for NULL. */
FRT_API int frt_policy_tokenizer_vocab_size(const frt_policy_tokenizer *tok);

/* The model's BOS id (2 for PaliGemma); -1 when it has none or for NULL. */
FRT_API int frt_policy_tokenizer_bos_id(const frt_policy_tokenizer *tok);

/* SentencePieceProcessor::Encode of LEN bytes of UTF-8 TEXT, with the BOS
 * id first when ADD_BOS (sentencepiece's add_bos=True). *ids is malloc'd
 * (caller frees; NULL when *n_ids is 0).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, TEXT not valid UTF-8, ADD_BOS
 * with a model that has no BOS), FRT_ERR_BACKEND (sentencepiece failed),
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_tokenizer_encode(const frt_policy_tokenizer *tok, const char *text, size_t len, int add_bos,
                                        int32_t **ids, size_t *n_ids);

/* ---- the prompt ---------------------------------------------------------- */

/* Pi0.5's state discretisation (tokenizer.py): for each of the N values,
 * np.digitize(x, np.linspace(-1, 1, 257)[:-1]) - 1, i.e. the number of bin
 * edges -1 + i/128 (i = 0..255) that are <= x, minus one: -1 below -1, 255
 * from 1 - 1/128 up. Errors: FRT_ERR_INVALID_ARGUMENT (NULL with N > 0, a
 * non-finite value). */
FRT_API int frt_policy_state_bins(const float *state, size_t n, int32_t *bins);

/* The text openpi tokenizes, NUL-terminated in *out (malloc'd; caller
 * frees). The prompt is cleaned as openpi does: Python's str.strip()
 * (Unicode whitespace), then '_' -> ' ' and '\n' -> ' '.
 *   Pi0:   the cleaned prompt (the tokenizer adds BOS and encode("\n")).
 *   Pi0.5: "Task: <cleaned>, State: <bins joined by ' '>;\nAction: " with
 *          the bins of frt_policy_state_bins over the N_STATE values of
 *          STATE (already normalised).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, invalid UTF-8, a prompt empty
 * after cleaning, Pi0.5 without state or with a non-finite value),
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_prompt_text(frt_policy_variant v, const char *prompt, const float *state, size_t n_state,
                                   char **out);

/* The conditioned prompt of classifier-free guidance (RECAP, pi*0.6
 * arXiv:2511.14759 Appendix E; frt/policy.h frt_policy_set_cfg): TASK +
 * "\nAdvantage: positive" (ADVANTAGE_POSITIVE 1) or "\nAdvantage:
 * negative" (0), then openpi's cleaning (Python's str.strip(), '_' -> ' ',
 * '\n' -> ' '), NUL-terminated in *out (malloc'd; caller frees). Pass it as
 * the prompt of frt_policy_tokenize / frt_policy_inputs_build to get
 * input_ids_cond (cleaning it again changes nothing); TASK alone gives
 * input_ids. Every front end builds it here.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, ADVANTAGE_POSITIVE not 0/1,
 * invalid UTF-8, a task empty after cleaning), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_cfg_prompt(const char *task, int advantage_positive, char **out);

/* The prompt's ids padded to MAX_LEN, as PaligemmaTokenizer.tokenize:
 *   Pi0:   [BOS] + encode(cleaned) + encode("\n")
 *   Pi0.5: [BOS] + encode(frt_policy_prompt_text(...))
 * then 0-padded (mask 0) up to MAX_LEN, or cut to MAX_LEN (openpi truncates
 * with a warning: *n_untruncated > MAX_LEN tells the caller to warn).
 * ids [max_len] i32, mask [max_len] u8; *n_valid = tokens kept;
 * *n_untruncated = tokens before the cut (may be NULL).
 * Errors: those of frt_policy_prompt_text and frt_policy_tokenizer_encode;
 * FRT_ERR_INVALID_ARGUMENT for MAX_LEN 0. */
FRT_API int frt_policy_tokenize(const frt_policy_tokenizer *tok, frt_policy_variant v, const char *prompt,
                                const float *state, size_t n_state, size_t max_len, int32_t *ids, uint8_t *mask,
                                size_t *n_valid, size_t *n_untruncated);

/* ---- images ----------------------------------------------------------- */

/* A decoded image: [height, width, 3] u8 RGB, row-major, owned (rgb is
 * malloc'd; frt_policy_image_free). */
typedef struct frt_policy_image {
    int height;
    int width;
    uint8_t *rgb;
} frt_policy_image;

/* Decodes a PNG (libpng) or JPEG (libjpeg-turbo) file image, chosen by its
 * signature, into 8-bit RGB as PIL's Image.convert("RGB") gives it:
 * grayscale is replicated into the three channels, a palette is expanded,
 * alpha is dropped (not composited). Refused: 16-bit PNG channels and CMYK
 * / YCCK JPEG (FRT_ERR_UNSUPPORTED), images over 2^26 pixels or 65535 on a
 * side (FRT_ERR_OUT_OF_RANGE), any other signature (FRT_ERR_UNSUPPORTED),
 * truncated or corrupt data (FRT_ERR_FORMAT; a JPEG whose entropy data ends
 * early is refused, where libjpeg would only warn). *out is set on success
 * only. Errors also: FRT_ERR_INVALID_ARGUMENT (NULL, LEN 0),
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_image_decode(const void *data, size_t len, frt_policy_image *out);

/* frt_policy_image_decode of the file at PATH. Errors also FRT_ERR_NOT_FOUND,
 * FRT_ERR_IO; messages name the path. */
FRT_API int frt_policy_image_load(const char *path, frt_policy_image *out);

/* Frees img->rgb and zeroes *img; NULL is a no-op. */
FRT_API void frt_policy_image_free(frt_policy_image *img);

/* openpi_client.image_tools.resize_with_pad for one [height, width, 3] u8
 * image into [out_h, out_w, 3] u8: ratio = max(width / out_w, height /
 * out_h) (doubles), the image resized to (int(width / ratio), int(height /
 * ratio)) by PIL's Image.resize(..., BILINEAR) arithmetic (a triangle filter
 * of support max(1, scale) per axis, coefficients in 22-bit fixed point,
 * horizontal pass then vertical, each rounded to u8; an axis whose size is
 * unchanged is copied), pasted at (int((out_w - w') / 2), int((out_h - h') /
 * 2)) on zeros. An image already out_h x out_w is copied unchanged.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, a size < 1), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_resize_with_pad(const uint8_t *rgb, int height, int width, int out_h, int out_w,
                                       uint8_t *out);

/* One camera's pixel_values [3, 224, 224] f32 from a [height, width,
 * channels] u8 image of any size: resize_with_pad to 224, then x / 255 * 2
 * - 1 in f32 and HWC -> CHW. CHANNELS must be 3 (RGB).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, a size < 1, CHANNELS != 3),
 * FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_pixels_from_u8(const uint8_t *hwc, int height, int width, int channels, float *out);

/* One camera's pixel_values from an already-normalised [224, 224, channels]
 * f32 image (HWC -> CHW, values unchanged). Resizing float images is not
 * supported (FRT_ERR_UNSUPPORTED for another size). Errors also
 * FRT_ERR_INVALID_ARGUMENT (NULL, CHANNELS != 3, a value outside [-1, 1]
 * or not finite: the message names its index). */
FRT_API int frt_policy_pixels_from_f32(const float *hwc, int height, int width, int channels, float *out);

/* ---- normalisation statistics: norm_stats.json ------------------------- */

typedef struct frt_policy_norm_stats frt_policy_norm_stats;

/* Parses openpi's norm_stats.json: {"norm_stats": {"state": {"mean": [...],
 * "std": [...], "q01": [...], "q99": [...]}, "actions": {...}, ...}}.
 * Strict: the top-level object holds "norm_stats" only; each entry holds
 * mean and std (q01 and q99 optional, both or neither) and nothing else;
 * every array is a non-empty list of finite numbers of one length (at most
 * 4096); std >= 0, q01 <= q99 and q99 - q01 finite elementwise. Keys other than "state" and
 * "actions" are accepted and kept out of use. *out is set on success only.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_FORMAT (the message
 * names the key and index), FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_norm_stats_parse(const char *json, size_t len, frt_policy_norm_stats **out);

/* frt_policy_norm_stats_parse of the file at PATH. Errors also
 * FRT_ERR_NOT_FOUND, FRT_ERR_IO. */
FRT_API int frt_policy_norm_stats_load(const char *path, frt_policy_norm_stats **out);

/* Frees; NULL is a no-op. */
FRT_API void frt_policy_norm_stats_free(frt_policy_norm_stats *st);

/* Length of the "state" / "actions" statistics (KEY), 0 when absent or
 * for NULL. *has_quantiles (may be NULL) is 1 when q01 and q99 are there. */
FRT_API size_t frt_policy_norm_stats_dim(const frt_policy_norm_stats *st, const char *key, int *has_quantiles);

/* transforms.Normalize of a state of N values (in double, result rounded to
 * f32; OUT may alias STATE):
 *   Pi0   (z-score):  (x - mean[i]) / (std[i] + 1e-6)
 *   Pi0.5 (quantile): (x - q01[i]) / (q99[i] - q01[i] + 1e-6) * 2 - 1
 * over the first N statistics (openpi slices them to the state's length).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, a non-finite value),
 * FRT_ERR_NOT_FOUND (no "state" statistics, or Pi0.5 statistics without
 * q01/q99), FRT_ERR_MISMATCH (N longer than the statistics). */
FRT_API int frt_policy_normalize_state(const frt_policy_norm_stats *st, frt_policy_variant v, const float *state,
                                       size_t n, float *out);

/* transforms.Unnormalize of the model's action chunk [chunk, action_dim]
 * f32, then the robot's slice [chunk, out_dim] f32 (out_dim <= action_dim;
 * OUT must not alias ACTIONS unless out_dim == action_dim). In double:
 *   Pi0   (z-score):  x * (std[i] + 1e-6) + mean[i], with mean 0 and std 1
 *                     past the statistics' length;
 *   Pi0.5 (quantile): (x + 1) / 2 * (q99[i] - q01[i] + 1e-6) + q01[i];
 *                     columns past the statistics are passed through.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, out_dim 0 or > action_dim),
 * FRT_ERR_NOT_FOUND (no "actions" statistics, Pi0.5 without quantiles),
 * FRT_ERR_MISMATCH (statistics longer than action_dim, as numpy's
 * broadcasting refuses them). */
FRT_API int frt_policy_unnormalize_actions(const frt_policy_norm_stats *st, frt_policy_variant v,
                                           const float *actions, size_t chunk, size_t action_dim, size_t out_dim,
                                           float *out);

/* ---- the whole input set -------------------------------------------------- */

/* One camera's observation: exactly one of RGB ([height, width, 3] u8, any
 * size: resized with padding) or PIXELS ([224, 224, 3] f32 in [-1, 1]). */
typedef struct frt_policy_view {
    const char *camera; /* a name from frt_policy_input_params.cameras */
    int height;
    int width;
    const uint8_t *rgb;
    const float *pixels;
} frt_policy_view;

typedef struct frt_policy_input_params {
    frt_policy_variant variant;
    const char *const *cameras;   /* the checkpoint's camera names, in model order */
    size_t n_cameras;             /* 1..FRT_POLICY_MAX_CAMERAS */
    size_t max_tokens;            /* prompt length (0: frt_policy_default_max_tokens) */
    size_t max_state_dim;         /* state length after padding (default 32) */
    const frt_policy_tokenizer *tokenizer;     /* required */
    const frt_policy_norm_stats *norm_stats;   /* NULL: the state stays raw */
} frt_policy_input_params;

/* Pi0, no cameras, max_tokens 0, max_state_dim 32, no tokenizer, no stats. */
FRT_API frt_policy_input_params frt_policy_input_default_params(void);

/* The model inputs (layout at the top of this file). */
typedef struct frt_policy_input_set {
    size_t n_cameras;
    size_t n_tokens;
    size_t state_dim;
    float *pixel_values;           /* [n_cameras, 3, 224, 224] f32; a missing camera is -1 (a black image) */
    uint8_t *pixel_attention_mask; /* [n_cameras] u8 */
    int32_t *input_ids;            /* [n_tokens] i32 (written as I64) */
    uint8_t *attention_mask;       /* [n_tokens] u8 */
    float *state;                  /* [state_dim] f32, normalised when stats were given, zero-padded */
    size_t n_prompt_tokens;        /* valid tokens (attention_mask ones) */
    size_t n_prompt_untruncated;   /* tokens before the cut to n_tokens */
    int state_normalized;          /* 1: norm stats applied; 0: raw values */
} frt_policy_input_set;

/* Builds the inputs from N_VIEWS camera views (each camera at most once, in
 * any order; cameras without a view are masked out), the instruction PROMPT
 * (UTF-8) and the robot's STATE of N_STATE values (1..max_state_dim, raw
 * units). The state is normalised with params->norm_stats when given
 * (frt_policy_normalize_state) and, for Pi0.5, discretised into the prompt.
 * *out owns everything (frt_policy_inputs_free); set on success only.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, no view, an unknown or repeated
 * camera, a view with both or neither of rgb / pixels, an empty prompt,
 * n_state 0, a non-finite state value, a bad image: see
 * frt_policy_pixels_from_*), FRT_ERR_OUT_OF_RANGE (more views than cameras,
 * n_state > max_state_dim, n_cameras outside 1..FRT_POLICY_MAX_CAMERAS),
 * FRT_ERR_UNSUPPORTED, FRT_ERR_NOT_FOUND, FRT_ERR_MISMATCH (statistics),
 * FRT_ERR_BACKEND, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_inputs_build(const frt_policy_input_params *params, const frt_policy_view *views,
                                    size_t n_views, const char *prompt, const float *state, size_t n_state,
                                    frt_policy_input_set **out);

/* Frees; NULL is a no-op. */
FRT_API void frt_policy_inputs_free(frt_policy_input_set *in);

/* Writes the inputs as a safetensors file at PATH (atomic): pixel_values
 * F32, pixel_attention_mask U8, input_ids I64, attention_mask U8, state F32,
 * with __metadata__ {"format": "pt", "frt.policy.variant": "pi0" | "pi05",
 * "frt.policy.state_normalized": "0" | "1"}. PATH as it was on failure.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_IO, FRT_ERR_OUT_OF_MEMORY. */
FRT_API int frt_policy_inputs_write(const frt_policy_input_set *in, frt_policy_variant v, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* FRT_POLICY_IO_H */
