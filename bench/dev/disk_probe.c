/* disk_probe DIR [SIZE_MB] [ROUNDS] - the disk's O_DIRECT sequential read rate by request size and
 * requests in flight (the swap engine's disk case: how much in flight does the disk want?).
 *
 * Writes DIR/disk-probe.bin (SIZE_MB, default 512; O_DIRECT, fsync'ed), then ROUNDS (default 3)
 * rounds; each round reads the whole file once per shape (chunk KiB x threads, each thread one pread
 * in flight, chunks handed out in file order by an atomic counter), the shapes' order rotated per
 * round. Then a second file is written and read once at 4 MiB x 1 and 512 KiB x 8 (the first read
 * after a write, against the rounds' re-reads). Prints GB/s (1e9 bytes/s) per shape and round.
 * Build: gcc -O2 -pthread bench/dev/disk_probe.c -o disk_probe
 * Run:   disk_probe /var/tmp 512 3
 * Measured on the H200 host's virtio disk: saturated at ~4 MiB in flight (the store's cap);
 * 8-16 MiB in flight no faster; one shape varies +-15-20% from round to round (4 MiB x 1:
 * 2.0-2.6 GB/s; the engine's 640 KiB x 6: 1.9-2.5). docs/perf/swap.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int write_file(const char *path, uint64_t bytes)
{
    const size_t chunk = 4u << 20;
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0600);
    if (fd < 0)
        return -errno;
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, chunk)) {
        close(fd);
        return -ENOMEM;
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < chunk; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
    int rc = 0;
    for (uint64_t off = 0; off < bytes && !rc; off += chunk) {
        memcpy(buf, &off, sizeof off);
        errno = 0;
        if (pwrite(fd, buf, chunk, (off_t)off) != (ssize_t)chunk)
            rc = errno ? -errno : -EIO;
    }
    if (!rc && fsync(fd))
        rc = -errno;
    free(buf);
    close(fd);
    return rc;
}

typedef struct job {
    int fd;
    uint64_t bytes;
    size_t chunk;
    _Atomic uint64_t *next;
    int err;
} job;

static void *reader(void *arg)
{
    job *j = (job *)arg;
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, j->chunk)) {
        j->err = 1;
        return NULL;
    }
    for (;;) {
        uint64_t off = atomic_fetch_add(j->next, j->chunk);
        if (off + j->chunk > j->bytes)
            break;
        if (pread(j->fd, buf, j->chunk, (off_t)off) != (ssize_t)j->chunk)
            j->err = 1;
    }
    free(buf);
    return NULL;
}

static double pass(const char *path, uint64_t bytes, size_t chunk, int threads)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0)
        return -1;
    _Atomic uint64_t next = 0;
    job jobs[64];
    pthread_t th[64];
    bytes -= bytes % chunk;
    double t0 = now();
    int started = 0, err = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){fd, bytes, chunk, &next, 0};
        if (pthread_create(&th[t], NULL, reader, &jobs[t]) != 0) {
            err = 1;
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        err |= jobs[t].err;
    }
    double dt = now() - t0;
    close(fd);
    return err ? -1 : bytes / dt / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: disk_probe DIR [SIZE_MB] [ROUNDS]\n");
        return 2;
    }
    uint64_t mb = argc > 2 ? strtoull(argv[2], NULL, 10) : 512;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (mb < 16 || mb > (1u << 20) || rounds < 1 || rounds > 16) {
        fprintf(stderr, "disk_probe: SIZE_MB 16..1048576, ROUNDS 1..16\n");
        return 2;
    }
    char path[4096], path2[4096];
    snprintf(path, sizeof path, "%s/disk-probe.bin", argv[1]);
    snprintf(path2, sizeof path2, "%s/disk-probe-2.bin", argv[1]);
    static const struct { int kib, threads; } shapes[] = {
        {4096, 1}, {1024, 4}, {512, 8}, {640, 6}, {1024, 8}, {512, 16}, {2048, 4}, {1024, 16}, {256, 16},
    };
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    uint64_t bytes = mb << 20;
    double t0 = now();
    int e = write_file(path, bytes);
    if (e) {
        fprintf(stderr, "disk_probe: write %s: %s\n", path, strerror(-e));
        unlink(path);
        return 1;
    }
    printf("wrote %llu MiB in %.2f s\n", (unsigned long long)mb, now() - t0);
    double g[16][16];
    for (int r = 0; r < rounds && r < 16; r++)
        for (int k = 0; k < ns; k++) {
            int s = (k + r) % ns;
            g[r][s] = pass(path, bytes, (size_t)shapes[s].kib << 10, shapes[s].threads);
        }
    printf("%-14s %-10s", "shape", "in flight");
    for (int r = 0; r < rounds && r < 16; r++)
        printf("  round %-3d", r + 1);
    printf("  (GB/s, O_DIRECT sequential, %llu MiB a pass)\n", (unsigned long long)mb);
    for (int s = 0; s < ns; s++) {
        char name[32];
        snprintf(name, sizeof name, "%d KiB x %d", shapes[s].kib, shapes[s].threads);
        printf("%-14s %6.1f MiB", name, shapes[s].kib * shapes[s].threads / 1024.0);
        for (int r = 0; r < rounds && r < 16; r++)
            printf("  %9.3f", g[r][s]);
        printf("\n");
    }
    e = write_file(path2, bytes);
    if (!e) {
        double a = pass(path2, bytes, 4u << 20, 1);
        double b = pass(path2, bytes, 512u << 10, 8);
        printf("first read after the write of a second file: 4096 KiB x 1 %.3f, then 512 KiB x 8 %.3f GB/s\n",
               a, b);
    } else {
        printf("second file: write failed (%s)\n", strerror(-e));
    }
    unlink(path);
    unlink(path2);
    return 0;
}
