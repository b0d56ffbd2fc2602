/*
 * test_cuda_check.c - the CUDA check macro (src/kernels/cuda/cuda_check.h)
 * for its three status types: the CUDA runtime (FRT_CUDA_TRY), cuBLAS(Lt)
 * (FRT_CUBLAS_TRY) and the driver (FRT_CU_TRY):
 *   - success goes on, the call is evaluated exactly once either way;
 *   - an allocation failure is FRT_ERR_OUT_OF_MEMORY, any other failure
 *     FRT_ERR_BACKEND, with "CALL: NAME: text (file:line)" in
 *     frt_last_error() (the file without its folders);
 *   - a driver status is named through cuGetErrorName when a driver is
 *     loaded, by its number otherwise.
 * Calls no kernel and needs no GPU: it runs on every machine built with CUDA
 * (like the kernel tests, it calls the CUDA runtime only through libfrt).
 */
#include "frt_test.h"

#if !FRT_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#include "kernels/cuda/cuda_check.h"

static int g_calls;

static cudaError_t rt_status(cudaError_t e) { return g_calls++, e; }
static cublasStatus_t blas_status(cublasStatus_t s) { return g_calls++, s; }
static CUresult cu_status(CUresult r) { return g_calls++, r; }

static int try_rt(cudaError_t e)
{
    FRT_CUDA_TRY(rt_status(e));
    return 0;
}

static int try_blas(cublasStatus_t s)
{
    FRT_CUBLAS_TRY(blas_status(s));
    return 0;
}

static int try_cu(CUresult r)
{
    FRT_CU_TRY(cu_status(r));
    return 0;
}

static int has(const char *needle) { return strstr(frt_last_error(), needle) != NULL; }

int main(void)
{
    /* success: 0, one evaluation */
    g_calls = 0;
    CHECK_OK(try_rt(cudaSuccess));
    CHECK_OK(try_blas(CUBLAS_STATUS_SUCCESS));
    CHECK_OK(try_cu(CUDA_SUCCESS));
    CHECK(g_calls == 3);

    /* the runtime */
    g_calls = 0;
    CHECK_STATUS(try_rt(cudaErrorMemoryAllocation), FRT_ERR_OUT_OF_MEMORY);
    CHECK(g_calls == 1);
    CHECK_MSG(has("rt_status(e): cudaErrorMemoryAllocation: ") && has("(test_cuda_check.c:"),
              "%s", frt_last_error());
    CHECK_MSG(!has("/"), "the file keeps its folders: %s", frt_last_error());
    CHECK_STATUS(try_rt(cudaErrorInvalidValue), FRT_ERR_BACKEND);
    CHECK_MSG(has("cudaErrorInvalidValue"), "%s", frt_last_error());

    /* cuBLAS(Lt) */
    CHECK_STATUS(try_blas(CUBLAS_STATUS_ALLOC_FAILED), FRT_ERR_OUT_OF_MEMORY);
    CHECK_MSG(has("blas_status(s): CUBLAS_STATUS_ALLOC_FAILED"), "%s", frt_last_error());
    CHECK_STATUS(try_blas(CUBLAS_STATUS_NOT_SUPPORTED), FRT_ERR_BACKEND);
    CHECK_MSG(has("CUBLAS_STATUS_NOT_SUPPORTED"), "%s", frt_last_error());

    /* the driver: named where cudart finds one, numbered where it does not */
    CHECK_STATUS(try_cu(CUDA_ERROR_OUT_OF_MEMORY), FRT_ERR_OUT_OF_MEMORY);
    CHECK_MSG(has("cu_status(r): CUDA_ERROR_OUT_OF_MEMORY: ") || has("cu_status(r): CUresult 2 ("),
              "%s", frt_last_error());
    printf("driver status: %s\n", frt_last_error());
    CHECK_STATUS(try_cu(CUDA_ERROR_INVALID_VALUE), FRT_ERR_BACKEND);
    CHECK_MSG(has("CUDA_ERROR_INVALID_VALUE: ") || has("CUresult 1 ("), "%s", frt_last_error());
    return frt_test_report();
}
#endif
