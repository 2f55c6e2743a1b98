/* The device pool's launcher thread (a direct tile's CUDA calls made off the
 * caller's thread, jobs in tile order, one at a time; what it runs is the
 * callback it was started with) and the polling the engine's threads do
 * between jobs. */
#include "dev_internal.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SW_SPIN_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define SW_SPIN_PAUSE() __asm__ __volatile__("isb" ::: "memory")
#else
#define SW_SPIN_PAUSE() ((void)0)
#endif

/* How long the engine's threads (launcher, prelease) poll for work before
 * they sleep (tuning spin_us; 0: never poll; at most 10 s). */
double sw_swap_spin_seconds(int64_t us)
{
    if (us > 10000000)
        us = 10000000;
    return us > 0 ? 1e-6 * (double)us : 0.0;
}

/* Polls *a until it is no longer v, for at most spin_s seconds (the engine's
 * threads between jobs, before they sleep on their condition variable). */
void sw_swap_poll_change(atomic_uint *a, unsigned v, double spin_s)
{
    const double end = sw_swap_tl_now() + spin_s;
    for (uint32_t k = 1; atomic_load_explicit(a, memory_order_acquire) == v; k++) {
        SW_SPIN_PAUSE();
        if ((k & 63) == 0 && sw_swap_tl_now() > end)
            break;
    }
}

static void *launcher_main(void *arg)
{
    struct launcher *L = arg;
    (void)sw_cuda_set_device(L->d->device);
    pthread_mutex_lock(&L->mu);
    for (;;) {
        if (L->n == 0 && !L->stop && L->spin_s > 0.0) {
            /* poll before sleeping (a push counts under mu); a nudge made
             * while the thread worked is this poll */
            L->nudge = 0;
            const unsigned seen = atomic_load_explicit(&L->pushes, memory_order_relaxed);
            pthread_mutex_unlock(&L->mu);
            sw_swap_poll_change(&L->pushes, seen, L->spin_s);
            pthread_mutex_lock(&L->mu);
        }
        while (L->n == 0 && !L->stop && !L->nudge)
            pthread_cond_wait(&L->cv_push, &L->mu);
        if (L->n == 0 && !L->stop) {
            L->nudge = 0; /* woken ahead of a push: poll for it */
            continue;
        }
        L->nudge = 0;
        if (L->n == 0)
            break; /* stop, nothing left */
        const launch_job j = L->ring[L->head];
        const int skip = L->err != SW_OK; /* after a failure the rest of the pass is dropped */
        L->busy = 1;
        pthread_mutex_unlock(&L->mu);
        const sw_status st = skip ? SW_OK : L->run(L->d, &j);
        pthread_mutex_lock(&L->mu);
        if (st != SW_OK && L->err == SW_OK) {
            L->err = st;
            snprintf(L->msg, sizeof L->msg, "%s", sw_last_error());
        }
        L->head = (L->head + 1) % SW_SWAP_LAUNCH_RING;
        L->n--;
        L->busy = 0;
        pthread_cond_broadcast(&L->cv_done);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

sw_status sw_swap_launch_push(sw_swap_dev *d, const launch_job *j)
{
    struct launcher *L = d->ln;
    if (!L)
        return sw_fail(SW_STATUS_INTERNAL, "direct tile without the launcher");
    pthread_mutex_lock(&L->mu);
    while (L->n == SW_SWAP_LAUNCH_RING)
        pthread_cond_wait(&L->cv_done, &L->mu);
    L->ring[(L->head + L->n) % SW_SWAP_LAUNCH_RING] = *j;
    L->n++;
    atomic_fetch_add_explicit(&L->pushes, 1u, memory_order_release);
    pthread_cond_signal(&L->cv_push);
    pthread_mutex_unlock(&L->mu);
    return SW_OK;
}

/* Waits until every pushed job ran; the first failure since the last
 * clearing drain (the verdict's: a failed job leaves its tile's slots
 * unwritten, so the verdict drops every slot the call gathered). */
sw_status sw_swap_launch_drain_x(sw_swap_dev *d, int clear)
{
    struct launcher *L = d->ln;
    if (!L)
        return SW_OK;
    pthread_mutex_lock(&L->mu);
    while (L->n > 0 || L->busy)
        pthread_cond_wait(&L->cv_done, &L->mu);
    const sw_status st = L->err;
    char msg[512];
    memcpy(msg, L->msg, sizeof msg);
    if (clear)
        L->err = SW_OK;
    pthread_mutex_unlock(&L->mu);
    return st == SW_OK ? SW_OK : sw_fail(st, "%s", msg);
}

sw_status sw_swap_launch_drain(sw_swap_dev *d)
{
    return sw_swap_launch_drain_x(d, 0);
}

sw_status sw_swap_launcher_start(sw_swap_dev *d, sw_swap_launch_fn run)
{
    struct launcher *L = calloc(1, sizeof *L);
    if (!L)
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: launcher");
    L->d = d;
    L->run = run;
    atomic_init(&L->pushes, 0u);
    L->spin_s = d->spin_s;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv_push, NULL);
    pthread_cond_init(&L->cv_done, NULL);
    if (pthread_create(&L->th, NULL, launcher_main, L) != 0) {
        pthread_mutex_destroy(&L->mu);
        pthread_cond_destroy(&L->cv_push);
        pthread_cond_destroy(&L->cv_done);
        free(L);
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: launcher thread");
    }
    d->ln = L;
    return SW_OK;
}

void sw_swap_launcher_stop(sw_swap_dev *d)
{
    struct launcher *L = d->ln;
    if (!L)
        return;
    pthread_mutex_lock(&L->mu);
    L->stop = 1;
    atomic_fetch_add_explicit(&L->pushes, 1u, memory_order_release);
    pthread_cond_signal(&L->cv_push);
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->th, NULL);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv_push);
    pthread_cond_destroy(&L->cv_done);
    free(L);
    d->ln = NULL;
}
