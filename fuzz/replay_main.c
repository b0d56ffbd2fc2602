/*
 * replay_main.c - a plain driver for the libFuzzer targets: runs
 * LLVMFuzzerTestOneInput once on every file named on the command line or
 * found (sorted by name) in a directory named there. Built with the normal
 * compiler for every fuzz/fuzz_NAME.c as replay_NAME; CI replays each seed
 * corpus fuzz/corpus/NAME/ so that a crash or sanitizer report on a seed
 * fails the suite without libFuzzer.
 * Exit status: 0 when at least one input ran (a crash aborts), 1 otherwise.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1); /* exact size: ASan sees reads past the end */
    size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (!buf || got != (size_t)(n > 0 ? n : 0)) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    int ran = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
            failed++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) == 0) ran++; else failed++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            failed++;
            continue;
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn) break;
            names = nn;
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp);
        for (size_t k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]);
            if (run_file(path) == 0) ran++; else failed++;
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %d inputs (%d unreadable)\n", ran, failed);
    return ran > 0 && failed == 0 ? 0 : 1;
}
