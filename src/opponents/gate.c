/* The opponent gate (opponent.h): in every build, so that asking for an
 * opponent the build lacks, or one the environment has not enabled, is a
 * clear refusal rather than an invalid value. Nothing of the opponent itself
 * is compiled here. */
#include "opponents/opponent.h"
#include "core/sw_core.h"

#include <stdlib.h>
#include <string.h>

#define SW_OPPONENT_ENV "SPILLWAY_OPPONENT"

int sw_opponent_backend(sw_backend b)
{
    return b == SW_BACKEND_OPPONENT_FLASHINFER || b == SW_BACKEND_OPPONENT_FLASHINFER_FA3;
}

int sw_opponent_enabled(const char *name)
{
    const char *s = getenv(SW_OPPONENT_ENV);
    const size_t n = strlen(name);
    while (s && *s) {
        const char *e = strchr(s, ',');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0)
            return 1;
        s = e ? e + 1 : NULL;
    }
    return 0;
}

static int compiled_in(sw_backend b)
{
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    if (b == SW_BACKEND_OPPONENT_FLASHINFER)
        return 1;
    if (b == SW_BACKEND_OPPONENT_FLASHINFER_FA3)
        return sw_opp_fi_has_fa3();
#endif
    (void)b;
    return 0;
}

sw_status sw_opponent_gate(const sw_prefill_params *p)
{
    const sw_backend b = p->backend;
    const char *name = sw_backend_name(b);
    if (!sw_opponent_backend(b))
        return sw_fail(SW_STATUS_INTERNAL, "backend %d is not an opponent", (int)b);
    if (!compiled_in(b)) {
#ifdef SW_HAVE_OPPONENT_FLASHINFER
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent backend %s is not compiled into this "
                       "build (its FlashInfer opponent has the FA2 path only)", name);
#else
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent backend %s is not compiled into this "
                       "build; configure with -DSPILLWAY_OPPONENT_FLASHINFER=<FlashInfer include "
                       "dir> to measure it (docs/opponents.md)", name);
#endif
    }
    if (!sw_opponent_enabled("flashinfer"))
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent backend %s is for measurement only and "
                       "the environment does not enable it; set %s=flashinfer to run it", name,
                       SW_OPPONENT_ENV);
    if (p->dtype != SW_DTYPE_BF16 && p->dtype != SW_DTYPE_F16)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent backend %s runs BF16 and F16 only", name);
    if (sw_cuda_devices() <= p->device)
        return sw_fail(SW_STATUS_NO_DEVICE, "backend %s requested for device %d, but %d CUDA "
                       "device(s) are usable", name, p->device, sw_cuda_devices());
    return SW_OK;
}

const char *sw_opponents_built(void)
{
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    return sw_opp_fi_describe();
#else
    return "";
#endif
}
