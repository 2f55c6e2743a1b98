/* Host side of the portable prefill kernel: which kernel serves a
 * (head_dim, dtype, causal), how much shared memory it gets on a device,
 * how many CTAs the persistent grid holds, and the launch.
 *
 * sw_portable_select() is the one place that decides; config (plan time)
 * and launch (run time) both go through it so they cannot disagree. */
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "portable_launch.h"

#include <cuda_runtime.h>

namespace {

constexpr int kMaxDevices = 64;
/* The kernel's static shared memory (item slots, per-row key bounds: ~520
 * bytes) counts against the same per-block limit as the dynamic part. */
constexpr int kStaticSmemReserve = 1024;

/* Per device: opt-in smem limit, SM count, and a bit per kernel (12) whose
 * dynamic smem limit was already raised; written with relaxed atomics: two
 * threads racing only repeat the same idempotent driver calls. */
struct dev_state {
    int smem_optin;  /* 0 = not queried yet */
    int sms;
    unsigned prepared;
};
dev_state g_dev[kMaxDevices];

sw_status get_kernel(int32_t head_dim, sw_dtype dtype, int causal, sw_portable_kernel *k,
                     int *index)
{
    int ok = 0, slot = 0;
    switch (head_dim) {
    case 64: ok = sw_portable_kernel_d64(dtype, causal, k); slot = 0; break;
    case 128: ok = sw_portable_kernel_d128(dtype, causal, k); slot = 1; break;
    case 256: ok = sw_portable_kernel_d256(dtype, causal, k); slot = 2; break;
    default: break;
    }
    if (!ok)
        return sw_fail(SW_STATUS_UNSUPPORTED,
                       "portable CUDA prefill: head_dim %d with dtype %d is not compiled",
                       (int)head_dim, (int)dtype);
    *index = (slot * 2 + (dtype == SW_DTYPE_F16)) * 2 + (causal != 0);
    return SW_OK;
}

sw_status device_state(int dev, dev_state **out)
{
    if (dev < 0 || dev >= kMaxDevices)
        return sw_fail(SW_STATUS_NO_DEVICE, "CUDA device %d out of range", dev);
    dev_state *s = &g_dev[dev];
    if (__atomic_load_n(&s->smem_optin, __ATOMIC_RELAXED) == 0) {
        int optin = 0, sms = 0;
        SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        SW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        __atomic_store_n(&s->sms, sms, __ATOMIC_RELAXED);
        __atomic_store_n(&s->smem_optin, optin, __ATOMIC_RELAXED);
    }
    *out = s;
    return SW_OK;
}

/* Dynamic smem and K/V buffer mode for this kernel on this device; raises
 * the kernel's smem limit once per device. The caller has made `dev`
 * current. Preference: split, then shared; a mode is taken if its smem fits
 * the device's per-block opt-in limit. */
sw_status sw_portable_select(int dev, int32_t head_dim, sw_dtype dtype, int causal,
                             sw_portable_kernel *k, int *smem, int *kv_mode)
{
#ifdef SW_PORTABLE_DEV_PREFER_SHARED /* bench/dev builds: test the shared K/V mode */
    static const int order[SW_KV_MODES] = {SW_KV_SHARED, SW_KV_SPLIT};
#else
    static const int order[SW_KV_MODES] = {SW_KV_SPLIT, SW_KV_SHARED};
#endif
    int index = 0;
    dev_state *s = nullptr;
    SW_TRY(get_kernel(head_dim, dtype, causal, k, &index));
    SW_TRY(device_state(dev, &s));
    const int optin = __atomic_load_n(&s->smem_optin, __ATOMIC_RELAXED);
    *kv_mode = -1;
    for (int i = 0; i < SW_KV_MODES && *kv_mode < 0; ++i) {
        const int m = order[i];
        if (k->smem[m] > 0 && k->smem[m] + kStaticSmemReserve <= optin) {
            *kv_mode = m;
            *smem = k->smem[m];
        }
    }
    if (*kv_mode < 0)
        return sw_fail(SW_STATUS_UNSUPPORTED,
                       "portable CUDA prefill: head_dim %d needs more shared memory per block "
                       "than device %d allows (%d bytes)",
                       (int)head_dim, dev, optin);
    const unsigned bit = 1u << index;
    if (!(__atomic_load_n(&s->prepared, __ATOMIC_RELAXED) & bit)) {
        SW_CUDA_CHECK(cudaFuncSetAttribute(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           *smem));
        __atomic_fetch_or(&s->prepared, bit, __ATOMIC_RELAXED);
    }
    return SW_OK;
}

} // namespace

extern "C" sw_status sw_cuda_prefill_portable_config(int32_t device, int32_t head_dim,
                                                     sw_dtype dtype, int32_t *tile_m,
                                                     int32_t *grid_ctas)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    if (device < 0 || device >= n)
        return sw_fail(SW_STATUS_NO_DEVICE, "CUDA device %d requested, %d usable", (int)device,
                       n);
    int old = 0;
    SW_CUDA_CHECK(cudaGetDevice(&old));
    SW_CUDA_CHECK(cudaSetDevice(device));
    /* Both causal variants must fit the grid: take the smaller residency. */
    int per_sm = 1 << 30, tm = 0;
    sw_status st = SW_OK;
    for (int causal = 0; causal < 2 && st == SW_OK; ++causal) {
        sw_portable_kernel k;
        int smem = 0, kv_mode = 0, blocks = 0;
        st = sw_portable_select(device, head_dim, dtype, causal, &k, &smem, &kv_mode);
        if (st != SW_OK)
            break;
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, k.threads,
                                                                      (size_t)smem);
        if (e != cudaSuccess) {
            st = sw_fail(SW_STATUS_CUDA, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: %s at %s:%d",
                         cudaGetErrorString(e), __FILE__, __LINE__);
            break;
        }
        if (blocks < per_sm)
            per_sm = blocks;
        tm = k.tile_m;
    }
    const int sms = g_dev[device].sms;
    (void)cudaSetDevice(old);
    if (st != SW_OK)
        return st;
    if (per_sm < 1)
        return sw_fail(SW_STATUS_UNSUPPORTED,
                       "portable CUDA prefill: head_dim %d kernel cannot be resident on device %d",
                       (int)head_dim, (int)device);
    *tile_m = tm;
    *grid_ctas = sms * per_sm;
    return SW_OK;
}

extern "C" sw_status sw_cuda_prefill_portable_launch(const sw_cuda_prefill_args *a, void *stream)
{
    if (a->num_work <= 0)
        return SW_OK;
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    sw_portable_kernel k;
    int smem = 0, kv_mode = 0;
    SW_TRY(sw_portable_select(dev, a->head_dim, a->dtype, a->causal, &k, &smem, &kv_mode));
    /* More CTAs than items would only take an index and leave. */
    const int grid = a->grid < a->num_work ? a->grid : a->num_work;
    SW_ASSERT_RET(grid > 0);
    sw_cuda_prefill_args args = *a;
    void *params[] = {&args, &kv_mode};
    SW_CUDA_CHECK(cudaLaunchKernel(k.fn, dim3((unsigned)grid), dim3((unsigned)k.threads), params,
                                   (size_t)smem, (cudaStream_t)stream));
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
