// The JS face of the a2a-node addon: `Broker` and `Agent` over the native
// classes (`a2a.node`, built by `npm install` from the Rust crate in this
// directory), plus what is easier to get right once, here, than in every
// sidecar: `agent.delegate`, `agent.serve`, and `Broker.spawn`.
//
// Protocol values cross the boundary as JSON text: JSON.stringify here,
// serde on the Rust side; answers are rendered to JSON off the JS thread
// and parsed by V8; events come as compact batches decoded here
// (BENCHMARKS.md "Node addon" has the measurements behind both).
'use strict'

const path = require('node:path')
const fs = require('node:fs')
const os = require('node:os')
const { spawn: spawnChild } = require('node:child_process')
const { randomUUID, randomBytes } = require('node:crypto')

function loadNative() {
  const file = process.env.A2A_NODE_ADDON || path.join(__dirname, 'a2a.node')
  try {
    return require(file)
  } catch (e) {
    e.message = `a2a-node: cannot load the addon at ${file} (run \`npm install\` or \`npm run build\` in ${__dirname}): ${e.message}`
    throw e
  }
}

const native = loadNative()

const TERMINAL = new Set(['completed', 'canceled', 'failed', 'rejected'])
const SETTLED = new Set([...TERMINAL, 'input-required', 'auth-required'])

/** An `Error` shaped like the addon's rejections (see index.d.ts `A2AError`). */
function a2aError(message, kind, extra) {
  const e = new Error(message)
  e.code = kind
  e.kind = kind
  return Object.assign(e, extra)
}

/** A message of text parts (role filled in by the broker). */
function textMessage(text, fields) {
  return { role: 'user', parts: [{ kind: 'text', text: String(text) }], messageId: randomUUID(), ...fields }
}

/** The text parts of a message, joined. */
function textOf(message) {
  if (!message || !Array.isArray(message.parts)) return ''
  return message.parts.filter((p) => p.kind === 'text').map((p) => p.text).join('')
}

// The task calls' raw entry points (src/rawcall.rs): the same native
// methods, named by the agent's slot, without napi-rs's method wrapper.
const raw = native.rawCalls ? native.rawCalls() : null

/** `fn()`, a promise; a synchronous throw becomes an invalid_params rejection. */
function guard(fn) {
  try {
    return fn()
  } catch (e) {
    return Promise.reject(a2aError(`invalid params: ${e.message}`, 'invalid_params', { code: -32602 }))
  }
}

/** Rebuilds the events of a compact batch (see src/compact.rs): the
 * same objects as the JSON form, built from literals. */
function decodeCompact(text) {
  const out = []
  if (text.length === 0) return out
  const f = text.split('\u0001')
  let i = 0
  while (i < f.length) {
    if (f[i++] === 'S') {
      const recipient = f[i++]
      const recipientContextId = f[i++]
      const contextId = f[i++]
      const seq = +f[i++]
      const taskVersion = +f[i++]
      const taskId = f[i++]
      const eventContextId = f[i++]
      const state = f[i++]
      const timestamp = f[i++]
      const final = f[i++] === '1'
      const m = f[i++]
      const status = m === '' ? { state, timestamp } : { state, message: JSON.parse(m), timestamp }
      out.push({
        method: 'a2a.task.event',
        params: {
          recipient,
          recipientContextId,
          contextId,
          seq,
          taskVersion,
          event: { kind: 'status-update', taskId, contextId: eventContextId, status, final },
        },
      })
    } else {
      out.push(JSON.parse(f[i++]))
    }
  }
  return out
}

function json(v) {
  return v === undefined || v === null ? undefined : JSON.stringify(v)
}

/** Throws `err` outside the current call, as an uncaught exception (a
 * callback's own error must not be swallowed nor stop event delivery). */
function rethrowLater(err) {
  process.nextTick(() => {
    throw err
  })
}

class Broker {
  #n
  #child = null

  /** @internal */
  constructor(nativeBroker, child) {
    this.#n = nativeBroker
    this.#child = child || null
  }

  /** `socket`: a `serve --socket` NAME or a path; `secret`: default
   * A2A_BROKER_SECRET, else the file beside the socket. */
  static async connect(options) {
    const { socket, secret, eventRing, callTimeoutSeconds } = options || {}
    const n = await guard(() => native.NativeBroker.connect({ socket, secret, eventRing, callTimeoutSeconds }))
    return new Broker(n)
  }

  static async spawn(opts) {
    return spawnBroker(opts)
  }

  get usesEventRing() {
    return this.#n.usesEventRing
  }

  get handshake() {
    return JSON.parse(this.#n.handshake)
  }

  /** The spawned broker's process (only for `Broker.spawn`). */
  get process() {
    return this.#child
  }

  async register(p) {
    const n = await guard(() => this.#n.register(p.contextId, JSON.stringify(p.card), p.delivery))
    return new Agent(n)
  }

  /** Closes the connection; a spawned broker is stopped and awaited. */
  async close() {
    this.#n.close()
    const child = this.#child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.stdin.end()
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    await exited
    clearTimeout(timer)
  }

  /** @internal (benchmarks) */
  get native() {
    return this.#n
  }
}

class Agent {
  #n
  /** User callback of `onEvent`. */
  #userCb = null
  /** Events for `wait` while the router is installed. */
  #queue = []
  /** Pending JS-side `wait`s: {resolve, reject, timer}. */
  #waiters = []
  /** Delegations waiting for their task to settle: taskId -> fn(status). */
  #delegates = new Map()
  /** `serve` state, or null. */
  #served = null
  /** Delegations in progress (each needs the router from its send on). */
  #delegating = 0
  #routing = false

  /** The agent's slot for the raw entry points (0: none). */
  #slot = 0

  /** @internal */
  constructor(nativeAgent) {
    this.#n = nativeAgent
    this.#slot = raw ? nativeAgent.callSlot : 0
    this.id = nativeAgent.id
    this.contextId = nativeAgent.contextId
    this.card = JSON.parse(nativeAgent.card)
    this.delivery = nativeAgent.delivery
  }

  /** @internal (benchmarks) */
  get native() {
    return this.#n
  }

  get deregistered() {
    return this.#n.deregistered
  }

  // Each call returns a promise and never throws: an argument that cannot
  // even be handed to the addon (missing, not serializable) rejects with
  // the same shape as one the addon refuses (-32602, invalid_params).
  send(p) {
    if (this.#slot) return guard(() => raw.send(this.#slot, JSON.stringify(p.message), json(p.configuration)))
    return guard(() => this.#n.send(JSON.stringify(p.message), json(p.configuration)))
  }
  stream(p) {
    return guard(() => this.#n.stream(JSON.stringify(p.message)))
  }
  get(p) {
    if (this.#slot) return guard(() => raw.get(this.#slot, p.id, p.historyLength))
    return guard(() => this.#n.get(p.id, p.historyLength))
  }
  status(p) {
    if (this.#slot) return guard(() => raw.status(this.#slot, p.id, p.state, json(p.message)))
    return guard(() => this.#n.status(p.id, p.state, json(p.message)))
  }
  artifact(p) {
    if (this.#slot) return guard(() => raw.artifact(this.#slot, p.id, JSON.stringify(p.artifact), p.append, p.lastChunk))
    return guard(() => this.#n.artifact(p.id, JSON.stringify(p.artifact), p.append, p.lastChunk))
  }
  cancel(p) {
    if (this.#slot) return guard(() => raw.cancel(this.#slot, p.id, json(p.message)))
    return guard(() => this.#n.cancel(p.id, json(p.message)))
  }
  resubscribe(p) {
    return guard(() => this.#n.resubscribe(p.id, p.afterVersion))
  }
  setPush(p) {
    return guard(() => this.#n.setPush(p.taskId, JSON.stringify(p.config)))
  }
  getPush(p) {
    return guard(() => this.#n.getPush(p.taskId))
  }
  list(p = {}) {
    return guard(() => this.#n.list(p.skill))
  }
  listTasks(query) {
    return guard(() => this.#n.listTasks(json(query)))
  }
  /** Any agent method by its wire name, the token filled in: the whole result. */
  request(method, params) {
    return guard(() => this.#n.request(method, json(params)))
  }

  /** `a2a.leases.acquire`: resolves with a `Lease` handle (see below);
   * a conflict rejects with `errorCode` A2A_LEASE_CONFLICT and `data`
   * `{holder, leaseId, paths}`. */
  async lease(paths, options = {}) {
    const { ttlSeconds, exclusive, reason, waitSeconds } = options
    const lease = await guard(() =>
      this.#n.leaseAcquire(JSON.stringify({ paths, ttlSeconds, exclusive, reason, waitSeconds })),
    )
    return new Lease(this.#n, lease)
  }

  /** `a2a.leases.list`: the leases live in this agent's context
   * (overlapping `path` when given), as plain objects. */
  leases(p = {}) {
    return guard(() => this.#n.leaseList(p.path))
  }

  async deregister() {
    await this.#n.deregister()
    this.#stopServing()
    this.#failWaiters()
  }

  /** The A2A tool (discover | send | get | wait | complete | cancel | lease | release) bound
   * to this agent, in the Pi agent runtime's shape (see `tool.js`). */
  tool(options = {}) {
    return makeTool(this.#n, options)
  }

  /** Events: what is queued, else the first within `timeoutSeconds`
   * (default 0) and those behind it; `[]` on timeout. */
  async wait({ timeoutSeconds = 0 } = {}) {
    if (this.#queue.length > 0) return this.#queue.splice(0)
    if (!this.#routing) return decodeCompact(await this.#n.wait(timeoutSeconds, true))
    if (this.#n.deregistered) throw a2aError(`agent ${this.id} is deregistered`, 'deregistered')
    if (!(timeoutSeconds > 0)) return []
    return new Promise((resolve, reject) => {
      const w = { resolve, reject, timer: null }
      w.timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(w), 1)
        resolve([])
      }, timeoutSeconds * 1000)
      this.#waiters.push(w)
    })
  }

  /** Calls `cb(event)` for every event from now on (events already queued
   * first), also those `delegate` and `serve` act on; `null` stops it.
   * Does not keep the process alive. */
  onEvent(cb) {
    this.#userCb = cb || null
    this.#route()
  }

  /** Sends `message` to `to` (or on its task, when `message.taskId` is
   * set) and resolves with the task once it is terminal or needs input. */
  async delegate({ to, message, timeoutSeconds = 120 }) {
    const msg = typeof message === 'string' ? textMessage(message) : { ...message }
    if (to !== undefined) msg.to = to
    if (msg.messageId === undefined) msg.messageId = randomUUID()
    this.#delegating++
    this.#route()
    try {
      let task = await this.send({ message: msg })
      if (SETTLED.has(task.status.state)) return task
      let resolveSettled
      const settled = new Promise((r) => (resolveSettled = r))
      // Registered before the `get` below: a settle event after this point
      // is seen here, one before it shows in the `get`.
      this.#delegates.set(task.id, (status) => {
        if (SETTLED.has(status.state)) resolveSettled()
      })
      let timer
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(a2aError(`task ${task.id} did not settle within ${timeoutSeconds} s`, 'timeout', { taskId: task.id })),
          timeoutSeconds * 1000,
        )
      })
      try {
        task = await this.get({ id: task.id })
        if (!SETTLED.has(task.status.state)) {
          await Promise.race([settled, timeout])
          task = await this.get({ id: task.id })
        }
        return task
      } finally {
        clearTimeout(timer)
        this.#delegates.delete(task.id)
      }
    } finally {
      this.#delegating--
      this.#route()
    }
  }

  /** Runs `handler(task, turn)` for every task addressed to this agent
   * until `deregister`; resolves then. */
  serve(handler) {
    if (this.#served) throw a2aError('this agent is already serving', 'invalid_params')
    let stop
    const stopped = new Promise((r) => (stop = r))
    this.#served = { handler, tasks: new Map(), stop }
    this.#route()
    return stopped
  }

  // ---- event routing (JS side) ----

  /** Installs the native event callback while anything needs events in
   * JS (an `onEvent` callback, `serve`, a delegation), removes it when
   * nothing does (events then queue natively for `wait`). */
  #route() {
    const want = this.#userCb !== null || this.#served !== null || this.#delegating > 0
    if (want && !this.#routing) {
      this.#routing = true
      this.#n.onEvent((batch) => this.#dispatch(decodeCompact(batch)), 'compact')
    } else if (!want && this.#routing) {
      this.#routing = false
      this.#n.onEvent(null)
    }
  }

  // An `onEvent` callback sees every event, those `serve` and `delegate`
  // act on too (else a planner's callback saw only artifacts while it
  // delegated); `wait` gets only the ones they leave.
  #dispatch(events) {
    for (const ev of events) {
      const consumed = this.#consume(ev)
      if (this.#userCb) {
        try {
          this.#userCb(ev)
        } catch (e) {
          rethrowLater(e)
        }
      } else if (!consumed) {
        this.#queue.push(ev)
      }
    }
    if (this.#queue.length > 0 && this.#waiters.length > 0) {
      const w = this.#waiters.shift()
      clearTimeout(w.timer)
      w.resolve(this.#queue.splice(0))
    }
  }

  /** Is `ev` one that `serve` or a delegation handles? */
  #consume(ev) {
    if (ev.method !== 'a2a.task.event' || ev.params.event.kind !== 'status-update') return false
    const u = ev.params.event
    const served = this.#served
    if (served) {
      const st = served.tasks.get(u.taskId)
      if (st) {
        st.onStatus(u.status)
        return true
      }
      const m = u.status.message
      if (u.status.state === 'submitted' && m && m.from !== undefined && m.from !== this.id) {
        this.#startTurn(u.taskId)
        return true
      }
    }
    const d = this.#delegates.get(u.taskId)
    if (d) {
      d(u.status)
      return true
    }
    return false
  }

  #startTurn(taskId) {
    const served = this.#served
    const ac = new AbortController()
    let answer = null
    const st = {
      onStatus: (status) => {
        if (TERMINAL.has(status.state)) {
          ac.abort(a2aError(`task ${taskId} is ${status.state}`, status.state))
          if (answer) answer.reject(ac.signal.reason)
          answer = null
        } else if (answer && status.message && status.message.from !== this.id) {
          answer.resolve(status.message)
          answer = null
        }
      },
    }
    served.tasks.set(taskId, st)
    const agentMessage = (m) => (typeof m === 'string' ? textMessage(m, { role: 'agent' }) : { role: 'agent', messageId: randomUUID(), ...m })
    const turn = {
      taskId,
      signal: ac.signal,
      progress: (m) => this.status({ id: taskId, state: 'working', message: agentMessage(m) }),
      artifact: (artifact, opts = {}) =>
        this.artifact({ id: taskId, artifact: { artifactId: randomUUID(), ...artifact }, ...opts }),
      ask: async (m) => {
        if (ac.signal.aborted) throw ac.signal.reason
        const reply = new Promise((resolve, reject) => (answer = { resolve, reject }))
        await this.status({ id: taskId, state: 'input-required', message: agentMessage(m) })
        return reply
      },
    }
    const run = async () => {
      const task = await this.get({ id: taskId })
      if (task.agentName !== this.id) return
      await this.status({ id: taskId, state: 'working' })
      let result
      try {
        result = await served.handler(task, turn)
      } catch (e) {
        if (ac.signal.aborted) return
        const text = e && e.message !== undefined ? e.message : String(e)
        await this.status({ id: taskId, state: 'failed', message: agentMessage(text) })
        return
      }
      if (ac.signal.aborted) return
      await this.status({
        id: taskId,
        state: 'completed',
        message: result === undefined || result === null ? undefined : agentMessage(result),
      })
    }
    run()
      .catch((e) => {
        // A task moved away under us (canceled, agent gone): nothing to
        // report to; anything else is the embedder's to see.
        if (!(e && (e.errorCode === 'A2A_TASK_TERMINAL' || e.kind === 'deregistered' || e.kind === 'closed'))) rethrowLater(e)
      })
      .finally(() => served.tasks.delete(taskId))
  }

  #stopServing() {
    const served = this.#served
    if (!served) return
    this.#served = null
    for (const st of served.tasks.values()) st.onStatus({ state: 'failed' })
    served.stop()
    this.#route()
  }

  #failWaiters() {
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer)
      w.reject(a2aError(`agent ${this.id} is deregistered`, 'deregistered'))
    }
  }
}

/**
 * A lease this agent holds (`agent.lease`): its fields as the broker
 * answered, `renew` and `release`, and `dispose` (also
 * `Symbol.asyncDispose` where the runtime has it, for `await using`),
 * which releases it and ignores a lease already gone. The broker ends it
 * anyway at its TTL, on deregister, or when the connection closes.
 */
class Lease {
  #n
  #released = false

  /** @internal */
  constructor(nativeAgent, lease) {
    this.#n = nativeAgent
    this.#set(lease)
  }

  #set(lease) {
    this.id = lease.id
    this.paths = lease.paths
    this.holder = lease.holder
    this.exclusive = lease.exclusive
    this.expiresAt = lease.expiresAt
    if (lease.reason !== undefined) this.reason = lease.reason
  }

  get released() {
    return this.#released
  }

  /** `a2a.leases.renew`: a new TTL from now; resolves with this handle. */
  async renew(ttlSeconds) {
    const lease = await guard(() => this.#n.leaseRenew(this.id, ttlSeconds))
    this.#set(lease)
    return this
  }

  /** `a2a.leases.release` (idempotent for its holder). */
  async release() {
    await guard(() => this.#n.leaseRelease(this.id))
    this.#released = true
  }

  /** Releases unless already released; a lease the broker already ended
   * (expired, agent deregistered, connection closed) is not an error. */
  async dispose() {
    if (this.#released) return
    try {
      await this.release()
    } catch (e) {
      if (!(e && (e.kind === 'deregistered' || e.kind === 'closed' || e.errorCode !== undefined))) throw e
      this.#released = true
    }
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Lease.prototype[Symbol.asyncDispose] = Lease.prototype.dispose
}

// ---- Broker.spawn ----

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue
    const p = path.join(dir, name)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return p
    } catch {}
  }
  return null
}

/** The broker binary: `bin`, else $A2A_BROKER_BIN, else next to the
 * addon, else on PATH. */
function findBroker(bin) {
  const candidates = [bin, process.env.A2A_BROKER_BIN, path.join(__dirname, 'a2a-broker')]
  for (const c of candidates) {
    if (c && fs.existsSync(c)) return c
  }
  const p = onPath('a2a-broker')
  if (p) return p
  throw a2aError('a2a-broker not found: pass `bin`, set A2A_BROKER_BIN, or put it on PATH', 'io')
}

async function spawnBroker({ db, socket, bin, readyTimeoutSeconds = 30, eventRing } = {}) {
  if (!db) throw a2aError('Broker.spawn needs `db` (the SQLite file)', 'invalid_params')
  const exe = findBroker(bin)
  if (!socket) socket = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'a2a-')), 'broker.sock')
  const secret = randomBytes(32).toString('hex')
  // stdin stays a pipe we never write: the broker exits when it closes,
  // that is, when this process exits however it exits.
  const child = spawnChild(exe, ['serve', '--db', db, '--socket', socket], {
    env: { ...process.env, A2A_BROKER_SECRET: secret },
    stdio: ['pipe', 'ignore', 'pipe'],
  })
  const ready = await new Promise((resolve, reject) => {
    let buf = ''
    const timer = setTimeout(() => finish(a2aError(`a2a-broker gave no ready line within ${readyTimeoutSeconds} s`, 'timeout')), readyTimeoutSeconds * 1000)
    const onData = (chunk) => {
      buf += chunk
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        try {
          const v = JSON.parse(line)
          if (v && v.ready === true) return finish(null, v)
        } catch {}
      }
    }
    const onExit = (code, signal) =>
      finish(a2aError(`a2a-broker exited before it was ready (${signal || code}): ${buf.trim()}`, 'io'))
    const onError = (e) => finish(a2aError(`cannot start a2a-broker: ${e.message}`, 'io'))
    function finish(err, v) {
      clearTimeout(timer)
      child.stderr.off('data', onData)
      child.off('exit', onExit)
      child.off('error', onError)
      if (err) {
        child.kill('SIGKILL')
        reject(err)
      } else resolve(v)
    }
    child.stderr.setEncoding('utf8')
    child.stderr.on('data', onData)
    child.once('exit', onExit)
    child.once('error', onError)
  })
  // Keep draining stderr (a full pipe would stall the broker), but let
  // none of the child's handles keep this process alive.
  child.stderr.resume()
  child.stderr.unref()
  child.stdin.unref()
  child.unref()
  const n = await native.NativeBroker.connect({ socket: ready.socket || socket, secret, eventRing })
  return new Broker(n, child)
}

const { makeTool } = require('./tool')(native)

module.exports = { Broker, Agent, Lease, textMessage, textOf, TERMINAL_STATES: TERMINAL, decodeCompact }
