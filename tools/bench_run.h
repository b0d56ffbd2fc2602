/* tools/bench_run.h - the state of one `frt bench` model run, shared by
 * bench_model.c (options, the runs, the report) and bench_floors.c (the
 * arithmetic of the floors and the measured ceilings). */
#ifndef FRT_TOOLS_BENCH_RUN_H
#define FRT_TOOLS_BENCH_RUN_H

#include "frt/debug.h"
#include "frt/exec.h"
#include "frt/config.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_LIST 16

typedef struct bm_opts {
    const char *model_dir, *shape, *json_path, *dump_ids, *write_config, *tmpdir;
    int random_weights, no_run, no_tiers, no_sampling_costs, backend_set;
    frt_backend backend;
    int chunk;
    int chunks[MAX_LIST], n_chunks;
    int prefixes[MAX_LIST], n_prefixes;
    int sweep_prefixes[MAX_LIST], n_sweep;
    int suffix, repeats, sweep_repeats, decode_tokens, threads, max_seq;
    int kv_fp8; /* --kv-dtype fp8: params.kv_dtype FRT_KV_FP8 (docs/fp8.md) */
    int w_fp8;  /* --dtype fp8: params.weight_dtype FRT_WEIGHT_FP8 (docs/fp8.md) */
    int lm_fp8; /* --lm-head-dtype fp8: params.lm_head_dtype FRT_WEIGHT_FP8 (docs/fp8.md) */
    int prefill_group; /* --prefill-group G: params.prefill_group (0: the backend's default) */
    int autotune;          /* --autotune N: params.gemm_autotune (0: the heuristic's choice) */
    const char *tune_file; /* --tune-file FILE: params.gemm_tune_file, or NULL */
    unsigned long long seed;
    double time_budget_s;
} bm_opts;

typedef struct bm_floors {
    double d2d_rw_Bps; /* bytes read + written per second */
    double h2d_Bps, d2h_Bps;
    double gemm_flops; /* FLOP/s */
    double gemm_fp8_flops; /* FLOP/s of the FP8 GEMM (cuda with --dtype fp8), else 0 */
    int gemm_n;
    const char *gemm_what;
} bm_floors;

typedef struct bm_run {
    bm_opts o;
    frt_model_config cfg;
    frt_checkpoint *ck; /* random weights (NULL for -m DIR) */
    int32_t *ids;
    int n_ids;
    bm_floors fl;
    size_t mem_base, mem_peak, mem_total;
    double t_start;
    json_t *root;
    int first_error; /* the first failed step's status; the run goes on past it */
    int w_mode;      /* the layers' matrices as loaded (bm_weight_mode) */
} bm_run;

/* What the layers' matrices are held in: float (the backend's width), E4M3
 * with a scale per output channel (--dtype fp8, a per-tensor or per-channel
 * FP8 checkpoint), or E4M3 with a scale per 128 x 128 block (a block-wise
 * checkpoint: decoded by the block-scaled GEMV, prefill on bf16 GEMMs over
 * dequantized weights, docs/fp8.md). */
enum { BM_W_FLOAT = 0, BM_W_FP8 = 1, BM_W_FP8_BLOCK = 2 };
int bm_weight_mode(const frt_model_config *c, int w_fp8);

typedef struct bm_counts {
    double mat_params;    /* every matrix of the layers (no embedding, no lm_head) */
    double lm_head;       /* vocab x hidden */
    double state_fixed_b; /* recurrent + conv state bytes */
    double kv_b_per_tok;  /* KV bytes per token of context */
    double mat_rows;      /* output channels of those matrices (one FP8 scale each) */
    double w_b, lm_b;     /* bytes a decode step reads per matrix weight and per lm_head weight */
    double scale_b;       /* bytes per output channel of the matrices' scales (4 with FP8 weights, else 0) */
    double block_scale_b; /* block-wise FP8: 4 bytes per bo x bi block of the matrices, else 0 */
    double lm_scale_b;    /* bytes of the lm_head's scales (--lm-head-dtype fp8 on cuda: 4 a vocabulary row), else 0 */
} bm_counts;

/* bench_model.c */
double bm_now_s(void);                              /* CLOCK_MONOTONIC seconds */
double bm_pct(const double *v, int n, double q);    /* the q-quantile of v[0..n) (0.5: median) */
void bm_mem_sample(bm_run *r, frt_context *ctx);    /* device memory in use -> r->mem_peak */
/* FRT_PROFILE=phase: the driver's profiler on (on 1, once) / off (on 0)
 * around that phase, for `ncu --profile-from-start off`; else a no-op. */
void bm_profile(const char *phase, int on);

/* bench_opts.c: parses argv (argv[0] "bench") into *o with its defaults.
 * Returns 0, 2 after printing a usage error, or 1 when --help was printed. */
int bm_parse_args(int argc, char **argv, bm_opts *o);

/* bench_floors.c */
/* kv_fp8: one byte a KV value; w_mode (BM_W_*) FP8: the layers' matrices
 * stream one byte a weight plus an f32 scale per output channel (BM_W_FP8)
 * or per block (BM_W_FP8_BLOCK) where the backend reads E4M3 (cuda), 4
 * bytes a weight on cpu (its FP8 emulation holds f32 values); the lm_head
 * keeps the backend's width. */
bm_counts bm_counts_of(const frt_model_config *c, int cuda, int kv_fp8, int w_mode, int lm_fp8);
double bm_prefill_flops(const frt_model_config *c, const bm_counts *k, double p0, double n);
double bm_decode_bytes(const bm_counts *k, double ctx);
/* The FLOP floor of that prefill in ms: with an FP8 GEMM rate measured
 * (r->fl.gemm_fp8_flops > 0: BM_W_FP8 on cuda) the layers' matrix FLOPs run
 * at it and the rest (attention, the recurrent layers, the bf16 lm_head) at
 * the bf16 rate; else everything at r->fl.gemm_flops. */
double bm_prefill_floor_ms(const bm_run *r, const bm_counts *k, double p0, double n);
int bm_measure_floors(bm_run *r); /* fills r->fl: copy rates and the GEMM rate of this machine */

#endif
