/* Remote tier AUTH: a server with requirepass refuses a handle without a
 * password or with a wrong one (SW_STATUS_INVALID, the server's message in
 * sw_last_error), accepts the right one; an ACL user with its password
 * works, a wrong password or unknown user is refused. */
#include "test_remote_util.h"

int main(void)
{
    tr_init("remote_auth");
    tr_server srv;
    const char *extra[] = {"--requirepass", "s3cret", NULL};
    tr_start(&srv, 0, extra);
#if defined(SW_HAVE_HIREDIS)
    tr_admin_pass = "s3cret";
#endif
    sw_remote *r = NULL;

    sw_remote_config c = tr_config(srv.port);
    CHECK_STATUS(sw_remote_open(&c, &r), SW_STATUS_INVALID);
    printf("no password: %s\n", sw_last_error());
    CHECK(strstr(sw_last_error(), "NOAUTH") != NULL);
    CHECK(r == NULL);

    c = tr_config(srv.port);
    c.password = "wrong";
    CHECK_STATUS(sw_remote_open(&c, &r), SW_STATUS_INVALID);
    printf("wrong password: %s\n", sw_last_error());
    CHECK(strstr(sw_last_error(), "WRONGPASS") || strstr(sw_last_error(), "invalid"));

    c = tr_config(srv.port);
    c.password = "s3cret";
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    sw_store_key k = tr_key(1, 2, 3, 4, SW_STORE_KIND_K);
    uint8_t v[64], got[64];
    tr_fill(&k, 1, v, sizeof v);
    const void *s[1] = {v};
    void *d[1] = {got};
    size_t len = sizeof v;
    sw_status st;
    if (r) {
        CHECK_STATUS(sw_remote_put_batch(r, 1, &k, s, &len, NULL, &st), SW_OK);
        CHECK_STATUS(sw_remote_get_batch(r, 1, &k, d, sizeof got, NULL, NULL, &st), SW_OK);
        CHECK(!memcmp(got, v, sizeof v));
        sw_remote_close(r);
        r = NULL;
    }

#if defined(SW_HAVE_HIREDIS)
    /* ACL user allowed on sw:* keys only */
    redisReply *rep = tr_cmd(srv.port, "ACL SETUSER alice on >alicepw ~sw:* +@all");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    if (rep)
        freeReplyObject(rep);
#endif
    c = tr_config(srv.port);
    c.user = "alice";
    c.password = "alicepw";
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (r) {
        memset(got, 0, sizeof got);
        CHECK_STATUS(sw_remote_get_batch(r, 1, &k, d, sizeof got, NULL, NULL, &st), SW_OK);
        CHECK(!memcmp(got, v, sizeof v));
        sw_remote_close(r);
        r = NULL;
    }
    c.password = "bobpw";
    CHECK_STATUS(sw_remote_open(&c, &r), SW_STATUS_INVALID);
    printf("alice, wrong password: %s\n", sw_last_error());
    c.user = "mallory";
    c.password = "alicepw";
    CHECK_STATUS(sw_remote_open(&c, &r), SW_STATUS_INVALID);
    c.user = "alice";
    c.password = NULL;
    CHECK_STATUS(sw_remote_open(&c, &r), SW_STATUS_INVALID); /* user without password */
    /* alice may not touch keys outside sw:*: an error per key, not a crash */
    c = tr_config(srv.port);
    c.user = "alice";
    c.password = "alicepw";
    c.prefix = "other:";
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (r) {
        CHECK_STATUS(sw_remote_get_batch(r, 1, &k, d, sizeof got, NULL, NULL, &st),
                     SW_STATUS_IO);
        printf("no key permission: %s\n", sw_last_error());
        sw_remote_close(r);
    }
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_auth: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_auth: ok\n");
    return 0;
}
