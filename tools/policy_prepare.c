/* policy_prepare.c - frt policy prepare: the exact model inputs of a Pi0 /
 * Pi0.5 policy from camera images, an instruction and a state, written as
 * the safetensors file `frt policy run --inputs` reads (frt/policy_io.h,
 * docs/policies-inputs.md).
 *
 *   frt policy prepare --image CAM=FILE [--image CAM=FILE ...] --prompt TEXT
 *       --state v1,v2,... --tokenizer tokenizer.model [--norm-stats FILE]
 *       [--variant pi0|pi05] [--cameras a,b,c] [--max-tokens N]
 *       [--max-state-dim N] --out inputs.safetensors
 *
 * --image may be repeated (once per camera); it is taken out of argv before
 * the table parser runs, which keeps only the last value of an option. */
#include "args.h"
#include "cli.h"
#include "policy_cli.h"

#include "frt/policy_io.h"
#include "frt/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREP_CMD "policy prepare"

typedef struct prep_opts {
    policy_obs_opts obs;
    const char *variant, *out, *image_help;
    int quiet;
} prep_opts;

/* Moves every "--image X" / "--image=X" of argv into o->images; the other
 * arguments stay in argv (in order), *argc shrinks. -1 when one has no value
 * or there are too many. */
int policy_take_repeated(int *argc, char **argv, const char *name, const char **vals, int max, int *n)
{
    const size_t len = strlen(name);
    int w = 1;
    for (int r = 1; r < *argc; r++) {
        const char *a = argv[r], *v = NULL;
        if (!strcmp(a, "--")) { /* operands from here on */
            while (r < *argc) argv[w++] = argv[r++];
            break;
        }
        if (!strncmp(a, "--", 2) && !strncmp(a + 2, name, len) && a[2 + len] == '=') v = a + 3 + len;
        else if (!strncmp(a, "--", 2) && !strcmp(a + 2, name)) v = r + 1 < *argc ? argv[++r] : NULL;
        else {
            argv[w++] = argv[r];
            continue;
        }
        if (!v || *n >= max) return -1;
        vals[(*n)++] = v;
    }
    *argc = w;
    return 0;
}

int policy_take_images(int *argc, char **argv, policy_obs_opts *o)
{
    return policy_take_repeated(argc, argv, "image", o->images, FRT_POLICY_MAX_CAMERAS + 1, &o->n_images);
}

/* "v1,v2,..." -> finite floats (malloc'd). Usage error message on failure. */
static int parse_state(const frt_cmd_spec *spec, const char *s, float **out, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    float *v = malloc(cap * sizeof *v);
    char *copy = strdup(s);
    size_t k = 0;
    int rc = (!v || !copy) ? frt_args_error(spec, "out of memory") : 0;
    for (char *tok = copy, *next; rc == 0 && tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        double d;
        if (frt_parse_double(tok, -3.4e38, 3.4e38, &d) != FRT_PARSE_OK)
            rc = frt_args_error(spec, "--state: '%s' is not a finite number", tok);
        else v[k++] = (float)d;
    }
    free(copy);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = k;
    return 0;
}

/* "a,b,c" -> names pointing into a malloc'd copy (*buf; free both). */
static int split_cameras(const frt_cmd_spec *spec, const char *s, char **buf, const char **names, size_t *n)
{
    *buf = strdup(s);
    *n = 0;
    if (!*buf) return frt_args_error(spec, "out of memory");
    for (char *tok = *buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        if (!*tok || *n == FRT_POLICY_MAX_CAMERAS)
            return frt_args_error(spec, "--cameras: %s", *tok ? "more than 16 cameras" : "an empty camera name");
        names[(*n)++] = tok;
    }
    return 0;
}

/* Decodes each --image CAM=FILE into imgs[i] and views[i]. */
static int load_views(const frt_cmd_spec *spec, const char *cmd, const policy_obs_opts *o, frt_policy_image *imgs,
                      frt_policy_view *views)
{
    for (int i = 0; i < o->n_images; i++) {
        const char *eq = strchr(o->images[i], '=');
        if (!eq || eq == o->images[i] || !eq[1])
            return frt_args_error(spec, "--image '%s': expected CAMERA=FILE", o->images[i]);
        char *cam = strndup(o->images[i], (size_t)(eq - o->images[i]));
        if (!cam) return frt_args_error(spec, "out of memory");
        views[i] = (frt_policy_view){.camera = cam};
        int rc = frt_policy_image_load(eq + 1, &imgs[i]);
        if (rc < 0) return frt_cli_fail(cmd, rc);
        views[i].height = imgs[i].height;
        views[i].width = imgs[i].width;
        views[i].rgb = imgs[i].rgb;
    }
    return 0;
}

/* Loads the tokenizer and the statistics and builds the inputs. */
static int build(const char *cmd, const policy_obs_opts *o, frt_policy_input_params *p, const frt_policy_view *views,
                 const float *state, size_t n_state, frt_policy_input_set **in, frt_policy_norm_stats **stats)
{
    frt_policy_tokenizer *tok = NULL;
    frt_policy_norm_stats *st = NULL;
    int rc = frt_policy_tokenizer_load(o->tokenizer, &tok);
    if (rc == 0 && o->norm_stats) rc = frt_policy_norm_stats_load(o->norm_stats, &st);
    p->tokenizer = tok;
    p->norm_stats = st;
    if (rc == 0) rc = frt_policy_inputs_build(p, views, (size_t)o->n_images, o->prompt, state, n_state, in);
    frt_policy_tokenizer_free(tok);
    if (rc < 0) {
        frt_policy_norm_stats_free(st);
        return frt_cli_fail(cmd, rc);
    }
    *stats = st;
    return 0;
}

int policy_obs_build(const frt_cmd_spec *spec, const char *cmd, const policy_obs_opts *o,
                     frt_policy_input_set **in, frt_policy_norm_stats **stats)
{
    *in = NULL;
    *stats = NULL;
    if (!o->n_images) return frt_args_error(spec, "at least one --image CAMERA=FILE is required");
    if (!o->prompt || !o->state || !o->tokenizer)
        return frt_args_error(spec, "--prompt, --state and --tokenizer are required with --image");
    frt_policy_input_params p = frt_policy_input_default_params();
    p.variant = o->variant;
    p.max_tokens = (size_t)o->max_tokens;
    p.max_state_dim = (size_t)o->max_state_dim;
    float *state = NULL;
    size_t n_state = 0, n_cams = 0;
    char *cam_buf = NULL;
    const char *cams[FRT_POLICY_MAX_CAMERAS];
    frt_policy_image imgs[FRT_POLICY_MAX_CAMERAS] = {0};
    frt_policy_view views[FRT_POLICY_MAX_CAMERAS] = {0};
    int rc = parse_state(spec, o->state, &state, &n_state);
    if (rc == 0) rc = split_cameras(spec, o->cameras, &cam_buf, cams, &n_cams);
    p.cameras = cams;
    p.n_cameras = n_cams;
    if (rc == 0) rc = load_views(spec, cmd, o, imgs, views);
    if (rc == 0) rc = build(cmd, o, &p, views, state, n_state, in, stats);
    for (int i = 0; i < o->n_images; i++) {
        free((char *)views[i].camera);
        frt_policy_image_free(&imgs[i]);
    }
    free(cam_buf);
    free(state);
    return rc;
}

/* Builds and writes the inputs file. */
static int run(const frt_cmd_spec *spec, prep_opts *o)
{
    if (!o->obs.n_images) return frt_args_error(spec, "at least one --image CAMERA=FILE is required");
    if (!o->obs.prompt || !o->obs.state || !o->obs.tokenizer || !o->out)
        return frt_args_error(spec, "--prompt, --state, --tokenizer and --out are required");
    if (frt_policy_variant_parse(o->variant, &o->obs.variant) < 0) return frt_args_error(spec, "%s", frt_last_error());
    frt_policy_input_set *in = NULL;
    frt_policy_norm_stats *st = NULL;
    int rc = policy_obs_build(spec, PREP_CMD, &o->obs, &in, &st);
    if (rc == 0) {
        int w = frt_policy_inputs_write(in, o->obs.variant, o->out);
        if (w < 0) rc = frt_cli_fail(PREP_CMD, w);
    }
    if (rc == 0 && !o->quiet) {
        if (!in->state_normalized)
            fprintf(stderr, "frt %s: no --norm-stats: the state goes to the model in raw units\n", PREP_CMD);
        if (in->n_prompt_untruncated > in->n_tokens)
            fprintf(stderr, "frt %s: the prompt has %zu tokens, cut to --max-tokens %zu (openpi truncates too)\n",
                    PREP_CMD, in->n_prompt_untruncated, in->n_tokens);
        printf("%s: %zu cameras (%d given), %zu of %zu prompt tokens, state of %zu (%s)\n", o->out, in->n_cameras,
               o->obs.n_images, in->n_prompt_tokens, in->n_tokens, in->state_dim,
               in->state_normalized ? "normalised" : "raw");
    }
    frt_policy_inputs_free(in);
    frt_policy_norm_stats_free(st);
    return rc;
}

int frt_cmd_policy_prepare(int argc, char **argv)
{
    prep_opts o = {.variant = "pi0", .obs = {.cameras = POLICY_DEFAULT_CAMERAS, .max_state_dim = 32}};
    frt_arg opts[] = {
        FRT_OPT(0, "image", FRT_ARG_STR, &o.image_help, "CAM=FILE",
                "a camera's PNG or JPEG (repeat per camera; cameras not given are masked)", .dflt = ""),
        FRT_OPT('p', "prompt", FRT_ARG_STR, &o.obs.prompt, "TEXT", "the instruction", .dflt = ""),
        FRT_OPT(0, "state", FRT_ARG_STR, &o.obs.state, "V1,V2,...", "the robot state in its own units", .dflt = ""),
        FRT_OPT(0, "tokenizer", FRT_ARG_STR, &o.obs.tokenizer, "FILE", "PaliGemma's SentencePiece tokenizer.model",
                .dflt = ""),
        FRT_OPT(0, "norm-stats", FRT_ARG_STR, &o.obs.norm_stats, "FILE",
                "openpi's norm_stats.json (without: the state stays raw)", .dflt = ""),
        FRT_OPT(0, "variant", FRT_ARG_CHOICE, &o.variant, NULL, "prompt and normalisation convention",
                .choices = "pi0|pi05"),
        FRT_OPT(0, "cameras", FRT_ARG_STR, &o.obs.cameras, "A,B,...", "the checkpoint's cameras, in model order"),
        FRT_OPT(0, "max-tokens", FRT_ARG_INT, &o.obs.max_tokens, "N", "prompt length (0: 48 for pi0, 200 for pi05)",
                .min = 0, .max = 1 << 16),
        FRT_OPT(0, "max-state-dim", FRT_ARG_INT, &o.obs.max_state_dim, "N", "state length after zero padding",
                .min = 1, .max = 4096),
        FRT_OPT('o', "out", FRT_ARG_STR, &o.out, "FILE", "the inputs file to write (safetensors)", .dflt = ""),
        FRT_OPT('q', "quiet", FRT_ARG_FLAG, &o.quiet, NULL, "print nothing on success"),
    };
    frt_cmd_spec spec = {PREP_CMD, "--image CAM=FILE... -p TEXT --state V,... --tokenizer FILE -o FILE [options]",
                         "Writes the exact inputs of a Pi0 / Pi0.5 policy (pixel_values, pixel_attention_mask,\n"
                         "input_ids, attention_mask, state) as openpi prepares them: images resized with\n"
                         "padding to 224x224 (PIL bilinear) and scaled to [-1, 1], the prompt tokenized and\n"
                         "padded, the state normalised with norm_stats.json and zero-padded.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0,
                         "docs/policies-inputs.md has the formulas.\n"};
    if (policy_take_images(&argc, argv, &o.obs) < 0)
        return frt_args_error(&spec, "--image needs a value CAMERA=FILE (at most %d)", FRT_POLICY_MAX_CAMERAS);
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    return run(&spec, &o);
}
