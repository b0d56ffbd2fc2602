/*
 * test_policy_openpi.c - the openpi PyTorch checkpoint layout of Pi0 and
 * Pi0.5 (openpi examples/convert_jax_model_to_pytorch.py; pi0.h):
 *   - a small random Pi0 and Pi0.5 written by frt gen-model's code in the
 *     transformers layout, converted here into openpi's (its tensor names,
 *     the prefix embedding stored as PaliGemma's tied lm_head, the expert's
 *     lm_head added, openpi's config.json plus frt's own frt_shapes for the
 *     small widths), load with the model_type told by the tensors and give
 *     the same action chunk bit for bit as the transformers-layout load, at
 *     both precisions (bf16 tensors; every tensor f32);
 *   - an embed_tokens beside the lm_head is the one read;
 *   - the real variants parse to PaliGemma's and Gemma 300M's shapes, and
 *     the prompt capacity follows the tensors (48 Pi0, 200 Pi0.5);
 *   - refused with a clear error: unknown variants, missing fields, wrong
 *     types, unknown fields, an unknown precision, stacks of different
 *     depths, a missing or unknown tensor, both or neither of Pi0's and
 *     Pi0.5's heads, a tensor of another dtype than the precision;
 *   - frt inspect names the layout and openpi's assets.
 * Runs on both backends (FRT_TEST_BACKENDS: argv[1] "cpu" or "cuda"): the
 * parity on each (the CUDA backend reads the same tensors through the same
 * loader), the rest on cpu only.
 * The converter's names are written out here from openpi's converter, not
 * taken from pi0.h, so the loader's table is checked against them.
 */
#include "frt_test.h"

#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "gen_model.h"
#include "model/arch/pi0/pi0.h"

#include <unistd.h>

static const frt_gen_policy_dims D = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 42, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 16, .vocab = 61,
    .e_width = 16, .e_inter = 24, .chunk = 7, .action_dim = 8, .state_dim = 8, .steps = 10,
};

/* frt_shapes for D (SiglipVisionConfig / GemmaConfig field names). */
static const char SHAPES[] =
    "\"frt_shapes\": {\"vision_config\": {\"hidden_size\": 24, \"intermediate_size\": 40, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 3, \"image_size\": 42, \"patch_size\": 14},"
    " \"text_config\": {\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 16, \"vocab_size\": 61},"
    " \"expert_config\": {\"hidden_size\": 16, \"intermediate_size\": 24, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 16}}";

static frt_backend g_backend = FRT_BACKEND_CPU;

enum { CAMS = 3, IMG = 42, ADIM = 8, PX = CAMS * 3 * IMG * IMG, TOK = 9, NA = 7 * ADIM };

static int write_hf(const char *dir, int pi05, uint64_t seed)
{
    frt_weight_spec *w = NULL;
    int n = 0;
    frt_checkpoint *ck = NULL;
    int rc = frt_gen_policy_specs_dims(&D, pi05, &w, &n);
    if (rc == 0) rc = frt_gen_model_build_specs(w, n, seed, &ck);
    if (rc == 0) rc = frt_mkdir_p(dir);
    if (rc == 0) rc = frt_checkpoint_write(ck, dir, 0, FRT_CKPT_WRITE_NO_FSYNC);
    if (rc == 0) rc = frt_gen_policy_write_config_dims(&D, pi05, dir);
    frt_checkpoint_close(ck);
    free(w);
    return rc;
}

/* transformers 5.x prefix -> openpi's (the first match wins). */
static const char *const RENAME[][2] = {
    {"paligemma_with_expert.paligemma.model.language_model.model.embed_tokens.weight",
     "paligemma_with_expert.paligemma.lm_head.weight"},
    {"paligemma_with_expert.paligemma.model.vision_tower.",
     "paligemma_with_expert.paligemma.model.vision_tower.vision_model."},
    {"paligemma_with_expert.paligemma.model.language_model.model.",
     "paligemma_with_expert.paligemma.model.language_model."},
};

typedef struct conv {
    int f32;           /* every tensor as F32 (precision float32) */
    int keep_embed;    /* the embedding as embed_tokens, a random lm_head beside it */
    const char *drop;  /* an openpi name left out */
    const char *extra; /* an extra tensor [3] f32 */
    const char *config; /* config.json text; NULL: the standard one */
} conv;

static void openpi_name(const char *hf, int keep_embed, char *out, size_t cap)
{
    for (size_t i = keep_embed ? 1 : 0; i < sizeof RENAME / sizeof *RENAME; i++) {
        size_t n = strlen(RENAME[i][0]);
        if (!strncmp(hf, RENAME[i][0], n)) {
            snprintf(out, cap, "%s%s", RENAME[i][1], hf + n);
            return;
        }
    }
    snprintf(out, cap, "%s", hf);
}

/* A random f32 tensor [d0, d1] added to ck. */
static void add_random(frt_checkpoint *ck, const char *name, int64_t d0, int64_t d1)
{
    const int64_t shape[2] = {d0, d1};
    float *x = malloc((size_t)(d0 * d1) * sizeof *x);
    frt_test_fill(x, (size_t)(d0 * d1), -0.05f, 0.05f);
    CHECK_OK(frt_checkpoint_add(ck, name, FRT_DT_F32, d1 ? 2 : 1, shape, x));
}

static void copy_tensor(frt_checkpoint *out, const frt_tensor *t, const char *name, int f32)
{
    void *data = malloc(f32 ? (size_t)frt_tensor_numel(t) * 4 : t->nbytes);
    if (f32) CHECK_OK(frt_tensor_to_f32(t, data));
    else memcpy(data, t->data, t->nbytes);
    CHECK_OK(frt_checkpoint_add(out, name, f32 ? FRT_DT_F32 : t->dtype, t->ndim, t->shape, data));
}

static void write_config(const char *dir, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK_OK(frt_file_write_atomic(path, text, strlen(text)));
}

/* hf_dir's checkpoint in openpi's layout into dir. */
static void to_openpi(const char *hf_dir, const char *dir, const conv *o)
{
    frt_checkpoint *in = NULL, *out = NULL;
    char name[300], cfg[2048];
    CHECK_OK(frt_checkpoint_open(hf_dir, &in));
    CHECK_OK(frt_checkpoint_create(&out));
    if (!in || !out) return;
    for (int i = 0; i < frt_checkpoint_count(in); i++) {
        const frt_tensor *t = frt_checkpoint_at(in, i);
        openpi_name(t->name, o->keep_embed, name, sizeof name);
        if (!o->drop || strcmp(o->drop, name)) copy_tensor(out, t, name, o->f32);
    }
    /* save_model writes the expert's lm_head (its embedding is None). */
    add_random(out, "paligemma_with_expert.gemma_expert.lm_head.weight", D.vocab, D.e_width);
    if (o->keep_embed) add_random(out, "paligemma_with_expert.paligemma.lm_head.weight", D.vocab, D.t_width);
    if (o->extra) add_random(out, o->extra, 3, 0);
    CHECK_OK(frt_mkdir_p(dir));
    CHECK_OK(frt_checkpoint_write(out, dir, 0, FRT_CKPT_WRITE_NO_FSYNC));
    snprintf(cfg, sizeof cfg,
             "{\"action_dim\": 8, \"action_horizon\": 7, \"paligemma_variant\": \"gemma_2b\", "
             "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"%s\", %s}",
             o->f32 ? "float32" : "bfloat16", SHAPES);
    write_config(dir, o->config ? o->config : cfg);
    frt_checkpoint_close(in);
    frt_checkpoint_close(out);
}

typedef struct obs {
    float px[PX], state[ADIM], noise[NA];
    uint8_t cam[CAMS], am[TOK];
    int32_t ids[TOK];
} obs;

static void random_obs(obs *o)
{
    frt_test_fill(o->px, PX, -1, 1);
    frt_test_fill(o->state, ADIM, -1, 1);
    frt_test_fill(o->noise, NA, -2, 2);
    o->cam[0] = 1, o->cam[1] = 0, o->cam[2] = 1;
    for (int i = 0; i < TOK; i++) {
        o->ids[i] = 1 + (int32_t)(frt_test_u64() % 60);
        o->am[i] = i < TOK - 2;
    }
}

/* The action chunk of dir's policy on o; its policy info into *pi. */
static int actions(const char *dir, const obs *o, int pi05, float *out, frt_policy_info *pi)
{
    frt_model_params p = frt_model_default_params();
    p.backend = g_backend;
    frt_model *m = NULL;
    int rc = frt_model_load(dir, &p, &m);
    if (rc < 0) return rc;
    frt_policy_inputs in = {o->px, CAMS, 3, IMG, IMG, o->cam, o->ids, o->am, TOK,
                            pi05 ? NULL : o->state, pi05 ? 0 : ADIM, o->noise, NULL, NULL, 0};
    rc = frt_policy_info_get(m, pi);
    if (rc == 0) rc = frt_policy_run(m, &in, out, NA);
    frt_model_free(m);
    return rc;
}

/* The openpi load equals the transformers load bit for bit. */
static void test_parity(const char *root, int pi05, int f32, int keep_embed)
{
    char hf[600], op[600];
    snprintf(hf, sizeof hf, "%s/hf_%d", root, pi05);
    snprintf(op, sizeof op, "%s/openpi_%d_%d_%d", root, pi05, f32, keep_embed);
    CHECK_OK(write_hf(hf, pi05, 11 + (uint64_t)pi05));
    conv o = {.f32 = f32, .keep_embed = keep_embed};
    to_openpi(hf, op, &o);
    static obs ob;
    random_obs(&ob);
    float a[NA], b[NA];
    frt_policy_info ia, ib;
    CHECK_OK(actions(hf, &ob, pi05, a, &ia));
    CHECK_OK(actions(op, &ob, pi05, b, &ib));
    CHECK_MSG(!strcmp(ib.model_type, pi05 ? "pi05" : "pi0"), "model_type %s", ib.model_type);
    CHECK(ib.chunk == 7 && ib.action_dim == ADIM && ib.max_state_dim == ADIM && ib.state_in_prompt == pi05);
    CHECK(ib.max_tokens == ia.max_tokens && ib.max_tokens == (pi05 ? 200 : 48) && ib.vocab_size == 61);
    int finite = 1;
    for (int i = 0; i < NA; i++) finite &= isfinite(a[i]) && a[i] != 0.0f;
    CHECK(finite);
    CHECK_MSG(!memcmp(a, b, sizeof a), "pi05 %d f32 %d embed %d: openpi layout differs (%g vs %g)", pi05, f32,
              keep_embed, (double)a[0], (double)b[0]);
}

/* Parses text; returns the status, the config in *c. */
static int parse(const char *text, pi0_config *c, char *mt)
{
    return pi0_config_parse_json(text, strlen(text), "t.json", 0, mt, 32, c);
}

static void expect(const char *text, int status, const char *needle)
{
    pi0_config c;
    char mt[32];
    CHECK_STATUS(parse(text, &c, mt), status);
    CHECK_MSG(strstr(frt_last_error(), needle) != NULL, "'%s' not in '%s'", needle, frt_last_error());
    CHECK(c.layout == PI0_LAYOUT_OPENPI);
}

/* A checkpoint of one tensor `name` of dtype dt. */
static frt_checkpoint *one_tensor(const char *name, frt_dtype dt)
{
    frt_checkpoint *ck = NULL;
    const int64_t shape[1] = {2};
    CHECK_OK(frt_checkpoint_create(&ck));
    CHECK_OK(frt_checkpoint_add(ck, name, dt, 1, shape, calloc(2, 4)));
    return ck;
}

#define REAL(pv, ev, prec)                                                                                  \
    "{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"" pv "\", \"action_expert_variant\": " \
    "\"" ev "\", \"precision\": \"" prec "\"}"

static void test_real_variants(void)
{
    pi0_config c;
    char mt[32];
    CHECK_OK(parse(REAL("gemma_2b_lora", "gemma_300m", "bfloat16"), &c, mt));
    CHECK(c.layout == PI0_LAYOUT_OPENPI && c.pi05 == -1 && mt[0] == 0 && c.max_prefix == 0);
    CHECK(c.v_width == 1152 && c.v_inter == 4304 && c.v_layers == 27 && c.v_heads == 16 && c.n_patch == 256);
    CHECK(c.t.width == 2048 && c.t.inter == 16384 && c.t.layers == 18 && c.t.heads == 8 && c.t.kv_heads == 1);
    CHECK(c.t.head_dim == 256 && c.e.width == 1024 && c.e.inter == 4096 && c.e.layers == 18 && c.vocab == 257152);
    CHECK(c.chunk == 50 && c.action_dim == 32 && c.state_dim == 32 && c.n_steps == 10);
    CHECK(!strcmp(c.t_variant, "gemma_2b_lora") && !strcmp(c.e_variant, "gemma_300m"));
    pi0_config c2 = c;
    frt_checkpoint *ck = one_tensor("time_mlp_in.weight", FRT_DT_BF16);
    CHECK_OK(pi0_config_from_checkpoint(&c, ck, mt, sizeof mt, "t.json"));
    CHECK(c.pi05 == 1 && !strcmp(mt, "pi05") && c.max_tokens == 200 && c.max_prefix == 3 * 256 + 200);
    frt_checkpoint_close(ck);
    ck = one_tensor("state_proj.weight", FRT_DT_F32);
    CHECK_OK(pi0_config_from_checkpoint(&c2, ck, mt, sizeof mt, "t.json"));
    CHECK(c2.pi05 == 0 && !strcmp(mt, "pi0") && c2.max_tokens == 48 && c2.max_prefix == 3 * 256 + 48);
    frt_checkpoint_close(ck);
    CHECK_OK(parse(REAL("dummy", "dummy", "float32"), &c, mt));
    CHECK(c.t.width == 64 && c.t.layers == 4 && c.t.head_dim == 16 && c.e.width == 64);
    /* The precision against the tensors' dtypes. */
    ck = one_tensor("state_proj.weight", FRT_DT_BF16);
    CHECK_STATUS(pi0_config_from_checkpoint(&c, ck, mt, sizeof mt, "t.json"), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "precision 'float32'") != NULL);
    frt_checkpoint_close(ck);
    CHECK_OK(parse(REAL("gemma_2b", "gemma_300m", "bfloat16"), &c, mt));
    ck = one_tensor("state_proj.weight", FRT_DT_F16);
    CHECK_STATUS(pi0_config_from_checkpoint(&c, ck, mt, sizeof mt, "t.json"), FRT_ERR_FORMAT);
    frt_checkpoint_close(ck);
    ck = one_tensor("action_in_proj.weight", FRT_DT_F32);
    CHECK_STATUS(pi0_config_from_checkpoint(&c, ck, mt, sizeof mt, "t.json"), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "neither") != NULL);
    frt_checkpoint_close(ck);
}

static void test_bad_configs(void)
{
    expect(REAL("gemma_7b", "gemma_300m", "bfloat16"), FRT_ERR_UNSUPPORTED, "paligemma_variant 'gemma_7b'");
    expect(REAL("gemma_2b", "gemma_300", "bfloat16"), FRT_ERR_UNSUPPORTED, "action_expert_variant 'gemma_300'");
    expect(REAL("gemma_2b", "gemma_300m", "float16"), FRT_ERR_UNSUPPORTED, "precision 'float16'");
    expect(REAL("gemma_2b", "dummy", "bfloat16"), FRT_ERR_UNSUPPORTED, "layers");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", \"precision\": "
           "\"bfloat16\"}",
           FRT_ERR_FORMAT, "action_expert_variant");
    expect("{\"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", \"action_expert_variant\": "
           "\"gemma_300m\", \"precision\": \"bfloat16\"}",
           FRT_ERR_FORMAT, "action_dim");
    expect("{\"action_dim\": 32, \"paligemma_variant\": \"gemma_2b\", \"action_expert_variant\": \"gemma_300m\", "
           "\"precision\": \"bfloat16\"}",
           FRT_ERR_FORMAT, "action_horizon");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"action_expert_variant\": \"gemma_300m\", "
           "\"paligemma_variant\": \"gemma_2b\"}",
           FRT_ERR_FORMAT, "precision");
    expect("{\"action_dim\": \"32\", \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\"}",
           FRT_ERR_FORMAT, "action_dim");
    expect("{\"action_dim\": 32, \"action_horizon\": 0, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\"}",
           FRT_ERR_FORMAT, "action_horizon");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": 2, "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\"}",
           FRT_ERR_FORMAT, "paligemma_variant");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": true}",
           FRT_ERR_FORMAT, "precision");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\", \"max_token_len\": 64}",
           FRT_ERR_UNSUPPORTED, "'max_token_len'");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\", \"frt_shapes\": "
           "{\"vision\": {}}}",
           FRT_ERR_UNSUPPORTED, "'vision'");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\", \"frt_shapes\": "
           "{\"expert_config\": {\"vocab_size\": 8}}}",
           FRT_ERR_UNSUPPORTED, "vocab_size");
    expect("{\"action_dim\": 32, \"action_horizon\": 50, \"paligemma_variant\": \"gemma_2b\", "
           "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"bfloat16\", \"frt_shapes\": "
           "{\"text_config\": {\"hidden_size\": \"wide\"}}}",
           FRT_ERR_FORMAT, "hidden_size");
    /* Neither layout: the transformers path asks for model_type. */
    pi0_config c;
    char mt[32];
    CHECK_STATUS(parse("{\"action_dim\": 32}", &c, mt), FRT_ERR_FORMAT);
    CHECK(strstr(frt_last_error(), "model_type") != NULL && c.layout == PI0_LAYOUT_TRANSFORMERS);
}

/* Loading dir fails with status and a message holding needle; no model. */
static void expect_load(const char *dir, int status, const char *needle)
{
    frt_model_params p = frt_model_default_params();
    frt_model *m = (frt_model *)&p;
    CHECK_STATUS(frt_model_load(dir, &p, &m), status);
    CHECK(m == NULL);
    CHECK_MSG(strstr(frt_last_error(), needle) != NULL, "'%s' not in '%s'", needle, frt_last_error());
}

/* hf_0 converted with o into ROOT/name fails to load with status, needle. */
static void bad_case(const char *root, const char *name, const conv *o, int status, const char *needle)
{
    char hf[600], dir[600];
    snprintf(hf, sizeof hf, "%s/hf_0", root);
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    to_openpi(hf, dir, o);
    expect_load(dir, status, needle);
}

/* The same with a config of variant pv and precision prec, no frt_shapes. */
static void bad_config(const char *root, const char *name, const char *pv, const char *prec, int status,
                       const char *needle)
{
    char cfg[300];
    snprintf(cfg, sizeof cfg,
             "{\"action_dim\": 8, \"action_horizon\": 7, \"paligemma_variant\": \"%s\", "
             "\"action_expert_variant\": \"gemma_300m\", \"precision\": \"%s\"}",
             pv, prec);
    bad_case(root, name, &(conv){.config = cfg}, status, needle);
}

static void test_bad_checkpoints(const char *root)
{
    static const char *const missing = "paligemma_with_expert.gemma_expert.model.layers.1.self_attn.q_proj.weight";
    bad_case(root, "missing", &(conv){.drop = missing}, FRT_ERR_NOT_FOUND, missing);
    bad_case(root, "no_embedding", &(conv){.drop = "paligemma_with_expert.paligemma.lm_head.weight"},
             FRT_ERR_NOT_FOUND, "embed_tokens.weight");
    bad_case(root, "unknown", &(conv){.extra = "paligemma_with_expert.gemma_expert.model.embed_tokens.weight"},
             FRT_ERR_FORMAT, "unknown tensor 'paligemma_with_expert.gemma_expert.model.embed_tokens");
    bad_case(root, "both_heads", &(conv){.extra = "time_mlp_in.weight"}, FRT_ERR_FORMAT, "both time_mlp_in.weight");
    bad_config(root, "precision", "gemma_2b", "float32", FRT_ERR_FORMAT, "precision 'float32'");
    bad_config(root, "variant", "gemma_3b", "bfloat16", FRT_ERR_UNSUPPORTED, "paligemma_variant 'gemma_3b'");
    /* The real widths against the small tensors: refused by name and shape. */
    bad_config(root, "real_widths", "gemma_2b", "bfloat16", FRT_ERR_FORMAT, "has shape");
}

/* frt inspect names the layout, the variants and openpi's assets. */
static void test_inspect(const char *root)
{
    char dir[600], cmd[1400], line[1024];
    snprintf(dir, sizeof dir, "%s/openpi_1_0_0", root);
    snprintf(cmd, sizeof cmd, "%s/assets/physical-intelligence/libero", dir);
    CHECK_OK(frt_mkdir_p(cmd));
    snprintf(cmd, sizeof cmd, "%s/assets/physical-intelligence/libero/norm_stats.json", dir);
    CHECK_OK(frt_file_write_atomic(cmd, "{}", 2));
    snprintf(cmd, sizeof cmd, "%s/frt inspect %s 2>&1", FRT_BINARY_DIR, dir);
    FILE *f = popen(cmd, "r");
    int layout = 0, assets = 0, arch = 0;
    while (f && fgets(line, sizeof line, f)) {
        layout |= strstr(line, "openpi PyTorch") && strstr(line, "gemma_300m") && strstr(line, "time_mlp_in");
        assets |= strstr(line, "assets/physical-intelligence/libero/norm_stats.json") != NULL;
        arch |= strstr(line, "Pi0.5 (model_type pi05)") != NULL;
    }
    CHECK(f && pclose(f) == 0);
    CHECK_MSG(layout && assets && arch, "frt inspect: layout %d, assets %d, architecture %d", layout, assets, arch);
}

int main(int argc, char **argv)
{
    if (argc > 1 && frt_backend_parse(argv[1], &g_backend) < 0) {
        fprintf(stderr, "usage: test_policy_openpi [cpu|cuda]\n");
        return 2;
    }
    int n_dev = 0;
    if (g_backend == FRT_BACKEND_CUDA && (frt_device_count(FRT_BACKEND_CUDA, &n_dev) < 0 || n_dev == 0))
        TEST_SKIP("no CUDA device");
    char root[] = "/tmp/frt_test_policy_openpi_XXXXXX";
    if (!mkdtemp(root)) TEST_SKIP("no temporary directory");
    frt_test_seed(20);
    test_parity(root, 0, 0, 0);
    test_parity(root, 1, 0, 0);
    test_parity(root, 0, 1, 0);
    test_parity(root, 1, 1, 1);
    if (g_backend == FRT_BACKEND_CPU) {
        test_real_variants();
        test_bad_configs();
        test_bad_checkpoints(root);
        test_inspect(root);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return frt_test_report();
}
