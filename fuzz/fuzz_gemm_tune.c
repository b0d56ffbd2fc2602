/*
 * fuzz_gemm_tune.c - libFuzzer target: the GEMM autotune file
 * (src/kernels/gemm_tune.h) through frt_gemm_tune_parse. A parse either
 * fails with a status (leaving nothing to free) or yields a table within
 * the documented ranges that formats and parses back to itself.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_gemm_tune CORPUS;
 * CI replays fuzz/corpus/gemm_tune/ through replay_gemm_tune.
 */
#include "kernels/gemm_tune.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ranges(const frt_gemm_tune *t)
{
    if (!t->device[0] || t->candidates < 1 || t->candidates > FRT_GEMM_TUNE_MAX_CANDIDATES || t->n < 0 ||
        t->n > FRT_GEMM_TUNE_MAX || t->cublaslt_version < 0 || t->workspace_bytes < 0)
        abort();
    for (int i = 0; i < t->n; i++) {
        const frt_gemm_tune_entry *e = &t->e[i];
        if (e->n < 1 || e->in_dim < 1 || e->out_dim < 1 || e->index < 0 || e->index >= t->candidates ||
            (e->out_bf16 | e->accumulate) > 1 || e->out_bf16 < 0 || e->accumulate < 0)
            abort();
        for (int k = 0; k < 7; k++)
            if (e->algo[k] < 0) abort();
        if (frt_gemm_tune_find(t, e->n, e->in_dim, e->out_dim, e->out_bf16, e->accumulate) != e) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_gemm_tune t, u;
    if (frt_gemm_tune_parse((const char *)data, size, "fuzz", &t) != 0) {
        if (t.e || t.n) abort();
        return 0;
    }
    check_ranges(&t);
    char *text = NULL;
    size_t len = 0;
    if (frt_gemm_tune_format(&t, &text, &len) != 0) abort();
    if (frt_gemm_tune_parse(text, len, "fuzz again", &u) != 0) abort();
    if (strcmp(t.device, u.device) || t.cublaslt_version != u.cublaslt_version ||
        t.workspace_bytes != u.workspace_bytes || t.candidates != u.candidates || t.n != u.n ||
        (t.n && memcmp(t.e, u.e, (size_t)t.n * sizeof *t.e)))
        abort();
    free(text);
    frt_gemm_tune_free(&t);
    frt_gemm_tune_free(&u);
    return 0;
}
