/*
 * tools/bench_floors.c - the floors of `frt bench`: FLOPs and bytes of a
 * prefill and a decode step from the config, and this machine's measured
 * ceilings (device copy, host <-> device copies, the GEMM rate) they are
 * divided by. See bench_model.c's header for what each floor means.
 */
#include "bench_run.h"

#include "frt/exec.h"
#include "frt/model.h"
#include "frt/status.h"
#include "frt/debug.h"
#include "frt/config.h"


#include <cblas.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- arithmetic of the floors ---------------------------------------------- */


int bm_weight_mode(const frt_model_config *c, int w_fp8)
{
    if (c->quant.method == FRT_QUANT_FP8_BLOCK) return BM_W_FP8_BLOCK;
    return w_fp8 || c->quant.method != FRT_QUANT_NONE ? BM_W_FP8 : BM_W_FLOAT;
}

bm_counts bm_counts_of(const frt_model_config *c, int cuda, int kv_fp8, int w_mode, int lm_fp8)
{
    const double kv_elt = kv_fp8 ? 1 : (cuda ? 2 : 4);
    bm_counts k = {0};
    k.lm_b = cuda ? 2 : 4;
    k.w_b = w_mode != BM_W_FLOAT && cuda ? 1 : k.lm_b;
    k.scale_b = w_mode == BM_W_FP8 && cuda ? 4 : 0;
    double H = c->hidden_size;
    int conv_ch = 2 * c->lin_n_k_heads * c->lin_k_head_dim + c->lin_n_v_heads * c->lin_v_head_dim;
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layer_types[l] == FRT_LAYER_FULL_ATTENTION) {
            double q = (double)c->n_heads * c->head_dim;
            k.mat_params += q * (c->attn_output_gate ? 2 : 1) * H + 2.0 * c->n_kv_heads * c->head_dim * H + H * q;
            k.mat_rows += q * (c->attn_output_gate ? 2 : 1) + 2.0 * c->n_kv_heads * c->head_dim + H;
            k.kv_b_per_tok += 2.0 * c->n_kv_heads * c->head_dim * kv_elt;
        } else {
            double vd = (double)c->lin_n_v_heads * c->lin_v_head_dim;
            k.mat_params += (double)conv_ch * H + vd * H + 2.0 * c->lin_n_v_heads * H + H * vd;
            k.mat_rows += (double)conv_ch + vd + 2.0 * c->lin_n_v_heads + H;
            k.state_fixed_b += 4.0 * c->lin_n_v_heads * c->lin_k_head_dim * c->lin_v_head_dim +
                               4.0 * conv_ch * (c->lin_conv_kernel - 1);
        }
        k.mat_params += 3.0 * c->intermediate_size * H;
        k.mat_rows += 2.0 * c->intermediate_size + H;
    }
    k.lm_head = (double)c->vocab_size * H;
    if (lm_fp8 && cuda) /* E4M3 codes and a scale a vocabulary row (the cpu emulation reads f32) */
        k.lm_b = 1, k.lm_scale_b = 4.0 * c->vocab_size;
    if (w_mode == BM_W_FP8_BLOCK && cuda) /* exact when the dims are multiples of the block */
        k.block_scale_b = 4.0 * k.mat_params / ((double)c->quant.block_out * c->quant.block_in);
    return k;
}

/* FLOPs to prefill n tokens at positions p0..p0+n-1. */
double bm_prefill_flops(const frt_model_config *c, const bm_counts *k, double p0, double n)
{
    double f = 2.0 * k->mat_params * n + 2.0 * k->lm_head;
    double pairs = n * p0 + n * (n + 1) / 2; /* causal (query, key) pairs */
    f += (double)c->n_full_layers * 4.0 * pairs * c->n_heads * c->head_dim;
    f += (double)c->n_linear_layers * n * c->lin_n_v_heads * 8.0 * c->lin_k_head_dim * c->lin_v_head_dim;
    return f;
}

double bm_prefill_floor_ms(const bm_run *r, const bm_counts *k, double p0, double n)
{
    const double all = bm_prefill_flops(&r->cfg, k, p0, n);
    if (r->fl.gemm_fp8_flops <= 0) return all / r->fl.gemm_flops * 1e3;
    const double mat = 2.0 * k->mat_params * n;
    return (mat / r->fl.gemm_fp8_flops + (all - mat) / r->fl.gemm_flops) * 1e3;
}

/* Bytes a decode step reads at context ctx (weights at the widths of k). */
double bm_decode_bytes(const bm_counts *k, double ctx)
{
    return k->mat_params * k->w_b + k->mat_rows * k->scale_b + k->block_scale_b + k->lm_head * k->lm_b + k->lm_scale_b +
           k->state_fixed_b + k->kv_b_per_tok * ctx;
}

/* ---- measured ceilings ----------------------------------------------------- */

static int time_copy(frt_context *ctx, frt_space dst_sp, frt_space src_sp, size_t bytes, int reps, double *ms_out)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *dst = NULL, *src = NULL;
    frt_event *e0 = NULL, *e1 = NULL;
    double ms[32];
    int rc = frt_buffer_alloc(ctx, "bench.dst", dst_sp, bytes, &dst);
    if (!rc) rc = frt_buffer_alloc(ctx, "bench.src", src_sp, bytes, &src);
    if (!rc) rc = frt_buffer_fill(src, 0, bytes, 0x3C, s);
    if (!rc) rc = frt_buffer_fill(dst, 0, bytes, 0, s);
    if (!rc) rc = frt_event_create(ctx, &e0);
    if (!rc) rc = frt_event_create(ctx, &e1);
    if (!rc) rc = frt_stream_sync(s);
    for (int i = -2; i < reps && !rc; i++) {
        float t = 0;
        rc = frt_event_record(e0, s);
        if (!rc) rc = frt_buffer_copy(dst, 0, src, 0, bytes, s);
        if (!rc) rc = frt_event_record(e1, s);
        if (!rc) rc = frt_event_sync(e1);
        if (!rc) rc = frt_event_elapsed_ms(e0, e1, &t);
        if (!rc && i >= 0) ms[i] = t;
    }
    if (!rc) *ms_out = bm_pct(ms, reps, 0.5);
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_buffer_free(dst);
    frt_buffer_free(src);
    return rc;
}

#if FRT_HAVE_CUDA
#endif

static int time_gemm_cpu(int n, double *ms_out)
{
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b),
          *c = malloc((size_t)n * n * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: sgemm buffers");
    }
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double ms[8];
    const int reps = 3;
    for (int i = -1; i < reps; i++) {
        double t0 = bm_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        if (i >= 0) ms[i] = (bm_now_s() - t0) * 1e3;
    }
    *ms_out = bm_pct(ms, reps, 0.5);
    free(a), free(b), free(c);
    return 0;
}

int bm_measure_floors(bm_run *r)
{
    frt_context *ctx = NULL;
    int rc = frt_context_create(r->o.backend, 0, &ctx);
    if (rc) return rc;
    const int cuda = r->o.backend == FRT_BACKEND_CUDA;
    bm_mem_sample(r, ctx);
    r->mem_base = r->mem_peak;
    size_t big = cuda ? ((size_t)2 << 30) : ((size_t)64 << 20), host = cuda ? ((size_t)1 << 30) : ((size_t)64 << 20);
    double ms = 0;
    fprintf(stderr, "frt bench: measuring copy bandwidth and GEMM rate...\n");
    rc = time_copy(ctx, FRT_SPACE_DEVICE, FRT_SPACE_DEVICE, big, cuda ? 10 : 5, &ms);
    if (!rc) r->fl.d2d_rw_Bps = 2.0 * (double)big / (ms * 1e-3);
    if (!rc) rc = time_copy(ctx, FRT_SPACE_DEVICE, FRT_SPACE_PINNED_HOST, host, 5, &ms);
    if (!rc) r->fl.h2d_Bps = (double)host / (ms * 1e-3);
    if (!rc) rc = time_copy(ctx, FRT_SPACE_PINNED_HOST, FRT_SPACE_DEVICE, host, 5, &ms);
    if (!rc) r->fl.d2h_Bps = (double)host / (ms * 1e-3);
    if (!rc) {
#if FRT_HAVE_CUDA
        if (cuda) {
            r->fl.gemm_n = 8192;
            r->fl.gemm_what = "bf16 GEMM 8192^3 via frt_cuda_gemm (cuBLASLt), median of 10";
            rc = frt_debug_gemm_ms(ctx, 8192, 10, &ms);
        }
#endif
        if (!cuda) {
            r->fl.gemm_n = 1024;
            r->fl.gemm_what = "f32 OpenBLAS sgemm 1024^3, median of 3";
            rc = time_gemm_cpu(1024, &ms);
        }
        if (!rc) r->fl.gemm_flops = 2.0 * r->fl.gemm_n * (double)r->fl.gemm_n * r->fl.gemm_n / (ms * 1e-3);
        if (!rc && cuda && r->w_mode == BM_W_FP8) { /* the FP8 prefill GEMM, the same shape */
            rc = frt_debug_gemm_fp8_ms(ctx, r->fl.gemm_n, 10, &ms);
            if (!rc) r->fl.gemm_fp8_flops = 2.0 * r->fl.gemm_n * (double)r->fl.gemm_n * r->fl.gemm_n / (ms * 1e-3);
        }
    }
    frt_context_destroy(ctx);
    if (rc) return rc;
    fprintf(stderr, "frt bench: d2d %.0f GB/s (read+write), h2d %.1f GB/s, d2h %.1f GB/s, GEMM %.1f TFLOP/s",
            r->fl.d2d_rw_Bps / 1e9, r->fl.h2d_Bps / 1e9, r->fl.d2h_Bps / 1e9, r->fl.gemm_flops / 1e12);
    if (r->fl.gemm_fp8_flops > 0) fprintf(stderr, ", FP8 GEMM %.1f TFLOP/s", r->fl.gemm_fp8_flops / 1e12);
    fprintf(stderr, "\n");
    json_object_set_new(
        r->root, "floors",
        json_pack("{s:f, s:f, s:f, s:f, s:s, s:s}", "d2d_copy_GBps_read_plus_write", r->fl.d2d_rw_Bps / 1e9,
                  "h2d_pinned_GBps", r->fl.h2d_Bps / 1e9, "d2h_pinned_GBps", r->fl.d2h_Bps / 1e9, "gemm_TFLOPs",
                  r->fl.gemm_flops / 1e12, "gemm", r->fl.gemm_what, "copy",
                  cuda ? "2 GiB d2d (median of 10), 1 GiB pinned h2d/d2h (median of 5), events"
                       : "64 MiB copies (median of 5)"));
    if (r->fl.gemm_fp8_flops > 0) {
        json_t *f = json_object_get(r->root, "floors");
        json_object_set_new(f, "gemm_fp8_TFLOPs", json_real(r->fl.gemm_fp8_flops / 1e12));
        json_object_set_new(f, "gemm_fp8",
                            json_string("FP8 E4M3 GEMM 8192^3 via frt_cuda_gemm_fp8 (cuBLASLt, per-row scales), "
                                        "median of 10; the prefill floor's matrix FLOPs"));
    }
    return 0;
}
