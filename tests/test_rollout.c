/*
 * test_rollout.c - the rollout host of frt/rollout.h on the cpu backend,
 * driven by the deterministic fake robot, with a small random Pi0 policy
 * (gen-model's code), a random critic and a random tiny dense LLM as the
 * planner:
 *   - the critic against its double CPU reference on random data
 *     (norm-wise rel <= 1e-5), the plan against the serial replays (the
 *     same bits), bad critic files refused with their reason;
 *   - 100 episodes: the graph capture count never changes, reset is a
 *     restore, and every episode's actions equal the first's byte for byte;
 *   - each stop predicate (client, value, max_chunks, timeout);
 *   - the episode_NNN.npz record, read back with /usr/bin/python3 numpy;
 *   - the planner -> actor hand-off: the bytes in the actor's input_ids port
 *     equal the planner's greedy tokens, the chunk equals an inference given
 *     those ids explicitly, an interrupt takes effect on the next tick, the
 *     capture counts of both contexts do not change;
 *   - bad input to every entry point, the state unchanged.
 */
#include "frt_test.h"

#include "frt/capsule.h"
#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/rollout.h"
#include "gen_model.h"
#include "model/model_internal.h"
#include "robot/robot_internal.h"
#include "rollout_test_util.h"

#include <math.h>
#include <unistd.h>
#include <xxhash.h>

/* vocab 2048: the tiny-dense planner's ids are the actor's. */
static const frt_gen_policy_dims DIMS = {
    .v_width = 16, .v_inter = 24, .v_layers = 1, .v_heads = 2, .image_size = 28, .patch = 14,
    .t_width = 32, .t_inter = 40, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 8, .vocab = 2048,
    .e_width = 16, .e_inter = 24, .chunk = 4, .action_dim = 5, .state_dim = 6, .steps = 10,
};
enum { NA = 4 * 5, SD = 6, WIDTH = 32 };

static frt_model *load_policy(const char *sub, int vocab, int pi05)
{
    frt_gen_policy_dims d = DIMS;
    d.vocab = vocab;
    return rt_load_policy(path_in(sub), &d, pi05, FRT_BACKEND_CPU);
}

static frt_checkpoint *planner_ck; /* borrowed by the planner model: closed after it */

/* The planner, co-hosted in the policy's context (another backend or
 * device refused first). */
static frt_model *load_planner(frt_model *policy)
{
    frt_model_config cfg;
    frt_checkpoint *ck = NULL;
    frt_model_params mp = rt_llm_params(policy, &cfg, &ck);
    frt_model *m = NULL;
    mp.backend = FRT_BACKEND_CUDA; /* another backend than the context's (a build without CUDA has none) */
    const int rc = frt_model_load_checkpoint(ck, &cfg, NULL, &mp, &m);
    CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT || (!FRT_HAVE_CUDA && rc == FRT_ERR_UNSUPPORTED), "%s", frt_last_error());
    mp.backend = FRT_BACKEND_CPU;
    mp.device = 1; /* another device */
    CHECK_STATUS(frt_model_load_checkpoint(ck, &cfg, NULL, &mp, &m), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "params.context"));
    mp.device = 0;
    CHECK_OK(frt_model_load_checkpoint(ck, &cfg, NULL, &mp, &m));
    CHECK(frt_model_context(m) == frt_model_context(policy));
    planner_ck = ck;
    return m;
}

static frt_critic *load_critic(frt_model *policy, uint64_t seed)
{
    CHECK_OK(frt_critic_write_random(path_in("critic.safetensors"), SD, WIDTH, 12, 3, seed));
    frt_critic *c = NULL;
    CHECK_OK(frt_critic_load(policy, path_in("critic.safetensors"), &c));
    return c;
}

static const int32_t PROMPT[5] = {2, 101, 1500, 37, 999};

/* ---- the critic ------------------------------------------------------------- */

static void test_critic_reference(frt_model *m, frt_critic *c)
{
    frt_critic_info ci;
    CHECK_OK(frt_critic_info_get(c, &ci));
    CHECK(ci.state_dim == SD && ci.width == WIDTH && ci.n_layers == 3 && ci.hidden == 12);
    frt_fake_robot *f = NULL;
    CHECK_OK(frt_fake_robot_create(m, 3, 2, &f));
    float vt[3 * 4 * WIDTH], actions[NA];
    for (int t = 0; t < 4; t++) {
        frt_policy_inputs obs;
        CHECK_OK(frt_fake_robot_observe(f, t, &obs));
        obs.input_ids = PROMPT;
        obs.n_tokens = 5;
        uint8_t mask[2] = {1, (uint8_t)(t % 2)}; /* the second camera absent on even ticks */
        obs.camera_mask = mask;
        CHECK_OK(frt_policy_run(m, &obs, actions, NA));
        CHECK_OK(frt_critic_set_state(c, obs.state, SD - t % 3)); /* shorter states zero-padded */
        float v;
        CHECK_OK(frt_critic_run(c, &v));
        CHECK_OK(frt_model_output_read(m, "vision_tokens", vt, sizeof vt));
        double ref;
        CHECK_OK(frt_critic_reference(c, vt, 2, 4, mask, obs.state, SD - t % 3, &ref));
        CHECK_MSG(fabs(v - ref) <= 1e-5 * fabs(ref) + 1e-7, "tick %d: critic %.9g, reference %.9g", t, v, ref);
        CHECK(ref != 0.0);
    }
    frt_fake_robot_free(f);
    printf("critic: matches its double reference (rel <= 1e-5) on 4 random observations\n");
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    CHECK(fp && fputs(text, fp) >= 0);
    fclose(fp);
}

/* One broken critic file of two layers: `drop` a tensor left out, or the
 * last layer with `outs` outputs, or layer 1 taking `in1` values. */
static int bad_critic(frt_model *m, const char *drop, int outs, int in1)
{
    float w0[12 * (SD + WIDTH)] = {0}, b0[12] = {0}, w1[2 * 13] = {0}, b1[2] = {0};
    frt_test_fill(w0, 12 * (SD + WIDTH), -1, 1);
    frt_st_writer *w = NULL;
    CHECK_OK(frt_st_writer_create(&w));
    const int64_t s0[2] = {12, SD + WIDTH}, sb0[1] = {12}, s1[2] = {outs, in1}, sb1[1] = {outs};
    if (strcmp(drop, "w0")) CHECK_OK(frt_st_writer_add(w, "critic.layers.0.weight", FRT_DT_F32, 2, s0, w0));
    if (strcmp(drop, "b0")) CHECK_OK(frt_st_writer_add(w, "critic.layers.0.bias", FRT_DT_F32, 1, sb0, b0));
    CHECK_OK(frt_st_writer_add(w, "critic.layers.1.weight", FRT_DT_F32, 2, s1, w1));
    CHECK_OK(frt_st_writer_add(w, "critic.layers.1.bias", FRT_DT_F32, 1, sb1, b1));
    CHECK_OK(frt_st_writer_write(w, path_in("bad.safetensors")));
    frt_st_writer_destroy(w);
    frt_critic *c = (frt_critic *)1;
    int rc = frt_critic_load(m, path_in("bad.safetensors"), &c);
    CHECK(c == NULL);
    return rc;
}

static void test_critic_bad(frt_model *m)
{
    CHECK_STATUS(bad_critic(m, "w0", 1, 12), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "critic.layers.0.weight"));
    CHECK_STATUS(bad_critic(m, "b0", 1, 12), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "critic.layers.0.bias"));
    CHECK_STATUS(bad_critic(m, "", 2, 12), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "outputs"));
    CHECK_STATUS(bad_critic(m, "", 1, 13), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "layer 1 takes 13"));
    write_file(path_in("junk.safetensors"), "not a safetensors file");
    frt_critic *c = NULL;
    CHECK(frt_critic_load(m, path_in("junk.safetensors"), &c) < 0 && c == NULL);
    CHECK_STATUS(frt_critic_load(m, path_in("absent.safetensors"), &c), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_critic_load(NULL, path_in("junk.safetensors"), &c), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_critic_write_random(path_in("narrow.safetensors"), 1, WIDTH - 1, 4, 1, 1)); /* in_0 == width */
    CHECK_STATUS(frt_critic_load(m, path_in("narrow.safetensors"), &c), FRT_ERR_FORMAT);
    CHECK_STATUS(frt_critic_write_random(path_in("x"), 0, WIDTH, 4, 1, 1), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_critic_write_random(path_in("x"), SD, WIDTH, 4, 17, 1), FRT_ERR_INVALID_ARGUMENT);
    /* the fuzz seeds: the valid ones parse, the bad ones do not */
    static const char *const seeds[] = {"valid_two_layers", "valid_one_layer_bf16", "bad_chain", "bad_two_outputs",
                                        "bad_no_bias", "bad_int_weight", "bad_narrow", "bad_truncated"};
    for (int i = 0; i < 8; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/fuzz/corpus/critic/%s.safetensors", FRT_SOURCE_DIR, seeds[i]);
        FILE *fp = fopen(p, "rb");
        CHECK_MSG(fp, "%s", p);
        static unsigned char img[4096];
        size_t n = fread(img, 1, sizeof img, fp);
        fclose(fp);
        frt_critic_info ci;
        int rc = frt_critic_parse_memory(img, n, 8, &ci);
        CHECK_MSG((rc == 0) == (i < 2), "seed %s: %s", seeds[i], rc ? frt_last_error() : "parsed");
        if (i == 0) CHECK(ci.state_dim == 3 && ci.n_layers == 2 && ci.hidden == 4);
    }
    printf("critic: bad files refused (missing weight / bias, 2 outputs, broken chain, junk, absent, narrow)\n");
}

/* ---- the rollout ------------------------------------------------------------ */

static int episode(frt_rollout *r, frt_fake_robot *f, float *acts, float *values, int max)
{
    return rt_episode(r, f, NA, acts, values, max);
}

static void open_host(frt_model *m, frt_critic *c, const frt_rollout_params *p, uint64_t robot_seed, int cameras,
                      frt_rollout **r, frt_fake_robot **f)
{
    rt_open_host(m, c, p, PROMPT, 5, robot_seed, cameras, r, f);
}

/* frt_rollout_reseed: only between episodes; the new seed's episodes
 * differ, the old seed back gives the old episode bytes, no capture. */
static void test_reseed(frt_model *m, frt_critic *c)
{
    frt_rollout_params p = frt_rollout_default_params();
    p.seed = 42;
    p.max_chunks = 2;
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    open_host(m, c, &p, 9, 2, &r, &f);
    const uint64_t captures = frt_context_capture_count(frt_model_context(m));
    float a42[2 * NA], a43[2 * NA], again[2 * NA];
    CHECK(episode(r, f, a42, NULL, 2) == 2);
    CHECK_STATUS(frt_rollout_reseed(r, 43), FRT_ERR_STATE); /* mid-episode */
    CHECK(frt_rollout_seed(r) == 42);
    CHECK_OK(frt_rollout_end(r, NULL, NULL));
    CHECK_OK(frt_rollout_reseed(r, 43));
    CHECK(frt_rollout_seed(r) == 43);
    CHECK(episode(r, f, a43, NULL, 2) == 2);
    CHECK_OK(frt_rollout_end(r, NULL, NULL));
    CHECK_OK(frt_rollout_reseed(r, 42));
    CHECK(episode(r, f, again, NULL, 2) == 2);
    CHECK(memcmp(a42, a43, sizeof a42) != 0 && !memcmp(a42, again, sizeof a42));
    CHECK(frt_context_capture_count(frt_model_context(m)) == captures);
    CHECK_STATUS(frt_rollout_reseed(NULL, 1), FRT_ERR_INVALID_ARGUMENT);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    printf("reseed: refused mid-episode; seed 43 differs, seed 42 again byte-identical, no capture\n");
}

static frt_stop_reason one_stop(frt_model *m, frt_critic *c, frt_rollout_params *p, int request, int *ran)
{
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    open_host(m, c, p, 1, 1, &r, &f);
    float acts[8 * NA];
    if (request) {
        frt_policy_inputs obs;
        frt_rollout_tick_out o;
        CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
        CHECK_OK(frt_rollout_tick(r, &obs, acts, NA, &o));
        CHECK(o.ran && o.stop == FRT_STOP_NONE);
        CHECK_OK(frt_rollout_request_stop(r));
    }
    *ran = episode(r, f, acts + (request ? NA : 0), NULL, 8 - request) + request;
    frt_rollout_status st;
    CHECK_OK(frt_rollout_status_get(r, &st));
    /* a stopped episode runs nothing until it is ended */
    frt_policy_inputs obs;
    frt_rollout_tick_out o;
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    CHECK_STATUS(frt_rollout_tick(r, &obs, acts, NA, &o), FRT_ERR_STATE);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    return st.stop;
}

static void test_stops(frt_model *m, frt_critic *c)
{
    int ran;
    frt_rollout_params p = frt_rollout_default_params();
    p.max_chunks = 8;
    CHECK(one_stop(m, c, &p, 1, &ran) == FRT_STOP_CLIENT && ran == 1);
    p.value_stop = 1;
    p.value_threshold = 1e30f; /* every value is below it */
    CHECK(one_stop(m, c, &p, 0, &ran) == FRT_STOP_VALUE && ran == 1);
    p.value_threshold = -1e30f;
    CHECK(one_stop(m, c, &p, 0, &ran) == FRT_STOP_MAX_CHUNKS && ran == 8);
    p.value_stop = 0;
    p.value_threshold = 0; /* a threshold without value_stop is refused */
    p.timeout_s = 1e-9; /* over after the first chunk */
    CHECK(one_stop(m, c, &p, 0, &ran) == FRT_STOP_TIMEOUT && ran == 1);
    p.timeout_s = 3600;
    p.max_chunks = 2;
    CHECK(one_stop(m, NULL, &p, 0, &ran) == FRT_STOP_MAX_CHUNKS && ran == 2);
    printf("stops: client after 1, value after 1, max_chunks after 8 and 2, timeout after 1\n");
}

static void test_record(frt_model *m, frt_critic *c)
{
    if (access("/usr/bin/python3", X_OK) != 0 || system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        printf("record: SKIPPED numpy check (/usr/bin/python3 with numpy missing)\n");
        return;
    }
    frt_rollout_params p = frt_rollout_default_params();
    p.seed = 3;
    p.max_chunks = 5;
    p.record_dir = rt_dir;
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    open_host(m, c, &p, 2, 2, &r, &f);
    float acts[5 * NA], v[5];
    char *file = NULL;
    CHECK(episode(r, f, acts, v, 5) == 5);
    CHECK_OK(frt_rollout_end(r, &file, NULL));
    CHECK(file && strstr(file, "episode_000.npz"));
    free(file);
    CHECK(episode(r, f, acts, v, 5) == 5);
    CHECK_OK(frt_rollout_end(r, &file, NULL));
    CHECK(file && strstr(file, "episode_001.npz"));
    /* numpy writes back what it read; the C side compares the bytes */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; z = np.load('%s'); "
             "assert z['actions'].shape == (5, 4, 5) and z['actions'].dtype == np.float32; "
             "assert z['values'].shape == (5,) and z['obs_digest'].dtype == np.uint64 and len(set(z['obs_digest'])) == 5; "
             "assert int(z['stop_reason']) == 3 and z['stop_reason_name'][()] == b'max_chunks'; "
             "assert int(z['episode']) == 1 and int(z['seed']) == 3 and float(z['reset_ms']) > 0; "
             "assert z['tick_ms'].shape == (5,) and (z['tick_ms'] > 0).all() and len(set(z['prompt_digest'])) == 1; "
             "open('%s', 'wb').write(z['actions'].tobytes() + z['values'].tobytes())\"",
             file, path_in("back.bin"));
    CHECK_MSG(system(cmd) == 0, "numpy could not read %s as expected", file);
    free(file);
    float back[5 * NA + 5];
    FILE *fp = fopen(path_in("back.bin"), "rb");
    CHECK(fp && fread(back, sizeof(float), 5 * NA + 5, fp) == 5 * NA + 5);
    fclose(fp);
    CHECK(!memcmp(back, acts, sizeof acts) && !memcmp(back + 5 * NA, v, sizeof v));
    /* an unwritable directory: the episode is kept, nothing reset */
    frt_rollout_params q = p;
    q.record_dir = "/nonexistent/frt_rollout";
    frt_rollout *r2 = NULL;
    CHECK_OK(frt_rollout_create(m, c, &q, &r2));
    CHECK_OK(frt_rollout_set_prompt(r2, PROMPT, 5));
    CHECK(episode(r2, f, acts, v, 5) == 5);
    CHECK_STATUS(frt_rollout_end(r2, &file, NULL), FRT_ERR_IO);
    frt_rollout_status st;
    CHECK_OK(frt_rollout_status_get(r2, &st));
    CHECK(file == NULL && st.episode == 0 && st.chunks == 5 && st.stop == FRT_STOP_MAX_CHUNKS);
    frt_rollout_destroy(r2);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    printf("record: episode_000.npz / episode_001.npz read by numpy, actions and values byte-identical\n");
}

/* ---- planner -> actor --------------------------------------------------------- */

/* The planner's greedy subtask for an instruction, computed apart. */
static void greedy(frt_model *llm, const int32_t *ins, int n, int32_t *out, int k)
{
    int32_t t;
    CHECK_OK(frt_model_reset(llm));
    CHECK_OK(frt_model_prefill(llm, ins, n));
    CHECK_OK(frt_model_sample(llm, NULL, &t));
    out[0] = t;
    for (int i = 1; i < k; i++) {
        CHECK_OK(frt_model_decode(llm, NULL, &t));
        out[i] = t;
    }
}

static void test_handoff(frt_model *m, frt_model *llm)
{
    enum { K = 3, L = 6 };
    const int32_t interrupt[4] = {2, 77, 1234, 5};
    int32_t sub0[L], sub_i[L], got[64];
    int n;
    greedy(llm, PROMPT, 5, sub0, L);
    greedy(llm, interrupt, 4, sub_i, L);
    CHECK(memcmp(sub0, sub_i, sizeof sub0) != 0);

    frt_rollout_params p = frt_rollout_default_params();
    p.seed = 5;
    p.max_chunks = 6;
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    CHECK_OK(frt_rollout_create(m, NULL, &p, &r));
    CHECK_OK(frt_rollout_set_prompt(r, PROMPT, 5));
    frt_planner_params pp = {llm, K, L};
    CHECK_OK(frt_rollout_set_planner(r, &pp));
    CHECK_OK(frt_fake_robot_create(m, 6, 1, &f));
    CHECK(frt_model_context(m) == frt_model_context(llm)); /* one context, two models */
    const uint64_t cap_a = frt_context_capture_count(frt_model_context(m));
    /* the ids each tick ran on, and its chunk */
    int32_t used[6][L];
    int n_used[6];
    float acts[6][NA];
    for (int t = 0; t < 6; t++) {
        if (t == 2) CHECK_OK(frt_rollout_set_prompt(r, interrupt, 4)); /* the client's new instruction */
        frt_policy_inputs obs;
        frt_rollout_tick_out o;
        CHECK_OK(frt_fake_robot_observe(f, t, &obs));
        CHECK_OK(frt_rollout_tick(r, &obs, acts[t], NA, &o));
        CHECK(o.ran);
        CHECK_OK(frt_rollout_prompt_get(r, got, 64, &n));
        memcpy(used[t], got, (size_t)n * sizeof *got);
        n_used[t] = n;
    }
    /* tick 0: the planner's subtask of the instruction; 1: unchanged; 2: the
     * interrupt itself; 3, 4: unchanged; 5 = 2 + K: the planner on the new one */
    CHECK(n_used[0] == L && !memcmp(used[0], sub0, sizeof sub0));
    CHECK(n_used[1] == L && !memcmp(used[1], sub0, sizeof sub0));
    CHECK(n_used[2] == 4 && !memcmp(used[2], interrupt, sizeof interrupt));
    CHECK(n_used[4] == 4 && !memcmp(used[4], interrupt, sizeof interrupt));
    CHECK(n_used[5] == L && !memcmp(used[5], sub_i, sizeof sub_i));
    frt_rollout_status st;
    CHECK_OK(frt_rollout_status_get(r, &st));
    CHECK(st.planner_runs == 2);
    /* the planner's ids reached the port device to device: the only host
     * writes are the two frt_rollout_set_prompt calls */
    CHECK(st.handoff_host_writes == 2);
    CHECK(st.handoff_device_copies == 2 * L);
    CHECK(frt_context_capture_count(frt_model_context(m)) == cap_a);
    frt_buffer *tok = NULL;
    size_t off = 0;
    CHECK_OK(frt_model_sampled_token(llm, &tok, &off));
    int32_t pend = -2;
    CHECK_OK(frt_buffer_read(tok, off, &pend, sizeof pend, frt_context_stream(frt_model_context(llm))));
    CHECK_OK(frt_stream_sync(frt_context_stream(frt_model_context(llm))));
    CHECK(pend == frt_model_pending(llm) && pend == sub_i[L - 1]);
    CHECK_STATUS(frt_model_sampled_token(m, &tok, &off), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_model_sampled_token(llm, NULL, &off), FRT_ERR_INVALID_ARGUMENT);

    /* the same episode with the ids given explicitly: the same chunks */
    CHECK_OK(frt_rollout_end(r, NULL, NULL));
    pp.llm = NULL;
    CHECK_OK(frt_rollout_set_planner(r, &pp));
    for (int t = 0; t < 6; t++) {
        frt_policy_inputs obs;
        frt_rollout_tick_out o;
        float a[NA];
        CHECK_OK(frt_fake_robot_observe(f, t, &obs));
        obs.input_ids = used[t];
        obs.n_tokens = n_used[t];
        CHECK_OK(frt_rollout_tick(r, &obs, a, NA, &o));
        CHECK_MSG(!memcmp(a, acts[t], sizeof a), "tick %d: the hand-off chunk differs from the explicit one", t);
    }
    CHECK(memcmp(acts[1], acts[2], sizeof acts[1]) != 0);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    printf("hand-off: input_ids port == planner's greedy ids (ticks 0, 1, 5), interrupt on the next tick (2), "
           "chunks == explicit ids, %llu captures of the shared context unchanged, the planner's ids copied device "
           "to device (%llu copies, host writes only the 2 set_prompt)\n",
           (unsigned long long)cap_a, (unsigned long long)st.handoff_device_copies);
}

/* A planner that fails between its first and last id (its state fills
 * up: max_seq 64, 40 instruction ids + 30 steps) fails the tick and leaves
 * the hand-off buffer unbound, until set_prompt binds it again. */
static void test_planner_failure(frt_model *m)
{
    frt_model_config cfg;
    frt_checkpoint *ck = NULL;
    frt_model_params mp = rt_llm_params(m, &cfg, &ck);
    mp.max_seq = 64;
    mp.prefill_chunk = 64;
    frt_model *llm = NULL;
    CHECK_OK(frt_model_load_checkpoint(ck, &cfg, NULL, &mp, &llm));
    int32_t ins[40];
    for (int i = 0; i < 40; i++) ins[i] = 2 + (int32_t)frt_test_rand(0.0f, 2000.0f);
    frt_rollout_params p = frt_rollout_default_params();
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    rt_open_host(m, NULL, &p, ins, 40, 2, 1, &r, &f);
    frt_planner_params pp = {llm, 1, 30};
    CHECK_OK(frt_rollout_set_planner(r, &pp));
    frt_policy_inputs obs;
    frt_rollout_tick_out o;
    float a[NA];
    int32_t got[48];
    int n = 0;
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    CHECK_STATUS(frt_rollout_tick(r, &obs, a, NA, &o), FRT_ERR_OUT_OF_RANGE); /* the LLM's state is full */
    CHECK_STATUS(frt_rollout_prompt_get(r, got, 48, &n), FRT_ERR_STATE);    /* unbound */
    frt_rollout_status st;
    CHECK_OK(frt_rollout_status_get(r, &st));
    CHECK(st.handoff_device_copies == 64 - 40 + 1 && st.planner_runs == 0);
    CHECK_OK(frt_rollout_end(r, NULL, NULL));
    pp.llm = NULL;
    CHECK_OK(frt_rollout_set_planner(r, &pp));
    CHECK_OK(frt_rollout_set_prompt(r, ins, 40)); /* bound again */
    CHECK_OK(frt_rollout_tick(r, &obs, a, NA, &o));
    CHECK(o.ran);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    frt_model_free(llm);
    frt_checkpoint_close(ck);
    printf("planner failure mid-subtask: the tick fails, the hand-off buffer unbound until set_prompt\n");
}

/* Pi0.5 (the state in the prompt, none in the observation): reset
 * exactness and the critic (its state zero) through the plan. */
static void test_pi05(void)
{
    frt_model *m = load_policy("pi05", DIMS.vocab, 1);
    frt_critic *c = load_critic(m, 23);
    frt_rollout_params p = frt_rollout_default_params();
    p.seed = 8;
    p.max_chunks = 3;
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    open_host(m, c, &p, 5, 2, &r, &f);
    frt_policy_inputs obs;
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    CHECK(obs.state == NULL && obs.n_state == 0);
    float a[2][3 * NA], v[2][3];
    for (int e = 0; e < 2; e++) {
        CHECK(episode(r, f, a[e], v[e], 3) == 3);
        CHECK_OK(frt_rollout_end(r, NULL, NULL));
    }
    CHECK(!memcmp(a[0], a[1], sizeof a[0]) && !memcmp(v[0], v[1], sizeof v[0]) && isfinite(v[0][0]));
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    frt_critic_free(c);
    frt_model_free(m);
    printf("pi05: two episodes byte-identical, critic values finite\n");
}

/* ---- bad input -------------------------------------------------------------- */

/* The live state table's bytes, chained (cpu backend: host memory). */
static uint64_t state_hash(const frt_model *m)
{
    uint64_t d = 0;
    for (int i = 0; i < m->n_state; i++) d = XXH64(frt_buffer_ptr(m->state[i].buf), m->state[i].bytes, d);
    return d;
}

static void test_bad(frt_model *m, frt_critic *c, frt_model *llm)
{
    frt_rollout_params p = frt_rollout_default_params();
    frt_rollout *r = (frt_rollout *)1;
    p.max_chunks = 0;
    CHECK_STATUS(frt_rollout_create(m, c, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    p = frt_rollout_default_params();
    p.value_stop = 1;
    CHECK_STATUS(frt_rollout_create(m, NULL, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    p.value_threshold = NAN;
    CHECK_STATUS(frt_rollout_create(m, c, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    p = frt_rollout_default_params();
    p.timeout_s = -1;
    CHECK_STATUS(frt_rollout_create(m, c, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    p = frt_rollout_default_params();
    p.serial = 2;
    CHECK_STATUS(frt_rollout_create(m, c, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    /* fields that would have no effect: a threshold without value_stop, serial without a critic */
    p = frt_rollout_default_params();
    p.value_threshold = 0.5f;
    CHECK_STATUS(frt_rollout_create(m, c, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "value_threshold") && r == NULL);
    p = frt_rollout_default_params();
    p.serial = 1;
    CHECK_STATUS(frt_rollout_create(m, NULL, &p, &r), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "serial") && r == NULL);
    p = frt_rollout_default_params();
    CHECK_STATUS(frt_rollout_create(llm, NULL, &p, &r), FRT_ERR_UNSUPPORTED);
    frt_model *small = load_policy("small", 61, 0);
    CHECK_STATUS(frt_rollout_create(small, c, &p, &r), FRT_ERR_INVALID_ARGUMENT); /* another policy's critic */
    CHECK_OK(frt_rollout_create(small, NULL, &p, &r));
    frt_planner_params pp = {llm, 2, 8};
    CHECK_STATUS(frt_rollout_set_planner(r, &pp), FRT_ERR_INVALID_ARGUMENT); /* another context */
    CHECK(strstr(frt_last_error(), "context"));
    frt_checkpoint *small_ck = NULL;
    pp.llm = rt_llm_in(small, &small_ck);
    CHECK_OK(frt_rollout_set_planner(r, &pp)); /* 2048 ids: sampling masked to the actor's 61 */
    const int32_t ins[3] = {2, 40, 7};
    CHECK_OK(frt_rollout_set_prompt(r, ins, 3));
    frt_fake_robot *fs = NULL;
    CHECK_OK(frt_fake_robot_create(small, 1, 1, &fs));
    frt_policy_inputs so;
    frt_rollout_tick_out sto;
    float sa[NA];
    int32_t got[16];
    int ng = 0, n_over = 0;
    CHECK_OK(frt_fake_robot_observe(fs, 0, &so));
    CHECK_OK(frt_rollout_tick(r, &so, sa, NA, &sto));
    CHECK_OK(frt_rollout_prompt_get(r, got, 16, &ng));
    for (int i = 0; i < ng; i++) n_over += got[i] >= 61;
    CHECK(ng == 8 && n_over == 0);
    const int32_t big[2] = {2, 100}; /* an instruction id outside the actor's vocabulary */
    CHECK_STATUS(frt_rollout_set_prompt(r, big, 2), FRT_ERR_INVALID_ARGUMENT);
    frt_fake_robot_free(fs);
    frt_rollout_destroy(r);
    frt_model_free(pp.llm);
    frt_checkpoint_close(small_ck);
    frt_model_free(small);
    pp.llm = llm;

    CHECK_OK(frt_rollout_create(m, c, &p, &r));
    frt_fake_robot *f = NULL;
    CHECK_OK(frt_fake_robot_create(m, 1, 1, &f));
    frt_policy_inputs obs;
    frt_rollout_tick_out o;
    float a[NA];
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    const uint64_t h = state_hash(m);
    CHECK_STATUS(frt_rollout_tick(r, &obs, a, NA, &o), FRT_ERR_INVALID_ARGUMENT); /* no prompt bound */
    const int32_t bad_ids[2] = {2, 2048};
    CHECK_STATUS(frt_rollout_set_prompt(r, bad_ids, 2), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_rollout_set_prompt(r, PROMPT, 0), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_rollout_set_prompt(r, PROMPT, 5));
    CHECK_STATUS(frt_rollout_tick(r, &obs, a, NA - 1, &o), FRT_ERR_INVALID_ARGUMENT);
    obs.n_tokens = 4; /* input_ids NULL: the bound prompt has 5 ids, a different n_tokens is refused */
    CHECK_STATUS(frt_rollout_tick(r, &obs, a, NA, &o), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "n_tokens"));
    obs.n_tokens = 0;
    float nan_state[SD] = {0, NAN, 0, 0, 0, 0};
    obs.state = nan_state;
    CHECK_STATUS(frt_rollout_tick(r, &obs, a, NA, &o), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    obs.height = 27;
    CHECK_STATUS(frt_rollout_tick(r, &obs, a, NA, &o), FRT_ERR_INVALID_ARGUMENT);
    CHECK(h == state_hash(m));
    frt_rollout_status st;
    CHECK_OK(frt_rollout_status_get(r, &st));
    CHECK(st.chunks == 0 && st.stop == FRT_STOP_NONE);
    pp.every = 0;
    CHECK_STATUS(frt_rollout_set_planner(r, &pp), FRT_ERR_INVALID_ARGUMENT);
    pp.every = 1;
    pp.subtask_tokens = 1000;
    CHECK_STATUS(frt_rollout_set_planner(r, &pp), FRT_ERR_INVALID_ARGUMENT);
    pp.llm = m;
    pp.subtask_tokens = 2;
    CHECK_STATUS(frt_rollout_set_planner(r, &pp), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_rollout_tick(NULL, &obs, a, NA, &o), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_rollout_end(NULL, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_rollout_request_stop(NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_fake_robot_observe(f, -1, &obs), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_critic_set_state(c, obs.state, SD + 1), FRT_ERR_INVALID_ARGUMENT);
    float inf_state[SD] = {0, 0, INFINITY, 0, 0, 0};
    CHECK_STATUS(frt_critic_set_state(c, inf_state, SD), FRT_ERR_INVALID_ARGUMENT);
    frt_rollout_destroy(r);
    frt_rollout_destroy(NULL);

    /* a bound prompt whose port holds an id outside the vocabulary */
    frt_buffer *ids = frt_policy_port_buffer(m, "input_ids");
    CHECK(ids && frt_policy_port_buffer(m, "vision_tokens") && !frt_policy_port_buffer(m, "nope"));
    CHECK(frt_policy_port_buffer(llm, "input_ids") == NULL);
    const int32_t over[3] = {2, 5000, 7};
    CHECK_OK(frt_buffer_write(ids, 0, over, sizeof over, frt_context_stream(frt_model_context(m))));
    CHECK_OK(frt_stream_sync(frt_context_stream(frt_model_context(m))));
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    obs.n_tokens = 3;
    CHECK_STATUS(frt_policy_stage(m, &obs), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "5000"));
    obs.n_tokens = 0;
    CHECK_STATUS(frt_policy_stage(m, &obs), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_run(m, &obs, a, NA), FRT_ERR_INVALID_ARGUMENT); /* run needs input_ids */
    CHECK(h == state_hash(m));
    frt_fake_robot_free(f);
    printf("bad input: refused with the state unchanged\n");
}

static int record_nothing(frt_stream *s, void *user)
{
    (void)s;
    (void)user;
    return 0;
}

static int record_refused(frt_stream *s, void *user)
{
    (void)s;
    (void)user;
    return FRT_ERR_STATE;
}

/* frt_context_capture_count: +1 per successful capture, a discarded one
 * does not count; the critic's load is one capture. */
static void test_capture_count(frt_model *m)
{
    frt_context *ctx = frt_model_context(m);
    const uint64_t n0 = frt_context_capture_count(ctx);
    frt_graph *g = NULL;
    CHECK_OK(frt_graph_create(ctx, "count", 0, &g));
    CHECK_OK(frt_graph_capture(g, 1, frt_context_stream(ctx), record_nothing, NULL));
    CHECK(frt_context_capture_count(ctx) == n0 + 1);
    CHECK_STATUS(frt_graph_capture(g, 2, frt_context_stream(ctx), record_refused, NULL), FRT_ERR_STATE);
    CHECK(frt_context_capture_count(ctx) == n0 + 1);
    CHECK_OK(frt_graph_capture(g, 1, frt_context_stream(ctx), record_nothing, NULL)); /* a recapture counts */
    CHECK(frt_context_capture_count(ctx) == n0 + 2);
    frt_graph_destroy(g);
    CHECK(frt_context_capture_count(NULL) == 0);
    frt_critic *c = load_critic(m, 99);
    CHECK(frt_context_capture_count(ctx) == n0 + 3);
    frt_critic_free(c);
    printf("capture count: +1 per capture, a discarded capture not counted, the critic's load one capture\n");
}

int main(void)
{
    if (rt_tmpdir("frt_rollout")) TEST_SKIP("cannot create a temporary directory");
    frt_model *m = load_policy("pi0", DIMS.vocab, 0);
    frt_model *llm = load_planner(m);
    test_capture_count(m);
    frt_critic *c = load_critic(m, 17);
    test_critic_reference(m, c);
    test_critic_bad(m);
    rt_check_plan_vs_serial(m, c, PROMPT, 5, NA);
    rt_check_reset(m, c, PROMPT, 5, NA, 100);
    test_reseed(m, c);
    test_stops(m, c);
    test_record(m, c);
    test_handoff(m, llm);
    rt_check_handoff_device(m, llm, NA);
    test_planner_failure(m);
    test_bad(m, c, llm);
    test_pi05();
    frt_critic_free(c);
    frt_model_free(llm);
    frt_checkpoint_close(planner_ck);
    float a[NA];
    frt_fake_robot *f = NULL;
    frt_policy_inputs obs;
    CHECK_OK(frt_fake_robot_create(m, 1, 1, &f));
    CHECK_OK(frt_fake_robot_observe(f, 0, &obs));
    obs.input_ids = PROMPT;
    obs.n_tokens = 5;
    CHECK_OK(frt_policy_run(m, &obs, a, NA)); /* the shared context outlived the planner */
    frt_fake_robot_free(f);
    frt_model_free(m);
    return frt_test_report();
}
