/* Fuzz target over the block store's on-disk decoders (src/store/format.c):
 * superblock, extent header and journal record, fed arbitrary bytes.
 *
 * Built two ways from this one file:
 *  - SPILLWAY_FUZZ=ON (clang): `fuzz_store_format`, a libFuzzer target with
 *    -fsanitize=fuzzer,address,undefined;
 *  - always: `fuzz_store_format_replay` (-DSW_FUZZ_REPLAY_MAIN), a plain
 *    program that feeds every file of the given corpus directories and a few
 *    thousand seeded pseudo-random inputs through the same entry point, run
 *    by ctest (label fuzz) so that CI exercises the parsers on garbage every
 *    run. `--write-seeds DIR` writes the seed corpus of valid structures.
 *
 * Checks, besides "no crash, no sanitizer report":
 *  - a decoder never accepts a buffer shorter than its structure;
 *  - whatever a decoder accepts re-encodes to the same bytes (no two byte
 *    strings decode to one value, nothing is silently ignored);
 *  - an accepted superblock describes a data file whose size fits in 64 bits
 *    and slot indices that fit in 32;
 *  - geometry_make over arbitrary parameters encodes a superblock that
 *    decodes back to the same geometry.
 * The CRC32C is at bytes 60..63 of all three structures, so each input is
 * also tried with its CRC patched in: random bytes almost never carry a valid
 * CRC, and without the patch the checks behind it would go unexplored. */
#include "remote/format.h"
#include "store/format.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_CHECK(cond)                                                              \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_store_format: check failed: %s (%s:%d)\n", #cond, \
                    __FILE__, __LINE__);                                            \
            abort();                                                                \
        }                                                                           \
    } while (0)

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void check_superblock(const uint8_t *buf, size_t len)
{
    sw_store_geometry g;
    sw_status st = sw_store_decode_superblock(buf, len, &g);
    if (len < 64)
        FZ_CHECK(st == SW_STATUS_INVALID);
    if (st != SW_OK)
        return;
    static uint8_t again[SW_STORE_SB_BYTES];
    sw_store_encode_superblock(&g, again);
    FZ_CHECK(memcmp(again, buf, 64) == 0);
    /* What open derives from an accepted superblock must not overflow. */
    uint64_t run = sw_store_run_bytes(&g), file = 0;
    FZ_CHECK(!__builtin_mul_overflow(run, g.nruns, &file));
    FZ_CHECK(g.nruns * g.run_blocks < 0xffffffffull);
    FZ_CHECK(g.slot_bytes % SW_STORE_ALIGN == 0 && g.run_header_bytes % SW_STORE_ALIGN == 0);
    FZ_CHECK(g.slot_bytes >= g.stripe_bytes);
}

static void check_extent_hdr(const uint8_t *buf, size_t len)
{
    sw_store_extent_hdr h;
    sw_status st = sw_store_decode_extent_hdr(buf, len, &h);
    if (len < SW_STORE_HDR_BYTES)
        FZ_CHECK(st == SW_STATUS_INVALID);
    if (st != SW_OK)
        return;
    FZ_CHECK(h.key.kind <= 1 && h.key.reserved == 0 && h.length <= SW_STORE_MAX_STRIPE);
    uint8_t again[SW_STORE_HDR_BYTES];
    sw_store_encode_extent_hdr(&h, again);
    FZ_CHECK(memcmp(again, buf, SW_STORE_HDR_BYTES) == 0);
}

static void check_record(const uint8_t *buf, size_t len)
{
    sw_store_record r;
    sw_status st = sw_store_decode_record(buf, len, &r);
    if (len < SW_STORE_REC_BYTES)
        FZ_CHECK(st == SW_STATUS_INVALID);
    if (st != SW_OK)
        return;
    FZ_CHECK(r.type >= SW_STORE_REC_PUT && r.type <= SW_STORE_REC_UNPROV && r.key.kind <= 1 &&
             r.length <= SW_STORE_MAX_STRIPE);
    uint8_t again[SW_STORE_REC_BYTES];
    sw_store_encode_record(&r, again);
    FZ_CHECK(memcmp(again, buf, SW_STORE_REC_BYTES) == 0);
}

/* All three decoders on one buffer, then again with its CRC patched in. */
static void check_all(const uint8_t *buf, size_t len)
{
    check_superblock(buf, len);
    check_extent_hdr(buf, len);
    check_record(buf, len);
    if (len < 64)
        return;
    uint8_t fixed[64];
    memcpy(fixed, buf, 64);
    wr32(fixed + 60, sw_crc32c(fixed, 60));
    check_superblock(fixed, 64);
    check_extent_hdr(fixed, 64);
    check_record(fixed, 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact copy on the heap: ASan sees any read past the caller's bytes. */
    uint8_t *buf = (uint8_t *)malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    check_all(buf, size);
    /* The input as a journal: consecutive 64-byte records, as replay reads
     * them, plus the torn tail. */
    for (size_t off = 0; off < size; off += SW_STORE_REC_BYTES) {
        size_t n = size - off < SW_STORE_REC_BYTES ? size - off : SW_STORE_REC_BYTES;
        check_record(buf + off, n);
        check_extent_hdr(buf + off, n);
    }
    /* Geometry from arbitrary parameters: encode/decode round trip. */
    if (size >= 16) {
        uint32_t stripe = rd32(buf) % (SW_STORE_MAX_STRIPE + 2);
        uint32_t runb = rd32(buf + 4) % (SW_STORE_MAX_RUN_BLOCKS + 2);
        uint64_t cap = (uint64_t)rd32(buf + 8) << (buf[12] % 33);
        sw_store_geometry g, d;
        if (sw_store_geometry_make(stripe, runb, cap, &g) == SW_OK) {
            g.store_id = rd32(buf + 12);
            static uint8_t sb[SW_STORE_SB_BYTES];
            sw_store_encode_superblock(&g, sb);
            FZ_CHECK(sw_store_decode_superblock(sb, sizeof sb, &d) == SW_OK);
            FZ_CHECK(memcmp(&g, &d, sizeof g) == 0);
        }
    }
    /* The remote tier's value decoder (a Redis value is untrusted bytes):
     * arbitrary input must decode to CORRUPT or to a header whose length is
     * exactly the payload's; a value we encode must decode back. Slots of
     * arbitrary key bytes stay in range; RESP framing stays in bounds. */
    sw_remote_hdr rh;
    if (sw_remote_decode_value(buf, size, &rh) == SW_OK)
        FZ_CHECK(size >= SW_REMOTE_HDR_BYTES && rh.length == size - SW_REMOTE_HDR_BYTES);
    else
        FZ_CHECK(sw_remote_decode_value(buf, size, &rh) == SW_STATUS_CORRUPT);
    FZ_CHECK(sw_remote_key_slot((const char *)buf, size) < SW_REMOTE_SLOTS);
    { /* RESP framing of untrusted bytes: a frame within them, or more
       * needed past them, or a refusal */
        size_t frame = 0, need = 0;
        int64_t bulk = 0;
        sw_resp_scan_state rs;
        sw_resp_limits lim = {1000, 4096, 64};
        sw_resp_scan_init(&rs);
        int rc = sw_resp_scan(&rs, (const char *)buf, size, &lim, &frame, &need, &bulk);
        FZ_CHECK(rc >= -2 && rc <= 1);
        FZ_CHECK(rc != 1 || (frame > 0 && frame <= size));
        FZ_CHECK(rc != 0 || (need > size && need <= lim.max_frame));
        FZ_CHECK(rc != -2 || bulk > 1000);
        FZ_CHECK(rc != -1 || rs.why != NULL);
        /* resumed in two reads: the same verdict */
        if (size > 1) {
            size_t f2 = 0, n2 = 0;
            int64_t b2 = 0;
            sw_resp_scan_init(&rs);
            int r2 = sw_resp_scan(&rs, (const char *)buf, size / 2, &lim, &f2, &n2, &b2);
            if (r2 == 0)
                r2 = sw_resp_scan(&rs, (const char *)buf, size, &lim, &f2, &n2, &b2);
            FZ_CHECK(r2 == rc && (rc != 1 || f2 == frame));
        }
    }
    if (size >= 24) {
        sw_remote_hdr eh, dh;
        memset(&eh, 0, sizeof eh);
        eh.key.ns = (uint64_t)rd32(buf) << 32 | rd32(buf + 4);
        eh.key.layer = rd32(buf + 8);
        eh.key.block = rd32(buf + 12);
        eh.key.kv_head = (uint16_t)rd32(buf + 16);
        eh.key.kind = (uint8_t)(buf[20] & 1 ? SW_STORE_KIND_V : SW_STORE_KIND_K);
        eh.generation = (uint64_t)rd32(buf + 20) + 1;
        eh.prefix_hash = sw_remote_prefix_hash((const char *)buf, 24);
        eh.length = (uint32_t)(size - 24);
        uint8_t *val = (uint8_t *)malloc(SW_REMOTE_HDR_BYTES + eh.length);
        if (val) {
            sw_remote_encode_hdr(&eh, buf + 24, val);
            memcpy(val + SW_REMOTE_HDR_BYTES, buf + 24, eh.length);
            FZ_CHECK(sw_remote_decode_value(val, SW_REMOTE_HDR_BYTES + eh.length, &dh) == SW_OK);
            FZ_CHECK(dh.length == eh.length && dh.generation == eh.generation &&
                     dh.prefix_hash == eh.prefix_hash &&
                     memcmp(&dh.key, &eh.key, sizeof dh.key) == 0);
            sw_remote_reject why;
            FZ_CHECK(sw_remote_check_value(val, SW_REMOTE_HDR_BYTES + eh.length, &eh.key,
                                           eh.prefix_hash ^ 1, &dh, &why) == SW_STATUS_CORRUPT &&
                     why == SW_REMOTE_REJECT_PREFIX);
            if (eh.length) { /* one flipped payload byte is caught */
                val[SW_REMOTE_HDR_BYTES + buf[21] % eh.length] ^= 0x5a;
                FZ_CHECK(sw_remote_decode_value(val, SW_REMOTE_HDR_BYTES + eh.length, &dh) ==
                         SW_STATUS_CORRUPT);
            }
            free(val);
        }
    }
    /* Empty/short buffers: always INVALID, NULL included. */
    sw_store_geometry g0;
    sw_store_extent_hdr h0;
    sw_store_record r0;
    FZ_CHECK(sw_store_decode_superblock(NULL, size, &g0) == SW_STATUS_INVALID);
    FZ_CHECK(sw_store_decode_extent_hdr(NULL, size, &h0) == SW_STATUS_INVALID);
    FZ_CHECK(sw_store_decode_record(NULL, size, &r0) == SW_STATUS_INVALID);
    free(buf);
    return 0;
}

#ifdef SW_FUZZ_REPLAY_MAIN
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static uint64_t fz_rng = 0x5eedf022u;
static uint64_t fz_next(void)
{
    fz_rng ^= fz_rng << 13;
    fz_rng ^= fz_rng >> 7;
    fz_rng ^= fz_rng << 17;
    return fz_rng;
}

/* Valid structures: the seed corpus and the base of the mutated inputs. */
static size_t make_seed(unsigned i, uint8_t *out)
{
    sw_store_key k = {0x1122334455667788ull + i, i % 61, i * 7u, (uint16_t)(i % 9), (uint8_t)(i & 1),
                      0};
    switch (i % 4) {
    case 0: {
        sw_store_geometry g;
        if (sw_store_geometry_make(8192u << (i % 3), 64u >> (i % 4), (64ull << 20) << (i % 5),
                                   &g) != SW_OK)
            return 0;
        g.store_id = 0xabcdef00u + i;
        sw_store_encode_superblock(&g, out);
        return SW_STORE_SB_BYTES;
    }
    case 1: {
        sw_store_extent_hdr h = {k, 100u + i, 8192u - i, 0xdeadbeefu ^ i, i * 3u, 7u * i,
                                 SW_STORE_EXTENT_LIVE};
        sw_store_encode_extent_hdr(&h, out);
        return SW_STORE_HDR_BYTES;
    }
    default: {
        /* A journal of a few records, put and delete. */
        size_t n = 1 + i % 5;
        for (size_t j = 0; j < n; j++) {
            sw_store_record r = {(j & 1) ? SW_STORE_REC_DEL : SW_STORE_REC_PUT, k, 7 + j, j * 64,
                                 (uint32_t)(4096 + j), 0x12345678u, 1000 + j};
            r.key.block += (uint32_t)j;
            sw_store_encode_record(&r, out + j * SW_STORE_REC_BYTES);
        }
        return n * SW_STORE_REC_BYTES;
    }
    }
}

static int write_seeds(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    static uint8_t buf[SW_STORE_SB_BYTES];
    for (unsigned i = 0; i < 16; i++) {
        size_t n = make_seed(i, buf);
        if (!n)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/seed-%02u", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
            perror(path);
            return 1;
        }
    }
    return 0;
}

static long run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 1;
}

static long run_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(sb.st_mode))
        return run_file(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            n += run_file(p);
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    long iters = 4000, files = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--write-seeds") && a + 1 < argc)
            return write_seeds(argv[++a]);
        if (!strcmp(argv[a], "--iters") && a + 1 < argc) {
            iters = strtol(argv[++a], NULL, 10);
            continue;
        }
        long n = run_path(argv[a]);
        if (n < 0)
            return 1;
        files += n;
    }
    /* Seeded garbage: pure random bytes of random length, and valid
     * structures with a few bytes flipped (with and without the CRC fixed
     * by check_all). */
    static uint8_t buf[SW_STORE_SB_BYTES + 256];
    for (long it = 0; it < iters; it++) {
        size_t n;
        if (it % 2 == 0) {
            n = (size_t)(fz_next() % (sizeof buf + 1));
            for (size_t j = 0; j < n; j++)
                buf[j] = (uint8_t)fz_next();
        } else {
            n = make_seed((unsigned)(fz_next() % 16), buf);
            if (!n)
                continue;
            unsigned flips = 1 + (unsigned)(fz_next() % 4);
            for (unsigned f = 0; f < flips; f++)
                buf[fz_next() % (n < 64 ? n : 64)] ^= (uint8_t)(1u << (fz_next() % 8));
            if (fz_next() % 8 == 0)
                n = (size_t)(fz_next() % (n + 1)); /* torn */
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    /* The unmodified seeds must all decode. */
    for (unsigned i = 0; i < 16; i++) {
        size_t n = make_seed(i, buf);
        if (!n)
            continue;
        sw_store_geometry g;
        sw_store_extent_hdr h;
        sw_store_record r;
        if (i % 4 == 0)
            FZ_CHECK(sw_store_decode_superblock(buf, n, &g) == SW_OK);
        else if (i % 4 == 1)
            FZ_CHECK(sw_store_decode_extent_hdr(buf, n, &h) == SW_OK);
        else
            FZ_CHECK(sw_store_decode_record(buf, n, &r) == SW_OK);
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("fuzz_store_format_replay: %ld corpus files, %ld generated inputs, seed 0x5eedf022: ok\n",
           files, iters);
    return 0;
}
#endif
