// agent.mjs - a scripted agent loop against frt serve with the official
// `openai` client for Node: tools defined, a history carrying an assistant
// tool call and its tool result, each next turn continuing the same session
// (append or restore, never a rebuild), streamed and not.
// Environment: FRT_BASE_URL (http://127.0.0.1:PORT/v1) and FRT_AGENT_MODE:
//   scripted  the fake engine replying with a tool call (--fake-reply): the
//             calls come back parsed, whole and through the client's stream
//             helper (its reassembly of delta.tool_calls), and the loop feeds
//             them back with the tool results;
//   tools     a model whose template renders tools (a random-weight Qwen3
//             with the real Qwen3 tokenizer and template): the tool schema is
//             in the rendered prompt (frt_return_prompt), the history carries
//             a tool call the client made up (a random model calls nothing);
//   no-tools  a model whose template ignores tools (the demo model): tools
//             are refused with a 400 naming them; the tool-less turns run;
//   forced    a model whose template renders tools, under constrained decoding:
//             tool_choice "required" (seeds x temperature 1: each answer is one
//             parseable call of a listed tool, its arguments valid), the call
//             executed and answered with the next turn continuing the session,
//             a named tool_choice streamed (the stream helper reassembles the
//             call), response_format json_schema (whole and streamed: the
//             content parses and matches the schema) and json_object, and the
//             400s (a keyword outside the schema subset names it, an unknown
//             tool, a prompt that opens a reasoning block).
// Run by tests/sh/serve_agent.sh from the folder where npm installed the client.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const client = new OpenAI({ baseURL: process.env.FRT_BASE_URL, apiKey: 'frt-local', maxRetries: 0, timeout: 300000 });
const mode = process.env.FRT_AGENT_MODE;
const step = (what) => console.log(`  agent (${mode}): ${what}`);
const model = (await client.models.list()).data[0].id;

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' } }, required: ['city'] },
  },
}];

// rebuilds counted by the server (frt_requests_total{prefix_action="rebuild"})
async function rebuilds() {
  const res = await fetch(process.env.FRT_BASE_URL.replace(/\/v1$/, '/metrics'));
  const m = (await res.text()).match(/^frt_requests_total\{prefix_action="rebuild"\} (\d+)/m);
  return m ? Number(m[1]) : 0;
}

// one turn, not streamed or through the client's stream helper; the answer's message and frt object
async function turn(session, messages, { stream = false, withTools = true, max_tokens = mode === 'scripted' ? 200 : 4,
  extra = {} } = {}) {
  const body = { model, messages, max_tokens, temperature: 0, session_id: session, ...extra };
  if (withTools && !body.tools) body.tools = tools;
  if (!stream) {
    const r = await client.chat.completions.create(body);
    return { message: r.choices[0].message, finish: r.choices[0].finish_reason, frt: r.frt };
  }
  let frt = null;
  const s = client.chat.completions.stream({ ...body, stream_options: { include_usage: true } });
  s.on('chunk', (ch) => { if (ch.frt) frt = ch.frt; });
  const final = await s.finalChatCompletion();
  return { message: final.choices[0].message, finish: final.choices[0].finish_reason, frt };
}

// every turn after the first continues the session: append or restore, never rebuild
async function continued(session, messages, opts) {
  const before = await rebuilds();
  const t = await turn(session, messages, opts);
  assert.ok(['append', 'restore'].includes(t.frt.prefix_action), `a continued turn planned ${t.frt.prefix_action}`);
  assert.equal(await rebuilds(), before, 'the server counted a rebuild');
  assert.ok(t.frt.cached_tokens > 0);
  return t;
}

const toolResult = (call, text) => ({ role: 'tool', tool_call_id: call.id, content: text });

// ---- forced: constrained decoding (tool_choice required / named, response_format) ----
// bounded strings and enums, so a random-weight model's calls end within max_tokens
const ftools = [
  { type: 'function', function: { name: 'get_weather', description: 'The current weather of a city', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: {
    type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
];
const noThink = { enable_thinking: false };
const forcedBody = (extra) => ({ model, tools: ftools, max_tokens: 300, temperature: 1, chat_template_kwargs: noThink, ...extra });

// a tool call of ftools with arguments its schema accepts; returns what "executing" it gives
function checkCall(call, only) {
  assert.equal(call.type, 'function');
  assert.ok(call.id.startsWith('call_'));
  const args = JSON.parse(call.function.arguments);
  if (only) assert.equal(call.function.name, only);
  if (call.function.name === 'get_weather') {
    assert.deepEqual(Object.keys(args), ['city']);
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, `city ${JSON.stringify(args.city)}`);
    return `18 C in ${args.city}`;
  }
  assert.equal(call.function.name, 'get_time');
  assert.deepEqual(Object.keys(args), ['zone']);
  assert.ok(['UTC', 'CET'].includes(args.zone));
  return `12:00 ${args.zone}`;
}

const weatherSchema = { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, temp_c: { type: 'integer' },
  sunny: { type: 'boolean' } }, required: ['city', 'temp_c', 'sunny'], additionalProperties: false };

function checkWeather(text) {
  const v = JSON.parse(text);
  assert.deepEqual(Object.keys(v), ['city', 'temp_c', 'sunny']);
  assert.ok(typeof v.city === 'string' && [...v.city].length <= 12);
  assert.ok(Number.isInteger(v.temp_c) && typeof v.sunny === 'boolean');
}

async function forcedRefusals() {
  const bad = (body, param, code) => assert.rejects(client.chat.completions.create({ model, messages: [user], ...body }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === param && (!code || e.code === code));
  await bad({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } } },
    'pattern', 'unsupported_value');
  await bad({ tools: ftools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice');
  // a prompt that opens <think> (Qwen3.5 with thinking on) would swallow the forced output as reasoning
  const p = await client.chat.completions.create({ model, messages: [user], tools: ftools, max_tokens: 1, frt_return_prompt: true });
  if (p.frt.prompt.endsWith('<think>\n')) {
    await bad({ tools: ftools, tool_choice: 'required' }, 'tool_choice', 'unsupported_value');
    step('a prompt that opens a reasoning block: 400');
  }
  step('400s: a schema keyword outside the subset names it, an unknown tool');
}

async function forced() {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create(forcedBody({ messages: [user], tool_choice: 'required',
      parallel_tool_calls: false, seed }));
    assert.equal(r.choices[0].finish_reason, 'tool_calls', `seed ${seed}: ${JSON.stringify(r.choices[0].message)}`);
    assert.equal(r.choices[0].message.tool_calls.length, 1);
    checkCall(r.choices[0].message.tool_calls[0]);
    // one mask per generated token, timed
    assert.equal(r.frt.grammar.masks, r.usage.completion_tokens);
    assert.ok(r.frt.grammar.mask_ms >= 0 && r.frt.grammar.mask_ms_mean <= r.frt.grammar.mask_ms);
  }
  step('tool_choice required, 3 seeds at temperature 1: one parseable call each, valid arguments');
  await client.post('/sessions', { body: { id: 'agent-f' } });
  const t1 = await turn('agent-f', [user], { extra: forcedBody({ tool_choice: 'required', parallel_tool_calls: false, seed: 4 }) });
  const call = t1.message.tool_calls[0];
  const history = [user, t1.message, toolResult(call, checkCall(call))];
  const t2 = await continued('agent-f', history, { extra: { tools: ftools, chat_template_kwargs: noThink } });
  step(`the call executed and answered: the next turn ${t2.frt.prefix_action}s`);
  const s = client.chat.completions.stream(forcedBody({ messages: [user], seed: 5,
    tool_choice: { type: 'function', function: { name: 'get_time' } } }));
  const fin = await s.finalChatCompletion();
  assert.equal(fin.choices[0].message.tool_calls.length >= 1, true);
  for (const c of fin.choices[0].message.tool_calls) checkCall(c, 'get_time');
  step('a named tool_choice, streamed: the stream helper reassembles get_time calls');
  const rf = { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema: weatherSchema } };
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({ model, messages: [user], response_format: rf, max_tokens: 300,
      temperature: 1, seed, chat_template_kwargs: noThink });
    assert.equal(r.choices[0].finish_reason, 'stop');
    checkWeather(r.choices[0].message.content);
  }
  const js = client.chat.completions.stream({ model, messages: [user], response_format: rf, max_tokens: 300, temperature: 1,
    seed: 3, chat_template_kwargs: noThink });
  checkWeather((await js.finalChatCompletion()).choices[0].message.content);
  step('response_format json_schema, whole and streamed: the content parses and matches the schema');
  const jo = await client.chat.completions.create({ model, messages: [user], response_format: { type: 'json_object' },
    max_tokens: 300, temperature: 0, chat_template_kwargs: noThink });
  const text = jo.choices[0].message.content;
  assert.ok(text.startsWith('{'));
  if (jo.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
  step(`response_format json_object: an object (${jo.choices[0].finish_reason})`);
  await forcedRefusals();
}
const user = { role: 'user', content: 'What is the weather in Paris?' };

if (mode === 'scripted') {
  await client.post('/sessions', { body: { id: 'agent-s' } });
  const t1 = await turn('agent-s', [user]);
  assert.equal(t1.finish, 'tool_calls');
  const call = t1.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  assert.ok(call.id.startsWith('call_'));
  step('turn 1: a tool call, parsed');
  // the loop: the call and its result go back, the session appends
  let history = [user, t1.message, toolResult(call, '18 C, sunny')];
  const t2 = await continued('agent-s', history);
  assert.equal(t2.frt.prefix_action, 'append');
  history = [...history, t2.message, toolResult(t2.message.tool_calls[0], '19 C')];
  const t3 = await continued('agent-s', history, { stream: true });
  assert.equal(t3.frt.prefix_action, 'append');
  step('turns 2-3 with tool results, whole and streamed: append');
  // turn 1 streamed in another session, reassembled by the client's stream helper
  await client.post('/sessions', { body: { id: 'agent-t' } });
  const s1 = await turn('agent-t', [user], { stream: true });
  assert.equal(s1.finish, 'tool_calls');
  assert.equal(s1.message.tool_calls.length, 1);
  assert.equal(s1.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(s1.message.tool_calls[0].function.arguments, call.function.arguments);
  assert.equal(s1.message.content, t1.message.content);
  const s2 = await continued('agent-t', [user, s1.message, toolResult(s1.message.tool_calls[0], '18 C, sunny')],
    { stream: true });
  assert.equal(s2.frt.prefix_action, 'append');
  step('streamed: the client reassembles the same call; the next turn appends');
} else if (mode === 'tools') {
  const r = await client.chat.completions.create({
    model, messages: [user], tools, max_tokens: 2, temperature: 0, frt_return_prompt: true,
  });
  const prompt = r.frt.prompt;
  assert.ok(prompt.includes('"name": "get_weather"'), 'the tool name is in the prompt');
  assert.ok(prompt.includes('The current weather of a city'), 'the tool description is in the prompt');
  assert.ok(prompt.includes('"required": ["city"]'), 'the tool schema is in the prompt');
  assert.equal(r.usage.prompt_tokens, r.frt.prefill_tokens + r.frt.cached_tokens);
  step(`the tool schema is in the rendered prompt (${r.usage.prompt_tokens} tokens)`);
  // chat_template_kwargs reach the real template: Qwen3 closes an empty think block when thinking is off
  const off = await client.chat.completions.create({
    model, messages: [user], max_tokens: 2, temperature: 0, frt_return_prompt: true,
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.ok(off.frt.prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), 'enable_thinking: false');
  // thinking on by default: Qwen3 adds nothing, Qwen3.5 opens the block itself
  assert.ok(!r.frt.prompt.includes('<think>') || r.frt.prompt.endsWith('<|im_start|>assistant\n<think>\n'),
    'thinking on by default: no block, or an opened one, at the end of the prompt');
  step('chat_template_kwargs.enable_thinking reaches the template');
  await client.post('/sessions', { body: { id: 'agent-q' } });
  const call = { id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
  let history = [user, { role: 'assistant', content: null, tool_calls: [call] }, toolResult(call, '18 C, sunny')];
  const t1 = await turn('agent-q', history);
  assert.equal(t1.message.role, 'assistant');
  step(`turn 1 (history with a tool call and its result): ${t1.frt.prefix_action}`);
  history = [...history, { role: 'assistant', content: t1.message.content ?? '' },
    { role: 'user', content: 'And tomorrow?' }];
  const t2 = await continued('agent-q', history);
  history = [...history, { role: 'assistant', content: t2.message.content ?? '' }, { role: 'user', content: 'Thanks.' }];
  const t3 = await continued('agent-q', history, { stream: true });
  step(`turns 2-3, whole and streamed: ${t2.frt.prefix_action}, ${t3.frt.prefix_action}`);
} else if (mode === 'no-tools') {
  await assert.rejects(client.chat.completions.create({ model, messages: [user], tools, max_tokens: 2 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'unsupported_value' && e.param === 'tools');
  step('tools refused: the template does not render them');
  await client.post('/sessions', { body: { id: 'agent-d' } });
  let history = [user];
  const t1 = await turn('agent-d', history, { withTools: false });
  history = [...history, { role: 'assistant', content: t1.message.content ?? '' }, { role: 'user', content: 'And tomorrow?' }];
  const t2 = await continued('agent-d', history, { withTools: false });
  history = [...history, { role: 'assistant', content: t2.message.content ?? '' }, { role: 'user', content: 'Thanks.' }];
  const t3 = await continued('agent-d', history, { withTools: false, stream: true });
  step(`tool-less turns, whole and streamed: ${t2.frt.prefix_action}, ${t3.frt.prefix_action}`);
} else if (mode === 'forced') {
  await forced();
} else {
  throw new Error(`FRT_AGENT_MODE must be scripted, tools, no-tools or forced (got ${mode})`);
}
console.log(`  agent (${mode}): ok`);
