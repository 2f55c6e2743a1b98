/* `spillway store verify|repair|inspect`: a thin client of the block
 * store's public API (spillway_store.h), in the spirit of mdb_stat.
 *
 * The store's benchmarks are programs of their own: bench/store.c and
 * bench/remote.c (`spillway bench store|remote`). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int die_status(const char *what, sw_status st)
{
    fprintf(stderr, "spillway store: %s: %s: %s\n", what, sw_status_str(st), sw_last_error());
    return 1;
}

/* --io: the store's I/O backend (sw_store_config.io_backend) */
static sw_store_io_backend g_io = SW_STORE_IO_AUTO;

static sw_status open_existing(const char *dir, uint64_t host_bytes, int read_only, sw_store **s)
{
    sw_store_config c;
    sw_store_config_init(&c);
    c.dir = dir;
    c.io_backend = g_io;
    c.create = 0;
    c.stripe_bytes = 0; /* as created */
    c.run_blocks = 0;
    c.host_tier_bytes = host_bytes;
    c.read_only = read_only;
    return sw_store_open(&c, s);
}

/* ------------------------------------------------------------- inspect -- */
typedef struct ns_count {
    uint64_t ns, stripes, bytes, k, v;
    uint32_t layer_max, kv_head_max;
} ns_count;

typedef struct ns_table {
    ns_count *a;
    size_t n, cap;
    int oom;
} ns_table;

static int ns_visit(void *ctx, const sw_store_entry *e)
{
    ns_table *t = (ns_table *)ctx;
    size_t i = 0;
    while (i < t->n && t->a[i].ns != e->key.ns)
        i++;
    if (i == t->n) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 16;
            ns_count *a = (ns_count *)realloc(t->a, cap * sizeof *a);
            if (!a) {
                t->oom = 1;
                return 1;
            }
            t->a = a;
            t->cap = cap;
        }
        memset(&t->a[t->n], 0, sizeof t->a[0]);
        t->a[t->n++].ns = e->key.ns;
    }
    ns_count *c = &t->a[i];
    c->stripes++;
    c->bytes += e->length;
    if (e->key.kind == SW_STORE_KIND_K)
        c->k++;
    else
        c->v++;
    if (e->key.layer > c->layer_max)
        c->layer_max = e->key.layer;
    if (e->key.kv_head > c->kv_head_max)
        c->kv_head_max = e->key.kv_head;
    return 0;
}

static const char *const help_inspect =
    "usage: spillway store inspect --dir DIR [--io auto|uring|pread]\n"
    "Prints the store's geometry, occupancy, journal state and per-namespace counts.\n"
    "Opens the store read-only: no file is written.\n";
static const char *const help_verify =
    "usage: spillway store verify --dir DIR [--io auto|uring|pread]\n"
    "Reads the store without writing any of its files (a read-only open: no journal\n"
    "compaction, no torn-tail cut, nothing recovered is written back) and checks it:\n"
    "every live extent (header, key, generation, sequence number, payload CRC32C), the\n"
    "journal (records that fail their checksum, a damaged or incomplete snapshot), the\n"
    "extent header pages (damaged slots) and the cross-check of the two (keys whose\n"
    "current version cannot be proven, operations the journal lacks, torn extents).\n"
    "Prints what it found and the first 20 bad stripes or keys.\n"
    "Exit status: 0 when nothing was found (or only one unfinished operation of a\n"
    "killed writer, which the next read-write open completes or drops: a note says\n"
    "so), 1 when anything was damaged, dropped or unprovable (or the store does not\n"
    "open), 2 on a usage error. --io picks the I/O backend (default auto).\n"
    "To drop what cannot be proven and rewrite the journal: spillway store repair.\n";
static const char *const help_repair =
    "usage: spillway store repair --dir DIR [--io auto|uring|pread]\n"
    "Opens the store read-write (recovering what the data file proves), then drops\n"
    "every key that cannot be proven current and every stripe whose extent fails its\n"
    "check (they read as not found afterwards), zeroes damaged extent header slots and\n"
    "rewrites the journal as a snapshot of what is left. Stripes that verify served\n"
    "stay as they are. A damaged superblock cannot be repaired (the store does not\n"
    "open). Run 'spillway store verify' first to see what would be dropped.\n"
    "Exit status: 0 when the store was repaired (or had nothing to repair), 1 on an\n"
    "error, 2 on a usage error.\n";

/* Parses `--dir DIR` (and --help). Returns 0 with *dir set, or the exit
 * status: 0 after --help, 2 on a usage error. */
static int need_dir(int argc, char **argv, const char *cmd, const char *help, const char **dir)
{
    *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            *dir = argv[++i];
        } else if (!strcmp(argv[i], "--io") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto"))
                g_io = SW_STORE_IO_AUTO;
            else if (!strcmp(v, "uring"))
                g_io = SW_STORE_IO_URING;
            else if (!strcmp(v, "pread"))
                g_io = SW_STORE_IO_PREAD;
            else {
                fprintf(stderr, "spillway store %s: --io wants auto, uring or pread, not '%s'\n",
                        cmd, v);
                return 2;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dir") || !strcmp(argv[i], "--io")) {
            fprintf(stderr, "spillway store %s: option '%s' needs a value\n", cmd, argv[i]);
            return 2;
        } else {
            fprintf(stderr, "spillway store %s: unknown option '%s'\n%s", cmd, argv[i], help);
            return 2;
        }
    }
    if (!*dir) {
        fputs(help, stderr);
        return 2;
    }
    return 0;
}

static void print_stats(const sw_store_stats *st)
{
    double mib = 1048576.0;
    printf("geometry:   stripe %llu B, extent %llu B, run %llu extents + %llu B header, "
           "%llu runs\n",
           (unsigned long long)st->stripe_bytes, (unsigned long long)st->extent_bytes,
           (unsigned long long)st->run_blocks, (unsigned long long)st->run_header_bytes,
           (unsigned long long)st->runs_total);
    printf("data file:  %.1f MiB, capacity %.1f MiB in %llu extents, store id %016llx\n",
           st->file_bytes / mib, st->capacity_bytes / mib,
           (unsigned long long)st->extents_total, (unsigned long long)st->store_id);
    printf("occupancy:  %llu of %llu extents (%.1f%%), %.1f MiB used, %.1f MiB payload, "
           "%llu of %llu runs in use\n",
           (unsigned long long)st->extents_used, (unsigned long long)st->extents_total,
           st->extents_total ? 100.0 * st->extents_used / st->extents_total : 0.0,
           st->used_bytes / mib, st->payload_bytes / mib, (unsigned long long)st->runs_used,
           (unsigned long long)st->runs_total);
    printf("journal:    %llu records, %llu dropped at open (checksum), generation %llu%s\n",
           (unsigned long long)st->journal_records, (unsigned long long)st->journal_dropped,
           (unsigned long long)st->generation,
           st->journal_damaged ? ", DAMAGED (records lost before its end or from its snapshot)"
                               : "");
    printf("cross-check: %llu header pages read, %llu key(s) cannot be proven current, "
           "%llu operation(s) found only in the data file, %llu torn extent(s), "
           "%llu damaged header slot(s)\n",
           (unsigned long long)st->header_pages_read, (unsigned long long)st->keys_unprovable,
           (unsigned long long)st->journal_recovered, (unsigned long long)st->extents_discarded,
           (unsigned long long)st->headers_bad);
    printf("i/o:        %s, %s, queue depth %llu, buffer %.1f MiB\n",
           sw_store_io_backend_name(st->io_backend), st->direct_io ? "O_DIRECT" : "buffered",
           (unsigned long long)st->queue_depth, st->io_buffer_bytes / mib);
}

static int cmd_store_inspect(int argc, char **argv)
{
    const char *dir = NULL;
    int rc = need_dir(argc, argv, "inspect", help_inspect, &dir);
    if (rc || !dir)
        return rc;
    sw_store *s = NULL;
    sw_status st = open_existing(dir, 0, 1, &s);
    if (st != SW_OK)
        return die_status("open", st);
    sw_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    printf("store:      %s\n", dir);
    print_stats(&ss);
    ns_table t = {0};
    st = sw_store_iterate(s, ns_visit, &t);
    if (st != SW_OK || t.oom) {
        free(t.a);
        sw_store_close(s);
        return die_status("iterate", st != SW_OK ? st : SW_STATUS_NO_MEMORY);
    }
    printf("namespaces: %zu\n", t.n);
    if (t.n)
        printf("  %-18s %10s %10s %10s %12s %7s %8s\n", "namespace", "stripes", "K", "V",
               "payload MiB", "layers", "kv_heads");
    for (size_t i = 0; i < t.n; i++)
        printf("  0x%016llx %10llu %10llu %10llu %12.1f %7u %8u\n",
               (unsigned long long)t.a[i].ns, (unsigned long long)t.a[i].stripes,
               (unsigned long long)t.a[i].k, (unsigned long long)t.a[i].v,
               t.a[i].bytes / 1048576.0, t.a[i].layer_max + 1, t.a[i].kv_head_max + 1u);
    free(t.a);
    st = sw_store_close(s);
    return st == SW_OK ? 0 : die_status("close", st);
}

/* -------------------------------------------------------------- verify -- */
typedef struct bad_list {
    unsigned printed;
} bad_list;

static int verify_visit(void *ctx, const sw_store_entry *e)
{
    bad_list *b = (bad_list *)ctx;
    if (e->status != SW_OK && b->printed < 20) {
        b->printed++;
        if (e->extent == UINT64_MAX)
            printf("  unprovable: ns 0x%016llx layer %u block %u kv_head %u %c (the journal "
                   "lost a record of it)\n", (unsigned long long)e->key.ns, e->key.layer,
                   e->key.block, e->key.kv_head, e->key.kind ? 'V' : 'K');
        else
            printf("  %s: ns 0x%016llx layer %u block %u kv_head %u %c gen %llu extent %llu\n",
                   sw_status_str(e->status), (unsigned long long)e->key.ns, e->key.layer,
                   e->key.block, e->key.kv_head, e->key.kind ? 'V' : 'K',
                   (unsigned long long)e->generation, (unsigned long long)e->extent);
    }
    return 0;
}

static int cmd_store_verify(int argc, char **argv)
{
    const char *dir = NULL;
    int rc = need_dir(argc, argv, "verify", help_verify, &dir);
    if (rc || !dir)
        return rc;
    sw_store *s = NULL;
    sw_status st = open_existing(dir, 0, 1, &s); /* read-only: verify writes nothing */
    if (st != SW_OK)
        return die_status("open", st);
    sw_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    bad_list b = {0};
    sw_store_verify_result r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    double t0 = now_s();
    sw_status vst = sw_store_verify(s, verify_visit, &b, &r);
    double dt = now_s() - t0;
    char err[512];
    snprintf(err, sizeof err, "%s", sw_last_error());
    printf("store %s: %llu stripes checked: %llu ok, %llu corrupt, %llu unreadable; "
           "%.1f MiB in %llu reads, %.2f s (%.2f GB/s)\n",
           dir, (unsigned long long)r.extents_checked, (unsigned long long)r.extents_ok,
           (unsigned long long)r.extents_corrupt, (unsigned long long)r.extents_io_error,
           r.bytes_read / 1048576.0, (unsigned long long)r.read_requests, dt,
           dt > 0 ? r.bytes_read / dt / 1e9 : 0.0);
    printf("journal: %llu record(s) failed their checksum%s; %llu key(s) cannot be proven "
           "current; %llu operation(s) are in the data file but not in the journal; %llu "
           "torn extent(s); %llu damaged header slot(s) (%llu header pages read)\n",
           (unsigned long long)r.journal_dropped,
           r.journal_damaged ? " (the journal is DAMAGED: records lost before its end or from "
                               "its snapshot)" : "",
           (unsigned long long)r.keys_unprovable, (unsigned long long)r.journal_missing,
           (unsigned long long)r.extents_torn, (unsigned long long)r.headers_bad,
           (unsigned long long)ss.header_pages_read);
    if (r.in_flight)
        printf("note: a writer was killed in the middle of one operation (%s); the next "
               "read-write open finishes or drops it as if it had completed or never started "
               "-- not damage\n",
               r.journal_missing ? "a put whose journal record is missing: it is taken from "
                                   "the data file"
               : r.extents_torn  ? "a torn put: its header landed without its payload and "
                                   "it was never acknowledged: it is dropped"
                                 : "a void header not yet written over a superseded extent");
    sw_status cst = sw_store_close(s);
    if (vst != SW_OK) {
        fprintf(stderr, "spillway store verify: %s: %s\n", sw_status_str(vst), err);
        if (r.journal_missing && !r.journal_dropped && !r.journal_damaged &&
            !r.keys_unprovable && !r.extents_corrupt && !r.headers_bad)
            fprintf(stderr, "spillway store verify: the operation(s) missing from the journal "
                    "are recovered from the data file by the next read-write open (a writer "
                    "killed before its journal record, or a journal cut at its end)\n");
        else
            fprintf(stderr, "spillway store verify: 'spillway store repair --dir %s' drops "
                    "what cannot be proven and rewrites the journal\n", dir);
        return 1;
    }
    if (cst != SW_OK)
        return die_status("close", cst);
    printf("ok\n");
    return 0;
}

/* -------------------------------------------------------------- repair -- */
static int cmd_store_repair(int argc, char **argv)
{
    const char *dir = NULL;
    int rc = need_dir(argc, argv, "repair", help_repair, &dir);
    if (rc || !dir)
        return rc;
    sw_store *s = NULL;
    sw_status st = open_existing(dir, 0, 0, &s);
    if (st != SW_OK)
        return die_status("open", st);
    sw_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    printf("open: %llu journal record(s) failed their checksum%s, %llu operation(s) recovered "
           "from the data file, %llu torn extent(s) dropped, %llu key(s) cannot be proven "
           "current, %llu damaged header slot(s)\n",
           (unsigned long long)ss.journal_dropped,
           ss.journal_damaged ? " (journal damaged)" : "",
           (unsigned long long)ss.journal_recovered, (unsigned long long)ss.extents_discarded,
           (unsigned long long)ss.keys_unprovable, (unsigned long long)ss.headers_bad);
    sw_store_repair_result r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    st = sw_store_repair(s, &r);
    if (st != SW_OK) {
        char err[512];
        snprintf(err, sizeof err, "%s", sw_last_error());
        sw_store_close(s);
        fprintf(stderr, "spillway store repair: %s: %s\n", sw_status_str(st), err);
        return 1;
    }
    printf("repair: dropped %llu unprovable key(s) and %llu stripe(s) with a bad extent, "
           "cleared %llu damaged header slot(s); journal rewritten with %llu record(s)\n",
           (unsigned long long)r.keys_dropped_unprovable,
           (unsigned long long)r.keys_dropped_corrupt,
           (unsigned long long)r.headers_cleared, (unsigned long long)r.journal_records);
    st = sw_store_close(s);
    return st == SW_OK ? 0 : die_status("close", st);
}

int cmd_store(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "bench")) {
        fprintf(stderr, "spillway store: the store's benchmarks are 'spillway bench store' and "
                        "'spillway bench remote'\n");
        return 2;
    }
    if (argc >= 2 && !strcmp(argv[1], "verify"))
        return cmd_store_verify(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect"))
        return cmd_store_inspect(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "repair"))
        return cmd_store_repair(argc - 1, argv + 1);
    const char *usage =
        "usage: spillway store verify --dir D | repair --dir D | inspect --dir D\n"
        "  verify   check a store without writing to it (exit 1 when anything is damaged)\n"
        "  repair   drop what cannot be proven current, rewrite the journal\n"
        "  inspect  geometry, occupancy, journal, namespaces (read-only)\n"
        "run 'spillway store <command> --help' for a command's options; the store's\n"
        "benchmarks: 'spillway bench store' and 'spillway bench remote'\n";
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    fputs(usage, stderr);
    return 2;
}
