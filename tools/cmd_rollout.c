/* cmd_rollout.c - frt policy rollout: the rollout host of frt/rollout.h
 * driven by the deterministic fake robot, or by one observation built from
 * images, a prompt and a state as frt policy run --image builds it (every
 * tick sees it; docs/robot.md).
 *
 *   frt policy rollout -m DIR --fake-robot [--robot-seed S] [--cameras N] [--prompt-ids LIST]
 *       [--planner DIR | --planner-shape S] [--interrupt-at N --interrupt-ids LIST] EPISODES
 *   frt policy rollout -m DIR --image CAM=FILE.. -p TEXT [--state V,..] EPISODES
 *     EPISODES: [--episodes E] [--max-chunks N] [--critic FILE | --random-critic] [--value-stop V]
 *               [--timeout S] [--stop-after N] [--record DIR] [--serial] [--json]
 *   frt policy rollout -m DIR (--fake-robot | --image ..) --bench [--ticks N] [--resets N]
 *       [--critic FILE | --random-critic]
 *
 * An option that does nothing in the mode chosen is a usage error naming
 * it (check_mode_opts): with --image every tick carries -p TEXT's ids, so
 * the hand-off prompt (--prompt-ids, --interrupt-*, the planner) and the
 * fake robot (--robot-seed, --cameras) are unused; --bench runs neither
 * episodes nor their stops, records or JSON; --ticks / --resets are the
 * bench's; --planner-every / --subtask-tokens need a planner.
 *
 * One line (or JSON object) per episode: chunks, stop reason, values,
 * per-tick milliseconds, the reset's milliseconds, the .npz written. The
 * bench prints per-tick latency of the policy alone, policy + critic as one
 * plan and serially, the critic alone, and the episode reset, each next to
 * its floor or target. */
#include "args.h"
#include "cli.h"
#include "gen_model.h"
#include "policy_cli.h"

#include "frt/checkpoint.h"
#include "frt/debug.h"
#include "frt/fs.h"
#include "frt/rollout.h"
#include "frt/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    const char *dir, *critic, *record, *planner, *planner_shape, *prompt_ids, *interrupt_ids;
    int fake, random_critic, episodes, max_chunks, serial, json, stop_after, interrupt_at, every, subtask;
    int cameras, bench, ticks, resets, backend;
    unsigned long long seed, robot_seed;
    double timeout, value_stop;
    int value_given;
    policy_image_run img;  /* --image / --prompt / --state: the one observation */
    const frt_cmd_spec *spec;
} opts;

/* Everything one run holds. */
typedef struct host {
    frt_model *policy, *llm;
    frt_checkpoint *llm_ck;
    frt_critic *critic;
    frt_fake_robot *robot;
    frt_policy_input_set *in; /* --image: the observation of every tick (NULL: the fake robot's) */
    frt_policy_norm_stats *stats;
    frt_policy_inputs x;
    char tmp[64];          /* the random critic's directory ("" when none) */
    int32_t *ids, *irq;
    size_t n_ids, n_irq;
    int na;                /* chunk * action_dim */
} host;

static void host_free(host *h)
{
    frt_policy_inputs_free(h->in);
    frt_policy_norm_stats_free(h->stats);
    frt_fake_robot_free(h->robot);
    frt_critic_free(h->critic);
    frt_model_free(h->llm);
    frt_checkpoint_close(h->llm_ck);
    frt_model_free(h->policy);
    if (h->tmp[0]) {
        char p[128];
        snprintf(p, sizeof p, "%s/critic.safetensors", h->tmp);
        unlink(p);
        rmdir(h->tmp);
    }
    free(h->ids);
    free(h->irq);
}

static int fail(const char *what)
{
    fprintf(stderr, "frt policy rollout: %s: %s\n", what, frt_last_error());
    return 1;
}

/* A random critic for the policy's sizes in a temporary directory. */
static int random_critic(host *h, unsigned long long seed)
{
    frt_policy_info pi;
    frt_model_info mi;
    if (frt_policy_info_get(h->policy, &pi) || frt_model_info_get(h->policy, &mi)) return fail("policy");
    int width = 0;
    for (int i = 0; i < mi.n_io; i++) {
        frt_io_info io;
        if (frt_model_io_info(h->policy, i, &io) == 0 && !strcmp(io.name, "vision_tokens")) width = (int)io.shape[2];
    }
    snprintf(h->tmp, sizeof h->tmp, "/tmp/frt_critic_XXXXXX");
    if (!mkdtemp(h->tmp)) {
        h->tmp[0] = 0;
        fprintf(stderr, "frt policy rollout: cannot create a temporary directory\n");
        return 1;
    }
    char p[128];
    snprintf(p, sizeof p, "%s/critic.safetensors", h->tmp);
    int sd = pi.max_state_dim > 0 ? pi.max_state_dim : 1;
    if (frt_critic_write_random(p, sd, width, 64, 2, seed) < 0) return fail("random critic");
    if (frt_critic_load(h->policy, p, &h->critic) < 0) return fail("critic");
    return 0;
}

/* The planner LLM, in the policy's context (one context, two models). */
static int load_planner(host *h, const opts *o, const frt_model_params *policy_mp)
{
    frt_model_params mp = *policy_mp;
    mp.context = frt_model_context(h->policy);
    if (o->planner) return frt_model_load(o->planner, &mp, &h->llm) < 0 ? fail(o->planner) : 0;
    frt_model_config cfg;
    if (frt_gen_model_build(o->planner_shape, 1, &cfg, &h->llm_ck) < 0) return fail(o->planner_shape);
    mp.max_seq = 512;
    return frt_model_load_checkpoint(h->llm_ck, &cfg, NULL, &mp, &h->llm) < 0 ? fail("planner") : 0;
}

/* The --image observation, built as frt policy run --image builds it. */
static int image_obs(host *h, const opts *o, const frt_policy_info *pi)
{
    policy_image_run ir = o->img;
    if (policy_image_defaults("policy rollout", o->dir, pi, &ir)) return 1;
    int ret = policy_obs_build(o->spec, "policy rollout", &ir.obs, &h->in, &h->stats);
    if (ret) return ret;
    const frt_policy_input_set *in = h->in;
    h->x = (frt_policy_inputs){in->pixel_values, (int)in->n_cameras, 3, 224, 224, in->pixel_attention_mask,
                               in->input_ids, in->attention_mask, (int)in->n_tokens,
                               pi->state_in_prompt ? NULL : in->state, pi->state_in_prompt ? 0 : (int)in->state_dim,
                               NULL, NULL, NULL, 0};
    return 0;
}

static int host_open(host *h, const opts *o)
{
    frt_model_params mp = frt_model_default_params();
    mp.backend = (frt_backend)frt_args_backend(o->backend);
    if (frt_model_load(o->dir, &mp, &h->policy) < 0) return fail(o->dir);
    frt_policy_info pi;
    if (frt_policy_info_get(h->policy, &pi) < 0) return fail(o->dir);
    h->na = pi.chunk * pi.action_dim;
    if (o->critic && frt_critic_load(h->policy, o->critic, &h->critic) < 0) return fail(o->critic);
    if (o->random_critic && random_critic(h, o->seed)) return 1;
    if ((o->planner || o->planner_shape) && load_planner(h, o, &mp)) return 1;
    if (frt_fake_robot_create(h->policy, o->robot_seed, o->cameras, &h->robot) < 0) return fail("fake robot");
    return o->img.obs.n_images ? image_obs(h, o, &pi) : 0;
}

/* Observation t: the fake robot's, or the --image one. */
static int observe(host *h, int64_t t, frt_policy_inputs *obs)
{
    if (!h->in) return frt_fake_robot_observe(h->robot, t, obs);
    *obs = h->x;
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of x[n] (sorts x). */
static double quantile(double *x, int n, double q)
{
    if (n < 1) return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return x[i];
}

/* One episode; returns 0 or 1 (printed). */
static int run_episode(frt_rollout *r, host *h, const opts *o, int e)
{
    float *a = malloc((size_t)h->na * sizeof *a);
    double *ms = malloc((size_t)o->max_chunks * sizeof *ms);
    double vmin = INFINITY, vsum = 0;
    int n = 0, rc = 0;
    frt_rollout_tick_out t = {0};
    while (a && ms && rc == 0) {
        if (o->stop_after > 0 && n == o->stop_after) frt_rollout_request_stop(r);
        if (o->interrupt_at > 0 && n == o->interrupt_at) rc = frt_rollout_set_prompt(r, h->irq, (int)h->n_irq);
        frt_policy_inputs obs;
        if (rc == 0) rc = observe(h, n, &obs);
        if (rc == 0) rc = frt_rollout_tick(r, &obs, a, (size_t)h->na, &t);
        if (rc < 0 || !t.ran) break;
        ms[n++] = t.ms;
        vmin = fmin(vmin, t.value);
        vsum += t.value;
        if (t.stop != FRT_STOP_NONE) break;
    }
    char *path = NULL;
    double reset = 0;
    if (rc == 0) rc = frt_rollout_end(r, &path, &reset);
    if (rc < 0) {
        free(a);
        free(ms);
        return fail("episode");
    }
    double p50 = quantile(ms, n, 0.5);
    if (o->json)
        printf("{\"episode\": %d, \"chunks\": %d, \"stop\": \"%s\", \"value_min\": %.9g, \"value_mean\": %.9g, "
               "\"tick_ms_p50\": %.6f, \"reset_ms\": %.6f, \"record\": %s%s%s}\n",
               e, n, frt_stop_reason_str(t.stop), h->critic && n ? vmin : 0.0, h->critic && n ? vsum / n : 0.0,
               n ? p50 : 0.0, reset, path ? "\"" : "", path ? path : "null", path ? "\"" : "");
    else
        printf("episode %d: %d chunks, stop %s, value min %.6g mean %.6g, tick p50 %.3f ms, reset %.3f ms%s%s\n", e, n,
               frt_stop_reason_str(t.stop), h->critic && n ? vmin : NAN, h->critic && n ? vsum / n : NAN, p50, reset,
               path ? ", " : "", path ? path : "");
    free(path);
    free(a);
    free(ms);
    return 0;
}

static int make_rollout(host *h, const opts *o, frt_critic *critic, int serial, int max_chunks, frt_rollout **r)
{
    frt_rollout_params p = frt_rollout_default_params();
    p.seed = o->seed;
    p.max_chunks = max_chunks;
    p.timeout_s = o->timeout;
    p.value_stop = o->value_given;
    p.value_threshold = (float)o->value_stop;
    p.serial = serial;
    p.record_dir = o->record;
    if (frt_rollout_create(h->policy, critic, &p, r) < 0) return fail("rollout");
    if (frt_rollout_set_prompt(*r, h->ids, (int)h->n_ids) < 0) return fail("--prompt-ids");
    if (h->llm) {
        frt_planner_params pp = {h->llm, o->every, o->subtask};
        if (frt_rollout_set_planner(*r, &pp) < 0) return fail("planner");
    }
    return 0;
}

static int episodes(host *h, const opts *o)
{
    frt_rollout *r = NULL;
    if (make_rollout(h, o, h->critic, o->serial, o->max_chunks, &r)) {
        frt_rollout_destroy(r);
        return 1;
    }
    int ret = 0;
    for (int e = 0; e < o->episodes && !ret; e++) ret = run_episode(r, h, o, e);
    frt_rollout_status st;
    frt_rollout_status_get(r, &st);
    if (!ret && !o->json) printf("graph captures: %llu (constant across episodes)\n", (unsigned long long)st.captures);
    frt_rollout_destroy(r);
    return ret;
}

/* ---- bench ------------------------------------------------------------------ */

/* p50 / p99 of the tick time of n ticks of one configuration. */
static int bench_ticks(host *h, const opts *o, frt_critic *critic, int serial, double *p50, double *p99)
{
    frt_rollout *r = NULL;
    int ret = make_rollout(h, o, critic, serial, o->ticks + 2, &r);
    double *ms = malloc((size_t)(o->ticks + 2) * sizeof *ms);
    float *a = malloc((size_t)h->na * sizeof *a);
    for (int i = 0; !ret && i < o->ticks + 2; i++) {
        frt_policy_inputs obs;
        frt_rollout_tick_out t;
        if (observe(h, i, &obs) < 0 || frt_rollout_tick(r, &obs, a, (size_t)h->na, &t) < 0)
            ret = fail("bench tick");
        else
            ms[i] = t.ms;
    }
    if (!ret) { /* the first two ticks warm up */
        *p50 = quantile(ms + 2, o->ticks, 0.5);
        *p99 = quantile(ms + 2, o->ticks, 0.99);
    }
    free(ms);
    free(a);
    frt_rollout_destroy(r);
    return ret;
}

/* The floor of a reset: the best of 5 copies of the state's bytes between
 * two buffers of the policy's context (device memory on cuda: what a
 * restore from a device-tier capsule moves), in ms. */
static int copy_floor(host *h, size_t bytes, double *floor_ms)
{
    frt_context *ctx = frt_model_context(h->policy);
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *src = NULL, *dst = NULL;
    int rc = frt_buffer_alloc(ctx, "bench.src", FRT_SPACE_DEVICE, bytes, &src);
    if (rc == 0) rc = frt_buffer_alloc(ctx, "bench.dst", FRT_SPACE_DEVICE, bytes, &dst);
    if (rc == 0) rc = frt_buffer_fill(src, 0, bytes, 1, s);
    if (rc == 0) rc = frt_buffer_copy(dst, 0, src, 0, bytes, s); /* warm-up */
    if (rc == 0) rc = frt_stream_sync(s);
    *floor_ms = INFINITY;
    for (int i = 0; rc == 0 && i < 5; i++) {
        double t0 = now_ms();
        rc = frt_buffer_copy(dst, 0, src, 0, bytes, s);
        if (rc == 0) rc = frt_stream_sync(s);
        *floor_ms = fmin(*floor_ms, now_ms() - t0);
    }
    frt_buffer_free(src);
    frt_buffer_free(dst);
    return rc < 0 ? fail("reset floor") : 0;
}

/* The episode reset (a restore) p50 / max over n resets after one chunk,
 * and its floor (copy_floor of the state's bytes). */
static int bench_reset(host *h, const opts *o, double *p50, double *mx, double *floor_ms, double *bytes)
{
    frt_rollout *r = NULL;
    opts q = *o;
    q.record = NULL;
    int ret = make_rollout(h, &q, NULL, 0, 1, &r);
    double *ms = malloc((size_t)o->resets * sizeof *ms);
    float *a = malloc((size_t)h->na * sizeof *a);
    for (int i = 0; !ret && i < o->resets; i++) {
        frt_policy_inputs obs;
        frt_rollout_tick_out t;
        if (observe(h, i, &obs) < 0 || frt_rollout_tick(r, &obs, a, (size_t)h->na, &t) < 0 ||
            frt_rollout_end(r, NULL, &ms[i]) < 0)
            ret = fail("bench reset");
    }
    frt_model_info mi;
    frt_model_info_get(h->policy, &mi);
    *bytes = (double)mi.state_bytes;
    if (!ret) ret = copy_floor(h, mi.state_bytes, floor_ms);
    if (!ret) {
        *mx = quantile(ms, o->resets, 1.0);
        *p50 = quantile(ms, o->resets, 0.5);
    }
    free(ms);
    free(a);
    frt_rollout_destroy(r);
    return ret;
}

static int bench(host *h, const opts *o)
{
    double a50 = NAN, a99 = NAN, p50 = NAN, p99 = NAN, s50 = NAN, s99 = NAN, r50 = NAN, rmax = NAN, rfloor = NAN,
           bytes = 0;
    if (bench_ticks(h, o, NULL, 0, &a50, &a99) || bench_reset(h, o, &r50, &rmax, &rfloor, &bytes)) return 1;
    printf("rollout bench (%s, %d ticks after 2 warm-up, %d resets)\n", o->dir, o->ticks, o->resets);
    printf("  policy alone             p50 %9.3f ms  p99 %9.3f ms\n", a50, a99);
    printf("  episode reset (restore)  p50 %9.3f ms  max %9.3f ms  (target <= 0.1 ms; floor %.3f ms = %.0f state "
           "bytes copied within the %s backend's memory, %.2f GB/s)\n",
           r50, rmax, rfloor, bytes, frt_backend_name(frt_context_backend(frt_model_context(h->policy))),
           bytes / (rfloor * 1e-3) / 1e9);
    if (!h->critic) {
        printf("  policy + critic: not timed (no --critic / --random-critic)\n");
        return 0;
    }
    if (bench_ticks(h, o, h->critic, 0, &p50, &p99) || bench_ticks(h, o, h->critic, 1, &s50, &s99)) return 1;
    double c[64];
    int nc = 0;
    for (; nc < 64; nc++) {
        float v;
        double t0 = now_ms();
        if (frt_critic_run(h->critic, &v) < 0) return fail("critic");
        c[nc] = now_ms() - t0;
    }
    double c50 = quantile(c, nc, 0.5);
    printf("  policy + critic, plan    p50 %9.3f ms  p99 %9.3f ms  = %.3fx the policy (target <= 1.05x)\n", p50, p99,
           p50 / a50);
    printf("  policy + critic, serial  p50 %9.3f ms  p99 %9.3f ms  = %.3fx the policy\n", s50, s99, s50 / a50);
    printf("  critic alone             p50 %9.3f ms  (floor of serial - policy)\n", c50);
    return 0;
}

static int parse_ids(const char *s, const char *what, int32_t **ids, size_t *n)
{
    const char *bad = NULL;
    if (frt_parse_i32_list(s, 0, 0x7fffffff, ids, n, &bad) != 0 || *n == 0) {
        fprintf(stderr, "frt policy rollout: %s: bad id list '%s'\n", what, s);
        return 2;
    }
    return 0;
}

/* Options that would do nothing in the mode chosen are refused, each named:
 * --image gives every tick its own input_ids (frt_rollout_tick stages them,
 * the hand-off buffer unused) and no fake robot is observed; --bench runs
 * its own ticks and resets, prints text, and never ends an episode; the
 * planner's knobs need a planner. */
static int check_mode_opts(frt_cmd_spec *spec, const opts *o)
{
    static const char *const handoff[] = {"prompt-ids", "interrupt-at", "interrupt-ids", "planner", "planner-shape"};
    static const char *const robot[] = {"robot-seed", "cameras"};
    static const char *const episodic[] = {"episodes", "max-chunks", "stop-after", "interrupt-at", "interrupt-ids",
                                           "serial", "json", "record", "timeout", "value-stop"};
    static const char *const bench_only[] = {"ticks", "resets"};
    static const char *const planner_knobs[] = {"planner-every", "subtask-tokens"};
    const char *n;
    if (o->img.obs.n_images && (n = FRT_ARGS_FIRST_GIVEN(spec, handoff)))
        return frt_args_error(spec, "--%s writes the policy's hand-off prompt, which --image does not use: every "
                                    "tick carries the ids of -p TEXT", n);
    if (o->img.obs.n_images && (n = FRT_ARGS_FIRST_GIVEN(spec, robot)))
        return frt_args_error(spec, "--%s configures the fake robot, which --image replaces", n);
    if (o->bench && (n = FRT_ARGS_FIRST_GIVEN(spec, episodic)))
        return frt_args_error(spec, "--%s is for episodes: --bench times its own ticks (--ticks) and resets "
                                    "(--resets), serially and as a plan, with no stop predicate, record or JSON",
                              n);
    if (!o->bench && (n = FRT_ARGS_FIRST_GIVEN(spec, bench_only))) return frt_args_error(spec, "--%s goes with --bench", n);
    if (!o->planner && !o->planner_shape && (n = FRT_ARGS_FIRST_GIVEN(spec, planner_knobs)))
        return frt_args_error(spec, "--%s needs --planner DIR or --planner-shape S", n);
    return 0;
}

static int check_opts(frt_cmd_spec *spec, opts *o)
{
    if (!o->dir) return frt_args_error(spec, "-m/--model DIR is required");
    if (!o->fake == !o->img.obs.n_images)
        return frt_args_error(spec, "give --fake-robot or --image CAM=FILE (with -p TEXT), one of them");
    if (!o->img.obs.n_images && (o->img.obs.prompt || o->img.obs.state))
        return frt_args_error(spec, "--prompt and --state go with --image");
    if (o->critic && o->random_critic) return frt_args_error(spec, "give --critic FILE or --random-critic, not both");
    if (o->planner && o->planner_shape) return frt_args_error(spec, "give --planner DIR or --planner-shape, not both");
    o->value_given = frt_args_find(spec, "value-stop")->given > 0;
    if (o->value_given && !o->critic && !o->random_critic)
        return frt_args_error(spec, "--value-stop needs --critic FILE or --random-critic");
    if (o->serial && !o->critic && !o->random_critic)
        return frt_args_error(spec, "--serial orders the policy and the critic: give --critic FILE or --random-critic");
    if ((o->interrupt_at > 0) != (o->interrupt_ids != NULL))
        return frt_args_error(spec, "--interrupt-at N and --interrupt-ids LIST go together");
    return check_mode_opts(spec, o);
}

static int cmd_rollout(int argc, char **argv)
{
    opts o = {.prompt_ids = "2,10,11,12", .episodes = 1, .max_chunks = 10, .every = 4, .subtask = 8, .cameras = 1,
              .ticks = 20, .resets = 100, .backend = FRT_ARG_BACKEND_AUTO};
    frt_arg args[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &o.dir, "DIR", "the policy checkpoint directory", .dflt = ""),
        FRT_OPT(0, "fake-robot", FRT_ARG_FLAG, &o.fake, NULL, "drive it with the deterministic fake robot"),
        FRT_OPT('p', "prompt", FRT_ARG_STR, &o.img.obs.prompt, "TEXT",
                "with --image CAM=FILE (repeatable): the observation of every tick, as frt policy run --image",
                .dflt = ""),
        FRT_OPT(0, "state", FRT_ARG_STR, &o.img.obs.state, "V,..", "with --image: the robot state", .dflt = ""),
        FRT_OPT(0, "robot-seed", FRT_ARG_U64, &o.robot_seed, "S", "the fake robot's observation stream"),
        FRT_OPT(0, "cameras", FRT_ARG_INT, &o.cameras, "N", "cameras the fake robot sends", .min = 1, .max = 16),
        FRT_OPT(0, "prompt-ids", FRT_ARG_STR, &o.prompt_ids, "LIST", "the instruction, token ids of the policy"),
        FRT_OPT(0, "seed", FRT_ARG_U64, &o.seed, "S", "the episodes' noise seed"),
        FRT_OPT(0, "episodes", FRT_ARG_INT, &o.episodes, "E", "episodes to run", .min = 1, .max = 1000000),
        FRT_OPT(0, "max-chunks", FRT_ARG_INT, &o.max_chunks, "N", "stop an episode after N chunks", .min = 1,
                .max = 1000000),
        FRT_OPT(0, "timeout", FRT_ARG_DOUBLE, &o.timeout, "SEC", "stop an episode after SEC seconds (0 = none)",
                .fmin = 0, .fmax = 1e9),
        FRT_OPT(0, "critic", FRT_ARG_STR, &o.critic, "FILE", "the value critic (.safetensors, docs/robot.md)",
                .dflt = ""),
        FRT_OPT(0, "random-critic", FRT_ARG_FLAG, &o.random_critic, NULL, "a random critic (2 layers, 64 wide)"),
        FRT_OPT(0, "value-stop", FRT_ARG_DOUBLE, &o.value_stop, "V", "stop when the critic's value < V",
                .fmin = -1e30, .fmax = 1e30, .dflt = ""),
        FRT_OPT(0, "stop-after", FRT_ARG_INT, &o.stop_after, "N", "the client asks to stop after N chunks",
                .min = 0, .max = 1000000),
        FRT_OPT(0, "serial", FRT_ARG_FLAG, &o.serial, NULL, "policy then critic on one stream (default: one plan)"),
        FRT_OPT(0, "record", FRT_ARG_STR, &o.record, "DIR", "write DIR/episode_NNN.npz (DIR made when missing)",
                .dflt = ""),
        FRT_OPT(0, "planner", FRT_ARG_STR, &o.planner, "DIR", "an LLM checkpoint writing subtasks", .dflt = ""),
        FRT_OPT(0, "planner-shape", FRT_ARG_STR, &o.planner_shape, "SHAPE",
                "a random gen-model LLM as the planner (e.g. tiny-dense)", .dflt = ""),
        FRT_OPT(0, "planner-every", FRT_ARG_INT, &o.every, "K", "the planner runs every K ticks", .min = 1,
                .max = 1000000),
        FRT_OPT(0, "subtask-tokens", FRT_ARG_INT, &o.subtask, "L", "tokens of a subtask", .min = 1, .max = 4096),
        FRT_OPT(0, "interrupt-at", FRT_ARG_INT, &o.interrupt_at, "N", "a new instruction before chunk N", .min = 0,
                .max = 1000000),
        FRT_OPT(0, "interrupt-ids", FRT_ARG_STR, &o.interrupt_ids, "LIST", "the new instruction's ids", .dflt = ""),
        FRT_OPT(0, "bench", FRT_ARG_FLAG, &o.bench, NULL, "time ticks (alone, plan, serial) and resets"),
        FRT_OPT(0, "ticks", FRT_ARG_INT, &o.ticks, "N", "--bench: ticks per configuration", .min = 1, .max = 100000),
        FRT_OPT(0, "resets", FRT_ARG_INT, &o.resets, "N", "--bench: episode resets", .min = 1, .max = 1000000),
        FRT_OPT(0, "json", FRT_ARG_FLAG, &o.json, NULL, "one JSON object per episode"),
        FRT_OPT(0, "backend", FRT_ARG_BACKEND, &o.backend, NULL, "where the policy and the critic run"),
    };
    frt_cmd_spec spec = {"policy rollout", "-m DIR (--fake-robot | --image CAM=FILE.. -p TEXT) [options]",
                         "Runs episodes of the rollout host (docs/robot.md): reset by capsule restore, one\n"
                         "replay per action chunk (with the critic as one plan), stop predicates, .npz records,\n"
                         "and an optional planner writing subtasks into the policy's prompt port.\n"
                         "--image CAM=FILE (repeatable) -p TEXT [--state V,..] instead of --fake-robot: every\n"
                         "tick sees that observation, built as frt policy run --image builds it.\n",
                         args, (int)(sizeof args / sizeof args[0]), 0, 0, NULL};
    if (policy_take_images(&argc, argv, &o.img.obs) < 0) return frt_args_error(&spec, "--image: CAM=FILE, at most "
                                                                                     "%d", FRT_POLICY_MAX_CAMERAS);
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (check_opts(&spec, &o)) return 2;
    o.spec = &spec;
    host h;
    memset(&h, 0, sizeof h);
    int ret = parse_ids(o.prompt_ids, "--prompt-ids", &h.ids, &h.n_ids);
    if (!ret && o.interrupt_ids) ret = parse_ids(o.interrupt_ids, "--interrupt-ids", &h.irq, &h.n_irq);
    if (!ret && o.record && frt_mkdir_p(o.record) < 0) ret = fail(o.record);
    if (!ret) ret = host_open(&h, &o);
    if (!ret) ret = o.bench ? bench(&h, &o) : episodes(&h, &o);
    host_free(&h);
    return ret;
}

int frt_cmd_policy_rollout(int argc, char **argv)
{
    argv[0] = "policy rollout";
    return cmd_rollout(argc, argv);
}
