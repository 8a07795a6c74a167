/* file_open.c — opening a named input without blocking on it (file_open.h).
 *
 * O_NONBLOCK makes open() of a FIFO return at once, writer or not; fstat then says what the
 * name is. A stream that is allowed is given a bounded wait for its first byte with poll(),
 * since a FIFO nobody writes to reads as neither data nor end; after that the descriptor is
 * made blocking again, so the caller reads it as any file.
 */
#include "file_open.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "is a FIFO, not a regular file";
    if (S_ISSOCK(m)) return "is a socket, not a regular file";
    if (S_ISCHR(m)) return "is a character device, not a regular file";
    if (S_ISBLK(m)) return "is a block device, not a regular file";
    if (S_ISDIR(m)) return "is a directory";
    return "is not a regular file";
}

int vram_file_open_read(const char *path, int streams_ok, const char **why) {
    *why = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int stream = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
    if (!S_ISREG(st.st_mode) && !(streams_ok && (stream || S_ISCHR(st.st_mode)))) {
        *why = kind_of(st.st_mode);
        close(fd);
        return -1;
    }
    if (stream) {
        struct pollfd p = {fd, POLLIN, 0};
        int r;
        do r = poll(&p, 1, VRAM_STREAM_FIRST_BYTE_MS);
        while (r < 0 && errno == EINTR);
        if (r <= 0) {
            *why = S_ISFIFO(st.st_mode) ? "is a FIFO that nothing was written to in 10 s"
                                        : "is a socket that sent nothing in 10 s";
            close(fd);
            return -1;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}
