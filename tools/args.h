/*
 * tools/args.h - the one argument parser of the frt command line.
 *
 * Each command describes its options in a table of frt_arg (short and long
 * name, kind, where the value goes, its allowed range, a help line) and calls
 * frt_args_parse. The parser:
 *   - takes "-n 4", "--max-tokens 4" and "--max-tokens=4"; "--" ends the
 *     options; a repeated option keeps its last value;
 *   - checks every number completely (no trailing junk, no overflow, no
 *     NaN or infinity, inside [min, max]) and names the option and the value
 *     when it refuses one: "frt generate: -n/--max-tokens: '4x' is not an
 *     integer";
 *   - names an unknown option ("unknown option --foo") and a missing value;
 *   - prints --help (every option with its default, read from the variable
 *     before parsing) and --version itself.
 * Every refusal prints one message to stderr and makes the command exit 2.
 *
 * The number parsers below are what the table uses; they are exported for
 * the values a table cannot check (id lists) and for tests/test_args.c.
 */
#ifndef FRT_TOOLS_ARGS_H
#define FRT_TOOLS_ARGS_H

#include <stddef.h>
#include "frt/sampling.h"

#include <stdio.h>
#include <stdint.h>

/* ---- checked number parsing ----------------------------------------------- */

/* Why a value was refused. */
typedef enum frt_parse_err {
    FRT_PARSE_OK = 0,
    FRT_PARSE_EMPTY = -1,     /* "" */
    FRT_PARSE_SYNTAX = -2,    /* not a number, trailing junk, leading space */
    FRT_PARSE_RANGE = -3,     /* a number outside [lo, hi] (overflow included) */
    FRT_PARSE_NOT_FINITE = -4 /* nan, inf */
} frt_parse_err;

/* Decimal integer with an optional sign, in [lo, hi]. *out is set on success
 * only. */
int frt_parse_i64(const char *s, long long lo, long long hi, long long *out);

/* Non-negative decimal integer up to 2^64 - 1; a '-' sign is a range error. */
int frt_parse_u64(const char *s, unsigned long long *out);

/* A finite decimal or hexadecimal float (strtod syntax) in [lo, hi]. */
int frt_parse_double(const char *s, double lo, double hi, double *out);

/* A byte count: "123", "1.5GB", "500MB", "2GiB", "64K" (K/M/G = 10^3/6/9,
 * KiB/MiB/GiB = 2^10/20/30, optional trailing "B"), at most 2^63. */
int frt_parse_size(const char *s, unsigned long long *out);

/* A comma-separated list of integers in [lo, hi] ("1,2,3"; spaces around an
 * element are allowed). *out is malloc'd (the caller frees it); n >= 1 on
 * success. An empty list or element is FRT_PARSE_EMPTY. On failure nothing is
 * allocated and *bad_at (when not NULL) points at the refused element. */
int frt_parse_i32_list(const char *s, long long lo, long long hi, int32_t **out, size_t *n, const char **bad_at);

/* A --logit-bias list "ID:BIAS,ID:BIAS,.." (spaces around an element
 * allowed): ids in [0, INT32_MAX], biases finite f32 values (their range and
 * the ids' vocabulary are frt_sampling_check's). Up to cap entries into
 * out[], their count into *n. FRT_PARSE_EMPTY (an empty list or element),
 * FRT_PARSE_SYNTAX (not ID:BIAS), FRT_PARSE_RANGE (an id out of range, a
 * bias beyond f32, more than cap elements), FRT_PARSE_NOT_FINITE; *bad_at
 * (when not NULL) points at the refused element. *n is set on success only;
 * out[] may be partly written on failure. */
int frt_parse_logit_bias(const char *s, frt_logit_bias *out, int cap, int *n, const char **bad_at);

/* ---- the option table ------------------------------------------------------ */

typedef enum frt_arg_kind {
    FRT_ARG_FLAG,    /* int *: set to 1; takes no value */
    FRT_ARG_STR,     /* const char **: the argv string */
    FRT_ARG_INT,     /* int *: integer in [min, max] (clamped to int) */
    FRT_ARG_U64,     /* unsigned long long * */
    FRT_ARG_FLOAT,   /* float *: finite, in [fmin, fmax] */
    FRT_ARG_DOUBLE,  /* double *: finite, in [fmin, fmax] */
    FRT_ARG_SIZE,    /* unsigned long long *: a byte count (frt_parse_size) */
    FRT_ARG_CHOICE,  /* const char **: one of the '|'-separated words in `choices` */
    FRT_ARG_BACKEND, /* int *: FRT_ARG_BACKEND_AUTO, FRT_BACKEND_CPU or _CUDA */
} frt_arg_kind;

/* The backend default of every command: cuda when a CUDA device is present,
 * else cpu (frt_args_backend resolves it). */
#define FRT_ARG_BACKEND_AUTO (-1)

typedef struct frt_arg {
    char short_name;       /* 'n', or 0 */
    const char *long_name; /* "max-tokens" (without the dashes) */
    frt_arg_kind kind;
    void *dst;             /* see frt_arg_kind */
    const char *meta;      /* value name in --help ("N"); NULL: from the kind */
    const char *help;      /* one line */
    long long min, max;    /* FRT_ARG_INT; both 0: any int >= 0 */
    double fmin, fmax;     /* FRT_ARG_FLOAT / _DOUBLE */
    const char *choices;   /* FRT_ARG_CHOICE: "model|fake" */
    const char *dflt;      /* the default as --help shows it; NULL: the variable's value; "" none */
    int given;             /* set by frt_args_parse: how many times the option was given */
} frt_arg;

/* One table entry; the optional fields follow as designated initializers:
 *   FRT_OPT('n', "max-tokens", FRT_ARG_INT, &n, "N", "tokens to generate", .min = 1, .max = 1 << 20) */
#define FRT_OPT(s, l, k, d, m, h, ...)                                                              \
    {.short_name = (s), .long_name = (l), .kind = (k), .dst = (d), .meta = (m), .help = (h), __VA_ARGS__}

typedef struct frt_cmd_spec {
    const char *name;     /* "generate", "bench exec" */
    const char *synopsis; /* after "usage: frt NAME ", e.g. "[-m DIR] -p TEXT [options]" */
    const char *about;    /* paragraph(s) printed after the usage line; may be NULL */
    frt_arg *args;
    int n_args;
    int min_pos, max_pos; /* operands allowed (max_pos -1: any number) */
    const char *epilog;   /* printed after the options; may be NULL */
} frt_cmd_spec;

/* What frt_args_parse tells the command to do. */
#define FRT_ARGS_RUN 0  /* go on: options are stored, operands in pos */
#define FRT_ARGS_EXIT 1 /* --help or --version was printed: exit 0 */
#define FRT_ARGS_USAGE 2 /* a message was printed to stderr: exit 2 */

/* Parses argv[1..argc) (argv[0] is the command's name). Stores each value
 * through its table entry and counts it in `given`. Operands (arguments that
 * do not start with '-', "-" itself, and everything after "--") are put in
 * pos[0..*n_pos) in order; pos must have room for max_pos entries (argc when
 * max_pos is -1); pos and n_pos may be NULL when max_pos is 0. Returns
 * FRT_ARGS_RUN, FRT_ARGS_EXIT or FRT_ARGS_USAGE (see above). */
int frt_args_parse(frt_cmd_spec *spec, int argc, char **argv, char **pos, int *n_pos);

/* Prints the command's help (usage, about, every option with its default,
 * epilog). Call it before parsing to show the defaults. */
void frt_args_help(const frt_cmd_spec *spec, FILE *f);

/* Prints "frt NAME: " + the formatted message + "\n(see 'frt NAME --help')"
 * to stderr and returns FRT_ARGS_USAGE (2), the exit code of a usage error. */
int frt_args_error(const frt_cmd_spec *spec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The option as messages name it: "-n/--max-tokens" or "--json". */
const char *frt_args_name(const frt_arg *a, char *buf, size_t n);

/* The table entry for a long name, or NULL. */
frt_arg *frt_args_find(frt_cmd_spec *spec, const char *long_name);

/* The first of the long names names[0..n) given on the command line, or
 * NULL: how a command refuses options that do nothing in the mode chosen.
 * Every name must be in the table. FRT_ARGS_FIRST_GIVEN takes an array. */
const char *frt_args_first_given(frt_cmd_spec *spec, const char *const *names, size_t n);
#define FRT_ARGS_FIRST_GIVEN(spec, names) frt_args_first_given((spec), (names), sizeof(names) / sizeof((names)[0]))

/* The token ids of --ids (a comma-separated list like 1,2,3, each 0 ..
 * INT32_MAX) into *ids (malloc'd; the caller frees) and *n. Returns 0, or
 * FRT_ARGS_USAGE after the message (nothing allocated). */
int frt_args_ids(const frt_cmd_spec *spec, const char *arg, int32_t **ids, size_t *n);

/* 0 when every id is below vocab, else FRT_ARGS_USAGE after a message
 * naming the first one outside the vocabulary. */
int frt_args_check_ids(const frt_cmd_spec *spec, const int32_t *ids, size_t n, int vocab);

/* FRT_ARG_BACKEND_AUTO -> cuda when frt_device_count finds a CUDA device,
 * else cpu; cpu / cuda unchanged. Returns an frt_backend value. */
int frt_args_backend(int backend);

#endif
