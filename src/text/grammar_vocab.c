/*
 * text/grammar_vocab.c - the token trie of a vocabulary and the
 * allowed-token mask of a grammar state (frt/grammar.h).
 *
 * The trie is stored in preorder: node i holds one byte, its depth (1 for
 * a first byte) and the end of its subtree (end[i]: the next node that is
 * not below it), so the walk is one pass over arrays: advance the state of
 * depth d-1 by node i's byte into the state of depth d; on a refusal jump
 * to end[i] (the whole subtree is refused). Tokens with equal bytes share a
 * node (the ids of a node are ids[tok_at[i] .. tok_at[i+1])).
 *
 * The string fast path: inside a JSON string (after a complete character,
 * no escape due, no part of a guard matched) a token made only of plain
 * string characters (printable ASCII but '"', '\' and '<', which may start
 * a grammar's guard "</tool_call>"; UTF-8 characters, the last one possibly
 * cut short) is allowed exactly when its character count fits maxLength. Those tokens are the mask
 * plain_le[c] (c = the room left, up to PLAIN_TABLE) or plain_all; the walk
 * then skips every subtree holding only such tokens (all_plain) and visits
 * the rest (quotes, escapes, partial UTF-8).
 */
#include "text/grammar_int.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define PLAIN_TABLE 32

enum { K_NONE, K_TRIE, K_SPECIAL, K_EOS };

typedef struct special_tok {
    int32_t id;
    const char *bytes; /* in the blob */
    size_t len;
} special_tok;

struct frt_grammar_vocab {
    int vocab;                /* ids masks cover */
    int64_t n_words;
    /* the trie, preorder */
    int64_t n_nodes;
    uint8_t *byte;
    uint16_t *depth;
    uint8_t *all_plain;
    int64_t *rest, *rest_end; /* the nodes that are not all_plain, in preorder, and the end of each one's
                                 subtree among them: what the string fast path walks */
    int64_t n_rest;
    int64_t *end;
    int64_t *tok_at;          /* [n_nodes + 1] */
    int32_t *ids;             /* token ids grouped by node */
    int max_len;
    /* the string fast path */
    uint32_t *plain_le;       /* [PLAIN_TABLE + 1][n_words] */
    uint32_t *plain_all;      /* [n_words] */
    int32_t *long_plain;      /* plain tokens of more than PLAIN_TABLE characters, by count */
    uint16_t *long_plain_cps;
    int n_long_plain;
    int max_plain_cps;
    /* every token's bytes: blob[off[id] .. off[id + 1]); kind[id] K_* */
    uint8_t *blob;
    int64_t *off;
    uint8_t *kind;
    /* tokens outside the trie */
    special_tok *special;
    int n_special;
    int32_t eos[16];
    int n_eos;
};

/* Masks of recent states: a mask is a function of the state alone, and a
 * long string body, a repeated key position or list separator come back to
 * an equal state. */
#define MASK_CACHE 8

typedef struct mask_entry {
    frt_grammar_state *key; /* NULL = empty */
    uint32_t *mask;         /* [n_words] */
    int64_t count;
    uint64_t used;          /* LRU stamp */
} mask_entry;

struct frt_grammar_matcher {
    mask_entry cache[MASK_CACHE];
    uint64_t clock;
    const frt_grammar *g;
    const frt_grammar_vocab *v;
    frt_grammar_state *st;
    frt_grammar_state *scratch; /* [max_len + 1] states of the walk */
    int32_t *tag_ids;           /* tokens whose text is a tag of the grammar (special or not) */
    int n_tags;
    int ended;
};

static void set_bit(uint32_t *m, int32_t id) { m[id >> 5] |= 1u << (id & 31); }

/* ---- plain string characters ------------------------------------------------- */

/* The code points of s when it is only plain string characters (the last
 * one possibly cut short: a valid start of a UTF-8 sequence), else -1.
 * From a string body after a complete character such a token is taken
 * exactly when its code points fit. */
static int plain_cps(const uint8_t *s, size_t n)
{
    int cps = 0;
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b < 0x80) {
            if (b < 0x20 || b == '"' || b == '\\' || b == '<') return -1; /* '<' may start a grammar's guard */
            need = 0;
        } else if (b >= 0xC2 && b <= 0xDF) need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else
            return -1;
        for (size_t k = 1; k <= need && i + k < n; k++) { /* a last character may be cut short */
            uint8_t c = s[i + k];
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return -1;
        }
        i += need + 1;
        cps++;
    }
    return cps;
}

/* ---- building ----------------------------------------------------------------- */

typedef struct tok_ref {
    const uint8_t *b;
    size_t n;
    int32_t id;
} tok_ref;

static int cmp_ref(const void *pa, const void *pb)
{
    const tok_ref *a = pa, *b = pb;
    size_t n = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->b, b->b, n);
    if (c) return c;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int vocab_alloc(frt_grammar_vocab *v, int64_t max_nodes, int n_trie)
{
    v->byte = malloc((size_t)max_nodes);
    v->depth = malloc((size_t)max_nodes * sizeof *v->depth);
    v->all_plain = malloc((size_t)max_nodes);
    v->end = malloc((size_t)max_nodes * sizeof *v->end);
    v->tok_at = calloc((size_t)max_nodes + 1, sizeof *v->tok_at);
    v->ids = malloc((size_t)(n_trie ? n_trie : 1) * sizeof *v->ids);
    v->plain_le = calloc((size_t)(PLAIN_TABLE + 1) * (size_t)v->n_words, sizeof *v->plain_le);
    v->plain_all = calloc((size_t)v->n_words, sizeof *v->plain_all);
    v->long_plain = malloc((size_t)(n_trie ? n_trie : 1) * sizeof *v->long_plain);
    v->long_plain_cps = malloc((size_t)(n_trie ? n_trie : 1) * sizeof *v->long_plain_cps);
    return v->byte && v->depth && v->all_plain && v->end && v->tok_at && v->ids && v->plain_le && v->plain_all &&
                   v->long_plain && v->long_plain_cps
               ? 0
               : FRT_ERR_OUT_OF_MEMORY;
}

/* Records token r (plain or not) in the fast-path tables. */
static void note_plain(frt_grammar_vocab *v, const tok_ref *r, int *plain)
{
    int cps = plain_cps(r->b, r->n);
    *plain = cps >= 0;
    if (cps < 0) return;
    set_bit(v->plain_all, r->id);
    if (cps > v->max_plain_cps) v->max_plain_cps = cps;
    if (cps > PLAIN_TABLE) {
        v->long_plain[v->n_long_plain] = r->id;
        v->long_plain_cps[v->n_long_plain++] = (uint16_t)(cps > UINT16_MAX ? UINT16_MAX : cps);
        return;
    }
    for (int c = cps; c <= PLAIN_TABLE; c++) set_bit(v->plain_le + (size_t)c * (size_t)v->n_words, r->id);
}

/* The first index of rest[0..n) (ascending) holding a node >= x. */
static int64_t lower_bound(const int64_t *rest, int64_t n, int64_t x)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rest[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The nodes that are not all_plain form a subtree at the root (a node above
 * one that is not is not either): their preorder list and subtree ends. */
static int build_rest(frt_grammar_vocab *v)
{
    v->rest = malloc((size_t)(v->n_nodes ? v->n_nodes : 1) * sizeof *v->rest);
    v->rest_end = malloc((size_t)(v->n_nodes ? v->n_nodes : 1) * sizeof *v->rest_end);
    if (!v->rest || !v->rest_end) return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab");
    for (int64_t i = 0; i < v->n_nodes; i++)
        if (!v->all_plain[i]) v->rest[v->n_rest++] = i;
    for (int64_t k = 0; k < v->n_rest; k++) v->rest_end[k] = lower_bound(v->rest, v->n_rest, v->end[v->rest[k]]);
    return 0;
}

/* The preorder trie of the sorted tokens refs[0..n). */
static int build_trie(frt_grammar_vocab *v, const tok_ref *refs, int n)
{
    int64_t max_nodes = 0;
    for (int i = 0; i < n; i++) max_nodes += (int64_t)refs[i].n;
    for (int i = 0; i < n; i++)
        if ((int)refs[i].n > v->max_len) v->max_len = (int)refs[i].n;
    if (v->max_len > UINT16_MAX) return frt_error(FRT_ERR_UNSUPPORTED, "grammar vocab: a token of %d bytes", v->max_len);
    FRT_TRY(vocab_alloc(v, max_nodes, n) ? frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab") : 0);
    int64_t *path = malloc((size_t)(v->max_len + 1) * sizeof *path), *parent = malloc((size_t)(max_nodes ? max_nodes : 1) * sizeof *parent);
    if (!path || !parent) {
        free(path);
        free(parent);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab");
    }
    int64_t nn = 0;
    int open = 0; /* path[0..open) = nodes of the previous token's bytes */
    for (int i = 0; i < n; i++) {
        const tok_ref *r = &refs[i];
        int lcp = 0;
        if (i) {
            const tok_ref *p = &refs[i - 1];
            while (lcp < open && (size_t)lcp < r->n && p->b[lcp] == r->b[lcp]) lcp++;
        }
        for (int d = open - 1; d >= lcp; d--) v->end[path[d]] = nn;
        open = lcp;
        for (size_t d = (size_t)lcp; d < r->n; d++) {
            v->byte[nn] = r->b[d];
            v->depth[nn] = (uint16_t)(d + 1);
            v->all_plain[nn] = 1;
            parent[nn] = d ? path[d - 1] : -1;
            path[open++] = nn++;
        }
        int plain;
        note_plain(v, r, &plain);
        int64_t at = path[r->n - 1];
        v->tok_at[at + 1]++; /* counts, summed below */
        v->ids[i] = r->id;
        if (!plain) v->all_plain[at] = 0;
    }
    for (int d = open - 1; d >= 0; d--) v->end[path[d]] = nn;
    v->n_nodes = nn;
    for (int64_t i = 0; i < nn; i++) v->tok_at[i + 1] += v->tok_at[i];
    for (int64_t i = nn - 1; i > 0; i--)
        if (parent[i] >= 0 && !v->all_plain[i]) v->all_plain[parent[i]] = 0;
    free(path);
    free(parent);
    return build_rest(v);
}

/* Copies every token's bytes into the blob and marks its kind. */
static int vocab_blob(frt_grammar_vocab *v, int n_tokens, const uint8_t *const *bytes, const size_t *lens,
                      const uint8_t *special)
{
    int64_t total = 0;
    for (int32_t id = 0; id < n_tokens; id++) total += bytes[id] ? (int64_t)lens[id] : 0;
    v->blob = malloc((size_t)(total ? total : 1));
    v->off = malloc(((size_t)n_tokens + 1) * sizeof *v->off);
    v->kind = calloc((size_t)(n_tokens ? n_tokens : 1), 1);
    if (!v->blob || !v->off || !v->kind) return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab");
    int64_t at = 0;
    for (int32_t id = 0; id < n_tokens; id++) {
        v->off[id] = at;
        if (!bytes[id] || !lens[id]) continue;
        memcpy(v->blob + at, bytes[id], lens[id]);
        at += (int64_t)lens[id];
        v->kind[id] = special && special[id] ? K_SPECIAL : K_TRIE;
    }
    v->off[n_tokens] = at;
    for (int k = 0; k < v->n_eos; k++) v->kind[v->eos[k]] = K_EOS;
    return 0;
}

/* Splits the ids into trie tokens (sorted refs) and special tokens. */
static int vocab_fill(frt_grammar_vocab *v, int n_tokens, const uint8_t *const *bytes, const size_t *lens,
                      const uint8_t *special)
{
    FRT_TRY(vocab_blob(v, n_tokens, bytes, lens, special));
    tok_ref *refs = malloc((size_t)(n_tokens ? n_tokens : 1) * sizeof *refs);
    v->special = calloc((size_t)(n_tokens ? n_tokens : 1), sizeof *v->special);
    if (!refs || !v->special) {
        free(refs);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab");
    }
    int n = 0;
    for (int32_t id = 0; id < n_tokens; id++) {
        const uint8_t *b = v->blob + v->off[id];
        size_t len = (size_t)(v->off[id + 1] - v->off[id]);
        if (v->kind[id] == K_SPECIAL) v->special[v->n_special++] = (special_tok){id, (const char *)b, len};
        else if (v->kind[id] == K_TRIE) refs[n++] = (tok_ref){b, len, id};
    }
    qsort(refs, (size_t)n, sizeof *refs, cmp_ref);
    int rc = build_trie(v, refs, n);
    free(refs);
    return rc;
}

int frt_grammar_vocab_create_bytes(int n_tokens, const uint8_t *const *bytes, const size_t *lens,
                                   const uint8_t *special, const int32_t *eos_ids, int n_eos,
                                   frt_grammar_vocab **out)
{
    if (!out || n_tokens < 0 || (n_tokens && (!bytes || !lens)) || (n_eos && !eos_ids) || n_eos < 0 || n_eos > 16)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar vocab: NULL argument or more than 16 end ids");
    *out = NULL;
    frt_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab");
    v->vocab = n_tokens;
    v->n_words = ((int64_t)n_tokens + 31) / 32;
    v->n_eos = 0;
    for (int k = 0; k < n_eos; k++)
        if (eos_ids[k] >= 0 && eos_ids[k] < n_tokens) v->eos[v->n_eos++] = eos_ids[k];
    int rc = vocab_fill(v, n_tokens, bytes, lens, special);
    if (rc) {
        frt_grammar_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int frt_grammar_vocab_create(const frt_tokenizer *tok, const int32_t *eos_ids, int n_eos, int vocab_size,
                             frt_grammar_vocab **out)
{
    if (!tok || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar vocab: NULL argument");
    int n = frt_tokenizer_vocab_size(tok);
    if (vocab_size < n) vocab_size = n;
    const uint8_t **b = calloc((size_t)vocab_size, sizeof *b);
    size_t *l = calloc((size_t)vocab_size, sizeof *l);
    uint8_t *sp = calloc((size_t)vocab_size, 1);
    int rc = b && l && sp ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar vocab");
    for (int32_t id = 0; id < n && !rc; id++) {
        const char *t;
        if (frt_tokenizer_token_bytes(tok, id, &t, &l[id]) == 0) b[id] = (const uint8_t *)t;
        sp[id] = (uint8_t)frt_tokenizer_is_special(tok, id);
    }
    if (!rc) rc = frt_grammar_vocab_create_bytes(vocab_size, b, l, sp, eos_ids, n_eos, out);
    free(b);
    free(l);
    free(sp);
    return rc;
}

void frt_grammar_vocab_free(frt_grammar_vocab *v)
{
    if (!v) return;
    free(v->special);
    free(v->blob);
    free(v->off);
    free(v->kind);
    free(v->byte);
    free(v->depth);
    free(v->all_plain);
    free(v->rest);
    free(v->rest_end);
    free(v->end);
    free(v->tok_at);
    free(v->ids);
    free(v->plain_le);
    free(v->plain_all);
    free(v->long_plain);
    free(v->long_plain_cps);
    free(v);
}

int frt_grammar_vocab_size(const frt_grammar_vocab *v) { return v ? v->vocab : 0; }
int64_t frt_grammar_vocab_nodes(const frt_grammar_vocab *v) { return v ? v->n_nodes : 0; }

/* ---- matchers ------------------------------------------------------------------- */

/* The ids (special or not) whose text is tag. */
static void add_tag_ids(frt_grammar_matcher *m, const char *tag)
{
    const frt_grammar_vocab *v = m->v;
    size_t n = strlen(tag);
    for (int32_t id = 0; id < v->vocab && m->n_tags < 64; id++)
        if ((v->kind[id] == K_TRIE || v->kind[id] == K_SPECIAL) && v->off[id + 1] - v->off[id] == (int64_t)n &&
            !memcmp(v->blob + v->off[id], tag, n))
            m->tag_ids[m->n_tags++] = id;
}

int frt_grammar_matcher_create(const frt_grammar *g, const frt_grammar_vocab *v, frt_grammar_matcher **out)
{
    if (!g || !v || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar matcher: NULL argument");
    *out = NULL;
    frt_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar matcher");
    m->g = g;
    m->v = v;
    m->scratch = malloc((size_t)(v->max_len + 3) * sizeof *m->scratch);
    m->tag_ids = malloc(64 * sizeof *m->tag_ids);
    int rc = m->scratch && m->tag_ids ? frt_grammar_state_create(g, &m->st) : FRT_ERR_OUT_OF_MEMORY;
    for (int i = 0; !rc && i < g->n_tags; i++) add_tag_ids(m, g->tags[i]);
    if (rc) {
        frt_grammar_matcher_free(m);
        return rc == FRT_ERR_OUT_OF_MEMORY ? frt_error(rc, "grammar matcher") : rc;
    }
    for (int i = 0; i < v->max_len + 3; i++) m->scratch[i].g = g;
    *out = m;
    return 0;
}

void frt_grammar_matcher_free(frt_grammar_matcher *m)
{
    if (!m) return;
    for (int i = 0; i < MASK_CACHE; i++) {
        free(m->cache[i].key);
        free(m->cache[i].mask);
    }
    frt_grammar_state_free(m->st);
    free(m->scratch);
    free(m->tag_ids);
    free(m);
}

frt_grammar_state *frt_grammar_matcher_state(frt_grammar_matcher *m) { return m ? m->st : NULL; }
int frt_grammar_matcher_ended(const frt_grammar_matcher *m) { return m ? m->ended : 0; }

void frt_grammar_matcher_reset(frt_grammar_matcher *m)
{
    if (!m) return;
    frt_grammar_state_reset(m->st);
    m->ended = 0;
}

static int is_tag(const frt_grammar_matcher *m, int32_t id)
{
    for (int i = 0; i < m->n_tags; i++)
        if (m->tag_ids[i] == id) return 1;
    return 0;
}

/* Advances src by s[0..n) into dst through the scratch states; 1 when accepted. */
static int walk_bytes(frt_grammar_matcher *m, const frt_grammar_state *src, const uint8_t *s, size_t n,
                      frt_grammar_state **end)
{
    const frt_grammar_state *cur = src;
    for (size_t i = 0; i < n; i++) {
        frt_grammar_state *next = &m->scratch[(i & 1) + 1];
        if (!g_advance(cur, next, s[i])) return 0;
        cur = next;
    }
    *end = (frt_grammar_state *)cur;
    return 1;
}

/* A tag token (e.g. <tool_call>) is allowed where the grammar takes its
 * text outside a string: inside a JSON string its text would end up in the
 * content, where the tool-call parser would take it for a tag. */
static int tag_allowed(frt_grammar_matcher *m, const uint8_t *s, size_t n)
{
    int room;
    frt_grammar_state *end;
    if (g_in_string_body(m->st, &room)) return 0;
    return walk_bytes(m, m->st, s, n, &end);
}

/* The plain-string tokens that fit room characters (-1: any). */
static void or_plain(const frt_grammar_vocab *v, uint32_t *allowed, int room)
{
    const uint32_t *src = room < 0 || room >= v->max_plain_cps ? v->plain_all
                          : v->plain_le + (size_t)(room < PLAIN_TABLE ? room : PLAIN_TABLE) * (size_t)v->n_words;
    for (int64_t w = 0; w < v->n_words; w++) allowed[w] |= src[w];
    if (room > PLAIN_TABLE && room < v->max_plain_cps)
        for (int i = 0; i < v->n_long_plain; i++)
            if (v->long_plain_cps[i] <= room) set_bit(allowed, v->long_plain[i]);
}

/* Advances the state of node i's parent by node i's byte into the state of
 * its depth and sets the tokens of node i; 0 when the byte is refused. */
static int visit(frt_grammar_matcher *m, uint32_t *allowed, int64_t i)
{
    const frt_grammar_vocab *v = m->v;
    int d = v->depth[i];
    const frt_grammar_state *src = d == 1 ? m->st : &m->scratch[d - 1];
    if (!g_advance(src, &m->scratch[d], v->byte[i])) return 0;
    for (int64_t k = v->tok_at[i]; k < v->tok_at[i + 1]; k++) set_bit(allowed, v->ids[k]);
    return 1;
}

/* The trie walk: every token whose bytes the state takes; a refused byte
 * skips its subtree. In a string body (fast) only the nodes that are not
 * all_plain are walked (or_plain set the rest). */
static void walk_trie(frt_grammar_matcher *m, uint32_t *allowed, int fast)
{
    const frt_grammar_vocab *v = m->v;
    if (fast) {
        for (int64_t k = 0; k < v->n_rest;) k = visit(m, allowed, v->rest[k]) ? k + 1 : v->rest_end[k];
        return;
    }
    for (int64_t i = 0; i < v->n_nodes;) i = visit(m, allowed, i) ? i + 1 : v->end[i];
}

/* The mask of m's state, computed. */
static int64_t mask_compute(frt_grammar_matcher *m, uint32_t *allowed)
{
    const frt_grammar_vocab *v = m->v;
    int room, fast = g_in_string_body(m->st, &room);
    if (fast) or_plain(v, allowed, room);
    walk_trie(m, allowed, fast);
    for (int i = 0; i < m->n_tags; i++) { /* tags: allowed only outside strings */
        int32_t id = m->tag_ids[i];
        if (tag_allowed(m, v->blob + v->off[id], (size_t)(v->off[id + 1] - v->off[id]))) set_bit(allowed, id);
        else allowed[m->tag_ids[i] >> 5] &= ~(1u << (m->tag_ids[i] & 31));
    }
    if (frt_grammar_state_complete(m->st))
        for (int k = 0; k < v->n_eos; k++) set_bit(allowed, v->eos[k]);
    int64_t count = 0;
    for (int64_t w = 0; w < v->n_words; w++) count += __builtin_popcount(allowed[w]);
    return count;
}

/* Stores the mask of m's state in the least recently used entry (skipped when out of memory). */
static void cache_put(frt_grammar_matcher *m, const uint32_t *allowed, int64_t count)
{
    mask_entry *e = &m->cache[0];
    for (int i = 1; i < MASK_CACHE; i++)
        if (m->cache[i].used < e->used) e = &m->cache[i];
    if (!e->key && !(e->key = malloc(sizeof *e->key))) return;
    if (!e->mask && !(e->mask = malloc((size_t)m->v->n_words * sizeof *e->mask))) return;
    g_copy(e->key, m->st);
    memcpy(e->mask, allowed, (size_t)m->v->n_words * sizeof *allowed);
    e->count = count;
    e->used = ++m->clock;
}

int64_t frt_grammar_matcher_mask(frt_grammar_matcher *m, uint32_t *allowed, int64_t n_words)
{
    if (!m || !allowed || n_words < m->v->n_words)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar mask: NULL argument or fewer than %lld words",
                         m ? (long long)m->v->n_words : 0ll);
    memset(allowed, 0, (size_t)n_words * sizeof *allowed);
    if (m->ended) return 0;
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *e = &m->cache[i];
        if (e->used && g_equal(e->key, m->st)) {
            memcpy(allowed, e->mask, (size_t)m->v->n_words * sizeof *allowed);
            e->used = ++m->clock;
            return e->count;
        }
    }
    int64_t count = mask_compute(m, allowed);
    cache_put(m, allowed, count);
    return count;
}

int frt_grammar_matcher_accept(frt_grammar_matcher *m, int32_t id)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar accept: NULL matcher");
    const frt_grammar_vocab *v = m->v;
    if (id < 0 || id >= v->vocab || v->kind[id] == K_NONE)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "grammar accept: id %d names no token", id);
    if (m->ended) return frt_error(FRT_ERR_STATE, "grammar accept: the output already ended");
    if (v->kind[id] == K_EOS) {
        if (!frt_grammar_state_complete(m->st))
            return frt_error(FRT_ERR_MISMATCH, "grammar accept: end of sequence before the output is complete");
        m->ended = 1;
        return 0;
    }
    const uint8_t *b = v->blob + v->off[id];
    size_t n = (size_t)(v->off[id + 1] - v->off[id]);
    frt_grammar_state *end;
    int tag = is_tag(m, id), ok;
    if (tag) ok = tag_allowed(m, b, n) && walk_bytes(m, m->st, b, n, &end);
    else ok = v->kind[id] == K_TRIE && walk_bytes(m, m->st, b, n, &end);
    if (!ok) return frt_error(FRT_ERR_MISMATCH, "grammar accept: token %d is not allowed here", id);
    g_copy(m->st, end);
    return 0;
}
