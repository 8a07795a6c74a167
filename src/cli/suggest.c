/* suggest.c — "did you mean ...?" for a mistyped subcommand or flag.
 *
 * The nearest of a list of names by edit distance (insertions, deletions, substitutions and
 * swaps of two neighbours each cost 1), offered only when it is close enough to be the likely
 * intent: at most 2 edits, and fewer than half the word's length, so that a word unlike every
 * name gets no suggestion rather than a random one.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define SUGGEST_MAX 64 /* longer words are compared by their first 64 characters */

static size_t edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > SUGGEST_MAX) n = SUGGEST_MAX;
    if (m > SUGGEST_MAX) m = SUGGEST_MAX;
    size_t d[SUGGEST_MAX + 1][SUGGEST_MAX + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *vram_cli_nearest(const char *word, const char *const *names, size_t count) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    size_t len = strlen(word);
    for (size_t i = 0; i < count; i++) {
        size_t d = edit_distance(word, names[i]);
        if (d < best_d) best_d = d, best = names[i];
    }
    if (!best || best_d == 0 || best_d > 2 || 2 * best_d >= len) return NULL;
    return best;
}

void vram_cli_unknown(const char *tool, const char *what, const char *word, const char *const *names, size_t count,
                      const char *help) {
    const char *near = vram_cli_nearest(word, names, count);
    fprintf(stderr, "%s: unknown %s '%s'", tool, what, word);
    if (near) fprintf(stderr, "; did you mean '%s'?", near);
    if (help) fprintf(stderr, " (see %s)", help);
    fputc('\n', stderr);
}
