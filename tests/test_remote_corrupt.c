/* Remote tier: values damaged in Redis are SW_STATUS_CORRUPT for that key
 * only (counted), never bytes: one byte flipped in the payload (SETRANGE)
 * and in the header, a value copied under another key, a truncated value,
 * a foreign value, a value of the wrong type; a value copied from another
 * tenant's key prefix over ours (COPY, and a raw SET of its bytes). */
#include "test_remote_util.h"

#if defined(SW_HAVE_HIREDIS)
/* A command on the server, its reply never NULL: a server that died is a
 * failure of the test, not a crash on the next line. */
static redisReply *cmd_checked(redisReply *r, int line)
{
    if (!r) {
        fprintf(stderr, "test_remote_corrupt.c:%d: no reply (the server went away?)\n", line);
        exit(1);
    }
    return r;
}
#define CMD(...) cmd_checked(tr_cmd(__VA_ARGS__), __LINE__)
#endif

int main(void)
{
    tr_init("remote_corrupt");
    tr_server srv;
    tr_start(&srv, 0, NULL);
    sw_remote_config c = tr_config(srv.port);
    sw_remote *r = NULL;
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (!r)
        return 1;
#if defined(SW_HAVE_HIREDIS)
    enum { N = 8, LEN = 4096 };
    sw_store_key keys[N];
    static uint8_t src[N][LEN], dst[N][LEN];
    const void *srcs[N];
    void *dsts[N];
    size_t lens[N];
    sw_status st[N];
    for (int i = 0; i < N; i++) {
        keys[i] = tr_key(1, 0, (uint32_t)i, 0, SW_STORE_KIND_K);
        tr_fill(&keys[i], 1, src[i], LEN);
        srcs[i] = src[i];
        dsts[i] = dst[i];
        lens[i] = LEN;
    }
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, NULL, st), SW_OK);
    char name[N][SW_REMOTE_MAX_KEY + 1];
    for (int i = 0; i < N; i++) {
        size_t n = sw_remote_key_name("sw:", 3, &keys[i], name[i]);
        name[i][n] = '\0';
    }
    redisReply *rep;
    /* 1: flip one payload byte in place */
    rep = CMD(srv.port, "GETRANGE %s 1000 1000", name[1]);
    CHECK(rep && rep->type == REDIS_REPLY_STRING && rep->len == 1);
    char flipped[2] = {(char)(rep->str[0] ^ 0x01), 0};
    freeReplyObject(rep);
    rep = CMD(srv.port, "SETRANGE %s 1000 %b", name[1], flipped, (size_t)1);
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER);
    freeReplyObject(rep);
    /* 2: flip a header byte (the layer field) */
    rep = CMD(srv.port, "SETRANGE %s 16 %b", name[2], "\x07", (size_t)1);
    freeReplyObject(rep);
    /* 3: the value of key 4 stored under key 3 (valid CRC, wrong key) */
    rep = CMD(srv.port, "COPY %s %s REPLACE", name[4], name[3]);
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
    freeReplyObject(rep);
    /* 5: truncated */
    rep = CMD(srv.port, "GETRANGE %s 0 2000", name[5]);
    CHECK(rep && rep->type == REDIS_REPLY_STRING);
    redisReply *rep2 = CMD(srv.port, "SET %s %b", name[5], rep->str, rep->len);
    freeReplyObject(rep);
    freeReplyObject(rep2);
    /* 6: something else's value */
    rep = CMD(srv.port, "SET %s hello", name[6]);
    freeReplyObject(rep);
    /* 7: a list: WRONGTYPE, an error for that key only */
    rep = CMD(srv.port, "DEL %s", name[7]);
    freeReplyObject(rep);
    rep = CMD(srv.port, "RPUSH %s x", name[7]);
    freeReplyObject(rep);

    memset(dst, 0x5a, sizeof dst);
    CHECK_STATUS(sw_remote_get_batch(r, N, keys, dsts, LEN, NULL, NULL, st), SW_STATUS_CORRUPT);
    CHECK(st[0] == SW_OK && !memcmp(dst[0], src[0], LEN));
    CHECK(st[4] == SW_OK && !memcmp(dst[4], src[4], LEN));
    for (int i = 1; i <= 6; i++) {
        if (i == 4)
            continue;
        CHECK(st[i] == SW_STATUS_CORRUPT);
        CHECK(dst[i][0] == 0x5a && dst[i][LEN - 1] == 0x5a);
    }
    CHECK(st[7] == SW_STATUS_IO);
    sw_remote_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    CHECK(s.corruptions == 5 && s.hits == 2 && s.errors == 1 && s.misses == 6);
    CHECK(s.misplaced == 1); /* key 3: intact, but key 4's */
    /* a version 1 value (an older build's) and a version byte flipped to
     * 3: CORRUPT, each with the version it has in the detail */
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, NULL, st), SW_OK);
    rep = CMD(srv.port, "SETRANGE %s 5 %b", name[0], "\x01", (size_t)1);
    freeReplyObject(rep);
    CHECK_STATUS(sw_remote_get_batch(r, 1, keys, dsts, LEN, NULL, NULL, st), SW_STATUS_CORRUPT);
    printf("version 1 value: %s\n", sw_last_error());
    CHECK(strstr(sw_last_error(), "older build") && strstr(sw_last_error(), "version 1"));
    rep = CMD(srv.port, "SETRANGE %s 5 %b", name[0], "\x03", (size_t)1);
    freeReplyObject(rep);
    CHECK_STATUS(sw_remote_get_batch(r, 1, keys, dsts, LEN, NULL, NULL, st), SW_STATUS_CORRUPT);
    printf("version byte 3: %s\n", sw_last_error());
    CHECK(strstr(sw_last_error(), "version 3") && strstr(sw_last_error(), "reads version 2"));
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    CHECK(s.corruptions == 7 && s.misplaced == 1);
    /* a rewrite heals the key */
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, NULL, st), SW_OK);
    CHECK_STATUS(sw_remote_get_batch(r, N, keys, dsts, LEN, NULL, NULL, st), SW_OK);
    for (int i = 0; i < N; i++)
        CHECK(!memcmp(dst[i], src[i], LEN));

    /* Tenants: handle t writes under the prefix "tA:"; the same key's value
     * is copied over the "sw:" name (COPY ... REPLACE) and, for a second
     * key, its bytes SET raw. Only the prefix differs from what r asks
     * for: CORRUPT with a detail naming the prefix, counted as misplaced,
     * dst untouched; r's own writes still read. */
    sw_remote_config ct = tr_config(srv.port);
    ct.prefix = "tA:";
    sw_remote *t = NULL;
    CHECK_STATUS(sw_remote_open(&ct, &t), SW_OK);
    if (!t)
        return 1;
    static uint8_t other[2][LEN];
    const void *os[2] = {other[0], other[1]};
    for (int j = 0; j < 2; j++)
        tr_fill(&keys[j], 77, other[j], LEN);
    CHECK_STATUS(sw_remote_put_batch(t, 2, keys, os, lens, NULL, st), SW_OK);
    char tname[2][SW_REMOTE_MAX_KEY + 1];
    for (int j = 0; j < 2; j++) {
        size_t n = sw_remote_key_name("tA:", 3, &keys[j], tname[j]);
        tname[j][n] = '\0';
    }
    rep = CMD(srv.port, "COPY %s %s REPLACE", tname[0], name[0]);
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
    freeReplyObject(rep);
    rep = CMD(srv.port, "GET %s", tname[1]);
    CHECK(rep && rep->type == REDIS_REPLY_STRING && rep->len == SW_REMOTE_HDR_BYTES + LEN);
    rep2 = CMD(srv.port, "SET %s %b", name[1], rep->str, rep->len);
    CHECK(rep2 && rep2->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    freeReplyObject(rep2);
    sw_remote_stats s0 = s;
    CHECK_STATUS(sw_remote_get_stats(r, &s0), SW_OK);
    memset(dst, 0x5a, sizeof dst);
    CHECK_STATUS(sw_remote_get_batch(r, 1, keys, dsts, LEN, NULL, NULL, st), SW_STATUS_CORRUPT);
    printf("cross-prefix COPY: %s: %s\n", sw_status_str(st[0]), sw_last_error());
    CHECK(strstr(sw_last_error(), "another key prefix") != NULL);
    CHECK_STATUS(sw_remote_get_batch(r, N, keys, dsts, LEN, NULL, NULL, st), SW_STATUS_CORRUPT);
    CHECK(st[0] == SW_STATUS_CORRUPT && st[1] == SW_STATUS_CORRUPT);
    CHECK(dst[0][0] == 0x5a && dst[1][0] == 0x5a && dst[1][LEN - 1] == 0x5a);
    for (int i = 2; i < N; i++)
        CHECK(st[i] == SW_OK && !memcmp(dst[i], src[i], LEN));
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    CHECK(s.corruptions == s0.corruptions + 3 && s.misplaced == s0.misplaced + 3);
    /* the legitimate reads: tA's values through tA, ours after a rewrite */
    CHECK_STATUS(sw_remote_get_batch(t, 2, keys, dsts, LEN, NULL, NULL, st), SW_OK);
    CHECK(!memcmp(dst[0], other[0], LEN) && !memcmp(dst[1], other[1], LEN));
    CHECK_STATUS(sw_remote_put_batch(r, 2, keys, srcs, lens, NULL, st), SW_OK);
    CHECK_STATUS(sw_remote_get_batch(r, 2, keys, dsts, LEN, NULL, NULL, st), SW_OK);
    CHECK(!memcmp(dst[0], src[0], LEN) && !memcmp(dst[1], src[1], LEN));
    sw_remote_close(t);
#endif
    sw_remote_close(r);
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_corrupt: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_corrupt: ok\n");
    return 0;
}
