/*
 * frt_test_cuda.h - the device-side harness the tests/test_cuda_*.c programs
 * share, on top of frt_test.h (include both, this one after frt/exec.h,
 * kernels/cuda/kernels_cuda.h and util/bf16.h, inside #if FRT_HAVE_CUDA):
 *
 *   g_ctx, g_st, g_cs           the context, its stream, the native cudaStream_t
 *   must(rc, what)              setup call that must succeed, else exit(1)
 *   dbuf / dalloc / dfree       a device buffer and its host-visible pointer
 *   dput / dget                 synchronous upload / download of bytes
 *   dsentinel / untouched       fill with 0x7F bytes / check they are still there
 *   dput_as / dget_as           floats to / from a buffer of dtype f32 or bf16
 *   hmat_rand / hmat_free       a random bf16 matrix: its bits and exact f32
 *   report(name, err, tol)      one "rel err / tolerance" table row and its check
 *   frt_test_cuda_start()       after the device-free checks: skip (77) without a
 *                               device, else g_ctx / g_st / g_cs and the device line
 *   graph_us(name, rec, user, reps)  us per repetition of a captured record function
 *   wcopies / wcopies_at / wcopies_us  timing over weight copies the L2 cannot hold
 *   plan_of(g, n, in, out, dt, acc, &info)  the index of a GEMM plan, or -1
 *
 * Options, #defined before the #include:
 *   FRT_TEST_CUDA_COL n            width of the name column (default 62)
 *   FRT_TEST_CUDA_START_N          g_dyn: int32 device scalars d_start, d_n
 *   FRT_TEST_CUDA_COUNT            g_dn: one int32 device scalar d_n
 *   FRT_TEST_CUDA_AS_AT0           dput_as / dget_as without an element offset
 *   FRT_TEST_CUDA_OWN_FRAND        the file defines its own frand
 *   FRT_TEST_CUDA_OWN_UNTOUCHED    the file defines its own untouched
 *   FRT_TEST_CUDA_OWN_REPORT_SAME  the file defines its own report_same
 *   TOL_BF16 x                     tolerance of a bf16 result (default 1e-2)
 */
#ifndef FRT_TEST_CUDA_H
#define FRT_TEST_CUDA_H

#include "frt_test.h"

#if FRT_HAVE_CUDA

#include "frt/exec.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cpu/rng.h"
#include "util/bf16.h"

#ifndef FRT_TEST_CUDA_COL
#define FRT_TEST_CUDA_COL 62
#endif

/* Norm-wise tolerance of a bf16 result: bf16 keeps 8 significant bits. */
#ifndef TOL_BF16
#define TOL_BF16 1e-2
#endif

/* Inside a record callback: return a failed launch's status. */
#define FRT_TEST_TRY_(expr)                                                    \
    do {                                                                       \
        int frt_try_rc_ = (expr);                                              \
        if (frt_try_rc_ < 0) return frt_try_rc_;                               \
    } while (0)

static frt_context *g_ctx;
static frt_stream *g_st;
static void *g_cs; /* the native cudaStream_t */

/* Ends the program when a setup call fails (not a test failure). */
static inline void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "setup failed: %s: %s (%s)\n", what, frt_status_name(rc), frt_last_error());
        exit(1);
    }
}

/* The device part of a test's main begins here: without a CUDA device it
 * ends the program, failed (1) when the device-free checks before it failed,
 * else skipped (77); with one it creates g_ctx, g_st, g_cs, prints the
 * device and returns its SM count. */
static inline int frt_test_cuda_start(void)
{
    int n_dev = 0;
    CHECK_OK(frt_device_count(FRT_BACKEND_CUDA, &n_dev));
    if (n_dev == 0) {
        if (frt_test_failed_) exit(frt_test_report());
        printf("  %d argument checks passed (no device needed)\n", frt_test_passed_);
        TEST_SKIP("no CUDA device");
    }
    must(frt_context_create(FRT_BACKEND_CUDA, 0, &g_ctx), "context");
    g_st = frt_context_stream(g_ctx);
    g_cs = frt_stream_native(g_st);
    frt_device_info info;
    if (frt_context_device_info(g_ctx, &info) != 0) return 0;
    printf("  device: %s (sm_%d%d, %d SMs)\n", info.name, info.cc_major, info.cc_minor, info.sm_count);
    return info.sm_count;
}

/* Microseconds per repetition of the work `rec` records (`reps`
 * repetitions per record): captured once into a graph on g_st, replayed
 * once to warm up, then once between two events. -1 (and a failed check)
 * when any step fails. */
static inline double graph_us(const char *name, frt_record_fn rec, void *user, int reps)
{
    double us = -1;
    frt_graph *graph = NULL;
    frt_event *e0 = NULL, *e1 = NULL;
    int rc = frt_graph_create(g_ctx, name, 0, &graph);
    if (!rc) rc = frt_graph_capture(graph, 1, g_st, rec, user);
    if (!rc) rc = frt_event_create(g_ctx, &e0);
    if (!rc) rc = frt_event_create(g_ctx, &e1);
    if (!rc) rc = frt_graph_replay(graph, 1, g_st); /* warm-up */
    if (!rc) rc = frt_event_record(e0, g_st);
    if (!rc) rc = frt_graph_replay(graph, 1, g_st);
    if (!rc) rc = frt_event_record(e1, g_st);
    if (!rc) rc = frt_event_sync(e1);
    float ms = 0;
    if (!rc) rc = frt_event_elapsed_ms(e0, e1, &ms);
    if (!rc) us = (double)ms * 1e3 / reps;
    CHECK_OK(rc);
    must(frt_stream_sync(g_st), "stream sync");
    frt_event_destroy(e0);
    frt_event_destroy(e1);
    frt_graph_destroy(graph);
    return us;
}

/* The index of the plan of key (n, in, out, dt, acc) in g, its info in
 * *info; -1 when there is none. */
static inline int plan_of(const frt_cuda_gemm *g, int n, int in, int out, frt_cuda_dtype dt, int acc,
                          frt_cuda_gemm_plan_info *info)
{
    for (int i = 0; i < frt_cuda_gemm_plan_count(g); i++) {
        if (frt_cuda_gemm_plan_get(g, i, info) < 0) continue;
        if (info->n == n && info->in_dim == in && info->out_dim == out && info->out_dtype == dt &&
            info->accumulate == acc)
            return i;
    }
    return -1;
}

/* Zeroed host memory; ends the program when out of memory. */
static inline void *xzalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* n zeroed floats. */
static inline float *fnew(size_t n) { return xzalloc(n * sizeof(float)); }

#ifndef FRT_TEST_CUDA_OWN_FRAND
/* n floats uniform in [lo, hi) from frt_test_fill. */
static inline float *frand(size_t n, float lo, float hi)
{
    float *x = fnew(n);
    frt_test_fill(x, n, lo, hi);
    return x;
}
#endif

/* A fresh copy of n floats. */
static inline float *fdup(const float *x, size_t n)
{
    float *y = fnew(n);
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* Rounds n floats to bf16 in place (RNE), as the device sees them. */
static inline void round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = frt_bf16_to_f32(frt_f32_to_bf16(x[i]));
}

/* "bf16" or "f32", for case names. */
static inline const char *dtn(frt_cuda_dtype dt) { return dt == FRT_CUDA_BF16 ? "bf16" : "f32"; }

/* Bytes per element of dt. */
static inline size_t dsize(frt_cuda_dtype dt) { return dt == FRT_CUDA_BF16 ? 2 : 4; }

/* One row of the table (name, rel err, tolerance, ok / FAIL), and the check. */
static inline void report(const char *name, double err, double tol)
{
    int ok = err <= tol && !isnan(err);
    printf("  %-*s %10.3e %8.1e %s\n", FRT_TEST_CUDA_COL, name, err, tol, ok ? "ok" : "FAIL");
    CHECK_MSG(ok, "%s: rel err %.3e > %.1e", name, err, tol);
}

#ifndef FRT_TEST_CUDA_OWN_REPORT_SAME
/* One row of the table: a and b (bytes long) must be bit-identical. */
static inline void report_same(const char *name, const void *a, const void *b, size_t bytes)
{
    int same = memcmp(a, b, bytes) == 0;
    printf("  %-*s %10s %8s %s\n", FRT_TEST_CUDA_COL, name, same ? "identical" : "DIFFER", "bits",
           same ? "ok" : "FAIL");
    CHECK_MSG(same, "%s: not bit-identical", name);
}
#endif

/* One row of the table: a yes / no property that must hold. */
static inline void report_flag(const char *name, int ok)
{
    printf("  %-*s %10s %8s %s\n", FRT_TEST_CUDA_COL, name, ok ? "yes" : "no", "-",
           ok ? "ok" : "FAIL");
    CHECK_MSG(ok, "%s", name);
}

/* Waits for the test stream. */
static inline void sync_st(void) { must(frt_stream_sync(g_st), "stream sync"); }

/* A device buffer: the handle, its device pointer, its size. */
typedef struct dbuf {
    frt_buffer *b;
    void *p;
    size_t bytes;
} dbuf;

/* A device buffer of `bytes` (at least 1). */
static inline dbuf dalloc(size_t bytes)
{
    dbuf d = {0, 0, bytes};
    must(frt_buffer_alloc(g_ctx, "test", FRT_SPACE_DEVICE, bytes ? bytes : 1, &d.b), "alloc");
    d.p = frt_buffer_ptr(d.b);
    return d;
}

/* Frees a device buffer and clears the handle. */
static inline void dfree(dbuf *d)
{
    frt_buffer_free(d->b);
    d->b = NULL;
    d->p = NULL;
}

/* Copies bytes from the host to byte offset off, and waits. */
static inline void dput(dbuf d, size_t off, const void *h, size_t bytes)
{
    must(frt_buffer_write(d.b, off, h, bytes, g_st), "write");
    sync_st();
}

/* Copies bytes at byte offset off to the host, and waits. */
static inline void dget(dbuf d, size_t off, void *h, size_t bytes)
{
    must(frt_buffer_read(d.b, off, h, bytes, g_st), "read");
    sync_st();
}

/* Fills with sentinel bytes 0x7F (f32 3.39e38, bf16 3.39e38). */
static inline void dsentinel(dbuf d)
{
    must(frt_buffer_fill(d.b, 0, d.bytes, 0x7F, g_st), "fill");
    sync_st();
}

/* A random bf16 matrix [rows, cols] in [lo, hi) drawn from *rng: the bits
 * and their exact f32. */
typedef struct hmat {
    int rows, cols;
    float *f;
    uint16_t *b;
} hmat;

static inline hmat hmat_rand(uint64_t *rng, int rows, int cols, float lo, float hi)
{
    hmat m = {rows, cols, NULL, NULL};
    const size_t n = (size_t)rows * cols;
    m.f = xzalloc(n * sizeof(float));
    m.b = xzalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        m.b[i] = frt_f32_to_bf16(lo + (hi - lo) * frt_rng_uniform(rng));
        m.f[i] = frt_bf16_to_f32(m.b[i]);
    }
    return m;
}

static inline void hmat_free(hmat *m)
{
    free(m->f);
    free(m->b);
    m->f = NULL;
    m->b = NULL;
}

#ifndef FRT_TEST_CUDA_OWN_UNTOUCHED
/* 1 when bytes [off, off + bytes) still hold the sentinel. */
static inline int untouched(dbuf d, size_t off, size_t bytes)
{
    if (!bytes) return 1;
    unsigned char *h = xzalloc(bytes);
    dget(d, off, h, bytes);
    int ok = 1;
    for (size_t i = 0; i < bytes; i++) ok &= h[i] == 0x7F;
    free(h);
    return ok;
}
#endif

#ifdef FRT_TEST_CUDA_AS_AT0
/* Uploads n floats as dtype dt (bf16: RNE) at offset 0. */
static inline void dput_as(dbuf d, const float *x, size_t n, frt_cuda_dtype dt)
{
    if (dt == FRT_CUDA_BF16) {
        uint16_t *h = xzalloc(n * 2);
        frt_f32_array_to_bf16(x, h, n);
        dput(d, 0, h, n * 2);
        free(h);
    } else {
        dput(d, 0, x, n * 4);
    }
}

/* Downloads n values of dtype dt at offset 0, widened to f32. */
static inline void dget_as(dbuf d, float *x, size_t n, frt_cuda_dtype dt)
{
    if (dt == FRT_CUDA_BF16) {
        uint16_t *h = xzalloc(n * 2);
        dget(d, 0, h, n * 2);
        frt_bf16_array_to_f32(h, x, n);
        free(h);
    } else {
        dget(d, 0, x, n * 4);
    }
}
#else
/* Uploads n floats as dtype dt (bf16: RNE) at element offset off_elems. */
static inline void dput_as(dbuf d, size_t off_elems, const float *x, size_t n, frt_cuda_dtype dt)
{
    if (dt == FRT_CUDA_BF16) {
        uint16_t *h = xzalloc(n * 2);
        frt_f32_array_to_bf16(x, h, n);
        dput(d, off_elems * 2, h, n * 2);
        free(h);
    } else {
        dput(d, off_elems * 4, x, n * 4);
    }
}

/* Downloads n values of dtype dt at element offset off_elems, widened to f32. */
static inline void dget_as(dbuf d, size_t off_elems, float *x, size_t n, frt_cuda_dtype dt)
{
    if (dt == FRT_CUDA_BF16) {
        uint16_t *h = xzalloc(n * 2);
        dget(d, off_elems * 2, h, n * 2);
        frt_bf16_array_to_f32(h, x, n);
        free(h);
    } else {
        dget(d, off_elems * 4, x, n * 4);
    }
}

/* Rounds x to dt in place (so the CPU sees what the GPU gets) and uploads. */
static inline void dprep(dbuf d, float *x, size_t n, frt_cuda_dtype dt)
{
    if (dt == FRT_CUDA_BF16) round_bf16(x, n);
    dput_as(d, 0, x, n, dt);
}
#endif

/* Snapshot of the first `bytes` of a device buffer (caller frees). */
static inline void *snap(dbuf d, size_t bytes)
{
    void *h = xzalloc(bytes);
    dget(d, 0, h, bytes);
    return h;
}

/* A graph of `reps` launches of a weight-bound product cycling over
 * `copies` copies of its weights (`wbytes` each, side by side in w), so
 * that no launch finds its weights in the L2; x and y are its input and
 * output. The file's own struct holds one, and its record function makes
 * the launches. */
typedef struct wcopies {
    int copies, reps;
    size_t wbytes; /* a copy's bytes */
    dbuf w, x, y;
} wcopies;

/* The weights launch i reads: its copy, the copies taken in turn. */
static inline const uint16_t *wcopies_at(const wcopies *c, int i)
{
    return (const uint16_t *)((const char *)c->w.p + (size_t)(i % c->copies) * c->wbytes);
}

/* Microseconds per launch of what `rec` records (`user`, the file's struct
 * that holds c): allocates c's copies of `wbytes` (>= 256 MiB in all, more
 * than the L2 holds), x and y; fills the weights and x with bytes 0x3C (bf16
 * 0x3C3C = 0.0115: finite values; the time does not depend on them) and y
 * with zeros (an accumulating launch reads it); times `reps` launches
 * (c->reps, for rec) in a graph with graph_us; frees the buffers. */
static inline double wcopies_us(wcopies *c, const char *name, size_t wbytes, size_t xbytes, size_t ybytes, int reps,
                                frt_record_fn rec, void *user)
{
    c->wbytes = wbytes;
    c->copies = (int)((((size_t)256 << 20) + wbytes - 1) / wbytes);
    if (c->copies < 1) c->copies = 1;
    c->reps = reps;
    c->w = dalloc(c->copies * wbytes);
    c->x = dalloc(xbytes);
    c->y = dalloc(ybytes);
    must(frt_buffer_fill(c->w.b, 0, c->w.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(c->x.b, 0, c->x.bytes, 0x3C, g_st), "fill");
    must(frt_buffer_fill(c->y.b, 0, c->y.bytes, 0, g_st), "fill");
    const double us = graph_us(name, rec, user, reps);
    dfree(&c->w);
    dfree(&c->x);
    dfree(&c->y);
    return us;
}

#if defined(FRT_TEST_CUDA_START_N)
/* The dynamic values: int32 [0] = start, [1] = n, [2] = spare. */
static dbuf g_dyn;
/* Device pointer of the dynamic start. */
static inline int32_t *d_start_p(void) { return (int32_t *)g_dyn.p; }
/* Device pointer of the dynamic count. */
static inline int32_t *d_n_p(void) { return (int32_t *)g_dyn.p + 1; }
/* Writes (start, n) to device memory. */
static inline void set_dyn(int start, int n)
{
    int32_t v[2] = {start, n};
    dput(g_dyn, 0, v, sizeof v);
}
#elif defined(FRT_TEST_CUDA_COUNT)
static dbuf g_dn; /* int32 valid count */
/* Device pointer of the dynamic count. */
static inline int32_t *d_n_p(void) { return (int32_t *)g_dn.p; }
/* Writes n to device memory. */
static inline void set_n(int n)
{
    int32_t v = n;
    dput(g_dn, 0, &v, sizeof v);
}
#endif

#endif /* FRT_HAVE_CUDA */
#endif /* FRT_TEST_CUDA_H */
