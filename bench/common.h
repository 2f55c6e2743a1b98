/* What the benchmark programs under bench/ share, and `spillway demo` with
 * them (it runs the prefill and swap machinery): option parsing, timing,
 * the results file (a fresh name unless told; headed by the command and
 * the commit the program was built from) and GPU buffers. This file is the
 * only one under bench/ (dev/ aside) that includes a CUDA header; in a
 * build without CUDA the GPU calls fail with a message. */
#ifndef SW_BENCH_COMMON_H
#define SW_BENCH_COMMON_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------- timing -- */
/* CLOCK_MONOTONIC, seconds. */
double bench_now(void);

/* ------------------------------------------------------------ scratch -- */
/* While guarded, a scratch directory (a store, a raw-read file: up to GBs)
 * is removed if the program gets SIGINT, SIGTERM or SIGHUP (one it was not
 * started with ignored), which then ends it as the signal would have. The removal in the handler uses system
 * calls only (getdents64, unlinkat), nothing that may hold a lock. At most
 * 4 directories at once; unguard before removing one the normal way. */
void bench_scratch_guard(const char *dir);
void bench_scratch_unguard(const char *dir);

/* ------------------------------------------------------------ options -- */
/* The exit status of a usage error: a bad option, value, case or shape. */
#define BENCH_USAGE 2

/* Parses `v`, the value of option `opt`, as a whole decimal integer in
 * [lo, hi]. Returns 0 with *out set; else prints
 * "PROG: OPT wants LO..HI UNIT, not 'V'" on stderr and returns BENCH_USAGE.
 * `unit` may be "" (no unit). */
int bench_arg_i64(const char *prog, const char *opt, const char *v, int64_t lo, int64_t hi,
                  const char *unit, int64_t *out);

/* Inside an option loop (`a` the option, `v` its value): sets `field` to
 * v as a whole decimal integer in [lo, hi], or returns BENCH_USAGE from the
 * enclosing function after bench_arg_i64's message. Needs PROG. */
#define BENCH_NUM(field, lo, hi)                                                 \
    do {                                                                         \
        int64_t bench_num_;                                                      \
        if (bench_arg_i64(PROG, a, v, (lo), (hi), "", &bench_num_) != 0)         \
            return BENCH_USAGE;                                                  \
        (field) = bench_num_;                                                    \
    } while (0)

/* 1 when option `a` is one of names[0..n) (the options that take a value:
 * an unknown one is said to be unknown, not to want a value). */
int bench_opt_is(const char *a, const char *const *names, size_t n);

/* 1 when `name` is one item of the comma-separated `list`; a NULL list
 * holds every name. */
int bench_in_list(const char *list, const char *name);

/* Every item of the comma-separated `list` (option `opt`; NULL = none
 * given) must be one of names[0..n). Returns 0; else prints
 * "PROG: unknown OPT 'ITEM' (known: A, B, C)" on stderr and returns
 * BENCH_USAGE. An empty item ("a,,b", "") is unknown too. */
int bench_check_list(const char *prog, const char *opt, const char *list,
                     const char *const *names, int n);

/* ------------------------------------------------------- results file -- */
/* Host name as a lower-case slug of [a-z0-9-], "host" when empty. */
void bench_host_slug(char *out, size_t n);

/* Whether the results file of a run (an explicit --json path, or a new
 * file in bench/results/ or ./) can be written: 0, else a message on
 * stderr and 1. Checked before a run, so that a long run does not end
 * unable to write its figures; nothing is created. */
int bench_result_probe(const char *prog, const char *explicit_path);

/* Opens a benchmark's results file for writing: `explicit_path` when the
 * user gave one (--json), else a fresh name that exists nowhere yet,
 * bench/results/<component>-<host>-<UTC time>[-N].json when bench/results
 * exists in the working directory, else ./<component>-<host>-<UTC
 * time>[-N].json -- so a run never writes over a committed record unless
 * asked to. Writes the name into `path`; NULL (errno set) when the file
 * cannot be created. */
FILE *bench_result_open(const char *explicit_path, const char *component, char *path, size_t n);

/* The commit the program was built from (short hash, "+changes" when the
 * tree differed from it; "unknown" outside a git checkout). */
const char *bench_commit(void);

/* Writes the head of a results file: one JSON object with "component",
 * "command" (argv joined, shell-quoted where needed, argv[0] without its
 * directory), "commit", "library" (sw_version_string()), "host" and "utc",
 * then opens its "records" list. The caller writes the records, each a JSON
 * object, separated by ",\n" (none before the first); bench_json_end closes
 * the list and the object. */
void bench_json_begin(FILE *f, const char *component, int argc, char **argv);
void bench_json_end(FILE *f);

/* ---------------------------------------------------------- GPU buffers -- */
/* Each call that can fail prints "spillway bench: WHAT: <CUDA error>" on
 * stderr (WHAT names the buffer or step) and returns NULL or -1; without
 * CUDA in this build every one of them fails so. Streams are `void *` (a
 * cudaStream_t; NULL = the legacy default stream). */
void *bench_gpu_alloc(size_t bytes, const char *what);
void bench_gpu_free(void *p);          /* NULL: nothing */
void *bench_pinned_alloc(size_t bytes, const char *what); /* page-locked host memory */
void bench_pinned_free(void *p);       /* NULL: nothing */
/* A non-blocking stream; NULL on failure. */
void *bench_gpu_stream_create(const char *what);
void bench_gpu_stream_destroy(void *stream); /* NULL: nothing */
/* Copies `bytes` (any direction: the runtime's unified addressing tells)
 * on `stream` and waits for it: a plain cudaMemcpy from pageable memory
 * runs on the legacy stream, which a non-blocking stream does not wait
 * for. 0 or -1. */
int bench_gpu_copy(void *dst, const void *src, size_t bytes, void *stream, const char *what);
/* Sets `bytes` of device memory to `byte` and waits. 0 or -1. */
int bench_gpu_fill(void *dst, int byte, size_t bytes, const char *what);
/* Waits for `stream` (NULL: the whole device). 0 or -1. */
int bench_gpu_sync(void *stream, const char *what);

/* Times work on a stream with CUDA events. */
typedef struct bench_gpu_timer {
    void *start, *stop; /* cudaEvent_t */
} bench_gpu_timer;
int bench_gpu_timer_create(bench_gpu_timer *t); /* 0 or -1 */
void bench_gpu_timer_destroy(bench_gpu_timer *t);
void bench_gpu_timer_start(bench_gpu_timer *t, void *stream);
/* Records the stop event on `stream`, waits for it; milliseconds since the
 * start event, or -1. */
double bench_gpu_timer_stop_ms(bench_gpu_timer *t, void *stream);

/* GB/s of `factor` * bytes over a cudaMemcpyAsync of `bytes` from src to
 * dst on the legacy stream, the best of 5 after a warm-up, timed with CUDA
 * events; -1 when a call fails. */
double bench_gpu_copy_gbps(void *dst, const void *src, uint64_t bytes, double factor);

#endif
