/*
 * frt/serving.h - the serving layer: the policy that turns capsules into warm
 * starts (../shared/DESIGN.md section 6, docs/serving.md).
 *
 *   engine   the model layer's mechanism behind one interface
 *            (src/serving/engine.h): the real model (frt_model + frt_capsule)
 *            or a deterministic fake for tests;
 *   server   an OpenAI-compatible HTTP server (libmicrohttpd) with sessions,
 *            fork, rollback, checkpoints and a capsule registry (byte budgets
 *            per tier, pinning, LRU demotion device -> host -> disk, salted
 *            prefix digests, a SQLite index of the disk tier that survives a
 *            restart). One engine thread owns the model; HTTP threads parse,
 *            validate and queue.
 *
 * The registry, the sessions and the planner are internal
 * (src/serving/registry.h, session.h, planner.h, service.h).
 */
#ifndef FRT_SERVING_H
#define FRT_SERVING_H

#include "frt/export.h"
#include "frt/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_engine frt_engine; /* src/serving/engine.h */
typedef struct frt_model frt_model;   /* include/frt/model.h */
struct frt_model_params;              /* include/frt/model.h */
typedef struct frt_server frt_server;

/* ---- engines --------------------------------------------------------------- */

/* The fake engine: a toy model whose state is a hash of the token history
 * (including where prefill pieces were split and which tokens were decoded),
 * byte-level tokenizer (ids 0..255 = bytes, 256 "<|endoftext|>",
 * 257 "<|im_start|>", 258 "<|im_end|>", 259 the merge "th"), greedy tokens
 * in printable ASCII, end-of-sequence ids {258, 256}. It has no logits:
 * sampling with min_p, a penalty, logit_bias or logprobs (frt/sampling.h)
 * fails with FRT_ERR_UNSUPPORTED. */
typedef struct frt_engine_fake_params {
    int max_seq;                  /* state capacity in tokens (4096) */
    int prefill_chunk;            /* C (64) */
    int eos_every;                /* ~1 in eos_every greedy tokens is <|im_end|>; 0 = never (0) */
    size_t capsule_bytes_fixed;   /* reported capsule bytes: fixed + per_token * position (4096) */
    size_t capsule_bytes_per_token; /* (256) */
    int delay_us;                 /* sleep per decode step and per prefill chunk (0) */
    int chatml;                   /* 1: a ChatML chat template (executed by the Jinja engine); 0: no
                                   * template, chat fails FRT_ERR_UNSUPPORTED (1) */
    int chat_tools;               /* 1: the template renders tools and tool calls in the Qwen/Hermes
                                   * format, and chat_template_kwargs.enable_thinking true / false opens /
                                   * closes <think> in the generation prompt; 0: it ignores all three (1) */
    const char *reply;            /* scripted output: when set, the greedy and sampled tokens after each
                                   * prefill are the bytes of reply, then <|im_end|> (not copied: keep it
                                   * alive while the engine lives); NULL = the hashed tokens (NULL) */
    uint64_t model_seed;          /* changes every greedy token and the fingerprint (1) */
} frt_engine_fake_params;

FRT_API frt_engine_fake_params frt_engine_fake_default_params(void);

/* Creates a fake engine. FRT_ERR_INVALID_ARGUMENT for NULL out, max_seq < 1,
 * prefill_chunk < 1. Free with frt_engine_free. */
FRT_API int frt_engine_fake_create(const frt_engine_fake_params *p, frt_engine **out);

/* Loads a checkpoint directory (frt_model_load) and wraps it as an engine
 * that owns the model. backend: "cpu" or "cuda"; max_seq, prefill_chunk,
 * n_threads: 0 = the model's defaults; branch_slots: frt_model_params.
 * branch_slots (0 or 1 = one slot; > 1 lets requests fork into that many
 * branches, refused by backends that cannot bind slots: frt/branch.h).
 * Errors as frt_model_load, and
 * FRT_ERR_UNSUPPORTED when this build has no model layer yet. */
FRT_API int frt_engine_model_open(const char *model_dir, const char *backend, int max_seq, int prefill_chunk,
                                  int n_threads, int branch_slots, frt_engine **out);

/* frt_engine_model_open with every load option: the checkpoint directory
 * loaded with params (frt_model_load: backend, max_seq, prefill_chunk,
 * n_threads, branch_slots, weight_dtype, kv_dtype, kv_scales,
 * gemm_autotune, gemm_tune_file, ...; params NULL = the defaults) and
 * wrapped as an engine that owns the model. Errors as frt_model_load
 * (FRT_ERR_INVALID_ARGUMENT for a NULL model_dir or out), and
 * FRT_ERR_UNSUPPORTED when this build has no model layer yet. */
FRT_API int frt_engine_model_open_params(const char *model_dir, const struct frt_model_params *params,
                                         frt_engine **out);

/* Wraps an already loaded model (not owned: free the engine first, then the
 * model). FRT_ERR_UNSUPPORTED when this build has no model layer yet. */
FRT_API int frt_engine_model_create(frt_model *m, frt_engine **out);

/* Sets the capsule key of the engine's model (frt_capsule_set_key): capsule
 * files carry an HMAC-SHA256 under it and are checked on load.
 *   FRT_ERR_INVALID_ARGUMENT  NULL engine, a bad key length (capsule.h)
 *   FRT_ERR_UNSUPPORTED       an engine without capsule files (the fake engine) */
FRT_API int frt_engine_set_capsule_key(frt_engine *e, const void *key, size_t key_len);

/* Frees an engine (and the model it owns). NULL is a no-op. */
FRT_API void frt_engine_free(frt_engine *e);

/* ---- the HTTP server ---------------------------------------------------------- */

typedef struct frt_server_params {
    const char *host;            /* bind address ("127.0.0.1") */
    int port;                    /* 0 = any free port (see frt_server_port) (8000) */
    const char *capsule_dir;     /* disk tier + its SQLite index; NULL = no disk tier */
    size_t budget_bytes[3];      /* device, host, disk byte budgets (1 GiB, 8 GiB, 64 GiB); the device budget
                                  * also holds the cartridges resident in device memory (docs/cartridges.md) */
    int displace_tier;           /* tier of a displaced hot session's snapshot: 1 = host (1) */
    int auto_capsules;           /* snapshot cold-exact prefixes at their aligned length (1) */
    int queue_size;              /* queued requests before 503 (16) */
    size_t max_body_bytes;       /* larger request bodies get 413 (8 MiB) */
    int max_connections;         /* concurrent HTTP connections (64) */
    int max_connections_per_ip;  /* concurrent connections from one address; 0 = no limit (16) */
    int conn_timeout_s;          /* a connection idle this long (a client that stops sending its
                                  * request, or stops reading its answer) is closed; 0 = never (10) */
    int max_tokens;              /* most tokens one request may generate: a larger max_tokens is a 400,
                                  * an absent one is clamped to it; 0 = no cap (4096) */
    double max_request_s;        /* wall time of one request from its arrival: past it, generation
                                  * stops with finish_reason "length" and frt.time_limited; 0 = none (300) */
    double queue_timeout_s;      /* a request still queued this long after its arrival is answered 503
                                  * queue_timeout with Retry-After; 0 = wait forever (60) */
    const char *api_key;         /* when set, every endpoint but /health needs "Authorization: Bearer KEY"
                                  * (compared in constant time, never logged; 401 otherwise) (NULL) */
    const char *cors_origin;     /* the one Origin (or "*") allowed to call from a browser; requests with
                                  * another Origin header get 403 (NULL: none allowed) */
    const char *const *allowed_hosts; /* loopback binds answer only Host localhost, 127.0.0.1, [::1], the
                                       * bind address and these names (DNS rebinding); other Hosts get
                                       * 403 (NULL) */
    int n_allowed_hosts;
    int parse_special_in_content; /* 0: special-token text inside chat message content is tokenized as
                                   * text, never as control tokens (docs/chat-templates.md); 1: the whole
                                   * rendered prompt is parsed for special tokens, as transformers does (0) */
    const char *cartridge_dir;   /* cartridges (docs/cartridges.md): every frt cartridge directory under it
                                  * is registered at start in its cartridges.sqlite; requests pick one with
                                  * cartridge_id / cartridge_label; NULL = none (a request naming one gets 400) */
    const char *const *cartridge_map; /* "MODEL=ID": requests whose "model" is MODEL get cartridge ID when they
                                       * name none (sessionless requests only) (NULL) */
    int n_cartridge_map;
    int cartridge_cache;         /* cartridges kept loaded in host memory, LRU, 1..1024 (4) */
    /* Optional: called with one line per request and per notable event
     * (from the server's threads; the library never prints). */
    void (*log)(void *user, const char *line);
    void *log_user;
} frt_server_params;

FRT_API frt_server_params frt_server_default_params(void);

/* 1 when host (a bind address: IPv4, IPv6 or "localhost"; NULL or "" = the
 * default 127.0.0.1) is a loopback address. Loopback binds check the Host
 * header; `frt serve` warns on stderr when it binds elsewhere without an
 * api_key. */
FRT_API int frt_host_is_loopback(const char *host);

/* Starts serving `engine` (the server uses it from its engine thread until
 * frt_server_stop; the caller keeps ownership and frees it after the stop).
 * Reopens the capsule dir's index. The strings of p are copied. Every POST
 * needs "Content-Type: application/json" (415 otherwise). Returns 0 and
 * *out, or:
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments, bad host, budgets or sizes,
 *                             negative limits, an empty api_key or cors_origin
 *   FRT_ERR_IO                the capsule dir or its index cannot be opened,
 *                             or the address cannot be bound
 *   FRT_ERR_NOT_FOUND         cartridge_dir is not a directory
 *   FRT_ERR_UNSUPPORTED       cartridge_dir with an engine that takes no
 *                             cartridges (the fake engine)
 *   FRT_ERR_INVALID_ARGUMENT  a cartridge_map entry that is not MODEL=ID */
FRT_API int frt_server_start(frt_engine *engine, const frt_server_params *p, frt_server **out);

/* The bound TCP port (useful with port 0). */
FRT_API int frt_server_port(const frt_server *s);

/* Stops accepting, cancels the running request, joins the engine thread,
 * closes the registry (the disk tier and its index stay). NULL is a no-op. */
FRT_API void frt_server_stop(frt_server *s);

#ifdef __cplusplus
}
#endif
#endif /* FRT_SERVING_H */
