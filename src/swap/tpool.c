/* Persistent compute pool of the swap handle: `n - 1` worker threads plus
 * the calling thread run the tasks of one job (sw_swap_tpool_run), tasks
 * handed out by an atomic counter. Created at sw_swap_create, joined at
 * sw_swap_destroy; no thread is created per call. Workers spin briefly on
 * the job generation before sleeping, since a decode step issues one job
 * per tile (~100 per step) and a condition-variable wake costs tens of
 * microseconds on a VM. */
#include "swap_internal.h"
#include "core/sw_core.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SW_PAUSE() _mm_pause()
#else
#define SW_PAUSE() ((void)0)
#endif

/* Busy-wait budget before sleeping: pause-spins, then yields (so that an
 * oversubscribed machine still runs the thread that holds the work). */
#define SW_TPOOL_SPIN 2000
#define SW_TPOOL_YIELD 64

static int backoff(int spins)
{
    if (spins < SW_TPOOL_SPIN)
        SW_PAUSE();
    else if (spins < SW_TPOOL_SPIN + SW_TPOOL_YIELD)
        sched_yield();
    else
        return 0;
    return 1;
}

typedef struct sw_tp_arg {
    sw_swap_tpool *p;
    int tid;
} sw_tp_arg;

static void run_tasks(sw_swap_tpool *p, int tid)
{
    for (;;) {
        const int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->ntasks)
            break;
        p->fn(p->ctx, i, tid);
    }
}

static void *worker_main(void *arg)
{
    sw_swap_tpool *p = ((sw_tp_arg *)arg)->p;
    const int tid = ((sw_tp_arg *)arg)->tid;
    uint64_t seen = 0;
    for (;;) {
        /* spin, then sleep, until a new job (or stop) is published */
        for (int spins = 0; atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
                            !atomic_load_explicit(&p->stop, memory_order_acquire) &&
                            backoff(spins);
             spins++) {
        }
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_acquire))
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        run_tasks(p, tid);
        if (atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu); /* the caller may be asleep on done */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

sw_status sw_swap_tpool_start(sw_swap_tpool *p, int nthreads)
{
    memset(p, 0, sizeof *p);
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > 256)
        nthreads = 256;
    p->nthreads = nthreads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->active, 0);
    if (nthreads == 1)
        return SW_OK;
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        return sw_fail(SW_STATUS_INTERNAL, "compute pool mutex");
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        return sw_fail(SW_STATUS_INTERNAL, "compute pool condition");
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_cond_destroy(&p->done);
        pthread_mutex_destroy(&p->mu);
        return sw_fail(SW_STATUS_INTERNAL, "compute pool condition");
    }
    p->sync = 1;
    p->th = calloc((size_t)nthreads - 1, sizeof *p->th);
    p->args = calloc((size_t)nthreads - 1, sizeof(sw_tp_arg));
    if (!p->th || !p->args) {
        sw_swap_tpool_stop(p);
        return sw_fail(SW_STATUS_NO_MEMORY, "compute pool of %d threads", nthreads);
    }
    sw_tp_arg *a = p->args;
    for (int i = 0; i < nthreads - 1; i++) {
        a[i].p = p;
        a[i].tid = i + 1;
        if (pthread_create(&p->th[i], NULL, worker_main, &a[i]) != 0) {
            sw_swap_tpool_stop(p);
            return sw_fail(SW_STATUS_INTERNAL, "compute pool: thread %d of %d", i + 1, nthreads);
        }
        p->started++;
    }
    return SW_OK;
}

void sw_swap_tpool_stop(sw_swap_tpool *p)
{
    if (p->sync) {
        pthread_mutex_lock(&p->mu);
        atomic_store_explicit(&p->stop, 1, memory_order_release);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++)
            pthread_join(p->th[i], NULL);
        pthread_cond_destroy(&p->cv);
        pthread_cond_destroy(&p->done);
        pthread_mutex_destroy(&p->mu);
    }
    free(p->th);
    free(p->args);
    p->th = NULL;
    p->args = NULL;
    p->started = 0;
    p->sync = 0;
}

void sw_swap_tpool_run(sw_swap_tpool *p, sw_swap_task_fn fn, void *ctx, int ntasks)
{
    if (ntasks <= 0)
        return;
    if (p->started == 0 || ntasks == 1) {
        for (int i = 0; i < ntasks; i++)
            fn(ctx, i, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->ntasks = ntasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->active, p->started, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    /* every worker checks in, so the next job cannot race with this one */
    for (int spins = 0; atomic_load_explicit(&p->active, memory_order_acquire) > 0 &&
                        backoff(spins);
         spins++) {
    }
    if (atomic_load_explicit(&p->active, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->active, memory_order_acquire) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
