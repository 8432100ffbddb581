// Node addon vs NDJSON in the same Node process, one run, one broker:
// calls/s and events/s, and the JS (main) thread's CPU time per call and
// per event, read from /proc/self/task/<pid>/schedstat (nanoseconds on
// CPU of that thread alone). The NDJSON baseline is what a sidecar would
// write without the addon: net.Socket, JSON.stringify per request (writes
// corked per tick), split on '\n', JSON.parse per line.
//
// Events come from a producer in a child process (bench/producer.js), so
// the receiver's main thread only receives. Event modes of the addon:
//   onEvent          the public API (compact batches decoded by index.js,
//                    dispatched by its router)
//   native compact   compact batches straight from the native callback,
//                    decoded with index.js's decodeCompact
//   native json      one JSON array per batch, parsed by V8
//   native objects   events built as JS objects through napi
//   wait             `await agent.wait()` in a loop (one compact batch per call)
//
// BUSY=N runs N busy loops (child processes spinning `for (;;) {}`) during
// the calls rounds, one per core on a 2-core machine with BUSY=2: the
// addon's calls against NDJSON when every core has other work.
//
// Usage: node bench/bench.js   (env: CALLS, EVENTS, ROUNDS, BUSY,
// A2A_BROKER_BIN; A2A_NODE_ADDON=path runs another build of the addon)
'use strict'
const fs = require('node:fs')
const os = require('node:os')
const net = require('node:net')
const path = require('node:path')
const readline = require('node:readline')
const { spawn, execFileSync } = require('node:child_process')
const { randomBytes, randomUUID } = require('node:crypto')
const { Broker, textMessage, decodeCompact } = require('..')

const CALLS = Number(process.env.CALLS || 20000)
const EVENTS = Number(process.env.EVENTS || 20000)
const ROUNDS = Number(process.env.ROUNDS || 3)
const BUSY = Number(process.env.BUSY || 0)
const WINDOW = 256
const TASKS = 10

function threadCpuNs() {
  return Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0])
}

function brokerBin() {
  if (process.env.A2A_BROKER_BIN) return process.env.A2A_BROKER_BIN
  const root = path.join(__dirname, '..', '..')
  execFileSync('cargo', ['build', '--release', '-p', 'a2a-broker', '--bin', 'a2a-broker'], { cwd: root, stdio: 'inherit' })
  const meta = JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 }))
  return path.join(meta.target_directory, 'release', 'a2a-broker')
}

/** A minimal NDJSON JSON-RPC client: the baseline. */
class Ndjson {
  constructor(sock) {
    this.s = sock
    this.buf = ''
    this.pending = new Map()
    this.nextId = 1
    this.onNotify = null
    this.corked = false
    sock.setEncoding('utf8')
    sock.on('data', (d) => {
      this.buf += d
      let start = 0
      let i
      while ((i = this.buf.indexOf('\n', start)) >= 0) {
        const line = this.buf.slice(start, i)
        start = i + 1
        if (line.length > 0) this.handle(JSON.parse(line))
      }
      this.buf = start === this.buf.length ? '' : this.buf.slice(start)
    })
  }
  static connect(socket) {
    return new Promise((resolve, reject) => {
      const s = net.createConnection(socket, () => resolve(new Ndjson(s)))
      s.once('error', reject)
    })
  }
  handle(m) {
    if (m.id !== undefined && m.id !== null) {
      const p = this.pending.get(m.id)
      this.pending.delete(m.id)
      if (m.error) p.reject(Object.assign(new Error(m.error.message), m.error))
      else p.resolve(m.result)
    } else if (m.method && this.onNotify) this.onNotify(m)
  }
  call(method, params) {
    const id = this.nextId++
    if (!this.corked) {
      this.corked = true
      this.s.cork()
      process.nextTick(() => {
        this.corked = false
        this.s.uncork()
      })
    }
    this.s.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n')
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }))
  }
  close() {
    this.s.destroy()
  }
}

async function startBroker(bin, dir, secret) {
  const socket = path.join(dir, 'bench.sock')
  const child = spawn(bin, ['serve', '--db', path.join(dir, 'bench.db'), '--socket', socket, '--durability', 'normal'], {
    env: { ...process.env, A2A_BROKER_SECRET: secret },
    stdio: ['pipe', 'ignore', 'pipe'],
  })
  const rl = readline.createInterface({ input: child.stderr })
  for await (const line of rl) {
    if (line.includes('"ready":true')) break
  }
  child.stderr.resume()
  return { child, socket }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

async function measure(fn) {
  const c0 = threadCpuNs()
  const t0 = process.hrtime.bigint()
  const n = await fn()
  const wall = Number(process.hrtime.bigint() - t0) / 1e9
  const cpu = threadCpuNs() - c0
  return { perSec: n / wall, cpuNsPer: cpu / n }
}

async function main() {
  const bin = brokerBin()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'a2a-node-bench-'))
  const secret = randomBytes(32).toString('hex')
  const { child, socket } = await startBroker(bin, dir, secret)
  const broker = await Broker.connect({ socket, secret })
  const nd = await Ndjson.connect(socket)
  await nd.call('app.handshake', { protocolVersion: 10, secret })

  const producer = spawn(process.execPath, [path.join(__dirname, 'producer.js'), socket, secret], { stdio: ['pipe', 'pipe', 'inherit'] })
  const prodLines = readline.createInterface({ input: producer.stdout })[Symbol.asyncIterator]()
  const ask = async (cmd) => {
    producer.stdin.write(JSON.stringify(cmd) + '\n')
    return JSON.parse((await prodLines.next()).value)
  }

  // ---- calls: a2a.tasks.get of one task, WINDOW in flight ----
  const target = await broker.register({ contextId: 'bench-target', card: { name: 'bench-target' } })
  const addonAgent = await broker.register({ contextId: 'bench-calls-a', card: { name: 'bench-calls-a' } })
  const addonTask = await addonAgent.send({ message: textMessage('x', { to: 'bench-target' }) })
  const ndReg = await nd.call('a2a.agents.register', { contextId: 'bench-calls-n', card: { name: 'bench-calls-n' } })
  const ndTask = (await nd.call('a2a.message.send', { token: ndReg.token, message: textMessage('x', { to: 'bench-target' }) })).task

  const lanes = (n, call) => {
    let left = n
    const lane = async () => {
      while (left-- > 0) {
        const t = await call()
        if (t.status.state === undefined) throw new Error('bad answer')
      }
    }
    return Promise.all(Array.from({ length: WINDOW }, lane)).then(() => n)
  }
  const callModes = {
    addon: () => lanes(CALLS, () => addonAgent.get({ id: addonTask.id })),
    ndjson: () => lanes(CALLS, () => nd.call('a2a.tasks.get', { token: ndReg.token, id: ndTask.id }).then((r) => r.task)),
  }
  const callResults = { addon: [], ndjson: [] }
  const busy = Array.from({ length: CALLS > 0 ? BUSY : 0 }, () =>
    spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
  )
  for (let r = 0; r <= (CALLS > 0 ? ROUNDS : -1); r++) {
    for (const [name, fn] of Object.entries(callModes)) {
      const m = await measure(fn)
      if (r > 0) callResults[name].push(m) // round 0 warms up
    }
  }
  for (const b of busy) b.kill('SIGKILL')

  // ---- events: the producer's status updates to the receiver ----
  let round = 0
  async function eventsRound(mode) {
    round++
    const name = `bench-rx-${round}`
    const { registered: prod } = await ask({ register: `bench-prod-${round}` })
    let seen = 0
    let batches = 0
    let resolveAll
    const all = new Promise((r) => (resolveAll = r))
    const count = (ev) => {
      if (ev.params.event.status.state !== undefined) seen++
      if (seen === EVENTS) resolveAll()
    }
    let taskIds = []
    let finish = async () => {}
    let pump = null
    if (mode === 'ndjson') {
      const reg = await nd.call('a2a.agents.register', { contextId: name, card: { name } })
      for (let i = 0; i < TASKS; i++) taskIds.push((await nd.call('a2a.message.send', { token: reg.token, message: textMessage('go', { to: prod }) })).task.id)
      nd.onNotify = (m) => {
        if (m.method === 'a2a.task.event' && m.params.recipient === name) count(m)
      }
      finish = async () => {
        nd.onNotify = null
        await nd.call('a2a.agents.deregister', { token: reg.token })
      }
    } else {
      const rx = await broker.register({ contextId: name, card: { name } })
      for (let i = 0; i < TASKS; i++) taskIds.push((await rx.send({ message: textMessage('go', { to: prod }) })).id)
      if (mode === 'onEvent') rx.onEvent(count)
      else if (mode === 'native json') rx.native.onEvent((evs) => evs.forEach(count), 'json')
      else if (mode === 'native compact')
        rx.native.onEvent((b) => {
          batches++
          decodeCompact(b).forEach(count)
        }, 'compact')
      else if (mode === 'native objects') rx.native.onEvent((evs) => evs.forEach(count), 'objects')
      else if (mode === 'wait') {
        pump = (async () => {
          while (seen < EVENTS) for (const ev of await rx.wait({ timeoutSeconds: 10 })) count(ev)
        })()
      }
      finish = async () => {
        rx.native.onEvent(null)
        await rx.deregister()
      }
    }
    const m = await measure(async () => {
      const done = ask({ run: taskIds, perTask: EVENTS / TASKS, window: WINDOW })
      await all
      await done
      if (pump) await pump
      return EVENTS
    })
    await finish()
    if (batches > 0) m.perBatch = EVENTS / batches
    return m
  }
  const eventModes = process.env.EVENT_MODES ? process.env.EVENT_MODES.split(',') : ['ndjson', 'onEvent', 'native compact', 'native json', 'native objects', 'wait']
  const evResults = Object.fromEntries(eventModes.map((m) => [m, []]))
  for (let r = 0; r <= (EVENTS > 0 ? ROUNDS : -1); r++) {
    for (const mode of eventModes) {
      const m = await eventsRound(mode)
      if (r > 0) evResults[mode].push(m)
    }
  }

  producer.stdin.end()
  nd.close()
  await broker.close()
  child.stdin.end()

  const row = (name, ms, base) => {
    const perSec = median(ms.map((m) => m.perSec))
    const cpu = median(ms.map((m) => m.cpuNsPer))
    const b = base && { perSec: median(base.map((m) => m.perSec)), cpu: median(base.map((m) => m.cpuNsPer)) }
    const ratio = b ? ` | ${(perSec / b.perSec).toFixed(2)}x | ${(b.cpu / cpu).toFixed(2)}x lower` : ' | 1.00x | 1.00x'
    return `| ${name} | ${Math.round(perSec)} | ${(cpu / 1000).toFixed(2)}${ratio} |`
  }
  if (CALLS > 0)
    console.log(`\ncalls: a2a.tasks.get, ${CALLS} per round, ${WINDOW} in flight; median of ${ROUNDS} rounds; ${BUSY} busy loops running`)
  if (CALLS > 0) {
    console.log('| path | calls/s | main-thread CPU µs/call | calls/s vs NDJSON | CPU/call vs NDJSON |')
    console.log('|---|---|---|---|---|')
    console.log(row('NDJSON (net + JSON)', callResults.ndjson))
    console.log(row('addon', callResults.addon, callResults.ndjson))
  }
  if (EVENTS > 0) printEvents()
  console.log(`\nnode ${process.version}, ${os.cpus().length} cpus, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`)
  function printEvents() {
  console.log(`\nevents: status-update events, ${EVENTS} per round from a producer process; median of ${ROUNDS} rounds`)
  console.log('| path | events/s | main-thread CPU µs/event | events/s vs NDJSON | CPU/event vs NDJSON |')
  console.log('|---|---|---|---|---|')
  const base = evResults.ndjson
  for (const m of eventModes) {
    if (m === 'ndjson') console.log(row('NDJSON (net + JSON.parse per line)', base))
    else console.log(row(`addon ${m}`, evResults[m], base))
  }
  for (const m of eventModes) {
    const b = evResults[m].filter((x) => x.perBatch).map((x) => x.perBatch)
    if (b.length > 0) console.log(`${m}: ${median(b).toFixed(1)} events per callback (median)`)
  }
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
