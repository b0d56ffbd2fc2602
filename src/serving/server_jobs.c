/*
 * serving/server_jobs.c - the job queue and the engine thread of the HTTP
 * server (server_int.h). One engine thread pops jobs and runs them one at a
 * time (frt_service_*); connection threads (server.c) wait for the answer,
 * or read the SSE text a streaming completion appends here.
 */
#include "serving/server_int.h"

#include "util/error.h"

#include <xxhash.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void frt_server_logf(frt_server *s, const char *fmt, ...)
{
    if (!s->p.log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_user, line);
}

/* ---- jobs ------------------------------------------------------------------------------ */

frt_job *frt_job_new(frt_server *s, frt_job_kind kind)
{
    frt_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->srv = s;
    j->refs = 1;
    j->t_arrival = frt_service_now();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

void frt_job_unref(frt_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    frt_api_completion_clear(&j->rq);
    frt_api_session_create_clear(&j->create);
    frt_api_tokens_clear(&j->tokens);
    free(j->sse);
    frt_chat_output_clear(&j->out);
    for (int i = 0; j->outs && i < j->rq.n; i++) frt_chat_output_clear(&j->outs[i]);
    free(j->outs);
    free(j->sinks);
    json_decref(j->message);
    free(j->prompt);
    if (j->body) json_decref(j->body);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

int frt_job_submit(frt_server *s, frt_job *j)
{
    pthread_mutex_lock(&s->qmu);
    if (s->stopping || s->qlen >= s->p.queue_size) {
        s->http.rejected_busy++;
        pthread_mutex_unlock(&s->qmu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++; /* the engine's reference */
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->qlen++;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

int frt_job_withdraw(frt_server *s, frt_job *j)
{
    pthread_mutex_lock(&s->qmu);
    int found = 0;
    if (!j->taken) {
        frt_job *prev = NULL;
        for (frt_job *x = s->head; x; prev = x, x = x->next) {
            if (x != j) continue;
            if (prev) prev->next = x->next;
            else s->head = x->next;
            if (s->tail == x) s->tail = prev;
            s->qlen--;
            s->http.rejected_queue_timeout++;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&s->qmu);
    if (found) frt_job_unref(j); /* the engine's reference */
    return found;
}

/* Appends raw text to the stream. Under j->mu. */
static void sse_append_raw(frt_job *j, const char *s, size_t n)
{
    if (j->sse_len + n + 1 > j->sse_cap) {
        size_t nc = j->sse_cap ? j->sse_cap : 4096;
        while (nc < j->sse_len + n + 1) nc *= 2;
        char *p = realloc(j->sse, nc);
        if (!p) return;
        j->sse = p;
        j->sse_cap = nc;
    }
    memcpy(j->sse + j->sse_len, s, n);
    j->sse_len += n;
}

/* Appends "data: JSON\n\n" (steals obj). Under j->mu. */
static void sse_append(frt_job *j, json_t *obj)
{
    char *s = frt_api_dumps(obj);
    if (!s) return;
    sse_append_raw(j, "data: ", 6);
    sse_append_raw(j, s, strlen(s));
    sse_append_raw(j, "\n\n", 2);
    free(s);
}

/* Sets the answer (steals body). */
static void job_answer(frt_job *j, int status, json_t *body)
{
    pthread_mutex_lock(&j->mu);
    j->status = status;
    if (j->body) json_decref(j->body);
    j->body = body;
    pthread_mutex_unlock(&j->mu);
}

static void job_fail(frt_job *j, const frt_api_error *err) { job_answer(j, err->status, frt_api_error_json(err)); }

/* Marks the job done (ending its stream) and wakes its connection thread. */
static void job_finish(frt_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    j->sse_end = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* ---- the engine thread ------------------------------------------------------------------ */

static void on_start(void *user, const frt_gen_result *res)
{
    (void)res;
    frt_job *j = user;
    pthread_mutex_lock(&j->mu);
    j->started = 1;
    for (int i = 0; j->ident.chat && i < (j->outs ? j->rq.n : 1); i++)
        sse_append(j, frt_api_chunk_index(frt_api_chunk_json(&j->ident, "", 0, 1, NULL, NULL), i));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static int on_text(void *user, const char *text, size_t len)
{
    frt_job *j = user;
    if (j->ident.chat) {
        int rc = frt_chat_output_feed(&j->out, text, len);
        return rc ? rc : j->cancel;
    }
    pthread_mutex_lock(&j->mu);
    sse_append(j, frt_api_chunk_json(&j->ident, text, len, 0, NULL, NULL));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return j->cancel;
}

/* A streamed completions choice of a forked request: its chunk with its index. */
static int on_choice_text(void *user, int index, const char *text, size_t len)
{
    frt_job *j = user;
    if (j->outs) {
        int rc = frt_chat_output_feed(&j->outs[index], text, len);
        return rc ? rc : j->cancel;
    }
    pthread_mutex_lock(&j->mu);
    sse_append(j, frt_api_chunk_index(frt_api_chunk_json(&j->ident, text, len, 0, NULL, NULL), index));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return j->cancel;
}

/* The logprobs of tokens just committed (streaming with logprobs): one
 * chunk with an empty delta / text carrying them. */
static int on_logprobs(void *user, const frt_engine *e, const frt_logprobs *lp, int first, int n)
{
    frt_job *j = user;
    (void)first;
    json_t *l = frt_api_logprobs_json(&j->ident, e, lp, n, &j->lp_text);
    if (!l) return FRT_ERR_OUT_OF_MEMORY;
    pthread_mutex_lock(&j->mu);
    sse_append(j, frt_api_logprobs_chunk_json(&j->ident, l));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return j->cancel;
}

/* The delta chunks of a decided piece of a streamed chat answer, for the
 * choice index. */
static int piece_chunks(frt_job *j, const frt_chat_piece *pc, int index)
{
    json_t *deltas = frt_api_piece_deltas(pc), *d;
    size_t k;
    pthread_mutex_lock(&j->mu);
    json_array_foreach(deltas, k, d)
        sse_append(j, frt_api_chunk_index(frt_api_delta_chunk_json(&j->ident, json_incref(d)), index));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    json_decref(deltas);
    return j->cancel;
}

/* A decided piece of a streamed chat answer. */
static int on_piece_stream(void *user, const frt_chat_piece *pc) { return piece_chunks(user, pc, 0); }

/* A decided piece of a streamed chat choice of a forked request. */
static int on_piece_choice_stream(void *user, const frt_chat_piece *pc)
{
    const struct frt_job_choice *c = user;
    return piece_chunks(c->j, pc, c->index);
}

/* A streamed chat with n > 1: one output parser per choice (tool call ids
 * seeded per choice). 0 or -1 with *err. */
static int chat_choice_parsers(frt_job *j, int tools, int open, uint64_t seed, frt_api_error *err)
{
    const int n = j->rq.n;
    j->outs = calloc((size_t)n, sizeof *j->outs);
    j->sinks = calloc((size_t)n, sizeof *j->sinks);
    if (!j->outs || !j->sinks) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        j->sinks[i] = (struct frt_job_choice){j, i};
        frt_chat_output_init(&j->outs[i], tools, open, seed + 0x9e3779b97f4a7c15ull * (uint64_t)i,
                             on_piece_choice_stream, &j->sinks[i]);
    }
    return 0;
}

/* A decided piece of a non-streamed chat answer: into its message. */
static int on_piece_message(void *user, const frt_chat_piece *pc)
{
    frt_job *j = user;
    return frt_api_message_add(j->message, pc) ? frt_error(FRT_ERR_OUT_OF_MEMORY, "chat answer") : 0;
}

/* A chat request's prompt ids (*ids malloc'd) from its messages, tools and
 * chat_template_kwargs, and whether the prompt opened a reasoning block.
 * Tools the template does not render are refused: the prompt would
 * silently be the tool-less one. */
static int chat_prompt(frt_server *s, frt_job *j, int32_t **ids, size_t *n, int *reasoning_open, frt_api_error *err)
{
    const frt_api_completion *c = &j->rq;
    frt_chat_request req = {
        .messages = c->messages,
        .tools = c->tools,
        .kwargs = c->template_kwargs,
        .add_generation_prompt = 1,
        .parse_special_in_content = s->p.parse_special_in_content};
    char *text = NULL, *plain = NULL;
    size_t len = 0, plen = 0;
    int rc = frt_service_chat_prompt(s->svc, &req, &text, &len, ids, n);
    if (rc) {
        frt_api_error_from_status(err, rc, "messages");
        return -1;
    }
    req.tools = NULL;
    int ignored = c->tools && !frt_service_chat_prompt(s->svc, &req, &plain, &plen, NULL, NULL) && plen == len &&
                  !memcmp(plain, text, len);
    *reasoning_open = frt_chat_prompt_opens_reasoning(text, len);
    free(plain);
    if (c->return_prompt && !ignored) j->prompt = text;
    else free(text);
    if (!ignored) return 0;
    free(*ids);
    *ids = NULL;
    return frt_api_fail(err, 400, "unsupported_value", "tools",
                        "This model's chat template does not render tools (the prompt is the same with and "
                        "without them), so the model would never see them: 'tools' is refused");
}

/* Sets up the chat side of j: g's prompt ids (*ids, the caller frees) and
 * the output parser. */
static int chat_setup(frt_server *s, frt_job *j, frt_gen_request *g, int32_t **ids, frt_api_error *err)
{
    const frt_api_completion *c = &j->rq;
    size_t n = 0;
    int open = 0;
    if (chat_prompt(s, j, ids, &n, &open, err)) return -1;
    g->ids = *ids;
    g->n_ids = (int)n;
    int tools = c->tools && c->tool_choice != FRT_API_TOOLS_NONE;
    if (open && c->grammar) { /* the grammar's output would be taken for reasoning */
        free(*ids);
        *ids = NULL;
        return frt_api_fail(err, 400, "unsupported_value", c->grammar_param,
                            "'%s' is enforced from the first generated token, but this prompt opens a reasoning "
                            "block (<think>): send chat_template_kwargs {\"enable_thinking\": false}",
                            c->grammar_param);
    }
    uint64_t seed = XXH64(j->ident.id, strlen(j->ident.id), (uint64_t)j->ident.created);
    if (c->stream && c->n > 1) {
        frt_chat_output_init(&j->out, tools, open, seed, on_piece_stream, j);
        return chat_choice_parsers(j, tools, open, seed, err);
    } else if (c->stream) {
        frt_chat_output_init(&j->out, tools, open, seed, on_piece_stream, j);
    } else {
        frt_chat_output_init(&j->out, tools, open, seed, on_piece_message, j);
        if (!(j->message = frt_api_message_new())) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    }
    return 0;
}

/* The finish_reason of a chat answer: tool_calls when it made calls and stopped by itself. */
static const char *chat_finish(const frt_job *j, const frt_gen_result *res)
{
    return j->out.n_calls && !strcmp(res->finish_reason, "stop") ? "tool_calls" : res->finish_reason;
}

/* frt_return_prompt: the rendered prompt joins the frt object of the answer (or final chunk) o, and so do the
 * facts of the cartridge (frt.cartridge). */
static json_t *with_prompt(const frt_job *j, json_t *o)
{
    if (j->prompt) json_object_set_new(json_object_get(o, "frt"), "prompt", json_string(j->prompt));
    return frt_server_cartridge_note(j, o);
}

/* The final chunks of a streamed forked request: each choice's finish, the
 * last with usage and the frt object. Under j->mu. */
static void choices_finish_chunks(frt_job *j, const frt_gen_result *res)
{
    for (int i = 0; i < res->n_choices; i++) {
        const char *fin = res->choices[i].finish_reason;
        if (j->outs && j->outs[i].n_calls && !strcmp(fin, "stop")) fin = "tool_calls";
        int last = i + 1 == res->n_choices;
        json_t *o = frt_api_chunk_index(frt_api_chunk_json(&j->ident, "", 0, 0, fin, last ? res : NULL), i);
        sse_append(j, last ? with_prompt(j, o) : o);
    }
}

static void answer_stream(frt_job *j, const frt_gen_result *res)
{
    const frt_api_completion *c = &j->rq;
    int cancelled = !strcmp(res->finish_reason, "cancelled");
    if (c->chat && !cancelled) frt_chat_output_finish(&j->out);
    for (int i = 0; j->outs && !cancelled && i < res->n_choices; i++) frt_chat_output_finish(&j->outs[i]);
    pthread_mutex_lock(&j->mu);
    if (!cancelled && res->choices) {
        choices_finish_chunks(j, res);
        if (c->include_usage) sse_append(j, frt_api_usage_chunk_json(&j->ident, res));
    } else if (!cancelled) {
        const char *finish = c->chat ? chat_finish(j, res) : res->finish_reason;
        sse_append(j, with_prompt(j, frt_api_chunk_json(&j->ident, "", 0, 0, finish, res)));
        if (c->include_usage) sse_append(j, frt_api_usage_chunk_json(&j->ident, res));
    }
    sse_append_raw(j, "data: [DONE]\n\n", 14);
    pthread_mutex_unlock(&j->mu);
}

/* A decided piece of a chat choice: into the message user. */
static int on_piece_into(void *user, const frt_chat_piece *pc)
{
    return frt_api_message_add(user, pc) ? frt_error(FRT_ERR_OUT_OF_MEMORY, "chat answer") : 0;
}

/* A chat choice's message: its text through a fresh output parser (tool
 * call ids seeded per choice). 0 or a status. */
static int choice_message(frt_job *j, int i, const frt_gen_choice *ch, json_t **msg, const char **finish)
{
    frt_chat_output out;
    json_t *m = frt_api_message_new();
    if (!m) return frt_error(FRT_ERR_OUT_OF_MEMORY, "chat answer");
    frt_chat_output_init(&out, j->out.tools, j->out.reasoning_open, j->out.id_seed + 0x9e3779b97f4a7c15ull * (uint64_t)i,
                         on_piece_into, m);
    int rc = frt_chat_output_feed(&out, ch->text ? ch->text : "", ch->text_len);
    if (!rc) rc = frt_chat_output_finish(&out);
    *finish = out.n_calls && !strcmp(ch->finish_reason, "stop") ? "tool_calls" : ch->finish_reason;
    frt_chat_output_clear(&out);
    if (rc) {
        json_decref(m);
        return rc;
    }
    frt_api_message_finish(m);
    *msg = m;
    return 0;
}

/* The whole answer of a forked request. */
static void answer_choices(frt_job *j, const frt_gen_result *res)
{
    if (!j->rq.chat) {
        job_answer(j, 200, frt_api_choices_json(&j->ident, res, NULL, NULL));
        return;
    }
    json_t **msgs = calloc((size_t)res->n_choices, sizeof *msgs);
    const char **fin = calloc((size_t)res->n_choices, sizeof *fin);
    int rc = msgs && fin ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "chat answer");
    for (int i = 0; !rc && i < res->n_choices; i++) rc = choice_message(j, i, &res->choices[i], &msgs[i], &fin[i]);
    if (rc) {
        frt_api_error err;
        frt_api_error_from_status(&err, rc, "messages");
        job_fail(j, &err);
    } else {
        job_answer(j, 200, with_prompt(j, frt_api_choices_json(&j->ident, res, msgs, fin)));
    }
    for (int i = 0; msgs && i < res->n_choices; i++) json_decref(msgs[i]);
    free(msgs);
    free(fin);
}

static void answer_whole(frt_job *j, const frt_gen_result *res)
{
    if (res->choices) {
        answer_choices(j, res);
        return;
    }
    if (!j->rq.chat) {
        job_answer(j, 200, with_prompt(j, frt_api_completion_json(&j->ident, res, NULL, NULL)));
        return;
    }
    int rc = frt_chat_output_feed(&j->out, res->text ? res->text : "", res->text_len);
    if (!rc) rc = frt_chat_output_finish(&j->out);
    if (rc) {
        frt_api_error err;
        frt_api_error_from_status(&err, rc, "messages");
        job_fail(j, &err);
        return;
    }
    frt_api_message_finish(j->message);
    job_answer(j, 200, with_prompt(j, frt_api_completion_json(&j->ident, res, j->message, chat_finish(j, res))));
}

static void run_completion(frt_server *s, frt_job *j)
{
    frt_api_completion *c = &j->rq;
    frt_api_error err;
    const char *what = c->chat ? "messages" : "prompt";
    int32_t *chat_ids = NULL;
    frt_gen_request g;
    memset(&g, 0, sizeof g);
    if (frt_server_cartridge_route(s, j, &g, &err)) {
        job_fail(j, &err);
        return;
    }
    if (c->chat) {
        if (chat_setup(s, j, &g, &chat_ids, &err)) {
            job_fail(j, &err);
            return;
        }
    } else if (c->prompt_text) {
        g.text = c->prompt_text;
        g.text_len = strlen(c->prompt_text);
    } else {
        g.ids = c->prompt_ids;
        g.n_ids = c->n_prompt_ids;
    }
    g.session_id = c->session_id;
    g.max_tokens = c->max_tokens;
    g.clamp_max_tokens = !c->max_tokens_given;
    g.sampling = c->sampling;
    g.has_seed = c->has_seed;
    g.seed = c->seed;
    g.stop = (const char *const *)c->stop;
    g.n_stop = c->n_stop;
    g.ignore_eos = c->ignore_eos;
    g.pin_len = c->pin_len;
    g.t_arrival = j->t_arrival;
    g.n = c->n;
    g.best_of = c->best_of;
    g.grammar = c->grammar;
    g.grammar_param = c->grammar_param;
    if (c->stream) {
        g.on_start = on_start;
        g.on_text = on_text;
        if (c->n > 1) g.on_choice_text = on_choice_text;
        g.on_logprobs = on_logprobs;
    }
    g.user = j;
    g.cancel = &j->cancel;
    frt_gen_result res;
    int rc = frt_service_generate(s->svc, &g, &res);
    frt_api_lp_text_free(&j->lp_text);
    free(chat_ids);
    if (rc) {
        if (res.cartridge_refused || (res.error_param && !strncmp(res.error_param, "cartridge", 9)))
            frt_api_cartridge_error(&err, rc, res.error_param);
        else frt_api_error_from_status(&err, rc, res.error_param ? res.error_param : what);
        frt_server_logf(s, "%s %d %s", c->chat ? "chat" : "completion", err.status, err.message);
        pthread_mutex_lock(&j->mu);
        int started = j->started;
        if (started) {
            sse_append(j, frt_api_error_json(&err));
            sse_append_raw(j, "data: [DONE]\n\n", 14);
        }
        pthread_mutex_unlock(&j->mu);
        if (!started) job_fail(j, &err);
        return;
    }
    frt_server_logf(s,
                    "%s%s%.64s session=%s action=%s prompt=%d cached=%d prefilled=%d generated=%d finish=%s%s "
                    "restore=%.2fms ttft=%.2fms",
                    c->chat ? "chat" : "completion", c->user[0] ? " user=" : "", c->user,
                    res.session_id[0] ? res.session_id : "-",
                    frt_prefix_action_name(res.action), res.prompt_tokens, res.cached_tokens, res.prefill_tokens,
                    res.completion_tokens, res.finish_reason, res.time_limited ? " (time limit)" : "",
                    res.restore_ms, res.ttft_ms);
    if (c->stream) answer_stream(j, &res);
    else answer_whole(j, &res);
    frt_gen_result_clear(&res);
}

/* The session object of id (an empty object if it is gone). */
static json_t *session_body(frt_server *s, const char *id)
{
    frt_service_lock(s->svc);
    json_t *o = frt_api_session_by_id_json(s->svc, id);
    frt_service_unlock(s->svc);
    return o;
}

static void fail_status(frt_job *j, int rc, const char *not_found_code, const char *param)
{
    frt_api_error err;
    if (rc == FRT_ERR_NOT_FOUND) frt_api_fail(&err, 404, not_found_code, param, "%s", frt_last_error());
    else if (rc == FRT_ERR_INVALID_ARGUMENT) frt_api_fail(&err, 400, "invalid_value", param, "%s", frt_last_error());
    else frt_api_error_from_status(&err, rc, param);
    job_fail(j, &err);
}

static void run_capsule_job(frt_server *s, frt_job *j)
{
    int del = j->kind == FRT_JOB_CAPSULE_DELETE;
    int rc = del ? frt_service_capsule_delete(s->svc, j->capsule)
                 : frt_service_capsule_pin(s->svc, j->capsule, j->kind == FRT_JOB_CAPSULE_PIN);
    if (rc) {
        fail_status(j, rc, "capsule_not_found", "capsule_id");
    } else if (del) {
        char cn[32];
        frt_api_capsule_name(j->capsule, cn);
        job_answer(j, 200, frt_api_deleted_json(cn, "capsule.deleted"));
    } else {
        frt_service_lock(s->svc);
        json_t *o = frt_api_capsule_by_id_json(s->svc, j->capsule);
        frt_service_unlock(s->svc);
        job_answer(j, 200, o);
    }
}

static void run_job(frt_server *s, frt_job *j)
{
    int rc = 0;
    char out[FRT_SESSION_ID_MAX];
    switch (j->kind) {
    case FRT_JOB_COMPLETION: run_completion(s, j); return;
    case FRT_JOB_SESSION_CREATE: {
        const frt_api_session_create *c = &j->create;
        rc = frt_service_session_create(s->svc, c->has_id ? c->id : NULL, c->salt, c->salt_len, c->pin, out);
        if (rc == FRT_ERR_STATE) {
            frt_api_error err;
            frt_api_fail(&err, 409, "session_exists", "id", "%s", frt_last_error());
            job_fail(j, &err);
        } else if (rc) {
            fail_status(j, rc, "session_not_found", "id");
        } else {
            job_answer(j, 200, session_body(s, out));
            frt_server_logf(s, "session %s created", out);
        }
        return;
    }
    case FRT_JOB_SESSION_DELETE:
        rc = frt_service_session_delete(s->svc, j->id);
        if (rc) fail_status(j, rc, "session_not_found", "session_id");
        else job_answer(j, 200, frt_api_deleted_json(j->id, "session.deleted"));
        return;
    case FRT_JOB_FORK: {
        char(*ids)[FRT_SESSION_ID_MAX] = calloc((size_t)j->op.n, sizeof *ids);
        rc = ids ? frt_service_session_fork(s->svc, j->id, j->op.n, ids) : FRT_ERR_OUT_OF_MEMORY;
        if (rc) {
            fail_status(j, rc, "session_not_found", "n");
        } else {
            frt_service_lock(s->svc);
            json_t *o = frt_api_sessions_by_ids_json(s->svc, (const char(*)[FRT_SESSION_ID_MAX])ids, j->op.n);
            frt_service_unlock(s->svc);
            job_answer(j, 200, o);
        }
        free(ids);
        return;
    }
    case FRT_JOB_CHECKPOINT: {
        uint64_t cap = 0;
        rc = frt_service_checkpoint(s->svc, j->id, j->op.name, j->op.pin, &cap);
        if (rc) {
            fail_status(j, rc, "session_not_found", "name");
        } else {
            frt_service_lock(s->svc);
            const frt_cap *c = frt_registry_get(frt_service_registry(s->svc), cap);
            int position = c ? c->position : 0;
            frt_service_unlock(s->svc);
            job_answer(j, 200, frt_api_checkpoint_json(j->id, j->op.name, cap, position, j->op.pin));
        }
        return;
    }
    case FRT_JOB_ROLLBACK:
        rc = frt_service_rollback(s->svc, j->id, j->op.name);
        if (rc == FRT_ERR_NOT_FOUND && strstr(frt_last_error(), "checkpoint")) fail_status(j, rc, "checkpoint_not_found", "name");
        else if (rc) fail_status(j, rc, "session_not_found", "session_id");
        else job_answer(j, 200, session_body(s, j->id));
        return;
    case FRT_JOB_CAPSULE_PIN:
    case FRT_JOB_CAPSULE_UNPIN:
    case FRT_JOB_CAPSULE_DELETE: run_capsule_job(s, j); return;
    case FRT_JOB_TOKENS: {
        frt_api_error err;
        json_t *o = frt_api_tokens_answer(s->e, &j->tokens, &err);
        if (o) job_answer(j, 200, o);
        else job_fail(j, &err);
        return;
    }
    }
}

void *frt_server_engine_main(void *arg)
{
    frt_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->head && !s->stopping) pthread_cond_wait(&s->qcv, &s->qmu);
        frt_job *j = s->head;
        if (!j) {
            pthread_mutex_unlock(&s->qmu);
            break;
        }
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->qlen--;
        j->taken = 1;
        s->running = j;
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->qmu);
        if (stopping) {
            frt_api_error err;
            frt_api_fail(&err, 503, "shutting_down", NULL, "The server is shutting down");
            job_fail(j, &err);
        } else {
            run_job(s, j);
        }
        pthread_mutex_lock(&s->qmu);
        s->running = NULL;
        pthread_mutex_unlock(&s->qmu);
        job_finish(j);
        frt_job_unref(j);
    }
    return NULL;
}
