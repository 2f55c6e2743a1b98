/* The opponent gate, in every build and without a GPU: an opponent backend is
 * refused with SW_STATUS_UNSUPPORTED and a sentence that says why (not
 * compiled in / SPILLWAY_OPPONENT not set), AUTO never resolves to one, the
 * one-shot host call refuses it, and values next to it stay invalid. In an
 * opponent build with the variable set, the remaining refusals are the device
 * (none here) and F32. */
#include "sw_test.h"

#include <stdlib.h>
#include <string.h>

#define EXPECT_FAIL(expr, want, needle)                                                 \
    do {                                                                                \
        CHECK_STATUS(expr, want);                                                       \
        if (!strstr(sw_last_error(), needle)) {                                         \
            fprintf(stderr, "%s:%d: detail \"%s\" does not mention \"%s\"\n", __FILE__, \
                    __LINE__, sw_last_error(), needle);                                 \
            sw_test_failures++;                                                         \
        }                                                                               \
    } while (0)

static sw_prefill_params params_for(sw_backend b)
{
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = 4;
    p.num_kv_heads = 2;
    p.head_dim = 128;
    p.causal = 1;
    p.backend = b;
    return p;
}

int main(void)
{
    int32_t qo[3] = {0, 5, 12}, kv[3] = {0, 7, 20};
    const sw_backend opp[2] = {SW_BACKEND_OPPONENT_FLASHINFER, SW_BACKEND_OPPONENT_FLASHINFER_FA3};
    sw_prefill_plan *pl = (sw_prefill_plan *)0x1;

    CHECK(strcmp(sw_backend_name(SW_BACKEND_OPPONENT_FLASHINFER), "flashinfer") == 0);
    CHECK(strcmp(sw_backend_name(SW_BACKEND_OPPONENT_FLASHINFER_FA3), "flashinfer-fa3") == 0);

    /* Without the variable: refused in every build, the reason named. */
    unsetenv("SPILLWAY_OPPONENT");
    for (int i = 0; i < 2; i++) {
        sw_prefill_params p = params_for(opp[i]);
#ifdef SW_HAVE_OPPONENT_FLASHINFER
        const char *why = (i == 0 || strstr(sw_version_string(), "fa3")) ? "SPILLWAY_OPPONENT=flashinfer"
                                                                         : "not compiled";
#else
        const char *why = "-DSPILLWAY_OPPONENT_FLASHINFER";
#endif
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED, why);
        CHECK(pl == NULL);
        /* Other enabling values do not enable it. */
        setenv("SPILLWAY_OPPONENT", "flashinfer2,cudnn", 1);
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED, why);
        unsetenv("SPILLWAY_OPPONENT");
    }

    /* With the variable set. */
    setenv("SPILLWAY_OPPONENT", "cudnn,flashinfer", 1);
    {
        sw_prefill_params p = params_for(SW_BACKEND_OPPONENT_FLASHINFER);
#ifdef SW_HAVE_OPPONENT_FLASHINFER
        CHECK(strstr(sw_version_string(), "opponent: flashinfer") != NULL);
        if (sw_cuda_device_count() == 0)
            EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_NO_DEVICE,
                        "flashinfer");
        p.dtype = SW_DTYPE_F32;
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED,
                    "BF16 and F16 only");
#else
        CHECK(strstr(sw_version_string(), "opponent") == NULL);
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED,
                    "-DSPILLWAY_OPPONENT_FLASHINFER");
#endif
        CHECK(pl == NULL);
        /* The other parameters are still validated first. */
        p = params_for(SW_BACKEND_OPPONENT_FLASHINFER);
        p.num_qo_heads = 3;
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "not divisible");
        p = params_for(SW_BACKEND_OPPONENT_FLASHINFER);
        p.head_dim = 96;
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED, "head_dim=96");
    }

    /* AUTO never resolves to an opponent, variable set or not. */
    {
        sw_prefill_params p = params_for(SW_BACKEND_AUTO);
        CHECK_STATUS(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_OK);
        if (pl) {
            const sw_backend b = sw_prefill_plan_backend(pl);
            CHECK(b != SW_BACKEND_OPPONENT_FLASHINFER && b != SW_BACKEND_OPPONENT_FLASHINFER_FA3);
            sw_prefill_plan_destroy(pl);
        }
    }

    /* The one-shot host call runs on the CPU only. */
    {
        sw_prefill_params p = params_for(SW_BACKEND_OPPONENT_FLASHINFER);
        sw_prefill_tensors t;
        sw_prefill_tensors_init(&t);
        EXPECT_FAIL(sw_prefill_host(&p, 2, qo, kv, &t), SW_STATUS_INVALID, "flashinfer");
    }

    /* Values around the opponents are not backends. */
    {
        const int bad[3] = {99, 102, -1};
        for (int i = 0; i < 3; i++) {
            sw_prefill_params p = params_for((sw_backend)bad[i]);
            EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID,
                        "not a sw_backend value");
        }
    }
    unsetenv("SPILLWAY_OPPONENT");

    printf("test_opponent_gate: %s (%s)\n", sw_test_failures ? "FAILED" : "ok", sw_version_string());
    return sw_test_failures ? 1 : 0;
}
