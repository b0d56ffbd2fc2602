/*
 * fuzz_cartridge_pt.c - libFuzzer target: a PyTorch .pt cartridge through
 * frt_cartridge_read_pt_memory (frt/cartridge.h: libzip, then the
 * restricted pickle reader of weights/pickle.h), and any input that is not
 * a zip (no "PK" magic) straight through pk_parse as a data.pkl, so the
 * pickle machine is reached without the zip layer. Whatever the bytes: no
 * crash, no read outside the input, a refusal is a status with a message;
 * an accepted cartridge has a consistent shape whose every payload byte is
 * read and whose layer views agree with its info.
 *
 * Seeds (fuzz/corpus/cartridge_pt/): the files of
 * scripts/ref/make_pt_like.py (both cartridge shapes, the fault files) and
 * their data.pkl alone.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_cartridge_pt CORPUS;
 * CI replays fuzz/corpus/cartridge_pt/ through replay_cartridge_pt.
 */
#include "frt/cartridge.h"
#include "frt/status.h"
#include "weights/pickle.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned g_sink; /* every payload byte is read into it */

static void walk(const frt_cartridge *c)
{
    frt_cartridge_info in;
    if (frt_cartridge_info_get(c, &in) != 0 || in.n_layers < 1 || in.tokens < 1 || in.frozen_tokens < 0 ||
        in.frozen_tokens > in.tokens)
        abort();
    unsigned sink = 0;
    for (int l = 0; l < in.n_layers; l++) {
        frt_tensor k, v;
        if (frt_cartridge_layer(c, l, &k, &v) != 0) abort();
        if (k.nbytes != (size_t)in.tokens * (size_t)in.n_kv_heads * (size_t)in.head_dim * frt_dtype_size(in.dtype))
            abort();
        for (size_t i = 0; i < k.nbytes; i++) sink += ((const unsigned char *)k.data)[i] + ((const unsigned char *)v.data)[i];
    }
    g_sink = sink;
    frt_tensor k, v;
    if (frt_cartridge_layer(c, in.n_layers, &k, &v) != FRT_ERR_OUT_OF_RANGE) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        frt_cartridge *c = NULL;
        int rc = frt_cartridge_read_pt_memory(data, size, "fuzz.pt", &c);
        if (rc == 0) walk(c);
        else if (c || !frt_last_error()[0]) abort();
        frt_cartridge_free(c);
        return 0;
    }
    pk_doc *d = NULL;
    int rc = pk_parse(data, size, "fuzz.pkl", &d);
    if (rc == 0) {
        if (!pk_root(d)) abort();
        for (size_t i = 0; i < pk_storage_count(d); i++)
            if (pk_storage_at(d, i)->type != PK_STORAGE) abort();
        (void)pk_dict_get(pk_root(d), "trainable_keys");
    } else if (d) {
        abort();
    }
    pk_free(d);
    return 0;
}
