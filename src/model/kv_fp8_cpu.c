/*
 * model/kv_fp8_cpu.c - the FP8 E4M3 KV cache's cpu emulation shared by the
 * architectures (kv_fp8_cpu.h, docs/fp8.md).
 */
#include "model/kv_fp8_cpu.h"

#include "kernels/cpu/fp8.h"
#include "model/kv_scales.h"
#include "model/model_internal.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

int frt_kv_fp8_cpu_alloc(const frt_model *m, frt_kv_fp8_cpu *s)
{
    const frt_model_config *c = &m->cfg;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, C = (size_t)m->C, S = (size_t)m->max_seq;
    s->n_kv_heads = c->n_kv_heads;
    s->head_dim = c->head_dim;
    if (!(s->k = malloc(C * kvd * sizeof(float))) || !(s->v = malloc(C * kvd * sizeof(float))) ||
        !(s->kdq = malloc(S * kvd * sizeof(float))) || !(s->vdq = malloc(S * kvd * sizeof(float))) ||
        !(s->scale = malloc((size_t)2 * c->n_layers * c->n_kv_heads * sizeof(float))))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for the fp8 KV scratch");
    frt_model_kv_scales_table(m, 2 * c->n_layers, c->n_kv_heads, s->scale);
    return 0;
}

void frt_kv_fp8_cpu_free(frt_kv_fp8_cpu *s)
{
    free(s->k);
    free(s->v);
    free(s->kdq);
    free(s->vdq);
    free(s->scale);
    memset(s, 0, sizeof *s);
}

void frt_kv_fp8_cpu_step(const frt_kv_fp8_cpu *s, int l, uint8_t *k8, uint8_t *v8, int p0, int n)
{
    const int nkv = s->n_kv_heads, hd = s->head_dim;
    const size_t kvd = (size_t)nkv * hd;
    const float *ks = s->scale + (size_t)2 * l * nkv, *vs = ks + nkv; /* layer l's K, V heads */
    frt_fp8_quantize_rows(k8 + (size_t)p0 * kvd, s->k, ks, nkv, n * nkv, hd);
    frt_fp8_quantize_rows(v8 + (size_t)p0 * kvd, s->v, vs, nkv, n * nkv, hd);
    frt_fp8_dequantize_rows(s->kdq, k8, ks, nkv, (p0 + n) * nkv, hd);
    frt_fp8_dequantize_rows(s->vdq, v8, vs, nkv, (p0 + n) * nkv, hd);
}
