/*
 * test_kernel_cfg_combine.c - frt_cpu_cfg_combine (classifier-free
 * guidance's v_u + beta (v_c - v_u)) on random data at the production size
 * [50, 32] and at an odd size: bit-exact against a plain loop over the same
 * fmaf, within f32 rounding of an fp64 reference, in place on either input,
 * and beta = 1 returning v_c up to the rounding of the difference.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

/* n random floats in [-3, 3) (calloc first: GCC's -O1 sanitizer build
 * cannot see that the fill writes every element of a malloc'd block). */
static float *rand_vec(int n)
{
    float *v = calloc((size_t)n, sizeof *v);
    if (!v) abort();
    frt_test_fill(v, (size_t)n, -3, 3);
    return v;
}

static void check_size(int n, float beta)
{
    float *vc = rand_vec(n), *vu = rand_vec(n), *out = xmalloc(n * sizeof(float));
    float *ref = xmalloc(n * sizeof(float)), *io = xmalloc(n * sizeof(float));
    double *ref_d = xmalloc(n * sizeof(double));
    for (int i = 0; i < n; i++) {
        ref[i] = fmaf(beta, vc[i] - vu[i], vu[i]);
        ref_d[i] = (double)vu[i] + (double)beta * ((double)vc[i] - (double)vu[i]);
    }
    frt_cpu_cfg_combine(out, vc, vu, beta, n);
    CHECK_MSG(memcmp(out, ref, n * sizeof(float)) == 0, "cfg_combine n=%d beta=%g not bit-exact", n, (double)beta);
    CHECK_MSG(rel_err_d(out, ref_d, n) <= 1e-6, "cfg_combine n=%d beta=%g rel %.3e", n, (double)beta,
              rel_err_d(out, ref_d, n));
    memcpy(io, vc, n * sizeof(float));
    frt_cpu_cfg_combine(io, io, vu, beta, n); /* in place on v_cond */
    CHECK(memcmp(io, ref, n * sizeof(float)) == 0);
    memcpy(io, vu, n * sizeof(float));
    frt_cpu_cfg_combine(io, vc, io, beta, n); /* in place on v_uncond */
    CHECK(memcmp(io, ref, n * sizeof(float)) == 0);
    if (beta == 1.0f) CHECK_MSG(frt_test_rel_err(out, vc, n) <= 1e-6, "beta 1 rel %.3e", frt_test_rel_err(out, vc, n));
    free(vc), free(vu), free(out), free(ref), free(io), free(ref_d);
}

int main(void)
{
    frt_test_seed(21);
    const float betas[] = {1.0f, 1.5f, 2.0f, 2.5f, 3.7f};
    for (size_t i = 0; i < sizeof betas / sizeof betas[0]; i++) {
        check_size(50 * 32, betas[i]);
        check_size(37, betas[i]);
    }
    return frt_test_report();
}
