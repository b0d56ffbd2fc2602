/*
 * bench_cartridge.c - frt bench cartridge: time to first token with a
 * cartridge against a cold prefill of the same document (docs/PERF.md,
 * "Cartridges"), for a random-weight shape (tools/gen_model.h) and
 * documents of several lengths P, each followed by a prompt of S tokens:
 *
 *   cold     reset, prefill P + S, sample;
 *   device   the document's KV resident in device memory
 *            (frt_cartridge_upload to FRT_SPACE_DEVICE, done once):
 *            frt_model_inject_kv_resident (device -> device), prefill S,
 *            sample;
 *   host     the same resident in pinned host memory: promote it
 *            (frt_kv_resident_move to the device: the PCIe transfer),
 *            inject, prefill S, sample; demoted again between samples
 *            (not timed);
 *   injected the pinned host resident injected as it is
 *            (frt_model_inject_kv_resident from host memory: on a model
 *            with pipelined restores the rows land beside the prefill of
 *            S, docs/model.md "The pipelined restore"), prefill S, sample.
 *
 * The cartridge is the KV of frt's own prefill of the document
 * (frt_cartridge_from_model), so all three paths compute the same first
 * token (same_first_token says whether they did). Each figure is the
 * median of --repeats samples after one warm-up; the injection and the
 * promotion are shown next to their floors: bytes read + written at the
 * measured device copy rate, and bytes at the measured pinned host ->
 * device rate (the PCIe floor), from bench_floors.c.
 */
#include "args.h"
#include "bench_model.h"
#include "bench_run.h"
#include "cli.h"
#include "gen_model.h"

#include "frt/cartridge.h"
#include "frt/checkpoint.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BC_MAX_DOCS 16
#define BC_MAX_REPEATS 1000

typedef struct bc_opts {
    const char *shape, *json_path, *docs_list;
    int backend, suffix, repeats, chunk, threads;
    unsigned long long seed;
} bc_opts;

/* One path's samples (ms): the whole TTFT and its first part (injection or promotion). */
typedef struct bc_samples {
    double ttft[BC_MAX_REPEATS], part[BC_MAX_REPEATS];
    int n;
    int32_t first;
} bc_samples;

static void random_ids(int32_t *ids, int n, int vocab, unsigned long long seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        ids[i] = (int32_t)(((x * 0x2545F4914F6CDD1Dull) >> 33) % (uint64_t)vocab);
    }
}

/* The prompt after the cartridge (or after nothing: cold), sampled. */
static int finish_ttft(frt_model *m, const int32_t *ids, int n, int32_t *tok)
{
    FRT_TRY(frt_model_prefill(m, ids, n));
    return frt_model_sample(m, NULL, tok);
}

static int cold_once(frt_model *m, const int32_t *ids, int n, double *ttft, int32_t *tok)
{
    double t0 = bm_now_s();
    int rc = frt_model_reset(m);
    if (!rc) rc = finish_ttft(m, ids, n, tok);
    *ttft = (bm_now_s() - t0) * 1e3;
    return rc;
}

/* host: promote (timed part) then inject; device: inject (timed part). */
static int resident_once(frt_model *m, frt_kv_resident *r, int promote, const int32_t *ids, int n, double *ttft,
                         double *part, int32_t *tok)
{
    double t0 = bm_now_s();
    int rc = promote ? frt_kv_resident_move(m, r, FRT_SPACE_DEVICE) : frt_model_inject_kv_resident(m, r);
    double t1 = bm_now_s();
    if (!rc && promote) rc = frt_model_inject_kv_resident(m, r);
    if (!rc) rc = finish_ttft(m, ids, n, tok);
    *ttft = (bm_now_s() - t0) * 1e3;
    *part = (t1 - t0) * 1e3;
    if (!rc && promote) rc = frt_kv_resident_move(m, r, FRT_SPACE_PINNED_HOST); /* for the next sample */
    return rc;
}

/* R samples after one warm-up of one path: kind 0 cold, 1 device, 2 host
 * (promoted first), 3 host (injected as it is). */
static int sample_path(frt_model *m, int kind, frt_kv_resident *r, const int32_t *doc, int P, int S, int R,
                       bc_samples *out)
{
    out->n = 0;
    for (int i = -1; i < R; i++) {
        double t = 0, part = 0;
        int rc = kind == 0 ? cold_once(m, doc, P + S, &t, &out->first)
                           : resident_once(m, r, kind == 2, doc + P, S, &t, &part, &out->first);
        if (rc) return rc;
        if (kind == 3) part = 0; /* the injection returns before its copies land: no part to show */
        if (i < 0) continue;
        out->ttft[out->n] = t;
        out->part[out->n++] = part;
    }
    return 0;
}

static json_t *path_json(const bc_samples *s, const char *part_name, double floor_ms)
{
    json_t *o = json_pack("{s:f, s:f}", "ttft_ms_p50", bm_pct(s->ttft, s->n, .5), "ttft_ms_p90",
                          bm_pct(s->ttft, s->n, .9));
    if (part_name) {
        double p = bm_pct(s->part, s->n, .5);
        json_object_set_new(o, part_name, json_pack("{s:f, s:f, s:f}", "measured_ms", p, "floor_ms", floor_ms,
                                                    "fraction_of_floor", p > 0 ? floor_ms / p : 0.0));
    }
    return o;
}

/* The three paths for a document of P tokens (doc[0..P + S)). */
static int bench_doc(bm_run *run, frt_model *m, const int32_t *doc, int P, int S, int R, json_t *arr)
{
    frt_cartridge *c = NULL;
    frt_kv_resident *dev = NULL, *host = NULL;
    bc_samples *s = calloc(4, sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: samples");
    fprintf(stderr, "frt bench cartridge: P=%d: cold, device, host, host injected x%d...\n", P, R);
    int rc = sample_path(m, 0, NULL, doc, P, S, R, &s[0]);
    if (!rc) rc = frt_model_reset(m);
    if (!rc) rc = frt_model_prefill(m, doc, P);
    if (!rc) rc = frt_cartridge_from_model(m, &c);
    if (!rc) rc = frt_cartridge_upload(m, c, FRT_SPACE_DEVICE, &dev);
    if (!rc) rc = frt_cartridge_upload(m, c, FRT_SPACE_PINNED_HOST, &host);
    if (!rc) rc = sample_path(m, 1, dev, doc, P, S, R, &s[1]);
    if (!rc) rc = sample_path(m, 2, host, doc, P, S, R, &s[2]);
    if (!rc) rc = sample_path(m, 3, host, doc, P, S, R, &s[3]);
    if (!rc) {
        const double bytes = (double)frt_kv_resident_bytes(dev);
        const double cold = bm_pct(s[0].ttft, s[0].n, .5), devm = bm_pct(s[1].ttft, s[1].n, .5),
                     hostm = bm_pct(s[2].ttft, s[2].n, .5), pcie = bytes / run->fl.h2d_Bps * 1e3,
                     promote = bm_pct(s[2].part, s[2].n, .5), injm = bm_pct(s[3].ttft, s[3].n, .5);
        const int same = s[0].first == s[1].first && s[0].first == s[2].first && s[0].first == s[3].first;
        json_t *o = json_pack("{s:i, s:i, s:f}", "document_tokens", P, "prompt_tokens", S, "kv_bytes", bytes);
        json_object_set_new(o, "cold", path_json(&s[0], NULL, 0));
        json_object_set_new(o, "device_resident", path_json(&s[1], "inject", 2.0 * bytes / run->fl.d2d_rw_Bps * 1e3));
        json_object_set_new(o, "host_resident", path_json(&s[2], "promote", pcie));
        json_object_set_new(o, "host_resident_injected", path_json(&s[3], NULL, 0));
        json_object_set_new(o, "speedup_device", json_real(devm > 0 ? cold / devm : 0));
        json_object_set_new(o, "speedup_host", json_real(hostm > 0 ? cold / hostm : 0));
        json_object_set_new(o, "speedup_host_injected", json_real(injm > 0 ? cold / injm : 0));
        json_object_set_new(o, "same_first_token", json_boolean(same));
        json_array_append_new(arr, o);
        printf("%8d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %8.1fx %8.1fx %8.1fx %s\n", P, cold, devm, hostm,
               promote, pcie, injm, devm > 0 ? cold / devm : 0, hostm > 0 ? cold / hostm : 0,
               injm > 0 ? cold / injm : 0, same ? "same" : "DIFFERENT");
        fflush(stdout);
    }
    frt_kv_resident_free(dev);
    frt_kv_resident_free(host);
    frt_cartridge_free(c);
    free(s);
    return rc;
}

static int parse_opts(int argc, char **argv, bc_opts *o, int32_t **docs, size_t *n_docs)
{
    frt_arg opts[] = {
        FRT_OPT(0, "shape", FRT_ARG_STR, &o->shape, "NAME", "random-weight shape (frt gen-model --help lists them)",
                .dflt = "required"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &o->backend, NULL, "where the model runs"),
        FRT_OPT(0, "docs", FRT_ARG_STR, &o->docs_list, "P1,P2,..", "document lengths in tokens",
                .dflt = "2048,8192,16384,32768"),
        FRT_OPT(0, "suffix", FRT_ARG_INT, &o->suffix, "S", "prompt tokens after the document", .min = 1,
                .max = 1 << 20),
        FRT_OPT(0, "repeats", FRT_ARG_INT, &o->repeats, "R", "samples per figure (after one warm-up)", .min = 1,
                .max = BC_MAX_REPEATS),
        FRT_OPT(0, "chunk", FRT_ARG_INT, &o->chunk, "C", "prefill chunk (a multiple of 64; 0 = the model's default)",
                .min = 0, .max = 1 << 20),
        FRT_OPT(0, "threads", FRT_ARG_INT, &o->threads, "N", "cpu threads (0 = all)", .min = 0, .max = 1024),
        FRT_OPT(0, "seed", FRT_ARG_U64, &o->seed, "N", "weights and token ids"),
        FRT_OPT(0, "json", FRT_ARG_STR, &o->json_path, "FILE", "write the results as JSON", .dflt = "none"),
    };
    frt_cmd_spec spec = {"bench cartridge", "--shape NAME [options]",
                         "TTFT with a cartridge resident in device memory, one resident in pinned host memory\n"
                         "(promoted over PCIe) and a cold prefill of the same document, side by side, each\n"
                         "injection / promotion next to its floor; docs/PERF.md.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 1 : 2;
    if (!o->shape) return frt_args_error(&spec, "no shape: give --shape NAME (e.g. llama3.2-1b)");
    if (o->chunk % 64) return frt_args_error(&spec, "--chunk: '%d' is not a multiple of 64", o->chunk);
    const char *bad = NULL;
    if (frt_parse_i32_list(o->docs_list, 1, 1 << 24, docs, n_docs, &bad) || *n_docs > BC_MAX_DOCS)
        return frt_args_error(&spec, "--docs: '%s' is not a list of 1 to %d positive token counts", o->docs_list,
                              BC_MAX_DOCS);
    return 0;
}

static int run_docs(bm_run *run, const bc_opts *o, const int32_t *docs, size_t n_docs, json_t *arr)
{
    int maxP = 0;
    for (size_t i = 0; i < n_docs; i++) maxP = docs[i] > maxP ? docs[i] : maxP;
    frt_model_params p = frt_model_default_params();
    p.backend = run->o.backend;
    if (o->chunk) p.prefill_chunk = o->chunk;
    p.max_seq = maxP + o->suffix + 1;
    p.n_threads = o->threads;
    frt_model *m = NULL;
    int32_t *ids = malloc((size_t)(maxP + o->suffix) * sizeof *ids);
    int rc = ids ? frt_gen_model_build(o->shape, o->seed, &run->cfg, &run->ck)
                 : frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: ids");
    if (!rc) rc = frt_model_load_checkpoint(run->ck, &run->cfg, NULL, &p, &m);
    if (!rc) random_ids(ids, maxP + o->suffix, run->cfg.vocab_size, o->seed);
    if (!rc) printf("%8s %10s %10s %10s %10s %10s %10s %9s %9s %9s %s\n", "P", "cold_ms", "device_ms", "host_ms",
                    "promote", "pcie_floor", "host_inj", "x_device", "x_host", "x_inj", "first token");
    for (size_t i = 0; i < n_docs && !rc; i++) {
        /* the document is the first P ids, the prompt the S after the longest document (the same for every P) */
        int32_t *doc = malloc((size_t)(docs[i] + o->suffix) * sizeof *doc);
        if (!doc) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "bench: document");
        if (!rc) {
            memcpy(doc, ids, (size_t)docs[i] * sizeof *doc);
            memcpy(doc + docs[i], ids + maxP, (size_t)o->suffix * sizeof *doc);
            rc = bench_doc(run, m, doc, docs[i], o->suffix, o->repeats, arr);
        }
        free(doc);
    }
    frt_model_free(m);
    frt_checkpoint_close(run->ck);
    free(ids);
    return rc;
}

int frt_bench_cartridge(int argc, char **argv)
{
    bc_opts o = {.backend = FRT_ARG_BACKEND_AUTO, .suffix = 16, .repeats = 5, .seed = 1,
                 .docs_list = "2048,8192,16384,32768"};
    int32_t *docs = NULL;
    size_t n_docs = 0;
    int prc = parse_opts(argc, argv, &o, &docs, &n_docs);
    if (prc) return prc == 1 ? 0 : prc;
    bm_run run;
    memset(&run, 0, sizeof run);
    run.o.backend = (frt_backend)frt_args_backend(o.backend);
    run.root = json_object();
    json_object_set_new(run.root, "bench", json_string("cartridge"));
    json_object_set_new(run.root, "shape", json_string(o.shape));
    json_object_set_new(run.root, "backend", json_string(frt_backend_name(run.o.backend)));
    json_object_set_new(run.root, "repeats", json_integer(o.repeats));
    json_t *arr = json_array();
    json_object_set_new(run.root, "documents", arr);
    int rc = bm_measure_floors(&run);
    if (!rc) rc = run_docs(&run, &o, docs, n_docs, arr);
    if (rc) json_object_set_new(run.root, "error", json_string(frt_last_error()));
    if (o.json_path && json_dump_file(run.root, o.json_path, JSON_INDENT(1))) {
        fprintf(stderr, "frt bench cartridge: cannot write %s\n", o.json_path);
        if (!rc) rc = FRT_ERR_IO;
    }
    json_decref(run.root);
    free(docs);
    return rc ? frt_cli_fail("bench cartridge", rc) : 0;
}
