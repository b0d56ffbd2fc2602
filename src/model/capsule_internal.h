/* capsule_internal.h - test-only capsule hooks (the ablation of the
 * exactness suite). Not part of the public API. */
#ifndef FRT_CAPSULE_INTERNAL_H
#define FRT_CAPSULE_INTERNAL_H

#include "model/model_internal.h"

enum {
    /* Restore the KV, tokens, boundary and logits but not the Gated DeltaNet
     * recurrent and conv state, which is zeroed... */
    FRT_RESTORE_KV_ONLY_ZERO = 1 << 0,
    /* ...or left as the live state had it (stale). */
    FRT_RESTORE_KV_ONLY_STALE = 1 << 1,
    /* Copy every buffer even when a rollback restore would do (the bench's
     * full-restore figure; tests comparing both forms). */
    FRT_RESTORE_FULL = 1 << 2,
};

/* frt_capsule_restore with these flags (0 = frt_capsule_restore). */
int frt_capsule_restore_ex(frt_model *m, const frt_capsule *c, int flags);

#endif
