/* policy_run.c - frt policy run: one inference of a Pi0 / Pi0.5 policy
 * (frt/policy.h, docs/policies.md).
 *
 *   frt policy run -m DIR --inputs FILE.safetensors [--out FILE.safetensors]
 *                  [--noise-seed S] [--json] [--backend cpu|cuda] [--dtype default|fp8]
 *                  [--autotune N [--tune-file FILE]]
 *
 * --inputs holds the exact model inputs: pixel_values [cameras, 3, H, W]
 * (float, in [-1, 1]), input_ids [tokens] (I32 or I64), and optionally
 * pixel_attention_mask [cameras] and attention_mask [tokens] (U8, BOOL or
 * I64; absent = all 1), state [n] (float; Pi0 only) and noise [chunk,
 * action_dim] (float). Without noise in the file the noise is the episode
 * stream of --noise-seed (default 0); giving both is refused. Prints the
 * action chunk, one row per line (--json: one JSON object); --out writes
 * it as `actions` F32 [chunk, action_dim].
 * --image CAM=FILE -p TEXT --state V,.. builds the inputs as frt policy
 * prepare does instead (--tokenizer, --norm-stats and --cameras go with
 * --image only: with --inputs they are refused, the file being the model's
 * inputs and the chunk printed un-normalised).
 *
 * Several --inputs (up to FRT_POLICY_BATCH_MAX, or half that with
 * --cfg-beta) run as one batch of rollouts (frt_policy_run_batch, the
 * model loaded with the slots they take): one chunk per file in order
 * ("# rollout R" before each; --json: `rollouts` and `actions` [R][chunk]
 * [action_dim]; --out: `actions` [R, chunk, action_dim]).
 *
 * --cfg-beta B (>= 1) turns on classifier-free guidance (frt_policy_set_cfg):
 * with --inputs the file must hold input_ids_cond (and optionally
 * attention_mask_cond), the conditioned prompt's ids; with --image the
 * conditioned prompt is built here (frt_policy_cfg_prompt: the instruction
 * + "Advantage: positive", or negative with --advantage negative). Without
 * --cfg-beta a file's input_ids_cond is not used, and the command says so. */
#include "args.h"
#include "cli.h"
#include "policy_cli.h"

#include "frt/policy.h"
#include "frt/safetensors.h"
#include "frt/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The observation read from --inputs; owns its arrays. */
typedef struct obs {
    frt_safetensors *st;
    float *px, *state, *noise;
    uint8_t *cam, *am, *am_cond;
    int32_t *ids, *ids_cond;
    frt_policy_inputs in;
} obs;

/* --cfg-beta / --advantage. */
typedef struct cfg_opts {
    int on;             /* --cfg-beta given */
    float beta;
    const char *advantage; /* "positive" | "negative" (NULL: not given) */
} cfg_opts;

static void obs_free(obs *o)
{
    frt_safetensors_close(o->st);
    free(o->px);
    free(o->state);
    free(o->noise);
    free(o->cam);
    free(o->am);
    free(o->ids);
    free(o->am_cond);
    free(o->ids_cond);
}

static int fail(const char *cmd, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "frt policy %s: ", cmd);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

/* A float tensor of `ndim` dims as f32 (NULL when absent and optional). */
static int read_float(const char *path, frt_safetensors *st, const char *name, int ndim, int required, float **out,
                      const frt_tensor **tt)
{
    const frt_tensor *t = frt_safetensors_find(st, name);
    *out = NULL;
    if (!t) return required ? fail("run", "%s: no tensor '%s'", path, name) : 0;
    if (!frt_dtype_is_float(t->dtype) || t->ndim != ndim)
        return fail("run", "%s: '%s' must be a float tensor of the documented rank", path, name);
    *out = malloc((size_t)frt_tensor_numel(t) * sizeof(float) + 4);
    if (!*out || frt_tensor_to_f32(t, *out) < 0) return fail("run", "%s: cannot read '%s'", path, name);
    if (tt) *tt = t;
    return 0;
}

/* A 1-D integer / bool tensor of n elements as i32 values. */
static int read_ints(const char *path, frt_safetensors *st, const char *name, int64_t n_want, int32_t **out,
                     int64_t *n)
{
    const frt_tensor *t = frt_safetensors_find(st, name);
    *out = NULL;
    if (!t) return 0;
    if (t->ndim != 1 || (n_want >= 0 && t->shape[0] != n_want))
        return fail("run", "%s: '%s' must be 1-D with one value per camera / token", path, name);
    int64_t k = t->shape[0];
    *out = malloc((size_t)(k ? k : 1) * sizeof(int32_t));
    if (!*out) return fail("run", "%s: out of memory for '%s'", path, name);
    for (int64_t i = 0; i < k; i++) {
        const unsigned char *p = (const unsigned char *)t->data;
        int64_t v;
        if (t->dtype == FRT_DT_I32) {
            int32_t x;
            memcpy(&x, p + 4 * i, 4);
            v = x;
        } else if (t->dtype == FRT_DT_I64) {
            memcpy(&v, p + 8 * i, 8);
        } else if (t->dtype == FRT_DT_U8 || t->dtype == FRT_DT_BOOL) {
            v = p[i];
        } else {
            return fail("run", "%s: '%s' must be I32, I64, U8 or BOOL", path, name);
        }
        if (v < INT32_MIN || v > INT32_MAX) return fail("run", "%s: a value of '%s' is out of range", path, name);
        (*out)[i] = (int32_t)v;
    }
    *n = k;
    return 0;
}

/* A 0/1 mask as u8 (values outside 0/1 kept as 2 so the library names
 * them); *out stays NULL for an absent mask. Returns 1 when out of memory. */
static int to_mask(const int32_t *v, int64_t n, uint8_t **out)
{
    *out = NULL;
    if (!v) return 0;
    uint8_t *m = malloc((size_t)(n ? n : 1));
    if (!m) return fail("run", "%s%s", "out of memory", "");
    for (int64_t i = 0; i < n; i++) m[i] = v[i] == 0 ? 0 : v[i] == 1 ? 1 : 2;
    *out = m;
    return 0;
}

static int obs_read(const char *path, obs *o)
{
    memset(o, 0, sizeof *o);
    int rc = frt_safetensors_open(path, &o->st);
    if (rc) return frt_cli_fail("policy run", rc);
    const frt_tensor *pv = NULL, *nz = NULL;
    if (read_float(path, o->st, "pixel_values", 4, 1, &o->px, &pv)) return 1;
    int64_t n_ids = 0, n = 0;
    if (read_ints(path, o->st, "input_ids", -1, &o->ids, &n_ids)) return 1;
    if (!o->ids) return fail("run", "%s: no tensor '%s'", path, "input_ids");
    int32_t *cam = NULL, *am = NULL;
    int bad = read_ints(path, o->st, "pixel_attention_mask", pv->shape[0], &cam, &n) ||
              read_ints(path, o->st, "attention_mask", n_ids, &am, &n);
    if (!bad) bad = to_mask(cam, pv->shape[0], &o->cam) || to_mask(am, n_ids, &o->am);
    free(cam);
    free(am);
    if (bad) return 1;
    const frt_tensor *stt = NULL;
    if (read_float(path, o->st, "state", 1, 0, &o->state, &stt)) return 1;
    if (read_float(path, o->st, "noise", 2, 0, &o->noise, &nz)) return 1;
    int64_t n_cond = 0;
    if (read_ints(path, o->st, "input_ids_cond", -1, &o->ids_cond, &n_cond)) return 1;
    if (read_ints(path, o->st, "attention_mask_cond", o->ids_cond ? n_cond : 0, &am, &n)) return 1;
    bad = to_mask(am, n_cond, &o->am_cond);
    free(am);
    if (bad) return 1;
    if (o->am_cond && !o->ids_cond) return fail("run", "%s: attention_mask_cond without input_ids_cond", path, "");
    o->in = (frt_policy_inputs){o->px, (int)pv->shape[0], (int)pv->shape[1], (int)pv->shape[2], (int)pv->shape[3],
                                o->cam, o->ids, o->am, (int)n_ids, o->state, stt ? (int)stt->shape[0] : 0,
                                o->noise, o->ids_cond, o->am_cond, (int)n_cond};
    return 0;
}

/* Turns guidance on when --cfg-beta was given (the library checks beta). */
static int cfg_apply(frt_model *m, const cfg_opts *c)
{
    if (!c->on) return 0;
    int rc = frt_policy_set_cfg(m, 1, c->beta, !c->advantage || strcmp(c->advantage, "negative") != 0);
    return rc < 0 ? frt_cli_fail("policy run", rc) : 0;
}

/* One chunk [chunk, action_dim] as a JSON array of rows. */
static void print_chunk_json(const frt_policy_info *pi, const float *a)
{
    printf("[");
    for (int r = 0; r < pi->chunk; r++) {
        printf("%s[", r ? ", " : "");
        for (int c = 0; c < pi->action_dim; c++) printf("%s%.9g", c ? ", " : "", (double)a[r * pi->action_dim + c]);
        printf("]");
    }
    printf("]");
}

/* The chunk (batch 0), or the chunks of `batch` rollouts [batch, chunk,
 * action_dim]: one row per line, each rollout after a "# rollout R" line;
 * JSON: `actions` is the chunk, or with `rollouts` the array of chunks. */
static void print_actions(const frt_policy_info *pi, const float *a, int batch, int json, double secs)
{
    const size_t per = (size_t)pi->chunk * pi->action_dim;
    if (json) {
        printf("{\"model_type\": \"%s\", \"chunk\": %d, \"action_dim\": %d, \"seconds\": %.6f, ", pi->model_type,
               pi->chunk, pi->action_dim, secs);
        if (batch) printf("\"rollouts\": %d, ", batch);
        printf("\"actions\": %s", batch ? "[" : "");
        for (int b = 0; b < (batch ? batch : 1); b++) {
            if (b) printf(", ");
            print_chunk_json(pi, a + b * per);
        }
        printf("%s}\n", batch ? "]" : "");
        return;
    }
    for (int b = 0; b < (batch ? batch : 1); b++) {
        if (batch) printf("# rollout %d\n", b);
        for (int r = 0; r < pi->chunk; r++) {
            for (int c = 0; c < pi->action_dim; c++)
                printf("%s%.6g", c ? " " : "", (double)a[b * per + r * pi->action_dim + c]);
            printf("\n");
        }
    }
}

/* `actions` F32 [chunk, action_dim], or [batch, chunk, action_dim]. */
static int write_out(const char *path, const frt_policy_info *pi, const float *a, int batch)
{
    frt_st_writer *w = NULL;
    int64_t shape[3] = {batch, pi->chunk, pi->action_dim};
    int rc = frt_st_writer_create(&w);
    if (rc == 0) rc = frt_st_writer_add(w, "actions", FRT_DT_F32, batch ? 3 : 2, batch ? shape : shape + 1, a);
    if (rc == 0) rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    return rc ? frt_cli_fail("policy run", rc) : 0;
}

/* What a file holds that this run does not pass to the model, said. */
static void drop_unused(const frt_policy_info *pi, const cfg_opts *cfg, const char *path, obs *o)
{
    if (!cfg->on && o->in.input_ids_cond) {
        fprintf(stderr, "frt policy run: %s: no --cfg-beta: the file's input_ids_cond is not used\n", path);
        o->in.input_ids_cond = NULL, o->in.attention_mask_cond = NULL, o->in.n_tokens_cond = 0;
    }
    if (pi->state_in_prompt && o->in.state) {
        /* frt policy prepare writes Pi0.5's state too: its prompt holds it, discretised */
        fprintf(stderr, "frt policy run: %s: %s takes the state in the prompt: the file's `state` is not an input\n",
                path, pi->model_type);
        o->in.state = NULL;
        o->in.n_state = 0;
    }
}

/* The runs of --inputs: n = 1, one inference; n > 1, one batch of n
 * rollouts (frt_policy_run_batch) on a model loaded with the slots they
 * take (n, 2 n under CFG). */
typedef struct run_spec {
    const char *dir, *out, *const *paths;
    frt_model_params mp;
    const cfg_opts *cfg;
    int n, seed_given, json;
    unsigned long long seed;
} run_spec;

/* Loads, runs, prints / writes the chunk(s) of the observations o[0 .. n). */
static int run_inputs(run_spec *rs, obs *o)
{
    frt_model *m = NULL;
    const int n = rs->n;
    if (n > 1) rs->mp.policy_batch = n * (rs->cfg->on ? 2 : 1);
    int rc = frt_cli_load_model("policy run", rs->dir, &rs->mp, 1, &m);
    if (rc) return frt_cli_fail("policy run", rc);
    if (cfg_apply(m, rs->cfg)) {
        frt_model_free(m);
        return 1;
    }
    frt_policy_info pi;
    float *a = NULL;
    frt_policy_inputs *in = malloc((size_t)n * sizeof *in);
    rc = in ? frt_policy_info_get(m, &pi) : FRT_ERR_OUT_OF_MEMORY;
    for (int r = 0; rc == 0 && r < n; r++) {
        drop_unused(&pi, rs->cfg, rs->paths[r], &o[r]);
        in[r] = o[r].in;
    }
    const size_t na = rc == 0 ? (size_t)pi.chunk * pi.action_dim * (size_t)n : 0;
    if (rc == 0 && !(a = malloc(na * sizeof(float)))) rc = FRT_ERR_OUT_OF_MEMORY;
    if (rc == 0 && rs->seed_given) rc = frt_policy_episode_start(m, rs->seed);
    double t0 = frt_cli_now_s();
    if (rc == 0) rc = n > 1 ? frt_policy_run_batch(m, in, n, a, na) : frt_policy_run(m, in, a, na);
    double secs = frt_cli_now_s() - t0;
    int ret = rc ? frt_cli_fail("policy run", rc) : 0;
    if (ret == 0) print_actions(&pi, a, n > 1 ? n : 0, rs->json, secs);
    if (ret == 0 && rs->out) ret = write_out(rs->out, &pi, a, n > 1 ? n : 0);
    free(a);
    free(in);
    frt_model_free(m);
    return ret;
}

/* The library's input set as the model's inputs (views into *in). */
static frt_policy_inputs inputs_of(const frt_policy_input_set *in, const frt_policy_info *pi)
{
    frt_policy_inputs x = {in->pixel_values, (int)in->n_cameras, 3, 224, 224, in->pixel_attention_mask,
                           in->input_ids, in->attention_mask, (int)in->n_tokens,
                           pi->state_in_prompt ? NULL : in->state, pi->state_in_prompt ? 0 : (int)in->state_dim,
                           NULL, NULL, NULL, 0};
    return x;
}

/* Under CFG: the conditioned prompt (frt_policy_cfg_prompt) built into a
 * second input set the same way; its ids go into x as input_ids_cond. */
static int build_cond(const frt_cmd_spec *spec, const cfg_opts *cfg, policy_image_run *ir,
                      frt_policy_input_set **in_cond, frt_policy_inputs *x)
{
    if (!cfg->on) return 0;
    char *text = NULL;
    int rc = frt_policy_cfg_prompt(ir->obs.prompt, !cfg->advantage || strcmp(cfg->advantage, "negative") != 0, &text);
    if (rc < 0) return frt_cli_fail("policy run", rc);
    policy_obs_opts oc = ir->obs;
    oc.prompt = text;
    frt_policy_norm_stats *st = NULL;
    int ret = policy_obs_build(spec, "policy run", &oc, in_cond, &st);
    frt_policy_norm_stats_free(st);
    free(text);
    if (ret) return ret;
    x->input_ids_cond = (*in_cond)->input_ids;
    x->attention_mask_cond = (*in_cond)->attention_mask;
    x->n_tokens_cond = (int)(*in_cond)->n_tokens;
    return 0;
}

/* One inference from images, a prompt and a state: the inputs built as
 * frt policy prepare builds them, the chunk un-normalised with the
 * statistics (and sliced to their action length) when there are any. */
static int run_images(const char *dir, const frt_model_params *mp, policy_image_run *ir, const cfg_opts *cfg,
                      int seed_given, unsigned long long seed, int json, const char *out, const frt_cmd_spec *spec)
{
    frt_model *m = NULL;
    int rc = frt_cli_load_model("policy run", dir, mp, 1, &m);
    if (rc) return frt_cli_fail("policy run", rc);
    frt_policy_info pi;
    frt_policy_input_set *in = NULL, *in_cond = NULL;
    frt_policy_norm_stats *st = NULL;
    float *a = NULL, *u = NULL;
    int ret = frt_policy_info_get(m, &pi) < 0 ? frt_cli_fail("policy run", FRT_ERR_STATE) : 0;
    if (ret == 0) ret = cfg_apply(m, cfg);
    if (ret == 0) ret = policy_image_defaults("policy run", dir, &pi, ir);
    if (ret == 0) ret = policy_obs_build(spec, "policy run", &ir->obs, &in, &st);
    size_t na = (size_t)pi.chunk * (size_t)pi.action_dim;
    if (ret == 0 && (!(a = malloc(na * sizeof *a)) || !(u = malloc(na * sizeof *u))))
        ret = frt_cli_fail("policy run", FRT_ERR_OUT_OF_MEMORY);
    if (ret == 0 && !st) fprintf(stderr, "frt policy run: no norm_stats.json: the state and actions are raw values\n");
    frt_policy_inputs x = {0};
    if (ret == 0) x = inputs_of(in, &pi);
    if (ret == 0) ret = build_cond(spec, cfg, ir, &in_cond, &x);
    if (ret == 0 && seed_given && (rc = frt_policy_episode_start(m, seed)) < 0) ret = frt_cli_fail("policy run", rc);
    double t0 = frt_cli_now_s();
    if (ret == 0 && (rc = frt_policy_run(m, &x, a, na)) < 0) ret = frt_cli_fail("policy run", rc);
    double secs = frt_cli_now_s() - t0;
    frt_policy_info po = pi; /* the printed chunk: the robot's action length */
    if (ret == 0 && st) {
        size_t dim = frt_policy_norm_stats_dim(st, "actions", NULL);
        po.action_dim = dim && dim < (size_t)pi.action_dim ? (int)dim : pi.action_dim;
        rc = frt_policy_unnormalize_actions(st, ir->obs.variant, a, (size_t)pi.chunk, (size_t)pi.action_dim,
                                            (size_t)po.action_dim, u);
        if (rc < 0) ret = frt_cli_fail("policy run", rc);
    } else if (ret == 0) {
        memcpy(u, a, na * sizeof *a);
    }
    if (ret == 0) print_actions(&po, u, 0, json, secs);
    if (ret == 0 && out) ret = write_out(out, &po, u, 0);
    free(a);
    free(u);
    frt_policy_inputs_free(in);
    frt_policy_inputs_free(in_cond);
    frt_policy_norm_stats_free(st);
    frt_model_free(m);
    return ret;
}

static int cmd_run(int argc, char **argv)
{
    const char *dir = NULL, *inputs_help = NULL, *out = NULL, *image_help = NULL, *paths[FRT_POLICY_BATCH_MAX];
    const char *dtype = "default", *tune_file = NULL;
    int n_inputs = 0, autotune = 0;
    unsigned long long seed = 0;
    int json = 0, backend = FRT_ARG_BACKEND_AUTO;
    policy_image_run ir;
    memset(&ir, 0, sizeof ir);
    cfg_opts cfg = {0, 1.0f, NULL};
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &dir, "DIR", "the policy checkpoint directory", .dflt = ""),
        FRT_OPT(0, "inputs", FRT_ARG_STR, &inputs_help, "FILE",
                "the exact model inputs (.safetensors); repeated: one batch of rollouts, one a file", .dflt = ""),
        FRT_OPT(0, "out", FRT_ARG_STR, &out, "FILE", "write the chunk as `actions` to this .safetensors", .dflt = ""),
        FRT_OPT(0, "noise-seed", FRT_ARG_U64, &seed, "S", "the episode's noise seed (when the inputs hold no noise)"),
        FRT_OPT(0, "json", FRT_ARG_FLAG, &json, NULL, "print one JSON object"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &backend, NULL, "where the policy runs"),
        FRT_OPT(0, "dtype", FRT_ARG_CHOICE, &dtype, "DTYPE",
                "weight precision: the checkpoint's, or the prefix's MLP in FP8 E4M3 (cuda; docs/policies.md)",
                .choices = "default|fp8"),
        FRT_CLI_OPT_AUTOTUNE(&autotune),
        FRT_CLI_OPT_TUNE_FILE(&tune_file),
        FRT_OPT(0, "image", FRT_ARG_STR, &image_help, "CAM=FILE",
                "instead of --inputs: a camera's PNG or JPEG (repeat per camera; others are masked)", .dflt = ""),
        FRT_OPT('p', "prompt", FRT_ARG_STR, &ir.obs.prompt, "TEXT", "with --image: the instruction", .dflt = ""),
        FRT_OPT(0, "state", FRT_ARG_STR, &ir.obs.state, "V1,V2,..", "with --image: the robot state in its units",
                .dflt = ""),
        FRT_OPT(0, "tokenizer", FRT_ARG_STR, &ir.obs.tokenizer, "FILE",
                "with --image: SentencePiece tokenizer.model (default DIR/tokenizer.model)", .dflt = ""),
        FRT_OPT(0, "norm-stats", FRT_ARG_STR, &ir.obs.norm_stats, "FILE",
                "with --image: openpi's norm_stats.json (default DIR/norm_stats.json when present)", .dflt = ""),
        FRT_OPT(0, "cameras", FRT_ARG_STR, &ir.obs.cameras, "A,B,..",
                "with --image: the checkpoint's cameras in model order (default: openpi's names)", .dflt = ""),
        FRT_OPT(0, "cfg-beta", FRT_ARG_FLOAT, &cfg.beta, "B",
                "classifier-free guidance (RECAP) with weight B >= 1; --inputs then needs input_ids_cond",
                .fmin = -1e30, .fmax = 1e30),
        FRT_OPT(0, "advantage", FRT_ARG_CHOICE, &cfg.advantage, NULL,
                "with --cfg-beta and --image: the indicator of the conditioned prompt (default positive)",
                .choices = "positive|negative"),
    };
    frt_cmd_spec spec = {"policy run",
                         "-m DIR (--inputs FILE.safetensors | --image CAM=FILE... -p TEXT --state V,..) [options]",
                         "Runs one inference of a Pi0 / Pi0.5 policy and prints the action chunk [chunk,\n"
                         "action_dim], one row per line (docs/policies.md). The observation is the exact model\n"
                         "inputs (--inputs), or camera images, an instruction and a state prepared as\n"
                         "frt policy prepare does (openpi's transforms); with norm_stats.json the chunk is\n"
                         "un-normalised and sliced to the robot's action length. Several --inputs run as one\n"
                         "batch of rollouts (frt_policy_run_batch), one chunk per file, in order.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    if (policy_take_images(&argc, argv, &ir.obs) < 0)
        return frt_args_error(&spec, "--image needs a value CAMERA=FILE (at most %d)", FRT_POLICY_MAX_CAMERAS);
    if (policy_take_repeated(&argc, argv, "inputs", paths, FRT_POLICY_BATCH_MAX, &n_inputs) < 0)
        return frt_args_error(&spec, "--inputs needs a value FILE (at most %d)", FRT_POLICY_BATCH_MAX);
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!dir) return frt_args_error(&spec, "-m/--model DIR is required");
    if (tune_file && autotune == 0) return frt_args_error(&spec, "--tune-file needs --autotune N");
    int image_mode = ir.obs.n_images || ir.obs.prompt || ir.obs.state;
    if (image_mode && n_inputs) return frt_args_error(&spec, "give the observation once: --inputs FILE or --image ...");
    int seed_given0 = frt_args_find(&spec, "noise-seed")->given > 0;
    cfg.on = frt_args_find(&spec, "cfg-beta")->given > 0;
    if (cfg.advantage && !cfg.on) return frt_args_error(&spec, "--advantage needs --cfg-beta B");
    if (cfg.advantage && !image_mode)
        return frt_args_error(&spec, "--advantage builds the conditioned prompt (--image mode); with --inputs the "
                                     "file's input_ids_cond is the conditioned prompt");
    if (image_mode) {
        frt_model_params mp = frt_model_default_params();
        mp.backend = (frt_backend)frt_args_backend(backend);
        mp.weight_dtype = !strcmp(dtype, "fp8") ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
        mp.gemm_autotune = autotune, mp.gemm_tune_file = tune_file;
        return run_images(dir, &mp, &ir, &cfg, seed_given0, seed, json, out, &spec);
    }
    if (!n_inputs) return frt_args_error(&spec, "--inputs FILE (or --image ...) is required");
    static const char *const image_only[] = {"tokenizer", "norm-stats", "cameras"};
    const char *img_opt = FRT_ARGS_FIRST_GIVEN(&spec, image_only);
    if (img_opt)
        return frt_args_error(&spec, "--%s goes with --image: an --inputs file holds the exact model inputs (nothing "
                                     "is tokenised, normalised or mapped to cameras; the chunk is the model's, not "
                                     "un-normalised)", img_opt);
    if (n_inputs > 1 && cfg.on && 2 * n_inputs > FRT_POLICY_BATCH_MAX)
        return frt_args_error(&spec, "--cfg-beta takes two slots a rollout: at most %d --inputs", FRT_POLICY_BATCH_MAX / 2);
    run_spec rs = {dir, out, paths, frt_model_default_params(), &cfg, n_inputs, seed_given0, json, seed};
    rs.mp.backend = (frt_backend)frt_args_backend(backend);
    rs.mp.weight_dtype = !strcmp(dtype, "fp8") ? FRT_WEIGHT_FP8 : FRT_WEIGHT_DEFAULT;
    rs.mp.gemm_autotune = autotune, rs.mp.gemm_tune_file = tune_file;
    obs *o = calloc((size_t)n_inputs, sizeof *o);
    int ret = o ? 0 : frt_args_error(&spec, "out of memory");
    for (int r = 0; ret == 0 && r < n_inputs; r++) {
        ret = obs_read(paths[r], &o[r]);
        if (ret == 0 && seed_given0 && o[r].noise)
            ret = frt_args_error(&spec, "--noise-seed and a `noise` tensor in %s: give one", paths[r]);
    }
    if (ret == 0) ret = run_inputs(&rs, o);
    for (int r = 0; o && r < n_inputs; r++) obs_free(&o[r]);
    free(o);
    return ret;
}

int frt_cmd_policy_run(int argc, char **argv)
{
    argv[0] = "policy run";
    return cmd_run(argc, argv);
}
