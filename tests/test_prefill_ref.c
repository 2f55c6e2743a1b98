/* Independent facts that pin the reference (the oracle) and the CPU fast
 * path: with zero queries every visible key scores the same, so each output
 * row is the mean of exactly the visible V rows and LSE = log(count); the
 * count comes from the causal bottom-right rule, computed here by hand. */
#include "sw_test.h"

#include <math.h>
#include <string.h>

static int check_backend(sw_backend backend)
{
    enum { HQ = 4, HKV = 2, D = 64, B = 3 };
    /* q_len < kv_len (prefix), q_len > kv_len (early rows see nothing), empty. */
    int32_t qo[B + 1] = {0, 3, 8, 8};
    int32_t kv[B + 1] = {0, 7, 10, 14};
    float q[8 * HQ * D], o[8 * HQ * D], lse[8 * HQ];
    float k[14 * HKV * D], v[14 * HKV * D];
    memset(q, 0, sizeof q);
    sw_rng r = {7};
    for (int i = 0; i < 14 * HKV * D; i++) {
        k[i] = (float)sw_rng_normal(&r);
        v[i] = (float)sw_rng_normal(&r);
    }
    for (int causal = 0; causal <= 1; causal++) {
        sw_prefill_params p;
        sw_prefill_params_init(&p);
        p.dtype = SW_DTYPE_F32;
        p.num_qo_heads = HQ;
        p.num_kv_heads = HKV;
        p.head_dim = D;
        p.causal = causal;
        p.backend = backend;
        sw_prefill_tensors t;
        sw_prefill_tensors_init(&t);
        t.q = q; t.k = k; t.v = v; t.o = o; t.lse = lse;
        t.q_rows = 8; t.kv_rows = 14;
        memset(o, 0xff, sizeof o);
        CHECK_STATUS(sw_prefill_host(&p, B, qo, kv, &t), SW_OK);
        for (int b = 0; b < B; b++) {
            int ql = qo[b + 1] - qo[b], kl = kv[b + 1] - kv[b];
            for (int tq = 0; tq < ql; tq++) {
                /* visible keys by the rule in DESIGN.md, written out again */
                int nvis = causal ? tq + (kl - ql) + 1 : kl;
                if (nvis < 0) nvis = 0;
                if (nvis > kl) nvis = kl;
                for (int h = 0; h < HQ; h++) {
                    int kvh = h / (HQ / HKV);
                    const float *orow = o + ((qo[b] + tq) * HQ + h) * D;
                    for (int c = 0; c < D; c++) {
                        double mean = 0;
                        for (int j = 0; j < nvis; j++)
                            mean += v[((kv[b] + j) * HKV + kvh) * D + c];
                        mean = nvis ? mean / nvis : 0.0;
                        if (fabs(orow[c] - mean) > 1e-5) {
                            fprintf(stderr, "%s causal=%d b=%d t=%d h=%d c=%d: %g, want %g\n",
                                    sw_backend_name(backend), causal, b, tq, h, c, orow[c], mean);
                            sw_test_failures++;
                            return 1;
                        }
                    }
                    float l = lse[(qo[b] + tq) * HQ + h];
                    if (nvis == 0)
                        CHECK(isinf(l) && l < 0);
                    else
                        CHECK(fabs(l - log((double)nvis)) < 1e-5);
                }
            }
        }
    }
    return 0;
}

int main(void)
{
    check_backend(SW_BACKEND_CPU_REF);
    check_backend(SW_BACKEND_CPU);
    if (sw_test_failures) {
        fprintf(stderr, "test_prefill_ref: %d failure(s)\n", sw_test_failures);
        return 1;
    }
    printf("test_prefill_ref: ok\n");
    return 0;
}
