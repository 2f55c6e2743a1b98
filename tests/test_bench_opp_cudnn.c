/* The swap bench's cuDNN opponent (bench/opp_cudnn.h) refuses before it
 * touches cuDNN or a GPU, in every build: the gate closed (SPILLWAY_OPPONENT
 * without "cudnn"), then a bad shape or page index, each with a message
 * that says which. With the gate open and a good shape the answer depends
 * on the machine (no cuDNN headers in this build, no libcudnn, no GPU, or a
 * plan): whatever it is, NULL comes with a "cuDNN: " message, a plan with
 * none, and destroy takes NULL. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "opp_cudnn.h"
#include "sw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bench_cudnn_decode *make(const bench_cudnn_decode_shape *s, char *why, size_t n)
{
    why[0] = '\0';
    return bench_cudnn_decode_create(s, why, n);
}

int main(void)
{
    int32_t table[2 * 4] = {0, 1, 2, 3, 4, 5, 6, 7}, len[2] = {60, 49};
    const bench_cudnn_decode_shape good = {.batch = 2, .qo_heads = 8, .kv_heads = 2,
                                           .head_dim = 128, .page_size = 16, .num_pages = 8,
                                           .pages_per_seq = 4, .page_table = table,
                                           .kv_len = len, .f16 = 0, .sm_scale = 0.088f};
    char why[512];

    /* gate closed: first, whatever else is wrong */
    setenv("SPILLWAY_OPPONENT", "flashinfer", 1);
    CHECK(make(&good, why, sizeof why) == NULL);
    CHECK(strstr(why, "SPILLWAY_OPPONENT=cudnn") != NULL);
    CHECK(make(NULL, why, sizeof why) == NULL);
    CHECK(strstr(why, "not enabled") != NULL);
    setenv("SPILLWAY_OPPONENT", "cudnnx,xcudnn", 1); /* names, not substrings */
    CHECK(make(&good, why, sizeof why) == NULL);
    CHECK(strstr(why, "not enabled") != NULL);

    setenv("SPILLWAY_OPPONENT", "flashinfer,cudnn", 1);
    /* bad shapes */
    bench_cudnn_decode_shape s = good;
    s.qo_heads = 6; /* not a multiple of 4 */
    s.kv_heads = 4;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "bad decode shape") != NULL);
    s = good;
    s.sm_scale = 0;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "bad decode shape") != NULL);
    s = good;
    s.page_table = NULL;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "bad decode shape") != NULL);
    /* a length past the table, and one of 0 */
    int32_t l2[2] = {60, 65};
    s = good;
    s.kv_len = l2;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "sequence 1: kv_len 65 outside 1..64") != NULL);
    l2[1] = 0;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "sequence 1: kv_len 0 outside") != NULL);
    /* a page index out of the pool where the length reaches it ... */
    int32_t t2[8] = {0, 1, 2, 3, 4, 5, 6, 8};
    int32_t l3[2] = {60, 64};
    s = good;
    s.page_table = t2;
    s.kv_len = l3;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "sequence 1, page 3: index 8 outside the pool of 8 pages") != NULL);
    t2[7] = -1;
    CHECK(make(&s, why, sizeof why) == NULL);
    CHECK(strstr(why, "index -1 outside") != NULL);
    /* ... but not past it (49 tokens: pages 0..3, 49 > 48 reaches page 3;
     * 48 tokens do not) */
    l3[1] = 48;
    bench_cudnn_decode *d = make(&s, why, sizeof why);
    CHECK(d != NULL || strstr(why, "page 3") == NULL);
    bench_cudnn_decode_destroy(d);

    /* a good shape: a plan, or NULL with the machine's reason */
    d = make(&good, why, sizeof why);
    if (d) {
        CHECK(bench_cudnn_version() >= 91500);
    } else {
        CHECK(strncmp(why, "cuDNN: ", 7) == 0);
        CHECK(strstr(why, "bad decode shape") == NULL && strstr(why, "not enabled") == NULL);
        printf("test_bench_opp_cudnn: no plan here: %s\n", why);
    }
    bench_cudnn_decode_destroy(d);
    bench_cudnn_decode_destroy(NULL);

    if (sw_test_failures) {
        fprintf(stderr, "test_bench_opp_cudnn: %d failure(s)\n", sw_test_failures);
        return 1;
    }
    printf("test_bench_opp_cudnn: ok\n");
    return 0;
}
