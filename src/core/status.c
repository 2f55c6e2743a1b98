/* Status names and the thread-local error detail. */
#include "sw_core.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char sw_err_buf[512];

sw_status sw_fail(sw_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sw_err_buf, sizeof sw_err_buf, fmt, ap);
    va_end(ap);
    return s;
}

void sw_clear_error(void) { sw_err_buf[0] = '\0'; }

const char *sw_last_error(void) { return sw_err_buf; }

const char *sw_status_str(sw_status s)
{
    switch (s) {
    case SW_OK: return "SW_OK";
    case SW_STATUS_INVALID: return "SW_STATUS_INVALID";
    case SW_STATUS_UNSUPPORTED: return "SW_STATUS_UNSUPPORTED";
    case SW_STATUS_NO_MEMORY: return "SW_STATUS_NO_MEMORY";
    case SW_STATUS_WORKSPACE_TOO_SMALL: return "SW_STATUS_WORKSPACE_TOO_SMALL";
    case SW_STATUS_MISALIGNED: return "SW_STATUS_MISALIGNED";
    case SW_STATUS_CUDA: return "SW_STATUS_CUDA";
    case SW_STATUS_NO_DEVICE: return "SW_STATUS_NO_DEVICE";
    case SW_STATUS_IO: return "SW_STATUS_IO";
    case SW_STATUS_CORRUPT: return "SW_STATUS_CORRUPT";
    case SW_STATUS_FULL: return "SW_STATUS_FULL";
    case SW_STATUS_NOT_FOUND: return "SW_STATUS_NOT_FOUND";
    case SW_STATUS_FAILED: return "SW_STATUS_FAILED";
    case SW_STATUS_INTERNAL: return "SW_STATUS_INTERNAL";
    }
    return "SW_STATUS_UNKNOWN";
}

size_t sw_dtype_size(sw_dtype t)
{
    switch (t) {
    case SW_DTYPE_F32: return 4;
    case SW_DTYPE_F16: return 2;
    case SW_DTYPE_BF16: return 2;
    }
    return 0;
}

const char *sw_backend_name(sw_backend b)
{
    switch (b) {
    case SW_BACKEND_AUTO: return "auto";
    case SW_BACKEND_CPU_REF: return "cpu-ref";
    case SW_BACKEND_CPU: return "cpu";
    case SW_BACKEND_CUDA: return "cuda";
    case SW_BACKEND_CUDA_PORTABLE: return "cuda-portable";
    case SW_BACKEND_CUDA_HOPPER: return "cuda-hopper";
    case SW_BACKEND_OPPONENT_FLASHINFER: return "flashinfer";
    case SW_BACKEND_OPPONENT_FLASHINFER_FA3: return "flashinfer-fa3";
    }
    return "unknown";
}
