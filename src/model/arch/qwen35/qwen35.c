/*
 * arch/qwen35/qwen35.c - the Qwen3.5 hybrid's architecture table: the
 * config it runs, the hyperparameters in its fingerprint, its state
 * declaration (qwen35.h) and the views its backends use.
 */
#include "model/arch/qwen35/qwen35.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int q_check_config(const frt_model_config *c)
{
    if (!c->hybrid)
        return frt_error(FRT_ERR_UNSUPPORTED, "qwen35: model_type '%s' is not the Qwen3.5 hybrid", c->model_type);
    if (!c->norm_unit_offset || !c->qk_norm || c->attention_bias || c->o_proj_bias)
        return frt_error(FRT_ERR_UNSUPPORTED, "qwen35: a norm or bias layout the hybrid does not have");
    return 0;
}

static int q_describe(const frt_model_config *c, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "V=%d H=%d I=%d L=%d|attn %d/%d/%d gate=%d|lin %d/%d/%d/%d/%d|eps=%.9g theta=%.9g rot=%d tie=%d|",
                     c->vocab_size, c->hidden_size, c->intermediate_size, c->n_layers, c->n_heads, c->n_kv_heads,
                     c->head_dim, c->attn_output_gate, c->lin_n_k_heads, c->lin_n_v_heads, c->lin_k_head_dim,
                     c->lin_v_head_dim, c->lin_conv_kernel, (double)c->rms_norm_eps, (double)c->rope_theta,
                     c->rotary_dim, c->tie_word_embeddings);
    for (int l = 0; l < c->n_layers && n < (int)size - 2; l++) n += snprintf(buf + n, size - (size_t)n, "%d", c->layer_types[l]);
    return n < (int)size ? n : (int)size - 1;
}

static int q_init(frt_model *m)
{
    const frt_model_config *c = &m->cfg;
    qwen35 *q = calloc(1, sizeof *q);
    if (!q) return frt_error(FRT_ERR_OUT_OF_MEMORY, "qwen35: out of memory");
    m->arch_data = q;
    q->conv_channels = 2 * c->lin_n_k_heads * c->lin_k_head_dim + c->lin_n_v_heads * c->lin_v_head_dim;
    size_t L = (size_t)c->n_layers;
    q->kv_k = calloc(L, sizeof *q->kv_k);
    q->kv_v = calloc(L, sizeof *q->kv_v);
    q->gdn_state = calloc(L, sizeof *q->gdn_state);
    q->gdn_conv = calloc(L, sizeof *q->gdn_conv);
    if (!q->kv_k || !q->kv_v || !q->gdn_state || !q->gdn_conv)
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "qwen35: out of memory for the layer table");
    return 0;
}

static void q_fini(frt_model *m)
{
    qwen35 *q = qwen35_of(m);
    if (!q) return;
    free(q->kv_k);
    free(q->kv_v);
    free(q->gdn_state);
    free(q->gdn_conv);
    free(q);
    m->arch_data = NULL;
}

static void decl(frt_state_decl *d, int layer, const char *what, frt_dtype dt, frt_state_validity v, int ndim,
                 int64_t d0, int64_t d1, int64_t d2)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s.%d.%s", v == FRT_STATE_ROWS ? "kv" : "gdn", layer, what);
    d->dtype = dt;
    d->validity = v;
    d->recurrent = v == FRT_STATE_WHOLE;
    d->ndim = ndim;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->shape[2] = d2;
}

static int q_declare_state(const frt_model *m, frt_state_decl *out, int cap)
{
    const frt_model_config *c = &m->cfg;
    const qwen35 *q = qwen35_of(m);
    if (cap < 2 * c->n_layers) return frt_error(FRT_ERR_UNSUPPORTED, "qwen35: %d layers: the state table is full", c->n_layers);
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layer_types[l] == FRT_LAYER_FULL_ATTENTION) {
            decl(&out[n++], l, "k", m->kv_dtype, FRT_STATE_ROWS, 3, m->max_seq, c->n_kv_heads, c->head_dim);
            decl(&out[n++], l, "v", m->kv_dtype, FRT_STATE_ROWS, 3, m->max_seq, c->n_kv_heads, c->head_dim);
        } else {
            decl(&out[n++], l, "state", FRT_DT_F32, FRT_STATE_WHOLE, 3, c->lin_n_v_heads, c->lin_k_head_dim,
                 c->lin_v_head_dim);
            decl(&out[n++], l, "conv", FRT_DT_F32, FRT_STATE_WHOLE, 2, q->conv_channels, c->lin_conv_kernel - 1, 0);
        }
    }
    return n;
}

static int q_bind_state(frt_model *m)
{
    qwen35 *q = qwen35_of(m);
    int i = 0;
    for (int l = 0; l < m->cfg.n_layers; l++, i += 2) {
        if (m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION) {
            q->kv_k[l] = m->state[i].buf;
            q->kv_v[l] = m->state[i + 1].buf;
        } else {
            q->gdn_state[l] = m->state[i].buf;
            q->gdn_conv[l] = m->state[i + 1].buf;
        }
    }
    return 0;
}

static void q_info(const frt_model *m, frt_model_info *info)
{
    info->n_full_layers = m->cfg.n_full_layers;
    info->n_linear_layers = m->cfg.n_linear_layers;
}

static const char *const q_model_types[] = {"qwen3_5_text", "qwen3_5", NULL};

const frt_arch frt_arch_qwen35 = {
    .name = "qwen35",
    .model_types = q_model_types,
    .check_config = q_check_config,
    .describe = q_describe,
    .init = q_init,
    .declare_state = q_declare_state,
    .bind_state = q_bind_state,
    .fini = q_fini,
    .info = q_info,
    .state_layer = frt_state_layer_pairs, /* q_declare_state: two entries a layer */
    .cpu = &frt_qwen35_cpu_backend,
#if FRT_HAVE_CUDA
    .cuda = &frt_qwen35_cuda_backend,
#endif
};
