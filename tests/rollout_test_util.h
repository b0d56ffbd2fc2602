/*
 * rollout_test_util.h - what tests/test_rollout.c (cpu backend) and
 * tests/test_cuda_rollout.c (cuda backend) share: a random policy written
 * by gen-model's code and loaded on a backend, one episode of the fake
 * robot until a predicate stops it, and the two rollout checks both
 * backends must pass (include after frt_test.h):
 *
 *   rt_tmpdir(name) / path_in(file)              /tmp/NAME_XXXXXX (rt_dir, removed at
 *                                                exit) and a path in it
 *   rt_load_policy(path, dims, pi05, backend)    a random Pi0 / Pi0.5
 *   rt_episode(r, f, na, acts, values, max)      chunks run until the stop
 *   rt_check_plan_vs_serial(m, c, prompt, n, na) the plan == serial, bits
 *   rt_check_reset(m, c, prompt, n, na, episodes) capture count constant,
 *                                                every episode == the first
 *   rt_llm_params(policy, cfg, ck) / rt_llm_in(policy, ck)
 *                                                a tiny-dense LLM in the policy's context
 *   rt_check_handoff_device(m, llm, na)          the planner's ids reach the actor's
 *                                                port device to device
 */
#ifndef FRT_ROLLOUT_TEST_UTIL_H
#define FRT_ROLLOUT_TEST_UTIL_H

#include "frt/checkpoint.h"
#include "frt/debug.h" /* frt_model_load_checkpoint */
#include "frt/fs.h"
#include "frt/rollout.h"
#include "gen_model.h"

#include <math.h>
#include <stdlib.h>

static char rt_dir[96];

static void rt_cleanup(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", rt_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", rt_dir);
}

/* Makes the test's directory /tmp/NAME_XXXXXX, removed at exit. 0, or -1. */
static int rt_tmpdir(const char *name)
{
    snprintf(rt_dir, sizeof rt_dir, "/tmp/%s_XXXXXX", name);
    if (!mkdtemp(rt_dir)) return -1;
    atexit(rt_cleanup);
    return 0;
}

/* NAME inside rt_dir (one of 4 rotating static buffers). */
static const char *path_in(const char *name)
{
    static char buf[4][600];
    static int at;
    at = (at + 1) % 4;
    snprintf(buf[at], sizeof buf[at], "%s/%s", rt_dir, name);
    return buf[at];
}

static frt_model *rt_load_policy(const char *path, const frt_gen_policy_dims *d, int pi05, frt_backend backend)
{
    frt_weight_spec *w = NULL;
    int n = 0;
    frt_checkpoint *ck = NULL;
    CHECK_OK(frt_gen_policy_specs_dims(d, pi05, &w, &n));
    CHECK_OK(frt_gen_model_build_specs(w, n, 11, &ck));
    CHECK_OK(frt_mkdir_p(path));
    CHECK_OK(frt_checkpoint_write(ck, path, 0, FRT_CKPT_WRITE_NO_FSYNC));
    CHECK_OK(frt_gen_policy_write_config_dims(d, pi05, path));
    frt_checkpoint_close(ck);
    free(w);
    frt_model_params p = frt_model_default_params();
    p.backend = backend;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(path, &p, &m));
    return m;
}

/* Runs one episode of the fake robot until it stops; returns its chunks and
 * copies its actions (na floats a chunk) into acts and its values into
 * values (may be NULL), room for max chunks. */
static int rt_episode(frt_rollout *r, frt_fake_robot *f, int na, float *acts, float *values, int max)
{
    int n = 0;
    float *a = xmalloc((size_t)na * sizeof(float));
    for (;;) {
        frt_policy_inputs obs;
        CHECK_OK(frt_fake_robot_observe(f, n, &obs));
        frt_rollout_tick_out o;
        CHECK_OK(frt_rollout_tick(r, &obs, a, (size_t)na, &o));
        if (o.ran) {
            CHECK(n < max);
            if (n >= max) break;
            memcpy(acts + (size_t)n * na, a, (size_t)na * sizeof(float));
            if (values) values[n] = o.value;
            n++;
        }
        if (o.stop != FRT_STOP_NONE) break;
    }
    free(a);
    return n;
}

/* A host over m (and c) with the prompt bound, and a fake robot. */
static void rt_open_host(frt_model *m, frt_critic *c, const frt_rollout_params *p, const int32_t *prompt, int n_prompt,
                         uint64_t robot_seed, int cameras, frt_rollout **r, frt_fake_robot **f)
{
    CHECK_OK(frt_rollout_create(m, c, p, r));
    CHECK_OK(frt_rollout_set_prompt(*r, prompt, n_prompt));
    CHECK_OK(frt_fake_robot_create(m, robot_seed, cameras, f));
}

/* Policy + critic as one plan (two streams) against the serial replays on
 * the policy's stream: the same bits, 4 chunks of 3 cameras. */
static void rt_check_plan_vs_serial(frt_model *m, frt_critic *c, const int32_t *prompt, int n_prompt, int na)
{
    float *a[2], v[2][4];
    for (int serial = 0; serial < 2; serial++) {
        a[serial] = xmalloc(4 * (size_t)na * sizeof(float));
        frt_rollout_params p = frt_rollout_default_params();
        p.seed = 7;
        p.max_chunks = 4;
        p.serial = serial;
        frt_rollout *r = NULL;
        frt_fake_robot *f = NULL;
        rt_open_host(m, c, &p, prompt, n_prompt, 4, 3, &r, &f);
        CHECK(rt_episode(r, f, na, a[serial], v[serial], 4) == 4);
        for (int i = 0; i < 4; i++) CHECK(isfinite(v[serial][i]));
        frt_rollout_destroy(r);
        frt_fake_robot_free(f);
    }
    CHECK(!memcmp(a[0], a[1], 4 * (size_t)na * sizeof(float)) && !memcmp(v[0], v[1], sizeof v[0]));
    CHECK(v[0][0] != v[0][1]);
    free(a[0]);
    free(a[1]);
    printf("plan: policy + critic as one plan (two streams) equals the serial replays bit for bit\n");
}

/* `episodes` episodes of 3 chunks: the context's capture count never
 * changes and every episode's actions and values equal the first's byte for
 * byte (reset is a restore, never a capture). */
static void rt_check_reset(frt_model *m, frt_critic *c, const int32_t *prompt, int n_prompt, int na, int episodes)
{
    frt_rollout_params p = frt_rollout_default_params();
    p.seed = 42;
    p.max_chunks = 3;
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    rt_open_host(m, c, &p, prompt, n_prompt, 9, 2, &r, &f);
    /* the count after episode 0: a backend that captures a graph variant
     * per observation shape on its first use (cuda) captures it in episode
     * 0's first tick; from then on no episode may capture */
    const uint64_t opened = frt_context_capture_count(frt_model_context(m));
    uint64_t captures = opened;
    CHECK(captures > 0);
    const size_t bytes = 3 * (size_t)na * sizeof(float);
    float *first = xmalloc(bytes), *acts = xmalloc(bytes), v0[3], v[3];
    double worst = 0;
    for (int e = 0; e < episodes; e++) {
        CHECK(rt_episode(r, f, na, e ? acts : first, e ? v : v0, 3) == 3);
        frt_rollout_status st;
        CHECK_OK(frt_rollout_status_get(r, &st));
        CHECK(st.episode == e && st.chunks == 3 && st.stop == FRT_STOP_MAX_CHUNKS);
        if (e == 0) {
            CHECK_MSG(st.captures <= opened + 1, "episode 0: %llu captures, %llu at open",
                      (unsigned long long)st.captures, (unsigned long long)opened);
            captures = st.captures;
        }
        CHECK_MSG(st.captures == captures, "episode %d: %llu captures, %llu after episode 0", e,
                  (unsigned long long)st.captures, (unsigned long long)captures);
        if (e) CHECK_MSG(!memcmp(acts, first, bytes) && !memcmp(v, v0, sizeof v), "episode %d differs", e);
        double ms;
        CHECK_OK(frt_rollout_end(r, NULL, &ms));
        if (ms > worst) worst = ms;
    }
    CHECK(memcmp(first, first + na, (size_t)na * sizeof(float)) != 0); /* the noise stream moves between chunks */
    CHECK(frt_context_capture_count(frt_model_context(m)) == captures);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    free(first);
    free(acts);
    printf("reset: %d episodes, %llu captures at open, %llu from episode 0 on (its first tick captures the observation's "
           "graph variant where the backend has them), actions and values byte-identical; slowest reset %.3f ms\n",
           episodes, (unsigned long long)opened, (unsigned long long)captures, worst);
}

/* The params of a random tiny-dense LLM (gen-model's code, 2048 ids) in
 * the policy's context and backend, its config *cfg and checkpoint *ck
 * (close it after the model). */
static frt_model_params rt_llm_params(frt_model *policy, frt_model_config *cfg, frt_checkpoint **ck)
{
    CHECK_OK(frt_gen_model_build("tiny-dense", 5, cfg, ck));
    frt_model_params mp = frt_model_default_params();
    mp.max_seq = 256;
    mp.context = frt_model_context(policy);
    mp.backend = frt_context_backend(mp.context);
    mp.device = frt_context_device(mp.context);
    return mp;
}

/* That LLM, loaded. */
static frt_model *rt_llm_in(frt_model *policy, frt_checkpoint **ck)
{
    frt_model_config cfg;
    frt_model_params mp = rt_llm_params(policy, &cfg, ck);
    frt_model *m = NULL;
    CHECK_OK(frt_model_load_checkpoint(*ck, &cfg, NULL, &mp, &m));
    return m;
}

/* The planner -> actor hand-off on the device: the planner (llm, in m's
 * context) runs on ticks 0 and 2 (every 2, 5 tokens); after each the
 * actor's input_ids port holds its greedy ids computed apart, the rollout
 * counts one host write (the instruction) and 5 device copies a run, and
 * no tick after the first captures anything. */
static void rt_check_handoff_device(frt_model *m, frt_model *llm, int na)
{
    enum { L = 5 };
    static const int32_t ins[4] = {2, 11, 30, 7};
    frt_rollout_params p = frt_rollout_default_params();
    frt_rollout *r = NULL;
    frt_fake_robot *f = NULL;
    rt_open_host(m, NULL, &p, ins, 4, 3, 1, &r, &f);
    frt_planner_params pp = {llm, 2, L};
    CHECK_OK(frt_rollout_set_planner(r, &pp)); /* sets the token mask the greedy ids below share */
    int32_t want[L], got[16], t;
    CHECK_OK(frt_model_reset(llm));
    CHECK_OK(frt_model_prefill(llm, ins, 4));
    for (int i = 0; i < L; i++) {
        CHECK_OK(i ? frt_model_decode(llm, NULL, &t) : frt_model_sample(llm, NULL, &t));
        want[i] = t;
    }
    CHECK_OK(frt_model_reset(llm)); /* the planner must not rely on what this left */
    float *a = xmalloc((size_t)na * sizeof(float));
    uint64_t captures = 0;
    for (int tick = 0; tick < 3; tick++) {
        frt_policy_inputs obs;
        frt_rollout_tick_out o;
        int n = 0;
        CHECK_OK(frt_fake_robot_observe(f, tick, &obs));
        CHECK_OK(frt_rollout_tick(r, &obs, a, (size_t)na, &o));
        CHECK_OK(frt_rollout_prompt_get(r, got, 16, &n));
        CHECK_MSG(n == L && !memcmp(got, want, sizeof want), "tick %d: the port does not hold the planner's ids", tick);
        frt_rollout_status st;
        CHECK_OK(frt_rollout_status_get(r, &st));
        CHECK(st.handoff_host_writes == 1 && st.handoff_device_copies == (uint64_t)(tick < 2 ? L : 2 * L));
        if (tick == 0) captures = st.captures;
        CHECK_MSG(st.captures == captures, "tick %d: %llu captures, %llu after tick 0", tick,
                  (unsigned long long)st.captures, (unsigned long long)captures);
    }
    CHECK_OK(frt_model_set_token_mask(llm, NULL, 0));
    free(a);
    frt_rollout_destroy(r);
    frt_fake_robot_free(f);
    printf("hand-off on the device: the port holds the planner's greedy ids after ticks 0 and 2, 1 host write "
           "(the instruction), %d device copies, %llu captures unchanged\n", 2 * L, (unsigned long long)captures);
}

#endif
