/* The store's I/O backend: io_uring (liburing, registered bounce buffer,
 * batched submissions) or pread/pwrite, chosen once at open. */
#ifndef SW_STORE_IO_H
#define SW_STORE_IO_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sw_io_op {
    int fd;
    int write;          /* 1 = write, 0 = read */
    void *buf;
    size_t len;
    uint64_t off;
    int64_t res;        /* out: bytes transferred (== len on success) or -errno */
} sw_io_op;

typedef struct sw_io sw_io;

/* Creates a backend for up to `queue_depth` I/Os in flight: io_uring when
 * this build has it and the kernel allows it, else (or with force_pread)
 * pread/pwrite. Never fails for the fallback; returns NULL only when out
 * of memory. */
sw_io *sw_io_create(unsigned queue_depth, int force_pread);
/* Registers reg/reg_len (the bounce buffer) with io_uring, once, before the
 * first I/O: requests inside it use the registered buffer. A no-op for
 * pread; a failed registration (RLIMIT_MEMLOCK) leaves plain requests. */
void sw_io_register(sw_io *io, void *reg, size_t reg_len);
void sw_io_destroy(sw_io *io);
sw_store_io_backend sw_io_backend(const sw_io *io);

/* Runs every op (batches of queue_depth on io_uring, one by one otherwise);
 * short transfers are completed synchronously. Each op's `res` says how it
 * went. Returns the number of ops that did not transfer `len` bytes. */
size_t sw_io_run(sw_io *io, sw_io_op *ops, size_t n);

/* As sw_io_run, and calls done(ctx, i) as soon as op i has finished (its
 * `res` final), in completion order, while later ops are still in flight:
 * the caller's work on a finished request overlaps the I/O of the rest. */
typedef void (*sw_io_done_fn)(void *ctx, size_t i);
size_t sw_io_run_cb(sw_io *io, sw_io_op *ops, size_t n, sw_io_done_fn done, void *ctx);

/* Asynchronous use (the store's read tickets, read_async.c). Only while
 * sw_io_async() is 1 (io_uring); the caller keeps at most queue_depth ops in
 * flight and never mixes these calls with sw_io_run* while any is in flight.
 *
 * submit: queues ops[0..n) tagged tag0 + k and submits them; returns how
 * many the kernel accepted. Fewer than n means the ring broke: the caller
 * reaps what is in flight, completes the rest with sw_io_op_sync and calls
 * sw_io_retire.
 * reap: hands each available completion to fn(ctx, tag, res); with `wait`
 * blocks until at least one arrived. Returns the number handed out, or -1
 * when the ring broke while waiting (then as above).
 * op_finish: makes an op's result final once its completion arrived
 * (EAGAIN/EINTR redone, a short transfer completed synchronously).
 * retire: gives up io_uring for the rest of the handle's life (pread). */
typedef void (*sw_io_cqe_fn)(void *ctx, uint64_t tag, int32_t res);
int sw_io_async(const sw_io *io);
size_t sw_io_submit(sw_io *io, sw_io_op *ops, size_t n, uint64_t tag0);
int sw_io_reap(sw_io *io, int wait, sw_io_cqe_fn fn, void *ctx);
void sw_io_op_finish(sw_io_op *op);
void sw_io_op_sync(sw_io_op *op);
void sw_io_retire(sw_io *io);

#endif
