/* cpu_fast_amx_nodp.c - DEVELOPMENT ONLY: the library's AMX kernel
 * (src/attn/cpu_fast_amx.c) without the tile arithmetic, as
 * sw_cpu_unit_amx_nodp / sw_cpu_amx_pack_nodp (see cpu_fast_amx_nodp.h).
 * Needs AVX-512 F/BW/VL/DQ + AVX512_BF16 flags, no AMX. Built by
 * `sh bench/dev/cpu_fast_check.sh` into build/dev/cpu_fast_overhead, where
 * "amx" minus "nodp" timed the tile instructions on the Xeon
 * (docs/perf/prefill.md, "CPU path"). */
#define SW_AMX_EMULATE 1
#define sw_cpu_unit_amx_emul sw_cpu_unit_amx_nodp
#define sw_cpu_amx_pack_emul sw_cpu_amx_pack_nodp
#include "cpu_fast_amx_nodp.h"
#include "../../src/attn/cpu_fast_amx.c"
