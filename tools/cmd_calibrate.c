/* tools/cmd_calibrate.c - frt calibrate: the static per-head scales of an
 * FP8 KV cache from a calibration text (frt_model_kv_calibrate,
 * frt/kv_scales.h, docs/fp8.md). */
#include "args.h"
#include "cli.h"

#include "frt/kv_scales.h"
#include "frt/model.h"
#include "frt/safetensors.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char about[] =
    "Runs the calibration text through the model with its KV cache in the backend's precision and\n"
    "writes, per KV head of every attention layer, the scale max|x| / 448 that maps the largest K or V\n"
    "value onto the largest FP8 E4M3 value (a safetensors file). Load it with\n"
    "'frt generate --kv-dtype fp8 --kv-scales FILE' (frt_model_params.kv_scales); docs/fp8.md.\n";

/* Prints the range of the scales in the written file. */
static int summarize(const char *path, int n_ids)
{
    frt_safetensors *st = NULL;
    int rc = frt_safetensors_open(path, &st);
    if (rc < 0) return rc;
    float lo = FLT_MAX, hi = 0;
    int heads = 0;
    for (int i = 0; i < frt_safetensors_count(st); i++) {
        const frt_tensor *t = frt_safetensors_at(st, i);
        for (int64_t j = 0; j < frt_tensor_numel(t); j++) {
            float v;
            memcpy(&v, (const char *)t->data + j * (int64_t)sizeof v, sizeof v);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            heads++;
        }
    }
    printf("wrote %s: %d KV entries, %d head scales in [%.6g, %.6g] from %d tokens\n", path,
           frt_safetensors_count(st), heads, (double)lo, (double)hi, n_ids);
    frt_safetensors_close(st);
    return 0;
}

int frt_cmd_calibrate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = NULL, *ids_arg = NULL, *out = NULL;
    int quiet = 0, backend = FRT_ARG_BACKEND_AUTO;
    frt_model_params mp = frt_model_default_params();
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &model_dir, "DIR", "checkpoint directory", .dflt = "(required)"),
        FRT_OPT('p', "prompt", FRT_ARG_STR, &prompt, "TEXT", "the calibration text (needs tokenizer.json)",
                .dflt = ""),
        FRT_OPT(0, "ids", FRT_ARG_STR, &ids_arg, "ID,ID,..", "the calibration text as token ids", .dflt = ""),
        FRT_OPT('o', "out", FRT_ARG_STR, &out, "FILE", "the scales file to write", .dflt = "(required)"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the model runs"),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &mp.max_seq, "N", "state capacity in tokens; 0 = min(config, 8192)",
                .min = 0, .max = 1 << 24),
        FRT_OPT(0, "threads", FRT_ARG_INT, &mp.n_threads, "N", "CPU threads; 0 = all cores", .min = 0, .max = 4096),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &quiet, NULL, "no loading lines on stderr"),
    };
    frt_cmd_spec spec = {"calibrate", "-m MODEL_DIR (-p TEXT | --ids ID,ID,..) -o FILE [options]", about, opts,
                         (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!model_dir) return frt_args_error(&spec, "no model: give -m MODEL_DIR");
    if (!out) return frt_args_error(&spec, "no output: give -o FILE");
    if (!!prompt == !!ids_arg)
        return frt_args_error(&spec, prompt ? "give the text once: -p TEXT or --ids, not both"
                                            : "no calibration text: give -p TEXT or --ids ID,ID,..");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (ids_arg && frt_args_ids(&spec, ids_arg, &ids, &n_ids)) return 2;
    mp.backend = (frt_backend)frt_args_backend(backend);
    frt_model *m = NULL;
    int rc = frt_cli_load_model("calibrate", model_dir, &mp, quiet, &m);
    if (rc < 0) {
        free(ids);
        return frt_cli_fail("calibrate", rc);
    }
    frt_model_info info;
    frt_model_info_get(m, &info);
    if (ids && frt_args_check_ids(&spec, ids, n_ids, info.vocab_size)) rc = FRT_ARGS_USAGE;
    if (rc == 0 && !ids && !info.has_tokenizer)
        rc = frt_args_error(&spec, "%s has no tokenizer.json: give the text as token ids with --ids", model_dir);
    if (rc == 0 && !ids) rc = frt_model_tokenize(m, prompt, strlen(prompt), &ids, &n_ids);
    if (rc == 0 && n_ids == 0) rc = frt_args_error(&spec, "the calibration text has no tokens");
    if (rc == 0) rc = frt_model_kv_calibrate(m, ids, (int)n_ids, out);
    if (rc == 0) rc = summarize(out, (int)n_ids);
    free(ids);
    frt_model_free(m);
    if (rc == FRT_ARGS_USAGE) return 2;
    return rc < 0 ? frt_cli_fail("calibrate", rc) : 0;
}
