/* cpu_fast_amx_emul.c - DEVELOPMENT ONLY: src/attn/cpu_fast_amx.c compiled
 * over the scalar AMX model in cpu_fast_amx_emul.h, as
 * sw_cpu_unit_amx_emul. Needs AVX-512 F/BW/VL/DQ + AVX512_BF16 (the
 * kernel's softmax and packing run natively); no AMX. Built by
 * bench/dev/cpu_fast_check.sh into build/dev/cpu_fast_check_emul, which
 * checks it as "amx(emul)" (see cpu_fast_check.c). */
#define SW_AMX_EMULATE 1
#include "cpu_fast_amx_emul.h"
#include "../../src/attn/cpu_fast_amx.c"

void sw_amx_emul_counts(long long out[4])
{
    out[0] = atomic_load(&sw_emul_n_cfg);
    out[1] = atomic_load(&sw_emul_n_load);
    out[2] = atomic_load(&sw_emul_n_store);
    out[3] = atomic_load(&sw_emul_n_dp);
}
