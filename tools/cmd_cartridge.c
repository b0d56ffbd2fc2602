/* cmd_cartridge.c - frt cartridge import | export | info: convert a PyTorch
 * .pt cartridge into frt's format, write one from a capsule of a dense
 * model, describe one (frt/cartridge.h, docs/cartridges.md). */
#include "args.h"
#include "cli.h"

#include "frt/capsule.h"
#include "frt/cartridge.h"
#include "frt/tokenizer.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options import and export share: the model, the manifest fields. */
typedef struct cart_opts {
    const char *model_dir, *out, *id, *model_id, *source, *labels, *start_text;
    int steps, backend, quiet, start_bos;
    frt_model_params mp;
} cart_opts;

#define CART_COMMON_OPTS(o)                                                                                           \
    FRT_OPT('m', "model", FRT_ARG_STR, &(o).model_dir, "DIR", "the checkpoint the cartridge binds to", .dflt = ""), \
    FRT_OPT('o', "out", FRT_ARG_STR, &(o).out, "DIR", "the cartridge directory to write", .dflt = ""),            \
    FRT_OPT(0, "id", FRT_ARG_STR, &(o).id, "ID", "cartridge id (A-Z a-z 0-9 . _ -)", .dflt = "the name of -o"),   \
    FRT_OPT(0, "model-id", FRT_ARG_STR, &(o).model_id, "NAME", "model id in the manifest", .dflt = "-m as given"), \
    FRT_OPT(0, "source", FRT_ARG_STR, &(o).source, "TEXT", "source document (a name or path)", .dflt = ""),       \
    FRT_OPT(0, "training-steps", FRT_ARG_INT, &(o).steps, "N", "training steps; -1 = unknown", .min = -1,          \
            .max = INT_MAX),                                                                                          \
    FRT_OPT(0, "labels", FRT_ARG_STR, &(o).labels, "L1,L2,..", "labels (at most 16)", .dflt = ""),               \
    FRT_OPT(0, "starts-with-bos", FRT_ARG_FLAG, &(o).start_bos, NULL,                                              \
            "the cartridge's first row is the tokenizer's bos_token (manifest starts_with)"),                         \
    FRT_OPT(0, "starts-with-text", FRT_ARG_STR, &(o).start_text, "TEXT",                                          \
            "the cartridge's rows (after the BOS) begin with TEXT, as the chat template renders it", .dflt = ""),    \
    FRT_OPT(0, "backend", FRT_ARG_BACKEND, &(o).backend, NULL, "where the model is loaded"),                       \
    FRT_OPT('q', "quiet", FRT_ARG_FLAG, &(o).quiet, NULL, "no loading lines on stderr")

static void opts_init(cart_opts *o)
{
    memset(o, 0, sizeof *o);
    o->steps = -1;
    o->backend = FRT_ARG_BACKEND_AUTO;
    o->mp = frt_model_default_params();
}

/* Splits "a,b,c" in place into labels[]; -1 when more than the maximum. */
static int split_labels(char *s, const char **labels)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == FRT_CARTRIDGE_MAX_LABELS) return -1;
        labels[n++] = tok;
    }
    return n;
}

/* The id of the tokenizer's bos_token, or -1 when it names none. */
static int bos_id(const frt_model *m)
{
    const frt_tokenizer *tok = frt_model_tokenizer(m);
    const char *bos = frt_tokenizer_special_token(tok, "bos_token");
    return bos ? frt_tokenizer_token_id(tok, bos) : -1;
}

/* The manifest's starts_with: the BOS when --starts-with-bos (or, for an
 * export, when row 0 holds it: auto), then the tokens of --starts-with-text.
 * An export's journal must begin with them (frt_cartridge_set_starts_with). */
static int set_start(const cart_opts *o, frt_model *m, frt_cartridge *c, int exported)
{
    const int bos = bos_id(m);
    int32_t *text = NULL;
    size_t n_text = 0;
    int auto_bos = 0;
    const int32_t *rows = NULL;
    if (exported && bos >= 0 && frt_cartridge_token_ids(c, &rows) == 0 && rows) auto_bos = rows[0] == bos;
    if (o->start_bos && bos < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "--starts-with-bos: the model's tokenizer names no bos_token");
    if (o->start_text && o->start_text[0]) FRT_TRY(frt_model_tokenize(m, o->start_text, strlen(o->start_text), &text, &n_text));
    const int with_bos = o->start_bos || auto_bos;
    int32_t *ids = malloc((n_text + 1) * sizeof *ids);
    if (!ids) {
        free(text);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (with_bos) ids[0] = bos;
    if (n_text) memcpy(ids + with_bos, text, n_text * sizeof *ids);
    int rc = frt_cartridge_set_starts_with(c, ids, (int)n_text + with_bos);
    free(ids);
    free(text);
    return rc;
}

/* Sets the manifest fields from the options and saves c under o->out. */
static int finish(const char *cmd, const cart_opts *o, frt_model *m, frt_cartridge *c, int exported)
{
    char idbuf[FRT_CARTRIDGE_ID_MAX], *labels_copy = strdup(o->labels ? o->labels : "");
    const char *labels[FRT_CARTRIDGE_MAX_LABELS];
    if (!labels_copy) return frt_cli_fail(cmd, frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory"));
    int n_labels = split_labels(labels_copy, labels);
    const char *base = strrchr(o->out, '/') && strrchr(o->out, '/')[1] ? strrchr(o->out, '/') + 1 : o->out;
    snprintf(idbuf, sizeof idbuf, "%s", o->id ? o->id : base);
    frt_cartridge_meta meta = {.id = idbuf, .model_id = o->model_id ? o->model_id : o->model_dir,
                               .model_fingerprint = frt_cartridge_model_fingerprint(m), .training_steps = o->steps,
                               .source_document = o->source, .labels = labels, .n_labels = n_labels};
    int rc = n_labels < 0 ? frt_error(FRT_ERR_INVALID_ARGUMENT, "--labels: more than %d labels", FRT_CARTRIDGE_MAX_LABELS)
                          : frt_cartridge_set_meta(c, &meta);
    free(labels_copy);
    if (rc == 0) rc = set_start(o, m, c, exported);
    if (rc == 0) rc = frt_cartridge_save(c, o->out);
    if (rc < 0) return frt_cli_fail(cmd, rc);
    frt_cartridge_info in;
    frt_cartridge_info_get(c, &in);
    if (!o->quiet)
        fprintf(stderr, "frt %s: wrote %s: %d layers x %d tokens (%d frozen, starts with %d), %s, %.3f MB\n", cmd,
                o->out, in.n_layers, in.tokens, in.frozen_tokens, in.n_starts_with, frt_dtype_name(in.dtype),
                (double)in.file_bytes / 1e6);
    return 0;
}

static int parse_common(frt_cmd_spec *spec, int argc, char **argv, cart_opts *o, char **pos)
{
    int n_pos = 0;
    int prc = frt_args_parse(spec, argc, argv, pos, &n_pos);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!o->model_dir) return frt_args_error(spec, "no model: give -m DIR (the checkpoint the cartridge binds to)");
    if (!o->out) return frt_args_error(spec, "no output: give -o DIR");
    if (o->mp.prefill_chunk % 64) return frt_args_error(spec, "--chunk: '%d' is not a multiple of 64", o->mp.prefill_chunk);
    o->mp.backend = (frt_backend)frt_args_backend(o->backend);
    return -1; /* go on */
}

static int cmd_import(int argc, char **argv)
{
    cart_opts o;
    opts_init(&o);
    frt_arg opts[] = {CART_COMMON_OPTS(o)};
    frt_cmd_spec spec = {"cartridge import", "IN.pt -m MODEL_DIR -o OUT_DIR [options]",
                         "Converts a PyTorch .pt cartridge (the Cartridges recipe's dict of lists, or\n"
                         "TrainableCache.save's dict of ParameterList) into an frt cartridge bound to the model:\n"
                         "its layers, KV heads and head_dim must match the model's.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 1, 1, NULL};
    char *pos[1];
    int prc = parse_common(&spec, argc, argv, &o, pos);
    if (prc >= 0) return prc;
    frt_cartridge *c = NULL;
    int rc = frt_cartridge_read_pt(pos[0], &c);
    if (rc < 0) return frt_cli_fail("cartridge import", rc);
    frt_model *m = NULL;
    o.mp.max_seq = 64; /* the state is not used: only the binding and the shape check */
    o.mp.prefill_chunk = 64;
    rc = frt_cli_load_model("cartridge import", o.model_dir, &o.mp, o.quiet, &m);
    if (rc == 0) rc = frt_cartridge_check(m, c); /* the architecture and shape checks of injection */
    int ret = rc < 0 ? frt_cli_fail("cartridge import", rc) : 0;
    if (ret == 0) ret = finish("cartridge import", &o, m, c, 0);
    frt_model_free(m);
    frt_cartridge_free(c);
    return ret;
}

static int cmd_export(int argc, char **argv)
{
    cart_opts o;
    opts_init(&o);
    frt_arg opts[] = {
        CART_COMMON_OPTS(o),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &o.mp.max_seq, "N", "state capacity the capsule was made with", .min = 0,
                .max = 1 << 24),
        FRT_OPT(0, "chunk", FRT_ARG_INT, &o.mp.prefill_chunk, "C", "prefill chunk the capsule was made with", .min = 0,
                .max = 1 << 20),
    };
    frt_cmd_spec spec = {"cartridge export", "CAPSULE -m MODEL_DIR -o OUT_DIR [options]",
                         "Writes the KV rows 0..position-1 of a capsule file of a dense model as an frt\n"
                         "cartridge. The model must be loaded as when the capsule was made (backend, --chunk,\n"
                         "--max-seq: the capsule's fingerprint checks it).\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 1, 1, NULL};
    char *pos[1];
    int prc = parse_common(&spec, argc, argv, &o, pos);
    if (prc >= 0) return prc;
    frt_model *m = NULL;
    frt_capsule *cap = NULL;
    frt_cartridge *c = NULL;
    int rc = frt_cli_load_model("cartridge export", o.model_dir, &o.mp, o.quiet, &m);
    if (rc == 0) rc = frt_capsule_load(m, pos[0], &cap);
    if (rc == 0) rc = frt_capsule_restore(m, cap);
    if (rc == 0) rc = frt_cartridge_from_model(m, &c);
    int ret = rc < 0 ? frt_cli_fail("cartridge export", rc) : finish("cartridge export", &o, m, c, 1);
    frt_cartridge_free(c);
    frt_capsule_free(cap);
    frt_model_free(m);
    return ret;
}

static json_t *info_json(const frt_cartridge *c, const frt_cartridge_info *in)
{
    const int32_t *start = NULL;
    int n_start = 0;
    frt_cartridge_starts_with(c, &start, &n_start);
    json_t *starts = json_array();
    for (int i = 0; i < n_start; i++) json_array_append_new(starts, json_integer(start[i]));
    char fp[20], sum[24];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)in->model_fingerprint);
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)in->checksum);
    json_t *labels = json_array();
    for (int i = 0; i < in->n_labels; i++) json_array_append_new(labels, json_string(in->labels[i]));
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:i, s:i, s:o, s:s?, s:I, s:s, s:o, s:s, s:o, s:b}",
                     "cartridge_id", in->id, "model_id", in->model_id, "model_fingerprint",
                     in->model_fingerprint ? fp : "", "format", in->from_pt ? "pt" : "frt", "layers", in->n_layers,
                     "kv_heads", in->n_kv_heads, "head_dim", in->head_dim, "dtype", frt_dtype_name(in->dtype), "tokens",
                     in->tokens, "frozen_tokens", in->frozen_tokens, "starts_with", starts, "checksum_xxh64", in->from_pt ? NULL : sum,
                     "file_bytes", (json_int_t)in->file_bytes, "created", in->created, "training_steps",
                     in->training_steps >= 0 ? json_integer(in->training_steps) : json_null(), "source_document",
                     in->source_document, "labels", labels, "bound", in->model_fingerprint != 0);
}

static int cmd_info(int argc, char **argv)
{
    int json = 0;
    frt_arg opts[] = {FRT_OPT(0, "json", FRT_ARG_FLAG, &json, NULL, "one JSON object instead of lines")};
    frt_cmd_spec spec = {"cartridge info", "PATH [--json]",
                         "Describes a cartridge: an frt cartridge directory (its manifest and payload are checked\n"
                         "in full, checksum included) or a PyTorch .pt file.\n",
                         opts, 1, 1, 1, NULL};
    char *pos[1];
    int n_pos = 0, prc = frt_args_parse(&spec, argc, argv, pos, &n_pos);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    frt_cartridge *c = NULL;
    int rc = frt_cartridge_open(pos[0], &c);
    if (rc < 0) return frt_cli_fail("cartridge info", rc);
    frt_cartridge_info in;
    frt_cartridge_info_get(c, &in);
    json_t *j = info_json(c, &in);
    char *s = j ? json_dumps(j, json ? JSON_COMPACT : JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
    frt_cartridge_free(c);
    return s ? 0 : 1;
}

int frt_cmd_cartridge(int argc, char **argv)
{
    static const char usage[] =
        "usage: frt cartridge import IN.pt -m MODEL_DIR -o OUT_DIR [options]\n"
        "       frt cartridge export CAPSULE -m MODEL_DIR -o OUT_DIR [options]\n"
        "       frt cartridge info PATH [--json]\n"
        "KV prefixes made elsewhere, injected before the prompt (frt generate --cartridge);\n"
        "'frt cartridge COMMAND --help' lists the options. docs/cartridges.md.\n";
    if (argc >= 2 && !strcmp(argv[1], "import")) return cmd_import(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "export")) return cmd_export(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    fprintf(stderr, "frt cartridge: %s%s%s\n%s", argc >= 2 ? "unknown command '" : "no command",
            argc >= 2 ? argv[1] : "", argc >= 2 ? "'" : "", usage);
    return 2;
}
