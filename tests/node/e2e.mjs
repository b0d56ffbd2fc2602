// e2e.mjs - frt serve driven by the official `openai` client for Node.
// Environment: FRT_BASE_URL (http://127.0.0.1:PORT/v1). Run by
// tests/sh/serve_node.sh from a folder where `npm install` put the client.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const client = new OpenAI({ baseURL: process.env.FRT_BASE_URL, apiKey: 'frt-local', maxRetries: 0, timeout: 120000 });
const step = (what) => console.log(`  node: ${what}`);

const models = await client.models.list();
const model = models.data[0].id;
assert.equal(models.data[0].object, 'model');
step(`models.list -> ${model}`);

// completions, not streamed and streamed: the same greedy text
const prompt = 'def parse_args(argv):\n    ';
const c1 = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0 });
assert.equal(c1.object, 'text_completion');
assert.equal(typeof c1.choices[0].text, 'string');
assert.ok(['stop', 'length'].includes(c1.choices[0].finish_reason));
assert.ok(c1.usage.prompt_tokens > 0 && c1.usage.completion_tokens >= 1);
assert.ok(['rebuild', 'restore', 'append'].includes(c1.frt.prefix_action));
let text = '';
let last = null;
for await (const ch of await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, stream: true })) {
  text += ch.choices[0]?.text ?? '';
  last = ch;
}
assert.equal(text, c1.choices[0].text);
assert.equal(last.choices[0].finish_reason, c1.choices[0].finish_reason);
step('completions: plain and streamed agree');

// n: 2 - two choices from one prefill on a server with branch slots
// (FRT_BRANCHES >= 2), else a 400 naming n
if (Number(process.env.FRT_BRANCHES ?? 1) >= 2) {
  const cn = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, n: 2 });
  assert.equal(cn.choices.length, 2);
  assert.deepEqual(cn.choices.map((c) => c.index), [0, 1]);
  for (const c of cn.choices) assert.equal(c.text, c1.choices[0].text);
  step('completions: n = 2 gives two choices');
} else {
  await assert.rejects(client.completions.create({ model, prompt, max_tokens: 6, n: 2 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n');
  step('completions: n = 2 refused without branch slots');
}

// chat, not streamed and streamed with usage
const messages = [
  { role: 'system', content: 'You write Python.' },
  { role: 'user', content: 'Write a function that adds two numbers.' },
];
const r = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0 });
assert.equal(r.object, 'chat.completion');
assert.equal(r.choices[0].message.role, 'assistant');
let content = '';
let usage = null;
let finish = null;
let role = null;
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const ch of stream) {
  if (ch.choices.length) {
    role ??= ch.choices[0].delta?.role ?? null;
    content += ch.choices[0].delta?.content ?? '';
    finish ??= ch.choices[0].finish_reason;
  }
  if (ch.usage) usage = ch.usage;
}
assert.equal(role, 'assistant');
assert.equal(content, r.choices[0].message.content);
assert.equal(finish, r.choices[0].finish_reason);
assert.ok(usage && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens);
step('chat: plain and streamed agree, usage reported');

// sessions through the client's generic methods; frt fields pass through
const s = await client.post('/sessions', { body: { id: 'node-s' } });
assert.equal(s.id, 'node-s');
const t1 = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, session_id: 'node-s' });
assert.equal(t1.frt.session_id, 'node-s');
const history = [...messages, { role: 'assistant', content: t1.choices[0].message.content }, { role: 'user', content: 'And subtract?' }];
const t2 = await client.chat.completions.create({ model, messages: history, max_tokens: 4, temperature: 0, session_id: 'node-s' });
assert.ok(['append', 'restore'].includes(t2.frt.prefix_action), `turn 2 planned ${t2.frt.prefix_action}`);
assert.ok(t2.frt.cached_tokens > 0);
step(`session turn 2: ${t2.frt.prefix_action}, ${t2.frt.cached_tokens} cached tokens`);

// fork, checkpoint, rollback
const forks = await client.post('/sessions/node-s/fork', { body: { n: 2 } });
assert.equal(forks.data.length, 2);
const more = [...history, { role: 'assistant', content: t2.choices[0].message.content }, { role: 'user', content: 'Thanks.' }];
const branch = [];
for (const f of forks.data) {
  const b = await client.chat.completions.create({ model, messages: more, max_tokens: 5, temperature: 0, session_id: f.id });
  assert.equal(b.frt.prefix_action, 'restore');
  branch.push(b.choices[0].message.content);
}
assert.equal(branch[0], branch[1]);
const ck = await client.post('/sessions/node-s/checkpoints', { body: { name: 'before' } });
assert.equal(ck.name, 'before');
const a1 = await client.chat.completions.create({ model, messages: more, max_tokens: 5, temperature: 0, session_id: 'node-s' });
const rb = await client.post('/sessions/node-s/rollback', { body: { name: 'before' } });
assert.equal(rb.position, ck.position);
const a2 = await client.chat.completions.create({ model, messages: more, max_tokens: 5, temperature: 0, session_id: 'node-s' });
assert.equal(a2.frt.prefix_action, 'restore');
assert.deepEqual(a2.frt.tokens, a1.frt.tokens);
step('fork branches agree; rollback replays the same turn');

const caps = await client.get('/capsules');
assert.equal(caps.object, 'list');
assert.ok(caps.data.length > 0);

// errors come back as the client's typed errors
await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 0 }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.code === 'invalid_value' && e.param === 'max_tokens');
await assert.rejects(client.chat.completions.create({ model, messages, session_id: 'nobody' }),
  (e) => e instanceof OpenAI.NotFoundError && e.code === 'session_not_found');
await assert.rejects(client.chat.completions.create({ model, messages, session_id: 'nobody', stream: true }),
  (e) => e.status === 404);
await assert.rejects(client.post('/sessions/node-s/rollback', { body: { name: 'never' } }),
  (e) => e.status === 404 && e.code === 'checkpoint_not_found');
await assert.rejects(client.chat.completions.create({ model, messages: 'nope' }),
  (e) => e.status === 400 && e.code === 'invalid_type');
step('errors: 400 and 404 as typed client errors');
console.log('  node: ok');
