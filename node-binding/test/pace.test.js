// Pacing of busy event streams (src/events.rs, `pace`): a burst arrives in
// a few large batches rather than one JS wake-up per event, nothing is lost
// or reordered, and an event after a quiet spell is not held back.
// The interval is set large here (300 ms) so that the test reads batching,
// not this machine's timing; it is read once per process, and node --test
// runs each test file in its own process.
'use strict'
process.env.A2A_NODE_EVENT_PACE_US = '300000'
const INTERVAL_MS = 300
const test = require('node:test')
const assert = require('node:assert/strict')
const { textMessage, decodeCompact } = require('..')
const { spawnBroker, deadline } = require('./helpers')

test('a busy stream is paced into few batches, in order, and a quiet event goes at once', async () => {
  const broker = await spawnBroker()
  try {
    const req = await broker.register({ contextId: 'pace-req', card: { name: 'pace-req' } })
    const wrk = await broker.register({ contextId: 'pace-wrk', card: { name: 'pace-wrk' } })
    const t = await req.send({ message: textMessage('go', { to: 'pace-wrk' }) })
    const batches = []
    let waiting = null
    req.native.onEvent((b) => {
      batches.push({ at: Date.now(), events: decodeCompact(b) })
      if (waiting) waiting()
    }, 'compact')
    const until = (pred, what) =>
      deadline(
        new Promise((resolve) => {
          const check = () => (pred() ? resolve() : (waiting = check))
          check()
        }),
        20_000,
        what,
      )
    const seen = () => batches.reduce((n, b) => n + b.events.length, 0)

    // One event opens the stream: nothing was delivered before, so it goes
    // at once.
    await wrk.status({ id: t.id, state: 'working', message: textMessage('0') })
    await until(() => seen() === 1, 'first event')

    // A burst of 100 right behind it: the JS thread took a batch moments
    // ago, so deliveries are paced (at most one per interval).
    const burst = 100
    await Promise.all(Array.from({ length: burst }, (_, i) => wrk.status({ id: t.id, state: 'working', message: textMessage(String(i + 1)) })))
    await until(() => seen() === burst + 1, 'the burst')
    const texts = batches.flatMap((b) => b.events.map((e) => e.params.event.status.message.parts[0].text))
    assert.deepEqual(texts, Array.from({ length: burst + 1 }, (_, i) => String(i)), 'every event once, in order')
    // Deliveries at least an interval apart (timers may fire a little
    // early), so the burst takes a few deliveries, not one per event.
    for (let i = 1; i < batches.length; i++) {
      const gap = batches[i].at - batches[i - 1].at
      assert.ok(gap >= INTERVAL_MS * 0.8, `deliveries ${i - 1} and ${i} only ${gap} ms apart`)
    }
    assert.ok(batches.length < 20, `${batches.length} deliveries for ${burst + 1} events`)

    // After a quiet spell longer than the interval, one event is delivered
    // at once, not held for a pacing interval.
    await new Promise((r) => setTimeout(r, 2 * INTERVAL_MS))
    const before = batches.length
    const sent = Date.now()
    await wrk.status({ id: t.id, state: 'working', message: textMessage('late') })
    await until(() => batches.length === before + 1, 'the quiet event')
    // Held for an interval, it would take 300 ms or more.
    assert.ok(batches[before].at - sent < INTERVAL_MS * 0.8, `quiet event delivered after ${batches[before].at - sent} ms`)
    req.native.onEvent(null)
  } finally {
    await broker.close()
  }
})
