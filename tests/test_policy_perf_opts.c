/*
 * test_policy_perf_opts.c - the load options and queries of the policy's
 * speed work, on the cpu backend (the cuda side is in test_cuda_policy.c):
 *   params.gemm_autotune / gemm_tune_file: out of range or a file without
 *     N refused (FRT_ERR_INVALID_ARGUMENT), a backend without GEMM
 *     autotune refuses N > 0 (FRT_ERR_UNSUPPORTED; the cpu backend, and a
 *     token model's), nothing loaded;
 *   the token model's fields a policy has no use for: prefill_chunk and
 *     branch_slots > 1 refused (FRT_ERR_INVALID_ARGUMENT, naming the
 *     field), debug_hidden, prefill_group > 1 and an FP8 KV cache refused
 *     by the cpu backend (FRT_ERR_UNSUPPORTED), nothing loaded; max_seq is
 *     the prompt capacity (frt_policy_info.max_tokens; over 4096 refused);
 *   frt_policy_graph_nodes: NULL arguments refused, the cpu backend does
 *     not count (FRT_ERR_UNSUPPORTED), a token model is not a policy, and
 *     *nodes stays untouched on every error.
 */
#include "frt_test.h"

#include "policy_gen_util.h"

static void autotune_refused(const char *dir, int n, const char *file, int status)
{
    frt_model_params p = frt_model_default_params();
    p.gemm_autotune = n;
    p.gemm_tune_file = file;
    frt_model *m = (frt_model *)1;
    CHECK_STATUS(frt_model_load(dir, &p, &m), status);
    CHECK(m == NULL);
    printf("  gemm_autotune %d, file %s: %s\n", n, file ? file : "NULL", frt_last_error());
}

/* A load of dir with *p refused with status, the message naming `field`. */
static void param_refused(const char *dir, const frt_model_params *p, int status, const char *field)
{
    frt_model *m = (frt_model *)1;
    CHECK_STATUS(frt_model_load(dir, p, &m), status);
    CHECK(m == NULL && strstr(frt_last_error(), field) != NULL);
    printf("  %s: %s\n", field, frt_last_error());
}

static void token_params(const char *dir)
{
    /* each case: one field away from the defaults, the status, what the message names */
    static const struct {
        int status;
        const char *names;
    } refused[] = {
        {FRT_ERR_INVALID_ARGUMENT, "prefill_chunk"}, {FRT_ERR_INVALID_ARGUMENT, "branch_slots"},
        {FRT_ERR_UNSUPPORTED, "debug_hidden"},       {FRT_ERR_UNSUPPORTED, "prefill_group"},
        {FRT_ERR_UNSUPPORTED, "fp8 KV cache"},       {FRT_ERR_UNSUPPORTED, "prompt tokens"},
    };
    frt_model_params p;
    for (int i = 0; i < (int)(sizeof refused / sizeof refused[0]); i++) {
        p = frt_model_default_params();
        switch (i) {
        case 0: p.prefill_chunk = 64; break;
        case 1: p.branch_slots = 2; break;
        case 2: p.debug_hidden = 1; break;
        case 3: p.prefill_group = 2; break;
        case 4: p.kv_dtype = FRT_KV_FP8; break;
        default: p.max_seq = 4097; break;
        }
        param_refused(dir, &p, refused[i].status, refused[i].names);
    }
    /* what a policy does take: one branch slot, prefill_group 1 (off), max_seq as the prompt capacity */
    p = frt_model_default_params();
    p.branch_slots = 1;
    p.prefill_group = 1;
    p.max_seq = 33;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, &p, &m));
    frt_policy_info pi;
    if (m) {
        CHECK_OK(frt_policy_info_get(m, &pi));
        CHECK(pi.max_tokens == 33);
    }
    frt_model_free(m);
}

static void graph_nodes_cpu(const char *dir, int pi05)
{
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(dir, NULL, &m));
    if (!m) return;
    static obs o;
    random_obs(&o);
    frt_policy_inputs in = inputs(&o, pi05);
    float act[NA];
    CHECK_OK(frt_policy_run(m, &in, act, NA));
    int nodes = -7;
    CHECK_STATUS(frt_policy_graph_nodes(m, &in, &nodes), FRT_ERR_UNSUPPORTED);
    CHECK_STATUS(frt_policy_graph_nodes(m, NULL, &nodes), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_graph_nodes(m, &in, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_policy_graph_nodes(NULL, &in, &nodes), FRT_ERR_INVALID_ARGUMENT);
    CHECK(nodes == -7);
    frt_model_free(m);
}

int main(void)
{
    char root[] = "/tmp/frt_test_policy_perf_opts_XXXXXX";
    if (!mkdtemp(root)) TEST_SKIP("no temporary directory");
    frt_test_seed(2020);
    char dir[600], tiny[600];
    snprintf(dir, sizeof dir, "%s/pi05", root);
    snprintf(tiny, sizeof tiny, "%s/tiny", root);
    CHECK_OK(write_policy(dir, 1, 3));
    CHECK_OK(frt_gen_model_write("tiny", 3, tiny));
    autotune_refused(dir, -1, NULL, FRT_ERR_INVALID_ARGUMENT);
    autotune_refused(dir, 65, NULL, FRT_ERR_INVALID_ARGUMENT);
    autotune_refused(dir, 0, "/tmp/never-read.txt", FRT_ERR_INVALID_ARGUMENT);
    autotune_refused(dir, 8, NULL, FRT_ERR_UNSUPPORTED);           /* the cpu backend */
    autotune_refused(tiny, 8, "/tmp/never.txt", FRT_ERR_UNSUPPORTED); /* a token model */
    token_params(dir);
    graph_nodes_cpu(dir, 1);
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(tiny, NULL, &m));
    static obs o;
    random_obs(&o);
    frt_policy_inputs in = inputs(&o, 1);
    int nodes = -7;
    if (m) CHECK_STATUS(frt_policy_graph_nodes(m, &in, &nodes), FRT_ERR_UNSUPPORTED);
    CHECK(nodes == -7);
    frt_model_free(m);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
    return frt_test_report();
}
