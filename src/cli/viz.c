/* viz.c — `vram viz`: one self-contained HTML page (no network) that draws the memory of one
 * or more inputs: memtraces, replayed through vram's allocator here, snapshot JSON files
 * (`vram replay --snapshot`, vram_torch.snapshot(), or PyTorch's pickle converted by
 * `python -m vram_torch viz`), and the categories JSON of `python -m vram_torch run
 * --categories`. Optionally a PNG of the page, taken by headless Chromium.
 *
 * Each input becomes a viz_model (viz_model.h); viz_html.c writes the page. The page is written
 * to a temporary file beside the output and renamed over it only when complete, so a failure
 * leaves no half-written page. Exit status: 0 written; 1 the replay ran out of memory or the
 * page or picture could not be written; 2 bad input or usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "viz_model.h"

#define VIZ_MAX_INPUTS 8

static void usage(FILE *f) {
    fprintf(f,
            "usage: vram viz [options] INPUT... -o OUT.html\n"
            "\n"
            "Draws GPU memory over time as one self-contained HTML page: allocated and reserved\n"
            "memory by category, stream or stack frame, the allocator's segments at any moment,\n"
            "every allocation reachable by zooming. Two inputs or more are drawn side by side\n"
            "and compared. INPUT is a memtrace (plain, .gz, or - for stdin; replayed through the\n"
            "allocator here), a snapshot JSON (vram replay --snapshot, vram_torch.snapshot()) or\n"
            "the categories JSON of python -m vram_torch run --categories (a moment per phase).\n"
            "PyTorch's _dump_snapshot pickle: python -m vram_torch viz FILE.pickle -o OUT.html.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE  the page to write (required)\n"
            "  --png FILE         also a picture of the page (headless Chromium; $VRAM_CHROMIUM\n"
            "                     names the browser, else chromium on PATH)\n"
            "  --title TEXT       the page's title (default: the inputs' names)\n"
            "  --device SPEC      device a memtrace is replayed on (default sim)\n"
            "  --capacity SIZE    its capacity (default 80GiB)\n"
            "  --conf STRING      VRAM_ALLOC_CONF options for the replay\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 written, 1 the replay ran out of memory or the output could not be\n"
            "written, 2 bad input or usage\n");
}

/* Reads a whole file (not "-"); *len its size. NULL with the error set. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        vram_error(VRAM_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *more = realloc(buf, cap * 2);
        if (!more) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = more;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        vram_error(bad ? VRAM_ERR_IO : VRAM_ERR_HOST_MEMORY, "%s: %s", path, bad ? "read error" : "host out of memory");
        return NULL;
    }
    *len = n;
    return buf;
}

/* Loads one input into m, telling its kind by its first bytes (only a JSON is read whole here:
 * a trace is read by the trace loader, gzip and all). */
static vram_status load_input(const char *path, const viz_trace_options *o, viz_model *m) {
    const char *slash = strrchr(path, '/');
    if (!(m->name = strdup(slash ? slash + 1 : path))) return vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
    if (!strcmp(path, "-")) return viz_model_from_trace(path, o, m);
    FILE *f = fopen(path, "rb");
    if (!f) return vram_error(VRAM_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char head[4096];
    size_t len = fread(head, 1, sizeof head, f), i = 0;
    int bad = ferror(f);
    fclose(f);
    if (bad) return vram_error(VRAM_ERR_IO, "%s: read error", path);
    while (i < len && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) i++;
    if (len == 0) return vram_error(VRAM_ERR_PARSE, "%s is empty: nothing to draw", path);
    if ((len >= 2 && head[0] == 0x1f && head[1] == 0x8b) || (i < len && head[i] == '#')) return viz_model_from_trace(path, o, m);
    if (head[0] == 0x80)
        return vram_error(VRAM_ERR_PARSE, "%s is a Python pickle (PyTorch's _dump_snapshot?): draw it with "
                          "'python -m vram_torch viz %s -o OUT.html'", path, path);
    if (i == len || (head[i] != '{' && head[i] != '['))
        return vram_error(VRAM_ERR_PARSE, "%s is neither a memtrace ('# memtrace v1', docs/trace_format.md) nor a "
                          "snapshot JSON ('{...}', docs/summary_and_snapshot.md)", path);
    size_t size = 0;
    char *text = read_file(path, &size);
    if (!text) return VRAM_ERR_IO;
    vram_status st = viz_is_categories(text, size) ? viz_model_from_categories(path, text, size, m)
                                                   : viz_model_from_snapshot(path, text, size, m);
    free(text);
    return st;
}

/* Writes the page to a temporary file beside `out`, then renames it over `out`. */
static vram_status write_page(viz_model *const *models, size_t n, const char *title, const char *out) {
    size_t len = strlen(out) + 16;
    char *tmp = malloc(len);
    if (!tmp) return vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
    snprintf(tmp, len, "%s.tmp.XXXXXX", out);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        vram_status st = vram_error(VRAM_ERR_IO, "%s: %s", out, strerror(errno));
        free(tmp);
        return st;
    }
    mode_t mask = umask(0); /* the page gets the mode a new file would (mkstemp makes it 0600) */
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) { /* (not fatal: the page is still written) */ }
    FILE *f = fdopen(fd, "wb");
    vram_status st = f ? viz_html_write(models, n, title, f) : vram_error(VRAM_ERR_IO, "%s: %s", out, strerror(errno));
    if (f) {
        errno = 0;
        int bad = fflush(f) != 0 || ferror(f);
        if (fclose(f) != 0) bad = 1;
        if (bad && st == VRAM_OK) st = vram_error(VRAM_ERR_IO, "writing %s failed: %s", out, errno ? strerror(errno) : "write error");
    } else close(fd);
    if (st == VRAM_OK && rename(tmp, out) != 0) st = vram_error(VRAM_ERR_IO, "%s: %s", out, strerror(errno));
    if (st != VRAM_OK) unlink(tmp);
    free(tmp);
    return st;
}

/* The browser for --png: $VRAM_CHROMIUM, else the first of the usual names on PATH. */
static const char *find_browser(void) {
    const char *env = getenv("VRAM_CHROMIUM");
    if (env && *env) return env;
    static const char *names[] = {"chromium", "chromium-browser", "google-chrome", "chrome-headless-shell"};
    const char *path = getenv("PATH");
    static char found[PATH_MAX];
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        for (const char *p = path ? path : ""; *p;) {
            size_t n = strcspn(p, ":");
            snprintf(found, sizeof found, "%.*s/%s", (int)n, p, names[k]);
            if (n && access(found, X_OK) == 0) return found;
            p += n + (p[n] == ':');
        }
    }
    return NULL;
}

/* Takes a picture of the page `html` into `png` with headless Chromium. */
static vram_status take_png(const char *html, const char *png) {
    const char *browser = find_browser();
    if (!browser) return vram_error(VRAM_ERR_UNSUPPORTED, "--png needs Chromium: none found (install chromium, or set VRAM_CHROMIUM)");
    char abs[PATH_MAX], url[3 * PATH_MAX + 16], shot[PATH_MAX + 16];
    if (!realpath(html, abs)) return vram_error(VRAM_ERR_IO, "%s: %s", html, strerror(errno));
    size_t u = (size_t)snprintf(url, sizeof url, "file://");
    for (const unsigned char *c = (const unsigned char *)abs; *c; c++) { /* percent-encode all but the plain */
        unsigned lower = (unsigned)(*c | 32) - 'a', digit = (unsigned)*c - '0';
        int plain = strchr("/._-~", *c) || lower < 26u || digit < 10u;
        u += (size_t)snprintf(url + u, sizeof url - u, plain ? "%c" : "%%%02X", *c);
    }
    snprintf(shot, sizeof shot, "--screenshot=%s", png);
    unlink(png);
    pid_t pid = fork();
    if (pid < 0) return vram_error(VRAM_ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        FILE *null = freopen("/dev/null", "w", stdout);
        if (null) null = freopen("/dev/null", "w", stderr);
        (void)null;
        execl(browser, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
              "--window-size=1400,1100", "--virtual-time-budget=20000", shot, url, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (access(png, R_OK) != 0)
        return vram_error(VRAM_ERR_IO, "%s made no picture (exit status %d)", browser, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return VRAM_OK;
}

/* Parses the options; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, const char **inputs, size_t *n, const char **out, const char **png,
                      const char **title, viz_trace_options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_next = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has_next) *out = argv[++i];
        else if (!strcmp(a, "--png") && has_next) *png = argv[++i];
        else if (!strcmp(a, "--title") && has_next) *title = argv[++i];
        else if (!strcmp(a, "--device") && has_next) o->device = argv[++i];
        else if (!strcmp(a, "--conf") && has_next) o->conf = argv[++i];
        else if (!strcmp(a, "--capacity") && has_next) {
            if (vram_parse_size(argv[++i], &o->capacity) != VRAM_OK || o->capacity == 0) {
                fprintf(stderr, "vram viz: bad --capacity '%s': %s\n", argv[i], vram_last_error());
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vram viz: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (*n == VIZ_MAX_INPUTS) {
            fprintf(stderr, "vram viz: at most %d inputs\n", VIZ_MAX_INPUTS);
            return 2;
        } else inputs[(*n)++] = a;
    }
    if (!*n || !*out) {
        fprintf(stderr, "vram viz: %s\n", !*n ? "no input given" : "no output given (-o OUT.html)");
        usage(stderr);
        return 2;
    }
    return -1;
}

int vram_cmd_viz(int argc, char **argv) {
    const char *inputs[VIZ_MAX_INPUTS], *out = NULL, *png = NULL, *title = NULL;
    size_t n = 0;
    viz_trace_options o = {0};
    int rc = parse_args(argc, argv, inputs, &n, &out, &png, &title, &o);
    if (rc >= 0) return rc;
    if (vram_cli_check_conf("vram viz", o.conf)) return 2;
    viz_model models[VIZ_MAX_INPUTS];
    viz_model *ptrs[VIZ_MAX_INPUTS];
    memset(models, 0, sizeof models);
    vram_status st = VRAM_OK;
    size_t loaded = 0;
    char names[512] = "";
    for (; loaded < n && st == VRAM_OK; loaded++) {
        ptrs[loaded] = &models[loaded];
        st = load_input(inputs[loaded], &o, &models[loaded]);
        if (st == VRAM_OK && strlen(names) + strlen(models[loaded].name) + 8 < sizeof names)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", loaded ? " vs " : "", models[loaded].name);
    }
    /* a bad input is 2, as `vram replay` says; a replay out of memory or a failed write, 1 */
    rc = st == VRAM_OK ? 0 : st == VRAM_ERR_OUT_OF_MEMORY || st == VRAM_ERR_HOST_MEMORY ? 1 : 2;
    if (st == VRAM_OK && (st = write_page(ptrs, n, title ? title : names, out)) != VRAM_OK) rc = 1;
    if (st != VRAM_OK) fprintf(stderr, "vram viz: %s\n", vram_last_error());
    if (st == VRAM_OK && png && (st = take_png(out, png)) != VRAM_OK) {
        fprintf(stderr, "vram viz: %s\n", vram_last_error());
        rc = 1;
    }
    if (rc == 0) printf("vram viz: wrote %s%s%s\n", out, png ? " and " : "", png ? png : "");
    for (size_t i = 0; i < n; i++) viz_model_free(&models[i]);
    return rc;
}
