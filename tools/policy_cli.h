/* policy_cli.h - the observation options frt policy prepare and frt policy
 * run share (policy_prepare.c): camera images, an instruction and a state,
 * turned into a policy's exact inputs (frt/policy_io.h). */
#ifndef FRT_TOOLS_POLICY_CLI_H
#define FRT_TOOLS_POLICY_CLI_H

#include "args.h"

#include "frt/policy.h"
#include "frt/policy_io.h"

/* openpi's IMAGE_KEYS, in model order. */
#define POLICY_DEFAULT_CAMERAS "base_0_rgb,left_wrist_0_rgb,right_wrist_0_rgb"

typedef struct policy_obs_opts {
    const char *prompt, *state, *tokenizer, *norm_stats, *cameras; /* --prompt, --state V,.., files, A,B,.. */
    int max_tokens, max_state_dim;                                 /* 0: the variant's default */
    frt_policy_variant variant;
    const char *images[FRT_POLICY_MAX_CAMERAS + 1]; /* "CAM=FILE" of each --image */
    int n_images;
} policy_obs_opts;

/* Moves every "--NAME X" / "--NAME=X" of argv (before a "--") into
 * vals[*n ..] (argv keeps the other arguments in order, *argc shrinks): the
 * table parser keeps only the last value of an option. -1 when one has no
 * value or there would be more than max. */
int policy_take_repeated(int *argc, char **argv, const char *name, const char **vals, int max, int *n);

/* Moves every "--image X" / "--image=X" of argv into o->images (argv keeps
 * the other arguments in order, *argc shrinks): the table parser keeps only
 * the last value of an option. -1 when one has no value or there are more
 * than FRT_POLICY_MAX_CAMERAS. */
int policy_take_images(int *argc, char **argv, policy_obs_opts *o);

/* Decodes the images, tokenizes the prompt, normalises the state (with
 * o->norm_stats when set) and builds the inputs: *in (frt_policy_inputs_free)
 * and *stats (the statistics, NULL without; frt_policy_norm_stats_free).
 * Returns 0, or the exit status after printing the error (2: usage, 1: a
 * bad file or value). */
int policy_obs_build(const frt_cmd_spec *spec, const char *cmd, const policy_obs_opts *o,
                     frt_policy_input_set **in, frt_policy_norm_stats **stats);

/* The --image mode's options and the files found beside the checkpoint
 * when not given. */
typedef struct policy_image_run {
    policy_obs_opts obs;
    char tok_path[4096], stats_path[4096], cams[256];
} policy_image_run;

/* Fills what ir->obs leaves unset from the checkpoint DIR and the model's
 * sizes (policy_obs_defaults.c): DIR/tokenizer.model, DIR/norm_stats.json
 * when present, the first max_cameras of openpi's camera names, the
 * variant, prompt length and state length. Returns 0, or 1 after printing
 * the error ("frt CMD: ..."): an unknown variant, cameras not 224 x 224. */
int policy_image_defaults(const char *cmd, const char *dir, const frt_policy_info *pi, policy_image_run *ir);

#endif
