// `Broker.connect` finds a running broker as every front end does: a
// `serve --socket` NAME or a path, the secret from the file beside the
// socket when none is given; and says "no broker there" apart from "wrong
// secret". Every rejection has a `kind`.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { Broker } = require('..')
const { brokerBin, deadline, rejection, tempDir } = require('./helpers')

const dir = tempDir()
const xdg = path.join(dir, 'xdg')
let child

test.before(async () => {
  // The addon reads XDG_RUNTIME_DIR from this process's environment.
  process.env.XDG_RUNTIME_DIR = xdg
  delete process.env.A2A_BROKER_SECRET
  const env = { ...process.env }
  child = spawn(brokerBin(), ['serve', '--db', path.join(dir, 'a2a.db'), '--socket', 'main', '--no-stdio'], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  await deadline(
    new Promise((resolve, reject) => {
      let buf = ''
      child.stderr.on('data', (d) => {
        buf += d
        if (buf.includes('"ready":true')) resolve()
      })
      child.once('exit', (c) => reject(new Error(`broker exited (${c}): ${buf}`)))
    }),
    60_000,
    'broker ready',
  )
})

test.after(() => {
  child.kill('SIGTERM')
})

test('a NAME and a path both reach the broker, the secret read from its file', async () => {
  for (const socket of ['main', path.join(xdg, 'a2a-broker', 'main.sock')]) {
    const b = await Broker.connect({ socket })
    const a = await b.register({ contextId: 'c', card: { name: 'conn-test' } })
    assert.equal(a.id, 'conn-test')
    await b.close()
  }
})

test('no broker there is said as such, with kind', async () => {
  const e = await rejection(Broker.connect({ socket: 'nothing' }))
  const sock = path.join(xdg, 'a2a-broker', 'nothing.sock')
  assert.equal(
    e.message,
    `no broker is listening at ${sock} (from nothing): start one with \`a2a-broker serve --socket nothing\``,
  )
  assert.equal(e.kind, 'io')
})

test('a wrong secret is blamed on the secret, with kind', async () => {
  const e = await rejection(Broker.connect({ socket: 'main', secret: 'wrong' }))
  assert.match(e.message, /refused the secret given: it is not that broker's secret/)
  assert.equal(e.kind, 'rpc')
})

test('missing options reject with kind invalid_params', async () => {
  for (const p of [Broker.connect({}), Broker.connect()]) {
    const e = await rejection(p)
    assert.equal(e.kind, 'invalid_params', e.message)
  }
})
