/*
 * test_policy_service.c - the policy server's service layer
 * (src/serving/policy_service.c) on an ALOHA-sized random policy (14 state
 * and action values: the small shapes of frt gen-model have 8, so ALOHA
 * runs end to end only here), with a SentencePiece model trained at test
 * time and random norm_stats.json:
 *   - an inference through the service equals, bit for bit, the same steps
 *     done by hand (robot transforms, frt_policy_inputs_build with the
 *     cameras cam_high -> base_0_rgb, cam_left_wrist -> left_wrist_0_rgb and
 *     right masked, frt_policy_run in the episode of the seed,
 *     Unnormalize, AbsoluteActions with ALOHA's mask, _encode_actions);
 *   - the control messages move the episode record;
 *   - the metadata, reply and control encodings read back through the
 *     server's own parsers (msgpack and JSON) with the documented keys;
 *   - a bad observation is refused and the next inference of the episode
 *     is what it would have been.
 */
#include "frt_test.h"
#include "gen_model.h"
#include "policy_test_util.h"
#include "serving/policy_service.h"

#include "frt/checkpoint.h"
#include "frt/policy.h"
#include "frt/status.h"

#include <msgpack.h>

static const frt_gen_policy_dims DIMS = {
    .v_width = 16, .v_inter = 32, .v_layers = 1, .v_heads = 2, .image_size = 224, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 1, .heads = 2, .kv_heads = 1, .head_dim = 16, .vocab = 1024,
    .e_width = 16, .e_inter = 24, .chunk = 4, .action_dim = 16, .state_dim = 16, .steps = 10,
};

static void write_policy(const char *dir)
{
    frt_weight_spec *w = NULL;
    int n = 0;
    frt_checkpoint *ck = NULL;
    int rc = frt_gen_policy_specs_dims(&DIMS, 0, &w, &n);
    if (rc == 0) rc = frt_gen_model_build_specs(w, n, 31, &ck);
    if (rc == 0) rc = frt_mkdir_p(dir);
    if (rc == 0) rc = frt_checkpoint_write(ck, dir, 0, FRT_CKPT_WRITE_NO_FSYNC);
    if (rc == 0) rc = frt_gen_policy_write_config_dims(&DIMS, 0, dir);
    frt_checkpoint_close(ck);
    free(w);
    CHECK_OK(rc);
}

/* norm_stats.json with random z-score and quantile statistics of N values. */
static void write_stats(const char *path, int n)
{
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"norm_stats\": {");
    for (int e = 0; e < 2; e++) {
        fprintf(f, "%s\"%s\": {", e ? ", " : "", e ? "actions" : "state");
        const char *names[4] = {"mean", "std", "q01", "q99"};
        for (int k = 0; k < 4; k++) {
            fprintf(f, "%s\"%s\": [", k ? ", " : "", names[k]);
            for (int i = 0; i < n; i++)
                fprintf(f, "%s%.6f", i ? ", " : "",
                        k == 0 ? frt_test_rand(-1, 1) : k == 1 ? frt_test_rand(0.2f, 2) : k == 2 ? -1.5 + 0.01 * i
                                                                                                 : 1.5 + 0.02 * i);
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "}}\n");
    fclose(f);
}

static void add_array(frt_pobs *o, const char *key, frt_pobs_dtype dt, const int64_t *shape, int ndim,
                      const void *data, size_t nb)
{
    frt_pobs_value *v;
    CHECK_OK(frt_pobs_add(o, "", key, strlen(key), &v));
    CHECK_OK(frt_pobs_set_array(v, dt, shape, ndim, data, nb));
}

/* An ALOHA observation: cam_high u8 CHW 3 x 50 x 60, cam_left_wrist f32
 * CHW 3 x 30 x 40 in [0, 1], no right wrist, a [14] state, a prompt. */
static void aloha_obs(frt_pobs *o, uint8_t *hi, float *lw, float *state)
{
    int64_t sh_hi[3] = {3, 50, 60}, sh_lw[3] = {3, 30, 40}, sh_st = 14;
    add_array(o, "images/cam_high", FRT_POBS_U8, sh_hi, 3, hi, 3 * 50 * 60);
    add_array(o, "images/cam_left_wrist", FRT_POBS_F32, sh_lw, 3, lw, 3 * 30 * 40 * 4);
    add_array(o, "state", FRT_POBS_F32, &sh_st, 1, state, 14 * 4);
    frt_pobs_value *v;
    CHECK_OK(frt_pobs_add(o, "", "prompt", 6, &v));
    CHECK_OK(frt_pobs_set_string(v, "fold the towel", 14));
}

/* The same inference by hand: the robot transforms, the inputs, the model in
 * the episode of SEED, Unnormalize, the robot's actions. */
static void by_hand(frt_model *m, const frt_pobs *o, const frt_policy_norm_stats *st, const frt_policy_tokenizer *tok,
                    uint64_t seed, float *out)
{
    frt_robot_obs ro;
    CHECK_OK(frt_robot_obs_from(FRT_ROBOT_ALOHA, o, NULL, &ro));
    CHECK(ro.rgb[0] && ro.rgb[1] && !ro.rgb[2]);
    const char *cams[3] = {"base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb"};
    frt_policy_view v[2] = {{cams[0], ro.height[0], ro.width[0], ro.rgb[0], NULL},
                            {cams[1], ro.height[1], ro.width[1], ro.rgb[1], NULL}};
    float state[14];
    for (int i = 0; i < 14; i++) state[i] = (float)ro.state[i];
    frt_policy_input_params ip = frt_policy_input_default_params();
    ip.cameras = cams;
    ip.n_cameras = 3;
    ip.max_tokens = 48;
    ip.max_state_dim = 16;
    ip.tokenizer = tok;
    ip.norm_stats = st;
    frt_policy_input_set *in = NULL;
    CHECK_OK(frt_policy_inputs_build(&ip, v, 2, ro.prompt, state, 14, &in));
    frt_policy_inputs x = {in->pixel_values, 3, 3, 224, 224, in->pixel_attention_mask, in->input_ids,
                           in->attention_mask, (int)in->n_tokens, in->state, (int)in->state_dim, NULL, NULL, NULL, 0};
    float a[4 * 16], u[4 * 16];
    uint8_t mask[16];
    size_t nm = frt_robot_delta_mask(FRT_ROBOT_ALOHA, FRT_POLICY_PI0, -1, mask);
    CHECK(nm == 14);
    CHECK_OK(frt_policy_episode_start(m, seed));
    CHECK_OK(frt_policy_run(m, &x, a, 4 * 16));
    CHECK_OK(frt_policy_unnormalize_actions(st, FRT_POLICY_PI0, a, 4, 16, 16, u));
    CHECK_OK(frt_robot_actions(FRT_ROBOT_ALOHA, mask, nm, ro.state, ro.n_state, u, 4, 16, out));
    frt_policy_inputs_free(in);
    frt_robot_obs_free(&ro);
}

static frt_pobs ctrl(const char *name, int64_t seed)
{
    frt_pobs o = {0};
    frt_pobs_value *v;
    CHECK_OK(frt_pobs_add(&o, "", "__ctrl__", 8, &v));
    CHECK_OK(frt_pobs_set_string(v, name, strlen(name)));
    if (seed >= 0) {
        CHECK_OK(frt_pobs_add(&o, "", "seed", 4, &v));
        CHECK_OK(frt_pobs_set_i64(v, seed));
    }
    return o;
}

static double num(const frt_pobs *o, const char *key)
{
    const frt_pobs_value *v = frt_pobs_get(o, key);
    double x = NAN;
    if (v && v->kind == FRT_POBS_ARRAY && v->n == 1) frt_pobs_to_f64(v, &x);
    return x;
}

/* The encodings read back through the server's parsers. */
static void check_encodings(const frt_policy_service *svc, const frt_policy_reply *r)
{
    size_t len;
    frt_pobs o;
    char *b = frt_policy_service_metadata(svc, &len);
    msgpack_unpacked u; /* the metadata holds a list of camera names: read with msgpack-c itself */
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK(msgpack_unpack_next(&u, b, len, &off) == MSGPACK_UNPACK_SUCCESS && off == len);
    CHECK(u.data.type == MSGPACK_OBJECT_MAP && u.data.via.map.size == 13);
    int seen = 0;
    for (uint32_t i = 0; u.data.type == MSGPACK_OBJECT_MAP && i < u.data.via.map.size; i++) {
        const msgpack_object *k = &u.data.via.map.ptr[i].key, *v = &u.data.via.map.ptr[i].val;
        char key[32] = "";
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size < sizeof key) memcpy(key, k->via.str.ptr, k->via.str.size);
        if (!strcmp(key, "robot")) seen += v->type == MSGPACK_OBJECT_STR && !memcmp(v->via.str.ptr, "aloha", 5);
        if (!strcmp(key, "action_dim")) seen += v->via.u64 == 14;
        if (!strcmp(key, "action_horizon")) seen += v->via.u64 == 4;
        if (!strcmp(key, "model_action_dim")) seen += v->via.u64 == 16;
        if (!strcmp(key, "delta_actions")) seen += v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
        if (!strcmp(key, "cameras")) seen += v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == 3;
    }
    CHECK_MSG(seen == 6, "metadata: %d of 6 fields as expected", seen);
    msgpack_unpacked_destroy(&u);
    free(b);
    for (int json = 0; json < 2; json++) {
        b = json ? frt_policy_reply_json(r, 2.5, &len) : frt_policy_reply_msgpack(r, 2.5, 7.25, &len);
        CHECK_OK(json ? frt_pobs_parse_json(b, len, &o) : frt_pobs_parse_msgpack(b, len, &o));
        const frt_pobs_value *a = frt_pobs_get(&o, "actions");
        CHECK_MSG(a && a->dtype == FRT_POBS_F32 && a->ndim == 2 && a->shape[0] == 4 && a->shape[1] == 14 &&
                      !memcmp(a->data, r->actions, 4 * 14 * 4),
                  "%s reply", json ? "JSON" : "msgpack");
        CHECK(num(&o, "server_timing/infer_ms") == 2.5 && num(&o, "policy_timing/infer_ms") == r->infer_ms);
        CHECK(json ? !frt_pobs_get(&o, "server_timing/prev_total_ms") : num(&o, "server_timing/prev_total_ms") == 7.25);
        CHECK(o.n == (json ? 3u : 4u));
        frt_pobs_free(&o);
        free(b);
        frt_policy_ctrl_reply cr = {.name = "episode_end", .seed = 11, .steps = 3, .stop_reason = "client"};
        b = json ? frt_policy_ctrl_json(&cr, &len) : frt_policy_ctrl_msgpack(&cr, &len);
        CHECK_OK(json ? frt_pobs_parse_json(b, len, &o) : frt_pobs_parse_msgpack(b, len, &o));
        CHECK(num(&o, "seed") == 11 && num(&o, "steps") == 3 && num(&o, "ok") == 1);
        const frt_pobs_value *why = frt_pobs_get(&o, "stop_reason");
        CHECK(why && why->kind == FRT_POBS_STRING && !strcmp(why->data, "client") && !frt_pobs_get(&o, "record"));
        frt_pobs_free(&o);
        free(b);
    }
}

int main(void)
{
    frt_test_seed(77);
    json_t *manifest = ptu_setup(1);
    json_decref(manifest);
    const char *dir = ptu_path("aloha");
    write_policy(dir);
    write_stats(ptu_path("stats.json"), 14);
    frt_model_params mp = frt_model_default_params();
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &mp, &m));
    frt_policy_tokenizer *tok = NULL;
    frt_policy_norm_stats *st = NULL;
    CHECK_OK(frt_policy_tokenizer_load(ptu_path("spm.model"), &tok));
    CHECK_OK(frt_policy_norm_stats_load(ptu_path("stats.json"), &st));
    frt_policy_service_params sp = {.dir = dir, .robot = "aloha", .tokenizer = ptu_path("spm.model"),
                                    .norm_stats = ptu_path("stats.json"), .delta_actions = -1, .discrete_state = -1};
    frt_policy_service *svc = NULL;
    const char *note = "x";
    CHECK_OK(frt_policy_service_create(m, &sp, &note, &svc));
    CHECK(note == NULL);
    if (!svc) return frt_test_report();
    /* the rollout host's and CFG's settings refused with the reason, the model's CFG unchanged */
    frt_policy_service *bad_svc = (frt_policy_service *)1;
    frt_policy_service_params badp = sp;
    badp.value_stop = 1; /* without a critic */
    CHECK_STATUS(frt_policy_service_create(m, &badp, NULL, &bad_svc), FRT_ERR_INVALID_ARGUMENT);
    badp = sp;
    badp.max_chunks = -1;
    CHECK_STATUS(frt_policy_service_create(m, &badp, NULL, &bad_svc), FRT_ERR_INVALID_ARGUMENT);
    badp = sp;
    badp.episode_timeout_s = NAN;
    CHECK_STATUS(frt_policy_service_create(m, &badp, NULL, &bad_svc), FRT_ERR_INVALID_ARGUMENT);
    badp = sp;
    badp.cfg = 1;
    badp.cfg_beta = 0.5f;
    CHECK_STATUS(frt_policy_service_create(m, &badp, NULL, &bad_svc), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "beta"));
    badp = sp;
    badp.critic = ptu_path("absent.safetensors");
    CHECK_STATUS(frt_policy_service_create(m, &badp, NULL, &bad_svc), FRT_ERR_NOT_FOUND);
    int cfg_on = 1;
    CHECK_OK(frt_policy_cfg_get(m, &cfg_on, NULL, NULL));
    CHECK(cfg_on == 0 && bad_svc == (frt_policy_service *)1);

    uint8_t *hi = xmalloc(3 * 50 * 60);
    float *lw = xmalloc(3 * 30 * 40 * sizeof *lw), state[14];
    for (int i = 0; i < 3 * 50 * 60; i++) hi[i] = (uint8_t)frt_test_u64();
    frt_test_fill(lw, 3 * 30 * 40, 0, 1);
    frt_test_fill(state, 14, 0.05f, 0.95f);
    frt_pobs o = {0};
    aloha_obs(&o, hi, lw, state);

    frt_pobs c = ctrl("episode_start", 11);
    frt_policy_ctrl_reply cr;
    CHECK(frt_policy_service_is_ctrl(&c) && !frt_policy_service_is_ctrl(&o));
    CHECK_OK(frt_policy_service_ctrl(svc, &c, &cr));
    CHECK(!strcmp(cr.name, "episode_start") && cr.seed == 11 && cr.steps == 0);
    frt_pobs_free(&c);
    frt_policy_reply r;
    CHECK_OK(frt_policy_service_infer(svc, &o, &r));
    CHECK(r.chunk == 4 && r.dof == 14 && r.infer_ms > 0 && r.total_ms >= r.infer_ms);
    float want[4 * 14];
    by_hand(m, &o, st, tok, 11, want);
    CHECK_MSG(!memcmp(r.actions, want, sizeof want), "the service's chunk differs from the steps by hand");
    check_encodings(svc, &r);

    /* a bad observation (no cam_high): refused, and the episode goes on as before */
    c = ctrl("episode_start", 11);
    CHECK_OK(frt_policy_service_ctrl(svc, &c, &cr));
    frt_pobs_free(&c);
    frt_pobs bad = {0};
    int64_t sh_st = 14;
    add_array(&bad, "state", FRT_POBS_F32, &sh_st, 1, state, 14 * 4);
    frt_policy_reply r2 = {0};
    CHECK_STATUS(frt_policy_service_infer(svc, &bad, &r2), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "images/cam_high") != NULL && r2.actions == NULL);
    frt_pobs_free(&bad);
    CHECK_OK(frt_policy_service_infer(svc, &o, &r2));
    CHECK_MSG(r2.actions && !memcmp(r2.actions, r.actions, sizeof want), "after a refusal: the same chunk");
    c = ctrl("episode_end", -1);
    CHECK_OK(frt_policy_service_ctrl(svc, &c, &cr));
    CHECK(!strcmp(cr.name, "episode_end") && cr.seed == 11 && cr.steps == 1 && !strcmp(cr.stop_reason, "client"));
    frt_pobs_free(&c);
    c = ctrl("episode_end", 3); /* a seed only goes with episode_start */
    CHECK_STATUS(frt_policy_service_ctrl(svc, &c, &cr), FRT_ERR_INVALID_ARGUMENT);
    frt_pobs_free(&c);

    free(r.actions);
    free(r2.actions);
    frt_pobs_free(&o);
    free(hi);
    free(lw);
    frt_policy_service_free(svc);
    frt_policy_service_free(NULL);
    frt_policy_tokenizer_free(tok);
    frt_policy_norm_stats_free(st);
    frt_model_free(m);
    return frt_test_report();
}
