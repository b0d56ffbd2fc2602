/*
 * serving/engine_model.c - the engine interface bound to the model layer:
 * one call of include/frt/model.h or include/frt/capsule.h per entry, plus
 * chat prompts through text/chat.h with the checkpoint's tokenizer and template.
 */
#include "serving/engine.h"

#include "frt/branch.h"
#include "frt/capsule.h"
#include "frt/cartridge.h"
#include "frt/model.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(FRT_ENGINE_TIER_DEVICE == (int)FRT_TIER_DEVICE && FRT_ENGINE_TIER_HOST == (int)FRT_TIER_HOST &&
                   FRT_ENGINE_TIER_DISK == (int)FRT_TIER_DISK,
               "engine tiers mirror frt_tier");

typedef struct bound {
    frt_engine eng;
    frt_model *m;
    int owns;
    float *logits; /* [vocab] scratch of md_logprob */
    frt_grammar_vocab *vocab; /* made by the first md_grammar_vocab */
} bound;

/* The request's sampling, every field (frt/sampling.h), with an unset
 * top_p (0) read as off; NULL = greedy. */
static frt_sampling sampling_of(const frt_sampling *s)
{
    frt_sampling x;
    memset(&x, 0, sizeof x);
    x.top_p = 1.0f;
    if (s) {
        x = *s;
        if (!(s->top_p > 0)) x.top_p = 1.0f;
    }
    return x;
}

static int md_prefill(void *self, const int32_t *ids, int n) { return frt_model_prefill(((bound *)self)->m, ids, n); }

static int md_sample(void *self, const frt_sampling *s, int32_t *token)
{
    frt_sampling x = sampling_of(s);
    return frt_model_sample(((bound *)self)->m, &x, token);
}

static int md_decode(void *self, const frt_sampling *s, int32_t *token)
{
    frt_sampling x = sampling_of(s);
    return frt_model_decode(((bound *)self)->m, &x, token);
}

static int md_logprobs(void *self, frt_logprobs *out) { return frt_model_logprobs(((bound *)self)->m, out); }

static int md_token_bytes(void *self, int32_t id, const char **bytes, size_t *len)
{
    const frt_tokenizer *tok = frt_model_tokenizer(((bound *)self)->m);
    if (!tok) return frt_error(FRT_ERR_UNSUPPORTED, "logprobs: the checkpoint has no tokenizer.json");
    return frt_tokenizer_token_bytes(tok, id, bytes, len);
}

static int md_reset(void *self) { return frt_model_reset(((bound *)self)->m); }
static int md_seed(void *self, uint64_t seed) { return frt_model_seed(((bound *)self)->m, seed); }
static int md_position(void *self) { return frt_model_position(((bound *)self)->m); }
static int md_pending(void *self) { return frt_model_pending(((bound *)self)->m); }

static int md_snapshot(void *self, int tier, const char *path, const void *salt, size_t salt_len, void **cap)
{
    return frt_capsule_snapshot(((bound *)self)->m, (frt_tier)tier, path, salt, salt_len, (frt_capsule **)cap);
}

static int md_restore(void *self, const void *cap) { return frt_capsule_restore(((bound *)self)->m, cap); }

static int md_restore_prefill(void *self, const void *cap, const int32_t *ids, int n)
{
    return frt_capsule_restore_prefill(((bound *)self)->m, cap, ids, n);
}

static int md_capsule_load(void *self, const char *path, void **cap)
{
    return frt_capsule_load(((bound *)self)->m, path, (frt_capsule **)cap);
}

static int md_capsule_key(void *self, const void *key, size_t len)
{
    return frt_capsule_set_key(((bound *)self)->m, key, len);
}

static int md_capsule_save(void *self, const void *cap, const char *path) { return frt_capsule_save(cap, path); }

static int md_capsule_move(void *self, void *cap, int tier, const char *path)
{
    return frt_capsule_move(cap, (frt_tier)tier, path);
}

static int md_capsule_info(void *self, const void *cap, frt_engine_capsule_info *info)
{
    frt_capsule_info ci;
    FRT_TRY(frt_capsule_info_get(cap, &ci));
    info->tier = (int)ci.tier;
    info->position = ci.position;
    info->pending = ci.pending;
    info->bytes = ci.bytes;
    info->digest = ci.prefix_digest;
    return 0;
}

static void md_capsule_free(void *self, void *cap) { frt_capsule_free(cap); }

static uint64_t md_digest(void *self, const int32_t *ids, int n, const void *salt, size_t salt_len)
{
    return frt_prefix_digest(ids, n, salt, salt_len);
}

static int md_tokenize(void *self, const char *text, size_t len, int32_t **ids, size_t *n)
{
    return frt_model_tokenize(((bound *)self)->m, text, len, ids, n);
}

static int md_detokenize(void *self, const int32_t *ids, size_t n, char **text, size_t *len)
{
    size_t l = 0;
    int rc = frt_model_detokenize(((bound *)self)->m, ids, n, text, &l);
    if (!rc && len) *len = l;
    return rc;
}

static int md_grammar_vocab(void *self, const frt_grammar_vocab **out)
{
    bound *b = self;
    const frt_tokenizer *tok = frt_model_tokenizer(b->m);
    if (!tok) return frt_error(FRT_ERR_UNSUPPORTED, "constrained decoding: the checkpoint has no tokenizer.json");
    if (!b->vocab)
        FRT_TRY(frt_grammar_vocab_create(tok, b->eng.facts.eos_ids, b->eng.facts.n_eos, b->eng.facts.vocab_size,
                                         &b->vocab));
    *out = b->vocab;
    return 0;
}

static int md_token_mask(void *self, const uint32_t *allowed, int64_t n_words)
{
    return frt_model_set_token_mask(((bound *)self)->m, allowed, n_words);
}

static int md_chat_prompt(void *self, const frt_chat_request *req, char **text, size_t *len, int32_t **ids,
                          size_t *n)
{
    const frt_tokenizer *tok = frt_model_tokenizer(((bound *)self)->m);
    if (!tok) return frt_error(FRT_ERR_UNSUPPORTED, "chat: the checkpoint has no tokenizer.json");
    FRT_TRY(frt_chat_format_json(tok, req, text, len));
    if (!ids) return 0;
    int rc = frt_chat_encode_json(tok, req, ids, n);
    if (rc) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

/* ---- branches (frt/branch.h) ---- */

static int md_fork(void *self, const void *cap, int n, uint64_t seed)
{
    return frt_model_fork(((bound *)self)->m, cap, n, seed);
}

static int md_branch_sample(void *self, const frt_sampling *s, int32_t *tokens)
{
    frt_sampling x = sampling_of(s);
    return frt_model_branch_sample(((bound *)self)->m, &x, tokens);
}

static int md_branch_decode(void *self, const frt_sampling *s, int32_t *tokens)
{
    frt_sampling x = sampling_of(s);
    return frt_model_branch_decode(((bound *)self)->m, &x, tokens);
}

static int md_branch_stop(void *self, int branch) { return frt_model_branch_stop(((bound *)self)->m, branch); }
static int md_branch_select(void *self, int slot) { return frt_model_branch_select(((bound *)self)->m, slot); }

/* log_softmax(logits)[token] = logits[token] - max - log(sum exp(logits - max)), in double. */
static int md_logprob(void *self, int32_t token, double *lp)
{
    bound *b = self;
    const int V = b->eng.facts.vocab_size;
    if (token < 0 || token >= V) return frt_error(FRT_ERR_INVALID_ARGUMENT, "logprob: token %d outside [0, %d)", token, V);
    FRT_TRY(frt_model_logits(b->m, b->logits));
    double mx = b->logits[0], sum = 0;
    for (int i = 1; i < V; i++)
        if (b->logits[i] > mx) mx = b->logits[i];
    for (int i = 0; i < V; i++) sum += exp((double)b->logits[i] - mx);
    *lp = (double)b->logits[token] - mx - log(sum);
    return 0;
}

static void bind_branches(bound *b, int slots)
{
    frt_engine *e = &b->eng;
    e->facts.branch_slots = slots > 1 && b->logits ? slots : 1;
    if (e->facts.branch_slots == 1) return;
    e->fork = md_fork;
    e->branch_sample = md_branch_sample;
    e->branch_decode = md_branch_decode;
    e->branch_stop = md_branch_stop;
    e->branch_select = md_branch_select;
    e->logprob = md_logprob;
}

static int md_cartridge_supported(void *self) { return frt_cartridge_supported(((bound *)self)->m); }

static uint64_t md_cartridge_fingerprint(void *self)
{
    return frt_cartridge_model_fingerprint(((bound *)self)->m);
}

static size_t md_cartridge_bytes(void *self, const void *cart)
{
    return frt_cartridge_upload_bytes(((bound *)self)->m, (const frt_cartridge *)cart);
}

static int md_cartridge_upload(void *self, const void *cart, void **resident)
{
    return frt_cartridge_upload(((bound *)self)->m, (const frt_cartridge *)cart, FRT_SPACE_DEVICE,
                                (frt_kv_resident **)resident);
}

static int md_cartridge_inject(void *self, const void *resident)
{
    return frt_model_inject_kv_resident(((bound *)self)->m, (const frt_kv_resident *)resident);
}

static int md_cartridge_move(void *self, void *resident, int tier)
{
    return frt_kv_resident_move(((bound *)self)->m, resident,
                                tier == FRT_ENGINE_TIER_DEVICE ? FRT_SPACE_DEVICE : FRT_SPACE_PINNED_HOST);
}

static void md_cartridge_resident_free(void *self, void *resident)
{
    (void)self;
    frt_kv_resident_free(resident);
}

static void md_destroy(void *self)
{
    bound *b = self;
    if (!b) return;
    if (b->owns) frt_model_free(b->m);
    frt_grammar_vocab_free(b->vocab);
    free(b->logits);
    free(b);
}

static int wrap(frt_model *m, int owns, const char *model_id, frt_engine **out)
{
    frt_model_info info;
    FRT_TRY(frt_model_info_get(m, &info));
    bound *b = calloc(1, sizeof *b);
    if (!b) return frt_error(FRT_ERR_OUT_OF_MEMORY, "engine");
    b->m = m;
    b->owns = owns;
    frt_engine *e = &b->eng;
    e->self = b;
    snprintf(e->facts.model_id, sizeof e->facts.model_id, "%s", model_id && *model_id ? model_id : "frt-model");
    snprintf(e->facts.backend, sizeof e->facts.backend, "%s", info.backend == FRT_BACKEND_CUDA ? "cuda" : "cpu");
    e->facts.vocab_size = info.vocab_size;
    e->facts.max_seq = info.max_seq;
    e->facts.prefill_chunk = info.prefill_chunk;
    e->facts.restore_pipelined = info.restore_pipelined;
    e->facts.n_eos = info.n_eos < 16 ? info.n_eos : 16;
    memcpy(e->facts.eos_ids, info.eos_ids, (size_t)e->facts.n_eos * sizeof(int));
    e->facts.fingerprint = frt_model_fingerprint(m);
    e->prefill = md_prefill;
    e->sample = md_sample;
    e->decode = md_decode;
    e->logprobs = md_logprobs;
    e->token_bytes = md_token_bytes;
    e->reset = md_reset;
    e->seed = md_seed;
    e->position = md_position;
    e->pending = md_pending;
    e->snapshot = md_snapshot;
    e->restore = md_restore;
    e->restore_prefill = md_restore_prefill;
    e->capsule_load = md_capsule_load;
    e->capsule_save = md_capsule_save;
    e->capsule_move = md_capsule_move;
    e->capsule_info = md_capsule_info;
    e->capsule_free = md_capsule_free;
    e->digest = md_digest;
    e->tokenize = md_tokenize;
    e->detokenize = md_detokenize;
    e->chat_prompt = md_chat_prompt;
    e->grammar_vocab = md_grammar_vocab;
    e->token_mask = md_token_mask;
    e->destroy = md_destroy;
    e->capsule_key = md_capsule_key;
    e->cartridge_supported = md_cartridge_supported;
    e->cartridge_fingerprint = md_cartridge_fingerprint;
    e->cartridge_bytes = md_cartridge_bytes;
    e->cartridge_upload = md_cartridge_upload;
    e->cartridge_inject = md_cartridge_inject;
    e->cartridge_move = md_cartridge_move;
    e->cartridge_resident_free = md_cartridge_resident_free;
    if (info.branch_slots > 1 && !(b->logits = malloc((size_t)info.vocab_size * sizeof *b->logits))) {
        free(b);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "engine: logits scratch");
    }
    bind_branches(b, info.branch_slots);
    *out = e;
    return 0;
}

int frt_engine_model_create(frt_model *m, frt_engine **out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "engine: NULL argument");
    return wrap(m, 0, NULL, out);
}

int frt_engine_model_open_params(const char *model_dir, const frt_model_params *params, frt_engine **out)
{
    if (!model_dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "engine: NULL argument");
    const frt_model_params p = params ? *params : frt_model_default_params();
    frt_model *m = NULL;
    FRT_TRY(frt_model_load(model_dir, &p, &m));
    /* the model id: the directory's last component */
    const char *end = model_dir + strlen(model_dir);
    while (end > model_dir && end[-1] == '/') end--;
    const char *start = end;
    while (start > model_dir && start[-1] != '/') start--;
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)(end - start), start);
    int rc = wrap(m, 1, id, out);
    if (rc) frt_model_free(m);
    return rc;
}

int frt_engine_model_open(const char *model_dir, const char *backend, int max_seq, int prefill_chunk,
                          int n_threads, int branch_slots, frt_engine **out)
{
    frt_model_params p = frt_model_default_params();
    if (backend && !strcmp(backend, "cuda")) p.backend = FRT_BACKEND_CUDA;
    else if (backend && strcmp(backend, "cpu"))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "engine: backend must be cpu or cuda (got '%s')", backend);
    p.max_seq = max_seq;
    p.prefill_chunk = prefill_chunk;
    p.n_threads = n_threads;
    p.branch_slots = branch_slots;
    return frt_engine_model_open_params(model_dir, &p, out);
}
