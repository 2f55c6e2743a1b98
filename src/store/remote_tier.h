/* The store's remote tier (docs/remote.md, "The store's remote tier"): the
 * remote handle, the write-through queue and its worker thread, the fetch of
 * keys missing locally, and the write-back of fetched stripes into the local
 * store are all here. The store calls the tier through these functions and
 * gives it, at open, the one store function it calls back (install); the
 * tier knows nothing else of the store. */
#ifndef SW_STORE_REMOTE_TIER_H
#define SW_STORE_REMOTE_TIER_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sw_remote_tier sw_remote_tier;

/* The store's side of write-back: writes the n fetched stripes keys[i]
 * (src[i], bytes[i]) into the local store, each only when the key has no
 * live local stripe (a local write that raced with the fetch wins) and can
 * be proven current, and never on a failed handle. Returns how many were
 * written. Called with no lock of the tier held. */
typedef size_t (*sw_remote_tier_install_fn)(void *store, size_t n, const sw_store_key *keys,
                                            const void *const *src, const size_t *bytes);

/* Opens the tier a config asks for: *out = NULL (and SW_OK) when c has no
 * remote (or an older struct_size). Otherwise opens the remote handle from
 * c->remote and starts the write-through worker. stripe_bytes: the store's
 * largest stripe (a longer remote value is corrupt). Write-back
 * (c->remote_write_back) goes through install(store, ...), never on a
 * read_only store. Returns sw_remote_open's status, SW_STATUS_INVALID (a
 * queue of more than 2^20 entries, remote_write_back not 0 or 1) or
 * SW_STATUS_NO_MEMORY. */
sw_status sw_remote_tier_open(const sw_store_config *c, uint32_t stripe_bytes, int read_only,
                              sw_remote_tier_install_fn install, void *store,
                              sw_remote_tier **out);
/* Drains the write-through queue (at most remote_close_wait_ms, then what
 * is left is dropped and counted), joins the worker, closes the handle. NULL
 * is a no-op. */
void sw_remote_tier_close(sw_remote_tier *t);
/* Queues a copy of a stripe just written locally for an asynchronous put;
 * a queued, not yet sent stripe of the same key is replaced. A full queue
 * makes the caller wait up to remote_queue_wait_ms, then the put is dropped
 * (counted). Call it without the store's lock. */
void sw_remote_tier_enqueue(sw_remote_tier *t, const sw_store_key *key, const void *src,
                            size_t bytes, uint64_t generation);
/* Resolves the keys whose status is SW_STATUS_NOT_FOUND through the remote
 * in one pipelined batch: a verified value is delivered into dst[i] (memcpy,
 * or with `device` a copy on `stream`, synchronised before the return) and
 * its status, length and generation set; a value that fails its checks
 * makes the key SW_STATUS_CORRUPT; a miss or a server error leaves it
 * NOT_FOUND. With write-back, what was delivered is then installed in the
 * local store. Returns SW_OK, SW_STATUS_NO_MEMORY, or the device copy's
 * error (the keys it delivered then carry it too). Call it without the
 * store's lock. */
sw_status sw_remote_tier_fetch(sw_remote_tier *t, size_t n, const sw_store_key *keys,
                               void *const *dst, int device, void *stream, size_t dst_bytes,
                               size_t *lengths, uint64_t *generations, sw_status *statuses);
/* Fills the remote_* fields of a stats snapshot (none when t is NULL). */
void sw_remote_tier_stats(sw_remote_tier *t, sw_store_stats *st);

#endif
