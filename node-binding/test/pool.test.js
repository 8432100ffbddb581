// No call occupies a libuv thread-pool thread while it waits for the
// broker: with 1,000 sends and 64 waits in flight, fs.promises.readFile
// (which needs the pool, 4 threads by default) still completes promptly.
// Were each wait holding a pool thread, reads would stall until the waits
// time out (60 s); so the reads must finish while every wait is still
// pending, and their time is compared with the same reads unloaded in
// this run. The ratio is generous (1,000x): each read hops between the
// pool and the JS thread, which is busy settling the 1,000 answers
// meanwhile (more so in a debug build, on 2 shared cores: 30-80x seen);
// a stalled pool would give at least the 60 s wait timeout over the
// unloaded reads (thousands of x), and the reads' 20 s deadline fails
// first.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { textMessage } = require('..')
const { spawnBroker, deadline, tempDir } = require('./helpers')

const READS = 40

async function timeReads(file) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < READS; i++) await fs.promises.readFile(file)
  return Number(process.hrtime.bigint() - t0) / 1e6
}

test('1,000 sends and 64 waits in flight leave the libuv pool free', async () => {
  const broker = await deadline(spawnBroker(), 900_000, 'spawn broker')
  const file = path.join(tempDir(), 'payload.bin')
  fs.writeFileSync(file, Buffer.alloc(64 * 1024, 7))

  // 10 requesters, each with one task on a worker, so 1,000 sends stay
  // inside the per-registration and per-task bounds (100 each).
  const worker = await broker.register({ contextId: 'pool-w', card: { name: 'pool-worker' } })
  const reqs = []
  const tasks = []
  for (let i = 0; i < 10; i++) {
    const r = await broker.register({ contextId: `pool-r${i}`, card: { name: `pool-req-${i}` } })
    reqs.push(r)
    tasks.push(await r.send({ message: textMessage('open', { to: 'pool-worker' }) }))
  }
  const idle = []
  for (let i = 0; i < 8; i++) idle.push(await broker.register({ contextId: `pool-i${i}`, card: { name: `pool-idle-${i}` } }))

  await timeReads(file) // warm up
  const unloaded = await timeReads(file)

  // 64 waits that nothing will answer for 60 s ...
  let waitsSettled = 0
  const waits = []
  for (let i = 0; i < 64; i++) {
    waits.push(
      idle[i % idle.length]
        .wait({ timeoutSeconds: 60 })
        .then(
          () => 'resolved',
          (e) => e.kind,
        )
        .finally(() => waitsSettled++),
    )
  }
  // ... and 1,000 sends, all submitted before the first read.
  let sendsSettled = 0
  const sends = []
  for (let i = 0; i < 1000; i++) {
    const r = reqs[i % 10]
    const t = tasks[i % 10]
    // historyLength 0: answers without the task's growing history.
    const configuration = { historyLength: 0 }
    sends.push(r.send({ message: textMessage(`m${i}`, { taskId: t.id }), configuration }).finally(() => sendsSettled++))
  }
  const loaded = await deadline(timeReads(file), 20_000, 'reads under load')
  const sendsAtReadsEnd = sendsSettled
  assert.equal(waitsSettled, 0, 'every wait is still in flight when the reads are done')

  const results = await deadline(Promise.allSettled(sends), 60_000, 'sends')
  const failed = results.filter((r) => r.status === 'rejected')
  assert.equal(failed.length, 0, failed[0] && String(failed[0].reason))
  const ratio = loaded / unloaded
  console.log(
    `# ${READS} readFile: unloaded ${unloaded.toFixed(2)} ms, loaded ${loaded.toFixed(2)} ms (x${ratio.toFixed(1)}); sends settled when the reads ended: ${sendsAtReadsEnd}/1000`,
  )
  assert.ok(ratio < 1000, `reads slowed x${ratio.toFixed(1)} under load`)

  // Deregistering ends the waits at once (no 60 s wait for the test).
  for (const a of idle) await a.deregister()
  const kinds = await deadline(Promise.all(waits), 10_000, 'waits end')
  assert.deepEqual([...new Set(kinds)], ['deregistered'])
  await broker.close()
})
