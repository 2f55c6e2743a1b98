/* Prefetch worker: one thread that runs the batched store read of tile i+1
 * while the caller computes tile i. One job at a time is enough for a
 * read-ahead depth of one tile; the store serialises its own calls. */
#include "swap_internal.h"
#include "swap_cuda.h"
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "store/store_internal.h"

#include <string.h>

void sw_swap_read_run(sw_store *store, sw_swap_read_job *job)
{
    sw_store_stats a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.struct_size = b.struct_size = sizeof a;
    sw_store_get_stats(store, &a);
    if (job->device) {
        /* Device pool: the store copies into the staging buffer on the
         * engine's copy stream, once the scatter that last read the buffer
         * has run, and synchronises the stream before it returns. The
         * staging buffers are the engine's own cudaMalloc memory, so the
         * store's per-destination pointer check is skipped (the _owned
         * variant). The seam for an asynchronous store read is here. */
        sw_status st = sw_cuda_set_device(job->devno);
        if (st == SW_OK)
            st = sw_cuda_swap_stream_wait(job->stream, job->wait_ev);
        if (st != SW_OK) {
            for (size_t i = 0; i < job->n; i++)
                job->statuses[i] = st;
            job->result = st;
        } else {
            job->result = sw_store_read_device_owned(store, job->n, job->keys, job->dst,
                                                     job->dst_bytes, job->lengths, job->gens,
                                                     job->statuses, job->stream);
        }
    } else {
        job->result = sw_store_read(store, job->n, job->keys, job->dst, job->dst_bytes,
                                    job->lengths, job->gens, job->statuses);
    }
    sw_store_get_stats(store, &b);
    job->host_bytes = b.host_bytes_read - a.host_bytes_read;
    job->file_bytes = b.file_bytes_read - a.file_bytes_read;
}

static void *worker_main(void *arg)
{
    sw_swap_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && !(w->busy && !w->done))
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        sw_swap_read_job *job = w->job;
        pthread_mutex_unlock(&w->mu);
        sw_swap_read_run(w->store, job);
        pthread_mutex_lock(&w->mu);
        w->done = 1;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

sw_status sw_swap_worker_start(sw_swap_worker *w, sw_store *store)
{
    memset(w, 0, sizeof *w);
    w->store = store;
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        return sw_fail(SW_STATUS_NO_MEMORY, "prefetch mutex");
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        return sw_fail(SW_STATUS_NO_MEMORY, "prefetch condition variable");
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot start the prefetch thread");
    }
    w->started = 1;
    return SW_OK;
}

void sw_swap_worker_stop(sw_swap_worker *w)
{
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->started = 0;
}

void sw_swap_worker_submit(sw_swap_worker *w, sw_swap_read_job *job)
{
    pthread_mutex_lock(&w->mu);
    w->job = job;
    w->busy = 1;
    w->done = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void sw_swap_worker_wait(sw_swap_worker *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->busy && !w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    w->busy = 0;
    w->done = 0;
    w->job = NULL;
    pthread_mutex_unlock(&w->mu);
}
