/* serving/server_cartridges.c - cartridges in the server: the store opened
 * at start (--cartridge-dir, --cartridge-map), the routing of a request's
 * cartridge on the engine thread, and its facts in the answer
 * (docs/cartridges.md, "Serving"). */
#include "serving/server_int.h"

#include "util/error.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static void store_log(void *user, const char *line) { frt_server_logf(user, "%s", line); }

/* "MODEL=ID" into the router. */
static int add_mapping(frt_cart_router *rt, const char *m)
{
    const char *eq = m ? strrchr(m, '=') : NULL;
    char model[256];
    if (!eq || eq == m || (size_t)(eq - m) >= sizeof model)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cartridge map '%s': expected MODEL=ID", m ? m : "");
    snprintf(model, sizeof model, "%.*s", (int)(eq - m), m);
    return frt_cart_router_add_static(rt, model, eq + 1);
}

int frt_server_cartridges_open(frt_server *s, const frt_server_params *p)
{
    if (!p->cartridge_dir) {
        if (p->n_cartridge_map)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: a cartridge map needs a cartridge directory");
        return 0;
    }
    if (!s->e->cartridge_fingerprint)
        return frt_error(FRT_ERR_UNSUPPORTED, "server: the %s engine takes no cartridges", s->e->facts.backend);
    if (p->n_cartridge_map < 0 || (p->n_cartridge_map && !p->cartridge_map))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "server: bad cartridge map");
    int cap = p->cartridge_cache ? p->cartridge_cache : 4;
    FRT_TRY(frt_cart_store_open(p->cartridge_dir, s->e->cartridge_fingerprint(s->e->self), cap, store_log, s,
                                &s->carts));
    for (int i = 0; i < p->n_cartridge_map; i++)
        FRT_TRY(add_mapping(frt_cart_store_router(s->carts), p->cartridge_map[i]));
    frt_cart_store_stats st;
    frt_cart_store_stats_get(s->carts, &st);
    frt_server_logf(s, "cartridges: %d registered from %s (%d refused), %d kept loaded", st.registered,
                    p->cartridge_dir, st.refused, cap);
    return 0;
}

/* The cartridge id the request's session is bound to into id ("" when
 * none or no such session: the service answers for that). */
static void session_cartridge(frt_server *s, const char *sid, char *id, size_t size)
{
    frt_service_lock(s->svc);
    const frt_session *x = frt_sessions_find(frt_service_sessions(s->svc), sid);
    snprintf(id, size, "%s", x ? x->cart.id : "");
    frt_service_unlock(s->svc);
}

/* g's cartridge fields from the routed cartridge. */
static void fill_request(frt_job *j, frt_gen_request *g, const frt_cartridge *cart, const frt_cartreg_entry *e)
{
    frt_cartridge_info in;
    frt_cartridge_info_get(cart, &in);
    snprintf(j->cart_id, sizeof j->cart_id, "%s", e->id);
    j->cart_tokens = e->tokens;
    g->cartridge = cart;
    g->cartridge_tokens = e->tokens;
    g->cartridge_name = j->cart_id;
    XXH64_state_t *h = XXH64_createState();
    if (h) { /* the version: id, created and payload checksum */
        XXH64_reset(h, 0);
        XXH64_update(h, e->id, strlen(e->id) + 1);
        XXH64_update(h, e->created, strlen(e->created) + 1);
        XXH64_update(h, &in.checksum, sizeof in.checksum);
        g->cartridge_key = XXH64_digest(h);
        XXH64_freeState(h);
    } else {
        g->cartridge_key = in.checksum;
    }
    frt_cartridge_token_ids(cart, &g->cartridge_ids);
    frt_cartridge_starts_with(cart, &g->cartridge_start, &g->n_cartridge_start);
}

int frt_server_cartridge_route(frt_server *s, frt_job *j, frt_gen_request *g, frt_api_error *err)
{
    const frt_api_completion *c = &j->rq;
    const char *param = c->cartridge_id[0] ? "cartridge_id" : c->cartridge_label[0] ? "cartridge_label" : NULL;
    g->cartridge_start_required = c->chat; /* also for a bound session's request whose cartridge does not route */
    if (!s->carts) {
        if (!param) return 0;
        return frt_api_fail(err, 400, "unsupported_value", param,
                            "this server serves no cartridges (start it with --cartridge-dir DIR)");
    }
    int rc = s->e->cartridge_supported(s->e->self);
    if (rc) {
        if (!param) return 0; /* a static mapping cannot apply to this model */
        frt_api_cartridge_error(err, rc, param);
        return -1;
    }
    char bound[FRT_CARTRIDGE_ID_MAX] = "";
    if (c->session_id) session_cartridge(s, c->session_id, bound, sizeof bound);
    if (c->session_id && !param && !bound[0]) return 0; /* static mappings apply to sessionless requests only */
    /* a session bound to a cartridge routes it by id (needed again only to rebuild a lost state) */
    frt_cart_request q = {param && c->cartridge_id[0] ? c->cartridge_id : !param && bound[0] ? bound : NULL,
                          c->cartridge_label[0] ? c->cartridge_label : NULL, c->model[0] ? c->model : NULL};
    const frt_cartridge *cart = NULL;
    frt_cartreg_entry e;
    rc = frt_cart_store_acquire(s->carts, &q, &cart, &e, j->cart_why, sizeof j->cart_why);
    if (rc < 0 && !param && bound[0]) { /* the session may not need it: its service answers if it does */
        j->cart_why[0] = 0;
        return 0;
    }
    if (rc < 0) {
        frt_api_cartridge_error(err, rc, param ? param : "model");
        return -1;
    }
    if (rc == 0) {
        if (strncmp(j->cart_why, "registry unavailable", 20)) j->cart_why[0] = 0; /* no rule applied: say nothing */
        else frt_server_logf(s, "cartridge fallback to a full prefill: %s", j->cart_why);
        if (!param && bound[0]) j->cart_why[0] = 0; /* the session continues from its own state */
        return 0;
    }
    if (bound[0] && strcmp(e.id, bound)) {
        return frt_api_fail(err, 400, "cartridge_mismatch", param,
                            "session '%s' started from cartridge '%s', not '%s': a session keeps the cartridge it "
                            "started from", c->session_id, bound, e.id);
    }
    fill_request(j, g, cart, &e);
    return 0;
}

char *frt_server_cartridge_metrics(frt_server *s)
{
    frt_cart_residency_stats res;
    frt_service_lock(s->svc);
    frt_registry_cartridge_stats(frt_service_registry(s->svc), &res);
    frt_service_unlock(s->svc);
    return frt_cart_store_metrics_text(s->carts, &res);
}

json_t *frt_server_cartridge_note(const frt_job *j, json_t *o)
{
    json_t *f = json_object_get(o, "frt");
    if (!f || (!j->cart_id[0] && !j->cart_why[0])) return o;
    json_t *n = json_object();
    json_object_set_new(n, "id", j->cart_id[0] ? json_string(j->cart_id) : json_null());
    json_object_set_new(n, "tokens", json_integer(j->cart_tokens));
    if (j->cart_why[0] && !j->cart_id[0]) json_object_set_new(n, "fallback", json_string(j->cart_why));
    json_object_set_new(f, "cartridge", n);
    return o;
}
