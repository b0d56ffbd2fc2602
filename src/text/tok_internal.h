/*
 * text/tok_internal.h - the tokenizer's internals, shared by tokenizer.c
 * (load, encode pipeline, public API) and the tok_*.c helpers:
 *
 *   tok_util.c    arena, string -> id and pair -> merge hash tables, UTF-8
 *   tok_regex.c   Oniguruma-syntax regex -> PCRE2 (UTF | UCP | JIT), and the
 *                 match iteration of the onig crate (FindMatches)
 *   tok_split_fast.c  the Llama 3 / Qwen split patterns without PCRE2 (a
 *                 class table PCRE2 fills; PCRE2 where it cannot decide)
 *   tok_bpe.c     the BPE merge loop (tokenizers/src/models/bpe/word.rs)
 *   tok_added.c   added-token matching (tokenizers/src/tokenizer/added_vocabulary.rs)
 *   tok_decode.c  ByteLevel decoding, lossy UTF-8, the streaming decoder
 *
 * Nothing here is public: callers use model/tokenizer.h.
 */
#ifndef FRT_TEXT_TOK_INTERNAL_H
#define FRT_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdatomic.h>
#include <stddef.h>
#include <jansson.h>
#include <stdint.h>

#include "frt/tokenizer.h"
#include "text/span.h"

/* Largest token id frt accepts in a tokenizer.json (the per-id tables are
 * dense): 16 M ids, far above any published vocabulary. */
#define TOK_MAX_ID (1 << 24)

/* ---- arena: stable storage for the strings of the vocabulary ------------ */
typedef struct tok_arena_block tok_arena_block;
typedef struct tok_arena {
    tok_arena_block *head;
} tok_arena;

/* Copies N bytes (plus a NUL) into the arena; NULL when out of memory. The
 * copy lives until tok_arena_free. */
char *tok_arena_dup(tok_arena *a, const char *s, size_t n);
void tok_arena_free(tok_arena *a);

/* ---- string -> int32 map (open addressing, xxh3 hashes) ----------------- */
typedef struct tok_strmap_entry {
    const char *key; /* not owned (arena) */
    uint32_t len;
    int32_t val;
    uint64_t hash;
} tok_strmap_entry;

typedef struct tok_strmap {
    tok_strmap_entry *e; /* capacity entries, key NULL = empty */
    size_t cap, n;
} tok_strmap;

/* Inserts or overwrites KEY (not copied: it must outlive the map). Returns 0,
 * or FRT_ERR_OUT_OF_MEMORY. *old receives the previous value or -1. */
int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val, int32_t *old);
/* Makes room for N entries in all, so that filling it rehashes nothing.
 * 0 or FRT_ERR_OUT_OF_MEMORY (the map unchanged). */
int tok_strmap_reserve(tok_strmap *m, size_t n);
/* The value of KEY, or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);
void tok_strmap_free(tok_strmap *m);

/* ---- pair -> (rank, merged id) map -------------------------------------- */
typedef struct tok_pair_entry {
    uint64_t key; /* (uint64)left << 32 | right; UINT64_MAX = empty */
    uint32_t rank;
    int32_t id;
} tok_pair_entry;

typedef struct tok_pairmap {
    tok_pair_entry *e;
    size_t cap, n;
} tok_pairmap;

/* Inserts or overwrites (a later merge of the same pair wins, as the Rust
 * HashMap collect does). 0 or FRT_ERR_OUT_OF_MEMORY. */
int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);
/* Makes room for N pairs in all (as tok_strmap_reserve). */
int tok_pairmap_reserve(tok_pairmap *m, size_t n);
/* The entry of (a, b) or NULL. */
const tok_pair_entry *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b);
void tok_pairmap_free(tok_pairmap *m);

/* ---- growable buffers ---------------------------------------------------- */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;

int tok_buf_reserve(tok_buf *b, size_t extra);
int tok_buf_put(tok_buf *b, const void *s, size_t n);
void tok_buf_free(tok_buf *b);

/* ---- UTF-8 ---------------------------------------------------------------- */
/* 1 when S[0..N) is valid UTF-8 (no surrogates, no overlongs, <= U+10FFFF). */
int tok_utf8_valid(const char *s, size_t n);
/* Length of the UTF-8 sequence that starts with byte B (1 for an invalid
 * lead byte, so callers always advance). */
int tok_utf8_len(unsigned char b);
/* Decodes the character at S (valid UTF-8, at least one byte); *cp gets the
 * code point. Returns its length. */
int tok_utf8_decode(const char *s, uint32_t *cp);
/* Encodes CP into OUT (4 bytes room). Returns the length. */
int tok_utf8_encode(uint32_t cp, char *out);

/* Appends the normal form of valid UTF-8 S[0..N) selected by OPTIONS (a
 * utf8proc_option_t: UTF8PROC_STABLE plus COMPOSE / DECOMPOSE / COMPAT) to
 * OUT: the same bytes as utf8proc_map over the whole text, with only the
 * non-ASCII runs passed to utf8proc. Errors: FRT_ERR_OUT_OF_MEMORY,
 * FRT_ERR_BACKEND (utf8proc refused the text). */
int tok_utf8_normalize(const char *s, size_t n, int options, tok_buf *out);

/* Incremental lossy UTF-8 (Rust String::from_utf8_lossy): bytes go in one by
 * one, complete characters come out, each maximal invalid subpart becomes
 * one U+FFFD. */
typedef struct tok_utf8_state {
    unsigned char pend[4];
    int n;    /* bytes held */
    int need; /* total length of the held sequence */
} tok_utf8_state;

/* Feeds bytes S[0..N), appending complete output to OUT. 0 or OOM. */
int tok_utf8_lossy_feed(tok_utf8_state *st, const char *s, size_t n, tok_buf *out);
/* Ends the input: held bytes become one U+FFFD. 0 or OOM. */
int tok_utf8_lossy_finish(tok_utf8_state *st, tok_buf *out);

/* ---- GPT-2 byte <-> character map (pre_tokenizers/byte_level.rs) -------- */
/* The code point that stands for byte B. */
uint32_t tok_byte_char(unsigned char b);
/* The byte a code point stands for, or -1 when CP is not in the alphabet. */
int tok_char_byte(uint32_t cp);

/* ---- regex (Oniguruma syntax through PCRE2) ------------------------------ */
/* Split patterns that tok_split_fast.c matches without PCRE2: Qwen2/2.5/3
 * and Qwen3.5 (digits one by one; Qwen3.5 adds marks to the letters),
 * Llama 3 (digits in threes). */
enum tok_fast { TOK_FAST_NONE, TOK_FAST_QWEN, TOK_FAST_QWEN35, TOK_FAST_LLAMA3 };

typedef struct tok_regex {
    pcre2_code *code;
    int fast; /* enum tok_fast: set by tok_regex_compile when the pattern is one of them */
} tok_regex;

/* The enum tok_fast of a tokenizer.json regex PATTERN[0..LEN) (Oniguruma
 * text, before translation): the Qwen2/2.5/3, Qwen3.5 or Llama 3 Split
 * pattern, byte for byte, else TOK_FAST_NONE. */
int tok_fast_kind(const char *pattern, size_t len);
/* The end of the match of the fast pattern KIND that starts at S+P (valid
 * UTF-8 S[0..N), P < N at a character start), or 0 when a character that
 * decides the match is one the class table cannot classify for sure
 * (outside the BMP, a non-ASCII letter after an apostrophe, a mark under
 * Qwen3.5, or any non-ASCII one when tok_fast_ready failed): the caller
 * then runs PCRE2 for this one match. Both give the same span
 * (tok_split_fast.c says why). */
size_t tok_fast_match(int kind, const char *s, size_t n, size_t p);
/* Classifies the non-ASCII characters of the Basic Multilingual Plane for
 * tok_fast_match with PCRE2, once per process (a few milliseconds; thread
 * safe). Returns 1, or 0 when that failed (out of memory): tok_fast_match
 * then leaves every non-ASCII decision to PCRE2. */
int tok_fast_ready(void);

/* Compiles PATTERN (Oniguruma syntax as tokenizer.json holds it; LEN bytes)
 * with PCRE2_UTF | PCRE2_UCP and JIT. Constructs whose meaning differs
 * between Oniguruma and PCRE2 are translated (\s, \S, \uHHHH) or refused
 * (FRT_ERR_UNSUPPORTED naming the construct); a bad pattern is
 * FRT_ERR_FORMAT. WHAT names the pattern in messages. */
int tok_regex_compile(tok_regex *re, const char *pattern, size_t len, const char *what);
/* Compiles a PCRE2 pattern as it is (frt's own patterns), with EXTRA_FLAGS
 * added to PCRE2_UTF | PCRE2_UCP (e.g. PCRE2_ANCHORED). FRT_ERR_FORMAT on a
 * bad pattern. */
int tok_regex_compile_pcre2(tok_regex *re, const char *pattern, size_t len, uint32_t extra_flags,
                            const char *what);
/* Compiles the pattern of a literal string (Split's {"String": ...}). */
int tok_regex_compile_literal(tok_regex *re, const char *s, size_t len, const char *what);
void tok_regex_free(tok_regex *re);

/* One (start, end, is_match) piece of tokenizers' Pattern::find_matches. */
typedef struct tok_span {
    uint32_t start, end;
    uint32_t is_match;
} tok_span;

typedef struct tok_spanvec {
    tok_span *v;
    size_t n, cap;
} tok_spanvec;

int tok_spanvec_push(tok_spanvec *sv, uint32_t start, uint32_t end, uint32_t is_match);
void tok_spanvec_free(tok_spanvec *sv);

/* Per-call matching resources (match data, a JIT stack made on demand). */
typedef struct tok_matcher {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
} tok_matcher;

int tok_matcher_init(tok_matcher *m);
void tok_matcher_free(tok_matcher *m);

/* Fills OUT (cleared first) with the pieces of S[0..N) as tokenizers'
 * `impl Pattern for &SysRegex` does over the onig crate's find_iter:
 * unmatched gaps (is_match 0) and matches (1) covering S in order, empty
 * matches included. S must be valid UTF-8. Errors: FRT_ERR_BACKEND (PCRE2
 * match error), FRT_ERR_OUT_OF_MEMORY. */
int tok_regex_find_matches(const tok_regex *re, tok_matcher *m, const char *s, size_t n,
                           tok_spanvec *out);

/* One match of RE (compiled PCRE2_ANCHORED) at S+OFF: *len gets the length
 * matched, or -1 for no match (the \s / \w tests of added tokens). Returns
 * 0, or FRT_ERR_BACKEND on a PCRE2 error. */
int tok_regex_match_at(const tok_regex *re, tok_matcher *m, const char *s, size_t n, size_t off,
                       long *len);

/* ---- the tokenizer -------------------------------------------------------- */
enum tok_norm { TOK_NFC, TOK_NFD, TOK_NFKC, TOK_NFKD };

enum tok_behavior {
    TOK_REMOVED,
    TOK_ISOLATED,
    TOK_MERGED_WITH_PREVIOUS,
    TOK_MERGED_WITH_NEXT,
    TOK_CONTIGUOUS
};

typedef struct tok_stage {
    int is_byte_level;            /* else Split */
    /* Split */
    tok_regex re;
    int behavior;                 /* enum tok_behavior */
    int invert;
    /* ByteLevel */
    int add_prefix_space;
    int use_regex;
} tok_stage;

/* One added token (AddedToken + its id). */
typedef struct tok_added {
    const char *content;  /* arena */
    uint32_t content_len;
    const char *pattern;  /* what is matched: the normalized form for
                             normalized tokens, else content (arena) */
    uint32_t pattern_len;
    int32_t id;
    unsigned char single_word, lstrip, rstrip, normalized, special;
} tok_added;

/* Byte trie over added-token patterns, for leftmost-longest matching. */
typedef struct tok_trie_node {
    int32_t child;   /* first child node, -1 none */
    int32_t sibling; /* next sibling, -1 none */
    int32_t token;   /* index into frt_tokenizer.added when a pattern ends here, else -1 */
    unsigned char byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *nodes; /* nodes[0] is the root */
    size_t n, cap;
    unsigned char first[256]; /* a pattern starts with this byte */
    int empty;                /* no pattern at all */
} tok_trie;

/* word_state values */
enum tok_word_state { TOK_WORD_UNKNOWN, TOK_WORD_SELF, TOK_WORD_MERGED };

/* Per-id facts. */
typedef struct tok_token {
    const char *str;     /* Tokenizer.id_to_token form, NULL = no token */
    const char *bytes;   /* what the ByteLevel decoder turns it into */
    uint32_t str_len, bytes_len;
    unsigned char special;
} tok_token;

struct frt_tokenizer {
    tok_arena arena;

    /* model: BPE */
    tok_strmap vocab;        /* model vocabulary: string -> id */
    size_t vocab_entries;    /* model.get_vocab_size(): number of entries */
    tok_pairmap merges;
    int32_t byte_id[256];    /* id of the byte-level character of each byte, -1 absent */
    tok_strmap word_ids;     /* raw bytes -> id of every vocabulary entry made only
                                of byte-level characters (tokenizer.c build_word_ids) */
    _Atomic unsigned char *word_state; /* [model ids] without ignore_merges: does
                                the entry's own text merge into that one token?
                                enum tok_word_state, learnt on first use by
                                tok_bpe_word (a memo of a pure function: threads
                                that race store the same value) */
    int ignore_merges;
    const char *unk;         /* unk_token or NULL */
    uint32_t unk_len;
    int fuse_unk;

    /* normalizer: a sequence of Unicode normal forms (0 = none) */
    int norm[8];
    int n_norm;

    /* pre-tokenizer: a sequence of Split / ByteLevel stages */
    tok_stage *stages;
    int n_stages;
    tok_regex gpt2_re;       /* ByteLevel use_regex pattern (compiled when needed) */

    /* added tokens */
    tok_added *added;
    size_t n_added;
    tok_strmap added_map;    /* content -> id */
    tok_strmap special_set;  /* contents of special tokens */
    tok_trie trie_raw, trie_norm;
    tok_regex ws_re;         /* \s of Rust's regex crate: White_Space */
    tok_regex word_re;       /* \w of Rust's regex crate */
    int need_char_res;       /* ws_re / word_re compiled */

    /* post-processor single template: ids before and after the sequence */
    int32_t *pp_pre, *pp_post;
    size_t n_pp_pre, n_pp_post;

    /* per id */
    tok_token *tokens;
    int32_t n_tokens;        /* vocab_size: largest id + 1 */

    char *chat_template;
    /* tokenizer_config.json's bos_token, eos_token, unk_token, pad_token (a
     * string or an AddedToken's "content"; NULL when absent or null), for
     * the chat template (transformers passes special_tokens_map to it) */
    char *special_tokens[4];
};

/* BPE of one word (tok_bpe.c). S[0..N) is the word: raw bytes when MAPPED
 * (the ByteLevel pre-tokenizer ran: each byte stands for its byte-level
 * character), else UTF-8 characters looked up in the vocabulary. Appends ids
 * to *ids. Errors: FRT_ERR_FORMAT (unk_token needed but absent from the
 * vocabulary), FRT_ERR_OUT_OF_MEMORY. */
typedef struct tok_bpe_scratch {
    struct tok_symbol *sym;
    size_t sym_cap;
    struct tok_heap_item *heap;
    size_t heap_cap;
} tok_bpe_scratch;

typedef struct tok_idvec {
    int32_t *v;
    size_t n, cap;
} tok_idvec;

int tok_idvec_push(tok_idvec *iv, int32_t id);

int tok_bpe_word(const frt_tokenizer *tok, tok_bpe_scratch *sc, const char *s, size_t n,
                 int mapped, tok_idvec *ids);
/* tok_bpe_word without the whole-word lookups (ignore_merges, word_ids):
 * the merge loop alone. Same arguments and errors. */
int tok_bpe_merge_word(const frt_tokenizer *tok, tok_bpe_scratch *sc, const char *s, size_t n,
                       int mapped, tok_idvec *ids);
void tok_bpe_scratch_free(tok_bpe_scratch *sc);

/* Added tokens (tok_added.c). */
int tok_trie_add(tok_trie *t, const char *pat, size_t n, int32_t token);
void tok_trie_free(tok_trie *t);

/* Callback for each piece of tokenizers' AddedVocabulary::find_matches over
 * S[0..N): TOKEN is the index into tok->added, or -1 for plain text. */
typedef int (*tok_piece_fn)(void *ctx, const char *s, size_t n, int32_t token);

/* Protected bytes of a text (message content, text/chat.h): no protected
 * added token is matched over any of them, and lstrip / rstrip never widen
 * a match into them. V[0..n) are sorted, disjoint ranges of the whole text;
 * BASE is where the S given to tok_added_split starts in it; WHOLE: every
 * byte of S is protected. SPECIAL_ONLY: only special tokens are protected
 * (the normalized pass: normalized tokens that are not special are text). */
typedef struct tok_protect {
    const frt_text_span *v;
    size_t n, base;
    int whole, special_only;
} tok_protect;

/* Splits S[0..N) with trie T (raw or normalized) into plain pieces and
 * added-token pieces, with the single_word / lstrip / rstrip rules, and
 * calls FN for each non-empty piece in order. PR: the protected bytes, or
 * NULL (transformers' behaviour). */
int tok_added_split(const frt_tokenizer *tok, const tok_trie *t, tok_matcher *m, const char *s,
                    size_t n, const tok_protect *pr, tok_piece_fn fn, void *ctx);

/* frt_tokenizer_encode_ex (ADD_SPECIAL_TOKENS: the post-processor's tokens) where SPANS[0..N_SPANS)
 * (sorted, disjoint, start < end <= LEN: the bytes of TEXT that came from
 * message content, frt_jinja_render_ex) are protected: an added token that
 * is special or not normalized is never matched over a protected byte, so
 * "<|im_end|>" inside them is encoded as ordinary tokens. Protection does
 * not cut the text: the pre-tokenizer and BPE run over the pieces between
 * the added tokens that are matched, across span boundaries, exactly as
 * for any other text (docs/chat-templates.md). Where normalization changes
 * a piece that holds protected bytes, the whole piece is protected from
 * the normalized special tokens (offsets do not survive normalization).
 * With N_SPANS 0 the ids are frt_tokenizer_encode_ex's. Errors as
 * frt_tokenizer_encode, and FRT_ERR_INVALID_ARGUMENT for spans that are
 * not sorted, empty or out of the text. */
int tok_encode_protected(const frt_tokenizer *tok, const char *text, size_t len, const frt_text_span *spans,
                         size_t n_spans, int add_special_tokens, int32_t **ids, size_t *n_ids);

/* Applies the normalizer sequence to s[0..n) (tok_encode.c). *out points
 * either at s (no change) or at a malloc'd string stored in *owned (the
 * caller frees it). Errors: FRT_ERR_OUT_OF_MEMORY, FRT_ERR_FORMAT. */
int tok_normalize(const frt_tokenizer *tok, const char *s, size_t n, const char **out, size_t *out_n, char **owned);

/* tokenizer.c: reads the boolean obj[key] into *out (def when absent or
 * null). FRT_ERR_FORMAT (message names `what` and the key) otherwise. */
int tok_json_bool(const json_t *obj, const char *key, int def, int *out, const char *what);

/* tokenizer.c: reads the tokenizer_config.json at PATH: *chat_template
 * (malloc'd; NULL when it has none: "chat_template" a string, or the
 * "default" entry of a list of {name, template}) and SPECIAL[i] (malloc'd
 * or NULL) the bos_token, eos_token, unk_token and pad_token (a string or an
 * AddedToken's "content"). The caller frees them all. Errors:
 * FRT_ERR_NOT_FOUND (no file), FRT_ERR_IO, FRT_ERR_FORMAT (not a JSON
 * object, a chat_template of another type), FRT_ERR_OUT_OF_MEMORY; nothing
 * is returned on failure. */
int tok_config_load(const char *path, char **chat_template, char *special[4]);

/* tok_added.c: loads tokenizer.json's added_tokens (AddedVocabulary::add_tokens)
 * and builds the match tries. Errors: FRT_ERR_FORMAT, FRT_ERR_OUT_OF_MEMORY. */
int tok_load_added(frt_tokenizer *tok, const json_t *list, tok_pairmap *by_id);
int tok_build_tries(frt_tokenizer *tok);

#endif /* FRT_TEXT_TOK_INTERNAL_H */
