/*
 * test_cuda_rollout.c - the rollout host and its value critic on the cuda
 * backend (a small random Pi0 of gen-model's code, bf16 weights; a random
 * 3-layer critic, f32 kernels of kernels/cuda/critic_mlp.cu):
 *   - the two critic kernels against a double reference on random data
 *     (odd sizes, a masked camera): norm-wise rel <= 1e-5;
 *   - the CUDA critic's value against the cpu critic (the same file, the
 *     same vision tokens and state written into a cpu policy's ports) and
 *     against frt_critic_reference, on 4 random observations (a camera
 *     masked on half of them, shorter states): rel <= 1e-3;
 *   - policy + critic as one exec plan (the critic's graph on a second
 *     stream, waiting on the policy's node through an event) equals the
 *     serial replays bit for bit;
 *   - 100 episodes: the context's capture count is constant and every
 *     episode's actions and values equal the first's byte for byte;
 *   - the planner -> actor hand-off on the device: a random tiny-dense LLM
 *     in the policy's context; its sampled ids reach the actor's input_ids
 *     port by stream-ordered device copies (no host write), equal to its
 *     greedy ids computed apart, with the capture count constant.
 * Skipped (77) without CUDA or a device.
 */
#include "frt_test.h"

#include "frt/exec.h"
#include "frt/rollout.h"

#if FRT_HAVE_CUDA
#include "kernels/cuda/kernels_critic_cuda.h"
#include "rollout_test_util.h"

#include <unistd.h>

/* The small odd shape of test_cuda_policy (9 patches a camera, 3 cameras). */
static const frt_gen_policy_dims DIMS = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 16, .vocab = 61,
    .e_width = 16, .e_inter = 24, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
};
enum { NA = 7 * 8, SD = 8, WIDTH = 32, CAMS = 3, PATCH = 9 };
static const int32_t PROMPT[5] = {2, 17, 40, 3, 59};

/* A device buffer of the context holding n floats / bytes of src. */
static frt_buffer *dev_of(frt_context *ctx, frt_stream *s, const void *src, size_t bytes)
{
    frt_buffer *b = NULL;
    CHECK_OK(frt_buffer_alloc(ctx, "test", FRT_SPACE_DEVICE, bytes, &b));
    if (src) CHECK_OK(frt_buffer_write(b, 0, src, bytes, s));
    return b;
}

/* frt_cuda_critic_input and frt_cuda_dense_f32 against double references. */
static void test_kernels(void)
{
    enum { S = 5, C = 3, P = 7, W = 77, IN = S + W, OUT = 37 };
    frt_context *ctx = NULL;
    CHECK_OK(frt_context_create(FRT_BACKEND_CUDA, 0, &ctx));
    frt_stream *s = frt_context_stream(ctx);
    float state[S], tok[C * P * W], w[OUT * IN], b[OUT], x0[IN], y[OUT];
    const uint8_t mask[C] = {1, 0, 1};
    frt_test_fill(state, S, -1, 1);
    frt_test_fill(tok, C * P * W, -1, 1);
    frt_test_fill(w, OUT * IN, -0.2f, 0.2f);
    frt_test_fill(b, OUT, -0.1f, 0.1f);
    frt_buffer *ds = dev_of(ctx, s, state, sizeof state), *dt = dev_of(ctx, s, tok, sizeof tok);
    frt_buffer *dm = dev_of(ctx, s, mask, sizeof mask), *dx = dev_of(ctx, s, NULL, sizeof x0);
    frt_buffer *dw = dev_of(ctx, s, w, sizeof w), *db = dev_of(ctx, s, b, sizeof b);
    frt_buffer *dy = dev_of(ctx, s, NULL, sizeof y);
    void *ns = frt_stream_native(s);
    CHECK_OK(frt_cuda_critic_input(ns, frt_buffer_ptr(dx), frt_buffer_ptr(ds), S, frt_buffer_ptr(dt),
                                   frt_buffer_ptr(dm), C, P, W));
    for (int silu = 0; silu < 2; silu++) {
        CHECK_OK(frt_cuda_dense_f32(ns, frt_buffer_ptr(dy), frt_buffer_ptr(dw), frt_buffer_ptr(db), frt_buffer_ptr(dx),
                                    IN, OUT, silu));
        CHECK_OK(frt_buffer_read(dx, 0, x0, sizeof x0, s));
        CHECK_OK(frt_buffer_read(dy, 0, y, sizeof y, s));
        CHECK_OK(frt_stream_sync(s));
        double rx[IN], ry[OUT];
        for (int i = 0; i < S; i++) rx[i] = state[i];
        for (int j = 0; j < W; j++) {
            double acc = 0;
            for (int c = 0; c < C; c++)
                for (int p = 0; p < P && mask[c]; p++) acc += tok[(c * P + p) * W + j];
            rx[S + j] = acc / (2.0 * P);
        }
        for (int o = 0; o < OUT; o++) {
            double acc = b[o];
            for (int i = 0; i < IN; i++) acc += (double)w[o * IN + i] * rx[i];
            ry[o] = silu ? acc / (1.0 + exp(-acc)) : acc;
        }
        CHECK_MSG(rel_err_d(x0, rx, IN) <= 1e-5, "critic_input rel %.3e", rel_err_d(x0, rx, IN));
        CHECK_MSG(rel_err_d(y, ry, OUT) <= 1e-5, "dense_f32 (silu %d) rel %.3e", silu, rel_err_d(y, ry, OUT));
    }
    CHECK_STATUS(frt_cuda_dense_f32(ns, frt_buffer_ptr(dy), frt_buffer_ptr(dw), frt_buffer_ptr(db), frt_buffer_ptr(dy),
                                    IN, OUT, 0),
                 FRT_ERR_INVALID_ARGUMENT); /* y aliases x */
    CHECK_STATUS(
        frt_cuda_critic_input(ns, frt_buffer_ptr(dx), NULL, S, frt_buffer_ptr(dt), frt_buffer_ptr(dm), C, P, W),
        FRT_ERR_INVALID_ARGUMENT); /* no state with state_dim > 0 */
    frt_buffer *all[] = {ds, dt, dm, dx, dw, db, dy};
    for (int i = 0; i < 7; i++) frt_buffer_free(all[i]);
    frt_context_destroy(ctx);
    printf("kernels: critic_input and dense_f32 (identity, SiLU) match double references (rel <= 1e-5)\n");
}

/* The value of the cpu critic when the cpu policy's ports hold tok / mask. */
static float cpu_value(frt_model *cpu, frt_critic *cc, const float *tok, size_t tok_bytes, const uint8_t *mask,
                       const float *state, int n)
{
    frt_stream *s = frt_context_stream(frt_model_context(cpu));
    CHECK_OK(frt_buffer_write(frt_policy_port_buffer(cpu, "vision_tokens"), 0, tok, tok_bytes, s));
    CHECK_OK(frt_buffer_write(frt_policy_port_buffer(cpu, "pixel_attention_mask"), 0, mask, CAMS, s));
    CHECK_OK(frt_stream_sync(s));
    CHECK_OK(frt_critic_set_state(cc, state, n));
    float v = NAN;
    CHECK_OK(frt_critic_run(cc, &v));
    return v;
}

static void test_critic_values(frt_model *m, frt_critic *c, frt_model *cpu, frt_critic *cc)
{
    frt_fake_robot *f = NULL;
    CHECK_OK(frt_fake_robot_create(m, 3, CAMS, &f));
    static float vt[CAMS * PATCH * WIDTH];
    float actions[NA], v[4], vc[4];
    double vref[4], vcd[4];
    for (int t = 0; t < 4; t++) {
        frt_policy_inputs obs;
        CHECK_OK(frt_fake_robot_observe(f, t, &obs));
        obs.input_ids = PROMPT;
        obs.n_tokens = 5;
        uint8_t mask[CAMS] = {1, (uint8_t)(t % 2), 1}; /* the middle camera absent on even ticks */
        obs.camera_mask = mask;
        CHECK_OK(frt_policy_run(m, &obs, actions, NA));
        const int n = SD - t % 3; /* shorter states zero-padded */
        CHECK_OK(frt_critic_set_state(c, obs.state, n));
        CHECK_OK(frt_critic_run(c, &v[t]));
        CHECK_OK(frt_model_output_read(m, "vision_tokens", vt, sizeof vt));
        vc[t] = cpu_value(cpu, cc, vt, sizeof vt, mask, obs.state, n);
        vcd[t] = vc[t];
        CHECK_OK(frt_critic_reference(c, vt, CAMS, PATCH, mask, obs.state, n, &vref[t]));
    }
    const double e_cpu = rel_err_d(v, vcd, 4), e_ref = rel_err_d(v, vref, 4);
    CHECK_MSG(e_cpu <= 1e-3 && e_ref <= 1e-3, "cuda vs cpu critic rel %.3e, vs the reference %.3e", e_cpu, e_ref);
    CHECK(vc[0] != vc[1] && isfinite(v[0]));
    frt_fake_robot_free(f);
    printf("critic: cuda values vs the cpu critic rel %.2e, vs the double reference %.2e (<= 1e-3), 4 observations\n",
           e_cpu, e_ref);
}

static frt_critic *load_critic(frt_model *policy)
{
    frt_critic *c = NULL;
    CHECK_OK(frt_critic_load(policy, path_in("critic.safetensors"), &c));
    return c;
}

static void run_all(void)
{
    test_kernels();
    frt_model *m = rt_load_policy(path_in("pi0"), &DIMS, 0, FRT_BACKEND_CUDA);
    frt_model *cpu = NULL;
    CHECK_OK(frt_model_load(path_in("pi0"), NULL, &cpu));
    CHECK_OK(frt_critic_write_random(path_in("critic.safetensors"), SD, WIDTH, 64, 3, 17));
    const uint64_t n0 = frt_context_capture_count(frt_model_context(m));
    frt_critic *c = load_critic(m), *cc = load_critic(cpu);
    CHECK(frt_context_capture_count(frt_model_context(m)) == n0 + 1); /* the critic's load: one capture */
    test_critic_values(m, c, cpu, cc);
    rt_check_plan_vs_serial(m, c, PROMPT, 5, NA);
    rt_check_reset(m, c, PROMPT, 5, NA, 100);
    frt_checkpoint *llm_ck = NULL;
    frt_model *llm = rt_llm_in(m, &llm_ck);
    rt_check_handoff_device(m, llm, NA);
    frt_model_free(llm);
    frt_checkpoint_close(llm_ck);
    frt_critic_free(cc);
    frt_critic_free(c);
    frt_model_free(cpu);
    frt_model_free(m);
}
#endif

int main(void)
{
    frt_test_seed(23);
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    int n_dev = 0;
    CHECK_OK(frt_device_count(FRT_BACKEND_CUDA, &n_dev));
    if (n_dev == 0) TEST_SKIP("no CUDA device");
    if (rt_tmpdir("frt_cuda_rollout")) TEST_SKIP("cannot create a temporary directory");
    run_all();
    return frt_test_report();
#endif
}
