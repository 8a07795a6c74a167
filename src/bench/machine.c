/* machine.c — what a benchmark prints about where it ran: CPU model, cores, OS, date, and the
 * header with them and the command line (vram_machine_print).
 *
 * Numbers without their machine are not comparable, so every benchmark and bench/results
 * file starts with this. The CPU model is the first "model name" of /proc/cpuinfo.
 */
#include "vram/bench.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

void vram_machine_info_get(vram_machine_info *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->cpu, sizeof m->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            char *colon = strchr(line, ':');
            if (!colon) continue;
            colon++;
            while (*colon == ' ' || *colon == '\t') colon++;
            size_t n = strcspn(colon, "\n");
            while (n > 0 && colon[n - 1] == ' ') n--;
            snprintf(m->cpu, sizeof m->cpu, "%.*s", (int)n, colon);
            break;
        }
        fclose(f);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    m->cores = cores > 0 ? (unsigned)cores : 1;
    struct utsname u;
    if (uname(&u) == 0) snprintf(m->os, sizeof m->os, "%.40s %.60s %.20s", u.sysname, u.release, u.machine);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void vram_machine_print(FILE *out, int argc, char **argv) {
    vram_machine_info m;
    vram_machine_info_get(&m);
    fprintf(out, "machine: %s, %u cores, %s\ndate:    %s\ncommand:", m.cpu, m.cores, m.os, m.date);
    for (int i = 0; i < argc; i++) fprintf(out, " %s", argv[i]);
    fputc('\n', out);
}
