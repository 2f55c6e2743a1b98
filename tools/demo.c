/* `spillway demo`, the main job. Part 1: the ragged prefill batch of
 * spillway-bench-prefill (bench/prefill_run.c). Part 2: a long context of a
 * real model shape (16 query / 2 kv heads, d256, block 16) whose KV is
 * larger than both the engine's pool and the store's host tier is offloaded
 * to a store in a scratch directory, and decode steps run exact attention
 * over all of it through the swap engine, each step checked against an fp64
 * reference (bench/swap_run.c). It prints tokens/s, bytes read per step and
 * per second against a raw O_DIRECT read of the same file system measured
 * in the same run, and where the blocks came from (pool, host tier, disk).
 * Exit status 1 if either part fails its check. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_common.h"

#include "prefill_run.h"
#include "swap_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Part 2. */
static int demo_swap(const swt_opts *o)
{
    swt_case c = swt_make_case("demo", o, o->pool_pct, o->host_pct, 64);
    printf("\n== part 2: exact decode attention over a KV cache larger than the pool and the "
           "host tier ==\n");
    swt_print_engine(o);
    swt_scratch s;
    if (swt_scratch_open(&s, o->dir, o->keep, "demo"))
        return 1;
    printf("  scratch: %s (file system: %s%s; removed at exit%s)\n", s.work, s.fs,
           s.tmpfs ? " -- RAM, not a disk" : "", o->keep ? " unless --keep: kept" : "");
    swt_print_setup(&c);
    fflush(stdout); /* before the progress lines on stderr */
    const double t0 = bench_now();
    const uint64_t kv = (uint64_t)c.batch * c.layers * (uint64_t)c.context * c.kv_heads *
                        c.head_dim * 4;
    uint64_t raw = o->raw_mb << 20;
    if (kv < raw)
        raw = kv < (64u << 20) ? (64u << 20) : (kv + (4u << 20) - 1) / (4u << 20) * (4u << 20);
    swt_scratch_raw_write(&s, raw);
    swt_scratch_raw_pass(&s);
    char store_dir[4300];
    snprintf(store_dir, sizeof store_dir, "%s/store", s.work);
    swt_result r;
    int rc = swt_run_case(&c, store_dir, &r);
    if (!rc) {
        swt_scratch_raw_pass(&s);
        swt_print_raw(&s);
        swt_print_case(&c, &r, swt_scratch_raw_best(&s));
    }
    swt_scratch_close(&s);
    const int ok = !rc && r.ok;
    printf("part 2 (swap decode): %s in %.1f s\n", ok ? "PASS" : "FAIL", bench_now() - t0);
    return ok ? 0 : 1;
}

static const char demo_usage_head[] =
    "usage: spillway demo [--part prefill|swap|all] [part 1 options] [part 2 options]\n"
    "The main job, in two parts; exit status 1 when either fails its check.\n"
    "Part 1 (prefill): a ragged batch (mix-a: 10 requests of 100..8192 tokens, BF16, causal,\n"
    "GQA 32/8, d128) on the GPU when one is usable (else all CPU cores, lengths scaled by\n"
    "1/8 unless --scale is given), checked row by row against the fp64 reference.\n"
    "  --cpu --full --scale F --reps N --warmup N --cases LIST --shapes LIST --samples N\n"
    "  (as spillway-bench-prefill's; defaults: --reps 5 --warmup 2 --samples 6 --cases\n"
    "  mix-a --shapes h32-8/d128)\n"
    "Part 2 (swap): a long context (16 query / 2 kv heads, d256, block 16, BF16) whose KV\n"
    "is larger than the engine's pool and the store's host tier is offloaded to a store in a\n"
    "scratch directory; decode steps (a new token and fresh queries each) run exact attention\n"
    "over every token, each checked against an fp64 reference (rel L2 <= 1e-2); prints\n"
    "tokens/s, bytes read per step and per second against a raw O_DIRECT read of the same\n"
    "file system measured in the same run, and the share of pool, host tier and disk.\n"
    "Part 2 options (defaults: --context 32768 --batch 2 --layers 2 --steps 8\n"
    "--warmup-steps 1 --pool-pct 25 --host-pct 25 --check-heads 0 --raw-mb 256; a raw file\n"
    "larger than the KV shrinks to the KV's size in 4 MiB steps, 64 MiB at least):\n";
static const char demo_usage_tail[] =
    "A progress bar goes to stderr when it is a terminal, plain lines otherwise.\n";

static void demo_usage(FILE *f)
{
    fputs(demo_usage_head, f);
    fputs(swt_opts_help, f);
    fputs(demo_usage_tail, f);
}

int cmd_demo(int argc, char **argv)
{
    swt_opts o;
    swt_opts_default(&o);
    const char *part = "all";
    char **rest = (char **)calloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            demo_usage(stdout);
            free(rest);
            return 0;
        }
        if (!strcmp(argv[i], "--part")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "spillway: --part needs prefill, swap or all\n");
                free(rest);
                return 2;
            }
            part = argv[++i];
            continue;
        }
        int t = swt_opt_parse(argc, argv, &i, &o);
        if (t < 0) {
            free(rest);
            return 2;
        }
        if (!t)
            rest[nrest++] = argv[i];
    }
    const int do_prefill = !strcmp(part, "all") || !strcmp(part, "prefill");
    const int do_swap = !strcmp(part, "all") || !strcmp(part, "swap");
    if (!do_prefill && !do_swap) {
        fprintf(stderr, "spillway: --part prefill|swap|all, not '%s'\n", part);
        free(rest);
        return 2;
    }
    /* Part 1's options are checked even when only part 2 runs. */
    prefill_opts po = {0, 1, 5, 2, 6, 0.0, "mix-a", "h32-8/d128", NULL};
    int rc = swt_opts_check(&o);
    if (!rc)
        rc = prefill_parse(nrest, rest, &po, "spillway demo",
                           "run 'spillway demo --help' for the options\n");
    free(rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (po.json) {
        fprintf(stderr, "spillway demo: --json is an option of the benches, not of the demo\n");
        return 2;
    }
    const double t0 = bench_now();
    int rc1 = 0, rc2 = 0;
    double t1 = t0;
    if (do_prefill) {
        printf("== part 1: ragged prefill batch checked against the reference ==\n");
        fflush(stdout);
        const int failures = prefill_run(&po, NULL);
        printf("%s: %d case(s) failed the check against the reference\n",
               failures ? "FAIL" : "PASS", failures);
        rc1 = failures ? 1 : 0;
        t1 = bench_now();
    }
    if (do_swap)
        rc2 = demo_swap(&o);
    printf("\nsummary:");
    if (do_prefill)
        printf(" part 1 (prefill) %s (%.1f s);", rc1 ? "FAIL" : "PASS", t1 - t0);
    if (do_swap)
        printf(" part 2 (swap decode) %s (%.1f s);", rc2 ? "FAIL" : "PASS", bench_now() - t1);
    printf(" %s in %.1f s\n", rc1 || rc2 ? "FAIL" : "PASS", bench_now() - t0);
    return rc1 || rc2 ? 1 : 0;
}
