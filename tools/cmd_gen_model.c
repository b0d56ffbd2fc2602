/*
 * cmd_gen_model.c - frt gen-model: write a random-weight checkpoint at a
 * real Qwen3.5 shape (gen_model.h), with progress and timings.
 *
 * Progress while the files are written: frt_checkpoint_write has no
 * callback, so a watcher thread sums the sizes of the safetensors files
 * (and their temporaries) in DIR modified since the write began, every
 * 200 ms, and reports them against the checkpoint's bytes.
 */
#include "args.h"
#include "cli.h"

#include "frt/status.h"
#include "frt/checkpoint.h"
#include "gen_model.h"
#include "frt/fs.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FRT_TRY_CLI(x) \
    do { \
        int rc_ = (x); \
        if (rc_ < 0) return rc_; \
    } while (0)

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

/* ---- write progress ---------------------------------------------------------- */

typedef struct watch {
    const char *dir;
    struct timespec since; /* files older than this are from an earlier run */
    frt_cli_progress prog;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
} watch;

/* Bytes of model*.safetensors* files (temporaries included) in w->dir
 * modified since the write began. */
static unsigned long long written_bytes(const watch *w)
{
    DIR *d = opendir(w->dir);
    if (!d) return 0;
    unsigned long long sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "model", 5) || !strstr(e->d_name, ".safetensors")) continue;
        char p[PATH_MAX];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", w->dir, e->d_name) >= (int)sizeof p || stat(p, &st) != 0) continue;
        if (!S_ISREG(st.st_mode)) continue;
        if (st.st_mtim.tv_sec < w->since.tv_sec ||
            (st.st_mtim.tv_sec == w->since.tv_sec && st.st_mtim.tv_nsec < w->since.tv_nsec))
            continue;
        sum += (unsigned long long)st.st_size;
    }
    closedir(d);
    return sum;
}

static void *watch_main(void *arg)
{
    watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 200 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&w->cv, &w->mu, &t);
        if (!w->stop) frt_cli_progress_update(&w->prog, written_bytes(w));
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The weights of a token-model shape (its config) or a policy shape. */
static int build(const char *shape, unsigned long long seed, frt_checkpoint **ck)
{
    if (frt_gen_policy_is_shape(shape)) {
        frt_weight_spec *w;
        int n;
        FRT_TRY_CLI(frt_gen_policy_specs(shape, &w, &n));
        int rc = frt_gen_model_build_specs(w, n, seed, ck);
        free(w);
        return rc;
    }
    frt_model_config cfg;
    FRT_TRY_CLI(frt_gen_model_config(shape, &cfg));
    return frt_gen_model_build_config(&cfg, seed, ck);
}

static const char about[] =
    "Writes DIR/config.json, generation_config.json and bf16 random weights with Hugging Face\n"
    "names (model.safetensors, or model-0000i-of-0000n.safetensors + index when larger than\n"
    "--shard-size). The same seed gives the same bytes on any thread count. The weights have\n"
    "no tokenizer: run them with frt generate --ids. The policy shapes pi0, pi05 (and the small\n"
    "pi0-tiny, pi05-tiny, 224x224 cameras) write the\n"
    "transformers pi0 layout (config.json only; run with frt policy run, docs/policies.md).\n";

int frt_cmd_gen_model(int argc, char **argv)
{
    const char *shape = NULL, *out = NULL;
    unsigned long long seed = 0, shard = FRT_GEN_MODEL_SHARD_BYTES;
    int threads = 0, no_fsync = 0, list = 0, quiet = 0;
    char shapes[384] = "";
    for (const char *const *sh = frt_gen_model_shapes(); *sh; sh++)
        snprintf(shapes + strlen(shapes), sizeof shapes - strlen(shapes), "%s%s", shapes[0] ? ", " : "one of ", *sh);
    snprintf(shapes + strlen(shapes), sizeof shapes - strlen(shapes), ", pi0, pi05, pi0-tiny, pi05-tiny (policies)");
    frt_arg opts[] = {
        FRT_OPT(0, "shape", FRT_ARG_STR, &shape, "NAME", shapes, .dflt = ""),
        FRT_OPT(0, "out", FRT_ARG_STR, &out, "DIR", "output directory (created)", .dflt = ""),
        FRT_OPT(0, "seed", FRT_ARG_U64, &seed, "S", "64-bit seed"),
        FRT_OPT(0, "threads", FRT_ARG_INT, &threads, "N", "OpenMP threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_OPT(0, "shard-size", FRT_ARG_SIZE, &shard, NULL, "bytes per file: 123, 500MB, 5GB, 2GiB; 0 = one file",
                .dflt = "5GB"),
        FRT_OPT(0, "no-fsync", FRT_ARG_FLAG, &no_fsync, NULL,
                "do not wait for the disk (files are still renamed into place atomically)"),
        FRT_OPT(0, "list", FRT_ARG_FLAG, &list, NULL,
                "print the shapes with their parameter counts and exit (alone: no other option)"),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &quiet, NULL, "print only the final line (no progress)"),
    };
    frt_cmd_spec spec = {"gen-model", "--shape NAME --out DIR [options] | --list", about, opts,
                         (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (list) {
        for (int i = 0; i < spec.n_args; i++)
            if (opts[i].given && strcmp(opts[i].long_name, "list"))
                return frt_args_error(&spec, "--%s: --list only prints the shapes (nothing is generated)",
                                      opts[i].long_name);
        return list_shapes();
    }
    if (!shape || !out) return frt_args_error(&spec, "%s is required", !shape ? "--shape NAME" : "--out DIR");
    const int flags = no_fsync ? FRT_CKPT_WRITE_NO_FSYNC : 0;
    if (threads > 0) omp_set_num_threads(threads);

    double t0 = frt_cli_now_s();
    if (!quiet) {
        printf("gen-model: %s, seed %llu, %d threads: generating bf16 weights...\n", shape, seed,
               omp_get_max_threads());
        fflush(stdout);
    }
    frt_checkpoint *ck;
    int rc = build(shape, seed, &ck);
    if (rc < 0) return frt_cli_fail("gen-model", rc);
    double t1 = frt_cli_now_s();
    unsigned long long total = (unsigned long long)frt_checkpoint_bytes(ck);
    double gb = (double)total / 1e9;
    if (!quiet) {
        printf("gen-model: %d tensors, %llu parameters, %.3f GB in %.2f s\n", frt_checkpoint_count(ck),
               (unsigned long long)frt_checkpoint_numel(ck), gb, t1 - t0);
        printf("gen-model: writing %s ...\n", out);
        fflush(stdout);
    }
    rc = frt_mkdir_p(out);
    watch w = {.dir = out, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    int watching = 0;
    if (rc == 0 && !quiet) {
        clock_gettime(CLOCK_REALTIME, &w.since);
        w.since.tv_sec -= 1; /* file times can lag the clock by a tick */
        frt_cli_progress_begin(&w.prog, "gen-model: writing", NULL, total, 0);
        watching = pthread_create(&th, NULL, watch_main, &w) == 0;
    }
    if (rc == 0) rc = frt_checkpoint_write(ck, out, shard, flags);
    if (watching) {
        pthread_mutex_lock(&w.mu);
        w.stop = 1;
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.mu);
        pthread_join(th, NULL);
        if (rc == 0) frt_cli_progress_end(&w.prog, written_bytes(&w));
    }
    if (rc == 0)
        rc = frt_gen_policy_is_shape(shape) ? frt_gen_policy_write_config(shape, out)
                                            : frt_gen_model_write_configs(shape, out);
    frt_checkpoint_close(ck);
    if (rc < 0) return frt_cli_fail("gen-model", rc);
    double t2 = frt_cli_now_s();
    if (!quiet)
        printf("gen-model: wrote %.3f GB in %.2f s (%.2f GB/s%s)\n", gb, t2 - t1, t2 > t1 ? gb / (t2 - t1) : 0.0,
               flags & FRT_CKPT_WRITE_NO_FSYNC ? ", not synced" : ", fsync included");
    printf("gen-model: done: %s (%s) in %.2f s total\n", out, shape, t2 - t0);
    return 0;
}
