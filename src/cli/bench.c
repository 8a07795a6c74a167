/* bench.c — `vram bench`: the allocator latency microbenchmarks (docs/benchmarks.md §2).
 *
 * `vram bench alloc` runs the pair and random-live-set workloads (src/bench/alloc_bench.c,
 * shared with bench/bench_alloc.c) and prints the machine, the command and the medians, as a
 * table or as one JSON object. Further benchmarks get their own word after `bench`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vram/bench.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vram bench alloc [options]\n"
            "\n"
            "Allocator latency, one thread (docs/benchmarks.md section 2): allocate+free pairs of\n"
            "512 B, 64 KiB, 1 MiB, 16 MiB and 256 MiB, and 200,000 operations on a random live\n"
            "set of 1000 slots. Prints the median of several runs.\n"
            "\n"
            "options:\n"
            "  --json           one JSON object (pair_ns by size, random_ns_per_op, peaks, machine)\n"
            "  --device SPEC    device (default sim, 80 GiB; any spec the device registry takes)\n"
            "  --repeat N       runs to take the median of (default 5)\n"
            "  --conf STRING    VRAM_ALLOC_CONF options applied over the environment's\n"
            "  -h, --help       this help\n");
}

/* The command line as typed, for the record. */
static void join_command(int argc, char **argv, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "vram");
    for (int i = 0; i < argc && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, " %s", argv[i]);
}

int vram_cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "vram bench: no benchmark given (known: alloc)\n");
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "alloc") != 0) {
        fprintf(stderr, "vram bench: unknown benchmark '%s' (known: alloc)\n", argv[1]);
        return 2;
    }
    vram_bench_alloc_options o = {0};
    int json = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        int takes_value = (name_len == 8 && !strncmp(a, "--device", 8)) ||
                          (name_len == 8 && !strncmp(a, "--repeat", 8)) ||
                          (name_len == 6 && !strncmp(a, "--conf", 6));
        if (takes_value) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else {
                fprintf(stderr, "vram bench alloc: option '%s' needs a value\n", a);
                return 2;
            }
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (takes_value && a[2] == 'd') {
            o.device = v;
        } else if (takes_value && a[2] == 'c') {
            o.conf = v;
        } else if (takes_value && a[2] == 'r') {
            char *end;
            long n = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || n < 1 || n > 1000) {
                fprintf(stderr, "vram bench alloc: --repeat '%s' must be a whole number from 1 to 1000\n", v);
                return 2;
            }
            o.repeat = (unsigned)n;
        } else {
            static const char *const flags[] = {"--help", "--json", "--device", "--conf", "--repeat"};
            vram_cli_unknown("vram bench alloc", "option", a, flags, sizeof flags / sizeof *flags, "vram bench --help");
            return 2;
        }
    }
    if (vram_cli_check_conf("vram bench alloc", o.conf)) return 2;
    char command[512];
    join_command(argc, argv, command, sizeof command);
    vram_bench_alloc_result r;
    vram_status st = vram_bench_alloc_run(&o, &r);
    if (st != VRAM_OK) {
        fprintf(stderr, "vram bench alloc: %s\n", vram_last_error());
        return st == VRAM_ERR_OUT_OF_MEMORY ? 1 : 2;
    }
    if (json) vram_bench_alloc_write_json(&r, command, stdout);
    else vram_bench_alloc_write_text(&r, command, stdout);
    return 0;
}
