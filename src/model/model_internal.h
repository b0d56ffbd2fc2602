/*
 * model_internal.h - the frt_model struct shared by the model layer's files:
 * model.c (load, API, orchestration), qwen35_cpu.c (the CPU forward pass),
 * capsule.c (snapshot / restore).
 *
 * Three structs in the llama2.c manner: the config (fixed hyperparameters,
 * config.h), the weights (read-only, loaded once), the state (the closure of
 * named buffers that a capsule copies) plus scratch (outside the closure).
 */
#ifndef FRT_MODEL_INTERNAL_H
#define FRT_MODEL_INTERNAL_H

#include "frt/capsule.h"
#include "frt/exec.h"
#include "frt/model.h"
#include "weights/checkpoint.h"
#include "weights/config.h"
#include "text/tokenizer.h"

#include <stdint.h>

#define FRT_CAPSULE_FORMAT_VERSION 1u

typedef struct frt_model_backend frt_model_backend;

/* The boundary record: the small part of the state that says where the
 * state stands. Lives in the `boundary` buffer (device memory); the decode
 * graph reads and advances it. */
typedef struct frt_boundary {
    int32_t pos;        /* committed tokens */
    int32_t pending;    /* next token to feed, -1 when none */
    int32_t has_logits; /* the logits buffer holds the logits of token pos-1 */
    int32_t reserved;
    uint64_t rng[2];    /* sampler RNG state (rng[0] is the xorshift state, rng[1] the seed) */
} frt_boundary;

/* Per-step arguments written by the host before a replay (scratch). */
typedef struct frt_step_args {
    int32_t n_valid;    /* valid rows of the prefill piece */
    int32_t no_logits;  /* 1: a prefill piece before the last one of its frt_model_prefill
                           call: no LM head, the boundary gets has_logits = 0 */
    float temperature;  /* sampling parameters of the current request */
    int32_t top_k;
    float top_p;
    int32_t reserved2;
} frt_step_args;

/* Weights of one layer, f32, HF Linear layout [out, in]. NULL where the layer
 * type has no such tensor. */
typedef struct frt_layer_weights {
    const float *input_ln;      /* [hidden] zero-centred */
    const float *post_ln;       /* [hidden] zero-centred */
    /* full attention */
    const float *q_proj;        /* [n_heads * head_dim * (1 + gate), hidden] */
    const float *k_proj;        /* [n_kv_heads * head_dim, hidden] */
    const float *v_proj;        /* [n_kv_heads * head_dim, hidden] */
    const float *o_proj;        /* [hidden, n_heads * head_dim] */
    const float *q_norm;        /* [head_dim] zero-centred */
    const float *k_norm;        /* [head_dim] zero-centred */
    /* Gated DeltaNet */
    const float *in_proj_qkv;   /* [2 * nk * dk + nv * dv, hidden] */
    const float *in_proj_z;     /* [nv * dv, hidden] */
    const float *in_proj_b;     /* [nv, hidden] */
    const float *in_proj_a;     /* [nv, hidden] */
    const float *conv1d;        /* [conv_channels, kernel] */
    const float *dt_bias;       /* [nv] */
    const float *A_log;         /* [nv] */
    const float *gdn_norm;      /* [dv] plain weight */
    const float *out_proj;      /* [hidden, nv * dv] */
    /* MLP */
    const float *gate_proj;     /* [intermediate, hidden] */
    const float *up_proj;       /* [intermediate, hidden] */
    const float *down_proj;     /* [hidden, intermediate] */
} frt_layer_weights;

typedef struct frt_weights {
    const float *embed;         /* [vocab, hidden] */
    const float *final_norm;    /* [hidden] zero-centred */
    const float *lm_head;       /* [vocab, hidden] (== embed when tied) */
    frt_layer_weights *layers;  /* [n_layers] */
    void *arena;                /* one allocation holding every f32 tensor */
    size_t bytes;
} frt_weights;

/* Scratch activations for a prefill piece of up to C rows (CPU backend). */
typedef struct frt_scratch {
    float *x;        /* [C, hidden] residual stream */
    float *h;        /* [C, hidden] normed input */
    float *t0, *t1;  /* [C, max_proj] projection outputs */
    float *t2, *t3;  /* [C, max_proj] */
    float *q, *k, *v, *z, *g, *beta, *o; /* per-block temporaries */
    float *sample_scratch; /* [2 * vocab] */
    int32_t *pos;          /* [C] positions of the step's rows */
    float *debug_hidden;   /* [(n_layers + 1), C, hidden] when params.debug_hidden */
    int debug_rows;        /* rows recorded by the last prefill piece */
} frt_scratch;

struct frt_model {
    frt_model_config cfg;
    frt_generation_config gen;
    frt_model_params params;
    int C;            /* prefill chunk */
    int max_seq;
    int n_buckets;
    int buckets[16];

    frt_context *ctx;
    frt_stream *stream;
    frt_checkpoint *ckpt;
    int ckpt_borrowed; /* frt_model_load_checkpoint: the caller closes ckpt */
    frt_tokenizer *tok; /* NULL without tokenizer.json */

    const frt_model_backend *bk;
    void *bk_data;     /* the backend's private data (weights, scratch) */
    frt_weights w;     /* cpu backend weights (w.bytes is set by every backend) */
    frt_scratch s;     /* cpu backend scratch */
    int conv_channels; /* 2 * nk * dk + nv * dv */

    /* The state closure, in a fixed order (capsule buffer table order). */
    int n_state;
    frt_buffer **state;      /* [n_state] */
    frt_buffer **kv_k;       /* [n_layers], NULL for linear layers */
    frt_buffer **kv_v;
    frt_buffer **gdn_state;  /* [n_layers], NULL for full-attention layers */
    frt_buffer **gdn_conv;
    frt_buffer *tokens;      /* [max_seq] i32 */
    frt_buffer *boundary;    /* frt_boundary */

    /* Scratch buffers read by the graphs. */
    frt_buffer *in_ids;      /* [C] i32 prefill piece ids */
    frt_buffer *step;        /* frt_step_args */
    frt_step_args step_last; /* what the step buffer holds (host copy) */
    int step_cached;         /* step_last is valid */
    frt_buffer *logits;      /* [vocab] f32 */

    frt_graph *g_prefill;    /* one variant per bucket (shape key = bucket length) */
    frt_graph *g_decode;     /* one variant, key 1 */
    frt_graph *g_sample;     /* one variant, key 1: sample from logits into pending */

    int task_status;  /* first failure inside a host task (e.g. out of memory), 0 if none */
    uint64_t weights_hash;
    uint64_t fingerprint;

    /* Rollback restore (capsule.c): the serial of the capsule whose
     * positional prefix (KV rows and journal 0..position-1) the live state
     * holds unchanged, because it was snapshotted or restored last and every
     * step since wrote at or past its position; 0 = none. Cleared by reset
     * and by the start of every restore. */
    uint64_t live_capsule;
    frt_restore_stats last_restore; /* what the last successful restore copied */
};

/* Reads the boundary record from its buffer into *b (synchronizes the
 * model's stream). Errors: those of frt_buffer_read / frt_stream_sync. */
int frt_model_boundary_read(frt_model *m, frt_boundary *b);

/* A forward-pass backend of the model layer. model.c owns the state
 * buffers, the graphs and the API; a backend owns its weights and scratch
 * and records the work of a step onto a stream (the record callbacks run
 * inside frt_graph_capture, once per variant, at load). Everything that
 * changes between replays must be read from the boundary, step and in_ids
 * buffers by the recorded work, never baked from host values. */
struct frt_model_backend {
    const char *name;          /* "cpu", "cuda" */
    size_t kv_elem_bytes;      /* bytes per KV cache element: 4 (f32) or 2 (bf16) */
    const char *state_dtypes;  /* for the fingerprint, e.g. "kv=f32,gdn=f32,weights=f32" */
    int (*load_weights)(frt_model *m);   /* sets m->w.bytes */
    int (*alloc_scratch)(frt_model *m);  /* after the state buffers exist */
    void (*free)(frt_model *m);          /* frees weights and scratch; tolerates a partial load */
    frt_record_fn record_prefill;        /* user: frt_record_ctx (bucket = padded length) */
    frt_record_fn record_decode;         /* embed pending, layers, logits, sample, advance */
    frt_record_fn record_sample;         /* sample the logits into pending */
    int (*debug_hidden)(frt_model *m, int idx, float *out, int n); /* NULL: unsupported */
    /* A hash of choices made at load that change the arithmetic (the GEMM
     * algorithms cuBLASLt picked for each shape), folded into the model
     * fingerprint; NULL when there are none. */
    uint64_t (*fingerprint_extra)(const frt_model *m);
};

extern const frt_model_backend frt_qwen35_cpu_backend;  /* qwen35_cpu.c */
#if FRT_HAVE_CUDA
extern const frt_model_backend frt_qwen35_cuda_backend; /* cuda/qwen35_cuda.c */
#endif

typedef struct frt_record_ctx {
    frt_model *m;
    int bucket;
} frt_record_ctx;

/* Loads a model from a checkpoint already in memory (e.g. frt_gen_model_build
 * for benchmarks that cannot afford the disk). ck is borrowed: it must stay
 * open until frt_model_free, and may serve several models. gen NULL: no end-of-sequence ids
 * beyond cfg->eos_token_id, default sampling. No tokenizer. Errors as
 * frt_model_load. */
int frt_model_load_checkpoint(frt_checkpoint *ck, const frt_model_config *cfg, const frt_generation_config *gen,
                              const frt_model_params *params, frt_model **out);

/* Test hook (params.debug_hidden): hidden state idx (0 = embeddings,
 * i = after layer i-1, n_layers + 1 = after the final norm) of the last
 * prefill piece, rows [0, n). */
int frt_model_debug_hidden(frt_model *m, int idx, float *out, int n);

#endif
