/*
 * frt/branch.h - branch slots: fork one capsule into B live branches and
 * decode them together (docs/fork.md).
 *
 * BRANCH SLOTS. A model loaded with frt_model_params.branch_slots = B holds
 * B copies of its live state table (every entry frt_model_state_info lists,
 * one full copy per slot; slot 0 is the table itself, so B = 1 costs
 * nothing). The count is fixed at load; frt_model_info.branch_slots and
 * .branch_state_bytes report it. The state table, the fingerprint and the
 * capsule format do not depend on B: a capsule taken of any slot is an
 * ordinary single-sequence capsule, restorable into a model with any B.
 *
 * THE SELECTED SLOT. Every single-sequence call (prefill, sample, decode,
 * generate, reset, seed, position, tokens, logits, the ports, capsule
 * snapshot and restore) acts on the selected slot, 0 after load.
 * frt_model_branch_select picks another, so a branch is a first-class
 * state: snapshot it, continue it alone, roll it back.
 *
 * A FORK restores one capsule into slots 0..n-1 and gives branch i the
 * sampler RNG stream frt_branch_seed(seed, i). frt_model_branch_sample and
 * frt_model_branch_decode then step every live branch; a stopped branch
 * (frt_model_branch_stop) is no longer stepped.
 *
 * BIT IDENTITY. A branch's step runs the same operations as the same step of
 * a single-sequence model: branch i decoded with the others gives the same
 * logits and tokens, byte for byte, as the capsule restored into a
 * single-slot model, seeded with frt_branch_seed(seed, i) and decoded alone.
 * On the cpu backend a batched step runs each live branch's captured decode
 * graph in turn against its own slot (the slot is bound by pointer; nothing
 * is copied); the weights are read once per branch.
 *
 * On a backend whose captured graphs hold the state's addresses (cuda), the
 * runtime captures one set of graphs (prefill buckets, decode, sample) per
 * slot at load, each on its own slot's buffers, and a batched step replays
 * each live branch's own decode graph: the same kernels on the same shapes,
 * so the same bits as a single-slot model (batch invariance by
 * construction); the weights are read once per branch, not once per step
 * (a batched decode graph is not built yet: docs/fork.md).
 */
#ifndef FRT_BRANCH_H
#define FRT_BRANCH_H

#include "frt/capsule.h"
#include "frt/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest branch_slots a model accepts. */
#define FRT_MAX_BRANCH_SLOTS 4096

/* The seed of branch i's sampler RNG stream in a fork seeded with `seed`:
 * xxh64 of the little-endian pair (seed, i). Seeding a single-slot model
 * with it (frt_model_seed) reproduces branch i alone. */
FRT_API uint64_t frt_branch_seed(uint64_t seed, int branch);

/* Restores capsule c into slots 0..n-1, seeds branch i with
 * frt_branch_seed(seed, i), marks the n branches live and selects slot 0.
 * The previous contents of those slots are replaced.
 *   FRT_ERR_INVALID_ARGUMENT  NULL model or capsule
 *   FRT_ERR_UNSUPPORTED       m is a policy (no sampler for the seed, one
 *                             slot: restore the capsule instead; nothing
 *                             changed)
 *   FRT_ERR_OUT_OF_RANGE      n < 1 or n > branch_slots (nothing changed)
 *   the errors of frt_capsule_restore (checked on slot 0 first; nothing
 *   changed when it refuses the capsule) */
FRT_API int frt_model_fork(frt_model *m, const frt_capsule *c, int n, uint64_t seed);

/* Branches of the last fork (0 before the first), and whether branch i is
 * still live (1), stopped (0), or a negative status for a bad argument. */
FRT_API int frt_model_branch_count(const frt_model *m);
FRT_API int frt_model_branch_live(const frt_model *m, int branch);

/* Stops branch i: later frt_model_branch_sample / _decode skip it. Its slot
 * keeps its state (select it to snapshot or continue it alone).
 *   FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_OUT_OF_RANGE (i outside the fork) */
FRT_API int frt_model_branch_stop(frt_model *m, int branch);

/* Selects slot i (0 <= i < branch_slots) for the single-sequence calls.
 *   FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_OUT_OF_RANGE (i) */
FRT_API int frt_model_branch_select(frt_model *m, int slot);

/* The selected slot, or a negative status (NULL model). */
FRT_API int frt_model_branch_selected(const frt_model *m);

/* Samples each live branch's pending token from its logits with *s (NULL =
 * greedy) and its own RNG; tokens[i] (room for frt_model_branch_count) gets
 * it, or -1 for a stopped branch. The selected slot is kept.
 *   FRT_ERR_INVALID_ARGUMENT  NULL model / tokens
 *   FRT_ERR_STATE             no fork, or a live branch without logits
 * The preconditions of every live branch are checked before any work. */
FRT_API int frt_model_branch_sample(frt_model *m, const frt_sampling *s, int32_t *tokens);

/* One decode step of every live branch (frt_model_decode on each slot):
 * tokens[i] gets its next pending token, or -1 for a stopped branch.
 *   FRT_ERR_INVALID_ARGUMENT  NULL model / tokens
 *   FRT_ERR_STATE             no fork, or a live branch without a pending token
 *   FRT_ERR_OUT_OF_RANGE      a live branch's state is full
 * Preconditions are checked for every live branch before any work; a failure
 * inside the forward pass is reported as frt_model_decode reports it. */
FRT_API int frt_model_branch_decode(frt_model *m, const frt_sampling *s, int32_t *tokens);

#ifdef __cplusplus
}
#endif
#endif /* FRT_BRANCH_H */
