// The official JS SDK (@a2a-js/sdk) as an independent client of the gateway.
//
// Drives a local agent that `a2a-gateway serve-tck` exposes (the TCK's
// system under test: it behaves by the messageId prefix of the first
// message) with the SDK's own client: card discovery, send, stream, get,
// subscribe (resubscribeTask), cancel, list with paging, typed errors.
//
// Usage: A2A_GATEWAY_URL=http://127.0.0.1:PORT node --test test_clients.mjs

import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Message, TaskState, Role } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { withTimeout } from './timeout.mjs';
import { TaskNotFoundError, TaskNotCancelableError } from '@a2a-js/sdk/errors';

const URL = process.env.A2A_GATEWAY_URL;
let client;

function msg(prefix, { text = 'hi', taskId, contextId } = {}) {
  return Message.fromJSON({
    messageId: `${prefix}-${randomUUID().slice(0, 8)}`,
    role: 'ROLE_USER',
    parts: [{ text }],
    ...(taskId ? { taskId } : {}),
    ...(contextId ? { contextId } : {}),
  });
}

async function collect(gen, what) {
  const out = [];
  await withTimeout((async () => { for await (const ev of gen) out.push(ev); })(), what);
  return out;
}

const isTask = (r) => r && typeof r.id === 'string' && r.status !== undefined;
const cases = (events) => events.map((e) => e.payload?.$case);
const textOf = (part) => (part?.content?.$case === 'text' ? part.content.value : undefined);

before(async () => {
  assert.ok(URL, 'A2A_GATEWAY_URL is set');
  client = await withTimeout(new ClientFactory().createFromUrl(URL), 'card');
});

test('send completes a task, and get reads it back with its history', async () => {
  const r = await withTimeout(client.sendMessage({ message: msg('tck-complete-task') }), 'send');
  assert.ok(isTask(r), `a task: ${JSON.stringify(r)}`);
  assert.equal(r.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.ok(r.contextId);
  const t = await withTimeout(client.getTask({ id: r.id, historyLength: 10 }), 'get');
  assert.equal(t.id, r.id);
  assert.ok(t.history.some((m) => m.parts.some((p) => textOf(p) === 'hi')), 'history holds the message');
});

test('a message answer is a Message, not a Task', async () => {
  const r = await withTimeout(client.sendMessage({ message: msg('tck-message-response') }), 'send');
  assert.ok(!isTask(r), 'not a task');
  assert.equal(r.role, Role.ROLE_AGENT);
  assert.equal(textOf(r.parts[0]), 'Direct message response');
});

test('artifacts come back typed', async () => {
  const r = await withTimeout(client.sendMessage({ message: msg('tck-artifact-text') }), 'send');
  assert.equal(textOf(r.artifacts[0].parts[0]), 'Generated text content');
  const f = await withTimeout(client.sendMessage({ message: msg('tck-artifact-file-url') }), 'send');
  const part = f.artifacts[0].parts[0];
  assert.equal(part.content.$case, 'url');
  assert.equal(part.content.value, 'https://example.com/output.txt');
  assert.equal(part.mediaType, 'text/plain');
});

test('a stream yields the task, its updates, and ends after completion', async () => {
  const events = await collect(client.sendMessageStream({ message: msg('tck-stream-001') }), 'stream');
  const c = cases(events);
  assert.equal(c[0], 'task', c.join(','));
  assert.ok(c.includes('artifactUpdate'), c.join(','));
  const art = events.find((e) => e.payload.$case === 'artifactUpdate').payload.value.artifact;
  assert.equal(textOf(art.parts[0]), 'Stream hello from TCK');
  const last = events.at(-1).payload;
  assert.equal(last.$case, 'statusUpdate');
  assert.equal(last.value.status.state, TaskState.TASK_STATE_COMPLETED);
});

test('a subscription sees a follow-up complete the task, then ends', async () => {
  const r = await withTimeout(client.sendMessage({ message: msg('tck-input-required') }), 'send');
  assert.equal(r.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  const events = [];
  let gotFirst;
  const first = new Promise((resolve) => { gotFirst = resolve; });
  const sub = withTimeout((async () => {
    for await (const ev of client.resubscribeTask({ id: r.id })) {
      events.push(ev);
      gotFirst();
    }
  })(), 'subscribe');
  await withTimeout(first, 'first subscription event');
  assert.equal(events[0].payload.$case, 'task');
  assert.equal(events[0].payload.value.id, r.id);
  const f = await withTimeout(client.sendMessage({ message: msg('tck-complete-task', { taskId: r.id }) }), 'follow-up');
  assert.equal(f.status.state, TaskState.TASK_STATE_COMPLETED);
  await sub;
  const last = events.at(-1).payload;
  assert.equal(last.$case, 'statusUpdate', cases(events).join(','));
  assert.equal(last.value.status.state, TaskState.TASK_STATE_COMPLETED);
});

test('cancel ends an interrupted task', async () => {
  const r = await withTimeout(client.sendMessage({ message: msg('tck-input-required') }), 'send');
  const t = await withTimeout(client.cancelTask({ id: r.id }), 'cancel');
  assert.equal(t.id, r.id);
  assert.equal(t.status.state, TaskState.TASK_STATE_CANCELED);
});

test('list pages the tasks of a context', async () => {
  const contextId = `sdk-js-${randomUUID().slice(0, 8)}`;
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const r = await withTimeout(client.sendMessage({ message: msg('tck-complete-task', { contextId }) }), 'send');
    assert.equal(r.contextId, contextId);
    ids.push(r.id);
  }
  const seen = [];
  let pageToken = '';
  let pages = 0;
  do {
    // The SDK's ListTasksRequest type requires `status`; UNSPECIFIED is
    // "no filter" (left out, the SDK would send "UNRECOGNIZED").
    const query = { tenant: '', contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 2, pageToken, statusTimestampAfter: undefined };
    const page = await withTimeout(client.listTasks(query), 'list');
    pages += 1;
    assert.ok(page.tasks.length <= 2);
    seen.push(...page.tasks.map((t) => t.id));
    pageToken = page.nextPageToken;
  } while (pageToken && pages < 5);
  assert.deepEqual([...seen].sort(), [...ids].sort());
  assert.equal(pages, 2);
});

test('errors arrive as the SDK\'s typed errors', async () => {
  await assert.rejects(withTimeout(client.getTask({ id: 'no-such-task' }), 'get'), TaskNotFoundError);
  const r = await withTimeout(client.sendMessage({ message: msg('tck-complete-task') }), 'send');
  await assert.rejects(withTimeout(client.cancelTask({ id: r.id }), 'cancel'), TaskNotCancelableError);
});
