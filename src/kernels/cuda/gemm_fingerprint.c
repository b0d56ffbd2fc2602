/*
 * gemm_fingerprint.c - frt_cuda_gemm_fingerprint: a hash of the cuBLASLt
 * plans a GEMM handle chose (kernels_cuda.h).
 */
#include "kernels/cuda/kernels_cuda.h"

#include <xxhash.h>

uint64_t frt_cuda_gemm_fingerprint(const frt_cuda_gemm *g)
{
    if (!g) return 0;
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0);
    int n = frt_cuda_gemm_plan_count(g);
    for (int i = 0; i < n; i++) {
        frt_cuda_gemm_plan_info pi;
        if (frt_cuda_gemm_plan_get(g, i, &pi) < 0 || pi.like_n) continue; /* like_n: its source's algorithm */
        int f[] = {pi.n, pi.in_dim, pi.out_dim, (int)pi.out_dtype, pi.accumulate, pi.algo_id, pi.tile_id,
                   pi.stages_id, pi.splitk_num, pi.reduction_scheme, pi.cta_swizzling, pi.custom_option};
        XXH64_update(h, f, sizeof f);
        if (pi.epilogue != FRT_CUDA_GEMM_EPI_NONE) { /* (hashed only where set: the older plans keep their hash) */
            const int e = (int)pi.epilogue;
            XXH64_update(h, &e, sizeof e);
        }
    }
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}
