/*
 * embedding.c - token embedding lookup from an f32 or bf16 table
 * (HF embed_tokens). Tested in tests/test_kernel_embedding.c.
 */
#include "kernels/cpu/kernels_cpu.h"

#include <string.h>

void frt_cpu_embedding(float *out, const float *table, const int32_t *ids, int n_tok, int dim)
{
    for (int t = 0; t < n_tok; t++)
        memcpy(out + (size_t)t * dim, table + (size_t)ids[t] * dim, (size_t)dim * sizeof(float));
}

void frt_cpu_embedding_bf16(float *out, const uint16_t *table, const int32_t *ids, int n_tok,
                            int dim)
{
    for (int t = 0; t < n_tok; t++) {
        const uint16_t *row = table + (size_t)ids[t] * dim;
        float *o = out + (size_t)t * dim;
        for (int i = 0; i < dim; i++) {
            uint32_t bits = (uint32_t)row[i] << 16;
            memcpy(&o[i], &bits, sizeof bits);
        }
    }
}
