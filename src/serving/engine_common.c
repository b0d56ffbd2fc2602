/* serving/engine_common.c - what every engine shares: tier names, ChatML
 * formatting, frt_engine_free. */
#include "serving/engine.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

const char *frt_engine_tier_name(int tier)
{
    switch (tier) {
    case FRT_ENGINE_TIER_DEVICE: return "device";
    case FRT_ENGINE_TIER_HOST: return "host";
    case FRT_ENGINE_TIER_DISK: return "disk";
    default: return "?";
    }
}

int frt_engine_set_capsule_key(frt_engine *e, const void *key, size_t key_len)
{
    if (!e) return frt_error(FRT_ERR_INVALID_ARGUMENT, "engine: NULL engine");
    if (!e->capsule_key)
        return frt_error(FRT_ERR_UNSUPPORTED, "engine: the %s engine writes no capsule files to key", e->facts.backend);
    return e->capsule_key(e->self, key, key_len);
}

void frt_engine_free(frt_engine *e)
{
    if (e && e->destroy) e->destroy(e->self);
}
