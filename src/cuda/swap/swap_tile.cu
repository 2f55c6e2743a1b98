/* The device pool's per-tile kernels around the tile kernel (docs/swap.md,
 * "Device pool"): the scatter of a tile's stripes from the staging buffer
 * into pool slots, the choice of tile kernel (sw_cuda_swap_tile), the merge
 * of its partial states into the running (max, sum, acc) of each query row
 * and head, and the state's initialisation and finalisation.
 *
 * The tile kernel is the bulk-copy one (swap_tile_bulk.cu) on sm_90 and
 * later, the streaming tensor-core one (swap_tile_stream.cu) elsewhere; the
 * kernels they replaced are numbered variants in bench/dev (README there). */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "swap_carve.cuh"
#include "swap_merge.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

/* ----------------------------------------------------------- scatter -- */
/* One CTA per (missing block, stripe): copies the stripe's valid rows from
 * the staging buffer into its slot (16 bytes per thread and step). */
__global__ void swap_scatter_kernel(const sw_cuda_swap_scatter_args a)
{
    const int32_t f = blockIdx.x, s = blockIdx.y; /* s = h * 2 + kind */
    const sw_cuda_swap_fill e = a.fill[f];
    const int32_t h = s / 2, kind = s % 2;
    const size_t es = e.dtype ? 1 : 2;
    const size_t idx = a.layout == 0 ? ((size_t)e.m * a.H + h) * 2 + kind
                                     : ((size_t)kind * a.H + h) * a.stage_blocks + e.m;
    const uint4 *src = reinterpret_cast<const uint4 *>(a.stage + idx * a.stage_stride);
    uint4 *dst = reinterpret_cast<uint4 *>(a.pool + (size_t)e.slot * a.slot_bytes +
                                           (kind ? a.v_off : 0) +
                                           (size_t)h * a.B * a.D * es);
    const size_t n = (size_t)e.valid * a.D * es / 16;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        dst[i] = src[i];
}

extern "C" sw_status sw_cuda_swap_scatter(const sw_cuda_swap_scatter_args *a, void *stream)
{
    if (a->nfill <= 0)
        return SW_OK;
    dim3 grid((unsigned)a->nfill, (unsigned)(2 * a->H));
    static volatile int carved[64];
    SW_TRY(sw_swap_carve_max(swap_scatter_kernel, carved));
    swap_scatter_kernel<<<grid, 128, 0, (cudaStream_t)stream>>>(*a);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

/* One CTA per (row of the sequence, kv head): folds the nchunks partial
 * states into the running state. */
__global__ void swap_merge_kernel(const sw_cuda_swap_tile_args a)
{
    swap_merge_row(a, blockIdx.y, blockIdx.x);
}

/* The same fold, its chunks spread over the threads (swap_merge_row_wide). */
__global__ void swap_merge_wide_kernel(const sw_cuda_swap_tile_args a)
{
    extern __shared__ float mw[];
    swap_merge_row_wide(a, blockIdx.y, blockIdx.x, mw, mw + a.nchunks);
}

/* The split merge's first step: CTA (row, kv head h, part s) folds chunks
 * [s k, s k + k) of a.part into one partial state at chunk s of `out` (the
 * same layout, a.H x a.nrg row groups): max, then each chunk's weight
 * exp2(m_c - max) in shared memory (-1: no visible key), then the sums.
 * With no visible key in its chunks: (-inf, 0, 0). */
static __device__ __forceinline__ void swap_merge_part(const sw_cuda_swap_tile_args &a, float *out,
                                                       int32_t k, int sp, float *wsh)
{
    const int ridx = blockIdx.x, h = blockIdx.y;
    const int y = ridx / SW_CUDA_SWAP_RG, r = ridx % SW_CUDA_SWAP_RG;
    const int D = a.D, nt = blockDim.x, t = threadIdx.x;
    const int c0 = sp * k, c1 = c0 + k < a.nchunks ? c0 + k : a.nchunks;
    const size_t stride = sw_cuda_swap_chunk_floats(a.H, a.nrg, D);
    const size_t row = (((size_t)h * a.nrg + y) * SW_CUDA_SWAP_RG + r) * (size_t)(D + 2);
    float M = -INFINITY;
    for (int c = c0; c < c1; c++)
        M = fmaxf(M, a.part[(size_t)c * stride + row]); /* same address: broadcast */
    float *o = out + (size_t)sp * stride + row;
    if (M == -INFINITY) {
        for (int d = t; d < D + 2; d += nt)
            o[d] = d == 0 ? -INFINITY : 0.0f;
        return;
    }
    for (int c = c0 + t; c < c1; c += nt) {
        const float mc = a.part[(size_t)c * stride + row];
        wsh[c - c0] = mc == -INFINITY ? -1.0f : exp2f(mc - M);
    }
    __syncthreads();
    for (int d = t; d < D; d += nt) {
        float acc = 0.0f;
        const float *pa = a.part + (size_t)c0 * stride + row + 2 + d;
#pragma unroll 8
        for (int c = 0; c < c1 - c0; c++) {
            const float x = pa[(size_t)c * stride];
            const float wc = wsh[c];
            if (wc >= 0.0f)
                acc += wc * x;
        }
        o[2 + d] = acc;
    }
    if (t == 0) {
        float L = 0.0f;
        for (int c = 0; c < c1 - c0; c++)
            if (wsh[c] >= 0.0f)
                L += wsh[c] * a.part[(size_t)(c0 + c) * stride + row + 1];
        o[0] = M;
        o[1] = L;
    }
}

__global__ void swap_merge_part_kernel(const sw_cuda_swap_tile_args a, float *out, int32_t k)
{
    extern __shared__ float wsh[]; /* k weights */
    swap_merge_part(a, out, k, blockIdx.z, wsh);
}

/* n ranges of a.nchunks chunks each, one after another in a.part: CTA (row,
 * kv head, r x S1 + s) is part s of range r, exactly as
 * swap_merge_part_kernel computes it for that range alone; range r's parts
 * go to out + r x S1 parts. */
__global__ void swap_merge_part_ranges_kernel(const sw_cuda_swap_tile_args a, float *out, int32_t k,
                                              int32_t S1)
{
    extern __shared__ float wsh[]; /* k weights */
    const size_t stride = sw_cuda_swap_chunk_floats(a.H, a.nrg, a.D);
    const int r = blockIdx.z / S1;
    sw_cuda_swap_tile_args b = a;
    b.part = a.part + (size_t)r * a.nchunks * stride;
    swap_merge_part(b, out + (size_t)r * S1 * stride, k, blockIdx.z % S1, wsh);
}

/* The n ranges' folds in range order, each as swap_merge_wide_kernel folds
 * it alone (`src` holds range r's `per` partials at r x per; per: its parts
 * after swap_merge_part_ranges_kernel, else its chunks), with a barrier
 * between ranges: one CTA reads the state the previous range wrote. */
__global__ void swap_merge_wide_ranges_kernel(const sw_cuda_swap_tile_args a, const float *src,
                                              int32_t per, int32_t n)
{
    extern __shared__ float mw[];
    const size_t stride = sw_cuda_swap_chunk_floats(a.H, a.nrg, a.D);
    sw_cuda_swap_tile_args b = a;
    b.nchunks = per;
    for (int r = 0; r < n; r++) {
        b.part = const_cast<float *>(src) + (size_t)r * per * stride;
        swap_merge_row_wide(b, blockIdx.y, blockIdx.x, mw, mw + per);
        __syncthreads(); /* w / ls and the state's m, l reused by the next range */
    }
}

extern "C" int sw_cuda_swap_head_dim_ok(int32_t d)
{
    return d == 64 || d == 128 || d == 256;
}

/* swap_tile_stream.cu, swap_tile_bulk.cu, swap_tile_direct.cu, swap_gather.cu */
extern "C" sw_status sw_cuda_swap_tile_stream(const sw_cuda_swap_tile_args *a, void *stream,
                                              int *launched);
extern "C" sw_status sw_cuda_swap_tile_bulk(const sw_cuda_swap_tile_args *a, void *stream,
                                            int *launched);

extern "C" void sw_cuda_swap_tile_stream_preload(int32_t D);
extern "C" void sw_cuda_swap_tile_bulk_preload(int32_t D);
extern "C" void sw_cuda_swap_direct_preload(int32_t D);
extern "C" void sw_cuda_swap_gather_preload(void);

extern "C" sw_status sw_cuda_swap_tile(const sw_cuda_swap_tile_args *a, void *stream)
{
    if (a->nblk <= 0 || a->ql <= 0)
        return SW_OK;
    /* bulk copies (sm_90+), else the streaming kernel (sm_80+) */
    int launched = 0;
    SW_TRY(sw_cuda_swap_tile_bulk(a, stream, &launched));
    if (!launched)
        SW_TRY(sw_cuda_swap_tile_stream(a, stream, &launched));
    if (!launched)
        return sw_fail(SW_STATUS_UNSUPPORTED, "swap tile kernel: no instance for head_dim %d "
                       "on this device (64, 128 or 256; sm_80 or later)", (int)a->D);
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_merge(const sw_cuda_swap_tile_args *a, void *stream)
{
    if (a->nblk <= 0 || a->ql <= 0)
        return SW_OK;
    dim3 mg((unsigned)(a->ql * a->G), (unsigned)a->H);
    static volatile int carved[64];
    SW_TRY(sw_swap_carve_max(swap_merge_kernel, carved));
    swap_merge_kernel<<<mg, a->D < 128 ? a->D : 128, 0, (cudaStream_t)stream>>>(*a);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_merge_wide(const sw_cuda_swap_tile_args *a, void *stream)
{
    if (a->nblk <= 0 || a->ql <= 0)
        return SW_OK;
    const size_t smem = sizeof(float) * 2 * (size_t)a->nchunks;
    if (smem > 48 * 1024 - 256) /* beside its static 128 bytes */
        return sw_cuda_swap_merge(a, stream);
    dim3 mg((unsigned)(a->ql * a->G), (unsigned)a->H);
    static volatile int carved[64];
    SW_TRY(sw_swap_carve_max(swap_merge_wide_kernel, carved));
    swap_merge_wide_kernel<<<mg, a->D < 128 ? a->D : 128, smem, (cudaStream_t)stream>>>(*a);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

/* How sw_cuda_swap_merge_split folds a's chunks: 1 = in S1 parts of k
 * chunks, then those; 0 = one wide launch; -1 = the one-CTA-per-row merge
 * (too many chunks for the wide kernel's shared memory). */
static int merge_shape(const sw_cuda_swap_tile_args *a, const float *part2, size_t part2_floats,
                       int32_t sms, int32_t *k_out, int32_t *S1_out)
{
    /* parts (sw_cuda_swap_merge_parts), as many as part2 holds, at least 16
     * chunks a part (fewer: one launch does) */
    int64_t S = sw_cuda_swap_merge_parts((int64_t)a->ql * a->G * a->H, sms);
    const size_t stride = sw_cuda_swap_chunk_floats(a->H, a->nrg, a->D);
    const int64_t room = stride > 0 ? (int64_t)(part2_floats / stride) : 0;
    S = S < room ? S : room;
    if (S > a->nchunks / 16)
        S = a->nchunks / 16;
    const int wide = sizeof(float) * 2 * (size_t)a->nchunks <= 48 * 1024 - 256 ? 0 : -1;
    if (S < 2 || !part2)
        return wide;
    const int32_t k = (int32_t)((a->nchunks + S - 1) / S);
    if ((size_t)k * sizeof(float) > 32 * 1024)
        return wide;
    *k_out = k;
    *S1_out = (a->nchunks + k - 1) / k;
    return 1;
}

extern "C" sw_status sw_cuda_swap_merge_split(const sw_cuda_swap_tile_args *a, float *part2,
                                             size_t part2_floats, int32_t sms, void *stream)
{
    if (a->nblk <= 0 || a->ql <= 0)
        return SW_OK;
    int32_t k = 0, S1 = 0;
    if (merge_shape(a, part2, part2_floats, sms, &k, &S1) != 1)
        return sw_cuda_swap_merge_wide(a, stream);
    dim3 g1((unsigned)(a->ql * a->G), (unsigned)a->H, (unsigned)S1);
    static volatile int carved[64];
    SW_TRY(sw_swap_carve_max(swap_merge_part_kernel, carved));
    swap_merge_part_kernel<<<g1, a->D < 128 ? a->D : 128, sizeof(float) * (size_t)k,
                             (cudaStream_t)stream>>>(*a, part2, k);
    SW_CUDA_CHECK(cudaGetLastError());
    sw_cuda_swap_tile_args b = *a;
    b.part = part2;
    b.nchunks = S1;
    return sw_cuda_swap_merge_wide(&b, stream);
}

extern "C" sw_status sw_cuda_swap_merge_ranges(const sw_cuda_swap_tile_args *a, int32_t n,
                                              float *part2, size_t part2_floats, int32_t sms,
                                              void *stream)
{
    if (a->nblk <= 0 || a->ql <= 0 || n <= 0)
        return SW_OK;
    const size_t stride = sw_cuda_swap_chunk_floats(a->H, a->nrg, a->D);
    int32_t k = 0, S1 = 0;
    const int shape = merge_shape(a, part2, part2_floats, sms, &k, &S1);
    /* ranges a launch pair takes: as many as part2 holds the parts of */
    int32_t per_launch = n;
    if (shape == 1 && (size_t)n * (size_t)S1 * stride > part2_floats)
        per_launch = (int32_t)(part2_floats / ((size_t)S1 * stride));
    if (shape < 0 || n == 1 || per_launch < 2) {
        sw_cuda_swap_tile_args b = *a;
        for (int32_t r = 0; r < n; r++, b.part += (size_t)a->nchunks * stride)
            SW_TRY(sw_cuda_swap_merge_split(&b, part2, part2_floats, sms, stream));
        return SW_OK;
    }
    const dim3 mg((unsigned)(a->ql * a->G), (unsigned)a->H);
    const int nt = a->D < 128 ? a->D : 128;
    static volatile int carved_p[64], carved_w[64];
    SW_TRY(sw_swap_carve_max(swap_merge_part_ranges_kernel, carved_p));
    SW_TRY(sw_swap_carve_max(swap_merge_wide_ranges_kernel, carved_w));
    sw_cuda_swap_tile_args b = *a;
    for (int32_t r = 0; r < n;
         r += per_launch, b.part += (size_t)per_launch * a->nchunks * stride) {
        const int32_t m = n - r < per_launch ? n - r : per_launch;
        const float *src = b.part;
        int32_t per = a->nchunks;
        if (shape == 1) {
            dim3 g1(mg.x, mg.y, (unsigned)(m * S1));
            swap_merge_part_ranges_kernel<<<g1, nt, sizeof(float) * (size_t)k,
                                            (cudaStream_t)stream>>>(b, part2, k, S1);
            SW_CUDA_CHECK(cudaGetLastError());
            src = part2;
            per = S1;
        }
        swap_merge_wide_ranges_kernel<<<mg, nt, sizeof(float) * 2 * (size_t)per,
                                        (cudaStream_t)stream>>>(b, src, per, m);
        SW_CUDA_CHECK(cudaGetLastError());
    }
    return SW_OK;
}

/* ------------------------------------------------- init / finalise -- */
__global__ void swap_state_init_kernel(float *m, float *l, float *acc, int64_t n, int32_t D)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    if (i < n * D)
        acc[i] = 0.0f;
}

extern "C" sw_status sw_cuda_swap_state_init(float *m, float *l, float *acc, int64_t n,
                                             int32_t D, void *stream)
{
    if (n <= 0)
        return SW_OK;
    const int64_t tot = n * D;
    swap_state_init_kernel<<<(unsigned)((tot + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        m, l, acc, n, D);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

__global__ void swap_finalize_kernel(const float *m, const float *l, const float *acc, int64_t n,
                                     int32_t D, uint16_t *o, float *lse, float *of32)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * D)
        return;
    const int64_t row = i / D;
    const float li = l[row];
    /* (li NaN: the row saw a NaN score -- NaN out and NaN LSE, not the
     * empty row's zeros; the tile kernels give a part whose visible keys
     * all scored NaN a max of 0, so the merges carry it) */
    const float v = li != 0.0f ? acc[i] / li : 0.0f;
    if (o)
        o[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    if (of32)
        of32[i] = v;
    if (lse && i % D == 0)
        lse[row] = li != 0.0f ? (m[row] + log2f(li)) * 0.69314718055994531f : -INFINITY;
}

extern "C" sw_status sw_cuda_swap_finalize(const float *m, const float *l, const float *acc,
                                           int64_t n, int32_t D, uint16_t *o, float *lse,
                                           float *of32, void *stream)
{
    if (n <= 0)
        return SW_OK;
    const int64_t tot = n * D;
    swap_finalize_kernel<<<(unsigned)((tot + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        m, l, acc, n, D, o, lse, of32);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

extern "C" void sw_cuda_swap_preload(int32_t D)
{
    sw_swap_preload_fn(swap_scatter_kernel);
    sw_swap_preload_fn(swap_merge_kernel);
    sw_swap_preload_fn(swap_merge_wide_kernel);
    sw_swap_preload_fn(swap_merge_part_kernel);
    sw_swap_preload_fn(swap_merge_part_ranges_kernel);
    sw_swap_preload_fn(swap_merge_wide_ranges_kernel);
    sw_swap_preload_fn(swap_state_init_kernel);
    sw_swap_preload_fn(swap_finalize_kernel);
    sw_cuda_swap_tile_stream_preload(D);
    sw_cuda_swap_tile_bulk_preload(D);
    sw_cuda_swap_direct_preload(D);
    sw_cuda_swap_gather_preload();
}
