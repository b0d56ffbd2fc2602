/*
 * model/kv_fp8_cpu.h - the FP8 E4M3 KV cache on the cpu backend
 * (docs/fp8.md "On the cpu backend"), shared by the architectures whose
 * attention layers keep a KV cache (dense, qwen35). An emulation for
 * correctness, not a speed path: each step quantizes its K and V rows into
 * the cache with the static per-head scales (kernels/cpu/fp8.h, satfinite
 * RNE) and dequantizes the whole valid prefix of the layer into f32
 * scratch, which attention reads, the step's own rows included, so a
 * row's value never depends on whether it was just computed or restored
 * from a capsule. Internal.
 */
#ifndef FRT_MODEL_KV_FP8_CPU_H
#define FRT_MODEL_KV_FP8_CPU_H

#include <stdint.h>

typedef struct frt_model frt_model;

/* The scratch of an FP8 KV cache (kvd = n_kv_heads * head_dim). */
typedef struct frt_kv_fp8_cpu {
    float *k, *v;     /* [C, kvd] the step's K / V rows before quantization (after norms and RoPE) */
    float *kdq, *vdq; /* [max_seq, kvd] a layer's cache rows dequantized */
    float *scale;     /* [n_layers, 2, n_kv_heads] the static per-head scales (frt_model_kv_scales_table) */
    int n_kv_heads, head_dim;
} frt_kv_fp8_cpu;

/* Allocates s for m (m->C rows a step, m->max_seq rows of cache, two
 * state entries per layer: layer l's K and V scales at entries 2 l and
 * 2 l + 1, 1.0 for a layer without KV) and fills the scales. Errors:
 * FRT_ERR_OUT_OF_MEMORY (s is then partly allocated: free it with
 * frt_kv_fp8_cpu_free). */
int frt_kv_fp8_cpu_alloc(const frt_model *m, frt_kv_fp8_cpu *s);

/* Frees what frt_kv_fp8_cpu_alloc allocated and zeroes s; s may be zeroed
 * or partly allocated. */
void frt_kv_fp8_cpu_free(frt_kv_fp8_cpu *s);

/* Layer l's step: the rows s->k, s->v [n, kvd] quantized into the E4M3
 * caches k8, v8 [max_seq, n_kv_heads, head_dim] at rows p0 .. p0 + n - 1
 * (q = encode(x * (1 / scale[head]))), then rows 0 .. p0 + n - 1 of both
 * dequantized into s->kdq, s->vdq (decode(q) * scale[head]). */
void frt_kv_fp8_cpu_step(const frt_kv_fp8_cpu *s, int l, uint8_t *k8, uint8_t *v8, int p0, int n);

#endif /* FRT_MODEL_KV_FP8_CPU_H */
