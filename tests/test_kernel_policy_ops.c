/*
 * test_kernel_policy_ops.c - the CPU kernels of the Pi0 / Pi0.5 policy
 * (kernels_cpu.h, "policy (VLA) ops") against fp64 references on random
 * data: LayerNorm, tanh GELU / GeGLU, SiLU, bias add, adaRMSNorm, the patch
 * cut against a direct stride-p convolution, and masked GQA attention
 * (random masks, a fully masked row, odd sizes).
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_layernorm(void)
{
    enum { R = 7, D = 41 };
    static float x[R * D], w[D], b[D], out[R * D];
    static double ref[R * D];
    frt_test_fill(x, R * D, -3, 5);
    frt_test_fill(w, D, -1, 1);
    frt_test_fill(b, D, -1, 1);
    for (int r = 0; r < R; r++) {
        double mu = 0, var = 0;
        for (int i = 0; i < D; i++) mu += x[r * D + i];
        mu /= D;
        for (int i = 0; i < D; i++) var += (x[r * D + i] - mu) * (x[r * D + i] - mu);
        var /= D;
        for (int i = 0; i < D; i++) ref[r * D + i] = (x[r * D + i] - mu) / sqrt(var + 1e-6) * w[i] + b[i];
    }
    frt_cpu_layernorm(out, x, w, b, R, D, 1e-6f);
    CHECK_MSG(rel_err_d(out, ref, R * D) <= 1e-6, "layernorm rel err %.3e", rel_err_d(out, ref, R * D));
    frt_cpu_layernorm(x, x, w, b, R, D, 1e-6f); /* in place */
    CHECK(memcmp(x, out, sizeof out) == 0);
}

static void test_activations(void)
{
    enum { N = 1001 };
    static float g[N], u[N], out[N];
    static double ref[N];
    frt_test_fill(g, N, -8, 8);
    frt_test_fill(u, N, -2, 2);
    g[0] = -60.0f;
    g[1] = 60.0f;
    for (int i = 0; i < N; i++) ref[i] = gelu_d(g[i]) * u[i];
    frt_cpu_geglu_tanh(out, g, u, N);
    CHECK_MSG(rel_err_d(out, ref, N) <= 1e-6, "geglu rel err %.3e", rel_err_d(out, ref, N));
    for (int i = 0; i < N; i++) ref[i] = gelu_d(g[i]);
    frt_cpu_gelu_tanh(out, g, N);
    CHECK_MSG(rel_err_d(out, ref, N) <= 1e-6, "gelu rel err %.3e", rel_err_d(out, ref, N));
    for (int i = 0; i < N; i++) ref[i] = g[i] / (1.0 + exp(-(double)g[i]));
    frt_cpu_silu(out, g, N);
    CHECK_MSG(rel_err_d(out, ref, N) <= 1e-6, "silu rel err %.3e", rel_err_d(out, ref, N));
    enum { R = 5, C = 13 };
    static float y[R * C], b[C];
    frt_test_fill(y, R * C, -1, 1);
    frt_test_fill(b, C, -1, 1);
    memcpy(out, y, sizeof y);
    frt_cpu_add_bias(out, b, R, C);
    int exact = 1;
    for (int i = 0; i < R * C; i++) exact &= out[i] == y[i] + b[i % C];
    CHECK(exact);
}

static void test_rmsnorm_ada(void)
{
    enum { R = 6, D = 37 };
    static float x[R * D], sc[D], sh[D], out[R * D];
    static double ref[R * D];
    frt_test_fill(x, R * D, -4, 4);
    frt_test_fill(sc, D, -1, 1);
    frt_test_fill(sh, D, -1, 1);
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[r * D + i] * x[r * D + i];
        double inv = 1.0 / sqrt(ss / D + 1e-6);
        for (int i = 0; i < D; i++) ref[r * D + i] = x[r * D + i] * inv * (1.0 + sc[i]) + sh[i];
    }
    frt_cpu_rmsnorm_ada(out, x, sc, sh, R, D, 1e-6f);
    CHECK_MSG(rel_err_d(out, ref, R * D) <= 1e-6, "adarms rel err %.3e", rel_err_d(out, ref, R * D));
}

static void test_patchify(void)
{
    enum { CH = 3, H = 21, W = 14, P = 7, D = 5 };
    const int np = (H / P) * (W / P), K = CH * P * P;
    static float img[CH * H * W], wt[D * CH * P * P], pat[(H / P) * (W / P) * CH * P * P], out[6 * D];
    static double ref[6 * D];
    frt_test_fill(img, CH * H * W, -1, 1);
    frt_test_fill(wt, D * K, -1, 1);
    frt_cpu_patchify(pat, img, CH, H, W, P);
    for (int py = 0; py < H / P; py++)
        for (int px = 0; px < W / P; px++)
            for (int d = 0; d < D; d++) {
                double s = 0;
                for (int c = 0; c < CH; c++)
                    for (int ky = 0; ky < P; ky++)
                        for (int kx = 0; kx < P; kx++)
                            s += (double)img[(c * H + py * P + ky) * W + px * P + kx] *
                                 wt[((d * CH + c) * P + ky) * P + kx];
                ref[(py * (W / P) + px) * D + d] = s;
            }
    frt_cpu_matmul(out, pat, wt, np, K, D);
    CHECK_MSG(rel_err_d(out, ref, np * D) <= 1e-5, "patch conv rel err %.3e", rel_err_d(out, ref, np * D));
}

static void test_attention_masked(void)
{
    enum { NQ = 9, NKV = 23, H = 6, KVH = 2, HD = 12 };
    static float q[NQ * H * HD], k[NKV * KVH * HD], v[NKV * KVH * HD], out[NQ * H * HD];
    static double ref[NQ * H * HD];
    static uint8_t allow[NQ * NKV];
    frt_test_fill(q, NQ * H * HD, -2, 2);
    frt_test_fill(k, NKV * KVH * HD, -2, 2);
    frt_test_fill(v, NKV * KVH * HD, -2, 2);
    for (int i = 0; i < NQ * NKV; i++) allow[i] = frt_test_rand(0, 1) < 0.6f;
    for (int j = 0; j < NKV; j++) allow[3 * NKV + j] = 0; /* a row with no key */
    const double scale = 1.0 / sqrt(HD);
    for (int t = 0; t < NQ; t++)
        for (int h = 0; h < H; h++) {
            int kh = h / (H / KVH);
            double s[NKV], mx = -INFINITY, sum = 0;
            for (int j = 0; j < NKV; j++) {
                s[j] = -INFINITY;
                if (!allow[t * NKV + j]) continue;
                double d = 0;
                for (int e = 0; e < HD; e++) d += (double)q[(t * H + h) * HD + e] * k[(j * KVH + kh) * HD + e];
                s[j] = d * scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < NKV; j++) sum += allow[t * NKV + j] ? exp(s[j] - mx) : 0;
            for (int e = 0; e < HD; e++) {
                double o = 0;
                for (int j = 0; j < NKV; j++)
                    if (allow[t * NKV + j]) o += exp(s[j] - mx) / sum * v[(j * KVH + kh) * HD + e];
                ref[(t * H + h) * HD + e] = sum > 0 ? o : 0;
            }
        }
    frt_cpu_attention_masked(out, q, k, v, allow, NQ, NKV, H, KVH, HD, (float)scale);
    CHECK_MSG(rel_err_d(out, ref, NQ * H * HD) <= 1e-5, "masked attention rel err %.3e",
              rel_err_d(out, ref, NQ * H * HD));
    int zero = 1;
    for (int i = 0; i < H * HD; i++) zero &= out[3 * H * HD + i] == 0.0f;
    CHECK(zero);
}

int main(void)
{
    frt_test_seed(20);
    test_layernorm();
    test_activations();
    test_rmsnorm_ada();
    test_patchify();
    test_attention_masked();
    return frt_test_report();
}
