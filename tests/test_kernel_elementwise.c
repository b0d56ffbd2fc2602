/*
 * test_kernel_elementwise.c - frt_cpu_swiglu, frt_cpu_add,
 * frt_cpu_sigmoid_mul, frt_cpu_softplus, frt_cpu_copy_rows and
 * frt_cpu_gdn_gate against fp64 references of the HF formulas, including
 * large magnitudes (no NaN/inf from exp overflow), softplus past its
 * threshold of 20, in-place use, and odd sizes.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

#define N 1003

static double silu_d(double x) { return x / (1.0 + exp(-x)); }
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
static double softplus_d(double x) { return x > 20 ? x : log1p(exp(x)); }

static int all_finite(const float *x, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void test_swiglu(void)
{
    static float gate[N], up[N], out[N], out2[N];
    static double ref[N];
    frt_test_fill(gate, N, -8, 8);
    frt_test_fill(up, N, -3, 3);
    gate[0] = -200.0f; /* exp(200) overflows fp32: silu must still be -0 */
    gate[1] = 200.0f;
    for (int i = 0; i < N; i++) ref[i] = silu_d(gate[i]) * up[i];
    frt_cpu_swiglu(out, gate, up, N);
    CHECK_MSG(rel_err_d(out, ref, N) <= 1e-6, "swiglu rel err %.3e", rel_err_d(out, ref, N));
    CHECK(all_finite(out, N));
    memcpy(out2, gate, sizeof gate);
    frt_cpu_swiglu(out2, out2, up, N);
    CHECK(memcmp(out, out2, sizeof out) == 0);
}

static void test_add_sigmoid_mul(void)
{
    static float y[N], x[N], y0[N];
    static double ref[N];
    frt_test_fill(y0, N, -2, 2);
    frt_test_fill(x, N, -2, 2);
    memcpy(y, y0, sizeof y);
    frt_cpu_add(y, x, N);
    int exact = 1;
    for (int i = 0; i < N; i++) exact &= y[i] == y0[i] + x[i];
    CHECK(exact);

    frt_test_fill(x, N, -10, 10);
    x[0] = -500.0f;
    x[1] = 500.0f;
    memcpy(y, y0, sizeof y);
    for (int i = 0; i < N; i++) ref[i] = y0[i] * sigmoid_d(x[i]);
    frt_cpu_sigmoid_mul(y, x, N);
    CHECK_MSG(rel_err_d(y, ref, N) <= 1e-6, "sigmoid_mul rel err %.3e", rel_err_d(y, ref, N));
    CHECK(all_finite(y, N));
}

static void test_softplus(void)
{
    static float x[N], y[N];
    static double ref[N];
    frt_test_fill(x, N, -30, 30);
    x[0] = 25.0f;
    x[1] = -100.0f;
    x[2] = 200.0f;
    for (int i = 0; i < N; i++) ref[i] = softplus_d(x[i]);
    frt_cpu_softplus(y, x, N);
    CHECK_MSG(rel_err_d(y, ref, N) <= 1e-6, "softplus rel err %.3e", rel_err_d(y, ref, N));
    CHECK(y[0] == 25.0f && y[2] == 200.0f && y[1] >= 0.0f);
    CHECK(all_finite(y, N));
    /* small x: log1p keeps relative accuracy where log(1 + e^x) would not */
    float xs = -18.0f, ys;
    frt_cpu_softplus(&ys, &xs, 1);
    CHECK(fabs(ys - softplus_d(-18.0)) <= 1e-6 * softplus_d(-18.0));
    frt_cpu_softplus(x, x, N); /* in place */
    CHECK(memcmp(x, y, sizeof y) == 0);
}

static void test_copy_rows(void)
{
    /* q_proj output: 3 tokens x 4 heads x [q(8) | gate(8)] */
    int rows = 12, hd = 8;
    float src[12 * 16], q[12 * 8], gate[12 * 8];
    frt_test_fill(src, 12 * 16, -1, 1);
    frt_cpu_copy_rows(q, src, rows, hd, 2 * hd);
    frt_cpu_copy_rows(gate, src + hd, rows, hd, 2 * hd);
    int ok = 1;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < hd; c++)
            ok &= q[r * hd + c] == src[r * 16 + c] && gate[r * hd + c] == src[r * 16 + hd + c];
    CHECK(ok);
}

static void test_gdn_gate(void)
{
    int n_tok = 37, nh = 6;
    float a[37 * 6], b[37 * 6], A_log[6], dt[6], g[37 * 6], beta[37 * 6];
    double rg[37 * 6], rb[37 * 6];
    frt_test_fill(a, (size_t)n_tok * nh, -6, 6);
    frt_test_fill(b, (size_t)n_tok * nh, -6, 6);
    for (int h = 0; h < nh; h++) A_log[h] = logf(0.01f) + (logf(16.0f) - logf(0.01f)) * h / (nh - 1);
    frt_test_fill(dt, (size_t)nh, -1, 1);
    a[0] = 30.0f; /* softplus past its threshold */
    for (int t = 0; t < n_tok; t++) {
        for (int h = 0; h < nh; h++) {
            int i = t * nh + h;
            rg[i] = -exp((double)A_log[h]) * softplus_d((double)a[i] + dt[h]);
            rb[i] = sigmoid_d(b[i]);
        }
    }
    frt_cpu_gdn_gate(g, beta, a, b, A_log, dt, n_tok, nh);
    CHECK_MSG(rel_err_d(g, rg, (size_t)n_tok * nh) <= 1e-6, "g rel err %.3e",
              rel_err_d(g, rg, (size_t)n_tok * nh));
    CHECK_MSG(rel_err_d(beta, rb, (size_t)n_tok * nh) <= 1e-6, "beta rel err %.3e",
              rel_err_d(beta, rb, (size_t)n_tok * nh));
    int neg = 1;
    for (int i = 0; i < n_tok * nh; i++) neg &= g[i] <= 0.0f && beta[i] > 0.0f && beta[i] < 1.0f;
    CHECK(neg);
}

int main(void)
{
    frt_test_seed(71);
    test_swiglu();
    test_add_sigmoid_mul();
    test_softplus();
    test_copy_rows();
    test_gdn_gate();
    return frt_test_report();
}
