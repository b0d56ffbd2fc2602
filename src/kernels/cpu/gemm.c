/*
 * gemm.c - y = x . w^T (HF Linear layout) through OpenBLAS cblas_sgemm.
 * Determinism: same bits for the same shapes and OpenBLAS thread count (see
 * kernels_cpu.h). Tested in tests/test_kernel_gemm.c.
 */
#include "kernels/cpu/kernels_cpu.h"

#include <cblas.h>

static void gemm(float *y, const float *x, const float *w, int n_tok, int in_dim, int out_dim,
                 float beta)
{
    if (n_tok <= 0 || out_dim <= 0) return;
    if (in_dim <= 0) {
        /* K = 0: x . w^T is zero; BLAS leaves y * beta (a no-op for beta 1) */
        if (beta == 0.0f)
            for (size_t i = 0; i < (size_t)n_tok * out_dim; i++) y[i] = 0.0f;
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_tok, out_dim, in_dim, 1.0f, x, in_dim,
                w, in_dim, beta, y, out_dim);
}

void frt_cpu_matmul(float *y, const float *x, const float *w, int n_tok, int in_dim, int out_dim)
{
    gemm(y, x, w, n_tok, in_dim, out_dim, 0.0f);
}

void frt_cpu_matmul_add(float *y, const float *x, const float *w, int n_tok, int in_dim,
                        int out_dim)
{
    gemm(y, x, w, n_tok, in_dim, out_dim, 1.0f);
}
