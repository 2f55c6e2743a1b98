/* bench/common.h: option parsing, timing, the results file, GPU buffers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include "bench_commit.h" /* SW_BENCH_COMMIT, written by cmake/bench_commit.cmake */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef SW_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ options -- */
int bench_arg_i64(const char *prog, const char *opt, const char *v, int64_t lo, int64_t hi,
                  const char *unit, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    const long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "%s: %s wants %" PRId64 "..%" PRId64 "%s%s, not '%s'\n", prog, opt, lo,
                hi, unit[0] ? " " : "", unit, v ? v : "");
        return BENCH_USAGE;
    }
    *out = x;
    return 0;
}

int bench_in_list(const char *list, const char *name)
{
    if (!list)
        return 1;
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int bench_check_list(const char *prog, const char *opt, const char *list,
                     const char *const *names, int n)
{
    if (!list)
        return 0;
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = len && strlen(names[i]) == len && !strncmp(names[i], p, len);
        if (!known) {
            fprintf(stderr, "%s: unknown %s '%.*s' (known:", prog, opt, (int)len, p);
            for (int i = 0; i < n; i++)
                fprintf(stderr, "%s %s", i ? "," : "", names[i]);
            fprintf(stderr, ")\n");
            return BENCH_USAGE;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

/* ------------------------------------------------------- results file -- */
void bench_host_slug(char *out, size_t n)
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

int bench_opt_is(const char *a, const char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(a, names[k]))
            return 1;
    return 0;
}

int bench_result_probe(const char *prog, const char *explicit_path)
{
    char dir[4096];
    if (explicit_path) {
        if (access(explicit_path, F_OK) == 0) {
            if (access(explicit_path, W_OK) == 0)
                return 0;
            fprintf(stderr, "%s: %s: %s\n", prog, explicit_path, strerror(errno));
            return 1;
        }
        snprintf(dir, sizeof dir, "%s", explicit_path);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    } else {
        struct stat sb;
        snprintf(dir, sizeof dir, "%s",
                 stat("bench/results", &sb) == 0 && S_ISDIR(sb.st_mode) ? "bench/results" : ".");
    }
    if (access(dir, W_OK | X_OK) == 0)
        return 0;
    fprintf(stderr, "%s: %s: cannot write the results file there: %s\n", prog,
            explicit_path ? explicit_path : dir, strerror(errno));
    return 1;
}

FILE *bench_result_open(const char *explicit_path, const char *component, char *path, size_t n)
{
    if (explicit_path) {
        snprintf(path, n, "%s", explicit_path);
        return fopen(path, "w");
    }
    char host[128], stamp[32];
    bench_host_slug(host, sizeof host);
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

const char *bench_commit(void)
{
    return SW_BENCH_COMMIT;
}

/* Writes the characters of `s` escaped for a JSON string. */
static void json_chars(FILE *f, const char *s)
{
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* One word of the command, quoted for a POSIX shell when it needs it. */
static void json_shell_word(FILE *f, const char *w)
{
    int plain = w[0] != 0;
    for (const char *p = w; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+@%-",
                       *p) != NULL;
    if (plain) {
        json_chars(f, w);
        return;
    }
    fputc('\'', f);
    for (const char *p = w; *p; p++) {
        if (*p == '\'')
            fputs("'\\\\''", f); /* ' \' ' with the backslash escaped for JSON */
        else {
            const char one[2] = {*p, 0};
            json_chars(f, one);
        }
    }
    fputc('\'', f);
}

void bench_json_begin(FILE *f, const char *component, int argc, char **argv)
{
    char host[128], stamp[32];
    bench_host_slug(host, sizeof host);
    const time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    fprintf(f, "{\"component\": \"");
    json_chars(f, component);
    fprintf(f, "\", \"command\": \"");
    /* the opponents a run measures depend on it: part of the command */
    const char *opp = getenv("SPILLWAY_OPPONENT");
    if (opp && *opp) {
        fputs("SPILLWAY_OPPONENT=", f);
        json_shell_word(f, opp);
        fputc(' ', f);
    }
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (i == 0 && strrchr(w, '/'))
            w = strrchr(w, '/') + 1;
        if (i)
            fputc(' ', f);
        json_shell_word(f, w);
    }
    fprintf(f, "\",\n \"commit\": \"");
    json_chars(f, bench_commit());
    fprintf(f, "\", \"library\": \"");
    json_chars(f, sw_version_string());
    fprintf(f, "\", \"host\": \"%s\", \"utc\": \"%s\",\n \"records\": [\n", host, stamp);
}

void bench_json_end(FILE *f)
{
    fprintf(f, "\n]}\n");
}

/* ---------------------------------------------------------- GPU buffers -- */
#ifdef SW_HAVE_CUDA
static int gpu_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "spillway bench: %s: %s\n", what, cudaGetErrorString(e));
    (void)cudaGetLastError(); /* a failed call leaves no sticky error for the next */
    return -1;
}

void *bench_gpu_alloc(size_t bytes, const char *what)
{
    void *p = NULL;
    return gpu_ok(cudaMalloc(&p, bytes ? bytes : 1), what) ? NULL : p;
}

void bench_gpu_free(void *p)
{
    if (p)
        cudaFree(p);
}

void *bench_pinned_alloc(size_t bytes, const char *what)
{
    void *p = NULL;
    return gpu_ok(cudaMallocHost(&p, bytes ? bytes : 1), what) ? NULL : p;
}

void bench_pinned_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

void *bench_gpu_stream_create(const char *what)
{
    cudaStream_t s = NULL;
    return gpu_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), what) ? NULL : (void *)s;
}

void bench_gpu_stream_destroy(void *stream)
{
    if (stream)
        cudaStreamDestroy((cudaStream_t)stream);
}

int bench_gpu_copy(void *dst, const void *src, size_t bytes, void *stream, const char *what)
{
    if (gpu_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream), what))
        return -1;
    return gpu_ok(cudaStreamSynchronize((cudaStream_t)stream), what);
}

int bench_gpu_fill(void *dst, int byte, size_t bytes, const char *what)
{
    if (gpu_ok(cudaMemset(dst, byte, bytes), what))
        return -1;
    return gpu_ok(cudaDeviceSynchronize(), what);
}

int bench_gpu_sync(void *stream, const char *what)
{
    return gpu_ok(stream ? cudaStreamSynchronize((cudaStream_t)stream) : cudaDeviceSynchronize(),
                  what);
}

int bench_gpu_timer_create(bench_gpu_timer *t)
{
    cudaEvent_t a = NULL, b = NULL;
    t->start = t->stop = NULL;
    if (gpu_ok(cudaEventCreate(&a), "event") || gpu_ok(cudaEventCreate(&b), "event")) {
        if (a)
            cudaEventDestroy(a);
        return -1;
    }
    t->start = a;
    t->stop = b;
    return 0;
}

void bench_gpu_timer_destroy(bench_gpu_timer *t)
{
    if (t->start)
        cudaEventDestroy((cudaEvent_t)t->start);
    if (t->stop)
        cudaEventDestroy((cudaEvent_t)t->stop);
    t->start = t->stop = NULL;
}

void bench_gpu_timer_start(bench_gpu_timer *t, void *stream)
{
    cudaEventRecord((cudaEvent_t)t->start, (cudaStream_t)stream);
}

double bench_gpu_timer_stop_ms(bench_gpu_timer *t, void *stream)
{
    float ms = 0;
    if (gpu_ok(cudaEventRecord((cudaEvent_t)t->stop, (cudaStream_t)stream), "event record") ||
        gpu_ok(cudaEventSynchronize((cudaEvent_t)t->stop), "event wait") ||
        gpu_ok(cudaEventElapsedTime(&ms, (cudaEvent_t)t->start, (cudaEvent_t)t->stop),
               "event time"))
        return -1;
    return ms;
}

double bench_gpu_copy_gbps(void *dst, const void *src, uint64_t bytes, double factor)
{
    bench_gpu_timer t;
    if (bench_gpu_timer_create(&t))
        return -1;
    double best = -1;
    (void)cudaMemcpy(dst, src, bytes, cudaMemcpyDefault); /* warm-up */
    for (int i = 0; i < 5; i++) {
        bench_gpu_timer_start(&t, NULL);
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, 0);
        const double ms = bench_gpu_timer_stop_ms(&t, NULL);
        if (ms <= 0)
            break;
        const double g = factor * (double)bytes / (ms * 1e-3) / 1e9;
        best = g > best ? g : best;
    }
    bench_gpu_timer_destroy(&t);
    (void)cudaGetLastError();
    return best;
}
#else
static void *no_cuda(const char *what)
{
    fprintf(stderr, "spillway bench: %s: this build has no CUDA\n", what);
    return NULL;
}
void *bench_gpu_alloc(size_t bytes, const char *what) { (void)bytes; return no_cuda(what); }
void bench_gpu_free(void *p) { (void)p; }
void *bench_pinned_alloc(size_t bytes, const char *what) { (void)bytes; return no_cuda(what); }
void bench_pinned_free(void *p) { (void)p; }
void *bench_gpu_stream_create(const char *what) { return no_cuda(what); }
void bench_gpu_stream_destroy(void *stream) { (void)stream; }
int bench_gpu_copy(void *dst, const void *src, size_t bytes, void *stream, const char *what)
{
    (void)dst; (void)src; (void)bytes; (void)stream;
    no_cuda(what);
    return -1;
}
int bench_gpu_fill(void *dst, int byte, size_t bytes, const char *what)
{
    (void)dst; (void)byte; (void)bytes;
    no_cuda(what);
    return -1;
}
int bench_gpu_sync(void *stream, const char *what)
{
    (void)stream;
    no_cuda(what);
    return -1;
}
int bench_gpu_timer_create(bench_gpu_timer *t)
{
    t->start = t->stop = NULL;
    no_cuda("event");
    return -1;
}
void bench_gpu_timer_destroy(bench_gpu_timer *t) { (void)t; }
void bench_gpu_timer_start(bench_gpu_timer *t, void *stream) { (void)t; (void)stream; }
double bench_gpu_timer_stop_ms(bench_gpu_timer *t, void *stream)
{
    (void)t; (void)stream;
    return -1;
}
double bench_gpu_copy_gbps(void *dst, const void *src, uint64_t bytes, double factor)
{
    (void)dst; (void)src; (void)bytes; (void)factor;
    return -1;
}
#endif

/* ------------------------------------------------------------ scratch -- */

#define GUARD_MAX 4
static char guard_dirs[GUARD_MAX][4096];
static volatile sig_atomic_t guard_used[GUARD_MAX];

/* Empties and removes directory fd `at`/`name` (depth-first, a buffer per
 * level); system calls only. */
static void guard_rmtree_at(int at, const char *name, int depth)
{
    static char bufs[8][4096];
    if (depth >= 8)
        return;
    const int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    for (;;) {
        const long n = syscall(SYS_getdents64, fd, bufs[depth], sizeof bufs[depth]);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            const char *e = bufs[depth] + off;
            unsigned short reclen;
            memcpy(&reclen, e + 16, sizeof reclen);
            const unsigned char type = (unsigned char)e[18];
            const char *nm = e + 19;
            off += reclen;
            if (!strcmp(nm, ".") || !strcmp(nm, ".."))
                continue;
            /* (a file system without d_type says DT_UNKNOWN: a directory
             * then fails unlinkat with EISDIR) */
            if (type == 4 /* DT_DIR */ || (unlinkat(fd, nm, 0) != 0 && errno == EISDIR))
                guard_rmtree_at(fd, nm, depth + 1);
        }
    }
    close(fd);
    (void)unlinkat(at, name, AT_REMOVEDIR);
}

static void guard_handler(int sig)
{
    errno = 0;
    for (int i = 0; i < GUARD_MAX; i++)
        if (guard_used[i])
            guard_rmtree_at(AT_FDCWD, guard_dirs[i], 0);
    signal(sig, SIG_DFL);
    raise(sig);
}

void bench_scratch_guard(const char *dir)
{
    static int installed;
    for (int i = 0; i < GUARD_MAX; i++)
        if (!guard_used[i]) {
            snprintf(guard_dirs[i], sizeof guard_dirs[i], "%s", dir);
            guard_used[i] = 1;
            break;
        }
    if (!installed) {
        installed = 1;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = guard_handler;
        sigemptyset(&sa.sa_mask);
        const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
        for (int k = 0; k < 3; k++) {
            /* (a signal the program was started with ignored, as a shell's
             * background job ignores SIGINT, stays ignored) */
            struct sigaction old;
            if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
                sigaction(sigs[k], &sa, NULL);
        }
    }
}

void bench_scratch_unguard(const char *dir)
{
    for (int i = 0; i < GUARD_MAX; i++)
        if (guard_used[i] && !strcmp(guard_dirs[i], dir))
            guard_used[i] = 0;
}
