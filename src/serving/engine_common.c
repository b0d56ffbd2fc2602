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

int frt_chatml_format(const frt_engine_msg *msgs, int n, int add_generation_prompt, char **text)
{
    if (!text || n < 0 || (n > 0 && !msgs)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "chatml: NULL argument");
    static const char open[] = "<|im_start|>", close[] = "<|im_end|>\n", gen[] = "<|im_start|>assistant\n";
    size_t total = 1 + (add_generation_prompt ? sizeof gen : 0);
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "chatml: message %d has no role or content", i);
        total += sizeof open + strlen(msgs[i].role) + 1 + strlen(msgs[i].content) + sizeof close;
    }
    char *out = malloc(total);
    if (!out) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chatml: %zu bytes", total);
    char *p = out;
    for (int i = 0; i < n; i++) {
        size_t lr = strlen(msgs[i].role), lc = strlen(msgs[i].content);
        memcpy(p, open, sizeof open - 1), p += sizeof open - 1;
        memcpy(p, msgs[i].role, lr), p += lr;
        *p++ = '\n';
        memcpy(p, msgs[i].content, lc), p += lc;
        memcpy(p, close, sizeof close - 1), p += sizeof close - 1;
    }
    if (add_generation_prompt) memcpy(p, gen, sizeof gen - 1), p += sizeof gen - 1;
    *p = 0;
    *text = out;
    return 0;
}
