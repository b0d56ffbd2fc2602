/*
 * fuzz_policy_msgpack.c - libFuzzer target: a websocket message of the
 * policy server through frt_pobs_parse_msgpack (serving/policy_obs.h,
 * openpi's msgpack_numpy encoding). A parse either fails with a status and
 * an empty observation, or every value it holds is consistent: an array's
 * element count is the product of its shape, and every element converts.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_policy_msgpack CORPUS;
 * CI replays fuzz/corpus/policy_msgpack/ through replay_policy_msgpack.
 */
#include "serving/policy_obs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Shared by both observation fuzz targets (the same file is included). */
void frt_fuzz_pobs_check(const frt_pobs *o, int rc);
void frt_fuzz_pobs_check(const frt_pobs *o, int rc)
{
    if (rc != 0) {
        if (rc > 0 || o->n || o->v) abort();
        return;
    }
    for (size_t i = 0; i < o->n; i++) {
        const frt_pobs_value *v = &o->v[i];
        if (!v->key || !*v->key || strlen(v->key) > FRT_POBS_MAX_KEY) abort();
        if (frt_pobs_get(o, v->key) != v) abort(); /* keys are unique */
        if (v->kind == FRT_POBS_STRING && (!v->data || ((const char *)v->data)[v->n] != '\0')) abort();
        if (v->kind != FRT_POBS_ARRAY) continue;
        size_t n = 1;
        for (int d = 0; d < v->ndim; d++) n *= (size_t)v->shape[d];
        if (n != v->n || v->ndim > FRT_POBS_MAX_NDIM) abort();
        double *x = malloc((n ? n : 1) * sizeof *x);
        if (x && frt_pobs_to_f64(v, x) != 0) abort();
        free(x);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_pobs o = {0};
    int rc = frt_pobs_parse_msgpack(data, size, &o);
    frt_fuzz_pobs_check(&o, rc);
    frt_pobs_free(&o);
    return 0;
}
