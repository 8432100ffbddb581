// The official JS SDK (@a2a-js/sdk) reading a restarted gateway.
//
// run.sh runs it after each restart of `a2a-gateway serve`, before the
// Python SDK's `restart_clients.py after` (which then moves the open
// tasks): every task the Python SDK made before the restart (saved in the
// STATE file with what it read then) reads the same through this SDK:
// GetTask (id, context, state, history, artifacts), ListTasks with and
// without the context, and the push config getters.
//
// (The sink's base URL ends in `/`: the SDK resolves the card path against it.)
//
// Usage: A2A_GATEWAY_URL=http://127.0.0.1:PORT A2A_RESTART_STATE=FILE node --test restart_reads.mjs

import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { withTimeout } from './timeout.mjs';

const URL = process.env.A2A_GATEWAY_URL;
const STATE = process.env.A2A_RESTART_STATE;
let saved;
const clients = {};

// The ids of a ListTasks answer, every page, sorted.
async function listed(client, contextId = '') {
  const ids = [];
  let pageToken = '';
  do {
    // UNSPECIFIED is "no filter" (see test_clients.mjs).
    const query = { tenant: '', contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 100, pageToken, statusTimestampAfter: undefined };
    const page = await withTimeout(client.listTasks(query), 'list');
    ids.push(...page.tasks.map((t) => t.id));
    pageToken = page.nextPageToken;
  } while (pageToken);
  return ids.sort();
}

before(async () => {
  assert.ok(URL && STATE, 'A2A_GATEWAY_URL and A2A_RESTART_STATE are set');
  saved = JSON.parse(readFileSync(STATE, 'utf8'));
  clients.tck = await withTimeout(new ClientFactory().createFromUrl(URL), 'card');
  clients.sink = await withTimeout(new ClientFactory().createFromUrl(`${URL}/agents/sink/`), 'sink card');
});

test('GetTask of every task made before the restart reads as it did', async () => {
  const names = Object.keys(saved.tasks);
  assert.equal(names.length, 5);
  for (const name of names) {
    const [agent, id] = saved.tasks[name];
    const was = saved.reads.get[name];
    const t = await withTimeout(clients[agent].getTask({ id, historyLength: 10 }), `get ${name}`);
    assert.equal(t.id, id, name);
    assert.equal(t.contextId, was.contextId, name);
    assert.equal(t.status.state, TaskState[was.status.state], `${name}: ${was.status.state}`);
    assert.deepEqual(
      t.history.map((m) => m.messageId),
      (was.history ?? []).map((m) => m.messageId),
      `${name}: the same history`,
    );
    assert.equal(t.artifacts.length, (was.artifacts ?? []).length, `${name}: the same artifacts`);
  }
});

test('ListTasks with and without the context lists what it did', async () => {
  assert.deepEqual(await listed(clients.tck), saved.reads.lists.tck);
  assert.deepEqual(await listed(clients.tck, saved.context), saved.reads.lists['tck-context']);
  assert.deepEqual(await listed(clients.sink), saved.reads.lists.sink);
});

test('the push config getters answer what they did', async () => {
  for (const name of ['asks', 'held']) {
    const [agent, taskId] = saved.tasks[name];
    const was = saved.reads.push[name];
    const got = await withTimeout(
      clients[agent].getTaskPushNotificationConfig({ tenant: '', taskId, id: `hook-${name}` }),
      `push get ${name}`,
    );
    assert.equal(got.id, was.get.id, name);
    assert.equal(got.url, was.get.url, name);
    const list = await withTimeout(
      clients[agent].listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' }),
      `push list ${name}`,
    );
    assert.deepEqual(
      list.configs.map((c) => c.id).sort(),
      was.list.configs.map((c) => c.id).sort(),
      name,
    );
  }
});
