/* smi_http.c — the small HTTP/1.x server behind `vram smi --listen`, enough for a Prometheus
 * scraper, curl or a browser: GET (or HEAD) /metrics answers the exposition text, / a short
 * page, anything else 404/405. One connection at a time, `Connection: close`.
 *
 * GPU metrics tell what runs on a machine, so the default is loopback only: an address that
 * resolves to anything outside 127.0.0.0/8 or ::1 is refused unless the caller passes
 * allow_remote. The loop waits in poll() with a timeout so a signal's stop flag is seen within
 * a second even when no scraper calls; a client gets 2 s to send its request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "smi_out.h"

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return 1;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
    }
    return 0;
}

/* Splits "host:port", "[v6]:port", ":port" or "port" (host defaults to 127.0.0.1). */
static int split_addr(const char *addr, char *host, size_t hcap, char *port, size_t pcap) {
    const char *colon;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':') return -1;
        snprintf(host, hcap, "%.*s", (int)(close - addr - 1), addr + 1);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon) {
            snprintf(host, hcap, "127.0.0.1");
            snprintf(port, pcap, "%s", addr);
            goto check_port;
        }
        if (memchr(addr, ':', (size_t)(colon - addr))) return -1; /* bare IPv6 needs brackets */
        snprintf(host, hcap, "%.*s", (int)(colon - addr), addr);
        if (!host[0]) snprintf(host, hcap, "127.0.0.1");
    }
    snprintf(port, pcap, "%s", colon + 1);
check_port:
    if (!port[0] || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 || atoi(port) > 65535) return -1;
    return 0;
}

static void send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, int code, const char *reason, const char *type, const char *body, size_t len, int head) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", code,
                     reason, type, len);
    send_all(fd, hdr, (size_t)n);
    if (!head && len) send_all(fd, body, len);
}

static void serve_one(int fd, smi_render_fn render, void *ctx) {
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char req[8192];
    size_t got = 0;
    while (got < sizeof req - 1) {
        ssize_t r = recv(fd, req + got, sizeof req - 1 - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n")) break;
    }
    req[got] = '\0';
    char method[16], target[1024];
    if (sscanf(req, "%15s %1023s", method, target) != 2) {
        static const char msg[] = "bad request\n";
        respond(fd, 400, "Bad Request", "text/plain; charset=utf-8", msg, sizeof msg - 1, 0);
        return;
    }
    int head = !strcmp(method, "HEAD");
    if (strcmp(method, "GET") && !head) {
        static const char msg[] = "only GET and HEAD\n";
        respond(fd, 405, "Method Not Allowed", "text/plain; charset=utf-8", msg, sizeof msg - 1, 0);
        return;
    }
    char *q = strchr(target, '?');
    if (q) *q = '\0';
    if (!strcmp(target, "/metrics")) {
        smi_buf body = {0};
        if (render(ctx, &body) != 0 || body.failed) {
            static const char msg[] = "reading the GPUs failed\n";
            respond(fd, 500, "Internal Server Error", "text/plain; charset=utf-8", msg, sizeof msg - 1, head);
        } else {
            respond(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body.data ? body.data : "", body.len, head);
        }
        smi_buf_free(&body);
    } else if (!strcmp(target, "/")) {
        static const char page[] = "<html><body><h1>vram smi</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n";
        respond(fd, 200, "OK", "text/html; charset=utf-8", page, sizeof page - 1, head);
    } else {
        static const char msg[] = "not found: try /metrics\n";
        respond(fd, 404, "Not Found", "text/plain; charset=utf-8", msg, sizeof msg - 1, head);
    }
}

/* Resolves a --listen address and, without allow_remote, insists on loopback. 0 with *out set
 * (the caller frees it), or 2 after printing why. */
static int listen_resolve(const char *addr, int allow_remote, struct addrinfo **out) {
    char host[256], port[16];
    if (split_addr(addr, host, sizeof host, port, sizeof port) != 0) {
        fprintf(stderr, "vram smi: bad --listen address '%s': expected ADDR:PORT such as 127.0.0.1:9400 or [::1]:9400\n", addr);
        return 2;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0 || !res) {
        fprintf(stderr, "vram smi: cannot resolve --listen address '%s': %s\n", addr, gai_strerror(gai));
        return 2;
    }
    if (!allow_remote) {
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            if (!is_loopback(ai->ai_addr)) {
                freeaddrinfo(res);
                fprintf(stderr, "vram smi: refusing to listen on %s: not a loopback address, so anyone who can reach "
                                "this machine could read its GPU metrics; use 127.0.0.1:%s, or add --allow-remote\n",
                        addr, port);
                return 2;
            }
        }
    }
    *out = res;
    return 0;
}

int smi_http_check(const char *addr, int allow_remote) {
    struct addrinfo *res = NULL;
    int rc = listen_resolve(addr, allow_remote, &res);
    if (res) freeaddrinfo(res);
    return rc;
}

int smi_http_serve(const char *addr, int allow_remote, smi_render_fn render, void *ctx, volatile sig_atomic_t *stop) {
    struct addrinfo *res = NULL;
    int bad_addr = listen_resolve(addr, allow_remote, &res);
    if (bad_addr) return bad_addr;
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "vram smi: cannot listen on %s: %s\n", addr, strerror(err));
        return 2;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char shown[INET6_ADDRSTRLEN] = "?";
    unsigned bound_port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, shown, sizeof shown);
            bound_port = ntohs(in->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, shown, sizeof shown);
            bound_port = ntohs(in6->sin6_port);
        }
    }
    fprintf(stderr, "vram smi: serving Prometheus metrics at http://%s%s%s:%u/metrics\n",
            ss.ss_family == AF_INET6 ? "[" : "", shown, ss.ss_family == AF_INET6 ? "]" : "", bound_port);
    fflush(stderr);
    int rc = 0;
    while (!*stop) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, 1000);
        if (pr < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "vram smi: poll: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        if (pr == 0) continue;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue; /* EINTR, a client that went away, EMFILE: try again */
        serve_one(c, render, ctx);
        close(c);
    }
    close(fd);
    return rc;
}
