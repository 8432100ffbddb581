// The official JS SDK of A2A v0.3 (@a2a-js/sdk 0.3.x) as a client of the
// gateway's v0.3 compatibility.
//
// Drives a local agent that `a2a-gateway serve-tck` exposes (the TCK's
// system under test: it behaves by the messageId prefix of the first
// message) with the v0.3 SDK's own client, a whole delegation: card
// discovery, send, input-required and its follow-up, artifacts, a message
// answer, a stream with `final` on its last event, cancel, get with
// history, and the SDK's typed v0.3 errors.
//
// Usage: A2A_GATEWAY_URL=http://127.0.0.1:PORT node --test test_clients_v03.mjs

import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ClientFactory, TaskNotFoundError, TaskNotCancelableError } from '@a2a-js/sdk/client';
import { withTimeout } from '../js/timeout.mjs';

const URL = process.env.A2A_GATEWAY_URL;
let client;

function msg(prefix, extra = {}) {
  return {
    kind: 'message',
    messageId: `${prefix}-${randomUUID().slice(0, 8)}`,
    role: 'user',
    parts: [{ kind: 'text', text: 'hi' }],
    ...extra,
  };
}

const send = (m, what = 'send') => withTimeout(client.sendMessage({ message: m }), what);

before(async () => {
  assert.ok(URL, 'A2A_GATEWAY_URL is set');
  client = await withTimeout(new ClientFactory().createFromUrl(URL), 'card');
});

test('input-required, then a follow-up on the same task completes it', async () => {
  const t = await send(msg('tck-input-required'));
  assert.equal(t.kind, 'task');
  assert.equal(t.status.state, 'input-required');
  assert.equal(t.status.message.role, 'agent');
  const done = await send(msg('tck-complete-task', { taskId: t.id, contextId: t.contextId }), 'follow-up');
  assert.equal(done.id, t.id);
  assert.equal(done.status.state, 'completed');
  const got = await withTimeout(client.getTask({ id: t.id, historyLength: 10 }), 'get');
  assert.ok(got.history.length >= 2, JSON.stringify(got.history));
  assert.ok(got.history.every((m) => m.kind === 'message' && ['user', 'agent'].includes(m.role)));
});

test('artifacts arrive as v0.3 parts, and a message answer as a message', async () => {
  const d = await send(msg('tck-artifact-data'));
  assert.deepEqual(d.artifacts[0].parts[0], { kind: 'data', data: { key: 'value', count: 42 } });
  const f = await send(msg('tck-artifact-file-url'));
  const file = f.artifacts[0].parts[0];
  assert.equal(file.kind, 'file');
  assert.equal(file.file.uri, 'https://example.com/output.txt');
  assert.equal(file.file.mimeType, 'text/plain');
  const m = await send(msg('tck-message-response'));
  assert.equal(m.kind, 'message');
  assert.equal(m.role, 'agent');
  assert.equal(m.parts[0].text, 'Direct message response');
});

test('a stream carries v0.3 events and ends with final', async () => {
  const evs = [];
  await withTimeout((async () => {
    for await (const e of client.sendMessageStream({ message: msg('tck-stream-001') })) evs.push(e);
  })(), 'stream');
  assert.deepEqual(evs.map((e) => e.kind), ['task', 'status-update', 'artifact-update', 'status-update']);
  assert.equal(evs[1].final, false);
  assert.equal(evs.at(-1).status.state, 'completed');
  assert.equal(evs.at(-1).final, true);
});

test('cancel, and the typed errors of v0.3 codes', async () => {
  const t = await send(msg('tck-input-required'));
  const c = await withTimeout(client.cancelTask({ id: t.id }), 'cancel');
  assert.equal(c.status.state, 'canceled');
  await assert.rejects(withTimeout(client.cancelTask({ id: t.id }), 'cancel again'), TaskNotCancelableError);
  await assert.rejects(withTimeout(client.getTask({ id: 'no-such-task' }), 'get'), TaskNotFoundError);
});
