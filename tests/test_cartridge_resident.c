/*
 * test_cartridge_resident.c - resident KV prefixes (frt/cartridge.h
 * frt_cartridge_upload, frt_kv_resident_move, frt_model_inject_kv_resident)
 * on the "tiny-dense" random-weight model (tools/gen_model.h, built in
 * memory), C = 64, on both backends (FRT_TEST_BACKENDS: argv[1] is "cpu" or
 * "cuda"; on cuda the KV dtype is bf16 and device memory is the GPU's):
 *
 *  1. a cartridge exported from a prefill of a 50-token document, injected
 *     from the host (frt_cartridge_inject), from a device-resident upload,
 *     again from the same upload (it is read, not moved), from a
 *     pinned-host-resident upload, and after demoting / promoting it: every
 *     time the 24 greedy tokens of the cold path (prefill the document,
 *     then the prompt);
 *  2. its byte count is frt_cartridge_upload_bytes (2 x layers x T x KV heads
 *     x head_dim in the backend's KV dtype) and its space what was asked;
 *  3. refusals leave everything as it was: another model's resident
 *     (inject and move), a NULL resident, the plain host space.
 */
#include "frt/cartridge.h"
#include "frt/checkpoint.h"
#include "frt/debug.h"
#include "frt/exec.h"
#include "frt_test.h"
#include "gen_model.h"

#include <string.h>

enum { T = 50, P = 9, G = 24 };

static frt_backend g_backend = FRT_BACKEND_CPU;

static frt_model *build(uint64_t seed, frt_checkpoint **ck, frt_model_config *cfg)
{
    frt_model *m = NULL;
    CHECK_OK(frt_gen_model_build("tiny-dense", seed, cfg, ck));
    frt_model_params p = frt_model_default_params();
    p.backend = g_backend;
    p.prefill_chunk = 64;
    p.max_seq = 128;
    p.n_threads = 2;
    CHECK_OK(frt_model_load_checkpoint(*ck, cfg, NULL, &p, &m));
    return m;
}

/* The prompt after whatever the live state holds, then G greedy tokens. */
static void continue_with(frt_model *m, const int32_t *prompt, int32_t *out)
{
    CHECK_OK(frt_model_prefill(m, prompt, P));
    CHECK_OK(frt_model_sample(m, NULL, &out[0]));
    for (int i = 1; i < G; i++) CHECK_OK(frt_model_decode(m, NULL, &out[i]));
}

static void same(const int32_t *want, frt_model *m, const frt_kv_resident *r, const int32_t *prompt, const char *what)
{
    int32_t got[G];
    CHECK_OK(frt_model_inject_kv_resident(m, r));
    CHECK(frt_model_position(m) == T);
    continue_with(m, prompt, got);
    CHECK_MSG(!memcmp(want, got, sizeof got), "%s: the greedy tokens differ from the cold path", what);
}

static void test_paths(frt_model *m, const frt_cartridge *c, const int32_t *prompt, const int32_t *cold)
{
    int32_t got[G];
    CHECK_OK(frt_cartridge_inject(m, c));
    continue_with(m, prompt, got);
    CHECK_MSG(!memcmp(cold, got, sizeof got), "host injection: the greedy tokens differ from the cold path");
    frt_kv_resident *dev = NULL, *host = NULL;
    CHECK_OK(frt_cartridge_upload(m, c, FRT_SPACE_DEVICE, &dev));
    CHECK_OK(frt_cartridge_upload(m, c, FRT_SPACE_PINNED_HOST, &host));
    if (!dev || !host) goto out;
    CHECK(frt_kv_resident_space(dev) == FRT_SPACE_DEVICE && frt_kv_resident_space(host) == FRT_SPACE_PINNED_HOST);
    CHECK(frt_kv_resident_bytes(dev) == frt_cartridge_upload_bytes(m, c) && frt_kv_resident_tokens(dev) == T);
    same(cold, m, dev, prompt, "device-resident");
    same(cold, m, dev, prompt, "device-resident, again");
    same(cold, m, host, prompt, "pinned-host-resident");
    /* from pinned host memory the rows land beside the next append (the
     * pipelined restore, docs/model.md); the prefix moved to the device
     * while its copies may still run: the append still sees it */
    frt_model_info info;
    CHECK_OK(frt_model_info_get(m, &info));
    CHECK(info.restore_pipelined == 1);
    CHECK_OK(frt_model_inject_kv_resident(m, host));
    CHECK(frt_stream_deferred(frt_context_stream(frt_model_context(m))) == 1);
    CHECK_OK(frt_kv_resident_move(m, host, FRT_SPACE_DEVICE));
    continue_with(m, prompt, got);
    CHECK_MSG(!memcmp(cold, got, sizeof got), "pinned-host-resident moved during its injection: tokens differ");
    CHECK_OK(frt_kv_resident_move(m, host, FRT_SPACE_DEVICE));
    CHECK(frt_kv_resident_space(host) == FRT_SPACE_DEVICE);
    same(cold, m, host, prompt, "promoted");
    CHECK_OK(frt_kv_resident_move(m, dev, FRT_SPACE_PINNED_HOST));
    CHECK_OK(frt_kv_resident_move(m, dev, FRT_SPACE_DEVICE));
    CHECK_OK(frt_kv_resident_move(m, dev, FRT_SPACE_DEVICE)); /* already there */
    same(cold, m, dev, prompt, "demoted and promoted");
    CHECK_STATUS(frt_kv_resident_move(m, dev, FRT_SPACE_HOST), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_kv_resident_space(dev) == FRT_SPACE_DEVICE);
out:
    frt_kv_resident_free(dev);
    frt_kv_resident_free(host);
}

static void test_refusals(frt_model *m, const frt_cartridge *c)
{
    frt_model_config cfg2;
    frt_checkpoint *ck2 = NULL;
    frt_model *m2 = build(1, &ck2, &cfg2);
    frt_kv_resident *r = NULL, *x = NULL;
    CHECK_OK(frt_cartridge_upload(m, c, FRT_SPACE_DEVICE, &r));
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = 7 + i;
    if (m2 && r) {
        CHECK_OK(frt_model_prefill(m2, ids, 20));
        CHECK_STATUS(frt_model_inject_kv_resident(m2, r), FRT_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(frt_kv_resident_move(m2, r, FRT_SPACE_PINNED_HOST), FRT_ERR_INVALID_ARGUMENT);
        CHECK(frt_model_position(m2) == 20 && frt_kv_resident_space(r) == FRT_SPACE_DEVICE);
    }
    CHECK_STATUS(frt_model_inject_kv_resident(m, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_cartridge_upload(m, c, FRT_SPACE_HOST, &x), FRT_ERR_INVALID_ARGUMENT);
    CHECK(x == NULL && frt_kv_resident_bytes(NULL) == 0 && frt_kv_resident_tokens(NULL) == 0);
    frt_kv_resident_free(NULL);
    frt_kv_resident_free(r);
    frt_model_free(m2);
    frt_checkpoint_close(ck2);
}

int main(int argc, char **argv)
{
    if (argc > 1 && frt_backend_parse(argv[1], &g_backend) < 0) {
        fprintf(stderr, "usage: test_cartridge_resident [cpu|cuda]\n");
        return 2;
    }
    if (g_backend == FRT_BACKEND_CUDA) {
        int n = 0;
        frt_device_count(FRT_BACKEND_CUDA, &n);
        if (n == 0) TEST_SKIP("no CUDA device");
    }
    frt_test_seed(2526);
    frt_model_config cfg;
    frt_checkpoint *ck = NULL;
    frt_model *m = build(1, &ck, &cfg);
    if (!m) return frt_test_report();
    int32_t doc[T], prompt[P], cold[G];
    for (int i = 0; i < T; i++) doc[i] = (int32_t)(frt_test_u64() % (uint64_t)cfg.vocab_size);
    for (int i = 0; i < P; i++) prompt[i] = (int32_t)(frt_test_u64() % (uint64_t)cfg.vocab_size);
    frt_cartridge *c = NULL;
    CHECK_OK(frt_model_prefill(m, doc, T));
    CHECK_OK(frt_cartridge_from_model(m, &c));
    continue_with(m, prompt, cold);
    int distinct = 0;
    for (int i = 0; i < G; i++) distinct += i == 0 || cold[i] != cold[i - 1];
    CHECK(distinct > 4); /* the comparisons are not between two constant streams */
    if (c) {
        test_paths(m, c, prompt, cold);
        test_refusals(m, c);
    }
    frt_cartridge_free(c);
    frt_model_free(m);
    frt_checkpoint_close(ck);
    return frt_test_report();
}
