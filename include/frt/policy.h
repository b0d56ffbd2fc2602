/*
 * frt/policy.h - robot policies (vision-language-action models) on the
 * model layer: Physical Intelligence's Pi0 and Pi0.5 (docs/policies.md).
 *
 * A policy is a model (frt_model, loaded by frt_model_load like any other)
 * whose architecture is of the policy kind: its inputs are camera images, a
 * tokenized prompt and the robot state, and one inference (the vision tower
 * for every camera, the prefix, every flow-matching step) returns an action
 * chunk [chunk, action_dim] instead of a next token. The whole inference is
 * one captured graph; inputs are written into its bound input buffers and
 * the chunk is read from its output buffer.
 *
 * Live state (the declared table, frt_model_state_info): the prefix KV of
 * the last observation and instruction (per layer, whole buffers), the
 * prefix mask, and the episode record (noise seed, step counter) that the
 * runtime appends. Capsules (frt/capsule.h) snapshot and restore it: restore
 * the capsule taken at an episode's start and the next inference returns
 * the same action chunk, byte for byte, whatever ran in between.
 *
 * The token verbs of frt/model.h (prefill, sample, decode, reset, seed,
 * tokens, logits) refuse a policy with FRT_ERR_UNSUPPORTED.
 *
 * Math sources: openpi src/openpi/models/pi0.py and models_pytorch/
 * (pi0_pytorch.py, gemma_pytorch.py); transformers 5.x models/pi0
 * (modeling_pi0.py). The architecture: src/model/arch/pi0/pi0.h.
 */
#ifndef FRT_POLICY_H
#define FRT_POLICY_H

#include "frt/exec.h"
#include "frt/export.h"
#include "frt/model.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a policy takes and returns (from its config). */
typedef struct frt_policy_info {
    char model_type[32]; /* "pi0", "pi05" */
    int max_cameras;     /* cameras one inference takes at most (3) */
    int image_channels;  /* 3 */
    int image_height, image_width; /* each camera's pixel_values, already resized (224 x 224) */
    int max_tokens;      /* prompt tokens at most (params.max_seq, else 48 for pi0, 200 for pi05) */
    int vocab_size;      /* prompt ids lie in [0, vocab_size) */
    int max_state_dim;   /* state values at most (shorter states are zero-padded) */
    int state_in_prompt; /* 1 (pi05): the state is written into the prompt, no state input */
    int chunk;           /* action rows per inference */
    int action_dim;      /* values per action row (max_action_dim of the config) */
    int n_steps;         /* flow-matching Euler steps (num_inference_steps) */
    int batch_slots;     /* prefix KV slots of frt_policy_run_batch (frt_model_params.policy_batch; 0 = none) */
} frt_policy_info;

/* One observation, as the model takes it (the input side that resizes
 * images, tokenizes the prompt and normalizes the state lives elsewhere).
 * Nothing is retained after frt_policy_run returns. */
typedef struct frt_policy_inputs {
    const float *pixel_values;   /* [n_cameras, channels, height, width] f32 in [-1, 1] */
    int n_cameras, channels, height, width;
    const uint8_t *camera_mask;  /* [n_cameras] 0/1: 0 = camera absent (masked out); NULL = all present */
    const int32_t *input_ids;    /* [n_tokens] i32 prompt ids (BOS first), right-padded */
    const uint8_t *attention_mask; /* [n_tokens] 0/1: 0 = padding; NULL = all valid */
    int n_tokens;
    const float *state;          /* [n_state] f32, normalized; NULL with n_state 0 for pi05 */
    int n_state;
    const float *noise;          /* [chunk, action_dim] f32 start of the flow, or NULL: drawn from the
                                    episode's seeded stream (frt_policy_episode_start) */
    /* Classifier-free guidance (frt_policy_set_cfg): the conditioned prompt,
     * i.e. the ids of frt_policy_cfg_prompt's text (task + "Advantage:
     * positive|negative", cleaned) tokenized as input_ids is; input_ids is
     * then the unconditioned prompt. Required while CFG is on, refused
     * (FRT_ERR_INVALID_ARGUMENT) while it is off; same checks as input_ids. */
    const int32_t *input_ids_cond;     /* [n_tokens_cond] i32 (BOS first), right-padded */
    const uint8_t *attention_mask_cond; /* [n_tokens_cond] 0/1; NULL = all valid */
    int n_tokens_cond;
} frt_policy_inputs;

/* 1 when m is a policy, 0 otherwise (NULL included). */
FRT_API int frt_model_is_policy(const frt_model *m);

/* Fills *out. Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_UNSUPPORTED
 * (m is not a policy). */
FRT_API int frt_policy_info_get(const frt_model *m, frt_policy_info *out);

/* Runs one inference: writes the inputs into the graph's input buffers,
 * replays the policy graph (which refills the prefix KV of the state and
 * advances the episode's step counter) and copies the action chunk into
 * actions[0 .. chunk * action_dim) (row-major [chunk, action_dim] f32; cap is
 * its length in floats).
 * Checked before anything is written (on error nothing changes, state and
 * buffers included): FRT_ERR_INVALID_ARGUMENT for NULL pointers, a camera
 * count outside [1, max_cameras], channels != 3, an image size other than
 * the model's, a camera mask value other than 0/1 or no camera present, a
 * non-finite pixel, a prompt of 0 tokens or more than max_tokens or with no
 * valid token (empty prompt), an id outside the vocabulary, a state longer
 * than max_state_dim (or missing for pi0, or given for pi05), a NaN or
 * infinite state or noise value, cap < chunk * action_dim; with CFG on, no
 * input_ids_cond or one failing the prompt checks above; with CFG off, an
 * input_ids_cond given;
 * FRT_ERR_UNSUPPORTED (m is not a policy). A failure inside the forward
 * pass (out of memory) is returned as that status; the state may then hold
 * a partial prefix (restore a capsule or run again). */
FRT_API int frt_policy_run(frt_model *m, const frt_policy_inputs *in, float *actions, size_t cap);

/* ---- an inference in pieces (the rollout host, frt/rollout.h) -----------
 * frt_policy_run is frt_policy_stage + one replay of frt_policy_graph's
 * variant on the context's default stream + frt_policy_finish. A caller that
 * replays the graph itself (inside an exec plan beside another graph, e.g.
 * a value critic on a second stream) uses the three pieces. */

/* Checks `in` exactly as frt_policy_run does and writes it into the graph's
 * input ports, without replaying (on error nothing is written).
 * Bound prompt: with in->input_ids NULL (and in->attention_mask NULL) the
 * prompt is the one already in the `input_ids` / `attention_mask` ports
 * (frt_policy_port_buffer: a planner wrote it there, zero copy); its first
 * in->n_tokens ids and flags are read back and checked as frt_policy_run
 * checks a prompt, and the ports are left as they are.
 * Errors: those of frt_policy_run (but no cap), and FRT_ERR_INVALID_ARGUMENT
 * for an attention_mask given without input_ids, or a bound prompt whose
 * n_tokens is outside [1, max_tokens] or whose port contents fail the
 * prompt checks. */
FRT_API int frt_policy_stage(frt_model *m, const frt_policy_inputs *in);

/* The graph and shape key the next inference replays (the key depends on
 * frt_policy_set_cfg / _set_cfg_mode). Both are owned by the model; the
 * graph lives as long as it. Replay the variant after frt_policy_stage, on
 * any stream of frt_model_context(m), then call frt_policy_finish once it
 * has run. Errors: FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_UNSUPPORTED (not
 * a policy). */
FRT_API int frt_policy_graph(frt_model *m, frt_graph **graph, frt_shape_key *key);

/* After a replay of frt_policy_graph's variant has completed (its stream
 * or plan synchronised): returns a failure inside the forward pass as its
 * status (FRT_ERR_OUT_OF_MEMORY ...), else copies the chunk into actions
 * (row-major [chunk, action_dim] f32, cap floats at least chunk *
 * action_dim). Errors: FRT_ERR_INVALID_ARGUMENT (NULL, cap too small),
 * FRT_ERR_UNSUPPORTED (not a policy). */
FRT_API int frt_policy_finish(frt_model *m, float *actions, size_t cap);

/* The buffer bound to the policy graph's port `name` (an input port of
 * frt_model_io_info first, else an output port: "input_ids", "state",
 * "vision_tokens", "actions", ...), owned by the model (valid until
 * frt_model_free). NULL when m is not a policy, name is NULL or no port has
 * that name. Writing an input port's buffer (frt_buffer_write, or a graph
 * of the same context binding it) hands data to the next replay with no
 * copy; another graph binding an output port reads what the last replay
 * wrote. */
FRT_API frt_buffer *frt_policy_port_buffer(frt_model *m, const char *name);

/* The arithmetic of one inference with `cameras` cameras and `tokens`
 * prompt tokens, for benchmarks' floors: FLOPs of the vision tower, the
 * prefix and the expert over every flow-matching step (matrix products 2
 * per multiply-add, attention 4 * queries * keys * head width; norms and
 * activations left out), and the expert's matrix parameters (each step
 * reads them once). */
typedef struct frt_policy_cost {
    double flops_vision, flops_prefix, flops_expert;
    double expert_params;
} frt_policy_cost;

/* Fills *out. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, cameras outside [1,
 * max_cameras], tokens outside [1, max_tokens]), FRT_ERR_UNSUPPORTED (not a
 * policy). */
FRT_API int frt_policy_cost_get(const frt_model *m, int cameras, int tokens, frt_policy_cost *out);

/* The nodes of the captured graph that frt_policy_run on `in` replays with
 * the current CFG settings (kernels, copies and host tasks of the whole
 * inference, as cudaGraphGetNodes counts them while it is captured): the
 * launch count a replay pays. `in` selects the variant (cameras, prompt
 * buckets; only n_cameras, n_tokens and n_tokens_cond are read). The variant
 * must have run once (it is captured on first use). Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL), FRT_ERR_UNSUPPORTED (not a policy, or a
 * backend that does not count: the cpu backend), FRT_ERR_NO_VARIANT (not
 * captured yet), FRT_ERR_BACKEND (the CUDA runtime could not count it). */
FRT_API int frt_policy_graph_nodes(const frt_model *m, const frt_policy_inputs *in, int *nodes);

/* Warm re-entry: runs only the flow-matching steps on the prefix the state
 * holds (the observation and instruction of the last frt_policy_run, or of
 * a restored capsule), with this state (Pi0; NULL / 0 for pi05) and noise
 * (NULL: the episode's stream, which advances as in frt_policy_run). The
 * chunk equals frt_policy_run's on that observation with the same state and
 * noise, bit for bit.
 * Under CFG (frt_policy_set_cfg) it runs the guided steps on both prefixes.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, the state and noise checks of
 * frt_policy_run, cap too small), FRT_ERR_STATE (the state holds no
 * prefix: a model that never ran, or CFG on and the last inference ran
 * without it, so no conditioned prefix; nothing changed), FRT_ERR_UNSUPPORTED
 * (not a policy, or a backend without it). */
FRT_API int frt_policy_denoise(frt_model *m, const float *state, int n_state, const float *noise, float *actions,
                               size_t cap);

/* ---- classifier-free guidance (RECAP) ------------------------------------
 * Advantage-conditioned policies (pi*0.6, arXiv:2511.14759, Appendix E) run
 * the expert twice per Euler step, once on the prefix of the prompt with the
 * advantage indicator (input_ids_cond) and once on the plain prompt
 * (input_ids), from the same x_t, and step with
 *   v = v_u + beta (v_c - v_u), computed as fmaf(beta, v_c - v_u, v_u) in f32.
 * The vision tower runs once; both prefix KV sets live in the state
 * (prefix.* and prefix_cond.*), so capsules carry them and
 * frt_policy_denoise works after a restore. velocity0 is the guided
 * velocity of the first step. */

/* Turns guidance on (enable 1) or off (0) for the following
 * frt_policy_run / frt_policy_denoise calls. Off (the default) the inference
 * is bit for bit the unguided one. beta: the guidance weight, in [1, inf)
 * (1 = the conditioned prediction, up to f32 rounding; below 1 guidance
 * would be weaker than conditioning alone, the reference refuses it too);
 * advantage_positive: which indicator front ends put in the conditioned
 * prompt (frt_policy_cfg_prompt; frt_policy_cfg_get reads it back). With
 * enable 0, beta and advantage_positive are checked and kept too.
 * Errors (nothing changes): FRT_ERR_INVALID_ARGUMENT (NULL, enable not 0/1,
 * advantage_positive not 0/1, beta < 1, NaN or infinite: "beta must be in
 * [1, inf)"), FRT_ERR_UNSUPPORTED (not a policy). */
FRT_API int frt_policy_set_cfg(frt_model *m, int enable, float beta, int advantage_positive);

/* Reads the settings of frt_policy_set_cfg (off, beta 1, positive after
 * load); any out pointer may be NULL. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL model), FRT_ERR_UNSUPPORTED (not a policy). */
FRT_API int frt_policy_cfg_get(const frt_model *m, int *enable, float *beta, int *advantage_positive);

/* How a guided inference is arranged (same chunk, bit for bit, on the cpu
 * backend):
 *   FRT_POLICY_CFG_FUSED (default): one graph with two slots (slot 0
 *     conditioned, slot 1 unconditioned, each with its own x_t); per step
 *     both slots' expert passes, then a combine that steps slot 0 and
 *     mirrors its x into slot 1;
 *   FRT_POLICY_CFG_SERIAL: per step the two expert passes one after the
 *     other on one x_t. */
typedef enum frt_policy_cfg_mode { FRT_POLICY_CFG_FUSED = 0, FRT_POLICY_CFG_SERIAL = 1 } frt_policy_cfg_mode;

/* Errors: FRT_ERR_INVALID_ARGUMENT (NULL, an unknown mode),
 * FRT_ERR_UNSUPPORTED (not a policy; FUSED on a backend without the fused
 * graph). Nothing changes on error. */
FRT_API int frt_policy_set_cfg_mode(frt_model *m, frt_policy_cfg_mode mode);

/* ---- batched rollouts -------------------------------------------------------
 * n observations (parallel RL rollouts, one environment each) in one graph
 * replay. The capacity is fixed at load: frt_model_params.policy_batch = S
 * batch slots (0 to FRT_POLICY_BATCH_MAX; 0, the default, declares nothing
 * and changes nothing). A slot is one prefix KV set: a rollout takes one
 * slot, or two under CFG (conditioned and unconditioned), so one call takes
 * up to S rollouts, or S / 2 with CFG on.
 * The slots are in the state table (batch.L.k, batch.L.v [S, P, kv_heads,
 * head_dim], batch.meta [S, 4] i32, batch.mask [S, P] u8; whole), so
 * capsules carry them; frt_policy_run's prefix.* / prefix_cond.* are
 * separate and a batch leaves them unchanged. A model loaded with another S
 * has another state table, hence another fingerprint: capsules do not cross.
 * Ports: batch_pixel_values, batch_pixel_attention_mask, batch_input_ids,
 * batch_attention_mask, batch_state, batch_noise, batch_options,
 * batch_input_ids_cond, batch_attention_mask_cond, batch_cfg in (row r:
 * rollout r, the shape of the port without the batch_ prefix),
 * batch_actions [S, chunk, action_dim] f32 out. vision_tokens then holds the
 * last rollout's tokens; velocity0 and velocity_slots are not written. */
#define FRT_POLICY_BATCH_MAX 64

/* Runs n inferences in one replay, rollout r on in[r] (every field as in
 * frt_policy_run, each rollout its own cameras, prompt, state and noise),
 * with the CFG settings of frt_policy_set_cfg applied to every rollout, and
 * copies the chunks into actions[0 .. n * chunk * action_dim) (row-major
 * [n, chunk, action_dim] f32; cap is its length in floats).
 * Rollout r's chunk equals frt_policy_run's on in[r] alone, bit for bit on
 * the cpu backend (which computes the rollouts one after another, each with
 * the single inference's code; on the cpu backend the guided rollouts use
 * the serial arrangement, bit-identical to the fused one there); on the
 * cuda backend within cosine >= 0.999 and norm-wise rel <= 3e-2 (the batch
 * stacks the slots' rows in the expert's GEMMs and runs the largest
 * observation's camera slots and prompt bucket: other cuBLASLt shapes than
 * a single run's), guided
 * rollouts in the fused arrangement whatever frt_policy_set_cfg_mode says,
 * and the same inputs give the same bytes again. A rollout
 * with noise NULL draws the episode stream as frt_policy_run does, in
 * rollout order: n rollouts without noise after episode_start(seed) give the
 * chunks of n successive frt_policy_run calls, and the step counter
 * advances by n.
 * Checked before anything is written (on error nothing changes):
 * FRT_ERR_INVALID_ARGUMENT for NULL pointers, n < 1, n rollouts needing more
 * slots than the model was loaded with (n, or 2 n under CFG, above
 * batch_slots), cap < n * chunk * action_dim, and any check of
 * frt_policy_run on any in[r] (the message names the rollout);
 * FRT_ERR_UNSUPPORTED (not a policy, or a backend without the batched
 * graph: such a backend refuses policy_batch > 0 at load); on the cuda
 * backend, which captures the graph of a rollout count (CFG on or off, the
 * largest observation's shape) on its first use, a failed capture's
 * status, before any input is written
 * (nothing changes). A failure inside
 * the forward pass is returned as that status; the batch slots may then
 * hold partial prefixes. */
FRT_API int frt_policy_run_batch(frt_model *m, const frt_policy_inputs *in, int n, float *actions, size_t cap);

/* Starts an episode: the episode record gets seed and step 0, so the noise
 * of the following inferences (those without caller noise) is the stream of
 * seed. Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_UNSUPPORTED (not a
 * policy). */
FRT_API int frt_policy_episode_start(frt_model *m, uint64_t seed);

/* Reads the episode record: its seed and the inferences run since it
 * started. Errors: as frt_policy_episode_start. */
FRT_API int frt_policy_episode_get(const frt_model *m, uint64_t *seed, uint64_t *step);

#ifdef __cplusplus
}
#endif
#endif /* FRT_POLICY_H */
