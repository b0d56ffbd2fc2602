/*
 * test_serving_limits.c - the per-request limits of the service (issue 22)
 * over the fake engine: max_tokens beyond the context (FRT_ERR_OUT_OF_RANGE,
 * error_param "max_tokens") unless it was a default (clamped), the server's
 * cap on tokens per request, and the wall-time limit, during decode and
 * during a long prefill (finish "length", time_limited, counted).
 */
#include "frt_test.h"

#include "serving/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static frt_engine *make_engine(int delay_us)
{
    frt_engine_fake_params p = frt_engine_fake_default_params();
    p.prefill_chunk = 64;
    p.max_seq = 2048;
    p.delay_us = delay_us;
    frt_engine *e = NULL;
    if (frt_engine_fake_create(&p, &e)) {
        fprintf(stderr, "fake engine: %s\n", frt_last_error());
        exit(1);
    }
    return e;
}

static frt_service *make_service(frt_engine *e, int cap, double max_s)
{
    frt_service_params p = frt_service_default_params();
    p.max_tokens_cap = cap;
    p.max_request_s = max_s;
    frt_service *s = NULL;
    if (frt_service_create(e, &p, &s)) {
        fprintf(stderr, "service: %s\n", frt_last_error());
        exit(1);
    }
    return s;
}

/* n printable bytes without 't' or 'h' (one fake token per byte). */
static char *text_of(int n)
{
    char *t = malloc((size_t)n + 1);
    for (int i = 0; i < n; i++) t[i] = (char)('a' + i % 7);
    t[n] = 0;
    return t;
}

static void test_context_and_cap(void)
{
    frt_engine *e = make_engine(0);
    frt_service *s = make_service(e, 40, 0);
    frt_gen_request rq;
    frt_gen_result res;
    memset(&rq, 0, sizeof rq);
    char *t = text_of(2040);
    rq.text = t;
    rq.text_len = 2040;
    rq.ignore_eos = 1;
    rq.max_tokens = 10; /* 2040 + 10 > 2048 + 1 */
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_OUT_OF_RANGE);
    CHECK(res.error_param && !strcmp(res.error_param, "max_tokens"));
    CHECK(strstr(frt_last_error(), "maximum context length is 2049 tokens") != NULL);
    rq.max_tokens = 9; /* just fits: the last token stays pending */
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(res.completion_tokens == 9 && !strcmp(res.finish_reason, "length") && !res.time_limited);
    frt_gen_result_clear(&res);
    rq.max_tokens = 10;
    rq.clamp_max_tokens = 1; /* a default: clamped to the context */
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(res.completion_tokens == 9);
    frt_gen_result_clear(&res);
    /* the cap */
    rq.text = "abc";
    rq.text_len = 3;
    rq.clamp_max_tokens = 0;
    rq.max_tokens = 41;
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_INVALID_ARGUMENT);
    CHECK(res.error_param && !strcmp(res.error_param, "max_tokens"));
    rq.max_tokens = 40;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(res.completion_tokens == 40);
    frt_gen_result_clear(&res);
    rq.max_tokens = 1000;
    rq.clamp_max_tokens = 1; /* a default above the cap is clamped to it */
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(res.completion_tokens == 40);
    frt_gen_result_clear(&res);
    /* bad parameters */
    frt_service_params bp = frt_service_default_params();
    bp.max_tokens_cap = -1;
    frt_service *bad = NULL;
    CHECK_STATUS(frt_service_create(e, &bp, &bad), FRT_ERR_INVALID_ARGUMENT);
    bp.max_tokens_cap = 0;
    bp.max_request_s = -1;
    CHECK_STATUS(frt_service_create(e, &bp, &bad), FRT_ERR_INVALID_ARGUMENT);
    free(t);
    frt_service_free(s);
    frt_engine_free(e);
}

static void test_wall_time(void)
{
    frt_engine *e = make_engine(5000); /* 5 ms per decode step and per prefill chunk */
    frt_service *s = make_service(e, 0, 0.1);
    frt_gen_request rq;
    frt_gen_result res;
    memset(&rq, 0, sizeof rq);
    /* decode past the limit */
    rq.text = "abc";
    rq.text_len = 3;
    rq.ignore_eos = 1;
    rq.max_tokens = 1000;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(!strcmp(res.finish_reason, "length") && res.time_limited);
    CHECK(res.completion_tokens >= 1 && res.completion_tokens < 1000);
    frt_gen_result_clear(&res);
    /* a prefill of 32 chunks (160 ms) past the limit: no token, "length" */
    char *t = text_of(2040);
    rq.text = t;
    rq.text_len = 2040;
    rq.max_tokens = 5;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(!strcmp(res.finish_reason, "length") && res.time_limited && res.completion_tokens == 0);
    CHECK(res.prefill_tokens < 2040);
    frt_gen_result_clear(&res);
    frt_service_metrics m;
    frt_service_metrics_get(s, &m);
    CHECK(m.time_limited == 2 && m.cancelled == 0);
    free(t);
    frt_service_free(s);
    frt_engine_free(e);
}

int main(void)
{
    test_context_and_cap();
    test_wall_time();
    return frt_test_report();
}
