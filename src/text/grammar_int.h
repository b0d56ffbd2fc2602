/*
 * text/grammar_int.h - the insides of frt/grammar.h shared by
 *   json_schema.c       schema / tools -> nodes (the compiler)
 *   grammar.c           the automaton: frames, stacks, states, advance
 *   grammar_vocab.c     the token trie and the mask walk
 *
 * A grammar is an array of nodes; node 0 is the root. A state is a set of
 * stacks of frames; a frame is one node being matched (its phase and
 * counters). Advancing by a byte steps every stack (an anyOf frame forks
 * its stack into one per alternative), drops the stacks that reject, and
 * merges equal ones.
 */
#ifndef FRT_TEXT_GRAMMAR_INT_H
#define FRT_TEXT_GRAMMAR_INT_H

#include "frt/grammar.h"

#include <jansson.h>
#include <stdint.h>

typedef enum g_kind {
    G_ANY,        /* any JSON value (objects and arrays while the stack has room) */
    G_OBJECT,     /* an object of the listed properties, in order */
    G_OBJECT_ANY, /* any object */
    G_ARRAY,      /* items, min..max of them */
    G_STRING,     /* min..max code points */
    G_NUMBER,
    G_INTEGER,
    G_LITERALS,   /* one of a set of byte strings (enum, const, true/false/null, tags) */
    G_ANYOF,      /* one of the kids */
    G_SEQ,        /* the kids one after another */
    G_REPEAT,     /* the kid min..max times */
} g_kind;

typedef struct g_prop {
    char *key;      /* the key's JSON string content (escaped), not quoted */
    uint32_t key_len;
    int node;
    int required;
} g_prop;

typedef struct g_node {
    g_kind kind;
    int min, max;   /* ARRAY items, STRING code points, REPEAT times; max -1 = none */
    int kid;        /* ARRAY items, REPEAT kid */
    g_prop *props;  /* OBJECT */
    int n_props;
    char **lits;    /* LITERALS */
    uint32_t *lit_len;
    int n_lits;
    int *kids;      /* ANYOF, SEQ */
    int n_kids;
} g_node;

/* Shared nodes every grammar has (json_schema.c makes them first). */
enum { G_NODE_ROOT = 0, G_NODE_ANY = 1, G_NODE_OBJECT_ANY, G_NODE_ARRAY_ANY, G_NODE_STRING_ANY, G_NODE_NUMBER,
       G_NODE_TRUE, G_NODE_FALSE, G_NODE_NULL, G_N_SHARED };

struct frt_grammar {
    g_node *nodes;
    int n_nodes, cap_nodes;
    char **tags;    /* literals special tokens may produce ("<tool_call>") */
    int n_tags;
    const char *guard; /* a text no string may contain ("</tool_call>": the output parser would end the
                        * call there), NULL = none; static; its first byte occurs in it once */
};

typedef struct g_frame {
    uint16_t node;
    uint8_t phase;
    uint8_t sub;    /* string: escape / hex digits / UTF-8 bytes still due; number: digits */
    uint16_t count; /* string code points, array items, object property, seq / repeat index */
    uint16_t aux;   /* literal / key position, \u value, number digits */
    uint64_t set;   /* literal / key candidates; string: UTF-8 range of the next byte */
} g_frame;

typedef struct g_stack {
    uint8_t depth;
    uint8_t ws;     /* white space bytes at the current place */
    g_frame f[FRT_GRAMMAR_MAX_DEPTH];
} g_stack;

struct frt_grammar_state {
    const frt_grammar *g;
    int n;          /* stacks alive; 0 = rejected */
    g_stack s[FRT_GRAMMAR_MAX_ALTERNATIVES];
};

/* dst = the stacks of src advanced by byte b (dst->g must equal src->g).
 * Returns dst->n (0: b rejected). */
int g_advance(const frt_grammar_state *src, frt_grammar_state *dst, uint8_t b);
/* dst = src, copying only the live stacks. */
void g_copy(frt_grammar_state *dst, const frt_grammar_state *src);
/* 1 when a and b hold the same stacks in the same order. */
int g_equal(const frt_grammar_state *a, const frt_grammar_state *b);
/* The plain-string-body case of the mask walk: the state is one stack whose
 * top frame is inside a string, after a complete character, with no escape
 * due and no part of the guard matched. *room receives the code points it may still take (-1 = no bound). */
int g_in_string_body(const frt_grammar_state *st, int *room);

/* Node building (json_schema.c). g_add returns the node's index or -1 (out
 * of memory). */
int g_add(frt_grammar *g, g_kind kind);
int g_add_literal(frt_grammar *g, int node, const char *s, size_t len);
int g_add_kid(frt_grammar *g, int node, int kid);
/* The shared nodes (indices G_NODE_ANY..); 0 or FRT_ERR_OUT_OF_MEMORY. */
int g_add_shared(frt_grammar *g);

/* json_schema_validate.c: 1 when KEY is a keyword of the subset (or an
 * annotation), else 0; and the validation of frt_json_schema_validate over
 * parsed values (ROOT: the document $ref resolves in). */
int js_keyword_known(const char *key);
int js_validate(json_t *root, json_t *schema, json_t *inst, char *why, size_t why_len);

#endif
