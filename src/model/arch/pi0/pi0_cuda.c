/*
 * arch/pi0/pi0_cuda.c - the Pi0 / Pi0.5 inference on the cuda backend: the
 * same function, step for step, as pi0_cpu.c (whose header and pi0.h name
 * the math), launched as kernels on the model's stream and captured into
 * ONE CUDA graph per shape key at load (key 1: vision for every camera
 * slot, the prefix, the noise, every Euler step, the output; the denoise
 * graph: the flow alone on the prefix the state holds).
 *
 * Storage and precision:
 *   weights      bf16 matrices in one device allocation, converted at load
 *                from the f32 weights pi0_weights.c reads; fused per layer
 *                (SigLIP q | k | v, Gemma q | k | v and gate | up); the patch
 *                embedding's rows padded to a multiple of 8 columns. Norm
 *                weights, biases, the position embedding f32. With
 *                params.weight_dtype FRT_WEIGHT_FP8 the prefix's gate | up
 *                and down are E4M3 codes with one f32 scale an output row
 *                (quantized at load), their inputs quantized per row and
 *                the products on cuBLASLt's FP8 kernels (docs/policies.md
 *                "FP8 weights").
 *                Work that depends on the timestep only is done once at
 *                load on the host in f32: Pi0.5's adaRMSNorm modulations
 *                of every step ([steps, 2 L + 1, 3 E]) and Pi0's time half
 *                of action_time_mlp_in ([steps, E], folded into its bias).
 *   activations  residual streams f32; GEMM inputs bf16; GEMM outputs f32
 *                (cuBLASLt, fp32 accumulation), the gate | up products'
 *                bf16 (the GeGLU's input); the vision attention in one
 *                launch for every camera (frt_cuda_attention_mha), the
 *                prefix's as products (kernels_policy_cuda.h:
 *                frt_cuda_attention_masked, bf16 operands, fp32 softmax),
 *                the expert's inside its layer tail (frt_cuda_gemma_mlp
 *                with att, one slot's rows) or as products.
 *   state        prefix.L.k / .v bf16 [P, kv, hd] (kv_dtype), mask, meta,
 *                the episode record: what pi0.c declares.
 *
 * Shapes: the graph runs at the declared maxima: every camera slot (an
 * absent or masked camera's rows are invalid: never attended to) and
 * max_tokens prompt rows (padding invalid). So one capture serves every
 * observation; the rows of the prefix are laid out by slot (camera c at
 * rows c * n_patch, the prompt after max_cameras * n_patch), which changes
 * no valid row's result: positions are the cumulative sum of the valid
 * rows, as on the cpu backend.
 *
 * What changes between replays is read from device memory: the ports
 * (pixels, masks, ids, state, noise, options), the state (prefix KV, mask,
 * meta) and the episode record. A replay without a prefix in the state
 * (denoise before any run) is reported through a host task reading meta
 * copied to pinned memory (FRT_ERR_STATE), and leaves the episode as it was.
 *
 * Classifier-free guidance, serial (pi0.h): the conditioned prefix
 * into prefix_cond.*, then per step the conditioned and the unconditioned
 * expert passes from one x_t, combined by frt_cuda_cfg_combine with the
 * beta of the cfg port. Fused (FRT_POLICY_CFG_FUSED, the default mode):
 * the same two prefixes, then per step ONE expert pass at batch 2 (slot 0
 * conditioned, slot 1 unconditioned, [2 ns] rows in every GEMM, each slot
 * attending over its own prefix set), the combine stepping slot 0 and a
 * device copy mirroring it into slot 1. A CFG inference is a variant of its
 * own (the arrangement and the prompt buckets of both prompts in its key),
 * so is the CFG denoise-only graph.
 *
 * Batched rollouts (frt_policy_run_batch, params.policy_batch = S slots):
 * one graph per rollout count n, CFG on or off and the variant of the
 * batch's largest observation (its camera slots and prompt buckets: every
 * rollout's absent cameras and padding are masked rows), captured on first
 * use. Each rollout's vision and prefix run one after another at that shape
 * into its batch slot (its KV in the batch work buffers
 * pc->bk / bv [S, Pp + nsp, KV] and in the state's batch.*), then every
 * Euler step runs ONE expert pass over all the slots' action tokens,
 * stacked as [B ns] rows in every GEMM (the weights read once for all
 * slots), each slot attending over its own prefix (one batched attention,
 * the slots a constant stride apart): B = n slots, or with CFG 2 n (slot 2r
 * conditioned, 2r + 1 unconditioned, as fused CFG's pair, combined and
 * mirrored per rollout; Pi0.5's suffix and action head over all slots'
 * rows in one product too). Not bit-identical to n single runs (other GEMM
 * shapes: the largest observation's camera slots and prompt bucket, B ns
 * rows in the expert's products: cosine >= 0.999 against them, as any CUDA
 * result against another); exact: one graph replayed on the same inputs
 * gives byte-identical actions.
 *
 * The node count of every captured inference variant is kept
 * (frt_policy_graph_nodes); frt_model_params.gemm_autotune tunes every GEMM
 * plan before the first capture.
 *
 * Not supported on this backend (FRT_ERR_UNSUPPORTED, docs/policies.md):
 * widths, MLP sizes, action / state dims and
 * q / kv widths that are not multiples of 8 (cuBLASLt rows); several KV
 * heads in Gemma (GQA other than 1 KV head or MHA).
 */
#include "model/arch/pi0/pi0.h"

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "model/arch/pi0/pi0_glue.h"
#include "model/fp8_weights.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define F32 FRT_CUDA_F32
#define BF16 FRT_CUDA_BF16
#define ALIGN 256
#define GEMM_WS (32u << 20)
#define BMM_WS (32u << 20)

#define PC_NODE_TABLE 64

/* The expert's slots: a batch takes up to FRT_POLICY_BATCH_MAX. */
_Static_assert(PI0_KV_SLOTS >= FRT_POLICY_BATCH_MAX, "pi0 cuda: PI0_KV_SLOTS below the batch slots");

/* Device pointers of one SigLIP layer. */
typedef struct pc_vit {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b; /* [D] */
    const uint16_t *qkv, *o, *fc1, *fc2;        /* [3D, D], [D, D], [I, D], [D, I] */
    const float *qkv_b, *o_b, *fc1_b, *fc2_b;   /* [3D], [D], [I], [D] */
    const uint16_t *qkv_bb, *fc1_bb;            /* qkv_b, fc1_b in bf16 (the GEMM epilogues' bias: vit_epilogue) */
} pc_vit;

/* Device pointers of one Gemma layer (prefix or expert). */
typedef struct pc_gemma {
    const float *in_norm, *post_norm;  /* [W] (NULL in Pi0.5's expert) */
    const uint16_t *qkv, *o, *gu, *down; /* [Q + 2 KV, W], [W, Q], [2 I, W], [W, I] */
    /* FP8 weights (params.weight_dtype FRT_WEIGHT_FP8, the prefix's MLP):
     * E4M3 codes of gate | up and down, one f32 scale an output row (gu and
     * down are then NULL) */
    const uint8_t *gu8, *down8; /* [2 I, W], [W, I] */
    const float *gu_s, *down_s; /* [2 I], [W] */
} pc_gemma;

typedef struct pc_model {
    /* sizes */
    int NV, Kp, P, Pp, ns, nsp, lds_v, lds_p, lds_e, KV, n_act;
    frt_cuda_gemm *gemm;
    frt_cuda_gemm_fp8 *g8; /* the prefix MLP's FP8 products (fp8) */
    int fp8;               /* params.weight_dtype FRT_WEIGHT_FP8 */
    uint8_t *x8;           /* fp8: a product's input codes [P, max(W, I)] */
    float *x8s;            /* and their scales [P] */
    frt_cuda_bmm *bmm;
    frt_buffer *wbuf, *sbuf, *flag;
    /* weights */
    const uint16_t *patch_w, *proj_w, *embed, *action_in_w, *action_out_w, *state_w, *atm_a_w, *atm_out_w;
    const float *patch_b, *pos_emb, *post_ln_w, *post_ln_b, *proj_b, *e_norm, *action_in_b, *action_out_b;
    const float *state_b, *atm_out_b, *t_inv_freq, *e_inv_freq;
    const float *mods;  /* Pi0.5: [steps, 2 L + 1, 3 E] */
    const float *atm_c; /* Pi0: [steps, E], the time half of action_time_mlp_in plus its bias */
    pc_vit *vit;
    /* every SigLIP layer's q | k | v and fc1 biases are bf16 values, so those
     * GEMMs add them (and fc1's GELU) in cuBLASLt's epilogue, into bf16
     * (vit_layer; FRT_PI0_VIT_EPILOGUE=0 turns it off) */
    int vit_epi;
    pc_gemma *tl, *el;
    /* scratch (device) */
    float *x, *y, *scores, *xt, *vel, *vel_c;
    float *xs, *vs; /* fused CFG: [2, chunk, A] x_t and velocity of slot 0 (conditioned), slot 1 */
    uint16_t *patches, *hb, *qkvb, *attb, *actb, *probs, *xtb, *stb;
    /* per prefix set (PI0_UNCOND, PI0_COND) and layer: [Pp + nsp, KV] bf16,
     * prefix rows [0, P), suffix rows [Pp, Pp + ns) */
    uint16_t **ek[2], **ev[2];
    int32_t *pos_p, *pos_pc, *pos_s[2]; /* pos_pc: the conditioned prefix's beside pos_p (prefix_pair) */
    /* batched rollouts (slots = params.policy_batch, 0: none): per layer the
     * attention's KV of every slot [slots, Pp + nsp, KV] bf16 (slot stride
     * bkv elements; prefix rows [0, P), suffix rows [Pp, Pp + ns)); the
     * slots' suffix positions [slots, nsp]; x_t and velocity [slots, chunk, A] */
    int slots;
    size_t bkv;
    uint16_t **bk, **bv;
    int32_t *bpos;
    float *bx, *bvel;
    float *cs; /* the suffix positions' RoPE table per prefix set, PI0_COND first: [2][ns][hd / 2][2] */
    /* the expert's layer tail as one launch (frt_cuda_gemma_mlp) at one
     * slot's rows: its work buffer, and whether the device takes it */
    void *tail_work, *att_work;
    size_t tail_bytes, att_bytes;
    int tail_on;
    /* the graph nodes of each captured inference variant (frt_policy_graph_nodes) */
    int node_code[PC_NODE_TABLE], node_n[PC_NODE_TABLE], n_node;
} pc_model;

/* The rows of one policy graph variant: `cams` camera slots and a prompt
 * bucket of `tok` tokens (pi0_policy_variant). */
typedef struct pc_shape {
    int cams, tok;
    int nv;   /* cams * n_patch image rows */
    int rows; /* nv + tok prefix rows */
    int lds;  /* the prefix's score row stride */
} pc_shape;

static pc_model *pc_of(const frt_model *m) { return (pc_model *)m->bk_data; }
static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
static int imax(int a, int b) { return a > b ? a : b; }
static int round8(int x) { return (x + 7) / 8 * 8; }
static void *sp(frt_model *m) { return frt_stream_native(m->stream); }

static void *port(frt_model *m, const char *name, frt_io_dir dir)
{
    return frt_buffer_ptr(frt_model_io_find(m, name, dir)->buf);
}

/* The port row rollout r of a batch reads (batch_NAME row r), or the
 * single inference's port (r < 0). */
static void *port_row(frt_model *m, const char *name, int r)
{
    char full[FRT_STATE_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", r < 0 ? "" : "batch_", name);
    const frt_io_entry *e = frt_model_io_find(m, full, FRT_IO_INPUT);
    if (r < 0) return frt_buffer_ptr(e->buf);
    return (char *)frt_buffer_ptr(e->buf) + e->bytes / (size_t)e->decl.shape[0] * (size_t)r;
}

/* ---- sizes and limits ------------------------------------------------------ */

static int check_dims(const pi0_config *c)
{
    const struct {
        const char *what;
        int v;
    } d[] = {{"vision width", c->v_width},          {"vision MLP", c->v_inter},
             {"prefix width", c->t.width},          {"prefix MLP", c->t.inter},
             {"prefix heads x head_dim", c->t.heads * c->t.head_dim},
             {"expert width", c->e.width},          {"expert MLP", c->e.inter},
             {"expert heads x head_dim", c->e.heads * c->e.head_dim},
             {"KV heads x head_dim", c->t.kv_heads * c->t.head_dim},
             {"vision head_dim", c->v_head_dim},    {"action_dim", c->action_dim},
             {"state_dim", c->state_dim}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i].v % 8)
            return frt_error(FRT_ERR_UNSUPPORTED,
                             "pi0 cuda: %s = %d is not a multiple of 8 (cuBLASLt rows must be 16-byte aligned)",
                             d[i].what, d[i].v);
    if (c->t.kv_heads != 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "pi0 cuda: %d KV heads (the CUDA backend takes Gemma's 1 KV head)",
                         c->t.kv_heads);
    return 0;
}

static void set_sizes(const pi0_config *c, pc_model *pc)
{
    pc->NV = c->max_cameras * c->n_patch;
    pc->Kp = round8(3 * c->patch * c->patch);
    pc->P = c->max_prefix;
    pc->Pp = round8(pc->P);
    pc->ns = c->chunk + (c->pi05 ? 0 : 1);
    pc->nsp = round8(pc->ns);
    pc->lds_v = round8(c->n_patch);
    pc->lds_p = round8(pc->P);
    pc->lds_e = pc->Pp + pc->nsp;
    pc->KV = c->t.kv_heads * c->t.head_dim;
    pc->n_act = c->chunk * c->action_dim;
}

/* The prompt bucket of `tokens` valid slots: 16, 32, 64, ... capped at
 * max_tokens. */
static int bucket_of(const pi0_config *c, int tokens)
{
    int b = 16;
    while (b < tokens && b < c->max_tokens) b *= 2;
    return b < c->max_tokens ? b : c->max_tokens;
}

static pc_shape shape_of(const pi0_config *c, int cams, int tok)
{
    pc_shape sh = {cams, tok, cams * c->n_patch, cams * c->n_patch + tok, 0};
    sh.lds = round8(sh.rows);
    return sh;
}

/* A variant's code (rc->bucket): the fused CFG arrangement, the camera
 * slots, CFG, the conditioned prompt's bucket, the prompt's bucket
 * (buckets <= 4096: 13 bits; cameras <= 3: 2 bits). The denoise-only graph
 * of CFG is cams 0, cfg 1. */
#define VAR_TOK 0x1fff
static int variant_code(int fused, int cams, int cfg, int tok_cond, int tok)
{
    return fused << 29 | cams << 27 | cfg << 26 | tok_cond << 13 | tok;
}
static int code_cams(int code) { return code >> 27 & 3; }
static int code_cfg(int code) { return code > 0 && (code >> 26 & 1); }
static int code_fused(int code) { return code > 0 && (code >> 29 & 1); }

/* ---- weights: f32 host -> bf16 / f32 device ---------------------------------- */

typedef struct wload {
    frt_model *m;
    pc_model *pc;
    int pass;    /* 0: size, 1: upload */
    size_t used; /* bytes */
    char *base;
    int bf16_bias; /* pass 1: every SigLIP q | k | v and fc1 bias so far is a bf16 value (put_vec_bf16) */
} wload;

/* A block of rows of a host f32 matrix: rows x cols from p, rows ld apart. */
typedef struct msrc {
    const float *p;
    int rows, ld;
} msrc;

/* Writes n bytes of host data at the arena offset off (waits: the host copy is freed next). */
static int upload(wload *wl, size_t off, const void *data, size_t n)
{
    FRT_TRY(frt_buffer_write(wl->pc->wbuf, off, data, n, wl->m->stream));
    return frt_stream_sync(wl->m->stream);
}

/* The row blocks src[0..ns) stacked into one bf16 matrix of cols columns,
 * rows of dcols (>= cols, padded with zeros). */
static int put_mat(wload *wl, const uint16_t **dst, int cols, int dcols, const msrc *src, int ns)
{
    size_t rows = 0;
    for (int i = 0; i < ns; i++) rows += (size_t)src[i].rows;
    const size_t n = rows * (size_t)dcols, off = wl->used;
    wl->used += align_up(n * sizeof(uint16_t));
    if (wl->pass == 0) return 0;
    uint16_t *h = calloc(n + 1, sizeof *h);
    if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory converting the weights");
    size_t r0 = 0;
    for (int i = 0; i < ns; i++)
        for (int r = 0; r < src[i].rows; r++, r0++)
            frt_f32_array_to_bf16(src[i].p + (size_t)r * src[i].ld, h + r0 * dcols, (size_t)cols);
    int rc = upload(wl, off, h, n * sizeof *h);
    free(h);
    *dst = (const uint16_t *)(wl->base + off);
    return rc;
}

/* The row blocks src[0..ns) (rows cols apart) stacked into one matrix
 * [rows, cols] of E4M3 codes with one f32 scale a row (max |row| / 448,
 * frt_fp8w_quantize_rows: the FP8 weights quantized at load, docs/fp8.md). */
static int put_fp8(wload *wl, const uint8_t **dst, const float **scale, int cols, const msrc *src, int ns)
{
    size_t rows = 0;
    for (int i = 0; i < ns; i++) {
        if (src[i].ld != cols) return frt_error(FRT_ERR_INVALID_ARGUMENT, "pi0 cuda: put_fp8 takes whole rows");
        rows += (size_t)src[i].rows;
    }
    const size_t off = wl->used, soff = off + align_up(rows * (size_t)cols);
    wl->used = soff + align_up(rows * sizeof(float));
    if (wl->pass == 0) return 0;
    uint8_t *q = malloc(rows * (size_t)cols + 1);
    float *sc = malloc(rows * sizeof(float) + 1);
    if (!q || !sc) {
        free(q), free(sc);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory quantizing the weights");
    }
    for (size_t i = 0, r0 = 0; i < (size_t)ns; r0 += (size_t)src[i].rows, i++)
        frt_fp8w_quantize_rows(q + r0 * cols, sc + r0, src[i].p, src[i].rows, cols);
    int rc = upload(wl, off, q, rows * (size_t)cols);
    if (rc == 0) rc = upload(wl, soff, sc, rows * sizeof(float));
    free(q), free(sc);
    *dst = (const uint8_t *)(wl->base + off);
    *scale = (const float *)(wl->base + soff);
    return rc;
}

/* One matrix [rows, cols]. */
static int put_m(wload *wl, const uint16_t **dst, const float *p, int rows, int cols)
{
    msrc s = {p, rows, cols};
    return put_mat(wl, dst, cols, cols, &s, 1);
}

/* The f32 vectors src[0..ns) (lens[i] floats each) concatenated. */
static int put_vec(wload *wl, const float **dst, const float *const *src, const size_t *lens, int ns)
{
    size_t n = 0;
    for (int i = 0; i < ns; i++) n += lens[i];
    const size_t off = wl->used;
    wl->used += align_up(n * sizeof(float));
    if (wl->pass == 0) return 0;
    for (size_t i = 0, o = 0; i < (size_t)ns; o += lens[i], i++)
        if (src[i]) FRT_TRY(frt_buffer_write(wl->pc->wbuf, off + o * sizeof(float), src[i], lens[i] * sizeof(float),
                                             wl->m->stream));
    FRT_TRY(frt_stream_sync(wl->m->stream));
    *dst = (const float *)(wl->base + off);
    return 0;
}

static int put_v(wload *wl, const float **dst, const float *p, size_t n) { return put_vec(wl, dst, &p, &n, 1); }

/* put_vec's vectors as bf16 (a bias of frt_cuda_gemm_run_epilogue); *exact
 * is cleared when a value is not a bf16 (rounded, it would change the sums'
 * bits: the caller keeps the f32 bias and its launch). */
static int put_vec_bf16(wload *wl, const uint16_t **dst, const float *const *src, const size_t *lens, int ns,
                        int *exact)
{
    size_t n = 0;
    for (int i = 0; i < ns; i++) n += lens[i];
    const size_t off = wl->used;
    wl->used += align_up(n * sizeof(uint16_t));
    if (wl->pass == 0) return 0;
    uint16_t *h = calloc(n + 1, sizeof *h);
    if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory converting the biases");
    for (size_t i = 0, o = 0; i < (size_t)ns; o += lens[i], i++)
        for (size_t j = 0; src[i] && j < lens[i]; j++) {
            h[o + j] = frt_f32_to_bf16(src[i][j]);
            if (frt_bf16_to_f32(h[o + j]) != src[i][j]) *exact = 0;
        }
    int rc = upload(wl, off, h, n * sizeof *h);
    free(h);
    *dst = (const uint16_t *)(wl->base + off);
    return rc;
}

static int load_vit(wload *wl, const pi0_config *c, const pi0_vit_layer *y, pc_vit *d)
{
    const int D = c->v_width, I = c->v_inter;
    const size_t Dz = (size_t)D;
    FRT_TRY(put_v(wl, &d->ln1_w, y->ln1_w, Dz));
    FRT_TRY(put_v(wl, &d->ln1_b, y->ln1_b, Dz));
    FRT_TRY(put_v(wl, &d->ln2_w, y->ln2_w, Dz));
    FRT_TRY(put_v(wl, &d->ln2_b, y->ln2_b, Dz));
    const msrc qkv[3] = {{y->q_w, D, D}, {y->k_w, D, D}, {y->v_w, D, D}};
    FRT_TRY(put_mat(wl, &d->qkv, D, D, qkv, 3));
    const float *qkv_b[3] = {y->q_b, y->k_b, y->v_b};
    const size_t lens[3] = {Dz, Dz, Dz};
    FRT_TRY(put_vec(wl, &d->qkv_b, qkv_b, lens, 3));
    FRT_TRY(put_vec_bf16(wl, &d->qkv_bb, qkv_b, lens, 3, &wl->bf16_bias));
    FRT_TRY(put_m(wl, &d->o, y->o_w, D, D));
    FRT_TRY(put_v(wl, &d->o_b, y->o_b, Dz));
    FRT_TRY(put_m(wl, &d->fc1, y->fc1_w, I, D));
    FRT_TRY(put_v(wl, &d->fc1_b, y->fc1_b, (size_t)I));
    const size_t Iz = (size_t)I;
    FRT_TRY(put_vec_bf16(wl, &d->fc1_bb, &y->fc1_b, &Iz, 1, &wl->bf16_bias));
    FRT_TRY(put_m(wl, &d->fc2, y->fc2_w, D, I));
    return put_v(wl, &d->fc2_b, y->fc2_b, Dz);
}

static int load_gemma(wload *wl, const pi0_gemma_config *g, const pi0_gemma_layer *y, pc_gemma *d, int fp8)
{
    const int W = g->width, Q = g->heads * g->head_dim, KV = g->kv_heads * g->head_dim, I = g->inter;
    if (y->in_norm) FRT_TRY(put_v(wl, &d->in_norm, y->in_norm, (size_t)W));
    if (y->post_norm) FRT_TRY(put_v(wl, &d->post_norm, y->post_norm, (size_t)W));
    const msrc qkv[3] = {{y->q, Q, W}, {y->k, KV, W}, {y->v, KV, W}};
    FRT_TRY(put_mat(wl, &d->qkv, W, W, qkv, 3));
    FRT_TRY(put_m(wl, &d->o, y->o, W, Q));
    const msrc gu[2] = {{y->gate, I, W}, {y->up, I, W}};
    if (fp8) {
        const msrc dn = {y->down, W, I};
        FRT_TRY(put_fp8(wl, &d->gu8, &d->gu_s, W, gu, 2));
        return put_fp8(wl, &d->down8, &d->down_s, I, &dn, 1);
    }
    FRT_TRY(put_mat(wl, &d->gu, W, W, gu, 2));
    return put_m(wl, &d->down, y->down, W, I);
}

/* Pi0.5: every expert norm's modulation at every step, [steps, 2 L + 1, 3 E]
 * f32, computed as pi0_cpu.c's suffix_embed does (f32 on the host). */
static float *host_mods(const pi0 *P)
{
    const pi0_config *c = &P->c;
    const pi0_weights *w = &P->w;
    const int E = c->e.width, L = c->e.layers, per = (2 * L + 1) * 3 * E;
    float *out = malloc((size_t)c->n_steps * per * sizeof(float));
    float *t0 = malloc((size_t)E * sizeof(float)), *t1 = malloc((size_t)E * sizeof(float));
    if (!out || !t0 || !t1) {
        free(out), free(t0), free(t1);
        return NULL;
    }
    for (int s = 0; s < c->n_steps; s++) {
        pi0_time_sincos(t0, E, (float)(1.0 + s * (-1.0 / c->n_steps)), c->min_period, c->max_period);
        frt_cpu_matmul(t1, t0, w->time_in_w, 1, E, E);
        frt_cpu_add_bias(t1, w->time_in_b, 1, E);
        frt_cpu_silu(t1, t1, E);
        frt_cpu_matmul(t0, t1, w->time_out_w, 1, E, E);
        frt_cpu_add_bias(t0, w->time_out_b, 1, E);
        frt_cpu_silu(t0, t0, E);
        float *o = out + (size_t)s * per;
        for (int j = 0; j <= 2 * L; j++) {
            const pi0_gemma_layer *y = &w->el[j / 2 < L ? j / 2 : 0];
            const float *dw = j == 2 * L ? w->e_norm_dense_w : j % 2 ? y->post_dense_w : y->in_dense_w;
            const float *db = j == 2 * L ? w->e_norm_dense_b : j % 2 ? y->post_dense_b : y->in_dense_b;
            frt_cpu_matmul(o + (size_t)j * 3 * E, t0, dw, 1, E, 3 * E);
            frt_cpu_add_bias(o + (size_t)j * 3 * E, db, 1, 3 * E);
        }
    }
    free(t0), free(t1);
    return out;
}

/* Pi0: atm_c[s] = action_time_mlp_in's time half . sincos(t_s) + its bias
 * [steps, E] (the input [action, time] splits the weight's columns). */
static float *host_atm_c(const pi0 *P)
{
    const pi0_config *c = &P->c;
    const int E = c->e.width;
    float *out = malloc((size_t)c->n_steps * E * sizeof(float)), *t = malloc((size_t)E * sizeof(float));
    if (!out || !t) {
        free(out), free(t);
        return NULL;
    }
    for (int s = 0; s < c->n_steps; s++) {
        pi0_time_sincos(t, E, (float)(1.0 + s * (-1.0 / c->n_steps)), c->min_period, c->max_period);
        for (int o = 0; o < E; o++) {
            const float *wr = P->w.atm_in_w + (size_t)o * 2 * E + E;
            double acc = 0;
            for (int i = 0; i < E; i++) acc += (double)wr[i] * t[i];
            out[(size_t)s * E + o] = (float)acc + P->w.atm_in_b[o];
        }
    }
    free(t);
    return out;
}

static int load_inv_freq(wload *wl, const float **dst, const pi0_gemma_config *g)
{
    const int half = g->head_dim / 2;
    float f[512];
    for (int i = 0; i < half; i++) f[i] = 1.0f / powf(g->rope_theta, (float)(2 * i) / (float)g->head_dim);
    return put_v(wl, dst, f, (size_t)half);
}

static int load_time(wload *wl, const pi0 *P)
{
    const pi0_config *c = &P->c;
    const int E = c->e.width;
    float *h = NULL;
    size_t n;
    if (c->pi05) {
        n = (size_t)c->n_steps * (2 * c->e.layers + 1) * 3 * E;
        if (wl->pass && !(h = host_mods(P))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory");
        int rc = put_v(wl, &wl->pc->mods, h, n);
        free(h);
        return rc;
    }
    n = (size_t)c->n_steps * E;
    if (wl->pass && !(h = host_atm_c(P))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory");
    int rc = put_v(wl, &wl->pc->atm_c, h, n);
    free(h);
    return rc;
}

static int load_heads(wload *wl, const pi0 *P)
{
    const pi0_config *c = &P->c;
    const pi0_weights *w = &P->w;
    pc_model *pc = wl->pc;
    const int E = c->e.width, A = c->action_dim;
    FRT_TRY(put_m(wl, &pc->action_in_w, w->action_in_w, E, A));
    FRT_TRY(put_v(wl, &pc->action_in_b, w->action_in_b, (size_t)E));
    FRT_TRY(put_m(wl, &pc->action_out_w, w->action_out_w, A, E));
    FRT_TRY(put_v(wl, &pc->action_out_b, w->action_out_b, (size_t)A));
    FRT_TRY(load_time(wl, P));
    if (c->pi05) return 0;
    FRT_TRY(put_v(wl, &pc->e_norm, w->e_norm, (size_t)E));
    FRT_TRY(put_m(wl, &pc->state_w, w->state_w, E, c->state_dim));
    FRT_TRY(put_v(wl, &pc->state_b, w->state_b, (size_t)E));
    const msrc a = {w->atm_in_w, E, 2 * E};
    FRT_TRY(put_mat(wl, &pc->atm_a_w, E, E, &a, 1));
    FRT_TRY(put_m(wl, &pc->atm_out_w, w->atm_out_w, E, E));
    return put_v(wl, &pc->atm_out_b, w->atm_out_b, (size_t)E);
}

static int load_all(wload *wl)
{
    const pi0 *P = pi0_of(wl->m);
    const pi0_config *c = &P->c;
    const pi0_weights *w = &P->w;
    pc_model *pc = wl->pc;
    const int D = c->v_width, K = 3 * c->patch * c->patch;
    const msrc pw = {w->patch_w, D, K};
    FRT_TRY(put_mat(wl, &pc->patch_w, K, pc->Kp, &pw, 1));
    FRT_TRY(put_v(wl, &pc->patch_b, w->patch_b, (size_t)D));
    FRT_TRY(put_v(wl, &pc->pos_emb, w->pos_emb, (size_t)c->n_patch * D));
    for (int l = 0; l < c->v_layers; l++) FRT_TRY(load_vit(wl, c, &w->vit[l], &pc->vit[l]));
    FRT_TRY(put_v(wl, &pc->post_ln_w, w->post_ln_w, (size_t)D));
    FRT_TRY(put_v(wl, &pc->post_ln_b, w->post_ln_b, (size_t)D));
    FRT_TRY(put_m(wl, &pc->proj_w, w->proj_w, c->t.width, D));
    FRT_TRY(put_v(wl, &pc->proj_b, w->proj_b, (size_t)c->t.width));
    FRT_TRY(put_m(wl, &pc->embed, w->embed, c->vocab, c->t.width));
    for (int l = 0; l < c->t.layers; l++) /* the last layer's MLP is never run (its K and V only) */
        FRT_TRY(load_gemma(wl, &c->t, &w->tl[l], &pc->tl[l], pc->fp8 && l + 1 < c->t.layers));
    for (int l = 0; l < c->e.layers; l++) FRT_TRY(load_gemma(wl, &c->e, &w->el[l], &pc->el[l], 0));
    FRT_TRY(load_inv_freq(wl, &pc->t_inv_freq, &c->t));
    FRT_TRY(load_inv_freq(wl, &pc->e_inv_freq, &c->e));
    return load_heads(wl, P);
}

/* FRT_PI0_VIT_EPILOGUE=0 in the environment keeps the SigLIP biases' launches
 * (the GEMMs into f32, then frt_cuda_bias_act), to compare the forms in one
 * process (docs/policies.md). */
static int vit_epilogue_env(void)
{
    const char *e = getenv("FRT_PI0_VIT_EPILOGUE");
    return !(e && strcmp(e, "0") == 0);
}

/* Whether FRT_PI0_VIT_MHA asks for the attention's f32 form (it reads the f32
 * q | k | v projection: no bias epilogue on it). */
static int vit_mha_f32(void)
{
    const char *e = getenv("FRT_PI0_VIT_MHA");
    return e && strcmp(e, "2") == 0;
}

static int upload_weights(frt_model *m, pc_model *pc)
{
    wload wl = {.m = m, .pc = pc, .pass = 0};
    FRT_TRY(load_all(&wl));
    FRT_TRY(frt_buffer_alloc(m->ctx, "pi0.cuda.weights", FRT_SPACE_DEVICE, wl.used, &pc->wbuf));
    m->weight_bytes = wl.used;
    wl.pass = 1;
    wl.used = 0;
    wl.base = frt_buffer_ptr(pc->wbuf);
    wl.bf16_bias = 1; /* until a bias is not a bf16 (put_vec_bf16) */
    FRT_TRY(load_all(&wl));
    pc->vit_epi = wl.bf16_bias && vit_epilogue_env();
    return 0;
}

static int cuda_load_weights(frt_model *m)
{
    pi0 *P = pi0_of(m);
    const pi0_config *c = &P->c;
    FRT_TRY(check_dims(c));
    pc_model *pc = calloc(1, sizeof *pc);
    if (!pc) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory");
    m->bk_data = pc;
    set_sizes(c, pc);
    pc->fp8 = m->params.weight_dtype == FRT_WEIGHT_FP8;
    if (pc->fp8 && (c->t.width % 16 || c->t.inter % 16))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "pi0 cuda: fp8 weights need the prefix's width and MLP size multiples of 16 (%d, %d)",
                         c->t.width, c->t.inter);
    if (pc->fp8) m->weights_desc = "weights=bf16,prefix_mlp=f8_e4m3,scale=per-channel,at-load";
    pc->vit = calloc((size_t)c->v_layers, sizeof *pc->vit);
    pc->tl = calloc((size_t)c->t.layers, sizeof *pc->tl);
    pc->el = calloc((size_t)c->e.layers, sizeof *pc->el);
    if (!pc->vit || !pc->tl || !pc->el) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory");
    FRT_TRY(pi0_load_weights(m)); /* f32 on the host: names, shapes, refusals */
    int rc = upload_weights(m, pc);
    pi0_free_weights(m);
    return rc;
}

/* ---- scratch and GEMM plans ---------------------------------------------------- */

typedef struct sarena {
    size_t used;
    char *base; /* NULL while sizing */
} sarena;

static void *take(sarena *a, size_t bytes)
{
    size_t off = a->used;
    a->used += align_up(bytes);
    return a->base ? a->base + off : NULL;
}

/* The batch slots' buffers (none without params.policy_batch). */
static void carve_batch(const pi0_config *c, pc_model *pc, sarena *a)
{
    if (pc->slots == 0) return;
    pc->bkv = ((size_t)(pc->Pp + pc->nsp) * pc->KV + 127) / 128 * 128; /* slots 256-byte aligned, as the sets' */
    for (int l = 0; l < c->t.layers; l++) {
        void *k = take(a, (size_t)pc->slots * pc->bkv * 2), *v = take(a, (size_t)pc->slots * pc->bkv * 2);
        if (pc->bk) pc->bk[l] = k, pc->bv[l] = v;
    }
    pc->bpos = take(a, (size_t)pc->slots * pc->nsp * 4);
    pc->bx = take(a, (size_t)pc->slots * pc->n_act * 4);
    pc->bvel = take(a, (size_t)pc->slots * pc->n_act * 4);
}

static void carve(const pi0_config *c, pc_model *pc, sarena *a)
{
    const int eslots = imax(2, pc->slots); /* fused CFG: two slots of suffix rows; a batch: slots */
    const int rows = imax(imax(pc->NV, 2 * pc->P), eslots * pc->ns); /* fused CFG: two prefixes (prefix_pair) */
    const int W = imax(imax(c->v_width, c->t.width), imax(c->e.width, c->action_dim)); /* hb: a batch's x_t too */
    const int Qt = c->t.heads * c->t.head_dim, Qe = c->e.heads * c->e.head_dim;
    const int QKV = imax(3 * c->v_width, imax(Qt, Qe) + 2 * pc->KV);
    const int I = imax(imax(c->v_inter, c->t.inter), imax(c->e.inter, c->e.width)); /* Pi0's time MLP: E */
    const int Y = imax(imax(QKV, 2 * I), imax(W, c->t.width));
    const size_t sc = (size_t)imax(c->max_cameras * c->v_heads * c->n_patch * pc->lds_v,
                                   imax(2 * c->t.heads * pc->P * pc->lds_p, eslots * c->e.heads * pc->ns * pc->lds_e));
    pc->x = take(a, (size_t)rows * W * 4);
    pc->y = take(a, (size_t)rows * Y * 4);
    pc->scores = take(a, sc * 4);
    pc->probs = take(a, sc * 2);
    pc->patches = take(a, (size_t)pc->NV * pc->Kp * 2);
    pc->hb = take(a, (size_t)rows * W * 2);
    pc->qkvb = take(a, (size_t)rows * QKV * 2);
    pc->attb = take(a, (size_t)rows * imax(imax(Qt, Qe), c->v_width) * 2);
    pc->actb = take(a, (size_t)rows * I * 2);
    if (pc->fp8) {
        pc->x8 = take(a, (size_t)2 * pc->P * imax(c->t.width, c->t.inter));
        pc->x8s = take(a, (size_t)2 * pc->P * 4);
    }
    pc->xt = take(a, (size_t)pc->n_act * 4);
    pc->vel = take(a, (size_t)pc->n_act * 4);
    pc->vel_c = take(a, (size_t)pc->n_act * 4);
    pc->xs = take(a, (size_t)2 * pc->n_act * 4);
    pc->vs = take(a, (size_t)2 * pc->n_act * 4);
    pc->xtb = take(a, (size_t)pc->n_act * 2);
    pc->stb = take(a, (size_t)c->state_dim * 2);
    pc->pos_p = take(a, (size_t)pc->P * 4);
    pc->pos_pc = take(a, (size_t)pc->P * 4);
    pc->cs = take(a, (size_t)2 * pc->ns * c->e.head_dim * 4);
    pc->tail_bytes = 0;
    if (frt_cuda_gemma_mlp_work_bytes(pc->ns, c->e.width, c->e.inter, c->e.heads * c->e.head_dim, &pc->tail_bytes) == 0)
        pc->tail_work = take(a, pc->tail_bytes);
    pc->att_bytes = 0;
    if (frt_cuda_gemma_mlp_att_work_bytes(pc->ns, c->e.heads, pc->Pp + pc->nsp, &pc->att_bytes) == 0)
        pc->att_work = take(a, pc->att_bytes);
    for (int set = 1; set >= 0; set--) { /* PI0_COND first: fused CFG's slots are a positive stride apart */
        pc->pos_s[set] = take(a, (size_t)pc->nsp * 4);
        for (int l = 0; l < c->t.layers; l++) {
            const size_t kvb = (size_t)(pc->Pp + pc->nsp) * pc->KV * 2;
            void *k = take(a, kvb), *v = take(a, kvb);
            if (pc->ek[set]) pc->ek[set][l] = k, pc->ev[set][l] = v;
        }
    }
    carve_batch(c, pc, a);
}

/* The weight GEMM shapes {n, in, out} of the vision tower and the prefix
 * of one variant; pair: the prefix's alone, at the two prefixes' rows
 * (prefix_pair). */
static int plan_prefix(const pi0_config *c, pc_model *pc, const pc_shape *v, int pair)
{
    const int D = c->v_width, Wt = c->t.width, KV = pc->KV, Qt = c->t.heads * c->t.head_dim;
    const int n = pair ? 2 * v->rows : v->rows;
    const int sh[][3] = {{v->nv, pc->Kp, D},     {v->nv, D, 3 * D},      {v->nv, D, D},
                         {v->nv, D, c->v_inter}, {v->nv, c->v_inter, D}, {v->nv, D, Wt},
                         {n, Wt, Qt + 2 * KV},   {n, Qt, Wt},            {n, c->t.inter, Wt}};
    const size_t nsh = sizeof sh / sizeof sh[0];
    const int no_f32_qkv = pc->vit_epi && !vit_mha_f32(); /* vit_layer's q | k | v in the epilogue, fc1 too */
    for (size_t i = pair ? 6 : 0; i < nsh - (pc->fp8 ? 1 : 0); i++) { /* fp8: down is an FP8 product */
        if ((i == 1 && no_f32_qkv) || (i == 3 && pc->vit_epi)) continue;
        FRT_TRY(frt_cuda_gemm_plan(pc->gemm, sh[i][0], sh[i][1], sh[i][2], F32, 0));
    }
    if (!pair && pc->vit_epi) { /* q | k | v and fc1 with their bias (and GELU) in the epilogue (vit_layer) */
        FRT_TRY(frt_cuda_gemm_plan_epilogue(pc->gemm, v->nv, D, 3 * D, FRT_CUDA_GEMM_EPI_BIAS));
        FRT_TRY(frt_cuda_gemm_plan_epilogue(pc->gemm, v->nv, D, c->v_inter, FRT_CUDA_GEMM_EPI_BIAS_GELU));
    }
    if (pc->fp8) { /* the prefix MLP's FP8 products (gemma_layer): gate | up into bf16, down into f32 */
        FRT_TRY(frt_cuda_gemm_fp8_plan(pc->g8, n, Wt, 2 * c->t.inter, BF16));
        return frt_cuda_gemm_fp8_plan(pc->g8, n, c->t.inter, Wt, F32);
    }
    return frt_cuda_gemm_plan(pc->gemm, n, Wt, 2 * c->t.inter, BF16, 0); /* gate | up: bf16 (gemma_layer) */
}

/* The output dtype of make_plans' expert row i: the gate | up product (row
 * 2) is bf16, as gemma_layer runs it. */
static frt_cuda_dtype expert_dt(int i) { return i == 2 ? BF16 : F32; }

/* Every weight GEMM shape of the forward pass, for every variant (made at
 * load: a variant captured later only looks its plans up). */
static int make_plans(const pi0_config *c, pc_model *pc)
{
    const int E = c->e.width, KV = pc->KV, A = c->action_dim, Qe = c->e.heads * c->e.head_dim;
    const int sh[][3] = {{pc->ns, E, Qe + 2 * KV}, {pc->ns, Qe, E},  {pc->ns, E, 2 * c->e.inter},
                         {pc->ns, c->e.inter, E},  {c->chunk, A, E}, {c->chunk, E, A},
                         {c->chunk, E, E},         {1, c->state_dim, E}};
    const int n = c->pi05 ? 6 : 8;
    for (int i = 0; i < n; i++) FRT_TRY(frt_cuda_gemm_plan(pc->gemm, sh[i][0], sh[i][1], sh[i][2], expert_dt(i), 0));
    for (int b = 2; b <= imax(2, pc->slots); b++) /* fused CFG and batches: b slots' rows in one product */
        for (int i = 0; i < 4; i++)
            FRT_TRY(frt_cuda_gemm_plan(pc->gemm, b * sh[i][0], sh[i][1], sh[i][2], expert_dt(i), 0));
    for (int b = 1; c->pi05 && b <= pc->slots; b++) /* a Pi0.5 batch's heads (batch_suffix_pi05, batch_head_pi05) */
        for (int i = 4; i < 6; i++) FRT_TRY(frt_cuda_gemm_plan(pc->gemm, b * sh[i][0], sh[i][1], sh[i][2], F32, 0));
    for (int cams = 1; cams <= c->max_cameras; cams++)
        for (int tok = 16;; tok *= 2) {
            const pc_shape v = shape_of(c, cams, bucket_of(c, tok));
            FRT_TRY(plan_prefix(c, pc, &v, 0));
            FRT_TRY(plan_prefix(c, pc, &v, 1)); /* fused CFG's two prefixes as one (prefix_pair) */
            if (v.tok == c->max_tokens) break;
        }
    return 0;
}

static int plan_attention(frt_model *m);
static int plan_batch_attention(frt_model *m);

/* frt_model_params.gemm_autotune (checked by the runtime: 0..64): the
 * choice of every GEMM plan made above, before any capture; with a file,
 * loaded when it exists (nothing timed), else timed and saved. */
static int tune_gemms(frt_model *m)
{
    return frt_cuda_gemm_autotune_file(pc_of(m)->gemm, m->params.gemm_tune_file, m->params.gemm_autotune, sp(m),
                                       NULL);
}

static frt_cuda_gemma_mlp_args expert_tail_args(frt_model *m, const pc_gemma *y, const float *mods, int next,
                                                const float *next_w, const float *next_mod);
static void expert_tail_qkv(frt_model *m, frt_cuda_gemma_mlp_args *a, const uint16_t *qkv, uint16_t *k, uint16_t *v,
                            const int32_t *pos);

/* Whether the expert's layers take frt_cuda_gemma_mlp (one slot's rows;
 * fused CFG and batches keep the separate launches): tail_on 3 when the
 * device takes the layer's attention, o_proj to the next layer's norm and
 * its q | k | v with RoPE in one launch, 2 without the attention, 1 without
 * the next q | k | v either. The environment's FRT_PI0_FUSED_TAIL
 * compares the forms in one process (docs/policies.md): 0 the separate
 * launches, 1 or 2 the tail at that level. */
static int expert_att_check(frt_model *m, frt_cuda_gemma_mlp_args *a);
static int plan_expert_tail(frt_model *m)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    const char *e = getenv("FRT_PI0_FUSED_TAIL");
    pc->tail_on = 0;
    if ((e && strcmp(e, "0") == 0) || !pc->tail_work) return 0;
    const float *mods = c->pi05 ? pc->x : NULL; /* any f32 [6 W] (only shapes are checked) */
    frt_cuda_gemma_mlp_args a = expert_tail_args(m, &pc->el[0], mods, 1, pc->el[0].in_norm, mods);
    int rc = frt_cuda_gemma_mlp_check(&a);
    if (rc == FRT_ERR_UNSUPPORTED) return 0;
    FRT_TRY(rc);
    pc->tail_on = 1;
    if (e && strcmp(e, "1") == 0) return 0;
    expert_tail_qkv(m, &a, pc->el[0].qkv, pc->ek[0][0], pc->ev[0][0], pc->pos_s[0]);
    rc = frt_cuda_gemma_mlp_check(&a);
    if (rc == FRT_ERR_UNSUPPORTED) return 0;
    FRT_TRY(rc);
    pc->tail_on = 2;
    if ((e && strcmp(e, "2") == 0) || !pc->att_work) return 0;
    rc = expert_att_check(m, &a);
    if (rc == FRT_ERR_UNSUPPORTED) return 0;
    FRT_TRY(rc);
    pc->tail_on = 3;
    return 0;
}

static int cuda_alloc_scratch(frt_model *m)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    for (int set = 0; set < 2; set++) {
        pc->ek[set] = calloc((size_t)c->t.layers, sizeof *pc->ek[set]);
        pc->ev[set] = calloc((size_t)c->t.layers, sizeof *pc->ev[set]);
        if (!pc->ek[set] || !pc->ev[set]) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory");
    }
    pc->slots = m->params.policy_batch;
    if (pc->slots > 0) {
        pc->bk = calloc((size_t)c->t.layers, sizeof *pc->bk);
        pc->bv = calloc((size_t)c->t.layers, sizeof *pc->bv);
        if (!pc->bk || !pc->bv) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0 cuda: out of memory");
    }
    sarena a = {0, NULL};
    carve(c, pc, &a);
    FRT_TRY(frt_buffer_alloc(m->ctx, "pi0.cuda.scratch", FRT_SPACE_DEVICE, a.used, &pc->sbuf));
    FRT_TRY(frt_buffer_fill(pc->sbuf, 0, a.used, 0, m->stream)); /* padding rows of the KV stay zero */
    a.used = 0;
    a.base = frt_buffer_ptr(pc->sbuf);
    carve(c, pc, &a);
    FRT_TRY(frt_buffer_alloc(m->ctx, "pi0.cuda.flag", FRT_SPACE_PINNED_HOST, 2 * sizeof(int32_t), &pc->flag));
    FRT_TRY(frt_cuda_gemm_create(GEMM_WS, &pc->gemm));
    FRT_TRY(frt_cuda_gemm_add_stream(pc->gemm, sp(m)));
    if (pc->fp8) FRT_TRY(frt_cuda_gemm_fp8_create(pc->gemm, &pc->g8));
    FRT_TRY(frt_cuda_bmm_create(BMM_WS, &pc->bmm));
    FRT_TRY(make_plans(c, pc));
    FRT_TRY(plan_expert_tail(m));
    FRT_TRY(tune_gemms(m));
    FRT_TRY(plan_attention(m));
    return frt_stream_sync(m->stream);
}

static void cuda_free(frt_model *m)
{
    pc_model *pc = pc_of(m);
    pi0_free_weights(m);
    if (!pc) return;
    if (m->stream) frt_stream_sync(m->stream);
    frt_cuda_gemm_fp8_destroy(pc->g8); /* before the handle it is built on */
    frt_cuda_gemm_destroy(pc->gemm);
    frt_cuda_bmm_destroy(pc->bmm);
    frt_buffer_free(pc->wbuf);
    frt_buffer_free(pc->sbuf);
    frt_buffer_free(pc->flag);
    free(pc->vit), free(pc->tl), free(pc->el);
    for (int set = 0; set < 2; set++) free(pc->ek[set]), free(pc->ev[set]);
    free(pc->bk), free(pc->bv);
    free(pc);
    m->bk_data = NULL;
}

/* ---- the forward pass ---------------------------------------------------------- */

/* Whether the expert's attention takes the fused kernel
 * (frt_cuda_attention_fused, RoPE on load). Off: measured slower than the
 * RoPE kernel + batched products it replaces at the Pi0.5 expert's shape
 * (H200, a graph of 18 layers, 400 query rows over 1024 keys: 28.5 against
 * 15.7 us a layer at batch 1, 28.6 against 19.1 at batch 2; docs/PERF.md),
 * so the expert keeps the products until the fused kernel is faster. */
#define PC_FUSED_EXPERT_ATTENTION 0

/* The RoPE table of set `set`'s suffix positions (pc->cs); NULL when the
 * expert does not take the fused attention. */
static float *cs_of(const frt_model *m, int set)
{
    const pc_model *pc = pc_of(m);
    if (!PC_FUSED_EXPERT_ATTENTION) return NULL;
    return pc->cs + (size_t)(set == PI0_COND ? 0 : 1) * pc->ns * pi0_of(m)->c.e.head_dim;
}

/* y [n, out] f32 = x [n, in] bf16 . w^T. */
static int gemm(frt_model *m, float *y, const uint16_t *x, const uint16_t *w, int n, int in, int out)
{
    return frt_cuda_gemm_run(pc_of(m)->gemm, sp(m), y, F32, x, w, n, in, out, 0);
}

/* The attention of camera slot `cam` (every patch sees every patch). */
static frt_cuda_attn_args vit_attn_args(frt_model *m, int cam)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    const int D = c->v_width, np = c->n_patch;
    const uint16_t *q = pc->qkvb + (size_t)cam * np * 3 * D;
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.out = pc->attb + (size_t)cam * np * D;
    a.q = q, a.k = q + D, a.v = q + 2 * D;
    a.ldq = a.ldkv = 3 * D;
    a.n_q = a.n_kv = np;
    a.n_heads = a.n_kv_heads = c->v_heads;
    a.head_dim = c->v_head_dim;
    a.scale = 1.0f / sqrtf((float)c->v_head_dim);
    const size_t s0 = (size_t)cam * c->v_heads * np * pc->lds_v; /* the slots' scores follow one another */
    a.scores = pc->scores + s0, a.probs = pc->probs + s0, a.ld_s = pc->lds_v;
    a.mask.kmask_len = a.mask.sfx_start = np;
    return a;
}

/* The attention of every camera slot as ONE launch of
 * frt_cuda_attention_mha (the cameras a batch), after the bias launch that
 * rounds the f32 q | k | v projection in pc->y plus its bias qkv_b to bf16
 * (FRT_PI0_VIT_MHA=2: the launch stages the f32 rows plus the bias itself,
 * the same bits, measured 0.06-0.3 ms an inference slower: docs/PERF.md);
 * *ok 0 (nothing enqueued) when the kernel does not take the shape or
 * FRT_PI0_VIT_MHA=0 asks for the bias launch and the products
 * (docs/policies.md). */
static int vit_attention_mha(frt_model *m, const float *qkv_b, int cams, int *ok)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    const int D = c->v_width, np = c->n_patch;
    const char *e = getenv("FRT_PI0_VIT_MHA");
    const int epi = qkv_b == NULL; /* the projection's epilogue wrote q | k | v with their bias in bf16 */
    frt_cuda_mha_args a = {.out = pc->attb, .ldo = D, .n = np, .n_heads = c->v_heads, .head_dim = c->v_head_dim,
                           .scale = 1.0f / sqrtf((float)c->v_head_dim), .batch = cams, .so = (long long)np * D,
                           .q = pc->qkvb, .k = pc->qkvb + D, .v = pc->qkvb + 2 * D, .ldq = 3 * D, .ldkv = 3 * D,
                           .sq = (long long)np * 3 * D, .skv = (long long)np * 3 * D};
    if (!epi && vit_mha_f32()) {
        a.q = a.k = a.v = NULL, a.ldq = a.ldkv = 0, a.sq = a.skv = 0;
        a.qkv_f32 = pc->y, a.bias = qkv_b, a.ld_f32 = 3 * D, a.s_f32 = (long long)np * 3 * D;
    }
    *ok = !(e && strcmp(e, "0") == 0) && frt_cuda_attention_mha_check(&a) == 0;
    if (!*ok) return 0;
    if (!a.qkv_f32 && !epi)
        FRT_TRY(frt_cuda_bias_act(sp(m), pc->qkvb, BF16, pc->y, qkv_b, cams * np, 3 * D, FRT_CUDA_ACT_NONE));
    return frt_cuda_attention_mha(sp(m), &a);
}

/* The attention of every camera slot of the variant from the products
 * (one softmax launch) over q | k | v in pc->qkvb. */
static int vit_attention(frt_model *m, int cams)
{
    frt_cuda_attn_args a[FRT_CUDA_ATTN_MANY_MAX];
    for (int cam = 0; cam < cams; cam++) a[cam] = vit_attn_args(m, cam);
    return frt_cuda_attention_masked_many(pc_of(m)->bmm, sp(m), a, cams);
}

/* One SigLIP layer on hb = its first LayerNorm of x (the caller's, or the
 * previous layer's); ends with the residual fused into the LayerNorm that
 * follows (next_w, next_b: the next layer's first, or the post-LayerNorm),
 * so hb holds it. */
static int vit_layer(frt_model *m, const pc_vit *y, const float *next_w, const float *next_b, const pc_shape *sh)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const int D = c->v_width, I = c->v_inter, n = sh->nv;
    const int qkv_epi = pc->vit_epi && !vit_mha_f32(); /* q | k | v with their bias straight into bf16 */
    if (qkv_epi)
        FRT_TRY(frt_cuda_gemm_run_epilogue(pc->gemm, s, pc->qkvb, pc->hb, y->qkv, y->qkv_bb, n, D, 3 * D,
                                           FRT_CUDA_GEMM_EPI_BIAS));
    else
        FRT_TRY(gemm(m, pc->y, pc->hb, y->qkv, n, D, 3 * D));
    int one = 0; /* the attention in one launch from the f32 projection, or the bias launch and the products */
    FRT_TRY(vit_attention_mha(m, qkv_epi ? NULL : y->qkv_b, sh->cams, &one));
    if (!one) {
        if (!qkv_epi) FRT_TRY(frt_cuda_bias_act(s, pc->qkvb, BF16, pc->y, y->qkv_b, n, 3 * D, FRT_CUDA_ACT_NONE));
        FRT_TRY(vit_attention(m, sh->cams));
    }
    FRT_TRY(gemm(m, pc->y, pc->attb, y->o, n, D, D));
    FRT_TRY(frt_cuda_add_norm(s, pc->hb, BF16, pc->x, pc->y, y->o_b, NULL, FRT_CUDA_NORM_LAYER, y->ln2_w, y->ln2_b, n,
                              D, c->v_eps));
    if (pc->vit_epi) {
        FRT_TRY(frt_cuda_gemm_run_epilogue(pc->gemm, s, pc->actb, pc->hb, y->fc1, y->fc1_bb, n, D, I,
                                           FRT_CUDA_GEMM_EPI_BIAS_GELU));
    } else {
        FRT_TRY(gemm(m, pc->y, pc->hb, y->fc1, n, D, I));
        FRT_TRY(frt_cuda_bias_act(s, pc->actb, BF16, pc->y, y->fc1_b, n, I, FRT_CUDA_ACT_GELU_TANH));
    }
    FRT_TRY(gemm(m, pc->y, pc->actb, y->fc2, n, I, D));
    return frt_cuda_add_norm(s, pc->hb, BF16, pc->x, pc->y, y->fc2_b, NULL, FRT_CUDA_NORM_LAYER, next_w, next_b, n, D,
                             c->v_eps);
}

/* The variant's camera slots at once: [cams * n_patch] rows of the images
 * px [cams, 3, H, W] f32 (the pixel_values port, or a row of
 * batch_pixel_values) into the vision_tokens port. */
static int rec_vision(frt_model *m, const pc_shape *sh, const float *px)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const int D = c->v_width, n = sh->nv, np = c->n_patch;
    FRT_TRY(pi0_cuda_patchify(s, pc->patches, px, sh->cams,
                              c->image_size, c->image_size, c->patch, pc->Kp));
    FRT_TRY(gemm(m, pc->y, pc->patches, pc->patch_w, n, pc->Kp, D));
    FRT_TRY(frt_cuda_bias_act(s, pc->x, F32, pc->y, pc->patch_b, n, D, FRT_CUDA_ACT_NONE));
    for (int cam = 0; cam < sh->cams; cam++)
        FRT_TRY(pi0_cuda_residual(s, pc->x + (size_t)cam * np * D, pc->pos_emb, NULL, NULL, np, D));
    FRT_TRY(frt_cuda_layernorm(s, pc->hb, BF16, pc->x, pc->vit[0].ln1_w, pc->vit[0].ln1_b, n, D, c->v_eps));
    for (int l = 0; l < c->v_layers; l++) {
        const int last = l == c->v_layers - 1;
        FRT_TRY(vit_layer(m, &pc->vit[l], last ? pc->post_ln_w : pc->vit[l + 1].ln1_w,
                          last ? pc->post_ln_b : pc->vit[l + 1].ln1_b, sh));
    }
    FRT_TRY(gemm(m, pc->y, pc->hb, pc->proj_w, n, D, c->t.width));
    return frt_cuda_bias_act(s, port(m, "vision_tokens", FRT_IO_OUTPUT), F32, pc->y, pc->proj_b, n, c->t.width,
                             FRT_CUDA_ACT_NONE);
}

/* One Gemma layer over `slots` blocks of n rows of pc->x (the fused CFG
 * expert runs both slots' rows through one product; each slot attends over
 * its own KV). k[s], v[s]: slot s's KV rows (the prefix's at row 0, the
 * suffix's at row Pp), keys n_kv; pos[s], mask[s] its positions and mask
 * (the expert's keys run to the suffix's padded end Pp + nsp, a multiple of
 * 8: the padding rows are zero and masked, and cuBLASLt takes its Hopper
 * kernels for the products only at such sizes: 8.6 + 7.0 us a layer with
 * Pp + ns keys, on sm_80 kernels);
 * mods: Pi0.5's two modulations [2, 3 W] (NULL: plain norms); last: K and
 * V only. normed: hb already holds the input norm (the previous layer's
 * fused residual); fuse_next: the closing residual is fused with the next
 * layer's input norm (next_w, or Pi0.5's next_mod [3 W]) into hb.
 * cs[s]: slot s's RoPE table (the expert: q / k / v RoPE'd as the fused
 * attention stages them; NULL: a q / k / v kernel, then the products). */
typedef struct glayer {
    const pi0_gemma_config *g;
    const pc_gemma *y;
    int n, slots, first, n_kv, ld_s, last, normed, fuse_next;
    int qkv_done;                 /* q | k | v with RoPE already written (the tail before, expert_velocity) */
    const uint16_t *next_qkv;     /* one slot's expert: the next layer's q | k | v weights (else NULL) */
    uint16_t *next_k, *next_v;    /* and its suffix KV rows */
    const float *cs[2];
    const float *next_w, *next_mod;
    const int32_t *pos[PI0_KV_SLOTS];
    const float *inv_freq, *mods;
    uint16_t *k[PI0_KV_SLOTS], *v[PI0_KV_SLOTS];
    frt_cuda_attn_mask mask[PI0_KV_SLOTS];
} glayer;

/* hb = norm(x) (bf16) over every slot's rows: Gemma's RMSNorm of w, or
 * Pi0.5's adaRMSNorm of the modulation mod [3 W]. */
static int gnorm(frt_model *m, const glayer *L, const float *w, const float *mod)
{
    pc_model *pc = pc_of(m);
    const int W = L->g->width, rows = L->n * L->slots;
    if (!mod) return frt_cuda_rmsnorm(sp(m), pc->hb, BF16, pc->x, F32, w, NULL, rows, 1, W, L->g->eps, 1);
    return frt_cuda_rmsnorm_ada(sp(m), pc->hb, BF16, pc->x, mod, mod + W, rows, W, L->g->eps);
}

/* The attention of slot `slot`: its query rows, its KV and mask. */
static frt_cuda_attn_args gemma_attn_args(frt_model *m, const glayer *L, int slot)
{
    pc_model *pc = pc_of(m);
    const pi0_gemma_config *g = L->g;
    const size_t q0 = (size_t)slot * L->n * g->heads * g->head_dim;
    frt_cuda_attn_args a;
    memset(&a, 0, sizeof a);
    a.out = pc->attb + q0, a.q = pc->qkvb + q0, a.k = L->k[slot], a.v = L->v[slot];
    a.ldq = g->heads * g->head_dim, a.ldkv = pc->KV;
    a.n_q = L->n, a.n_kv = L->n_kv, a.n_heads = g->heads, a.n_kv_heads = g->kv_heads, a.head_dim = g->head_dim;
    a.scale = 1.0f / sqrtf((float)g->head_dim);
    a.scores = pc->scores, a.probs = pc->probs, a.ld_s = L->ld_s;
    a.mask = L->mask[slot];
    return a;
}

/* The attention of every slot (fused CFG's two, a batch's B) as one
 * batch (their KV buffers a constant positive stride apart, as carve lays
 * them out; the masks a constant distance apart) into *a; 0 when the
 * layout does not allow it (then slot by slot). */
static int slots_batch(frt_model *m, const glayer *L, frt_cuda_attn_args *a)
{
    const pi0_gemma_config *g = L->g;
    if (L->slots < 2) return 0;
    const long long skv = (long long)(L->k[1] - L->k[0]);
    const intptr_t smask = (intptr_t)L->mask[1].d_kmask - (intptr_t)L->mask[0].d_kmask;
    if (skv <= 0) return 0;
    for (int s = 1; s < L->slots; s++)
        if ((long long)(L->k[s] - L->k[s - 1]) != skv || (long long)(L->v[s] - L->v[s - 1]) != skv ||
            (intptr_t)L->mask[s].d_kmask - (intptr_t)L->mask[s - 1].d_kmask != smask)
            return 0;
    *a = gemma_attn_args(m, L, 0);
    a->batch = L->slots;
    a->sq = a->sout = (long long)L->n * g->heads * g->head_dim;
    a->skv = skv;
    a->mask.kmask_stride = (long long)((uintptr_t)L->mask[1].d_kmask - (uintptr_t)L->mask[0].d_kmask);
    return 1;
}

/* The attention of L in ONE launch with RoPE on load (q / k / v straight
 * from the projection in pc->y, L->cs the tables): both slots as one batch
 * when their KV and tables are a positive stride apart, else slot by slot.
 * *done 0 (nothing enqueued) when the fused kernel does not take the
 * layout. */
static int attention_fused(frt_model *m, const glayer *L, int *done)
{
    pc_model *pc = pc_of(m);
    const pi0_gemma_config *g = L->g;
    const size_t W = (size_t)g->heads * g->head_dim + 2 * pc->KV;
    frt_cuda_attn_args a[2];
    frt_cuda_attn_rope r[2];
    int n = 1;
    memset(r, 0, sizeof r);
    const long long s_cs = L->slots == 2 ? (long long)(L->cs[1] - L->cs[0]) : 0;
    if (slots_batch(m, L, &a[0]) && s_cs > 0) {
        r[0].qkv = pc->y, r[0].cs = L->cs[0], r[0].s_cs = s_cs;
    } else {
        n = L->slots;
        for (int s = 0; s < n; s++) {
            a[s] = gemma_attn_args(m, L, s);
            r[s].qkv = pc->y + (size_t)s * L->n * W, r[s].cs = L->cs[s];
        }
    }
    *done = 0;
    for (int i = 0; i < n; i++)
        if (frt_cuda_attention_fused_check(&a[i], &r[i]) != 0) return 0;
    for (int i = 0; i < n; i++) FRT_TRY(frt_cuda_attention_fused(sp(m), &a[i], &r[i]));
    *done = 1;
    return 0;
}

/* q / k / v with RoPE (every slot in one launch), then (unless last, or
 * the layer's tail attends: tail_attends) the attention: both slots as one
 * batch, or slot by slot; or all of it in one launch (attention_fused)
 * where L has RoPE tables. */
static int tail_attends(frt_model *m, const glayer *L);
static int gemma_attention(frt_model *m, const glayer *L)
{
    pc_model *pc = pc_of(m);
    const pi0_gemma_config *g = L->g;
    int done = 0;
    if (L->cs[0] && !L->last && !L->qkv_done) FRT_TRY(attention_fused(m, L, &done));
    if (done) return 0;
    pi0_kv_slots d;
    memset(&d, 0, sizeof d);
    d.slots = L->slots;
    for (int s = 0; s < L->slots; s++) {
        d.k[s] = L->k[s] + (size_t)L->first * pc->KV, d.v[s] = L->v[s] + (size_t)L->first * pc->KV;
        d.pos[s] = L->pos[s];
    }
    if (!L->qkv_done) /* else the tail before wrote them (tail_writes_qkv) */
        FRT_TRY(pi0_cuda_qkv_rope_slots(sp(m), pc->qkvb, &d, pc->KV, pc->KV, pc->y, L->inv_freq, L->n, g->heads,
                                        g->kv_heads, g->head_dim));
    if (L->last || tail_attends(m, L)) return 0; /* the tail's launch attends */
    frt_cuda_attn_args a;
    if (slots_batch(m, L, &a)) return frt_cuda_attention_masked(pc->bmm, sp(m), &a);
    for (int s = 0; s < L->slots; s++) {
        a = gemma_attn_args(m, L, s);
        FRT_TRY(frt_cuda_attention_masked(pc->bmm, sp(m), &a));
    }
    return 0;
}

/* x += y * gate (gate NULL: plain), then hb = the norm of w (Gemma's
 * 1 + w) or of the modulation mod [3 W] (adaRMSNorm), in one launch. */
static int add_norm(frt_model *m, const glayer *L, const float *gate, const float *w, const float *mod)
{
    pc_model *pc = pc_of(m);
    const int W = L->g->width, rows = L->n * L->slots;
    if (mod)
        return frt_cuda_add_norm(sp(m), pc->hb, BF16, pc->x, pc->y, NULL, gate, FRT_CUDA_NORM_RMS_ADA, mod, mod + W,
                                 rows, W, L->g->eps);
    return frt_cuda_add_norm(sp(m), pc->hb, BF16, pc->x, pc->y, NULL, gate, FRT_CUDA_NORM_RMS_ONE, w, NULL, rows, W,
                             L->g->eps);
}

/* The expert's layer tail (frt_cuda_gemma_mlp) over one slot's rows: from
 * the attention's output in attb (or, with att set by the caller, the
 * attention itself into attb: tail_attends), o_proj, x += o * gate and hb = the norm
 * before the MLP (Pi0.5: mods [6 W], the layer's two modulations; else
 * Gemma's post_norm); the MLP block, x += down(...) * gate2 and (next) the
 * next layer's input norm into hb: Pi0.5's adaRMSNorm of next_mod [3 W],
 * else Gemma's of next_w. */
static frt_cuda_gemma_mlp_args expert_tail_args(frt_model *m, const pc_gemma *y, const float *mods, int next,
                                                const float *next_w, const float *next_mod)
{
    const pi0_gemma_config *g = &pi0_of(m)->c.e;
    pc_model *pc = pc_of(m);
    const int W = g->width;
    frt_cuda_gemma_mlp_args a;
    memset(&a, 0, sizeof a);
    a.attn = pc->attb, a.o = y->o, a.q_dim = g->heads * g->head_dim, a.o_gate = mods ? mods + 2 * W : NULL;
    a.mlp_kind = mods ? FRT_CUDA_NORM_RMS_ADA : FRT_CUDA_NORM_RMS_ONE;
    a.mlp_w = mods ? mods + 3 * W : y->post_norm, a.mlp_b = mods ? mods + 4 * W : NULL;
    a.out = pc->hb, a.out_dtype = BF16, a.x = pc->x, a.hb = pc->hb, a.gu = y->gu, a.down = y->down;
    a.gate = mods ? mods + 5 * W : NULL;
    if (next) {
        a.kind = next_mod ? FRT_CUDA_NORM_RMS_ADA : FRT_CUDA_NORM_RMS_ONE;
        a.w = next_mod ? next_mod : next_w;
        a.b = next_mod ? next_mod + W : NULL;
    }
    a.eps = g->eps, a.rows = pc->ns, a.width = W, a.inter = g->inter;
    a.work = pc->tail_work, a.work_bytes = pc->tail_bytes;
    return a;
}

/* The next layer's q | k | v with RoPE in the tail a (frt_cuda_gemma_mlp):
 * q into qkvb, k and v into the suffix rows k, v of its KV, at pos. */
static void expert_tail_qkv(frt_model *m, frt_cuda_gemma_mlp_args *a, const uint16_t *qkv, uint16_t *k, uint16_t *v,
                            const int32_t *pos)
{
    const pi0_gemma_config *g = &pi0_of(m)->c.e;
    pc_model *pc = pc_of(m);
    a->qkv = qkv, a->heads = g->heads, a->kv_heads = g->kv_heads, a->head_dim = g->head_dim, a->ld_kv = pc->KV;
    a->q_out = pc->qkvb, a->k_out = k, a->v_out = v, a->pos = pos, a->inv_freq = pc->e_inv_freq;
}

/* Whether gemma_layer runs L's tail as one launch, and whether that launch
 * also writes the next layer's q | k | v (the next glayer's qkv_done). */
static int tail_fused(frt_model *m, const glayer *L)
{
    const pc_model *pc = pc_of(m);
    return pc->tail_on && L->g == &pi0_of(m)->c.e && L->n * L->slots == pc->ns && !L->last;
}
static int tail_writes_qkv(frt_model *m, const glayer *L)
{
    return tail_fused(m, L) && pc_of(m)->tail_on >= 2 && L->fuse_next && L->next_qkv;
}
/* Whether that launch also runs L's attention (before o_proj). */
static int tail_attends(frt_model *m, const glayer *L)
{
    return tail_fused(m, L) && pc_of(m)->tail_on == 3;
}

/* The MLP's products over pc->hb [n, W]: down(GeGLU(gate | up)) into
 * pc->y [n, W] f32. bf16 weights: gate | up in bf16 (half the bytes the
 * GeGLU reads, for one more bf16 rounding of gate and up; the actions stay
 * within the cuda backend's bar against the cpu one: tests/test_cuda_policy.c).
 * FP8 weights (y->gu8): each product's input quantized per row first, the
 * GeGLU and its codes one launch (docs/fp8.md). */
static int mlp_products(frt_model *m, const pc_gemma *y, int n, int W, int I)
{
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    if (y->gu8) {
        FRT_TRY(frt_cuda_fp8_quantize_rows_dynamic(s, pc->x8, pc->x8s, pc->hb, n, W));
        FRT_TRY(frt_cuda_gemm_fp8_run(pc->g8, s, pc->y, BF16, pc->x8, pc->x8s, y->gu8, y->gu_s, n, W, 2 * I));
        FRT_TRY(frt_cuda_geglu_quantize(s, pc->x8, pc->x8s, (const uint16_t *)pc->y, n, I));
        return frt_cuda_gemm_fp8_run(pc->g8, s, pc->y, F32, pc->x8, pc->x8s, y->down8, y->down_s, n, I, W);
    }
    FRT_TRY(frt_cuda_gemm_run(pc->gemm, s, pc->y, BF16, pc->hb, y->gu, n, W, 2 * I, 0));
    FRT_TRY(frt_cuda_geglu_tanh(s, pc->actb, BF16, pc->y, BF16, n, I));
    return gemm(m, pc->y, pc->actb, y->down, n, I, W);
}

static int gemma_layer(frt_model *m, const glayer *L)
{
    pc_model *pc = pc_of(m);
    const pi0_gemma_config *g = L->g;
    void *s = sp(m);
    const int W = g->width, Q = g->heads * g->head_dim, I = g->inter, n = L->n * L->slots;
    const float *mods = L->mods;
    const float *gate = mods ? mods + 2 * W : NULL, *gate2 = mods ? mods + 5 * W : NULL;
    if (!L->normed) FRT_TRY(gnorm(m, L, L->y->in_norm, mods));
    if (!L->qkv_done) FRT_TRY(gemm(m, pc->y, pc->hb, L->y->qkv, n, W, Q + 2 * pc->KV));
    FRT_TRY(gemma_attention(m, L));
    if (L->last) return 0;
    if (tail_fused(m, L)) {
        frt_cuda_gemma_mlp_args a = expert_tail_args(m, L->y, mods, L->fuse_next, L->next_w, L->next_mod);
        if (tail_writes_qkv(m, L)) expert_tail_qkv(m, &a, L->next_qkv, L->next_k, L->next_v, L->pos[0]);
        if (!tail_attends(m, L)) return frt_cuda_gemma_mlp(s, &a);
        const frt_cuda_attn_args at = gemma_attn_args(m, L, 0);
        a.att = &at, a.att_work = pc->att_work, a.att_work_bytes = pc->att_bytes;
        return frt_cuda_gemma_mlp(s, &a);
    }
    FRT_TRY(gemm(m, pc->y, pc->attb, L->y->o, n, Q, W));
    FRT_TRY(add_norm(m, L, gate, L->y->post_norm, mods ? mods + 3 * W : NULL));
    FRT_TRY(mlp_products(m, L->y, n, W, I));
    if (L->fuse_next) return add_norm(m, L, gate2, L->next_w, L->next_mod);
    return pi0_cuda_residual(s, pc->x, pc->y, NULL, gate2, n, W);
}

/* Prefix layer l of a variant, on prefix set `set`: bidirectional over the
 * valid rows. */
static glayer prefix_glayer(frt_model *m, const pc_shape *sh, int set, int l)
{
    pi0 *Pm = pi0_of(m);
    pc_model *pc = pc_of(m);
    const pi0_config *c = &Pm->c;
    const uint8_t *mask = frt_buffer_ptr(Pm->pre[set].mask);
    const int more = l + 1 < c->t.layers;
    glayer L = {.g = &c->t, .y = &pc->tl[l], .n = sh->rows, .slots = 1, .first = 0, .n_kv = sh->rows,
                .ld_s = sh->lds, .last = !more, .normed = l > 0, .fuse_next = more,
                .next_w = more ? pc->tl[l + 1].in_norm : NULL, .pos = {pc->pos_p}, .inv_freq = pc->t_inv_freq,
                .mods = NULL, .k = {pc->ek[set][l]}, .v = {pc->ev[set][l]}};
    L.mask[0].d_kmask = mask, L.mask[0].kmask_len = sh->rows, L.mask[0].sfx_start = sh->rows;
    L.mask[0].d_rmask = mask;
    return L;
}

/* Two one-slot prefix layers as one batch of two slots: L's rows in slot
 * 0 (positions pos_pc), u's in slot 1 (positions pos_p), each slot its own
 * KV and mask, each sh->rows rows. */
static glayer glayer_pair(frt_model *m, glayer L, const glayer *u)
{
    const pc_model *pc = pc_of(m);
    L.slots = 2;
    L.pos[0] = pc->pos_pc, L.pos[1] = pc->pos_p;
    L.k[1] = u->k[0], L.v[1] = u->v[0], L.mask[1] = u->mask[0];
    return L;
}

/* Prefix layer l of both prompts of fused CFG as one batch of two slots
 * (prefix_pair): slot 0 the conditioned prompt (its KV first in the
 * arena: the slots a positive stride apart), slot 1 the unconditioned one. */
static glayer prefix_pair_glayer(frt_model *m, const pc_shape *sh, int l)
{
    const glayer u = prefix_glayer(m, sh, PI0_UNCOND, l);
    return glayer_pair(m, prefix_glayer(m, sh, PI0_COND, l), &u);
}

/* The prefix sets of the expert's slots: one slot on `set`, or fused CFG's
 * two (slot 0 conditioned, slot 1 unconditioned); batch 1: slots 0..n-1 of
 * the batch (pc->bk / bv, batch.mask), cfg 1: slot s is rollout s / 2's
 * (conditioned when s is even), else rollout s's. */
typedef struct slots_of {
    int n, set[2];
    int batch, cfg;
} slots_of;

static const slots_of SERIAL_UNCOND = {1, {PI0_UNCOND, PI0_UNCOND}, 0, 0};
static const slots_of SERIAL_COND = {1, {PI0_COND, PI0_COND}, 0, 0};
static const slots_of FUSED = {2, {PI0_COND, PI0_UNCOND}, 0, 0};

/* Batch slot s's layer-l KV (the attention's work buffers), its suffix
 * positions and its row of batch.mask. */
static void batch_slot_kv(frt_model *m, int s, int l, glayer *L)
{
    pc_model *pc = pc_of(m);
    L->k[s] = pc->bk[l] + (size_t)s * pc->bkv, L->v[s] = pc->bv[l] + (size_t)s * pc->bkv;
    L->pos[s] = pc->bpos + (size_t)s * pc->nsp;
    L->mask[s].d_kmask = (const uint8_t *)frt_buffer_ptr(pi0_of(m)->pre[PI0_BATCH].mask) + (size_t)s * pc->P;
}

/* Expert layer l on the slots' prefix sets: the valid prefix rows and the
 * suffix block-causally (Pi0's state token sees itself alone). mods: the
 * layer's modulations in Pi0.5's [steps, 2 L + 1, 3 E] table (the next
 * layer's follow them). */
static glayer expert_glayer(frt_model *m, const slots_of *so, int l, const float *mods)
{
    pi0 *Pm = pi0_of(m);
    pc_model *pc = pc_of(m);
    const pi0_config *c = &Pm->c;
    const int more = l + 1 < c->e.layers;
    glayer L = {.g = &c->e, .y = &pc->el[l], .n = pc->ns, .slots = so->n, .first = pc->Pp,
                .n_kv = pc->Pp + pc->nsp, .ld_s = pc->lds_e, .last = 0, .normed = l > 0, .fuse_next = more,
                .next_w = more ? pc->el[l + 1].in_norm : NULL, .next_mod = more && mods ? mods + 6 * c->e.width : NULL,
                .inv_freq = pc->e_inv_freq, .mods = mods};
    for (int s = 0; s < so->n; s++) {
        const int set = so->set[s % 2];
        if (so->batch) {
            batch_slot_kv(m, s, l, &L); /* no RoPE table: the batch takes the unfused attention */
        } else {
            L.pos[s] = pc->pos_s[set], L.k[s] = pc->ek[set][l], L.v[s] = pc->ev[set][l], L.cs[s] = cs_of(m, set);
            L.mask[s].d_kmask = frt_buffer_ptr(Pm->pre[set].mask);
        }
        L.mask[s].kmask_len = pc->P;
        L.mask[s].sfx_start = pc->Pp, L.mask[s].sfx_n = pc->ns, L.mask[s].solo_first = !c->pi05;
    }
    if (more && so->n == 1 && !so->batch) {
        const int set = so->set[0];
        L.next_qkv = pc->el[l + 1].qkv;
        L.next_k = pc->ek[set][l + 1] + (size_t)pc->Pp * pc->KV;
        L.next_v = pc->ev[set][l + 1] + (size_t)pc->Pp * pc->KV;
    }
    return L;
}

/* frt_cuda_gemma_mlp_check of the tail a with the attention of expert
 * layer 0 (one slot: every layer's has its shape). */
static int expert_att_check(frt_model *m, frt_cuda_gemma_mlp_args *a)
{
    pc_model *pc = pc_of(m);
    const glayer L = expert_glayer(m, &SERIAL_COND, 0, pi0_of(m)->c.pi05 ? pc->x : NULL);
    const frt_cuda_attn_args at = gemma_attn_args(m, &L, 0);
    a->att = &at, a->att_work = pc->att_work, a->att_work_bytes = pc->att_bytes;
    const int rc = frt_cuda_gemma_mlp_check(a);
    a->att = NULL;
    return rc;
}

/* Plans every attention product the graphs capture (cuBLASLt's heuristic
 * cannot run inside a capture): each camera slot, each variant's prefix and
 * the expert (serial on either prefix set, and fused CFG's two slots). */
static int plan_attention(frt_model *m)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    for (int cam = 0; cam < c->max_cameras; cam++) {
        const frt_cuda_attn_args a = vit_attn_args(m, cam);
        FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &a));
    }
    const glayer F = expert_glayer(m, &FUSED, 0, NULL);
    frt_cuda_attn_args fa;
    for (int s = 0; s < 2; s++) {
        const frt_cuda_attn_args a = gemma_attn_args(m, &F, s);
        FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &a));
    }
    if (slots_batch(m, &F, &fa)) FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &fa));
    for (int set = 0; set < 2; set++) {
        const glayer E = expert_glayer(m, set == PI0_COND ? &SERIAL_COND : &SERIAL_UNCOND, 0, NULL);
        const frt_cuda_attn_args a = gemma_attn_args(m, &E, 0);
        FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &a));
        for (int cams = 1; cams <= c->max_cameras; cams++)
            for (int tok = 16;; tok *= 2) {
                const pc_shape v = shape_of(c, cams, bucket_of(c, tok));
                const glayer L = prefix_glayer(m, &v, set, 0);
                const frt_cuda_attn_args b = gemma_attn_args(m, &L, 0);
                FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &b));
                if (set == PI0_COND) { /* fused CFG's two prefixes as one batch (prefix_pair) */
                    const glayer Lp = prefix_pair_glayer(m, &v, 0);
                    frt_cuda_attn_args pb;
                    if (slots_batch(m, &Lp, &pb)) FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &pb));
                }
                if (v.tok == c->max_tokens) break;
            }
    }
    return plan_batch_attention(m);
}

/* Where one prefix's KV lives: per layer in the state (the set's buffers,
 * st_off elements in) and in the attention's buffers (wk_off in). */
typedef struct kv_home {
    frt_buffer *const *st_k, *const *st_v;
    size_t st_off;
    uint16_t *const *wk_k, *const *wk_v;
    size_t wk_off;
} kv_home;

/* The first `rows` KV rows of every prefix layer of h: from the attention's
 * buffers into the state (to_state), or back; a few launches
 * (pi0_cuda_copy_many) instead of a copy node per buffer. */
static int copy_kv_at(frt_model *m, const kv_home *h, int to_state, int rows)
{
    pc_model *pc = pc_of(m);
    const int layers = pi0_of(m)->c.t.layers;
    pi0_copy_list cl;
    memset(&cl, 0, sizeof cl);
    cl.bytes = (size_t)rows * pc->KV * 2;
    for (int l = 0; l < layers; l++) {
        void *st[2] = {(uint16_t *)frt_buffer_ptr(h->st_k[l]) + h->st_off,
                       (uint16_t *)frt_buffer_ptr(h->st_v[l]) + h->st_off};
        void *wk[2] = {h->wk_k[l] + h->wk_off, h->wk_v[l] + h->wk_off};
        for (int i = 0; i < 2; i++, cl.n++) {
            cl.dst[cl.n] = to_state ? st[i] : wk[i];
            cl.src[cl.n] = to_state ? wk[i] : st[i];
        }
        if (cl.n + 2 > PI0_COPY_MAX || l == layers - 1) {
            FRT_TRY(pi0_cuda_copy_many(sp(m), &cl));
            cl.n = 0;
        }
    }
    return 0;
}

/* copy_kv_at on prefix set `set` (prefix.* or prefix_cond.*). */
static int copy_kv(frt_model *m, int set, int to_state, int rows)
{
    const pi0_prefix_set *pre = &pi0_of(m)->pre[set];
    const pc_model *pc = pc_of(m);
    const kv_home h = {pre->k, pre->v, 0, pc->ek[set], pc->ev[set], 0};
    return copy_kv_at(m, &h, to_state, rows);
}

/* The prefix mask, positions and meta of one prompt from its camera and
 * token masks, then its rows (the vision tokens, the embedded prompt ids)
 * into pc->x. r: the rollout of a batch whose port rows are read (-1: the
 * single inference's ports); cond: the conditioned prompt. */
static int prefix_inputs_at(frt_model *m, const pc_shape *sh, int r, int cond, uint8_t *mask, int32_t *meta,
                            int32_t *pos, int row0)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    FRT_TRY(pi0_cuda_prefix_mask(s, mask, pos, meta, port_row(m, "pixel_attention_mask", r),
                                 port_row(m, cond ? "attention_mask_cond" : "attention_mask", r), sh->cams,
                                 c->n_patch, sh->tok, pc->P));
    return pi0_cuda_prefix_embed(s, pc->x + (size_t)row0 * c->t.width, port(m, "vision_tokens", FRT_IO_OUTPUT),
                                 pc->embed,
                                 port_row(m, cond ? "input_ids_cond" : "input_ids", r), sh->nv, sh->tok, c->t.width,
                                 c->vocab, sqrtf((float)c->t.width));
}
static int prefix_inputs(frt_model *m, const pc_shape *sh, int r, int cond, uint8_t *mask, int32_t *meta)
{
    return prefix_inputs_at(m, sh, r, cond, mask, meta, pc_of(m)->pos_p, 0);
}

/* The prefix of one prompt (set PI0_UNCOND: input_ids; PI0_COND:
 * input_ids_cond) over the vision tokens, into the set's state. */
static int rec_prefix(frt_model *m, const pc_shape *sh, int set)
{
    pi0 *Pm = pi0_of(m);
    const pi0_prefix_set *pre = &Pm->pre[set];
    FRT_TRY(prefix_inputs(m, sh, -1, set == PI0_COND, frt_buffer_ptr(pre->mask), frt_buffer_ptr(pre->meta)));
    for (int l = 0; l < Pm->c.t.layers; l++) {
        const glayer L = prefix_glayer(m, sh, set, l);
        FRT_TRY(gemma_layer(m, &L));
    }
    return copy_kv(m, set, 1, sh->rows);
}

/* Fused CFG's two prefixes (both prompts in one bucket) as one batch of two
 * slots (prefix_pair_glayer): each product over both prompts' rows, each
 * slot's attention over its own KV and mask; the sets' state as
 * rec_prefix leaves it, the KV within the bf16 products' rounding of it
 * (cuBLASLt at twice the rows). */
static int rec_prefix_pair(frt_model *m, const pc_shape *sh)
{
    pi0 *Pm = pi0_of(m);
    pc_model *pc = pc_of(m);
    const pi0_prefix_set *u = &Pm->pre[PI0_UNCOND], *cd = &Pm->pre[PI0_COND];
    FRT_TRY(prefix_inputs_at(m, sh, -1, 1, frt_buffer_ptr(cd->mask), frt_buffer_ptr(cd->meta), pc->pos_pc, 0));
    FRT_TRY(prefix_inputs_at(m, sh, -1, 0, frt_buffer_ptr(u->mask), frt_buffer_ptr(u->meta), pc->pos_p, sh->rows));
    for (int l = 0; l < Pm->c.t.layers; l++) {
        const glayer L = prefix_pair_glayer(m, sh, l);
        FRT_TRY(gemma_layer(m, &L));
    }
    FRT_TRY(copy_kv(m, PI0_UNCOND, 1, sh->rows));
    return copy_kv(m, PI0_COND, 1, sh->rows);
}

/* The suffix rows of step `step` from x_t xt [chunk, A] f32 (and Pi0's
 * state [state_dim] f32) into pc->x rows [row0, row0 + ns) ([ns, E]). */
static int suffix_embed(frt_model *m, int step, const float *xt, const float *state, int row0)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const int E = c->e.width, A = c->action_dim, ch = c->chunk;
    float *x = pc->x + (size_t)row0 * E;
    FRT_TRY(frt_cuda_convert(s, pc->xtb, BF16, xt, F32, NULL, 1, pc->n_act));
    FRT_TRY(gemm(m, pc->y, pc->xtb, pc->action_in_w, ch, A, E));
    if (c->pi05) return frt_cuda_bias_act(s, x, F32, pc->y, pc->action_in_b, ch, E, FRT_CUDA_ACT_NONE);
    FRT_TRY(frt_cuda_bias_act(s, pc->hb, BF16, pc->y, pc->action_in_b, ch, E, FRT_CUDA_ACT_NONE));
    FRT_TRY(gemm(m, pc->y, pc->hb, pc->atm_a_w, ch, E, E));
    FRT_TRY(frt_cuda_bias_act(s, pc->actb, BF16, pc->y, pc->atm_c + (size_t)step * E, ch, E, FRT_CUDA_ACT_SILU));
    FRT_TRY(gemm(m, pc->y, pc->actb, pc->atm_out_w, ch, E, E));
    FRT_TRY(frt_cuda_bias_act(s, x + E, F32, pc->y, pc->atm_out_b, ch, E, FRT_CUDA_ACT_NONE));
    FRT_TRY(frt_cuda_convert(s, pc->stb, BF16, state, F32, NULL, 1, c->state_dim));
    FRT_TRY(gemm(m, pc->y, pc->stb, pc->state_w, 1, c->state_dim, E));
    return frt_cuda_bias_act(s, x, F32, pc->y, pc->state_b, 1, E, FRT_CUDA_ACT_NONE);
}

/* vel [chunk, A] = the action head over pc->x rows [row0, row0 + ns). */
static int action_head(frt_model *m, const float *mods, int row0, float *vel)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const int E = c->e.width;
    const float *xo = pc->x + (size_t)(row0 + pc->ns - c->chunk) * E;
    if (mods) {
        const float *mod = mods + (size_t)2 * c->e.layers * 3 * E;
        FRT_TRY(frt_cuda_rmsnorm_ada(s, pc->hb, BF16, xo, mod, mod + E, c->chunk, E, c->e.eps));
    } else {
        FRT_TRY(frt_cuda_rmsnorm(s, pc->hb, BF16, xo, F32, pc->e_norm, NULL, c->chunk, 1, E, c->e.eps, 1));
    }
    FRT_TRY(gemm(m, pc->y, pc->hb, pc->action_out_w, c->chunk, E, c->action_dim));
    return frt_cuda_bias_act(s, vel, F32, pc->y, pc->action_out_b, c->chunk, c->action_dim, FRT_CUDA_ACT_NONE);
}

/* Pi0.5's suffix (action_in_proj of x_t alone: ns = chunk rows a slot, so
 * the slots' rows are contiguous) of b slots in one product: pc->x rows
 * [0, b chunk) from xt [b, chunk, A] f32. pc->hb holds the bf16 input. */
static int batch_suffix_pi05(frt_model *m, const float *xt, int b)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    const int rows = b * c->chunk;
    FRT_TRY(frt_cuda_convert(sp(m), pc->hb, BF16, xt, F32, NULL, 1, b * pc->n_act));
    FRT_TRY(gemm(m, pc->y, pc->hb, pc->action_in_w, rows, c->action_dim, c->e.width));
    return frt_cuda_bias_act(sp(m), pc->x, F32, pc->y, pc->action_in_b, rows, c->e.width, FRT_CUDA_ACT_NONE);
}

/* Pi0.5's action head of b slots in one product: vel [b, chunk, A] from
 * pc->x rows [0, b chunk) (the final adaRMSNorm of mods, then
 * action_out_proj). */
static int batch_head_pi05(frt_model *m, const float *mods, int b, float *vel)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    const int E = c->e.width, rows = b * c->chunk;
    const float *mod = mods + (size_t)2 * c->e.layers * 3 * E;
    FRT_TRY(frt_cuda_rmsnorm_ada(sp(m), pc->hb, BF16, pc->x, mod, mod + E, rows, E, c->e.eps));
    FRT_TRY(gemm(m, pc->y, pc->hb, pc->action_out_w, rows, E, c->action_dim));
    return frt_cuda_bias_act(sp(m), vel, F32, pc->y, pc->action_out_b, rows, c->action_dim, FRT_CUDA_ACT_NONE);
}

/* The state input of slot s of so (Pi0; Pi0.5 has none). */
static const float *slot_state(frt_model *m, const slots_of *so, int s)
{
    return port_row(m, "state", so->batch ? (so->cfg ? s / 2 : s) : -1);
}

/* vel + s n_act = v(xt + s n_act, t_step) for each slot s of so, on the
 * slot's prefix set the state holds (n_act = chunk x A). */
static int expert_velocity(frt_model *m, int step, const slots_of *so, const float *xt, float *vel)
{
    pi0 *Pm = pi0_of(m);
    const pi0_config *c = &Pm->c;
    pc_model *pc = pc_of(m);
    const int E = c->e.width, per = (2 * c->e.layers + 1) * 3 * E;
    const float *mods = c->pi05 ? pc->mods + (size_t)step * per : NULL;
    const int stacked = so->batch && c->pi05; /* a batch of Pi0.5: the heads over every slot's rows at once */
    if (stacked) FRT_TRY(batch_suffix_pi05(m, xt, so->n));
    for (int s = 0; s < so->n && !stacked; s++)
        FRT_TRY(suffix_embed(m, step, xt + (size_t)s * pc->n_act, slot_state(m, so, s), s * pc->ns));
    int qkv_done = 0;
    for (int l = 0; l < c->e.layers; l++) {
        glayer L = expert_glayer(m, so, l, mods ? mods + (size_t)2 * l * 3 * E : NULL);
        L.qkv_done = qkv_done;
        FRT_TRY(gemma_layer(m, &L));
        qkv_done = tail_writes_qkv(m, &L);
    }
    if (stacked) return batch_head_pi05(m, mods, so->n, vel);
    for (int s = 0; s < so->n; s++) FRT_TRY(action_head(m, mods, s * pc->ns, vel + (size_t)s * pc->n_act));
    return 0;
}

typedef struct flag_task {
    frt_model *m;
    const int32_t *flag; /* pinned: the rows of prefix.meta, then of prefix_cond.meta */
    int cfg;
} flag_task;

/* Host side of the prefix check: no prefix rows (either prefix under CFG)
 * -> FRT_ERR_STATE. */
static void task_flag(void *arg)
{
    const flag_task *a = arg;
    if ((a->flag[0] < 1 || (a->cfg && a->flag[1] < 1)) && a->m->task_status == 0) a->m->task_status = FRT_ERR_STATE;
}

/* One set's meta rows into the pinned flag and its suffix positions;
 * from_state: its prefix KV from the state into the attention's buffers
 * (the denoise-only graph: also after a capsule restore; a whole inference
 * has just written them there). */
static int flow_prefix(frt_model *m, int set, int from_state)
{
    pi0 *Pm = pi0_of(m);
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const int32_t *meta = frt_buffer_ptr(Pm->pre[set].meta);
    FRT_TRY(pi0_cuda_copy(s, (int32_t *)frt_buffer_ptr(pc->flag) + set, meta, sizeof(int32_t)));
    if (from_state) FRT_TRY(copy_kv(m, set, 0, pc->P));
    float *cs = cs_of(m, set);
    return pi0_cuda_suffix_pos(s, pc->pos_s[set], cs, cs ? pc->e_inv_freq : NULL, meta, pc->ns,
                               cs ? Pm->c.e.head_dim / 2 : 0);
}

/* One Euler step's velocity into pc->vel: unguided; serial CFG (the
 * conditioned then the unconditioned pass from pc->xt, combined); fused
 * CFG (both slots of pc->xs in one pass into pc->vs, combined). */
static int step_velocity(frt_model *m, int step, int cfg, int fused)
{
    pc_model *pc = pc_of(m);
    const frt_policy_cfg_options *g = port(m, "cfg", FRT_IO_INPUT);
    if (fused) {
        FRT_TRY(expert_velocity(m, step, &FUSED, pc->xs, pc->vs));
        return frt_cuda_cfg_combine(sp(m), pc->vel, pc->vs, pc->vs + pc->n_act, 1.0f, &g->beta, pc->n_act);
    }
    if (cfg) FRT_TRY(expert_velocity(m, step, &SERIAL_COND, pc->xt, pc->vel_c));
    FRT_TRY(expert_velocity(m, step, &SERIAL_UNCOND, pc->xt, pc->vel));
    if (cfg) FRT_TRY(frt_cuda_cfg_combine(sp(m), pc->vel, pc->vel_c, pc->vel, 1.0f, &g->beta, pc->n_act));
    return 0;
}

/* The noise, every Euler step and the output, on the prefix(es) in the
 * state (from_state: read from the state; else the prefix just recorded);
 * cfg: guidance, serial or fused (slot 0's x stepped with the guided
 * velocity and mirrored into slot 1, so both slots enter the next step
 * from the same x). */
static int rec_flow(frt_model *m, int cfg, int fused, int from_state)
{
    pi0 *Pm = pi0_of(m);
    const pi0_config *c = &Pm->c;
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const size_t bytes = (size_t)pc->n_act * sizeof(float);
    float *x = fused ? pc->xs : pc->xt;
    FRT_TRY(flow_prefix(m, PI0_UNCOND, from_state));
    if (cfg) FRT_TRY(flow_prefix(m, PI0_COND, from_state));
    flag_task ft = {m, frt_buffer_ptr(pc->flag), cfg};
    FRT_TRY(frt_stream_host_task(m->stream, task_flag, &ft, sizeof ft));
    FRT_TRY(pi0_cuda_noise(s, x, port(m, "noise", FRT_IO_INPUT), port(m, "options", FRT_IO_INPUT),
                           frt_buffer_ptr(m->episode), frt_buffer_ptr(Pm->pre[PI0_UNCOND].meta),
                           cfg ? frt_buffer_ptr(Pm->pre[PI0_COND].meta) : NULL, pc->n_act));
    if (fused) FRT_TRY(pi0_cuda_copy(s, x + pc->n_act, x, bytes));
    const float dt = (float)(-1.0 / c->n_steps);
    for (int step = 0; step < c->n_steps; step++) {
        FRT_TRY(step_velocity(m, step, cfg, fused));
        FRT_TRY(pi0_cuda_euler(s, x, pc->vel, step == 0 ? port(m, "velocity0", FRT_IO_OUTPUT) : NULL, dt,
                               pc->n_act));
        if (fused && step + 1 < c->n_steps) FRT_TRY(pi0_cuda_copy(s, x + pc->n_act, x, bytes));
    }
    if (fused) FRT_TRY(pi0_cuda_copy(s, port(m, "velocity_slots", FRT_IO_OUTPUT), pc->vs, 2 * bytes));
    return pi0_cuda_copy(s, port(m, "actions", FRT_IO_OUTPUT), x, bytes);
}

/* Keeps the node count of the variant `code` the stream is capturing (the
 * oldest entry goes when the table is full; -1 when the runtime cannot
 * count: the count is a diagnostic, the capture goes on). */
static void count_nodes(frt_model *m, int code)
{
    pc_model *pc = pc_of(m);
    int n = -1;
    if (pi0_cuda_capture_nodes(sp(m), &n) != 0) n = -1;
    int i = 0;
    while (i < pc->n_node && pc->node_code[i] != code) i++;
    if (i == PC_NODE_TABLE) {
        memmove(pc->node_code, pc->node_code + 1, (PC_NODE_TABLE - 1) * sizeof(int));
        memmove(pc->node_n, pc->node_n + 1, (PC_NODE_TABLE - 1) * sizeof(int));
        i = PC_NODE_TABLE - 1;
    } else if (i == pc->n_node) {
        pc->n_node++;
    }
    pc->node_code[i] = code, pc->node_n[i] = n;
}

/* rc->bucket: a variant code (variant_code), or 0: every camera slot and
 * max_tokens, unguided (the variant captured at load). Unguided, the
 * conditioned prefix is emptied (0 rows), as on the cpu backend. */
static int record_policy(frt_stream *st, void *user)
{
    (void)st;
    const frt_record_ctx *rc = user;
    frt_model *m = rc->m;
    pi0 *Pm = pi0_of(m);
    const pi0_config *c = &Pm->c;
    const int code = rc->bucket, cfg = code_cfg(code);
    const pc_shape sh = code > 0 ? shape_of(c, code_cams(code), code & VAR_TOK)
                                 : shape_of(c, c->max_cameras, c->max_tokens);
    FRT_TRY(rec_vision(m, &sh, port(m, "pixel_values", FRT_IO_INPUT)));
    const pc_shape shc = cfg ? shape_of(c, code_cams(code), code >> 13 & VAR_TOK) : sh;
    if (cfg && code_fused(code) && shc.tok == sh.tok) { /* both prompts in one bucket */
        FRT_TRY(rec_prefix_pair(m, &sh));
    } else if (cfg) {
        FRT_TRY(rec_prefix(m, &sh, PI0_UNCOND));
        FRT_TRY(rec_prefix(m, &shc, PI0_COND));
    } else {
        FRT_TRY(rec_prefix(m, &sh, PI0_UNCOND));
        FRT_TRY(pi0_cuda_zero(sp(m), frt_buffer_ptr(Pm->pre[PI0_COND].meta), 4 * sizeof(int32_t)));
    }
    FRT_TRY(rec_flow(m, cfg, code_fused(code), 0));
    count_nodes(m, code);
    return 0;
}

/* frt_arch_backend.policy_variant: an inference's (fused, camera slots,
 * CFG, prompt buckets), or the denoise-only graph's (in NULL: CFG or not,
 * fused or not; 0 for the unguided one captured at load). */
static int policy_variant(const frt_model *m, const frt_policy_inputs *in, int cfg)
{
    const pi0_config *c = &pi0_of(m)->c;
    const int fused = cfg && m->policy_cfg.fused;
    if (!in) return cfg ? variant_code(fused, 0, 1, 0, 0) : 0;
    return variant_code(fused, in->n_cameras, cfg, cfg ? bucket_of(c, in->n_tokens_cond) : 0,
                        bucket_of(c, in->n_tokens));
}

/* frt_arch_backend.policy_graph_nodes: the count count_nodes kept. */
static int policy_graph_nodes(const frt_model *m, const frt_policy_inputs *in, int cfg)
{
    const pc_model *pc = pc_of(m);
    const int code = policy_variant(m, in, cfg);
    for (int i = 0; i < pc->n_node; i++) {
        if (pc->node_code[i] != code) continue;
        if (pc->node_n[i] < 0) return frt_error(FRT_ERR_BACKEND, "pi0 cuda: the graph's nodes could not be counted");
        return pc->node_n[i];
    }
    return frt_error(FRT_ERR_NO_VARIANT, "pi0 cuda: the graph of this observation's shape was not captured yet");
}

static int record_denoise(frt_stream *st, void *user)
{
    (void)st;
    const frt_record_ctx *rc = user;
    return rec_flow(rc->m, code_cfg(rc->bucket), code_fused(rc->bucket), 1);
}

/* ---- batched rollouts ---------------------------------------------------------- */

/* The shape at the declared maxima (every camera slot, max_tokens). */
static pc_shape max_shape(const pi0_config *c) { return shape_of(c, c->max_cameras, c->max_tokens); }

/* Batch slot j's row of batch.meta [S, 4] i32. */
static int32_t *batch_meta(frt_model *m, int j)
{
    return (int32_t *)frt_buffer_ptr(pi0_of(m)->pre[PI0_BATCH].meta) + 4 * (size_t)j;
}

/* Prefix layer l on batch slot j: prefix_glayer's layer with the slot's
 * KV work buffers and its row of batch.mask. */
static glayer batch_prefix_glayer(frt_model *m, const pc_shape *sh, int j, int l)
{
    const pc_model *pc = pc_of(m);
    glayer L = prefix_glayer(m, sh, PI0_UNCOND, l);
    L.k[0] = pc->bk[l] + (size_t)j * pc->bkv, L.v[0] = pc->bv[l] + (size_t)j * pc->bkv;
    L.mask[0].d_kmask = L.mask[0].d_rmask =
        (const uint8_t *)frt_buffer_ptr(pi0_of(m)->pre[PI0_BATCH].mask) + (size_t)j * pc->P;
    return L;
}

/* Rollout r's prompt (cond: its conditioned prompt) over its vision
 * tokens, into batch slot j (its KV work buffers, then batch.* of the
 * state). */
static int rec_prefix_slot(frt_model *m, const pc_shape *sh, int r, int j, int cond)
{
    pi0 *Pm = pi0_of(m);
    pc_model *pc = pc_of(m);
    const pi0_prefix_set *pre = &Pm->pre[PI0_BATCH];
    uint8_t *mask = (uint8_t *)frt_buffer_ptr(pre->mask) + (size_t)j * pc->P;
    FRT_TRY(prefix_inputs(m, sh, r, cond, mask, batch_meta(m, j)));
    for (int l = 0; l < Pm->c.t.layers; l++) {
        const glayer L = batch_prefix_glayer(m, sh, j, l);
        FRT_TRY(gemma_layer(m, &L));
    }
    const kv_home h = {pre->k, pre->v, (size_t)j * pc->P * pc->KV, pc->bk, pc->bv, (size_t)j * pc->bkv};
    return copy_kv_at(m, &h, 1, sh->rows);
}

/* Batch slots j0 (slot 0) and j1 (slot 1) of prefix layer l as one batch
 * of two slots (glayer_pair). */
static glayer batch_pair_glayer(frt_model *m, const pc_shape *sh, int j0, int j1, int l)
{
    const glayer u = batch_prefix_glayer(m, sh, j1, l);
    return glayer_pair(m, batch_prefix_glayer(m, sh, j0, l), &u);
}

/* The prefix layers over pc->x's two blocks of sh->rows rows (batch slot
 * j0's, then j1's, their inputs in place: prefix_inputs_at), then both
 * slots' KV into batch.* of the state. */
static int batch_pair_layers(frt_model *m, const pc_shape *sh, int j0, int j1)
{
    pi0 *Pm = pi0_of(m);
    pc_model *pc = pc_of(m);
    const pi0_prefix_set *pre = &Pm->pre[PI0_BATCH];
    for (int l = 0; l < Pm->c.t.layers; l++) {
        const glayer L = batch_pair_glayer(m, sh, j0, j1, l);
        FRT_TRY(gemma_layer(m, &L));
    }
    const int js[2] = {j0, j1};
    for (int i = 0; i < 2; i++) {
        const kv_home h = {pre->k, pre->v, (size_t)js[i] * pc->P * pc->KV, pc->bk, pc->bv, (size_t)js[i] * pc->bkv};
        FRT_TRY(copy_kv_at(m, &h, 1, sh->rows));
    }
    return 0;
}

/* Rollout r's two prompts under CFG (both in one bucket) as one batch of
 * two slots, as rec_prefix_pair: the conditioned into batch slot j, the
 * unconditioned into j + 1. */
static int rec_prefix_slot_pair(frt_model *m, const pc_shape *sh, int r, int j)
{
    pc_model *pc = pc_of(m);
    uint8_t *mask = (uint8_t *)frt_buffer_ptr(pi0_of(m)->pre[PI0_BATCH].mask) + (size_t)j * pc->P;
    FRT_TRY(prefix_inputs_at(m, sh, r, 1, mask, batch_meta(m, j), pc->pos_pc, 0));
    FRT_TRY(prefix_inputs_at(m, sh, r, 0, mask + pc->P, batch_meta(m, j + 1), pc->pos_p, sh->rows));
    return batch_pair_layers(m, sh, j, j + 1);
}

/* Unguided rollouts r and r + 1: each one's vision, then both prefixes as
 * one batch of two slots, slot 0 rollout r + 1's rows (batch slot r + 1)
 * and slot 1 rollout r's (batch slot r): rollout r's rows are embedded
 * first, past the rows rollout r + 1's vision tower uses as scratch, and
 * r + 1's vision runs last, so vision_tokens holds the last rollout's as
 * after rollout-by-rollout prefixes. Their KV are a negative stride apart,
 * so the attention runs slot by slot (gemma_attention); the products run
 * once over both. */
static int rec_prefix_rollout_pair(frt_model *m, const pc_shape *sh, int r)
{
    pc_model *pc = pc_of(m);
    uint8_t *mask = (uint8_t *)frt_buffer_ptr(pi0_of(m)->pre[PI0_BATCH].mask) + (size_t)r * pc->P;
    FRT_TRY(rec_vision(m, sh, port_row(m, "pixel_values", r)));
    FRT_TRY(prefix_inputs_at(m, sh, r, 0, mask, batch_meta(m, r), pc->pos_p, sh->rows));
    FRT_TRY(rec_vision(m, sh, port_row(m, "pixel_values", r + 1)));
    FRT_TRY(prefix_inputs_at(m, sh, r + 1, 0, mask + pc->P, batch_meta(m, r + 1), pc->pos_pc, 0));
    return batch_pair_layers(m, sh, r + 1, r);
}

/* Rollout r's slots' suffix positions, then its x_1 (its noise row or the
 * episode stream, which advances in rollout order) into its slot(s). */
static int batch_start(frt_model *m, int r, const slots_of *so)
{
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const int j = so->cfg ? 2 * r : r, per = so->cfg ? 2 : 1;
    float *x = pc->bx + (size_t)j * pc->n_act;
    for (int i = j; i < j + per; i++)
        FRT_TRY(pi0_cuda_suffix_pos(s, pc->bpos + (size_t)i * pc->nsp, NULL, NULL, batch_meta(m, i), pc->ns, 0));
    FRT_TRY(pi0_cuda_noise(s, x, port_row(m, "noise", r), port_row(m, "options", r), frt_buffer_ptr(m->episode),
                           batch_meta(m, j + per - 1), so->cfg ? batch_meta(m, j) : NULL, pc->n_act));
    return so->cfg ? pi0_cuda_copy(s, x + pc->n_act, x, (size_t)pc->n_act * sizeof(float)) : 0;
}

/* One Euler step of every rollout from the slots' velocities pc->bvel:
 * unguided, one step over all the slots; guided, per rollout the combine
 * of its two slots (with its row of batch_cfg's beta) into the conditioned
 * slot's velocity, the step of that slot and (unless last) the mirror into
 * the unconditioned one, as fused CFG does. */
static int batch_euler(frt_model *m, int n, const slots_of *so, int last)
{
    pc_model *pc = pc_of(m);
    void *s = sp(m);
    const float dt = (float)(-1.0 / pi0_of(m)->c.n_steps);
    const size_t na = (size_t)pc->n_act;
    if (!so->cfg) return pi0_cuda_euler(s, pc->bx, pc->bvel, NULL, dt, n * pc->n_act);
    for (int r = 0; r < n; r++) {
        float *x = pc->bx + 2 * r * na, *v = pc->bvel + 2 * r * na;
        const frt_policy_cfg_options *g = port_row(m, "cfg", r);
        FRT_TRY(frt_cuda_cfg_combine(s, v, v, v + na, 1.0f, &g->beta, pc->n_act));
        FRT_TRY(pi0_cuda_euler(s, x, v, NULL, dt, pc->n_act));
        if (!last) FRT_TRY(pi0_cuda_copy(s, x + na, x, na * sizeof(float)));
    }
    return 0;
}

/* The flow of n rollouts: the noise, every Euler step with ONE expert
 * pass over all the slots, each rollout's chunk into its row of
 * batch_actions. */
static int rec_batch_flow(frt_model *m, int n, int cfg)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    const slots_of so = {cfg ? 2 * n : n, {PI0_UNCOND, PI0_UNCOND}, 1, cfg};
    const size_t bytes = (size_t)pc->n_act * sizeof(float);
    for (int r = 0; r < n; r++) FRT_TRY(batch_start(m, r, &so));
    for (int step = 0; step < c->n_steps; step++) {
        FRT_TRY(expert_velocity(m, step, &so, pc->bx, pc->bvel));
        FRT_TRY(batch_euler(m, n, &so, step + 1 == c->n_steps));
    }
    float *out = port(m, "batch_actions", FRT_IO_OUTPUT);
    if (!cfg) return pi0_cuda_copy(sp(m), out, pc->bx, (size_t)n * bytes);
    for (int r = 0; r < n; r++)
        FRT_TRY(pi0_cuda_copy(sp(m), out + (size_t)r * pc->n_act, pc->bx + (size_t)2 * r * pc->n_act, bytes));
    return 0;
}

/* frt_arch_backend.record_policy_batch: rc->bucket = n rollouts, with
 * FRT_POLICY_KEY_BATCH_CFG: guided (2 n slots), at the shape of the
 * variant rc->variant (the camera slots and prompt buckets of the batch's
 * largest observation; 0: every camera slot and max_tokens). Vision and
 * prefixes rollout by rollout, then the flow over every slot at once. */
static int record_batch(frt_stream *st, void *user)
{
    (void)st;
    const frt_record_ctx *rc = user;
    frt_model *m = rc->m;
    const pc_model *pc = pc_of(m);
    const int cfg = (rc->bucket & FRT_POLICY_KEY_BATCH_CFG) != 0, n = rc->bucket & 0xff;
    if (n < 1 || (cfg ? 2 : 1) * n > pc->slots)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "pi0 cuda: a batch of %d rollouts%s on %d slots", n,
                         cfg ? " under CFG" : "", pc->slots);
    const pi0_config *c = &pi0_of(m)->c;
    const int code = rc->variant;
    const pc_shape sh = code > 0 ? shape_of(c, code_cams(code), code & VAR_TOK) : max_shape(c);
    const pc_shape shc = code > 0 && cfg ? shape_of(c, code_cams(code), code >> 13 & VAR_TOK) : sh;
    for (int r = 0, step = 1; r < n; r += step) {
        step = !cfg && r + 1 < n ? 2 : 1;
        if (step == 2) { /* two unguided rollouts' prefixes as one batch of two */
            FRT_TRY(rec_prefix_rollout_pair(m, &sh, r));
            continue;
        }
        FRT_TRY(rec_vision(m, &sh, port_row(m, "pixel_values", r)));
        if (cfg && shc.tok == sh.tok) { /* both prompts in one bucket: one batch of two */
            FRT_TRY(rec_prefix_slot_pair(m, &sh, r, 2 * r));
            continue;
        }
        FRT_TRY(rec_prefix_slot(m, &sh, r, cfg ? 2 * r + 1 : r, 0));
        if (cfg) FRT_TRY(rec_prefix_slot(m, &shc, r, 2 * r, 1));
    }
    return rec_batch_flow(m, n, cfg);
}

/* The attention products of the batch graphs: each slot's prefix at every
 * variant's shape, and the expert over b = 1..slots slots (the graphs' own
 * pointers: the plans are keyed by the operands' alignment; the slots are
 * 256-byte aligned as the sets' buffers, so most of these find the sets'
 * plans made). */
static int plan_batch_attention(frt_model *m)
{
    const pi0_config *c = &pi0_of(m)->c;
    pc_model *pc = pc_of(m);
    for (int cams = 1; pc->slots > 0 && cams <= c->max_cameras; cams++)
        for (int tok = 16;; tok *= 2) {
            const pc_shape v = shape_of(c, cams, bucket_of(c, tok));
            for (int j = 0; j < pc->slots; j++) {
                const glayer L = batch_prefix_glayer(m, &v, j, 0);
                const frt_cuda_attn_args a = gemma_attn_args(m, &L, 0);
                FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &a));
                if (j % 2 == 0 && j + 1 < pc->slots) { /* a CFG rollout's two prompts (rec_prefix_slot_pair) */
                    const glayer Lp = batch_pair_glayer(m, &v, j, j + 1, 0);
                    frt_cuda_attn_args pb;
                    if (slots_batch(m, &Lp, &pb)) FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &pb));
                }
            }
            if (v.tok == c->max_tokens) break;
        }
    for (int b = 1; b <= pc->slots; b++) {
        const slots_of so = {b, {PI0_UNCOND, PI0_UNCOND}, 1, 0};
        const glayer L = expert_glayer(m, &so, 0, NULL);
        frt_cuda_attn_args a = gemma_attn_args(m, &L, 0);
        if (b > 1 && !slots_batch(m, &L, &a))
            return frt_error(FRT_ERR_STATE, "pi0 cuda: the batch slots are not a constant stride apart");
        FRT_TRY(frt_cuda_attention_masked_plan(pc->bmm, &a));
    }
    return 0;
}

/* The config and the GEMM algorithms (another algorithm is other
 * arithmetic: capsules do not cross a different choice). */
static uint64_t fingerprint_extra(const frt_model *m)
{
    const pc_model *pc = pc_of(m);
    const uint64_t h[3] = {XXH64(&pi0_of(m)->c, sizeof(pi0_config), 0x9101), frt_cuda_gemm_fingerprint(pc->gemm),
                           frt_cuda_gemm_fp8_fingerprint(pc->g8)};
    return XXH64(h, (pc->g8 ? 3 : 2) * sizeof h[0], 0x9102); /* bf16 weights: the hash of the two */
}

const frt_arch_backend frt_pi0_cuda_backend = {
    .name = "cuda",
    .kv_dtype = FRT_DT_BF16,
    .state_dtypes = "weights=bf16,kv=bf16",
    .weights_fp8 = 1, /* params.weight_dtype FRT_WEIGHT_FP8: the prefix's MLP (pc_gemma gu8 / down8) */
    .load_weights = cuda_load_weights,
    .alloc_scratch = cuda_alloc_scratch,
    .free = cuda_free,
    .fingerprint_extra = fingerprint_extra,
    .record_policy = record_policy,
    .record_policy_denoise = record_denoise,
    .policy_cfg_fused = 1,
    .policy_variant = policy_variant,
    .policy_graph_nodes = policy_graph_nodes,
    .record_policy_batch = record_batch,
    .policy_batch_on_use = 1,
    .gemm_autotune = 1,
};
