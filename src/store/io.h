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

/* Creates a backend for up to `queue_depth` I/Os in flight. reg/reg_len: a
 * buffer to register with io_uring (may be NULL). force_pread selects the
 * fallback. Never fails for the fallback; returns NULL only when out of
 * memory. */
sw_io *sw_io_create(unsigned queue_depth, void *reg, size_t reg_len, int force_pread);
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

#endif
