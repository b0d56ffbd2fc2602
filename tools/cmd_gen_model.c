/*
 * cmd_gen_model.c - frt gen-model: write a random-weight checkpoint at a
 * real Qwen3.5 shape (model/gen_model.h), with progress and timings.
 */
#include "cli.h"

#include "frt/status.h"
#include "weights/checkpoint.h"
#include "gen_model.h"
#include "util/fs.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: frt gen-model --shape NAME --out DIR [--seed S] [--threads N] [--shard-size SIZE] [--no-fsync]\n"
            "       frt gen-model --list\n\n"
            "Writes DIR/config.json, generation_config.json and bf16 random weights with Hugging Face\n"
            "names (model.safetensors, or model-0000i-of-0000n.safetensors + index when larger than\n"
            "--shard-size, default 5GB). The same seed gives the same bytes on any thread count.\n\n"
            "  --shape NAME      one of:");
    for (const char *const *s = frt_gen_model_shapes(); *s; s++) fprintf(f, " %s", *s);
    fprintf(f, "\n"
               "  --seed S          64-bit seed (default 0)\n"
               "  --threads N       OpenMP threads (default: all cores)\n"
               "  --shard-size SIZE bytes per file: 123, 500MB, 5GB, 2GiB; 0 = one file\n"
               "  --no-fsync        do not wait for the disk (files are still renamed into place atomically)\n"
               "  --list            print the shapes with their parameter counts\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "5GB" -> 5e9, "2GiB" -> 2^31, "123" -> 123. Returns 0 on success. */
static int parse_size(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    double m = 1;
    if (!*end || !strcmp(end, "B")) m = 1;
    else if (!strcmp(end, "K") || !strcmp(end, "KB")) m = 1e3;
    else if (!strcmp(end, "M") || !strcmp(end, "MB")) m = 1e6;
    else if (!strcmp(end, "G") || !strcmp(end, "GB")) m = 1e9;
    else if (!strcmp(end, "KiB")) m = 1024.0;
    else if (!strcmp(end, "MiB")) m = 1024.0 * 1024;
    else if (!strcmp(end, "GiB")) m = 1024.0 * 1024 * 1024;
    else return -1;
    if (v * m > 1.8e19) return -1;
    *out = (unsigned long long)(v * m);
    return 0;
}

static int list_shapes(void)
{
    printf("%-14s %16s %10s %7s %7s %6s  %s\n", "shape", "parameters", "bf16 GB", "layers", "hidden", "tied",
           "layer pattern");
    for (const char *const *s = frt_gen_model_shapes(); *s; s++) {
        frt_model_config c;
        int rc = frt_gen_model_config(*s, &c);
        if (rc < 0) return frt_cli_fail("gen-model", rc);
        frt_weight_spec *w;
        int n;
        rc = frt_model_weight_specs(&c, &w, &n);
        if (rc < 0) return frt_cli_fail("gen-model", rc);
        unsigned long long p = 0;
        for (int i = 0; i < n; i++) {
            unsigned long long e = 1;
            for (int d = 0; d < w[i].ndim; d++) e *= (unsigned long long)w[i].shape[d];
            p += e;
        }
        free(w);
        char pat[3 * FRT_MAX_LAYERS];
        frt_config_layer_pattern(&c, pat, 24);
        printf("%-14s %16llu %10.2f %7d %7d %6s  %s%s\n", *s, p, 2.0 * (double)p / 1e9, c.n_layers,
               c.hidden_size, c.tie_word_embeddings ? "yes" : "no", pat, c.n_layers > 11 ? " ..." : "");
    }
    return 0;
}

int frt_cmd_gen_model(int argc, char **argv)
{
    const char *shape = NULL, *out = NULL;
    unsigned long long seed = 0, shard = FRT_GEN_MODEL_SHARD_BYTES;
    int threads = 0, flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-fsync")) {
            flags |= FRT_CKPT_WRITE_NO_FSYNC;
        } else if (!strcmp(a, "--list")) {
            return list_shapes();
        } else if (!strcmp(a, "--shape") && v) {
            shape = v;
            i++;
        } else if (!strcmp(a, "--out") && v) {
            out = v;
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            char *end;
            errno = 0;
            seed = strtoull(v, &end, 0);
            if (errno || *end || *v == '-') {
                fprintf(stderr, "frt gen-model: bad --seed '%s'\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            threads = atoi(v);
            if (threads < 1) {
                fprintf(stderr, "frt gen-model: bad --threads '%s'\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--shard-size") && v) {
            if (parse_size(v, &shard) != 0) {
                fprintf(stderr, "frt gen-model: bad --shard-size '%s'\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "frt gen-model: unknown or incomplete argument '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!shape || !out) {
        usage(stderr);
        return 2;
    }
    if (threads > 0) omp_set_num_threads(threads);

    frt_model_config cfg;
    int rc = frt_gen_model_config(shape, &cfg);
    if (rc < 0) return frt_cli_fail("gen-model", rc);
    double t0 = now_s();
    printf("gen-model: %s, seed %llu, %d threads: generating bf16 weights...\n", shape, seed, omp_get_max_threads());
    fflush(stdout);
    frt_checkpoint *ck;
    rc = frt_gen_model_build_config(&cfg, seed, &ck);
    if (rc < 0) return frt_cli_fail("gen-model", rc);
    double t1 = now_s();
    double gb = (double)frt_checkpoint_bytes(ck) / 1e9;
    printf("gen-model: %d tensors, %llu parameters, %.3f GB in %.2f s\n", frt_checkpoint_count(ck),
           (unsigned long long)frt_checkpoint_numel(ck), gb, t1 - t0);
    printf("gen-model: writing %s ...\n", out);
    fflush(stdout);
    rc = frt_mkdir_p(out);
    if (rc == 0) rc = frt_checkpoint_write(ck, out, shard, flags);
    if (rc == 0) rc = frt_gen_model_write_configs(shape, out);
    frt_checkpoint_close(ck);
    if (rc < 0) return frt_cli_fail("gen-model", rc);
    double t2 = now_s();
    printf("gen-model: wrote %.3f GB in %.2f s (%.2f GB/s%s)\n", gb, t2 - t1, t2 > t1 ? gb / (t2 - t1) : 0.0,
           flags & FRT_CKPT_WRITE_NO_FSYNC ? ", not synced" : ", fsync included");
    printf("gen-model: done: %s (%s) in %.2f s total\n", out, shape, t2 - t0);
    return 0;
}
