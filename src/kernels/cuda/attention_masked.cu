/*
 * kernels/cuda/attention_masked.cu - masked GQA attention as products
 * (kernels_policy_cuda.h: frt_cuda_attention_masked): S = scale Q K^T
 * (frt_cuda_bmm, f32), P = masked softmax(S) (frt_cuda_softmax_masked, bf16),
 * O = P V (frt_cuda_bmm, bf16). Two layouts, no transposes:
 *   n_kv_heads == 1 (Gemma): the heads of a token are consecutive rows of
 *     one product, [n_q * n_heads, head_dim] x [n_kv, head_dim]^T;
 *   n_heads == n_kv_heads (SigLIP): one batch per head, the head's columns
 *     of q, k, v read in place through the row strides.
 * Several attentions of one layout (SigLIP's camera slots) share the
 * softmax launch (frt_cuda_attention_masked_many).
 * Twin: frt_cpu_attention_masked (tests/test_cuda_policy_kernels.c).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

#include <string.h>

static int attn_check(const frt_cuda_attn_args *a)
{
    FRT_ARG(a->out && a->q && a->k && a->v && a->scores && a->probs, "attention_masked: NULL pointer");
    FRT_ARG(a->n_q >= 1 && a->n_kv >= 1 && a->n_heads >= 1 && a->n_kv_heads >= 1 && a->head_dim >= 1 &&
                a->ld_s >= a->n_kv && a->ldkv >= a->n_kv_heads * a->head_dim && a->ldq >= a->n_heads * a->head_dim,
            "attention_masked: sizes n_q %d n_kv %d heads %d/%d head_dim %d ld_s %d", a->n_q, a->n_kv, a->n_heads,
            a->n_kv_heads, a->head_dim, a->ld_s);
    if (a->n_kv_heads != 1 && a->n_kv_heads != a->n_heads)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "attention_masked: %d heads over %d KV heads (only 1 KV head or one per head)", a->n_heads,
                         a->n_kv_heads);
    if (a->n_kv_heads == 1 && a->n_heads > 1 && a->ldq != a->n_heads * a->head_dim)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "attention_masked: one KV head needs contiguous query rows");
    FRT_ARG(a->batch >= 0 && a->sq >= 0 && a->skv >= 0 && a->sout >= 0, "attention_masked: batch %d or a negative stride",
            a->batch);
    if (a->batch > 1 && a->n_kv_heads != 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "attention_masked: a batch of %d attentions needs one KV head", a->batch);
    return 0;
}

/* The two products: s = scale Q K^T into scores, o = P V into out. The
 * folded layout (one KV head) batches a->batch attentions through the
 * strides; MHA batches the heads. */
static void attn_products(const frt_cuda_attn_args *a, frt_cuda_bmm_args *s, frt_cuda_bmm_args *o, int *rows)
{
    const int fold = a->n_kv_heads == 1, hd = a->head_dim, nb = a->batch > 1 ? a->batch : 1;
    const int batch = fold ? nb : a->n_heads, m = fold ? a->n_q * a->n_heads : a->n_q;
    memset(s, 0, sizeof *s);
    s->y = a->scores, s->y_dtype = FRT_CUDA_F32, s->x = a->q, s->w = a->k;
    s->m = m, s->n = a->n_kv, s->k = hd, s->trans_w = 1, s->batch = batch;
    s->ldx = fold ? hd : a->ldq, s->ldw = a->ldkv, s->ldy = a->ld_s;
    s->sx = fold ? a->sq : hd, s->sw = fold ? a->skv : hd, s->sy = (long long)m * a->ld_s;
    s->alpha = a->scale;
    memset(o, 0, sizeof *o);
    o->y = a->out, o->y_dtype = FRT_CUDA_BF16, o->x = a->probs, o->w = a->v;
    o->m = m, o->n = hd, o->k = a->n_kv, o->trans_w = 0, o->batch = batch;
    o->ldx = a->ld_s, o->ldw = a->ldkv, o->ldy = fold ? hd : (long long)a->n_heads * hd;
    o->sx = (long long)m * a->ld_s, o->sw = fold ? a->skv : hd, o->sy = fold ? a->sout : hd;
    o->alpha = 1.0f;
    *rows = batch * m;
}

extern "C" int frt_cuda_attention_masked_plan(frt_cuda_bmm *h, const frt_cuda_attn_args *a)
{
    FRT_ARG(h && a, "attention_masked: NULL argument");
    FRT_TRY(attn_check(a));
    frt_cuda_bmm_args s, o;
    int rows;
    attn_products(a, &s, &o, &rows);
    FRT_TRY(frt_cuda_bmm_plan(h, &s));
    return frt_cuda_bmm_plan(h, &o);
}

/* The masked softmax of `rows` score rows of a's layout (rows_total: those
 * of several attentions whose scores follow one another). */
static int attn_softmax(void *stream, const frt_cuda_attn_args *a, int rows_total)
{
    frt_cuda_attn_mask mk = a->mask;
    mk.rows_per_token = a->n_kv_heads == 1 ? a->n_heads : 1;
    mk.tokens = a->n_q;
    return frt_cuda_softmax_masked(stream, a->probs, a->scores, rows_total, a->n_kv, a->ld_s, &mk);
}

extern "C" int frt_cuda_attention_masked(frt_cuda_bmm *h, void *stream, const frt_cuda_attn_args *a)
{
    return frt_cuda_attention_masked_many(h, stream, a, 1);
}

/* b has a's sizes, scale and mask. */
static int same_layout(const frt_cuda_attn_args *a, const frt_cuda_attn_args *b)
{
    const frt_cuda_attn_mask *x = &a->mask, *y = &b->mask;
    return a->batch <= 1 && b->batch <= 1 && a->n_q == b->n_q && a->n_kv == b->n_kv && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads &&
           a->head_dim == b->head_dim && a->ld_s == b->ld_s && a->scale == b->scale && x->d_kmask == y->d_kmask &&
           x->kmask_len == y->kmask_len && x->sfx_start == y->sfx_start && x->sfx_n == y->sfx_n &&
           x->solo_first == y->solo_first && x->d_rmask == y->d_rmask && x->kmask_stride == y->kmask_stride;
}

extern "C" int frt_cuda_attention_masked_many(frt_cuda_bmm *h, void *stream, const frt_cuda_attn_args *a, int n)
{
    FRT_ARG(h && a && n >= 1 && n <= FRT_CUDA_ATTN_MANY_MAX, "attention_masked: NULL argument or n %d", n);
    frt_cuda_bmm_args s, o;
    int rows;
    FRT_TRY(attn_check(a));
    attn_products(a, &s, &o, &rows);
    const size_t step = (size_t)rows * a->ld_s;
    for (int i = 1; i < n; i++) {
        FRT_TRY(attn_check(&a[i]));
        FRT_ARG(same_layout(a, &a[i]) && a[i].scores == a->scores + i * step && a[i].probs == a->probs + i * step,
                "attention_masked: attention %d of %d has another layout, or its scores / probs do not follow the "
                "previous ones", i, n);
    }
    for (int i = 0; i < n; i++) {
        attn_products(&a[i], &s, &o, &rows);
        FRT_TRY(frt_cuda_bmm_run(h, stream, &s));
    }
    FRT_TRY(attn_softmax(stream, a, rows * n));
    for (int i = 0; i < n; i++) {
        attn_products(&a[i], &s, &o, &rows);
        FRT_TRY(frt_cuda_bmm_run(h, stream, &o));
    }
    return 0;
}
