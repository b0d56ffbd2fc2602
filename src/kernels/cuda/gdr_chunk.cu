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
 * Two kernels, the flash-linear-attention split (chunk_gated_delta_rule_fwd):
 *
 * 1. gdr_intra_kernel, one block of 256 threads per (chunk, value head), all
 *    chunks at once: everything that does not depend on the carried state.
 *    cum (fp64, one warp, ascending), the pairwise decays exp(cum_i - cum_j)
 *    (fp64 exp of the fp64 difference), A and Att as 4x4-interleaved register
 *    tiles of the lower triangle (dot products over dk ascending), then the
 *    unit lower triangular solve with one thread per column of
 *    [beta v | beta k exp(cum)] held in 64 registers, right-looking (after
 *    row j is final, every row i > j takes -A[i][j] X_j): each element still
 *    sums j ascending, as the twin's row-by-row axpy, but the 64 rows are not
 *    one dependent chain. It writes to the workspace, per (chunk, head):
 *    W^T and (q exp(cum))^T [dk][chunk], k exp(cum_last - cum) [chunk][dk],
 *    Att^T [chunk][chunk], U [chunk][dv] and exp(cum_last). Rows past the
 *    chunk's real L (the tail) are written as zeros.
 * 2. gdr_scan_kernel, one block of 256 threads per (value head, 32 columns of
 *    dv), serial over the chunks only, its 32 columns of S in shared memory:
 *    [W; q exp(cum)] S as 4x4 register tiles (sum over dk ascending), Vn = U -
 *    W S, out = (q exp(cum)) S + Att Vn (j ascending), S = S exp(cum_last) +
 *    sum_i (k_i exp(cum_last - cum_i)) (x) Vn_i (i ascending). The chunk's
 *    workspace arrays are staged with cp.async: W^T | q^T of chunk c + 1
 *    while chunk c finishes its output and state update, the rest of chunk c
 *    while its [W; q] S product runs. fp32 SIMT FMAs (tf32 tensor cores
 *    would lose too much in the state recurrence).
 *
 * Every element is summed by one thread in a fixed order (no atomics, no
 * cross-thread reduction), so the bits depend on the inputs only; every
 * chunk's arithmetic depends on that chunk's rows and the incoming state
 * only, so a prefill split into calls at multiples of `chunk` gives the same
 * bits as one call. The token count is read from device memory (d_n) by both
 * kernels: grids are sized for max_n, blocks of chunks past n exit, the tail
 * chunk has its real rows only, rows t >= n of out are never written.
 * Tested in tests/test_cuda_kernels.c and tests/test_cuda_gdr.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

#define GDR_T 256    /* threads per block, both kernels */
#define GDR_CMAX 64  /* largest chunk: the register and tile sizes below */
#define GDR_DKMAX 128 /* largest dk */
#define GDR_NC 32    /* value columns per state-scan block */
#define GDR_ELD 65   /* row stride of the decay matrix in shared memory */
#define GDR_ALD 68   /* row stride of A^T, Att^T in shared memory (16-byte rows) */

static_assert(FRT_CUDA_GDR_MAX_CHUNK == GDR_CMAX, "the kernels are written for chunks <= 64");

/* Workspace: one slot per (chunk index, value head), slot = ci * n_v_heads +
 * h; offsets and sizes in floats, all multiples of 4 (16-byte aligned). */
struct gdr_layout {
    int cp;   /* chunk rounded up to 4: rows (and leading dim) of the chunk arrays */
    int dk4;  /* dk rounded up to 4 */
    int dvb;  /* dv rounded up to GDR_NC: row stride of U */
    int wt;   /* W^T           [dk4][cp] */
    int qt;   /* (q e^cum)^T   [dk4][cp] */
    int kd;   /* k e^(last-cum) [cp][dk4] */
    int at;   /* Att^T         [cp][cp] */
    int u;    /* U             [cp][dvb] */
    int dec;  /* exp(cum_last) [4] (1 used) */
    int slot; /* floats per slot */
};

static gdr_layout gdr_layout_of(int dk, int dv, int chunk)
{
    gdr_layout l;
    l.cp = (chunk + 3) / 4 * 4;
    l.dk4 = (dk + 3) / 4 * 4;
    l.dvb = (dv + GDR_NC - 1) / GDR_NC * GDR_NC;
    l.wt = 0;
    l.qt = l.wt + l.dk4 * l.cp;
    l.kd = l.qt + l.dk4 * l.cp;
    l.at = l.kd + l.cp * l.dk4;
    l.u = l.at + l.cp * l.cp;
    l.dec = l.u + l.cp * l.dvb;
    l.slot = l.dec + 4;
    return l;
}

/* Shared memory bytes of the two kernels (layouts in the kernels). */
static size_t gdr_intra_smem(int dk4)
{
    return (size_t)GDR_CMAX * sizeof(double) +
           ((size_t)3 * GDR_CMAX + (size_t)3 * GDR_CMAX * (dk4 + 4) + (size_t)GDR_CMAX * GDR_ELD +
            (size_t)2 * GDR_CMAX * GDR_ALD) *
               sizeof(float);
}

static size_t gdr_scan_smem(int dk4)
{
    return ((size_t)dk4 * (GDR_NC + 2 * GDR_CMAX + GDR_CMAX) + (size_t)GDR_CMAX * GDR_CMAX +
            (size_t)3 * GDR_CMAX * GDR_NC) *
           sizeof(float);
}

/* cp.async of 16 bytes, global -> shared, through L2 only (read once). */
__device__ __forceinline__ void gdr_cp16(float *smem, const float *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void gdr_cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void gdr_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* A 16-byte shared memory load the compiler cannot split into scalar loads
 * (it does so when some lanes of a float4 go unused). */
__device__ __forceinline__ float4 gdr_lds4(const float *p)
{
    float4 r;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                 : "r"((unsigned)__cvta_generic_to_shared(p)));
    return r;
}

__device__ __forceinline__ float f4_at(const float4 &v, int i)
{
    return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}

/* ---- 1. intra-chunk: decays, A, Att, the UT solve ------------------------ */

__global__ __launch_bounds__(GDR_T, 1) void gdr_intra_kernel(
    float *__restrict__ ws, const void *__restrict__ q, const void *__restrict__ k,
    const void *__restrict__ v, int in_dt, const float *__restrict__ g,
    const float *__restrict__ beta, const int32_t *d_n, int max_n, int n_k_heads, int n_v_heads,
    int dk, int dv, int C, float scale, gdr_layout lay)
{
    extern __shared__ __align__(16) double smem_d[];
    const int dk4 = lay.dk4, CP = lay.cp, LD = dk4 + 4; /* LD: conflict-free float4 row reads */
    double *cum = smem_d;                  /* [64] in-chunk cumulative log-decay */
    float *ecum = (float *)(cum + GDR_CMAX); /* [64] exp(cum_i) */
    float *elast = ecum + GDR_CMAX;        /* [64] exp(cum_last - cum_i) */
    float *bsm = elast + GDR_CMAX;         /* [64] beta_i */
    float *Ks = bsm + GDR_CMAX;            /* [64][LD] k */
    float *Kb = Ks + GDR_CMAX * LD;        /* [64][LD] beta k */
    float *Qs = Kb + GDR_CMAX * LD;        /* [64][LD] q * scale */
    float *E = Qs + GDR_CMAX * LD;         /* [64][GDR_ELD] exp(cum_i - cum_j), j <= i < L */
    float *AT = E + GDR_CMAX * GDR_ELD;    /* [64][GDR_ALD] A^T: AT[j][i] = A[i][j] */
    float *AttT = AT + GDR_CMAX * GDR_ALD; /* [64][GDR_ALD] Att^T */

    const int tid = threadIdx.x;
    const int ci = blockIdx.x, h = blockIdx.y, kh = h / (n_v_heads / n_k_heads);
    const int n = frt_dyn_n(d_n, max_n);
    const int c0 = ci * C;
    if (c0 >= n) return;
    const int L = min(C, n - c0);
    const size_t qk_stride = (size_t)n_k_heads * dk, v_stride = (size_t)n_v_heads * dv;
    float *slot = ws + ((size_t)ci * n_v_heads + h) * (size_t)lay.slot;

    /* 1. stage: cum (warp 0: every lane sums all rows ascending, as the twin,
     * and keeps its two), beta, k and q * scale; rows >= L are zeros */
    if (tid < 32) {
        const int lane = tid;
        const float g0 = lane < L ? g[(size_t)(c0 + lane) * n_v_heads + h] : 0.0f;
        const float g1 = lane + 32 < L ? g[(size_t)(c0 + lane + 32) * n_v_heads + h] : 0.0f;
        double acc = 0, m0 = 0, m1 = 0;
#pragma unroll
        for (int i = 0; i < GDR_CMAX; i++) {
            const float gi = __shfl_sync(0xffffffffu, i < 32 ? g0 : g1, i & 31);
            if (i < L) acc += (double)gi;
            if (i == lane) m0 = acc;
            if (i == lane + 32) m1 = acc;
        }
        cum[lane] = m0;
        cum[lane + 32] = m1;
    } else if (tid < 32 + GDR_CMAX) {
        const int i = tid - 32;
        bsm[i] = i < L ? beta[(size_t)(c0 + i) * n_v_heads + h] : 0.0f;
    }
    {
        const int tot = GDR_CMAX * dk4;
#pragma unroll 1
        for (int base = 0; base < tot; base += GDR_T * 16) {
            float kv[16], qv[16];
#pragma unroll
            for (int u = 0; u < 16; u++) { /* all loads first: 32 in flight per thread */
                const int idx = base + u * GDR_T + tid;
                const int i = idx / dk4, a = idx - i * dk4;
                kv[u] = 0.0f;
                qv[u] = 0.0f;
                if (i < L && a < dk) {
                    const size_t src = (size_t)(c0 + i) * qk_stride + (size_t)kh * dk + a;
                    kv[u] = frt_ld(k, in_dt, src);
                    qv[u] = frt_ld(q, in_dt, src) * scale;
                }
            }
#pragma unroll
            for (int u = 0; u < 16; u++) {
                const int idx = base + u * GDR_T + tid;
                const int i = idx / dk4, a = idx - i * dk4;
                if (idx < tot) {
                    Ks[i * LD + a] = kv[u];
                    Qs[i * LD + a] = qv[u];
                }
            }
        }
    }
    __syncthreads();

    /* 2. beta k; the decays (fp64 exp of fp64 differences, as the twin) */
    for (int idx = tid; idx < GDR_CMAX * dk4; idx += GDR_T) {
        const int i = idx / dk4, a = idx - i * dk4;
        Kb[i * LD + a] = Ks[i * LD + a] * bsm[i];
    }
    if (tid < GDR_CMAX) {
        ecum[tid] = tid < L ? (float)exp(cum[tid]) : 0.0f;
        elast[tid] = tid < L ? (float)exp(cum[L - 1] - cum[tid]) : 0.0f;
    }
    for (int idx = tid; idx < GDR_CMAX * GDR_CMAX; idx += GDR_T) {
        const int i = idx / GDR_CMAX, j = idx % GDR_CMAX;
        E[i * GDR_ELD + j] = (j <= i && i < L) ? (float)exp(cum[i] - cum[j]) : 0.0f;
    }
    __syncthreads();

    /* 3. A and Att: thread (ty, tx) owns rows ty + 16 r, columns tx + 16 c;
     * the blocks c > r are above the diagonal and skipped; p = r(r+1)/2 + c */
    {
        const int ty = tid >> 4, tx = tid & 15;
        float accA[10], accQ[10];
#pragma unroll
        for (int p = 0; p < 10; p++) accA[p] = accQ[p] = 0.0f;
#pragma unroll 2
        for (int a = 0; a < dk4; a += 4) {
            float4 kc[4], kb[4], qr[4];
#pragma unroll
            for (int c = 0; c < 4; c++) kc[c] = *(const float4 *)(Ks + (tx + 16 * c) * LD + a);
#pragma unroll
            for (int r = 0; r < 4; r++) {
                kb[r] = *(const float4 *)(Kb + (ty + 16 * r) * LD + a);
                qr[r] = *(const float4 *)(Qs + (ty + 16 * r) * LD + a);
            }
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c <= r; c++) {
                    const int p = r * (r + 1) / 2 + c;
                    accA[p] = fmaf(kb[r].x, kc[c].x, accA[p]);
                    accA[p] = fmaf(kb[r].y, kc[c].y, accA[p]);
                    accA[p] = fmaf(kb[r].z, kc[c].z, accA[p]);
                    accA[p] = fmaf(kb[r].w, kc[c].w, accA[p]);
                    accQ[p] = fmaf(qr[r].x, kc[c].x, accQ[p]);
                    accQ[p] = fmaf(qr[r].y, kc[c].y, accQ[p]);
                    accQ[p] = fmaf(qr[r].z, kc[c].z, accQ[p]);
                    accQ[p] = fmaf(qr[r].w, kc[c].w, accQ[p]);
                }
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int i = ty + 16 * r, j = tx + 16 * c;
                float av = 0.0f, tv = 0.0f;
                if (c <= r) {
                    const int p = r * (r + 1) / 2 + c;
                    const float e = E[i * GDR_ELD + j];
                    if (j < i) av = accA[p] * e;
                    if (j <= i) tv = accQ[p] * e;
                }
                AT[j * GDR_ALD + i] = av;
                AttT[j * GDR_ALD + i] = tv;
            }
    }
    __syncthreads();

    /* 4. the state-independent inputs of the scan, to the workspace */
    {
        float *wq = slot + lay.qt, *wk = slot + lay.kd, *wa = slot + lay.at;
        const int nq = CP / 4;
        for (int idx = tid; idx < CP * CP; idx += GDR_T) {
            const int j = idx / CP, i = idx - j * CP;
            wa[idx] = AttT[j * GDR_ALD + i];
        }
        for (int idx = tid; idx < dk4 * nq; idx += GDR_T) { /* (q e^cum)^T, float4 along rows */
            const int m = idx / dk4, a = idx - m * dk4, i = 4 * m;
            float4 o;
            o.x = Qs[(i + 0) * LD + a] * ecum[i + 0];
            o.y = Qs[(i + 1) * LD + a] * ecum[i + 1];
            o.z = Qs[(i + 2) * LD + a] * ecum[i + 2];
            o.w = Qs[(i + 3) * LD + a] * ecum[i + 3];
            *(float4 *)(wq + (size_t)a * CP + i) = o;
        }
        for (int idx = tid; idx < CP * dk4; idx += GDR_T) {
            const int i = idx / dk4, a = idx - i * dk4;
            wk[idx] = Ks[i * LD + a] * elast[i];
        }
        if (tid == 0) slot[lay.dec] = (float)exp(cum[L - 1]);
    }

    /* 5. (I + A) X = RHS for the columns of [beta v (dv, padded to dvb) |
     * beta k exp(cum) (dk, padded to dk4)], one thread per column, X in
     * registers; rows >= L and pad columns are zeros and stay zeros */
    for (int col = tid; col < lay.dvb + dk4; col += GDR_T) {
        const bool isU = col < lay.dvb;
        const int cc = isU ? col : col - lay.dvb;
        float X[GDR_CMAX];
        if (isU) {
            const bool live = cc < dv;
#pragma unroll
            for (int i = 0; i < GDR_CMAX; i++)
                X[i] = (live && i < L)
                           ? frt_ld(v, in_dt, (size_t)(c0 + i) * v_stride + (size_t)h * dv + cc) *
                                 bsm[i]
                           : 0.0f;
        } else {
#pragma unroll
            for (int i = 0; i < GDR_CMAX; i++) X[i] = Kb[i * LD + cc] * ecum[i];
        }
#pragma unroll
        for (int j = 0; j < GDR_CMAX - 1; j++) {
            const float xj = X[j];
            const float *Aj = AT + j * GDR_ALD;
#pragma unroll
            for (int m = (j + 1) >> 2; m < GDR_CMAX / 4; m++) {
                const float4 a4 = gdr_lds4(Aj + 4 * m);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (4 * m + e > j) X[4 * m + e] = fmaf(-f4_at(a4, e), xj, X[4 * m + e]);
            }
        }
        if (isU) {
            float *wu = slot + lay.u + cc;
#pragma unroll
            for (int i = 0; i < GDR_CMAX; i++)
                if (i < CP) wu[(size_t)i * lay.dvb] = X[i];
        } else {
            float *ww = slot + lay.wt + (size_t)cc * CP;
#pragma unroll
            for (int m = 0; m < GDR_CMAX / 4; m++)
                if (4 * m < CP)
                    *(float4 *)(ww + 4 * m) =
                        make_float4(X[4 * m], X[4 * m + 1], X[4 * m + 2], X[4 * m + 3]);
        }
    }
}

/* ---- 2. the state scan over the chunks ---------------------------------- */

__global__ __launch_bounds__(GDR_T, 1) void gdr_scan_kernel(
    void *out, int out_dt, float *state, const float *__restrict__ ws, const int32_t *d_n,
    int max_n, int n_v_heads, int dk, int dv, int C, gdr_layout lay)
{
    extern __shared__ __align__(16) float smem_f[];
    const int dk4 = lay.dk4, CP = lay.cp, nq = lay.cp / 4;
    float *S = smem_f;                        /* [dk4][32] this block's columns of the state */
    float *XT = S + dk4 * GDR_NC;             /* [dk4][128] W^T | (q e^cum)^T */
    float *Kd = XT + dk4 * 2 * GDR_CMAX;      /* [64][dk4] k e^(last - cum) */
    float *AtT = Kd + GDR_CMAX * dk4;         /* [64][64] Att^T */
    float *Us = AtT + GDR_CMAX * GDR_CMAX;    /* [64][32] U */
    float *Vn = Us + GDR_CMAX * GDR_NC;       /* [64][32] U - W S */
    float *P = Vn + GDR_CMAX * GDR_NC;        /* [64][32] (q e^cum) S */

    const int tid = threadIdx.x, h = blockIdx.x, j0 = blockIdx.y * GDR_NC;
    const int n = frt_dyn_n(d_n, max_n);
    if (n == 0) return;
    float *Sg = state + (size_t)h * dk * dv;
    const size_t v_stride = (size_t)n_v_heads * dv;
    const size_t slot_stride = (size_t)n_v_heads * lay.slot;
    const float *slot0 = ws + (size_t)h * lay.slot;

    if (CP < GDR_CMAX) { /* rows / columns the copies never reach: zeros, once */
        for (int idx = tid; idx < dk4 * 2 * GDR_CMAX + GDR_CMAX * dk4 + GDR_CMAX * GDR_CMAX +
                                      GDR_CMAX * GDR_NC;
             idx += GDR_T)
            XT[idx] = 0.0f;
        __syncthreads();
    }
    /* W^T | q^T of one chunk */
    auto stage_xt = [&](const float *slot) {
        const int per = dk4 * nq;
        for (int idx = tid; idx < 2 * per; idx += GDR_T) {
            const int part = idx >= per, rem = idx - part * per;
            const int a = rem / nq, m = rem - a * nq;
            gdr_cp16(XT + a * 2 * GDR_CMAX + part * GDR_CMAX + 4 * m,
                     slot + (part ? lay.qt : lay.wt) + a * CP + 4 * m);
        }
        gdr_cp_commit();
    };
    /* k e^(last - cum), Att^T and this block's columns of U */
    auto stage_rest = [&](const float *slot) {
        for (int idx = tid; idx < CP * dk4 / 4; idx += GDR_T)
            gdr_cp16(Kd + 4 * idx, slot + lay.kd + 4 * idx);
        for (int idx = tid; idx < CP * nq; idx += GDR_T) {
            const int j = idx / nq, m = idx - j * nq;
            gdr_cp16(AtT + j * GDR_CMAX + 4 * m, slot + lay.at + j * CP + 4 * m);
        }
        for (int idx = tid; idx < CP * (GDR_NC / 4); idx += GDR_T) {
            const int i = idx / (GDR_NC / 4), m = idx % (GDR_NC / 4);
            gdr_cp16(Us + i * GDR_NC + 4 * m, slot + lay.u + (size_t)i * lay.dvb + j0 + 4 * m);
        }
        gdr_cp_commit();
    };

    stage_xt(slot0);
    for (int idx = tid; idx < dk4 * GDR_NC; idx += GDR_T) {
        const int a = idx / GDR_NC, j = j0 + idx % GDR_NC;
        S[idx] = (a < dk && j < dv) ? Sg[(size_t)a * dv + j] : 0.0f;
    }

    const int c4 = tid & 7;   /* columns 4 c4 .. 4 c4 + 3 of every tile below */
    const int r8 = tid >> 3;  /* 0 .. 31 */
    for (int ci = 0, c0 = 0; c0 < n; ci++, c0 += C) {
        const int L = min(C, n - c0);
        const float *slot = slot0 + (size_t)ci * slot_stride;
        stage_rest(slot);
        const float decay = slot[lay.dec];
        gdr_cp_wait<1>(); /* this chunk's W^T | q^T */
        __syncthreads();

        /* [W; q e^cum] S: stacked rows 4 r8 .. 4 r8 + 3 (W rows < 64, then q) */
        float acc[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;
        {
            const float *xp = XT + 4 * r8, *sp = S + 4 * c4;
#pragma unroll 4
            for (int a = 0; a < dk; a++) {
                const float4 x = *(const float4 *)(xp + a * 2 * GDR_CMAX);
                const float4 s = *(const float4 *)(sp + a * GDR_NC);
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const float xr = f4_at(x, r);
                    acc[r][0] = fmaf(xr, s.x, acc[r][0]);
                    acc[r][1] = fmaf(xr, s.y, acc[r][1]);
                    acc[r][2] = fmaf(xr, s.z, acc[r][2]);
                    acc[r][3] = fmaf(xr, s.w, acc[r][3]);
                }
            }
        }
        gdr_cp_wait<0>(); /* this chunk's Kd, Att^T, U */
        __syncthreads();  /* ... visible to all; every reader of XT is done */
        if (r8 < GDR_CMAX / 4) {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int i = 4 * r8 + r;
                const float4 u = *(const float4 *)(Us + i * GDR_NC + 4 * c4);
                *(float4 *)(Vn + i * GDR_NC + 4 * c4) = make_float4(
                    u.x - acc[r][0], u.y - acc[r][1], u.z - acc[r][2], u.w - acc[r][3]);
            }
        } else {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int i = 4 * (r8 - GDR_CMAX / 4) + r;
                *(float4 *)(P + i * GDR_NC + 4 * c4) =
                    make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
            }
        }
        __syncthreads();
        if (c0 + C < n) stage_xt(slot + slot_stride); /* overlaps the rest of this chunk */

        /* out rows 2 r8, 2 r8 + 1: P + sum_{j <= i} Att[i][j] Vn_j, j ascending */
        {
            const int i0 = 2 * r8;
            if (i0 < L) {
                float o[2][4];
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) o[r][c] = P[(i0 + r) * GDR_NC + 4 * c4 + c];
#pragma unroll 2
                for (int j = 0; j <= i0; j++) { /* both rows */
                    const float2 at = *(const float2 *)(AtT + j * GDR_CMAX + i0);
                    const float4 vn = *(const float4 *)(Vn + j * GDR_NC + 4 * c4);
                    o[0][0] = fmaf(at.x, vn.x, o[0][0]);
                    o[0][1] = fmaf(at.x, vn.y, o[0][1]);
                    o[0][2] = fmaf(at.x, vn.z, o[0][2]);
                    o[0][3] = fmaf(at.x, vn.w, o[0][3]);
                    o[1][0] = fmaf(at.y, vn.x, o[1][0]);
                    o[1][1] = fmaf(at.y, vn.y, o[1][1]);
                    o[1][2] = fmaf(at.y, vn.z, o[1][2]);
                    o[1][3] = fmaf(at.y, vn.w, o[1][3]);
                }
                if (i0 + 1 < L) { /* j = i0 + 1: row i0 + 1 only */
                    const float at = AtT[(i0 + 1) * GDR_CMAX + i0 + 1];
                    const float4 vn = *(const float4 *)(Vn + (i0 + 1) * GDR_NC + 4 * c4);
                    o[1][0] = fmaf(at, vn.x, o[1][0]);
                    o[1][1] = fmaf(at, vn.y, o[1][1]);
                    o[1][2] = fmaf(at, vn.z, o[1][2]);
                    o[1][3] = fmaf(at, vn.w, o[1][3]);
                }
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int i = i0 + r;
                    if (i >= L) continue;
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int j = j0 + 4 * c4 + c;
                        if (j < dv)
                            frt_st(out, out_dt, (size_t)(c0 + i) * v_stride + (size_t)h * dv + j,
                                   o[r][c]);
                    }
                }
            }
        }
        /* S rows 4 r8 .. 4 r8 + 3: S e^last + sum_i Kd_i (x) Vn_i, i ascending */
        {
            const int a0 = 4 * r8;
            if (a0 < dk) {
                float s[4][4];
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const float4 sv = *(const float4 *)(S + (a0 + r) * GDR_NC + 4 * c4);
                    s[r][0] = sv.x * decay;
                    s[r][1] = sv.y * decay;
                    s[r][2] = sv.z * decay;
                    s[r][3] = sv.w * decay;
                }
#pragma unroll 4
                for (int i = 0; i < L; i++) {
                    const float4 kd = *(const float4 *)(Kd + i * dk4 + a0);
                    const float4 vn = *(const float4 *)(Vn + i * GDR_NC + 4 * c4);
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const float kr = f4_at(kd, r);
                        s[r][0] = fmaf(kr, vn.x, s[r][0]);
                        s[r][1] = fmaf(kr, vn.y, s[r][1]);
                        s[r][2] = fmaf(kr, vn.z, s[r][2]);
                        s[r][3] = fmaf(kr, vn.w, s[r][3]);
                    }
                }
#pragma unroll
                for (int r = 0; r < 4; r++)
                    *(float4 *)(S + (a0 + r) * GDR_NC + 4 * c4) =
                        make_float4(s[r][0], s[r][1], s[r][2], s[r][3]);
            }
        }
        __syncthreads(); /* S complete; Kd, Att^T, U, Vn, P free for the next chunk */
    }

    for (int idx = tid; idx < dk * GDR_NC; idx += GDR_T) {
        const int a = idx / GDR_NC, j = j0 + idx % GDR_NC;
        if (j < dv) Sg[(size_t)a * dv + j] = S[idx];
    }
}

/* ---- launcher ------------------------------------------------------------ */

/* The sizes the kernels take (the checks of the launcher, as a predicate). */
static bool gdr_sizes_ok(int max_n, int n_k_heads, int n_v_heads, int dk, int dv, int chunk)
{
    return max_n >= 0 && n_k_heads > 0 && n_v_heads > 0 && n_v_heads % n_k_heads == 0 &&
           dk >= 1 && dk <= GDR_DKMAX && dv >= 1 && dv <= 65535 * GDR_NC && chunk >= 1 &&
           chunk <= FRT_CUDA_GDR_MAX_CHUNK;
}

extern "C" size_t frt_cuda_gdr_chunked_workspace_bytes(int max_n, int n_k_heads, int n_v_heads,
                                                       int dk, int dv, int chunk)
{
    if (!gdr_sizes_ok(max_n, n_k_heads, n_v_heads, dk, dv, chunk)) return 0;
    const gdr_layout lay = gdr_layout_of(dk, dv, chunk);
    const size_t n_chunks = ((size_t)max_n + (size_t)chunk - 1) / (size_t)chunk;
    return n_chunks * (size_t)n_v_heads * (size_t)lay.slot * sizeof(float);
}

extern "C" int frt_cuda_gdr_chunked(void *stream, void *out, frt_cuda_dtype out_dtype,
                                    float *state, const void *q, const void *k, const void *v,
                                    frt_cuda_dtype in_dtype, const float *g, const float *beta,
                                    const int32_t *d_n, int max_n, int n_k_heads, int n_v_heads,
                                    int dk, int dv, int chunk, void *workspace,
                                    size_t workspace_bytes)
{
    FRT_ARG(out && state && q && k && v && g && beta, "cuda gdr_chunked: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(in_dtype), "cuda gdr_chunked: bad dtype");
    FRT_ARG(max_n >= 0 && n_k_heads > 0 && n_v_heads > 0 && n_v_heads % n_k_heads == 0,
            "cuda gdr_chunked: max_n %d n_k_heads %d n_v_heads %d", max_n, n_k_heads, n_v_heads);
    FRT_ARG(dk >= 1 && dv >= 1 && dv <= 65535 * GDR_NC, "cuda gdr_chunked: dk %d dv %d", dk, dv);
    FRT_ARG(chunk >= 1 && chunk <= FRT_CUDA_GDR_MAX_CHUNK, "cuda gdr_chunked: chunk %d (1..%d)",
            chunk, FRT_CUDA_GDR_MAX_CHUNK);
    if (dk > GDR_DKMAX)
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda gdr_chunked: dk %d (at most %d)", dk,
                         GDR_DKMAX);
    const size_t need =
        frt_cuda_gdr_chunked_workspace_bytes(max_n, n_k_heads, n_v_heads, dk, dv, chunk);
    FRT_ARG((workspace || need == 0) && workspace_bytes >= need,
            "cuda gdr_chunked: workspace of %zu bytes%s, needs %zu", workspace_bytes,
            workspace ? "" : " (NULL)", need);
    FRT_ARG(((uintptr_t)workspace & 15) == 0, "cuda gdr_chunked: workspace not 16-byte aligned");
    if (max_n == 0) return 0; /* nothing to launch (valid without a device) */
    const gdr_layout lay = gdr_layout_of(dk, dv, chunk);
    const size_t smem1 = gdr_intra_smem(lay.dk4), smem2 = gdr_scan_smem(lay.dk4);
    int dev = 0, limit = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (smem1 > (size_t)limit || smem2 > (size_t)limit)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gdr_chunked: dk %d needs %zu / %zu bytes of shared memory, the "
                         "device has %d per block",
                         dk, smem1, smem2, limit);
    FRT_CUDA_TRY(cudaFuncSetAttribute(gdr_intra_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1));
    FRT_CUDA_TRY(cudaFuncSetAttribute(gdr_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)smem2));
    const float scale = (float)(1.0 / sqrt((double)dk));
    const unsigned int n_chunks = (unsigned int)((max_n + chunk - 1) / chunk);
    cudaStream_t s = (cudaStream_t)stream;
    gdr_intra_kernel<<<dim3(n_chunks, (unsigned int)n_v_heads), GDR_T, smem1, s>>>(
        (float *)workspace, q, k, v, in_dtype, g, beta, d_n, max_n, n_k_heads, n_v_heads, dk, dv,
        chunk, scale, lay);
    FRT_LAUNCH_CHECK();
    gdr_scan_kernel<<<dim3((unsigned int)n_v_heads, (unsigned int)((dv + GDR_NC - 1) / GDR_NC)),
                      GDR_T, smem2, s>>>(out, out_dtype, state, (const float *)workspace, d_n,
                                         max_n, n_v_heads, dk, dv, chunk, lay);
    FRT_LAUNCH_CHECK();
    return 0;
}
