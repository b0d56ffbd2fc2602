/*
 * arch/pi0/pi0_weights.c - the Pi0 / Pi0.5 weights by name and shape (the
 * transformers 5.x pi0 layout or openpi's PyTorch layout, pi0.h: one table
 * of name prefixes per layout), converted to f32 into one arena.
 *
 * Two passes over one declaration list: the first checks every tensor's
 * presence and shape and sizes the arena, the second converts. Then every
 * tensor of the checkpoint must be one the list names (read, or known and
 * unused: the prefix's final norm, the expert's LM head, PaliGemma's LM
 * head beside an embed_tokens); anything else is refused with its name, so
 * a checkpoint of another layout never runs half-loaded.
 */
#include "model/arch/pi0/pi0.h"

#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a layout keeps each part (pi0.h). embed: the prefix's token
 * embedding; embed_alt: the tensor holding it when embed is absent (NULL:
 * none); unused: known tensors frt does not read, NULL-terminated. */
typedef struct pi0_names {
    const char *vision, *projector, *prefix, *expert;
    const char *embed, *embed_alt;
    const char *unused[4];
} pi0_names;

static const pi0_names NAMES[2] = {
    [PI0_LAYOUT_TRANSFORMERS] = {PI0_VISION, PI0_PROJECTOR, PI0_PREFIX, PI0_EXPERT, PI0_PREFIX "embed_tokens.weight",
                                 NULL,
                                 {PI0_PREFIX "norm.weight", "paligemma_with_expert.gemma_expert.lm_head.weight", NULL}},
    [PI0_LAYOUT_OPENPI] = {PI0_OPENPI_VISION, PI0_PROJECTOR, PI0_OPENPI_PREFIX, PI0_EXPERT,
                           PI0_OPENPI_PREFIX "embed_tokens.weight", PI0_OPENPI_EMBED,
                           {PI0_OPENPI_PREFIX "norm.weight", "paligemma_with_expert.gemma_expert.lm_head.weight", NULL}},
};

typedef struct loader {
    frt_model *m;
    const pi0_names *n;
    int pass;     /* 0: check and size, 1: convert */
    float *arena;
    size_t used;  /* floats */
    char **names; /* pass 0: every declared name */
    int n_names, cap;
} loader;

static int remember(loader *L, const char *name)
{
    if (L->pass) return 0;
    if (L->n_names == L->cap) {
        int cap = L->cap ? 2 * L->cap : 256;
        char **n = realloc(L->names, (size_t)cap * sizeof *n);
        if (!n) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory");
        L->names = n;
        L->cap = cap;
    }
    if (!(L->names[L->n_names] = strdup(name))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory");
    L->n_names++;
    return 0;
}

static void shape_str(char *buf, size_t size, int ndim, const int64_t *d)
{
    int o = snprintf(buf, size, "[");
    for (int i = 0; i < ndim && o < (int)size; i++) o += snprintf(buf + o, size - (size_t)o, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (o < (int)size) snprintf(buf + o, size - (size_t)o, "]");
}

/* The tensor `name` of shape dims[0..ndim) into *dst (pass 1). */
static int take_v(loader *L, const float **dst, int ndim, const int64_t *dims, const char *name)
{
    FRT_TRY(remember(L, name));
    const frt_tensor *t = frt_checkpoint_find(L->m->ckpt, name);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", name);
    int same = t->ndim == ndim;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        same &= same && t->shape[i] == dims[i];
        n *= dims[i];
    }
    if (!same) {
        char have[96], want[96];
        shape_str(have, sizeof have, t->ndim, t->shape);
        shape_str(want, sizeof want, ndim, dims);
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has shape %s, expected %s", name, have, want);
    }
    if (t->dtype == FRT_DT_F8_E4M3 || t->dtype == FRT_DT_F8_E5M2) /* its scales would be other tensors */
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "checkpoint: tensor '%s' is %s: FP8 policy checkpoints are not supported; load the bf16 "
                         "checkpoint (--dtype fp8 quantizes the prefix's MLP at load, docs/policies.md)",
                         name, frt_dtype_name(t->dtype));
    if (L->pass == 1) {
        float *p = L->arena + L->used;
        FRT_TRY(frt_tensor_to_f32(t, p));
        *dst = p;
        frt_model_progress_weights(L->m, t->nbytes);
    }
    L->used += (size_t)n;
    return 0;
}

/* take(L, &dst, {dims}, "fmt", ...) */
static int take(loader *L, const float **dst, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const int64_t dims[4] = {d0, d1, d2, d3};
    return take_v(L, dst, ndim, dims, name);
}

#define T1(dst, a, ...) FRT_TRY(take(L, (dst), 1, (a), 0, 0, 0, __VA_ARGS__))
#define T2(dst, a, b, ...) FRT_TRY(take(L, (dst), 2, (a), (b), 0, 0, __VA_ARGS__))

/* A Linear with bias: p.weight [out, in], p.bias [out]. */
static int linear(loader *L, const float **w, const float **b, int64_t out, int64_t in, const char *p)
{
    T2(w, out, in, "%s.weight", p);
    T1(b, out, "%s.bias", p);
    return 0;
}

/* A LayerNorm: p.weight, p.bias [n]. */
static int layernorm(loader *L, const float **w, const float **b, int64_t n, const char *p)
{
    T1(w, n, "%s.weight", p);
    T1(b, n, "%s.bias", p);
    return 0;
}

static int vit_layer(loader *L, const pi0_config *c, pi0_vit_layer *y, int l)
{
    const int64_t D = c->v_width, I = c->v_inter;
    char p[200];
#define VP(what) (snprintf(p, sizeof p, "%sencoder.layers.%d.%s", L->n->vision, l, what), p)
    FRT_TRY(layernorm(L, &y->ln1_w, &y->ln1_b, D, VP("layer_norm1")));
    FRT_TRY(layernorm(L, &y->ln2_w, &y->ln2_b, D, VP("layer_norm2")));
    FRT_TRY(linear(L, &y->q_w, &y->q_b, D, D, VP("self_attn.q_proj")));
    FRT_TRY(linear(L, &y->k_w, &y->k_b, D, D, VP("self_attn.k_proj")));
    FRT_TRY(linear(L, &y->v_w, &y->v_b, D, D, VP("self_attn.v_proj")));
    FRT_TRY(linear(L, &y->o_w, &y->o_b, D, D, VP("self_attn.out_proj")));
    FRT_TRY(linear(L, &y->fc1_w, &y->fc1_b, I, D, VP("mlp.fc1")));
    FRT_TRY(linear(L, &y->fc2_w, &y->fc2_b, D, I, VP("mlp.fc2")));
#undef VP
    return 0;
}

static int vision(loader *L, const pi0_config *c, pi0_weights *w)
{
    const char *v = L->n->vision;
    const int64_t D = c->v_width;
    FRT_TRY(take(L, &w->patch_w, 4, D, 3, c->patch, c->patch, "%sembeddings.patch_embedding.weight", v));
    T1(&w->patch_b, D, "%sembeddings.patch_embedding.bias", v);
    T2(&w->pos_emb, c->n_patch, D, "%sembeddings.position_embedding.weight", v);
    for (int l = 0; l < c->v_layers; l++) FRT_TRY(vit_layer(L, c, &w->vit[l], l));
    T1(&w->post_ln_w, D, "%spost_layernorm.weight", v);
    T1(&w->post_ln_b, D, "%spost_layernorm.bias", v);
    return linear(L, &w->proj_w, &w->proj_b, c->t.width, D, L->n->projector);
}

/* A Gemma RMSNorm p.weight [W], or (ada) the adaRMSNorm dense p.dense.weight
 * [3W, W] and p.dense.bias [3W]. */
static int gemma_norm(loader *L, int ada, const float **w, const float **dw, const float **db, int64_t W,
                      const char *p)
{
    if (!ada) {
        T1(w, W, "%s.weight", p);
        return 0;
    }
    T2(dw, 3 * W, W, "%s.dense.weight", p);
    T1(db, 3 * W, "%s.dense.bias", p);
    return 0;
}

static int gemma_layers(loader *L, const pi0_gemma_config *g, pi0_gemma_layer *ly, const char *prefix, int ada)
{
    const int64_t W = g->width, Q = (int64_t)g->heads * g->head_dim, KV = (int64_t)g->kv_heads * g->head_dim;
    char p[200];
    for (int l = 0; l < g->layers; l++) {
        pi0_gemma_layer *y = &ly[l];
        snprintf(p, sizeof p, "%slayers.%d.input_layernorm", prefix, l);
        FRT_TRY(gemma_norm(L, ada, &y->in_norm, &y->in_dense_w, &y->in_dense_b, W, p));
        snprintf(p, sizeof p, "%slayers.%d.post_attention_layernorm", prefix, l);
        FRT_TRY(gemma_norm(L, ada, &y->post_norm, &y->post_dense_w, &y->post_dense_b, W, p));
        T2(&y->q, Q, W, "%slayers.%d.self_attn.q_proj.weight", prefix, l);
        T2(&y->k, KV, W, "%slayers.%d.self_attn.k_proj.weight", prefix, l);
        T2(&y->v, KV, W, "%slayers.%d.self_attn.v_proj.weight", prefix, l);
        T2(&y->o, W, Q, "%slayers.%d.self_attn.o_proj.weight", prefix, l);
        T2(&y->gate, g->inter, W, "%slayers.%d.mlp.gate_proj.weight", prefix, l);
        T2(&y->up, g->inter, W, "%slayers.%d.mlp.up_proj.weight", prefix, l);
        T2(&y->down, W, g->inter, "%slayers.%d.mlp.down_proj.weight", prefix, l);
    }
    return 0;
}

/* The flow-matching heads: action in/out, and Pi0's state and action-time
 * MLP or Pi0.5's time MLP. */
static int heads(loader *L, const pi0_config *c, pi0_weights *w)
{
    const int64_t E = c->e.width;
    FRT_TRY(linear(L, &w->action_in_w, &w->action_in_b, E, c->action_dim, "action_in_proj"));
    FRT_TRY(linear(L, &w->action_out_w, &w->action_out_b, c->action_dim, E, "action_out_proj"));
    if (c->pi05) {
        FRT_TRY(linear(L, &w->time_in_w, &w->time_in_b, E, E, "time_mlp_in"));
        return linear(L, &w->time_out_w, &w->time_out_b, E, E, "time_mlp_out");
    }
    FRT_TRY(linear(L, &w->state_w, &w->state_b, E, c->state_dim, "state_proj"));
    FRT_TRY(linear(L, &w->atm_in_w, &w->atm_in_b, E, 2 * E, "action_time_mlp_in"));
    return linear(L, &w->atm_out_w, &w->atm_out_b, E, E, "action_time_mlp_out");
}

/* The prefix's token embedding: the layout's embed (then its embed_alt is
 * known and unused), else embed_alt (openpi's tied lm_head). */
static int embedding(loader *L, const pi0_config *c, pi0_weights *w)
{
    const char *name = L->n->embed, *alt = L->n->embed_alt;
    const frt_checkpoint *ck = L->m->ckpt;
    if (alt && frt_checkpoint_find(ck, name)) FRT_TRY(remember(L, alt));
    else if (alt && frt_checkpoint_find(ck, alt)) name = alt;
    else if (alt)
        return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s' (the tied token embedding; or '%s')",
                         alt, name);
    T2(&w->embed, c->vocab, c->t.width, "%s", name);
    return 0;
}

static int declare_all(loader *L)
{
    pi0 *P = pi0_of(L->m);
    const pi0_config *c = &P->c;
    pi0_weights *w = &P->w;
    char p[200];
    FRT_TRY(vision(L, c, w));
    FRT_TRY(embedding(L, c, w));
    FRT_TRY(gemma_layers(L, &c->t, w->tl, L->n->prefix, 0));
    FRT_TRY(gemma_layers(L, &c->e, w->el, L->n->expert, c->pi05));
    snprintf(p, sizeof p, "%snorm", L->n->expert);
    FRT_TRY(gemma_norm(L, c->pi05, &w->e_norm, &w->e_norm_dense_w, &w->e_norm_dense_b, c->e.width, p));
    FRT_TRY(heads(L, c, w));
    /* Known and unused: the prefix's final norm (only its KV is read) and
     * the expert's LM head (its outputs go through action_out_proj). */
    for (int i = 0; L->n->unused[i]; i++) FRT_TRY(remember(L, L->n->unused[i]));
    return 0;
}

/* Every checkpoint tensor must be a declared one. */
static int refuse_unknown(const loader *L)
{
    const frt_checkpoint *ck = L->m->ckpt;
    for (int i = 0; i < frt_checkpoint_count(ck); i++) {
        const char *name = frt_checkpoint_at(ck, i)->name;
        int known = 0;
        for (int j = 0; j < L->n_names && !known; j++) known = !strcmp(L->names[j], name);
        if (!known)
            return frt_error(FRT_ERR_FORMAT, "checkpoint: unknown tensor '%s' (not a %s weight; docs/policies.md)",
                             name, L->m->cfg.model_type);
    }
    return 0;
}

static int alloc_layers(pi0 *P)
{
    const pi0_config *c = &P->c;
    P->w.vit = calloc((size_t)c->v_layers, sizeof *P->w.vit);
    P->w.tl = calloc((size_t)c->t.layers, sizeof *P->w.tl);
    P->w.el = calloc((size_t)c->e.layers, sizeof *P->w.el);
    if (!P->w.vit || !P->w.tl || !P->w.el) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory");
    return 0;
}

int pi0_load_weights(frt_model *m)
{
    pi0 *P = pi0_of(m);
    FRT_TRY(alloc_layers(P));
    loader L = {.m = m, .n = &NAMES[P->c.layout], .pass = 0};
    int rc = declare_all(&L);
    if (rc == 0) rc = refuse_unknown(&L);
    if (rc == 0) {
        P->w.floats = L.used;
        P->w.arena = malloc(L.used * sizeof(float) + 64);
        if (!P->w.arena) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "pi0: out of memory for %zu weight floats", L.used);
    }
    if (rc == 0) {
        L.pass = 1;
        L.used = 0;
        L.arena = P->w.arena;
        rc = declare_all(&L);
        m->weight_bytes = P->w.floats * sizeof(float);
    }
    for (int i = 0; i < L.n_names; i++) free(L.names[i]);
    free(L.names);
    return rc;
}

void pi0_free_weights(frt_model *m)
{
    pi0 *P = pi0_of(m);
    if (!P) return;
    free(P->w.arena);
    free(P->w.vit);
    free(P->w.tl);
    free(P->w.el);
    memset(&P->w, 0, sizeof P->w);
}
