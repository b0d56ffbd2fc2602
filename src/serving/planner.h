/*
 * serving/planner.h - prefix planning: how to reach the state after a
 * request's prompt with the least prefill, exactly.
 *
 * Actions (../shared/DESIGN.md section 6):
 *   append   the prompt extends the hot session's committed tokens: prefill
 *            only the new suffix (the pending token, when the client resends
 *            it, is the first token of that suffix: prefill feeds it);
 *   restore  the prompt extends a stored capsule (this session's boundary or
 *            checkpoint, or a shared PREFIX capsule with the same salt):
 *            restore + prefill the suffix;
 *   rebuild  nothing matches: cold prefill from position 0.
 * The longest reuse wins; on a tie append beats restore, and a faster tier
 * beats a slower one. A candidate must leave at least one prompt token to
 * prefill (the logits of the last prompt token are needed to sample).
 *
 * Exactness: a state is "cold-exact" when it equals a cold prefill of its
 * tokens. PREFIX capsules are cold-exact at multiples of C; prefill from a
 * cold-exact state at a multiple of C stays cold-exact (prefill splits at
 * absolute multiples of C), so a restore turn from a PREFIX capsule equals a
 * cold prefill of the same prompt.
 *
 * Pinning (request field frt_pin_prefix): the prefix of pin_len tokens (the
 * whole prompt for -1) is pinned at its aligned length L (the largest
 * multiple of C not above it). If a PREFIX capsule holds exactly L tokens it
 * is pinned; otherwise the plan goes through a cold-exact path to L (a
 * shorter PREFIX capsule, or a rebuild) and the executor snapshots
 * mid-prefill at L: no second prefill.
 *
 * Auto capsules: when the path is cold-exact and chunk-aligned, an unpinned
 * PREFIX capsule is snapshotted mid-prefill at the prompt's aligned length
 * so that the next request that extends this prompt can restore it.
 *
 * Sessionless requests (exact_only) use only cold-exact, chunk-aligned
 * starting points, so their answer never depends on what ran before: it is
 * always what a cold prefill of the prompt gives.
 *
 * The planner only reads the registry; it never changes anything.
 */
#ifndef FRT_SERVING_PLANNER_H
#define FRT_SERVING_PLANNER_H

#include "serving/registry.h"

typedef enum frt_prefix_action {
    FRT_PREFIX_APPEND = 0,
    FRT_PREFIX_RESTORE = 1,
    FRT_PREFIX_REBUILD = 2,
} frt_prefix_action;

const char *frt_prefix_action_name(frt_prefix_action a); /* "append", "restore", "rebuild" */

typedef struct frt_request_plan_input {
    const int32_t *ids;   /* [n] the prompt, n >= 1 */
    int n;
    const void *salt;     /* the session's salt (NULL for none) */
    size_t salt_len;
    int pin_len;          /* 0 none; -1 the whole prompt; > 0 a token count */
    int auto_capsules;
    int exact_only;       /* only cold-exact, chunk-aligned starts (sessionless requests) */
    /* The live state when this request may extend it (it belongs to the
     * request's session, or to the anonymous session for a sessionless
     * request): its committed tokens and exactness. */
    int hot_usable;
    const int32_t *hot;
    int hot_n;
    int hot_exact;
    /* This session's stored boundaries (its capsule, its checkpoints). */
    const uint64_t *stored;
    int n_stored;
    /* Only the hot state and this session's stored boundaries: no shared
     * PREFIX capsule (a session started from a cartridge, whose rows are no
     * cold prefill of tokens). */
    int own_only;
} frt_request_plan_input;

typedef struct frt_request_plan {
    frt_prefix_action action;
    uint64_t capsule;      /* restore: the registry entry */
    int start;             /* tokens reused (cached); prefill covers start..n-1 */
    int start_exact;       /* the state at start is cold-exact */
    int exact;             /* the state after the prompt will be cold-exact */
    int pin_at;            /* > 0: snapshot a pinned PREFIX capsule when the prefill reaches pin_at */
    uint64_t pin_existing; /* > 0: pin this PREFIX capsule (it holds the pin length) */
    int pin_unavailable;   /* a pin was asked but the prefix is shorter than C */
    int auto_at;           /* > 0: snapshot an unpinned PREFIX capsule at auto_at */
} frt_request_plan;

/* Plans a request. FRT_ERR_INVALID_ARGUMENT on NULL or n < 1. */
int frt_request_plan_make(const frt_registry *r, int prefill_chunk, const frt_request_plan_input *in, frt_request_plan *out);

#endif
