/* serving/session.c - the session table (see session.h). */
#include "serving/session.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int frt_session_id_valid(const char *id)
{
    if (!id) return 0;
    size_t n = strlen(id);
    if (n < 1 || n >= FRT_SESSION_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == ':'))
            return 0;
    }
    return 1;
}

frt_session *frt_session_new(const char *id)
{
    frt_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    snprintf(s->id, sizeof s->id, "%s", id ? id : "");
    s->pending = -1;
    s->exact = 1;
    s->created = (double)time(NULL);
    return s;
}

void frt_session_free(frt_session *s)
{
    if (!s) return;
    free(s->salt);
    free(s->journal);
    free(s->ckpts);
    free(s->cart.start);
    free(s);
}

frt_session *frt_sessions_find(const frt_sessions *t, const char *id)
{
    for (int i = 0; t && id && i < t->n; i++)
        if (!strcmp(t->v[i]->id, id)) return t->v[i];
    return NULL;
}

int frt_sessions_add(frt_sessions *t, const char *id, const char *salt, size_t salt_len, int pinned,
                     frt_session **out)
{
    char gen[FRT_SESSION_ID_MAX];
    if (!id) {
        do snprintf(gen, sizeof gen, "sess-%llu", (unsigned long long)++t->counter);
        while (frt_sessions_find(t, gen));
        id = gen;
    }
    if (!frt_session_id_valid(id))
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "session id must be 1 to %d characters of letters, digits, '.', '_', '-', ':'",
                         FRT_SESSION_ID_MAX - 1);
    if (frt_sessions_find(t, id)) return frt_error(FRT_ERR_STATE, "session '%s' already exists", id);
    if (t->n == t->cap) {
        int nc = t->cap ? 2 * t->cap : 16;
        frt_session **v = realloc(t->v, (size_t)nc * sizeof *v);
        if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "sessions");
        t->v = v;
        t->cap = nc;
    }
    frt_session *s = frt_session_new(id);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "sessions");
    if (salt && salt_len) {
        if (!(s->salt = malloc(salt_len + 1))) {
            frt_session_free(s);
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "sessions");
        }
        memcpy(s->salt, salt, salt_len);
        s->salt[salt_len] = 0;
        s->salt_len = salt_len;
    }
    s->pinned = pinned ? 1 : 0;
    t->v[t->n++] = s;
    if (out) *out = s;
    return 0;
}

void frt_sessions_remove(frt_sessions *t, frt_session *s)
{
    for (int i = 0; i < t->n; i++) {
        if (t->v[i] != s) continue;
        memmove(t->v + i, t->v + i + 1, (size_t)(t->n - i - 1) * sizeof *t->v);
        t->n--;
        frt_session_free(s);
        return;
    }
}

void frt_sessions_clear(frt_sessions *t)
{
    for (int i = 0; i < t->n; i++) frt_session_free(t->v[i]);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

static int reserve(frt_session *s, int n)
{
    if (n <= s->cap) return 0;
    int nc = s->cap ? s->cap : 256;
    while (nc < n) nc *= 2;
    int32_t *j = realloc(s->journal, (size_t)nc * sizeof *j);
    if (!j) return frt_error(FRT_ERR_OUT_OF_MEMORY, "session journal: %d tokens", nc);
    s->journal = j;
    s->cap = nc;
    return 0;
}

int frt_session_set_journal(frt_session *s, const int32_t *ids, int n)
{
    FRT_TRY(reserve(s, n));
    if (n > 0 && ids != s->journal) memmove(s->journal, ids, (size_t)n * sizeof *ids);
    s->n = n;
    return 0;
}

int frt_session_append(frt_session *s, int32_t token)
{
    FRT_TRY(reserve(s, s->n + 1));
    s->journal[s->n++] = token;
    return 0;
}

frt_checkpoint *frt_session_checkpoint(frt_session *s, const char *name)
{
    for (int i = 0; s && name && i < s->n_ckpts; i++)
        if (!strcmp(s->ckpts[i].name, name)) return &s->ckpts[i];
    return NULL;
}

int frt_session_add_checkpoint(frt_session *s, const char *name, uint64_t capsule, int pin)
{
    frt_checkpoint *c = realloc(s->ckpts, (size_t)(s->n_ckpts + 1) * sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "checkpoints");
    s->ckpts = c;
    frt_checkpoint *k = &s->ckpts[s->n_ckpts++];
    snprintf(k->name, sizeof k->name, "%s", name);
    k->capsule = capsule;
    k->pin = pin;
    return 0;
}

void frt_session_remove_checkpoint(frt_session *s, int i)
{
    if (i < 0 || i >= s->n_ckpts) return;
    memmove(s->ckpts + i, s->ckpts + i + 1, (size_t)(s->n_ckpts - i - 1) * sizeof *s->ckpts);
    s->n_ckpts--;
}

int frt_session_set_cartridge(frt_session *s, const char *id, uint64_t key, int tokens, const int32_t *start,
                              int n_start)
{
    int32_t *copy = n_start > 0 ? malloc((size_t)n_start * sizeof *copy) : NULL;
    if (n_start > 0 && !copy) return frt_error(FRT_ERR_OUT_OF_MEMORY, "session");
    if (n_start > 0) memcpy(copy, start, (size_t)n_start * sizeof *copy);
    free(s->cart.start);
    snprintf(s->cart.id, sizeof s->cart.id, "%s", id ? id : "");
    s->cart.key = key;
    s->cart.tokens = tokens;
    s->cart.start = copy;
    s->cart.n_start = n_start > 0 ? n_start : 0;
    return 0;
}
