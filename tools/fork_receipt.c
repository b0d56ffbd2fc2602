/*
 * fork_receipt.c - frt fork's bookkeeping and JSON receipt (fork_receipt.h,
 * docs/fork.md): the rounds' buffers, the check's verdict, the machine
 * (frt_context_device_info of the model's device and of the host) and the
 * software (frt_version, the git commit and dirty flag of the source tree
 * the binary was built from, read at run time with git).
 */
#include "fork_receipt.h"

#include "frt/branch.h"
#include "frt/exec.h"
#include "frt/status.h"
#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FRT_SOURCE_DIR
#define FRT_SOURCE_DIR ""
#endif

int fork_receipt_begin(fork_receipt *rc, frt_model *m, const fork_opts *o)
{
    FRT_TRY(frt_model_info_get(m, &rc->info));
    rc->vocab = rc->info.vocab_size;
    rc->has_tokenizer = rc->info.has_tokenizer;
    rc->fingerprint = frt_model_fingerprint(m);
    rc->rounds = calloc((size_t)o->rounds, sizeof *rc->rounds);
    if (!rc->rounds) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fork: out of memory");
    rc->n_rounds = o->rounds;
    rc->n_branches = o->branches;
    for (int r = 0; r < o->rounds; r++) {
        fork_round *fr = &rc->rounds[r];
        fr->vocab = rc->vocab;
        fr->br = calloc((size_t)o->branches, sizeof *fr->br);
        fr->step_tokens = calloc((size_t)o->branches, sizeof *fr->step_tokens);
        fr->first_logits = calloc((size_t)o->branches * (size_t)rc->vocab, sizeof *fr->first_logits);
        if (!fr->br || !fr->step_tokens || !fr->first_logits)
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "fork: out of memory for round %d", r);
        for (int i = 0; i < o->branches; i++)
            if (!(fr->br[i].tokens = calloc((size_t)o->tokens, sizeof *fr->br[i].tokens)))
                return frt_error(FRT_ERR_OUT_OF_MEMORY, "fork: out of memory for round %d", r);
    }
    return 0;
}

void fork_receipt_free(fork_receipt *rc)
{
    for (int r = 0; rc->rounds && r < rc->n_rounds; r++) {
        fork_round *fr = &rc->rounds[r];
        for (int i = 0; fr->br && i < rc->n_branches; i++) free(fr->br[i].tokens);
        free(fr->br);
        free(fr->step_tokens);
        free(fr->first_logits);
    }
    free(rc->rounds);
    json_decref(rc->json);
    memset(rc, 0, sizeof *rc);
}

int fork_read_logits(frt_model *m, int i, float *out)
{
    FRT_TRY(frt_model_branch_select(m, i));
    int rc = frt_model_logits(m, out);
    FRT_TRY(frt_model_branch_select(m, 0));
    return rc;
}

/* The first bytes of a branch's text, cut at a UTF-8 boundary; NULL when
 * there is no tokenizer or the text is not valid UTF-8. */
static json_t *preview(frt_model *m, const fork_branch *b, size_t max)
{
    char *text = NULL;
    size_t len = 0;
    if (frt_model_detokenize(m, b->tokens, (size_t)b->n, &text, &len) < 0) return json_null();
    if (len > max) {
        len = max;
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80) len--;
    }
    json_t *j = json_stringn(text, len);
    free(text);
    return j ? j : json_null();
}

void fork_print_round(frt_model *m, const fork_round *fr, int r, int n_branches)
{
    printf("round %d: %.3f s (fork + first sample %.2f ms, %d steps at %.3f ms; the check's logits read, %.2f ms, "
           "not counted)\n",
           r, fr->wall_s, 1e3 * fr->fork_s, fr->steps, fr->steps ? 1e3 * fr->decode_s / fr->steps : 0.0,
           1e3 * fr->check_read_s);
    for (int i = 0; i < n_branches; i++) {
        json_t *p = preview(m, &fr->br[i], 60);
        printf("  branch %d: %d tokens (%s) %s\n", i, fr->br[i].n, fr->br[i].finish,
               json_is_string(p) ? json_string_value(p) : "");
        json_decref(p);
    }
}

static int same_tokens(const fork_branch *a, const fork_branch *b)
{
    return a->n == b->n && !memcmp(a->tokens, b->tokens, (size_t)a->n * sizeof *a->tokens);
}

/* identity_ok: every branch matched its unforked run; all_diverge: in every
 * round no two branches produced the same tokens. Prints the failures. */
static void verdict(fork_receipt *rc, json_t *bi)
{
    int checked = 0, logits = 0, bad = 0;
    rc->all_diverge = 1;
    for (int r = 0; r < rc->n_rounds; r++)
        for (int i = 0; i < rc->n_branches; i++) {
            const fork_branch *b = &rc->rounds[r].br[i];
            for (int j = 0; j < i; j++)
                if (same_tokens(b, &rc->rounds[r].br[j])) rc->all_diverge = 0;
            int ok = b->first_token_equal && b->tokens_equal && (!b->logits_checked || b->logits_equal);
            checked++;
            logits += b->logits_checked;
            if (!ok) {
                bad++;
                fprintf(stderr, "frt fork: round %d branch %d differs from its unforked run: first token %s, "
                        "logits after it %s, continuation %s\n", r, i, b->first_token_equal ? "equal" : "DIFFERS",
                        !b->logits_checked ? "not reached" : b->logits_equal ? "equal" : "DIFFER",
                        b->tokens_equal ? "equal" : "DIFFERS");
            }
        }
    rc->identity_ok = bad == 0;
    json_object_set_new(bi, "ok", json_boolean(rc->identity_ok));
    json_object_set_new(bi, "branches_checked", json_integer(checked));
    json_object_set_new(bi, "first_step_logits_compared", json_integer(logits));
    json_object_set_new(bi, "mismatches", json_integer(bad));
    json_object_set_new(bi, "method",
                        json_string("each branch vs the trunk capsule restored into one slot, seeded "
                                    "frt_branch_seed(seed + round, branch) and decoded alone: first token, the "
                                    "logits after it byte for byte, the whole continuation token for token"));
    printf("bit identity: %s (%d branches, %d first-step logits compared byte for byte)\n",
           rc->identity_ok ? "ok" : "BROKEN", checked, logits);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of x[n] (sorted in place); 0 for n = 0. */
static double median_of(double *x, int n)
{
    if (n < 1) return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static json_t *rounds_json(fork_receipt *rc, frt_model *m, const fork_opts *o, double *median, double *step_median)
{
    json_t *arr = json_array();
    double *w = malloc((size_t)rc->n_rounds * sizeof *w), *st = malloc((size_t)rc->n_rounds * sizeof *st);
    int n_st = 0;
    for (int r = 0; r < rc->n_rounds; r++) {
        const fork_round *fr = &rc->rounds[r];
        json_t *jr = json_object(), *jb = json_array();
        json_object_set_new(jr, "round", json_integer(r));
        json_object_set_new(jr, "seed", json_integer((json_int_t)(o->seed + (uint64_t)r)));
        json_object_set_new(jr, "wall_s", json_real(fr->wall_s));
        json_object_set_new(jr, "fork_s", json_real(fr->fork_s));
        json_object_set_new(jr, "decode_s", json_real(fr->decode_s));
        json_object_set_new(jr, "check_read_s", json_real(fr->check_read_s));
        json_object_set_new(jr, "steps", json_integer(fr->steps));
        if (st && fr->steps) st[n_st++] = 1e3 * fr->decode_s / fr->steps;
        for (int i = 0; i < rc->n_branches; i++) {
            const fork_branch *b = &fr->br[i];
            json_t *bj = json_object(), *toks = json_array();
            for (int k = 0; k < b->n; k++) json_array_append_new(toks, json_integer(b->tokens[k]));
            json_object_set_new(bj, "branch", json_integer(i));
            json_object_set_new(bj, "tokens", toks);
            json_object_set_new(bj, "text_preview", preview(m, b, 120));
            json_object_set_new(bj, "finish_reason", json_string(b->finish));
            json_array_append_new(jb, bj);
        }
        json_object_set_new(jr, "branches", jb);
        json_array_append_new(arr, jr);
        if (w) w[r] = fr->wall_s;
    }
    if (w) *median = median_of(w, rc->n_rounds);
    if (st) *step_median = median_of(st, n_st);
    free(w);
    free(st);
    return arr;
}

/* The first line git prints for args in the source tree, or NULL. */
static char *git_line(const char *args, int *any)
{
    char cmd[4096], line[256];
    if (!FRT_SOURCE_DIR[0]) return NULL;
    snprintf(cmd, sizeof cmd, "git -C '%s' %s 2>/dev/null", FRT_SOURCE_DIR, args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    char *got = fgets(line, sizeof line, p) ? strdup(line) : NULL;
    *any = got != NULL;
    while (fgets(line, sizeof line, p)) {}
    int st = pclose(p);
    if (st != 0) {
        free(got);
        return NULL;
    }
    if (got) got[strcspn(got, "\n")] = 0;
    return got;
}

static json_t *software_json(void)
{
    json_t *s = json_object();
    int any = 0, dirty = 0;
    char *commit = git_line("rev-parse HEAD", &any);
    json_object_set_new(s, "frt_version", json_string(frt_version()));
    json_object_set_new(s, "git_commit", commit ? json_string(commit) : json_null());
    char *st = commit ? git_line("status --porcelain --untracked-files=no", &dirty) : NULL;
    json_object_set_new(s, "git_dirty", commit ? json_boolean(dirty) : json_null());
    json_object_set_new(s, "source_dir", json_string(FRT_SOURCE_DIR));
    free(commit);
    free(st);
    return s;
}

static json_t *device_json(frt_context *ctx)
{
    frt_device_info di;
    if (!ctx || frt_context_device_info(ctx, &di) < 0) return json_null();
    json_t *d = json_object();
    json_object_set_new(d, "backend", json_string(frt_backend_name(di.backend)));
    json_object_set_new(d, "name", json_string(di.name));
    json_object_set_new(d, "memory_bytes", json_integer((json_int_t)di.total_bytes));
    if (di.backend == FRT_BACKEND_CUDA) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", di.cc_major, di.cc_minor);
        json_object_set_new(d, "compute_capability", json_string(cc));
    }
    json_object_set_new(d, di.backend == FRT_BACKEND_CUDA ? "sm_count" : "cores", json_integer(di.sm_count));
    return d;
}

static json_t *machine_json(frt_model *m)
{
    json_t *mj = json_object();
    json_object_set_new(mj, "device", device_json(frt_model_context(m)));
    frt_context *host = NULL;
    if (frt_context_create(FRT_BACKEND_CPU, 0, &host) == 0) {
        json_object_set_new(mj, "host", device_json(host));
        frt_context_destroy(host);
    }
    return mj;
}

static json_t *model_json(const fork_receipt *rc, const fork_opts *o)
{
    char fp[24];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)rc->fingerprint);
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I}", "dir", o->model_dir, "arch", rc->info.arch,
                     "model_type", rc->info.model_type, "fingerprint", fp, "branch_slots", rc->info.branch_slots,
                     "branch_batched", rc->info.branch_batched, "state_bytes_per_slot",
                     (json_int_t)rc->info.state_bytes, "state_bytes_all_slots", (json_int_t)rc->info.branch_state_bytes,
                     "weight_bytes", (json_int_t)rc->info.weight_bytes);
}

int fork_receipt_finish(fork_receipt *rc, frt_model *m, const fork_opts *o)
{
    json_t *root = json_object(), *bi = json_object();
    char dg[24];
    snprintf(dg, sizeof dg, "%016llx", (unsigned long long)rc->trunk.prefix_digest);
    verdict(rc, bi);
    double median = 0, step_median = 0;
    json_object_set_new(root, "receipt", json_string("frt fork"));
    json_object_set_new(root, "model", model_json(rc, o));
    json_object_set_new(root, "trunk", json_pack("{s:i, s:s, s:f}", "tokens", rc->trunk.position, "digest", dg,
                                                 "prefill_s", rc->prefill_s));
    json_object_set_new(root, "capsule_bytes", json_integer((json_int_t)rc->trunk.bytes));
    json_object_set_new(root, "sampling", json_pack("{s:f, s:i, s:f, s:I, s:b}", "temperature",
                                                    (double)o->sampling.temperature, "top_k", o->sampling.top_k,
                                                    "top_p", (double)o->sampling.top_p, "seed", (json_int_t)o->seed,
                                                    "ignore_eos", o->ignore_eos));
    json_object_set_new(root, "branches", json_integer(o->branches));
    json_object_set_new(root, "tokens_per_branch", json_integer(o->tokens));
    json_object_set_new(root, "rounds", rounds_json(rc, m, o, &median, &step_median));
    json_object_set_new(root, "round_wall_s_median", json_real(median));
    json_object_set_new(root, "step_ms_median", json_real(step_median));
    json_object_set_new(root, "all_diverge", json_boolean(rc->all_diverge));
    json_object_set_new(root, "bit_identity", bi);
    json_object_set_new(root, "machine", machine_json(m));
    json_object_set_new(root, "software", software_json());
    rc->json = root;
    printf("median round %.3f s, step %.3f ms, all_diverge %s\n", median, step_median,
           rc->all_diverge ? "true" : "false");
    return 0;
}

int fork_receipt_write(const fork_receipt *rc, const char *path)
{
    if (!rc->json || json_dump_file(rc->json, path, JSON_INDENT(2) | JSON_REAL_PRECISION(9)))
        return frt_error(FRT_ERR_IO, "fork: cannot write the receipt %s", path);
    return 0;
}
