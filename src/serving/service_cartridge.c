/*
 * serving/service_cartridge.c - cartridges in the generation loop
 * (service.h frt_gen_request.cartridge, docs/cartridges.md): the session
 * binding checks, the prompt after the cartridge's rows, and the device
 * residency of the cartridge while a request uses it (the registry's
 * CARTRIDGE entries under the device budget shared with capsules).
 */
#include "serving/service_int.h"

#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cartridge refusal of the request: error_param, cartridge_refused, the message. */
__attribute__((format(printf, 4, 5))) static int refuse(frt_gen_run *r, const char *param, int status,
                                                        const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->res->error_param = param;
    r->res->cartridge_refused = 1;
    return frt_error(status, "%s", msg);
}

int frt_gen_cartridge_check(frt_gen_run *r)
{
    const frt_gen_request *rq = r->rq;
    const frt_session *sess = r->sess;
    const int bound = sess->cart.id[0] != 0;
    if (rq->cartridge && !r->s->e->cartridge_inject) {
        r->res->error_param = "cartridge_id";
        return frt_error(FRT_ERR_UNSUPPORTED, "this engine takes no cartridges");
    }
    if ((rq->cartridge || bound) && rq->pin_len) {
        r->res->error_param = "frt_pin_prefix";
        return frt_error(FRT_ERR_UNSUPPORTED, "'frt_pin_prefix' cannot be combined with a cartridge: a prefix capsule "
                                              "holds the cold prefill of prompt tokens, not injected rows");
    }
    if (!rq->cartridge || sess->anonymous) return 0;
    if (bound && rq->cartridge_key != sess->cart.key)
        return refuse(r, "cartridge_id", FRT_ERR_MISMATCH,
                      "session '%s' started from another cartridge (or another version of it): a session keeps the "
                      "cartridge it started from",
                      sess->id);
    if (!bound && (sess->n > 0 || sess->capsule))
        return refuse(r, "cartridge_id", FRT_ERR_MISMATCH,
                      "session '%s' started without a cartridge: a cartridge can only start a session", sess->id);
    return 0;
}

int frt_gen_cartridge_rows(const frt_gen_run *r) { return r->rq->cartridge || r->sess->cart.id[0]; }

/* The prompt's leading tokens that the cartridge states it starts with are
 * dropped (it holds them); a chat prompt must begin with them. */
static int drop_start(frt_gen_run *r, const int32_t *start, int k)
{
    if (k < 1) return 0;
    if (r->n >= k && !memcmp(r->ids, start, (size_t)k * sizeof *r->ids)) {
        memmove(r->ids, r->ids + k, (size_t)(r->n - k) * sizeof *r->ids);
        r->n -= k;
        return r->n > 0 ? 0 : frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt holds nothing after the cartridge's start");
    }
    if (!r->rq->cartridge_start_required) return 0;
    return refuse(r, "messages", FRT_ERR_MISMATCH,
                  "the rendered prompt does not begin with the %d tokens the cartridge starts with (its BOS / system "
                  "header): send the system message the cartridge was made with, or none if it holds none", k);
}

int frt_gen_cartridge_prompt(frt_gen_run *r)
{
    const frt_gen_request *rq = r->rq;
    const frt_session *sess = r->sess;
    const int bound = !sess->anonymous && sess->cart.id[0];
    const int T = bound ? sess->cart.tokens : rq->cartridge_tokens;
    if (T < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generate: a cartridge of %d tokens", T);
    FRT_TRY(bound ? drop_start(r, sess->cart.start, sess->cart.n_start)
                  : drop_start(r, rq->cartridge_start, rq->n_cartridge_start));
    int32_t *all = malloc((size_t)(T + r->n) * sizeof *all);
    if (!all) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
    if (bound && sess->n >= T) memcpy(all, sess->journal, (size_t)T * sizeof *all);
    else for (int i = 0; i < T; i++) all[i] = rq->cartridge_ids ? rq->cartridge_ids[i] : -1;
    memcpy(all + T, r->ids, (size_t)r->n * sizeof *all);
    free(r->ids);
    r->ids = all;
    r->n += T;
    return 0;
}

int frt_gen_cartridge_inject(frt_gen_run *r)
{
    frt_service *s = r->s;
    frt_engine *e = s->e;
    const frt_gen_request *rq = r->rq;
    if (!rq->cartridge)
        return refuse(r, "cartridge_id", FRT_ERR_STATE,
                      "session '%s': its state was lost and its cartridge is not available to rebuild it",
                      r->sess->id);
    const void *resident = NULL;
    int rc = frt_registry_cartridge_acquire(s->reg, rq->cartridge_key, rq->cartridge_name, rq->cartridge,
                                            e->cartridge_bytes(e->self, rq->cartridge), &r->cart_entry, &resident);
    if (!rc) rc = e->cartridge_inject(e->self, resident);
    if (rc) {
        frt_gen_cartridge_release(r);
        r->res->error_param = "cartridge_id";
        r->res->cartridge_refused = 1;
    }
    return rc;
}

void frt_gen_cartridge_release(frt_gen_run *r)
{
    if (r->cart_entry) frt_registry_cartridge_release(r->s->reg, r->cart_entry);
    r->cart_entry = 0;
}
