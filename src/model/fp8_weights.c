/*
 * model/fp8_weights.c - FP8 E4M3 Linear weights (docs/fp8.md "FP8
 * weights"), shared by the architectures that hold them (dense, qwen35;
 * fp8_weights.h): the checks and the dequantization of an FP8
 * checkpoint's weights with their scales (cfg.quant: per-tensor or
 * per-channel weight_scale of compressed-tensors, 128x128-block
 * weight_scale_inv of transformers' fp8), and the quantize-at-load of
 * params.weight_dtype FRT_WEIGHT_FP8 (per output channel, max|row| / 448).
 *
 * The value of a code q in row r, column c: decode(q) * s, in f32, where s
 * is the tensor's scale, row r's, or block (r / bo, c / bi)'s; the same
 * value the cuda kernels see (decode is exact; one f32 product).
 */
#include "model/fp8_weights.h"

#include "model/model_internal.h"

#include "kernels/cpu/fp8.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int frt_fp8w_check_dtype(const frt_tensor *t, const char *full)
{
    if (t->dtype == FRT_DT_F8_E4M3 || t->dtype == FRT_DT_F8_E5M2)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "checkpoint: tensor '%s' is %s: FP8 weights are read only for the decoder-layer Linear "
                         "weights of an FP8 checkpoint (docs/fp8.md)",
                         full, frt_dtype_name(t->dtype));
    return 0;
}

/* The scale tensor's name and the shape it must have for a [d0, d1]
 * weight: want[0..nwant) alternatives of (ndim, shape). */
typedef struct scale_spec {
    char name[300];
    int nwant;
    int ndim[2];
    int64_t shape[2][2];
} scale_spec;

static void spec_for(const frt_quant_config *q, const char *full, int64_t d0, int64_t d1, scale_spec *s)
{
    memset(s, 0, sizeof *s);
    int block = q->method == FRT_QUANT_FP8_BLOCK;
    snprintf(s->name, sizeof s->name, "%s%s", full, block ? "_scale_inv" : "_scale");
    s->nwant = 2;
    if (q->method == FRT_QUANT_FP8_TENSOR) { /* [] or [1] */
        s->ndim[1] = 1;
        s->shape[1][0] = 1;
    } else if (q->method == FRT_QUANT_FP8_CHANNEL) { /* [d0, 1] or [d0] */
        s->ndim[0] = 2, s->shape[0][0] = d0, s->shape[0][1] = 1;
        s->ndim[1] = 1, s->shape[1][0] = d0;
    } else { /* [ceil(d0 / bo), ceil(d1 / bi)] */
        s->nwant = 1;
        s->ndim[0] = 2;
        s->shape[0][0] = (d0 + q->block_out - 1) / q->block_out;
        s->shape[0][1] = (d1 + q->block_in - 1) / q->block_in;
    }
}

static int shape_matches(const frt_tensor *t, const scale_spec *s)
{
    for (int k = 0; k < s->nwant; k++) {
        if (t->ndim != s->ndim[k]) continue;
        int ok = 1;
        for (int i = 0; i < t->ndim; i++) ok &= t->shape[i] == s->shape[k][i];
        if (ok) return 1;
    }
    return 0;
}

static void shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < size) snprintf(buf + o, size - o, "]");
}

/* The scale tensor of FP8 weight `full` [d0, d1], checked (present, a
 * float dtype, the layout's shape); *out is borrowed from the checkpoint. */
static int find_scale(const frt_model *m, const char *full, int64_t d0, int64_t d1, const frt_tensor **out)
{
    scale_spec s;
    spec_for(&m->cfg.quant, full, d0, d1, &s);
    const frt_tensor *t = frt_checkpoint_find(m->ckpt, s.name);
    if (!t)
        return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: FP8 weight '%s' has no scale tensor '%s'", full, s.name);
    if (t->dtype != FRT_DT_F32 && t->dtype != FRT_DT_BF16 && t->dtype != FRT_DT_F16)
        return frt_error(FRT_ERR_FORMAT, "checkpoint: scale '%s' is %s (F32, BF16 or F16 expected)", s.name,
                         frt_dtype_name(t->dtype));
    if (!shape_matches(t, &s)) {
        char have[96], want[96];
        shape_str(have, sizeof have, t->ndim, t->shape);
        shape_str(want, sizeof want, s.ndim[0], s.shape[0]);
        return frt_error(FRT_ERR_FORMAT, "checkpoint: scale '%s' has shape %s, expected %s%s for weight [%lld, %lld]",
                         s.name, have, want, s.nwant > 1 ? " (or the other documented form)" : "", (long long)d0,
                         (long long)d1);
    }
    *out = t;
    return 0;
}

/* The scales of `st` as f32 into a new array (*out, free it), each finite
 * and positive. */
static int read_scales(const frt_tensor *st, float **out)
{
    size_t n = (size_t)frt_tensor_numel(st);
    float *s = malloc(n * sizeof(float));
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoint: out of memory for scale '%s'", st->name);
    int rc = frt_tensor_to_f32(st, s);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!(isfinite(s[i]) && s[i] > 0.0f))
            rc = frt_error(FRT_ERR_FORMAT, "checkpoint: scale '%s' element %zu is %g (finite and positive expected)",
                           st->name, i, (double)s[i]);
    if (rc < 0) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* FRT_ERR_FORMAT naming `full` when one of t's n codes is a NaN (0x7F /
 * 0xFF): a NaN weight would make every logit NaN on any backend; the
 * checkpoints frt reads hold satfinite codes (docs/fp8.md). */
static int codes_finite(const frt_tensor *t, const char *full, size_t n)
{
    const uint8_t *q = t->data;
    size_t nan = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if ((q[i] & 0x7F) == 0x7F && nan++ == 0) first = i;
    if (!nan) return 0;
    return frt_error(FRT_ERR_FORMAT,
                     "checkpoint: tensor '%s' holds %zu NaN codes (the first at element %zu); FP8 weights must be "
                     "finite",
                     full, nan, first);
}

int frt_fp8w_linear_check(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1)
{
    if (t->dtype == FRT_DT_F8_E5M2)
        return frt_error(FRT_ERR_UNSUPPORTED, "checkpoint: tensor '%s' is F8_E5M2 (only E4M3 weights are supported)",
                         full);
    if (t->dtype != FRT_DT_F8_E4M3) return 0;
    if (m->cfg.quant.method == FRT_QUANT_NONE)
        return frt_error(FRT_ERR_FORMAT,
                         "checkpoint: tensor '%s' is F8_E4M3 but config.json has no quantization_config (its "
                         "scales are unknown)",
                         full);
    const frt_tensor *st;
    FRT_TRY(find_scale(m, full, d0, d1, &st));
    float *s;
    FRT_TRY(read_scales(st, &s));
    free(s);
    return codes_finite(t, full, (size_t)(d0 * d1));
}

/* x [d0, d1] <- decode(q) * scale of its 128x128 (bo x bi) block. */
static void dequant_blocks(float *x, const uint8_t *q, const float *s, const frt_quant_config *qc, int64_t d0,
                           int64_t d1)
{
    int64_t nbi = (d1 + qc->block_in - 1) / qc->block_in;
    for (int64_t r = 0; r < d0; r++) {
        const float *sr = s + (r / qc->block_out) * nbi;
        for (int64_t c = 0; c < d1; c++) x[r * d1 + c] = frt_fp8_e4m3_decode(q[r * d1 + c]) * sr[c / qc->block_in];
    }
}

static int dequant_checkpoint(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1,
                              float *out)
{
    const frt_tensor *st;
    float *s;
    FRT_TRY(find_scale(m, full, d0, d1, &st));
    FRT_TRY(read_scales(st, &s));
    const frt_quant_config *qc = &m->cfg.quant;
    const uint8_t *q = t->data;
    if (qc->method == FRT_QUANT_FP8_BLOCK)
        dequant_blocks(out, q, s, qc, d0, d1);
    else
        frt_fp8_dequantize_rows(out, q, s, qc->method == FRT_QUANT_FP8_TENSOR ? 1 : (int)d0, (int)d0, (int)d1);
    free(s);
    return 0;
}

void frt_fp8w_quantize_rows(uint8_t *q, float *s, const float *x, int64_t d0, int64_t d1)
{
#pragma omp parallel for schedule(static) if (d0 * d1 >= (1 << 20))
    for (int64_t r = 0; r < d0; r += 64) {
        const int nr = (int)(d0 - r < 64 ? d0 - r : 64);
        frt_fp8_quantize_rows_dynamic(q + r * d1, s + r, x + r * d1, nr, (int)d1);
    }
}

int frt_fp8w_round_trip(float *x, int64_t d0, int64_t d1, const char *full)
{
    uint8_t *q = malloc((size_t)(d0 * d1));
    float *s = malloc((size_t)d0 * sizeof(float));
    if (!q || !s) {
        free(q);
        free(s);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory quantizing '%s'", full);
    }
    frt_fp8w_quantize_rows(q, s, x, d0, d1);
    frt_fp8_dequantize_rows(x, q, s, (int)d0, (int)d0, (int)d1);
    free(q);
    free(s);
    return 0;
}

int frt_fp8w_linear_to_f32(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1,
                           float *out)
{
    if (t->dtype == FRT_DT_F8_E4M3) return dequant_checkpoint(m, t, full, d0, d1, out);
    FRT_TRY(frt_tensor_to_f32(t, out));
    if (m->params.weight_dtype == FRT_WEIGHT_FP8) FRT_TRY(frt_fp8w_round_trip(out, d0, d1, full));
    return 0;
}

int frt_fp8w_blocked(const frt_model *m) { return m->cfg.quant.method == FRT_QUANT_FP8_BLOCK; }

size_t frt_fp8w_n_scales(const frt_model *m, int64_t d0, int64_t d1)
{
    if (!frt_fp8w_blocked(m)) return (size_t)d0;
    return (size_t)((d0 + 127) / 128) * (size_t)((d1 + 127) / 128);
}

int frt_fp8w_act_per_token(const frt_model *m) { return !frt_fp8w_blocked(m); }

int frt_fp8w_linear_supported(const frt_model *m, const frt_tensor *t, const char *full)
{
    const frt_quant_config *q = &m->cfg.quant;
    if (frt_fp8w_blocked(m) && t->dtype != FRT_DT_F8_E4M3)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "checkpoint: '%s' is a float Linear weight of a block-wise FP8 checkpoint: the cuda backend "
                         "holds every Linear weight of it with 128x128 block scales, and quantizes at load per "
                         "channel only (docs/fp8.md)",
                         full);
    if (t->dtype != FRT_DT_F8_E4M3 && m->params.weight_dtype != FRT_WEIGHT_FP8)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "checkpoint: '%s' is a float Linear weight of an FP8 checkpoint: the cuda backend holds "
                         "every Linear weight in FP8 (load with weight_dtype FRT_WEIGHT_FP8, --dtype fp8)",
                         full);
    if (frt_fp8w_blocked(m) && (q->block_out != 128 || q->block_in != 128))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "checkpoint: '%s': weight_block_size [%d, %d]: the cuda backend takes [128, 128] blocks "
                         "only (the cpu backend reads any; docs/fp8.md)",
                         full, q->block_out, q->block_in);
    return 0;
}

/* Float tensor t [d0, d1] (named `full`) as per-row E4M3 codes and scales
 * (frt_fp8w_quantize_rows). Errors: FRT_ERR_OUT_OF_MEMORY,
 * frt_tensor_to_f32's. */
static int quantize_float(const frt_tensor *t, const char *full, int64_t d0, int64_t d1, uint8_t *codes, float *scale)
{
    float *x = malloc((size_t)(d0 * d1) * sizeof(float) + 1);
    if (!x) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory quantizing '%s'", full);
    int rc = frt_tensor_to_f32(t, x);
    if (rc == 0) frt_fp8w_quantize_rows(codes, scale, x, d0, d1);
    free(x);
    return rc;
}

/* Codes q [n] at byte offset woff and scales sc [ns] at soff of wbuf, on
 * m->stream, synchronised before it returns (the caller frees q and sc). */
static int arena_write(frt_model *m, frt_buffer *wbuf, size_t woff, const uint8_t *q, size_t n, size_t soff,
                       const float *sc, size_t ns)
{
    int rc = frt_buffer_write(wbuf, woff, q, n, m->stream);
    if (rc == 0) rc = frt_buffer_write(wbuf, soff, sc, ns * sizeof(float), m->stream);
    if (rc == 0) rc = frt_stream_sync(m->stream); /* the host copies must outlive the transfers */
    return rc;
}

int frt_fp8w_linear_codes(const frt_model *m, const frt_tensor *t, const char *full, int64_t d0, int64_t d1,
                          uint8_t *codes, float *scale)
{
    FRT_TRY(frt_fp8w_linear_supported(m, t, full));
    if (t->dtype != FRT_DT_F8_E4M3) return quantize_float(t, full, d0, d1, codes, scale); /* quantized at load */
    const frt_tensor *st;
    float *s;
    FRT_TRY(find_scale(m, full, d0, d1, &st));
    FRT_TRY(read_scales(st, &s));
    const int per_tensor = m->cfg.quant.method == FRT_QUANT_FP8_TENSOR;
    if (frt_fp8w_blocked(m))
        memcpy(scale, s, frt_fp8w_n_scales(m, d0, d1) * sizeof(float));
    else
        for (int64_t r = 0; r < d0; r++) scale[r] = s[per_tensor ? 0 : r];
    free(s);
    memcpy(codes, t->data, (size_t)(d0 * d1));
    return 0;
}

int frt_fp8w_arena_put(frt_model *m, frt_buffer *wbuf, int pass, const char *full, int64_t d0, int64_t d1,
                       size_t woff, size_t soff)
{
    const frt_tensor *t = frt_checkpoint_find(m->ckpt, full);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", full);
    if (t->ndim != 2 || t->shape[0] != d0 || t->shape[1] != d1)
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has %d dims [%lld, ...], expected [%lld, %lld]",
                         full, t->ndim, (long long)t->shape[0], (long long)d0, (long long)d1);
    if (pass == 0) {
        FRT_TRY(frt_fp8w_linear_check(m, t, full, d0, d1));
        return frt_fp8w_linear_supported(m, t, full);
    }
    size_t n = (size_t)(d0 * d1), ns = frt_fp8w_n_scales(m, d0, d1);
    uint8_t *q = malloc(n + 1);
    float *sc = malloc(ns * sizeof(float) + 1);
    int rc = !q || !sc ? frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for '%s'", full)
                       : frt_fp8w_linear_codes(m, t, full, d0, d1, q, sc);
    if (rc == 0) rc = arena_write(m, wbuf, woff, q, n, soff, sc, ns);
    free(q);
    free(sc);
    return rc;
}

int frt_fp8w_lm_head_put(frt_model *m, frt_buffer *wbuf, int pass, const frt_tensor *t, const char *full, int64_t d0,
                         int64_t d1, size_t woff, size_t soff)
{
    FRT_TRY(frt_fp8w_check_dtype(t, full));
    if (pass == 0) return 0;
    const size_t n = (size_t)(d0 * d1);
    float *sc = malloc((size_t)d0 * sizeof(float) + 1);
    uint8_t *q = malloc(n + 1);
    int rc = !sc || !q ? frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory quantizing '%s'", full)
                       : quantize_float(t, full, d0, d1, q, sc);
    if (rc == 0) rc = arena_write(m, wbuf, woff, q, n, soff, sc, (size_t)d0);
    free(q);
    free(sc);
    return rc;
}

/* The activation rule of FP8 weights (frt_fp8w_activations), part of every
 * FP8 weights description; ACT_B: a block-wise checkpoint's (no
 * quantization: frt_fp8w_act_per_token). */
#define ACT ",act=f8_e4m3-per-token-amax448-prefill"
#define ACT_B ",act=unquantized"

const char *frt_fp8w_desc(const frt_model *m)
{
    static const char *const desc[2][4] = {
        {NULL, "weights=f8_e4m3,scale=checkpoint-per-tensor" ACT, "weights=f8_e4m3,scale=checkpoint-per-channel" ACT,
         "weights=f8_e4m3,scale=checkpoint-block" ACT_B},
        {"weights=f8_e4m3,scale=per-channel-amax448-at-load" ACT,
         "weights=f8_e4m3,scale=checkpoint-per-tensor+per-channel-amax448-at-load" ACT,
         "weights=f8_e4m3,scale=checkpoint-per-channel+per-channel-amax448-at-load" ACT,
         "weights=f8_e4m3,scale=checkpoint-block+per-channel-amax448-at-load" ACT_B},
    };
    int at_load = m->params.weight_dtype == FRT_WEIGHT_FP8;
    int method = (int)m->cfg.quant.method;
    return method >= 0 && method < 4 ? desc[at_load][method] : NULL;
}

int frt_fp8w_is_fp8(const frt_model *m, const frt_tensor *t)
{
    return t->dtype == FRT_DT_F8_E4M3 || m->params.weight_dtype == FRT_WEIGHT_FP8;
}

void frt_fp8w_activations(float *out, uint8_t *codes, float *scale, const float *x, int n, int dim)
{
    frt_fp8_quantize_rows_dynamic(codes, scale, x, n, dim);
    frt_fp8_dequantize_rows(out, codes, scale, n, n, dim);
}
