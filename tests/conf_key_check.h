/* conf_key_check.h — the checks every VRAM_ALLOC_CONF key owes (tests of one key each): its
 * default is not written by vram_alloc_config_format, a non-default value is written as given and
 * parses back to the same configuration, and a bad value is refused naming the key. The caller
 * checks the fields themselves. */
#ifndef VRAM_TESTS_CONF_KEY_CHECK_H
#define VRAM_TESTS_CONF_KEY_CHECK_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "vram/config.h"

/* `key`: the key's name; `set`: "key:value" with a value other than the default (written back
 * as ",key:value"); `bad`: "key:value" that must be refused. Returns the parsed configuration. */
static inline vram_alloc_config conf_key_check(const char *key, const char *set, const char *bad) {
    vram_alloc_config c, e;
    char text[VRAM_ALLOC_CONF_FORMAT_MAX], piece[128];
    vram_alloc_config_default(&c);
    vram_alloc_config_format(&c, text, sizeof text);
    CHECK(!strstr(text, key), "%s: the default is not written: %s", key, text);
    CHECK_OK(vram_alloc_config_parse(set, &c));
    vram_alloc_config_format(&c, text, sizeof text);
    snprintf(piece, sizeof piece, ",%s", set);
    CHECK(strstr(text, piece) != NULL, "%s formatted: %s", set, text);
    vram_alloc_config_default(&e);
    CHECK_OK(vram_alloc_config_parse(text, &e));
    CHECK(memcmp(&c, &e, sizeof c) == 0, "%s round-trips: %s", set, text);
    vram_alloc_config d;
    vram_alloc_config_default(&d);
    CHECK(vram_alloc_config_parse(bad, &d) == VRAM_ERR_INVALID_ARG, "%s is refused", bad);
    CHECK(strstr(vram_last_error(), key) != NULL, "names the key: %s", vram_last_error());
    return c;
}

#endif
