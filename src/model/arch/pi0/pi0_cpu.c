/*
 * arch/pi0/pi0_cpu.c - the Pi0 / Pi0.5 inference on the cpu backend, f32
 * (the reference a CUDA backend will be checked against). With
 * params.weight_dtype FRT_WEIGHT_FP8 the prefix's MLP is emulated in FP8
 * E4M3 as the cuda backend runs it: its weights through the codes and back
 * at load, one scale an output row (the same codes the cuda backend
 * uploads), its two products' inputs through the codes per row
 * (frt_fp8w_activations); f32 otherwise. The math is in
 * pi0.h; it follows openpi models_pytorch/pi0_pytorch.py (embed_prefix,
 * embed_suffix, denoise_step, sample_actions) and gemma_pytorch.py, with
 * the module math of transformers 5.x modeling_siglip.py and
 * modeling_gemma.py.
 *
 * The inference is recorded once as host tasks (vision, prefix, noise, one
 * task per Euler step, output); every task reads what changes between
 * replays (camera and prompt counts, the caller's noise flag, the episode
 * record) from the port and state buffers when it runs, never from values
 * baked at capture.
 *
 * Classifier-free guidance (frt_policy_set_cfg; pi0.h): the `cfg` port says
 * whether it is on. Off, every task does exactly what it did before CFG
 * existed. On, the conditioned prefix task fills prefix_cond.* from
 * input_ids_cond, and each Euler step runs the expert on both prefixes from
 * the same x_t: key 1 (serial) in one task, key 2 (fused, two slots) as one
 * task per slot then a combine task that steps slot 0 and mirrors it into
 * slot 1. Both compute the same f32 operations in the same order, so their
 * chunks are bit-identical on this backend.
 *
 * Noise without caller noise: the episode's stream. For inference number
 * `step` of the episode of `seed`, splitmix64 starting from
 * seed ^ (step * 0xD1B54A32D192ED03) gives pairs of uniforms (u1 in (0, 1],
 * u2 in [0, 1), 53 bits each) and Box-Muller gives two normals
 * sqrt(-2 ln u1) (cos, sin)(2 pi u2), in row-major order over
 * [chunk, action_dim].
 */
#include "model/arch/pi0/pi0.h"

#include "kernels/cpu/kernels_cpu.h"
#include "model/fp8_weights.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct pi0_task {
    frt_model *m;
    int step; /* the Euler step of a step task */
    int slot; /* fused CFG: 0 conditioned, 1 unconditioned; the prefix task: PI0_UNCOND or PI0_COND */
    int fused; /* recorded at key 2 (two slots) */
    int rollout; /* -1: the single inference; r: rollout r of the batched one */
} pi0_task;

static void *port(frt_model *m, const char *name, frt_io_dir dir)
{
    return frt_buffer_ptr(frt_model_io_find(m, name, dir)->buf);
}

/* The port NAME of the single inference (rollout -1), or row `rollout` of
 * batch_NAME. */
static void *port_row(frt_model *m, const char *name, frt_io_dir dir, int rollout)
{
    if (rollout < 0) return port(m, name, dir);
    char full[FRT_STATE_NAME_MAX];
    snprintf(full, sizeof full, "batch_%s", name);
    const frt_io_entry *e = frt_model_io_find(m, full, dir);
    return (char *)frt_buffer_ptr(e->buf) + e->bytes / (size_t)e->decl.shape[0] * (size_t)rollout;
}

/* The ports one inference reads and writes. */
typedef struct pi0_io {
    const frt_policy_options *o;
    const frt_policy_cfg_options *g;
    const float *px, *state, *noise;
    const uint8_t *cam, *am, *am_cond;
    const int32_t *ids, *ids_cond;
    float *actions;
    float *velocity0; /* NULL in a batch (not written) */
} pi0_io;

static pi0_io io_of(frt_model *m, int rollout)
{
    const frt_io_dir I = FRT_IO_INPUT;
    pi0_io io = {
        .o = port_row(m, "options", I, rollout),
        .g = port_row(m, "cfg", I, rollout),
        .px = port_row(m, "pixel_values", I, rollout),
        .state = port_row(m, "state", I, rollout),
        .noise = port_row(m, "noise", I, rollout),
        .cam = port_row(m, "pixel_attention_mask", I, rollout),
        .am = port_row(m, "attention_mask", I, rollout),
        .am_cond = port_row(m, "attention_mask_cond", I, rollout),
        .ids = port_row(m, "input_ids", I, rollout),
        .ids_cond = port_row(m, "input_ids_cond", I, rollout),
        .actions = port_row(m, "actions", FRT_IO_OUTPUT, rollout),
        .velocity0 = rollout < 0 ? port(m, "velocity0", FRT_IO_OUTPUT) : NULL,
    };
    return io;
}

/* The prefix KV set of the single inference (prefix.* or prefix_cond.*),
 * or of a rollout of the batch: slot r, or under CFG (cfg 1) slots 2r
 * (conditioned) and 2r + 1 (unconditioned). */
static pi0_prefix_set prefix_set(const pi0 *P, int rollout, int cond, int cfg)
{
    if (rollout < 0) return P->pre[cond ? PI0_COND : PI0_UNCOND];
    pi0_prefix_set s = P->pre[PI0_BATCH];
    s.slot = cfg ? 2 * rollout + !cond : rollout;
    return s;
}

/* A set's layer-l K or V rows [P, kv_heads * head_dim], its meta [4] and
 * its mask [P] (the set's slot of the batch buffers). */
static float *set_kv(const pi0 *P, const pi0_prefix_set *pre, frt_buffer *const *kv, int l)
{
    const size_t per = (size_t)P->c.max_prefix * P->c.t.kv_heads * P->c.t.head_dim;
    return (float *)frt_buffer_ptr(kv[l]) + per * (size_t)pre->slot;
}

static int32_t *set_meta(const pi0_prefix_set *pre) { return (int32_t *)frt_buffer_ptr(pre->meta) + 4 * pre->slot; }

static uint8_t *set_mask(const pi0 *P, const pi0_prefix_set *pre)
{
    return (uint8_t *)frt_buffer_ptr(pre->mask) + (size_t)P->c.max_prefix * (size_t)pre->slot;
}

/* y[n, out] = x[n, in] . w^T (+ b). */
static void lin(float *y, const float *x, const float *w, const float *b, int n, int in, int out)
{
    frt_cpu_matmul(y, x, w, n, in, out);
    if (b) frt_cpu_add_bias(y, b, n, out);
}

/* ---- vision ------------------------------------------------------------- */

static void vit_layer(pi0 *P, const pi0_vit_layer *y, int n)
{
    const pi0_config *c = &P->c;
    pi0_scratch *s = &P->s;
    const int D = c->v_width, I = c->v_inter;
    frt_cpu_layernorm(s->h, s->x, y->ln1_w, y->ln1_b, n, D, c->v_eps);
    lin(s->q, s->h, y->q_w, y->q_b, n, D, D);
    lin(s->k, s->h, y->k_w, y->k_b, n, D, D);
    lin(s->v, s->h, y->v_w, y->v_b, n, D, D);
    frt_cpu_attention_masked(s->att, s->q, s->k, s->v, s->allow, n, n, c->v_heads, c->v_heads, c->v_head_dim,
                             1.0f / sqrtf((float)c->v_head_dim));
    lin(s->m1, s->att, y->o_w, y->o_b, n, D, D);
    frt_cpu_add(s->x, s->m1, n * D);
    frt_cpu_layernorm(s->h, s->x, y->ln2_w, y->ln2_b, n, D, c->v_eps);
    lin(s->m1, s->h, y->fc1_w, y->fc1_b, n, D, I);
    frt_cpu_gelu_tanh(s->m1, s->m1, n * I);
    lin(s->m2, s->m1, y->fc2_w, y->fc2_b, n, I, D);
    frt_cpu_add(s->x, s->m2, n * D);
}

/* One camera's image [3, H, W] -> its projected tokens [n_patch, t.width]. */
static void vision_camera(pi0 *P, const float *img, float *tokens)
{
    const pi0_config *c = &P->c;
    const pi0_weights *w = &P->w;
    pi0_scratch *s = &P->s;
    const int n = c->n_patch, D = c->v_width, K = 3 * c->patch * c->patch;
    frt_cpu_patchify(s->patches, img, 3, c->image_size, c->image_size, c->patch);
    lin(s->x, s->patches, w->patch_w, w->patch_b, n, K, D);
    frt_cpu_add(s->x, w->pos_emb, n * D);
    memset(s->allow, 1, (size_t)n * n);
    for (int l = 0; l < c->v_layers; l++) vit_layer(P, &w->vit[l], n);
    frt_cpu_layernorm(s->x, s->x, w->post_ln_w, w->post_ln_b, n, D, c->v_eps);
    lin(tokens, s->x, w->proj_w, w->proj_b, n, D, c->t.width);
}

static void task_vision(void *arg)
{
    const pi0_task *a = arg;
    frt_model *m = a->m;
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    const pi0_io io = io_of(m, a->rollout);
    float *tok = port(m, "vision_tokens", FRT_IO_OUTPUT);
    const size_t img = (size_t)3 * c->image_size * c->image_size, out = (size_t)c->n_patch * c->t.width;
    for (int cam = 0; cam < io.o->n_cameras; cam++) vision_camera(P, io.px + cam * img, tok + cam * out);
}

/* ---- Gemma layers (prefix and expert) ------------------------------------ */

/* The K and V rows of the attention: the rows this call computed (and, for
 * the expert, the prefix rows ahead of them). */
typedef struct kv_rows {
    float *k, *v;  /* [n_kv, kv_heads * head_dim] */
    int n_kv;      /* keys */
    int first;     /* the row of this call's first token */
} kv_rows;

/* x += o, or x += o * gate (Pi0.5's gated residual; gate [width] shared). */
static void residual(float *x, const float *o, const float *gate, int n, int width)
{
    if (!gate) {
        frt_cpu_add(x, o, n * width);
        return;
    }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < width; i++) x[(size_t)r * width + i] += o[(size_t)r * width + i] * gate[i];
}

/* h = norm(x): RMSNorm x (1 + w), or adaRMSNorm with mod = [scale, shift,
 * gate]. Returns the residual gate (NULL for a plain norm). */
static const float *norm(float *h, const float *x, const float *w, const float *mod, int n, int width, float eps)
{
    if (!mod) {
        frt_cpu_rmsnorm(h, x, w, n, width, eps, 1);
        return NULL;
    }
    frt_cpu_rmsnorm_ada(h, x, mod, mod + width, n, width, eps);
    return mod + 2 * width;
}

/* One decoder layer over the n rows of s->x at positions s->pos, attending
 * under s->allow [n, kv->n_kv]. mods: Pi0.5's two norm modulations (NULL:
 * plain norms). last: skip the MLP (the prefix's last layer: only its KV is
 * read). */
static void gemma_layer(pi0 *P, const pi0_gemma_config *g, const pi0_gemma_layer *y, int n, const kv_rows *kv,
                        const float *mods, int last)
{
    pi0_scratch *s = &P->s;
    const int W = g->width, HD = g->head_dim, Q = g->heads * HD, KV = g->kv_heads * HD;
    const float *gate = norm(s->h, s->x, y->in_norm, mods, n, W, g->eps);
    float *k = kv->k + (size_t)kv->first * KV, *v = kv->v + (size_t)kv->first * KV;
    lin(s->q, s->h, y->q, NULL, n, W, Q);
    lin(k, s->h, y->k, NULL, n, W, KV);
    lin(v, s->h, y->v, NULL, n, W, KV);
    frt_cpu_rope(s->q, n, g->heads, HD, HD, s->pos, g->rope_theta);
    frt_cpu_rope(k, n, g->kv_heads, HD, HD, s->pos, g->rope_theta);
    frt_cpu_attention_masked(s->att, s->q, kv->k, kv->v, s->allow, n, kv->n_kv, g->heads, g->kv_heads, HD,
                             1.0f / sqrtf((float)HD));
    lin(s->m2, s->att, y->o, NULL, n, Q, W);
    residual(s->x, s->m2, gate, n, W);
    if (last) return;
    gate = norm(s->h, s->x, y->post_norm, mods ? mods + 3 * W : NULL, n, W, g->eps);
    const int fp8 = P->fp8 && g == &P->c.t; /* the prefix's MLP in FP8: its inputs through E4M3 per row */
    if (fp8) frt_fp8w_activations(s->h, s->q8, s->s8, s->h, n, W);
    lin(s->m1, s->h, y->gate, NULL, n, W, g->inter);
    lin(s->m2, s->h, y->up, NULL, n, W, g->inter);
    frt_cpu_geglu_tanh(s->m1, s->m1, s->m2, n * g->inter);
    if (fp8) frt_fp8w_activations(s->m1, s->q8, s->s8, s->m1, n, g->inter);
    lin(s->m2, s->m1, y->down, NULL, n, g->inter, W);
    residual(s->x, s->m2, gate, n, W);
}

/* ---- prefix ------------------------------------------------------------- */

/* The prefix rows in s->x and their mask: every given camera's tokens (a
 * masked camera's rows invalid), then the prompt (embedding * sqrt(width)).
 * Returns the row count. */
static int prefix_embed(frt_model *m, const pi0_io *io, int cond, uint8_t *mask)
{
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    const uint8_t *am = cond ? io->am_cond : io->am;
    const int32_t *ids = cond ? io->ids_cond : io->ids;
    const int n_tokens = cond ? io->g->n_tokens_cond : io->o->n_tokens;
    const float *tok = port(m, "vision_tokens", FRT_IO_OUTPUT);
    const int W = c->t.width, ni = io->o->n_cameras * c->n_patch;
    memcpy(P->s.x, tok, (size_t)ni * W * sizeof(float));
    for (int r = 0; r < ni; r++) mask[r] = io->cam[r / c->n_patch];
    float *lang = P->s.x + (size_t)ni * W;
    frt_cpu_embedding(lang, P->w.embed, ids, n_tokens, W);
    const float scale = sqrtf((float)W);
    for (size_t i = 0; i < (size_t)n_tokens * W; i++) lang[i] *= scale;
    memcpy(mask + ni, am, (size_t)n_tokens);
    return ni + n_tokens;
}

/* The prefix of one prompt (the task's slot: PI0_UNCOND from input_ids,
 * PI0_COND from input_ids_cond) into its KV set. Without CFG the
 * conditioned set is emptied (0 rows) instead. */
static void task_prefix(void *arg)
{
    const pi0_task *a = arg;
    frt_model *m = a->m;
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    pi0_scratch *s = &P->s;
    const pi0_io io = io_of(m, a->rollout);
    const int cond = a->slot == PI0_COND;
    if (cond && !io.g->enable) {
        if (a->rollout < 0) set_meta(&P->pre[PI0_COND])[0] = set_meta(&P->pre[PI0_COND])[1] = 0;
        return; /* a batch without CFG has no conditioned slots */
    }
    const pi0_prefix_set set = prefix_set(P, a->rollout, cond, io.g->enable), *pre = &set;
    int32_t *meta = set_meta(pre);
    uint8_t *mask = set_mask(P, pre);
    memset(mask, 0, (size_t)c->max_prefix);
    const int n = prefix_embed(m, &io, cond, mask);
    int valid = 0;
    for (int r = 0; r < n; r++) {
        valid += mask[r];
        s->pos[r] = valid - 1 < 0 ? 0 : valid - 1;
        for (int j = 0; j < n; j++) s->allow[(size_t)r * n + j] = mask[r] && mask[j];
    }
    for (int l = 0; l < c->t.layers; l++) {
        kv_rows kv = {set_kv(P, pre, pre->k, l), set_kv(P, pre, pre->v, l), n, 0};
        gemma_layer(P, &c->t, &P->w.tl[l], n, &kv, NULL, l == c->t.layers - 1);
    }
    meta[0] = n;
    meta[1] = valid;
}

/* ---- noise and the flow ---------------------------------------------------- */

static int prefix_rows(const pi0 *P, int rollout, int cond, int cfg)
{
    const pi0_prefix_set set = prefix_set(P, rollout, cond, cfg);
    return set_meta(&set)[0];
}

/* x_1: the caller's noise or the episode's; fused, into both slots. */
static void task_noise(void *arg)
{
    const pi0_task *a = arg;
    frt_model *m = a->m;
    pi0 *P = pi0_of(m);
    const int n = P->c.chunk * P->c.action_dim;
    const pi0_io io = io_of(m, a->rollout);
    const int cfg = io.g->enable;
    if (prefix_rows(P, a->rollout, 0, cfg) < 1 || (cfg && prefix_rows(P, a->rollout, 1, cfg) < 1)) {
        if (m->task_status == 0) m->task_status = FRT_ERR_STATE; /* no prefix: the steps below do nothing */
        return;
    }
    frt_episode *e = frt_buffer_ptr(m->episode);
    float *x = a->fused ? P->s.xs : P->s.xt;
    if (io.o->noise_given)
        memcpy(x, io.noise, (size_t)n * sizeof(float));
    else
        pi0_episode_noise(x, n, e->seed, e->step);
    if (a->fused) memcpy(x + n, x, (size_t)n * sizeof(float));
    e->step++;
}

/* The suffix embedding of one step into s->x; returns its row count. Pi0.5
 * also fills s->mods with every expert norm's modulation. */
static int suffix_embed(frt_model *m, const float *xt, const float *state, float t)
{
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    const pi0_weights *w = &P->w;
    pi0_scratch *s = &P->s;
    const int E = c->e.width, A = c->action_dim, off = c->pi05 ? 0 : 1;
    pi0_time_sincos(s->cond, E, t, c->min_period, c->max_period);
    lin(s->x + (size_t)off * E, xt, w->action_in_w, w->action_in_b, c->chunk, A, E);
    if (c->pi05) {
        lin(s->mod, s->cond, w->time_in_w, w->time_in_b, 1, E, E);
        frt_cpu_silu(s->mod, s->mod, E);
        lin(s->cond, s->mod, w->time_out_w, w->time_out_b, 1, E, E);
        frt_cpu_silu(s->cond, s->cond, E);
        for (int l = 0; l < c->e.layers; l++) {
            lin(s->mods + (size_t)(2 * l) * 3 * E, s->cond, w->el[l].in_dense_w, w->el[l].in_dense_b, 1, E, 3 * E);
            lin(s->mods + (size_t)(2 * l + 1) * 3 * E, s->cond, w->el[l].post_dense_w, w->el[l].post_dense_b, 1, E,
                3 * E);
        }
        lin(s->mods + (size_t)(2 * c->e.layers) * 3 * E, s->cond, w->e_norm_dense_w, w->e_norm_dense_b, 1, E, 3 * E);
        return c->chunk;
    }
    lin(s->x, state, w->state_w, w->state_b, 1, c->state_dim, E);
    for (int r = 0; r < c->chunk; r++) {
        memcpy(s->h + (size_t)r * 2 * E, s->x + (size_t)(1 + r) * E, (size_t)E * sizeof(float));
        memcpy(s->h + (size_t)r * 2 * E + E, s->cond, (size_t)E * sizeof(float));
    }
    lin(s->m1, s->h, w->atm_in_w, w->atm_in_b, c->chunk, 2 * E, E);
    frt_cpu_silu(s->m1, s->m1, c->chunk * E);
    lin(s->x + E, s->m1, w->atm_out_w, w->atm_out_b, c->chunk, E, E);
    return 1 + c->chunk;
}

/* Positions and mask of the suffix rows: they continue after the valid
 * prefix; they see the valid prefix rows; Pi0's state token (row 0) sees
 * itself only of the suffix, the action rows see the whole suffix. */
static void suffix_mask(pi0 *P, int ns, int np, int valid, const uint8_t *pmask)
{
    pi0_scratch *s = &P->s;
    const int nk = np + ns;
    for (int r = 0; r < ns; r++) {
        s->pos[r] = valid + r;
        uint8_t *a = s->allow + (size_t)r * nk;
        memcpy(a, pmask, (size_t)np);
        for (int j = 0; j < ns; j++) a[np + j] = P->c.pi05 || r > 0 || j == 0;
    }
}

/* vel = v(xt, t) of the expert on one prefix KV set (state: Pi0's state
 * input). */
static void expert_velocity(frt_model *m, const pi0_prefix_set *pre, const float *state, const float *xt, int step,
                            float *vel)
{
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    pi0_scratch *s = &P->s;
    const int E = c->e.width, KV = c->t.kv_heads * c->t.head_dim;
    const int32_t *meta = set_meta(pre);
    const int np = meta[0];
    const int ns = suffix_embed(m, xt, state, (float)(1.0 + step * (-1.0 / c->n_steps)));
    suffix_mask(P, ns, np, meta[1], set_mask(P, pre));
    for (int l = 0; l < c->e.layers; l++) {
        memcpy(s->k, set_kv(P, pre, pre->k, l), (size_t)np * KV * sizeof(float));
        memcpy(s->v, set_kv(P, pre, pre->v, l), (size_t)np * KV * sizeof(float));
        kv_rows kv = {s->k, s->v, np + ns, np};
        gemma_layer(P, &c->e, &P->w.el[l], ns, &kv, c->pi05 ? s->mods + (size_t)(2 * l) * 3 * E : NULL, 0);
    }
    const int off = ns - c->chunk;
    norm(s->h, s->x + (size_t)off * E, P->w.e_norm, c->pi05 ? s->mods + (size_t)(2 * c->e.layers) * 3 * E : NULL,
         c->chunk, E, c->e.eps);
    lin(vel, s->h, P->w.action_out_w, P->w.action_out_b, c->chunk, E, c->action_dim);
}

/* The Euler step x += dt v (and velocity0 at step 0, unless NULL). */
static void euler(frt_model *m, int step, float *x, const float *vel, float *velocity0)
{
    const pi0_config *c = &pi0_of(m)->c;
    const int n = c->chunk * c->action_dim;
    if (step == 0 && velocity0) memcpy(velocity0, vel, (size_t)n * sizeof(float));
    const float dtf = (float)(-1.0 / c->n_steps);
    for (int i = 0; i < n; i++) x[i] += dtf * vel[i];
}

/* The architecture of a flow task's model; NULL when an earlier task of
 * this replay failed (the rest of the flow does nothing). */
static pi0 *flow_model(const pi0_task *a) { return a->m->task_status ? NULL : pi0_of(a->m); }

/* Key 1: one Euler step; under CFG the conditioned then the unconditioned
 * expert pass from the same x_t, combined. */
static void task_step(void *arg)
{
    const pi0_task *a = arg;
    frt_model *m = a->m;
    pi0 *P = flow_model(a);
    if (!P) return;
    pi0_scratch *s = &P->s;
    const pi0_io io = io_of(m, a->rollout);
    const int cfg = io.g->enable;
    const pi0_prefix_set uncond = prefix_set(P, a->rollout, 0, cfg);
    if (cfg) {
        const pi0_prefix_set cond = prefix_set(P, a->rollout, 1, cfg);
        expert_velocity(m, &cond, io.state, s->xt, a->step, s->vel_c);
        expert_velocity(m, &uncond, io.state, s->xt, a->step, s->vel);
        frt_cpu_cfg_combine(s->vel, s->vel_c, s->vel, io.g->beta, P->c.chunk * P->c.action_dim);
    } else {
        expert_velocity(m, &uncond, io.state, s->xt, a->step, s->vel);
    }
    euler(m, a->step, s->xt, s->vel, io.velocity0);
}

/* Key 2, one slot of a step: v[slot] = v(x[slot]) on the slot's prefix
 * (slot 0 conditioned, slot 1 unconditioned). */
static void task_step_slot(void *arg)
{
    const pi0_task *a = arg;
    pi0 *P = flow_model(a);
    if (!P) return;
    const size_t n = (size_t)P->c.chunk * P->c.action_dim;
    const pi0_io io = io_of(a->m, a->rollout);
    const pi0_prefix_set set = prefix_set(P, a->rollout, a->slot == 0, 1);
    expert_velocity(a->m, &set, io.state, P->s.xs + a->slot * n, a->step, P->s.vs + a->slot * n);
}

/* Key 2, the end of a step: the guided velocity from both slots, the Euler
 * step on slot 0, slot 0's x mirrored into slot 1. */
static void task_combine(void *arg)
{
    const pi0_task *a = arg;
    pi0 *P = flow_model(a);
    if (!P) return;
    pi0_scratch *s = &P->s;
    const pi0_io io = io_of(a->m, a->rollout);
    const int n = P->c.chunk * P->c.action_dim;
    frt_cpu_cfg_combine(s->vel, s->vs, s->vs + n, io.g->beta, n);
    euler(a->m, a->step, s->xs, s->vel, io.velocity0);
    memcpy(s->xs + n, s->xs, (size_t)n * sizeof(float));
}

static void task_output(void *arg)
{
    const pi0_task *a = arg;
    frt_model *m = a->m;
    pi0 *P = flow_model(a);
    if (!P) return;
    const size_t n = (size_t)P->c.chunk * P->c.action_dim;
    memcpy(io_of(m, a->rollout).actions, a->fused ? P->s.xs : P->s.xt, n * sizeof(float));
    if (a->fused) memcpy(port(m, "velocity_slots", FRT_IO_OUTPUT), P->s.vs, 2 * n * sizeof(float));
}

/* The noise, every Euler step and the output: the flow on the prefix(es)
 * the state holds; fused: two slot tasks and a combine per step. */
static int record_flow(frt_stream *st, frt_model *m, int fused, int rollout)
{
    pi0_task a = {m, 0, 0, fused, rollout};
    FRT_TRY(frt_stream_host_task(st, task_noise, &a, sizeof a));
    for (a.step = 0; a.step < pi0_of(m)->c.n_steps; a.step++) {
        if (!fused) {
            FRT_TRY(frt_stream_host_task(st, task_step, &a, sizeof a));
            continue;
        }
        for (a.slot = 0; a.slot < 2; a.slot++) FRT_TRY(frt_stream_host_task(st, task_step_slot, &a, sizeof a));
        a.slot = 0;
        FRT_TRY(frt_stream_host_task(st, task_combine, &a, sizeof a));
    }
    return frt_stream_host_task(st, task_output, &a, sizeof a);
}

/* One inference (rollout -1: the single one): vision once, the
 * unconditioned prefix, the conditioned one (empty without CFG), the flow. */
static int record_inference(frt_stream *st, frt_model *m, int fused, int rollout)
{
    pi0_task a = {m, 0, PI0_UNCOND, fused, rollout};
    FRT_TRY(frt_stream_host_task(st, task_vision, &a, sizeof a));
    FRT_TRY(frt_stream_host_task(st, task_prefix, &a, sizeof a));
    a.slot = PI0_COND;
    FRT_TRY(frt_stream_host_task(st, task_prefix, &a, sizeof a));
    return record_flow(st, m, fused, rollout);
}

/* Key 1 (rc->bucket 0) or the fused key 2 (rc->bucket 2). */
static int record_policy(frt_stream *st, void *user)
{
    const frt_record_ctx *rc = user;
    return record_inference(st, rc->m, rc->bucket == 2, -1);
}

static int record_denoise(frt_stream *st, void *user)
{
    const frt_record_ctx *rc = user;
    return record_flow(st, rc->m, rc->bucket == 2, -1);
}

/* The batch of rc->bucket = n rollouts: each rollout's whole inference (the
 * single inference's tasks on its rows and slots), one after another; the
 * guided ones in the serial arrangement (bit-identical to the fused one on
 * this backend). */
static int record_batch(frt_stream *st, void *user)
{
    const frt_record_ctx *rc = user;
    for (int r = 0; r < rc->bucket; r++) FRT_TRY(record_inference(st, rc->m, 0, r));
    return 0;
}

/* ---- scratch and the backend table ----------------------------------------- */

static int imax(int a, int b) { return a > b ? a : b; }

static int alloc_scratch(frt_model *m)
{
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    pi0_scratch *s = &P->s;
    const int ns = c->chunk + 1, rows = imax(c->max_prefix, imax(c->n_patch, ns)), keys = c->max_prefix + ns;
    const int W = imax(imax(c->v_width, c->t.width), 2 * c->e.width);
    const int Q = imax(imax(c->v_width, c->t.heads * c->t.head_dim), c->e.heads * c->e.head_dim);
    const int I = imax(imax(c->v_inter, c->t.inter), imax(c->e.inter, imax(W, Q)));
    const int KV = imax(c->v_width, c->t.kv_heads * c->t.head_dim), E = c->e.width;
    s->x = malloc((size_t)rows * W * sizeof(float));
    s->h = malloc((size_t)rows * W * sizeof(float));
    s->q = malloc((size_t)rows * Q * sizeof(float));
    s->att = malloc((size_t)rows * Q * sizeof(float));
    s->m1 = malloc((size_t)rows * I * sizeof(float));
    s->m2 = malloc((size_t)rows * I * sizeof(float));
    s->k = malloc((size_t)keys * KV * sizeof(float));
    s->v = malloc((size_t)keys * KV * sizeof(float));
    s->patches = malloc((size_t)c->n_patch * 3 * c->patch * c->patch * sizeof(float));
    s->allow = malloc((size_t)rows * keys);
    s->pos = malloc((size_t)keys * sizeof(int32_t));
    s->xt = malloc((size_t)c->chunk * c->action_dim * sizeof(float));
    s->vel = malloc((size_t)c->chunk * c->action_dim * sizeof(float));
    s->cond = malloc((size_t)E * sizeof(float));
    s->mod = malloc((size_t)3 * E * sizeof(float));
    s->mods = malloc((size_t)(2 * c->e.layers + 1) * 3 * E * sizeof(float));
    s->vel_c = malloc((size_t)c->chunk * c->action_dim * sizeof(float));
    s->xs = malloc((size_t)2 * c->chunk * c->action_dim * sizeof(float));
    s->vs = malloc((size_t)2 * c->chunk * c->action_dim * sizeof(float));
    if (P->fp8) {
        s->q8 = malloc((size_t)rows * imax(c->t.width, c->t.inter));
        s->s8 = malloc((size_t)rows * sizeof(float));
        if (!s->q8 || !s->s8) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory for the fp8 scratch");
    }
    if (!s->x || !s->h || !s->q || !s->att || !s->m1 || !s->m2 || !s->k || !s->v || !s->patches || !s->allow ||
        !s->pos || !s->xt || !s->vel || !s->cond || !s->mod || !s->mods || !s->vel_c || !s->xs || !s->vs)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory for the activations");
    return 0;
}

static void free_all(frt_model *m)
{
    pi0 *P = pi0_of(m);
    if (!P) return;
    pi0_free_weights(m);
    pi0_scratch *s = &P->s;
    void *bufs[] = {s->x, s->h, s->q, s->att, s->m1, s->m2, s->k, s->v, s->patches, s->allow, s->pos,
                    s->xt, s->vel, s->cond, s->mod, s->mods, s->vel_c, s->xs, s->vs, s->q8, s->s8};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(s, 0, sizeof *s);
}

/* params.weight_dtype FRT_WEIGHT_FP8: the prefix's gate, up and down
 * (every layer but the last, whose MLP never runs) through E4M3 and back
 * at load, one scale an output row: the codes the cuda backend uploads,
 * emulated in f32 (docs/policies.md "FP8 weights"). */
static int cpu_load_weights(frt_model *m)
{
    FRT_TRY(pi0_load_weights(m));
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    P->fp8 = m->params.weight_dtype == FRT_WEIGHT_FP8;
    if (!P->fp8) return 0;
    const int W = c->t.width, I = c->t.inter;
    for (int l = 0; l + 1 < c->t.layers; l++) { /* the arena is the loader's own copy: rewritten in place */
        const pi0_gemma_layer *y = &P->w.tl[l];
        FRT_TRY(frt_fp8w_round_trip((float *)y->gate, I, W, "the prefix's gate_proj"));
        FRT_TRY(frt_fp8w_round_trip((float *)y->up, I, W, "the prefix's up_proj"));
        FRT_TRY(frt_fp8w_round_trip((float *)y->down, W, I, "the prefix's down_proj"));
    }
    m->weights_desc = "weights=f32,prefix_mlp=f8_e4m3,scale=per-channel,at-load";
    return 0;
}

/* The whole parsed config (zeroed before parsing, so padding is zero) goes
 * into the fingerprint: the expert's shapes and eps, the steps and the time
 * periods change the arithmetic too. */
static uint64_t fingerprint_extra(const frt_model *m) { return XXH64(&pi0_of(m)->c, sizeof(pi0_config), 0x9100); }

const frt_arch_backend frt_pi0_cpu_backend = {
    .name = "cpu",
    .kv_dtype = FRT_DT_F32,
    .state_dtypes = "weights=f32,kv=f32",
    .weights_fp8 = 1, /* params.weight_dtype FRT_WEIGHT_FP8: the prefix's MLP emulated (cpu_load_weights) */
    .load_weights = cpu_load_weights,
    .alloc_scratch = alloc_scratch,
    .free = free_all,
    .fingerprint_extra = fingerprint_extra,
    .record_policy = record_policy,
    .record_policy_denoise = record_denoise,
    .policy_cfg_fused = 1,
    .record_policy_batch = record_batch,
};
