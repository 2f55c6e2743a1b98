/* The journal's appends (a record at the end, synced per durability; cut
 * back on failure) and its compaction into a snapshot of the index. Replay
 * at open is store.c's. */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

sw_status sw_store_journal_append(sw_store *s, const sw_store_record *r)
{
    uint8_t buf[SW_STORE_REC_BYTES];
    sw_store_encode_record(r, buf);
    return sw_store_journal_write(s, buf, 1);
}

sw_status sw_store_journal_write(sw_store *s, const uint8_t *recs, size_t n)
{
    if (s->read_only)
        return sw_fail(SW_STATUS_INVALID, "the store is open read-only");
    sw_status st = sw_store_pwrite_all(s->journal_fd, recs, n * SW_STORE_REC_BYTES,
                                       s->journal_end, "journal append");
    if (st == SW_OK && s->durability == SW_STORE_DURABILITY_SYNC &&
        fdatasync(s->journal_fd) != 0)
        st = sw_store_errno(s, errno, "fdatasync(journal)");
    if (st != SW_OK) {
        /* Cut a partial record off so that the next append stays aligned;
         * replay would drop it anyway, but a later good record must not sit
         * behind garbage. */
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        if (ftruncate(s->journal_fd, (off_t)s->journal_end) != 0) {
            s->failed = 1;
            return sw_fail(SW_STATUS_FAILED, "%s; cutting the journal back failed too: %s",
                           keep, strerror(errno));
        }
        sw_fail(st, "%s", keep);
        return st;
    }
    s->journal_end += n * SW_STORE_REC_BYTES;
    s->st.journal_records += n;
    return SW_OK;
}

sw_status sw_store_journal_append_next(sw_store *s, sw_store_record *r)
{
    r->seq = s->journal_seq + 1;
    SW_TRY(sw_store_journal_append(s, r));
    s->journal_seq = r->seq;
    return SW_OK;
}

sw_status sw_store_compact_journal(sw_store *s)
{
    size_t n = (size_t)s->used_slots + (size_t)s->unprov.n, k = 0;
    uint8_t *buf = (uint8_t *)malloc((n + 1) * SW_STORE_REC_BYTES);
    if (!buf)
        return sw_fail(SW_STATUS_NO_MEMORY, "journal compaction");
    /* The snapshot record: the sequence number and generation high-water
     * marks (the newest key may be deleted, and generations and sequence
     * numbers only grow: without it a reopened store handed out
     * generations that were already acknowledged, seen in
     * test_store_crash), and how many records follow it (replay checks
     * that they are all there). Every extent header in the data file is at
     * or below its sequence number. */
    sw_store_record snap;
    memset(&snap, 0, sizeof snap);
    snap.type = SW_STORE_REC_SNAP;
    snap.generation = s->generation;
    snap.seq = s->journal_seq;
    snap.slot = n;
    sw_store_encode_record(&snap, buf + k++ * SW_STORE_REC_BYTES);
    /* Oldest first, so that replay rebuilds the same LRU order; the
     * records keep their sequence numbers (= their extent headers'). */
    for (uint32_t v = s->lru_tail; v != SW_NIL; v = s->slots[v].lru_prev) {
        const sw_slot *e = &s->slots[v];
        sw_store_record r = {SW_STORE_REC_PUT, e->key, e->generation, v, e->length, e->crc,
                             e->seq};
        sw_store_encode_record(&r, buf + k++ * SW_STORE_REC_BYTES);
    }
    for (uint64_t i = 0; s->unprov.a && i <= s->unprov.mask; i++) {
        if (!s->unprov.a[i].used)
            continue;
        sw_store_record r;
        memset(&r, 0, sizeof r);
        r.type = SW_STORE_REC_UNPROV;
        r.key = s->unprov.a[i].key;
        r.seq = s->unprov.a[i].seq;
        sw_store_encode_record(&r, buf + k++ * SW_STORE_REC_BYTES);
    }
    sw_status st = sw_store_replace_file(s, SW_STORE_JOURNAL_TMP_NAME, SW_STORE_JOURNAL_NAME, buf, k * SW_STORE_REC_BYTES);
    free(buf);
    if (st != SW_OK)
        return st;
    int fd = -1;
    SW_TRY(sw_store_open_file(s, SW_STORE_JOURNAL_NAME, O_RDWR, &fd));
    close(s->journal_fd);
    s->journal_fd = fd;
    s->journal_end = k * SW_STORE_REC_BYTES;
    s->st.journal_records = k;
    return SW_OK;
}
