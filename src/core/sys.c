/* Environment gates and the check of the environment's Spillway names, CPU
 * count, aligned allocation. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sw_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* The names after the prefix that Spillway reads: the library's three, then
 * the Python binding's and the scripts' (README, "Environment"). */
static const char *const sw_env_known[] = {
    "CPU_ISA", "NUM_THREADS", "OPPONENT", "LIB", "BUILD_DIR", "SKIP_PY", "CUDA", "CMAKE_ARGS"};

int sw_env_name_known(const char *name, size_t len)
{
    static const char prefix[] = "SPILLWAY_";
    const size_t np = sizeof prefix - 1;
    if (len < np || memcmp(name, prefix, np) != 0)
        return 1; /* not ours to judge */
    for (size_t i = 0; i < sizeof sw_env_known / sizeof sw_env_known[0]; i++)
        if (len - np == strlen(sw_env_known[i]) && !memcmp(name + np, sw_env_known[i], len - np))
            return 1;
    return 0;
}

/* At load: one warning on stderr for each variable of the Spillway prefix
 * that nothing reads (a misspelled option would otherwise be ignored
 * silently). */
__attribute__((constructor)) static void sw_env_check(void)
{
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        const size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!sw_env_name_known(*e, len))
            fprintf(stderr,
                    "spillway: warning: unknown environment variable %.*s is ignored "
                    "(the README lists the variables Spillway reads)\n",
                    (int)len, *e);
    }
    /* a value the library would ignore (SPILLWAY_CPU_ISA's: at its first
     * use, cpu_fast.c) */
    const char *nt = getenv("SPILLWAY_NUM_THREADS");
    if (nt && *nt && sw_env_int("SPILLWAY_NUM_THREADS", -1) < 0)
        fprintf(stderr, "spillway: warning: SPILLWAY_NUM_THREADS=%s is not a whole number >= 0; "
                        "ignored\n", nt);
}

int64_t sw_env_int(const char *name, int64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end)
        return def;
    return (int64_t)v;
}

int sw_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

void *sw_aligned_alloc(size_t align, size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = align;
    if (posix_memalign(&p, align, bytes) != 0)
        return NULL;
    return p;
}

void sw_aligned_free(void *p) { free(p); }
