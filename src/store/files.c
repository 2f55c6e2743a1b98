/* The store's files: OS errors as statuses, the owner and mode checks,
 * opening a file of the store directory by its fixed name, whole-file reads
 * and writes, and the crash-safe replacement of a file (temp file + fsync +
 * rename + directory fsync). */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

sw_status sw_store_errno(sw_store *s, int err, const char *what)
{
    (void)s;
    if (err == ENOSPC || err == EDQUOT)
        return sw_fail(SW_STATUS_FULL, "%s: the filesystem is full (%s, errno %d)", what,
                       strerror(err), err);
    return sw_fail(SW_STATUS_IO, "%s: %s (errno %d)", what, strerror(err), err);
}

sw_status sw_store_check_owned(int fd, const char *name, mode_t want_type)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return sw_fail(SW_STATUS_IO, "fstat(%s): %s (errno %d)", name, strerror(errno), errno);
    if ((st.st_mode & S_IFMT) != want_type)
        return sw_fail(SW_STATUS_INVALID, "store %s is not a %s", name,
                       want_type == S_IFDIR ? "directory" : "regular file");
    if (st.st_uid != geteuid())
        return sw_fail(SW_STATUS_INVALID, "store %s is owned by uid %u, not by this user (uid %u)",
                       name, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 077)
        return sw_fail(SW_STATUS_INVALID, "store %s has mode %04o; group/other access is refused "
                       "(want %s)", name, (unsigned)(st.st_mode & 07777),
                       want_type == S_IFDIR ? "0700" : "0600");
    return SW_OK;
}

/* Opens a store file by its fixed name inside the store directory. */
sw_status sw_store_open_file(sw_store *s, const char *name, int flags, int *fd_out)
{
    int fd = openat(s->dir_fd, name, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int e = errno;
        sw_status st = sw_store_errno(s, e, name);
        errno = e; /* the caller tells EINVAL (no O_DIRECT) apart */
        return st;
    }
    if (flags & O_CREAT)
        (void)fchmod(fd, 0600);
    sw_status st = sw_store_check_owned(fd, name, S_IFREG);
    if (st != SW_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return SW_OK;
}

sw_status sw_store_pwrite_all(int fd, const void *buf, size_t len, uint64_t off,
                              const char *what)
{
    const char *p = (const char *)buf;
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return sw_store_errno(NULL, errno, what);
        }
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return SW_OK;
}

sw_status sw_store_read_all(int fd, uint8_t **out, size_t *len, const char *what)
{
    struct stat st;
    *out = NULL;
    *len = 0;
    if (fstat(fd, &st) != 0)
        return sw_store_errno(NULL, errno, what);
    size_t n = (size_t)st.st_size;
    uint8_t *b = (uint8_t *)malloc(n ? n : 1);
    if (!b)
        return sw_fail(SW_STATUS_NO_MEMORY, "%s: %zu bytes", what, n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return sw_store_errno(NULL, errno, what);
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    *out = b;
    *len = got;
    return SW_OK;
}

/* Replaces `name` by a fully written, synced temporary file (crash safe). */
sw_status sw_store_replace_file(sw_store *s, const char *tmp, const char *name,
                                const void *buf, size_t len)
{
    (void)unlinkat(s->dir_fd, tmp, 0);
    int fd = -1;
    SW_TRY(sw_store_open_file(s, tmp, O_RDWR | O_CREAT | O_EXCL, &fd));
    sw_status st = sw_store_pwrite_all(fd, buf, len, 0, tmp);
    if (st == SW_OK && fsync(fd) != 0)
        st = sw_store_errno(s, errno, "fsync");
    close(fd);
    if (st == SW_OK && renameat(s->dir_fd, tmp, s->dir_fd, name) != 0)
        st = sw_store_errno(s, errno, "rename");
    if (st == SW_OK && fsync(s->dir_fd) != 0)
        st = sw_store_errno(s, errno, "fsync(store directory)");
    if (st != SW_OK)
        (void)unlinkat(s->dir_fd, tmp, 0);
    return st;
}
