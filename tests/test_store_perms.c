/* Block store permissions: the directory is created 0700 and the files
 * 0600; a directory open to group/other, owned by another user (chown as
 * root; skipped otherwise) or reached through a symlink is refused, and so
 * is a store file with group/other access or another owner. */
#include "test_store_util.h"

#include <sys/stat.h>

static unsigned mode_of(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0xffff;
}

int main(void)
{
    ts_dir d;
    ts_dir_make(&d, "perms");
    mode_t old = umask(0); /* the store must not rely on the caller's umask */
    sw_store_config c = ts_config(d.store, 4096, 4, 2);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    umask(old);
    sw_store_key k = ts_key(1, 1, 1, 1, 0);
    CHECK_STATUS(sw_store_write(s, &k, "abc", 3, NULL), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    char p[700];
    CHECK(mode_of(d.store) == 0700);
    const char *files[] = {"superblock", "data", "journal"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", d.store, files[i]);
        if (mode_of(p) != 0600)
            fprintf(stderr, "%s has mode %o\n", files[i], mode_of(p));
        CHECK(mode_of(p) == 0600);
    }
    /* Directory open to others. */
    CHECK(chmod(d.store, 0750) == 0);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "mode") != NULL);
    CHECK(chmod(d.store, 0700) == 0);
    /* A store file open to others. */
    snprintf(p, sizeof p, "%s/journal", d.store);
    CHECK(chmod(p, 0644) == 0);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "journal") != NULL && strstr(sw_last_error(), "0644") != NULL);
    CHECK(chmod(p, 0600) == 0);
    /* Through a symlink. */
    char link[700];
    snprintf(link, sizeof link, "%s/link", d.base);
    CHECK(symlink(d.store, link) == 0);
    sw_store_config cl = c;
    cl.dir = link;
    CHECK_STATUS(sw_store_open(&cl, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "symlink") != NULL);
    /* The store still opens as it is. */
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    int rc = 0;
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP (partly): not root, cannot chown to another uid\n");
        rc = SW_TEST_SKIP;
    } else {
        CHECK(chown(d.store, 12345, 12345) == 0);
        CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "owned by uid 12345") != NULL);
        CHECK(chown(d.store, 0, 0) == 0);
        snprintf(p, sizeof p, "%s/data", d.store);
        CHECK(chown(p, 12345, 12345) == 0);
        CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "data is owned by uid 12345") != NULL);
        CHECK(chown(p, 0, 0) == 0);
        CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    ts_rm_rf(d.base);
    if (sw_test_failures) {
        fprintf(stderr, "test_store_perms: %d failures\n", sw_test_failures);
        return 1;
    }
    return rc;
}
