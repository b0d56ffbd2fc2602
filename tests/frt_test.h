/*
 * frt_test.h - the tiny harness every test program uses.
 *
 *   CHECK(cond)                 records a failure with file:line, goes on
 *   CHECK_OK(expr)              expr must return 0; prints frt_last_error()
 *   CHECK_STATUS(expr, status)  expr must return exactly status
 *   CHECK_ERR_NEAR(a, b, n, tol)  norm-wise ||a-b||/||b|| <= tol (float)
 *   TEST_SKIP("why")            exits 77: ctest reports the test as skipped
 *   return frt_test_report();   prints "N passed, N failed" and the exit code
 *
 * Random data comes from frt_test_rand (xorshift, fixed seed per test), never
 * zeros.
 */
#ifndef FRT_TEST_H
#define FRT_TEST_H

#include "frt/status.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int frt_test_passed_, frt_test_failed_;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            frt_test_passed_++;                                                \
        } else {                                                               \
            frt_test_failed_++;                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
        }                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (cond) {                                                            \
            frt_test_passed_++;                                                \
        } else {                                                               \
            frt_test_failed_++;                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__,   \
                    #cond);                                                    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        int frt_check_rc_ = (expr);                                            \
        CHECK_MSG(frt_check_rc_ == 0, "%s: %s", frt_status_name(frt_check_rc_), \
                  frt_last_error());                                           \
    } while (0)

#define CHECK_STATUS(expr, status)                                             \
    do {                                                                       \
        int frt_check_rc_ = (expr);                                            \
        CHECK_MSG(frt_check_rc_ == (status), "got %s (%s), want %s",           \
                  frt_status_name(frt_check_rc_), frt_last_error(),            \
                  frt_status_name(status));                                    \
    } while (0)

#define TEST_SKIP(why)                                                         \
    do {                                                                       \
        printf("SKIP: %s\n", why);                                             \
        exit(77);                                                              \
    } while (0)

/* Norm-wise relative error ||a - b|| / ||b|| in double. */
static inline double frt_test_rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

/* max_i |a[i] - b[i]| in double. */
static inline double frt_test_max_abs_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
    return d;
}

/* The gap between the largest and the second largest of x [n] (a greedy
 * pick's margin). */
static inline float frt_test_top2_margin(const float *x, size_t n)
{
    float a = -INFINITY, b = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return a - b;
}

/* Norm-wise relative error of a float result against a double reference. */
static inline double rel_err_d(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den == 0 ? (num == 0 ? 0 : INFINITY) : sqrt(num / den);
}

/* malloc that ends the test program on failure (test inputs only). */
static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

#define CHECK_ERR_NEAR(a, b, n, tol)                                           \
    do {                                                                       \
        double frt_e_ = frt_test_rel_err((a), (b), (n));                       \
        CHECK_MSG(frt_e_ <= (tol) && !isnan(frt_e_), "rel err %.3e > %.1e",   \
                  frt_e_, (double)(tol));                                      \
    } while (0)

static uint64_t frt_test_rng_ = 0x9E3779B97F4A7C15ull;
static inline void frt_test_seed(uint64_t s) { frt_test_rng_ = s * 0x9E3779B97F4A7C15ull + 1; }
static inline uint64_t frt_test_u64(void)
{
    uint64_t x = frt_test_rng_;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return frt_test_rng_ = x;
}
/* Uniform in [lo, hi). */
static inline float frt_test_rand(float lo, float hi)
{
    return lo + (hi - lo) * (float)((frt_test_u64() >> 40) * (1.0 / 16777216.0));
}
static inline void frt_test_fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = frt_test_rand(lo, hi);
}

static inline int frt_test_report(void)
{
    printf("%d passed, %d failed\n", frt_test_passed_, frt_test_failed_);
    return frt_test_failed_ ? 1 : 0;
}

#endif
