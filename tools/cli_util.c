/* tools/cli_util.c - helpers every frt command shares (cli.h): the shipped
 * demo paths, model loading with its log lines, progress lines. */
#include "cli.h"

#include "frt/exec.h"
#include "frt/status.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double frt_cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int frt_cli_fail(const char *cmd, int status)
{
    fprintf(stderr, "frt %s: %s (%s)\n", cmd, frt_last_error()[0] ? frt_last_error() : frt_status_str(status),
            frt_status_name(status));
    return 1;
}

/* A directory, and for a model one with config.json. */
static int usable(const char *path, int model)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    if (!model) return 1;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%.*s/config.json", PATH_MAX - 1, path);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int frt_cli_find_shipped(const char *rel, char *out, size_t n)
{
    const int model = !strcmp(rel, "models/frt-demo");
    const char *env = model ? getenv("FRT_DEMO_MODEL") : NULL;
    if (env && *env && usable(env, 1)) {
        snprintf(out, n, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        const char *d = dirname(exe);
        static const char *const up[] = {"", "/..", "/../..", "/../share/frt"};
        for (size_t i = 0; i < sizeof up / sizeof up[0]; i++) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%.*s%s/%s", PATH_MAX - 64, d, up[i], rel);
            if (!usable(p, model)) continue;
            char *real = realpath(p, NULL);
            snprintf(out, n, "%s", real ? real : p);
            free(real);
            return 0;
        }
    }
    if (usable(rel, model)) {
        snprintf(out, n, "%s", rel);
        return 0;
    }
    return -1;
}

/* The library's load progress (frt_progress_fn) on frt_cli_progress lines:
 * one per phase, bytes for the weights, variants for graph capture. */
typedef struct load_progress {
    frt_cli_progress p;
    char phase[16];
    int quiet, open;
    uint64_t done;
} load_progress;

static void on_load_progress(void *user, const char *phase, uint64_t done, uint64_t total)
{
    load_progress *lp = user;
    if (!lp->open || strcmp(lp->phase, phase)) {
        if (lp->open) frt_cli_progress_end(&lp->p, lp->p.total);
        snprintf(lp->phase, sizeof lp->phase, "%s", phase);
        const int weights = !strcmp(phase, "weights");
        frt_cli_progress_begin(&lp->p, weights ? "loading weights" : "capturing graphs", weights ? NULL : "graphs",
                               total, lp->quiet);
        lp->open = 1;
    }
    lp->done = done;
    if (done >= total) {
        frt_cli_progress_end(&lp->p, done);
        lp->open = 0;
    } else {
        frt_cli_progress_update(&lp->p, done);
    }
}

int frt_cli_load_model(const char *cmd, const char *dir, const frt_model_params *mp, int quiet, frt_model **out)
{
    if (!quiet) fprintf(stderr, "frt %s: loading %s (%s backend)\n", cmd, dir, frt_backend_name(mp->backend));
    double t0 = frt_cli_now_s();
    load_progress lp;
    memset(&lp, 0, sizeof lp);
    lp.quiet = quiet;
    frt_model_params p = *mp;
    if (!quiet) {
        p.progress = on_load_progress;
        p.progress_user = &lp;
    }
    int rc = frt_model_load(dir, &p, out);
    if (lp.open) frt_cli_progress_end(&lp.p, lp.done);
    if (rc == 0 && !quiet) {
        frt_model_info info;
        frt_model_info_get(*out, &info);
        fprintf(stderr, "frt %s: loaded %.3f GB of weights in %.2f s\n", cmd, (double)info.weight_bytes / 1e9,
                frt_cli_now_s() - t0);
    }
    return rc;
}

/* ---- progress -------------------------------------------------------------- */

void frt_cli_progress_begin(frt_cli_progress *p, const char *label, const char *unit, unsigned long long total,
                            int quiet)
{
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = frt_cli_now_s();
}

static void progress_print(frt_cli_progress *p, unsigned long long done, int last)
{
    double pct = p->total ? 100.0 * (double)done / (double)p->total : 100.0;
    if (pct > 100.0) pct = 100.0;
    char what[96];
    if (p->unit[0]) {
        snprintf(what, sizeof what, "%llu / %llu %s", done, p->total, p->unit);
    } else {
        const int gb = p->total >= 1000000000ull;
        const double unit = gb ? 1e9 : 1e6;
        snprintf(what, sizeof what, "%.*f / %.*f %s", gb ? 2 : 1, (double)done / unit, gb ? 2 : 1,
                 (double)p->total / unit, gb ? "GB" : "MB");
    }
    fprintf(stderr, "%s%s: %s (%.0f%%), %.1f s%s%s", p->tty ? "\r" : "", p->label, what, pct,
            frt_cli_now_s() - p->t0, p->tty ? "\033[K" : "", p->tty && !last ? "" : "\n");
    fflush(stderr);
}

void frt_cli_progress_update(frt_cli_progress *p, unsigned long long done)
{
    if (p->quiet) return;
    if (done > p->total) done = p->total; /* file headers: the total counts tensor bytes */
    if (p->tty) {
        progress_print(p, done, 0);
        return;
    }
    int quarter = p->total ? (int)(4 * (done > p->total ? p->total : done) / p->total) : 4;
    if (quarter > p->last_quarter && quarter < 4) { /* 25%, 50%, 75%; the end prints 100% */
        p->last_quarter = quarter;
        progress_print(p, done, 0);
    }
}

void frt_cli_progress_end(frt_cli_progress *p, unsigned long long done)
{
    if (done > p->total) p->total = done;
    if (!p->quiet) progress_print(p, done, 1);
}
