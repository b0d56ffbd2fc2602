/* kernels/cuda/cuda_check.c - CUDA runtime / cuBLAS / driver status codes to
 * frt statuses. */
#include "kernels/cuda/cuda_check.h"

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

typedef CUresult (*cu_error_str_fn)(CUresult error, const char **str);

/* cuGetErrorName or cuGetErrorString (both CUDA 6.0) through the runtime,
 * which loads the driver; NULL when there is none. */
static const char *cu_error_str(const char *symbol, CUresult res)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const char *s = NULL;
    if (cudaGetDriverEntryPointByVersion(symbol, &fn, 6000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && fn)
        if (((cu_error_str_fn)fn)(res, &s) != CUDA_SUCCESS) s = NULL;
    (void)cudaGetLastError(); /* a failed lookup must not resurface either */
    return s;
}

int frt_cu_fail(CUresult res, const char *call, const char *file, int line)
{
    int status = res == CUDA_ERROR_OUT_OF_MEMORY ? FRT_ERR_OUT_OF_MEMORY : FRT_ERR_BACKEND;
    const char *name = cu_error_str("cuGetErrorName", res);
    const char *text = cu_error_str("cuGetErrorString", res);
    if (!name)
        return frt_error(status, "%s: CUresult %d (%s:%d)", call, (int)res, base_name(file), line);
    return frt_error(status, "%s: %s: %s (%s:%d)", call, name, text ? text : "", base_name(file),
                     line);
}
