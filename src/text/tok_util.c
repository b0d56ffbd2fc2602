/* tok_util.c - the tokenizer's small containers: a string arena, the
 * string -> id and pair -> merge hash tables (open addressing, linear
 * probing, XXH3 / splitmix hashes), growable buffers, UTF-8 helpers, lossy
 * UTF-8 and the GPT-2 byte <-> character alphabet. */
#include "text/tok_internal.h"
#include "util/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

/* ---- arena ----------------------------------------------------------------- */
struct tok_arena_block {
    tok_arena_block *next;
    size_t used, cap;
    char data[];
};

char *tok_arena_dup(tok_arena *a, const char *s, size_t n)
{
    tok_arena_block *b = a->head;
    if (!b || b->cap - b->used < n + 1) {
        size_t cap = n + 1 > (1u << 16) ? n + 1 : (1u << 16);
        tok_arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (b && cap > (1u << 16)) {
            /* A big string gets its own block behind the current one, so
             * the current block keeps filling. */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    char *p = b->data + b->used;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    b->used += n + 1;
    return p;
}

void tok_arena_free(tok_arena *a)
{
    tok_arena_block *b = a->head;
    while (b) {
        tok_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

/* ---- string map -------------------------------------------------------------- */
static int strmap_resize(tok_strmap *m, size_t cap)
{
    tok_strmap_entry *e = calloc(cap, sizeof *e);
    if (!e) return FRT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->e[i].key) continue;
        size_t j = m->e[i].hash & (cap - 1);
        while (e[j].key) j = (j + 1) & (cap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = cap;
    return 0;
}

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val, int32_t *old)
{
    if (old) *old = -1;
    if ((m->n + 1) * 4 > m->cap * 3) {
        int rc = strmap_resize(m, m->cap ? m->cap * 2 : 64);
        if (rc) return frt_error(rc, "tokenizer: out of memory (hash table)");
    }
    uint64_t h = XXH3_64bits(key, len);
    size_t j = h & (m->cap - 1);
    while (m->e[j].key) {
        if (m->e[j].hash == h && m->e[j].len == len && !memcmp(m->e[j].key, key, len)) {
            if (old) *old = m->e[j].val;
            m->e[j].val = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->e[j].key = key;
    m->e[j].len = (uint32_t)len;
    m->e[j].val = val;
    m->e[j].hash = h;
    m->n++;
    return 0;
}

int tok_strmap_reserve(tok_strmap *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while (n * 4 > cap * 3) cap *= 2;
    if (cap == m->cap) return 0;
    int rc = strmap_resize(m, cap);
    return rc ? frt_error(rc, "tokenizer: out of memory (hash table)") : 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len)
{
    if (!m->cap) return -1;
    uint64_t h = XXH3_64bits(key, len);
    size_t j = h & (m->cap - 1);
    while (m->e[j].key) {
        if (m->e[j].hash == h && m->e[j].len == len && !memcmp(m->e[j].key, key, len))
            return m->e[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->e);
    m->e = NULL;
    m->cap = m->n = 0;
}

/* ---- pair map ------------------------------------------------------------------ */
static inline uint64_t pair_hash(uint64_t x)
{
    /* splitmix64 finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static int pairmap_resize(tok_pairmap *m, size_t cap)
{
    tok_pair_entry *e = malloc(cap * sizeof *e);
    if (!e) return FRT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < cap; i++) e[i].key = UINT64_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->e[i].key == UINT64_MAX) continue;
        size_t j = pair_hash(m->e[i].key) & (cap - 1);
        while (e[j].key != UINT64_MAX) j = (j + 1) & (cap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = cap;
    return 0;
}

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    if ((m->n + 1) * 2 > m->cap) {
        int rc = pairmap_resize(m, m->cap ? m->cap * 2 : 64);
        if (rc) return frt_error(rc, "tokenizer: out of memory (merges table)");
    }
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t j = pair_hash(key) & (m->cap - 1);
    while (m->e[j].key != UINT64_MAX) {
        if (m->e[j].key == key) {
            m->e[j].rank = rank;
            m->e[j].id = id;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->e[j].key = key;
    m->e[j].rank = rank;
    m->e[j].id = id;
    m->n++;
    return 0;
}

int tok_pairmap_reserve(tok_pairmap *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while (n * 2 > cap) cap *= 2;
    if (cap == m->cap) return 0;
    int rc = pairmap_resize(m, cap);
    return rc ? frt_error(rc, "tokenizer: out of memory (merges table)") : 0;
}

const tok_pair_entry *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b)
{
    if (!m->cap) return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t j = pair_hash(key) & (m->cap - 1);
    while (m->e[j].key != UINT64_MAX) {
        if (m->e[j].key == key) return &m->e[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->e);
    m->e = NULL;
    m->cap = m->n = 0;
}

/* ---- buffers ------------------------------------------------------------------ */
int tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (b->cap - b->n >= extra + 1) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n < extra + 1) {
        if (cap > SIZE_MAX / 2) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: buffer too large");
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

int tok_buf_put(tok_buf *b, const void *s, size_t n)
{
    FRT_TRY(tok_buf_reserve(b, n));
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int tok_idvec_push(tok_idvec *iv, int32_t id)
{
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? iv->cap * 2 : 256;
        int32_t *v = realloc(iv->v, cap * sizeof *v);
        if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu ids)", cap);
        iv->v = v;
        iv->cap = cap;
    }
    iv->v[iv->n++] = id;
    return 0;
}

int tok_spanvec_push(tok_spanvec *sv, uint32_t start, uint32_t end, uint32_t is_match)
{
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        tok_span *v = realloc(sv->v, cap * sizeof *v);
        if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (splits)");
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = (tok_span){start, end, is_match};
    return 0;
}

void tok_spanvec_free(tok_spanvec *sv)
{
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

/* ---- UTF-8 ---------------------------------------------------------------------- */
/* The well-formed byte sequences of Unicode 15, table 3-7: the accepted range
 * of the second byte depends on the first; later bytes are 80..BF. */
static int utf8_second_ok(unsigned char lead, unsigned char b)
{
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
    }
}

/* Total length of a sequence with lead byte B, 0 when B cannot start one. */
static int utf8_width(unsigned char b)
{
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

int tok_utf8_len(unsigned char b)
{
    int w = utf8_width(b);
    return w ? w : 1;
}

int tok_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII run, eight bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char b = p[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        int w = utf8_width(b);
        if (!w || i + (size_t)w > n) return 0;
        if (!utf8_second_ok(b, p[i + 1])) return 0;
        for (int k = 2; k < w; k++)
            if ((p[i + k] & 0xC0) != 0x80) return 0;
        i += (size_t)w;
    }
    return 1;
}

int tok_utf8_decode(const char *s, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if (p[0] < 0xE0) {
        *cp = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
        return 2;
    }
    if (p[0] < 0xF0) {
        *cp = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
        return 3;
    }
    *cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
          (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    return 4;
}

int tok_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A Unicode normal form of S[0..N), one segment at a time. An ASCII
 * character is a boundary of every normal form: it has no decomposition, is
 * a starter (canonical combining class 0, so no reordering crosses it) and
 * is never the second character of a canonical composition. Only the
 * non-ASCII runs, each with the ASCII character before it (it may compose
 * with a following combining mark: "e" U+0301 -> U+00E9), go through
 * utf8proc; the ASCII between them is copied. The result equals
 * utf8proc_map over the whole text (tested on random text). */
int tok_utf8_normalize(const char *s, size_t n, int options, tok_buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && p[j] < 0x80) j++;
        if (j == n) return tok_buf_put(out, s + i, n - i);
        size_t seg = j > i ? j - 1 : j; /* the ASCII character before the run */
        FRT_TRY(tok_buf_put(out, s + i, seg - i));
        size_t end = j;
        while (end < n && p[end] >= 0x80) end++;
        utf8proc_uint8_t *res = NULL;
        utf8proc_ssize_t r = utf8proc_map(p + seg, (utf8proc_ssize_t)(end - seg), &res,
                                          (utf8proc_option_t)options);
        if (r < 0)
            return frt_error(r == UTF8PROC_ERROR_NOMEM ? FRT_ERR_OUT_OF_MEMORY : FRT_ERR_BACKEND,
                             "tokenizer: normalization failed: %s", utf8proc_errmsg(r));
        int rc = tok_buf_put(out, res, (size_t)r);
        free(res);
        FRT_TRY(rc);
        i = end;
    }
    return 0;
}

static const char utf8_replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Rust's Utf8Chunks (core/src/str/lossy.rs): a sequence is checked byte by
 * byte; at the first byte that cannot continue it, the bytes before it are
 * one invalid sequence (one U+FFFD) and that byte starts over. A lead byte
 * that cannot start anything (80..C1, F5..FF) is one invalid byte. */
int tok_utf8_lossy_feed(tok_utf8_state *st, const char *s, size_t n, tok_buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char b = p[i];
        if (st->n == 0) {
            /* fast path: a run of ASCII / complete valid sequences */
            size_t j = i;
            while (j < n) {
                unsigned char c = p[j];
                if (c < 0x80) {
                    j++;
                    continue;
                }
                int w = utf8_width(c);
                if (!w || j + (size_t)w > n || !utf8_second_ok(c, p[j + 1])) break;
                int ok = 1;
                for (int k = 2; k < w; k++)
                    if ((p[j + k] & 0xC0) != 0x80) ok = 0;
                if (!ok) break;
                j += (size_t)w;
            }
            if (j > i) {
                FRT_TRY(tok_buf_put(out, p + i, j - i));
                i = j;
                continue;
            }
            int w = utf8_width(b);
            if (!w) {
                FRT_TRY(tok_buf_put(out, utf8_replacement, 3));
                i++;
                continue;
            }
            st->pend[0] = b;
            st->n = 1;
            st->need = w;
            i++;
            continue;
        }
        int ok = st->n == 1 ? utf8_second_ok(st->pend[0], b) : (b & 0xC0) == 0x80;
        if (!ok) {
            /* the held bytes are one maximal invalid subpart; B starts over */
            FRT_TRY(tok_buf_put(out, utf8_replacement, 3));
            st->n = 0;
            continue;
        }
        st->pend[st->n++] = b;
        i++;
        if (st->n == st->need) {
            FRT_TRY(tok_buf_put(out, st->pend, (size_t)st->n));
            st->n = 0;
        }
    }
    return 0;
}

int tok_utf8_lossy_finish(tok_utf8_state *st, tok_buf *out)
{
    if (st->n) {
        st->n = 0;
        return tok_buf_put(out, utf8_replacement, 3);
    }
    return 0;
}

/* ---- byte-level alphabet ----------------------------------------------------------- */
/* bytes_char() of pre_tokenizers/byte_level.rs (GPT-2 encoder.py): the
 * printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF stand for themselves; the
 * other 68 bytes, in increasing order, for U+0100, U+0101, ... */
static int byte_printable(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static uint32_t byte_to_char[256];
static int16_t char_to_byte[256 + 68];
static pthread_once_t byte_map_once = PTHREAD_ONCE_INIT;

static void byte_map_init(void)
{
    uint32_t n = 0;
    for (unsigned i = 0; i < 256 + 68; i++) char_to_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        byte_to_char[b] = byte_printable(b) ? b : 256 + n++;
        char_to_byte[byte_to_char[b]] = (int16_t)b;
    }
}

uint32_t tok_byte_char(unsigned char b)
{
    pthread_once(&byte_map_once, byte_map_init);
    return byte_to_char[b];
}

int tok_char_byte(uint32_t cp)
{
    pthread_once(&byte_map_once, byte_map_init);
    return cp < 256 + 68 ? char_to_byte[cp] : -1;
}
