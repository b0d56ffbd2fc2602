/*
 * cmd_fork.c - frt fork: prefill a trunk once, snapshot it, then per round
 * fork the capsule into N branch slots and decode T tokens on every branch
 * together (frt/branch.h); checks each branch against an unforked run from
 * the same boundary and writes a JSON receipt (docs/fork.md).
 */
#include "args.h"
#include "cli.h"
#include "fork_receipt.h"

#include "frt/branch.h"
#include "frt/capsule.h"
#include "frt/fs.h"
#include "frt/model.h"
#include "util/error.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char about[] =
    "Prefills the trunk (--trunk FILE: a text file, or --prompt TEXT; both through the checkpoint's\n"
    "tokenizer; or --trunk-random N ids for a checkpoint without one) once and snapshots it. Each round r forks that capsule into N branches seeded\n"
    "frt_branch_seed(S + r, i) and decodes T tokens on every branch together (a branch stops at\n"
    "an end-of-sequence token unless --ignore-eos). After the rounds, every branch is checked\n"
    "against an unforked run from the same boundary: the capsule restored into one slot, seeded\n"
    "with the branch's stream, decoded alone. Its first sampled token must match, its logits\n"
    "after its first token must be equal byte for byte, and its whole continuation token for\n"
    "token (greedy or sampled). The result is printed and recorded in the receipt.\n";

static const char epilog[] =
    "Exit status: 0 ok; 1 a failure, or with --verify a broken bit-identity check; 2 usage.\n"
    "The receipt: docs/fork.md.\n";

/* --trunk-random N: N ids drawn uniformly from the vocabulary (xorshift64*
 * seeded by --seed), for random-weight checkpoints without a tokenizer. */
static int random_ids(frt_model *m, const fork_opts *o, int32_t **ids, size_t *n)
{
    frt_model_info info;
    FRT_TRY(frt_model_info_get(m, &info));
    *ids = malloc((size_t)o->trunk_random * sizeof **ids);
    if (!*ids) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fork: out of memory for the trunk");
    uint64_t x = o->seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    for (int i = 0; i < o->trunk_random; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        (*ids)[i] = (int32_t)((x * 0x2545f4914f6cdd1dull >> 32) % (uint64_t)info.vocab_size);
    }
    *n = (size_t)o->trunk_random;
    return 0;
}

/* The trunk's ids: random (--trunk-random), or the text tokenized. */
static int trunk_ids(frt_model *m, const fork_opts *o, int32_t **ids, size_t *n)
{
    char *text = NULL;
    size_t len = 0;
    if (o->trunk_random) return random_ids(m, o, ids, n);
    if (o->trunk_path) {
        int rc = frt_file_read_all(o->trunk_path, (size_t)1 << 30, &text, &len);
        if (rc < 0) return rc;
    } else {
        text = strdup(o->prompt);
        len = strlen(o->prompt);
        if (!text) return FRT_ERR_OUT_OF_MEMORY;
    }
    int rc = frt_model_tokenize(m, text, len, ids, n);
    free(text);
    return rc;
}

static int is_eos(const frt_model_info *info, int32_t t)
{
    for (int i = 0; i < info->n_eos; i++)
        if (info->eos_ids[i] == t) return 1;
    return 0;
}

/* One round: fork, sample, decode until every branch stopped; the
 * branches' tokens, finish reasons and logits after their first token. */
static int run_round(frt_model *m, const frt_capsule *cap, const fork_opts *o, int r, fork_round *fr)
{
    int N = o->branches, V = fr->vocab;
    int32_t *t = fr->step_tokens;
    frt_model_info info;
    FRT_TRY(frt_model_info_get(m, &info));
    double t0 = frt_cli_now_s();
    FRT_TRY(frt_model_fork(m, cap, N, o->seed + (uint64_t)r));
    FRT_TRY(frt_model_branch_sample(m, &o->sampling, t));
    fr->fork_s = frt_cli_now_s() - t0;
    fr->decode_s = 0;
    fr->check_read_s = 0;
    fr->steps = 0;
    for (int k = 0;; k++) {
        int live = 0;
        for (int i = 0; i < N; i++) {
            if (t[i] < 0) continue;
            fork_branch *b = &fr->br[i];
            b->tokens[b->n++] = t[i];
            int eos = !o->ignore_eos && is_eos(&info, t[i]);
            if (eos || b->n >= o->tokens) {
                b->finish = eos ? "eos" : "length";
                FRT_TRY(frt_model_branch_stop(m, i));
            } else {
                live++;
            }
        }
        if (!live) break;
        double ts = frt_cli_now_s();
        FRT_TRY(frt_model_branch_decode(m, &o->sampling, t));
        fr->decode_s += frt_cli_now_s() - ts;
        fr->steps++;
        if (k == 0) { /* the logits after each branch's first token, for the check (not the round's work) */
            double tr = frt_cli_now_s();
            for (int i = 0; i < N; i++)
                if (t[i] >= 0) FRT_TRY(fork_read_logits(m, i, fr->first_logits + (size_t)i * V));
            fr->check_read_s = frt_cli_now_s() - tr;
        }
    }
    fr->wall_s = frt_cli_now_s() - t0 - fr->check_read_s;
    return frt_model_branch_select(m, 0);
}

/* Branch i alone in slot 0: the capsule, the branch's seed, the same steps.
 * Counts what differs into fr->br[i]. */
static int check_branch(frt_model *m, const frt_capsule *cap, const fork_opts *o, int r, fork_round *fr, int i,
                        float *lg)
{
    fork_branch *b = &fr->br[i];
    int32_t t;
    FRT_TRY(frt_model_branch_select(m, 0));
    FRT_TRY(frt_capsule_restore(m, cap));
    FRT_TRY(frt_model_seed(m, frt_branch_seed(o->seed + (uint64_t)r, i)));
    FRT_TRY(frt_model_sample(m, &o->sampling, &t));
    b->first_token_equal = t == b->tokens[0];
    b->logits_checked = 0;
    b->tokens_equal = b->first_token_equal;
    for (int k = 1; k < b->n && b->tokens_equal; k++) {
        FRT_TRY(frt_model_decode(m, &o->sampling, &t));
        if (k == 1) {
            FRT_TRY(frt_model_logits(m, lg));
            b->logits_checked = 1;
            b->logits_equal = !memcmp(lg, fr->first_logits + (size_t)i * fr->vocab, (size_t)fr->vocab * sizeof *lg);
        }
        b->tokens_equal = t == b->tokens[k];
    }
    return 0;
}

/* Test hook (tests/sh/fork_cli.sh): FRT_FORK_TEST_PERTURB=1 flips the low
 * bit of one recorded logit of round 0 branch 0 before the check, which
 * must then report the mismatch. */
static void test_perturb(fork_receipt *rc)
{
    const char *e = getenv("FRT_FORK_TEST_PERTURB");
    if (!e || strcmp(e, "1") != 0) return;
    uint32_t u;
    memcpy(&u, &rc->rounds[0].first_logits[0], sizeof u);
    u ^= 1u;
    memcpy(&rc->rounds[0].first_logits[0], &u, sizeof u);
}

static int run_all(frt_model *m, const frt_capsule *cap, const fork_opts *o, fork_receipt *rc)
{
    float *lg = malloc((size_t)rc->vocab * sizeof *lg);
    if (!lg) return FRT_ERR_OUT_OF_MEMORY;
    int st = 0;
    for (int r = 0; r < o->rounds && st == 0; r++) {
        st = run_round(m, cap, o, r, &rc->rounds[r]);
        if (st == 0 && !o->quiet) fork_print_round(m, &rc->rounds[r], r, o->branches);
    }
    if (st == 0) test_perturb(rc);
    for (int r = 0; r < o->rounds && st == 0; r++)
        for (int i = 0; i < o->branches && st == 0; i++) st = check_branch(m, cap, o, r, &rc->rounds[r], i, lg);
    free(lg);
    return st;
}

static int prepare_trunk(frt_model *m, const fork_opts *o, fork_receipt *rc, frt_capsule **cap)
{
    int32_t *ids = NULL;
    size_t n = 0;
    FRT_TRY(trunk_ids(m, o, &ids, &n));
    frt_model_info info;
    frt_model_info_get(m, &info);
    int st = 0;
    if (n == 0) st = frt_error(FRT_ERR_INVALID_ARGUMENT, "the trunk has no tokens");
    else if (n + (size_t)o->tokens > (size_t)info.max_seq)
        st = frt_error(FRT_ERR_OUT_OF_RANGE, "trunk %zu + %d tokens exceed max_seq %d (--max-seq)", n, o->tokens,
                           info.max_seq);
    double t0 = frt_cli_now_s();
    if (st == 0) st = frt_model_prefill(m, ids, (int)n);
    rc->prefill_s = frt_cli_now_s() - t0;
    free(ids);
    if (st == 0) st = frt_capsule_snapshot(m, FRT_TIER_DEVICE, NULL, NULL, 0, cap);
    if (st == 0) st = frt_capsule_info_get(*cap, &rc->trunk);
    return st;
}

static int parse(int argc, char **argv, fork_opts *o)
{
    int backend = FRT_ARG_BACKEND_AUTO;
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &o->model_dir, "DIR", "checkpoint directory (with tokenizer.json)",
                .dflt = FRT_CLI_DEMO_MODEL_HELP),
        FRT_OPT(0, "trunk", FRT_ARG_STR, &o->trunk_path, "FILE", "the trunk: a text file", .dflt = ""),
        FRT_OPT('p', "prompt", FRT_ARG_STR, &o->prompt, "TEXT", "the trunk as text", .dflt = ""),
        FRT_OPT(0, "trunk-random", FRT_ARG_INT, &o->trunk_random, "N",
                "the trunk: N random token ids (seeded by --seed; no tokenizer needed)", .min = 1, .max = 1 << 24),
        FRT_OPT(0, "branches", FRT_ARG_INT, &o->branches, "N", "branches per round (= branch slots)", .min = 1,
                .max = FRT_MAX_BRANCH_SLOTS),
        FRT_OPT(0, "tokens", FRT_ARG_INT, &o->tokens, "T", "tokens per branch", .min = 2, .max = 1 << 20),
        FRT_OPT(0, "rounds", FRT_ARG_INT, &o->rounds, "R", "rounds", .min = 1, .max = 100000),
        FRT_OPT(0, "temperature", FRT_ARG_FLOAT, &o->sampling.temperature, "X", "0 = greedy", .fmin = 0, .fmax = 100),
        FRT_OPT(0, "top-p", FRT_ARG_FLOAT, &o->sampling.top_p, "P", "nucleus mass, (0, 1]; 1 = off", .fmin = 0,
                .fmax = 1, .dflt = "1"),
        FRT_OPT(0, "top-k", FRT_ARG_INT, &o->sampling.top_k, "K", "0 = off", .min = 0, .max = 1 << 24),
        FRT_OPT(0, "seed", FRT_ARG_U64, &o->seed, "S", "round r forks with seed S + r"),
        FRT_OPT(0, "ignore-eos", FRT_ARG_FLAG, &o->ignore_eos, NULL, "do not stop a branch at end-of-sequence"),
        FRT_OPT(0, "receipt", FRT_ARG_STR, &o->receipt, "FILE", "write the JSON receipt here", .dflt = ""),
        FRT_OPT(0, "verify", FRT_ARG_FLAG, &o->verify, NULL, "exit 1 when the bit-identity check fails"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the model runs"),
        FRT_OPT(0, "max-seq", FRT_ARG_INT, &o->mp.max_seq, "N", "state capacity in tokens; 0 = min(config, 8192)",
                .min = 0, .max = 1 << 24),
        FRT_OPT(0, "threads", FRT_ARG_INT, &o->mp.n_threads, "N", "CPU threads; 0 = all cores", .min = 0,
                .max = 4096),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &o->quiet, NULL, "no progress lines"),
    };
    frt_cmd_spec spec = {"fork", "[-m DIR] (--trunk FILE | -p TEXT | --trunk-random N) [options]", about, opts,
                         (int)(sizeof opts / sizeof opts[0]), 0, 0, epilog};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? -1 : 2;
    int trunks = !!o->trunk_path + !!o->prompt + !!o->trunk_random;
    if (trunks != 1)
        return frt_args_error(&spec, trunks ? "give the trunk once: --trunk FILE, -p TEXT or --trunk-random N"
                                            : "no trunk: give --trunk FILE, -p TEXT or --trunk-random N");
    if (o->sampling.top_p <= 0)
        return frt_args_error(&spec, "--top-p: '%g' is out of range (a number in (0, 1])", (double)o->sampling.top_p);
    o->mp.backend = (frt_backend)frt_args_backend(backend);
    o->mp.branch_slots = o->branches;
    return 0;
}

static int run(fork_opts *o, fork_receipt *rc)
{
    frt_model *m = NULL;
    int st = frt_cli_load_model("fork", o->model_dir, &o->mp, o->quiet, &m);
    frt_capsule *cap = NULL;
    if (st == 0) st = fork_receipt_begin(rc, m, o);
    if (st == 0 && !o->quiet)
        fprintf(stderr, "frt fork: %d branch slots, %.1f MB of state each, %.1f MB in all\n", rc->info.branch_slots,
                (double)rc->info.state_bytes / 1e6, (double)rc->info.branch_state_bytes / 1e6);
    if (st == 0 && !rc->has_tokenizer && !o->trunk_random)
        st = frt_error(FRT_ERR_UNSUPPORTED, "%s has no tokenizer.json (the trunk is text)", o->model_dir);
    if (st == 0) st = prepare_trunk(m, o, rc, &cap);
    if (st == 0) st = run_all(m, cap, o, rc);
    if (st == 0) st = fork_receipt_finish(rc, m, o);
    frt_capsule_free(cap);
    frt_model_free(m);
    return st;
}

int frt_cmd_fork(int argc, char **argv)
{
    fork_opts o = {.branches = 4, .tokens = 64, .rounds = 5, .sampling = {.temperature = 0.7f, .top_p = 1.0f}, .seed = 0};
    o.mp = frt_model_default_params();
    int prc = parse(argc, argv, &o);
    if (prc) return prc < 0 ? 0 : prc;
    char model_buf[PATH_MAX];
    if (!o.model_dir) {
        if (frt_cli_find_shipped("models/frt-demo", model_buf, sizeof model_buf) < 0) {
            fprintf(stderr, "frt fork: no -m MODEL_DIR given and the demo model models/frt-demo was not found\n");
            return 1;
        }
        o.model_dir = model_buf;
    }
    fork_receipt rc;
    memset(&rc, 0, sizeof rc);
    int st = run(&o, &rc);
    int ok = st == 0 && rc.identity_ok;
    if (st == 0 && o.receipt) st = fork_receipt_write(&rc, o.receipt);
    fork_receipt_free(&rc);
    if (st < 0) return frt_cli_fail("fork", st);
    if (!ok) {
        fprintf(stderr, "frt fork: BIT IDENTITY BROKEN: a branch differs from its unforked run (see above%s)\n",
                o.receipt ? " and the receipt" : "");
        return o.verify ? 1 : 0;
    }
    return 0;
}
