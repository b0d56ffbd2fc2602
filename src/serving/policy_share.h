/*
 * policy_share.h - a policy and an LLM in one execution context, served
 * from two threads (`frt serve -m LLM --policy DIR --policy-port P`;
 * docs/policy-server.md "Beside an LLM").
 *
 * Both models enqueue their work on the context's one default stream
 * (frt_model_params.context), and a model's calls are not safe against
 * another thread's calls on the same stream. The two servers therefore take
 * turns through one turn lock: the LLM server's engine holds it for each
 * engine call (one prefill, one sampling step, one decode step, one capsule
 * operation: frt_engine_locked_create), the policy service for each tick
 * of its rollout host and each control message
 * (frt_policy_service_params.device_lock). The lock is FIFO (a ticket
 * lock), so a policy inference that arrives while an LLM request decodes
 * waits for at most the engine call in progress and the calls already
 * queued before it (one decode step, or one prefill call), never for the
 * whole request; the LLM likewise waits for at most one policy tick.
 */
#ifndef FRT_SERVING_POLICY_SHARE_H
#define FRT_SERVING_POLICY_SHARE_H

#include "serving/engine.h"

#include <stdint.h>

typedef struct frt_turn_lock frt_turn_lock; /* also named in policy_service.h */

/* Creates a turn lock. FRT_ERR_INVALID_ARGUMENT (NULL out),
 * FRT_ERR_OUT_OF_MEMORY. Free with frt_turn_lock_free. */
int frt_turn_lock_create(frt_turn_lock **out);

/* Frees it (nobody may hold or wait for it); NULL is a no-op. */
void frt_turn_lock_free(frt_turn_lock *l);

/* Who takes a turn (for the statistics). */
typedef enum frt_turn_side { FRT_TURN_LLM = 0, FRT_TURN_POLICY = 1, FRT_TURN_SIDES = 2 } frt_turn_side;

/* Waits for the caller's turn (first come, first served) and holds the
 * lock; side (an frt_turn_side) says whose turn it is. Not recursive: a
 * holder that acquires again deadlocks. */
void frt_turn_lock_acquire(frt_turn_lock *l, int side);

/* Ends the holder's turn; the longest waiter gets it next. */
void frt_turn_lock_release(frt_turn_lock *l);

/* One side's turns since creation: how many, how many had to wait, and
 * the waits (wall time from the call to holding the lock, milliseconds). */
typedef struct frt_turn_lock_stats {
    uint64_t turns;
    uint64_t waited;
    double wait_ms_max;
    double wait_ms_total;
} frt_turn_lock_stats;

/* out[FRT_TURN_SIDES]: each side's. */
void frt_turn_lock_stats_get(frt_turn_lock *l, frt_turn_lock_stats *out);

/* Wraps inner (taken over: freed by frt_engine_free(*out), also on
 * failure) so that every call that may touch the model's state or the
 * device runs holding lock (borrowed: it must outlive the engine). Calls
 * on host data only (tokenize, detokenize, chat_prompt, token_bytes,
 * grammar_vocab, digest, capsule_key, cartridge_supported,
 * cartridge_bytes) are passed through without it. Entries inner leaves
 * NULL stay NULL; facts are inner's.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_OUT_OF_MEMORY. */
int frt_engine_locked_create(frt_engine *inner, frt_turn_lock *lock, frt_engine **out);

#endif
