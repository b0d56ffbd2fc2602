/*
 * policy_test_util.h - shared set-up of the policy input tests
 * (test_policy_*.c): a temporary directory filled at test time by
 * scripts/ref/policy_io_goldens.py (Pillow + numpy goldens, run with
 * /usr/bin/python3) and, on request, a tiny SentencePiece model trained
 * there by spm_train on the script's generated corpus, with PaliGemma's
 * special ids (pad 0, eos 1, bos 2, unk 3) and Gemma's trainer settings
 * (identity normalisation, byte fallback, split digits, no dummy prefix).
 * Nothing third-party is committed.
 */
#ifndef FRT_POLICY_TEST_UTIL_H
#define FRT_POLICY_TEST_UTIL_H

#include "frt/fs.h"
#include "frt/policy_io.h"
#include "frt_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char ptu_dir[] = "/tmp/frt_policy_io_XXXXXX";

static void ptu_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ptu_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", ptu_dir);
}

/* A path inside the temporary directory (static buffer, one at a time). */
static inline const char *ptu_path(const char *name)
{
    static char buf[4][512];
    static int at;
    at = (at + 1) % 4;
    snprintf(buf[at], sizeof buf[at], "%s/%s", ptu_dir, name);
    return buf[at];
}

static inline void ptu_run(const char *cmd)
{
    if (system(cmd) != 0) {
        fprintf(stderr, "failed: %s\n", cmd);
        ptu_cleanup();
        exit(1);
    }
}

/* Makes the goldens; returns the manifest (json_decref it). */
static inline json_t *ptu_setup(int with_spm)
{
    if (access("/usr/bin/python3", X_OK) != 0 || system("/usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null") != 0)
        TEST_SKIP("/usr/bin/python3 with Pillow and numpy is missing (scripts/install-deps.sh installs them)");
    if (with_spm && system("command -v spm_train >/dev/null && command -v spm_encode >/dev/null") != 0)
        TEST_SKIP("spm_train / spm_encode missing (Debian package sentencepiece, scripts/install-deps.sh)");
    if (!mkdtemp(ptu_dir)) TEST_SKIP("cannot create a temporary directory");
    atexit(ptu_cleanup);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/ref/policy_io_goldens.py %s", FRT_SOURCE_DIR, ptu_dir);
    ptu_run(cmd);
    if (with_spm) {
        snprintf(cmd, sizeof cmd,
                 "spm_train --input=%s/corpus.txt --model_prefix=%s/spm --vocab_size=1000 --hard_vocab_limit=false "
                 "--model_type=unigram "
                 "--pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 --byte_fallback=true --split_digits=true "
                 "--normalization_rule_name=identity --add_dummy_prefix=false --remove_extra_whitespaces=false "
                 "--allow_whitespace_only_pieces=true --character_coverage=1.0 --minloglevel=2 >/dev/null 2>&1",
                 ptu_dir, ptu_dir);
        ptu_run(cmd);
    }
    json_error_t err;
    json_t *m = json_load_file(ptu_path("manifest.json"), 0, &err);
    if (!m) {
        fprintf(stderr, "manifest.json: %s\n", err.text);
        exit(1);
    }
    return m;
}

/* The whole file NAME in the temporary directory (malloc'd; exits on error). */
static inline char *ptu_read(const char *name, size_t *len)
{
    char *data = NULL;
    if (frt_file_read_all(ptu_path(name), (size_t)1 << 30, &data, len) != 0) {
        fprintf(stderr, "%s: %s\n", name, frt_last_error());
        exit(1);
    }
    return data;
}

/* A JSON array of numbers as floats (malloc'd). */
static inline float *ptu_floats(const json_t *a, size_t *n)
{
    *n = json_array_size(a);
    float *v = xmalloc(*n * sizeof *v);
    for (size_t i = 0; i < *n; i++) v[i] = (float)json_number_value(json_array_get(a, i));
    return v;
}

static inline double *ptu_doubles(const json_t *a, size_t *n)
{
    *n = json_array_size(a);
    double *v = xmalloc(*n * sizeof *v);
    for (size_t i = 0; i < *n; i++) v[i] = json_number_value(json_array_get(a, i));
    return v;
}

#endif
