// Pacing of busy event streams (src/events.rs, `pace`): a burst arrives in
// a few large batches rather than one JS wake-up per event, nothing is lost
// or reordered, and an event after a quiet spell is not held back.
// The interval is set large here (200 ms) so that the test reads batching,
// not this machine's timing; it is read once per process, and node --test
// runs each test file in its own process.
'use strict'
process.env.A2A_NODE_EVENT_PACE_US = '200000'
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
    // ago, so deliveries are paced (at most one per 200 ms).
    const burst = 100
    await Promise.all(Array.from({ length: burst }, (_, i) => wrk.status({ id: t.id, state: 'working', message: textMessage(String(i + 1)) })))
    await until(() => seen() === burst + 1, 'the burst')
    const texts = batches.flatMap((b) => b.events.map((e) => e.params.event.status.message.parts[0].text))
    assert.deepEqual(texts, Array.from({ length: burst + 1 }, (_, i) => String(i)), 'every event once, in order')
    // 101 events in 2 to 4 deliveries: the first alone, then the burst in
    // the pacing intervals it spanned (not one wake-up per event).
    assert.ok(batches.length <= 4, `${batches.length} deliveries for ${burst + 1} events`)
    for (let i = 2; i < batches.length; i++) {
      assert.ok(batches[i].at - batches[i - 1].at >= 150, `deliveries ${i - 1} and ${i} paced`)
    }

    // After a quiet spell longer than the interval, one event is delivered
    // at once, not held for a pacing interval.
    await new Promise((r) => setTimeout(r, 400))
    const before = batches.length
    const sent = Date.now()
    await wrk.status({ id: t.id, state: 'working', message: textMessage('late') })
    await until(() => batches.length === before + 1, 'the quiet event')
    assert.ok(batches[before].at - sent < 150, `quiet event delivered after ${batches[before].at - sent} ms`)
    req.native.onEvent(null)
  } finally {
    await broker.close()
  }
})
