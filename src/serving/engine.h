/*
 * serving/engine.h - the engine interface the serving layer is written
 * against: the model layer's mechanism (prefill, sample, decode, capsule
 * snapshot/restore/move, tokenizer, chat formatting) as a table of function
 * pointers, so that the registry, the planner and the server are pure policy
 * over it.
 *
 * Two implementations:
 *   engine_model.c  binds it to frt_model / frt_capsule (include/frt/model.h,
 *                   include/frt/capsule.h), one call each;
 *   engine_fake.c   a deterministic toy model for tests: its state is a hash
 *                   of the token history that also encodes where prefill
 *                   pieces were split (absolute multiples of C, like the real
 *                   prefill) and which tokens were decoded, so any planning
 *                   mistake that breaks exactness changes the generated
 *                   tokens.
 *
 * Every function follows the contract of the model.h / capsule.h call it
 * binds: 0 or a negative frt_status with frt_last_error() set, and on error
 * the live state is untouched. Capsule handles are opaque (`void *`), owned by
 * the caller of snapshot/load and freed with capsule_free.
 *
 * Threading: an engine is used by one thread at a time (the engine thread).
 */
#ifndef FRT_SERVING_ENGINE_H
#define FRT_SERVING_ENGINE_H

#include "frt/grammar.h"
#include "frt/model.h" /* frt_sampling */
#include "frt/serving.h"
#include "text/chat.h" /* frt_chat_request */

#include <stddef.h>
#include <stdint.h>

/* Capsule tiers; the values equal frt_tier of include/frt/capsule.h. */
enum {
    FRT_ENGINE_TIER_DEVICE = 0,
    FRT_ENGINE_TIER_HOST = 1,
    FRT_ENGINE_TIER_DISK = 2,
    FRT_ENGINE_N_TIERS = 3,
};

/* "device", "host", "disk"; "?" otherwise. */
const char *frt_engine_tier_name(int tier);

/* What a capsule holds (a subset of frt_capsule_info). */
typedef struct frt_engine_capsule_info {
    int tier;        /* FRT_ENGINE_TIER_* */
    int position;    /* committed tokens */
    int pending;     /* pending token or -1 */
    size_t bytes;    /* payload bytes */
    uint64_t digest; /* prefix digest of (salt, tokens 0..position-1) */
} frt_engine_capsule_info;

/* Static facts of the loaded model. */
typedef struct frt_engine_facts {
    char model_id[128];   /* the name /v1/models reports */
    char backend[16];     /* "cpu", "cuda", "fake" */
    int vocab_size;
    int max_seq;          /* state capacity in tokens */
    int prefill_chunk;    /* C: prefill splits at absolute multiples of C */
    int n_eos;
    int eos_ids[16];      /* generation stops at these ids */
    uint64_t fingerprint; /* capsules restore only into an engine with the same one */
    int no_logits;        /* 1: the engine has no logits (the fake), so min_p, the penalties, logit_bias
                           * and logprobs are refused */
    int branch_slots;     /* branch slots of the live state (frt/branch.h); 1 = no forks */
    int restore_pipelined; /* 1: a host-tier restore lands beside the next prefill (frt_model_info) */
} frt_engine_facts;

struct frt_engine {
    void *self;
    frt_engine_facts facts;

    /* model.h: frt_model_prefill / sample / decode / reset / seed / position / pending.
     * Sampling is frt_sampling of model.h (NULL = greedy; top_p <= 0 counts as 1 = off). */
    int (*prefill)(void *self, const int32_t *ids, int n);
    int (*sample)(void *self, const frt_sampling *s, int32_t *token);
    int (*decode)(void *self, const frt_sampling *s, int32_t *token);
    int (*reset)(void *self);
    int (*seed)(void *self, uint64_t seed);
    int (*position)(void *self);
    int (*pending)(void *self);

    /* capsule.h: snapshot (path required for the disk tier), restore, load,
     * save, move (path required for the disk tier), info, free. */
    int (*snapshot)(void *self, int tier, const char *path, const void *salt, size_t salt_len, void **cap);
    int (*restore)(void *self, const void *cap);
    /* frt_capsule_restore_prefill: restore cap, then prefill ids [n] (n >= 1),
     * the bytes of the two calls (the model engine's dense cuda backend
     * folds the KV copy into the append). NULL when the engine has none. */
    int (*restore_prefill)(void *self, const void *cap, const int32_t *ids, int n);
    int (*capsule_load)(void *self, const char *path, void **cap);
    int (*capsule_save)(void *self, const void *cap, const char *path);
    int (*capsule_move)(void *self, void *cap, int tier, const char *path);
    int (*capsule_info)(void *self, const void *cap, frt_engine_capsule_info *info);
    void (*capsule_free)(void *self, void *cap);
    /* frt_capsule_set_key; NULL when the engine writes no capsule files it could key. */
    int (*capsule_key)(void *self, const void *key, size_t len);
    /* frt_prefix_digest: the digest capsules carry, for prefix matching. */
    uint64_t (*digest)(void *self, const int32_t *ids, int n, const void *salt, size_t salt_len);

    /* Branches (frt/branch.h), NULL when facts.branch_slots is 1:
     * frt_model_fork of capsule cap into n slots with seed; _branch_sample /
     * _branch_decode step every live branch (tokens[i] = -1 for a stopped
     * one); _branch_stop; _branch_select picks the slot the single-sequence
     * entries act on. */
    int (*fork)(void *self, const void *cap, int n, uint64_t seed);
    int (*branch_sample)(void *self, const frt_sampling *s, int32_t *tokens);
    int (*branch_decode)(void *self, const frt_sampling *s, int32_t *tokens);
    int (*branch_stop)(void *self, int branch);
    int (*branch_select)(void *self, int slot);
    /* The log-probability of token under the selected slot's logits:
     * log_softmax(logits)[token] of the model's raw logits (temperature 1,
     * before top-k / top-p), in double. NULL with the branch entries.
     * FRT_ERR_STATE without logits, FRT_ERR_INVALID_ARGUMENT for a token
     * outside the vocabulary. */
    int (*logprob)(void *self, int32_t token, double *lp);

    /* The logprobs record of the last sampling step that asked for it
     * (frt_model_logprobs, frt/sampling.h). NULL when the engine has no
     * logits (facts.no_logits: the request is refused before). */
    int (*logprobs)(void *self, frt_logprobs *out);
    /* The bytes token id decodes to on its own (frt_tokenizer_token_bytes:
     * owned by the engine's tokenizer, valid while the engine lives). NULL
     * with logprobs. */
    int (*token_bytes)(void *self, int32_t id, const char **bytes, size_t *len);

    /* Grammar-constrained decoding (frt/grammar.h), both NULL when the
     * engine cannot constrain its sampling (the fake engine): grammar_vocab
     * gives the token trie of the model's tokenizer with facts.eos_ids as
     * the end ids (built on the first call, owned by the engine, valid until
     * destroy); token_mask is frt_model_set_token_mask (NULL turns masking
     * off; n_words = ceil(facts.vocab_size / 32)). */
    int (*grammar_vocab)(void *self, const frt_grammar_vocab **out);
    int (*token_mask)(void *self, const uint32_t *allowed, int64_t n_words);

    /* Tokenizer (malloc'd results, the caller frees). */
    int (*tokenize)(void *self, const char *text, size_t len, int32_t **ids, size_t *n);
    int (*detokenize)(void *self, const int32_t *ids, size_t n, char **text, size_t *len);
    /* The chat prompt of req through the model's chat template
     * (text/chat.h): *text / *len the rendered text (frt_chat_format_json)
     * and, when ids is not NULL, *ids / *n its tokens (frt_chat_encode_json:
     * special-token strings inside message content stay text unless
     * req->parse_special_in_content). Errors of those calls;
     * FRT_ERR_UNSUPPORTED when the model has no chat template. Results are
     * malloc'd (the caller frees); NULL on failure. */
    int (*chat_prompt)(void *self, const frt_chat_request *req, char **text, size_t *len, int32_t **ids, size_t *n);

    /* Cartridges (frt/cartridge.h; cart is a const frt_cartridge *, owned
     * by the caller): cartridge_supported is frt_cartridge_supported (0 or
     * FRT_ERR_UNSUPPORTED), cartridge_fingerprint frt_cartridge_model_fingerprint
     * (hashes the weights: call it once). Residency (the registry's device
     * budget): cartridge_bytes the device bytes an upload of cart takes (K
     * and V of every layer in the KV dtype), cartridge_upload
     * frt_cartridge_upload (*resident: an frt_kv_resident), cartridge_inject
     * frt_model_inject_kv_resident (rows 0..T-1, position T; the live state
     * is unchanged on a refusal; from either tier), cartridge_move
     * frt_kv_resident_move to FRT_ENGINE_TIER_DEVICE or _HOST (pinned host
     * memory), cartridge_resident_free.
     * All NULL when the engine takes no cartridges (the fake engine). */
    int (*cartridge_supported)(void *self);
    uint64_t (*cartridge_fingerprint)(void *self);
    size_t (*cartridge_bytes)(void *self, const void *cart);
    int (*cartridge_upload)(void *self, const void *cart, void **resident);
    int (*cartridge_inject)(void *self, const void *resident);
    int (*cartridge_move)(void *self, void *resident, int tier);
    void (*cartridge_resident_free)(void *self, void *resident);

    /* Frees self (and the model when the engine owns it). */
    void (*destroy)(void *self);
};

#endif
