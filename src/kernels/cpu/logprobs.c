/*
 * logprobs.c - the logprobs a sampling step reports (frt/sampling.h): the
 * log-softmax of the (adjusted) logits at temperature 1, fp64, the sampled
 * token's and the top_n largest in the order (logit desc, id asc). Tested in
 * tests/test_kernel_sample.c.
 */
#include "kernels/cpu/kernels_cpu.h"
#include "util/error.h"

#include <math.h>
#include <string.h>

static float lp_key(float l) { return isnan(l) ? -INFINITY : l; }

/* Inserts index i into the sorted top list (key desc, index asc) of at most cap. */
static void top_insert(int32_t *top, int *len, int cap, const float *l, int i)
{
    int at = *len;
    while (at > 0 && lp_key(l[i]) > lp_key(l[top[at - 1]])) at--; /* equal keys: the lower index stays first */
    if (at >= cap) return;
    int end = *len < cap ? *len : cap - 1;
    memmove(top + at + 1, top + at, (size_t)(end - at) * sizeof *top);
    top[at] = i;
    if (*len < cap) (*len)++;
}

int frt_cpu_logprobs(frt_logprobs *out, const float *logits, int n, int token, int top_n)
{
    if (!out || !logits || n < 1)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "logprobs: n %d or NULL pointer", n);
    if (token < 0 || token >= n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "logprobs: token %d outside [0, %d)", token, n);
    if (top_n < 0 || top_n > FRT_SAMPLING_MAX_TOP_LOGPROBS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "logprobs: top_n %d not in [0, %d]", top_n,
                         FRT_SAMPLING_MAX_TOP_LOGPROBS);
    memset(out, 0, sizeof *out);
    double lmax = -INFINITY;
    for (int i = 0; i < n; i++)
        if (lp_key(logits[i]) > lmax) lmax = lp_key(logits[i]);
    double lse = NAN;
    if (isfinite(lmax)) {
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += exp((double)lp_key(logits[i]) - lmax);
        lse = lmax + log(sum);
    }
    out->token = token;
    out->logprob = (float)((double)lp_key(logits[token]) - lse);
    int len = 0;
    for (int i = 0; i < n && top_n > 0; i++) top_insert(out->top_token, &len, top_n, logits, i);
    out->n_top = len;
    for (int k = 0; k < len; k++) out->top_logprob[k] = (float)((double)lp_key(logits[out->top_token[k]]) - lse);
    return 0;
}
