/*
 * test_kernel_rope.c - frt_cpu_rope (rotate-half / NeoX, partial) against
 * fp64 references:
 *  - HF-emulating: the angle formed in fp32 exactly as HF does
 *    (1.0f / powf(theta, (float)(2i) / (float)rot), times (float)pos), the
 *    rotation in fp64: tight, at any position;
 *  - exact: theta^(-2i/rot) * pos all in fp64, at small positions (the fp32
 *    angle of HF drifts by ~pos * 2^-24 radians, so large positions are only
 *    comparable to the HF-emulating reference).
 * Pass-through dims (rot_dim < head_dim) keep their bits; Qwen3.5 shapes
 * (head_dim 256, rot_dim 64, theta 1e7), full rotation, theta 1e4.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

static void ref_rope(double *out, const float *x, int n_tok, int nh, int hd, int rot,
                     const int32_t *pos, float theta, int hf_angle)
{
    int half = rot / 2;
    for (int t = 0; t < n_tok; t++) {
        for (int h = 0; h < nh; h++) {
            const float *xh = x + ((size_t)t * nh + h) * hd;
            double *oh = out + ((size_t)t * nh + h) * hd;
            for (int i = 0; i < hd; i++) oh[i] = xh[i];
            for (int i = 0; i < half; i++) {
                double a;
                if (hf_angle) {
                    float inv = 1.0f / powf(theta, (float)(2 * i) / (float)rot);
                    a = (double)((float)pos[t] * inv);
                } else {
                    a = (double)pos[t] * pow((double)theta, -2.0 * i / rot);
                }
                double x1 = xh[i], x2 = xh[i + half];
                oh[i] = x1 * cos(a) - x2 * sin(a);
                oh[i + half] = x2 * cos(a) + x1 * sin(a);
            }
        }
    }
}

static void run_case(int n_tok, int nh, int hd, int rot, float theta, int max_pos)
{
    size_t n = (size_t)n_tok * nh * hd;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    double *ref = xmalloc(n * sizeof(double));
    int32_t *pos = xmalloc((size_t)n_tok * sizeof(int32_t));
    frt_test_fill(x, n, -2, 2);
    for (int t = 0; t < n_tok; t++) pos[t] = (int32_t)(frt_test_u64() % (uint64_t)(max_pos + 1));
    pos[0] = max_pos;
    memcpy(y, x, n * 4);
    frt_cpu_rope(y, n_tok, nh, hd, rot, pos, theta);

    ref_rope(ref, x, n_tok, nh, hd, rot, pos, theta, 1);
    double e = rel_err_d(y, ref, n);
    CHECK_MSG(e <= 1e-6, "hf-angle ref: hd %d rot %d theta %g max_pos %d: rel err %.3e", hd, rot,
              (double)theta, max_pos, e);
    if (max_pos <= 64) {
        ref_rope(ref, x, n_tok, nh, hd, rot, pos, theta, 0);
        e = rel_err_d(y, ref, n);
        CHECK_MSG(e <= 2e-6, "exact ref: hd %d rot %d max_pos %d: rel err %.3e", hd, rot, max_pos,
                  e);
    }
    int pass_same = 1;
    for (int r = 0; r < n_tok * nh; r++)
        pass_same &= memcmp(y + (size_t)r * hd + rot, x + (size_t)r * hd + rot,
                            (size_t)(hd - rot) * 4) == 0;
    CHECK(pass_same);
    free(x);
    free(y);
    free(ref);
    free(pos);
}

/* Position 0 is the identity, bit for bit (cos 0 = 1, sin 0 = 0). */
static void test_pos0(void)
{
    float x[2 * 3 * 16], y[2 * 3 * 16];
    int32_t pos[2] = {0, 0};
    frt_test_fill(x, 96, -1, 1);
    memcpy(y, x, sizeof x);
    frt_cpu_rope(y, 2, 3, 16, 16, pos, 1e6f);
    CHECK(memcmp(x, y, sizeof x) == 0);
}

int main(void)
{
    frt_test_seed(31);
    /* n_tok, n_heads, head_dim, rot_dim, theta, max position */
    run_case(9, 8, 256, 64, 1e7f, 40000); /* Qwen3.5 full-attention q */
    run_case(9, 2, 256, 64, 1e7f, 40);
    run_case(5, 4, 64, 64, 1e4f, 4096); /* full rotation */
    run_case(7, 3, 64, 64, 1e4f, 60);
    run_case(3, 2, 24, 8, 1e6f, 63);
    run_case(2, 1, 2048, 1536, 1e4f, 50); /* rot_dim / 2 past the cos/sin table */
    test_pos0();
    frt_cpu_rope(NULL, 0, 4, 64, 64, NULL, 1e4f); /* n_tok 0: no-op */
    CHECK(1);
    return frt_test_report();
}
