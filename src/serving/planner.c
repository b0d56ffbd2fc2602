/* serving/planner.c - prefix planning (see planner.h). */
#include "serving/planner.h"

#include "util/error.h"

#include <string.h>

const char *frt_prefix_action_name(frt_prefix_action a)
{
    switch (a) {
    case FRT_PREFIX_APPEND: return "append";
    case FRT_PREFIX_RESTORE: return "restore";
    default: return "rebuild";
    }
}

typedef struct cand {
    frt_prefix_action action;
    uint64_t capsule;
    int start, exact, tier;
} cand;

static int is_prefix(const int32_t *a, int na, const int32_t *ids, int n)
{
    return na <= n && (na == 0 || !memcmp(a, ids, (size_t)na * sizeof *ids));
}

/* 1 when x is a better start than y: longer; then append; then faster tier. */
static int better(const cand *x, const cand *y)
{
    if (x->start != y->start) return x->start > y->start;
    if (x->action != y->action) return x->action < y->action;
    return x->tier < y->tier;
}

/* The best usable starting point; `need_exact_upto` > 0 keeps only
 * cold-exact, chunk-aligned ones at or below it. */
static cand best_start(const frt_registry *r, int C, const frt_request_plan_input *in, int need_exact_upto)
{
    const int limit = in->n - 1; /* leave one token to prefill */
    cand best = {FRT_PREFIX_REBUILD, 0, 0, 1, FRT_ENGINE_N_TIERS};
    cand c;
    int ok;
#define CONSIDER()                                                                              \
    do {                                                                                        \
        ok = c.start > 0 && c.start <= limit;                                                   \
        if (need_exact_upto > 0) ok = ok && c.exact && c.start % C == 0 && c.start <= need_exact_upto; \
        if (ok && better(&c, &best)) best = c;                                                  \
    } while (0)
    if (in->hot_usable && is_prefix(in->hot, in->hot_n, in->ids, in->n)) {
        c = (cand){FRT_PREFIX_APPEND, 0, in->hot_n, in->hot_exact, -1};
        CONSIDER();
    }
    const uint64_t sh = frt_salt_hash(in->salt, in->salt_len);
    for (int i = 0; i < in->n_stored; i++) {
        const frt_cap *k = frt_registry_get(r, in->stored[i]);
        if (!k || k->salt_hash != sh || !is_prefix(k->tokens, k->position, in->ids, in->n)) continue;
        c = (cand){FRT_PREFIX_RESTORE, k->id, k->position, k->exact, k->tier};
        CONSIDER();
    }
    uint64_t pid = 0;
    int max_pos = need_exact_upto > 0 && need_exact_upto < limit ? need_exact_upto : limit;
    int pos = in->own_only ? 0 : frt_registry_match_prefix(r, in->ids, in->n, max_pos, in->salt, in->salt_len, &pid);
    if (pid) {
        const frt_cap *k = frt_registry_get(r, pid);
        c = (cand){FRT_PREFIX_RESTORE, pid, pos, 1, k ? k->tier : FRT_ENGINE_TIER_DISK};
        CONSIDER();
    }
#undef CONSIDER
    return best;
}

int frt_request_plan_make(const frt_registry *r, int C, const frt_request_plan_input *in, frt_request_plan *out)
{
    if (!r || !in || !out || !in->ids || in->n < 1 || C < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "planner: bad arguments");
    memset(out, 0, sizeof *out);
    cand best = best_start(r, C, in, in->exact_only ? in->n : 0);

    if (in->pin_len != 0) {
        int len = in->pin_len < 0 || in->pin_len > in->n ? in->n : in->pin_len;
        int L = len / C * C;
        if (L == 0) {
            out->pin_unavailable = 1;
        } else {
            uint64_t pid = 0;
            if (frt_registry_match_prefix(r, in->ids, in->n, L, in->salt, in->salt_len, &pid) == L && pid) {
                out->pin_existing = pid;
            } else {
                if (!(best.exact && best.start % C == 0 && best.start <= L)) best = best_start(r, C, in, L);
                out->pin_at = L;
            }
        }
    }

    out->action = best.action;
    out->capsule = best.capsule;
    out->start = best.start;
    out->start_exact = best.exact;
    /* prefill from a cold-exact state at a multiple of C stays cold-exact */
    out->exact = best.exact && best.start % C == 0;

    if (in->auto_capsules && out->exact) {
        int a = in->n / C * C;
        uint64_t pid = 0;
        if (a > 0 && a > out->start && a > out->pin_at &&
            frt_registry_match_prefix(r, in->ids, in->n, a, in->salt, in->salt_len, &pid) != a)
            out->auto_at = a;
    }
    return 0;
}
