// A real OpenAI client (the official `openai` npm package, pinned and fetched
// by scripts/setup.sh into .deps/npm/openai) against `skipkv serve`, driven by
// tests/e2e/serve_e2e_test.cpp. Prints one JSON object on stdout; exits 1
// with a message on stderr when a response breaks the OpenAI schema (checked
// here by hand, independent of the server's code) or the client throws.
//
//   node serve_client.cjs OPENAI_DIR BASE_URL API_KEY basic
//   node serve_client.cjs OPENAI_DIR BASE_URL API_KEY load FILE   (FILE: JSON array of requests)
//   node serve_client.cjs OPENAI_DIR BASE_URL API_KEY abort MAX_TOKENS
'use strict';

const [openaiDir, baseURL, apiKey, mode, arg] = process.argv.slice(2);
const { OpenAI } = require(openaiDir);
const client = new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 120000 });

function fail(msg) {
  process.stderr.write('serve_client: ' + msg + '\n');
  process.exit(1);
}
function check(ok, what, obj) {
  if (!ok) fail('schema: ' + what + ' in ' + JSON.stringify(obj).slice(0, 400));
}
const isStr = (v) => typeof v === 'string';
const isInt = (v) => Number.isInteger(v);
const FINISH = ['stop', 'length'];

function checkUsage(u, obj) {
  check(u && isInt(u.prompt_tokens) && isInt(u.completion_tokens) && isInt(u.total_tokens), 'usage', obj);
  check(u.total_tokens === u.prompt_tokens + u.completion_tokens, 'usage.total_tokens', obj);
}
function checkCommon(r, object) {
  check(isStr(r.id) && r.id.length > 0, 'id', r);
  check(r.object === object, 'object == ' + object, r);
  check(isInt(r.created), 'created', r);
  check(isStr(r.model), 'model', r);
  check(Array.isArray(r.choices), 'choices', r);
}
function checkChat(r) {
  checkCommon(r, 'chat.completion');
  check(r.choices.length === 1, 'one choice', r);
  const c = r.choices[0];
  check(c.index === 0 && c.message && c.message.role === 'assistant' && isStr(c.message.content), 'message', r);
  check(FINISH.includes(c.finish_reason), 'finish_reason', r);
  checkUsage(r.usage, r);
}
function checkCompletion(r) {
  checkCommon(r, 'text_completion');
  check(r.choices.length === 1 && isStr(r.choices[0].text), 'choices[0].text', r);
  check(FINISH.includes(r.choices[0].finish_reason), 'finish_reason', r);
  checkUsage(r.usage, r);
}
function checkKv(kv, obj) {
  check(kv && kv.method && isStr(kv.method.policy), 'kv.method.policy', obj);
  check(isInt(kv.peak_live_bytes) && isInt(kv.compressions) && isInt(kv.allocated_bytes), 'kv stats', obj);
}

// Consumes a stream; returns {text, finish, usage, kv, chunks}.
async function consume(stream, chat, opts = {}) {
  let text = '', finish = null, usage = null, kv = null, chunks = 0, id = null;
  for await (const ch of stream) {
    chunks++;
    checkCommon(ch, chat ? 'chat.completion.chunk' : 'text_completion');
    if (id === null) id = ch.id;
    check(ch.id === id, 'one id per stream', ch);
    if (ch.choices.length === 0) {
      check(ch.usage, 'usage chunk', ch);
      checkUsage(ch.usage, ch);
      usage = ch.usage;
      kv = ch.kv;
      continue;
    }
    const c = ch.choices[0];
    if (chat) {
      check(c.delta && typeof c.delta === 'object', 'delta', ch);
      if (c.delta.content) text += c.delta.content;
    } else {
      check(isStr(c.text), 'text', ch);
      text += c.text;
    }
    if (c.finish_reason !== null) {
      check(FINISH.includes(c.finish_reason), 'finish_reason', ch);
      finish = c.finish_reason;
    }
    if (opts.abortAfter && chunks >= opts.abortAfter) {
      stream.controller.abort();
      break;
    }
  }
  return { text, finish, usage, kv, chunks };
}

async function basic() {
  const out = {};
  const models = await client.models.list();
  check(models.data.length === 1 && isStr(models.data[0].id) && models.data[0].object === 'model', 'models', models);
  out.model = models.data[0].id;
  const messages = [{ role: 'user', content: 'Once upon a time' }];
  const chat = await client.chat.completions.create({ model: out.model, messages, max_tokens: 24, temperature: 0 });
  checkChat(chat);
  checkKv(chat.kv, chat);
  out.chat = { text: chat.choices[0].message.content, usage: chat.usage, finish: chat.choices[0].finish_reason };
  const s = await client.chat.completions.create({
    model: out.model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const st = await consume(s, true);
  check(st.usage !== null && st.finish !== null, 'stream ends with finish and usage', st);
  checkKv(st.kv, st);
  out.chat_stream = st;
  const comp = await client.completions.create({ model: out.model, prompt: 'The cat', max_tokens: 16, temperature: 0 });
  checkCompletion(comp);
  out.completion = { text: comp.choices[0].text, usage: comp.usage };
  const cs = await client.completions.create({ model: out.model, prompt: 'The cat', max_tokens: 16, temperature: 0,
                                              stream: true });
  out.completion_stream = await consume(cs, false);
  const withKv = await client.chat.completions.create({
    model: out.model, messages, max_tokens: 60, temperature: 0, kv: { policy: 'rkv', budget: 24, window: 4, interval: 8 } });
  checkChat(withKv);
  checkKv(withKv.kv, withKv);
  out.kv = withKv.kv;
  const stopped = await client.completions.create({ model: out.model, prompt: 'The cat', max_tokens: 16,
                                                    temperature: 0, stop: [out.completion.text.slice(4, 7)] });
  out.stopped = { text: stopped.choices[0].text, finish: stopped.choices[0].finish_reason };
  return out;
}

async function load(file) {
  const reqs = JSON.parse(require('fs').readFileSync(file, 'utf8'));
  const t0 = Date.now();
  const results = await Promise.all(reqs.map(async (r) => {
    const body = { model: 'm', prompt: r.prompt, max_tokens: r.max_tokens, temperature: 0, stream: true,
                   stream_options: { include_usage: true } };
    if (r.kv) body.kv = r.kv;
    const s = await client.completions.create(body);
    const res = await consume(s, false);
    check(res.usage && res.kv, 'usage chunk with kv', res);
    return { text: res.text, finish: res.finish, completion_tokens: res.usage.completion_tokens,
             policy: res.kv.method.policy, compressions: res.kv.compressions, peak_live_bytes: res.kv.peak_live_bytes };
  }));
  return { results, seconds: (Date.now() - t0) / 1000 };
}

async function abort(maxTokens) {
  const s = await client.completions.create({ model: 'm', prompt: 'Hello', max_tokens: Number(maxTokens),
                                            temperature: 0, stream: true });
  const res = await consume(s, false, { abortAfter: 3 });
  return { chunks: res.chunks, finish: res.finish };
}

(async () => {
  let out;
  if (mode === 'basic') out = await basic();
  else if (mode === 'load') out = await load(arg);
  else if (mode === 'abort') out = await abort(arg);
  else fail('unknown mode ' + mode);
  process.stdout.write(JSON.stringify(out) + '\n');
})().catch((e) => fail('client error: ' + (e && e.stack ? e.stack : e)));
