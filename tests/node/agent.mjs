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
//             are refused with a 400 naming them; the tool-less turns run.
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
async function turn(session, messages, { stream = false, withTools = true, max_tokens = mode === 'scripted' ? 200 : 4 } = {}) {
  const body = { model, messages, max_tokens, temperature: 0, session_id: session };
  if (withTools) body.tools = tools;
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
} else {
  throw new Error(`FRT_AGENT_MODE must be scripted, tools or no-tools (got ${mode})`);
}
console.log(`  agent (${mode}): ok`);
