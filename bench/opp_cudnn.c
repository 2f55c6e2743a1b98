/* cuDNN's fused attention over paged KV as an opponent (opp_cudnn.h).
 *
 * One operation graph holding cuDNN's SDPA forward operation: Q [b, hq, 1,
 * d], K and V as page containers [pages, hkv, page, d] addressed through
 * page tables [b, 1, pages_per_seq, 1], the sequence lengths [b, 1, 1, 1]
 * (cuDNN masks the keys past them), the scale passed by value. No mask
 * otherwise: a decode row sees every key of its sequence. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "opp_cudnn.h"

#include "common.h"
#include "opponents/opponent.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(char *why, size_t n, const char *fmt, ...)
{
    if (!why || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

/* The gate, then the shape: 1 when both pass, else 0 with why set. */
static int usable(const bench_cudnn_decode_shape *s, char *why, size_t n)
{
    if (!sw_opponent_enabled("cudnn")) { /* measurement only: docs/opponents.md */
        say(why, n, "cuDNN: not enabled (set SPILLWAY_OPPONENT=cudnn to measure it)");
        return 0;
    }
    if (!s || s->batch < 1 || s->qo_heads < 1 || s->kv_heads < 1 ||
        s->qo_heads % s->kv_heads || s->head_dim < 1 || s->page_size < 1 ||
        s->pages_per_seq < 1 || s->num_pages < 1 || !(s->sm_scale > 0) || !s->page_table ||
        !s->kv_len) {
        say(why, n, "cuDNN: bad decode shape (a count below 1, qo_heads not a multiple of "
                    "kv_heads, sm_scale <= 0 or a NULL table)");
        return 0;
    }
    const int64_t most = (int64_t)s->pages_per_seq * s->page_size;
    for (int32_t b = 0; b < s->batch; b++)
        if (s->kv_len[b] < 1 || s->kv_len[b] > most) {
            say(why, n, "cuDNN: sequence %d: kv_len %d outside 1..%lld", b, s->kv_len[b],
                (long long)most);
            return 0;
        }
    for (int64_t i = 0; i < (int64_t)s->batch * s->pages_per_seq; i++) {
        const int32_t b = (int32_t)(i / s->pages_per_seq), j = (int32_t)(i % s->pages_per_seq);
        if ((int64_t)j * s->page_size < s->kv_len[b] &&
            (s->page_table[i] < 0 || s->page_table[i] >= s->num_pages)) {
            say(why, n, "cuDNN: sequence %d, page %d: index %d outside the pool of %lld pages", b,
                j, s->page_table[i], (long long)s->num_pages);
            return 0;
        }
    }
    return 1;
}

#ifndef SW_BENCH_CUDNN

bench_cudnn_decode *bench_cudnn_decode_create(const bench_cudnn_decode_shape *s, char *why,
                                              size_t n)
{
    if (usable(s, why, n))
        say(why, n, "cuDNN: this build found no cuDNN headers (cudnn_graph.h beside the CUDA "
                    "toolkit's); it cannot measure cuDNN");
    return NULL;
}

int bench_cudnn_decode_run(bench_cudnn_decode *d, const void *q, const void *k_pool,
                           const void *v_pool, void *o, void *stream, char *why, size_t n)
{
    (void)d, (void)q, (void)k_pool, (void)v_pool, (void)o, (void)stream;
    say(why, n, "cuDNN: not in this build");
    return -1;
}

void bench_cudnn_decode_destroy(bench_cudnn_decode *d)
{
    (void)d;
}

int bench_cudnn_version(void)
{
    return 0;
}

#else /* SW_BENCH_CUDNN */

#include <cudnn_graph.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#if CUDNN_VERSION < 91500
#error "bench/opp_cudnn.c needs cuDNN 9.15's headers (CMake checks the version first)"
#endif

/* ------------------------------------------------ the library, opened -- */
typedef struct cudnn_api {
    size_t (*get_version)(void);
    const char *(*error_string)(cudnnStatus_t);
    void (*last_error)(char *, size_t);
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*destroy)(cudnnHandle_t);
    cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*desc_create)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*desc_destroy)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*set)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                         cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*get)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                         cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} cudnn_api;

static cudnn_api api;
static _Atomic int api_state; /* 0 not tried, 1 open, -1 failed */
static char api_why[256];
static int api_version;
static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;

#define MIN_VERSION 91500 /* page tables in the SDPA forward operation */

static int api_open(void)
{
    pthread_mutex_lock(&api_mu);
    if (api_state) {
        pthread_mutex_unlock(&api_mu);
        return api_state;
    }
    api_state = -1;
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(api_why, sizeof api_why, "cuDNN: cannot open libcudnn.so.9 (%s); put cuDNN 9's "
                 "library directory on LD_LIBRARY_PATH", dlerror());
        goto out;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&api.get_version, "cudnnGetVersion"},
        {(void **)&api.error_string, "cudnnGetErrorString"},
        {(void **)&api.last_error, "cudnnGetLastErrorString"},
        {(void **)&api.create, "cudnnCreate"},
        {(void **)&api.destroy, "cudnnDestroy"},
        {(void **)&api.set_stream, "cudnnSetStream"},
        {(void **)&api.desc_create, "cudnnBackendCreateDescriptor"},
        {(void **)&api.desc_destroy, "cudnnBackendDestroyDescriptor"},
        {(void **)&api.finalize, "cudnnBackendFinalize"},
        {(void **)&api.set, "cudnnBackendSetAttribute"},
        {(void **)&api.get, "cudnnBackendGetAttribute"},
        {(void **)&api.execute, "cudnnBackendExecute"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(h, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(api_why, sizeof api_why, "cuDNN: libcudnn.so.9 lacks %s", syms[i].name);
            goto out;
        }
    }
    api_version = (int)api.get_version();
    if (api_version < MIN_VERSION) {
        snprintf(api_why, sizeof api_why, "cuDNN: version %d found; paged SDPA needs %d or newer",
                 api_version, MIN_VERSION);
        goto out;
    }
    api_state = 1;
out:
    if (api_state != 1 && h) {
        dlclose(h);
        memset(&api, 0, sizeof api);
    }
    const int st = api_state;
    pthread_mutex_unlock(&api_mu);
    return st;
}

int bench_cudnn_version(void)
{
    return api_state == 1 ? api_version : 0;
}

/* ------------------------------------------------------------ the graph -- */
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_PT_K, UID_PT_V, UID_SEQ_Q, UID_SEQ_KV, UID_SCALE };
#define NUID 9

struct bench_cudnn_decode {
    cudnnHandle_t handle;
    cudnnBackendDescriptor_t plan;
    void *workspace;    /* device; NULL when the plan needs none */
    int32_t *dtables;   /* device: page table, seq_q [b], seq_kv [b], each 16-byte aligned */
    size_t off_seq_q, off_seq_kv; /* their offsets in dtables, in elements */
    float scale;
};

/* "what: <status>: <cuDNN's last message>" into why; returns -1 */
static int fail(cudnnStatus_t st, const char *what, char *why, size_t n)
{
    char msg[512] = "";
    api.last_error(msg, sizeof msg);
    say(why, n, "cuDNN: %s: %s%s%s", what, api.error_string(st), msg[0] ? ": " : "", msg);
    return -1;
}

#define CK(call, what)                                                                            \
    do {                                                                                          \
        const cudnnStatus_t st_ = (call);                                                         \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                        \
            fail(st_, what, why, n);                                                              \
            goto out;                                                                             \
        }                                                                                         \
    } while (0)

/* A finalised tensor descriptor of 4 dimensions; NULL with why set. */
static cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                       const int64_t str[4], int by_value, char *why, size_t n)
{
    cudnnBackendDescriptor_t t = NULL;
    const int64_t align = by_value ? 4 : 16;
    const bool bv = by_value != 0;
    CK(api.desc_create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t), "tensor");
    CK(api.set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt), "tensor type");
    CK(api.set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim), "tensor dims");
    CK(api.set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str), "tensor strides");
    CK(api.set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid), "tensor uid");
    CK(api.set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align), "tensor align");
    if (by_value)
        CK(api.set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv), "by value");
    CK(api.finalize(t), "tensor finalize");
    return t;
out:
    if (t)
        api.desc_destroy(t);
    return NULL;
}

bench_cudnn_decode *bench_cudnn_decode_create(const bench_cudnn_decode_shape *s, char *why,
                                              size_t n)
{
    if (!usable(s, why, n))
        return NULL;
    if (api_open() != 1) {
        say(why, n, "%s", api_why);
        return NULL;
    }
    bench_cudnn_decode *d = (bench_cudnn_decode *)calloc(1, sizeof *d);
    if (!d) {
        say(why, n, "cuDNN: out of host memory");
        return NULL;
    }
    d->off_seq_q = ((size_t)s->batch * s->pages_per_seq + 3) / 4 * 4;
    d->off_seq_kv = d->off_seq_q + ((size_t)s->batch + 3) / 4 * 4;
    d->scale = s->sm_scale;
    enum { NT = NUID };
    cudnnBackendDescriptor_t t[NT + 1] = {0}; /* by uid */
    cudnnBackendDescriptor_t op = NULL, graph = NULL, heur = NULL, cfg[8] = {0};
    int64_t ncfg = 0;
    int ok = 0;
    const int64_t B = s->batch, Hq = s->qo_heads, Hk = s->kv_heads, D = s->head_dim;
    const int64_t P = s->page_size, NP = s->num_pages, W = s->pages_per_seq;
    const cudnnDataType_t io = s->f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    {
        /* Q and O rows [b][hq][d]: the (unit) query dimension outermost */
        const int64_t qd[4] = {B, Hq, 1, D}, qs[4] = {Hq * D, D, B * Hq * D, 1};
        const int64_t kd[4] = {NP, Hk, P, D}, ks[4] = {Hk * P * D, P * D, D, 1};
        const int64_t td[4] = {B, 1, W, 1}, ts[4] = {W, W, 1, 1};
        const int64_t ld[4] = {B, 1, 1, 1}, ls[4] = {1, 1, 1, 1};
        const int64_t one[4] = {1, 1, 1, 1};
        struct {
            int64_t uid;
            cudnnDataType_t dt;
            const int64_t *dim, *str;
            int by_value;
        } spec[NT] = {
            {UID_Q, io, qd, qs, 0},           {UID_K, io, kd, ks, 0},
            {UID_V, io, kd, ks, 0},           {UID_O, io, qd, qs, 0},
            {UID_PT_K, CUDNN_DATA_INT32, td, ts, 0}, {UID_PT_V, CUDNN_DATA_INT32, td, ts, 0},
            {UID_SEQ_Q, CUDNN_DATA_INT32, ld, ls, 0}, {UID_SEQ_KV, CUDNN_DATA_INT32, ld, ls, 0},
            {UID_SCALE, CUDNN_DATA_FLOAT, one, one, 1},
        };
        for (int i = 0; i < NT; i++)
            if (!(t[spec[i].uid] = tensor(spec[i].uid, spec[i].dt, spec[i].dim, spec[i].str,
                                          spec[i].by_value, why, n)))
                goto out;
    }
    CK(api.desc_create(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &op), "SDPA operation");
    {
        const struct {
            cudnnBackendAttributeName_t a;
            int uid;
        } link[] = {
            {CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, UID_Q},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, UID_K},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, UID_V},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, UID_O},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, UID_SCALE},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_KDESC, UID_PT_K},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_VDESC, UID_PT_V},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC, UID_SEQ_Q},
            {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC, UID_SEQ_KV},
        };
        for (size_t i = 0; i < sizeof link / sizeof link[0]; i++)
            CK(api.set(op, link[i].a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[link[i].uid]),
               "SDPA operation's tensors");
    }
    CK(api.finalize(op), "SDPA operation finalize");
    CK(api.create(&d->handle), "handle");
    CK(api.desc_create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph), "graph");
    CK(api.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op),
       "graph ops");
    CK(api.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &d->handle),
       "graph handle");
    CK(api.finalize(graph), "graph finalize");
    CK(api.desc_create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), "heuristics");
    {
        const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
        CK(api.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                   &graph), "heuristics graph");
        CK(api.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode),
           "heuristics mode");
    }
    CK(api.finalize(heur), "heuristics finalize");
    for (int i = 0; i < 8; i++)
        CK(api.desc_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]), "engine config");
    CK(api.get(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 8, &ncfg, cfg),
       "heuristics results");
    if (ncfg > 8)
        ncfg = 8; /* the count it has; it wrote the 8 asked for */
    if (ncfg < 1) {
        say(why, n, "cuDNN: its heuristics offer no engine for this graph");
        goto out;
    }
    /* the first configuration whose plan finalises (cuDNN's order) */
    for (int64_t i = 0; i < ncfg && !d->plan; i++) {
        cudnnBackendDescriptor_t p = NULL;
        CK(api.desc_create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p), "plan");
        if (api.set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &d->handle) ||
            api.set(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                    &cfg[i])) {
            api.desc_destroy(p);
            continue;
        }
        const cudnnStatus_t st = api.finalize(p);
        if (st == CUDNN_STATUS_SUCCESS) {
            d->plan = p;
        } else {
            fail(st, "no engine config finalises (the last one's refusal)", why, n);
            api.desc_destroy(p);
        }
    }
    if (!d->plan) {
        if (!why || !why[0] || strncmp(why, "cuDNN: no engine", 16) != 0)
            say(why, n, "cuDNN: none of its %lld engine configs takes this graph", (long long)ncfg);
        goto out;
    }
    if (why && n)
        why[0] = '\0'; /* an earlier config's refusal is not this plan's */
    {
        int64_t ws = 0, got = 0;
        CK(api.get(d->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                   &ws), "workspace size");
        if (ws > 0 && !(d->workspace = bench_gpu_alloc((size_t)ws, "cuDNN workspace"))) {
            say(why, n, "cuDNN: no GPU memory for its %lld-byte workspace", (long long)ws);
            goto out;
        }
    }
    {
        const size_t nt = d->off_seq_kv + (size_t)B;
        int32_t *h = (int32_t *)calloc(nt, sizeof(int32_t));
        if (!h) {
            say(why, n, "cuDNN: out of host memory");
            goto out;
        }
        for (size_t i = 0; i < (size_t)B * W; i++) {
            const int32_t pg = s->page_table[i];
            h[i] = pg >= 0 && pg < NP ? pg : 0; /* out of range only past the length: unread */
        }
        for (int64_t b = 0; b < B; b++) {
            h[d->off_seq_q + b] = 1;
            h[d->off_seq_kv + b] = s->kv_len[b];
        }
        d->dtables = (int32_t *)bench_gpu_alloc(nt * sizeof(int32_t), "cuDNN page tables");
        const int bad = !d->dtables || bench_gpu_copy(d->dtables, h, nt * sizeof(int32_t), NULL,
                                                       "cuDNN page tables");
        free(h);
        if (bad) {
            say(why, n, "cuDNN: could not place its page tables on the GPU");
            goto out;
        }
    }
    ok = 1;
out:
    for (int i = 0; i < 8; i++)
        if (cfg[i])
            api.desc_destroy(cfg[i]);
    if (heur)
        api.desc_destroy(heur);
    if (graph)
        api.desc_destroy(graph);
    if (op)
        api.desc_destroy(op);
    for (int i = 0; i <= NT; i++)
        if (t[i])
            api.desc_destroy(t[i]);
    if (!ok) {
        bench_cudnn_decode_destroy(d);
        return NULL;
    }
    return d;
}

int bench_cudnn_decode_run(bench_cudnn_decode *d, const void *q, const void *k_pool,
                           const void *v_pool, void *o, void *stream, char *why, size_t n)
{
    cudnnBackendDescriptor_t vp = NULL;
    int rc = -1;
    int64_t uids[NUID] = {UID_Q, UID_K, UID_V, UID_O, UID_PT_K, UID_PT_V, UID_SEQ_Q, UID_SEQ_KV,
                          UID_SCALE};
    void *ptr[NUID] = {(void *)q, (void *)k_pool, (void *)v_pool, o, d->dtables, d->dtables,
                       d->dtables + d->off_seq_q, d->dtables + d->off_seq_kv, &d->scale};
    CK(api.set_stream(d->handle, (cudaStream_t)stream), "stream");
    CK(api.desc_create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp), "variant pack");
    CK(api.set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, NUID, uids), "uids");
    CK(api.set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, NUID, ptr),
       "pointers");
    CK(api.set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &d->workspace),
       "workspace");
    CK(api.finalize(vp), "variant pack finalize");
    CK(api.execute(d->handle, d->plan, vp), "execute");
    rc = 0;
out:
    if (vp)
        api.desc_destroy(vp);
    return rc;
}

void bench_cudnn_decode_destroy(bench_cudnn_decode *d)
{
    if (!d)
        return;
    if (d->plan)
        api.desc_destroy(d->plan);
    if (d->handle)
        api.destroy(d->handle);
    bench_gpu_free(d->workspace);
    bench_gpu_free(d->dtables);
    free(d);
}

#endif /* SW_BENCH_CUDNN */
