/* policy_obs_defaults.c - the defaults of the --image observation options
 * (policy_cli.h) that frt policy run and frt policy rollout take from the
 * checkpoint: its tokenizer, its statistics, its cameras and sizes. */
#include "policy_cli.h"

#include "frt/status.h"

#include <stdio.h>
#include <string.h>

int policy_image_defaults(const char *cmd, const char *dir, const frt_policy_info *pi, policy_image_run *ir)
{
    policy_obs_opts *o = &ir->obs;
    if (frt_policy_variant_parse(pi->model_type, &o->variant) < 0) {
        fprintf(stderr, "frt %s: %s\n", cmd, frt_last_error());
        return 1;
    }
    o->max_tokens = pi->max_tokens;
    o->max_state_dim = pi->max_state_dim;
    if (!o->tokenizer) {
        snprintf(ir->tok_path, sizeof ir->tok_path, "%s/tokenizer.model", dir);
        o->tokenizer = ir->tok_path;
    }
    if (!o->norm_stats) {
        snprintf(ir->stats_path, sizeof ir->stats_path, "%s/norm_stats.json", dir);
        FILE *f = fopen(ir->stats_path, "rb");
        if (f) fclose(f), o->norm_stats = ir->stats_path;
    }
    if (!o->cameras) {
        snprintf(ir->cams, sizeof ir->cams, "%s", POLICY_DEFAULT_CAMERAS);
        char *c = ir->cams;
        for (int k = 0; k < pi->max_cameras && c; k++) c = strchr(c + (k > 0), ',');
        if (c) *c = '\0';
        o->cameras = ir->cams;
    }
    if (pi->image_height != 224 || pi->image_width != 224) {
        fprintf(stderr, "frt %s: --image makes 224 x 224 camera inputs (openpi's resize_with_pad); this model takes "
                "other sizes: give its exact inputs with --inputs FILE.safetensors\n", cmd);
        return 1;
    }
    return 0;
}
