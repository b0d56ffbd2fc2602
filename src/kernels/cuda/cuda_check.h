/*
 * kernels/cuda/cuda_check.h - one generic check macro for CUDA-family status
 * codes, instantiated for the CUDA runtime, cuBLAS / cuBLASLt and the driver.
 *
 *   FRT_CUDA_TRY(cudaMalloc(&p, n));         returns an frt status on failure
 *   FRT_CUBLAS_TRY(cublasLtMatmul(...));
 *   FRT_CU_TRY(fn(...));                     fn: a driver entry point (CUresult)
 *
 * A failure becomes frt_error(FRT_ERR_BACKEND, "CALL: cudaErrorName: text
 * (file:line)"); allocation failures (cudaErrorMemoryAllocation,
 * CUBLAS_STATUS_ALLOC_FAILED, CUDA_ERROR_OUT_OF_MEMORY) become
 * FRT_ERR_OUT_OF_MEMORY. A failed runtime call also clears the runtime's
 * (non-sticky) last error, so it does not resurface in a later
 * cudaGetLastError check.
 *
 * Here, the lowest CUDA layer, so that the kernels, exec and the model code
 * share it without the kernels including exec. Usable from C and CUDA C++
 * sources; needs the CUDA toolkit headers, so it lives under cuda/ and is
 * built only with CUDA. libfrt never links the driver library (cudart loads
 * it): frt_cu_fail names a CUresult through cuGetErrorName fetched with
 * cudaGetDriverEntryPointByVersion, or by its number when that fails.
 */
#ifndef FRT_KERNELS_CUDA_CHECK_H
#define FRT_KERNELS_CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Set the last-error message for a failed call and return its frt status
 * (negative). */
int frt_cuda_fail(cudaError_t err, const char *call, const char *file, int line);
int frt_cublas_fail(cublasStatus_t st, const char *call, const char *file, int line);
int frt_cu_fail(CUresult res, const char *call, const char *file, int line);

#ifdef __cplusplus
}
#endif

/* The generic form: evaluate `call` of status type T once; on anything but
 * `success` return fail_fn(status, "call", file, line) from the caller. */
#define FRT_CHECK_GEN(T, call, success, fail_fn)                                \
    do {                                                                       \
        T frt_check_st_ = (call);                                              \
        if (frt_check_st_ != (success))                                        \
            return fail_fn(frt_check_st_, #call, __FILE__, __LINE__);          \
    } while (0)

#define FRT_CUDA_TRY(call) FRT_CHECK_GEN(cudaError_t, call, cudaSuccess, frt_cuda_fail)
#define FRT_CUBLAS_TRY(call) \
    FRT_CHECK_GEN(cublasStatus_t, call, CUBLAS_STATUS_SUCCESS, frt_cublas_fail)
#define FRT_CU_TRY(call) FRT_CHECK_GEN(CUresult, call, CUDA_SUCCESS, frt_cu_fail)

#endif
