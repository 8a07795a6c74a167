/* proc.c — who owns a GPU process and what it runs, read from /proc (Linux).
 *
 * NVML gives only pids. The owner is the uid of the /proc/<pid> directory, turned into a name
 * with getpwuid_r (the number when the name is unknown); the command is /proc/<pid>/cmdline,
 * whose NUL-separated arguments are joined with spaces, made printable (vram_text_printable: any
 * process can name itself anything, and the name reaches terminals, JSON and Prometheus). A pid
 * from another pid namespace (a container without --pid=host) is not visible here: its fields
 * stay "".
 */
#include "vram/smi.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

vram_status vram_smi_process_describe(uint32_t pid, char *user, size_t user_cap, char *command,
                                      size_t command_cap) {
    if (user && user_cap) user[0] = '\0';
    if (command && command_cap) command[0] = '\0';
    if (pid == 0) return vram_error(VRAM_ERR_NOT_FOUND, "pid 0 is not a process");
    char path[64];
    snprintf(path, sizeof path, "/proc/%u", pid);
    struct stat st;
    if (stat(path, &st) != 0) return vram_error(VRAM_ERR_NOT_FOUND, "process %u is not visible in /proc", pid);
    if (user && user_cap) {
        struct passwd pw, *found = NULL;
        char buf[1024];
        if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found)
            snprintf(user, user_cap, "%s", found->pw_name);
        else
            snprintf(user, user_cap, "%u", (unsigned)st.st_uid);
    }
    if (command && command_cap > 1) {
        snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, command, command_cap - 1);
            close(fd);
            if (n < 0) n = 0;
            while (n > 0 && command[n - 1] == '\0') n--; /* trailing NULs */
            for (ssize_t i = 0; i < n; i++)
                if (command[i] == '\0' || command[i] == '\n' || command[i] == '\t') command[i] = ' ';
            command[n] = '\0';
            vram_text_printable(command); /* any process names itself: no escapes, only UTF-8 */
        }
        if (!command[0]) { /* kernel threads and zombies have an empty cmdline: use comm */
            snprintf(path, sizeof path, "/proc/%u/comm", pid);
            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                ssize_t n = read(fd, command, command_cap - 1);
                close(fd);
                if (n < 0) n = 0;
                while (n > 0 && (command[n - 1] == '\n' || command[n - 1] == '\0')) n--;
                command[n] = '\0';
                vram_text_printable(command);
            }
        }
    }
    return VRAM_OK;
}
