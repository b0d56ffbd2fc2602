/*
 * test_cuda_policy.c - the Pi0 / Pi0.5 policy on the cuda backend (bf16
 * weights, f32 accumulation; arch/pi0/pi0_cuda.c) against the cpu backend
 * (f32) on the same random weights and inputs, block by block:
 *   vision_tokens   the projected image tokens of every given camera
 *   velocity0       the first Euler step's velocity (vision + prefix + one
 *                   expert pass)
 *   actions         the chunk after every step
 * each as norm-wise rel ||cuda - cpu|| / ||cpu|| and cosine, at small odd
 * shapes (3 SigLIP heads, 9 patches a camera, an odd chunk, vocabulary and
 * prompt) for Pi0 and Pi0.5, at small shapes with a 1024-wide expert (the
 * layer tail, frt_cuda_gemma_mlp: also against the same model's separate
 * launches, FRT_PI0_FUSED_TAIL=0; with heads of 256 the tail takes the
 * attention too, also checked against FRT_PI0_FUSED_TAIL=2, the tail
 * without it), and at the real Pi0.5 shape of gen-model
 * (random weights; 2 cameras, a 20-token prompt). The bar for the
 * actions: cosine >= 0.999 and rel <= 3e-2. Then, on the cuda model alone:
 * the episode noise is the cpu backend's stream (actions from the same
 * seed within the same bar), a capsule taken at an episode start restores
 * byte-identical actions after the live state was overwritten, denoise-only
 * equals the full inference bit for bit, one graph variant per shape key
 * however many runs, denoise without a prefix is refused; serial CFG
 * (beta 1.5, a conditioned prompt of its own) against the cpu backend's
 * guided actions within the same bar, its denoise-only bit for bit, CFG
 * off again bit for bit the unguided chunk; fused batch-2 CFG against serial
 * (C4, cosine >= 0.999 for beta 1, 1.5, 2, 2.5; its two prefixes run as
 * one batch when both prompts fall in one bucket, apart in the case with
 * the prompts in two buckets), beta 1 against the
 * conditioned prompt alone (C2), slot symmetry (C3, byte-identical), its
 * denoise-only bit for bit. The SigLIP bias epilogues against the same
 * model's bias launches (FRT_PI0_VIT_EPILOGUE=0), and a SigLIP bias stored
 * in f32 keeps the launches. Prints the time of one
 * inference on each backend.
 */
#include "frt_test.h"

#include "frt/capsule.h"
#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "gen_model.h"
#include "model/model_internal.h"
#include "policy_write_util.h"

#include <time.h>
#include <unistd.h>

#if FRT_HAVE_CUDA

static const frt_gen_policy_dims SMALL = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 16, .vocab = 61,
    .e_width = 16, .e_inter = 24, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
};

/* SMALL with the expert the layer tail takes (frt_cuda_gemma_mlp: width
 * 1024, inter a multiple of 256, heads x head_dim of 128, head_dim of 16). */
static const frt_gen_policy_dims TAIL = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 64, .vocab = 61,
    .e_width = 1024, .e_inter = 512, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
};

/* TAIL with heads of 256 (one KV head): the layer tail also takes the
 * expert's attention (tail_on 3). */
static const frt_gen_policy_dims TAIL_ATT = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 256, .vocab = 61,
    .e_width = 1024, .e_inter = 512, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
};

/* One observation at the model's shapes. */
typedef struct obs {
    int cams, tok, tokc, pi05;
    float *px, *state, *noise;
    uint8_t cam[3], *am, *amc;
    int32_t *ids, *idsc; /* the prompt, and CFG's conditioned prompt (tokc slots) */
} obs;

static void obs_make(obs *o, const frt_policy_info *pi, int cams, int tok, int vocab)
{
    const size_t npx = (size_t)cams * 3 * pi->image_height * pi->image_width, na = (size_t)pi->chunk * pi->action_dim;
    o->cams = cams, o->tok = tok, o->pi05 = pi->state_in_prompt;
    o->px = malloc(npx * sizeof(float)), o->state = malloc((size_t)pi->max_state_dim * sizeof(float));
    o->noise = malloc(na * sizeof(float)), o->am = malloc((size_t)tok), o->ids = malloc((size_t)tok * 4);
    o->tokc = tok + 2 <= pi->max_tokens ? tok + 2 : tok;
    o->amc = malloc((size_t)o->tokc), o->idsc = malloc((size_t)o->tokc * 4);
    frt_test_fill(o->px, npx, -1, 1);
    frt_test_fill(o->state, (size_t)pi->max_state_dim, -1, 1);
    frt_test_fill(o->noise, na, -2, 2);
    for (int c = 0; c < cams; c++) o->cam[c] = !(cams == 3 && c == 1); /* 3 cameras: the middle one absent */
    for (int i = 0; i < tok; i++) {
        o->ids[i] = 1 + (int32_t)(frt_test_u64() % (uint64_t)(vocab - 1));
        o->am[i] = i < tok - 3; /* three right pads */
    }
    for (int i = 0; i < o->tokc; i++) {
        o->idsc[i] = 1 + (int32_t)(frt_test_u64() % (uint64_t)(vocab - 1));
        o->amc[i] = i < o->tokc - 1;
    }
}

static void obs_free(obs *o)
{
    free(o->px), free(o->state), free(o->noise), free(o->am), free(o->ids), free(o->amc), free(o->idsc);
}

static frt_policy_inputs inputs(const obs *o, const frt_policy_info *pi, int with_noise)
{
    frt_policy_inputs in;
    memset(&in, 0, sizeof in);
    in.pixel_values = o->px, in.n_cameras = o->cams, in.channels = 3;
    in.height = pi->image_height, in.width = pi->image_width, in.camera_mask = o->cam;
    in.input_ids = o->ids, in.attention_mask = o->am, in.n_tokens = o->tok;
    in.state = o->pi05 ? NULL : o->state, in.n_state = o->pi05 ? 0 : pi->max_state_dim;
    in.noise = with_noise ? o->noise : NULL;
    return in;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

/* One block's row: rel and cosine against the cpu result, and the check. */
static void block(const char *shape, const char *what, const float *cuda, const float *cpu, size_t n, double rel_tol,
                  double cos_tol)
{
    double rel = frt_test_rel_err(cuda, cpu, n), cs = cosine(cuda, cpu, n);
    int ok = rel <= rel_tol && cs >= cos_tol;
    printf("  %-28s %-14s rel %.3e (<= %.0e)  cos %.6f (>= %.4f)  %s\n", shape, what, rel, rel_tol, cs, cos_tol,
           ok ? "ok" : "FAIL");
    CHECK_MSG(ok, "%s %s: rel %.3e cos %.6f", shape, what, rel, cs);
}

/* Runs the observation, returns ms; out gets the actions, v0 velocity0, vis the vision tokens. */
static double run_blocks(frt_model *m, const obs *o, const frt_policy_info *pi, float *act, float *v0, float *vis,
                         size_t nvis)
{
    frt_policy_inputs in = inputs(o, pi, 1);
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    double t0 = now_ms();
    CHECK_OK(frt_policy_run(m, &in, act, na));
    double ms = now_ms() - t0;
    CHECK_OK(frt_model_output_read(m, "velocity0", v0, na * sizeof(float)));
    CHECK_OK(frt_model_output_read(m, "vision_tokens", vis, nvis * sizeof(float)));
    return ms;
}

static frt_model *load(const char *dir, frt_backend b, int max_tokens)
{
    frt_model_params p = frt_model_default_params();
    p.backend = b;
    p.max_seq = max_tokens;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    return m;
}

/* The cuda model's own properties: episode noise vs cpu, capsules,
 * denoise-only, one variant per key. */
static void cuda_properties(const char *shape, frt_model *g, frt_model *c, const obs *o, const frt_policy_info *pi,
                            int variants)
{
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *a = malloc(na * 4), *b = malloc(na * 4), *r = malloc(na * 4);
    frt_policy_inputs in = inputs(o, pi, 0);
    CHECK_OK(frt_policy_episode_start(g, 77));
    CHECK_OK(frt_policy_episode_start(c, 77));
    frt_capsule *cap = NULL;
    CHECK_OK(frt_capsule_snapshot(g, FRT_TIER_HOST, NULL, NULL, 0, &cap));
    CHECK_OK(frt_policy_run(g, &in, a, na));
    CHECK_OK(frt_policy_run(c, &in, r, na));
    block(shape, "episode noise", a, r, na, 3e-2, 0.999);
    frt_policy_inputs in2 = in;
    in2.noise = o->noise;
    CHECK_OK(frt_policy_run(g, &in2, b, na)); /* another inference: the live state moves on */
    CHECK_OK(frt_policy_run(g, &in, b, na));
    if (cap) CHECK_OK(frt_capsule_restore(g, cap));
    CHECK_OK(frt_policy_run(g, &in, b, na));
    CHECK_MSG(memcmp(a, b, na * 4) == 0, "%s: the capsule restore does not give the same actions", shape);
    printf("  %-28s capsule restore at the episode start: actions %s\n", shape,
           memcmp(a, b, na * 4) == 0 ? "byte-identical" : "DIFFER");
    CHECK_OK(frt_policy_run(g, &in2, a, na));
    CHECK_OK(frt_policy_denoise(g, in2.state, in2.n_state, in2.noise, b, na));
    CHECK_MSG(memcmp(a, b, na * 4) == 0, "%s: denoise-only differs from the full inference", shape);
    CHECK(frt_graph_count(g->g_policy) == variants && frt_graph_count(g->g_denoise) == 1);
    printf("  %-28s graph variants: policy %d after the first run, %d after 9 runs (one per shape key); denoise "
           "%d\n", shape, variants, frt_graph_count(g->g_policy), frt_graph_count(g->g_denoise));
    frt_capsule_free(cap);
    free(a), free(b), free(r);
}

/* Serial classifier-free guidance against the cpu backend's; off again is
 * the unguided graph, bit for bit. */
static void cuda_cfg(const char *shape, frt_model *g, frt_model *c, const obs *o, const frt_policy_info *pi)
{
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *a = malloc(na * 4), *b = malloc(na * 4), *r = malloc(na * 4), *u = malloc(na * 4);
    frt_policy_inputs in = inputs(o, pi, 1);
    CHECK_OK(frt_policy_run(g, &in, u, na)); /* unguided */
    CHECK_OK(frt_policy_set_cfg_mode(g, FRT_POLICY_CFG_SERIAL));
    CHECK_OK(frt_policy_set_cfg(g, 1, 1.5f, 1));
    CHECK_OK(frt_policy_set_cfg(c, 1, 1.5f, 1));
    CHECK_STATUS(frt_policy_denoise(g, in.state, in.n_state, in.noise, b, na), FRT_ERR_STATE); /* no cond prefix */
    in.input_ids_cond = o->idsc, in.attention_mask_cond = o->amc, in.n_tokens_cond = o->tokc;
    CHECK_OK(frt_policy_run(g, &in, a, na));
    CHECK_OK(frt_policy_run(c, &in, r, na));
    block(shape, "CFG actions", a, r, na, 3e-2, 0.999);
    CHECK_MSG(memcmp(a, u, na * 4) != 0, "%s: guidance changed nothing", shape);
    CHECK_OK(frt_policy_denoise(g, in.state, in.n_state, in.noise, b, na));
    CHECK_MSG(memcmp(a, b, na * 4) == 0, "%s: CFG denoise-only differs from the guided inference", shape);
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    CHECK_OK(frt_policy_set_cfg(c, 0, 1.0f, 1));
    frt_policy_inputs plain = inputs(o, pi, 1);
    CHECK_OK(frt_policy_run(g, &plain, b, na));
    CHECK_MSG(memcmp(u, b, na * 4) == 0, "%s: the unguided chunk changed after CFG", shape);
    printf("  %-28s CFG off after on: unguided actions %s\n", shape,
           memcmp(u, b, na * 4) ? "DIFFER" : "byte-identical");
    free(a), free(b), free(r), free(u);
}

/* One guided run of g on in (mode, beta) into a. */
static void run_cfg(frt_model *g, const frt_policy_inputs *in, frt_policy_cfg_mode mode, float beta, float *a,
                    size_t na)
{
    CHECK_OK(frt_policy_set_cfg_mode(g, mode));
    CHECK_OK(frt_policy_set_cfg(g, 1, beta, 1));
    CHECK_OK(frt_policy_run(g, in, a, na));
}

static void cos_row(const char *shape, const char *what, const float *a, const float *b, size_t n)
{
    const double cs = cosine(a, b, n);
    printf("  %-28s %-26s cos %.6f (>= 0.999)  %s\n", shape, what, cs, cs >= 0.999 ? "ok" : "FAIL");
    CHECK_MSG(cs >= 0.999, "%s %s: cos %.6f", shape, what, cs);
}

/* Fused batch-2 CFG (issue 21's contract on cuda): C4 fused against serial
 * for beta 1, 1.5, 2, 2.5; C2 beta 1 against the conditioned prompt alone;
 * C3 the same prompt in both slots with the same noise gives byte-identical
 * slots (velocity_slots); its denoise-only bit for bit. Leaves CFG off. */
static void cuda_cfg_fused(const char *shape, frt_model *g, const obs *o, const frt_policy_info *pi)
{
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *a = malloc(na * 4), *b = malloc(na * 4), *vs = malloc(2 * na * 4);
    frt_policy_inputs in = inputs(o, pi, 1);
    in.input_ids_cond = o->idsc, in.attention_mask_cond = o->amc, in.n_tokens_cond = o->tokc;
    const float betas[4] = {1.0f, 1.5f, 2.0f, 2.5f};
    for (int i = 0; i < 4; i++) {
        char what[64];
        run_cfg(g, &in, FRT_POLICY_CFG_SERIAL, betas[i], a, na);
        run_cfg(g, &in, FRT_POLICY_CFG_FUSED, betas[i], b, na);
        snprintf(what, sizeof what, "C4 fused vs serial b=%.1f", betas[i]);
        cos_row(shape, what, b, a, na);
    }
    CHECK_OK(frt_policy_denoise(g, in.state, in.n_state, in.noise, a, na)); /* beta 2.5, fused */
    CHECK_MSG(memcmp(a, b, na * 4) == 0, "%s: fused CFG denoise-only differs from the guided inference", shape);
    run_cfg(g, &in, FRT_POLICY_CFG_FUSED, 1.0f, a, na);
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    frt_policy_inputs cond = inputs(o, pi, 1);
    cond.input_ids = o->idsc, cond.attention_mask = o->amc, cond.n_tokens = o->tokc;
    CHECK_OK(frt_policy_run(g, &cond, b, na));
    cos_row(shape, "C2 fused b=1 vs cond-only", a, b, na);
    frt_policy_inputs same = inputs(o, pi, 1);
    same.input_ids_cond = o->ids, same.attention_mask_cond = o->am, same.n_tokens_cond = o->tok;
    run_cfg(g, &same, FRT_POLICY_CFG_FUSED, 2.0f, a, na);
    int nodes = 0;
    CHECK_OK(frt_policy_graph_nodes(g, &same, &nodes));
    printf("  %-28s graph nodes of the fused CFG inference: %d\n", shape, nodes);
    CHECK_OK(frt_model_output_read(g, "velocity_slots", vs, 2 * na * sizeof(float)));
    const int sym = memcmp(vs, vs + na, na * 4) == 0;
    CHECK_MSG(sym, "%s: C3 the two slots differ on the same prompt and noise", shape);
    printf("  %-28s C3 slot symmetry: velocity slots %s\n", shape, sym ? "byte-identical" : "DIFFER");
    CHECK_OK(frt_policy_set_cfg(g, 0, 1.0f, 1));
    free(a), free(b), free(vs);
}

/* No prefix yet: refused, the episode untouched. */
static void cuda_no_prefix(frt_model *g, const obs *o, const frt_policy_info *pi)
{
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *a = malloc(na * 4);
    uint64_t seed, step;
    CHECK_OK(frt_policy_episode_start(g, 5));
    CHECK_STATUS(frt_policy_denoise(g, o->pi05 ? NULL : o->state, o->pi05 ? 0 : pi->max_state_dim, NULL, a, na),
                 FRT_ERR_STATE);
    CHECK_OK(frt_policy_episode_get(g, &seed, &step));
    CHECK(seed == 5 && step == 0);
    free(a);
}

static void tail_vs_separate(const char *shape, const char *dir, frt_model *g, const obs *o, const frt_policy_info *pi,
                             int max_tokens, int nodes, size_t nvis, const char *level);

static void fp8_vs_cpu(const char *shape, const char *dir, frt_model *g, const float *ca, const float *cv,
                       const obs *o, const frt_policy_info *pi, int max_tokens, size_t nvis, int cpu_too);
static void epilogue_vs_launches(const char *shape, const char *dir, frt_model *g, const obs *o,
                                 const frt_policy_info *pi, int max_tokens, int nodes, size_t nvis, size_t ngiven,
                                 int v_layers);
static void compare(const char *shape, const frt_gen_policy_dims *d, int pi05, int cams, int tok, int max_tokens)
{
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-cuda-policy-%d-%s", (int)getpid(), shape);
    double t0 = now_ms();
    CHECK_OK(write_policy_dims(dir, d, pi05, 11));
    printf("  %s: weights written in %.0f ms\n", shape, now_ms() - t0);
    frt_model *c = load(dir, FRT_BACKEND_CPU, max_tokens), *g = load(dir, FRT_BACKEND_CUDA, max_tokens);
    if (!c || !g) {
        frt_model_free(c), frt_model_free(g);
        return;
    }
    frt_policy_info pi;
    CHECK_OK(frt_policy_info_get(g, &pi));
    obs o;
    obs_make(&o, &pi, cams, tok, d->vocab);
    cuda_no_prefix(g, &o, &pi);
    const size_t na = (size_t)pi.chunk * pi.action_dim;
    const int np = (d->image_size / d->patch) * (d->image_size / d->patch);
    const size_t nvis = (size_t)pi.max_cameras * np * d->t_width, ngiven = (size_t)cams * np * d->t_width;
    float *ca = malloc(na * 4), *cv = malloc(na * 4), *cvis = calloc(nvis, 4);
    float *ga = malloc(na * 4), *gv = malloc(na * 4), *gvis = calloc(nvis, 4);
    double ms_c = run_blocks(c, &o, &pi, ca, cv, cvis, nvis), ms_g = 0;
    CHECK(frt_graph_count(g->g_policy) == 1); /* the full-shape variant of the load */
    for (int i = 0; i < 3; i++) ms_g = run_blocks(g, &o, &pi, ga, gv, gvis, nvis); /* the last of 3 (warm) */
    const int variants = frt_graph_count(g->g_policy);
    CHECK(variants == 2); /* + this observation's (cameras, prompt bucket) */
    block(shape, "vision_tokens", gvis, cvis, ngiven, 3e-2, 0.999);
    block(shape, "velocity0", gv, cv, na, 3e-2, 0.999);
    block(shape, "actions", ga, ca, na, 3e-2, 0.999);
    printf("  %-28s one inference: cpu %.1f ms, cuda %.3f ms (host clock, with the input upload)\n", shape, ms_c,
           ms_g);
    frt_policy_inputs gin = inputs(&o, &pi, 1);
    int nodes = 0;
    CHECK_OK(frt_policy_graph_nodes(g, &gin, &nodes));
    CHECK(nodes > 0);
    gin.n_cameras = o.cams == 1 ? 2 : 1; /* another variant, not captured yet */
    CHECK_STATUS(frt_policy_graph_nodes(g, &gin, &nodes), FRT_ERR_NO_VARIANT);
    printf("  %-28s graph nodes of this observation's inference: %d\n", shape, nodes);
    if (d->layers < 18) epilogue_vs_launches(shape, dir, g, &o, &pi, max_tokens, nodes, nvis, ngiven, d->v_layers);
    if (d->e_width == 1024 && d->layers < 18) tail_vs_separate(shape, dir, g, &o, &pi, max_tokens, nodes, nvis, "0");
    if (d->e_width == 1024 && d->layers < 18 && d->head_dim == 256) /* the attention in the tail: fewer launches */
        tail_vs_separate(shape, dir, g, &o, &pi, max_tokens, nodes, nvis, "2");
    cuda_properties(shape, g, c, &o, &pi, variants);
    cuda_cfg(shape, g, c, &o, &pi);
    cuda_cfg_fused(shape, g, &o, &pi);
    if (d->t_width % 16 == 0 && d->t_inter % 16 == 0) /* the cpu emulation too at the small shapes */
        fp8_vs_cpu(shape, dir, g, ca, cv, &o, &pi, max_tokens, nvis, d->layers < 18);
    obs_free(&o);
    free(ca), free(cv), free(cvis), free(ga), free(gv), free(gvis);
    frt_model_free(c);
    frt_model_free(g);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* The SigLIP biases are bf16 values (gen-model writes bf16), so q | k | v
 * and fc1 add them (fc1 its GELU too) in the GEMMs' epilogue: the same
 * model loaded with FRT_PI0_VIT_EPILOGUE=0 (the products into f32, then
 * the bias launches) has two graph nodes more a SigLIP layer, and the same
 * vision tokens and actions within the backend's bar (GELU's tanh may
 * differ in the last bit). */
static void epilogue_vs_launches(const char *shape, const char *dir, frt_model *g, const obs *o,
                                 const frt_policy_info *pi, int max_tokens, int nodes, size_t nvis, size_t ngiven,
                                 int v_layers)
{
    setenv("FRT_PI0_VIT_EPILOGUE", "0", 1);
    frt_model *s = load(dir, FRT_BACKEND_CUDA, max_tokens);
    unsetenv("FRT_PI0_VIT_EPILOGUE");
    if (!s) return;
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *ga = malloc(na * 4), *gv = malloc(na * 4), *sa = malloc(na * 4), *sv = malloc(na * 4);
    float *gvis = calloc(nvis, 4), *svis = calloc(nvis, 4);
    run_blocks(g, o, pi, ga, gv, gvis, nvis);
    run_blocks(s, o, pi, sa, sv, svis, nvis);
    frt_policy_inputs in = inputs(o, pi, 1);
    int nodes_s = 0;
    CHECK_OK(frt_policy_graph_nodes(s, &in, &nodes_s));
    printf("  %-28s SigLIP bias epilogues: %d graph nodes against %d with FRT_PI0_VIT_EPILOGUE=0\n", shape, nodes,
           nodes_s);
    CHECK_MSG(nodes_s - nodes == 2 * v_layers, "%s: %d nodes with the epilogues, %d without (%d SigLIP layers)", shape,
              nodes, nodes_s, v_layers);
    block(shape, "vis epi vs launches", gvis, svis, ngiven, 1e-2, 0.9999);
    block(shape, "act epi vs launches", ga, sa, na, 3e-2, 0.999);
    free(ga), free(gv), free(sa), free(sv), free(gvis), free(svis);
    frt_model_free(s);
}

/* An expert the layer tail takes: the same model loaded with
 * FRT_PI0_FUSED_TAIL=0 (the separate launches) has more graph nodes (so the
 * tail was taken) and the same actions within the backend's bar (the
 * products' summation order differs). */
static void tail_vs_separate(const char *shape, const char *dir, frt_model *g, const obs *o, const frt_policy_info *pi,
                             int max_tokens, int nodes, size_t nvis, const char *level)
{
    setenv("FRT_PI0_FUSED_TAIL", level, 1);
    frt_model *s = load(dir, FRT_BACKEND_CUDA, max_tokens);
    unsetenv("FRT_PI0_FUSED_TAIL");
    if (!s) return;
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *ga = malloc(na * 4), *gv = malloc(na * 4), *sa = malloc(na * 4), *sv = malloc(na * 4);
    float *vis = calloc(nvis, 4);
    run_blocks(g, o, pi, ga, gv, vis, nvis);
    run_blocks(s, o, pi, sa, sv, vis, nvis);
    frt_policy_inputs in = inputs(o, pi, 1);
    int nodes_s = 0;
    CHECK_OK(frt_policy_graph_nodes(s, &in, &nodes_s));
    printf("  %-28s layer tail taken: %d graph nodes against %d with FRT_PI0_FUSED_TAIL=%s\n", shape, nodes, nodes_s,
           level);
    CHECK_MSG(nodes < nodes_s, "%s: the layer tail was not taken (%d nodes, %d at level %s)", shape, nodes, nodes_s,
              level);
    char what[64];
    snprintf(what, sizeof what, "tail vs FRT_PI0_FUSED_TAIL=%s", level);
    block(shape, what, ga, sa, na, 3e-2, 0.999);
    free(ga), free(gv), free(sa), free(sv), free(vis);
    frt_model_free(s);
}

/* params.weight_dtype FRT_WEIGHT_FP8 (the prefix's MLP in E4M3, quantized
 * at load, its inputs per row): the first step's velocity and the actions
 * against the cpu backend's f32 within FP8's bar (docs/policies.md "FP8
 * weights"), another fingerprint
 * than the bf16 model's (a capsule of one is refused by the other, the
 * live state kept), a capsule restore byte-identical, the same bits on a
 * second run; the cpu backend's emulation within the actions' bar of its
 * f32 chunk. */
static void fp8_vs_cpu(const char *shape, const char *dir, frt_model *g, const float *ca, const float *cv,
                       const obs *o, const frt_policy_info *pi, int max_tokens, size_t nvis, int cpu_too)
{
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA, p.max_seq = max_tokens, p.weight_dtype = FRT_WEIGHT_FP8;
    frt_model *f = NULL;
    CHECK_OK(frt_model_load(dir, &p, &f));
    if (!f) return;
    const size_t na = (size_t)pi->chunk * pi->action_dim;
    float *a = malloc(na * 4), *v = malloc(na * 4), *b = malloc(na * 4), *vis = calloc(nvis, 4);
    run_blocks(f, o, pi, a, v, vis, nvis);
    /* FP8's bar (docs/policies.md "FP8 weights"): twice the worst measured, the first step's velocity
     * rel 4.6e-2 (cos 0.99896) and the actions 1.3e-2 (cos 0.99991) at the real shape */
    block(shape, "fp8 velocity0", v, cv, na, 0.1, 0.995);
    block(shape, "fp8 actions", a, ca, na, 3e-2, 0.999);
    run_blocks(f, o, pi, b, v, vis, nvis);
    CHECK_MSG(memcmp(a, b, na * 4) == 0, "%s: fp8 actions differ on a second run", shape);
    const uint64_t fg = frt_model_fingerprint(g), ff = frt_model_fingerprint(f);
    printf("  %-28s fp8 fingerprint %016llx, bf16 %016llx%s\n", shape, (unsigned long long)ff,
           (unsigned long long)fg, ff != fg ? "" : "  SAME (FAIL)");
    CHECK(ff != fg);
    frt_policy_inputs in = inputs(o, pi, 0);
    const int same = policy_precision_capsules(f, g, &in, 31, a, b, na);
    CHECK_MSG(same, "%s: fp8 capsule restore does not give the same actions", shape);
    printf("  %-28s fp8: capsule restore byte-identical %s, a bf16 capsule refused\n", shape, same ? "yes" : "NO");
    frt_model_free(f);
    p.backend = FRT_BACKEND_CPU; /* the cpu backend emulates it (test_policy_gen.c holds its checks) */
    f = NULL;
    if (cpu_too) CHECK_OK(frt_model_load(dir, &p, &f));
    if (f) {
        run_blocks(f, o, pi, b, v, vis, nvis);
        block(shape, "fp8 cpu (emulated) actions", b, ca, na, 3e-2, 0.999);
    }
    frt_model_free(f);
    free(a), free(v), free(b), free(vis);
}

/* FP8 weights on cuda need the prefix's width and MLP size multiples of
 * 16 (cuBLASLt's FP8 rows): an MLP of 40 is refused at load with
 * FRT_ERR_UNSUPPORTED and no model; the same policy loads in bf16. */
static void fp8_refused_odd(void)
{
    frt_gen_policy_dims d = SMALL;
    d.t_inter = 40;
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-cuda-policy-%d-fp8odd", (int)getpid());
    CHECK_OK(write_policy_dims(dir, &d, 1, 3));
    frt_model_params p = frt_model_default_params();
    p.backend = FRT_BACKEND_CUDA, p.weight_dtype = FRT_WEIGHT_FP8;
    frt_model *f = NULL;
    CHECK_STATUS(frt_model_load(dir, &p, &f), FRT_ERR_UNSUPPORTED);
    CHECK(f == NULL);
    frt_model_free(f);
    p.weight_dtype = FRT_WEIGHT_DEFAULT;
    CHECK_OK(frt_model_load(dir, &p, &f));
    frt_model_free(f);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* A policy whose first SigLIP layer's fc1 bias is stored in f32 (random
 * values a bf16 does not hold): the tower keeps the bias launches (the
 * epilogue would round that bias), so the model has the graph nodes and
 * the action bytes of the same weights under FRT_PI0_VIT_EPILOGUE=0. */
static void f32_bias_keeps_launches(void)
{
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/frt-test-cuda-policy-%d-f32bias", (int)getpid());
    int changed = 0;
    CHECK_OK(write_policy_dims_f32(dir, &SMALL, 1, 5, "encoder.layers.0.mlp.fc1.bias", &changed));
    CHECK(changed == 1);
    frt_model *g = load(dir, FRT_BACKEND_CUDA, 13);
    setenv("FRT_PI0_VIT_EPILOGUE", "0", 1);
    frt_model *s = load(dir, FRT_BACKEND_CUDA, 13);
    unsetenv("FRT_PI0_VIT_EPILOGUE");
    if (g && s) {
        frt_policy_info pi;
        CHECK_OK(frt_policy_info_get(g, &pi));
        obs o;
        obs_make(&o, &pi, 2, 11, SMALL.vocab);
        const size_t na = (size_t)pi.chunk * pi.action_dim;
        float *ga = malloc(na * 4), *sa = malloc(na * 4);
        frt_policy_inputs in = inputs(&o, &pi, 1);
        CHECK_OK(frt_policy_run(g, &in, ga, na));
        CHECK_OK(frt_policy_run(s, &in, sa, na));
        int ng = 0, ns = 0;
        CHECK_OK(frt_policy_graph_nodes(g, &in, &ng));
        CHECK_OK(frt_policy_graph_nodes(s, &in, &ns));
        const int same = memcmp(ga, sa, na * 4) == 0;
        printf("  %-28s %d graph nodes against %d with FRT_PI0_VIT_EPILOGUE=0, actions the same bytes: %s\n",
               "f32 SigLIP bias", ng, ns, same ? "yes" : "no (FAIL)");
        CHECK(ng == ns && same);
        free(ga), free(sa);
        obs_free(&o);
    }
    frt_model_free(g);
    frt_model_free(s);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* The real Pi0.5 shape of gen-model (tools/gen_policy.c). */
static void compare_real(void)
{
    frt_gen_policy_dims real = {
        .v_width = 1152, .v_inter = 4304, .v_layers = 27, .v_heads = 16, .image_size = 224, .patch = 14,
        .t_width = 2048, .t_inter = 16384, .layers = 18, .heads = 8, .kv_heads = 1, .head_dim = 256,
        .vocab = 257152, .e_width = 1024, .e_inter = 4096, .chunk = 50, .action_dim = 32, .state_dim = 32,
        .steps = 10,
    };
    compare("pi05 real shape", &real, 1, 2, 20, 0);
}
#endif /* FRT_HAVE_CUDA */

int main(void)
{
    frt_test_seed(41);
#if !FRT_HAVE_CUDA
    TEST_SKIP("built without CUDA");
#else
    int n_dev = 0;
    CHECK_OK(frt_device_count(FRT_BACKEND_CUDA, &n_dev));
    if (n_dev == 0) TEST_SKIP("no CUDA device");
    compare("pi0 small odd (3 cams)", &SMALL, 0, 3, 11, 13);
    compare("pi05 small odd (3 cams)", &SMALL, 1, 3, 11, 13);
    compare("pi05 small, CFG prompts in two buckets", &SMALL, 1, 2, 15, 40); /* 16 and 32: fused CFG's prefixes apart */
    compare("pi0 small odd (1 cam)", &SMALL, 0, 1, 5, 13);
    compare("pi0 small, expert 1024", &TAIL, 0, 2, 11, 13);   /* the layer tail, Gemma's norms */
    compare("pi05 small, expert 1024", &TAIL, 1, 2, 11, 13);  /* the layer tail, adaRMSNorm */
    compare("pi0 small, heads of 256", &TAIL_ATT, 0, 2, 11, 13);  /* the layer tail with the attention */
    compare("pi05 small, heads of 256", &TAIL_ATT, 1, 3, 11, 13);
    fp8_refused_odd();
    f32_bias_keeps_launches();
    if (!getenv("FRT_TEST_POLICY_SMALL_ONLY")) compare_real();
    return frt_test_report();
#endif
}
