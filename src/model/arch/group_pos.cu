/*
 * model/arch/group_pos.cu - the piece table of a prefill group replay
 * (group_cuda.h, frt_group_pos): one thread an entry, read by the group's
 * attention launches.
 */
#include "model/arch/group_cuda.h"

#include "kernels/cuda/cuda_util.h"

__global__ void group_pos_kernel(int32_t *pos, const int32_t *d_start, int pieces, int C, int run)
{
    const int p = threadIdx.x;
    if (p < pieces) pos[p] = *d_start + p * C;
    if (p == pieces) pos[p] = C;
    if (p == pieces + 1) pos[p] = run * C;
}

extern "C" int frt_group_pos(void *stream, int32_t *pos, const int32_t *d_start, int pieces, int C, int run)
{
    FRT_ARG(pos && d_start, "prefill group pos: NULL pointer");
    FRT_ARG(pieces >= 1 && pieces < 1022 && C >= 1 && run >= 1, "prefill group pos: %d pieces of %d, runs of %d",
            pieces, C, run);
    if (run > pieces) run = pieces;
    group_pos_kernel<<<1, pieces + 2, 0, (cudaStream_t)stream>>>(pos, d_start, pieces, C, run);
    FRT_LAUNCH_CHECK();
    return 0;
}
