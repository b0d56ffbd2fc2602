/*
 * branch.c - branch slots (frt/branch.h, docs/fork.md): B copies of the
 * live state table, bound by pointer, a fork of one capsule into them and
 * the step of every live branch.
 *
 * Layout: one full copy of every state entry per slot. Slot 0 is the table
 * state.c allocates; slots 1..B-1 are allocated here, entry by entry, with
 * the same sizes. Binding slot s points m->state[i].buf (and the tokens,
 * boundary and logits handles, the in-state ports) at slot s's buffers and
 * lets the architecture rebind its views; a backend whose recorded work
 * reads the state through those pointers at replay time (binds_slots) then
 * runs slot s with the graphs captured at load; any other backend (cuda)
 * has one set of graphs per slot, captured on that slot (model.c,
 * frt_model_slot_key). Nothing is copied.
 */
#include "model/model_internal.h"

#include "frt/branch.h"
#include "frt/policy.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t frt_branch_seed(uint64_t seed, int branch)
{
    unsigned char b[16];
    uint64_t i = (uint64_t)(uint32_t)branch;
    for (int k = 0; k < 8; k++) {
        b[k] = (unsigned char)(seed >> (8 * k));
        b[8 + k] = (unsigned char)(i >> (8 * k));
    }
    return XXH64(b, sizeof b, 0xb4a2c5);
}

static frt_buffer *slot_buf(const frt_model *m, int slot, int i) { return m->slot_bufs[(size_t)slot * m->n_state + i]; }

/* Points the table at slot s. The runtime's handles are found by identity
 * in slot 0 (their index in the table is not assumed). */
int frt_model_bind_slot(frt_model *m, int s)
{
    if (s == m->bound_slot) return 0;
    for (int i = 0; i < m->n_state; i++) {
        frt_buffer *old = m->state[i].buf, *nb = slot_buf(m, s, i);
        frt_buffer **handles[] = {&m->tokens, &m->boundary, &m->logits, &m->counts, &m->seen};
        for (size_t h = 0; h < sizeof handles / sizeof handles[0]; h++)
            if (*handles[h] == old) *handles[h] = nb;
        for (int j = 0; j < m->n_io; j++)
            if (m->io[j].in_state && m->io[j].buf == old) m->io[j].buf = nb;
        m->state[i].buf = nb;
    }
    /* The rollback record (capsule.c) describes the bound slot: each slot keeps its own. */
    m->slot_live_capsule[m->bound_slot] = m->live_capsule;
    m->live_capsule = m->slot_live_capsule[s];
    m->bound_slot = s;
    return m->arch->bind_state ? m->arch->bind_state(m) : 0;
}

static size_t slots_bytes(const frt_model *m, int n_slots)
{
    size_t per = 0;
    for (int i = 0; i < m->n_state; i++) per += m->state[i].bytes;
    return per * (size_t)n_slots;
}

static int check_slots(frt_model *m, int B)
{
    if (B < 1 || B > FRT_MAX_BRANCH_SLOTS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "model: branch_slots %d is outside 1..%d", B, FRT_MAX_BRANCH_SLOTS);
    if (B == 1) return 0;
    frt_device_info di;
    FRT_TRY(frt_context_device_info(m->ctx, &di));
    size_t need = slots_bytes(m, B - 1);
    if (need / (size_t)(B - 1) != slots_bytes(m, 1) || need > di.free_bytes)
        return frt_error(FRT_ERR_OUT_OF_MEMORY,
                         "model: %d branch slots need %zu more bytes of state (%zu per slot), the %s has %zu free", B,
                         need, slots_bytes(m, 1), m->params.backend == FRT_BACKEND_CPU ? "host" : "device",
                         di.free_bytes);
    return 0;
}

int frt_model_branches_alloc(frt_model *m)
{
    int B = m->params.branch_slots ? m->params.branch_slots : 1;
    FRT_TRY(check_slots(m, B));
    m->slot_bufs = calloc((size_t)B * (size_t)m->n_state, sizeof *m->slot_bufs);
    m->branch_live = calloc((size_t)B, 1);
    m->slot_live_capsule = calloc((size_t)B, sizeof *m->slot_live_capsule);
    if (!m->slot_bufs || !m->branch_live || !m->slot_live_capsule) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for branch slots");
    m->n_slots = B;
    for (int i = 0; i < m->n_state; i++) {
        m->slot_bufs[i] = m->state[i].buf;
        if (m->state[i].buf == m->boundary) m->boundary_entry = i;
    }
    m->bd_host = calloc((size_t)B, sizeof *m->bd_host);
    if (!m->bd_host) return frt_error(FRT_ERR_OUT_OF_MEMORY, "model: out of memory for branch slots");
    if (B > 1)
        FRT_TRY(frt_buffer_alloc(m->ctx, "branch.boundaries", FRT_SPACE_DEVICE, (size_t)B * sizeof(frt_boundary),
                                 &m->bd_all));
    for (int s = 1; s < B; s++)
        for (int i = 0; i < m->n_state; i++) {
            /* Named as the entry: capsules name their buffers by it. */
            const frt_state_entry *e = &m->state[i];
            frt_buffer **dst = &m->slot_bufs[(size_t)s * m->n_state + i];
            FRT_TRY(frt_buffer_alloc(m->ctx, e->decl.name, FRT_SPACE_DEVICE, e->bytes, dst));
            FRT_TRY(frt_buffer_fill(*dst, 0, e->bytes, 0, m->stream));
        }
    return frt_stream_sync(m->stream);
}

void frt_model_branches_free(frt_model *m)
{
    if (!m->slot_bufs) return;
    if (m->state) frt_model_bind_slot(m, 0);
    for (size_t k = (size_t)m->n_state; k < (size_t)m->n_slots * m->n_state; k++) frt_buffer_free(m->slot_bufs[k]);
    free(m->slot_bufs);
    free(m->branch_live);
    free(m->slot_live_capsule);
    m->slot_live_capsule = NULL;
    frt_buffer_free(m->bd_all);
    free(m->bd_host);
    m->bd_all = NULL;
    m->bd_host = NULL;
    m->slot_bufs = NULL;
    m->branch_live = NULL;
}

/* ---- the public API -------------------------------------------------------- */

int frt_model_branch_select(frt_model *m, int slot)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "branch: NULL model");
    if (slot < 0 || slot >= m->n_slots)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "branch: slot %d of %d (params.branch_slots)", slot, m->n_slots);
    FRT_TRY(frt_model_bind_slot(m, slot));
    m->selected_slot = slot;
    return 0;
}

int frt_model_branch_selected(const frt_model *m)
{
    return m ? m->selected_slot : frt_error(FRT_ERR_INVALID_ARGUMENT, "branch: NULL model");
}

int frt_model_branch_count(const frt_model *m)
{
    return m ? m->n_branches : frt_error(FRT_ERR_INVALID_ARGUMENT, "branch: NULL model");
}

static int check_branch(const frt_model *m, int branch)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "branch: NULL model");
    if (branch < 0 || branch >= m->n_branches)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "branch: %d of %d forked branches", branch, m->n_branches);
    return 0;
}

int frt_model_branch_live(const frt_model *m, int branch)
{
    FRT_TRY(check_branch(m, branch));
    return m->branch_live[branch];
}

int frt_model_branch_stop(frt_model *m, int branch)
{
    FRT_TRY(check_branch(m, branch));
    m->branch_live[branch] = 0;
    return 0;
}

int frt_model_rows_rewritten(frt_model *m)
{
    if (!m->shared_rows) return 0;
    m->shared_rows = 0;
    return m->bk->shared_rows ? m->bk->shared_rows(m, 0, 0) : 0;
}

/* After a fork of c into slots 0..n-1: their KV rows below c's position are
 * c's bytes in every slot. */
static int fork_shared(frt_model *m, const frt_capsule *c, int n)
{
    frt_capsule_info ci;
    FRT_TRY(frt_capsule_info_get(c, &ci));
    if (!m->bk->shared_rows || n < 2 || ci.position < 1) return 0;
    FRT_TRY(m->bk->shared_rows(m, n, (int)ci.position));
    m->shared_rows = (int)ci.position;
    return 0;
}

int frt_model_fork(frt_model *m, const frt_capsule *c, int n, uint64_t seed)
{
    if (!m || !c) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fork: NULL argument");
    /* Checked before the restore: a policy has no sampler to seed (and one slot), so the seed would be lost. */
    if (frt_model_is_policy(m))
        return frt_error(FRT_ERR_UNSUPPORTED, "fork: model_type '%s' is a policy: it has no sampler to seed and one "
                                              "slot (restore the capsule with frt_capsule_restore)",
                         m->cfg.model_type);
    if (n < 1 || n > m->n_slots)
        return frt_error(FRT_ERR_OUT_OF_RANGE,
                         "fork: %d branches, the model has %d branch slots (load it with branch_slots >= %d)", n,
                         m->n_slots, n < 1 ? 1 : n);
    int rc = 0;
    for (int s = 0; s < n && rc == 0; s++) {
        rc = frt_model_bind_slot(m, s);
        if (rc == 0) rc = frt_capsule_restore(m, c);
        if (rc == 0) rc = frt_model_seed(m, frt_branch_seed(seed, s));
        /* The capsule was checked on slot 0: a later failure is a device
         * error, which leaves the fork unusable. */
        if (rc < 0 && s > 0) m->n_branches = 0;
    }
    if (rc < 0) {
        frt_model_bind_slot(m, m->selected_slot);
        return rc;
    }
    FRT_TRY(frt_model_branch_select(m, 0));
    FRT_TRY(fork_shared(m, c, n));
    m->n_branches = n;
    memset(m->branch_live, 0, (size_t)m->n_slots);
    memset(m->branch_live, 1, (size_t)n);
    return 0;
}

int frt_model_boundaries_read(frt_model *m, int n, frt_boundary *out)
{
    const size_t sz = sizeof(frt_boundary);
    if (n < 1 || n > m->n_slots)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "branch: boundaries of %d slots (%d)", n, m->n_slots);
    if (!m->bd_all) return frt_model_boundary_read(m, out); /* one slot: the table's */
    for (int b = 0; b < n; b++)
        FRT_TRY(frt_buffer_copy(m->bd_all, (size_t)b * sz, slot_buf(m, b, m->boundary_entry), 0, sz, m->stream));
    FRT_TRY(frt_buffer_read(m->bd_all, 0, out, (size_t)n * sz, m->stream));
    return frt_stream_sync(m->stream);
}

/* What a step needs of branch s's boundary b (decode: a pending token and
 * room; sample: logits). */
static int check_step(const frt_model *m, int s, const frt_boundary *b, int decode)
{
    if (decode && b->pending < 0) return frt_error(FRT_ERR_STATE, "branch %d: no pending token (sample first)", s);
    if (decode && b->pos >= m->max_seq)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "branch %d: the state is full (%d tokens)", s, b->pos);
    if (!decode && !b->has_logits) return frt_error(FRT_ERR_STATE, "branch %d: no logits", s);
    return 0;
}

/* Steps the live branches one after another, each on its own slot. */
static int step_each(frt_model *m, const frt_sampling *s, int32_t *tokens, int decode)
{
    int rc = 0;
    for (int i = 0; i < m->n_branches && rc == 0; i++) {
        tokens[i] = -1;
        if (!m->branch_live[i]) continue;
        rc = frt_model_bind_slot(m, i);
        if (rc == 0) rc = decode ? frt_model_decode(m, s, &tokens[i]) : frt_model_sample(m, s, &tokens[i]);
    }
    return rc;
}

static int step_all(frt_model *m, const frt_sampling *s, int32_t *tokens, int decode)
{
    if (!m || !tokens) return frt_error(FRT_ERR_INVALID_ARGUMENT, "branch: NULL argument");
    if (m->n_branches < 1) return frt_error(FRT_ERR_STATE, "branch: no fork (frt_model_fork first)");
    frt_boundary *bd = m->bd_host;
    int rc = frt_model_boundaries_read(m, m->n_branches, bd), live = 0;
    for (int i = 0; i < m->n_branches && rc == 0; i++)
        if (m->branch_live[i]) rc = check_step(m, i, &bd[i], decode), live++;
    /* Every branch live: one batched decode graph when the backend has one
     * (the same bits per branch as stepping them one after another). */
    if (rc == 0 && decode && live == m->n_branches && live >= 2 && live <= m->batch_max)
        rc = frt_model_decode_batch(m, s, live, tokens);
    else if (rc == 0)
        rc = step_each(m, s, tokens, decode);
    int brc = frt_model_bind_slot(m, m->selected_slot);
    FRT_TRY(rc);
    return brc;
}

int frt_model_branch_sample(frt_model *m, const frt_sampling *s, int32_t *tokens)
{
    return step_all(m, s, tokens, 0);
}

int frt_model_branch_decode(frt_model *m, const frt_sampling *s, int32_t *tokens)
{
    return step_all(m, s, tokens, 1);
}
