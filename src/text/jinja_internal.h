/*
 * text/jinja_internal.h - the pieces of the Jinja engine (text/jinja.h):
 *
 *   jinja_value.c  the arena, values (JSON plus undefined, macros, bound
 *                  methods), Python's str()/repr() and json.dumps of them,
 *                  Python string helpers over UTF-8
 *   jinja_parse.c  the lexer (Jinja2's lexer.py rules with trim_blocks and
 *                  lstrip_blocks) and the parser (Jinja2's parser.py
 *                  grammar and precedence) into the tree below
 *   jinja_eval.c   rendering: scopes, statements, expressions, filters,
 *                  tests, methods, limits
 *
 * Nothing here is public.
 */
#ifndef FRT_TEXT_JINJA_INTERNAL_H
#define FRT_TEXT_JINJA_INTERNAL_H

#include "text/jinja.h"
#include "text/span.h"

#include <stddef.h>
#include <stdint.h>

/* ---- arena: everything of a parse or a render lives here ---------------- */
typedef struct jarena_block jarena_block;
typedef struct jarena {
    jarena_block *head;
    size_t used, limit; /* bytes handed out; limit 0 = none */
    int over;           /* an allocation was refused by the limit */
} jarena;

/* N bytes, 16-aligned, zeroed; NULL when out of memory or over the limit
 * (then a->over is set). */
void *ja_alloc(jarena *a, size_t n);
char *ja_strdup(jarena *a, const char *s, size_t n);
void ja_free(jarena *a);

/* ---- values -------------------------------------------------------------- */
typedef enum jtype {
    JT_UNDEF = 0,
    JT_NONE,
    JT_BOOL,
    JT_INT,
    JT_FLOAT,
    JT_STR,
    JT_LIST,  /* list or tuple (jlist.tuple) */
    JT_DICT,  /* dict; also namespace() objects (jdict.ns) and loop */
    JT_MACRO, /* a {% macro %} or caller() */
    JT_FUNC,  /* a built-in global or a bound method */
} jtype;

struct jlist;
struct jdict;
struct jtaint;
struct jmacro;
struct jfunc;
struct jscope;

typedef struct jval {
    uint8_t t;
    uint8_t safe; /* JT_STR: a Markup string (|safe, |escape) */
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p; /* not necessarily NUL-terminated */
            size_t n;
            const struct jtaint *tn; /* which bytes came from message content; NULL: none */
        } s;
        struct jlist *l;
        struct jdict *d;
        struct jmacro *m;
        struct jfunc *fn;
        const char *undef_name; /* JT_UNDEF: what was undefined (for messages), may be NULL */
    };
} jval;

typedef struct jlist {
    size_t n;
    jval *v;
    int tuple;
} jlist;

typedef struct jdict {
    size_t n, cap;
    jval *k, *v;
    int ns; /* a namespace(): attribute assignment allowed */
} jdict;

struct jnode;
typedef struct jmacro {
    const struct jnode *def; /* the {% macro %} or {% call %} node */
    const char *name;
    struct jscope *closure;  /* caller(): the scope of the call block */
    jval caller;             /* for macros called from {% call %}: caller */
} jmacro;

typedef struct jfunc {
    int id;   /* built-in: JF_* in jinja_eval.c */
    jval self; /* bound methods: the object */
    const char *name;
} jfunc;

static inline jval jv_undef(const char *name) { jval v = {0}; v.t = JT_UNDEF; v.undef_name = name; return v; }
static inline jval jv_none(void) { jval v = {0}; v.t = JT_NONE; return v; }
static inline jval jv_bool(int b) { jval v = {0}; v.t = JT_BOOL; v.b = !!b; return v; }
static inline jval jv_int(int64_t i) { jval v = {0}; v.t = JT_INT; v.i = i; return v; }
static inline jval jv_float(double f) { jval v = {0}; v.t = JT_FLOAT; v.f = f; return v; }
static inline jval jv_str(const char *p, size_t n) { jval v = {0}; v.t = JT_STR; v.s.p = p; v.s.n = n; return v; }

/* ---- provenance ---------------------------------------------------------
 * A string remembers which of its bytes came from message content (the
 * render's content variables, frt_jinja_render_ex): a sorted list of
 * disjoint, non-touching ranges relative to its first byte. Every operation
 * that builds a string from other strings carries the ranges over (a byte
 * copied keeps its mark; a byte an escape or a case mapping produced from
 * a marked character is marked); docs/chat-templates.md has the rules. */
typedef struct jtaint {
    size_t n;
    frt_text_span r[]; /* n ranges */
} jtaint;
/* The whole string (any length) came from content. */
extern const jtaint jt_whole;

/* Is any byte of S[from, from + n) marked? */
int jt_any(jval s, size_t from, size_t n);
/* *out = S[from, from + n) with its marks (ranges allocated in A only when
 * the piece is partly marked). FRT_ERR_OUT_OF_MEMORY (a->over may be set). */
int jv_sub(jarena *a, jval s, size_t from, size_t n, jval *out);

/* growable byte buffer (malloc), with the marked ranges of its bytes */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    size_t limit; /* 0 = none */
    int over;     /* set when a put failed on the limit */
    frt_text_span *sp; /* marked ranges of p[0, n), sorted, merged */
    size_t nsp, capsp;
} jbuf;
/* unmarked bytes */
int jb_put(jbuf *b, const char *s, size_t n);
int jb_putc(jbuf *b, char c);
int jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* S[from, from + n) with its marks; jb_put_str: all of S */
int jb_put_part(jbuf *b, jval s, size_t from, size_t n);
int jb_put_str(jbuf *b, jval s);
/* marks b->p[from, to) (FROM not before the last marked range's start) */
int jb_mark(jbuf *b, size_t from, size_t to);
/* the marks of the whole buffer as a jtaint in A (NULL: none; &jt_whole:
 * all). FRT_ERR_OUT_OF_MEMORY. */
int jb_taint(jarena *a, const jbuf *b, const jtaint **out);
void jb_free(jbuf *b);

/* Deepest nesting of lists / dicts that printing, tojson and comparisons
 * follow (deeper: FRT_ERR_OUT_OF_RANGE, or unequal for ==). */
#define JV_MAX_NEST 512

/* Python truthiness. */
int jv_truthy(jval v);
/* Python ==. */
int jv_equal(jval a, jval b);
/* Appends Python str(v) (RECURSIVE: repr for items) to B. Returns 0 or an
 * frt status (only OOM / limit). */
int jv_str_append(jbuf *b, jval v);
int jv_repr_append(jbuf *b, jval v);
/* json.dumps(v, ensure_ascii, indent (NULL = None), separators, sort_keys).
 * Fails with FRT_ERR_INVALID_ARGUMENT for values JSON cannot hold. */
typedef struct jjson_opts {
    int ensure_ascii;
    int has_indent;
    const char *indent; /* indent string when has_indent */
    size_t indent_n;
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
    int sort_keys;
} jjson_opts;
int jv_tojson_append(jbuf *b, jval v, const jjson_opts *o, int level);
/* Python float repr. */
void jv_float_repr(double f, char out[40]);
/* The Python type name of v ("str", "dict", ...). */
const char *jv_type_name(jval v);

/* dict helpers (linear lookup; keys compared with jv_equal) */
jdict *jd_new(jarena *a, size_t cap);
jval *jd_get(const jdict *d, jval key);
jval *jd_get_str(const jdict *d, const char *key, size_t n);
int jd_set(jarena *a, jdict *d, jval key, jval val);
jlist *jl_new(jarena *a, size_t n);

/* Converts a JSON value into a value (strings point into the JSON).
 * jv_from_json_content: the same with every string and key marked as
 * content, except the "role" member of an object that is an item of the
 * list J (a message's role). */
int jv_from_json(jarena *a, const json_t *j, jval *out);
int jv_from_json_content(jarena *a, const json_t *j, jval *out);

/* UTF-8 / Python str helpers */
int jpy_isspace(uint32_t cp);
size_t ju_count(const char *p, size_t n); /* code points */
int ju_decode(const char *p, size_t n, size_t *pos, uint32_t *cp); /* next code point; 0 at end */

/* ---- the tree ------------------------------------------------------------ */
typedef enum jkind {
    /* expressions */
    JN_LIT = 1, JN_NAME, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_NEG, JN_POS, JN_NOT,
    JN_BINOP, JN_AND, JN_OR, JN_CONCAT, JN_COMPARE, JN_COND, JN_LIST, JN_TUPLE, JN_DICT,
    /* statements */
    JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_CALL_BLOCK, JN_FILTER_BLOCK,
    JN_BREAK, JN_CONTINUE, JN_BODY,
} jkind;

typedef enum jop {
    JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
} jop;

typedef struct jnode jnode;
typedef struct jnodes {
    jnode **v;
    size_t n;
} jnodes;

struct jnode {
    jkind kind;
    int line, col;
    jop op;
    int neg;          /* JN_TEST: "is not" */
    jnode *a, *b, *c; /* operands; JN_IF: a = cond; JN_FOR: a = iter, b = filter cond */
    jnodes args;      /* call / filter / test positional args; list / tuple items; JN_BODY items;
                       * JN_DICT keys; JN_COMPARE right operands; JN_IF: the branches (JN_IF nodes) */
    jnodes kwargs;    /* keyword args' values; JN_DICT values; macro defaults (NULL = none) */
    const char **names; /* keyword args' names; for targets; macro params */
    size_t n_names;
    jop *ops;         /* JN_COMPARE */
    const char *name; /* JN_NAME, JN_ATTR, filter / test name, macro name, set target, ns attribute */
    jval lit;         /* JN_LIT; JN_TEXT text */
    jnode *body, *else_body;
    int fid;          /* filter / test id */
};

struct frt_jinja_template {
    jarena arena;
    jnode *root;
};

/* Filter and test ids, resolved at parse time (-1 = unknown). */
int jinja_filter_id(const char *name);
int jinja_test_id(const char *name);

#endif /* FRT_TEXT_JINJA_INTERNAL_H */
