/* config.c — VRAM_ALLOC_CONF: defaults, parsing and formatting of allocator options.
 *
 * The string is a comma-separated list of key:value pairs, as PYTORCH_CUDA_ALLOC_CONF. Each
 * key has one entry in `keys` below: its name, its kind (bool, size in MiB, size with unit,
 * integer, fraction), where it lands in vram_alloc_config and its flags (accepts "auto", must be
 * a power of two). Parsing works on a copy of the configuration, so an error leaves the
 * caller's configuration as it was.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/config.h"

#define MiB (1024ull * 1024ull)

void vram_alloc_config_default(vram_alloc_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->expandable_segments = 1;
    cfg->page_size = 2 * MiB;
    cfg->chunk_size = 0; /* the device's default: 64 MiB on CUDA, a page elsewhere */
    cfg->max_split_size = UINT64_MAX;
    cfg->max_non_split_rounding = 20 * MiB;
    cfg->roundup_power2_divisions = 0;
    cfg->chunk_headroom = 64;
    cfg->garbage_collection_threshold = 0.0;
    cfg->memory_fraction = 1.0;
    cfg->max_reserved = 0;
    cfg->history_entries = 0;
    cfg->caching = 1;
    cfg->move_busy_pages = VRAM_CONF_AUTO;
    cfg->large_moves = 1;
    cfg->reserve_slack = VRAM_CONF_AUTO;
    cfg->move_min = 0; /* one chunk */
    cfg->chunk_divisor = 16;
    cfg->small_classes = 1;
}

typedef enum { KEY_BOOL, KEY_MIB, KEY_SIZE, KEY_UINT, KEY_FRACTION_OPEN, KEY_FRACTION, KEY_SHARE } key_kind;

/* Key flags: KEY_AUTO also accepts "auto" (VRAM_CONF_AUTO: the allocator chooses by device);
 * KEY_POW2 requires a power of two (0 and 1 allowed for counts). */
enum { KEY_AUTO = 1, KEY_POW2 = 2 };

static const struct {
    const char *name;
    key_kind kind;
    size_t offset;
    uint64_t min; /* for KEY_MIB/KEY_SIZE/KEY_UINT: the smallest value accepted */
    unsigned flags;
    uint64_t max; /* KEY_UINT: the largest value accepted (0: UINT32_MAX, the field's limit); KEY_MIB: the
                   * largest in MiB (0: none) */
} keys[] = {
    {"expandable_segments", KEY_BOOL, offsetof(vram_alloc_config, expandable_segments), 0, 0, 0},
    {"page_size_mb", KEY_MIB, offsetof(vram_alloc_config, page_size), 2 * MiB, KEY_POW2, 1024},
    {"chunk_size_mb", KEY_MIB, offsetof(vram_alloc_config, chunk_size), 2 * MiB, KEY_POW2, 65536},
    {"max_split_size_mb", KEY_MIB, offsetof(vram_alloc_config, max_split_size), 20 * MiB, 0, 0},
    {"max_non_split_rounding_mb", KEY_MIB, offsetof(vram_alloc_config, max_non_split_rounding), 0, 0, 0},
    {"roundup_power2_divisions", KEY_UINT, offsetof(vram_alloc_config, roundup_power2_divisions), 0, KEY_POW2, 0},
    {"garbage_collection_threshold", KEY_FRACTION_OPEN,
     offsetof(vram_alloc_config, garbage_collection_threshold), 0, 0, 0},
    {"memory_fraction", KEY_FRACTION, offsetof(vram_alloc_config, memory_fraction), 0, 0, 0},
    {"max_reserved", KEY_SIZE, offsetof(vram_alloc_config, max_reserved), 0, 0, 0},
    {"history", KEY_UINT, offsetof(vram_alloc_config, history_entries), 0, 0, VRAM_HISTORY_MAX},
    {"caching", KEY_BOOL, offsetof(vram_alloc_config, caching), 0, 0, 0},
    {"move_busy_pages", KEY_BOOL, offsetof(vram_alloc_config, move_busy_pages), 0, KEY_AUTO, 0},
    {"reserve_slack", KEY_SHARE, offsetof(vram_alloc_config, reserve_slack), 0, KEY_AUTO, 0},
    {"chunk_headroom", KEY_UINT, offsetof(vram_alloc_config, chunk_headroom), 0, 0, 1u << 20},
    {"move_min_mb", KEY_MIB, offsetof(vram_alloc_config, move_min), 0, 0, 0},
    {"small_classes", KEY_BOOL, offsetof(vram_alloc_config, small_classes), 0, 0, 0},
    {"large_moves", KEY_BOOL, offsetof(vram_alloc_config, large_moves), 0, 0, 0},
    {"chunk_divisor", KEY_UINT, offsetof(vram_alloc_config, chunk_divisor), 0, 0, 4096},
    {"chunk_min_mb", KEY_MIB, offsetof(vram_alloc_config, chunk_min), 0, KEY_POW2, 65536},
};

static vram_status parse_uint(const char *key, const char *value, uint64_t *out) {
    if (!isdigit((unsigned char)value[0]))
        return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: '%s' is not a non-negative integer", key, value);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(value, &end, 10);
    if (*end) return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: '%s' is not a non-negative integer", key, value);
    if (errno == ERANGE)
        return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s is too large (above 2^64)", key, value);
    *out = v;
    return VRAM_OK;
}

/* Whether v lies in (0, 1] (`kind` KEY_FRACTION), (0, 1) (KEY_FRACTION_OPEN) or [0, 1) (KEY_SHARE),
 * and that interval written out. */
static int in_unit_interval(key_kind kind, double v) {
    int zero_ok = kind == KEY_SHARE, one_ok = kind == KEY_FRACTION;
    return (zero_ok ? v >= 0.0 : v > 0.0) && (one_ok ? v <= 1.0 : v < 1.0);
}
static const char *unit_interval(key_kind kind) {
    return kind == KEY_SHARE ? "[0, 1)" : kind == KEY_FRACTION ? "(0, 1]" : "(0, 1)";
}

static vram_status parse_unit_interval(const char *key, const char *value, key_kind kind, const char *or_auto,
                                       double *out) {
    errno = 0;
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || errno == ERANGE || !in_unit_interval(kind, v))
        return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: '%s' must be a number in %s%s", key, value,
                          unit_interval(kind), or_auto);
    *out = v;
    return VRAM_OK;
}

static vram_status apply_pair(vram_alloc_config *cfg, const char *key, const char *value) {
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(keys[i].name, key) != 0) continue;
        char *field = (char *)cfg + keys[i].offset;
        uint64_t u;
        vram_status st;
        const char *or_auto = keys[i].flags & KEY_AUTO ? " (or auto)" : "";
        if ((keys[i].flags & KEY_AUTO) && !strcmp(value, "auto")) { /* only bool and share keys have it */
            if (keys[i].kind == KEY_BOOL) *(int *)field = VRAM_CONF_AUTO;
            else *(double *)field = VRAM_CONF_AUTO;
            return VRAM_OK;
        }
        switch (keys[i].kind) {
        case KEY_BOOL:
            if (!strcmp(value, "True") || !strcmp(value, "true") || !strcmp(value, "1"))
                *(int *)field = 1;
            else if (!strcmp(value, "False") || !strcmp(value, "false") || !strcmp(value, "0"))
                *(int *)field = 0;
            else
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: '%s' is not True or False%s", key, value,
                                  or_auto);
            return VRAM_OK;
        case KEY_MIB:
            if ((st = parse_uint(key, value, &u)) != VRAM_OK) return st;
            uint64_t most = keys[i].max ? keys[i].max : UINT64_MAX / MiB; /* MiB: bytes must fit 64 bits */
            if (u > most)
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s is too large (at most %llu)", key, value,
                                  (unsigned long long)most);
            if (u * MiB < keys[i].min)
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s is too small (at least %llu)", key,
                                  value, (unsigned long long)(keys[i].min / MiB));
            if ((keys[i].flags & KEY_POW2) && (u & (u - 1)))
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s is not a power of two", key, value);
            *(uint64_t *)field = u * MiB;
            return VRAM_OK;
        case KEY_SIZE:
            if (vram_parse_size(value, &u) != VRAM_OK)
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s", key, vram_last_error());
            *(uint64_t *)field = u;
            return VRAM_OK;
        case KEY_UINT:
            if ((st = parse_uint(key, value, &u)) != VRAM_OK) return st;
            uint64_t max = keys[i].max ? keys[i].max : UINT32_MAX;
            if (u > max)
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s is too large (at most %llu)", key, value,
                                  (unsigned long long)max);
            if ((keys[i].flags & KEY_POW2) && u > 1 && (u & (u - 1)))
                return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: %s is not a power of two", key, value);
            *(uint32_t *)field = (uint32_t)u;
            return VRAM_OK;
        case KEY_FRACTION_OPEN:
        case KEY_FRACTION:
        case KEY_SHARE:
            return parse_unit_interval(key, value, keys[i].kind, or_auto, (double *)field);
        }
    }
    char known[512] = "";
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, keys[i].name, sizeof known - strlen(known) - 1);
    }
    return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: unknown key '%s' (known: %s)", key, known);
}

vram_status vram_alloc_config_check(const vram_alloc_config *cfg) {
    if (!cfg) return vram_error(VRAM_ERR_INVALID_ARG, "allocator configuration: null");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *field = (const char *)cfg + keys[i].offset;
        switch (keys[i].kind) {
        case KEY_UINT: {
            uint32_t v = *(const uint32_t *)field;
            uint64_t max = keys[i].max ? keys[i].max : UINT32_MAX;
            if (v > max)
                return vram_error(VRAM_ERR_INVALID_ARG, "%s %u is too large (at most %llu)",
                                  keys[i].name, v, (unsigned long long)max);
            if ((keys[i].flags & KEY_POW2) && v > 1 && (v & (v - 1)))
                return vram_error(VRAM_ERR_INVALID_ARG, "%s %u is not a power of two",
                                  keys[i].name, v);
            break;
        }
        case KEY_FRACTION_OPEN:
        case KEY_FRACTION:
        case KEY_SHARE: {
            double v = *(const double *)field;
            if ((keys[i].flags & KEY_AUTO) && v == VRAM_CONF_AUTO) break;
            if (keys[i].kind == KEY_FRACTION_OPEN && v == 0.0) break; /* off, the default */
            if (!in_unit_interval(keys[i].kind, v))
                return vram_error(VRAM_ERR_INVALID_ARG, "%s %g is not in %s%s", keys[i].name, v,
                                  unit_interval(keys[i].kind), keys[i].flags & KEY_AUTO ? " or auto" : "");
            break;
        }
        default: /* sizes: 0 and UINT64_MAX mean the device's default and none; the allocator checks the page size */
            break;
        }
    }
    return VRAM_OK;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

vram_status vram_alloc_config_parse(const char *text, vram_alloc_config *cfg) {
    if (!cfg) return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: null configuration");
    if (!text || !*text) return VRAM_OK;
    size_t len = strlen(text);
    if (len > 4096) return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: longer than 4096 characters");
    char buf[4097];
    memcpy(buf, text, len + 1);
    vram_alloc_config work = *cfg;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *pair = trim(item);
        if (!*pair) continue;
        char *colon = strchr(pair, ':');
        if (!colon)
            return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: '%s' is not key:value", pair);
        *colon = '\0';
        char *key = trim(pair), *value = trim(colon + 1);
        if (!*value) return vram_error(VRAM_ERR_INVALID_ARG, "VRAM_ALLOC_CONF: %s: missing value", key);
        vram_status st = apply_pair(&work, key, value);
        if (st != VRAM_OK) return st;
    }
    *cfg = work;
    return VRAM_OK;
}

vram_status vram_alloc_config_from_env(vram_alloc_config *cfg) {
    vram_alloc_config_default(cfg);
    return vram_alloc_config_parse(getenv("VRAM_ALLOC_CONF"), cfg);
}

/* The shortest decimal form of v that parses back to exactly v (%g's six digits do not always). */
static void format_double(char *buf, size_t cap, double v) {
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, cap, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void vram_alloc_config_format(const vram_alloc_config *cfg, char *buf, size_t cap) {
    char split[48] = "", gc[64] = "", chunk[48] = "", slack[32] = "auto", move_min[40] = "", headroom[40] = "";
    char divisor[40] = "", chunk_min[40] = "";
    char fraction[32], number[32];
    format_double(fraction, sizeof fraction, cfg->memory_fraction);
    if (cfg->reserve_slack >= 0) format_double(slack, sizeof slack, cfg->reserve_slack);
    if (cfg->move_min)
        snprintf(move_min, sizeof move_min, ",move_min_mb:%llu", (unsigned long long)(cfg->move_min / MiB));
    if (cfg->chunk_headroom != 64)
        snprintf(headroom, sizeof headroom, ",chunk_headroom:%u", cfg->chunk_headroom);
    if (cfg->chunk_divisor != 16)
        snprintf(divisor, sizeof divisor, ",chunk_divisor:%u", cfg->chunk_divisor);
    if (cfg->chunk_min)
        snprintf(chunk_min, sizeof chunk_min, ",chunk_min_mb:%llu", (unsigned long long)(cfg->chunk_min / MiB));
    if (cfg->chunk_size)
        snprintf(chunk, sizeof chunk, ",chunk_size_mb:%llu", (unsigned long long)(cfg->chunk_size / MiB));
    if (cfg->max_split_size != UINT64_MAX)
        snprintf(split, sizeof split, ",max_split_size_mb:%llu", (unsigned long long)(cfg->max_split_size / MiB));
    if (cfg->garbage_collection_threshold > 0) {
        format_double(number, sizeof number, cfg->garbage_collection_threshold);
        snprintf(gc, sizeof gc, ",garbage_collection_threshold:%s", number);
    }
    snprintf(buf, cap,
             "expandable_segments:%s,page_size_mb:%llu%s%s,max_non_split_rounding_mb:%llu,"
             "roundup_power2_divisions:%u,memory_fraction:%s,max_reserved:%llu,history:%u,caching:%s,"
             "move_busy_pages:%s,reserve_slack:%s%s%s%s%s%s%s%s",
             cfg->expandable_segments ? "True" : "False", (unsigned long long)(cfg->page_size / MiB),
             chunk, split,
             (unsigned long long)(cfg->max_non_split_rounding / MiB), cfg->roundup_power2_divisions,
             fraction, (unsigned long long)cfg->max_reserved, cfg->history_entries,
             cfg->caching ? "True" : "False", cfg->move_busy_pages < 0 ? "auto" : cfg->move_busy_pages ? "True" : "False", slack,
             move_min, headroom, gc, cfg->small_classes ? "" : ",small_classes:False",
             cfg->large_moves ? "" : ",large_moves:False", divisor, chunk_min);
}
