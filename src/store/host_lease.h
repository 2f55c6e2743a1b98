/* Leases of host-tier entries (host_lease.c): the swap engine's device pool
 * reads host-tier hits straight out of the store's pinned host memory with a
 * gather kernel (no CPU copy of the payload) and checks their CRC32C on the
 * GPU. A lease pins an entry's memory: while it is held, CLOCK eviction,
 * an overwrite or a delete of the key unmaps the entry but never reuses its
 * bytes (the entry is freed by the last release). Internal API of the
 * library (not in the public headers). */
#ifndef SW_STORE_HOST_LEASE_H
#define SW_STORE_HOST_LEASE_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sw_store_read_wait, also giving the payload bytes the ticket delivered
 * from the host tier (tier_bytes[0]) and from the data file ([1]): a
 * caller's own share of the store's host_bytes_read / file_bytes_read,
 * which count every caller of a shared store (remote-tier fetches are in
 * neither). tier_bytes may be NULL. */
sw_status sw_store_read_wait_tiers(sw_store *s, uint64_t ticket, size_t n, size_t *lengths,
                                   uint64_t *generations, sw_status *statuses,
                                   uint64_t tier_bytes[2]);

/* One key's lease. ptr NULL: not leased (not in the host tier, a bad key,
 * or a length that is not a multiple of the caller's len_multiple); read
 * it through sw_store_read / a read ticket, which reports it exactly as
 * before. */
typedef struct sw_store_lease {
    const void *ptr;      /* the payload, `length` bytes, 4 KiB aligned */
    uint64_t generation;
    uint32_t length;
    uint32_t crc;         /* CRC32C of the payload, as the store holds it */
    uint32_t entry;       /* what sw_store_host_release takes back */
    uint32_t reserved;
} sw_store_lease;

/* 1 when the host tier's memory is pinned (page-locked by CUDA at open), so
 * a GPU can read leased payloads through unified addressing; 0 otherwise
 * (no host tier, or a build or machine without CUDA). */
int sw_store_host_mapped(sw_store *s);

/* Entries of the host tier (each holds one stripe): the most keys one
 * holder of leases can have leased at once. 0 without a host tier. */
size_t sw_store_host_entries(sw_store *s);

/* Leases the host-tier copies of keys[0..n) that have one and whose length
 * is a multiple of len_multiple (0 or 1: any). A leased key counts as a
 * host-tier hit in the store's stats (host_hits, host_bytes_read) and is
 * touched (LRU, CLOCK) as a read would; other keys count nothing here.
 * *nleased (optional) = the number leased. Every lease must be released
 * exactly once (sw_store_host_release), before sw_store_close.
 * SW_OK; SW_STATUS_INVALID (null arguments); SW_STATUS_FAILED (the handle
 * failed before). On an error nothing is leased. */
sw_status sw_store_host_lease(sw_store *s, size_t n, const sw_store_key *keys,
                              uint32_t len_multiple, sw_store_lease *out, size_t *nleased);

/* Releases the leases out[0..n) of sw_store_host_lease (entries whose ptr
 * is NULL are skipped), or, with entries[] instead, n entry numbers. */
void sw_store_host_release(sw_store *s, size_t n, const sw_store_lease *leases);
void sw_store_host_release_entries(sw_store *s, size_t n, const uint32_t *entries);

/* Leases kept across calls: a holder may keep a lease after its use and
 * read the entry again later without a new lease, as long as the entry
 * still holds its key's payload. sw_store_host_unmaps counts every
 * unmapping of a leased entry so far (an overwrite, a delete, a file-tier
 * eviction or an invalidation of its key while leased): while it has not
 * moved, every entry leased before still maps its key. *leased (optional):
 * the entries leased now, by every holder (so a holder can leave room for
 * the others'). */
uint64_t sw_store_host_unmaps(sw_store *s, size_t *leased);

/* A reuse of kept leases: touches entries[0..n) (each leased by the
 * caller) as sw_store_host_lease touches their keys -- LRU, CLOCK,
 * host_hits, host_bytes_read -- when the store's unmap count still equals
 * `unmaps`, and returns 1. Returns 0 and touches nothing when it moved, an
 * entry is not leased or not mapped, or the handle failed: the caller then
 * releases its kept leases and leases the keys anew. */
int sw_store_host_retouch(sw_store *s, uint64_t unmaps, size_t n, const uint32_t *entries);

/* A leased copy found corrupt by its reader (the GPU's CRC check): when
 * entry `entry` still holds generation `generation` of its key, the copy
 * leaves the host tier (freed after the last release) and the store's
 * `corruptions` counter counts it, so the next read of the key comes from
 * the file tier, with its own check. Returns 1 when it dropped the copy,
 * 0 when the entry had already left or holds another version. */
int sw_store_host_invalidate(sw_store *s, uint32_t entry, uint64_t generation);

/* Test hook: XORs byte `off` of the key's host-tier copy with `mask`
 * (a flipped byte in RAM that the store's CRC no longer matches).
 * SW_STATUS_NOT_FOUND when the key has no host-tier copy, INVALID when
 * off is past its length. */
sw_status sw_store_test_host_poke(sw_store *s, const sw_store_key *key, size_t off,
                                  uint8_t mask);

#ifdef __cplusplus
}
#endif
#endif
