/* comm_store.c — the TCP rendezvous of torchrun-style launches: how NCCL's unique id reaches
 * every rank when no MPI started them (comm_internal.h).
 *
 * Rank 0 listens on MASTER_PORT; every other rank connects to MASTER_ADDR:MASTER_PORT (retrying
 * while rank 0 is not listening yet), sends its rank and the world size it was told, and reads
 * the blob back. Rank 0 sends the blob only once all WORLD_SIZE - 1 others have checked in, so
 * the rendezvous is also a barrier. A rank that says another world size, a rank number given
 * twice, and a rank that does not come within the timeout are errors that name it. It carries
 * this one blob and nothing else: tensors go through NCCL.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"

/* Reads or writes exactly n bytes before the deadline: 0, or -1 (timeout, error or end). */
static int io_all(int fd, void *buf, size_t n, int writing, double deadline) {
    char *p = buf;
    while (n) {
        int left_ms = (int)((deadline - vram_comm_now()) * 1e3);
        if (left_ms <= 0) return -1;
        struct pollfd pf = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
        int r = poll(&pf, 1, left_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static vram_status serve(const vram_launch *l, void *blob, size_t n, double deadline, double timeout_s) {
    int fd = socket(AF_INET6, SOCK_STREAM, 0), v6 = fd >= 0;
    if (fd < 0) fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return vram_error(VRAM_ERR_IO, "rendezvous: socket: %s", strerror(errno));
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (v6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); /* IPv4 clients too */
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons((uint16_t)l->port);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)l->port);
        len = sizeof *a;
    }
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 128) != 0) {
        vram_status s = vram_error(VRAM_ERR_IO, "rendezvous: rank 0 cannot listen on MASTER_PORT=%d: %s", l->port,
                                   strerror(errno));
        close(fd);
        return s;
    }
    int want = l->size - 1, got = 0;
    int *peers = calloc((size_t)(want > 0 ? want : 1), sizeof *peers);
    char *seen = calloc((size_t)l->size, 1);
    vram_status s = peers && seen ? VRAM_OK : vram_error(VRAM_ERR_HOST_MEMORY, "rendezvous: out of host memory");
    while (s == VRAM_OK && got < want) {
        int left_ms = (int)((deadline - vram_comm_now()) * 1e3);
        struct pollfd pf = {fd, POLLIN, 0};
        int r = left_ms > 0 ? poll(&pf, 1, left_ms) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s = vram_error(VRAM_ERR_IO, "rendezvous: %d of %d ranks reached rank 0 (port %d) within %g s; a rank did not "
                                        "start or has a wrong MASTER_ADDR/MASTER_PORT",
                           got + 1, l->size, l->port, timeout_s);
            break;
        }
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        int32_t hello[2];
        if (io_all(c, hello, sizeof hello, 0, deadline)) {
            close(c); /* (not one of ours, or gone) */
            continue;
        }
        if (hello[1] != l->size || hello[0] <= 0 || hello[0] >= l->size || seen[hello[0]]) {
            s = vram_error(VRAM_ERR_INVALID_ARG, "rendezvous: a rank said RANK=%d WORLD_SIZE=%d where rank 0 has "
                                                 "WORLD_SIZE=%d%s",
                           hello[0], hello[1], l->size,
                           hello[0] > 0 && hello[0] < l->size && seen[hello[0]] ? " (that rank came twice)" : "");
            close(c);
            break;
        }
        seen[hello[0]] = 1;
        peers[got++] = c;
    }
    for (int i = 0; i < got; i++) {
        if (s == VRAM_OK && io_all(peers[i], blob, n, 1, deadline))
            s = vram_error(VRAM_ERR_IO, "rendezvous: a rank went away before it got NCCL's id");
        close(peers[i]);
    }
    free(peers);
    free(seen);
    close(fd);
    return s;
}

static vram_status join(const vram_launch *l, void *blob, size_t n, double deadline, double timeout_s) {
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo(l->addr, port, &hints, &res);
    if (e) return vram_error(VRAM_ERR_INVALID_ARG, "rendezvous: MASTER_ADDR='%s': %s", l->addr, gai_strerror(e));
    vram_status s = VRAM_ERR_IO;
    while (vram_comm_now() < deadline) { /* rank 0 may not be listening yet */
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd < 0) continue;
            if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                int32_t hello[2] = {l->rank, l->size};
                s = io_all(fd, hello, sizeof hello, 1, deadline) || io_all(fd, blob, n, 0, deadline)
                        ? vram_error(VRAM_ERR_IO, "rendezvous: rank %d reached %s:%d but got no NCCL id within %g s "
                                                  "(rank 0 waits for all WORLD_SIZE=%d ranks)",
                                     l->rank, l->addr, l->port, timeout_s, l->size)
                        : VRAM_OK;
                close(fd);
                freeaddrinfo(res);
                return s;
            }
            close(fd);
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(res);
    return vram_error(VRAM_ERR_IO, "rendezvous: rank %d could not reach rank 0 at %s:%d within %g s", l->rank, l->addr,
                      l->port, timeout_s);
}

vram_status vram_store_broadcast(const vram_launch *l, void *blob, size_t n, double timeout_s) {
    double deadline = vram_comm_now() + timeout_s;
    return l->rank == 0 ? serve(l, blob, n, deadline, timeout_s) : join(l, blob, n, deadline, timeout_s);
}
