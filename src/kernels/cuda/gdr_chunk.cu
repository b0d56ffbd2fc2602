/*
 * kernels/cuda/gdr_chunk.cu - the gated delta rule, chunked (prefill).
 * Math: transformers 5.x modeling_qwen3_5.py, torch_chunk_gated_delta_rule,
 * as the CPU twin frt_cpu_gdr_chunked computes it. Per value head h and chunk
 * of L rows (S = state[h] [dk, dv], q scaled by dk^-0.5, cum the in-chunk
 * cumulative sum of g in fp64):
 *   A[i][j]   = ((beta_i k_i) . k_j) exp(cum_i - cum_j)            j < i
 *   Att[i][j] = (q_i . k_j) exp(cum_i - cum_j)                      j <= i
 *   U = (I + A)^-1 [beta_i v_i],  W = (I + A)^-1 [beta_i k_i exp(cum_i)]
 *   Vn_i  = U_i - W_i S
 *   out_i = (q_i exp(cum_i)) S + sum_{j<=i} Att[i][j] Vn_j
 *   S     = S exp(cum_{L-1}) + sum_i (k_i exp(cum_{L-1} - cum_i)) (x) Vn_i
 * Only U, Vn, out and S involve the value dim, and their columns are
 * independent; A, Att and W depend on q, k, g, beta only. So one block of
 * 256 threads per (value head, 32 columns of dv) keeps everything of one
 * chunk in shared memory (dynamic, ~154 KiB for dk 128 and chunk 64),
 * recomputes A, Att, W itself (cheap next to the state work) and walks the
 * chunks in order, carrying its 32 columns of S. Every element is computed by
 * one thread (sums over the key dim ascending: the twin's axpy order; its dot
 * products for A and Att use 8 interleaved partial sums instead; the forward
 * substitution row by row with one thread per column, j ascending as the
 * twin), so there is no cross-thread reduction and the bits are the same on
 * every run. The
 * token count is read from device memory; the tail chunk has its real rows
 * only, as in the twin. Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define GDR_DVB 32      /* value columns per block */
#define GDR_THREADS 256 /* threads per block */

/* Shared memory bytes for chunk C and key dim dk (layout in the kernel). */
static size_t gdr_chunk_smem(int C, int dk)
{
    const size_t dkp = (size_t)dk + 1;
    return (size_t)C * sizeof(double) +
           ((size_t)3 * C + (size_t)dk * GDR_DVB + 3 * (size_t)C * dkp + (size_t)C * GDR_DVB +
            2 * (size_t)C * C) *
               sizeof(float);
}

__global__ __launch_bounds__(GDR_THREADS) void gdr_chunk_kernel(
    void *out, int out_dt, float *state, const void *q, const void *k, const void *v, int in_dt,
    const float *g, const float *beta, const int32_t *d_n, int max_n, int n_k_heads,
    int n_v_heads, int dk, int dv, int C, float scale)
{
    extern __shared__ double smem_d[];
    const int DKP = dk + 1; /* padded row of the [C][dk] arrays: conflict-free column reads */
    double *cum = smem_d;                 /* [C] in-chunk cumulative log-decay */
    float *ecum = (float *)(cum + C);     /* [C] exp(cum_i) */
    float *elast = ecum + C;              /* [C] exp(cum_last - cum_i) */
    float *bsm = elast + C;               /* [C] beta_i */
    float *S = bsm + C;                   /* [dk][GDR_DVB] this block's columns of the state */
    float *Kc = S + dk * GDR_DVB;         /* [C][DKP] k */
    float *Qc = Kc + C * DKP;             /* [C][DKP] q * scale */
    float *W = Qc + C * DKP;              /* [C][DKP] beta k, then * exp(cum), then solved */
    float *U = W + C * DKP;               /* [C][GDR_DVB] beta v, then solved, then Vn */
    float *A = U + C * GDR_DVB;           /* [C][C] strictly lower */
    float *Att = A + C * C;               /* [C][C] lower incl. diagonal */

    const int tid = threadIdx.x, nt = blockDim.x;
    const int h = blockIdx.x, kh = h / (n_v_heads / n_k_heads);
    const int j0 = blockIdx.y * GDR_DVB;
    const int n = frt_dyn_n(d_n, max_n);
    float *Sg = state + (size_t)h * dk * dv;
    const size_t qk_stride = (size_t)n_k_heads * dk, v_stride = (size_t)n_v_heads * dv;

    for (int idx = tid; idx < dk * GDR_DVB; idx += nt) {
        const int a = idx / GDR_DVB, j = j0 + idx % GDR_DVB;
        S[idx] = j < dv ? Sg[(size_t)a * dv + j] : 0.0f;
    }

    for (int c0 = 0; c0 < n; c0 += C) {
        const int L = min(C, n - c0);
        /* 1. stage the chunk (the previous iteration ended with a barrier) */
        if (tid == 0) {
            double acc = 0;
            for (int i = 0; i < L; i++) {
                acc += (double)g[(size_t)(c0 + i) * n_v_heads + h];
                cum[i] = acc;
            }
        }
        for (int i = tid; i < L; i += nt) bsm[i] = beta[(size_t)(c0 + i) * n_v_heads + h];
        for (int idx = tid; idx < L * dk; idx += nt) {
            const int i = idx / dk, a = idx % dk;
            const size_t src = (size_t)(c0 + i) * qk_stride + (size_t)kh * dk + a;
            Kc[i * DKP + a] = frt_ld(k, in_dt, src);
            Qc[i * DKP + a] = frt_ld(q, in_dt, src) * scale;
        }
        for (int idx = tid; idx < L * GDR_DVB; idx += nt) {
            const int i = idx / GDR_DVB, j = j0 + idx % GDR_DVB;
            U[idx] = j < dv ? frt_ld(v, in_dt, (size_t)(c0 + i) * v_stride + (size_t)h * dv + j)
                            : 0.0f;
        }
        __syncthreads();
        /* 2. decays, beta k, beta v */
        for (int i = tid; i < L; i += nt) {
            ecum[i] = (float)exp(cum[i]);
            elast[i] = (float)exp(cum[L - 1] - cum[i]);
        }
        for (int idx = tid; idx < L * dk; idx += nt) {
            const int i = idx / dk, a = idx % dk;
            W[i * DKP + a] = Kc[i * DKP + a] * bsm[i];
        }
        for (int idx = tid; idx < L * GDR_DVB; idx += nt) U[idx] *= bsm[idx / GDR_DVB];
        __syncthreads();
        /* 3. the UT system A and the intra-chunk attention Att */
        for (int idx = tid; idx < L * L; idx += nt) {
            const int i = idx / L, jx = idx % L;
            float av = 0.0f, att = 0.0f;
            if (jx <= i) {
                const float e = (float)exp(cum[i] - cum[jx]);
                const float *kj = Kc + jx * DKP;
                const float *qi = Qc + i * DKP;
                float dq = 0.0f;
                for (int a = 0; a < dk; a++) dq += qi[a] * kj[a];
                att = dq * e;
                if (jx < i) {
                    const float *wi = W + i * DKP;
                    float dw = 0.0f;
                    for (int a = 0; a < dk; a++) dw += wi[a] * kj[a];
                    av = dw * e;
                }
            }
            A[i * C + jx] = av;
            Att[i * C + jx] = att;
        }
        __syncthreads();
        /* 4. W_i *= exp(cum_i) (after A, which uses beta k unscaled) */
        for (int idx = tid; idx < L * dk; idx += nt) {
            const int i = idx / dk, a = idx % dk;
            W[i * DKP + a] *= ecum[i];
        }
        __syncthreads();
        /* 5. (I + A) X = RHS, forward substitution: one thread per column of U
         * and of W, rows in order, j ascending (the twin's axpy order) */
        for (int col = tid; col < GDR_DVB + dk; col += nt) {
            float *X;
            int ld;
            if (col < GDR_DVB) {
                X = U + col;
                ld = GDR_DVB;
            } else {
                X = W + (col - GDR_DVB);
                ld = DKP;
            }
            for (int i = 1; i < L; i++) {
                float acc = X[i * ld];
                const float *Ai = A + i * C;
                for (int jx = 0; jx < i; jx++) acc += (-Ai[jx]) * X[jx * ld];
                X[i * ld] = acc;
            }
        }
        __syncthreads();
        /* 6. Vn_i = U_i - W_i S (S of the previous chunk) */
        for (int idx = tid; idx < L * GDR_DVB; idx += nt) {
            const int i = idx / GDR_DVB, jj = idx % GDR_DVB;
            const float *wi = W + i * DKP;
            float acc = 0.0f;
            for (int a = 0; a < dk; a++) acc += wi[a] * S[a * GDR_DVB + jj];
            U[idx] -= acc;
        }
        __syncthreads();
        /* 7. out_i = (q_i exp(cum_i)) S + sum_{j<=i} Att[i][j] Vn_j */
        for (int idx = tid; idx < L * GDR_DVB; idx += nt) {
            const int i = idx / GDR_DVB, jj = idx % GDR_DVB, j = j0 + jj;
            const float e = ecum[i];
            const float *qi = Qc + i * DKP;
            float acc = 0.0f;
            for (int a = 0; a < dk; a++) acc += (qi[a] * e) * S[a * GDR_DVB + jj];
            const float *atti = Att + i * C;
            for (int jx = 0; jx <= i; jx++) acc += atti[jx] * U[jx * GDR_DVB + jj];
            if (j < dv)
                frt_st(out, out_dt, (size_t)(c0 + i) * v_stride + (size_t)h * dv + j, acc);
        }
        __syncthreads(); /* every reader of S is done */
        /* 8. S = S exp(cum_last) + sum_i (k_i exp(cum_last - cum_i)) (x) Vn_i */
        const float decay = (float)exp(cum[L - 1]);
        for (int idx = tid; idx < dk * GDR_DVB; idx += nt) {
            const int a = idx / GDR_DVB, jj = idx % GDR_DVB;
            float acc = S[idx] * decay;
            for (int i = 0; i < L; i++) acc += (Kc[i * DKP + a] * elast[i]) * U[i * GDR_DVB + jj];
            S[idx] = acc;
        }
        __syncthreads(); /* before the next chunk overwrites the staging arrays */
    }

    for (int idx = tid; idx < dk * GDR_DVB; idx += nt) {
        const int a = idx / GDR_DVB, j = j0 + idx % GDR_DVB;
        if (j < dv) Sg[(size_t)a * dv + j] = S[idx];
    }
}

extern "C" int frt_cuda_gdr_chunked(void *stream, void *out, frt_cuda_dtype out_dtype,
                                    float *state, const void *q, const void *k, const void *v,
                                    frt_cuda_dtype in_dtype, const float *g, const float *beta,
                                    const int32_t *d_n, int max_n, int n_k_heads, int n_v_heads,
                                    int dk, int dv, int chunk)
{
    FRT_ARG(out && state && q && k && v && g && beta, "cuda gdr_chunked: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(in_dtype), "cuda gdr_chunked: bad dtype");
    FRT_ARG(max_n >= 0 && n_k_heads > 0 && n_v_heads > 0 && n_v_heads % n_k_heads == 0,
            "cuda gdr_chunked: max_n %d n_k_heads %d n_v_heads %d", max_n, n_k_heads, n_v_heads);
    FRT_ARG(dk >= 1 && dv >= 1 && dv <= 65535 * GDR_DVB, "cuda gdr_chunked: dk %d dv %d", dk, dv);
    FRT_ARG(chunk >= 1 && chunk <= FRT_CUDA_GDR_MAX_CHUNK, "cuda gdr_chunked: chunk %d (1..%d)",
            chunk, FRT_CUDA_GDR_MAX_CHUNK);
    const size_t smem = gdr_chunk_smem(chunk, dk);
    int dev = 0, limit = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (smem > (size_t)limit)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gdr_chunked: dk %d, chunk %d need %zu bytes of shared memory, the "
                         "device has %d per block",
                         dk, chunk, smem, limit);
    if (max_n == 0) return 0;
    FRT_CUDA_TRY(cudaFuncSetAttribute(gdr_chunk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)smem));
    const float scale = (float)(1.0 / sqrt((double)dk));
    dim3 grid((unsigned int)n_v_heads, (unsigned int)((dv + GDR_DVB - 1) / GDR_DVB));
    gdr_chunk_kernel<<<grid, GDR_THREADS, smem, (cudaStream_t)stream>>>(
        out, out_dtype, state, q, k, v, in_dtype, g, beta, d_n, max_n, n_k_heads, n_v_heads, dk,
        dv, chunk, scale);
    FRT_LAUNCH_CHECK();
    return 0;
}
