/* exec/cuda/cuda_check.c - CUDA / cuBLAS status codes to frt statuses. */
#include "exec/cuda/cuda_check.h"

#include "util/error.h"

#include <string.h>

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int frt_cuda_fail(cudaError_t err, const char *call, const char *file, int line)
{
    (void)cudaGetLastError(); /* clear a non-sticky error so it cannot resurface */
    int status = err == cudaErrorMemoryAllocation ? FRT_ERR_OUT_OF_MEMORY : FRT_ERR_BACKEND;
    return frt_error(status, "%s: %s: %s (%s:%d)", call, cudaGetErrorName(err),
                     cudaGetErrorString(err), base_name(file), line);
}

int frt_cublas_fail(cublasStatus_t st, const char *call, const char *file, int line)
{
    int status = st == CUBLAS_STATUS_ALLOC_FAILED ? FRT_ERR_OUT_OF_MEMORY : FRT_ERR_BACKEND;
    return frt_error(status, "%s: %s: %s (%s:%d)", call, cublasLtGetStatusName(st),
                     cublasLtGetStatusString(st), base_name(file), line);
}
