/* cpu_fast_overhead - development timer for the CPU fast path's costs per
 * call on the bench's short-request shape (16 requests x 128 tokens, bf16,
 * causal), apart from and then with the attention arithmetic. Modes (the
 * driver with unit kernels that do one part each, then whole kernels):
 *   nothing    units, threads, scratch (the driver alone)
 *   pack       + K/V packed for the AMX kernel (sw_cpu_amx_pack, AVX-512 code,
 *              runs on any AVX-512 BF16 CPU), minor page faults counted
 *   store512   + the AVX-512 epilogue of every unit (sw_cpu_store_o_avx512)
 *   nodp-v1    the AMX kernel v1 (bench/dev/cpu_fast_amx_v1.c) with every tile
 *              instruction replaced by its memory traffic and no tdpbf16ps
 *              (cpu_fast_amx_nodp.h): pack, Q copy, softmax, rescale, epilogue
 *   nodp       the same for the library's AMX kernel (cpu_fast_amx_nodp.c)
 *   amx-v1     the AMX kernel v1 on real tiles (only where AMX runs)
 *   amx        the library's AMX kernel on real tiles (only where AMX runs)
 * Build: sh bench/dev/cpu_fast_check.sh -> build/dev/cpu_fast_overhead
 * Run: cpu_fast_overhead [threads] [rounds] (defaults 2, 7); the modes run
 * interleaved, 10 calls per mode and round; prints the median over rounds
 * of ms per call, for d256 (Hq16/Hkv2), d128 and d64 (Hq32/Hkv8). */
#define _GNU_SOURCE
#include "../../src/attn/attn_internal.h"
#include "../../src/attn/cpu_fast_kernels.h"

#include <math.h>
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

static void k_store512(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    unit_ml(s);
    sw_cpu_store_o_avx512(pb, u, s->o, s->m, s->l);
}

/* bench/dev/cpu_fast_amx_v1.c, cpu_fast_amx_nodp.c, cpu_fast_amx_v1_nodp.c */
void sw_cpu_unit_amx_v1(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
void sw_cpu_amx_pack_v1(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                        uint16_t *vp);
void sw_cpu_unit_amx_nodp(const sw_attn_problem *pb, const sw_cpu_unit *u,
                          const sw_cpu_scratch *s);
void sw_cpu_amx_pack_nodp(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                          uint16_t *vp);
void sw_cpu_unit_amx_v1_nodp(const sw_attn_problem *pb, const sw_cpu_unit *u,
                             const sw_cpu_scratch *s);
void sw_cpu_amx_pack_v1_nodp(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                             uint16_t *vp);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fill_bf16(uint16_t *p, size_t n)
{
    static uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float f = (float)((x >> 40) * (1.0 / 8388608.0)) - 1.0f;
        uint32_t w;
        memcpy(&w, &f, 4);
        p[i] = (uint16_t)(w >> 16);
    }
}

#define NMODES 7
#define CALLS 10

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (rounds < 1 || rounds > 99)
        rounds = 7;
    const int shapes[3][3] = {{16, 2, 256}, {32, 8, 128}, {32, 8, 64}};
    if (sw_cpu_isa_best() < SW_CPU_ISA_AVX512BF16) {
        printf("cpu_fast_overhead: needs AVX-512 BF16 (the pack and nodp code)\n");
        return 0;
    }
    const int amx = sw_cpu_isa_best() == SW_CPU_ISA_AMX;
    const sw_cpu_kernel kn[NMODES] = {{k_nothing, NULL},
                                      {k_pack, sw_cpu_amx_pack},
                                      {k_store512, NULL},
                                      {sw_cpu_unit_amx_v1_nodp, sw_cpu_amx_pack_v1_nodp},
                                      {sw_cpu_unit_amx_nodp, sw_cpu_amx_pack_nodp},
                                      {sw_cpu_unit_amx_v1, sw_cpu_amx_pack_v1},
                                      {sw_cpu_unit_amx, sw_cpu_amx_pack}};
    const char *names[NMODES] = {"nothing", "pack", "store512", "nodp-v1", "nodp", "amx-v1", "amx"};
    const int nmodes = amx ? NMODES : NMODES - 2;
    for (int si = 0; si < 3; si++) {
        const int B = 16, L = 128, hq = shapes[si][0], hkv = shapes[si][1], d = shapes[si][2];
        const int T = B * L;
        int32_t ind[17];
        for (int b = 0; b <= B; b++)
            ind[b] = b * L;
        uint16_t *q = calloc((size_t)T * hq * d, 2), *k = calloc((size_t)T * hkv * d, 2);
        uint16_t *v = calloc((size_t)T * hkv * d, 2), *o = calloc((size_t)T * hq * d, 2);
        /* uniform [-1, 1) in bf16, so the real kernels see a non-flat softmax */
        fill_bf16(q, (size_t)T * hq * d);
        fill_bf16(k, (size_t)T * hkv * d);
        fill_bf16(v, (size_t)T * hkv * d);
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
        pb.q = q, pb.k = k, pb.v = v, pb.o = o, pb.lse = NULL;
        pb.q_stride = pb.o_stride = hq * d;
        pb.k_stride = pb.v_stride = hkv * d;
        pb.sm_scale = 1.0f / sqrtf((float)d);
        double t[NMODES][99], flt[NMODES] = {0};
        for (int i = 0; i < nmodes; i++) /* warm-up */
            sw_cpu_prefill_fast_kernel(&pb, threads, &kn[i]);
        for (int rep = 0; rep < rounds; rep++)
            for (int i = 0; i < nmodes; i++) {
                struct rusage r0, r1;
                getrusage(RUSAGE_SELF, &r0);
                double t0 = now_s();
                for (int j = 0; j < CALLS; j++)
                    sw_cpu_prefill_fast_kernel(&pb, threads, &kn[i]);
                t[i][rep] = (now_s() - t0) / CALLS;
                getrusage(RUSAGE_SELF, &r1);
                flt[i] = (double)(r1.ru_minflt - r0.ru_minflt) / CALLS;
            }
        for (int i = 0; i < nmodes; i++) {
            qsort(t[i], (size_t)rounds, sizeof t[i][0], cmp_double);
            printf("overhead 16x128 hq%d hkv%d d%d threads %d %-9s %7.3f ms/call (min %7.3f), "
                   "minor faults per call %.1f (last round)\n", hq, hkv, d, threads, names[i],
                   t[i][rounds / 2] * 1e3, t[i][0] * 1e3, flt[i]);
        }
        fflush(stdout);
        free(q), free(k), free(v), free(o);
    }
    return 0;
}
