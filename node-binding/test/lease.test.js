// `agent.lease(paths, options)`: a lease handle (renew, release, dispose),
// the conflict's rejection (kind, errorCode, data naming the holder), a
// parked acquire that the holder's release lets through, `agent.leases`,
// and the A2A tool's `lease` and `release` actions, on a real broker.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Lease } = require('..')
const { brokerForFile, deadline, rejection, typeErrors } = require('./helpers')

let broker
brokerForFile((b) => {
  broker = b
})

/** Two agents of one context (leases live in the caller's context). */
async function two(ctx) {
  const a = await broker.register({ contextId: ctx, card: { name: `${ctx}-alice` } })
  const b = await broker.register({ contextId: ctx, card: { name: `${ctx}-bob` } })
  return { a, b }
}

test('lease, conflict naming the holder, renew, list, release', async () => {
  const { a, b } = await two('lease-1')
  const lease = await a.lease(['src/parser.rs', 'docs/'], { ttlSeconds: 60, reason: 'rewrite' })
  assert.ok(lease instanceof Lease)
  assert.equal(typeof lease.id, 'string')
  assert.deepEqual(lease.paths, ['src/parser.rs', 'docs/**']) // normalised
  assert.equal(lease.holder, a.id)
  assert.equal(lease.exclusive, true)
  assert.equal(lease.reason, 'rewrite')
  assert.ok(Date.parse(lease.expiresAt) > Date.now(), lease.expiresAt)

  // docs/** overlaps docs/: refused, with who holds what.
  const e = await rejection(b.lease(['docs/**'], { ttlSeconds: 60 }))
  assert.ok(e instanceof Error)
  assert.equal(e.kind, 'rpc')
  assert.equal(e.code, 1400)
  assert.equal(e.errorCode, 'A2A_LEASE_CONFLICT')
  assert.equal(e.data.errorCode, 'A2A_LEASE_CONFLICT')
  assert.equal(e.data.holder, a.id)
  assert.equal(e.data.leaseId, lease.id)
  assert.deepEqual(e.data.paths, ['docs/**'])

  // A path nobody holds is granted beside it.
  const other = await b.lease(['src/lexer.rs'], { ttlSeconds: 60 })

  const before = Date.parse(lease.expiresAt)
  assert.equal(await lease.renew(600), lease)
  assert.ok(Date.parse(lease.expiresAt) > before, `${lease.expiresAt} after ${before}`)

  const listed = await b.leases()
  assert.deepEqual(listed.map((l) => l.id).sort(), [lease.id, other.id].sort())
  const onDocs = await b.leases({ path: 'docs/a.md' })
  assert.deepEqual(onDocs.map((l) => [l.id, l.holder]), [[lease.id, a.id]])

  await lease.release()
  assert.equal(lease.released, true)
  await lease.release() // idempotent for its holder
  const mine = await b.lease(['docs/**'], { ttlSeconds: 60 })
  assert.equal(mine.holder, b.id)
  await other.dispose()
  await mine.dispose()
  assert.deepEqual(await a.leases(), [])
  await a.deregister()
  await b.deregister()
})

test('a waiting acquire is granted when the holder disposes of its lease', async () => {
  const { a, b } = await two('lease-2')
  const held = await a.lease(['src/'], { ttlSeconds: 60 })
  const t0 = Date.now()
  const waiting = b.lease(['src/main.rs'], { ttlSeconds: 60, waitSeconds: 20 })
  await new Promise((r) => setTimeout(r, 300))
  await held.dispose()
  const got = await deadline(waiting, 20_000, 'the parked acquire')
  assert.equal(got.holder, b.id)
  assert.ok(Date.now() - t0 >= 300)
  // dispose after the broker ended the lease (deregister) is not an error
  await b.deregister()
  await got.dispose()
  assert.equal(got.released, true)
  await a.deregister()
})

test('bad lease arguments reject with invalid params and change nothing', async () => {
  const { a, b } = await two('lease-3')
  for (const [paths, opts] of [
    [[], { ttlSeconds: 60 }],
    [['../etc/passwd'], { ttlSeconds: 60 }],
    [['src/a.rs'], { ttlSeconds: 0 }],
  ]) {
    const e = await rejection(a.lease(paths, opts))
    assert.equal(e.code, -32602, `${JSON.stringify(paths)} ${JSON.stringify(opts)}: ${e.message}`)
  }
  assert.deepEqual(await b.leases(), [])
  await a.deregister()
  await b.deregister()
})

test('the A2A tool: lease, a conflict naming the holder, release', async () => {
  const { a, b } = await two('lease-4')
  const ta = a.tool()
  const tb = b.tool()
  assert.deepEqual(ta.parameters.properties.action.enum.slice(-2), ['lease', 'release'])
  const got = await ta.execute('l1', { action: 'lease', paths: ['src/parser.rs'], text: 'fix the parser' })
  assert.equal(got.details.isError, false)
  assert.deepEqual(got.details.paths, ['src/parser.rs'])
  assert.equal(got.details.exclusive, true)
  const leaseId = got.details.leaseId
  assert.match(got.content[0].text, new RegExp(`release\\(leaseId="${leaseId}"\\)`))

  const refused = await tb.execute('l2', { action: 'lease', paths: ['src/*.rs'] }).catch((e) => e)
  assert.ok(refused instanceof Error, 'a conflict is a tool error')
  assert.equal(refused.details.error.code, 'lease-conflict')
  assert.equal(refused.details.error.holder, a.id)
  assert.equal(refused.details.error.leaseId, leaseId)
  assert.match(refused.message, new RegExp(`${a.id} holds a lease on src/parser.rs`))

  const released = await ta.execute('r1', { action: 'release', leaseId })
  assert.deepEqual(
    { leaseId: released.details.leaseId, released: released.details.released },
    { leaseId, released: true },
  )
  const now = await tb.execute('l3', { action: 'lease', paths: ['src/*.rs'], exclusive: false })
  assert.equal(now.details.exclusive, false)
  await a.deregister()
  await b.deregister()
})

test('leases type-check', () => {
  assert.deepEqual(typeErrors(path.join(__dirname, 'fixtures', 'lease-usage.ts')), [])
})

// `agent.request(method, params)`: any agent method by its wire name, the
// token filled in, the whole result as the protocol writes it; so a method
// the broker's table gains is reachable from Node with no other edit.
test('request reaches any agent method by its wire name', async () => {
  const { a, b } = await two('request-1')
  const got = await a.request('a2a.leases.acquire', { paths: ['src/x.rs'], ttlSeconds: 60 })
  assert.equal(got.lease.holder, a.id)
  const renewed = await a.request('a2a.leases.renew', { leaseId: got.lease.id, ttlSeconds: 600 })
  assert.equal(renewed.lease.id, got.lease.id)
  assert.deepEqual(await b.request('a2a.leases.list'), { leases: [renewed.lease] })
  assert.deepEqual(await a.request('a2a.leases.release', { leaseId: got.lease.id }), { ok: true })
  // The typed method and the generic one agree.
  assert.deepEqual((await b.request('a2a.agents.list')).agents, await b.list())

  const unknown = await rejection(a.request('a2a.leases.steal', {}))
  assert.equal(unknown.code, -32601)
  const wrong = await rejection(a.request('a2a.leases.renew', { leaseId: 5 }))
  assert.equal(wrong.code, -32602)
  const notAnAgents = await rejection(a.request('a2a.agents.register', { contextId: 'x', card: { name: 'y' } }))
  assert.equal(notAnAgents.code, -32602)
  assert.match(notAnAgents.message, /not an agent's/)
})
