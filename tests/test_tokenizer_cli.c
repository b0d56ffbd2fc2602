/* test_tokenizer_cli.c - `frt tokenize` and `frt detokenize` on a fixture
 * checkpoint directory: the printed ids and text, the options, and the
 * errors for a missing directory or file. Skipped (77) when the frt binary
 * is not built. */
#include "frt_test.h"
#include "test_tokenizer_fixture.h"

#include <sys/wait.h>
#include <unistd.h>

static char frt_bin[512];

/* Runs CMD through the shell; *out gets stdout (malloc'd). Returns the exit status. */
static int run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect(const char *cmd, int status, const char *want_stdout)
{
    char full[2100];
    snprintf(full, sizeof full, "%s 2>/dev/null", cmd);
    char *out = NULL;
    int rc = run(full, &out);
    CHECK_MSG(rc == status && (!want_stdout || (out && !strcmp(out, want_stdout))), "`%s`: exit %d, stdout \"%s\"",
              cmd, rc, out ? out : "");
    free(out);
}

static void expect_stderr(const char *cmd, int status, const char *piece)
{
    char full[2100];
    snprintf(full, sizeof full, "%s 2>&1 >/dev/null", cmd);
    char *out = NULL;
    int rc = run(full, &out);
    CHECK_MSG(rc == status && out && strstr(out, piece), "`%s`: exit %d, stderr \"%s\"", cmd, rc, out ? out : "");
    free(out);
}

int main(void)
{
    snprintf(frt_bin, sizeof frt_bin, "%s/frt", FRT_BINARY_DIR);
    if (access(frt_bin, X_OK) != 0) TEST_SKIP("frt binary not built");
    char dir[] = "/tmp/frt_tokcli_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static const char *const merges[] = {"h i", NULL};
    tokfx f = {.merges = merges, .added_tokens = TOKFX_SPECIALS, .pre_tokenizer = TOKFX_QWEN35_PRE,
               .normalizer = "{\"type\":\"NFC\"}"};
    char *json = tokfx_json(&f);
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *fp = fopen(path, "w");
    fputs(json, fp);
    fclose(fp);
    free(json);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    fp = fopen(path, "w");
    fputs("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
          fp);
    fclose(fp);

    /* ids: "hi" merges (256), the specials follow (257..259) */
    snprintf(cmd, sizeof cmd, "%s tokenize %s 'hi x'", frt_bin, dir);
    expect(cmd, 0, "256 32 120\n");
    snprintf(cmd, sizeof cmd, "%s tokenize %s '<|im_end|>hi'", frt_bin, dir);
    expect(cmd, 0, "259 256\n");
    snprintf(cmd, sizeof cmd, "%s tokenize %s ''", frt_bin, dir);
    expect(cmd, 0, "\n");
    snprintf(cmd, sizeof cmd, "%s tokenize --chat %s hi", frt_bin, dir);
    expect(cmd, 0, "258 117 115 101 114 10 256 259 10 258 97 115 115 105 115 116 97 110 116 10\n");
    snprintf(cmd, sizeof cmd, "printf 'hi' > %s/in.txt && %s tokenize %s --file %s/in.txt", dir, frt_bin, dir, dir);
    expect(cmd, 0, "256\n");
    snprintf(cmd, sizeof cmd, "%s detokenize %s 256 32 259 230 151 165", frt_bin, dir);
    expect(cmd, 0, "hi <|im_end|>\xe6\x97\xa5\n");
    snprintf(cmd, sizeof cmd, "%s detokenize -n %s 256", frt_bin, dir);
    expect(cmd, 0, "hi");
    snprintf(cmd, sizeof cmd, "%s tokenize %s --bench %s/in.txt --seconds 0", frt_bin, dir, dir);
    char *out = NULL;
    char full[2100];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    CHECK(run(full, &out) == 0 && out && strstr(out, "MB/s") && strstr(out, "target: >= 20 MB/s") &&
          strstr(out, "load: ") && strstr(out, "target < 1 s"));
    free(out);

    /* errors */
    snprintf(cmd, sizeof cmd, "%s tokenize /nonexistent/frt x", frt_bin);
    expect_stderr(cmd, 1, "no such directory");
    snprintf(cmd, sizeof cmd, "%s tokenize /tmp x", frt_bin);
    expect_stderr(cmd, 1, "tokenizer.json: no such file");
    snprintf(cmd, sizeof cmd, "%s detokenize %s 999", frt_bin, dir);
    expect_stderr(cmd, 1, "FRT_ERR_OUT_OF_RANGE");
    snprintf(cmd, sizeof cmd, "%s detokenize %s 12abc", frt_bin, dir);
    expect_stderr(cmd, 2, "not a token id");
    snprintf(cmd, sizeof cmd, "%s tokenize %s", frt_bin, dir);
    expect_stderr(cmd, 2, "usage");
    snprintf(cmd, sizeof cmd, "%s tokenize %s --file %s/missing.txt", frt_bin, dir, dir);
    expect_stderr(cmd, 1, "cannot open");
    snprintf(cmd, sizeof cmd, "%s tokenize %s \"$(printf '\\377')\"", frt_bin, dir);
    expect_stderr(cmd, 1, "not valid UTF-8");

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return frt_test_report();
}
