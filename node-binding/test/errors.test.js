// Every shape a rejection takes: broker A2A errors (code 1400, errorCode,
// data), broker JSON-RPC errors, arguments the addon cannot read, and the
// client's own failures (deregistered, closed, io, timeout).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Broker, textMessage } = require('..')
const { brokerForFile, rejection, tempDir } = require('./helpers')

let broker
brokerForFile((b) => {
  broker = b
})

function assertA2A(e, errorCode) {
  assert.ok(e instanceof Error, `an Error: ${e}`)
  assert.equal(e.code, 1400, e.message)
  assert.equal(e.kind, 'rpc')
  assert.equal(e.errorCode, errorCode)
  assert.equal(e.data.errorCode, errorCode)
  assert.equal(typeof e.message, 'string')
}

test('A2A domain errors reject with code 1400 and errorCode', async () => {
  const req = await broker.register({ contextId: 'e-req', card: { name: 'err-req' } })
  const wrk = await broker.register({ contextId: 'e-wrk', card: { name: 'err-wrk' } })
  const lone = await broker.register({ contextId: 'e-lone', card: { name: 'err-lone', kind: 'parent' } })

  assertA2A(await rejection(req.get({ id: 'no-such-task' })), 'A2A_UNKNOWN_TASK')
  assertA2A(await rejection(req.send({ message: textMessage('x', { to: 'nobody-here' }) })), 'A2A_UNKNOWN_AGENT')
  assertA2A(await rejection(lone.send({ message: textMessage('x') })), 'A2A_NO_PEERS')

  const t = await req.send({ message: textMessage('job', { to: 'err-wrk' }) })
  assertA2A(await rejection(req.status({ id: t.id, state: 'working' })), 'A2A_CROSS_CONTEXT_DENIED')
  assertA2A(await rejection(lone.get({ id: t.id })), 'A2A_CROSS_CONTEXT_DENIED')
  await wrk.status({ id: t.id, state: 'working' })
  await wrk.status({ id: t.id, state: 'input-required' })
  assertA2A(await rejection(wrk.status({ id: t.id, state: 'completed' })), 'A2A_INVALID_TRANSITION')
  await wrk.status({ id: t.id, state: 'failed' })
  assertA2A(await rejection(wrk.status({ id: t.id, state: 'working' })), 'A2A_TASK_TERMINAL')

  const big = await rejection(req.send({ message: textMessage('x'.repeat(16_001), { to: 'err-wrk' }) }))
  assertA2A(big, 'A2A_PAYLOAD_TOO_LARGE')
  assert.equal(big.data.limit, 'A2A_MAX_TEXT_CHARS')

  // 128 open tasks per context (the first one is failed), then the send cap.
  const sends = []
  for (let i = 0; i < 128; i++) sends.push(req.send({ message: textMessage(`j${i}`, { to: 'err-wrk' }) }))
  await Promise.all(sends)
  const cap = await rejection(req.send({ message: textMessage('one too many', { to: 'err-wrk' }) }))
  assertA2A(cap, 'A2A_SEND_CAP')
  assert.equal(cap.data.limit, 'A2A_MAX_TASKS_PER_CONTEXT')
  for (const a of [req, wrk, lone]) await a.deregister()
})

test('JSON-RPC errors from the broker keep their code', async () => {
  const a = await broker.register({ contextId: 'j-a', card: { name: 'rpc-a' } })
  await broker.register({ contextId: 'j-b', card: { name: 'rpc-b' } })
  const badB64 = { role: 'user', messageId: 'b64', to: 'rpc-b', parts: [{ kind: 'file', file: { bytes: '!!not base64!!' } }] }
  const e = await rejection(a.send({ message: badB64 }))
  assert.equal(e.code, -32602, e.message)
  assert.equal(e.kind, 'rpc')
  assert.equal(e.errorCode, undefined)
  // The same messageId with other parts is a conflicting retry.
  await a.send({ message: textMessage('first', { to: 'rpc-b', messageId: 'dup' }) })
  const dup = await rejection(a.send({ message: textMessage('second', { to: 'rpc-b', messageId: 'dup' }) }))
  assert.equal(dup.code, -32602)
  await a.deregister()
})

test('arguments the addon cannot read reject with -32602 / invalid_params', async () => {
  const a = await broker.register({ contextId: 'i-a', card: { name: 'inv-a' } })
  for (const call of [
    () => a.send({ message: { parts: [] } }),
    () => a.status({ id: 'x', state: 'sleeping' }),
    () => a.get({ id: 'x', historyLength: -1 }),
    () => a.artifact({ id: 'x', artifact: { parts: 'no' } }),
    () => a.wait({ timeoutSeconds: -1 }),
    () => broker.register({ contextId: 'i-b', card: { description: 'no name' } }),
    () => broker.register({ contextId: 'i-c', card: { name: 'x' }, delivery: 'carrier-pigeon' }),
    // Not even a value the addon can take: still a rejection, same shape.
    () => a.send({}),
    () => a.send(),
    () => a.get({ id: 42 }),
    () => a.send({ message: { big: 1n } }),
  ]) {
    const e = await rejection(call())
    assert.equal(e.code, -32602, e.message)
    assert.equal(e.kind, 'invalid_params')
  }
  await a.deregister()
})

test('client failures: deregistered, closed, io, bad secret, delegate timeout', async () => {
  const a = await broker.register({ contextId: 'k-a', card: { name: 'kinds-a' } })
  await broker.register({ contextId: 'k-b', card: { name: 'kinds-b' } })
  // Nobody serves kinds-b: a delegation times out.
  const slow = await rejection(a.delegate({ to: 'kinds-b', message: 'hello?', timeoutSeconds: 0.3 }))
  assert.equal(slow.code, 'timeout')
  assert.equal(slow.kind, 'timeout')
  assert.equal(typeof slow.taskId, 'string')

  await a.deregister()
  assert.equal(a.deregistered, true)
  const dereg = await rejection(a.list())
  assert.equal(dereg.code, 'deregistered')
  assert.equal(dereg.kind, 'deregistered')
  const w = await rejection(a.wait({ timeoutSeconds: 1 }))
  assert.equal(w.kind, 'deregistered')

  // A second connection, closed under a pending wait and later calls.
  const dir = tempDir()
  const other = await Broker.spawn({ db: path.join(dir, 'b.db'), socket: path.join(dir, 'b.sock') })
  const x = await other.register({ contextId: 'k-x', card: { name: 'closer' } })
  const pending = rejection(x.wait({ timeoutSeconds: 30 }))
  await other.close()
  const closed = await pending
  assert.equal(closed.kind, 'closed', closed.message)
  const later = await rejection(x.list())
  assert.equal(later.code, 'closed')

  const io = await rejection(Broker.connect({ socket: path.join(dir, 'missing.sock'), secret: 's' }))
  assert.equal(io.code, 'io')
  assert.equal(io.kind, 'io')

  const third = await Broker.spawn({ db: path.join(dir, 'c.db'), socket: path.join(dir, 'c.sock') })
  const bad = await rejection(Broker.connect({ socket: path.join(dir, 'c.sock'), secret: 'wrong' }))
  assert.equal(bad.code, -32600, bad.message)
  assert.equal(bad.data.reason, 'bad secret')
  await third.close()
})
