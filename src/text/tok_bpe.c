/* tok_bpe.c - the BPE merge of one pre-tokenized word.
 *
 * Follows tokenizers/src/models/bpe/model.rs (merge_word, tokenize_with_cache
 * for ignore_merges) and word.rs (Word::merge_all) step for step, so ties and
 * stale queue entries resolve exactly as the Rust library resolves them:
 *
 *   - the word starts as one symbol per character (with the unk_token /
 *     fuse_unk rules for characters not in the vocabulary, and characters
 *     silently dropped when there is no unk_token);
 *   - every adjacent pair that has a merge goes into a min-heap ordered by
 *     (rank, position); the top is merged unless it went stale (its left
 *     symbol was absorbed, has no right neighbour any more, or the pair now
 *     there merges into a different token); the new pairs with the left and
 *     right neighbours are pushed.
 *
 * The symbols form a doubly linked list inside one array, so each merge is
 * O(1) plus O(log n) heap work: a word of n characters costs O(n log n),
 * whatever the input (a megabyte of one repeated character included). */
#include "text/tok_internal.h"
#include "util/error.h"

#include <stdlib.h>

struct tok_symbol {
    int32_t c;     /* token id */
    int32_t prev;  /* index of the previous live symbol, -1 none */
    int32_t next;  /* index of the next live symbol, -1 none */
    uint32_t len;  /* bytes covered; 0 = merged into its left neighbour */
};

struct tok_heap_item {
    uint64_t key;  /* rank << 32 | position: the heap is a min-heap on it */
    int32_t new_id;
};

/* A 4-ary min-heap (as dary_heap's QuaternaryHeap in tokenizers): half the
 * depth of a binary heap, so fewer cache misses on long words. The pop order
 * is fixed by the keys alone, (rank, position) being unique per live pair. */
static void heap_push(struct tok_heap_item *h, size_t *n, uint64_t key, int32_t id)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (h[parent].key <= key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i].key = key;
    h[i].new_id = id;
}

static struct tok_heap_item heap_pop(struct tok_heap_item *h, size_t *n)
{
    struct tok_heap_item top = h[0];
    struct tok_heap_item last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= m) break;
        size_t end = c + 4 < m ? c + 4 : m, best = c;
        for (size_t k = c + 1; k < end; k++)
            if (h[k].key < h[best].key) best = k;
        if (last.key <= h[best].key) break;
        h[i] = h[best];
        i = best;
    }
    if (m) h[i] = last;
    return top;
}

static int scratch_reserve(tok_bpe_scratch *sc, size_t nsym)
{
    if (sc->sym_cap < nsym) {
        size_t cap = nsym < 64 ? 64 : nsym;
        struct tok_symbol *s = realloc(sc->sym, cap * sizeof *s);
        if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (BPE word)");
        sc->sym = s;
        sc->sym_cap = cap;
    }
    /* every merge pushes at most two entries: n initial + 2 (n - 1) */
    size_t hcap = 3 * nsym + 1;
    if (sc->heap_cap < hcap) {
        size_t cap = hcap < 192 ? 192 : hcap;
        struct tok_heap_item *h = realloc(sc->heap, cap * sizeof *h);
        if (!h) return frt_error(FRT_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (BPE heap)");
        sc->heap = h;
        sc->heap_cap = cap;
    }
    return 0;
}

void tok_bpe_scratch_free(tok_bpe_scratch *sc)
{
    free(sc->sym);
    free(sc->heap);
    sc->sym = NULL;
    sc->heap = NULL;
    sc->sym_cap = sc->heap_cap = 0;
}

static void add_symbol(struct tok_symbol *sym, size_t *nsym, int32_t c, uint32_t len)
{
    size_t i = (*nsym)++;
    sym[i].c = c;
    sym[i].prev = (int32_t)i - 1;
    sym[i].next = -1;
    sym[i].len = len;
    if (i) sym[i - 1].next = (int32_t)i;
}

/* Word::merge_all without dropout. */
static void merge_all(const frt_tokenizer *tok, struct tok_symbol *sym, size_t nsym,
                      struct tok_heap_item *heap)
{
    size_t nh = 0;
    for (size_t i = 0; i + 1 < nsym; i++) {
        const tok_pair_entry *e = tok_pairmap_get(&tok->merges, sym[i].c, sym[i + 1].c);
        if (e) heap_push(heap, &nh, (uint64_t)e->rank << 32 | i, e->id);
    }
    while (nh) {
        struct tok_heap_item top = heap_pop(heap, &nh);
        size_t pos = (size_t)(top.key & 0xffffffffu);
        if (sym[pos].len == 0) continue;  /* absorbed by its left neighbour */
        if (sym[pos].next == -1) continue; /* last symbol */
        int32_t next_pos = sym[pos].next;
        struct tok_symbol right = sym[next_pos];
        /* an expired entry: the pair now at pos merges into something else */
        const tok_pair_entry *e = tok_pairmap_get(&tok->merges, sym[pos].c, right.c);
        if (!e || e->id != top.new_id) continue;

        sym[pos].c = top.new_id;
        sym[pos].len += right.len;
        sym[pos].next = right.next;
        sym[next_pos].len = 0;
        if (right.next > -1 && (size_t)right.next < nsym) sym[right.next].prev = (int32_t)pos;

        struct tok_symbol cur = sym[pos];
        if (cur.prev >= 0) {
            e = tok_pairmap_get(&tok->merges, sym[cur.prev].c, cur.c);
            if (e) heap_push(heap, &nh, (uint64_t)e->rank << 32 | (uint32_t)cur.prev, e->id);
        }
        if (cur.next >= 0 && (size_t)cur.next < nsym) {
            e = tok_pairmap_get(&tok->merges, cur.c, sym[cur.next].c);
            if (e) heap_push(heap, &nh, (uint64_t)e->rank << 32 | pos, e->id);
        }
    }
}

int tok_bpe_word(const frt_tokenizer *tok, tok_bpe_scratch *sc, const char *s, size_t n,
                 int mapped, tok_idvec *ids)
{
    if (n == 0) return 0;
    if (!mapped) {
        int32_t id = tok->ignore_merges ? tok_strmap_get(&tok->vocab, s, n) : -1;
        return id >= 0 ? tok_idvec_push(ids, id) : tok_bpe_merge_word(tok, sc, s, n, 0, ids);
    }
    /* a byte-level word that is one vocabulary entry: with ignore_merges that
     * entry; else that entry when its text merges into it, which the merge
     * loop tells the first time and word_state remembers */
    int32_t id = tok_strmap_get(&tok->word_ids, s, n);
    if (id < 0) return tok_bpe_merge_word(tok, sc, s, n, 1, ids);
    if (tok->ignore_merges) return tok_idvec_push(ids, id);
    int st = atomic_load_explicit(&tok->word_state[id], memory_order_relaxed);
    if (st == TOK_WORD_SELF) return tok_idvec_push(ids, id);
    size_t n0 = ids->n;
    FRT_TRY(tok_bpe_merge_word(tok, sc, s, n, 1, ids));
    if (st == TOK_WORD_UNKNOWN)
        atomic_store_explicit(&tok->word_state[id],
                              ids->n == n0 + 1 && ids->v[n0] == id ? TOK_WORD_SELF : TOK_WORD_MERGED,
                              memory_order_relaxed);
    return 0;
}

int tok_bpe_merge_word(const frt_tokenizer *tok, tok_bpe_scratch *sc, const char *s, size_t n,
                       int mapped, tok_idvec *ids)
{
    if (n == 0) return 0;
    if (n > 0xffffffffu) return frt_error(FRT_ERR_INVALID_ARGUMENT, "tokenizer: word of %zu bytes", n);
    FRT_TRY(scratch_reserve(sc, n));
    struct tok_symbol *sym = sc->sym;
    size_t nsym = 0;
    int has_unk = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t clen;
        int32_t id;
        if (mapped) {
            clen = 1;
            id = tok->byte_id[(unsigned char)s[i]];
        } else {
            clen = (uint32_t)tok_utf8_len((unsigned char)s[i]);
            id = tok_strmap_get(&tok->vocab, s + i, clen);
        }
        i += clen;
        if (id >= 0) {
            if (has_unk) {
                add_symbol(sym, &nsym, unk_id, unk_len);
                has_unk = 0;
            }
            add_symbol(sym, &nsym, id, clen);
            continue;
        }
        if (!tok->unk) continue; /* no unk_token: the character is dropped */
        if (has_unk && tok->fuse_unk) {
            unk_len += clen;
            continue;
        }
        int32_t uid = tok_strmap_get(&tok->vocab, tok->unk, tok->unk_len);
        if (uid < 0)
            return frt_error(FRT_ERR_FORMAT, "tokenizer: unk token `%s` not found in the vocabulary",
                             tok->unk);
        if (has_unk) add_symbol(sym, &nsym, unk_id, unk_len);
        has_unk = 1;
        unk_id = uid;
        unk_len = clen;
    }
    if (has_unk) add_symbol(sym, &nsym, unk_id, unk_len);
    if (nsym > 1) merge_all(tok, sym, nsym, sc->heap);
    for (size_t k = 0; k < nsym; k++)
        if (sym[k].len) FRT_TRY(tok_idvec_push(ids, sym[k].c));
    return 0;
}
