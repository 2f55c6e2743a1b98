/* cpu_fast_amx_v1_nodp.c - DEVELOPMENT ONLY: the AMX kernel v1
 * (cpu_fast_amx_v1.c) without the tile arithmetic, as
 * sw_cpu_unit_amx_v1_nodp / sw_cpu_amx_pack_v1_nodp (see
 * cpu_fast_amx_nodp.h). Needs AVX-512 F/BW/VL/DQ + AVX512_BF16 flags.
 * Built by `sh bench/dev/cpu_fast_check.sh` into build/dev/cpu_fast_overhead
 * ("nodp-v1"). */
#define SW_AMX_EMULATE 1
#include "cpu_fast_amx_nodp.h"
#include "cpu_fast_amx_v1.c"
