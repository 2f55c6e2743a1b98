/* Direct tile kernel of the swap engine's device pool (swap/swap_cuda.h,
 * sw_cuda_swap_tile_direct; docs/swap.md, "Device pool"): one launch per
 * tile that reads each missing block's stripes straight out of the store's
 * pinned host tier (leased entries; a host address is a device address
 * under unified addressing), checks their CRC32C, writes them into the
 * block's victim slot and attends over them, together with the tile's
 * resident blocks read from their slots. What it replaces per tile: the
 * gather into the device staging, the scatter from the staging into the
 * slots and the tile kernel, three launches whose chain on the GPU was as
 * long as the tile's PCIe time (docs/perf/swap.md).
 *
 * A CTA of 128 threads takes (block range c, kv head h) of a tile whose
 * query rows fit one row group (ql x G <= 8: decode). Per block, K and V of
 * head h: the threads load the stripe with the host-tier gather's split
 * (store/crc32c_gf2.h: 16-byte pieces j NT + t of a zero-front-padded 8 KiB
 * segment, PPT a thread), so a missing stripe's CRC is computed from the
 * registers exactly as the gather kernel does, and stage its rows in shared
 * memory; the next block's loads are issued before this one computes (PCIe
 * latency in the shadow of the math). S = q.k (one (row, token) pair a
 * thread), the online softmax a warp per row, acc += P V with a thread
 * owning two dims of RPT rows. The CTA's state goes to part like the other
 * tile kernels' (the merge kernel folds it). Stripes longer than one
 * segment (block_size x head_dim x 2 > 8 KiB) and FP8 blocks take the
 * staged path (the engine never asks this kernel for them). */
#include "swap/swap_cuda.h"
#include "store/crc32c_gf2.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "swap_carve.cuh"
#include "swap_crc.cuh"

#include <cuda_runtime.h>
#include <math.h>

#define RG SW_CUDA_SWAP_RG
#define NT SW_CRC32C_GATHER_NT
#define PPT SW_CRC32C_GATHER_PPT
#define SEG SW_CRC32C_GATHER_SEG

static_assert(NT == 128 && RG == 8, "direct tile split");

template <int D> struct direct_cfg {
    static constexpr int BMAX = SEG / (2 * D);   /* rows of a one-segment BF16 stripe */
    static constexpr int ROWB = 2 * D + 16;      /* staged row, padded (bank spread) */
    static constexpr int CP = D / 2;             /* column pairs */
    static constexpr int RPT = RG * CP / NT;     /* rows per thread in P V */
    static_assert(RPT >= 1 && RG % RPT == 0 && NT % CP == 0, "head_dim 64, 128 or 256");
};

/* Thread t's multiplier of its piece j, row[j] * lane(t) (the gather kernel
 * computes them in every CTA: four GF(2) products a thread, most of a
 * one-block CTA's work here), [j][t]; set once per device. */
__device__ uint32_t g_direct_mul[PPT * NT];

template <int D>
__global__ void __launch_bounds__(NT) swap_direct_kernel(const sw_cuda_swap_direct_args A)
{
    using C = direct_cfg<D>;
    const sw_cuda_swap_tile_args &a = A.t;
    __shared__ uint32_t tab[256];
    __shared__ uint32_t red[2][NT / 32];
    __shared__ __align__(16) float qs[RG][D];
    __shared__ __align__(16) uint8_t Ks[C::BMAX * C::ROWB];
    __shared__ __align__(16) uint8_t Vs[C::BMAX * C::ROWB];
    __shared__ float S[RG][C::BMAX];
    __shared__ float m_s[RG], l_s[RG], c_s[RG];
    __shared__ long long lim_s[RG];

    const int c = A.c0 + (int)blockIdx.x, h = blockIdx.y;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int B = a.B;
    const size_t stripe_bytes = (size_t)B * D * 2; /* a slot's stripe (full block) */
    const int b0 = (int)((int64_t)a.nblk * c / a.nchunks);
    const int b1 = (int)((int64_t)a.nblk * (c + 1) / a.nchunks);
    const int rows = a.ql * a.G;

    for (int i = t; i < 256; i += NT)
        tab[i] = sw_crc32c_tab_entry((uint32_t)i);
    uint32_t mul[PPT];
#pragma unroll
    for (int j = 0; j < PPT; j++)
        mul[j] = g_direct_mul[j * NT + t];
    for (int i = t; i < RG * D / 8; i += NT) {
        const int r = i / (D / 8), d = (i % (D / 8)) * 8;
        uint4 u = make_uint4(0, 0, 0, 0);
        if (r < rows) {
            const int qrow = r / a.G, g = r % a.G;
            u = *reinterpret_cast<const uint4 *>(
                a.q + ((size_t)qrow * a.Hq + (size_t)h * a.G + g) * D + d);
        }
        const float sc = a.qscale;
        *reinterpret_cast<float4 *>(&qs[r][d]) =
            make_float4(__uint_as_float(u.x << 16) * sc, __uint_as_float(u.x & 0xffff0000u) * sc,
                        __uint_as_float(u.y << 16) * sc, __uint_as_float(u.y & 0xffff0000u) * sc);
        *reinterpret_cast<float4 *>(&qs[r][d + 4]) =
            make_float4(__uint_as_float(u.z << 16) * sc, __uint_as_float(u.z & 0xffff0000u) * sc,
                        __uint_as_float(u.w << 16) * sc, __uint_as_float(u.w & 0xffff0000u) * sc);
    }
    if (t < RG) {
        long long lim = -1;
        if (t < rows)
            lim = a.causal ? (long long)(t / a.G) + a.len - a.ql : a.len - 1;
        lim_s[t] = lim;
        m_s[t] = -INFINITY;
        l_s[t] = 0.0f;
    }
    __syncthreads(); /* tab (the first block's CRC reads it before any other barrier), qs, state */

    /* the registers of one block: its descriptor, its two stripes' gather
     * items (a missing block), K pieces then V pieces */
    uint4 v[2][PPT];
    sw_cuda_swap_dblk e = {0, 0, 0, -1};
    sw_cuda_swap_gather_item it[2] = {};
    auto load = [&](int i) {
        e = A.blk[i];
        const int64_t len = (int64_t)e.valid * D * 2;
        const int64_t pad = SEG - len;
#pragma unroll
        for (int kind = 0; kind < 2; kind++) {
            const uint4 *src;
            if (e.item >= 0) {
                it[kind] = A.items[e.item + 2 * h + kind];
                src = reinterpret_cast<const uint4 *>(it[kind].src);
            } else {
                src = reinterpret_cast<const uint4 *>(a.pool + (size_t)e.slot * a.slot_bytes +
                                                      (kind ? a.v_off : 0) +
                                                      (size_t)h * stripe_bytes);
            }
#pragma unroll
            for (int j = 0; j < PPT; j++) {
                const int64_t o = ((int64_t)j * NT + t) * 16;
                if (o >= pad)
                    v[kind][j] = e.item >= 0 ? __ldcs(src + (o - pad) / 16) : src[(o - pad) / 16];
                else
                    v[kind][j] = make_uint4(0, 0, 0, 0);
            }
        }
    };

    const int CP = C::CP, RPT = C::RPT;
    const int cp = t % CP, r0 = (t / CP) * RPT;
    float acc[RPT][2];
#pragma unroll
    for (int r = 0; r < RPT; r++)
        acc[r][0] = acc[r][1] = 0.0f;

    if (b0 < b1)
        load(b0);
    for (int i = b0; i < b1; i++) {
        const sw_cuda_swap_dblk cur = e;
        const uint32_t want[2] = {it[0].crc_raw, it[1].crc_raw};
        const uint32_t id[2] = {it[0].id, it[1].id};
        const int64_t len = (int64_t)cur.valid * D * 2;
        const int64_t pad = SEG - len;
        /* stage the rows; a missing block's bytes also go to its slot and
         * through the CRC (the gather kernel's split, both stripes) */
        uint32_t crc[2] = {0u, 0u};
#pragma unroll
        for (int kind = 0; kind < 2; kind++) {
            uint8_t *sm = kind ? Vs : Ks;
            uint4 *dst = cur.item >= 0 ? reinterpret_cast<uint4 *>(A.pool + it[kind].dst)
                                       : nullptr;
#pragma unroll
            for (int j = 0; j < PPT; j++) {
                const int64_t o = ((int64_t)j * NT + t) * 16;
                if (o < pad)
                    continue;
                const int64_t b = o - pad;
                *reinterpret_cast<uint4 *>(sm + (b / (2 * D)) * C::ROWB + b % (2 * D)) =
                    v[kind][j];
                if (dst)
                    dst[b / 16] = v[kind][j];
            }
            if (cur.item >= 0)
                crc[kind] = swap_crc_pieces_warp(v[kind], tab, mul);
        }
        if (cur.item >= 0 && lane == 0) {
            red[0][warp] = crc[0];
            red[1][warp] = crc[1];
        }
        __syncthreads(); /* rows staged, red written; qs / state on the first pass */
        if (i + 1 < b1)
            load(i + 1); /* in flight while this block computes */
        if (cur.item >= 0 && t < 2) {
            uint32_t s = 0;
#pragma unroll
            for (int w = 0; w < NT / 32; w++)
                s ^= red[t][w];
            if (s != want[t]) {
                const uint32_t n = atomicAdd(A.bad, 1u);
                if (n < A.bad_cap)
                    A.bad[1 + n] = id[t];
            }
        }

        /* S = q.k: pair (row, token) p, one a thread per pass */
        const long long kpos0 = (long long)cur.block * B;
        for (int p = t; p < RG * B; p += NT) {
            const int r = p / B, tok = p % B;
            float s = -INFINITY;
            if (tok < cur.valid && kpos0 + tok <= lim_s[r]) {
                const uint8_t *kr = Ks + tok * C::ROWB;
                const float *qr = qs[r];
                float x = 0.0f;
#pragma unroll 4
                for (int d = 0; d < D; d += 8) {
                    const uint4 u = *reinterpret_cast<const uint4 *>(kr + d * 2);
                    const float4 qa = *reinterpret_cast<const float4 *>(qr + d);
                    const float4 qb = *reinterpret_cast<const float4 *>(qr + d + 4);
                    x = fmaf(qa.x, __uint_as_float(u.x << 16), x);
                    x = fmaf(qa.y, __uint_as_float(u.x & 0xffff0000u), x);
                    x = fmaf(qa.z, __uint_as_float(u.y << 16), x);
                    x = fmaf(qa.w, __uint_as_float(u.y & 0xffff0000u), x);
                    x = fmaf(qb.x, __uint_as_float(u.z << 16), x);
                    x = fmaf(qb.y, __uint_as_float(u.z & 0xffff0000u), x);
                    x = fmaf(qb.z, __uint_as_float(u.w << 16), x);
                    x = fmaf(qb.w, __uint_as_float(u.w & 0xffff0000u), x);
                }
                s = x;
            }
            S[r][tok] = s;
        }
        __syncthreads();
        /* online softmax: a warp per row, lanes over the tokens */
        for (int r = warp; r < RG; r += NT / 32) {
            float mx = -INFINITY;
            for (int tok = lane; tok < B; tok += 32)
                mx = fmaxf(mx, S[r][tok]);
#pragma unroll
            for (int w = 16; w >= 1; w /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
            const float m_old = m_s[r];
            const float m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
            for (int tok = lane; tok < B; tok += 32) {
                const float sv = S[r][tok];
                const float pv = sv == -INFINITY ? 0.0f : exp2f(sv - m_new);
                S[r][tok] = pv;
                sum += pv;
            }
#pragma unroll
            for (int w = 16; w >= 1; w /= 2)
                sum += __shfl_xor_sync(0xffffffffu, sum, w);
            if (lane == 0) {
                const float corr = m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
                c_s[r] = corr;
                l_s[r] = l_s[r] * corr + sum;
                m_s[r] = m_new;
            }
        }
        __syncthreads();
        /* acc = acc * corr + P V */
#pragma unroll
        for (int r = 0; r < RPT; r++) {
            const float cr = c_s[r0 + r];
            acc[r][0] *= cr;
            acc[r][1] *= cr;
        }
        for (int tok = 0; tok < cur.valid; tok++) {
            const uint32_t u = *reinterpret_cast<const uint32_t *>(Vs + tok * C::ROWB + cp * 4);
            const float v0 = __uint_as_float(u << 16), v1 = __uint_as_float(u & 0xffff0000u);
#pragma unroll
            for (int r = 0; r < RPT; r++) {
                const float pv = S[r0 + r][tok];
                acc[r][0] = fmaf(pv, v0, acc[r][0]);
                acc[r][1] = fmaf(pv, v1, acc[r][1]);
            }
        }
        __syncthreads(); /* Ks, Vs, S and red are rewritten by the next block */
    }

    const size_t base = ((size_t)c * a.H + h) * a.nrg * RG; /* row group 0 */
#pragma unroll
    for (int r = 0; r < RPT; r++) { /* scalar stores: part is only 4-byte aligned */
        float *o = &a.part[(base + r0 + r) * (D + 2) + 2 + 2 * cp];
        o[0] = acc[r][0];
        o[1] = acc[r][1];
    }
    if (t < RG) {
        /* (max -inf with a NaN sum: every visible key scored NaN; 0, so
         * that the merges, which skip a part whose max is -inf, carry it) */
        a.part[(base + t) * (D + 2)] = m_s[t] == -INFINITY && l_s[t] != 0.0f ? 0.0f : m_s[t];
        a.part[(base + t) * (D + 2) + 1] = l_s[t];
    }
}

/* g_direct_mul on the current device, once. */
static sw_status direct_mul_set()
{
    static volatile int done[64];
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && done[dev])
        return SW_OK;
    sw_crc32c_gather_consts k;
    sw_crc32c_gather_consts_fill(&k);
    uint32_t m[PPT * NT];
    for (int t = 0; t < NT; t++) {
        const uint32_t ln = sw_crc32c_gather_lane(t);
        for (int j = 0; j < PPT; j++)
            m[j * NT + t] = sw_crc32c_gf2_mul(k.row[j], ln);
    }
    SW_CUDA_CHECK(cudaMemcpyToSymbol(g_direct_mul, m, sizeof m));
    /* a copy from pageable memory may return before it lands, and the tile
     * streams do not wait for the legacy stream: once per device */
    SW_CUDA_CHECK(cudaDeviceSynchronize());
    if (dev < 64)
        done[dev] = 1;
    return SW_OK;
}

extern "C" int sw_cuda_swap_direct_ok(int32_t D, int32_t B, int32_t nrg)
{
    return (D == 64 || D == 128 || D == 256) && B > 0 && (int64_t)B * D * 2 <= SEG && nrg == 1;
}

template <int D> static sw_status launch_direct(const sw_cuda_swap_direct_args *A, cudaStream_t st)
{
    static volatile int carved[64];
    SW_TRY(direct_mul_set());
    SW_TRY(sw_swap_carve_max(swap_direct_kernel<D>, carved));
    const int32_t n = A->nch > 0 ? A->nch : A->t.nchunks;
    if (A->c0 < 0 || A->c0 + n > A->t.nchunks)
        return sw_fail(SW_STATUS_INTERNAL, "direct tile kernel: chunks %d + %d of %d", (int)A->c0,
                       (int)n, (int)A->t.nchunks);
    dim3 grid((unsigned)n, (unsigned)A->t.H, 1u);
    swap_direct_kernel<D><<<grid, NT, 0, st>>>(*A);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

extern "C" void sw_cuda_swap_direct_preload(int32_t D)
{
    switch (D) {
    case 64: sw_swap_preload_fn(swap_direct_kernel<64>); break;
    case 128: sw_swap_preload_fn(swap_direct_kernel<128>); break;
    case 256: sw_swap_preload_fn(swap_direct_kernel<256>); break;
    default: break;
    }
}

extern "C" sw_status sw_cuda_swap_tile_direct(const sw_cuda_swap_direct_args *A, void *stream)
{
    const sw_cuda_swap_tile_args &a = A->t;
    if (a.nblk <= 0 || a.ql <= 0)
        return SW_OK;
    if (!sw_cuda_swap_direct_ok(a.D, a.B, a.nrg))
        return sw_fail(SW_STATUS_INTERNAL, "direct tile kernel: head_dim %d, block %d, %d row "
                       "groups (one segment of %d bytes a stripe, one row group)", (int)a.D,
                       (int)a.B, (int)a.nrg, (int)SEG);
    cudaStream_t st = (cudaStream_t)stream;
    switch (a.D) {
    case 64: return launch_direct<64>(A, st);
    case 128: return launch_direct<128>(A, st);
    default: return launch_direct<256>(A, st);
    }
}
