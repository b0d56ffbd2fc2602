/*
 * kernels/cuda/gemm_skinny.cu - the skinny GEMM of frt_cuda_gemm_run:
 *   y[n, out] = x[n, in] . w[out, in]^T (+ y),   FRT_CUDA_GEMV_MAX_N < n <= 64,
 * bf16 x and w, f32 accumulation, f32 or bf16 y, on Hopper's wgmma (sm_90a).
 * It serves the prefill buckets of an append (16, 32 and 64 rows), which
 * are bound by the weight bytes: every weight byte is read once, and the
 * launch keeps every SM streaming.
 *
 * Work: the output columns are cut into tiles of SK_BN (256; the SwiGLU
 * form: 128 gate and the same 128 up columns) and the inner dimension into
 * units of SK_BK (64 elements, one 128-byte swizzled row). Each tile's
 * units are split into S nearly equal ranges, one block each, and the S
 * blocks of a tile are one cluster (S <= 8, chosen at plan time so that
 * tiles x S blocks fit one wave of clusters). A producer warp streams the
 * w box (256 rows x 64) and the x box (n rounded up to 8 rows x 64; rows
 * past n read as zeros, rows of the stage past the box are stale and only
 * reach output rows >= n, never stored) of each unit into a ring of
 * SK_STAGES shared-memory stages with the tensor copy engine; two consumer
 * warpgroups each multiply the x box by their 128 rows of w (wgmma
 * m64n128k16, 4 a unit) into 64 f32 accumulators a thread. Each block then
 * writes its partial sums (64 x 256 f32) over its stages; after a cluster
 * barrier block r sums rows r n / S .. (r + 1) n / S - 1 over the S
 * partials through distributed shared memory in rank order and stores them;
 * a second cluster barrier keeps every partial alive until it is read. No
 * workspace, no atomics: a row's bits depend on (n, in, out, S) only, and
 * frt_cuda_gemm_plan_info reports S (splitk_num) so the model fingerprint
 * follows it.
 *
 * Epilogue: v = the sum; with accumulate v = fl(v + y) (y widened to f32);
 * stored in y's dtype (bf16: round to nearest even once). The cuBLASLt
 * plans' semantics (alpha 1, beta 0 or 1).
 *
 * The launch is a programmatic dependent launch: the producer streams the
 * first stages' weights (which no kernel writes) before griddepcontrol.wait,
 * and x and y are touched after it. Twin:
 * frt_cpu_matmul / frt_cpu_matmul_add. Tested in tests/test_cuda_gemm_skinny.c.
 * PTX ISA 8.x (wgmma, cp.async.bulk.tensor, mbarrier); the descriptors are
 * those of wgmma_util.h.
 */
#include "kernels/cuda/gemm_internal.h"
#include "kernels/cuda/mma_util.h"
#include "kernels/cuda/tma_util.h"
#include "kernels/cuda/wgmma_util.h"

#include <cuda_bf16.h>
#include <string.h>

#define SK_BN 256                            /* output columns a tile */
#define SK_BK 64                             /* inner elements a unit (128 bytes of bf16) */
#define SK_ROWS 64                           /* x rows a wgmma (n <= 64) */
#define SK_STAGES 5
#define SK_X_BYTES (SK_ROWS * 128)           /* 8 KiB */
#define SK_W_BYTES (SK_BN * 128)             /* 32 KiB */
#define SK_STAGE_BYTES (SK_X_BYTES + SK_W_BYTES)
#define SK_CONSUMERS 256                     /* two warpgroups */
#define SK_THREADS (SK_CONSUMERS + 32)       /* + the producer warp */
#define SK_LD (SK_BN + 8)                    /* a partial row's floats in shared memory (padded) */
#define SK_MAX_SPLITS 8                      /* the portable cluster size */
#define SK_SMEM (1024 + SK_STAGES * SK_STAGE_BYTES + 2 * SK_STAGES * 8)

struct sk_args {
    CUtensorMap tx, tw, tu; /* x [n, in] (boxes of xrows x 64), w [out, in] (256 x 64; GLU: gate and up, 128 x 64) */
    void *y;
    int n, out, kb, splits, y_bf16, acc, xrows;
    int glu_round; /* GLU: the products rounded to bf16 before the SwiGLU (1) or kept in f32 (0) */
};

__device__ __forceinline__ void sk_bar_consumers()
{
    asm volatile("bar.sync 1, %0;\n" ::"n"(SK_CONSUMERS) : "memory");
}

/* Every thread of the cluster: this block's shared-memory writes before,
 * visible to the cluster's reads after. */
__device__ __forceinline__ void sk_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* Four floats at shared address addr of the cluster's block `rank`. */
__device__ __forceinline__ float4 sk_ld_cluster(uint32_t addr, int rank)
{
    uint32_t ra;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(addr), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(ra)
                 : "memory");
    return v;
}

__device__ __forceinline__ float sk_epi(const sk_args &a, float v, size_t i)
{
    if (!a.acc) return v;
    return __fadd_rn(v, a.y_bf16 ? __bfloat162float(((const __nv_bfloat16 *)a.y)[i]) : ((const float *)a.y)[i]);
}

__device__ __forceinline__ void sk_add4(float4 &v, const float4 &o)
{
    v.x = __fadd_rn(v.x, o.x);
    v.y = __fadd_rn(v.y, o.y);
    v.z = __fadd_rn(v.z, o.z);
    v.w = __fadd_rn(v.w, o.w);
}

/* The sums over the cluster's S partials of the four floats at a and at b
 * (b only with two), each in rank order; every load is issued before the
 * first add. */
__device__ __forceinline__ void sk_sum_cluster(uint32_t a, uint32_t b, bool two, int S, float4 &va, float4 &vb)
{
    float4 p[SK_MAX_SPLITS], q[SK_MAX_SPLITS];
#pragma unroll
    for (int k = 0; k < SK_MAX_SPLITS; k++)
        if (k < S) p[k] = sk_ld_cluster(a, k);
    if (two)
#pragma unroll
        for (int k = 0; k < SK_MAX_SPLITS; k++)
            if (k < S) q[k] = sk_ld_cluster(b, k);
    va = p[0];
#pragma unroll
    for (int k = 1; k < SK_MAX_SPLITS; k++)
        if (k < S) sk_add4(va, p[k]);
    if (two) {
        vb = q[0];
#pragma unroll
        for (int k = 1; k < SK_MAX_SPLITS; k++)
            if (k < S) sk_add4(vb, q[k]);
    }
}

/* Row `row` of the tile's columns col .. col + 3 from the summed v: the epilogue and the store. */
__device__ __forceinline__ void sk_store4(const sk_args &a, int row, int col, float4 v)
{
    const size_t i = (size_t)row * a.out + col;
    v.x = sk_epi(a, v.x, i);
    v.y = sk_epi(a, v.y, i + 1);
    v.z = sk_epi(a, v.z, i + 2);
    v.w = sk_epi(a, v.w, i + 3);
    if (a.y_bf16) {
        __nv_bfloat162 *p = (__nv_bfloat162 *)((__nv_bfloat16 *)a.y + i);
        p[0] = __floats2bfloat162_rn(v.x, v.y);
        p[1] = __floats2bfloat162_rn(v.z, v.w);
    } else {
        *(float4 *)((float *)a.y + i) = v;
    }
}

/* silu(g) * u of the sums, rounded to bf16 first with round: the bits of
 * bf16 (round) or f32 gate and up products followed by frt_cuda_swiglu's
 * form for that input dtype. */
__device__ __forceinline__ float sk_glu(float g, float u, int round)
{
    if (round) {
        g = __bfloat162float(__float2bfloat16_rn(g));
        u = __bfloat162float(__float2bfloat16_rn(u));
    }
    return frt_silu(g) * u;
}

/* GLU: y [n, out] bf16 = SwiGLU of the products with w (gate) and u (up),
 * a tile 128 gate columns (warpgroup 0) and the same 128 up columns
 * (warpgroup 1). */
template <bool GLU> __global__ void __launch_bounds__(SK_THREADS, 1) sk_kernel(const __grid_constant__ sk_args a)
{
    extern __shared__ __align__(1024) uint8_t sk_smem[];
    const uint32_t base = (frt_smem_addr(sk_smem) + 1023u) & ~1023u;
    const uint32_t mb = base + SK_STAGES * SK_STAGE_BYTES; /* full[s] at mb + 8 s, empty[s] at mb + 8 (STAGES + s) */
    const uint32_t stage_bytes = (uint32_t)a.xrows * 128u + SK_W_BYTES; /* the bytes a stage's copies bring */
    const int S = a.splits, t = blockIdx.x / S, r = blockIdx.x % S; /* r: the rank in the cluster */
    const int k0 = (int)((long long)r * a.kb / S), nu = (int)((long long)(r + 1) * a.kb / S) - k0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < SK_STAGES; s++) {
            frt_mbar_init(mb + 8u * s, 1);                                /* the producer's arrive + bytes */
            frt_mbar_init(mb + 8u * (SK_STAGES + s), SK_CONSUMERS / 128); /* one thread a warpgroup */
        }
        frt_mbar_init_fence();
    }
    __syncthreads();

    if (warp == SK_CONSUMERS / 32) { /* the producer */
        if (lane == 0) {
            frt_tensormap_prefetch(&a.tw);
            if (GLU) frt_tensormap_prefetch(&a.tu);
            frt_tensormap_prefetch(&a.tx);
            auto load_w = [&](int i, uint32_t st, uint32_t full) {
                if (GLU) {
                    frt_tma_2d(st + SK_X_BYTES, &a.tw, (k0 + i) * SK_BK, t * 128, full);
                    frt_tma_2d(st + SK_X_BYTES + 16384u, &a.tu, (k0 + i) * SK_BK, t * 128, full);
                } else {
                    frt_tma_2d(st + SK_X_BYTES, &a.tw, (k0 + i) * SK_BK, t * SK_BN, full);
                }
            };
            const int pre = nu < SK_STAGES ? nu : SK_STAGES;
            for (int i = 0; i < pre; i++) { /* weights first: no kernel writes them */
                frt_mbar_expect(mb + 8u * i, stage_bytes);
                load_w(i, base + (uint32_t)i * SK_STAGE_BYTES, mb + 8u * i);
            }
            frt_pdl_wait(); /* x is the kernel before's output */
            for (int i = 0; i < pre; i++)
                frt_tma_2d(base + (uint32_t)i * SK_STAGE_BYTES, &a.tx, (k0 + i) * SK_BK, 0, mb + 8u * i);
            for (int i = pre; i < nu; i++) {
                const int s = i % SK_STAGES;
                const uint32_t st = base + (uint32_t)s * SK_STAGE_BYTES, full = mb + 8u * s;
                frt_mbar_wait(mb + 8u * (SK_STAGES + s), ((i / SK_STAGES) & 1) ^ 1);
                frt_mbar_expect(full, stage_bytes);
                load_w(i, st, full);
                frt_tma_2d(st, &a.tx, (k0 + i) * SK_BK, 0, full);
            }
        }
        __syncwarp();
    } else { /* the consumers: warpgroup c takes the tile's columns 128 c .. 128 c + 127 */
        const int c = warp >> 2, tw = threadIdx.x & 127;
        float d[64];
#pragma unroll
        for (int q = 0; q < 64; q++) d[q] = 0.0f;
        for (int i = 0; i < nu; i++) {
            const int s = i % SK_STAGES;
            frt_mbar_wait(mb + 8u * s, (i / SK_STAGES) & 1);
            const uint32_t xs = base + (uint32_t)s * SK_STAGE_BYTES, ws = xs + SK_X_BYTES + (uint32_t)c * 16384u;
            frt_wgmma_fence();
#pragma unroll
            for (int j = 0; j < 4; j++)
                frt_wgmma_m64n128k16_ss(d, frt_wgmma_desc(xs + 32u * j, 0, 1024), frt_wgmma_desc(ws + 32u * j, 0, 1024),
                                        1);
            frt_wgmma_commit();
            frt_wgmma_wait<1>();
            frt_wgmma_hold(d);
            if (i > 0 && tw == 0) frt_mbar_arrive(mb + 8u * (SK_STAGES + (i - 1) % SK_STAGES));
        }
        frt_wgmma_wait<0>();
        frt_wgmma_hold(d);
        sk_bar_consumers(); /* both warpgroups are done with the stages: the partial goes over them */
        const int w = warp & 3, gid = lane >> 2, tig = lane & 3;
        float *part = (float *)(sk_smem + (base - frt_smem_addr(sk_smem)));
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int j = 0; j < 16; j++)
                *(float2 *)&part[(16 * w + gid + 8 * h) * SK_LD + c * 128 + 8 * j + 2 * tig] =
                    make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }
    frt_pdl_wait(); /* y (accumulate, and the stores): after the kernel before */
    sk_cluster_sync();

    /* block r sums rows r n / S .. of the tile over the cluster's partials, in rank order */
    const int row0 = (int)((long long)r * a.n / S), row1 = (int)((long long)(r + 1) * a.n / S);
    if (GLU) {
        const int c4 = threadIdx.x & 31, col = t * 128 + 4 * c4;
        if (threadIdx.x < SK_CONSUMERS && col < a.out)
            for (int row = row0 + (threadIdx.x >> 5); row < row1; row += SK_CONSUMERS / 32) {
                const uint32_t addr = base + (uint32_t)(row * SK_LD + 4 * c4) * 4u;
                float4 g, u;
                sk_sum_cluster(addr, addr + 128u * 4u, true, S, g, u);
                __nv_bfloat162 *p = (__nv_bfloat162 *)((__nv_bfloat16 *)a.y + (size_t)row * a.out + col);
                p[0] = __floats2bfloat162_rn(sk_glu(g.x, u.x, a.glu_round), sk_glu(g.y, u.y, a.glu_round));
                p[1] = __floats2bfloat162_rn(sk_glu(g.z, u.z, a.glu_round), sk_glu(g.w, u.w, a.glu_round));
            }
    } else {
        const int c4 = threadIdx.x & 63, col = t * SK_BN + 4 * c4;
        if (threadIdx.x < SK_CONSUMERS && col < a.out)
            for (int row = row0 + (threadIdx.x >> 6); row < row1; row += 2 * (SK_CONSUMERS / 64)) {
                const int row_b = row + SK_CONSUMERS / 64; /* two rows a pass: their loads in flight together */
                const uint32_t addr = base + (uint32_t)(row * SK_LD + 4 * c4) * 4u;
                float4 va, vb;
                sk_sum_cluster(addr, addr + (uint32_t)(SK_CONSUMERS / 64 * SK_LD) * 4u, row_b < row1, S, va, vb);
                sk_store4(a, row, col, va);
                if (row_b < row1) sk_store4(a, row_b, col, vb);
            }
    }
    sk_cluster_sync(); /* no block leaves while another reads its partial */
}

/* ---- host side ----------------------------------------------------------- */

/* A launch of a kernel for cfg c: grid tiles x splits in clusters of splits. */
static cudaLaunchConfig_t sk_config(const skinny_cfg *c, void *stream, cudaLaunchAttribute *at)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(c->tiles * c->splits));
    cfg.blockDim = dim3(SK_THREADS);
    cfg.dynamicSmemBytes = SK_SMEM;
    cfg.stream = (cudaStream_t)stream;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)c->splits;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1 + frt_pdl_attr(&at[1]);
    return cfg;
}

/* The split of c (tiles, kb set) that keeps the most multiprocessors busy in one wave of clusters. */
template <bool GLU> static void sk_split(skinny_cfg *c, int sms)
{
    c->splits = 1;
    for (int s = 2; s <= SK_MAX_SPLITS && s <= c->kb && (long long)c->tiles * s <= sms; s++) {
        skinny_cfg t = *c;
        t.splits = s;
        cudaLaunchAttribute at[2];
        cudaLaunchConfig_t cfg = sk_config(&t, NULL, at);
        int clusters = 0;
        if (cudaOccupancyMaxActiveClusters(&clusters, sk_kernel<GLU>, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            break;
        }
        if (clusters >= c->tiles) c->splits = s;
    }
}

int gemm_skinny_choose(int n, int in_dim, int out_dim, int glu, skinny_cfg *c)
{
    memset(c, 0, sizeof *c);
    if (n <= FRT_CUDA_GEMV_MAX_N || n > SK_ROWS || out_dim % 8 != 0 || in_dim % 8 != 0) return 0;
    int dev = 0, sms = 0, major = 0, optin = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (major != 9 || optin < SK_SMEM) return 0; /* built for sm_90a only */
    FRT_CUDA_TRY(cudaFuncSetAttribute(sk_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, SK_SMEM));
    FRT_CUDA_TRY(cudaFuncSetAttribute(sk_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SK_SMEM));
    c->kb = (in_dim + SK_BK - 1) / SK_BK;
    c->tiles = (out_dim + (glu ? 127 : SK_BN - 1)) / (glu ? 128 : SK_BN);
    if (glu)
        sk_split<true>(c, sms);
    else
        sk_split<false>(c, sms);
    c->on = 1;
    return 0;
}

/* The kernel's arguments: the tensor maps and the shape. */
static int sk_prepare(sk_args *a, const skinny_cfg *c, void *y, int y_bf16, const uint16_t *x, const uint16_t *w,
                      const uint16_t *u, int n, int in_dim, int out_dim, int accumulate)
{
    memset(a, 0, sizeof *a);
    a->xrows = (n + 7) / 8 * 8; /* the wgmma's rows past them read whatever the stage holds: rows >= n, not stored */
    FRT_TRY(frt_tensor_map_bf16(&a->tx, x, n, in_dim, (long long)in_dim * 2, a->xrows, SK_BK, "cuda gemm skinny x"));
    FRT_TRY(frt_tensor_map_bf16(&a->tw, w, out_dim, in_dim, (long long)in_dim * 2, u ? 128 : SK_BN, SK_BK,
                                "cuda gemm skinny w"));
    if (u)
        FRT_TRY(frt_tensor_map_bf16(&a->tu, u, out_dim, in_dim, (long long)in_dim * 2, 128, SK_BK,
                                    "cuda gemm skinny up"));
    a->y = y;
    a->n = n;
    a->out = out_dim;
    a->kb = c->kb;
    a->splits = c->splits;
    a->y_bf16 = y_bf16;
    a->acc = accumulate;
    return 0;
}

int gemm_skinny_run(const skinny_cfg *c, void *stream, void *y, int y_bf16, const uint16_t *x, const uint16_t *w, int n,
                    int in_dim, int out_dim, int accumulate)
{
    sk_args a;
    FRT_TRY(sk_prepare(&a, c, y, y_bf16, x, w, NULL, n, in_dim, out_dim, accumulate));
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg = sk_config(c, stream, at);
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, sk_kernel<false>, a));
    return 0;
}

int gemm_skinny_glu_run(const skinny_cfg *c, void *stream, uint16_t *y, const uint16_t *x, const uint16_t *wg,
                        const uint16_t *wu, int n, int in_dim, int out_dim, int round)
{
    sk_args a;
    FRT_TRY(sk_prepare(&a, c, y, 1, x, wg, wu, n, in_dim, out_dim, 0));
    a.glu_round = round;
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg = sk_config(c, stream, at);
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, sk_kernel<true>, a));
    return 0;
}
