/* test_args.c - the command line's option parser (tools/args.c): the
 * checked number parsers on their edge cases (empty, leading space, trailing
 * junk, overflow, signs, NaN / infinity, units), the id-list and
 * logit-bias-list parsers, the
 * option table (long, short, --name=value, "--", repeats, flags, operands,
 * every refusal with its exit code and message), the --help text listing
 * every option with its default, and frt_version() against CMakeLists.txt. */
#include "frt_test.h"

#include "../tools/args.c"

#include <unistd.h>

/* ---- stderr capture: the parser prints its refusals there ---------------- */

static char err_buf[4096];
static int saved_fd = -1;
static FILE *err_file;

static void capture_begin(void)
{
    fflush(stderr);
    err_file = tmpfile();
    saved_fd = dup(STDERR_FILENO);
    dup2(fileno(err_file), STDERR_FILENO);
}

static const char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    rewind(err_file);
    size_t n = fread(err_buf, 1, sizeof err_buf - 1, err_file);
    err_buf[n] = '\0';
    fclose(err_file);
    return err_buf;
}

static void test_i64(void)
{
    long long v = 7;
    CHECK(frt_parse_i64("42", 0, 100, &v) == 0 && v == 42);
    CHECK(frt_parse_i64("-5", -10, 10, &v) == 0 && v == -5);
    CHECK(frt_parse_i64("+5", -10, 10, &v) == 0 && v == 5);
    CHECK(frt_parse_i64("9223372036854775807", LLONG_MIN, LLONG_MAX, &v) == 0 && v == LLONG_MAX);
    CHECK(frt_parse_i64("-9223372036854775808", LLONG_MIN, LLONG_MAX, &v) == 0 && v == LLONG_MIN);
    v = 7;
    CHECK(frt_parse_i64("", 0, 100, &v) == FRT_PARSE_EMPTY && v == 7);
    CHECK(frt_parse_i64(NULL, 0, 100, &v) == FRT_PARSE_EMPTY);
    CHECK(frt_parse_i64("4x", 0, 100, &v) == FRT_PARSE_SYNTAX && v == 7);
    CHECK(frt_parse_i64(" 4", 0, 100, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_i64("4 ", 0, 100, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_i64("-", 0, 100, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_i64("0x10", 0, 100, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_i64("1.5", 0, 100, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_i64("9223372036854775808", LLONG_MIN, LLONG_MAX, &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_i64("-9223372036854775809", LLONG_MIN, LLONG_MAX, &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_i64("99999999999999999999999", 0, 100, &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_i64("101", 0, 100, &v) == FRT_PARSE_RANGE && v == 7);
    CHECK(frt_parse_i64("-1", 0, 100, &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_i64("100", 0, 100, &v) == 0 && v == 100);
}

static void test_u64(void)
{
    unsigned long long v = 7;
    CHECK(frt_parse_u64("18446744073709551615", &v) == 0 && v == ULLONG_MAX);
    CHECK(frt_parse_u64("0", &v) == 0 && v == 0);
    v = 7;
    CHECK(frt_parse_u64("18446744073709551616", &v) == FRT_PARSE_RANGE && v == 7);
    CHECK(frt_parse_u64("-1", &v) == FRT_PARSE_RANGE && v == 7); /* strtoull would give 2^64 - 1 */
    CHECK(frt_parse_u64("-0", &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_u64("", &v) == FRT_PARSE_EMPTY);
    CHECK(frt_parse_u64("12seed", &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_u64(" 1", &v) == FRT_PARSE_SYNTAX);
}

static void test_double(void)
{
    double v = 7;
    CHECK(frt_parse_double("0.7", 0, 2, &v) == 0 && v == 0.7);
    CHECK(frt_parse_double("1e-3", 0, 2, &v) == 0 && v == 1e-3);
    CHECK(frt_parse_double("2", 0, 2, &v) == 0 && v == 2);
    CHECK(frt_parse_double("1e-400", 0, 2, &v) == 0 && v < 1e-300); /* underflow: a tiny number */
    v = 7;
    CHECK(frt_parse_double("hot", 0, 2, &v) == FRT_PARSE_SYNTAX && v == 7);
    CHECK(frt_parse_double("", 0, 2, &v) == FRT_PARSE_EMPTY);
    CHECK(frt_parse_double("0.5x", 0, 2, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_double(" 0.5", 0, 2, &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_double("nan", -1e300, 1e300, &v) == FRT_PARSE_NOT_FINITE && v == 7);
    CHECK(frt_parse_double("NAN", -1e300, 1e300, &v) == FRT_PARSE_NOT_FINITE);
    CHECK(frt_parse_double("inf", -1e300, 1e300, &v) == FRT_PARSE_NOT_FINITE);
    CHECK(frt_parse_double("-Infinity", -1e300, 1e300, &v) == FRT_PARSE_NOT_FINITE);
    CHECK(frt_parse_double("1e999", -1e300, 1e300, &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_double("2.0001", 0, 2, &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_double("-0.1", 0, 2, &v) == FRT_PARSE_RANGE && v == 7);
}

static void test_size(void)
{
    unsigned long long v = 7;
    CHECK(frt_parse_size("123", &v) == 0 && v == 123);
    CHECK(frt_parse_size("0", &v) == 0 && v == 0);
    CHECK(frt_parse_size("5GB", &v) == 0 && v == 5000000000ull);
    CHECK(frt_parse_size("1.5G", &v) == 0 && v == 1500000000ull);
    CHECK(frt_parse_size("2GiB", &v) == 0 && v == 2147483648ull);
    CHECK(frt_parse_size("64K", &v) == 0 && v == 64000);
    CHECK(frt_parse_size("1MiB", &v) == 0 && v == 1048576);
    v = 7;
    CHECK(frt_parse_size("lots", &v) == FRT_PARSE_SYNTAX && v == 7);
    CHECK(frt_parse_size("5XB", &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_size("", &v) == FRT_PARSE_EMPTY);
    CHECK(frt_parse_size("-1MB", &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_size("nanGB", &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_size("infGB", &v) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_size("1e30GB", &v) == FRT_PARSE_RANGE);
    CHECK(frt_parse_size("1e999", &v) == FRT_PARSE_RANGE && v == 7);
}

static void test_list(void)
{
    int32_t *ids = NULL;
    size_t n = 0;
    const char *bad = NULL;
    CHECK(frt_parse_i32_list("1,2,3", 0, INT32_MAX, &ids, &n, &bad) == 0 && n == 3 && ids[0] == 1 && ids[2] == 3);
    free(ids);
    ids = NULL;
    CHECK(frt_parse_i32_list(" 7 , 8", 0, INT32_MAX, &ids, &n, &bad) == 0 && n == 2 && ids[0] == 7 && ids[1] == 8);
    free(ids);
    ids = NULL;
    CHECK(frt_parse_i32_list("2147483647", 0, INT64_MAX, &ids, &n, &bad) == 0 && n == 1 && ids[0] == INT32_MAX);
    free(ids);
    ids = NULL;
    CHECK(frt_parse_i32_list("", 0, 10, &ids, &n, &bad) == FRT_PARSE_EMPTY && ids == NULL);
    CHECK(frt_parse_i32_list("1,,2", 0, 10, &ids, &n, &bad) == FRT_PARSE_EMPTY && ids == NULL && !strcmp(bad, ",2"));
    CHECK(frt_parse_i32_list("1,2,", 0, 10, &ids, &n, &bad) == FRT_PARSE_EMPTY && ids == NULL);
    CHECK(frt_parse_i32_list("1,x2,3", 0, 10, &ids, &n, &bad) == FRT_PARSE_SYNTAX && !strncmp(bad, "x2", 2));
    CHECK(frt_parse_i32_list("1,-2", 0, 10, &ids, &n, &bad) == FRT_PARSE_RANGE && !strcmp(bad, "-2"));
    CHECK(frt_parse_i32_list("2147483648", 0, INT64_MAX, &ids, &n, &bad) == FRT_PARSE_RANGE);
    CHECK(frt_parse_i32_list("1 2", 0, 10, &ids, &n, &bad) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_i32_list("123456789012345678901234567890123", 0, 10, &ids, &n, &bad) == FRT_PARSE_SYNTAX);
    CHECK(ids == NULL);
}

static void test_bias_list(void)
{
    frt_logit_bias b[3];
    int n = -1;
    const char *bad = NULL;
    CHECK(frt_parse_logit_bias("42:5, 7:-100 ,0:0.25", b, 3, &n, &bad) == 0 && n == 3);
    CHECK(b[0].token == 42 && b[0].bias == 5.0f && b[1].token == 7 && b[1].bias == -100.0f && b[2].bias == 0.25f);
    CHECK(frt_parse_logit_bias("2147483647:1e3", b, 3, &n, &bad) == 0 && n == 1 && b[0].token == INT32_MAX);
    n = -1;
    CHECK(frt_parse_logit_bias("", b, 3, &n, &bad) == FRT_PARSE_EMPTY && n == -1);
    CHECK(frt_parse_logit_bias("1:1,,2:2", b, 3, &n, &bad) == FRT_PARSE_EMPTY && !strcmp(bad, ",2:2"));
    CHECK(frt_parse_logit_bias("1:1,", b, 3, &n, &bad) == FRT_PARSE_EMPTY);
    CHECK(frt_parse_logit_bias("1:1,5", b, 3, &n, &bad) == FRT_PARSE_SYNTAX && !strcmp(bad, "5"));
    CHECK(frt_parse_logit_bias(":5", b, 3, &n, &bad) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_logit_bias("3:", b, 3, &n, &bad) == FRT_PARSE_EMPTY);
    CHECK(frt_parse_logit_bias("x:1", b, 3, &n, &bad) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_logit_bias("3:1x", b, 3, &n, &bad) == FRT_PARSE_SYNTAX);
    CHECK(frt_parse_logit_bias("-1:1", b, 3, &n, &bad) == FRT_PARSE_RANGE);
    CHECK(frt_parse_logit_bias("2147483648:1", b, 3, &n, &bad) == FRT_PARSE_RANGE);
    CHECK(frt_parse_logit_bias("3:1e39", b, 3, &n, &bad) == FRT_PARSE_RANGE);
    CHECK(frt_parse_logit_bias("3:nan", b, 3, &n, &bad) == FRT_PARSE_NOT_FINITE);
    CHECK(frt_parse_logit_bias("1:1,2:2,3:3,4:4", b, 3, &n, &bad) == FRT_PARSE_RANGE && !strcmp(bad, "4:4"));
    CHECK(frt_parse_logit_bias(NULL, b, 3, &n, &bad) == FRT_PARSE_EMPTY);
}

/* One parse of argv (NULL-terminated) against a fresh table. */
typedef struct opts {
    int n, flag, backend;
    float temp;
    double secs;
    unsigned long long seed, size;
    const char *name, *mode;
} opts;

static int parse(opts *o, char **pos, int *n_pos, char **argv)
{
    *o = (opts){.n = 64, .backend = FRT_ARG_BACKEND_AUTO, .temp = 0.5f, .secs = 2, .size = 5000000000ull,
                .mode = "model"};
    frt_arg t[] = {
        FRT_OPT('n', "max-tokens", FRT_ARG_INT, &o->n, "N", "tokens", .min = 1, .max = 1000),
        FRT_OPT(0, "json", FRT_ARG_FLAG, &o->flag, NULL, "json"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &o->backend, NULL, "where"),
        FRT_OPT(0, "temperature", FRT_ARG_FLOAT, &o->temp, "T", "temp", .fmin = 0, .fmax = 10),
        FRT_OPT(0, "seconds", FRT_ARG_DOUBLE, &o->secs, "S", "secs", .fmin = 0, .fmax = 100),
        FRT_OPT(0, "seed", FRT_ARG_U64, &o->seed, "S", "seed"),
        FRT_OPT(0, "shard-size", FRT_ARG_SIZE, &o->size, NULL, "size", .dflt = "5GB"),
        FRT_OPT('m', "model", FRT_ARG_STR, &o->name, "DIR", "model", .dflt = "the demo model"),
        FRT_OPT(0, "engine", FRT_ARG_CHOICE, &o->mode, NULL, "engine", .choices = "model|fake"),
    };
    frt_cmd_spec spec = {"t", "[options] [A [B]]", NULL, t, (int)(sizeof t / sizeof t[0]), 0, 2, NULL};
    int argc = 0;
    while (argv[argc]) argc++;
    capture_begin();
    int rc = frt_args_parse(&spec, argc, argv, pos, n_pos);
    capture_end();
    return rc;
}

#define ARGV(...) ((char *[]){"t", __VA_ARGS__, NULL})

static void test_table(void)
{
    opts o;
    char *pos[4];
    int np = -1;
    CHECK(parse(&o, pos, &np, ARGV("-n", "5", "--json", "--temperature=0.25", "a", "--seed", "18446744073709551615",
                                   "--backend", "cpu", "--shard-size", "1MB", "-m", "dir", "--engine", "fake")) ==
          FRT_ARGS_RUN);
    CHECK(o.n == 5 && o.flag == 1 && o.temp == 0.25f && o.seed == ULLONG_MAX && o.backend == FRT_BACKEND_CPU);
    CHECK(o.size == 1000000 && !strcmp(o.name, "dir") && !strcmp(o.mode, "fake"));
    CHECK(np == 1 && !strcmp(pos[0], "a"));
    /* the last value wins; "--" ends the options; "-" is an operand */
    CHECK(parse(&o, pos, &np, ARGV("-n", "5", "--max-tokens", "6", "--", "-n")) == FRT_ARGS_RUN);
    CHECK(o.n == 6 && np == 1 && !strcmp(pos[0], "-n"));
    CHECK(parse(&o, pos, &np, ARGV("-", "--backend", "auto")) == FRT_ARGS_RUN);
    CHECK(np == 1 && !strcmp(pos[0], "-") && o.backend == FRT_ARG_BACKEND_AUTO);
    /* a value may start with '-': it is the option's value (then range-checked) */
    CHECK(parse(&o, pos, &np, ARGV("-m", "-weird")) == FRT_ARGS_RUN && !strcmp(o.name, "-weird"));

    /* refusals: exit 2, the option and the value named, nothing stored */
    struct {
        char **argv;
        const char *msg;
    } bad[] = {
        {ARGV("-n", "4x"), "t: -n/--max-tokens: '4x' is not an integer"},
        {ARGV("--max-tokens=4x"), "-n/--max-tokens: '4x' is not an integer"},
        {ARGV("-n", ""), "-n/--max-tokens: '' is not an integer"},
        {ARGV("-n", "0"), "-n/--max-tokens: '0' is out of range (an integer from 1 to 1000)"},
        {ARGV("-n", "-3"), "'-3' is out of range"},
        {ARGV("-n", "99999999999999999999"), "is out of range"},
        {ARGV("--temperature", "hot"), "--temperature: 'hot' is not a number"},
        {ARGV("--temperature", "nan"), "--temperature: 'nan' is not a finite number"},
        {ARGV("--temperature", "inf"), "not a finite number"},
        {ARGV("--temperature", "11"), "'11' is out of range (a number from 0 to 10)"},
        {ARGV("--seconds", "1e999"), "out of range"},
        {ARGV("--seed", "-1"), "--seed: '-1' is out of range"},
        {ARGV("--shard-size", "lots"), "--shard-size: 'lots' is not a size"},
        {ARGV("--backend", "tpu"), "--backend: 'tpu' is not one of auto, cpu, cuda"},
        {ARGV("--engine", "real"), "--engine: 'real' is not one of model, fake"},
        {ARGV("--foo"), "t: unknown option --foo"},
        {ARGV("--foo=1"), "unknown option --foo\n"},
        {ARGV("-x"), "unknown option -x"},
        {ARGV("-n5"), "unknown option -n5"},
        {ARGV("--json=1"), "--json takes no value"},
        {ARGV("-n"), "-n/--max-tokens needs a value (N)"},
        {ARGV("a", "b", "c"), "unexpected argument 'c'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(&o, pos, &np, bad[i].argv);
        CHECK_MSG(rc == FRT_ARGS_USAGE, "case %zu: rc %d", i, rc);
        CHECK_MSG(strstr(err_buf, bad[i].msg) != NULL, "case %zu: wanted \"%s\", got \"%s\"", i, bad[i].msg, err_buf);
        CHECK_MSG(strstr(err_buf, "(see 'frt t --help')") != NULL, "case %zu: no pointer to --help", i);
    }
    CHECK(parse(&o, pos, &np, ARGV("-n", "4x")) == FRT_ARGS_USAGE && o.n == 64);

    /* operands: too few */
    frt_cmd_spec need = {"need", "DIR", NULL, NULL, 0, 1, 1, NULL};
    capture_begin();
    int rc = frt_args_parse(&need, 1, ARGV("x"), pos, &np);
    capture_end();
    CHECK(rc == FRT_ARGS_USAGE && strstr(err_buf, "missing argument: usage: frt need DIR"));
}

static void test_help(void)
{
    int n = 64, backend = FRT_ARG_BACKEND_AUTO, flag = 0;
    float temp = 0.7f;
    const char *model = NULL;
    frt_arg t[] = {
        FRT_OPT('n', "max-tokens", FRT_ARG_INT, &n, "N", "tokens to generate", .min = 1, .max = 1000),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where it runs"),
        FRT_OPT(0, "temperature", FRT_ARG_FLOAT, &temp, "T", "0 = greedy", .fmin = 0, .fmax = 10),
        FRT_OPT('m', "model", FRT_ARG_STR, &model, "DIR", "checkpoint", .dflt = "the demo model"),
        FRT_OPT(0, "json", FRT_ARG_FLAG, &flag, NULL, "print JSON"),
    };
    frt_cmd_spec spec = {"h", "[options]", "About h.\n", t, 5, 0, 0, "Epilog.\n"};
    FILE *f = tmpfile();
    frt_args_help(&spec, f);
    rewind(f);
    char buf[4096];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = '\0';
    fclose(f);
    CHECK(strstr(buf, "usage: frt h [options]") && strstr(buf, "About h.") && strstr(buf, "Epilog."));
    CHECK(strstr(buf, "-n, --max-tokens N") && strstr(buf, "tokens to generate [1..1000] (default: 64)"));
    CHECK(strstr(buf, "--backend auto|cpu|cuda") && strstr(buf, "(default: auto: cuda when"));
    CHECK(strstr(buf, "--temperature T") && strstr(buf, "(default: 0.7)"));
    CHECK(strstr(buf, "-m, --model DIR") && strstr(buf, "(default: the demo model)"));
    CHECK(strstr(buf, "--json") && strstr(buf, "--help") && strstr(buf, "--version"));
    /* --help and --version end the parse with FRT_ARGS_EXIT */
    char *pos[1];
    int np;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *null = fopen("/dev/null", "w");
    dup2(fileno(null), STDOUT_FILENO);
    int r1 = frt_args_parse(&spec, 2, ARGV("--help"), pos, &np);
    int r2 = frt_args_parse(&spec, 2, ARGV("--version"), pos, &np);
    int r3 = frt_args_parse(&spec, 2, ARGV("-h"), pos, &np);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    fclose(null);
    CHECK(r1 == FRT_ARGS_EXIT && r2 == FRT_ARGS_EXIT && r3 == FRT_ARGS_EXIT);
}

static void test_version(void)
{
    const char *v = frt_version();
    unsigned a, b, c;
    int end = 0;
    CHECK(v && sscanf(v, "%u.%u.%u%n", &a, &b, &c, &end) == 3 && v[end] == '\0');
    /* the same number as CMakeLists.txt's project(frt VERSION x.y.z) */
    FILE *f = fopen(FRT_SOURCE_DIR "/CMakeLists.txt", "r");
    CHECK(f != NULL);
    char line[256], want[64] = "";
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "project(frt VERSION %63[0-9.]", want) == 1) break;
    if (f) fclose(f);
    CHECK_MSG(want[0] && !strcmp(v, want), "frt_version() %s, CMakeLists.txt %s", v, want);
}

int main(void)
{
    test_i64();
    test_u64();
    test_double();
    test_size();
    test_list();
    test_bias_list();
    test_table();
    test_help();
    test_version();
    return frt_test_report();
}
