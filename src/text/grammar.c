/*
 * text/grammar.c - the byte-level pushdown automaton of frt/grammar.h:
 * frames, stacks, states, and one byte's advance.
 *
 * Each node kind matches its value with a small phase machine (RFC 8259's
 * grammar for objects, arrays, strings, numbers; byte strings for
 * literals). A frame steps on a byte with one of five outcomes: the byte is
 * taken (white space at a gap or anything else), the frame is done without
 * taking it (a number before its next byte, a completed literal: pop and
 * give the byte to the parent), the frame pushed a child or became another
 * node (give the byte to the top again), or the byte is refused. anyOf and
 * REPEAT fork their stack: every alternative that takes the byte lives on.
 */
#include "text/grammar_int.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

enum { R_REJECT, R_TAKE, R_TAKE_WS, R_END, R_AGAIN };

enum { O_START, O_FIRST, O_KEY, O_COLON, O_VALUE, O_AFTER, O_NEXT };
enum { A_START, A_FIRST, A_AFTER, A_NEXT };
enum { S_START, S_BODY, S_ESC, S_HEX, S_UTF8 };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static int is_ws(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
static int is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

static void frame_init(const frt_grammar *g, g_frame *f, int node)
{
    memset(f, 0, sizeof *f);
    f->node = (uint16_t)node;
    const g_node *n = &g->nodes[node];
    if (n->kind == G_LITERALS) f->set = n->n_lits >= 64 ? ~0ull : (1ull << n->n_lits) - 1;
}

/* Pushes a frame of node; 0 when the stack is full. */
static int push(const frt_grammar *g, g_stack *s, int node)
{
    if (s->depth >= FRT_GRAMMAR_MAX_DEPTH) return 0;
    frame_init(g, &s->f[s->depth++], node);
    return 1;
}

static void stack_copy(g_stack *dst, const g_stack *src)
{
    dst->depth = src->depth;
    dst->ws = src->ws;
    memcpy(dst->f, src->f, (size_t)src->depth * sizeof src->f[0]);
}

static int stack_equal(const g_stack *a, const g_stack *b)
{
    return a->depth == b->depth && a->ws == b->ws && !memcmp(a->f, b->f, (size_t)a->depth * sizeof a->f[0]);
}

/* Adds s to out unless an equal stack is there. */
static void emit(frt_grammar_state *out, const g_stack *s)
{
    for (int i = 0; i < out->n; i++)
        if (stack_equal(&out->s[i], s)) return;
    if (out->n < FRT_GRAMMAR_MAX_ALTERNATIVES) stack_copy(&out->s[out->n++], s);
}

/* Takes b when it is want, moving f to phase next. */
static int expect(g_frame *f, uint8_t b, uint8_t want, uint8_t next)
{
    if (b != want) return R_REJECT;
    f->phase = next;
    return R_TAKE;
}

/* ---- objects ------------------------------------------------------------ */

/* Properties that may come next from index k: k.. up to the first required one. */
static uint64_t key_candidates(const g_node *n, int k)
{
    uint64_t set = 0;
    for (int i = k; i < n->n_props; i++) {
        set |= 1ull << i;
        if (n->props[i].required) break;
    }
    return set;
}

static int required_from(const g_node *n, int k)
{
    for (int i = k; i < n->n_props; i++)
        if (n->props[i].required) return 1;
    return 0;
}

/* A byte of a key: the next byte of a candidate (an escaped quote \" is
 * one), else the closing quote of a candidate that is complete (never both:
 * a quote inside escaped content follows an odd run of backslashes, the end
 * of complete content an even one). */
static int key_byte(const g_node *n, g_frame *f, uint8_t b)
{
    uint64_t keep = 0;
    for (int c = 0; c < n->n_props; c++)
        if ((f->set >> c & 1) && n->props[c].key_len > f->aux && (uint8_t)n->props[c].key[f->aux] == b)
            keep |= 1ull << c;
    if (keep) {
        f->set = keep;
        f->aux++;
        return R_TAKE;
    }
    if (b != '"') return R_REJECT;
    for (int c = 0; c < n->n_props; c++)
        if ((f->set >> c & 1) && n->props[c].key_len == f->aux) {
            f->count = (uint16_t)c;
            f->phase = O_COLON;
            return R_TAKE;
        }
    return R_REJECT;
}

static int start_key(const g_node *n, g_frame *f, int from)
{
    f->set = key_candidates(n, from);
    if (!f->set) return R_REJECT;
    f->aux = 0;
    f->phase = O_KEY;
    return R_TAKE;
}

static int step_object(const frt_grammar *g, g_stack *s, g_frame *f, const g_node *n, uint8_t b)
{
    int ws_ok = f->phase != O_START && f->phase != O_KEY;
    if (ws_ok && is_ws(b)) return R_TAKE_WS;
    switch (f->phase) {
    case O_START: return expect(f, b, '{', O_FIRST);
    case O_FIRST:
        if (b == '}') return required_from(n, 0) ? R_REJECT : (s->depth--, R_TAKE);
        return b == '"' ? start_key(n, f, 0) : R_REJECT;
    case O_KEY: return key_byte(n, f, b);
    case O_COLON: return expect(f, b, ':', O_VALUE);
    case O_VALUE:
        f->phase = O_AFTER;
        return push(g, s, n->props[f->count].node) ? R_AGAIN : R_REJECT;
    case O_AFTER:
        if (b == '}') return required_from(n, f->count + 1) ? R_REJECT : (s->depth--, R_TAKE);
        if (!key_candidates(n, f->count + 1)) return R_REJECT;
        return expect(f, b, ',', O_NEXT);
    default: /* O_NEXT */
        return b == '"' ? start_key(n, f, f->count + 1) : R_REJECT;
    }
}

/* A key string of any object: its frame starts after the opening quote. */
static int push_key(const frt_grammar *g, g_stack *s)
{
    if (!push(g, s, G_NODE_STRING_ANY)) return R_REJECT;
    s->f[s->depth - 1].phase = S_BODY;
    return R_TAKE;
}

static int step_object_any(const frt_grammar *g, g_stack *s, g_frame *f, uint8_t b)
{
    if (f->phase != O_START && is_ws(b)) return R_TAKE_WS;
    switch (f->phase) {
    case O_START: return expect(f, b, '{', O_FIRST);
    case O_FIRST:
    case O_NEXT:
        if (b == '}' && f->phase == O_FIRST) return s->depth--, R_TAKE;
        if (b != '"') return R_REJECT;
        f->phase = O_COLON;
        return push_key(g, s);
    case O_COLON: return expect(f, b, ':', O_VALUE);
    case O_VALUE:
        f->phase = O_AFTER;
        return push(g, s, G_NODE_ANY) ? R_AGAIN : R_REJECT;
    default: /* O_AFTER */
        if (b == '}') return s->depth--, R_TAKE;
        return expect(f, b, ',', O_NEXT);
    }
}

/* ---- arrays ------------------------------------------------------------- */

static int step_array(const frt_grammar *g, g_stack *s, g_frame *f, const g_node *n, uint8_t b)
{
    if (f->phase != A_START && is_ws(b)) return R_TAKE_WS;
    switch (f->phase) {
    case A_START: return expect(f, b, '[', A_FIRST);
    case A_FIRST:
        if (b == ']') return n->min == 0 ? (s->depth--, R_TAKE) : R_REJECT;
        if (n->max == 0) return R_REJECT;
        f->count = 1;
        f->phase = A_AFTER;
        return push(g, s, n->kid) ? R_AGAIN : R_REJECT;
    case A_AFTER:
        if (b == ']') return f->count >= n->min ? (s->depth--, R_TAKE) : R_REJECT;
        if (n->max >= 0 && f->count >= n->max) return R_REJECT;
        return expect(f, b, ',', A_NEXT);
    default: /* A_NEXT */
        if (f->count < UINT16_MAX) f->count++;
        f->phase = A_AFTER;
        return push(g, s, n->kid) ? R_AGAIN : R_REJECT;
    }
}

/* ---- strings ------------------------------------------------------------ */

/* Counts one more code point; 0 when maxLength is reached. Without a
 * maxLength the count stops at minLength (all it decides), so the states of
 * a long string body are equal and their masks cached. */
static int take_char(const g_node *n, g_frame *f)
{
    if (n->max >= 0 && f->count >= n->max) return 0;
    if (f->count < UINT16_MAX && (n->max >= 0 || f->count < n->min)) f->count++;
    return 1;
}

/* A UTF-8 lead byte: the continuation bytes due and the range of the first
 * (RFC 3629 section 4: no overlongs, no surrogates, <= U+10FFFF). */
static int utf8_lead(uint8_t b, int *need, int *lo, int *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) *need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        *need = 2;
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        *need = 3;
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
    } else
        return 0;
    return 1;
}

static int hex_val(uint8_t b)
{
    if (is_digit(b)) return b - '0';
    if (b >= 'a' && b <= 'f') return b - 'a' + 10;
    if (b >= 'A' && b <= 'F') return b - 'A' + 10;
    return -1;
}

/* The guard of a grammar (frt_grammar.guard): a text its strings must not
 * contain. f->aux counts the guard's bytes matched by the end of the string
 * so far (its first byte occurs in it only once, so a mismatch restarts at
 * 0, or 1 on that byte). 0 when b would complete it. */
static int guard_byte(const char *guard, g_frame *f, uint8_t b)
{
    if (!guard) return 1;
    if ((uint8_t)guard[f->aux] == b) return guard[++f->aux] != '\0';
    f->aux = b == (uint8_t)guard[0];
    return 1;
}

static int string_body(const frt_grammar *g, g_stack *s, g_frame *f, const g_node *n, uint8_t b)
{
    int need, lo, hi;
    if (b == '"') return f->count >= n->min ? (s->depth--, R_TAKE) : R_REJECT;
    if (b < 0x20) return R_REJECT;
    if (b < 0x80 && b != '\\') return guard_byte(g->guard, f, b) && take_char(n, f) ? R_TAKE : R_REJECT;
    f->aux = 0; /* an escape or a multi-byte character breaks a match of the guard */
    if (b == '\\') {
        if (!take_char(n, f)) return R_REJECT;
        f->phase = S_ESC;
        return R_TAKE;
    }
    if (!utf8_lead(b, &need, &lo, &hi) || !take_char(n, f)) return R_REJECT;
    f->sub = (uint8_t)need;
    f->set = (uint64_t)lo | (uint64_t)hi << 8;
    f->phase = S_UTF8;
    return R_TAKE;
}

static int step_string(const frt_grammar *g, g_stack *s, g_frame *f, const g_node *n, uint8_t b)
{
    int v;
    switch (f->phase) {
    case S_START: return expect(f, b, '"', S_BODY);
    case S_BODY: return string_body(g, s, f, n, b);
    case S_UTF8:
        if (b < (f->set & 0xFF) || b > (f->set >> 8 & 0xFF)) return R_REJECT;
        f->set = 0x80 | 0xBF << 8;
        if (--f->sub == 0) {
            f->phase = S_BODY;
            f->set = 0;
        }
        return R_TAKE;
    case S_ESC:
        if (b == 'u') {
            f->phase = S_HEX;
            f->sub = 0;
            f->aux = 0;
            return R_TAKE;
        }
        if (!strchr("\"\\/bfnrt", b) || !b) return R_REJECT;
        f->phase = S_BODY;
        return R_TAKE;
    default: /* S_HEX: never a surrogate (D800-DFFF), never \u0000 */
        if ((v = hex_val(b)) < 0) return R_REJECT;
        f->aux = (uint16_t)(f->aux << 4 | v);
        f->sub++;
        if (f->sub == 2 && (f->aux & 0xF8) == 0xD8) return R_REJECT;
        if (f->sub == 4) {
            if (!f->aux) return R_REJECT;
            f->phase = S_BODY;
            f->sub = 0;
            f->aux = 0;
        }
        return R_TAKE;
    }
}

/* ---- numbers ------------------------------------------------------------ */

static int number_end(uint8_t phase)
{
    return phase == N_ZERO || phase == N_INT || phase == N_FRAC || phase == N_EXP;
}

static int step_number(g_frame *f, int integer, uint8_t b)
{
    int d = is_digit(b);
    switch (f->phase) {
    case N_START:
    case N_MINUS:
        if (b == '-' && f->phase == N_START) {
            f->phase = N_MINUS;
            return R_TAKE;
        }
        if (!d) return R_REJECT;
        f->phase = b == '0' ? N_ZERO : N_INT;
        f->count = 1;
        return R_TAKE;
    case N_INT:
        if (d && f->count < FRT_GRAMMAR_MAX_INT_DIGITS) return f->count++, R_TAKE;
        __attribute__((fallthrough)); /* after the integer part */
    case N_ZERO:
        if (!integer && b == '.') return f->phase = N_DOT, R_TAKE;
        if (!integer && (b == 'e' || b == 'E')) return f->phase = N_E, R_TAKE;
        return R_END;
    case N_DOT:
        if (!d) return R_REJECT;
        f->phase = N_FRAC;
        f->aux = 1;
        return R_TAKE;
    case N_FRAC:
        if (d && f->aux < FRT_GRAMMAR_MAX_FRAC_DIGITS) return f->aux++, R_TAKE;
        if (b == 'e' || b == 'E') return f->phase = N_E, R_TAKE;
        return R_END;
    case N_E:
    case N_ESIGN:
        if ((b == '+' || b == '-') && f->phase == N_E) return f->phase = N_ESIGN, R_TAKE;
        if (!d) return R_REJECT;
        f->phase = N_EXP;
        f->aux = 1;
        return R_TAKE;
    default: /* N_EXP */
        if (d && f->aux < FRT_GRAMMAR_MAX_EXP_DIGITS) return f->aux++, R_TAKE;
        return R_END;
    }
}

/* ---- literals ----------------------------------------------------------- */

static int literal_done(const g_node *n, const g_frame *f)
{
    for (int c = 0; c < n->n_lits; c++)
        if ((f->set >> c & 1) && n->lit_len[c] == f->aux) return 1;
    return 0;
}

static int step_literals(g_stack *s, g_frame *f, const g_node *n, uint8_t b)
{
    uint64_t keep = 0;
    int longer = 0;
    for (int c = 0; c < n->n_lits; c++)
        if ((f->set >> c & 1) && n->lit_len[c] > f->aux && (uint8_t)n->lits[c][f->aux] == b) {
            keep |= 1ull << c;
            longer |= n->lit_len[c] > f->aux + 1u;
        }
    if (!keep) return literal_done(n, f) ? R_END : R_REJECT;
    f->set = keep;
    f->aux++;
    if (!longer) s->depth--; /* every candidate left is complete: done */
    return R_TAKE;
}

/* ---- any value ------------------------------------------------------------ */

/* The frame becomes the node its first byte selects. */
static int step_any(const frt_grammar *g, g_stack *s, g_frame *f, uint8_t b)
{
    int node;
    int room = s->depth < FRT_GRAMMAR_MAX_DEPTH;
    if (b == '{' && room) node = G_NODE_OBJECT_ANY;
    else if (b == '[' && room) node = G_NODE_ARRAY_ANY;
    else if (b == '"') node = G_NODE_STRING_ANY;
    else if (b == '-' || is_digit(b)) node = G_NODE_NUMBER;
    else if (b == 't') node = G_NODE_TRUE;
    else if (b == 'f') node = G_NODE_FALSE;
    else if (b == 'n') node = G_NODE_NULL;
    else return R_REJECT;
    frame_init(g, f, node);
    return R_AGAIN;
}

/* ---- the stack step ---------------------------------------------------------- */

static void step(const frt_grammar *g, g_stack *s, uint8_t b, frt_grammar_state *out);

/* Steps a copy of s whose top frame is replaced by node (or popped when
 * node < 0), emitting it when it takes b. */
static void fork_step(const frt_grammar *g, const g_stack *s, int node, uint8_t b, frt_grammar_state *out)
{
    g_stack t;
    stack_copy(&t, s);
    if (node < 0) t.depth--;
    else frame_init(g, &t.f[t.depth - 1], node);
    step(g, &t, b, out);
}

static int step_frame(const frt_grammar *g, g_stack *s, uint8_t b, frt_grammar_state *out)
{
    g_frame *f = &s->f[s->depth - 1];
    const g_node *n = &g->nodes[f->node];
    switch (n->kind) {
    case G_ANY: return step_any(g, s, f, b);
    case G_OBJECT: return step_object(g, s, f, n, b);
    case G_OBJECT_ANY: return step_object_any(g, s, f, b);
    case G_ARRAY: return step_array(g, s, f, n, b);
    case G_STRING: return step_string(g, s, f, n, b);
    case G_NUMBER:
    case G_INTEGER: return step_number(f, n->kind == G_INTEGER, b);
    case G_LITERALS: return step_literals(s, f, n, b);
    case G_ANYOF:
        for (int k = 1; k < n->n_kids; k++) fork_step(g, s, n->kids[k], b, out);
        frame_init(g, f, n->kids[0]);
        return R_AGAIN;
    case G_SEQ:
        if (f->count >= n->n_kids) return R_END;
        f->count++;
        return push(g, s, n->kids[f->count - 1]) ? R_AGAIN : R_REJECT;
    default: /* G_REPEAT */
        if (n->max >= 0 && f->count >= n->max) return R_END;
        if (f->count >= n->min) fork_step(g, s, -1, b, out);
        if (f->count < UINT16_MAX) f->count++;
        return push(g, s, n->kid) ? R_AGAIN : R_REJECT;
    }
}

/* Steps stack s (in place) on b; emits it into out when it takes b. */
static void step(const frt_grammar *g, g_stack *s, uint8_t b, frt_grammar_state *out)
{
    while (s->depth > 0) {
        int r = step_frame(g, s, b, out);
        if (r == R_REJECT) return;
        if (r == R_END) {
            s->depth--;
            continue;
        }
        if (r == R_AGAIN) continue;
        if (r == R_TAKE_WS) {
            if (s->ws >= FRT_GRAMMAR_MAX_WS) return;
            s->ws++;
        } else {
            s->ws = 0;
        }
        emit(out, s);
        return;
    }
}

int g_advance(const frt_grammar_state *src, frt_grammar_state *dst, uint8_t b)
{
    dst->n = 0;
    for (int i = 0; i < src->n; i++) {
        g_stack t;
        stack_copy(&t, &src->s[i]);
        step(src->g, &t, b, dst);
    }
    return dst->n;
}

void g_copy(frt_grammar_state *dst, const frt_grammar_state *src)
{
    dst->g = src->g;
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) stack_copy(&dst->s[i], &src->s[i]);
}

int g_equal(const frt_grammar_state *a, const frt_grammar_state *b)
{
    if (a->g != b->g || a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (!stack_equal(&a->s[i], &b->s[i])) return 0;
    return 1;
}

int g_in_string_body(const frt_grammar_state *st, int *room)
{
    if (st->n != 1 || st->s[0].depth == 0) return 0;
    const g_frame *f = &st->s[0].f[st->s[0].depth - 1];
    const g_node *n = &st->g->nodes[f->node];
    if (n->kind != G_STRING || f->phase != S_BODY || (st->g->guard && f->aux)) return 0;
    *room = n->max < 0 ? -1 : n->max - f->count;
    return 1;
}

/* ---- completeness -------------------------------------------------------------- */

/* Whether frame f could end now (its child, if any, having ended). */
static int frame_can_end(const frt_grammar *g, const g_frame *f)
{
    const g_node *n = &g->nodes[f->node];
    switch (n->kind) {
    case G_NUMBER:
    case G_INTEGER: return number_end(f->phase);
    case G_LITERALS: return literal_done(n, f);
    case G_SEQ: return f->count >= n->n_kids;
    case G_REPEAT: return f->count >= n->min;
    default: return 0;
    }
}

static int stack_complete(const frt_grammar *g, const g_stack *s)
{
    for (int i = 0; i < s->depth; i++)
        if (!frame_can_end(g, &s->f[i])) return 0;
    return 1;
}

/* ---- the public state API ---------------------------------------------------------- */

int frt_grammar_state_create(const frt_grammar *g, frt_grammar_state **out)
{
    if (!g || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar state: NULL argument");
    *out = malloc(sizeof **out);
    if (!*out) return frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar state");
    (*out)->g = g;
    frt_grammar_state_reset(*out);
    return 0;
}

void frt_grammar_state_free(frt_grammar_state *st) { free(st); }

void frt_grammar_state_reset(frt_grammar_state *st)
{
    if (!st) return;
    st->n = 1;
    st->s[0].depth = 0;
    st->s[0].ws = 0;
    push(st->g, &st->s[0], G_NODE_ROOT);
}

int frt_grammar_state_copy(frt_grammar_state *dst, const frt_grammar_state *src)
{
    if (!dst || !src || dst->g != src->g)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar state copy: NULL or states of different grammars");
    g_copy(dst, src);
    return 0;
}

int frt_grammar_state_accept(frt_grammar_state *st, const void *bytes, size_t n)
{
    if (!st || (!bytes && n)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "grammar accept: NULL argument");
    frt_grammar_state *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    int rc = 0;
    if (!a || !b) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "grammar accept");
    if (!rc) {
        g_copy(a, st);
        b->g = st->g;
        for (size_t i = 0; i < n && !rc; i++) {
            if (!g_advance(a, b, ((const uint8_t *)bytes)[i]))
                rc = frt_error(FRT_ERR_MISMATCH, "grammar: byte %zu (0x%02x) is not allowed here", i,
                               ((const uint8_t *)bytes)[i]);
            frt_grammar_state *t = a;
            a = b;
            b = t;
        }
        if (!rc) g_copy(st, a);
    }
    free(a);
    free(b);
    return rc;
}

int frt_grammar_state_complete(const frt_grammar_state *st)
{
    if (!st) return 0;
    for (int i = 0; i < st->n; i++)
        if (stack_complete(st->g, &st->s[i])) return 1;
    return 0;
}
