/* spillway - command-line client of libspillway (public API only). */
#include "tool_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Host name as a file-name slug ("h200-node-3"), for results files. */
void tool_host_slug(char *out, size_t n)
{
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    size_t j = 0;
    for (size_t i = 0; host[i] && j + 1 < n; i++) {
        char c = host[i];
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            out[j++] = c;
        else if (c >= 'A' && c <= 'Z')
            out[j++] = (char)(c - 'A' + 'a');
        else if (j && out[j - 1] != '-')
            out[j++] = '-';
    }
    while (j && out[j - 1] == '-')
        j--;
    out[j] = 0;
    if (!j)
        snprintf(out, n, "host");
}

FILE *tool_result_open(const char *explicit_path, const char *component, char *path, size_t n)
{
    if (explicit_path) {
        snprintf(path, n, "%s", explicit_path);
        return fopen(path, "w");
    }
    char host[128], stamp[32];
    tool_host_slug(host, sizeof host);
    const time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tmv);
    struct stat sb;
    const char *dir = stat("bench/results", &sb) == 0 && S_ISDIR(sb.st_mode) ? "bench/results/" : "";
    for (int k = 1; k < 1000; k++) {
        if (k == 1)
            snprintf(path, n, "%s%s-%s-%s.json", dir, component, host, stamp);
        else
            snprintf(path, n, "%s%s-%s-%s-%d.json", dir, component, host, stamp, k);
        const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd >= 0)
            return fdopen(fd, "w");
        if (errno != EEXIST)
            return NULL;
    }
    errno = EEXIST;
    return NULL;
}

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
            "  bench prefill [options]   prefill throughput per shape, each checked\n"
            "  bench swap [options]      decode over the swap engine: disk-bound, host-tier-bound\n"
            "                            and all-resident cases vs raw figures of the same run\n"
            "  store bench [options]     block store tile reads vs the disk's own O_DIRECT\n"
            "                            reads, host-tier hits vs memcpy\n"
            "  store bench --remote [HOST:PORT]  remote-tier pipelined GETs vs redis-benchmark\n"
            "  store verify --dir D      check every extent (non-zero exit on corruption)\n"
            "  store inspect --dir D     geometry, occupancy, per-namespace counts\n"
            "run 'spillway demo --help', 'spillway bench prefill --help',\n"
            "'spillway bench swap --help' or\n"
            "'spillway store bench --help' for options\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "info")) {
        printf("spillway %s\n", sw_version_string());
        printf("cuda devices: %d\n", sw_cuda_device_count());
        printf("cpu isa: %s\n", sw_prefill_cpu_isa());
        return 0;
    }
    if (!strcmp(argv[1], "demo"))
        return cmd_demo(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench") && argc >= 3 && !strcmp(argv[2], "prefill"))
        return cmd_bench_prefill(argc - 2, argv + 2);
    if (!strcmp(argv[1], "bench") && argc >= 3 && !strcmp(argv[2], "swap"))
        return cmd_bench_swap(argc - 2, argv + 2);
    if (!strcmp(argv[1], "store"))
        return cmd_store(argc - 1, argv + 1);
    fprintf(stderr, "spillway: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
