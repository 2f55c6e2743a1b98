/* Environment gates, CPU count, aligned allocation. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sw_core.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

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
