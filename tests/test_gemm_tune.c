/*
 * test_gemm_tune.c - the GEMM autotune file (src/kernels/gemm_tune.h),
 * which frt_cuda_gemm_save / _load write and read, on the CPU:
 *   - random tables (random shapes, dtypes, indexes, algorithm ids, device
 *     names) survive format -> parse and write -> read field for field, and
 *     the text of a parsed table formats to the same bytes;
 *   - comments, blank lines and CRLF line ends are accepted;
 *   - every malformed input is refused with FRT_ERR_FORMAT and a message
 *     naming its line: no magic, another version, a header record missing or
 *     out of order, an unknown record, too few / too many fields, double
 *     spaces, a non-number, out-of-range values, an index not below
 *     candidates, a repeated shape, a NUL byte, an overlong line, a control
 *     character in the device name, more than FRT_GEMM_TUNE_MAX records;
 *   - the writer refuses a table the parser would not read back;
 *   - a missing file is FRT_ERR_NOT_FOUND.
 */
#include "frt_test.h"

#include "kernels/gemm_tune.h"

#include <unistd.h>

static const char *HEAD = "frt-gemm-tune 1\ndevice NVIDIA H100 80GB HBM3\ncublaslt 120903\nworkspace 33554432\n"
                          "candidates 8\n";

static void random_table(frt_gemm_tune *t, int n)
{
    memset(t, 0, sizeof *t);
    snprintf(t->device, sizeof t->device, "GPU %llu (rev %d)", (unsigned long long)(frt_test_u64() % 100000),
             (int)(frt_test_u64() % 9));
    t->cublaslt_version = (long long)(frt_test_u64() % 200000);
    t->workspace_bytes = (long long)(frt_test_u64() % (1ull << 36));
    t->candidates = 1 + (int)(frt_test_u64() % FRT_GEMM_TUNE_MAX_CANDIDATES);
    t->n = n;
    t->e = xmalloc((size_t)(n ? n : 1) * sizeof *t->e);
    for (int i = 0; i < n; i++) {
        frt_gemm_tune_entry *e = &t->e[i];
        e->n = 1 + i; /* distinct shapes */
        e->in_dim = 8 * (1 + (int)(frt_test_u64() % 4096));
        e->out_dim = 8 * (1 + (int)(frt_test_u64() % 4096));
        e->out_bf16 = (int)(frt_test_u64() % 2);
        e->accumulate = (int)(frt_test_u64() % 2);
        e->index = (int)(frt_test_u64() % (uint64_t)t->candidates);
        for (int k = 0; k < 7; k++) e->algo[k] = (int)(frt_test_u64() % (1u << 30));
    }
}

static int same(const frt_gemm_tune *a, const frt_gemm_tune *b)
{
    if (strcmp(a->device, b->device) || a->cublaslt_version != b->cublaslt_version ||
        a->workspace_bytes != b->workspace_bytes || a->candidates != b->candidates || a->n != b->n)
        return 0;
    return a->n == 0 || memcmp(a->e, b->e, (size_t)a->n * sizeof *a->e) == 0;
}

static void test_round_trip(const char *dir)
{
    const int sizes[] = {0, 1, 7, 300, FRT_GEMM_TUNE_MAX};
    for (int s = 0; s < 5; s++) {
        frt_gemm_tune t, u, v;
        random_table(&t, sizes[s]);
        char *text = NULL, *text2 = NULL;
        size_t len = 0, len2 = 0;
        CHECK_OK(frt_gemm_tune_format(&t, &text, &len));
        CHECK_OK(frt_gemm_tune_parse(text, len, "round trip", &u));
        CHECK_MSG(same(&t, &u), "%d entries: format -> parse changed the table", sizes[s]);
        CHECK_OK(frt_gemm_tune_format(&u, &text2, &len2));
        CHECK(len == len2 && text && text2 && memcmp(text, text2, len) == 0);
        char path[700];
        snprintf(path, sizeof path, "%s/gemm_tune_%d.txt", dir, s);
        CHECK_OK(frt_gemm_tune_write(path, &t));
        CHECK_OK(frt_gemm_tune_read(path, &v));
        CHECK_MSG(same(&t, &v), "%d entries: write -> read changed the table", sizes[s]);
        if (sizes[s] > 3) {
            const frt_gemm_tune_entry *e = &t.e[3];
            CHECK(frt_gemm_tune_find(&v, e->n, e->in_dim, e->out_dim, e->out_bf16, e->accumulate) == &v.e[3]);
            CHECK(frt_gemm_tune_find(&v, e->n, e->in_dim + 8, e->out_dim, e->out_bf16, e->accumulate) == NULL);
        }
        free(text);
        free(text2);
        free(t.e);
        frt_gemm_tune_free(&u);
        frt_gemm_tune_free(&v);
    }
    frt_gemm_tune_free(NULL);
}

static void test_accepted(void)
{
    char text[1024];
    snprintf(text, sizeof text,
             "# tuned by frt\r\n\r\nfrt-gemm-tune 1\r\ndevice NVIDIA H100 80GB HBM3\r\n# comment\r\ncublaslt 120903\r\n"
             "workspace 0\r\ncandidates 8\r\n\r\ngemm 64 1024 2048 bf16 1 7 21 18 8 1 0 0 0\r\n");
    frt_gemm_tune t;
    CHECK_OK(frt_gemm_tune_parse(text, strlen(text), "crlf", &t));
    CHECK(t.n == 1 && !strcmp(t.device, "NVIDIA H100 80GB HBM3") && t.cublaslt_version == 120903 &&
          t.workspace_bytes == 0 && t.candidates == 8);
    if (t.n == 1)
        CHECK(t.e[0].n == 64 && t.e[0].in_dim == 1024 && t.e[0].out_dim == 2048 && t.e[0].out_bf16 == 1 &&
              t.e[0].accumulate == 1 && t.e[0].index == 7 && t.e[0].algo[0] == 21 && t.e[0].algo[2] == 8);
    frt_gemm_tune_free(&t);
}

/* body after HEAD (or the whole text when raw) must be refused, naming
 * `line` and containing `needle`. */
static void refused(const char *body, int raw, int line, const char *needle)
{
    char text[2048], want[32];
    snprintf(text, sizeof text, "%s%s", raw ? "" : HEAD, body);
    frt_gemm_tune t;
    memset(&t, 0x5a, sizeof t);
    CHECK_STATUS(frt_gemm_tune_parse(text, strlen(text), "bad.txt", &t), FRT_ERR_FORMAT);
    CHECK(t.e == NULL && t.n == 0);
    snprintf(want, sizeof want, "line %d:", line);
    const char *msg = frt_last_error();
    CHECK_MSG((line == 0 || strstr(msg, want)) && strstr(msg, needle), "'%s': message '%s' (want '%s' and '%s')",
              body, msg, want, needle);
}

static void test_malformed(void)
{
    refused("", 1, 0, "no 'frt-gemm-tune' record");
    refused("frt-gemm-tune 2\n", 1, 1, "version 2");
    refused("frt-gemm-tun 1\n", 1, 1, "expected 'frt-gemm-tune");
    refused("gemm 1 8 8 f32 0 0 0 0 0 0 0 0 0\n", 1, 1, "expected 'frt-gemm-tune");
    refused("frt-gemm-tune 1\ncublaslt 1\n", 1, 2, "expected 'device");
    refused("frt-gemm-tune 1\ndevice X\ncublaslt 1\nworkspace 8\n", 1, 0, "no 'candidates' record");
    refused("frt-gemm-tune 1\ndevice \n", 1, 2, "device name of 0 bytes");
    refused("frt-gemm-tune 1\ndevice a\tb\n", 1, 2, "control character");
    refused("frt-gemm-tune 1\ndevice X\ncublaslt -1\n", 1, 3, "cublaslt version");
    refused("frt-gemm-tune 1\ndevice X\ncublaslt 1\nworkspace 1x\n", 1, 4, "workspace");
    refused("frt-gemm-tune 1\ndevice X\ncublaslt 1\nworkspace 1\ncandidates 0\n", 1, 5, "candidates");
    refused("frt-gemm-tune 1\ndevice X\ncublaslt 1\nworkspace 1\ncandidates 65\n", 1, 5, "candidates");
    refused("gemm 1 8 8 f32 0 0 0 0 0 0 0 0\n", 0, 6, "13 fields");
    refused("gemm 1 8 8 f32 0 0 0 0 0 0 0 0 0 0\n", 0, 6, "more than 13");
    refused("gemm 1 8  8 f32 0 0 0 0 0 0 0 0 0\n", 0, 6, "empty field");
    refused("gemm 1 8 8 f32 0 0 0 0 0 0 0 0 0 \n", 0, 6, "empty field");
    refused("gemv 1 8 8 f32 0 0 0 0 0 0 0 0 0\n", 0, 6, "unknown record");
    refused("gemm 0 8 8 f32 0 0 0 0 0 0 0 0 0\n", 0, 6, "N '0'");
    refused("gemm 1 16777217 8 f32 0 0 0 0 0 0 0 0 0\n", 0, 6, "IN");
    refused("gemm 1 8 +8 f32 0 0 0 0 0 0 0 0 0\n", 0, 6, "OUT");
    refused("gemm 1 8 8 f16 0 0 0 0 0 0 0 0 0\n", 0, 6, "dtype 'f16'");
    refused("gemm 1 8 8 f32 2 0 0 0 0 0 0 0 0\n", 0, 6, "ACC");
    refused("gemm 1 8 8 f32 0 8 0 0 0 0 0 0 0\n", 0, 6, "index");
    refused("gemm 1 8 8 f32 0 0 0 0 0 0 0 0 1073741825\n", 0, 6, "algorithm id");
    refused("gemm 1 8 8 f32 0 0 0 0 -1 0 0 0 0\n", 0, 6, "algorithm id");
    refused("gemm 1 8 8 f32 0 0 0 0 0 0 0 0 0\n# x\ngemm 1 8 8 f32 0 1 1 1 1 1 1 1 1\n", 0, 8, "given twice");
    char *big = xmalloc(FRT_GEMM_TUNE_LINE_MAX + 64);
    memset(big, '#', FRT_GEMM_TUNE_LINE_MAX + 1);
    strcpy(big + FRT_GEMM_TUNE_LINE_MAX + 1, "\n");
    refused(big, 0, 6, "longer than");
    free(big);
    char nul[] = "frt-gemm-tune 1\ndevice X\0Y\n";
    frt_gemm_tune t;
    CHECK_STATUS(frt_gemm_tune_parse(nul, sizeof nul - 1, "nul", &t), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "line 2: a NUL byte") != NULL);
    /* More than FRT_GEMM_TUNE_MAX records. */
    size_t cap = strlen(HEAD) + (FRT_GEMM_TUNE_MAX + 1) * 48 + 1, k = 0;
    char *many = xmalloc(cap);
    k += (size_t)snprintf(many, cap, "%s", HEAD);
    for (int i = 0; i <= FRT_GEMM_TUNE_MAX; i++)
        k += (size_t)snprintf(many + k, cap - k, "gemm %d 8 8 f32 0 0 0 0 0 0 0 0 0\n", i + 1);
    CHECK_STATUS(frt_gemm_tune_parse(many, k, "many", &t), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "more than 1024") != NULL);
    free(many);
    CHECK_STATUS(frt_gemm_tune_parse(NULL, 3, "null", &t), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_gemm_tune_read("/nonexistent/frt/gemm_tune.txt", &t), FRT_ERR_NOT_FOUND);
}

static void test_writer_refuses(void)
{
    frt_gemm_tune t;
    random_table(&t, 2);
    char *text = NULL;
    size_t len;
    frt_gemm_tune bad = t;
    bad.candidates = 0;
    CHECK_STATUS(frt_gemm_tune_format(&bad, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    bad = t;
    snprintf(bad.device, sizeof bad.device, "two\nlines");
    CHECK_STATUS(frt_gemm_tune_format(&bad, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    bad = t;
    bad.device[0] = '\0';
    CHECK_STATUS(frt_gemm_tune_format(&bad, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    t.e[1].index = t.candidates;
    CHECK_STATUS(frt_gemm_tune_format(&t, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    t.e[1].index = 0, t.e[1].out_dim = 0;
    CHECK_STATUS(frt_gemm_tune_format(&t, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL);
    CHECK_STATUS(frt_gemm_tune_format(NULL, &text, &len), FRT_ERR_INVALID_ARGUMENT);
    free(t.e);
}

int main(void)
{
    char dir[] = "/tmp/frt_test_gemm_tune_XXXXXX";
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");
    frt_test_seed(27);
    test_round_trip(dir);
    test_accepted();
    test_malformed();
    test_writer_refuses();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return frt_test_report();
}
