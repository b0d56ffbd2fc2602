/*
 * frt/model.h - the model layer: load a Hugging Face checkpoint directory,
 * hold its live state, prefill, decode, sample.
 *
 * ARCHITECTURES are registered by config.json's model_type (the list:
 * docs/architectures.md); frt_model_info says which one a model runs.
 *
 * THE LIVE STATE is one closed set of named buffers allocated once at load
 * for `max_seq` tokens (rounded up to a multiple of the prefill chunk C). The
 * architecture declares it as a table (frt_model_state_info): each buffer
 * has a name, a dtype, a shape and a validity rule, "rows 0..pos-1" (KV
 * caches, the token journal) or "whole" (recurrent state, convolution
 * windows, the boundary record, the last logits). Capsules copy exactly
 * this table. Scratch activations are outside the state: nothing in them
 * survives a step.
 *
 * INPUTS AND OUTPUTS are named buffers bound to the graphs' ports
 * (frt_model_io_info): a token model reads `ids` [C] i32 (the prefill piece)
 * and `token_mask` [ceil(vocab / 32)] u32 (the allowed-token mask, written
 * only by frt_model_set_token_mask), and writes `logits` [vocab] f32 and
 * `logprobs` (an frt_logprobs record, written by a sampling step that asks
 * for logprobs). frt_model_input_write and frt_model_output_read move bytes
 * through them by name.
 *
 * A COMMITTED BOUNDARY is a position P: tokens 0..P-1 are folded into the
 * state, and `pending` is the token that will be fed next (sampled from the
 * logits of token P-1, not yet in the state), or -1 when none was sampled.
 *
 * PREFILL splits at absolute multiples of the prefill chunk size C, so any
 * split of a prompt into several prefill calls at multiples of C runs the
 * same operations as one call. Each piece replays the captured graph of its
 * padded length bucket; start position and valid length are read from
 * buffers, so one capture serves every position. DECODE is one captured graph
 * that reads the position and the pending token from the boundary record.
 *
 * Threading: a model is used by one thread at a time.
 */
#ifndef FRT_MODEL_H
#define FRT_MODEL_H

#include "frt/exec.h"
#include "frt/sampling.h"
#include "frt/status.h"
#include "frt/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_model frt_model;

/* Progress of a long step of frt_model_load, called on the loading thread:
 * phase "weights" (done / total bytes of checkpoint tensors converted and
 * placed, in checkpoint order across shards), then "capture" (done / total
 * graph variants captured). Called with done == 0 when a phase starts and
 * done == total when it ends. */
typedef void (*frt_progress_fn)(void *user, const char *phase, uint64_t done, uint64_t total);

/* The storage precision of the attention KV cache (docs/fp8.md). */
typedef enum frt_kv_dtype {
    FRT_KV_DEFAULT = 0, /* the backend's: f32 on the cpu backend, bf16 on cuda */
    FRT_KV_FP8 = 1,     /* OCP FP8 E4M3 (state dtype "F8_E4M3"), static per-head scales (kv_scales, the
                           checkpoint's, or 1.0); supported by the dense family on the cpu and cuda
                           backends (others: FRT_ERR_UNSUPPORTED) */
} frt_kv_dtype;

/* The precision of the weights (docs/fp8.md "FP8 weights"). */
typedef enum frt_weight_dtype {
    FRT_WEIGHT_DEFAULT = 0, /* the checkpoint's: float tensors in the backend's precision (f32 on cpu, bf16 on
                               cuda); an FP8 checkpoint (config.json quantization_config) with its scales */
    FRT_WEIGHT_FP8 = 1,     /* every decoder-layer Linear weight (q/k/v/o, gate/up/down; the hybrid's
                               in_proj_qkv/z/b/a and out_proj too) not already FP8 is quantized at load
                               to OCP E4M3 with one scale per output channel, max|row| / 448; embedding,
                               lm_head, norms and biases keep the backend's precision. The dense family
                               and the qwen3_5 hybrid: cpu (an emulation: the forward multiplies by the
                               dequantized values) and cuda (E4M3 codes + per-channel scales: the E4M3
                               decode GEMV, prefill through the cuBLASLt FP8 GEMM on per-token
                               activations; docs/fp8.md); policies: FRT_ERR_UNSUPPORTED */
} frt_weight_dtype;

typedef struct frt_model_params {
    frt_backend backend; /* FRT_BACKEND_CPU (default) or FRT_BACKEND_CUDA; another value: FRT_ERR_INVALID_ARGUMENT */
    int device;          /* device index for cuda (default 0); the cpu backend has device 0 only (another:
                            FRT_ERR_NO_DEVICE) */
    int max_seq;         /* state capacity in tokens; 0 = min(config max, 8192); rounded up to C. A policy
                            (frt/policy.h): its prompt capacity, 1..4096 tokens (more: FRT_ERR_UNSUPPORTED);
                            0 = 48 (pi0) or 200 (pi05), docs/policies.md */
    int prefill_chunk;   /* C: a multiple of 64; 0 = FRT_DEFAULT_PREFILL_CHUNK. A policy runs no prefill
                            pieces: non-zero there is FRT_ERR_INVALID_ARGUMENT */
    int n_threads;       /* > 0: the host's OpenMP and OpenBLAS thread counts, set at load (process-wide: the
                            last model opened with n_threads > 0 sets them; the cpu backend's products, and on
                            cuda the host-side work of the load); 0 = leave them (all cores, or OMP_NUM_THREADS
                            / OPENBLAS_NUM_THREADS); < 0 or > 4096: FRT_ERR_INVALID_ARGUMENT */
    int debug_hidden;    /* test hook: record per-layer hidden states of the last prefill piece
                            (frt_model_debug_hidden, frt/debug.h); a backend that records none (the pi0
                            policy's): FRT_ERR_UNSUPPORTED */
    int branch_slots;    /* B copies of the live state for forks (frt/branch.h); 0 = 1. A policy has no
                            token branches: B > 1 there is FRT_ERR_INVALID_ARGUMENT */
    frt_kv_dtype kv_dtype; /* KV cache precision; FRT_KV_DEFAULT (0) = the backend's */
    frt_weight_dtype weight_dtype; /* weight precision; FRT_WEIGHT_DEFAULT (0) = the checkpoint's */
    const char *kv_scales; /* with FRT_KV_FP8: a file of static per-head scales (frt/kv_scales.h, written by
                              frt_model_kv_calibrate / frt calibrate); NULL = the checkpoint's k_scale /
                              v_scale (or older k_proj.output_scale / kv_scale) when config.json has a
                              kv_cache_scheme (docs/fp8.md), else 1.0; a
                              file wins over the checkpoint's scales. Given without FRT_KV_FP8:
                              FRT_ERR_INVALID_ARGUMENT; a file that does not fit the model: FRT_ERR_FORMAT */
    frt_progress_fn progress; /* optional: load progress (above); NULL = none */
    void *progress_user;
    int policy_batch;    /* policy kind: batch slots for frt_policy_run_batch (frt/policy.h); 0 = none; outside
                            0..FRT_POLICY_BATCH_MAX or given to a token model: FRT_ERR_INVALID_ARGUMENT; a
                            backend without the batched graph: FRT_ERR_UNSUPPORTED */
    frt_context *context; /* optional: run in this context, shared with other models (e.g. a planner LLM
                             beside a robot policy, frt/rollout.h); borrowed: it must outlive the model
                             and be of `backend` and `device`. Its default stream becomes the model's
                             stream, so the models' work is ordered on it; drive them from one thread,
                             or let one call run at a time (frt serve's turn lock, docs/policy-server.md).
                             NULL (default) = the model creates and owns a context of its own */
    int gemm_autotune;   /* cuda backends that take it (the pi0 / pi05 policy: every GEMM shape its graphs
                            capture; the LLM families: the prefill buckets below the chunk C, i.e. appends,
                            since a prefill group's plans run the C-row plans' algorithms; cpu:
                            FRT_ERR_UNSUPPORTED when > 0): N > 0 times up to N of cuBLASLt's ranked
                            algorithms for each of those shapes and keeps the fastest (docs/kernels-cuda.md
                            "GEMM autotune"); 0
                            (default) = the heuristic's first choice; < 0 or > 64: FRT_ERR_INVALID_ARGUMENT */
    const char *gemm_tune_file; /* with gemm_autotune > 0: the choice file; when it exists it is loaded and nothing
                                   is timed (a file from another device or cuBLASLt version: FRT_ERR_STATE), else
                                   the autotune runs and saves it there. NULL = time at every load, save nothing */
    int prefill_group;   /* G: the most prefill pieces of C tokens one graph replay runs (docs/architectures.md
                            "Prefill groups"): a prefill that starts at a multiple of C runs its whole pieces in
                            groups of 2, 4, .. G, each product once over the group's rows, every row with the
                            bits of its own piece (checked on the device at load). 0 = the backend's default
                            (up to 8 pieces and 2048 rows, i.e. 8 at C = 256 and 1 from C = 2048, on the cuda
                            backends of the dense family and of the hybrid qwen35, bf16 or per-channel FP8
                            weights, where the load-time check passes; 1 elsewhere); 1 = off;
                            a power of two 2..64 where the backend groups (those two cuda backends, without
                            debug_hidden or block-wise FP8 weights), else FRT_ERR_UNSUPPORTED; other values
                            FRT_ERR_INVALID_ARGUMENT. Capped at max_seq / C */
    frt_weight_dtype lm_head_dtype; /* the LM head's precision (docs/fp8.md "An FP8 LM head"):
                            FRT_WEIGHT_DEFAULT (0) = the backend's (f32 on cpu, bf16 on cuda), or
                            FRT_WEIGHT_FP8: the lm_head (a tied model's embedding matrix: a copy; the
                            embedding lookup keeps its precision) quantized at load to OCP E4M3 with one
                            scale per vocabulary row, max|row| / 448, whatever weight_dtype is; the
                            logits are the products with the dequantized values (cuda: the E4M3 decode
                            GEMV on bf16 activations). The dense family and the qwen3_5 hybrid, cpu and
                            cuda; a policy or another backend: FRT_ERR_UNSUPPORTED; not an
                            frt_weight_dtype: FRT_ERR_INVALID_ARGUMENT */
} frt_model_params;

#define FRT_DEFAULT_PREFILL_CHUNK 256

/* Defaults: cpu backend, device 0, max_seq 0, prefill_chunk 0, n_threads 0, branch_slots 0 (= 1),
 * policy_batch 0, gemm_autotune 0, gemm_tune_file NULL, prefill_group 0, lm_head_dtype FRT_WEIGHT_DEFAULT. */
FRT_API frt_model_params frt_model_default_params(void);

/* Static facts about a loaded model. */
typedef struct frt_model_info {
    char model_type[32];  /* config.json's model_type, e.g. "qwen3_5_text" */
    char arch[32];        /* the architecture that runs it, e.g. "qwen35" (docs/architectures.md) */
    int vocab_size;       /* logits length */
    int hidden_size, n_layers;
    int n_full_layers;    /* layers with full (softmax) attention and a KV cache */
    int n_linear_layers;  /* layers with a recurrent mixer (Gated DeltaNet); 0 for dense models */
    int n_state;          /* buffers in the state table (frt_model_state_info) */
    int n_io;             /* graph ports (frt_model_io_info) */
    int max_seq;          /* state capacity, a multiple of prefill_chunk */
    int prefill_chunk;    /* C */
    int n_buckets;        /* prefill length buckets, ascending, the last = C */
    int buckets[16];
    int n_eos;            /* end-of-sequence ids from generation_config.json */
    int eos_ids[16];
    size_t weight_bytes;  /* bytes of weights held by the backend */
    size_t state_bytes;   /* bytes of the live state closure at full capacity */
    int branch_slots;     /* B: copies of the live state (frt/branch.h) */
    size_t branch_state_bytes; /* bytes of all B copies (state_bytes * B) */
    int branch_batched;   /* a fork of 2..branch_batched live branches decodes in one batched graph
                             (weights read once per step); 0: branches decode one after another */
    frt_backend backend;
    int has_tokenizer;    /* tokenizer.json was found and loaded */
    int prefill_group;    /* G in effect (frt_model_params.prefill_group; 1: every piece on its own) */
    int restore_pipelined; /* 1: a full host-tier restore lands beside the next append (frt/capsule.h) */
} frt_model_info;


/* The validity rule of a state buffer: what a capsule stores of it. */
typedef enum frt_state_validity {
    FRT_STATE_WHOLE = 0, /* the whole buffer (recurrent state, conv window, boundary, logits) */
    FRT_STATE_ROWS = 1,  /* rows 0..pos-1 of row_bytes each (KV caches, the token journal) */
} frt_state_validity;

/* One buffer of the live state table. Strings are owned by the model. */
typedef struct frt_state_info {
    const char *name;   /* e.g. "kv.3.k", "gdn.0.state", "tokens", "boundary", "logits" */
    const char *dtype;  /* "F32", "BF16", "I32", "U8", "F8_E4M3" (safetensors names) */
    int ndim;
    int64_t shape[4];   /* ROWS: shape[0] = max_seq */
    frt_state_validity validity;
    size_t bytes;       /* the whole buffer */
    size_t row_bytes;   /* ROWS: bytes per position; WHOLE: bytes */
    int recurrent;      /* 1: a fold over the whole prefix, zeroed by frt_model_reset */
} frt_state_info;

typedef enum frt_io_dir { FRT_IO_INPUT = 0, FRT_IO_OUTPUT = 1 } frt_io_dir;

/* One graph port. Strings are owned by the model. */
typedef struct frt_io_info {
    const char *name;  /* "ids", "logits" */
    frt_io_dir dir;
    const char *dtype;
    int ndim;
    int64_t shape[4];
    size_t bytes;
    int in_state;      /* 1: the port is a state buffer (the logits) */
} frt_io_info;

/* Loads a checkpoint directory (config.json, *.safetensors (+ index),
 * generation_config.json, tokenizer.json when present), allocates the live
 * state and captures the prefill and decode graphs.
 * Returns 0 and *out (free with frt_model_free), or:
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments, backend not an frt_backend, prefill_chunk not a
 *                             multiple of 64, a params.context of another backend or device,
 *                             branch_slots outside 0..FRT_MAX_BRANCH_SLOTS (frt/branch.h),
 *                             kv_dtype not an frt_kv_dtype, weight_dtype or lm_head_dtype not an
 *                             frt_weight_dtype, a policy given prefill_chunk or branch_slots > 1, a token model
 *                             given policy_batch (the other fields' errors: at each field)
 *   FRT_ERR_IO / FRT_ERR_FORMAT  unreadable or malformed files (message names the file)
 *   FRT_ERR_UNSUPPORTED       a model_type no registered architecture runs, a config the
 *                             architecture refuses, a backend not built, kv_dtype
 *                             FRT_KV_FP8, weight_dtype or lm_head_dtype FRT_WEIGHT_FP8 on an
 *                             architecture / backend without it, an FP8 checkpoint layout it does not read,
 *                             debug_hidden on a backend that records no hidden states
 *   FRT_ERR_NOT_FOUND         a required tensor is missing (message names it)
 *   FRT_ERR_OUT_OF_MEMORY     weights or state do not fit (branch slots: checked against the
 *                             device's free memory before they are allocated)
 *   FRT_ERR_NO_DEVICE         cuda requested without a device (or without device `device`),
 *                             device != 0 on the cpu backend */
FRT_API int frt_model_load(const char *model_dir, const frt_model_params *params, frt_model **out);

/* The name of the registered architecture that runs config.json's
 * model_type (e.g. "qwen35" for "qwen3_5_text"), or NULL when none does (a
 * load would be refused with FRT_ERR_UNSUPPORTED). Static storage. */
FRT_API const char *frt_model_type_arch(const char *model_type);

/* Frees the model, its state and graphs. NULL is a no-op. */
FRT_API void frt_model_free(frt_model *m);

/* Fills *info. FRT_ERR_INVALID_ARGUMENT on NULL. */
FRT_API int frt_model_info_get(const frt_model *m, frt_model_info *info);

/* The live state table: buffer i (0 <= i < info.n_state) into *out, in
 * capsule order. FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_OUT_OF_RANGE (i). */
FRT_API int frt_model_state_info(const frt_model *m, int i, frt_state_info *out);

/* The graph ports: port i (0 <= i < info.n_io) into *out.
 * FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_OUT_OF_RANGE (i). */
FRT_API int frt_model_io_info(const frt_model *m, int i, frt_io_info *out);

/* Copies bytes into input port `name` (offset 0) on the model's stream and
 * waits for it. The next replay reads it.
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments
 *   FRT_ERR_NOT_FOUND         no input port of that name
 *   FRT_ERR_OUT_OF_RANGE      bytes larger than the port */
FRT_API int frt_model_input_write(frt_model *m, const char *name, const void *data, size_t bytes);

/* Copies the first `bytes` of output port `name` to host memory.
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments
 *   FRT_ERR_NOT_FOUND         no output port of that name
 *   FRT_ERR_OUT_OF_RANGE      bytes larger than the port */
FRT_API int frt_model_output_read(frt_model *m, const char *name, void *out, size_t bytes);

/* The execution context the model runs on (owned by the model). */
FRT_API frt_context *frt_model_context(frt_model *m);

/* Where sampling leaves its token on the device: *buf is the boundary
 * record's buffer (owned by the model, valid until frt_model_free; with
 * branch slots, the selected slot's) and the pending token, the id the last
 * frt_model_sample / frt_model_decode step sampled (i32; -1 when none),
 * is the 4 bytes at byte *offset of it. The next decode step overwrites
 * them, so a consumer copies them right after the step, on the model's
 * stream (frt_context_stream(frt_model_context(m))): a stream-ordered
 * frt_buffer_copy into another buffer of the same context moves the token
 * with no host round trip (the planner -> actor hand-off of frt/rollout.h).
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments
 *   FRT_ERR_UNSUPPORTED       a policy (it samples no tokens) */
FRT_API int frt_model_sampled_token(frt_model *m, frt_buffer **buf, size_t *offset);

/* Text <-> ids through the checkpoint's tokenizer. *ids / *text are
 * malloc'd and owned by the caller (free()). FRT_ERR_STATE when the
 * checkpoint has no tokenizer.json; FRT_ERR_OUT_OF_RANGE for an id outside
 * the vocabulary (detokenize). */
FRT_API int frt_model_tokenize(const frt_model *m, const char *text, size_t len, int32_t **ids, size_t *n_ids);
FRT_API int frt_model_detokenize(const frt_model *m, const int32_t *ids, size_t n_ids, char **text, size_t *len);

/* The checkpoint's tokenizer (owned by the model, valid until
 * frt_model_free), or NULL when it has no tokenizer.json or m is NULL. The
 * server renders chat requests with it (src/text/chat.h). */
FRT_API const frt_tokenizer *frt_model_tokenizer(const frt_model *m);

/* One chat message; role is "system", "user" or "assistant". */
typedef struct frt_chat_turn {
    const char *role;
    const char *content; /* UTF-8 */
} frt_chat_turn;

/* Formats n >= 1 messages by executing the checkpoint's chat template
 * (frt's Jinja engine, rendering as transformers' apply_chat_template does;
 * docs/chat-templates.md), ending with the assistant turn's opening when
 * add_generation_prompt. *text is malloc'd, NUL-terminated, owned by the
 * caller (free()).
 *   FRT_ERR_UNSUPPORTED       no tokenizer.json, no template, or a template
 *                             using a construct the engine does not support
 *                             ("unsupported chat template: line L, column C: ...")
 *   FRT_ERR_INVALID_ARGUMENT  NULL arguments, n < 1, a conversation the
 *                             template rejects (its raise_exception message)
 *   FRT_ERR_OUT_OF_RANGE      the template hit a rendering limit (output size,
 *                             steps, nesting) */
FRT_API int frt_model_chat_format(const frt_model *m, const frt_chat_turn *msgs, int n, int add_generation_prompt,
                          char **text);

/* Appends n tokens to the state (prefill at positions pos..pos+n-1, split at
 * absolute multiples of C) and computes the logits of the last one. Any
 * pending token is dropped (the caller decides what comes next). A prefill
 * starts a new request: the generated-token counts of the frequency and
 * presence penalties are zeroed; the tokens are marked seen (repetition
 * penalty, frt/sampling.h).
 * On error nothing is changed (the state is validated before any work):
 *   FRT_ERR_INVALID_ARGUMENT  NULL ids with n > 0, n < 1
 *   FRT_ERR_OUT_OF_RANGE      an id outside [0, vocab_size), or pos + n > max_seq */
FRT_API int frt_model_prefill(frt_model *m, const int32_t *ids, int n);

/* Checks *s against the ranges of frt/sampling.h for a vocabulary of
 * `vocab` tokens. 0, or FRT_ERR_INVALID_ARGUMENT (NULL, or the first field
 * out of range, named in the message). */
FRT_API int frt_sampling_check(const frt_sampling *s, int vocab);

/* Samples the next token from the current logits with *s (NULL = greedy),
 * through the sampling step of frt/sampling.h (bias, penalties from the
 * state's counts, min_p, top-k, top-p), stores it as the pending token and
 * returns it in *token. When s->logprobs, the step also writes the
 * `logprobs` port (frt_model_logprobs).
 *   FRT_ERR_STATE             no logits (nothing prefilled or decoded since
 *                             the last reset or restore)
 *   FRT_ERR_INVALID_ARGUMENT  *s out of range (frt_sampling_check)
 * On error nothing is changed. */
FRT_API int frt_model_sample(frt_model *m, const frt_sampling *s, int32_t *token);

/* One decode step: feeds the pending token at the current position (one
 * replay of the decode graph; the token counts as generated, frt/sampling.h),
 * computes the logits, samples the next pending token with *s (NULL =
 * greedy) as frt_model_sample does and returns it in *token.
 *   FRT_ERR_STATE             no pending token (decode before prefill + sample)
 *   FRT_ERR_OUT_OF_RANGE      the state is full (pos == max_seq)
 *   FRT_ERR_INVALID_ARGUMENT  *s out of range (frt_sampling_check)
 * On error nothing is changed. */
FRT_API int frt_model_decode(frt_model *m, const frt_sampling *s, int32_t *token);

/* The logprobs of the last sampling step (frt_model_sample, frt_model_decode
 * or the last step of frt_model_generate) into *out (frt/sampling.h says
 * which distribution). FRT_ERR_INVALID_ARGUMENT (NULL); FRT_ERR_STATE when
 * that step did not ask for logprobs, or a prefill, reset or restore came
 * after it. */
FRT_API int frt_model_logprobs(frt_model *m, frt_logprobs *out);

/* Sets the allowed-token mask of the sampling steps that follow (step 3b of
 * frt/sampling.h: after the bias and the penalties, before min_p, top-k,
 * top-p, the draw and the logprobs): token j may be sampled only when bit
 * j % 32 of allowed[j / 32] is set; every other token's adjusted logit is
 * -inf, so the step samples and reports logprobs over the allowed set,
 * renormalised. allowed: n_words = ceil(vocab / 32) u32 words, host memory,
 * copied into the `token_mask` input port before this returns (the caller
 * keeps ownership; bits past vocab are ignored). allowed = NULL turns
 * masking off (n_words is then ignored). The mask stays in force for every
 * frt_model_sample / frt_model_decode / frt_model_generate step (and every
 * branch, frt/branch.h) until the next call; prefill, reset and capsule
 * restore leave it as it is: it is a per-step input, not state (capsules do
 * not carry it). Switching it on or off changes one flag in the step
 * record: no recapture; with no mask the sampling step does no mask work.
 *   FRT_ERR_INVALID_ARGUMENT  NULL m; n_words != ceil(vocab / 32); a mask
 *                             that allows no token below vocab ("mask
 *                             allows no token")
 * On error the mask in force is unchanged. */
FRT_API int frt_model_set_token_mask(frt_model *m, const uint32_t *allowed, int64_t n_words);

/* Called with each generated token; return nonzero to stop. */
typedef int (*frt_token_cb)(int32_t token, void *user);

typedef struct frt_generate_params {
    frt_sampling sampling;
    int max_tokens;  /* >= 1 */
    int ignore_eos;  /* 1: do not stop at the end-of-sequence ids */
} frt_generate_params;

/* Generates up to max_tokens tokens after the current boundary: samples from
 * the current logits, then decode steps. Each generated token is committed
 * (fed into the state) before the next is produced, except the last, which
 * stays pending. Stops at an end-of-sequence id (reported to the callback,
 * then left pending) unless ignore_eos, or when the callback returns nonzero.
 * *n_out (optional) receives the number of tokens generated. With
 * p->sampling.logprobs, frt_model_logprobs called from the callback reports
 * the token the callback was just given.
 * Errors as frt_model_sample / frt_model_decode. */
FRT_API int frt_model_generate(frt_model *m, const frt_generate_params *p, frt_token_cb cb, void *user, int *n_out);

/* Empties the state: position 0, no pending token, no logits, no seen or
 * generated tokens (frt/sampling.h). Buffers keep
 * their bytes until overwritten (nothing reads past the position). */
FRT_API int frt_model_reset(frt_model *m);

/* Seeds the sampler RNG in the boundary record. */
FRT_API int frt_model_seed(frt_model *m, uint64_t seed);

/* The current position (committed tokens), or a negative status. */
FRT_API int frt_model_position(const frt_model *m);

/* The pending token, or -1 when none. */
FRT_API int frt_model_pending(const frt_model *m);

/* Copies the committed token ids 0..pos-1 into ids (room for pos). */
FRT_API int frt_model_tokens(const frt_model *m, int32_t *ids, int cap);

/* Copies the current logits [vocab_size] f32 to host memory.
 * FRT_ERR_STATE when there are none. */
FRT_API int frt_model_logits(frt_model *m, float *out);

/* The largest multiple of C not above pos. */
FRT_API int frt_model_aligned_len(const frt_model *m, int pos);

#ifdef __cplusplus
}
#endif
#endif /* FRT_MODEL_H */
