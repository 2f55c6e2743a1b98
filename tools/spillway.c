/* spillway - command-line client of libspillway (public API only): info,
 * the demo, the store's inspect / verify / repair, and `bench NAME`, the
 * front door of the benchmark programs (bench/) installed beside it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: spillway <command> [options]\n"
            "  info                      version, CUDA devices, CPU instruction set\n"
            "  demo [options]            the main job: (1) a ragged prefill batch checked against\n"
            "                            the reference, with its throughput (CUDA when a GPU is\n"
            "                            usable, else CPU); (2) exact decode attention over a KV\n"
            "                            cache larger than the pool and host tier, streamed from\n"
            "                            disk, checked, with tokens/s, bytes/s vs the raw disk\n"
            "                            read and hit rates per tier\n"
            "  store verify --dir D      check every extent (non-zero exit on corruption)\n"
            "  store repair --dir D      drop what cannot be proven current\n"
            "  store inspect --dir D     geometry, occupancy, per-namespace counts\n"
            "  bench NAME [options]      runs the benchmark program spillway-bench-NAME:\n"
            "    prefill                 prefill throughput per shape, each checked\n"
            "    swap                    decode over the swap engine: disk-bound, host-tier-bound\n"
            "                            and all-resident cases vs raw figures of the same run\n"
            "    store                   block store tile reads vs the disk's own O_DIRECT\n"
            "                            reads, host-tier hits vs memcpy\n"
            "    remote                  remote-tier pipelined GETs vs redis-benchmark\n"
            "    paged                   decode and prefill over a paged KV cache vs the copy\n"
            "                            rate and the ragged prefill (FlashInfer with its build)\n"
            "run 'spillway <command> --help' (or 'spillway bench NAME --help') for options\n");
}

static const char *const bench_names[] = {"prefill", "paged", "swap", "store", "remote"};
#define NUM_BENCH (int)(sizeof bench_names / sizeof bench_names[0])

static const char bench_usage[] =
    "usage: spillway bench prefill|paged|swap|store|remote [options]\n"
    "Runs the benchmark program spillway-bench-NAME from the directory of this program\n"
    "(the build tree and the install put them together) with the options given; its exit\n"
    "status is the bench's. 'spillway bench NAME --help' lists a bench's options. Each\n"
    "writes its results to --json PATH, or else to a new file under bench/results/ (./\n"
    "without one), never over a committed record.\n";

/* `spillway bench NAME ARGS...`: exec of spillway-bench-NAME beside this
 * program, so that each bench stays a program of its own (bench/) while
 * its command keeps one front door. */
static int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(bench_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int known = 0;
    for (int i = 0; i < NUM_BENCH; i++)
        known |= !strcmp(argv[1], bench_names[i]);
    if (!known) {
        fprintf(stderr, "spillway bench: unknown bench '%s' (known:", argv[1]);
        for (int i = 0; i < NUM_BENCH; i++)
            fprintf(stderr, "%s %s", i ? "," : "", bench_names[i]);
        fprintf(stderr, ")\n");
        return 2;
    }
    char self[PATH_MAX], path[PATH_MAX + 64];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "spillway bench: cannot find this program's directory: %s\n",
                strerror(errno));
        return 1;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(path, sizeof path, "%s/spillway-bench-%s", slash ? self : ".", argv[1]);
    char **args = (char **)calloc((size_t)argc, sizeof *args);
    if (!args) {
        fprintf(stderr, "spillway bench: out of memory\n");
        return 1;
    }
    args[0] = path;
    for (int i = 2; i < argc; i++)
        args[i - 1] = argv[i];
    fflush(NULL);
    execv(path, args);
    fprintf(stderr, "spillway bench: cannot run %s: %s\n", path, strerror(errno));
    free(args);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "info")) {
        if (argc > 2) {
            const int help = !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help");
            fputs("usage: spillway info\n"
                  "Prints the library's version, the number of usable CUDA devices and the CPU\n"
                  "instruction set the CPU prefill path chose.\n", help ? stdout : stderr);
            return help ? 0 : 2;
        }
        printf("spillway %s\n", sw_version_string());
        printf("cuda devices: %d\n", sw_cuda_device_count());
        printf("cpu isa: %s\n", sw_prefill_cpu_isa());
        return 0;
    }
    if (!strcmp(argv[1], "demo"))
        return cmd_demo(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench"))
        return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "store"))
        return cmd_store(argc - 1, argv + 1);
    fprintf(stderr, "spillway: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
