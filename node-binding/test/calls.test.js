// The addon against a real broker: registration and discovery, a task's
// whole life between two agents with events through `wait` and `onEvent`,
// file parts carrying binary bytes, broadcast, pull delivery, and
// delegate/serve.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { randomBytes } = require('node:crypto')
const { textMessage, textOf } = require('..')
const { brokerForFile, deadline } = require('./helpers')

let broker
brokerForFile((b) => {
  broker = b
})

/** Collects `onEvent` events until `pred(all)` holds. */
function collect(agent, pred) {
  const got = []
  return {
    got,
    done: deadline(
      new Promise((resolve) => {
        agent.onEvent((ev) => {
          got.push(ev)
          if (pred(got)) resolve(got)
        })
      }),
      10_000,
      'onEvent',
    ),
  }
}

test('register and list', async () => {
  const a = await broker.register({ contextId: 'list-1', card: { name: 'lister', skills: [{ id: 'x', name: 'X', description: '', tags: ['t'] }] } })
  const b = await broker.register({ contextId: 'list-2', card: { name: 'listed', description: 'd' } })
  assert.equal(a.id, 'lister')
  assert.equal(a.contextId, 'list-1')
  assert.equal(a.card.kind, 'subagent')
  assert.equal(a.delivery, 'push')
  const cards = await b.list()
  const mine = cards.find((c) => c.name === 'lister')
  assert.ok(mine, 'b sees a')
  assert.deepEqual(mine.skills, [{ id: 'x', name: 'X', description: '', tags: ['t'] }])
  assert.deepEqual(mine.capabilities, { streaming: true, pushNotifications: true })
  assert.ok(!(await a.list()).some((c) => c.name === 'lister'), 'a does not list itself')
  assert.deepEqual((await b.list({ skill: 't' })).map((c) => c.name), ['lister'])
  // The same name again gets the lowest free suffix.
  const a2 = await broker.register({ contextId: 'list-3', card: { name: 'lister' } })
  assert.equal(a2.id, 'lister-2')
  for (const x of [a, b, a2]) await x.deregister()
})

test('a full task lifecycle: worker events via wait, requester events via onEvent', async () => {
  const req = await broker.register({ contextId: 'life-req', card: { name: 'requester' } })
  const wrk = await broker.register({ contextId: 'life-wrk', card: { name: 'worker' } })
  const seen = collect(req, (all) => all.some((e) => e.params.event?.final))

  const task = await req.send({ message: textMessage('parse this', { to: 'worker' }) })
  assert.equal(task.kind, 'task')
  assert.equal(task.status.state, 'submitted')
  assert.equal(task.agentName, 'worker')
  assert.equal(task.requesterName, 'requester')
  assert.equal(task.version, 1)

  const evs = await wrk.wait({ timeoutSeconds: 10 })
  assert.equal(evs.length, 1)
  const [created] = evs
  assert.equal(created.method, 'a2a.task.event')
  assert.equal(created.params.recipient, 'worker')
  assert.equal(created.params.event.kind, 'status-update')
  assert.equal(created.params.event.taskId, task.id)
  assert.equal(textOf(created.params.event.status.message), 'parse this')
  assert.equal(created.params.event.status.message.from, 'requester')

  assert.equal((await wrk.status({ id: task.id, state: 'working' })).status.state, 'working')
  const withArt = await wrk.artifact({ id: task.id, artifact: { artifactId: 'out', name: 'result', parts: [{ kind: 'text', text: 'AST' }] } })
  assert.equal(withArt.artifacts[0].artifactId, 'out')
  const done = await wrk.status({ id: task.id, state: 'completed', message: textMessage('done') })
  assert.equal(done.status.state, 'completed')
  assert.equal(done.status.message.role, 'agent')

  const got = await seen.done
  const kinds = got.map((e) => `${e.params.event.kind}:${e.params.event.status?.state ?? e.params.event.artifact.artifactId}`)
  assert.deepEqual(kinds, ['status-update:working', 'artifact-update:out', 'status-update:completed'])
  const versions = got.map((e) => e.params.taskVersion)
  assert.deepEqual(versions, [...versions].sort((x, y) => x - y), 'events in commit order')
  assert.equal(got[2].params.event.final, true)

  // The requester reads the task; the worker lists it.
  const fetched = await req.get({ id: task.id })
  assert.equal(fetched.history.length, 2)
  assert.equal(fetched.version, done.version)
  const { tasks } = await wrk.listTasks({ role: 'worker' })
  assert.deepEqual(tasks.map((t) => t.id), [task.id])
  // Resubscribe replays the history past a version, as events.
  req.onEvent(null)
  await req.resubscribe({ id: task.id, afterVersion: 1 })
  const replay = await req.wait({ timeoutSeconds: 5 })
  assert.ok(replay.length >= 3, `replayed ${replay.length}`)
  assert.equal(replay.at(-1).params.event.status.state, 'completed')
  // Push config round trip.
  const cfg = await req.setPush({ taskId: task.id, config: { id: 'p1', token: 'tok' } })
  assert.deepEqual(cfg, { id: 'p1', token: 'tok' })
  assert.deepEqual(await req.getPush({ taskId: task.id }), { id: 'p1', token: 'tok' })
  await req.deregister()
  await wrk.deregister()
})

test('stream, cancel and the canceled event', async () => {
  const req = await broker.register({ contextId: 'c-req', card: { name: 'streamer' } })
  const wrk = await broker.register({ contextId: 'c-wrk', card: { name: 'cancelee' } })
  assert.equal(await wrk.getPush({ taskId: 'x' }).catch((e) => e.errorCode), 'A2A_UNKNOWN_TASK')
  const t = await req.stream({ message: textMessage('go', { to: 'cancelee' }) })
  const own = await req.wait({ timeoutSeconds: 5 })
  assert.equal(own[0].params.event.status.state, 'submitted', 'stream emits the status to the caller')
  assert.equal((await req.cancel({ id: t.id })).status.state, 'canceled')
  const evs = []
  while (!evs.some((e) => e.params.event.status.state === 'canceled')) {
    const got = await wrk.wait({ timeoutSeconds: 5 })
    assert.ok(got.length > 0, 'worker sees the cancel')
    evs.push(...got)
  }
  await req.deregister()
  await wrk.deregister()
})

test('file parts carry binary bytes unchanged', async () => {
  const req = await broker.register({ contextId: 'f-req', card: { name: 'filer' } })
  const wrk = await broker.register({ contextId: 'f-wrk', card: { name: 'filee' } })
  const bytes = Buffer.concat([Buffer.from([0, 255, 0x80, 0x7f, 10, 13, 0]), randomBytes(64 * 1024)])
  const part = { kind: 'file', file: { name: 'blob.bin', mimeType: 'application/octet-stream', bytes: bytes.toString('base64') } }
  const data = { kind: 'data', data: { n: 1, nested: { list: [1, 'two', null] } } }
  const t = await req.send({ message: { role: 'user', messageId: 'm-file', to: 'filee', parts: [part, data] } })
  const [ev] = await wrk.wait({ timeoutSeconds: 5 })
  const got = ev.params.event.status.message.parts
  assert.equal(got[0].kind, 'file')
  assert.ok(Buffer.from(got[0].file.bytes, 'base64').equals(bytes), 'event bytes equal')
  assert.deepEqual(got[1], data)
  const back = await wrk.get({ id: t.id })
  assert.ok(Buffer.from(back.history[0].parts[0].file.bytes, 'base64').equals(bytes), 'stored bytes equal')
  // A reference-only file part.
  const ref = await wrk.artifact({ id: t.id, artifact: { artifactId: 'r', parts: [{ kind: 'file', file: { name: 'only-a-name' } }] } })
  assert.deepEqual(ref.artifacts[0].parts[0], { kind: 'file', file: { name: 'only-a-name' } })
  await req.deregister()
  await wrk.deregister()
})

test('onEvent sees every event while delegate and serve act on the same tasks', async () => {
  const boss = await broker.register({ contextId: 'oe-boss', card: { name: 'oe-boss' } })
  const coder = await broker.register({ contextId: 'oe-coder', card: { name: 'oe-coder' } })
  const bossSaw = []
  const coderSaw = []
  boss.onEvent((ev) => bossSaw.push(ev))
  coder.onEvent((ev) => coderSaw.push(ev))
  const serving = coder.serve(async (task, turn) => {
    await turn.progress('reading')
    const answer = await turn.ask('which file?')
    return `done with ${textOf(answer)}`
  })
  let t = await boss.delegate({ to: 'oe-coder', message: 'fix it', timeoutSeconds: 20 })
  assert.equal(t.status.state, 'input-required')
  t = await boss.delegate({ message: textMessage('lib.rs', { taskId: t.id }), timeoutSeconds: 20 })
  assert.equal(t.status.state, 'completed')
  const states = (evs) =>
    evs
      .filter((e) => e.method === 'a2a.task.event' && e.params.event.kind === 'status-update' && e.params.event.taskId === t.id)
      .map((e) => e.params.event.status.state)
  // The requester's callback hears each transition delegate waited on.
  await deadline(
    (async () => {
      while (!states(bossSaw).includes('completed')) await new Promise((r) => setTimeout(r, 10))
    })(),
    5_000,
    'the boss hears completed',
  )
  for (const s of ['working', 'input-required', 'completed']) assert.ok(states(bossSaw).includes(s), `boss saw ${s}: ${states(bossSaw)}`)
  // The worker's callback hears the task arrive and its follow-up, which serve acted on.
  assert.ok(states(coderSaw).includes('submitted'), `coder saw submitted: ${states(coderSaw)}`)
  assert.ok(states(coderSaw).includes('working'), `coder saw the follow-up: ${states(coderSaw)}`)
  await coder.deregister()
  await deadline(serving, 5_000, 'serve stops on deregister')
  await boss.deregister()
})

test('broadcast: one task per addressable peer', async () => {
  const ctx = 'bcast'
  const lead = await broker.register({ contextId: ctx, card: { name: 'caster', kind: 'parent' } })
  const peers = []
  for (const n of ['p1', 'p2', 'p3']) peers.push(await broker.register({ contextId: `${ctx}-${n}`, card: { name: `bc-${n}`, kind: 'parent' } }))
  const tasks = await lead.send({ message: textMessage('I own src/lib.rs', { to: '*' }) })
  assert.ok(Array.isArray(tasks))
  assert.deepEqual(tasks.map((t) => t.agentName).sort(), ['bc-p1', 'bc-p2', 'bc-p3'])
  for (const p of peers) {
    const evs = await p.wait({ timeoutSeconds: 5 })
    assert.equal(evs.length, 1)
    assert.equal(textOf(evs[0].params.event.status.message), 'I own src/lib.rs')
  }
  for (const a of [lead, ...peers]) await a.deregister()
})

test('pull delivery: events through wait', async () => {
  const req = await broker.register({ contextId: 'pl-req', card: { name: 'puller-req' } })
  const wrk = await broker.register({ contextId: 'pl-wrk', card: { name: 'puller' }, delivery: 'pull' })
  assert.equal(wrk.delivery, 'pull')
  assert.deepEqual(await wrk.wait({ timeoutSeconds: 0.2 }), [])
  await req.send({ message: textMessage('one', { to: 'puller' }) })
  await req.send({ message: textMessage('two', { to: 'puller' }) })
  const got = []
  while (got.length < 2) {
    const evs = await wrk.wait({ timeoutSeconds: 5 })
    assert.ok(evs.length > 0)
    got.push(...evs)
  }
  assert.deepEqual(got.map((e) => textOf(e.params.event.status.message)), ['one', 'two'])
  await req.deregister()
  await wrk.deregister()
})

test('delegate and serve: progress, ask, artifacts, completion and failure', async () => {
  const boss = await broker.register({ contextId: 'd-boss', card: { name: 'boss' } })
  const coder = await broker.register({ contextId: 'd-coder', card: { name: 'coder' } })
  const progress = []
  boss.onEvent((ev) => progress.push(ev))
  const serving = coder.serve(async (task, turn) => {
    const ask = textOf(task.history[0])
    if (ask === 'explode') throw new Error('cannot do that')
    await turn.progress('reading')
    const answer = await turn.ask('which file?')
    await turn.artifact({ name: 'patch', parts: [{ kind: 'text', text: `patched ${textOf(answer)}` }] })
    return `done with ${textOf(answer)}`
  })
  let t = await boss.delegate({ to: 'coder', message: 'fix it', timeoutSeconds: 20 })
  assert.equal(t.status.state, 'input-required')
  assert.equal(textOf(t.status.message), 'which file?')
  t = await boss.delegate({ message: textMessage('lib.rs', { taskId: t.id }), timeoutSeconds: 20 })
  assert.equal(t.status.state, 'completed')
  assert.equal(textOf(t.status.message), 'done with lib.rs')
  assert.equal(textOf(t.artifacts[0]), 'patched lib.rs')
  assert.equal(t.artifacts[0].name, 'patch')
  assert.ok(progress.some((e) => e.params.event.kind === 'artifact-update'), 'artifact events reach onEvent')

  const failed = await boss.delegate({ to: 'coder', message: 'explode', timeoutSeconds: 20 })
  assert.equal(failed.status.state, 'failed')
  assert.equal(textOf(failed.status.message), 'cannot do that')

  await coder.deregister()
  await deadline(serving, 5_000, 'serve stops on deregister')
  await boss.deregister()
})

test('serve: a cancel aborts the turn (its ask rejects, its signal aborts)', async () => {
  const boss = await broker.register({ contextId: 'sc-boss', card: { name: 'sc-boss' } })
  const wrk = await broker.register({ contextId: 'sc-wrk', card: { name: 'sc-wrk' } })
  let turnSignal
  let askOutcome
  const asked = new Promise((resolve) => {
    wrk.serve(async (task, turn) => {
      turnSignal = turn.signal
      const p = turn.ask('need more')
      resolve()
      try {
        await p
        askOutcome = 'answered'
      } catch (e) {
        askOutcome = e.kind
      }
      return 'too late'
    })
  })
  const t = await boss.delegate({ to: 'sc-wrk', message: 'start', timeoutSeconds: 20 })
  assert.equal(t.status.state, 'input-required')
  await deadline(asked, 5_000, 'ask')
  await boss.cancel({ id: t.id })
  const until = Date.now() + 5_000
  while (askOutcome === undefined && Date.now() < until) await new Promise((r) => setTimeout(r, 10))
  assert.equal(askOutcome, 'canceled')
  assert.equal(turnSignal.aborted, true)
  const after = await boss.get({ id: t.id })
  assert.equal(after.status.state, 'canceled')
  await wrk.deregister()
  await boss.deregister()
})

test('eventRing is granted; events arrive through it', async () => {
  const { tempDir } = require('./helpers')
  const path = require('node:path')
  const { Broker } = require('..')
  const dir = tempDir()
  const b = await Broker.spawn({ db: path.join(dir, 'r.db'), socket: path.join(dir, 'r.sock'), eventRing: 1 << 20 })
  // The broker grants the ring (docs/protocol.md §1 Framing, the event ring), and names it in the
  // handshake result; events then arrive through it.
  assert.equal(b.usesEventRing, true)
  assert.notEqual(b.handshake.eventRing, undefined)
  const a = await b.register({ contextId: 'ring-a', card: { name: 'ring-a' } })
  const w = await b.register({ contextId: 'ring-w', card: { name: 'ring-w' } })
  await a.send({ message: textMessage('via ring?', { to: 'ring-w' }) })
  const evs = await w.wait({ timeoutSeconds: 5 })
  assert.equal(textOf(evs[0].params.event.status.message), 'via ring?')
  await b.close()
})

test('compact event batches decode to exactly the JSON events', async () => {
  // A context id holding the compact separator forces the JSON fallback
  // for that recipient's status events; the other side takes the S form.
  const req = await broker.register({ contextId: 'cmp\u0001req', card: { name: 'cmp-req' } })
  const wrk = await broker.register({ contextId: 'cmp-wrk', card: { name: 'cmp-wrk' } })
  const t = await req.send({ message: { role: 'user', messageId: 'cm1', to: 'cmp-wrk', parts: [{ kind: 'text', text: 'a\u0001b "quoted" ✓' }] } })
  await wrk.status({ id: t.id, state: 'working', message: textMessage('on it') })
  await wrk.artifact({ id: t.id, artifact: { artifactId: 'a1', parts: [{ kind: 'data', data: { k: [1, 2] } }] } })
  await wrk.setPush({ taskId: t.id, config: { id: 'p', token: 'tk' } })
  await wrk.status({ id: t.id, state: 'completed' })
  for (const agent of [req, wrk]) {
    // Drain what was routed, then replay the task's history twice: once
    // read as JSON straight from the addon, once through the compact path.
    while ((await agent.wait({ timeoutSeconds: 0.2 })).length > 0);
    await agent.resubscribe({ id: t.id, afterVersion: 0 })
    const viaJson = []
    for (let evs; (evs = await agent.native.wait(0.5)).length > 0; ) viaJson.push(...evs)
    await agent.resubscribe({ id: t.id, afterVersion: 0 })
    const viaCompact = []
    for (let evs; (evs = await agent.wait({ timeoutSeconds: 0.5 })).length > 0; ) viaCompact.push(...evs)
    assert.ok(viaJson.length >= 4, `replayed ${viaJson.length}`)
    assert.deepEqual(
      viaCompact.map((e) => ({ ...e, params: { ...e.params, seq: 0 } })),
      viaJson.map((e) => ({ ...e, params: { ...e.params, seq: 0 } })),
    )
  }
  await req.deregister()
  await wrk.deregister()
})

test('concurrent delegations each settle', async () => {
  const boss = await broker.register({ contextId: 'cd-boss', card: { name: 'cd-boss' } })
  const wrk = await broker.register({ contextId: 'cd-wrk', card: { name: 'cd-wrk' } })
  wrk.serve(async (task) => {
    const text = textOf(task.history[0])
    // The slow one settles after the quick one's delegation has ended.
    if (text === 'slow') await new Promise((r) => setTimeout(r, 300))
    return `did ${text}`
  })
  const [slow, quick] = await Promise.all([
    boss.delegate({ to: 'cd-wrk', message: 'slow', timeoutSeconds: 10 }),
    boss.delegate({ to: 'cd-wrk', message: 'quick', timeoutSeconds: 10 }),
  ])
  assert.equal(textOf(slow.status.message), 'did slow')
  assert.equal(textOf(quick.status.message), 'did quick')
  await wrk.deregister()
  await boss.deregister()
})
