/* Host side of the Hopper prefill kernel: whether it can serve a device and
 * problem, the tensor maps of Q, K and V (encoded per launch from the run's
 * pointers and strides: a host-only driver call, no synchronisation), and
 * the launch on the caller's stream.
 *
 * The kernel exists as machine code only when the build targets sm_90a
 * (SW_HAVE_SM90A, set by CMake when SPILLWAY_CUDA_ARCHS lists 90a); the
 * dispatcher asks sw_cuda_prefill_hopper_config() and falls back to the
 * portable kernel when it says no. */
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "hopper_launch.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace {

constexpr int kMaxDevices = 64;

struct dev_state {
    int checked; /* 0 = not yet; 1 = Hopper (9.0); -1 = another architecture */
    int sms;
    unsigned prepared; /* bit per kernel whose smem limit was raised */
};
dev_state g_dev[kMaxDevices];

PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;

sw_status get_encode(PFN_cuTensorMapEncodeTiled_v12000 *out)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = __atomic_load_n(&g_encode, __ATOMIC_ACQUIRE);
    if (!fn) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        SW_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                       cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !p)
            return sw_fail(SW_STATUS_CUDA, "the CUDA driver has no cuTensorMapEncodeTiled");
        fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        __atomic_store_n(&g_encode, fn, __ATOMIC_RELEASE);
    }
    *out = fn;
    return SW_OK;
}

sw_status get_kernel(int32_t head_dim, sw_dtype dtype, int causal, int wide, int paged,
                     sw_hopper_kernel *k, int *index)
{
    int ok = 0, slot = 0;
    switch (head_dim) {
    case 64: ok = sw_hopper_kernel_d64(dtype, causal, 0, paged, k); slot = paged ? 4 : 0; break;
    case 128:
        wide = wide && !causal && !paged; /* the only wide kernel */
        ok = sw_hopper_kernel_d128(dtype, causal, wide, paged, k);
        slot = paged ? 5 : wide ? 3 : 1;
        break;
    case 256:
        ok = sw_hopper_kernel_d256(dtype, causal, 0, paged, k);
        slot = paged ? 6 : 2;
        break;
    default: break;
    }
    if (!ok)
        return sw_fail(SW_STATUS_UNSUPPORTED,
                       "Hopper CUDA prefill: head_dim %d with dtype %d is not compiled",
                       (int)head_dim, (int)dtype);
    *index = (slot * 2 + (dtype == SW_DTYPE_F16)) * 2 + (causal != 0);
    return SW_OK;
}

/* Is `dev` a compute capability 9.0 device? Cached per device. */
sw_status device_state(int dev, dev_state **out)
{
    if (dev < 0 || dev >= kMaxDevices)
        return sw_fail(SW_STATUS_NO_DEVICE, "CUDA device %d out of range", dev);
    dev_state *s = &g_dev[dev];
    if (__atomic_load_n(&s->checked, __ATOMIC_ACQUIRE) == 0) {
        int major = 0, minor = 0, sms = 0;
        SW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        SW_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        SW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        __atomic_store_n(&s->sms, sms, __ATOMIC_RELAXED);
        __atomic_store_n(&s->checked, (major == 9 && minor == 0) ? 1 : -1, __ATOMIC_RELEASE);
    }
    *out = s;
    return SW_OK;
}

/* The kernel for this problem on `dev` (current), its smem limit raised. */
sw_status select(int dev, int32_t head_dim, sw_dtype dtype, int causal, int wide, int paged,
                 sw_hopper_kernel *k)
{
#ifndef SW_HAVE_SM90A
    (void)dev; (void)head_dim; (void)dtype; (void)causal; (void)wide; (void)paged; (void)k;
    return sw_fail(SW_STATUS_UNSUPPORTED,
                   "Hopper CUDA prefill: this build does not target sm_90a (SPILLWAY_CUDA_ARCHS)");
#else
    dev_state *s = nullptr;
    int index = 0;
    SW_TRY(device_state(dev, &s));
    if (__atomic_load_n(&s->checked, __ATOMIC_ACQUIRE) != 1)
        return sw_fail(SW_STATUS_UNSUPPORTED,
                       "Hopper CUDA prefill: device %d is not compute capability 9.0", dev);
    SW_TRY(get_kernel(head_dim, dtype, causal, wide, paged, k, &index));
    const unsigned bit = 1u << index;
    if (!(__atomic_load_n(&s->prepared, __ATOMIC_RELAXED) & bit)) {
        int optin = 0;
        SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        if (k->smem > optin)
            return sw_fail(SW_STATUS_UNSUPPORTED,
                           "Hopper CUDA prefill: head_dim %d needs %d bytes of shared memory, "
                           "device %d allows %d", (int)head_dim, k->smem, dev, optin);
        SW_CUDA_CHECK(cudaFuncSetAttribute(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           k->smem));
        __atomic_fetch_or(&s->prepared, bit, __ATOMIC_RELAXED);
    }
    return SW_OK;
#endif
}

/* Rows of one tensor as (element, head, row, chunk): a box of (64, heads,
 * rows, D/64) lands in shared memory as [chunk][row][head][64], i.e. one
 * 128-byte line per (row, head) per chunk, in the 128-byte swizzle. */
sw_status make_map(PFN_cuTensorMapEncodeTiled_v12000 encode, CUtensorMap *map, sw_dtype dtype,
                   const void *base, int64_t rows, int32_t heads, int32_t head_dim,
                   int64_t row_stride, int box_heads, int box_rows, const char *what)
{
    const cuuint64_t dims[4] = {64, (cuuint64_t)heads, (cuuint64_t)(rows > 0 ? rows : 1),
                                (cuuint64_t)(head_dim / 64)};
    const cuuint64_t strides[3] = {(cuuint64_t)head_dim * 2, (cuuint64_t)row_stride * 2, 128};
    const cuuint32_t box[4] = {64, (cuuint32_t)box_heads, (cuuint32_t)box_rows,
                               (cuuint32_t)(head_dim / 64)};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    const CUresult r = encode(map,
                              dtype == SW_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                     : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                              4, const_cast<void *>(base), dims, strides, box, estr,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return sw_fail(SW_STATUS_CUDA,
                       "cuTensorMapEncodeTiled(%s: %lld rows x %d heads x d%d, row stride %lld) "
                       "failed with CUresult %d", what, (long long)rows, (int)heads,
                       (int)head_dim, (long long)row_stride, (int)r);
    return SW_OK;
}

} // namespace

extern "C" sw_status sw_cuda_prefill_hopper_config(int32_t device, int32_t head_dim,
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
    sw_status st = SW_OK;
    int tm = 0;
    /* every kernel a plan may choose: causal, non-causal, at d128 the wide
     * non-causal one, and both over bulk-gathered paged K/V (their shared
     * memory is checked here, not at the first run) */
    for (int v = 0; v < (head_dim == 128 ? 3 : 2) && st == SW_OK; ++v) {
        sw_hopper_kernel k;
        st = select(device, head_dim, dtype, v == 1, v == 2, 0, &k);
        tm = k.tile_m;
    }
    for (int c = 0; c < 2 && st == SW_OK; ++c) {
        sw_hopper_kernel k;
        st = select(device, head_dim, dtype, c, 0, 1, &k);
    }
    (void)cudaSetDevice(old);
    if (st != SW_OK)
        return st;
    *tile_m = tm;
    *grid_ctas = g_dev[device].sms; /* one CTA per SM: ~200 KB of smem each */
    return SW_OK;
}

extern "C" sw_status sw_cuda_prefill_hopper_launch(const sw_cuda_prefill_args *a, void *stream)
{
    if (a->num_work <= 0)
        return SW_OK;
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    sw_hopper_kernel k;
    /* paged K/V whose pieces bulk copies can move: the kernel with staging
     * for them (a gather is never planned for the wide kernel's tiles) */
    const int paged = a->gather.num_tiles > 0 && a->gather.bulk;
    SW_TRY(select(dev, a->head_dim, a->dtype, a->causal, a->wide_kv, paged, &k));
    if (a->gather.num_tiles > 0 &&
        (a->gather.tile_keys != k.tile_n || a->gather.piece_keys <= 0 ||
         a->gather.tile_keys % a->gather.piece_keys != 0))
        return sw_fail(SW_STATUS_INTERNAL, "Hopper CUDA prefill: a gather planned for %d-key "
                       "tiles of %d-key pieces, the kernel's tiles are %d keys",
                       (int)a->gather.tile_keys, (int)a->gather.piece_keys, k.tile_n);
    PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    SW_TRY(get_encode(&encode));

    const int group = a->num_qo_heads / a->num_kv_heads;
    alignas(64) CUtensorMap maps[4];
    SW_TRY(make_map(encode, &maps[0], a->dtype, a->q, a->total_q, a->num_qo_heads, a->head_dim,
                    a->q_stride, 1, k.tile_m, "q"));
    /* GQA-packed tiles: `group` heads x tile_m/group tokens (the planner
     * packs only when the group divides tile_m). */
    const int g = (group >= 1 && k.tile_m % group == 0) ? group : 1;
    if (g == 1)
        maps[1] = maps[0]; /* no packed items: the plain map */
    else
        SW_TRY(make_map(encode, &maps[1], a->dtype, a->q, a->total_q, a->num_qo_heads,
                        a->head_dim, a->q_stride, g, k.tile_m / g, "q packed"));
    SW_TRY(make_map(encode, &maps[2], a->dtype, a->k, a->total_kv, a->num_kv_heads, a->head_dim,
                    a->k_stride, 1, k.tile_n, "k"));
    SW_TRY(make_map(encode, &maps[3], a->dtype, a->v, a->total_kv, a->num_kv_heads, a->head_dim,
                    a->v_stride, 1, k.tile_n, "v"));

    const int grid = a->grid < a->num_work ? a->grid : a->num_work;
    SW_ASSERT_RET(grid > 0);
    sw_cuda_prefill_args args = *a;
    void *params[] = {&maps[0], &maps[1], &maps[2], &maps[3], &args};
    SW_CUDA_CHECK(cudaLaunchKernel(k.fn, dim3((unsigned)grid), dim3((unsigned)k.threads), params,
                                   (size_t)k.smem, (cudaStream_t)stream));
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
