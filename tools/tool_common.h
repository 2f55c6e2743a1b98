/* Shared pieces of the spillway command-line program. */
#ifndef SW_TOOL_COMMON_H
#define SW_TOOL_COMMON_H

#include "spillway.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* A named benchmark shape: heads and head_dim. */
typedef struct tool_shape {
    const char *name; /* "h32-8/d128" */
    int32_t hq, hkv, d;
} tool_shape;

/* A named set of request lengths (q_len = kv_len). */
typedef struct tool_lengths {
    const char *name; /* "16x1k", "mix-a" */
    int32_t n;
    int32_t len[40];
} tool_lengths;

extern const tool_shape tool_shapes[];
extern const int tool_num_shapes;
extern const tool_lengths tool_length_sets[];
extern const int tool_num_length_sets;

double tool_now(void);
/* Host name as a lower-case slug of [a-z0-9-], "host" when empty. */
void tool_host_slug(char *out, size_t n);
/* Opens a benchmark's JSON for writing: `explicit_path` when the user gave
 * one (--json), else a fresh name that exists nowhere yet,
 * bench/results/<component>-<host>-<UTC time>[-N].json when bench/results
 * exists, else ./<component>-<host>-<UTC time>[-N].json -- so a run never
 * writes over a committed record unless asked to. Writes the name into
 * `path`; NULL (errno set) when the file cannot be created. */
FILE *tool_result_open(const char *explicit_path, const char *component, char *path, size_t n);
int cmd_demo(int argc, char **argv);          /* swap_cmds.c: parts 1 and 2 */
int demo_prefill(int argc, char **argv, const char *usage, int check_only);
int cmd_bench_prefill(int argc, char **argv);
int cmd_bench_swap(int argc, char **argv);    /* swap_cmds.c */
int cmd_store(int argc, char **argv); /* store_cmds.c */
int cmd_store_bench_remote(int argc, char **argv); /* remote_bench.c */
int cmd_store_bench_disk(int argc, char **argv); /* store_bench.c */

#endif
