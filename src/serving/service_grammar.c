/*
 * serving/service_grammar.c - a request's grammar (frt/grammar.h) through
 * the single-sequence decode loop of service.c: before each sampling step
 * the allowed-token mask of the matcher's state goes to the engine
 * (engine.h token_mask, frt_model_set_token_mask: the captured sampling
 * step applies it, no recapture); the token the step produced advances the
 * state; after the request masking is off again.
 */
#include "serving/service_int.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

int frt_gen_grammar_check(const frt_service *s, const frt_gen_request *rq, frt_gen_result *res)
{
    if (!rq->grammar) return 0;
    if (!s->e->token_mask || !s->e->grammar_vocab) {
        res->error_param = rq->grammar_param ? rq->grammar_param : "response_format";
        return frt_error(FRT_ERR_UNSUPPORTED, "'%s' needs constrained decoding, which the %s engine cannot do",
                         res->error_param, s->e->facts.backend);
    }
    if (rq->n > 1 || rq->best_of > 1) {
        res->error_param = "n";
        return frt_error(FRT_ERR_UNSUPPORTED, "constrained decoding ('%s') runs one choice: n and best_of must be 1",
                         rq->grammar_param ? rq->grammar_param : "response_format");
    }
    return 0;
}

int frt_gen_grammar_begin(frt_gen_grammar *gg, frt_engine *e, const frt_gen_request *rq)
{
    memset(gg, 0, sizeof *gg);
    gg->e = e;
    if (!rq->grammar) return 0;
    const frt_grammar_vocab *v = NULL;
    FRT_TRY(e->grammar_vocab(e->self, &v));
    gg->n_words = ((int64_t)e->facts.vocab_size + 31) / 32;
    if (frt_grammar_vocab_size(v) > e->facts.vocab_size)
        return frt_error(FRT_ERR_MISMATCH, "constrained decoding: the tokenizer has %d ids, the model %d",
                         frt_grammar_vocab_size(v), e->facts.vocab_size);
    if (!(gg->mask = malloc((size_t)gg->n_words * sizeof *gg->mask)))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "constrained decoding");
    int rc = frt_grammar_matcher_create(rq->grammar, v, &gg->m);
    if (rc) {
        free(gg->mask);
        gg->mask = NULL;
    }
    return rc;
}

static int mask_write(frt_gen_grammar *gg, int *none);

int frt_gen_grammar_mask(frt_gen_grammar *gg, int *none)
{
    *none = 0;
    if (!gg->m) return 0;
    double t0 = frt_service_now();
    int rc = mask_write(gg, none);
    gg->ms += 1e3 * (frt_service_now() - t0);
    gg->masks += !rc && !*none;
    return rc;
}

static int mask_write(frt_gen_grammar *gg, int *none)
{
    int64_t n = frt_grammar_matcher_mask(gg->m, gg->mask, gg->n_words);
    if (n < 0) return (int)n;
    if (n == 0) {
        if (!frt_grammar_matcher_ended(gg->m))
            return frt_error(FRT_ERR_STATE, "constrained decoding: no token of the vocabulary continues the output "
                                            "(the tokenizer cannot spell what the grammar needs next)");
        *none = 1;
        return 0;
    }
    return gg->e->token_mask(gg->e->self, gg->mask, gg->n_words);
}

int frt_gen_grammar_accept(frt_gen_grammar *gg, int32_t tok)
{
    if (!gg->m) return 0;
    int rc = frt_grammar_matcher_accept(gg->m, tok);
    if (rc) return frt_error(FRT_ERR_STATE, "constrained decoding: the sampled token %d is outside the mask (%s)", tok,
                             frt_last_error());
    return 0;
}

void frt_gen_grammar_end(frt_gen_grammar *gg)
{
    if (!gg->m) return;
    gg->e->token_mask(gg->e->self, NULL, 0);
    frt_grammar_matcher_free(gg->m);
    free(gg->mask);
    memset(gg, 0, sizeof *gg);
}
