/*
 * frt/export.h - FRT_API, the mark on every function of the public API.
 *
 * Every function declared in include/frt/ that a program may call is
 * written `FRT_API int frt_thing_verb(...);`. The mark gives the symbol
 * default visibility, so it is exported from libfrt.so even when the
 * library is compiled with -fvisibility=hidden.
 *
 * What libfrt.so exports is fixed at link time by a version script made from
 * these headers (cmake/frt_exports.cmake: every frt_* function they declare,
 * version node FRT_0); everything else in the library (frt_cuda_*,
 * frt_cpu_*, tok_*, the CUDA runtime linked in statically, C++ symbols) is
 * local to it. Tests and the frt command, which call internals, link
 * libfrt_internal.so, built from the same objects with every symbol
 * visible. tests/sh/exports.sh checks the exported set with nm, and that a
 * header which uses FRT_API uses it on every function it declares.
 */
#ifndef FRT_EXPORT_H
#define FRT_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#  define FRT_API __attribute__((visibility("default")))
#else
#  define FRT_API
#endif

#endif /* FRT_EXPORT_H */
