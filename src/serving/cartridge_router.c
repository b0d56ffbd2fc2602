/* serving/cartridge_router.c - the per-request cartridge router
 * (serving/cartridges.h): a chain of rules (explicit id, label, static
 * mapping of the model name), first match wins; a registry failure falls
 * back to a full prefill. */
#include "serving/cartridges.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct static_map {
    char model[256];
    char id[FRT_CARTRIDGE_ID_MAX];
} static_map;

struct frt_cart_router {
    frt_cartreg *reg;
    uint64_t fingerprint;
    frt_cart_rule chain[FRT_CART_MAX_RULES];
    int n_chain;
    static_map map[FRT_CART_MAX_STATIC];
    int n_map;
    frt_cart_router_stats stats;
};

int frt_cart_router_create(frt_cartreg *r, uint64_t fingerprint, frt_cart_router **out)
{
    if (!r || !out || !fingerprint) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge router: bad argument");
    frt_cart_router *rt = calloc(1, sizeof *rt);
    if (!rt) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cartridge router");
    rt->reg = r;
    rt->fingerprint = fingerprint;
    rt->chain[0] = FRT_CART_RULE_ID;
    rt->chain[1] = FRT_CART_RULE_LABEL;
    rt->chain[2] = FRT_CART_RULE_STATIC;
    rt->n_chain = 3;
    *out = rt;
    return 0;
}

void frt_cart_router_free(frt_cart_router *rt) { free(rt); }

int frt_cart_router_set_chain(frt_cart_router *rt, const frt_cart_rule *rules, int n)
{
    if (!rt || !rules || n < 1 || n > FRT_CART_MAX_RULES)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge router: a chain of %d rules (1 to %d)", n,
                         FRT_CART_MAX_RULES);
    for (int i = 0; i < n; i++)
        if (rules[i] != FRT_CART_RULE_ID && rules[i] != FRT_CART_RULE_LABEL && rules[i] != FRT_CART_RULE_STATIC)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge router: unknown rule %d", (int)rules[i]);
    memcpy(rt->chain, rules, (size_t)n * sizeof *rules);
    rt->n_chain = n;
    return 0;
}

int frt_cart_router_add_static(frt_cart_router *rt, const char *model, const char *cartridge_id)
{
    if (!rt || !model || !cartridge_id || !frt_cartridge_id_ok(cartridge_id) || !*model ||
        strlen(model) >= sizeof rt->map[0].model)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge router: static mapping '%s' -> '%s'", model ? model : "",
                         cartridge_id ? cartridge_id : "");
    int i = 0;
    while (i < rt->n_map && strcmp(rt->map[i].model, model)) i++;
    if (i == FRT_CART_MAX_STATIC)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "cartridge router: more than %d static mappings", FRT_CART_MAX_STATIC);
    snprintf(rt->map[i].model, sizeof rt->map[i].model, "%s", model);
    snprintf(rt->map[i].id, sizeof rt->map[i].id, "%s", cartridge_id);
    if (i == rt->n_map) rt->n_map++;
    return 0;
}

/* One rule: 1 resolved, 0 does not apply / nothing found (label), or a
 * negative status (FRT_ERR_IO: the registry failed). */
static int try_rule(frt_cart_router *rt, frt_cart_rule rule, const frt_cart_request *q, frt_cartreg_entry *out)
{
    const char *id = NULL;
    if (rule == FRT_CART_RULE_LABEL) {
        if (!q->cartridge_label) return 0;
        int rc = frt_cartreg_by_label(rt->reg, q->cartridge_label, rt->fingerprint, out);
        return rc == FRT_ERR_NOT_FOUND ? 0 : rc < 0 ? rc : 1;
    }
    if (rule == FRT_CART_RULE_ID) id = q->cartridge_id;
    for (int i = 0; rule == FRT_CART_RULE_STATIC && q->model && i < rt->n_map; i++)
        if (!strcmp(rt->map[i].model, q->model)) id = rt->map[i].id;
    if (!id) return 0;
    FRT_TRY(frt_cartreg_get(rt->reg, id, out));
    if (out->model_fingerprint != rt->fingerprint)
        return frt_error(FRT_ERR_MISMATCH, "cartridge '%s' was made for another model (fingerprint %016llx)", id,
                         (unsigned long long)out->model_fingerprint);
    return 1;
}

int frt_cart_router_route(frt_cart_router *rt, const frt_cart_request *req, frt_cartreg_entry *out, char *why,
                          size_t why_size)
{
    if (!rt || !req || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge router: NULL argument");
    char scratch[8];
    if (!why) why = scratch, why_size = sizeof scratch;
    /* a field the chain does not route is refused, not ignored */
    int has_id = 0, has_label = 0;
    for (int i = 0; i < rt->n_chain; i++) {
        has_id |= rt->chain[i] == FRT_CART_RULE_ID;
        has_label |= rt->chain[i] == FRT_CART_RULE_LABEL;
    }
    if ((req->cartridge_id && !has_id) || (req->cartridge_label && !has_label)) {
        rt->stats.refused++;
        return frt_error(FRT_ERR_UNSUPPORTED, "this server does not route requests by %s",
                         req->cartridge_id && !has_id ? "cartridge_id" : "cartridge_label");
    }
    for (int i = 0; i < rt->n_chain; i++) {
        int rc = try_rule(rt, rt->chain[i], req, out);
        if (rc == 1) {
            rt->stats.hits++;
            snprintf(why, why_size, "cartridge '%s'", out->id);
            return 1;
        }
        if (rc == FRT_ERR_IO) { /* the registry failed: full prefill, the request goes on */
            rt->stats.fallbacks++;
            snprintf(why, why_size, "registry unavailable: %s", frt_last_error());
            return 0;
        }
        if (rc < 0) {
            rt->stats.refused++;
            return rc;
        }
    }
    if (req->cartridge_label) {
        rt->stats.refused++;
        return frt_error(FRT_ERR_NOT_FOUND, "no cartridge for this model has label '%s'", req->cartridge_label);
    }
    rt->stats.misses++;
    snprintf(why, why_size, "no rule applied");
    return 0;
}

void frt_cart_router_stats_get(const frt_cart_router *rt, frt_cart_router_stats *out)
{
    if (rt && out) *out = rt->stats;
}
