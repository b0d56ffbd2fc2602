/*
 * test_chat_output.c - the split of generated chat text into reasoning,
 * content and tool calls (src/serving/chat_output.c) on scripted model
 * outputs: complete, fed in every split into two pieces and byte by byte
 * (the result must not depend on how a stream cut the text), several calls,
 * malformed JSON, an unterminated tag at max_tokens, reasoning opened by
 * the prompt or by the text, tool parsing off.
 */
#include "frt_test.h"
#include "serving/chat_output.h"

#include <jansson.h>

/* What the pieces add up to: content, reasoning, calls as "name(args);". */
typedef struct collected {
    char content[4096], reasoning[4096], calls[4096];
    size_t nc, nr, nk;
    int n_calls, bad_index, n_pieces;
    char ids[8][32];
} collected;

static void put(char *dst, size_t *n, const char *s, size_t l)
{
    if (*n + l >= 4096) return;
    memcpy(dst + *n, s, l);
    *n += l;
    dst[*n] = 0;
}

static int collect(void *user, const frt_chat_piece *pc)
{
    collected *c = user;
    c->n_pieces++;
    if (pc->part == FRT_CHAT_PART_CONTENT) put(c->content, &c->nc, pc->text, pc->len);
    else if (pc->part == FRT_CHAT_PART_REASONING) put(c->reasoning, &c->nr, pc->text, pc->len);
    else {
        if (pc->index != c->n_calls) c->bad_index = 1;
        if (c->n_calls < 8) snprintf(c->ids[c->n_calls], 32, "%s", pc->id);
        c->n_calls++;
        put(c->calls, &c->nk, pc->name, strlen(pc->name));
        put(c->calls, &c->nk, "(", 1);
        put(c->calls, &c->nk, pc->arguments, strlen(pc->arguments));
        put(c->calls, &c->nk, ");", 2);
    }
    return 0;
}

/* Feeds text in pieces cut at the offsets cuts[0..n_cuts) and finishes. */
static void parse_cut(const char *text, const size_t *cuts, int n_cuts, int tools, int open, collected *out)
{
    memset(out, 0, sizeof *out);
    frt_chat_output p;
    frt_chat_output_init(&p, tools, open, 42, collect, out);
    size_t at = 0, n = strlen(text);
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        CHECK_OK(frt_chat_output_feed(&p, text + at, end - at));
        at = end;
    }
    CHECK_OK(frt_chat_output_finish(&p));
    frt_chat_output_clear(&p);
}

static int same(const collected *a, const collected *b)
{
    return !strcmp(a->content, b->content) && !strcmp(a->reasoning, b->reasoning) && !strcmp(a->calls, b->calls) &&
           a->n_calls == b->n_calls;
}

/* Parses text whole, then cut in two at every byte and byte by byte: every
 * way gives the same split, which must equal the expectation. */
static void expect(const char *text, int tools, int open, const char *content, const char *reasoning,
                   const char *calls)
{
    collected whole, cut;
    parse_cut(text, NULL, 0, tools, open, &whole);
    CHECK_MSG(!strcmp(whole.content, content), "content [%s] want [%s] for [%s]", whole.content, content, text);
    CHECK_MSG(!strcmp(whole.reasoning, reasoning), "reasoning [%s] want [%s]", whole.reasoning, reasoning);
    CHECK_MSG(!strcmp(whole.calls, calls), "calls [%s] want [%s]", whole.calls, calls);
    CHECK(!whole.bad_index);
    size_t n = strlen(text), bytes[4096];
    int split_ok = 1;
    for (size_t k = 1; k < n; k++) {
        parse_cut(text, &k, 1, tools, open, &cut);
        if (!same(&cut, &whole)) split_ok = 0;
    }
    CHECK_MSG(split_ok, "a two-piece split differs for [%s]", text);
    for (size_t k = 0; k + 1 < n && k < 4096; k++) bytes[k] = k + 1;
    parse_cut(text, bytes, n > 1 ? (int)(n - 1) : 0, tools, open, &cut);
    CHECK_MSG(same(&cut, &whole), "byte by byte differs for [%s]: content [%s] calls [%s]", text, cut.content,
              cut.calls);
}

static void test_plain(void)
{
    expect("Hello, world.", 1, 0, "Hello, world.", "", "");
    expect("Hello, world.", 0, 0, "Hello, world.", "", "");
    expect("a < b and <tool is not a tag", 1, 0, "a < b and <tool is not a tag", "", "");
    expect("ends with <tool_ca", 1, 0, "ends with <tool_ca", "", "");
    expect("", 1, 0, "", "", "");
}

static void test_tool_calls(void)
{
    const char *one = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    expect(one, 1, 0, "", "", "get_weather({\"city\": \"Paris\"});");
    /* content before the call stays content (white space before the tag dropped) */
    char buf[1024];
    snprintf(buf, sizeof buf, "Let me check.\n\n%s", one);
    expect(buf, 1, 0, "Let me check.", "", "get_weather({\"city\": \"Paris\"});");
    /* several calls, white space between them dropped; arguments byte-exact */
    expect("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1.10, \"s\": \"}{\\\"\"}}\n</tool_call>\n"
           "<tool_call>\n{\"arguments\": {\"y\": [1, {\"z\": null}]}, \"name\": \"b\"}\n</tool_call>\n",
           1, 0, "", "", "a({\"x\": 1.10, \"s\": \"}{\\\"\"});b({\"y\": [1, {\"z\": null}]});");
    /* no arguments member: {} ; a string arguments kept as it is */
    expect("<tool_call>{\"name\": \"now\"}</tool_call>", 1, 0, "", "", "now({});");
    expect("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"k\\\": 2}\"}</tool_call>", 1, 0, "", "",
           "f({\"k\": 2});");
    /* unicode in arguments */
    expect("<tool_call>{\"name\": \"say\", \"arguments\": {\"t\": \"h\xc3\xa9llo \xe2\x9c\x93\"}}</tool_call>", 1, 0,
           "", "", "say({\"t\": \"h\xc3\xa9llo \xe2\x9c\x93\"});");
    /* a key spelled with an escape: the arguments are re-serialized (json.dumps separators) */
    expect("<tool_call>{\"name\": \"f\", \"\\u0061rguments\": {\"x\":1,\"y\":[2]}}</tool_call>", 1, 0, "", "",
           "f({\"x\": 1, \"y\": [2]});");
    /* a long body fed piece by piece (the end tag is searched incrementally) */
    {
        char big[3000];
        int k = snprintf(big, sizeof big, "<tool_call>{\"name\": \"g\", \"arguments\": {\"s\": \"");
        for (; k < 2900; k++) big[k] = (char)('a' + k % 26);
        snprintf(big + k, sizeof big - (size_t)k, "\"}}</tool_call>");
        size_t cuts[512];
        int n_cuts = 0;
        for (size_t at = 7; at < strlen(big) && n_cuts < 512; at += 7) cuts[n_cuts++] = at;
        collected c;
        parse_cut(big, cuts, n_cuts, 1, 0, &c);
        CHECK(c.n_calls == 1 && c.nc == 0 && c.nk == 2 + strlen(big) - strlen("<tool_call>{\"name\": \"\", \"arguments\": </tool_call>"));
    }
    /* text after a call is content */
    expect("<tool_call>{\"name\": \"f\"}</tool_call>\nDone.", 1, 0, "Done.", "", "f({});");
    /* tool parsing off: the tags are content */
    expect(one, 0, 0, one, "", "");
}

static void test_malformed(void)
{
    const char *bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>";
    expect(bad, 1, 0, bad, "", "");
    expect("<tool_call>[1, 2]</tool_call>", 1, 0, "<tool_call>[1, 2]</tool_call>", "", "");
    expect("<tool_call>{\"arguments\": {}}</tool_call>", 1, 0, "<tool_call>{\"arguments\": {}}</tool_call>", "", "");
    expect("<tool_call>{\"name\": \"\"}</tool_call>", 1, 0, "<tool_call>{\"name\": \"\"}</tool_call>", "", "");
    expect("<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", 1, 0,
           "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", "", "");
    /* one good call, one bad: the good one is a call, the bad one content */
    expect("<tool_call>{\"name\": \"g\"}</tool_call>\n<tool_call>{oops}</tool_call>", 1, 0,
           "<tool_call>{oops}</tool_call>", "", "g({});");
    /* text after a malformed call is content too, whole or cut anywhere (fuzz_chat_output found it
     * dropped when it was shorter than the call before it) */
    const char *two_bad = "\r\r\r\r)\x15h@\r<tool_call>{e\": \")g\"}DDDDDDDDD\xcc" "D</tool_call><\x8c\x92_l\x02"
                          "<tool_call>{</tool_call>\x01" "9";
    expect(two_bad, 1, 0, two_bad, "", "");
    /* unterminated at max_tokens: content, nothing lost */
    expect("Sure.\n<tool_call>\n{\"name\": \"f\", \"argum", 1, 0, "Sure.\n<tool_call>\n{\"name\": \"f\", \"argum", "",
           "");
}

static void test_reasoning(void)
{
    expect("<think>\nLet me think.\n</think>\n\nThe answer is 4.", 1, 0, "The answer is 4.", "\nLet me think.\n", "");
    expect("  <think>x</think>y", 0, 0, "y", "x", "");
    /* opened by the prompt */
    expect("plan it\n</think>\n\nanswer", 0, 1, "answer", "plan it\n", "");
    /* unterminated: all reasoning */
    expect("<think>still thinking <", 1, 0, "", "still thinking <", "");
    expect("still thinking", 1, 1, "", "still thinking", "");
    /* not at the start: content */
    expect("x <think>y</think>", 1, 0, "x <think>y</think>", "", "");
    expect("<thin", 1, 0, "<thin", "", "");
    /* reasoning then a tool call */
    expect("<think>need weather</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>", 1, 0, "",
           "need weather", "w({});");
}

static void test_ids(void)
{
    collected c;
    parse_cut("<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>", NULL, 0, 1, 0, &c);
    CHECK(c.n_calls == 2);
    CHECK(!strncmp(c.ids[0], "call_", 5) && strlen(c.ids[0]) == 21);
    CHECK(strcmp(c.ids[0], c.ids[1]) != 0);
}

static int stop_at_second(void *user, const frt_chat_piece *pc)
{
    return ++*(int *)user == 2 ? 7 : 0;
}

static void test_callback_stop(void)
{
    int n = 0;
    frt_chat_output p;
    frt_chat_output_init(&p, 1, 0, 1, stop_at_second, &n);
    CHECK(frt_chat_output_feed(&p, "a", 1) == 0);
    CHECK(frt_chat_output_feed(&p, "b", 1) == 7);
    frt_chat_output_clear(&p);
    frt_chat_output_clear(NULL);
}

static void test_prompt_opens(void)
{
    CHECK(frt_chat_prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", 30) == 1);
    CHECK(frt_chat_prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", 41) == 0);
    CHECK(frt_chat_prompt_opens_reasoning("<|im_start|>assistant\n", 22) == 0);
    CHECK(frt_chat_prompt_opens_reasoning("", 0) == 0);
}

int main(void)
{
    test_plain();
    test_tool_calls();
    test_malformed();
    test_reasoning();
    test_ids();
    test_callback_stop();
    test_prompt_opens();
    return frt_test_report();
}
