/*
 * fuzz_safetensors_index.c - libFuzzer target: model.safetensors.index.json
 * through frt_checkpoint_open (weights/checkpoint.h). A per-process
 * directory holds a real three-shard checkpoint (three small tensors, written
 * once by frt_checkpoint_write); the input replaces its index. Whatever the
 * bytes: no crash, and an index that is accepted yields a checkpoint whose
 * every tensor is found by its name and lies in one of the shards.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_safetensors_index CORPUS;
 * CI replays fuzz/corpus/safetensors_index/ through replay_safetensors_index.
 */
#include "frt/status.h"
#include "frt/checkpoint.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64], g_index[128];

/* Removes the directory at exit (replay runs; libFuzzer exits through exit too). */
static void cleanup(void)
{
    char p[160];
    unlink(g_index);
    for (int i = 1; i <= 3; i++) {
        snprintf(p, sizeof p, "%s/model-%05d-of-00003.safetensors", g_dir, i);
        unlink(p);
    }
    rmdir(g_dir);
}

static void init(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_stindex_%ld", (long)getpid());
    snprintf(g_index, sizeof g_index, "%s/model.safetensors.index.json", g_dir);
    if (mkdir(g_dir, 0700) && access(g_dir, W_OK)) abort();
    frt_checkpoint *ck = NULL;
    const char *names[3] = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "model.norm.weight"};
    int64_t shape[2] = {16, 16};
    if (frt_checkpoint_create(&ck)) abort();
    for (int i = 0; i < 3; i++) {
        uint16_t *w = calloc(256, sizeof *w); /* owned by ck */
        if (!w || frt_checkpoint_add(ck, names[i], FRT_DT_BF16, 2, shape, w)) abort();
    }
    /* 600-byte shards: the three tensors land in more than one file */
    if (frt_checkpoint_write(ck, g_dir, 600, 0)) {
        fprintf(stderr, "fuzz_safetensors_index: %s\n", frt_last_error());
        abort();
    }
    frt_checkpoint_close(ck);
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dir[0]) init();
    FILE *f = fopen(g_index, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    frt_checkpoint *ck = NULL;
    if (frt_checkpoint_open(g_dir, &ck) == 0) {
        int n = frt_checkpoint_count(ck);
        /* {"weight_map": {}} is accepted as a checkpoint of no tensors and no
         * files (frt_model_load then names the first missing tensor) */
        int files = frt_checkpoint_file_count(ck);
        if (n < 0 || files < 0 || files > 3 || (n == 0) != (files == 0)) abort();
        for (int i = 0; i < n; i++) {
            const frt_tensor *t = frt_checkpoint_at(ck, i);
            if (!t || frt_checkpoint_find(ck, t->name) != t || !strstr(t->file, g_dir)) abort();
        }
        frt_checkpoint_close(ck);
    }
    return 0;
}
