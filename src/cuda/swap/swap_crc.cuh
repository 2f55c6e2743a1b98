/* The host-tier gather's CRC32C split (store/crc32c_gf2.h), one thread's
 * part: the raw CRCs of its PPT 16-byte pieces (four independent
 * byte-table chains, interleaved), each times the thread's multiplier for
 * its piece, XORed, then XORed over the warp. The gather kernel
 * (swap_gather.cu) and the direct tile kernel (swap_tile_direct.cu) both
 * run it; the CTA's warps are then XORed by the caller. */
#ifndef SW_CUDA_SWAP_CRC_CUH
#define SW_CUDA_SWAP_CRC_CUH

#include "store/crc32c_gf2.h"

#include <cuda_runtime.h>

static __device__ __forceinline__ uint32_t swap_crc_pieces_warp(
    const uint4 (&v)[SW_CRC32C_GATHER_PPT], const uint32_t *tab,
    const uint32_t (&mul)[SW_CRC32C_GATHER_PPT])
{
    constexpr int PPT = SW_CRC32C_GATHER_PPT;
    uint32_t pc[PPT];
#pragma unroll
    for (int j = 0; j < PPT; j++)
        pc[j] = 0;
#pragma unroll
    for (int w = 0; w < 4; w++)
#pragma unroll
        for (int b = 0; b < 4; b++)
#pragma unroll
            for (int j = 0; j < PPT; j++) {
                const uint32_t x = w == 0 ? v[j].x : w == 1 ? v[j].y : w == 2 ? v[j].z : v[j].w;
                pc[j] = sw_crc32c_raw_byte(pc[j], (x >> (8 * b)) & 0xffu, tab);
            }
    uint32_t c = 0;
#pragma unroll
    for (int j = 0; j < PPT; j++)
        c ^= sw_crc32c_gf2_mul(pc[j], mul[j]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        c ^= __shfl_xor_sync(0xffffffffu, c, off);
    return c;
}

#endif
