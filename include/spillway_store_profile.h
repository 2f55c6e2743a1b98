/* Spillway block store: a profile of the read tickets' device queue
 * (sw_store_read_submit / sw_store_read_wait), for benchmarks and tuning.
 * Not installed yet: `spillway bench store` prints it per case. */
#ifndef SPILLWAY_STORE_PROFILE_H
#define SPILLWAY_STORE_PROFILE_H

#include "spillway_store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SW_STORE_PROFILE_SIZES 12

/* Times are nanoseconds of CLOCK_MONOTONIC since the last reset (or the
 * handle's first ticket). "On the device" counts a ticket request from its
 * submission until the store took its completion: a completion the kernel
 * posted while the calling thread was elsewhere counts until the thread
 * looked (so the figures are an upper bound of the device's queue). */
typedef struct sw_store_read_profile {
    uint32_t struct_size;       /* sizeof(sw_store_read_profile), set by the caller */
    uint32_t pad;
    uint64_t cap_bytes;         /* in-flight cap in effect (0 = none) */
    uint64_t elapsed_ns;        /* since the reset */
    uint64_t busy_ns;           /* at least one request on the device */
    uint64_t below_cap_ns;      /* fewer than cap_bytes on the device */
    uint64_t below_cap_queued_ns;     /* ... with a ticket queued (held back) */
    uint64_t below_cap_processing_ns; /* ... while the calling thread checked/copied */
    uint64_t below_cap_waiting_ns;    /* ... while it blocked in io_uring */
    uint64_t peak_bytes;        /* most bytes on the device at once */
    double mean_bytes;          /* time-weighted mean bytes on the device */
    uint64_t process_ns;        /* checking (CRC) and copying tickets' stripes */
    uint64_t wait_ns;           /* blocked waiting for a completion */
    uint64_t requests;          /* device requests submitted */
    uint64_t request_bytes;
    uint64_t reaps_found;       /* non-blocking looks that found completions */
    uint64_t reap_gap_ns;       /* sum over those: time since the previous look */
    /* requests of at most 4 KiB << i bytes (i < 11); [11]: larger */
    uint64_t sizes[SW_STORE_PROFILE_SIZES];
} sw_store_read_profile;

/* Fills p with the read tickets' profile; with reset, starts a new one
 * (now). A handle without tickets yet reports zeros (and the cap).
 * Returns SW_OK or SW_STATUS_INVALID (null, struct_size too small). */
SW_API sw_status sw_store_read_profile_get(sw_store *s, sw_store_read_profile *p, int reset);

#ifdef __cplusplus
}
#endif
#endif
