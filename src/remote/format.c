/* Remote tier value format, key names, cluster slots, latency histogram. */
#include "remote/format.h"
#include "store/format.h" /* sw_crc32c: the store's CRC32C, one implementation */
#include "core/sw_le.h"

#include <stdint.h>
#include <string.h>

static size_t put_dec(char *out, uint32_t v)
{
    char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

size_t sw_remote_key_name(const char *prefix, size_t prefix_len, const sw_store_key *k,
                          char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    memcpy(out, prefix, prefix_len);
    n = prefix_len;
    for (int i = 15; i >= 0; i--)
        out[n++] = hex[(k->ns >> (4 * i)) & 15];
    out[n++] = ':';
    n += put_dec(out + n, k->layer);
    out[n++] = ':';
    n += put_dec(out + n, k->block);
    out[n++] = ':';
    n += put_dec(out + n, k->kv_head);
    out[n++] = ':';
    out[n++] = k->kind == SW_STORE_KIND_K ? 'k' : 'v';
    return n;
}

static void encode_fields(const sw_remote_hdr *h, uint8_t *out)
{
    memset(out, 0, SW_REMOTE_HDR_BYTES);
    sw_le_put32(out, SW_REMOTE_MAGIC);
    out[4] = h->key.kind;
    out[5] = (uint8_t)SW_REMOTE_VERSION;
    sw_le_put16(out + 6, h->key.kv_head);
    sw_le_put64(out + 8, h->key.ns);
    sw_le_put32(out + 16, h->key.layer);
    sw_le_put32(out + 20, h->key.block);
    sw_le_put64(out + 24, h->generation);
    sw_le_put32(out + 32, h->length);
    sw_le_put64(out + 36, h->prefix_hash);
}

uint64_t sw_remote_prefix_hash(const char *prefix, size_t prefix_len)
{
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < prefix_len; i++) {
        x ^= (uint8_t)prefix[i];
        x *= 0x100000001b3ull;
    }
    return x;
}

void sw_remote_encode_hdr(const sw_remote_hdr *h, const void *payload,
                          uint8_t out[SW_REMOTE_HDR_BYTES])
{
    encode_fields(h, out);
    uint32_t crc = sw_crc32c_update(0, out, 60);
    if (h->length)
        crc = sw_crc32c_update(crc, payload, h->length);
    sw_le_put32(out + 60, crc);
}

sw_status sw_remote_decode_value(const uint8_t *buf, size_t len, sw_remote_hdr *h)
{
    if (!buf || len < SW_REMOTE_HDR_BYTES)
        return SW_STATUS_CORRUPT;
    if (sw_le_get32(buf) != SW_REMOTE_MAGIC || buf[5] != SW_REMOTE_VERSION || buf[4] > 1)
        return SW_STATUS_CORRUPT;
    for (int i = 44; i < 60; i++)
        if (buf[i])
            return SW_STATUS_CORRUPT;
    uint32_t length = sw_le_get32(buf + 32);
    if ((uint64_t)length != (uint64_t)(len - SW_REMOTE_HDR_BYTES))
        return SW_STATUS_CORRUPT;
    uint32_t crc = sw_crc32c_update(0, buf, 60);
    if (length)
        crc = sw_crc32c_update(crc, buf + SW_REMOTE_HDR_BYTES, length);
    if (crc != sw_le_get32(buf + 60))
        return SW_STATUS_CORRUPT;
    memset(h, 0, sizeof *h);
    h->key.kind = buf[4];
    h->key.kv_head = sw_le_get16(buf + 6);
    h->key.ns = sw_le_get64(buf + 8);
    h->key.layer = sw_le_get32(buf + 16);
    h->key.block = sw_le_get32(buf + 20);
    h->generation = sw_le_get64(buf + 24);
    h->prefix_hash = sw_le_get64(buf + 36);
    h->length = length;
    return SW_OK;
}

sw_status sw_remote_check_value(const uint8_t *buf, size_t len, const sw_store_key *want,
                                uint64_t prefix_hash, sw_remote_hdr *h,
                                sw_remote_reject *why)
{
    sw_remote_reject w = SW_REMOTE_REJECT_NONE;
    if (sw_remote_decode_value(buf, len, h) != SW_OK)
        w = len >= 6 && sw_le_get32(buf) == SW_REMOTE_MAGIC && buf[5] != SW_REMOTE_VERSION
                ? SW_REMOTE_REJECT_VERSION
                : SW_REMOTE_REJECT_DAMAGED;
    else if (!sw_store_key_eq(&h->key, want))
        w = SW_REMOTE_REJECT_KEY;
    else if (h->prefix_hash != prefix_hash)
        w = SW_REMOTE_REJECT_PREFIX;
    if (why)
        *why = w;
    return w == SW_REMOTE_REJECT_NONE ? SW_OK : SW_STATUS_CORRUPT;
}

const char *sw_remote_reject_str(sw_remote_reject why)
{
    switch (why) {
    case SW_REMOTE_REJECT_NONE: return "intact";
    case SW_REMOTE_REJECT_DAMAGED: return "failed its header/CRC32C check";
    case SW_REMOTE_REJECT_VERSION: return "has a value format version this build does not read";
    case SW_REMOTE_REJECT_KEY: return "was written for another key";
    case SW_REMOTE_REJECT_PREFIX: return "was written under another key prefix (tenant)";
    }
    return "rejected";
}

/* The length of a '$' or '*' line "<t><digits>\r" (ll bytes up to the
 * '\n'): exactly "-1", or digits without a leading zero (but "0"), at most
 * 18 of them. 0 and *v, -1 malformed. */
static int resp_length(const char *line, size_t ll, int64_t *v)
{
    size_t k = 1, end = ll - 1; /* line[end] is the '\r' */
    if (end - k == 2 && line[1] == '-' && line[2] == '1') {
        *v = -1;
        return 0;
    }
    if (k == end || end - k > 18 || (line[k] == '0' && end - k > 1))
        return -1;
    int64_t x = 0;
    for (; k < end; k++) {
        if (line[k] < '0' || line[k] > '9')
            return -1;
        x = x * 10 + (line[k] - '0');
    }
    *v = x;
    return 0;
}

/* An integer line ":[-]<digits>\r": what hiredis parses as a long long
 * (string2ll): "0", or digits without a leading zero after an optional
 * '-' ("-0" is refused), within INT64_MIN..INT64_MAX. Without the range
 * check a 19-digit value above INT64_MAX would reach a parser that
 * overflows (hiredis 0.14) or refuses it (later ones). */
static int resp_integer_ok(const char *line, size_t ll)
{
    static const char max_pos[] = "9223372036854775807", max_neg[] = "9223372036854775808";
    size_t k = 1, end = ll - 1;
    int neg = 0;
    if (k < end && line[k] == '-') {
        neg = 1;
        k++;
    }
    size_t nd = end - k;
    if (nd == 0 || nd > 19)
        return 0;
    if (line[k] == '0')
        return nd == 1 && !neg;
    for (size_t i = k; i < end; i++)
        if (line[i] < '0' || line[i] > '9')
            return 0;
    /* same length: the digits compare like the numbers */
    return nd < 19 || memcmp(line + k, neg ? max_neg : max_pos, 19) <= 0;
}

void sw_resp_scan_init(sw_resp_scan_state *s)
{
    memset(s, 0, sizeof *s);
    s->left[0] = 1;
}

static int scan_refuse(sw_resp_scan_state *s, const char *why)
{
    s->why = why;
    return -1;
}

int sw_resp_scan(sw_resp_scan_state *s, const char *buf, size_t len, const sw_resp_limits *lim,
                 size_t *frame, size_t *need, int64_t *bulk)
{
    for (;;) {
        size_t pos = s->pos;
        size_t from = pos + s->seen; /* the line's bytes searched before */
        const char *nl = from < len ? memchr(buf + from, '\n', len - from) : NULL;
        if (!nl) {
            s->seen = len - pos;
            if (len - pos > SW_RESP_MAX_LINE)
                return scan_refuse(s, "a line longer than 64 KiB");
            *need = len + 1;
            return *need > lim->max_frame ? scan_refuse(s, "a reply longer than allowed") : 0;
        }
        size_t ll = (size_t)(nl - (buf + pos));
        if (ll < 2 || ll > SW_RESP_MAX_LINE || buf[pos + ll - 1] != '\r')
            return scan_refuse(s, "a line without CRLF, empty or over 64 KiB");
        const char *line = buf + pos;
        size_t next = pos + ll + 1;
        if (next > lim->max_frame)
            return scan_refuse(s, "a reply longer than allowed");
        int64_t v = 0;
        switch (line[0]) {
        case '+':
        case '-':
            break;
        case ':':
            if (!resp_integer_ok(line, ll))
                return scan_refuse(s, "a malformed integer");
            break;
        case '$':
            if (resp_length(line, ll, &v))
                return scan_refuse(s, "a malformed bulk string length");
            if (v >= 0) {
                /* v + 2 more bytes must fit a size_t after next (32-bit) */
                if ((uint64_t)v > lim->max_bulk || (uint64_t)v > (uint64_t)(SIZE_MAX - 2 - next)) {
                    *bulk = v;
                    s->line_end = next;
                    return -2;
                }
                size_t end = next + (size_t)v + 2;
                if (end > lim->max_frame)
                    return scan_refuse(s, "a reply longer than allowed");
                if (end > len) {
                    s->seen = ll; /* the length line is whole: not searched again */
                    *need = end;
                    return 0;
                }
                if (buf[end - 2] != '\r' || buf[end - 1] != '\n')
                    return scan_refuse(s, "a bulk string without CRLF after its data");
                next = end;
            }
            break;
        case '*':
            if (lim->max_elems == 0)
                return scan_refuse(s, "an array where none was expected");
            if (resp_length(line, ll, &v))
                return scan_refuse(s, "a malformed array length");
            if (v > 0) {
                if ((uint64_t)v > lim->max_elems - s->elems)
                    return scan_refuse(s, "more array elements than allowed");
                if (s->depth == (int)SW_RESP_MAX_DEPTH)
                    return scan_refuse(s, "arrays nested too deep");
                s->elems += (uint64_t)v;
                s->left[++s->depth] = v;
                s->pos = next;
                s->seen = 0;
                continue; /* the array is done when its last element is */
            }
            break;
        default:
            return scan_refuse(s, "an unknown reply type");
        }
        s->pos = next;
        s->seen = 0;
        /* one item done: close every level it completes */
        while (--s->left[s->depth] == 0) {
            if (s->depth == 0) {
                *frame = s->pos;
                return 1;
            }
            s->depth--;
        }
    }
}

uint16_t sw_remote_crc16(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

uint32_t sw_remote_key_slot(const char *key, size_t len)
{
    /* Redis: the first '{' and the first '}' after it; an empty tag ("{}")
     * does not count and the whole key is hashed. */
    size_t s = 0;
    while (s < len && key[s] != '{')
        s++;
    if (s < len) {
        size_t e = s + 1;
        while (e < len && key[e] != '}')
            e++;
        if (e < len && e > s + 1)
            return sw_remote_crc16(key + s + 1, e - s - 1) & (SW_REMOTE_SLOTS - 1);
    }
    return sw_remote_crc16(key, len) & (SW_REMOTE_SLOTS - 1);
}

static int hist_bucket(uint64_t us)
{
    if (us < 8)
        return (int)us;
    int e = 63 - __builtin_clzll(us); /* >= 3 */
    int sub = (int)((us >> (e - 3)) & 7);
    int b = 8 + (e - 3) * 8 + sub;
    return b < SW_REMOTE_HIST_BUCKETS ? b : SW_REMOTE_HIST_BUCKETS - 1;
}

static uint64_t hist_upper(int b)
{
    if (b < 8)
        return (uint64_t)b;
    int e = (b - 8) / 8 + 3, sub = (b - 8) % 8;
    return ((uint64_t)(8 + sub + 1) << (e - 3)) - 1;
}

void sw_remote_hist_add(sw_remote_hist *h, uint64_t us)
{
    h->b[hist_bucket(us)]++;
    h->count++;
    if (us > h->max_us)
        h->max_us = us;
}

uint64_t sw_remote_hist_quantile(const sw_remote_hist *h, double q)
{
    if (!h->count)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->count + 0.999999);
    if (want < 1)
        want = 1;
    uint64_t seen = 0;
    for (int b = 0; b < SW_REMOTE_HIST_BUCKETS; b++) {
        seen += h->b[b];
        if (seen >= want) {
            uint64_t u = hist_upper(b);
            return u < h->max_us ? u : h->max_us;
        }
    }
    return h->max_us;
}
