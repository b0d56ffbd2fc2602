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
 * Two kernels, the flash-linear-attention split (chunk_gated_delta_rule_fwd).
 * Every matrix product runs on the tensor cores as 3xTF32 (CUTLASS's "fast
 * fp32"): each fp32 operand x is split into tf32 hi = rna(x) and lo = x - hi
 * (exact) and a.b = lo_a hi_b + hi_a lo_b + hi_a hi_b by three mma.sync
 * m16n8k8; the dropped lo_a lo_b and the truncation of lo to tf32 are
 * ~2^-21 relative per product. The tensor cores add an mma's products to its
 * accumulator with one final rounding toward zero, which over a long dot
 * product would bias the sum toward zero, so every k step of 8 goes to a
 * fresh zero accumulator and is added to the running sum in fp32, round to
 * nearest (gdr_mma3). The results stay at the level of the fp32 twin
 * (emulated: ~2.4e-7 from an fp64 reference where the twin is ~3e-7).
 * Elementwise steps (decays, U - W S, S exp(last), the fp64 cumulative sum
 * and exps) are plain fp32 / fp64 as in the twin.
 *
 * 1. gdr_intra_kernel, one block of 8 warps per (chunk, value head), all
 *    chunks at once: everything that does not depend on the carried state.
 *    Warp 0: cum (fp64, one thread, ascending as the twin), exp(cum),
 *    exp(last - cum); warps 1-7 stage k, q, v (cp.async for f32 rows of
 *    16-byte multiples, plain loads otherwise: the same bits). The pairwise
 *    decays exp(cum_i - cum_j) (fp64 exp of the fp64 difference); A = (beta
 *    k) k^T and Att = (q scale) k^T over dk on the tensor cores, the 20
 *    lower-triangular 16 x 8 tiles of each spread over 4 warps (5 tiles
 *    each), times the decays. The unit lower triangular
 *    solve (I + A) X = [beta v | beta k exp(cum)] is blocked by 16 rows:
 *    two warps first invert the four 16 x 16 diagonal blocks (T_b = (I +
 *    A_bb)^-1, forward substitution, one thread per column); then each warp
 *    takes 32 columns of X and for b = 0..3 forms R'_b = R_b - sum_{c<b}
 *    A_bc X_c and X_b = R'_b + (T_b - I) R'_b as tensor-core products (the
 *    identity part added exactly), writing X_b to the workspace as it goes.
 *    Per (chunk, head) it writes W^T and (q exp(cum))^T [dk][chunk], k
 *    exp(cum_last - cum) [chunk][dk], Att^T [chunk][chunk], U [chunk][dv] and
 *    exp(cum_last); rows past the chunk's real L (the tail) are zeros.
 * 2. gdr_scan_kernel, one block of 8 warps per (value head, 32 columns of
 *    dv), serial over the chunks. Its 16 x 32 slice of S per warp lives in
 *    the warp's accumulator registers (fp32) for the whole call; after each
 *    update it is also stored split (tf32 hi | lo) in shared memory as the B
 *    operand of the next chunk's product. Per chunk: [W; q exp(cum)] S (128
 *    x 32 over dk, warp w the 16 rows 16w..), Vn = U - W S (warps 0-3, split
 *    hi | lo to shared memory), out = (q exp(cum)) S + Att Vn (warps 4-7,
 *    accumulating onto their product), S = S exp(cum_last) + Kd^T Vn (every
 *    warp its 16 rows of S). The chunk's workspace arrays come in by
 *    cp.async: W^T | q^T of chunk c + 1 while chunk c finishes its output
 *    and state update, the rest of chunk c while its [W; q] S product runs
 *    (Att^T without the 16-byte pieces above its diagonal).
 *
 * Every element is computed by one warp in a fixed order (no atomics, no
 * split sums across blocks), so the bits depend on the inputs only; every
 * chunk's arithmetic depends on that chunk's rows and the incoming state
 * only, so a prefill split into calls at multiples of `chunk` gives the same
 * bits as one call. The token count is read from device memory (d_n) by both
 * kernels: grids are sized for max_n, blocks of chunks past n exit, the tail
 * chunk has its real rows only, rows t >= n of out are never written.
 * Tested in tests/test_cuda_kernels.c and tests/test_cuda_gdr.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>
#include <stdint.h>

#define GDR_T 256     /* threads per block, both kernels: 8 warps */
#define GDR_CMAX 64   /* largest chunk: the tile sizes below */
#define GDR_DKMAX 128 /* largest dk */
#define GDR_NC 32     /* value columns per state-scan block */
#define GDR_NS 256    /* solve columns per pass of the intra kernel: 8 warps x 32 */
/* Shared memory row strides (floats). Fragment reads touch rows t, t + 4 and
 * columns g (t = lane & 3, g = lane >> 2) or the transpose: a stride of 4 mod
 * 32 (m-major reads) or 8 mod 32 (k-major reads) puts the 32 lanes on 32
 * banks, and 8 mod 32 also keeps the 8-byte accumulator stores conflict-free. */
#define GDR_LDK 132  /* intra: k, q [64][dk] */
#define GDR_LDM 72   /* intra: decays, A^T, Att^T; scan: Att^T [64][64] */
#define GDR_LDX 264  /* intra: the solve's work area [64][256] */
#define GDR_LDT 24   /* intra: (T_b - I)^T [16][16] per diagonal block */
#define GDR_LDXT 136 /* scan: W^T | (q e^cum)^T [128][128], k e^(last - cum) [64][128] */
#define GDR_LDN 40   /* scan: U, Vn [64][32], S [128][32] */

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

/* Shared memory bytes of the two kernels (layouts in the kernels; sized for
 * dk 128 and chunk 64 whatever the arguments). */
static size_t gdr_intra_smem(void)
{
    return (size_t)GDR_CMAX * sizeof(double) +
           ((size_t)4 * GDR_CMAX + (size_t)2 * GDR_CMAX * GDR_LDK + (size_t)3 * GDR_CMAX * GDR_LDM +
            (size_t)4 * 16 * GDR_LDT + (size_t)GDR_CMAX * GDR_LDX) *
               sizeof(float);
}

static size_t gdr_scan_smem(void)
{
    return ((size_t)(GDR_DKMAX + GDR_CMAX) * GDR_LDXT + (size_t)GDR_CMAX * GDR_LDM +
            (size_t)3 * GDR_CMAX * GDR_LDN + (size_t)2 * GDR_DKMAX * GDR_LDN) *
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

/* ---- 3xTF32 on mma.sync m16n8k8 ------------------------------------------
 * Fragments (PTX ISA, mma.m16n8k8 .tf32; g = lane >> 2, t = lane & 3):
 *   A (16 x 8):  a0 (g, t)  a1 (g + 8, t)  a2 (g, t + 4)  a3 (g + 8, t + 4)
 *   B (8 x 8):   b0 (t, g)  b1 (t + 4, g)
 *   C (16 x 8):  c0 (g, 2t) c1 (g, 2t + 1) c2 (g + 8, 2t) c3 (g + 8, 2t + 1) */

/* x rounded to tf32 (10 explicit mantissa bits), to nearest with ties away
 * from zero as cvt.rna.tf32.f32, in two integer operations (x finite). */
__device__ __forceinline__ uint32_t gdr_tf32(float x)
{
    return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}

/* x = hi + lo + O(2^-22 |x|): hi = tf32(x), lo = tf32(x - hi) (x - hi is
 * exact). For operands stored split once. */
__device__ __forceinline__ void gdr_split(float x, uint32_t &hi, uint32_t &lo)
{
    hi = gdr_tf32(x);
    lo = gdr_tf32(x - __uint_as_float(hi));
}

/* The same with lo = x - hi as fp32 bits: the tensor core reads only the
 * tf32 bits of an operand (the low 13 are dropped, as CUTLASS's 3xTF32
 * relies on), so lo is truncated instead of rounded: O(2^-21 |x|), one
 * integer operation less per operand. For operands split in registers. */
__device__ __forceinline__ void gdr_split_r(float x, uint32_t &hi, uint32_t &lo)
{
    hi = gdr_tf32(x);
    lo = __float_as_uint(x - __uint_as_float(hi));
}

/* An A fragment, split. */
struct gdr_frag {
    uint32_t h[4], l[4];
};

__device__ __forceinline__ gdr_frag gdr_frag_of(float a0, float a1, float a2, float a3)
{
    gdr_frag f;
    gdr_split_r(a0, f.h[0], f.l[0]);
    gdr_split_r(a1, f.h[1], f.l[1]);
    gdr_split_r(a2, f.h[2], f.l[2]);
    gdr_split_r(a3, f.h[3], f.l[3]);
    return f;
}

/* The A fragment at (m0, k0) of a matrix stored k-major, M(m, k) = p[k ld +
 * m] with p at (m0, k0); s scales every element (exactly when s = +-1). */
__device__ __forceinline__ gdr_frag gdr_frag_km(const float *p, int ld, int g, int t, float s)
{
    return gdr_frag_of(s * p[t * ld + g], s * p[t * ld + g + 8], s * p[(t + 4) * ld + g],
                       s * p[(t + 4) * ld + g + 8]);
}

__device__ __forceinline__ void gdr_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* d = A B (the accumulator starts at zero). */
__device__ __forceinline__ void gdr_mma0(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1)
{
    const float z = 0.0f;
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}

/* acc[j] += A B_j over one k step of 8 for the first cnt of NT column tiles
 * (cnt warp-uniform). The tensor cores sum the products of one mma and its
 * accumulator with a single final rounding toward zero; accumulating a long
 * dot product in the mma accumulator would bias it toward zero by about an
 * ulp per step. So each k step goes to a fresh temporary (small products
 * first, then the big one: one truncation at the scale of this step's partial
 * sum, whose sign varies) and is added to acc in fp32, round to nearest. The
 * three mma of a tile depend on each other: the tiles are interleaved. */
template <int NT>
__device__ __forceinline__ void gdr_mma3(float (&acc)[NT][4], const gdr_frag &a,
                                         const uint32_t (&bh)[NT][2],
                                         const uint32_t (&bl)[NT][2], int cnt)
{
    float t[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++)
        if (j < cnt) gdr_mma0(t[j], a.l, bh[j][0], bh[j][1]);
#pragma unroll
    for (int j = 0; j < NT; j++)
        if (j < cnt) gdr_mma(t[j], a.h, bl[j][0], bl[j][1]);
#pragma unroll
    for (int j = 0; j < NT; j++)
        if (j < cnt) {
            gdr_mma(t[j], a.h, bh[j][0], bh[j][1]);
            acc[j][0] += t[j][0];
            acc[j][1] += t[j][1];
            acc[j][2] += t[j][2];
            acc[j][3] += t[j][3];
        }
}

/* B fragments of NT column tiles of a k-major fp32 matrix, B(k, n) = p[k ld
 * + n] with p at (k0, n0), split. */
template <int NT>
__device__ __forceinline__ void gdr_bfrag_km(const float *p, int ld, int g, int t,
                                             uint32_t (&bh)[NT][2], uint32_t (&bl)[NT][2])
{
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const float *x = p + t * ld + 8 * j + g;
        gdr_split_r(x[0], bh[j][0], bl[j][0]);
        gdr_split_r(x[4 * ld], bh[j][1], bl[j][1]);
    }
}

/* The same from a matrix stored split (hi and lo arrays, same layout). */
template <int NT>
__device__ __forceinline__ void gdr_bfrag_split(const uint32_t *ph, const uint32_t *pl, int ld,
                                                int g, int t, uint32_t (&bh)[NT][2],
                                                uint32_t (&bl)[NT][2])
{
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int o = t * ld + 8 * j + g;
        bh[j][0] = ph[o];
        bh[j][1] = ph[o + 4 * ld];
        bl[j][0] = pl[o];
        bl[j][1] = pl[o + 4 * ld];
    }
}

/* ---- 1. intra-chunk: decays, A, Att, the UT solve ------------------------ */

__global__ __launch_bounds__(GDR_T, 1) void gdr_intra_kernel(
    float *__restrict__ ws, const void *__restrict__ q, const void *__restrict__ k,
    const void *__restrict__ v, int in_dt, const float *__restrict__ g,
    const float *__restrict__ beta, const int32_t *d_n, int max_n, int n_k_heads, int n_v_heads,
    int dk, int dv, int C, float scale, int vec, gdr_layout lay)
{
    extern __shared__ __align__(16) double smem_d[];
    double *cum = smem_d;                        /* [64] in-chunk cumulative log-decay */
    float *gs = (float *)(cum + GDR_CMAX);       /* [64] g */
    float *bsm = gs + GDR_CMAX;                  /* [64] beta */
    float *ecum = bsm + GDR_CMAX;                /* [64] exp(cum_i) */
    float *elast = ecum + GDR_CMAX;              /* [64] exp(cum_last - cum_i) */
    float *Ks = elast + GDR_CMAX;                /* [64][LDK] k */
    float *Qs = Ks + GDR_CMAX * GDR_LDK;         /* [64][LDK] q */
    float *E = Qs + GDR_CMAX * GDR_LDK;          /* [64][LDM] exp(cum_i - cum_j), j <= i < L */
    float *AT = E + GDR_CMAX * GDR_LDM;          /* [64][LDM] A^T: AT[j][i] = A[i][j] */
    float *AttT = AT + GDR_CMAX * GDR_LDM;       /* [64][LDM] Att^T */
    float *Tb = AttT + GDR_CMAX * GDR_LDM;       /* [4][16][LDT] Tb[b][c][r] = T_b[r][c] - (r == c) */
    float *Xs = Tb + 4 * 16 * GDR_LDT;           /* [64][LDX] the solve's columns */

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int gr = lane >> 2, tc = lane & 3; /* fragment row / column of the lane */
    const int ci = blockIdx.x, h = blockIdx.y, kh = h / (n_v_heads / n_k_heads);
    const int n = frt_dyn_n(d_n, max_n);
    const int c0 = ci * C;
    if (c0 >= n) return;
    const int L = min(C, n - c0);
    const int CP = lay.cp, dk4 = lay.dk4, dvb = lay.dvb;
    const int dk8 = (dk + 7) & ~7;          /* k steps of the products */
    const int ns = dvb + ((dk + 31) & ~31); /* solve columns: U (dvb), then W */
    const size_t qk_stride = (size_t)n_k_heads * dk, v_stride = (size_t)n_v_heads * dv;
    float *slot = ws + ((size_t)ci * n_v_heads + h) * (size_t)lay.slot;

    /* 1. stage. Warp 0: g, beta, cum (one thread, ascending, as the twin),
     * exp(cum), exp(last - cum). Warps 1-7: k and q [64][dk8] and v for the
     * first solve pass's U columns; rows >= L and columns past dk, dv are
     * zeros. f32 inputs with 16-byte rows come by cp.async (all copies in
     * flight at once), others by plain loads (16 per thread in flight). q is
     * scaled where it is used (the same rounding either way). */
    if (warp == 0) {
        for (int i = lane; i < GDR_CMAX; i += 32) {
            const bool live = i < L;
            gs[i] = live ? g[(size_t)(c0 + i) * n_v_heads + h] : 0.0f;
            bsm[i] = live ? beta[(size_t)(c0 + i) * n_v_heads + h] : 0.0f;
        }
        __syncwarp();
        if (lane == 0) {
            double acc = 0;
#pragma unroll 8
            for (int i = 0; i < GDR_CMAX; i++) {
                if (i < L) acc += (double)gs[i];
                cum[i] = acc;
            }
        }
        __syncwarp();
        for (int i = lane; i < GDR_CMAX; i += 32) {
            ecum[i] = i < L ? (float)exp(cum[i]) : 0.0f;
            elast[i] = i < L ? (float)exp(cum[L - 1] - cum[i]) : 0.0f;
        }
    } else {
        const int w7 = warp - 1;              /* rows w7, w7 + 7, ... */
        const int nu = min(dvb, GDR_NS);      /* v columns staged: a multiple of 32 */
        const int nvl = min(dv, nu);          /* ... of which real */
        if (vec) {
            const float *kf = (const float *)k + (size_t)kh * dk, *qf = (const float *)q + (size_t)kh * dk;
            const float *vf = (const float *)v + (size_t)h * dv;
            for (int i = w7; i < GDR_CMAX; i += 7) {
                if (i < L) {
                    const size_t rq = (size_t)(c0 + i) * qk_stride, rv = (size_t)(c0 + i) * v_stride;
                    for (int m = lane; 4 * m < dk; m += 32) {
                        gdr_cp16(Ks + i * GDR_LDK + 4 * m, kf + rq + 4 * m);
                        gdr_cp16(Qs + i * GDR_LDK + 4 * m, qf + rq + 4 * m);
                    }
                    for (int m = lane; 4 * m < nvl; m += 32)
                        gdr_cp16(Xs + i * GDR_LDX + 4 * m, vf + rv + 4 * m);
                }
                for (int a = (i < L ? dk : 0) + lane; a < dk8; a += 32) {
                    Ks[i * GDR_LDK + a] = 0.0f;
                    Qs[i * GDR_LDK + a] = 0.0f;
                }
                for (int c = (i < L ? nvl : 0) + lane; c < nu; c += 32) Xs[i * GDR_LDX + c] = 0.0f;
            }
            gdr_cp_commit();
            gdr_cp_wait<0>();
        } else {
#pragma unroll 1
            for (int i0 = w7; i0 < GDR_CMAX; i0 += 14) {
                float kv[2][4], qv[2][4];
#pragma unroll
                for (int r = 0; r < 2; r++) /* all loads first */
#pragma unroll
                    for (int m = 0; m < 4; m++) {
                        const int i = i0 + 7 * r, a = lane + 32 * m;
                        kv[r][m] = 0.0f;
                        qv[r][m] = 0.0f;
                        if (i < L && a < dk) {
                            const size_t src = (size_t)(c0 + i) * qk_stride + (size_t)kh * dk + a;
                            kv[r][m] = frt_ld(k, in_dt, src);
                            qv[r][m] = frt_ld(q, in_dt, src);
                        }
                    }
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int m = 0; m < 4; m++) {
                        const int i = i0 + 7 * r, a = lane + 32 * m;
                        if (i < GDR_CMAX && a < dk8) {
                            Ks[i * GDR_LDK + a] = kv[r][m];
                            Qs[i * GDR_LDK + a] = qv[r][m];
                        }
                    }
            }
#pragma unroll 1
            for (int i0 = w7; i0 < GDR_CMAX; i0 += 14) {
                float vv[2][8];
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int m = 0; m < 8; m++) {
                        const int i = i0 + 7 * r, c = lane + 32 * m;
                        vv[r][m] = (i < L && c < nvl) ? frt_ld(v, in_dt,
                                                              (size_t)(c0 + i) * v_stride +
                                                                  (size_t)h * dv + c)
                                                      : 0.0f;
                    }
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int m = 0; m < 8; m++) {
                        const int i = i0 + 7 * r, c = lane + 32 * m;
                        if (i < GDR_CMAX && c < nu) Xs[i * GDR_LDX + c] = vv[r][m];
                    }
            }
        }
    }
    __syncthreads();

    /* 2. the decays (fp64 exp of fp64 differences, as the twin); A^T and
     * Att^T cleared (the tiles above the diagonal are not computed); (q scale
     * e^cum)^T, k e^(last - cum) and exp(cum_last) to the workspace */
#pragma unroll 1
    for (int idx = tid; idx < GDR_CMAX * GDR_CMAX; idx += GDR_T) {
        const int i = idx >> 6, j = idx & (GDR_CMAX - 1);
        E[i * GDR_LDM + j] = (j <= i && i < L) ? (float)exp(cum[i] - cum[j]) : 0.0f;
    }
    for (int idx = tid; idx < 2 * GDR_CMAX * GDR_LDM; idx += GDR_T) AT[idx] = 0.0f;
    {
        float *wq = slot + lay.qt, *wk = slot + lay.kd;
        for (int i4 = warp; 4 * i4 < CP; i4 += 8) /* float4 along the rows of (q e^cum)^T */
            for (int a = lane; a < dk4; a += 32) {
                const int i = 4 * i4;
                float4 o;
                o.x = Qs[(i + 0) * GDR_LDK + a] * scale * ecum[i + 0];
                o.y = Qs[(i + 1) * GDR_LDK + a] * scale * ecum[i + 1];
                o.z = Qs[(i + 2) * GDR_LDK + a] * scale * ecum[i + 2];
                o.w = Qs[(i + 3) * GDR_LDK + a] * scale * ecum[i + 3];
                *(float4 *)(wq + (size_t)a * CP + i) = o;
            }
        for (int i = warp; i < CP; i += 8)
            for (int a = lane; a < dk4; a += 32) wk[i * dk4 + a] = Ks[i * GDR_LDK + a] * elast[i];
        if (tid == 0) slot[lay.dec] = (float)exp(cum[L - 1]);
    }
    __syncthreads();

    /* 3. A (warps 0-3) and Att (warps 4-7) on the tensor cores: the lower
     * triangle's 16 x 8 tiles (m-tile r needs n-tiles 0 .. 2r + 1: 20 tiles)
     * as 5 per warp: (m 3, n 0-4); (m 3, n 5-7) + (m 0, n 0-1); (m 2, n 0-4);
     * (m 2, n 5) + (m 1, n 0-3). The A rows are beta k (the twin's W_i = k_i
     * beta_i, rounded the same) or q scale, the B columns k. */
    {
        const int p = warp >> 2, sub = warp & 3;
        const float *Xa = p ? Qs : Ks;
        float *dst = p ? AttT : AT;
#pragma unroll 1
        for (int s = 0; s < 2; s++) {
            int mt, nb, cnt;
            if (s == 0) {
                mt = 3 - (sub >> 1);
                nb = (sub & 1) ? 5 : 0;
                cnt = (sub & 1) ? (sub == 1 ? 3 : 1) : 5;
            } else {
                if (!(sub & 1)) break;
                mt = sub == 1 ? 0 : 1;
                nb = 0;
                cnt = sub == 1 ? 2 : 4;
            }
            const int r0 = 16 * mt;
            const float b0 = p ? scale : bsm[r0 + gr], b1 = p ? scale : bsm[r0 + gr + 8];
            float acc[5][4];
#pragma unroll
            for (int j = 0; j < 5; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll 2
            for (int k0 = 0; k0 < dk8; k0 += 8) {
                const float *xa = Xa + (r0 + gr) * GDR_LDK + k0 + tc;
                const gdr_frag fa = gdr_frag_of(xa[0] * b0, xa[8 * GDR_LDK] * b1, xa[4] * b0,
                                                xa[8 * GDR_LDK + 4] * b1);
                uint32_t bh[5][2], bl[5][2];
#pragma unroll
                for (int j = 0; j < 5; j++) {
                    bh[j][0] = bh[j][1] = bl[j][0] = bl[j][1] = 0u;
                    if (j < cnt) { /* B(a, j') = k_j'[a]: n-major */
                        const float *kb = Ks + (8 * (nb + j) + gr) * GDR_LDK + k0 + tc;
                        gdr_split_r(kb[0], bh[j][0], bl[j][0]);
                        gdr_split_r(kb[4], bh[j][1], bl[j][1]);
                    }
                }
                gdr_mma3<5>(acc, fa, bh, bl, cnt);
            }
#pragma unroll
            for (int j = 0; j < 5; j++) {
                if (j >= cnt) continue;
                const int jc = 8 * (nb + j) + 2 * tc;
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int i = r0 + gr + 8 * hr;
                    const float2 e = *(const float2 *)(E + i * GDR_LDM + jc);
                    const float v0 = acc[j][2 * hr] * e.x, v1 = acc[j][2 * hr + 1] * e.y;
                    dst[jc * GDR_LDM + i] = (p ? jc <= i : jc < i) ? v0 : 0.0f;
                    dst[(jc + 1) * GDR_LDM + i] = (p ? jc + 1 <= i : jc + 1 < i) ? v1 : 0.0f;
                }
            }
        }
    }
    __syncthreads();

    /* 4. warps 0-1: T_b = (I + A_bb)^-1 of the four diagonal 16 x 16 blocks,
     * one thread per column c of block b (forward substitution on e_c,
     * right-looking, each element summing j ascending); stored without the
     * unit diagonal, k-major (the A operand of step 5). Warps 2-7: Att^T to
     * the workspace. */
    if (tid < 64) {
        const int b = tid >> 4, c = tid & 15, r0 = 16 * b;
        float x[16];
#pragma unroll
        for (int r = 0; r < 16; r++) x[r] = r == c ? 1.0f : 0.0f;
#pragma unroll
        for (int j = 0; j < 15; j++) {
            const float xj = x[j];
            const float *Aj = AT + (r0 + j) * GDR_LDM + r0; /* A[r0 + r][r0 + j] = Aj[r] */
#pragma unroll
            for (int m = (j + 1) >> 2; m < 4; m++) {
                const float4 a4 = gdr_lds4(Aj + 4 * m);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (4 * m + e > j) x[4 * m + e] = fmaf(-f4_at(a4, e), xj, x[4 * m + e]);
            }
        }
        float *tb = Tb + (b * 16 + c) * GDR_LDT;
#pragma unroll
        for (int m = 0; m < 4; m++)
            *(float4 *)(tb + 4 * m) =
                make_float4(4 * m + 0 == c ? 0.0f : x[4 * m + 0], 4 * m + 1 == c ? 0.0f : x[4 * m + 1],
                            4 * m + 2 == c ? 0.0f : x[4 * m + 2], 4 * m + 3 == c ? 0.0f : x[4 * m + 3]);
    } else {
        float *wa = slot + lay.at;
        for (int j = warp - 2; j < CP; j += 6)
            for (int i = lane; i < CP; i += 32) wa[j * CP + i] = AttT[j * GDR_LDM + i];
    }
    __syncthreads();

    /* 5. (I + A) X = R, R = [beta v (dv, padded to dvb) | beta k exp(cum)
     * (dk, padded to 32)], blocked by 16 rows: each warp owns 32 columns of a
     * pass (no block barriers below). For b = 0..3: R'_b = R_b - sum_{c < b}
     * A_bc X_c, X_b = R'_b + (T_b - I) R'_b, then rows b of U or W^T to the
     * workspace. Rows >= L are zeros and stay zeros (their blocks skipped). */
    float *wu = slot + lay.u, *ww = slot + lay.wt;
#pragma unroll 1
    for (int gc0 = 0; gc0 < ns; gc0 += GDR_NS) {
        const int wc0 = gc0 + 32 * warp; /* the warp's first solve column */
        if (wc0 >= ns) continue;
        float *xw = Xs + 32 * warp;
        const bool isU = wc0 < dvb;
        if (isU) { /* beta v; the first pass's v was loaded in step 1 */
            const int c = wc0 + lane;
            if (gc0 == 0) {
#pragma unroll 8
                for (int i = 0; i < GDR_CMAX; i++) xw[i * GDR_LDX + lane] *= bsm[i];
            } else {
#pragma unroll 8
                for (int i = 0; i < GDR_CMAX; i++)
                    xw[i * GDR_LDX + lane] =
                        (i < L && c < dv) ? frt_ld(v, in_dt,
                                                   (size_t)(c0 + i) * v_stride + (size_t)h * dv + c) *
                                                bsm[i]
                                          : 0.0f;
            }
        } else { /* (beta k) exp(cum), as the twin rounds it */
            const int a = wc0 - dvb + lane;
#pragma unroll 8
            for (int i = 0; i < GDR_CMAX; i++)
                xw[i * GDR_LDX + lane] = a < dk ? Ks[i * GDR_LDK + a] * bsm[i] * ecum[i] : 0.0f;
        }
        __syncwarp();
#pragma unroll 1
        for (int b = 0; b < 4; b++) {
            const int r0 = 16 * b;
            float x2[4][4];
            if (r0 < L) {
                float acc[4][4];
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int hr = 0; hr < 2; hr++) {
                        const float2 r =
                            *(const float2 *)(xw + (r0 + gr + 8 * hr) * GDR_LDX + 8 * j + 2 * tc);
                        acc[j][2 * hr] = r.x;
                        acc[j][2 * hr + 1] = r.y;
                    }
#pragma unroll 2
                for (int k0 = 0; k0 < r0; k0 += 8) { /* R_b - A[b rows][0, r0) X[0, r0) */
                    const gdr_frag fa =
                        gdr_frag_km(AT + k0 * GDR_LDM + r0, GDR_LDM, gr, tc, -1.0f);
                    uint32_t bh[4][2], bl[4][2];
                    gdr_bfrag_km<4>(xw + k0 * GDR_LDX, GDR_LDX, gr, tc, bh, bl);
                    gdr_mma3<4>(acc, fa, bh, bl, 4);
                }
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int hr = 0; hr < 2; hr++) {
                        *(float2 *)(xw + (r0 + gr + 8 * hr) * GDR_LDX + 8 * j + 2 * tc) =
                            make_float2(acc[j][2 * hr], acc[j][2 * hr + 1]);
                        x2[j][2 * hr] = acc[j][2 * hr];
                        x2[j][2 * hr + 1] = acc[j][2 * hr + 1];
                    }
                __syncwarp(); /* R'_b complete */
#pragma unroll
                for (int kk = 0; kk < 16; kk += 8) { /* + (T_b - I) R'_b */
                    const gdr_frag fa =
                        gdr_frag_km(Tb + (b * 16 + kk) * GDR_LDT, GDR_LDT, gr, tc, 1.0f);
                    uint32_t bh[4][2], bl[4][2];
                    gdr_bfrag_km<4>(xw + (r0 + kk) * GDR_LDX, GDR_LDX, gr, tc, bh, bl);
                    gdr_mma3<4>(x2, fa, bh, bl, 4);
                }
                __syncwarp(); /* every lane has read R'_b */
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int hr = 0; hr < 2; hr++)
                        *(float2 *)(xw + (r0 + gr + 8 * hr) * GDR_LDX + 8 * j + 2 * tc) =
                            make_float2(x2[j][2 * hr], x2[j][2 * hr + 1]);
                __syncwarp(); /* X_b complete for the next blocks */
            } else {
#pragma unroll
                for (int j = 0; j < 4; j++) x2[j][0] = x2[j][1] = x2[j][2] = x2[j][3] = 0.0f;
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int i = r0 + gr + 8 * hr, col = wc0 + 8 * j + 2 * tc;
                    if (i >= CP) continue;
                    if (isU) {
                        *(float2 *)(wu + (size_t)i * dvb + col) =
                            make_float2(x2[j][2 * hr], x2[j][2 * hr + 1]);
                    } else {
                        const int a = col - dvb;
                        if (a < dk4) ww[(size_t)a * CP + i] = x2[j][2 * hr];
                        if (a + 1 < dk4) ww[(size_t)(a + 1) * CP + i] = x2[j][2 * hr + 1];
                    }
                }
        }
    }
}

/* ---- 2. the state scan over the chunks ---------------------------------- */

__global__ __launch_bounds__(GDR_T, 1) void gdr_scan_kernel(
    void *out, int out_dt, float *state, const float *__restrict__ ws, const int32_t *d_n,
    int max_n, int n_v_heads, int dk, int dv, int C, gdr_layout lay)
{
    extern __shared__ __align__(16) float smem_f[];
    float *XT = smem_f;                             /* [128][LDXT] W^T | (q e^cum)^T */
    float *Kd = XT + GDR_DKMAX * GDR_LDXT;          /* [64][LDXT] k e^(last - cum) */
    float *AtT = Kd + GDR_CMAX * GDR_LDXT;          /* [64][LDM] Att^T */
    float *Us = AtT + GDR_CMAX * GDR_LDM;           /* [64][LDN] U, this block's columns */
    uint32_t *Vh = (uint32_t *)(Us + GDR_CMAX * GDR_LDN); /* [64][LDN] Vn, tf32 hi */
    uint32_t *Vl = Vh + GDR_CMAX * GDR_LDN;         /* [64][LDN] Vn, tf32 lo */
    uint32_t *Sh = Vl + GDR_CMAX * GDR_LDN;         /* [128][LDN] S, tf32 hi */
    uint32_t *Sl = Sh + GDR_DKMAX * GDR_LDN;        /* [128][LDN] S, tf32 lo */

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int gr = lane >> 2, tc = lane & 3;
    const int h = blockIdx.x, j0 = blockIdx.y * GDR_NC;
    const int n = frt_dyn_n(d_n, max_n);
    if (n == 0) return;
    const int dk4 = lay.dk4, CP = lay.cp, nq = lay.cp / 4, dk8 = (dk + 7) & ~7;
    float *Sg = state + (size_t)h * dk * dv;
    const size_t v_stride = (size_t)n_v_heads * dv;
    const size_t slot_stride = (size_t)n_v_heads * lay.slot;
    const float *slot0 = ws + (size_t)h * lay.slot;

    /* zeros where the copies never write: Att^T above its diagonal always,
     * everything staged when the chunk or dk is short */
    {
        float *z0 = (CP < GDR_CMAX || dk4 < GDR_DKMAX) ? XT : AtT;
        const int nz = (int)(Us + GDR_CMAX * GDR_LDN - z0);
        for (int idx = tid; idx < nz; idx += GDR_T) z0[idx] = 0.0f;
        __syncthreads();
    }
    /* W^T | q^T of one chunk */
    auto stage_xt = [&](const float *slot) {
        const int per = dk4 * nq;
        for (int idx = tid; idx < 2 * per; idx += GDR_T) {
            const int part = idx >= per, rem = idx - part * per;
            const int a = rem / nq, m = rem - a * nq;
            gdr_cp16(XT + a * GDR_LDXT + part * GDR_CMAX + 4 * m,
                     slot + (part ? lay.qt : lay.wt) + a * CP + 4 * m);
        }
        gdr_cp_commit();
    };
    /* k e^(last - cum), Att^T (on and below its diagonal) and this block's
     * columns of U */
    auto stage_rest = [&](const float *slot) {
        const int nk4 = dk4 / 4;
        for (int idx = tid; idx < CP * nk4; idx += GDR_T) {
            const int i = idx / nk4, m = idx - i * nk4;
            gdr_cp16(Kd + i * GDR_LDXT + 4 * m, slot + lay.kd + i * dk4 + 4 * m);
        }
        for (int idx = tid; idx < CP * nq; idx += GDR_T) {
            const int j = idx / nq, m = idx - j * nq;
            if (4 * m + 3 >= j) gdr_cp16(AtT + j * GDR_LDM + 4 * m, slot + lay.at + j * CP + 4 * m);
        }
        for (int idx = tid; idx < CP * (GDR_NC / 4); idx += GDR_T) {
            const int i = idx / (GDR_NC / 4), m = idx % (GDR_NC / 4);
            gdr_cp16(Us + i * GDR_LDN + 4 * m, slot + lay.u + (size_t)i * lay.dvb + j0 + 4 * m);
        }
        gdr_cp_commit();
    };

    stage_xt(slot0);

    /* this warp's rows sr0 .. sr0 + 15 of S (32 columns), in the C layout of
     * four m16n8 tiles, for the whole call */
    const int sr0 = 16 * warp;
    float sacc[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int a = sr0 + gr + 8 * (e >> 1), c = j0 + 8 * j + 2 * tc + (e & 1);
            sacc[j][e] = (a < dk && c < dv) ? Sg[(size_t)a * dv + c] : 0.0f;
        }
    /* S split to shared memory: the B operand of the next product */
    auto put_s = [&]() {
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int o = (sr0 + gr + 8 * hr) * GDR_LDN + 8 * j + 2 * tc;
                uint32_t h0, l0, h1, l1;
                gdr_split(sacc[j][2 * hr], h0, l0);
                gdr_split(sacc[j][2 * hr + 1], h1, l1);
                *(uint2 *)(Sh + o) = make_uint2(h0, h1);
                *(uint2 *)(Sl + o) = make_uint2(l0, l1);
            }
    };
    put_s();

    for (int ci = 0, c0 = 0; c0 < n; ci++, c0 += C) {
        const int L = min(C, n - c0);
        const float *slot = slot0 + (size_t)ci * slot_stride;
        stage_rest(slot);
        const float decay = slot[lay.dec];
        gdr_cp_wait<1>(); /* this chunk's W^T | q^T */
        __syncthreads();  /* ... visible to all; so is S */

        /* [W; q e^cum] S, rows 16 warp .. (W rows 0..63, then q rows) */
        float acc[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll 2
        for (int k0 = 0; k0 < dk8; k0 += 8) {
            const gdr_frag fa = gdr_frag_km(XT + k0 * GDR_LDXT + 16 * warp, GDR_LDXT, gr, tc, 1.0f);
            uint32_t bh[4][2], bl[4][2];
            gdr_bfrag_split<4>(Sh + k0 * GDR_LDN, Sl + k0 * GDR_LDN, GDR_LDN, gr, tc, bh, bl);
            gdr_mma3<4>(acc, fa, bh, bl, 4);
        }
        gdr_cp_wait<0>(); /* this chunk's Kd, Att^T, U */
        __syncthreads();  /* ... visible to all; every reader of XT is done */
        if (c0 + C < n) stage_xt(slot + slot_stride); /* overlaps the rest of this chunk */

        if (warp < 4) { /* Vn = U - W S, split */
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int o = (16 * warp + gr + 8 * hr) * GDR_LDN + 8 * j + 2 * tc;
                    const float2 u = *(const float2 *)(Us + o);
                    uint32_t h0, l0, h1, l1;
                    gdr_split(u.x - acc[j][2 * hr], h0, l0);
                    gdr_split(u.y - acc[j][2 * hr + 1], h1, l1);
                    *(uint2 *)(Vh + o) = make_uint2(h0, h1);
                    *(uint2 *)(Vl + o) = make_uint2(l0, l1);
                }
        }
        __syncthreads(); /* Vn complete */

        if (warp >= 4) { /* out rows m0 ..: (q e^cum) S + Att Vn (j <= i < m0 + 16) */
            const int m0 = 16 * (warp - 4);
            if (m0 < L) {
#pragma unroll 2
                for (int k0 = 0; k0 < m0 + 16; k0 += 8) {
                    const gdr_frag fa = gdr_frag_km(AtT + k0 * GDR_LDM + m0, GDR_LDM, gr, tc, 1.0f);
                    uint32_t bh[4][2], bl[4][2];
                    gdr_bfrag_split<4>(Vh + k0 * GDR_LDN, Vl + k0 * GDR_LDN, GDR_LDN, gr, tc, bh,
                                       bl);
                    gdr_mma3<4>(acc, fa, bh, bl, 4);
                }
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int i = m0 + gr + 8 * (e >> 1), c = j0 + 8 * j + 2 * tc + (e & 1);
                        if (i < L && c < dv)
                            frt_st(out, out_dt, (size_t)(c0 + i) * v_stride + (size_t)h * dv + c,
                                   acc[j][e]);
                    }
            }
        }
        if (sr0 < dk) { /* S rows sr0 ..: S e^last + Kd^T Vn (i < L) */
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) sacc[j][e] *= decay;
            const int kend = (L + 7) & ~7;
#pragma unroll 2
            for (int k0 = 0; k0 < kend; k0 += 8) {
                const gdr_frag fa = gdr_frag_km(Kd + k0 * GDR_LDXT + sr0, GDR_LDXT, gr, tc, 1.0f);
                uint32_t bh[4][2], bl[4][2];
                gdr_bfrag_split<4>(Vh + k0 * GDR_LDN, Vl + k0 * GDR_LDN, GDR_LDN, gr, tc, bh, bl);
                gdr_mma3<4>(sacc, fa, bh, bl, 4);
            }
            put_s();
        }
        __syncthreads(); /* S complete; Kd, Att^T, U, Vn free for the next chunk */
    }

    if (sr0 < dk) {
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int a = sr0 + gr + 8 * (e >> 1), c = j0 + 8 * j + 2 * tc + (e & 1);
                if (a < dk && c < dv) Sg[(size_t)a * dv + c] = sacc[j][e];
            }
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
    const size_t smem1 = gdr_intra_smem(), smem2 = gdr_scan_smem();
    int dev = 0, limit = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (smem1 > (size_t)limit || smem2 > (size_t)limit)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "cuda gdr_chunked: needs %zu / %zu bytes of shared memory, the device "
                         "has %d per block",
                         smem1, smem2, limit);
    FRT_CUDA_TRY(cudaFuncSetAttribute(gdr_intra_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1));
    FRT_CUDA_TRY(cudaFuncSetAttribute(gdr_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)smem2));
    const float scale = (float)(1.0 / sqrt((double)dk));
    const unsigned int n_chunks = (unsigned int)((max_n + chunk - 1) / chunk);
    cudaStream_t s = (cudaStream_t)stream;
    /* f32 rows of 16-byte multiples at 16-byte aligned addresses: cp.async staging */
    const int vec = in_dtype == FRT_CUDA_F32 && dk % 4 == 0 && dv % 4 == 0 &&
                    (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) & 15) == 0;
    gdr_intra_kernel<<<dim3(n_chunks, (unsigned int)n_v_heads), GDR_T, smem1, s>>>(
        (float *)workspace, q, k, v, in_dtype, g, beta, d_n, max_n, n_k_heads, n_v_heads, dk, dv,
        chunk, scale, vec, lay);
    FRT_LAUNCH_CHECK();
    gdr_scan_kernel<<<dim3((unsigned int)n_v_heads, (unsigned int)((dv + GDR_NC - 1) / GDR_NC)),
                      GDR_T, smem2, s>>>(out, out_dtype, state, (const float *)workspace, d_n,
                                         max_n, n_v_heads, dk, dv, chunk, lay);
    FRT_LAUNCH_CHECK();
    return 0;
}
