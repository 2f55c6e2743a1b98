/* The CUDA prefill kernels while other GPU work competes: every case of the
 * seeded family (test_prefill_cuda's, F16 and BF16) checked against the fp64
 * reference while
 *   - two other processes (this program re-run with --load) keep the copy
 *     engines and the multiprocessors busy: pinned H2D and D2H copies of
 *     32 MiB on two streams and a long causal prefill on a third;
 *   - a thread of this process keeps H2D copies of 32 MiB queued;
 *   - four threads each run cases on their own stream (the legacy default
 *     stream and three non-blocking ones), each case with its own buffers
 *     and workspace, uploaded, poisoned, run and checked in that order, so
 *     four cases are in flight at once.
 * A kernel or launch that is right only on an idle GPU (an ordering race
 * between a stream and the work it depends on, a scheduler counter reset
 * behind the launch, shared memory read before it is written) fails here,
 * where a quiet run of test_prefill_cuda passes. Built with
 * -DSW_TEST_UPLOAD_UNORDERED (sw_test_cuda.h) it shows the one race found
 * so far: Q/K/V uploaded with a plain cudaMemcpy from pageable memory on the
 * legacy stream, then read by a kernel on a non-blocking stream.
 * Exit 77 (skipped) without a usable GPU. */
#include "sw_test.h"

#include "core/sw_core.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SW_HAVE_CUDA
int main(void)
{
    printf("test_prefill_stress: skipped (built without CUDA)\n");
    return SW_TEST_SKIP;
}
#else
#include "sw_test_cuda.h"

#define NSTREAMS 4
#define HOG_BYTES ((size_t)32 << 20)
#define NLOAD 2

/* --load SECONDS PARENT_PID FD: competing work until the time is up, the
 * parent is gone or SIGTERM; one byte on FD once the first round is queued. */
static volatile sig_atomic_t g_stop;
static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int load_main(double seconds, pid_t parent, int fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return 0;
    signal(SIGTERM, on_term);
    void *h = NULL, *d0 = NULL, *d1 = NULL;
    cudaStream_t s[3];
    CUDA_OK(cudaMallocHost(&h, HOG_BYTES));
    CUDA_OK(cudaMalloc(&d0, HOG_BYTES));
    CUDA_OK(cudaMalloc(&d1, HOG_BYTES));
    memset(h, 0x3c, HOG_BYTES);
    for (int i = 0; i < 3; i++)
        CUDA_OK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    /* Compute: one causal 8192-token request, 16 heads, d128, BF16 (its
     * inputs are 0x3c3c = 0.0115: any finite value will do for a load). */
    const int32_t n = 8192, hq = 16, hkv = 4, d = 128;
    const int32_t qo[2] = {0, n}, kv[2] = {0, n};
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.num_qo_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.causal = 1;
    sw_prefill_plan *pl = NULL;
    if (sw_prefill_plan_create(&p, 1, qo, kv, &pl) != SW_OK) {
        fprintf(stderr, "load: plan: %s\n", sw_last_error());
        return 1;
    }
    void *q, *k, *v, *o, *ws = NULL;
    const size_t qb = (size_t)n * hq * d * 2, kb = (size_t)n * hkv * d * 2;
    CUDA_OK(cudaMalloc(&q, qb));
    CUDA_OK(cudaMalloc(&o, qb));
    CUDA_OK(cudaMalloc(&k, kb));
    CUDA_OK(cudaMalloc(&v, kb));
    CUDA_OK(cudaMemset(q, 0x3c, qb));
    CUDA_OK(cudaMemset(k, 0x3c, kb));
    CUDA_OK(cudaMemset(v, 0x3c, kb));
    if (sw_prefill_plan_workspace_size(pl))
        CUDA_OK(cudaMalloc(&ws, sw_prefill_plan_workspace_size(pl)));
    CUDA_OK(cudaDeviceSynchronize());
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = q;
    t.k = k;
    t.v = v;
    t.o = o;
    t.q_rows = n;
    t.kv_rows = n;
    t.workspace = ws;
    t.workspace_bytes = sw_prefill_plan_workspace_size(pl);
    const double t0 = sw_now_seconds();
    int told = 0;
    while (!g_stop && sw_now_seconds() - t0 < seconds && getppid() == parent) {
        for (int r = 0; r < 4; r++) {
            CUDA_OK(cudaMemcpyAsync(d0, h, HOG_BYTES, cudaMemcpyHostToDevice, s[0]));
            CUDA_OK(cudaMemcpyAsync(h, d1, HOG_BYTES, cudaMemcpyDeviceToHost, s[1]));
            if (sw_prefill_run(pl, &t, s[2]) != SW_OK) {
                fprintf(stderr, "load: run: %s\n", sw_last_error());
                return 1;
            }
        }
        if (!told) {
            char b = 1;
            told = write(fd, &b, 1) == 1;
        }
        CUDA_OK(cudaDeviceSynchronize());
    }
    sw_prefill_plan_destroy(pl);
    return 0;
}

/* The cases: each worker of the pool runs its cases on its own stream
 * (worker 0 on the legacy default stream), uploads, poisons, runs and checks
 * each; so NSTREAMS cases are in flight at once, next to the checks. */
typedef struct stress {
    sw_backend backend;
    uint64_t seed;
    int ncases;
    cudaStream_t st[NSTREAMS];
    atomic_int failed, total;
} stress;

static void stress_job(int j, int w, void *ctx)
{
    stress *P = ctx;
    /* jobs: the short family (BF16, F16), then the long one (BF16, F16) */
    const int nlong = P->ncases / 8, fam = j >= 2 * P->ncases;
    const int k = fam ? j - 2 * P->ncases : j, n = fam ? nlong : P->ncases;
    const int di = k / n, i = k % n;
    const sw_dtype dt = di ? SW_DTYPE_F16 : SW_DTYPE_BF16;
    sw_case c;
    sw_case_make(&c, P->seed + (fam ? 100 : 0) + (uint64_t)di, i, dt, fam ? 2500 : 160);
    const int bad = sw_cuda_case_run(&c, fam ? 29 : 1, P->st[w], 1, P->backend, NULL);
    if (bad)
        fprintf(stderr, "  (that case ran on stream %d)\n", w);
    sw_case_free(&c);
    atomic_fetch_add(&P->failed, bad);
    atomic_fetch_add(&P->total, 1);
}

/* This process's own copy hog: 32 MiB H2D copies, two queued at a time,
 * until told to stop. */
typedef struct hog {
    atomic_int stop;
    void *h, *d;
    cudaStream_t st;
} hog;

static void *hog_main(void *p)
{
    hog *g = p;
    while (!atomic_load(&g->stop)) {
        for (int k = 0; k < 2; k++)
            CUDA_OK(cudaMemcpyAsync(g->d, g->h, HOG_BYTES, cudaMemcpyHostToDevice, g->st));
        CUDA_OK(cudaStreamSynchronize(g->st));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--load") == 0)
        return load_main(atof(argv[2]), (pid_t)atol(argv[3]), atoi(argv[4]));
    if (sw_cuda_device_count() == 0) {
        printf("test_prefill_stress: skipped (no usable CUDA device)\n");
        return SW_TEST_SKIP;
    }
    const uint64_t seed = (uint64_t)sw_env_int("SW_TEST_SEED", 20261129);
    const int ncases = (int)sw_env_int("SW_TEST_CASES", 100);
    const double t0 = sw_now_seconds();

    /* The competitors: this program again, in two processes. */
    int pfd[2];
    if (pipe(pfd) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t kids[NLOAD];
    char ppid[32], wfd[16];
    snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
    snprintf(wfd, sizeof wfd, "%d", pfd[1]);
    for (int i = 0; i < NLOAD; i++) {
        kids[i] = fork();
        if (kids[i] < 0) {
            perror("fork");
            return 1;
        }
        if (kids[i] == 0) {
            close(pfd[0]);
            execl("/proc/self/exe", argv[0], "--load", "600", ppid, wfd, (char *)NULL);
            _exit(127);
        }
    }
    close(pfd[1]);
    for (int i = 0; i < NLOAD; i++) {
        /* a load process that failed before its first round never writes */
        struct pollfd pf = {pfd[0], POLLIN, 0};
        char b;
        ssize_t r = -1;
        if (poll(&pf, 1, 60000) == 1)
            do
                r = read(pfd[0], &b, 1);
            while (r < 0 && errno == EINTR);
        if (r != 1) {
            fprintf(stderr, "FAIL: a load process did not start\n");
            for (int k = 0; k < NLOAD; k++)
                kill(kids[k], SIGKILL);
            return 1;
        }
    }
    close(pfd[0]);
    printf("test_prefill_stress: %d load processes running (%.1f s)\n", NLOAD,
           sw_now_seconds() - t0);

    hog g;
    memset(&g, 0, sizeof g);
    CUDA_OK(cudaMallocHost(&g.h, HOG_BYTES));
    CUDA_OK(cudaMalloc(&g.d, HOG_BYTES));
    CUDA_OK(cudaStreamCreateWithFlags(&g.st, cudaStreamNonBlocking));
    pthread_t hog_thread;
    if (pthread_create(&hog_thread, NULL, hog_main, &g) != 0) {
        fprintf(stderr, "FAIL: pthread_create\n");
        return 1;
    }

    stress P;
    memset(&P, 0, sizeof P);
    P.seed = seed;
    P.ncases = ncases;
    P.st[0] = NULL; /* the legacy default stream */
    for (int i = 1; i < NSTREAMS; i++)
        CUDA_OK(cudaStreamCreateWithFlags(&P.st[i], cudaStreamNonBlocking));

    sw_backend backends[2] = {SW_BACKEND_CUDA_PORTABLE, SW_BACKEND_CUDA_HOPPER};
    int nb = 1;
    {
        sw_case c;
        sw_case_make(&c, 98, 0, SW_DTYPE_BF16, 64);
        c.params.backend = SW_BACKEND_CUDA_HOPPER;
        sw_prefill_plan *pl = NULL;
        if (sw_prefill_plan_create(&c.params, c.batch, c.qo_indptr, c.kv_indptr, &pl) == SW_OK)
            nb = 2;
        sw_prefill_plan_destroy(pl);
        sw_case_free(&c);
    }
    int failed = 0, total = 0;
    for (int bi = 0; bi < nb; bi++) {
        P.backend = backends[bi];
        atomic_store(&P.failed, 0);
        atomic_store(&P.total, 0);
        sw_test_pool_run(NSTREAMS, 2 * ncases + 2 * (ncases / 8), stress_job, &P);
        failed += atomic_load(&P.failed);
        total += atomic_load(&P.total);
        printf("test_prefill_stress: %s: %d cases, %d failed\n", sw_backend_name(backends[bi]),
               atomic_load(&P.total), atomic_load(&P.failed));
    }
    atomic_store(&g.stop, 1);
    pthread_join(hog_thread, NULL);
    for (int i = 0; i < NLOAD; i++)
        kill(kids[i], SIGTERM);
    int load_bad = 0;
    for (int i = 0; i < NLOAD; i++) {
        int ws = 0;
        if (waitpid(kids[i], &ws, 0) != kids[i] || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            load_bad++;
    }
    if (load_bad)
        fprintf(stderr, "FAIL: %d load process(es) failed\n", load_bad);
    for (int i = 1; i < NSTREAMS; i++)
        cudaStreamDestroy(P.st[i]);
    cudaStreamDestroy(g.st);
    cudaFree(g.d);
    cudaFreeHost(g.h);
    printf("test_prefill_stress: %d cases (seed %llu), %d failed, %.1f s\n", total,
           (unsigned long long)seed, failed, sw_now_seconds() - t0);
    return failed || load_bad || sw_test_failures ? 1 : 0;
}
#endif
