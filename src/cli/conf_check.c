/* conf_check.c — the allocator configuration a subcommand will run with, checked up front.
 *
 * VRAM_ALLOC_CONF from the environment, then a --conf string over it: the first error is printed
 * once, named by where it came from ("VRAM_ALLOC_CONF: ..." or "--conf: ..."), before any trace
 * is read or benchmark run, so a typo costs nothing and says which of the two to fix.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "vram/config.h"

int vram_cli_check_conf(const char *tool, const char *conf) {
    vram_alloc_config cfg;
    if (vram_alloc_config_from_env(&cfg) != VRAM_OK) {
        fprintf(stderr, "%s: %s\n", tool, vram_last_error());
        return 2;
    }
    if (conf && vram_alloc_config_parse(conf, &cfg) != VRAM_OK) {
        const char *msg = vram_last_error(), *prefix = "VRAM_ALLOC_CONF: ";
        if (!strncmp(msg, prefix, strlen(prefix))) msg += strlen(prefix); /* the parser names the variable */
        fprintf(stderr, "%s: --conf: %s\n", tool, msg);
        return 2;
    }
    return 0;
}
