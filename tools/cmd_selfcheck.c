/*
 * cmd_selfcheck.c - frt selfcheck: a quick check of the execution contract
 * (include/frt/exec.h) on the cpu backend, and on cuda when a device exists:
 * buffers and copies across spaces, capture / replay, a two-stream plan, and
 * the error paths (missing variant, impossible allocation). Prints one line per
 * check and "selfcheck: ok"; exit code 0 when every check passed, 1 otherwise.
 */
#include "args.h"
#include "cli.h"

#include "frt/debug.h"
#include "frt/exec.h"
#include "frt/status.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SC_N 65536 /* floats per test buffer */

/* x = a * x + b: the cuda kernel on cuda device memory, else a host task. */
static int sc_enqueue_axpb(frt_context *ctx, frt_stream *s, frt_buffer *buf, float a, float b)
{
    (void)ctx;
    return frt_debug_axpb(s, buf, frt_buffer_size(buf) / sizeof(float), a, b);
}

typedef struct sc_graph_ctx {
    frt_context *ctx;
    frt_graph *g;
} sc_graph_ctx;

static int sc_record(frt_stream *s, void *user)
{
    sc_graph_ctx *c = user;
    frt_buffer *x = frt_graph_port(c->g, "x");
    int rc = sc_enqueue_axpb(c->ctx, s, x, 2.0f, 1.0f);
    return rc ? rc : sc_enqueue_axpb(c->ctx, s, x, 0.5f, -0.25f);
}

static int sc_record_copy(frt_stream *s, void *user)
{
    frt_graph *g = user;
    frt_buffer *x = frt_graph_port(g, "x"), *y = frt_graph_port(g, "y");
    return frt_buffer_copy(y, 0, x, 0, frt_buffer_size(x), s);
}

static int sc_report(const char *backend, const char *check, int rc, const char *detail)
{
    if (rc == 0) {
        printf("  %-5s %-22s ok%s%s\n", backend, check, detail ? "  " : "", detail ? detail : "");
        return 0;
    }
    printf("  %-5s %-22s FAILED: %s (%s)\n", backend, check, frt_last_error(), frt_status_name(rc));
    return 1;
}

#define SC_TRY(expr)                                                                               \
    do {                                                                                           \
        rc = (expr);                                                                               \
        if (rc) goto done;                                                                         \
    } while (0)
#define SC_EXPECT(cond, status, ...)                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            rc = sc_fail(status, __VA_ARGS__);                                              \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

/* A check's own failure (not a library error): the message is kept here. */
static char sc_msg[256];
static int sc_fail(int status, const char *msg)
{
    snprintf(sc_msg, sizeof sc_msg, "%s", msg);
    return status;
}

static int sc_buffers(frt_context *ctx, float *h, float *r)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *d = NULL, *p = NULL, *hb = NULL;
    int rc;
    const size_t bytes = SC_N * sizeof(float);
    for (size_t i = 0; i < SC_N; i++) h[i] = 0.5f + (float)((i * 2654435761u) % 1000) / 1000.0f;
    SC_TRY(frt_buffer_alloc(ctx, "selfcheck.device", FRT_SPACE_DEVICE, bytes, &d));
    SC_TRY(frt_buffer_alloc(ctx, "selfcheck.pinned", FRT_SPACE_PINNED_HOST, bytes, &p));
    SC_TRY(frt_buffer_alloc(ctx, "selfcheck.host", FRT_SPACE_HOST, bytes, &hb));
    SC_TRY(frt_buffer_write(d, 0, h, bytes, s));
    SC_TRY(frt_buffer_copy(p, 0, d, 0, bytes, s));
    SC_TRY(frt_buffer_copy(hb, 0, p, 0, bytes, s));
    SC_TRY(frt_buffer_fill(d, 0, bytes, 0, s));
    SC_TRY(frt_buffer_copy(d, 0, hb, 0, bytes, s));
    SC_TRY(frt_buffer_read(d, 0, r, bytes, s));
    SC_TRY(frt_stream_sync(s));
    SC_EXPECT(!memcmp(h, r, bytes), FRT_ERR_MISMATCH, "round trip device -> pinned -> host -> device changed bytes");
done:
    frt_buffer_free(d);
    frt_buffer_free(p);
    frt_buffer_free(hb);
    return rc;
}

static int sc_graph(frt_context *ctx, float *h, float *r)
{
    frt_stream *s = frt_context_stream(ctx);
    frt_buffer *x = NULL;
    frt_graph *g = NULL;
    int rc;
    const size_t bytes = SC_N * sizeof(float);
    float *want = malloc(bytes);
    if (!want) return sc_fail(FRT_ERR_OUT_OF_MEMORY, "out of memory");
    SC_TRY(frt_buffer_alloc(ctx, "selfcheck.x", FRT_SPACE_DEVICE, bytes, &x));
    SC_TRY(frt_graph_create(ctx, "selfcheck", 4, &g));
    SC_TRY(frt_graph_bind(g, "x", x));
    sc_graph_ctx c = {ctx, g};
    /* direct */
    SC_TRY(frt_buffer_write(x, 0, h, bytes, s));
    SC_TRY(sc_record(s, &c));
    SC_TRY(frt_buffer_read(x, 0, want, bytes, s));
    SC_TRY(frt_stream_sync(s));
    /* captured: nothing runs until the replay, which gives the same bytes */
    SC_TRY(frt_buffer_write(x, 0, h, bytes, s));
    SC_TRY(frt_graph_capture(g, 1, s, sc_record, &c));
    SC_TRY(frt_buffer_read(x, 0, r, bytes, s));
    SC_TRY(frt_stream_sync(s));
    SC_EXPECT(!memcmp(r, h, bytes), FRT_ERR_MISMATCH, "the capture ran work");
    SC_TRY(frt_graph_replay(g, 1, s));
    SC_TRY(frt_buffer_read(x, 0, r, bytes, s));
    SC_TRY(frt_stream_sync(s));
    SC_EXPECT(!memcmp(r, want, bytes), FRT_ERR_MISMATCH, "replay differs from direct execution");
done:
    frt_graph_destroy(g);
    frt_buffer_free(x);
    free(want);
    return rc;
}

static int sc_plan(frt_context *ctx, float *h, float *r)
{
    frt_stream *a = NULL, *b = NULL;
    frt_buffer *x = NULL, *y = NULL;
    frt_graph *g1 = NULL, *g2 = NULL;
    frt_plan *p = NULL;
    sc_graph_ctx c1;
    int rc, n0 = 0;
    const size_t bytes = SC_N * sizeof(float);
    SC_TRY(frt_stream_create(ctx, 0, &a));
    SC_TRY(frt_stream_create(ctx, 0, &b));
    SC_TRY(frt_buffer_alloc(ctx, "selfcheck.x", FRT_SPACE_DEVICE, bytes, &x));
    SC_TRY(frt_buffer_alloc(ctx, "selfcheck.y", FRT_SPACE_DEVICE, bytes, &y));
    SC_TRY(frt_graph_create(ctx, "producer", 0, &g1));
    SC_TRY(frt_graph_create(ctx, "consumer", 0, &g2));
    SC_TRY(frt_graph_bind(g1, "x", x));
    SC_TRY(frt_graph_bind(g2, "x", x));
    SC_TRY(frt_graph_bind(g2, "y", y));
    c1 = (sc_graph_ctx){ctx, g1};
    SC_TRY(frt_graph_capture(g1, 0, a, sc_record, &c1));
    SC_TRY(frt_graph_capture(g2, 0, b, sc_record_copy, g2));
    SC_TRY(frt_plan_create(ctx, &p));
    SC_TRY(frt_plan_add(p, g1, 0, a, NULL, 0, &n0));
    SC_TRY(frt_plan_add(p, g2, 0, b, &n0, 1, NULL));
    for (int it = 0; it < 5; it++) {
        SC_TRY(frt_buffer_write(x, 0, h, bytes, a));
        SC_TRY(frt_stream_sync(a));
        SC_TRY(frt_plan_execute(p));
        SC_TRY(frt_plan_sync(p));
        SC_TRY(frt_buffer_read(y, 0, r, bytes, b));
        SC_TRY(frt_stream_sync(b));
        for (size_t i = 0; i < SC_N; i++) {
            float want = 0.5f * (2.0f * h[i] + 1.0f) - 0.25f;
            SC_EXPECT(r[i] == want, FRT_ERR_MISMATCH, "plan result differs from the expected value");
        }
    }
done:
    frt_plan_destroy(p);
    frt_graph_destroy(g1);
    frt_graph_destroy(g2);
    frt_buffer_free(x);
    frt_buffer_free(y);
    frt_stream_destroy(a);
    frt_stream_destroy(b);
    return rc;
}

static int sc_errors(frt_context *ctx)
{
    frt_graph *g = NULL;
    frt_buffer *big = NULL;
    int rc = frt_graph_create(ctx, "empty", 0, &g);
    if (rc) return rc;
    int r1 = frt_graph_replay(g, 42, frt_context_stream(ctx));
    int r2 = frt_buffer_alloc(ctx, "selfcheck.too_big", FRT_SPACE_DEVICE, (size_t)1 << 62, &big);
    frt_graph_destroy(g);
    frt_buffer_free(big);
    if (r1 != FRT_ERR_NO_VARIANT) return sc_fail(FRT_ERR_MISMATCH, "a missing variant did not fail with FRT_ERR_NO_VARIANT");
    if (r2 != FRT_ERR_OUT_OF_MEMORY) return sc_fail(FRT_ERR_MISMATCH, "an impossible allocation did not fail with FRT_ERR_OUT_OF_MEMORY");
    return 0;
}

static int sc_run(frt_backend backend, float *h, float *r)
{
    const char *bn = frt_backend_name(backend);
    frt_context *ctx = NULL;
    int rc = frt_context_create(backend, 0, &ctx);
    if (rc) return sc_report(bn, "context", rc, NULL);
    frt_device_info info;
    char detail[320];
    rc = frt_context_device_info(ctx, &info);
    snprintf(detail, sizeof detail, "%s, %.1f GiB", rc ? "?" : info.name,
             (double)info.total_bytes / (1024.0 * 1024.0 * 1024.0));
    int failed = sc_report(bn, "context", rc, detail);
    static const char *names[] = {"buffers + copies", "capture / replay", "plan (2 streams)",
                                  "error paths"};
    for (int i = 0; i < 4; i++) {
        sc_msg[0] = '\0';
        int crc = i == 0 ? sc_buffers(ctx, h, r)
                  : i == 1 ? sc_graph(ctx, h, r)
                  : i == 2 ? sc_plan(ctx, h, r)
                           : sc_errors(ctx);
        if (crc && sc_msg[0]) {
            printf("  %-5s %-22s FAILED: %s\n", bn, names[i], sc_msg);
            failed++;
        } else {
            failed += sc_report(bn, names[i], crc, NULL);
        }
    }
    frt_context_destroy(ctx);
    return failed;
}

int frt_cmd_selfcheck(int argc, char **argv)
{
    frt_cmd_spec spec = {"selfcheck", "",
                         "Checks the execution contract (buffers, copies, capture/replay, plans, errors)\n"
                         "on the cpu backend, and on cuda when a device exists. Exits 1 if a check fails.\n",
                         NULL, 0, 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    float *h = malloc(SC_N * sizeof(float)), *r = malloc(SC_N * sizeof(float));
    if (!h || !r) {
        free(h);
        free(r);
        fprintf(stderr, "frt selfcheck: out of memory\n");
        return 1;
    }
    printf("frt selfcheck: the execution contract\n");
    int failed = sc_run(FRT_BACKEND_CPU, h, r);
    int n = 0;
    frt_device_count(FRT_BACKEND_CUDA, &n);
    if (n > 0)
        failed += sc_run(FRT_BACKEND_CUDA, h, r);
    else
        printf("  %-5s %-22s skipped (%s)\n", "cuda", "all",
               frt_exec_has_cuda() ? "no CUDA device" : "built without CUDA");
    free(h);
    free(r);
    if (failed) {
        printf("selfcheck: FAILED (%d check%s)\n", failed, failed == 1 ? "" : "s");
        return 1;
    }
    printf("selfcheck: ok\n");
    return 0;
}
