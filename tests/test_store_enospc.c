/* Block store on a genuinely full filesystem: a 2 MiB tmpfs (mounted here;
 * skipped with 77 when mounting is not permitted). Creating a store larger
 * than the filesystem fails with SW_STATUS_FULL; a store that fits is
 * filled, the rest of the filesystem is taken by a filler file, then writes
 * continue (the journal grows) until the store reports SW_STATUS_FULL;
 * every block acknowledged before is intact, before and after a reopen. */
#include "test_store_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>

#define STRIPE 4096u
#define RUN 8u

int main(void)
{
    ts_dir d;
    ts_dir_make(&d, "enospc");
    if (mount("tmpfs", d.base, "tmpfs", 0, "size=2m,mode=0700") != 0) {
        fprintf(stderr, "SKIP: cannot mount a 2 MiB tmpfs on %s: %s (needs root / "
                "CAP_SYS_ADMIN)\n", d.base, strerror(errno));
        rmdir(d.base);
        return SW_TEST_SKIP;
    }
    char dir[400], big[400], filler[400];
    snprintf(dir, sizeof dir, "%s/store", d.base);
    snprintf(big, sizeof big, "%s/big", d.base);
    snprintf(filler, sizeof filler, "%s/filler", d.base);

    /* Larger than the filesystem: refused at creation, nothing left over. */
    sw_store_config c = ts_config(big, STRIPE, RUN, 80); /* ~2.9 MiB */
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_FULL);
    printf("oversized store: %s\n", sw_last_error());

    c = ts_config(dir, STRIPE, RUN, 30); /* ~1.1 MiB */
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s) {
        umount(d.base);
        return 1;
    }
    sw_store_stats st = ts_stats(s);
    printf("tmpfs store: io %s, direct_io %d\n", sw_store_io_backend_name(st.io_backend),
           st.direct_io);
    uint8_t buf[STRIPE];
    uint64_t nblocks = st.extents_total / 2, acked_gen[1024] = {0}, acked_tag[1024] = {0};
    /* Blocks written while there is room. */
    for (uint32_t b = 0; b < nblocks; b++) {
        sw_store_key k = ts_key(5, 0, b, 0, 0);
        ts_fill(buf, ts_len(&k, 1000000 + b, STRIPE), &k, 1000000 + b);
        CHECK_STATUS(sw_store_write(s, &k, buf, ts_len(&k, 1000000 + b, STRIPE), &acked_gen[b]),
                     SW_OK);
        acked_tag[b] = 1000000 + b;
    }
    /* Take what is left of the filesystem. */
    int fd = open(filler, O_CREAT | O_WRONLY, 0600);
    char chunk[4096];
    memset(chunk, 1, sizeof chunk);
    while (write(fd, chunk, sizeof chunk) > 0) {
    }
    close(fd);

    sw_status last = SW_OK;
    uint64_t writes = 0;
    for (uint64_t i = 0; i < 200000 && last == SW_OK; i++) {
        uint32_t b = (uint32_t)(i % nblocks);
        sw_store_key k = ts_key(5, 0, b, 0, 0);
        uint64_t tag = i + 1, gen = 0;
        ts_fill(buf, ts_len(&k, tag, STRIPE), &k, tag);
        last = sw_store_write(s, &k, buf, ts_len(&k, tag, STRIPE), &gen);
        if (last == SW_OK) {
            acked_gen[b] = gen;
            acked_tag[b] = tag;
            writes++;
        }
    }
    CHECK_STATUS(last, SW_STATUS_FULL);
    printf("after %llu writes: %s: %s\n", (unsigned long long)writes, sw_status_str(last),
           sw_last_error());
    CHECK(strstr(sw_last_error(), "full") != NULL);
    CHECK(!ts_stats(s).failed);
    /* Deletes also need journal room: done (the key gone, now and after a
     * reopen) or refused with a clear status (the key intact), never a
     * failed store; then every acknowledged write reads back, twice. */
    for (uint32_t b = 0, tried = 0; b < nblocks && tried < 4; b++) {
        if (acked_gen[b] == 0)
            continue;
        tried++;
        sw_store_key k = ts_key(5, 0, b, 0, 0);
        const sw_status ds = sw_store_delete(s, &k);
        CHECK(ds == SW_OK || ds == SW_STATUS_FULL);
        if (ds == SW_STATUS_FULL)
            CHECK(strstr(sw_last_error(), "full") != NULL);
        printf("delete under a full filesystem: %s\n", sw_status_str(ds));
        if (ds == SW_OK)
            acked_gen[b] = 0; /* (read back as NOT_FOUND below) */
        CHECK(!ts_stats(s).failed);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t b = 0; b < nblocks; b++) {
            sw_store_key k = ts_key(5, 0, b, 0, 0);
            size_t len = 0;
            uint64_t gen = 0;
            sw_status rs = ts_read1(s, &k, buf, STRIPE, &len, &gen);
            if (acked_gen[b] == 0) {
                CHECK_STATUS(rs, SW_STATUS_NOT_FOUND);
                continue;
            }
            CHECK_STATUS(rs, SW_OK);
            CHECK(gen == acked_gen[b] && len == ts_len(&k, acked_tag[b], STRIPE) &&
                  ts_check(buf, len, &k, acked_tag[b]));
        }
        CHECK_STATUS(sw_store_close(s), SW_OK);
        s = NULL;
        if (pass == 0) {
            CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
            if (!s)
                break;
        }
    }
    /* With room again the store takes writes. */
    unlink(filler);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (s) {
        sw_store_key k = ts_key(5, 0, 0, 0, 0);
        CHECK_STATUS(sw_store_write(s, &k, buf, 100, NULL), SW_OK);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    CHECK(umount(d.base) == 0);
    rmdir(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_enospc: %d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
