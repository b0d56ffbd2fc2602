/*
 * tools/fork_receipt.h - what frt fork (cmd_fork.c) measures and checks, and
 * its JSON receipt (fork_receipt.c; the fields: docs/fork.md).
 */
#ifndef FRT_TOOLS_FORK_RECEIPT_H
#define FRT_TOOLS_FORK_RECEIPT_H

#include "frt/capsule.h"
#include "frt/model.h"

#include <stdint.h>

/* The command's options. */
typedef struct fork_opts {
    const char *model_dir, *trunk_path, *prompt, *receipt;
    int branches, tokens, rounds, ignore_eos, verify, quiet;
    int trunk_random; /* --trunk-random N: N random ids (0: the trunk is text) */
    frt_sampling sampling;
    unsigned long long seed;
    frt_model_params mp;
} fork_opts;

/* One branch of a round and what its unforked check found. */
typedef struct fork_branch {
    int32_t *tokens;    /* [opts.tokens] decoded tokens (the first sampled from the trunk's logits) */
    int n;              /* tokens produced */
    const char *finish; /* "eos" or "length" (static) */
    int first_token_equal, logits_checked, logits_equal, tokens_equal;
} fork_branch;

typedef struct fork_round {
    int vocab;
    double wall_s;        /* fork + every step of every branch (check_read_s left out) */
    double check_read_s;  /* reading each branch's first-step logits to the host for the bit-identity check */
    double fork_s;        /* of wall_s: the fork (restore into the slots) and the first sample */
    double decode_s;      /* of wall_s: the decode steps (frt_model_branch_decode calls) alone */
    int steps;            /* those calls: decode_s / steps is the cost of one step of every live branch */
    fork_branch *br;      /* [branches] */
    int32_t *step_tokens; /* [branches] scratch of one step */
    float *first_logits;  /* [branches, vocab] logits after each branch's first token */
} fork_round;

typedef struct fork_receipt {
    int vocab, has_tokenizer, identity_ok, all_diverge;
    double prefill_s, load_s;
    frt_model_info info;
    uint64_t fingerprint;
    frt_capsule_info trunk; /* the trunk capsule (position, digest, bytes) */
    fork_round *rounds;     /* [opts.rounds] */
    int n_rounds, n_branches;
    void *json; /* json_t *: the receipt, built by fork_receipt_finish */
} fork_receipt;

/* Allocates the rounds for m and o; records the model. Returns 0 or a
 * negative status (FRT_ERR_OUT_OF_MEMORY). */
int fork_receipt_begin(fork_receipt *rc, frt_model *m, const fork_opts *o);

/* Copies branch slot i's logits [vocab] f32 into out (selects slot i, then
 * slot 0 again). Errors: those of frt_model_branch_select / frt_model_logits. */
int fork_read_logits(frt_model *m, int i, float *out);

/* Prints one line per round (wall time, per-branch finish and a preview). */
void fork_print_round(frt_model *m, const fork_round *fr, int r, int n_branches);

/* Sets identity_ok and all_diverge, prints the check's result, builds the
 * JSON receipt (machine and software included). */
int fork_receipt_finish(fork_receipt *rc, frt_model *m, const fork_opts *o);

/* Writes the receipt built by fork_receipt_finish to path (FRT_ERR_IO). */
int fork_receipt_write(const fork_receipt *rc, const char *path);

void fork_receipt_free(fork_receipt *rc);

#endif
