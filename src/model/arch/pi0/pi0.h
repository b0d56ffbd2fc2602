/*
 * arch/pi0/pi0.h - Physical Intelligence's Pi0 and Pi0.5 flow-matching
 * vision-language-action policies (model_type "pi0", "pi05"), an
 * architecture of the policy kind (model/arch.h, frt/policy.h).
 *
 * One inference (openpi models_pytorch/pi0_pytorch.py sample_actions;
 * transformers 5.x models/pi0/modeling_pi0.py):
 *   vision   each camera [3, H, W] -> SigLIP (patch conv, position
 *            embedding, pre-LN blocks: x += attn(ln1 x), x += fc2(gelu_tanh
 *            (fc1(ln2 x))), post LayerNorm, no pooling head) -> linear
 *            projector to the prefix width: n_patch tokens a camera.
 *   prefix   [image tokens of every camera; prompt embeddings * sqrt(width)]
 *            through Gemma (RMSNorm x (1 + w), RoPE, GQA, GeGLU with tanh
 *            GELU); bidirectional: token i sees token j iff both are valid
 *            (camera present, attention_mask 1); positions = cumsum(valid) - 1.
 *            The prefix KV of every layer is kept in the state.
 *   suffix   Pi0: [state_proj(state); action_time_mlp_out(silu(
 *            action_time_mlp_in([action_in_proj(x_t), sincos(t)])))];
 *            Pi0.5: action_in_proj(x_t) alone, and every expert RMSNorm is
 *            adaptive (scale, shift, gate = dense(cond), cond = silu(
 *            time_mlp_out(silu(time_mlp_in(sincos(t)))))).
 *            The action expert (a Gemma stack of its own width, the prefix's
 *            head layout) attends to the valid prefix rows and to the suffix
 *            block-causally: the state token sees the prefix and itself, the
 *            action tokens see the prefix, the state and each other;
 *            positions continue after the valid prefix.
 *   flow     x_1 = noise; 10 Euler steps x += dt v(x, t), dt = -1/10, t = 1,
 *            0.9, ..., 0.1; v = action_out_proj(expert_norm(suffix)[-chunk:]).
 *
 * Checkpoints: the transformers pi0 layout (config.json with vlm_config /
 * dit_config, weights named as PI0ForConditionalGeneration.save_pretrained
 * writes them: PI0_VISION, PI0_PROJECTOR, PI0_PREFIX, PI0_EXPERT below and
 * the heads at the top level). Pi0.5 uses the same layout with model_type
 * "pi05" and its own names (time_mlp_in / _out, *_layernorm.dense,
 * norm.dense); see docs/policies.md. And the openpi PyTorch layout
 * (examples/convert_jax_model_to_pytorch.py: model.safetensors of
 * PI0Pytorch, a config.json of action_dim, action_horizon,
 * paligemma_variant, action_expert_variant and precision, no model_type):
 * the PI0_OPENPI_* names below, Pi0 or Pi0.5 told by the tensors
 * (pi0_config_from_checkpoint).
 *
 * The state it declares (P = max_prefix = max_cameras * n_patch + max_tokens):
 *   prefix.L.k, prefix.L.v  [P, kv_heads, head_dim] f32, whole, per layer L
 *   prefix.meta             [4] i32: rows, valid rows, 0, 0
 *   prefix.mask             [P] u8: 1 for a valid prefix row
 *   prefix_cond.L.k, .L.v, prefix_cond.meta, prefix_cond.mask: the same for
 *                           the conditioned prompt of classifier-free
 *                           guidance (frt_policy_set_cfg); 0 rows while CFG
 *                           is off. In the state (not scratch) so that a
 *                           capsule of a guided inference carries both
 *                           prefixes and denoise-only works after a restore.
 *   batch.L.k, .L.v [S, P, kv_heads, head_dim], batch.meta [S, 4], batch.mask
 *                           [S, P]: the S = params.policy_batch slots of the
 *                           batched inference (frt_policy_run_batch), only
 *                           when S > 0.
 * then the runtime's boundary and episode records.
 * Ports: pixel_values [max_cameras, 3, H, W] f32, pixel_attention_mask
 * [max_cameras] u8, input_ids [max_tokens] i32, attention_mask [max_tokens]
 * u8, state [max_state_dim] f32, noise [chunk, action_dim] f32, options
 * (frt_policy_options), input_ids_cond [max_tokens] i32,
 * attention_mask_cond [max_tokens] u8, cfg (frt_policy_cfg_options) in;
 * actions and velocity0 [chunk, action_dim] f32 (velocity0: the guided
 * velocity under CFG), vision_tokens [max_cameras, n_patch, width] f32,
 * velocity_slots [2, chunk, action_dim] f32 (fused CFG: the last step's
 * conditioned and unconditioned velocities, slot 0 and 1) out. With S > 0
 * also the batch ports of frt/policy.h: batch_pixel_values [S, max_cameras
 * * 3, H, W], batch_pixel_attention_mask [S, max_cameras], batch_input_ids,
 * batch_input_ids_cond [S, max_tokens] i32, batch_attention_mask,
 * batch_attention_mask_cond [S, max_tokens] u8, batch_state [S,
 * max_state_dim], batch_noise [S, chunk, action_dim], batch_options,
 * batch_cfg [S, 4] in; batch_actions [S, chunk, action_dim] out.
 *
 * Classifier-free guidance (RECAP, pi*0.6 arXiv:2511.14759 Appendix E):
 * the vision tower runs once; the prefix runs twice (the unconditioned
 * prompt into prefix.*, the conditioned one into prefix_cond.*); each Euler
 * step runs the expert on both prefixes from the same x_t and steps with
 * v = fmaf(beta, v_c - v_u, v_u) (frt_cpu_cfg_combine). Shape key 1 runs
 * the two passes one after the other; key 2 (fused) keeps one x_t per slot
 * and mirrors the guided x of slot 0 into slot 1 after each step.
 *
 * Files: pi0.c (config, state and ports), pi0_weights.c (the names and
 * shapes, loading), pi0_cpu.c (the f32 forward pass), pi0_cuda.c (bf16
 * weights, one CUDA graph per (cameras, prompt bucket) shape key; serial
 * CFG only)
 * with its kernels in pi0_glue.cu. docs/policies.md describes both.
 */
#ifndef FRT_MODEL_ARCH_PI0_H
#define FRT_MODEL_ARCH_PI0_H

#include "model/model_internal.h"

/* The checkpoint's name prefixes: the layout transformers 5.17's
 * PI0ForConditionalGeneration.save_pretrained writes (the flow-matching
 * heads at the top level: action_in_proj, action_out_proj, state_proj,
 * action_time_mlp_in / _out; Pi0.5's time_mlp_in / _out). */
#define PI0_VISION "paligemma_with_expert.paligemma.model.vision_tower."
#define PI0_PROJECTOR "paligemma_with_expert.paligemma.model.multi_modal_projector.linear"
#define PI0_PREFIX "paligemma_with_expert.paligemma.model.language_model.model."
#define PI0_EXPERT "paligemma_with_expert.gemma_expert.model."

/* The openpi PyTorch layout's prefixes where they differ (openpi pins
 * transformers 4.53: SiglipVisionModel keeps its inner vision_model, the
 * PaliGemma language model has no inner model.). The projector, the expert
 * and the heads are named as above. safetensors.torch.save_model drops all
 * but the alphabetically first name of tied tensors, so the prefix's token
 * embedding is stored as PaliGemma's lm_head (PI0_OPENPI_EMBED); an
 * embed_tokens.weight under PI0_OPENPI_PREFIX is read instead when present. */
#define PI0_OPENPI_VISION "paligemma_with_expert.paligemma.model.vision_tower.vision_model."
#define PI0_OPENPI_PREFIX "paligemma_with_expert.paligemma.model.language_model."
#define PI0_OPENPI_EMBED "paligemma_with_expert.paligemma.lm_head.weight"

/* The checkpoint layout a config.json names: transformers' (model_type pi0
 * / pi05) or openpi's (paligemma_variant / action_expert_variant, no
 * model_type). */
typedef enum pi0_layout { PI0_LAYOUT_TRANSFORMERS = 0, PI0_LAYOUT_OPENPI = 1 } pi0_layout;

/* One Gemma-shaped stack (the prefix, or the action expert). */
typedef struct pi0_gemma_config {
    int width, inter, layers, heads, kv_heads, head_dim;
    float eps;
    float rope_theta;
} pi0_gemma_config;

typedef struct pi0_config {
    pi0_layout layout;
    /* openpi layout: the config's variants (gemma.py get_config) and
     * precision ("float32" or "bfloat16", the dtype the weights were saved
     * in); empty for the transformers layout */
    char t_variant[24], e_variant[24], precision[16];
    int pi05;                  /* 1: adaRMSNorm expert, no state token; -1: not known yet (openpi layout) */
    int v_width, v_inter, v_layers, v_heads, v_head_dim; /* SigLIP */
    int image_size, patch, n_patch;
    float v_eps;
    pi0_gemma_config t;        /* the prefix (PaliGemma's Gemma) */
    pi0_gemma_config e;        /* the action expert */
    int vocab;
    int chunk, action_dim, state_dim, n_steps;
    double min_period, max_period;
    int max_cameras, max_tokens, max_prefix;
} pi0_config;

/* SigLIP encoder layer, f32, HF Linear layout [out, in]. */
typedef struct pi0_vit_layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b; /* [v_width] */
    const float *q_w, *k_w, *v_w, *o_w;         /* [v_width, v_width] */
    const float *q_b, *k_b, *v_b, *o_b;         /* [v_width] */
    const float *fc1_w, *fc1_b;                 /* [v_inter, v_width], [v_inter] */
    const float *fc2_w, *fc2_b;                 /* [v_width, v_inter], [v_width] */
} pi0_vit_layer;

/* Gemma decoder layer. Plain norms (in_norm, post_norm [width]) or, in
 * Pi0.5's expert, adaptive ones (*_dense_w [3 width, width], *_dense_b
 * [3 width]: scale, shift, gate). */
typedef struct pi0_gemma_layer {
    const float *in_norm, *post_norm;
    const float *in_dense_w, *in_dense_b, *post_dense_w, *post_dense_b;
    const float *q, *k, *v;  /* [heads * hd, width], [kv * hd, width] x2 */
    const float *o;          /* [width, heads * hd] */
    const float *gate, *up;  /* [inter, width] */
    const float *down;       /* [width, inter] */
} pi0_gemma_layer;

typedef struct pi0_weights {
    const float *patch_w, *patch_b; /* [v_width, 3 * patch * patch], [v_width] */
    const float *pos_emb;           /* [n_patch, v_width] */
    const float *post_ln_w, *post_ln_b;
    const float *proj_w, *proj_b;   /* [t.width, v_width], [t.width] */
    const float *embed;             /* [vocab, t.width] */
    pi0_vit_layer *vit;             /* [v_layers] */
    pi0_gemma_layer *tl, *el;       /* [t.layers], [e.layers] */
    const float *e_norm;            /* [e.width] (Pi0) */
    const float *e_norm_dense_w, *e_norm_dense_b; /* (Pi0.5) */
    const float *action_in_w, *action_in_b;       /* [e.width, action_dim] */
    const float *action_out_w, *action_out_b;     /* [action_dim, e.width] */
    const float *state_w, *state_b;               /* [e.width, state_dim] (Pi0) */
    const float *atm_in_w, *atm_in_b;             /* [e.width, 2 e.width] (Pi0) */
    const float *atm_out_w, *atm_out_b;           /* [e.width, e.width] (Pi0) */
    const float *time_in_w, *time_in_b;           /* [e.width, e.width] (Pi0.5) */
    const float *time_out_w, *time_out_b;
    float *arena;
    size_t floats;
} pi0_weights;

/* Scratch activations (cpu backend); sizes in pi0_cpu.c. */
typedef struct pi0_scratch {
    float *x, *h, *q, *att, *m1, *m2; /* rows x widths, the largest stack */
    float *k, *v;                     /* [max_prefix + 1 + chunk, kv * hd] */
    float *patches;                   /* [n_patch, 3 * patch^2] */
    uint8_t *allow;                   /* [rows, keys] */
    int32_t *pos;
    float *xt, *vel;                  /* [chunk, action_dim] */
    float *cond, *mod;                /* [e.width], [3 e.width] per norm */
    float *mods;                      /* Pi0.5: [e.layers * 2 + 1, 3 e.width] */
    float *vel_c;                     /* serial CFG: the conditioned velocity [chunk, action_dim] */
    float *xs, *vs;                   /* fused CFG: x_t and v per slot [2, chunk, action_dim] */
    uint8_t *q8;                      /* FP8 weights (fp8): a product input's E4M3 codes [rows, t.inter] */
    float *s8;                        /* and their scales [rows] */
} pi0_scratch;

/* One prefix KV set in the state: PI0_UNCOND (prefix.*, the only one
 * without CFG) or PI0_COND (prefix_cond.*). */
typedef struct pi0_prefix_set {
    frt_buffer **k, **v;     /* per layer [P, kv_heads, head_dim] ([S, P, ...] for PI0_BATCH) */
    frt_buffer *meta, *mask; /* [4] i32 rows, valid rows; [P] u8 ([S, 4], [S, P] for PI0_BATCH) */
    int slot;                /* the row of the batch buffers this set is (0 for prefix.*, prefix_cond.*) */
} pi0_prefix_set;

enum { PI0_UNCOND = 0, PI0_COND = 1, PI0_BATCH = 2 };

typedef struct pi0 {
    pi0_config c;
    pi0_weights w;
    pi0_scratch s;
    int fp8; /* cpu: params.weight_dtype FRT_WEIGHT_FP8, the prefix's MLP emulated in E4M3 (pi0_cpu.c) */
    /* views of prefix.* (PI0_UNCOND), prefix_cond.* (PI0_COND) and, with
     * params.policy_batch = S > 0, batch.* (PI0_BATCH: S slots) */
    pi0_prefix_set pre[3];
} pi0;

static inline pi0 *pi0_of(const frt_model *m) { return (pi0 *)m->arch_data; }

/* Parses config.json text (len bytes) into *c. `what` names the source in
 * messages; max_tokens: the prompt capacity (0: 48 for pi0, 200 for pi05,
 * openpi's Pi0Config.max_token_len).
 *   - The transformers pi0 layout (model_type "pi0" or "pi05", copied into
 *     model_type[mt_size]): absent fields at PI0Config's / GemmaConfig's /
 *     SiglipVisionConfig's defaults; *c is complete.
 *   - The openpi layout (no model_type; any of paligemma_variant,
 *     action_expert_variant): all five fields required, nothing else
 *     allowed but frt's own "frt_shapes" (docs/policies.md); the vision
 *     tower at SigLIP So400m/14, the two Gemma stacks from the variants
 *     (gemma_2b, gemma_300m, their _lora forms, dummy), chunk =
 *     action_horizon, action_dim = state dim = action_dim. Pi0 or Pi0.5 is
 *     not in this config: model_type is set to "", c->pi05 to -1 and
 *     c->max_tokens / max_prefix wait for pi0_config_from_checkpoint.
 * c->layout is set before any check, also when the parse fails.
 * Errors: FRT_ERR_FORMAT (bad JSON, a field missing or of the wrong type or
 * range, neither layout), FRT_ERR_UNSUPPORTED (another model_type, an
 * unknown variant, precision or openpi field, an activation other than
 * tanh GELU, a pooling head, an expert whose layers or KV layout differ from
 * the prefix's, a scaled RoPE, sizes frt cannot run). */
int pi0_config_parse_json(const char *text, size_t len, const char *what, int max_tokens, char *model_type,
                          size_t mt_size, pi0_config *c);

/* Completes an openpi-layout config from its checkpoint (a no-op for the
 * transformers layout): Pi0.5 when the tensor time_mlp_in.weight is there,
 * Pi0 when state_proj.weight is (model_type "pi05" / "pi0" into
 * model_type[mt_size]), then the prompt capacity; and the config's
 * precision against the tensors' dtypes ("float32": every tensor F32;
 * "bfloat16": each BF16 or F32, as openpi keeps its norms and the patch
 * embedding in f32). Errors: FRT_ERR_FORMAT (both or neither of those
 * tensors; a tensor of another dtype than the precision says),
 * FRT_ERR_UNSUPPORTED (the prompt capacity). */
int pi0_config_from_checkpoint(pi0_config *c, const frt_checkpoint *ck, char *model_type, size_t mt_size,
                               const char *what);

/* The FLOPs of one inference with `cameras` cameras (all present) and
 * `tokens` prompt tokens: out[0] vision (patch embedding, blocks,
 * projector), out[1] prefix, out[2] the expert over every Euler step.
 * Matrix products count 2 per multiply-add (every Linear of the three
 * stacks and heads), attention 4 * queries * keys * heads * head_dim per
 * layer; norms, activations and softmax are left out (they are O(width) a
 * token). */
void pi0_flops(const pi0_config *c, int cameras, int tokens, double out[3]);

/* Matrix parameters of one layer of a Gemma stack. */
double pi0_gemma_layer_params(const pi0_gemma_config *g);

/* The weights (pi0_weights.c): every tensor the config implies, by name and
 * shape, converted to f32; a missing, misshapen or unknown tensor is
 * refused with its name (FRT_ERR_NOT_FOUND, FRT_ERR_FORMAT). */
int pi0_load_weights(frt_model *m);
void pi0_free_weights(frt_model *m);

/* The episode stream's noise (pi0_cpu.c's header describes it): out[0..n)
 * for inference number `step` of the episode of `seed`. Both backends draw
 * from it (pi0_glue.cu computes the same stream on the device). */
void pi0_episode_noise(float *out, int n, uint64_t seed, uint64_t step);

/* time_sincos(t) [width]: sin(2 pi t / period_i), then cos, with periods
 * min_p (max_p / min_p)^(i / (width/2 - 1)), in double
 * (openpi create_sinusoidal_pos_embedding). */
void pi0_time_sincos(float *out, int width, double t, double min_p, double max_p);

extern const frt_arch_backend frt_pi0_cpu_backend; /* pi0_cpu.c */
#if FRT_HAVE_CUDA
extern const frt_arch_backend frt_pi0_cuda_backend; /* pi0_cuda.c */
#endif

#endif /* FRT_MODEL_ARCH_PI0_H */
