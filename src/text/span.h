/*
 * text/span.h - a byte range of a text, [start, end), shared by the Jinja
 * engine (which bytes of a rendered prompt came from message content) and
 * the tokenizer (where added tokens must not be matched).
 */
#ifndef FRT_TEXT_SPAN_H
#define FRT_TEXT_SPAN_H

#include <stddef.h>

typedef struct frt_text_span {
    size_t start, end; /* byte offsets, start < end */
} frt_text_span;

#endif /* FRT_TEXT_SPAN_H */
