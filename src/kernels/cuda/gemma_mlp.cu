/*
 * kernels/cuda/gemma_mlp.cu - Gemma's MLP block over a few rows (the policy
 * expert's action tokens) as ONE cooperative launch: gate | up with GeGLU,
 * down, the gated residual and the next layer's norm (frt_cuda_gemma_mlp,
 * kernels_policy_cuda.h). At 50 rows the products are bound by the latency
 * of their launches, not by their 25 MB of weights: cuBLASLt's gate | up,
 * the GeGLU, down and its split-k reduce, and the add + norm were five
 * launches of 3-10 us each. Here they are three phases of one grid (one
 * block of 8 warps an SM, every block resident: a cooperative launch)
 * separated by grid barriers:
 *
 *  1. gate | up + GeGLU. x = hb (bf16 [rows, W]) is staged once per block
 *     in shared memory, rows padded with zeros to NT x 8 (NT <= 8 tiles of
 *     8 rows). A unit of work is 8 columns of h: an m16n8k16 mma's A tile
 *     is 8 rows of gate_proj over 8 rows of up_proj (so one lane's
 *     accumulators hold gate and up of the same column and x row), B an 8-row
 *     tile of x. The block's 8 warps split the unit's k range (W / 8 each);
 *     their partial sums meet in shared memory and are added in warp order
 *     0..7; h = bf16(gelu_tanh(gate) * up) (f32 arithmetic, as
 *     frt_cuda_geglu_tanh) goes to the work buffer. Blocks take units
 *     blockIdx.x, + grid, ...; the next unit's weights are in flight while
 *     the sums of the current one are added and stored.
 *  2. down. A unit is 128 output columns (one m16 tile a warp) over a chunk
 *     of 256 of h's columns (the block stages h[:, chunk] in shared
 *     memory); each warp stores its f32 partial sums to the work buffer,
 *     one slab a chunk. The first unit's weights are loaded before the
 *     barrier that ends phase 1 (they never depend on it).
 *  3. the rows. Block r sums row r's slabs in chunk order 0, 1, ..., adds
 *     the residual x += y * gate (frt_residual_add: the bits of
 *     pi0_cuda_residual for a given y), and writes the norm of the new row
 *     (fp64 sum of squares, norm_inv_rms, the formulas of frt_cuda_add_norm)
 *     to out.
 *
 * The k order inside an mma is permuted the same way for A and B (each lane
 * loads 16 contiguous bytes of a weight row and of an x row: the k-permuted
 * fragments of the decode GEMV, gemv.cu), so a product's sum is over the
 * same terms as the plain one; every sum runs in a fixed order, so the bits
 * depend on the shape alone. Weights are read once through the
 * non-allocating load of the GEMV (gemv_ld_w). Twins: the products, GeGLU
 * (frt_cpu_geglu_tanh), the residual and frt_cpu_rmsnorm_ada /
 * frt_cpu_rmsnorm; tested in tests/test_cuda_gemma_mlp.c.
 */
#include <cooperative_groups.h>

#include "kernels/cuda/gemv_block.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/residual_util.h"

namespace cg = cooperative_groups;

#define GM_WARPS 8
#define GM_THREADS (GM_WARPS * 32)
#define GM_PAD 32  /* bf16 elements after each staged row: rows 64 bytes apart mod 128 (no bank conflicts) */
#define GM_KB 4    /* k-blocks of 32 a warp holds per matrix in phase 1 (W = 1024 a multiple) */
#define GM_KC 256  /* phase 2: h's columns a unit */
#define GM_MC 128  /* phase 2: output columns a unit (16 a warp) */
#define GM_NT_MAX 8
#define GM_RV 4    /* phase 3: float4 columns a thread (W <= 4096) */

#define GM_PROF(k) do { if (a.prof && threadIdx.x == 0) a.prof[blockIdx.x * 16 + (k)] = clock64(); } while (0)

struct gm_args {
    void *out;
    int out_dt;
    float *x;
    const uint16_t *hb, *gu, *down;
    const float *gate, *w, *b;
    int kind; /* frt_cuda_norm_kind, or -1: no norm */
    float eps;
    int rows, W, I;
    uint16_t *h; /* [NT 8, I] */
    float *part; /* [I / GM_KC, NT 8, W] */
    long long *prof;
    unsigned *bar; /* the experiment's barrier counters (NULL: cooperative groups) */
    int phases;  /* 3; fewer only under the timing hook frt_cuda_gemma_mlp_set_phases */
};

__device__ __forceinline__ uint32_t gm_word(const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ float gm_gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi), as gelu.cu */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* acc[nt] += A . x tile nt over NKB k-blocks of 32: the A tile's rows g and
 * g + 8 are wa[] and wb[] (16 bytes of each row a k-block), x's rows
 * nt 8 + g at xk (the lane's first k, row stride xs elements). */
template <int NT, int NKB>
__device__ __forceinline__ void gm_mma(float (&acc)[NT][4], const uint4 (&wa)[NKB], const uint4 (&wb)[NKB],
                                       const uint16_t *xk, int xs)
{
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int kb = 0; kb < NKB; kb++) {
        uint4 xv[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) xv[nt] = *(const uint4 *)(xk + (size_t)(nt * 8 + g) * xs + kb * 32);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            const uint32_t a[4] = {gm_word(wa[kb], 2 * s), gm_word(wb[kb], 2 * s), gm_word(wa[kb], 2 * s + 1),
                                   gm_word(wb[kb], 2 * s + 1)};
#pragma unroll
            for (int nt = 0; nt < NT; nt++) frt_mma_bf16(acc[nt], a, gm_word(xv[nt], 2 * s), gm_word(xv[nt], 2 * s + 1));
        }
    }
}

template <int NKB>
__device__ __forceinline__ void gm_load(uint4 (&wa)[NKB], uint4 (&wb)[NKB], const uint16_t *ra, const uint16_t *rb)
{
#pragma unroll
    for (int kb = 0; kb < NKB; kb++) {
        wa[kb] = gemv_ld_w((const uint4 *)(ra + kb * 32));
        wb[kb] = gemv_ld_w((const uint4 *)(rb + kb * 32));
    }
}

/* Phase 1's unit u, batch bt: the lane's gate and up rows. */
__device__ __forceinline__ void gm_gu_rows(const gm_args &a, int u, int bt, const uint16_t **rg, const uint16_t **ru)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const size_t k = (size_t)wp * (a.W / GM_WARPS) + bt * GM_KB * 32 + 8 * (lane & 3);
    *rg = a.gu + (size_t)(8 * u + (lane >> 2)) * a.W + k;
    *ru = *rg + (size_t)a.I * a.W;
}

/* Phase 2's unit u: the lane's rows of down (output columns c and c + 8). */
__device__ __forceinline__ void gm_down_rows(const gm_args &a, int u, const uint16_t **r0, const uint16_t **r1)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, mg = a.W / GM_MC;
    const int kc = u / mg, c = (u % mg) * GM_MC + wp * 16 + (lane >> 2);
    *r0 = a.down + (size_t)c * a.I + (size_t)kc * GM_KC + 8 * (lane & 3);
    *r1 = *r0 + (size_t)8 * a.I;
}

template <int NT>
__device__ __forceinline__ void gm_zero(float (&acc)[NT][4])
{
#pragma unroll
    for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
}

/* Phase 1's item i of this block (unit blockIdx.x + (i / NB) grid, batch
 * i % NB of the warp's k range) into ring stage st: the lane's 16 bytes of
 * its gate row and its up row for each of GM_KB k-blocks, cp.async'ed to
 * the lane's own slots (read back by the same lane: no barrier needed).
 * One commit group an item (empty past the last unit). */
__device__ __forceinline__ void gm_issue(const gm_args &a, uint4 *ring, int i, int NB, int units)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int u = blockIdx.x + (i / NB) * gridDim.x;
    if (u < units) {
        const uint16_t *rg, *ru;
        gm_gu_rows(a, u, i % NB, &rg, &ru);
        uint4 *slot = ring + ((size_t)((i & 1) * GM_WARPS + wp) * 2 * GM_KB) * 32 + lane;
#pragma unroll
        for (int kb = 0; kb < GM_KB; kb++) {
            frt_cp_async16(frt_smem_addr(slot + (2 * kb) * 32), rg + kb * 32, 16);
            frt_cp_async16(frt_smem_addr(slot + (2 * kb + 1) * 32), ru + kb * 32, 16);
        }
    }
    frt_cp_async_commit();
}

/* acc[nt] += A . x tile nt over GM_KB k-blocks, x's fragments in
 * registers (xr[nt][kb]: the lane's 16 bytes of row nt 8 + g). */
template <int NT>
__device__ __forceinline__ void gm_mma_r(float (&acc)[NT][4], const uint4 (&wa)[GM_KB], const uint4 (&wb)[GM_KB],
                                         const uint4 (&xr)[NT][GM_KB])
{
#pragma unroll
    for (int kb = 0; kb < GM_KB; kb++)
#pragma unroll
        for (int s = 0; s < 2; s++) {
            const uint32_t a[4] = {gm_word(wa[kb], 2 * s), gm_word(wb[kb], 2 * s), gm_word(wa[kb], 2 * s + 1),
                                   gm_word(wb[kb], 2 * s + 1)};
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                frt_mma_bf16(acc[nt], a, gm_word(xr[nt][kb], 2 * s), gm_word(xr[nt][kb], 2 * s + 1));
        }
}

/* Phase 1 (see the header; W == GM_WARPS GM_KB 32, one batch a unit). A
 * warp's k range is the same for every unit, so its fragments of x stay in
 * registers for the whole phase (loaded once from global memory, zeros past
 * a.rows). smem: the warps' partial sums, two buffers [2][8][NT][32]
 * float4 (a unit's sums are added while the next unit's are written), then
 * the weight ring [2 stages][8 warps][2 GM_KB][32 lanes] uint4 (two units
 * in flight while one is summed). */
template <int NT>
__device__ void gm_gate_up(const gm_args &a, float4 *red, uint4 *ring)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int W = a.W, units = a.I / 8;
    gm_issue(a, ring, 0, 1, units);
    gm_issue(a, ring, 1, 1, units);
    frt_pdl_wait(); /* hb and x come from the kernels before */
    uint4 xr[NT][GM_KB];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int r = nt * 8 + g;
#pragma unroll
        for (int kb = 0; kb < GM_KB; kb++)
            xr[nt][kb] = r < a.rows ? *(const uint4 *)(a.hb + (size_t)r * W + wp * (GM_KB * 32) + kb * 32 + 8 * t)
                                    : make_uint4(0, 0, 0, 0);
    }
    GM_PROF(1);
    for (int i = 0;; i++) {
        const int u = blockIdx.x + i * gridDim.x;
        if (u >= units) break;
        frt_cp_async_wait<1>(); /* unit i has landed (i + 1 may be in flight) */
        const uint4 *slot = ring + ((size_t)((i & 1) * GM_WARPS + wp) * 2 * GM_KB) * 32 + lane;
        uint4 wg[GM_KB], wu[GM_KB];
#pragma unroll
        for (int kb = 0; kb < GM_KB; kb++) wg[kb] = slot[(2 * kb) * 32], wu[kb] = slot[(2 * kb + 1) * 32];
        gm_issue(a, ring, i + 2, 1, units); /* into the stage just read */
        float acc[NT][4];
        gm_zero(acc);
        gm_mma_r<NT>(acc, wg, wu, xr);
        float4 *rb = red + (size_t)(i & 1) * GM_WARPS * NT * 32;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            rb[(wp * NT + nt) * 32 + lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
        __syncthreads();
        if (wp < NT) {
            float4 s = rb[wp * 32 + lane];
            for (int w = 1; w < GM_WARPS; w++) {
                const float4 v = rb[(w * NT + wp) * 32 + lane];
                s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
            }
            /* s: gate (x, y) and up (z, w) of column 8 u + g at rows 2t, 2t + 1 of tile wp */
            const size_t r0 = (size_t)(wp * 8 + 2 * t), col = (size_t)8 * u + g;
            a.h[r0 * a.I + col] = __bfloat16_as_ushort(__float2bfloat16_rn(gm_gelu_tanh(s.x) * s.z));
            a.h[(r0 + 1) * a.I + col] = __bfloat16_as_ushort(__float2bfloat16_rn(gm_gelu_tanh(s.y) * s.w));
        }
        GM_PROF(2 + i);
    }
    frt_cp_async_wait<0>();
    __syncthreads(); /* the ring and the sums are free for phase 2 */
}

/* A grid barrier of the non-cooperative experiment: counter c counts the
 * blocks that arrived; block 0's thread spins until n have. */
__device__ __forceinline__ void gm_bar(unsigned *c, unsigned n)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(c) : "memory");
        unsigned v;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
        } while (v < n);
    }
    __syncthreads();
}

/* Phase 2 (see the header); wd / wd8 hold the block's first unit's weights
 * (loaded before the barrier). smem: h[:, chunk] [NT 8][GM_KC + GM_PAD]. */
template <int NT>
__device__ void gm_down(const gm_args &a, uint16_t *hs, uint4 (&wd)[GM_KC / 32], uint4 (&wd8)[GM_KC / 32])
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int W = a.W, mg = W / GM_MC, units = mg * (a.I / GM_KC), HS = GM_KC + GM_PAD, R = NT * 8;
    const uint16_t *r0, *r1;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int kc = u / mg, c = (u % mg) * GM_MC + wp * 16 + g;
        __syncthreads(); /* the previous unit's reads of hs are done */
        for (int i = threadIdx.x; i < R * (GM_KC / 8); i += GM_THREADS) {
            const int r = i / (GM_KC / 8), q = i % (GM_KC / 8);
            frt_cp_async16(frt_smem_addr(hs + (size_t)r * HS + 8 * q), a.h + (size_t)r * a.I + (size_t)kc * GM_KC + 8 * q,
                           16);
        }
        frt_cp_async_commit();
        frt_cp_async_wait<0>();
        __syncthreads();
        float acc[NT][4];
        gm_zero(acc);
        gm_mma<NT, GM_KC / 32>(acc, wd, wd8, hs + 8 * t, HS);
        if (u + (int)gridDim.x < units) {
            gm_down_rows(a, u + gridDim.x, &r0, &r1);
            gm_load(wd, wd8, r0, r1);
        }
        float *p = a.part + (size_t)kc * R * W;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int row = nt * 8 + 2 * t;
            if (row < a.rows) p[(size_t)row * W + c] = acc[nt][0], p[(size_t)row * W + c + 8] = acc[nt][2];
            if (row + 1 < a.rows)
                p[(size_t)(row + 1) * W + c] = acc[nt][1], p[(size_t)(row + 1) * W + c + 8] = acc[nt][3];
        }
    }
}

/* Phase 3 (see the header): a thread owns float4 columns threadIdx.x + q
 * GM_THREADS (q < GM_RV: W <= 4096) of the row, every load of a row in
 * flight before the first sum. */
template <int NT>
__device__ void gm_rows(const gm_args &a)
{
    const int W = a.W, nk = a.I / GM_KC, R = NT * 8;
    const bool hg = a.gate != NULL, norm = a.kind >= 0, ada = a.kind == FRT_CUDA_NORM_RMS_ADA;
    const float4 zero = make_float4(0, 0, 0, 0);
    for (int r = blockIdx.x; r < a.rows; r += gridDim.x) {
        float4 xv[GM_RV], wv[GM_RV], bv[GM_RV];
        double ss = 0;
#pragma unroll
        for (int q = 0; q < GM_RV; q++) {
            const int c = (threadIdx.x + q * GM_THREADS) * 4;
            if (c >= W) break;
            const float4 gv = hg ? *(const float4 *)(a.gate + c) : zero;
            wv[q] = norm ? *(const float4 *)(a.w + c) : zero;
            bv[q] = ada ? *(const float4 *)(a.b + c) : zero;
            float4 x = *(const float4 *)(a.x + (size_t)r * W + c), y = zero;
            for (int k0 = 0; k0 < nk; k0 += 16) { /* 16 loads in flight, then the sums in chunk order */
                float4 v[16];
#pragma unroll
                for (int j = 0; j < 16; j++)
                    if (k0 + j < nk) v[j] = *(const float4 *)(a.part + ((size_t)(k0 + j) * R + r) * W + c);
#pragma unroll
                for (int j = 0; j < 16; j++)
                    if (k0 + j < nk) {
                        if (k0 + j == 0) y = v[j];
                        else y.x += v[j].x, y.y += v[j].y, y.z += v[j].z, y.w += v[j].w;
                    }
            }
            x.x = frt_residual_add(x.x, y.x, false, 0.0f, hg, gv.x);
            x.y = frt_residual_add(x.y, y.y, false, 0.0f, hg, gv.y);
            x.z = frt_residual_add(x.z, y.z, false, 0.0f, hg, gv.z);
            x.w = frt_residual_add(x.w, y.w, false, 0.0f, hg, gv.w);
            *(float4 *)(a.x + (size_t)r * W + c) = x;
            xv[q] = x;
            ss += (double)x.x * x.x + (double)x.y * x.y + (double)x.z * x.z + (double)x.w * x.w;
        }
        if (!norm) continue; /* uniform across the block */
        ss = frt_block_sum(ss);
        const float inv = norm_inv_rms(ss, W, a.eps);
#pragma unroll
        for (int q = 0; q < GM_RV; q++) {
            const int c = (threadIdx.x + q * GM_THREADS) * 4;
            if (c >= W) break;
            const size_t o = (size_t)r * W + c;
            frt_st(a.out, a.out_dt, o, (xv[q].x * inv) * (1.0f + wv[q].x) + bv[q].x);
            frt_st(a.out, a.out_dt, o + 1, (xv[q].y * inv) * (1.0f + wv[q].y) + bv[q].y);
            frt_st(a.out, a.out_dt, o + 2, (xv[q].z * inv) * (1.0f + wv[q].z) + bv[q].z);
            frt_st(a.out, a.out_dt, o + 3, (xv[q].w * inv) * (1.0f + wv[q].w) + bv[q].w);
        }
    }
}

template <int NT>
__global__ void __launch_bounds__(GM_THREADS, 1) gemma_mlp_kernel(gm_args a)
{
    extern __shared__ uint4 gm_smem[];
    GM_PROF(0);
    if (a.prof && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        a.prof[blockIdx.x * 16 + 14] = (long long)t;
    }
    float4 *red = (float4 *)gm_smem;
    gm_gate_up<NT>(a, red, (uint4 *)(red + 2 * GM_WARPS * NT * 32));
    uint4 wd[GM_KC / 32], wd8[GM_KC / 32];
    if ((int)blockIdx.x < (a.W / GM_MC) * (a.I / GM_KC)) {
        const uint16_t *r0, *r1;
        gm_down_rows(a, blockIdx.x, &r0, &r1);
        gm_load(wd, wd8, r0, r1);
    }
    GM_PROF(8);
    if (a.phases < 2) return;
    if (a.bar) gm_bar(a.bar, gridDim.x);
    else cg::this_grid().sync();
    GM_PROF(9);
    gm_down<NT>(a, (uint16_t *)gm_smem, wd, wd8);
    GM_PROF(10);
    if (a.phases < 3) return;
    if (a.bar) gm_bar(a.bar + 1, gridDim.x);
    else cg::this_grid().sync();
    GM_PROF(11);
    gm_rows<NT>(a);
    GM_PROF(12);
    if (a.prof) {
        __syncthreads();
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (threadIdx.x == 0) a.prof[blockIdx.x * 16 + 15] = (long long)t;
    }
    if (a.bar && threadIdx.x == 0 && atomicAdd(a.bar + 2, 1u) == gridDim.x - 1) a.bar[0] = a.bar[1] = a.bar[2] = 0;
}

static int g_phases = 3;
static long long *g_prof;
extern "C" void frt_cuda_gemma_mlp_set_prof(long long *p) { g_prof = p; }

extern "C" void frt_cuda_gemma_mlp_set_phases(int n) { g_phases = n < 1 ? 1 : n > 3 ? 3 : n; }

/* Shared memory of a launch: the larger of phase 1's (the partial sums and
 * the weight ring) and phase 2's (a chunk of h). */
static size_t gm_smem_bytes(int nt, int W)
{
    (void)W;
    const size_t p1 = (size_t)2 * GM_WARPS * nt * 32 * 16 + (size_t)2 * GM_WARPS * 2 * GM_KB * 32 * 16;
    const size_t p2 = (size_t)nt * 8 * (GM_KC + GM_PAD) * 2;
    return p1 > p2 ? p1 : p2;
}

typedef void (*gm_fn)(gm_args);

static gm_fn gm_fn_of(int nt)
{
    switch (nt) {
    case 1: return gemma_mlp_kernel<1>;
    case 2: return gemma_mlp_kernel<2>;
    case 3: return gemma_mlp_kernel<3>;
    case 4: return gemma_mlp_kernel<4>;
    case 5: return gemma_mlp_kernel<5>;
    case 6: return gemma_mlp_kernel<6>;
    case 7: return gemma_mlp_kernel<7>;
    default: return gemma_mlp_kernel<8>;
    }
}

extern "C" int frt_cuda_gemma_mlp_work_bytes(int rows, int width, int inter, size_t *bytes)
{
    FRT_ARG(bytes && rows >= 1 && width >= 1 && inter >= 1, "gemma_mlp: bad sizes");
    const size_t R = (size_t)(rows + 7) / 8 * 8;
    const size_t h = (R * inter * 2 + 255) / 256 * 256;
    *bytes = h + (size_t)(inter / GM_KC) * R * width * 4 + 256;
    return 0;
}

/* The device's grid for a launch of tile count nt at width W: one block an
 * SM when that many fit at once, else 0. Sets the function's shared-memory
 * limit the first time (cached per device, nt and W: at setup, by
 * frt_cuda_gemma_mlp_check, outside any capture). */
static int gm_grid(int nt, int W, int *grid)
{
    static int cache[8][GM_NT_MAX + 1][4]; /* devices, nt, W / 1024 - 1: grid + 1 */
    int dev = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    const int wi = W / 1024 - 1;
    const int cached = dev < 8 && wi < 4;
    if (cached && cache[dev][nt][wi] > 0) {
        *grid = cache[dev][nt][wi] - 1;
        return 0;
    }
    const gm_fn fn = gm_fn_of(nt);
    const size_t smem = gm_smem_bytes(nt, W);
    int sms = 0, coop = 0, optin = 0, occ = 0;
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    *grid = 0;
    if (coop && smem <= (size_t)optin) {
        FRT_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        FRT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, GM_THREADS, smem));
        if (occ >= 1) *grid = sms;
    }
    if (cached) cache[dev][nt][wi] = *grid + 1;
    return 0;
}

/* The checks that need no device (frt_cuda_gemma_mlp's header). */
static int gm_check(const frt_cuda_gemma_mlp_args *p)
{
    FRT_ARG(p && p->x && p->hb && p->gu && p->down && p->work, "gemma_mlp: NULL pointer");
    FRT_ARG(p->rows >= 1 && p->width >= 1 && p->inter >= 1, "gemma_mlp: rows %d width %d inter %d",
            p ? p->rows : 0, p ? p->width : 0, p ? p->inter : 0);
    const int norm = p->w != NULL;
    FRT_ARG(!norm || (p->out && frt_dtype_ok(p->out_dtype)), "gemma_mlp: a norm needs out and its dtype");
    FRT_ARG(!norm || p->kind == FRT_CUDA_NORM_RMS_ADA || p->kind == FRT_CUDA_NORM_RMS_ONE || p->kind == FRT_CUDA_NORM_LAYER,
            "gemma_mlp: unknown norm kind %d", (int)p->kind);
    FRT_ARG(!norm || p->kind != FRT_CUDA_NORM_RMS_ADA || p->b, "gemma_mlp: adaRMSNorm needs its shift b");
    FRT_ARG(!norm || ((void *)p->x != p->out), "gemma_mlp: out must not alias x");
    size_t need = 0;
    FRT_TRY(frt_cuda_gemma_mlp_work_bytes(p->rows, p->width, p->inter, &need));
    FRT_ARG(p->work_bytes >= need, "gemma_mlp: work of %zu bytes, %zu needed", p->work_bytes, need);
    if (norm && p->kind == FRT_CUDA_NORM_LAYER)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: LayerNorm after the MLP is not supported");
    if (p->rows > GM_NT_MAX * 8)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: %d rows (at most %d)", p->rows, GM_NT_MAX * 8);
    if (p->width != GM_WARPS * GM_KB * 32 || p->inter % GM_KC != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: width %d (only %d) inter %d (a multiple of %d)", p->width,
                         GM_WARPS * GM_KB * 32, p->inter, GM_KC);
    const uintptr_t al = (uintptr_t)p->x | (uintptr_t)p->hb | (uintptr_t)p->gu | (uintptr_t)p->down |
                         (uintptr_t)p->gate | (uintptr_t)p->work;
    if (al % 16 != 0) return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: pointers not 16-byte aligned");
    return 0;
}

extern "C" int frt_cuda_gemma_mlp_check(const frt_cuda_gemma_mlp_args *p)
{
    FRT_TRY(gm_check(p));
    const int nt = (p->rows + 7) / 8;
    int grid = 0;
    FRT_TRY(gm_grid(nt, p->width, &grid));
    if (grid < 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: %zu bytes of shared memory or no cooperative launch",
                         gm_smem_bytes(nt, p->width));
    return 0;
}

extern "C" int frt_cuda_gemma_mlp(void *stream, const frt_cuda_gemma_mlp_args *p)
{
    FRT_TRY(gm_check(p));
    const int nt = (p->rows + 7) / 8;
    const size_t smem = gm_smem_bytes(nt, p->width);
    const gm_fn fn = gm_fn_of(nt);
    int grid = 0;
    FRT_TRY(gm_grid(nt, p->width, &grid));
    if (grid < 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "gemma_mlp: %zu bytes of shared memory or no cooperative launch", smem);
    const size_t R = (size_t)nt * 8;
    gm_args a;
    a.out = p->out;
    a.out_dt = (int)p->out_dtype;
    a.x = p->x, a.hb = p->hb, a.gu = p->gu, a.down = p->down;
    a.gate = p->gate, a.w = p->w, a.b = p->b;
    a.kind = p->w ? (int)p->kind : -1;
    a.eps = p->eps;
    a.rows = p->rows, a.W = p->width, a.I = p->inter;
    a.phases = g_phases;
    a.prof = g_prof;
    const char *be = getenv("FRT_GM_BAR");
    const int cbar = be && be[0] == '1';
    a.bar = cbar ? (unsigned *)((char *)p->work + p->work_bytes - 256) : NULL;
    a.h = (uint16_t *)p->work;
    a.part = (float *)((char *)p->work + (R * p->inter * 2 + 255) / 256 * 256);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    const char *pe = getenv("FRT_GM_PDL");
    const int pdl = pe && pe[0] == '1' ? frt_pdl_attr(&attr[1]) : 0;
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3(GM_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    const char *ce = getenv("FRT_GM_COOP");
    const int coop = !(cbar && ce && ce[0] == '0');
    cfg.attrs = coop ? attr : attr + 1;
    cfg.numAttrs = coop + pdl;
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, fn, a));
    FRT_LAUNCH_CHECK();
    return 0;
}
