/*
 * serving/session.h - sessions: a journal of committed tokens, the pending
 * token, and references to the registry capsules that hold its boundary and
 * its checkpoints. Pure data; the service (service.c) gives them meaning.
 *
 * Invariant kept by the service: while a session is hot, its journal and
 * pending token are exactly the live state's; while it is not, `capsule`
 * (when still in the registry) holds that boundary.
 */
#ifndef FRT_SERVING_SESSION_H
#define FRT_SERVING_SESSION_H

#include <stddef.h>
#include <stdint.h>

#define FRT_SESSION_ID_MAX 64 /* bytes including the terminating NUL */

typedef struct frt_checkpoint {
    char name[FRT_SESSION_ID_MAX];
    uint64_t capsule; /* registry id (a reference held by the session) */
    int pin;          /* the reference pins the capsule */
} frt_checkpoint;

/* The cartridge a session started from (docs/cartridges.md, "Sessions"):
 * journal rows 0..tokens-1 are its rows (its token ids, or -1 where it has
 * none); each request's prompt loses the stated start and follows them. */
typedef struct frt_session_cartridge {
    char id[128];    /* its cartridge id; "" = the session holds no cartridge */
    uint64_t key;    /* the version injected (the server's key of id, created and checksum) */
    int tokens;      /* T */
    int32_t *start;  /* [n_start] its stated start (manifest starts_with), malloc'd */
    int n_start;
} frt_session_cartridge;

typedef struct frt_session {
    char id[FRT_SESSION_ID_MAX];
    char *salt;           /* NUL-terminated copy, NULL when none */
    size_t salt_len;
    int pinned;           /* its boundary capsules are pinned */
    int anonymous;        /* the pseudo-session of sessionless requests (not listed) */
    int32_t *journal;     /* [n] committed tokens */
    int n, cap;
    int pending;          /* the last generated token, not in the state; -1 when none */
    int exact;            /* the state equals a cold prefill of the journal */
    uint64_t capsule;     /* registry id holding the boundary (0 = none; a held reference) */
    frt_checkpoint *ckpts;
    int n_ckpts;
    double created;       /* unix seconds */
    uint64_t requests;    /* completions served */
    int busy;             /* a request is running on it */
    frt_session_cartridge cart; /* the cartridge it started from, if any */
} frt_session;

typedef struct frt_sessions {
    frt_session **v;
    int n, cap;
    uint64_t counter; /* for generated ids */
} frt_sessions;

/* 1 when id is 1..63 characters of [A-Za-z0-9._:-]. */
int frt_session_id_valid(const char *id);

/* Adds a session. id NULL = a generated "sess-N". salt may be NULL.
 *   FRT_ERR_INVALID_ARGUMENT  an invalid id
 *   FRT_ERR_STATE             the id is taken
 *   FRT_ERR_OUT_OF_MEMORY */
int frt_sessions_add(frt_sessions *t, const char *id, const char *salt, size_t salt_len, int pinned,
                     frt_session **out);

frt_session *frt_sessions_find(const frt_sessions *t, const char *id);

/* Removes and frees s (the caller has dropped its capsule references). */
void frt_sessions_remove(frt_sessions *t, frt_session *s);

/* Frees every session. */
void frt_sessions_clear(frt_sessions *t);

/* A standalone session (the anonymous one); free with frt_session_free. */
frt_session *frt_session_new(const char *id);
void frt_session_free(frt_session *s);

/* Journal edits: set to ids[0..n), append one token. FRT_ERR_OUT_OF_MEMORY. */
int frt_session_set_journal(frt_session *s, const int32_t *ids, int n);
int frt_session_append(frt_session *s, int32_t token);

/* Binds s to a cartridge (copies of id and start). FRT_ERR_OUT_OF_MEMORY. */
int frt_session_set_cartridge(frt_session *s, const char *id, uint64_t key, int tokens, const int32_t *start,
                              int n_start);

/* Checkpoint by name, or NULL. */
frt_checkpoint *frt_session_checkpoint(frt_session *s, const char *name);

/* Adds a checkpoint slot (name must be new). FRT_ERR_OUT_OF_MEMORY. */
int frt_session_add_checkpoint(frt_session *s, const char *name, uint64_t capsule, int pin);

/* Removes checkpoint i (the caller has dropped its reference). */
void frt_session_remove_checkpoint(frt_session *s, int i);

#endif
