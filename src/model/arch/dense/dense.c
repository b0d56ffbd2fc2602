/*
 * arch/dense/dense.c - the dense family's architecture table (dense.h): the
 * configs it runs, the hyperparameters in its fingerprint, the RoPE table,
 * its state declaration (two KV buffers per layer) and the views its
 * backends use.
 */
#include "model/arch/dense/dense.h"

#include "kernels/cpu/rope_freqs.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int d_check_config(const frt_model_config *c)
{
    if (c->hybrid || c->n_linear_layers)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense: model_type '%s' has linear-attention layers", c->model_type);
    if (c->norm_unit_offset || c->attn_output_gate)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense: a zero-centred norm or an attention output gate");
    if (c->rotary_dim != c->head_dim)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense: partial RoPE (rotary dim %d of head_dim %d) is not supported",
                         c->rotary_dim, c->head_dim);
    if (c->head_dim > 1024 || c->head_dim % 2)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense: head_dim %d (even, at most 1024 supported)", c->head_dim);
    if (strcmp(c->rope_type, "default") != 0 && strcmp(c->rope_type, "llama3") != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense: rope_type '%s' is not supported", c->rope_type);
    return 0;
}

static int d_describe(const frt_model_config *c, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "V=%d H=%d I=%d L=%d|attn %d/%d/%d bias=%d obias=%d qknorm=%d|eps=%.9g rope=%s theta=%.9g "
                     "f=%.9g lo=%.9g hi=%.9g orig=%d|tie=%d|",
                     c->vocab_size, c->hidden_size, c->intermediate_size, c->n_layers, c->n_heads, c->n_kv_heads,
                     c->head_dim, c->attention_bias, c->o_proj_bias, c->qk_norm, (double)c->rms_norm_eps,
                     c->rope_type, (double)c->rope_theta, (double)c->rope_factor, (double)c->rope_low_freq_factor,
                     (double)c->rope_high_freq_factor, c->rope_original_max_pos, c->tie_word_embeddings);
    return n < (int)size ? n : (int)size - 1;
}

static int d_init(frt_model *m)
{
    const frt_model_config *c = &m->cfg;
    dense *d = calloc(1, sizeof *d);
    if (!d) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense: out of memory");
    m->arch_data = d;
    d->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(float));
    d->kv_k = calloc((size_t)c->n_layers, sizeof *d->kv_k);
    d->kv_v = calloc((size_t)c->n_layers, sizeof *d->kv_v);
    if (!d->inv_freq || !d->kv_k || !d->kv_v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense: out of memory");
    if (!strcmp(c->rope_type, "llama3"))
        frt_rope_inv_freq_llama3(d->inv_freq, c->head_dim, c->rope_theta, c->rope_factor, c->rope_low_freq_factor,
                                 c->rope_high_freq_factor, c->rope_original_max_pos);
    else
        frt_rope_inv_freq_default(d->inv_freq, c->head_dim, c->rope_theta);
    return 0;
}

static void d_fini(frt_model *m)
{
    dense *d = dense_of(m);
    if (!d) return;
    free(d->inv_freq);
    free(d->kv_k);
    free(d->kv_v);
    free(d);
    m->arch_data = NULL;
}

static void decl_kv(frt_state_decl *d, int layer, const char *what, const frt_model *m)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "kv.%d.%s", layer, what);
    d->dtype = m->kv_dtype;
    d->validity = FRT_STATE_ROWS;
    d->ndim = 3;
    d->shape[0] = m->max_seq;
    d->shape[1] = m->cfg.n_kv_heads;
    d->shape[2] = m->cfg.head_dim;
}

static int d_declare_state(const frt_model *m, frt_state_decl *out, int cap)
{
    int L = m->cfg.n_layers;
    if (cap < 2 * L) return frt_error(FRT_ERR_UNSUPPORTED, "dense: %d layers: the state table is full", L);
    for (int l = 0; l < L; l++) {
        decl_kv(&out[2 * l], l, "k", m);
        decl_kv(&out[2 * l + 1], l, "v", m);
    }
    return 2 * L;
}

static int d_bind_state(frt_model *m)
{
    dense *d = dense_of(m);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        d->kv_k[l] = m->state[2 * l].buf;
        d->kv_v[l] = m->state[2 * l + 1].buf;
    }
    return 0;
}

static int d_kv_layer(const frt_model *m, int layer, int *k_entry, int *v_entry)
{
    if (layer < 0 || layer >= m->cfg.n_layers) return frt_error(FRT_ERR_OUT_OF_RANGE, "dense: layer %d", layer);
    *k_entry = 2 * layer;
    *v_entry = 2 * layer + 1;
    return 0;
}

static void d_info(const frt_model *m, frt_model_info *info)
{
    info->n_full_layers = m->cfg.n_layers;
    info->n_linear_layers = 0;
}

static const char *const d_model_types[] = {"llama", "mistral", "qwen2", "qwen3", NULL};

const frt_arch frt_arch_dense = {
    .name = "dense",
    .model_types = d_model_types,
    .check_config = d_check_config,
    .describe = d_describe,
    .init = d_init,
    .declare_state = d_declare_state,
    .bind_state = d_bind_state,
    .fini = d_fini,
    .info = d_info,
    .kv_layer = d_kv_layer,
    .state_layer = frt_state_layer_pairs, /* k, v: two entries a layer */
    .cpu = &frt_dense_cpu_backend,
#if FRT_HAVE_CUDA
    .cuda = &frt_dense_cuda_backend,
#endif
};
