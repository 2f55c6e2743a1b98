/* cpu_fast_overhead - development timer for the CPU fast path's fixed costs
 * per call, apart from the attention arithmetic: the driver with unit
 * kernels that do only one part each, on the bench's short-request shape
 * (16 requests x 128 tokens, bf16, causal):
 *   nothing    units, threads, scratch (the driver alone)
 *   pack       + K/V packed for the AMX kernel (sw_cpu_amx_pack, AVX-512 code,
 *              runs on any AVX-512 BF16 CPU), minor page faults counted
 *   store      + the scalar epilogue of every unit (sw_cpu_store_o)
 *   store512   + the AVX-512 epilogue (sw_cpu_store_o_avx512)
 * Build: sh bench/dev/cpu_fast_check.sh -> build/dev/cpu_fast_overhead
 * Run: cpu_fast_overhead [threads] (default 2); prints ms per call (median of
 * 3 rounds of 20 calls) for d256 (Hq16/Hkv2) and d128 (Hq32/Hkv8). */
#define _GNU_SOURCE
#include "../../src/attn/attn_internal.h"
#include "../../src/attn/cpu_fast_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void k_nothing(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    (void)pb, (void)u, (void)s;
}

static void k_pack(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    const uint16_t *k, *v;
    sw_cpu_pack_get(s, pb, u->req, u->kvh, &k, &v);
}

static void unit_ml(const sw_cpu_scratch *s)
{
    for (int r = 0; r < SW_CPU_MROWS; r++) {
        s->m[r] = 0.0f;
        s->l[r] = 1.0f;
    }
}

static void k_store(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    unit_ml(s);
    sw_cpu_store_o(pb, u, s->o, s->m, s->l);
}

static void k_store512(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    unit_ml(s);
    sw_cpu_store_o_avx512(pb, u, s->o, s->m, s->l);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    const int shapes[2][3] = {{16, 2, 256}, {32, 8, 128}};
    if (sw_cpu_isa_best() < SW_CPU_ISA_AVX512BF16) {
        printf("cpu_fast_overhead: needs AVX-512 BF16 (the pack and store512 code)\n");
        return 0;
    }
    for (int si = 0; si < 2; si++) {
        const int B = 16, L = 128, hq = shapes[si][0], hkv = shapes[si][1], d = shapes[si][2];
        const int T = B * L;
        int32_t ind[17];
        for (int b = 0; b <= B; b++)
            ind[b] = b * L;
        uint16_t *q = calloc((size_t)T * hq * d, 2), *k = calloc((size_t)T * hkv * d, 2);
        uint16_t *v = calloc((size_t)T * hkv * d, 2), *o = calloc((size_t)T * hq * d, 2);
        float *lse = calloc((size_t)T * hq, 4);
        sw_attn_problem pb;
        memset(&pb, 0, sizeof pb);
        pb.batch = B;
        pb.num_qo_heads = hq;
        pb.num_kv_heads = hkv;
        pb.head_dim = d;
        pb.dtype = SW_DTYPE_BF16;
        pb.causal = 1;
        pb.qo_indptr = ind;
        pb.kv_indptr = ind;
        pb.q = q, pb.k = k, pb.v = v, pb.o = o, pb.lse = lse;
        pb.q_stride = pb.o_stride = hq * d;
        pb.k_stride = pb.v_stride = hkv * d;
        pb.sm_scale = 0.0625f;
        const sw_cpu_kernel kn[4] = {
            {k_nothing, NULL}, {k_pack, sw_cpu_amx_pack}, {k_store, NULL}, {k_store512, NULL}};
        const char *names[4] = {"nothing", "pack", "store", "store512"};
        for (int i = 0; i < 4; i++) {
            double t[3], flt[3];
            for (int rep = 0; rep < 3; rep++) {
                struct rusage r0, r1;
                getrusage(RUSAGE_SELF, &r0);
                double t0 = now_s();
                for (int j = 0; j < 20; j++)
                    sw_cpu_prefill_fast_kernel(&pb, threads, &kn[i]);
                t[rep] = (now_s() - t0) / 20;
                getrusage(RUSAGE_SELF, &r1);
                flt[rep] = (double)(r1.ru_minflt - r0.ru_minflt) / 20;
            }
            qsort(t, 3, sizeof t[0], cmp_double);
            printf("overhead 16x128 hq%d hkv%d d%d threads %d %-9s %7.3f ms/call, minor faults "
                   "per call %.1f (last round)\n", hq, hkv, d, threads, names[i], t[1] * 1e3,
                   flt[2]);
        }
        free(q), free(k), free(v), free(o), free(lse);
    }
    return 0;
}
