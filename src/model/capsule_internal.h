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
};

/* frt_capsule_restore with ablation flags (0 = the full restore). */
int frt_capsule_restore_ex(frt_model *m, const frt_capsule *c, int flags);

#endif
