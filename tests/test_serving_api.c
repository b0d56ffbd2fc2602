/*
 * test_serving_api.c - request bodies through the parsers of serving/api.c
 * (frt_api_parse_completion, frt_api_parse_session_op), for the members a
 * parser could otherwise drop without a word: a member given twice, an
 * empty stop string, stream_options without stream, and a rollback naming
 * its checkpoint twice ("name" and "checkpoint"), a member of a session
 * create, fork or checkpoint body that those do not take, and any member in
 * the body of an endpoint that takes none (frt_api_parse_no_body: GET,
 * DELETE, capsule pin / unpin). Each refusal is a 400
 * naming the member, and a refused request comes back cleared.
 * tests/sh/serve_openai_fields.sh and serve_hardening.sh check the same
 * over HTTP.
 */
#include "frt_test.h"

#include "serving/api.h"

/* Parses body as a completion (chat or not); a refusal must be 400 with
 * code and param, and leave the request cleared. Returns the parser's rc. */
static int completion(const char *body, int chat, const char *code, const char *param, frt_api_completion *c)
{
    frt_api_error err;
    memset(&err, 0, sizeof err);
    int rc = frt_api_parse_completion(body, strlen(body), chat, 16, c, &err);
    if (!code) {
        CHECK_MSG(rc == 0, "%s: refused: %s", body, err.message);
        return rc;
    }
    CHECK_MSG(rc == -1 && err.status == 400 && err.code && !strcmp(err.code, code) && !strcmp(err.param, param),
              "%s: rc %d status %d code %s param '%s' (%s), want 400 %s '%s'", body, rc, err.status,
              err.code ? err.code : "(null)", err.param, err.message, code, param);
    CHECK_MSG(!c->stop && !c->n_stop && !c->prompt_text && !c->messages, "%s: a refused request is not cleared", body);
    return rc;
}

static void test_duplicate_members(void)
{
    frt_api_completion c;
    frt_api_error err;
    completion("{\"prompt\":\"hi\",\"max_tokens\":2,\"max_tokens\":3}", 0, "invalid_json", "", &c);
    memset(&err, 0, sizeof err);
    const char *twice = "{\"prompt\":\"a\",\"prompt\":\"b\"}";
    CHECK(frt_api_parse_completion(twice, strlen(twice), 0, 16, &c, &err) == -1);
    CHECK_MSG(strstr(err.message, "duplicate"), "the message says what is wrong: %s", err.message);
    /* inside a nested object too */
    completion("{\"messages\":[{\"role\":\"user\",\"role\":\"system\",\"content\":\"x\"}]}", 1, "invalid_json", "", &c);
    completion("{\"prompt\":\"hi\",\"stream\":true,\"stream_options\":{\"include_usage\":true,\"include_usage\":false}}",
               0, "invalid_json", "", &c);
    /* the same key in two different objects is not a duplicate */
    CHECK(completion("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}", 1,
                     NULL, NULL, &c) == 0);
    frt_api_completion_clear(&c);

    frt_api_session_op op;
    memset(&err, 0, sizeof err);
    const char *b = "{\"name\":\"a\",\"name\":\"b\"}";
    CHECK(frt_api_parse_session_op(b, strlen(b), FRT_API_ROLLBACK, &op, &err) == -1 && err.status == 400 &&
          !strcmp(err.code, "invalid_json"));
    frt_api_session_create sc;
    memset(&err, 0, sizeof err);
    b = "{\"id\":\"a\",\"id\":\"b\"}";
    CHECK(frt_api_parse_session_create(b, strlen(b), &sc, &err) == -1 && err.status == 400 &&
          !strcmp(err.code, "invalid_json") && !sc.has_id);
}

static void test_stop(void)
{
    frt_api_completion c;
    completion("{\"prompt\":\"hi\",\"stop\":\"\"}", 0, "invalid_value", "stop", &c);
    completion("{\"prompt\":\"hi\",\"stop\":[\"\"]}", 0, "invalid_value", "stop[0]", &c);
    completion("{\"prompt\":\"hi\",\"stop\":[\"x\",\"\"]}", 0, "invalid_value", "stop[1]", &c);
    completion("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":[\"a\",\"b\",\"\"]}", 1, "invalid_value",
               "stop[2]", &c);
    if (!completion("{\"prompt\":\"hi\",\"stop\":[\"x\",\" \"]}", 0, NULL, NULL, &c))
        CHECK(c.n_stop == 2 && !strcmp(c.stop[0], "x") && !strcmp(c.stop[1], " "));
    frt_api_completion_clear(&c);
    if (!completion("{\"prompt\":\"hi\",\"stop\":[]}", 0, NULL, NULL, &c)) CHECK(c.n_stop == 0);
    frt_api_completion_clear(&c);
}

static void test_stream_options(void)
{
    frt_api_completion c;
    frt_api_error err;
    const char *b = "{\"prompt\":\"hi\",\"stream_options\":{\"include_usage\":true}}";
    memset(&err, 0, sizeof err);
    CHECK(frt_api_parse_completion(b, strlen(b), 0, 16, &c, &err) == -1);
    CHECK_MSG(!strcmp(err.message, "'stream_options' is only allowed when 'stream' is true"), "message: %s",
              err.message);
    completion(b, 0, "invalid_value", "stream_options", &c);
    completion("{\"prompt\":\"hi\",\"stream\":false,\"stream_options\":{\"include_usage\":true}}", 0, "invalid_value",
               "stream_options", &c);
    completion("{\"prompt\":\"hi\",\"stream\":null,\"stream_options\":{}}", 0, "invalid_value", "stream_options", &c);
    completion("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream_options\":{\"include_usage\":false}}", 1,
               "invalid_value", "stream_options", &c);
    /* with stream: the members are read and checked */
    if (!completion("{\"prompt\":\"hi\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}", 0, NULL, NULL, &c))
        CHECK(c.stream && c.include_usage);
    frt_api_completion_clear(&c);
    completion("{\"prompt\":\"hi\",\"stream\":true,\"stream_options\":{\"include_obfuscation\":true}}", 0,
               "unsupported_value", "stream_options.include_obfuscation", &c);
    completion("{\"prompt\":\"hi\",\"stream\":true,\"stream_options\":{\"x\":1}}", 0, "unsupported_parameter", "x", &c);
    /* null is absent, with or without stream */
    if (!completion("{\"prompt\":\"hi\",\"stream_options\":null}", 0, NULL, NULL, &c))
        CHECK(!c.stream && !c.include_usage);
    frt_api_completion_clear(&c);
}

/* A session operation: rc, and on a refusal the 400's code and param. */
static void session_op(const char *body, frt_api_session_verb verb, const char *code, const char *param,
                       const char *want_name)
{
    frt_api_session_op op;
    frt_api_error err;
    memset(&err, 0, sizeof err);
    int rc = frt_api_parse_session_op(body, strlen(body), verb, &op, &err);
    if (!code) {
        CHECK_MSG(rc == 0 && !strcmp(op.name, want_name), "%s: rc %d name '%s' (%s), want '%s'", body, rc, op.name,
                  err.message, want_name);
        return;
    }
    CHECK_MSG(rc == -1 && err.status == 400 && err.code && !strcmp(err.code, code) && !strcmp(err.param, param),
              "%s: rc %d status %d code %s param '%s' (%s), want 400 %s '%s'", body, rc, err.status,
              err.code ? err.code : "(null)", err.param, err.message, code, param);
}

static void test_rollback(void)
{
    session_op("{\"name\":\"a\"}", FRT_API_ROLLBACK, NULL, NULL, "a");
    session_op("{\"checkpoint\":\"b\"}", FRT_API_ROLLBACK, NULL, NULL, "b");
    session_op("{\"name\":\"a\",\"checkpoint\":\"b\"}", FRT_API_ROLLBACK, "invalid_value", "checkpoint", NULL);
    session_op("{\"name\":\"a\",\"checkpoint\":\"a\"}", FRT_API_ROLLBACK, "invalid_value", "checkpoint", NULL);
    session_op("{\"name\":null,\"checkpoint\":\"b\"}", FRT_API_ROLLBACK, NULL, NULL, "b");
    session_op("{\"checkpoint\":\"bad id\"}", FRT_API_ROLLBACK, "invalid_value", "checkpoint", NULL);
    session_op("{\"checkpoint\":5}", FRT_API_ROLLBACK, "invalid_type", "checkpoint", NULL);
    session_op("{}", FRT_API_ROLLBACK, "missing_required_parameter", "name", NULL);
    /* the message names both keys */
    frt_api_session_op op;
    frt_api_error err;
    memset(&err, 0, sizeof err);
    const char *b = "{\"name\":\"a\",\"checkpoint\":\"b\"}";
    CHECK(frt_api_parse_session_op(b, strlen(b), FRT_API_ROLLBACK, &op, &err) == -1);
    CHECK_MSG(strstr(err.message, "'name'") && strstr(err.message, "'checkpoint'"), "message: %s", err.message);
    /* a checkpoint is created by "name" only */
    session_op("{\"name\":\"c\"}", FRT_API_CHECKPOINT, NULL, NULL, "c");
    session_op("{\"checkpoint\":\"c\"}", FRT_API_CHECKPOINT, "unsupported_parameter", "checkpoint", NULL);
}

/* The session create and the other session operations: unknown members refused, known ones kept. */
static void test_session_members(void)
{
    frt_api_session_create sc;
    frt_api_error err;
    const char *b = "{\"id\":\"a\",\"salt\":\"t\",\"pin\":true}";
    CHECK(frt_api_parse_session_create(b, strlen(b), &sc, &err) == 0 && sc.has_id && !strcmp(sc.id, "a") &&
          sc.salt_len == 1 && sc.pin);
    frt_api_session_create_clear(&sc);
    b = "{\"id\":\"a\",\"ttl\":60}";
    CHECK(frt_api_parse_session_create(b, strlen(b), &sc, &err) == -1 && err.status == 400 &&
          !strcmp(err.code, "unsupported_parameter") && !strcmp(err.param, "ttl") && !sc.has_id && !sc.salt);
    b = "{\"pin\":\"yes\"}";
    CHECK(frt_api_parse_session_create(b, strlen(b), &sc, &err) == -1 && !strcmp(err.code, "invalid_type") &&
          !strcmp(err.param, "pin"));
    frt_api_session_op op;
    b = "{\"n\":2,\"name\":\"x\"}";
    CHECK(frt_api_parse_session_op(b, strlen(b), FRT_API_FORK, &op, &err) == -1 &&
          !strcmp(err.code, "unsupported_parameter") && !strcmp(err.param, "name"));
    b = "{\"n\":65}";
    CHECK(frt_api_parse_session_op(b, strlen(b), FRT_API_FORK, &op, &err) == -1 && !strcmp(err.code, "invalid_value"));
    b = "{\"n\":3}";
    CHECK(frt_api_parse_session_op(b, strlen(b), FRT_API_FORK, &op, &err) == 0 && op.n == 3);
    session_op("{\"name\":\"c\",\"n\":2}", FRT_API_CHECKPOINT, "unsupported_parameter", "n", NULL);
    session_op("{\"name\":\"c\",\"pin\":false}", FRT_API_ROLLBACK, "unsupported_parameter", "pin", NULL);
}

/* Bodies of the endpoints that take none. */
static void no_body(const char *body, const char *code, const char *param)
{
    frt_api_error err;
    memset(&err, 0, sizeof err);
    int rc = frt_api_parse_no_body(body, strlen(body), "the body of POST /v1/capsules/cap-1/pin (it takes none)", &err);
    if (!code) {
        CHECK_MSG(rc == 0, "'%s': refused: %s", body, err.message);
        return;
    }
    CHECK_MSG(rc == -1 && err.status == 400 && err.code && !strcmp(err.code, code) && !strcmp(err.param, param),
              "'%s': rc %d status %d code %s param '%s', want 400 %s '%s'", body, rc, err.status,
              err.code ? err.code : "(null)", err.param, code, param);
}

static void test_no_body(void)
{
    no_body("", NULL, NULL);
    no_body(" \n", NULL, NULL);
    no_body("{}", NULL, NULL);
    no_body("{\"pin\":false}", "unsupported_parameter", "pin");
    no_body("{\"ttl\":null}", "unsupported_parameter", "ttl");
    no_body("[]", "invalid_type", "");
    no_body("{", "invalid_json", "");
}

int main(void)
{
    test_duplicate_members();
    test_stop();
    test_stream_options();
    test_rollback();
    test_session_members();
    test_no_body();
    return frt_test_report();
}
