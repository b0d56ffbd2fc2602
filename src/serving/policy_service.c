/*
 * policy_service.c - one policy behind the policy server (policy_service.h):
 * robot observation -> openpi's robot transforms -> frt_policy_inputs_build
 * -> one tick of the rollout host (frt/rollout.h: the policy and the value
 * critic as one plan, the stop predicates, the episode record) ->
 * Unnormalize -> the robot's actions; control messages (episode start /
 * end as RESET / STOP + RECORD, CFG); the metadata and reply encodings
 * (docs/policy-server.md).
 */
#include "serving/policy_service.h"
#include "serving/policy_share.h"

#include "frt/fs.h"
#include "frt/policy.h"
#include "frt/rollout.h"
#include "frt/status.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <jansson.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const CAMERAS[FRT_ROBOT_CAMERAS] = {"base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb"};

struct frt_policy_service {
    frt_model *m;
    frt_policy_info pi;
    frt_policy_variant variant;
    frt_robot robot;
    int n_cameras;
    uint8_t mask[16];
    size_t n_mask;
    int discrete_state; /* Pi0.5 only: the state in the prompt */
    frt_policy_tokenizer *tok;
    frt_policy_norm_stats *stats;
    char *default_prompt;
    frt_critic *critic;   /* NULL: no values */
    frt_rollout *host;    /* every inference is a tick of it */
    frt_turn_lock *device_lock; /* NULL, or the turn lock of a context shared with an LLM */
    pthread_mutex_t lock;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* openpi's asset folder under DIR/assets naming the robot: trossen (aloha),
 * droid, *libero*. Returns 1 and fills *r / asset, or 0. */
static int find_asset(const char *dir, frt_robot *r, char *asset, size_t cap)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/assets", dir);
    DIR *d = opendir(p);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        const char *n = e->d_name;
        found = 1;
        if (!strcmp(n, "trossen")) *r = FRT_ROBOT_ALOHA;
        else if (!strcmp(n, "droid")) *r = FRT_ROBOT_DROID;
        else if (strstr(n, "libero")) *r = FRT_ROBOT_LIBERO;
        else found = 0;
        if (found) snprintf(asset, cap, "%s", n);
    }
    closedir(d);
    return found;
}

/* The robot and, when found there, the asset folder. */
static int pick_robot(frt_policy_service *s, const frt_policy_service_params *p, char *asset, size_t cap)
{
    frt_robot found;
    int have = find_asset(p->dir, &found, asset, cap);
    if (p->robot) return frt_robot_parse(p->robot, &s->robot);
    if (!have)
        return frt_error(FRT_ERR_NOT_FOUND, "%s: no openpi asset folder (assets/trossen, assets/droid, "
                         "assets/*libero*) names the robot: give --robot libero|droid|aloha", p->dir);
    s->robot = found;
    return 0;
}

static int load_inputs_side(frt_policy_service *s, const frt_policy_service_params *p, const char *asset,
                            const char **note)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.model", p->dir);
    FRT_TRY(frt_policy_tokenizer_load(p->tokenizer ? p->tokenizer : path, &s->tok));
    const char *stats = p->norm_stats;
    if (!stats) {
        snprintf(path, sizeof path, "%s/norm_stats.json", p->dir);
        if (!file_exists(path) && *asset) snprintf(path, sizeof path, "%s/assets/%s/norm_stats.json", p->dir, asset);
        if (file_exists(path)) stats = path;
    }
    if (stats) return frt_policy_norm_stats_load(stats, &s->stats);
    if (note) *note = "no norm_stats.json: the state and the actions are raw values";
    return 0;
}

/* openpi's discrete_state_input: Pi0Config's default is pi05; pi05_libero
 * turns it off (the Pi0 prompt, the state unused). Pi0 never has it here
 * (it would put the state in the prompt and in the state token). */
static int pick_discrete_state(frt_policy_service *s, int want)
{
    if (want < -1 || want > 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "discrete_state must be -1, 0 or 1");
    if (s->variant == FRT_POLICY_PI0 && want == 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "the state in the prompt (discrete state) is Pi0.5's; this is Pi0");
    s->discrete_state = s->variant == FRT_POLICY_PI05 && (want == 1 || (want < 0 && s->robot != FRT_ROBOT_LIBERO));
    return 0;
}

/* What the model must offer the robot. */
static int check_shapes(const frt_policy_service *s)
{
    const frt_policy_info *pi = &s->pi;
    int dof = frt_robot_dof(s->robot);
    if (pi->image_height != 224 || pi->image_width != 224)
        return frt_error(FRT_ERR_UNSUPPORTED, "the policy server makes 224 x 224 cameras (openpi's resize_with_pad); "
                         "this model takes %d x %d", pi->image_height, pi->image_width);
    if (pi->action_dim < dof || (size_t)pi->action_dim < s->n_mask)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "robot %s has %d action values; the model's chunk has %d",
                         frt_robot_name(s->robot), dof, pi->action_dim);
    size_t na = frt_policy_norm_stats_dim(s->stats, "actions", NULL);
    if (na > (size_t)pi->action_dim)
        return frt_error(FRT_ERR_MISMATCH, "the action statistics hold %zu values; the model's chunk has %d", na,
                         pi->action_dim);
    return 0;
}

/* The rollout host the inferences tick (and its critic, CFG, recording). */
static int open_host(frt_policy_service *s, const frt_policy_service_params *p)
{
    if (p->max_chunks < 0 || !(p->episode_timeout_s >= 0) || isinf(p->episode_timeout_s))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "max_chunks %d and episode timeout %g s must be >= 0",
                         p->max_chunks, p->episode_timeout_s);
    if (p->critic) FRT_TRY(frt_critic_load(s->m, p->critic, &s->critic));
    if (p->record_dir) FRT_TRY(frt_mkdir_p(p->record_dir));
    frt_rollout_params rp = frt_rollout_default_params();
    rp.max_chunks = p->max_chunks > 0 ? p->max_chunks : INT_MAX;
    rp.timeout_s = p->episode_timeout_s;
    rp.value_stop = p->value_stop;
    rp.value_threshold = p->value_threshold;
    rp.record_dir = p->record_dir;
    FRT_TRY(frt_rollout_create(s->m, s->critic, &rp, &s->host));
    return p->cfg ? frt_policy_set_cfg(s->m, 1, p->cfg_beta, p->advantage_positive) : 0; /* last: nothing changed on
                                                                                           a failure before */
}

void frt_policy_service_free(frt_policy_service *s)
{
    if (!s) return;
    frt_rollout_destroy(s->host);
    frt_critic_free(s->critic);
    frt_policy_tokenizer_free(s->tok);
    frt_policy_norm_stats_free(s->stats);
    free(s->default_prompt);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int frt_policy_service_create(frt_model *m, const frt_policy_service_params *p, const char **note,
                              frt_policy_service **out)
{
    if (!m || !p || !p->dir || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy service: NULL");
    if (note) *note = NULL;
    frt_policy_service *s = calloc(1, sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "policy service: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    s->m = m;
    s->device_lock = p->device_lock;
    char asset[256] = "";
    int rc = frt_policy_info_get(m, &s->pi);
    if (rc == 0) rc = frt_policy_variant_parse(s->pi.model_type, &s->variant);
    if (rc == 0) rc = pick_robot(s, p, asset, sizeof asset);
    if (rc == 0 && (p->delta_actions < -1 || p->delta_actions > 1))
        rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "delta_actions must be -1, 0 or 1");
    if (rc == 0) s->n_mask = frt_robot_delta_mask(s->robot, s->variant, p->delta_actions, s->mask);
    if (rc == 0) rc = pick_discrete_state(s, p->discrete_state);
    if (rc == 0) rc = load_inputs_side(s, p, asset, note);
    if (rc == 0) rc = check_shapes(s);
    if (rc == 0) rc = open_host(s, p);
    if (rc == 0 && p->default_prompt && !(s->default_prompt = strdup(p->default_prompt)))
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "policy service: out of memory");
    s->n_cameras = s->pi.max_cameras < FRT_ROBOT_CAMERAS ? s->pi.max_cameras : FRT_ROBOT_CAMERAS;
    if (rc < 0) {
        frt_policy_service_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* ---- one inference ----------------------------------------------------------- */

/* The model's inputs from the repacked observation: *in (frt_policy_inputs_free). */
static int build_inputs(const frt_policy_service *s, const frt_robot_obs *ro, frt_policy_input_set **in)
{
    frt_policy_view views[FRT_ROBOT_CAMERAS];
    size_t nv = 0;
    for (int c = 0; c < FRT_ROBOT_CAMERAS; c++) {
        if (!ro->rgb[c]) continue;
        if (c >= s->n_cameras)
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "camera %s is given but the model takes %d cameras", CAMERAS[c],
                             s->n_cameras);
        views[nv++] = (frt_policy_view){CAMERAS[c], ro->height[c], ro->width[c], ro->rgb[c], NULL};
    }
    if (ro->n_state > (size_t)s->pi.max_state_dim)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "the state has %zu values; the model takes at most %d",
                         ro->n_state, s->pi.max_state_dim);
    float state[FRT_ROBOT_MAX_STATE];
    for (size_t i = 0; i < ro->n_state; i++) state[i] = (float)ro->state[i];
    frt_policy_input_params ip = frt_policy_input_default_params();
    /* Pi0.5 without the discrete state: the Pi0 prompt, and the state (which the model does not take) raw */
    int pi0_prompt = s->variant == FRT_POLICY_PI05 && !s->discrete_state;
    ip.variant = pi0_prompt ? FRT_POLICY_PI0 : s->variant;
    ip.cameras = CAMERAS;
    ip.n_cameras = (size_t)s->n_cameras;
    ip.max_tokens = (size_t)s->pi.max_tokens;
    ip.max_state_dim = (size_t)s->pi.max_state_dim;
    ip.tokenizer = s->tok;
    ip.norm_stats = pi0_prompt ? NULL : s->stats;
    return frt_policy_inputs_build(&ip, views, nv, ro->prompt, state, ro->n_state, in);
}

/* Under CFG: the conditioned prompt (frt_policy_cfg_prompt of the
 * request's instruction) built the same way into *in_cond. */
static int build_cond(const frt_policy_service *s, const frt_robot_obs *ro, frt_policy_input_set **in_cond)
{
    int on = 0, positive = 1;
    FRT_TRY(frt_policy_cfg_get(s->m, &on, NULL, &positive));
    if (!on) return 0;
    char *text = NULL;
    FRT_TRY(frt_policy_cfg_prompt(ro->prompt, positive, &text));
    frt_robot_obs rc = *ro;
    rc.prompt = text;
    int rc_ = build_inputs(s, &rc, in_cond);
    free(text);
    return rc_;
}

/* One tick of the host on IN (and IN_COND under CFG); when a chunk ran, the
 * un-normalised chunk [chunk, action_dim] into U. */
static int run_model(frt_policy_service *s, const frt_policy_input_set *in, const frt_policy_input_set *in_cond,
                     float *a, float *u, frt_rollout_tick_out *t)
{
    const frt_policy_info *pi = &s->pi;
    frt_policy_inputs x = {in->pixel_values, (int)in->n_cameras, 3, 224, 224, in->pixel_attention_mask,
                           in->input_ids, in->attention_mask, (int)in->n_tokens,
                           pi->state_in_prompt ? NULL : in->state, pi->state_in_prompt ? 0 : (int)in->state_dim,
                           NULL, NULL, NULL, 0};
    if (in_cond) {
        x.input_ids_cond = in_cond->input_ids;
        x.attention_mask_cond = in_cond->attention_mask;
        x.n_tokens_cond = (int)in_cond->n_tokens;
    }
    size_t na = (size_t)pi->chunk * (size_t)pi->action_dim;
    if (s->device_lock) frt_turn_lock_acquire(s->device_lock, FRT_TURN_POLICY);
    const int rc = frt_rollout_tick(s->host, &x, a, na, t);
    if (s->device_lock) frt_turn_lock_release(s->device_lock);
    FRT_TRY(rc);
    if (!t->ran) return 0;
    if (!s->stats) return memcpy(u, a, na * sizeof *a), 0;
    return frt_policy_unnormalize_actions(s->stats, s->variant, a, (size_t)pi->chunk, (size_t)pi->action_dim,
                                          (size_t)pi->action_dim, u);
}

/* The reply's episode fields from a tick (or, ran 0, from the stop). */
static void reply_episode(const frt_policy_service *s, const frt_rollout_tick_out *t, frt_policy_reply *r)
{
    r->has_value = s->critic != NULL && t->ran;
    r->value = t->value;
    r->infer_ms = t->ms;
    r->stopped = t->stop != FRT_STOP_NONE ? frt_stop_reason_str(t->stop) : NULL;
}

static int infer_locked(frt_policy_service *s, const frt_pobs *o, frt_policy_reply *r)
{
    frt_robot_obs ro;
    FRT_TRY(frt_robot_obs_from(s->robot, o, s->default_prompt, &ro));
    frt_policy_input_set *in = NULL, *in_cond = NULL;
    int chunk = s->pi.chunk, dof = frt_robot_dof(s->robot);
    size_t na = (size_t)chunk * (size_t)s->pi.action_dim;
    float *a = malloc(na * sizeof *a), *u = malloc(na * sizeof *u), *out = malloc((size_t)(chunk * dof) * sizeof *out);
    int rc = a && u && out ? build_inputs(s, &ro, &in) : frt_error(FRT_ERR_OUT_OF_MEMORY, "policy: out of memory");
    if (rc == 0) rc = build_cond(s, &ro, &in_cond);
    frt_rollout_status st = {0};
    frt_rollout_tick_out t = {0, NAN, FRT_STOP_NONE, 0};
    if (rc == 0) rc = frt_rollout_status_get(s->host, &st);
    if (rc == 0) t.stop = st.stop; /* a stopped episode runs nothing */
    if (rc == 0 && st.stop == FRT_STOP_NONE) rc = run_model(s, in, in_cond, a, u, &t);
    if (rc == 0 && t.ran)
        rc = frt_robot_actions(s->robot, s->mask, s->n_mask, ro.state, ro.n_state, u, (size_t)chunk,
                               (size_t)s->pi.action_dim, out);
    frt_policy_inputs_free(in);
    frt_policy_inputs_free(in_cond);
    frt_robot_obs_free(&ro);
    free(a);
    free(u);
    if (rc < 0 || !t.ran) free(out);
    if (rc < 0) return rc;
    *r = (frt_policy_reply){t.ran ? out : NULL, chunk, dof, 0, 0, 0, NAN, NULL};
    reply_episode(s, &t, r);
    return 0;
}

int frt_policy_service_infer(frt_policy_service *s, const frt_pobs *o, frt_policy_reply *r)
{
    if (!s || !o || !r) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL");
    double t0 = now_ms();
    pthread_mutex_lock(&s->lock);
    int rc = infer_locked(s, o, r);
    pthread_mutex_unlock(&s->lock);
    if (rc == 0) r->total_ms = now_ms() - t0;
    return rc;
}

/* ---- control messages ------------------------------------------------------ */

int frt_policy_service_is_ctrl(const frt_pobs *o) { return frt_pobs_get(o, "__ctrl__") != NULL; }

static int ctrl_seed(const frt_pobs *o, uint64_t *seed)
{
    const frt_pobs_value *v = frt_pobs_get(o, "seed");
    *seed = 0;
    if (!v) return 0;
    if (v->kind == FRT_POBS_ARRAY && v->ndim == 0 && v->dtype == FRT_POBS_U64) return *seed = *(uint64_t *)v->data, 0;
    if (v->kind == FRT_POBS_ARRAY && v->ndim == 0 && v->dtype == FRT_POBS_I64 && *(int64_t *)v->data >= 0)
        return *seed = (uint64_t)*(int64_t *)v->data, 0;
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "'seed': an integer in [0, 2^64)");
}

/* The cfg message's settings: beta (a number, 0 = off, else >= 1) and
 * advantage ("positive" | "negative"; absent: as before). */
static int ctrl_cfg_args(const frt_policy_service *s, const frt_pobs *o, int *on, float *beta, int *positive)
{
    const frt_pobs_value *b = frt_pobs_get(o, "beta"), *a = frt_pobs_get(o, "advantage");
    double x = NAN;
    FRT_TRY(frt_policy_cfg_get(s->m, on, beta, positive));
    if (!b || b->kind != FRT_POBS_ARRAY || b->n != 1 || frt_pobs_to_f64(b, &x) < 0 || !(x == 0 || x >= 1) ||
        isinf(x))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'beta': a number, 0 (guidance off) or >= 1");
    if (a && (a->kind != FRT_POBS_STRING || (strcmp(a->data, "positive") && strcmp(a->data, "negative"))))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'advantage': \"positive\" or \"negative\"");
    *on = x != 0;
    if (x != 0) *beta = (float)x;
    if (a) *positive = !strcmp(a->data, "positive");
    return 0;
}

/* The message's name and that it has no other keys than those it takes. */
static int ctrl_parse(const frt_pobs *o, const char **name)
{
    static const char *const names[3] = {"episode_start", "episode_end", "cfg"};
    static const char *const keys[3][2] = {{"seed", NULL}, {NULL, NULL}, {"beta", "advantage"}};
    const frt_pobs_value *c = frt_pobs_get(o, "__ctrl__");
    int k = -1;
    for (int i = 0; c && c->kind == FRT_POBS_STRING && i < 3; i++)
        if (!strcmp(c->data, names[i])) k = i;
    if (k < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'__ctrl__': '%.64s' is not episode_start, episode_end or cfg",
                         c && c->kind == FRT_POBS_STRING ? (const char *)c->data : "(not a string)");
    for (size_t i = 0; i < o->n; i++) {
        const char *key = o->v[i].key;
        if (strcmp(key, "__ctrl__") && !(keys[k][0] && !strcmp(key, keys[k][0])) &&
            !(keys[k][1] && !strcmp(key, keys[k][1])))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "'%s': not a key of the %s control message", key, names[k]);
    }
    *name = names[k];
    return 0;
}

/* episode_start: RECORD a begun episode and RESET, then the seed's initial capsule. */
static int ctrl_start(frt_policy_service *s, uint64_t seed)
{
    frt_rollout_status st;
    FRT_TRY(frt_rollout_status_get(s->host, &st));
    if (st.chunks || st.stop != FRT_STOP_NONE) FRT_TRY(frt_rollout_end(s->host, NULL, NULL));
    return seed == frt_rollout_seed(s->host) ? 0 : frt_rollout_reseed(s->host, seed);
}

/* episode_end: STOP (the client's, unless a predicate stopped it), RECORD, RESET. */
static int ctrl_end(frt_policy_service *s, frt_policy_ctrl_reply *r)
{
    frt_rollout_status st;
    FRT_TRY(frt_rollout_status_get(s->host, &st));
    r->steps = (uint64_t)st.chunks;
    r->stop_reason = frt_stop_reason_str(st.stop != FRT_STOP_NONE ? st.stop : FRT_STOP_CLIENT);
    if (st.stop == FRT_STOP_NONE) FRT_TRY(frt_rollout_request_stop(s->host));
    return frt_rollout_end(s->host, &r->record, NULL);
}

static int ctrl_locked(frt_policy_service *s, const frt_pobs *o, frt_policy_ctrl_reply *r)
{
    if (!strcmp(r->name, "episode_start")) {
        uint64_t seed;
        FRT_TRY(ctrl_seed(o, &seed));
        FRT_TRY(ctrl_start(s, seed));
    } else if (!strcmp(r->name, "episode_end")) {
        FRT_TRY(ctrl_end(s, r));
    } else {
        int on, positive;
        float beta;
        FRT_TRY(ctrl_cfg_args(s, o, &on, &beta, &positive));
        FRT_TRY(frt_policy_set_cfg(s->m, on, beta, positive));
    }
    r->seed = frt_rollout_seed(s->host);
    return frt_policy_cfg_get(s->m, &r->cfg, &r->beta, &r->advantage_positive);
}

int frt_policy_service_ctrl(frt_policy_service *s, const frt_pobs *o, frt_policy_ctrl_reply *r)
{
    if (!s || !o || !r) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy: NULL");
    memset(r, 0, sizeof *r);
    FRT_TRY(ctrl_parse(o, &r->name));
    pthread_mutex_lock(&s->lock);
    if (s->device_lock) frt_turn_lock_acquire(s->device_lock, FRT_TURN_POLICY);
    int rc = ctrl_locked(s, o, r);
    if (s->device_lock) frt_turn_lock_release(s->device_lock);
    pthread_mutex_unlock(&s->lock);
    if (rc < 0) frt_policy_ctrl_reply_clear(r);
    return rc;
}

void frt_policy_ctrl_reply_clear(frt_policy_ctrl_reply *r)
{
    if (!r) return;
    free(r->record);
    r->record = NULL;
}

/* ---- encodings ------------------------------------------------------------- */

static void mp_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static void mp_bin_key(msgpack_packer *pk, const char *s)
{
    msgpack_pack_bin(pk, strlen(s));
    msgpack_pack_bin_body(pk, s, strlen(s));
}

static void mp_begin(msgpack_sbuffer *sb, msgpack_packer *pk)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
}

/* The sbuffer's bytes handed to the caller (or NULL when it ran out). */
static char *mp_take(msgpack_sbuffer *sb, size_t *len)
{
    *len = sb->size;
    char *p = msgpack_sbuffer_release(sb);
    return p;
}

char *frt_policy_service_metadata(const frt_policy_service *s, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    mp_begin(&sb, &pk);
    msgpack_pack_map(&pk, 13);
    mp_str(&pk, "server"), mp_str(&pk, "frt");
    mp_str(&pk, "protocol"), msgpack_pack_int(&pk, 1);
    mp_str(&pk, "model_type"), mp_str(&pk, s->pi.model_type);
    mp_str(&pk, "robot"), mp_str(&pk, frt_robot_name(s->robot));
    mp_str(&pk, "action_horizon"), msgpack_pack_int(&pk, s->pi.chunk);
    mp_str(&pk, "action_dim"), msgpack_pack_int(&pk, frt_robot_dof(s->robot));
    mp_str(&pk, "model_action_dim"), msgpack_pack_int(&pk, s->pi.action_dim);
    mp_str(&pk, "cameras"), msgpack_pack_array(&pk, (size_t)s->n_cameras);
    for (int c = 0; c < s->n_cameras; c++) mp_str(&pk, CAMERAS[c]);
    mp_str(&pk, "prompt_tokens"), msgpack_pack_int(&pk, s->pi.max_tokens);
    mp_str(&pk, "state_dim"), msgpack_pack_int(&pk, s->pi.max_state_dim);
    mp_str(&pk, "norm_stats"), s->stats ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    mp_str(&pk, "delta_actions"), s->n_mask ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    mp_str(&pk, "discrete_state"), s->discrete_state ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    return mp_take(&sb, len);
}

/* openpi's msgpack_numpy.pack_array of a <f4 array, bin keys as Python bytes. */
static void mp_f32_array(msgpack_packer *pk, const float *data, int ndim, const int *shape)
{
    size_t nb = sizeof(float);
    for (int d = 0; d < ndim; d++) nb *= (size_t)shape[d];
    msgpack_pack_map(pk, 4);
    mp_bin_key(pk, "__ndarray__"), msgpack_pack_true(pk);
    mp_bin_key(pk, "data"), msgpack_pack_bin(pk, nb), msgpack_pack_bin_body(pk, data, nb);
    mp_bin_key(pk, "dtype"), mp_str(pk, "<f4");
    mp_bin_key(pk, "shape"), msgpack_pack_array(pk, (size_t)ndim);
    for (int d = 0; d < ndim; d++) msgpack_pack_int(pk, shape[d]);
}

char *frt_policy_reply_msgpack(const frt_policy_reply *r, double server_ms, double prev_total_ms, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    mp_begin(&sb, &pk);
    const int shape[2] = {r->chunk, r->dof}, one = 1;
    msgpack_pack_map(&pk, 2 + (r->actions != NULL) + r->has_value + (r->stopped != NULL));
    if (r->actions) mp_str(&pk, "actions"), mp_f32_array(&pk, r->actions, 2, shape);
    if (r->has_value) mp_str(&pk, "values"), mp_f32_array(&pk, &r->value, 1, &one);
    if (r->stopped) mp_str(&pk, "episode_stopped"), mp_str(&pk, r->stopped);
    mp_str(&pk, "policy_timing"), msgpack_pack_map(&pk, 1);
    mp_str(&pk, "infer_ms"), msgpack_pack_double(&pk, r->infer_ms);
    mp_str(&pk, "server_timing"), msgpack_pack_map(&pk, prev_total_ms >= 0 ? 2 : 1);
    mp_str(&pk, "infer_ms"), msgpack_pack_double(&pk, server_ms);
    if (prev_total_ms >= 0) mp_str(&pk, "prev_total_ms"), msgpack_pack_double(&pk, prev_total_ms);
    return mp_take(&sb, len);
}

char *frt_policy_ctrl_msgpack(const frt_policy_ctrl_reply *r, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    mp_begin(&sb, &pk);
    const int end = !strcmp(r->name, "episode_end"), cfg = !strcmp(r->name, "cfg");
    msgpack_pack_map(&pk, 3 + 2 * end + (end && r->record) + 3 * cfg);
    mp_str(&pk, "__ctrl__"), mp_str(&pk, r->name);
    mp_str(&pk, "ok"), msgpack_pack_true(&pk);
    mp_str(&pk, "seed"), msgpack_pack_uint64(&pk, r->seed);
    if (end) mp_str(&pk, "steps"), msgpack_pack_uint64(&pk, r->steps);
    if (end) mp_str(&pk, "stop_reason"), mp_str(&pk, r->stop_reason);
    if (end && r->record) mp_str(&pk, "record"), mp_str(&pk, r->record);
    if (cfg) mp_str(&pk, "cfg"), r->cfg ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    if (cfg) mp_str(&pk, "beta"), msgpack_pack_double(&pk, r->beta);
    if (cfg) mp_str(&pk, "advantage"), mp_str(&pk, r->advantage_positive ? "positive" : "negative");
    return mp_take(&sb, len);
}

static char *json_take(json_t *o, size_t *len)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    *len = s ? strlen(s) : 0;
    return s;
}

/* {"dtype": "<f4", "shape": [..], "data": base64} of a float array. */
static json_t *json_f32_array(const float *data, int ndim, const int *shape)
{
    size_t n = 1;
    json_t *sh = json_array();
    for (int d = 0; d < ndim; d++) n *= (size_t)shape[d], json_array_append_new(sh, json_integer(shape[d]));
    char *b = frt_pobs_base64_encode((const uint8_t *)data, n * sizeof(float));
    json_t *o = b && sh ? json_pack("{s:s, s:o, s:s}", "dtype", "<f4", "shape", sh, "data", b) : NULL;
    if (!o) json_decref(sh);
    free(b);
    return o;
}

char *frt_policy_reply_json(const frt_policy_reply *r, double server_ms, size_t *len)
{
    const int shape[2] = {r->chunk, r->dof}, one = 1;
    json_t *o = json_pack("{s:{s:f}, s:{s:f}}", "policy_timing", "infer_ms", r->infer_ms, "server_timing", "infer_ms",
                          server_ms);
    if (!o) return NULL;
    int bad = r->actions && json_object_set_new(o, "actions", json_f32_array(r->actions, 2, shape));
    if (r->has_value) bad |= json_object_set_new(o, "values", json_f32_array(&r->value, 1, &one));
    if (r->stopped) bad |= json_object_set_new(o, "episode_stopped", json_string(r->stopped));
    if (bad) json_decref(o), o = NULL;
    return json_take(o, len);
}

char *frt_policy_ctrl_json(const frt_policy_ctrl_reply *r, size_t *len)
{
    /* JSON integers are signed 64-bit in jansson: a seed past 2^63 is sent as its decimal string */
    char sd[32];
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)r->seed);
    json_t *o = json_pack("{s:s, s:b, s:o}", "__ctrl__", r->name, "ok", 1, "seed",
                          r->seed > INT64_MAX ? json_string(sd) : json_integer((json_int_t)r->seed));
    if (o && !strcmp(r->name, "episode_end")) {
        json_object_set_new(o, "steps", json_integer((json_int_t)r->steps));
        json_object_set_new(o, "stop_reason", json_string(r->stop_reason));
        if (r->record) json_object_set_new(o, "record", json_string(r->record));
    }
    if (o && !strcmp(r->name, "cfg")) {
        json_object_set_new(o, "cfg", json_boolean(r->cfg));
        json_object_set_new(o, "beta", json_real(r->beta));
        json_object_set_new(o, "advantage", json_string(r->advantage_positive ? "positive" : "negative"));
    }
    return json_take(o, len);
}

int frt_policy_delta_parse(const char *s, int *out)
{
    if (s && !strcmp(s, "auto")) return *out = -1, 0;
    if (s && !strcmp(s, "on")) return *out = 1, 0;
    if (s && !strcmp(s, "off")) return *out = 0, 0;
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "delta actions: '%s' is not auto, on or off", s ? s : "(null)");
}
