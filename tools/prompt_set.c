/* tools/prompt_set.c - token-id prompt lists (prompt_set.h). */
#include "prompt_set.h"

#include "args.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int frt_prompt_set_add(frt_prompt_set *s, const int32_t *ids, size_t len)
{
    if (len < 1 || s->n >= FRT_PROMPT_SET_MAX) return -1;
    size_t have = s->n ? s->off[s->n] : 0;
    int32_t *nids = realloc(s->ids, (have + len) * sizeof *nids);
    if (!nids) return -1;
    s->ids = nids;
    size_t *noff = realloc(s->off, (size_t)(s->n + 2) * sizeof *noff);
    if (!noff) return -1;
    s->off = noff;
    memcpy(s->ids + have, ids, len * sizeof *ids);
    s->off[s->n] = have;
    s->off[++s->n] = have + len;
    return 0;
}

int frt_prompt_set_add_random(frt_prompt_set *s, int n, int len, int vocab, uint64_t seed)
{
    if (len < 1 || vocab < 1) return -1;
    int32_t *ids = malloc((size_t)len * sizeof *ids);
    if (!ids) return -1;
    uint64_t x = seed;
    int rc = 0;
    for (int p = 0; p < n && rc == 0; p++) {
        for (int i = 0; i < len; i++) { /* splitmix64 */
            uint64_t z = (x += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            ids[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)vocab);
        }
        rc = frt_prompt_set_add(s, ids, (size_t)len);
    }
    free(ids);
    return rc;
}

/* A line to skip: all blanks, or a '#' comment. */
static int blank_or_comment(const char *line)
{
    line += strspn(line, " \t\r");
    return *line == '\0' || *line == '#';
}

/* One line [len] (no '\n'): appended unless skipped; 0 or an error as
 * frt_prompt_set_parse returns it. */
static int parse_line(frt_prompt_set *s, const char *text, size_t len)
{
    if (memchr(text, '\0', len)) return FRT_PARSE_SYNTAX;
    char *line = malloc(len + 1);
    if (!line) return -1;
    memcpy(line, text, len);
    line[len] = '\0';
    if (len && line[len - 1] == '\r') line[len - 1] = '\0';
    int rc = 0;
    if (!blank_or_comment(line)) {
        int32_t *ids = NULL;
        size_t n = 0;
        rc = frt_parse_i32_list(line, 0, INT32_MAX, &ids, &n, NULL);
        if (rc == 0 && s->n >= FRT_PROMPT_SET_MAX) rc = FRT_PARSE_RANGE;
        if (rc == 0 && frt_prompt_set_add(s, ids, n)) rc = -1;
        free(ids);
    }
    free(line);
    return rc;
}

int frt_prompt_set_parse(frt_prompt_set *s, const char *text, size_t len, int *bad_line)
{
    size_t at = 0;
    int line_no = 0;
    *bad_line = 0;
    while (at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        line_no++;
        int rc = parse_line(s, text + at, end - at);
        if (rc) {
            *bad_line = rc == -1 ? 0 : line_no;
            return rc;
        }
        at = end + 1;
    }
    return 0;
}

size_t frt_prompt_set_max_len(const frt_prompt_set *s)
{
    size_t m = 0;
    for (int p = 0; p < s->n; p++)
        if (s->off[p + 1] - s->off[p] > m) m = s->off[p + 1] - s->off[p];
    return m;
}

void frt_prompt_set_free(frt_prompt_set *s)
{
    if (!s) return;
    free(s->ids);
    free(s->off);
    *s = (frt_prompt_set){0};
}
