/* viz_json.h — a small JSON reader (RFC 8259) for the snapshots `vram viz` draws: the whole
 * text parsed into a tree of nodes held in one array; an object's or array's children are
 * linked by `next`, an object member carries its key. Strings are unescaped into a second
 * buffer (\uXXXX, surrogate pairs included, as UTF-8).
 */
#ifndef VRAM_VIZ_JSON_H
#define VRAM_VIZ_JSON_H

#include <stddef.h>

#include "vram/vram.h"

typedef enum { VIZ_JSON_NULL, VIZ_JSON_BOOL, VIZ_JSON_NUM, VIZ_JSON_STR, VIZ_JSON_ARR, VIZ_JSON_OBJ } viz_json_type;

typedef struct viz_json {
    viz_json_type type;
    const char *key; /* member name inside an object, else NULL */
    const char *str; /* VIZ_JSON_STR */
    double num;      /* VIZ_JSON_NUM, VIZ_JSON_BOOL (0/1) */
    long first, next; /* child and sibling node indices, -1 for none */
    size_t count;     /* children */
} viz_json;

typedef struct viz_json_doc {
    viz_json *nodes;
    size_t n, cap;
    char *strings;
    size_t ns, caps;
} viz_json_doc;

/* Parses `len` bytes; VRAM_ERR_PARSE with the byte offset and what was expected. */
vram_status viz_json_parse(const char *text, size_t len, const char *name, viz_json_doc *doc);
void viz_json_free(viz_json_doc *doc);

static inline const viz_json *viz_json_node(const viz_json_doc *d, long i) { return i < 0 ? NULL : &d->nodes[i]; }
/* The member `key` of object o, or NULL (also when o is not an object). */
const viz_json *viz_json_get(const viz_json_doc *d, const viz_json *o, const char *key);
/* The number at o.key, or `def` when absent or not a number. */
double viz_json_num(const viz_json_doc *d, const viz_json *o, const char *key, double def);
/* The string at o.key, or `def`. */
const char *viz_json_str(const viz_json_doc *d, const viz_json *o, const char *key, const char *def);

#endif
