/* io_uring / pread backend of the store (see io.h). */
#include "store/io.h"

#include "core/sw_core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(SW_HAVE_URING)
#include <liburing.h>
#endif

struct sw_io {
    sw_store_io_backend backend;
    unsigned qd;
    char *reg;
    size_t reg_len;
#if defined(SW_HAVE_URING)
    struct io_uring ring;
    int registered;
    unsigned char *finished; /* per op of a batch: res is final, done() called */
#endif
};

/* Completes op from `done` bytes on with plain pread/pwrite (EINTR retried;
 * EOF on a read ends the op short). */
static void op_sync(sw_io_op *op, size_t done)
{
    while (done < op->len) {
        ssize_t r = op->write ? pwrite(op->fd, (char *)op->buf + done, op->len - done,
                                       (off_t)(op->off + done))
                              : pread(op->fd, (char *)op->buf + done, op->len - done,
                                      (off_t)(op->off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            op->res = -errno;
            return;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    op->res = (int64_t)done;
}

sw_io *sw_io_create(unsigned queue_depth, int force_pread)
{
    sw_io *io = (sw_io *)calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->qd = queue_depth ? queue_depth : 1;
    io->backend = SW_STORE_IO_PREAD;
#if defined(SW_HAVE_URING)
    io->finished = (unsigned char *)calloc(io->qd, 1);
    if (!io->finished) {
        free(io);
        return NULL;
    }
    if (!force_pread && io_uring_queue_init(io->qd, &io->ring, 0) == 0)
        io->backend = SW_STORE_IO_URING;
#else
    (void)force_pread;
#endif
    return io;
}

void sw_io_register(sw_io *io, void *reg, size_t reg_len)
{
    io->reg = (char *)reg;
    io->reg_len = reg_len;
#if defined(SW_HAVE_URING)
    if (io->backend == SW_STORE_IO_URING && reg && reg_len) {
        struct iovec iov = {reg, reg_len};
        /* Registration pins the pages once instead of per I/O; it can fail
         * under a low RLIMIT_MEMLOCK, then plain reads still work. */
        io->registered = io_uring_register_buffers(&io->ring, &iov, 1) == 0;
    }
#endif
}

void sw_io_destroy(sw_io *io)
{
    if (!io)
        return;
#if defined(SW_HAVE_URING)
    if (io->backend == SW_STORE_IO_URING)
        io_uring_queue_exit(&io->ring);
    free(io->finished);
#endif
    free(io);
}

sw_store_io_backend sw_io_backend(const sw_io *io) { return io->backend; }

#if defined(SW_HAVE_URING)
/* Makes op's result final (EAGAIN/EINTR redone, a short transfer finished
 * synchronously) and reports it. */
static void op_finish(sw_io_op *ops, size_t k, sw_io_done_fn done, void *ctx)
{
    sw_io_op *op = &ops[k];
    if (op->res == -EAGAIN || op->res == -EINTR)
        op_sync(op, 0);
    else if (op->res >= 0 && (size_t)op->res < op->len)
        op_sync(op, (size_t)op->res);
    if (done)
        done(ctx, k);
}

/* Prepares sqe for op: the fixed-buffer form when op's buffer lies in the
 * registered region. */
static void prep_sqe(const sw_io *io, struct io_uring_sqe *sqe, const sw_io_op *op)
{
    const int fixed = io->registered && (char *)op->buf >= io->reg &&
                      (char *)op->buf + op->len <= io->reg + io->reg_len;
    if (op->write && fixed)
        io_uring_prep_write_fixed(sqe, op->fd, op->buf, (unsigned)op->len, op->off, 0);
    else if (op->write)
        io_uring_prep_write(sqe, op->fd, op->buf, (unsigned)op->len, op->off);
    else if (fixed)
        io_uring_prep_read_fixed(sqe, op->fd, op->buf, (unsigned)op->len, op->off, 0);
    else
        io_uring_prep_read(sqe, op->fd, op->buf, (unsigned)op->len, op->off);
}

static size_t run_uring(sw_io *io, sw_io_op *ops, size_t n, sw_io_done_fn done, void *ctx)
{
    size_t i = 0;
    while (i < n) {
        size_t batch = n - i < io->qd ? n - i : io->qd;
        size_t queued = 0;
        for (; queued < batch; queued++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
            if (!sqe)
                break;
            sw_io_op *op = &ops[i + queued];
            prep_sqe(io, sqe, op);
            io_uring_sqe_set_data64(sqe, (uint64_t)(i + queued));
            op->res = -EIO;
            io->finished[queued] = 0;
        }
        if (queued == 0) {
            /* The ring is unusable; finish synchronously. */
            for (; i < n; i++) {
                op_sync(&ops[i], 0);
                if (done)
                    done(ctx, i);
            }
            break;
        }
        int sub = io_uring_submit(&io->ring);
        /* io_uring_submit submits fewer only on a hard error: the entries
         * left over are then done synchronously and the ring retired below. */
        size_t inflight = sub > 0 ? (size_t)sub : 0;
        size_t got = 0;
        while (got < inflight) {
            struct io_uring_cqe *cqe;
            int e = io_uring_wait_cqe(&io->ring, &cqe);
            if (e == -EINTR)
                continue;
            if (e < 0)
                break;
            size_t k = (size_t)io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&io->ring, cqe);
            got++;
            if (k >= i && k < i + queued && !io->finished[k - i]) {
                ops[k].res = res;
                io->finished[k - i] = 1;
                op_finish(ops, k, done, ctx);
            }
        }
        for (size_t k = i; k < i + queued; k++) {
            if (io->finished[k - i])
                continue;
            /* never submitted, or its completion was lost with the ring */
            op_sync(&ops[k], 0);
            io->finished[k - i] = 1;
            if (done)
                done(ctx, k);
        }
        if (inflight < queued || got < inflight) {
            /* A broken ring: fall back for the rest of this handle's life. */
            io_uring_queue_exit(&io->ring);
            io->backend = SW_STORE_IO_PREAD;
            for (size_t k = i + queued; k < n; k++) {
                op_sync(&ops[k], 0);
                if (done)
                    done(ctx, k);
            }
            i = n;
            break;
        }
        i += queued;
    }
    return 0;
}
#endif

size_t sw_io_run_cb(sw_io *io, sw_io_op *ops, size_t n, sw_io_done_fn done, void *ctx)
{
#if defined(SW_HAVE_URING)
    if (io->backend == SW_STORE_IO_URING)
        run_uring(io, ops, n, done, ctx);
    else
#endif
        for (size_t i = 0; i < n; i++) {
            op_sync(&ops[i], 0);
            if (done)
                done(ctx, i);
        }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].res != (int64_t)ops[i].len)
            bad++;
    return bad;
}

size_t sw_io_run(sw_io *io, sw_io_op *ops, size_t n) { return sw_io_run_cb(io, ops, n, NULL, NULL); }

/* ------------------------------------------------------------ async -- */
void sw_io_op_sync(sw_io_op *op) { op_sync(op, 0); }

int sw_io_async(const sw_io *io) { return io->backend == SW_STORE_IO_URING; }

void sw_io_op_finish(sw_io_op *op)
{
    if (op->res == -EAGAIN || op->res == -EINTR)
        op_sync(op, 0);
    else if (op->res >= 0 && (size_t)op->res < op->len)
        op_sync(op, (size_t)op->res);
}

void sw_io_retire(sw_io *io)
{
#if defined(SW_HAVE_URING)
    if (io->backend == SW_STORE_IO_URING)
        io_uring_queue_exit(&io->ring);
#endif
    io->backend = SW_STORE_IO_PREAD;
}

size_t sw_io_submit(sw_io *io, sw_io_op *ops, size_t n, uint64_t tag0)
{
#if defined(SW_HAVE_URING)
    if (io->backend != SW_STORE_IO_URING)
        return 0;
    size_t queued = 0;
    for (; queued < n; queued++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
        if (!sqe)
            break;
        sw_io_op *op = &ops[queued];
        prep_sqe(io, sqe, op);
        io_uring_sqe_set_data64(sqe, tag0 + queued);
        op->res = -EIO;
    }
    if (queued == 0)
        return 0;
    int sub = io_uring_submit(&io->ring);
    return sub > 0 ? (size_t)sub : 0;
#else
    (void)io; (void)ops; (void)n; (void)tag0;
    return 0;
#endif
}

int sw_io_reap(sw_io *io, int wait, sw_io_cqe_fn fn, void *ctx)
{
#if defined(SW_HAVE_URING)
    if (io->backend != SW_STORE_IO_URING)
        return -1;
    int got = 0;
    for (;;) {
        struct io_uring_cqe *cqe;
        int e = wait && got == 0 ? io_uring_wait_cqe(&io->ring, &cqe)
                                 : io_uring_peek_cqe(&io->ring, &cqe);
        if (e == -EINTR)
            continue;
        if (e == -EAGAIN)
            return got; /* nothing more ready */
        if (e < 0)
            return got ? got : -1;
        uint64_t tag = io_uring_cqe_get_data64(cqe);
        int32_t res = cqe->res;
        io_uring_cqe_seen(&io->ring, cqe);
        got++;
        fn(ctx, tag, res);
    }
#else
    (void)io; (void)wait; (void)fn; (void)ctx;
    return -1;
#endif
}
