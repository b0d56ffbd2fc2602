/*
 * model_internal.h - the frt_model struct shared by the runtime's files:
 * model.c (load, API, orchestration), state.c (the declared state table and
 * the graph ports), capsule.c (snapshot / restore), and by the
 * architectures' backends (src/model/arch/<name>/), which read the config,
 * the state entries and the ports from it. The architecture interface is
 * model/arch.h.
 */
#ifndef FRT_MODEL_INTERNAL_H
#define FRT_MODEL_INTERNAL_H

#include "frt/capsule.h"
#include "frt/debug.h"
#include "frt/exec.h"
#include "frt/model.h"
#include "model/arch.h"
#include "frt/tokenizer.h"
#include "frt/checkpoint.h"
#include "frt/config.h"

#include <stdint.h>

/* 2: the state is the architecture's declared table (the first version
 * listed the hybrid's buffers by name); version 1 files are refused.
 * 3: the table ends with the sampler's penalty counts (sampler.counts,
 * sampler.seen) and the step record carries the full frt_sampling; version
 * 2 files are refused (they lack the counts a penalised continuation
 * needs). */
#define FRT_CAPSULE_FORMAT_VERSION 3u

/* One allocated entry of the live state table. */
typedef struct frt_state_entry {
    frt_state_decl decl;
    frt_buffer *buf;
    size_t bytes;     /* the whole buffer */
    size_t row_bytes; /* ROWS: bytes per position */
} frt_state_entry;

/* One graph port. */
typedef struct frt_io_entry {
    frt_io_decl decl;
    frt_buffer *buf;  /* a state buffer (in_state) or owned by the port */
    size_t bytes;
    int in_state;
    int api_only;     /* written only through its checked API call (token_mask: frt_model_set_token_mask) */
} frt_io_entry;

struct frt_model {
    frt_model_config cfg;
    frt_generation_config gen;
    frt_model_params params;
    int C;            /* prefill chunk */
    int G;            /* prefill group: the most whole pieces one replay runs (1: none; a power of two) */
    int max_seq;
    int n_buckets;
    int buckets[16];

    frt_context *ctx;
    int ctx_borrowed;  /* params.context: the caller's (shared) context, not destroyed with the model */
    frt_stream *stream;
    frt_checkpoint *ckpt;
    int ckpt_borrowed; /* frt_model_load_checkpoint: the caller closes ckpt */
    frt_tokenizer *tok; /* NULL without tokenizer.json */

    const frt_arch *arch;
    const frt_arch_backend *bk;
    frt_dtype kv_dtype;  /* the KV cache's: bk->kv_dtype, or F8_E4M3 for params.kv_dtype FRT_KV_FP8 */
    void *arch_data;     /* the architecture's per-model data (views of the state, config-derived sizes) */
    void *bk_data;       /* the backend's private data (weights, scratch) */
    size_t weight_bytes; /* bytes of weights held by the backend */
    /* Set by load_weights when some weights are FP8 (a static string such as
     * "weights=f8_e4m3,scale=per-channel,at-load"), folded into the
     * fingerprint; NULL: the backend's state_dtypes say it all. */
    const char *weights_desc;

    /* The live state table, in declaration order (capsule buffer order):
     * the architecture's entries, then tokens, boundary, logits,
     * sampler.counts, sampler.seen. */
    int n_state;
    frt_state_entry *state;
    frt_buffer *tokens;      /* [max_seq] i32, the token journal (a state entry) */
    frt_buffer *boundary;    /* frt_boundary (a state entry) */
    frt_buffer *logits;      /* [vocab] f32 (a state entry and the `logits` output port) */
    frt_buffer *counts;      /* [vocab] i32: times each token was generated since the last prefill */
    frt_buffer *seen;        /* [vocab] u8: 1 for each token committed since the last reset */

    /* Graph ports. */
    int n_io;
    frt_io_entry *io;
    frt_buffer *in_ids;      /* the `ids` input port: [C] i32 prefill piece ids */
    frt_buffer *out_logprobs; /* the `logprobs` output port: one frt_logprobs */
    frt_buffer *in_mask;     /* the `token_mask` input port: [ceil(vocab / 32)] u32 allowed-token bits */
    int mask_on;             /* frt_model_set_token_mask set a mask: sampling steps write step.mask_on = 1 */
    int logprobs_valid;      /* the last sampling step wrote logprobs and no prefill/reset/restore followed */

    /* Scratch buffers read by the graphs. */
    frt_buffer *step;        /* frt_step_args */
    frt_step_args step_last; /* what the step buffer holds (host copy) */
    int step_cached;         /* step_last is valid */

    frt_graph *g_prefill;    /* one variant per bucket (shape key = bucket length) */
    frt_graph *g_decode;     /* one variant, key 1 */
    frt_graph *g_sample;     /* one variant, key 1: sample from logits into pending */
    frt_graph *g_policy;     /* policy kind: the whole inference, key 1 */
    frt_graph *g_denoise;    /* policy kind: the flow-matching steps alone, key 1 (NULL: unsupported) */
    frt_graph *g_batch;      /* policy kind: the batched inference, key FRT_POLICY_KEY_BATCH | rollouts
                                (NULL: params.policy_batch 0) */
    frt_buffer *episode;     /* policy kind: frt_episode (a state entry) */
    struct {
        int enable, advantage_positive, fused;
        float beta;
    } policy_cfg;            /* policy kind: frt_policy_set_cfg / _set_cfg_mode (off by default) */
    frt_shape_key policy_staged_key; /* policy kind: the graph key of the staged observation (frt_policy_stage) */

    int task_status;  /* first failure inside a host task (e.g. out of memory), 0 if none */
    uint64_t weights_hash;
    uint64_t fingerprint;
    /* FP8 KV scales from params.kv_scales (model/kv_scales.h): per state
     * entry its [n_kv_heads] scales (NULL: 1.0), all in kv_scales_data; the
     * hash of the values (0: no file), part of the fingerprint. */
    float **kv_scales;
    float *kv_scales_data;
    uint64_t kv_scales_hash;
    uint64_t progress_done, progress_total; /* load progress of the current phase */
    float *cpu_sample_scratch; /* cpu backend: the sampling task's scratch (FRT_CPU_SAMPLE_SCRATCH(vocab)) */
    float *cpu_adjusted;       /* cpu backend: [vocab] f32, the adjusted logits of the sampling task */

    /* Rollback restore (capsule.c): the serial of the capsule whose
     * positional prefix (ROWS entries 0..position-1) the live state holds
     * unchanged, because it was snapshotted or restored last and every step
     * since wrote at or past its position; 0 = none. Cleared by reset and by
     * the start of every restore. */
    uint64_t live_capsule;
    frt_restore_stats last_restore; /* what the last successful restore copied */

    /* The pipelined restore (capsule.c, cartridge_inject.c; docs/model.md
     * "The pipelined restore"; a backend with layer_waits and an
     * architecture with state_layer, else all NULL): a host-tier restore or
     * a pinned-host injection copies layer l's entries on copy_stream and
     * records layer_ready[l]; the append pieces' graphs (fewer than C rows)
     * wait for layer_ready[l] at layer l, and m->stream defers its wait for
     * the last one (frt_stream_defer_wait) until the first piece has been
     * launched. entry_layer[i]: the layer owning state entry i, -1 for
     * none. */
    frt_stream *copy_stream;
    frt_event **layer_ready;
    frt_event *restore_start;
    int *entry_layer;
    int restore_pending; /* set by a pipelined restore, taken by the next frt_model_prefill */

    /* The capsule key (frt_capsule_set_key): disk capsules carry an
     * HMAC-SHA256 under it and are checked against it; 0 bytes = none. */
    unsigned char capsule_key[FRT_CAPSULE_KEY_MAX];
    size_t capsule_key_len;

    /* Branch slots (branch.c, frt/branch.h): n_slots copies of the state
     * table; slot_bufs[s * n_state + i] is entry i of slot s (slot 0: the
     * buffers allocated by state.c). The table's buffers (m->state[i].buf,
     * tokens, boundary, logits, the in-state ports) point at the bound
     * slot. */
    int n_slots;
    frt_buffer **slot_bufs;
    int bound_slot;    /* the slot the table points at */
    int selected_slot; /* the slot single-sequence calls act on */
    int n_branches;    /* branches of the last fork */
    int boundary_entry; /* the state entry of the boundary record */
    frt_buffer *bd_all; /* [n_slots] frt_boundary: frt_model_boundaries_read's gather (n_slots > 1) */
    frt_boundary *bd_host; /* [n_slots] its host copy */
    int shared_rows;   /* KV rows 0..shared_rows-1 equal in slots 0..n_branches-1 (frt_model_rows_rewritten) */
    int batch_max;     /* batched decode graphs exist for 2..batch_max slots (0: none) */
    unsigned char *branch_live; /* [n_slots] */
    /* [n_slots] live_capsule of each slot that is not bound (the bound
     * slot's is live_capsule): a slot keeps its rollback record while others
     * are bound, since nothing writes a slot's rows below its position but
     * a restore, a reset or a cartridge inject on the bound slot, and the
     * batched steps write each slot at its own position. */
    uint64_t *slot_live_capsule;
};

/* Points the state table and the runtime's handles (tokens, boundary,
 * logits, the sampler counts, the in-state ports) at branch slot s and lets
 * the architecture rebind its views (branch.c). */
int frt_model_bind_slot(frt_model *m, int s);

/* The shape-key bits of the bound slot: 0 when the backend binds slots at
 * replay time (binds_slots), else slot << 32, since its graphs hold the
 * addresses of the slot they were captured on (one capture per slot). */
frt_shape_key frt_model_slot_key(const frt_model *m);

/* The decode graph's key of the batched decode of slots 0..n-1: this | n. */
#define FRT_BATCH_KEY ((frt_shape_key)1 << 62)

/* The boundary records of slots 0..n-1 (n <= n_slots) into
 * out[n]: a device copy a slot, one read, one sync. Leaves the bound slot.
 * Errors: FRT_ERR_INVALID_ARGUMENT; the exec layer's. */
int frt_model_boundaries_read(frt_model *m, int n, frt_boundary *out);

/* Called before anything rewrites KV rows below a slot's position (a
 * capsule restore, a reset, a cartridge injection): the fork's shared
 * prefix (arch shared_rows) ends there, for every slot. */
int frt_model_rows_rewritten(frt_model *m);

/* One batched decode step of slots 0..n-1 (2 <= n <= batch_max, every slot
 * checked by the caller: a pending token, room): the step record written
 * with *s, the batched graph replayed, tokens[b] = slot b's new pending
 * token. Leaves the table bound to slot n-1. */
int frt_model_decode_batch(frt_model *m, const frt_sampling *s, int n, int32_t *tokens);

/* Reads the boundary record from its buffer into *b (synchronizes the
 * model's stream). Errors: those of frt_buffer_read / frt_stream_sync. */
int frt_model_boundary_read(frt_model *m, frt_boundary *b);

/* Load progress (params.progress): a backend's weight loader calls
 * frt_model_progress_weights with the bytes of each tensor it has placed
 * (checkpoint bytes, whatever dtype it converts to). */
void frt_model_progress_weights(frt_model *m, uint64_t bytes);

/* ---- the cpu backends' shared recording (cpu_forward.c) ----------------- */

/* The argument of an architecture's cpu host tasks (baked at capture). */
typedef struct frt_cpu_task {
    frt_model *m;
    int layer;  /* the layer of a layer task; -1 otherwise */
    int decode; /* 1: a decode step (one row: the pending token); 0: a prefill piece */
} frt_cpu_task;

/* An architecture's cpu step, as host tasks taking an frt_cpu_task: embed
 * the step's rows (and append them to the token journal), one layer, and
 * the final norm + LM head that advances the boundary. */
typedef struct frt_cpu_forward {
    void (*embed)(void *task);
    void (*layer)(void *task);
    void (*final)(void *task);
} frt_cpu_forward;

/* Rows of the current step: the step record's valid length for a prefill
 * piece, 1 for decode (read when the task runs, never baked). */
int frt_cpu_step_rows(const frt_model *m, int decode);

/* Commits the step's ids [n] to the token journal at the boundary's
 * position and marks them seen; a decode step (decode 1) also counts them
 * as generated (frt/sampling.h). The architectures' embed tasks call it. */
void frt_cpu_journal(frt_model *m, const int32_t *ids, int n, int decode);

/* Record a prefill piece (embed, every layer, final), a decode step (the
 * same, then the sampling task) or the sampling task alone on s. The
 * sampling task is the runtime's: greedy or frt_cpu_sample from the logits,
 * the step's frt_sampling and the boundary's RNG. */
int frt_cpu_record_prefill(frt_stream *s, const frt_record_ctx *rc, const frt_cpu_forward *f);
int frt_cpu_record_decode(frt_stream *s, const frt_record_ctx *rc, const frt_cpu_forward *f);
int frt_cpu_record_sample(frt_stream *s, void *user); /* an frt_record_fn; user: frt_record_ctx */

/* Allocates the state table the architecture declares plus the runtime's
 * token-model entries, and the graph ports (state.c). */
int frt_model_state_alloc(frt_model *m);

/* Allocates slots 1..B-1 of params.branch_slots = B (branch.c), after the
 * state table. Errors: FRT_ERR_INVALID_ARGUMENT (B outside 0..
 * FRT_MAX_BRANCH_SLOTS), FRT_ERR_UNSUPPORTED (B > 1 on a backend that
 * cannot bind slots), FRT_ERR_OUT_OF_MEMORY (the slots exceed the device's
 * free memory, message says how much). */
int frt_model_branches_alloc(frt_model *m);

/* Frees slots 1..B-1 (slot 0 is the state table's, freed by
 * frt_model_state_free) after binding slot 0 back. */
void frt_model_branches_free(frt_model *m);

/* Frees the state table and the ports. */
void frt_model_state_free(frt_model *m);

/* The pipelined restore's stream, events and entry -> layer table, when the
 * backend has layer_waits and the architecture state_layer (else nothing);
 * before any capture. Errors: those of frt_stream_create / frt_event_create,
 * FRT_ERR_OUT_OF_MEMORY. Freed by frt_model_restore_pipe_free (after the
 * graphs, which wait on the events). */
int frt_model_restore_pipe_alloc(frt_model *m);
void frt_model_restore_pipe_free(frt_model *m);

/* The pipelined copies into the state (m->layer_ready set): copies[i]
 * writes an entry of layer layer[i] (0 <= layer[i] < n_layers); each
 * layer's copies go to m->copy_stream in layer order (FRT_COPY_OVERLAP),
 * after the work enqueued on m->stream so far, each layer followed by a
 * record of layer_ready[l]; m->stream then defers its wait for the last
 * layer and m->restore_pending is set (the next prefill runs beside them).
 * The caller copies the entries no layer owns on m->stream first (and
 * syncs), and keeps the sources alive until the copies have landed.
 * Errors: those of the copies and events (after a failure nothing is
 * still copying). */
int frt_model_copy_layers(frt_model *m, const frt_copy *copies, const int *layer, int n);

/* The bucket (padded rows, the prefill graph's shape key) of a prefill
 * piece of n rows below C: the smallest bucket >= n, else C. */
int frt_model_prefill_bucket(const frt_model *m, int n);

/* Frees *buf (and sets it NULL) once no pipelined copy can still read it:
 * when *reads_pending (set by the caller of frt_model_copy_layers for the
 * source it passed), after a sync of ctx; clears *reads_pending. */
void frt_model_copy_source_free(frt_context *ctx, frt_buffer **buf, int *reads_pending);

/* An arch's state_layer for state declared as two entries a layer (the
 * dense family's k and v; the hybrid's KV or recurrent and conv state),
 * layer l's at entries 2 l and 2 l + 1: entry / 2, -1 past them. */
int frt_state_layer_pairs(const frt_model *m, int entry);

/* 1 when a prefill graph of `rows` rows (its bucket) waits at each layer for
 * the pipelined restore's layer_ready[l]: the append buckets, below C. */
int frt_model_layer_waits(const frt_model *m, int rows);

/* For backends with layer_waits, at the start of layer l of a prefill
 * recording of `rows` rows: the wait for layer_ready[l] when
 * frt_model_layer_waits(m, rows), else nothing. Errors: those of
 * frt_stream_wait_event. */
int frt_model_layer_wait(frt_stream *s, const frt_model *m, int layer, int rows);

/* Valid bytes of state entry i at position pos (capsules). */
size_t frt_model_state_valid_bytes(const frt_model *m, int i, int pos);

/* Zero-fills the recurrent entries (reset). */
int frt_model_state_zero_recurrent(frt_model *m);

/* The port named name with direction dir, or NULL. */
frt_io_entry *frt_model_io_find(frt_model *m, const char *name, frt_io_dir dir);

#endif
