/* The prefill benchmark's machinery (prefill_run.c), shared by
 * spillway-bench-prefill (prefill.c) and part 1 of `spillway demo`. */
#ifndef SW_BENCH_PREFILL_RUN_H
#define SW_BENCH_PREFILL_RUN_H

#include "common.h"

/* A named benchmark shape: heads and head_dim. */
typedef struct prefill_shape {
    const char *name; /* "h32-8/d128" */
    int32_t hq, hkv, d;
} prefill_shape;

/* A named set of request lengths (q_len = kv_len). */
typedef struct prefill_lengths {
    const char *name; /* "16x1k", "mix-a" */
    int32_t n;
    int32_t len[40];
} prefill_lengths;

extern const prefill_shape prefill_shapes[];
extern const int prefill_num_shapes;
extern const prefill_lengths prefill_length_sets[];
extern const int prefill_num_length_sets;

typedef struct prefill_opts {
    int cpu;              /* --cpu: SW_BACKEND_CPU, else SW_BACKEND_AUTO */
    int causal;           /* 0 after --full */
    int reps, warmup;     /* timed runs (the median is reported), untimed ones before */
    int samples;          /* query rows checked per request */
    double scale;         /* request lengths x scale; 0 = 1 with a GPU, 1/8 without */
    const char *cases;    /* comma-separated length sets; NULL = all */
    const char *shapes;   /* comma-separated shapes; NULL = all */
    const char *json;     /* --json PATH; NULL = not given */
} prefill_opts;

/* Parses argv[1..argc) into *o, which holds the defaults. Returns 0; -1
 * after -h / --help (`usage` printed on stdout); BENCH_USAGE on a bad
 * option or value or an unknown case or shape (a message naming `prog` on
 * stderr). */
int prefill_parse(int argc, char **argv, prefill_opts *o, const char *prog, const char *usage);

/* Runs every selected case (shapes x length sets): times it, checks it
 * against the reference, prints a table row; with `results` non-NULL (its
 * head written, bench_json_begin) writes one record per case there. Returns
 * the number of cases that missed the reference or left output unwritten;
 * a failed library or GPU call ends the program (exit status 1). */
int prefill_run(prefill_opts *o, FILE *results);

#endif
