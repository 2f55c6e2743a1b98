/* Block store format: CRC32C vectors (RFC 3720), both implementations agree;
 * journal record, extent header and superblock encode/decode round trips;
 * every single-bit flip and every short buffer is rejected. */
#include "test_store_util.h"

static void test_crc(void)
{
    CHECK(sw_crc32c("123456789", 9) == 0xE3069283u);
    CHECK(sw_crc32c_update_table(0, "123456789", 9) == 0xE3069283u);
    uint8_t b[48];
    memset(b, 0, 32);
    CHECK(sw_crc32c(b, 32) == 0x8A9136AAu);
    memset(b, 0xff, 32);
    CHECK(sw_crc32c(b, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    CHECK(sw_crc32c(b, 32) == 0x46DD794Eu);
    CHECK(sw_crc32c(NULL, 0) == 0);
    /* Hardware and table paths agree on every length and misalignment, and
     * incremental updates equal one pass. */
    sw_rng r = {ts_seed(11)};
    uint8_t buf[1100];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)sw_rng_next(&r);
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 1024; len += (len < 40 ? 1 : 37)) {
            uint32_t a = sw_crc32c(buf + off, len);
            CHECK(a == sw_crc32c_update_table(0, buf + off, len));
            size_t h = len / 3;
            CHECK(a == sw_crc32c_update(sw_crc32c(buf + off, h), buf + off + h, len - h));
        }
    /* Long inputs take the interleaved three-stream path: lengths around its
     * block boundaries and up to a stripe and more. */
    static uint8_t big[70000 + 16];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)sw_rng_next(&r);
    for (int t = 0; t < 300; t++) {
        size_t off = (size_t)(sw_rng_next(&r) % 9);
        size_t len = t < 100 ? 1000 + (size_t)t * 37 : (size_t)(sw_rng_next(&r) % 70001);
        CHECK(sw_crc32c(big + off, len) == sw_crc32c_update_table(0, big + off, len));
    }
    /* The fused check and copy (the read path): the same CRC as sw_crc32c,
     * the bytes copied exactly, nothing written outside [dst, dst + len),
     * for destinations of every alignment mod 16 (its streaming stores) and
     * lengths around its 12 KiB chunks. */
    static uint8_t out[70000 + 64];
    for (int t = 0; t < 400; t++) {
        size_t off = (size_t)(sw_rng_next(&r) % 9), doff = 8 + (size_t)(t % 17);
        size_t len = t < 40    ? (size_t)t * 7
                     : t < 120 ? 12288 * (size_t)(1 + t % 3) - 2 + (size_t)(t % 5)
                               : (size_t)(sw_rng_next(&r) % 70001);
        memset(out, 0xa5, sizeof out);
        uint32_t want = sw_crc32c(big + off, len);
        CHECK(sw_crc32c_copy(out + doff, big + off, len) == want);
        CHECK(memcmp(out + doff, big + off, len) == 0);
        for (size_t i = 0; i < doff; i++)
            CHECK(out[i] == 0xa5);
        for (size_t i = doff + len; i < sizeof out; i++)
            CHECK(out[i] == 0xa5);
    }
    printf("crc32c implementation: %s\n", sw_crc32c_impl());
}

static void test_record(void)
{
    sw_store_record r = {SW_STORE_REC_PUT, ts_key(0x1122334455667788ull, 7, 123456, 9, 1),
                         42, 77, 8192, 0xdeadbeef, 5};
    uint8_t b[SW_STORE_REC_BYTES];
    sw_store_encode_record(&r, b);
    sw_store_record o;
    CHECK_STATUS(sw_store_decode_record(b, sizeof b, &o), SW_OK);
    CHECK(o.type == r.type && sw_store_key_eq(&o.key, &r.key) && o.generation == 42 &&
          o.slot == 77 && o.length == 8192 && o.payload_crc == 0xdeadbeef && o.seq == 5);
    for (size_t bit = 0; bit < 8 * sizeof b; bit++) {
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK_STATUS(sw_store_decode_record(b, sizeof b, &o), SW_STATUS_CORRUPT);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    for (size_t len = 0; len < sizeof b; len++)
        CHECK_STATUS(sw_store_decode_record(b, len, &o), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_decode_record(NULL, 64, &o), SW_STATUS_INVALID);
    uint8_t z[SW_STORE_REC_BYTES] = {0};
    CHECK_STATUS(sw_store_decode_record(z, sizeof z, &o), SW_STATUS_CORRUPT);
    r.type = SW_STORE_REC_DEL;
    sw_store_encode_record(&r, b);
    CHECK_STATUS(sw_store_decode_record(b, sizeof b, &o), SW_OK);
    CHECK(o.type == SW_STORE_REC_DEL);
    r.type = SW_STORE_REC_UNPROV + 1; /* encodes, but the decoder refuses an unknown type */
    sw_store_encode_record(&r, b);
    CHECK_STATUS(sw_store_decode_record(b, sizeof b, &o), SW_STATUS_CORRUPT);
}

static void test_extent_hdr(void)
{
    sw_store_extent_hdr h = {ts_key(3, 1, 2, 3, 0), 9, 100, 0x12345678, 4, 77,
                             SW_STORE_EXTENT_LIVE};
    uint8_t b[SW_STORE_HDR_BYTES];
    sw_store_encode_extent_hdr(&h, b);
    sw_store_extent_hdr o;
    CHECK_STATUS(sw_store_decode_extent_hdr(b, sizeof b, &o), SW_OK);
    CHECK(sw_store_key_eq(&o.key, &h.key) && o.generation == 9 && o.length == 100 &&
          o.payload_crc == 0x12345678 && o.slot == 4 && o.seq == 77 &&
          o.state == SW_STORE_EXTENT_LIVE);
    /* A void header (a deleted extent) round-trips; one with a length does not. */
    {
        sw_store_extent_hdr v = {ts_key(3, 1, 2, 3, 1), 9, 0, 0, 4, 78, SW_STORE_EXTENT_VOID};
        uint8_t vb[SW_STORE_HDR_BYTES];
        sw_store_encode_extent_hdr(&v, vb);
        CHECK_STATUS(sw_store_decode_extent_hdr(vb, sizeof vb, &o), SW_OK);
        CHECK(o.state == SW_STORE_EXTENT_VOID && o.seq == 78 && o.key.kind == 1);
        v.length = 5;
        sw_store_encode_extent_hdr(&v, vb);
        CHECK_STATUS(sw_store_decode_extent_hdr(vb, sizeof vb, &o), SW_STATUS_CORRUPT);
    }
    for (size_t bit = 0; bit < 8 * sizeof b; bit++) {
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK_STATUS(sw_store_decode_extent_hdr(b, sizeof b, &o), SW_STATUS_CORRUPT);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK_STATUS(sw_store_decode_extent_hdr(b, 63, &o), SW_STATUS_INVALID);
    /* A record is never mistaken for an extent header and vice versa. */
    sw_store_record r = {SW_STORE_REC_PUT, h.key, 9, 4, 100, 0x12345678, 1};
    sw_store_encode_record(&r, b);
    CHECK_STATUS(sw_store_decode_extent_hdr(b, sizeof b, &o), SW_STATUS_CORRUPT);
}

static void test_superblock(void)
{
    sw_store_geometry g, o;
    CHECK_STATUS(sw_store_geometry_make(8192, 64, 100u << 20, &g), SW_OK);
    CHECK(g.slot_bytes == 8192 && g.run_header_bytes == 4096);
    CHECK(sw_store_run_bytes(&g) == 4096 + 64 * 8192);
    CHECK(g.nruns == (100u << 20) / (4096 + 64 * 8192));
    CHECK_STATUS(sw_store_geometry_make(5000, 100, 100u << 20, &o), SW_OK);
    CHECK(o.slot_bytes == 8192 && o.run_header_bytes == 8192);
    CHECK_STATUS(sw_store_geometry_make(8192, 64, 4096, &o), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_geometry_make(0, 64, 1u << 30, &o), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_geometry_make(8192, 0, 1u << 30, &o), SW_STATUS_INVALID);
    g.store_id = 0xabcdef;
    uint8_t b[SW_STORE_SB_BYTES];
    sw_store_encode_superblock(&g, b);
    CHECK_STATUS(sw_store_decode_superblock(b, sizeof b, &o), SW_OK);
    CHECK(o.nruns == g.nruns && o.store_id == g.store_id && o.slot_bytes == g.slot_bytes);
    for (size_t bit = 0; bit < 8 * 64; bit++) {
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK(sw_store_decode_superblock(b, sizeof b, &o) != SW_OK);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    /* Every byte after the CRC must be zero, and there must be no more than
     * a superblock's bytes. */
    for (size_t i = 64; i < sizeof b; i += 97) {
        b[i] = 1;
        CHECK_STATUS(sw_store_decode_superblock(b, sizeof b, &o), SW_STATUS_CORRUPT);
        b[i] = 0;
    }
    {
        uint8_t big[SW_STORE_SB_BYTES + 1];
        memcpy(big, b, sizeof b);
        big[SW_STORE_SB_BYTES] = 0;
        CHECK_STATUS(sw_store_decode_superblock(big, sizeof big, &o), SW_STATUS_CORRUPT);
    }
    g.version = SW_STORE_FORMAT_VERSION + 1;
    sw_store_encode_superblock(&g, b);
    CHECK_STATUS(sw_store_decode_superblock(b, sizeof b, &o), SW_STATUS_UNSUPPORTED);
    CHECK(o.version == SW_STORE_FORMAT_VERSION + 1);
    g.version = 1; /* before extents carried sequence numbers */
    sw_store_encode_superblock(&g, b);
    CHECK_STATUS(sw_store_decode_superblock(b, sizeof b, &o), SW_STATUS_UNSUPPORTED);
    CHECK(o.version == 1);
    g.version = SW_STORE_FORMAT_VERSION;
    g.slot_bytes = 4096; /* inconsistent with stripe_bytes 8192 */
    sw_store_encode_superblock(&g, b);
    CHECK_STATUS(sw_store_decode_superblock(b, sizeof b, &o), SW_STATUS_CORRUPT);
    CHECK_STATUS(sw_store_decode_superblock(b, 10, &o), SW_STATUS_INVALID);
}

int main(void)
{
    test_crc();
    test_record();
    test_extent_hdr();
    test_superblock();
    if (sw_test_failures)
        fprintf(stderr, "test_store_format: %d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
