/* Disk-side counters of `spillway bench swap` (issue 4: the swap engine's
 * reads went at 45% of the raw O_DIRECT rate on the H200 host while the
 * store's own tiles did 2.0-2.3 GB/s). Read around each timed decode step
 * only, so they cost two small file reads per step and stay on:
 *   /sys/dev/block/MAJ:MIN/stat of the file system's device (every process'
 *   I/O on it): reads completed, sectors read, milliseconds spent on reads
 *   (sum over reads: / step time = reads in flight on average), and
 *   milliseconds with any request in flight (io_ticks: the rest of the step
 *   time the device had nothing to do);
 *   /proc/self/io read_bytes: bytes this process had read from storage
 *   (O_DIRECT included), i.e. the payload plus what the store read through
 *   (gaps between wanted extents, run headers). */
#include "swap_run.h"
#include "spillway_store_profile.h"

#define MIB 1048576.0

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

void swt_iosrc_open(swt_iosrc *src, const char *path)
{
    memset(src, 0, sizeof *src);
    struct stat sb;
    if (path && stat(path, &sb) == 0 && major(sb.st_dev) != 0) {
        snprintf(src->sys_stat, sizeof src->sys_stat, "/sys/dev/block/%u:%u/stat",
                 major(sb.st_dev), minor(sb.st_dev));
        FILE *f = fopen(src->sys_stat, "r");
        if (f) {
            src->have_dev = 1;
            fclose(f);
            /* the device's name, for the report */
            char link[300], target[512];
            snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(sb.st_dev),
                     minor(sb.st_dev));
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n > 0) {
                target[n] = 0;
                const char *b = strrchr(target, '/');
                snprintf(src->name, sizeof src->name, "%.63s", b ? b + 1 : target);
            } else {
                snprintf(src->name, sizeof src->name, "%u:%u", major(sb.st_dev),
                         minor(sb.st_dev));
            }
        }
    }
    FILE *f = fopen("/proc/self/io", "r");
    if (f) {
        src->have_proc = 1;
        fclose(f);
    }
}

void swt_iostat_read(const swt_iosrc *src, swt_iostat *out)
{
    memset(out, 0, sizeof *out);
    if (src->have_dev) {
        FILE *f = fopen(src->sys_stat, "r");
        unsigned long long v[11];
        if (f && fscanf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                        &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10]) == 11) {
            out->reads = v[0];
            out->read_sectors = v[2];
            out->read_ms = v[3];
            out->busy_ms = v[9];
            out->ok_dev = 1;
        }
        if (f)
            fclose(f);
    }
    if (src->have_proc) {
        FILE *f = fopen("/proc/self/io", "r");
        char line[128];
        while (f && fgets(line, sizeof line, f)) {
            unsigned long long x;
            if (sscanf(line, "read_bytes: %llu", &x) == 1) {
                out->proc_read_bytes = x;
                out->ok_proc = 1;
            }
        }
        if (f)
            fclose(f);
    }
}

void swt_iostat_add(swt_iostat *acc, const swt_iostat *a, const swt_iostat *b)
{
    acc->ok_dev |= a->ok_dev && b->ok_dev;
    acc->ok_proc |= a->ok_proc && b->ok_proc;
    /* per-step figures divide by every timed step: a step that could not
     * be read would understate them, so they are then not shown */
    acc->bad_dev |= !(a->ok_dev && b->ok_dev);
    acc->bad_proc |= !(a->ok_proc && b->ok_proc);
    if (a->ok_dev && b->ok_dev) {
        acc->reads += b->reads - a->reads;
        acc->read_sectors += b->read_sectors - a->read_sectors;
        acc->read_ms += b->read_ms - a->read_ms;
        acc->busy_ms += b->busy_ms - a->busy_ms;
    }
    if (a->ok_proc && b->ok_proc)
        acc->proc_read_bytes += b->proc_read_bytes - a->proc_read_bytes;
}

void swt_qprof_begin(sw_store *s)
{
    sw_store_read_profile p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    (void)sw_store_read_profile_get(s, &p, 1);
}

void swt_qprof_add(sw_store *s, swt_qprof *acc)
{
    sw_store_read_profile p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    if (sw_store_read_profile_get(s, &p, 0) != SW_OK)
        return;
    acc->ok = 1;
    acc->cap_bytes = p.cap_bytes;
    if (p.peak_bytes > acc->peak_bytes)
        acc->peak_bytes = p.peak_bytes;
    acc->elapsed_ns += (double)p.elapsed_ns;
    acc->busy_ns += (double)p.busy_ns;
    acc->below_cap_ns += (double)p.below_cap_ns;
    acc->below_cap_queued_ns += (double)p.below_cap_queued_ns;
    acc->below_cap_processing_ns += (double)p.below_cap_processing_ns;
    acc->below_cap_waiting_ns += (double)p.below_cap_waiting_ns;
    acc->byte_ns += p.mean_bytes * (double)p.elapsed_ns;
    acc->process_ns += (double)p.process_ns;
    acc->wait_ns += (double)p.wait_ns;
    acc->requests += p.requests;
    acc->request_bytes += p.request_bytes;
    for (int i = 0; i < SWT_QPROF_SIZES && i < SW_STORE_PROFILE_SIZES; i++)
        acc->sizes[i] += p.sizes[i];
}

swt_diskpath swt_disk_path(const swt_result *r)
{
    swt_diskpath p;
    memset(&p, 0, sizeof p);
    const double n = r->steps > 0 ? r->steps : 1, st = r->step_seconds;
    const double file = (double)r->file_bytes_read;
    p.has_store = r->store_ios > 0 && file > 0;
    if (p.has_store) {
        p.tickets = r->read_calls / n;
        p.ticket_kib = r->read_calls ? file / r->read_calls / 1024 : 0;
        p.ios = r->store_ios / n;
        p.io_kib = file / r->store_ios / 1024;
        p.ranges = r->store_ranges / n;
    }
    const swt_iostat *io = &r->io;
    /* the device's own counters (all its traffic, in ms): only for a case
     * that read from the file tier over a window long against their ms */
    p.has_dev = io->ok_dev && !io->bad_dev && io->reads > 0 && file > 0 && st >= 0.05;
    if (p.has_dev) {
        p.dev_reads = io->reads / n;
        p.dev_kib = io->read_sectors * 512.0 / io->reads / 1024;
        p.dev_mib = io->read_sectors * 512.0 / MIB / n;
        p.busy = io->busy_ms * 1e-3 / st;
        p.in_flight = io->read_ms * 1e-3 / st;
        p.read_ms = (double)io->read_ms / io->reads;
    }
    p.has_proc = io->ok_proc && !io->bad_proc && io->proc_read_bytes > 0 && file > 0;
    if (p.has_proc) {
        p.proc_mib = io->proc_read_bytes / MIB / n;
        p.through = io->proc_read_bytes / file;
    }
    return p;
}

void swt_print_disk_path(const swt_result *r)
{
    const swt_diskpath p = swt_disk_path(r);
    if (p.has_store)
        printf("    disk path per step: %.1f read tickets (%.0f KiB of payload each) -> %.1f "
               "device requests from the store (%.0f KiB of payload each, %.1f merged "
               "ranges)\n",
               p.tickets, p.ticket_kib, p.ios, p.io_kib, p.ranges);
    if (p.has_proc)
        printf("    read from storage by this process: %.1f MiB per step = %.2f x the payload "
               "(the rest read through: gaps, run headers)\n",
               p.proc_mib, p.through);
    const swt_qprof *q = &r->qp;
    if (q->ok && q->elapsed_ns > 0 && q->requests > 0) {
        const double e = q->elapsed_ns;
        printf("    store ticket queue in the steps: %llu requests per step of %.0f KiB on "
               "average (by size <=4K/8K/.../4M/more:",
               (unsigned long long)(q->requests / (uint64_t)(r->steps > 0 ? r->steps : 1)),
               (double)q->request_bytes / q->requests / 1024);
        for (int i = 0; i < SWT_QPROF_SIZES; i++)
            printf(" %llu", (unsigned long long)q->sizes[i]);
        printf("); on the device %.2f MiB on average (peak %.2f, cap %.2f MiB); nothing on the "
               "device %.1f%% of the time; under the cap %.1f%% (a ticket queued %.1f%%, "
               "while checking/copying %.1f%%, while blocked %.1f%%); checking/copying %.1f "
               "ms per step\n",
               q->byte_ns / e / MIB, q->peak_bytes / MIB, q->cap_bytes / MIB,
               100 * (1 - q->busy_ns / e), 100 * q->below_cap_ns / e,
               100 * q->below_cap_queued_ns / e, 100 * q->below_cap_processing_ns / e,
               100 * q->below_cap_waiting_ns / e,
               q->process_ns * 1e-6 / (r->steps > 0 ? r->steps : 1));
    }
    if (p.has_dev)
        printf("    device %s in the steps (every process' I/O): %.1f reads per step of %.0f "
               "KiB on average (%.1f MiB); busy %.1f%% of the step time (nothing in flight "
               "%.1f%%); %.2f reads in flight on average (~%.2f MiB); %.2f ms per read\n",
               r->io_dev, p.dev_reads, p.dev_kib, p.dev_mib, 100 * p.busy,
               p.busy < 1 ? 100 * (1 - p.busy) : 0.0, p.in_flight,
               p.in_flight * p.dev_kib / 1024, p.read_ms);
}

