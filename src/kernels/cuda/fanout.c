/* kernels/cuda/fanout.c - side streams of a captured graph (fanout.h). */
#include "kernels/cuda/fanout.h"

#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

#include <cuda_runtime.h>
#include <string.h>

int frt_cuda_fanout_create(frt_cuda_fanout *f, int n)
{
    if (!f) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda fanout: NULL");
    memset(f, 0, sizeof *f);
    if (n < 1 || n > FRT_FANOUT_MAX)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda fanout: %d side streams (1..%d)", n, FRT_FANOUT_MAX);
    cudaError_t e = cudaEventCreateWithFlags((cudaEvent_t *)&f->ev_fork, cudaEventDisableTiming);
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        e = cudaStreamCreateWithFlags((cudaStream_t *)&f->side[i], cudaStreamNonBlocking);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags((cudaEvent_t *)&f->ev_done[i], cudaEventDisableTiming);
        if (e == cudaSuccess) f->n = i + 1;
    }
    if (e != cudaSuccess) {
        int rc = frt_cuda_fail(e, "cuda fanout: stream / event creation", __FILE__, __LINE__);
        frt_cuda_fanout_destroy(f);
        return rc;
    }
    return 0;
}

void frt_cuda_fanout_destroy(frt_cuda_fanout *f)
{
    if (!f) return;
    for (int i = 0; i < FRT_FANOUT_MAX; i++) {
        if (f->ev_done[i]) cudaEventDestroy((cudaEvent_t)f->ev_done[i]);
        if (f->side[i]) cudaStreamDestroy((cudaStream_t)f->side[i]);
    }
    if (f->ev_fork) cudaEventDestroy((cudaEvent_t)f->ev_fork);
    memset(f, 0, sizeof *f);
}

int frt_cuda_fanout_fork(frt_cuda_fanout *f, void *main, int n)
{
    if (!f || n < 1 || n > f->n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda fanout: fork of %d", n);
    FRT_CUDA_TRY(cudaEventRecord((cudaEvent_t)f->ev_fork, (cudaStream_t)main));
    for (int i = 0; i < n; i++) FRT_CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)f->side[i], (cudaEvent_t)f->ev_fork, 0));
    return 0;
}

int frt_cuda_fanout_after(frt_cuda_fanout *f, int i, int j)
{
    if (!f || i < 0 || j < 0 || i >= f->n || j >= f->n || i == j)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda fanout: side %d after side %d", i, j);
    FRT_CUDA_TRY(cudaEventRecord((cudaEvent_t)f->ev_done[j], (cudaStream_t)f->side[j]));
    FRT_CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)f->side[i], (cudaEvent_t)f->ev_done[j], 0));
    return 0;
}

int frt_cuda_fanout_join(frt_cuda_fanout *f, void *main, int n)
{
    if (!f || n < 1 || n > f->n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda fanout: join of %d", n);
    for (int i = 0; i < n; i++) {
        FRT_CUDA_TRY(cudaEventRecord((cudaEvent_t)f->ev_done[i], (cudaStream_t)f->side[i]));
        FRT_CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)main, (cudaEvent_t)f->ev_done[i], 0));
    }
    return 0;
}
