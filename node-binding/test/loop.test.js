// Calls on the JS thread's own loop (src/calls.rs): many in flight, each
// answer to its own call; closing with calls in flight; the broker killed
// mid-call; a process or worker that ends with calls in flight ends
// cleanly (its libuv handles closed, no crash, no hang).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { textMessage } = require('..')
const { brokerBin, spawnBroker, tempDir, deadline } = require('./helpers')

/** Calls take the loop's connection here (Unix, not turned off). */
const ON_LOOP = process.platform !== 'win32' && process.env.A2A_NODE_NO_UV_CALLS !== '1'

/** Every outcome of `promises`, within `ms`. */
function settled(promises, ms, what) {
  return deadline(Promise.allSettled(promises), ms, what)
}

/** A requester with one task sent to a fresh worker. */
async function withTask(broker, tag) {
  const worker = await broker.register({ contextId: `${tag}-w`, card: { name: `${tag}-w` } })
  const requester = await broker.register({ contextId: `${tag}-r`, card: { name: `${tag}-r` } })
  const task = await requester.send({ message: textMessage(tag, { to: worker.id }) })
  return { worker, requester, task }
}

/** A call parked at the broker (a lease acquire waiting on a conflict):
 * surely in flight until the lease ends or its wait does. */
async function parkedCall(broker, tag) {
  const holder = await broker.register({ contextId: `${tag}-ctx`, card: { name: `${tag}-h` } })
  const waiter = await broker.register({ contextId: `${tag}-ctx`, card: { name: `${tag}-x` } })
  await holder.lease([`${tag}/file`], { ttlSeconds: 60 })
  return waiter.lease([`${tag}/file`], { ttlSeconds: 60, waitSeconds: 60 })
}

test('many calls in flight: each answer settles its own call, on the loop', async () => {
  const broker = await spawnBroker()
  try {
    const one = await withTask(broker, 'many-1')
    const two = await withTask(broker, 'many-2')
    // The client's connection (events, register) carries none of them:
    // the calls take the loop's connection.
    const [framesBefore] = broker.native.writeStats()
    const n = 5000
    const calls = []
    for (let i = 0; i < n; i++) {
      const x = i % 2 === 0 ? one : two
      calls.push(x.requester.get({ id: x.task.id }).then((t) => [x.task.id, t.id]))
      // An error interleaved: the broker's answer to an unknown task.
      if (i % 500 === 0) calls.push(one.requester.get({ id: 'no-such-task' }).then(() => 'resolved', (e) => e.errorCode))
    }
    const got = await deadline(Promise.all(calls), 60_000, 'calls')
    for (const g of got) {
      if (Array.isArray(g)) assert.equal(g[1], g[0], 'an answer settled another call')
      else assert.equal(g, 'A2A_UNKNOWN_TASK')
    }
    assert.equal(got.length, n + n / 500)
    const [framesAfter] = broker.native.writeStats()
    if (ON_LOOP) assert.equal(framesAfter, framesBefore, 'calls went through the client connection, not the loop')
    else assert.ok(framesAfter >= framesBefore + n, 'calls take the client connection')
  } finally {
    await broker.close()
  }
})

test('closing with calls in flight rejects every one of them with closed', async () => {
  const broker = await spawnBroker()
  try {
    const { requester, task } = await withTask(broker, 'close')
    const parked = parkedCall(broker, 'close-p')
    // Written (the turn's flush), not answered yet for the most part.
    const gets = Array.from({ length: 500 }, () => requester.get({ id: task.id }))
    await new Promise((r) => setImmediate(r))
    const lease = await Promise.race([parked.then(() => 'acquired'), new Promise((r) => setTimeout(() => r('parked'), 200))])
    assert.equal(lease, 'parked')
    const queued = Array.from({ length: 500 }, () => requester.get({ id: task.id }))
    broker.native.close()
    const outcomes = await settled([parked, ...gets, ...queued], 5_000, 'calls after close')
    let rejected = 0
    for (const o of outcomes) {
      if (o.status === 'fulfilled') continue // answered before the close
      rejected++
      assert.equal(o.reason.kind, 'closed', o.reason.message)
      assert.equal(o.reason.code, 'closed')
      assert.match(o.reason.message, /closed by this client/)
    }
    assert.equal(outcomes[0].status, 'rejected', 'the parked call rejects')
    // On the loop, the calls queued after the turn's flush never left:
    // each rejects, none is lost. (The client's connection, with
    // A2A_NODE_NO_UV_CALLS=1, sends them at once from its writer thread.)
    if (ON_LOOP) {
      assert.ok(outcomes.slice(-500).every((o) => o.status === 'rejected'))
      assert.ok(rejected >= 501)
    }
    const later = await settled([requester.get({ id: task.id })], 5_000, 'a later call')
    assert.equal(later[0].reason.kind, 'closed')
  } finally {
    await broker.close()
  }
})

test('calls in flight when the connection closes reject in the order they were made', async () => {
  const broker = await spawnBroker()
  try {
    const { requester, task } = await withTask(broker, 'order')
    const order = []
    // Queued in this turn, never written: all pending when it closes.
    const calls = Array.from({ length: 500 }, (_, i) =>
      requester.get({ id: task.id }).then(
        () => order.push(`resolved ${i}`),
        () => order.push(i),
      ),
    )
    broker.native.close()
    await settled(calls, 5_000, 'calls after close')
    assert.equal(order.length, 500)
    if (ON_LOOP) assert.deepEqual(order, [...order.keys()], 'rejected out of call order')
  } finally {
    await broker.close()
  }
})

test('answers with non-ASCII text settle exactly, beside ASCII ones in the same read', async () => {
  const broker = await spawnBroker()
  try {
    const ascii = await withTask(broker, 'ascii')
    const text = 'h\u00e9llo \u2713 \u{1F600} \u00ff\u0100 "quoted" \\ end'
    const wide = await withTask(broker, 'wide')
    const sent = await wide.requester.send({ message: textMessage(text, { to: wide.worker.id }) })
    const calls = []
    for (let i = 0; i < 400; i++) {
      calls.push(ascii.requester.get({ id: ascii.task.id }))
      calls.push(wide.requester.get({ id: sent.id }))
    }
    const got = await deadline(Promise.all(calls), 30_000, 'calls')
    for (let i = 0; i < got.length; i += 2) {
      assert.equal(got[i].id, ascii.task.id)
      assert.equal(got[i].history[0].parts[0].text, 'ascii')
      assert.equal(got[i + 1].id, sent.id)
      assert.equal(got[i + 1].history[0].parts[0].text, text)
    }
  } finally {
    await broker.close()
  }
})

test('arguments of every length around the raw entry points\' inline buffer, with a 4-byte character across its end, arrive whole', async () => {
  const broker = await spawnBroker()
  try {
    const { worker, requester } = await withTask(broker, 'lengths')
    // The message JSON's bytes reach 128 (src/rawcall.rs INLINE_STRING)
    // with the emoji at every offset around it (its text starts at byte 45).
    for (let k = 70; k < 90; k++) {
      const text = 'a'.repeat(k) + '\u{1F600}z'
      const t = await requester.send({ message: textMessage(text, { to: worker.id }) })
      const got = await requester.get({ id: t.id })
      assert.equal(got.history[0].parts[0].text, text, `length ${k}`)
    }
    // An id past the inline buffer, ending in a 4-byte character: the
    // broker's answer names it whole.
    const long = 'i'.repeat(126) + '\u{1F600}'
    const e = await requester.get({ id: long }).then(() => null, (e) => e)
    assert.equal(e.errorCode, 'A2A_UNKNOWN_TASK', e.message)
  } finally {
    await broker.close()
  }
})

test('the broker killed mid-call: every pending call rejects, saying so', async () => {
  const broker = await spawnBroker()
  try {
    const { requester, task } = await withTask(broker, 'kill')
    const parked = [parkedCall(broker, 'kill-a'), parkedCall(broker, 'kill-b')]
    await new Promise((r) => setTimeout(r, 100))
    const gets = Array.from({ length: 2000 }, () => requester.get({ id: task.id }))
    await new Promise((r) => setImmediate(r))
    broker.process.kill('SIGKILL')
    const outcomes = await settled([...parked, ...gets], 10_000, 'calls after the kill')
    assert.equal(outcomes[0].status, 'rejected')
    assert.equal(outcomes[1].status, 'rejected')
    for (const o of outcomes) {
      if (o.status === 'fulfilled') continue
      assert.equal(o.reason.kind, 'closed', o.reason.message)
      assert.match(o.reason.message, /closed by the broker/)
    }
    const later = await settled([requester.get({ id: task.id })], 5_000, 'a later call')
    assert.equal(later[0].status, 'rejected')
    assert.equal(later[0].reason.kind, 'closed')
  } finally {
    await broker.close()
  }
})

/** Runs `code` in a fresh node process; resolves with its exit. */
function runNode(code, ms) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', code], {
      cwd: path.join(__dirname, '..'),
      env: { ...process.env, A2A_BROKER_BIN: brokerBin(), DIR: tempDir() },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), ms)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, out, err })
    })
  })
}

// The child spawns its broker, registers, and leaves calls in flight.
const CHILD_SETUP = `
  const { Broker, textMessage } = require('.')
  const path = require('node:path')
  async function setup() {
    const broker = await Broker.spawn({ db: path.join(process.env.DIR, 'a.db'), socket: path.join(process.env.DIR, 's.sock') })
    const w = await broker.register({ contextId: 'w', card: { name: 'w' } })
    const r = await broker.register({ contextId: 'r', card: { name: 'r' } })
    const task = await r.send({ message: textMessage('x', { to: w.id }) })
    return { broker, r, task }
  }
`

test('process.exit with calls in flight exits cleanly', async () => {
  const res = await runNode(
    `${CHILD_SETUP}
    setup().then(async ({ r, task }) => {
      for (let i = 0; i < 1000; i++) r.get({ id: task.id }).catch(() => {})
      await new Promise((res) => setImmediate(res))
      for (let i = 0; i < 1000; i++) r.get({ id: task.id }).catch(() => {})
      console.log('exiting')
      process.exit(0)
    })`,
    30_000,
  )
  assert.equal(res.signal, null, res.err)
  assert.equal(res.code, 0, res.err)
  assert.equal(res.out.trim(), 'exiting')
})

test('a worker thread using the addon ends with calls in flight: its handles close, the process lives on', async () => {
  const res = await runNode(
    `
    const { Worker } = require('node:worker_threads')
    const w = new Worker(${JSON.stringify(`${CHILD_SETUP}
      const { parentPort } = require('node:worker_threads')
      setup().then(async ({ broker, r, task }) => {
        parentPort.postMessage(broker.process.pid)
        for (;;) {
          const batch = Array.from({ length: 256 }, () => r.get({ id: task.id }))
          await Promise.all(batch)
        }
      })`)}, { eval: true })
    w.once('message', (pid) => {
      setTimeout(async () => {
        await w.terminate()
        try { process.kill(pid, 'SIGKILL') } catch {}
        // The loop of this thread still runs: a timer fires after the end.
        setTimeout(() => { console.log('alive'); process.exit(0) }, 50)
      }, 300)
    })
    w.on('error', (e) => { console.error(e); process.exit(3) })
    `,
    30_000,
  )
  assert.equal(res.signal, null, res.err)
  assert.equal(res.code, 0, res.err)
  assert.equal(res.out.trim(), 'alive')
})
