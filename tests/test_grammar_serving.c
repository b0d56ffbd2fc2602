/*
 * test_grammar_serving.c - constrained decoding through the service's
 * decode loop (serving/service_grammar.c) on the demo model (models/frt-demo,
 * cpu backend; its own 4096-id tokenizer): every schema of
 * tests/data/grammar/schemas.json x 3 seeds x temperatures 0, 0.8 and 1.5,
 * and the tool-call grammar. A generation that stops (an end id under a
 * complete state) parses and validates (frt_json_schema_validate), a tool
 * call parses through serving/chat_output.c with valid arguments; one cut by
 * max_tokens is still a prefix the grammar takes. After a constrained
 * request masking is off again: an unconstrained request gives the tokens a
 * fresh service gives. The fake engine refuses a grammar (error_param names
 * the field). frt_engine_model_open_params refuses a NULL argument and load
 * parameters the model refuses. Skips (77) without the demo model.
 *
 * Runs on both backends (FRT_TEST_BACKENDS): argv[1] is "cpu" or "cuda"
 * (the mask applied inside the captured CUDA sampling step; skips without
 * a device).
 */
#include "frt_test.h"

#include "frt/exec.h"
#include "frt/grammar.h"
#include "frt_test_grammar.h"
#include "serving/service.h"

#include <jansson.h>

#define DEMO FRT_SOURCE_DIR "/models/frt-demo"

static frt_service *service_of(frt_engine *e)
{
    frt_service_params p = frt_service_default_params();
    frt_service *s = NULL;
    if (frt_service_create(e, &p, &s)) {
        fprintf(stderr, "service: %s\n", frt_last_error());
        exit(1);
    }
    return s;
}

static int run(frt_service *s, const frt_grammar *g, const char *param, uint64_t seed, float temp, frt_gen_result *res)
{
    frt_gen_request rq;
    memset(&rq, 0, sizeof rq);
    rq.text = "Reply with the JSON value:";
    rq.text_len = strlen(rq.text);
    rq.max_tokens = 160;
    rq.sampling.temperature = temp;
    rq.sampling.top_p = 1;
    rq.has_seed = 1;
    rq.seed = seed;
    rq.grammar = g;
    rq.grammar_param = param;
    return frt_service_generate(s, &rq, res);
}

/* A cut output is a prefix the grammar still takes. */
static int is_prefix(const frt_grammar *g, const char *text, size_t n)
{
    frt_grammar_state *st;
    frt_grammar_state_create(g, &st);
    int ok = frt_grammar_state_accept(st, text, n) == 0;
    frt_grammar_state_free(st);
    return ok;
}

static void test_schemas(frt_service *s)
{
    json_error_t je;
    json_t *schemas = json_load_file(FRT_TEST_DATA "/grammar/schemas.json", 0, &je);
    CHECK(schemas);
    size_t i;
    json_t *sc;
    int runs = 0, stopped = 0;
    static const float temps[] = {0.0f, 0.8f, 1.5f};
    json_array_foreach(schemas, i, sc) {
        char *text = json_dumps(sc, JSON_COMPACT);
        frt_grammar *g = NULL;
        CHECK_OK(frt_grammar_compile_json_schema(text, strlen(text), &g, NULL));
        for (int k = 0; g && k < 9; k++) {
            frt_gen_result res;
            int rc = run(s, g, "response_format", 11 + (uint64_t)k, temps[k % 3], &res);
            CHECK_MSG(rc == 0, "schema %zu run %d: %s", i, k, frt_last_error());
            if (rc) continue;
            runs++;
            if (!strcmp(res.finish_reason, "stop")) {
                char why[200];
                stopped++;
                CHECK_MSG(!frt_json_schema_validate(text, strlen(text), res.text, res.text_len, why, sizeof why),
                          "schema %zu run %d: '%s': %s", i, k, res.text, why);
            } else {
                CHECK_MSG(is_prefix(g, res.text, res.text_len), "schema %zu run %d: cut output '%s' left the grammar",
                          i, k, res.text);
            }
            frt_gen_result_clear(&res);
        }
        frt_grammar_free(g);
        free(text);
    }
    json_decref(schemas);
    printf("schemas: %d of %d constrained generations ended by themselves, each valid\n", stopped, runs);
    CHECK(stopped * 10 >= runs * 8);
}

static void test_tool_calls(frt_service *s)
{
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12}},\"required\":[\"city\"],"
        "\"additionalProperties\":false}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"]}},"
        "\"required\":[\"zone\"],\"additionalProperties\":false}}}]";
    static const char weather[] = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12}},"
                                  "\"required\":[\"city\"],\"additionalProperties\":false}";
    static const char time_[] = "{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"]}},"
                                "\"required\":[\"zone\"],\"additionalProperties\":false}";
    int ok = 0;
    for (int named = 0; named < 2; named++) {
        frt_grammar *g = NULL;
        CHECK_OK(frt_grammar_compile_tool_calls(tools, strlen(tools), named ? "get_time" : NULL, 0, &g, NULL));
        for (int k = 0; g && k < 6; k++) {
            frt_gen_result res;
            if (run(s, g, "tool_choice", 40 + (uint64_t)k, k % 2 ? 1.0f : 0.0f, &res)) {
                CHECK_MSG(0, "tool call run: %s", frt_last_error());
                continue;
            }
            tg_calls c;
            tg_parse_calls(res.text, res.text_len, &c);
            CHECK_MSG(!strcmp(res.finish_reason, "stop") && c.n == 1 && !c.content, "'%s': %s, %d calls", res.text,
                      res.finish_reason, c.n);
            const char *params = !strcmp(c.name, "get_weather") ? weather : !strcmp(c.name, "get_time") ? time_ : NULL;
            CHECK_MSG(params && (!named || !strcmp(c.name, "get_time")), "'%s': name '%s'", res.text, c.name);
            if (params && c.args) {
                char why[200];
                int v = frt_json_schema_validate(params, strlen(params), c.args, strlen(c.args), why, sizeof why);
                CHECK_MSG(!v, "'%s': %s", c.args, why);
                ok += !v;
            }
            free(c.args);
            frt_gen_result_clear(&res);
        }
        frt_grammar_free(g);
    }
    printf("tool calls: %d of 12 constrained generations are one valid call\n", ok);
}

/* After a constrained request the mask is off: the same unconstrained
 * request gives the tokens it gives on a fresh service. */
static void test_mask_off(frt_engine *e, frt_service *s)
{
    frt_gen_result a, b;
    frt_grammar *g = NULL;
    CHECK_OK(frt_grammar_compile_json_schema("{\"type\":\"integer\"}", 18, &g, NULL));
    CHECK_OK(run(s, g, "response_format", 3, 1.0f, &a));
    frt_gen_result_clear(&a);
    CHECK_OK(run(s, NULL, NULL, 5, 1.0f, &a));
    frt_service_free(s);
    frt_service *fresh = service_of(e);
    CHECK_OK(run(fresh, NULL, NULL, 5, 1.0f, &b));
    CHECK_MSG(a.n_tokens == b.n_tokens && a.n_tokens > 0 && !memcmp(a.tokens, b.tokens, (size_t)a.n_tokens * 4),
              "unconstrained tokens after a constrained request differ (%d vs %d)", a.n_tokens, b.n_tokens);
    printf("mask off after the request: %d unconstrained tokens equal to a fresh service's\n", a.n_tokens);
    frt_gen_result_clear(&a);
    frt_gen_result_clear(&b);
    frt_service_free(fresh);
    frt_grammar_free(g);
}

static void test_fake_refuses(void)
{
    frt_engine_fake_params p = frt_engine_fake_default_params();
    frt_engine *e = NULL;
    CHECK_OK(frt_engine_fake_create(&p, &e));
    if (!e) return;
    frt_service *s = service_of(e);
    frt_grammar *g = NULL;
    CHECK_OK(frt_grammar_compile_json_schema(NULL, 0, &g, NULL));
    frt_gen_result res;
    CHECK_STATUS(run(s, g, "response_format", 1, 0, &res), FRT_ERR_UNSUPPORTED);
    CHECK(res.error_param && !strcmp(res.error_param, "response_format"));
    frt_grammar_free(g);
    frt_service_free(s);
    e->destroy(e->self);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "cpu";
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "usage: test_grammar_serving [cpu|cuda]\n");
        return 2;
    }
    if (!strcmp(backend, "cuda")) {
        int n = 0;
        frt_device_count(FRT_BACKEND_CUDA, &n);
        if (n == 0) TEST_SKIP("no CUDA device");
    }
    test_fake_refuses();
    FILE *f = fopen(DEMO "/config.json", "r");
    if (!f) TEST_SKIP("the demo model is not in models/frt-demo");
    fclose(f);
    { /* frt_engine_model_open_params: a NULL argument, and load parameters the model refuses */
        frt_engine *bad = NULL;
        CHECK_STATUS(frt_engine_model_open_params(NULL, NULL, &bad), FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_engine_model_open_params(DEMO, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
        frt_model_params p = frt_model_default_params();
        p.gemm_tune_file = "/nonexistent/tune.txt"; /* without gemm_autotune */
        CHECK_STATUS(frt_engine_model_open_params(DEMO, &p, &bad), FRT_ERR_INVALID_ARGUMENT);
        CHECK(bad == NULL);
    }
    frt_engine *e = NULL;
    CHECK_OK(frt_engine_model_open(DEMO, backend, 1024, 64, 2, 1, &e));
    if (!e) return frt_test_report();
    frt_service *s = service_of(e);
    test_schemas(s);
    test_tool_calls(s);
    test_mask_off(e, s);
    e->destroy(e->self);
    return frt_test_report();
}
