/*
 * exec/exec_cuda_stub.c - the cuda backend of a build without CUDA: no
 * devices, and contexts fail with FRT_ERR_UNSUPPORTED. No other entry is ever
 * reached, since no cuda context can exist.
 */
#include "exec/exec_internal.h"

#include "util/error.h"

#if !FRT_HAVE_CUDA

static int stub_device_count(int *count)
{
    *count = 0;
    return 0;
}

static int stub_context_init(frt_context *ctx)
{
    (void)ctx;
    return frt_error(FRT_ERR_UNSUPPORTED, "cuda: frt was built without CUDA");
}

const frt_exec_ops frt_exec_cuda_ops = {
    .name = "cuda",
    .device_count = stub_device_count,
    .context_init = stub_context_init,
};

#else
typedef int frt_exec_cuda_stub_unused_;
#endif
