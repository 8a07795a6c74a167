/* smi_http.c — the small HTTP/1.x server behind `vram smi --listen`, enough for a Prometheus
 * scraper, curl or a browser: GET (or HEAD) /metrics answers the exposition text, / a short
 * page, anything else 404/405. `Connection: close`: one request a connection.
 *
 * GPU metrics tell what runs on a machine, so the default is loopback only: an address that
 * resolves to anything outside 127.0.0.0/8 or ::1 is refused unless the caller passes
 * allow_remote.
 *
 * One thread, one poll() over the listening socket and up to HTTP_MAX_CONNS clients, each a
 * slot holding what it has sent so far and the response still to send. A client has one
 * deadline for its whole exchange (HTTP_DEADLINE_MS from its accept), however it trickles its
 * bytes, and HTTP_MAX_REQUEST bytes for its request; at the cap of connections the one that has
 * waited longest without a full request is closed for the newcomer, so idle or slow clients can
 * never keep a scraper out. When the process runs out of file descriptors, a spare descriptor
 * held for that moment is given up to accept the waiting client and close it, and accepting
 * pauses HTTP_ACCEPT_PAUSE_MS, so the loop never spins. poll() wakes at least every
 * HTTP_TICK_MS and on any signal, so a stop is prompt whatever the clients do.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
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

#define HTTP_MAX_CONNS 512       /* clients served at once */
#define HTTP_MAX_REQUEST 8192     /* bytes of request line and headers */
#define HTTP_DEADLINE_MS 5000     /* from accept to the last byte of the response */
#define HTTP_ACCEPT_PAUSE_MS 100  /* after running out of file descriptors */
#define HTTP_TICK_MS 250          /* the longest poll() wait: how soon a stop flag is seen */

typedef struct http_conn {
    int fd;              /* -1: a free slot */
    int64_t deadline;    /* monotonic ms */
    size_t got;          /* request bytes so far (in req) */
    char *req;           /* HTTP_MAX_REQUEST bytes */
    smi_buf out;         /* the response, once the request is complete */
    size_t sent;
} http_conn;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void respond(http_conn *c, int code, const char *reason, const char *type, const char *body, size_t len,
                    int head) {
    smi_buf_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                   code, reason, type, len);
    if (!head && len) smi_buf_put(&c->out, body, len);
}

static void respond_text(http_conn *c, int code, const char *reason, const char *msg, int head) {
    respond(c, code, reason, "text/plain; charset=utf-8", msg, strlen(msg), head);
}

/* One reading of the GPUs, shared by the /metrics requests that complete in the same turn of
 * the loop (the same instant, as far as a scraper can tell): under many clients the server
 * then reads NVML once a turn, not once a request. */
typedef struct http_metrics {
    smi_render_fn render;
    void *ctx;
    int state; /* 0: not read this turn, 1: body holds it, -1: the reading failed */
    smi_buf body;
} http_metrics;

/* Builds the response to the complete request in c->req (NUL-terminated). */
static void answer(http_conn *c, http_metrics *m) {
    char method[16], target[1024];
    if (sscanf(c->req, "%15s %1023s", method, target) != 2) {
        respond_text(c, 400, "Bad Request", "bad request\n", 0);
        return;
    }
    int head = !strcmp(method, "HEAD");
    if (strcmp(method, "GET") && !head) {
        respond_text(c, 405, "Method Not Allowed", "only GET and HEAD\n", 0);
        return;
    }
    char *q = strchr(target, '?');
    if (q) *q = '\0';
    if (!strcmp(target, "/metrics")) {
        if (!m->state) m->state = m->render(m->ctx, &m->body) != 0 || m->body.failed ? -1 : 1;
        if (m->state < 0)
            respond_text(c, 500, "Internal Server Error", "reading the GPUs failed\n", head);
        else
            respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", m->body.data ? m->body.data : "",
                    m->body.len, head);
    } else if (!strcmp(target, "/")) {
        static const char page[] = "<html><body><h1>vram smi</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n";
        respond(c, 200, "OK", "text/html; charset=utf-8", page, sizeof page - 1, head);
    } else {
        respond_text(c, 404, "Not Found", "not found: try /metrics\n", head);
    }
}

static void conn_close(http_conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->req);
    c->req = NULL;
    smi_buf_free(&c->out);
    memset(&c->out, 0, sizeof c->out);
    c->got = c->sent = 0;
}

/* Reads what the client sent; once the request is whole (or too long) builds the response. */
static void conn_read(http_conn *c, http_metrics *m) {
    for (;;) {
        ssize_t r = recv(c->fd, c->req + c->got, HTTP_MAX_REQUEST - 1 - c->got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r <= 0) { /* gone, or closed its side before a whole request: nothing to answer */
            conn_close(c);
            return;
        }
        c->got += (size_t)r;
        c->req[c->got] = '\0';
        if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) break;
        if (c->got == HTTP_MAX_REQUEST - 1) {
            respond_text(c, 431, "Request Header Fields Too Large", "request too large\n", 0);
            break;
        }
    }
    if (!c->out.len) answer(c, m);
    if (c->out.failed) conn_close(c); /* no host memory for the response: the client sees the close */
}

/* Sends what the socket takes; closes the connection when the response is out. */
static void conn_write(http_conn *c) {
    while (c->sent < c->out.len) {
        ssize_t w = send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (w <= 0) break;
        c->sent += (size_t)w;
    }
    conn_close(c);
}

/* A free slot, or at the cap the slot of the client that has waited longest for its request
 * to arrive (closed for the newcomer); NULL if every client is being answered. */
static http_conn *conn_slot(http_conn *conns) {
    http_conn *oldest = NULL;
    for (int i = 0; i < HTTP_MAX_CONNS; i++) {
        if (conns[i].fd < 0) return &conns[i];
        if (!conns[i].out.len && (!oldest || conns[i].deadline < oldest->deadline)) oldest = &conns[i];
    }
    if (oldest) conn_close(oldest);
    return oldest;
}

/* Accepts the waiting clients. Out of descriptors: the spare one is closed to accept a client
 * and close it at once (it sees the connection end rather than hang in the backlog), then
 * reopened; either way accepting pauses a moment (*pause_until). */
static void accept_clients(int lfd, http_conn *conns, int *spare, int64_t *pause_until) {
    for (int n = 0; n < 64; n++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (*spare >= 0) {
                    close(*spare);
                    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                    if (c >= 0) close(c);
                    *spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
                }
                *pause_until = now_ms() + HTTP_ACCEPT_PAUSE_MS;
            }
            return; /* EAGAIN: no more waiting; EINTR, ECONNABORTED: the next poll() tells */
        }
        http_conn *c = conn_slot(conns);
        char *req = c ? malloc(HTTP_MAX_REQUEST) : NULL;
        if (!req) { /* every slot is sending, or no host memory: this client is refused */
            close(fd);
            *pause_until = now_ms() + HTTP_ACCEPT_PAUSE_MS;
            return;
        }
        c->fd = fd;
        c->req = req;
        c->got = c->sent = 0;
        c->deadline = now_ms() + HTTP_DEADLINE_MS;
    }
}

/* The loop: poll, accept, read, answer, write, expire, until *stop. 0, or 1 if poll() fails. */
static int serve_loop(int lfd, smi_render_fn render, void *ctx, volatile sig_atomic_t *stop) {
    http_conn *conns = calloc(HTTP_MAX_CONNS, sizeof *conns);
    struct pollfd *pfd = calloc(HTTP_MAX_CONNS + 1, sizeof *pfd);
    int *slot_of = calloc(HTTP_MAX_CONNS + 1, sizeof *slot_of);
    if (!conns || !pfd || !slot_of) {
        free(conns);
        free(pfd);
        free(slot_of);
        fprintf(stderr, "vram smi: host out of memory for %d connections\n", HTTP_MAX_CONNS);
        return 1;
    }
    for (int i = 0; i < HTTP_MAX_CONNS; i++) conns[i].fd = -1;
    int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int64_t pause_until = 0;
    http_metrics metrics = {render, ctx, 0, {0}};
    int rc = 0;
    while (!*stop) {
        int64_t now = now_ms(), wait = HTTP_TICK_MS;
        nfds_t n = 0;
        if (now >= pause_until) pfd[n++] = (struct pollfd){lfd, POLLIN, 0};
        else if (pause_until - now < wait) wait = pause_until - now;
        for (int i = 0; i < HTTP_MAX_CONNS; i++) {
            if (conns[i].fd < 0) continue;
            if (conns[i].deadline <= now) { /* its time is up, however far it got */
                conn_close(&conns[i]);
                continue;
            }
            if (conns[i].deadline - now < wait) wait = conns[i].deadline - now;
            slot_of[n] = i;
            pfd[n++] = (struct pollfd){conns[i].fd, conns[i].out.len ? POLLOUT : POLLIN, 0};
        }
        int pr = poll(pfd, n, (int)wait);
        if (pr < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "vram smi: poll: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        metrics.state = 0; /* a new turn reads the GPUs again */
        smi_buf_free(&metrics.body);
        memset(&metrics.body, 0, sizeof metrics.body);
        for (nfds_t k = 0; k < n && pr > 0; k++) {
            if (!pfd[k].revents) continue;
            if (pfd[k].fd == lfd) {
                accept_clients(lfd, conns, &spare, &pause_until);
                continue;
            }
            http_conn *c = &conns[slot_of[k]];
            if (c->fd != pfd[k].fd) continue; /* closed meanwhile, for a newcomer */
            if (c->out.len) conn_write(c);
            else if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) conn_read(c, &metrics);
            if (c->fd >= 0 && c->out.len && !c->sent) conn_write(c); /* most responses go at once */
        }
    }
    for (int i = 0; i < HTTP_MAX_CONNS; i++) conn_close(&conns[i]);
    if (spare >= 0) close(spare);
    smi_buf_free(&metrics.body);
    free(conns);
    free(pfd);
    free(slot_of);
    return rc;
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
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
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
    int rc = serve_loop(fd, render, ctx, stop);
    close(fd);
    return rc;
}
