/*
 * logits_adjust.c - steps 1-3 of the sampling step (frt/sampling.h): logit
 * bias, then the repetition penalty (vLLM / CTRL), then the frequency and
 * presence penalties (OpenAI), from the state's per-token counts; and step
 * 3b, the allowed-token mask (frt_cpu_logits_mask). The
 * per-token arithmetic is kernels/cpu/sample_rule.h, shared with the CUDA
 * kernel. Tested in tests/test_kernel_sample.c.
 */
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/sample_rule.h"
#include "util/error.h"

int frt_cpu_logits_adjust(float *out, const float *logits, int n, const frt_sampling *s, const int32_t *counts,
                          const uint8_t *seen)
{
    if (!out || !logits || !s || !counts || !seen || n < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "logits adjust: n %d or NULL pointer", n);
    if (s->n_logit_bias < 0 || s->n_logit_bias > FRT_SAMPLING_MAX_BIAS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "logits adjust: %d bias entries", s->n_logit_bias);
    for (int j = 0; j < s->n_logit_bias; j++)
        if (s->logit_bias[j].token < 0 || s->logit_bias[j].token >= n)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "logits adjust: bias token %d outside [0, %d)",
                             s->logit_bias[j].token, n);
    for (int i = 0; i < n; i++) out[i] = frt_sample_penalize(logits[i], counts[i], seen[i], s);
    /* The biased tokens again, from the raw logit: bias first, then the penalties. */
    for (int j = 0; j < s->n_logit_bias; j++) {
        const int t = s->logit_bias[j].token;
        out[t] = frt_sample_bias_penalize(logits[t], s->logit_bias[j].bias, counts[t], seen[t], s);
    }
    return 0;
}

int frt_cpu_logits_mask(float *l, int n, const uint32_t *mask)
{
    if (!l || !mask || n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "logits mask: n %d or NULL pointer", n);
    for (int i = 0; i < n; i++) l[i] = frt_sample_mask(l[i], mask, i);
    return 0;
}
