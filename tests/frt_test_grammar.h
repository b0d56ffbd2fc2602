/*
 * frt_test_grammar.h - what the constrained-decoding tests share: a
 * generated text parsed the way the server parses it (serving/chat_output.c
 * with tool calls on) into its calls.
 */
#ifndef FRT_TEST_GRAMMAR_H
#define FRT_TEST_GRAMMAR_H

#include "serving/chat_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tg_calls {
    int n;          /* tool calls */
    char name[64];  /* the last call's name */
    char *args;     /* its arguments (malloc'd) */
    size_t content; /* content bytes other than white space */
} tg_calls;

static int tg_on_piece(void *user, const frt_chat_piece *p)
{
    tg_calls *c = user;
    if (p->part == FRT_CHAT_PART_TOOL_CALL) {
        c->n++;
        snprintf(c->name, sizeof c->name, "%s", p->name);
        free(c->args);
        c->args = strdup(p->arguments);
    } else if (p->part == FRT_CHAT_PART_CONTENT) {
        for (size_t i = 0; i < p->len; i++) c->content += p->text[i] != ' ' && p->text[i] != '\n';
    }
    return 0;
}

/* The calls of text[0..n) (free c->args after). */
static void tg_parse_calls(const char *text, size_t n, tg_calls *c)
{
    memset(c, 0, sizeof *c);
    frt_chat_output p;
    frt_chat_output_init(&p, 1, 0, 7, tg_on_piece, c);
    frt_chat_output_feed(&p, text, n);
    frt_chat_output_finish(&p);
    frt_chat_output_clear(&p);
}

#endif
