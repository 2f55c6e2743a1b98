/* spillway-bench-prefill (`spillway bench prefill`): prefill throughput of
 * the named shapes and length sets on the GPU (else all CPU cores), each
 * case checked against the fp64 reference; prefill_run.c does the work.
 * Opponents are measured by bench/prefill.py on the same batches. */
#include "prefill_run.h"

#include <errno.h>
#include <string.h>

static const char usage[] =
    "usage: spillway-bench-prefill [--cpu] [--full] [--scale F] [--reps N] [--warmup N]\n"
    "                              [--cases 16x1k,4x4k,1x16k,mix-a,mix-b]\n"
    "                              [--shapes h16-2/d256,h32-8/d128,h32-8/d64]\n"
    "                              [--samples N] [--json PATH]\n"
    "(also run as 'spillway bench prefill')\n"
    "Times each case (median of --reps, default 10, after --warmup, default 3; CUDA events\n"
    "on the GPU) and checks --samples rows per request (default 4) against the fp64\n"
    "reference; --full: non-causal. On the CPU (--cpu, or no usable GPU) lengths are scaled\n"
    "by 1/8 unless --scale is given. An unknown case or shape is a usage error (exit 2).\n"
    "  --json PATH  results (default: a new bench/results/prefill-<host>-<UTC time>.json,\n"
    "               never a committed record; ./ when there is no bench/results)\n"
    "Exit status: 0 when every case met the reference, 1 otherwise, 2 on a usage error.\n"
    "Opponents are measured by bench/prefill.py.\n";

int main(int argc, char **argv)
{
    prefill_opts o = {0, 1, 10, 3, 4, 0.0, NULL, NULL, NULL};
    const int rc = prefill_parse(argc, argv, &o, "spillway-bench-prefill", usage);
    if (rc)
        return rc < 0 ? 0 : rc;
    char path[4096];
    FILE *js = bench_result_open(o.json, "prefill", path, sizeof path);
    if (!js) {
        fprintf(stderr, "spillway-bench-prefill: %s: %s\n", path, strerror(errno));
        return 1;
    }
    bench_json_begin(js, "prefill", argc, argv);
    const int failures = prefill_run(&o, js);
    bench_json_end(js);
    if (fclose(js)) {
        fprintf(stderr, "spillway-bench-prefill: %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("results: %s\n", path);
    return failures ? 1 : 0;
}
