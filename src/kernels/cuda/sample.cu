/*
 * kernels/cuda/sample.cu - temperature / top-k / top-p sampling on the
 * device, from a uniform u drawn from the SplitMix64 state in device memory
 * (kernels/cpu/rng.h, the very same code), with the parameters in device
 * memory. Semantics of the CPU twin frt_cpu_sample_minp (HF order:
 * temperature, top-k, top-p on the renormalised top-k set, with vLLM's min_p
 * before top-k), and of the decode step's choice (frt_cuda_sample_token:
 * argmax for a temperature <= 0). When the parameters carry a logit bias or
 * a penalty (frt/sampling.h), or the step's allowed-token mask is on, the
 * kernel reads the adjusted logits that frt_cuda_logits_adjust wrote into
 * the workspace (frt_cuda_sample_step);
 * called without them it writes -1.
 *
 * One cooperative kernel (a grid of G <= #SMs blocks of 512 threads, phases
 * separated by grid-wide barriers), so a greedy step is one launch that reads
 * the logits once, and everything a greedy step does not need exits at the
 * first barrier:
 *   1. every block: the parameters; block 0 draws u (one RNG step when the
 *      step samples); invalid parameters write -1 and exit. Argmax partials
 *      of contiguous slices (NaN skipped, lowest index on ties). Barrier.
 *   2. every block reduces the G partials (the winner under the total order
 *      (value desc, index asc) is unique: any order gives it). Greedy:
 *      block 0 writes it, all exit. A +inf maximum wins outright; all -inf or
 *      NaN gives 0 (the twin's first in order), all exit.
 *   3. the head: p_i = exp((l_i - l_max) / T) in fp64, the twin's very
 *      expression; tokens with p_i < 2^-53 are left out. They cannot change
 *      the twin's result: its running sum is >= 1 after the first token (p =
 *      1 for the maximum) and the sorted order puts them last, so adding
 *      such a p never changes a double in [1, 2^k) (less than half an ulp),
 *      and no crossing can happen on them. Per-block counts, a barrier, then
 *      a stable compaction of the head, in index order, as (key, index),
 *      (with the head, the count of tokens with p_i >= min_p: the min_p
 *      cut, a prefix of the sorted head, since p falls along the order),
 *      key = a uint32 whose ascending order is (logit desc) (-0 as +0).
 *      Barrier.
 *      Without a top-k or top-p cut (top_k 0 or >= n, top_p 1) phases 3
 *      and 4 are skipped: phase 5 reads p from the logits in index order,
 *      min_p a filter (the twin's walk without a sort), and a draw that
 *      rounding leaves unreached returns the argmax.
 *   4. a stable LSD radix sort of the head, 8 bits a pass, skipping the
 *      passes whose digit is equal over the whole head (AND / OR of the
 *      keys): per-block digit counts, barrier, per-block offsets, a stable
 *      scatter (warp match + per-warp counts, in index order), barrier. The
 *      result is the twin's total order (logit desc, index asc).
 *   5. top-k keeps the first m = min(top_k, head, min_p count) (0 = all). The prefix sums
 *      of p over the kept tokens are nested, each level in a fixed sequential
 *      order: a thread's contiguous segment, the 32 segments of a warp, the
 *      16 warps of a block, the G blocks. Each level is a rounded sum c + x
 *      with x monotone and ending exactly at the next level's value, so the
 *      cumulative sum is monotone over the order and every crossing (top-p:
 *      the first with cum >= top_p * total; the draw: the first with cum >
 *      u * kept total) is found where the block sums say. Every block sums
 *      its slice; barrier; block 0 scans the G sums and recomputes the two
 *      slices that hold the crossings.
 * The association differs from the twin's running sum (a relative
 * difference near 1e-16), so the token can differ from the CPU's only when u
 * falls within that distance of a boundary. Deterministic: integer counts
 * and fixed-order sums, no atomics on data (only inside cooperative groups'
 * grid barrier); the bits depend on G (the SM count).
 * Tested in tests/test_cuda_kernels.c and tests/test_cuda_decode.c.
 */
#include "kernels/cpu/rng.h"
#include "kernels/cpu/sample_rule.h"
#include "kernels/cuda/cuda_util.h"

#include <cooperative_groups.h>
#include <math.h>

namespace cg = cooperative_groups;

#define SMP_THREADS 512
#define SMP_WARPS (SMP_THREADS / 32)
#define SMP_MAX_BLOCKS 1024 /* G cap: the workspace's per-block arrays */
#define SMP_PER_BLOCK 2048  /* logits per block at least (fewer blocks for small n) */
#define SMP_RADIX 256
#define SMP_ALIGN 256

enum { SMP_MODE_SAMPLE = 0, SMP_MODE_TOKEN = 1 };

static size_t align_up(size_t x) { return (x + SMP_ALIGN - 1) / SMP_ALIGN * SMP_ALIGN; }

/* uint32 whose ascending order is the descending order of the sort key. */
__device__ __forceinline__ uint32_t sample_key(float f)
{
    if (isnan(f)) f = -INFINITY;
    if (f == 0.0f) f = 0.0f; /* -0 sorts as +0 (the twin compares them equal) */
    const uint32_t u = __float_as_uint(f);
    const uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending with f */
    return ~ord;
}

__device__ __forceinline__ float sample_key_value(uint32_t key)
{
    const uint32_t ord = ~key;
    return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7FFFFFFFu) : ~ord);
}

/* Workspace layout (every array SMP_ALIGN-aligned). */
struct smp_layout {
    size_t pv, pi, hcnt, mcnt, hand, hor, hist, btot, ka, kb, va, vb, adj, total;
};

static smp_layout smp_layout_of(int n)
{
    smp_layout L;
    size_t off = 0;
    const size_t B = SMP_MAX_BLOCKS, N = (size_t)n;
    L.pv = off, off += align_up(B * 4);
    L.pi = off, off += align_up(B * 4);
    L.hcnt = off, off += align_up(B * 4);
    L.mcnt = off, off += align_up(B * 4);
    L.hand = off, off += align_up(B * 4);
    L.hor = off, off += align_up(B * 4);
    L.hist = off, off += align_up(B * SMP_RADIX * 4);
    L.btot = off, off += align_up(B * 8);
    L.ka = off, off += align_up(N * 4);
    L.kb = off, off += align_up(N * 4);
    L.va = off, off += align_up(N * 4);
    L.vb = off, off += align_up(N * 4);
    L.adj = off, off += align_up(N * 4);
    L.total = off;
    return L;
}

struct smp_args {
    int32_t *token;
    const float *logits;
    const float *adj; /* the adjusted logits (frt_cuda_sample_step), or NULL */
    const int32_t *mask_on; /* the step record's mask flag (frt_cuda_sample_step), or NULL */
    int n, mode;
    const frt_cuda_sampler_params *prm;
    uint64_t *rng;
    float *pv;
    int *pi, *hcnt, *mcnt;
    uint32_t *hand, *hor;
    int *hist;
    double *btot;
    uint32_t *ka, *kb;
    int32_t *va, *vb;
};

/* Shared memory of the kernel (one static struct; phases reuse nothing of
 * another phase's fields, except through barriers). */
struct smp_shared {
    int wcnt[SMP_WARPS][SMP_RADIX]; /* per-warp digit counts of a tile */
    int base[SMP_RADIX];            /* running output position per digit */
    int tot[SMP_RADIX];             /* digit totals (scan scratch) */
    int wsum[SMP_WARPS], wmc[SMP_WARPS];
    uint32_t wand[SMP_WARPS], wor[SMP_WARPS];
    double ts[SMP_THREADS];     /* segment sums */
    double te[SMP_THREADS];     /* exclusive scan of ts within each warp */
    double we[SMP_WARPS + 1];   /* exclusive scan of the warp totals */
    double eb[SMP_MAX_BLOCKS + 1]; /* exclusive scan of the block sums (block 0) */
    float u;
    int cross;
    double ktot;
};

/* [lo, hi) of part `b` of `len` items cut into G contiguous parts. */
__device__ __forceinline__ void smp_part(int len, int G, int b, int &lo, int &hi)
{
    const int per = (len + G - 1) / G;
    lo = min(b * per, len);
    hi = min(lo + per, len);
}

__device__ __forceinline__ double smp_prob(uint32_t key, double lmax, double inv_t)
{
    return exp(((double)sample_key_value(key) - lmax) * inv_t);
}

/* Where phase 5 reads p at position i: the sorted head (its keys), or,
 * without a top-k / top-p cut, the logits themselves in index order (min_p
 * as a filter: the same kept set as its sorted prefix). */
struct smp_sorted {
    const uint32_t *keys;
    double lmax, inv_t;
    __device__ double prob(int i) const { return smp_prob(__ldcg(keys + i), lmax, inv_t); }
};

struct smp_direct {
    const float *logits;
    double lmax, inv_t;
    float min_p;
    __device__ double prob(int i) const
    {
        const double p = smp_prob(sample_key(__ldcg(logits + i)), lmax, inv_t);
        return p >= (double)min_p ? p : 0.0;
    }
};

/* Block-wide exclusive scan of sh.tot[0..255] into sh.tot (integers: exact).
 * Needs >= 256 threads; starts and ends with a barrier. */
__device__ void smp_scan_digits(smp_shared &sh)
{
    __syncthreads();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int v = 0, incl = 0;
    if (tid < SMP_RADIX) {
        v = sh.tot[tid];
        incl = v;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int x = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += x;
        }
        if (lane == 31) sh.wsum[w] = incl;
    }
    __syncthreads();
    if (tid < SMP_RADIX) {
        int pre = 0;
        for (int k = 0; k < w; k++) pre += sh.wsum[k];
        sh.tot[tid] = pre + incl - v;
    }
    __syncthreads();
}

/* Ranks the tile's elements by digit (stable: warp order, then lane order).
 * dig < 0: no element. Returns the element's rank among the equal digits of
 * the tile that precede it; sh.wcnt holds the per-warp counts afterwards.
 * Starts with zeroing sh.wcnt and ends with a barrier. */
__device__ int smp_rank_tile(smp_shared &sh, int dig)
{
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    for (int i = tid; i < SMP_WARPS * SMP_RADIX; i += SMP_THREADS) (&sh.wcnt[0][0])[i] = 0;
    __syncthreads();
    const unsigned int peers = __match_any_sync(0xffffffffu, dig < 0 ? SMP_RADIX + lane : dig);
    const int rank_w = __popc(peers & ((1u << lane) - 1u));
    if (dig >= 0 && rank_w == 0) sh.wcnt[w][dig] = __popc(peers);
    __syncthreads();
    int before = rank_w;
    if (dig >= 0)
        for (int k = 0; k < w; k++) before += sh.wcnt[k][dig];
    return before;
}

/* Segment, warp and block sums of the kept positions [lo, hi) of src
 * into sh.ts / sh.te / sh.we (see the file comment); returns the block
 * total (valid in every thread). Segment length seg (the same for every
 * block). Starts and ends with a barrier. */
template <class Src>
__device__ double smp_slice_sums(smp_shared &sh, const Src &src, int lo, int hi, int seg)
{
    const int tid = threadIdx.x;
    __syncthreads();
    const int a0 = min(lo + tid * seg, hi), a1 = min(a0 + seg, hi);
    double s = 0.0;
    for (int i = a0; i < a1; i++) s += src.prob(i);
    sh.ts[tid] = s;
    __syncthreads();
    if (tid < SMP_WARPS) {
        double c = 0.0;
        for (int j = 0; j < 32; j++) {
            sh.te[tid * 32 + j] = c;
            c = c + sh.ts[tid * 32 + j];
        }
        sh.we[tid + 1] = c; /* the warp total, scanned below */
    }
    __syncthreads();
    if (tid == 0) {
        double c = 0.0;
        for (int w = 0; w < SMP_WARPS; w++) {
            const double wt = sh.we[w + 1];
            sh.we[w] = c;
            c = c + wt;
        }
        sh.we[SMP_WARPS] = c;
    }
    __syncthreads();
    return sh.we[SMP_WARPS];
}

/* In block 0, after smp_slice_sums of the slice [lo, hi) whose exclusive
 * prefix is eb: the first position i with pred(cum(i)) (pred monotone:
 * cum >= x when ge, cum > x otherwise). Returns the position (or -1) and its
 * cum in *cum_out, in every thread. Ends with a barrier. */
template <class Src>
__device__ int smp_cross(smp_shared &sh, const Src &src, int lo, int hi, int seg, double eb, double x, bool ge,
                         double *cum_out)
{
    const int tid = threadIdx.x, w = tid >> 5;
    if (tid == 0) sh.cross = -1;
    __syncthreads();
    const int a0 = min(lo + tid * seg, hi), a1 = min(a0 + seg, hi);
    const double c0 = eb + (sh.we[w] + sh.te[tid]);
    const double c1 = eb + (sh.we[w] + (sh.te[tid] + sh.ts[tid]));
    const bool p0 = ge ? c0 >= x : c0 > x, p1 = ge ? c1 >= x : c1 > x;
    if (a0 < a1 && !p0 && p1) { /* the one thread whose segment holds the crossing */
        double sp = 0.0;
        for (int i = a0; i < a1; i++) {
            sp += src.prob(i);
            const double c = eb + (sh.we[w] + (sh.te[tid] + sp));
            if (ge ? c >= x : c > x) {
                sh.cross = i;
                sh.ktot = c;
                break;
            }
        }
    }
    __syncthreads();
    *cum_out = sh.ktot;
    const int r = sh.cross;
    __syncthreads();
    return r;
}

/* In block 0, after the scan of the block sums into sh.eb: the first
 * position of [0, m) whose cumulative p passes x (>= x when ge, > x
 * otherwise), found in the block whose sums pass it, then in its slice.
 * Returns the position (-1: none) and its cumulative sum in *cum. */
template <class Src>
__device__ int smp_find(smp_shared &sh, const Src &src, int m, int seg, double x, bool ge, double *cum)
{
    const int G = gridDim.x;
    int bk = G - 1;
    for (int k = 0; k < G; k++)
        if (ge ? sh.eb[k + 1] >= x : sh.eb[k + 1] > x) {
            bk = k;
            break;
        }
    int lo, hi;
    smp_part(m, G, bk, lo, hi);
    smp_slice_sums(sh, src, lo, hi, seg);
    return smp_cross(sh, src, lo, hi, seg, sh.eb[bk], x, ge, cum);
}

/* Phase 5 over positions [0, m) of src: the block sums of p (every block),
 * a grid barrier, then in block 0 the scan of the block sums, top-p (top_p
 * < 1: *keep = the kept prefix) and the draw. Returns, in block 0, the
 * position drawn (-1: u * total reached the end by rounding), -2 in the
 * other blocks (they are done). */
template <class Src>
__device__ int smp_draw(smp_shared &sh, const smp_args &A, const Src &src, int m, float top_p, int *keep)
{
    cg::grid_group grid = cg::this_grid();
    const int tid = threadIdx.x, G = gridDim.x, b = blockIdx.x;
    const int per = (m + G - 1) / G;
    const int seg = (per + SMP_THREADS - 1) / SMP_THREADS;
    int clo, chi;
    smp_part(m, G, b, clo, chi);
    const double bt = smp_slice_sums(sh, src, clo, chi, seg);
    if (tid == 0) A.btot[b] = bt;
    grid.sync();
    if (b != 0) return -2;

    /* block 0: scan the block sums, then top-p and the draw */
    if (tid == 0) {
        double c = 0.0;
        for (int k = 0; k < G; k++) {
            sh.eb[k] = c;
            c = c + __ldcg(A.btot + k);
        }
        sh.eb[G] = c;
    }
    __syncthreads();
    const double total = sh.eb[G];
    *keep = m;
    double ktot = total;
    if (top_p < 1.0f) {
        double c = 0.0;
        const int i = smp_find(sh, src, m, seg, (double)top_p * total, true, &c);
        if (i >= 0) {
            *keep = i + 1;
            ktot = c;
        }
    }
    double c = 0.0;
    return smp_find(sh, src, m, seg, (double)sh.u * ktot, false, &c);
}

__global__ __launch_bounds__(SMP_THREADS) void sample_kernel(const smp_args A)
{
    __shared__ smp_shared sh;
    cg::grid_group grid = cg::this_grid();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int G = gridDim.x, b = blockIdx.x, n = A.n;

    /* 1. parameters, the draw, argmax partials */
    const float T = A.prm->temperature, top_p = A.prm->top_p, min_p = A.prm->min_p;
    const int top_k = A.prm->top_k;
    /* bias, penalties or the mask need the adjusted logits of frt_cuda_sample_step */
    const bool adjusts = frt_sample_reads_adjusted(A.prm, A.mask_on ? *A.mask_on : 0);
    if (adjusts && !A.adj) {
        if (b == 0 && tid == 0) *A.token = -1;
        return; /* uniform over the grid */
    }
    const float *L = adjusts ? A.adj : A.logits;
    const bool valid = T >= 0.0f && !isinf(T) && top_k >= 0 && top_p > 0.0f && top_p <= 1.0f && min_p >= 0.0f &&
                       min_p <= 1.0f;
    const bool greedy = A.mode == SMP_MODE_TOKEN ? T <= 0.0f : (valid && T == 0.0f);
    const bool draws = !(A.mode == SMP_MODE_TOKEN && greedy);
    if (b == 0 && tid == 0) {
        float u = 0.0f;
        if (draws) {
            uint64_t st = *A.rng;
            u = frt_rng_uniform(&st);
            *A.rng = st;
        }
        sh.u = u;
        if (!greedy && !valid) *A.token = -1;
    }
    if (!greedy && !valid) return; /* uniform over the grid */
    int lo, hi;
    smp_part(n, G, b, lo, hi);
    {
        float v = 0.0f;
        int i = -1;
#pragma unroll 4
        for (int idx = lo + tid; idx < hi; idx += SMP_THREADS) {
            const float x = L[idx];
            if (!isnan(x) && frt_argmax_better(x, idx, v, i)) {
                v = x;
                i = idx;
            }
        }
        frt_block_argmax(v, i);
        if (tid == 0) {
            A.pv[b] = v;
            A.pi[b] = i;
        }
    }
    grid.sync();

    /* 2. the winner */
    float vmax = 0.0f;
    int imax = -1;
    for (int k = tid; k < G; k += SMP_THREADS) {
        const float pv = __ldcg(A.pv + k);
        const int pi = __ldcg(A.pi + k);
        if (frt_argmax_better(pv, pi, vmax, imax)) {
            vmax = pv;
            imax = pi;
        }
    }
    frt_block_argmax(vmax, imax);
    if (greedy) {
        if (b == 0 && tid == 0) *A.token = imax < 0 ? 0 : imax;
        return;
    }
    const double lmax = imax < 0 ? -INFINITY : (double)vmax;
    if (isinf(lmax)) { /* +inf wins (the first); all -inf / NaN: the first in order, 0 */
        if (b == 0 && tid == 0) *A.token = lmax > 0 ? imax : 0;
        return;
    }
    const double inv_t = 1.0 / (double)T;
    if ((top_k == 0 || top_k >= n) && top_p >= 1.0f) { /* no cut: the walk in index order */
        int keep = n;
        const int i = smp_draw(sh, A, smp_direct{L, lmax, inv_t, min_p}, n, 1.0f, &keep);
        if (b == 0 && tid == 0) *A.token = i >= 0 ? i : imax; /* rounding: the twin's argmax */
        return;
    }

    /* 3. the head: count, then a stable compaction in index order */
    {
        int c = 0, mc = 0;
        uint32_t kand = 0xFFFFFFFFu, kor = 0u;
        for (int idx = lo + tid; idx < hi; idx += SMP_THREADS) {
            const uint32_t key = sample_key(L[idx]);
            const double p = smp_prob(key, lmax, inv_t);
            if (p >= 0x1p-53) {
                c++;
                mc += p >= (double)min_p; /* min_p: a prefix of the sorted head */
                kand &= key;
                kor |= key;
            }
        }
        c = __reduce_add_sync(0xffffffffu, (unsigned int)c);
        mc = __reduce_add_sync(0xffffffffu, (unsigned int)mc);
        kand = __reduce_and_sync(0xffffffffu, kand);
        kor = __reduce_or_sync(0xffffffffu, kor);
        if (lane == 0) {
            sh.wsum[w] = c;
            sh.wmc[w] = mc;
            sh.wand[w] = kand;
            sh.wor[w] = kor;
        }
        __syncthreads();
        if (tid == 0) {
            int s = 0, sm = 0;
            uint32_t a = 0xFFFFFFFFu, o = 0u;
            for (int k = 0; k < SMP_WARPS; k++) {
                s += sh.wsum[k];
                sm += sh.wmc[k];
                a &= sh.wand[k];
                o |= sh.wor[k];
            }
            A.hcnt[b] = s;
            A.mcnt[b] = sm;
            A.hand[b] = a;
            A.hor[b] = o;
        }
    }
    grid.sync();
    int H = 0, off = 0, MC = 0;
    uint32_t gand = 0xFFFFFFFFu, gor = 0u;
    for (int k = 0; k < G; k++) { /* every thread, the same order: the same values */
        const int c = __ldcg(A.hcnt + k);
        MC += __ldcg(A.mcnt + k);
        if (k < b) off += c;
        H += c;
        if (c > 0) {
            gand &= __ldcg(A.hand + k);
            gor |= __ldcg(A.hor + k);
        }
    }
    const uint32_t varying = gand ^ gor;
    {
        int run = off;
        for (int i0 = lo; i0 < hi; i0 += SMP_THREADS) {
            const int idx = i0 + tid;
            uint32_t key = 0;
            bool head = false;
            if (idx < hi) {
                key = sample_key(L[idx]);
                head = smp_prob(key, lmax, inv_t) >= 0x1p-53;
            }
            const unsigned int bal = __ballot_sync(0xffffffffu, head);
            __syncthreads(); /* the previous tile's sh.wsum is consumed */
            if (lane == 0) sh.wsum[w] = __popc(bal);
            __syncthreads();
            int pos = run + __popc(bal & ((1u << lane) - 1u));
            int tile = 0;
            for (int k = 0; k < SMP_WARPS; k++) {
                if (k < w) pos += sh.wsum[k];
                tile += sh.wsum[k];
            }
            if (head) {
                A.ka[pos] = key;
                A.va[pos] = idx;
            }
            run += tile;
        }
    }
    grid.sync();

    /* 4. LSD radix sort of the head, stable */
    uint32_t *ksrc = A.ka, *kdst = A.kb;
    int32_t *vsrc = A.va, *vdst = A.vb;
    int slo, shi;
    smp_part(H, G, b, slo, shi);
    for (int shift = 0; shift < 32; shift += 8) {
        if (((varying >> shift) & 0xFFu) == 0) continue; /* uniform: digit equal everywhere */
        /* (a) digit counts of this block's part, tile by tile */
        int cnt = 0; /* thread tid < 256: digit tid */
        for (int i0 = slo; i0 < shi; i0 += SMP_THREADS) {
            const int i = i0 + tid;
            const int dig = i < shi ? (int)((__ldcg(ksrc + i) >> shift) & 0xFFu) : -1;
            smp_rank_tile(sh, dig);
            if (tid < SMP_RADIX)
                for (int k = 0; k < SMP_WARPS; k++) cnt += sh.wcnt[k][tid];
            __syncthreads();
        }
        if (tid < SMP_RADIX) A.hist[(size_t)b * SMP_RADIX + tid] = cnt;
        grid.sync();
        /* (b) this block's first output position per digit */
        if (tid < SMP_RADIX) {
            int tot = 0, pre = 0;
            for (int k = 0; k < G; k++) {
                const int c = __ldcg(A.hist + (size_t)k * SMP_RADIX + tid);
                if (k < b) pre += c;
                tot += c;
            }
            sh.tot[tid] = tot;
            sh.base[tid] = pre;
        }
        smp_scan_digits(sh);
        if (tid < SMP_RADIX) sh.base[tid] += sh.tot[tid];
        /* (c) stable scatter, tile by tile */
        for (int i0 = slo; i0 < shi; i0 += SMP_THREADS) {
            const int i = i0 + tid;
            uint32_t key = 0;
            int32_t val = 0;
            int dig = -1;
            if (i < shi) {
                key = __ldcg(ksrc + i);
                val = __ldcg(vsrc + i);
                dig = (int)((key >> shift) & 0xFFu);
            }
            const int r = smp_rank_tile(sh, dig); /* its first barrier also orders sh.base */
            if (dig >= 0) {
                const int pos = sh.base[dig] + r;
                kdst[pos] = key;
                vdst[pos] = val;
            }
            __syncthreads();
            if (tid < SMP_RADIX)
                for (int k = 0; k < SMP_WARPS; k++) sh.base[tid] += sh.wcnt[k][tid];
            __syncthreads(); /* sh.wcnt is read before the next tile zeroes it */
        }
        grid.sync();
        uint32_t *tk = ksrc;
        ksrc = kdst;
        kdst = tk;
        int32_t *tv = vsrc;
        vsrc = vdst;
        vdst = tv;
    }

    /* 5. top-k, then the draw over the kept prefix of the sorted head */
    int m = (top_k > 0 && top_k < n) ? min(top_k, H) : H;
    if (min_p > 0.0f) m = min(m, MC); /* MC >= 1: the maximum has p = 1 */
    int keep = m;
    const int i = smp_draw(sh, A, smp_sorted{ksrc, lmax, inv_t}, m, top_p, &keep);
    /* keep - 1: the twin's fallback (u * total reached the end by rounding) */
    if (b == 0 && tid == 0) *A.token = __ldcg(vsrc + ((i >= 0 && i < keep) ? i : keep - 1));
}

/* Blocks of the cooperative grid on the current device (cached per device:
 * first asked at setup, outside any capture). */
static int smp_max_blocks(int *out)
{
    static int cache[64];
    int dev = 0;
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    if (dev >= 0 && dev < 64 && cache[dev] > 0) {
        *out = cache[dev];
        return 0;
    }
    int sms = 0, coop = 0, occ = 0;
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    FRT_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, sample_kernel, SMP_THREADS, 0));
    if (!coop || occ < 1 || sms < 1)
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda sample: no cooperative launch on device %d",
                         dev);
    int g = sms; /* one block per SM: all co-resident */
    if (g > SMP_MAX_BLOCKS) g = SMP_MAX_BLOCKS;
    if (dev >= 0 && dev < 64) cache[dev] = g;
    *out = g;
    return 0;
}

extern "C" int frt_cuda_sample_workspace_bytes(int n, size_t *bytes)
{
    FRT_ARG(bytes, "cuda sample: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda sample: n %d (1..2^24)", n);
    *bytes = smp_layout_of(n).total;
    int g = 0;
    return smp_max_blocks(&g); /* warms the per-device cache at setup */
}

/* The grid of one sampler launch over n logits (the same G on every path:
 * the bits depend on it). */
static int smp_grid(int n, int gmax)
{
    int G = (n + SMP_PER_BLOCK - 1) / SMP_PER_BLOCK;
    if (G > gmax) G = gmax;
    return G < 1 ? 1 : G;
}

extern "C" int frt_cuda_sample_concurrency(int n, int *out)
{
    FRT_ARG(out, "cuda sample: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda sample: n %d (1..2^24)", n);
    int gmax = 0, dev = 0, sms = 0, occ = 0;
    FRT_TRY(smp_max_blocks(&gmax));
    FRT_CUDA_TRY(cudaGetDevice(&dev));
    FRT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FRT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, sample_kernel, SMP_THREADS, 0));
    const int k = occ * sms / smp_grid(n, gmax);
    *out = k < 1 ? 1 : k;
    return 0;
}

static int sample_launch(void *stream, int32_t *d_token, const float *logits, const float *adj,
                         const int32_t *d_mask_on, int n,
                         const frt_cuda_sampler_params *d_params, uint64_t *d_rng, void *workspace,
                         size_t workspace_bytes, int mode)
{
    FRT_ARG(d_token && logits && d_params && d_rng && workspace, "cuda sample: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda sample: n %d (1..2^24)", n);
    const smp_layout L = smp_layout_of(n);
    FRT_ARG(workspace_bytes >= L.total, "cuda sample: workspace of %zu bytes, %zu needed",
            workspace_bytes, L.total);
    int gmax = 0;
    FRT_TRY(smp_max_blocks(&gmax));
    const int G = smp_grid(n, gmax);
    char *ws = (char *)workspace;
    smp_args A;
    A.token = d_token;
    A.logits = logits;
    A.adj = adj;
    A.mask_on = d_mask_on;
    A.n = n;
    A.mode = mode;
    A.prm = d_params;
    A.rng = d_rng;
    A.pv = (float *)(ws + L.pv);
    A.pi = (int *)(ws + L.pi);
    A.hcnt = (int *)(ws + L.hcnt);
    A.mcnt = (int *)(ws + L.mcnt);
    A.hand = (uint32_t *)(ws + L.hand);
    A.hor = (uint32_t *)(ws + L.hor);
    A.hist = (int *)(ws + L.hist);
    A.btot = (double *)(ws + L.btot);
    A.ka = (uint32_t *)(ws + L.ka);
    A.kb = (uint32_t *)(ws + L.kb);
    A.va = (int32_t *)(ws + L.va);
    A.vb = (int32_t *)(ws + L.vb);

    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.gridDim = dim3((unsigned int)G);
    cfg.blockDim = dim3(SMP_THREADS);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    FRT_CUDA_TRY(cudaLaunchKernelEx(&cfg, sample_kernel, A));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_sample(void *stream, int32_t *d_token, const float *logits, int n,
                               const frt_cuda_sampler_params *d_params, uint64_t *d_rng,
                               void *workspace, size_t workspace_bytes)
{
    return sample_launch(stream, d_token, logits, NULL, NULL, n, d_params, d_rng, workspace, workspace_bytes,
                         SMP_MODE_SAMPLE);
}

extern "C" int frt_cuda_sample_token(void *stream, int32_t *d_token, const float *logits, int n,
                                     const frt_cuda_sampler_params *d_params, uint64_t *d_rng,
                                     void *workspace, size_t workspace_bytes)
{
    return sample_launch(stream, d_token, logits, NULL, NULL, n, d_params, d_rng, workspace, workspace_bytes,
                         SMP_MODE_TOKEN);
}

extern "C" int frt_cuda_sample_step(void *stream, int32_t *d_token, const float *logits, int n,
                                    const frt_cuda_sampler_params *d_params, const int32_t *d_counts,
                                    const uint8_t *d_seen, const int32_t *d_mask_on, const uint32_t *d_mask,
                                    uint64_t *d_rng, frt_logprobs *d_logprobs, void *workspace,
                                    size_t workspace_bytes)
{
    FRT_ARG(d_counts && d_seen && d_logprobs && workspace, "cuda sample step: NULL pointer");
    FRT_ARG(n >= 1 && n <= (1 << 24), "cuda sample step: n %d (1..2^24)", n);
    const smp_layout L = smp_layout_of(n);
    FRT_ARG(workspace_bytes >= L.total, "cuda sample step: workspace of %zu bytes, %zu needed",
            workspace_bytes, L.total);
    float *adj = (float *)((char *)workspace + L.adj);
    FRT_TRY(frt_cuda_logits_adjust(stream, adj, logits, n, d_params, d_counts, d_seen, d_mask_on, d_mask));
    FRT_TRY(sample_launch(stream, d_token, logits, adj, d_mask_on, n, d_params, d_rng, workspace, workspace_bytes,
                          SMP_MODE_TOKEN));
    return frt_cuda_logprobs(stream, d_logprobs, logits, adj, n, d_token, d_params, d_mask_on);
}
