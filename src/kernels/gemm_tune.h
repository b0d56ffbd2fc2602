/*
 * kernels/gemm_tune.h - the GEMM autotune file: the cuBLASLt algorithm the
 * CUDA GEMM wrapper chose for each shape (frt_cuda_gemm_autotune,
 * frt_cuda_gemm_save / _load in kernels/cuda/kernels_cuda.h), as a small
 * text file kept beside a model so a later load reuses the choice instead
 * of timing again. Plain C with no CUDA: the parser is built, unit-tested
 * (tests/test_gemm_tune.c) and fuzzed (fuzz/fuzz_gemm_tune.c) everywhere.
 *
 * The format (docs/kernels-cuda.md), one record a line, ASCII, fields
 * separated by single spaces; blank lines and lines starting with '#' are
 * skipped:
 *
 *   frt-gemm-tune 1                     first line: magic and version
 *   device NAME                         the GPU's name (rest of the line, 1..255 bytes)
 *   cublaslt V                          cublasLtGetVersion() when tuned
 *   workspace BYTES                     the handle's per-stream workspace
 *   candidates N                        how many heuristic results were timed (1..64)
 *   gemm N IN OUT DT ACC I A T S K R W C
 *       one per tuned shape: rows N, in / out features, DT f32 | bf16 (the
 *       output dtype), ACC 0 | 1; I the chosen result's 0-based rank in
 *       cublasLtMatmulAlgoGetHeuristic's list (< candidates); then that
 *       algorithm's config, checked on load: A algo id, T tile id, S stages
 *       id, K split-k count, R reduction scheme, W CTA swizzling, C custom
 *       option.
 *
 * The four header records come first, in that order, then up to
 * FRT_GEMM_TUNE_MAX gemm records with distinct (N, IN, OUT, DT, ACC).
 */
#ifndef FRT_KERNELS_GEMM_TUNE_H
#define FRT_KERNELS_GEMM_TUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRT_GEMM_TUNE_VERSION 1
#define FRT_GEMM_TUNE_MAX 1024           /* gemm records at most (the wrapper's plan limit) */
#define FRT_GEMM_TUNE_MAX_CANDIDATES 64  /* candidates at most */
#define FRT_GEMM_TUNE_LINE_MAX 512       /* bytes a line at most, without its newline */

/* One tuned shape and its choice. */
typedef struct frt_gemm_tune_entry {
    int n, in_dim, out_dim; /* 1 .. 1 << 24 each */
    int out_bf16;           /* 0: f32 output, 1: bf16 */
    int accumulate;         /* 0 / 1 */
    int index;              /* rank of the chosen algorithm in the heuristic's list, 0 .. candidates-1 */
    /* algo_id, tile_id, stages_id, splitk_num, reduction_scheme,
     * cta_swizzling, custom_option of the chosen algorithm (0 .. 2^30) */
    int algo[7];
} frt_gemm_tune_entry;

/* A whole file. */
typedef struct frt_gemm_tune {
    char device[256];
    long long cublaslt_version;   /* 0 .. 2^40 */
    long long workspace_bytes;    /* 0 .. 2^40 */
    int candidates;               /* 1 .. FRT_GEMM_TUNE_MAX_CANDIDATES */
    int n;                        /* entries */
    frt_gemm_tune_entry *e;       /* [n], owned (frt_gemm_tune_free) */
} frt_gemm_tune;

/* Parses len bytes of text into *out (zeroed first; out->e malloc'd,
 * released with frt_gemm_tune_free; on error nothing is left to free).
 * `what` names the source in messages. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL), FRT_ERR_FORMAT (the message names the line: no or another magic,
 * another version, a header record missing or out of order, an unknown
 * record, a missing, extra or out-of-range field, a NUL byte, a line longer
 * than FRT_GEMM_TUNE_LINE_MAX, a repeated shape, an index not below
 * candidates, more than FRT_GEMM_TUNE_MAX gemm records),
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_gemm_tune_parse(const char *text, size_t len, const char *what, frt_gemm_tune *out);

/* Writes t in the format above into *out (malloc'd, NUL-terminated; *len
 * its length without the NUL). Parsing the text gives t back. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, or a field outside the ranges above, a
 * device name with a newline or empty), FRT_ERR_OUT_OF_MEMORY. */
int frt_gemm_tune_format(const frt_gemm_tune *t, char **out, size_t *len);

/* The file at path (at most 1 MiB) through frt_gemm_tune_parse. Errors:
 * those of frt_gemm_tune_parse, FRT_ERR_IO / FRT_ERR_NOT_FOUND (unreadable,
 * missing). */
int frt_gemm_tune_read(const char *path, frt_gemm_tune *out);

/* frt_gemm_tune_format into path, written to a temporary name and renamed
 * (a crash never leaves a partial file). Errors: those of
 * frt_gemm_tune_format, FRT_ERR_IO. */
int frt_gemm_tune_write(const char *path, const frt_gemm_tune *t);

/* The entry of a shape, or NULL. */
const frt_gemm_tune_entry *frt_gemm_tune_find(const frt_gemm_tune *t, int n, int in_dim, int out_dim, int out_bf16,
                                              int accumulate);

/* Frees t->e and zeroes *t; NULL is a no-op. */
void frt_gemm_tune_free(frt_gemm_tune *t);

#ifdef __cplusplus
}
#endif

#endif /* FRT_KERNELS_GEMM_TUNE_H */
