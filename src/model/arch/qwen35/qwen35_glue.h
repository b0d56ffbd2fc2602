/*
 * model/arch/qwen35/qwen35_glue.h - the small CUDA kernels the Qwen3.5 forward pass
 * needs beyond kernels/cuda (internal to the model layer; qwen35_glue.cu).
 * They update the boundary record on the device at the end of a step, so a
 * captured graph replays at any position: every dynamic value (position,
 * valid rows, token, temperature, RNG) is read from device memory.
 *
 * Conventions as kernels/cuda/kernels_cuda.h: `stream` is a cudaStream_t as
 * void *, launchers only enqueue (legal inside a capture) and return 0,
 * FRT_ERR_INVALID_ARGUMENT (nothing enqueued) or FRT_ERR_BACKEND (launch
 * failed). d_n NULL means max_n; the count is clamped to [0, max_n].
 */
#ifndef FRT_MODEL_QWEN35_GLUE_H
#define FRT_MODEL_QWEN35_GLUE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The token journal: tokens[*d_pos + t] = ids[t] for t < n, rows past
 * max_seq dropped; seen[ids[t]] = 1; a decode step (counts not NULL, max_n
 * 1) also does counts[ids[0]] += 1 (frt/sampling.h: the penalty counts).
 * tokens [max_seq] i32, ids [max_n] i32, seen [vocab] u8, counts [vocab] i32
 * (device). Twin: frt_cpu_journal (src/model/cpu_forward.c). */
int frt_qwen35_journal(void *stream, int32_t *tokens, const int32_t *ids, const int32_t *d_pos,
                       const int32_t *d_n, int max_n, int max_seq, uint8_t *seen, int32_t *counts);

/* End of a forward step (task_final of qwen35_cpu.c): *d_pos += n,
 * *d_has_logits = !*d_no_logits (1 when d_no_logits is NULL), *d_pending =
 * -1; when d_rows is not NULL, *d_rows = n (the rows of the debug record).
 * One thread. */
int frt_qwen35_advance(void *stream, int32_t *d_pos, int32_t *d_pending, int32_t *d_has_logits,
                       int32_t *d_rows, const int32_t *d_n, const int32_t *d_no_logits, int max_n);

#ifdef __cplusplus
}
#endif
#endif
