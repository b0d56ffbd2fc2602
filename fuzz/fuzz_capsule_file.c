/*
 * fuzz_capsule_file.c - libFuzzer target: a capsule file through
 * frt_capsule_load and frt_capsule_restore (frt/capsule.h) against the
 * "tiny" random-weight model (tools/gen_model.h, seed 1, built in memory
 * once, cpu, prefill chunk 64, max_seq 128). The live state holds a
 * 64-token prefill. Whatever the bytes: no crash, and a file that is
 * refused (on load or on restore) leaves the live state as it was: position,
 * pending token and the next greedy token are those of the state before.
 * A file that restores must put the live state at its boundary (position as
 * its info says).
 *
 * FRT_FUZZ_CAPSULE_SEED=PATH: write a valid capsule of that live state to
 * PATH and exit (how fuzz/corpus/capsule_file/valid_* were made).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_capsule_file CORPUS;
 * CI replays fuzz/corpus/capsule_file/ through replay_capsule_file.
 */
#include "frt/capsule.h"
#include "frt/debug.h"
#include "frt/model.h"
#include "gen_model.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { C = 64, N = 64 };

static frt_model *g_m;
static char g_path[64];
static int32_t g_next; /* the greedy token after the 64-token prefill */

static void die(const char *what)
{
    fprintf(stderr, "fuzz_capsule_file: %s: %s\n", what, frt_last_error());
    abort();
}

/* Resets the live state to the 64-token prefill. */
static void prefill(void)
{
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 37 + 11) % 200);
    if (frt_model_reset(g_m) || frt_model_prefill(g_m, ids, N)) die("prefill");
}

static void init(void)
{
    static frt_model_config cfg;
    frt_checkpoint *ck = NULL; /* kept open: the model borrows it */
    if (frt_gen_model_build("tiny", 1, &cfg, &ck)) die("gen model");
    frt_model_params p = frt_model_default_params();
    p.prefill_chunk = C;
    p.max_seq = 128;
    p.n_threads = 1;
    if (frt_model_load_checkpoint(ck, &cfg, NULL, &p, &g_m)) die("load");
    prefill();
    if (frt_model_sample(g_m, NULL, &g_next)) die("sample");
    prefill();
    snprintf(g_path, sizeof g_path, "/tmp/fuzz_capsule_%ld.frtc", (long)getpid());
    const char *seed = getenv("FRT_FUZZ_CAPSULE_SEED");
    if (seed) {
        frt_capsule *c = NULL;
        if (frt_capsule_snapshot(g_m, FRT_TIER_DISK, seed, NULL, 0, &c)) die("snapshot");
        frt_capsule_free(c);
        exit(0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_m) init();
    FILE *f = fopen(g_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    int pos = frt_model_position(g_m), pending = frt_model_pending(g_m);
    frt_capsule *c = NULL;
    int rc = frt_capsule_load(g_m, g_path, &c);
    if (rc == 0) {
        frt_capsule_info info;
        if (frt_capsule_info_get(c, &info)) abort();
        rc = frt_capsule_restore(g_m, c);
        if (rc == 0 && frt_model_position(g_m) != info.position) abort(); /* restored: at its boundary */
        frt_capsule_free(c);
    }
    if (rc != 0) {
        /* refused: the live state is the one before */
        if (frt_model_position(g_m) != pos || frt_model_pending(g_m) != pending) abort();
        int32_t t;
        if (frt_model_sample(g_m, NULL, &t) || t != g_next) abort();
    }
    prefill();
    unlink(g_path);
    return 0;
}
