/*
 * model/arch.h - the interface between the model runtime (model.c,
 * capsule.c, state.c) and an architecture (src/model/arch/<name>/).
 *
 * An architecture is a table (frt_arch) registered by the model_type values
 * of config.json it runs (src/model/arch/archs.c). The runtime never names
 * an architecture: it looks the table up, lets it check the config, asks it
 * to declare its live state, allocates that state, and has the backend
 * (frt_arch_backend: one per device kind, CPU and CUDA side by side in the
 * architecture's folder) load the weights and record each graph kind.
 *
 * The split follows llama2.c: the config (weights/config.h, fixed
 * hyperparameters), the weights (read-only, owned by the backend) and the
 * state (the declared table below, owned by the runtime, copied by
 * capsules); scratch activations belong to the backend and are outside the
 * state. How to add an architecture: docs/architectures.md.
 */
#ifndef FRT_MODEL_ARCH_H
#define FRT_MODEL_ARCH_H

#include "frt/exec.h"
#include "frt/model.h"
#include "frt/policy.h"
#include "frt/config.h"
#include "frt/safetensors.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define FRT_STATE_NAME_MAX 48
#define FRT_STATE_MAX 512

/* One live state buffer, as an architecture declares it. The buffer holds
 * prod(shape) elements of dtype, contiguous. validity FRT_STATE_ROWS: shape[0]
 * is the position axis (max_seq rows) and a capsule stores rows 0..pos-1;
 * FRT_STATE_WHOLE: a capsule stores the whole buffer. recurrent: the buffer
 * is a fold over the whole prefix (Gated DeltaNet state, convolution
 * window): zero at position 0, so reset zero-fills it. */
typedef struct frt_state_decl {
    char name[FRT_STATE_NAME_MAX];
    frt_dtype dtype;
    int ndim;
    int64_t shape[4];
    frt_state_validity validity;
    int recurrent;
} frt_state_decl;

/* One graph input or output port. A port whose name is also a state
 * buffer's (the logits) is that buffer; any other is allocated by the
 * runtime in device memory, outside the state. */
typedef struct frt_io_decl {
    char name[FRT_STATE_NAME_MAX];
    frt_io_dir dir;
    frt_dtype dtype;
    int ndim;
    int64_t shape[4];
} frt_io_decl;

/* Per-replay arguments the host writes before a replay (the `step` buffer,
 * scratch). Recorded work reads them from the buffer, never from the host. */
typedef struct frt_step_args {
    int32_t n_valid;       /* valid rows of the prefill piece */
    int32_t no_logits;     /* 1: a prefill piece before the last one of its frt_model_prefill call: no
                              LM head, the boundary gets has_logits = 0 */
    frt_sampling sampling; /* of the current request (the sampling kernels read it in place) */
    int32_t mask_on;       /* 1: the sampling step applies the `token_mask` input port (step 3b of
                              frt/sampling.h, frt_model_set_token_mask); 0: it never reads the port */
} frt_step_args;

/* The boundary record: where a token model's state stands. Lives in the
 * `boundary` state buffer (device memory); the decode graph reads and
 * advances it. */
typedef struct frt_boundary {
    int32_t pos;        /* committed tokens */
    int32_t pending;    /* next token to feed, -1 when none */
    int32_t has_logits; /* the logits buffer holds the logits of token pos-1 */
    int32_t reserved;
    uint64_t rng[2];    /* sampler RNG state (rng[0] is the xorshift state, rng[1] the seed) */
} frt_boundary;

/* The episode record of a policy (the runtime appends it to a policy's
 * state as the entry `episode`, whole): the seed of the noise stream and
 * the inferences run since the episode started. The policy graph reads it
 * to draw its noise and advances step. */
typedef struct frt_episode {
    uint64_t seed;
    uint64_t step;
} frt_episode;

/* Per-replay facts of a policy inference, written by the runtime into the
 * `options` input port (i32 [4]) before each replay. */
typedef struct frt_policy_options {
    int32_t n_cameras;   /* camera slots filled in pixel_values / pixel_attention_mask */
    int32_t n_tokens;    /* prompt slots filled in input_ids / attention_mask */
    int32_t noise_given; /* 1: the `noise` port holds the caller's noise; 0: draw it from the episode */
    int32_t reserved;
} frt_policy_options;

/* Classifier-free guidance of a policy inference (frt_policy_set_cfg),
 * written by the runtime into the `cfg` input port (i32 [4]) before each
 * replay. With enable 0 the graph runs the unguided inference, bit for bit
 * what it ran before CFG existed, and leaves the conditioned prefix empty. */
typedef struct frt_policy_cfg_options {
    int32_t enable;        /* 1: guided (two prefixes, two expert passes per step, combined) */
    int32_t n_tokens_cond; /* prompt slots filled in input_ids_cond / attention_mask_cond */
    float beta;            /* guidance weight, >= 1 */
    int32_t reserved;
} frt_policy_cfg_options;

/* Shape keys of the policy graphs: key 1 the unguided inference and the
 * serial CFG (per step the two expert passes one after the other in one
 * task), key 2 the fused batch-2 CFG (slot 0 conditioned, slot 1
 * unconditioned, each with its own x_t; a combine per step writes the
 * guided x into slot 0 and mirrors it into slot 1). */
#define FRT_POLICY_KEY_SERIAL 1
#define FRT_POLICY_KEY_FUSED 2
/* The batched inference of n rollouts (frt_policy_run_batch): key
 * FRT_POLICY_KEY_BATCH | n, n = 1..params.policy_batch (rc->bucket = n).
 * On a backend with policy_batch_on_use, the guided batch is a graph of its
 * own: key FRT_POLICY_KEY_BATCH | FRT_POLICY_KEY_BATCH_CFG | n (rc->bucket
 * = FRT_POLICY_KEY_BATCH_CFG | n, n = 1..params.policy_batch / 2), and with
 * policy_variant the key also holds rc->variant << 16. */
#define FRT_POLICY_KEY_BATCH 0x100
#define FRT_POLICY_KEY_BATCH_CFG 0x200
/* Keys of a backend's per-shape variants (frt_arch_backend.policy_variant). */
#define FRT_POLICY_KEY_VARIANT (1ull << 40)

/* What a backend's record callbacks receive (user pointer of frt_graph_capture). */
typedef struct frt_record_ctx {
    frt_model *m;
    int bucket; /* prefill: the padded length of the variant */
    /* record_policy_batch on a backend with policy_batch_on_use and
     * policy_variant: the variant code of the batch's largest observation
     * (policy_variant of its most cameras and longest prompts), the shape
     * the batch graph runs at; 0 otherwise. */
    int variant;
} frt_record_ctx;

/* The forward pass of one architecture on one kind of device. The record
 * callbacks run inside frt_graph_capture, once per variant, at load;
 * everything that changes between replays must be read from the boundary,
 * step and input buffers by the recorded work, never baked from host values. */
typedef struct frt_arch_backend {
    const char *name;          /* "cpu", "cuda" */
    frt_dtype kv_dtype;        /* dtype of attention KV rows on this backend */
    const char *state_dtypes;  /* for the fingerprint, e.g. "weights=f32,kv=f32,gdn=f32" */
    /* The fingerprint's dtypes with an FP8 E4M3 KV cache (params.kv_dtype
     * FRT_KV_FP8: m->kv_dtype F8_E4M3); NULL: this backend refuses it. */
    const char *state_dtypes_kv_fp8;
    /* 1: load_weights reads FP8 checkpoints (cfg.quant) and honours
     * params.weight_dtype FRT_WEIGHT_FP8 (setting m->weights_desc); 0: the
     * runtime refuses FRT_WEIGHT_FP8 for this backend. */
    int weights_fp8;
    /* 1: load_weights honours params.lm_head_dtype FRT_WEIGHT_FP8 (the LM
     * head quantized per vocabulary row, docs/fp8.md "An FP8 LM head"); 0:
     * the runtime refuses it for this backend. */
    int lm_head_fp8;
    int (*load_weights)(frt_model *m);  /* from m->ckpt; sets m->weight_bytes */
    int (*alloc_scratch)(frt_model *m); /* after the state and the ports exist */
    void (*free)(frt_model *m);         /* weights and scratch; tolerates a partial load */
    frt_record_fn record_prefill;       /* one piece of up to C rows (rc->bucket = padded length), or with
                                           prefill_group a group of j whole pieces (rc->bucket = j * C, j = 2,
                                           4, .. m->G), each row with the bits of its piece alone */
    /* Optional (NULL: no groups): after load_weights, before the state and
     * the ports exist. want: params.prefill_group (0: the backend's
     * default); sets *got to the G it can run, a power of two 1 .. want
     * (want 0: its default; 1 where grouping is off or its load-time check
     * fails). Returns FRT_ERR_UNSUPPORTED when want > 1 is asked and cannot
     * be met (the message says why). */
    int (*prefill_group)(frt_model *m, int want, int *got);
    frt_record_fn record_decode;        /* embed the pending token, layers, logits, sample, advance */
    frt_record_fn record_sample;        /* sample the logits into the pending token */
    /* Optional (NULL: branches decode one after another). The decode step
     * of branch slots 0..n-1 in one graph (rc->bucket = n >= 2): each
     * slot's pending token, journal, KV, logits, advance and sampler are its
     * own (frt_model_bind_slot during the record), the weight-bound products
     * run on the n rows together (the runtime binds slot 0 again after
     * the record). Must give every slot the same bits as
     * record_decode on that slot alone (batch-invariant kernels). Returns
     * FRT_ERR_UNSUPPORTED when it cannot for this load (the runtime then
     * decodes branches one after another). */
    frt_record_fn record_decode_batch;
    /* Optional: called once the branch slots exist (after alloc_scratch,
     * before any capture), e.g. to write tables of the slots' addresses
     * that record_decode_batch's kernels read. */
    int (*slots_ready)(frt_model *m);
    /* Optional: the KV rows 0..rows-1 of slots 0..n-1 now hold the same
     * bytes (a fork of one capsule; rows 0, n 0: no longer, after any
     * restore, reset or injection), so record_decode_batch's attention may
     * stream them once from slot 0 (frt_cuda_attention_batch's d_shared).
     * Called outside any capture; the same bits either way. */
    int (*shared_rows)(frt_model *m, int n, int rows);
    int (*debug_hidden)(frt_model *m, int idx, float *out, int n); /* NULL: unsupported */
    /* A hash of choices made at load that change the arithmetic (GEMM
     * algorithms picked per shape), folded into the fingerprint; may be NULL. */
    uint64_t (*fingerprint_extra)(const frt_model *m);
    /* 1: the recorded work reaches the state through m->state / the
     * architecture's views at replay time, so the runtime can bind another
     * branch slot by pointer (frt/branch.h); 0: branch_slots > 1 is refused. */
    int binds_slots;
    /* 1: record_prefill calls frt_model_layer_wait at the start of every
     * layer, so a host-tier restore may copy the layers' state beside the
     * next append (the pipelined restore, capsule.c); 0: restores copy
     * everything before they return. */
    int layer_waits;
    /* Optional (NULL: frt_capsule_restore_prefill restores, then prefills):
     * the next prefill's first piece (R rows: its bucket) at position rows
     * reads the KV rows 0 .. rows - 1 of layer l from k[l], v[l] (device:
     * a device-tier capsule's kv.l.k / kv.l.v entries) instead of the live
     * cache and writes them into the live cache as it reads them, so that
     * after that piece the live rows hold those bytes (the restore's copy
     * inside the append's attention: docs/model.md "Restore and append in
     * one call"). Returns 1 when it will (the source set), 0 when that piece
     * would not read it (nothing set), < 0 on error. k NULL: no source from
     * now on (called after that prefill, whatever its outcome). */
    int (*kv_source)(frt_model *m, const void *const *k, const void *const *v, int rows, int R);
    /* Policy kind (frt_arch.kind): the whole inference, recorded once (shape
     * key 1); NULL for token models. */
    frt_record_fn record_policy;
    /* Policy kind: the flow-matching steps alone, on the prefix the state
     * holds (warm re-entry, frt_policy_denoise); NULL: not supported. */
    frt_record_fn record_policy_denoise;
    /* Policy kind: 1 when record_policy / record_policy_denoise also record
     * the fused batch-2 CFG variant (rc->bucket = 2, shape key
     * FRT_POLICY_KEY_FUSED, captured at load; a backend with policy_variant
     * encodes the arrangement in its variant codes instead, read from the
     * model's CFG mode, and nothing extra is captured at load); 0: only the
     * serial arrangement. */
    int policy_cfg_fused;
    /* Policy kind, optional (NULL: frt_policy_run_batch is unsupported and a
     * load with params.policy_batch > 0 is refused): the inference of
     * rc->bucket = n rollouts in one graph, rollout r reading row r of the
     * batch_* ports (each holds params.policy_batch rows) and writing row r
     * of batch_actions. The prefix KV of rollout r is batch slot r, or with
     * CFG on (its row of batch_cfg) slots 2r (conditioned) and 2r + 1
     * (unconditioned), in the architecture's batch state entries. Each
     * rollout must give the bits frt_policy_run gives on it alone; a rollout
     * without caller noise draws the episode stream and advances it, in
     * rollout order. */
    frt_record_fn record_policy_batch;
    /* Policy kind, with record_policy_batch: 0: the graphs of keys
     * FRT_POLICY_KEY_BATCH | n are captured at load and read CFG on or off
     * from batch_cfg at replay; 1: the CFG setting is part of the graph (the
     * guided batch is recorded with rc->bucket = n | FRT_POLICY_KEY_BATCH_CFG,
     * the arrangement of the slots fixed at capture) and each batch graph is
     * captured on its first use (the CUDA backend: one capture a rollout
     * count that is run, not 1.5 x params.policy_batch graphs at load). */
    int policy_batch_on_use;
    /* Policy kind, optional (NULL: the graphs of keys 1 and 2 serve every
     * observation). The graph variant of an inference on `in` (its camera
     * and prompt slots; in NULL: the denoise-only graph) with CFG on (cfg
     * 1) or off, as a positive code that record_policy /
     * record_policy_denoise receive as rc->bucket, or 0 for the key-1 / 2
     * graphs captured at load. The runtime captures a variant on its first
     * use under the shape key FRT_POLICY_KEY_VARIANT | code and replays it
     * from then on. */
    int (*policy_variant)(const frt_model *m, const frt_policy_inputs *in, int cfg);
    /* Policy kind, optional (NULL: FRT_ERR_UNSUPPORTED): the nodes (kernels,
     * copies, host tasks) of the inference graph variant that frt_policy_run
     * on `in` replays with CFG on (cfg 1) or off, as captured (>= 1), or
     * FRT_ERR_NO_VARIANT when that variant was not captured yet. */
    int (*policy_graph_nodes)(const frt_model *m, const frt_policy_inputs *in, int cfg);
    /* 1: the backend honours frt_model_params.gemm_autotune / gemm_tune_file
     * (in alloc_scratch, before any capture); 0: a load with
     * gemm_autotune > 0 is refused. */
    int gemm_autotune;
} frt_arch_backend;

/* What the runtime builds around an architecture: a token model (prefill,
 * decode, sampling; the runtime appends tokens, boundary, logits and the
 * sampler's counts to its state) or a policy (frt/policy.h: one inference
 * graph; the runtime appends the boundary record, which stays at position 0,
 * and the episode record, and allocates the ports the architecture
 * declares). */
typedef enum frt_arch_kind { FRT_ARCH_TOKEN = 0, FRT_ARCH_POLICY = 1 } frt_arch_kind;

typedef struct frt_arch {
    const char *name;               /* the folder: "qwen35" */
    const char *const *model_types; /* config.json model_type values it runs, NULL-terminated */
    /* Optional (NULL: none): top-level config.json keys that mark this
     * architecture's checkpoints when model_type is absent (a layout
     * without one, as openpi's for pi0), NULL-terminated. */
    const char *const *layout_keys;
    /* Refuses a config it cannot run (FRT_ERR_UNSUPPORTED, message says why). */
    int (*check_config)(const frt_model_config *c);
    /* Writes the hyperparameters that change the arithmetic or the state
     * layout, for the fingerprint. Returns the length written. */
    int (*describe)(const frt_model_config *c, char *buf, size_t size);
    /* Allocates m->arch_data (may be NULL) from m->cfg. */
    int (*init)(frt_model *m);
    /* Declares the live state of m (max_seq and the backend are known):
     * fills out[0..cap) and returns the count, or a negative status. The
     * runtime appends its own token-model entries (tokens, boundary, logits). */
    int (*declare_state)(const frt_model *m, frt_state_decl *out, int cap);
    /* Called once the runtime has allocated the table, so the architecture
     * can keep its own views (m->state[i] in declaration order). */
    int (*bind_state)(frt_model *m);
    void (*fini)(frt_model *m); /* frees arch_data; NULL-safe */
    /* Fills the family-specific fields of frt_model_info (layer counts). */
    void (*info)(const frt_model *m, frt_model_info *info);
    /* The state entries (indexes into m->state) holding layer l's keys and
     * values [max_seq, n_kv_heads, head_dim], rows. Only for an architecture
     * whose whole positional state is that KV cache (cartridge injection,
     * frt/cartridge.h); NULL otherwise (injection is then refused). */
    int (*kv_layer)(const frt_model *m, int layer, int *k_entry, int *v_entry);
    /* The layer whose forward reads and writes state entry `entry` (an
     * index into m->state), or -1 for an entry no layer owns (the runtime's
     * own among them). Lets a host-tier restore copy the layers' state
     * beside the next append (the pipelined restore, capsule.c; with a
     * backend's layer_waits); NULL: restores copy everything first. */
    int (*state_layer)(const frt_model *m, int entry);
    const frt_arch_backend *cpu;
    const frt_arch_backend *cuda; /* NULL when built without CUDA */

    /* ---- the policy kind (all NULL / 0 for a token model) ---- */
    frt_arch_kind kind;
    /* Reads MODEL_DIR/config.json (a layout the shared parser of
     * frt/config.h does not read), fills the shared fields of m->cfg it can
     * (model_type, vocab_size, hidden_size, n_layers, ...) and allocates
     * m->arch_data. Replaces frt_config_load and init. */
    int (*load_config)(frt_model *m, const char *dir);
    /* Declares the graph ports, like declare_state: the runtime allocates
     * each in device memory, zero-filled (frt/policy.h names the ports the
     * runtime writes: pixel_values, pixel_attention_mask, input_ids,
     * attention_mask, state, noise, options; and reads: actions). */
    int (*declare_io)(const frt_model *m, frt_io_decl *out, int cap);
    /* Fills the shapes of frt/policy.h. */
    void (*policy_info)(const frt_model *m, frt_policy_info *info);
    /* Fills the arithmetic of one inference (frt_policy_cost_get; the
     * counts are checked by the runtime). */
    void (*policy_cost)(const frt_model *m, int cameras, int tokens, frt_policy_cost *out);
} frt_arch;

/* The registered architectures (src/model/arch/archs.c), NULL-terminated. */
extern const frt_arch *const frt_archs[];

/* The architecture that runs model_type, or NULL. */
const frt_arch *frt_arch_find(const char *model_type);

/* The architecture whose layout_keys a config.json object without
 * model_type holds one of (the first registered), or NULL (also for a
 * config with model_type, or config NULL). */
const frt_arch *frt_arch_find_layout(const json_t *config);

#endif /* FRT_MODEL_ARCH_H */
